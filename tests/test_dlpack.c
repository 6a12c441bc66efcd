/* test_dlpack.c - jitk_op_call_dlpack over the fake device: DLPack
 * tensors (DLTensor, dlpack/dlpack.h) become jitk tensors - data plus
 * byte_offset, strides or C-contiguous when NULL - and reach the same
 * checked call; tensors not on the runtime's CUDA device, with lanes or
 * too many dimensions are refused naming the argument, before anything
 * launches. Real NVRTC compiles of the test family run; no GPU. */
#include <dlpack/dlpack.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "fake_device.h"

#define ADDR(i) ((uint64_t)(i) << 36)

typedef struct {
	DLTensor t;
	int64_t shape[2], strides[2];
} dl2;

static void dl_i32(dl2 *d, uint64_t data, int64_t rows, int64_t cols, int strided)
{
	memset(d, 0, sizeof(*d));
	d->shape[0] = rows;
	d->shape[1] = cols;
	d->strides[0] = cols;
	d->strides[1] = 1;
	d->t.data = (void *)(uintptr_t)data;
	d->t.device.device_type = kDLCUDA;
	d->t.device.device_id = 0;
	d->t.ndim = 2;
	d->t.dtype.code = kDLInt;
	d->t.dtype.bits = 32;
	d->t.dtype.lanes = 1;
	d->t.shape = d->shape;
	d->t.strides = strided ? d->strides : NULL;
}

static jitk_arg dlarg(const char *name, const dl2 *d)
{
	jitk_arg a;

	memset(&a, 0, sizeof(a));
	a.name = name;
	a.type = JITK_ARG_DLPACK;
	a.v.dlpack = &d->t;
	return a;
}

static void test_dlpack_call(void **state)
{
	char *dir = t_tmpdir(), *cache = t_path(dir, "cache");
	char *specs = t_path(t_root(), "tests/families/specs");
	fake_device fake;
	jitk_runtime *rt;
	jitk_op *op;
	jitk_call_info info = JITK_CALL_INFO_INIT;
	jitk_tensor ty;
	dl2 out, x, y, z;
	jitk_arg args[4];
	const jitk_dtype i32 = JITK_DTYPE_I32;
	const int64_t shape[2] = { 100, 256 };

	(void)state;
	memset(&fake, 0, sizeof(fake));
	fake.cc = 90;
	fake.sm_count = 132;
	assert_int_equal(t_fake_runtime(&rt, &fake, specs, cache, JITK_CAPTURE_ERROR), 0);
	assert_int_equal(jitk_op_get(&op, rt, "tadd3"), 0);
	dl_i32(&out, ADDR(1), 100, 256, 0);   /* NULL strides: contiguous */
	dl_i32(&x, ADDR(2), 100, 256, 1);
	x.strides[0] = 1024;                  /* a view of a [100, 1024] buffer */
	x.t.byte_offset = 64;                 /* starting at column 16 */
	dl_i32(&y, ADDR(3), 100, 256, 1);
	dl_i32(&z, ADDR(4), 100, 256, 0);
	args[0] = dlarg("out", &out);
	args[1] = dlarg("x", &x);
	args[2] = dlarg("y", &y);
	/* a jitk tensor mixed in */
	jitk_tensor_contiguous(&ty, ADDR(4), i32, 2, shape);
	args[3].name = "z";
	args[3].type = JITK_ARG_TENSOR;
	args[3].v.tensor = &ty;
	assert_int_equal(jitk_op_call_dlpack(&info, op, JITK_CALL_AUTO, args, 4, NULL), 0);
	assert_string_equal(info.instance, "tadd3[cols=256]");
	assert_int_equal(fake.nlaunches, 1);
	assert_int_equal(fake.launches[0].values[0], ADDR(1));
	assert_int_equal(fake.launches[0].values[2], ADDR(2) + 64);
	assert_int_equal(fake.launches[0].values[3], ADDR(3));
	assert_int_equal(fake.launches[0].values[4], ADDR(4));
	assert_int_equal(fake.launches[0].values[5], 100);
	assert_int_equal(fake.launches[0].values[6], 1024);

	/* the selector form, all DLPack */
	args[3] = dlarg("z", &z);
	assert_int_equal(jitk_call_dlpack(&info, rt, "tadd3", JITK_CALL_STRICT, args, 4, NULL), 0);
	assert_int_equal(fake.nlaunches, 2);

	/* the spec's checks still apply: a wrong shape */
	z.shape[1] = 64;
	assert_int_equal(jitk_op_call_dlpack(&info, op, JITK_CALL_STRICT, args, 4, NULL), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message,
			    "tadd3[cols=256]: z: expected shape [100, 256], got [100, 64] (nothing launched)");
	z.shape[1] = 256;

	/* what only DLPack can get wrong */
	z.t.device.device_type = kDLCPU;
	assert_int_equal(jitk_op_call_dlpack(&info, op, JITK_CALL_AUTO, args, 4, NULL), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message,
			    "tadd3: z: a DLPack tensor on device type 1, not CUDA (nothing launched)");
	z.t.device.device_type = kDLCUDAManaged;
	z.t.device.device_id = 1;
	assert_int_equal(jitk_op_call_dlpack(&info, op, JITK_CALL_AUTO, args, 4, NULL), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message,
			    "tadd3: z is on CUDA device 1, not device 0 (nothing launched)");
	z.t.device.device_id = 0;
	z.t.dtype.lanes = 4;
	assert_int_equal(jitk_op_call_dlpack(&info, op, JITK_CALL_AUTO, args, 4, NULL), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message,
			    "tadd3: z has 4 lanes; jitk takes 1 (nothing launched)");
	z.t.dtype.lanes = 1;
	z.t.ndim = 7;
	assert_int_equal(jitk_op_call_dlpack(&info, op, JITK_CALL_AUTO, args, 4, NULL), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message,
			    "tadd3: z has 7 dimensions; jitk takes 0 to 6 (nothing launched)");
	z.t.ndim = 2;
	/* issue 22 #11: impossible tensors, through DLPack too: a negative
	 * dimension, a compact tensor whose strides overflow, a stride
	 * whose extent does, data + byte_offset past the address space */
	z.shape[0] = -100;
	assert_int_equal(jitk_op_call_dlpack(&info, op, JITK_CALL_AUTO, args, 4, NULL), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message,
			    "tadd3: z: shape [-100, 256]: dimension 0 is negative (nothing launched)");
	z.shape[0] = (int64_t)1 << 62;
	assert_int_equal(jitk_op_call_dlpack(&info, op, JITK_CALL_AUTO, args, 4, NULL), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message,
			    "tadd3: z: its number of elements overflows 64 bits (nothing launched)");
	z.shape[0] = 100;
	z.t.strides = z.strides;
	z.strides[0] = INT64_MAX;
	assert_int_equal(jitk_op_call_dlpack(&info, op, JITK_CALL_AUTO, args, 4, NULL), JITK_EINVAL);
	assert_non_null(strstr(jitk_error_last()->message, "tadd3: z: shape [100, 256] with strides "
							    "[9223372036854775807, 1]"));
	assert_non_null(strstr(jitk_error_last()->message, "its extent overflows 64 bits"));
	z.strides[0] = 256;
	z.t.byte_offset = UINT64_MAX - ADDR(4) - 100;
	assert_int_equal(jitk_op_call_dlpack(&info, op, JITK_CALL_AUTO, args, 4, NULL), JITK_EINVAL);
	assert_non_null(strstr(jitk_error_last()->message, "it wraps around the end of the address space"));
	z.t.byte_offset = 0;
	z.t.strides = NULL;
	assert_int_equal(fake.nlaunches, 2);
	args[3].v.dlpack = NULL;
	assert_int_equal(jitk_op_call_dlpack(&info, op, JITK_CALL_AUTO, args, 4, NULL), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message,
			    "tadd3: argument z: the DLPack tensor pointer is NULL (nothing launched)");
	/* a DLPack argument given to the plain call is refused, not misread */
	args[3] = dlarg("z", &z);
	assert_int_equal(jitk_op_call(&info, op, JITK_CALL_AUTO, args, 4, NULL), JITK_EINVAL);
	assert_non_null(strstr(jitk_error_last()->message, "argument out must be a tensor"));
	assert_int_equal(fake.nlaunches, 2);
	/* a dtype that is not the spec's is the call's error */
	z.t.dtype.code = kDLFloat;
	assert_int_equal(jitk_op_call_dlpack(&info, op, JITK_CALL_AUTO, args, 4, NULL), JITK_EINVAL);
	assert_int_equal(fake.nlaunches, 2);

	jitk_runtime_free(rt);
	t_rmtree(dir);
	free(dir);
	free(cache);
	free(specs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dlpack_call),
	};

	return T_RUN_TESTS(tests, NULL, NULL);
}
