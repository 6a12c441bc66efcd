/* ytree.c - libyaml's event stream turned into a tree, under limits.
 *
 * libyaml itself bounds nothing: aliases can expand exponentially and deep
 * flow nesting makes its scanner slow. Everything is therefore checked here,
 * event by event, so a bad file stops the parse at the first offending
 * event: anchors and aliases, explicit tags, more than one document, deep
 * nesting, too many nodes, keys or bytes, duplicate keys. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "spec/ytree.h"

typedef struct {
	char *msg;
	size_t msg_size;
	int *line, *col;
	size_t nodes;
	ynode *stack[YT_MAX_DEPTH + 1];
	int depth;
	ynode *root;
	int oom;
} builder;

static int fail_at(builder *b, int line, int col, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int fail_at(builder *b, int line, int col, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(b->msg, b->msg_size, fmt, ap);
	va_end(ap);
	*b->line = line;
	*b->col = col;
	return -1;
}

static int no_memory(builder *b, int line, int col)
{
	b->oom = 1;
	return fail_at(b, line, col, "out of memory");
}

static void node_free(ynode *n)
{
	size_t i, count;

	if (!n)
		return;
	/* A parse stopped between a key and its value leaves the key pending. */
	count = n->kind == YN_MAP ? 2 * n->n + (size_t)n->pending : n->n;
	for (i = 0; i < count; i++)
		node_free(n->kids[i]);
	free(n->kids);
	free(n->str);
	free(n);
}

void jitk__ytree_free(ytree *t)
{
	node_free(t->root);
	t->root = NULL;
}

ynode *jitk__ymap_get(const ynode *m, const char *key)
{
	size_t i;

	if (!m || m->kind != YN_MAP)
		return NULL;
	for (i = 0; i < m->n; i++)
		if (!strcmp(ymap_key(m, i)->str, key))
			return ymap_val(m, i);
	return NULL;
}

static int mark_line(const yaml_mark_t *m) { return (int)m->line + 1; }
static int mark_col(const yaml_mark_t *m) { return (int)m->column + 1; }

/* Attach a new node to the open container (or make it the root). */
static int attach(builder *b, ynode *n)
{
	ynode *parent;
	size_t used;

	if (++b->nodes > YT_MAX_NODES)
		return fail_at(b, n->line, n->col,
			       "more than %d YAML nodes", YT_MAX_NODES);
	if (b->depth == 0) {
		b->root = n;
		return 0;
	}
	parent = b->stack[b->depth - 1];
	used = parent->kind == YN_MAP ? 2 * parent->n + (size_t)parent->pending
				      : parent->n;
	if (parent->kind == YN_MAP) {
		int is_key = !parent->pending;

		if (is_key && n->kind != YN_SCALAR)
			return fail_at(b, n->line, n->col,
				       "mapping keys must be scalars");
		if (is_key && parent->n >= YT_MAX_MAP_KEYS)
			return fail_at(b, n->line, n->col,
				       "more than %d keys in one mapping",
				       YT_MAX_MAP_KEYS);
	}
	{
		size_t slots = (used + 1 + 15) & ~(size_t)15;
		ynode **k = realloc(parent->kids, slots * sizeof(*k));

		if (!k)
			return no_memory(b, n->line, n->col);
		parent->kids = k;
		parent->kids[used] = n;
	}
	if (parent->kind == YN_MAP) {
		if (parent->pending)
			parent->n++;
		parent->pending = !parent->pending;
	} else {
		parent->n++;
	}
	return 0;
}

static ynode *node_new(enum ynode_kind kind, const yaml_mark_t *m)
{
	ynode *n = calloc(1, sizeof(*n));

	if (n) {
		n->kind = kind;
		n->line = mark_line(m);
		n->col = mark_col(m);
	}
	return n;
}

static int keycmp(const void *pa, const void *pb)
{
	const ynode *a = *(ynode *const *)pa, *b = *(ynode *const *)pb;
	int c = strcmp(a->str, b->str);

	if (c)
		return c;
	if (a->line != b->line)
		return a->line < b->line ? -1 : 1;
	return a->col < b->col ? -1 : a->col > b->col;
}

/* Report the duplicate whose second occurrence comes first in the file. */
static int check_duplicates(builder *b, ynode *map)
{
	ynode **keys, *first = NULL, *second = NULL;
	size_t i;

	if (map->n < 2)
		return 0;
	keys = malloc(map->n * sizeof(*keys));
	if (!keys)
		return no_memory(b, map->line, map->col);
	for (i = 0; i < map->n; i++)
		keys[i] = ymap_key(map, i);
	qsort(keys, map->n, sizeof(*keys), keycmp);
	for (i = 1; i < map->n; i++) {
		if (strcmp(keys[i - 1]->str, keys[i]->str))
			continue;
		if (i >= 2 && !strcmp(keys[i - 2]->str, keys[i]->str))
			continue; /* only the first two of a group matter */
		if (!second || keys[i]->line < second->line ||
		    (keys[i]->line == second->line && keys[i]->col < second->col)) {
			first = keys[i - 1];
			second = keys[i];
		}
	}
	free(keys);
	if (second)
		return fail_at(b, second->line, second->col,
			       "duplicate key '%s' (first defined at %d:%d)",
			       second->str, first->line, first->col);
	return 0;
}

static void offset_position(const char *text, size_t len, size_t off,
			    int *line, int *col)
{
	size_t i;

	*line = 1;
	*col = 1;
	for (i = 0; i < off && i < len; i++) {
		if (text[i] == '\n') {
			++*line;
			*col = 1;
		} else if (((unsigned char)text[i] & 0xc0) != 0x80) {
			++*col; /* columns count characters, as libyaml's do */
		}
	}
}

/* libyaml refuses an implicit key longer than 1024 characters with a
 * message about a missing ':' or a mapping value "not allowed", at the ':'
 * far to the right. When the problem is a ':' that ends a key starting on
 * the same line (after the indentation and "- ", or after '{', '[' or ','),
 * more than YT_MAX_KEY characters earlier and with no other ": " in
 * between, say so at the key. */
static int long_key(builder *b, const char *text, size_t len, int line, int col)
{
	size_t start = 0, off, key, i;
	int l = 1, c, chars = 0, value = 0;

	while (l < line && start < len) {
		const char *nl = memchr(text + start, '\n', len - start);

		if (!nl)
			return 0;
		start = (size_t)(nl - text) + 1;
		l++;
	}
	for (off = start, c = 1; c < col && off < len && text[off] != '\n'; c++) {
		off++;
		while (off < len && ((unsigned char)text[off] & 0xc0) == 0x80)
			off++;
	}
	if (off >= len || text[off] != ':')
		return 0;
	key = start;
	for (i = start; i < off; i++) {
		char ch = text[i];

		if (ch == '{' || ch == '[' || ch == ',') {
			key = i + 1;
			value = 0;
		} else if ((ch == ' ' || ch == '-') && i == key) {
			key = i + 1;
		} else if (ch == ':' && (text[i + 1] == ' ' || text[i + 1] == '\t')) {
			value = 1; /* a value that contains ": ", not a long key */
		}
	}
	for (i = key; i < off; i++)
		chars += ((unsigned char)text[i] & 0xc0) != 0x80;
	if (value || chars <= YT_MAX_KEY)
		return 0;
	offset_position(text, len, key, &l, &c);
	return fail_at(b, l, c, "key too long (%d characters; the limit is %d)",
		       chars, YT_MAX_KEY);
}

static int parser_failure(builder *b, yaml_parser_t *p, const char *text,
			  size_t len)
{
	int line, col;

	if (p->error == YAML_SCANNER_ERROR || p->error == YAML_PARSER_ERROR) {
		if (long_key(b, text, len, mark_line(&p->problem_mark),
			     mark_col(&p->problem_mark)))
			return -1;
	}

	if (p->error == YAML_READER_ERROR) {
		offset_position(text, len, p->problem_offset, &line, &col);
		return fail_at(b, line, col, "invalid input: %s",
			       p->problem ? p->problem : "unreadable bytes");
	}
	if (p->error == YAML_MEMORY_ERROR)
		return no_memory(b, 1, 1);
	line = mark_line(&p->problem_mark);
	col = mark_col(&p->problem_mark);
	if (p->context)
		return fail_at(b, line, col, "invalid YAML: %s %s", p->problem,
			       p->context);
	return fail_at(b, line, col, "invalid YAML: %s",
		       p->problem ? p->problem : "syntax error");
}

static int open_container(builder *b, const yaml_event_t *ev,
			  enum ynode_kind kind)
{
	ynode *n;

	if (b->depth >= YT_MAX_DEPTH)
		return fail_at(b, mark_line(&ev->start_mark),
			       mark_col(&ev->start_mark),
			       "nesting deeper than %d levels", YT_MAX_DEPTH);
	n = node_new(kind, &ev->start_mark);
	if (!n)
		return no_memory(b, 1, 1);
	if (attach(b, n)) {
		if (b->root != n)
			node_free(n);
		return -1;
	}
	b->stack[b->depth++] = n;
	return 0;
}

static int add_scalar(builder *b, const yaml_event_t *ev)
{
	ynode *n;

	if (ev->data.scalar.length > YT_MAX_SCALAR)
		return fail_at(b, mark_line(&ev->start_mark),
			       mark_col(&ev->start_mark),
			       "scalar of %zu bytes; the limit is %d",
			       (size_t)ev->data.scalar.length, YT_MAX_SCALAR);
	n = node_new(YN_SCALAR, &ev->start_mark);
	if (!n)
		return no_memory(b, 1, 1);
	n->len = ev->data.scalar.length;
	n->str = malloc(n->len + 1);
	if (!n->str) {
		free(n);
		return no_memory(b, 1, 1);
	}
	memcpy(n->str, ev->data.scalar.value, n->len);
	n->str[n->len] = '\0';
	n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
	if (memchr(n->str, '\0', n->len)) {
		int line = n->line, col = n->col;

		node_free(n);
		return fail_at(b, line, col, "NUL byte in a scalar");
	}
	if (attach(b, n)) {
		if (b->root != n)
			node_free(n);
		return -1;
	}
	return 0;
}

/* Anchors, aliases and explicit tags are refused wherever they appear. */
static int check_decorations(builder *b, const yaml_event_t *ev)
{
	const yaml_char_t *anchor = NULL, *tag = NULL;

	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		anchor = ev->data.scalar.anchor;
		tag = ev->data.scalar.tag;
		break;
	case YAML_SEQUENCE_START_EVENT:
		anchor = ev->data.sequence_start.anchor;
		tag = ev->data.sequence_start.tag;
		break;
	case YAML_MAPPING_START_EVENT:
		anchor = ev->data.mapping_start.anchor;
		tag = ev->data.mapping_start.tag;
		break;
	default:
		break;
	}
	if (anchor)
		return fail_at(b, mark_line(&ev->start_mark),
			       mark_col(&ev->start_mark),
			       "anchors and aliases are not allowed (anchor '&%s')",
			       (const char *)anchor);
	if (tag)
		return fail_at(b, mark_line(&ev->start_mark),
			       mark_col(&ev->start_mark),
			       "tags are not allowed (tag '%s')",
			       (const char *)tag);
	return 0;
}

int jitk__ytree_parse(ytree *out, const char *text, size_t len, char *msg,
		size_t msg_size, int *line, int *col)
{
	yaml_parser_t p;
	yaml_event_t ev;
	builder b;
	int docs = 0, done = 0, rc = 0;

	memset(out, 0, sizeof(*out));
	memset(&b, 0, sizeof(b));
	b.msg = msg;
	b.msg_size = msg_size;
	b.line = line;
	b.col = col;
	if (len > YT_MAX_FILE_BYTES)
		return fail_at(&b, 1, 1, "file of %zu bytes; the limit is %u",
			       len, YT_MAX_FILE_BYTES);
	/* UTF-8 only: a UTF-8 byte-order mark is skipped (libyaml keeps it
	 * when the encoding is fixed), UTF-16 is named and refused. */
	if (len >= 2 && ((unsigned char)text[0] == 0xff || (unsigned char)text[0] == 0xfe) &&
	    ((unsigned char)text[1] == 0xfe || (unsigned char)text[1] == 0xff))
		return fail_at(&b, 1, 1, "invalid input: UTF-16 is not supported; save the file as UTF-8");
	if (len >= 3 && !memcmp(text, "\xef\xbb\xbf", 3)) {
		text += 3;
		len -= 3;
	}
	if (!yaml_parser_initialize(&p)) {
		no_memory(&b, 1, 1);
		return -2;
	}
	yaml_parser_set_encoding(&p, YAML_UTF8_ENCODING);
	yaml_parser_set_input_string(&p, (const unsigned char *)text, len);

	while (!done && !rc) {
		if (!yaml_parser_parse(&p, &ev)) {
			rc = parser_failure(&b, &p, text, len);
			break;
		}
		rc = check_decorations(&b, &ev);
		if (rc) {
			yaml_event_delete(&ev);
			break;
		}
		switch (ev.type) {
		case YAML_DOCUMENT_START_EVENT:
			if (++docs > 1)
				rc = fail_at(&b, mark_line(&ev.start_mark),
					     mark_col(&ev.start_mark),
					     "more than one YAML document");
			break;
		case YAML_ALIAS_EVENT:
			rc = fail_at(&b, mark_line(&ev.start_mark),
				     mark_col(&ev.start_mark),
				     "anchors and aliases are not allowed (alias '*%s')",
				     (const char *)ev.data.alias.anchor);
			break;
		case YAML_SCALAR_EVENT:
			rc = add_scalar(&b, &ev);
			break;
		case YAML_SEQUENCE_START_EVENT:
			rc = open_container(&b, &ev, YN_SEQ);
			break;
		case YAML_MAPPING_START_EVENT:
			rc = open_container(&b, &ev, YN_MAP);
			break;
		case YAML_SEQUENCE_END_EVENT:
			b.depth--;
			break;
		case YAML_MAPPING_END_EVENT:
			b.depth--;
			rc = check_duplicates(&b, b.stack[b.depth]);
			break;
		case YAML_STREAM_END_EVENT:
			done = 1;
			break;
		default:
			break;
		}
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&p);
	if (!rc && !b.root)
		rc = fail_at(&b, 1, 1, "empty file");
	if (rc) {
		node_free(b.root);
		return b.oom ? -2 : -1;
	}
	out->root = b.root;
	out->text = text;
	out->text_len = len;
	return 0;
}
