/* _args.h - what the package's two compiled plans (_fast.c in C, _torch.cpp
 * in C++) share: an error raised as one of the package's exception classes,
 * a Python scalar read into a jitk_arg, and the table of the configured
 * arguments a plan watches. Included by both; not installed. */
#ifndef JITK_PY_ARGS_H
#define JITK_PY_ARGS_H

#include <Python.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

#include "jitk.h"

/* Raise kind(message), kind a class whose constructor takes the message
 * (ArgumentError, ArgumentTypeError); -1. */
static inline int jitk_py_vfail(PyObject *kind, const char *fmt, va_list ap)
{
	char buf[256];
	PyObject *e;

	vsnprintf(buf, sizeof(buf), fmt, ap);
	e = PyObject_CallFunction(kind, "s", buf);
	if (e) {
		PyErr_SetObject((PyObject *)Py_TYPE(e), e);
		Py_DECREF(e);
	}
	return -1;
}

static inline int jitk_py_fail(PyObject *kind, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	jitk_py_vfail(kind, fmt, ap);
	va_end(ap);
	return -1;
}

/* v as argument name of kind 'f' (f32), 'i' (i32) or 'l' (i64) into a: 0,
 * or -1 with type_error (not a number of that kind; a bool is none) or
 * arg_error (out of the kind's range) raised. */
static inline int jitk_py_scalar(PyObject *v, char kind, const char *name, jitk_arg *a,
				 PyObject *type_error, PyObject *arg_error)
{
	long long x;
	int overflow;

	if (kind == 'f') {
		double d;

		if (PyBool_Check(v) || !(PyFloat_Check(v) || PyLong_Check(v)))
			return jitk_py_fail(type_error, "%s must be a float, not %s", name,
					    Py_TYPE(v)->tp_name);
		d = PyFloat_AsDouble(v);
		if (d == -1.0 && PyErr_Occurred())
			return -1;
		if (isfinite(d) && fabs(d) > 3.4028234663852886e38)
			return jitk_py_fail(arg_error, "%s %g does not fit in a 32-bit float", name,
					    d);
		a->type = JITK_ARG_F32;
		a->v.f32 = (float)d;
		return 0;
	}
	if (PyBool_Check(v) || !PyLong_Check(v))
		return jitk_py_fail(type_error, "%s must be an int, not %s", name,
				    Py_TYPE(v)->tp_name);
	x = PyLong_AsLongLongAndOverflow(v, &overflow);
	if (x == -1 && PyErr_Occurred())
		return -1;
	if (overflow || (kind == 'i' && (x < INT32_MIN || x > INT32_MAX)))
		return jitk_py_fail(arg_error, "%s is out of range for %s", name,
				    kind == 'i' ? "i32" : "i64");
	if (kind == 'i') {
		a->type = JITK_ARG_I32;
		a->v.i32 = (int32_t)x;
	} else {
		a->type = JITK_ARG_I64;
		a->v.i64 = x;
	}
	return 0;
}

/* The configured tensors a plan watches: idx (a tuple of argument
 * indices; NULL: none) into watched (one flag per argument, n of them,
 * kinds their kinds: 't' or 'o' for a tensor). 0, or -1 with an error
 * raised. */
static inline int jitk_py_watched(PyObject *idx, const char *kinds, Py_ssize_t n, char *watched)
{
	Py_ssize_t i;

	for (i = 0; idx && i < PyTuple_GET_SIZE(idx); i++) {
		Py_ssize_t j = PyLong_AsSsize_t(PyTuple_GET_ITEM(idx, i));

		if (j == -1 && PyErr_Occurred())
			return -1;
		if (j < 0 || j >= n || (kinds[j] != 't' && kinds[j] != 'o')) {
			PyErr_Format(PyExc_ValueError, "configured: %zd is not a tensor argument", j);
			return -1;
		}
		watched[j] = 1;
	}
	return 0;
}

#endif
