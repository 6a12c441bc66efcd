/* gpu_util.h - what the GPU tests share: the driver table (cu, set by
 * the including test's group setup), why there is no GPU, checked driver
 * calls and device memory helpers (and bf16.h), the seeded generator,
 * the host e4m3 encoder and the device's div.full reciprocal. Included
 * once by each GPU test; everything is static to it. */
#ifndef JITK_TEST_GPU_UTIL_H
#define JITK_TEST_GPU_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nvrtc.h>

#include "bf16.h"
#include "common.h"
#include "gpu/device.h"

static const jitk_cuda *cu;
static const char *why_no_gpu = "";

#define CK(call)                                                              \
	do {                                                                  \
		CUresult r_ = (call);                                         \
		if (r_ != CUDA_SUCCESS) {                                     \
			const char *n_ = NULL;                                \
			cu->cuGetErrorName(r_, &n_);                          \
			fail_msg("%s: %s", #call, n_ ? n_ : "?");             \
		}                                                             \
	} while (0)

#define NEED_GPU()                                                            \
	do {                                                                  \
		if (!cu) {                                                    \
			printf("SKIP: no GPU: %s\n", why_no_gpu);             \
			skip();                                               \
		}                                                             \
	} while (0)

/* The driver (cu), a temporary directory *tmp with a private cache in
 * it, and a runtime over the repository's specs (programmatic launches
 * when asked). Without a GPU: cu NULL and why_no_gpu says why (the tests
 * skip), 0; a runtime that cannot be made on a GPU is the same. */
static inline int gpu_runtime_open(jitk_runtime **rt, char **tmp, int programmatic)
{
	jitk_runtime_options o = JITK_RUNTIME_OPTIONS_INIT;
	jitk_compiler_options co = JITK_COMPILER_OPTIONS_INIT;
	char *specs, *cache;

	*rt = NULL;
	*tmp = NULL;
	cu = jitk__cuda(&why_no_gpu);
	if (!cu)
		return 0;
	*tmp = t_tmpdir();
	cache = t_path(*tmp, "cache");
	specs = t_path(t_root(), "specs");
	co.specs = specs;
	co.cache_dir = cache;
	co.cache_path = "";
	o.compiler = &co;
	o.programmatic = programmatic;
	if (jitk_runtime_new(rt, &o)) {
		why_no_gpu = jitk_error_last()->message;
		cu = NULL;
		*rt = NULL;
	}
	free(specs);
	free(cache);
	return 0;
}

static inline CUdeviceptr dalloc(size_t n)
{
	CUdeviceptr p = 0;

	CK(cu->cuMemAlloc(&p, n ? n : 1));
	return p;
}

static inline void upload(CUdeviceptr d, const void *h, size_t n)
{
	if (n)
		CK(cu->cuMemcpyHtoD(d, h, n));
}

static inline void download(void *h, CUdeviceptr d, size_t n)
{
	if (n)
		CK(cu->cuMemcpyDtoH(h, d, n));
}

static inline void poison(CUdeviceptr d, size_t n, unsigned char v)
{
	if (n)
		CK(cu->cuMemsetD8Async(d, v, n, NULL));
}

/* ------------------------------------------------- seeded host numbers */

/* One xorshift64 stream per test binary, from a fixed seed: every run
 * draws the same inputs. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static inline uint64_t rnd64(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static inline uint32_t rnd32(void)
{
	return (uint32_t)(rnd64() >> 32);
}

/* Standard normal (Box-Muller over two draws). */
static inline double rnd_normal(void)
{
	double u1 = ((double)(rnd64() >> 11) + 0.5) / 9007199254740992.0;
	double u2 = ((double)(rnd64() >> 11) + 0.5) / 9007199254740992.0;

	return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* ------------------------------------------------------- host numerics */

/* e4m3fn of a finite v in [-448, 448], nearest even, from the bits: the
 * 23-bit mantissa rounded to 3 bits (normal), or v * 2^9 rounded to an
 * integer (subnormal, below 2^-6). test_gpu's test_host_e4m3 checks it
 * against the definition for every bf16 magnitude. */
static inline uint8_t e4m3_rn(float v)
{
	uint32_t u, r;
	uint8_t sign;
	int ex;

	memcpy(&u, &v, 4);
	sign = (uint8_t)((u >> 24) & 0x80);
	u &= 0x7fffffffu;
	if (u < 0x3c800000u) /* below 2^-6 */
		return (uint8_t)(sign | (uint8_t)nearbyintf(fabsf(v) * 512.0f));
	r = (u + 0x7ffffu + ((u >> 20) & 1u)) >> 20; /* exponent and 3 mantissa bits */
	ex = (int)(r >> 3) - 127 + 7;
	if (ex > 15 || (ex == 15 && (r & 7u) == 7u))
		return (uint8_t)(sign | 0x7e);
	return (uint8_t)(sign | (uint8_t)(ex << 3) | (uint8_t)(r & 7u));
}

/* ------------------------------------------------------------- device */

/* The reciprocal the device computes with div.full.f32 for s, from a
 * kernel compiled here with NVRTC alone for arch (independent of jitk's
 * templates); built on first use. */
static inline float device_rcp(const char *arch, float s)
{
	static CUfunction fn;
	static CUdeviceptr d_s, d_out;
	float r = 0.0f;
	void *params[2] = { &d_s, &d_out };

	if (!fn) {
		static const char src[] =
			"extern \"C\" __global__ void rcp(const float *s, float *o) {\n"
			"  float r; asm(\"div.full.f32 %0, %1, %2;\" : \"=f\"(r) : \"f\"(1.0f), \"f\"(*s));\n"
			"  *o = r;\n}\n";
		nvrtcProgram prog;
		char opt[48];
		const char *opts[1] = { opt };
		size_t size;
		char *cubin;
		CUlibrary lib;
		CUkernel k;

		snprintf(opt, sizeof(opt), "--gpu-architecture=%s", arch);
		assert_int_equal(nvrtcCreateProgram(&prog, src, "rcp.cu", 0, NULL, NULL), 0);
		assert_int_equal(nvrtcCompileProgram(prog, 1, opts), 0);
		assert_int_equal(nvrtcGetCUBINSize(prog, &size), 0);
		cubin = malloc(size);
		assert_non_null(cubin);
		assert_int_equal(nvrtcGetCUBIN(prog, cubin), 0);
		nvrtcDestroyProgram(&prog);
		CK(cu->cuLibraryLoadData(&lib, cubin, NULL, NULL, 0, NULL, NULL, 0));
		CK(cu->cuLibraryGetKernel(&k, lib, "rcp"));
		fn = (CUfunction)k;
		free(cubin);
		d_s = dalloc(4);
		d_out = dalloc(4);
	}
	upload(d_s, &s, 4);
	CK(cu->cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
	CK(cu->cuCtxSynchronize());
	download(&r, d_out, 4);
	return r;
}

#endif
