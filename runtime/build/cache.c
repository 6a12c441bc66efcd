/* cache.c - the on-disk cubin cache.
 *
 * Layout under a root: v1/<2 hex>/<64 hex>.jitk entries, v1/tmp/ for files
 * being written (published by rename), v1/locks/<64 hex>.lock for the
 * per-key flock. An entry is a 128-byte header (magic, format, key,
 * target, sizes, SHA-256 of everything else), the lowered names, the
 * image. Anything that does not verify is a miss. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "build/cache.h"

static const char entry_magic[8] = { 'J', 'I', 'T', 'K', 'C', 'B', 'N', '1' };

unsigned jitk__test_write_delay_us;
const char *jitk__test_fail_step;
int jitk__test_fail_errno;

/* A step of jitk__cache_put fails here when a test asks for it. */
static int fault(const char *step)
{
	if (jitk__test_fail_step && !strcmp(jitk__test_fail_step, step)) {
		errno = jitk__test_fail_errno ? jitk__test_fail_errno : EIO;
		return -1;
	}
	return 0;
}

#define LOCK_WAIT_MS 120000 /* compile anyway after two minutes */

struct jitk_cache {
	char *root; /* writable root (.../v1), or NULL */
	char *top;  /* the directory given (root without /v1) */
	uint64_t max_bytes; /* $JITK_CACHE_MAX_BYTES: prune after writes */
	char **layers; /* read-only roots (.../v1) */
	size_t nlayers;
	jitk_logger log;
	jitk_cache_counters n;
};

/* ------------------------------------------------------------ encoding */

static void put32(uint8_t *p, uint32_t v)
{
	int i;

	for (i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	int i;

	for (i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

/* Header fields (little endian):
 *   0 magic[8]  8 format u32  12 header size u32  16 key[32]
 *  48 target[16]  64 names size u64  72 names count u32  76 flags u32
 *  80 image size u64  88 checksum[32]  120 reserved u64
 * The checksum covers bytes 0..87, the names and the image. */
static int checksum(uint8_t out[JITK_HASH_SIZE], const uint8_t *head,
		    const uint8_t *rest, size_t rest_len)
{
	jitk_hasher *h = jitk__hasher_new();

	if (!h)
		return -1;
	jitk__hasher_update(h, head, 88);
	jitk__hasher_update(h, rest, rest_len);
	return jitk__hasher_final(h, out);
}

int jitk__entry_encode(uint8_t **out, size_t *len, const jitk_cache_entry *e)
{
	size_t names = 0, i, total;
	uint8_t *buf, *p;

	*out = NULL;
	for (i = 0; i < e->nnames; i++)
		names += strlen(e->names[i]) + 1;
	if (names > JITK_ENTRY_MAX_NAMES || e->size > JITK_ENTRY_MAX_IMAGE ||
	    strlen(e->target) >= 16)
		return jitk__error(JITK_EINVAL, "cache entry too large");
	total = JITK_ENTRY_HEADER + names + e->size;
	buf = calloc(1, total);
	if (!buf)
		return jitk__error(JITK_ENOMEM, "out of memory");
	memcpy(buf, entry_magic, 8);
	put32(buf + 8, JITK_CACHE_FORMAT);
	put32(buf + 12, JITK_ENTRY_HEADER);
	memcpy(buf + 16, e->key, JITK_HASH_SIZE);
	memcpy(buf + 48, e->target, strlen(e->target));
	put64(buf + 64, names);
	put32(buf + 72, (uint32_t)e->nnames);
	put32(buf + 76, e->is_ptx ? 1u : 0u);
	put64(buf + 80, e->size);
	p = buf + JITK_ENTRY_HEADER;
	for (i = 0; i < e->nnames; i++) {
		size_t n = strlen(e->names[i]) + 1;

		memcpy(p, e->names[i], n);
		p += n;
	}
	if (e->size)
		memcpy(p, e->image, e->size);
	if (checksum(buf + 88, buf, buf + JITK_ENTRY_HEADER, names + e->size)) {
		free(buf);
		return jitk__error(JITK_ENOMEM, "SHA-256 failed");
	}
	*out = buf;
	*len = total;
	return 0;
}

int jitk__entry_decode(jitk_cache_entry *out, const uint8_t *buf, size_t len,
		       const char **problem)
{
	uint8_t sum[JITK_HASH_SIZE];
	uint64_t names, image;
	uint32_t count, i;
	const uint8_t *p, *end;

	memset(out, 0, sizeof(*out));
	*problem = NULL;
	if (len < JITK_ENTRY_HEADER) {
		*problem = len ? "truncated header" : "empty file";
		return -1;
	}
	if (memcmp(buf, entry_magic, 8)) {
		*problem = "bad magic";
		return -1;
	}
	if (get32(buf + 8) != JITK_CACHE_FORMAT || get32(buf + 12) != JITK_ENTRY_HEADER) {
		*problem = "unsupported format version";
		return -1;
	}
	names = get64(buf + 64);
	count = get32(buf + 72);
	image = get64(buf + 80);
	/* Sizes are checked against limits and the file before any use. */
	if (names > JITK_ENTRY_MAX_NAMES || image > JITK_ENTRY_MAX_IMAGE ||
	    count > names) {
		*problem = "sizes out of range";
		return -1;
	}
	if (len != JITK_ENTRY_HEADER + names + image) {
		*problem = len < JITK_ENTRY_HEADER + names + image ? "truncated"
								     : "trailing bytes";
		return -1;
	}
	if (buf[48 + 15] != 0 || (get32(buf + 76) & ~1u)) {
		*problem = "bad header fields";
		return -1;
	}
	if (checksum(sum, buf, buf + JITK_ENTRY_HEADER, (size_t)(names + image)) ||
	    memcmp(sum, buf + 88, JITK_HASH_SIZE)) {
		*problem = "checksum mismatch";
		return -1;
	}
	p = buf + JITK_ENTRY_HEADER;
	end = p + names;
	out->names = calloc(count ? count : 1, sizeof(*out->names));
	out->image = malloc(image ? (size_t)image : 1);
	if (!out->names || !out->image) {
		jitk__cache_entry_free(out);
		*problem = "out of memory";
		return -1;
	}
	for (i = 0; i < count; i++) {
		const uint8_t *z = memchr(p, 0, (size_t)(end - p));

		if (!z || !(out->names[i] = jitk__strndup((const char *)p, (size_t)(z - p)))) {
			jitk__cache_entry_free(out);
			*problem = "bad name table";
			return -1;
		}
		out->nnames++;
		p = z + 1;
	}
	if (p != end) {
		jitk__cache_entry_free(out);
		*problem = "bad name table";
		return -1;
	}
	memcpy(out->key, buf + 16, JITK_HASH_SIZE);
	memcpy(out->target, buf + 48, 16);
	out->target[15] = '\0';
	out->is_ptx = (int)(get32(buf + 76) & 1u);
	if (image)
		memcpy(out->image, end, (size_t)image);
	out->size = (size_t)image;
	return 0;
}

void jitk__cache_entry_free(jitk_cache_entry *e)
{
	size_t i;

	if (!e)
		return;
	for (i = 0; i < e->nnames; i++)
		free(e->names[i]);
	free(e->names);
	free(e->image);
	memset(e, 0, sizeof(*e));
}

/* --------------------------------------------------------------- trust */

unsigned jitk__trusted_uid(void)
{
	const char *v = jitk__env("JITK_TEST_ASSUME_UID");

	if (v) {
		char *end;
		unsigned long u = strtoul(v, &end, 10);

		if (!*end)
			return (unsigned)u;
	}
	return (unsigned)geteuid();
}

/* A directory we may write into and load code from: ours, and nobody
 * else's to write (world-writable only with the sticky bit). */
static const char *dir_untrusted(const char *path, char *why, size_t n)
{
	struct stat st;

	if (lstat(path, &st))
		return NULL; /* does not exist yet: we create it */
	if (S_ISLNK(st.st_mode) && stat(path, &st))
		return NULL;
	if (!S_ISDIR(st.st_mode)) {
		snprintf(why, n, "%s is not a directory", path);
		return why;
	}
	if (st.st_uid != jitk__trusted_uid()) {
		snprintf(why, n, "%s is owned by uid %u, not by this user (uid %u)",
			 path, (unsigned)st.st_uid, jitk__trusted_uid());
		return why;
	}
	if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX)) {
		snprintf(why, n, "%s is world-writable without the sticky bit", path);
		return why;
	}
	return NULL;
}

/* ---------------------------------------------------------------- open */

static int make_dirs(const char *root)
{
	char *tmp = jitk__asprintf("%s/tmp", root);
	char *locks = jitk__asprintf("%s/locks", root);
	int rc = -1;

	if (tmp && locks && !jitk__mkdirs(root, 0755) && !jitk__mkdirs(tmp, 0700) &&
	    !jitk__mkdirs(locks, 0700) && !access(root, W_OK | X_OK))
		rc = 0;
	free(tmp);
	free(locks);
	return rc;
}

/* Remove temporary files older than JITK_TEMP_MAX_AGE_S: orphans of
 * writers that were killed. Young ones may belong to a live writer. */
static void sweep_temp(const char *root)
{
	char *tmp = jitk__asprintf("%s/tmp", root);
	DIR *d = tmp ? opendir(tmp) : NULL;
	struct dirent *e;
	time_t now = time(NULL);

	while (d && (e = readdir(d))) {
		struct stat st;
		char *p;

		if (e->d_name[0] == '.')
			continue;
		p = jitk__asprintf("%s/%s", tmp, e->d_name);
		if (p && !lstat(p, &st) && S_ISREG(st.st_mode) &&
		    st.st_mtime + JITK_TEMP_MAX_AGE_S < now)
			(void)unlink(p);
		free(p);
	}
	if (d)
		closedir(d);
	free(tmp);
}

int jitk__cache_open(jitk_cache **out, const char *dir, const char *layers,
		     const jitk_logger *log)
{
	jitk_cache *c = calloc(1, sizeof(*c));
	char why[512];

	*out = NULL;
	if (!c)
		return jitk__error(JITK_ENOMEM, "out of memory");
	if (log)
		c->log = *log;
	if (jitk__env("JITK_CACHE_MAX_BYTES"))
		c->max_bytes = strtoull(jitk__env("JITK_CACHE_MAX_BYTES"), NULL, 10);
	if (dir && *dir) {
		const char *bad = dir_untrusted(dir, why, sizeof(why));

		c->root = jitk__asprintf("%s/%s", dir, JITK_CACHE_SUBDIR);
		if (!c->root) {
			free(c);
			return jitk__error(JITK_ENOMEM, "out of memory");
		}
		if (!bad)
			bad = dir_untrusted(c->root, why, sizeof(why));
		/* Checked again once the directories exist: what did not exist
		 * before proves nothing. */
		if (!bad && make_dirs(c->root)) {
			jitk__log(&c->log, JITK_LOG_WARN,
				  "cache directory %s is not usable (%s); compiling in memory",
				  dir, strerror(errno));
			free(c->root);
			c->root = NULL;
		} else if (bad || (bad = dir_untrusted(dir, why, sizeof(why))) ||
			   (bad = dir_untrusted(c->root, why, sizeof(why)))) {
			jitk__log(&c->log, JITK_LOG_WARN,
				  "not using cache directory: %s; compiling in memory", bad);
			free(c->root);
			c->root = NULL;
		} else if (!(c->top = jitk__strdup(dir))) {
			jitk__cache_close(c);
			return jitk__error(JITK_ENOMEM, "out of memory");
		} else {
			sweep_temp(c->root);
		}
	}
	while (layers && *layers) {
		const char *colon = strchr(layers, ':');
		size_t n = colon ? (size_t)(colon - layers) : strlen(layers);

		if (n) {
			char **p = realloc(c->layers, (c->nlayers + 1) * sizeof(*p));

			if (!p || !(p[c->nlayers] = jitk__asprintf("%.*s/%s", (int)n, layers,
								   JITK_CACHE_SUBDIR))) {
				if (p)
					c->layers = p;
				jitk__cache_close(c);
				return jitk__error(JITK_ENOMEM, "out of memory");
			}
			c->layers = p;
			c->nlayers++;
		}
		layers = colon ? colon + 1 : layers + n;
	}
	*out = c;
	return 0;
}

void jitk__cache_close(jitk_cache *c)
{
	size_t i;

	if (!c)
		return;
	for (i = 0; i < c->nlayers; i++)
		free(c->layers[i]);
	free(c->layers);
	free(c->root);
	free(c->top);
	free(c);
}

const char *jitk__cache_root(const jitk_cache *c)
{
	return c ? c->root : NULL;
}

static _Thread_local unsigned long long thread_rejects;

unsigned long long jitk__cache_thread_rejects(void)
{
	return thread_rejects;
}

const jitk_cache_counters *jitk__cache_counters(const jitk_cache *c)
{
	return &c->n;
}

/* -------------------------------------------------------------- lookup */

static char *entry_path(const char *root, const uint8_t key[JITK_HASH_SIZE])
{
	char hex[2 * JITK_HASH_SIZE + 1];

	jitk__hex(hex, key, JITK_HASH_SIZE);
	return jitk__asprintf("%s/%.2s/%s.jitk", root, hex, hex);
}

int jitk__entry_read(jitk_cache_entry *out, const char *path, int allow_root,
		     const char **problem)
{
	return jitk__entry_read_at(out, path, allow_root, problem, NULL, NULL);
}

int jitk__entry_read_at(jitk_cache_entry *out, const char *path, int allow_root,
			const char **problem, uint64_t *dev, uint64_t *ino)
{
	struct stat st;
	uint8_t *buf = NULL;
	size_t got = 0;
	int fd, rc = -1;

	memset(out, 0, sizeof(*out));
	*problem = NULL;
	/* O_NOFOLLOW: a symlink is refused, not followed; O_NONBLOCK: a FIFO
	 * does not hang the open. */
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		*problem = errno == ENOENT ? NULL : errno == ELOOP ? "is a symbolic link"
							: "cannot be opened";
		return -1;
	}
	if (fstat(fd, &st)) {
		*problem = "cannot be examined";
		goto done;
	}
	if (dev)
		*dev = (uint64_t)st.st_dev;
	if (ino)
		*ino = (uint64_t)st.st_ino;
	if (!S_ISREG(st.st_mode)) {
		*problem = "not a regular file";
		goto done;
	}
	if (st.st_uid != jitk__trusted_uid() && !(allow_root && st.st_uid == 0)) {
		*problem = "owned by another user";
		goto done;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		*problem = "writable by others";
		goto done;
	}
	/* 0 links: removed (by clear or prune) after we opened it - what we
	 * read is still the whole entry. More than one: refused. */
	if (st.st_nlink > 1) {
		*problem = "has several hard links";
		goto done;
	}
	if ((uint64_t)st.st_size > (uint64_t)JITK_ENTRY_HEADER + JITK_ENTRY_MAX_NAMES +
					   JITK_ENTRY_MAX_IMAGE) {
		*problem = "too large";
		goto done;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		*problem = "out of memory";
		goto done;
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	rc = jitk__entry_decode(out, buf, got, problem);
done:
	free(buf);
	close(fd);
	return rc;
}

static int lookup_in(jitk_cache *c, const char *root, int allow_root,
		     const uint8_t key[JITK_HASH_SIZE], const char *target,
		     jitk_cache_entry *out)
{
	char *path = entry_path(root, key);
	const char *problem = NULL;
	uint64_t dev = 0, ino = 0;
	int rc;

	if (!path)
		return -1;
	rc = jitk__entry_read_at(out, path, allow_root, &problem, &dev, &ino);
	if (!rc && (memcmp(out->key, key, JITK_HASH_SIZE) || strcmp(out->target, target))) {
		problem = memcmp(out->key, key, JITK_HASH_SIZE) ? "key mismatch"
								 : "target mismatch";
		jitk__cache_entry_free(out);
		rc = -1;
	}
	if (rc && problem) {
		atomic_fetch_add(&c->n.rejects, 1);
		thread_rejects++;
		jitk__log(&c->log, JITK_LOG_WARN, "cache entry %s rejected: %s", path, problem);
		/* A bad entry in our own cache is garbage: remove it so that it
		 * is reported once and replaced - but only the file we read: a
		 * writer may have renamed a good entry over the name since.
		 * Layers are read-only. */
		if (!allow_root) {
			struct stat now;

			if (!lstat(path, &now) && (uint64_t)now.st_dev == dev &&
			    (uint64_t)now.st_ino == ino)
				(void)unlink(path);
		}
	}
	/* The recency stamp of LRU pruning: the entry's mtime, set to now on
	 * every hit in the writable cache (layers are read-only). */
	if (!rc && !allow_root)
		(void)utimensat(AT_FDCWD, path, NULL, AT_SYMLINK_NOFOLLOW);
	free(path);
	return rc;
}

int jitk__cache_get(jitk_cache *c, const uint8_t key[JITK_HASH_SIZE],
		    const char *target, jitk_cache_entry *out, int *origin)
{
	size_t i;

	for (i = 0; i < c->nlayers; i++)
		if (!lookup_in(c, c->layers[i], 1, key, target, out)) {
			atomic_fetch_add(&c->n.layer_hits, 1);
			*origin = 2;
			return JITK_OK;
		}
	if (c->root && !lookup_in(c, c->root, 0, key, target, out)) {
		atomic_fetch_add(&c->n.hits, 1);
		*origin = 1;
		return JITK_OK;
	}
	atomic_fetch_add(&c->n.misses, 1);
	return JITK_ENOENT;
}

/* ------------------------------------------------------------- publish */

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t k = write(fd, p, n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			if (k == 0)
				errno = EIO;
			return -1;
		}
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

static void fsync_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd >= 0) {
		(void)fsync(fd);
		close(fd);
	}
}

int jitk__cache_put(jitk_cache *c, const jitk_cache_entry *e)
{
	char hex[2 * JITK_HASH_SIZE + 1];
	char *tmp = NULL, *shard = NULL, *final = NULL;
	uint8_t *bytes = NULL;
	size_t len = 0;
	const char *step = "encode";
	int fd = -1, rc = 0;
	static atomic_uint seq;

	if (!c->root)
		return JITK_OK;
	jitk__hex(hex, e->key, JITK_HASH_SIZE);
	if (jitk__entry_encode(&bytes, &len, e))
		goto fail;
	tmp = jitk__asprintf("%s/tmp/%s.%ld.%u", c->root, hex, (long)getpid(),
			     atomic_fetch_add(&seq, 1));
	shard = jitk__asprintf("%s/%.2s", c->root, hex);
	final = jitk__asprintf("%s/%s.jitk", shard ? shard : "", hex);
	if (!tmp || !shard || !final) {
		errno = ENOMEM;
		goto fail;
	}
	step = "create";
	fd = fault(step) ? -1 : open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		goto fail;
	step = "write";
	if (write_all(fd, bytes, len / 2))
		goto fail;
	if (jitk__test_write_delay_us)
		usleep(jitk__test_write_delay_us);
	if (fault(step) || write_all(fd, bytes + len / 2, len - len / 2))
		goto fail;
	step = "chmod";
	if (fchmod(fd, 0644))
		goto fail;
	step = "fsync";
	if (fault(step) || fsync(fd))
		goto fail;
	step = "close";
	rc = close(fd);
	fd = -1;
	if (rc)
		goto fail;
	step = "mkdir";
	if (mkdir(shard, 0755) && errno != EEXIST)
		goto fail;
	step = "rename";
	if (fault(step) || rename(tmp, final))
		goto fail;
	fsync_dir(shard);
	atomic_fetch_add(&c->n.writes, 1);
	rc = JITK_OK;
	if (c->max_bytes && c->top) {
		jitk_prune_result pr;

		(void)jitk__cache_prune(&pr, c->top, c->max_bytes, JITK_TEMP_MAX_AGE_S);
	}
	goto done;
fail:
	rc = errno;
	if (fd >= 0)
		close(fd);
	if (tmp)
		unlink(tmp);
	atomic_fetch_add(&c->n.write_failures, 1);
	jitk__log(&c->log, JITK_LOG_WARN, "cannot write cache entry %s (%s: %s); using it from memory",
		  hex, step, strerror(rc));
	rc = jitk__error(JITK_EIO, "cache write failed at %s: %s", step, strerror(rc));
done:
	free(bytes);
	free(tmp);
	free(shard);
	free(final);
	return rc;
}

void jitk__cache_lock(jitk_cache *c, const uint8_t key[JITK_HASH_SIZE], int *fd)
{
	char hex[2 * JITK_HASH_SIZE + 1], *path;
	double start;

	*fd = -1;
	if (!c->root)
		return;
	jitk__hex(hex, key, JITK_HASH_SIZE);
	path = jitk__asprintf("%s/locks/%s.lock", c->root, hex);
	if (!path)
		return;
	*fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	free(path);
	if (*fd < 0)
		return;
	start = jitk__now_ms();
	while (flock(*fd, LOCK_EX | LOCK_NB)) {
		struct timespec ts = { 0, 2000000 }; /* 2 ms */

		if ((errno != EWOULDBLOCK && errno != EINTR) ||
		    jitk__now_ms() - start > LOCK_WAIT_MS) {
			jitk__log(&c->log, JITK_LOG_WARN,
				  "cache lock for %s not taken (%s); compiling without it", hex,
				  errno == EWOULDBLOCK ? "timed out" : strerror(errno));
			close(*fd);
			*fd = -1;
			return;
		}
		nanosleep(&ts, NULL);
	}
}

void jitk__cache_unlock(int fd)
{
	if (fd >= 0)
		close(fd); /* releases the flock */
}

void jitk__cache_evict(jitk_cache *c, const uint8_t key[JITK_HASH_SIZE])
{
	char *path;

	if (!c->root)
		return;
	path = entry_path(c->root, key);
	if (path && unlink(path) == 0)
		jitk__log(&c->log, JITK_LOG_INFO, "evicted cache entry %s", path);
	free(path);
}

/* -------------------------------------------------------------- admin */

static int is_hex_name(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}

/* dir: the subdirectory of v1 (a shard, "tmp" or "locks"). */
typedef int (*entry_fn)(void *ctx, const char *path, const char *dir,
			const char *name);

/* Call fn for every file of every directory under v1 (shards, tmp,
 * locks). */
static int walk(const char *root, entry_fn fn, void *ctx)
{
	DIR *top = opendir(root);
	struct dirent *d;
	int rc = 0;

	if (!top)
		return errno == ENOENT ? 0 : -1;
	while (!rc && (d = readdir(top))) {
		char *sub;
		DIR *dd;
		struct dirent *e;

		if (d->d_name[0] == '.')
			continue;
		sub = jitk__asprintf("%s/%s", root, d->d_name);
		if (!sub) {
			rc = -1;
			break;
		}
		dd = opendir(sub);
		while (dd && !rc && (e = readdir(dd))) {
			char *path;

			if (e->d_name[0] == '.' && (!e->d_name[1] ||
						    (e->d_name[1] == '.' && !e->d_name[2])))
				continue;
			path = jitk__asprintf("%s/%s", sub, e->d_name);
			rc = path ? fn(ctx, path, d->d_name, e->d_name) : -1;
			free(path);
		}
		if (dd)
			closedir(dd);
		free(sub);
	}
	closedir(top);
	return rc;
}

typedef struct {
	jitk_cache_summary *s;
	int verify;
	void (*report)(void *, const char *, const char *);
	void *ctx;
} scan_ctx;

static int scan_one(void *p, const char *path, const char *dir, const char *name)
{
	scan_ctx *sc = p;
	size_t n = strlen(name);
	struct stat st;

	if (!strcmp(dir, "tmp")) {
		sc->s->temp_files++;
		return 0;
	}
	if (n > 5 && !strcmp(name + n - 5, ".lock")) {
		sc->s->lock_files++;
		return 0;
	}
	if (lstat(path, &st))
		return 0;
	sc->s->entries++;
	sc->s->bytes += (uint64_t)st.st_size;
	if (sc->verify) {
		jitk_cache_entry e;
		const char *problem = NULL;
		char hex[2 * JITK_HASH_SIZE + 1];

		if (n != 2 * JITK_HASH_SIZE + 5 || strcmp(name + n - 5, ".jitk") ||
		    !is_hex_name(name, 2 * JITK_HASH_SIZE)) {
			problem = "unexpected file name";
		} else if (!jitk__entry_read(&e, path, 1, &problem)) {
			jitk__hex(hex, e.key, JITK_HASH_SIZE);
			if (strncmp(hex, name, 2 * JITK_HASH_SIZE))
				problem = "key does not match the file name";
			jitk__cache_entry_free(&e);
		} else if (!problem) {
			problem = "vanished while reading";
		}
		if (problem) {
			sc->s->bad++;
			if (sc->report)
				sc->report(sc->ctx, path, problem);
		}
	}
	return 0;
}

int jitk__cache_scan(jitk_cache_summary *out, const char *root, int verify,
		     void (*report)(void *ctx, const char *path,
				    const char *problem),
		     void *ctx)
{
	scan_ctx sc = { out, verify, report, ctx };
	char *v1 = jitk__asprintf("%s/%s", root, JITK_CACHE_SUBDIR);
	int rc;

	memset(out, 0, sizeof(*out));
	if (!v1)
		return jitk__error(JITK_ENOMEM, "out of memory");
	rc = walk(v1, scan_one, &sc);
	free(v1);
	return rc ? jitk__error(JITK_EIO, "%s: cannot read: %s", root, strerror(errno)) : 0;
}

static int clear_one(void *p, const char *path, const char *dir, const char *name)
{
	uint64_t *removed = p;
	size_t n = strlen(name);

	(void)dir;
	/* Lock files stay: a process may hold one right now. */
	if (n > 5 && !strcmp(name + n - 5, ".lock"))
		return 0;
	if (!unlink(path))
		++*removed;
	return 0;
}

int jitk__cache_clear(uint64_t *removed, const char *root)
{
	char *v1 = jitk__asprintf("%s/%s", root, JITK_CACHE_SUBDIR);
	int rc;

	*removed = 0;
	if (!v1)
		return jitk__error(JITK_ENOMEM, "out of memory");
	rc = walk(v1, clear_one, removed);
	free(v1);
	return rc ? jitk__error(JITK_EIO, "%s: cannot clear: %s", root, strerror(errno)) : 0;
}

/* --------------------------------------------------------------- prune */

typedef struct {
	char *path;
	uint64_t size;
	struct timespec mtime;
} prune_item;

typedef struct {
	jitk_prune_result *r;
	prune_item *items;
	size_t n, cap;
	time_t now;
	unsigned temp_age;
	int failed;
} prune_ctx;

static int prune_one(void *p, const char *path, const char *dir, const char *name)
{
	prune_ctx *pc = p;
	size_t n = strlen(name);
	struct stat st;

	if (lstat(path, &st))
		return 0;
	if (!strcmp(dir, "tmp")) {
		if (st.st_mtime + (time_t)pc->temp_age < pc->now && !unlink(path))
			pc->r->temp++;
		return 0;
	}
	if (n > 5 && !strcmp(name + n - 5, ".lock"))
		return 0;
	if (n != 2 * JITK_HASH_SIZE + 5 || strcmp(name + n - 5, ".jitk") ||
	    !S_ISREG(st.st_mode)) {
		if (!unlink(path))
			pc->r->bad++;
		return 0;
	}
	if (pc->n == pc->cap) {
		size_t cap = pc->cap ? 2 * pc->cap : 64;
		prune_item *it = realloc(pc->items, cap * sizeof(*it));

		if (!it) {
			pc->failed = 1;
			return -1;
		}
		pc->items = it;
		pc->cap = cap;
	}
	pc->items[pc->n].path = jitk__strdup(path);
	if (!pc->items[pc->n].path) {
		pc->failed = 1;
		return -1;
	}
	pc->items[pc->n].size = (uint64_t)st.st_size;
	pc->items[pc->n].mtime = st.st_mtim;
	pc->n++;
	return 0;
}

static int older_first(const void *a, const void *b)
{
	const prune_item *x = a, *y = b;

	if (x->mtime.tv_sec != y->mtime.tv_sec)
		return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
	if (x->mtime.tv_nsec != y->mtime.tv_nsec)
		return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
	return strcmp(x->path, y->path);
}

int jitk__cache_prune(jitk_prune_result *out, const char *root,
		      uint64_t max_bytes, unsigned temp_age_s)
{
	prune_ctx pc;
	char *v1 = jitk__asprintf("%s/%s", root, JITK_CACHE_SUBDIR);
	uint64_t total = 0;
	size_t i;
	int rc;

	memset(out, 0, sizeof(*out));
	memset(&pc, 0, sizeof(pc));
	pc.r = out;
	pc.now = time(NULL);
	pc.temp_age = temp_age_s;
	if (!v1)
		return jitk__error(JITK_ENOMEM, "out of memory");
	rc = walk(v1, prune_one, &pc);
	free(v1);
	if (rc || pc.failed) {
		for (i = 0; i < pc.n; i++)
			free(pc.items[i].path);
		free(pc.items);
		return jitk__error(pc.failed ? JITK_ENOMEM : JITK_EIO, "%s: cannot prune: %s",
				   root, pc.failed ? "out of memory" : strerror(errno));
	}
	for (i = 0; i < pc.n; i++)
		total += pc.items[i].size;
	if (pc.n)
		qsort(pc.items, pc.n, sizeof(*pc.items), older_first);
	for (i = 0; i < pc.n; i++) {
		if (max_bytes && total > max_bytes && !unlink(pc.items[i].path)) {
			total -= pc.items[i].size;
			out->evicted++;
			out->evicted_bytes += pc.items[i].size;
		}
		free(pc.items[i].path);
	}
	free(pc.items);
	out->bytes_left = total;
	return 0;
}
