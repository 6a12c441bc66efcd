/* bundle.h - a cache in one file: verified entries and a sorted index.
 * docs/cache-format.md, "Bundles", describes the bytes; jitk.h has the
 * public pack, unpack and verify. */
#ifndef JITK_BUNDLE_H
#define JITK_BUNDLE_H

#include "store/cache.h"

#define JITK_BUNDLE_FORMAT 1
#define JITK_BUNDLE_HEADER 128
#define JITK_BUNDLE_RECORD 64
#define JITK_BUNDLE_ALIGN 64
#define JITK_BUNDLE_MAX_ENTRIES (1u << 20)

typedef struct jitk_bundle jitk_bundle;

/* Open the bundle at path: its header and index are read and checked
 * (checksum, key order, layout). With trusted, also what a read-only
 * layer must be: a regular file owned by this user or root and writable
 * by nobody else. -1 with the reason in why when it cannot be used. */
int jitk__bundle_open(jitk_bundle **out, const char *path, int trusted, char *why, size_t n);
void jitk__bundle_close(jitk_bundle *b);
const char *jitk__bundle_path(const jitk_bundle *b);
/* Whether the file at path starts like a bundle (for messages). */
int jitk__bundle_magic(const char *path);

/* Look key up: 0 with *out decoded and verified (entry header, checksum,
 * key and target those indexed and asked for); JITK_ENOENT when the
 * bundle has no such key; -1 with *problem when its entry is bad. */
int jitk__bundle_get(jitk_bundle *b, const uint8_t key[JITK_HASH_SIZE], const char *target,
		     jitk_cache_entry *out, const char **problem);

/* The number of entries, and entry i read and verified as a lookup
 * verifies it (0; -1 with *problem). */
uint32_t jitk__bundle_count(const jitk_bundle *b);
int jitk__bundle_entry(jitk_bundle *b, uint32_t i, jitk_cache_entry *out, const char **problem);

#endif
