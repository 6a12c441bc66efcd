/* qwen_block.c - the two norm sites of one Qwen-Image transformer block,
 * through jitk, the way an inference engine would call them.
 *
 *   site 1: y1 = LayerNorm(x) * (1 + scale1) + shift1      -> fp8 q1
 *   site 2: r  = residual + gate * x;  y2 = LayerNorm(r) * (1 + scale2)
 *           + shift2                                        -> fp8 q2
 *
 * The typed calls come from the family's spec (jitk/norm_scale_shift.h,
 * written by `jitk header norm_scale_shift` at build time). Their "auto"
 * form runs the fused kernel where the spec's gates and the guards allow
 * it, and otherwise the split path (norm, then quantizer) with the same
 * bytes out. Built by ninja as build/qwen_block. Run it twice to see a
 * cold start (compile) and a warm one (disk cache). */
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "jitk.h"
#include "jitk/norm_scale_shift.h"

#define ROWS 4096 /* image tokens at 1024x1024 */
#define HIDDEN 3072

#define CU(call)                                                              \
	do {                                                                  \
		cudaError_t r_ = (call);                                      \
		if (r_ != cudaSuccess) {                                      \
			fprintf(stderr, "%s: %s\n", #call, cudaGetErrorName(r_)); \
			exit(1);                                              \
		}                                                             \
	} while (0)

#define JITK(call)                                                            \
	do {                                                                  \
		int r_ = (call);                                              \
		if (r_ < 0) {                                                 \
			fprintf(stderr, "%s: %s\n", #call,                    \
				jitk_error_last()->message);                  \
			exit(1);                                              \
		}                                                             \
	} while (0)

static void log_line(void *payload, jitk_log_level level, const char *msg)
{
	(void)payload;
	fprintf(stderr, "jitk[%d]: %s\n", (int)level, msg);
}

/* A device buffer, as the integer the typed calls take. */
static jitk_devptr alloc(size_t bytes)
{
	void *p = NULL;

	CU(cudaMalloc(&p, bytes));
	return (jitk_devptr)(uintptr_t)p;
}

static jitk_devptr filled(size_t count, unsigned short bf16)
{
	unsigned short *h = malloc(count * 2);
	jitk_devptr d = alloc(count * 2);
	size_t i;

	for (i = 0; i < count; i++) /* a little variation per element */
		h[i] = (unsigned short)(bf16 + (i * 7919u) % 64u);
	CU(cudaMemcpy((void *)(uintptr_t)d, h, count * 2, cudaMemcpyHostToDevice));
	free(h);
	return d;
}

static void print_stats(jitk_runtime *rt, const char *name)
{
	jitk_stats s = JITK_STATS_INIT;

	if (jitk_stats_get(&s, rt, name) || (!s.loads && !s.launches))
		return;
	printf("  %-40s compiles %llu, cache hits %llu, loads %llu, launches %llu, "
	       "compile %.1f ms, resolve %.2f ms\n",
	       name, (unsigned long long)s.compiles, (unsigned long long)s.cache_hits,
	       (unsigned long long)s.loads, (unsigned long long)s.launches, s.compile_ms,
	       s.load_ms);
}

int main(void)
{
	jitk_runtime_options opts = JITK_RUNTIME_OPTIONS_INIT;
	jitk_compiler_options copts = JITK_COMPILER_OPTIONS_INIT;
	jitk_runtime *rt;
	jitk_norm_scale_shift_args site1, site2;
	jitk_devptr x, residual, gate, scale1, shift1, scale2, shift2;
	jitk_devptr y1, q1, y2, q2, rout, s1, s2;
	const float in_scale1 = 0.05f, in_scale2 = 0.04f;
	int fused1 = 0, fused2 = 0, step;
	size_t n = (size_t)ROWS * HIDDEN;

	copts.log = log_line;
	opts.compiler = &copts;
	if (jitk_runtime_new(&rt, &opts)) {
		fprintf(stderr, "no runtime: %s\n", jitk_error_last()->message);
		return 1;
	}
	printf("device architecture: %s\n", jitk_runtime_arch(rt));

	/* Activations and per-layer modulation, bf16 around 1.0 (0x3f80) and
	 * 0.0078125 (0x3c00); a model fills these from its weights and the
	 * timestep embedding. cudaMalloc makes the primary context that jitk
	 * also uses. */
	x = filled(n, 0x3f80);
	residual = filled(n, 0x3c00);
	gate = filled(HIDDEN, 0x3c00);
	scale1 = filled(HIDDEN, 0x3c00);
	shift1 = filled(HIDDEN, 0x3c00);
	scale2 = filled(HIDDEN, 0x3c00);
	shift2 = filled(HIDDEN, 0x3c00);
	y1 = alloc(n * 2);
	y2 = alloc(n * 2);
	rout = alloc(n * 2);
	q1 = alloc(n);
	q2 = alloc(n);
	s1 = alloc(4);
	s2 = alloc(4);
	CU(cudaMemcpy((void *)(uintptr_t)s1, &in_scale1, 4, cudaMemcpyHostToDevice));
	CU(cudaMemcpy((void *)(uintptr_t)s2, &in_scale2, 4, cudaMemcpyHostToDevice));

	/* Model load: validate the static input scales once (this reads the
	 * device), and resolve the kernels before any CUDA graph capture. */
	JITK(jitk_norm_scale_shift_configure_input_scale(rt, s1));
	JITK(jitk_norm_scale_shift_configure_input_scale(rt, s2));

	jitk_norm_scale_shift_args_init(&site1);
	site1.x = x;
	site1.scale = scale1;
	site1.shift = shift1;
	site1.y = y1;
	site1.q = q1;
	site1.input_scale = s1;
	site1.rows = ROWS;
	site1.hidden = HIDDEN;
	site1.eps = 1e-6f;

	site2 = site1;
	site2.residual = residual;
	site2.gate = gate;
	site2.residual_out = rout;
	site2.scale = scale2;
	site2.shift = shift2;
	site2.y = y2;
	site2.q = q2;
	site2.input_scale = s2;

	for (step = 0; step < 3; step++) {
		JITK(jitk_auto_fused_norm_scale_shift_fp8(&fused1, rt, &site1, NULL));
		JITK(jitk_auto_fused_scale_residual_norm_scale_shift_fp8(&fused2, rt, &site2, NULL));
	}
	CU(cudaDeviceSynchronize());
	{
		unsigned char q[4];
		unsigned short y[2];

		CU(cudaMemcpy(q, (void *)(uintptr_t)q1, sizeof(q), cudaMemcpyDeviceToHost));
		CU(cudaMemcpy(y, (void *)(uintptr_t)y2, sizeof(y), cudaMemcpyDeviceToHost));
		printf("site 1 (norm + modulate + fp8): %s path, q[0..3] = %02x %02x %02x %02x\n",
		       fused1 ? "fused" : "split", q[0], q[1], q[2], q[3]);
		printf("site 2 (gated residual + norm + modulate + fp8): %s path, y[0] = 0x%04x\n",
		       fused2 ? "fused" : "split", y[0]);
	}
	printf("stats:\n");
	print_stats(rt, "fused_norm_scale_shift_fp8");
	print_stats(rt, "fused_scale_residual_norm_scale_shift_fp8");
	print_stats(rt, "fused_norm_scale_shift");
	print_stats(rt, "fused_scale_residual_norm_scale_shift");
	print_stats(rt, "static_quant_fp8");

	jitk_runtime_free(rt);
	return 0;
}

