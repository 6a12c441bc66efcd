/* arena.c - memory that is freed all at once. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"

#define ALIGN _Alignof(max_align_t)
#define FIRST_CHUNK 4096
#define MAX_CHUNK (1u << 20)

struct chunk {
	struct chunk *next;
	size_t size; /* bytes of data */
	max_align_t data[];
};

struct cleanup {
	struct cleanup *next;
	void (*fn)(void *);
	void *p;
};

struct jitk_arena {
	struct chunk *chunks; /* the one allocated from first */
	char *cur, *end;      /* its free bytes */
	struct cleanup *cleanups;
	size_t next_size;     /* of the next shared chunk */
	size_t held;
	int failed;
};

jitk_arena *jitk__arena_new(void)
{
	jitk_arena *a = calloc(1, sizeof(*a));

	if (a)
		a->next_size = FIRST_CHUNK;
	return a;
}

void jitk__arena_free(jitk_arena *a)
{
	struct cleanup *c;
	struct chunk *k, *next;

	if (!a)
		return;
	for (c = a->cleanups; c; c = c->next)
		c->fn(c->p);
	for (k = a->chunks; k; k = next) {
		next = k->next;
		free(k);
	}
	free(a);
}

static struct chunk *chunk_new(jitk_arena *a, size_t size)
{
	struct chunk *k = malloc(sizeof(*k) + size);

	if (!k) {
		a->failed = 1;
		return NULL;
	}
	k->size = size;
	a->held += sizeof(*k) + size;
	return k;
}

void *jitk__arena_alloc(jitk_arena *a, size_t size)
{
	static max_align_t nothing;
	struct chunk *k;
	char *p;

	if (!size)
		return &nothing;
	if (size > SIZE_MAX - ALIGN) {
		a->failed = 1;
		return NULL;
	}
	size = (size + ALIGN - 1) & ~(ALIGN - 1);
	if (size > (size_t)(a->end - a->cur)) {
		if (size > a->next_size / 4) {
			/* A chunk of its own, behind the one being filled. */
			if (!(k = chunk_new(a, size)))
				return NULL;
			if (a->chunks) {
				k->next = a->chunks->next;
				a->chunks->next = k;
			} else {
				k->next = NULL;
				a->chunks = k;
				a->cur = a->end = (char *)k->data + size;
			}
			return memset(k->data, 0, size);
		}
		if (!(k = chunk_new(a, a->next_size)))
			return NULL;
		k->next = a->chunks;
		a->chunks = k;
		a->cur = (char *)k->data;
		a->end = a->cur + k->size;
		if (a->next_size < MAX_CHUNK)
			a->next_size *= 2;
	}
	p = a->cur;
	a->cur += size;
	return memset(p, 0, size);
}

void *jitk__arena_array(jitk_arena *a, size_t n, size_t size)
{
	size_t total;

	if (__builtin_mul_overflow(n, size, &total)) {
		a->failed = 1;
		return NULL;
	}
	return jitk__arena_alloc(a, total);
}

void *jitk__arena_grow(jitk_arena *a, const void *p, size_t n, size_t new_n, size_t size)
{
	void *q = jitk__arena_array(a, new_n, size);

	if (q && n)
		memcpy(q, p, n * size);
	return q;
}

char *jitk__arena_strndup(jitk_arena *a, const char *s, size_t n)
{
	char *d = n < SIZE_MAX ? jitk__arena_alloc(a, n + 1) : NULL;

	if (d)
		memcpy(d, s, n);
	return d;
}

char *jitk__arena_strdup(jitk_arena *a, const char *s)
{
	return jitk__arena_strndup(a, s, strlen(s));
}

char *jitk__arena_printf(jitk_arena *a, const char *fmt, ...)
{
	va_list ap;
	char *d;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0) {
		a->failed = 1;
		return NULL;
	}
	if (!(d = jitk__arena_alloc(a, (size_t)n + 1)))
		return NULL;
	va_start(ap, fmt);
	vsnprintf(d, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return d;
}

int jitk__arena_defer(jitk_arena *a, void (*fn)(void *), void *p)
{
	struct cleanup *c = jitk__arena_alloc(a, sizeof(*c));

	if (!c) {
		fn(p);
		return -1;
	}
	c->fn = fn;
	c->p = p;
	c->next = a->cleanups;
	a->cleanups = c;
	return 0;
}

int jitk__arena_failed(const jitk_arena *a)
{
	return a->failed;
}

size_t jitk__arena_size(const jitk_arena *a)
{
	return a->held;
}
