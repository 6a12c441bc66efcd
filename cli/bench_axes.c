/* bench_axes.c - jitk bench --family axes: bandwidth of the norm family's
 * axes (issue 12) on the GPU, over the public API (jitk.h, jitk/norm.h)
 * and the CUDA runtime: per_batch and indexed modulation, outputs q
 * against y_q, per-token fp8 (fused and split), next to the reference's
 * shared-modulation kernels and a device-to-device copy of the same bytes.
 *
 *   jitk bench --family axes [--rows 4096,16384] [--hidden 3072] [--reps 100]
 *
 * Each case is timed as REPS launches back to back between two events,
 * rotating over input sets that together exceed the L2 several times
 * (every launch reads from DRAM and the write-back of the previous
 * launch's outputs is paid for, as in a model's step), after a warm-up.
 * Bytes are counted as the kernel contract counts them: reads of x (and
 * residual, and per-token modulation rows), writes of y (when written),
 * q, s, residual_out and gate_out; [H] and [B, H] vectors and the index
 * are left out. "% copy" is the kernel's bandwidth against a large device
 * copy's (bytes read + written); "vs copy" divides the time of a copy of
 * the same bytes, timed the same way, by the kernel's. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "bench.h"
#include "jitk.h"
#include "jitk/norm.h"

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

/* One input set. */
typedef struct {
	jitk_norm_args a;
	jitk_devptr bufs[12];
	int n;
} set_t;

static jitk_devptr keep(set_t *s, jitk_devptr p)
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
static jitk_devptr copy_buf[4];

/* Microseconds per launch: reps launches back to back, rotating sets (or
 * copies of copy_bytes, half the case's bytes, when copy is set). */
static double time_case(jitk_runtime *rt, const bench_case *c, set_t *sets, int nsets, int reps,
			cudaStream_t st, int copy, size_t copy_bytes)
{
	cudaEvent_t e0, e1;
	float ms;
	int i;

	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	for (i = 0; i < reps + 5; i++) {
		const set_t *s = &sets[i % nsets];

		if (i == 5)
			CK(cudaEventRecord(e0, st));
		if (copy)
			CK(cudaMemcpyAsync(DPTR(copy_buf[2 * (i % 2) + 1]), DPTR(copy_buf[2 * (i % 2)]),
					   copy_bytes, cudaMemcpyDeviceToDevice, st));
		else
			launch(rt, c, s, st);
	}
	CK(cudaEventRecord(e1, st));
	CK(cudaEventSynchronize(e1));
	CK(cudaEventElapsedTime(&ms, e0, e1));
	CK(cudaEventDestroy(e0));
	CK(cudaEventDestroy(e1));
	return ms * 1e3 / reps;
}

int bench_axes(const bench_options *o)
{
	static const int def_rows[] = { 4096, 16384 }, def_hidden[] = { 3072 };
	const int *rows_list = o->nrows ? o->rows : def_rows;
	const int *hidden_list = o->nhidden ? o->hidden : def_hidden;
	const int nrows = o->nrows ? o->nrows : (int)(sizeof(def_rows) / sizeof(def_rows[0]));
	const int nhidden = o->nhidden ? o->nhidden : (int)(sizeof(def_hidden) / sizeof(def_hidden[0]));
	const int reps = o->reps ? o->reps : 100;
	int i, h, r;
	size_t k;
	jitk_runtime *rt;
	cudaStream_t st;
	double peak, q_us[2][BENCH_MAX_ROWS], yq_us[2][BENCH_MAX_ROWS];

	if (bench_runtime_new(&rt, o->specs, 1))
		return 1;
	CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
	peak = bench_copy_bandwidth(2, 10, 1);
	printf("device: %s; device-to-device copy %.0f GB/s (bytes read + written); %d launches "
	       "per case, back to back\n\n", jitk_runtime_arch(rt), peak / 1e9, reps);
	printf("%-40s %6s %6s %9s %8s %7s %9s %8s\n", "kernel", "hidden", "rows", "us", "GB/s",
	       "% copy", "copy us", "vs copy");
	for (h = 0; h < nhidden; h++)
		for (r = 0; r < nrows; r++) {
			const int H = hidden_list[h], R = rows_list[r];
			const size_t n = (size_t)R * (size_t)H;
			jitk_devptr scale = bench_random_bf16((size_t)2 * H, 0.0, 0.2);
			jitk_devptr shift = bench_random_bf16((size_t)2 * H, 0.0, 0.2);
			jitk_devptr gate = bench_random_bf16((size_t)2 * H, 0.0, 0.5);
			jitk_devptr scale1 = bench_random_bf16((size_t)2 * H, 0.1, 0.3);
			jitk_devptr shift1 = bench_random_bf16((size_t)2 * H, -0.1, 0.3);
			jitk_devptr gate1 = bench_random_bf16((size_t)2 * H, 0.2, 0.5);
			jitk_devptr is = bench_dalloc(4), halves = bench_dalloc((size_t)R);
			jitk_devptr random = bench_dalloc((size_t)R);
			float sc = 0.4754464328289032f;
			uint8_t *ix = bench_xcalloc((size_t)R, 1);
			int nsets = (int)(400e6 / ((double)n * 11)) + 2, s;
			set_t *sets;

			if (nsets > 16)
				nsets = 16;
			for (i = 0; i < 4; i++)
				copy_buf[i] = bench_dalloc(n * 6);
			CK(cudaMemcpy(DPTR(is), &sc, 4, cudaMemcpyHostToDevice));
			JK(jitk_configure_input_scale(rt, is));
			for (i = 0; i < R; i++)
				ix[i] = (uint8_t)((i % (R / 2)) >= R / 4); /* per batch: first half 0 */
			CK(cudaMemcpy(DPTR(halves), ix, (size_t)R, cudaMemcpyHostToDevice));
			for (i = 0; i < R; i++)
				ix[i] = (uint8_t)(bench_rnd32() & 1);
			CK(cudaMemcpy(DPTR(random), ix, (size_t)R, cudaMemcpyHostToDevice));
			sets = bench_xcalloc((size_t)nsets, sizeof(*sets));
			for (s = 0; s < nsets; s++) {
				set_t *t = &sets[s];

				t->a.x = keep(t, bench_random_bf16(n, 0.0, 1.0));
				t->a.residual = keep(t, bench_random_bf16(n, 0.5, 2.0));
				t->a.y = keep(t, bench_dalloc(n * 2));
				t->a.q = keep(t, bench_dalloc(n));
				t->a.s = keep(t, bench_dalloc((size_t)R * 4));
				t->a.residual_out = keep(t, bench_dalloc(n * 2));
				t->a.gate_out = keep(t, bench_dalloc(n * 2));
				/* per-token modulation rows: [rows, H] */
				t->a.scale1 = keep(t, bench_random_bf16(n, 0.0, 0.2));
				t->a.shift1 = keep(t, bench_random_bf16(n, 0.0, 0.2));
			}
			for (k = 0; k < NCASES; k++) {
				const bench_case *c = &cases[k];
				double us, cus, bytes = (double)n * c->bytes_per + (c->quant == 2 ? 4.0 * R : 0);
				set_t *run = bench_xcalloc((size_t)nsets, sizeof(*run));

				for (s = 0; s < nsets; s++) {
					jitk_norm_args *a = &run[s].a;
					const jitk_norm_args *t = &sets[s].a;

					memset(a, 0, sizeof(*a));
					a->x = t->x;
					a->y = c->y ? t->y : 0;
					a->q = c->quant ? t->q : 0;
					a->s = c->quant == 2 ? t->s : 0;
					a->input_scale = c->quant == 1 ? is : 0;
					if (c->residual) {
						a->residual = t->residual;
						a->residual_out = t->residual_out;
						a->gate = gate;
					}
					a->scale = scale;
					a->shift = shift;
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
						a->scale1 = scale1;
						a->shift1 = shift1;
						a->index = c->random_index ? random : halves;
						if (c->residual) {
							a->gate1 = gate1;
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
					bench_dfree(sets[s].bufs[i]);
			free(sets);
			free(ix);
			for (i = 0; i < 4; i++)
				bench_dfree(copy_buf[i]);
			JK(jitk_unconfigure(rt, is));
			bench_dfree(scale);
			bench_dfree(shift);
			bench_dfree(gate);
			bench_dfree(scale1);
			bench_dfree(shift1);
			bench_dfree(gate1);
			bench_dfree(is);
			bench_dfree(halves);
			bench_dfree(random);
		}
	CK(cudaStreamDestroy(st));
	jitk_runtime_free(rt);
	return 0;
}
