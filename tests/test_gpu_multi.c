/* test_gpu_multi.c - one process, one runtime per visible CUDA device.
 * Skips (and says why) where there is no CUDA driver or device; runs with
 * one device too (then it proves the per-device path on that one).
 *
 * For every device: a runtime bound to it (shared cache directory), the
 * data-only test family's tadd3 resolved and launched on the device's own
 * stream with the device's own buffers; every device's output equals the
 * others' and the host's, byte for byte. Across the process: one compile
 * and one cache entry when the devices share an architecture (the later
 * runtimes find the first one's entry on disk). A DLPack tensor that says
 * it lives on another device is refused, naming the argument. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlpack/dlpack.h>

#include "common.h"
#include "gpu_util.h"
#include "gpu/device.h"
#include "base/internal.h"

#define MAXDEV 16


static int group_setup(void **state)
{
	(void)state;
	cu = jitk__cuda(&why_no_gpu);
	return 0;
}

typedef struct {
	jitk_runtime *rt;
	CUcontext ctx;
	CUdevice dev;
	CUstream stream;
	CUdeviceptr dx, dy, dz, dout;
	uint32_t *out;
} device_run;

static void test_one_runtime_per_device(void **state)
{
	const int64_t rows = 512, cols = 256;
	const size_t n = (size_t)(rows * cols);
	const jitk_dtype i32 = JITK_DTYPE_I32;
	jitk_compiler_options co = JITK_COMPILER_OPTIONS_INIT;
	jitk_runtime_options o = JITK_RUNTIME_OPTIONS_INIT;
	device_run d[MAXDEV];
	uint32_t *hx = malloc(n * 4), *hy = malloc(n * 4), *hz = malloc(n * 4);
	char *tmp, *cache, *specs;
	uint64_t compiles = 0, hits = 0, seed = 7;
	int ndev = 0, i, same_arch = 1;
	size_t k, bad = 0;

	(void)state;
	if (!cu) {
		printf("SKIP: no GPU: %s\n", why_no_gpu);
		free(hx), free(hy), free(hz);
		skip();
	}
	CK(cu->cuDeviceGetCount(&ndev));
	if (ndev > MAXDEV)
		ndev = MAXDEV;
	tmp = t_tmpdir();
	cache = t_path(tmp, "cache");
	specs = t_path(t_root(), "tests/families/specs");
	co.specs = specs;
	co.cache_dir = cache;
	co.cache_path = "";
	o.compiler = &co;
	for (k = 0; k < n; k++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		hx[k] = (uint32_t)(seed >> 32);
		hy[k] = hx[k] * 2654435761u;
		hz[k] = hx[k] ^ 0x5bd1e995u;
	}
	memset(d, 0, sizeof(d));
	for (i = 0; i < ndev; i++) {
		jitk_tensor tout, tx, ty, tz;
		const int64_t shape[2] = { rows, cols };
		jitk_arg args[4];
		jitk_call_info info = JITK_CALL_INFO_INIT;

		o.device = i;
		if (jitk_runtime_new(&d[i].rt, &o))
			fail_msg("device %d: %s", i, jitk_error_last()->message);
		if (strcmp(jitk_runtime_arch(d[i].rt), jitk_runtime_arch(d[0].rt)))
			same_arch = 0;
		/* the device's own context, stream and buffers */
		CK(cu->cuDeviceGet(&d[i].dev, i));
		CK(cu->cuDevicePrimaryCtxRetain(&d[i].ctx, d[i].dev));
		CK(cu->cuCtxSetCurrent(d[i].ctx));
		CK(cu->cuStreamCreate(&d[i].stream, 1 /* non-blocking */));
		CK(cu->cuMemAlloc(&d[i].dx, n * 4));
		CK(cu->cuMemAlloc(&d[i].dy, n * 4));
		CK(cu->cuMemAlloc(&d[i].dz, n * 4));
		CK(cu->cuMemAlloc(&d[i].dout, n * 4));
		CK(cu->cuMemcpyHtoD(d[i].dx, hx, n * 4));
		CK(cu->cuMemcpyHtoD(d[i].dy, hy, n * 4));
		CK(cu->cuMemcpyHtoD(d[i].dz, hz, n * 4));
		CK(cu->cuMemsetD8Async(d[i].dout, (unsigned char)(0xa5 + i), n * 4, d[i].stream));
		assert_int_equal(jitk_tensor_contiguous(&tout, d[i].dout, i32, 2, shape), 0);
		assert_int_equal(jitk_tensor_contiguous(&tx, d[i].dx, i32, 2, shape), 0);
		assert_int_equal(jitk_tensor_contiguous(&ty, d[i].dy, i32, 2, shape), 0);
		assert_int_equal(jitk_tensor_contiguous(&tz, d[i].dz, i32, 2, shape), 0);
		args[0] = (jitk_arg){ "out", JITK_ARG_TENSOR, { .tensor = &tout } };
		args[1] = (jitk_arg){ "x", JITK_ARG_TENSOR, { .tensor = &tx } };
		args[2] = (jitk_arg){ "y", JITK_ARG_TENSOR, { .tensor = &ty } };
		args[3] = (jitk_arg){ "z", JITK_ARG_TENSOR, { .tensor = &tz } };
		if (jitk_call(&info, d[i].rt, "tadd3", JITK_CALL_AUTO, args, 4,
			      (jitk_stream)d[i].stream))
			fail_msg("device %d: %s", i, jitk_error_last()->message);
		d[i].out = malloc(n * 4);
		CK(cu->cuStreamSynchronize(d[i].stream));
		CK(cu->cuMemcpyDtoH(d[i].out, d[i].dout, n * 4));
	}
	for (i = 0; i < ndev; i++) {
		jitk_stats s = JITK_STATS_INIT;

		assert_int_equal(jitk_stats_get(&s, d[i].rt, NULL), 0);
		compiles += s.compiles;
		hits += s.cache_hits;
		if (i)
			assert_memory_equal(d[i].out, d[0].out, n * 4);
	}
	for (k = 0; k < n; k++)
		bad += d[0].out[k] != hx[k] + hy[k] + hz[k];
	assert_int_equal(bad, 0);
	if (same_arch) {
		/* tadd3 runs one instance (or, below its gate, the two steps
		 * of its fallback) per device: the first runtime compiles,
		 * the others hit its entries */
		uint64_t per = compiles;

		assert_true(per >= 1 && per <= 2);
		assert_int_equal(hits, per * (uint64_t)(ndev - 1));
		assert_int_equal(t_count_files(cache, ".jitk"), (int)per);
	}
	printf("multi-GPU: %d device(s) (%s), outputs identical to each other and the host; "
	       "%llu compile(s), %llu cache hit(s) in the process\n",
	       ndev, same_arch ? "one architecture" : "mixed architectures",
	       (unsigned long long)compiles, (unsigned long long)hits);
	for (i = 0; i < ndev; i++) {
		CK(cu->cuCtxSetCurrent(d[i].ctx));
		CK(cu->cuMemFree(d[i].dx));
		CK(cu->cuMemFree(d[i].dy));
		CK(cu->cuMemFree(d[i].dz));
		CK(cu->cuMemFree(d[i].dout));
		CK(cu->cuStreamDestroy(d[i].stream));
		CK(cu->cuDevicePrimaryCtxRelease(d[i].dev));
		jitk_runtime_free(d[i].rt);
		free(d[i].out);
	}
	t_rmtree(tmp);
	free(tmp), free(cache), free(specs);
	free(hx), free(hy), free(hz);
}

/* A DLPack tensor whose device is not the runtime's is refused before
 * anything runs, naming the argument (the DLPack device is the only place
 * a device is stated: raw jitk_tensor addresses are not looked up on each
 * call, see docs/api.md). */
static void test_dlpack_other_device(void **state)
{
	jitk_compiler_options co = JITK_COMPILER_OPTIONS_INIT;
	jitk_runtime_options o = JITK_RUNTIME_OPTIONS_INIT;
	int64_t shape[2] = { 4, 64 };
	DLTensor t[4];
	jitk_arg args[4];
	const char *names[4] = { "out", "x", "y", "z" };
	jitk_call_info info = JITK_CALL_INFO_INIT;
	jitk_runtime *rt;
	char *specs;
	int i;

	(void)state;
	if (!cu) {
		printf("SKIP: no GPU: %s\n", why_no_gpu);
		skip();
	}
	specs = t_path(t_root(), "tests/families/specs");
	co.specs = specs;
	co.cache_dir = "";
	o.compiler = &co;
	assert_int_equal(jitk_runtime_new(&rt, &o), 0);
	for (i = 0; i < 4; i++) {
		memset(&t[i], 0, sizeof(t[i]));
		t[i].data = (void *)(uintptr_t)0x10000; /* never touched: refused first */
		t[i].device.device_type = kDLCUDA;
		t[i].device.device_id = 0;
		t[i].ndim = 2;
		t[i].dtype.code = kDLInt;
		t[i].dtype.bits = 32;
		t[i].dtype.lanes = 1;
		t[i].shape = shape;
		args[i] = (jitk_arg){ names[i], JITK_ARG_DLPACK, { .dlpack = &t[i] } };
	}
	t[2].device.device_id = 1; /* y claims to be on cuda:1 */
	assert_int_equal(jitk_call_dlpack(&info, rt, "tadd3", JITK_CALL_AUTO, args, 4, NULL),
			 JITK_EINVAL);
	printf("other device: %s\n", jitk_error_last()->message);
	assert_non_null(strstr(jitk_error_last()->message, "y"));
	assert_non_null(strstr(jitk_error_last()->message, "device"));
	jitk_runtime_free(rt);
	free(specs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_runtime_per_device),
		cmocka_unit_test(test_dlpack_other_device),
	};

	return T_RUN_TESTS(tests, group_setup, NULL);
}
