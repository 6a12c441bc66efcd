/* test_qk.c - the QK-RMSNorm + RoPE family on the fake device (real NVRTC
 * compiles, no GPU): every shape, stride, dtype and alignment mismatch is
 * one clear error from the generic call and launches nothing; the spec's
 * fallbacks launch the split kernels - the instances that match the
 * caller's parameters - with the right pointers, strides and scalars;
 * and the PTX of every instance of the family moves bf16 in 16-byte
 * vectors (32-byte on sm_100). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "fake_device.h"
#include "gpu/runtime.h"

/* Fake device addresses 64 GiB apart: no two buffers overlap. */
#define ADDR(i) ((jitk_devptr)(i) << 36)

typedef struct {
	char *dir, *cache, *specs, *gated;
} fixture;

static int setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));

	t_scratch(&f->dir, &f->cache, &f->specs);
	/* the fused symbols gated away: their split paths run */
	t_copy_tree(f->dir, NULL, NULL);
	f->gated = t_path(f->dir, "specs");
	{
		static const char *const files[] = { "qk_norm_rope.yaml", "qk_norm_rope_out.yaml" };
		size_t i;

		for (i = 0; i < 2; i++) {
			char *yaml = t_path(f->gated, files[i]);

			t_edit(yaml, "    fallback:\n",
			       "    gates:\n      - arch: { min: sm_200 }\n        reason: a test gate\n"
			       "    fallback:\n");
			free(yaml);
		}
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fixture *f = *state;

	t_scratch_free(f->dir, f->cache, f->specs);
	free(f->gated);
	free(f);
	return 0;
}

static jitk_runtime *runtime(fixture *f, fake_device *fake, int cc, const char *specs)
{
	jitk_runtime_options o = JITK_RUNTIME_OPTIONS_INIT;
	jitk_runtime *rt = NULL;

	memset(fake, 0, sizeof(*fake));
	fake->cc = cc;
	fake->sm_count = 132;
	if (t_fake_runtime_with(&rt, fake, specs, f->cache, &o))
		fprintf(stderr, "%s\n", jitk_error_last()->message);
	assert_non_null(rt);
	return rt;
}

/* ------------------------------------------------------------ a call */

/* The tensors of one call: q, k, v views of a packed [N, (hq + 2 hk) D]
 * bf16 buffer at ADDR(1), weights at ADDR(2) and ADDR(3), cos_sin [P, R]
 * at ADDR(4), positions at ADDR(5), outputs heads-first [h, N + 16, D] at
 * token offset 16 at ADDR(6), ADDR(7), ADDR(8). */
typedef struct {
	int64_t n, hq, hk, d, r, p;
	jitk_tensor q, k, v, qw, kw, cs, pos, qo, ko, vo;
	jitk_arg args[16];
	size_t nargs;
} qk;

static void heads(jitk_tensor *t, jitk_devptr data, int64_t n, int64_t h, int64_t d, int64_t ts,
		  int64_t hs)
{
	const jitk_dtype bf16 = JITK_DTYPE_BF16;
	const int64_t shape[3] = { n, h, d };

	assert_int_equal(jitk_tensor_contiguous(t, data, bf16, 3, shape), 0);
	t->strides[0] = ts;
	t->strides[1] = hs;
}

static void arg(qk *c, const char *name, const jitk_tensor *t)
{
	size_t i;

	for (i = 0; i < c->nargs; i++)
		if (!strcmp(c->args[i].name, name))
			break;
	if (i == c->nargs)
		c->nargs++;
	c->args[i].name = name;
	c->args[i].type = JITK_ARG_TENSOR;
	c->args[i].v.tensor = t;
}

static void drop(qk *c, const char *name)
{
	size_t i;

	for (i = 0; i < c->nargs; i++)
		if (!strcmp(c->args[i].name, name)) {
			c->args[i] = c->args[--c->nargs];
			return;
		}
	fail_msg("no argument %s", name);
}

/* wq: the weights' length (0: no weights); pos: 0 none, 32 or 64 bits;
 * out: the out-of-place form's arguments. */
static void make(qk *c, int64_t n, int64_t hq, int64_t hk, int64_t d, int64_t r, int64_t wq,
		 int64_t wk, int pos, int out)
{
	const jitk_dtype bf16 = JITK_DTYPE_BF16, f32 = JITK_DTYPE_F32;
	const jitk_dtype i32 = JITK_DTYPE_I32, i64 = JITK_DTYPE_I64;
	const int64_t row = (hq + 2 * hk) * d;

	memset(c, 0, sizeof(*c));
	c->n = n;
	c->hq = hq;
	c->hk = hk;
	c->d = d;
	c->r = r;
	c->p = pos ? 1000 : n;
	heads(&c->q, ADDR(1), n, hq, d, row, d);
	heads(&c->k, ADDR(1) + (uint64_t)(hq * d * 2), n, hk, d, row, d);
	heads(&c->v, ADDR(1) + (uint64_t)((hq + hk) * d * 2), n, hk, d, row, d);
	if (out) {
		arg(c, "q_out", &c->qo);
		arg(c, "k_out", &c->ko);
		arg(c, "v_out", &c->vo);
		heads(&c->qo, ADDR(6) + (uint64_t)(16 * d * 2), n, hq, d, d, (n + 16) * d);
		heads(&c->ko, ADDR(7) + (uint64_t)(16 * d * 2), n, hk, d, d, (n + 16) * d);
		heads(&c->vo, ADDR(8) + (uint64_t)(16 * d * 2), n, hk, d, d, (n + 16) * d);
	}
	arg(c, "q", &c->q);
	arg(c, "k", &c->k);
	if (out)
		arg(c, "v", &c->v);
	if (wq) {
		assert_int_equal(jitk_tensor_contiguous(&c->qw, ADDR(2), bf16, 1, &wq), 0);
		assert_int_equal(jitk_tensor_contiguous(&c->kw, ADDR(3), bf16, 1, &wk), 0);
		arg(c, "q_weight", &c->qw);
		arg(c, "k_weight", &c->kw);
	}
	{
		const int64_t shape[2] = { c->p, r };

		assert_int_equal(jitk_tensor_contiguous(&c->cs, ADDR(4), f32, 2, shape), 0);
	}
	arg(c, "cos_sin", &c->cs);
	if (pos) {
		assert_int_equal(jitk_tensor_contiguous(&c->pos, ADDR(5), pos == 64 ? i64 : i32, 1, &n), 0);
		arg(c, pos == 64 ? "positions_i64" : "positions", &c->pos);
	}
}

static int call(jitk_runtime *rt, const char *name, jitk_call_mode mode, qk *c, jitk_call_info *info)
{
	return jitk_call(info, rt, name, mode, c->args, c->nargs, NULL);
}

/* A STRICT call fails with exactly MESSAGE and launches nothing; so do
 * TRY and AUTO (after the fallback's steps are checked), except where
 * TRY reports a fallback: then AUTO's split path fails the same way (a
 * guard no step passes) - the message is the step's. */
static void refused(jitk_runtime *rt, fake_device *fake, const char *name, qk *c,
		    const char *message)
{
	jitk_call_info info = JITK_CALL_INFO_INIT;
	int rc, before = fake->nlaunches;

	assert_int_equal(call(rt, name, JITK_CALL_STRICT, c, &info), JITK_EINVAL);
	if (strcmp(jitk_error_last()->message, message))
		fail_msg("%s: got\n  %s\nwant\n  %s", name, jitk_error_last()->message, message);
	rc = call(rt, name, JITK_CALL_TRY, c, &info);
	assert_true(rc == JITK_EINVAL || rc == JITK_FALLBACK);
	assert_int_equal(call(rt, name, JITK_CALL_AUTO, c, &info), JITK_EINVAL);
	assert_int_equal(fake->nlaunches, before);
}

/* -------------------------------------------------------------- tests */

/* Every rule of the spec, one at a time, on the Qwen-Image shape (24 + 24
 * heads of 128, packed with v) and the Wan shape (40 + 40, across heads):
 * dtype, rank and shape of each tensor, the element stride, strides that
 * break the vectors, the table's rows and columns, positions, weights
 * given where there are none, alignment, NULL, overlap. */
static void test_bad_arguments(void **state)
{
	fixture *f = *state;
	fake_device fake;
	jitk_runtime *rt = runtime(f, &fake, 90, f->specs);
	const jitk_dtype f32 = JITK_DTYPE_F32, i64 = JITK_DTYPE_I64, bf16 = JITK_DTYPE_BF16;
	jitk_tensor bad, save;
	jitk_call_info info = JITK_CALL_INFO_INIT;
	qk c;

	make(&c, 7, 24, 24, 128, 128, 128, 128, 0, 0);
	/* the good call first: one launch */
	assert_int_equal(call(rt, "qk_norm_rope", JITK_CALL_STRICT, &c, &info), 0);
	assert_int_equal(fake.nlaunches, 1);
	fake.nlaunches = 0;

	/* dtype */
	save = c.q;
	c.q.dtype = f32;
	refused(rt, &fake, "qk_norm_rope", &c,
		"qk_norm_rope: q must be bf16, not a tensor of dtype code 2 bits 32 (nothing launched)");
	c.q = save;
	save = c.cs;
	c.cs.dtype = bf16;
	refused(rt, &fake, "qk_norm_rope", &c,
		"qk_norm_rope: cos_sin must be f32, not a tensor of dtype code 4 bits 16 (nothing launched)");
	c.cs = save;
	/* shape: head_dim, tokens, heads of k against v's, rank */
	heads(&bad, c.q.data, 7, 24, 64, c.q.strides[0], 64);
	arg(&c, "q", &bad);
	refused(rt, &fake, "qk_norm_rope", &c,
		"qk_norm_rope: q: expected shape [7, 24, 128], got [7, 24, 64] (nothing launched)");
	arg(&c, "q", &c.q);
	heads(&bad, c.k.data, 6, 24, 128, c.k.strides[0], 128);
	arg(&c, "k", &bad);
	refused(rt, &fake, "qk_norm_rope", &c,
		"qk_norm_rope: k: expected shape [7, 24, 128], got [6, 24, 128] (nothing launched)");
	bad.ndim = 2;
	bad.shape[1] = 24 * 128;
	refused(rt, &fake, "qk_norm_rope", &c,
		"qk_norm_rope: k: expected shape [tokens, k_heads, head_dim] (3 dimensions), got [6, 3072] (nothing launched)");
	arg(&c, "k", &c.k);
	/* the element stride, and strides that break the vectors */
	save = c.k;
	c.k.strides[2] = 2;
	refused(rt, &fake, "qk_norm_rope", &c,
		"qk_norm_rope: k: expected strides [9216, 128, 1], got [9216, 128, 2] (nothing launched)");
	c.k = save;
	c.k.strides[0] = 9212;
	refused(rt, &fake, "qk_norm_rope", &c,
		"qk_norm_rope: the token and head strides of q and k must be multiples of the vector's "
		"elements (vec_elems) (q_stride % vec_elems == 0 && q_head_stride % vec_elems == 0 && "
		"k_stride % vec_elems == 0 && k_head_stride % vec_elems == 0; nothing launched)");
	c.k = save;
	/* the weights: [D] per head */
	save = c.qw;
	c.qw.shape[0] = 3072;
	refused(rt, &fake, "qk_norm_rope", &c,
		"qk_norm_rope: q_weight: expected shape [128], got [3072] (nothing launched)");
	c.qw = save;
	drop(&c, "k_weight");
	refused(rt, &fake, "qk_norm_rope", &c, "qk_norm_rope: missing argument k_weight (nothing launched)");
	arg(&c, "k_weight", &c.kw);
	/* the table: one row per token without positions, R <= D, R % 32 */
	c.cs.shape[0] = 8;
	refused(rt, &fake, "qk_norm_rope", &c,
		"qk_norm_rope: with positions none, cos_sin needs one row per token (P == N) "
		"(positions != 0 || table_rows == tokens; nothing launched)");
	c.cs.shape[0] = 7;
	c.cs.shape[1] = 256;
	c.cs.strides[0] = 256;
	refused(rt, &fake, "qk_norm_rope", &c,
		"qk_norm_rope: the rotary dims (cos_sin's columns) must not exceed head_dim "
		"(rotary <= head_dim; nothing launched)");
	c.cs.shape[1] = 48;
	c.cs.strides[0] = 48;
	refused(rt, &fake, "qk_norm_rope", &c,
		"qk_norm_rope: the rotary dims (cos_sin's columns) must be a multiple of 32 "
		"(rotary % 32 == 0; nothing launched)");
	c.cs.shape[1] = 128;
	c.cs.strides[0] = 64;
	refused(rt, &fake, "qk_norm_rope", &c,
		"qk_norm_rope: cos_sin: expected strides [128, 1], got [64, 1] (it must be contiguous) (nothing launched)");
	c.cs.strides[0] = 128;
	/* alignment (16 bytes on sm_90), NULL, overlap */
	c.q.data += 8;
	refused(rt, &fake, "qk_norm_rope", &c,
		"qk_norm_rope: q (0x1000000008) is not 16-byte aligned (nothing launched)");
	assert_int_equal(call(rt, "qk_norm_rope", JITK_CALL_TRY, &c, &info), JITK_FALLBACK);
	assert_string_equal(info.reason, "q (0x1000000008) is not 16-byte aligned");
	c.q.data -= 8;
	c.cs.data += 4;
	refused(rt, &fake, "qk_norm_rope", &c,
		"qk_norm_rope: cos_sin (0x4000000004) is not 16-byte aligned (nothing launched)");
	c.cs.data -= 4;
	c.qw.data = 0;
	refused(rt, &fake, "qk_norm_rope", &c, "qk_norm_rope: q_weight is NULL (nothing launched)");
	c.qw.data = ADDR(2);
	c.cs.data = c.k.data + 128 * 2; /* inside k's second head */
	refused(rt, &fake, "qk_norm_rope", &c, "qk_norm_rope: q overlaps cos_sin in memory (nothing launched)");
	c.cs.data = ADDR(4);
	/* q and k may interleave (views of one buffer) */
	c.k.data = c.q.data + 9216 * 2 * 3;
	assert_int_equal(call(rt, "qk_norm_rope", JITK_CALL_STRICT, &c, &info), 0);
	c.k.data = ADDR(1) + 24 * 128 * 2;
	assert_int_equal(fake.nlaunches, 1);
	fake.nlaunches = 0;

	/* positions: missing, wrong dtype, wrong length; given where the
	 * instance takes none */
	make(&c, 7, 3, 2, 64, 64, 64, 64, 32, 0);
	{
		const char *sel = "qk_norm_rope_any[style=neox,positions=i32,span=head,weight=true]";

		assert_int_equal(call(rt, sel, JITK_CALL_STRICT, &c, &info), 0);
		assert_string_equal(info.instance, "qk_norm_rope_any[head_dim=64,style=neox,positions=i32,span=head,weight=true]");
		fake.nlaunches = 0;
		c.pos.dtype = i64;
		refused(rt, &fake, sel, &c,
			"qk_norm_rope_any[head_dim=64,style=neox,positions=i32,span=head,weight=true]: "
			"positions must be i32, not a tensor of dtype code 0 bits 64 (nothing launched)");
		arg(&c, "positions_i64", &c.pos);
		drop(&c, "positions");
		refused(rt, &fake, sel, &c,
			"qk_norm_rope_any[head_dim=64,style=neox,positions=i32,span=head,weight=true] "
			"takes no argument 'positions_i64' (nothing launched)");
		drop(&c, "positions_i64");
		refused(rt, &fake, sel, &c,
			"qk_norm_rope_any[head_dim=64,style=neox,positions=i32,span=head,weight=true]: "
			"missing argument positions (nothing launched)");
		c.pos.dtype = (jitk_dtype)JITK_DTYPE_I32;
		c.pos.shape[0] = 6;
		arg(&c, "positions", &c.pos);
		refused(rt, &fake, sel, &c,
			"qk_norm_rope_any[head_dim=64,style=neox,positions=i32,span=head,weight=true]: "
			"positions: expected shape [7], got [6] (nothing launched)");
		/* a head size no instance has */
		make(&c, 7, 3, 2, 96, 64, 96, 96, 32, 0);
		refused(rt, &fake, sel, &c,
			"qk_norm_rope_any: no instance for "
			"head_dim=96 (from q) (instances: qk_norm_rope_any[head_dim=64,style=neox,positions=i32,"
			"span=head,weight=true], qk_norm_rope_any[head_dim=128,style=neox,positions=i32,span=head,"
			"weight=true], qk_norm_rope_any[head_dim=256,style=neox,positions=i32,span=head,weight=true]) "
			"(nothing launched)");
		/* weights where the instance takes none */
		make(&c, 7, 3, 2, 64, 64, 64, 64, 0, 0);
		refused(rt, &fake, "qk_norm_rope_any[style=neox,positions=none,span=head,weight=false]", &c,
			"qk_norm_rope_any[head_dim=64,style=neox,positions=none,span=head,weight=false] takes no "
			"argument 'q_weight' (nothing launched)");
	}

	/* across heads: the weights are [heads * D]; at most 40 heads of 128
	 * each on sm_90 */
	make(&c, 5, 40, 40, 128, 128, 40 * 128, 40 * 128, 0, 0);
	assert_int_equal(call(rt, "qk_norm_rope_across_heads", JITK_CALL_STRICT, &c, &info), 0);
	fake.nlaunches = 0;
	c.kw.shape[0] = 128;
	refused(rt, &fake, "qk_norm_rope_across_heads", &c,
		"qk_norm_rope_across_heads: k_weight: expected shape [5120], got [128] (nothing launched)");
	make(&c, 5, 48, 48, 128, 128, 48 * 128, 48 * 128, 0, 0);
	refused(rt, &fake, "qk_norm_rope_across_heads", &c,
		"qk_norm_rope_across_heads: the across-heads norm takes at most threads x items / (2 x lanes) heads "
		"of q, and of k (span == 0 || 2 * max(q_heads, k_heads) * lanes <= threads * items; nothing launched)");

	/* out of place: outputs may not overlap the inputs; strides */
	make(&c, 7, 24, 24, 128, 128, 128, 128, 0, 1);
	assert_int_equal(call(rt, "qk_norm_rope_out", JITK_CALL_STRICT, &c, &info), 0);
	fake.nlaunches = 0;
	save = c.qo;
	c.qo.data = c.v.data;
	refused(rt, &fake, "qk_norm_rope_out", &c, "qk_norm_rope_out: q_out overlaps q in memory (nothing launched)");
	c.qo = save;
	c.vo.strides[1] = 100;
	refused(rt, &fake, "qk_norm_rope_out", &c,
		"qk_norm_rope_out: the token and head strides of q_out, k_out and v_out must be multiples of "
		"the vector's elements (vec_elems) (q_out_stride % vec_elems == 0 && q_out_head_stride % "
		"vec_elems == 0 && k_out_stride % vec_elems == 0 && k_out_head_stride % vec_elems == 0 && "
		"v_out_stride % vec_elems == 0 && v_out_head_stride % vec_elems == 0; nothing launched)");
	c.vo.strides[1] = save.strides[1];
	heads(&bad, c.v.data, 7, 23, 128, c.v.strides[0], 128);
	arg(&c, "v", &bad);
	refused(rt, &fake, "qk_norm_rope_out", &c,
		"qk_norm_rope_out: v: expected shape [7, 24, 128], got [7, 23, 128] (nothing launched)");
	assert_int_equal(fake.nlaunches, 0);
	jitk_runtime_free(rt);

	/* sm_100: 32-byte vectors, so 32-byte alignment and strides of 16 */
	rt = runtime(f, &fake, 100, f->specs);
	make(&c, 7, 24, 24, 128, 128, 128, 128, 0, 0);
	c.q.data += 16;
	refused(rt, &fake, "qk_norm_rope", &c,
		"qk_norm_rope: q (0x1000000010) is not 32-byte aligned (nothing launched)");
	c.q.data -= 16;
	c.q.strides[1] = 136;
	refused(rt, &fake, "qk_norm_rope", &c,
		"qk_norm_rope: the token and head strides of q and k must be multiples of the vector's "
		"elements (vec_elems) (q_stride % vec_elems == 0 && q_head_stride % vec_elems == 0 && "
		"k_stride % vec_elems == 0 && k_head_stride % vec_elems == 0; nothing launched)");
	assert_int_equal(fake.nlaunches, 0);
	jitk_runtime_free(rt);
}

/* The kernel the runtime resolved for instance NAME. */
static jitk_kernel *kernel(jitk_runtime *rt, const char *name)
{
	jitk_kernel *k = NULL;

	if (jitk_kernel_get(&k, rt, name))
		fail_msg("%s: %s", name, jitk_error_last()->message);
	return k;
}

/* A launch of instance NAME over one block per token. */
static void launched(jitk_runtime *rt, const fake_launch *l, const char *name, int64_t tokens,
		     size_t nparams)
{
	const jitk_kernel *k = kernel(rt, name);

	if (l->kernel != k->fn)
		fail_msg("the launch is not of %s", name);
	assert_int_equal(l->grid[0], tokens);
	assert_int_equal(l->block[0], k->block);
	assert_int_equal(l->nparams, nparams);
}

/* A launch's parameters, each as 8 bytes (scalars zero-extended). */
static void values_are(const fake_launch *l, const uint64_t *want, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (l->values[i] != want[i])
			fail_msg("parameter %zu is 0x%llx, want 0x%llx", i, (unsigned long long)l->values[i],
				 (unsigned long long)want[i]);
}

/* The in-place fused call, and its split path where the fused symbol is
 * gated: rms_norm_heads then rope, each the instance that agrees with the
 * caller's parameters, with the caller's pointers; the strides, tokens,
 * head counts, rotary dims and table rows taken from the tensors. */
static void test_fused_and_split_launches(void **state)
{
	fixture *f = *state;
	fake_device fake;
	jitk_runtime *rt = runtime(f, &fake, 90, f->specs);
	jitk_call_info info = JITK_CALL_INFO_INIT;
	const fake_launch *l;
	float eps = 1e-6f;
	uint32_t eps_bits;
	qk c;

	memcpy(&eps_bits, &eps, 4);
	/* fused: q, k, q_weight, k_weight, cos_sin, positions, positions_i64,
	 * tokens, q_heads, k_heads, rotary, table_rows, 4 strides, eps */
	make(&c, 4096, 24, 24, 128, 128, 128, 128, 0, 0);
	assert_int_equal(call(rt, "qk_norm_rope", JITK_CALL_AUTO, &c, &info), 0);
	assert_int_equal(info.fallback, 0);
	assert_int_equal(fake.nlaunches, 1);
	l = &fake.launches[0];
	launched(rt, l, "qk_norm_rope", 4096, 17);
	{
		const uint64_t want[17] = { c.q.data, c.k.data, ADDR(2), ADDR(3), ADDR(4), 0, 0, 4096,
					    24, 24, 128, 4096, 72 * 128, 128, 72 * 128, 128, eps_bits };

		values_are(l, want, 17);
	}
	assert_int_equal(l->programmatic, 0);
	/* one token: its strides say nothing and default to 0 */
	make(&c, 1, 24, 24, 128, 128, 128, 128, 0, 0);
	assert_int_equal(call(rt, "qk_norm_rope", JITK_CALL_STRICT, &c, &info), 0);
	assert_int_equal(fake.launches[1].values[12], 0);
	assert_int_equal(fake.launches[1].values[13], 128);
	/* no tokens: nothing to launch, not an error */
	make(&c, 0, 24, 24, 128, 128, 128, 128, 0, 0);
	assert_int_equal(call(rt, "qk_norm_rope", JITK_CALL_STRICT, &c, &info), 0);
	assert_int_equal(fake.nlaunches, 2);
	jitk_runtime_free(rt);

	rt = runtime(f, &fake, 90, f->gated);
	make(&c, 4096, 24, 24, 128, 128, 128, 128, 0, 0);
	assert_int_equal(call(rt, "qk_norm_rope", JITK_CALL_TRY, &c, &info), JITK_FALLBACK);
	assert_non_null(strstr(info.reason, "a test gate"));
	assert_int_equal(fake.nlaunches, 0);
	assert_int_equal(call(rt, "qk_norm_rope", JITK_CALL_AUTO, &c, &info), 0);
	assert_int_equal(info.fallback, 1);
	assert_int_equal(fake.nlaunches, 2);
	/* rms_norm_heads: q, k, q_weight, k_weight, tokens, q_heads, k_heads,
	 * 4 strides, eps */
	l = &fake.launches[0];
	launched(rt, l, "rms_norm_heads[head_dim=128,span=head,weight=true]", 4096, 12);
	{
		const uint64_t want[12] = { c.q.data, c.k.data, ADDR(2), ADDR(3), 4096, 24, 24,
					    72 * 128, 128, 72 * 128, 128, eps_bits };

		values_are(l, want, 12);
	}
	/* rope: q, k, cos_sin, positions, positions_i64, tokens, q_heads,
	 * k_heads, rotary, table_rows, 4 strides */
	l = &fake.launches[1];
	launched(rt, l, "rope[head_dim=128,style=interleaved,positions=none]", 4096, 14);
	{
		const uint64_t want[14] = { c.q.data, c.k.data, ADDR(4), 0, 0, 4096, 24, 24, 128, 4096,
					    72 * 128, 128, 72 * 128, 128 };

		values_are(l, want, 14);
	}

	/* The generic set: the selector fixes style, positions, span and
	 * weight, q's shape gives head_dim; the split steps are the
	 * instances with the same values of what they share. */
	fake.nlaunches = 0;
	make(&c, 33, 6, 2, 64, 32, 0, 0, 64, 0);
	assert_int_equal(call(rt, "qk_norm_rope_any[span=heads,weight=false,style=neox,positions=i64]",
			      JITK_CALL_AUTO, &c, &info), 0);
	assert_int_equal(info.fallback, 1);
	assert_int_equal(fake.nlaunches, 2);
	launched(rt, &fake.launches[0], "rms_norm_heads[head_dim=64,span=heads,weight=false]", 33, 12);
	assert_int_equal(fake.launches[0].values[2], 0); /* no weights */
	assert_int_equal(fake.launches[0].values[3], 0);
	launched(rt, &fake.launches[1], "rope[head_dim=64,style=neox,positions=i64]", 33, 14);
	assert_int_equal(fake.launches[1].values[3], 0);
	assert_int_equal(fake.launches[1].values[4], ADDR(5)); /* positions_i64 */
	assert_int_equal((uint32_t)fake.launches[1].values[8], 32);
	assert_int_equal(fake.launches[1].values[9], 1000);
	/* every step is checked before the first launches: a table the rope
	 * step refuses leaves q and k untouched */
	fake.nlaunches = 0;
	c.cs.shape[1] = 96;
	c.cs.strides[0] = 96;
	assert_int_equal(call(rt, "qk_norm_rope_any[span=heads,weight=false,style=neox,positions=i64]",
			      JITK_CALL_AUTO, &c, &info), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message,
			    "rope[head_dim=64,style=neox,positions=i64]: the rotary dims (cos_sin's columns) must "
			    "not exceed head_dim (rotary <= head_dim; nothing launched)");
	assert_int_equal(fake.nlaunches, 0);
	jitk_runtime_free(rt);
}

/* Out of place: the fused kernel writes q_out, k_out, v_out; its split
 * path copies q, k, v there, then normalizes and rotates there in place,
 * each step with the outputs' strides. */
static void test_out_of_place_launches(void **state)
{
	fixture *f = *state;
	fake_device fake;
	jitk_runtime *rt = runtime(f, &fake, 90, f->specs);
	const int64_t n = 512, row = 72 * 128, hs = (512 + 16) * 128;
	jitk_call_info info = JITK_CALL_INFO_INIT;
	const fake_launch *l;
	size_t i;
	qk c;

	make(&c, n, 24, 24, 128, 128, 128, 128, 0, 1);
	assert_int_equal(call(rt, "qk_norm_rope_out", JITK_CALL_AUTO, &c, &info), 0);
	assert_int_equal(info.fallback, 0);
	l = &fake.launches[0];
	launched(rt, l, "qk_norm_rope_out", n, 29);
	{
		/* q_out, k_out, v_out, q, k, v, q_weight, k_weight, cos_sin */
		const jitk_devptr want[9] = { c.qo.data, c.ko.data, c.vo.data, c.q.data, c.k.data,
					      c.v.data, ADDR(2), ADDR(3), ADDR(4) };
		/* the strides, q's to v_out's, token then head */
		const int64_t strides[12] = { row, 128, row, 128, row, 128, 128, hs, 128, hs, 128, hs };

		for (i = 0; i < 9; i++)
			assert_int_equal(l->values[i], want[i]);
		for (i = 0; i < 12; i++)
			assert_int_equal(l->values[16 + i], strides[i]);
	}
	jitk_runtime_free(rt);

	rt = runtime(f, &fake, 90, f->gated);
	assert_int_equal(call(rt, "qk_norm_rope_out", JITK_CALL_AUTO, &c, &info), 0);
	assert_int_equal(info.fallback, 1);
	assert_int_equal(fake.nlaunches, 5);
	/* copy_heads: dst, src, tokens, heads, dst strides, src strides */
	{
		const jitk_devptr dst[3] = { c.qo.data, c.ko.data, c.vo.data };
		const jitk_devptr src[3] = { c.q.data, c.k.data, c.v.data };

		for (i = 0; i < 3; i++) {
			l = &fake.launches[i];
			launched(rt, l, "copy_heads[head_dim=128]", n, 8);
			assert_int_equal(l->values[0], dst[i]);
			assert_int_equal(l->values[1], src[i]);
			assert_int_equal((uint32_t)l->values[3], 24);
			assert_int_equal(l->values[4], 128);
			assert_int_equal(l->values[5], hs);
			assert_int_equal(l->values[6], row);
			assert_int_equal(l->values[7], 128);
		}
	}
	l = &fake.launches[3];
	launched(rt, l, "rms_norm_heads[head_dim=128,span=head,weight=true]", n, 12);
	assert_int_equal(l->values[0], c.qo.data);
	assert_int_equal(l->values[1], c.ko.data);
	assert_int_equal(l->values[7], 128);
	assert_int_equal(l->values[8], hs);
	l = &fake.launches[4];
	launched(rt, l, "rope[head_dim=128,style=interleaved,positions=none]", n, 14);
	assert_int_equal(l->values[0], c.qo.data);
	assert_int_equal(l->values[1], c.ko.data);
	assert_int_equal(l->values[2], ADDR(4));
	assert_int_equal(l->values[12], 128);
	assert_int_equal(l->values[13], hs);
	jitk_runtime_free(rt);
}

static const char *const qk_families[] = { "qk_norm_rope", "qk_norm_rope_out", "rms_norm_heads",
					    "rope", "copy_heads" };

/* Instance i's PTX for compute_90 and compute_100 when it is of the QK
 * families: the builds checked (0 or 2), or -1 having said why not. */
static long vector_widths_of(void *ctx, size_t i)
{
	jitk_compiler *c = ctx;
	const spec_family *fam = c->specs->insts[i].sym->fam;
	size_t f;
	int a;

	for (f = 0; f < JITK_ARRAY_SIZE(qk_families); f++)
		if (!strcmp(fam->name, qk_families[f]))
			break;
	if (f == JITK_ARRAY_SIZE(qk_families))
		return 0;
	for (a = 0; a < 2; a++) {
		const char *wide = a ? "v8.u32" : "v4.u32";
		char ld[32], ldnc[32], st[32];
		jitk_build b;
		jitk_arch arch;
		int bad;

		jitk__arch_parse(&arch, a ? "compute_100" : "compute_90");
		if (jitk__build(&b, c, i, arch, 0)) {
			fprintf(stderr, "%s: %s\n", c->specs->insts[i].name, jitk_error_last()->message);
			return -1;
		}
		snprintf(ld, sizeof(ld), "ld.global.%s", wide);
		snprintf(ldnc, sizeof(ldnc), "ld.global.nc.%s", wide);
		snprintf(st, sizeof(st), "st.global.%s", wide);
		bad = !b.entry.is_ptx || !(strstr(b.entry.image, ld) || strstr(b.entry.image, ldnc)) ||
		      !strstr(b.entry.image, st) || strstr(b.entry.image, "ld.global.u16") ||
		      strstr(b.entry.image, "st.global.u16") || strstr(b.entry.image, "ld.global.b16");
		jitk__build_free(&b);
		if (bad) {
			fprintf(stderr, "%s for %s: bf16 not moved in %s vectors\n", c->specs->insts[i].name,
				a ? "compute_100" : "compute_90", wide);
			return -1;
		}
	}
	return 2;
}

/* The family's spec files: every instance's PTX moves bf16 with 16-byte
 * vectors (ld/st.global.v4.u32) for compute_90 and 32-byte ones
 * (v8.u32) for compute_100, and never one bf16 at a time. (Every
 * instance's cubin compiles without spills or stack frame for sm_90 and
 * sm_100 in test_compile.) Two processes share the builds. */
static void test_vector_widths(void **state)
{
	char *specs = t_path(t_root(), "specs");
	jitk_compiler *c = t_compiler(specs, NULL, NULL, NULL);
	long n;

	(void)state;
	n = t_parallel_sum(c->specs->ninsts, vector_widths_of, c);
	assert_true(n >= 200);
	printf("%ld PTX builds of the QK family: vector loads and stores only\n", n);
	jitk_compiler_free(c);
	free(specs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_bad_arguments, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fused_and_split_launches, setup, teardown),
		cmocka_unit_test_setup_teardown(test_out_of_place_launches, setup, teardown),
		cmocka_unit_test(test_vector_widths),
	};

	return T_RUN_TESTS(tests, NULL, NULL);
}
