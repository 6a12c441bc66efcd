/* cache.h - the on-disk cubin cache: content-addressed entries with a
 * verified header, read-only layers, per-key locks. docs/cache-format.md
 * describes the bytes. */
#ifndef JITK_CACHE_H
#define JITK_CACHE_H

#include <stdatomic.h>

#include "store/image.h"

#define JITK_CACHE_FORMAT 4 /* entry bytes; 2: the checksum covers the whole header; 3: it is XXH3-128; 4: a signature and the origin */
/* The format number the key hashes: 3, the entry format of the key scheme
 * that format 4 kept (a signature changes no key: format 3 entries keep
 * their names and are read as unsigned format 4 ones). */
#define JITK_KEY_FORMAT 3
#define JITK_CACHE_SUBDIR "v1" /* the directory layout (unchanged by formats 2 and 3) */
#define JITK_ENTRY_HEADER 128
#define JITK_ENTRY_MAX_IMAGE (256u << 20) /* 256 MiB */
#define JITK_ENTRY_MAX_NAMES (64u << 10)

/* Provenance (format 4; sign.h): a signature is ed25519 by a named key. */
#define JITK_KEY_NAME_MAX 64
#define JITK_SIG_SIZE 64
#define JITK_SIG_SECTION_MAX (8 + JITK_KEY_NAME_MAX + JITK_SIG_SIZE)
/* Where an entry of a cache came from (its header's origin field). */
#define JITK_FROM_HERE 0u     /* compiled into this cache */
#define JITK_FROM_REMOTE 1u   /* fetched from a remote */
#define JITK_FROM_BUNDLE 2u   /* unpacked from a bundle (or read from a bundle layer) */
#define JITK_FROM_VERIFIED 0x100u /* with a trusted key's signature, checked when it came */
/* The largest entry file: header, names, image and signature section. */
#define JITK_ENTRY_MAX_SIZE \
	((uint64_t)JITK_ENTRY_HEADER + JITK_ENTRY_MAX_NAMES + JITK_ENTRY_MAX_IMAGE + JITK_SIG_SECTION_MAX)

typedef struct {
	uint8_t key[JITK_HASH_SIZE];
	char target[JITK_ARCH_STRLEN];
	int is_ptx;
	char **names; /* lowered names */
	size_t nnames;
	void *image;
	size_t size;
	/* provenance (format 4) */
	unsigned format;  /* the format it was read in (3 or 4); 0: made in this process */
	unsigned from;    /* JITK_FROM_* */
	char sig_name[JITK_KEY_NAME_MAX + 1]; /* the signing key's name; "" unsigned */
	uint8_t sig[JITK_SIG_SIZE];
} jitk_cache_entry;

typedef struct jitk_cache jitk_cache;
/* The trusted keys and the policy (sign.h); NULL: nothing is checked. */
typedef struct jitk_trust jitk_trust;

/* Little-endian fields of entries and bundles. */
static inline void jitk__put32(uint8_t *p, uint32_t v)
{
	int i;

	for (i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline void jitk__put64(uint8_t *p, uint64_t v)
{
	int i;

	for (i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint32_t jitk__get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static inline uint64_t jitk__get64(const uint8_t *p)
{
	return (uint64_t)jitk__get32(p) | (uint64_t)jitk__get32(p + 4) << 32;
}

/* One cache directory. jitk__cache_open: the writable cache at dir (NULL
 * or "" = none). A directory that cannot be created or is not trusted
 * (owned by someone else, world-writable without the sticky bit, v1/,
 * v1/tmp or v1/locks a symbolic link) is dropped with one warning: the
 * cache never fails its caller, and a bad $JITK_CACHE_MAX_BYTES is warned
 * about once and means no bound. jitk__cache_open_layer: the read-only
 * cache at top (a layer of $JITK_CACHE_PATH; tier_layers.c): -1 with the
 * reason in why when it does not exist, is not a directory or holds no
 * v1/ (JITK_ENOMEM when out of memory). A layer is only read: its
 * entries may be root's, nothing in it is touched, and it has no root,
 * lock, put or evict. */
int jitk__cache_open(jitk_cache **out, const char *dir, const jitk_logger *log);
int jitk__cache_open_layer(jitk_cache **out, const char *top, const jitk_logger *log, char *why,
			   size_t n);
void jitk__cache_close(jitk_cache *c);
/* The writable cache directory as given (holding v1/), NULL when there
 * is none. */
const char *jitk__cache_top(const jitk_cache *c);
/* The writable root, NULL when there is none (and for a layer). */
const char *jitk__cache_root(const jitk_cache *c);

/* Look key up in this cache: JITK_OK on a verified hit (a hit in the
 * writable cache stamps the entry's mtime, the recency of pruning);
 * JITK_ENOENT on a miss. An entry that fails verification counts as a
 * reject, is logged (removed from the writable cache) and is a miss, with
 * *rejected set (NULL allowed). */
int jitk__cache_get(jitk_cache *c, const uint8_t key[JITK_HASH_SIZE], const char *target,
		    jitk_cache_entry *out, int *rejected);
/* Publish atomically (temporary file, fsync, rename, fsync of the
 * directory). Failure is logged and returned, never fatal. */
int jitk__cache_put(jitk_cache *c, const jitk_cache_entry *e);
/* Take the per-key lock (flock; dies with its holder, who writes its pid
 * into the lock file). A wait longer than a second is logged once, naming
 * the holder's pid. *fd is -1 when there is no writable cache or the lock
 * could not be had in time. */
void jitk__cache_lock(jitk_cache *c, const uint8_t key[JITK_HASH_SIZE], int *fd);
void jitk__cache_unlock(int fd);
/* Remove key's entry from the writable cache (after the driver rejected
 * the image). */
void jitk__cache_evict(jitk_cache *c, const uint8_t key[JITK_HASH_SIZE]);
void jitk__cache_entry_free(jitk_cache_entry *e);

typedef struct {
	atomic_ullong hits, misses, rejects, writes, write_failures;
} jitk_cache_counters;
const jitk_cache_counters *jitk__cache_counters(const jitk_cache *c);

/* Entry bytes <-> entry. decode verifies everything and sets *problem
 * (static text) on failure. */
int jitk__entry_encode(uint8_t **out, size_t *len, const jitk_cache_entry *e);
int jitk__entry_decode(jitk_cache_entry *out, const uint8_t *buf, size_t len,
		       const char **problem);
/* SHA-256 of a header of head_len bytes (at most 256) with its checksum
 * field at sum_at read as zeros, then rest: the checksum of entries and
 * bundles. 0, or -1 when hashing failed. */
int jitk__checksum_hole(uint8_t out[JITK_HASH_SIZE], const uint8_t *head, size_t head_len,
			size_t sum_at, const uint8_t *rest, size_t rest_len);
/* Why a decoded entry is not the one asked for ("key mismatch", "target
 * mismatch"), or NULL: every tier checks this after decoding. */
const char *jitk__entry_mismatch(const jitk_cache_entry *e, const uint8_t key[JITK_HASH_SIZE],
				 const char *target);
/* Why a decoded entry cannot be used as a kernel's image, or NULL: it must
 * hold one kernel name (two: a kernel and its parameter builder, for a
 * family with launch.builder) and code for its own target
 * (jitk__image_problem). Lookups, bundles and the remote apply it. */
const char *jitk__entry_kind_problem(const jitk_cache_entry *e);
/* Read and verify one entry file; the same checks as a lookup (regular
 * file, owner, mode, single link, sizes, checksum). */
int jitk__entry_read(jitk_cache_entry *out, const char *path, int allow_root,
		     const char **problem);
/* jitk's own small files beside the entries: v1/packages/<hex>.pkg (hex:
 * 64 hex digits), the manifests of header packages. read: JITK_ENOENT
 * when there is no writable cache or no such file, or it fails the trust
 * checks of entries (link, owner, mode, links) or is over max bytes; *out
 * (NUL-terminated) is the caller's. write: a temporary file, then a
 * rename; 0 or -1 (nothing to report: a manifest is only a cache). */
int jitk__cache_aux_read(jitk_cache *c, const char *hex, uint8_t **out, size_t *len,
			 size_t max);
int jitk__cache_aux_write(jitk_cache *c, const char *hex, const void *data, size_t len);
/* A new directory (0700) for one compiler's precompiled headers,
 * v1/pch/<pid>.<n> (NVRTC's automatic PCH writes there, never in /tmp):
 * 0 and *out (the caller's), or -1 without a writable cache. Removed
 * with what it holds by jitk__cache_pch_remove; a process killed first
 * leaves it to the next jitk__cache_open of the cache, which removes the
 * directories of processes that are gone. */
int jitk__cache_pch_dir(jitk_cache *c, char **out);
void jitk__cache_pch_remove(jitk_cache *c, const char *path);
/* Remove the PCH directories of processes that are gone (what opening a
 * cache does): a compiler's owner calls it when it ends, for the worker
 * processes it forked, which _exit without cleaning up. */
void jitk__cache_pch_sweep(jitk_cache *c);
/* The largest size $JITK_CACHE_MAX_BYTES allowed (0: no bound). */
uint64_t jitk__cache_max_bytes(const jitk_cache *c);

/* Administration (jitk cache ...) of the cache at root (the directory
 * holding v1/). Each refuses, with one message, a root that does not exist
 * (JITK_ENOENT, "no cache at ROOT") or whose directories fail the trust
 * checks of lookups (JITK_EIO): scan accepts root-owned directories as
 * read-only layers do; clear and prune want this user's. The walk never
 * follows a symbolic link and only touches names of jitk's schemes in the
 * directories jitk creates:
 *   v1/<2 hex>/<64 hex>.jitk  (the 2 hex digits are the name's first two)
 *   v1/tmp/<64 hex>.<pid>.<n>, v1/locks/<64 hex>.lock and
 *   v1/packages/<64 hex>.pkg (kept by prune, removed by clear) and
 *   v1/pch/<pid>.<n>/ (a compiler's precompiled headers: left alone).
 * Anything else is foreign: counted, never removed. A non-regular file
 * (symbolic link, FIFO, device), or a directory that is empty or holds
 * only jitk-named files, at one of those names is a bad entry. */
/* (jitk_cache_summary, jitk_clear_result and jitk_prune_result are in
 * jitk.h: jitk_cache_stats, jitk_cache_clear, jitk_cache_prune.) */
/* report gets each bad entry (foreign == 0) and, when verifying, each
 * foreign file (foreign == 1). verify: read and check every entry as a
 * lookup does. */
int jitk__cache_scan(jitk_cache_summary *out, const char *root, int verify,
		     void (*report)(void *ctx, const char *path,
				    const char *problem, int foreign),
		     void *ctx);

/* Call fn for every entry of the cache at root that verifies as a lookup
 * would (regular file, owner or root, mode, one link, checksum, its key
 * its name), with its path and the decoded entry (freed after fn); report
 * gets each bad one. Refuses root as jitk__cache_scan does. fn returning
 * nonzero stops the walk with JITK_EIO (errno ENOMEM: JITK_ENOMEM). */
int jitk__cache_each(const char *root,
		     int (*fn)(void *ctx, const char *path, const jitk_cache_entry *e),
		     void (*report)(void *ctx, const char *path, const char *problem), void *ctx);

/* Remove every entry, temporary file and bad entry; lock files stay (a
 * process may hold one). failed: what could not be removed. */
int jitk__cache_clear(jitk_clear_result *out, const char *root);

/* Remove bad entries (with JITK_PRUNE_VERIFY also those whose contents
 * fail verification: exactly what scan with verify reports), temporary
 * files older than temp_age_s seconds and, when max_bytes > 0, the least
 * recently used entries until the rest fit. Recency is the entry's mtime,
 * which jitk sets on every hit (never atime). An entry being read stays
 * readable: unlinking does not disturb an open file. */
#define JITK_PRUNE_VERIFY 1u
int jitk__cache_prune(jitk_prune_result *out, const char *root,
		      uint64_t max_bytes, unsigned temp_age_s, unsigned flags);

#ifdef JITK_TEST_HOOKS
/* Test hooks, compiled only into the test build (tests/tests.ninja builds
 * cache.c again with -DJITK_TEST_HOOKS; the shipped libraries have none):
 * a delay between the two halves of an entry's write, to widen the window
 * that crash tests aim at; a step of jitk__cache_put to fail with errno
 * ("create", "write", "fsync", "rename"), to simulate a full disk or an
 * I/O error; and the uid the trust checks compare owners with (-1: the
 * effective uid), for tests that pretend to be someone else. */
extern unsigned jitk__test_write_delay_us;
extern const char *jitk__test_fail_step;
extern int jitk__test_fail_errno;
extern long jitk__test_assume_uid;
#endif

/* Temporary files older than this are orphans of killed writers; opening
 * a writable cache removes them. */
#define JITK_TEMP_MAX_AGE_S 3600

/* The user id the trust checks compare owners with: geteuid() (in the
 * test build, jitk__test_assume_uid when it is set). */
unsigned jitk__trusted_uid(void);

/* JITK_OK when a compiler's cache could be written at dir: its
 * directories are this user's (made when missing) and writable; else
 * JITK_EIO with the reason ("DIR/v1 is world-writable without the sticky
 * bit"), as a compiler would warn before compiling in memory. */
int jitk__cache_writable(const char *dir);

/* Outputs jitk writes at a path the user names (a bundle, a manifest, a
 * source dump) are regular files of this user: a symbolic link, a FIFO, a
 * device, a directory or another user's file there is refused (JITK_EIO,
 * "WHAT PATH is a FIFO, not a regular file: not writing it"; what: "the
 * bundle"), never opened for writing or replaced. jitk__output_check: 0
 * when path is missing or such a file (for an output that a rename will
 * replace). jitk__output_open: opens it for writing (created 0644 when
 * missing; flags: O_APPEND and/or O_TRUNC, applied after the checks), *out
 * the descriptor; JITK_EIO "cannot open WHAT PATH: REASON". */
int jitk__output_check(const char *what, const char *path);
int jitk__output_open(int *out, const char *what, const char *path, int flags);
/* A temporary file next to path, for a file that a rename will publish:
 * PATH.tmp.XXXXXX created with O_EXCL under a random name (0600), *out
 * its name (the caller frees it), *fd its descriptor. JITK_EIO naming it.
 * jitk__temp_remove unlinks name only while it is still the file of fd:
 * never a file this process did not create. */
int jitk__temp_create(char **out, int *fd, const char *path);
void jitk__temp_remove(const char *name, int fd);

#endif
