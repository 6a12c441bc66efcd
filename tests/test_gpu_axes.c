/* test_gpu_axes.c - issue 12's axes of the norm family on a real GPU.
 * Skips (and says why) where there is no CUDA driver or device.
 *
 * Tier 1, every symbol of the shipped spec at hidden 3072 (and 1536, 5120
 * at up to 1024 rows), rows 1, 127, 1024, 4096; per_batch with B = 1, 2,
 * 4 (where B divides rows); indexed with a random, an all-0 and an all-1
 * index; static fp8 at the contract's regression scales:
 *  - fused == split, byte for byte, for y, q, s, residual_out, gate_out
 *    (split: the same norm without quantization, then static_quant_fp8 or
 *    per_token_quant_fp8 over its y);
 *  - every output element written (each kernel run twice over two
 *    poisons, the same bytes);
 *  - y against a float64 host reference (relative L2 < 1e-2, no NaN);
 *    residual_out against a host fp32 FMA and gate_out against the chosen
 *    gate, byte for byte; the per-token scales s against a float64 amax
 *    reference exactly; q against a host quantizer byte for byte (the
 *    device's div.full reciprocal for static scales, IEEE for per-token).
 * Tier 2, every combination the spec allows (a copy of the specs with a
 * symbol listing every value of every parameter), at 128 rows (B = 2):
 * the same checks.
 * Plus NaN and all-zero rows for the per-token scales. One summary line
 * per axis value. JITK_GPU_QUICK=1: a small matrix for compute-sanitizer. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nvrtc.h>

#include "common.h"
#include "gpu_util.h"
#include "gpu/device.h"
#include "compile/compile.h"
#include "jitk/norm_scale_shift.h"
#include "jitk/per_token_quant_fp8.h"
#include "jitk/static_quant_fp8.h"
#include "base/internal.h"

static jitk_runtime *rt_fused; /* programmatic dependent launch */
static jitk_runtime *rt_split; /* ordinary launches */
static char *tmpdir;
static int quick;

static double now_s(void)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	return (double)tv.tv_sec + (double)tv.tv_usec * 1e-6;
}

/* ------------------------------------------------------- host numerics */

/* q = e4m3(clamp(f(y) * rcp)), NaN -> +448 as the kernels' clamp does. */
static uint8_t quant_ref(uint16_t y, float rcp)
{
	float v = bf16_f(y) * rcp;

	v = isnan(v) ? 448.0f : fmaxf(fminf(v, 448.0f), -448.0f);
	return e4m3_rn(v);
}

/* The per-token scale from a float64 amax of the row's bf16 values:
 * max(amax / 448, 1 / 229376) rounded once to fp32 (the quotient of a
 * bf16 by 448 = 7 x 64 never sits on an fp32 midpoint, so this is the
 * IEEE fp32 division's result); NaN for a row with a NaN. */
static float token_scale_ref(const uint16_t *y, int H)
{
	double amax = 0.0;
	int c;

	for (c = 0; c < H; c++) {
		double a = fabs((double)bf16_f(y[c]));

		if (isnan(a))
			return NAN;
		if (a > amax)
			amax = a;
	}
	return (float)fmax(amax / 448.0, (double)(1.0f / 229376.0f));
}

/* Near-normal (sum of four uniforms), cheap enough for 50M values. */
static void fill(uint16_t *p, size_t n, double mean, double sd)
{
	size_t i;

	for (i = 0; i < n; i++) {
		double s = 0.0;
		int k;

		for (k = 0; k < 4; k++)
			s += (double)rnd32() / 4294967296.0 - 0.5;
		p[i] = bf16_rn((float)(mean + sd * 1.7320508 * s));
	}
}

/* ------------------------------------------------------------- combos */

/* The family's parameters, by name (their order in the spec may change). */
enum { A_NORM, A_RESIDUAL, A_QUANT, A_HIDDEN, A_MOD, A_AFFINE, A_OUTPUTS, A_COUNT };
static const char *const axis_names[A_COUNT] = { "norm", "residual", "quantize", "hidden",
						 "modulation", "affine", "outputs" };
enum { MOD_SHARED, MOD_PER_BATCH, MOD_PER_TOKEN, MOD_INDEXED };
enum { Q_NONE, Q_STATIC, Q_TOKEN };

typedef struct {
	int64_t v[A_COUNT];
	const char *name; /* the instance: a selector of exactly it */
} combo;

static const spec_set *specs_of(jitk_runtime *r)
{
	return jitk_runtime_compiler(r)->specs;
}

static void combo_of(combo *o, const spec_set *set, size_t inst)
{
	const spec_family *f = set->insts[inst].sym->fam;
	int a;

	for (a = 0; a < A_COUNT; a++) {
		int p = jitk__spec_param_index(f, axis_names[a]);

		assert_true(p >= 0);
		o->v[a] = set->insts[inst].vals[p];
	}
	o->name = set->insts[inst].name;
}

/* The split partner of c: the instance (of a symbol whose name starts
 * with prefix, when one is given) with the same norm, residual,
 * modulation, affine and hidden, no quantization and y written. */
/* Instance i is a norm instance of the tier: a symbol whose name starts
 * with prefix, or (prefix NULL) a shipped one. */
static int in_tier(const spec_set *set, size_t i, const char *prefix)
{
	const char *name = set->insts[i].name;

	if (strcmp(set->insts[i].sym->fam->name, "norm_scale_shift"))
		return 0;
	return prefix ? !strncmp(name, prefix, strlen(prefix))
		      : !!strncmp(name, "every_combination", 17);
}

static const char *split_of(const spec_set *set, const combo *c, const char *prefix)
{
	size_t i;

	for (i = 0; i < set->ninsts; i++) {
		combo o;
		int a, same = 1;

		if (!in_tier(set, i, prefix))
			continue;
		combo_of(&o, set, i);
		for (a = 0; a < A_COUNT; a++)
			if (a != A_QUANT && a != A_OUTPUTS && o.v[a] != c->v[a])
				same = 0;
		if (same && o.v[A_QUANT] == Q_NONE && o.v[A_OUTPUTS] == 0)
			return o.name;
	}
	return NULL;
}

/* ---------------------------------------------------------- the tally */

typedef struct {
	long cases, mismatched, ref_mismatched;
	double max_rel_l2;
} tally_t;

/* per axis and value; [A_HIDDEN] is indexed 0, 1, 2 for 1536, 3072, 5120 */
static tally_t tally[A_COUNT][4];
static tally_t by_batches[5], by_index[3];
static long tier_cases[2];

static int hidden_slot(int64_t h)
{
	return h == 1536 ? 0 : h == 3072 ? 1 : 2;
}

static void count(const combo *c, long mismatched, long ref_mismatched, double rel)
{
	int a;

	for (a = 0; a < A_COUNT; a++) {
		tally_t *t = &tally[a][a == A_HIDDEN ? hidden_slot(c->v[a]) : c->v[a]];

		t->cases++;
		t->mismatched += mismatched;
		t->ref_mismatched += ref_mismatched;
		if (rel > t->max_rel_l2)
			t->max_rel_l2 = rel;
	}
}

/* ---------------------------------------------------------- a problem */

/* Inputs and outputs for up to rows x H; B modulation rows. */
typedef struct {
	int H;
	int64_t rows, B, L;
	int pattern; /* indexed: 0 random, 1 all 0, 2 all 1 */
	uint16_t *x, *res, *sc, *sh, *g, *sc1, *sh1, *g1, *w, *bi;
	uint8_t *index;
	CUdeviceptr dx, dres, dsc, dsh, dg, dsc1, dsh1, dg1, dw, dbi, dindex, dis;
	/* outputs: [0] the run under test, [1] the split path */
	CUdeviceptr dy[2], dq[2], ds[2], drout[2], dgout[2];
} problem;

typedef struct {
	uint16_t *y, *rout, *gout;
	uint8_t *q;
	float *s;
} outputs;

static size_t n_of(const problem *p)
{
	return (size_t)p->rows * (size_t)p->H;
}

/* Device buffers for max_rows rows at hidden H (modulation up to one row
 * per row), host inputs of that size filled once. */
static void problem_alloc(problem *p, int H, int64_t max_rows)
{
	size_t n = (size_t)max_rows * (size_t)H, i;

	memset(p, 0, sizeof(*p));
	p->H = H;
	p->x = malloc(n * 2);
	p->res = malloc(n * 2);
	p->sc = malloc(n * 2);
	p->sh = malloc(n * 2);
	p->g = malloc(n * 2);
	p->sc1 = malloc(n * 2);
	p->sh1 = malloc(n * 2);
	p->g1 = malloc(n * 2);
	p->w = malloc((size_t)H * 2);
	p->bi = malloc((size_t)H * 2);
	p->index = malloc((size_t)max_rows);
	fill(p->x, n, 0.0, 1.0);
	fill(p->res, n, 0.5, 2.0);
	fill(p->sc, n, 0.0, 0.2);
	fill(p->sh, n, 0.0, 0.2);
	fill(p->g, n, 0.0, 0.5);
	fill(p->sc1, n, 0.1, 0.3);
	fill(p->sh1, n, -0.1, 0.3);
	fill(p->g1, n, 0.2, 0.5);
	fill(p->w, (size_t)H, 1.0, 0.3);
	fill(p->bi, (size_t)H, 0.0, 0.2);
	p->dx = dalloc(n * 2);
	p->dres = dalloc(n * 2);
	p->dsc = dalloc(n * 2);
	p->dsh = dalloc(n * 2);
	p->dg = dalloc(n * 2);
	p->dsc1 = dalloc(n * 2);
	p->dsh1 = dalloc(n * 2);
	p->dg1 = dalloc(n * 2);
	p->dw = dalloc((size_t)H * 2);
	p->dbi = dalloc((size_t)H * 2);
	p->dindex = dalloc((size_t)max_rows);
	p->dis = dalloc(4);
	upload(p->dx, p->x, n * 2);
	upload(p->dres, p->res, n * 2);
	upload(p->dsc, p->sc, n * 2);
	upload(p->dsh, p->sh, n * 2);
	upload(p->dg, p->g, n * 2);
	upload(p->dsc1, p->sc1, n * 2);
	upload(p->dsh1, p->sh1, n * 2);
	upload(p->dg1, p->g1, n * 2);
	upload(p->dw, p->w, (size_t)H * 2);
	upload(p->dbi, p->bi, (size_t)H * 2);
	for (i = 0; i < 2; i++) {
		p->dy[i] = dalloc(n * 2);
		p->dq[i] = dalloc(n);
		p->ds[i] = dalloc((size_t)max_rows * 4);
		p->drout[i] = dalloc(n * 2);
		p->dgout[i] = dalloc(n * 2);
	}
}

static void problem_free(problem *p)
{
	CUdeviceptr d[] = { p->dx, p->dres, p->dsc, p->dsh, p->dg, p->dsc1, p->dsh1, p->dg1,
			    p->dw, p->dbi, p->dindex, p->dis };
	size_t i;

	for (i = 0; i < JITK_ARRAY_SIZE(d); i++)
		CK(cu->cuMemFree(d[i]));
	for (i = 0; i < 2; i++) {
		CK(cu->cuMemFree(p->dy[i]));
		CK(cu->cuMemFree(p->dq[i]));
		CK(cu->cuMemFree(p->ds[i]));
		CK(cu->cuMemFree(p->drout[i]));
		CK(cu->cuMemFree(p->dgout[i]));
	}
	free(p->x);
	free(p->res);
	free(p->sc);
	free(p->sh);
	free(p->g);
	free(p->sc1);
	free(p->sh1);
	free(p->g1);
	free(p->w);
	free(p->bi);
	free(p->index);
}

/* rows, B (per_batch, indexed: rows = B x L; per_token: B = rows) and the
 * index pattern; uploads the index. */
static void problem_shape(problem *p, int64_t rows, int64_t B, int pattern)
{
	int64_t i;

	p->rows = rows;
	p->B = B;
	p->L = B ? rows / B : 0;
	p->pattern = pattern;
	for (i = 0; i < rows; i++)
		p->index[i] = pattern == 1 ? 0 : pattern == 2 ? 1
			    : (rnd32() & 1) ? (uint8_t)(1 + rnd32() % 255) : 0; /* nonzero is set 1 */
	upload(p->dindex, p->index, (size_t)rows);
}

/* The modulation vectors of row r (scale, shift, gate), for class mod. */
static void row_mod(const problem *p, int mod, int64_t r, const uint16_t **sc,
		    const uint16_t **sh, const uint16_t **g)
{
	size_t o = 0;
	int one = 0;

	if (mod == MOD_PER_BATCH || mod == MOD_INDEXED)
		o = (size_t)(r / p->L) * (size_t)p->H;
	else if (mod == MOD_PER_TOKEN)
		o = (size_t)r * (size_t)p->H;
	if (mod == MOD_INDEXED)
		one = p->index[r] != 0;
	*sc = (one ? p->sc1 : p->sc) + o;
	*sh = (one ? p->sh1 : p->sh) + o;
	*g = (one ? p->g1 : p->g) + o;
}

/* The arguments for combo c; out 0 is the run under test, 1 the split. */
static jitk_norm_scale_shift_args args_of(const problem *p, const combo *c, int out)
{
	jitk_norm_scale_shift_args a;
	int mod = (int)c->v[A_MOD];

	jitk_norm_scale_shift_args_init(&a);
	if (c->v[A_OUTPUTS] == 0)
		a.y = p->dy[out];
	if (c->v[A_QUANT] != Q_NONE)
		a.q = p->dq[out];
	if (c->v[A_QUANT] == Q_STATIC)
		a.input_scale = p->dis;
	if (c->v[A_QUANT] == Q_TOKEN)
		a.s = p->ds[out];
	a.x = p->dx;
	if (c->v[A_RESIDUAL]) {
		a.residual = p->dres;
		a.residual_out = p->drout[out];
	}
	/* the modulation tensors under their class's names (the spec's) */
	if (mod == MOD_SHARED) {
		a.scale = p->dsc;
		a.shift = p->dsh;
		a.gate = c->v[A_RESIDUAL] ? p->dg : 0;
	} else if (mod != MOD_INDEXED) {
		a.scales = p->dsc;
		a.shifts = p->dsh;
		a.gates = c->v[A_RESIDUAL] ? p->dg : 0;
		a.B = p->B;
		a.L = mod == MOD_PER_BATCH ? p->L : 0;
	} else {
		a.scale0 = p->dsc;
		a.shift0 = p->dsh;
		a.scale1 = p->dsc1;
		a.shift1 = p->dsh1;
		if (c->v[A_RESIDUAL]) {
			a.gate0 = p->dg;
			a.gate1 = p->dg1;
			a.gate_out = p->dgout[out];
		}
		a.index = p->dindex;
		a.B = p->B;
		a.L = p->L;
	}
	if (c->v[A_AFFINE] >= 1)
		a.weight = p->dw;
	if (c->v[A_AFFINE] == 2)
		a.bias = p->dbi;
	a.rows = p->rows;
	a.hidden = p->H;
	a.eps = 1e-6f;
	return a;
}

/* What combo c writes, as a mask of outputs. */
enum { O_Y = 1, O_Q = 2, O_S = 4, O_ROUT = 8, O_GOUT = 16 };

static unsigned writes(const combo *c)
{
	return (c->v[A_OUTPUTS] == 0 ? O_Y : 0) | (c->v[A_QUANT] != Q_NONE ? O_Q : 0) |
	       (c->v[A_QUANT] == Q_TOKEN ? O_S : 0) | (c->v[A_RESIDUAL] ? O_ROUT : 0) |
	       (c->v[A_RESIDUAL] && c->v[A_MOD] == MOD_INDEXED ? O_GOUT : 0);
}

/* Download the outputs in mask from outputs `out` (the others are left
 * allocated and zero). */
static void outputs_get(outputs *o, const problem *p, int out, unsigned mask)
{
	size_t n = n_of(p);

	o->y = calloc(n * 2 + 2, 1);
	o->rout = calloc(n * 2 + 2, 1);
	o->gout = calloc(n * 2 + 2, 1);
	o->q = calloc(n + 1, 1);
	o->s = calloc((size_t)p->rows * 4 + 4, 1);
	CK(cu->cuCtxSynchronize());
	if (mask & O_Y)
		download(o->y, p->dy[out], n * 2);
	if (mask & O_ROUT)
		download(o->rout, p->drout[out], n * 2);
	if (mask & O_GOUT)
		download(o->gout, p->dgout[out], n * 2);
	if (mask & O_Q)
		download(o->q, p->dq[out], n);
	if (mask & O_S)
		download(o->s, p->ds[out], (size_t)p->rows * 4);
}

static void outputs_free(outputs *o)
{
	free(o->y);
	free(o->rout);
	free(o->gout);
	free(o->q);
	free(o->s);
}

static void poison_outputs(const problem *p, int out, unsigned char v)
{
	size_t n = n_of(p);

	poison(p->dy[out], n * 2, v);
	poison(p->dq[out], n, v);
	poison(p->ds[out], (size_t)p->rows * 4, v);
	poison(p->drout[out], n * 2, v);
	poison(p->dgout[out], n * 2, v);
}

/* Bytes of the outputs combo c writes that differ between a and b: y,
 * residual_out and gate_out of b, q and s of bq. */
static long differ(const problem *p, const combo *c, const outputs *a, const outputs *b,
		   const outputs *bq)
{
	const unsigned m = writes(c);
	size_t n = n_of(p), i;
	long d = 0;

	for (i = 0; i < n; i++) {
		if (m & O_Y)
			d += a->y[i] != b->y[i];
		if (m & O_Q)
			d += a->q[i] != bq->q[i];
		if (m & O_ROUT)
			d += a->rout[i] != b->rout[i];
		if (m & O_GOUT)
			d += a->gout[i] != b->gout[i];
	}
	for (i = 0; (m & O_S) && i < (size_t)p->rows * 4; i++)
		d += ((const unsigned char *)a->s)[i] != ((const unsigned char *)bq->s)[i];
	return d;
}

static void launch(jitk_runtime *r, const combo *c, const problem *p, int out)
{
	jitk_norm_scale_shift_args a = args_of(p, c, out);
	int rc = jitk_norm_scale_shift_call(NULL, r, c->name, JITK_CALL_STRICT, &a, NULL);

	if (rc)
		fail_msg("%s rows=%lld B=%lld: %s", c->name, (long long)p->rows, (long long)p->B,
			 jitk_error_last()->message);
}

/* Run c twice over two poisons into outputs `out`; the two runs must
 * agree on every byte c writes (every element written). */
static void run_twice(jitk_runtime *r, const combo *c, const problem *p, int out, outputs *o)
{
	outputs again;
	long d;

	poison_outputs(p, out, 0x00);
	launch(r, c, p, out);
	outputs_get(o, p, out, writes(c));
	poison_outputs(p, out, 0xff);
	launch(r, c, p, out);
	outputs_get(&again, p, out, writes(c));
	d = differ(p, c, o, &again, &again);
	if (d)
		fprintf(stderr, "%s rows=%lld: %ld bytes differ between two poisons (unwritten)\n",
			c->name, (long long)p->rows, d);
	assert_int_equal(d, 0);
	outputs_free(&again);
}

/* y, residual_out and gate_out of the split norm against the host:
 * float64 for y (the relative L2 error), bit for bit for the other two.
 * Returns the relative L2 error; *bad counts the exact mismatches. */
static double check_norm(const problem *p, const combo *c, const outputs *o, long *bad)
{
	const int H = p->H, mod = (int)c->v[A_MOD], aff = (int)c->v[A_AFFINE];
	double num = 0.0, den = 0.0, *v = malloc((size_t)H * sizeof(double));
	int64_t r;
	int k;

	*bad = 0;
	for (r = 0; r < p->rows; r++) {
		const size_t off = (size_t)r * (size_t)H;
		const uint16_t *sc, *sh, *g;
		double mean = 0.0, var = 0.0;

		row_mod(p, mod, r, &sc, &sh, &g);
		for (k = 0; k < H; k++) {
			if (c->v[A_RESIDUAL]) {
				uint16_t want = bf16_rn(fmaf(bf16_f(g[k]), bf16_f(p->x[off + k]),
							     bf16_f(p->res[off + k])));

				*bad += o->rout[off + k] != want;
				if (mod == MOD_INDEXED)
					*bad += o->gout[off + k] != g[k];
				v[k] = bf16_f(want);
			} else {
				v[k] = bf16_f(p->x[off + k]);
			}
			mean += v[k];
		}
		mean = c->v[A_NORM] == 0 ? mean / H : 0.0;
		for (k = 0; k < H; k++)
			var += (v[k] - mean) * (v[k] - mean);
		var /= H;
		for (k = 0; k < H; k++) {
			double n = (v[k] - mean) / sqrt(var + 1e-6), ref, got;

			if (aff >= 1)
				n *= bf16_f(p->w[k]);
			if (aff == 2)
				n += bf16_f(p->bi[k]);
			ref = n * (1.0 + bf16_f(sc[k])) + bf16_f(sh[k]);
			got = bf16_f(o->y[off + k]);
			if (isnan(got))
				*bad += 1;
			num += (got - ref) * (got - ref);
			den += ref * ref;
		}
	}
	free(v);
	return den > 0 ? sqrt(num / den) : 0.0;
}

/* q (and s) of the split path against the host quantizers, from the y
 * of norm. */
static long check_quant(const problem *p, int quant, const outputs *norm, const outputs *o,
			float rcp)
{
	const int H = p->H;
	long bad = 0;
	int64_t r;
	int k;

	for (r = 0; r < p->rows; r++) {
		const size_t off = (size_t)r * (size_t)H;
		float rr = rcp;

		if (quant == Q_TOKEN) {
			float s = token_scale_ref(norm->y + off, H);

			bad += memcmp(&s, &o->s[r], 4) != 0;
			rr = 1.0f / s;
		}
		for (k = 0; k < H; k++)
			bad += o->q[off + k] != quant_ref(norm->y[off + k], rr);
	}
	return bad;
}

/* The regression scales of the contract. */
static const uint32_t scales[] = { 0x3ba3d70a /* 0.005 */, 0x3d000000 /* 0.03125 */,
				   0x3eda4925 /* 191/448 */, 0x3ef36db7 /* 213/448 */,
				   0x3f800000 /* 1.0 */ };

/* One input set: the split norm (checked against the host), then every
 * quantizing combo of the group against its split path. group[0] is the
 * norm (quantize none, y written). */
static void run_group(const combo *group, size_t ngroup, problem *p, int tier)
{
	outputs norm, split, fused;
	long bad = 0;
	double rel;
	size_t i, s;

	run_twice(rt_split, &group[0], p, 1, &norm);
	rel = check_norm(p, &group[0], &norm, &bad);
	if (bad || !(rel < 1e-2))
		fprintf(stderr, "%s rows=%lld B=%lld: %ld exact mismatches, rel L2 %g\n", group[0].name,
			(long long)p->rows, (long long)p->B, bad, rel);
	assert_int_equal(bad, 0);
	assert_true(rel < 1e-2);
	count(&group[0], 0, bad, rel);
	tier_cases[tier]++;
	if (group[0].v[A_MOD] == MOD_PER_BATCH)
		by_batches[p->B > 4 ? 4 : p->B].cases++;
	if (group[0].v[A_MOD] == MOD_INDEXED)
		by_index[p->pattern].cases++;
	for (i = 1; i < ngroup; i++) {
		const combo *c = &group[i];
		const size_t nscales = c->v[A_QUANT] == Q_TOKEN ? 1 : quick || tier ? 1 : 5;

		for (s = 0; s < nscales; s++) {
			float scale, rcp = 0.0f;
			long mis, qbad;

			memcpy(&scale, &scales[nscales == 1 ? 3 : s], 4);
			if (c->v[A_QUANT] == Q_STATIC) {
				upload(p->dis, &scale, 4);
				assert_int_equal(jitk_norm_scale_shift_configure_input_scale(rt_fused, p->dis), 0);
				rcp = device_rcp(jitk_runtime_arch(rt_split), scale);
			}
			/* split: the norm's y (in out 1), then the quantizer */
			poison(p->dq[1], n_of(p), 0xa5);
			poison(p->ds[1], (size_t)p->rows * 4, 0xa5);
			if (c->v[A_QUANT] == Q_STATIC)
				assert_int_equal(jitk_static_quant_fp8(rt_split, &(jitk_static_quant_fp8_args){ .q = p->dq[1], .x = p->dy[1], .input_scale = p->dis, .n = (int64_t)n_of(p) }, NULL), 0);
			else
				assert_int_equal(jitk_per_token_quant_fp8(rt_split, &(jitk_per_token_quant_fp8_args){ .q = p->dq[1], .s = p->ds[1], .x = p->dy[1], .rows = p->rows, .H = p->H }, NULL), 0);
			outputs_get(&split, p, 1, O_Q | O_S);
			qbad = check_quant(p, (int)c->v[A_QUANT], &norm, &split, rcp);
			run_twice(rt_fused, c, p, 0, &fused);
			mis = differ(p, c, &fused, &norm, &split);
			if (mis || qbad)
				fprintf(stderr, "%s rows=%lld B=%lld scale=%g: fused vs split %ld bytes, "
					"q/s vs host %ld\n", c->name, (long long)p->rows, (long long)p->B,
					(double)scale, mis, qbad);
			assert_int_equal(mis, 0);
			assert_int_equal(qbad, 0);
			count(c, mis, qbad, 0.0);
			tier_cases[tier]++;
			outputs_free(&split);
			outputs_free(&fused);
		}
	}
	outputs_free(&norm);
}

/* Combos of instances [first, first + n) of set, grouped by their norm
 * (norm, residual, modulation, affine, hidden): group[0] the split norm.
 * Returns the number of groups; *out is malloc'd, groups of up to 8. */
#define GROUP_MAX 12
typedef struct {
	combo c[GROUP_MAX];
	size_t n;
} group_t;

static size_t make_groups(group_t **out, const spec_set *set, size_t first, size_t n,
			  const char *prefix)
{
	group_t *g = calloc(n, sizeof(*g));
	size_t ng = 0, i, j;

	for (i = first; i < first + n; i++) {
		combo c;
		const char *split;

		if (!in_tier(set, i, prefix))
			continue;
		combo_of(&c, set, i);
		/* the spec's constraints (test_axes checks they refuse these) */
		if ((c.v[A_OUTPUTS] == 1 && c.v[A_QUANT] == Q_NONE) ||
		    (c.v[A_NORM] == 1 && c.v[A_AFFINE] == 2))
			continue;
		split = split_of(set, &c, prefix);
		if (!split)
			continue; /* a disallowed combination (tier 2) */
		for (j = 0; j < ng; j++)
			if (!strcmp(g[j].c[0].name, split))
				break;
		if (j == ng) {
			size_t k;

			for (k = 0; k < set->ninsts; k++)
				if (!strcmp(set->insts[k].name, split))
					break;
			combo_of(&g[ng].c[0], set, k);
			g[ng++].n = 1;
		}
		if (c.v[A_QUANT] != Q_NONE) {
			assert_true(g[j].n < GROUP_MAX);
			g[j].c[g[j].n++] = c;
		}
	}
	*out = g;
	return ng;
}

/* The batch counts to run for modulation class mod at rows. */
static size_t batch_counts(int64_t *out, int mod, int64_t rows, int tier)
{
	static const int64_t bs[] = { 1, 2, 4 };
	size_t n = 0, i;

	if (mod == MOD_SHARED) {
		out[n++] = 0;
	} else if (mod == MOD_PER_TOKEN) {
		out[n++] = rows;
	} else if (mod == MOD_INDEXED) {
		out[n++] = rows % 2 ? 1 : 2;
	} else {
		for (i = 0; i < 3; i++)
			if (rows % bs[i] == 0 && (!quick || i == 0) && (!tier || i == 1))
				out[n++] = bs[i];
	}
	return n;
}

static void run_groups(const group_t *g, size_t ng, problem *p, const int64_t *rows,
		       size_t nrows, int tier)
{
	size_t i, r, b, pat;

	for (r = 0; r < nrows; r++)
		for (i = 0; i < ng; i++) {
			int mod = (int)g[i].c[0].v[A_MOD];
			int64_t bs[4];
			size_t nb;

			if (g[i].c[0].v[A_HIDDEN] != p->H)
				continue;
			nb = batch_counts(bs, mod, rows[r], tier);
			for (b = 0; b < nb; b++)
				for (pat = 0; pat < (mod == MOD_INDEXED ? 3u : 1u); pat++) {
					problem_shape(p, rows[r], bs[b], (int)pat);
					run_group(g[i].c, g[i].n, p, tier);
				}
		}
}

/* ------------------------------------------------------------- setup */

/* Compile every norm instance into the cache with workers, before the
 * runtimes need them (NVRTC is one program at a time per process). */
static void precompile(const char *specs, const char *cache, const char *arch)
{
	int w, nw = 8;
	pid_t pid[8];

	for (w = 0; w < nw; w++) {
		pid[w] = fork();
		assert_true(pid[w] >= 0);
		if (pid[w] == 0) {
			jitk_compiler *c = t_compiler(specs, cache, NULL, NULL);
			size_t i;
			int rc = 0;

			for (i = (size_t)w; c && i < jitk_instance_count(c); i += (size_t)nw) {
				int r = jitk_precompile(NULL, c, jitk_instance_name(c, i), arch);

				if (r && r != JITK_EARCH && r != JITK_ESPEC) {
					fprintf(stderr, "%s: %s\n", jitk_instance_name(c, i), jitk_error_last()->message);
					rc = 1;
				}
			}
			jitk_compiler_free(c);
			_exit(rc);
		}
	}
	for (w = 0; w < nw; w++) {
		int st = 0;

		assert_int_equal(waitpid(pid[w], &st, 0), pid[w]);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
}

static int group_setup(void **state)
{
	jitk_runtime_options o = JITK_RUNTIME_OPTIONS_INIT;
	jitk_compiler_options co = JITK_COMPILER_OPTIONS_INIT;
	char *specs, *cache, *yaml, *text;
	size_t len;
	double t0 = now_s();

	(void)state;
	quick = jitk__env_bool(NULL, "JITK_GPU_QUICK", 0, "");
	cu = jitk__cuda(&why_no_gpu);
	if (!cu)
		return 0;
	tmpdir = t_tmpdir();
	cache = t_path(tmpdir, "cache");
	/* the repo's specs, and one more symbol: every combination */
	t_copy_tree(tmpdir, NULL, NULL);
	specs = t_path(tmpdir, "specs");
	yaml = t_path(specs, "norm_scale_shift.yaml");
	text = t_read(yaml, &len);
	t_writef(yaml, "%s  every_combination:\n"
		 "    description: every combination of the parameters (test_gpu_axes)\n"
		 "    params: { norm: [layer, rms], residual: [false, true], "
		 "quantize: [none, fp8_e4m3, fp8_e4m3_per_token], hidden: [3072], "
		 "modulation: [shared, per_batch, per_token, indexed], "
		 "affine: [none, weight, weight_bias], outputs: [y_q, q] }\n", text);
	free(text);
	co.specs = specs;
	co.cache_dir = cache;
	co.cache_path = "";
	o.compiler = &co;
	if (jitk_runtime_new(&rt_split, &o)) {
		why_no_gpu = jitk_error_last()->message;
		cu = NULL;
	} else {
		o.programmatic = 1;
		if (jitk_runtime_new(&rt_fused, &o)) {
			fprintf(stderr, "%s\n", jitk_error_last()->message);
			return -1;
		}
		precompile(specs, cache, jitk_runtime_arch(rt_split));
		printf("GPU: %s; %zu instances compiled in %.1f s\n", jitk_runtime_arch(rt_split),
		       jitk_instance_count(jitk_runtime_compiler(rt_split)), now_s() - t0);
	}
	free(specs);
	free(cache);
	free(yaml);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	jitk_runtime_free(rt_fused);
	jitk_runtime_free(rt_split);
	if (tmpdir) {
		t_rmtree(tmpdir);
		free(tmpdir);
	}
	return 0;
}

/* ------------------------------------------------------------- tests */

/* The per-token scale reference of a zero row, and of a NaN row (the
 * host e4m3 encoder is checked by test_gpu's test_host_e4m3). */
static void test_token_scale_ref(void **state)
{
	(void)state;
	/* the per-token scale of a zero row, and of a NaN row */
	{
		uint16_t z[4] = { 0, 0x8000, 0, 0 }, n[4] = { 0x3f80, 0x7fc0, 0, 0 };
		float s = token_scale_ref(z, 4);

		assert_true(s == 1.0f / 229376.0f);
		assert_true(isnan(token_scale_ref(n, 4)));
	}
}

static void summary(double t0)
{
	static const char *const values[A_COUNT][4] = {
		{ "layer", "rms" }, { "false", "true" }, { "none", "fp8_e4m3", "fp8_e4m3_per_token" },
		{ "1536", "3072", "5120" }, { "shared", "per_batch", "per_token", "indexed" },
		{ "none", "weight", "weight_bias" }, { "y_q", "q" },
	};
	static const char *const patterns[3] = { "random", "all-0", "all-1" };
	int a, v;

	for (a = 0; a < A_COUNT; a++)
		for (v = 0; v < 4 && values[a][v]; v++) {
			const tally_t *t = &tally[a][v];

			if (!t->cases)
				continue;
			printf("axis %s=%s: %ld cases, fused vs split %ld differing bytes, "
			       "vs host (q, s, residual_out, gate_out exact) %ld, y vs float64 max rel L2 %.2e\n",
			       axis_names[a], values[a][v], t->cases, t->mismatched, t->ref_mismatched,
			       t->max_rel_l2);
		}
	for (v = 1; v <= 4; v++)
		if (by_batches[v].cases)
			printf("per_batch B=%d: %ld input sets\n", v, by_batches[v].cases);
	for (v = 0; v < 3; v++)
		printf("indexed index %s: %ld input sets\n", patterns[v], by_index[v].cases);
	printf("axes: %ld cases over the shipped symbols, %ld over every allowed combination, "
	       "0 differing bytes, %.0f s\n", tier_cases[0], tier_cases[1], now_s() - t0);
}

static void test_axes_fused_equals_split(void **state)
{
	static const int64_t rows_all[] = { 1, 127, 1024, 4096 };
	static const int hiddens[] = { 3072, 1536, 5120 };
	const spec_set *set;
	group_t *g;
	size_t ng, h;
	double t0 = now_s();

	(void)state;
	NEED_GPU();
	set = specs_of(rt_split);
	/* tier 1: the shipped symbols */
	ng = make_groups(&g, set, 0, set->ninsts, NULL);
	for (h = 0; h < (quick ? 1u : 3u); h++) {
		problem p;
		/* 1536 and 5120: up to 1024 rows */
		const size_t nrows = quick ? 2 : h ? 3 : 4;

		problem_alloc(&p, hiddens[h], rows_all[nrows - 1]);
		run_groups(g, ng, &p, rows_all, nrows, 0);
		problem_free(&p);
	}
	free(g);
	/* tier 2: every allowed combination, 128 rows (4 in quick mode) */
	{
		size_t sym;
		problem p;
		const int64_t rows[1] = { quick ? 4 : 128 };

		for (sym = 0; sym < set->nsyms; sym++)
			if (!strcmp(set->syms[sym]->name, "every_combination"))
				break;
		assert_true(sym < set->nsyms);
		ng = make_groups(&g, set, set->syms[sym]->first, set->syms[sym]->ninsts,
				 "every_combination");
		assert_int_equal(ng, 2 * 5 * 4); /* residual x (norm, affine) x modulation */
		problem_alloc(&p, 3072, rows[0]);
		run_groups(g, ng, &p, rows, 1, 1);
		problem_free(&p);
		free(g);
	}
	summary(t0);
}

/* Per-token scales of rows with a NaN, an infinity and only zeros: fused
 * and split agree; s is NaN and q 0x7e for the NaN and infinity rows
 * (documented); the zero row's s is 1 / 229376; other rows unchanged. */
static void test_per_token_special_rows(void **state)
{
	problem p;
	combo c;
	const spec_set *set;
	size_t i, inst;
	outputs fused, split;
	const int H = 3072;

	(void)state;
	NEED_GPU();
	set = specs_of(rt_split);
	assert_int_equal(jitk__spec_find(set, "fused_norm_scale_shift_fp8_per_token[hidden=3072]", &inst), 0);
	combo_of(&c, set, inst);
	problem_alloc(&p, H, 4);
	problem_shape(&p, 4, 0, 0);
	p.x[5] = 0x7fc0;         /* NaN in row 0 */
	p.x[2 * H + 7] = 0xff80; /* -Inf in row 2 */
	upload(p.dx, p.x, n_of(&p) * 2);
	run_twice(rt_fused, &c, &p, 0, &fused);
	for (i = 0; i < (size_t)H; i++) {
		assert_int_equal(fused.q[i], 0x7e);
		assert_int_equal(fused.q[2 * H + i], 0x7e);
	}
	assert_true(isnan(fused.s[0]) && isnan(fused.s[2]));
	assert_false(isnan(fused.s[1]) || isnan(fused.s[3]));
	/* the split quantizer on the fused y: the same bytes */
	assert_int_equal(jitk_per_token_quant_fp8(rt_split, &(jitk_per_token_quant_fp8_args){ .q = p.dq[1], .s = p.ds[1], .x = p.dy[0], .rows = 4, .H = H }, NULL), 0);
	outputs_get(&split, &p, 1, O_Q | O_S);
	assert_memory_equal(split.q, fused.q, n_of(&p));
	assert_memory_equal(split.s, fused.s, 16);
	outputs_free(&split);
	/* a row of zeros (and -0) for the standalone quantizer */
	memset(p.x, 0, (size_t)H * 2);
	p.x[3] = 0x8000;
	upload(p.dx, p.x, (size_t)H * 2);
	assert_int_equal(jitk_per_token_quant_fp8(rt_split, &(jitk_per_token_quant_fp8_args){ .q = p.dq[1], .s = p.ds[1], .x = p.dx, .rows = 1, .H = H }, NULL), 0);
	outputs_get(&split, &p, 1, O_Q | O_S);
	assert_true(split.s[0] == 1.0f / 229376.0f);
	for (i = 0; i < (size_t)H; i++)
		assert_int_equal(split.q[i], i == 3 ? 0x80 : 0x00);
	/* an odd hidden size: the scalar path of the quantizer */
	assert_int_equal(jitk_per_token_quant_fp8(rt_split, &(jitk_per_token_quant_fp8_args){ .q = p.dq[1], .s = p.ds[1], .x = p.dres, .rows = 3, .H = 1001 }, NULL), 0);
	outputs_free(&split);
	outputs_get(&split, &p, 1, O_Q | O_S);
	for (i = 0; i < 3; i++) {
		float s = token_scale_ref(p.res + i * 1001, 1001);
		size_t k;

		assert_memory_equal(&s, &split.s[i], 4);
		for (k = 0; k < 1001; k++)
			assert_int_equal(split.q[i * 1001 + k], quant_ref(p.res[i * 1001 + k], 1.0f / s));
	}
	printf("per-token special rows: NaN and -Inf rows give s = NaN and q = 0x7e (fused == split), "
	       "a zero row s = 1/229376 and q = 0, hidden 1001 by the scalar path: exact\n");
	outputs_free(&fused);
	outputs_free(&split);
	problem_free(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_token_scale_ref),
		cmocka_unit_test(test_axes_fused_equals_split),
		cmocka_unit_test(test_per_token_special_rows),
	};

	return T_RUN_TESTS(tests, group_setup, group_teardown);
}
