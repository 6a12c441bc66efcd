/*
 * jitk.h - JIT kernel compiler and loader for CUDA.
 *
 * Two layers, one header:
 *
 *  - the compiler (jitk_compiler_*): YAML specs, template instantiation,
 *    NVRTC and the on-disk cubin cache. It needs no GPU and no libcuda.so.1,
 *    so CPU-only machines can precompile caches.
 *  - the runtime (jitk_runtime_*, jitk_kernel_*, and the typed launch
 *    functions): bound to one device through the CUDA Driver API, loaded at
 *    run time; kernels are requested by name, resolved once (cache layers,
 *    else NVRTC) and launched with cuLaunchKernel.
 *
 * Conventions: functions return a status (JITK_OK == 0, errors < 0,
 * JITK_FALLBACK > 0). The out-parameter comes first and is named out; what
 * is returned through **out is owned by the caller unless said otherwise.
 * After a failure, jitk_error_last() tells what happened on this thread.
 * The library never prints; it logs through the callback in the options.
 */
#ifndef JITK_H
#define JITK_H

#include <stddef.h>
#include <stdint.h>

#include "jitk/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built with hidden visibility; what is here is exported. */
#if defined(__GNUC__) && __GNUC__ >= 4
#define JITK_API __attribute__((visibility("default")))
#else
#define JITK_API
#endif

/* ---------------------------------------------------------------- status */

/* X(name, value, description): one list generates the enum, jitk_strerror()
 * and jitk_status_name(). */
#define JITK_STATUS_LIST(X)                                                   \
	X(OK, 0, "success")                                                   \
	X(FALLBACK, 1, "fused path not applicable; nothing was launched")     \
	X(EINVAL, -1, "invalid argument")                                     \
	X(ENOMEM, -2, "out of memory")                                        \
	X(ENOENT, -3, "no such symbol")                                       \
	X(ESPEC, -4, "invalid kernel spec")                                   \
	X(EARCH, -5, "not available on this architecture")                   \
	X(ECOMPILE, -6, "kernel compilation failed")                          \
	X(ENOCOMPILE, -7, "cache miss while compiling is disabled")           \
	X(EIO, -8, "input/output error")                                      \
	X(ENODEV, -9, "no CUDA driver or device")                             \
	X(EDRIVER, -10, "CUDA driver call failed")                            \
	X(ECAPTURE, -11, "kernel not resolved and the stream is capturing")

typedef enum {
#define JITK_STATUS_ENUM_(name, value, text) JITK_##name = value,
	JITK_STATUS_LIST(JITK_STATUS_ENUM_)
#undef JITK_STATUS_ENUM_
	JITK_STATUS_END_ = -12
} jitk_status;

/* A static description of status ("invalid argument"); never NULL. */
JITK_API const char *jitk_strerror(int status);
/* The enumerator's name without prefix ("EINVAL"); never NULL. */
JITK_API const char *jitk_status_name(int status);

/* What the last failing call on this thread reported. message is one line
 * that names what failed (file:line:col for specs; symbol, variant and
 * architecture for compiles). detail holds the full NVRTC log after a
 * compile error (else ""). Both stay valid until the next jitk call on this
 * thread. Never NULL; status is JITK_OK when nothing failed yet. */
typedef struct {
	int status;
	const char *message;
	const char *detail;
} jitk_error;
JITK_API const jitk_error *jitk_error_last(void);

/* --------------------------------------------------------------- logging */

typedef enum {
	JITK_LOG_ERROR = 0,
	JITK_LOG_WARN = 1,
	JITK_LOG_INFO = 2,
	JITK_LOG_DEBUG = 3
} jitk_log_level;

/* Called with one line (no newline), possibly from several threads at
 * once; must not call back into jitk. */
typedef void (*jitk_log_fn)(void *payload, jitk_log_level level,
			    const char *message);

/* -------------------------------------------------------------- compiler */

typedef struct jitk_compiler jitk_compiler;

/* Options of the compiler. NULL strings and negative integers mean "take
 * it from the environment, else the default":
 *   specs       colon-separated spec directories ($JITK_SPECS, else the
 *               installed share/jitk/specs, else ./specs)
 *   cache_dir   writable cache ($JITK_CACHE_DIR, else $XDG_CACHE_HOME/jitk,
 *               else ~/.cache/jitk); "" = no writable cache
 *   cache_path  colon-separated read-only layers ($JITK_CACHE_PATH)
 *   no_compile  a cache miss is an error ($JITK_NO_COMPILE=1)
 *   force_compile  ignore every cache hit ($JITK_FORCE_COMPILE=1)
 *   dump_dir    write every instantiated source there ($JITK_DUMP_DIR)
 *   log_level   $JITK_LOG=error|warn|info|debug, default warn
 *   cache_read_only  use cache_dir for lookups only, never write it
 *               ($JITK_CACHE_READONLY=1); misses compile in memory
 * Flags and options win over the environment. */
typedef struct {
	unsigned version;
	const char *specs;
	const char *cache_dir;
	const char *cache_path;
	int no_compile;
	int force_compile;
	const char *dump_dir;
	jitk_log_fn log;
	void *log_payload;
	int log_level;
	int cache_read_only;
} jitk_compiler_options;

#define JITK_COMPILER_OPTIONS_VERSION 1
#define JITK_COMPILER_OPTIONS_INIT                                            \
	{ JITK_COMPILER_OPTIONS_VERSION, NULL, NULL, NULL, -1, -1, NULL,      \
	  NULL, NULL, -1, -1 }

/* Load and validate every spec, set up the cache. *out is the caller's,
 * freed with jitk_compiler_free(). JITK_ESPEC (with file:line:col in
 * jitk_error_last()) when a spec is bad, JITK_EINVAL for bad options,
 * JITK_ENOMEM. An unusable cache directory is not an error: the compiler
 * then works in memory and logs one warning. Thread-safe once created. */
JITK_API int jitk_compiler_new(jitk_compiler **out, const jitk_compiler_options *opts);
/* NULL is a no-op. */
JITK_API void jitk_compiler_free(jitk_compiler *compiler);

/* Number of symbol instances, and the i-th canonical name (borrowed from
 * the compiler). Instances of a symbol whose spec lists several values for
 * a parameter are named "symbol[param=value]". */
JITK_API size_t jitk_symbol_count(const jitk_compiler *compiler);
JITK_API const char *jitk_symbol_name(const jitk_compiler *compiler, size_t i);

/* Human-readable decision for NAME on ARCH ("sm_90", "sm_100a", ...): the
 * variant that runs, or the fallback and the reason. *out is malloc'd, the
 * caller frees it. Returns JITK_OK when the symbol or its fallback can run,
 * JITK_EARCH when neither can (text still written), JITK_ENOENT, JITK_EINVAL
 * for a malformed architecture or one NVRTC cannot compile for (the message
 * lists those it can). Needs no GPU. */
JITK_API int jitk_explain(char **out, jitk_compiler *compiler, const char *name,
		 const char *arch);

/* Make sure the cubin of NAME for ARCH is in the cache (compiling it if
 * needed). *out_origin, when not NULL, receives 0 = compiled now, 1 = found
 * in the writable cache, 2 = found in a read-only layer. JITK_EARCH when a
 * gate forbids the symbol there, JITK_ECOMPILE, JITK_ENOCOMPILE, JITK_EINVAL
 * as for jitk_explain. */
JITK_API int jitk_precompile(int *out_origin, jitk_compiler *compiler, const char *name,
		    const char *arch);

/* --------------------------------------------------------------- runtime */

typedef struct jitk_runtime jitk_runtime;
typedef struct jitk_kernel jitk_kernel;

/* A CUstream or cudaStream_t (NULL = the legacy default stream). */
typedef void *jitk_stream;
/* A CUdeviceptr, or a cudaMalloc'd pointer cast to an integer. */
typedef uint64_t jitk_devptr;

/* What happens when a kernel that is not resolved yet is requested while
 * its stream is being captured into a CUDA graph. */
typedef enum {
	/* Return JITK_ECAPTURE and launch nothing: resolve (jitk_preload)
	 * before capture. The capture itself is left intact. Default. */
	JITK_CAPTURE_ERROR = 0,
	/* Resolve anyway: compiling and cuLibraryLoadData are not stream
	 * operations, so a relaxed-mode capture survives. */
	JITK_CAPTURE_RESOLVE = 1
} jitk_capture_policy;

typedef struct {
	unsigned version;
	int device; /* CUDA device ordinal */
	jitk_capture_policy capture;
	jitk_compiler_options compiler;
	/* Since version 2. Nonzero: on sm_90 and newer, launch the kernels of
	 * spec families that declare `launch: { programmatic: true }` (their
	 * templates wait for the previous kernel with griddepcontrol.wait
	 * before touching memory) with programmatic dependent launch, so that
	 * a kernel's launch and set-up overlap the end of the kernel before it
	 * on the stream. Results are the same either way. */
	int programmatic;
} jitk_runtime_options;

#define JITK_RUNTIME_OPTIONS_VERSION 2
#define JITK_RUNTIME_OPTIONS_INIT                                             \
	{ JITK_RUNTIME_OPTIONS_VERSION, 0, JITK_CAPTURE_ERROR,                \
	  JITK_COMPILER_OPTIONS_INIT, 0 }

/* Open the CUDA driver (libcuda.so.1, looked up at run time), bind the
 * device, read its architecture and load the specs. *out is the caller's.
 * JITK_ENODEV when there is no driver or device, JITK_ESPEC, JITK_ENOMEM.
 * Makes the device's primary context current on this thread when no context
 * is. Kernels load with cuLibraryLoadData, so they launch in any context of
 * the device. All other runtime functions are thread-safe. */
JITK_API int jitk_runtime_new(jitk_runtime **out, const jitk_runtime_options *opts);
/* NULL is a no-op. No launch of this runtime may be in flight. */
JITK_API void jitk_runtime_free(jitk_runtime *rt);
/* "sm_90" and so on; borrowed. */
JITK_API const char *jitk_runtime_arch(const jitk_runtime *rt);
/* The compiler the runtime owns; borrowed. */
JITK_API jitk_compiler *jitk_runtime_compiler(jitk_runtime *rt);

/* The kernel called NAME, resolved on first use: cache layers, else NVRTC,
 * then cuLibraryLoadData. Later calls are one lock-free read. *out is
 * borrowed from rt. JITK_ENOENT, JITK_EARCH (a gate forbids it here; see
 * jitk_explain), JITK_ECOMPILE, JITK_ENOCOMPILE, JITK_EDRIVER. */
JITK_API int jitk_kernel_get(jitk_kernel **out, jitk_runtime *rt, const char *name);

/* Resolve the N named kernels (all kernels that can run on this device when
 * names is NULL) so that later requests never compile or load, e.g. before
 * CUDA graph capture. Stops at the first failure. */
JITK_API int jitk_preload(jitk_runtime *rt, const char *const *names, size_t n);

/* One kernel argument for the generic launch. type must match the spec's
 * argument type; name, when not NULL, must match the spec's name. */
typedef enum {
	JITK_ARG_PTR = 1, /* device pointer, in v.ptr */
	JITK_ARG_I32 = 2,
	JITK_ARG_I64 = 3,
	JITK_ARG_F32 = 4
} jitk_arg_type;

typedef struct {
	const char *name;
	jitk_arg_type type;
	union {
		jitk_devptr ptr;
		int32_t i32;
		int64_t i64;
		float f32;
	} v;
} jitk_arg;

/* Launch K with ARGS in the symbol's spec order. The arguments are checked
 * against the spec (count, types, names, non-NULL and aligned pointers,
 * integer ranges) before anything is launched: JITK_EINVAL names the first
 * bad argument. Launches nothing and returns JITK_OK when the grid is empty
 * (rows == 0). JITK_EDRIVER when cuLaunchKernel fails. */
JITK_API int jitk_kernel_launch(jitk_kernel *k, const jitk_arg *args, size_t nargs,
		       jitk_stream stream);
/* jitk_kernel_get() then jitk_kernel_launch(). */
JITK_API int jitk_launch(jitk_runtime *rt, const char *name, const jitk_arg *args,
		size_t nargs, jitk_stream stream);

/* Counters of one kernel (or of all, when name is NULL). */
typedef struct {
	uint64_t compiles;     /* NVRTC runs */
	uint64_t cache_hits;   /* cubins found on disk */
	uint64_t cache_misses; /* lookups that found nothing usable */
	uint64_t cache_rejects; /* entries that failed verification */
	uint64_t loads;        /* cuLibraryLoadData calls */
	uint64_t load_failures; /* images the driver rejected */
	uint64_t launches;
	double compile_ms; /* total time inside NVRTC */
	double load_ms;    /* total time resolving: cache + load */
} jitk_stats;

JITK_API int jitk_stats_get(jitk_stats *out, jitk_runtime *rt, const char *name);

/* --------------------------------------- the modulated-norm kernel family */

/* Arguments of the norm + scale/shift (+ gated residual) (+ fp8) kernels.
 * Tensors are bf16, row-major and contiguous ([rows, hidden], or [hidden]
 * for gate/scale/shift) and 16-byte aligned; q is fp8 e4m3 [rows, hidden];
 * input_scale is one fp32 in device memory. weight and bias must be 0: an
 * affine LayerNorm is not fused (the try_ functions fall back, the others
 * return JITK_EINVAL). Fields a variant does not use are ignored. */
typedef struct {
	jitk_devptr y;            /* out: normalized and modulated, bf16 */
	jitk_devptr q;            /* out: quantized y (fp8 variants) */
	jitk_devptr residual_out; /* out: residual + gate * x (residual variants) */
	jitk_devptr x;
	jitk_devptr residual;
	jitk_devptr gate;
	jitk_devptr scale;
	jitk_devptr shift;
	jitk_devptr input_scale;
	jitk_devptr weight; /* must be 0 */
	jitk_devptr bias;   /* must be 0 */
	int64_t rows;
	int32_t hidden;
	float eps;
} jitk_norm_args;

/* The reference symbols. Each resolves the instance for a->hidden (see
 * jitk list) and launches it on stream. JITK_EINVAL for bad arguments,
 * JITK_EARCH when the architecture gate forbids the symbol on this device
 * (use the try_ or auto entry points for a fallback). */
JITK_API int jitk_fused_norm_scale_shift(jitk_runtime *rt, const jitk_norm_args *a,
				jitk_stream stream);
JITK_API int jitk_fused_scale_residual_norm_scale_shift(jitk_runtime *rt,
					       const jitk_norm_args *a,
					       jitk_stream stream);
JITK_API int jitk_fused_norm_scale_shift_fp8(jitk_runtime *rt, const jitk_norm_args *a,
				    jitk_stream stream);
JITK_API int jitk_fused_scale_residual_norm_scale_shift_fp8(jitk_runtime *rt,
						   const jitk_norm_args *a,
						   jitk_stream stream);

/* The split path's quantizer: q[i] = e4m3(clamp(x[i] / *input_scale)) for
 * n bf16 values, with the reciprocal computed like PTX div.full.f32. */
JITK_API int jitk_static_quant_fp8(jitk_runtime *rt, jitk_devptr q, jitk_devptr x,
			  jitk_devptr input_scale, int64_t n,
			  jitk_stream stream);

/* Validate the input_scale of a quantizing layer once (model load): it must
 * be one finite, positive fp32. Reads 4 bytes from the device
 * (synchronously). On success the pointer is remembered as configured and
 * the fused fp8 paths may use it; JITK_EINVAL (with the value in the
 * message) otherwise. Not for use during stream capture. */
JITK_API int jitk_configure_input_scale(jitk_runtime *rt, jitk_devptr input_scale);

/* Like the reference's try_ functions: launch the fused fp8 kernel when
 * every guard holds, else launch nothing and return JITK_FALLBACK with the
 * reason in *reason (a static or runtime-owned string; NULL allowed).
 * Guards: architecture gate, supported hidden size, non-NULL and 16-byte
 * aligned pointers, input_scale configured, no affine weight/bias. */
JITK_API int jitk_try_fused_norm_scale_shift_fp8(jitk_runtime *rt,
					const jitk_norm_args *a,
					jitk_stream stream,
					const char **reason);
JITK_API int jitk_try_fused_scale_residual_norm_scale_shift_fp8(jitk_runtime *rt,
						       const jitk_norm_args *a,
						       jitk_stream stream,
						       const char **reason);

/* Run the fused fp8 kernel where the guards allow it, else the split path
 * (the non-quantizing kernel, then static_quant_fp8 on its y) - the same
 * bytes out either way. *used_fused (NULL allowed) says which ran. */
JITK_API int jitk_auto_norm_scale_shift_fp8(jitk_runtime *rt, const jitk_norm_args *a,
				   jitk_stream stream, int *used_fused);
JITK_API int jitk_auto_scale_residual_norm_scale_shift_fp8(jitk_runtime *rt,
						  const jitk_norm_args *a,
						  jitk_stream stream,
						  int *used_fused);

#ifdef __cplusplus
}
#endif

#endif
