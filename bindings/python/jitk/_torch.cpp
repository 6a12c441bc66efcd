/* _torch.cpp - jitk's eager op call through PyTorch's C++ API (libtorch),
 * built when PyTorch is present at build time (bindings/python/_build,
 * bench/device_run.sh) against that PyTorch, and used only with it (jitk
 * checks torch_version at import; without this module the ops use the C
 * plan of _fast.c).
 *
 * A Plan is one symbol's call: plan(*values) takes the op's C arguments in
 * the spec's order and
 *   - reads every tensor's data pointer, dtype, shape and strides from its
 *     at::Tensor (no Python attribute, no Python object made),
 *   - allocates an output whose slot holds a shape tuple (or a (shape,
 *     strides) pair, or the index of the argument whose shape it has)
 *     instead of a tensor, with the spec's dtype for it, on
 *     the call's device (the CUDA caching allocator, as at::empty does),
 *   - takes PyTorch's current stream of that device,
 *   - calls jitk_op_call with the GIL released.
 * It returns None (out call) or the tuple of the outputs it allocated;
 * NOT_PLAIN (an int) when a tensor is not a plain torch.Tensor /
 * Parameter on a CUDA device with strided storage of its own (a subclass;
 * the CPU, meta; sparse, nested; functorch's and functionalization's
 * wrappers) or a torch function or dispatch mode is active, so that the
 * caller takes the dispatcher's path; on an error it raises
 * (ArgumentError / ArgumentTypeError for bad values, the library's status
 * through the `fail` callable, PyTorch's own exceptions, such as
 * torch.OutOfMemoryError, for what PyTorch raises).
 *
 * The op handle of a device is asked for once, from `resolve(device)`
 * (which makes the runtime and preloads the symbol's instances), and kept.
 * With configured=(indices, registry), registry(device) gives that
 * device's runtime's configured tensors (a dict: data address -> the
 * version counter at configure, or None) and stale(address); a tensor at
 * those indices whose version moved since (an in-place write) is passed
 * to stale before the call, so the library no longer takes it as
 * validated.
 *
 * Like _fast.c it does not link libjitk: jitk_op_call's address comes from
 * the library the package loaded. */
#include <Python.h>

#include <ATen/Context.h>
#include <ATen/PythonTorchFunctionTLS.h>
#include <ATen/core/Tensor.h>
#include <ATen/cuda/EmptyTensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>

#include "_args.h"
#include "jitk.h"

#ifndef JITK_TORCH_VERSION
#error "build with -DJITK_TORCH_VERSION=\"<torch.__version__>\""
#endif

namespace {

constexpr int NOT_PLAIN = -100;
constexpr int MAX_DTYPES = 16;
constexpr int MAX_DEVICES = 64;
constexpr int MAX_ARGS = 32;

typedef int (*op_call_fn)(jitk_call_info *, jitk_op *, jitk_call_mode, const jitk_arg *, size_t,
			  jitk_stream);

struct Plan {
	PyObject_HEAD
	vectorcallfunc vectorcall;
	op_call_fn call;
	int mode;
	Py_ssize_t n;
	char **names;
	char *kinds;   /* t tensor, o optional tensor, i i32, l i64, f f32 */
	int *out_type; /* per argument: its dtype's index for an allocation, -1 none */
	jitk_op *ops[MAX_DEVICES];
	c10::ScalarType st[MAX_DTYPES];
	jitk_dtype code[MAX_DTYPES];
	int ndt;
	PyTypeObject *plain[2];
	PyObject *resolve, *fail, *arg_error, *type_error;
	char watched[MAX_ARGS]; /* per argument: a configured tensor */
	PyObject *registry;     /* registry(device) -> (versions, stale); NULL: none watched */
	PyObject *versions[MAX_DEVICES], *stale[MAX_DEVICES];
};

PyObject *raise(PyObject *kind, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	jitk_py_vfail(kind, fmt, ap);
	va_end(ap);
	return nullptr;
}

bool is_plain(const Plan *p, PyObject *v)
{
	return Py_TYPE(v) == p->plain[0] || Py_TYPE(v) == p->plain[1];
}

/* The keys of tensors whose data is not simply theirs to read: functorch's
 * and functionalization's wrappers, Python (a subclass's tensor), the
 * lazy conjugate and negative bits. */
const c10::DispatchKeySet WRAPPED({c10::DispatchKey::FuncTorchBatched,
				   c10::DispatchKey::FuncTorchGradWrapper,
				   c10::DispatchKey::Functionalize, c10::DispatchKey::Python,
				   c10::DispatchKey::Conjugate, c10::DispatchKey::Negative});

/* A tensor the plan reads as it is: dense, strided, with storage. */
bool is_direct(const at::Tensor &t)
{
	return t.layout() == at::kStrided && !t.is_nested() && t.has_storage() &&
	       !t.key_set().has_any(WRAPPED);
}

/* The device index of the call: the first tensor's; -1 when that one is
 * not a plain tensor on a CUDA device (the dispatcher's path), -2 when no
 * tensor is given. */
int call_device(const Plan *p, PyObject *const *args)
{
	for (Py_ssize_t i = 0; i < p->n; i++) {
		PyObject *v = args[i];

		if ((p->kinds[i] != 't' && p->kinds[i] != 'o') || v == Py_None || PyTuple_Check(v) ||
		    PyLong_CheckExact(v))
			continue;
		if (!is_plain(p, v))
			return -1;
		const at::Tensor &t = THPVariable_Unpack(v);
		if (!t.is_cuda() || !is_direct(t))
			return -1;
		return t.get_device();
	}
	return -2;
}

/* An int sequence (a tuple of Python ints) into out; its length, -1 on error. */
int read_ints(const Plan *p, PyObject *tup, const char *name, int64_t *out)
{
	if (!PyTuple_Check(tup)) {
		raise(p->type_error, "%s: a shape or strides must be a tuple", name);
		return -1;
	}
	Py_ssize_t n = PyTuple_GET_SIZE(tup);
	if (n > JITK_MAX_DIMS) {
		raise(p->arg_error, "%s has more than %d dimensions", name, JITK_MAX_DIMS);
		return -1;
	}
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *e = PyTuple_GET_ITEM(tup, i);
		long long v;

		if (!PyLong_Check(e)) {
			raise(p->type_error, "%s: a shape or strides holds ints, not %s", name,
			      Py_TYPE(e)->tp_name);
			return -1;
		}
		if ((v = PyLong_AsLongLong(e)) == -1 && PyErr_Occurred())
			return -1;
		out[i] = v;
	}
	return (int)n;
}

/* Allocate argument i's output from spec on device d: spec is a shape, a
 * (shape, strides) pair, or the index of the argument whose shape it has
 * (a plain CUDA tensor: checked by the caller). Its new Python tensor,
 * nullptr on error. */
PyObject *allocate(const Plan *p, Py_ssize_t i, PyObject *spec, int d, PyObject *const *args)
{
	int64_t shape[JITK_MAX_DIMS], strides[JITK_MAX_DIMS];
	PyObject *s = spec, *st = nullptr;
	int n = 0, m = 0;

	if (PyLong_CheckExact(spec)) {
		Py_ssize_t j = PyLong_AsSsize_t(spec); /* checked by the caller */
		auto sizes = THPVariable_Unpack(args[j]).sizes();

		if (sizes.size() > JITK_MAX_DIMS)
			return raise(p->arg_error, "%s has more than %d dimensions", p->names[j],
				     JITK_MAX_DIMS);
		for (n = 0; n < (int)sizes.size(); n++)
			shape[n] = sizes[n];
	} else {
		if (PyTuple_GET_SIZE(spec) == 2 && PyTuple_Check(PyTuple_GET_ITEM(spec, 0))) {
			s = PyTuple_GET_ITEM(spec, 0);
			st = PyTuple_GET_ITEM(spec, 1);
		}
		if ((n = read_ints(p, s, p->names[i], shape)) < 0 ||
		    (st && (m = read_ints(p, st, p->names[i], strides)) < 0))
			return nullptr;
		if (st && m != n)
			return raise(p->arg_error, "%s: %d strides for %d dimensions", p->names[i],
				     m, n);
	}
	/* (what PyTorch throws here, out of memory, a negative size, reaches
	 * Python as PyTorch's exception: plan_vectorcall's handler) */
	c10::IntArrayRef size(shape, n), stride(strides, n);
	c10::ScalarType dt = p->st[p->out_type[i]];
	at::Device dev(at::kCUDA, (c10::DeviceIndex)d);
	auto &ctx = at::globalContext();

	if (ctx.deterministicAlgorithms() && ctx.deterministicFillUninitializedMemory()) {
		/* the dispatcher's empty fills new memory (NaN) in this mode */
		auto opts = at::TensorOptions().dtype(dt).device(dev);
		return THPVariable_Wrap(st ? at::empty_strided(size, stride, opts)
					   : at::empty(size, opts));
	}
	/* the CUDA caching allocator directly: what the dispatcher's
	 * empty.memory_format reaches on a CUDA device, without the dispatch
	 * (the tensor's keys follow InferenceMode as there) */
	return THPVariable_Wrap(st ? at::detail::empty_strided_cuda(size, stride, dt, dev)
				   : at::detail::empty_cuda(size, dt, dev, std::nullopt));
}

/* 0 done, -1 error raised, 1 not a plain tensor (the dispatcher's path). */
int read_tensor(const Plan *p, PyObject *v, const char *name, int d, jitk_tensor *t)
{
	if (!is_plain(p, v))
		return 1;
	const at::Tensor &x = THPVariable_Unpack(v);
	if (x.is_cuda() && !is_direct(x))
		return 1;
	if (!x.is_cuda()) {
		if (x.is_cpu())
			raise(p->arg_error, "%s is on the CPU, not cuda:%d", name, d);
		else
			raise(p->arg_error, "%s is on %s, not cuda:%d", name,
			      x.device().str().c_str(), d);
		return -1;
	}
	if (x.get_device() != d) {
		raise(p->arg_error, "%s is on cuda:%d, not cuda:%d", name, (int)x.get_device(), d);
		return -1;
	}
	c10::ScalarType s = x.scalar_type();
	int j = 0;
	while (j < p->ndt && p->st[j] != s)
		j++;
	if (j == p->ndt) { /* named as Python names it (torch.float64) */
		PyObject *dt = PyObject_GetAttrString(v, "dtype");
		PyObject *str = dt ? PyObject_Str(dt) : nullptr;
		const char *txt = str ? PyUnicode_AsUTF8(str) : nullptr;

		PyErr_Clear();
		raise(p->type_error, "%s: dtype %s is not a kernel argument type", name,
		      txt ? txt : c10::toString(s));
		Py_XDECREF(str);
		Py_XDECREF(dt);
		return -1;
	}
	int n = (int)x.dim();
	if (n > JITK_MAX_DIMS) {
		raise(p->arg_error, "%s has more than %d dimensions", name, JITK_MAX_DIMS);
		return -1;
	}
	std::memset(t, 0, sizeof(*t));
	t->dtype = p->code[j];
	/* an empty tensor may have no storage: its address is never read */
	t->data = x.numel() ? (uint64_t)(uintptr_t)x.data_ptr() : 0;
	t->ndim = n;
	auto sizes = x.sizes();
	auto strides = x.strides();
	for (int k = 0; k < n; k++) {
		t->shape[k] = sizes[k];
		t->strides[k] = strides[k];
	}
	return 0;
}

/* The op handle on device d, from resolve(d) the first time; nullptr on error. */
jitk_op *op_of(Plan *p, int d)
{
	if (d >= MAX_DEVICES)
		return (jitk_op *)raise(p->arg_error, "cuda:%d: jitk's ops take devices 0..%d", d,
					MAX_DEVICES - 1);
	if (!p->ops[d]) {
		PyObject *r = PyObject_CallFunction(p->resolve, "i", d);
		if (!r)
			return nullptr;
		void *op = PyLong_AsVoidPtr(r);
		Py_DECREF(r);
		if (!op) {
			if (!PyErr_Occurred())
				raise(PyExc_RuntimeError, "resolve(%d) gave no op", d);
			return nullptr;
		}
		p->ops[d] = (jitk_op *)op;
	}
	return p->ops[d];
}

/* Device d's configured tensors from registry(d), the first time; 0, or
 * -1 with an error raised. */
int registry_of(Plan *p, int d)
{
	if (!p->registry || p->versions[d])
		return 0;
	PyObject *r = PyObject_CallFunction(p->registry, "i", d), *v, *f;
	if (!r)
		return -1;
	if (!PyArg_ParseTuple(r, "O!O", &PyDict_Type, &v, &f) || !PyCallable_Check(f)) {
		Py_DECREF(r);
		PyErr_Clear();
		raise(PyExc_TypeError, "registry(%d) must give (a dict, a callable)", d);
		return -1;
	}
	Py_INCREF(v);
	Py_INCREF(f);
	p->versions[d] = v;
	p->stale[d] = f;
	Py_DECREF(r);
	return 0;
}

/* A configured tensor x at data on device d: stale(data) when its version
 * is not the one configure saw (an inference tensor, which has no version
 * counter, is taken as written). 0, or -1 with an error raised. */
int watch(Plan *p, const at::Tensor &x, uint64_t data, int d)
{
	PyObject *key = PyLong_FromUnsignedLongLong(data), *seen;
	bool same;

	if (!key)
		return -1;
	seen = PyDict_GetItemWithError(p->versions[d], key); /* borrowed */
	if (!seen || seen == Py_None) {
		Py_DECREF(key);
		return PyErr_Occurred() ? -1 : 0;
	}
	if (x.is_inference()) {
		same = false;
	} else {
		unsigned long long v = PyLong_AsUnsignedLongLong(seen);

		if (v == (unsigned long long)-1 && PyErr_Occurred()) {
			Py_DECREF(key);
			return -1;
		}
		same = v == (unsigned long long)x._version();
	}
	if (same) {
		Py_DECREF(key);
		return 0;
	}
	PyObject *r = PyObject_CallOneArg(p->stale[d], key);
	Py_DECREF(key);
	Py_XDECREF(r);
	return r ? 0 : -1;
}

/* The call; the outputs it allocates go to outs (the caller releases them
 * when this throws). */
PyObject *plan_call(Plan *p, PyObject *const *args, PyObject **outs, Py_ssize_t &nouts)
{
	jitk_arg a[MAX_ARGS];
	jitk_tensor t[MAX_ARGS];
	PyObject *ret = nullptr;
	jitk_call_info info = JITK_CALL_INFO_INIT;
	size_t n = 0;
	jitk_op *op;
	int d, rc;

	if (c10::impl::TorchDispatchModeTLS::any_modes_set() ||
	    at::impl::torch_function_mode_enabled())
		return PyLong_FromLong(NOT_PLAIN); /* the modes see the call */
	if ((d = call_device(p, args)) < 0) {
		if (d == -2)
			return raise(p->type_error, "the call has no tensor to take a device from");
		return PyLong_FromLong(NOT_PLAIN);
	}
	if (!(op = op_of(p, d)) || registry_of(p, d) < 0)
		return nullptr;
	for (Py_ssize_t i = 0; i < p->n; i++) {
		PyObject *v = args[i];
		char k = p->kinds[i];

		if (k == 't' || k == 'o') {
			if (v == Py_None) {
				if (k == 'o')
					continue;
				raise(p->type_error, "%s must be a torch.Tensor, not None", p->names[i]);
				goto out;
			}
			if (PyTuple_Check(v) || PyLong_CheckExact(v)) {
				if (p->out_type[i] < 0) {
					raise(p->type_error, "%s must be a torch.Tensor, not %s",
					      p->names[i], Py_TYPE(v)->tp_name);
					goto out;
				}
				if (PyLong_CheckExact(v)) { /* shaped like argument j */
					Py_ssize_t j = PyLong_AsSsize_t(v);

					if (j == -1 && PyErr_Occurred())
						goto out;
					if (j < 0 || j >= p->n || (p->kinds[j] != 't' && p->kinds[j] != 'o')) {
						raise(p->type_error, "%s: no tensor argument %zd to "
						      "take a shape from", p->names[i], j);
						goto out;
					}
					if (!is_plain(p, args[j]) ||
					    !THPVariable_Unpack(args[j]).is_cuda() ||
					    !is_direct(THPVariable_Unpack(args[j]))) {
						ret = PyLong_FromLong(NOT_PLAIN);
						goto out;
					}
				}
				if (!(v = allocate(p, i, v, d, args)))
					goto out;
				outs[nouts++] = v;
			}
			rc = read_tensor(p, v, p->names[i], d, &t[n]);
			if (rc < 0)
				goto out;
			if (rc > 0) {
				ret = PyLong_FromLong(NOT_PLAIN);
				goto out;
			}
			if (p->watched[i] && PyDict_GET_SIZE(p->versions[d]) &&
			    watch(p, THPVariable_Unpack(v), t[n].data, d) < 0)
				goto out;
			a[n].type = JITK_ARG_TENSOR;
			a[n].v.tensor = &t[n];
		} else if (jitk_py_scalar(v, k, p->names[i], &a[n], p->type_error, p->arg_error) < 0) {
			goto out;
		}
		a[n].name = p->names[i];
		n++;
	}
	{
		void *stream = c10::cuda::getCurrentCUDAStream((c10::DeviceIndex)d).stream();

		Py_BEGIN_ALLOW_THREADS
		rc = p->call(&info, op, (jitk_call_mode)p->mode, a, n, stream);
		Py_END_ALLOW_THREADS
	}
	if (rc < 0) {
		PyObject *r = PyObject_CallFunction(p->fail, "i", rc); /* raises */

		Py_XDECREF(r);
		if (!PyErr_Occurred())
			raise(PyExc_RuntimeError, "jitk status %d", rc);
		goto out;
	}
	if (!nouts) {
		Py_INCREF(Py_None);
		return Py_None;
	}
	if ((ret = PyTuple_New(nouts))) {
		for (Py_ssize_t i = 0; i < nouts; i++)
			PyTuple_SET_ITEM(ret, i, outs[i]); /* steals */
		nouts = 0;
	}
	return ret;
out:
	return ret;
}

PyObject *plan_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
	Plan *p = (Plan *)self;
	Py_ssize_t nargs = PyVectorcall_NARGS(nargsf), nouts = 0;
	PyObject *outs[MAX_ARGS], *ret = nullptr;

	if (kwnames && PyTuple_GET_SIZE(kwnames))
		return PyErr_Format(PyExc_TypeError, "a plan takes positional arguments only");
	if (nargs != p->n)
		return PyErr_Format(PyExc_TypeError, "a plan takes %zd values, not %zd", p->n,
				    nargs);
	try {
		ret = plan_call(p, args, outs, nouts);
	} catch (...) {
		/* a c10::Error (out of memory, a tensor PyTorch refuses to
		 * describe) as PyTorch raises it; never through C */
		ret = nullptr;
		torch::translate_exception_to_python(std::current_exception());
	}
	for (Py_ssize_t i = 0; i < nouts; i++) /* not returned: released */
		Py_DECREF(outs[i]);
	return ret;
}

void plan_dealloc(PyObject *self)
{
	Plan *p = (Plan *)self;

	if (p->names)
		for (Py_ssize_t i = 0; i < p->n; i++)
			PyMem_Free(p->names[i]);
	PyMem_Free(p->names);
	PyMem_Free(p->kinds);
	PyMem_Free(p->out_type);
	Py_XDECREF((PyObject *)p->plain[0]);
	Py_XDECREF((PyObject *)p->plain[1]);
	Py_XDECREF(p->resolve);
	Py_XDECREF(p->fail);
	Py_XDECREF(p->arg_error);
	Py_XDECREF(p->type_error);
	Py_XDECREF(p->registry);
	for (int d = 0; d < MAX_DEVICES; d++) {
		Py_XDECREF(p->versions[d]);
		Py_XDECREF(p->stale[d]);
	}
	Py_TYPE(self)->tp_free(self);
}

int dtype_index(Plan *p, PyObject *dt)
{
	for (int j = 0; j < p->ndt; j++)
		if (p->st[j] == ((THPDtype *)dt)->scalar_type)
			return j;
	return -1;
}

/* Plan(jitk_op_call, mode, names, kinds, dtypes, out_dtypes, plain_types,
 *      resolve, fail, ArgumentError, ArgumentTypeError, configured=None)
 * dtypes: ((torch.dtype, code, bits), ...), the kernel argument types;
 * out_dtypes: per argument, the torch.dtype an allocated output gets, or None. */
PyObject *plan_new(PyTypeObject *type, PyObject *args, PyObject *)
{
	unsigned long long fn;
	int mode;
	PyObject *names, *dtypes, *odt, *plain, *resolve, *fail, *aerr, *terr, *cfg = Py_None;
	PyObject *idx = nullptr, *registry = nullptr;
	const char *kinds;

	if (!PyArg_ParseTuple(args, "KiO!sO!O!O!OOOO|O", &fn, &mode, &PyTuple_Type, &names, &kinds,
			      &PyTuple_Type, &dtypes, &PyTuple_Type, &odt, &PyTuple_Type, &plain,
			      &resolve, &fail, &aerr, &terr, &cfg))
		return nullptr;
	if (cfg != Py_None && (!PyArg_ParseTuple(cfg, "O!O", &PyTuple_Type, &idx, &registry) ||
			       !PyCallable_Check(registry))) {
		PyErr_Clear();
		return PyErr_Format(PyExc_TypeError, "configured must be None or (indices, a "
				    "callable)");
	}
	Py_ssize_t n = PyTuple_GET_SIZE(names);
	if (n != (Py_ssize_t)std::strlen(kinds) || n > MAX_ARGS || PyTuple_GET_SIZE(odt) != n ||
	    PyTuple_GET_SIZE(plain) != 2 || PyTuple_GET_SIZE(dtypes) > MAX_DTYPES ||
	    !PyCallable_Check(resolve) || !PyCallable_Check(fail))
		return PyErr_Format(PyExc_ValueError, "bad plan tables");
	for (Py_ssize_t i = 0; i < 2; i++)
		if (!PyType_Check(PyTuple_GET_ITEM(plain, i)))
			return PyErr_Format(PyExc_TypeError, "plain_types must be two types");
	Plan *p = (Plan *)type->tp_alloc(type, 0);
	if (!p)
		return nullptr;
	p->call = (op_call_fn)(uintptr_t)fn;
	p->mode = mode;
	p->n = n;
	p->names = (char **)PyMem_Calloc(n ? n : 1, sizeof(char *));
	p->kinds = (char *)PyMem_Malloc(n + 1);
	p->out_type = (int *)PyMem_Calloc(n ? n : 1, sizeof(int));
	p->plain[0] = (PyTypeObject *)PyTuple_GET_ITEM(plain, 0);
	p->plain[1] = (PyTypeObject *)PyTuple_GET_ITEM(plain, 1);
	Py_INCREF((PyObject *)p->plain[0]);
	Py_INCREF((PyObject *)p->plain[1]);
	p->resolve = resolve;
	p->fail = fail;
	p->arg_error = aerr;
	p->type_error = terr;
	Py_INCREF(resolve);
	Py_INCREF(fail);
	Py_INCREF(aerr);
	Py_INCREF(terr);
	if (!p->names || !p->kinds || !p->out_type) {
		Py_DECREF(p);
		return PyErr_NoMemory();
	}
	std::memcpy(p->kinds, kinds, n + 1);
	if (jitk_py_watched(idx, kinds, n, p->watched) < 0) {
		Py_DECREF(p);
		return nullptr;
	}
	if (idx) {
		p->registry = registry;
		Py_INCREF(registry);
	}
	for (Py_ssize_t i = 0; i < n; i++) {
		const char *s = PyUnicode_AsUTF8(PyTuple_GET_ITEM(names, i));

		if (!s || !(p->names[i] = (char *)PyMem_Malloc(std::strlen(s) + 1))) {
			Py_DECREF(p);
			return s ? PyErr_NoMemory() : nullptr;
		}
		std::memcpy(p->names[i], s, std::strlen(s) + 1);
	}
	for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(dtypes); i++) {
		PyObject *dt;
		int code, bits;

		if (!PyArg_ParseTuple(PyTuple_GET_ITEM(dtypes, i), "O!ii", &THPDtypeType, &dt, &code,
				      &bits)) {
			Py_DECREF(p);
			return nullptr;
		}
		p->st[i] = ((THPDtype *)dt)->scalar_type;
		p->code[i].code = (uint8_t)code;
		p->code[i].bits = (uint8_t)bits;
		p->code[i].lanes = 1;
		p->ndt = (int)i + 1;
	}
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *dt = PyTuple_GET_ITEM(odt, i);

		p->out_type[i] = -1;
		if (dt == Py_None)
			continue;
		if (!THPDtype_Check(dt) || (p->out_type[i] = dtype_index(p, dt)) < 0) {
			PyErr_Format(PyExc_ValueError, "%s: its output dtype is not a kernel "
				     "argument type", p->names[i]);
			Py_DECREF(p);
			return nullptr;
		}
	}
	p->vectorcall = plan_vectorcall;
	return (PyObject *)p;
}

PyTypeObject PlanType = {
	PyVarObject_HEAD_INIT(nullptr, 0)
};

struct PyModuleDef torch_module = {
	PyModuleDef_HEAD_INIT, "jitk._torch", "jitk's eager op calls through libtorch", -1,
	nullptr,
};

} /* namespace */

PyMODINIT_FUNC PyInit__torch(void)
{
	PlanType.tp_name = "jitk._torch.Plan";
	PlanType.tp_basicsize = sizeof(Plan);
	PlanType.tp_dealloc = plan_dealloc;
	PlanType.tp_vectorcall_offset = offsetof(Plan, vectorcall);
	PlanType.tp_call = PyVectorcall_Call;
	PlanType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL;
	PlanType.tp_doc = "Plan(jitk_op_call, mode, names, kinds, dtypes, out_dtypes, plain_types, "
			  "resolve, fail, ArgumentError, ArgumentTypeError, configured=None): "
			  "plan(*values) -> None | outputs | NOT_PLAIN";
	PlanType.tp_new = plan_new;
	if (PyType_Ready(&PlanType) < 0)
		return nullptr;
	PyObject *m = PyModule_Create(&torch_module);
	if (!m)
		return nullptr;
	Py_INCREF(&PlanType);
	if (PyModule_AddObject(m, "Plan", (PyObject *)&PlanType) < 0 ||
	    PyModule_AddStringConstant(m, "torch_version", JITK_TORCH_VERSION) < 0 ||
	    PyModule_AddIntConstant(m, "NOT_PLAIN", NOT_PLAIN) < 0) {
		Py_DECREF(m);
		return nullptr;
	}
	return m;
}
