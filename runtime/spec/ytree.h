/* ytree.h - a YAML document as a small tree, built under hard limits. */
#ifndef JITK_YTREE_H
#define JITK_YTREE_H

#include <stddef.h>

/* Limits that make any input fail fast with bounded memory. */
#define YT_MAX_FILE_BYTES (1u << 20) /* 1 MiB */
#define YT_MAX_DEPTH 16
#define YT_MAX_NODES 65536
#define YT_MAX_MAP_KEYS 4096
#define YT_MAX_SCALAR 65536
#define YT_MAX_KEY 1024 /* libyaml's limit for an implicit key */

enum ynode_kind { YN_SCALAR, YN_SEQ, YN_MAP };

typedef struct ynode ynode;
struct ynode {
	enum ynode_kind kind;
	int line, col; /* 1-based */
	int plain;     /* scalar written without quotes */
	char *str;     /* scalar value (NUL-terminated) */
	size_t len;
	/* sequence: items; mapping: key, value, key, value... */
	ynode **kids;
	size_t n;    /* items, or key/value pairs */
	int pending; /* mapping: a key is waiting for its value */
};

typedef struct {
	ynode *root;
	const char *text; /* the input, for quoting offending lines */
	size_t text_len;
} ytree;

/* Parse text (len bytes, UTF-8) into *out. On error returns -1 (-2 when
 * out of memory) and writes a one-line message ("message") and the
 * 1-based position into the out parameters; the tree is then empty. */
int jitk__ytree_parse(ytree *out, const char *text, size_t len, char *msg,
		size_t msg_size, int *line, int *col);
void jitk__ytree_free(ytree *t);

/* Mapping helpers. */
static inline ynode *ymap_key(const ynode *m, size_t i) { return m->kids[2 * i]; }
static inline ynode *ymap_val(const ynode *m, size_t i) { return m->kids[2 * i + 1]; }
ynode *jitk__ymap_get(const ynode *m, const char *key);

#endif
