/* _torch.cpp - jitk's PyTorch extension: every spec symbol as the ops
 * jitk::S (functional) and jitk::S.out, defined and implemented in C++ with
 * the dynamic forms of TORCH_LIBRARY / TORCH_LIBRARY_IMPL(jitk, CUDA | Meta)
 * (torch::Library objects made at import, since the symbols come from the
 * specs the process loads: a family added as YAML gets its ops with no
 * code). Built against the PyTorch it is used with (bindings/python/_build:
 * `backend.py torch-ext`, or the wheel where PyTorch imports), and loaded
 * only with that one (jitk/_ops.py checks torch_version).
 *
 * jitk/_ops.py hands register() one table per symbol (jitk/_schema.py,
 * OpSpec.table: schemas, the C call's arguments and where each sits on the
 * dispatcher's stack, the outputs' dtypes and shape programs, the
 * instances' parameters and the input shapes that select each). The
 * kernels are boxed and touch no Python after the first call on a device:
 *
 *   CUDA: every tensor through one converter (tensor_arg), the outputs of
 *     the functional variant allocated with the CUDA caching allocator,
 *     PyTorch's current stream, jitk_op_call in AUTO mode (the spec's
 *     fallback where the fused instance cannot run);
 *   Meta: the same shape programs on symbolic sizes (what torch.compile's
 *     fake tensors and opcheck run), nothing called.
 *
 * The op handle of a device comes once from resolve(device), a Python
 * callable (it makes the device's runtime and preloads the symbol's
 * instances and its fallback's, so that CUDA graph capture meets no
 * unresolved kernel), and is kept. Tensors that configure validated are
 * watched here (watch/unwatch from jitk._core.Runtime.configure): one whose
 * version counter moved since (an in-place write) is unconfigured before
 * the call, with a warning.
 *
 * The extension does not link libjitk: init() gets jitk_op_call's,
 * jitk_error_last's, jitk_status_name's and jitk_unconfigure's addresses
 * from the library the package loaded (ctypes), so both always agree.
 * Errors: a bad value is a ValueError, a wrong dtype a TypeError, what the
 * library refuses or fails at a RuntimeError (ValueError for EINVAL),
 * each naming the op, the status and the library's message. */
#include <ATen/Context.h>
#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/op_registration/op_registration.h>
#include <ATen/cuda/EmptyTensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>
#include <c10/util/SmallVector.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/library.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "jitk.h"

#ifndef JITK_TORCH_VERSION
#error "build with -DJITK_TORCH_VERSION=\"<torch.__version__>\""
#endif

namespace py = pybind11;

namespace {

constexpr int MAX_DEVICES = 64;
constexpr int MAX_ARGS = 48;
constexpr int MAX_STACK = 32; /* a shape program's evaluation stack */

typedef int (*op_call_fn)(jitk_call_info *, jitk_op *, jitk_call_mode, const jitk_arg *, size_t,
			  jitk_stream);
typedef const jitk_error *(*error_last_fn)(void);
typedef const char *(*status_name_fn)(int);
typedef int (*unconfigure_fn)(jitk_runtime *, jitk_devptr);

struct Library {
	op_call_fn op_call = nullptr;
	error_last_fn error_last = nullptr;
	status_name_fn status_name = nullptr;
	unconfigure_fn unconfigure = nullptr;
} lib;

/* A shape program's opcodes: jitk/_schema.py writes them (PROGRAM_OPS). */
enum Code : int64_t {
	P_CONST = 0,  /* v */
	P_DIM = 1,    /* argument, dimension: an input's size */
	P_STRIDE = 2, /* argument, dimension: an input's stride */
	P_SCALAR = 3, /* argument: an int scalar of the schema */
	P_PARAM = 4,  /* index: the selected instance's parameter */
	P_ADD = 10, P_SUB, P_MUL, P_DIV, P_MOD, P_MIN, P_MAX, P_CDIV,
	P_EQ, P_NE, P_LT, P_LE, P_GT, P_GE, P_AND, P_OR, P_NEG, P_NOT
};

typedef std::vector<int64_t> Program;

struct Arg {
	std::string name;
	char kind;     /* t tensor, i i32, l i64, f f32 */
	char io;       /* i in, o out, x inout (tensors) */
	bool optional;
	bool configured;
	int fpos;      /* on the functional variant's stack, -1 allocated (an output) */
	int opos;      /* on the .out variant's stack */
	jitk_dtype code; /* an output's element type (allocated) */
	at::ScalarType dtype;
};

struct Output {
	int arg;
	std::vector<Program> shape;
	std::vector<Program> strides; /* empty: contiguous; an empty program: that one contiguous */
};

struct Check { /* the selecting input shapes of an instance: arg's dim == expect */
	int arg, dim;
	Program expect;
};

struct Instance {
	std::vector<int64_t> params;
	std::vector<Check> checks;
};

struct Op {
	std::string name;
	std::vector<Arg> args;          /* the C call's, in the spec's order */
	int nf = 0, no = 0;             /* stack sizes of the two variants */
	bool functional = false;
	std::vector<Output> outputs;    /* allocated by the functional variant */
	std::vector<int> returns;       /* its results: arguments (outputs, then inouts) */
	std::vector<Instance> instances;
	bool select = false;            /* an output's shape needs the instance's parameters */
	py::object resolve;             /* resolve(device) -> (jitk_op *, jitk_runtime *) */
	std::atomic<jitk_op *> handle[MAX_DEVICES];
	std::atomic<jitk_runtime *> runtime[MAX_DEVICES];
	std::mutex resolving;

	Op()
	{
		for (int d = 0; d < MAX_DEVICES; d++) {
			handle[d].store(nullptr);
			runtime[d].store(nullptr);
		}
	}
};

/* ------------------------------------------------------------ the watch */

struct Watched {
	int device;
	jitk_devptr data;
	int64_t version; /* -1: none to compare (never stale by a write) */
};

std::mutex watch_lock;
std::vector<Watched> watched;
std::atomic<int> nwatched{0};

/* A configured tensor t at data on device d written since configure (its
 * version moved, or an inference tensor, which has none): unconfigured
 * here, as Runtime._stale does in Python. */
void check_watched(const Op &op, const at::Tensor &t, jitk_devptr data, int d)
{
	jitk_runtime *rt = op.runtime[d].load(std::memory_order_acquire);
	bool stale = false;
	{
		std::lock_guard<std::mutex> g(watch_lock);
		for (size_t i = 0; i < watched.size(); i++) {
			if (watched[i].device != d || watched[i].data != data)
				continue;
			if (watched[i].version >= 0 &&
			    (t.is_inference() || (int64_t)t._version() != watched[i].version)) {
				watched.erase(watched.begin() + (long)i);
				nwatched.store((int)watched.size());
				stale = true;
			}
			break;
		}
	}
	if (!stale)
		return;
	if (rt && lib.unconfigure)
		lib.unconfigure(rt, data);
	/* a Python RuntimeWarning, as Runtime._stale gives: TORCH_WARN from a
	 * kernel that torch.ops called reaches c10's handler (stderr), not
	 * Python's warnings, so that catch_warnings and filters never see it.
	 * After the unconfigure, as in Python: a filter that makes it an error
	 * leaves the scale unconfigured. Level 2: the line that called the op
	 * (level 1 is torch's OpOverload.__call__). */
	std::ostringstream msg;
	msg << "jitk: the configured tensor at 0x" << std::hex << data
	    << " was written after configure: it is no longer taken as validated (configure it again)";
	py::gil_scoped_acquire gil;
	if (PyErr_WarnEx(PyExc_RuntimeWarning, msg.str().c_str(), 2) < 0) {
		py::error_already_set e; /* a filter made the warning an error */
		TORCH_CHECK(false, "jitk::", op.name, ": ", e.what());
	}
}

/* ------------------------------------------------------- shape programs */

int64_t concrete(int64_t v)
{
	return v;
}

int64_t concrete(const c10::SymInt &v)
{
	return v.guard_int(__FILE__, __LINE__);
}

/* C's a / b (toward zero, as the library's expressions) or a % b */
int64_t c_divmod(int64_t a, int64_t b, bool mod, const Op &op)
{
	TORCH_CHECK_VALUE(b != 0, "jitk::", op.name, ": a shape divides by zero");
	return mod ? a % b : a / b;
}

template <class T> T t_divmod(const T &a, const T &b, bool mod, const Op &op)
{
	if constexpr (std::is_same_v<T, int64_t>) {
		return c_divmod(a, b, mod, op);
	} else {
		auto x = a.maybe_as_int(), y = b.maybe_as_int();
		if (x && y)
			return T(c_divmod(*x, *y, mod, op));
		return mod ? a % b : a / b; /* sizes: both >= 0, where floor and C's agree */
	}
}

template <class T> T t_min(const T &a, const T &b)
{
	if constexpr (std::is_same_v<T, int64_t>)
		return a < b ? a : b;
	else
		return a.min(b);
}

template <class T> T t_max(const T &a, const T &b)
{
	if constexpr (std::is_same_v<T, int64_t>)
		return a > b ? a : b;
	else
		return a.max(b);
}

/* Where a program's leaves come from: the variant's stack. */
template <class T> struct Leaves {
	const Op &op;
	const c10::IValue *stack;
	bool functional;

	const c10::IValue &value(int arg) const
	{
		const Arg &a = op.args[(size_t)arg];
		return stack[functional ? a.fpos : a.opos];
	}

	/* an input's size (or stride) d */
	T extent(int arg, int d, bool stride) const
	{
		const at::Tensor &t = value(arg).toTensor();
		TORCH_CHECK_VALUE(d < t.dim(), "jitk::", op.name, ": ", op.args[(size_t)arg].name,
				  " has ", t.dim(), " dimensions, and a shape needs ", d + 1);
		if constexpr (std::is_same_v<T, int64_t>)
			return stride ? t.stride(d) : t.size(d);
		else
			return stride ? t.sym_stride(d) : t.sym_size(d);
	}

	T scalar(int arg) const
	{
		return T(value(arg).toInt());
	}
};

template <class T>
T evaluate(const Program &p, const Leaves<T> &in, const std::vector<int64_t> *params)
{
	T s[MAX_STACK];
	int n = 0;

	for (size_t i = 0; i < p.size();) {
		int64_t c = p[i++];

		if (c < P_ADD) {
			TORCH_CHECK(n < MAX_STACK, "jitk::", in.op.name, ": a shape program is too deep");
			switch (c) {
			case P_CONST: s[n++] = T(p[i]); i += 1; break;
			case P_DIM: s[n++] = in.extent((int)p[i], (int)p[i + 1], false); i += 2; break;
			case P_STRIDE: s[n++] = in.extent((int)p[i], (int)p[i + 1], true); i += 2; break;
			case P_SCALAR: s[n++] = in.scalar((int)p[i]); i += 1; break;
			case P_PARAM:
				TORCH_CHECK(params && (size_t)p[i] < params->size(), "jitk::", in.op.name,
					    ": a shape needs an instance's parameter");
				s[n++] = T((*params)[(size_t)p[i]]);
				i += 1;
				break;
			default: TORCH_CHECK(false, "jitk::", in.op.name, ": bad shape program");
			}
			continue;
		}
		if (c == P_NEG || c == P_NOT) {
			TORCH_CHECK(n >= 1, "jitk::", in.op.name, ": bad shape program");
			s[n - 1] = c == P_NEG ? T(0) - s[n - 1] : T(concrete(s[n - 1]) == 0 ? 1 : 0);
			continue;
		}
		TORCH_CHECK(n >= 2, "jitk::", in.op.name, ": bad shape program");
		T b = s[--n], a = s[--n];
		switch (c) {
		case P_ADD: s[n++] = a + b; break;
		case P_SUB: s[n++] = a - b; break;
		case P_MUL: s[n++] = a * b; break;
		case P_DIV: s[n++] = t_divmod(a, b, false, in.op); break;
		case P_MOD: s[n++] = t_divmod(a, b, true, in.op); break;
		case P_MIN: s[n++] = t_min(a, b); break;
		case P_MAX: s[n++] = t_max(a, b); break;
		case P_CDIV: {
			/* both >= 0 for sizes; C's rounding up otherwise */
			int64_t x = concrete(a), y = concrete(b);
			TORCH_CHECK_VALUE(y != 0, "jitk::", in.op.name, ": a shape divides by zero");
			int64_t q = x / y;
			s[n++] = T(q + ((x - q * y) != 0 && ((x < 0) == (y < 0)) ? 1 : 0));
			break;
		}
		default: {
			int64_t x = concrete(a), y = concrete(b), r = 0;
			switch (c) {
			case P_EQ: r = x == y; break;
			case P_NE: r = x != y; break;
			case P_LT: r = x < y; break;
			case P_LE: r = x <= y; break;
			case P_GT: r = x > y; break;
			case P_GE: r = x >= y; break;
			case P_AND: r = x && y; break;
			case P_OR: r = x || y; break;
			default: TORCH_CHECK(false, "jitk::", in.op.name, ": bad shape program");
			}
			s[n++] = T(r);
		}
		}
	}
	TORCH_CHECK(n == 1, "jitk::", in.op.name, ": bad shape program");
	return s[0];
}

/* The parameters of the instance whose input shapes the call's match (as
 * the library selects one), or nullptr when no output needs them. */
template <class T> const std::vector<int64_t> *select_instance(const Leaves<T> &in)
{
	const Op &op = in.op;

	if (!op.select)
		return nullptr;
	for (const Instance &inst : op.instances) {
		bool ok = true;

		for (const Check &c : inst.checks) {
			if (in.value(c.arg).isNone())
				continue;
			if (!(in.extent(c.arg, c.dim, false) == evaluate(c.expect, in, &inst.params))) {
				ok = false;
				break;
			}
		}
		if (ok)
			return &inst.params;
	}
	std::string shapes;
	for (const Arg &a : op.args) {
		if (a.kind != 't' || a.io == 'o' || in.value((int)(&a - op.args.data())).isNone())
			continue;
		const at::Tensor &t = in.value((int)(&a - op.args.data())).toTensor();
		shapes += (shapes.empty() ? "" : ", ") + a.name + " " + c10::str(t.sym_sizes());
	}
	TORCH_CHECK_VALUE(false, "jitk::", op.name, ": no instance takes these shapes (", shapes, ")");
	return nullptr;
}

/* an output's sizes or strides: no allocation up to JITK_MAX_DIMS */
template <class T> using Dims = c10::SmallVector<T, JITK_MAX_DIMS>;

template <class T>
void output_shape(const Output &o, const Leaves<T> &in, const std::vector<int64_t> *params,
		  Dims<T> &shape, Dims<T> &strides)
{
	shape.clear();
	strides.clear();
	for (const Program &p : o.shape)
		shape.push_back(evaluate(p, in, params));
	if (o.strides.empty())
		return;
	strides.resize(shape.size());
	for (size_t i = shape.size(); i-- > 0;) {
		if (!o.strides[i].empty()) {
			strides[i] = evaluate(o.strides[i], in, params);
			continue;
		}
		T tail = T(1); /* a stride no expression gives: contiguous from here on */
		for (size_t j = i + 1; j < shape.size(); j++)
			tail = tail * shape[j];
		strides[i] = tail;
	}
}

/* ------------------------------------------------------------ the kernels */

bool dtype_code(at::ScalarType s, jitk_dtype *out)
{
	switch (s) {
	case at::kBFloat16: *out = { 4, 16, 1 }; return true;
	case at::kFloat: *out = { 2, 32, 1 }; return true;
	case at::kHalf: *out = { 2, 16, 1 }; return true;
	case at::kFloat8_e4m3fn: *out = { 10, 8, 1 }; return true;
	case at::kInt: *out = { 0, 32, 1 }; return true;
	case at::kLong: *out = { 0, 64, 1 }; return true;
	case at::kByte: *out = { 1, 8, 1 }; return true;
	case at::kChar: *out = { 0, 8, 1 }; return true;
	default: return false;
	}
}

/* The one tensor converter: t as argument a of a call on cuda:d. */
void tensor_arg(const Op &op, const Arg &a, const at::Tensor &t, int d, jitk_tensor *out)
{
	TORCH_CHECK_VALUE(t.is_cuda(), "jitk::", op.name, ": ", a.name, " is on ",
			  t.is_cpu() ? std::string("the CPU") : t.device().str(), ", not cuda:", d);
	TORCH_CHECK_VALUE(t.get_device() == d, "jitk::", op.name, ": ", a.name, " is on cuda:",
			  (int)t.get_device(), ", not cuda:", d);
	TORCH_CHECK_VALUE(t.layout() == at::kStrided, "jitk::", op.name, ": ", a.name,
			  " is not a strided tensor (", t.layout(), ")");
	TORCH_CHECK_TYPE(dtype_code(t.scalar_type(), &out->dtype), "jitk::", op.name, ": ", a.name,
			 ": dtype ", t.scalar_type(), " is not a kernel argument type");
	int n = (int)t.dim();
	TORCH_CHECK_VALUE(n <= JITK_MAX_DIMS, "jitk::", op.name, ": ", a.name, " has ", n,
			  " dimensions, more than ", JITK_MAX_DIMS);
	/* an empty tensor may have no storage: its address is never read */
	out->data = t.numel() ? (jitk_devptr)(uintptr_t)t.data_ptr() : 0;
	out->ndim = n;
	auto sizes = t.sizes();
	auto strides = t.strides();
	for (int k = 0; k < n; k++) {
		out->shape[k] = sizes[k];
		out->strides[k] = strides[k];
	}
}

void scalar_arg(const Op &op, const Arg &a, const c10::IValue &v, jitk_arg *out)
{
	if (a.kind == 'f') {
		double x = v.toDouble();
		TORCH_CHECK_VALUE(!std::isfinite(x) || std::fabs(x) <= 3.4028234663852886e38, "jitk::",
				  op.name, ": ", a.name, " ", x, " does not fit in a 32-bit float");
		out->type = JITK_ARG_F32;
		out->v.f32 = (float)x;
		return;
	}
	int64_t x = v.toInt();
	if (a.kind == 'i') {
		TORCH_CHECK_VALUE(x >= INT32_MIN && x <= INT32_MAX, "jitk::", op.name, ": ", a.name,
				  " is out of range for i32");
		out->type = JITK_ARG_I32;
		out->v.i32 = (int32_t)x;
	} else {
		out->type = JITK_ARG_I64;
		out->v.i64 = x;
	}
}

/* The op handle on cuda:d: from resolve(d) the first time. */
jitk_op *handle_of(Op &op, int d)
{
	TORCH_CHECK_VALUE(d >= 0 && d < MAX_DEVICES, "jitk::", op.name, ": cuda:", d,
			  ": jitk's ops take devices 0 to ", MAX_DEVICES - 1);
	jitk_op *h = op.handle[d].load(std::memory_order_acquire);
	if (h)
		return h;
	std::lock_guard<std::mutex> g(op.resolving);
	if ((h = op.handle[d].load(std::memory_order_acquire)))
		return h;
	uintptr_t oh = 0, rh = 0;
	{
		py::gil_scoped_acquire gil;
		try {
			py::tuple r = op.resolve(d);
			oh = r[0].cast<uintptr_t>();
			rh = r[1].cast<uintptr_t>();
		} catch (py::error_already_set &e) {
			std::string what = e.what();
			TORCH_CHECK(false, "jitk::", op.name, ": on cuda:", d, ": ", what);
		}
	}
	TORCH_CHECK(oh, "jitk::", op.name, ": resolve(", d, ") gave no op");
	op.runtime[d].store((jitk_runtime *)rh, std::memory_order_release);
	op.handle[d].store((jitk_op *)oh, std::memory_order_release);
	return (jitk_op *)oh;
}

[[noreturn]] void fail(const Op &op, int rc)
{
	const jitk_error *e = lib.error_last ? lib.error_last() : nullptr;
	const char *status = lib.status_name ? lib.status_name(rc) : "?";
	std::string msg = e && e->message && *e->message ? e->message : "the call failed";
	if (rc == JITK_EINVAL)
		TORCH_CHECK_VALUE(false, "jitk::", op.name, ": ", status, ": ", msg);
	TORCH_CHECK(false, "jitk::", op.name, ": ", status, ": ", msg);
}

/* the dispatcher's empty fills new memory (NaN) in this mode */
bool deterministic_fill()
{
	auto &ctx = at::globalContext();
	return ctx.deterministicAlgorithms() && ctx.deterministicFillUninitializedMemory();
}

at::Tensor allocate(const Dims<int64_t> &shape, const Dims<int64_t> &strides, at::ScalarType dt,
		    int d)
{
	at::Device dev(at::kCUDA, (c10::DeviceIndex)d);
	if (deterministic_fill()) {
		auto opts = at::TensorOptions().dtype(dt).device(dev);
		return strides.empty() ? at::empty(shape, opts) : at::empty_strided(shape, strides, opts);
	}
	/* the CUDA caching allocator directly: where the dispatcher's empty
	 * goes on a CUDA device, without the dispatch */
	return strides.empty() ? at::detail::empty_cuda(shape, dt, dev, std::nullopt)
			       : at::detail::empty_strided_cuda(shape, strides, dt, dev);
}

/* JITK_TORCH_ONE_BLOCK=1: the functional variant's outputs share one
 * block of the caching allocator (each at a 256-byte aligned offset, none
 * overlapping another): one allocation and one release for all of them
 * instead of one each. An experiment (issue 26: the host time of an op
 * with two outputs); off by default, since each output's storage is the
 * whole block: it lives as long as the last output does, torch.save or
 * deepcopy of one output copies the block, resize_ of one may grow into
 * the next, and freeing one's storage frees all. Read once, at import. */
bool one_block = false;

/* The outputs of a functional call in one block (one_block above). */
template <class L>
void allocate_together(const Op &o, const L &leaves, const std::vector<int64_t> *params, int d,
		       at::Tensor *made)
{
	constexpr size_t align = 256;
	size_t offset[MAX_ARGS], total = 0, k = 0;
	c10::SmallVector<std::pair<Dims<int64_t>, Dims<int64_t>>, 4> dims(o.outputs.size());

	for (const Output &out : o.outputs) {
		size_t item = c10::elementSize(o.args[(size_t)out.arg].dtype);
		Dims<int64_t> &shape = dims[k].first, &strides = dims[k].second;
		output_shape(out, leaves, params, shape, strides);
		size_t n = strides.empty() ? at::detail::computeStorageNbytesContiguous(shape, item)
					   : at::detail::computeStorageNbytes(shape, strides, item);
		offset[k++] = total;
		total += (n + align - 1) / align * align;
	}
	c10::cuda::CUDAGuard guard((c10::DeviceIndex)d);
	c10::Allocator *alloc = c10::cuda::CUDACachingAllocator::get();
	c10::Storage block(c10::Storage::use_byte_size_t(), total, alloc->allocate(total), alloc,
			   /*resizable=*/true);
	k = 0;
	for (const Output &out : o.outputs) {
		at::ScalarType dt = o.args[(size_t)out.arg].dtype;
		const Dims<int64_t> &shape = dims[k].first, &strides = dims[k].second;
		at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(
			c10::Storage(block), c10::DispatchKeySet(c10::DispatchKey::CUDA),
			caffe2::TypeMeta::fromScalarType(dt));
		c10::TensorImpl *impl = t.unsafeGetTensorImpl();
		impl->set_storage_offset((int64_t)(offset[k++] / c10::elementSize(dt)));
		if (strides.empty())
			impl->set_sizes_contiguous(shape);
		else
			impl->set_sizes_and_strides(shape, strides);
		made[out.arg] = std::move(t);
	}
}

/* The device of the call: its first tensor's. */
int call_device(const Op &op, const c10::IValue *stack, bool functional)
{
	for (const Arg &a : op.args) {
		int pos = functional ? a.fpos : a.opos;
		if (a.kind != 't' || pos < 0 || !stack[pos].isTensor())
			continue;
		const at::Tensor &t = stack[pos].toTensor();
		TORCH_CHECK_VALUE(t.is_cuda(), "jitk::", op.name, ": ", a.name, " is on ",
				  t.is_cpu() ? std::string("the CPU") : t.device().str(),
				  ", not a CUDA device");
		return t.get_device();
	}
	TORCH_CHECK_VALUE(false, "jitk::", op.name, ": the call has no tensor to take a device from");
	return -1;
}

/* The CUDA kernel of either variant: the call on the stack's arguments. */
void cuda_call(Op &o, bool functional, torch::jit::Stack *stack)
{
	size_t n = functional ? (size_t)o.nf : (size_t)o.no;
	const c10::IValue *in = stack->data() + (stack->size() - n);
	int d = call_device(o, in, functional);
	jitk_op *h = handle_of(o, d);
	jitk_arg a[MAX_ARGS];
	jitk_tensor t[MAX_ARGS];
	at::Tensor made[MAX_ARGS]; /* what the functional variant returns, by argument */
	size_t na = 0;
	const std::vector<int64_t> *params = nullptr;
	Leaves<int64_t> leaves{ o, in, functional };
	Dims<int64_t> shape, strides;

	if (functional) {
		params = select_instance(leaves);
		if (one_block && o.outputs.size() > 1 && !deterministic_fill()) {
			allocate_together(o, leaves, params, d, made);
		} else {
			for (const Output &out : o.outputs) {
				const Arg &arg = o.args[(size_t)out.arg];
				output_shape(out, leaves, params, shape, strides);
				made[out.arg] = allocate(shape, strides, arg.dtype, d);
			}
		}
	}
	for (size_t i = 0; i < o.args.size(); i++) {
		const Arg &arg = o.args[i];
		int pos = functional ? arg.fpos : arg.opos;

		if (arg.kind != 't') {
			scalar_arg(o, arg, in[pos], &a[na]);
		} else {
			const at::Tensor *tp;
			if (pos < 0) {
				tp = &made[i];
			} else if (in[pos].isNone()) {
				continue; /* an optional tensor not given */
			} else if (functional && arg.io == 'x') {
				made[i] = in[pos].toTensor().clone();
				tp = &made[i];
			} else {
				tp = &in[pos].toTensor();
			}
			tensor_arg(o, arg, *tp, d, &t[na]);
			if (arg.configured && nwatched.load(std::memory_order_relaxed))
				check_watched(o, *tp, t[na].data, d);
			a[na].type = JITK_ARG_TENSOR;
			a[na].v.tensor = &t[na];
		}
		a[na].name = arg.name.c_str();
		na++;
	}
	jitk_call_info info = JITK_CALL_INFO_INIT;
	void *stream = c10::cuda::getCurrentCUDAStream((c10::DeviceIndex)d).stream();
	int rc = lib.op_call(&info, h, JITK_CALL_AUTO, a, na, stream);
	if (rc < 0)
		fail(o, rc);
	torch::jit::drop(*stack, n);
	if (functional)
		for (int r : o.returns)
			stack->emplace_back(std::move(made[r]));
}

/* The Meta kernel: the functional variant's outputs from the same shape
 * programs on symbolic sizes; .out has nothing to make. */
void meta_call(Op &o, bool functional, torch::jit::Stack *stack)
{
	size_t n = functional ? (size_t)o.nf : (size_t)o.no;
	const c10::IValue *in = stack->data() + (stack->size() - n);

	if (!functional) {
		torch::jit::drop(*stack, n);
		return;
	}
	Leaves<c10::SymInt> leaves{ o, in, true };
	const std::vector<int64_t> *params = select_instance(leaves);
	std::vector<at::Tensor> made(o.args.size());
	Dims<c10::SymInt> shape, strides;

	for (const Output &out : o.outputs) {
		auto opts = at::TensorOptions().dtype(o.args[(size_t)out.arg].dtype).device(at::kMeta);
		output_shape(out, leaves, params, shape, strides);
		made[(size_t)out.arg] = strides.empty()
			? at::empty_symint(shape, opts)
			: at::empty_strided_symint(shape, strides, opts);
	}
	for (size_t i = 0; i < o.args.size(); i++)
		if (o.args[i].kind == 't' && o.args[i].io == 'x')
			made[i] = in[o.args[i].fpos].toTensor().clone();
	torch::jit::drop(*stack, n);
	for (int r : o.returns)
		stack->emplace_back(std::move(made[(size_t)r]));
}

/* One boxed kernel: an op's variant on CUDA or Meta. */
struct Kernel final : public c10::OperatorKernel {
	std::shared_ptr<Op> op;
	bool functional, meta;

	Kernel(std::shared_ptr<Op> o, bool f, bool m) : op(std::move(o)), functional(f), meta(m) {}

	void operator()(const c10::OperatorHandle &, c10::DispatchKeySet, torch::jit::Stack *stack)
	{
		if (meta)
			meta_call(*op, functional, stack);
		else
			cuda_call(*op, functional, stack);
	}
};

torch::CppFunction kernel(const std::shared_ptr<Op> &op, bool functional, bool meta)
{
	return torch::CppFunction::makeFromBoxedFunctor(std::make_unique<Kernel>(op, functional, meta));
}

/* ------------------------------------------------------------ registration */

/* never freed: the dispatcher's registrations and the ops' Python callables
 * live as long as the process (no destructor runs after the interpreter or
 * the dispatcher are gone) */
auto *libraries = new std::vector<std::unique_ptr<torch::Library>>();
auto *registered = new std::vector<std::shared_ptr<Op>>();

at::ScalarType scalar_type_of(const std::string &dt)
{
	if (dt == "bf16") return at::kBFloat16;
	if (dt == "f32") return at::kFloat;
	if (dt == "f16") return at::kHalf;
	if (dt == "fp8_e4m3") return at::kFloat8_e4m3fn;
	if (dt == "i32") return at::kInt;
	if (dt == "i64") return at::kLong;
	if (dt == "u8") return at::kByte;
	if (dt == "i8") return at::kChar;
	throw py::value_error("dtype " + dt + " has no torch dtype");
}

Program program_of(py::handle h)
{
	return h.cast<Program>();
}

/* One symbol's table (jitk/_schema.py OpSpec.table) into an Op. */
std::shared_ptr<Op> op_of(py::dict t, py::object resolve)
{
	auto op = std::make_shared<Op>();
	op->name = t["name"].cast<std::string>();
	op->functional = t["functional"].cast<bool>();
	op->nf = t["nf"].cast<int>();
	op->no = t["no"].cast<int>();
	for (py::handle h : t["args"].cast<py::list>()) {
		py::tuple r = h.cast<py::tuple>();
		Arg a;
		a.name = r[0].cast<std::string>();
		a.kind = r[1].cast<std::string>().at(0);
		a.io = r[2].cast<std::string>().at(0);
		a.optional = r[3].cast<bool>();
		a.configured = r[4].cast<bool>();
		a.fpos = r[5].cast<int>();
		a.opos = r[6].cast<int>();
		a.dtype = at::kByte;
		a.code = { 0, 0, 0 };
		if (a.kind == 't') {
			a.dtype = scalar_type_of(r[7].cast<std::string>());
			dtype_code(a.dtype, &a.code);
		}
		op->args.push_back(a);
	}
	if (op->args.size() > MAX_ARGS)
		throw py::value_error(op->name + ": more than 48 arguments");
	for (py::handle h : t["outputs"].cast<py::list>()) {
		py::tuple r = h.cast<py::tuple>();
		Output o;
		o.arg = r[0].cast<int>();
		for (py::handle p : r[1].cast<py::list>())
			o.shape.push_back(program_of(p));
		if (!r[2].is_none())
			for (py::handle p : r[2].cast<py::list>())
				o.strides.push_back(program_of(p));
		if (o.arg < 0 || (size_t)o.arg >= op->args.size() ||
		    (!o.strides.empty() && o.strides.size() != o.shape.size()))
			throw py::value_error(op->name + ": bad output table");
		op->outputs.push_back(std::move(o));
	}
	op->returns = t["returns"].cast<std::vector<int>>();
	for (int r : op->returns)
		if (r < 0 || (size_t)r >= op->args.size())
			throw py::value_error(op->name + ": bad returns");
	op->select = t["select"].cast<bool>();
	for (py::handle h : t["instances"].cast<py::list>()) {
		py::tuple r = h.cast<py::tuple>();
		Instance inst;
		inst.params = r[0].cast<std::vector<int64_t>>();
		for (py::handle c : r[1].cast<py::list>()) {
			py::tuple ct = c.cast<py::tuple>();
			inst.checks.push_back({ ct[0].cast<int>(), ct[1].cast<int>(), program_of(ct[2]) });
		}
		op->instances.push_back(std::move(inst));
	}
	op->resolve = std::move(resolve);
	return op;
}

/* register(tables, resolve_of): define and implement jitk::S (when the
 * table says functional) and jitk::S.out for each table; resolve_of(name)
 * gives the symbol's resolve(device). */
void register_ops(py::list tables, py::object resolve_of)
{
	std::vector<std::shared_ptr<Op>> ops;
	for (py::handle h : tables) {
		py::dict t = h.cast<py::dict>();
		ops.push_back(op_of(t, resolve_of(t["name"])));
	}
	auto def = std::make_unique<torch::Library>(torch::Library::FRAGMENT, "jitk", std::nullopt,
						    __FILE__, __LINE__);
	auto cuda = std::make_unique<torch::Library>(torch::Library::IMPL, "jitk",
						     c10::DispatchKey::CUDA, __FILE__, __LINE__);
	auto meta = std::make_unique<torch::Library>(torch::Library::IMPL, "jitk",
						     c10::DispatchKey::Meta, __FILE__, __LINE__);
	size_t i = 0;
	for (py::handle h : tables) {
		py::dict t = h.cast<py::dict>();
		std::shared_ptr<Op> op = ops[i++];
		std::string out = op->name + ".out";
		if (op->functional) {
			def->def(t["schema"].cast<std::string>().c_str());
			cuda->impl(op->name.c_str(), kernel(op, true, false));
			meta->impl(op->name.c_str(), kernel(op, true, true));
		}
		def->def(t["out_schema"].cast<std::string>().c_str());
		cuda->impl(out.c_str(), kernel(op, false, false));
		meta->impl(out.c_str(), kernel(op, false, true));
		registered->push_back(op);
	}
	libraries->push_back(std::move(def));
	libraries->push_back(std::move(cuda));
	libraries->push_back(std::move(meta));
}

} /* namespace */

PYBIND11_MODULE(_torch, m)
{
	m.doc() = "jitk's PyTorch extension: the spec symbols as ops in C++ (jitk/_ops.py)";
	m.attr("torch_version") = JITK_TORCH_VERSION;
	const char *ob = std::getenv("JITK_TORCH_ONE_BLOCK");
	one_block = ob && (!std::strcmp(ob, "1") || !std::strcmp(ob, "on"));
	m.def("init", [](uintptr_t op_call, uintptr_t error_last, uintptr_t status_name,
			 uintptr_t unconfigure) {
		lib.op_call = (op_call_fn)op_call;
		lib.error_last = (error_last_fn)error_last;
		lib.status_name = (status_name_fn)status_name;
		lib.unconfigure = (unconfigure_fn)unconfigure;
	}, "init(jitk_op_call, jitk_error_last, jitk_status_name, jitk_unconfigure): the library's "
	   "functions, by address");
	m.def("register", &register_ops, "register(tables, resolve_of): define and implement the ops");
	m.def("watch", [](int device, uint64_t data, int64_t version) {
		std::lock_guard<std::mutex> g(watch_lock);
		for (Watched &w : watched)
			if (w.device == device && w.data == data) {
				w.version = version;
				return;
			}
		watched.push_back({ device, data, version });
		nwatched.store((int)watched.size());
	}, "watch(device, data, version): a configured tensor; version -1: none to compare");
	m.def("unwatch", [](int device, uint64_t data) {
		std::lock_guard<std::mutex> g(watch_lock);
		for (size_t i = 0; i < watched.size(); i++)
			if (watched[i].device == device && watched[i].data == data) {
				watched.erase(watched.begin() + (long)i);
				break;
			}
		nwatched.store((int)watched.size());
	}, "unwatch(device, data): forget a configured tensor");
	m.def("watched", []() {
		std::lock_guard<std::mutex> g(watch_lock);
		py::list out;
		for (const Watched &w : watched)
			out.append(py::make_tuple(w.device, w.data, w.version));
		return out;
	}, "watched() -> [(device, data, version)]");
}
