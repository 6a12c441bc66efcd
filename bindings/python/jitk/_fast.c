/* _fast.c - the op call plan of jitk's Python package, in C (the Python C
 * API only): plan(stream, *values) reads each torch.Tensor's data pointer,
 * dtype, shape and strides straight into a jitk_arg array on the stack and
 * calls jitk_op_call, with the GIL released for the call. The plan is made
 * once per op and device (jitk/_ops.py); nothing is allocated per call.
 *
 * The extension does not link libjitk: it gets jitk_op_call's address from
 * the library the package loaded (ctypes), so both always agree.
 *
 * Returns: < 0 a jitk status (the caller reads jitk_error_last), 0 done,
 * 1 FALLBACK (TRY: nothing launched), 2 done through the fallback, -100 a
 * tensor that is not a plain torch.Tensor (the caller takes the
 * dispatcher's path; a kernel's plan, made with subclasses, reads a
 * subclass's tensor as torch.Tensor's: under the dispatcher it is one).
 * Bad values raise ArgumentError / ArgumentTypeError.
 *
 * A plan made with configured=(indices, versions, stale) looks each
 * tensor at those indices up in versions (a Runtime's configured tensors:
 * data address -> its _version at configure, or None) and calls
 * stale(address) before the call when the tensor's _version moved (an
 * in-place write after configure): the library then no longer takes the
 * address as validated. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "_args.h"
#include "jitk.h"

#define NOT_PLAIN (-100)
#define MAX_DTYPES 16

/* the tensor attributes a call reads */
enum { A_GET_DEVICE, A_DTYPE, A_DATA_PTR, A_SHAPE, A_STRIDE, N_ATTRS };

typedef int (*op_call_fn)(jitk_call_info *, jitk_op *, jitk_call_mode, const jitk_arg *, size_t,
			  jitk_stream);

typedef struct {
	PyObject_HEAD
	jitk_op *op;
	op_call_fn call;
	int mode;
	int device;
	Py_ssize_t n;
	char **names;
	char *kinds; /* t tensor, o optional tensor, i i32, l i64, f f32 */
	PyObject *dt_obj[MAX_DTYPES];
	jitk_dtype dt_code[MAX_DTYPES];
	int ndt;
	PyObject *plain[2];
	int subclasses; /* a subclass of plain[0] is read as plain[0] (a kernel's plan) */
	/* per plain type, what a read looks up: the class's attribute for
	 * each of get_device, dtype, data_ptr, shape, stride (looked up once,
	 * then called with the tensor: no lookup along the type's MRO and no
	 * bound method per call) */
	PyObject *attr[2][N_ATTRS];
	PyObject *arg_error, *type_error;
	char watched[32];   /* per argument: a configured tensor */
	PyObject *versions; /* dict: data address -> version (or None); NULL: none watched */
	PyObject *stale;    /* stale(address) */
	vectorcallfunc vectorcall;
} Plan;

static PyObject *s_data_ptr, *s_shape, *s_stride, *s_dtype, *s_get_device, *s_version;
static PyObject **attr_names[N_ATTRS] = { &s_get_device, &s_dtype, &s_data_ptr, &s_shape,
					  &s_stride };

static void plan_dealloc(Plan *p)
{
	Py_ssize_t i;
	int j;

	if (p->names)
		for (i = 0; i < p->n; i++)
			PyMem_Free(p->names[i]);
	PyMem_Free(p->names);
	PyMem_Free(p->kinds);
	for (j = 0; j < p->ndt; j++)
		Py_XDECREF(p->dt_obj[j]);
	Py_XDECREF(p->plain[0]);
	Py_XDECREF(p->plain[1]);
	for (j = 0; j < 2 * N_ATTRS; j++)
		Py_XDECREF(p->attr[j / N_ATTRS][j % N_ATTRS]);
	Py_XDECREF(p->arg_error);
	Py_XDECREF(p->type_error);
	Py_XDECREF(p->versions);
	Py_XDECREF(p->stale);
	Py_TYPE(p)->tp_free((PyObject *)p);
}

/* An int tuple (torch.Size or a stride tuple) into out; its length. */
static int read_ints(PyObject *tup, int64_t *out, int max)
{
	Py_ssize_t i, n;

	if (!PyTuple_Check(tup))
		return -2;
	n = PyTuple_GET_SIZE(tup);
	if (n > max)
		return -3;
	for (i = 0; i < n; i++) {
		long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(tup, i));

		if (v == -1 && PyErr_Occurred())
			return -1;
		out[i] = v;
	}
	return (int)n;
}

/* Attribute a of tensor v (of plain type ty): a descriptor's value (dtype,
 * shape), a method's result (the others). New reference, NULL on error. */
static PyObject *attr_of(Plan *p, int ty, int a, PyObject *v)
{
	PyObject *d = p->attr[ty][a];
	descrgetfunc get;

	if (!d) /* not an attribute of the class: of the instance */
		return a == A_DTYPE || a == A_SHAPE ? PyObject_GetAttr(v, *attr_names[a])
						    : PyObject_CallMethodNoArgs(v, *attr_names[a]);
	if (a == A_DTYPE || a == A_SHAPE)
		return (get = Py_TYPE(d)->tp_descr_get) ? get(d, v, (PyObject *)Py_TYPE(v))
							: PyObject_GetAttr(v, *attr_names[a]);
	return PyObject_Vectorcall(d, &v, 1, NULL);
}

/* 0 done, 1 not a plain tensor, -1 error raised. */
static int read_tensor(Plan *p, PyObject *v, const char *name, jitk_tensor *t)
{
	PyObject *r;
	long dev;
	int j, n, m, ty;

	if ((PyObject *)Py_TYPE(v) == p->plain[0])
		ty = 0;
	else if ((PyObject *)Py_TYPE(v) == p->plain[1])
		ty = 1;
	else if (p->subclasses && PyObject_TypeCheck(v, (PyTypeObject *)p->plain[0]))
		ty = 0;
	else
		return 1;
	if (!(r = attr_of(p, ty, A_GET_DEVICE, v)))
		return -1;
	dev = PyLong_AsLong(r);
	Py_DECREF(r);
	if (dev != p->device && dev < 0)
		return jitk_py_fail(p->arg_error, "%s is on the CPU, not cuda:%d", name, p->device);
	if (dev != p->device)
		return jitk_py_fail(p->arg_error, "%s is on cuda:%ld, not cuda:%d", name, dev, p->device);
	if (!(r = attr_of(p, ty, A_DTYPE, v)))
		return -1;
	for (j = 0; j < p->ndt && p->dt_obj[j] != r; j++)
		;
	if (j == p->ndt) {
		PyObject *s = PyObject_Str(r);

		jitk_py_fail(p->type_error, "%s: dtype %s is not a kernel argument type", name,
			 s ? PyUnicode_AsUTF8(s) : "?");
		Py_XDECREF(s);
		Py_DECREF(r);
		return -1;
	}
	Py_DECREF(r);
	memset(t, 0, sizeof(*t));
	t->dtype = p->dt_code[j];
	if (!(r = attr_of(p, ty, A_DATA_PTR, v)))
		return -1;
	t->data = PyLong_AsUnsignedLongLong(r);
	Py_DECREF(r);
	if (PyErr_Occurred())
		return -1;
	if (!(r = attr_of(p, ty, A_SHAPE, v)))
		return -1;
	n = read_ints(r, t->shape, JITK_MAX_DIMS);
	Py_DECREF(r);
	if (n == -3)
		return jitk_py_fail(p->arg_error, "%s has more than %d dimensions", name, JITK_MAX_DIMS);
	if (n < 0)
		return n == -1 ? -1 : jitk_py_fail(p->type_error, "%s: shape is not a tuple", name);
	if (!(r = attr_of(p, ty, A_STRIDE, v)))
		return -1;
	m = read_ints(r, t->strides, JITK_MAX_DIMS);
	Py_DECREF(r);
	if (m != n)
		return m == -1 ? -1 : jitk_py_fail(p->type_error, "%s: bad strides", name);
	t->ndim = n;
	return 0;
}

/* A configured tensor v at data: stale(data) when its version is not the
 * one configure saw (a tensor without _version is taken as written). 0, or
 * -1 with an error raised. */
static int watch(Plan *p, PyObject *v, uint64_t data)
{
	PyObject *key, *seen, *now, *r;
	int same;

	if (!(key = PyLong_FromUnsignedLongLong(data)))
		return -1;
	seen = PyDict_GetItemWithError(p->versions, key); /* borrowed */
	if (!seen || seen == Py_None) {
		Py_DECREF(key);
		return PyErr_Occurred() ? -1 : 0;
	}
	Py_INCREF(seen);
	if (!(now = PyObject_GetAttr(v, s_version))) {
		PyErr_Clear(); /* no counter to compare: not the tensor configured */
		same = 0;
	} else {
		same = PyObject_RichCompareBool(now, seen, Py_EQ);
		Py_DECREF(now);
	}
	Py_DECREF(seen);
	if (same < 0) {
		Py_DECREF(key);
		return -1;
	}
	if (same) {
		Py_DECREF(key);
		return 0;
	}
	r = PyObject_CallOneArg(p->stale, key);
	Py_DECREF(key);
	Py_XDECREF(r);
	return r ? 0 : -1;
}

static PyObject *plan_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
				 PyObject *kwnames)
{
	Plan *p = (Plan *)self;
	Py_ssize_t nargs = PyVectorcall_NARGS(nargsf), i;
	jitk_arg a[32];
	jitk_tensor t[32];
	jitk_call_info info = JITK_CALL_INFO_INIT;
	size_t n = 0;
	void *stream;
	int rc;

	if (kwnames && PyTuple_GET_SIZE(kwnames))
		return PyErr_Format(PyExc_TypeError, "a plan takes positional arguments only");
	if (nargs != p->n + 1)
		return PyErr_Format(PyExc_TypeError, "a plan takes %zd values and a stream, not %zd",
				    p->n, nargs);
	stream = PyLong_AsVoidPtr(args[0]);
	if (PyErr_Occurred())
		return NULL;
	for (i = 0; i < p->n; i++) {
		PyObject *v = args[i + 1];
		char k = p->kinds[i];

		if (k == 't' || k == 'o') {
			if (v == Py_None) {
				if (k == 'o')
					continue;
				jitk_py_fail(p->type_error, "%s must be a torch.Tensor, not None",
					 p->names[i]);
				return NULL;
			}
			rc = read_tensor(p, v, p->names[i], &t[n]);
			if (rc < 0)
				return NULL;
			if (rc > 0)
				return PyLong_FromLong(NOT_PLAIN);
			if (p->watched[i] && PyDict_GET_SIZE(p->versions) &&
			    watch(p, v, t[n].data) < 0)
				return NULL;
			a[n].type = JITK_ARG_TENSOR;
			a[n].v.tensor = &t[n];
		} else if (jitk_py_scalar(v, k, p->names[i], &a[n], p->type_error, p->arg_error) < 0) {
			return NULL;
		}
		a[n].name = p->names[i];
		n++;
	}
	Py_BEGIN_ALLOW_THREADS
	rc = p->call(&info, p->op, (jitk_call_mode)p->mode, a, n, stream);
	Py_END_ALLOW_THREADS
	if (rc == 0 && info.fallback)
		rc = 2;
	return PyLong_FromLong(rc);
}

static PyObject *plan_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	unsigned long long op, fn;
	int mode, device;
	PyObject *names, *dtypes, *plain, *aerr, *terr, *cfg = Py_None, *idx = NULL;
	PyObject *versions = NULL, *stale = NULL;
	const char *kinds;
	Plan *p;
	Py_ssize_t i;

	int subclasses = 0;

	if (!PyArg_ParseTuple(args, "KKiiO!sO!O!OO|pO", &op, &fn, &mode, &device, &PyTuple_Type,
			      &names, &kinds, &PyTuple_Type, &dtypes, &PyTuple_Type, &plain, &aerr,
			      &terr, &subclasses, &cfg))
		return NULL;
	if (cfg != Py_None &&
	    (!PyArg_ParseTuple(cfg, "O!O!O", &PyTuple_Type, &idx, &PyDict_Type, &versions, &stale) ||
	     !PyCallable_Check(stale))) {
		PyErr_Clear();
		return PyErr_Format(PyExc_TypeError, "configured must be None or (indices, a dict, "
				    "a callable)");
	}
	if (PyTuple_GET_SIZE(names) != (Py_ssize_t)strlen(kinds) || PyTuple_GET_SIZE(names) > 32 ||
	    PyTuple_GET_SIZE(plain) != 2 || PyTuple_GET_SIZE(dtypes) > MAX_DTYPES)
		return PyErr_Format(PyExc_ValueError, "bad plan tables");
	if (!PyType_Check(PyTuple_GET_ITEM(plain, 0)) || !PyType_Check(PyTuple_GET_ITEM(plain, 1)))
		return PyErr_Format(PyExc_TypeError, "plain_types must be two types");
	if (!(p = (Plan *)type->tp_alloc(type, 0)))
		return NULL;
	p->op = (jitk_op *)(uintptr_t)op;
	p->call = (op_call_fn)(uintptr_t)fn;
	p->mode = mode;
	p->device = device;
	p->subclasses = subclasses;
	p->n = PyTuple_GET_SIZE(names);
	p->names = PyMem_Calloc(p->n ? p->n : 1, sizeof(char *));
	p->kinds = PyMem_Malloc(strlen(kinds) + 1);
	if (!p->names || !p->kinds) {
		Py_DECREF(p);
		return PyErr_NoMemory();
	}
	memcpy(p->kinds, kinds, strlen(kinds) + 1);
	for (i = 0; i < p->n; i++) {
		const char *s = PyUnicode_AsUTF8(PyTuple_GET_ITEM(names, i));

		if (!s || !(p->names[i] = PyMem_Malloc(strlen(s) + 1))) {
			Py_DECREF(p);
			return s ? PyErr_NoMemory() : NULL;
		}
		memcpy(p->names[i], s, strlen(s) + 1);
	}
	for (i = 0; i < PyTuple_GET_SIZE(dtypes); i++) {
		PyObject *e = PyTuple_GET_ITEM(dtypes, i);
		int code, bits;

		if (!PyArg_ParseTuple(e, "Oii", &p->dt_obj[i], &code, &bits)) {
			p->dt_obj[i] = NULL;
			Py_DECREF(p);
			return NULL;
		}
		Py_INCREF(p->dt_obj[i]);
		p->dt_code[i].code = (uint8_t)code;
		p->dt_code[i].bits = (uint8_t)bits;
		p->dt_code[i].lanes = 1;
		p->ndt = (int)i + 1;
	}
	p->plain[0] = PyTuple_GET_ITEM(plain, 0);
	p->plain[1] = PyTuple_GET_ITEM(plain, 1);
	Py_INCREF(p->plain[0]);
	Py_INCREF(p->plain[1]);
	for (i = 0; i < 2 * N_ATTRS; i++)
		if (!(p->attr[i / N_ATTRS][i % N_ATTRS] =
			      PyObject_GetAttr(p->plain[i / N_ATTRS], *attr_names[i % N_ATTRS]))) {
			if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
				Py_DECREF(p);
				return NULL;
			}
			PyErr_Clear(); /* an instance attribute, looked up per call */
		}
	p->arg_error = aerr;
	p->type_error = terr;
	Py_INCREF(aerr);
	Py_INCREF(terr);
	if (jitk_py_watched(idx, p->kinds, p->n, p->watched) < 0) {
		Py_DECREF(p);
		return NULL;
	}
	if (idx) {
		p->versions = versions;
		p->stale = stale;
		Py_INCREF(versions);
		Py_INCREF(stale);
	}
	p->vectorcall = plan_vectorcall;
	return (PyObject *)p;
}

static PyTypeObject PlanType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "jitk._fast.Plan",
	.tp_basicsize = sizeof(Plan),
	.tp_dealloc = (destructor)plan_dealloc,
	.tp_vectorcall_offset = offsetof(Plan, vectorcall),
	.tp_call = PyVectorcall_Call,
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
	.tp_doc = "Plan(op, jitk_op_call, mode, device, names, kinds, dtypes, plain_types, "
		  "ArgumentError, ArgumentTypeError, subclasses=False, configured=None): "
		  "plan(stream, *values) -> status",
	.tp_new = plan_new,
};

static struct PyModuleDef fast_module = {
	PyModuleDef_HEAD_INIT, "jitk._fast", "jitk's op calls in C", -1, NULL,
};

PyMODINIT_FUNC PyInit__fast(void)
{
	PyObject *m;

	if (PyType_Ready(&PlanType) < 0)
		return NULL;
	s_data_ptr = PyUnicode_InternFromString("data_ptr");
	s_shape = PyUnicode_InternFromString("shape");
	s_stride = PyUnicode_InternFromString("stride");
	s_dtype = PyUnicode_InternFromString("dtype");
	s_get_device = PyUnicode_InternFromString("get_device");
	s_version = PyUnicode_InternFromString("_version");
	if (!s_data_ptr || !s_shape || !s_stride || !s_dtype || !s_get_device || !s_version)
		return NULL;
	if (!(m = PyModule_Create(&fast_module)))
		return NULL;
	Py_INCREF(&PlanType);
	if (PyModule_AddObject(m, "Plan", (PyObject *)&PlanType) < 0) {
		Py_DECREF(&PlanType);
		Py_DECREF(m);
		return NULL;
	}
	return m;
}
