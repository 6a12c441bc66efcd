/* instance.h - one symbol instance specialized for one architecture:
 * gates, tuning, derived values, and the translation unit to compile. */
#ifndef JITK_INSTANCE_H
#define JITK_INSTANCE_H

#include "base/internal.h"
#include "spec/spec.h"

#define JITK_MAX_NAMES SPEC_MAX_NAMES /* the loader enforces it */

typedef struct {
	const char *name; /* borrowed from the spec */
	int64_t value;
} jitk_binding;

typedef struct {
	const spec_set *set;
	size_t inst;
	jitk_arch arch;   /* as requested */
	jitk_arch target; /* what NVRTC compiles for */
	int available;    /* gates and constraints hold */
	char reason[512]; /* why not, with the spec location */
	jitk_binding env[JITK_MAX_NAMES]; /* params, tuning keys, derived */
	size_t nenv;
} jitk_variant;

/* Decide and bind. JITK_OK whether or not a gate lets the variant exist
 * here (see ->available and ->reason: gates are the only reason for "not
 * available"). JITK_ESPEC when the spec cannot be specialized: a derived
 * value or constraint that cannot be evaluated (overflow, division by
 * zero, INT64_MIN / -1), a failed constraint, launch geometry out of range
 * (block 1..1024, shared_bytes 0..SPEC_MAX_SHARED_BYTES, pointer alignment
 * a power of two 1..4096), with "file:line:col: error: ... (instance on
 * arch)" in the message. */
int jitk__specialize(jitk_variant *out, const spec_set *set, size_t inst,
		     jitk_arch arch);

/* A TMA descriptor argument's constants in a variant, checked against
 * what cuTensorMapEncodeTiled accepts: box dimensions 1 to 256, element
 * strides 1 to 8, swizzle 0/32/64/128 bytes, interleave 0/16/32, L2
 * promotion 0/64/128/256; without interleave the box's inner dimension is
 * a multiple of 16 bytes and (with a swizzle) at most the swizzle span; a
 * 32-byte interleave wants the 32-byte swizzle. The tensor's order
 * (outermost first). JITK_ESPEC at the expression's line. */
typedef struct {
	unsigned rank;
	unsigned elem_bytes;
	int64_t box[SPEC_TMA_MAX_RANK];
	int64_t elem_strides[SPEC_TMA_MAX_RANK];
	int64_t swizzle, interleave, l2;
	int oob_nan;
	int batch; /* the descriptor has rank + 1 dimensions, the last (outermost) of one */
} jitk_tma_bound;
int jitk__tma_bind(jitk_tma_bound *out, const jitk_variant *v, const spec_arg *a);

/* Look a name up in the variant (expr_lookup_fn). */
int jitk__variant_lookup(void *variant, const char *name, int64_t *out);

/* "norm=layer residual=false ..." for messages; written into buf. */
const char *jitk__variant_params(const jitk_variant *v, char *buf, size_t n);


/* A family's template, read once per compiler. */
#define JITK_MAX_ANGLE 64
typedef struct {
	char *text; /* quoted includes inlined; package include lines blank */
	struct {
		char *name;  /* "cute/tensor.hpp" */
		char *where; /* "templates/x.cuh:3:10", for messages */
	} angle[JITK_MAX_ANGLE]; /* the package includes, in order, each once */
	size_t nangle;
} jitk_template;

/* Read a template and inline its "quoted" includes recursively (each file
 * once, #line markers with base names so that the text does not depend on
 * where the tree lives). With packages (the family names header packages)
 * an #include <name> is taken out of the text and recorded, for the
 * translation unit to include first; it is refused inside #if or after a
 * #define or #undef (moving it would change what it means), and its name
 * must be relative without "..". Without packages it is refused, as every
 * other way of reaching a file is: JITK_ESPEC at file:line:col. */
int jitk__template_load(jitk_template *out, const char *path, int packages);
void jitk__template_free(jitk_template *t);
/* jitk__template_load without packages: the text alone. */
int jitk__inline_template(char **out, const char *path);

/* Everything NVRTC gets. */
typedef struct {
	char *source;     /* the translation unit */
	char **options;   /* canonical NVRTC options */
	size_t noptions;
	char *name_expr;  /* the kernel's name expression */
	char *builder_expr; /* its parameter builder's (launch.builder), or NULL */
	/* Header packages (the compiler fills these in): the -I directories,
	 * in order, which are paths and so not in the key, and what is in the
	 * key instead - each package's name, tree hash and search directories
	 * relative to its root. NULL and 0 without packages. */
	char **includes;
	size_t nincludes;
	char *packages;
} jitk_tu;

/* tpl: the family's template (jitk__template_load): its package includes
 * come first, then its text. */
int jitk__tu_make(jitk_tu *out, const jitk_variant *v, const jitk_template *tpl);
void jitk__tu_free(jitk_tu *tu);

#endif
