/* test_gpu.c - the kernels on a real GPU. Skips (and says why) where there
 * is no CUDA driver or device.
 *
 * For every reference symbol at hidden 1536, 3072, 5120 and rows 1, 127,
 * 1024, 4096, with the contract's regression scales:
 *  (a) fused == split, byte for byte, for y, q and residual_out (the
 *      fused fp8 symbols allowed on this GPU by a test spec set);
 *  (b) y against a float64 host reference (relative L2 < 1e-2, no NaN),
 *      and every output element written (two runs, two poisons, the same
 *      bytes);
 *  (c) q against a host quantizer using the device's div.full.f32
 *      reciprocal, byte for byte; residual_out against a host fp32 FMA,
 *      byte for byte.
 * Plus NaN/Inf rows, rows == 0, CUDA graph capture and replay, and row
 * counts past 32-bit element offsets. Set JITK_GPU_QUICK=1 for a smaller
 * matrix (compute-sanitizer runs), JITK_GPU_DUMP=DIR to write inputs and
 * outputs for bench/triton_check.py. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <nvrtc.h>

#include "common.h"
#include "gpu_util.h"
#include "gpu/device.h"
#include "jitk/norm_scale_shift.h"
#include "jitk/static_quant_fp8.h"
#include "base/internal.h"
#include "gpu/runtime.h"

static jitk_runtime *rt;   /* repo specs */
static jitk_runtime *rt90; /* test specs: fused fp8 allowed on sm_90; PDL */
static jitk_runtime *rtbulk; /* rt90's specs, rows loaded by bulk copies */
static char *tmpdir;
static int quick;

/* ------------------------------------------------------- host numerics */

static void fill(uint16_t *p, size_t n, double mean, double sd)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = bf16_rn((float)(mean + sd * rnd_normal()));
}

/* ------------------------------------------------------------- setup */

static int group_setup(void **state)
{
	jitk_runtime_options o = JITK_RUNTIME_OPTIONS_INIT;
	jitk_compiler_options co = JITK_COMPILER_OPTIONS_INIT;
	char *specs, *specs90, *cache;

	(void)state;
	quick = jitk__env_bool(NULL, "JITK_GPU_QUICK", 0, "");
	cu = jitk__cuda(&why_no_gpu);
	if (!cu)
		return 0;
	tmpdir = t_tmpdir();
	cache = t_path(tmpdir, "cache");
	specs = t_path(t_root(), "specs");
	t_copy_tree(tmpdir, "      - arch: { min: sm_100 }", "      - arch: { min: sm_90 }");
	specs90 = t_path(tmpdir, "specs");
	co.specs = specs;
	co.cache_dir = cache;
	co.cache_path = "";
	o.compiler = &co;
	if (jitk_runtime_new(&rt, &o)) {
		why_no_gpu = jitk_error_last()->message;
		cu = NULL;
	} else {
		/* the fused path with programmatic dependent launch (sm_90+):
		 * same bytes as the split path launched the ordinary way */
		co.specs = specs90;
		o.programmatic = 1;
		if (jitk_runtime_new(&rt90, &o)) {
			fprintf(stderr, "%s\n", jitk_error_last()->message);
			return -1;
		}
		/* the same specs with the bulk-copy ring as the norm
		 * kernels' load path (where the GPU has one: sm_90+) */
		jitk_arch arch;

		if (!jitk__arch_parse(&arch, jitk_runtime_arch(rt90)) && arch.cc >= 90) {
			char *bulk = t_path(tmpdir, "bulk"), *yaml;

			t_copy_tree(bulk, "      - arch: { min: sm_100 }", "      - arch: { min: sm_90 }");
			yaml = t_path(bulk, "specs/norm_scale_shift.yaml");
			t_edit(yaml, "    prefetch: 1 ", "    prefetch: 0 ");
			t_edit(yaml, "    stages: 0 ", "    stages: 3 ");
			free(yaml);
			co.specs = t_path(bulk, "specs");
			if (jitk_runtime_new(&rtbulk, &o)) {
				fprintf(stderr, "%s\n", jitk_error_last()->message);
				return -1;
			}
			free((char *)co.specs);
			free(bulk);
		}
		printf("GPU: %s\n", jitk_runtime_arch(rt));
	}
	free(specs);
	free(specs90);
	free(cache);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	jitk_runtime_free(rt);
	jitk_runtime_free(rt90);
	jitk_runtime_free(rtbulk);
	if (tmpdir) {
		t_rmtree(tmpdir);
		free(tmpdir);
	}
	return 0;
}

/* ------------------------------------------------------ one test case */

typedef struct {
	int residual;
	int rows, hidden;
	uint16_t *x, *res, *gate, *scale, *shift;
	CUdeviceptr dx, dres, dgate, dscale, dshift, dis;
	CUdeviceptr dy, dq, drout;
	size_t n;
} problem;

static void problem_make(problem *p, int residual, int rows, int hidden)
{
	memset(p, 0, sizeof(*p));
	p->residual = residual;
	p->rows = rows;
	p->hidden = hidden;
	p->n = (size_t)rows * (size_t)hidden;
	p->x = malloc(p->n * 2 + 2);
	p->res = malloc(p->n * 2 + 2);
	p->gate = malloc((size_t)hidden * 2);
	p->scale = malloc((size_t)hidden * 2);
	p->shift = malloc((size_t)hidden * 2);
	fill(p->x, p->n, 0.0, 1.0);
	fill(p->res, p->n, 0.5, 2.0);
	fill(p->gate, (size_t)hidden, 0.0, 0.5);
	fill(p->scale, (size_t)hidden, 0.0, 0.2);
	fill(p->shift, (size_t)hidden, 0.0, 0.2);
	p->dx = dalloc(p->n * 2);
	p->dres = dalloc(p->n * 2);
	p->dgate = dalloc((size_t)hidden * 2);
	p->dscale = dalloc((size_t)hidden * 2);
	p->dshift = dalloc((size_t)hidden * 2);
	p->dis = dalloc(4);
	p->dy = dalloc(p->n * 2);
	p->dq = dalloc(p->n);
	p->drout = dalloc(p->n * 2);
	upload(p->dx, p->x, p->n * 2);
	upload(p->dres, p->res, p->n * 2);
	upload(p->dgate, p->gate, (size_t)hidden * 2);
	upload(p->dscale, p->scale, (size_t)hidden * 2);
	upload(p->dshift, p->shift, (size_t)hidden * 2);
}

static void problem_free(problem *p)
{
	CUdeviceptr d[] = { p->dx, p->dres, p->dgate, p->dscale, p->dshift, p->dis,
			    p->dy, p->dq, p->drout };
	size_t i;

	for (i = 0; i < JITK_ARRAY_SIZE(d); i++)
		CK(cu->cuMemFree(d[i]));
	free(p->x);
	free(p->res);
	free(p->gate);
	free(p->scale);
	free(p->shift);
}

static jitk_norm_scale_shift_args args_of(const problem *p)
{
	jitk_norm_scale_shift_args a;

	memset(&a, 0, sizeof(a));
	a.y = p->dy;
	a.q = p->dq;
	a.residual_out = p->drout;
	a.x = p->dx;
	a.residual = p->dres;
	a.gate = p->dgate;
	a.scale = p->dscale;
	a.shift = p->dshift;
	a.input_scale = p->dis;
	a.rows = p->rows;
	a.hidden = p->hidden;
	a.eps = 1e-6f;
	return a;
}

typedef struct {
	uint16_t *y, *rout;
	uint8_t *q;
} outputs;

static void outputs_get(outputs *o, const problem *p)
{
	o->y = malloc(p->n * 2 + 2);
	o->rout = malloc(p->n * 2 + 2);
	o->q = malloc(p->n + 1);
	CK(cu->cuCtxSynchronize());
	download(o->y, p->dy, p->n * 2);
	download(o->q, p->dq, p->n);
	if (p->residual)
		download(o->rout, p->drout, p->n * 2);
}

static void outputs_free(outputs *o)
{
	free(o->y);
	free(o->rout);
	free(o->q);
}

static void poison_outputs(const problem *p, unsigned char v)
{
	poison(p->dy, p->n * 2, v);
	poison(p->dq, p->n, v);
	poison(p->drout, p->n * 2, v);
}

/* Launch fused (rt90; with fused == 2, rtbulk where there is one: the rows
 * loaded by bulk copies) or split (the split is spelled out so that it is
 * the split on any GPU). */
static void run(const problem *p, int fused)
{
	jitk_norm_scale_shift_args a = args_of(p);
	int rc;

	if (fused) {
		jitk_runtime *f = fused == 2 && rtbulk ? rtbulk : rt90;
		const char *why = NULL;

		rc = p->residual ? jitk_try_fused_scale_residual_norm_scale_shift_fp8(&why, f, &a, NULL)
				 : jitk_try_fused_norm_scale_shift_fp8(&why, f, &a, NULL);
		if (rc)
			fail_msg("fused: %d %s %s", rc, why ? why : "", jitk_error_last()->message);
	} else {
		rc = p->residual ? jitk_fused_scale_residual_norm_scale_shift(rt, &a, NULL)
				 : jitk_fused_norm_scale_shift(rt, &a, NULL);
		if (!rc)
			rc = jitk_static_quant_fp8(rt, &(jitk_static_quant_fp8_args){ .q = a.q, .x = a.y, .input_scale = a.input_scale, .n = a.rows * a.hidden }, NULL);
		if (rc)
			fail_msg("split: %d %s", rc, jitk_error_last()->message);
	}
}

typedef struct {
	int cases;
	long long mismatched_bytes; /* fused vs split, all outputs */
	long long q_mismatch;       /* vs the host quantizer */
	long long rout_mismatch;    /* vs the host FMA */
	double max_rel_l2;
	double max_abs;
} tally;

static tally T;

/* float64 reference of y from the bf16 inputs (the residual rounded to
 * bf16 as the contract says). */
static void check_y(const problem *p, const uint16_t *y, const uint16_t *rout)
{
	double num = 0.0, den = 0.0, maxabs = 0.0;
	long long rmis = 0;
	int r, c, H = p->hidden;
	double *v = malloc((size_t)H * sizeof(double));

	for (r = 0; r < p->rows; r++) {
		double mean = 0.0, var = 0.0;
		size_t o = (size_t)r * (size_t)H;

		for (c = 0; c < H; c++) {
			if (p->residual) {
				uint16_t want = bf16_rn(fmaf(bf16_f(p->gate[c]), bf16_f(p->x[o + c]),
							     bf16_f(p->res[o + c])));
				rmis += rout[o + c] != want;
				v[c] = bf16_f(want);
			} else {
				v[c] = bf16_f(p->x[o + c]);
			}
			mean += v[c];
		}
		mean /= H;
		for (c = 0; c < H; c++)
			var += (v[c] - mean) * (v[c] - mean);
		var /= H;
		for (c = 0; c < H; c++) {
			double ref = (v[c] - mean) / sqrt(var + 1e-6) * (1.0 + bf16_f(p->scale[c])) +
				     bf16_f(p->shift[c]);
			double got = bf16_f(y[o + c]);

			assert_false(isnan(got));
			num += (got - ref) * (got - ref);
			den += ref * ref;
			if (fabs(got - ref) > maxabs)
				maxabs = fabs(got - ref);
		}
	}
	free(v);
	T.rout_mismatch += rmis;
	assert_int_equal(rmis, 0);
	if (den > 0) {
		double rel = sqrt(num / den);

		if (rel > T.max_rel_l2)
			T.max_rel_l2 = rel;
		if (maxabs > T.max_abs)
			T.max_abs = maxabs;
		assert_true(rel < 1e-2);
	}
}

static long long check_q(const problem *p, const uint16_t *y, const uint8_t *q, float rcp)
{
	long long bad = 0;
	size_t i;

	for (i = 0; i < p->n; i++) {
		float v = bf16_f(y[i]) * rcp;

		v = fmaxf(fminf(v, 448.0f), -448.0f); /* NaN -> 448, as Triton */
		bad += q[i] != e4m3_rn(v);
	}
	return bad;
}

static void dump(const problem *p, const outputs *o, float scale)
{
	const char *dir = jitk__env("JITK_GPU_DUMP");
	char path[512];
	uint32_t bits;
	FILE *f;

	if (!dir || p->rows > 1024)
		return; /* keeps the dump a few hundred MB */
	memcpy(&bits, &scale, 4);
	snprintf(path, sizeof(path), "%s/quant_h%d_r%d_res%d_s%08x.bin", dir, p->hidden, p->rows,
		 p->residual, (unsigned)bits);
	f = fopen(path, "wb");
	if (!f)
		return;
	fwrite(o->y, 2, p->n, f); /* the quantizer's input */
	fwrite(o->q, 1, p->n, f);
	fclose(f);
}

static void test_fused_equals_split(void **state)
{
	static const int hiddens[] = { 1536, 3072, 5120 };
	static const int rows_all[] = { 1, 127, 1024, 4096 };
	static const uint32_t scales[] = { 0x3ba3d70a /* 0.005 */, 0x3d000000 /* 0.03125 */,
					   0x3eda4925, 0x3ef36db7, 0x3f800000 };
	size_t h, r, s;
	int residual;

	(void)state;
	NEED_GPU();
	for (residual = 0; residual < 2; residual++)
		for (h = 0; h < 3; h++)
			for (r = 0; r < (quick ? 2u : 4u); r++) {
				problem p;

				problem_make(&p, residual, rows_all[r], hiddens[h]);
				for (s = 0; s < 5; s++) {
					float scale, rcp;
					outputs fused, fused2, split;
					long long qbad;

					if (quick && s != 0 && s != 3)
						continue; /* quick: 0.005 and 213/448 only */
					memcpy(&scale, &scales[s], 4);
					upload(p.dis, &scale, 4);
					assert_int_equal(jitk_norm_scale_shift_configure_input_scale(rt90, p.dis), 0);
					if (rtbulk)
						assert_int_equal(jitk_norm_scale_shift_configure_input_scale(rtbulk, p.dis), 0);
					rcp = device_rcp(jitk_runtime_arch(rt), scale);
					/* fused twice with different poisons: register
					 * loads, then bulk copies (same bytes) */
					poison_outputs(&p, 0x00);
					run(&p, 1);
					outputs_get(&fused, &p);
					poison_outputs(&p, 0xff);
					run(&p, 2);
					outputs_get(&fused2, &p);
					assert_memory_equal(fused.y, fused2.y, p.n * 2);
					assert_memory_equal(fused.q, fused2.q, p.n);
					if (residual)
						assert_memory_equal(fused.rout, fused2.rout, p.n * 2);
					/* split, poisoned once more */
					poison_outputs(&p, 0xa5);
					run(&p, 0);
					outputs_get(&split, &p);
					{
						long long mis = 0;
						size_t i;

						for (i = 0; i < p.n; i++) {
							mis += fused.y[i] != split.y[i];
							mis += fused.q[i] != split.q[i];
							if (residual)
								mis += fused.rout[i] != split.rout[i];
						}
						T.mismatched_bytes += mis;
						if (mis)
							fprintf(stderr, "fused != split: H=%d rows=%d res=%d scale=%g: %lld\n",
								p.hidden, p.rows, residual, (double)scale, mis);
						assert_int_equal(mis, 0);
					}
					if (s == 0)
						check_y(&p, split.y, split.rout);
					qbad = check_q(&p, split.y, split.q, rcp);
					T.q_mismatch += qbad;
					if (qbad)
						fprintf(stderr, "q vs host: H=%d rows=%d scale=%g: %lld bytes\n",
							p.hidden, p.rows, (double)scale, qbad);
					assert_int_equal(qbad, 0);
					dump(&p, &split, scale);
					T.cases++;
					outputs_free(&fused);
					outputs_free(&fused2);
					outputs_free(&split);
				}
				problem_free(&p);
			}
	printf("(a)-(c): %d cases; fused vs split: %lld mismatching bytes; q vs host div.full "
	       "quantizer: %lld; residual_out vs host FMA: %lld; y vs float64: max rel L2 %.3e, "
	       "max abs %.3e; bulk-copy loads vs register loads: %s\n",
	       T.cases, T.mismatched_bytes, T.q_mismatch, T.rout_mismatch, T.max_rel_l2, T.max_abs,
	       rtbulk ? "identical in every case" : "not run (needs sm_90+)");
}

/* NaN or Inf in a row poisons that row only: y NaN, q 0x7e (the clamp maps
 * NaN to +448, as the reference quantizer does); other rows unchanged.
 * rows == 0 writes nothing. */
static void test_nan_inf_and_empty(void **state)
{
	problem p;
	outputs clean, dirty;
	float scale = 0.5f;
	jitk_norm_scale_shift_args a;
	int c, r;

	(void)state;
	NEED_GPU();
	problem_make(&p, 0, 4, 3072);
	upload(p.dis, &scale, 4);
	assert_int_equal(jitk_norm_scale_shift_configure_input_scale(rt90, p.dis), 0);
	run(&p, 1);
	outputs_get(&clean, &p);
	p.x[5] = 0x7fc0;             /* NaN in row 0 */
	p.x[3072 * 2 + 7] = 0x7f80;  /* +Inf in row 2 */
	upload(p.dx, p.x, p.n * 2);
	run(&p, 1);
	outputs_get(&dirty, &p);
	for (r = 0; r < 4; r++)
		for (c = 0; c < 3072; c++) {
			size_t i = (size_t)r * 3072 + (size_t)c;

			if (r == 0 || r == 2) {
				assert_true(isnan(bf16_f(dirty.y[i])));
				assert_int_equal(dirty.q[i], 0x7e);
			} else {
				assert_int_equal(dirty.y[i], clean.y[i]);
				assert_int_equal(dirty.q[i], clean.q[i]);
			}
		}
	outputs_free(&clean);
	outputs_free(&dirty);
	/* rows == 0: nothing launched, nothing written */
	poison_outputs(&p, 0x5a);
	a = args_of(&p);
	a.rows = 0;
	assert_int_equal(jitk_auto_fused_norm_scale_shift_fp8(NULL, rt, &a, NULL), 0);
	assert_int_equal(jitk_auto_fused_norm_scale_shift_fp8(NULL, rt90, &a, NULL), 0);
	outputs_get(&clean, &p);
	for (c = 0; c < 3072 * 4; c++)
		assert_int_equal(clean.q[c], 0x5a);
	outputs_free(&clean);
	problem_free(&p);
}

/* Capture: the default policy refuses an unresolved kernel during capture
 * and leaves the capture intact; after jitk_preload the launches capture
 * into a graph whose replays give the eager result. A runtime of its own,
 * so that nothing is resolved yet. */
static void test_cuda_graph(void **state)
{
	jitk_runtime_options o = JITK_RUNTIME_OPTIONS_INIT;
	jitk_compiler_options co = JITK_COMPILER_OPTIONS_INIT;
	jitk_runtime *rtg = NULL;
	char *specs, *cache;
	problem p;
	outputs eager, replay;
	float scale = 0.4263392984867096f;
	jitk_norm_scale_shift_args a;
	CUstream s;
	CUgraph g;
	CUgraphExec ge;
	const char *names[2] = { "fused_scale_residual_norm_scale_shift[hidden=1536]",
				 "static_quant_fp8" };
	int i, used = -1;

	(void)state;
	NEED_GPU();
	specs = t_path(t_root(), "specs");
	cache = t_path(tmpdir, "cache");
	co.specs = specs;
	co.cache_dir = cache;
	o.compiler = &co;
	assert_int_equal(jitk_runtime_new(&rtg, &o), 0);
	problem_make(&p, 1, 300, 1536);
	upload(p.dis, &scale, 4);
	CK(cu->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	a = args_of(&p);
	/* unresolved during capture: a clear error, capture still valid */
	CK(cu->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	i = jitk_auto_fused_scale_residual_norm_scale_shift_fp8(&used, rtg, &a, s);
	CK(cu->cuStreamEndCapture(s, &g));
	CK(cu->cuGraphDestroy(g));
	assert_int_equal(i, JITK_ECAPTURE);
	/* eager */
	assert_int_equal(jitk_preload(rtg, names, 2), 0);
	poison_outputs(&p, 0x11);
	assert_int_equal(jitk_auto_fused_scale_residual_norm_scale_shift_fp8(&used, rtg, &a, s), 0);
	CK(cu->cuStreamSynchronize(s));
	outputs_get(&eager, &p);
	/* captured, replayed three times over poisoned outputs */
	CK(cu->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	i = jitk_auto_fused_scale_residual_norm_scale_shift_fp8(&used, rtg, &a, s);
	CK(cu->cuStreamEndCapture(s, &g));
	assert_int_equal(i, 0);
	CK(cu->cuGraphInstantiateWithFlags(&ge, g, 0));
	for (i = 0; i < 3; i++) {
		poison_outputs(&p, (unsigned char)(0x22 + i));
		CK(cu->cuCtxSynchronize());
		CK(cu->cuGraphLaunch(ge, s));
		CK(cu->cuStreamSynchronize(s));
		outputs_get(&replay, &p);
		assert_memory_equal(replay.y, eager.y, p.n * 2);
		assert_memory_equal(replay.q, eager.q, p.n);
		assert_memory_equal(replay.rout, eager.rout, p.n * 2);
		outputs_free(&replay);
	}
	printf("graph: %s path captured and replayed 3 times, byte-identical to eager\n",
	       used ? "fused" : "split");
	CK(cu->cuGraphExecDestroy(ge));
	CK(cu->cuGraphDestroy(g));
	CK(cu->cuStreamDestroy(s));
	outputs_free(&eager);
	problem_free(&p);
	jitk_runtime_free(rtg);
	free(specs);
	free(cache);
}

/* More rows than 32-bit element offsets reach (the reference breaks past
 * ~699k rows at H = 3072): rows around and past 2^31 elements are right. */
static void test_large_rows(void **state)
{
	const int H = 3072;
	const long long rows = 700000; /* 2.15e9 elements */
	const long long check[] = { 0, 699049, 699050, 699051, rows - 1 };
	size_t n = (size_t)rows * H, i;
	CUdeviceptr dx, dy, dq, dsc, dsh, dis;
	jitk_norm_scale_shift_args a;
	uint16_t *row, *yrow, *sc, *sh;
	float scale = 1.0f;

	(void)state;
	NEED_GPU();
	if (quick) {
		printf("SKIP: large rows in quick mode\n");
		skip();
	}
	row = malloc((size_t)H * 2);
	yrow = malloc((size_t)H * 2);
	sc = calloc((size_t)H, 2);
	sh = calloc((size_t)H, 2);
	dx = dalloc(n * 2);
	dy = dalloc(n * 2);
	dq = dalloc(n);
	dsc = dalloc((size_t)H * 2);
	dsh = dalloc((size_t)H * 2);
	dis = dalloc(4);
	upload(dsc, sc, (size_t)H * 2);
	upload(dsh, sh, (size_t)H * 2);
	upload(dis, &scale, 4);
	/* Only the checked rows need data; the rest stays whatever it is,
	 * made finite by a memset. */
	CK(cu->cuMemsetD8Async(dx, 0x3c, n * 2, NULL));
	for (i = 0; i < JITK_ARRAY_SIZE(check); i++) {
		fill(row, (size_t)H, 0.0, 1.0);
		upload(dx + (CUdeviceptr)check[i] * H * 2, row, (size_t)H * 2);
	}
	memset(&a, 0, sizeof(a));
	a.y = dy;
	a.q = dq;
	a.x = dx;
	a.scale = dsc;
	a.shift = dsh;
	a.input_scale = dis;
	a.rows = rows;
	a.hidden = H;
	a.eps = 1e-6f;
	CK(cu->cuMemsetD8Async(dy, 0xff, n * 2, NULL));
	assert_int_equal(jitk_auto_fused_norm_scale_shift_fp8(NULL, rt, &a, NULL), 0);
	CK(cu->cuCtxSynchronize());
	for (i = 0; i < JITK_ARRAY_SIZE(check); i++) {
		double mean = 0, var = 0, num = 0, den = 0;
		int c;

		download(row, dx + (CUdeviceptr)check[i] * H * 2, (size_t)H * 2);
		download(yrow, dy + (CUdeviceptr)check[i] * H * 2, (size_t)H * 2);
		for (c = 0; c < H; c++)
			mean += bf16_f(row[c]);
		mean /= H;
		for (c = 0; c < H; c++)
			var += (bf16_f(row[c]) - mean) * (bf16_f(row[c]) - mean);
		var /= H;
		for (c = 0; c < H; c++) {
			double ref = (bf16_f(row[c]) - mean) / sqrt(var + 1e-6);

			num += (bf16_f(yrow[c]) - ref) * (bf16_f(yrow[c]) - ref);
			den += ref * ref;
		}
		assert_true(sqrt(num / den) < 1e-2);
	}
	printf("large rows: %lld rows x %d (%.2fe9 elements) correct at rows around 2^31 elements\n",
	       rows, H, (double)n / 1e9);
	CK(cu->cuMemFree(dx));
	CK(cu->cuMemFree(dy));
	CK(cu->cuMemFree(dq));
	CK(cu->cuMemFree(dsc));
	CK(cu->cuMemFree(dsh));
	CK(cu->cuMemFree(dis));
	free(row);
	free(yrow);
	free(sc);
	free(sh);
}

/* The host e4m3 encoder (gpu_util.h) against known bytes and the slow
 * definition, and the bf16 rounding's ties. */
static void test_host_e4m3(void **state)
{
	uint32_t u;

	(void)state;
	assert_int_equal(e4m3_rn(448.0f), 0x7e);
	assert_int_equal(e4m3_rn(-448.0f), 0xfe);
	assert_int_equal(e4m3_rn(1.0f), 0x38);
	assert_int_equal(e4m3_rn(0.015625f), 0x08);    /* 2^-6, smallest normal */
	assert_int_equal(e4m3_rn(0.0146484375f), 0x08); /* 7.5 x 2^-9 rounds up to 2^-6 */
	assert_int_equal(e4m3_rn(0.001953125f), 0x01); /* 2^-9, smallest subnormal */
	assert_int_equal(e4m3_rn(0.0009765625f), 0x00); /* half of it: ties to even */
	assert_int_equal(e4m3_rn(0.0029296875f), 0x02); /* 1.5 x 2^-9: ties to even */
	assert_int_equal(e4m3_rn(1.0625f), 0x38);      /* 1 + 1/16: ties to even (1.0) */
	assert_int_equal(e4m3_rn(1.1875f), 0x3a);      /* 1 + 3/16: ties to even (1.25) */
	assert_int_equal(e4m3_rn(1.9375f), 0x40);      /* 1 + 15/16: up to 2.0 */
	assert_int_equal(e4m3_rn(240.0f), 0x77);
	assert_int_equal(e4m3_rn(-0.0f), 0x80);
	/* fp32 values of every magnitude up to 448 (each bf16, and low bits
	 * 0x8000, 0xffff and random below it) against the definition: the
	 * nearest of the 127 finite magnitudes, ties to the even code */
	for (u = 0; u < 0x43e1u * 4; u++) {
		static const uint32_t lows[3] = { 0, 0x8000, 0xffff };
		uint32_t bits = (u / 4) << 16 | (u % 4 < 3 ? lows[u % 4] : rnd32() & 0xffffu);
		double best = 0.0;
		float v;
		int code, want = 0;

		memcpy(&v, &bits, 4);
		if (!(v <= 448.0f))
			continue;
		for (code = 0; code <= 0x7e; code++) {
			int e = code >> 3, m = code & 7;
			double c = e ? ldexp(1.0 + m / 8.0, e - 7) : ldexp((double)m, -9);

			if (fabs(c - v) < fabs(best - v) || (fabs(c - v) == fabs(best - v) && !(code & 1)))
				best = c, want = code;
		}
		if (e4m3_rn(v) != want)
			fprintf(stderr, "e4m3_rn(%a) = 0x%02x, want 0x%02x\n", (double)v, e4m3_rn(v), want);
		assert_int_equal(e4m3_rn(v), want);
		assert_int_equal(e4m3_rn(-v), want | 0x80);
	}
	assert_int_equal(bf16_rn(1.00390625f), 0x3f80); /* tie to even */
	assert_int_equal(bf16_rn(1.01171875f), 0x3f82);
}

/* The data-only test family (tests/families: a YAML file and a template,
 * no C): its fused kernel and the spec's two-step fallback give the same
 * bytes on the GPU, x read as a strided view, every element written, and
 * the result equals the host's. The fallback path is taken by running the
 * same call in AUTO mode over a copy of the specs whose gate moves past
 * this GPU. */
static void test_data_only_family(void **state)
{
	const jitk_dtype i32 = JITK_DTYPE_I32;
	jitk_runtime_options o = JITK_RUNTIME_OPTIONS_INIT;
	jitk_compiler_options co = JITK_COMPILER_OPTIONS_INIT;
	jitk_runtime *fused_rt = NULL, *split_rt = NULL;
	const int64_t rows = 3001, cols = 256, wide = 1024;
	const size_t n = (size_t)(rows * cols);
	char *specs, *dir, *copy, *yaml;
	uint32_t *hx, *hy, *hz, *o1, *o2;
	CUdeviceptr dx, dy, dz, dout;
	jitk_tensor tout, tx, ty, tz;
	jitk_arg args[4];
	jitk_call_info info = JITK_CALL_INFO_INIT;
	size_t i, bad = 0;
	const char *src;

	(void)state;
	NEED_GPU();
	specs = t_path(t_root(), "tests/families/specs");
	dir = t_path(tmpdir, "fam");
	copy = t_path(dir, "specs");
	yaml = t_path(dir, "specs/tadd.yaml");
	hx = malloc(n * 4 * 4);
	hy = malloc(n * 4);
	hz = malloc(n * 4);
	o1 = malloc(n * 4);
	o2 = malloc(n * 4);
	/* the same files, the gate moved past every GPU */
	mkdir(dir, 0700);
	mkdir(copy, 0700);
	{
		char *tdir = t_path(dir, "templates"), *tsrc, *tdst;
		size_t len;

		mkdir(tdir, 0700);
		tsrc = t_path(t_root(), "tests/families/templates/tadd.cuh");
		tdst = t_path(tdir, "tadd.cuh");
		src = t_read(tsrc, &len);
		t_write(tdst, src, len);
		free((void *)src);
		free(tsrc);
		tsrc = t_path(specs, "tadd.yaml");
		src = t_read(tsrc, &len);
		t_write(yaml, src, len);
		free((void *)src);
		t_edit(yaml, "arch: { min: sm_90 }", "arch: { min: sm_200 }");
		free(tsrc);
		free(tdst);
		free(tdir);
	}
	co.specs = specs;
	co.cache_dir = "";
	o.compiler = &co;
	assert_int_equal(jitk_runtime_new(&fused_rt, &o), 0);
	co.specs = copy;
	assert_int_equal(jitk_runtime_new(&split_rt, &o), 0);
	for (i = 0; i < n * 4; i++) {
		rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
		hx[i] = (uint32_t)(rng_state >> 32);
	}
	for (i = 0; i < n; i++) {
		hy[i] = hx[(i * 7) % (n * 4)] * 2654435761u;
		hz[i] = hx[(i * 13) % (n * 4)] ^ 0xdeadbeefu;
	}
	dx = dalloc(n * 4 * 4);
	dy = dalloc(n * 4);
	dz = dalloc(n * 4);
	dout = dalloc(n * 4);
	upload(dx, hx, n * 4 * 4);
	upload(dy, hy, n * 4);
	upload(dz, hz, n * 4);
	{
		const int64_t shape[2] = { rows, cols };

		assert_int_equal(jitk_tensor_contiguous(&tout, dout, i32, 2, shape), 0);
		assert_int_equal(jitk_tensor_contiguous(&tx, dx, i32, 2, shape), 0);
		assert_int_equal(jitk_tensor_contiguous(&ty, dy, i32, 2, shape), 0);
		assert_int_equal(jitk_tensor_contiguous(&tz, dz, i32, 2, shape), 0);
		tx.strides[0] = wide; /* columns 0..255 of a [rows, 1024] buffer */
	}
	args[0] = (jitk_arg){ "out", JITK_ARG_TENSOR, { .tensor = &tout } };
	args[1] = (jitk_arg){ "x", JITK_ARG_TENSOR, { .tensor = &tx } };
	args[2] = (jitk_arg){ "y", JITK_ARG_TENSOR, { .tensor = &ty } };
	args[3] = (jitk_arg){ "z", JITK_ARG_TENSOR, { .tensor = &tz } };

	poison(dout, n * 4, 0xa5);
	assert_int_equal(jitk_call(&info, fused_rt, "tadd3", JITK_CALL_AUTO, args, 4, NULL), 0);
	assert_int_equal(info.fallback, 0);
	CK(cu->cuCtxSynchronize());
	download(o1, dout, n * 4);
	poison(dout, n * 4, 0x5a);
	assert_int_equal(jitk_call(&info, split_rt, "tadd3", JITK_CALL_AUTO, args, 4, NULL), 0);
	assert_int_equal(info.fallback, 1);
	CK(cu->cuCtxSynchronize());
	download(o2, dout, n * 4);
	assert_memory_equal(o1, o2, n * 4); /* two poisons: every element written */
	for (i = 0; i < n; i++) {
		size_t r = i / (size_t)cols, c = i % (size_t)cols;

		bad += o1[i] != hx[r * (size_t)wide + c] + hy[i] + hz[i];
	}
	assert_int_equal(bad, 0);
	printf("data-only family: %zu int32 elements, fused == fallback (2 steps) == host, 0 differ\n", n);
	CK(cu->cuMemFree(dx));
	CK(cu->cuMemFree(dy));
	CK(cu->cuMemFree(dz));
	CK(cu->cuMemFree(dout));
	jitk_runtime_free(fused_rt);
	jitk_runtime_free(split_rt);
	free(hx); free(hy); free(hz); free(o1); free(o2);
	free(specs); free(dir); free(copy); free(yaml);
}

/* Scratch on the GPU (tests/families/scratch: the rows of x summed in 4
 * parts that hand their running sums to one another through the
 * runtime's scratch, split-K's way): the bytes of the one-pass instance
 * and of the host, call after call on one stream at changing widths (the
 * scratch's flags back to 0 after each), on two streams at once (each its
 * own scratch), and replayed from a CUDA graph whose capture made its
 * stream's scratch. A launch that left a flag set would
 * make the next one read a stale sum, or wait for ever: the test's
 * timeout. */
static void test_scratch_family(void **state)
{
	const jitk_dtype i32 = JITK_DTYPE_I32;
	jitk_runtime_options o = JITK_RUNTIME_OPTIONS_INIT;
	jitk_compiler_options co = JITK_COMPILER_OPTIONS_INIT;
	jitk_runtime *srt = NULL;
	enum { ROWS = 4099, WIDE = 2000 };
	const int64_t widths[] = { 1000, WIDE, 1000 };
	uint32_t *hx, want[WIDE], got[WIDE], words[2 * WIDE];
	CUdeviceptr dx, dout[3];
	CUstream st[3];
	CUgraph g;
	CUgraphExec ge;
	jitk_tensor tout[3], tx;
	jitk_arg args[3][2];
	jitk_call_info info = JITK_CALL_INFO_INIT;
	size_t i, r, k, w;
	int64_t cols = 1000;
	char *specs;

	(void)state;
	NEED_GPU();
	specs = t_path(t_root(), "tests/families/scratch/specs");
	co.specs = specs;
	co.cache_dir = "";
	o.compiler = &co;
	assert_int_equal(jitk_runtime_new(&srt, &o), 0);
	hx = malloc((size_t)ROWS * WIDE * 4);
	for (i = 0; i < (size_t)ROWS * WIDE; i++) {
		rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
		hx[i] = (uint32_t)(rng_state >> 32);
	}
	dx = dalloc((size_t)ROWS * WIDE * 4);
	upload(dx, hx, (size_t)ROWS * WIDE * 4);
	for (k = 0; k < 3; k++) {
		dout[k] = dalloc(WIDE * 4);
		CK(cu->cuStreamCreate(&st[k], CU_STREAM_NON_BLOCKING));
	}
	/* x viewed as [ROWS, cols] (contiguous), out[k] as [cols] */
#define SET_COLS(n)                                                                           \
	do {                                                                                  \
		const int64_t shape_[2] = { ROWS, (n) }, oshape_[1] = { (n) };                \
		cols = (n);                                                                   \
		assert_int_equal(jitk_tensor_contiguous(&tx, dx, i32, 2, shape_), 0);          \
		for (size_t k_ = 0; k_ < 3; k_++) {                                           \
			assert_int_equal(jitk_tensor_contiguous(&tout[k_], dout[k_], i32, 1,   \
								oshape_), 0);                  \
			args[k_][0] = (jitk_arg){ "out", JITK_ARG_TENSOR, { .tensor = &tout[k_] } }; \
			args[k_][1] = (jitk_arg){ "x", JITK_ARG_TENSOR, { .tensor = &tx } };    \
		}                                                                             \
		for (size_t c_ = 0; c_ < (size_t)(n); c_++) {                                 \
			want[c_] = 0;                                                         \
			for (r = 0; r < ROWS; r++)                                            \
				want[c_] += hx[r * (size_t)(n) + c_];                           \
		}                                                                             \
	} while (0)
	/* one pass, then the parts five times over on one stream, at one
	 * width, a wider one and the first again: each launch finds every
	 * flag 0, wherever the last one put its sums */
	SET_COLS(1000);
	assert_int_equal(jitk_call(&info, srt, "tsum[parts=1]", JITK_CALL_STRICT, args[0], 2, st[0]), 0);
	CK(cu->cuStreamSynchronize(st[0]));
	download(got, dout[0], (size_t)cols * 4);
	assert_memory_equal(got, want, (size_t)cols * 4);
	for (w = 0; w < sizeof(widths) / sizeof(widths[0]); w++) {
		SET_COLS(widths[w]);
		for (k = 0; k < 5; k++) {
			poison(dout[0], (size_t)cols * 4, 0xa5);
			assert_int_equal(jitk_call(&info, srt, "tsum[parts=4]", JITK_CALL_STRICT, args[0],
						   2, st[0]), 0);
			CK(cu->cuStreamSynchronize(st[0]));
			download(got, dout[0], (size_t)cols * 4);
			assert_memory_equal(got, want, (size_t)cols * 4);
		}
	}
	/* the flags (even words), where the runtime keeps this stream's scratch */
	assert_int_equal(srt->nscratch, 1);
	download(words, (CUdeviceptr)srt->scratch[0].ptr, sizeof(words));
	for (i = 0; i < WIDE; i++)
		assert_int_equal(words[2 * i], 0);
	/* two streams at once, eight calls each, no wait between */
	poison(dout[0], WIDE * 4, 0x5a);
	poison(dout[1], WIDE * 4, 0x5a);
	CK(cu->cuCtxSynchronize());
	for (k = 0; k < 16; k++)
		assert_int_equal(jitk_call(&info, srt, "tsum[parts=4]", JITK_CALL_STRICT, args[k % 2], 2,
					   st[k % 2]), 0);
	CK(cu->cuCtxSynchronize());
	assert_int_equal(srt->nscratch, 2);
	for (k = 0; k < 2; k++) {
		download(got, dout[k], (size_t)cols * 4);
		assert_memory_equal(got, want, (size_t)cols * 4);
	}
	/* captured on a stream that has no scratch yet (made during the
	 * capture, outside it), three calls, replayed twice over a poisoned
	 * output */
	CK(cu->cuStreamBeginCapture(st[2], CU_STREAM_CAPTURE_MODE_GLOBAL));
	for (k = 0; k < 3; k++)
		assert_int_equal(jitk_call(&info, srt, "tsum[parts=4]", JITK_CALL_STRICT, args[2], 2,
					   st[2]), 0);
	CK(cu->cuStreamEndCapture(st[2], &g));
	assert_int_equal(srt->nscratch, 3);
	CK(cu->cuGraphInstantiateWithFlags(&ge, g, 0));
	for (k = 0; k < 2; k++) {
		poison(dout[2], WIDE * 4, 0xc3);
		CK(cu->cuCtxSynchronize());
		CK(cu->cuGraphLaunch(ge, st[2]));
		CK(cu->cuStreamSynchronize(st[2]));
		download(got, dout[2], (size_t)cols * 4);
		assert_memory_equal(got, want, (size_t)cols * 4);
	}
#undef SET_COLS
	printf("scratch family: %d rows of int32, column sums in 4 parts through scratch == one pass "
	       "== host: 15 calls on a stream at widths 1000, 2000, 1000; 16 on two streams; a "
	       "graph captured with a new scratch, replayed twice\n", ROWS);
	CK(cu->cuGraphExecDestroy(ge));
	CK(cu->cuGraphDestroy(g));
	for (k = 0; k < 3; k++) {
		CK(cu->cuStreamDestroy(st[k]));
		CK(cu->cuMemFree(dout[k]));
	}
	CK(cu->cuMemFree(dx));
	jitk_runtime_free(srt);
	free(hx);
	free(specs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_host_e4m3),
		cmocka_unit_test(test_fused_equals_split),
		cmocka_unit_test(test_nan_inf_and_empty),
		cmocka_unit_test(test_cuda_graph),
		cmocka_unit_test(test_large_rows),
		cmocka_unit_test(test_data_only_family),
		cmocka_unit_test(test_scratch_family),
	};

	return T_RUN_TESTS(tests, group_setup, group_teardown);
}
