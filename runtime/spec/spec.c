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

#include "base/arena.h"
#include "base/internal.h"
#include "spec/spec.h"
#include "spec/ytree.h"

#define SPEC_MAX_FILES 256
#define SPEC_MAX_TEMPLATE_BYTES (1u << 20) /* what the inliner reads */

typedef struct {
	const char *file;
	const ytree *t;
	spec_set *set;
	jitk_arena *a;    /* the set's: everything the model points to */
	jitk_arena *tmp;  /* freed when the load ends: key paths, link tables */
	spec_family *f;   /* the family being read */
	const ynode *map; /* the mapping whose field is being read */
	const ynode *key; /* the entry being read (a mapping of name: definition) */
	size_t index;     /* the item being read */
	int arg;          /* the arg of the mapping being read (p_map) */
} sctx;

/* What a load keeps until it ends: the file texts, so that errors found
 * when linking symbols across files can quote the offending line too,
 * and scratch memory. */
typedef struct {
	char **texts;
	size_t *lens;
	size_t n;
	jitk_arena *tmp;
} texts_t;

#define ARRAY(c, n, type) ((type *)jitk__arena_array((c)->a, (n), sizeof(type)))

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

static const char *quoted(const char *s)
{
	return jitk__spec_quote(s);
}

int jitk__spec_arch_error(const char *text, size_t len)
{
	char shown[2 * QUOTE_MAX];
	size_t n = len < sizeof(shown) - 1 ? len : sizeof(shown) - 1;

	memcpy(shown, text, n);
	shown[n] = '\0';
	return jitk__spec_error(JITK_EINVAL, NULL,
				"'%s' is not an architecture (sm_90, sm_100a, compute_90...)", quoted(shown));
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
	if (msg.oom || detail.oom)
		rc = JITK_ENOMEM; /* reported by the loader */
	else if (path && *path)
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

/* A copy of s in the set's arena. */
static int copy(const sctx *c, char **out, const char *s)
{
	*out = jitk__arena_strdup(c->a, s);
	return *out ? 0 : JITK_ENOMEM;
}

static int get_string(const sctx *c, const ynode *n, const char *path, char **out)
{
	int rc = want_kind(c, n, path, YN_SCALAR, "a string");

	return rc ? rc : copy(c, out, n->str);
}

/* Free text (a gate's reason, a check's message): a string without the
 * trailing newline of a block scalar ("reason: |"). */
static int get_text(const sctx *c, const ynode *n, const char *path, char **out)
{
	int rc = get_string(c, n, path, out);
	size_t len = rc ? 0 : strlen(*out);

	while (len && isspace((unsigned char)(*out)[len - 1]))
		(*out)[--len] = '\0';
	return rc;
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

/* Why the n bytes at s cannot be a C++ identifier in the source jitk
 * generates (a member of the parameter struct, the struct itself, an
 * enumerator, a component of a qualified name), or NULL: C++20 keywords
 * and alternative tokens, and the names C++ reserves to the
 * implementation (any "__", or '_' and a capital letter: CUDA's own
 * __global__, __shared__...). Refused at load rather than left to NVRTC. */
static const char *cxx_name_problem(const char *s, size_t n)
{
	if (jitk__cxx_keyword(s, n))
		return "a C++ keyword";
	if ((n >= 2 && s[0] == '_' && isupper((unsigned char)s[1])) || memmem(s, n, "__", 2))
		return "reserved in C++ (it has '__', or starts with '_' and a capital letter)";
	return NULL;
}

/* n is what (in the generated source): it must be a name C++ lets a spec
 * use. */
static int check_cxx_name(const sctx *c, const ynode *n, const char *path, const char *what)
{
	const char *why = cxx_name_problem(n->str, strlen(n->str));

	if (!why)
		return 0;
	return ERR(c, n, path, "'%s' is %s, so it cannot be %s", quoted(n->str), why, what);
}

static int get_ident(const sctx *c, const ynode *n, const char *path, char **out)
{
	int rc;

	if ((rc = want_kind(c, n, path, YN_SCALAR, "a name")))
		return rc;
	if (!is_ident(n->str))
		return ERR(c, n, path,
			   "'%s' is not a name (letters, digits and '_', not starting with a digit)",
			   quoted(n->str));
	return copy(c, out, n->str);
}

static int get_int(const sctx *c, const ynode *n, const char *path, int64_t *out)
{
	const char *s = n->str;
	int neg = 0, rc;
	uint64_t v = 0;

	if ((rc = want_kind(c, n, path, YN_SCALAR, "an integer")))
		return rc;
	if (!n->plain)
		return ERR(c, n, path, "expected an integer, got the quoted string '%s'",
			   quoted(n->str));
	if (*s == '-' || *s == '+')
		neg = *s++ == '-';
	if (!isdigit((unsigned char)*s))
		return ERR(c, n, path, "expected an integer, got '%s'", quoted(n->str));
	if (s[0] == '0' && s[1])
		return ERR(c, n, path,
			   "'%s': leading zeros are not allowed (YAML 1.1 reads them as octal)",
			   quoted(n->str));
	for (; *s; s++) {
		if (!isdigit((unsigned char)*s))
			return ERR(c, n, path, "expected an integer, got '%s'", quoted(n->str));
		if (v > (UINT64_MAX - 9) / 10)
			return ERR(c, n, path, "integer '%s' is out of range", quoted(n->str));
		v = v * 10 + (uint64_t)(*s - '0');
	}
	if (v > (uint64_t)INT64_MAX + (uint64_t)neg)
		return ERR(c, n, path, "integer '%s' is out of range", quoted(n->str));
	*out = neg ? (int64_t)(0 - v) : (int64_t)v;
	return 0;
}

static int get_bool(const sctx *c, const ynode *n, const char *path, int *out)
{
	int rc;

	if ((rc = want_kind(c, n, path, YN_SCALAR, "true or false")))
		return rc;
	if (!n->plain || (strcmp(n->str, "true") && strcmp(n->str, "false")))
		return ERR(c, n, path, "expected true or false, got '%s'", quoted(n->str));
	*out = !strcmp(n->str, "true");
	return 0;
}

static int get_arch(const sctx *c, const ynode *n, const char *path, int *out)
{
	jitk_arch a;
	int rc;

	if ((rc = want_kind(c, n, path, YN_SCALAR, "an architecture like sm_90")))
		return rc;
	if (jitk__arch_parse(&a, n->str) || a.kind != 's' || a.suffix)
		return ERR(c, n, path, "expected an architecture like sm_90, got '%s'",
			   quoted(n->str));
	*out = a.cc;
	return 0;
}

/* The index of s in names (NULL-terminated), or -1. */
static int choose(const char *s, const char *const *names)
{
	int i;

	for (i = 0; names[i]; i++)
		if (!strcmp(s, names[i]))
			return i;
	return -1;
}

/* ------------------------------------------------------- key tables */

/* A mapping is read with a table of its keys: what each one's node must be
 * (with `what`, the kind is checked here, for the message "expected WHAT,
 * got ..."; scalar parsers check their node themselves), whether it is
 * required, where the value goes and which parser reads it. Unknown keys
 * are refused in the mapping's order, missing ones in the table's, and the
 * fields are read in the table's order: the order of the messages. Lists,
 * and mappings of name: definition, describe their items with a field. */
typedef struct field field;
/* Read v (at path) into out: the struct that has the field, or the item. */
typedef int (*parse_fn)(sctx *c, const ynode *v, const char *path, void *out,
			const field *fd);

enum {
	F_REQ = 1,  /* required */
	F_SUB = 2,  /* the path is path.key (an item's: path.its key) */
	F_LATER = 4 /* read by the caller */
};

struct field {
	const char *key; /* NULL: an item (or the end of a table) */
	enum ynode_kind kind;
	const char *what;
	parse_fn fn;
	int flags;
	size_t off, noff;  /* of the value; lists: of the array and of its count */
	int arg;           /* for fn */
	const field *sub;  /* mappings read with a table: the table */
	const field *item; /* lists: what an item is */
	size_t size;       /* of an item */
	const char *dup;   /* lists of names: refuse one listed twice ("value ") */
};

#define AT(out, off, type) ((type *)(void *)((char *)(out) + (off)))
#define S(k, f) .key = (k), .kind = YN_SCALAR, .fn = (f) /* the parser checks it */
#define K(k, kd, w, f) .key = (k), .kind = (kd), .what = (w), .fn = (f)
#define OFF(T, m) .off = offsetof(T, m)
#define LIST(T, arr, n, it) .off = offsetof(T, arr), .noff = offsetof(T, n), .item = (it), \
		.size = sizeof(*((T *)0)->arr)

static const field *field_named(const field *t, const char *key)
{
	for (; t->key; t++)
		if (!strcmp(t->key, key))
			return t;
	return NULL;
}

/* Every key of map must be in the table; every required one present. */
static int check_keys(const sctx *c, const ynode *map, const char *path, const field *t)
{
	size_t i, k;

	for (i = 0; i < map->n; i++) {
		const ynode *key = ymap_key(map, i);
		const char *best = NULL;
		int bestd = 3, d;

		if (field_named(t, key->str))
			continue;
		for (k = 0; t[k].key; k++)
			if ((d = jitk__edit_distance(key->str, t[k].key)) < bestd) {
				bestd = d;
				best = t[k].key;
			}
		if (best)
			return ERR(c, key, path, "unknown key '%s' (did you mean '%s'?)",
				   quoted(key->str), best);
		return ERR(c, key, path, "unknown key '%s'", quoted(key->str));
	}
	for (k = 0; t[k].key; k++)
		if ((t[k].flags & F_REQ) && !jitk__ymap_get(map, t[k].key))
			return ERR(c, map, path, "missing required key '%s'", t[k].key);
	return 0;
}

/* path.key (key at the top level), in the file's scratch memory. */
static const char *path_of_key(const sctx *c, const char *path, const char *key)
{
	return *path ? jitk__arena_printf(c->tmp, "%s.%s", path, key) : key;
}

static int parse_field(sctx *c, const ynode *v, const char *path, const field *fd, void *out)
{
	if ((fd->flags & F_SUB) && !(path = path_of_key(c, path, fd->key ? fd->key : c->key->str)))
		return JITK_ENOMEM;
	int rc = fd->what ? want_kind(c, v, path, fd->kind, fd->what) : 0;

	return rc ? rc : fd->fn(c, v, path, out, fd);
}

/* The fields of map in the table's order; c->map is the mapping. */
static int parse_fields(sctx *c, const ynode *map, const char *path, const field *t, void *out)
{
	const ynode *saved = c->map, *v;
	int rc = 0;

	for (; t->key && !rc; t++)
		if (!(t->flags & F_LATER) && (v = jitk__ymap_get(map, t->key))) {
			c->map = map;
			rc = parse_field(c, v, path, t, out);
		}
	c->map = saved;
	return rc;
}

static int parse_map(sctx *c, const ynode *map, const char *path, const field *t, void *out)
{
	int rc = check_keys(c, map, path, t);

	return rc ? rc : parse_fields(c, map, path, t, out);
}

/* A mapping read with fd->sub (c->arg = fd->arg for its parsers). */
static int p_map(sctx *c, const ynode *v, const char *path, void *out, const field *fd)
{
	c->arg = fd->arg;
	return parse_map(c, v, path, fd->sub, AT(out, fd->off, char));
}

/* The items of sequence n, or the entries of mapping n (each key a name;
 * c->key and c->index tell the item's parser which), each read by
 * fd->item into a new array (*arr); *count counts those read. */
static int read_items(sctx *c, const ynode *n, const char *path, const field *fd, void *arr,
		      size_t *count)
{
	char *items = jitk__arena_array(c->a, n->n, fd->size), **name;
	size_t i, j;
	int rc;

	if (!items)
		return JITK_ENOMEM;
	memcpy(arr, &items, sizeof(items));
	for (i = 0; i < n->n; i++, ++*count) {
		const ynode *k = n->kind == YN_MAP ? ymap_key(n, i) : NULL;

		c->key = k;
		c->index = i;
		if (k && !is_ident(k->str))
			return ERR(c, k, path, "'%s' is not a name", quoted(k->str));
		if ((rc = parse_field(c, k ? ymap_val(n, i) : n->kids[i], path, fd->item,
				      items + i * fd->size)))
			return rc;
		for (j = 0, name = (char **)(void *)(items + i * fd->size); fd->dup && j < i; j++)
			if (!strcmp(*(char **)(void *)(items + j * fd->size), *name))
				return ERR(c, n->kids[i], path, "%s'%s' listed twice", fd->dup,
					   quoted(*name));
	}
	return 0;
}

static int p_list(sctx *c, const ynode *n, const char *path, void *out, const field *fd)
{
	return read_items(c, n, path, fd, AT(out, fd->off, void *), AT(out, fd->noff, size_t));
}

/* Scalars as fields (and items: offset 0). */
#define SCALAR_PARSER(name, get, type)                                                     \
	static int name(sctx *c, const ynode *v, const char *path, void *out, const field *fd) \
	{                                                                                   \
		return get(c, v, path, AT(out, fd->off, type));                              \
	}
SCALAR_PARSER(p_text, get_text, char *)
SCALAR_PARSER(p_ident, get_ident, char *)
SCALAR_PARSER(p_int, get_int, int64_t)
SCALAR_PARSER(p_bool, get_bool, int)
SCALAR_PARSER(p_arch, get_arch, int)

/* Strings; arg 1 or 2: a C++ type name or name (jitk::Norm, jitk::fn). */
static int p_string(sctx *c, const ynode *v, const char *path, void *out, const field *fd)
{
	char **s = AT(out, fd->off, char *);
	int rc = get_string(c, v, path, s);

	const char *p, *why = NULL;
	size_t n = 0;

	if (!rc && fd->arg && !is_qualified(*s))
		return ERR(c, v, path, "'%s' is not a C++ %sname", quoted(*s), fd->arg == 1 ? "type " : "");
	/* each component: "jitk::int" is no more a type than "int" */
	for (p = rc || !fd->arg ? "" : *s; *p; p += n + 2) {
		n = strcspn(p, ":");
		if ((why = cxx_name_problem(p, n)) || !p[n])
			break;
	}
	if (why)
		return ERR(c, v, path, "'%s' is not a C++ %sname ('%.*s' is %s)", quoted(*s),
			   fd->arg == 1 ? "type " : "", (int)n, p, why);
	return rc;
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

/* A value of parameter p from node n, checked against its allowed set. */
static int get_param_value(const sctx *c, const spec_param *p, const ynode *n,
			   const char *path, int64_t *out)
{
	size_t i;
	int b = 0, rc;
	jbuf list;

	switch (p->type) {
	case PT_BOOL:
		rc = get_bool(c, n, path, &b);
		*out = b;
		return rc;
	case PT_ENUM:
		if ((rc = want_kind(c, n, path, YN_SCALAR, "a value name")))
			return rc;
		for (*out = 0; (size_t)*out < p->nvalues; ++*out)
			if (!strcmp(n->str, p->values[*out]))
				return 0;
		jitk__jbuf_init(&list);
		for (i = 0; i < p->nvalues; i++)
			jitk__jbuf_printf(&list, "%s%s", i ? ", " : "", p->values[i]);
		rc = list.oom ? JITK_ENOMEM
			: ERR(c, n, path, "value '%s' is not allowed for '%s' (allowed: %s)",
			      quoted(n->str), quoted(p->name), quoted(list.data ? list.data : ""));
		jitk__jbuf_free(&list);
		return rc;
	case PT_INT:
		break;
	}
	if ((rc = get_int(c, n, path, out)))
		return rc;
	if (*out < p->min || *out > p->max)
		return ERR(c, n, path, "value %lld is out of range for '%s' (%lld to %lld)",
			   (long long)*out, quoted(p->name), (long long)p->min, (long long)p->max);
	if (p->multiple_of > 1 && *out % p->multiple_of)
		return ERR(c, n, path, "value %lld for '%s' is not a multiple of %lld",
			   (long long)*out, quoted(p->name), (long long)p->multiple_of);
	for (i = 0; i < p->nallowed; i++)
		if (p->allowed[i] == *out)
			return 0;
	if (p->nallowed)
		return ERR(c, n, path, "value %lld is not in the allowed values of '%s'",
			   (long long)*out, quoted(p->name));
	return 0;
}

/* The value or list of values of parameter p at n (a scalar or a
 * sequence); unique: refuse a value listed twice. */
static int param_values(const sctx *c, const spec_param *p, const ynode *n, const char *path,
			int unique, int64_t **vals, size_t *nvals)
{
	const ynode *const *items = (const ynode *const *)n->kids;
	size_t count = n->n, j, m;
	int rc;

	if (n->kind == YN_SEQ && !n->n)
		return ERR(c, n, path, "empty list");
	if (n->kind == YN_MAP)
		return ERR(c, n, path, "expected a value or a list of values, got a mapping");
	if (n->kind == YN_SCALAR) {
		items = &n;
		count = 1;
	}
	if (!(*vals = jitk__arena_array(c->a, count, sizeof(**vals))))
		return JITK_ENOMEM;
	for (j = 0; j < count; j++, ++*nvals) {
		if ((rc = get_param_value(c, p, items[j], path, &(*vals)[j])))
			return rc;
		for (m = 0; unique && m < j; m++)
			if ((*vals)[m] == (*vals)[j])
				return ERR(c, items[j], path, "value listed twice");
	}
	return 0;
}

/* when: { param: value or [values] } */
static int p_cond(sctx *c, const ynode *n, const char *path, void *out, const field *fd)
{
	spec_cond *cond = AT(out, fd->off, spec_cond);
	size_t i;
	int rc = 0, p;

	if (!(cond->terms = ARRAY(c, n->n, spec_term)))
		return JITK_ENOMEM;
	for (i = 0; i < n->n && !rc; i++) {
		const ynode *k = ymap_key(n, i);
		spec_term *t = &cond->terms[cond->n++];

		if ((p = jitk__spec_param_index(c->f, k->str)) < 0)
			return ERR(c, k, path, "unknown parameter '%s'", quoted(k->str));
		t->param = (size_t)p;
		rc = param_values(c, &c->f->params[p], ymap_val(n, i), path, 0, &t->vals, &t->nvals);
	}
	return rc;
}

static const field range_fields[] = {
	{ S("min", p_arch), OFF(spec_arch_range, min) },
	{ S("max", p_arch), OFF(spec_arch_range, max) },
	{ .key = NULL },
};

static int p_arch_range(sctx *c, const ynode *n, const char *path, void *out, const field *fd)
{
	spec_arch_range *r = AT(out, fd->off, spec_arch_range);
	int rc = check_keys(c, n, path, range_fields);

	if (!rc && !n->n)
		return ERR(c, n, path, "an architecture range needs min or max");
	if (rc || (rc = parse_fields(c, n, path, range_fields, r)))
		return rc;
	if (r->min && r->max && r->min > r->max)
		return ERR(c, n, path, "min is above max");
	return 0;
}

/* Family gates may have `when`; symbol gates are read with gate_fields + 1. */
static const field gate_fields[] = {
	{ K("when", YN_MAP, "a mapping of parameter values", p_cond), OFF(spec_gate, when) },
	{ K("arch", YN_MAP, "a mapping with min and/or max", p_arch_range), .flags = F_REQ,
	  OFF(spec_gate, arch) },
	{ S("reason", p_text), .flags = F_REQ, OFF(spec_gate, reason) },
	{ .key = NULL },
};

static int p_gate(sctx *c, const ynode *g, const char *path, void *out, const field *fd)
{
	((spec_gate *)out)->loc = loc_of(c, g);
	return parse_map(c, g, path, fd->sub, out);
}

static const field family_gate = { K(NULL, YN_MAP, "a gate (a mapping)", p_gate),
				   .sub = gate_fields };
static const field symbol_gate = { K(NULL, YN_MAP, "a gate (a mapping)", p_gate),
				   .sub = gate_fields + 1 };

/* One more parameter, tuning key or derived value, named by n: a variant
 * binds them all, so a family has at most SPEC_MAX_NAMES. */
static int name_budget(const sctx *c, const spec_family *f, const ynode *n, const char *path)
{
	if (f->nparams + f->ntuning_keys + f->nderived < SPEC_MAX_NAMES)
		return 0;
	return ERR(c, n, path, "'%s' is one name too many: a family has at most %d "
		   "parameters, tuning keys and derived values together",
		   quoted(n->str), SPEC_MAX_NAMES);
}

/* A parameter, tuning key or derived value: a member of the instance's
 * parameter struct (P::name), one of at most SPEC_MAX_NAMES. */
static int member_name(const sctx *c, const spec_family *f, const ynode *n, const char *path)
{
	int rc = check_cxx_name(c, n, path,
				"a member of the instance's parameter struct (the template reads P::name)");

	return rc ? rc : name_budget(c, f, n, path);
}

/* params: { name: { type, ... } }. Which other keys a definition may have
 * depends on its type, checked when the type is read (in the order the
 * messages have always come in). */
static int p_param_type(sctx *c, const ynode *v, const char *path, void *out, const field *fd)
{
	static const char *const types[] = { "int", "bool", "enum", NULL }; /* spec_ptype */
	static const char *const int_only[] = { "min", "max", "multiple_of" };
	spec_param *p = out;
	const ynode *d = c->map, *bad;
	int i = choose(v->str, types);

	if (i < 0)
		return ERR(c, v, path, "unknown parameter type '%s' (int, bool or enum)", quoted(v->str));
	p->type = (enum spec_ptype)i;
	for (i = 0; i < 3 && p->type != PT_INT; i++)
		if ((bad = jitk__ymap_get(d, int_only[i])))
			return ERR(c, bad, path, "'%s' applies to int parameters only", int_only[i]);
	if (p->type == PT_BOOL && (bad = jitk__ymap_get(d, "values")))
		return ERR(c, bad, path, "bool parameters take no values list");
	if (p->type != PT_ENUM && (bad = jitk__ymap_get(d, "cpp")))
		return ERR(c, bad, path, "'cpp' applies to enum parameters only");
	if (p->type == PT_ENUM && !jitk__ymap_get(d, "values"))
		return ERR(c, d, path, "missing required key 'values'");
	return 0;
}

/* max and multiple_of (arg 1), with what they must be. */
static int p_param_int(sctx *c, const ynode *v, const char *path, void *out, const field *fd)
{
	spec_param *p = out;
	int rc;

	if ((rc = get_int(c, v, path, fd->arg ? &p->multiple_of : &p->max)))
		return rc;
	if (!fd->arg && p->min > p->max)
		return ERR(c, c->map, path, "min is above max");
	if (fd->arg && p->multiple_of < 1)
		return ERR(c, v, path, "multiple_of must be at least 1");
	return 0;
}

static const field int_item = { S(NULL, p_int) };
static const field name_item = { S(NULL, p_ident) };

static int p_param_values(sctx *c, const ynode *v, const char *path, void *out,
			  const field *fd)
{
	static const field ints = { .item = &int_item, .size = sizeof(int64_t) };
	static const field names = { .item = &name_item, .size = sizeof(char *),
				     .dup = "value " };
	spec_param *p = out;
	size_t i;
	int rc;

	if (p->type == PT_INT)
		return (rc = want_kind(c, v, path, YN_SEQ, "a list of integers")) ? rc
			: read_items(c, v, path, &ints, &p->allowed, &p->nallowed);
	if ((rc = want_kind(c, v, path, YN_SEQ, "a list of value names")))
		return rc;
	if (!v->n)
		return ERR(c, v, path, "empty list");
	if ((rc = read_items(c, v, path, &names, &p->values, &p->nvalues)))
		return rc;
	if (!jitk__ymap_get(c->map, "cpp"))
		return ERR(c, c->map, path, "missing required key 'cpp' (the C++ enum type)");
	for (i = 0; i < v->n; i++)
		if ((rc = check_cxx_name(c, v->kids[i], path, "an enumerator of the 'cpp' type")))
			return rc;
	return 0;
}

static const field param_fields[] = {
	{ K("type", YN_SCALAR, "int, bool or enum", p_param_type), .flags = F_REQ },
	{ S("min", p_int), OFF(spec_param, min) },
	{ S("max", p_param_int) },
	{ S("multiple_of", p_param_int), .arg = 1 },
	{ S("values", p_param_values) },
	{ S("cpp", p_string), OFF(spec_param, cpp), .arg = 1 /* a C++ type name */ },
	{ S("size_of", p_string), OFF(spec_param, size_of), .arg = 2 /* a name */ },
	{ .key = NULL },
};

static int p_param(sctx *c, const ynode *d, const char *path, void *out, const field *fd)
{
	spec_param *p = out;
	int rc;

	if ((rc = check_keys(c, d, path, param_fields)) ||
	    (rc = member_name(c, c->f, c->key, "params")) || (rc = copy(c, &p->name, c->key->str)))
		return rc;
	p->loc = loc_of(c, c->key);
	p->min = INT64_MIN;
	p->max = INT64_MAX;
	if ((rc = parse_fields(c, d, path, param_fields, p)))
		return rc;
	if (p->size_of && p->type != PT_INT)
		return ERR(c, jitk__ymap_get(d, "size_of"), path,
			   "size_of makes a size class: only an int parameter can be one");
	if (p->size_of && strchr(p->size_of, ':'))
		return ERR(c, jitk__ymap_get(d, "size_of"), path,
			   "size_of names a dimension of a tensor's shape, not '%s'", quoted(p->size_of));
	return 0;
}

static const field param_item = { K(NULL, YN_MAP, "a parameter definition (a mapping)", p_param),
				  .flags = F_SUB };

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

/* tuning: [ { arch, when, arch_specific, key: value, ... } ], read in the
 * entry's order. */
static const field tuning_fields[] = {
	{ K("arch", YN_MAP, "a mapping with min and/or max", p_arch_range), .flags = F_SUB,
	  OFF(spec_tuning, arch) },
	{ K("when", YN_MAP, "a mapping of parameter values", p_cond), .flags = F_SUB,
	  OFF(spec_tuning, when) },
	{ S("arch_specific", p_bool), .flags = F_SUB, OFF(spec_tuning, arch_specific) },
	{ .key = NULL },
};

static int tuning_value(sctx *c, spec_tuning *t, const ynode *k, const ynode *v)
{
	spec_family *f = c->f;
	spec_kv *kv = &t->kv[t->n];
	const char *path;
	size_t i;
	int rc;

	if (!is_ident(k->str))
		return ERR(c, k, "tuning", "'%s' is not a name", quoted(k->str));
	if (jitk__spec_param_index(f, k->str) >= 0)
		return ERR(c, k, "tuning", "'%s' is a parameter; tuning cannot set it", quoted(k->str));
	kv->loc = loc_of(c, k);
	if (v->kind == YN_SCALAR && v->plain && (!strcmp(v->str, "true") || !strcmp(v->str, "false")))
		kv->value = !strcmp(v->str, "true");
	else if (!(path = path_of_key(c, "tuning", k->str)))
		return JITK_ENOMEM;
	else if ((rc = get_int(c, v, path, &kv->value)))
		return rc;
	if ((rc = copy(c, &kv->key, k->str)))
		return rc;
	t->n++;
	for (i = 0; i < f->ntuning_keys; i++)
		if (!strcmp(f->tuning_keys[i], kv->key))
			return 0;
	if ((rc = member_name(c, f, k, "tuning")))
		return rc;
	/* name_budget keeps the keys within SPEC_MAX_NAMES. */
	if (!f->tuning_keys && !(f->tuning_keys = ARRAY(c, SPEC_MAX_NAMES, char *)))
		return JITK_ENOMEM;
	f->tuning_keys[f->ntuning_keys++] = kv->key;
	return 0;
}

static int p_tuning(sctx *c, const ynode *e, const char *path, void *out, const field *fd)
{
	spec_tuning *t = out;
	size_t j;
	int rc = 0;

	t->loc = loc_of(c, e);
	t->arch_specific = -1;
	if (!(t->kv = ARRAY(c, e->n, spec_kv)))
		return JITK_ENOMEM;
	for (j = 0; j < e->n && !rc; j++) {
		const ynode *k = ymap_key(e, j), *v = ymap_val(e, j);

		rc = (fd = field_named(tuning_fields, k->str)) ? parse_field(c, v, "tuning", fd, t)
							       : tuning_value(c, t, k, v);
	}
	return rc;
}

static const field tuning_item = { K(NULL, YN_MAP, "a tuning entry (a mapping)", p_tuning) };

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
					      "argument '%s' is not an integer", quoted(name));
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
				      "derived value '%s' uses itself", quoted(name));
		return err_at(nc->c, n->line, col, nc->path,
			      "'%s' is derived later, at %d:%d (a derived value can use only "
			      "the ones above it)", quoted(name), k->line, k->col);
	}
	return err_at(nc->c, n->line, col, nc->path,
		      "unknown name '%s' in expression '%s'", quoted(name), quoted(n->str));
}

static void free_expr(void *e)
{
	jitk__expr_free(e);
}

static int parse_expr(sctx *c, const ynode *n, const char *path, size_t nderived, int names,
		      spec_expr *out)
{
	char msg[160];
	int pos = 0, rc;
	name_check nc = { c, c->f, n, path, nderived, names };

	if ((rc = want_kind(c, n, path, YN_SCALAR, "an expression")))
		return rc;
	out->loc = loc_of(c, n);
	if ((rc = copy(c, &out->text, n->str)))
		return rc;
	if (jitk__expr_parse(&out->e, n->str, msg, sizeof(msg), &pos))
		return !strcmp(msg, "out of memory") ? JITK_ENOMEM
		       : err_at(c, n->line, n->col + scalar_offset(c, n, pos), path,
				"bad expression '%s': %s", quoted(n->str), msg);
	if (jitk__arena_defer(c->a, free_expr, out->e)) {
		out->e = NULL;
		return JITK_ENOMEM;
	}
	return jitk__expr_visit_names(out->e, check_name, &nc);
}

static int count_name(void *ctx, const char *name, int pos)
{
	++*(int *)ctx;
	return 0;
}

/* Launch geometry and alignments (RANGE_*): a constant is checked now, at
 * its line (a variable one for every variant by jitk__specialize). */
static const struct {
	int64_t lo, hi;
	int pow2;
} ranges[] = { { 1, SPEC_MAX_BLOCK, 0 }, { 0, SPEC_MAX_SHARED_BYTES, 0 }, { 1, SPEC_MAX_ALIGN, 1 } };
enum { RANGE_BLOCK, RANGE_SHARED, RANGE_ALIGN };

static int check_constant(const sctx *c, const ynode *n, const spec_expr *x, const char *path,
			  int range)
{
	int64_t v, lo = ranges[range].lo, hi = ranges[range].hi;
	int names = 0, pow2 = ranges[range].pow2;
	char err[160];

	jitk__expr_visit_names(x->e, count_name, &names);
	if (names)
		return 0;
	if (jitk__expr_eval(x->e, NULL, NULL, &v, err, sizeof(err)))
		return ERR(c, n, path, "'%s' cannot be evaluated: %s", quoted(x->text), err);
	if (v >= lo && v <= hi && !(pow2 && (v & (v - 1))))
		return 0;
	snprintf(err, sizeof(err), "%lld", (long long)v);
	if (!strcmp(err, x->text))
		return ERR(c, n, path, "%lld is out of range; it must be %s%lld to %lld",
			   (long long)v, pow2 ? "a power of two from " : "", (long long)lo,
			   (long long)hi);
	return ERR(c, n, path, "'%s' is %lld; it must be %s%lld to %lld", quoted(x->text),
		   (long long)v, pow2 ? "a power of two from " : "", (long long)lo,
		   (long long)hi);
}

/* An expression: arg is the names it may use (-1: c->arg's, in a check). */
static int p_expr(sctx *c, const ynode *v, const char *path, void *out, const field *fd)
{
	return parse_expr(c, v, path, c->f->nderived, fd->arg < 0 ? c->arg : fd->arg,
			  AT(out, fd->off, spec_expr));
}

/* Launch geometry and alignments: arg is the range (RANGE_*). */
static int p_bounded(sctx *c, const ynode *v, const char *path, void *out, const field *fd)
{
	spec_expr *x = AT(out, fd->off, spec_expr);
	int rc = parse_expr(c, v, path, c->f->nderived, NAMES_SPEC, x);

	return rc ? rc : check_constant(c, v, x, path, fd->arg);
}

static int p_derived(sctx *c, const ynode *v, const char *path, void *out, const field *fd)
{
	int rc;

	if (name_defined(c->f, c->key->str, c->index))
		return ERR(c, c->key, path, "'%s' is already defined", quoted(c->key->str));
	if ((rc = member_name(c, c->f, c->key, path)) ||
	    (rc = copy(c, &((spec_expr *)out)->name, c->key->str)))
		return rc;
	return parse_expr(c, v, path, c->index, NAMES_SPEC, out);
}

static const field derived_item = { S(NULL, p_derived) };

/* constraints and launch.checks: [ { check: EXPR, message: TEXT } ] */
static const field check_fields[] = {
	{ S("check", p_expr), .flags = F_REQ, .arg = -1 },
	{ S("message", p_text), .flags = F_REQ, OFF(spec_expr, message) },
	{ .key = NULL },
};

static const field constraint_item = { K(NULL, YN_MAP, "a check (a mapping)", p_map),
				       .sub = check_fields, .arg = NAMES_SPEC };
static const field launch_check_item = { K(NULL, YN_MAP, "a check (a mapping)", p_map),
					 .sub = check_fields, .arg = NAMES_LAUNCH };

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

/* type: tma - a TMA descriptor built from a tensor argument (spec_tma).
 * What a tensor or scalar has, it has not; tensor and box it needs. */
static int tma_type(sctx *c, const ynode *t, const char *path, spec_arg *a)
{
	static const char *const not_tma[] = { "shape", "strides", "io", "align", "nullable",
					       "configured", "default", NULL };
	const char *const *k;
	const ynode *n;

	for (k = not_tma; *k; k++)
		if ((n = jitk__ymap_get(c->map, *k)))
			return ERR(c, n, "args", "'%s' does not apply to a TMA descriptor (its tensor "
				   "has the shape)", *k);
	if (!jitk__ymap_get(c->map, "tensor") || !jitk__ymap_get(c->map, "box"))
		return ERR(c, t, path, "a TMA descriptor needs tensor (the tensor argument it "
			   "describes) and box (the tile it moves)");
	a->type = AT_TMA;
	a->io = IO_IN;
	if (!(a->tma = ARRAY(c, 1, spec_tma)))
		return JITK_ENOMEM;
	return copy(c, &a->cpp, "jitk_tensor_map");
}

/* args: { name: { type, shape, ... } }. The type: "const bf16" (a tensor
 * when it has a shape), "f32", "i32", "i64" (scalars); it decides which
 * other keys apply, checked here first. */
static int p_arg_type(sctx *c, const ynode *t, const char *path, void *out, const field *fd)
{
	static const char *const tensor_only[] = { "strides", "io", "align", "nullable",
						   "configured", NULL };
	static const char *const tma_only[] = { "tensor", "box", "element_strides", "swizzle",
						"interleave", "l2_promotion", "oob_fill", NULL };
	static const char *const scalars[] = { "f32", "i32", "i64", NULL };
	static const enum spec_atype scalar_types[] = { AT_F32, AT_I32, AT_I64 };
	spec_arg *a = out;
	const char *s = t->str, *const *k;
	char name[16];
	size_t len;
	int i;

	if (!strcmp(s, "tma"))
		return tma_type(c, t, path, a);
	for (k = tma_only; *k; k++) {
		const ynode *n = jitk__ymap_get(c->map, *k);

		if (n)
			return ERR(c, n, "args", "'%s' applies to TMA descriptors only (type: tma)", *k);
	}
	if (!strncmp(s, "const ", 6)) {
		a->is_const = 1;
		s += 6;
	}
	len = strlen(s);
	if (len && s[len - 1] == '*')
		return ERR(c, t, path,
			   "'%s': pointer arguments are tensors: write the element type "
			   "('const bf16' for an input) and give a shape", quoted(t->str));
	if (len >= sizeof(name) || !(a->elem = (snprintf(name, sizeof(name), "%s", s),
						  jitk__spec_elem(name))))
		return ERR(c, t, path,
			   "unknown type '%s' (bf16, fp8_e4m3, f32, i32, i64, u8; 'const' for input tensors)",
			   quoted(t->str));
	a->io = IO_IN;
	if (jitk__ymap_get(c->map, "shape")) {
		a->type = AT_TENSOR;
		a->io = a->is_const ? IO_IN : IO_OUT;
		a->cpp = jitk__arena_printf(c->a, "%s%s *", a->is_const ? "const " : "",
					    a->elem->cpp);
		return a->cpp ? 0 : JITK_ENOMEM;
	}
	if (a->is_const)
		return ERR(c, t, path, "'const' applies to tensors only (give a shape)");
	if ((i = choose(s, scalars)) < 0)
		return ERR(c, t, path, "'%s' can only be a tensor: give its shape", s);
	a->type = scalar_types[i];
	for (k = tensor_only; *k; k++)
		if ((t = jitk__ymap_get(c->map, *k)))
			return ERR(c, t, "args", "'%s' applies to tensors only (give a shape)", *k);
	return copy(c, &a->cpp, a->elem->cpp);
}

static int p_io(sctx *c, const ynode *v, const char *path, void *out, const field *fd)
{
	static const char *const names[] = { "in", "out", "inout", "scratch", NULL }; /* spec_io */
	spec_arg *a = out;
	int i = choose(v->str, names);

	if (i < 0)
		return ERR(c, v, path, "expected in, out, inout or scratch, got '%s'", quoted(v->str));
	a->io = (enum spec_io)i;
	if (a->is_const && a->io != IO_IN)
		return ERR(c, v, path, "a const tensor is an input; drop 'const' to write it");
	if (!a->is_const && a->io == IO_IN)
		return ERR(c, v, path, "a tensor the kernel only reads is 'const'");
	return 0;
}

static int p_configured(sctx *c, const ynode *v, const char *path, void *out, const field *fd)
{
	spec_arg *a = out;

	if (strcmp(v->str, "positive_finite"))
		return ERR(c, v, path, "unknown rule '%s' (positive_finite)", quoted(v->str));
	if (strcmp(a->elem->name, "f32") || !a->is_const)
		return ERR(c, v, path, "a configured tensor is a const f32");
	a->configured = RULE_POSITIVE_FINITE;
	return 0;
}

static int p_default(sctx *c, const ynode *v, const char *path, void *out, const field *fd)
{
	spec_arg *a = out;
	char *end;
	int rc;

	if (a->type == AT_TENSOR)
		return ERR(c, v, path, "'default' applies to scalar arguments only");
	a->has_default = 1;
	if (a->type != AT_F32) {
		if ((rc = get_int(c, v, path, &a->def_i)))
			return rc;
		if (a->type == AT_I32 && (a->def_i < INT32_MIN || a->def_i > INT32_MAX))
			return ERR(c, v, path, "%lld is out of range for i32", (long long)a->def_i);
		return 0;
	}
	if ((rc = want_kind(c, v, path, YN_SCALAR, "a number")))
		return rc;
	errno = 0;
	a->def_f = strtof(v->str, &end);
	if (!v->plain || end == v->str || *end || errno || !isfinite(a->def_f))
		return ERR(c, v, path, "expected a finite number, got '%s'", quoted(v->str));
	return 0;
}

static const field dim_item = { S(NULL, p_expr), .arg = NAMES_SHAPE };

/* shape and strides (arg 1): lists of expressions, read once every
 * argument is known. */
static int p_dims(sctx *c, const ynode *n, const char *path, void *out, const field *fd)
{
	spec_arg *a = out;
	size_t ns = 0;

	if (!n->n || n->n > JITK_MAX_DIMS)
		return ERR(c, n, path, "a tensor has 1 to %d dimensions", JITK_MAX_DIMS);
	if (fd->arg && n->n != a->ndim)
		return ERR(c, n, path, "%zu strides for %zu dimensions", n->n, a->ndim);
	return read_items(c, n, path, fd, fd->arg ? &a->strides : &a->shape,
			  fd->arg ? &ns : &a->ndim);
}

/* The keys of a TMA descriptor (type checked them first). */
static int p_tma_tensor(sctx *c, const ynode *v, const char *path, void *out, const field *fd)
{
	spec_arg *a = out;

	a->tma->tensor_loc = loc_of(c, v);
	return get_ident(c, v, path, &a->tma->tensor);
}

static const field tma_dim_item = { S(NULL, p_expr), .arg = NAMES_SPEC };

static int p_tma_dims(sctx *c, const ynode *n, const char *path, void *out, const field *fd)
{
	spec_tma *t = ((spec_arg *)out)->tma;

	if (!n->n || n->n > SPEC_TMA_MAX_RANK)
		return ERR(c, n, path, "a TMA descriptor has 1 to %d dimensions", SPEC_TMA_MAX_RANK);
	return read_items(c, n, path, fd, fd->arg ? &t->elem_strides : &t->box,
			  fd->arg ? &t->nelem_strides : &t->nbox);
}

static int p_tma_expr(sctx *c, const ynode *v, const char *path, void *out, const field *fd)
{
	spec_tma *t = ((spec_arg *)out)->tma;
	spec_expr *x = fd->arg == 0 ? &t->swizzle : fd->arg == 1 ? &t->interleave : &t->l2;

	return parse_expr(c, v, path, c->f->nderived, NAMES_SPEC, x);
}

static int p_tma_oob(sctx *c, const ynode *v, const char *path, void *out, const field *fd)
{
	spec_tma *t = ((spec_arg *)out)->tma;

	if (strcmp(v->str, "zero") && strcmp(v->str, "nan"))
		return ERR(c, v, path, "expected zero or nan, got '%s'", quoted(v->str));
	t->oob_nan = !strcmp(v->str, "nan");
	return 0;
}

/* batch: true - the descriptor gets one more, outermost dimension of one
 * element (stride 0, box 1): the rank-(n+1) view of an unbatched tensor
 * that batched kernels (CUTLASS's collectives, CuTe's TMA atoms) expect. */
static int p_tma_batch(sctx *c, const ynode *v, const char *path, void *out, const field *fd)
{
	return get_bool(c, v, path, &((spec_arg *)out)->tma->batch);
}

/* A TMA descriptor's defaults and its tensor, once every argument is
 * read: a tensor argument of the family (present wherever the descriptor
 * is: the same when), of a rank and element type TMA has, with a box
 * and element strides of that rank. */
static int tma_link(sctx *c, spec_family *f, spec_arg *a, const ynode *e)
{
	spec_tma *t = a->tma;
	int k = jitk__spec_arg_index(f, t->tensor), pos;
	char err[32];
	const spec_arg *x;
	static const char *const defaults[3] = { "0", "0", "0" };
	spec_expr *dflt[3] = { &t->swizzle, &t->interleave, &t->l2 };
	size_t i;

	if (k < 0 || f->args[k].type != AT_TENSOR)
		return err_at(c, t->tensor_loc.line, t->tensor_loc.col, "args",
			      "'%s' is not a tensor argument of %s (a TMA descriptor describes one)",
			      quoted(t->tensor), f->name);
	x = &f->args[k];
	if (x->io == IO_SCRATCH)
		return err_at(c, t->tensor_loc.line, t->tensor_loc.col, "args",
			      "'%s' is scratch: a TMA descriptor describes a tensor of the call",
			      quoted(t->tensor));
	t->tensor_arg = (size_t)k;
	if (x->ndim + (t->batch ? 1 : 0) > SPEC_TMA_MAX_RANK)
		return err_at(c, t->tensor_loc.line, t->tensor_loc.col, "args",
			      "tensor %s has %zu dimensions%s; TMA takes 1 to %d", x->name, x->ndim,
			      t->batch ? " and a batch" : "", SPEC_TMA_MAX_RANK);
	if (t->nbox != x->ndim)
		return ERR(c, jitk__ymap_get(e, "box"), "args", "box has %zu dimensions, tensor %s %zu",
			   t->nbox, x->name, x->ndim);
	if (t->elem_strides && t->nelem_strides != x->ndim)
		return ERR(c, jitk__ymap_get(e, "element_strides"), "args",
			   "element_strides has %zu dimensions, tensor %s %zu", t->nelem_strides,
			   x->name, x->ndim);
	if (jitk__ymap_get(e, "when"))
		return ERR(c, jitk__ymap_get(e, "when"), "args", "a TMA descriptor is there when its "
			   "tensor is: give the 'when' to %s", x->name);
	a->when = x->when;
	for (i = 0; i < 3; i++) {
		if (dflt[i]->e)
			continue;
		dflt[i]->text = (char *)defaults[i];
		dflt[i]->loc = a->loc;
		if (jitk__expr_parse(&dflt[i]->e, dflt[i]->text, err, sizeof(err), &pos) ||
		    jitk__arena_defer(c->a, free_expr, dflt[i]->e))
			return JITK_ENOMEM;
	}
	return 0;
}

static const field arg_fields[] = {
	{ K("type", YN_SCALAR, "a type like 'const bf16'", p_arg_type), .flags = F_REQ | F_SUB },
	{ K("shape", YN_SEQ, "a list of dimensions", p_dims), .flags = F_SUB | F_LATER,
	  .item = &dim_item, .size = sizeof(spec_expr) },
	{ K("strides", YN_SEQ, "a list of dimensions", p_dims), .flags = F_SUB | F_LATER,
	  .arg = 1, .item = &dim_item, .size = sizeof(spec_expr) },
	{ K("io", YN_SCALAR, "in, out, inout or scratch", p_io), .flags = F_SUB },
	{ S("align", p_bounded), .flags = F_SUB, OFF(spec_arg, align), .arg = RANGE_ALIGN },
	{ S("nullable", p_bool), .flags = F_SUB, OFF(spec_arg, nullable) },
	{ K("configured", YN_SCALAR, "a rule (positive_finite)", p_configured), .flags = F_SUB },
	{ S("default", p_default), .flags = F_SUB },
	{ K("when", YN_MAP, "a mapping of parameter values", p_cond), .flags = F_SUB,
	  OFF(spec_arg, when) },
	{ S("tensor", p_tma_tensor), .flags = F_SUB },
	{ K("box", YN_SEQ, "a list of tile dimensions", p_tma_dims), .flags = F_SUB,
	  .item = &tma_dim_item, .size = sizeof(spec_expr) },
	{ K("element_strides", YN_SEQ, "a list of element strides", p_tma_dims), .flags = F_SUB,
	  .arg = 1, .item = &tma_dim_item, .size = sizeof(spec_expr) },
	{ S("swizzle", p_tma_expr), .flags = F_SUB, .arg = 0 },
	{ S("interleave", p_tma_expr), .flags = F_SUB, .arg = 1 },
	{ S("l2_promotion", p_tma_expr), .flags = F_SUB, .arg = 2 },
	{ K("oob_fill", YN_SCALAR, "zero or nan", p_tma_oob), .flags = F_SUB },
	{ S("batch", p_tma_batch), .flags = F_SUB },
	{ .key = NULL },
};

static int p_arg(sctx *c, const ynode *e, const char *path, void *out, const field *fd)
{
	const ynode *k = c->key;
	spec_arg *a = out;
	char err[32];
	int pos, rc;

	a->loc = loc_of(c, k);
	if ((rc = copy(c, &a->name, k->str)) || (rc = parse_map(c, e, path, arg_fields, a)))
		return rc;
	if (a->type == AT_TENSOR && !jitk__ymap_get(e, "align")) {
		a->align.text = jitk__arena_printf(c->a, "%d", a->elem->bits / 8);
		a->align.loc = a->loc;
		if (!a->align.text ||
		    jitk__expr_parse(&a->align.e, a->align.text, err, sizeof(err), &pos) ||
		    jitk__arena_defer(c->a, free_expr, a->align.e))
			return JITK_ENOMEM;
	}
	/* Scalars are names in expressions; tensors are not. */
	if (a->type != AT_TENSOR &&
	    (name_defined(c->f, k->str, c->f->nderived) || !strcmp(k->str, "sm_count")))
		return ERR(c, k, path, "argument '%s' has the name of a parameter, tuning key "
			   "or derived value", quoted(k->str));
	return 0;
}

static const field arg_item = { K(NULL, YN_MAP, "an argument (a mapping)", p_arg) };

/* A scratch tensor is the runtime's memory: one dimension (its size in
 * elements, an expression of the variant and the call's scalars), laid
 * out as jitk makes it, never NULL, not the caller's to configure. */
static int scratch_check(sctx *c, const spec_arg *a, const ynode *e)
{
	static const char *const not_scratch[] = { "strides", "nullable", "configured", "default",
						   NULL };
	const char *const *k;
	const ynode *n;

	for (k = not_scratch; *k; k++)
		if ((n = jitk__ymap_get(e, *k)))
			return ERR(c, n, "args", "'%s' does not apply to scratch (jitk makes it: "
				   "contiguous, never NULL)", *k);
	if (a->ndim != 1)
		return ERR(c, jitk__ymap_get(e, "shape"), "args", "scratch has one dimension, its "
			   "size in elements (%zu given)", a->ndim);
	return 0;
}

static int p_args(sctx *c, const ynode *n, const char *path, void *out, const field *fd)
{
	spec_family *f = out;
	size_t i;
	int rc;

	if (n->n > JITK_MAX_SPEC_ARGS)
		return ERR(c, n, path, "more than %d arguments", JITK_MAX_SPEC_ARGS);
	if ((rc = p_list(c, n, path, out, fd)))
		return rc;
	/* Shapes and strides last: they may name any integer argument. */
	for (i = 0; i < n->n && !rc; i++) {
		const ynode *e = ymap_val(n, i), *v;
		spec_arg *a = &f->args[i];

		if ((v = jitk__ymap_get(e, "shape")))
			rc = parse_field(c, v, path, field_named(arg_fields, "shape"), a);
		if (!rc && (v = jitk__ymap_get(e, "strides")))
			rc = parse_field(c, v, path, field_named(arg_fields, "strides"), a);
		if (!rc && a->configured && (a->ndim != 1 || strcmp(a->shape[0].text, "1")))
			return ERR(c, jitk__ymap_get(e, "configured"), "args.configured",
				   "a configured tensor has shape [1]");
		if (!rc && a->io == IO_SCRATCH && (rc = scratch_check(c, a, e)))
			return rc;
		for (size_t j = 0; !rc && a->io == IO_SCRATCH && j < i; j++)
			if (f->args[j].io == IO_SCRATCH)
				return ERR(c, jitk__ymap_get(e, "io"), "args.io", "a second scratch argument "
					   "(%s is one): a family has one, laid out as its kernels agree",
					   f->args[j].name);
	}
	/* TMA descriptors last: they name tensors, which now have shapes. */
	for (i = 0; i < n->n && !rc; i++)
		if (f->args[i].type == AT_TMA)
			rc = tma_link(c, f, &f->args[i], ymap_val(n, i));
	return rc;
}

static int p_dim_name(sctx *c, const ynode *n, const char *path, void *out, const field *fd)
{
	const ynode *args = c->t ? jitk__ymap_get(c->t->root, "args") : NULL;
	int rc = get_ident(c, n, path, out);
	size_t i;

	if (!rc && name_defined(c->f, *(char **)out, c->f->nderived))
		return ERR(c, n, path, "'%s' is already defined", quoted(n->str));
	/* An argument of that name (read later) would take the name's
	 * place in every shape, and the dim would never be bound. */
	for (i = 0; !rc && args && args->kind == YN_MAP && i < args->n; i++)
		if (!strcmp(ymap_key(args, i)->str, n->str))
			return ERR(c, n, path, "'%s' is already defined (an argument, at %d:%d)",
				   quoted(n->str), ymap_key(args, i)->line, ymap_key(args, i)->col);
	return rc;
}

static const field dim_name_item = { S(NULL, p_dim_name) };

static int p_alias(sctx *c, const ynode *p, const char *path, void *out, const field *fd)
{
	size_t j;
	int k, rc;

	if (p->n != 2)
		return ERR(c, p, path, "expected a pair of tensor arguments");
	for (j = 0; j < 2; j++) {
		if ((rc = want_kind(c, p->kids[j], path, YN_SCALAR, "an argument name")))
			return rc;
		k = jitk__spec_arg_index(c->f, p->kids[j]->str);
		if (k < 0 || c->f->args[k].type != AT_TENSOR)
			return ERR(c, p->kids[j], path, "'%s' is not a tensor argument",
				   quoted(p->kids[j]->str));
		if (c->f->args[k].io == IO_SCRATCH)
			return ERR(c, p->kids[j], path, "'%s' is scratch, which shares no bytes with "
				   "any argument", quoted(p->kids[j]->str));
		((size_t *)out)[j] = (size_t)k;
	}
	return 0;
}

static const field alias_item = { K(NULL, YN_SEQ, "a pair [a, b]", p_alias) };

int jitk__spec_arg_index(const spec_family *f, const char *name)
{
	size_t i;

	for (i = 0; i < f->nargs; i++)
		if (!strcmp(f->args[i].name, name))
			return (int)i;
	return -1;
}

static const field launch_fields[] = {
	{ S("grid", p_expr), .flags = F_REQ | F_SUB, OFF(spec_family, grid), .arg = NAMES_LAUNCH },
	{ S("block", p_bounded), .flags = F_REQ | F_SUB, OFF(spec_family, block),
	  .arg = RANGE_BLOCK },
	{ S("shared_bytes", p_bounded), .flags = F_SUB, OFF(spec_family, smem),
	  .arg = RANGE_SHARED },
	{ K("checks", YN_SEQ, "a list of checks", p_list), .flags = F_SUB,
	  LIST(spec_family, checks, nchecks, &launch_check_item) },
	{ S("programmatic", p_bool), .flags = F_SUB, OFF(spec_family, programmatic) },
	{ S("builder", p_string), .flags = F_SUB, OFF(spec_family, builder), .arg = 2 },
	{ .key = NULL },
};

/* NVRTC options a spec may add: an allow list (options.c) of options that
 * neither read nor write files, change the target or the kind of output,
 * nor break the numeric contract. jitk__tu_make checks again. */
static int p_option(sctx *c, const ynode *n, const char *path, void *out, const field *fd)
{
	const char *why;
	char shown[80];
	size_t j;
	int rc = get_string(c, n, path, out);

	if (rc || !(why = jitk__nvrtc_option_problem(n->str)))
		return rc;
	for (j = 0; n->str[j] && j + 1 < sizeof(shown); j++)
		shown[j] = (unsigned char)n->str[j] < 0x20 || (unsigned char)n->str[j] >= 0x7f
				   ? '?' : n->str[j];
	shown[j] = '\0';
	return ERR(c, n, path, "option '%s%s' is not allowed in a spec: %s", shown,
		   n->str[j] ? "..." : "", why);
}

static const field option_item = { S(NULL, p_option) };

/* ----------------------------------------------------------- symbols */

/* fallback: [ symbol, { symbol: { callee_arg: caller_arg | flat(caller_arg) } } ]
 * Names are checked when the symbols are linked. */
static int p_step(sctx *c, const ynode *step, const char *path, void *out, const field *fd)
{
	spec_fallback *fb = out;
	const ynode *name = step, *map = NULL;
	size_t m;
	int rc;

	if (step->kind == YN_MAP && step->n != 1)
		return ERR(c, step, path, "a fallback step is a symbol, or one "
			   "'symbol: { argument: argument }' mapping");
	if (step->kind == YN_MAP) {
		name = ymap_key(step, 0);
		map = ymap_val(step, 0);
	}
	fb->loc = loc_of(c, name);
	if ((rc = get_ident(c, name, path, &fb->symbol)) || !map)
		return rc;
	if ((rc = want_kind(c, map, path, YN_MAP, "a mapping of callee argument: caller argument")))
		return rc;
	if (!(fb->map = ARRAY(c, map->n, spec_argmap)))
		return JITK_ENOMEM;
	for (m = 0; m < map->n; m++) {
		const ynode *ck = ymap_key(map, m), *cv = ymap_val(map, m);
		spec_argmap *am = &fb->map[fb->nmap++];
		const char *t = cv->str;
		size_t len;

		am->loc = loc_of(c, cv);
		if ((rc = get_ident(c, ck, path, &am->callee)))
			return rc;
		if ((rc = want_kind(c, cv, path, YN_SCALAR, "an argument name or flat(name)")))
			return rc;
		len = strlen(t);
		am->flat = !strncmp(t, "flat(", 5) && len > 6 && t[len - 1] == ')';
		if (!(am->caller = am->flat ? jitk__arena_strndup(c->a, t + 5, len - 6)
					    : jitk__arena_strdup(c->a, t)))
			return JITK_ENOMEM;
		if (!is_ident(am->caller))
			return ERR(c, cv, path, "'%s' is not an argument name or flat(name)", quoted(t));
	}
	return 0;
}

static const field step_item = { S(NULL, p_step) };

static int p_fallback(sctx *c, const ynode *v, const char *path, void *out, const field *fd)
{
	if (v->n > SPEC_MAX_FALLBACKS)
		return ERR(c, v->kids[SPEC_MAX_FALLBACKS], path, "more than %d fallbacks",
			   SPEC_MAX_FALLBACKS);
	return p_list(c, v, path, out, fd);
}

/* How many instances s expands to, checked against the limits before
 * anything is allocated for them: the product of the value counts
 * (overflow-checked), and the running total of the set. */
static int count_instances(const sctx *c, const spec_family *f, spec_symbol *s)
{
	size_t total = 1, i;
	int overflow = 0, line = s->loc.line, col = s->loc.col;

	for (i = 0; i < f->nparams; i++)
		overflow |= __builtin_mul_overflow(total, s->nvals[i], &total);
	if (overflow)
		return err_at(c, line, col, "symbols",
			      "symbol '%s' expands to more than 2^64 instances (one per "
			      "combination of the listed values); the limit is %d",
			      quoted(s->name), SPEC_MAX_SYMBOL_INSTANCES);
	if (total > SPEC_MAX_SYMBOL_INSTANCES)
		return err_at(c, line, col, "symbols",
			      "symbol '%s' expands to %zu instances (one per combination of the "
			      "listed values); the limit is %d",
			      quoted(s->name), total, SPEC_MAX_SYMBOL_INSTANCES);
	if (total > SPEC_MAX_INSTANCES - c->set->nplanned)
		return err_at(c, line, col, "symbols",
			      "symbol '%s' brings the spec set to %zu instances; the limit is %d",
			      quoted(s->name), c->set->nplanned + total, SPEC_MAX_INSTANCES);
	c->set->nplanned += total;
	s->ninsts = total;
	return 0;
}

/* A symbol's params: a value or a list of values for every parameter of
 * its family, each combination an instance. */
static int p_symbol_params(sctx *c, const ynode *params, const char *path, void *out,
			   const field *fd)
{
	spec_family *f = c->f;
	spec_symbol *s = out;
	const ynode *pv;
	size_t i;
	int rc;

	for (i = 0; i < params->n; i++)
		if (jitk__spec_param_index(f, ymap_key(params, i)->str) < 0)
			return ERR(c, ymap_key(params, i), path, "unknown parameter '%s' of family '%s'",
				   quoted(ymap_key(params, i)->str), quoted(f->name));
	for (i = 0; i < f->nparams; i++) {
		if (!(pv = jitk__ymap_get(params, f->params[i].name)))
			return ERR(c, params, path, "missing value for parameter '%s'",
				   quoted(f->params[i].name));
		if ((rc = param_values(c, &f->params[i], pv, path, 1, &s->vals[i], &s->nvals[i])))
			return rc;
	}
	return count_instances(c, f, s);
}

static const field symbol_fields[] = {
	{ K("params", YN_MAP, "a mapping of parameter values", p_symbol_params),
	  .flags = F_REQ | F_SUB },
	{ K("gates", YN_SEQ, "a list of gates", p_list),
	  LIST(spec_symbol, gates, ngates, &symbol_gate) },
	{ K("fallback", YN_SEQ, "a list of fallback steps", p_fallback),
	  LIST(spec_symbol, fallback, nfallback, &step_item) },
	{ S("description", p_string), OFF(spec_symbol, description) },
	{ .key = NULL },
};

static int p_symbol(sctx *c, const ynode *d, const char *path, void *out, const field *fd)
{
	spec_symbol *s = out;
	size_t np = c->f->nparams;
	int rc;

	if (!(s->vals = ARRAY(c, np, int64_t *)) || !(s->nvals = ARRAY(c, np, size_t)))
		return JITK_ENOMEM;
	if ((rc = check_cxx_name(c, c->key, path,
				       "a symbol (its instances' parameter structs are named after it)")) ||
	    (rc = copy(c, &s->name, c->key->str)))
		return rc;
	s->fam = c->f;
	s->loc = loc_of(c, c->key);
	c->set->syms[c->set->nsyms++] = s;
	return parse_map(c, d, path, symbol_fields, s);
}

static const field symbol_item = { K(NULL, YN_MAP, "a symbol definition (a mapping)", p_symbol),
				   .flags = F_SUB };

static int p_symbols(sctx *c, const ynode *n, const char *path, void *out, const field *fd)
{
	spec_set *set = c->set;
	spec_symbol *syms;
	size_t count = 0;

	if (!n->n)
		return ERR(c, n, path, "a family needs at least one symbol");
	set->syms = jitk__arena_grow(c->a, set->syms, set->nsyms, set->nsyms + n->n,
				     sizeof(*set->syms));
	/* A symbol defined twice is found when the names are sorted. */
	return set->syms ? read_items(c, n, path, fd, &syms, &count) : JITK_ENOMEM;
}

/* ---------------------------------------------------- header packages */

/* A directory name relative to a package root (a search directory, the
 * part of a find path below $env): no absolute path, no "..", nothing
 * unprintable - jitk never looks outside what the root holds. */
static const char *rel_dir_problem(const char *s)
{
	const char *p = s;

	if (!*s)
		return "is empty";
	if (*s == '/')
		return "is absolute (name it relative to the root)";
	for (; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p == 0x7f)
			return "holds a control character";
	for (p = s; *p; p = *p ? p + 1 : p) {
		size_t n = strcspn(p, "/");

		if (n == 2 && !strncmp(p, "..", 2))
			return "has a '..' component (a package never reaches outside its root)";
		p += n;
	}
	return NULL;
}

static int p_find_path(sctx *c, const ynode *v, const char *path, void *out, const field *fd)
{
	int rc = get_string(c, v, path, AT(out, fd->off, char *));
	const char *p;

	for (p = v->str; !rc && *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p == 0x7f)
			return ERR(c, v, path, "the path holds a control character");
	return rc;
}

static const field find_fields[] = {
	{ S("env", p_ident), OFF(spec_find, env) },
	{ S("path", p_find_path), OFF(spec_find, path) },
	{ S("configured", p_ident), OFF(spec_find, configured) },
	{ .key = NULL },
};

/* One place to look: { env: VAR, path: REL } ($VAR/REL, REL optional),
 * { path: /ABS } or { configured: NAME }. */
static int p_find(sctx *c, const ynode *n, const char *path, void *out, const field *fd)
{
	spec_find *f = out;
	const ynode *pn = jitk__ymap_get(n, "path");
	const char *why;
	int rc;

	f->loc = loc_of(c, n);
	if ((rc = parse_map(c, n, path, find_fields, f)))
		return rc;
	if (f->configured && (f->env || f->path))
		return ERR(c, n, path, "'configured' stands alone (no env or path with it)");
	if (!f->configured && !f->env && !f->path)
		return ERR(c, n, path, "a place to look needs env (and path), path or configured");
	if (f->env && f->path && (why = rel_dir_problem(f->path)))
		return ERR(c, pn, path, "path '%s' below $%s %s", quoted(f->path), f->env, why);
	/* Without env, a relative path is relative to this file (like a
	 * spec's template): a package kept next to the specs. */
	if (!f->env && f->path && f->path[0] != '/') {
		const char *slash = strrchr(c->file, '/');

		if (!(f->path = slash ? jitk__arena_printf(c->a, "%.*s/%s", (int)(slash - c->file),
							  c->file, f->path)
				      : f->path))
			return JITK_ENOMEM;
	}
	return 0;
}

static const field find_item = { K(NULL, YN_MAP, "a place to look (a mapping)", p_find) };

static int p_search_dir(sctx *c, const ynode *v, const char *path, void *out, const field *fd)
{
	char **s = out;
	const char *why;
	int rc = get_string(c, v, path, s);

	if (!rc && (why = rel_dir_problem(*s)))
		return ERR(c, v, path, "search directory '%s' %s", quoted(*s), why);
	return rc;
}

static const field search_item = { S(NULL, p_search_dir) };

static const field package_fields[] = {
	{ S("description", p_string), .flags = F_SUB, OFF(spec_package, description) },
	{ K("find", YN_SEQ, "a list of places to look", p_list), .flags = F_REQ | F_SUB,
	  LIST(spec_package, find, nfind, &find_item) },
	{ K("search", YN_SEQ, "a list of directories", p_list), .flags = F_SUB,
	  .dup = "directory ", LIST(spec_package, search, nsearch, &search_item) },
	{ .key = NULL },
};

/* A package name also names its environment variable, JITK_PACKAGE_<NAME>
 * in capitals: lower-case letters, digits and '_' keep that one to one. */
static int package_name_ok(const char *s)
{
	if (!islower((unsigned char)*s))
		return 0;
	for (; *s; s++)
		if (!islower((unsigned char)*s) && !isdigit((unsigned char)*s) && *s != '_')
			return 0;
	return 1;
}

static int p_package(sctx *c, const ynode *d, const char *path, void *out, const field *fd)
{
	spec_package *p = out;
	size_t i;
	int rc;

	p->loc = loc_of(c, c->key);
	if (!package_name_ok(c->key->str))
		return ERR(c, c->key, path, "package name '%s' is not lower-case letters, digits "
			   "and '_' (it also names the variable JITK_PACKAGE_<NAME>, in capitals)",
			   quoted(c->key->str));
	for (i = 0; i < c->set->npackages; i++)
		if (!strcmp(c->set->packages[i].name, c->key->str))
			return ERR(c, c->key, path, "package '%s' is already defined at %s:%d:%d",
				   quoted(c->key->str), c->set->packages[i].loc.file,
				   c->set->packages[i].loc.line, c->set->packages[i].loc.col);
	if ((rc = copy(c, &p->name, c->key->str)) || (rc = parse_map(c, d, path, package_fields, p)))
		return rc;
	if (!p->nfind)
		return ERR(c, d, path, "find is empty");
	if (p->nsearch > SPEC_MAX_SEARCH)
		return ERR(c, d, path, "more than %d search directories", SPEC_MAX_SEARCH);
	if (!p->nsearch) {
		if (!(p->search = ARRAY(c, 1, char *)) || (rc = copy(c, &p->search[0], ".")))
			return JITK_ENOMEM;
		p->nsearch = 1;
	}
	return 0;
}

static const field package_item = { K(NULL, YN_MAP, "a package definition (a mapping)",
				      p_package) };

/* packages: { name: definition, ... }, appended to the set's list. */
static int p_packages(sctx *c, const ynode *n, const char *path, void *out, const field *fd)
{
	spec_set *set = c->set;
	spec_package *all;
	size_t i;

	if (set->npackages + n->n > SPEC_MAX_PACKAGES)
		return ERR(c, n, path, "more than %d header packages", SPEC_MAX_PACKAGES);
	if (!(all = jitk__arena_grow(c->a, set->packages, set->npackages, set->npackages + n->n,
				     sizeof(*all))))
		return JITK_ENOMEM;
	set->packages = all;
	for (i = 0; i < n->n; i++) {
		const ynode *k = ymap_key(n, i);
		const char *sub_path;
		int rc;

		c->key = k;
		if (!(sub_path = path_of_key(c, path, k->str)))
			return JITK_ENOMEM;
		if ((rc = parse_field(c, ymap_val(n, i), sub_path, &package_item,
				      &set->packages[set->npackages])))
			return rc;
		set->npackages++;
	}
	return 0;
}

/* A registry file: a description (documentation only) and the packages. */
typedef struct {
	char *description;
} spec_registry;

static const field registry_fields[] = {
	{ S("description", p_string), .flags = F_SUB, OFF(spec_registry, description) },
	{ K("packages", YN_MAP, "a mapping of packages", p_packages), .flags = F_REQ | F_SUB },
	{ .key = NULL },
};

/* A file whose top level has packages and no family is a registry. */
static int is_registry(const ynode *root)
{
	return root && root->kind == YN_MAP && jitk__ymap_get(root, "packages") &&
	       !jitk__ymap_get(root, "family");
}

static int parse_registry(sctx *c, const ynode *root)
{
	spec_registry r = { NULL };

	return parse_map(c, root, "", registry_fields, &r);
}

static int p_include(sctx *c, const ynode *v, const char *path, void *out, const field *fd)
{
	spec_include *inc = out;

	inc->loc = loc_of(c, v);
	return get_ident(c, v, path, &inc->name);
}

static const field include_item = { S(NULL, p_include) };

static int p_includes(sctx *c, const ynode *n, const char *path, void *out, const field *fd)
{
	if (n->n > SPEC_MAX_INCLUDES)
		return ERR(c, n, path, "more than %d header packages", SPEC_MAX_INCLUDES);
	return p_list(c, n, path, out, fd);
}

/* Every family's includes name a package some packages.yaml defines. */
static int link_packages(spec_set *set, const texts_t *tx)
{
	size_t i, j, k;

	for (i = 0; i < set->nfams; i++) {
		spec_family *f = set->fams[i];

		for (j = 0; j < f->nincludes; j++) {
			spec_include *inc = &f->includes[j];
			const char *best = NULL;
			int bestd = 3, d;

			for (k = 0; k < set->npackages; k++) {
				if (!strcmp(set->packages[k].name, inc->name))
					break;
				if ((d = jitk__edit_distance(inc->name, set->packages[k].name)) < bestd) {
					bestd = d;
					best = set->packages[k].name;
				}
			}
			if (k < set->npackages) {
				inc->package = k;
				continue;
			}
			if (best)
				return link_error(tx, set, &inc->loc, "unknown header package '%s' (did "
						  "you mean '%s'?)", quoted(inc->name), best);
			return link_error(tx, set, &inc->loc, "unknown header package '%s' (%s)",
					  quoted(inc->name), set->npackages
						  ? "it is in no packages.yaml of the spec directories"
						  : "the spec directories have no packages.yaml");
		}
	}
	return 0;
}

/* The template must be a readable regular file with something in it: read
 * it now (never blocking on a FIFO or device) so that a wrong path fails
 * at its line, not in NVRTC with a confusing static_assert. The path is
 * relative to the spec file (or absolute). */
static int p_template(sctx *c, const ynode *v, const char *path, void *out, const field *fd)
{
	spec_family *f = out;
	const char *slash = strrchr(c->file, '/'), *why;
	struct stat st;
	char *text = NULL;
	size_t len = 0, i;
	int rc;

	if ((rc = want_kind(c, v, path, YN_SCALAR, "a string")))
		return rc;
	f->template_path = v->str[0] == '/' || !slash ? jitk__arena_strdup(c->a, v->str)
		: jitk__arena_printf(c->a, "%.*s/%s", (int)(slash - c->file), c->file, v->str);
	if (!f->template_path)
		return JITK_ENOMEM;
	if (stat(f->template_path, &st))
		return ERR(c, v, path, "template file '%s' not found (%s)", quoted(v->str),
			   strerror(errno));
	rc = jitk__read_file(&text, &len, f->template_path, SPEC_MAX_TEMPLATE_BYTES);
	if (rc == JITK_EINVAL)
		return ERR(c, v, path, "template '%s' is larger than the %u-byte limit",
			   quoted(v->str), SPEC_MAX_TEMPLATE_BYTES);
	if (rc && rc != JITK_ENOMEM)
		return (why = jitk__arena_strdup(c->tmp, read_reason(f->template_path)))
			? ERR(c, v, path, "template '%s' cannot be read: %s", quoted(v->str), why)
			: JITK_ENOMEM;
	for (i = 0; i < len && isspace((unsigned char)text[i]); i++)
		;
	free(text);
	if (!rc && i == len)
		return ERR(c, v, path, "template '%s' is empty", quoted(v->str));
	return rc;
}

static int p_family_name(sctx *c, const ynode *v, const char *path, void *out,
			 const field *fd)
{
	spec_family *f = out, *const *prev;
	int rc = get_ident(c, v, path, &f->name);

	for (prev = c->set->fams; !rc && *prev != f; prev++)
		if (!strcmp((*prev)->name, f->name))
			return ERR(c, v, path, "family '%s' is already defined at %s:%d:%d",
				   quoted(f->name), (*prev)->loc.file, (*prev)->loc.line, (*prev)->loc.col);
	return rc;
}

/* ------------------------------------------------------------ bench */

/* One tensor of a benchmark case: NAME: [D0, D1, ...], NAME a tensor
 * argument of the family (read after args). */
static int p_bench_tensor(sctx *c, const ynode *n, const char *path, void *out, const field *fd)
{
	spec_bench_tensor *t = out;
	const spec_family *f = c->f;
	size_t i;
	int rc;

	t->loc = loc_of(c, c->key);
	if ((rc = copy(c, &t->name, c->key->str)))
		return rc;
	for (i = 0; i < f->nargs; i++)
		if (!strcmp(f->args[i].name, t->name))
			break;
	if (i == f->nargs || f->args[i].type != AT_TENSOR)
		return ERR(c, c->key, path, "'%s' is not a tensor argument of family '%s'",
			   quoted(t->name), quoted(f->name));
	if (f->args[i].io == IO_SCRATCH)
		return ERR(c, c->key, path, "'%s' is scratch, which jitk gives: a benchmark does not",
			   quoted(t->name));
	t->arg = i;
	if (n->n != f->args[i].ndim)
		return ERR(c, n, path, "%zu dimensions, but '%s' has %zu", n->n, quoted(t->name),
			   f->args[i].ndim);
	if (!(t->dims = ARRAY(c, n->n ? n->n : 1, int64_t)))
		return JITK_ENOMEM;
	{
		int64_t bytes = f->args[t->arg].elem->bits / 8;

		for (i = 0; i < n->n; i++) {
			if ((rc = get_int(c, n->kids[i], path, &t->dims[i])))
				return rc;
			if (t->dims[i] < 0)
				return ERR(c, n->kids[i], path, "dimension %lld is negative",
					   (long long)t->dims[i]);
			if (__builtin_mul_overflow(bytes, t->dims[i], &bytes) ||
			    bytes > ((int64_t)1 << 48))
				return ERR(c, n->kids[i], path, "the tensor would hold more than 2^48 "
					   "bytes");
		}
	}
	t->ndims = n->n;
	return 0;
}

static const field bench_tensor_item = { K(NULL, YN_SEQ, "a shape (a list of integers)",
					   p_bench_tensor), .flags = F_SUB };

static int p_positive(sctx *c, const ynode *v, const char *path, void *out, const field *fd)
{
	int64_t *x = AT(out, fd->off, int64_t);
	int rc = get_int(c, v, path, x);

	if (!rc && *x <= 0)
		return ERR(c, v, path, "a positive integer, not %lld", (long long)*x);
	return rc;
}

/* What a case's flops are counted against: the tensor cores' dense peak
 * for one input type (jitk bench prints the case's share of it). */
static int p_bench_peak(sctx *c, const ynode *v, const char *path, void *out, const field *fd)
{
	char **s = AT(out, fd->off, char *);
	int rc = get_string(c, v, path, s);

	if (!rc && strcmp(*s, "fp8_dense") && strcmp(*s, "bf16_dense"))
		return ERR(c, v, path, "peak is fp8_dense or bf16_dense, not '%s'", quoted(*s));
	return rc;
}

static const field bench_fields[] = {
	{ S("symbol", p_string), .flags = F_REQ | F_SUB, OFF(spec_bench, symbol) },
	{ K("tensors", YN_MAP, "a mapping of tensor argument: shape", p_list),
	  .flags = F_REQ | F_SUB, .dup = "tensor ",
	  LIST(spec_bench, tensors, ntensors, &bench_tensor_item) },
	{ S("flops", p_positive), .flags = F_SUB, OFF(spec_bench, flops) },
	{ S("bytes", p_positive), .flags = F_SUB, OFF(spec_bench, bytes) },
	{ S("peak", p_bench_peak), .flags = F_SUB, OFF(spec_bench, peak) },
	{ .key = NULL },
};

static int p_bench(sctx *c, const ynode *n, const char *path, void *out, const field *fd)
{
	spec_bench *b = out;
	const ynode *sym = jitk__ymap_get(n, "symbol");

	b->loc = loc_of(c, sym ? sym : n); /* where a link error points */
	return parse_map(c, n, path, bench_fields, b);
}

static const field bench_item = { K(NULL, YN_MAP, "a benchmark case (a mapping)", p_bench) };

static const field family_fields[] = {
	{ S("family", p_family_name), .flags = F_REQ | F_SUB },
	{ S("description", p_string), .flags = F_SUB, OFF(spec_family, description) },
	{ S("template", p_template), .flags = F_REQ | F_SUB },
	{ S("kernel", p_string), .flags = F_REQ | F_SUB, OFF(spec_family, kernel), .arg = 2 },
	{ K("params", YN_MAP, "a mapping of parameters", p_list), .flags = F_REQ | F_SUB,
	  LIST(spec_family, params, nparams, &param_item) },
	{ K("gates", YN_SEQ, "a list of gates", p_list), .flags = F_SUB,
	  LIST(spec_family, gates, ngates, &family_gate) },
	{ K("tuning", YN_SEQ, "a list of tuning entries", p_list), .flags = F_SUB,
	  LIST(spec_family, tuning, ntuning, &tuning_item) },
	{ K("derive", YN_MAP, "a mapping of name: expression", p_list), .flags = F_SUB,
	  LIST(spec_family, derived, nderived, &derived_item) },
	{ K("constraints", YN_SEQ, "a list of checks", p_list), .flags = F_SUB,
	  LIST(spec_family, constraints, nconstraints, &constraint_item) },
	{ K("dims", YN_SEQ, "a list of names", p_list), .flags = F_SUB, .dup = "",
	  LIST(spec_family, dims, ndims, &dim_name_item) },
	{ K("args", YN_MAP, "a mapping of arguments, in the kernel's order", p_args),
	  .flags = F_REQ | F_SUB, LIST(spec_family, args, nargs, &arg_item) },
	{ K("may_alias", YN_SEQ, "a list of argument pairs", p_list), .flags = F_SUB,
	  LIST(spec_family, may_alias, nmay_alias, &alias_item) },
	{ K("launch", YN_MAP, "a mapping", p_map), .flags = F_REQ | F_SUB, .sub = launch_fields },
	{ K("nvrtc_options", YN_SEQ, "a list of options", p_list), .flags = F_SUB,
	  LIST(spec_family, options, noptions, &option_item) },
	{ K("includes", YN_SEQ, "a list of header package names", p_includes), .flags = F_SUB,
	  .dup = "package ", LIST(spec_family, includes, nincludes, &include_item) },
	{ K("symbols", YN_MAP, "a mapping of symbols", p_symbols), .flags = F_REQ | F_SUB,
	  .item = &symbol_item, .size = sizeof(spec_symbol) },
	{ K("bench", YN_SEQ, "a list of benchmark cases", p_list), .flags = F_SUB,
	  LIST(spec_family, bench, nbench, &bench_item) },
	{ .key = NULL },
};

static int parse_family(sctx *c, const ynode *root)
{
	spec_family *f;
	int rc;

	if ((rc = want_kind(c, root, "", YN_MAP, "a mapping at the top level")))
		return rc;
	if ((rc = check_keys(c, root, "", family_fields)))
		return rc;
	if (!(f = ARRAY(c, 1, spec_family)))
		return JITK_ENOMEM;
	c->set->fams[c->set->nfams++] = f;
	f->loc = loc_of(c, root);
	f->file = (char *)c->file;
	c->f = f;
	return parse_fields(c, root, "", family_fields, f);
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

	s->first = set->ninsts;
	for (k = 0; k < s->ninsts; k++) {
		spec_instance *in = &set->insts[set->ninsts];
		size_t rest = k, first = 1;
		jbuf name;

		in->sym = s;
		in->vals = jitk__arena_array(set->arena, f->nparams, sizeof(*in->vals));
		if (!in->vals)
			return JITK_ENOMEM;
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
		in->name = name.oom ? NULL : jitk__arena_strdup(set->arena, name.data);
		jitk__jbuf_free(&name);
		if (!in->name)
			return JITK_ENOMEM;
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

	set->by_name = jitk__arena_array(set->arena, set->ninsts, sizeof(*set->by_name));
	if (!set->by_name)
		return JITK_ENOMEM;
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
				  quoted(second->sym->name), first->sym->loc.file,
				  first->sym->loc.line, first->sym->loc.col);
	return link_error(tx, set, &second->sym->loc,
			  "instance name '%s' clashes with symbol '%s' at %s:%d:%d",
			  quoted(second->name), quoted(first->sym->name), first->sym->loc.file,
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
	jitk_arena *tmp = jitk__arena_new();
	size_t j, jj, k, i;
	int rc = tmp ? 0 : JITK_ENOMEM;

	for (k = 0; k < s->ninsts && !rc; k++) {
		spec_instance *in = &set->insts[s->first + k];

		in->fallback = jitk__arena_array(set->arena, s->nfallback, sizeof(*in->fallback));
		if (!in->fallback)
			rc = JITK_ENOMEM;
	}
	for (j = 0; j < s->nfallback && !rc; j++) {
		const spec_loc *l = &s->fallback[j].loc;
		const char *name = s->fallback[j].symbol;
		int t0 = jitk__spec_symbol_index(set, name);
		const spec_symbol *t;
		long **conv;
		int *src;

		if (t0 < 0) {
			rc = link_error(tx, set, l,
					"fallback '%s' is not a symbol (at symbols.%s.fallback)",
					quoted(name), quoted(s->name));
			break;
		}
		t = set->syms[t0];
		if (t == s) {
			rc = link_error(tx, set, l, "symbol '%s' cannot fall back to itself",
					quoted(s->name));
			break;
		}
		conv = jitk__arena_array(tmp, t->fam->nparams, sizeof(*conv));
		src = jitk__arena_array(tmp, t->fam->nparams, sizeof(*src));
		if (!conv || !src) {
			rc = JITK_ENOMEM;
			break;
		}
		for (jj = 0; jj < t->fam->nparams && !rc; jj++) {
			int p = jitk__spec_param_index(f, t->fam->params[jj].name);

			src[jj] = p;
			if (t->nvals[jj] < 2 || p < 0)
				continue; /* one value, or any: the first */
			conv[jj] = jitk__arena_array(tmp, s->nvals[p], sizeof(**conv));
			if (!conv[jj]) {
				rc = JITK_ENOMEM;
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
						quoted(name), quoted(in->name));
			in->fallback[j] = t->first + target;
			in->nfallback++;
		}
	}
	jitk__arena_free(tmp);
	return rc;
}

static int link_error(const texts_t *tx, const spec_set *set, const spec_loc *l,
		      const char *fmt, ...)
{
	ytree t = { NULL, NULL, 0 };
	sctx c = { .file = l->file };
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
	rc = msg.oom ? JITK_ENOMEM : err_at(&c, l->line, l->col, NULL, "%s", msg.data ? msg.data : "");
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
	jitk_arena *tmp;
	int rc = 0;

	if (!f->ntuning_keys)
		return 0;
	if (!(tmp = jitk__arena_new()))
		return JITK_ENOMEM;
	ev = jitk__arena_array(tmp, 2 * (f->ngates + s->ngates + f->ntuning) + 2, sizeof(*ev));
	kv0 = jitk__arena_array(tmp, f->ntuning + 1, sizeof(*kv0));
	for (i = 0; kv0 && i < f->ntuning; i++) {
		kv0[i] = nkv;
		nkv += f->tuning[i].n;
	}
	keyof = jitk__arena_array(tmp, nkv + 1, sizeof(*keyof));
	applies = jitk__arena_array(tmp, f->ngates + s->ngates + f->ntuning + 1, 1);
	count = jitk__arena_array(tmp, f->ntuning_keys, sizeof(*count));
	if (!ev || !kv0 || !keyof || !applies || !count) {
		jitk__arena_free(tmp);
		return JITK_ENOMEM;
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
						quoted(f->tuning_keys[j]), range, quoted(in->name));
			}
		}
	}
	jitk__arena_free(tmp);
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
						  quoted(fb->symbol), quoted(am->callee), quoted(s->name));
			if (cr < 0)
				return link_error(tx, set, &am->loc,
						  "'%s' has no argument '%s' to pass to %s (at symbols.%s.fallback)",
						  quoted(s->name), quoted(am->caller), quoted(fb->symbol), quoted(s->name));
			if (am->flat && s->fam->args[cr].type != AT_TENSOR)
				return link_error(tx, set, &am->loc,
						  "flat(%s): '%s' is not a tensor (at symbols.%s.fallback)",
						  quoted(am->caller), quoted(am->caller), quoted(s->name));
			if (s->fam->args[cr].io == IO_SCRATCH || callee->args[ce].io == IO_SCRATCH)
				return link_error(tx, set, &am->loc,
						  "'%s' or '%s' is scratch, which jitk gives each kernel: "
						  "it is not passed on (at symbols.%s.fallback)",
						  quoted(am->caller), quoted(am->callee), quoted(s->name));
			if ((s->fam->args[cr].type == AT_TENSOR) != (callee->args[ce].type == AT_TENSOR))
				return link_error(tx, set, &am->loc,
						  "'%s' and '%s' are not both tensors or both scalars (at symbols.%s.fallback)",
						  quoted(am->caller), quoted(am->callee), quoted(s->name));
		}
	}
	return 0;
}

/* ------------------------------------- scalars that may be absent */

static int name_is(void *ctx, const char *name, int pos)
{
	(void)pos;
	return !strcmp(name, ctx);
}

static int expr_uses(const spec_expr *x, const char *name)
{
	return x->e && jitk__expr_visit_names(x->e, name_is, (void *)name);
}

/* The first shape or stride of tensor t that names scalar name, or NULL. */
static const spec_expr *tensor_use(const spec_arg *t, const char *name)
{
	size_t d;

	for (d = 0; d < t->ndim; d++) {
		if (expr_uses(&t->shape[d], name))
			return &t->shape[d];
		if (t->strides && expr_uses(&t->strides[d], name))
			return &t->strides[d];
	}
	return NULL;
}

/* Issue 22 #10: an integer scalar with a `when` is absent from the
 * instances where it does not hold, and the kernel gets 0 there. A shape
 * or stride of a tensor those instances take, or the grid, must not use
 * it: the call would bind it from the tensor's shape (or evaluate the
 * grid with it) and pass the kernel 0, computing nothing and reporting
 * success. Launch checks may use it (they see 0, what the kernel gets:
 * "!batched || L > 0"). */
static int check_absent_scalars(const spec_set *set, const spec_symbol *s, const texts_t *tx)
{
	const spec_family *f = s->fam;
	uint32_t users[JITK_MAX_SPEC_ARGS]; /* per conditional scalar: tensors that use it */
	unsigned char grid[JITK_MAX_SPEC_ARGS], any = 0;
	size_t i, j, k;

	for (i = 0; i < f->nargs && i < JITK_MAX_SPEC_ARGS; i++) {
		const spec_arg *a = &f->args[i];

		users[i] = 0;
		grid[i] = 0;
		if (a->type == AT_TENSOR || a->type == AT_F32 || !a->when.n)
			continue;
		for (k = 0; k < f->nargs && k < JITK_MAX_SPEC_ARGS; k++)
			if (f->args[k].type == AT_TENSOR && tensor_use(&f->args[k], a->name))
				users[i] |= (uint32_t)1 << k;
		grid[i] = (unsigned char)expr_uses(&f->grid, a->name);
		any |= grid[i] || users[i];
	}
	for (j = 0; any && j < s->ninsts; j++) {
		const spec_instance *in = &set->insts[s->first + j];

		for (i = 0; i < f->nargs && i < JITK_MAX_SPEC_ARGS; i++) {
			const spec_expr *use = grid[i] ? &f->grid : NULL;
			const spec_arg *t = NULL;

			if (!(grid[i] || users[i]) || jitk__spec_cond_holds(&f->args[i].when, in->vals))
				continue;
			for (k = 0; k < f->nargs && k < JITK_MAX_SPEC_ARGS && !t; k++)
				if (users[i] >> k & 1 && jitk__spec_cond_holds(&f->args[k].when, in->vals))
					use = tensor_use(t = &f->args[k], f->args[i].name);
			if (!use)
				continue;
			return link_error(tx, set, &use->loc,
					  "'%s' is used by %s%s, but %s does not take it (its 'when' leaves "
					  "it out): the kernel would get 0 (a scalar that a shape, a stride "
					  "or the grid uses must be present wherever they are)",
					  f->args[i].name,
					  !t ? "the grid" : use >= t->shape && use < t->shape + t->ndim
							    ? "the shape of " : "the strides of ",
					  t ? t->name : "", in->name);
		}
	}
	return 0;
}

static int link_instances(spec_set *set, const texts_t *tx)
{
	size_t i;
	int rc = 0;

	set->insts = jitk__arena_array(set->arena, set->nplanned, sizeof(*set->insts));
	if (!set->insts)
		return JITK_ENOMEM;
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
	for (i = 0; i < set->nsyms && !rc; i++)
		rc = check_absent_scalars(set, set->syms[i], tx);
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
	char bare[256]; /* no allocation: the answer never depends on memory */
	int bestd = 3 + (int)(len / 5);
	size_t i;

	if (len >= sizeof(bare))
		return NULL;
	memcpy(bare, name, len);
	bare[len] = '\0';
	for (i = 0; i < s->nsyms; i++) {
		int d = jitk__edit_distance(bare, s->syms[i]->name);

		if (d < bestd) {
			bestd = d;
			best = s->syms[i]->name;
		}
	}
	return best;
}

/* An error in selector sel at byte at: the message names the column (in
 * characters), the detail quotes the selector with a caret under it. */
static int sel_error(int status, const char *sel, const char *at, const char *fmt, ...)
	JITK_PRINTF(4, 5);

static int sel_error(int status, const char *sel, const char *at, const char *fmt, ...)
{
	ytree t = { NULL, (char *)sel, strlen(sel) };
	int col = (int)chars_before_pos(sel, (size_t)(at - sel)) + 1;
	jbuf msg, detail;
	va_list ap;
	int rc;

	jitk__jbuf_init(&msg);
	jitk__jbuf_init(&detail);
	va_start(ap, fmt);
	jitk__jbuf_vprintf(&msg, fmt, ap);
	va_end(ap);
	excerpt(&detail, &t, 1, col);
	if (msg.oom || detail.oom)
		rc = jitk__error(JITK_ENOMEM, "out of memory");
	else
		rc = jitk__spec_error(status, detail.data, "'%s': column %d: %s", quoted(sel), col,
				      msg.data);
	jitk__jbuf_free(&msg);
	jitk__jbuf_free(&detail);
	return rc;
}

#define SEL_FORM "(a selector is symbol[param=value,...])"

/* The selector's list "[param=value,...]" at br, strictly: every item is
 * name=value, the list ends with the one ']' and nothing follows it. The
 * values wanted go to want and given. */
static int parse_selector_list(const spec_symbol *sym, const char *sel, const char *br,
			       int64_t *want, unsigned char *given)
{
	const spec_family *f = sym->fam;
	const char *p = br + 1;
	char buf[32];
	size_t i;

	for (;;) {
		const char *name = p, *val, *end;
		int k = -1;

		while (*p && *p != '=' && *p != ',' && *p != ']' && *p != '[')
			p++;
		if (p == name)
			return sel_error(JITK_EINVAL, sel, p, "expected param=value after '%c' %s",
					 name[-1], SEL_FORM);
		if (*p != '=')
			return sel_error(JITK_EINVAL, sel, p, "expected '=' after the parameter name %s",
					 SEL_FORM);
		for (i = 0; i < f->nparams; i++)
			if (strlen(f->params[i].name) == (size_t)(p - name) &&
			    !strncmp(f->params[i].name, name, (size_t)(p - name)))
				k = (int)i;
		if (k < 0)
			return sel_error(JITK_EINVAL, sel, name, "%s has no parameter '%s'", sym->name,
					 quoted(bare_name(name, (size_t)(p - name))));
		if (given[k])
			return sel_error(JITK_EINVAL, sel, name, "parameter '%s' given twice",
					 f->params[k].name);
		val = end = p + 1;
		while (*end && *end != '=' && *end != ',' && *end != ']' && *end != '[')
			end++;
		if (end == val)
			return sel_error(JITK_EINVAL, sel, end, "expected a value after '=' %s", SEL_FORM);
		if (*end != ',' && *end != ']')
			return sel_error(JITK_EINVAL, sel, end, "expected ',' or ']' after the value %s",
					 SEL_FORM);
		/* The value as text must be one the parameter can take. */
		for (i = 0; i < sym->nvals[k]; i++) {
			const char *t = jitk__spec_value_text(&f->params[k], sym->vals[k][i], buf);

			if (strlen(t) == (size_t)(end - val) && !strncmp(t, val, (size_t)(end - val)))
				break;
		}
		if (i == sym->nvals[k])
			return sel_error(JITK_ENOENT, sel, val, "%s has no instance with %s=%s (see jitk list)",
					 sym->name, f->params[k].name,
					 quoted(bare_name(val, (size_t)(end - val))));
		given[k] = 1;
		want[k] = sym->vals[k][i];
		p = end + 1;
		if (*end == ']')
			break;
	}
	if (*p)
		return sel_error(JITK_EINVAL, sel, p, "unexpected text after the selector's ']' %s",
				 SEL_FORM);
	return JITK_OK;
}

int jitk__spec_select(spec_selection *out, const spec_set *s, const char *sel)
{
	const char *br = strchr(sel, '[');
	size_t nlen = br ? (size_t)(br - sel) : strlen(sel), i;
	const spec_symbol *sym = NULL;
	const spec_family *f;
	int64_t want[64];
	unsigned char given[64];
	int rc;

	memset(out, 0, sizeof(*out));
	for (i = 0; i < s->nsyms; i++)
		if (strlen(s->syms[i]->name) == nlen && !strncmp(s->syms[i]->name, sel, nlen)) {
			sym = s->syms[i];
			break;
		}
	if (!sym) {
		/* A name with a selector's punctuation in it ("x]]]",
		 * "x,y") is malformed, not a near miss. */
		size_t bad = strcspn(sel, "]=,");
		const char *near;

		if (bad < nlen)
			return sel_error(JITK_EINVAL, sel, sel + bad,
					 "unexpected '%c' in the symbol name %s", sel[bad], SEL_FORM);
		near = nearest_symbol(s, sel, nlen);
		if (near)
			return jitk__spec_error(JITK_ENOENT, NULL,
						"no symbol named '%s' (did you mean '%s'? see jitk list)",
						quoted(bare_name(sel, nlen)), near);
		return jitk__spec_error(JITK_ENOENT, NULL, "no symbol named '%s' (see jitk list)",
					quoted(bare_name(sel, nlen)));
	}
	f = sym->fam;
	if (f->nparams > JITK_ARRAY_SIZE(want))
		return jitk__error(JITK_EINVAL, "%s: too many parameters to select by", sym->name);
	memset(given, 0, sizeof(given));
	if (br && (rc = parse_selector_list(sym, sel, br, want, given)))
		return rc;
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
		return jitk__spec_error(JITK_ENOENT, NULL, "'%s' selects no instance (see jitk list)",
					quoted(sel));
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

/* A new set for nfiles files, with the load's scratch memory. */
static int load_begin(spec_set **set, texts_t *tx, size_t nfiles)
{
	jitk_arena *a = jitk__arena_new();

	memset(tx, 0, sizeof(*tx));
	if (!(*set = a ? jitk__arena_alloc(a, sizeof(**set)) : NULL)) {
		jitk__arena_free(a);
		return JITK_ENOMEM;
	}
	(*set)->arena = a;
	(*set)->files = jitk__arena_array(a, nfiles, sizeof(*(*set)->files));
	(*set)->fams = jitk__arena_array(a, nfiles, sizeof(*(*set)->fams));
	if (!(tx->tmp = jitk__arena_new()))
		return JITK_ENOMEM;
	tx->texts = jitk__arena_array(tx->tmp, nfiles, sizeof(*tx->texts));
	tx->lens = jitk__arena_array(tx->tmp, nfiles, sizeof(*tx->lens));
	return (*set)->files && (*set)->fams && tx->texts && tx->lens ? 0 : JITK_ENOMEM;
}

/* Parse text (len bytes and a NUL, kept until loading ends) as the spec
 * file path. */
static int load_text(spec_set *set, const char *path, char *text, size_t len,
		     texts_t *tx)
{
	sctx c = { .set = set, .a = set->arena };
	ytree t = { NULL, text, len };
	char msg[256];
	int rc, line = 1, col = 1;

	if (!(set->files[set->nfiles] = jitk__arena_strdup(set->arena, path)) ||
	    !(c.tmp = jitk__arena_new()))
		return JITK_ENOMEM;
	c.file = set->files[set->nfiles++];
	tx->texts[tx->n] = text;
	tx->lens[tx->n++] = len;
	c.t = &t;
	rc = jitk__ytree_parse(&t, text, len, msg, sizeof(msg), &line, &col);
	if (rc == -2) {
		rc = JITK_ENOMEM;
	} else if (rc) {
		t.text = text;
		t.text_len = len;
		rc = err_at(&c, line, col, NULL, "%s", msg);
	} else if (is_registry(t.root)) {
		rc = parse_registry(&c, t.root);
	} else {
		rc = parse_family(&c, t.root);
	}
	jitk__ytree_free(&t);
	jitk__arena_free(c.tmp);
	return rc;
}

static int load_file(spec_set *set, const char *path, texts_t *tx)
{
	char *text = NULL;
	const char *why;
	size_t len;
	int rc;

	rc = jitk__read_file(&text, &len, path, YT_MAX_FILE_BYTES);
	if (rc == JITK_EINVAL)
		return jitk__spec_error(JITK_ESPEC, NULL,
					"%s:1:1: error: file is larger than the %u-byte limit",
					path, YT_MAX_FILE_BYTES);
	if (rc == JITK_ENOMEM)
		return rc;
	if (rc)
		return (why = jitk__arena_strdup(tx->tmp, read_reason(path)))
			       ? jitk__spec_error(JITK_ESPEC, NULL,
						  "%s:1:1: error: cannot read the spec file: %s",
						  path, why)
			       : JITK_ENOMEM;
	if (jitk__arena_defer(tx->tmp, free, text))
		return JITK_ENOMEM;
	return load_text(set, path, text, len, tx);
}

/* The one place where running out of memory is reported: every
 * allocation that fails returns JITK_ENOMEM up to here. */
static int reported(int rc)
{
	return rc == JITK_ENOMEM ? jitk__error(JITK_ENOMEM, "out of memory") : rc;
}

/* Each benchmark case's symbol selects instances of its own family. */
static int link_bench(spec_set *set, const texts_t *tx)
{
	size_t i, j;

	for (i = 0; i < set->nfams; i++) {
		const spec_family *f = set->fams[i];

		for (j = 0; j < f->nbench; j++) {
			const spec_bench *b = &f->bench[j];
			spec_selection sel;
			int rc = jitk__spec_select(&sel, set, b->symbol);

			/* (a message that could not be made is out of memory too) */
			if (rc == JITK_ENOMEM || (rc && jitk_error_last()->status == JITK_ENOMEM))
				return JITK_ENOMEM;
			if (rc)
				return link_error(tx, set, &b->loc, "bench symbol: %s",
						  jitk_error_last()->message);
			rc = sel.sym->fam != f;
			if (rc)
				rc = link_error(tx, set, &b->loc, "bench symbol '%s' is of family "
						"'%s', not of '%s'", quoted(b->symbol), quoted(sel.sym->fam->name),
						quoted(f->name));
			jitk__spec_selection_free(&sel);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* After the files are parsed (rc so far): link the symbols, drop the
 * scratch memory, hand the set over or free it. */
static int finish_load(spec_set **out, spec_set *set, texts_t *tx, int rc)
{
	if (!rc)
		rc = link_packages(set, tx);
	if (!rc)
		rc = link_instances(set, tx);
	if (!rc)
		rc = link_bench(set, tx);
	if (!rc && jitk__arena_failed(set->arena))
		rc = JITK_ENOMEM;
	jitk__arena_free(tx->tmp);
	if (rc) {
		jitk__spec_set_free(set);
		return reported(rc);
	}
	*out = set;
	return 0;
}

int jitk__spec_set_load_files(spec_set **out, const char *const *files, size_t n)
{
	spec_set *set = NULL;
	texts_t tx;
	size_t i;
	int rc;

	*out = NULL;
	rc = load_begin(&set, &tx, n);
	for (i = 0; i < n && !rc; i++)
		rc = load_file(set, files[i], &tx);
	return finish_load(out, set, &tx, rc);
}

int jitk__spec_set_load_buffer(spec_set **out, const char *name, const char *text,
			 size_t len)
{
	spec_set *set = NULL;
	texts_t tx;
	char *copy;
	int rc;

	*out = NULL;
	rc = load_begin(&set, &tx, 1);
	if (!rc && len > YT_MAX_FILE_BYTES)
		rc = jitk__spec_error(JITK_ESPEC, NULL,
				      "%s:1:1: error: file is larger than the %u-byte limit",
				      name, YT_MAX_FILE_BYTES);
	else if (!rc)
		rc = (copy = jitk__arena_strndup(tx.tmp, text, len))
			     ? load_text(set, name, copy, len, &tx) : JITK_ENOMEM;
	return finish_load(out, set, &tx, rc);
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The *.yaml files of dir, sorted, appended to *names (in a). */
static int list_dir(jitk_arena *a, const char *dir, char ***names, size_t *n)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t first = *n, cap = *n;
	int rc = 0;

	if (!d)
		return jitk__spec_error(JITK_ESPEC, NULL, "%s: cannot open spec directory: %s",
					dir, strerror(errno));
	while (!rc && (e = readdir(d))) {
		size_t len = strlen(e->d_name);

		if (len < 6 || strcmp(e->d_name + len - 5, ".yaml") || e->d_name[0] == '.')
			continue;
		if (*n - first >= SPEC_MAX_FILES)
			rc = jitk__spec_error(JITK_ESPEC, NULL, "%s: more than %d spec files", dir,
					      SPEC_MAX_FILES);
		else if (*n == cap &&
			 !(*names = jitk__arena_grow(a, *names, *n, cap = 2 * cap + 16, sizeof(char *))))
			rc = JITK_ENOMEM;
		else if (!((*names)[(*n)++] = jitk__arena_printf(a, "%s/%s", dir, e->d_name)))
			rc = JITK_ENOMEM;
	}
	closedir(d);
	if (!rc && *n == first)
		rc = jitk__spec_error(JITK_ESPEC, NULL, "%s: no *.yaml spec files", dir);
	if (!rc)
		qsort(*names + first, *n - first, sizeof(char *), name_cmp);
	return rc;
}

int jitk__spec_set_load_dirs(spec_set **out, const char *const *dirs, size_t n)
{
	jitk_arena *a = jitk__arena_new();
	char **all = NULL;
	size_t nall = 0, i;
	int rc = a ? 0 : JITK_ENOMEM;

	*out = NULL;
	for (i = 0; i < n && !rc; i++)
		rc = list_dir(a, dirs[i], &all, &nall);
	if (!rc)
		rc = jitk__spec_set_load_files(out, (const char *const *)all, nall);
	jitk__arena_free(a);
	return reported(rc);
}

void jitk__spec_set_free(spec_set *s)
{
	if (s)
		jitk__arena_free(s->arena);
}
