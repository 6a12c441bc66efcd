/* test_gpu_qk.c - the QK-RMSNorm + RoPE family on a real GPU. Skips (and
 * says why) where there is no CUDA driver or device.
 *
 * For every combination of the generic set (head_dim 64/128/256, neox and
 * interleaved pairs, tokens as positions or int32/int64 positions, the
 * norm per head or across heads, with and without weights), at 3 q heads
 * and 2 k heads, and for the model symbols (Qwen-Image/FLUX 24 + 24 heads,
 * Wan 40 + 40 across heads) at their shapes, over N = 1, 7, 4096, 4608 and
 * 16384 tokens (rotary dims R = D, and D/2 at N = 7 and 4608):
 *  (a) q and k are views of a real packed [N, (Hq + 2 Hk) D + 16] buffer;
 *      the fused kernel in place and the split path (rms_norm_heads, then
 *      rope) give the same bytes, all of them: 0 differ;
 *  (b) v and the gaps between the views are untouched;
 *  (c) every value of q and k is within the contract's bound of a
 *      float64 host reference (tests/qk_ref.h: per value, from the bf16
 *      roundings), the relative L2 error is below 1e-2, no NaN; the
 *      inputs are 3 x N(0, 1), so a value left unwritten is far outside
 *      the bound (the RMS factor is about 1/3);
 *  (d) indexed positions include the largest row, rows past the end and
 *      negative ones, which read the clamped row;
 *  (e) the out-of-place form writes, into heads-first [H, 512 + N + 16, D]
 *      outputs at token offset 512, the bytes the in-place form leaves in
 *      q and k, and v's; two runs over two poisons give the same bytes
 *      (every element written) and the rest of the outputs keeps the
 *      poison;
 *  (f) for the model symbols also: the spec's fallback (AUTO with the
 *      fused symbols gated away) and programmatic dependent launch give
 *      the same bytes.
 * And NaN and infinities: the documented result, other heads unchanged.
 * One line per group. JITK_GPU_QUICK=1: N = 1, 7, 300 (for
 * compute-sanitizer memcheck and racecheck runs). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "gpu_util.h"
#include "gpu/device.h"
#include "base/internal.h"
#include "qk_ref.h"

static jitk_runtime *rt;       /* repo specs */
static jitk_runtime *rt_gated; /* the fused symbols gated away: AUTO runs the split path */
static jitk_runtime *rt_pdl;   /* programmatic dependent launch */
static char *tmpdir;
static int quick;

/* ---------------------------------------------------------------- setup */

static int group_setup(void **state)
{
	jitk_runtime_options o = JITK_RUNTIME_OPTIONS_INIT;
	jitk_compiler_options co = JITK_COMPILER_OPTIONS_INIT;
	char *specs, *gated, *cache;

	(void)state;
	quick = jitk__env_bool(NULL, "JITK_GPU_QUICK", 0, "");
	cu = jitk__cuda(&why_no_gpu);
	if (!cu)
		return 0;
	tmpdir = t_tmpdir();
	cache = t_path(tmpdir, "cache");
	specs = t_path(t_root(), "specs");
	co.specs = specs;
	co.cache_dir = cache;
	co.cache_path = "";
	o.compiler = &co;
	if (jitk_runtime_new(&rt, &o)) {
		why_no_gpu = jitk_error_last()->message;
		cu = NULL;
		goto done;
	}
	o.programmatic = 1;
	if (jitk_runtime_new(&rt_pdl, &o)) {
		fprintf(stderr, "%s\n", jitk_error_last()->message);
		return -1;
	}
	o.programmatic = 0;
	t_copy_tree(tmpdir, NULL, NULL);
	gated = t_path(tmpdir, "specs");
	{
		static const char *const files[] = { "qk_norm_rope.yaml", "qk_norm_rope_out.yaml" };
		size_t i;

		for (i = 0; i < 2; i++) {
			char *yaml = t_path(gated, files[i]);

			t_edit(yaml, "    fallback:\n",
			       "    gates:\n      - arch: { min: sm_200 }\n        reason: a test gate\n"
			       "    fallback:\n");
			free(yaml);
		}
	}
	co.specs = gated;
	if (jitk_runtime_new(&rt_gated, &o)) {
		fprintf(stderr, "%s\n", jitk_error_last()->message);
		return -1;
	}
	free(gated);
	printf("GPU: %s%s\n", jitk_runtime_arch(rt), quick ? " (quick)" : "");
done:
	free(specs);
	free(cache);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	jitk_runtime_free(rt);
	jitk_runtime_free(rt_gated);
	jitk_runtime_free(rt_pdl);
	if (tmpdir) {
		t_rmtree(tmpdir);
		free(tmpdir);
	}
	return 0;
}

/* -------------------------------------------------------------- a case */

#define PAD 16      /* gap elements after each token's q, k, v */
#define OFFSET 512  /* out of place: text tokens before this stream */
#define TAIL 16     /* ... and tokens after it */

typedef struct {
	qk_math m;
	int pos; /* 0: tokens as positions; 32, 64: a positions tensor */
	int64_t n, hq, hk, p, row;
	size_t bytes;                /* the packed buffer */
	uint16_t *x, *qw, *kw, *got; /* host: input, weights, a result */
	float *cs;
	int64_t *pos64; /* the positions, whatever their dtype on the device */
	CUdeviceptr d_x, d_a, d_b, d_qw, d_kw, d_cs, d_pos, d_out[3];
	/* tensors */
	jitk_tensor q, k, v, tqw, tkw, tcs, tpos, qo, ko, vo;
} problem;

static void heads_view(jitk_tensor *t, CUdeviceptr data, int64_t n, int64_t h, int64_t d,
		       int64_t ts, int64_t hs)
{
	const jitk_dtype bf16 = JITK_DTYPE_BF16;
	const int64_t shape[3] = { n, h, d };

	assert_int_equal(jitk_tensor_contiguous(t, data, bf16, 3, shape), 0);
	t->strides[0] = ts;
	t->strides[1] = hs;
}

/* q, k, v as views of the packed buffer at base. */
static void views(problem *p, CUdeviceptr base)
{
	const int64_t d = p->m.head_dim;

	heads_view(&p->q, base, p->n, p->hq, d, p->row, d);
	heads_view(&p->k, base + (uint64_t)(p->hq * d * 2), p->n, p->hk, d, p->row, d);
	heads_view(&p->v, base + (uint64_t)((p->hq + p->hk) * d * 2), p->n, p->hk, d, p->row, d);
}

static void problem_make(problem *p, const qk_math *m, int pos, int64_t n, int64_t hq, int64_t hk)
{
	const jitk_dtype f32 = JITK_DTYPE_F32, bf16 = JITK_DTYPE_BF16;
	const jitk_dtype i32 = JITK_DTYPE_I32, i64 = JITK_DTYPE_I64;
	const int64_t d = m->head_dim, wlen = m->across ? 1 : 0;
	size_t i;
	int64_t t;

	memset(p, 0, sizeof(*p));
	p->m = *m;
	p->pos = pos;
	p->n = n;
	p->hq = hq;
	p->hk = hk;
	p->p = pos ? 1531 : n;
	p->row = (hq + 2 * hk) * d + PAD;
	p->bytes = (size_t)(n * p->row) * 2;
	p->x = malloc(p->bytes + 2);
	p->got = malloc(p->bytes + 2);
	{
		/* 3 x N(0, 1) bf16 values: picked from a table of 65536 draws
		 * (a draw per value would dominate the run time at 16384 tokens) */
		static uint16_t table[65536];
		static int ready;

		if (!ready) {
			for (i = 0; i < 65536; i++)
				table[i] = bf16_rn((float)(3.0 * rnd_normal()));
			ready = 1;
		}
		for (i = 0; i < p->bytes / 2; i++)
			p->x[i] = table[rnd64() >> 48];
	}
	if (n > 3) /* a head of zeros: factor rsqrt(eps), values 0 */
		memset(p->x + 3 * p->row, 0, (size_t)d * 2);
	p->qw = malloc((size_t)(hq * d) * 2);
	p->kw = malloc((size_t)(hk * d) * 2);
	for (i = 0; i < (size_t)(hq * d); i++)
		p->qw[i] = bf16_rn((float)(1.0 + 0.2 * rnd_normal()));
	for (i = 0; i < (size_t)(hk * d); i++)
		p->kw[i] = bf16_rn((float)(1.0 + 0.2 * rnd_normal()));
	p->cs = malloc((size_t)(p->p * m->rotary) * 4 + 4);
	for (t = 0; t < p->p; t++)
		for (i = 0; i < (size_t)m->rotary / 2; i++) {
			double th = (double)t * pow(10000.0, -2.0 * (double)i / m->rotary) + 0.25;

			p->cs[t * m->rotary + (int64_t)i] = (float)cos(th);
			p->cs[t * m->rotary + m->rotary / 2 + (int64_t)i] = (float)sin(th);
		}
	p->pos64 = malloc((size_t)n * 8 + 8);
	for (t = 0; t < n; t++) {
		int64_t v = (int64_t)(rnd64() % (uint64_t)(p->p + 8)) - 4; /* some out of range */

		if (t == 0)
			v = p->p - 1; /* the largest */
		if (t == 1)
			v = p->p;
		if (t == 2)
			v = -1;
		if (t == 3)
			v = pos == 64 ? INT64_MAX : INT32_MAX;
		if (t == 4)
			v = pos == 64 ? INT64_MIN : INT32_MIN;
		p->pos64[t] = v;
	}

	p->d_x = dalloc(p->bytes);
	p->d_a = dalloc(p->bytes);
	p->d_b = dalloc(p->bytes);
	upload(p->d_x, p->x, p->bytes);
	p->d_qw = dalloc((size_t)(hq * d) * 2);
	p->d_kw = dalloc((size_t)(hk * d) * 2);
	upload(p->d_qw, p->qw, (size_t)(hq * d) * 2);
	upload(p->d_kw, p->kw, (size_t)(hk * d) * 2);
	{
		const int64_t len_q = d * (wlen ? hq : 1), len_k = d * (wlen ? hk : 1);
		const int64_t shape[2] = { p->p, m->rotary };

		assert_int_equal(jitk_tensor_contiguous(&p->tqw, p->d_qw, bf16, 1, &len_q), 0);
		assert_int_equal(jitk_tensor_contiguous(&p->tkw, p->d_kw, bf16, 1, &len_k), 0);
		p->d_cs = dalloc((size_t)(p->p * m->rotary) * 4);
		upload(p->d_cs, p->cs, (size_t)(p->p * m->rotary) * 4);
		assert_int_equal(jitk_tensor_contiguous(&p->tcs, p->d_cs, f32, 2, shape), 0);
	}
	if (pos) {
		p->d_pos = dalloc((size_t)n * 8);
		if (pos == 64) {
			upload(p->d_pos, p->pos64, (size_t)n * 8);
		} else {
			int32_t *p32 = malloc((size_t)n * 4 + 4);

			for (t = 0; t < n; t++)
				p32[t] = (int32_t)p->pos64[t];
			upload(p->d_pos, p32, (size_t)n * 4);
			free(p32);
		}
		assert_int_equal(jitk_tensor_contiguous(&p->tpos, p->d_pos, pos == 64 ? i64 : i32, 1, &n), 0);
	}
}

static void problem_free(problem *p)
{
	size_t i;

	CK(cu->cuMemFree(p->d_x));
	CK(cu->cuMemFree(p->d_a));
	CK(cu->cuMemFree(p->d_b));
	CK(cu->cuMemFree(p->d_qw));
	CK(cu->cuMemFree(p->d_kw));
	CK(cu->cuMemFree(p->d_cs));
	if (p->d_pos)
		CK(cu->cuMemFree(p->d_pos));
	for (i = 0; i < 3; i++)
		if (p->d_out[i])
			CK(cu->cuMemFree(p->d_out[i]));
	free(p->x);
	free(p->got);
	free(p->qw);
	free(p->kw);
	free(p->cs);
	free(p->pos64);
}

/* What a step takes. */
enum { A_WEIGHTS = 1, A_TABLE = 2, A_OUT = 4 };

static size_t args_of(jitk_arg *a, problem *p, unsigned what)
{
	size_t n = 0;

#define TARG(nm, t) (a[n].name = (nm), a[n].type = JITK_ARG_TENSOR, a[n++].v.tensor = (t))
	if (what & A_OUT) {
		TARG("q_out", &p->qo);
		TARG("k_out", &p->ko);
		TARG("v_out", &p->vo);
		TARG("v", &p->v);
	}
	TARG("q", &p->q);
	TARG("k", &p->k);
	if ((what & A_WEIGHTS) && p->m.weight) {
		TARG("q_weight", &p->tqw);
		TARG("k_weight", &p->tkw);
	}
	if (what & A_TABLE) {
		TARG("cos_sin", &p->tcs);
		if (p->pos)
			TARG(p->pos == 64 ? "positions_i64" : "positions", &p->tpos);
	}
#undef TARG
	return n;
}

/* Call SELECTOR over the views of the buffer at base; info.fallback must
 * be FALLBACK. */
static void run(jitk_runtime *r, const char *selector, jitk_call_mode mode, problem *p,
		CUdeviceptr base, unsigned what, int fallback)
{
	jitk_arg a[16];
	jitk_call_info info = JITK_CALL_INFO_INIT;
	size_t n;

	views(p, base);
	n = args_of(a, p, what);
	if (jitk_call(&info, r, selector, mode, a, n, NULL))
		fail_msg("%s: %s", selector, jitk_error_last()->message);
	assert_int_equal(info.fallback, fallback);
}

/* ------------------------------------------------------------ checking */

typedef struct {
	const problem *p;
	const uint16_t *y; /* the result buffer */
	int part, nparts;
	/* out */
	size_t bad, untouched_bad, nan;
	double err2, ref2, worst; /* worst: max |y - ref| / bound */
} check_job;

static void *check_tokens(void *arg)
{
	check_job *j = arg;
	const problem *p = j->p;
	const int64_t d = p->m.head_dim, hmax = p->hq > p->hk ? p->hq : p->hk;
	double *out = malloc((size_t)(hmax * d) * sizeof(double));
	double *pre = malloc((size_t)(hmax * d) * sizeof(double));
	int64_t t, i;
	int s;

	for (t = j->part; t < p->n; t += j->nparts) {
		int64_t row = p->pos ? p->pos64[t] : t;
		const size_t base = (size_t)(t * p->row);

		row = row < 0 ? 0 : row >= p->p ? p->p - 1 : row;
		for (s = 0; s < 2; s++) {
			const int64_t h = s ? p->hk : p->hq;
			const size_t off = base + (size_t)(s ? p->hq * d : 0);

			qk_ref_token(out, pre, p->x + off, (int)h, s ? p->kw : p->qw,
				     p->cs + row * p->m.rotary, &p->m);
			for (i = 0; i < h * d; i++) {
				double y = qk_bf16_f(j->y[off + (size_t)i]), e = fabs(y - out[i]);
				double bound = qk_ref_bound(pre + (i / d) * d, (int)(i % d), &p->m);

				if (isnan(y))
					j->nan++;
				if (!(e <= bound))
					j->bad++;
				else if (e / bound > j->worst)
					j->worst = e / bound;
				j->err2 += e * e;
				j->ref2 += out[i] * out[i];
			}
		}
		/* v and the gap after it */
		for (i = (p->hq + p->hk) * d; i < p->row; i++)
			j->untouched_bad += j->y[base + (size_t)i] != p->x[base + (size_t)i];
	}
	free(out);
	free(pre);
	return NULL;
}

typedef struct {
	size_t bytes, differ, bad, untouched_bad, nan;
	double err2, ref2, worst;
	int64_t tokens;
} tally;

/* y (a result of the buffer) against the reference, on 16 threads. */
static void check(tally *tl, const problem *p, const uint16_t *y)
{
	enum { NT = 16 };
	check_job jobs[NT];
	pthread_t th[NT];
	int i;

	for (i = 0; i < NT; i++) {
		memset(&jobs[i], 0, sizeof(jobs[i]));
		jobs[i].p = p;
		jobs[i].y = y;
		jobs[i].part = i;
		jobs[i].nparts = NT;
		assert_int_equal(pthread_create(&th[i], NULL, check_tokens, &jobs[i]), 0);
	}
	for (i = 0; i < NT; i++) {
		pthread_join(th[i], NULL);
		tl->bad += jobs[i].bad;
		tl->untouched_bad += jobs[i].untouched_bad;
		tl->nan += jobs[i].nan;
		tl->err2 += jobs[i].err2;
		tl->ref2 += jobs[i].ref2;
		if (jobs[i].worst > tl->worst)
			tl->worst = jobs[i].worst;
	}
	tl->tokens += p->n;
}

/* Bytes of the buffer at d that differ from want. */
static size_t differ(problem *p, CUdeviceptr d, const uint16_t *want)
{
	size_t i, n = 0;

	download(p->got, d, p->bytes);
	for (i = 0; i < p->bytes / 2; i++)
		n += (p->got[i] & 0xff) != (want[i] & 0xff);
	for (i = 0; i < p->bytes / 2; i++)
		n += (p->got[i] >> 8) != (want[i] >> 8);
	return n;
}

/* Out of place into heads-first [h, OFFSET + N + TAIL, D] outputs: the
 * bytes of the in-place result (want: the packed buffer), twice over two
 * poisons; the outputs' other tokens keep the poison. Returns the number
 * of differing or clobbered values. */
static size_t out_of_place(jitk_runtime *r, const char *selector, problem *p, const uint16_t *want,
			   int fallback)
{
	const int64_t d = p->m.head_dim, nt = OFFSET + p->n + TAIL;
	const int64_t h[3] = { p->hq, p->hk, p->hk };
	jitk_tensor *o[3] = { &p->qo, &p->ko, &p->vo };
	size_t bad = 0, k, e;
	int pass, s;

	for (s = 0; s < 3; s++) {
		if (!p->d_out[s])
			p->d_out[s] = dalloc((size_t)(h[s] * nt * d) * 2);
		heads_view(o[s], p->d_out[s] + (uint64_t)(OFFSET * d * 2), p->n, h[s], d, d, nt * d);
	}
	for (pass = 0; pass < 2; pass++) {
		const unsigned char poison = pass ? 0x5a : 0xa5;

		for (s = 0; s < 3; s++)
			CK(cu->cuMemsetD8Async(p->d_out[s], poison, (size_t)(h[s] * nt * d) * 2, NULL));
		run(r, selector, JITK_CALL_AUTO, p, p->d_x, A_WEIGHTS | A_TABLE | A_OUT, fallback);
		CK(cu->cuCtxSynchronize());
		for (s = 0; s < 3; s++) {
			const size_t n = (size_t)(h[s] * nt * d);
			uint16_t *got = malloc(n * 2);
			const uint16_t pw = (uint16_t)(poison | poison << 8);

			download(got, p->d_out[s], n * 2);
			for (k = 0; k < (size_t)h[s]; k++)
				for (e = 0; e < (size_t)(nt * d); e++) {
					const int64_t t = (int64_t)(e / (size_t)d) - OFFSET;
					const uint16_t g = got[k * (size_t)(nt * d) + e];

					if (t < 0 || t >= p->n)
						bad += g != pw;
					else
						bad += g != want[(size_t)(t * p->row) +
								 (size_t)((s == 0 ? 0 : s == 1 ? p->hq : p->hq + p->hk) * d) +
								 k * (size_t)d + e % (size_t)d];
				}
			free(got);
		}
	}
	/* the input is untouched */
	bad += differ(p, p->d_x, p->x);
	return bad;
}

/* ------------------------------------------------------------- a group */

typedef struct {
	const char *fused, *out; /* selectors; out may be NULL */
	const char *norm, *rope; /* the split path's selectors */
	int64_t hq, hk;
	int extra; /* model symbols: the fallback and PDL too */
} group;

static const int64_t full_n[] = { 1, 7, 4096, 4608, 16384 };
static const int64_t quick_n[] = { 1, 7, 300 };

static void run_group(const group *g, const qk_math *m0, int pos)
{
	const int64_t *ns = quick ? quick_n : full_n;
	const size_t nn = quick ? JITK_ARRAY_SIZE(quick_n) : JITK_ARRAY_SIZE(full_n);
	size_t i, out_bad = 0, fallback_differ = 0, pdl_differ = 0;
	tally tl;

	memset(&tl, 0, sizeof(tl));
	for (i = 0; i < nn; i++) {
		qk_math m = *m0;
		problem p;

		m.rotary = (i % 2) ? m0->head_dim / 2 : m0->head_dim;
		problem_make(&p, &m, pos, ns[i], g->hq, g->hk);
		CK(cu->cuMemcpyDtoDAsync(p.d_a, p.d_x, p.bytes, NULL));
		CK(cu->cuMemcpyDtoDAsync(p.d_b, p.d_x, p.bytes, NULL));
		run(rt, g->fused, JITK_CALL_STRICT, &p, p.d_a, A_WEIGHTS | A_TABLE, 0);
		run(rt, g->norm, JITK_CALL_STRICT, &p, p.d_b, A_WEIGHTS, 0);
		run(rt, g->rope, JITK_CALL_STRICT, &p, p.d_b, A_TABLE, 0);
		CK(cu->cuCtxSynchronize());
		download(p.got, p.d_b, p.bytes);
		{
			uint16_t *split = malloc(p.bytes + 2);

			memcpy(split, p.got, p.bytes);
			tl.differ += differ(&p, p.d_a, split);
			tl.bytes += p.bytes;
			check(&tl, &p, p.got);
			if (g->extra) {
				/* the spec's fallback; programmatic dependent launch */
				CK(cu->cuMemcpyDtoDAsync(p.d_b, p.d_x, p.bytes, NULL));
				run(rt_gated, g->fused, JITK_CALL_AUTO, &p, p.d_b, A_WEIGHTS | A_TABLE, 1);
				CK(cu->cuCtxSynchronize());
				fallback_differ += differ(&p, p.d_b, split);
				CK(cu->cuMemcpyDtoDAsync(p.d_a, p.d_x, p.bytes, NULL));
				CK(cu->cuMemcpyDtoDAsync(p.d_b, p.d_x, p.bytes, NULL));
				run(rt_pdl, g->norm, JITK_CALL_STRICT, &p, p.d_b, A_WEIGHTS, 0);
				run(rt_pdl, g->rope, JITK_CALL_STRICT, &p, p.d_b, A_TABLE, 0);
				run(rt_pdl, g->fused, JITK_CALL_STRICT, &p, p.d_a, A_WEIGHTS | A_TABLE, 0);
				CK(cu->cuCtxSynchronize());
				pdl_differ += differ(&p, p.d_b, split);
				pdl_differ += differ(&p, p.d_a, split);
				if (g->out)
					out_bad += out_of_place(rt_gated, g->out, &p, split, 1);
			}
			if (g->out)
				out_bad += out_of_place(rt, g->out, &p, split, 0);
			free(split);
		}
		problem_free(&p);
	}
	printf("%s: N %s: fused == split, %zu of %zu bytes differ; v and gaps %s; vs float64: %zu outside "
	       "the bound (worst %.2f of it), rel L2 %.2e, %zu NaN%s%s%s\n",
	       g->fused, quick ? "1,7,300" : "1,7,4096,4608,16384", tl.differ, tl.bytes,
	       tl.untouched_bad ? "CHANGED" : "untouched", tl.bad, tl.worst,
	       sqrt(tl.err2 / (tl.ref2 > 0 ? tl.ref2 : 1)), tl.nan,
	       g->out ? (out_bad ? "; out of place DIFFERS" : "; out of place == in place") : "",
	       g->extra ? (fallback_differ ? "; fallback DIFFERS" : "; spec fallback == split") : "",
	       g->extra ? (pdl_differ ? "; PDL DIFFERS" : "; PDL == split") : "");
	assert_int_equal(tl.differ, 0);
	assert_int_equal(tl.untouched_bad, 0);
	assert_int_equal(tl.bad, 0);
	assert_int_equal(tl.nan, 0);
	assert_true(sqrt(tl.err2 / tl.ref2) < 1e-2);
	assert_int_equal(out_bad, 0);
	assert_int_equal(fallback_differ, 0);
	assert_int_equal(pdl_differ, 0);
}

/* Every combination of the generic set, at 3 q heads and 2 k heads (and
 * the out-of-place generic set where it has the combination). */
static void test_every_combination(void **state)
{
	static const int dims[] = { 64, 128, 256 };
	static const char *const styles[] = { "neox", "interleaved" };
	static const char *const poss[] = { "none", "i32", "i64" };
	static const char *const spans[] = { "head", "heads" };
	static const char *const weights[] = { "true", "false" };
	size_t di, st, po, sp, we;

	(void)state;
	NEED_GPU();
	for (di = 0; di < 3; di++)
		for (st = 0; st < 2; st++)
			for (po = 0; po < 3; po++)
				for (sp = 0; sp < 2; sp++)
					for (we = 0; we < 2; we++) {
						char fused[160], out[160], norm[96], rope[96];
						qk_math m = { dims[di], dims[di], st == 0, (int)sp, we == 0, 1e-6 };
						group g = { fused, NULL, norm, rope, 3, 2, 0 };

						snprintf(fused, sizeof(fused),
							 "qk_norm_rope_any[head_dim=%d,style=%s,positions=%s,span=%s,weight=%s]",
							 dims[di], styles[st], poss[po], spans[sp], weights[we]);
						snprintf(out, sizeof(out), "qk_norm_rope_any_out[head_dim=%d,style=%s,span=%s]",
							 dims[di], styles[st], spans[sp]);
						snprintf(norm, sizeof(norm), "rms_norm_heads[span=%s,weight=%s]", spans[sp],
							 weights[we]);
						snprintf(rope, sizeof(rope), "rope[style=%s,positions=%s]", styles[st], poss[po]);
						if (po == 1 && we == 0)
							g.out = out;
						run_group(&g, &m, po == 0 ? 0 : po == 1 ? 32 : 64);
					}
}

/* The model symbols at the models' shapes, with the spec's fallback and
 * programmatic dependent launch. */
static void test_model_symbols(void **state)
{
	const qk_math per_head = { 128, 128, 0, 0, 1, 1e-6 }, across = { 128, 128, 0, 1, 1, 1e-6 };
	const group qwen = { "qk_norm_rope", "qk_norm_rope_out", "rms_norm_heads[span=head,weight=true]",
			     "rope[style=interleaved,positions=none]", 24, 24, 1 };
	const group flux2 = { "qk_norm_rope", NULL, "rms_norm_heads[span=head,weight=true]",
			      "rope[style=interleaved,positions=none]", 48, 48, 0 };
	const group wan = { "qk_norm_rope_across_heads", "qk_norm_rope_across_heads_out",
			    "rms_norm_heads[span=heads,weight=true]", "rope[style=interleaved,positions=none]",
			    40, 40, 1 };

	(void)state;
	NEED_GPU();
	printf("24 + 24 heads (Qwen-Image, FLUX.1):\n");
	run_group(&qwen, &per_head, 0);
	printf("48 + 48 heads (FLUX.2):\n");
	run_group(&flux2, &per_head, 0);
	printf("40 + 40 heads across heads (Wan 2.x):\n");
	run_group(&wan, &across, 0);
}

/* NaN and infinity: a head (across heads: a token's q or k) holding a NaN
 * comes out all NaN; one holding an infinity comes out 0 (rsqrt(inf) is
 * 0) except the infinity and its rotary partner, NaN (inf * 0); every
 * other head keeps the bytes it has without them; fused == split. */
static void test_nan_inf(void **state)
{
	static const struct {
		const char *fused, *norm;
		int across;
	} forms[] = {
		{ "qk_norm_rope", "rms_norm_heads[span=head,weight=true]", 0 },
		{ "qk_norm_rope_across_heads", "rms_norm_heads[span=heads,weight=true]", 1 },
	};
	const char *rope = "rope[style=interleaved,positions=none]";
	size_t f;

	(void)state;
	NEED_GPU();
	for (f = 0; f < 2; f++) {
		const qk_math m = { 128, 128, 0, forms[f].across, 1, 1e-6 };
		const int64_t d = 128, hq = 24, hk = 24;
		/* (token, element in the packed row, value) */
		const struct {
			int64_t t, at;
			uint16_t v;
		} sp[3] = { { 1, 3 * d + 5, 0x7fc0 }, { 2, (hq + 7) * d + 9, 0x7f80 }, { 3, 0, 0xff80 } };
		problem p;
		uint16_t *clean, *split;
		size_t i, other_differ = 0, pattern_bad = 0;
		int64_t t, e;

		problem_make(&p, &m, 0, 5, hq, hk);
		/* without the specials */
		CK(cu->cuMemcpyDtoDAsync(p.d_a, p.d_x, p.bytes, NULL));
		run(rt, forms[f].fused, JITK_CALL_STRICT, &p, p.d_a, A_WEIGHTS | A_TABLE, 0);
		CK(cu->cuCtxSynchronize());
		clean = malloc(p.bytes);
		split = malloc(p.bytes);
		download(clean, p.d_a, p.bytes);
		for (i = 0; i < 3; i++)
			p.x[sp[i].t * p.row + sp[i].at] = sp[i].v;
		upload(p.d_x, p.x, p.bytes);
		CK(cu->cuMemcpyDtoDAsync(p.d_a, p.d_x, p.bytes, NULL));
		CK(cu->cuMemcpyDtoDAsync(p.d_b, p.d_x, p.bytes, NULL));
		run(rt, forms[f].fused, JITK_CALL_STRICT, &p, p.d_a, A_WEIGHTS | A_TABLE, 0);
		run(rt, forms[f].norm, JITK_CALL_STRICT, &p, p.d_b, A_WEIGHTS, 0);
		run(rt, rope, JITK_CALL_STRICT, &p, p.d_b, A_TABLE, 0);
		CK(cu->cuCtxSynchronize());
		download(split, p.d_b, p.bytes);
		assert_int_equal(differ(&p, p.d_a, split), 0); /* p.got: the fused result */
		for (t = 0; t < p.n; t++)
			for (e = 0; e < (hq + hk) * d; e++) {
				const uint16_t y = p.got[t * p.row + e];
				int nan = (y & 0x7fff) > 0x7f80, zero = (y & 0x7fff) == 0;
				int hit = -1;

				for (i = 0; i < 3; i++) {
					int64_t lo = forms[f].across ? (sp[i].at < hq * d ? 0 : hq * d)
								     : sp[i].at / d * d;
					int64_t hi = forms[f].across ? (sp[i].at < hq * d ? hq * d : (hq + hk) * d)
								     : lo + d;

					if (t == sp[i].t && e >= lo && e < hi)
						hit = (int)i;
				}
				if (hit < 0)
					other_differ += y != clean[t * p.row + e];
				else if (sp[hit].v == 0x7fc0)
					pattern_bad += !nan;
				else if ((e & ~1) == (sp[hit].at & ~1)) /* the infinity and its partner */
					pattern_bad += !nan;
				else
					pattern_bad += !zero;
			}
		printf("%s: NaN, +inf, -inf: fused == split; %zu values off the documented pattern, "
		       "%zu values of other heads changed\n", forms[f].fused, pattern_bad, other_differ);
		assert_int_equal(pattern_bad, 0);
		assert_int_equal(other_differ, 0);
		free(clean);
		free(split);
		problem_free(&p);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_model_symbols),
		cmocka_unit_test(test_every_combination),
		cmocka_unit_test(test_nan_inf),
	};

	return T_RUN_TESTS(tests, group_setup, group_teardown);
}
