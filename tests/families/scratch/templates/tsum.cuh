// tsum.cuh - the scratch test family's kernel (specs/tsum.yaml). Blocks
// are numbered part-major, so every block of part p is dispatched before
// any of part p + 1, and a block only waits for an earlier part: no wait
// can hold up what it waits for.
#pragma once

namespace jitk_test {

template <class P>
__global__ void tsum(int *out, const int *x, int *work, long long rows, long long cols)
{
	const long long chunks = (cols + P::threads - 1) / P::threads;
	const long long part = blockIdx.x / chunks;
	const long long c = (blockIdx.x % chunks) * P::threads + threadIdx.x;
	if (c >= cols)
		return;
	const long long r0 = rows * part / P::parts, r1 = rows * (part + 1) / P::parts;
	unsigned s = 0;
	for (long long r = r0; r < r1; r++)
		s += (unsigned)x[r * cols + c];
	if constexpr (P::parts == 1) {
		out[c] = (int)s;
	} else {
		// column c's flag and sum side by side: flags always at even
		// words, whatever cols a launch before had (its sums are at odd
		// ones), so no launch reads another's sum as a flag
		volatile unsigned *flag = reinterpret_cast<unsigned *>(work) + 2 * c;
		unsigned *sum = reinterpret_cast<unsigned *>(work) + 2 * c + 1;
		if (part > 0) {
			while (*flag != (unsigned)part)
				;
			__threadfence();
			s += *(volatile unsigned *)sum;
		}
		if (part == P::parts - 1) {
			out[c] = (int)s;
			*flag = 0; // as the launch found it
		} else {
			*(volatile unsigned *)sum = s;
			__threadfence();
			*flag = (unsigned)part + 1;
		}
	}
}

} // namespace jitk_test
