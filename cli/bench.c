/* bench.c - jitk bench: kernel bandwidth and JIT latencies on the GPU.
 * The command (its options, which family runs) and the norm family's fp8
 * paths; the other families are bench_axes.c and bench_qk.c, what they
 * share is bench_util.c (bench.h).
 *
 * Kernels are event-timed one launch at a time (median) and as CUDA graph
 * replays (per launch), over input sets rotated so that together they are
 * several times the L2, with fresh random data. Bandwidth counts the bytes
 * the contract counts (5 per element fused, 7 split; 9 and 11 with the
 * residual) against a device-to-device copy measured in the same run.
 *
 * The bench is a client like any other: the kernels run through the
 * generic call (jitk_call: the symbol by name, the tensors described by the
 * spec's names), as the typed calls generated from the spec do (jitk
 * header); its own memory, streams, events and graphs are the CUDA
 * runtime's (linked statically; it uses the device's primary context,
 * which jitk makes current). */
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

#include "bench.h"
#include "cli.h"
#include "jitk.h"

static const char usage[] =
	"usage: jitk bench [--family norm|axes|qk|all|FAMILY] [--specs DIR] [--reps N]\n"
	"                  [--rows LIST] [--hidden LIST] [--heads HQ,HK]\n"
	"                  [--skip-jit] [--fused-only] [--programmatic]\n"
	"\n"
	"Time a kernel family on this GPU, next to the device copy bandwidth:\n"
	"  norm  (the default) the fused and split fp8 norm paths (the specs must\n"
	"        allow the fused symbols on this GPU: the shipped ones do from\n"
	"        sm_90), and the JIT latencies: cold compile vs NVRTC alone, first\n"
	"        use from the disk cache, the host cost of a launch vs a raw\n"
	"        cuLaunchKernel\n"
	"  axes  the norm family's axes: per_batch and indexed modulation, outputs\n"
	"        q only, per-token fp8 (fused and split), next to the shared\n"
	"        modulation kernels, launched back to back\n"
	"  qk    QK-RMSNorm + RoPE at Qwen-Image's shape: fused in place, split,\n"
	"        out of place\n"
	"  all   the three, one after the other\n"
	"  FAMILY  any other family of the specs: the cases its spec's bench key\n"
	"        declares (tensors' shapes), each symbol through the generic call:\n"
	"        us, GB/s, % of the copy bandwidth, TFLOPS where it counts flops\n"
	"        and the share of the dense tensor-core peak where it names one\n"
	"\n"
	"--rows LIST (norm, axes): up to 16 row counts, comma-separated (default\n"
	"  128,1024,4096,16384; axes: even, default 4096,16384)\n"
	"--hidden LIST (norm, axes): up to 8 hidden sizes (default 1536,3072,5120;\n"
	"  axes 3072)\n"
	"--reps N: 5 to 100000 (default 200; axes and FAMILY 100)\n"
	"--symbol NAME (FAMILY): only the cases of that symbol\n"
	"--heads HQ,HK (qk): query and key heads of 128 (default 24,24)\n"
	"--skip-jit, --fused-only (norm): leave out the JIT latencies, the split path\n"
	"--programmatic (norm): launch with programmatic dependent launch (sm_90+;\n"
	"  axes always do)\n";

/* ---------------------------------------------------------- kernels */

/* One input set: the tensors of the norm family's reference symbols
 * (bf16 [rows, hidden], gate, scale and shift [hidden], q fp8 [rows,
 * hidden], input_scale one f32). */
typedef struct {
	jitk_devptr y, q, residual_out, x, residual, gate, scale, shift, input_scale;
	int64_t rows, hidden;
	float eps;
	jitk_devptr bufs[8];
	int nbufs;
	size_t copy_bytes; /* PATH_COPY: copy this many bytes of x into y */
} set_t;

/* PATH_COPY is the yardstick of one size: a device-to-device copy moving
 * the fused kernel's bytes (read + written), timed the same way. */
enum { PATH_FUSED, PATH_SPLIT, PATH_COPY };

/* The arguments of fused_[scale_residual_]norm_scale_shift[_fp8] for st,
 * by the spec's names, described anew for each call as a typed call does. */
static void norm_args(bench_args *c, const set_t *st, int residual, int fp8)
{
	const jitk_dtype bf16 = JITK_DTYPE_BF16, e4m3 = JITK_DTYPE_FP8_E4M3, f32 = JITK_DTYPE_F32;
	const int64_t rh[2] = { st->rows, st->hidden }, one = 1;

	c->n = 0;
	bench_args_tensor(c, "y", st->y, bf16, 2, rh);
	if (fp8)
		bench_args_tensor(c, "q", st->q, e4m3, 2, rh);
	if (residual)
		bench_args_tensor(c, "residual_out", st->residual_out, bf16, 2, rh);
	bench_args_tensor(c, "x", st->x, bf16, 2, rh);
	if (residual) {
		bench_args_tensor(c, "residual", st->residual, bf16, 2, rh);
		bench_args_tensor(c, "gate", st->gate, bf16, 1, &rh[1]);
	}
	bench_args_tensor(c, "scale", st->scale, bf16, 1, &rh[1]);
	bench_args_tensor(c, "shift", st->shift, bf16, 1, &rh[1]);
	if (fp8)
		bench_args_tensor(c, "input_scale", st->input_scale, f32, 1, &one);
	bench_args_f32(c, "eps", st->eps);
}

static void launch_path(jitk_runtime *rt, int residual, int path, const set_t *st,
			cudaStream_t s)
{
	const jitk_dtype bf16 = JITK_DTYPE_BF16, e4m3 = JITK_DTYPE_FP8_E4M3, f32 = JITK_DTYPE_F32;
	bench_args c;

	if (path == PATH_COPY) {
		CK(cudaMemcpyAsync(DPTR(st->y), DPTR(st->x), st->copy_bytes, cudaMemcpyDeviceToDevice, s));
	} else if (path == PATH_FUSED) {
		norm_args(&c, st, residual, 1);
		JK(bench_call(NULL, rt, residual ? "fused_scale_residual_norm_scale_shift_fp8"
						 : "fused_norm_scale_shift_fp8",
			      JITK_CALL_STRICT, &c, s));
	} else {
		const int64_t n = st->rows * st->hidden, one = 1;

		norm_args(&c, st, residual, 0);
		JK(bench_call(NULL, rt, residual ? "fused_scale_residual_norm_scale_shift"
						 : "fused_norm_scale_shift",
			      JITK_CALL_STRICT, &c, s));
		/* the split path's quantizer over y */
		c.n = 0;
		bench_args_tensor(&c, "q", st->q, e4m3, 1, &n);
		bench_args_tensor(&c, "x", st->y, bf16, 1, &n);
		bench_args_tensor(&c, "input_scale", st->input_scale, f32, 1, &one);
		JK(bench_call(NULL, rt, "static_quant_fp8", JITK_CALL_STRICT, &c, s));
	}
}

/* Validate the fused fp8 symbols' input_scale (jitk_configure). */
static void configure_scale(jitk_runtime *rt, jitk_devptr is)
{
	const int64_t one = 1;
	jitk_tensor t;

	JK(jitk_tensor_contiguous(&t, is, (jitk_dtype)JITK_DTYPE_F32, 1, &one));
	JK(jitk_configure(rt, "fused_norm_scale_shift_fp8", "input_scale", &t));
}

typedef struct {
	const char *kernel;
	int hidden, rows;
	double us_dirty, us_clean, us_idle, us_graph; /* after a write, a read flush, ... */
	double pct_dirty, pct_clean, gbps_clean;      /* of the copy bandwidth */
	double copy_dirty, copy_clean; /* the same bytes copied (fused rows only) */
} row_t;

/* Room for every case the option lists allow: hidden sizes x residual or
 * not x rows x fused and split. */
static row_t results[BENCH_MAX_HIDDEN * 2 * BENCH_MAX_ROWS * 2];
static int nresults;

/* Median microseconds of one launch over reps launches, each between two
 * events: BENCH_FLUSH_NONE waits for an idle GPU first (the interval then
 * includes the host's launch latency); BENCH_FLUSH_WRITE and
 * BENCH_FLUSH_READ pass 256 MiB through the L2 first on the same stream
 * (bench.h). A write flush after a read flush would leave the read's clean
 * lines, so the write flush writes the whole buffer: its lines are dirty
 * either way. */
static double time_single(jitk_runtime *rt, int residual, int path, set_t *sets, int nsets,
			  int reps, cudaStream_t s, cudaEvent_t *ev, float *t, int flush)
{
	int i;

	for (i = 0; i < reps; i++) {
		if (flush != BENCH_FLUSH_NONE)
			bench_flush_l2(flush, i, s);
		else
			CK(cudaStreamSynchronize(s));
		CK(cudaEventRecord(ev[2 * i], s));
		launch_path(rt, residual, path, &sets[i % nsets], s);
		CK(cudaEventRecord(ev[2 * i + 1], s));
	}
	CK(cudaStreamSynchronize(s));
	for (i = 0; i < reps; i++)
		CK(cudaEventElapsedTime(&t[i], ev[2 * i], ev[2 * i + 1]));
	return bench_median(t, reps) * 1e3;
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
	sets = bench_xcalloc((size_t)nsets, sizeof(*sets));
	scale = bench_random_bf16((size_t)hidden, 0.0, 0.2);
	shift = bench_random_bf16((size_t)hidden, 0.0, 0.2);
	gate = bench_random_bf16((size_t)hidden, 0.0, 0.5);
	is = bench_dalloc(4);
	CK(cudaMemcpy(DPTR(is), &sc, 4, cudaMemcpyHostToDevice));
	configure_scale(rt, is);
	for (k = 0; k < nsets; k++) {
		set_t *st = &sets[k];

		st->x = st->bufs[st->nbufs++] = bench_random_bf16(n, 0.0, 1.0);
		st->y = bench_dalloc(n * 2);
		st->q = bench_dalloc(n);
		st->bufs[st->nbufs++] = st->y;
		st->bufs[st->nbufs++] = st->q;
		if (residual) {
			st->residual = st->bufs[st->nbufs++] = bench_random_bf16(n, 0.0, 1.0);
			st->residual_out = bench_dalloc(n * 2);
			st->bufs[st->nbufs++] = st->residual_out;
		}
		st->gate = gate;
		st->scale = scale;
		st->shift = shift;
		st->input_scale = is;
		st->rows = rows;
		st->hidden = hidden;
		st->eps = 1e-6f;
	}
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	ev = bench_xcalloc((size_t)(2 * reps), sizeof(*ev));
	t = bench_xcalloc((size_t)(reps > 15 ? reps : 15), sizeof(*t)); /* the graph takes 15 */
	for (i = 0; i < 2 * reps; i++)
		CK(cudaEventCreate(&ev[i]));
	for (i = 0; i < 10; i++) /* warm-up (and resolve) */
		launch_path(rt, residual, path, &sets[i % nsets], s);
	r->us_idle = time_single(rt, residual, path, sets, nsets, reps, s, ev, t, BENCH_FLUSH_NONE);
	r->us_dirty = time_single(rt, residual, path, sets, nsets, reps, s, ev, t, BENCH_FLUSH_WRITE);
	r->us_clean = time_single(rt, residual, path, sets, nsets, reps, s, ev, t, BENCH_FLUSH_READ);
	r->copy_dirty = r->copy_clean = 0.0;
	if (path == PATH_FUSED) {
		set_t c = { .copy_bytes = (size_t)(bytes_per * (double)n / 2) };

		c.x = bench_dalloc(c.copy_bytes);
		c.y = bench_dalloc(c.copy_bytes);
		CK(cudaMemsetAsync(DPTR(c.x), 0x3c, c.copy_bytes, s));
		r->copy_dirty = time_single(rt, residual, PATH_COPY, &c, 1, reps, s, ev, t, BENCH_FLUSH_WRITE);
		r->copy_clean = time_single(rt, residual, PATH_COPY, &c, 1, reps, s, ev, t, BENCH_FLUSH_READ);
		bench_dfree(c.x);
		bench_dfree(c.y);
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
	tg = bench_median(t, 15);
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
			bench_dfree(sets[k].bufs[i]);
	JK(jitk_unconfigure(rt, is));
	bench_dfree(scale);
	bench_dfree(shift);
	bench_dfree(gate);
	bench_dfree(is);
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
	jitk_stats st = JITK_STATS_INIT;
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
	bench_remove_dir(dir);
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

/* Host cost per launch: jitk's call as a typed call makes it (the
 * tensors described, an op lookup by name, the checks, the launch), the
 * generic call on an op bound once, and the
 * driver's cuLaunchKernel of the same kernel with the same parameters.
 * cuLaunchKernel comes from the CUDA runtime (cudaGetDriverEntryPoint-
 * ByVersion), so nothing links libcuda; a CUkernel launches as a
 * CUfunction. The grid is 1 (the kernel walks the rows): the host's cost
 * does not depend on it. */
/* 500 raw launches of f (the kernel of info) on s: their host time, us. */
static double raw_launches(PFN_cuLaunchKernel_v4000 launch, CUfunction f,
			   const jitk_kernel_info *info, cudaStream_t s, void **params)
{
	double t0;
	int i;

	CK(cudaStreamSynchronize(s));
	t0 = now_us();
	for (i = 0; i < 500; i++) {
		CUresult r = launch(f, 1, 1, 1, info->block, 1, 1, info->shared_bytes, (CUstream)s,
				    params, NULL);

		if (r != CUDA_SUCCESS) {
			fprintf(stderr, "jitk bench: cuLaunchKernel of %s failed: CUresult %d\n",
				info->instance, (int)r);
			exit(1);
		}
	}
	return now_us() - t0;
}

static void bench_hot(jitk_runtime *rt)
{
	static const char sym[] = "fused_norm_scale_shift[hidden=3072]";
	const jitk_dtype bf16 = JITK_DTYPE_BF16;
	const int64_t shape[2] = { 4, 3072 };
	set_t a;
	bench_args typed;
	jitk_kernel *k;
	jitk_kernel_info info = JITK_KERNEL_INFO_INIT;
	jitk_op *op;
	jitk_tensor ty, tx, tscale, tshift;
	PFN_cuLaunchKernel_v4000 launch = NULL;
	PFN_cuKernelGetFunction_v12000 get_function = NULL;
	CUfunction fn = NULL;
	enum cudaDriverEntryPointQueryResult found, found_fn;
	uint64_t values[NORM_MAX_PARAMS];
	void *params[NORM_MAX_PARAMS];
	size_t nparams;
	cudaStream_t s;
	double t0, t_jitk, t_op, t_raw, t_rawk;
	const int N = 20000;
	int i, j, round;

	memset(&a, 0, sizeof(a));
	a.hidden = 3072;
	a.rows = 4;
	a.x = bench_dalloc(4 * 3072 * 2);
	a.y = bench_dalloc(4 * 3072 * 2);
	a.scale = bench_dalloc(3072 * 2);
	a.shift = bench_dalloc(3072 * 2);
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
	CK(cudaGetDriverEntryPointByVersion("cuKernelGetFunction", (void **)&get_function, 12000,
					    cudaEnableDefault, &found_fn));
	nparams = check_norm_params(rt, sym);
	JK(jitk_kernel_get(&k, rt, sym));
	JK(jitk_kernel_info_get(&info, k));
	/* the kernel's function in this (the primary) context, as jitk
	 * launches it there */
	if (found_fn != cudaDriverEntryPointSuccess || !get_function ||
	    get_function(&fn, (CUkernel)info.handle) != CUDA_SUCCESS) {
		fprintf(stderr, "jitk bench: no CUfunction for %s (cuKernelGetFunction)\n", info.instance);
		exit(1);
	}
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
	t_jitk = t_op = t_raw = t_rawk = 1e30;
	for (round = 0; round < 5; round++) {
		double tj = 0, to = 0, tr = 0, trk = 0;

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
			for (i = 0; i < 500; i++) {
				norm_args(&typed, &a, 0, 0);
				JK(bench_call(NULL, rt, "fused_norm_scale_shift", JITK_CALL_STRICT, &typed, s));
			}
			tj += now_us() - t0;
			CK(cudaStreamSynchronize(s));
			t0 = now_us();
			for (i = 0; i < 500; i++)
				JK(jitk_op_call(NULL, op, JITK_CALL_STRICT, args, 5, s));
			to += now_us() - t0;
			tr += raw_launches(launch, fn, &info, s, params);
			trk += raw_launches(launch, (CUfunction)info.handle, &info, s, params);
		}
		if (tj / N < t_jitk)
			t_jitk = tj / N;
		if (to / N < t_op)
			t_op = to / N;
		if (tr / N < t_raw)
			t_raw = tr / N;
		if (trk / N < t_rawk)
			t_rawk = trk / N;
	}
	CK(cudaStreamSynchronize(s));
	printf("hot path: jitk typed launch %.2f us, raw cuLaunchKernel %.2f us per launch: "
	       "jitk adds %.2f us\n", t_jitk, t_raw, t_jitk - t_raw);
	printf("hot path: jitk_op_call (op bound once) %.2f us per launch: jitk adds %.2f us\n",
	       t_op, t_op - t_raw);
	printf("hot path: raw cuLaunchKernel of the CUfunction (above) %.2f us, of the CUkernel %.2f us\n",
	       t_raw, t_rawk);
	CK(cudaStreamDestroy(s));
	bench_dfree(a.x);
	bench_dfree(a.y);
	bench_dfree(a.scale);
	bench_dfree(a.shift);
}

int bench_norm(const bench_options *bo)
{
	static const int def_rows[] = { 128, 1024, 4096, 16384 }, def_hidden[] = { 1536, 3072, 5120 };
	const int *rows = bo->nrows ? bo->rows : def_rows, *hidden = bo->nhidden ? bo->hidden : def_hidden;
	const int nrows = bo->nrows ? bo->nrows : (int)CLI_ARRAY_SIZE(def_rows);
	const int nhidden = bo->nhidden ? bo->nhidden : (int)CLI_ARRAY_SIZE(def_hidden);
	const int reps = bo->reps ? bo->reps : 200;
	jitk_runtime *rt;
	struct cudaDeviceProp prop;
	int i, h, r, residual;
	double copy;

	if (bench_runtime_new(&rt, bo->specs, bo->programmatic))
		return 1;
	CK(cudaGetDeviceProperties(&prop, BENCH_DEVICE));
	printf("device: %s (%s, %d SMs), NVRTC via jitk %s%s\n", prop.name, jitk_runtime_arch(rt),
	       prop.multiProcessorCount, jitk_version(),
	       bo->programmatic ? ", programmatic dependent launch" : "");
	copy = bench_copy_bandwidth(3, 20, 0) / 1e9;
	printf("device-to-device copy: %.0f GB/s (bytes read + written)\n\n", copy);
	bench_flush_init();
	printf("%-18s %6s %6s %8s %8s %8s %8s %8s %8s %7s %8s %8s\n", "", "", "", "us", "us", "us",
	       "us", "% copy", "% copy", "GB/s", "copy us", "copy us");
	printf("%-18s %6s %6s %8s %8s %8s %8s %8s %8s %7s %8s %8s\n", "kernel", "hidden", "rows",
	       "clean", "dirty", "idle", "graph", "clean", "dirty", "clean", "clean", "dirty");
	nresults = 0;
	for (h = 0; h < nhidden; h++)
		for (residual = 0; residual < 2; residual++)
			for (r = 0; r < nrows; r++) {
				bench_case(rt, residual, PATH_FUSED, hidden[h], rows[r], reps, copy);
				if (!bo->fused_only)
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
	for (i = 0; !bo->fused_only && i + 1 < nresults; i += 2)
		printf("  %-18s H=%-5d rows=%-6d %.2fx / %.2fx\n", results[i].kernel,
		       results[i].hidden, results[i].rows, results[i + 1].us_clean / results[i].us_clean,
		       results[i + 1].us_dirty / results[i].us_dirty);
	if (!bo->skip_jit) {
		printf("\n");
		bench_jit(bo->specs, "fused_norm_scale_shift_fp8[hidden=3072]");
		bench_hot(rt);
	}
	jitk_runtime_free(rt);
	return 0;
}

/* ---------------------------------------------------------- command */

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

/* The families, in the order --family all runs them. */
enum { FAM_NORM = 1, FAM_AXES = 2, FAM_QK = 4, FAM_ALL = 7, FAM_SPEC = 8 };
static const struct {
	const char *name;
	int mask;
	int (*run)(const bench_options *o);
} families[] = {
	{ "norm", FAM_NORM, bench_norm },
	{ "axes", FAM_AXES, bench_axes },
	{ "qk", FAM_QK, bench_qk },
};

/* Every option, whether it takes a value, and the families it applies to
 * (any other family refuses it). */
enum { OPT_FAMILY, OPT_SPECS, OPT_REPS, OPT_ROWS, OPT_HIDDEN, OPT_HEADS, OPT_SKIP_JIT,
       OPT_FUSED_ONLY, OPT_PROGRAMMATIC, OPT_SYMBOL };
static const struct {
	const char *name;
	int takes_value, families;
} options[] = {
	[OPT_FAMILY] = { "--family", 1, FAM_ALL | FAM_SPEC },
	[OPT_SPECS] = { "--specs", 1, FAM_ALL | FAM_SPEC },
	[OPT_REPS] = { "--reps", 1, FAM_ALL | FAM_SPEC },
	[OPT_ROWS] = { "--rows", 1, FAM_NORM | FAM_AXES },
	[OPT_HIDDEN] = { "--hidden", 1, FAM_NORM | FAM_AXES },
	[OPT_HEADS] = { "--heads", 1, FAM_QK },
	[OPT_SKIP_JIT] = { "--skip-jit", 0, FAM_NORM },
	[OPT_FUSED_ONLY] = { "--fused-only", 0, FAM_NORM },
	[OPT_PROGRAMMATIC] = { "--programmatic", 0, FAM_NORM },
	[OPT_SYMBOL] = { "--symbol", 1, FAM_SPEC },
};

static int parse_family(const char *s)
{
	size_t k;

	if (!strcmp(s, "all"))
		return FAM_ALL;
	for (k = 0; k < CLI_ARRAY_SIZE(families); k++)
		if (!strcmp(s, families[k].name))
			return families[k].mask;
	if (!*s)
		jitk_cli_usage_error(usage, "--family needs a name");
	return FAM_SPEC; /* a family of the specs: its bench cases (bench_spec.c) */
}

int jitk_cli_bench(int argc, char **argv)
{
	bench_options bo;
	const char *family = "norm";
	int fam = FAM_NORM, given = 0, i, rc = 0;
	size_t k;

	memset(&bo, 0, sizeof(bo));
	for (i = 0; i < argc; i++) {
		const char *a = argv[i], *v;

		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			fputs(usage, stdout);
			return 0;
		}
		for (k = 0; k < CLI_ARRAY_SIZE(options) && strcmp(a, options[k].name); k++)
			;
		if (k == CLI_ARRAY_SIZE(options) && a[0] == '-')
			jitk_cli_usage_error(usage, "unknown option '%s'", a);
		if (k == CLI_ARRAY_SIZE(options))
			jitk_cli_usage_error(usage, "unexpected argument '%s'", a);
		if (options[k].takes_value && i + 1 == argc)
			jitk_cli_usage_error(usage, "option '%s' needs a value", a);
		v = options[k].takes_value ? argv[++i] : NULL;
		given |= 1 << k;
		switch (k) {
		case OPT_FAMILY:
			fam = parse_family(v);
			family = v;
			break;
		case OPT_SPECS:
			bo.specs = v;
			break;
		case OPT_SYMBOL:
			bo.symbol = v;
			break;
		case OPT_REPS:
			bo.reps = (int)jitk_cli_number("--reps", v, 5, 100000);
			break;
		case OPT_ROWS:
			bo.nrows = parse_list(bo.rows, BENCH_MAX_ROWS, a, v, 1, 1L << 24);
			break;
		case OPT_HIDDEN:
			bo.nhidden = parse_list(bo.hidden, BENCH_MAX_HIDDEN, a, v, 8, 65536);
			break;
		case OPT_HEADS:
			bo.nheads = parse_list(bo.heads, 2, a, v, 1, 1024);
			if (bo.nheads != 2)
				jitk_cli_usage_error(NULL, "--heads '%s' is not HQ,HK (two numbers)", v);
			break;
		case OPT_SKIP_JIT:
			bo.skip_jit = 1;
			break;
		case OPT_FUSED_ONLY:
			bo.fused_only = 1;
			break;
		case OPT_PROGRAMMATIC:
			bo.programmatic = 1;
			break;
		}
	}
	for (k = 0; k < CLI_ARRAY_SIZE(options); k++)
		if ((given & 1 << k) && !(options[k].families & fam))
			jitk_cli_usage_error(usage, "option '%s' does not apply to --family %s",
					     options[k].name, family);
	/* the axes split the rows into two batches */
	for (i = 0; (fam & FAM_AXES) && i < bo.nrows; i++)
		if (bo.rows[i] % 2)
			jitk_cli_usage_error(NULL, "--family %s needs even --rows (two batches), not %d",
					     family, bo.rows[i]);
	if (fam == FAM_SPEC) {
		/* the name is checked against the specs before a GPU is needed */
		jitk_compiler_options co = JITK_COMPILER_OPTIONS_INIT;
		jitk_compiler *c = NULL;
		jitk_bench_case *cases = NULL;
		size_t n = 0;

		co.specs = bo.specs;
		co.cache_dir = "";
		co.log_level = JITK_LOG_ERROR;
		if (jitk_compiler_new(&c, &co)) {
			fprintf(stderr, "jitk: %s\n", jitk_error_last()->message);
			return 1;
		}
		rc = jitk_bench_cases(&cases, &n, c, family);
		jitk_free(cases);
		jitk_compiler_free(c);
		if (rc == JITK_ENOENT)
			jitk_cli_usage_error(usage, "--family '%s' is not one of norm, axes, qk, all: %s",
					     family, jitk_error_last()->message);
		if (rc) {
			fprintf(stderr, "jitk: %s\n", jitk_error_last()->message);
			return 1;
		}
		if (!n) {
			fprintf(stderr, "jitk bench: family %s declares no benchmark cases (its spec "
				"has no bench key: docs/spec-format.md)\n", family);
			return 1;
		}
		rc = bench_spec(&bo, family);
		bench_flush_free();
		return rc;
	}
	for (k = 0; !rc && k < CLI_ARRAY_SIZE(families); k++) {
		if (!(families[k].mask & fam))
			continue;
		if (k && fam == FAM_ALL)
			printf("\n");
		rc = families[k].run(&bo);
		fflush(stdout);
	}
	bench_flush_free();
	return rc;
}
