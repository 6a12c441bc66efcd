// gemm_epilogue.cuh - the FP8 GEMM's split path: the elementwise steps of
// its fused epilogues (shared/kernel-contract.md, "FP8 GEMM with fused
// epilogues", steps 4 and 5) on the bf16 d that gemm_fp8[epilogue=bias]
// stored, with the fused epilogue's own operations (gemm_math.cuh) and
// the norm family's quantizer (common.cuh), so that fused == split byte
// for byte:
//
//   gelu_tanh_quant_fp8   g = bf(gelu_tanh(f(d))), q = e4m3(clamp(f(g) * rcp)),
//                         rcp = 1 div.full out_scale; g stored when gelu_out
//   gate_residual         out = bf(fmaf(f(gate[r / L, n]), f(d), f(residual[r, n])))
//
// Each thread takes VEC bf16 of one row (N is a multiple of 16), a
// grid-stride loop over the [M, N] elements.
#pragma once

#include "common.cuh"
#include "gemm_math.cuh"

namespace jitk {

enum class GemmElementwise { gelu_tanh_quant_fp8, gate_residual };

template <class P>
__global__ void __launch_bounds__(P::threads)
gemm_epilogue(const bf16 *d, fp8_e4m3 *q, bf16 *g, const float *out_scale, const bf16 *gate,
	      const bf16 *residual, bf16 *out, long long m, long long n, long long L, long long B)
{
	constexpr int VEC = 8; // 16 bytes of bf16
	const long long vecs = m * n / VEC;
	const long long step = (long long)gridDim.x * P::threads;
	float rcp = 0.0f;

	(void)B;

	wait_for_prior_kernels(); /* launch.programmatic */
	if constexpr (P::op == GemmElementwise::gelu_tanh_quant_fp8)
		rcp = reciprocal_div_full(*out_scale);
	for (long long i = (long long)blockIdx.x * P::threads + threadIdx.x; i < vecs; i += step) {
		const long long e = i * VEC;
		vec<16> dv, r;

		load(dv, d + e);
		if constexpr (P::op == GemmElementwise::gelu_tanh_quant_fp8) {
			vec<16> gv;
			vec<8> qv;
#pragma unroll
			for (int w = 0; w < 4; w++)
				gv.w[w] = pack_bf16x2(gemm::gelu_tanh(bf16_lo(dv.w[w])),
						      gemm::gelu_tanh(bf16_hi(dv.w[w])));
			quantize_e4m3_vec<16>(qv, gv, rcp);
			store(q + e, qv);
			if constexpr (P::gelu_out)
				store(g + e, gv);
			(void)r;
		} else {
			vec<16> gt, rs;
			const long long row = e / n, col = e - row * n;

			load(gt, gate + (row / L) * n + col);
			load(rs, residual + e);
#pragma unroll
			for (int w = 0; w < 4; w++)
				r.w[w] = pack_bf16x2(
					gemm::gate_residual_value(bf16_lo(gt.w[w]), bf16_lo(dv.w[w]),
								  bf16_lo(rs.w[w])),
					gemm::gate_residual_value(bf16_hi(gt.w[w]), bf16_hi(dv.w[w]),
								  bf16_hi(rs.w[w])));
			store(out + e, r);
		}
	}
}

} // namespace jitk
