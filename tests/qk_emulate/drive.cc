// drive.cc - templates/qk_norm_rope.cuh run on the host (shim.h), for
// tests/qk_emulate.sh: the logic of the kernels without a GPU. For a set
// of shapes and tunings (16- and 32-byte vectors, the spec's threads and
// items and others), over packed [N, (Hq + 2 Hk) D + 16] buffers:
//  - fused in place == split (rms_norm_heads, then rope), every byte;
//  - v and the gaps untouched; every vector access inside its buffer and
//    aligned (shim.h); positions out of range clamped;
//  - q and k within tests/qk_ref.h's bound of the float64 reference;
//  - out of place into heads-first outputs == in place, the outputs'
//    other tokens untouched; copy_heads copies;
//  - the same bytes from different vector widths, threads and items (the
//    reduction order belongs to the arithmetic, not the tuning).
// Prints one line per case; exits 1 on any failure.
#include "shim.h"
#include "qk_norm_rope.cuh"
#include "qk_ref.h"
#include <random>

using namespace jitk;

template <int D, int VB, int T, int K, RopeStyle ST, RopePositions PO, NormSpan SP, bool W>
struct Pfused {
	static constexpr int head_dim = D, vec_bytes = VB, threads = T, items = K, min_blocks = 1;
	static constexpr RopeStyle style = ST;
	static constexpr RopePositions positions = PO;
	static constexpr NormSpan span = SP;
	static constexpr bool weight = W;
};
template <int D, int VB, int T, int K, NormSpan SP, bool W> struct Pnorm {
	static constexpr int head_dim = D, vec_bytes = VB, threads = T, items = K, min_blocks = 1;
	static constexpr NormSpan span = SP;
	static constexpr bool weight = W;
};
template <int D, int VB, int T, int K, RopeStyle ST, RopePositions PO> struct Prope {
	static constexpr int head_dim = D, vec_bytes = VB, threads = T, items = K, min_blocks = 1;
	static constexpr RopeStyle style = ST;
	static constexpr RopePositions positions = PO;
};
template <int D, int VB, int T, int K> struct Pcopy {
	static constexpr int head_dim = D, vec_bytes = VB, threads = T, items = K, min_blocks = 1;
};

struct Args {
	bf16 *q, *k, *v, *qo, *ko, *vo;
	const bf16 *qw, *kw;
	const float *cs;
	const int *p32;
	const long long *p64;
	long long n;
	int hq, hk, r;
	long long p, qs, qhs, ks, khs, vs, vhs, qos, qohs, kos, kohs, vos, vohs;
	float eps;
};

template <class P> void fused(void *v)
{
	Args &a = *(Args *)v;
	qk_norm_rope<P>(a.q, a.k, a.qw, a.kw, a.cs, a.p32, a.p64, a.n, a.hq, a.hk, a.r, a.p, a.qs, a.qhs,
			a.ks, a.khs, a.eps);
}
template <class P> void out_of_place(void *v)
{
	Args &a = *(Args *)v;
	qk_norm_rope_out<P>(a.qo, a.ko, a.vo, a.q, a.k, a.v, a.qw, a.kw, a.cs, a.p32, a.p64, a.n, a.hq, a.hk,
			    a.r, a.p, a.qs, a.qhs, a.ks, a.khs, a.vs, a.vhs, a.qos, a.qohs, a.kos, a.kohs,
			    a.vos, a.vohs, a.eps);
}
template <class P> void norm(void *v)
{
	Args &a = *(Args *)v;
	rms_norm_heads<P>(a.q, a.k, a.qw, a.kw, a.n, a.hq, a.hk, a.qs, a.qhs, a.ks, a.khs, a.eps);
}
template <class P> void rotate(void *v)
{
	Args &a = *(Args *)v;
	rope<P>(a.q, a.k, a.cs, a.p32, a.p64, a.n, a.hq, a.hk, a.r, a.p, a.qs, a.qhs, a.ks, a.khs);
}
template <class P> void copy(void *v)
{
	Args &a = *(Args *)v;
	copy_heads<P>(a.qo, a.q, a.n, a.hq, a.qos, a.qohs, a.qs, a.qhs);
}

// A host buffer vector accesses may touch: 64-byte aligned, registered.
template <class T> struct buf {
	T *p;
	size_t n;
	explicit buf(size_t count, T fill = T()) : n(count)
	{
		p = (T *)aligned_alloc(64, (n * sizeof(T) + 63) / 64 * 64 + 64);
		for (size_t i = 0; i < n; i++)
			p[i] = fill;
		emu_register(p, n * sizeof(T));
	}
	buf(const buf &) = delete;
	~buf() { free(p); }
	T &operator[](size_t i) { return p[i]; }
	bool same(const buf &o) const { return n == o.n && !memcmp(p, o.p, n * sizeof(T)); }
};

static std::mt19937_64 rng;
static double gauss()
{
	std::normal_distribution<double> d(0, 1);
	return d(rng);
}
static std::vector<bf16> last; // the fused result of the last case

template <int D, int VB, int T, int K, RopeStyle ST, RopePositions PO, NormSpan SP, bool W>
static int run_case(long long n, int hq, int hk, int r, long long p)
{
	using PF = Pfused<D, VB, T, K, ST, PO, SP, W>;
	using PN = Pnorm<D, VB, T, K, SP, W>;
	using PR = Prope<D, VB, T, K, ST, PO>;
	using PC = Pcopy<D, VB, T, K>;
	const int pad = 16;
	const long long row = (long long)(hq + 2 * hk) * D + pad, off = 3, nt = n + 5;
	const size_t total = (size_t)(n * row);
	const bool across = SP == NormSpan::heads;

	rng.seed((unsigned long long)(n * 1000 + hq * 10 + hk + r));
	emu_unregister_all();
	buf<bf16> x(total), a(total), b(total);
	buf<bf16> qw(across ? hq * D : D), kw(across ? hk * D : D);
	buf<float> cs((size_t)(p * r) + 1);
	buf<int> p32(n + 1);
	buf<long long> p64(n + 1);
	for (size_t i = 0; i < total; i++)
		x[i] = a[i] = b[i] = bf16_rn((float)(3.0 * gauss()));
	for (size_t i = 0; i < qw.n; i++)
		qw[i] = bf16_rn((float)(1.0 + 0.2 * gauss()));
	for (size_t i = 0; i < kw.n; i++)
		kw[i] = bf16_rn((float)(1.0 + 0.2 * gauss()));
	for (long long t = 0; t < p; t++)
		for (int i = 0; i < r / 2; i++) {
			double th = (double)t * pow(10000.0, -2.0 * i / r) + 0.1;
			cs[t * r + i] = (float)cos(th);
			cs[t * r + r / 2 + i] = (float)sin(th);
		}
	for (long long t = 0; t < n; t++) {
		long long v = (long long)(rng() % (unsigned long long)(p + 4)) - 2; // some out of range
		if (t == 0)
			v = p - 1;
		if (t == 1)
			v = p + 100;
		if (t == 2)
			v = -5;
		p32[t] = (int)v;
		p64[t] = v;
	}

	Args g{};
	g.n = n;
	g.hq = hq;
	g.hk = hk;
	g.r = r;
	g.p = p;
	g.eps = 1e-6f;
	g.qw = W ? qw.p : nullptr;
	g.kw = W ? kw.p : nullptr;
	g.cs = cs.p;
	g.p32 = PO == RopePositions::i32 ? p32.p : nullptr;
	g.p64 = PO == RopePositions::i64 ? p64.p : nullptr;
	g.qs = g.ks = g.vs = row;
	g.qhs = g.khs = g.vhs = D;
	g.q = a.p;
	g.k = a.p + hq * D;
	emu_launch((unsigned)n, PF::threads, fused<PF>, &g);
	g.q = b.p;
	g.k = b.p + hq * D;
	emu_launch((unsigned)n, PN::threads, norm<PN>, &g);
	emu_launch((unsigned)n, PR::threads, rotate<PR>, &g);

	size_t differ = !a.same(b), untouched = 0, bad = 0;
	double e2 = 0, r2 = 0;
	const qk_math m = { D, r, ST == RopeStyle::neox, across, W, 1e-6 };
	std::vector<double> out((size_t)(hq > hk ? hq : hk) * D), pre(out.size());
	for (long long t = 0; t < n; t++) {
		long long pt = PO == RopePositions::none ? t : p64[t];
		pt = pt < 0 ? 0 : pt >= p ? p - 1 : pt;
		for (int s = 0; s < 2; s++) {
			const int h = s ? hk : hq;
			const size_t o = (size_t)(t * row) + (s ? hq * D : 0);
			qk_ref_token(out.data(), pre.data(), &x[o], h, s ? kw.p : qw.p, &cs[pt * r], &m);
			for (int i = 0; i < h * D; i++) {
				const double d = qk_bf16_f(a[o + i]) - out[i];
				e2 += d * d;
				r2 += out[i] * out[i];
				bad += !(fabs(d) <= qk_ref_bound(&pre[(i / D) * D], i % D, &m));
			}
		}
		for (long long i = (hq + hk) * D; i < row; i++)
			untouched += a[t * row + i] != x[t * row + i];
	}

	// out of place into heads-first [h, n + 5, D] at token offset 3
	buf<bf16> qo((size_t)(hq * nt * D), 0x5a5a), ko((size_t)(hk * nt * D), 0x5a5a),
		vo((size_t)(hk * nt * D), 0x5a5a), co((size_t)(hq * nt * D), 0x1111);
	g.q = x.p;
	g.k = x.p + hq * D;
	g.v = x.p + (hq + hk) * D;
	g.qo = qo.p + off * D;
	g.ko = ko.p + off * D;
	g.vo = vo.p + off * D;
	g.qos = g.kos = g.vos = D;
	g.qohs = g.kohs = g.vohs = nt * D;
	emu_launch((unsigned)n, PF::threads, out_of_place<PF>, &g);
	g.qo = co.p + off * D;
	emu_launch((unsigned)n, PC::threads, copy<PC>, &g);
	size_t out_bad = 0, copy_bad = 0;
	buf<bf16> *outs[3] = { &qo, &ko, &vo };
	for (int s = 0; s < 3; s++) {
		const int h = s ? hk : hq;
		const long long base = s == 0 ? 0 : s == 1 ? hq * D : (hq + hk) * D;
		for (int hh = 0; hh < h; hh++)
			for (long long t = 0; t < nt; t++)
				for (int i = 0; i < D; i++) {
					const bf16 got = (*outs[s])[(size_t)(hh * nt * D + t * D + i)];
					const bool in = t >= off && t < off + n;
					out_bad += in ? got != a[(size_t)((t - off) * row + base + hh * D + i)] : got != 0x5a5a;
					if (s == 0)
						copy_bad += in ? co[(size_t)(hh * nt * D + t * D + i)] !=
								       x[(size_t)((t - off) * row + hh * D + i)]
							       : co[(size_t)(hh * nt * D + t * D + i)] != 0x1111;
				}
	}
	last.assign(a.p, a.p + total);
	const double rel = sqrt(e2 / r2);
	printf("D %3d, %2d-byte vectors, %3d threads x %d items, %-11s %-4s %-5s weight %d, N %lld, %d + %d heads, R %3d, "
	       "P %lld: fused != split %zu, v/gaps changed %zu, outside the bound %zu, rel L2 %.1e, out != in %zu, "
	       "copy %zu\n",
	       D, VB, T, K, ST == RopeStyle::neox ? "neox" : "interleaved",
	       PO == RopePositions::none ? "none" : PO == RopePositions::i32 ? "i32" : "i64", across ? "heads" : "head",
	       W, n, hq, hk, r, p, differ, untouched, bad, rel, out_bad, copy_bad);
	return differ || untouched || bad || out_bad || copy_bad || !(rel < 1e-2);
}

int main()
{
	using S = RopeStyle;
	using O = RopePositions;
	using N = NormSpan;
	int f = 0;

	// the spec's sm_90 tuning (16-byte vectors, 96 threads x 8; 160 across heads)
	f |= run_case<128, 16, 96, 8, S::interleaved, O::none, N::head, true>(5, 24, 24, 128, 5);
	f |= run_case<128, 16, 96, 8, S::neox, O::i32, N::head, true>(5, 3, 2, 64, 9);
	f |= run_case<128, 16, 96, 8, S::neox, O::i64, N::head, false>(4, 5, 1, 128, 3);
	f |= run_case<64, 16, 96, 8, S::neox, O::none, N::head, true>(3, 3, 2, 32, 3);
	f |= run_case<256, 16, 96, 8, S::interleaved, O::i32, N::head, true>(3, 3, 2, 96, 7);
	f |= run_case<128, 16, 160, 8, S::interleaved, O::none, N::heads, true>(3, 40, 40, 128, 3);
	f |= run_case<128, 16, 160, 8, S::neox, O::i64, N::heads, false>(3, 3, 2, 64, 4);
	f |= run_case<64, 16, 160, 8, S::neox, O::i32, N::heads, true>(4, 5, 3, 64, 4);
	f |= run_case<128, 16, 96, 8, S::interleaved, O::none, N::head, true>(3, 1, 1, 0, 3); // R = 0
	f |= run_case<128, 16, 96, 8, S::neox, O::i32, N::head, true>(4, 32, 8, 128, 6);      // GQA
	// sm_100's (32-byte vectors, 96 x 4; 160 across heads)
	f |= run_case<128, 32, 96, 4, S::interleaved, O::none, N::head, true>(3, 24, 24, 128, 3);
	f |= run_case<128, 32, 96, 4, S::neox, O::i32, N::head, true>(3, 3, 2, 64, 5);
	f |= run_case<64, 32, 96, 4, S::neox, O::i32, N::head, true>(3, 3, 2, 32, 5);
	f |= run_case<256, 32, 160, 4, S::neox, O::none, N::heads, true>(3, 4, 2, 256, 3);

	// the same bytes whatever the vector width, threads and items
	struct {
		const char *what;
		int (*a)(), (*b)();
	} pairs[] = {
		{ "16- and 32-byte vectors",
		  [] { return run_case<128, 16, 96, 8, S::neox, O::i32, N::head, true>(6, 5, 3, 64, 7); },
		  [] { return run_case<128, 32, 96, 4, S::neox, O::i32, N::head, true>(6, 5, 3, 64, 7); } },
		{ "16- and 32-byte vectors across heads",
		  [] { return run_case<128, 16, 160, 8, S::interleaved, O::none, N::heads, true>(3, 40, 40, 128, 3); },
		  [] { return run_case<128, 32, 160, 4, S::interleaved, O::none, N::heads, true>(3, 40, 40, 128, 3); } },
		{ "64 x 8 and 32 x 16 threads x items",
		  [] { return run_case<256, 16, 64, 8, S::interleaved, O::none, N::heads, false>(3, 2, 2, 128, 3); },
		  [] { return run_case<256, 32, 32, 16, S::interleaved, O::none, N::heads, false>(3, 2, 2, 128, 3); } },
		{ "192 x 2 and 96 x 8 threads x items",
		  [] { return run_case<128, 16, 192, 2, S::neox, O::i64, N::head, true>(4, 24, 8, 128, 9); },
		  [] { return run_case<128, 16, 96, 8, S::neox, O::i64, N::head, true>(4, 24, 8, 128, 9); } },
	};
	for (auto &pr : pairs) {
		f |= pr.a();
		std::vector<bf16> first = last;
		f |= pr.b();
		printf("%s: %s\n", pr.what, first == last ? "the same bytes" : "DIFFERENT BYTES");
		f |= first != last;
	}
	printf("qk_emulate: %s\n", f ? "FAILED" : "ok");
	return f;
}
