/* device.h - the small interface between the runtime and a GPU, so that
 * tests can substitute a fake device (architecture, capture state, load
 * failures). The real one (driver.c) is the CUDA Driver API, looked up in
 * libcuda.so.1 at run time: nothing links against the driver. */
#ifndef JITK_DEVICE_H
#define JITK_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include <cuda.h>
#include <cudaTypedefs.h>

#include "jitk.h"

typedef struct {
	int cc;       /* compute capability, e.g. 90 */
	int sm_count; /* multiprocessors */
	char name[128];
} jitk_device_info;

/* Results are CUresult values (0 = success). */
typedef struct {
	int (*open)(void *impl, int ordinal, jitk_device_info *info);
	/* cuLibraryLoadData: context-independent loading. */
	int (*load)(void *impl, const void *image, int is_ptx, void **lib);
	int (*get_kernel)(void *impl, void *lib, const char *name, void **kernel);
	void (*unload)(void *impl, void *lib);
	int (*launch)(void *impl, void *kernel, const unsigned grid[3],
		      const unsigned block[3], unsigned smem, void *stream,
		      void **params, size_t nparams);
	int (*is_capturing)(void *impl, void *stream, int *capturing);
	/* Switch this thread's capture mode to relaxed (*old gets the
	 * previous mode), or set it back. */
	int (*capture_mode)(void *impl, int mode, int *old);
	/* Synchronous device-to-host copy of n bytes. */
	int (*read)(void *impl, void *dst, uint64_t src, size_t n);
	const char *(*error_name)(void *impl, int code);
	void (*close)(void *impl);
} jitk_device_ops;

/* The CUDA driver's functions, for the real device, the GPU tests and
 * jitk bench. NULL when libcuda.so.1 or a device is missing (then *why,
 * when given, says what). Loaded once, thread-safe. */
typedef struct {
	int driver_version;
	PFN_cuInit_v2000 cuInit;
	PFN_cuDeviceGetCount_v2000 cuDeviceGetCount;
	PFN_cuDeviceGet_v2000 cuDeviceGet;
	PFN_cuDeviceGetAttribute_v2000 cuDeviceGetAttribute;
	PFN_cuDeviceGetName_v2000 cuDeviceGetName;
	PFN_cuDevicePrimaryCtxRetain_v7000 cuDevicePrimaryCtxRetain;
	PFN_cuDevicePrimaryCtxRelease_v11000 cuDevicePrimaryCtxRelease;
	PFN_cuCtxGetCurrent_v4000 cuCtxGetCurrent;
	PFN_cuCtxSetCurrent_v4000 cuCtxSetCurrent;
	PFN_cuCtxPushCurrent_v4000 cuCtxPushCurrent;
	PFN_cuCtxPopCurrent_v4000 cuCtxPopCurrent;
	PFN_cuCtxSynchronize_v2000 cuCtxSynchronize;
	PFN_cuLibraryLoadData_v12000 cuLibraryLoadData;
	PFN_cuLibraryUnload_v12000 cuLibraryUnload;
	PFN_cuLibraryGetKernel_v12000 cuLibraryGetKernel;
	PFN_cuKernelGetFunction_v12000 cuKernelGetFunction;
	PFN_cuFuncGetAttribute_v2020 cuFuncGetAttribute;
	PFN_cuLaunchKernel_v4000 cuLaunchKernel;
	PFN_cuStreamIsCapturing_v10000 cuStreamIsCapturing;
	PFN_cuThreadExchangeStreamCaptureMode_v10010 cuThreadExchangeStreamCaptureMode;
	PFN_cuStreamCreate_v2000 cuStreamCreate;
	PFN_cuStreamDestroy_v4000 cuStreamDestroy;
	PFN_cuStreamSynchronize_v2000 cuStreamSynchronize;
	PFN_cuStreamBeginCapture_v10010 cuStreamBeginCapture;
	PFN_cuStreamEndCapture_v10000 cuStreamEndCapture;
	PFN_cuGraphInstantiateWithFlags_v11040 cuGraphInstantiateWithFlags;
	PFN_cuGraphLaunch_v10000 cuGraphLaunch;
	PFN_cuGraphExecDestroy_v10000 cuGraphExecDestroy;
	PFN_cuGraphDestroy_v10000 cuGraphDestroy;
	PFN_cuMemAlloc_v3020 cuMemAlloc;
	PFN_cuMemFree_v3020 cuMemFree;
	PFN_cuMemcpyHtoD_v3020 cuMemcpyHtoD;
	PFN_cuMemcpyDtoH_v3020 cuMemcpyDtoH;
	PFN_cuMemcpyDtoDAsync_v3020 cuMemcpyDtoDAsync;
	PFN_cuMemsetD8Async_v3020 cuMemsetD8Async;
	PFN_cuEventCreate_v2000 cuEventCreate;
	PFN_cuEventRecord_v2000 cuEventRecord;
	PFN_cuEventSynchronize_v2000 cuEventSynchronize;
	PFN_cuEventElapsedTime_v2000 cuEventElapsedTime;
	PFN_cuEventDestroy_v4000 cuEventDestroy;
	PFN_cuGetErrorName_v6000 cuGetErrorName;
} jitk_cuda;

const jitk_cuda *jitk__cuda(const char **why);

/* The real device: ops over jitk__cuda(). impl from jitk__cuda_device_new. */
extern const jitk_device_ops jitk__cuda_ops;
void *jitk__cuda_device_new(void);

/* Create a runtime over any device (the fake one in tests). ops and impl
 * stay the caller's; impl is closed with ops->close by jitk_runtime_free. */
int jitk__runtime_new_with(jitk_runtime **out, const jitk_runtime_options *opts,
			   const jitk_device_ops *ops, void *impl);

#endif
