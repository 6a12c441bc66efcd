/* expr.h - integer expressions of the spec format ("cols / vec_elems",
 * "cdiv(rows, rows_per_block)", "threads % 32 == 0"). */
#ifndef JITK_EXPR_H
#define JITK_EXPR_H

#include <stddef.h>
#include <stdint.h>

typedef struct expr expr;

/* Parse text into *out. On error returns -1, writes a message and the
 * 0-based byte offset of the problem. */
int jitk__expr_parse(expr **out, const char *text, char *err, size_t err_size,
	       int *err_pos);
void jitk__expr_free(expr *e);

/* Name lookup: 0 and *out set when known, -1 when not. */
typedef int (*expr_lookup_fn)(void *ctx, const char *name, int64_t *out);

/* Evaluate in 64-bit signed arithmetic; overflow, division by zero and
 * unknown names are errors (-1 with a message). Comparisons give 0 or 1. */
int jitk__expr_eval(const expr *e, expr_lookup_fn lookup, void *ctx, int64_t *out,
	      char *err, size_t err_size);

/* Call fn for every name the expression uses (0-based offset in the text);
 * stops at and returns the first non-zero result. */
int jitk__expr_visit_names(const expr *e, int (*fn)(void *ctx, const char *name,
					       int pos),
		     void *ctx);

/* Copy e with every name resolved once: resolve sets *value (a constant)
 * and returns 0, or sets *arg (an index into the args of
 * expr_eval_args) and returns 1, or returns -1 (unknown name). */
typedef int (*expr_resolve_fn)(void *ctx, const char *name, int64_t *value,
			       int *arg);
int jitk__expr_bind(expr **out, const expr *e, expr_resolve_fn resolve, void *ctx);
/* Binding folds what the constants decide: 1 and *value set when e is
 * now a constant, else 0. */
int jitk__expr_constant(const expr *e, int64_t *value);
/* Evaluate a bound expression; no name lookups. -1 on overflow, -2 on
 * division by zero (also % and cdiv). */
int jitk__expr_eval_args(const expr *e, const int64_t *args, int64_t *out);

#endif
