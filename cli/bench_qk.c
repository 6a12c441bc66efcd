/* bench_qk.c - jitk bench --family qk: time QK-RMSNorm + RoPE at
 * Qwen-Image's shape (24 + 24 heads of 128, R = 128, interleaved pairs,
 * one cos/sin row per token, weights): the fused kernel in place, the
 * split path (rms_norm_heads, then rope) and the out-of-place form writing
 * heads-first [24, N, 128] q, k and v, at N = 4096, 16384 and 4096 + 512
 * (the image and the text stream of a joint block: two calls), against a
 * device-to-device copy measured in the same run (jitk.h and the CUDA
 * runtime).
 *
 * Timing: CUDA events around each call, median of --reps calls, each after
 * 256 MiB were read through the L2 on the same stream (the GPU is busy
 * while the host enqueues). Bytes as the contract counts them: q and k read
 * and written, 4 (Hq + Hk) D per token, plus the token's cos/sin row, 4 R
 * (and, out of place, v read and written: 4 Hk D more). "% of copy": the
 * kernel's bytes per second over the copy's (bytes read + written).
 *
 *   jitk bench --family qk [--reps N] [--specs DIR] [--heads HQ,HK]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "bench.h"
#include "jitk.h"

#define D 128
#define R 128

static cudaStream_t stream;
static int reps;

static double time_us(void (*fn)(void *), void *arg)
{
	return bench_time_us(fn, arg, reps, stream);
}

/* ------------------------------------------------------------- the ops */

typedef struct {
	jitk_devptr src, dst;
	size_t bytes;
} copy_job;

static void run_copy(void *arg)
{
	copy_job *c = arg;

	CK(cudaMemcpyAsync(DPTR(c->dst), DPTR(c->src), c->bytes, cudaMemcpyDeviceToDevice, stream));
}

/* One stream (image or text) of a block: its packed QKV, weights, table,
 * out-of-place outputs (views at a token offset of a joint layout). */
typedef struct {
	int64_t n, hq, hk;
	jitk_tensor q, k, v, qw, kw, cs, qo, ko, vo;
} stream_args;

typedef struct {
	jitk_op *fused, *norm, *rope, *out;
	stream_args s[2];
	int nstreams;
} op_job;

static size_t in_place_args(jitk_arg *a, stream_args *s, int weights, int table)
{
	size_t n = 0;

	a[n++] = (jitk_arg){ "q", JITK_ARG_TENSOR, { .tensor = &s->q } };
	a[n++] = (jitk_arg){ "k", JITK_ARG_TENSOR, { .tensor = &s->k } };
	if (weights) {
		a[n++] = (jitk_arg){ "q_weight", JITK_ARG_TENSOR, { .tensor = &s->qw } };
		a[n++] = (jitk_arg){ "k_weight", JITK_ARG_TENSOR, { .tensor = &s->kw } };
	}
	if (table)
		a[n++] = (jitk_arg){ "cos_sin", JITK_ARG_TENSOR, { .tensor = &s->cs } };
	return n;
}

/* One in-place op on stream s: q and k, and the weights, the table. */
static void call_in_place(jitk_op *op, stream_args *s, int weights, int table)
{
	jitk_arg a[8];

	JK(jitk_op_call(NULL, op, JITK_CALL_STRICT, a, in_place_args(a, s, weights, table), stream));
}

static void run_fused(void *arg)
{
	op_job *j = arg;
	int i;

	for (i = 0; i < j->nstreams; i++)
		call_in_place(j->fused, &j->s[i], 1, 1);
}

static void run_split(void *arg)
{
	op_job *j = arg;
	int i;

	for (i = 0; i < j->nstreams; i++) {
		call_in_place(j->norm, &j->s[i], 1, 0);
		call_in_place(j->rope, &j->s[i], 0, 1);
	}
}

static void run_out(void *arg)
{
	op_job *j = arg;
	jitk_arg a[12];
	int i;

	for (i = 0; i < j->nstreams; i++) {
		stream_args *s = &j->s[i];
		size_t n = 0;

		a[n++] = (jitk_arg){ "q_out", JITK_ARG_TENSOR, { .tensor = &s->qo } };
		a[n++] = (jitk_arg){ "k_out", JITK_ARG_TENSOR, { .tensor = &s->ko } };
		a[n++] = (jitk_arg){ "v_out", JITK_ARG_TENSOR, { .tensor = &s->vo } };
		a[n++] = (jitk_arg){ "v", JITK_ARG_TENSOR, { .tensor = &s->v } };
		n += in_place_args(a + n, s, 1, 1);
		JK(jitk_op_call(NULL, j->out, JITK_CALL_STRICT, a, n, stream));
	}
}

static jitk_devptr alloc_filled(size_t bytes, unsigned short pattern)
{
	unsigned short *h = bench_xcalloc(bytes / 2, 2);
	jitk_devptr d;
	size_t i;

	for (i = 0; i < bytes / 2; i++)
		h[i] = (unsigned short)(pattern + (i * 7919u) % 64u);
	d = bench_dalloc(bytes);
	CK(cudaMemcpy(DPTR(d), h, bytes, cudaMemcpyHostToDevice));
	free(h);
	return d;
}

static void heads(jitk_tensor *t, jitk_devptr data, int64_t n, int64_t h, int64_t ts, int64_t hs)
{
	const jitk_dtype bf16 = JITK_DTYPE_BF16;
	const int64_t shape[3] = { n, h, D };

	JK(jitk_tensor_contiguous(t, data, bf16, 3, shape));
	t->strides[0] = ts;
	t->strides[1] = hs;
}

/* Stream s of n tokens; its outputs at token offset `offset` of joint
 * heads-first buffers of `total` tokens. */
static void stream_make(stream_args *s, int64_t n, int64_t hq, int64_t hk, jitk_devptr q_out,
			jitk_devptr k_out, jitk_devptr v_out, int64_t offset, int64_t total)
{
	const jitk_dtype bf16 = JITK_DTYPE_BF16, f32 = JITK_DTYPE_F32;
	const int64_t row = (hq + 2 * hk) * D, wq = D, tshape[2] = { n, R };
	jitk_devptr qkv = alloc_filled((size_t)(n * row) * 2, 0x3f80), cs;
	float *h = bench_xcalloc((size_t)(n * R), 4);
	int64_t i;

	s->n = n;
	s->hq = hq;
	s->hk = hk;
	heads(&s->q, qkv, n, hq, row, D);
	heads(&s->k, qkv + (jitk_devptr)(hq * D * 2), n, hk, row, D);
	heads(&s->v, qkv + (jitk_devptr)((hq + hk) * D * 2), n, hk, row, D);
	JK(jitk_tensor_contiguous(&s->qw, alloc_filled(D * 2, 0x3f80), bf16, 1, &wq));
	JK(jitk_tensor_contiguous(&s->kw, alloc_filled(D * 2, 0x3f80), bf16, 1, &wq));
	for (i = 0; i < n * R; i++)
		h[i] = (float)((i % R) < R / 2 ? 0.6 : 0.8);
	cs = bench_dalloc((size_t)(n * R) * 4);
	CK(cudaMemcpy(DPTR(cs), h, (size_t)(n * R) * 4, cudaMemcpyHostToDevice));
	free(h);
	JK(jitk_tensor_contiguous(&s->cs, cs, f32, 2, tshape));
	heads(&s->qo, q_out + (jitk_devptr)(offset * D * 2), n, hq, D, total * D);
	heads(&s->ko, k_out + (jitk_devptr)(offset * D * 2), n, hk, D, total * D);
	heads(&s->vo, v_out + (jitk_devptr)(offset * D * 2), n, hk, D, total * D);
}

static void stream_free(stream_args *s)
{
	bench_dfree(s->q.data);
	bench_dfree(s->qw.data);
	bench_dfree(s->kw.data);
	bench_dfree(s->cs.data);
}

int bench_qk(const bench_options *o)
{
	jitk_runtime *rt;
	static const struct {
		const char *name;
		int64_t n[2];
	} cases[] = { { "4096", { 4096, 0 } }, { "16384", { 16384, 0 } }, { "4096+512", { 4096, 512 } } };
	const int64_t hq = o->nheads ? o->heads[0] : 24, hk = o->nheads ? o->heads[1] : 24;
	struct cudaDeviceProp prop;
	copy_job cj;
	double copy_us, copy_bw;
	size_t c;
	int i;

	reps = o->reps ? o->reps : 200;
	if (bench_runtime_new(&rt, o->specs, 0))
		return 1;
	CK(cudaStreamCreate(&stream));
	bench_flush_init();

	/* the copy: 1 GiB read + 1 GiB written */
	cj.bytes = (size_t)1 << 30;
	cj.src = bench_dalloc(cj.bytes);
	cj.dst = bench_dalloc(cj.bytes);
	CK(cudaMemset(DPTR(cj.src), 0, cj.bytes));
	copy_us = time_us(run_copy, &cj);
	copy_bw = 2.0 * (double)cj.bytes / (copy_us * 1e-6);
	CK(cudaGetDeviceProperties(&prop, BENCH_DEVICE));
	printf("# %s (%s), %lld + %lld heads of %d, R %d, interleaved, tokens as positions, weights; "
	       "median of %d, L2 flushed (256 MiB read) before each\n",
	       prop.name, jitk_runtime_arch(rt), (long long)hq, (long long)hk, D, R, reps);
	printf("# device-to-device copy: %.2f TB/s (1 GiB in %.1f us)\n", copy_bw / 1e12, copy_us);
	printf("%-10s %8s %10s %10s %9s %10s %9s %11s %10s %9s\n", "N", "MB", "fused us", "TB/s", "% copy",
	       "split us", "speedup", "MB (out)", "out us", "% copy");
	for (c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		op_job j;
		int64_t total = cases[c].n[0] + cases[c].n[1];
		size_t outb = (size_t)(hq * total * D) * 2, outkb = (size_t)(hk * total * D) * 2;
		jitk_devptr qo, ko, vo;
		double bytes = 0, outbytes = 0, fused, split, out;

		memset(&j, 0, sizeof(j));
		JK(jitk_op_get(&j.fused, rt, "qk_norm_rope"));
		JK(jitk_op_get(&j.norm, rt, "rms_norm_heads[span=head,weight=true]"));
		JK(jitk_op_get(&j.rope, rt, "rope[style=interleaved,positions=none]"));
		JK(jitk_op_get(&j.out, rt, "qk_norm_rope_out"));
		qo = bench_dalloc(outb);
		ko = bench_dalloc(outkb);
		vo = bench_dalloc(outkb);
		/* the joint layout: text tokens first, then the image's */
		j.nstreams = cases[c].n[1] ? 2 : 1;
		stream_make(&j.s[0], cases[c].n[0], hq, hk, qo, ko, vo, cases[c].n[1], total);
		if (cases[c].n[1])
			stream_make(&j.s[1], cases[c].n[1], hq, hk, qo, ko, vo, 0, total);
		for (i = 0; i < j.nstreams; i++) {
			bytes += (double)j.s[i].n * (4.0 * (double)(hq + hk) * D + 4.0 * R);
			outbytes += (double)j.s[i].n * (4.0 * (double)(hq + 2 * hk) * D + 4.0 * R);
		}
		fused = time_us(run_fused, &j);
		split = time_us(run_split, &j);
		out = time_us(run_out, &j);
		printf("%-10s %8.1f %10.1f %10.2f %8.1f%% %10.1f %8.2fx %11.1f %10.1f %8.1f%%\n", cases[c].name,
		       bytes / 1e6, fused, bytes / (fused * 1e-6) / 1e12, 100.0 * bytes / (fused * 1e-6) / copy_bw,
		       split, split / fused, outbytes / 1e6, out,
		       100.0 * outbytes / (out * 1e-6) / copy_bw);
		for (i = 0; i < j.nstreams; i++)
			stream_free(&j.s[i]);
		bench_dfree(qo);
		bench_dfree(ko);
		bench_dfree(vo);
	}
	bench_dfree(cj.src);
	bench_dfree(cj.dst);
	CK(cudaStreamDestroy(stream));
	jitk_runtime_free(rt);
	return 0;
}
