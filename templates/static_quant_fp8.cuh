// static_quant_fp8.cuh - the split path's static FP8 quantizer:
//   q[i] = e4m3_rn_satfinite(clamp(f(x[i]) * (1 div.full input_scale), -448, 448))
// byte for byte what the fused norm kernels write, for any n (a scalar
// tail handles n that is not a multiple of the vector).
#pragma once
#include "common.cuh"

namespace jitk {

template <class P>
__global__ void static_quant_fp8(fp8_e4m3 *__restrict__ q,
				 const bf16 *__restrict__ x,
				 const float *__restrict__ input_scale,
				 long long n)
{
	constexpr int VEC_BYTES = P::vec_bytes;
	constexpr int UNROLL = P::unroll;
	constexpr int VE = VEC_BYTES / 2; // elements per vector
	constexpr int NW = VEC_BYTES / 4;
	wait_for_prior_kernels(); // before any global memory access
	const float rcp = reciprocal_div_full(*input_scale);
	const long long nvec = n / VE;
	const long long stride = (long long)gridDim.x * blockDim.x;
	const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;

	for (long long i0 = (long long)blockIdx.x * blockDim.x * UNROLL + threadIdx.x;
	     i0 < nvec; i0 += stride * UNROLL) {
		vec<VEC_BYTES> v[UNROLL];
#pragma unroll
		for (int u = 0; u < UNROLL; u++) {
			const long long i = i0 + (long long)u * blockDim.x;
			if (i < nvec)
				load(v[u], x + i * VE);
		}
#pragma unroll
		for (int u = 0; u < UNROLL; u++) {
			const long long i = i0 + (long long)u * blockDim.x;
			vec<VEC_BYTES / 2> out;
			if (i >= nvec)
				break;
#pragma unroll
			for (int w = 0; w < NW; w++) {
				unsigned pair = quantize_e4m3x2(bf16_lo(v[u].w[w]),
								bf16_hi(v[u].w[w]), rcp);
				if (w % 2 == 0)
					out.w[w / 2] = pair;
				else
					out.w[w / 2] |= pair << 16;
			}
			store(q + i * VE, out);
		}
	}
	// The last n % VE elements, one per thread.
	if (tid < n - nvec * VE) {
		const long long i = nvec * VE + tid;
		unsigned pair = quantize_e4m3x2(bf16_lo(x[i]), 0.0f, rcp);
		q[i] = (fp8_e4m3)(pair & 0xffu);
	}
}

} // namespace jitk
