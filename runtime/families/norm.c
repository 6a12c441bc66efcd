/* norm.c - the norm family's typed entry points, over the public generic
 * call only: jitk_norm_args becomes named tensors, the spec does the rest
 * (instance from hidden, every check, the fallback). */
#include <string.h>

#include "jitk.h"
#include "jitk/norm.h"

/* The arguments of a jitk_norm_args as named tensors and scalars; the
 * symbol ignores none of them, so the names it does not take are left out
 * by the caller's choice of fields. */
typedef struct {
	jitk_tensor t[9];
	jitk_arg a[11];
	size_t n;
} norm_call;

static void tensor(norm_call *c, const char *name, jitk_devptr p, jitk_dtype dt, int nd,
		   int64_t rows, int64_t hidden)
{
	const int64_t shape[2] = { nd == 2 ? rows : hidden, hidden };
	jitk_tensor *t = &c->t[c->n < 9 ? c->n : 8];

	jitk_tensor_contiguous(t, p, dt, nd, shape);
	c->a[c->n].name = name;
	c->a[c->n].type = JITK_ARG_TENSOR;
	c->a[c->n].v.tensor = t;
	c->n++;
}

/* which: bit 1 residual, bit 2 fp8. */
static void norm_args(norm_call *c, const jitk_norm_args *a, unsigned which)
{
	const jitk_dtype bf16 = JITK_DTYPE_BF16, fp8 = JITK_DTYPE_FP8_E4M3, f32 = JITK_DTYPE_F32;

	memset(c, 0, sizeof(*c));
	tensor(c, "y", a->y, bf16, 2, a->rows, a->hidden);
	if (which & 2)
		tensor(c, "q", a->q, fp8, 2, a->rows, a->hidden);
	if (which & 1)
		tensor(c, "residual_out", a->residual_out, bf16, 2, a->rows, a->hidden);
	tensor(c, "x", a->x, bf16, 2, a->rows, a->hidden);
	if (which & 1) {
		tensor(c, "residual", a->residual, bf16, 2, a->rows, a->hidden);
		tensor(c, "gate", a->gate, bf16, 1, a->rows, a->hidden);
	}
	tensor(c, "scale", a->scale, bf16, 1, a->rows, a->hidden);
	tensor(c, "shift", a->shift, bf16, 1, a->rows, a->hidden);
	if (which & 2)
		tensor(c, "input_scale", a->input_scale, f32, 1, 1, 1);
	c->a[c->n].name = "eps";
	c->a[c->n].type = JITK_ARG_F32;
	c->a[c->n].v.f32 = a->eps;
	c->n++;
}

static int norm_call_run(jitk_call_info *info, jitk_runtime *rt, const char *sym,
			 unsigned which, jitk_call_mode mode, const jitk_norm_args *a,
			 jitk_stream stream)
{
	norm_call c;

	if (!a)
		return jitk_call(info, rt, sym, mode, NULL, 0, stream);
	if (a->rows < 0 || a->hidden < 0) {
		/* Shapes cannot be negative: say so in the caller's terms. */
		jitk_tensor t;
		const int64_t bad[1] = { a->rows < 0 ? a->rows : a->hidden };

		return jitk_tensor_contiguous(&t, 0, (jitk_dtype)JITK_DTYPE_BF16, 1, bad);
	}
	norm_args(&c, a, which);
	return jitk_call(info, rt, sym, mode, c.a, c.n, stream);
}

int jitk_fused_norm_scale_shift(jitk_runtime *rt, const jitk_norm_args *a, jitk_stream stream)
{
	return norm_call_run(NULL, rt, "fused_norm_scale_shift", 0, JITK_CALL_STRICT, a, stream);
}

int jitk_fused_scale_residual_norm_scale_shift(jitk_runtime *rt, const jitk_norm_args *a,
					       jitk_stream stream)
{
	return norm_call_run(NULL, rt, "fused_scale_residual_norm_scale_shift", 1,
			     JITK_CALL_STRICT, a, stream);
}

int jitk_fused_norm_scale_shift_fp8(jitk_runtime *rt, const jitk_norm_args *a,
				    jitk_stream stream)
{
	return norm_call_run(NULL, rt, "fused_norm_scale_shift_fp8", 2, JITK_CALL_STRICT, a,
			     stream);
}

int jitk_fused_scale_residual_norm_scale_shift_fp8(jitk_runtime *rt, const jitk_norm_args *a,
						   jitk_stream stream)
{
	return norm_call_run(NULL, rt, "fused_scale_residual_norm_scale_shift_fp8", 3,
			     JITK_CALL_STRICT, a, stream);
}

int jitk_static_quant_fp8(jitk_runtime *rt, jitk_devptr q, jitk_devptr x,
			  jitk_devptr input_scale, int64_t n, jitk_stream stream)
{
	const jitk_dtype bf16 = JITK_DTYPE_BF16, fp8 = JITK_DTYPE_FP8_E4M3, f32 = JITK_DTYPE_F32;
	const int64_t one = 1;
	jitk_tensor t[3];
	jitk_arg a[3];
	int rc;

	if ((rc = jitk_tensor_contiguous(&t[0], q, fp8, 1, &n)) ||
	    (rc = jitk_tensor_contiguous(&t[1], x, bf16, 1, &n)) ||
	    (rc = jitk_tensor_contiguous(&t[2], input_scale, f32, 1, &one)))
		return rc;
	a[0].name = "q";
	a[1].name = "x";
	a[2].name = "input_scale";
	for (rc = 0; rc < 3; rc++) {
		a[rc].type = JITK_ARG_TENSOR;
		a[rc].v.tensor = &t[rc];
	}
	return jitk_call(NULL, rt, "static_quant_fp8", JITK_CALL_STRICT, a, 3, stream);
}

int jitk_configure_input_scale(jitk_runtime *rt, jitk_devptr input_scale)
{
	const int64_t one = 1;
	jitk_tensor t;
	int rc;

	if ((rc = jitk_tensor_contiguous(&t, input_scale, (jitk_dtype)JITK_DTYPE_F32, 1, &one)))
		return rc;
	return jitk_configure(rt, "fused_norm_scale_shift_fp8", "input_scale", &t);
}

static int try_fused(const char **reason, jitk_runtime *rt, const char *sym, unsigned which,
		     const jitk_norm_args *a, jitk_stream stream)
{
	jitk_call_info info;
	int rc = norm_call_run(&info, rt, sym, which, JITK_CALL_TRY, a, stream);

	if (reason)
		*reason = info.reason;
	return rc;
}

int jitk_try_fused_norm_scale_shift_fp8(const char **reason, jitk_runtime *rt,
					const jitk_norm_args *a, jitk_stream stream)
{
	return try_fused(reason, rt, "fused_norm_scale_shift_fp8", 2, a, stream);
}

int jitk_try_fused_scale_residual_norm_scale_shift_fp8(const char **reason, jitk_runtime *rt,
						       const jitk_norm_args *a,
						       jitk_stream stream)
{
	return try_fused(reason, rt, "fused_scale_residual_norm_scale_shift_fp8", 3, a, stream);
}

static int auto_path(int *used_fused, jitk_runtime *rt, const char *sym, unsigned which,
		     const jitk_norm_args *a, jitk_stream stream)
{
	jitk_call_info info;
	int rc = norm_call_run(&info, rt, sym, which, JITK_CALL_AUTO, a, stream);

	if (used_fused)
		*used_fused = !rc && !info.fallback;
	return rc;
}

int jitk_auto_norm_scale_shift_fp8(int *used_fused, jitk_runtime *rt, const jitk_norm_args *a,
				   jitk_stream stream)
{
	return auto_path(used_fused, rt, "fused_norm_scale_shift_fp8", 2, a, stream);
}

int jitk_auto_scale_residual_norm_scale_shift_fp8(int *used_fused, jitk_runtime *rt,
						  const jitk_norm_args *a, jitk_stream stream)
{
	return auto_path(used_fused, rt, "fused_scale_residual_norm_scale_shift_fp8", 3, a, stream);
}
