// common_host.h - host versions of the helpers of templates/common.cuh
// that are written in PTX, for tests/qk_emulate.sh: each rounds exactly
// as the instruction it stands for (cvt.rn.bf16x2.f32; fma.rn.bf16x2 with
// a -0 addend is one rounding of an exact product). The rest of
// common.cuh - the reduction and rotary helpers, in plain CUDA C++ - is
// taken from the real file by the script.
#pragma once
#include "shim.h"

namespace jitk {
typedef unsigned short bf16;
typedef unsigned char fp8_e4m3;
__device__ __forceinline__ float bf16_lo(unsigned pair) { return __uint_as_float(pair << 16); }
__device__ __forceinline__ float bf16_hi(unsigned pair) { return __uint_as_float(pair & 0xffff0000u); }
static inline unsigned short bf16_rne(float f)
{
	unsigned u = __float_as_uint(f);
	if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fff; /* cvt.rn: canonical NaN */
	u += 0x7fffu + ((u >> 16) & 1u);
	return (unsigned short)(u >> 16);
}
__device__ __forceinline__ unsigned pack_bf16x2(float lo, float hi) { return bf16_rne(lo) | ((unsigned)bf16_rne(hi) << 16); }
template <int BYTES> struct vec { static constexpr int WORDS = BYTES / 4; unsigned w[WORDS]; };
// Every vector access is checked: inside a buffer the test made, aligned
// to its width (emu_access aborts otherwise).
template <int BYTES> __device__ __forceinline__ void load(vec<BYTES> &v, const void *p) { emu_access(p, BYTES); memcpy(v.w, p, BYTES); }
template <int BYTES> __device__ __forceinline__ void store(void *p, const vec<BYTES> &v) { emu_access(p, BYTES); memcpy(p, v.w, BYTES); }
__device__ __forceinline__ void wait_for_prior_kernels() {}
__device__ __forceinline__ unsigned mul_bf16x2(unsigned a, unsigned b) { return pack_bf16x2(__fmul_rn(bf16_lo(a), bf16_lo(b)), __fmul_rn(bf16_hi(a), bf16_hi(b))); }
template <int BYTES> __device__ __forceinline__ void store_vector(void *p, const vec<BYTES> &v) { store(p, v); }
} // namespace jitk
