/* cache.h - the on-disk cubin cache: content-addressed entries with a
 * verified header, read-only layers, per-key locks. docs/cache-format.md
 * describes the bytes. */
#ifndef JITK_CACHE_H
#define JITK_CACHE_H

#include <stdatomic.h>

#include "base/internal.h"

#define JITK_CACHE_FORMAT 1
#define JITK_CACHE_SUBDIR "v1"
#define JITK_ENTRY_HEADER 128
#define JITK_ENTRY_MAX_IMAGE (256u << 20) /* 256 MiB */
#define JITK_ENTRY_MAX_NAMES (64u << 10)

typedef struct {
	uint8_t key[JITK_HASH_SIZE];
	char target[JITK_ARCH_STRLEN];
	int is_ptx;
	char **names; /* lowered names */
	size_t nnames;
	void *image;
	size_t size;
} jitk_cache_entry;

typedef struct jitk_cache jitk_cache;

/* dir: the writable cache (NULL or "" = none); layers: colon-separated
 * read-only caches. A writable directory that cannot be created or is not
 * trusted (owned by someone else, world-writable without the sticky bit)
 * is dropped with one warning: the cache never fails its caller. */
int jitk__cache_open(jitk_cache **out, const char *dir, const char *layers,
		     const jitk_logger *log);
void jitk__cache_close(jitk_cache *c);
/* The writable root, NULL when there is none. */
const char *jitk__cache_root(const jitk_cache *c);

/* Look key up in the layers, then the writable cache. JITK_OK and *origin
 * (1 writable, 2 layer) on a verified hit; JITK_ENOENT on a miss. An entry
 * that fails verification counts as a reject, is logged and is a miss. */
int jitk__cache_get(jitk_cache *c, const uint8_t key[JITK_HASH_SIZE],
		    const char *target, jitk_cache_entry *out, int *origin);
/* Publish atomically (temporary file, fsync, rename, fsync of the
 * directory). Failure is logged and returned, never fatal. */
int jitk__cache_put(jitk_cache *c, const jitk_cache_entry *e);
/* Take the per-key lock (flock; dies with its holder). *fd is -1 when
 * there is no writable cache or the lock could not be had in time. */
void jitk__cache_lock(jitk_cache *c, const uint8_t key[JITK_HASH_SIZE], int *fd);
void jitk__cache_unlock(int fd);
/* Remove key's entry from the writable cache (after the driver rejected
 * the image). */
void jitk__cache_evict(jitk_cache *c, const uint8_t key[JITK_HASH_SIZE]);
void jitk__cache_entry_free(jitk_cache_entry *e);

typedef struct {
	atomic_ullong hits, layer_hits, misses, rejects, writes, write_failures;
} jitk_cache_counters;
const jitk_cache_counters *jitk__cache_counters(const jitk_cache *c);
/* Rejects counted by the calling thread, in every cache: the difference
 * over a call is that call's own (other threads' do not count). */
unsigned long long jitk__cache_thread_rejects(void);

/* Entry bytes <-> entry. decode verifies everything and sets *problem
 * (static text) on failure. */
int jitk__entry_encode(uint8_t **out, size_t *len, const jitk_cache_entry *e);
int jitk__entry_decode(jitk_cache_entry *out, const uint8_t *buf, size_t len,
		       const char **problem);
/* Read and verify one entry file; the same checks as a lookup (regular
 * file, owner, mode, single link, sizes, checksum). */
int jitk__entry_read(jitk_cache_entry *out, const char *path, int allow_root,
		     const char **problem);
/* The same, also giving the device and inode of the file that was read. */
int jitk__entry_read_at(jitk_cache_entry *out, const char *path, int allow_root,
			const char **problem, uint64_t *dev, uint64_t *ino);

/* Administration (jitk cache ...). report gets each bad entry. */
typedef struct {
	uint64_t entries, bytes, bad, temp_files, lock_files;
} jitk_cache_summary;
int jitk__cache_scan(jitk_cache_summary *out, const char *root, int verify,
		     void (*report)(void *ctx, const char *path,
				    const char *problem),
		     void *ctx);
int jitk__cache_clear(uint64_t *removed, const char *root);

/* Remove entries that fail verification, temporary files older than
 * temp_age_s seconds and, when max_bytes > 0, the least recently used
 * entries until the rest fit. Recency is the entry's mtime, which jitk
 * sets on every hit (never atime). An entry being read stays readable:
 * unlinking does not disturb an open file. */
typedef struct {
	uint64_t bad, temp, evicted, evicted_bytes, bytes_left;
} jitk_prune_result;
int jitk__cache_prune(jitk_prune_result *out, const char *root,
		      uint64_t max_bytes, unsigned temp_age_s);

/* Test hooks (never set by the library): a delay between the two halves
 * of an entry's write, to widen the window that crash tests aim at, and a
 * step of jitk__cache_put to fail with errno ("create", "write", "fsync",
 * "rename"), to simulate a full disk or an I/O error. */
extern unsigned jitk__test_write_delay_us;
extern const char *jitk__test_fail_step;
extern int jitk__test_fail_errno;

/* Temporary files older than this are orphans of killed writers; opening
 * a writable cache removes them. */
#define JITK_TEMP_MAX_AGE_S 3600

/* The user id the trust checks compare owners with: geteuid(), or
 * $JITK_TEST_ASSUME_UID for tests that pretend to be someone else. */
unsigned jitk__trusted_uid(void);

#endif
