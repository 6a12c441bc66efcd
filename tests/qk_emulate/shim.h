// shim.h - host emulation of the few CUDA constructs templates/
// qk_norm_rope.cuh uses, for tests/qk_emulate.sh: each CUDA thread of a
// block is a fiber (ucontext), run one block at a time; a shuffle or
// __syncthreads is a barrier of the whole block (every thread of these
// kernels reaches each in step, so this is exact). fp32 operations round
// as the GPU's: compile with -ffp-contract=off; rsqrtf is 1/sqrtf here
// (the GPU's is an approximation: fused and split still share it).
#pragma once
#include <ucontext.h>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <algorithm>
#include <vector>
using std::min; using std::max;
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
struct dim3u { unsigned x, y, z; };
extern dim3u threadIdx, blockIdx, gridDim, blockDim;
struct uint4 { unsigned x, y, z, w; };
struct uint2 { unsigned x, y; };
static inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }
static inline uint2 make_uint2(unsigned a, unsigned b) { return {a, b}; }
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline float __fmul_rn(float a, float b) { volatile float r = a * b; return r; }
static inline float __fadd_rn(float a, float b) { volatile float r = a + b; return r; }
static inline float __fdiv_rn(float a, float b) { volatile float r = a / b; return r; }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
void emu_barrier();
extern unsigned emu_slots[1024];
template <class V> V emu_shfl(V v, unsigned src)
{
	unsigned u; memcpy(&u, &v, 4);
	emu_slots[threadIdx.x] = u;
	emu_barrier();
	u = emu_slots[(threadIdx.x & ~31u) + (src & 31u)];
	emu_barrier();
	memcpy(&v, &u, 4);
	return v;
}
template <class V> V __shfl_xor_sync(unsigned, V v, int m) { return emu_shfl(v, (threadIdx.x % 32) ^ (unsigned)m); }
template <class V> V __shfl_sync(unsigned, V v, int src) { return emu_shfl(v, (unsigned)src); }
static inline void __syncthreads() { emu_barrier(); }
// A buffer vector loads and stores may touch; emu_access aborts on an
// access outside every registered buffer or not aligned to its size.
void emu_register(const void *p, size_t bytes);
void emu_unregister_all();
void emu_access(const void *p, size_t bytes);
// launch fn(args) over grid x block
void emu_launch(unsigned grid, unsigned block, void (*body)(void *), void *arg);
