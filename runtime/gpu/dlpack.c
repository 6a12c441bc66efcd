/* dlpack.c - the generic call with DLPack tensors (jitk_op_call_dlpack):
 * each DLTensor becomes a jitk_tensor on the stack, then jitk_op_call.
 *
 * The header is DLPack's own (Debian's libdlpack-dev, version 0.6); the
 * one struct used, DLTensor, has the same layout in every version up to
 * 1.x, which wraps it in DLManagedTensorVersioned. */
#include <dlpack/dlpack.h>
#include <string.h>

#include "gpu/runtime.h"

/* DLPack's dtype codes are jitk's (jitk_dtype); the ones jitk.h names
 * are checked against the header here. */
_Static_assert(kDLInt == 0 && kDLUInt == 1 && kDLFloat == 2 && kDLBfloat == 4,
	       "DLPack's type codes are jitk_dtype's");

/* t from d (argument name for the messages). */
static int from_dlpack(jitk_tensor *t, const DLTensor *d, const jitk_op *op, const char *name)
{
	const char *sym = op->sym->name;
	int64_t stride = 1;
	int32_t i;

	if (d->device.device_type != kDLCUDA && d->device.device_type != kDLCUDAManaged)
		return jitk__error(JITK_EINVAL, "%s: %s: a DLPack tensor on device type %d, not "
				   "CUDA (nothing launched)", sym, name, (int)d->device.device_type);
	if (d->device.device_id != op->rt->device)
		return jitk__error(JITK_EINVAL, "%s: %s is on CUDA device %d, not device %d "
				   "(nothing launched)", sym, name, (int)d->device.device_id,
				   op->rt->device);
	if (d->ndim < 0 || d->ndim > JITK_MAX_DIMS)
		return jitk__error(JITK_EINVAL, "%s: %s has %d dimensions; jitk takes 0 to %d "
				   "(nothing launched)", sym, name, (int)d->ndim, JITK_MAX_DIMS);
	if (d->ndim && !d->shape)
		return jitk__error(JITK_EINVAL, "%s: %s: the DLPack tensor has no shape "
				   "(nothing launched)", sym, name);
	if (d->dtype.lanes != 1)
		return jitk__error(JITK_EINVAL, "%s: %s has %u lanes; jitk takes 1 (nothing launched)",
				   sym, name, (unsigned)d->dtype.lanes);
	if ((uint64_t)(uintptr_t)d->data > UINT64_MAX - d->byte_offset)
		return jitk__error(JITK_EINVAL, "%s: %s: data + byte_offset overflows "
				   "(nothing launched)", sym, name);
	memset(t, 0, sizeof(*t));
	t->data = (jitk_devptr)(uintptr_t)d->data + d->byte_offset;
	t->dtype.code = d->dtype.code;
	t->dtype.bits = d->dtype.bits;
	t->dtype.lanes = 1;
	t->ndim = d->ndim;
	for (i = d->ndim; i-- > 0;) {
		t->shape[i] = d->shape[i];
		t->strides[i] = d->strides ? d->strides[i] : stride;
		/* (a compact tensor's strides; the call checks the extent) */
		if (!d->strides && __builtin_mul_overflow(stride, d->shape[i] > 0 ? d->shape[i] : 1,
							  &stride))
			return jitk__error(JITK_EINVAL, "%s: %s: its number of elements overflows "
					   "64 bits (nothing launched)", sym, name);
	}
	return JITK_OK;
}

int jitk_op_call_dlpack(jitk_call_info *out, jitk_op *op, jitk_call_mode mode, const jitk_arg *args,
			size_t nargs, jitk_stream stream)
{
	jitk_arg conv[JITK_MAX_SPEC_ARGS];
	jitk_tensor tensors[JITK_MAX_SPEC_ARGS];
	size_t i;
	int rc;

	if ((rc = jitk__call_info_clear(out)))
		return rc;
	if (!op || (nargs && !args))
		return jitk__error(JITK_EINVAL, "jitk_op_call_dlpack: %s is NULL", op ? "args" : "op");
	if (nargs > JITK_MAX_SPEC_ARGS)
		return jitk__error(JITK_EINVAL, "%s: %zu arguments is more than any symbol takes",
				   op->sym->name, nargs);
	for (i = 0; i < nargs; i++) {
		conv[i] = args[i];
		if (args[i].type != JITK_ARG_DLPACK)
			continue;
		if (!args[i].name)
			return jitk__error(JITK_EINVAL, "%s: argument %zu has no name (nothing launched)",
					   op->sym->name, i);
		if (!args[i].v.dlpack)
			return jitk__error(JITK_EINVAL, "%s: argument %s: the DLPack tensor pointer is "
					   "NULL (nothing launched)", op->sym->name, args[i].name);
		if ((rc = from_dlpack(&tensors[i], args[i].v.dlpack, op, args[i].name)))
			return rc;
		conv[i].type = JITK_ARG_TENSOR;
		conv[i].v.tensor = &tensors[i];
	}
	return jitk_op_call(out, op, mode, conv, nargs, stream);
}

int jitk_call_dlpack(jitk_call_info *out, jitk_runtime *rt, const char *selector,
		     jitk_call_mode mode, const jitk_arg *args, size_t nargs, jitk_stream stream)
{
	jitk_op *op;
	int rc;

	if ((rc = jitk__call_info_clear(out)))
		return rc;
	if ((rc = jitk_op_get(&op, rt, selector)))
		return rc;
	return jitk_op_call_dlpack(out, op, mode, args, nargs, stream);
}
