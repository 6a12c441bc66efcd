/* bench.c - jitk bench: kernel bandwidth and JIT latencies on the GPU.
 *
 * Kernels are event-timed one launch at a time (median) and as CUDA graph
 * replays (per launch), over input sets rotated so that together they are
 * several times the L2, with fresh random data. Bandwidth counts the bytes
 * the contract counts (5 per element fused, 7 split; 9 and 11 with the
 * residual) against a device-to-device copy measured in the same run.
 *
 * The bench is a client like any other: the kernels run through the
 * norm family's typed entry points (jitk/norm.h, over the generic call),
 * exactly what users call; its own memory, streams, events and graphs are
 * the CUDA runtime's (linked statically; it uses the device's primary
 * context, which jitk makes current). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>
#include <cudaTypedefs.h> /* the type of cuLaunchKernel, fetched through cudart */

#include "cli.h"
#include "jitk.h"
#include "jitk/norm.h"

#define BENCH_DEVICE 0

#define CK(call)                                                              \
	do {                                                                  \
		cudaError_t r_ = (call);                                      \
		if (r_ != cudaSuccess) {                                      \
			fprintf(stderr, "jitk bench: %s failed: %s (line %d)\n", #call, \
				cudaGetErrorName(r_), __LINE__);              \
			exit(1);                                              \
		}                                                             \
	} while (0)

#define JK(call)                                                              \
	do {                                                                  \
		int r_ = (call);                                              \
		if (r_ != JITK_OK) {                                          \
			fprintf(stderr, "jitk bench: %s: %s\n", #call,        \
				jitk_error_last()->message);                  \
			exit(1);                                              \
		}                                                             \
	} while (0)

static const char usage[] =
	"usage: jitk bench [--specs DIR] [--rows LIST] [--hidden LIST] [--reps N]\n"
	"                  [--skip-jit] [--fused-only] [--programmatic]\n"
	"\n"
	"Time the fused and split fp8 norm paths (the specs must allow the fused\n"
	"symbols on this GPU: the shipped ones do from sm_90), the device copy\n"
	"bandwidth, and the JIT latencies: cold compile vs NVRTC alone, first\n"
	"use from the disk cache, and the host cost of a launch vs a raw\n"
	"cuLaunchKernel. --programmatic launches the kernels with programmatic\n"
	"dependent launch (sm_90+). --rows: up to 16 row counts, --hidden: up to\n"
	"8 hidden sizes (comma-separated); --reps: 5 to 100000 (default 200).\n";

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return x < y ? -1 : x > y;
}

static float median(float *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_float);
	return n % 2 ? v[n / 2] : 0.5f * (v[n / 2 - 1] + v[n / 2]);
}

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);

	if (!p) {
		fprintf(stderr, "jitk bench: out of memory\n");
		exit(1);
	}
	return p;
}

static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint16_t rnd_bf16(double sd)
{
	/* sum of 4 uniforms: near-normal, cheap */
	double s = 0;
	int i;
	float f;
	uint32_t u;

	for (i = 0; i < 4; i++) {
		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		s += (double)(rng >> 11) / 9007199254740992.0 - 0.5;
	}
	f = (float)(s * sd * 1.732);
	memcpy(&u, &f, 4);
	return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* Device memory as jitk takes it (jitk_devptr), from cudaMalloc. */
#define DPTR(d) ((void *)(uintptr_t)(d))

static jitk_devptr dalloc(size_t n)
{
	void *d = NULL;

	CK(cudaMalloc(&d, n));
	return (jitk_devptr)(uintptr_t)d;
}

static void dfree(jitk_devptr d)
{
	CK(cudaFree(DPTR(d)));
}

static jitk_devptr alloc_random(size_t n_bf16, double sd)
{
	uint16_t *h = xcalloc(n_bf16, 2);
	jitk_devptr d;
	size_t i;

	for (i = 0; i < n_bf16; i++)
		h[i] = rnd_bf16(sd);
	d = dalloc(n_bf16 * 2);
	CK(cudaMemcpy(DPTR(d), h, n_bf16 * 2, cudaMemcpyHostToDevice));
	free(h);
	return d;
}

/* ------------------------------------------------------------- copy */

static double copy_bandwidth(void)
{
	size_t n = (size_t)2 << 30;
	jitk_devptr a, b;
	cudaEvent_t e0, e1;
	float t[20];
	int i;

	a = dalloc(n);
	b = dalloc(n);
	CK(cudaMemsetAsync(DPTR(a), 1, n, NULL));
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	for (i = -3; i < 20; i++) {
		CK(cudaEventRecord(e0, NULL));
		CK(cudaMemcpyAsync(DPTR(b), DPTR(a), n, cudaMemcpyDeviceToDevice, NULL));
		CK(cudaEventRecord(e1, NULL));
		CK(cudaEventSynchronize(e1));
		if (i >= 0)
			CK(cudaEventElapsedTime(&t[i], e0, e1));
	}
	dfree(a);
	dfree(b);
	CK(cudaEventDestroy(e0));
	CK(cudaEventDestroy(e1));
	return 2.0 * (double)n / (median(t, 20) * 1e-3) / 1e9;
}

/* ---------------------------------------------------------- kernels */

typedef struct {
	jitk_norm_args a;
	jitk_devptr bufs[8];
	int nbufs;
	size_t copy_bytes; /* PATH_COPY: copy this many bytes of x into y */
} set_t;

/* PATH_COPY is the yardstick of one size: a device-to-device copy moving
 * the fused kernel's bytes (read + written), timed the same way. */
enum { PATH_FUSED, PATH_SPLIT, PATH_COPY };

static void launch_path(jitk_runtime *rt, int residual, int path, const set_t *st,
			cudaStream_t s)
{
	const jitk_norm_args *a = &st->a;

	if (path == PATH_COPY) {
		CK(cudaMemcpyAsync(DPTR(a->y), DPTR(a->x), st->copy_bytes, cudaMemcpyDeviceToDevice, s));
	} else if (path == PATH_FUSED) {
		if (residual)
			JK(jitk_fused_scale_residual_norm_scale_shift_fp8(rt, a, s));
		else
			JK(jitk_fused_norm_scale_shift_fp8(rt, a, s));
	} else {
		if (residual)
			JK(jitk_fused_scale_residual_norm_scale_shift(rt, a, s));
		else
			JK(jitk_fused_norm_scale_shift(rt, a, s));
		JK(jitk_static_quant_fp8(rt, a->q, a->y, a->input_scale, a->rows * a->hidden, s));
	}
}

typedef struct {
	const char *kernel;
	int hidden, rows;
	double us_dirty, us_clean, us_idle, us_graph; /* after FLUSH_WRITE, FLUSH_READ, ... */
	double pct_dirty, pct_clean, gbps_clean;      /* of the copy bandwidth */
	double copy_dirty, copy_clean; /* the same bytes copied (fused rows only) */
} row_t;

/* Before each timed launch, 256 MiB pass through the L2, on the same
 * stream, so that the kernel's inputs are not in the L2 and the GPU is busy
 * while the host enqueues the events and the launch (the interval is the
 * kernel, not the host's launch latency). Two ways:
 *   FLUSH_WRITE writes them (as Triton's do_bench does): the L2 is left
 *     full of dirty lines, whose write-back the timed kernel pays for as
 *     it allocates lines of its own;
 *   FLUSH_READ reads them with a kernel that writes nothing: the L2 is
 *     left holding clean lines, so the interval is the kernel's own traffic.
 * FLUSH_NONE times the launch on an idle GPU instead. */
#define FLUSH_BYTES ((size_t)256 << 20)
enum { FLUSH_NONE, FLUSH_WRITE, FLUSH_READ };
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

static void remove_dir(const char *dir)
{
	char cmd[600];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		fprintf(stderr, "jitk bench: could not remove %s\n", dir);
}

static void flush_dir_remove(void)
{
	remove_dir(flush_dir);
}

/* The flush buffer, and the read flush's family (compiled in memory, now:
 * it never enters the user's cache). */
static void flush_init(void)
{
	jitk_runtime_options o = JITK_RUNTIME_OPTIONS_INIT;
	jitk_compiler_options co = JITK_COMPILER_OPTIONS_INIT;
	const jitk_dtype i32 = JITK_DTYPE_I32;
	const int64_t nsrc = (int64_t)(FLUSH_BYTES / 4), one = 1;

	flush_buf = dalloc(FLUSH_BYTES);
	flush_sink = dalloc(16);
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

static void flush_free(void)
{
	jitk_runtime_free(flush_rt);
	dfree(flush_buf);
	dfree(flush_sink);
}

static void flush_l2(int how, int i, cudaStream_t s)
{
	if (how == FLUSH_WRITE) {
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

/* Room for every case the option lists allow: hidden sizes x residual or
 * not x rows x fused and split. */
#define BENCH_MAX_ROWS 16
#define BENCH_MAX_HIDDEN 8
static row_t results[BENCH_MAX_HIDDEN * 2 * BENCH_MAX_ROWS * 2];
static int nresults;

/* Median microseconds of one launch over reps launches, each between two
 * events: FLUSH_NONE waits for an idle GPU first (the interval then
 * includes the host's launch latency); FLUSH_WRITE and FLUSH_READ pass
 * FLUSH_BYTES through the L2 first on the same stream (see above). A write
 * flush after a read flush would leave the read's clean lines, so the
 * write flush writes the whole buffer: its lines are dirty either way. */
static double time_single(jitk_runtime *rt, int residual, int path, set_t *sets, int nsets,
			  int reps, cudaStream_t s, cudaEvent_t *ev, float *t, int flush)
{
	int i;

	for (i = 0; i < reps; i++) {
		if (flush != FLUSH_NONE)
			flush_l2(flush, i, s);
		else
			CK(cudaStreamSynchronize(s));
		CK(cudaEventRecord(ev[2 * i], s));
		launch_path(rt, residual, path, &sets[i % nsets], s);
		CK(cudaEventRecord(ev[2 * i + 1], s));
	}
	CK(cudaStreamSynchronize(s));
	for (i = 0; i < reps; i++)
		CK(cudaEventElapsedTime(&t[i], ev[2 * i], ev[2 * i + 1]));
	return median(t, reps) * 1e3;
}

static void bench_case(jitk_runtime *rt, int residual, int path, int hidden, int rows, int reps,
		       double copy_gbps)
{
	size_t n = (size_t)rows * (size_t)hidden;
	double bytes_per = path == PATH_FUSED ? (residual ? 9 : 5) : (residual ? 11 : 7);
	double set_bytes = (double)n * (residual ? 9 : 5) + (double)hidden * 6;
	int nsets = (int)ceil(4.0 * 60e6 / set_bytes), i, k, G = 20;
	set_t *sets;
	cudaEvent_t *ev;
	cudaStream_t s;
	cudaGraph_t g;
	cudaGraphExec_t ge;
	float *t, tg;
	jitk_devptr scale, shift, gate, is;
	float sc = 0.4754464328289032f;
	row_t *r;

	if (nresults == (int)CLI_ARRAY_SIZE(results)) {
		fprintf(stderr, "jitk bench: more than %zu cases\n", CLI_ARRAY_SIZE(results));
		exit(1);
	}
	r = &results[nresults++];
	if (nsets < 2)
		nsets = 2;
	if (nsets > 64)
		nsets = 64;
	sets = xcalloc((size_t)nsets, sizeof(*sets));
	scale = alloc_random((size_t)hidden, 0.2);
	shift = alloc_random((size_t)hidden, 0.2);
	gate = alloc_random((size_t)hidden, 0.5);
	is = dalloc(4);
	CK(cudaMemcpy(DPTR(is), &sc, 4, cudaMemcpyHostToDevice));
	JK(jitk_configure_input_scale(rt, is));
	for (k = 0; k < nsets; k++) {
		set_t *st = &sets[k];

		st->a.x = st->bufs[st->nbufs++] = alloc_random(n, 1.0);
		st->a.y = dalloc(n * 2);
		st->a.q = dalloc(n);
		st->bufs[st->nbufs++] = st->a.y;
		st->bufs[st->nbufs++] = st->a.q;
		if (residual) {
			st->a.residual = st->bufs[st->nbufs++] = alloc_random(n, 1.0);
			st->a.residual_out = dalloc(n * 2);
			st->bufs[st->nbufs++] = st->a.residual_out;
		}
		st->a.gate = gate;
		st->a.scale = scale;
		st->a.shift = shift;
		st->a.input_scale = is;
		st->a.rows = rows;
		st->a.hidden = hidden;
		st->a.eps = 1e-6f;
	}
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	ev = xcalloc((size_t)(2 * reps), sizeof(*ev));
	t = xcalloc((size_t)(reps > 15 ? reps : 15), sizeof(*t)); /* the graph takes 15 */
	for (i = 0; i < 2 * reps; i++)
		CK(cudaEventCreate(&ev[i]));
	for (i = 0; i < 10; i++) /* warm-up (and resolve) */
		launch_path(rt, residual, path, &sets[i % nsets], s);
	r->us_idle = time_single(rt, residual, path, sets, nsets, reps, s, ev, t, FLUSH_NONE);
	r->us_dirty = time_single(rt, residual, path, sets, nsets, reps, s, ev, t, FLUSH_WRITE);
	r->us_clean = time_single(rt, residual, path, sets, nsets, reps, s, ev, t, FLUSH_READ);
	r->copy_dirty = r->copy_clean = 0.0;
	if (path == PATH_FUSED) {
		set_t c = { .copy_bytes = (size_t)(bytes_per * (double)n / 2) };

		c.a.x = dalloc(c.copy_bytes);
		c.a.y = dalloc(c.copy_bytes);
		CK(cudaMemsetAsync(DPTR(c.a.x), 0x3c, c.copy_bytes, s));
		r->copy_dirty = time_single(rt, residual, PATH_COPY, &c, 1, reps, s, ev, t, FLUSH_WRITE);
		r->copy_clean = time_single(rt, residual, PATH_COPY, &c, 1, reps, s, ev, t, FLUSH_READ);
		dfree(c.a.x);
		dfree(c.a.y);
	}
	/* graph of G launches over rotating sets, replayed */
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	for (i = 0; i < G; i++)
		launch_path(rt, residual, path, &sets[i % nsets], s);
	CK(cudaStreamEndCapture(s, &g));
	CK(cudaGraphInstantiate(&ge, g, 0));
	CK(cudaGraphLaunch(ge, s));
	for (i = 0; i < 15; i++) {
		CK(cudaEventRecord(ev[0], s));
		CK(cudaGraphLaunch(ge, s));
		CK(cudaEventRecord(ev[1], s));
		CK(cudaStreamSynchronize(s));
		CK(cudaEventElapsedTime(&t[i], ev[0], ev[1]));
	}
	tg = median(t, 15);
	r->us_graph = tg * 1e3 / G;
	r->kernel = path == PATH_FUSED ? (residual ? "fused residual fp8" : "fused fp8")
				       : (residual ? "split residual fp8" : "split fp8");
	r->hidden = hidden;
	r->rows = rows;
	r->gbps_clean = bytes_per * (double)n / (r->us_clean * 1e-6) / 1e9;
	r->pct_clean = 100.0 * r->gbps_clean / copy_gbps;
	r->pct_dirty = r->pct_clean * r->us_clean / r->us_dirty;
	printf("%-18s %6d %6d %8.2f %8.2f %8.2f %8.2f %7.1f%% %7.1f%% %7.0f", r->kernel, hidden,
	       rows, r->us_clean, r->us_dirty, r->us_idle, r->us_graph, r->pct_clean, r->pct_dirty,
	       r->gbps_clean);
	if (path == PATH_FUSED)
		printf(" %8.2f %8.2f", r->copy_clean, r->copy_dirty);
	printf("\n");
	fflush(stdout);
	CK(cudaGraphExecDestroy(ge));
	CK(cudaGraphDestroy(g));
	for (i = 0; i < 2 * reps; i++)
		CK(cudaEventDestroy(ev[i]));
	CK(cudaStreamDestroy(s));
	for (k = 0; k < nsets; k++)
		for (i = 0; i < sets[k].nbufs; i++)
			dfree(sets[k].bufs[i]);
	JK(jitk_unconfigure(rt, is));
	dfree(scale);
	dfree(shift);
	dfree(gate);
	dfree(is);
	free(sets);
	free(ev);
	free(t);
}

/* -------------------------------------------------------------- JIT */

static double now_us(void)
{
	return jitk_cli_now_ms() * 1e3;
}

static void bench_jit(const char *specs, const char *name)
{
	jitk_runtime_options o = JITK_RUNTIME_OPTIONS_INIT;
	jitk_compiler_options co = JITK_COMPILER_OPTIONS_INIT;
	jitk_runtime *rt;
	jitk_kernel *k;
	char dir[] = "/tmp/jitk-bench-XXXXXX";
	double t0, cold, warm, rt_new;
	jitk_stats st;
	int i;

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return;
	}
	co.specs = specs;
	co.cache_dir = dir;
	co.cache_path = "";
	o.device = BENCH_DEVICE;
	o.compiler = &co;
	/* cold: compile + publish + load */
	JK(jitk_runtime_new(&rt, &o));
	t0 = now_us();
	JK(jitk_kernel_get(&k, rt, name));
	cold = now_us() - t0;
	JK(jitk_stats_get(&st, rt, name));
	printf("cold first use of %s: %.1f ms (NVRTC %.1f ms)\n", name, cold / 1e3, st.compile_ms);
	jitk_runtime_free(rt);
	/* warm: a new runtime over the populated cache (disk hit, verify, load) */
	for (i = 0; i < 3; i++) {
		t0 = now_us();
		JK(jitk_runtime_new(&rt, &o));
		rt_new = now_us() - t0;
		t0 = now_us();
		JK(jitk_kernel_get(&k, rt, name));
		warm = now_us() - t0;
		printf("warm first use of %s: %.0f us (runtime_new %.0f us: specs and templates)\n",
		       name, warm, rt_new);
		jitk_runtime_free(rt);
	}
	remove_dir(dir);
}

/* The raw launch below passes the norm kernel's parameters in the order
 * of its spec's args: these first, then the arguments of the family's
 * other axes (NULL or 0 for this instance). Check that order in the spec's
 * description, so that a spec change cannot make it launch with the wrong
 * arguments; returns how many parameters the kernel takes. */
static const char *const norm_params[] = { "y", "q", "residual_out", "x", "residual", "gate",
					   "scale", "shift", "input_scale", "rows", "eps" };
#define NORM_MAX_PARAMS 64

static size_t check_norm_params(jitk_runtime *rt, const char *symbol)
{
	char *json = NULL, want[64];
	const char *p, *end;
	size_t i, n = 0;
	int ok;

	JK(jitk_describe(&json, jitk_runtime_compiler(rt), symbol));
	p = strstr(json, "\"args\": [");
	end = p ? strstr(p, "\"may_alias\"") : NULL;
	ok = p && end;
	for (i = 0; ok && i < CLI_ARRAY_SIZE(norm_params); i++) {
		snprintf(want, sizeof(want), "{\"name\": \"%s\"", norm_params[i]);
		p = strstr(p, "{\"name\": ");
		ok = p && p < end && !strncmp(p, want, strlen(want));
		if (ok)
			p += strlen(want);
	}
	for (n = i; ok && (p = strstr(p, "{\"name\": ")) && p < end; p++)
		n++;
	ok = ok && n <= NORM_MAX_PARAMS;
	jitk_free(json);
	if (!ok) {
		fprintf(stderr, "jitk bench: the args of %s do not begin with (y, q, residual_out, x, "
				"residual, gate, scale, shift, input_scale, rows, eps): a raw launch would "
				"be wrong\n",
			symbol);
		exit(1);
	}
	return n;
}

/* Host cost per launch: jitk's typed entry point (an op lookup, the
 * checks, the launch), the generic call on an op bound once, and the
 * driver's cuLaunchKernel of the same kernel with the same parameters.
 * cuLaunchKernel comes from the CUDA runtime (cudaGetDriverEntryPoint-
 * ByVersion), so nothing links libcuda; a CUkernel launches as a
 * CUfunction. The grid is 1 (the kernel walks the rows): the host's cost
 * does not depend on it. */
static void bench_hot(jitk_runtime *rt)
{
	static const char sym[] = "fused_norm_scale_shift[hidden=3072]";
	const jitk_dtype bf16 = JITK_DTYPE_BF16;
	const int64_t shape[2] = { 4, 3072 };
	jitk_norm_args a;
	jitk_kernel *k;
	jitk_kernel_info info;
	jitk_op *op;
	jitk_tensor ty, tx, tscale, tshift;
	PFN_cuLaunchKernel_v4000 launch = NULL;
	enum cudaDriverEntryPointQueryResult found;
	uint64_t values[NORM_MAX_PARAMS];
	void *params[NORM_MAX_PARAMS];
	size_t nparams;
	cudaStream_t s;
	double t0, t_jitk, t_op, t_raw;
	const int N = 20000;
	int i, j, round;

	memset(&a, 0, sizeof(a));
	a.hidden = 3072;
	a.rows = 4;
	a.x = dalloc(4 * 3072 * 2);
	a.y = dalloc(4 * 3072 * 2);
	a.scale = dalloc(3072 * 2);
	a.shift = dalloc(3072 * 2);
	CK(cudaMemset(DPTR(a.x), 0, 4 * 3072 * 2));
	CK(cudaMemset(DPTR(a.scale), 0, 3072 * 2));
	CK(cudaMemset(DPTR(a.shift), 0, 3072 * 2));
	a.eps = 1e-6f;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaGetDriverEntryPointByVersion("cuLaunchKernel", (void **)&launch, 4000,
					    cudaEnableDefault, &found));
	if (found != cudaDriverEntryPointSuccess || !launch) {
		fprintf(stderr, "jitk bench: the driver has no cuLaunchKernel (query result %d)\n",
			(int)found);
		exit(1);
	}
	nparams = check_norm_params(rt, sym);
	JK(jitk_kernel_get(&k, rt, sym));
	JK(jitk_kernel_info_get(&info, k));
	JK(jitk_op_get(&op, rt, "fused_norm_scale_shift"));
	JK(jitk_tensor_contiguous(&ty, a.y, bf16, 2, shape));
	JK(jitk_tensor_contiguous(&tx, a.x, bf16, 2, shape));
	JK(jitk_tensor_contiguous(&tscale, a.scale, bf16, 1, &shape[1]));
	JK(jitk_tensor_contiguous(&tshift, a.shift, bf16, 1, &shape[1]));
	memset(values, 0, sizeof(values));
	for (i = 0; i < (int)nparams; i++)
		params[i] = &values[i];
	values[0] = a.y;
	values[3] = a.x;
	values[6] = a.scale;
	values[7] = a.shift;
	values[9] = (uint64_t)a.rows;
	memcpy(&values[10], &a.eps, 4);
	t_jitk = t_op = t_raw = 1e30;
	for (round = 0; round < 5; round++) {
		double tj = 0, to = 0, tr = 0;

		for (j = 0; j < N / 500; j++) {
			jitk_arg args[5] = {
				{ "y", JITK_ARG_TENSOR, { .tensor = &ty } },
				{ "x", JITK_ARG_TENSOR, { .tensor = &tx } },
				{ "scale", JITK_ARG_TENSOR, { .tensor = &tscale } },
				{ "shift", JITK_ARG_TENSOR, { .tensor = &tshift } },
				{ "eps", JITK_ARG_F32, { .f32 = a.eps } },
			};

			CK(cudaStreamSynchronize(s));
			t0 = now_us();
			for (i = 0; i < 500; i++)
				JK(jitk_fused_norm_scale_shift(rt, &a, s));
			tj += now_us() - t0;
			CK(cudaStreamSynchronize(s));
			t0 = now_us();
			for (i = 0; i < 500; i++)
				JK(jitk_op_call(NULL, op, JITK_CALL_STRICT, args, 5, s));
			to += now_us() - t0;
			CK(cudaStreamSynchronize(s));
			t0 = now_us();
			for (i = 0; i < 500; i++) {
				CUresult r = launch((CUfunction)info.handle, 1, 1, 1, info.block, 1, 1,
						    info.shared_bytes, (CUstream)s, params, NULL);

				if (r != CUDA_SUCCESS) {
					fprintf(stderr, "jitk bench: cuLaunchKernel of %s failed: CUresult %d\n",
						info.instance, (int)r);
					exit(1);
				}
			}
			tr += now_us() - t0;
		}
		if (tj / N < t_jitk)
			t_jitk = tj / N;
		if (to / N < t_op)
			t_op = to / N;
		if (tr / N < t_raw)
			t_raw = tr / N;
	}
	CK(cudaStreamSynchronize(s));
	printf("hot path: jitk typed launch %.2f us, raw cuLaunchKernel %.2f us per launch: "
	       "jitk adds %.2f us\n", t_jitk, t_raw, t_jitk - t_raw);
	printf("hot path: jitk_op_call (op bound once) %.2f us per launch: jitk adds %.2f us\n",
	       t_op, t_op - t_raw);
	CK(cudaStreamDestroy(s));
	dfree(a.x);
	dfree(a.y);
	dfree(a.scale);
	dfree(a.shift);
}

/* A comma-separated list of at most max numbers from lo to hi, else a
 * usage error naming the option. */
static int parse_list(int *out, int max, const char *opt, const char *s, long lo, long hi)
{
	const char *p = s;
	int n = 0;

	for (;;) {
		char *end;
		long v;

		errno = 0;
		v = strtol(p, &end, 10);
		if (!isdigit((unsigned char)*p) || errno || v < lo || v > hi ||
		    (*end && *end != ',') || (*end == ',' && !end[1]))
			jitk_cli_usage_error(NULL, "%s '%s' is not a list of numbers from %ld to %ld",
					     opt, s, lo, hi);
		if (n == max)
			jitk_cli_usage_error(NULL, "%s '%s' has more than %d numbers", opt, s, max);
		out[n++] = (int)v;
		if (!*end)
			return n;
		p = end + 1;
	}
}

int jitk_cli_bench(int argc, char **argv)
{
	jitk_runtime_options o = JITK_RUNTIME_OPTIONS_INIT;
	jitk_compiler_options co = JITK_COMPILER_OPTIONS_INIT;
	jitk_runtime *rt;
	struct cudaDeviceProp prop;
	const char *specs = NULL;
	int rows[BENCH_MAX_ROWS] = { 128, 1024, 4096, 16384 }, nrows = 4;
	int hidden[BENCH_MAX_HIDDEN] = { 1536, 3072, 5120 }, nhidden = 3;
	int reps = 200, skip_jit = 0, fused_only = 0, i, h, r, residual, rc;
	double copy;

	for (i = 0; i < argc; i++) {
		const char *a = argv[i];
		int takes_value = !strcmp(a, "--specs") || !strcmp(a, "--rows") ||
				  !strcmp(a, "--hidden") || !strcmp(a, "--reps");

		if (takes_value && i + 1 == argc)
			jitk_cli_usage_error(usage, "option '%s' needs a value", a);
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			fputs(usage, stdout);
			return 0;
		} else if (!strcmp(a, "--specs")) {
			specs = argv[++i];
		} else if (!strcmp(a, "--rows")) {
			nrows = parse_list(rows, (int)CLI_ARRAY_SIZE(rows), a, argv[++i], 1, 1L << 24);
		} else if (!strcmp(a, "--hidden")) {
			nhidden = parse_list(hidden, (int)CLI_ARRAY_SIZE(hidden), a, argv[++i], 8, 65536);
		} else if (!strcmp(a, "--reps")) {
			reps = (int)jitk_cli_number("--reps", argv[++i], 5, 100000);
		} else if (!strcmp(a, "--skip-jit")) {
			skip_jit = 1;
		} else if (!strcmp(a, "--fused-only")) {
			fused_only = 1;
		} else if (!strcmp(a, "--programmatic")) {
			o.programmatic = 1;
		} else if (a[0] == '-') {
			jitk_cli_usage_error(usage, "unknown option '%s'", a);
		} else {
			jitk_cli_usage_error(usage, "unexpected argument '%s'", a);
		}
	}
	co.specs = specs;
	o.device = BENCH_DEVICE;
	o.compiler = &co;
	/* jitk first: it opens the driver, and says clearly when there is none
	 * (cudart is not touched then); it makes the primary context current,
	 * which cudart then uses. */
	rc = jitk_runtime_new(&rt, &o);
	if (rc) {
		fprintf(stderr, "jitk bench: %s%s\n", rc == JITK_ENODEV ? "needs a GPU: " : "",
			jitk_error_last()->message);
		return 1;
	}
	CK(cudaSetDevice(BENCH_DEVICE));
	CK(cudaGetDeviceProperties(&prop, BENCH_DEVICE));
	printf("device: %s (%s, %d SMs), NVRTC via jitk %s%s\n", prop.name, jitk_runtime_arch(rt),
	       prop.multiProcessorCount, jitk_version(),
	       o.programmatic ? ", programmatic dependent launch" : "");
	copy = copy_bandwidth();
	printf("device-to-device copy: %.0f GB/s (bytes read + written)\n\n", copy);
	flush_init();
	printf("%-18s %6s %6s %8s %8s %8s %8s %8s %8s %7s %8s %8s\n", "", "", "", "us", "us", "us",
	       "us", "% copy", "% copy", "GB/s", "copy us", "copy us");
	printf("%-18s %6s %6s %8s %8s %8s %8s %8s %8s %7s %8s %8s\n", "kernel", "hidden", "rows",
	       "clean", "dirty", "idle", "graph", "clean", "dirty", "clean", "clean", "dirty");
	for (h = 0; h < nhidden; h++)
		for (residual = 0; residual < 2; residual++)
			for (r = 0; r < nrows; r++) {
				bench_case(rt, residual, PATH_FUSED, hidden[h], rows[r], reps, copy);
				if (!fused_only)
					bench_case(rt, residual, PATH_SPLIT, hidden[h], rows[r], reps, copy);
			}
	printf("\nOne launch, event-timed, median of %d, after 256 MiB passed through the L2 on\n"
	       "the same stream: clean = read by a kernel that writes nothing (the L2 holds\n"
	       "clean lines), dirty = written (the L2 holds dirty lines, whose write-back the\n"
	       "kernel pays for, as after Triton's do_bench flush); idle = on an idle GPU (adds\n"
	       "the host's launch latency); graph = per launch in a replayed graph of 20.\n"
	       "%% copy and GB/s: the contract's bytes over the copy bandwidth above; copy us: a\n"
	       "device-to-device copy of the fused kernel's bytes, timed the same way.\n", reps);
	printf("\nfused vs split (split = norm + quantizer), clean / dirty:\n");
	for (i = 0; !fused_only && i + 1 < nresults; i += 2)
		printf("  %-18s H=%-5d rows=%-6d %.2fx / %.2fx\n", results[i].kernel,
		       results[i].hidden, results[i].rows, results[i + 1].us_clean / results[i].us_clean,
		       results[i + 1].us_dirty / results[i].us_dirty);
	if (!skip_jit) {
		printf("\n");
		bench_jit(specs, "fused_norm_scale_shift_fp8[hidden=3072]");
		bench_hot(rt);
	}
	flush_free();
	jitk_runtime_free(rt);
	return 0;
}
