/* spec.c - YAML spec files to the spec model, with compiler-style errors.
 *
 * Every error names file:line:col and the key path, and keeps the
 * offending line (with a caret) as the error's detail. The schema is strict:
 * unknown keys, wrong types and YAML 1.1 look-alikes ("NO", "0755", "1e3",
 * "~") are errors, never guesses. docs/spec-format.md describes it. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/internal.h"
#include "spec/spec.h"
#include "spec/ytree.h"

#define SPEC_MAX_FILES 256
#define SPEC_MAX_TEMPLATE_BYTES (1u << 20) /* what the inliner reads */

typedef struct {
	const char *file;
	const ytree *t;
	spec_set *set;
} sctx;

/* File texts, kept while a set is being loaded so that errors found when
 * linking symbols across files can quote the offending line too. */
typedef struct {
	char **texts;
	size_t *lens;
	size_t n;
} texts_t;

static int link_error(const texts_t *tx, const spec_set *set, const spec_loc *l,
		      const char *fmt, ...) JITK_PRINTF(4, 5);

/* ----------------------------------------------------------- errors */

void jitk__spec_escape(jbuf *b, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	for (; *p; p++) {
		if (*p == '\n')
			jitk__jbuf_puts(b, "\\n");
		else if (*p == '\r')
			jitk__jbuf_puts(b, "\\r");
		else if (*p == '\t')
			jitk__jbuf_puts(b, "\\t");
		else if (*p < 0x20 || *p == 0x7f)
			jitk__jbuf_printf(b, "\\x%02x", *p);
		else if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) { /* C1 controls */
			jitk__jbuf_printf(b, "\\u%04x", p[1]);
			p++;
		} else
			jitk__jbuf_put(b, p, 1);
	}
}

int jitk__spec_error(int status, const char *detail, const char *fmt, ...)
{
	jbuf raw, msg;
	va_list ap;
	int rc;

	jitk__jbuf_init(&raw);
	jitk__jbuf_init(&msg);
	va_start(ap, fmt);
	jitk__jbuf_vprintf(&raw, fmt, ap);
	va_end(ap);
	jitk__spec_escape(&msg, raw.data ? raw.data : "");
	if (raw.oom || msg.oom)
		rc = jitk__error(JITK_ENOMEM, "out of memory");
	else
		rc = jitk__error_detail(status, detail, "%s", msg.data ? msg.data : "");
	jitk__jbuf_free(&raw);
	jitk__jbuf_free(&msg);
	return rc;
}

#define QUOTE_MAX 96 /* bytes of a user string quoted in a message */

/* s shortened for quoting in a message: at most QUOTE_MAX bytes (cut at a
 * character boundary) and "..." - a 60 KB expression or a 1000-character
 * key stays readable. From a small ring of per-thread buffers, so that a
 * message can quote a few strings; control characters are escaped later,
 * by jitk__spec_error. */
const char *jitk__spec_quote(const char *s)
{
	static _Thread_local char ring[8][QUOTE_MAX + 4];
	static _Thread_local unsigned next;
	char *buf;
	size_t n = strlen(s);

	if (n <= QUOTE_MAX)
		return s;
	buf = ring[next++ % 8];
	n = QUOTE_MAX;
	while (n && ((unsigned char)s[n] & 0xc0) == 0x80)
		n--;
	memcpy(buf, s, n);
	memcpy(buf + n, "...", 4);
	return buf;
}

static const char *q(const char *s)
{
	return jitk__spec_quote(s);
}

#define EXCERPT_WIDTH 160 /* characters of a long line shown around col */

/* Byte length of the UTF-8 character at p (1 for stray bytes). */
static size_t char_len(const char *p, const char *end)
{
	unsigned char c = (unsigned char)*p;
	size_t n = c < 0xc0 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4, i;

	for (i = 1; i < n; i++)
		if (p + i >= end || ((unsigned char)p[i] & 0xc0) != 0x80)
			return 1;
	return n;
}

/* The offending line with a caret under column col (in characters, as
 * libyaml counts them). A long line is cut to a window around col, marked
 * with "...", so that the caret always points at the character. */
static void excerpt(jbuf *b, const ytree *t, int line, int col)
{
	const char *p = t->text, *end = t->text + t->text_len, *eol, *shown_from;
	int l = 1, i, skip = 0, shown = 0;

	while (l < line && p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));

		if (!nl)
			return;
		p = nl + 1;
		l++;
	}
	eol = p;
	while (eol < end && *eol != '\n' && *eol != '\r')
		eol++;
	if (col < 1)
		col = 1;
	if (col > EXCERPT_WIDTH)
		skip = col - EXCERPT_WIDTH / 2;
	for (i = 0; i < skip && p < eol; i++)
		p += char_len(p, eol);
	shown_from = p;
	jitk__jbuf_printf(b, "%5d | %s", line, skip ? "..." : "");
	while (p < eol && shown < EXCERPT_WIDTH) {
		size_t n = char_len(p, eol);

		if ((unsigned char)*p >= 0x80 && n > 1)
			jitk__jbuf_put(b, p, n);
		else
			jitk__jbuf_put(b, isprint((unsigned char)*p) || *p == '\t' ? p : "?", 1);
		p += n;
		shown++;
	}
	if (p < eol)
		jitk__jbuf_puts(b, "...");
	jitk__jbuf_printf(b, "\n      | %s", skip ? "   " : "");
	/* A tab above stays a tab below, so that the caret lines up. */
	for (p = shown_from, i = 1 + skip; i < col; i++) {
		jitk__jbuf_puts(b, p < eol && *p == '\t' ? "\t" : " ");
		if (p < eol)
			p += char_len(p, eol);
	}
	jitk__jbuf_puts(b, "^\n");
}

static int err_at(const sctx *c, int line, int col, const char *path,
		  const char *fmt, ...) JITK_PRINTF(5, 6);

static int err_at(const sctx *c, int line, int col, const char *path,
		  const char *fmt, ...)
{
	jbuf msg, detail;
	va_list ap;
	int rc;

	jitk__jbuf_init(&msg);
	jitk__jbuf_init(&detail);
	va_start(ap, fmt);
	jitk__jbuf_vprintf(&msg, fmt, ap);
	va_end(ap);
	if (c->t && c->t->text)
		excerpt(&detail, c->t, line, col);
	if (path && *path)
		rc = jitk__spec_error(JITK_ESPEC, detail.data, "%s:%d:%d: error: %s (at %s)",
				      c->file, line, col, msg.data ? msg.data : "", path);
	else
		rc = jitk__spec_error(JITK_ESPEC, detail.data, "%s:%d:%d: error: %s",
				      c->file, line, col, msg.data ? msg.data : "");
	jitk__jbuf_free(&msg);
	jitk__jbuf_free(&detail);
	return rc;
}

#define ERR(c, n, path, ...) err_at((c), (n)->line, (n)->col, (path), __VA_ARGS__)

static spec_loc loc_of(const sctx *c, const ynode *n)
{
	spec_loc l = { c->file, n->line, n->col };
	return l;
}

static const char *kind_name(const ynode *n)
{
	if (n->kind == YN_MAP)
		return "a mapping";
	if (n->kind == YN_SEQ)
		return "a sequence";
	return "a scalar";
}

static int is_null(const ynode *n)
{
	return n->kind == YN_SCALAR && n->plain &&
	       (!n->len || !strcmp(n->str, "~") || !strcmp(n->str, "null") ||
		!strcmp(n->str, "Null") || !strcmp(n->str, "NULL"));
}

/* Every key of map must be in allowed (NULL-terminated); every key in
 * required must be present. */
static int check_keys(const sctx *c, const ynode *map, const char *path,
		      const char *const *allowed, const char *const *required)
{
	size_t i, k;

	for (i = 0; i < map->n; i++) {
		const ynode *key = ymap_key(map, i);
		const char *best = NULL;
		int bestd = 3;

		for (k = 0; allowed[k]; k++) {
			int d;

			if (!strcmp(key->str, allowed[k]))
				break;
			d = jitk__edit_distance(key->str, allowed[k]);
			if (d < bestd) {
				bestd = d;
				best = allowed[k];
			}
		}
		if (allowed[k])
			continue;
		if (best)
			return ERR(c, key, path, "unknown key '%s' (did you mean '%s'?)",
				   q(key->str), best);
		return ERR(c, key, path, "unknown key '%s'", q(key->str));
	}
	for (k = 0; required && required[k]; k++)
		if (!jitk__ymap_get(map, required[k]))
			return ERR(c, map, path, "missing required key '%s'", required[k]);
	return 0;
}

/* ----------------------------------------------------------- scalars */

static int want_kind(const sctx *c, const ynode *n, const char *path,
		     enum ynode_kind kind, const char *what)
{
	if (n->kind == kind && !(kind == YN_SCALAR && is_null(n)))
		return 0;
	if (is_null(n))
		return ERR(c, n, path, "expected %s, got null", what);
	return ERR(c, n, path, "expected %s, got %s", what, kind_name(n));
}

static int get_string(const sctx *c, const ynode *n, const char *path,
		      char **out)
{
	if (want_kind(c, n, path, YN_SCALAR, "a string"))
		return JITK_ESPEC;
	*out = jitk__strdup(n->str);
	return *out ? 0 : jitk__error(JITK_ENOMEM, "out of memory");
}

/* Free text (a gate's reason, a check's message): a string without the
 * trailing newline of a block scalar ("reason: |"). */
static int get_text(const sctx *c, const ynode *n, const char *path, char **out)
{
	int rc = get_string(c, n, path, out);
	size_t len;

	if (rc)
		return rc;
	len = strlen(*out);
	while (len && isspace((unsigned char)(*out)[len - 1]))
		(*out)[--len] = '\0';
	return 0;
}

static int is_ident(const char *s)
{
	if (!isalpha((unsigned char)*s) && *s != '_')
		return 0;
	for (s++; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '_')
			return 0;
	return 1;
}

static int is_qualified(const char *s)
{
	for (;;) {
		if (!isalpha((unsigned char)*s) && *s != '_')
			return 0;
		while (isalnum((unsigned char)*s) || *s == '_')
			s++;
		if (!*s)
			return 1;
		if (s[0] != ':' || s[1] != ':')
			return 0;
		s += 2;
	}
}

static int get_ident(const sctx *c, const ynode *n, const char *path,
		     char **out)
{
	if (want_kind(c, n, path, YN_SCALAR, "a name"))
		return JITK_ESPEC;
	if (!is_ident(n->str))
		return ERR(c, n, path,
			   "'%s' is not a name (letters, digits and '_', not starting with a digit)",
			   q(n->str));
	*out = jitk__strdup(n->str);
	return *out ? 0 : jitk__error(JITK_ENOMEM, "out of memory");
}

static int get_int(const sctx *c, const ynode *n, const char *path,
		   int64_t *out)
{
	const char *s;
	int neg = 0;
	uint64_t v = 0;

	if (want_kind(c, n, path, YN_SCALAR, "an integer"))
		return JITK_ESPEC;
	if (!n->plain)
		return ERR(c, n, path, "expected an integer, got the quoted string '%s'",
			   q(n->str));
	s = n->str;
	if (*s == '-' || *s == '+')
		neg = *s++ == '-';
	if (!isdigit((unsigned char)*s))
		return ERR(c, n, path, "expected an integer, got '%s'", q(n->str));
	if (s[0] == '0' && s[1])
		return ERR(c, n, path,
			   "'%s': leading zeros are not allowed (YAML 1.1 reads them as octal)",
			   q(n->str));
	for (; *s; s++) {
		if (!isdigit((unsigned char)*s))
			return ERR(c, n, path, "expected an integer, got '%s'", q(n->str));
		if (v > (UINT64_MAX - 9) / 10)
			return ERR(c, n, path, "integer '%s' is out of range", q(n->str));
		v = v * 10 + (uint64_t)(*s - '0');
	}
	if (v > (uint64_t)INT64_MAX + (uint64_t)neg)
		return ERR(c, n, path, "integer '%s' is out of range", q(n->str));
	*out = neg ? (int64_t)(0 - v) : (int64_t)v;
	return 0;
}

static int get_bool(const sctx *c, const ynode *n, const char *path, int *out)
{
	if (want_kind(c, n, path, YN_SCALAR, "true or false"))
		return JITK_ESPEC;
	if (n->plain && !strcmp(n->str, "true"))
		*out = 1;
	else if (n->plain && !strcmp(n->str, "false"))
		*out = 0;
	else
		return ERR(c, n, path, "expected true or false, got '%s'", q(n->str));
	return 0;
}

static int get_arch(const sctx *c, const ynode *n, const char *path, int *out)
{
	jitk_arch a;

	if (want_kind(c, n, path, YN_SCALAR, "an architecture like sm_90"))
		return JITK_ESPEC;
	if (jitk__arch_parse(&a, n->str) || a.kind != 's' || a.suffix)
		return ERR(c, n, path, "expected an architecture like sm_90, got '%s'",
			   q(n->str));
	*out = a.cc;
	return 0;
}

/* ----------------------------------------------------------- pieces */

/* Characters in the first n bytes of s. */
static size_t chars_before_pos(const char *s, size_t n)
{
	size_t i, k = 0;

	for (i = 0; i < n && s[i]; i++)
		k += ((unsigned char)s[i] & 0xc0) != 0x80;
	return k;
}

/* The reason of a jitk__read_file error, without its "PATH: " prefix. */
static const char *read_reason(const char *path)
{
	const char *m = jitk_error_last()->message;
	size_t n = strlen(path);

	return !strncmp(m, path, n) && !strncmp(m + n, ": ", 2) ? m + n + 2 : m;
}


static char *subpath(const char *path, const char *key)
{
	return *path ? jitk__asprintf("%s.%s", path, key) : jitk__strdup(key);
}

/* A value of parameter p from node n, checked against its allowed set. */
static int get_param_value(const sctx *c, const spec_param *p, const ynode *n,
			   const char *path, int64_t *out)
{
	size_t i;
	int b, rc;

	switch (p->type) {
	case PT_BOOL:
		if ((rc = get_bool(c, n, path, &b)))
			return rc;
		*out = b;
		return 0;
	case PT_ENUM:
		if (want_kind(c, n, path, YN_SCALAR, "a value name"))
			return JITK_ESPEC;
		for (i = 0; i < p->nvalues; i++)
			if (!strcmp(n->str, p->values[i])) {
				*out = (int64_t)i;
				return 0;
			}
		{
			jbuf list;

			jitk__jbuf_init(&list);
			for (i = 0; i < p->nvalues; i++)
				jitk__jbuf_printf(&list, "%s%s", i ? ", " : "", p->values[i]);
			rc = ERR(c, n, path, "value '%s' is not allowed for '%s' (allowed: %s)",
				 q(n->str), q(p->name), q(list.data ? list.data : ""));
			jitk__jbuf_free(&list);
			return rc;
		}
	case PT_INT:
		if ((rc = get_int(c, n, path, out)))
			return rc;
		if (*out < p->min || *out > p->max)
			return ERR(c, n, path,
				   "value %lld is out of range for '%s' (%lld to %lld)",
				   (long long)*out, q(p->name), (long long)p->min,
				   (long long)p->max);
		if (p->multiple_of > 1 && *out % p->multiple_of)
			return ERR(c, n, path, "value %lld for '%s' is not a multiple of %lld",
				   (long long)*out, q(p->name), (long long)p->multiple_of);
		if (p->nallowed) {
			for (i = 0; i < p->nallowed; i++)
				if (p->allowed[i] == *out)
					return 0;
			return ERR(c, n, path, "value %lld is not in the allowed values of '%s'",
				   (long long)*out, q(p->name));
		}
		return 0;
	}
	return ERR(c, n, path, "bad parameter type");
}

/* A scalar or a sequence of scalars, as a list of nodes. */
static int as_list(const sctx *c, const ynode *n, const char *path,
		   const ynode *const **items, size_t *count, const ynode **one)
{
	if (n->kind == YN_SEQ) {
		if (!n->n)
			return ERR(c, n, path, "empty list");
		*items = (const ynode *const *)n->kids;
		*count = n->n;
		return 0;
	}
	if (n->kind == YN_MAP)
		return ERR(c, n, path, "expected a value or a list of values, got a mapping");
	*one = n;
	*items = one;
	*count = 1;
	return 0;
}

static int parse_cond(const sctx *c, const spec_family *f, const ynode *n,
		      const char *path, spec_cond *out)
{
	size_t i, j;
	int rc;

	if (want_kind(c, n, path, YN_MAP, "a mapping of parameter values"))
		return JITK_ESPEC;
	out->terms = calloc(n->n ? n->n : 1, sizeof(*out->terms));
	if (!out->terms)
		return jitk__error(JITK_ENOMEM, "out of memory");
	for (i = 0; i < n->n; i++) {
		const ynode *k = ymap_key(n, i), *v = ymap_val(n, i), *one = NULL;
		const ynode *const *items;
		spec_term *t = &out->terms[out->n];
		int p = jitk__spec_param_index(f, k->str);
		size_t count;

		if (p < 0)
			return ERR(c, k, path, "unknown parameter '%s'", q(k->str));
		if ((rc = as_list(c, v, path, &items, &count, &one)))
			return rc;
		t->param = (size_t)p;
		t->vals = calloc(count, sizeof(*t->vals));
		if (!t->vals)
			return jitk__error(JITK_ENOMEM, "out of memory");
		out->n++;
		for (j = 0; j < count; j++) {
			if ((rc = get_param_value(c, &f->params[p], items[j], path,
						  &t->vals[j])))
				return rc;
			t->nvals++;
		}
	}
	return 0;
}

static int parse_arch_range(const sctx *c, const ynode *n, const char *path,
			    spec_arch_range *out)
{
	static const char *const keys[] = { "min", "max", NULL };
	const ynode *v;
	int rc;

	if (want_kind(c, n, path, YN_MAP, "a mapping with min and/or max"))
		return JITK_ESPEC;
	if ((rc = check_keys(c, n, path, keys, NULL)))
		return rc;
	if (!n->n)
		return ERR(c, n, path, "an architecture range needs min or max");
	out->min = out->max = 0;
	if ((v = jitk__ymap_get(n, "min")) && (rc = get_arch(c, v, path, &out->min)))
		return rc;
	if ((v = jitk__ymap_get(n, "max")) && (rc = get_arch(c, v, path, &out->max)))
		return rc;
	if (out->min && out->max && out->min > out->max)
		return ERR(c, n, path, "min is above max");
	return 0;
}

static int parse_gates(const sctx *c, const spec_family *f, const ynode *n,
		       const char *path, int allow_when, spec_gate **out,
		       size_t *count)
{
	static const char *const keys[] = { "when", "arch", "reason", NULL };
	static const char *const keys_nowhen[] = { "arch", "reason", NULL };
	static const char *const req[] = { "arch", "reason", NULL };
	size_t i;
	int rc;

	if (want_kind(c, n, path, YN_SEQ, "a list of gates"))
		return JITK_ESPEC;
	*out = calloc(n->n ? n->n : 1, sizeof(**out));
	if (!*out)
		return jitk__error(JITK_ENOMEM, "out of memory");
	for (i = 0; i < n->n; i++) {
		const ynode *g = n->kids[i], *v;
		spec_gate *gate = &(*out)[i];

		if (want_kind(c, g, path, YN_MAP, "a gate (a mapping)"))
			return JITK_ESPEC;
		if ((rc = check_keys(c, g, path, allow_when ? keys : keys_nowhen, req)))
			return rc;
		++*count;
		gate->loc = loc_of(c, g);
		if ((v = jitk__ymap_get(g, "when")) && (rc = parse_cond(c, f, v, path, &gate->when)))
			return rc;
		if ((rc = parse_arch_range(c, jitk__ymap_get(g, "arch"), path, &gate->arch)))
			return rc;
		if ((rc = get_text(c, jitk__ymap_get(g, "reason"), path, &gate->reason)))
			return rc;
	}
	return 0;
}

/* One more parameter, tuning key or derived value, named by n: a variant
 * binds them all, so a family has at most SPEC_MAX_NAMES. */
static int name_budget(const sctx *c, const spec_family *f, const ynode *n,
		       const char *path)
{
	if (f->nparams + f->ntuning_keys + f->nderived < SPEC_MAX_NAMES)
		return 0;
	return ERR(c, n, path, "'%s' is one name too many: a family has at most %d "
		   "parameters, tuning keys and derived values together",
		   q(n->str), SPEC_MAX_NAMES);
}

static int parse_params(const sctx *c, spec_family *f, const ynode *n)
{
	static const char *const keys[] = { "type", "values", "min", "max",
					    "multiple_of", "cpp", NULL };
	static const char *const req[] = { "type", NULL };
	size_t i, j;
	int rc;

	if (want_kind(c, n, "params", YN_MAP, "a mapping of parameters"))
		return JITK_ESPEC;
	f->params = calloc(n->n ? n->n : 1, sizeof(*f->params));
	if (!f->params)
		return jitk__error(JITK_ENOMEM, "out of memory");
	for (i = 0; i < n->n; i++) {
		const ynode *k = ymap_key(n, i), *d = ymap_val(n, i), *t, *v;
		spec_param *p = &f->params[i];
		char *path = subpath("params", k->str);

		if (!path)
			return jitk__error(JITK_ENOMEM, "out of memory");
		rc = 0;
		if (!is_ident(k->str)) {
			rc = ERR(c, k, "params", "'%s' is not a name", q(k->str));
			goto next;
		}
		if (want_kind(c, d, path, YN_MAP, "a parameter definition (a mapping)")) {
			rc = JITK_ESPEC;
			goto next;
		}
		if ((rc = check_keys(c, d, path, keys, req)))
			goto next;
		if ((rc = name_budget(c, f, k, "params")))
			goto next;
		p->name = jitk__strdup(k->str);
		if (!p->name) {
			free(path);
			return jitk__error(JITK_ENOMEM, "out of memory");
		}
		p->loc = loc_of(c, k);
		p->min = INT64_MIN;
		p->max = INT64_MAX;
		f->nparams++;
		t = jitk__ymap_get(d, "type");
		if (want_kind(c, t, path, YN_SCALAR, "int, bool or enum")) {
			rc = JITK_ESPEC;
			goto next;
		}
		if (!strcmp(t->str, "int")) {
			p->type = PT_INT;
		} else if (!strcmp(t->str, "bool")) {
			p->type = PT_BOOL;
		} else if (!strcmp(t->str, "enum")) {
			p->type = PT_ENUM;
		} else {
			rc = ERR(c, t, path, "unknown parameter type '%s' (int, bool or enum)",
				 q(t->str));
			goto next;
		}
		if (p->type != PT_INT) {
			const char *bad = jitk__ymap_get(d, "min") ? "min" :
					  jitk__ymap_get(d, "max") ? "max" :
					  jitk__ymap_get(d, "multiple_of") ? "multiple_of" : NULL;

			if (bad) {
				rc = ERR(c, jitk__ymap_get(d, bad), path, "'%s' applies to int parameters only", bad);
				goto next;
			}
		}
		if (p->type == PT_BOOL && (v = jitk__ymap_get(d, "values"))) {
			rc = ERR(c, v, path, "bool parameters take no values list");
			goto next;
		}
		if (p->type != PT_ENUM && (v = jitk__ymap_get(d, "cpp"))) {
			rc = ERR(c, v, path, "'cpp' applies to enum parameters only");
			goto next;
		}
		if (p->type == PT_ENUM) {
			if (!(v = jitk__ymap_get(d, "values"))) {
				rc = ERR(c, d, path, "missing required key 'values'");
				goto next;
			}
			if (want_kind(c, v, path, YN_SEQ, "a list of value names")) {
				rc = JITK_ESPEC;
				goto next;
			}
			if (!v->n) {
				rc = ERR(c, v, path, "empty list");
				goto next;
			}
			p->values = calloc(v->n, sizeof(*p->values));
			if (!p->values)
				return jitk__error(JITK_ENOMEM, "out of memory");
			for (j = 0; j < v->n; j++) {
				size_t m;

				if ((rc = get_ident(c, v->kids[j], path, &p->values[j])))
					goto next;
				p->nvalues++;
				for (m = 0; m < j; m++)
					if (!strcmp(p->values[m], p->values[j])) {
						rc = ERR(c, v->kids[j], path, "value '%s' listed twice",
							 q(p->values[j]));
						goto next;
					}
			}
			if (!(v = jitk__ymap_get(d, "cpp"))) {
				rc = ERR(c, d, path, "missing required key 'cpp' (the C++ enum type)");
				goto next;
			}
			if ((rc = get_string(c, v, path, &p->cpp)))
				goto next;
			if (!is_qualified(p->cpp)) {
				rc = ERR(c, v, path, "'%s' is not a C++ type name", q(p->cpp));
				goto next;
			}
		}
		if (p->type == PT_INT) {
			if ((v = jitk__ymap_get(d, "min")) && (rc = get_int(c, v, path, &p->min)))
				goto next;
			if ((v = jitk__ymap_get(d, "max")) && (rc = get_int(c, v, path, &p->max)))
				goto next;
			if (p->min > p->max) {
				rc = ERR(c, d, path, "min is above max");
				goto next;
			}
			if ((v = jitk__ymap_get(d, "multiple_of"))) {
				if ((rc = get_int(c, v, path, &p->multiple_of)))
					goto next;
				if (p->multiple_of < 1) {
					rc = ERR(c, v, path, "multiple_of must be at least 1");
					goto next;
				}
			}
			if ((v = jitk__ymap_get(d, "values"))) {
				if (want_kind(c, v, path, YN_SEQ, "a list of integers")) {
					rc = JITK_ESPEC;
					goto next;
				}
				p->allowed = calloc(v->n ? v->n : 1, sizeof(*p->allowed));
				if (!p->allowed)
					return jitk__error(JITK_ENOMEM, "out of memory");
				for (j = 0; j < v->n; j++) {
					if ((rc = get_int(c, v->kids[j], path, &p->allowed[j])))
						goto next;
					p->nallowed++;
				}
			}
		}
		for (j = 0; j < i; j++)
			if (!strcmp(f->params[j].name, p->name)) {
				rc = ERR(c, k, "params", "parameter '%s' defined twice", q(p->name));
				goto next;
			}
next:
		free(path);
		if (rc)
			return rc;
	}
	return 0;
}

static int name_defined(const spec_family *f, const char *name, size_t nderived)
{
	size_t i;

	if (jitk__spec_param_index(f, name) >= 0)
		return 1;
	for (i = 0; i < f->ntuning_keys; i++)
		if (!strcmp(f->tuning_keys[i], name))
			return 1;
	for (i = 0; i < nderived; i++)
		if (!strcmp(f->derived[i].name, name))
			return 1;
	return 0;
}

static int add_tuning_key(const sctx *c, spec_family *f, const ynode *n)
{
	const char *key = n->str;
	size_t i;
	char **k;
	int rc;

	for (i = 0; i < f->ntuning_keys; i++)
		if (!strcmp(f->tuning_keys[i], key))
			return 0;
	if ((rc = name_budget(c, f, n, "tuning")))
		return rc;
	k = realloc(f->tuning_keys, (f->ntuning_keys + 1) * sizeof(*k));
	if (!k)
		return jitk__error(JITK_ENOMEM, "out of memory");
	f->tuning_keys = k;
	k[f->ntuning_keys] = jitk__strdup(key);
	if (!k[f->ntuning_keys])
		return jitk__error(JITK_ENOMEM, "out of memory");
	f->ntuning_keys++;
	return 0;
}

static int parse_tuning(const sctx *c, spec_family *f, const ynode *n)
{
	size_t i, j;
	int rc;

	if (want_kind(c, n, "tuning", YN_SEQ, "a list of tuning entries"))
		return JITK_ESPEC;
	f->tuning = calloc(n->n ? n->n : 1, sizeof(*f->tuning));
	if (!f->tuning)
		return jitk__error(JITK_ENOMEM, "out of memory");
	for (i = 0; i < n->n; i++) {
		const ynode *e = n->kids[i];
		spec_tuning *t = &f->tuning[i];

		if (want_kind(c, e, "tuning", YN_MAP, "a tuning entry (a mapping)"))
			return JITK_ESPEC;
		f->ntuning++;
		t->loc = loc_of(c, e);
		t->arch_specific = -1;
		t->kv = calloc(e->n ? e->n : 1, sizeof(*t->kv));
		if (!t->kv)
			return jitk__error(JITK_ENOMEM, "out of memory");
		for (j = 0; j < e->n; j++) {
			const ynode *k = ymap_key(e, j), *v = ymap_val(e, j);
			spec_kv *kv;

			if (!strcmp(k->str, "arch")) {
				if ((rc = parse_arch_range(c, v, "tuning.arch", &t->arch)))
					return rc;
				continue;
			}
			if (!strcmp(k->str, "when")) {
				if ((rc = parse_cond(c, f, v, "tuning.when", &t->when)))
					return rc;
				continue;
			}
			if (!strcmp(k->str, "arch_specific")) {
				int b;

				if ((rc = get_bool(c, v, "tuning.arch_specific", &b)))
					return rc;
				t->arch_specific = b;
				continue;
			}
			if (!is_ident(k->str))
				return ERR(c, k, "tuning", "'%s' is not a name", q(k->str));
			if (jitk__spec_param_index(f, k->str) >= 0)
				return ERR(c, k, "tuning",
					   "'%s' is a parameter; tuning cannot set it", q(k->str));
			kv = &t->kv[t->n];
			kv->loc = loc_of(c, k);
			if (v->kind == YN_SCALAR && v->plain &&
			    (!strcmp(v->str, "true") || !strcmp(v->str, "false"))) {
				kv->value = !strcmp(v->str, "true");
			} else {
				char *path = subpath("tuning", k->str);

				rc = path ? get_int(c, v, path, &kv->value)
					  : jitk__error(JITK_ENOMEM, "out of memory");
				free(path);
				if (rc)
					return rc;
			}
			kv->key = jitk__strdup(k->str);
			if (!kv->key)
				return jitk__error(JITK_ENOMEM, "out of memory");
			t->n++;
			if ((rc = add_tuning_key(c, f, k)))
				return rc;
		}
	}
	return 0;
}

/* Which names an expression may use besides parameters, tuning keys and
 * derived values. */
enum { NAMES_SPEC = 0, NAMES_LAUNCH = 1, NAMES_SHAPE = 2 };

typedef struct {
	const sctx *c;
	const spec_family *f;
	const ynode *node;
	const char *path;
	size_t nderived;
	int names; /* NAMES_*: launch expressions may use integer arguments,
		    * sm_count and dims; shapes integer arguments and dims */
} name_check;

/* Columns from n's start to byte pos of its value, when the value is
 * written as is on one line (plain, or quoted without escapes); else 0:
 * the caret then points at the scalar. */
static int scalar_offset(const sctx *c, const ynode *n, int pos)
{
	const char *p = c->t ? c->t->text : NULL, *end;
	int line = 1, col = 1, quote;

	if (!p || strchr(n->str, '\n'))
		return 0;
	end = p + c->t->text_len;
	for (; p < end && line < n->line; p++)
		line += *p == '\n';
	for (; p < end && col < n->col && *p != '\n'; p++)
		col += ((unsigned char)*p & 0xc0) != 0x80;
	while (p < end && ((unsigned char)*p & 0xc0) == 0x80)
		p++;
	quote = !n->plain && p < end && (*p == '"' || *p == '\'');
	if (!n->plain && !quote)
		return 0;
	p += quote;
	if ((size_t)(end - p) < n->len || memcmp(p, n->str, n->len))
		return 0;
	return quote + (int)chars_before_pos(n->str, (size_t)pos);
}

static int check_name(void *ctx, const char *name, int pos)
{
	name_check *nc = ctx;
	const ynode *n = nc->node, *later;
	int col = n->col + scalar_offset(nc->c, n, pos);
	size_t i;

	if (name_defined(nc->f, name, nc->nderived))
		return 0;
	if (nc->names != NAMES_SPEC) {
		if (nc->names == NAMES_LAUNCH && !strcmp(name, "sm_count"))
			return 0;
		for (i = 0; i < nc->f->ndims; i++)
			if (!strcmp(nc->f->dims[i], name))
				return 0;
		for (i = 0; i < nc->f->nargs; i++)
			if (!strcmp(nc->f->args[i].name, name)) {
				if (nc->f->args[i].type == AT_I32 ||
				    nc->f->args[i].type == AT_I64)
					return 0;
				return err_at(nc->c, n->line, col, nc->path,
					      "argument '%s' is not an integer", q(name));
			}
	}
	/* A derived value used by itself or before its definition: say so,
	 * rather than "unknown" (derived values are computed in order, so
	 * there are no cycles). */
	later = nc->c->t ? jitk__ymap_get(nc->c->t->root, "derive") : NULL;
	for (i = nc->nderived; later && later->kind == YN_MAP && i < later->n; i++) {
		const ynode *k = ymap_key(later, i);

		if (strcmp(k->str, name))
			continue;
		if (ymap_val(later, i) == n)
			return err_at(nc->c, n->line, col, nc->path,
				      "derived value '%s' uses itself", q(name));
		return err_at(nc->c, n->line, col, nc->path,
			      "'%s' is derived later, at %d:%d (a derived value can use only "
			      "the ones above it)", q(name), k->line, k->col);
	}
	return err_at(nc->c, n->line, col, nc->path,
		      "unknown name '%s' in expression '%s'", q(name), q(n->str));
}

static int parse_expr(const sctx *c, const spec_family *f, const ynode *n,
		      const char *path, size_t nderived, int names,
		      spec_expr *out)
{
	char msg[160];
	int pos = 0;
	name_check nc = { c, f, n, path, nderived, names };

	if (want_kind(c, n, path, YN_SCALAR, "an expression"))
		return JITK_ESPEC;
	out->loc = loc_of(c, n);
	out->text = jitk__strdup(n->str);
	if (!out->text)
		return jitk__error(JITK_ENOMEM, "out of memory");
	if (jitk__expr_parse(&out->e, n->str, msg, sizeof(msg), &pos))
		return err_at(c, n->line, n->col + scalar_offset(c, n, pos), path,
			      "bad expression '%s': %s", q(n->str), msg);
	return jitk__expr_visit_names(out->e, check_name, &nc);
}

static int count_name(void *ctx, const char *name, int pos)
{
	(void)name;
	(void)pos;
	++*(int *)ctx;
	return 0;
}

/* A launch or alignment expression without names is a constant: check
 * its range now, at its line (a variable one is checked for every
 * variant by jitk__specialize). */
static int check_constant(const sctx *c, const ynode *n, const spec_expr *x,
			  const char *path, int64_t lo, int64_t hi, int pow2)
{
	char err[160];
	int64_t v;
	int names = 0;

	jitk__expr_visit_names(x->e, count_name, &names);
	if (names)
		return 0;
	if (jitk__expr_eval(x->e, NULL, NULL, &v, err, sizeof(err)))
		return ERR(c, n, path, "'%s' cannot be evaluated: %s", q(x->text), err);
	if (v >= lo && v <= hi && !(pow2 && (v & (v - 1))))
		return 0;
	snprintf(err, sizeof(err), "%lld", (long long)v);
	if (!strcmp(err, x->text))
		return ERR(c, n, path, "%lld is out of range; it must be %s%lld to %lld",
			   (long long)v, pow2 ? "a power of two from " : "", (long long)lo,
			   (long long)hi);
	return ERR(c, n, path, "'%s' is %lld; it must be %s%lld to %lld", q(x->text),
		   (long long)v, pow2 ? "a power of two from " : "", (long long)lo,
		   (long long)hi);
}

static int parse_derive(const sctx *c, spec_family *f, const ynode *n)
{
	size_t i;
	int rc;

	if (want_kind(c, n, "derive", YN_MAP, "a mapping of name: expression"))
		return JITK_ESPEC;
	f->derived = calloc(n->n ? n->n : 1, sizeof(*f->derived));
	if (!f->derived)
		return jitk__error(JITK_ENOMEM, "out of memory");
	for (i = 0; i < n->n; i++) {
		const ynode *k = ymap_key(n, i);
		spec_expr *d = &f->derived[i];

		if (!is_ident(k->str))
			return ERR(c, k, "derive", "'%s' is not a name", q(k->str));
		if (name_defined(f, k->str, i))
			return ERR(c, k, "derive", "'%s' is already defined", q(k->str));
		if ((rc = name_budget(c, f, k, "derive")))
			return rc;
		d->name = jitk__strdup(k->str);
		if (!d->name)
			return jitk__error(JITK_ENOMEM, "out of memory");
		f->nderived++;
		if ((rc = parse_expr(c, f, ymap_val(n, i), "derive", i, 0, d)))
			return rc;
	}
	return 0;
}

static int parse_checks(const sctx *c, spec_family *f, const ynode *n,
			const char *path, int names, spec_expr **out,
			size_t *count)
{
	static const char *const keys[] = { "check", "message", NULL };
	size_t i;
	int rc;

	if (want_kind(c, n, path, YN_SEQ, "a list of checks"))
		return JITK_ESPEC;
	*out = calloc(n->n ? n->n : 1, sizeof(**out));
	if (!*out)
		return jitk__error(JITK_ENOMEM, "out of memory");
	for (i = 0; i < n->n; i++) {
		const ynode *e = n->kids[i];
		spec_expr *x = &(*out)[i];

		if (want_kind(c, e, path, YN_MAP, "a check (a mapping)"))
			return JITK_ESPEC;
		if ((rc = check_keys(c, e, path, keys, keys)))
			return rc;
		++*count;
		if ((rc = parse_expr(c, f, jitk__ymap_get(e, "check"), path, f->nderived,
				     names, x)))
			return rc;
		if ((rc = get_text(c, jitk__ymap_get(e, "message"), path, &x->message)))
			return rc;
	}
	return 0;
}

static const spec_elem elem_types[] = {
	{ "bf16", "jitk::bf16", 4, 16 },
	{ "fp8_e4m3", "jitk::fp8_e4m3", 10, 8 },
	{ "f32", "float", 2, 32 },
	{ "i32", "int", 0, 32 },
	{ "i64", "long long", 0, 64 },
	{ "u8", "unsigned char", 1, 8 },
};

const spec_elem *jitk__spec_elem(const char *name)
{
	size_t i;

	for (i = 0; i < JITK_ARRAY_SIZE(elem_types); i++)
		if (!strcmp(elem_types[i].name, name))
			return &elem_types[i];
	return NULL;
}

/* The type of an argument: "const bf16" (a tensor when it has a shape),
 * "f32", "i32", "i64" (scalars). */
static int parse_arg_type(const sctx *c, spec_arg *a, const ynode *t, int tensor)
{
	const char *s;
	char name[16];
	size_t len;

	if (want_kind(c, t, "args.type", YN_SCALAR, "a type like 'const bf16'"))
		return JITK_ESPEC;
	s = t->str;
	if (!strncmp(s, "const ", 6)) {
		a->is_const = 1;
		s += 6;
	}
	len = strlen(s);
	if (len && s[len - 1] == '*')
		return ERR(c, t, "args.type",
			   "'%s': pointer arguments are tensors: write the element type "
			   "('const bf16' for an input) and give a shape", q(t->str));
	if (len >= sizeof(name) || !(a->elem = (snprintf(name, sizeof(name), "%s", s),
						  jitk__spec_elem(name))))
		return ERR(c, t, "args.type",
			   "unknown type '%s' (bf16, fp8_e4m3, f32, i32, i64, u8; 'const' for input tensors)",
			   q(t->str));
	if (tensor) {
		a->type = AT_TENSOR;
		a->cpp = jitk__asprintf("%s%s *", a->is_const ? "const " : "", a->elem->cpp);
	} else {
		if (a->is_const)
			return ERR(c, t, "args.type", "'const' applies to tensors only (give a shape)");
		if (!strcmp(s, "f32"))
			a->type = AT_F32;
		else if (!strcmp(s, "i32"))
			a->type = AT_I32;
		else if (!strcmp(s, "i64"))
			a->type = AT_I64;
		else
			return ERR(c, t, "args.type", "'%s' can only be a tensor: give its shape", s);
		a->cpp = jitk__strdup(a->elem->cpp);
	}
	return a->cpp ? 0 : jitk__error(JITK_ENOMEM, "out of memory");
}

/* A list of shape or stride expressions. */
static int parse_dims(const sctx *c, spec_family *f, const ynode *n, const char *path,
		      size_t want, spec_expr **out, size_t *count)
{
	size_t i;
	int rc;

	if (want_kind(c, n, path, YN_SEQ, "a list of dimensions"))
		return JITK_ESPEC;
	if (!n->n || n->n > JITK_MAX_DIMS)
		return ERR(c, n, path, "a tensor has 1 to %d dimensions", JITK_MAX_DIMS);
	if (want && n->n != want)
		return ERR(c, n, path, "%zu strides for %zu dimensions", n->n, want);
	*out = calloc(n->n, sizeof(**out));
	if (!*out)
		return jitk__error(JITK_ENOMEM, "out of memory");
	for (i = 0; i < n->n; i++) {
		++*count;
		if ((rc = parse_expr(c, f, n->kids[i], path, f->nderived, NAMES_SHAPE,
				     &(*out)[i])))
			return rc;
	}
	return 0;
}

static int parse_default(const sctx *c, spec_arg *a, const ynode *v)
{
	char *end;
	int rc;

	if (a->type == AT_TENSOR)
		return ERR(c, v, "args.default", "'default' applies to scalar arguments only");
	a->has_default = 1;
	if (a->type != AT_F32) {
		if ((rc = get_int(c, v, "args.default", &a->def_i)))
			return rc;
		if (a->type == AT_I32 && (a->def_i < INT32_MIN || a->def_i > INT32_MAX))
			return ERR(c, v, "args.default", "%lld is out of range for i32",
				   (long long)a->def_i);
		return 0;
	}
	if (want_kind(c, v, "args.default", YN_SCALAR, "a number"))
		return JITK_ESPEC;
	errno = 0;
	a->def_f = strtof(v->str, &end);
	if (!v->plain || end == v->str || *end || errno || !isfinite(a->def_f))
		return ERR(c, v, "args.default", "expected a finite number, got '%s'", q(v->str));
	return 0;
}

static int parse_arg(const sctx *c, spec_family *f, spec_arg *a, const ynode *k,
		     const ynode *e)
{
	static const char *const keys[] = { "type", "shape", "strides", "io", "align",
					    "nullable", "configured", "default", "when",
					    NULL };
	static const char *const req[] = { "type", NULL };
	const ynode *v;
	int rc;

	if (want_kind(c, e, "args", YN_MAP, "an argument (a mapping)"))
		return JITK_ESPEC;
	if ((rc = check_keys(c, e, "args", keys, req)))
		return rc;
	if ((rc = parse_arg_type(c, a, jitk__ymap_get(e, "type"), jitk__ymap_get(e, "shape") != NULL)))
		return rc;
	if (a->type != AT_TENSOR) {
		static const char *const tensor_only[] = { "strides", "io", "align", "nullable",
							   "configured", NULL };
		size_t i;

		for (i = 0; tensor_only[i]; i++)
			if ((v = jitk__ymap_get(e, tensor_only[i])))
				return ERR(c, v, "args", "'%s' applies to tensors only (give a shape)",
					   tensor_only[i]);
	}
	a->io = IO_IN;
	if ((v = jitk__ymap_get(e, "io"))) {
		if (want_kind(c, v, "args.io", YN_SCALAR, "in, out or inout"))
			return JITK_ESPEC;
		if (!strcmp(v->str, "in"))
			a->io = IO_IN;
		else if (!strcmp(v->str, "out"))
			a->io = IO_OUT;
		else if (!strcmp(v->str, "inout"))
			a->io = IO_INOUT;
		else
			return ERR(c, v, "args.io", "expected in, out or inout, got '%s'", q(v->str));
		if (a->is_const && a->io != IO_IN)
			return ERR(c, v, "args.io", "a const tensor is an input; drop 'const' to write it");
		if (!a->is_const && a->io == IO_IN)
			return ERR(c, v, "args.io", "a tensor the kernel only reads is 'const'");
	} else if (a->type == AT_TENSOR && !a->is_const) {
		a->io = IO_OUT;
	}
	if ((v = jitk__ymap_get(e, "align"))) {
		/* A name or expression (align: vec_bytes) is checked when the
		 * variant is known; a constant, now. */
		if ((rc = parse_expr(c, f, v, "args.align", f->nderived, NAMES_SPEC, &a->align)) ||
		    (rc = check_constant(c, v, &a->align, "args.align", 1, SPEC_MAX_ALIGN, 1)))
			return rc;
	} else if (a->type == AT_TENSOR) {
		char num[8];
		int pos;

		snprintf(num, sizeof(num), "%d", a->elem->bits / 8);
		a->align.text = jitk__strdup(num);
		a->align.loc = a->loc;
		if (!a->align.text || jitk__expr_parse(&a->align.e, num, num, sizeof(num), &pos))
			return jitk__error(JITK_ENOMEM, "out of memory");
	}
	if ((v = jitk__ymap_get(e, "nullable")) &&
	    (rc = get_bool(c, v, "args.nullable", &a->nullable)))
		return rc;
	if ((v = jitk__ymap_get(e, "configured"))) {
		if (want_kind(c, v, "args.configured", YN_SCALAR, "a rule (positive_finite)"))
			return JITK_ESPEC;
		if (strcmp(v->str, "positive_finite"))
			return ERR(c, v, "args.configured", "unknown rule '%s' (positive_finite)",
				   q(v->str));
		if (strcmp(a->elem->name, "f32") || !a->is_const)
			return ERR(c, v, "args.configured", "a configured tensor is a const f32");
		a->configured = RULE_POSITIVE_FINITE;
	}
	if ((v = jitk__ymap_get(e, "default")) && (rc = parse_default(c, a, v)))
		return rc;
	if ((v = jitk__ymap_get(e, "when")) &&
	    (rc = parse_cond(c, f, v, "args.when", &a->when)))
		return rc;
	(void)k;
	return 0;
}

static int parse_args(const sctx *c, spec_family *f, const ynode *n)
{
	size_t i;
	int rc;

	if (want_kind(c, n, "args", YN_MAP, "a mapping of arguments, in the kernel's order"))
		return JITK_ESPEC;
	if (n->n > JITK_MAX_SPEC_ARGS)
		return ERR(c, n, "args", "more than %d arguments", JITK_MAX_SPEC_ARGS);
	f->args = calloc(n->n ? n->n : 1, sizeof(*f->args));
	if (!f->args)
		return jitk__error(JITK_ENOMEM, "out of memory");
	for (i = 0; i < n->n; i++) {
		const ynode *k = ymap_key(n, i);
		spec_arg *a = &f->args[i];

		if (!is_ident(k->str))
			return ERR(c, k, "args", "'%s' is not a name", q(k->str));
		f->nargs++;
		a->loc = loc_of(c, k);
		if (!(a->name = jitk__strdup(k->str)))
			return jitk__error(JITK_ENOMEM, "out of memory");
		if ((rc = parse_arg(c, f, a, k, ymap_val(n, i))))
			return rc;
		/* Scalars are names in expressions; tensors are not. */
		if (a->type != AT_TENSOR &&
		    (name_defined(f, k->str, f->nderived) || !strcmp(k->str, "sm_count")))
			return ERR(c, k, "args", "argument '%s' has the name of a parameter, tuning key "
				   "or derived value", q(k->str));
	}
	/* Shapes and strides last: they may name any integer argument. */
	for (i = 0; i < n->n; i++) {
		const ynode *e = ymap_val(n, i), *v;
		spec_arg *a = &f->args[i];

		if ((v = jitk__ymap_get(e, "shape")) &&
		    (rc = parse_dims(c, f, v, "args.shape", 0, &a->shape, &a->ndim)))
			return rc;
		if ((v = jitk__ymap_get(e, "strides"))) {
			size_t ns = 0;

			if ((rc = parse_dims(c, f, v, "args.strides", a->ndim, &a->strides, &ns)))
				return rc;
		}
		if (a->configured && (a->ndim != 1 || strcmp(a->shape[0].text, "1")))
			return ERR(c, jitk__ymap_get(e, "configured"), "args.configured",
				   "a configured tensor has shape [1]");
	}
	return 0;
}

static int parse_dim_names(const sctx *c, spec_family *f, const ynode *n)
{
	size_t i, j;
	int rc;

	if (want_kind(c, n, "dims", YN_SEQ, "a list of names"))
		return JITK_ESPEC;
	f->dims = calloc(n->n ? n->n : 1, sizeof(*f->dims));
	if (!f->dims)
		return jitk__error(JITK_ENOMEM, "out of memory");
	for (i = 0; i < n->n; i++) {
		if ((rc = get_ident(c, n->kids[i], "dims", &f->dims[i])))
			return rc;
		f->ndims++;
		if (name_defined(f, f->dims[i], f->nderived))
			return ERR(c, n->kids[i], "dims", "'%s' is already defined", q(f->dims[i]));
		for (j = 0; j < i; j++)
			if (!strcmp(f->dims[j], f->dims[i]))
				return ERR(c, n->kids[i], "dims", "'%s' listed twice", q(f->dims[i]));
	}
	return 0;
}

static int parse_may_alias(const sctx *c, spec_family *f, const ynode *n)
{
	size_t i, j;

	if (want_kind(c, n, "may_alias", YN_SEQ, "a list of argument pairs"))
		return JITK_ESPEC;
	f->may_alias = calloc(n->n ? n->n : 1, sizeof(*f->may_alias));
	if (!f->may_alias)
		return jitk__error(JITK_ENOMEM, "out of memory");
	for (i = 0; i < n->n; i++) {
		const ynode *p = n->kids[i];

		if (want_kind(c, p, "may_alias", YN_SEQ, "a pair [a, b]"))
			return JITK_ESPEC;
		if (p->n != 2)
			return ERR(c, p, "may_alias", "expected a pair of tensor arguments");
		for (j = 0; j < 2; j++) {
			int k;

			if (want_kind(c, p->kids[j], "may_alias", YN_SCALAR, "an argument name"))
				return JITK_ESPEC;
			k = jitk__spec_arg_index(f, p->kids[j]->str);
			if (k < 0 || f->args[k].type != AT_TENSOR)
				return ERR(c, p->kids[j], "may_alias", "'%s' is not a tensor argument",
					   q(p->kids[j]->str));
			f->may_alias[i][j] = (size_t)k;
		}
		f->nmay_alias++;
	}
	return 0;
}

int jitk__spec_arg_index(const spec_family *f, const char *name)
{
	size_t i;

	for (i = 0; i < f->nargs; i++)
		if (!strcmp(f->args[i].name, name))
			return (int)i;
	return -1;
}

static int parse_launch(const sctx *c, spec_family *f, const ynode *n)
{
	static const char *const keys[] = { "grid", "block", "shared_bytes",
					    "checks", "programmatic", NULL };
	static const char *const req[] = { "grid", "block", NULL };
	const ynode *v;
	int rc;

	if (want_kind(c, n, "launch", YN_MAP, "a mapping"))
		return JITK_ESPEC;
	if ((rc = check_keys(c, n, "launch", keys, req)))
		return rc;
	if ((rc = parse_expr(c, f, jitk__ymap_get(n, "grid"), "launch.grid",
			     f->nderived, 1, &f->grid)))
		return rc;
	v = jitk__ymap_get(n, "block");
	if ((rc = parse_expr(c, f, v, "launch.block", f->nderived, 0, &f->block)) ||
	    (rc = check_constant(c, v, &f->block, "launch.block", 1, SPEC_MAX_BLOCK, 0)))
		return rc;
	if ((v = jitk__ymap_get(n, "shared_bytes")) &&
	    ((rc = parse_expr(c, f, v, "launch.shared_bytes", f->nderived, 0, &f->smem)) ||
	     (rc = check_constant(c, v, &f->smem, "launch.shared_bytes", 0,
				  SPEC_MAX_SHARED_BYTES, 0))))
		return rc;
	if ((v = jitk__ymap_get(n, "checks")) &&
	    (rc = parse_checks(c, f, v, "launch.checks", 1, &f->checks, &f->nchecks)))
		return rc;
	if ((v = jitk__ymap_get(n, "programmatic")) &&
	    (rc = get_bool(c, v, "launch.programmatic", &f->programmatic)))
		return rc;
	return 0;
}

/* NVRTC options a spec may add: an allow list (base/util.c) of options that
 * neither read nor write files, change the target or the kind of output,
 * nor break the numeric contract. jitk__tu_make checks again. */
static int check_option(const sctx *c, const ynode *n)
{
	const char *why = jitk__nvrtc_option_problem(n->str);
	char shown[80];
	size_t i;

	if (!why)
		return 0;
	for (i = 0; n->str[i] && i + 1 < sizeof(shown); i++)
		shown[i] = (unsigned char)n->str[i] < 0x20 || (unsigned char)n->str[i] >= 0x7f
				   ? '?' : n->str[i];
	shown[i] = '\0';
	return ERR(c, n, "nvrtc_options", "option '%s%s' is not allowed in a spec: %s", shown,
		   n->str[i] ? "..." : "", why);
}

/* ----------------------------------------------------------- symbols */

/* fallback: [ symbol, { symbol: { callee_arg: caller_arg | flat(caller_arg) } } ]
 * Names are checked when the symbols are linked. */
static int parse_fallback(const sctx *c, spec_symbol *s, const ynode *v, const char *path)
{
	size_t j, m;
	int rc;

	if (want_kind(c, v, path, YN_SEQ, "a list of fallback steps"))
		return JITK_ESPEC;
	if (v->n > SPEC_MAX_FALLBACKS)
		return ERR(c, v->kids[SPEC_MAX_FALLBACKS], path, "more than %d fallbacks",
			   SPEC_MAX_FALLBACKS);
	s->fallback = calloc(v->n ? v->n : 1, sizeof(*s->fallback));
	if (!s->fallback)
		return jitk__error(JITK_ENOMEM, "out of memory");
	for (j = 0; j < v->n; j++) {
		const ynode *step = v->kids[j], *name = step, *map = NULL;
		spec_fallback *fb = &s->fallback[j];

		if (step->kind == YN_MAP) {
			if (step->n != 1)
				return ERR(c, step, path, "a fallback step is a symbol, or one "
					   "'symbol: { argument: argument }' mapping");
			name = ymap_key(step, 0);
			map = ymap_val(step, 0);
		}
		s->nfallback++;
		fb->loc = loc_of(c, name);
		if ((rc = get_ident(c, name, path, &fb->symbol)))
			return rc;
		if (!map)
			continue;
		if (want_kind(c, map, path, YN_MAP, "a mapping of callee argument: caller argument"))
			return JITK_ESPEC;
		fb->map = calloc(map->n ? map->n : 1, sizeof(*fb->map));
		if (!fb->map)
			return jitk__error(JITK_ENOMEM, "out of memory");
		for (m = 0; m < map->n; m++) {
			const ynode *ck = ymap_key(map, m), *cv = ymap_val(map, m);
			spec_argmap *am = &fb->map[m];
			const char *t;
			size_t len;

			fb->nmap++;
			am->loc = loc_of(c, cv);
			if ((rc = get_ident(c, ck, path, &am->callee)))
				return rc;
			if (want_kind(c, cv, path, YN_SCALAR, "an argument name or flat(name)"))
				return JITK_ESPEC;
			t = cv->str;
			len = strlen(t);
			if (!strncmp(t, "flat(", 5) && len > 6 && t[len - 1] == ')') {
				am->flat = 1;
				am->caller = jitk__strndup(t + 5, len - 6);
			} else {
				am->caller = jitk__strdup(t);
			}
			if (!am->caller)
				return jitk__error(JITK_ENOMEM, "out of memory");
			if (!is_ident(am->caller))
				return ERR(c, cv, path, "'%s' is not an argument name or flat(name)", q(t));
		}
	}
	return 0;
}


/* How many instances s expands to, checked against the limits before
 * anything is allocated for them: the product of the value counts
 * (overflow-checked), and the running total of the set. */
static int count_instances(const sctx *c, const spec_family *f, spec_symbol *s,
			   const ynode *key)
{
	size_t total = 1, i;
	int overflow = 0;

	for (i = 0; i < f->nparams; i++)
		overflow |= __builtin_mul_overflow(total, s->nvals[i], &total);
	if (overflow)
		return ERR(c, key, "symbols",
			   "symbol '%s' expands to more than 2^64 instances (one per combination "
			   "of the listed values); the limit is %d",
			   q(s->name), SPEC_MAX_SYMBOL_INSTANCES);
	if (total > SPEC_MAX_SYMBOL_INSTANCES)
		return ERR(c, key, "symbols",
			   "symbol '%s' expands to %zu instances (one per combination of the "
			   "listed values); the limit is %d",
			   q(s->name), total, SPEC_MAX_SYMBOL_INSTANCES);
	if (total > SPEC_MAX_INSTANCES - c->set->nplanned)
		return ERR(c, key, "symbols",
			   "symbol '%s' brings the spec set to %zu instances; the limit is %d",
			   q(s->name), c->set->nplanned + total, SPEC_MAX_INSTANCES);
	c->set->nplanned += total;
	s->ninsts = total;
	return 0;
}

static int parse_symbol(const sctx *c, spec_family *f, const ynode *k,
			const ynode *d, spec_symbol **out)
{
	static const char *const keys[] = { "params", "gates", "fallback",
					    "description", NULL };
	static const char *const req[] = { "params", NULL };
	spec_symbol *s;
	const ynode *params, *v;
	char *path = NULL, *ppath = NULL;
	size_t i, j;
	int rc;

	*out = NULL;
	if (!is_ident(k->str))
		return ERR(c, k, "symbols", "'%s' is not a name", q(k->str));
	path = subpath("symbols", k->str);
	if (!path)
		return jitk__error(JITK_ENOMEM, "out of memory");
	s = calloc(1, sizeof(*s));
	if (!s) {
		free(path);
		return jitk__error(JITK_ENOMEM, "out of memory");
	}
	*out = s;
	s->fam = f;
	s->loc = loc_of(c, k);
	s->name = jitk__strdup(k->str);
	s->vals = calloc(f->nparams ? f->nparams : 1, sizeof(*s->vals));
	s->nvals = calloc(f->nparams ? f->nparams : 1, sizeof(*s->nvals));
	if (!s->name || !s->vals || !s->nvals) {
		rc = jitk__error(JITK_ENOMEM, "out of memory");
		goto done;
	}
	if (want_kind(c, d, path, YN_MAP, "a symbol definition (a mapping)")) {
		rc = JITK_ESPEC;
		goto done;
	}
	if ((rc = check_keys(c, d, path, keys, req)))
		goto done;
	params = jitk__ymap_get(d, "params");
	ppath = subpath(path, "params");
	if (!ppath) {
		rc = jitk__error(JITK_ENOMEM, "out of memory");
		goto done;
	}
	if (want_kind(c, params, ppath, YN_MAP, "a mapping of parameter values")) {
		rc = JITK_ESPEC;
		goto done;
	}
	for (i = 0; i < params->n; i++) {
		const ynode *pk = ymap_key(params, i);

		if (jitk__spec_param_index(f, pk->str) < 0) {
			rc = ERR(c, pk, ppath, "unknown parameter '%s' of family '%s'",
				 q(pk->str), q(f->name));
			goto done;
		}
	}
	for (i = 0; i < f->nparams; i++) {
		const ynode *pv = jitk__ymap_get(params, f->params[i].name), *one = NULL;
		const ynode *const *items;
		size_t count;

		if (!pv) {
			rc = ERR(c, params, ppath, "missing value for parameter '%s'",
				 q(f->params[i].name));
			goto done;
		}
		if ((rc = as_list(c, pv, ppath, &items, &count, &one)))
			goto done;
		s->vals[i] = calloc(count, sizeof(**s->vals));
		if (!s->vals[i]) {
			rc = jitk__error(JITK_ENOMEM, "out of memory");
			goto done;
		}
		for (j = 0; j < count; j++) {
			size_t m;

			if ((rc = get_param_value(c, &f->params[i], items[j], ppath,
						  &s->vals[i][j])))
				goto done;
			s->nvals[i]++;
			for (m = 0; m < j; m++)
				if (s->vals[i][m] == s->vals[i][j]) {
					rc = ERR(c, items[j], ppath, "value listed twice");
					goto done;
				}
		}
	}
	if ((rc = count_instances(c, f, s, k)))
		goto done;
	if ((v = jitk__ymap_get(d, "gates")) &&
	    (rc = parse_gates(c, f, v, path, 0, &s->gates, &s->ngates)))
		goto done;
	if ((v = jitk__ymap_get(d, "fallback")) && (rc = parse_fallback(c, s, v, path)))
		goto done;
	if ((v = jitk__ymap_get(d, "description")) &&
	    (rc = get_string(c, v, path, &s->description)))
		goto done;
	rc = 0;
done:
	free(path);
	free(ppath);
	return rc;
}

/* The template must be a readable regular file with something in it: read
 * it now (never blocking on a FIFO or device) so that a wrong path fails
 * at its line, not in NVRTC with a confusing static_assert. */
static int check_template(const sctx *c, const ynode *v, const char *path)
{
	struct stat st;
	char *text = NULL;
	size_t len = 0, i;
	int rc;

	if (stat(path, &st))
		return ERR(c, v, "template", "template file '%s' not found (%s)", q(v->str),
			   strerror(errno));
	rc = jitk__read_file(&text, &len, path, SPEC_MAX_TEMPLATE_BYTES);
	if (rc == JITK_ENOMEM)
		return rc;
	if (rc == JITK_EINVAL)
		return ERR(c, v, "template", "template '%s' is larger than the %u-byte limit",
			   q(v->str), SPEC_MAX_TEMPLATE_BYTES);
	if (rc) {
		char *why = jitk__strdup(read_reason(path));

		rc = ERR(c, v, "template", "template '%s' cannot be read: %s", q(v->str),
			 why ? why : "out of memory");
		free(why);
		return rc;
	}
	for (i = 0; i < len && isspace((unsigned char)text[i]); i++)
		;
	free(text);
	if (i == len)
		return ERR(c, v, "template", "template '%s' is empty", q(v->str));
	return 0;
}

static void family_free(spec_family *f);
static void symbol_free(spec_symbol *s);

static int grow(void **arr, size_t count, size_t size)
{
	void *p = realloc(*arr, (count + 1) * size);

	if (!p)
		return jitk__error(JITK_ENOMEM, "out of memory");
	*arr = p;
	return 0;
}

static int parse_family(sctx *c, const ynode *root)
{
	static const char *const keys[] = {
		"family", "description", "template", "kernel", "params", "gates",
		"tuning", "derive", "constraints", "dims", "args", "may_alias",
		"launch", "nvrtc_options", "symbols", NULL
	};
	static const char *const req[] = { "family", "template", "kernel",
					   "params", "args", "launch", "symbols",
					   NULL };
	spec_set *set = c->set;
	spec_family *f;
	const ynode *v, *syms;
	size_t i;
	int rc;

	if (want_kind(c, root, "", YN_MAP, "a mapping at the top level"))
		return JITK_ESPEC;
	if ((rc = check_keys(c, root, "", keys, req)))
		return rc;
	f = calloc(1, sizeof(*f));
	if (!f || grow((void **)&set->fams, set->nfams, sizeof(*set->fams))) {
		free(f);
		return jitk__error(JITK_ENOMEM, "out of memory");
	}
	set->fams[set->nfams++] = f;
	f->loc = loc_of(c, root);
	f->file = jitk__strdup(c->file);
	if (!f->file)
		return jitk__error(JITK_ENOMEM, "out of memory");
	v = jitk__ymap_get(root, "family");
	if ((rc = get_ident(c, v, "family", &f->name)))
		return rc;
	for (i = 0; i + 1 < set->nfams; i++)
		if (!strcmp(set->fams[i]->name, f->name))
			return ERR(c, v, "family", "family '%s' is already defined at %s:%d:%d",
				   q(f->name), set->fams[i]->loc.file, set->fams[i]->loc.line,
				   set->fams[i]->loc.col);
	if ((v = jitk__ymap_get(root, "description")) &&
	    (rc = get_string(c, v, "description", &f->description)))
		return rc;
	v = jitk__ymap_get(root, "template");
	if ((rc = get_string(c, v, "template", &f->template_path)))
		return rc;
	if (f->template_path[0] != '/') {
		const char *slash = strrchr(c->file, '/');
		char *full = slash ? jitk__asprintf("%.*s/%s", (int)(slash - c->file),
						   c->file, f->template_path)
				   : jitk__strdup(f->template_path);

		if (!full)
			return jitk__error(JITK_ENOMEM, "out of memory");
		free(f->template_path);
		f->template_path = full;
	}
	if ((rc = check_template(c, v, f->template_path)))
		return rc;
	v = jitk__ymap_get(root, "kernel");
	if ((rc = get_string(c, v, "kernel", &f->kernel)))
		return rc;
	if (!is_qualified(f->kernel))
		return ERR(c, v, "kernel", "'%s' is not a C++ name", q(f->kernel));
	if ((rc = parse_params(c, f, jitk__ymap_get(root, "params"))))
		return rc;
	if ((v = jitk__ymap_get(root, "gates")) &&
	    (rc = parse_gates(c, f, v, "gates", 1, &f->gates, &f->ngates)))
		return rc;
	if ((v = jitk__ymap_get(root, "tuning")) && (rc = parse_tuning(c, f, v)))
		return rc;
	if ((v = jitk__ymap_get(root, "derive")) && (rc = parse_derive(c, f, v)))
		return rc;
	if ((v = jitk__ymap_get(root, "constraints")) &&
	    (rc = parse_checks(c, f, v, "constraints", 0, &f->constraints,
			       &f->nconstraints)))
		return rc;
	if ((v = jitk__ymap_get(root, "dims")) && (rc = parse_dim_names(c, f, v)))
		return rc;
	if ((rc = parse_args(c, f, jitk__ymap_get(root, "args"))))
		return rc;
	if ((v = jitk__ymap_get(root, "may_alias")) && (rc = parse_may_alias(c, f, v)))
		return rc;
	if ((rc = parse_launch(c, f, jitk__ymap_get(root, "launch"))))
		return rc;
	if ((v = jitk__ymap_get(root, "nvrtc_options"))) {
		if (want_kind(c, v, "nvrtc_options", YN_SEQ, "a list of options"))
			return JITK_ESPEC;
		f->options = calloc(v->n ? v->n : 1, sizeof(*f->options));
		if (!f->options)
			return jitk__error(JITK_ENOMEM, "out of memory");
		for (i = 0; i < v->n; i++) {
			if ((rc = get_string(c, v->kids[i], "nvrtc_options", &f->options[i])))
				return rc;
			f->noptions++;
			if ((rc = check_option(c, v->kids[i])))
				return rc;
		}
	}
	syms = jitk__ymap_get(root, "symbols");
	if (want_kind(c, syms, "symbols", YN_MAP, "a mapping of symbols"))
		return JITK_ESPEC;
	if (!syms->n)
		return ERR(c, syms, "symbols", "a family needs at least one symbol");
	for (i = 0; i < syms->n; i++) {
		spec_symbol *s = NULL;

		rc = parse_symbol(c, f, ymap_key(syms, i), ymap_val(syms, i), &s);
		if (s && grow((void **)&set->syms, set->nsyms, sizeof(*set->syms))) {
			symbol_free(s);
			return JITK_ENOMEM;
		}
		if (s)
			set->syms[set->nsyms++] = s;
		if (rc)
			return rc;
		/* A symbol defined twice is found when the names are sorted. */
	}
	return 0;
}

/* --------------------------------------------------------- instances */

const char *jitk__spec_value_text(const spec_param *p, int64_t v, char buf[32])
{
	if (p->type == PT_BOOL)
		return v ? "true" : "false";
	if (p->type == PT_ENUM && v >= 0 && (size_t)v < p->nvalues)
		return p->values[v];
	snprintf(buf, 32, "%lld", (long long)v);
	return buf;
}

int jitk__spec_param_index(const spec_family *f, const char *name)
{
	size_t i;

	for (i = 0; i < f->nparams; i++)
		if (!strcmp(f->params[i].name, name))
			return (int)i;
	return -1;
}

int jitk__spec_cond_holds(const spec_cond *c, const int64_t *vals)
{
	size_t i, j;

	for (i = 0; i < c->n; i++) {
		for (j = 0; j < c->terms[i].nvals; j++)
			if (vals[c->terms[i].param] == c->terms[i].vals[j])
				break;
		if (j == c->terms[i].nvals)
			return 0;
	}
	return 1;
}

/* Instances of s (counted when it was parsed), appended to the set. */
static int expand_symbol(spec_set *set, spec_symbol *s)
{
	spec_family *f = s->fam;
	size_t i, k;
	void *p = realloc(set->insts, (set->ninsts + s->ninsts) * sizeof(*set->insts));

	if (!p)
		return jitk__error(JITK_ENOMEM, "out of memory");
	set->insts = p;
	s->first = set->ninsts;
	for (k = 0; k < s->ninsts; k++) {
		spec_instance *in = &set->insts[set->ninsts];
		size_t rest = k, first = 1;
		jbuf name;

		memset(in, 0, sizeof(*in));
		in->sym = s;
		in->vals = calloc(f->nparams ? f->nparams : 1, sizeof(*in->vals));
		if (!in->vals)
			return jitk__error(JITK_ENOMEM, "out of memory");
		set->ninsts++;
		jitk__jbuf_init(&name);
		jitk__jbuf_puts(&name, s->name);
		/* Instances of a symbol with several name the listed
		 * parameters' values (docs/spec-format.md, "Names"). Last
		 * parameter varies fastest. */
		for (i = f->nparams; i-- > 0;) {
			size_t idx = rest % s->nvals[i];

			rest /= s->nvals[i];
			in->vals[i] = s->vals[i][idx];
		}
		if (s->ninsts > 1) {
			for (i = 0; i < f->nparams; i++) {
				char buf[32];

				if (s->nvals[i] < 2)
					continue;
				jitk__jbuf_printf(&name, "%s%s=%s", first ? "[" : ",",
					    f->params[i].name,
					    jitk__spec_value_text(&f->params[i], in->vals[i], buf));
				first = 0;
			}
			jitk__jbuf_puts(&name, "]");
		}
		in->name = jitk__jbuf_detach(&name);
		if (!in->name)
			return jitk__error(JITK_ENOMEM, "out of memory");
	}
	return 0;
}

static int inst_cmp(const void *a, const void *b, void *ctx)
{
	const spec_set *set = ctx;

	return strcmp(set->insts[*(const size_t *)a].name,
		      set->insts[*(const size_t *)b].name);
}

/* Sort by name and refuse two instances of one name: with names made of
 * identifiers and values, that is a symbol defined twice. The clash
 * reported is the one whose second definition comes first. */
static int sort_names(spec_set *set, const texts_t *tx)
{
	const spec_instance *first = NULL, *second = NULL;
	size_t i;

	set->by_name = calloc(set->ninsts ? set->ninsts : 1, sizeof(*set->by_name));
	if (!set->by_name)
		return jitk__error(JITK_ENOMEM, "out of memory");
	for (i = 0; i < set->ninsts; i++)
		set->by_name[i] = i;
	qsort_r(set->by_name, set->ninsts, sizeof(*set->by_name), inst_cmp, set);
	for (i = 1; i < set->ninsts; i++) {
		size_t x = set->by_name[i - 1], y = set->by_name[i];

		if (strcmp(set->insts[x].name, set->insts[y].name))
			continue;
		if (x > y) {
			size_t t = x;

			x = y;
			y = t;
		}
		if (!second || &set->insts[y] < second) {
			first = &set->insts[x];
			second = &set->insts[y];
		}
	}
	if (!second)
		return 0;
	if (first->sym != second->sym && !strcmp(first->sym->name, second->sym->name))
		return link_error(tx, set, &second->sym->loc,
				  "symbol '%s' is already defined at %s:%d:%d (at symbols)",
				  q(second->sym->name), first->sym->loc.file,
				  first->sym->loc.line, first->sym->loc.col);
	return link_error(tx, set, &second->sym->loc,
			  "instance name '%s' clashes with symbol '%s' at %s:%d:%d",
			  q(second->name), q(first->sym->name), first->sym->loc.file,
			  first->sym->loc.line, first->sym->loc.col);
}

/* Index of instance k's value of parameter i among the symbol's listed
 * values (the inverse of expand_symbol's mixed radix). */
static size_t value_index(const spec_symbol *s, size_t k, size_t i)
{
	size_t j, stride = 1;

	for (j = s->fam->nparams; j-- > i + 1;)
		stride *= s->nvals[j];
	return (k / stride) % s->nvals[i];
}

/* Value v of parameter from in the value space of parameter to (another
 * family's: enums compare by name); -1 when to has no such value. */
static int convert_value(const spec_param *from, int64_t v, const spec_param *to,
			 int64_t *out)
{
	size_t i;

	if (from->type != to->type)
		return -1;
	if (to->type != PT_ENUM) {
		*out = v;
		return 0;
	}
	for (i = 0; i < to->nvalues; i++)
		if (!strcmp(to->values[i], from->values[v])) {
			*out = (int64_t)i;
			return 0;
		}
	return -1;
}

/* For each fallback of s: every instance of s falls back to the instance
 * of the target with the same values of the parameters both list. Found
 * by index arithmetic, not by search, so that linking stays linear in
 * the number of instances; conv[i] is the target's value index for s's
 * i-th listed value (-1: none). */
static int link_fallbacks(spec_set *set, spec_symbol *s, const texts_t *tx)
{
	const spec_family *f = s->fam;
	size_t j, jj, k, i;
	int rc = 0;

	for (k = 0; k < s->ninsts; k++) {
		spec_instance *in = &set->insts[s->first + k];

		in->fallback = calloc(s->nfallback, sizeof(*in->fallback));
		if (!in->fallback)
			return jitk__error(JITK_ENOMEM, "out of memory");
	}
	for (j = 0; j < s->nfallback && !rc; j++) {
		const spec_loc *l = &s->fallback[j].loc;
		const char *name = s->fallback[j].symbol;
		int t0 = jitk__spec_symbol_index(set, name);
		const spec_symbol *t;
		long **conv;
		int *src;

		if (t0 < 0)
			return link_error(tx, set, l,
					  "fallback '%s' is not a symbol (at symbols.%s.fallback)",
					  q(name), q(s->name));
		t = set->syms[t0];
		if (t == s)
			return link_error(tx, set, l, "symbol '%s' cannot fall back to itself",
					  q(s->name));
		conv = calloc(t->fam->nparams ? t->fam->nparams : 1, sizeof(*conv));
		src = calloc(t->fam->nparams ? t->fam->nparams : 1, sizeof(*src));
		if (!conv || !src) {
			free(conv);
			free(src);
			return jitk__error(JITK_ENOMEM, "out of memory");
		}
		for (jj = 0; jj < t->fam->nparams && !rc; jj++) {
			int p = jitk__spec_param_index(f, t->fam->params[jj].name);

			src[jj] = p;
			if (t->nvals[jj] < 2 || p < 0)
				continue; /* one value, or any: the first */
			conv[jj] = malloc(s->nvals[p] * sizeof(**conv));
			if (!conv[jj]) {
				rc = jitk__error(JITK_ENOMEM, "out of memory");
				break;
			}
			for (i = 0; i < s->nvals[p]; i++) {
				int64_t v;
				size_t m;

				conv[jj][i] = -1;
				if (convert_value(&f->params[p], s->vals[p][i], &t->fam->params[jj], &v))
					continue;
				for (m = 0; m < t->nvals[jj]; m++)
					if (t->vals[jj][m] == v) {
						conv[jj][i] = (long)m;
						break;
					}
			}
		}
		for (k = 0; k < s->ninsts && !rc; k++) {
			spec_instance *in = &set->insts[s->first + k];
			size_t target = 0;

			for (jj = 0; jj < t->fam->nparams; jj++) {
				long m = 0;

				if (conv[jj])
					m = conv[jj][value_index(s, k, (size_t)src[jj])];
				if (m < 0)
					break;
				target = target * t->nvals[jj] + (size_t)m;
			}
			if (jj < t->fam->nparams)
				rc = link_error(tx, set, l, "fallback '%s' has no instance matching '%s'",
						q(name), q(in->name));
			in->fallback[j] = t->first + target;
			in->nfallback++;
		}
		for (jj = 0; jj < t->fam->nparams; jj++)
			free(conv[jj]);
		free(conv);
		free(src);
	}
	return rc;
}

static int link_error(const texts_t *tx, const spec_set *set, const spec_loc *l,
		      const char *fmt, ...)
{
	ytree t = { NULL, NULL, 0 };
	sctx c = { l->file, NULL, NULL };
	jbuf msg;
	va_list ap;
	size_t i;
	int rc;

	jitk__jbuf_init(&msg);
	va_start(ap, fmt);
	jitk__jbuf_vprintf(&msg, fmt, ap);
	va_end(ap);
	for (i = 0; tx && i < tx->n && i < set->nfiles; i++)
		if (!strcmp(set->files[i], l->file)) {
			t.text = tx->texts[i];
			t.text_len = tx->lens[i];
			c.t = &t;
		}
	rc = msg.oom ? jitk__error(JITK_ENOMEM, "out of memory")
		     : err_at(&c, l->line, l->col, NULL, "%s", msg.data ? msg.data : "");
	jitk__jbuf_free(&msg);
	return rc;
}

/* ------------------------------------------- tuning on every arch */

/* Compute capabilities jitk__arch_parse accepts: the sentinels of the
 * architecture ranges. */
#define CC_LOW 10
#define CC_HIGH 9999

/* Where an arch range starts to hold or stops holding, on the way up. */
typedef struct {
	int cc;
	int kind;   /* 0 family gate, 1 symbol gate, 2 tuning entry, 3 none */
	size_t idx;
	int delta;  /* +1 enters the range, -1 leaves it */
} arch_event;

static int event_cmp(const void *a, const void *b)
{
	const arch_event *x = a, *y = b;

	return (x->cc > y->cc) - (x->cc < y->cc);
}

static void add_range(arch_event *ev, size_t *n, const spec_arch_range *r, int kind,
		      size_t idx)
{
	ev[(*n)++] = (arch_event){ r->min > CC_LOW ? r->min : CC_LOW, kind, idx, 1 };
	if (r->max && r->max < CC_HIGH)
		ev[(*n)++] = (arch_event){ r->max + 1, kind, idx, -1 };
}

static void range_words(char *buf, size_t n, int lo, int hi)
{
	if (lo <= CC_LOW && hi >= CC_HIGH)
		snprintf(buf, n, "any architecture");
	else if (lo <= CC_LOW)
		snprintf(buf, n, "sm_%d or older", hi);
	else if (hi >= CC_HIGH)
		snprintf(buf, n, "sm_%d or newer", lo);
	else if (lo == hi)
		snprintf(buf, n, "sm_%d", lo);
	else
		snprintf(buf, n, "sm_%d to sm_%d", lo, hi);
}

/* Every tuning key must have a value wherever an instance is not gated
 * off - checked now, at the key's line, instead of by jitk__specialize on
 * whichever architecture is asked for first. Gates and tuning entries
 * change only where their arch ranges start or end: one sweep over those
 * cut points per instance, counting for each key the entries that apply
 * and set it, finds every hole. */
static int check_tuning_coverage(const spec_set *set, const spec_symbol *s,
				 const texts_t *tx)
{
	const spec_family *f = s->fam;
	size_t nev = 0, i, j, k, *keyof = NULL, nkv = 0, *kv0 = NULL;
	arch_event *ev;
	unsigned char *applies = NULL;
	size_t *count = NULL;
	int rc = 0;

	if (!f->ntuning_keys)
		return 0;
	ev = calloc(2 * (f->ngates + s->ngates + f->ntuning) + 2, sizeof(*ev));
	kv0 = calloc(f->ntuning + 1, sizeof(*kv0));
	for (i = 0; i < f->ntuning; i++) {
		kv0[i] = nkv;
		nkv += f->tuning[i].n;
	}
	keyof = calloc(nkv + 1, sizeof(*keyof));
	applies = calloc(f->ngates + s->ngates + f->ntuning + 1, 1);
	count = calloc(f->ntuning_keys, sizeof(*count));
	if (!ev || !kv0 || !keyof || !applies || !count) {
		rc = jitk__error(JITK_ENOMEM, "out of memory");
		goto done;
	}
	for (i = 0; i < f->ntuning; i++)
		for (j = 0; j < f->tuning[i].n; j++)
			for (k = 0; k < f->ntuning_keys; k++)
				if (!strcmp(f->tuning[i].kv[j].key, f->tuning_keys[k]))
					keyof[kv0[i] + j] = k;
	for (i = 0; i < f->ngates; i++)
		add_range(ev, &nev, &f->gates[i].arch, 0, i);
	for (i = 0; i < s->ngates; i++)
		add_range(ev, &nev, &s->gates[i].arch, 1, i);
	for (i = 0; i < f->ntuning; i++)
		add_range(ev, &nev, &f->tuning[i].arch, 2, i);
	/* The sweep starts at the lowest architecture, where nothing may start. */
	ev[nev++] = (arch_event){ CC_LOW, 3, 0, 0 };
	qsort(ev, nev, sizeof(*ev), event_cmp);

	for (k = 0; k < s->ninsts && !rc; k++) {
		const spec_instance *in = &set->insts[s->first + k];
		size_t gates = 0, gates_in = 0, zero = f->ntuning_keys, e = 0;

		memset(count, 0, f->ntuning_keys * sizeof(*count));
		for (i = 0; i < f->ngates; i++)
			gates += applies[i] = (unsigned char)jitk__spec_cond_holds(&f->gates[i].when, in->vals);
		for (i = 0; i < s->ngates; i++)
			gates += applies[f->ngates + i] = 1;
		for (i = 0; i < f->ntuning; i++)
			applies[f->ngates + s->ngates + i] =
				(unsigned char)jitk__spec_cond_holds(&f->tuning[i].when, in->vals);
		/* Below the first cut nothing holds: start at CC_LOW. */
		while (e < nev && !rc) {
			int cc = ev[e].cc, next;

			for (; e < nev && ev[e].cc == cc; e++) {
				size_t at = ev[e].kind == 0 ? ev[e].idx
					    : ev[e].kind == 1 ? f->ngates + ev[e].idx
							      : f->ngates + s->ngates + ev[e].idx;
				const spec_tuning *t;

				if (ev[e].kind == 3 || !applies[at])
					continue;
				if (ev[e].kind < 2) {
					gates_in += (size_t)ev[e].delta;
					continue;
				}
				t = &f->tuning[ev[e].idx];
				for (j = 0; j < t->n; j++) {
					size_t *c = &count[keyof[kv0[ev[e].idx] + j]];

					if (ev[e].delta > 0)
						zero -= !(*c)++;
					else
						zero += !--*c;
				}
			}
			next = e < nev ? ev[e].cc - 1 : CC_HIGH;
			if (cc > CC_HIGH || gates_in < gates || !zero)
				continue;
			for (j = 0; j < f->ntuning_keys && count[j]; j++)
				;
			{
				char range[64];
				const spec_loc *l = NULL;
				size_t a, b;

				for (a = 0; a < f->ntuning && !l; a++)
					for (b = 0; b < f->tuning[a].n && !l; b++)
						if (!strcmp(f->tuning[a].kv[b].key, f->tuning_keys[j]))
							l = &f->tuning[a].kv[b].loc;
				range_words(range, sizeof(range), cc, next);
				rc = link_error(tx, set, l,
						"tuning key '%s' has no value on %s for '%s' (no tuning "
						"entry that applies there sets it)",
						q(f->tuning_keys[j]), range, q(in->name));
			}
		}
	}
done:
	free(ev);
	free(kv0);
	free(keyof);
	free(applies);
	free(count);
	return rc;
}

/* The argument maps of s's fallback steps: both sides exist, flat() takes
 * a tensor, tensors map to tensors and scalars to scalars. */
static int link_argmaps(const spec_set *set, const spec_symbol *s, const texts_t *tx)
{
	size_t j, m;

	for (j = 0; j < s->nfallback; j++) {
		const spec_fallback *fb = &s->fallback[j];
		const spec_family *callee = set->syms[jitk__spec_symbol_index(set, fb->symbol)]->fam;

		for (m = 0; m < fb->nmap; m++) {
			const spec_argmap *am = &fb->map[m];
			int ce = jitk__spec_arg_index(callee, am->callee);
			int cr = jitk__spec_arg_index(s->fam, am->caller);

			if (ce < 0)
				return link_error(tx, set, &am->loc,
						  "'%s' has no argument '%s' (at symbols.%s.fallback)",
						  q(fb->symbol), q(am->callee), q(s->name));
			if (cr < 0)
				return link_error(tx, set, &am->loc,
						  "'%s' has no argument '%s' to pass to %s (at symbols.%s.fallback)",
						  q(s->name), q(am->caller), q(fb->symbol), q(s->name));
			if (am->flat && s->fam->args[cr].type != AT_TENSOR)
				return link_error(tx, set, &am->loc,
						  "flat(%s): '%s' is not a tensor (at symbols.%s.fallback)",
						  q(am->caller), q(am->caller), q(s->name));
			if ((s->fam->args[cr].type == AT_TENSOR) != (callee->args[ce].type == AT_TENSOR))
				return link_error(tx, set, &am->loc,
						  "'%s' and '%s' are not both tensors or both scalars (at symbols.%s.fallback)",
						  q(am->caller), q(am->callee), q(s->name));
		}
	}
	return 0;
}

static int link_instances(spec_set *set, const texts_t *tx)
{
	size_t i;
	int rc = 0;

	for (i = 0; i < set->nsyms && !rc; i++)
		rc = expand_symbol(set, set->syms[i]);
	if (!rc)
		rc = sort_names(set, tx);
	for (i = 0; i < set->nsyms && !rc; i++)
		if (set->syms[i]->nfallback)
			rc = link_fallbacks(set, set->syms[i], tx);
	for (i = 0; i < set->nsyms && !rc; i++)
		rc = link_argmaps(set, set->syms[i], tx);
	for (i = 0; i < set->nsyms && !rc; i++)
		rc = check_tuning_coverage(set, set->syms[i], tx);
	return rc;
}

int jitk__spec_symbol_index(const spec_set *set, const char *name)
{
	size_t i;

	for (i = 0; i < set->nsyms; i++)
		if (!strcmp(set->syms[i]->name, name))
			return (int)i;
	return -1;
}

/* The first n bytes of name, NUL-terminated, for a message (a per-thread
 * buffer; longer names are cut, as messages quote them shortened). */
static const char *bare_name(const char *name, size_t n)
{
	static _Thread_local char buf[512];

	snprintf(buf, sizeof(buf), "%.*s", (int)(n < sizeof(buf) - 1 ? n : sizeof(buf) - 1), name);
	return buf;
}

/* The symbol name nearest to name (within a distance that grows with its
 * length), or NULL. */
static const char *nearest_symbol(const spec_set *s, const char *name, size_t len)
{
	const char *best = NULL;
	char *bare = jitk__strndup(name, len);
	int bestd = 3 + (int)(len / 5);
	size_t i;

	for (i = 0; bare && i < s->nsyms; i++) {
		int d = jitk__edit_distance(bare, s->syms[i]->name);

		if (d < bestd) {
			bestd = d;
			best = s->syms[i]->name;
		}
	}
	free(bare);
	return best;
}

int jitk__spec_select(spec_selection *out, const spec_set *s, const char *sel)
{
	const char *br = strchr(sel, '[');
	size_t nlen = br ? (size_t)(br - sel) : strlen(sel), i;
	const spec_symbol *sym = NULL;
	const spec_family *f;
	const char *p;
	int64_t want[64];
	unsigned char given[64];

	memset(out, 0, sizeof(*out));
	for (i = 0; i < s->nsyms; i++)
		if (strlen(s->syms[i]->name) == nlen && !strncmp(s->syms[i]->name, sel, nlen)) {
			sym = s->syms[i];
			break;
		}
	if (!sym) {
		const char *near = nearest_symbol(s, sel, nlen);

		if (near)
			return jitk__spec_error(JITK_ENOENT, NULL,
						"no symbol named '%s' (did you mean '%s'? see jitk list)",
						q(bare_name(sel, nlen)), near);
		return jitk__spec_error(JITK_ENOENT, NULL, "no symbol named '%s' (see jitk list)",
					q(bare_name(sel, nlen)));
	}
	f = sym->fam;
	if (f->nparams > JITK_ARRAY_SIZE(want))
		return jitk__error(JITK_EINVAL, "%s: too many parameters to select by", sym->name);
	memset(given, 0, sizeof(given));
	if (br) {
		size_t len = strlen(br);

		if (len < 3 || br[len - 1] != ']')
			return jitk__error(JITK_EINVAL, "'%s': a selector is symbol[param=value,...]", sel);
		for (p = br + 1; *p != ']';) {
			const char *eq = strchr(p, '='), *end = p;
			char buf[32];
			int k = -1;

			while (*end && *end != ',' && *end != ']')
				end++;
			if (!eq || eq > end)
				return jitk__error(JITK_EINVAL, "'%s': expected param=value in the selector", sel);
			for (i = 0; i < f->nparams; i++)
				if (strlen(f->params[i].name) == (size_t)(eq - p) &&
				    !strncmp(f->params[i].name, p, (size_t)(eq - p)))
					k = (int)i;
			if (k < 0)
				return jitk__error(JITK_EINVAL, "'%s': %s has no parameter '%.*s'", sel,
						   sym->name, (int)(eq - p), p);
			if (given[k])
				return jitk__error(JITK_EINVAL, "'%s': parameter '%s' given twice", sel,
						   f->params[k].name);
			/* The value as text must be one the parameter can take. */
			for (i = 0; i < sym->nvals[k]; i++) {
				const char *t = jitk__spec_value_text(&f->params[k], sym->vals[k][i], buf);

				if (strlen(t) == (size_t)(end - eq - 1) &&
				    !strncmp(t, eq + 1, (size_t)(end - eq - 1)))
					break;
			}
			if (i == sym->nvals[k])
				return jitk__error(JITK_ENOENT, "'%s': %s has no instance with %s=%.*s (see jitk list)",
						   sel, sym->name, f->params[k].name,
						   (int)(end - eq - 1), eq + 1);
			given[k] = 1;
			want[k] = sym->vals[k][i];
			p = *end == ',' ? end + 1 : end;
		}
	}
	out->sym = sym;
	out->match = calloc(sym->ninsts ? sym->ninsts : 1, 1);
	if (!out->match)
		return jitk__error(JITK_ENOMEM, "out of memory");
	for (i = 0; i < sym->ninsts; i++) {
		const spec_instance *in = &s->insts[sym->first + i];
		size_t k;
		int ok = 1;

		for (k = 0; k < f->nparams && ok; k++)
			if (given[k] && in->vals[k] != want[k])
				ok = 0;
		out->match[i] = (unsigned char)ok;
		out->n += (size_t)ok;
	}
	if (!out->n) {
		jitk__spec_selection_free(out);
		return jitk__error(JITK_ENOENT, "'%s' selects no instance (see jitk list)", sel);
	}
	return JITK_OK;
}

void jitk__spec_selection_free(spec_selection *sel)
{
	free(sel->match);
	memset(sel, 0, sizeof(*sel));
}

int jitk__spec_find(const spec_set *s, const char *sel, size_t *out)
{
	spec_selection m;
	size_t i;
	jbuf names;
	int rc;

	if ((rc = jitk__spec_select(&m, s, sel)))
		return rc;
	if (m.n == 1) {
		for (i = 0; !m.match[i]; i++)
			;
		*out = m.sym->first + i;
		jitk__spec_selection_free(&m);
		return JITK_OK;
	}
	jitk__jbuf_init(&names);
	for (i = 0; i < m.sym->ninsts; i++)
		if (m.match[i])
			jitk__jbuf_printf(&names, "%s%s", names.len ? ", " : "",
					  s->insts[m.sym->first + i].name);
	rc = jitk__error(JITK_EINVAL, "'%s' names %zu instances; name one: %s", sel, m.n,
			 names.data ? names.data : "");
	jitk__jbuf_free(&names);
	jitk__spec_selection_free(&m);
	return rc;
}

/* -------------------------------------------------------------- load */

/* Parse text (owned by the caller until loading ends: kept in tx) as the
 * spec file path. */
static int load_text(spec_set *set, const char *path, char *text, size_t len,
		     texts_t *tx)
{
	sctx c;
	ytree t;
	char msg[256];
	int rc, line = 1, col = 1;
	char **files, **tt;
	size_t *ll;

	files = realloc(set->files, (set->nfiles + 1) * sizeof(*files));
	if (files)
		set->files = files;
	if (!files || !(set->files[set->nfiles] = jitk__strdup(path))) {
		free(text);
		return jitk__error(JITK_ENOMEM, "out of memory");
	}
	c.file = set->files[set->nfiles++];
	c.set = set;
	tt = realloc(tx->texts, (tx->n + 1) * sizeof(*tt));
	if (tt)
		tx->texts = tt;
	ll = tt ? realloc(tx->lens, (tx->n + 1) * sizeof(*ll)) : NULL;
	if (ll)
		tx->lens = ll;
	if (!tt || !ll) {
		free(text);
		return jitk__error(JITK_ENOMEM, "out of memory");
	}
	tx->texts[tx->n] = text;
	tx->lens[tx->n++] = len;
	t.root = NULL;
	t.text = text;
	t.text_len = len;
	c.t = &t;
	if (jitk__ytree_parse(&t, text, len, msg, sizeof(msg), &line, &col)) {
		t.text = text;
		t.text_len = len;
		rc = err_at(&c, line, col, NULL, "%s", msg);
	} else {
		rc = parse_family(&c, t.root);
	}
	jitk__ytree_free(&t);
	return rc;
}

static int load_file(spec_set *set, const char *path, texts_t *tx)
{
	char *text = NULL;
	size_t len;
	int rc;

	rc = jitk__read_file(&text, &len, path, YT_MAX_FILE_BYTES);
	if (rc == JITK_EINVAL)
		return jitk__spec_error(JITK_ESPEC, NULL,
					"%s:1:1: error: file is larger than the %u-byte limit",
					path, YT_MAX_FILE_BYTES);
	if (rc == JITK_ENOMEM)
		return rc;
	if (rc) {
		char *why = jitk__strdup(read_reason(path));

		rc = jitk__spec_error(JITK_ESPEC, NULL, "%s:1:1: error: cannot read the spec file: %s",
				      path, why ? why : "out of memory");
		free(why);
		return rc;
	}
	return load_text(set, path, text, len, tx);
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int list_dir(const char *dir, char ***out, size_t *count)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char **names = NULL;
	size_t n = 0;

	*out = NULL;
	*count = 0;
	if (!d)
		return jitk__spec_error(JITK_ESPEC, NULL, "%s: cannot open spec directory: %s",
					dir, strerror(errno));
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);
		char **p;

		if (len < 6 || strcmp(e->d_name + len - 5, ".yaml") || e->d_name[0] == '.')
			continue;
		if (n >= SPEC_MAX_FILES) {
			closedir(d);
			while (n)
				free(names[--n]);
			free(names);
			return jitk__spec_error(JITK_ESPEC, NULL, "%s: more than %d spec files",
						dir, SPEC_MAX_FILES);
		}
		p = realloc(names, (n + 1) * sizeof(*p));
		if (!p || !(p[n] = jitk__asprintf("%s/%s", dir, e->d_name))) {
			closedir(d);
			names = p ? p : names;
			while (n)
				free(names[--n]);
			free(names);
			return jitk__error(JITK_ENOMEM, "out of memory");
		}
		names = p;
		n++;
	}
	closedir(d);
	if (!n) {
		free(names);
		return jitk__spec_error(JITK_ESPEC, NULL, "%s: no *.yaml spec files", dir);
	}
	qsort(names, n, sizeof(*names), name_cmp);
	*out = names;
	*count = n;
	return 0;
}

static void texts_free(texts_t *tx)
{
	size_t i;

	for (i = 0; i < tx->n; i++)
		free(tx->texts[i]);
	free(tx->texts);
	free(tx->lens);
}

/* After the files are parsed (rc so far): link the symbols, drop the
 * texts, hand the set over or free it. */
static int finish_load(spec_set **out, spec_set *set, texts_t *tx, int rc)
{
	if (!rc)
		rc = link_instances(set, tx);
	texts_free(tx);
	if (rc) {
		jitk__spec_set_free(set);
		return rc;
	}
	*out = set;
	return 0;
}

int jitk__spec_set_load_files(spec_set **out, const char *const *files, size_t n)
{
	spec_set *set = calloc(1, sizeof(*set));
	texts_t tx = { NULL, NULL, 0 };
	size_t i;
	int rc = 0;

	*out = NULL;
	if (!set)
		return jitk__error(JITK_ENOMEM, "out of memory");
	for (i = 0; i < n && !rc; i++)
		rc = load_file(set, files[i], &tx);
	return finish_load(out, set, &tx, rc);
}

int jitk__spec_set_load_buffer(spec_set **out, const char *name, const char *text,
			 size_t len)
{
	spec_set *set = calloc(1, sizeof(*set));
	texts_t tx = { NULL, NULL, 0 };
	char *copy = malloc(len + 1);
	int rc;

	*out = NULL;
	if (!set || !copy) {
		free(set);
		free(copy);
		return jitk__error(JITK_ENOMEM, "out of memory");
	}
	if (len)
		memcpy(copy, text, len);
	copy[len] = '\0';
	if (len > YT_MAX_FILE_BYTES) {
		free(copy);
		rc = jitk__spec_error(JITK_ESPEC, NULL,
				      "%s:1:1: error: file is larger than the %u-byte limit",
				      name, YT_MAX_FILE_BYTES);
	} else {
		rc = load_text(set, name, copy, len, &tx); /* owns copy from here */
	}
	return finish_load(out, set, &tx, rc);
}

int jitk__spec_set_load_dirs(spec_set **out, const char *const *dirs, size_t n)
{
	char **all = NULL;
	size_t nall = 0, i, j;
	int rc = 0;

	for (i = 0; i < n && !rc; i++) {
		char **names;
		size_t count;
		char **p;

		rc = list_dir(dirs[i], &names, &count);
		if (rc)
			break;
		p = realloc(all, (nall + count) * sizeof(*p));
		if (!p) {
			for (j = 0; j < count; j++)
				free(names[j]);
			free(names);
			rc = jitk__error(JITK_ENOMEM, "out of memory");
			break;
		}
		all = p;
		for (j = 0; j < count; j++)
			all[nall++] = names[j];
		free(names);
	}
	if (!rc)
		rc = jitk__spec_set_load_files(out, (const char *const *)all, nall);
	for (i = 0; i < nall; i++)
		free(all[i]);
	free(all);
	return rc;
}

/* -------------------------------------------------------------- free */

static void cond_free(spec_cond *c)
{
	size_t i;

	for (i = 0; i < c->n; i++)
		free(c->terms[i].vals);
	free(c->terms);
}

static void exprs_free(spec_expr *e, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		free(e[i].name);
		free(e[i].text);
		free(e[i].message);
		jitk__expr_free(e[i].e);
	}
}

static void gates_free(spec_gate *g, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		cond_free(&g[i].when);
		free(g[i].reason);
	}
	free(g);
}

static void family_free(spec_family *f)
{
	size_t i, j;

	if (!f)
		return;
	for (i = 0; i < f->nparams; i++) {
		spec_param *p = &f->params[i];

		free(p->name);
		for (j = 0; j < p->nvalues; j++)
			free(p->values[j]);
		free(p->values);
		free(p->allowed);
		free(p->cpp);
	}
	free(f->params);
	gates_free(f->gates, f->ngates);
	for (i = 0; i < f->ntuning; i++) {
		cond_free(&f->tuning[i].when);
		for (j = 0; j < f->tuning[i].n; j++)
			free(f->tuning[i].kv[j].key);
		free(f->tuning[i].kv);
	}
	free(f->tuning);
	for (i = 0; i < f->ntuning_keys; i++)
		free(f->tuning_keys[i]);
	free(f->tuning_keys);
	exprs_free(f->derived, f->nderived);
	free(f->derived);
	exprs_free(f->constraints, f->nconstraints);
	free(f->constraints);
	for (i = 0; i < f->ndims; i++)
		free(f->dims[i]);
	free(f->dims);
	free(f->may_alias);
	for (i = 0; i < f->noptions; i++)
		free(f->options[i]);
	free(f->options);
	for (i = 0; i < f->nargs; i++) {
		free(f->args[i].name);
		free(f->args[i].cpp);
		exprs_free(&f->args[i].align, 1);
		exprs_free(f->args[i].shape, f->args[i].ndim);
		free(f->args[i].shape);
		exprs_free(f->args[i].strides, f->args[i].strides ? f->args[i].ndim : 0);
		free(f->args[i].strides);
		cond_free(&f->args[i].when);
	}
	free(f->args);
	exprs_free(&f->grid, 1);
	exprs_free(&f->block, 1);
	exprs_free(&f->smem, 1);
	exprs_free(f->checks, f->nchecks);
	free(f->checks);
	free(f->name);
	free(f->file);
	free(f->template_path);
	free(f->kernel);
	free(f->description);
	free(f);
}

static void symbol_free(spec_symbol *s)
{
	size_t i;

	if (!s)
		return;
	for (i = 0; s->vals && i < s->fam->nparams; i++)
		free(s->vals[i]);
	free(s->vals);
	free(s->nvals);
	gates_free(s->gates, s->ngates);
	for (i = 0; i < s->nfallback; i++) {
		size_t m;

		free(s->fallback[i].symbol);
		for (m = 0; m < s->fallback[i].nmap; m++) {
			free(s->fallback[i].map[m].callee);
			free(s->fallback[i].map[m].caller);
		}
		free(s->fallback[i].map);
	}
	free(s->fallback);
	free(s->description);
	free(s->name);
	free(s);
}

void jitk__spec_set_free(spec_set *s)
{
	size_t i;

	if (!s)
		return;
	for (i = 0; i < s->ninsts; i++) {
		free(s->insts[i].name);
		free(s->insts[i].vals);
		free(s->insts[i].fallback);
	}
	free(s->insts);
	free(s->by_name);
	for (i = 0; i < s->nsyms; i++)
		symbol_free(s->syms[i]);
	free(s->syms);
	for (i = 0; i < s->nfams; i++)
		family_free(s->fams[i]);
	free(s->fams);
	for (i = 0; i < s->nfiles; i++)
		free(s->files[i]);
	free(s->files);
	free(s);
}
