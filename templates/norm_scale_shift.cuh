// norm_scale_shift.cuh - LayerNorm/RMSNorm + scale/shift modulation, with
// an optional gated residual before the norm and an optional static FP8
// (e4m3) quantization of the result, in one pass over each row.
//
// The arithmetic follows the kernel contract (docs/kernels.md), every
// rounding point:
//   r    = bf(residual + gate * x)            one FMA (residual variants)
//   mean = sum(v) * fl(1/H)                   v = f(x), or f(r)
//   var  = sum((v - mean)^2) * fl(1/H)        two-pass; RMS: sum(v^2)
//   n    = f(bf((v - mean) * rsqrtf(var + eps)))
//   y    = bf(fma(n, 1 + scale, shift))
//   q    = e4m3(clamp(f(y) * (1 div.full input_scale), -448, 448))
// The quantizing and non-quantizing instantiations share every step up to
// y, so for the same H and tuning the fused y and q equal the split path's
// (this kernel without QUANT, then static_quant_fp8) byte for byte.
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
// STAGES > 0 (sm_90+) replaces the register loads with bulk asynchronous
// copies: a block owns one row at a time and a ring of STAGES row buffers
// in shared memory; one thread keeps the next STAGES rows' copies in
// flight, each completing on its own mbarrier, so the bytes in flight
// cost no registers and the grid stays persistent without waves.

#pragma once
#include "common.cuh"

namespace jitk {

enum class Norm { layer, rms };
enum class Quant { none, fp8_e4m3 };

// P holds the instance's parameters, tuning and derived values by name
// (the struct jitk generates from the spec).
template <class P>
__global__ void __launch_bounds__(32 * P::warps_per_row * P::rows_per_block, P::min_blocks)
norm_scale_shift(bf16 *__restrict__ y, fp8_e4m3 *__restrict__ q,
		 bf16 *__restrict__ residual_out, const bf16 *__restrict__ x,
		 const bf16 *__restrict__ residual,
		 const bf16 *__restrict__ gate, const bf16 *__restrict__ scale,
		 const bf16 *__restrict__ shift,
		 const float *__restrict__ input_scale, long long rows, float eps)
{
	constexpr Norm NORM = P::norm;
	constexpr bool RESIDUAL = P::residual;
	constexpr Quant QUANT = P::quantize;
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
	static_assert(VPT >= 1 && H % (TPR * VE) == 0,
		      "hidden must be a multiple of threads per row x vector elements");
	static_assert(STAGES == 0 || (ROWS == 1 && PREFETCH == 0),
		      "bulk-copy stages take one row per block and no register prefetch");
#if __CUDA_ARCH__ < 900
	static_assert(STAGES == 0, "bulk-copy stages need sm_90 or newer");
#endif

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

	// The row's inputs: x, and the residual stream for residual variants.
	struct row_in {
		vec<VEC_BYTES> x[VPT];
		vec<VEC_BYTES> r[RESIDUAL ? VPT : 1];
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
	};

	wait_for_prior_kernels(); // before any global memory access
	float rcp = 0.0f;
	if constexpr (QUANT == Quant::fp8_e4m3)
		rcp = reciprocal_div_full(*input_scale);

	// With few elements per thread, 1 + scale and shift are computed once
	// and kept in registers as fp32 for every row the block walks (the
	// same values the per-row path computes: fadd(1, scale), and shift).
	constexpr int EPT = VPT * VE; // elements per thread
	constexpr bool HOLD = EPT <= 32;
	float s1h[HOLD ? EPT : 1], shh[HOLD ? EPT : 1];
	if constexpr (HOLD) {
#pragma unroll
		for (int j = 0; j < VPT; j++) {
			vec<VEC_BYTES> sc, sh;
			load(sc, scale + (j * TPR + t) * VE);
			load(sh, shift + (j * TPR + t) * VE);
#pragma unroll
			for (int w = 0; w < NW; w++) {
				s1h[j * VE + 2 * w] = __fadd_rn(1.0f, bf16_lo(sc.w[w]));
				s1h[j * VE + 2 * w + 1] = __fadd_rn(1.0f, bf16_hi(sc.w[w]));
				shh[j * VE + 2 * w] = bf16_lo(sh.w[w]);
				shh[j * VE + 2 * w + 1] = bf16_hi(sh.w[w]);
			}
		}
	}

	// One row in two steps. stats: the gated residual (stored), then the
	// two reductions; every thread of the block has passed a block
	// barrier behind its reads of IN when it returns (the bulk path then
	// refills IN's buffer). emit: y (and q). Inactive groups (past the
	// last row) join the reductions' barriers with zeros.
	struct row_stats {
		float d[EPT]; // v - mean (v for RMS), fp32
		float factor;
	};
	auto stats = [&](const row_in &in, long long row, bool active, row_stats &st) {
		const long long off = row * H;
		vec<VEC_BYTES> v[VPT];
		if (active) {
			if constexpr (RESIDUAL) {
#pragma unroll
				for (int j = 0; j < VPT; j++) {
					vec<VEC_BYTES> g;
					load(g, gate + (j * TPR + t) * VE);
#pragma unroll
					for (int w = 0; w < NW; w++) {
						float lo = __fmaf_rn(bf16_lo(g.w[w]), bf16_lo(in.x[j].w[w]),
								     bf16_lo(in.r[j].w[w]));
						float hi = __fmaf_rn(bf16_hi(g.w[w]), bf16_hi(in.x[j].w[w]),
								     bf16_hi(in.r[j].w[w]));
						v[j].w[w] = pack_bf16x2(lo, hi);
					}
					store(residual_out + off + (j * TPR + t) * VE, v[j]);
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
	auto emit = [&](const row_stats &st, long long row) {
		const long long off = row * H;
#pragma unroll
		for (int j = 0; j < VPT; j++) {
			const int col = (j * TPR + t) * VE;
			vec<VEC_BYTES> sc, sh, out;
			vec<VEC_BYTES / 2> qv;
			if constexpr (!HOLD) {
				load(sc, scale + col);
				load(sh, shift + col);
			}
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
				// n = bf((v - mean) * factor), both halves in one convert
				const unsigned n = pack_bf16x2(__fmul_rn(st.d[e], st.factor),
							       __fmul_rn(st.d[e + 1], st.factor));
				float ya = __fmaf_rn(bf16_lo(n), s1a, sha);
				float yb = __fmaf_rn(bf16_hi(n), s1b, shb);
				out.w[w] = pack_bf16x2(ya, yb);
				if constexpr (QUANT == Quant::fp8_e4m3) {
					unsigned pair = quantize_e4m3x2(bf16_lo(out.w[w]),
									bf16_hi(out.w[w]), rcp);
					if (w % 2 == 0)
						qv.w[w / 2] = pair;
					else
						qv.w[w / 2] |= pair << 16;
				}
			}
			store(y + off + col, out);
			if constexpr (QUANT == Quant::fp8_e4m3)
				store(q + off + col, qv);
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
			mbarrier_wait(shared_offset(&full[k]), parity);
			row_in in;
#pragma unroll
			for (int j = 0; j < VPT; j++) {
				const int byte = (j * TPR + t) * VEC_BYTES;
				in.x[j] = *reinterpret_cast<const vec<VEC_BYTES> *>(&ring[k][0][byte]);
				if constexpr (RESIDUAL)
					in.r[j] = *reinterpret_cast<const vec<VEC_BYTES> *>(&ring[k][1][byte]);
			}
			row_stats st;
			stats(in, row, true, st);
			// Every thread has read buffer k (the reductions passed a
			// block barrier after the reads): refill it.
			if constexpr (WARPS == 1)
				__syncthreads();
			const long long ahead = row + STAGES * grid;
			if (threadIdx.x == 0 && ahead < rows)
				issue(k, ahead);
			emit(st, row);
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
			row_stats st;
			stats(cur, row, active, st);
			if (active)
				emit(st, row);
			if constexpr (PREFETCH)
				cur = next;
		}
	}
}

} // namespace jitk
