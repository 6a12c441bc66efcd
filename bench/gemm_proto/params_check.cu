// params_check.cu - can jitk make a CUTLASS GEMM's kernel Params without
// running CUTLASS's host code? (issue 24: the generic call has no host
// code to run.) Two questions, answered on the GPU:
//
//  1. Params built on the device: the builder kernel of params_builder.cu
//     (compiled by NVRTC, where -default-device makes CUTLASS's collective
//     to_underlying_arguments device code) against the host's
//     to_underlying_arguments (nvcc, here): which bytes differ. The TMA
//     descriptors, which the device cannot encode, are passed in.
//  2. The TMA descriptors CuTe encodes for A, B and D against ones encoded
//     the way jitk's `type: tma` arguments do (cuTensorMapEncodeTiled on
//     the tensor as it is, dims innermost first), in a few candidate forms:
//     which one is byte-identical.
//
//   nvcc -std=c++17 -arch=sm_90a -DCUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL -I templates -I $CUTLASS/include
//        -I $CUTLASS/tools/util/include bench/gemm_proto/params_check.cu -lcuda
//   params_check BUILDER.cubin LOWERED_NAME   (what nvrtc_alone prints)
#include <cstdio>
#include <cstring>
#include <vector>

#include <cuda.h>
#include <dlfcn.h>

#include "gemm_fp8_host.cuh"
#include "params_builder.cu"

using T = jitk::gemm::gemm_fp8_traits<Pb>;
using K = T::Kernel;

#define CK(x)                                                                          \
	do {                                                                           \
		CUresult r_ = (x);                                                     \
		if (r_ != CUDA_SUCCESS) {                                              \
			const char *s_ = "";                                           \
			cuGetErrorName(r_, &s_);                                       \
			std::printf("%s: %s (line %d)\n", #x, s_, __LINE__);           \
			return 1;                                                      \
		}                                                                      \
	} while (0)

static int same(const void *a, const void *b, size_t n) { return !std::memcmp(a, b, n); }

// Built with -DCUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL, CUTLASS calls this
// by name: say what CuTe asks the driver for, then ask it.
static int quiet = 0;
extern "C" CUresult cuTensorMapEncodeTiled(CUtensorMap *m, CUtensorMapDataType t, cuuint32_t rank,
					   void *addr, const cuuint64_t *dims, const cuuint64_t *strides,
					   const cuuint32_t *box, const cuuint32_t *es,
					   CUtensorMapInterleave il, CUtensorMapSwizzle sw,
					   CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob)
{
	using fn = CUresult (*)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
				const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
				const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
				CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
	static fn real = (fn)dlsym(RTLD_NEXT, "cuTensorMapEncodeTiled");
	if (!quiet) {
		std::printf("CuTe encodes: dtype %d rank %u addr %p dims [", (int)t, rank, addr);
		for (cuuint32_t i = 0; i < rank; i++)
			std::printf("%s%llu", i ? ", " : "", (unsigned long long)dims[i]);
		std::printf("] strides [");
		for (cuuint32_t i = 0; i + 1 < rank; i++)
			std::printf("%s%llu", i ? ", " : "", (unsigned long long)strides[i]);
		std::printf("] box [");
		for (cuuint32_t i = 0; i < rank; i++)
			std::printf("%s%u", i ? ", " : "", box[i]);
		std::printf("] elem strides [");
		for (cuuint32_t i = 0; i < rank; i++)
			std::printf("%s%u", i ? ", " : "", es[i]);
		std::printf("] interleave %d swizzle %d l2 %d oob %d\n", (int)il, (int)sw, (int)l2, (int)oob);
	}
	return real ? real(m, t, rank, addr, dims, strides, box, es, il, sw, l2, oob)
		    : CUDA_ERROR_NOT_FOUND;
}

// One candidate encoding of a [rows, cols] row-major tensor (cols
// contiguous), jitk's way: dims innermost first, optionally with a
// trailing batch dimension of 1 (rank 3, its stride 0).
static CUresult encode(CUtensorMap *m, CUtensorMapDataType t, int esize, void *p, uint64_t rows,
		       uint64_t cols, uint32_t box_r, uint32_t box_c, CUtensorMapSwizzle sw,
		       int rank3)
{
	cuuint64_t dims[3] = { cols, rows, 1 };
	cuuint64_t strides[2] = { cols * esize, 0 }; /* a batch of 1: stride 0, as CuTe gives it */
	cuuint32_t box[3] = { box_c, box_r, 1 };
	cuuint32_t es[3] = { 1, 1, 1 };
	return cuTensorMapEncodeTiled(m, t, rank3 ? 3 : 2, p, dims, strides, box, es,
				      CU_TENSOR_MAP_INTERLEAVE_NONE, sw, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
				      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

// Which candidate (box rows x box cols, rank) gives CuTe's bytes.
static void which(const char *what, const void *cute_desc, CUtensorMapDataType t, int esize,
		  void *p, uint64_t rows, uint64_t cols, const std::vector<uint32_t> &box_rs,
		  const std::vector<uint32_t> &box_cs, CUtensorMapSwizzle sw)
{
	int found = 0;
	for (int rank3 = 0; rank3 < 2; rank3++)
		for (uint32_t br : box_rs)
			for (uint32_t bc : box_cs) {
				CUtensorMap m;
				if (encode(&m, t, esize, p, rows, cols, br, bc, sw, rank3) != CUDA_SUCCESS)
					continue;
				if (same(&m, cute_desc, sizeof(m))) {
					std::printf("%s: CuTe's descriptor == jitk-style rank %d, box [%u, %u]\n",
						    what, rank3 ? 3 : 2, br, bc);
					found = 1;
				}
			}
	if (!found)
		std::printf("%s: no candidate gives CuTe's descriptor bytes\n", what);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		std::printf("usage: params_check BUILDER.cubin LOWERED_NAME\n");
		return 2;
	}
	const int m = 512, n = 3072, k = 3072;
	CUdevice dev;
	CUcontext ctx;
	CK(cuInit(0));
	CK(cuDeviceGet(&dev, 0));
	CK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CK(cuCtxSetCurrent(ctx));
	int sms = 0;
	CK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
	CUdeviceptr a, b, d, as, bs, bias, out;
	CK(cuMemAlloc(&a, (size_t)m * k));
	CK(cuMemAlloc(&b, (size_t)n * k));
	CK(cuMemAlloc(&d, (size_t)m * n * 2));
	CK(cuMemAlloc(&as, 4));
	CK(cuMemAlloc(&bs, 4));
	CK(cuMemAlloc(&bias, (size_t)n * 2));
	CK(cuMemAlloc(&out, sizeof(K::Params)));
	CUdeviceptr offs;
	CK(cuMemAlloc(&offs, 9 * sizeof(long long)));
	CK(cuMemsetD8(out, 0xab, sizeof(K::Params)));

	gemm_proto::problem p;
	p.m = m, p.n = n, p.k = k;
	p.a = (void *)a, p.b = (void *)b, p.out = (void *)d, p.bias = (void *)bias;
	p.a_scale = (const float *)as, p.b_scale = (const float *)bs;
	p.sm_count = sms;
	p.max_active_clusters = sms / 2;
	K::Arguments args = gemm_proto::op_t<Pb>::make_arguments(p);
	K::Params host = K::to_underlying_arguments(args, nullptr);
	quiet = 1; /* the candidates below are ours */
	std::printf("Params: %zu bytes; sm_count %d\n", sizeof(K::Params), sms);

	// 2. the descriptors
	const void *da = host.mainloop.tma_load_a.get_tma_descriptor();
	const void *db = host.mainloop.tma_load_b.get_tma_descriptor();
	const void *dd = host.epilogue.tma_store_d.get_tma_descriptor();
	which("A [M, K] e4m3", da, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, (void *)a, m, k, { 128, 64 },
	      { 128 }, CU_TENSOR_MAP_SWIZZLE_128B);
	which("B [N, K] e4m3", db, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, (void *)b, n, k, { 128, 64 },
	      { 128 }, CU_TENSOR_MAP_SWIZZLE_128B);
	which("D [M, N] bf16 (128B swizzle)", dd, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void *)d, m, n,
	      { 128, 64, 32 }, { 64, 32 }, CU_TENSOR_MAP_SWIZZLE_128B);
	which("D [M, N] bf16 (64B swizzle)", dd, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void *)d, m, n,
	      { 128, 64, 32 }, { 64, 32 }, CU_TENSOR_MAP_SWIZZLE_64B);

	// 1. Params on the device
	CUmodule mod;
	CUfunction f;
	CK(cuModuleLoad(&mod, argv[1]));
	CK(cuModuleGetFunction(&f, mod, argv[2]));
	cute::TmaDescriptor ta, tb, td;
	std::memcpy(&ta, da, sizeof(ta));
	std::memcpy(&tb, db, sizeof(tb));
	std::memcpy(&td, dd, sizeof(td));
	int mm = m, nn = n, kk = k;
	void *pa = (void *)a, *pb = (void *)b, *pbias = (void *)bias, *pd = (void *)d;
	const float *pas = (const float *)as, *pbs = (const float *)bs;
	void *params[] = { &out, &offs, &mm, &nn, &kk, &pa, &pb, &pas, &pbs, &pbias, &pd, &sms, &ta, &tb, &td };
	CK(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 64 << 10)); /* Params and its temporaries */
	CK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, 0, params, nullptr));
	CK(cuCtxSynchronize());
	long long ho[9], dof[9];
	jitk::params_offsets(host, ho);
	CK(cuMemcpyDtoH(dof, offs, sizeof(dof)));
	static const char *const part[9] = { "problem_shape", "mainloop", "epilogue", "hw_info",
					     "scheduler", "workspace", "desc A", "desc B", "desc D" };
	for (int i = 0; i < 9; i++)
		std::printf("offset of %-13s host %5lld, device (NVRTC) %5lld%s\n", part[i], ho[i], dof[i],
			    ho[i] == dof[i] ? "" : "  <- differs");
	std::vector<unsigned char> dev_bytes(sizeof(K::Params));
	CK(cuMemcpyDtoH(dev_bytes.data(), out, sizeof(K::Params)));
	const unsigned char *hb = reinterpret_cast<const unsigned char *>(&host);
	size_t diff = 0, first = (size_t)-1, last = 0;
	for (size_t i = 0; i < sizeof(K::Params); i++)
		if (hb[i] != dev_bytes[i]) {
			diff++;
			if (first == (size_t)-1)
				first = i;
			last = i;
		}
	// The two compilers lay Params out differently (offsets above), so the
	// parts are compared where each side has them; within a part, up to the
	// shorter of the two (padding at the ends of parts aside).
	{
		long long hend[6], dend[6];
		for (int i = 0; i < 6; i++) {
			hend[i] = i < 5 ? ho[i + 1] : (long long)sizeof(K::Params);
			dend[i] = i < 5 ? dof[i + 1] : (long long)sizeof(K::Params);
		}
		for (int i = 0; i < 6; i++) {
			long long n = hend[i] - ho[i] < dend[i] - dof[i] ? hend[i] - ho[i] : dend[i] - dof[i];
			long long bad = 0, first = -1;
			for (long long j = 0; j < n; j++)
				if (hb[ho[i] + j] != dev_bytes[dof[i] + j]) {
					bad++;
					if (first < 0)
						first = j;
				}
			std::printf("part %-13s %5lld bytes (host %lld, device %lld): %lld differ",
				    part[i], n, hend[i] - ho[i], dend[i] - dof[i], bad);
			if (bad)
				std::printf(", first at +%lld", first);
			std::printf("\n");
		}
	}
	std::printf("Params built on the device vs the host: %zu of %zu bytes differ", diff,
		    sizeof(K::Params));
	if (diff)
		std::printf(" (offsets %zu..%zu)", first, last);
	std::printf("\n");
	return 0;
}
