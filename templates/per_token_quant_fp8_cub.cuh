// per_token_quant_fp8_cub.cuh - per_token_quant_fp8 (per_token_quant_fp8.cuh,
// whose rows it shares) on the CUDA toolkit's headers, the "cuda" header
// package: the row's amax reduced with cub::BlockReduce, integers from
// cuda/std. The maximum is exact and does not depend on the order of the
// reduction, so the bytes are per_token_quant_fp8's
// (tests/test_gpu_packages.c compares them).
#pragma once
#include <cub/block/block_reduce.cuh>
#include <cuda/functional>
#include <cuda/std/cstdint>
#include "per_token_quant_fp8.cuh" // the rows; common.cuh

namespace jitk {

template <class P>
__global__ void __launch_bounds__(P::threads)
per_token_quant_fp8_cub(fp8_e4m3 *__restrict__ q, float *__restrict__ s,
			const bf16 *__restrict__ x, long long rows, long long H)
{
	using BlockMax = cub::BlockReduce<cuda::std::uint32_t, P::threads>;
	__shared__ typename BlockMax::TempStorage scratch;
	__shared__ cuda::std::uint32_t row_max;

	// The row's maximum in every thread: cub reduces into thread 0, which
	// hands it on through shared memory; the second barrier keeps the
	// next row's reduction from overwriting either too early.
	per_token_quant_rows<P>(q, s, x, rows, H, [&](cuda::std::uint32_t m) {
		const cuda::std::uint32_t r = BlockMax(scratch).Reduce(m, cuda::maximum<>{});
		if (threadIdx.x == 0)
			row_max = r;
		__syncthreads();
		m = row_max;
		__syncthreads();
		return (unsigned)m;
	});
}

} // namespace jitk
