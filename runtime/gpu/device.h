/* device.h - the small interface between the runtime and a GPU, so that
 * tests can substitute a fake device (architecture, capture state, load
 * failures). The real one (driver.c) is the CUDA Driver API, looked up in
 * libcuda.so.1 at run time: nothing links against the driver. */
#ifndef JITK_DEVICE_H
#define JITK_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#ifdef JITK_COMPILE_HALF
#error "the compile half (base/, spec/, build/) must not include a CUDA driver header"
#endif
#include <cuda.h>
#include <cudaTypedefs.h>

#include "jitk.h"

typedef struct {
	int cc;       /* compute capability, e.g. 90 */
	int sm_count; /* multiprocessors */
	char name[128];
} jitk_device_info;

/* What cuTensorMapEncodeTiled is given for a TMA descriptor argument
 * (call.c builds it from a tensor and the spec's box), dimensions
 * innermost first as the driver wants them. */
#define JITK_TMA_MAX_RANK 5
typedef struct {
	int dtype; /* CUtensorMapDataType */
	unsigned rank;
	uint64_t addr;
	uint64_t dims[JITK_TMA_MAX_RANK];
	uint64_t strides[JITK_TMA_MAX_RANK - 1]; /* bytes, of dims 1 .. rank-1 */
	uint32_t box[JITK_TMA_MAX_RANK];
	uint32_t elem_strides[JITK_TMA_MAX_RANK];
	int interleave, swizzle, l2, oob; /* the driver's enums */
} jitk_tma_request;

/* One launch. A kernel whose parameter a builder made (launch.builder)
 * gets that block: params[0] points to it, built_bytes long. */
typedef struct {
	void *kernel, *primary; /* as get_kernel gave them */
	unsigned grid[3], block[3];
	unsigned cluster[3]; /* thread block cluster; all 0: none */
	unsigned smem;
	void *stream;
	void **params;
	size_t nparams;
	size_t built_bytes;
	int programmatic; /* programmatic stream serialization allowed (the
			   * kernel waits with griddepcontrol.wait) */
} jitk_launch;

/* Results are CUresult values (0 = success). */
typedef struct {
	int (*open)(void *impl, int ordinal, jitk_device_info *info);
	/* cuLibraryLoadData: context-independent loading. */
	int (*load)(void *impl, const void *image, int is_ptx, void **lib);
	/* *kernel: the CUkernel (any context of the device); *primary: its
	 * CUfunction in the device's primary context, or NULL (a launch
	 * from that context takes it: no per-launch lookup in the driver). */
	int (*get_kernel)(void *impl, void *lib, const char *name, void **kernel, void **primary);
	void (*unload)(void *impl, void *lib);
	int (*launch)(void *impl, const jitk_launch *l);
	int (*is_capturing)(void *impl, void *stream, int *capturing);
	/* Switch this thread's capture mode to relaxed (*old gets the
	 * previous mode), or set it back. */
	int (*capture_mode)(void *impl, int mode, int *old);
	/* Synchronous device-to-host copy of n bytes. */
	int (*read)(void *impl, void *dst, uint64_t src, size_t n);
	/* The allocation a device address belongs to: an id the driver never
	 * gives twice in a process (CU_POINTER_ATTRIBUTE_BUFFER_ID). */
	int (*buffer_id)(void *impl, uint64_t ptr, uint64_t *id);
	const char *(*error_name)(void *impl, int code);
	void (*close)(void *impl);
	/* cuTensorMapEncodeTiled into out (128 bytes, 64-byte aligned): host
	 * work only, nothing is launched or allocated. */
	int (*tensor_map)(void *impl, void *out, const jitk_tma_request *r);
	/* Run a parameter builder (one thread) nruns times, run r with the
	 * parameters args[r], whose first points to the 8 bytes where the
	 * address it writes to goes (set here: size bytes of device memory of
	 * the call, whose first in_bytes are in's), on a stream of its own
	 * with this thread in relaxed capture mode, then copy run r's bytes
	 * to out + r * size. */
	int (*run_builder)(void *impl, void *kernel, void *primary, void **const *args,
			   unsigned nruns, const void *in, size_t in_bytes, size_t size, void *out);
	/* Let the kernel take up to bytes of dynamic shared memory
	 * (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES). */
	int (*set_shared)(void *impl, void *kernel, void *primary, unsigned bytes);
	/* Device memory of the runtime's own (a kernel's scratch: spec args
	 * of io: scratch), bytes long, every byte 0 when this returns: made on
	 * a stream of its own with this thread in relaxed capture mode, so a
	 * capture elsewhere neither takes nor forbids it. free_mem gives it
	 * back (only when nothing may use it any more). */
	int (*alloc_zeroed)(void *impl, size_t bytes, uint64_t *ptr);
	void (*free_mem)(void *impl, uint64_t ptr);
} jitk_device_ops;

/* The CUDA driver's functions, for the real device, the GPU tests and
 * jitk bench. NULL when libcuda.so.1 or a device is missing (then *why,
 * when given, says what). Loaded once, thread-safe. */
/* The driver functions jitk uses, with the ABI version of each: fetched
 * with cuGetProcAddress at exactly that version, so that the type we call
 * through is the one we get (CUDA 13 added cuCtxSynchronize(CUcontext), for
 * one, which the newest version would return). */
#define JITK_CUDA_FUNCTIONS(X) \
	X(cuInit, 2000) \
	X(cuDeviceGetCount, 2000) \
	X(cuDeviceGet, 2000) \
	X(cuDeviceGetAttribute, 2000) \
	X(cuDeviceGetName, 2000) \
	X(cuDevicePrimaryCtxRetain, 7000) \
	X(cuDevicePrimaryCtxRelease, 11000) \
	X(cuCtxGetCurrent, 4000) \
	X(cuCtxSetCurrent, 4000) \
	X(cuCtxPushCurrent, 4000) \
	X(cuCtxPopCurrent, 4000) \
	X(cuCtxSynchronize, 2000) \
	X(cuLibraryLoadData, 12000) \
	X(cuLibraryUnload, 12000) \
	X(cuLibraryGetKernel, 12000) \
	X(cuKernelGetFunction, 12000) \
	X(cuFuncGetAttribute, 2020) \
	X(cuLaunchKernel, 4000) \
	X(cuLaunchKernelEx, 11060) \
	X(cuStreamIsCapturing, 10000) \
	X(cuThreadExchangeStreamCaptureMode, 10010) \
	X(cuStreamCreate, 2000) \
	X(cuStreamDestroy, 4000) \
	X(cuStreamSynchronize, 2000) \
	X(cuStreamBeginCapture, 10010) \
	X(cuStreamEndCapture, 10000) \
	X(cuGraphInstantiateWithFlags, 11040) \
	X(cuGraphLaunch, 10000) \
	X(cuGraphExecDestroy, 10000) \
	X(cuGraphDestroy, 10000) \
	X(cuMemAlloc, 3020) \
	X(cuMemFree, 3020) \
	X(cuMemcpyHtoD, 3020) \
	X(cuMemcpyDtoH, 3020) \
	X(cuMemcpyDtoDAsync, 3020) \
	X(cuMemcpyDtoHAsync, 3020) \
	X(cuMemcpyHtoDAsync, 3020) \
	X(cuKernelSetAttribute, 12000) \
	X(cuFuncSetAttribute, 9000) \
	X(cuMemsetD8Async, 3020) \
	X(cuEventCreate, 2000) \
	X(cuEventRecord, 2000) \
	X(cuEventSynchronize, 2000) \
	X(cuEventElapsedTime, 2000) \
	X(cuEventDestroy, 4000) \
	X(cuGetErrorName, 6000) \
	X(cuPointerGetAttribute, 4000) \
	X(cuTensorMapEncodeTiled, 12000)

typedef struct {
	int driver_version;
#define JITK_CUDA_FIELD_(name, ver) PFN_##name##_v##ver name;
	JITK_CUDA_FUNCTIONS(JITK_CUDA_FIELD_)
#undef JITK_CUDA_FIELD_
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
