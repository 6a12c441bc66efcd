/* packages.c - header packages: find each root, hash its whole tree, and
 * give a family's translation unit its -I directories and key text.
 *
 * A package enters the key as its name, the SHA-256 of its tree (every
 * directory and file below the root by relative path, and each file's
 * SHA-256) and its search directories relative to the root: never where
 * it is, so that two installs of the same headers share cache entries.
 * Hashing the whole tree (not only what a kernel includes) puts the
 * answer of every __has_include in the key too.
 *
 * So that a warm process does not read ~2000 headers, the digests of a
 * tree are remembered in a manifest in the writable cache (cache.c's
 * jitk__cache_aux_*), each with the stat it was taken under (size, inode,
 * device, mtime and ctime in ns): a file whose stat is unchanged keeps its
 * digest, anything else is read again. A file modified within
 * JITK_PKG_RACY_NS of the walk is not remembered (a coarse file system
 * clock could give a later edit the same times). Before and after a
 * compile the trees are walked again (build/compiler.c), so a header
 * edited while a process runs never reaches the cache under the old key.
 *
 * The trust rules extend those of templates: a tree holds only regular
 * files and directories (a symbolic link, FIFO, device or socket is
 * refused, nothing is followed or opened that is not a regular file),
 * each owned by this user or root and not writable by group or others. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "compile/packages.h"
#include "compile/packages_config.h" /* written by configure into the build directory */

#define MANIFEST_MAGIC "jitk package manifest 2"
#define MANIFEST_MAX_BYTES (64u << 20)

typedef struct {
	char *rel; /* below the root */
	uint64_t size, ino, dev;
	int64_t mtime, ctime;
	uint8_t digest[JITK_HASH_SIZE];
	/* from a manifest: the digest in hex and the name point into the
	 * manifest's text (pkg.text), the digest decoded when a walk needs it */
	const char *hex;
	int borrowed;
	int clean; /* may be trusted by its stat next time */
} pkg_file;

typedef struct {
	pkg_file *v;
	size_t n, cap;
} file_list;

typedef struct {
	jitk_package pub;
	pthread_mutex_t mu;
	int state; /* 0 not looked at, 1 hashed, 2 failed */
	int status;
	char *msg;
	file_list known; /* the last walk's files, sorted by rel */
	char *text;      /* the manifest known and dirs point into, or NULL */
	double load_ms;  /* reading and parsing it (the log says) */
	file_list dirs;  /* and its directories ("." the root) */
	/* known and dirs are the whole tree, every entry clean, and its
	 * hash is tree: a stat of each entry then checks the tree (fast_check) */
	int complete;
	uint8_t tree[JITK_HASH_SIZE];
	char manifest[2 * JITK_HASH_SIZE + 1]; /* its name in the cache */
} pkg;

typedef struct {
	int state; /* 0, 1 ready, 2 failed */
	int status;
	char *msg;
	char **includes;
	size_t nincludes;
	char *key;
} fam_state;

struct jitk_packages {
	const spec_set *set;
	jitk_cache *cache;
	jitk_logger log;
	pkg *pkgs;
	size_t n;
	pthread_mutex_t fam_mu;
	fam_state *fams;
	size_t nfams;
};

/* ------------------------------------------------------------ helpers */

static void files_free(file_list *l)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		if (!l->v[i].borrowed)
			free(l->v[i].rel);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

static pkg_file *files_add(file_list *l)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 256;
		pkg_file *v = realloc(l->v, cap * sizeof(*v));

		if (!v)
			return NULL;
		l->v = v;
		l->cap = cap;
	}
	memset(&l->v[l->n], 0, sizeof(l->v[l->n]));
	return &l->v[l->n++];
}

static int by_rel(const void *a, const void *b)
{
	return strcmp(((const pkg_file *)a)->rel, ((const pkg_file *)b)->rel);
}

static const pkg_file *files_find(const file_list *l, const char *rel)
{
	pkg_file k;

	if (!l->n)
		return NULL;
	k.rel = (char *)rel;
	return bsearch(&k, l->v, l->n, sizeof(*l->v), by_rel);
}

static int64_t ns_of(const struct timespec *t)
{
	return (int64_t)t->tv_sec * 1000000000ll + t->tv_nsec;
}

static int64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return ns_of(&t);
}

static int is_dir(const char *p)
{
	struct stat st;

	return !stat(p, &st) && S_ISDIR(st.st_mode);
}

/* JITK_PACKAGE_<NAME>: the package's variable (names are lower case). */
static void env_name(char *out, size_t n, const char *pkg_name)
{
	size_t i, k = (size_t)snprintf(out, n, "JITK_PACKAGE_");

	for (i = 0; pkg_name[i] && k + 1 < n; i++)
		out[k++] = (char)toupper((unsigned char)pkg_name[i]);
	out[k < n ? k : n - 1] = '\0';
}

/* What configure found (packages_config.h): "name\0dir\0name\0dir\0\0". */
static const char *configured(const char *name)
{
	static const char table[] = JITK_CONFIGURED_PACKAGES;
	const char *p = table;

	while (*p) {
		const char *dir = p + strlen(p) + 1;

		if (!strcmp(p, name))
			return *dir ? dir : NULL;
		p = dir + strlen(dir) + 1;
	}
	return NULL;
}

/* ------------------------------------------------------------ the walk */

typedef struct {
	jitk_hasher *h;
	const file_list *old;
	file_list *now, *now_dirs;
	const char *pkg_name;
	const char *root;
	char rel[PATH_MAX];
	int64_t start;
	unsigned uid; /* jitk__trusted_uid(), once */
	int depth_of_file; /* directories above the file being read, below the root */
	size_t files, dirs, hashed;
	uint64_t bytes;
	int status;
	jbuf msg;
} walker;

static int walk_fail(walker *w, int status, const char *name, const char *fmt, ...)
	JITK_PRINTF(4, 5);

static int walk_fail(walker *w, int status, const char *name, const char *fmt, ...)
{
	va_list ap;

	if (w->status)
		return -1;
	w->status = status;
	jitk__jbuf_printf(&w->msg, "header package %s: %s%s%s%s: ", w->pkg_name, w->root,
			  w->rel[0] || name ? "/" : "", w->rel, name ? name : "");
	va_start(ap, fmt);
	jitk__jbuf_vprintf(&w->msg, fmt, ap);
	va_end(ap);
	return -1;
}

/* The trust rules every file and directory of a tree passes. */
static int check_node(walker *w, const char *name, const struct stat *st)
{
	unsigned uid = w->uid;

	if (S_ISLNK(st->st_mode))
		return walk_fail(w, JITK_EIO, name, "is a symbolic link (a package tree holds files "
				 "and directories only; jitk follows no link in it)");
	if (!S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode))
		return walk_fail(w, JITK_EIO, name, "is %s, not a file or directory (never opened)",
				 S_ISFIFO(st->st_mode)	 ? "a FIFO"
				 : S_ISSOCK(st->st_mode) ? "a socket"
							 : "a device");
	if (st->st_uid != uid && st->st_uid != 0)
		return walk_fail(w, JITK_EIO, name, "is owned by uid %u, neither this user (uid %u) "
				 "nor root", (unsigned)st->st_uid, uid);
	if (st->st_mode & (S_IWGRP | S_IWOTH))
		return walk_fail(w, JITK_EIO, name, "is writable by %s (another user could change "
				 "what is compiled)", st->st_mode & S_IWOTH ? "others" : "its group");
	return 0;
}

/* Whether an include directive's name could leave the tree: absolute, or
 * with more ".." than the including file is deep (a quoted name, from the
 * file's directory) or than a search directory at the root is (an angle
 * name). A plain scan of lines: an include in a comment counts too, and a
 * computed include (#include MACRO) is not seen. */
static int name_escapes(const char *name, size_t n, int depth)
{
	size_t i = 0;

	if (n && name[0] == '/')
		return 1;
	while (i < n) {
		size_t e = i;

		while (e < n && name[e] != '/')
			e++;
		if (e - i == 2 && name[i] == '.' && name[i + 1] == '.') {
			if (--depth < 0)
				return 1;
		} else if (e - i && !(e - i == 1 && name[i] == '.')) {
			depth++;
		}
		i = e + 1;
	}
	return 0;
}

/* The line (1-based) of the first include in text that escapes, or 0. */
static int escaping_include(const char *text, size_t len, int depth)
{
	static const char *const dirs[] = { "include_next", "include", "import", "embed" };
	const char *p = text, *end = text + len;
	int line = 1;

	for (; p < end; line++) {
		const char *eol = memchr(p, '\n', (size_t)(end - p)), *q = p;
		size_t k;

		if (!eol)
			eol = end;
		while (q < eol && (*q == ' ' || *q == '\t'))
			q++;
		if (q < eol && *q == '#') {
			for (q++; q < eol && (*q == ' ' || *q == '\t'); q++)
				;
			for (k = 0; k < JITK_ARRAY_SIZE(dirs); k++) {
				size_t dn = strlen(dirs[k]);

				if ((size_t)(eol - q) > dn && !strncmp(q, dirs[k], dn) &&
				    (q[dn] == ' ' || q[dn] == '\t' || q[dn] == '"' || q[dn] == '<'))
					break;
			}
			if (k < JITK_ARRAY_SIZE(dirs)) {
				const char *o = q + strlen(dirs[k]), *c;

				while (o < eol && (*o == ' ' || *o == '\t'))
					o++;
				if (o < eol && (*o == '"' || *o == '<')) {
					c = memchr(o + 1, *o == '"' ? '"' : '>', (size_t)(eol - o - 1));
					if (c && name_escapes(o + 1, (size_t)(c - o - 1), *o == '"' ? depth : 0))
						return line;
				}
			}
		}
		p = eol + 1;
	}
	return 0;
}

/* Read a file's bytes into its digest: opened without following or
 * blocking, and it must still be the file that was examined. */
static int hash_file(walker *w, int dfd, const char *name, const struct stat *seen,
		     uint8_t digest[JITK_HASH_SIZE])
{
	char buf[1], *text = NULL;
	jitk_hasher *h = jitk__hasher_new();
	struct stat st, after;
	uint64_t got = 0;
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC), rc = -1, line;

	if (!h) {
		close(fd);
		return walk_fail(w, JITK_ENOMEM, NULL, "out of memory");
	}
	if (fd < 0 || fstat(fd, &st)) {
		walk_fail(w, JITK_EIO, NULL, "cannot be read: %s", strerror(errno));
		goto done;
	}
	if (!S_ISREG(st.st_mode) || st.st_ino != seen->st_ino || st.st_dev != seen->st_dev) {
		walk_fail(w, JITK_EIO, NULL, "was replaced while it was read");
		goto done;
	}
	if (!(text = malloc((size_t)st.st_size + 1))) {
		walk_fail(w, JITK_ENOMEM, NULL, "out of memory");
		goto done;
	}
	for (;;) {
		ssize_t n = got < (uint64_t)st.st_size ? read(fd, text + got, (size_t)st.st_size - got)
						       : read(fd, buf, 1);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			walk_fail(w, JITK_EIO, NULL, "cannot be read: %s", strerror(errno));
			goto done;
		}
		if (!n)
			break;
		if (got >= (uint64_t)st.st_size) {
			got++; /* it grew */
			break;
		}
		got += (uint64_t)n;
	}
	jitk__hasher_update(h, text, (size_t)(got < (uint64_t)st.st_size ? got : (uint64_t)st.st_size));
	if (fstat(fd, &after) || got != (uint64_t)st.st_size || after.st_size != st.st_size ||
	    ns_of(&after.st_mtim) != ns_of(&seen->st_mtim)) {
		walk_fail(w, JITK_EIO, NULL, "changed while it was read");
		goto done;
	}
	if ((line = escaping_include(text, (size_t)got, w->depth_of_file))) {
		walk_fail(w, JITK_EIO, NULL, "line %d includes a file outside the package's root (an "
			  "absolute name, or more \"..\" than the file is deep); jitk would not know "
			  "what NVRTC reads there", line);
		goto done;
	}
	rc = 0;
done:
	free(text);
	if (fd >= 0)
		close(fd);
	if (jitk__hasher_final(h, digest) && !rc)
		rc = walk_fail(w, JITK_ENOMEM, NULL, "SHA-256 failed");
	return rc;
}

static int hex_bytes(uint8_t *out, const char *s, size_t n);

/* A remembered file's digest (decoded from its manifest line if need be). */
static int old_digest(const pkg_file *o, uint8_t out[JITK_HASH_SIZE])
{
	if (!o->hex) {
		memcpy(out, o->digest, JITK_HASH_SIZE);
		return 0;
	}
	return hex_bytes(out, o->hex, JITK_HASH_SIZE);
}

static int walk_file(walker *w, int dfd, const char *name, const struct stat *st)
{
	const pkg_file *o;
	pkg_file *f;

	if ((uint64_t)st->st_size > JITK_PKG_MAX_FILE_BYTES)
		return walk_fail(w, JITK_EIO, NULL, "is larger than %u MiB",
				 JITK_PKG_MAX_FILE_BYTES >> 20);
	if (++w->files > JITK_PKG_MAX_FILES)
		return walk_fail(w, JITK_EIO, NULL, "more than %d files", JITK_PKG_MAX_FILES);
	w->bytes += (uint64_t)st->st_size;
	if (w->bytes > JITK_PKG_MAX_TREE_BYTES)
		return walk_fail(w, JITK_EIO, NULL, "more than %llu GiB of files",
				 JITK_PKG_MAX_TREE_BYTES >> 30);
	if (!(f = w->now ? files_add(w->now) : NULL) && w->now)
		return walk_fail(w, JITK_ENOMEM, NULL, "out of memory");
	{
		pkg_file tmp;

		if (!f) {
			memset(&tmp, 0, sizeof(tmp));
			f = &tmp; /* a plain hash: nothing kept */
		}
		f->size = (uint64_t)st->st_size;
		f->ino = (uint64_t)st->st_ino;
		f->dev = (uint64_t)st->st_dev;
		f->mtime = ns_of(&st->st_mtim);
		f->ctime = ns_of(&st->st_ctim);
		f->clean = f->mtime < w->start - JITK_PKG_RACY_NS &&
			   f->ctime < w->start - JITK_PKG_RACY_NS;
		o = w->old ? files_find(w->old, w->rel) : NULL;
		if (o && o->clean && o->size == f->size && o->ino == f->ino && o->dev == f->dev &&
		    o->mtime == f->mtime && o->ctime == f->ctime && !old_digest(o, f->digest)) {
			/* the digest the manifest or the last walk had */
		} else {
			w->hashed++;
			if (hash_file(w, dfd, name, st, f->digest))
				return -1;
		}
		jitk__hasher_field(w->h, "file", w->rel, strlen(w->rel));
		jitk__hasher_field(w->h, "sha256", f->digest, JITK_HASH_SIZE);
		if (f != &tmp && !(f->rel = jitk__strdup(w->rel)))
			return walk_fail(w, JITK_ENOMEM, NULL, "out of memory");
	}
	return 0;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in the directory dfd, sorted (so that the hash does not
 * depend on the order the file system lists them in): *names points into
 * *block, both the caller's to free. getdents64 itself, with one buffer:
 * a warm walk is mostly this and fstatat. */
struct linux_dirent64 {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

static int list_names(walker *w, int dfd, char ***names, size_t *count, char **block)
{
	size_t cap = 1 << 15, used = 0, n = 0, ncap = 0, off;
	char *buf = malloc(cap), **v = NULL;

	*names = NULL;
	*count = 0;
	*block = NULL;
	if (!buf)
		return walk_fail(w, JITK_ENOMEM, NULL, "out of memory");
	if (lseek(dfd, 0, SEEK_SET) < 0)
		goto fail;
	for (;;) {
		long k;

		if (cap - used < 4096) {
			char *nb = realloc(buf, cap *= 2);

			if (!nb)
				goto oom;
			buf = nb;
		}
		k = syscall(SYS_getdents64, dfd, buf + used, cap - used);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			goto fail;
		if (!k)
			break;
		used += (size_t)k;
	}
	for (off = 0; off < used;) {
		struct linux_dirent64 *e = (struct linux_dirent64 *)(void *)(buf + off);

		off += e->d_reclen;
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (n == ncap) {
			char **nv = realloc(v, (ncap = ncap ? 2 * ncap : 64) * sizeof(*nv));

			if (!nv)
				goto oom;
			v = nv;
		}
		v[n++] = e->d_name;
	}
	if (n)
		qsort(v, n, sizeof(*v), name_cmp);
	*names = v;
	*count = n;
	*block = buf;
	return 0;
fail:
	free(buf);
	free(v);
	return walk_fail(w, JITK_EIO, NULL, "cannot be listed: %s", strerror(errno));
oom:
	free(buf);
	free(v);
	return walk_fail(w, JITK_ENOMEM, NULL, "out of memory");
}

/* A directory's stat, for the manifest (its mtime and ctime move when a
 * name in it is added, removed or renamed). */
static int note_dir(walker *w, const char *rel, const struct stat *st)
{
	pkg_file *d = files_add(w->now_dirs);

	if (!d || !(d->rel = jitk__strdup(rel)))
		return walk_fail(w, JITK_ENOMEM, NULL, "out of memory");
	d->size = 0;
	d->ino = (uint64_t)st->st_ino;
	d->dev = (uint64_t)st->st_dev;
	d->mtime = ns_of(&st->st_mtim);
	d->ctime = ns_of(&st->st_ctim);
	d->clean = d->mtime < w->start - JITK_PKG_RACY_NS && d->ctime < w->start - JITK_PKG_RACY_NS;
	return 0;
}

static int walk_dir(walker *w, int dfd, int depth)
{
	size_t base = strlen(w->rel), i, count;
	char **names, *block;
	int rc = 0;

	if (depth > JITK_PKG_MAX_DEPTH)
		return walk_fail(w, JITK_EIO, NULL, "directories nested more than %d deep",
				 JITK_PKG_MAX_DEPTH);
	if (list_names(w, dfd, &names, &count, &block))
		return -1;
	for (i = 0; i < count && !rc; i++) {
		const char *name = names[i], *p;
		struct stat st;

		for (p = name; *p; p++)
			if ((unsigned char)*p < 0x20 || (unsigned char)*p == 0x7f)
				break;
		if (*p) {
			rc = walk_fail(w, JITK_EIO, NULL, "holds a name with a control character");
			break;
		}
		if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW)) {
			if (errno == ENOENT)
				continue; /* removed meanwhile: not in the tree */
			rc = walk_fail(w, JITK_EIO, name, "cannot be examined: %s", strerror(errno));
			break;
		}
		if ((rc = check_node(w, name, &st)))
			break;
		if (base + 1 + strlen(name) + 1 > sizeof(w->rel)) {
			rc = walk_fail(w, JITK_EIO, name, "the path is too long");
			break;
		}
		snprintf(w->rel + base, sizeof(w->rel) - base, "%s%s", base ? "/" : "", name);
		if (S_ISDIR(st.st_mode)) {
			int sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			struct stat sst;

			w->rel[base] = '\0';
			if (sub < 0 || fstat(sub, &sst) || sst.st_ino != st.st_ino) {
				rc = walk_fail(w, JITK_EIO, name, "cannot be opened as the directory "
					       "that was examined");
				if (sub >= 0)
					close(sub);
				break;
			}
			snprintf(w->rel + base, sizeof(w->rel) - base, "%s%s", base ? "/" : "", name);
			w->dirs++;
			if (w->now_dirs && note_dir(w, w->rel, &sst)) {
				close(sub);
				break;
			}
			jitk__hasher_field(w->h, "dir", w->rel, strlen(w->rel));
			rc = walk_dir(w, sub, depth + 1);
			close(sub);
		} else {
			w->depth_of_file = depth;
			rc = walk_file(w, dfd, name, &st);
		}
		w->rel[base] = '\0';
	}
	free(names);
	free(block);
	return rc;
}

/* Hash the tree at root into out. old: digests that may be reused; now
 * (NULL allowed): receives every file, sorted by rel. The message of a
 * failure is recorded (jitk__error). */
static int tree_hash(uint8_t out[JITK_HASH_SIZE], const char *pkg_name, const char *root,
		     const file_list *old, file_list *now, file_list *now_dirs, size_t *files,
		     size_t *dirs, uint64_t *bytes, size_t *hashed)
{
	walker w;
	struct stat st;
	int fd, rc;

	memset(&w, 0, sizeof(w));
	jitk__jbuf_init(&w.msg);
	w.pkg_name = pkg_name;
	w.root = root;
	w.old = old;
	w.now = now;
	w.now_dirs = now_dirs;
	w.start = now_ns();
	w.uid = jitk__trusted_uid();
	if (!(w.h = jitk__hasher_new()))
		return jitk__error(JITK_ENOMEM, "SHA-256 unavailable");
	jitk__hasher_field(w.h, "jitk package tree", "1", 1);
	fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st))
		walk_fail(&w, JITK_ENOENT, NULL, "cannot be opened: %s", strerror(errno));
	else if (!check_node(&w, NULL, &st) && (!now_dirs || !note_dir(&w, ".", &st)))
		walk_dir(&w, fd, 0);
	if (fd >= 0)
		close(fd);
	if (jitk__hasher_final(w.h, out) && !w.status)
		walk_fail(&w, JITK_ENOMEM, NULL, "SHA-256 failed");
	if (now && now->n && !w.status)
		qsort(now->v, now->n, sizeof(*now->v), by_rel);
	if (now_dirs && now_dirs->n && !w.status)
		qsort(now_dirs->v, now_dirs->n, sizeof(*now_dirs->v), by_rel);
	if (files)
		*files = w.files;
	if (dirs)
		*dirs = w.dirs;
	if (bytes)
		*bytes = w.bytes;
	if (hashed)
		*hashed = w.hashed;
	rc = w.status ? jitk__error(w.status, "%s", w.msg.data ? w.msg.data : "out of memory") : 0;
	jitk__jbuf_free(&w.msg);
	return rc;
}

int jitk__package_tree_hash(uint8_t out[JITK_HASH_SIZE], const char *root, size_t *files)
{
	return tree_hash(out, "(tree)", root, NULL, NULL, NULL, files, NULL, NULL, NULL);
}

/* ------------------------------------------------------------ manifests */

static int hex_value(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Line 1: magic, count, XXH3-128 of the rest; line 2: the root; line 3
 * "tree HEX" when the walk that made it saw the whole tree clean, else
 * "tree -"; then one line per clean entry: "f DIGEST size inode device
 * mtime ctime rel" for a file, "d 0 inode device mtime ctime rel" for a
 * directory ("." the root). */

/* One entry line after its "f DIGEST" or "d": the five numbers and the
 * name, up to eol. */
static int entry_parse(char *s, char *eol, pkg_file *f)
{
	uint64_t v[5];
	size_t k;

	/* five decimal numbers below 2^63 (times, sizes, inodes and devices
	 * are never negative in a manifest) */
	for (k = 0; k < 5; k++) {
		uint64_t x = 0;
		int digits = 0;

		if (*s != ' ')
			return -1;
		for (s++; s < eol && *s >= '0' && *s <= '9'; s++, digits++) {
			if (x > (UINT64_C(0x7fffffffffffffff) - (uint64_t)(*s - '0')) / 10)
				return -1;
			x = x * 10 + (uint64_t)(*s - '0');
		}
		if (!digits)
			return -1;
		v[k] = x;
	}
	if (*s != ' ' || s + 1 >= eol)
		return -1;
	f->size = v[0];
	f->ino = v[1];
	f->dev = v[2];
	f->mtime = (int64_t)v[3];
	f->ctime = (int64_t)v[4];
	f->clean = 1;
	*eol = '\0'; /* the name, in place */
	f->rel = s + 1;
	f->borrowed = 1;
	return 0;
}

/* Whether l is sorted by rel (a manifest is written so): no sort then. */
static int sorted(const file_list *l)
{
	size_t i;

	for (i = 1; i < l->n; i++)
		if (strcmp(l->v[i - 1].rel, l->v[i].rel) >= 0)
			return 0;
	return 1;
}

static int hex_bytes(uint8_t *out, const char *s, size_t n)
{
	size_t k;

	for (k = 0; k < n; k++) {
		int hi = hex_value(s[2 * k]), lo = hex_value(s[2 * k + 1]);

		if (hi < 0 || lo < 0)
			return -1;
		out[k] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

static void manifest_load(pkg *p, jitk_cache *cache)
{
	uint8_t *buf = NULL, sum[JITK_SUM_SIZE], tree[JITK_HASH_SIZE];
	char hex[2 * JITK_SUM_SIZE + 1];
	char *s, *body, *end, *eol;
	unsigned long long count = 0;
	size_t len = 0, i;
	int complete = 0;
	file_list l = { NULL, 0, 0 }, d = { NULL, 0, 0 };

	if (jitk__cache_aux_read(cache, p->manifest, &buf, &len, MANIFEST_MAX_BYTES))
		return;
	s = (char *)buf;
	end = s + len;
	if (strncmp(s, MANIFEST_MAGIC " ", sizeof(MANIFEST_MAGIC)) ||
	    !(body = memchr(s, '\n', len)) || ++body > end)
		goto bad;
	if (sscanf(s + sizeof(MANIFEST_MAGIC), "%llu %32s", &count, hex) != 2 || strlen(hex) != 32 ||
	    jitk__checksum(sum, body, (size_t)(end - body), NULL, 0))
		goto bad;
	{
		char want[2 * JITK_SUM_SIZE + 1];

		jitk__hex(want, sum, JITK_SUM_SIZE);
		if (strcmp(want, hex))
			goto bad;
	}
	/* the root it was made for */
	if ((size_t)(end - body) < strlen(p->pub.root) + 1 ||
	    strncmp(body, p->pub.root, strlen(p->pub.root)) || body[strlen(p->pub.root)] != '\n')
		goto bad;
	s = body + strlen(p->pub.root) + 1;
	/* the tree's hash, when the whole tree is listed */
	if (!(eol = memchr(s, '\n', (size_t)(end - s))) || strncmp(s, "tree ", 5))
		goto bad;
	if (eol - s == 5 + 2 * JITK_HASH_SIZE) {
		if (hex_bytes(tree, s + 5, JITK_HASH_SIZE))
			goto bad;
		complete = 1;
	} else if (eol - s != 6 || s[5] != '-') {
		goto bad;
	}
	s = eol + 1;
	if (count > 2 * (unsigned long long)JITK_PKG_MAX_FILES)
		goto bad;
	/* room for every entry at once (a few directories come out of it) */
	if (count && !(l.v = malloc((size_t)count * sizeof(*l.v))))
		goto bad;
	l.cap = (size_t)count;
	for (i = 0; i < count; i++) {
		pkg_file *f;

		if (!(eol = memchr(s, '\n', (size_t)(end - s))))
			goto bad;
		if (s[0] == 'f' && s[1] == ' ' && eol - s > 2 + 2 * JITK_HASH_SIZE + 12) {
			if (!(f = files_add(&l)) || entry_parse(s + 2 + 2 * JITK_HASH_SIZE, eol, f))
				goto bad;
			f->hex = s + 2; /* decoded if a walk needs it */
		} else if (s[0] == 'd' && eol - s > 12) {
			if (!(f = files_add(&d)) || entry_parse(s + 1, eol, f))
				goto bad;
		} else {
			goto bad;
		}
		s = eol + 1;
	}
	if (s != end)
		goto bad;
	if (!sorted(&l))
		qsort(l.v, l.n, sizeof(*l.v), by_rel);
	if (!sorted(&d))
		qsort(d.v, d.n, sizeof(*d.v), by_rel);
	files_free(&p->known);
	files_free(&p->dirs);
	free(p->text);
	p->known = l;
	p->dirs = d;
	p->text = (char *)buf; /* their names and digests point into it */
	p->complete = complete && d.n > 0;
	memcpy(p->tree, tree, sizeof(tree));
	return;
bad:
	files_free(&l);
	files_free(&d);
	free(buf);
}

static void manifest_save(pkg *p, jitk_cache *cache)
{
	uint8_t sum[JITK_SUM_SIZE];
	char hex[2 * JITK_SUM_SIZE + 1], dig[2 * JITK_HASH_SIZE + 1];
	jbuf body, all;
	size_t i, n = 0;

	if (!jitk__cache_root(cache))
		return;
	jitk__jbuf_init(&body);
	jitk__jbuf_init(&all);
	jitk__jbuf_printf(&body, "%s\n", p->pub.root);
	if (p->complete) {
		jitk__hex(dig, p->tree, JITK_HASH_SIZE);
		jitk__jbuf_printf(&body, "tree %s\n", dig);
	} else {
		jitk__jbuf_puts(&body, "tree -\n");
	}
	/* (sizes, inodes and times are never negative in a manifest) */
	for (i = 0; i < p->known.n; i++) {
		const pkg_file *f = &p->known.v[i];

		if (!f->clean)
			continue;
		if (f->hex) {
			memcpy(dig, f->hex, 2 * JITK_HASH_SIZE);
			dig[2 * JITK_HASH_SIZE] = '\0';
		} else {
			jitk__hex(dig, f->digest, JITK_HASH_SIZE);
		}
		jitk__jbuf_printf(&body, "f %s %llu %llu %llu %lld %lld %s\n", dig,
				  (unsigned long long)f->size, (unsigned long long)f->ino,
				  (unsigned long long)f->dev, (long long)f->mtime, (long long)f->ctime,
				  f->rel);
		n++;
	}
	for (i = 0; i < p->dirs.n; i++) {
		const pkg_file *f = &p->dirs.v[i];

		if (!f->clean)
			continue;
		jitk__jbuf_printf(&body, "d 0 %llu %llu %lld %lld %s\n", (unsigned long long)f->ino,
				  (unsigned long long)f->dev, (long long)f->mtime, (long long)f->ctime,
				  f->rel);
		n++;
	}
	if (!body.oom && !jitk__checksum(sum, body.data, body.len, NULL, 0)) {
		jitk__hex(hex, sum, JITK_SUM_SIZE);
		jitk__jbuf_printf(&all, "%s %zu %s\n", MANIFEST_MAGIC, n, hex);
		jitk__jbuf_put(&all, body.data, body.len);
		if (!all.oom)
			(void)jitk__cache_aux_write(cache, p->manifest, all.data, all.len);
	}
	jitk__jbuf_free(&body);
	jitk__jbuf_free(&all);
}

/* ------------------------------------------------------------ the check */

/* Whether the tree is still what p->known and p->dirs say, by a stat of
 * each entry (no directory listed, no file read): a name added, removed
 * or renamed moves its directory's mtime and ctime, a file written moves
 * its own, a chmod or chown moves the ctime; the trust rules are applied
 * to what the stat says again. Entries are split over a few threads: on
 * a many-core host the check of CUDA's and CUTLASS's ~2800 headers then
 * costs a fraction of a millisecond. */
typedef struct {
	int root;
	const pkg_file *v;
	size_t lo, hi;
	int dirs;
	unsigned uid;
	atomic_int *differs;
} check_part;

static void *check_run(void *arg)
{
	check_part *c = arg;
	size_t i;

	for (i = c->lo; i < c->hi && !atomic_load_explicit(c->differs, memory_order_relaxed); i++) {
		const pkg_file *f = &c->v[i];
		struct stat st;

		if (fstatat(c->root, f->rel, &st, AT_SYMLINK_NOFOLLOW) ||
		    !(c->dirs ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode)) ||
		    (st.st_uid != c->uid && st.st_uid != 0) || (st.st_mode & (S_IWGRP | S_IWOTH)) ||
		    (uint64_t)st.st_ino != f->ino || (uint64_t)st.st_dev != f->dev ||
		    ns_of(&st.st_mtim) != f->mtime || ns_of(&st.st_ctim) != f->ctime ||
		    (!c->dirs && (uint64_t)st.st_size != f->size))
			atomic_store_explicit(c->differs, 1, memory_order_relaxed);
	}
	return NULL;
}

#define CHECK_THREADS 8
#define CHECK_PER_THREAD 256

static int fast_check(pkg *p)
{
	check_part part[CHECK_THREADS];
	pthread_t th[CHECK_THREADS];
	int started[CHECK_THREADS] = { 0 };
	atomic_int differs;
	size_t nt, i;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int root;

	if (!p->complete || !p->dirs.n)
		return 0;
	if ((root = open(p->pub.root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return 0;
	atomic_init(&differs, 0);
	nt = (p->known.n + CHECK_PER_THREAD - 1) / CHECK_PER_THREAD;
	if (nt > CHECK_THREADS)
		nt = CHECK_THREADS;
	if (cpus > 0 && nt > (size_t)cpus)
		nt = (size_t)cpus;
	if (nt < 1)
		nt = 1;
	for (i = 0; i < nt; i++) {
		/* part i: its share of the files */
		size_t a = p->known.n * i / nt, b = p->known.n * (i + 1) / nt;

		part[i].root = root;
		part[i].uid = jitk__trusted_uid();
		part[i].differs = &differs;
		part[i].dirs = 0;
		part[i].v = p->known.v;
		part[i].lo = a;
		part[i].hi = b;
	}
	/* the directories (few) are checked here, after part 0 */
	for (i = 1; i < nt; i++)
		started[i] = !pthread_create(&th[i], NULL, check_run, &part[i]);
	check_run(&part[0]);
	{
		check_part d = part[0];

		d.dirs = 1;
		d.v = p->dirs.v;
		d.lo = 0;
		d.hi = p->dirs.n;
		check_run(&d);
	}
	for (i = 1; i < nt; i++) {
		if (started[i])
			pthread_join(th[i], NULL);
		else
			check_run(&part[i]); /* no thread: done here */
	}
	close(root);
	return !atomic_load(&differs);
}

/* ------------------------------------------------------------ packages */

int jitk__packages_new(jitk_packages **out, const spec_set *set, jitk_cache *cache,
		       const jitk_logger *log)
{
	jitk_packages *p = calloc(1, sizeof(*p));
	size_t i;

	*out = NULL;
	if (!p)
		return jitk__error(JITK_ENOMEM, "out of memory");
	p->set = set;
	p->cache = cache;
	if (log)
		p->log = *log;
	p->n = set->npackages;
	p->nfams = set->nfams;
	p->pkgs = calloc(p->n ? p->n : 1, sizeof(*p->pkgs));
	p->fams = calloc(p->nfams ? p->nfams : 1, sizeof(*p->fams));
	if (!p->pkgs || !p->fams) {
		free(p->pkgs);
		free(p->fams);
		free(p);
		return jitk__error(JITK_ENOMEM, "out of memory");
	}
	pthread_mutex_init(&p->fam_mu, NULL);
	for (i = 0; i < p->n; i++) {
		p->pkgs[i].pub.spec = &set->packages[i];
		pthread_mutex_init(&p->pkgs[i].mu, NULL);
	}
	*out = p;
	return 0;
}

static void strv_free(char **v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static void fam_clear(fam_state *f)
{
	strv_free(f->includes, f->nincludes);
	free(f->key);
	free(f->msg);
	memset(f, 0, sizeof(*f));
}

void jitk__packages_free(jitk_packages *p)
{
	size_t i;

	if (!p)
		return;
	for (i = 0; i < p->n; i++) {
		pkg *k = &p->pkgs[i];

		free(k->pub.root);
		free(k->pub.from);
		strv_free(k->pub.dirs, k->pub.ndirs);
		strv_free(k->pub.rel, k->pub.ndirs);
		free(k->msg);
		files_free(&k->known);
		files_free(&k->dirs);
		free(k->text);
		pthread_mutex_destroy(&k->mu);
	}
	for (i = 0; i < p->nfams; i++)
		fam_clear(&p->fams[i]);
	pthread_mutex_destroy(&p->fam_mu);
	free(p->pkgs);
	free(p->fams);
	free(p);
}

/* Where package sp is: $JITK_PACKAGE_<NAME> (which must then be a
 * directory), else the first place of find that is one. */
static int find_root(const spec_package *sp, char **root, char **from)
{
	char var[96];
	const char *v;
	jbuf tried;
	size_t i;
	int rc;

	*root = *from = NULL;
	env_name(var, sizeof(var), sp->name);
	if ((v = jitk__env(var))) {
		if (!is_dir(v))
			return jitk__error(JITK_ENOENT, "header package %s: $%s (%s) is not a directory",
					   sp->name, var, v);
		*root = realpath(v, NULL);
		*from = jitk__asprintf("$%s", var);
		goto found;
	}
	jitk__jbuf_init(&tried);
	for (i = 0; i < sp->nfind; i++) {
		const spec_find *f = &sp->find[i];
		char *cand = NULL, *how = NULL;

		if (f->configured) {
			const char *d = configured(f->configured);

			if (!d) {
				jitk__jbuf_printf(&tried, "%sconfigure's %s (none found)", tried.len ? "; " : "",
						  f->configured);
				continue;
			}
			cand = jitk__strdup(d);
			how = jitk__asprintf("configure's %s", f->configured);
		} else if (f->env) {
			const char *e = jitk__env(f->env);

			if (!e) {
				jitk__jbuf_printf(&tried, "%s$%s%s%s (unset)", tried.len ? "; " : "", f->env,
						  f->path ? "/" : "", f->path ? f->path : "");
				continue;
			}
			cand = f->path ? jitk__asprintf("%s/%s", e, f->path) : jitk__strdup(e);
			how = jitk__asprintf("$%s%s%s", f->env, f->path ? "/" : "", f->path ? f->path : "");
		} else {
			cand = jitk__strdup(f->path);
			how = jitk__strdup(f->path);
		}
		if (!cand || !how) {
			free(cand);
			free(how);
			jitk__jbuf_free(&tried);
			return jitk__error(JITK_ENOMEM, "out of memory");
		}
		if (is_dir(cand)) {
			*root = realpath(cand, NULL);
			*from = how;
			free(cand);
			jitk__jbuf_free(&tried);
			goto found;
		}
		jitk__jbuf_printf(&tried, "%s%s (%s: not a directory)", tried.len ? "; " : "", how, cand);
		free(cand);
		free(how);
	}
	rc = jitk__error(JITK_ENOENT, "header package %s is not installed here (looked at: %s); set "
			 "%s to its directory", sp->name, tried.data ? tried.data : "nothing", var);
	jitk__jbuf_free(&tried);
	return rc;
found:
	if (!*root || !*from) {
		free(*root);
		free(*from);
		*root = *from = NULL;
		return jitk__error(JITK_ENOMEM, "out of memory");
	}
	return 0;
}

/* Walk p's tree (reusing what p->known says), update its public state and
 * the manifest; *changed when the hash moved. p->mu is held. */
static int rehash(jitk_packages *ps, pkg *p, int *changed)
{
	uint8_t hash[JITK_HASH_SIZE];
	file_list now = { NULL, 0, 0 }, now_dirs = { NULL, 0, 0 };
	size_t files = 0, dirs = 0, hashed = 0, i;
	uint64_t bytes = 0;
	double t0 = jitk__now_ms(), c0 = jitk__thread_cpu_ms();
	int rc;

	if (fast_check(p)) {
		/* unchanged: the hash the manifest or the last walk gave */
		*changed = memcmp(p->tree, p->pub.hash, JITK_HASH_SIZE) != 0;
		memcpy(p->pub.hash, p->tree, JITK_HASH_SIZE);
		jitk__hex(p->pub.hex, p->tree, JITK_HASH_SIZE);
		p->pub.files = p->known.n;
		p->pub.subdirs = p->dirs.n - 1; /* the root is not a subdirectory */
		p->pub.bytes = 0;
		for (i = 0; i < p->known.n; i++)
			p->pub.bytes += p->known.v[i].size;
		p->pub.hashed = 0;
		p->pub.checked = 1;
		p->pub.ms = jitk__now_ms() - t0;
		p->pub.cpu_ms = jitk__thread_cpu_ms() - c0;
		jitk__log(&ps->log, JITK_LOG_INFO,
			  "header package %s (%s): %zu files, %.1f MB, tree %.16s...: %.2f ms (%.2f ms "
			  "of this thread's CPU), unchanged by stat; the manifest read in %.2f ms",
			  p->pub.spec->name, p->pub.root, p->pub.files, (double)p->pub.bytes / 1e6,
			  p->pub.hex, p->pub.ms, p->pub.cpu_ms, p->load_ms);
		return 0;
	}
	rc = tree_hash(hash, p->pub.spec->name, p->pub.root, &p->known, &now, &now_dirs, &files,
		       &dirs, &bytes, &hashed);
	if (rc) {
		files_free(&now);
		files_free(&now_dirs);
		return rc;
	}
	*changed = memcmp(hash, p->pub.hash, JITK_HASH_SIZE) != 0;
	memcpy(p->pub.hash, hash, JITK_HASH_SIZE);
	jitk__hex(p->pub.hex, hash, JITK_HASH_SIZE);
	p->pub.files = files;
	p->pub.subdirs = dirs;
	p->pub.bytes = bytes;
	p->pub.hashed = hashed;
	p->pub.checked = 0;
	p->pub.ms = jitk__now_ms() - t0;
	p->pub.cpu_ms = jitk__thread_cpu_ms() - c0;
	/* The manifest is written again when anything was read or the old
	 * one remembered files that are gone. */
	{
		size_t clean_old = 0, clean_now = 0;
		int complete = 1, was = p->complete;

		for (i = 0; i < p->known.n; i++)
			clean_old += p->known.v[i].clean;
		for (i = 0; i < p->dirs.n; i++)
			clean_old += p->dirs.v[i].clean;
		for (i = 0; i < now.n; i++) {
			clean_now += now.v[i].clean;
			complete &= now.v[i].clean;
		}
		for (i = 0; i < now_dirs.n; i++) {
			clean_now += now_dirs.v[i].clean;
			complete &= now_dirs.v[i].clean;
		}
		files_free(&p->known);
		files_free(&p->dirs);
		free(p->text); /* nothing points into it now */
		p->text = NULL;
		p->known = now;
		p->dirs = now_dirs;
		p->complete = complete;
		memcpy(p->tree, hash, JITK_HASH_SIZE);
		if (hashed || clean_old != clean_now || was != complete || *changed)
			manifest_save(p, ps->cache);
	}
	jitk__log(&ps->log, JITK_LOG_INFO,
		  "header package %s (%s): %zu files, %.1f MB, tree %.16s...: %.2f ms (%.2f ms of "
		  "CPU), %zu read", p->pub.spec->name, p->pub.root, files, (double)bytes / 1e6,
		  p->pub.hex, p->pub.ms, p->pub.cpu_ms, hashed);
	return 0;
}

/* The search directories of p that exist in its tree. */
static int find_dirs(pkg *p)
{
	const spec_package *sp = p->pub.spec;
	size_t i;

	p->pub.dirs = calloc(sp->nsearch ? sp->nsearch : 1, sizeof(char *));
	p->pub.rel = calloc(sp->nsearch ? sp->nsearch : 1, sizeof(char *));
	if (!p->pub.dirs || !p->pub.rel)
		return jitk__error(JITK_ENOMEM, "out of memory");
	for (i = 0; i < sp->nsearch; i++) {
		int dot = !strcmp(sp->search[i], ".");
		char *d = dot ? jitk__strdup(p->pub.root)
			      : jitk__asprintf("%s/%s", p->pub.root, sp->search[i]);
		struct stat st;

		if (!d)
			return jitk__error(JITK_ENOMEM, "out of memory");
		/* the tree has no link in it: lstat of the path is the tree's */
		if (lstat(d, &st) || !S_ISDIR(st.st_mode)) {
			free(d);
			continue;
		}
		p->pub.dirs[p->pub.ndirs] = d;
		if (!(p->pub.rel[p->pub.ndirs++] = jitk__strdup(sp->search[i])))
			return jitk__error(JITK_ENOMEM, "out of memory");
	}
	if (!p->pub.ndirs)
		return jitk__error(JITK_ENOENT, "header package %s (%s): none of its search "
				   "directories is there", sp->name, p->pub.root);
	return 0;
}

static int package_load(jitk_packages *ps, pkg *p)
{
	uint8_t name[JITK_HASH_SIZE];
	jitk_hasher *h;
	int rc, changed;

	if ((rc = find_root(p->pub.spec, &p->pub.root, &p->pub.from)))
		return rc;
	/* The manifest's name: where the tree is (the digests are of that
	 * place's files), not what it holds. */
	if (!(h = jitk__hasher_new()))
		return jitk__error(JITK_ENOMEM, "SHA-256 unavailable");
	jitk__hasher_field(h, "package manifest", p->pub.root, strlen(p->pub.root));
	if (jitk__hasher_final(h, name))
		return jitk__error(JITK_ENOMEM, "SHA-256 failed");
	jitk__hex(p->manifest, name, JITK_HASH_SIZE);
	p->load_ms = jitk__now_ms();
	manifest_load(p, ps->cache);
	p->load_ms = jitk__now_ms() - p->load_ms;
	if ((rc = rehash(ps, p, &changed)))
		return rc;
	return find_dirs(p);
}

int jitk__package_get(jitk_packages *ps, size_t i, const jitk_package **out)
{
	pkg *p;
	int rc;

	*out = NULL;
	if (i >= ps->n)
		return jitk__error(JITK_ENOENT, "no header package #%zu", i);
	p = &ps->pkgs[i];
	pthread_mutex_lock(&p->mu);
	if (!p->state) {
		rc = package_load(ps, p);
		p->state = rc ? 2 : 1;
		p->status = rc;
		if (rc && !(p->msg = jitk__strdup(jitk_error_last()->message)))
			p->status = JITK_ENOMEM;
	}
	rc = p->state == 1 ? 0
			   : jitk__error(p->status, "%s", p->msg ? p->msg : "out of memory");
	pthread_mutex_unlock(&p->mu);
	if (!rc)
		*out = &p->pub;
	return rc;
}

/* ------------------------------------------------------------ families */

typedef struct {
	jitk_packages *ps;
	size_t i;
} pkg_get_arg;

static void *package_get_run(void *arg)
{
	const pkg_get_arg *g = arg;
	const jitk_package *unused;

	(void)jitk__package_get(g->ps, g->i, &unused);
	return NULL;
}

/* Family f's state from its packages as they are now; ps->fam_mu held. */
static int family_make(jitk_packages *ps, fam_state *st, const spec_family *f,
		       const jitk_template *tpl)
{
	const jitk_package *pk[SPEC_MAX_INCLUDES];
	size_t i, j, n = 0;
	jbuf key;
	int rc;

	/* The packages' first uses (a stat of every entry, or a walk) run at
	 * once, one thread each; their results and errors are then taken in
	 * order here (a package remembers its error and message). */
	{
		pkg_get_arg ga[SPEC_MAX_INCLUDES];
		pthread_t th[SPEC_MAX_INCLUDES];
		int started[SPEC_MAX_INCLUDES] = { 0 };

		for (i = 1; i < f->nincludes; i++) {
			ga[i].ps = ps;
			ga[i].i = f->includes[i].package;
			started[i] = !pthread_create(&th[i], NULL, package_get_run, &ga[i]);
		}
		rc = jitk__package_get(ps, f->includes[0].package, &pk[0]);
		for (i = 1; i < f->nincludes; i++)
			if (started[i])
				pthread_join(th[i], NULL);
		if (rc)
			return rc;
	}
	for (i = 0; i < f->nincludes; i++) {
		if ((rc = jitk__package_get(ps, f->includes[i].package, &pk[i])))
			return rc;
		n += pk[i]->ndirs;
	}
	if (!(st->includes = calloc(n ? n : 1, sizeof(char *))))
		return jitk__error(JITK_ENOMEM, "out of memory");
	jitk__jbuf_init(&key);
	for (i = 0; i < f->nincludes; i++) {
		pkg *p = &ps->pkgs[f->includes[i].package];
		char hex[2 * JITK_HASH_SIZE + 1];

		/* a recheck may be rehashing it in another thread */
		pthread_mutex_lock(&p->mu);
		memcpy(hex, p->pub.hex, sizeof(hex));
		pthread_mutex_unlock(&p->mu);
		jitk__jbuf_printf(&key, "%s %s", pk[i]->spec->name, hex);
		for (j = 0; j < pk[i]->ndirs; j++) {
			jitk__jbuf_printf(&key, " %s", pk[i]->rel[j]);
			if (!(st->includes[st->nincludes++] = jitk__strdup(pk[i]->dirs[j]))) {
				jitk__jbuf_free(&key);
				return jitk__error(JITK_ENOMEM, "out of memory");
			}
		}
		jitk__jbuf_puts(&key, "\n");
	}
	if (!(st->key = jitk__jbuf_detach(&key)))
		return jitk__error(JITK_ENOMEM, "out of memory");
	/* Every package include is a header of the family's packages, found
	 * as NVRTC will look (the -I directories in order). */
	for (i = 0; tpl && i < tpl->nangle; i++) {
		for (j = 0; j < st->nincludes; j++) {
			char *path = jitk__asprintf("%s/%s", st->includes[j], tpl->angle[i].name);
			struct stat sb;
			int found = path && !lstat(path, &sb) && S_ISREG(sb.st_mode);

			free(path);
			if (found)
				break;
		}
		if (j == st->nincludes) {
			jbuf names;

			jitk__jbuf_init(&names);
			for (j = 0; j < f->nincludes; j++)
				jitk__jbuf_printf(&names, "%s%s (%s)", j ? ", " : "", pk[j]->spec->name,
						  pk[j]->root);
			rc = jitk__error(JITK_ESPEC, "%s: error: #include <%s>: no such header in the "
					 "family's packages: %s", tpl->angle[i].where, tpl->angle[i].name,
					 names.data ? names.data : "");
			jitk__jbuf_free(&names);
			return rc;
		}
	}
	return 0;
}

static int family_copy(const fam_state *st, jitk_tu *tu)
{
	size_t i;

	if (!(tu->packages = jitk__strdup(st->key)) ||
	    !(tu->includes = calloc(st->nincludes ? st->nincludes : 1, sizeof(char *))))
		return jitk__error(JITK_ENOMEM, "out of memory");
	for (i = 0; i < st->nincludes; i++) {
		if (!(tu->includes[i] = jitk__strdup(st->includes[i])))
			return jitk__error(JITK_ENOMEM, "out of memory");
		tu->nincludes++;
	}
	return 0;
}

int jitk__packages_tu(jitk_packages *ps, size_t fi, const spec_family *f,
		      const jitk_template *tpl, jitk_tu *tu)
{
	fam_state *st;
	int rc;

	if (!f->nincludes)
		return 0;
	if (fi >= ps->nfams)
		return jitk__error(JITK_ENOENT, "no family #%zu", fi);
	st = &ps->fams[fi];
	pthread_mutex_lock(&ps->fam_mu);
	if (!st->state) {
		rc = family_make(ps, st, f, tpl);
		if (rc) {
			strv_free(st->includes, st->nincludes);
			free(st->key);
			st->includes = NULL;
			st->nincludes = 0;
			st->key = NULL;
			st->status = rc;
			st->msg = jitk__strdup(jitk_error_last()->message);
		}
		st->state = rc ? 2 : 1;
	}
	rc = st->state == 1 ? family_copy(st, tu)
			    : jitk__error(st->status, "%s", st->msg ? st->msg : "out of memory");
	pthread_mutex_unlock(&ps->fam_mu);
	return rc;
}

int jitk__packages_recheck(jitk_packages *ps, const spec_family *f, int *changed)
{
	size_t i;
	int rc = 0;

	*changed = 0;
	for (i = 0; i < f->nincludes && !rc; i++) {
		pkg *p = &ps->pkgs[f->includes[i].package];
		int moved = 0;

		pthread_mutex_lock(&p->mu);
		rc = p->state == 1 ? rehash(ps, p, &moved) : 0;
		pthread_mutex_unlock(&p->mu);
		*changed |= moved;
	}
	if (rc || !*changed)
		return rc;
	/* Every family's key text follows the new hashes (another family may
	 * share the package): made again on next use. */
	pthread_mutex_lock(&ps->fam_mu);
	for (i = 0; i < ps->nfams; i++)
		fam_clear(&ps->fams[i]);
	pthread_mutex_unlock(&ps->fam_mu);
	return 0;
}
