// gemm_math.cuh - the FP8 GEMM's elementwise steps (shared/kernel-
// contract.md, "FP8 GEMM with fused epilogues"), on fp32 values, for the
// fused epilogues (gemm_fp8.cuh) and the split path's kernel
// (gemm_epilogue.cuh) alike: the same operations give the same bytes.
#pragma once

namespace jitk {
namespace gemm {

// The contract's elementwise steps, on fp32 values, each operation an
// explicit intrinsic so that no contraction can merge two of them.

// Step 2: d before rounding.
__device__ __forceinline__ float d_scaled(float acc, float alpha)
{
	return __fmul_rn(acc, alpha);
}
__device__ __forceinline__ float d_scaled_bias(float acc, float alpha, float bias)
{
	return __fmaf_rn(acc, alpha, bias);
}

// Step 4: 0.5 * v * (1 + tanhf(0.7978845608 * (v + 0.044715 * v^3))),
// left to right, v^3 = (v * v) * v; tanhf is the precise library tanh.
__device__ __forceinline__ float gelu_tanh(float v)
{
	const float v3 = __fmul_rn(__fmul_rn(v, v), v);
	const float inner = __fmul_rn(0.7978845608f, __fadd_rn(v, __fmul_rn(0.044715f, v3)));
	const float t = tanhf(inner);
	return __fmul_rn(__fmul_rn(0.5f, v), __fadd_rn(1.0f, t));
}

// Step 5 before rounding.
__device__ __forceinline__ float gate_residual_value(float gate, float d, float residual)
{
	return __fmaf_rn(gate, d, residual);
}

} // namespace gemm
} // namespace jitk
