// gemm_fp8_sm100.cuh - gemm_fp8.cuh's sm_100a collectives: TMA loads,
// tcgen05 (UMMA) into tensor memory, the 1-SM warp-specialized kernel
// (a scheduler, a TMA load, an MMA and an epilogue load warp, then four
// epilogue warps: 256 threads) with CLC's dynamic persistent tile
// scheduler, and the TMA warp-specialized epilogue running gemm_fp8.cuh's
// visitor tree. Part of gemm_fp8.cuh, which includes it after the pieces
// both architectures share (gemm_fp8_kind, gemm_fp8_evt); not a template
// of its own.
//
// Precompiled without a GPU (tests/gemm.sh, jitk precompile): it has
// never run on one.
#pragma once

namespace jitk {
namespace gemm {

template <class P> struct gemm_fp8_sm100_gstore {
	using K = gemm_fp8_kind<P>;
	using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecialized1Sm;
	using EpiDesc = cutlass::epilogue::collective::detail::Sm100EpilogueDescriptor<
		cutlass::arch::OpClassTensorOp, typename K::TileShape, typename K::EpilogueTileType,
		float, typename K::ElementC, typename K::ElementD, EpilogueSchedule,
		cutlass::detail::TagToStrideC_t<typename K::LayoutC>,
		cutlass::detail::TagToStrideC_t<typename K::LayoutD>, false, false>;
	using Desc = cutlass::epilogue::collective::detail::Sm100AuxStoreDescriptor<
		EpiDesc, cutlass::layout::RowMajor, bf16_t>;
	using type = gemm_fp8_gstore_t<EpiDesc, Desc>;
};

template <class P>
struct gemm_fp8_sm100 : gemm_fp8_evt<P, typename gemm_fp8_sm100_gstore<P>::type> {
	using Kind = gemm_fp8_kind<P>;
	static constexpr bool sm100 = true;
	static constexpr bool split_k = false; // the persistent (CLC) scheduler only
	static constexpr int splits = 1;
	// One CTA per MMA (1-SM UMMA: M = 64 or 128 rows), accumulators in
	// tensor memory (fp32, 512 columns: tile_n <= 256 double-buffers them).
	// There is no fast-accumulation variant: UMMA's fp32 accumulation is
	// the only one.
	static_assert(P::tile_m == 128 && P::tile_n % 32 == 0 && P::tile_n <= 256,
		      "sm_100: 1-SM UMMA tiles of 128 rows and up to 256 columns, 32 at a time");
	static_assert(P::cluster_m == 1 && P::cluster_n == 1,
		      "sm_100: no cluster (the descriptors' boxes are the whole tile)");
	static_assert(P::epi_m == 128 && P::epi_n == 32,
		      "the epilogue tile is 128 rows of 32 columns (the spec's out, q and c boxes)");
	static_assert(!P::fast_accum, "sm_100 has no fast-accumulation kernel");

	using KernelSchedule = cutlass::gemm::KernelTmaWarpSpecialized1SmSm100;
	using EpilogueSchedule = typename gemm_fp8_sm100_gstore<P>::EpilogueSchedule;

	// PersistentScheduler on sm_100 is CLC's: the grid covers every tile
	// and a CTA that finishes early cancels a cluster not yet launched.
	using Collectives =
		gemm_fp8_collectives<P, cutlass::arch::Sm100,
				     gemm_fp8_evt<P, typename gemm_fp8_sm100_gstore<P>::type>, KernelSchedule,
				     EpilogueSchedule, cutlass::gemm::PersistentScheduler>;
	using Kernel = typename Collectives::Kernel;
	using Params = typename Kernel::Params;
	static constexpr int threads = Kernel::MaxThreadsPerBlock;
	static constexpr int smem_bytes = Kernel::SharedStorageSize;

	// sm_100's to_underlying_arguments queries nothing: CUTLASS's own.
	static CUTLASS_DEVICE Params params(typename Kernel::Arguments const &x, void *)
	{
		return Kernel::to_underlying_arguments(x, nullptr);
	}
};

} // namespace gemm
} // namespace jitk
