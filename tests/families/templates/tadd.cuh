// tadd.cuh - the test family's kernel: one thread per element; P (the
// struct jitk generates) holds mode and cols by name. Unsigned arithmetic
// wraps, so (x + y) + z computed in one or two kernels is the same bytes.
#pragma once

namespace jitk_test {

enum class Mode { add3, add2, acc };

template <class P>
__global__ void tadd(int *out, int *acc, const int *x, const int *y, const int *z,
		     long long rows, long long sx)
{
	const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= rows * P::cols)
		return;
	const long long r = i / P::cols, col = i % P::cols;
	if constexpr (P::mode == Mode::add3)
		out[i] = (int)((unsigned)x[r * sx + col] + (unsigned)y[i] + (unsigned)z[i]);
	else if constexpr (P::mode == Mode::add2)
		out[i] = (int)((unsigned)x[r * sx + col] + (unsigned)y[i]);
	else
		acc[i] = (int)((unsigned)acc[i] + (unsigned)z[i]);
}

} // namespace jitk_test
