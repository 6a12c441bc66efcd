/* compile.h - NVRTC, and the compiler object's internal interface (used by
 * the runtime, the CLI and the tests). */
#ifndef JITK_COMPILE_H
#define JITK_COMPILE_H

#include <pthread.h>

#include "build/cache.h"
#include "build/instance.h"
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
} jitk_compiled;

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

struct jitk_compiler {
	spec_set *specs;
	char **templates; /* per family: the template with includes inlined */
	jitk_cache *cache;
	jitk_logger log;
	int no_compile;
	int force_compile;
	char *dump_dir;
	int nvrtc_major, nvrtc_minor;
	int *archs; /* the SM numbers this NVRTC compiles for, ascending */
	size_t narchs;
	/* counters of this compiler (all symbols) */
	atomic_ullong compiles;
	atomic_ullong compile_us;
};


typedef struct {
	jitk_variant variant;
	jitk_cache_entry entry; /* image and lowered names */
	jitk_origin origin;
	double compile_ms; /* NVRTC time when compiled now */
	char key_hex[2 * JITK_HASH_SIZE + 1];
	char *log; /* NVRTC log when compiled now (warnings), else NULL */
	unsigned rejects; /* cache entries this build found bad (also on failure) */
} jitk_build;

/* Options of any version (1 to current) into the current layout. */
int jitk__compiler_options_read(jitk_compiler_options *o, const jitk_compiler_options *in);

/* Flags of jitk__build. */
#define JITK_BUILD_FORCE 1u     /* ignore cache hits (driver rejected one) */
#define JITK_BUILD_PTXAS_INFO 2u /* add --ptxas-options=-v; never cached */

/* Get the image of instance inst for arch: cache layers, else NVRTC (under
 * the per-key lock), then publish. Only an image that is code for the
 * target (jitk__image_problem) is published or returned: a cache hit that
 * is not is a reject (logged, evicted, compiled again). JITK_EARCH (reason
 * in the message) when a gate or constraint forbids it; JITK_EINVAL when
 * NVRTC has no such target; JITK_ECOMPILE (log in the detail);
 * JITK_ENOCOMPILE. */
int jitk__build(jitk_build *out, jitk_compiler *c, size_t inst, jitk_arch arch,
		unsigned flags);
void jitk__build_free(jitk_build *b);

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
