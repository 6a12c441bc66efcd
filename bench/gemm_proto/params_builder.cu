// params_builder.cu - a CUTLASS GEMM's kernel Params made on the device
// (NVRTC, -default-device); bench/gemm_proto/params_check.cu runs it.
#include "gemm_fp8.cuh"
struct Pb {
  static constexpr int tile_m = 128, tile_n = 128, tile_k = 128, cluster_m = 2, cluster_n = 1, stages = 0;
  static constexpr jitk::GemmSchedule schedule = jitk::GemmSchedule::cooperative;
  static constexpr jitk::GemmScheduler scheduler = jitk::GemmScheduler::persistent;
  static constexpr bool fast_accum = false;
  static constexpr jitk::GemmEpilogue epilogue = jitk::GemmEpilogue::bias;
  static constexpr bool bias = true, gelu_out = false;
};
namespace jitk {
// Params on the device: CUTLASS's own to_underlying_arguments (device code
// under -default-device); the TMA descriptors it leaves empty under NVRTC
// are jitk's, copied in from grid constants.
// Where Params' parts are (bytes from its start): problem shape, mainloop,
// epilogue, hw_info, scheduler, workspace, then the three descriptors.
template <class Params> __host__ __device__ inline void params_offsets(const Params &p, long long *o)
{
  const char *b = reinterpret_cast<const char *>(&p);
  o[0] = reinterpret_cast<const char *>(&p.problem_shape) - b;
  o[1] = reinterpret_cast<const char *>(&p.mainloop) - b;
  o[2] = reinterpret_cast<const char *>(&p.epilogue) - b;
  o[3] = reinterpret_cast<const char *>(&p.hw_info) - b;
  o[4] = reinterpret_cast<const char *>(&p.scheduler) - b;
  o[5] = reinterpret_cast<const char *>(&p.workspace) - b;
  o[6] = reinterpret_cast<const char *>(p.mainloop.tma_load_a.get_tma_descriptor()) - b;
  o[7] = reinterpret_cast<const char *>(p.mainloop.tma_load_b.get_tma_descriptor()) - b;
  o[8] = reinterpret_cast<const char *>(p.epilogue.tma_store_d.get_tma_descriptor()) - b;
}

template <class P>
__global__ void gemm_fp8_params(typename gemm::gemm_fp8_kernel_t<P>::Params *out, long long *offs, int m, int n, int k,
                                const void *a, const void *b, const float *as, const float *bs,
                                const void *bias, void *d, int sms,
                                const __grid_constant__ cute::TmaDescriptor ta, const __grid_constant__ cute::TmaDescriptor tb,
                                const __grid_constant__ cute::TmaDescriptor td)
{
  using namespace cute;
  using T = gemm::gemm_fp8_traits<P>;
  using K = typename T::Kernel;
  typename K::Arguments x{};
  x.mode = cutlass::gemm::GemmUniversalMode::kGemm;
  x.problem_shape = make_shape(m, n, k, 1);
  x.mainloop.ptr_A = static_cast<const gemm::e4m3_t *>(a);
  x.mainloop.dA = typename K::StrideA{int64_t(k), _1{}, int64_t(m) * k};
  x.mainloop.ptr_B = static_cast<const gemm::e4m3_t *>(b);
  x.mainloop.dB = typename K::StrideB{int64_t(k), _1{}, int64_t(n) * k};
  typename T::Alpha::Arguments al{};
  al.scalars[0] = al.scalars[1] = 1.0f;
  al.scalar_ptrs[0] = as; al.scalar_ptrs[1] = bs;
  typename T::DNode::Arguments dn{};
  dn.op_1 = al;
  typename T::Bias::Arguments bi{};
  bi.ptr_row = static_cast<const gemm::bf16_t *>(bias);
  dn.op_2 = bi;
  x.epilogue.thread = dn;
  x.epilogue.dD = typename K::StrideD{int64_t(n), _1{}, int64_t(m) * n};
  x.epilogue.dC = typename K::StrideC{int64_t(n), _1{}, int64_t(m) * n};
  x.epilogue.ptr_D = static_cast<gemm::bf16_t *>(d);
  // GemmUniversal::to_underlying_arguments without its host-only SM query
  cutlass::KernelHardwareInfo hw{0, sms, sms / 2};
  auto shape = x.problem_shape;
  typename K::TileSchedulerParams sched = K::TileScheduler::to_underlying_arguments(
      shape, typename K::TileShape{}, typename K::ClusterShape{}, hw, x.scheduler, nullptr,
      K::CollectiveEpilogue::get_store_pipe_increment(typename K::TileShape{}));
  typename K::Params p{x.mode, shape,
      K::CollectiveMainloop::to_underlying_arguments(shape, x.mainloop, nullptr),
      K::CollectiveEpilogue::to_underlying_arguments(shape, x.epilogue, nullptr),
      hw, sched, nullptr};
  memcpy((void *)p.mainloop.tma_load_a.get_tma_descriptor(), &ta, sizeof(ta));
  memcpy((void *)p.mainloop.tma_load_b.get_tma_descriptor(), &tb, sizeof(tb));
  memcpy((void *)p.epilogue.tma_store_d.get_tma_descriptor(), &td, sizeof(td));
  *out = p;
  params_offsets(p, offs);
}
}
