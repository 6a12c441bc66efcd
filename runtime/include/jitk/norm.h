/*
 * jitk/norm.h - typed entry points of the modulated-norm kernel family
 * (LayerNorm/RMSNorm + scale/shift, optionally after a gated residual,
 * optionally quantized to fp8 e4m3), named after the reference's symbols.
 *
 * Each is a thin wrapper over the generic call (jitk_call in jitk.h): the
 * tensors are described from jitk_norm_args, the instance is picked from
 * hidden, and every check is the spec's. Families without typed entry
 * points are called through jitk_call directly.
 */
#ifndef JITK_NORM_H
#define JITK_NORM_H

#include "jitk.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Arguments of the norm kernels. Tensors are bf16, row-major and
 * contiguous ([rows, hidden], or [hidden] for gate/scale/shift); q is fp8
 * e4m3 [rows, hidden]; input_scale is one fp32 in device memory. Fields a
 * symbol does not take are ignored. */
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
	int64_t rows;
	int32_t hidden;
	float eps;
} jitk_norm_args;

/* The reference symbols: launch the instance for a->hidden on stream.
 * JITK_EINVAL for bad arguments (named), JITK_EARCH when the architecture
 * gate forbids the symbol on this device (use the try_ or auto entry
 * points for a fallback). */
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
				   jitk_devptr input_scale, int64_t n, jitk_stream stream);

/* Validate the input_scale of a quantizing layer once (model load): one
 * finite, positive fp32 (jitk_configure on the fused symbols'
 * input_scale). The fused fp8 paths use only validated scales; freeing
 * the memory invalidates it (jitk_unconfigure forgets it explicitly). */
JITK_API int jitk_configure_input_scale(jitk_runtime *rt, jitk_devptr input_scale);

/* Like the reference's try_ functions: launch the fused fp8 kernel when
 * every guard holds, else launch nothing and return JITK_FALLBACK with the
 * reason in *reason (NULL allowed; valid until the next call on this
 * thread). Guards (the spec's): architecture gate, an instance for hidden,
 * non-NULL and aligned tensors, input_scale configured. */
JITK_API int jitk_try_fused_norm_scale_shift_fp8(const char **reason, jitk_runtime *rt,
						 const jitk_norm_args *a, jitk_stream stream);
JITK_API int jitk_try_fused_scale_residual_norm_scale_shift_fp8(const char **reason,
								jitk_runtime *rt,
								const jitk_norm_args *a,
								jitk_stream stream);

/* The fused fp8 kernel where the guards allow it, else the spec's fallback
 * (the non-quantizing kernel, then static_quant_fp8 on its y): the same
 * bytes either way. *used_fused (NULL allowed) says which ran. */
JITK_API int jitk_auto_norm_scale_shift_fp8(int *used_fused, jitk_runtime *rt,
					    const jitk_norm_args *a, jitk_stream stream);
JITK_API int jitk_auto_scale_residual_norm_scale_shift_fp8(int *used_fused, jitk_runtime *rt,
							   const jitk_norm_args *a,
							   jitk_stream stream);

#ifdef __cplusplus
}
#endif

#endif
