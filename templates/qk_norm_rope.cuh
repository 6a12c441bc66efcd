// qk_norm_rope.cuh - RMSNorm of the attention heads of q and k, then the
// rotary embedding (RoPE), on strided views of the packed QKV projection;
// and the split path's kernels: the norm alone, the rotation alone, and a
// strided copy (the out-of-place form's fallback copies, then normalizes
// and rotates in place).
//
// The arithmetic is the kernel contract's ("QK-RMSNorm + RoPE"), every
// rounding point:
//   var    = sum(v^2) * fl(1/len)         len = D, or heads * D (span heads)
//   factor = rsqrtf(var + eps)
//   n      = bf(v * factor);  with a weight  n = bf(f(n) * f(w))
//   rotary pair (a, b) = (f(n[i0]), f(n[i1])), c, s from the table row:
//   n[i0]  = bf(fma(a, c, -(b s)));  n[i1] = bf(fma(a, s, b c))
// pairs (i, i + R/2) for neox, (2i, 2i + 1) for interleaved; dims >= R
// keep n.
//
// The sum of squares has one order, whatever the tuning: each 16-byte
// chunk (8 values) in element order with one FMA per value, then the
// chunks of a head pairwise bottom-up (common.cuh: chunk_sums_of_squares,
// group_sum_up), then - for the across-heads span - the head sums in head
// order. So the fused kernel, the split norm kernel, 16- and 32-byte
// vectors and the in-place and out-of-place forms give the same bytes.
//
// Work split: one block per token. A head is G = D / VE lanes, each lane
// one vector of VE values; thread j takes the vectors j, j + T, j + 2T, ...
// of the token's q heads, then k heads (then v heads, copied, for the
// out-of-place form), ITEMS at a time: all their loads are issued before
// any arithmetic. T is a multiple of G, so a thread's column in a head -
// and with it its slice of the weights and of the token's cos/sin row -
// is the same for every vector it takes: loaded once per token.
#pragma once
#include "common.cuh"

namespace jitk {

enum class RopeStyle { neox, interleaved };
enum class RopePositions { none, i32, i64 };
enum class NormSpan { head, heads };

// One strided tensor of heads: [tokens, heads, D] read at `in` with token
// and head strides ts, hs; written at `out` with ots, ohs (in place: the
// same pointer and strides). Strides are in elements.
struct heads_view {
	const bf16 *in;
	bf16 *out;
	long long ts, hs, ots, ohs;
};

// What one kernel of the family does (the instance's P supplies the
// shape and tuning; the entry points below fix the rest).
template <int HEAD_DIM, int VEC_BYTES, int THREADS, int ITEMS, bool NORM, bool ROPE,
	  NormSpan SPAN, bool WEIGHT, RopeStyle STYLE, RopePositions POS>
struct qk_plan {
	static constexpr int D = HEAD_DIM;
	static constexpr int VB = VEC_BYTES;
	static constexpr int VE = VEC_BYTES / 2; // bf16 values per vector
	static constexpr int NW = VEC_BYTES / 4; // bf16 pairs per vector
	static constexpr int G = D / VE;          // lanes per head
	static constexpr int T = THREADS;
	static constexpr int K = ITEMS;
	static constexpr bool norm = NORM, rope = ROPE, weight = WEIGHT;
	static constexpr NormSpan span = SPAN;
	static constexpr RopeStyle style = STYLE;
	static constexpr RopePositions pos = POS;
	// a pass takes K/2 vectors of q and K/2 of k per thread (K of one
	// tensor when there is no k); the across-heads span reduces one pass
	static constexpr int KH = K / 2;
	static constexpr int MAX_HEADS = T * KH / G; // per tensor
	static_assert(K % 2 == 0, "items must be even: half q, half k");
	static_assert(D % VE == 0 && G >= 1 && G <= 32 && (G & (G - 1)) == 0,
		      "a head must be a power of two of at most 32 vectors");
	static_assert(T % 32 == 0 && T <= 1024, "threads must be whole warps, at most 1024");
	static_assert(VEC_BYTES == 16 || VEC_BYTES == 32, "vectors are 16 or 32 bytes");
};

// One token: its q heads and k heads, then (out of place, COPY_V) its v
// heads copied unchanged. Thread j takes vector j, j + T, j + 2T, ... of
// the token's q heads (T a multiple of G, so that its column - with it
// its weights and its cos/sin - is the same for all of them), and the
// same of k: a pass takes KH = ITEMS/2 of each, every load of a pass
// issued before any arithmetic. (Without k heads - the copy - a pass takes
// ITEMS vectors of q.) The caller has checked (launch checks) that rotary
// is a multiple of 32 and at most D, that the strides are multiples of VE,
// that table_rows >= 1, and for the across-heads span that one pass holds
// all of q and all of k (q_heads, k_heads <= MAX_HEADS).
template <class C, bool COPY_V, bool HAS_K = true>
__device__ __forceinline__ void qk_token(const heads_view &Q, const heads_view &K,
					 const heads_view &V, int hq, int hk,
					 const bf16 *__restrict__ q_weight,
					 const bf16 *__restrict__ k_weight,
					 const float *__restrict__ cos_sin,
					 const int *__restrict__ positions,
					 const long long *__restrict__ positions_i64,
					 long long token, int rotary, long long table_rows, float eps)
{
	constexpr int VE = C::VE, NW = C::NW, G = C::G, T = C::T, KI = C::K;
	constexpr int KQ = HAS_K ? C::KH : KI; // items of q in a pass; the rest are k's
	constexpr bool HEADS = C::span == NormSpan::heads;
	using V_t = vec<C::VB>;

	const unsigned j = threadIdx.x;
	const unsigned lane = j % G; // the thread's vector within a head
	const int col = (int)lane * VE; // its first column
	const int head0 = (int)(j / G); // its first head
	constexpr int HSTEP = T / G;     // heads between its vectors
	const unsigned nq = (unsigned)hq * G, nk = (unsigned)hk * G; // vectors
	const int kq = (int)((nq + T - 1) / T), kk = (int)((nk + T - 1) / T); // per thread
	const int passes = HAS_K ? max((kq + KQ - 1) / KQ, (kk + (KI - KQ) - 1) / (KI - KQ))
				 : (kq + KQ - 1) / KQ;

	// The rotary half of this thread's columns and the table row.
	const bool rotated = C::rope && col < rotary;
	const int half = rotary / 2;
	long long row = token;
	if constexpr (C::rope && C::pos == RopePositions::i32)
		row = positions[token];
	if constexpr (C::rope && C::pos == RopePositions::i64)
		row = positions_i64[token];
	// out of range positions read the nearest row (documented)
	row = row < 0 ? 0 : row >= table_rows ? table_rows - 1 : row;

	// neox: value i pairs with i + R/2, held d lanes away at the same
	// place in its vector; interleaved: the pair is one 32-bit word.
	constexpr int CS = C::style == RopeStyle::neox ? VE : NW; // table values per vector
	float cs[C::rope ? CS : 1], sn[C::rope ? CS : 1];
	bool second = false; // neox: this lane holds the i + R/2 halves
	int partner = 0;     // neox: the warp lane holding the other halves
	if constexpr (C::rope) {
		const int d = half / VE; // lanes between the halves (neox)
		int first_index;         // table column of cs[0]
		if constexpr (C::style == RopeStyle::neox) {
			second = (int)lane >= d;
			first_index = second ? col - half : col;
			const int warp_lane = (int)(j % 32);
			partner = rotated ? warp_lane + (second ? -d : d) : warp_lane;
		} else {
			first_index = col / 2;
		}
		if (rotated) {
			const float *c0 = cos_sin + row * rotary + first_index;
#pragma unroll
			for (int i = 0; i < CS; i += 4) {
				vec<16> a, b;
				load(a, c0 + i);
				load(b, c0 + half + i);
#pragma unroll
				for (int w = 0; w < 4; w++) {
					cs[i + w] = __uint_as_float(a.w[w]);
					sn[i + w] = __uint_as_float(b.w[w]);
				}
			}
		} else {
#pragma unroll
			for (int i = 0; i < CS; i++)
				cs[i] = sn[i] = 0.0f;
		}
	}

	// Per-head weights (span head): this thread's slice, once.
	V_t wq, wk;
	if constexpr (C::norm && C::weight && !HEADS) {
		load(wq, q_weight + col);
		load(wk, k_weight + col);
	}

	__shared__ float head_sums[HEADS ? 2 * C::MAX_HEADS : 1];
	const float inv_d = 1.0f / (float)C::D;
	float inv_q = inv_d, inv_k = inv_d;
	if constexpr (HEADS) {
		// fl(1 / len): len is exact in fp32, the division correctly rounded
		inv_q = __fdiv_rn(1.0f, (float)(hq * C::D));
		inv_k = __fdiv_rn(1.0f, (float)(hk * C::D));
	}

	// this thread's first vector of the token's q and k, and the distance
	// to its next one
	const long long qstep = HSTEP * Q.hs, kstep = HSTEP * K.hs;
	const long long qostep = HSTEP * Q.ohs, kostep = HSTEP * K.ohs;
	const bf16 *q_in = Q.in + token * Q.ts + head0 * Q.hs + col;
	const bf16 *k_in = K.in + token * K.ts + head0 * K.hs + col;
	bf16 *q_out = Q.out + token * Q.ots + head0 * Q.ohs + col;
	bf16 *k_out = K.out + token * K.ots + head0 * K.ohs + col;

	for (int pass = 0; pass < passes; pass++) {
		V_t x[KI], w[KI];
		bool valid[KI]; // a vector of the token (whole heads: uniform per group)
#pragma unroll
		for (int i = 0; i < KI; i++) {
			const bool isq = i < KQ;
			const int nth = pass * (isq ? KQ : KI - KQ) + (isq ? i : i - KQ);
			valid[i] = (unsigned)nth * T + j < (isq ? nq : nk);
			// An idle item loads nothing and its values are never used:
			// its whole head is idle (the sums stay within it) and is
			// not stored.
			if (!valid[i])
				continue;
			load(x[i], isq ? q_in + nth * qstep : k_in + nth * kstep);
			if constexpr (C::norm && C::weight && HEADS)
				load(w[i], (isq ? q_weight : k_weight) + (head0 + nth * HSTEP) * C::D + col);
		}

		// RMS factors: per token and tensor for the across-heads span
		// (all sums first), else per head (each item's as it goes).
		float factor[KI];
		if constexpr (C::norm && HEADS) {
			float hs[KI];
#pragma unroll
			for (int i = 0; i < KI; i++)
				hs[i] = group_sum_up<G>(chunk_sums_of_squares(x[i]));
			{
				// one pass holds every q and k vector (launch check)
#pragma unroll
				for (int i = 0; i < KI; i++) {
					const bool isq = i < KQ;
					const int head = head0 + (isq ? i : i - KQ) * HSTEP;
					if (lane == 0 && valid[i] && head < C::MAX_HEADS)
						head_sums[head + (isq ? 0 : C::MAX_HEADS)] = hs[i];
				}
				__syncthreads();
				float sq = 0.0f, sk = 0.0f;
				for (int h = 0; h < min(hq, C::MAX_HEADS); h++)
					sq = __fadd_rn(sq, head_sums[h]);
				for (int h = 0; h < min(hk, C::MAX_HEADS); h++)
					sk = __fadd_rn(sk, head_sums[C::MAX_HEADS + h]);
				const float fq = rsqrtf(__fadd_rn(__fmul_rn(sq, inv_q), eps));
				const float fk = rsqrtf(__fadd_rn(__fmul_rn(sk, inv_k), eps));
#pragma unroll
				for (int i = 0; i < KI; i++)
					factor[i] = i < KQ ? fq : fk;
			}
		}

#pragma unroll
		for (int i = 0; i < KI; i++) {
			const bool isq = i < KQ;
			const int nth = pass * (isq ? KQ : KI - KQ) + (isq ? i : i - KQ);
			bf16 *dst = isq ? q_out + nth * qostep : k_out + nth * kostep;
			if constexpr (!C::norm && !C::rope) {
				if (valid[i])
					store_vector(dst, x[i]);
				continue;
			}
			V_t n = x[i];
			if constexpr (C::norm && !HEADS) {
				// every lane of the warp shuffles
				const float hs = group_sum_up<G>(chunk_sums_of_squares(x[i]));
				factor[i] = rsqrtf(__fadd_rn(__fmul_rn(hs, inv_d), eps));
			}
			if constexpr (C::norm) {
				// n = bf(v * factor), then bf(n * w) in one bf16x2 multiply
				const V_t &wv = HEADS ? w[i] : (isq ? wq : wk);
#pragma unroll
				for (int e = 0; e < NW; e++) {
					unsigned r = pack_bf16x2(__fmul_rn(bf16_lo(x[i].w[e]), factor[i]),
								 __fmul_rn(bf16_hi(x[i].w[e]), factor[i]));
					if constexpr (C::weight)
						r = mul_bf16x2(r, wv.w[e]);
					n.w[e] = r;
				}
			}
			if constexpr (C::rope) {
				if constexpr (C::style == RopeStyle::neox) {
					// the other halves, from the partner lane (every lane
					// of the warp takes part)
					V_t p;
#pragma unroll
					for (int e = 0; e < NW; e++)
						p.w[e] = __shfl_sync(0xffffffffu, n.w[e], partner);
					if (rotated) {
#pragma unroll
						for (int e = 0; e < NW; e++) {
							// pair (i0, i1): own and other values
							const float m0 = bf16_lo(n.w[e]), m1 = bf16_hi(n.w[e]);
							const float t0 = bf16_lo(p.w[e]), t1 = bf16_hi(p.w[e]);
							const float c0 = cs[2 * e], c1 = cs[2 * e + 1];
							const float s0 = sn[2 * e], s1 = sn[2 * e + 1];
							n.w[e] = second // own = i1, other = i0
								? pack_bf16x2(rope_second(t0, m0, c0, s0), rope_second(t1, m1, c1, s1))
								: pack_bf16x2(rope_first(m0, t0, c0, s0), rope_first(m1, t1, c1, s1));
						}
					}
				} else if (rotated) {
#pragma unroll
					for (int e = 0; e < NW; e++) {
						const float a = bf16_lo(n.w[e]), b = bf16_hi(n.w[e]);
						n.w[e] = pack_bf16x2(rope_first(a, b, cs[e], sn[e]),
								     rope_second(a, b, cs[e], sn[e]));
					}
				}
			}
			if (valid[i])
				store_vector(dst, n);
		}
	}

	if constexpr (COPY_V) {
		// v: copied, ITEMS vectors at a time
		const long long vstep = HSTEP * V.hs, vostep = HSTEP * V.ohs;
		const bf16 *v_in = V.in + token * V.ts + head0 * V.hs + col;
		bf16 *v_out = V.out + token * V.ots + head0 * V.ohs + col;
		for (int first = 0; first < kk; first += KI) {
			V_t x[KI];
#pragma unroll
			for (int i = 0; i < KI; i++)
				if ((unsigned)(first + i) * T + j < nk)
					load(x[i], v_in + (first + i) * vstep);
#pragma unroll
			for (int i = 0; i < KI; i++)
				if ((unsigned)(first + i) * T + j < nk)
					store_vector(v_out + (first + i) * vostep, x[i]);
		}
	}
	// a block that takes another token next writes head_sums again
	if constexpr (C::norm && HEADS)
		__syncthreads();
}

// ------------------------------------------------------- entry points

// The plan of instance P's kernel: shape and tuning from P, the rest fixed
// by the entry point.
template <class P, bool NORM, bool ROPE, NormSpan SPAN, bool WEIGHT, RopeStyle STYLE,
	  RopePositions POS>
using plan_of = qk_plan<P::head_dim, P::vec_bytes, P::threads, P::items, NORM, ROPE, SPAN,
			WEIGHT, STYLE, POS>;

// A tensor of heads updated in place.
__device__ __forceinline__ heads_view in_place(bf16 *p, long long ts, long long hs)
{
	return { p, p, ts, hs, ts, hs };
}

// The fused kernel, in place: qk_norm_rope family (specs/qk_norm_rope.yaml).
template <class P>
__global__ void __launch_bounds__(P::threads, P::min_blocks)
qk_norm_rope(bf16 *q, bf16 *k, const bf16 *__restrict__ q_weight,
	     const bf16 *__restrict__ k_weight, const float *__restrict__ cos_sin,
	     const int *__restrict__ positions, const long long *__restrict__ positions_i64,
	     long long tokens, int q_heads, int k_heads, int rotary, long long table_rows,
	     long long q_stride, long long q_head_stride, long long k_stride,
	     long long k_head_stride, float eps)
{
	using C = plan_of<P, true, true, P::span, P::weight, P::style, P::positions>;
	wait_for_prior_kernels(); // before any global memory access
	const heads_view Q = in_place(q, q_stride, q_head_stride);
	const heads_view K = in_place(k, k_stride, k_head_stride);
	// the spec's grid may be smaller than tokens (a tuning cap): then
	// each block takes every gridDim.x-th token
	for (long long t = blockIdx.x; t < tokens; t += gridDim.x)
		qk_token<C, false>(Q, K, K, q_heads, k_heads, q_weight, k_weight, cos_sin, positions,
			    positions_i64, t, rotary, table_rows, eps);
}

// The fused kernel, out of place: reads q, k, v; writes q_out, k_out and
// a copy of v (qk_norm_rope_out family).
template <class P>
__global__ void __launch_bounds__(P::threads, P::min_blocks)
qk_norm_rope_out(bf16 *q_out, bf16 *k_out, bf16 *v_out, const bf16 *q, const bf16 *k,
		 const bf16 *v, const bf16 *__restrict__ q_weight,
		 const bf16 *__restrict__ k_weight, const float *__restrict__ cos_sin,
		 const int *__restrict__ positions, const long long *__restrict__ positions_i64,
		 long long tokens, int q_heads, int k_heads, int rotary, long long table_rows,
		 long long q_stride, long long q_head_stride, long long k_stride,
		 long long k_head_stride, long long v_stride, long long v_head_stride,
		 long long q_out_stride, long long q_out_head_stride, long long k_out_stride,
		 long long k_out_head_stride, long long v_out_stride, long long v_out_head_stride,
		 float eps)
{
	using C = plan_of<P, true, true, P::span, P::weight, P::style, P::positions>;
	wait_for_prior_kernels();
	const heads_view Q = { q, q_out, q_stride, q_head_stride, q_out_stride, q_out_head_stride };
	const heads_view K = { k, k_out, k_stride, k_head_stride, k_out_stride, k_out_head_stride };
	const heads_view V = { v, v_out, v_stride, v_head_stride, v_out_stride, v_out_head_stride };
	// the spec's grid may be smaller than tokens (a tuning cap): then
	// each block takes every gridDim.x-th token
	for (long long t = blockIdx.x; t < tokens; t += gridDim.x)
		qk_token<C, true>(Q, K, V, q_heads, k_heads, q_weight, k_weight, cos_sin, positions,
			    positions_i64, t, rotary, table_rows, eps);
}

// The split path, step 1: steps 1-3 of the contract (the norm), in place.
template <class P>
__global__ void __launch_bounds__(P::threads, P::min_blocks)
rms_norm_heads(bf16 *q, bf16 *k, const bf16 *__restrict__ q_weight,
	       const bf16 *__restrict__ k_weight, long long tokens, int q_heads, int k_heads,
	       long long q_stride, long long q_head_stride, long long k_stride,
	       long long k_head_stride, float eps)
{
	using C = plan_of<P, true, false, P::span, P::weight, RopeStyle::neox, RopePositions::none>;
	wait_for_prior_kernels();
	// the spec's grid may be smaller than tokens (a tuning cap): then
	// each block takes every gridDim.x-th token
	for (long long t = blockIdx.x; t < tokens; t += gridDim.x)
		qk_token<C, false>(in_place(q, q_stride, q_head_stride), in_place(k, k_stride, k_head_stride),
				   in_place(k, k_stride, k_head_stride), q_heads, k_heads, q_weight, k_weight, nullptr, nullptr, nullptr,
			    t, 0, 1, eps);
}

// The split path, step 2: step 4 (the rotation) on the stored bf16
// values, in place.
template <class P>
__global__ void __launch_bounds__(P::threads, P::min_blocks)
rope(bf16 *q, bf16 *k, const float *__restrict__ cos_sin, const int *__restrict__ positions,
     const long long *__restrict__ positions_i64, long long tokens, int q_heads, int k_heads,
     int rotary, long long table_rows, long long q_stride, long long q_head_stride,
     long long k_stride, long long k_head_stride)
{
	using C = plan_of<P, false, true, NormSpan::head, false, P::style, P::positions>;
	wait_for_prior_kernels();
	// the spec's grid may be smaller than tokens (a tuning cap): then
	// each block takes every gridDim.x-th token
	for (long long t = blockIdx.x; t < tokens; t += gridDim.x)
		qk_token<C, false>(in_place(q, q_stride, q_head_stride), in_place(k, k_stride, k_head_stride),
				   in_place(k, k_stride, k_head_stride), q_heads, k_heads, nullptr, nullptr, cos_sin, positions,
			    positions_i64, t, rotary, table_rows, 0.0f);
}

// A strided copy of [tokens, heads, D] (the out-of-place fallback's first
// steps).
template <class P>
__global__ void __launch_bounds__(P::threads, P::min_blocks)
copy_heads(bf16 *dst, const bf16 *src, long long tokens, int heads, long long dst_stride,
	   long long dst_head_stride, long long src_stride, long long src_head_stride)
{
	using C = plan_of<P, false, false, NormSpan::head, false, RopeStyle::neox,
			  RopePositions::none>;
	wait_for_prior_kernels();
	const heads_view X = { src, dst, src_stride, src_head_stride, dst_stride, dst_head_stride };
	// the spec's grid may be smaller than tokens (a tuning cap): then
	// each block takes every gridDim.x-th token
	for (long long t = blockIdx.x; t < tokens; t += gridDim.x)
		qk_token<C, false, false>(X, X, X, heads, 0, nullptr, nullptr, nullptr, nullptr, nullptr, t,
			    0, 1, 0.0f);
}

} // namespace jitk
