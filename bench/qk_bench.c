/* qk_bench.c - time QK-RMSNorm + RoPE at Qwen-Image's shape (24 + 24 heads
 * of 128, R = 128, interleaved pairs, one cos/sin row per token, weights):
 * the fused kernel in place, the split path (rms_norm_heads, then rope) and
 * the out-of-place form writing heads-first [24, N, 128] q, k and v, at
 * N = 4096, 16384 and 4096 + 512 (the image and the text stream of a
 * joint block: two calls), against a device-to-device copy measured in the
 * same run. Built by ninja as build/qk_bench (jitk.h and the CUDA runtime).
 *
 * Timing: CUDA events around each call, median of --reps calls, each after
 * 256 MiB were read through the L2 on the same stream (the GPU is busy
 * while the host enqueues). Bytes as the contract counts them: q and k read
 * and written, 4 (Hq + Hk) D per token, plus the token's cos/sin row, 4 R
 * (and, out of place, v read and written: 4 Hk D more). "% of copy": the
 * kernel's bytes per second over the copy's (bytes read + written).
 *
 *   build/qk_bench [--reps N] [--specs DIR] [--heads HQ,HK]
 */
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <nvrtc.h>

#include "jitk.h"

#define CU(call)                                                              \
	do {                                                                  \
		cudaError_t r_ = (call);                                      \
		if (r_ != cudaSuccess) {                                      \
			fprintf(stderr, "%s: %s\n", #call, cudaGetErrorName(r_)); \
			exit(1);                                              \
		}                                                             \
	} while (0)

#define FLUSH_BYTES (256u << 20)
#define D 128
#define R 128

static cudaStream_t stream;
static cudaKernel_t flush_fn;
static void *flush_buf, *flush_sink;
static int reps = 200;

/* A kernel that reads every byte of a buffer (and writes one word), from
 * NVRTC: it leaves the L2 holding that buffer, clean. */
static void flush_init(void)
{
	static const char src[] =
		"extern \"C\" __global__ void flush(const uint4 *p, unsigned long long n, unsigned *sink) {\n"
		"  unsigned x = 0;\n"
		"  for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
		"       i += (unsigned long long)gridDim.x * blockDim.x) {\n"
		"    uint4 v = __ldcg(p + i); x ^= v.x ^ v.y ^ v.z ^ v.w; }\n"
		"  if (x == 0x12345678u) *sink = x;\n}\n";
	int dev, major, minor;
	char arch[48];
	const char *opts[1] = { arch };
	nvrtcProgram prog;
	size_t size;
	char *cubin;
	cudaLibrary_t lib;

	CU(cudaGetDevice(&dev));
	CU(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
	CU(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
	snprintf(arch, sizeof(arch), "--gpu-architecture=sm_%d%d", major, minor);
	if (nvrtcCreateProgram(&prog, src, "flush.cu", 0, NULL, NULL) ||
	    nvrtcCompileProgram(prog, 1, opts) || nvrtcGetCUBINSize(prog, &size)) {
		fprintf(stderr, "qk_bench: NVRTC could not build the flush kernel\n");
		exit(1);
	}
	cubin = malloc(size);
	nvrtcGetCUBIN(prog, cubin);
	nvrtcDestroyProgram(&prog);
	CU(cudaLibraryLoadData(&lib, cubin, NULL, NULL, 0, NULL, NULL, 0));
	CU(cudaLibraryGetKernel(&flush_fn, lib, "flush"));
	free(cubin);
	CU(cudaMalloc(&flush_buf, FLUSH_BYTES));
	CU(cudaMemset(flush_buf, 1, FLUSH_BYTES));
	CU(cudaMalloc(&flush_sink, 4));
}

static void flush(void)
{
	unsigned long long n = FLUSH_BYTES / 16;
	void *args[3] = { &flush_buf, &n, &flush_sink };

	CU(cudaLaunchKernel((const void *)flush_fn, (dim3){ 132 * 8, 1, 1 }, (dim3){ 256, 1, 1 }, args, 0,
			     stream));
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return x < y ? -1 : x > y;
}

/* Median microseconds of one run of fn(arg), L2 flushed before each. */
static double time_us(void (*fn)(void *), void *arg)
{
	cudaEvent_t a, b;
	float *ms = malloc(sizeof(float) * (size_t)reps), med;
	int i;

	CU(cudaEventCreate(&a));
	CU(cudaEventCreate(&b));
	for (i = 0; i < 3; i++) /* warm-up: resolve, first launches */
		fn(arg);
	for (i = 0; i < reps; i++) {
		flush();
		CU(cudaEventRecord(a, stream));
		fn(arg);
		CU(cudaEventRecord(b, stream));
		CU(cudaEventSynchronize(b));
		CU(cudaEventElapsedTime(&ms[i], a, b));
	}
	qsort(ms, (size_t)reps, sizeof(float), cmp_float);
	med = ms[reps / 2];
	free(ms);
	CU(cudaEventDestroy(a));
	CU(cudaEventDestroy(b));
	return med * 1000.0;
}

/* ------------------------------------------------------------- the ops */

typedef struct {
	void *src, *dst;
	size_t bytes;
} copy_job;

static void run_copy(void *arg)
{
	copy_job *c = arg;

	CU(cudaMemcpyAsync(c->dst, c->src, c->bytes, cudaMemcpyDeviceToDevice, stream));
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

static void must(int rc, const char *what)
{
	if (rc) {
		fprintf(stderr, "qk_bench: %s: %s\n", what, jitk_error_last()->message);
		exit(1);
	}
}

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

static void run_fused(void *arg)
{
	op_job *j = arg;
	jitk_arg a[8];
	int i;

	for (i = 0; i < j->nstreams; i++)
		must(jitk_op_call(NULL, j->fused, JITK_CALL_STRICT, a, in_place_args(a, &j->s[i], 1, 1),
				  stream), "fused");
}

static void run_split(void *arg)
{
	op_job *j = arg;
	jitk_arg a[8];
	int i;

	for (i = 0; i < j->nstreams; i++) {
		must(jitk_op_call(NULL, j->norm, JITK_CALL_STRICT, a, in_place_args(a, &j->s[i], 1, 0),
				  stream), "rms_norm_heads");
		must(jitk_op_call(NULL, j->rope, JITK_CALL_STRICT, a, in_place_args(a, &j->s[i], 0, 1),
				  stream), "rope");
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
		must(jitk_op_call(NULL, j->out, JITK_CALL_STRICT, a, n, stream), "out of place");
	}
}

static void *alloc_filled(size_t bytes, unsigned short pattern)
{
	unsigned short *h = malloc(bytes);
	void *d;
	size_t i;

	for (i = 0; i < bytes / 2; i++)
		h[i] = (unsigned short)(pattern + (i * 7919u) % 64u);
	CU(cudaMalloc(&d, bytes));
	CU(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
	free(h);
	return d;
}

static void heads(jitk_tensor *t, void *data, int64_t n, int64_t h, int64_t ts, int64_t hs)
{
	const jitk_dtype bf16 = JITK_DTYPE_BF16;
	const int64_t shape[3] = { n, h, D };

	jitk_tensor_contiguous(t, (jitk_devptr)(uintptr_t)data, bf16, 3, shape);
	t->strides[0] = ts;
	t->strides[1] = hs;
}

/* Stream s of n tokens; its outputs at token offset `offset` of joint
 * heads-first buffers of `total` tokens. */
static void stream_make(stream_args *s, int64_t n, int64_t hq, int64_t hk, void *q_out, void *k_out,
			void *v_out, int64_t offset, int64_t total)
{
	const jitk_dtype bf16 = JITK_DTYPE_BF16, f32 = JITK_DTYPE_F32;
	const int64_t row = (hq + 2 * hk) * D, wq = D, tshape[2] = { n, R };
	char *qkv = alloc_filled((size_t)(n * row) * 2, 0x3f80);
	float *h = malloc((size_t)(n * R) * 4);
	void *cs;
	int64_t i;

	s->n = n;
	s->hq = hq;
	s->hk = hk;
	heads(&s->q, qkv, n, hq, row, D);
	heads(&s->k, qkv + hq * D * 2, n, hk, row, D);
	heads(&s->v, qkv + (hq + hk) * D * 2, n, hk, row, D);
	jitk_tensor_contiguous(&s->qw, (jitk_devptr)(uintptr_t)alloc_filled(D * 2, 0x3f80), bf16, 1, &wq);
	jitk_tensor_contiguous(&s->kw, (jitk_devptr)(uintptr_t)alloc_filled(D * 2, 0x3f80), bf16, 1, &wq);
	for (i = 0; i < n * R; i++)
		h[i] = (float)((i % R) < R / 2 ? 0.6 : 0.8);
	CU(cudaMalloc(&cs, (size_t)(n * R) * 4));
	CU(cudaMemcpy(cs, h, (size_t)(n * R) * 4, cudaMemcpyHostToDevice));
	free(h);
	jitk_tensor_contiguous(&s->cs, (jitk_devptr)(uintptr_t)cs, f32, 2, tshape);
	heads(&s->qo, (char *)q_out + offset * D * 2, n, hq, D, total * D);
	heads(&s->ko, (char *)k_out + offset * D * 2, n, hk, D, total * D);
	heads(&s->vo, (char *)v_out + offset * D * 2, n, hk, D, total * D);
}

static void stream_free(stream_args *s)
{
	CU(cudaFree((void *)(uintptr_t)s->q.data));
	CU(cudaFree((void *)(uintptr_t)s->qw.data));
	CU(cudaFree((void *)(uintptr_t)s->kw.data));
	CU(cudaFree((void *)(uintptr_t)s->cs.data));
}

int main(int argc, char **argv)
{
	jitk_runtime_options o = JITK_RUNTIME_OPTIONS_INIT;
	jitk_compiler_options co = JITK_COMPILER_OPTIONS_INIT;
	jitk_runtime *rt;
	static const struct {
		const char *name;
		int64_t n[2];
	} cases[] = { { "4096", { 4096, 0 } }, { "16384", { 16384, 0 } }, { "4096+512", { 4096, 512 } } };
	int64_t hq = 24, hk = 24;
	copy_job cj;
	double copy_us, copy_bw;
	size_t c;
	int i;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--reps") && i + 1 < argc)
			reps = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--specs") && i + 1 < argc)
			co.specs = argv[++i];
		else if (!strcmp(argv[i], "--heads") && i + 1 < argc)
			sscanf(argv[++i], "%lld,%lld", (long long *)&hq, (long long *)&hk);
		else {
			fprintf(stderr, "usage: %s [--reps N] [--specs DIR] [--heads HQ,HK]\n", argv[0]);
			return 2;
		}
	}
	if (reps < 1)
		reps = 1;
	CU(cudaFree(NULL)); /* the primary context, current */
	CU(cudaStreamCreate(&stream));
	o.compiler = &co;
	must(jitk_runtime_new(&rt, &o), "runtime");
	flush_init();

	/* the copy: 1 GiB read + 1 GiB written */
	cj.bytes = (size_t)1 << 30;
	CU(cudaMalloc(&cj.src, cj.bytes));
	CU(cudaMalloc(&cj.dst, cj.bytes));
	CU(cudaMemset(cj.src, 0, cj.bytes));
	copy_us = time_us(run_copy, &cj);
	copy_bw = 2.0 * (double)cj.bytes / (copy_us * 1e-6);
	{
		struct cudaDeviceProp prop;
		int dev;

		CU(cudaGetDevice(&dev));
		CU(cudaGetDeviceProperties(&prop, dev));
		printf("# %s (%s), %lld + %lld heads of %d, R %d, interleaved, tokens as positions, weights; "
		       "median of %d, L2 flushed (256 MiB read) before each\n",
		       prop.name, jitk_runtime_arch(rt), (long long)hq, (long long)hk, D, R, reps);
	}
	printf("# device-to-device copy: %.2f TB/s (1 GiB in %.1f us)\n", copy_bw / 1e12, copy_us);
	printf("%-10s %8s %10s %10s %9s %10s %9s %11s %10s %9s\n", "N", "MB", "fused us", "TB/s", "% copy",
	       "split us", "speedup", "MB (out)", "out us", "% copy");
	for (c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		op_job j;
		int64_t total = cases[c].n[0] + cases[c].n[1];
		size_t outb = (size_t)(hq * total * D) * 2, outkb = (size_t)(hk * total * D) * 2;
		void *qo, *ko, *vo;
		double bytes = 0, outbytes = 0, fused, split, out;

		memset(&j, 0, sizeof(j));
		must(jitk_op_get(&j.fused, rt, "qk_norm_rope"), "qk_norm_rope");
		must(jitk_op_get(&j.norm, rt, "rms_norm_heads[span=head,weight=true]"), "rms_norm_heads");
		must(jitk_op_get(&j.rope, rt, "rope[style=interleaved,positions=none]"), "rope");
		must(jitk_op_get(&j.out, rt, "qk_norm_rope_out"), "qk_norm_rope_out");
		CU(cudaMalloc(&qo, outb));
		CU(cudaMalloc(&ko, outkb));
		CU(cudaMalloc(&vo, outkb));
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
		CU(cudaFree(qo));
		CU(cudaFree(ko));
		CU(cudaFree(vo));
	}
	CU(cudaFree(cj.src));
	CU(cudaFree(cj.dst));
	jitk_runtime_free(rt);
	return 0;
}
