/* instance.c - specialization: which variant runs on an architecture, with
 * which tuning, and the exact translation unit NVRTC compiles for it. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile/instance.h"

static int arch_in(const spec_arch_range *r, int cc)
{
	return (!r->min || cc >= r->min) && (!r->max || cc <= r->max);
}

static void range_text(char *buf, size_t n, const spec_arch_range *r)
{
	if (r->min && r->max)
		snprintf(buf, n, "sm_%d to sm_%d", r->min, r->max);
	else if (r->min)
		snprintf(buf, n, "sm_%d or newer", r->min);
	else
		snprintf(buf, n, "sm_%d or older", r->max);
}

static int bind(jitk_variant *v, const char *name, int64_t value)
{
	size_t i;

	for (i = 0; i < v->nenv; i++)
		if (!strcmp(v->env[i].name, name)) {
			v->env[i].value = value;
			return 0;
		}
	if (v->nenv == JITK_MAX_NAMES)
		return -1;
	v->env[v->nenv].name = name;
	v->env[v->nenv].value = value;
	v->nenv++;
	return 0;
}

int jitk__variant_lookup(void *variant, const char *name, int64_t *out)
{
	const jitk_variant *v = variant;
	size_t i;

	for (i = 0; i < v->nenv; i++)
		if (!strcmp(v->env[i].name, name)) {
			*out = v->env[i].value;
			return 0;
		}
	return -1;
}

static void unavailable(jitk_variant *v, const spec_loc *loc, const char *fmt,
			...) JITK_PRINTF(3, 4);

/* A gate forbids the variant: the reason is spec text (a block scalar may
 * hold newlines), kept one printable line. */
static void unavailable(jitk_variant *v, const spec_loc *loc, const char *fmt,
			...)
{
	jbuf raw, out;
	va_list ap;

	v->available = 0;
	jitk__jbuf_init(&raw);
	jitk__jbuf_init(&out);
	va_start(ap, fmt);
	jitk__jbuf_vprintf(&raw, fmt, ap);
	va_end(ap);
	if (loc)
		jitk__jbuf_printf(&raw, " [%s:%d:%d]", loc->file, loc->line, loc->col);
	jitk__spec_escape(&out, raw.data ? raw.data : "out of memory");
	snprintf(v->reason, sizeof(v->reason), "%s", out.data ? out.data : "out of memory");
	jitk__jbuf_free(&raw);
	jitk__jbuf_free(&out);
}

static int spec_fail(const jitk_variant *v, const spec_loc *loc, const char *fmt,
		     ...) JITK_PRINTF(3, 4);

/* The spec cannot be specialized for this instance and architecture: an
 * error (JITK_ESPEC) at loc, naming both - never a gate. */
static int spec_fail(const jitk_variant *v, const spec_loc *loc, const char *fmt,
		     ...)
{
	char arch[JITK_ARCH_STRLEN];
	jbuf msg;
	va_list ap;
	int rc;

	jitk__arch_format(arch, v->arch);
	jitk__jbuf_init(&msg);
	va_start(ap, fmt);
	jitk__jbuf_vprintf(&msg, fmt, ap);
	va_end(ap);
	rc = msg.oom ? jitk__error(JITK_ENOMEM, "out of memory")
		     : jitk__spec_error(JITK_ESPEC, NULL, "%s:%d:%d: error: %s (%s on %s)",
					loc->file, loc->line, loc->col, msg.data,
					v->set->insts[v->inst].name, arch);
	jitk__jbuf_free(&msg);
	return rc;
}

static int check_gates(jitk_variant *v, const spec_gate *g, size_t n,
		       const int64_t *vals)
{
	size_t i;

	for (i = 0; i < n; i++) {
		char range[64];

		if (!jitk__spec_cond_holds(&g[i].when, vals) || arch_in(&g[i].arch, v->arch.cc))
			continue;
		range_text(range, sizeof(range), &g[i].arch);
		unavailable(v, &g[i].loc, "needs %s: %s", range, g[i].reason);
		return 1;
	}
	return 0;
}

/* Where the family first sets tuning key key (every key is set somewhere). */
static const spec_loc *tuning_key_loc(const spec_family *f, const char *key)
{
	size_t i, j;

	for (i = 0; i < f->ntuning; i++)
		for (j = 0; j < f->tuning[i].n; j++)
			if (!strcmp(f->tuning[i].kv[j].key, key))
				return &f->tuning[i].kv[j].loc;
	return &f->loc;
}

/* Evaluate a spec expression in the variant; an error names it. */
static int eval_expr(const jitk_variant *v, const spec_expr *x, const char *what,
		     int64_t *out)
{
	char err[160];

	if (!jitk__expr_eval(x->e, jitk__variant_lookup, (void *)v, out, err, sizeof(err)))
		return 0;
	return spec_fail(v, &x->loc, "%s '%s' cannot be evaluated: %s", what,
			 jitk__spec_quote(x->text), err);
}

/* The launch geometry that depends only on the variant, checked here so
 * that explain and precompile catch it, not only a launch on the GPU. */
static int check_geometry(const jitk_variant *v, const spec_family *f)
{
	int64_t val;
	size_t i;
	int rc;

	if ((rc = eval_expr(v, &f->block, "launch.block", &val)))
		return rc;
	if (val < 1 || val > SPEC_MAX_BLOCK)
		return spec_fail(v, &f->block.loc,
				 "launch.block '%s' is %lld; it must be 1 to %d",
				 jitk__spec_quote(f->block.text), (long long)val, SPEC_MAX_BLOCK);
	if (f->smem.e) {
		if ((rc = eval_expr(v, &f->smem, "launch.shared_bytes", &val)))
			return rc;
		if (val < 0 || val > SPEC_MAX_SHARED_BYTES)
			return spec_fail(v, &f->smem.loc,
					 "launch.shared_bytes '%s' is %lld; it must be 0 to %d",
					 jitk__spec_quote(f->smem.text), (long long)val,
					 SPEC_MAX_SHARED_BYTES);
	}
	for (i = 0; i < f->nargs; i++) {
		const spec_arg *a = &f->args[i];
		jitk_tma_bound tb;

		if (a->type == AT_TMA &&
		    jitk__spec_cond_holds(&a->when, v->set->insts[v->inst].vals) &&
		    (rc = jitk__tma_bind(&tb, v, a)))
			return rc;
		if (a->type != AT_TENSOR || !a->align.e)
			continue;
		if ((rc = eval_expr(v, &a->align, "alignment", &val)))
			return rc;
		if (val < 1 || val > SPEC_MAX_ALIGN || (val & (val - 1)))
			return spec_fail(v, &a->align.loc,
					 "alignment '%s' of argument %s is %lld; it must be a power "
					 "of two from 1 to %d",
					 jitk__spec_quote(a->align.text), a->name, (long long)val,
					 SPEC_MAX_ALIGN);
	}
	return 0;
}

static int tma_one_of(const jitk_variant *v, const spec_expr *x, const char *what,
		      const int64_t *allowed, size_t n, const char *list, int64_t *out)
{
	size_t i;
	int rc;

	if ((rc = eval_expr(v, x, what, out)))
		return rc;
	for (i = 0; i < n; i++)
		if (*out == allowed[i])
			return 0;
	return spec_fail(v, &x->loc, "%s '%s' is %lld; it must be %s", what,
			 jitk__spec_quote(x->text), (long long)*out, list);
}

int jitk__tma_bind(jitk_tma_bound *out, const jitk_variant *v, const spec_arg *a)
{
	static const int64_t swizzles[] = { 0, 32, 64, 128 }, interleaves[] = { 0, 16, 32 },
			     l2s[] = { 0, 64, 128, 256 };
	const spec_tma *t = a->tma;
	const spec_family *f = v->set->insts[v->inst].sym->fam;
	const spec_arg *x = &f->args[t->tensor_arg];
	int64_t inner;
	size_t d;
	int rc;

	memset(out, 0, sizeof(*out));
	out->rank = (unsigned)t->nbox;
	out->elem_bytes = x->elem->bits / 8;
	out->oob_nan = t->oob_nan;
	out->batch = t->batch;
	for (d = 0; d < t->nbox; d++) {
		if ((rc = eval_expr(v, &t->box[d], "TMA box dimension", &out->box[d])))
			return rc;
		if (out->box[d] < 1 || out->box[d] > 256)
			return spec_fail(v, &t->box[d].loc, "box dimension '%s' of %s is %lld; TMA "
					 "takes 1 to 256", jitk__spec_quote(t->box[d].text), a->name,
					 (long long)out->box[d]);
		out->elem_strides[d] = 1;
		if (!t->elem_strides)
			continue;
		if ((rc = eval_expr(v, &t->elem_strides[d], "TMA element stride",
				    &out->elem_strides[d])))
			return rc;
		if (out->elem_strides[d] < 1 || out->elem_strides[d] > 8)
			return spec_fail(v, &t->elem_strides[d].loc, "element stride '%s' of %s is %lld; "
					 "TMA takes 1 to 8", jitk__spec_quote(t->elem_strides[d].text),
					 a->name, (long long)out->elem_strides[d]);
	}
	if ((rc = tma_one_of(v, &t->swizzle, "swizzle", swizzles, 4, "0, 32, 64 or 128 (bytes)",
			     &out->swizzle)) ||
	    (rc = tma_one_of(v, &t->interleave, "interleave", interleaves, 3, "0, 16 or 32 (bytes)",
			     &out->interleave)) ||
	    (rc = tma_one_of(v, &t->l2, "l2_promotion", l2s, 4, "0, 64, 128 or 256 (bytes)",
			     &out->l2)))
		return rc;
	inner = out->box[t->nbox - 1] * (int64_t)out->elem_bytes;
	if (!out->interleave && inner % 16)
		return spec_fail(v, &t->box[t->nbox - 1].loc, "the inner box dimension of %s is %lld "
				 "bytes; TMA moves multiples of 16", a->name, (long long)inner);
	if (!out->interleave && out->swizzle && inner > out->swizzle)
		return spec_fail(v, &t->box[t->nbox - 1].loc, "the inner box dimension of %s is %lld "
				 "bytes, more than its %lld-byte swizzle span", a->name,
				 (long long)inner, (long long)out->swizzle);
	if (out->interleave == 32 && out->swizzle != 32)
		return spec_fail(v, &t->swizzle.loc, "a 32-byte interleave takes the 32-byte swizzle "
				 "(%s)", a->name);
	return 0;
}

int jitk__specialize(jitk_variant *v, const spec_set *set, size_t inst,
		     jitk_arch arch)
{
	const spec_instance *in = &set->insts[inst];
	const spec_family *f = in->sym->fam;
	size_t i, j;
	int arch_specific = 0, rc;

	memset(v, 0, sizeof(*v));
	v->set = set;
	v->inst = inst;
	v->arch = arch;
	v->target = arch;
	v->available = 1;
	for (i = 0; i < f->nparams; i++)
		if (bind(v, f->params[i].name, in->vals[i]))
			goto too_many;
	if (check_gates(v, f->gates, f->ngates, in->vals) ||
	    check_gates(v, in->sym->gates, in->sym->ngates, in->vals))
		return JITK_OK;

	/* Tuning: every matching entry in order, later ones override. */
	for (i = 0; i < f->ntuning; i++) {
		const spec_tuning *t = &f->tuning[i];

		if (!arch_in(&t->arch, arch.cc) || !jitk__spec_cond_holds(&t->when, in->vals))
			continue;
		for (j = 0; j < t->n; j++)
			if (bind(v, t->kv[j].key, t->kv[j].value))
				goto too_many;
		if (t->arch_specific >= 0)
			arch_specific = t->arch_specific;
	}
	for (i = 0; i < f->ntuning_keys; i++) {
		int64_t dummy;

		if (jitk__variant_lookup(v, f->tuning_keys[i], &dummy))
			return spec_fail(v, tuning_key_loc(f, f->tuning_keys[i]),
					 "tuning key '%s' has no value (no tuning entry that "
					 "applies here sets it)", f->tuning_keys[i]);
	}
	if (arch_specific && arch.kind == 's' && !arch.suffix)
		v->target.suffix = 'a';

	/* Derived values, constraints and the geometry: a value that cannot
	 * be computed or a constraint that fails is a bug in the spec, an
	 * error - a gate is the only way to say "not on this architecture". */
	for (i = 0; i < f->nderived; i++) {
		const spec_expr *d = &f->derived[i];
		int64_t val;

		if ((rc = eval_expr(v, d, "derived value", &val)))
			return rc;
		if (bind(v, d->name, val))
			goto too_many;
	}
	for (i = 0; i < f->nconstraints; i++) {
		const spec_expr *c = &f->constraints[i];
		int64_t ok;

		if ((rc = eval_expr(v, c, "constraint", &ok)))
			return rc;
		if (!ok)
			return spec_fail(v, &c->loc, "constraint '%s' fails: %s",
					 jitk__spec_quote(c->text), c->message);
	}
	return check_geometry(v, f);
too_many:
	return spec_fail(v, &f->loc, "more than %d parameter, tuning and derived names",
			 JITK_MAX_NAMES);
}

const char *jitk__variant_params(const jitk_variant *v, char *buf, size_t n)
{
	const spec_instance *in = &v->set->insts[v->inst];
	const spec_family *f = in->sym->fam;
	size_t i, used = 0;

	buf[0] = '\0';
	for (i = 0; i < f->nparams && used < n; i++) {
		char tmp[32];
		int k = snprintf(buf + used, n - used, "%s%s=%s", i ? " " : "",
				 f->params[i].name,
				 jitk__spec_value_text(&f->params[i], in->vals[i], tmp));

		if (k < 0)
			break;
		used += (size_t)k;
	}
	return buf;
}

/* ------------------------------------------------------------ sources */

/* Every file NVRTC reads must be in the cache key, so jitk inlines each
 * "quoted" include into the translation unit and NVRTC is given nothing to
 * look up: no -I, --no-source-include (quoted names are not searched next
 * to the source, i.e. in the working directory) and no directive that names
 * a file through another route. A small lexer (line splices, comments,
 * string, character and raw string literals, digraphs) finds every
 * directive, so `/ * c * / #include`, `#inc\<newline>lude` and `%:include`
 * are seen too; what it refuses, with file:line:col:
 *  - #include <...>: NVRTC would read it from the file system (an absolute
 *    path) or fail (it has no search directories);
 *  - #include MACRO (a computed include), #include_next, #import, #embed;
 *  - __has_include / __has_include_next anywhere outside comments (they
 *    probe the file system: the answer is not in the key);
 *  - an absolute or unusual quoted include: written other than
 *    `#include "name"` alone on one line (a comment after it is fine).
 * Conditionals are not evaluated: a refused directive inside `#if 0` is
 * refused too. */

#define INLINE_MAX_FILES 64
#define INLINE_MAX_DEPTH 16

typedef struct {
	char *paths[INLINE_MAX_FILES];
	size_t n;
} seen_set;

/* A plain directive the inliner acts on, by physical line. */
enum { D_QUOTED, D_ONCE, D_ANGLE, D_DEFINE, D_IF, D_ENDIF };

typedef struct {
	int kind;
	int line;
	int col;        /* of the file name's opening quote or bracket */
	char *include;  /* the name (D_QUOTED, D_ANGLE) */
} tdirective;

typedef struct {
	const char *path; /* for messages */
	int angle_ok; /* the family names header packages: <...> is theirs */
	char *text; /* the file as read */
	size_t len;
	char *s; /* spliced (phase 2) text ... */
	int *line, *col; /* ... and where each of its bytes came from */
	size_t n;
	tdirective *dirs;
	size_t ndirs, capdirs;
} tscan;

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

static void tscan_free(tscan *t)
{
	size_t i;

	for (i = 0; i < t->ndirs; i++)
		free(t->dirs[i].include);
	free(t->dirs);
	free(t->s);
	free(t->line);
	free(t->col);
}

static int tscan_error(const tscan *t, size_t at, const char *fmt, ...) JITK_PRINTF(3, 4);

static int tscan_error(const tscan *t, size_t at, const char *fmt, ...)
{
	va_list ap;
	jbuf b;
	int rc;

	jitk__jbuf_init(&b);
	va_start(ap, fmt);
	jitk__jbuf_vprintf(&b, fmt, ap);
	va_end(ap);
	rc = jitk__error(JITK_ESPEC, "%s:%d:%d: error: %s", t->path,
			 at < t->n ? t->line[at] : t->n ? t->line[t->n - 1] : 1,
			 at < t->n ? t->col[at] : 1, b.data ? b.data : "out of memory");
	jitk__jbuf_free(&b);
	return rc;
}

/* Phase 2: drop backslash-newline pairs, remembering each byte's origin. */
static int splice(tscan *t)
{
	size_t i, k = 0;
	int line = 1, col = 1;

	t->s = malloc(t->len + 1);
	t->line = malloc((t->len + 1) * sizeof(*t->line));
	t->col = malloc((t->len + 1) * sizeof(*t->col));
	if (!t->s || !t->line || !t->col)
		return jitk__error(JITK_ENOMEM, "out of memory");
	for (i = 0; i < t->len; i++) {
		if (t->text[i] == '\\' && (t->text[i + 1] == '\n' ||
					   (t->text[i + 1] == '\r' && t->text[i + 2] == '\n'))) {
			i += t->text[i + 1] == '\r' ? 2 : 1;
			line++;
			col = 1;
			continue;
		}
		t->s[k] = t->text[i];
		t->line[k] = line;
		t->col[k++] = col;
		if (t->text[i] == '\n') {
			line++;
			col = 1;
		} else {
			col++;
		}
	}
	t->s[k] = '\0';
	t->line[k] = line;
	t->col[k] = col;
	t->n = k;
	return 0;
}

static int is_ident(int c)
{
	return isalnum(c) || c == '_';
}

/* Past whitespace (not newlines) and comments; i at a newline or token. */
static size_t skip_blank(const tscan *t, size_t i)
{
	for (;;) {
		while (i < t->n && (t->s[i] == ' ' || t->s[i] == '\t' || t->s[i] == '\r' ||
				    t->s[i] == '\f' || t->s[i] == '\v'))
			i++;
		if (i + 1 < t->n && t->s[i] == '/' && t->s[i + 1] == '/') {
			while (i < t->n && t->s[i] != '\n')
				i++;
		} else if (i + 1 < t->n && t->s[i] == '/' && t->s[i + 1] == '*') {
			const char *e = strstr(t->s + i + 2, "*/");

			i = e ? (size_t)(e - t->s) + 2 : t->n;
		} else {
			return i;
		}
	}
}

/* A string or character literal from its opening quote at i; the index
 * past it (an unterminated one ends at the end of the line). */
static size_t skip_quoted(const tscan *t, size_t i)
{
	char q = t->s[i++];

	while (i < t->n && t->s[i] != q && t->s[i] != '\n')
		i += t->s[i] == '\\' && i + 1 < t->n && t->s[i + 1] != '\n' ? 2 : 1;
	return i < t->n && t->s[i] == q ? i + 1 : i;
}

/* A raw string R"d( ... )d" with i at its opening quote. */
static size_t skip_raw(const tscan *t, size_t i)
{
	size_t d = i + 1, n;
	char close[20];
	const char *e;

	while (d < t->n && d - i - 1 < 16 && t->s[d] != '(' && t->s[d] != ')' &&
	       t->s[d] != '\\' && !isspace((unsigned char)t->s[d]) && t->s[d] != '"')
		d++;
	if (d >= t->n || t->s[d] != '(')
		return skip_quoted(t, i); /* not a raw string after all */
	n = d - i - 1;
	close[0] = ')';
	memcpy(close + 1, t->s + i + 1, n);
	close[n + 1] = '"';
	close[n + 2] = '\0';
	e = strstr(t->s + d + 1, close);
	return e ? (size_t)(e - t->s) + n + 2 : t->n;
}

static int add_directive(tscan *t, int kind, int line, int col, char *include)
{
	if (t->ndirs == t->capdirs) {
		size_t cap = t->capdirs ? 2 * t->capdirs : 16;
		tdirective *d = realloc(t->dirs, cap * sizeof(*d));

		if (!d) {
			free(include);
			return jitk__error(JITK_ENOMEM, "out of memory");
		}
		t->dirs = d;
		t->capdirs = cap;
	}
	t->dirs[t->ndirs].kind = kind;
	t->dirs[t->ndirs].line = line;
	t->dirs[t->ndirs].col = col;
	t->dirs[t->ndirs++].include = include;
	return 0;
}

/* Whether the directive whose '#' is at hash and whose last byte is at last
 * sits alone on one physical line, '#' first. */
static int plain_line(const tscan *t, size_t hash, size_t last)
{
	const char *p, *start = t->s + hash - (t->col[hash] - 1);

	if (t->s[hash] != '#' || t->line[last] != t->line[hash])
		return 0;
	if (start > t->s && start[-1] != '\n')
		return 0; /* the line continues another one */
	for (p = start; p < t->s + hash; p++)
		if (*p != ' ' && *p != '\t')
			return 0;
	return 1;
}

/* Whether the name of an angle include stays inside the search
 * directories: relative, no ".." component, no backslash, printable. */
static const char *angle_name_problem(const char *s, size_t n)
{
	size_t i, seg = 0;

	if (!n)
		return "empty file name in #include";
	if (s[0] == '/')
		return "an absolute path (name the header relative to its package's root)";
	for (i = 0; i <= n; i++) {
		if (i < n && ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f || s[i] == '\\'))
			return "a control character, backslash or non-ASCII byte in the name";
		if (i == n || s[i] == '/') {
			if (i - seg == 2 && s[seg] == '.' && s[seg + 1] == '.')
				return "a '..' component (it could leave the package's root)";
			seg = i + 1;
		}
	}
	return NULL;
}

/* #include <name> in a family that names header packages: recorded, to be
 * put first in the translation unit (see inline_file); op at '<', close at
 * '>' (or the line's end). */
static int scan_angle(tscan *t, size_t hash, size_t op, size_t close, size_t *end)
{
	size_t rest, last, n = close - op - 1;
	const char *why;
	char *inc;

	if (close >= t->n || t->s[close] != '>')
		return tscan_error(t, op, "missing '>' after the #include file name");
	if ((why = angle_name_problem(t->s + op + 1, n)))
		return tscan_error(t, op, "#include <%.*s>: %s", (int)(n > 200 ? 200 : n),
				   t->s + op + 1, why);
	rest = skip_blank(t, close + 1);
	if (rest < t->n && t->s[rest] != '\n')
		return tscan_error(t, rest, "unexpected text after the #include file name");
	last = rest < t->n ? rest : t->n - 1;
	if (!plain_line(t, hash, last))
		return tscan_error(t, hash, "write the include as #include <%.*s> alone on one line "
				   "(jitk moves package includes to the top of the translation unit "
				   "in that form only)", (int)(n > 200 ? 200 : n), t->s + op + 1);
	if (!(inc = jitk__strndup(t->s + op + 1, n)))
		return jitk__error(JITK_ENOMEM, "out of memory");
	*end = rest;
	return add_directive(t, D_ANGLE, t->line[hash], t->col[op], inc);
}

/* The include-like directive named name, whose '#' is at hash; i just past
 * the name. Records a plain quoted include, refuses everything else. */
static int scan_include(tscan *t, size_t hash, const char *name, size_t i, size_t *end)
{
	size_t op = skip_blank(t, i), close, rest, last;
	char *inc;

	if (strcmp(name, "include"))
		return tscan_error(t, hash, "#%s is not supported in a template (jitk inlines "
				   "\"quoted\" #includes only)", name);
	if (op < t->n && t->s[op] == '<') {
		close = op + 1;
		while (close < t->n && t->s[close] != '>' && t->s[close] != '\n')
			close++;
		if (!t->angle_ok)
			return tscan_error(t, hash, "#include <%.*s>: angle-bracket includes are refused "
					   "(NVRTC would read the file outside the cache key); include "
					   "templates with \"quoted\" relative names, which jitk inlines, "
					   "or name the header packages the family includes from (includes: "
					   "in the spec)",
					   (int)(close - op - 1 > 200 ? 200 : close - op - 1), t->s + op + 1);
		return scan_angle(t, hash, op, close, end);
	}
	if (op >= t->n || t->s[op] != '"')
		return tscan_error(t, hash, "#include of a macro or other computed name is refused "
				   "(jitk can only inline #include \"name\")");
	close = op + 1;
	while (close < t->n && t->s[close] != '"' && t->s[close] != '\n')
		close++;
	if (close >= t->n || t->s[close] != '"')
		return tscan_error(t, op, "unterminated file name in #include");
	if (close == op + 1)
		return tscan_error(t, op, "empty file name in #include");
	if (t->s[op + 1] == '/')
		return tscan_error(t, op, "#include \"%.*s\": absolute include paths are refused "
				   "(name the file relative to the including one)",
				   (int)(close - op - 1 > 200 ? 200 : close - op - 1), t->s + op + 1);
	if (memchr(t->s + op + 1, '\0', close - op - 1))
		return tscan_error(t, op, "NUL byte in an #include file name");
	rest = skip_blank(t, close + 1);
	if (rest < t->n && t->s[rest] != '\n')
		return tscan_error(t, rest, "unexpected text after the #include file name");
	/* The line is replaced whole: a comment after the name that runs
	 * onto the next line would lose its start. */
	last = rest < t->n ? rest : t->n - 1;
	if (!plain_line(t, hash, last))
		return tscan_error(t, hash, "write the include as #include \"%.*s\" alone on "
				   "one line (jitk inlines only that form)",
				   (int)(close - op - 1 > 200 ? 200 : close - op - 1), t->s + op + 1);
	if (!(inc = jitk__strndup(t->s + op + 1, close - op - 1)))
		return jitk__error(JITK_ENOMEM, "out of memory");
	*end = rest;
	return add_directive(t, D_QUOTED, t->line[hash], t->col[op], inc);
}

/* Lex the file: directives and the tokens that matter (see above). */
static int scan_template(tscan *t)
{
	size_t i = 0;
	int first = 1, rc;

	if (memchr(t->text, '\0', t->len)) {
		const char *z = memchr(t->text, '\0', t->len), *q;
		int line = 1;

		for (q = t->text; q < z; q++)
			line += *q == '\n';
		return jitk__error(JITK_ESPEC, "%s:%d: error: NUL byte in a template", t->path, line);
	}
	if ((rc = splice(t)))
		return rc;
	while (i < t->n) {
		char c = t->s[i];
		size_t start = i;

		if (c == '\n') {
			first = 1;
			i++;
			continue;
		}
		if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v' ||
		    (c == '/' && (t->s[i + 1] == '/' || t->s[i + 1] == '*'))) {
			i = skip_blank(t, i);
			continue;
		}
		if (c == '#' || (c == '%' && t->s[i + 1] == ':')) {
			size_t name, e;
			char dname[16];

			i += c == '#' ? 1 : 2;
			if (t->s[i] == '#' || (t->s[i] == '%' && t->s[i + 1] == ':')) {
				i += t->s[i] == '#' ? 1 : 2; /* ## or %:%: */
				first = 0;
				continue;
			}
			if (!first)
				continue;
			first = 0;
			name = skip_blank(t, i);
			for (e = name; e < t->n && is_ident((unsigned char)t->s[e]); e++)
				;
			if (e == name || e - name >= sizeof(dname))
				continue;
			memcpy(dname, t->s + name, e - name);
			dname[e - name] = '\0';
			if (!strcmp(dname, "include") || !strcmp(dname, "include_next") ||
			    !strcmp(dname, "import") || !strcmp(dname, "embed")) {
				if ((rc = scan_include(t, start, dname, e, &i)))
					return rc;
				continue;
			}
			if (!strcmp(dname, "pragma")) {
				size_t w = skip_blank(t, e), we = w, after;

				while (we < t->n && is_ident((unsigned char)t->s[we]))
					we++;
				after = skip_blank(t, we);
				if (we - w == 4 && !strncmp(t->s + w, "once", 4) &&
				    (after >= t->n || t->s[after] == '\n') &&
				    plain_line(t, start, after < t->n ? after : t->n - 1) &&
				    (rc = add_directive(t, D_ONCE, t->line[start], t->col[start], NULL)))
					return rc;
			}
			/* What moving package includes to the top could change the
			 * meaning of (see inline_file). */
			if (t->angle_ok) {
				int kind = !strcmp(dname, "define") || !strcmp(dname, "undef") ? D_DEFINE
					   : !strcmp(dname, "if") || !strcmp(dname, "ifdef") ||
							     !strcmp(dname, "ifndef")
						   ? D_IF
					   : !strcmp(dname, "endif") ? D_ENDIF
								     : -1;

				if (kind >= 0 &&
				    (rc = add_directive(t, kind, t->line[start], t->col[start], NULL)))
					return rc;
			}
			i = e;
			continue;
		}
		first = 0;
		if (isalpha((unsigned char)c) || c == '_') {
			size_t n;

			while (i < t->n && is_ident((unsigned char)t->s[i]))
				i++;
			n = i - start;
			if ((n == 13 && !strncmp(t->s + start, "__has_include", 13)) ||
			    (n == 18 && !strncmp(t->s + start, "__has_include_next", 18)))
				return tscan_error(t, start, "%.*s is refused in a template (it asks the "
						   "file system, whose answer is not in the cache key)",
						   (int)n, t->s + start);
			if (i < t->n && t->s[i] == '"' && t->s[i - 1] == 'R' &&
			    (n == 1 || (n == 2 && strchr("uUL", t->s[start])) ||
			     (n == 3 && !strncmp(t->s + start, "u8", 2))))
				i = skip_raw(t, i);
			else if (i < t->n && (t->s[i] == '"' || t->s[i] == '\'') &&
				 ((n == 1 && strchr("uUL", t->s[start])) ||
				  (n == 2 && !strncmp(t->s + start, "u8", 2))))
				i = skip_quoted(t, i);
			continue;
		}
		if (isdigit((unsigned char)c) || (c == '.' && isdigit((unsigned char)t->s[i + 1]))) {
			/* A pp-number, digit separators and exponent signs included. */
			for (i++; i < t->n; i++) {
				char d = t->s[i];

				if ((d == '+' || d == '-') && strchr("eEpP", t->s[i - 1]))
					continue;
				if (d == '\'' && i + 1 < t->n && is_ident((unsigned char)t->s[i + 1]))
					continue;
				if (!is_ident((unsigned char)d) && d != '.')
					break;
			}
			continue;
		}
		if (c == '"' || c == '\'') {
			i = skip_quoted(t, i);
			continue;
		}
		i++;
	}
	return 0;
}

/* One template's inlining: the files seen, and (with header packages)
 * the package includes found, in order, and what would make moving them
 * to the top wrong. */
typedef struct {
	seen_set seen;
	int angle_ok;
	jitk_template *out;
	int cond_depth;     /* #if ... #endif around the current line */
	char define_at[160]; /* the first #define or #undef: "file:line" */
} inline_ctx;

static int add_angle(inline_ctx *x, const tscan *t, const tdirective *dir)
{
	jitk_template *o = x->out;
	size_t i;

	if (x->cond_depth > 0)
		return jitk__error(JITK_ESPEC, "%s:%d:%d: error: #include <%s> inside #if: jitk puts "
				   "package includes first in the translation unit, outside any "
				   "conditional; include it unconditionally", t->path, dir->line,
				   dir->col, dir->include);
	if (x->define_at[0])
		return jitk__error(JITK_ESPEC, "%s:%d:%d: error: #include <%s> after the #define or "
				   "#undef at %s: jitk puts package includes first in the translation "
				   "unit, so the macro would not apply to it; define it with an "
				   "nvrtc_options -D, or include package headers before any #define",
				   t->path, dir->line, dir->col, dir->include, x->define_at);
	for (i = 0; i < o->nangle; i++)
		if (!strcmp(o->angle[i].name, dir->include))
			return 0;
	if (o->nangle == JITK_MAX_ANGLE)
		return jitk__error(JITK_ESPEC, "%s:%d:%d: error: a template may include at most %d "
				   "package headers", t->path, dir->line, dir->col, JITK_MAX_ANGLE);
	o->angle[o->nangle].name = jitk__strdup(dir->include);
	o->angle[o->nangle].where = jitk__asprintf("%s:%d:%d", t->path, dir->line, dir->col);
	if (!o->angle[o->nangle].name || !o->angle[o->nangle].where) {
		free(o->angle[o->nangle].name);
		free(o->angle[o->nangle].where);
		return jitk__error(JITK_ENOMEM, "out of memory");
	}
	o->nangle++;
	return 0;
}

static int inline_file(jbuf *out, const char *path, inline_ctx *x, int depth,
		       const char *from, int from_line, int from_col)
{
	seen_set *seen = &x->seen;
	char *real = realpath(path, NULL);
	const char *p, *end;
	tscan t;
	size_t i, d = 0;
	int line = 1, rc = 0;

	if (!real) {
		if (from)
			return jitk__error(JITK_ESPEC, "%s:%d:%d: error: included file '%s' not found",
					   from, from_line, from_col, path);
		return jitk__error(JITK_ESPEC, "%s: template not found", path);
	}
	for (i = 0; i < seen->n; i++)
		if (!strcmp(seen->paths[i], real)) {
			free(real);
			return 0; /* every file once: as if each had #pragma once */
		}
	if (depth > INLINE_MAX_DEPTH) {
		free(real);
		return jitk__error(JITK_ESPEC, "%s:%d:%d: error: includes nested more than %d deep",
				   from, from_line, from_col, INLINE_MAX_DEPTH);
	}
	if (seen->n == INLINE_MAX_FILES) {
		free(real);
		return jitk__error(JITK_ESPEC, "%s:%d:%d: error: a template may include at most %d files",
				   from, from_line, from_col, INLINE_MAX_FILES - 1);
	}
	seen->paths[seen->n++] = real;
	memset(&t, 0, sizeof(t));
	t.path = path;
	t.angle_ok = x->angle_ok;
	if ((rc = jitk__read_file(&t.text, &t.len, path, 1u << 20))) {
		if (from)
			return jitk__error(JITK_ESPEC, "%s:%d:%d: error: included file %s: %s", from,
					   from_line, from_col, path, jitk_error_last()->message);
		return jitk__error(JITK_ESPEC, "template %s: %s", path,
				   jitk_error_last()->message);
	}
	if ((rc = scan_template(&t)))
		goto done;
	jitk__jbuf_printf(out, "#line 1 \"%s\"\n", base_name(path));
	for (p = t.text, end = t.text + t.len; p < end; line++) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		const tdirective *dir = d < t.ndirs && t.dirs[d].line == line ? &t.dirs[d] : NULL;

		if (!eol)
			eol = end;
		if (dir && dir->kind == D_QUOTED) {
			const char *slash = strrchr(path, '/');
			char *inc = slash ? jitk__asprintf("%.*s/%s", (int)(slash - path), path,
							   dir->include)
					  : jitk__strdup(dir->include);

			if (!inc) {
				rc = jitk__error(JITK_ENOMEM, "out of memory");
				break;
			}
			rc = inline_file(out, inc, x, depth + 1, path, line, dir->col);
			free(inc);
			if (rc)
				break;
			jitk__jbuf_printf(out, "#line %d \"%s\"\n", line + 1, base_name(path));
		} else if (dir && (dir->kind == D_ONCE || dir->kind == D_ANGLE)) {
			/* #pragma once; a package include, which goes first */
			if (dir->kind == D_ANGLE && (rc = add_angle(x, &t, dir)))
				break;
			jitk__jbuf_puts(out, "\n");
		} else {
			if (dir && dir->kind == D_DEFINE && !x->define_at[0])
				snprintf(x->define_at, sizeof(x->define_at), "%s:%d", base_name(path), line);
			else if (dir && dir->kind == D_IF)
				x->cond_depth++;
			else if (dir && dir->kind == D_ENDIF)
				x->cond_depth--;
			jitk__jbuf_put(out, p, (size_t)(eol - p));
			jitk__jbuf_puts(out, "\n");
		}
		if (dir)
			d++;
		p = eol < end ? eol + 1 : end;
	}
done:
	free(t.text);
	tscan_free(&t);
	return rc;
}

int jitk__template_load(jitk_template *out, const char *path, int packages)
{
	inline_ctx x;
	jbuf b;
	size_t i;
	int rc;

	memset(out, 0, sizeof(*out));
	memset(&x, 0, sizeof(x));
	x.angle_ok = packages;
	x.out = out;
	jitk__jbuf_init(&b);
	rc = inline_file(&b, path, &x, 0, NULL, 0, 0);
	for (i = 0; i < x.seen.n; i++)
		free(x.seen.paths[i]);
	if (!rc && !(out->text = jitk__jbuf_detach(&b)))
		rc = jitk__error(JITK_ENOMEM, "out of memory");
	if (rc) {
		jitk__jbuf_free(&b);
		jitk__template_free(out);
	}
	return rc;
}

void jitk__template_free(jitk_template *t)
{
	size_t i;

	for (i = 0; i < t->nangle; i++) {
		free(t->angle[i].name);
		free(t->angle[i].where);
	}
	free(t->text);
	memset(t, 0, sizeof(*t));
}

int jitk__inline_template(char **out, const char *path)
{
	jitk_template t;
	int rc = jitk__template_load(&t, path, 0);

	*out = NULL;
	if (rc)
		return rc;
	*out = t.text;
	t.text = NULL;
	jitk__template_free(&t);
	return 0;
}

/* The C++ type and value of binding i: enum and bool parameters as
 * themselves, integers as int (long long beyond its range). */
static void render_member(jbuf *b, const jitk_variant *v, size_t i)
{
	const spec_family *f = v->set->insts[v->inst].sym->fam;
	const jitk_binding *e = &v->env[i];
	int p = jitk__spec_param_index(f, e->name);

	if (p >= 0 && f->params[p].type == PT_ENUM)
		jitk__jbuf_printf(b, "  static constexpr %s %s = %s::%s;\n", f->params[p].cpp,
				  e->name, f->params[p].cpp, f->params[p].values[e->value]);
	else if (p >= 0 && f->params[p].type == PT_BOOL)
		jitk__jbuf_printf(b, "  static constexpr bool %s = %s;\n", e->name,
				  e->value ? "true" : "false");
	else if (e->value >= INT32_MIN && e->value <= INT32_MAX)
		jitk__jbuf_printf(b, "  static constexpr int %s = %lld;\n", e->name,
				  (long long)e->value);
	else
		jitk__jbuf_printf(b, "  static constexpr long long %s = %lldLL;\n", e->name,
				  (long long)e->value);
}

/* Whether two variants of one symbol bind each tuning key and derived
 * value alike for the same target (the parameters, env[0..nparams),
 * aside). */
static int same_tuning(const jitk_variant *x, const jitk_variant *y, size_t nparams)
{
	size_t i;

	if (x->nenv != y->nenv || x->target.cc != y->target.cc || x->target.kind != y->target.kind ||
	    x->target.suffix != y->target.suffix || x->available != y->available)
		return 0;
	for (i = nparams; i < x->nenv; i++) {
		int64_t val;

		if (jitk__variant_lookup((void *)y, x->env[i].name, &val) || val != x->env[i].value)
			return 0;
	}
	return 1;
}

/* Every instance of s that a name of the values vals stands for (equal
 * in each parameter it keeps, anything in those omit leaves out) tunes
 * alike (alike[], per instance of s). */
static int names_alike(const spec_symbol *s, const spec_set *set, const unsigned char *alike,
		       const unsigned char *omit, const int64_t *vals)
{
	size_t i, q;

	for (i = 0; i < s->ninsts; i++) {
		const spec_instance *o = &set->insts[s->first + i];

		for (q = 0; q < s->fam->nparams; q++)
			if (!omit[q] && o->vals[q] != vals[q])
				break;
		if (q == s->fam->nparams && !alike[i])
			return 0;
	}
	return 1;
}

/* Which size classes the parameter struct's name leaves out (omit[p]),
 * and the value it names for the others (rep[p]). A size class never
 * reaches the template (it chooses the tuning, never the math), so
 * instances of a symbol that differ in size classes alone and specialize
 * to the same target and tuning may share one translation unit: one key,
 * one compile, one cache entry (docs/spec-format.md). Size classes are
 * left out one at a time, in parameter order, while every instance that
 * differs from this one in the left-out classes alone tunes alike. A
 * class that stays in the name names the first of its values under which
 * every instance the name stands for tunes as this one does (N <= 3072
 * and N <= 9216 alike: both _nclass_3072), provided the whole name does;
 * else this instance's own values. Either way every instance a name stands
 * for (its kept values, any left-out ones) compiles alike, so no two
 * tunings ever share a name. JITK_ENOMEM, else 0. */
static int shared_size_classes(const jitk_variant *v, unsigned char *omit, int64_t *rep)
{
	const spec_instance *in = &v->set->insts[v->inst];
	const spec_symbol *s = in->sym;
	const spec_family *f = s->fam;
	jitk_variant *sib;
	unsigned char *alike; /* per instance of the symbol: compiles as v does */
	size_t i, p, q;

	memset(omit, 0, f->nparams);
	memcpy(rep, in->vals, f->nparams * sizeof(*rep));
	for (q = 0; q < f->nparams; q++)
		if (f->params[q].size_of && s->nvals[q] > 1)
			break;
	if (q == f->nparams)
		return 0;
	sib = malloc(sizeof(*sib));
	alike = calloc(s->ninsts, 1);
	if (!sib || !alike) {
		free(sib);
		free(alike);
		return jitk__error(JITK_ENOMEM, "out of memory");
	}
	for (i = 0; i < s->ninsts; i++) {
		const spec_instance *o = &v->set->insts[s->first + i];

		for (q = 0; q < f->nparams; q++)
			if (!f->params[q].size_of && o->vals[q] != in->vals[q])
				break;
		/* a sibling that cannot be specialized is compiled (and its
		 * error said) on its own: here it is only not alike */
		alike[i] = q == f->nparams &&
			   (s->first + i == v->inst || (jitk__specialize(sib, v->set, s->first + i,
								v->arch) == JITK_OK &&
							 same_tuning(v, sib, f->nparams)));
	}
	for (p = 0; p < f->nparams; p++) {
		if (!f->params[p].size_of || s->nvals[p] < 2)
			continue;
		omit[p] = 1;
		for (i = 0; i < s->ninsts && omit[p]; i++) {
			const spec_instance *o = &v->set->insts[s->first + i];

			for (q = 0; q < f->nparams; q++)
				if (!omit[q] && o->vals[q] != in->vals[q])
					break;
			if (q == f->nparams && !alike[i])
				omit[p] = 0; /* it stands for one that tunes apart */
		}
	}
	/* the classes named: each its first value that names only instances
	 * tuned alike, the others as this instance has them; then the whole
	 * name checked the same way (else this instance's own values, which
	 * the rule above already checked) */
	for (p = 0; p < f->nparams; p++) {
		int64_t own;

		if (!f->params[p].size_of || s->nvals[p] < 2 || omit[p])
			continue;
		own = rep[p];
		for (i = 0; i < s->ninsts; i++) {
			rep[p] = v->set->insts[s->first + i].vals[p];
			if (names_alike(s, v->set, alike, omit, rep))
				break;
		}
		if (i == s->ninsts)
			rep[p] = own;
	}
	if (!names_alike(s, v->set, alike, omit, rep))
		memcpy(rep, in->vals, f->nparams * sizeof(*rep));
	free(sib);
	free(alike);
	return 0;
}

/* The parameter struct's members in one order whatever order the tuning
 * entries set them in: the parameters (less the size classes), the
 * tuning keys, the derived values, as the spec lists them. */
static void render_members(jbuf *b, const jitk_variant *v)
{
	const spec_family *f = v->set->insts[v->inst].sym->fam;
	size_t i, k;

	for (i = 0; i < f->nparams && i < v->nenv; i++)
		if (!f->params[i].size_of) /* a size class: never the template's */
			render_member(b, v, i);
	for (k = 0; k < f->ntuning_keys + f->nderived; k++) {
		const char *name = k < f->ntuning_keys ? f->tuning_keys[k]
						       : f->derived[k - f->ntuning_keys].name;

		for (i = f->nparams; i < v->nenv; i++)
			if (!strcmp(v->env[i].name, name)) {
				render_member(b, v, i);
				break;
			}
	}
}

/* The parameter struct's name: the instance's name as an identifier
 * ("tadd3[cols=256]" -> "tadd3_cols_256"), so that profilers show which
 * instance a kernel is - less the size classes its tuning does not
 * depend on (shared_size_classes), which would make instances that
 * compile alike differ in name. */
static void render_struct_name(jbuf *b, const jitk_variant *v, const unsigned char *omit,
			       const int64_t *rep)
{
	const spec_instance *in = &v->set->insts[v->inst];
	const spec_symbol *s = in->sym;
	const spec_family *f = s->fam;
	size_t i;

	jitk__jbuf_puts(b, s->name);
	for (i = 0; i < f->nparams; i++) {
		char buf[32];
		const char *t;

		if (s->nvals[i] < 2 || omit[i])
			continue;
		jitk__jbuf_printf(b, "_%s_", f->params[i].name);
		for (t = jitk__spec_value_text(&f->params[i], rep[i], buf); *t; t++)
			jitk__jbuf_put(b, *t == '-' ? "m" : t, 1);
	}
}

/* After --gpu-architecture. --no-source-include: NVRTC searches no
 * directory at all (not even the working directory for "quoted" names),
 * so the translation unit alone is what it compiles. A spec's --std
 * replaces the first. */
static const char *const base_options[] = {
	"--std=c++17", "--fmad=true", "--ftz=false", "--prec-div=true",
	"--prec-sqrt=true", "--no-source-include",
};

static int is_std_option(const char *o)
{
	return !strncmp(o, "--std=", 6) || !strncmp(o, "-std=", 5);
}

int jitk__tu_make(jitk_tu *tu, const jitk_variant *v, const jitk_template *tpl)
{
	const spec_instance *in = &v->set->insts[v->inst];
	const spec_family *f = in->sym->fam;
	char target[JITK_ARCH_STRLEN];
	unsigned char omit[SPEC_MAX_NAMES]; /* size classes left out of the name */
	int64_t rep[SPEC_MAX_NAMES];        /* the values the name says */
	jbuf src, ex, bx;
	const char *sep;
	size_t i, n = 0;
	int rc;

	memset(tu, 0, sizeof(*tu));
	if ((rc = shared_size_classes(v, omit, rep)))
		return rc;
	jitk__jbuf_init(&src);
	jitk__jbuf_init(&ex);
	jitk__jbuf_init(&bx);
	jitk__jbuf_printf(&ex, "%s<", f->kernel);
	render_struct_name(&ex, v, omit, rep);
	jitk__jbuf_puts(&ex, ">");

	jitk__arch_format(target, v->target);
	jitk__jbuf_printf(&src, "// jitk translation unit: family %s (", f->name);
	for (i = 0, sep = ""; i < f->nparams; i++) {
		char buf[32];

		if (omit[i])
			continue;
		jitk__jbuf_printf(&src, "%s%s=%s", sep, f->params[i].name,
				  jitk__spec_value_text(&f->params[i], rep[i], buf));
		sep = " ";
	}
	jitk__jbuf_printf(&src, "), target %s\n", target);
	/* Package includes first, before any code: NVRTC's automatic PCH
	 * covers what comes before the first line of code. */
	for (i = 0; i < tpl->nangle; i++)
		jitk__jbuf_printf(&src, "#include <%s>\n", tpl->angle[i].name);
	/* A TMA descriptor is passed by value: 128 bytes, 64-byte aligned,
	 * what cuTensorMapEncodeTiled writes (the kernel takes it as
	 * const __grid_constant__ jitk_tensor_map). */
	for (i = 0; i < f->nargs; i++)
		if (f->args[i].type == AT_TMA) {
			jitk__jbuf_puts(&src, "struct alignas(64) jitk_tensor_map { unsigned long long "
				       "opaque[16]; };\n");
			break;
		}
	/* What a parameter builder writes (launch.builder): the kernel's
	 * launch geometry and its one parameter, the bytes jitk passes. */
	if (f->builder)
		jitk__jbuf_puts(&src, "struct alignas(64) jitk_params_out { unsigned magic, bytes, "
			       "grid[3], block[3], cluster[3], shared_bytes; int sm_count; "
			       "unsigned pad[3]; "
			       "alignas(64) unsigned char params[" JITK_STR(JITK_BUILT_MAX) "]; };\n"
			       "#define JITK_PARAMS_MAGIC 0x6a69746bu\n"
			       "#define JITK_PARAMS_REFUSED 0x6a69746eu\n");
	jitk__jbuf_puts(&src, tpl->text);
	/* The template's parameters, by name: P::cols, P::threads... */
	jitk__jbuf_puts(&src, "#line 1 \"jitk-instantiation\"\nstruct ");
	render_struct_name(&src, v, omit, rep);
	jitk__jbuf_puts(&src, " {\n");
	render_members(&src, v);
	jitk__jbuf_puts(&src, "};\n");
	/* The signature check needs nothing from the template's headers. */
	jitk__jbuf_puts(&src, "namespace jitk_check {\n"
		       "template <class A, class B> struct same { static constexpr bool value = false; };\n"
		       "template <class A> struct same<A, A> { static constexpr bool value = true; };\n"
		       "}\n");
	if (f->builder) {
		/* The builder takes the args after where it writes; the kernel
		 * takes what it wrote (any one parameter). */
		jitk__jbuf_printf(&bx, "%s<", f->builder);
		render_struct_name(&bx, v, omit, rep);
		jitk__jbuf_puts(&bx, ">");
	}
	jitk__jbuf_printf(&src, "static_assert(jitk_check::same<decltype(&%s), void (*)(%s",
			  f->builder ? bx.data : ex.data, f->builder ? "jitk_params_out *" : "");
	for (i = 0; i < f->nargs; i++)
		jitk__jbuf_printf(&src, "%s%s", i || f->builder ? ", " : "", f->args[i].cpp);
	jitk__jbuf_printf(&src, ")>::value,\n              \"the parameters of %s do not match the args of spec family %s%s\");\n",
		    f->builder ? f->builder : f->kernel, f->name,
		    f->builder ? " (after jitk_params_out *)" : "");
	tu->source = jitk__jbuf_detach(&src);
	tu->name_expr = jitk__jbuf_detach(&ex);
	tu->builder_expr = f->builder ? jitk__jbuf_detach(&bx) : NULL;
	if (!tu->source || !tu->name_expr || (f->builder && !tu->builder_expr))
		goto oom;

	tu->options = calloc(1 + JITK_ARRAY_SIZE(base_options) + f->noptions,
			     sizeof(*tu->options));
	if (!tu->options)
		goto oom;
	tu->options[n++] = jitk__asprintf("--gpu-architecture=%s", target);
	for (i = 0; i < JITK_ARRAY_SIZE(base_options); i++) {
		/* With --no-source-include NVRTC (13.0) does not look next to a
		 * header for the header's own "quoted" includes either, which
		 * CUTLASS has (cutlass/pipeline/sm100_pipeline.hpp includes
		 * "sm90_pipeline.hpp"). Without it, the one directory it adds is
		 * the main file's, for the main file's quoted includes only -
		 * and jitk's translation unit has none (all inlined). */
		if (f->nincludes && !strcmp(base_options[i], "--no-source-include"))
			continue;
		tu->options[n++] = jitk__strdup(base_options[i]);
	}
	for (i = 0; i < f->noptions; i++) {
		/* The loader refused these already; whatever made this spec
		 * set, nothing else reaches NVRTC. */
		const char *why = jitk__nvrtc_option_problem(f->options[i]);

		if (why) {
			tu->noptions = n;
			rc = jitk__error(JITK_ESPEC, "%s:%d:%d: error: family %s: NVRTC option #%zu "
					 "is not allowed: %s", f->loc.file, f->loc.line, f->loc.col,
					 f->name, i + 1, why);
			goto fail;
		}
		if (is_std_option(f->options[i])) {
			free(tu->options[1]);
			tu->options[1] = jitk__strdup(f->options[i]);
			continue;
		}
		tu->options[n++] = jitk__strdup(f->options[i]);
	}
	tu->noptions = n;
	for (i = 0; i < n; i++)
		if (!tu->options[i])
			goto oom;
	return 0;
oom:
	rc = jitk__error(JITK_ENOMEM, "out of memory");
fail:
	jitk__jbuf_free(&src);
	jitk__jbuf_free(&ex);
	jitk__jbuf_free(&bx);
	jitk__tu_free(tu);
	return rc;
}

void jitk__tu_free(jitk_tu *tu)
{
	size_t i;

	free(tu->source);
	free(tu->name_expr);
	free(tu->builder_expr);
	for (i = 0; i < tu->noptions; i++)
		free(tu->options[i]);
	free(tu->options);
	for (i = 0; i < tu->nincludes; i++)
		free(tu->includes[i]);
	free(tu->includes);
	free(tu->packages);
	memset(tu, 0, sizeof(*tu));
}
