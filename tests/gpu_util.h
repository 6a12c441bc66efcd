/* gpu_util.h - what the GPU tests share: the driver table (cu, set by
 * the including test's group setup), why there is no GPU, checked driver
 * calls and device memory helpers (and bf16.h). Included
 * once by each GPU test; everything is static to it. */
#ifndef JITK_TEST_GPU_UTIL_H
#define JITK_TEST_GPU_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

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

#endif
