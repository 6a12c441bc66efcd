/* arena.h - memory that is freed all at once (libgit2's git_pool, with
 * cleanups): an immutable model is allocated from one arena and freed with
 * one call, however it was left by an error. */
#ifndef JITK_ARENA_H
#define JITK_ARENA_H

#include <stddef.h>

#include "base/internal.h"

typedef struct jitk_arena jitk_arena;

/* NULL when out of memory. */
jitk_arena *jitk__arena_new(void);
/* Run the cleanups (the last registered first), then free every chunk.
 * NULL is a no-op. */
void jitk__arena_free(jitk_arena *a);

/* size zeroed bytes, aligned for any type. NULL when out of memory: the
 * arena then remembers that it failed (jitk__arena_failed), so that a
 * caller can report it once. Chunks grow geometrically; a large request
 * gets a chunk of its own. */
void *jitk__arena_alloc(jitk_arena *a, size_t size);
/* n zeroed elements of size bytes (n * size checked for overflow). */
void *jitk__arena_array(jitk_arena *a, size_t n, size_t size);
/* A copy of the n elements at p followed by room for more: new_n zeroed
 * elements in all (new_n >= n). The old array stays allocated. */
void *jitk__arena_grow(jitk_arena *a, const void *p, size_t n, size_t new_n,
		       size_t size);
char *jitk__arena_strdup(jitk_arena *a, const char *s);
char *jitk__arena_strndup(jitk_arena *a, const char *s, size_t n);
char *jitk__arena_printf(jitk_arena *a, const char *fmt, ...) JITK_PRINTF(2, 3);
/* Call fn(p) when the arena is freed (for what another allocator made).
 * When the record cannot be allocated, fn(p) runs at once and -1 is
 * returned (the arena has failed); 0 otherwise. */
int jitk__arena_defer(jitk_arena *a, void (*fn)(void *), void *p);

/* Whether an allocation has failed. */
int jitk__arena_failed(const jitk_arena *a);
/* Bytes of memory the arena holds (chunks and their headers). */
size_t jitk__arena_size(const jitk_arena *a);

#endif
