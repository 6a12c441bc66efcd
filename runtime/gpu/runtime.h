/* runtime.h - the runtime object's insides, shared by runtime.c (symbol
 * table, resolve) and call.c (the generic checked call). */
#ifndef JITK_RUNTIME_H
#define JITK_RUNTIME_H

#include <pthread.h>
#include <stdatomic.h>

#include "compile/compile.h"
#include "gpu/device.h"

/* Slots of a call's integer environment: the family's arguments (scalars
 * by value), then its dims. */
#define JITK_MAX_SLOTS (JITK_MAX_SPEC_ARGS + 16)

/* One tensor argument of a resolved kernel: its shape and strides bound
 * to the variant (constants folded, names turned into slots), and which
 * slot each dimension or stride sets when it is a bare name. */
enum { RULE_EXPR = 0, RULE_CONST = 1 };

typedef struct {
	expr *shape[JITK_MAX_DIMS];
	expr *strides[JITK_MAX_DIMS]; /* NULL when contiguous */
	signed char shape_slot[JITK_MAX_DIMS];   /* slot a dim binds, or -1 */
	signed char stride_slot[JITK_MAX_DIMS];  /* slot a stride binds, or -1 */
	/* RULE_CONST: a constant of the variant (shape_value); else
	 * evaluated per call, a bare slot read directly */
	signed char shape_kind[JITK_MAX_DIMS], stride_kind[JITK_MAX_DIMS];
	int64_t shape_value[JITK_MAX_DIMS], stride_value[JITK_MAX_DIMS];
	int64_t align;
} jitk_tensor_rule;

/* TMA descriptor arguments a family may have (each 128 bytes of the
 * kernel's parameters). */
#define JITK_MAX_TMA 4

struct jitk_kernel {
	jitk_runtime *rt;
	size_t inst;
	const spec_family *fam;
	void *lib;
	void *fn;         /* the CUkernel */
	void *fn_primary; /* its CUfunction in the primary context, or NULL */
	jitk_variant variant;
	/* Per family argument: taken by this instance, and its tensor rule. */
	unsigned char present[JITK_MAX_SPEC_ARGS];
	jitk_tensor_rule tensors[JITK_MAX_SPEC_ARGS];
	/* TMA descriptor arguments: the variant's box, swizzle ... */
	jitk_tma_bound tma[JITK_MAX_SPEC_ARGS];
	size_t ntma;
	/* Launch geometry and checks with names bound to slots. */
	expr *grid;
	expr **checks;
	size_t nchecks;
	unsigned block;
	unsigned smem;
	int programmatic; /* launch with programmatic dependent launch */
	/* launch.builder: its kernel, and the blocks it made (built.c) */
	void *builder_fn, *builder_primary;
	struct jitk_built_set *built;
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
	unsigned manifest_gen; /* the manifest generation that holds it (under rt->manifest_mu) */
} jitk_slot;

/* A selector bound to the runtime (jitk_op): the symbol, the instances it
 * selects, and for each varying parameter where a tensor's shape tells
 * its value. */
struct jitk_op {
	jitk_runtime *rt;
	const spec_symbol *sym;
	unsigned char *match; /* per instance of sym: selected (NULL: all) */
	char *selector;
	jitk_op *next; /* ops made for selectors, in a list */
};

/* A tensor validated by jitk_configure. */
typedef struct {
	jitk_devptr data;
	uint64_t buffer_id;
	enum spec_rule rule;
} jitk_configured;

/* A stream's scratch for one family: device memory of its own, zeroed
 * when made. */
typedef struct {
	void *stream;
	uint64_t thread; /* the per-thread default stream: whose (else 0) */
	const void *family; /* its spec_family */
	uint64_t ptr;
	size_t bytes;
} jitk_scratch;

struct jitk_runtime {
	uint64_t id; /* never reused in a process (the call memo's key) */
	jitk_compiler *comp;
	const jitk_device_ops *ops;
	void *impl;
	int device; /* the CUDA device ordinal (jitk_runtime_options.device) */
	jitk_device_info info;
	jitk_arch arch; /* what kernels are built for */
	char arch_str[JITK_ARCH_STRLEN];
	jitk_capture_policy capture;
	int programmatic; /* jitk_runtime_options.programmatic */
	jitk_slot *slots; /* one per instance */
	size_t nslots;
	jitk_op *sym_ops; /* one per symbol: the bare-name selector */
	jitk_op *extra_ops; /* ops for other selectors */
	pthread_mutex_t ops_mu;
	/* jitk_configure's table: grows; read under the read lock. */
	jitk_configured *configured;
	size_t nconfigured, capconfigured;
	pthread_rwlock_t configured_mu;
	/* The manifest (jitk_runtime_manifest): an O_APPEND descriptor and
	 * its generation (each new file starts one, so that every resolved
	 * instance is written to it once); under manifest_mu. */
	pthread_mutex_t manifest_mu;
	int manifest_fd;
	char *manifest_path;
	int manifest_failed; /* a write failed: warned once */
	unsigned manifest_gen;
	/* Scratch (jitk__scratch): one per stream and family, under scratch_mu; a
	 * smaller one replaced is kept in retired until the runtime goes. */
	pthread_mutex_t scratch_mu;
	jitk_scratch *scratch;
	size_t nscratch, capscratch;
	uint64_t *retired;
	size_t nretired, capretired;
};

/* A parameter block a builder made (built.c): its bytes, the launch
 * geometry, and where a call's addresses and descriptors go. */
enum { BUILT_ADDRESS = 0, BUILT_TMA = 1 };
typedef struct {
	uint32_t at;          /* byte offset in the block */
	unsigned char kind;   /* BUILT_ADDRESS: 8 bytes; BUILT_TMA: 128 */
	unsigned char arg;    /* the family's argument */
	unsigned char index;  /* BUILT_TMA: which of the call's descriptors */
	int64_t addend;       /* BUILT_ADDRESS: the address plus this */
} jitk_built_patch;

typedef struct {
	unsigned char *bytes;
	size_t size;
	unsigned grid[3], block[3], cluster[3], shared_bytes;
	jitk_built_patch *patches;
	size_t npatches;
} jitk_built_block;

typedef struct jitk_built_set jitk_built_set;
int jitk__built_set_new(jitk_built_set **out);
void jitk__built_set_free(jitk_built_set *s);
/* Launch k with the block its builder makes for these parameters (one
 * value per family argument) and descriptors (ntma, for the arguments
 * tma_arg[i]); the builder runs on the first call with new scalars. */
int jitk__built_launch(jitk_kernel *k, const uint64_t *params, size_t ntma,
		       const unsigned char *tma_arg, const unsigned char (*tma)[128],
		       jitk_stream stream);
/* What three builder runs (runs: 3 x run_bytes, each a jitk_params_out)
 * show, made with the address markers marks[0] (runs 0, 1; 0: no
 * address) and marks[1] (run 2), and TMA patterns (the descriptor of
 * argument pattern_arg[t] in every run): the block and its patches, or
 * JITK_EINVAL with why. */
int jitk__built_analyze(jitk_built_block *out, const unsigned char *runs, size_t run_bytes,
			const uint64_t marks[2][JITK_MAX_SPEC_ARGS], size_t nargs,
			const unsigned char (*patterns)[128], const unsigned char *pattern_arg,
			size_t npatterns, char *why, size_t nwhy);
void jitk__built_apply(const jitk_built_block *b, unsigned char *dst, const uint64_t *params,
		       const unsigned char (*tma)[128]);
void jitk__built_block_free(jitk_built_block *b);

/* A call's jitk_call_info (NULL allowed): JITK_EINVAL for a version
 * that is not 1 to JITK_CALL_INFO_VERSION, else its fields cleared
 * (call.c). */
int jitk__call_info_clear(jitk_call_info *out);

/* *ptr: scratch memory (io: scratch) of at least bytes for family's
 * work on stream, every byte 0 when it was made. The family's kernels
 * leave what they rely on as they found it, so its launches on one
 * stream (ordered) share it; each stream and each family has its own.
 * symbol and arg name it in an error. */
int jitk__scratch(jitk_runtime *rt, jitk_stream stream, const void *family, size_t bytes,
		  const char *symbol, const char *arg, uint64_t *ptr);
/* Resolve instance inst. check_capture: consult stream's capture state
 * for the capture policy. */
int jitk__resolve(jitk_kernel **out, jitk_runtime *rt, size_t inst,
		  int check_capture, jitk_stream stream);
/* Why instance inst cannot run here (its slot's reason), or NULL. */
const char *jitk__unavailable_reason(jitk_runtime *rt, size_t inst);
/* A fresh value for jitk_runtime.id. */
uint64_t jitk__runtime_id(void);
void jitk__ops_free(jitk_runtime *rt);

#endif
