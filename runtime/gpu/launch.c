/* launch.c - the typed entry points of the modulated-norm family and the
 * static quantizer, with the reference's fallback semantics.
 *
 * These are written by hand (one small table per family) rather than
 * generated: they carry the family's glue - which symbol is the fused one,
 * which arguments the split path passes on - that a spec does not say.
 * Arguments are mapped by name, so the spec may reorder them freely. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/runtime.h"

enum { A_Y, A_Q, A_ROUT, A_X, A_RES, A_GATE, A_SCALE, A_SHIFT, A_ISCALE,
       A_ROWS, A_EPS };
static const char *const norm_arg_names[] = {
	"y", "q", "residual_out", "x", "residual", "gate", "scale", "shift",
	"input_scale", "rows", "eps",
};
enum { Q_Q, Q_X, Q_ISCALE, Q_N };
static const char *const quant_arg_names[] = { "q", "x", "input_scale", "n" };

static const char *const typed_names[TYPED_COUNT] = {
	"fused_norm_scale_shift", "fused_scale_residual_norm_scale_shift",
	"fused_norm_scale_shift_fp8", "fused_scale_residual_norm_scale_shift_fp8",
	"static_quant_fp8",
};

static int family_arg(const spec_family *f, const char *name)
{
	size_t i;

	for (i = 0; i < f->nargs; i++)
		if (!strcmp(f->args[i].name, name))
			return (int)i;
	return -1;
}

int jitk__typed_init(jitk_runtime *rt)
{
	const spec_set *set = rt->comp->specs;
	const spec_family *norm = NULL, *quant = NULL;
	size_t i, t;

	for (t = 0; t < TYPED_COUNT; t++) {
		jitk_typed *ty = &rt->typed[t];
		size_t n = 0;

		for (i = 0; i < set->ninsts; i++)
			n += !strcmp(set->insts[i].sym->name, typed_names[t]);
		ty->hidden = calloc(n + 1, sizeof(*ty->hidden));
		ty->inst = calloc(n + 1, sizeof(*ty->inst));
		if (!ty->hidden || !ty->inst)
			return jitk__error(JITK_ENOMEM, "out of memory");
		for (i = 0; i < set->ninsts; i++) {
			const spec_instance *in = &set->insts[i];
			int p;

			if (strcmp(in->sym->name, typed_names[t]))
				continue;
			p = jitk__spec_param_index(in->sym->fam, "hidden");
			ty->hidden[ty->n] = p >= 0 ? in->vals[p] : 0;
			ty->inst[ty->n++] = i;
			if (t == TYPED_QUANT)
				quant = in->sym->fam;
			else
				norm = in->sym->fam;
		}
	}
	rt->norm_fam = norm;
	rt->quant_fam = quant;
	for (i = 0; i < JITK_ARRAY_SIZE(norm_arg_names); i++)
		rt->norm_arg[i] = norm ? family_arg(norm, norm_arg_names[i]) : -1;
	for (i = 0; i < JITK_ARRAY_SIZE(quant_arg_names); i++)
		rt->quant_arg[i] = quant ? family_arg(quant, quant_arg_names[i]) : -1;
	return 0;
}

void jitk__typed_free(jitk_runtime *rt)
{
	size_t t;

	for (t = 0; t < TYPED_COUNT; t++) {
		free(rt->typed[t].hidden);
		free(rt->typed[t].inst);
	}
}

static int typed_instance(jitk_runtime *rt, int which, int64_t hidden, size_t *inst)
{
	const jitk_typed *ty = &rt->typed[which];
	size_t i;

	for (i = 0; i < ty->n; i++)
		if (ty->hidden[i] == hidden || which == TYPED_QUANT) {
			*inst = ty->inst[i];
			return 0;
		}
	return -1;
}

/* Fill the family's argument values from a jitk_norm_args. */
static int norm_values(jitk_runtime *rt, const jitk_norm_args *a, uint64_t *v)
{
	const uint64_t src[] = {
		a->y, a->q, a->residual_out, a->x, a->residual, a->gate, a->scale,
		a->shift, a->input_scale, (uint64_t)a->rows, 0,
	};
	size_t i;
	int rc;

	/* the roles index v: the family must fit it */
	if (rt->norm_fam && (rc = jitk__family_fits(rt->norm_fam)))
		return rc;
	memset(v, 0, sizeof(uint64_t) * JITK_MAX_ARGS);
	for (i = 0; i < JITK_ARRAY_SIZE(src); i++) {
		if (rt->norm_arg[i] < 0)
			return jitk__error(JITK_ESPEC, "the norm family's spec has no argument '%s'",
					   norm_arg_names[i]);
		v[rt->norm_arg[i]] = src[i];
	}
	memcpy(&v[rt->norm_arg[A_EPS]], &a->eps, sizeof(float));
	return 0;
}

static int common_checks(const char *fn, jitk_runtime *rt, const jitk_norm_args *a)
{
	if (!rt || !a)
		return jitk__error(JITK_EINVAL, "%s: NULL argument", fn);
	if (a->rows < 0)
		return jitk__error(JITK_EINVAL, "%s: rows is negative (%lld)", fn, (long long)a->rows);
	if (!(a->eps >= 0.0f) || isinf(a->eps))
		return jitk__error(JITK_EINVAL, "%s: eps must be finite and not negative", fn);
	return 0;
}

static int norm_plain(jitk_runtime *rt, int which, const char *fn,
		      const jitk_norm_args *a, jitk_stream stream)
{
	uint64_t v[JITK_MAX_ARGS];
	jitk_kernel *k;
	size_t inst;
	int rc;

	if ((rc = common_checks(fn, rt, a)))
		return rc;
	if (a->weight || a->bias)
		return jitk__error(JITK_EINVAL, "%s: affine weight/bias are not supported", fn);
	if (typed_instance(rt, which, a->hidden, &inst))
		return jitk__error(rt->typed[which].n ? JITK_EINVAL : JITK_ENOENT,
				   "%s: no instance for hidden=%d (see jitk list)", fn, a->hidden);
	if ((rc = norm_values(rt, a, v)))
		return rc;
	if (a->rows == 0)
		return JITK_OK;
	if ((rc = jitk__resolve(&k, rt, inst, 1, stream)))
		return rc;
	return jitk__launch_values(k, v, stream);
}

int jitk_fused_norm_scale_shift(jitk_runtime *rt, const jitk_norm_args *a,
				jitk_stream stream)
{
	return norm_plain(rt, TYPED_NORM, __func__, a, stream);
}

int jitk_fused_scale_residual_norm_scale_shift(jitk_runtime *rt,
					       const jitk_norm_args *a,
					       jitk_stream stream)
{
	return norm_plain(rt, TYPED_RESIDUAL, __func__, a, stream);
}

int jitk_fused_norm_scale_shift_fp8(jitk_runtime *rt, const jitk_norm_args *a,
				    jitk_stream stream)
{
	return norm_plain(rt, TYPED_NORM_FP8, __func__, a, stream);
}

int jitk_fused_scale_residual_norm_scale_shift_fp8(jitk_runtime *rt,
						   const jitk_norm_args *a,
						   jitk_stream stream)
{
	return norm_plain(rt, TYPED_RESIDUAL_FP8, __func__, a, stream);
}

int jitk_static_quant_fp8(jitk_runtime *rt, jitk_devptr q, jitk_devptr x,
			  jitk_devptr input_scale, int64_t n, jitk_stream stream)
{
	uint64_t v[JITK_MAX_ARGS];
	jitk_kernel *k;
	size_t inst, i;
	int rc;

	if (!rt)
		return jitk__error(JITK_EINVAL, "jitk_static_quant_fp8: NULL runtime");
	if (n < 0)
		return jitk__error(JITK_EINVAL, "jitk_static_quant_fp8: n is negative");
	if (typed_instance(rt, TYPED_QUANT, 0, &inst))
		return jitk__error(JITK_ENOENT, "no symbol static_quant_fp8 in the specs");
	if ((rc = jitk__family_fits(rt->quant_fam)))
		return rc;
	for (i = 0; i < JITK_ARRAY_SIZE(quant_arg_names); i++)
		if (rt->quant_arg[i] < 0)
			return jitk__error(JITK_ESPEC, "static_quant_fp8's spec has no argument '%s'",
					   quant_arg_names[i]);
	if (n == 0)
		return JITK_OK;
	memset(v, 0, sizeof(v));
	v[rt->quant_arg[Q_Q]] = q;
	v[rt->quant_arg[Q_X]] = x;
	v[rt->quant_arg[Q_ISCALE]] = input_scale;
	v[rt->quant_arg[Q_N]] = (uint64_t)n;
	if ((rc = jitk__resolve(&k, rt, inst, 1, stream)))
		return rc;
	return jitk__launch_values(k, v, stream);
}

/* ------------------------------------------------------ input scales */

static int scale_configured(jitk_runtime *rt, jitk_devptr p)
{
	size_t n = atomic_load_explicit(&rt->nscales, memory_order_acquire), i;

	for (i = 0; i < n; i++)
		if (atomic_load_explicit(&rt->scales[i], memory_order_relaxed) == p)
			return 1;
	return 0;
}

int jitk_configure_input_scale(jitk_runtime *rt, jitk_devptr input_scale)
{
	float v = 0.0f;
	int r, rc = JITK_OK;

	if (!rt || !input_scale)
		return jitk__error(JITK_EINVAL, "jitk_configure_input_scale: NULL argument");
	if (input_scale % 4)
		return jitk__error(JITK_EINVAL, "input_scale 0x%llx is not 4-byte aligned",
				   (unsigned long long)input_scale);
	if ((r = rt->ops->read(rt->impl, &v, input_scale, sizeof(v))))
		return jitk__error(JITK_EDRIVER, "reading input_scale 0x%llx failed: %s",
				   (unsigned long long)input_scale, rt->ops->error_name(rt->impl, r));
	if (!isfinite(v) || !(v > 0.0f))
		return jitk__error(JITK_EINVAL,
				   "input_scale 0x%llx holds %g: it must be one finite, positive fp32",
				   (unsigned long long)input_scale, (double)v);
	pthread_mutex_lock(&rt->scales_mu);
	if (!scale_configured(rt, input_scale)) {
		size_t n = atomic_load(&rt->nscales);

		if (n == JITK_MAX_SCALES) {
			rc = jitk__error(JITK_ENOMEM, "more than %d input scales configured",
					 JITK_MAX_SCALES);
		} else {
			atomic_store_explicit(&rt->scales[n], input_scale, memory_order_relaxed);
			atomic_store_explicit(&rt->nscales, n + 1, memory_order_release);
		}
	}
	pthread_mutex_unlock(&rt->scales_mu);
	return rc;
}

/* ------------------------------------------------------ try_ and auto */

/* The guards of the reference's try_ functions. On a guard failure:
 * JITK_FALLBACK and *why (a static or slot-owned string). Otherwise the
 * resolved fused kernel. */
static int fused_guards(jitk_runtime *rt, int which, const jitk_norm_args *a,
			jitk_stream stream, jitk_kernel **k, const char **why)
{
	static const int roles[] = { A_Y, A_Q, A_ROUT, A_X, A_RES, A_GATE, A_SCALE, A_SHIFT };
	static const char *const what[] = {
		"y is NULL or not aligned to the fused kernel's vector width",
		"q is NULL or not aligned to the fused kernel's vector width",
		"residual_out is NULL or not aligned to the fused kernel's vector width",
		"x is NULL or not aligned to the fused kernel's vector width",
		"residual is NULL or not aligned to the fused kernel's vector width",
		"gate is NULL or not aligned to the fused kernel's vector width",
		"scale is NULL or not aligned to the fused kernel's vector width",
		"shift is NULL or not aligned to the fused kernel's vector width",
	};
	const jitk_devptr vals[] = { a->y, a->q, a->residual_out, a->x, a->residual,
				     a->gate, a->scale, a->shift };
	size_t inst, i;
	int rc;

	if (a->weight || a->bias) {
		*why = "affine LayerNorm (weight/bias) is not fused";
		return JITK_FALLBACK;
	}
	if (typed_instance(rt, which, a->hidden, &inst)) {
		*why = "hidden size has no fused instance in the specs";
		return JITK_FALLBACK;
	}
	if ((*why = jitk__unavailable_reason(rt, inst)))
		return JITK_FALLBACK;
	if (!a->input_scale || !scale_configured(rt, a->input_scale)) {
		*why = "input_scale was not validated with jitk_configure_input_scale";
		return JITK_FALLBACK;
	}
	rc = jitk__resolve(k, rt, inst, 1, stream);
	if (rc == JITK_EARCH) {
		*why = jitk__unavailable_reason(rt, inst);
		return JITK_FALLBACK;
	}
	if (rc)
		return rc;
	for (i = 0; i < JITK_ARRAY_SIZE(roles); i++) {
		int fa = rt->norm_arg[roles[i]];

		if (fa < 0 || !(*k)->present[fa])
			continue;
		if (!vals[i] || vals[i] % (uint64_t)(*k)->align[fa]) {
			*why = what[i];
			return JITK_FALLBACK;
		}
	}
	return 0;
}

static int try_fused(jitk_runtime *rt, int which, const char *fn,
		     const jitk_norm_args *a, jitk_stream stream, const char **reason)
{
	uint64_t v[JITK_MAX_ARGS];
	const char *why = NULL;
	jitk_kernel *k = NULL;
	int rc;

	if (reason)
		*reason = NULL;
	if ((rc = common_checks(fn, rt, a)))
		return rc;
	rc = fused_guards(rt, which, a, stream, &k, &why);
	if (rc == JITK_FALLBACK) {
		if (reason)
			*reason = why;
		jitk__error_clear();
		return JITK_FALLBACK;
	}
	if (rc)
		return rc;
	if ((rc = norm_values(rt, a, v)))
		return rc;
	return jitk__launch_values(k, v, stream);
}

int jitk_try_fused_norm_scale_shift_fp8(jitk_runtime *rt,
					const jitk_norm_args *a,
					jitk_stream stream, const char **reason)
{
	return try_fused(rt, TYPED_NORM_FP8, __func__, a, stream, reason);
}

int jitk_try_fused_scale_residual_norm_scale_shift_fp8(jitk_runtime *rt,
						       const jitk_norm_args *a,
						       jitk_stream stream,
						       const char **reason)
{
	return try_fused(rt, TYPED_RESIDUAL_FP8, __func__, a, stream, reason);
}

static int auto_path(jitk_runtime *rt, int fused, int plain, const char *fn,
		     const jitk_norm_args *a, jitk_stream stream, int *used_fused)
{
	int rc;

	if (used_fused)
		*used_fused = 0;
	rc = try_fused(rt, fused, fn, a, stream, NULL);
	if (rc != JITK_FALLBACK) {
		if (!rc && used_fused)
			*used_fused = 1;
		return rc;
	}
	/* The split path: the same norm without quantization, then the
	 * quantizer over its y - the same bytes as the fused kernel. */
	if ((rc = norm_plain(rt, plain, fn, a, stream)))
		return rc;
	return jitk_static_quant_fp8(rt, a->q, a->y, a->input_scale,
				     a->rows * (int64_t)a->hidden, stream);
}

int jitk_auto_norm_scale_shift_fp8(jitk_runtime *rt, const jitk_norm_args *a,
				   jitk_stream stream, int *used_fused)
{
	return auto_path(rt, TYPED_NORM_FP8, TYPED_NORM, __func__, a, stream, used_fused);
}

int jitk_auto_scale_residual_norm_scale_shift_fp8(jitk_runtime *rt,
						  const jitk_norm_args *a,
						  jitk_stream stream,
						  int *used_fused)
{
	return auto_path(rt, TYPED_RESIDUAL_FP8, TYPED_RESIDUAL, __func__, a, stream,
			 used_fused);
}
