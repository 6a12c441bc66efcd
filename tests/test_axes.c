/* test_axes.c - issue 12's axes of the norm family, without a GPU:
 *  - every combination of the family's parameters that the spec allows
 *    (its constraints) compiles for sm_90 and sm_100 with no warning, no
 *    stack frame and no spill, at each hidden size the symbols use; the
 *    combinations it does not allow are refused with the constraint's
 *    message;
 *  - bad arguments of the new modulation classes (shapes, the index's
 *    dtype and shape, L not dividing rows) are errors with exact messages
 *    before anything is launched, on the fake device; good ones launch with
 *    the values where the kernel expects them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "fake_device.h"
#include "compile/compile.h"
#include "gpu/runtime.h"
#include "jitk/norm_scale_shift.h"
#include "jitk/per_token_quant_fp8.h"

/* The kernel's parameter positions (specs/norm_scale_shift.yaml). */
enum {
	P_Y, P_Q, P_ROUT, P_X, P_RES, P_GATE, P_SCALE, P_SHIFT, P_ISCALE, P_ROWS, P_EPS,
	P_S, P_GATE_OUT, P_SCALES, P_SHIFTS, P_GATES, P_SCALE0, P_SHIFT0, P_GATE0, P_SCALE1,
	P_SHIFT1, P_GATE1, P_INDEX, P_WEIGHT, P_BIAS, P_B, P_L, P_COUNT
};

/* Fake device addresses 64 GiB apart: no two tensors overlap. */
#define ADDR(i) ((jitk_devptr)(i) << 36)

static double now_s(void)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	return (double)tv.tv_sec + (double)tv.tv_usec * 1e-6;
}

/* ------------------------------------------- every combination compiles */

/* The constraints' messages (specs/norm_scale_shift.yaml). */
static const char *const refusals[] = {
	"outputs: q needs a quantizing variant",
	"RMSNorm takes affine: none or weight",
};

typedef struct {
	long built, refused;
} walk_count;

/* Whether instance inst is refused by the spec's constraints on arch (a
 * known refusal), through jitk__prepare: no NVRTC. Exits the process with 1
 * (saying why) on any other failure. */
static int refused(jitk_compiler *c, size_t inst, const char *archname)
{
	jitk_tu tu;
	jitk_variant v;
	jitk_arch arch;
	uint8_t key[JITK_HASH_SIZE];
	size_t k;
	int rc;

	jitk__arch_parse(&arch, archname);
	rc = jitk__prepare(&tu, key, &v, c, inst, arch);
	if (rc == JITK_ESPEC) {
		for (k = 0; k < JITK_ARRAY_SIZE(refusals); k++)
			if (strstr(jitk_error_last()->message, refusals[k]))
				return 1;
		fprintf(stderr, "%s %s: %s\n", c->specs->insts[inst].name, archname,
			jitk_error_last()->message);
		exit(1);
	}
	if (rc) {
		fprintf(stderr, "%s %s: %s\n", c->specs->insts[inst].name, archname,
			jitk_error_last()->message);
		exit(1);
	}
	jitk__tu_free(&tu);
	return 0;
}

typedef struct {
	jitk_compiler *c;
	const size_t *pick;
} walk_ctx;

/* Instance pick[i] built for sm_90 and sm_100, each log checked clean:
 * the builds (2), or -1 having said why not. */
static long walk(void *ctx, size_t i)
{
	static const char *const archs[] = { "sm_90", "sm_100" };
	const walk_ctx *w = ctx;
	size_t a;

	for (a = 0; a < 2; a++) {
		const char *name = w->c->specs->insts[w->pick[i]].name;
		jitk_build b;
		jitk_arch arch;

		jitk__arch_parse(&arch, archs[a]);
		if (jitk__build(&b, w->c, w->pick[i], arch, JITK_BUILD_PTXAS_INFO)) {
			fprintf(stderr, "%s %s: %s\n%s\n", name, archs[a], jitk_error_last()->message,
				jitk_error_last()->detail);
			return -1;
		}
		if (!b.log || strstr(b.log, "warning") ||
		    !strstr(b.log, "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads")) {
			fprintf(stderr, "%s %s: not clean:\n%s\n", name, archs[a], b.log ? b.log : "(no log)");
			jitk__build_free(&b);
			return -1;
		}
		jitk__build_free(&b);
	}
	return 2;
}

/* The pairs of (parameter, value) that instance inst has, over the params
 * the symbol lists several values for: pair (p, vp, q, vq) with p < q is
 * bit index of a table that pair_index() lays out. */
#define AX_MAXP 16
#define AX_MAXV 8
static size_t pair_index(size_t p, size_t vp, size_t q, size_t vq)
{
	return ((p * AX_MAXV + vp) * AX_MAXP + q) * AX_MAXV + vq;
}

static size_t value_index(const spec_symbol *sym, size_t p, int64_t v)
{
	size_t i;

	for (i = 0; i < sym->nvals[p]; i++)
		if (sym->vals[p][i] == v)
			return i;
	fail_msg("instance value not in the symbol's list");
	return 0;
}

/* A deterministic greedy cover of every pair of values of two parameters
 * among the allowed instances: each step picks the instance (lowest id on a
 * tie) that covers most pairs not covered yet. Its instances go to pick;
 * returns how many. Every pair that any allowed instance has is covered. */
static size_t pairwise_cover(const jitk_compiler *c, const spec_symbol *sym,
			     const size_t *allowed, size_t nallowed, size_t *pick)
{
	enum { NPAIRS = AX_MAXP * AX_MAXV * AX_MAXP * AX_MAXV };
	static unsigned char covered[NPAIRS], present[NPAIRS];
	size_t np = sym->fam->nparams, npick = 0, i, p, q;

	assert_true(np <= AX_MAXP);
	memset(covered, 0, sizeof(covered));
	memset(present, 0, sizeof(present));
	for (p = 0; p < np; p++)
		assert_true(sym->nvals[p] <= AX_MAXV);
	for (i = 0; i < nallowed; i++) {
		const int64_t *v = c->specs->insts[allowed[i]].vals;

		for (p = 0; p < np; p++)
			for (q = p + 1; q < np; q++)
				if (sym->nvals[p] > 1 && sym->nvals[q] > 1)
					present[pair_index(p, value_index(sym, p, v[p]), q,
							   value_index(sym, q, v[q]))] = 1;
	}
	for (;;) {
		size_t best = 0, best_gain = 0;

		for (i = 0; i < nallowed; i++) {
			const int64_t *v = c->specs->insts[allowed[i]].vals;
			size_t gain = 0;

			for (p = 0; p < np; p++)
				for (q = p + 1; q < np; q++)
					if (sym->nvals[p] > 1 && sym->nvals[q] > 1)
						gain += !covered[pair_index(p, value_index(sym, p, v[p]), q,
									    value_index(sym, q, v[q]))];
			if (gain > best_gain) {
				best_gain = gain;
				best = i;
			}
		}
		if (!best_gain)
			break;
		{
			const int64_t *v = c->specs->insts[allowed[best]].vals;

			for (p = 0; p < np; p++)
				for (q = p + 1; q < np; q++)
					if (sym->nvals[p] > 1 && sym->nvals[q] > 1)
						covered[pair_index(p, value_index(sym, p, v[p]), q,
								   value_index(sym, q, v[q]))] = 1;
		}
		pick[npick++] = allowed[best];
	}
	for (i = 0; i < NPAIRS; i++)
		assert_int_equal(covered[i], present[i]);
	return npick;
}

/* A copy of the specs with one more symbol that lists every value of
 * every parameter of the family (and the hidden sizes the symbols use):
 * its instances are every combination. Each one's refusal by the spec's
 * constraints is checked on both architectures (no NVRTC); the allowed
 * ones that build are a pairwise cover of them (every two values of any
 * two parameters built together at least once: about 25 instances), or
 * all of them with JITK_TEST_EVERY_COMBINATION=1 (`ninja test-axes-all`:
 * 1200 builds, minutes on 2 cores - a build load, not a test of a hang).
 * Two processes share the builds. */
static void test_every_combination_compiles(void **state)
{
	char *dir = t_tmpdir(), *specs = t_path(dir, "specs"), *yaml;
	const char *all_env = getenv("JITK_TEST_EVERY_COMBINATION");
	int all = all_env && !strcmp(all_env, "1");
	jitk_compiler *c;
	walk_count total = { 0, 0 };
	size_t sym, first, n, i, nallowed = 0, npick;
	size_t *allowed, *pick;
	double t0 = now_s();

	(void)state;
	t_copy_tree(dir, NULL, NULL);
	yaml = t_path(specs, "norm_scale_shift.yaml");
	{
		size_t len;
		char *text = t_read(yaml, &len);

		t_writef(yaml, "%s  every_combination:\n"
			 "    description: every combination of the parameters (test_axes)\n"
			 "    params: { norm: [layer, rms], residual: [false, true], "
			 "quantize: [none, fp8_e4m3, fp8_e4m3_per_token], hidden: [3072, 1536, 5120], "
			 "modulation: [shared, per_batch, per_token, indexed], "
			 "affine: [none, weight, weight_bias], outputs: [y_q, q] }\n", text);
		free(text);
	}
	c = t_compiler(specs, NULL, NULL, NULL);
	assert_non_null(c);
	for (sym = 0; sym < c->specs->nsyms; sym++)
		if (!strcmp(c->specs->syms[sym]->name, "every_combination"))
			break;
	assert_true(sym < c->specs->nsyms);
	first = c->specs->syms[sym]->first;
	n = c->specs->syms[sym]->ninsts;
	assert_int_equal(n, 2 * 2 * 3 * 3 * 4 * 3 * 2);
	allowed = calloc(n, sizeof(*allowed));
	pick = calloc(n, sizeof(*pick));
	assert_non_null(allowed);
	assert_non_null(pick);
	for (i = 0; i < n; i++) {
		int r90 = refused(c, first + i, "sm_90"), r100 = refused(c, first + i, "sm_100");

		/* the constraints do not depend on the architecture */
		assert_int_equal(r90, r100);
		total.refused += r90 + r100;
		if (!r90)
			allowed[nallowed++] = first + i;
	}
	/* allowed: 5 norm x affine, 5 quantize x outputs, 2 x 4 x 3 the rest */
	assert_int_equal(nallowed, 5 * 5 * 2 * 4 * 3);
	assert_int_equal(total.refused, 2 * ((long)n - 5 * 5 * 2 * 4 * 3));
	if (all) {
		memcpy(pick, allowed, nallowed * sizeof(*pick));
		npick = nallowed;
	} else {
		npick = pairwise_cover(c, c->specs->syms[sym], allowed, nallowed, pick);
		assert_true(npick > 0 && npick < nallowed);
	}
	{
		walk_ctx w = { c, pick };

		total.built = t_parallel_sum(npick, walk, &w);
	}
	assert_int_equal(total.built, 2 * (long)npick);
	printf("every combination: %ld allowed, %ld refused by the spec's constraints (both checked "
	       "on sm_90 and sm_100); %ld builds (%s) clean (no spill, no stack, no warning), %.0f s\n",
	       (long)nallowed, total.refused / 2, total.built,
	       all ? "all of them" : "a pairwise cover; JITK_TEST_EVERY_COMBINATION=1 builds all",
	       now_s() - t0);
	/* The shipped specs' instances, for the report. */
	{
		jitk_compiler *shipped;
		char *repo = t_path(t_root(), "specs");

		shipped = t_compiler(repo, NULL, NULL, NULL);
		printf("shipped: %zu symbols, %zu instances (each a cubin per architecture)\n",
		       shipped->specs->nsyms, shipped->specs->ninsts);
		jitk_compiler_free(shipped);
		free(repo);
	}
	free(allowed);
	free(pick);
	jitk_compiler_free(c);
	t_rmtree(dir);
	free(dir);
	free(specs);
	free(yaml);
}

/* ------------------------------------------------------ bad arguments */

typedef struct {
	char *dir, *cache, *specs;
	fake_device fake;
	jitk_runtime *rt;
} fixture;

static int setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));

	t_scratch(&f->dir, &f->cache, &f->specs);
	f->fake.cc = 90;
	f->fake.sm_count = 132;
	f->fake.scale_value = 0.5f;
	if (t_fake_runtime(&f->rt, &f->fake, f->specs, f->cache, JITK_CAPTURE_ERROR))
		fprintf(stderr, "%s\n", jitk_error_last()->message);
	*state = f;
	return f->rt ? 0 : -1;
}

static int teardown(void **state)
{
	fixture *f = *state;

	jitk_runtime_free(f->rt);
	t_scratch_free(f->dir, f->cache, f->specs);
	free(f);
	return 0;
}

/* Batch 2 of 64 rows each at hidden 3072, per-batch modulation: the
 * typed calls generated from the spec (jitk/norm_scale_shift.h) pass the
 * fields that are set under the spec's names. */
static jitk_norm_scale_shift_args batch_args(void)
{
	jitk_norm_scale_shift_args a;

	jitk_norm_scale_shift_args_init(&a);
	a.y = ADDR(1);
	a.q = ADDR(2);
	a.x = ADDR(4);
	a.scales = ADDR(7);
	a.shifts = ADDR(8);
	a.rows = 128;
	a.hidden = 3072;
	a.B = 2;
	a.L = 64;
	return a;
}

/* The call fails with JITK_EINVAL, this message, and nothing launched. */
static void expect_error(fixture *f, const char *sym, const jitk_norm_scale_shift_args *a, const char *msg)
{
	int before = f->fake.nlaunches;
	int rc = jitk_norm_scale_shift_call(NULL, f->rt, sym, JITK_CALL_STRICT, a, NULL);

	if (rc != JITK_EINVAL || strcmp(jitk_error_last()->message, msg))
		fprintf(stderr, "%s: rc %d: %s\nwanted: %s\n", sym, rc, jitk_error_last()->message, msg);
	assert_int_equal(rc, JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message, msg);
	assert_int_equal(f->fake.nlaunches, before);
	/* TRY and AUTO cannot fix it either */
	assert_int_equal(jitk_norm_scale_shift_call(NULL, f->rt, sym, JITK_CALL_AUTO, a, NULL), JITK_EINVAL);
	assert_int_equal(f->fake.nlaunches, before);
}

/* fused_norm_scale_shift_per_batch[hidden=3072] through the generic call:
 * y and x [rows, 3072]; scales [bsc, 3072] and shifts [bsh, 3072] (nd 2),
 * or both [3072] (nd 1); L. */
static int per_batch_call(fixture *f, int64_t rows, int nd, int64_t bsc, int64_t bsh, int64_t L)
{
	const jitk_dtype bf16 = JITK_DTYPE_BF16;
	const int64_t ys[2] = { rows, 3072 }, sc[2] = { nd == 2 ? bsc : 3072, 3072 },
		      sh[2] = { nd == 2 ? bsh : 3072, 3072 };
	jitk_tensor t[4];
	jitk_arg args[5] = {
		{ "y", JITK_ARG_TENSOR, { .tensor = &t[0] } },
		{ "x", JITK_ARG_TENSOR, { .tensor = &t[1] } },
		{ "scales", JITK_ARG_TENSOR, { .tensor = &t[2] } },
		{ "shifts", JITK_ARG_TENSOR, { .tensor = &t[3] } },
		{ "L", JITK_ARG_I64, { .i64 = L } },
	};

	jitk_tensor_contiguous(&t[0], ADDR(1), bf16, 2, ys);
	jitk_tensor_contiguous(&t[1], ADDR(4), bf16, 2, ys);
	jitk_tensor_contiguous(&t[2], ADDR(7), bf16, nd, sc);
	jitk_tensor_contiguous(&t[3], ADDR(8), bf16, nd, sh);
	return jitk_call(NULL, f->rt, "fused_norm_scale_shift_per_batch", JITK_CALL_STRICT, args, 5,
			 NULL);
}

static void test_per_batch_arguments(void **state)
{
	fixture *f = *state;
	const char *sym = "fused_norm_scale_shift_per_batch";
	jitk_norm_scale_shift_args a = batch_args();
	fake_launch *l;

	/* good: B from the scales' shape, L given */
	a.q = 0;
	assert_int_equal(jitk_norm_scale_shift_call(NULL, f->rt, sym, JITK_CALL_STRICT, &a, NULL), 0);
	assert_int_equal(f->fake.nlaunches, 1);
	l = &f->fake.launches[0];
	assert_int_equal(l->nparams, P_COUNT);
	assert_int_equal(l->values[P_SCALES], a.scales);
	assert_int_equal(l->values[P_SHIFTS], a.shifts);
	assert_int_equal(l->values[P_SCALE], 0);
	assert_int_equal(l->values[P_B], 2);
	assert_int_equal(l->values[P_L], 64);
	assert_int_equal(l->values[P_ROWS], 128);

	/* [hidden] vectors where the class takes [B, hidden] */
	a.scale = a.scales;
	a.shift = a.shifts;
	a.scales = a.shifts = 0;
	a.B = 0;
	expect_error(f, sym, &a, "fused_norm_scale_shift_per_batch[hidden=3072] takes no argument 'scale' (nothing launched)");
	a = batch_args();
	a.q = 0;
	/* the shift of another batch count; 1-D scales through the generic
	 * call: the rank is named */
	assert_int_equal(per_batch_call(f, 128, 2, 2, 3, 64), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message,
			    "fused_norm_scale_shift_per_batch[hidden=3072]: shifts: expected shape [2, 3072], got [3, 3072] (nothing launched)");
	assert_int_equal(per_batch_call(f, 128, 1, 0, 0, 64), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message,
			    "fused_norm_scale_shift_per_batch[hidden=3072]: scales: expected shape [B, hidden] (2 dimensions), got [3072] (nothing launched)");
	assert_int_equal(f->fake.nlaunches, 1);
	/* L that does not divide rows, a batch count that does not match */
	a.L = 48;
	expect_error(f, sym, &a, "fused_norm_scale_shift_per_batch[hidden=3072]: rows must be B x L (B batches in the modulation tensors, L rows of x each) (!batched || rows == B * L; nothing launched)");
	a.L = 64;
	a.B = 4;
	expect_error(f, sym, &a, "fused_norm_scale_shift_per_batch[hidden=3072]: rows must be B x L (B batches in the modulation tensors, L rows of x each) (!batched || rows == B * L; nothing launched)");
	a.B = 2;
	/* L missing, L not positive */
	a.L = 0;
	expect_error(f, sym, &a, "fused_norm_scale_shift_per_batch[hidden=3072]: missing argument L (nothing launched)");
	a.L = -4;
	expect_error(f, sym, &a, "fused_norm_scale_shift_per_batch[hidden=3072]: L (rows per batch) must be positive (!batched || L > 0; nothing launched)");
	/* rows == 0: zero batches of any L launch nothing, L = 0 is refused */
	assert_int_equal(per_batch_call(f, 0, 2, 0, 0, 0), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message,
			    "fused_norm_scale_shift_per_batch[hidden=3072]: L (rows per batch) must be positive (!batched || L > 0; nothing launched)");
	assert_int_equal(per_batch_call(f, 0, 2, 0, 0, 16), 0);
	assert_int_equal(f->fake.nlaunches, 1);
}

static void test_per_token_arguments(void **state)
{
	fixture *f = *state;
	jitk_norm_scale_shift_args a = batch_args();
	fake_launch *l;

	a.q = 0;
	a.L = 0;
	a.B = 128; /* one row of scales and shifts per row */
	a.residual = ADDR(5);
	a.residual_out = ADDR(3);
	a.gates = ADDR(6);
	assert_int_equal(jitk_norm_scale_shift_call(NULL, f->rt, "fused_scale_residual_norm_scale_shift_per_token",
					JITK_CALL_STRICT, &a, NULL), 0);
	l = &f->fake.launches[0];
	assert_int_equal(l->values[P_GATES], a.gates);
	assert_int_equal(l->values[P_B], 128);
	a.B = 127;
	expect_error(f, "fused_scale_residual_norm_scale_shift_per_token",
		     &a, "fused_scale_residual_norm_scale_shift_per_token[hidden=3072]: per-token modulation takes one row of scales, shifts (and gates) per row of x (B == rows) (modulation != 2 || rows == B; nothing launched)");
}

static void test_indexed_arguments(void **state)
{
	fixture *f = *state;
	const char *sym = "fused_scale_residual_norm_scale_shift_indexed_fp8";
	jitk_norm_scale_shift_args a = batch_args();
	const jitk_dtype bf16 = JITK_DTYPE_BF16, fp8 = JITK_DTYPE_FP8_E4M3, f32 = JITK_DTYPE_F32,
			 i32 = JITK_DTYPE_I32, u8 = JITK_DTYPE_U8;
	fake_launch *l;

	a.residual = ADDR(5);
	a.residual_out = ADDR(3);
	a.scale0 = a.scales; /* the indexed class's set 0 */
	a.shift0 = a.shifts;
	a.scales = a.shifts = 0;
	a.gate0 = ADDR(6);
	a.scale1 = ADDR(10);
	a.shift1 = ADDR(11);
	a.gate1 = ADDR(12);
	a.index = ADDR(13);
	a.gate_out = ADDR(14);
	a.input_scale = ADDR(15);
	assert_int_equal(jitk_norm_scale_shift_configure_input_scale(f->rt, a.input_scale), 0);
	/* good: B and L from the tensors' shapes (L given too, and equal) */
	assert_int_equal(jitk_norm_scale_shift_call(NULL, f->rt, sym, JITK_CALL_STRICT, &a, NULL), 0);
	l = &f->fake.launches[0];
	assert_int_equal(l->values[P_SCALE0], a.scale0);
	assert_int_equal(l->values[P_GATE0], a.gate0);
	assert_int_equal(l->values[P_GATE1], a.gate1);
	assert_int_equal(l->values[P_INDEX], a.index);
	assert_int_equal(l->values[P_GATE_OUT], a.gate_out);
	assert_int_equal(l->values[P_GATE], 0);
	assert_int_equal(l->values[P_B], 2);
	assert_int_equal(l->values[P_L], 64);
	/* gate_out is required with the residual */
	a.gate_out = 0;
	expect_error(f, sym, &a, "fused_scale_residual_norm_scale_shift_indexed_fp8[hidden=3072]: missing argument gate_out (nothing launched)");
	a.gate_out = ADDR(14);
	/* L given and different from index's second dimension */
	{
		const int64_t x2[2] = { 128, 3072 }, m2[2] = { 2, 3072 }, ix[2] = { 2, 64 },
			      ix3[2] = { 4, 32 }, ixf[1] = { 128 }, one = 1;
		jitk_tensor t[14];
		jitk_arg args[16];
		size_t n = 0;
		const char *names2[] = { "q", "residual_out", "x", "residual", "gate_out" };
		const char *mods[] = { "scale0", "shift0", "gate0", "scale1", "shift1", "gate1" };
		size_t i;

#define ARG(nm, dt, nd, sh, p)                                                \
	do {                                                                  \
		jitk_tensor_contiguous(&t[n], p, dt, nd, sh);                 \
		args[n] = (jitk_arg){ nm, JITK_ARG_TENSOR, { .tensor = &t[n] } }; \
		n++;                                                          \
	} while (0)
		ARG("y", bf16, 2, x2, a.y);
		for (i = 0; i < 5; i++)
			ARG(names2[i], i ? bf16 : fp8, 2, x2, ADDR(20 + i));
		for (i = 0; i < 6; i++)
			ARG(mods[i], bf16, 2, m2, ADDR(30 + i));
		ARG("index", u8, 2, ix, a.index);
		ARG("input_scale", f32, 1, &one, a.input_scale);
#undef ARG
		assert_int_equal(n, 14);
		assert_int_equal(jitk_call(NULL, f->rt, sym, JITK_CALL_STRICT, args, n, NULL), 0);
		args[n++] = (jitk_arg){ "L", JITK_ARG_I64, { .i64 = 32 } };
		assert_int_equal(jitk_call(NULL, f->rt, sym, JITK_CALL_STRICT, args, n, NULL), JITK_EINVAL);
		assert_string_equal(jitk_error_last()->message,
				    "fused_scale_residual_norm_scale_shift_indexed_fp8[hidden=3072]: argument L is 32, but the tensors' shapes say 64 (nothing launched)");
		n--;
		/* the index: wrong dtype, wrong shapes */
		t[12].dtype = i32;
		assert_int_equal(jitk_call(NULL, f->rt, sym, JITK_CALL_STRICT, args, n, NULL), JITK_EINVAL);
		assert_string_equal(jitk_error_last()->message,
				    "fused_scale_residual_norm_scale_shift_indexed_fp8[hidden=3072]: index must be u8, not a tensor of dtype code 0 bits 32 (nothing launched)");
		jitk_tensor_contiguous(&t[12], a.index, u8, 2, ix3);
		assert_int_equal(jitk_call(NULL, f->rt, sym, JITK_CALL_STRICT, args, n, NULL), JITK_EINVAL);
		assert_string_equal(jitk_error_last()->message,
				    "fused_scale_residual_norm_scale_shift_indexed_fp8[hidden=3072]: index: expected shape [2, 32], got [4, 32] (nothing launched)");
		jitk_tensor_contiguous(&t[12], a.index, u8, 1, ixf);
		assert_int_equal(jitk_call(NULL, f->rt, sym, JITK_CALL_STRICT, args, n, NULL), JITK_EINVAL);
		assert_string_equal(jitk_error_last()->message,
				    "fused_scale_residual_norm_scale_shift_indexed_fp8[hidden=3072]: index: expected shape [B, L] (2 dimensions), got [128] (nothing launched)");
		/* index [2, 48]: L does not divide the rows */
		{
			const int64_t ix48[2] = { 2, 48 };

			jitk_tensor_contiguous(&t[12], a.index, u8, 2, ix48);
			assert_int_equal(jitk_call(NULL, f->rt, sym, JITK_CALL_STRICT, args, n, NULL), JITK_EINVAL);
			assert_string_equal(jitk_error_last()->message,
					    "fused_scale_residual_norm_scale_shift_indexed_fp8[hidden=3072]: rows must be B x L (B batches in the modulation tensors, L rows of x each) (!batched || rows == B * L; nothing launched)");
		}
		assert_int_equal(f->fake.nlaunches, 2);
	}
	/* B left at 0 with an index: zero batches of modulation */
	a.B = 0;
	expect_error(f, sym, &a, "fused_scale_residual_norm_scale_shift_indexed_fp8[hidden=3072]: rows must be B x L (B batches in the modulation tensors, L rows of x each) (!batched || rows == B * L; nothing launched)");
}

/* The classes' names keep symbols and arguments apart: vectors of one
 * class given to a symbol of another are named. */
static void test_class_mismatch(void **state)
{
	fixture *f = *state;
	jitk_norm_scale_shift_args a = batch_args();

	a.q = 0;
	expect_error(f, "fused_norm_scale_shift", &a, "fused_norm_scale_shift[hidden=3072] takes no argument 'scales' (nothing launched)");
	a.scale0 = ADDR(9);
	a.index = ADDR(13);
	expect_error(f, "fused_norm_scale_shift_per_batch", &a, "fused_norm_scale_shift_per_batch[hidden=3072] takes no argument 'scale0' (nothing launched)");
	a.scale0 = 0;
	a.index = 0;
	a.weight = ADDR(16);
	expect_error(f, "fused_norm_scale_shift_per_batch", &a, "fused_norm_scale_shift_per_batch[hidden=3072] takes no argument 'weight' (nothing launched)");
	/* outputs: q takes no y */
	a.weight = 0;
	a.q = ADDR(2);
	a.s = ADDR(17);
	expect_error(f, "fused_norm_scale_shift_per_batch_fp8_per_token_q_only", &a,
		     "fused_norm_scale_shift_per_batch_fp8_per_token_q_only[hidden=3072] takes no argument 'y' (nothing launched)");
	a.y = 0;
	assert_int_equal(jitk_norm_scale_shift_call(NULL, f->rt, "fused_norm_scale_shift_per_batch_fp8_per_token_q_only",
					JITK_CALL_STRICT, &a, NULL), 0);
	assert_int_equal(f->fake.launches[f->fake.nlaunches - 1].values[P_S], a.s);
	assert_int_equal(f->fake.launches[f->fake.nlaunches - 1].values[P_Y], 0);
}

/* The per-token fp8 symbols' split path: the same norm, then
 * per_token_quant_fp8 over its y (q, s as given, H from the shape). A
 * misaligned q rules the fused kernel out in TRY mode and is an error of
 * the split path's quantizer too, before anything launches. */
static void test_per_token_fallback(void **state)
{
	fixture *f = *state;
	jitk_norm_scale_shift_args a = batch_args();
	jitk_call_info info = JITK_CALL_INFO_INIT;
	fake_launch *l;

	a.s = ADDR(17);
	assert_int_equal(jitk_norm_scale_shift_call(&info, f->rt, "fused_norm_scale_shift_per_batch_fp8_per_token",
					JITK_CALL_AUTO, &a, NULL), 0);
	assert_int_equal(info.fallback, 0);
	assert_int_equal(f->fake.nlaunches, 1);
	assert_int_equal(jitk_per_token_quant_fp8(f->rt, &(jitk_per_token_quant_fp8_args){ .q = a.q, .s = a.s, .x = a.y, .rows = a.rows, .H = a.hidden }, NULL), 0);
	l = &f->fake.launches[1];
	assert_int_equal(l->nparams, 5);
	assert_int_equal(l->values[0], a.q);
	assert_int_equal(l->values[1], a.s);
	assert_int_equal(l->values[2], a.y);
	assert_int_equal(l->values[3], 128);
	assert_int_equal(l->values[4], 3072);
	a.q += 4;
	assert_int_equal(jitk_norm_scale_shift_call(&info, f->rt, "fused_norm_scale_shift_per_batch_fp8_per_token",
					JITK_CALL_TRY, &a, NULL), JITK_FALLBACK);
	assert_int_equal(info.fallback, 1);
	assert_non_null(strstr(info.reason, "is not 8-byte aligned"));
	assert_int_equal(jitk_norm_scale_shift_call(&info, f->rt, "fused_norm_scale_shift_per_batch_fp8_per_token",
					JITK_CALL_AUTO, &a, NULL), JITK_EINVAL);
	assert_non_null(strstr(jitk_error_last()->message, "per_token_quant_fp8: q (0x"));
	assert_int_equal(f->fake.nlaunches, 2);
	assert_int_equal(jitk_per_token_quant_fp8(f->rt, &(jitk_per_token_quant_fp8_args){ .q = a.q, .s = a.s, .x = a.y, .rows = -1, .H = a.hidden }, NULL), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message, "jitk_tensor_contiguous: dimension 0 is negative");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_combination_compiles),
		cmocka_unit_test_setup_teardown(test_per_batch_arguments, setup, teardown),
		cmocka_unit_test_setup_teardown(test_per_token_arguments, setup, teardown),
		cmocka_unit_test_setup_teardown(test_indexed_arguments, setup, teardown),
		cmocka_unit_test_setup_teardown(test_class_mismatch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_per_token_fallback, setup, teardown),
	};

	/* JITK_TEST_FILTER=test_per_batch* runs the matching tests only */
	if (getenv("JITK_TEST_FILTER"))
		cmocka_set_test_filter(getenv("JITK_TEST_FILTER"));
	return T_RUN_TESTS(tests, NULL, NULL);
}
