// jitk/cute_sm100_nvrtc.h - what CUTLASS 4.2's sm_100 GEMM collectives
// need to compile under NVRTC (the `jitk` header package), included after
// the CUTLASS headers gemm_fp8.cuh names. Under NVRTC CUTLASS leaves out
// the sm_100 mainloop and its collective builder (collective_mma.hpp and
// collective_builder.hpp guard them with !__CUDACC_RTC__), and CuTe the
// TMA atom makers they call (make_tma_atom_A_sm100/_B_sm100: CUTE_HOST,
// guarded too). The makers are below as CUTE_HOST_RTC, as CuTe declares
// the sm_90 ones, so that a builder kernel can make the mainloop's Params
// on the device; the descriptors they leave empty (no encode under NVRTC)
// are jitk's, copied in (gemm_fp8.cuh). Then the two headers. Under nvcc
// this adds nothing: CUTLASS has included both already.
//
// The makers are jitk's: one function for both operands, from CuTe's
// public pieces (the identity layout over the operand's tensor, the
// tiled MMA's operand partition, detail::make_tma_copy_atom), with the
// signatures CUTLASS's sm_100 mainloop calls.
#pragma once

#include <cute/atom/copy_traits_sm100_tma.hpp>

#if defined(__CUDACC_RTC__)
namespace cute {
namespace jitk_sm100 {

// The TMA atom that loads operand A (a) or B (!a) of an sm_100 MMA: the
// operand's two modes of the (M, N, K) tiler ((M, K) for A, (N, K) for B)
// laid over the tensor's coordinates, the values each CTA takes of that
// tile as the MMA partitions the operand, and the number of CTAs one load
// reaches: a multicast load reaches the cluster's CTAs that share the
// tile (its N CTAs for A, its M CTAs for B; the cluster shape is V, M,
// N, K), any other load one.
template <bool a, class Internal, class Op, class Engine, class GLayout, class SLayout, class Tiler,
	  class... Mma, class Cluster>
CUTE_HOST_RTC auto tma_atom(Op const &op, Tensor<Engine, GLayout> const &gmem, SLayout const &smem,
			    Tiler const &tiler, TiledMMA<Mma...> const &mma, Cluster const &cluster)
{
	constexpr bool multicast = is_same_v<Op, SM90_TMA_LOAD_MULTICAST> ||
				   is_same_v<Op, SM100_TMA_2SM_LOAD_MULTICAST>;
	static_assert(multicast || is_same_v<Op, SM90_TMA_LOAD> || is_same_v<Op, SM90_TMA_STORE> ||
			      is_same_v<Op, SM100_TMA_2SM_LOAD>,
		      "a TMA copy of the sm_100 mainloop");
	auto tile = make_identity_layout(shape(gmem)).compose(remove<a ? 1 : 0>(tiler));
	constexpr int modes = rank_v<decltype(shape(tile))>;
	auto values = [&]() {
		if constexpr (a)
			return layout<1>(mma.thrfrg_A(tile))(_, repeat<modes>(_));
		else
			return layout<1>(mma.thrfrg_B(tile))(_, repeat<modes>(_));
	}();
	auto reach = [&]() {
		if constexpr (multicast)
			return size<a ? 2 : 1>(cluster);
		else
			return Int<1>{};
	}();
	using Element = conditional_t<is_void_v<Internal>, typename Engine::value_type, Internal>;
	return detail::make_tma_copy_atom<Element>(op, gmem, smem, reach, values);
}

} // namespace jitk_sm100

template <class Internal = void, class... Args>
CUTE_HOST_RTC auto make_tma_atom_A_sm100(Args const &...args)
{
	return jitk_sm100::tma_atom<true, Internal>(args...);
}

template <class Internal = void, class... Args>
CUTE_HOST_RTC auto make_tma_atom_B_sm100(Args const &...args)
{
	return jitk_sm100::tma_atom<false, Internal>(args...);
}

} // namespace cute
#endif

#include <cutlass/gemm/collective/sm100_mma_warpspecialized.hpp>
#include <cutlass/gemm/collective/builders/sm100_umma_builder.inl>
