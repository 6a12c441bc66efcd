// per_token_quant_fp8.cuh - the split path's dynamic (per-row) FP8
// quantizer, the partner of the norm kernels' fp8_e4m3_per_token variant:
//   amax   = max |f(x_i)| over the row            (exact: bf16 magnitudes)
//   s[r]   = max(amax div.rn 448, 1 / 229376)      (NaN when the row has one)
//   q[r,i] = e4m3_rn_satfinite(clamp(f(x_i) * (1 div.rn s[r]), -448, 448))
// byte for byte what the fused kernels write, for any H. A block owns a
// row at a time; each thread holds up to HOLD vectors of it in registers
// between the maximum and the quantization, and reads the rest again.
#pragma once
#include "common.cuh"

namespace jitk {

// The rows of the quantizer, for a block_max(unsigned) that returns the
// maximum of its argument over the block in every thread (the kernel
// below, and per_token_quant_fp8_cub.cuh with cub::BlockReduce).
template <class P, class BlockMax>
__device__ __forceinline__ void
per_token_quant_rows(fp8_e4m3 *__restrict__ q, float *__restrict__ s,
		     const bf16 *__restrict__ x, long long rows, long long H, BlockMax &&block_max)
{
	constexpr int VEC_BYTES = P::vec_bytes;
	constexpr int THREADS = P::threads;
	constexpr int HOLD = P::hold;
	constexpr int VE = VEC_BYTES / 2; // elements per vector
	constexpr int NW = VEC_BYTES / 4;
	const int t = threadIdx.x;

	auto quantize_vec = [&](fp8_e4m3 *dst, const vec<VEC_BYTES> &v, float rcp) {
		vec<VEC_BYTES / 2> out;
		quantize_e4m3_vec(out, v, rcp);
		store(dst, out);
	};

	wait_for_prior_kernels(); // before any global memory access
	// Rows start on a vector boundary when H is a multiple of the
	// vector (x itself is aligned: the spec checks it).
	const bool vectors = H % VE == 0;
	for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
		const bf16 *xr = x + row * H;
		fp8_e4m3 *qr = q + row * H;
		unsigned amax = 0u;
		if (vectors) {
			const long long nv = H / VE;
			vec<VEC_BYTES> held[HOLD];
#pragma unroll
			for (int k = 0; k < HOLD; k++) {
				const long long i = t + (long long)k * THREADS;
				if (i < nv) {
					load(held[k], xr + i * VE);
#pragma unroll
					for (int w = 0; w < NW; w++)
						amax = umax(amax, abs_max_bf16x2(held[k].w[w]));
				}
			}
			for (long long i = t + (long long)HOLD * THREADS; i < nv; i += THREADS) {
				vec<VEC_BYTES> v;
				load(v, xr + i * VE);
#pragma unroll
				for (int w = 0; w < NW; w++)
					amax = umax(amax, abs_max_bf16x2(v.w[w]));
			}
			const float sq = token_scale(block_max(amax));
			const float rcp = reciprocal_rn(sq);
#pragma unroll
			for (int k = 0; k < HOLD; k++) {
				const long long i = t + (long long)k * THREADS;
				if (i < nv)
					quantize_vec(qr + i * VE, held[k], rcp);
			}
			for (long long i = t + (long long)HOLD * THREADS; i < nv; i += THREADS) {
				vec<VEC_BYTES> v;
				load(v, xr + i * VE);
				quantize_vec(qr + i * VE, v, rcp);
			}
			if (t == 0)
				s[row] = sq;
		} else {
			for (long long i = t; i < H; i += THREADS)
				amax = umax(amax, (unsigned)xr[i] & 0x7fffu);
			const float sq = token_scale(block_max(amax));
			const float rcp = reciprocal_rn(sq);
			for (long long i = t; i < H; i += THREADS)
				qr[i] = (fp8_e4m3)(quantize_e4m3x2(bf16_lo(xr[i]), 0.0f, rcp) & 0xffu);
			if (t == 0)
				s[row] = sq;
		}
	}
}

template <class P>
__global__ void __launch_bounds__(P::threads)
per_token_quant_fp8(fp8_e4m3 *__restrict__ q, float *__restrict__ s,
		    const bf16 *__restrict__ x, long long rows, long long H)
{
	constexpr int THREADS = P::threads;
	constexpr int WARPS = THREADS / 32;
	static_assert(THREADS % 32 == 0 && THREADS <= 1024, "whole warps");
	__shared__ unsigned partial[2][WARPS];
	const int t = threadIdx.x, warp = t / 32, lane = t % 32;
	int buf = 0;

	per_token_quant_rows<P>(q, s, x, rows, H, [&](unsigned m) {
		m = warp_max(m);
		if constexpr (WARPS > 1) {
			if (lane == 0)
				partial[buf][warp] = m;
			__syncthreads();
			m = 0u;
#pragma unroll
			for (int k = 0; k < WARPS; k++)
				m = umax(m, partial[buf][k]);
			buf ^= 1;
		}
		return m;
	});
}

} // namespace jitk
