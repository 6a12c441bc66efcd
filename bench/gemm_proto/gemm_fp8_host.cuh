// gemm_fp8_host.cuh - the host side of templates/gemm_fp8.cuh for the
// prototype harness: the CUTLASS arguments of one call (the visitor
// tree's nested arguments spelled out), the kernel Params they make
// (TMA descriptors encoded here, on the host), and the cluster launch of
// jitk::gemm_fp8<P>. This is what jitk's runtime will have to do for the
// family: build the Params blob (or its descriptors) and launch with
// cluster dimensions and gemm_fp8_traits<P>::smem_bytes.
#pragma once

#include <cuda_runtime.h>

#include <cutlass/util/packed_stride.hpp>

#include "gemm_fp8.cuh"

namespace gemm_proto {

// One call's operands (device pointers) and knobs.
struct problem {
	int m = 0, n = 0, k = 0;
	const void *a = nullptr;        // e4m3 [m, k]
	const void *b = nullptr;        // e4m3 [n, k]
	const float *a_scale = nullptr; // [1]
	const float *b_scale = nullptr; // [1]
	const void *bias = nullptr;     // bf16 [n]
	void *out = nullptr;            // bf16 [m, n]: d, g (gelu, may be null), gate_residual's out
	void *q = nullptr;              // e4m3 [m, n]: gelu_tanh_fp8
	const float *out_scale = nullptr;
	const void *gate = nullptr;     // bf16 [m / rows_per_batch, n]
	int rows_per_batch = 1;
	const void *residual = nullptr; // bf16 [m, n], may equal out
	int swizzle = 1;                // tile rasterization swizzle (1, 2, 4, 8)
	int raster = 0;                 // 0 heuristic, 1 along M, 2 along N
	int sm_count = 0;
	int max_active_clusters = 0;
};

// A prepared call of one instance: Params built once, launched many times.
struct op {
	virtual ~op() {}
	// nullptr when the call can be made, else why not. workspace: device
	// memory of at least workspace_bytes(p) bytes (may be null when 0).
	virtual const char *prepare(const problem &p, void *workspace) = 0;
	virtual size_t workspace_bytes(const problem &p) = 0;
	virtual cudaError_t launch(cudaStream_t stream) = 0;
	virtual int threads() const = 0;
	virtual int smem_bytes() const = 0;
	virtual int max_active_clusters(int sm_count) = 0;
};

template <class P> struct op_t final : op {
	using T = jitk::gemm::gemm_fp8_traits<P>;
	using K = typename T::Kernel;
	typename K::Arguments args{};
	typename K::Params params{};
	void *ws = nullptr;
	bool stream_k = P::scheduler == jitk::GemmScheduler::stream_k;

	static typename K::Arguments make_arguments(const problem &p)
	{
		using namespace cute;
		using bf16_t = jitk::gemm::bf16_t;
		using e4m3_t = jitk::gemm::e4m3_t;
		typename K::Arguments a{};
		a.mode = cutlass::gemm::GemmUniversalMode::kGemm;
		a.problem_shape = make_shape(p.m, p.n, p.k, 1);

		a.mainloop.ptr_A = static_cast<const e4m3_t *>(p.a);
		a.mainloop.dA = cutlass::make_cute_packed_stride(typename K::StrideA{},
								 make_shape(p.m, p.k, 1));
		a.mainloop.ptr_B = static_cast<const e4m3_t *>(p.b);
		a.mainloop.dB = cutlass::make_cute_packed_stride(typename K::StrideB{},
								 make_shape(p.n, p.k, 1));

		auto stride_d = cutlass::make_cute_packed_stride(typename K::StrideD{},
								 make_shape(p.m, p.n, 1));
		auto stride_c = cutlass::make_cute_packed_stride(typename K::StrideC{},
								 make_shape(p.m, p.n, 1));

		// The visitor trees' arguments: one member op_i per child, in order,
		// then the node's own. d: {acc, alpha, [bias], compute}
		typename T::Alpha::Arguments alpha{};
		alpha.scalars[0] = 1.0f;
		alpha.scalars[1] = 1.0f;
		alpha.scalar_ptrs[0] = p.a_scale;
		alpha.scalar_ptrs[1] = p.b_scale;
		typename T::DNode::Arguments d{};
		d.op_1 = alpha;
		if constexpr (T::with_bias) {
			typename T::Bias::Arguments bias{};
			bias.ptr_row = static_cast<const bf16_t *>(p.bias);
			d.op_2 = bias;
		}

		a.epilogue.dC = stride_c;
		a.epilogue.dD = stride_d;
		a.epilogue.ptr_C = nullptr;
		if constexpr (T::gelu) {
			// q: {g, out_scale, compute}; g: {d, compute} or {{d, compute}, store}
			typename T::OutScale::Arguments os{};
			os.scalars[0] = 1.0f;
			os.scalar_ptrs[0] = p.out_scale;
			typename T::GeluNode::Arguments gelu{};
			gelu.op_0 = d;
			typename T::QuantNode::Arguments qn{};
			if constexpr (T::gelu_out) {
				typename T::GStore::Arguments st{};
				st.ptr_aux = static_cast<bf16_t *>(p.out);
				st.dAux = stride_d;
				qn.op_0.op_0 = gelu;
				qn.op_0.op_1 = st;
			} else {
				qn.op_0 = gelu;
			}
			qn.op_1 = os;
			a.epilogue.thread = qn;
			a.epilogue.ptr_D = static_cast<e4m3_t *>(p.q);
		} else if constexpr (T::residual) {
			// out: {gate, d, residual (C), compute}
			typename T::GateNode::Arguments gn{};
			typename T::Gate::Arguments g{};
			g.ptr = static_cast<const bf16_t *>(p.gate);
			g.rows_per_batch = p.rows_per_batch;
			g.ld = p.n;
			gn.op_0 = g;
			gn.op_1 = d;
			a.epilogue.thread = gn;
			a.epilogue.ptr_C = static_cast<const bf16_t *>(p.residual);
			a.epilogue.ptr_D = static_cast<bf16_t *>(p.out);
		} else {
			a.epilogue.thread = d;
			a.epilogue.ptr_D = static_cast<bf16_t *>(p.out);
		}

		a.hw_info.device_id = 0;
		a.hw_info.sm_count = p.sm_count;
		a.hw_info.max_active_clusters = p.max_active_clusters;
		a.scheduler.max_swizzle_size = p.swizzle;
		using Raster = decltype(a.scheduler.raster_order);
		a.scheduler.raster_order = p.raster == 1 ? Raster::AlongM
					 : p.raster == 2 ? Raster::AlongN
							 : Raster::Heuristic;
		if constexpr (P::scheduler == jitk::GemmScheduler::stream_k) {
			using R = decltype(a.scheduler.reduction_mode);
			a.scheduler.reduction_mode = R::Deterministic;
		}
		return a;
	}

	size_t workspace_bytes(const problem &p) override
	{
		return K::get_workspace_size(make_arguments(p));
	}

	const char *prepare(const problem &p, void *workspace) override
	{
		if (p.m <= 0 || p.n <= 0 || p.k <= 0)
			return "M, N and K must be positive";
		if (p.k % 16 || p.n % 16)
			return "K and N must be multiples of 16 (TMA strides of 16 bytes)";
		if (T::residual && (p.rows_per_batch <= 0 || p.m % p.rows_per_batch))
			return "rows (M) must be a multiple of rows_per_batch (L)";
		args = make_arguments(p);
		if (!K::can_implement(args))
			return "CUTLASS can_implement refused the arguments";
		ws = workspace;
		params = K::to_underlying_arguments(args, workspace);
		cudaError_t e = cudaFuncSetAttribute(jitk::gemm_fp8<P>,
						     cudaFuncAttributeMaxDynamicSharedMemorySize,
						     T::smem_bytes);
		if (e != cudaSuccess)
			return cudaGetErrorString(e);
		return nullptr;
	}

	cudaError_t launch(cudaStream_t stream) override
	{
		if (stream_k) {
			// The stream-K locks count up and are never reset by the kernel.
			if (K::initialize_workspace(args, ws, stream) != cutlass::Status::kSuccess)
				return cudaErrorUnknown;
		}
		dim3 grid = K::get_grid_shape(params);
		dim3 block = K::get_block_shape();
		cudaLaunchConfig_t cfg = {};
		cudaLaunchAttribute attr[1];
		attr[0].id = cudaLaunchAttributeClusterDimension;
		attr[0].val.clusterDim.x = P::cluster_m;
		attr[0].val.clusterDim.y = P::cluster_n;
		attr[0].val.clusterDim.z = 1;
		cfg.gridDim = grid;
		cfg.blockDim = block;
		cfg.dynamicSmemBytes = T::smem_bytes;
		cfg.stream = stream;
		cfg.attrs = attr;
		cfg.numAttrs = 1;
		return cudaLaunchKernelEx(&cfg, jitk::gemm_fp8<P>, params);
	}

	int threads() const override { return T::threads; }
	int smem_bytes() const override { return T::smem_bytes; }

	int max_active_clusters(int sm_count) override
	{
		if (cudaFuncSetAttribute(jitk::gemm_fp8<P>, cudaFuncAttributeMaxDynamicSharedMemorySize,
					 T::smem_bytes) != cudaSuccess)
			return 0;
		cudaLaunchConfig_t cfg = {};
		cudaLaunchAttribute attr[1];
		attr[0].id = cudaLaunchAttributeClusterDimension;
		attr[0].val.clusterDim.x = P::cluster_m;
		attr[0].val.clusterDim.y = P::cluster_n;
		attr[0].val.clusterDim.z = 1;
		cfg.gridDim = dim3(P::cluster_m * P::cluster_n * (sm_count / (P::cluster_m * P::cluster_n)), 1, 1);
		cfg.blockDim = dim3(T::threads, 1, 1);
		cfg.dynamicSmemBytes = T::smem_bytes;
		cfg.attrs = attr;
		cfg.numAttrs = 1;
		int clusters = 0;
		if (cudaOccupancyMaxActiveClusters(&clusters, jitk::gemm_fp8<P>, &cfg) != cudaSuccess)
			return 0;
		return clusters;
	}
};

} // namespace gemm_proto
