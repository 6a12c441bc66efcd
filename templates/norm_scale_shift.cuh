// norm_scale_shift.cuh - LayerNorm/RMSNorm + scale/shift modulation, with
// an optional gated residual before the norm and an optional FP8 (e4m3)
// quantization of the result, in one pass over each row.
//
// The arithmetic follows the kernel contract (docs/kernels.md), every
// rounding point:
//   r    = bf(residual + gate * x)            one FMA (residual variants)
//   mean = sum(v) * fl(1/H)                   v = f(x), or f(r)
//   var  = sum((v - mean)^2) * fl(1/H)        two-pass; RMS: sum(v^2)
//   n    = f(bf((v - mean) * rsqrtf(var + eps)))
//          affine: LayerNorm f(bf(fma((v - mean) * factor, w, b)))
//                  RMSNorm   f(bf(f(bf(v * factor)) * w))
//   y    = bf(fma(n, 1 + scale, shift))
//   q    = e4m3(clamp(f(y) * (1 div.full input_scale), -448, 448))   static
//   s    = max(amax(|f(y)|) div.rn 448, 1 / 229376)                   per token
//   q    = e4m3(clamp(f(y) * (1 div.rn s), -448, 448))
// The quantizing and non-quantizing instantiations share every step up to
// y, so for the same H and tuning the fused y and q equal the split path's
// (this kernel without QUANT, then static_quant_fp8 or per_token_quant_fp8)
// byte for byte. The row maximum is an integer maximum of bf16 magnitudes:
// exact, in any order.
//
// Axes beyond the reference (the contract's "Norm family axes"):
//   modulation  where scale, shift (and gate) come from: one [H] vector
//               (shared), one per batch of L rows ([B, H], per_batch), one
//               per row ([rows, H], per_token), or one of two sets per
//               batch chosen per row by index [B, L] (indexed; the gated
//               residual also writes the chosen gate to gate_out);
//   affine      a bf16 weight (and bias, LayerNorm) on the normalized value;
//   outputs     y_q writes y (and q), q writes q only.
//
// Work split: a group of WARPS warps owns a row, a block holds ROWS groups,
// and blocks stride over the rows (a persistent grid when the launch caps
// the grid). Each thread keeps its part of the row in registers as packed
// bf16, VPT vectors of VEC_BYTES, so the row is read from memory once.
// MIN_BLOCKS (blocks per SM the compiler must fit) trades registers for
// occupancy: more rows in flight per SM. PREFETCH loads a block's next row
// before reducing the current one, so that its loads are in flight while
// the current row is reduced and written (useful with a capped, persistent
// grid, where each block walks several rows).
//
// STAGES > 0 (sm_90+) replaces the register loads of x and residual with
// bulk asynchronous copies: a block owns one row at a time and a ring of
// STAGES row buffers in shared memory; one thread keeps the next STAGES
// rows' copies in flight, each completing on its own mbarrier, so the bytes
// in flight cost no registers and the grid stays persistent without waves.

#pragma once
#include "common.cuh"

namespace jitk {

enum class Norm { layer, rms };
enum class Quant { none, fp8_e4m3, fp8_e4m3_per_token };
enum class Modulation { shared, per_batch, per_token, indexed };
enum class Affine { none, weight, weight_bias };
enum class Outputs { y_q, q };

// P holds the instance's parameters, tuning and derived values by name
// (the struct jitk generates from the spec).
template <class P>
__global__ void __launch_bounds__(32 * P::warps_per_row * P::rows_per_block, P::min_blocks)
norm_scale_shift(bf16 *__restrict__ y, fp8_e4m3 *__restrict__ q,
		 bf16 *__restrict__ residual_out, const bf16 *__restrict__ x,
		 const bf16 *__restrict__ residual,
		 const bf16 *__restrict__ gate, const bf16 *__restrict__ scale,
		 const bf16 *__restrict__ shift,
		 const float *__restrict__ input_scale, long long rows, float eps,
		 float *__restrict__ s_out, bf16 *__restrict__ gate_out,
		 const bf16 *__restrict__ scales, const bf16 *__restrict__ shifts,
		 const bf16 *__restrict__ gates,
		 const bf16 *__restrict__ scale0, const bf16 *__restrict__ shift0,
		 const bf16 *__restrict__ gate0,
		 const bf16 *__restrict__ scale1, const bf16 *__restrict__ shift1,
		 const bf16 *__restrict__ gate1,
		 const unsigned char *__restrict__ index,
		 const bf16 *__restrict__ weight, const bf16 *__restrict__ bias,
		 long long B, long long L)
{
	constexpr Norm NORM = P::norm;
	constexpr bool RESIDUAL = P::residual;
	constexpr Quant QUANT = P::quantize;
	constexpr Modulation MOD = P::modulation;
	constexpr Affine AFFINE = P::affine;
	constexpr bool WRITE_Y = P::outputs == Outputs::y_q;
	constexpr bool STATIC_Q = QUANT == Quant::fp8_e4m3;
	constexpr bool TOKEN_Q = QUANT == Quant::fp8_e4m3_per_token;
	constexpr int H = P::hidden;
	constexpr int VEC_BYTES = P::vec_bytes;
	constexpr int WARPS = P::warps_per_row;
	constexpr int ROWS = P::rows_per_block;
	constexpr int PREFETCH = P::prefetch;
	constexpr int STAGES = P::ring_stages;
	constexpr int VE = VEC_BYTES / 2; // bf16 per vector
	constexpr int TPR = 32 * WARPS;   // threads per row
	constexpr int VPT = H / (TPR * VE);
	constexpr int NW = VEC_BYTES / 4; // 32-bit words (bf16 pairs) per vector
	constexpr float INV_H = 1.0f / (float)H;
	// per-row modulation read with the row (per_token), and the chosen set
	constexpr bool ROW_MOD = MOD == Modulation::per_token;
	constexpr bool INDEXED = MOD == Modulation::indexed;
	static_assert(VPT >= 1 && H % (TPR * VE) == 0,
		      "hidden must be a multiple of threads per row x vector elements");
	static_assert(STAGES == 0 || (ROWS == 1 && PREFETCH == 0),
		      "bulk-copy stages take one row per block and no register prefetch");
	static_assert(WRITE_Y || QUANT != Quant::none, "outputs: q needs a quantizing variant");
	static_assert(NORM == Norm::layer || AFFINE != Affine::weight_bias,
		      "RMSNorm takes a weight, not a bias");
#if __CUDA_ARCH__ < 900
	static_assert(STAGES == 0, "bulk-copy stages need sm_90 or newer");
#endif
	(void)B;

	__shared__ float partial[2][ROWS][WARPS];

	const int group = threadIdx.x / TPR;
	const int t = threadIdx.x % TPR;
	const int warp = t / 32;
	const int lane = t % 32;
	const long long stride = (long long)gridDim.x * ROWS;
	int buf = 0;

	// Sum over the threads of one row's group, in a fixed order.
	auto row_sum = [&](float s) {
		s = warp_sum(s);
		if constexpr (WARPS > 1) {
			if (lane == 0)
				partial[buf][group][warp] = s;
			__syncthreads();
			s = 0.0f;
#pragma unroll
			for (int k = 0; k < WARPS; k++)
				s += partial[buf][group][k];
			buf ^= 1;
		}
		return s;
	};
	// Maximum over the threads of one row's group (exact in any order).
	auto row_max = [&](unsigned m) {
		m = warp_max(m);
		if constexpr (WARPS > 1) {
			if (lane == 0)
				partial[buf][group][warp] = __uint_as_float(m);
			__syncthreads();
			m = 0u;
#pragma unroll
			for (int k = 0; k < WARPS; k++)
				m = umax(m, __float_as_uint(partial[buf][group][k]));
			buf ^= 1;
		}
		return m;
	};

	// The row's inputs: x, and the residual stream for residual variants;
	// per-token modulation rows; the index of an indexed row.
	struct row_in {
		vec<VEC_BYTES> x[VPT];
		vec<VEC_BYTES> r[RESIDUAL ? VPT : 1];
		vec<VEC_BYTES> sc[ROW_MOD ? VPT : 1], sh[ROW_MOD ? VPT : 1];
		vec<VEC_BYTES> g[ROW_MOD && RESIDUAL ? VPT : 1];
		unsigned sel;
	};
	// What is not x or residual (the bulk path copies those two).
	auto fetch_mod = [&](row_in &in, long long row) {
		if constexpr (ROW_MOD) {
			const long long off = row * H;
#pragma unroll
			for (int j = 0; j < VPT; j++) {
				load(in.sc[j], scales + off + (j * TPR + t) * VE);
				load(in.sh[j], shifts + off + (j * TPR + t) * VE);
				if constexpr (RESIDUAL)
					load(in.g[j], gates + off + (j * TPR + t) * VE);
			}
		}
		if constexpr (INDEXED)
			in.sel = index[row]; // index is [B, L] and row = b * L + l
	};
	auto fetch = [&](row_in &in, long long row) {
		const long long off = row * H; // 64-bit: no overflow at any row count
#pragma unroll
		for (int j = 0; j < VPT; j++)
			load(in.x[j], x + off + (j * TPR + t) * VE);
		if constexpr (RESIDUAL) {
#pragma unroll
			for (int j = 0; j < VPT; j++)
				load(in.r[j], residual + off + (j * TPR + t) * VE);
		}
		fetch_mod(in, row);
	};

	// The row's modulation vectors (rows of [B, H] or [H] tensors) and a
	// key that changes when they do.
	struct row_mod {
		const bf16 *sc, *sh, *g;
		long long key;
	};
	auto mod_of = [&](const row_in &in, long long row) {
		row_mod m;
		if constexpr (MOD == Modulation::shared) {
			m.sc = scale;
			m.sh = shift;
			m.g = gate;
			m.key = 0;
		} else if constexpr (MOD == Modulation::per_batch) {
			const long long b = row / L;
			m.sc = scales + b * H;
			m.sh = shifts + b * H;
			m.g = gates + b * H;
			m.key = b;
		} else if constexpr (MOD == Modulation::per_token) {
			m.sc = m.sh = m.g = nullptr; // read with the row
			m.key = row;
		} else {
			// any index value other than 0 is set 1
			const long long b = row / L;
			const bool one = in.sel != 0u;
			m.sc = (one ? scale1 : scale0) + b * H;
			m.sh = (one ? shift1 : shift0) + b * H;
			m.g = (one ? gate1 : gate0) + b * H;
			m.key = 2 * b + one;
		}
		return m;
	};

	wait_for_prior_kernels(); // before any global memory access
	float rcp = 0.0f;
	if constexpr (STATIC_Q)
		rcp = reciprocal_div_full(*input_scale);

	// With few elements per thread, 1 + scale and shift are computed once
	// and kept in registers as fp32 for every row the block walks (the
	// same values the per-row path computes: fadd(1, scale), and shift);
	// per batch (or set), they are reloaded when the row's vectors change.
	constexpr int EPT = VPT * VE; // elements per thread
	constexpr bool HOLD = EPT <= 32 && !ROW_MOD;
	float s1h[HOLD ? EPT : 1], shh[HOLD ? EPT : 1];
	long long held = -1;
	auto hold = [&](const bf16 *sc_p, const bf16 *sh_p) {
#pragma unroll
		for (int j = 0; j < VPT; j++) {
			vec<VEC_BYTES> sc, sh;
			load(sc, sc_p + (j * TPR + t) * VE);
			load(sh, sh_p + (j * TPR + t) * VE);
#pragma unroll
			for (int w = 0; w < NW; w++) {
				s1h[j * VE + 2 * w] = __fadd_rn(1.0f, bf16_lo(sc.w[w]));
				s1h[j * VE + 2 * w + 1] = __fadd_rn(1.0f, bf16_hi(sc.w[w]));
				shh[j * VE + 2 * w] = bf16_lo(sh.w[w]);
				shh[j * VE + 2 * w + 1] = bf16_hi(sh.w[w]);
			}
		}
	};
	if constexpr (HOLD && MOD == Modulation::shared)
		hold(scale, shift);

	// One row in two steps. stats: the gated residual (stored), then the
	// two reductions; every thread of the block has passed a block
	// barrier behind its reads of IN when it returns (the bulk path then
	// refills IN's buffer). emit: y (and q). Inactive groups (past the
	// last row) join the reductions' barriers with zeros.
	struct row_stats {
		float d[EPT]; // v - mean (v for RMS), fp32
		float factor;
	};
	auto stats = [&](const row_in &in, const row_mod &m, long long row, bool active,
			 row_stats &st) {
		const long long off = row * H;
		vec<VEC_BYTES> v[VPT];
		if (active) {
			if constexpr (RESIDUAL) {
#pragma unroll
				for (int j = 0; j < VPT; j++) {
					vec<VEC_BYTES> g;
					if constexpr (ROW_MOD)
						g = in.g[j];
					else
						load(g, m.g + (j * TPR + t) * VE);
#pragma unroll
					for (int w = 0; w < NW; w++) {
						float lo = __fmaf_rn(bf16_lo(g.w[w]), bf16_lo(in.x[j].w[w]),
								     bf16_lo(in.r[j].w[w]));
						float hi = __fmaf_rn(bf16_hi(g.w[w]), bf16_hi(in.x[j].w[w]),
								     bf16_hi(in.r[j].w[w]));
						v[j].w[w] = pack_bf16x2(lo, hi);
					}
					store(residual_out + off + (j * TPR + t) * VE, v[j]);
					if constexpr (INDEXED) // the chosen gate, for the next residual
						store(gate_out + off + (j * TPR + t) * VE, g);
				}
			} else {
#pragma unroll
				for (int j = 0; j < VPT; j++)
					v[j] = in.x[j];
			}
		} else {
#pragma unroll
			for (int j = 0; j < VPT; j++)
#pragma unroll
				for (int w = 0; w < NW; w++)
					v[j].w[w] = 0u;
		}

		float mean = 0.0f;
		if constexpr (NORM == Norm::layer) {
			float s = 0.0f;
#pragma unroll
			for (int j = 0; j < VPT; j++)
#pragma unroll
				for (int w = 0; w < NW; w++) {
					s += bf16_lo(v[j].w[w]);
					s += bf16_hi(v[j].w[w]);
				}
			mean = row_sum(s) * INV_H;
		}
		float ss = 0.0f;
#pragma unroll
		for (int j = 0; j < VPT; j++)
#pragma unroll
			for (int w = 0; w < NW; w++) {
				float a = bf16_lo(v[j].w[w]), b = bf16_hi(v[j].w[w]);
				if constexpr (NORM == Norm::layer) {
					a -= mean;
					b -= mean;
				}
				st.d[j * VE + 2 * w] = a;
				st.d[j * VE + 2 * w + 1] = b;
				ss += a * a;
				ss += b * b;
			}
		st.factor = rsqrtf(row_sum(ss) * INV_H + eps);
	};
	// n for two elements, packed bf16: the contract's step 6 with the
	// affine weight (w) and bias (b).
	auto normalize2 = [&](float d0, float d1, float factor, unsigned wv, unsigned bv) {
		if constexpr (AFFINE == Affine::none) {
			// n = bf((v - mean) * factor), both halves in one convert
			return pack_bf16x2(__fmul_rn(d0, factor), __fmul_rn(d1, factor));
		} else if constexpr (NORM == Norm::layer) {
			// PyTorch's layer_norm: one rounding after the FMA (b = 0
			// without a bias)
			const float b0 = AFFINE == Affine::weight_bias ? bf16_lo(bv) : 0.0f;
			const float b1 = AFFINE == Affine::weight_bias ? bf16_hi(bv) : 0.0f;
			return pack_bf16x2(__fmaf_rn(__fmul_rn(d0, factor), bf16_lo(wv), b0),
					   __fmaf_rn(__fmul_rn(d1, factor), bf16_hi(wv), b1));
		} else {
			// diffusers' RMSNorm: normalize, round, times the weight, round
			const unsigned n = pack_bf16x2(__fmul_rn(d0, factor), __fmul_rn(d1, factor));
			return pack_bf16x2(__fmul_rn(bf16_lo(n), bf16_lo(wv)),
					   __fmul_rn(bf16_hi(n), bf16_hi(wv)));
		}
	};
	auto emit = [&](const row_in &in, const row_mod &m, const row_stats &st, long long row,
			bool active) {
		const long long off = row * H;
		vec<VEC_BYTES> yv[TOKEN_Q ? VPT : 1]; // y, for the per-token scale
		unsigned amax = 0u;                   // the largest |y|, bf16 bits
		if constexpr (HOLD && MOD != Modulation::shared) {
			if (m.key != held) {
				hold(m.sc, m.sh);
				held = m.key;
			}
		}
#pragma unroll
		for (int j = 0; j < VPT; j++) {
			const int col = (j * TPR + t) * VE;
			vec<VEC_BYTES> sc, sh, out, wt, bs;
			vec<VEC_BYTES / 2> qv;
			if constexpr (ROW_MOD) {
				sc = in.sc[j];
				sh = in.sh[j];
			} else if constexpr (!HOLD) {
				load(sc, m.sc + col);
				load(sh, m.sh + col);
			}
			if constexpr (AFFINE != Affine::none)
				load(wt, weight + col);
			if constexpr (AFFINE == Affine::weight_bias)
				load(bs, bias + col);
#pragma unroll
			for (int w = 0; w < NW; w++) {
				const int e = j * VE + 2 * w;
				float s1a, s1b, sha, shb;
				if constexpr (HOLD) {
					s1a = s1h[e];
					s1b = s1h[e + 1];
					sha = shh[e];
					shb = shh[e + 1];
				} else {
					s1a = __fadd_rn(1.0f, bf16_lo(sc.w[w]));
					s1b = __fadd_rn(1.0f, bf16_hi(sc.w[w]));
					sha = bf16_lo(sh.w[w]);
					shb = bf16_hi(sh.w[w]);
				}
				const unsigned n = normalize2(st.d[e], st.d[e + 1], st.factor,
							      AFFINE != Affine::none ? wt.w[w] : 0u,
							      AFFINE == Affine::weight_bias ? bs.w[w] : 0u);
				float ya = __fmaf_rn(bf16_lo(n), s1a, sha);
				float yb = __fmaf_rn(bf16_hi(n), s1b, shb);
				out.w[w] = pack_bf16x2(ya, yb);
				if constexpr (STATIC_Q) {
					unsigned pair = quantize_e4m3x2(bf16_lo(out.w[w]),
									bf16_hi(out.w[w]), rcp);
					if (w % 2 == 0)
						qv.w[w / 2] = pair;
					else
						qv.w[w / 2] |= pair << 16;
				}
				if constexpr (TOKEN_Q)
					amax = umax(amax, abs_max_bf16x2(out.w[w]));
			}
			if constexpr (TOKEN_Q)
				yv[j] = out;
			if (active) {
				if constexpr (WRITE_Y)
					store(y + off + col, out);
				if constexpr (STATIC_Q)
					store(q + off + col, qv);
			}
		}
		if constexpr (TOKEN_Q) {
			// a NaN in the row gives s = NaN and q = 0x7e
			const float sq = token_scale(row_max(amax));
			const float r = reciprocal_rn(sq);
			if (active) {
#pragma unroll
				for (int j = 0; j < VPT; j++) {
					vec<VEC_BYTES / 2> qv;
					quantize_e4m3_vec(qv, yv[j], r);
					store(q + off + (j * TPR + t) * VE, qv);
				}
				if (t == 0)
					s_out[row] = sq;
			}
		}
	};

#if __CUDA_ARCH__ >= 900
	if constexpr (STAGES > 0) {
		// A ring of STAGES row buffers; buffer k's barrier completes
		// once per row copied into it, so the n-th use of buffer k
		// waits for parity n & 1.
		constexpr unsigned ROW_BYTES = H * 2;
		constexpr int INPUTS = RESIDUAL ? 2 : 1;
		__shared__ alignas(128) unsigned char ring[STAGES][INPUTS][ROW_BYTES];
		__shared__ alignas(8) unsigned long long full[STAGES];
		const long long grid = gridDim.x;
		const long long first = blockIdx.x;
		auto issue = [&](int k, long long row) {
			const unsigned bar = shared_offset(&full[k]);
			mbarrier_expect_bytes(bar, INPUTS * ROW_BYTES);
			bulk_load(shared_offset(ring[k][0]), x + row * H, ROW_BYTES, bar);
			if constexpr (RESIDUAL)
				bulk_load(shared_offset(ring[k][1]), residual + row * H, ROW_BYTES, bar);
		};
		if (threadIdx.x == 0) {
#pragma unroll
			for (int k = 0; k < STAGES; k++)
				mbarrier_init(shared_offset(&full[k]), 1);
			mbarrier_init_fence();
#pragma unroll
			for (int k = 0; k < STAGES; k++)
				if (first + k * grid < rows)
					issue(k, first + k * grid);
		}
		__syncthreads();
		int k = 0;
		unsigned parity = 0;
		for (long long row = first; row < rows; row += grid) {
			row_in in;
			fetch_mod(in, row);
			mbarrier_wait(shared_offset(&full[k]), parity);
#pragma unroll
			for (int j = 0; j < VPT; j++) {
				const int byte = (j * TPR + t) * VEC_BYTES;
				in.x[j] = *reinterpret_cast<const vec<VEC_BYTES> *>(&ring[k][0][byte]);
				if constexpr (RESIDUAL)
					in.r[j] = *reinterpret_cast<const vec<VEC_BYTES> *>(&ring[k][1][byte]);
			}
			const row_mod m = mod_of(in, row);
			row_stats st;
			stats(in, m, row, true, st);
			// Every thread has read buffer k (the reductions passed a
			// block barrier after the reads): refill it.
			if constexpr (WARPS == 1)
				__syncthreads();
			const long long ahead = row + STAGES * grid;
			if (threadIdx.x == 0 && ahead < rows)
				issue(k, ahead);
			emit(in, m, st, row, true);
			if (++k == STAGES) {
				k = 0;
				parity ^= 1;
			}
		}
		return;
	}
#endif
	if constexpr (STAGES == 0) {
		long long base = (long long)blockIdx.x * ROWS;
		row_in cur, next;
		if (PREFETCH && base + group < rows)
			fetch(cur, base + group);
		for (; base < rows; base += stride) {
			const long long row = base + group;
			const bool active = row < rows;
			if constexpr (WARPS == 1) {
				if (!active)
					break; // no block-wide barrier to keep in step with
			}
			// Software pipelining: the next row's loads are in flight
			// while this row is reduced and written.
			if constexpr (PREFETCH) {
				if (row + stride < rows)
					fetch(next, row + stride);
			} else if (active) {
				fetch(cur, row);
			}
			// (an inactive group takes the last row's vectors: valid
			// addresses, nothing stored)
			const row_mod m = mod_of(cur, active ? row : rows - 1);
			row_stats st;
			stats(cur, m, row, active, st);
			// The per-token scale is one more reduction: every group
			// joins its barriers.
			if (TOKEN_Q && WARPS > 1)
				emit(cur, m, st, row, active);
			else if (active)
				emit(cur, m, st, row, true);
			if constexpr (PREFETCH)
				cur = next;
		}
	}
}

} // namespace jitk
