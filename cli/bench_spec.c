/* bench_spec.c - jitk bench --family NAME for any family of the specs:
 * the cases its spec's bench key declares (jitk_bench_cases), each symbol
 * called through the generic call on contiguous tensors of those shapes,
 * timed like the other families (median of --reps runs, the L2 flushed
 * before each) next to the device copy bandwidth. No C per family: a
 * family added as data is benchmarked as data.
 *
 * Inputs hold small finite values of their type (bf16 near-normal, f32 in
 * [0.5, 1.5): a valid scale, e4m3 uniform bytes that are no NaN, integers
 * 0: a valid index for any table); outputs are poisoned (0xff) before the
 * warm-up; a tensor the spec says is configured is jitk_configure'd. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "bench.h"
#include "jitk.h"

typedef struct {
	jitk_op *op;
	jitk_arg *args;
	size_t nargs;
	cudaStream_t stream;
	int failed;
} spec_job;

static void run_case(void *arg)
{
	spec_job *j = arg;

	if (!j->failed && jitk_op_call(NULL, j->op, JITK_CALL_STRICT, j->args, j->nargs, j->stream)) {
		fprintf(stderr, "jitk bench: %s\n", jitk_error_last()->message);
		j->failed = 1;
	}
}

/* n elements of t's type as the header says, on the device. */
static jitk_devptr fill(const jitk_bench_tensor *t, size_t n)
{
	size_t bytes = n * (t->dtype.bits / 8), i;
	jitk_devptr d;
	uint8_t *h;

	if (!t->written && t->dtype.code == 4 && t->dtype.bits == 16)
		return bench_random_bf16(n ? n : 1, 0.0, 1.0);
	d = bench_dalloc(bytes ? bytes : 1);
	if (t->written) {
		CK(cudaMemset(DPTR(d), 0xff, bytes));
		return d;
	}
	h = bench_xcalloc(bytes ? bytes : 1, 1);
	for (i = 0; i < n; i++) {
		if (t->dtype.code == 2 && t->dtype.bits == 32) {
			float v = (float)(0.5 + (double)(bench_rnd32() >> 8) / 16777216.0);

			memcpy(h + 4 * i, &v, 4);
		} else if (t->dtype.code == 10) {
			uint8_t b = (uint8_t)bench_rnd32();

			h[i] = (b & 0x7f) == 0x7f ? (uint8_t)(b & 0xf0) : b; /* no NaN */
		}
		/* integers stay 0 */
	}
	CK(cudaMemcpy(DPTR(d), h, bytes, cudaMemcpyHostToDevice));
	free(h);
	return d;
}

/* jitk_configure takes the symbol (what precedes a selector's '['). */
static int configure(jitk_runtime *rt, const char *selector, const char *arg, const jitk_tensor *t)
{
	char sym[256];
	size_t n = strcspn(selector, "[");

	if (n >= sizeof(sym))
		n = sizeof(sym) - 1;
	memcpy(sym, selector, n);
	sym[n] = '\0';
	return jitk_configure(rt, sym, arg, t);
}

static void shape_text(char *out, size_t n, const jitk_bench_tensor *t)
{
	size_t k = (size_t)snprintf(out, n, "%s[", t->name);
	int32_t d;

	for (d = 0; d < t->ndim && k < n; d++)
		k += (size_t)snprintf(out + k, n - k, "%s%lld", d ? "," : "", (long long)t->shape[d]);
	if (k < n)
		snprintf(out + k, n - k, "]");
}

/* The tensor cores' dense peak in TFLOPS for a case's peak kind on this
 * GPU: SMs x the clock the device reports x dense FLOPs per SM per clock
 * (Hopper: 4096 bf16, 8192 fp8; Blackwell sm_100: twice that); 0 where
 * not known. NVIDIA's data sheets quote Hopper at a lower clock (the H200
 * SXM's 1979 fp8 TFLOPS are 132 SMs x 1830 MHz x 8192). */
static double dense_peak_tflops(const char *kind)
{
	int dev = 0, sms = 0, khz = 0, major = 0;
	double per_clock;

	if (!kind || cudaGetDevice(&dev) || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) ||
	    cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev) ||
	    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev))
		return 0;
	if (major == 9)
		per_clock = 4096;
	else if (major == 10)
		per_clock = 8192;
	else
		return 0;
	if (!strcmp(kind, "fp8_dense"))
		per_clock *= 2;
	return (double)sms * khz * 1e3 * per_clock / 1e12;
}

int bench_spec(const bench_options *o, const char *family)
{
	jitk_runtime *rt;
	jitk_bench_case *cases = NULL;
	size_t ncases = 0, i, k;
	int reps = o->reps ? o->reps : 100, rc = 0;
	double copy_gbs;
	cudaStream_t stream;

	if (bench_runtime_new(&rt, o->specs, 0))
		return 1;
	if (jitk_bench_cases(&cases, &ncases, jitk_runtime_compiler(rt), family)) {
		fprintf(stderr, "jitk bench: --family %s: %s\n", family, jitk_error_last()->message);
		jitk_runtime_free(rt);
		return 1;
	}
	if (!ncases) {
		fprintf(stderr, "jitk bench: family %s declares no benchmark cases (its spec has no "
			"bench key: docs/spec-format.md)\n", family);
		jitk_free(cases);
		jitk_runtime_free(rt);
		return 1;
	}
	for (i = 0; o->symbol && i < ncases && strcmp(cases[i].symbol, o->symbol); i++)
		;
	if (o->symbol && i == ncases) {
		fprintf(stderr, "jitk bench: family %s has no benchmark case of symbol '%s' (its first: %s)\n",
			family, o->symbol, cases[0].symbol);
		jitk_free(cases);
		jitk_runtime_free(rt);
		return 1;
	}
	CK(cudaStreamCreate(&stream));
	bench_flush_init();
	copy_gbs = bench_copy_bandwidth(3, 10, 0) / 1e9;
	printf("family %s on %s: device copy %.0f GB/s (read + written), median of %d runs, "
	       "L2 flushed before each\n", family, jitk_runtime_arch(rt), copy_gbs, reps);
	for (i = 0; i < ncases; i++)
		if (cases[i].flops && dense_peak_tflops(cases[i].peak) > 0) {
			printf("peak: %s %.0f TFLOPS (the SMs x the clock the device reports x dense "
			       "FLOPs per SM per clock)\n", cases[i].peak, dense_peak_tflops(cases[i].peak));
			break;
		}
	printf("\n");
	printf("%-28s %-44s %10s %9s %8s %9s %8s\n", "symbol", "tensors", "us", "GB/s", "of copy",
	       "TFLOPS", "of peak");
	for (i = 0; i < ncases; i++) {
		const jitk_bench_case *c = &cases[i];
		jitk_tensor *t = bench_xcalloc(c->ntensors ? c->ntensors : 1, sizeof(*t));
		jitk_devptr *mem = bench_xcalloc(c->ntensors ? c->ntensors : 1, sizeof(*mem));
		spec_job j = { NULL, bench_xcalloc(c->ntensors ? c->ntensors : 1, sizeof(jitk_arg)),
			       c->ntensors, stream, 0 };
		char shapes[256] = "", one[96];
		double us;
		int got;

		if (o->symbol && strcmp(o->symbol, c->symbol)) {
			free(t);
			free(mem);
			free(j.args);
			continue;
		}
		got = jitk_op_get(&j.op, rt, c->symbol);

		for (k = 0; k < c->ntensors; k++) {
			size_t len = strlen(shapes);

			shape_text(one, sizeof(one), &c->tensors[k]);
			snprintf(shapes + len, sizeof(shapes) - len, "%s%s", k ? " " : "", one);
		}
		if (got) {
			/* gated here, or its spec refuses this GPU: said, not fatal */
			printf("%-28s %-44s skipped: %s\n", c->symbol, shapes, jitk_error_last()->message);
			free(t);
			free(mem);
			free(j.args);
			continue;
		}
		for (k = 0; k < c->ntensors; k++) {
			const jitk_bench_tensor *bt = &c->tensors[k];
			size_t n = 1;
			int32_t d;

			for (d = 0; d < bt->ndim; d++)
				n *= (size_t)bt->shape[d];
			mem[k] = fill(bt, n);
			JK(jitk_tensor_contiguous(&t[k], mem[k], bt->dtype, bt->ndim, bt->shape));
			j.args[k].name = bt->name;
			j.args[k].type = JITK_ARG_TENSOR;
			j.args[k].v.tensor = &t[k];
			if (bt->configured && configure(rt, c->symbol, bt->name, &t[k])) {
				fprintf(stderr, "jitk bench: %s\n", jitk_error_last()->message);
				j.failed = 1;
			}
		}
		us = j.failed ? 0 : bench_time_us(run_case, &j, reps, stream);
		CK(cudaStreamSynchronize(stream));
		if (j.failed) {
			rc = 1;
		} else {
			double gbs = (double)c->bytes / us / 1e3;

			printf("%-28s %-44s %10.2f %9.0f %7.0f%%", c->symbol, shapes, us, gbs,
			       100.0 * gbs / copy_gbs);
			if (c->flops) {
				double tf = (double)c->flops / us / 1e6, peak = dense_peak_tflops(c->peak);

				printf(" %9.1f", tf);
				if (peak > 0)
					printf(" %7.0f%%", 100.0 * tf / peak);
			}
			printf("\n");
		}
		fflush(stdout);
		for (k = 0; k < c->ntensors; k++) {
			if (c->tensors[k].configured)
				(void)jitk_unconfigure(rt, mem[k]);
			bench_dfree(mem[k]);
		}
		free(t);
		free(mem);
		free(j.args);
	}
	CK(cudaStreamDestroy(stream));
	jitk_free(cases);
	jitk_runtime_free(rt);
	return rc;
}
