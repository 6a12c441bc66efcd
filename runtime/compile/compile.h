/* compile.h - NVRTC, and the compiler object's internal interface (used by
 * the runtime, the CLI and the tests). */
#ifndef JITK_COMPILE_H
#define JITK_COMPILE_H

#include <pthread.h>

#include "store/cache.h"
#include "compile/instance.h"
#include "store/lease.h"
#include "compile/packages.h"
#include "store/remote.h"
#include "store/sign.h"
#include "store/tier.h"
#include "base/internal.h"
#include "spec/spec.h"

/* ----------------------------------------------------------------- NVRTC */

typedef struct {
	void *image; /* cubin, or NUL-terminated PTX */
	size_t size;
	int is_ptx;
	char **lowered; /* per name expression */
	size_t nlowered;
	char *log; /* NULL when NVRTC said nothing */
	double ms;
	double cpu_ms; /* this thread's CPU time (NVRTC compiles on the calling thread) */
	int pch; /* with -pch: JITK_PCH_* */
	size_t pch_heap_required; /* JITK_PCH_HEAP_EXHAUSTED: the heap it wanted */
} jitk_compiled;

enum { JITK_PCH_NONE, JITK_PCH_CREATED, JITK_PCH_HEAP_EXHAUSTED, JITK_PCH_FAILED };
/* Whether this NVRTC has precompiled headers (12.8+: the PCH calls). */
int jitk__nvrtc_pch_available(void);
/* Make NVRTC's PCH heap (one per process) at least at_least bytes: 0, or
 * -1 without PCH. Call with no compile running (it frees the old heap). */
int jitk__nvrtc_pch_heap(size_t at_least);

int jitk__nvrtc_version(int *major, int *minor);
/* The SM numbers NVRTC can compile for (nvrtcGetSupportedArchs); *out is
 * the caller's to free. */
int jitk__nvrtc_archs(int **out, size_t *n);
/* JITK_ECOMPILE with out->log set when the source does not compile. */
int jitk__nvrtc_compile(jitk_compiled *out, const char *source,
			const char *source_name, const char *const *options,
			size_t noptions, const char *const *exprs,
			size_t nexprs, int want_ptx);
void jitk__compiled_free(jitk_compiled *c);

/* -------------------------------------------------------------- compiler */

#define JITK_MAX_TIERS 4

/* What a family's compiles in one compiler (one process) showed of the
 * precompiled header (pch_mode -1), in CPU time: the PCH is never made
 * after a first compile (without one) of PCH_LONG_MS or more, stays on
 * while a compile that uses one takes under PCH_PAYS of that first one,
 * and never survives a compile it broke (compiler.c). */
typedef struct {
	atomic_uint compiles;
	atomic_ullong plain_us; /* the first compile without a PCH; 0: none yet */
	atomic_int off;         /* 1: no PCH for this family from now on */
} jitk_family_pch;

struct jitk_compiler {
	spec_set *specs;
	jitk_template *templates; /* per family: the template with includes inlined */
	jitk_packages *packages;  /* header packages, found and hashed on first use */
	jitk_cache *cache;   /* the writable cache (no root: none) */
	/* The storage tiers in lookup order (tier.h): the read-only layers,
	 * the writable cache, the remote; those that exist. */
	jitk_tier *tiers[JITK_MAX_TIERS];
	size_t ntiers;
	jitk_tier *layers; /* tiers[0] when there are layers, else NULL */
	jitk_remote *remote; /* NULL: none */
	jitk_lease *lease;   /* NULL: none */
	jitk_logger log;
	int no_compile;
	int force_compile;
	char *dump_dir;
	int nvrtc_major, nvrtc_minor;
	int *archs; /* the SM numbers this NVRTC compiles for, ascending */
	size_t narchs;
	/* NVRTC's automatic precompiled headers for families with header
	 * packages: -1 from a family's second compile in this compiler on
	 * while it pays (default), 0 never, 1 from the first ($JITK_PCH) */
	int pch_mode;
	jitk_family_pch *fam_pch; /* per family */
	pthread_mutex_t pch_mu;
	char *pch_dir; /* v1/pch/<pid>.<n> of the writable cache, made on first use */
	/* counters of this compiler (all symbols) */
	atomic_ullong compiles;
	atomic_ullong compile_us;
	/* the jitk_seal_mode of the runtime that owns this compiler (OFF for
	 * a compiler of its own): every build of it obeys the seal */
	atomic_int seal;
	/* provenance (sign.h) */
	jitk_signer *signer; /* NULL: what is published is not signed */
	jitk_trust *trust;   /* NULL: nothing is checked */
	atomic_ullong signed_entries;
};


typedef struct {
	jitk_variant variant;
	jitk_cache_entry entry; /* image and lowered names */
	jitk_origin origin;
	double compile_ms; /* NVRTC time when compiled now */
	char key_hex[2 * JITK_HASH_SIZE + 1];
	char *log; /* NVRTC log when compiled now (warnings), else NULL */
	unsigned rejects; /* local entries this build found bad (also on failure) */
} jitk_build;

/* Options of any version (1 to current) into the current layout. */
int jitk__compiler_options_read(jitk_compiler_options *o, const jitk_compiler_options *in);

/* Flags of jitk__build. */
#define JITK_BUILD_FORCE 1u     /* ignore cache hits (driver rejected one) */
#define JITK_BUILD_PTXAS_INFO 2u /* add --ptxas-options=-v; never cached */
/* A sealed runtime (jitk_runtime_seal): a miss that would compile is
 * logged with symbol, instance, arch and key (WARN) or refused with
 * JITK_ENOCOMPILE (ERROR). */
#define JITK_BUILD_SEAL_WARN 4u
#define JITK_BUILD_SEAL_ERROR 8u
/* Why c may not compile a build with these flags now (JITK_NO_COMPILE,
 * or the seal, c's own included), or NULL when it may. */
const char *jitk__compile_refused(const jitk_compiler *c, unsigned flags);

/* Get the image of instance inst for arch: its key, made once, asked of
 * each tier in turn (tier.h: the read-only layers, the writable cache and,
 * after the cache's per-key lock, the remote), else NVRTC (after taking or
 * waiting for the key's lease, when there is a lease server), then put
 * into every tier that takes it. A remote object is verified as a local
 * entry is and published into the writable cache; nothing the remote does
 * fails a build. Only an image that is code for the
 * target (jitk__image_problem) is published or returned: a cache hit that
 * is not is a reject (logged, evicted, compiled again). JITK_EARCH (reason
 * in the message) when a gate or constraint forbids it; JITK_EINVAL when
 * NVRTC has no such target; JITK_ECOMPILE (log in the detail);
 * JITK_ENOCOMPILE. */
int jitk__build(jitk_build *out, jitk_compiler *c, size_t inst, jitk_arch arch,
		unsigned flags);
void jitk__build_free(jitk_build *b);

/* ------------------------------------------------- what runs on a GPU */

/* The targets whose images can run on a GPU of compute capability cc, in
 * the order a lookup tries them, among those this NVRTC compiles for:
 * the exact one (sm_CC, then sm_CCa: an arch-specific image runs on its
 * own SM), the family targets of its major version (sm_NNf
 * with NN <= CC and NN / 10 == CC / 10, nearest first: an 'f' image runs
 * on its family's later minors), then PTX (compute_NN for NN <= CC,
 * nearest first: the driver compiles PTX for any newer GPU). At most max
 * are written; returns how many. */
typedef enum { JITK_RUN_EXACT = 0, JITK_RUN_FAMILY = 1, JITK_RUN_PTX = 2 } jitk_run_kind;
#define JITK_MAX_RUN_TARGETS 64
size_t jitk__run_targets(jitk_arch *out, jitk_run_kind *kinds, size_t max,
			 const jitk_compiler *c, int cc);

/* What looking one target up found (jitk__lookup_run). */
typedef enum {
	JITK_PROBE_HIT = 0,      /* cached and usable: this image runs */
	JITK_PROBE_MISSING = 1,  /* not in the cache */
	JITK_PROBE_REJECTED = 2, /* in the cache but it failed verification */
	JITK_PROBE_GATED = 3,    /* a gate forbids the instance on this target */
	JITK_PROBE_FOREIGN = 4,  /* the tuning asks for sm_NNa, which runs on sm_NN only */
	JITK_PROBE_NO_TARGET = 5 /* the tuning asks for a target NVRTC does not have */
} jitk_probe_state;

typedef struct {
	jitk_arch asked;  /* the target tried */
	jitk_arch target; /* what it compiles as (sm_100 -> sm_100a by arch_specific) */
	jitk_run_kind kind;
	jitk_probe_state state;
	int origin; /* on a hit: JITK_ORIGIN_CACHE or JITK_ORIGIN_LAYER */
	uint8_t key[JITK_HASH_SIZE];
	char key_hex[2 * JITK_HASH_SIZE + 1];
} jitk_run_probe;

/* Look instance inst up for a GPU of compute capability cc, in the cache
 * only (nothing compiles): each target of jitk__run_targets in turn; the
 * first usable hit fills *b (b->variant is specialized for the target that
 * hit: its tuning is what the image was built with). JITK_OK on a hit;
 * JITK_ENOENT when no target is cached (or force_compile ignores the
 * cache); JITK_EARCH when a gate forbids the instance on cc itself;
 * JITK_ESPEC. probes (NULL allowed) gets what each target tried found,
 * *nprobes how many (at most JITK_MAX_RUN_TARGETS). b->rejects counts
 * entries that failed verification. */
int jitk__lookup_run(jitk_build *b, jitk_compiler *c, size_t inst, int cc,
		     jitk_run_probe *probes, size_t *nprobes);
/* The image a runtime on a GPU of compute capability cc loads for inst:
 * jitk__lookup_run (not with JITK_BUILD_FORCE), else jitk__build for arch
 * (the runtime's target), with the key the lookup made for arch. */
int jitk__resolve_image(jitk_build *b, jitk_compiler *c, size_t inst, int cc, jitk_arch arch,
			unsigned flags);
/* The tier that serves origin (a jitk_origin), or NULL. */
jitk_tier *jitk__compiler_tier(const jitk_compiler *c, int origin);

/* ----------------------------------------------------------- manifests */

/* The longest manifest line, newline included. */
#define JITK_MANIFEST_LINE_MAX 1024
/* The manifest line of instance on arch, "INSTANCE ARCH\n", into buf: its
 * length, or -1 when it does not fit. One definition of the format for the
 * writer (the runtime) and the reader (jitk_manifest_read). */
int jitk__manifest_line(char *buf, size_t n, const char *instance, const char *arch);

/* The translation unit, options and key of instance inst for arch, as the
 * build would make them (for jitk source and the tests). */
int jitk__prepare(jitk_tu *tu, uint8_t key[JITK_HASH_SIZE], jitk_variant *v,
		  jitk_compiler *c, size_t inst, jitk_arch arch);

/* JITK_EINVAL naming a and listing the targets this NVRTC supports when
 * it cannot compile for a (sm_99, sm_89a, sm_90f...). */
int jitk__check_target(const jitk_compiler *c, jitk_arch a);

/* The cache key of a translation unit. */
int jitk__cache_key(uint8_t key[JITK_HASH_SIZE], const jitk_compiler *c,
		    const jitk_tu *tu, const char *target);

#endif
