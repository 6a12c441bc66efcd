/* bench_axes.c - jitk bench --family axes: bandwidth of the norm family's
 * axes (issue 12) on the GPU, over the public API (jitk.h: the generic
 * call, tensors by the spec's names) and the CUDA runtime: per_batch and indexed modulation, outputs q
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

/* One input set: the [rows, H] tensors, per-token modulation rows. */
typedef struct {
	jitk_devptr x, residual, y, q, s, residual_out, gate_out, token_scales, token_shifts;
	jitk_devptr bufs[12];
	int n;
} set_t;

/* What every set of a size shares: [B, H] modulation (set 0 and set 1 of
 * the indexed class), the static scale, the two index patterns. */
typedef struct {
	jitk_devptr scale, shift, gate, scale1, shift1, gate1, is, halves, random;
} shared_t;

/* One case's call on one set, its arguments by the spec's names; quant:
 * the split path's per-token quantizer after it. */
typedef struct {
	bench_args call, quant;
} run_t;

static jitk_devptr keep(set_t *s, jitk_devptr p)
{
	s->bufs[s->n++] = p;
	return p;
}

/* The arguments of case c on set t, R rows of H. */
static void case_args(run_t *r, const bench_case *c, const set_t *t, const shared_t *m, int64_t R,
		      int64_t H)
{
	const jitk_dtype bf16 = JITK_DTYPE_BF16, e4m3 = JITK_DTYPE_FP8_E4M3, f32 = JITK_DTYPE_F32,
			 u8 = JITK_DTYPE_U8;
	const int64_t rh[2] = { R, H }, bh[2] = { 2, H }, index[2] = { 2, R / 2 }, one = 1;
	const int split = c->path == PATH_SPLIT_TOKEN;
	bench_args *a = &r->call;

	a->n = r->quant.n = 0;
	if (c->y)
		bench_args_tensor(a, "y", t->y, bf16, 2, rh);
	if (c->quant && !split)
		bench_args_tensor(a, "q", t->q, e4m3, 2, rh);
	if (c->residual)
		bench_args_tensor(a, "residual_out", t->residual_out, bf16, 2, rh);
	bench_args_tensor(a, "x", t->x, bf16, 2, rh);
	if (c->residual)
		bench_args_tensor(a, "residual", t->residual, bf16, 2, rh);
	if (c->mod == MOD_SHARED) {
		if (c->residual)
			bench_args_tensor(a, "gate", m->gate, bf16, 1, &rh[1]);
		bench_args_tensor(a, "scale", m->scale, bf16, 1, &rh[1]);
		bench_args_tensor(a, "shift", m->shift, bf16, 1, &rh[1]);
	} else if (c->mod == MOD_PER_TOKEN) {
		bench_args_tensor(a, "scales", t->token_scales, bf16, 2, rh);
		bench_args_tensor(a, "shifts", t->token_shifts, bf16, 2, rh);
	} else if (c->mod == MOD_PER_BATCH) {
		if (c->residual)
			bench_args_tensor(a, "gates", m->gate, bf16, 2, bh);
		bench_args_tensor(a, "scales", m->scale, bf16, 2, bh);
		bench_args_tensor(a, "shifts", m->shift, bf16, 2, bh);
		bench_args_i64(a, "L", R / 2);
	} else { /* indexed: two sets per batch, index[b][l] picks one */
		if (c->residual) {
			bench_args_tensor(a, "gate0", m->gate, bf16, 2, bh);
			bench_args_tensor(a, "gate1", m->gate1, bf16, 2, bh);
			bench_args_tensor(a, "gate_out", t->gate_out, bf16, 2, rh);
		}
		bench_args_tensor(a, "scale0", m->scale, bf16, 2, bh);
		bench_args_tensor(a, "shift0", m->shift, bf16, 2, bh);
		bench_args_tensor(a, "scale1", m->scale1, bf16, 2, bh);
		bench_args_tensor(a, "shift1", m->shift1, bf16, 2, bh);
		bench_args_tensor(a, "index", c->random_index ? m->random : m->halves, u8, 2, index);
		bench_args_i64(a, "L", R / 2);
	}
	if (c->quant == 1)
		bench_args_tensor(a, "input_scale", m->is, f32, 1, &one);
	if (c->quant == 2 && !split)
		bench_args_tensor(a, "s", t->s, f32, 1, &rh[0]);
	bench_args_f32(a, "eps", 1e-6f);
	if (split) { /* per_token_quant_fp8 over the norm's y */
		bench_args_tensor(&r->quant, "q", t->q, e4m3, 2, rh);
		bench_args_tensor(&r->quant, "s", t->s, f32, 1, &rh[0]);
		bench_args_tensor(&r->quant, "x", t->y, bf16, 2, rh);
	}
}

static void launch(jitk_runtime *rt, const bench_case *c, run_t *r, cudaStream_t st)
{
	JK(bench_call(NULL, rt, c->symbol, JITK_CALL_STRICT, &r->call, st));
	if (c->path == PATH_SPLIT_TOKEN)
		JK(bench_call(NULL, rt, "per_token_quant_fp8", JITK_CALL_STRICT, &r->quant, st));
}

/* Two pairs of copy buffers (source, destination), big enough for the
 * largest case: the yardstick copies alternate between them. */
static jitk_devptr copy_buf[4];

/* Microseconds per launch: reps launches back to back, rotating sets (or
 * copies of copy_bytes, half the case's bytes, when copy is set). */
static double time_case(jitk_runtime *rt, const bench_case *c, run_t *runs, int nsets, int reps,
			cudaStream_t st, int copy, size_t copy_bytes)
{
	cudaEvent_t e0, e1;
	float ms;
	int i;

	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	for (i = 0; i < reps + 5; i++) {
		run_t *r = &runs[i % nsets];

		if (i == 5)
			CK(cudaEventRecord(e0, st));
		if (copy)
			CK(cudaMemcpyAsync(DPTR(copy_buf[2 * (i % 2) + 1]), DPTR(copy_buf[2 * (i % 2)]),
					   copy_bytes, cudaMemcpyDeviceToDevice, st));
		else
			launch(rt, c, r, st);
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
			shared_t m;
			float sc = 0.4754464328289032f;
			uint8_t *ix = bench_xcalloc((size_t)R, 1);
			int nsets = (int)(400e6 / ((double)n * 11)) + 2, s;
			jitk_tensor scale_t;
			const int64_t one = 1;
			set_t *sets;

			m.scale = bench_random_bf16((size_t)2 * H, 0.0, 0.2);
			m.shift = bench_random_bf16((size_t)2 * H, 0.0, 0.2);
			m.gate = bench_random_bf16((size_t)2 * H, 0.0, 0.5);
			m.scale1 = bench_random_bf16((size_t)2 * H, 0.1, 0.3);
			m.shift1 = bench_random_bf16((size_t)2 * H, -0.1, 0.3);
			m.gate1 = bench_random_bf16((size_t)2 * H, 0.2, 0.5);
			m.is = bench_dalloc(4);
			m.halves = bench_dalloc((size_t)R);
			m.random = bench_dalloc((size_t)R);
			if (nsets > 16)
				nsets = 16;
			for (i = 0; i < 4; i++)
				copy_buf[i] = bench_dalloc(n * 6);
			CK(cudaMemcpy(DPTR(m.is), &sc, 4, cudaMemcpyHostToDevice));
			JK(jitk_tensor_contiguous(&scale_t, m.is, (jitk_dtype)JITK_DTYPE_F32, 1, &one));
			JK(jitk_configure(rt, "fused_norm_scale_shift_fp8", "input_scale", &scale_t));
			for (i = 0; i < R; i++)
				ix[i] = (uint8_t)((i % (R / 2)) >= R / 4); /* per batch: first half 0 */
			CK(cudaMemcpy(DPTR(m.halves), ix, (size_t)R, cudaMemcpyHostToDevice));
			for (i = 0; i < R; i++)
				ix[i] = (uint8_t)(bench_rnd32() & 1);
			CK(cudaMemcpy(DPTR(m.random), ix, (size_t)R, cudaMemcpyHostToDevice));
			sets = bench_xcalloc((size_t)nsets, sizeof(*sets));
			for (s = 0; s < nsets; s++) {
				set_t *t = &sets[s];

				t->x = keep(t, bench_random_bf16(n, 0.0, 1.0));
				t->residual = keep(t, bench_random_bf16(n, 0.5, 2.0));
				t->y = keep(t, bench_dalloc(n * 2));
				t->q = keep(t, bench_dalloc(n));
				t->s = keep(t, bench_dalloc((size_t)R * 4));
				t->residual_out = keep(t, bench_dalloc(n * 2));
				t->gate_out = keep(t, bench_dalloc(n * 2));
				/* per-token modulation rows: [rows, H] */
				t->token_scales = keep(t, bench_random_bf16(n, 0.0, 0.2));
				t->token_shifts = keep(t, bench_random_bf16(n, 0.0, 0.2));
			}
			for (k = 0; k < NCASES; k++) {
				const bench_case *c = &cases[k];
				double us, cus, bytes = (double)n * c->bytes_per + (c->quant == 2 ? 4.0 * R : 0);
				run_t *run = bench_xcalloc((size_t)nsets, sizeof(*run));

				for (s = 0; s < nsets; s++)
					case_args(&run[s], c, &sets[s], &m, R, H);
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
			JK(jitk_unconfigure(rt, m.is));
			bench_dfree(m.scale);
			bench_dfree(m.shift);
			bench_dfree(m.gate);
			bench_dfree(m.scale1);
			bench_dfree(m.shift1);
			bench_dfree(m.gate1);
			bench_dfree(m.is);
			bench_dfree(m.halves);
			bench_dfree(m.random);
		}
	CK(cudaStreamDestroy(st));
	jitk_runtime_free(rt);
	return 0;
}
