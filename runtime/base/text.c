/* text.c - growable buffers, strings, "did you mean" distances. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"

/* ------------------------------------------------------------- buffers */

void jitk__jbuf_init(jbuf *b)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
	b->oom = 0;
}

void jitk__jbuf_free(jbuf *b)
{
	free(b->data);
	jitk__jbuf_init(b);
}

static int jbuf_grow(jbuf *b, size_t extra)
{
	size_t need, cap;
	char *p;

	if (b->oom)
		return -1;
	if (extra > SIZE_MAX / 2 - b->len - 1) {
		b->oom = 1;
		return -1;
	}
	need = b->len + extra + 1;
	if (need <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 64;
	while (cap < need)
		cap *= 2;
	p = realloc(b->data, cap);
	if (!p) {
		b->oom = 1;
		return -1;
	}
	b->data = p;
	b->cap = cap;
	return 0;
}

void jitk__jbuf_put(jbuf *b, const void *data, size_t n)
{
	if (jbuf_grow(b, n))
		return;
	if (n)
		memcpy(b->data + b->len, data, n);
	b->len += n;
	b->data[b->len] = '\0';
}

void jitk__jbuf_puts(jbuf *b, const char *s)
{
	jitk__jbuf_put(b, s, strlen(s));
}

void jitk__jbuf_vprintf(jbuf *b, const char *fmt, va_list ap)
{
	va_list aq;
	int n;

	va_copy(aq, ap);
	n = vsnprintf(NULL, 0, fmt, aq);
	va_end(aq);
	if (n < 0 || jbuf_grow(b, (size_t)n))
		return;
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
}

void jitk__jbuf_printf(jbuf *b, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	jitk__jbuf_vprintf(b, fmt, ap);
	va_end(ap);
}

char *jitk__jbuf_detach(jbuf *b)
{
	char *p;

	if (b->oom) {
		jitk__jbuf_free(b);
		return NULL;
	}
	if (!b->data) {
		p = malloc(1);
		if (p)
			*p = '\0';
		return p;
	}
	p = b->data;
	jitk__jbuf_init(b);
	return p;
}

char *jitk__strndup(const char *s, size_t n)
{
	char *p = malloc(n + 1);

	if (!p)
		return NULL;
	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

char *jitk__strdup(const char *s)
{
	return s ? jitk__strndup(s, strlen(s)) : NULL;
}

char *jitk__asprintf(const char *fmt, ...)
{
	jbuf b;
	va_list ap;

	jitk__jbuf_init(&b);
	va_start(ap, fmt);
	jitk__jbuf_vprintf(&b, fmt, ap);
	va_end(ap);
	return jitk__jbuf_detach(&b);
}

/* Levenshtein distance over two rows; words longer than
 * JITK_EDIT_MAX_LEN are never near anything. */
int jitk__edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), i, j;
	int row[2][JITK_EDIT_MAX_LEN + 1];

	if (la > JITK_EDIT_MAX_LEN || lb > JITK_EDIT_MAX_LEN)
		return JITK_EDIT_FAR;
	for (j = 0; j <= lb; j++)
		row[0][j] = (int)j;
	for (i = 1; i <= la; i++) {
		int *prev = row[(i - 1) & 1], *cur = row[i & 1];

		cur[0] = (int)i;
		for (j = 1; j <= lb; j++) {
			int sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
			int del = prev[j] + 1, ins = cur[j - 1] + 1;

			cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
		}
	}
	return row[la & 1][lb];
}
