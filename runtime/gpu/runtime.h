/* runtime.h - the runtime object's insides, shared by runtime.c (symbol
 * table, resolve, generic launch) and launch.c (typed entry points). */
#ifndef JITK_RUNTIME_H
#define JITK_RUNTIME_H

#include <pthread.h>
#include <stdatomic.h>

#include "build/compile.h"
#include "gpu/device.h"

#define JITK_MAX_ARGS 32
#define JITK_MAX_CHECKS 8
#define JITK_MAX_SCALES 1024

struct jitk_kernel {
	jitk_runtime *rt;
	size_t inst;
	const spec_family *fam;
	void *lib;
	void *fn;
	jitk_variant variant;
	/* The symbol's arguments: family argument indices, in order. */
	size_t nargs;
	unsigned char argi[JITK_MAX_ARGS];
	/* Per family argument: present in this symbol, required alignment
	 * (pointers; 0 otherwise), nullable. */
	unsigned char present[JITK_MAX_ARGS];
	int64_t align[JITK_MAX_ARGS];
	unsigned char nullable[JITK_MAX_ARGS];
	/* Launch geometry with names bound (integer arguments by family
	 * index). */
	expr *grid;
	expr *checks[JITK_MAX_CHECKS];
	const spec_expr *check_src[JITK_MAX_CHECKS];
	size_t nchecks;
	unsigned block;
	unsigned smem;
	int programmatic; /* launch with programmatic dependent launch */
	char key_hex[2 * JITK_HASH_SIZE + 1];
	const char *lowered; /* owned by entry */
	jitk_cache_entry entry;
};

enum { SLOT_EMPTY = 0, SLOT_UNAVAILABLE = 2 };

typedef struct {
	_Atomic(jitk_kernel *) kernel; /* set once, read without a lock */
	atomic_int state;
	pthread_mutex_t mu;
	char *reason; /* when unavailable; written once under mu */
	atomic_ullong compiles, cache_hits, cache_misses, cache_rejects, loads,
		load_failures, launches, compile_us, load_us;
} jitk_slot;

/* Instances of one typed symbol by hidden size (as many as the specs
 * have). */
typedef struct {
	size_t n;
	int64_t *hidden;
	size_t *inst;
} jitk_typed;

enum {
	TYPED_NORM, TYPED_RESIDUAL, TYPED_NORM_FP8, TYPED_RESIDUAL_FP8,
	TYPED_QUANT, TYPED_COUNT
};

struct jitk_runtime {
	jitk_compiler *comp;
	const jitk_device_ops *ops;
	void *impl;
	jitk_device_info info;
	jitk_arch arch; /* what kernels are built for */
	char arch_str[JITK_ARCH_STRLEN];
	jitk_capture_policy capture;
	int programmatic; /* jitk_runtime_options.programmatic */
	jitk_slot *slots; /* one per instance */
	size_t nslots;
	jitk_typed typed[TYPED_COUNT];
	const spec_family *norm_fam, *quant_fam; /* of the typed symbols, or NULL */
	/* Family argument indices of the norm family, by role. */
	int norm_arg[11];
	int quant_arg[4];
	/* input_scale pointers validated by jitk_configure_input_scale:
	 * append-only, read without a lock. */
	_Atomic(jitk_devptr) scales[JITK_MAX_SCALES];
	atomic_size_t nscales;
	pthread_mutex_t scales_mu;
};

/* Resolve instance inst (see jitk_kernel_get). stream: when not NULL_OK,
 * the stream whose capture state decides the capture policy. */
int jitk__resolve(jitk_kernel **out, jitk_runtime *rt, size_t inst,
		  int check_capture, jitk_stream stream);
/* Launch with one value per family argument (absent ones ignored):
 * pointer/alignment checks, launch checks, grid, cuLaunchKernel. */
int jitk__launch_values(jitk_kernel *k, const uint64_t *values,
			jitk_stream stream);
/* Why instance inst cannot run here (its slot's reason), or NULL. */
const char *jitk__unavailable_reason(jitk_runtime *rt, size_t inst);
/* The typed entry points' tables (launch.c); jitk__typed_free(rt) after
 * a failed init too. */
int jitk__typed_init(jitk_runtime *rt);
void jitk__typed_free(jitk_runtime *rt);
/* JITK_ESPEC naming the family when a jitk_kernel cannot hold its
 * arguments or launch checks. */
int jitk__family_fits(const spec_family *f);

#endif
