// tma_copy.cuh - a CuTe kernel that moves bf16 tiles with TMA, through
// descriptors the runtime builds (the spec's type: tma arguments): each
// block loads one BR x BC tile of x into shared memory with
// cp.async.bulk.tensor (cute::SM90_TMA_LOAD_2D, completion on a
// cutlass::arch::ClusterTransactionBarrier), then
//   copy:      stores the same tile to y with a TMA store;
//   transpose: writes it transposed into a second tile and stores that to
//              yt at the mirrored coordinates.
// Both tiles use the 128-byte swizzle of their descriptors (rows of 64
// bf16 = 128 bytes), read and written through cute::Swizzle<3, 3, 3>, so
// the transpose's column accesses spread over the banks. TMA clips the
// tiles at the tensors' edges: any rows and cols work.
#include <cute/arch/copy_sm90_tma.hpp>
#include <cute/swizzle.hpp>
#include <cutlass/arch/barrier.h>
#include "common.cuh"

namespace jitk {

enum class TmaOp { copy, transpose };

template <class P>
__global__ void __launch_bounds__(P::threads)
tma_copy(const __grid_constant__ jitk_tensor_map x_map, const __grid_constant__ jitk_tensor_map y_map,
	 const __grid_constant__ jitk_tensor_map yt_map, const jitk::bf16 *x,
	 jitk::bf16 *y, jitk::bf16 *yt, long long rows, long long cols)
{
	constexpr int BR = P::box_rows, BC = P::box_cols;
	constexpr unsigned TILE_BYTES = BR * BC * sizeof(jitk::bf16);
	static_assert(BC * sizeof(jitk::bf16) == 128 && (P::op == TmaOp::copy || BR == 64),
		      "tiles are 128-byte rows (the swizzle), square for the transpose");
	extern __shared__ __align__(1024) unsigned char smem[];
	__shared__ alignas(8) uint64_t full;
	// The 128-byte swizzle wants its tiles on 1024-byte boundaries
	// (shared_bytes leaves the room).
	unsigned char *base = reinterpret_cast<unsigned char *>(
		(reinterpret_cast<uintptr_t>(smem) + 1023) & ~uintptr_t(1023));
	jitk::bf16 *in = reinterpret_cast<jitk::bf16 *>(base);
	jitk::bf16 *out = reinterpret_cast<jitk::bf16 *>(base + TILE_BYTES);
	const long long tiles_c = (cols + BC - 1) / BC;
	const int c0 = (int)(blockIdx.x % tiles_c) * BC, r0 = (int)(blockIdx.x / tiles_c) * BR;
	(void)x, (void)y, (void)yt, (void)rows;

	if (threadIdx.x == 0) {
		cutlass::arch::ClusterTransactionBarrier::init(&full, 1);
		cutlass::arch::fence_barrier_init();
	}
	__syncthreads();
	if (threadIdx.x == 0) {
		cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(&full, TILE_BYTES);
		cute::SM90_TMA_LOAD_2D::copy(&x_map, &full, 0, in, c0, r0);
	}
	cutlass::arch::ClusterTransactionBarrier::wait(&full, 0);
	if constexpr (P::op == TmaOp::copy) {
		if (threadIdx.x == 0) {
			cute::SM90_TMA_STORE_2D::copy(&y_map, in, c0, r0);
			cute::tma_store_arrive();
			cute::tma_store_wait<0>();
		}
	} else {
		constexpr cute::Swizzle<3, 3, 3> sw{}; // the 128-byte swizzle, in bf16 elements
		for (int i = threadIdx.x; i < BR * BC; i += P::threads) {
			const int r = i % BR, c = i / BR; // consecutive threads: consecutive rows
			out[sw(c * BR + r)] = in[sw(r * BC + c)];
		}
		cute::tma_store_fence(); // the generic-proxy writes, before TMA reads them
		__syncthreads();
		if (threadIdx.x == 0) {
			cute::SM90_TMA_STORE_2D::copy(&yt_map, out, r0, c0);
			cute::tma_store_arrive();
			cute::tma_store_wait<0>();
		}
	}
}

} // namespace jitk
