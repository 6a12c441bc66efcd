/* bench.h - what the families of jitk bench share (bench_util.c): the
 * checking macros, device memory, random bf16 data, the median, the copy
 * bandwidth, the L2 flush and the runtime they time on. Each family is one
 * file: bench.c (norm, and the command), bench_axes.c, bench_qk.c. */
#ifndef JITK_CLI_BENCH_H
#define JITK_CLI_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "jitk.h"

#define BENCH_DEVICE 0

/* A failed CUDA runtime or jitk call ends the bench, naming it. */
#define CK(call)                                                              \
	do {                                                                  \
		cudaError_t r_ = (call);                                      \
		if (r_ != cudaSuccess) {                                      \
			fprintf(stderr, "jitk bench: %s failed: %s (%s:%d)\n", #call, \
				cudaGetErrorName(r_), __FILE__, __LINE__);    \
			exit(1);                                              \
		}                                                             \
	} while (0)

#define JK(call)                                                              \
	do {                                                                  \
		int r_ = (call);                                              \
		if (r_ != JITK_OK) {                                          \
			fprintf(stderr, "jitk bench: %s: %s\n", #call,        \
				jitk_error_last()->message);                  \
			exit(1);                                              \
		}                                                             \
	} while (0)

/* Room for the option lists: row counts, hidden sizes. */
#define BENCH_MAX_ROWS 16
#define BENCH_MAX_HIDDEN 8

/* What the command line asked for; 0 counts and reps: the family's own
 * defaults. */
typedef struct {
	const char *specs;
	int rows[BENCH_MAX_ROWS], nrows;
	int hidden[BENCH_MAX_HIDDEN], nhidden;
	int heads[2], nheads;
	int reps;
	int skip_jit, fused_only, programmatic;
	const char *symbol; /* FAMILY: only the cases of this symbol (NULL: all) */
} bench_options;

/* The families: each prints its tables and returns the exit status (1
 * when there is no GPU; a failed call exits). */
int bench_norm(const bench_options *o);
int bench_axes(const bench_options *o);
int bench_qk(const bench_options *o);
/* A family of the specs, from the cases its bench key declares. */
int bench_spec(const bench_options *o, const char *family);

/* A runtime on BENCH_DEVICE over specs (NULL: the default), cudart made
 * current on the same device; without one, "jitk bench: needs a GPU: ..."
 * (or the error) on stderr and 1. jitk comes first: it opens the driver
 * and says clearly when there is none (cudart is not touched then); it
 * makes the primary context current, which cudart then uses. */
int bench_runtime_new(jitk_runtime **out, const char *specs, int programmatic);

/* Device memory as jitk takes it (jitk_devptr), from cudaMalloc. */
#define DPTR(d) ((void *)(uintptr_t)(d))
jitk_devptr bench_dalloc(size_t n);
void bench_dfree(jitk_devptr d);
void *bench_xcalloc(size_t n, size_t size);
/* rm -rf dir (a directory the bench made), a warning when it fails. */
void bench_remove_dir(const char *dir);

/* n bf16 of a near-normal distribution (sum of four uniforms) of that
 * mean and standard deviation, on the device; bench_rnd32 draws from the
 * same generator. */
jitk_devptr bench_random_bf16(size_t n, double mean, double sd);
uint32_t bench_rnd32(void);

/* The named arguments of one generic call, built one by one: each
 * family's bench describes its tensors (C-contiguous) and scalars by the
 * spec's names and calls the symbol through jitk_call, as any client of
 * the library does. A bench_args may be copied: bench_call points each
 * argument at its own tensor first. */
#define BENCH_MAX_ARGS 32
typedef struct {
	jitk_tensor t[BENCH_MAX_ARGS];
	jitk_arg a[BENCH_MAX_ARGS];
	size_t n;
} bench_args;
void bench_args_tensor(bench_args *c, const char *name, jitk_devptr p, jitk_dtype dtype,
		       int32_t ndim, const int64_t *shape);
void bench_args_i64(bench_args *c, const char *name, int64_t v);
void bench_args_f32(bench_args *c, const char *name, float v);
/* jitk_call of selector with c's arguments on stream s. */
int bench_call(jitk_call_info *info, jitk_runtime *rt, const char *selector, jitk_call_mode mode,
	       bench_args *c, cudaStream_t s);

/* Median microseconds of one run of fn(arg) on stream s over reps runs
 * after 3 warm-up runs, the L2 flushed (BENCH_FLUSH_READ) before each. */
double bench_time_us(void (*fn)(void *), void *arg, int reps, cudaStream_t s);

/* The median of v[0..n) (sorts v). */
float bench_median(float *v, int n);

/* Bytes read + written per second of a 2 GiB device-to-device copy, n
 * copies timed after warm ones: their median, or (best) the fastest. */
double bench_copy_bandwidth(int warm, int n, int best);

/* 256 MiB through the L2 on stream s, before a timed launch, so that the
 * kernel's inputs are not in the L2 and the GPU is busy while the host
 * enqueues the events and the launch (the interval is the kernel, not the
 * host's launch latency). BENCH_FLUSH_WRITE writes them (as Triton's
 * do_bench does): the L2 is left full of dirty lines, whose write-back the
 * timed kernel pays for as it allocates lines of its own (i: the byte
 * written); BENCH_FLUSH_READ reads them with a kernel that writes nothing:
 * the L2 is left holding clean lines, so the interval is the kernel's own
 * traffic. bench_flush_init is needed once (later calls do nothing). */
enum { BENCH_FLUSH_NONE, BENCH_FLUSH_WRITE, BENCH_FLUSH_READ };
void bench_flush_init(void);
void bench_flush_l2(int how, int i, cudaStream_t s);
void bench_flush_free(void);

#endif
