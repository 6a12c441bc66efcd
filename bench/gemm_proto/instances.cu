// instances.cu - one tile configuration of jitk::gemm_fp8, all its
// epilogues, registered with the harness. build.sh compiles this file
// once per configuration with:
//   -DCFG_NAME=coop_128x128x128_c2x1 -DCFG_SCHED=cooperative
//   -DCFG_SCHEDULER=persistent -DCFG_TM=128 -DCFG_TN=128 -DCFG_TK=128
//   -DCFG_CM=2 -DCFG_CN=1 -DCFG_STAGES=0 -DCFG_FAST=false -DCFG_FULL=1
// CFG_FULL=0 builds only the epilogues none and bias (a mainloop sweep).
#include "registry.h"

#define CFG_STR2(x) #x
#define CFG_STR(x) CFG_STR2(x)

namespace CFG_NAME {

template <jitk::GemmEpilogue E, bool BIAS, bool GELU_OUT> struct P {
	static constexpr int tile_m = CFG_TM;
	static constexpr int tile_n = CFG_TN;
	static constexpr int tile_k = CFG_TK;
	static constexpr int cluster_m = CFG_CM;
	static constexpr int cluster_n = CFG_CN;
	static constexpr int stages = CFG_STAGES;
	static constexpr jitk::GemmSchedule schedule = jitk::GemmSchedule::CFG_SCHED;
	static constexpr jitk::GemmScheduler scheduler = jitk::GemmScheduler::CFG_SCHEDULER;
	static constexpr bool fast_accum = CFG_FAST;
	static constexpr jitk::GemmEpilogue epilogue = E;
	static constexpr bool bias = BIAS;
	static constexpr bool gelu_out = GELU_OUT;
};

using E = jitk::GemmEpilogue;

struct registrar {
	registrar()
	{
		const char *name = CFG_STR(CFG_NAME);
		gemm_proto::add_instance<P<E::none, false, false>>(name);
		gemm_proto::add_instance<P<E::bias, true, false>>(name);
#if CFG_FULL
		gemm_proto::add_instance<P<E::gelu_tanh_fp8, true, false>>(name);
		gemm_proto::add_instance<P<E::gelu_tanh_fp8, true, true>>(name);
		gemm_proto::add_instance<P<E::gate_residual, true, false>>(name);
#endif
	}
};

static registrar the_registrar;

} // namespace CFG_NAME
