/* driver.c - the CUDA Driver API, looked up at run time.
 *
 * The library must load where there is no libcuda.so.1 (CPU-only CI
 * images precompile caches), so the driver is opened with dlopen once and
 * every function is fetched through cuGetProcAddress at the ABI of the
 * headers we were built with. This is the only dlopen in jitk: kernels are
 * cubins loaded with cuLibraryLoadData, never shared objects. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/device.h"
#include "base/internal.h"

static jitk_cuda cuda;
static const jitk_cuda *cuda_ok;
static char cuda_why[256];
static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;

typedef CUresult (*get_proc_fn)(const char *, void **, int, cuuint64_t,
				CUdriverProcAddressQueryResult *);

static void cuda_load(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	get_proc_fn get;
	CUresult r;
	int missing = 0;

	if (!h) {
		snprintf(cuda_why, sizeof(cuda_why), "no CUDA driver (libcuda.so.1 not found)");
		return;
	}
	get = (get_proc_fn)dlsym(h, "cuGetProcAddress_v2");
	if (!get) {
		snprintf(cuda_why, sizeof(cuda_why),
			 "the CUDA driver is too old (no cuGetProcAddress_v2; need 12.0+)");
		return;
	}
#define LOAD(name, ver)                                                       \
	do {                                                                  \
		CUdriverProcAddressQueryResult q_;                            \
		void *p_ = NULL;                                              \
		if (get(#name, &p_, ver, CU_GET_PROC_ADDRESS_DEFAULT, &q_) || !p_) { \
			if (!missing)                                         \
				snprintf(cuda_why, sizeof(cuda_why),          \
					 "the CUDA driver lacks %s", #name);  \
			missing = 1;                                          \
		}                                                             \
		memcpy(&cuda.name, &p_, sizeof(p_));                          \
	} while (0);
	JITK_CUDA_FUNCTIONS(LOAD)
#undef LOAD
	if (missing)
		return;
	if ((r = cuda.cuInit(0)) != CUDA_SUCCESS) {
		const char *name = NULL;

		cuda.cuGetErrorName(r, &name);
		snprintf(cuda_why, sizeof(cuda_why), "cuInit failed: %s",
			 name ? name : "unknown error");
		return;
	}
	{
		PFN_cuDriverGetVersion_v2020 ver = (PFN_cuDriverGetVersion_v2020)dlsym(h, "cuDriverGetVersion");

		if (ver)
			ver(&cuda.driver_version);
	}
	cuda_ok = &cuda; /* the handle stays open for the process */
}

const jitk_cuda *jitk__cuda(const char **why)
{
	pthread_once(&cuda_once, cuda_load);
	if (!cuda_ok && why)
		*why = cuda_why;
	return cuda_ok;
}

/* ---------------------------------------------------------------- ops */

/* The driver call that failed last in this thread, and its code: error
 * messages name the call ("CUDA_ERROR_INVALID_IMAGE in cuLibraryLoadData"),
 * not only the code. */
static _Thread_local const char *cu_failed_call;
static _Thread_local int cu_failed_code;

static int cu_note(CUresult r, const char *call)
{
	if (r != CUDA_SUCCESS) {
		cu_failed_call = call;
		cu_failed_code = (int)r;
	}
	return (int)r;
}

/* JITK_CU_TRY(d, cuFn, args...) calls the driver's cuFn and, when it
 * fails, records the call's name for op_error_name. */
#define JITK_CU_TRY(d, fn, ...) cu_note((d)->cu->fn(__VA_ARGS__), #fn)

typedef struct {
	const jitk_cuda *cu;
	CUdevice dev;
	CUcontext primary;
	int retained;
} cuda_device;

void *jitk__cuda_device_new(void)
{
	const jitk_cuda *cu = jitk__cuda(NULL);
	cuda_device *d;

	if (!cu)
		return NULL;
	d = calloc(1, sizeof(*d));
	if (d)
		d->cu = cu;
	return d;
}

static int op_open(void *impl, int ordinal, jitk_device_info *info)
{
	cuda_device *d = impl;
	const jitk_cuda *cu = d->cu;
	CUcontext cur = NULL;
	int major = 0, minor = 0, r;

	if ((r = JITK_CU_TRY(d, cuDeviceGet, &d->dev, ordinal)))
		return r;
	if ((r = JITK_CU_TRY(d, cuDeviceGetAttribute, &major,
			     CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d->dev)) ||
	    (r = JITK_CU_TRY(d, cuDeviceGetAttribute, &minor,
			     CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d->dev)) ||
	    (r = JITK_CU_TRY(d, cuDeviceGetAttribute, &info->sm_count,
			     CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d->dev)))
		return r;
	info->cc = major * 10 + minor;
	if ((r = JITK_CU_TRY(d, cuDeviceGetName, info->name, (int)sizeof(info->name), d->dev)))
		return r;
	if ((r = JITK_CU_TRY(d, cuDevicePrimaryCtxRetain, &d->primary, d->dev)))
		return r;
	d->retained = 1;
	/* Make the primary context current if this thread has none, as the
	 * CUDA runtime would on first use. */
	if (!cu->cuCtxGetCurrent(&cur) && !cur)
		cu->cuCtxSetCurrent(d->primary);
	return 0;
}

static int op_load(void *impl, const void *image, int is_ptx, void **lib)
{
	cuda_device *d = impl;

	(void)is_ptx; /* the driver tells cubin from PTX itself */
	return JITK_CU_TRY(d, cuLibraryLoadData, (CUlibrary *)lib, image, NULL, NULL, 0, NULL, NULL, 0);
}

static int op_get_kernel(void *impl, void *lib, const char *name, void **kernel, void **primary)
{
	cuda_device *d = impl;
	const jitk_cuda *cu = d->cu;
	CUcontext cur = NULL;
	int r, pushed = 0;

	*primary = NULL;
	if ((r = JITK_CU_TRY(d, cuLibraryGetKernel, (CUkernel *)kernel, (CUlibrary)lib, name)))
		return r;
	/* its function in the primary context (loaded there now, as the
	 * first launch would); without one, launches take the CUkernel */
	if (cu->cuCtxGetCurrent(&cur))
		return 0;
	if (cur != d->primary) {
		if (cu->cuCtxPushCurrent(d->primary))
			return 0;
		pushed = 1;
	}
	if (cu->cuKernelGetFunction((CUfunction *)primary, (CUkernel)*kernel))
		*primary = NULL;
	if (pushed)
		cu->cuCtxPopCurrent(&cur);
	return 0;
}

static void op_unload(void *impl, void *lib)
{
	cuda_device *d = impl;

	d->cu->cuLibraryUnload((CUlibrary)lib);
}

static int op_launch(void *impl, const jitk_launch *l)
{
	cuda_device *d = impl;
	CUcontext cur = NULL;
	CUlaunchAttribute attr[2];
	CUlaunchConfig cfg;
	void *kernel = l->kernel;
	unsigned n = 0;

	/* A CUkernel is accepted where a CUfunction is: it launches in the
	 * calling thread's current context, which the driver looks up. In
	 * the primary context (where PyTorch and the CUDA runtime run) the
	 * kernel's CUfunction there saves that lookup. */
	if (l->primary && !d->cu->cuCtxGetCurrent(&cur) && cur == d->primary)
		kernel = l->primary;
	/* a built block is the kernel's one parameter: params[0] points to it */
	if (!l->programmatic && !l->cluster[0])
		return JITK_CU_TRY(d, cuLaunchKernel, (CUfunction)kernel, l->grid[0], l->grid[1],
				   l->grid[2], l->block[0], l->block[1], l->block[2], l->smem,
				   (CUstream)l->stream, l->params, NULL);
	memset(attr, 0, sizeof(attr));
	memset(&cfg, 0, sizeof(cfg));
	if (l->programmatic) {
		attr[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
		attr[n++].value.programmaticStreamSerializationAllowed = 1;
	}
	if (l->cluster[0]) {
		attr[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
		attr[n].value.clusterDim.x = l->cluster[0];
		attr[n].value.clusterDim.y = l->cluster[1];
		attr[n++].value.clusterDim.z = l->cluster[2];
	}
	cfg.gridDimX = l->grid[0];
	cfg.gridDimY = l->grid[1];
	cfg.gridDimZ = l->grid[2];
	cfg.blockDimX = l->block[0];
	cfg.blockDimY = l->block[1];
	cfg.blockDimZ = l->block[2];
	cfg.sharedMemBytes = l->smem;
	cfg.hStream = (CUstream)l->stream;
	cfg.attrs = attr;
	cfg.numAttrs = n;
	return JITK_CU_TRY(d, cuLaunchKernelEx, &cfg, (CUfunction)kernel, l->params, NULL);
}

/* The primary context current on this thread when none is: *pushed says
 * whether to pop it. */
static int primary_current(cuda_device *d, int *pushed)
{
	CUcontext cur = NULL;

	*pushed = 0;
	if (!d->cu->cuCtxGetCurrent(&cur) && cur)
		return 0;
	*pushed = 1;
	return JITK_CU_TRY(d, cuCtxPushCurrent, d->primary);
}

/* Work of jitk's own on the device (a builder's runs, scratch): in the
 * primary context, with this thread in relaxed capture mode so that a
 * capture elsewhere neither takes nor forbids it, on a stream of its own. */
typedef struct {
	int pushed;
	CUstreamCaptureMode mode;
	CUstream s;
} private_work;

static int private_begin(cuda_device *d, private_work *w)
{
	CUcontext cur = NULL;
	int r;

	w->mode = CU_STREAM_CAPTURE_MODE_RELAXED;
	w->s = NULL;
	if ((r = primary_current(d, &w->pushed)))
		return r;
	if (!(r = JITK_CU_TRY(d, cuThreadExchangeStreamCaptureMode, &w->mode))) {
		if (!(r = JITK_CU_TRY(d, cuStreamCreate, &w->s, CU_STREAM_NON_BLOCKING)))
			return 0;
		d->cu->cuThreadExchangeStreamCaptureMode(&w->mode);
	}
	if (w->pushed)
		d->cu->cuCtxPopCurrent(&cur);
	return r;
}

static void private_end(cuda_device *d, private_work *w)
{
	CUcontext cur = NULL;

	d->cu->cuStreamDestroy(w->s);
	d->cu->cuThreadExchangeStreamCaptureMode(&w->mode);
	if (w->pushed)
		d->cu->cuCtxPopCurrent(&cur);
}

static int op_run_builder(void *impl, void *kernel, void *primary, void **const *args,
			  unsigned nruns, const void *in, size_t in_bytes, size_t size, void *out)
{
	cuda_device *d = impl;
	private_work w;
	CUcontext cur = NULL;
	CUdeviceptr mem = 0;
	int r, r2;
	unsigned i;

	if ((r = private_begin(d, &w)))
		return r;
	if (primary && !d->cu->cuCtxGetCurrent(&cur) && cur == d->primary)
		kernel = primary;
	if (!(r = JITK_CU_TRY(d, cuMemAlloc, &mem, (size_t)nruns * size))) {
		for (i = 0; i < nruns && !r; i++) {
			uint64_t at = (uint64_t)mem + (uint64_t)i * size;

			memcpy(args[i][0], &at, sizeof(at));
			if (in_bytes && (r = JITK_CU_TRY(d, cuMemcpyHtoDAsync, (CUdeviceptr)at, in,
							 in_bytes, w.s)))
				break;
			r = JITK_CU_TRY(d, cuLaunchKernel, (CUfunction)kernel, 1, 1, 1, 1, 1, 1, 0, w.s,
					args[i], NULL);
		}
		if (!r)
			r = JITK_CU_TRY(d, cuMemcpyDtoHAsync, out, mem, (size_t)nruns * size, w.s);
		r2 = JITK_CU_TRY(d, cuStreamSynchronize, w.s);
		r = r ? r : r2;
		d->cu->cuMemFree(mem);
	}
	private_end(d, &w);
	return r;
}

static int op_set_shared(void *impl, void *kernel, void *primary, unsigned bytes)
{
	cuda_device *d = impl;
	int r = JITK_CU_TRY(d, cuKernelSetAttribute, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
			    (int)bytes, (CUkernel)kernel, d->dev);

	if (!r && primary)
		r = JITK_CU_TRY(d, cuFuncSetAttribute, (CUfunction)primary,
				CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)bytes);
	return r;
}

static int op_alloc_zeroed(void *impl, size_t bytes, uint64_t *ptr)
{
	cuda_device *d = impl;
	private_work w;
	CUdeviceptr mem = 0;
	int r;

	*ptr = 0;
	if ((r = private_begin(d, &w)))
		return r;
	if (!(r = JITK_CU_TRY(d, cuMemAlloc, &mem, bytes)) &&
	    !(r = JITK_CU_TRY(d, cuMemsetD8Async, mem, 0, bytes, w.s)))
		r = JITK_CU_TRY(d, cuStreamSynchronize, w.s);
	if (r && mem)
		d->cu->cuMemFree(mem);
	else
		*ptr = (uint64_t)mem;
	private_end(d, &w);
	return r;
}

static void op_free_mem(void *impl, uint64_t ptr)
{
	cuda_device *d = impl;
	CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
	CUcontext cur = NULL;
	int pushed;

	if (!ptr || primary_current(d, &pushed))
		return;
	if (!d->cu->cuThreadExchangeStreamCaptureMode(&mode)) {
		d->cu->cuMemFree((CUdeviceptr)ptr);
		d->cu->cuThreadExchangeStreamCaptureMode(&mode);
	}
	if (pushed)
		d->cu->cuCtxPopCurrent(&cur);
}

static int op_is_capturing(void *impl, void *stream, int *capturing)
{
	cuda_device *d = impl;
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
	int r = JITK_CU_TRY(d, cuStreamIsCapturing, (CUstream)stream, &st);

	*capturing = st != CU_STREAM_CAPTURE_STATUS_NONE;
	return r;
}

static int op_capture_mode(void *impl, int mode, int *old)
{
	cuda_device *d = impl;
	CUstreamCaptureMode m = (CUstreamCaptureMode)mode;
	int r = JITK_CU_TRY(d, cuThreadExchangeStreamCaptureMode, &m);

	if (old)
		*old = (int)m;
	return r;
}

static int op_read(void *impl, void *dst, uint64_t src, size_t n)
{
	cuda_device *d = impl;
	CUcontext cur = NULL;
	int r, pushed;

	if ((r = primary_current(d, &pushed)))
		return r;
	r = JITK_CU_TRY(d, cuMemcpyDtoH, dst, (CUdeviceptr)src, n);
	if (pushed)
		d->cu->cuCtxPopCurrent(&cur);
	return r;
}

static int op_buffer_id(void *impl, uint64_t ptr, uint64_t *id)
{
	cuda_device *d = impl;
	unsigned long long v = 0;
	int r = JITK_CU_TRY(d, cuPointerGetAttribute, &v, CU_POINTER_ATTRIBUTE_BUFFER_ID,
			    (CUdeviceptr)ptr);

	*id = v;
	return r;
}

static const char *op_error_name(void *impl, int code)
{
	static _Thread_local char text[128];
	cuda_device *d = impl;
	const char *name = NULL;

	if (d->cu->cuGetErrorName((CUresult)code, &name) || !name)
		name = "unknown CUDA error";
	if (!cu_failed_call || cu_failed_code != code)
		return name;
	snprintf(text, sizeof(text), "%s in %s", name, cu_failed_call);
	return text;
}

static void op_close(void *impl)
{
	cuda_device *d = impl;

	if (!d)
		return;
	if (d->retained)
		d->cu->cuDevicePrimaryCtxRelease(d->dev);
	free(d);
}

static int op_tensor_map(void *impl, void *out, const jitk_tma_request *r)
{
	cuda_device *d = impl;
	cuuint64_t dims[JITK_TMA_MAX_RANK], strides[JITK_TMA_MAX_RANK - 1];
	cuuint32_t box[JITK_TMA_MAX_RANK], es[JITK_TMA_MAX_RANK];
	unsigned i;

	for (i = 0; i < r->rank; i++) {
		dims[i] = r->dims[i];
		box[i] = r->box[i];
		es[i] = r->elem_strides[i];
		if (i + 1 < r->rank)
			strides[i] = r->strides[i];
	}
	return JITK_CU_TRY(d, cuTensorMapEncodeTiled, (CUtensorMap *)out,
			   (CUtensorMapDataType)r->dtype, r->rank, (void *)(uintptr_t)r->addr, dims,
			   strides, box, es, (CUtensorMapInterleave)r->interleave,
			   (CUtensorMapSwizzle)r->swizzle, (CUtensorMapL2promotion)r->l2,
			   (CUtensorMapFloatOOBfill)r->oob);
}

const jitk_device_ops jitk__cuda_ops = {
	op_open, op_load, op_get_kernel, op_unload, op_launch, op_is_capturing,
	op_capture_mode, op_read, op_buffer_id, op_error_name, op_close, op_tensor_map,
	op_run_builder, op_set_shared, op_alloc_zeroed, op_free_mem,
};
