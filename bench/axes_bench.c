/* axes_bench.c - bandwidth of the norm family's new axes (issue 12) on
 * the GPU, over the public API (jitk.h, jitk/norm.h) and the CUDA runtime:
 * per_batch and indexed modulation, outputs q against y_q, per-token fp8
 * (fused and split), next to the reference's shared-modulation kernels and
 * a device-to-device copy of the same bytes.
 *
 *   build/axes_bench [--rows 4096,16384] [--hidden 3072] [--reps 100]
 *
 * Built by ninja (build/axes_bench). Each case is timed as REPS launches
 * back to back between two events, rotating over input sets that together
 * exceed the L2 several times (every launch reads from DRAM and the
 * write-back of the previous launch's outputs is paid for, as in a model's
 * step), after a warm-up. Bytes are counted as the kernel contract counts
 * them: reads of x (and residual, and per-token modulation rows), writes of
 * y (when written), q, s, residual_out and gate_out; [H] and [B, H]
 * vectors and the index are left out. "% copy" is the kernel's bandwidth
 * against a large device copy's (bytes read + written); "vs copy" divides
 * the time of a copy of the same bytes, timed the same way, by the
 * kernel's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "jitk.h"
#include "jitk/norm.h"

#define CU(call)                                                              \
	do {                                                                  \
		cudaError_t r_ = (call);                                      \
		if (r_ != cudaSuccess) {                                      \
			fprintf(stderr, "axes_bench: %s: %s (line %d)\n", #call, \
				cudaGetErrorName(r_), __LINE__);              \
			exit(1);                                              \
		}                                                             \
	} while (0)

#define JK(call)                                                              \
	do {                                                                  \
		if ((call) < 0) {                                             \
			fprintf(stderr, "axes_bench: %s: %s\n", #call,        \
				jitk_error_last()->message);                  \
			exit(1);                                              \
		}                                                             \
	} while (0)

/* The cases: symbol (or a split path), modulation and bytes per element. */
enum { MOD_SHARED, MOD_PER_BATCH, MOD_PER_TOKEN, MOD_INDEXED };
enum { PATH_FUSED, PATH_SPLIT_TOKEN };
typedef struct {
	const char *label, *symbol;
	int mod, residual, quant; /* quant: 0 none, 1 static, 2 per token */
	int y, path;
	int random_index;
	double bytes_per; /* per element; s adds 4 per row */
} bench_case;

static const bench_case cases[] = {
	{ "shared fp8 (reference)", "fused_norm_scale_shift_fp8", MOD_SHARED, 0, 1, 1, 0, 0, 5 },
	{ "shared residual fp8 (reference)", "fused_scale_residual_norm_scale_shift_fp8", MOD_SHARED, 1, 1, 1, 0, 0, 9 },
	{ "per_batch B=2 norm", "fused_norm_scale_shift_per_batch", MOD_PER_BATCH, 0, 0, 1, 0, 0, 4 },
	{ "per_batch B=2 fp8", "fused_norm_scale_shift_per_batch_fp8", MOD_PER_BATCH, 0, 1, 1, 0, 0, 5 },
	{ "per_batch B=2 residual fp8", "fused_scale_residual_norm_scale_shift_per_batch_fp8", MOD_PER_BATCH, 1, 1, 1, 0, 0, 9 },
	{ "indexed B=2 halves fp8", "fused_norm_scale_shift_indexed_fp8", MOD_INDEXED, 0, 1, 1, 0, 0, 5 },
	{ "indexed B=2 random fp8", "fused_norm_scale_shift_indexed_fp8", MOD_INDEXED, 0, 1, 1, 0, 1, 5 },
	{ "indexed B=2 halves residual fp8", "fused_scale_residual_norm_scale_shift_indexed_fp8", MOD_INDEXED, 1, 1, 1, 0, 0, 11 },
	{ "per_batch B=2 fp8 q only", "fused_norm_scale_shift_per_batch_fp8_q_only", MOD_PER_BATCH, 0, 1, 0, 0, 0, 3 },
	{ "per_batch B=2 residual fp8 q only", "fused_scale_residual_norm_scale_shift_per_batch_fp8_q_only", MOD_PER_BATCH, 1, 1, 0, 0, 0, 7 },
	{ "per_batch B=2 fp8 per token", "fused_norm_scale_shift_per_batch_fp8_per_token", MOD_PER_BATCH, 0, 2, 1, 0, 0, 5 },
	{ "per_batch B=2 fp8 per token q only", "fused_norm_scale_shift_per_batch_fp8_per_token_q_only", MOD_PER_BATCH, 0, 2, 0, 0, 0, 3 },
	{ "per_batch B=2 fp8 per token, split", "fused_norm_scale_shift_per_batch", MOD_PER_BATCH, 0, 2, 1, PATH_SPLIT_TOKEN, 0, 7 },
	{ "per_token modulation fp8", "fused_norm_scale_shift_per_token_fp8", MOD_PER_TOKEN, 0, 1, 1, 0, 0, 9 },
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint32_t rnd32(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 32);
}

/* n bf16 of a near-normal distribution (sum of four uniforms) x sd. */
static void *random_bf16(size_t n, double mean, double sd)
{
	uint16_t *h = malloc(n * 2);
	void *d;
	size_t i;

	if (!h)
		exit(1);
	for (i = 0; i < n; i++) {
		double s = 0;
		float f;
		uint32_t u;
		int k;

		for (k = 0; k < 4; k++)
			s += (double)rnd32() / 4294967296.0 - 0.5;
		f = (float)(mean + s * sd * 1.7320508);
		memcpy(&u, &f, 4);
		h[i] = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
	}
	CU(cudaMalloc(&d, n * 2));
	CU(cudaMemcpy(d, h, n * 2, cudaMemcpyHostToDevice));
	free(h);
	return d;
}

static void *dalloc(size_t n)
{
	void *d;

	CU(cudaMalloc(&d, n ? n : 1));
	return d;
}

#define DP(p) ((jitk_devptr)(uintptr_t)(p))

/* Large device copy: bytes read + written per second. */
static double copy_bandwidth(void)
{
	size_t n = (size_t)2 << 30;
	void *a = dalloc(n), *b = dalloc(n);
	cudaEvent_t e0, e1;
	float ms, best = 1e30f;
	int i;

	CU(cudaEventCreate(&e0));
	CU(cudaEventCreate(&e1));
	for (i = 0; i < 12; i++) {
		CU(cudaEventRecord(e0, 0));
		CU(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, 0));
		CU(cudaEventRecord(e1, 0));
		CU(cudaEventSynchronize(e1));
		CU(cudaEventElapsedTime(&ms, e0, e1));
		if (i >= 2 && ms < best)
			best = ms;
	}
	CU(cudaFree(a));
	CU(cudaFree(b));
	CU(cudaEventDestroy(e0));
	CU(cudaEventDestroy(e1));
	return 2.0 * (double)n / (best * 1e-3);
}

/* One input set. */
typedef struct {
	jitk_norm_args a;
	void *bufs[12];
	int n;
} set_t;

static void *keep(set_t *s, void *p)
{
	s->bufs[s->n++] = p;
	return p;
}

static void launch(jitk_runtime *rt, const bench_case *c, const set_t *s, cudaStream_t st)
{
	if (c->path == PATH_SPLIT_TOKEN) {
		jitk_norm_args a = s->a;

		a.q = a.s = 0;
		JK(jitk_norm_call(NULL, rt, c->symbol, JITK_CALL_STRICT, &a, st));
		JK(jitk_per_token_quant_fp8(rt, s->a.q, s->a.s, s->a.y, a.rows, a.hidden, st));
		return;
	}
	JK(jitk_norm_call(NULL, rt, c->symbol, JITK_CALL_STRICT, &s->a, st));
}

/* Two pairs of copy buffers (source, destination), big enough for the
 * largest case: the yardstick copies alternate between them. */
static void *copy_buf[4];

/* Microseconds per launch: reps launches back to back, rotating sets (or
 * copies of copy_bytes, half the case's bytes, when copy is set). */
static double time_case(jitk_runtime *rt, const bench_case *c, set_t *sets, int nsets, int reps,
			cudaStream_t st, int copy, size_t copy_bytes)
{
	cudaEvent_t e0, e1;
	float ms;
	int i;

	CU(cudaEventCreate(&e0));
	CU(cudaEventCreate(&e1));
	for (i = 0; i < reps + 5; i++) {
		const set_t *s = &sets[i % nsets];

		if (i == 5)
			CU(cudaEventRecord(e0, st));
		if (copy)
			CU(cudaMemcpyAsync(copy_buf[2 * (i % 2) + 1], copy_buf[2 * (i % 2)], copy_bytes,
					   cudaMemcpyDeviceToDevice, st));
		else
			launch(rt, c, s, st);
	}
	CU(cudaEventRecord(e1, st));
	CU(cudaEventSynchronize(e1));
	CU(cudaEventElapsedTime(&ms, e0, e1));
	CU(cudaEventDestroy(e0));
	CU(cudaEventDestroy(e1));
	return ms * 1e3 / reps;
}

static int parse_list(int *out, int max, const char *s)
{
	int n = 0;

	while (*s && n < max) {
		char *end;
		long v = strtol(s, &end, 10);

		if (end == s || v <= 0)
			return -1;
		out[n++] = (int)v;
		s = *end == ',' ? end + 1 : end;
		if (*end && *end != ',')
			return -1;
	}
	return n;
}

int main(int argc, char **argv)
{
	int rows_list[8] = { 4096, 16384 }, hidden_list[4] = { 3072 };
	int nrows = 2, nhidden = 1, reps = 100, i, h, r;
	size_t k;
	jitk_runtime *rt;
	jitk_runtime_options o = JITK_RUNTIME_OPTIONS_INIT;
	cudaStream_t st;
	double peak, q_us[2][8], yq_us[2][8];

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--rows") && i + 1 < argc)
			nrows = parse_list(rows_list, 8, argv[++i]);
		else if (!strcmp(argv[i], "--hidden") && i + 1 < argc)
			nhidden = parse_list(hidden_list, 4, argv[++i]);
		else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
			reps = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: axes_bench [--rows LIST] [--hidden LIST] [--reps N]\n");
			return 2;
		}
	}
	if (nrows <= 0 || nhidden <= 0 || reps < 5) {
		fprintf(stderr, "axes_bench: bad option value\n");
		return 2;
	}
	CU(cudaFree(0));
	o.programmatic = 1;
	JK(jitk_runtime_new(&rt, &o));
	CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
	peak = copy_bandwidth();
	printf("device: %s; device-to-device copy %.0f GB/s (bytes read + written); %d launches "
	       "per case, back to back\n\n", jitk_runtime_arch(rt), peak / 1e9, reps);
	printf("%-40s %6s %6s %9s %8s %7s %9s %8s\n", "kernel", "hidden", "rows", "us", "GB/s",
	       "% copy", "copy us", "vs copy");
	for (h = 0; h < nhidden; h++)
		for (r = 0; r < nrows; r++) {
			const int H = hidden_list[h], R = rows_list[r];
			const size_t n = (size_t)R * (size_t)H;
			void *scale = random_bf16((size_t)2 * H, 0.0, 0.2);
			void *shift = random_bf16((size_t)2 * H, 0.0, 0.2);
			void *gate = random_bf16((size_t)2 * H, 0.0, 0.5);
			void *scale1 = random_bf16((size_t)2 * H, 0.1, 0.3);
			void *shift1 = random_bf16((size_t)2 * H, -0.1, 0.3);
			void *gate1 = random_bf16((size_t)2 * H, 0.2, 0.5);
			void *is = dalloc(4), *halves = dalloc((size_t)R), *random = dalloc((size_t)R);
			float sc = 0.4754464328289032f;
			uint8_t *ix = malloc((size_t)R);
			int nsets = (int)(400e6 / ((double)n * 11)) + 2, s;
			set_t *sets;

			if (nsets > 16)
				nsets = 16;
			for (i = 0; i < 4; i++)
				copy_buf[i] = dalloc(n * 6);
			CU(cudaMemcpy(is, &sc, 4, cudaMemcpyHostToDevice));
			JK(jitk_configure_input_scale(rt, DP(is)));
			for (i = 0; i < R; i++)
				ix[i] = (uint8_t)((i % (R / 2)) >= R / 4); /* per batch: first half 0 */
			CU(cudaMemcpy(halves, ix, (size_t)R, cudaMemcpyHostToDevice));
			for (i = 0; i < R; i++)
				ix[i] = (uint8_t)(rnd32() & 1);
			CU(cudaMemcpy(random, ix, (size_t)R, cudaMemcpyHostToDevice));
			sets = calloc((size_t)nsets, sizeof(*sets));
			for (s = 0; s < nsets; s++) {
				set_t *t = &sets[s];

				t->a.x = DP(keep(t, random_bf16(n, 0.0, 1.0)));
				t->a.residual = DP(keep(t, random_bf16(n, 0.5, 2.0)));
				t->a.y = DP(keep(t, dalloc(n * 2)));
				t->a.q = DP(keep(t, dalloc(n)));
				t->a.s = DP(keep(t, dalloc((size_t)R * 4)));
				t->a.residual_out = DP(keep(t, dalloc(n * 2)));
				t->a.gate_out = DP(keep(t, dalloc(n * 2)));
				/* per-token modulation rows: [rows, H] */
				t->a.scale1 = DP(keep(t, random_bf16(n, 0.0, 0.2)));
				t->a.shift1 = DP(keep(t, random_bf16(n, 0.0, 0.2)));
			}
			for (k = 0; k < NCASES; k++) {
				const bench_case *c = &cases[k];
				double us, cus, bytes = (double)n * c->bytes_per + (c->quant == 2 ? 4.0 * R : 0);
				set_t *run = calloc((size_t)nsets, sizeof(*run));

				for (s = 0; s < nsets; s++) {
					jitk_norm_args *a = &run[s].a;
					const jitk_norm_args *t = &sets[s].a;

					memset(a, 0, sizeof(*a));
					a->x = t->x;
					a->y = c->y ? t->y : 0;
					a->q = c->quant ? t->q : 0;
					a->s = c->quant == 2 ? t->s : 0;
					a->input_scale = c->quant == 1 ? DP(is) : 0;
					if (c->residual) {
						a->residual = t->residual;
						a->residual_out = t->residual_out;
						a->gate = DP(gate);
					}
					a->scale = DP(scale);
					a->shift = DP(shift);
					if (c->mod == MOD_PER_TOKEN) {
						a->scale = t->scale1;
						a->shift = t->shift1;
						a->batches = R;
					}
					if (c->mod == MOD_PER_BATCH || c->mod == MOD_INDEXED) {
						a->batches = 2;
						a->rows_per_batch = R / 2;
					}
					if (c->mod == MOD_INDEXED) {
						a->scale1 = DP(scale1);
						a->shift1 = DP(shift1);
						a->index = DP(c->random_index ? random : halves);
						if (c->residual) {
							a->gate1 = DP(gate1);
							a->gate_out = t->gate_out;
						}
					}
					a->rows = R;
					a->hidden = H;
					a->eps = 1e-6f;
				}
				us = time_case(rt, c, run, nsets, reps, st, 0, 0);
				/* the same bytes copied: half read, half written */
				cus = time_case(rt, c, run, nsets, reps, st, 1, (size_t)(bytes / 2));
				printf("%-40s %6d %6d %9.2f %8.0f %6.1f%% %9.2f %7.1f%%\n", c->label, H, R, us,
				       bytes / (us * 1e-6) / 1e9, 100.0 * bytes / (us * 1e-6) / peak, cus,
				       100.0 * cus / us);
				if (k == 3)
					yq_us[0][r] = us;
				if (k == 8)
					q_us[0][r] = us;
				if (k == 10)
					yq_us[1][r] = us;
				if (k == 11)
					q_us[1][r] = us;
				free(run);
			}
			printf("outputs q vs y_q at %d rows: static %.2fx, per token %.2fx faster\n\n", R,
			       yq_us[0][r] / q_us[0][r], yq_us[1][r] / q_us[1][r]);
			for (s = 0; s < nsets; s++)
				for (i = 0; i < sets[s].n; i++)
					CU(cudaFree(sets[s].bufs[i]));
			free(sets);
			free(ix);
			for (i = 0; i < 4; i++)
				CU(cudaFree(copy_buf[i]));
			JK(jitk_unconfigure(rt, DP(is)));
			CU(cudaFree(scale));
			CU(cudaFree(shift));
			CU(cudaFree(gate));
			CU(cudaFree(scale1));
			CU(cudaFree(shift1));
			CU(cudaFree(gate1));
			CU(cudaFree(is));
			CU(cudaFree(halves));
			CU(cudaFree(random));
		}
	CU(cudaStreamDestroy(st));
	jitk_runtime_free(rt);
	return 0;
}
