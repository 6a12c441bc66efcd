// common.cuh - helpers shared by jitk's kernel templates.
//
// No CUDA headers are included: the few conversions the kernels need are
// written as PTX, which keeps each NVRTC compile small and fast and pins
// every rounding to the instruction the kernel contract names.
#pragma once

namespace jitk {

typedef unsigned short bf16;    // storage of a bfloat16
typedef unsigned char fp8_e4m3; // storage of an OCP e4m3fn byte

// Widen bf16 to fp32 (exact).
__device__ __forceinline__ float bf16_lo(unsigned pair)
{
	return __uint_as_float(pair << 16);
}
__device__ __forceinline__ float bf16_hi(unsigned pair)
{
	return __uint_as_float(pair & 0xffff0000u);
}

// Round two fp32 to bf16 (nearest-even) and pack them: lo in bits 0..15.
__device__ __forceinline__ unsigned pack_bf16x2(float lo, float hi)
{
	unsigned r;
	asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
	return r;
}

// bf(v): fp32 -> bf16 -> fp32, the rounding points of the contract.
__device__ __forceinline__ float round_bf16(float v)
{
	return bf16_lo(pack_bf16x2(v, 0.0f));
}

// 1 / s the way PTX div.full.f32 computes it (what Triton's static FP8
// quantizer uses), not the correctly rounded quotient: one ULP matters
// near an e4m3 rounding midpoint.
__device__ __forceinline__ float reciprocal_div_full(float s)
{
	float r;
	asm("div.full.f32 %0, %1, %2;" : "=f"(r) : "f"(1.0f), "f"(s));
	return r;
}

// q = e4m3_rn_satfinite(clamp(v * rcp, -448, 448)) for two values; lo in
// bits 0..7. The upper bound is applied first and fminf/fmaxf return the
// non-NaN operand, so a NaN product becomes +448 (0x7e): the byte Triton's
// reference quantizer writes for NaN (checked on an H200).
__device__ __forceinline__ unsigned quantize_e4m3x2(float lo, float hi,
						    float rcp)
{
	float a = fmaxf(fminf(__fmul_rn(lo, rcp), 448.0f), -448.0f);
	float b = fmaxf(fminf(__fmul_rn(hi, rcp), 448.0f), -448.0f);
	unsigned short r;
	asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(b), "f"(a));
	return r;
}

// A vector of BYTES bytes as 32-bit words, with global loads and stores
// of exactly that width (16 bytes everywhere, 32 bytes on sm_100+).
template <int BYTES> struct vec {
	static_assert(BYTES == 4 || BYTES == 8 || BYTES == 16 || BYTES == 32,
		      "vector width must be 4, 8, 16 or 32 bytes");
	static constexpr int WORDS = BYTES / 4;
	unsigned w[WORDS];
};

template <int BYTES>
__device__ __forceinline__ void load(vec<BYTES> &v, const void *p)
{
	if constexpr (BYTES == 32) {
#if __CUDA_ARCH__ >= 1000
		asm volatile("ld.global.v8.u32 {%0,%1,%2,%3,%4,%5,%6,%7}, [%8];"
			     : "=r"(v.w[0]), "=r"(v.w[1]), "=r"(v.w[2]), "=r"(v.w[3]),
			       "=r"(v.w[4]), "=r"(v.w[5]), "=r"(v.w[6]), "=r"(v.w[7])
			     : "l"(p));
#else
		const uint4 *q = static_cast<const uint4 *>(p);
		uint4 a = q[0], b = q[1];
		v.w[0] = a.x; v.w[1] = a.y; v.w[2] = a.z; v.w[3] = a.w;
		v.w[4] = b.x; v.w[5] = b.y; v.w[6] = b.z; v.w[7] = b.w;
#endif
	} else if constexpr (BYTES == 16) {
		uint4 a = *static_cast<const uint4 *>(p);
		v.w[0] = a.x; v.w[1] = a.y; v.w[2] = a.z; v.w[3] = a.w;
	} else if constexpr (BYTES == 8) {
		uint2 a = *static_cast<const uint2 *>(p);
		v.w[0] = a.x; v.w[1] = a.y;
	} else {
		v.w[0] = *static_cast<const unsigned *>(p);
	}
}

template <int BYTES>
__device__ __forceinline__ void store(void *p, const vec<BYTES> &v)
{
	if constexpr (BYTES == 32) {
#if __CUDA_ARCH__ >= 1000
		asm volatile("st.global.v8.u32 [%0], {%1,%2,%3,%4,%5,%6,%7,%8};"
			     :: "l"(p), "r"(v.w[0]), "r"(v.w[1]), "r"(v.w[2]), "r"(v.w[3]),
			        "r"(v.w[4]), "r"(v.w[5]), "r"(v.w[6]), "r"(v.w[7])
			     : "memory");
#else
		uint4 *q = static_cast<uint4 *>(p);
		q[0] = make_uint4(v.w[0], v.w[1], v.w[2], v.w[3]);
		q[1] = make_uint4(v.w[4], v.w[5], v.w[6], v.w[7]);
#endif
	} else if constexpr (BYTES == 16) {
		*static_cast<uint4 *>(p) = make_uint4(v.w[0], v.w[1], v.w[2], v.w[3]);
	} else if constexpr (BYTES == 8) {
		*static_cast<uint2 *>(p) = make_uint2(v.w[0], v.w[1]);
	} else {
		*static_cast<unsigned *>(p) = v.w[0];
	}
}

// A vector of bf16 quantized with quantize_e4m3x2: half as many bytes.
template <int BYTES>
__device__ __forceinline__ void quantize_e4m3_vec(vec<BYTES / 2> &out, const vec<BYTES> &v,
						  float rcp)
{
#pragma unroll
	for (int w = 0; w < BYTES / 4; w++) {
		unsigned pair = quantize_e4m3x2(bf16_lo(v.w[w]), bf16_hi(v.w[w]), rcp);
		if (w % 2 == 0)
			out.w[w / 2] = pair;
		else
			out.w[w / 2] |= pair << 16;
	}
}

// Programmatic dependent launch (sm_90+). A kernel calls this before it
// touches global memory: it waits until the kernels before it on the
// stream have completed and their writes are visible (at once when it was
// launched the ordinary way), then lets the next kernel start launching;
// that one waits here in turn. Specs declare it with
// `launch: { programmatic: true }`.
__device__ __forceinline__ void wait_for_prior_kernels()
{
#if __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.wait;" ::: "memory");
	asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Sum over the 32 lanes of a warp, butterfly order (the same on every
// lane, and deterministic).
__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
	for (int m = 16; m > 0; m >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, m);
	return v;
}

__device__ __forceinline__ unsigned umax(unsigned a, unsigned b)
{
	return a > b ? a : b;
}

// Maximum over the 32 lanes of a warp (exact in any order).
__device__ __forceinline__ unsigned warp_max(unsigned v)
{
#pragma unroll
	for (int m = 16; m > 0; m >>= 1)
		v = umax(v, __shfl_xor_sync(0xffffffffu, v, m));
	return v;
}

// 1 / s correctly rounded (IEEE div.rn), for the per-token scales: the
// contract's dynamic quantizer divides the IEEE way (unlike the static
// one's div.full).
__device__ __forceinline__ float reciprocal_rn(float s)
{
	return __fdiv_rn(1.0f, s);
}

// The per-token fp8 scale of a row whose largest |bf16| has the bits
// AMAX_BITS (0..0x7fff): max(amax / 448, 1 / (448 * 512)), IEEE division;
// a NaN amax (a NaN in the row) stays NaN.
__device__ __forceinline__ float token_scale(unsigned amax_bits)
{
	const float amax = __uint_as_float(amax_bits << 16);
	return amax != amax ? amax : fmaxf(__fdiv_rn(amax, 448.0f), 1.0f / 229376.0f);
}

// The largest |bf16| of the pair of bf16 values in WORD, as bits.
__device__ __forceinline__ unsigned abs_max_bf16x2(unsigned word)
{
	return umax(word & 0x7fffu, (word >> 16) & 0x7fffu);
}

// Bulk asynchronous copies (sm_90+): one instruction moves a whole row
// from global to shared memory and signals an mbarrier when its bytes
// have landed, so the bytes in flight live in shared memory, not in
// registers. Addresses are shared-window offsets (32-bit).
#if __CUDA_ARCH__ >= 900
__device__ __forceinline__ unsigned shared_offset(const void *p)
{
	unsigned r;
	asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }"
	    : "=r"(r) : "l"(p));
	return r;
}

__device__ __forceinline__ void mbarrier_init(unsigned bar, unsigned count)
{
	asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count)
		     : "memory");
}

// Make the barriers' initialisation visible to the async proxy.
__device__ __forceinline__ void mbarrier_init_fence()
{
	asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// Arrive once and announce BYTES more bytes to come for this phase.
__device__ __forceinline__ void mbarrier_expect_bytes(unsigned bar, unsigned bytes)
{
	asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar),
		     "r"(bytes)
		     : "memory");
}

// Wait until the phase with parity PARITY has completed.
__device__ __forceinline__ void mbarrier_wait(unsigned bar, unsigned parity)
{
	unsigned done;
	do {
		asm volatile("{ .reg .pred p;\n"
			     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
			     "selp.u32 %0, 1, 0, p; }"
			     : "=r"(done)
			     : "r"(bar), "r"(parity)
			     : "memory");
	} while (!done);
}

// Copy BYTES (a multiple of 16; both addresses 16-byte aligned) from
// global memory to shared memory, completing on barrier BAR.
__device__ __forceinline__ void bulk_load(unsigned dst, const void *src, unsigned bytes,
					  unsigned bar)
{
	asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
		     " [%0], [%1], %2, [%3];" ::"r"(dst),
		     "l"(src), "r"(bytes), "r"(bar)
		     : "memory");
}
#endif

// A store of BYTES (16 or 32) to global memory in one instruction,
// whatever the optimizer makes of a copied vec (it may split a plain
// struct copy into 4-byte stores).
template <int BYTES>
__device__ __forceinline__ void store_vector(void *p, const vec<BYTES> &v)
{
	static_assert(BYTES == 16 || BYTES == 32, "vector stores are 16 or 32 bytes");
	if constexpr (BYTES == 16)
		asm volatile("st.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.w[0]),
			     "r"(v.w[1]), "r"(v.w[2]), "r"(v.w[3])
			     : "memory");
	else
		store(p, v);
}

// bf(f(a) * f(b)) for two bf16 pairs in one instruction (sm_80+): the
// product of two bf16 values is exact, so the fused multiply-add with a
// -0 addend rounds it once, like the fp32 product rounded to bf16.
__device__ __forceinline__ unsigned mul_bf16x2(unsigned a, unsigned b)
{
	unsigned r;
	asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(0x80008000u));
	return r;
}

// Sum over each aligned group of G lanes (G a power of two up to 32),
// pairing lanes bottom-up: distance 1, then 2, 4, ... A lane holding
// several 16-byte chunks of the group's data sums them in the same
// pairwise order first (chunk_sums below), so the result does not depend
// on how many chunks a lane holds: 16-byte and 32-byte vectors give the
// same bits. Every lane of the warp must call it; each gets its group's
// sum (a + b == b + a in IEEE arithmetic, so both partners agree).
template <int G>
__device__ __forceinline__ float group_sum_up(float v)
{
	static_assert(G >= 1 && G <= 32 && (G & (G - 1)) == 0,
		      "a lane group is a power of two of at most 32 lanes");
#pragma unroll
	for (int m = 1; m < G; m <<= 1)
		v += __shfl_xor_sync(0xffffffffu, v, m);
	return v;
}

// The sum of squares of a vector of bf16 pairs, in the canonical order of
// group_sum_up: each 16-byte chunk (8 values) summed in element order with
// one fused multiply-add per element, then the chunk sums pairwise,
// bottom-up.
template <int BYTES>
__device__ __forceinline__ float chunk_sums_of_squares(const vec<BYTES> &v)
{
	constexpr int CHUNKS = BYTES / 16 > 0 ? BYTES / 16 : 1;
	constexpr int WORDS = vec<BYTES>::WORDS / CHUNKS;
	float s[CHUNKS];
#pragma unroll
	for (int c = 0; c < CHUNKS; c++) {
		s[c] = 0.0f;
#pragma unroll
		for (int w = 0; w < WORDS; w++) {
			const float a = bf16_lo(v.w[c * WORDS + w]), b = bf16_hi(v.w[c * WORDS + w]);
			s[c] = __fmaf_rn(a, a, s[c]);
			s[c] = __fmaf_rn(b, b, s[c]);
		}
	}
#pragma unroll
	for (int m = 1; m < CHUNKS; m <<= 1)
#pragma unroll
		for (int c = 0; c < CHUNKS; c += 2 * m)
			s[c] = __fadd_rn(s[c], s[c + m]);
	return s[0];
}

// One rotary pair (a, b) turned by the angle whose cosine and sine are c
// and s, each output one fused multiply-add after one product (rounded to
// bf16 by the caller): a' = fma(a, c, -(b s)), b' = fma(a, s, b c).
__device__ __forceinline__ float rope_first(float a, float b, float c, float s)
{
	return __fmaf_rn(a, c, -__fmul_rn(b, s));
}
__device__ __forceinline__ float rope_second(float a, float b, float c, float s)
{
	return __fmaf_rn(a, s, __fmul_rn(b, c));
}

} // namespace jitk
