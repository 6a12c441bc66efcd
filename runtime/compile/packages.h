/* packages.h - header packages: where each root is, the hash of its whole
 * tree (every byte NVRTC could read through it), and what a family's
 * translation unit gets from them. docs/spec-format.md "Header packages". */
#ifndef JITK_PACKAGES_H
#define JITK_PACKAGES_H

#include "base/internal.h"
#include "store/cache.h"
#include "compile/instance.h"
#include "spec/spec.h"

/* Bounds on one package tree: whatever is found there, hashing it takes
 * bounded time and memory. */
#define JITK_PKG_MAX_FILES 100000
#define JITK_PKG_MAX_DEPTH 64
#define JITK_PKG_MAX_FILE_BYTES (64u << 20)
#define JITK_PKG_MAX_TREE_BYTES (4ull << 30)
/* A file whose mtime or ctime is this close to the time its digest was
 * taken may change again without its stat changing (coarse file system
 * clocks): its digest is not remembered (git's "racy clean"). */
#define JITK_PKG_RACY_NS 2000000000ll

typedef struct jitk_packages jitk_packages;

/* One package as a compiler sees it. */
typedef struct {
	const spec_package *spec;
	char *root;     /* the root, resolved (realpath) */
	char *from;     /* how it was found: "$JITK_PACKAGE_CUTLASS", "$CUDA_HOME/include", ... */
	char **dirs;    /* the -I directories that exist, absolute, in search order */
	char **rel;     /* the same, relative to the root ("." the root) */
	size_t ndirs;
	uint8_t hash[JITK_HASH_SIZE]; /* the tree */
	char hex[2 * JITK_HASH_SIZE + 1];
	size_t files, subdirs;
	uint64_t bytes;
	/* the last walk: files whose contents were read (the rest came from
	 * the manifest), and its time */
	size_t hashed;
	int checked; /* 1: the manifest's tree, unchanged by a stat of each entry */
	double ms, cpu_ms; /* wall and this thread's CPU time */
} jitk_package;

/* For the spec set's packages; manifests go to the cache's writable
 * directory (none: every process hashes the trees). */
int jitk__packages_new(jitk_packages **out, const spec_set *set, jitk_cache *cache,
		       const jitk_logger *log);
void jitk__packages_free(jitk_packages *p);

/* Package i of the set, found and hashed on first use (once per compiler,
 * thread-safe; a failure is remembered and returned again). JITK_ENOENT
 * when no place it names holds a directory; JITK_EIO when its tree breaks
 * a trust rule (a symbolic link, FIFO, device or socket in it, a file or
 * directory owned by another user than this one or root, or writable by
 * group or others), names a file with a control character, or is over
 * the bounds above. The message names the package and the path. */
int jitk__package_get(jitk_packages *p, size_t i, const jitk_package **out);

/* Family f's packages (the set's family number fi) into tu: the -I
 * directories (tu->includes: the packages in the order of includes, each
 * one's search directories in order) and the key text (tu->packages: each
 * package's name, tree hash and relative search directories). Resolved,
 * hashed and checked once per compiler: every package include of the
 * template (tpl) must be a header in one of those directories (JITK_ESPEC
 * at the include's file:line:col). Nothing for a family without packages. */
int jitk__packages_tu(jitk_packages *p, size_t fi, const spec_family *f,
		      const jitk_template *tpl, jitk_tu *tu);

/* Before and after a compile: walk family f's trees again (stat every
 * file, read what changed). *changed is 1 when a tree hash moved; the
 * families' state is then made again from the new hashes, so that a new
 * key can be computed. */
int jitk__packages_recheck(jitk_packages *p, const spec_family *f, int *changed);

/* Hash the tree at root (no manifest, no package): for tests and jitk
 * explain. */
int jitk__package_tree_hash(uint8_t out[JITK_HASH_SIZE], const char *root, size_t *files);

#endif
