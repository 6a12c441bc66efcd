// sm100_boxes.cu - what CuTe makes of the sm_100a instances of
// templates/gemm_fp8.cuh on the host: each one's dynamic shared memory,
// Params size and mainloop stages, and the TMA descriptors CUTLASS would
// encode for A, B (and their fallback copies), the epilogue's C, D and
// aux store. Without a GPU driver the encode fails and CuTe prints each
// descriptor's dimensions, box and swizzle (innermost first; swizzle 1,
// 2, 3 = 32, 64, 128 bytes): those must be the spec's boxes
// (specs/gemm_fp8.yaml's a_map, b_map, out_map, q_map, c_map), which jitk
// encodes instead under NVRTC. No GPU needed; nvcc, about 1.5 min:
//
//   I=.pydeps/cutlass_library/source/include
//   nvcc -std=c++17 -arch=sm_100a -DNDEBUG -I$I -Itemplates -Itemplates/include \
//       -o /tmp/sm100_boxes bench/gemm_proto/sm100_boxes.cu
//   /tmp/sm100_boxes 2>&1 | grep -E '^==|^--|boxDim|swizzle'
//
// (docs/performance.md, 2026-12-02, sm_100a: every box and swizzle is the
// spec's.)
// what jitk's translation unit defines before the template
struct alignas(64) jitk_tensor_map { unsigned long long opaque[16]; };
struct alignas(64) jitk_params_out { unsigned magic, bytes, grid[3], block[3], cluster[3], shared_bytes; int sm_count; unsigned pad[3]; alignas(64) unsigned char params[4032]; };
#define JITK_PARAMS_MAGIC 0x6a69746bu
#include "gemm_fp8.cuh"
#include <cstdio>
template <jitk::GemmEpilogue E, int TN> struct P {
	static constexpr int tile_m = 128, tile_n = TN, tile_k = 128, cluster_m = 1, cluster_n = 1, stages = 0;
	static constexpr jitk::GemmSchedule schedule = jitk::GemmSchedule::cooperative;
	static constexpr jitk::GemmScheduler scheduler = jitk::GemmScheduler::persistent;
	static constexpr int swizzle = 1, raster = 0, block_threads = 256, epi_m = 128, epi_n = 32;
	static constexpr bool fast_accum = false, sm100 = true;
	static constexpr jitk::GemmEpilogue epilogue = E;
	static constexpr bool bias = E != jitk::GemmEpilogue::none, gelu_out = E == jitk::GemmEpilogue::gelu_tanh_fp8_out;
};
template <class Q> void probe(const char *name)
{
	using namespace cute;
	using T = jitk::gemm::gemm_fp8_traits<Q>;
	using K = typename T::Kernel;
	static_assert(T::sm100, "sm100 traits");
	printf("== %s: smem %d bytes, Params %zu bytes, threads %d, stages %d\n", name, T::smem_bytes,
	       sizeof(typename K::Params), T::threads, int(K::CollectiveMainloop::DispatchPolicy::Stages));
	fflush(stdout);
	int m = 4096, n = 3072, k = 3072;
	auto shape = make_shape(m, n, k, 1);
	typename K::Arguments x{};
	x.mainloop.ptr_A = (const jitk::gemm::e4m3_t *)0x10000000;
	x.mainloop.dA = typename K::StrideA{int64_t(k), _1{}, int64_t(m) * k};
	x.mainloop.ptr_B = (const jitk::gemm::e4m3_t *)0x20000000;
	x.mainloop.dB = typename K::StrideB{int64_t(k), _1{}, int64_t(n) * k};
	cutlass::KernelHardwareInfo hw{0, 148, 0};
	fprintf(stderr, "-- %s mainloop (A, B, A fallback, B fallback)\n", name);
	K::CollectiveMainloop::to_underlying_arguments(shape, x.mainloop, nullptr, hw);
	x.epilogue.dC = typename K::StrideC{int64_t(n), _1{}, int64_t(m) * n};
	x.epilogue.dD = typename K::StrideD{int64_t(n), _1{}, int64_t(m) * n};
	x.epilogue.ptr_D = (typename K::ElementD *)0x30000000;
	if constexpr (T::residual)
		x.epilogue.ptr_C = (const jitk::gemm::bf16_t *)0x40000000;
	if constexpr (T::gelu_out)
		x.epilogue.thread.op_0.op_1.ptr_aux = (jitk::gemm::bf16_t *)0x50000000,
		x.epilogue.thread.op_0.op_1.dAux = decltype(x.epilogue.thread.op_0.op_1.dAux){int64_t(n), _1{}, int64_t(m) * n};
	fprintf(stderr, "-- %s epilogue (C if any, D, aux if any)\n", name);
	K::CollectiveEpilogue::to_underlying_arguments(shape, x.epilogue, nullptr);
}
int main()
{
	using E = jitk::GemmEpilogue;
	probe<P<E::bias, 256>>("bias 128x256");
	probe<P<E::none, 256>>("none 128x256");
	probe<P<E::gelu_tanh_fp8, 256>>("gelu_tanh_fp8 128x256");
	probe<P<E::gelu_tanh_fp8_out, 256>>("gelu_tanh_fp8_out 128x256");
	probe<P<E::gate_residual, 256>>("gate_residual 128x256");
	probe<P<E::bias, 128>>("bias 128x128");
	probe<P<E::none, 128>>("none 128x128");
	probe<P<E::gelu_tanh_fp8, 128>>("gelu_tanh_fp8 128x128");
	probe<P<E::gelu_tanh_fp8_out, 128>>("gelu_tanh_fp8_out 128x128");
	probe<P<E::gate_residual, 128>>("gate_residual 128x128");
}
