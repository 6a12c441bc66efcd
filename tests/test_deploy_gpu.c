/* test_deploy_gpu.c - the deployment controls on a real GPU. Skips (and
 * says why) where there is no CUDA driver or device.
 *
 *  - every kind of image the lookup can choose for this GPU (its exact
 *    cubin sm_CC, the arch-specific sm_CCa, a family target sm_NNf where
 *    the GPU has one, PTX for compute_CC and for an older compute_NN),
 *    each alone in a cache, is loaded by the driver and computes the same
 *    bytes as the host, in a runtime sealed with JITK_SEAL_ERROR (so the
 *    image really came from the cache);
 *  - warmup with a manifest, then sealed: a new instance is refused and
 *    nothing is launched (the output keeps its poison); the manifest
 *    precompiled into a new cache lets a fresh sealed runtime run
 *    everything the warmup ran, without compiling.
 * The test family of tests/families keeps the compiles small. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "gpu_util.h"
#include "gpu/device.h"
#include "base/internal.h"

#define SPECS "tests/families/specs"
#define ROWS 1000
#define COLS 256

static char *tmpdir;
static int gpu_cc;
/* Held for the whole run: it keeps the device's primary context (where
 * the buffers live) retained and current. */
static jitk_runtime *base_rt;

static jitk_runtime *runtime_over(const char *cache, int seal, const char *manifest)
{
	jitk_runtime_options o = JITK_RUNTIME_OPTIONS_INIT;
	jitk_compiler_options co = JITK_COMPILER_OPTIONS_INIT;
	jitk_runtime *rt = NULL;

	co.specs = SPECS;
	co.cache_dir = cache ? cache : "";
	co.cache_path = "";
	co.no_compile = 0;
	co.force_compile = 0;
	co.log_level = JITK_LOG_ERROR;
	o.compiler = &co;
	o.seal = seal;
	o.manifest = manifest;
	if (jitk_runtime_new(&rt, &o))
		fail_msg("jitk_runtime_new: %s", jitk_error_last()->message);
	return rt;
}

static int group_setup(void **state)
{
	jitk_arch a = { 0, 0, 0 };

	(void)state;
	cu = jitk__cuda(&why_no_gpu);
	if (!cu)
		return 0;
	{
		jitk_runtime_options o = JITK_RUNTIME_OPTIONS_INIT;
		jitk_compiler_options co = JITK_COMPILER_OPTIONS_INIT;

		co.specs = SPECS;
		co.cache_dir = "";
		o.compiler = &co;
		if (jitk_runtime_new(&base_rt, &o)) {
			why_no_gpu = jitk_error_last()->message;
			cu = NULL;
			return 0;
		}
	}
	if (jitk__arch_parse(&a, jitk_runtime_arch(base_rt)) || a.kind != 's') {
		why_no_gpu = "this GPU is newer than NVRTC (PTX only)";
		cu = NULL;
	}
	gpu_cc = a.cc;
	printf("GPU: %s\n", jitk_runtime_arch(base_rt));
	tmpdir = t_tmpdir();
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	jitk_runtime_free(base_rt);
	if (tmpdir) {
		t_rmtree(tmpdir);
		free(tmpdir);
	}
	return 0;
}

/* Device buffers of one tadd2 call: out = x + y over [ROWS, COLS] int32. */
typedef struct {
	uint32_t *hx, *hy, *hout;
	CUdeviceptr dx, dy, dout;
	jitk_tensor tout, tx, ty;
	jitk_arg args[3];
} problem;

static void problem_make(problem *p)
{
	const jitk_dtype i32 = JITK_DTYPE_I32;
	const int64_t shape[2] = { ROWS, COLS };
	const size_t n = (size_t)ROWS * COLS;
	size_t i;
	uint64_t s = 0x9e3779b97f4a7c15ull;

	p->hx = malloc(n * 4);
	p->hy = malloc(n * 4);
	p->hout = malloc(n * 4);
	assert_non_null(p->hx);
	assert_non_null(p->hy);
	assert_non_null(p->hout);
	for (i = 0; i < n; i++) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		p->hx[i] = (uint32_t)(s >> 32);
		p->hy[i] = (uint32_t)s * 2654435761u;
	}
	CK(cu->cuMemAlloc(&p->dx, n * 4));
	CK(cu->cuMemAlloc(&p->dy, n * 4));
	CK(cu->cuMemAlloc(&p->dout, n * 4));
	CK(cu->cuMemcpyHtoD(p->dx, p->hx, n * 4));
	CK(cu->cuMemcpyHtoD(p->dy, p->hy, n * 4));
	assert_int_equal(jitk_tensor_contiguous(&p->tout, p->dout, i32, 2, shape), 0);
	assert_int_equal(jitk_tensor_contiguous(&p->tx, p->dx, i32, 2, shape), 0);
	assert_int_equal(jitk_tensor_contiguous(&p->ty, p->dy, i32, 2, shape), 0);
	p->args[0] = (jitk_arg){ "out", JITK_ARG_TENSOR, { .tensor = &p->tout } };
	p->args[1] = (jitk_arg){ "x", JITK_ARG_TENSOR, { .tensor = &p->tx } };
	p->args[2] = (jitk_arg){ "y", JITK_ARG_TENSOR, { .tensor = &p->ty } };
}

static void problem_free(problem *p)
{
	CK(cu->cuMemFree(p->dx));
	CK(cu->cuMemFree(p->dy));
	CK(cu->cuMemFree(p->dout));
	free(p->hx);
	free(p->hy);
	free(p->hout);
}

/* Poison out, call tadd2 on rt: the status; on success the elements that
 * differ from the host's x + y (0), else the elements changed (0: nothing
 * was launched). */
static int call(problem *p, jitk_runtime *rt, const char *selector, size_t *bad)
{
	const size_t n = (size_t)ROWS * COLS;
	size_t i;
	int rc;

	CK(cu->cuMemsetD8Async(p->dout, 0xa5, n * 4, NULL));
	CK(cu->cuCtxSynchronize());
	rc = jitk_call(NULL, rt, selector, JITK_CALL_STRICT, p->args, 3, NULL);
	CK(cu->cuCtxSynchronize());
	CK(cu->cuMemcpyDtoH(p->hout, p->dout, n * 4));
	*bad = 0;
	for (i = 0; i < n; i++)
		*bad += rc ? p->hout[i] != 0xa5a5a5a5u : p->hout[i] != p->hx[i] + p->hy[i];
	return rc;
}

static void precompile(const char *cache, const char *name, const char *arch)
{
	jitk_compiler *c = t_compiler(SPECS, cache, NULL, NULL);
	int rc = jitk_precompile(NULL, c, name, arch);

	if (rc)
		fail_msg("precompile %s %s: %s", name, arch, jitk_error_last()->message);
	jitk_compiler_free(c);
}

static void test_each_image_kind_runs(void **state)
{
	char targets[6][JITK_ARCH_STRLEN];
	problem p;
	size_t nt = 0, i;

	(void)state;
	NEED_GPU();
	snprintf(targets[nt++], JITK_ARCH_STRLEN, "sm_%d", gpu_cc);
	if (gpu_cc == 90 || gpu_cc >= 100)
		snprintf(targets[nt++], JITK_ARCH_STRLEN, "sm_%da", gpu_cc);
	if (gpu_cc >= 100)
		snprintf(targets[nt++], JITK_ARCH_STRLEN, "sm_%df", gpu_cc / 10 * 10);
	snprintf(targets[nt++], JITK_ARCH_STRLEN, "compute_%d", gpu_cc);
	snprintf(targets[nt++], JITK_ARCH_STRLEN, "compute_%d", gpu_cc >= 90 ? 80 : 75);
	problem_make(&p);
	for (i = 0; i < nt; i++) {
		char *cache = t_path(tmpdir, targets[i]);
		jitk_runtime *rt;
		jitk_kernel *k;
		jitk_stats st = JITK_STATS_INIT;
		size_t bad;
		double t0;

		precompile(cache, "tadd2[cols=256]", targets[i]);
		rt = runtime_over(cache, JITK_SEAL_ERROR, NULL);
		t0 = jitk__now_ms();
		assert_int_equal(jitk_kernel_get(&k, rt, "tadd2[cols=256]"), 0);
		t0 = jitk__now_ms() - t0;
		assert_string_equal(jitk_kernel_target(k), targets[i]);
		assert_int_equal(call(&p, rt, "tadd2", &bad), 0);
		assert_int_equal(bad, 0);
		assert_int_equal(jitk_stats_get(&st, rt, NULL), 0);
		assert_int_equal(st.compiles, 0);
		printf("image %-12s alone in the cache: chosen on sm_%d, loaded in %.2f ms, "
		       "%d x %d int32 equal to the host\n", targets[i], gpu_cc, t0, ROWS, COLS);
		jitk_runtime_free(rt);
		free(cache);
	}
	problem_free(&p);
}

static void test_warmup_manifest_then_sealed(void **state)
{
	char *cache, *cache2, *manifest, *text;
	jitk_precompile_counts counts = JITK_PRECOMPILE_COUNTS_INIT;
	jitk_compiler *c;
	jitk_runtime *rt;
	jitk_stats st = JITK_STATS_INIT;
	problem p;
	size_t bad;

	(void)state;
	NEED_GPU();
	cache = t_path(tmpdir, "warm-cache");
	cache2 = t_path(tmpdir, "deploy-cache");
	manifest = t_path(tmpdir, "warm.txt");
	problem_make(&p);
	/* warmup: one instance, recorded */
	rt = runtime_over(cache, JITK_SEAL_OFF, manifest);
	assert_int_equal(call(&p, rt, "tadd2", &bad), 0);
	assert_int_equal(bad, 0);
	/* sealed: another instance would compile; refused, nothing launched */
	assert_int_equal(jitk_runtime_seal(rt, JITK_SEAL_ERROR), 0);
	{
		jitk_arg acc[2] = { { "acc", JITK_ARG_TENSOR, { .tensor = &p.tout } },
				    { "z", JITK_ARG_TENSOR, { .tensor = &p.ty } } };

		CK(cu->cuMemsetD8Async(p.dout, 0xa5, (size_t)ROWS * COLS * 4, NULL));
		assert_int_equal(jitk_call(NULL, rt, "tadd_acc[cols=256]", JITK_CALL_STRICT, acc, 2, NULL),
				 JITK_ENOCOMPILE);
		printf("sealed: %s\n", jitk_error_last()->message);
		CK(cu->cuCtxSynchronize());
		CK(cu->cuMemcpyDtoH(p.hout, p.dout, (size_t)ROWS * COLS * 4));
		for (bad = 0; bad < (size_t)ROWS * COLS && p.hout[bad] == 0xa5a5a5a5u; bad++)
			;
		assert_int_equal(bad, (size_t)ROWS * COLS); /* nothing was launched */
	}
	/* the warmed-up one still runs */
	assert_int_equal(call(&p, rt, "tadd2", &bad), 0);
	assert_int_equal(bad, 0);
	jitk_runtime_free(rt);
	text = t_read(manifest, NULL);
	printf("manifest: %s", text);
	assert_non_null(strstr(text, "tadd2[cols=256] sm_"));
	free(text);

	/* deploy: the manifest precompiled into a new cache; a fresh sealed
	 * runtime runs all of it without compiling */
	c = t_compiler(SPECS, cache2, NULL, NULL);
	assert_int_equal(jitk_precompile_manifest(&counts, c, manifest, NULL, NULL, NULL), 0);
	assert_int_equal(counts.compiled, 1);
	jitk_compiler_free(c);
	rt = runtime_over(cache2, JITK_SEAL_ERROR, NULL);
	assert_int_equal(call(&p, rt, "tadd2", &bad), 0);
	assert_int_equal(bad, 0);
	assert_int_equal(jitk_stats_get(&st, rt, NULL), 0);
	assert_int_equal(st.compiles, 0);
	assert_int_equal(st.cache_hits, 1);
	printf("deploy: manifest precompiled (%zu compiled), sealed runtime: %llu hits, %llu compiles\n",
	       counts.compiled, (unsigned long long)st.cache_hits, (unsigned long long)st.compiles);
	jitk_runtime_free(rt);
	problem_free(&p);
	free(cache);
	free(cache2);
	free(manifest);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_each_image_kind_runs),
		cmocka_unit_test(test_warmup_manifest_then_sealed),
	};

	return T_RUN_TESTS(tests, group_setup, group_teardown);
}
