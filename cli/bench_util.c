/* bench_util.c - what the families of jitk bench share (bench.h): device
 * memory, random data, the median, the copy bandwidth, the L2 flush, the
 * runtime. Over the public API and the CUDA runtime, like the families. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "bench.h"
#include "jitk.h"

int bench_runtime_new(jitk_runtime **out, const char *specs, int programmatic)
{
	jitk_runtime_options o = JITK_RUNTIME_OPTIONS_INIT;
	jitk_compiler_options co = JITK_COMPILER_OPTIONS_INIT;
	int rc;

	co.specs = specs;
	o.device = BENCH_DEVICE;
	o.compiler = &co;
	o.programmatic = programmatic;
	rc = jitk_runtime_new(out, &o);
	if (rc) {
		fprintf(stderr, "jitk bench: %s%s\n", rc == JITK_ENODEV ? "needs a GPU: " : "",
			jitk_error_last()->message);
		return 1;
	}
	CK(cudaSetDevice(BENCH_DEVICE));
	return 0;
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return x < y ? -1 : x > y;
}

double bench_time_us(void (*fn)(void *), void *arg, int reps, cudaStream_t s)
{
	cudaEvent_t a, b;
	float *ms = bench_xcalloc((size_t)reps, sizeof(float)), med;
	int i;

	CK(cudaEventCreate(&a));
	CK(cudaEventCreate(&b));
	for (i = 0; i < 3; i++) /* warm-up: resolve, first launches */
		fn(arg);
	for (i = 0; i < reps; i++) {
		bench_flush_l2(BENCH_FLUSH_READ, i, s);
		CK(cudaEventRecord(a, s));
		fn(arg);
		CK(cudaEventRecord(b, s));
		CK(cudaEventSynchronize(b));
		CK(cudaEventElapsedTime(&ms[i], a, b));
	}
	med = bench_median(ms, reps);
	free(ms);
	CK(cudaEventDestroy(a));
	CK(cudaEventDestroy(b));
	return med * 1000.0;
}

float bench_median(float *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_float);
	return n % 2 ? v[n / 2] : 0.5f * (v[n / 2 - 1] + v[n / 2]);
}

void *bench_xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);

	if (!p) {
		fprintf(stderr, "jitk bench: out of memory\n");
		exit(1);
	}
	return p;
}

static jitk_arg *next_arg(bench_args *c, const char *name, jitk_arg_type type)
{
	jitk_arg *a;

	if (c->n == BENCH_MAX_ARGS) {
		fprintf(stderr, "jitk bench: more than %d arguments\n", BENCH_MAX_ARGS);
		exit(1);
	}
	a = &c->a[c->n++];
	a->name = name;
	a->type = type;
	return a;
}

void bench_args_tensor(bench_args *c, const char *name, jitk_devptr p, jitk_dtype dtype,
		       int32_t ndim, const int64_t *shape)
{
	jitk_arg *a = next_arg(c, name, JITK_ARG_TENSOR);

	JK(jitk_tensor_contiguous(&c->t[a - c->a], p, dtype, ndim, shape));
	a->v.tensor = &c->t[a - c->a];
}

void bench_args_i64(bench_args *c, const char *name, int64_t v)
{
	next_arg(c, name, JITK_ARG_I64)->v.i64 = v;
}

void bench_args_f32(bench_args *c, const char *name, float v)
{
	next_arg(c, name, JITK_ARG_F32)->v.f32 = v;
}

int bench_call(jitk_call_info *info, jitk_runtime *rt, const char *selector, jitk_call_mode mode,
	       bench_args *c, cudaStream_t s)
{
	size_t i;

	for (i = 0; i < c->n; i++)
		if (c->a[i].type == JITK_ARG_TENSOR)
			c->a[i].v.tensor = &c->t[i];
	return jitk_call(info, rt, selector, mode, c->a, c->n, (jitk_stream)s);
}

static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint64_t rnd_next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

uint32_t bench_rnd32(void)
{
	return (uint32_t)(rnd_next() >> 32);
}

static uint16_t rnd_bf16(double mean, double sd)
{
	/* sum of 4 uniforms: near-normal, cheap */
	double s = 0;
	int i;
	float f;
	uint32_t u;

	for (i = 0; i < 4; i++)
		s += (double)(rnd_next() >> 11) / 9007199254740992.0 - 0.5;
	f = (float)(mean + s * sd * 1.732);
	memcpy(&u, &f, 4);
	return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

jitk_devptr bench_dalloc(size_t n)
{
	void *d = NULL;

	CK(cudaMalloc(&d, n ? n : 1));
	return (jitk_devptr)(uintptr_t)d;
}

void bench_dfree(jitk_devptr d)
{
	CK(cudaFree(DPTR(d)));
}

jitk_devptr bench_random_bf16(size_t n, double mean, double sd)
{
	uint16_t *h = bench_xcalloc(n, 2);
	jitk_devptr d;
	size_t i;

	for (i = 0; i < n; i++)
		h[i] = rnd_bf16(mean, sd);
	d = bench_dalloc(n * 2);
	CK(cudaMemcpy(DPTR(d), h, n * 2, cudaMemcpyHostToDevice));
	free(h);
	return d;
}

/* ------------------------------------------------------------- copy */

double bench_copy_bandwidth(int warm, int n, int best)
{
	size_t bytes = (size_t)2 << 30;
	jitk_devptr a, b;
	cudaEvent_t e0, e1;
	float *t = bench_xcalloc((size_t)n, sizeof(*t)), ms;
	int i;

	a = bench_dalloc(bytes);
	b = bench_dalloc(bytes);
	CK(cudaMemsetAsync(DPTR(a), 1, bytes, NULL));
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	for (i = -warm; i < n; i++) {
		CK(cudaEventRecord(e0, NULL));
		CK(cudaMemcpyAsync(DPTR(b), DPTR(a), bytes, cudaMemcpyDeviceToDevice, NULL));
		CK(cudaEventRecord(e1, NULL));
		CK(cudaEventSynchronize(e1));
		if (i >= 0)
			CK(cudaEventElapsedTime(&t[i], e0, e1));
	}
	bench_dfree(a);
	bench_dfree(b);
	CK(cudaEventDestroy(e0));
	CK(cudaEventDestroy(e1));
	if (best)
		for (ms = t[0], i = 1; i < n; i++)
			ms = t[i] < ms ? t[i] : ms;
	else
		ms = bench_median(t, n);
	free(t);
	return 2.0 * (double)bytes / (ms * 1e-3);
}

/* ------------------------------------------------------------ flush */

#define FLUSH_BYTES ((size_t)256 << 20)
static jitk_devptr flush_buf, flush_sink;
static jitk_runtime *flush_rt;
static jitk_op *flush_op;
static jitk_tensor flush_tsink, flush_tsrc;
static char flush_dir[] = "/tmp/jitk-bench-flush-XXXXXX";

/* The read-only flush kernel is a family of its own, a spec and a
 * template written to a temporary directory, and runs through the
 * generic call like any other: what the public API offers suffices. */
static const char flush_yaml[] =
	"family: bench_l2_flush\n"
	"description: read a buffer and write nothing (jitk bench's clean L2 flush)\n"
	"template: l2_flush.cuh\n"
	"kernel: jitk_bench::l2_read_flush\n"
	"params: {}\n"
	"tuning:\n"
	"  - { threads: 512, blocks_per_sm: 4 }\n"
	"args:\n"
	"  sink:  { type: i32, shape: [1], io: out }\n"
	"  src:   { type: const i32, shape: [n], align: 16 }\n"
	"  n:     { type: i64 }\n"
	"  magic: { type: i32 }\n"
	"launch:\n"
	"  grid: sm_count * blocks_per_sm\n"
	"  block: threads\n"
	"  checks:\n"
	"    - check: n % 4 == 0\n"
	"      message: src must be whole 16-byte words\n"
	"symbols:\n"
	"  l2_read_flush: { description: clean L2 flush, params: {} }\n";

static const char flush_cuh[] =
	"namespace jitk_bench {\n"
	"// XOR of the n / 4 16-byte words of src; *sink is written only if it\n"
	"// equals magic, which the caller makes impossible: the loads stay, the\n"
	"// stores do not.\n"
	"template <class P>\n"
	"__global__ void __launch_bounds__(P::threads)\n"
	"l2_read_flush(int *sink, const int *src, long long n, int magic)\n"
	"{\n"
	"\tconst uint4 *p = reinterpret_cast<const uint4 *>(src);\n"
	"\tconst long long n16 = n / 4;\n"
	"\tconst long long step = (long long)gridDim.x * P::threads;\n"
	"\tunsigned acc = 0;\n"
	"\tlong long i = (long long)blockIdx.x * P::threads + threadIdx.x;\n"
	"\tfor (; i + 3 * step < n16; i += 4 * step) {\n"
	"\t\tuint4 a = p[i], b = p[i + step], c = p[i + 2 * step], d = p[i + 3 * step];\n"
	"\t\tacc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w;\n"
	"\t\tacc ^= c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;\n"
	"\t}\n"
	"\tfor (; i < n16; i += step) {\n"
	"\t\tuint4 a = p[i];\n"
	"\t\tacc ^= a.x ^ a.y ^ a.z ^ a.w;\n"
	"\t}\n"
	"\tif (acc == (unsigned)magic)\n"
	"\t\t*sink = (int)acc;\n"
	"}\n"
	"}\n";

static void write_file(const char *dir, const char *name, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	if (!f || fputs(text, f) < 0 || fclose(f)) {
		perror(path);
		exit(1);
	}
}

void bench_remove_dir(const char *dir)
{
	char cmd[600];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		fprintf(stderr, "jitk bench: could not remove %s\n", dir);
}

static void flush_dir_remove(void)
{
	bench_remove_dir(flush_dir);
}

/* The flush buffer, and the read flush's family (compiled in memory, now:
 * it never enters the user's cache). */
void bench_flush_init(void)
{
	jitk_runtime_options o = JITK_RUNTIME_OPTIONS_INIT;
	jitk_compiler_options co = JITK_COMPILER_OPTIONS_INIT;
	const jitk_dtype i32 = JITK_DTYPE_I32;
	const int64_t nsrc = (int64_t)(FLUSH_BYTES / 4), one = 1;

	if (flush_rt)
		return;
	flush_buf = bench_dalloc(FLUSH_BYTES);
	flush_sink = bench_dalloc(16);
	/* every byte 0x5a: the XOR of each 16-byte word is 0, never magic */
	CK(cudaMemsetAsync(DPTR(flush_buf), 0x5a, FLUSH_BYTES, NULL));
	if (!mkdtemp(flush_dir)) {
		perror("mkdtemp");
		exit(1);
	}
	atexit(flush_dir_remove); /* also when a failure exits */
	write_file(flush_dir, "l2_flush.yaml", flush_yaml);
	write_file(flush_dir, "l2_flush.cuh", flush_cuh);
	co.specs = flush_dir;
	co.cache_dir = "";
	co.cache_path = "";
	o.device = BENCH_DEVICE;
	o.compiler = &co;
	JK(jitk_runtime_new(&flush_rt, &o));
	JK(jitk_preload(flush_rt, NULL, 0));
	JK(jitk_op_get(&flush_op, flush_rt, "l2_read_flush"));
	JK(jitk_tensor_contiguous(&flush_tsink, flush_sink, i32, 1, &one));
	JK(jitk_tensor_contiguous(&flush_tsrc, flush_buf, i32, 1, &nsrc));
}

void bench_flush_free(void)
{
	if (!flush_rt)
		return;
	jitk_runtime_free(flush_rt);
	flush_rt = NULL;
	bench_dfree(flush_buf);
	bench_dfree(flush_sink);
}

void bench_flush_l2(int how, int i, cudaStream_t s)
{
	if (how == BENCH_FLUSH_WRITE) {
		CK(cudaMemsetAsync(DPTR(flush_buf), (unsigned char)i, FLUSH_BYTES, s));
	} else {
		jitk_arg a[3] = {
			{ "sink", JITK_ARG_TENSOR, { .tensor = &flush_tsink } },
			{ "src", JITK_ARG_TENSOR, { .tensor = &flush_tsrc } },
			{ "magic", JITK_ARG_I32, { .i32 = 1 } },
		};

		JK(jitk_op_call(NULL, flush_op, JITK_CALL_STRICT, a, 3, s));
	}
}
