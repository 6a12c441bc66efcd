// gemm_fp8.cuh - FP8 e4m3 GEMM with fused epilogues on CUTLASS 3.x/4.x
// (sm_90a: TMA loads, WGMMA, warp-specialized persistent kernels; sm_100a:
// TMA, tcgen05/UMMA into tensor memory, the 1-SM warp-specialized kernel
// with CLC's scheduler, in gemm_fp8_sm100.cuh, never run on a GPU).
//
//   D[M, N] = alpha * A[M, K] . B[N, K]^T,  alpha = a_scale * b_scale (fp32)
//
// A row-major (K contiguous), B an nn.Linear weight as stored (K
// contiguous), fp32 accumulation, and then one of the epilogues of
// shared/kernel-contract.md ("FP8 GEMM with fused epilogues"), with
// every rounding point of the contract written out below:
//
//   none          out = bf(acc * alpha)
//   bias          out = bf(fmaf(acc, alpha, f(bias[n])))
//   gelu_tanh_fp8 d as above (bias optional), then
//                 g = bf(gelu_tanh(f(d))), q = e4m3(clamp(f(g) * rcp)),
//                 rcp = 1 div.full out_scale; q always, g when gelu_out
//   gate_residual out = bf(fmaf(f(gate[r / L, n]), f(d), f(residual[r, n])))
//
// The epilogues are epilogue visitor trees (EVT) over the same mainloop,
// so the fused kernel and the split path (epilogue bias, then an
// elementwise kernel on the stored d) see the same accumulators: d is
// the same bf16 value in both, and the elementwise math is applied to it
// in the same fp32 operations. That is what makes fused == split hold
// byte for byte.
//
// Everything a spec sets is a member of the parameter struct P (jitk's
// generated translation unit defines it; bench/gemm_proto does by hand):
//
//   tile_m, tile_n, tile_k     CTA tile (tile_k = 128 for e4m3: 128 bytes)
//   cluster_m, cluster_n       thread block cluster (TMA multicast)
//   stages                     mainloop pipeline depth; 0 = as many as fit
//   schedule                   GemmSchedule: cooperative (two consumer
//                              warp groups share a tile) or pingpong (each
//                              takes its own tile, epilogue overlapped);
//                              sm_100 has one (cooperative's value)
//   scheduler                  GemmScheduler: persistent (data parallel) or
//                              stream_k (K split over the SMs, the partial
//                              sums through the spec's scratch in a fixed
//                              order; for few tiles and long K)
//   splits                     stream_k: 1 stream-K (CUTLASS's split of the
//                              K iterations over the SMs, by their count),
//                              2 to 16 split-K (each tile in that many K
//                              slices); the persistent scheduler: 1
//   swizzle                    the persistent scheduler's tile swizzle
//                              (1, 2, 4 or 8 tiles walked together)
//   raster                     its raster order: 0 heuristic, 1 along M,
//                              2 along N (which operand stays in L2)
//   fast_accum                 true: WGMMA accumulates across the whole K
//                              (faster, fewer bits); false: accumulators
//                              promoted to fp32 registers every 4 WGMMAs
//                              (sm_100: false, UMMA accumulates in fp32)
//   sm100                      bool: the sm_100a collectives (the spec sets
//                              it on sm_100), else sm_90a's
//   block_threads              the kernel's block (the spec's launch.block)
//   epilogue                   GemmEpilogue
//   bias                       bool: gelu_tanh_fp8 / gate_residual add bias
//   gelu_out                   bool: gelu_tanh_fp8 also stores g (bf16)
//
// The kernel's one argument is the CUTLASS kernel's Params (TMA
// descriptors included), as cutlass::device_kernel takes it; the launch
// needs a cluster launch with gemm_fp8_traits<P>::smem_bytes of dynamic
// shared memory (bench/gemm_proto/gemm_fp8_host.cuh shows the host side).
// Both architectures run the same visitor tree (gemm_fp8_evt) with the
// same compute functions: the contract's rounding points are the same.
//
// Nothing here includes a host-only header: the file compiles with nvcc
// and with NVRTC (-default-device --device-int128 -DNDEBUG, C++17), the
// latter with the shims of the jitk header package (jitk/cutlass_nvrtc.h
// first; jitk/cute_sm100_nvrtc.h, the sm_100 pieces CUTLASS leaves out
// under NVRTC, after CUTLASS's headers).
#pragma once

// What CUTLASS needs under NVRTC, before any of its headers: in a package
// header (jitk puts package includes first, and NVRTC's PCH covers them).
#include <jitk/cutlass_nvrtc.h>
#include <cutlass/cutlass.h>
#include <cutlass/numeric_types.h>
#include <cute/tensor.hpp>
#include <cutlass/gemm/dispatch_policy.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/gemm/kernel/tile_scheduler.hpp>
#include <cutlass/device_kernel.h>
// the sm_100 mainloop and its builder, which CUTLASS leaves out under NVRTC
#include <jitk/cute_sm100_nvrtc.h>

#include "common.cuh"
#include "gemm_math.cuh"

namespace jitk {

// gelu_tanh_fp8_out: gelu_tanh_fp8 storing g too (what gelu_out = true
// asks of gelu_tanh_fp8; jitk's spec names it as an epilogue of its own).
enum class GemmEpilogue { none, bias, gelu_tanh_fp8, gate_residual, gelu_tanh_fp8_out };
enum class GemmSchedule { cooperative, pingpong };
enum class GemmScheduler { persistent, stream_k };

namespace gemm {

using cutlass::Array;
using bf16_t = cutlass::bfloat16_t;
using e4m3_t = cutlass::float_e4m3_t;

__device__ __forceinline__ bf16_t bf16_from_bits(unsigned short bits)
{
	return bf16_t::bitcast(bits);
}

// Two fp32 rounded to bf16 (nearest even), stored into out[i], out[i + 1].
template <int N>
__device__ __forceinline__ void store_bf16_pair(Array<bf16_t, N> &out, int i, float lo, float hi)
{
	const unsigned pair = pack_bf16x2(lo, hi);
	out[i] = bf16_from_bits((unsigned short)(pair & 0xffffu));
	out[i + 1] = bf16_from_bits((unsigned short)(pair >> 16));
}

// ---------------------------------------------------------------------
// EVT compute functions. Sm90Compute instantiates ComputeFn with
// Array<float, N> (its inputs are converted to fp32 first: exact for
// bf16 and for the accumulators) and takes the element type of what the
// function returns, so each returns exactly the bytes to store.

template <class T> struct d_scale_fn;
template <int N> struct d_scale_fn<Array<float, N>> {
	static_assert(N % 2 == 0, "epilogue fragments come in pairs");
	__device__ __forceinline__ Array<bf16_t, N> operator()(Array<float, N> const &acc,
							      Array<float, N> const &alpha) const
	{
		Array<bf16_t, N> out;
#pragma unroll
		for (int i = 0; i < N; i += 2)
			store_bf16_pair(out, i, d_scaled(acc[i], alpha[i]),
					d_scaled(acc[i + 1], alpha[i + 1]));
		return out;
	}
};

template <class T> struct d_bias_fn;
template <int N> struct d_bias_fn<Array<float, N>> {
	static_assert(N % 2 == 0, "epilogue fragments come in pairs");
	__device__ __forceinline__ Array<bf16_t, N> operator()(Array<float, N> const &acc,
							      Array<float, N> const &alpha,
							      Array<float, N> const &bias) const
	{
		Array<bf16_t, N> out;
#pragma unroll
		for (int i = 0; i < N; i += 2)
			store_bf16_pair(out, i, d_scaled_bias(acc[i], alpha[i], bias[i]),
					d_scaled_bias(acc[i + 1], alpha[i + 1], bias[i + 1]));
		return out;
	}
};

template <class T> struct gelu_fn;
template <int N> struct gelu_fn<Array<float, N>> {
	__device__ __forceinline__ Array<bf16_t, N> operator()(Array<float, N> const &d) const
	{
		Array<bf16_t, N> out;
#pragma unroll
		for (int i = 0; i < N; i += 2)
			store_bf16_pair(out, i, gelu_tanh(d[i]), gelu_tanh(d[i + 1]));
		return out;
	}
};

// q from g (bf16 values widened) and the broadcast out_scale: the
// reciprocal by div.full.f32 and the clamp + satfinite conversion of the
// norm family's quantizer (common.cuh), so the bytes are its bytes.
template <class T> struct quant_fn;
template <int N> struct quant_fn<Array<float, N>> {
	__device__ __forceinline__ Array<e4m3_t, N> operator()(Array<float, N> const &g,
							      Array<float, N> const &out_scale) const
	{
		const float rcp = reciprocal_div_full(out_scale[0]);
		Array<e4m3_t, N> out;
#pragma unroll
		for (int i = 0; i < N; i += 2) {
			const unsigned pair = quantize_e4m3x2(g[i], g[i + 1], rcp);
			out[i] = e4m3_t::bitcast((uint8_t)(pair & 0xffu));
			out[i + 1] = e4m3_t::bitcast((uint8_t)((pair >> 8) & 0xffu));
		}
		return out;
	}
};

template <class T> struct gate_residual_fn;
template <int N> struct gate_residual_fn<Array<float, N>> {
	__device__ __forceinline__ Array<bf16_t, N> operator()(Array<float, N> const &gate,
							      Array<float, N> const &d,
							      Array<float, N> const &residual) const
	{
		Array<bf16_t, N> out;
#pragma unroll
		for (int i = 0; i < N; i += 2)
			store_bf16_pair(out, i, gate_residual_value(gate[i], d[i], residual[i]),
					gate_residual_value(gate[i + 1], d[i + 1], residual[i + 1]));
		return out;
	}
};

// ---------------------------------------------------------------------
// What jitk's leaf nodes of the visitor tree share: Params are the
// Arguments, no workspace, nothing for the producer warp to load.
template <class Arguments> struct ConsumerLeaf {
	using Params = Arguments;

	template <class ProblemShape>
	static constexpr Params to_underlying_arguments(ProblemShape const &, Arguments const &args,
							void *)
	{
		return args;
	}
	template <class ProblemShape>
	static size_t get_workspace_size(ProblemShape const &, Arguments const &)
	{
		return 0;
	}
	template <class ProblemShape>
	static cutlass::Status initialize_workspace(ProblemShape const &, Arguments const &, void *,
						    cudaStream_t, cutlass::CudaHostAdapter * = nullptr)
	{
		return cutlass::Status::kSuccess;
	}

	CUTLASS_DEVICE bool is_producer_load_needed() const { return false; }
	CUTLASS_DEVICE bool is_C_load_needed() const { return false; }

	template <class... Args>
	CUTLASS_DEVICE auto get_producer_load_callbacks(
		cutlass::epilogue::fusion::detail::ProducerLoadArgs<Args...> const &)
	{
		return cutlass::epilogue::fusion::detail::EmptyProducerLoadCallbacks{};
	}
};

// ---------------------------------------------------------------------
// A leaf node of the visitor tree: the product of Count fp32 scalars read
// from device memory (alpha = a_scale * b_scale, or out_scale), read at
// each tile's epilogue rather than when the kernel starts.
//
// CUTLASS's Sm90ScalarBroadcast reads its scalars in its constructor, and
// the kernel constructs the epilogue in every warp before the producer
// waits for the kernel before it (griddepcontrol.wait). Under programmatic
// dependent launch (the spec's launch.programmatic) that read could see a
// scale that the kernel before it has not finished writing. Here each
// tile's epilogue waits, then reads. The product is the same fp32
// multiply in the same order (p[0] * p[1]), so the bytes are the same.
template <int Count> struct LateScalarArguments {
	float const *scalar_ptrs[Count] = {};
};
template <int Count> struct LateScalar : ConsumerLeaf<LateScalarArguments<Count>> {
	static_assert(Count >= 1, "one scalar or more");
	struct SharedStorage {};
	using Arguments = LateScalarArguments<Count>;
	using Params = Arguments;

	template <class ProblemShape>
	static bool can_implement(ProblemShape const &, Arguments const &args)
	{
		for (int i = 0; i < Count; ++i)
			if (args.scalar_ptrs[i] == nullptr)
				return false;
		return true;
	}

	CUTLASS_HOST_DEVICE LateScalar() {}
	CUTLASS_HOST_DEVICE LateScalar(Params const &params, SharedStorage const &)
		: params_ptr(&params)
	{
	}
	Params const *params_ptr = nullptr;

	struct ConsumerStoreCallbacks
		: cutlass::epilogue::fusion::detail::EmptyConsumerStoreCallbacks {
		CUTLASS_DEVICE explicit ConsumerStoreCallbacks(float scalar) : scalar(scalar) {}
		float scalar;

		template <typename ElementAccumulator, int FragmentSize>
		CUTLASS_DEVICE Array<float, FragmentSize>
		visit(Array<ElementAccumulator, FragmentSize> const &, int, int, int)
		{
			Array<float, FragmentSize> v;
			v.fill(scalar);
			return v;
		}
	};

	// The wait (griddepcontrol.wait, when compiled with CUTLASS's GDC):
	// at once on sm_90, where the mainloop before it already followed the
	// producer's wait; sm_100's epilogue warps call this before they wait
	// for the accumulators and wait nowhere else. Every tree has alpha and
	// the epilogue makes every node's callbacks before any node's begin(),
	// so the bias's and the gate's reads follow this wait too.
	template <bool ReferenceSrc, class... Args>
	CUTLASS_DEVICE auto get_consumer_store_callbacks(
		cutlass::epilogue::fusion::detail::ConsumerStoreArgs<Args...> const &)
	{
		cutlass::arch::wait_on_dependent_grids();
		float s = params_ptr->scalar_ptrs[0][0];
		CUTLASS_PRAGMA_UNROLL
		for (int i = 1; i < Count; ++i)
			s = s * params_ptr->scalar_ptrs[i][0];
		return ConsumerStoreCallbacks(s);
	}
};

// ---------------------------------------------------------------------
// A leaf node of the visitor tree: the gate of row r, gate[(r / L) * ld + n]
// (bf16, [B, N] with ld = N in the contract), L rows per batch.
//
// When the whole CTA tile lies in one batch (B == 1, or L a multiple of
// the tile height: the usual case), the gate is one row for the tile, and
// the leaf works like CUTLASS's row broadcast: at the tile's start the
// epilogue threads copy the tile's tile_n gate values into shared memory
// (zeros past N), the epilogue's barrier after begin() (which the bias's
// row broadcast asks for too) makes them visible, and each subtile reads
// its values from there. A tile that straddles two batches reads each
// element's gate straight from global memory at the start of each
// subtile (rows and columns outside [M, N) read nothing). Both paths give
// the same values, so the same bytes.
//
// The shared array is rewritten at the next tile's begin() only after the
// barrier that ends each subtile's register-to-shared store of D, which
// follows every read of this tile's values.
struct PerBatchRowArguments {
	bf16_t const *ptr = nullptr;
	int rows_per_batch = 1; // L, >= 1
	int64_t ld = 0;         // elements between two batches' rows
};
template <class CtaTileShapeMNK> struct PerBatchRowLoad : ConsumerLeaf<PerBatchRowArguments> {
	static constexpr int tile_n = int(cute::size<1>(CtaTileShapeMNK{}));
	struct SharedStorage {
		cute::array_aligned<bf16_t, tile_n> gate;
	};
	using Arguments = PerBatchRowArguments;
	using Params = Arguments;

	template <class ProblemShape>
	static bool can_implement(ProblemShape const &, Arguments const &args)
	{
		return args.ptr != nullptr && args.rows_per_batch > 0;
	}

	CUTLASS_HOST_DEVICE PerBatchRowLoad() {}
	CUTLASS_HOST_DEVICE PerBatchRowLoad(Params const &params, SharedStorage const &shared)
		: params_ptr(&params), smem(const_cast<bf16_t *>(shared.gate.data()))
	{
	}
	Params const *params_ptr = nullptr;
	bf16_t *smem = nullptr;

	template <class CTensor, class RTensor>
	struct ConsumerStoreCallbacks
		: cutlass::epilogue::fusion::detail::EmptyConsumerStoreCallbacks {
		CUTLASS_DEVICE ConsumerStoreCallbacks(CTensor &&tC_c, RTensor &&tC_r, int m_limit,
						      int n_limit, int n_first, int tile_batch,
						      int thread_idx, int threads, bf16_t *smem,
						      Params const *params)
			: tC_c(cute::forward<CTensor>(tC_c)), tC_r(cute::forward<RTensor>(tC_r)),
			  m_limit(m_limit), n_limit(n_limit), n_first(n_first), tile_batch(tile_batch),
			  thread_idx(thread_idx), threads(threads), smem(smem), params(params)
		{
		}
		CTensor tC_c; // (CPY, CPY_M, CPY_N, EPI_M, EPI_N) absolute (m, n, l)
		RTensor tC_r; // (CPY, CPY_M, CPY_N)
		int m_limit, n_limit;
		int n_first;    // the tile's first column
		int tile_batch; // the one batch of the tile, or -1: per row
		int thread_idx, threads;
		bf16_t *smem;
		Params const *params;

		// the tile's gate row into shared memory (one batch only)
		CUTLASS_DEVICE void begin()
		{
			if (tile_batch < 0)
				return;
			bf16_t const *row = params->ptr + (int64_t)tile_batch * params->ld;
			for (int j = thread_idx; j < tile_n; j += threads) {
				const int n = n_first + j;
				smem[j] = n < n_limit ? row[n] : bf16_from_bits(0);
			}
		}

		CUTLASS_DEVICE bool begin_sync_needed() const { return tile_batch >= 0; }

		CUTLASS_DEVICE void begin_loop(int epi_m, int epi_n)
		{
			using namespace cute;
			Tensor c = tC_c(_, _, _, epi_m, epi_n);
			if (tile_batch >= 0) {
				// rows past M take a value too: their results are not stored
				CUTLASS_PRAGMA_UNROLL
				for (int i = 0; i < size(tC_r); ++i)
					tC_r(i) = smem[get<1>(c(i)) - n_first];
				return;
			}
			bf16_t const *ptr = params->ptr;
			const int L = params->rows_per_batch;
			const int64_t ld = params->ld;
			CUTLASS_PRAGMA_UNROLL
			for (int i = 0; i < size(tC_r); ++i) {
				const int m = get<0>(c(i));
				const int n = get<1>(c(i));
				bf16_t v = bf16_from_bits(0);
				if (m < m_limit && n < n_limit)
					v = ptr[(int64_t)(m / L) * ld + n];
				tC_r(i) = v;
			}
		}

		template <typename ElementAccumulator, int FragmentSize>
		CUTLASS_DEVICE Array<bf16_t, FragmentSize>
		visit(Array<ElementAccumulator, FragmentSize> const &, int epi_v, int, int)
		{
			return cute::recast<Array<bf16_t, FragmentSize>>(tC_r)(epi_v);
		}
	};

	template <bool ReferenceSrc, class... Args>
	CUTLASS_DEVICE auto get_consumer_store_callbacks(
		cutlass::epilogue::fusion::detail::ConsumerStoreArgs<Args...> const &args)
	{
		using namespace cute;
		auto [M, N, K, L] = args.problem_shape_mnkl;
		auto [m, n, k, l] = args.tile_coord_mnkl;
		Tensor coord = make_identity_tensor(make_shape(M, N, L));
		Tensor tC_c = cutlass::epilogue::fusion::sm90_partition_for_epilogue<ReferenceSrc>(
			coord, args.tile_shape_mnk, args.tile_coord_mnkl, args.epi_tile,
			args.tiled_copy, args.thread_idx);
		Tensor tC_r = make_tensor<bf16_t>(take<0, 3>(shape(tC_c)));
		static_assert(decltype(size<1>(args.tile_shape_mnk))::value == tile_n,
			      "the leaf's tile is the epilogue's");
		const int tile_m = size<0>(args.tile_shape_mnk);
		const int rows = params_ptr->rows_per_batch;
		const int first = int(m) * tile_m;
		const int last = cute::min(first + tile_m, int(M)) - 1;
		const int batch = (last < first || first / rows == last / rows) ? first / rows : -1;
		return ConsumerStoreCallbacks<decltype(tC_c), decltype(tC_r)>(
			cute::move(tC_c), cute::move(tC_r), int(M), int(N), int(n) * tile_n, batch,
			args.thread_idx, int(size(args.tiled_copy)), smem, params_ptr);
	}
};

// ---------------------------------------------------------------------
// The instance: CUTLASS types from P, in three parts. What the epilogue
// computes (gemm_fp8_kind) and its visitor tree (gemm_fp8_evt) are the
// same on every architecture, so are the contract's rounding points; the
// collectives around them are the architecture's (gemm_fp8_sm90 here,
// gemm_fp8_sm100 in gemm_fp8_sm100.cuh), picked by P::sm100.

template <class P> struct gemm_fp8_kind {
	static constexpr GemmEpilogue epi = P::epilogue;
	static constexpr bool gelu = epi == GemmEpilogue::gelu_tanh_fp8 ||
				     epi == GemmEpilogue::gelu_tanh_fp8_out;
	static constexpr bool with_bias = epi == GemmEpilogue::bias ||
					  ((gelu || epi == GemmEpilogue::gate_residual) && P::bias);
	static constexpr bool gelu_out = epi == GemmEpilogue::gelu_tanh_fp8_out ||
					 (gelu && P::gelu_out);
	static constexpr bool residual = epi == GemmEpilogue::gate_residual;

	using ElementA = e4m3_t;
	using ElementB = e4m3_t;
	using LayoutA = cutlass::layout::RowMajor;    // [M, K], K contiguous
	using LayoutB = cutlass::layout::ColumnMajor; // [N, K], K contiguous
	using ElementD = cute::conditional_t<gelu, e4m3_t, bf16_t>;
	using ElementC = cute::conditional_t<residual, bf16_t, void>; // residual, via TMA
	using LayoutC = cutlass::layout::RowMajor;
	using LayoutD = cutlass::layout::RowMajor;
	static constexpr int align_c = residual ? 8 : 16 / int(sizeof(ElementD));
	static constexpr int align_d = 16 / int(sizeof(ElementD));
	using TileShape = cute::Shape<cute::Int<P::tile_m>, cute::Int<P::tile_n>, cute::Int<P::tile_k>>;
	using ClusterShape = cute::Shape<cute::Int<P::cluster_m>, cute::Int<P::cluster_n>, cute::_1>;
	using EpilogueTileType = cute::Shape<cute::Int<P::epi_m>, cute::Int<P::epi_n>>;

	static_assert(P::tile_k == 128 || P::tile_k == 64 || P::tile_k == 256,
		      "tile_k is 64, 128 or 256 e4m3 elements");
};

// The visitor tree, over the architecture's store of g (GStore: an
// Sm90AuxStore laid out by the architecture's descriptor). The Sm90 nodes
// are CUTLASS's nodes for sm_100's TMA epilogue too.
template <class P, class GStore_> struct gemm_fp8_evt : gemm_fp8_kind<P> {
	using Kind = gemm_fp8_kind<P>;
	static constexpr auto round = cutlass::FloatRoundStyle::round_to_nearest;
	template <template <class> class Fn, class Out>
	using Compute = cutlass::epilogue::fusion::Sm90Compute<Fn, Out, float, round>;
	using Acc = cutlass::epilogue::fusion::Sm90AccFetch;
	// alpha = a_scale * b_scale, both read from device memory at each
	// tile's epilogue (LateScalar: safe under programmatic launch)
	using Alpha = LateScalar<2>;
	using OutScale = LateScalar<1>;
	using Bias = cutlass::epilogue::fusion::Sm90RowBroadcast<
		0, typename Kind::TileShape, bf16_t, float, cute::Stride<cute::_0, cute::_1, int64_t>, 8,
		false>;
	using DNode = cute::conditional_t<
		Kind::with_bias,
		cutlass::epilogue::fusion::Sm90EVT<Compute<d_bias_fn, bf16_t>, Acc, Alpha, Bias>,
		cutlass::epilogue::fusion::Sm90EVT<Compute<d_scale_fn, bf16_t>, Acc, Alpha>>;
	using GStore = GStore_;
	using GeluNode = cutlass::epilogue::fusion::Sm90EVT<Compute<gelu_fn, bf16_t>, DNode>;
	using GNode = cute::conditional_t<Kind::gelu_out,
					  cutlass::epilogue::fusion::Sm90EVT<GStore, GeluNode>, GeluNode>;
	using QuantNode = cutlass::epilogue::fusion::Sm90EVT<Compute<quant_fn, e4m3_t>, GNode, OutScale>;
	using Residual = cutlass::epilogue::fusion::Sm90SrcFetch<bf16_t>;
	using Gate = PerBatchRowLoad<typename Kind::TileShape>;
	using GateNode = cutlass::epilogue::fusion::Sm90EVT<Compute<gate_residual_fn, bf16_t>, Gate,
							   DNode, Residual>;
	using Fusion = cute::conditional_t<Kind::gelu, QuantNode,
					   cute::conditional_t<Kind::residual, GateNode, DNode>>;
};

// g's store (gelu_tanh_fp8_out): an Sm90AuxStore laid out by the
// architecture's aux store descriptor (Desc) for its epilogue (EpiDesc).
template <class EpiDesc, class Desc>
using gemm_fp8_gstore_t = cutlass::epilogue::fusion::Sm90AuxStore<
	Desc::Stages, typename EpiDesc::EpilogueTile, bf16_t,
	cutlass::FloatRoundStyle::round_to_nearest, typename Desc::Stride,
	typename Desc::SmemLayoutAtom, typename Desc::CopyOpR2S>;

// The collectives around the tree and the kernel, from CUTLASS's builders
// for the architecture (Arch) with its schedules; the mainloop takes as
// many stages as fit beside the epilogue unless P::stages says.
template <class P, class Arch, class Evt, class KernelSchedule, class EpilogueSchedule,
	  class TileScheduler>
struct gemm_fp8_collectives {
	using Kind = gemm_fp8_kind<P>;
	using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
		Arch, cutlass::arch::OpClassTensorOp, typename Kind::TileShape,
		typename Kind::ClusterShape, typename Kind::EpilogueTileType, float, float,
		typename Kind::ElementC, typename Kind::LayoutC, Kind::align_c,
		typename Kind::ElementD, typename Kind::LayoutD, Kind::align_d, EpilogueSchedule,
		typename Evt::Fusion>::CollectiveOp;

	using StageCount = cute::conditional_t<
		P::stages == 0,
		cutlass::gemm::collective::StageCountAutoCarveout<
			static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>,
		cutlass::gemm::collective::StageCount<(P::stages > 0 ? P::stages : 1)>>;

	using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
		Arch, cutlass::arch::OpClassTensorOp, typename Kind::ElementA,
		typename Kind::LayoutA, 16, typename Kind::ElementB, typename Kind::LayoutB, 16, float,
		typename Kind::TileShape, typename Kind::ClusterShape, StageCount,
		KernelSchedule>::CollectiveOp;

	using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>,
							    CollectiveMainloop, CollectiveEpilogue,
							    TileScheduler>;
};

// sm_90a: TMA + WGMMA, warp-specialized cooperative or ping-pong.
template <class P> struct gemm_fp8_sm90_gstore {
	using K = gemm_fp8_kind<P>;
	static constexpr bool cooperative = int(P::schedule) == int(GemmSchedule::cooperative);
	using EpilogueSchedule = cute::conditional_t<cooperative,
						     cutlass::epilogue::TmaWarpSpecializedCooperative,
						     cutlass::epilogue::TmaWarpSpecialized>;
	using EpiDesc = cutlass::epilogue::collective::detail::EpilogueDescriptor<
		typename K::TileShape, typename K::EpilogueTileType, typename K::ElementC,
		typename K::ElementD, EpilogueSchedule>;
	using Desc = cutlass::epilogue::collective::detail::AuxStoreDescriptor<
		EpiDesc, cutlass::layout::RowMajor, bf16_t>;
	using type = gemm_fp8_gstore_t<EpiDesc, Desc>;
};

// Split-K and stream-K whose scratch is never cleared between launches
// (the spec's io: scratch, docs/spec-format.md "Scratch"). CUTLASS's
// stream-K scheduler decomposes the work (split-K: each tile in `splits`
// K slices; stream-K: the K iterations of some tiles spread over the SMs
// by their count); the reduction across the slices of a tile is the
// deterministic one of CUTLASS's scheduler, in jitk's layout of the
// scratch:
//
//   [0, gemm_splitk_flag_bytes)   a 32-bit flag per output tile and
//                                 consumer warp group, 0 between launches
//   [gemm_splitk_flag_bytes, ...) the fp32 partial sums of every output
//                                 tile, each warp group's half striped
//                                 over its threads
//
// Split 0 stores its accumulators and adds its K tiles to the flag; split
// s waits until the flag counts the K tiles of splits 0 .. s-1, adds its
// accumulators to the sums (one split at a time: a fixed order) and adds
// its own; the final split waits likewise, adds the sums to its
// accumulators, sets the flag back to 0 - every earlier split has arrived,
// and none reads it again - and runs the epilogue. So every launch leaves
// the flags as it found them, and the scratch, zeroed once when jitk made
// it, serves the next launch without a memset; the sums need no clearing
// (split 0 stores), and since the flags come first in every instance of
// the family (the scratch is the family's, per stream), no instance's sums
// ever lie where another's flags do. The order of the additions depends on
// the split count (stream-K: on the SM count too), and fused and split
// kernels of one tuning share it: they give the same bytes.
struct SplitKScheduler {};

constexpr long long gemm_splitk_flag_bytes = 1 << 20;

template <class TileShape, class ClusterShape>
struct SplitKSelfReset
	: cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90StreamK<TileShape, ClusterShape> {
	using Base = cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90StreamK<TileShape,
										      ClusterShape>;
	using Params = typename Base::Params;
	using WorkTileInfo = typename Base::WorkTileInfo;
	using Base::Base;

	template <class FrgTensorC>
	CUTLASS_DEVICE static void fixup(Params const &params, WorkTileInfo const &work,
					 FrgTensorC &accumulators, uint32_t num_barriers,
					 uint32_t barrier_idx)
	{
		using Acc = typename FrgTensorC::value_type;
		using Barriers = cutlass::NamedBarrierManager<
			cutlass::NumThreadsPerWarpGroup,
			int(cutlass::arch::ReservedNamedBarriers::StreamkBarrier0), 2>;
		using Part = cutlass::Array<Acc, decltype(cute::size(FrgTensorC{}))::value>;
		using Striped = cutlass::BlockStripedReduce<Barriers::ThreadCount, Part>;
		constexpr long long tile_elems = cute::size<0>(TileShape{}) * cute::size<1>(TileShape{});

		if (!Base::requires_fixup(params, work))
			return;
		const uint64_t tile = Base::output_tile_index(params, work);
		const int flag = int(tile * num_barriers + barrier_idx);
		const int t = int(threadIdx.x % Barriers::ThreadCount);
		uint8_t *ws = reinterpret_cast<uint8_t *>(params.reduction_workspace_);
		int *flags = reinterpret_cast<int *>(ws);
		Part *sums = reinterpret_cast<Part *>(
			reinterpret_cast<Acc *>(ws + gemm_splitk_flag_bytes) + tile_elems * tile +
			(long long)cute::size(FrgTensorC{}) * barrier_idx * Barriers::ThreadCount);
		Part &mine = *reinterpret_cast<Part *>(accumulators.data());

		if (!Base::compute_epilogue(work, params)) {
			if (work.K_idx == 0) {
				Striped::store(sums, mine, t);
			} else {
				Barriers::wait_eq(barrier_idx, flags, t, flag, int(work.K_idx));
				Striped::reduce(sums, mine, t);
			}
			Barriers::arrive_inc(barrier_idx, flags, t, flag, int(work.k_tile_count));
		} else {
			Barriers::wait_eq(barrier_idx, flags, t, flag, int(work.K_idx));
			Striped::load_add(mine, sums, t);
			if (t == 0)
				flags[flag] = 0;
		}
	}

	// Where the kernel may let the next grid launch (launch.programmatic:
	// CUTLASS_ENABLE_GDC_FOR_SM90): the base's test binds a member of a
	// const object to a non-const reference, which does not compile. Any
	// tile will do: it is a hint (the next grid waits in
	// griddepcontrol.wait until this one has finished), and the grid is
	// persistent, so every CTA of it is resident before any can trigger.
	CUTLASS_DEVICE bool is_last_tile(WorkTileInfo, uint32_t = 1) const { return true; }
};

// The elements (fp32) of scratch a split-K launch of m x n takes: the
// flags, then the partial sums of every output tile (whole clusters,
// whole swizzles). The spec's scratch shape says the same; the builder
// refuses a launch whose scheduler would index past it.
template <class P>
CUTLASS_HOST_DEVICE constexpr long long gemm_fp8_splitk_tiles(long long m, long long n)
{
	const long long sw = P::swizzle > 0 ? P::swizzle : 1;
	const long long bm = P::tile_m * P::cluster_m * sw, bn = P::tile_n * P::cluster_n * sw;
	return (m + bm - 1) / bm * (P::cluster_m * sw) * ((n + bn - 1) / bn) * (P::cluster_n * sw);
}

template <class P>
CUTLASS_HOST_DEVICE constexpr long long gemm_fp8_splitk_elems(long long m, long long n)
{
	return gemm_splitk_flag_bytes / 4 + gemm_fp8_splitk_tiles<P>(m, n) * P::tile_m * P::tile_n;
}

} // namespace gemm
} // namespace jitk

namespace cutlass::gemm::kernel::detail {
template <class TileShape, class ClusterShape, uint32_t Stages>
struct TileSchedulerSelector<jitk::gemm::SplitKScheduler, arch::Sm90, TileShape, ClusterShape,
			     Stages> {
	using Scheduler = jitk::gemm::SplitKSelfReset<TileShape, ClusterShape>;
};
} // namespace cutlass::gemm::kernel::detail

namespace jitk {
namespace gemm {

// P::splits: the split-K count (the spec's tuning; a parameter struct
// without it, bench/gemm_proto's, has 1).
template <class P, class = void> struct splits_of : cute::integral_constant<int, 1> {};
template <class P>
struct splits_of<P, cute::void_t<decltype(P::splits)>> : cute::integral_constant<int, int(P::splits)> {};

template <class P>
struct gemm_fp8_sm90 : gemm_fp8_evt<P, typename gemm_fp8_sm90_gstore<P>::type> {
	using Kind = gemm_fp8_kind<P>;
	static constexpr bool sm100 = false;
	static constexpr bool cooperative = gemm_fp8_sm90_gstore<P>::cooperative;
	static constexpr bool fast_accum = P::fast_accum != 0;
	static_assert(cooperative ? P::tile_m % 128 == 0 : P::tile_m % 64 == 0,
		      "cooperative tiles are 128 or 256 rows high, ping-pong tiles 64 or more");

	using KernelSchedule = cute::conditional_t<
		cooperative,
		cute::conditional_t<fast_accum,
				    cutlass::gemm::KernelTmaWarpSpecializedCooperativeFP8FastAccum,
				    cutlass::gemm::KernelTmaWarpSpecializedCooperative>,
		cute::conditional_t<fast_accum,
				    cutlass::gemm::KernelTmaWarpSpecializedPingpongFP8FastAccum,
				    cutlass::gemm::KernelTmaWarpSpecializedPingpong>>;
	using EpilogueSchedule = typename gemm_fp8_sm90_gstore<P>::EpilogueSchedule;
	static constexpr int splits = splits_of<P>::value;
	static constexpr bool split_k = int(P::scheduler) == int(GemmScheduler::stream_k);
	static_assert(split_k ? splits >= 1 : splits == 1,
		      "the persistent scheduler takes 1 split; stream_k takes 1 (stream-K) or more "
		      "(split-K)");
	using TileScheduler = cute::conditional_t<split_k, SplitKScheduler,
						  cutlass::gemm::PersistentScheduler>;
	// The epilogue tile is the spec's (epi_m x epi_n), which its out, q and
	// residual descriptors box: what EpilogueTileAuto picks for the
	// cooperative kernel (128 x 32), and 64 x 32 for ping-pong (where Auto
	// would take 64 columns for an fp8 D; one tile width keeps one set of
	// boxes and swizzles for every epilogue); 16 columns for a tile whose
	// columns are not a multiple of 32 (the spec's swizzles follow).
	static_assert(P::epi_m == (cooperative ? cute::min(128, int(P::tile_m)) : 64) &&
			      (P::epi_n == 32 || P::epi_n == 16) && P::tile_n % P::epi_n == 0,
		      "the epilogue tile is 128 (cooperative) or 64 (ping-pong) rows of 32 "
		      "columns, or 16 where the tile's columns are not a multiple of 32");

	using Collectives =
		gemm_fp8_collectives<P, cutlass::arch::Sm90,
				     gemm_fp8_evt<P, typename gemm_fp8_sm90_gstore<P>::type>, KernelSchedule,
				     EpilogueSchedule, TileScheduler>;
	using Kernel = typename Collectives::Kernel;
	using Params = typename Kernel::Params;
	static constexpr int threads = Kernel::MaxThreadsPerBlock;
	static constexpr int smem_bytes = Kernel::SharedStorageSize;

	// GemmUniversal::to_underlying_arguments without its host-only SM
	// query (sm_count is jitk's), member by member: the ping-pong
	// kernel's Params has no workspace.
	static CUTLASS_DEVICE Params params(typename Kernel::Arguments const &x, void *workspace)
	{
		using K = Kernel;
		auto shape = x.problem_shape;
		Params p{};
		p.mode = x.mode;
		p.problem_shape = shape;
		p.mainloop = K::CollectiveMainloop::to_underlying_arguments(shape, x.mainloop, nullptr);
		p.epilogue = K::CollectiveEpilogue::to_underlying_arguments(shape, x.epilogue, nullptr);
		p.hw_info = x.hw_info;
		p.scheduler = K::TileScheduler::to_underlying_arguments(
			shape, typename K::TileShape{}, typename K::ClusterShape{}, x.hw_info,
			x.scheduler, workspace,
			K::CollectiveEpilogue::get_store_pipe_increment(typename K::TileShape{}));
		return p;
	}
};

} // namespace gemm
} // namespace jitk

#include "gemm_fp8_sm100.cuh"

namespace jitk {
namespace gemm {

// P::sm100 picks the collectives (the spec's tuning: true on sm_100);
// a parameter struct without it (bench/gemm_proto's) is sm_90's.
template <class P, class = void> struct is_sm100 : cute::false_type {};
template <class P>
struct is_sm100<P, cute::void_t<decltype(P::sm100)>> : cute::bool_constant<bool(P::sm100)> {};

template <class P>
using gemm_fp8_traits =
	cute::conditional_t<is_sm100<P>::value, gemm_fp8_sm100<P>, gemm_fp8_sm90<P>>;

template <class P> using gemm_fp8_kernel_t = typename gemm_fp8_traits<P>::Kernel;

} // namespace gemm

// The kernel entry: cutlass::device_kernel under jitk's name, so that a
// jitk instance is jitk::gemm_fp8<P> whatever the geometry.
template <class P>
__global__ void __launch_bounds__(gemm::gemm_fp8_kernel_t<P>::MaxThreadsPerBlock,
				  gemm::gemm_fp8_kernel_t<P>::MinBlocksPerMultiprocessor)
gemm_fp8(CUTLASS_GRID_CONSTANT typename gemm::gemm_fp8_kernel_t<P>::Params const params)
{
	extern __shared__ char smem[];
	gemm::gemm_fp8_kernel_t<P> op;
	op(params, smem);
}

// The parameter builder (the spec's launch.builder): one thread makes
// the kernel's Params from jitk's arguments, the way CUTLASS's host code
// does (the traits' params(): GemmUniversal::to_underlying_arguments,
// on sm_90 without its host-only SM query; sm_count is jitk's), into
// out->params, with the launch geometry. The TMA descriptors CuTe leaves empty under NVRTC are the
// spec's type: tma arguments, copied in; jitk finds them and every
// address in the bytes from marker runs and patches each call's in
// (runtime/gpu/built.c), so this runs once per shape, not per call.
//
// Arguments, in the spec's order: descriptors of a, b, out (the D store,
// or gelu_tanh_fp8_out's g store), q (gelu's D store), residual (the C
// load); then a, b, a_scale, b_scale, bias, out,
// q, out_scale, gate, residual, ws (split-K's scratch), m, n, k, L (rows
// per gate batch), B (gate batches). Those an instance does not take
// arrive as 0.
template <class P>
__global__ void gemm_fp8_params(jitk_params_out *out, const __grid_constant__ jitk_tensor_map a_map,
				const __grid_constant__ jitk_tensor_map b_map,
				const __grid_constant__ jitk_tensor_map out_map,
				const __grid_constant__ jitk_tensor_map q_map,
				const __grid_constant__ jitk_tensor_map c_map, const fp8_e4m3 *a,
				const fp8_e4m3 *b, const float *a_scale, const float *b_scale,
				const bf16 *bias, bf16 *d, fp8_e4m3 *q, const float *out_scale,
				const bf16 *gate, const bf16 *residual, float *ws, long long m,
				long long n, long long k, long long L, long long B)
{
	using namespace cute;
	using T = gemm::gemm_fp8_traits<P>;
	using K = typename T::Kernel;
	using gemm::bf16_t;
	using gemm::e4m3_t;
	static_assert(sizeof(typename K::Params) <= sizeof(out->params),
		      "the kernel's Params fit jitk's parameter block");
	static_assert(K::MaxThreadsPerBlock == P::block_threads,
		      "the spec's block_threads (launch.block) is the kernel's block");
	const int M = (int)m, N = (int)n, Kd = (int)k;
	typename K::Arguments x{};
	x.mode = cutlass::gemm::GemmUniversalMode::kGemm;
	x.problem_shape = make_shape(M, N, Kd, 1);
	x.mainloop.ptr_A = reinterpret_cast<const e4m3_t *>(a);
	x.mainloop.dA = typename K::StrideA{int64_t(k), _1{}, int64_t(m) * k};
	x.mainloop.ptr_B = reinterpret_cast<const e4m3_t *>(b);
	x.mainloop.dB = typename K::StrideB{int64_t(k), _1{}, int64_t(n) * k};
	const typename K::StrideD stride_d{int64_t(n), _1{}, int64_t(m) * n};

	typename T::Alpha::Arguments alpha{};
	alpha.scalar_ptrs[0] = a_scale;
	alpha.scalar_ptrs[1] = b_scale;
	typename T::DNode::Arguments dn{};
	dn.op_1 = alpha;
	if constexpr (T::with_bias) {
		typename T::Bias::Arguments bi{};
		bi.ptr_row = reinterpret_cast<const bf16_t *>(bias);
		dn.op_2 = bi;
	}
	x.epilogue.dC = typename K::StrideC{int64_t(n), _1{}, int64_t(m) * n};
	x.epilogue.dD = stride_d;
	x.epilogue.ptr_C = nullptr;
	if constexpr (T::gelu) {
		typename T::OutScale::Arguments os{};
		os.scalar_ptrs[0] = out_scale;
		typename T::GeluNode::Arguments ge{};
		ge.op_0 = dn;
		typename T::QuantNode::Arguments qn{};
		if constexpr (T::gelu_out) {
			typename T::GStore::Arguments st{};
			st.ptr_aux = reinterpret_cast<bf16_t *>(d);
			st.dAux = decltype(st.dAux){int64_t(n), _1{}, int64_t(m) * n};
			qn.op_0.op_0 = ge;
			qn.op_0.op_1 = st;
		} else {
			qn.op_0 = ge;
		}
		qn.op_1 = os;
		x.epilogue.thread = qn;
		x.epilogue.ptr_D = reinterpret_cast<e4m3_t *>(q);
	} else if constexpr (T::residual) {
		typename T::GateNode::Arguments gn{};
		typename T::Gate::Arguments g{};
		g.ptr = reinterpret_cast<const bf16_t *>(gate);
		g.rows_per_batch = (int)L;
		g.ld = n;
		gn.op_0 = g;
		gn.op_1 = dn;
		x.epilogue.thread = gn;
		x.epilogue.ptr_C = reinterpret_cast<const bf16_t *>(residual);
		x.epilogue.ptr_D = reinterpret_cast<bf16_t *>(d);
	} else {
		x.epilogue.thread = dn;
		x.epilogue.ptr_D = reinterpret_cast<bf16_t *>(d);
	}
	x.scheduler.max_swizzle_size = int(P::swizzle);
	using Raster = typename K::TileScheduler::RasterOrderOptions;
	x.scheduler.raster_order = P::raster == 1 ? Raster::AlongM
				   : P::raster == 2 ? Raster::AlongN : Raster::Heuristic;
	if constexpr (T::split_k) {
		using S = typename K::TileScheduler;
		x.scheduler.splits = T::splits;
		x.scheduler.decomposition_mode = T::splits > 1 ? S::DecompositionMode::SplitK
							       : S::DecompositionMode::StreamK;
		x.scheduler.reduction_mode = S::ReductionMode::Deterministic;
	}
	x.hw_info = cutlass::KernelHardwareInfo{0, out->sm_count, 0};
	typename K::Params p = T::params(x, ws);
	if constexpr (T::split_k) {
		// what the scheduler will index: no more than the scratch holds
		// (an output tile's index stays below the tiles of whole clusters
		// and swizzles; split-K's units are those tiles)
		const long long tiles = gemm::gemm_fp8_splitk_tiles<P>(m, n);
		const char *why =
			!ws ? "split-K has no scratch (the spec's ws is 0 bytes)"
			: tiles * 2 * 4 > gemm::gemm_splitk_flag_bytes
				? "split-K's output tiles need more flags than its 1 MiB holds"
			: gemm::gemm_splitk_flag_bytes / 4 + tiles * P::tile_m * P::tile_n >
					  gemm::gemm_fp8_splitk_elems<P>(m, n) ||
				  (T::splits > 1 && (long long)p.scheduler.units_per_problem_ > tiles)
				? "split-K's tiles need more scratch than the spec's ws gives"
				: nullptr;
		if (why) {
			int i = 0;
			for (; why[i] && i < 200; i++)
				out->params[i] = (unsigned char)why[i];
			out->params[i] = 0;
			out->magic = JITK_PARAMS_REFUSED;
			return;
		}
	}
	memcpy((void *)p.mainloop.tma_load_a.get_tma_descriptor(), &a_map, sizeof(a_map));
	memcpy((void *)p.mainloop.tma_load_b.get_tma_descriptor(), &b_map, sizeof(b_map));
	if constexpr (T::sm100) {
		// the descriptors of a fallback cluster shape (a static cluster
		// never reads them): the same, so no byte is left unpatched
		memcpy((void *)p.mainloop.tma_load_a_fallback.get_tma_descriptor(), &a_map,
		       sizeof(a_map));
		memcpy((void *)p.mainloop.tma_load_b_fallback.get_tma_descriptor(), &b_map,
		       sizeof(b_map));
	}
	memcpy((void *)p.epilogue.tma_store_d.get_tma_descriptor(), T::gelu ? &q_map : &out_map,
	       sizeof(out_map));
	if constexpr (T::residual)
		memcpy((void *)p.epilogue.tma_load_c.get_tma_descriptor(), &c_map, sizeof(c_map));
	if constexpr (T::gelu_out)
		memcpy((void *)p.epilogue.thread.op_0.op_1.tma_store_aux.get_tma_descriptor(), &out_map,
		       sizeof(out_map));
	(void)c_map, (void)B;
	memset(out->params, 0, sizeof(out->params));
	memcpy(out->params, &p, sizeof(p));
	const dim3 grid = K::get_grid_shape(p), block = K::get_block_shape();
	out->grid[0] = grid.x, out->grid[1] = grid.y, out->grid[2] = grid.z;
	out->block[0] = block.x, out->block[1] = block.y, out->block[2] = block.z;
	out->cluster[0] = P::cluster_m, out->cluster[1] = P::cluster_n, out->cluster[2] = 1;
	out->shared_bytes = T::smem_bytes;
	out->bytes = sizeof(p);
	out->magic = JITK_PARAMS_MAGIC;
}

} // namespace jitk
