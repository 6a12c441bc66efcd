// registry.h - the instances compiled into gemm_proto: each
// instances_<config>.o adds one entry per epilogue it was built with.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gemm_fp8_host.cuh"

namespace gemm_proto {

struct instance {
	std::string config;      // e.g. coop_128x128x128_c2x1
	jitk::GemmEpilogue epilogue;
	bool bias;               // gelu_tanh_fp8 / gate_residual: with bias
	bool gelu_out;           // gelu_tanh_fp8: also stores g
	bool fast_accum;
	bool stream_k;
	int tile_m, tile_n, tile_k, cluster_m, cluster_n;
	const char *schedule;
	std::unique_ptr<op> (*make)();
};

std::vector<instance> &registry();

template <class P> std::unique_ptr<op> make_op()
{
	return std::unique_ptr<op>(new op_t<P>());
}

template <class P> void add_instance(const char *config)
{
	instance in;
	in.config = config;
	in.epilogue = P::epilogue;
	in.bias = P::bias;
	in.gelu_out = P::gelu_out;
	in.fast_accum = P::fast_accum;
	in.stream_k = P::scheduler == jitk::GemmScheduler::stream_k;
	in.tile_m = P::tile_m;
	in.tile_n = P::tile_n;
	in.tile_k = P::tile_k;
	in.cluster_m = P::cluster_m;
	in.cluster_n = P::cluster_n;
	in.schedule = P::schedule == jitk::GemmSchedule::cooperative ? "cooperative" : "pingpong";
	in.make = &make_op<P>;
	registry().push_back(std::move(in));
}

} // namespace gemm_proto
