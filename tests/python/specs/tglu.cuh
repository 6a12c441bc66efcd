// tglu.cuh - the Python tests' family: one thread per output element.
#pragma once

namespace jitk_test {

template <class P>
__global__ void tglu(int *y, const int *x, long long rows)
{
	const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= rows * P::hidden)
		return;
	const long long r = i / P::hidden, c = i % P::hidden;
	y[i] = (int)((unsigned)x[r * 2 * P::hidden + c] + (unsigned)x[r * 2 * P::hidden + P::hidden + c]);
}

} // namespace jitk_test
