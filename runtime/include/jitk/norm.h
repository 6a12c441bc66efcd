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
 * e4m3 [rows, hidden]; input_scale is one fp32 in device memory.
 *
 * The reference entry points below read the first twelve fields only and
 * ignore the fields their symbol does not take. jitk_norm_call reaches
 * every symbol of the family (issue 12's axes: modulation, affine,
 * outputs, per-token fp8) and passes exactly the fields that are set (a
 * nonzero pointer or count), under the spec's names:
 *   scale, shift, gate   modulation: [hidden] when batches is 0 (shared);
 *                        [batches, hidden] otherwise: named scales, shifts,
 *                        gates (per_batch: rows = batches x rows_per_batch;
 *                        per_token: batches = rows), or, with index set,
 *                        scale0, shift0, gate0 (indexed, set 0)
 *   scale1, shift1, gate1  indexed: set 1, [batches, hidden]
 *   index                u8 [batches, rows_per_batch]: 0 picks set 0, any
 *                        other value set 1, for row b * rows_per_batch + l
 *   gate_out             out, indexed gated residual: the gate each row
 *                        used, [rows, hidden]
 *   weight, bias         the norm's affine, [hidden]
 *   s                    out, per-token fp8: fp32 [rows], each row's scale
 *   rows_per_batch       L (per_batch; indexed takes it from index)
 * x, eps and the shapes (rows, hidden) are always passed. A field the
 * symbol does not take is an error naming it; a tensor it needs and that
 * is not set is "missing argument NAME" (JITK_EINVAL in every mode). */
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
	/* jitk_norm_call only (see above) */
	jitk_devptr s;
	jitk_devptr gate_out;
	jitk_devptr scale1;
	jitk_devptr shift1;
	jitk_devptr gate1;
	jitk_devptr index;
	jitk_devptr weight;
	jitk_devptr bias;
	int64_t batches;
	int64_t rows_per_batch;
} jitk_norm_args;

/* Any symbol of the norm family (a selector: "fused_norm_scale_shift_per_batch_fp8",
 * "...[hidden=3072]"), with the fields of a that are set, in MODE
 * (JITK_CALL_STRICT, _TRY, _AUTO; jitk_call_info as for jitk_call; out
 * NULL allowed). For example, Qwen-Image's first norm site at batch 2:
 *   a.x = x; a.y = y; a.q = q; a.s = s;          x, y, q [2 * 4096, 3072]
 *   a.scale = sc; a.shift = sh; a.batches = 2;    [2, 3072]
 *   a.rows_per_batch = 4096; a.rows = 8192; a.hidden = 3072; a.eps = 1e-6f;
 *   jitk_norm_call(NULL, rt, "fused_norm_scale_shift_per_batch_fp8_per_token",
 *                  JITK_CALL_AUTO, &a, stream); */
JITK_API int jitk_norm_call(jitk_call_info *out, jitk_runtime *rt, const char *selector,
			    jitk_call_mode mode, const jitk_norm_args *a, jitk_stream stream);

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

/* The split partner of the per-token fp8 variants: for each of rows rows
 * of hidden bf16 values x, s[r] = max(amax / 448, 1 / 229376) (IEEE
 * division) and q = e4m3(clamp(x * (1 / s[r]))); q is fp8 [rows, hidden],
 * s fp32 [rows]. */
JITK_API int jitk_per_token_quant_fp8(jitk_runtime *rt, jitk_devptr q, jitk_devptr s,
				      jitk_devptr x, int64_t rows, int64_t hidden,
				      jitk_stream stream);

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
