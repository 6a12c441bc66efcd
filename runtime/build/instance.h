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

/* Look a name up in the variant (expr_lookup_fn). */
int jitk__variant_lookup(void *variant, const char *name, int64_t *out);

/* "norm=layer residual=false ..." for messages; written into buf. */
const char *jitk__variant_params(const jitk_variant *v, char *buf, size_t n);

/* Everything NVRTC gets. */
typedef struct {
	char *source;     /* the translation unit */
	char **options;   /* canonical NVRTC options */
	size_t noptions;
	char *name_expr;  /* the kernel's name expression */
} jitk_tu;

/* template_text: the family's template with its includes inlined (see
 * jitk__inline_template). */
int jitk__tu_make(jitk_tu *out, const jitk_variant *v, const char *template_text);
void jitk__tu_free(jitk_tu *tu);

/* Read a template and inline its "quoted" includes recursively (each file
 * once, #line markers with base names so that the text does not depend on
 * where the tree lives). <angle> includes are left to NVRTC. */
int jitk__inline_template(char **out, const char *path);

#endif
