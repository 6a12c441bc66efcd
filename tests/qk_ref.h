/* qk_ref.h - host side of the QK-RMSNorm + RoPE tests: bf16 conversions,
 * a float64 reference of one token and the bound it is checked with
 * (docs/kernels.md, "QK-RMSNorm + RoPE"). Header-only: static functions. */
#ifndef JITK_TEST_QK_REF_H
#define JITK_TEST_QK_REF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "bf16.h"

static inline double qk_bf16_f(uint16_t h)
{
	return (double)bf16_f(h);
}

/* What the kernel computes (the symbol's parameters and the call's
 * rotary dims and eps). */
typedef struct {
	int head_dim;
	int rotary;  /* R: dims [0, R) are rotated */
	int neox;    /* pairs (i, i + R/2); else (2i, 2i + 1) */
	int across;  /* RMS over all heads of the token (span heads) */
	int weight;  /* a weight multiplies the normalized values */
	double eps;
} qk_math;

/* The float64 result for one token's HEADS heads of one tensor: x holds
 * them as [HEADS][D] bf16, w is NULL, [D] or [HEADS * D] (across), row is
 * the token's cos/sin table row [R]. pre gets the normalized values before
 * the rotation (the bound below needs them), out the result. */
static inline void qk_ref_token(double *out, double *pre, const uint16_t *x, int heads,
				const uint16_t *w, const float *row, const qk_math *m)
{
	const int D = m->head_dim, R = m->rotary;
	int h, i;

	for (h = 0; h < heads; h++) {
		int first = m->across ? 0 : h, last = m->across ? heads : h + 1, g;
		double ss = 0.0, factor;

		for (g = first; g < last; g++)
			for (i = 0; i < D; i++) {
				double v = qk_bf16_f(x[g * D + i]);

				ss += v * v;
			}
		factor = 1.0 / sqrt(ss / ((double)(last - first) * D) + m->eps);
		for (i = 0; i < D; i++) {
			double n = qk_bf16_f(x[h * D + i]) * factor;

			if (m->weight)
				n *= qk_bf16_f(w[(m->across ? h * D : 0) + i]);
			pre[h * D + i] = n;
			out[h * D + i] = n;
		}
		for (i = 0; i < R / 2; i++) {
			int i0 = m->neox ? i : 2 * i, i1 = m->neox ? i + R / 2 : 2 * i + 1;
			double c = row[i], s = row[R / 2 + i];
			double a = pre[h * D + i0], b = pre[h * D + i1];

			out[h * D + i0] = a * c - b * s;
			out[h * D + i1] = a * s + b * c;
		}
	}
}

/* The largest error the contract's roundings allow at value i of a head
 * (bf16's unit roundoff u = 2^-8 per rounding): n is rounded once, and
 * once more after the weight, so |n - pre| <= e |pre| with e = u or 2u; a
 * rotated output adds one rounding of itself and carries both inputs'
 * errors: e (|a| + |b|) + u |out| <= (e + u)(|a| + |b|). 1% on top covers
 * the fp32 sum and rsqrtf (about 2^-20 relative). */
static inline double qk_ref_bound(const double *pre, int i, const qk_math *m)
{
	const double u = 1.0 / 256.0, e = m->weight ? 2.0 * u : u;
	const int R = m->rotary;
	int i0, i1;

	if (i >= R)
		return 1.01 * e * fabs(pre[i]) + 1e-30;
	if (m->neox) {
		i0 = i < R / 2 ? i : i - R / 2;
		i1 = i0 + R / 2;
	} else {
		i0 = i & ~1;
		i1 = i0 + 1;
	}
	return 1.01 * (e + u) * (fabs(pre[i0]) + fabs(pre[i1])) + 1e-30;
}

#endif
