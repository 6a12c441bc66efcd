/* norm.c - the norm family's typed entry points, over the public generic
 * call only: jitk_norm_args becomes named tensors, the spec does the rest
 * (instance from hidden, every check, the fallback). */
#include <string.h>

#include "jitk.h"
#include "jitk/norm.h"

/* The arguments of a jitk_norm_args as named tensors and scalars. */
#define NORM_MAX_ARGS 32
typedef struct {
	jitk_tensor t[NORM_MAX_ARGS];
	jitk_arg a[NORM_MAX_ARGS];
	size_t n;
} norm_call;

/* A contiguous tensor of 1 ([d1]) or 2 ([d0, d1]) dimensions. */
static void tensor(norm_call *c, const char *name, jitk_devptr p, jitk_dtype dt, int nd,
		   int64_t d0, int64_t d1)
{
	const int64_t shape[2] = { nd == 2 ? d0 : d1, d1 };
	jitk_tensor *t = &c->t[c->n];

	jitk_tensor_contiguous(t, p, dt, nd, shape);
	c->a[c->n].name = name;
	c->a[c->n].type = JITK_ARG_TENSOR;
	c->a[c->n].v.tensor = t;
	c->n++;
}

static void scalar(norm_call *c, const char *name, int64_t v)
{
	c->a[c->n].name = name;
	c->a[c->n].type = JITK_ARG_I64;
	c->a[c->n].v.i64 = v;
	c->n++;
}

static void eps_arg(norm_call *c, float eps)
{
	c->a[c->n].name = "eps";
	c->a[c->n].type = JITK_ARG_F32;
	c->a[c->n].v.f32 = eps;
	c->n++;
}

/* The reference symbols' arguments. which: bit 1 residual, bit 2 fp8. */
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
	eps_arg(c, a->eps);
}

/* Every field of a that is set, by the spec's names (jitk/norm.h). */
static void set_args(norm_call *c, const jitk_norm_args *a)
{
	const jitk_dtype bf16 = JITK_DTYPE_BF16, fp8 = JITK_DTYPE_FP8_E4M3, f32 = JITK_DTYPE_F32,
			 u8 = JITK_DTYPE_U8;
	const int64_t R = a->rows, Hd = a->hidden, Bn = a->batches;
	/* the modulation tensors' names and rank, by class */
	const char *const *mod;
	static const char *const shared[3] = { "scale", "shift", "gate" };
	static const char *const batched[3] = { "scales", "shifts", "gates" };
	static const char *const set0[3] = { "scale0", "shift0", "gate0" };
	const jitk_devptr mp[3] = { a->scale, a->shift, a->gate };
	int i, nd = Bn ? 2 : 1;

	memset(c, 0, sizeof(*c));
	mod = a->index ? set0 : Bn ? batched : shared;
	if (a->index)
		nd = 2;
#define SET(field, name, dt, n, d0, d1)                                       \
	do {                                                                  \
		if (a->field)                                                 \
			tensor(c, name, a->field, dt, n, d0, d1);             \
	} while (0)
	SET(y, "y", bf16, 2, R, Hd);
	SET(q, "q", fp8, 2, R, Hd);
	SET(residual_out, "residual_out", bf16, 2, R, Hd);
	tensor(c, "x", a->x, bf16, 2, R, Hd);
	SET(residual, "residual", bf16, 2, R, Hd);
	for (i = 0; i < 3; i++)
		if (mp[i])
			tensor(c, mod[i], mp[i], bf16, nd, Bn, Hd);
	SET(input_scale, "input_scale", f32, 1, 1, 1);
	SET(s, "s", f32, 1, 1, R);
	SET(gate_out, "gate_out", bf16, 2, R, Hd);
	SET(scale1, "scale1", bf16, 2, Bn, Hd);
	SET(shift1, "shift1", bf16, 2, Bn, Hd);
	SET(gate1, "gate1", bf16, 2, Bn, Hd);
	SET(index, "index", u8, 2, Bn, a->rows_per_batch);
	SET(weight, "weight", bf16, 1, 1, Hd);
	SET(bias, "bias", bf16, 1, 1, Hd);
#undef SET
	if (a->rows_per_batch)
		scalar(c, "L", a->rows_per_batch);
	eps_arg(c, a->eps);
}

/* Shapes cannot be negative: say so in the caller's terms. */
static int negative(const jitk_norm_args *a)
{
	jitk_tensor t;
	const int64_t bad[1] = { a->rows < 0 ? a->rows : a->hidden < 0 ? a->hidden
						 : a->batches < 0 ? a->batches : a->rows_per_batch };

	return jitk_tensor_contiguous(&t, 0, (jitk_dtype)JITK_DTYPE_BF16, 1, bad);
}

static int norm_call_run(jitk_call_info *info, jitk_runtime *rt, const char *sym,
			 unsigned which, jitk_call_mode mode, const jitk_norm_args *a,
			 jitk_stream stream)
{
	norm_call c;

	if (!a)
		return jitk_call(info, rt, sym, mode, NULL, 0, stream);
	if (a->rows < 0 || a->hidden < 0)
		return negative(a);
	norm_args(&c, a, which);
	return jitk_call(info, rt, sym, mode, c.a, c.n, stream);
}

int jitk_norm_call(jitk_call_info *out, jitk_runtime *rt, const char *selector,
		   jitk_call_mode mode, const jitk_norm_args *a, jitk_stream stream)
{
	norm_call c;

	if (!a)
		return jitk_call(out, rt, selector, mode, NULL, 0, stream);
	if (a->rows < 0 || a->hidden < 0 || a->batches < 0 || a->rows_per_batch < 0)
		return negative(a);
	set_args(&c, a);
	return jitk_call(out, rt, selector, mode, c.a, c.n, stream);
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

int jitk_per_token_quant_fp8(jitk_runtime *rt, jitk_devptr q, jitk_devptr s, jitk_devptr x,
			     int64_t rows, int64_t hidden, jitk_stream stream)
{
	const jitk_dtype bf16 = JITK_DTYPE_BF16, fp8 = JITK_DTYPE_FP8_E4M3, f32 = JITK_DTYPE_F32;
	const int64_t shape[2] = { rows, hidden };
	norm_call c;
	int rc;

	memset(&c, 0, sizeof(c));
	if ((rc = jitk_tensor_contiguous(&c.t[0], x, bf16, 2, shape)))
		return rc; /* a negative dimension, named */
	tensor(&c, "q", q, fp8, 2, rows, hidden);
	tensor(&c, "s", s, f32, 1, 1, rows);
	tensor(&c, "x", x, bf16, 2, rows, hidden);
	return jitk_call(NULL, rt, "per_token_quant_fp8", JITK_CALL_STRICT, c.a, c.n, stream);
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
