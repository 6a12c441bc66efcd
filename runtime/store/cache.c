/* cache.c - the on-disk cubin cache.
 *
 * Layout under a root: v1/<2 hex>/<64 hex>.jitk entries, v1/tmp/ for files
 * being written (published by rename), v1/locks/<64 hex>.lock for the
 * per-key flock. An entry is a 128-byte header (magic, format, key,
 * target, sizes, SHA-256 of everything else), the lowered names, the
 * image. Anything that does not verify is a miss.
 *
 * Below the directory the user names, nothing is reached through a
 * symbolic link: every directory is opened with O_NOFOLLOW relative to
 * its parent's descriptor, and files are created, renamed, stamped and
 * removed with the *at calls on those descriptors. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store/cache.h"
#include "store/sign.h"

static const char entry_magic[8] = { 'J', 'I', 'T', 'K', 'C', 'B', 'N', '1' };

#ifdef JITK_TEST_HOOKS
unsigned jitk__test_write_delay_us;
const char *jitk__test_fail_step;
int jitk__test_fail_errno;
long jitk__test_assume_uid = -1;

/* A step of jitk__cache_put fails here when a test asks for it. */
static int fault(const char *step)
{
	if (jitk__test_fail_step && !strcmp(jitk__test_fail_step, step)) {
		errno = jitk__test_fail_errno ? jitk__test_fail_errno : EIO;
		return -1;
	}
	return 0;
}

static void write_delay(void)
{
	if (jitk__test_write_delay_us)
		usleep(jitk__test_write_delay_us);
}
#else
static int fault(const char *step)
{
	(void)step;
	return 0;
}

static void write_delay(void)
{
}
#endif

#define LOCK_WAIT_MS 120000 /* compile anyway after two minutes */
#define LOCK_SAY_MS 1000     /* then say who holds it */
#define HEXLEN (2 * JITK_HASH_SIZE)
#define ENTRY_NAME_MAX (HEXLEN + sizeof(".jitk"))
#define AUX_DIR "packages" /* v1/packages/<64 hex>.pkg: package manifests */
#define PCH_DIR "pch" /* v1/pch/<pid>.<n>/: one compiler's precompiled headers */

struct jitk_cache {
	char *root; /* writable root (.../v1), or NULL */
	char *top;  /* the directory given (root without /v1) */
	uint64_t max_bytes; /* $JITK_CACHE_MAX_BYTES: prune after writes */
	char *layer; /* a read-only layer's root (.../v1), or NULL */
	jitk_logger log;
	jitk_cache_counters n;
	atomic_int small_bound_warned; /* max_bytes < an entry: said once */
};

/* ------------------------------------------------------------ encoding */

/* Header fields (little endian):
 *   0 magic[8]  8 format u32  12 header size u32  16 key[32]
 *  48 target[16]  64 names size u64  72 names count u32  76 flags u32
 *  80 image size u64  88 checksum[16]  104 signature section size u32
 * 108 origin u32  112 zero[16]
 * then the names, the image and the signature section (sign.c). The
 * checksum (XXH3-128, canonical byte order) covers the whole header (with
 * the checksum field itself read as zeros), the names, the image and the
 * signature section; bytes 112..127 must be 0. Format 3 is format 4 with
 * bytes 104..111 zero (no signature, no origin): it is read as such.
 * Format 1 left bytes 88..127 out; format 2 held a SHA-256 in bytes
 * 88..119. */
#define SUM_AT 88
#define SIGS_AT 104
#define FROM_AT 108
#define ZERO_AT 112

int jitk__checksum_hole(uint8_t out[JITK_HASH_SIZE], const uint8_t *head, size_t head_len,
			size_t sum_at, const uint8_t *rest, size_t rest_len)
{
	jitk_hasher *h;
	uint8_t copy[256];

	if (head_len > sizeof(copy) || !(h = jitk__hasher_new()))
		return -1;
	memcpy(copy, head, head_len);
	memset(copy + sum_at, 0, JITK_HASH_SIZE);
	jitk__hasher_update(h, copy, head_len);
	jitk__hasher_update(h, rest, rest_len);
	return jitk__hasher_final(h, out);
}

static int checksum(uint8_t out[JITK_SUM_SIZE], const uint8_t *head,
		    const uint8_t *rest, size_t rest_len)
{
	uint8_t copy[JITK_ENTRY_HEADER];

	memcpy(copy, head, sizeof(copy));
	memset(copy + SUM_AT, 0, JITK_SUM_SIZE);
	return jitk__checksum(out, copy, sizeof(copy), rest, rest_len);
}

/* Bytes 112..127 (format 3: 104..127): zero in every valid entry. */
static int tail_is_zero(const uint8_t *head, uint32_t format)
{
	size_t i;

	for (i = format == 3 ? SIGS_AT : ZERO_AT; i < JITK_ENTRY_HEADER; i++)
		if (head[i])
			return 0;
	return 1;
}

int jitk__entry_encode(uint8_t **out, size_t *len, const jitk_cache_entry *e)
{
	size_t names = 0, i, total, sigs = jitk__sig_section_size(e);
	uint8_t *buf, *p;

	*out = NULL;
	for (i = 0; i < e->nnames; i++)
		names += strlen(e->names[i]) + 1;
	if (names > JITK_ENTRY_MAX_NAMES || e->size > JITK_ENTRY_MAX_IMAGE ||
	    strlen(e->target) >= 16)
		return jitk__error(JITK_EINVAL, "cache entry too large");
	total = JITK_ENTRY_HEADER + names + e->size + sigs;
	buf = calloc(1, total);
	if (!buf)
		return jitk__error(JITK_ENOMEM, "out of memory");
	memcpy(buf, entry_magic, 8);
	jitk__put32(buf + 8, JITK_CACHE_FORMAT);
	jitk__put32(buf + 12, JITK_ENTRY_HEADER);
	memcpy(buf + 16, e->key, JITK_HASH_SIZE);
	memcpy(buf + 48, e->target, strlen(e->target));
	jitk__put64(buf + 64, names);
	jitk__put32(buf + 72, (uint32_t)e->nnames);
	jitk__put32(buf + 76, e->is_ptx ? 1u : 0u);
	jitk__put64(buf + 80, e->size);
	jitk__put32(buf + SIGS_AT, (uint32_t)sigs);
	jitk__put32(buf + FROM_AT, e->from);
	p = buf + JITK_ENTRY_HEADER;
	for (i = 0; i < e->nnames; i++) {
		size_t n = strlen(e->names[i]) + 1;

		memcpy(p, e->names[i], n);
		p += n;
	}
	if (e->size)
		memcpy(p, e->image, e->size);
	jitk__sig_section_put(p + e->size, e);
	if (checksum(buf + SUM_AT, buf, buf + JITK_ENTRY_HEADER, names + e->size + sigs)) {
		free(buf);
		return jitk__error(JITK_ENOMEM, "out of memory (checksum)");
	}
	*out = buf;
	*len = total;
	return 0;
}

int jitk__entry_decode(jitk_cache_entry *out, const uint8_t *buf, size_t len,
		       const char **problem)
{
	uint8_t sum[JITK_SUM_SIZE];
	uint64_t names, image;
	uint32_t count, i, format, sigs = 0, from = 0;
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
	format = jitk__get32(buf + 8);
	if ((format != 3 && format != JITK_CACHE_FORMAT) || jitk__get32(buf + 12) != JITK_ENTRY_HEADER) {
		*problem = "unsupported format version";
		return -1;
	}
	names = jitk__get64(buf + 64);
	count = jitk__get32(buf + 72);
	image = jitk__get64(buf + 80);
	if (format != 3) {
		sigs = jitk__get32(buf + SIGS_AT);
		from = jitk__get32(buf + FROM_AT);
	}
	if (buf[48 + 15] != 0 || (jitk__get32(buf + 76) & ~1u) || !tail_is_zero(buf, format) ||
	    (from & ~(0xffu | JITK_FROM_VERIFIED)) || (from & 0xffu) > JITK_FROM_BUNDLE) {
		*problem = "bad header fields";
		return -1;
	}
	/* Sizes are checked against limits and the file before any use. */
	if (names > JITK_ENTRY_MAX_NAMES || image > JITK_ENTRY_MAX_IMAGE ||
	    count > names || sigs > JITK_SIG_SECTION_MAX) {
		*problem = "sizes out of range";
		return -1;
	}
	if (len != JITK_ENTRY_HEADER + names + image + sigs) {
		*problem = len < JITK_ENTRY_HEADER + names + image + sigs ? "truncated"
									  : "trailing bytes";
		return -1;
	}
	if (checksum(sum, buf, buf + JITK_ENTRY_HEADER, (size_t)(names + image + sigs)) ||
	    memcmp(sum, buf + SUM_AT, JITK_SUM_SIZE)) {
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
	if ((*problem = jitk__sig_section_get(out, end + image, sigs))) {
		jitk__cache_entry_free(out);
		return -1;
	}
	memcpy(out->key, buf + 16, JITK_HASH_SIZE);
	memcpy(out->target, buf + 48, 16);
	out->target[15] = '\0';
	out->is_ptx = (int)(jitk__get32(buf + 76) & 1u);
	if (image)
		memcpy(out->image, end, (size_t)image);
	out->size = (size_t)image;
	out->format = format;
	out->from = from;
	return 0;
}

const char *jitk__entry_mismatch(const jitk_cache_entry *e, const uint8_t key[JITK_HASH_SIZE],
				 const char *target)
{
	if (memcmp(e->key, key, JITK_HASH_SIZE))
		return "key mismatch";
	if (strcmp(e->target, target))
		return "target mismatch";
	return NULL;
}

const char *jitk__entry_kind_problem(const jitk_cache_entry *e)
{
	jitk_arch a;

	if (jitk__arch_parse(&a, e->target))
		return "the target it names is not an architecture";
	/* the kernel's name, and its parameter builder's (launch.builder) */
	if (e->nnames < 1 || e->nnames > 2)
		return "it does not hold one kernel name (or a kernel's and its builder's)";
	return jitk__image_problem(e->image, e->size, e->is_ptx, a, (const char *const *)e->names,
				   e->nnames);
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
#ifdef JITK_TEST_HOOKS
	if (jitk__test_assume_uid >= 0)
		return (unsigned)jitk__test_assume_uid;
#endif
	return (unsigned)geteuid();
}

/* Why the directory st (path, for the message) is not one we may load
 * code from or write into, or NULL: it is ours (or, with root_ok, root's,
 * as read-only layers may be) and nobody else's to write (world-writable
 * only with the sticky bit). */
static const char *st_untrusted(const struct stat *st, const char *path, int root_ok,
				char *why, size_t n)
{
	unsigned uid = jitk__trusted_uid();

	if (!S_ISDIR(st->st_mode)) {
		snprintf(why, n, "%s is %s, not a directory", path,
			 jitk__file_kind((unsigned)st->st_mode));
		return why;
	}
	if (st->st_uid != uid && !(root_ok && st->st_uid == 0)) {
		snprintf(why, n, "%s is owned by uid %u, not by this user (uid %u)", path,
			 (unsigned)st->st_uid, uid);
		return why;
	}
	if ((st->st_mode & S_IWOTH) && !(st->st_mode & S_ISVTX)) {
		snprintf(why, n, "%s is world-writable without the sticky bit", path);
		return why;
	}
	return NULL;
}

/* The same for a path that may not exist yet (then NULL: we create it). A
 * symbolic link is followed only where the user named the directory
 * (may_link), and only when the link is ours or root's; below that jitk
 * makes real directories, and a link there was planted. */
static const char *dir_untrusted(const char *path, int may_link, int root_ok, char *why,
				 size_t n)
{
	struct stat st;
	unsigned uid = jitk__trusted_uid();

	if (lstat(path, &st))
		return NULL;
	if (S_ISLNK(st.st_mode)) {
		if (!may_link) {
			snprintf(why, n, "%s is a symbolic link", path);
			return why;
		}
		if (st.st_uid != uid && st.st_uid != 0) {
			snprintf(why, n, "%s is a symbolic link owned by uid %u, not by this user (uid %u)",
				 path, (unsigned)st.st_uid, uid);
			return why;
		}
		if (stat(path, &st))
			return NULL;
	}
	return st_untrusted(&st, path, root_ok, why, n);
}

/* The writable cache's directories: checked before they are created and
 * again after (what did not exist before proves nothing). */
static const char *cache_untrusted(const char *dir, const char *root, char *why, size_t n)
{
	static const char *const subs[] = { "tmp", "locks" };
	const char *bad = dir_untrusted(dir, 1, 0, why, n);
	size_t i;

	if (!bad)
		bad = dir_untrusted(root, 0, 0, why, n);
	for (i = 0; !bad && i < JITK_ARRAY_SIZE(subs); i++) {
		char *p = jitk__asprintf("%s/%s", root, subs[i]);

		bad = p ? dir_untrusted(p, 0, 0, why, n) : NULL;
		free(p);
	}
	return bad;
}

/* -------------------------------------------------------------- outputs */

/* What an existing output must be: a regular file of this user. */
static int output_refused(const char *what, const char *path, const struct stat *st)
{
	if (!S_ISREG(st->st_mode))
		return jitk__error(JITK_EIO, "%s %s is %s, not a regular file: not writing it", what,
				   path, jitk__file_kind((unsigned)st->st_mode));
	if (st->st_uid != jitk__trusted_uid())
		return jitk__error(JITK_EIO, "%s %s is owned by uid %ld, not by this user (uid %ld): "
				   "not writing it", what, path, (long)st->st_uid,
				   (long)jitk__trusted_uid());
	return 0;
}

int jitk__output_check(const char *what, const char *path)
{
	struct stat st;

	if (lstat(path, &st))
		return errno == ENOENT ? 0
				       : jitk__error(JITK_EIO, "cannot stat %s %s: %s", what, path,
						     strerror(errno));
	return output_refused(what, path, &st);
}

int jitk__output_open(int *out, const char *what, const char *path, int flags)
{
	struct stat st;
	int fd, rc, e;

	*out = -1;
	/* O_NOFOLLOW: a link is refused (ELOOP); O_NONBLOCK: a FIFO without
	 * a reader fails at once (ENXIO) instead of waiting for one, a device
	 * opens and is refused below. Nothing is truncated before the checks. */
	fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC |
				(flags & O_APPEND),
		  0644);
	if (fd < 0) {
		e = errno;
		if ((e == ELOOP || e == ENXIO) && !lstat(path, &st) && output_refused(what, path, &st))
			return JITK_EIO;
		return jitk__error(JITK_EIO, "cannot open %s %s: %s", what, path, strerror(e));
	}
	if (fstat(fd, &st))
		rc = jitk__error(JITK_EIO, "cannot stat %s %s: %s", what, path, strerror(errno));
	else if (!(rc = output_refused(what, path, &st)) &&
		 (fcntl(fd, F_SETFL, flags & O_APPEND) || ((flags & O_TRUNC) && ftruncate(fd, 0))))
		rc = jitk__error(JITK_EIO, "cannot write %s %s: %s", what, path, strerror(errno));
	if (rc) {
		close(fd);
		return rc;
	}
	*out = fd;
	return 0;
}

int jitk__temp_create(char **out, int *fd_out, const char *path)
{
	char *name = jitk__asprintf("%s.tmp.XXXXXX", path);
	int fd;

	*out = NULL;
	*fd_out = -1;
	if (!name)
		return jitk__error(JITK_ENOMEM, "out of memory");
	/* mkostemp: O_CREAT | O_EXCL under a fresh random name, another one
	 * while a name is taken; 0600 until the file is whole. */
	fd = mkostemp(name, O_CLOEXEC);
	if (fd < 0) {
		int e = errno;

		free(name);
		return jitk__error(JITK_EIO, "cannot create a temporary file next to %s: %s", path,
				   strerror(e));
	}
	*out = name;
	*fd_out = fd;
	return 0;
}

void jitk__temp_remove(const char *name, int fd)
{
	struct stat mine, now;

	/* only the file this process made: the name may have been taken
	 * over since (a writer in the directory renamed over it) */
	if (name && fd >= 0 && !fstat(fd, &mine) && !lstat(name, &now) &&
	    mine.st_dev == now.st_dev && mine.st_ino == now.st_ino)
		(void)unlink(name);
}

/* ------------------------------------------------------ names and dirs */

static int open_dir(const char *path)
{
	return open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

static int open_subdir(int dfd, const char *name)
{
	return openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

static void close_fd(int fd)
{
	if (fd >= 0)
		close(fd);
}

static int is_dot(const char *n)
{
	return n[0] == '.' && (!n[1] || (n[1] == '.' && !n[2]));
}

static int is_hex(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}

static int is_digits(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return 0;
	return n > 0;
}

static int is_key_dot(const char *name, const char *suffix)
{
	return strlen(name) == HEXLEN + strlen(suffix) && is_hex(name, HEXLEN) &&
	       !strcmp(name + HEXLEN, suffix);
}

/* <64 hex>.jitk; in shard (when given), the directory its first two
 * digits name. */
static int is_entry_name(const char *name, const char *shard)
{
	return is_key_dot(name, ".jitk") && (!shard || !strncmp(name, shard, 2));
}

/* <64 hex>.<pid>.<n>: what jitk__cache_put writes in tmp/. */
static int is_temp_name(const char *name)
{
	const char *a, *b;

	if (strlen(name) < HEXLEN + 4 || !is_hex(name, HEXLEN) || name[HEXLEN] != '.')
		return 0;
	a = name + HEXLEN + 1;
	b = strchr(a, '.');
	return b && is_digits(a, (size_t)(b - a)) && is_digits(b + 1, strlen(b + 1));
}

static int is_lock_name(const char *name)
{
	return is_key_dot(name, ".lock");
}

/* <pid>.<n>: a compiler's directory of precompiled headers in pch/. */
static int is_pch_name(const char *name)
{
	const char *dot = strchr(name, '.');

	return dot && is_digits(name, (size_t)(dot - name)) && is_digits(dot + 1, strlen(dot + 1));
}

/* <64 hex>.pkg: a header package's manifest in packages/ (jitk__cache_aux_*). */
static int is_aux_name(const char *name)
{
	return is_key_dot(name, ".pkg");
}

static int is_jitk_name(const char *name)
{
	return is_entry_name(name, NULL) || is_temp_name(name) || is_lock_name(name) ||
	       is_aux_name(name);
}

/* A directory at a name where jitk keeps a file is jitk's debris when it
 * is empty or holds only files (no directories) named like jitk's;
 * anything else in it is someone's data. With remove, the files go (the
 * caller has checked first) and -1 means one could not. */
static int debris_pass(int dfd, const char *name, int remove)
{
	int fd = open_subdir(dfd, name), ok = 1;
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;

	if (!d) {
		close_fd(fd);
		return 0;
	}
	while (ok && (e = readdir(d))) {
		struct stat st;

		if (is_dot(e->d_name))
			continue;
		if (!is_jitk_name(e->d_name) ||
		    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) || S_ISDIR(st.st_mode))
			ok = 0;
		else if (remove && unlinkat(dirfd(d), e->d_name, 0) && errno != ENOENT)
			ok = 0;
	}
	closedir(d);
	return ok;
}

static int is_debris(int dfd, const char *name)
{
	return debris_pass(dfd, name, 0);
}

/* 0 when the debris directory is gone, -1 (errno) when it is not debris
 * or could not be removed. */
static int remove_debris(int dfd, const char *name)
{
	if (!is_debris(dfd, name) || !debris_pass(dfd, name, 1)) {
		errno = ENOTEMPTY;
		return -1;
	}
	return unlinkat(dfd, name, AT_REMOVEDIR);
}

/* Clear what is in the way of a file jitk keeps at name in dfd (path: for
 * the log): debris, or a link, FIFO or device (unlinking one loses no
 * data), with one warning. 0 when the name is free or a regular file; -1
 * with *why when what is there is not ours to remove. */
static int clear_in_way(int dfd, const char *name, const char *path, const jitk_logger *log,
			const char **why)
{
	struct stat st;
	int dir;

	*why = NULL;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) || S_ISREG(st.st_mode))
		return 0;
	dir = S_ISDIR(st.st_mode);
	if (dir ? remove_debris(dfd, name) : unlinkat(dfd, name, 0)) {
		*why = dir ? "a directory holding other files is in the way (remove it by hand)"
			   : "something that cannot be removed is in the way";
		return -1;
	}
	jitk__log(log, JITK_LOG_WARN, "removed %s: %s where a cache file belongs", path,
		  dir ? "a directory" : S_ISLNK(st.st_mode) ? "a symbolic link" : "a special file");
	return 0;
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
	int rootfd = open_dir(root), fd = rootfd >= 0 ? open_subdir(rootfd, "tmp") : -1;
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;
	time_t now = time(NULL);

	if (!d)
		close_fd(fd);
	while (d && (e = readdir(d))) {
		struct stat st;

		if (is_temp_name(e->d_name) &&
		    !fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) && S_ISREG(st.st_mode) &&
		    st.st_mtime + JITK_TEMP_MAX_AGE_S < now)
			(void)unlinkat(dirfd(d), e->d_name, 0);
	}
	if (d)
		closedir(d);
	close_fd(rootfd);
}

/* Why a read-only layer (the directory holding v1/) cannot serve, or NULL. */
static const char *layer_unusable(const char *top, char *why, size_t n)
{
	struct stat st;
	char *v1;
	int e;

	if (stat(top, &st)) {
		snprintf(why, n, "%s", strerror(errno));
		return why;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(why, n, "%s, not a directory or a jitk bundle",
			 jitk__file_kind((unsigned)st.st_mode));
		return why;
	}
	v1 = jitk__asprintf("%s/%s", top, JITK_CACHE_SUBDIR);
	e = v1 ? lstat(v1, &st) : -1;
	free(v1);
	if (e)
		return "it holds no cache (no " JITK_CACHE_SUBDIR " directory)";
	if (!S_ISDIR(st.st_mode))
		return "its " JITK_CACHE_SUBDIR " is not a directory (a symbolic link?)";
	return NULL;
}

/* Why the writable cache at dir (root: dir/v1) cannot be used, in why,
 * or NULL when it can (its directories made). */
static const char *root_unusable(const char *dir, const char *root, char *why, size_t n)
{
	const char *bad = cache_untrusted(dir, root, why, n);

	if (!bad && make_dirs(root)) {
		snprintf(why, n, "cannot make or write %s: %s", root, strerror(errno));
		return why;
	}
	if (bad || (bad = cache_untrusted(dir, root, why, n)))
		return bad;
	return NULL;
}

int jitk__cache_writable(const char *dir)
{
	char why[512], *root;
	const char *bad;

	if (!dir || !*dir)
		return jitk__error(JITK_EINVAL, "no cache directory given");
	if (!(root = jitk__asprintf("%s/%s", dir, JITK_CACHE_SUBDIR)))
		return jitk__error(JITK_ENOMEM, "out of memory");
	bad = root_unusable(dir, root, why, sizeof(why));
	free(root);
	return bad ? jitk__error(JITK_EIO, "%s", bad) : JITK_OK;
}

/* Remove what dfd's entry name holds (files, and directories of files,
 * two levels: what NVRTC writes into a PCH directory), then the entry. */
static void remove_tree_at(int dfd, const char *name, int depth)
{
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;

	if (!d)
		close_fd(fd);
	while (d && (e = readdir(d))) {
		struct stat st;

		if (is_dot(e->d_name) || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW))
			continue;
		if (S_ISDIR(st.st_mode) && depth > 0)
			remove_tree_at(dirfd(d), e->d_name, depth - 1);
		else if (!S_ISDIR(st.st_mode))
			(void)unlinkat(dirfd(d), e->d_name, 0);
	}
	if (d)
		closedir(d);
	(void)unlinkat(dfd, name, AT_REMOVEDIR);
}

/* PCH directories of processes that are gone (killed before they could
 * remove theirs), or older than a day (a pid used again). */
static void sweep_pch(const char *root)
{
	int rootfd = open_dir(root), fd = rootfd >= 0 ? open_subdir(rootfd, PCH_DIR) : -1;
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;
	time_t now = time(NULL);

	if (!d)
		close_fd(fd);
	while (d && (e = readdir(d))) {
		struct stat st;
		long pid = atol(e->d_name);

		if (!is_pch_name(e->d_name) || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
		    !S_ISDIR(st.st_mode) || st.st_uid != jitk__trusted_uid())
			continue;
		if ((pid > 0 && kill((pid_t)pid, 0) && errno == ESRCH) || st.st_mtime + 86400 < now)
			remove_tree_at(dirfd(d), e->d_name, 1);
	}
	if (d)
		closedir(d);
	close_fd(rootfd);
}

int jitk__cache_pch_dir(jitk_cache *c, char **out)
{
	static atomic_uint seq;
	char name[48];
	struct stat st;
	int rootfd, fd = -1, rc = -1;

	*out = NULL;
	if (!c || !c->root)
		return -1;
	snprintf(name, sizeof(name), "%ld.%u", (long)getpid(), atomic_fetch_add(&seq, 1));
	if ((rootfd = open_dir(c->root)) < 0)
		return -1;
	if ((mkdirat(rootfd, PCH_DIR, 0755) && errno != EEXIST) ||
	    (fd = open_subdir(rootfd, PCH_DIR)) < 0 || fstat(fd, &st) ||
	    st.st_uid != jitk__trusted_uid() || (st.st_mode & (S_IWGRP | S_IWOTH)) ||
	    mkdirat(fd, name, 0700))
		goto done;
	if ((*out = jitk__asprintf("%s/%s/%s", c->root, PCH_DIR, name)))
		rc = 0;
done:
	close_fd(fd);
	close_fd(rootfd);
	return rc;
}

void jitk__cache_pch_sweep(jitk_cache *c)
{
	if (c && c->root)
		sweep_pch(c->root);
}

void jitk__cache_pch_remove(jitk_cache *c, const char *path)
{
	const char *name = path ? strrchr(path, '/') : NULL;
	int rootfd, fd;

	if (!c || !c->root || !name || !is_pch_name(name + 1))
		return;
	if ((rootfd = open_dir(c->root)) < 0)
		return;
	if ((fd = open_subdir(rootfd, PCH_DIR)) >= 0) {
		remove_tree_at(fd, name + 1, 1);
		close(fd);
	}
	close(rootfd);
}

/* The cache directory policy, in one place: the compiler's default, the
 * bundles' pack and unpack and the CLI's cache commands. */
int jitk_cache_default_dir(char **out)
{
	const char *v;

	if (!out)
		return jitk__error(JITK_EINVAL, "jitk_cache_default_dir: out is NULL");
	if ((v = jitk__env("JITK_CACHE_DIR")))
		*out = jitk__strdup(v);
	else if ((v = jitk__env("XDG_CACHE_HOME")))
		*out = jitk__asprintf("%s/jitk", v);
	else if ((v = jitk__env("HOME")))
		*out = jitk__asprintf("%s/.cache/jitk", v);
	else
		return jitk__error(JITK_ENOENT, "no cache directory: none of JITK_CACHE_DIR, "
				   "XDG_CACHE_HOME and HOME is set");
	return *out ? JITK_OK : jitk__error(JITK_ENOMEM, "out of memory");
}

int jitk__cache_open(jitk_cache **out, const char *dir, const jitk_logger *log)
{
	jitk_cache *c = calloc(1, sizeof(*c));
	const char *mb = jitk__env("JITK_CACHE_MAX_BYTES");
	char why[512];

	*out = NULL;
	if (!c)
		return jitk__error(JITK_ENOMEM, "out of memory");
	if (log)
		c->log = *log;
	if (mb && (jitk__parse_size(&c->max_bytes, mb) || !c->max_bytes)) {
		jitk__log(&c->log, JITK_LOG_WARN,
			  "JITK_CACHE_MAX_BYTES='%.64s' is not a size (" JITK_SIZE_SYNTAX
			  "); the cache is not bounded",
			  mb);
		c->max_bytes = 0;
	}
	if (dir && *dir) {
		const char *bad;

		c->root = jitk__asprintf("%s/%s", dir, JITK_CACHE_SUBDIR);
		if (!c->root) {
			free(c);
			return jitk__error(JITK_ENOMEM, "out of memory");
		}
		if ((bad = root_unusable(dir, c->root, why, sizeof(why)))) {
			jitk__log(&c->log, JITK_LOG_WARN,
				  "not using cache directory %s: %s; compiling in memory", dir, bad);
			free(c->root);
			c->root = NULL;
		} else if (!(c->top = jitk__strdup(dir))) {
			jitk__cache_close(c);
			return jitk__error(JITK_ENOMEM, "out of memory");
		} else {
			sweep_temp(c->root);
			sweep_pch(c->root);
		}
	}
	*out = c;
	return 0;
}

int jitk__cache_open_layer(jitk_cache **out, const char *top, const jitk_logger *log, char *why,
			   size_t n)
{
	const char *bad = layer_unusable(top, why, n);
	jitk_cache *c;

	*out = NULL;
	if (bad) {
		if (bad != why)
			snprintf(why, n, "%s", bad);
		return -1;
	}
	if (!(c = calloc(1, sizeof(*c))) || !(c->layer = jitk__asprintf("%s/%s", top, JITK_CACHE_SUBDIR))) {
		free(c);
		snprintf(why, n, "out of memory");
		return JITK_ENOMEM;
	}
	if (log)
		c->log = *log;
	*out = c;
	return 0;
}

void jitk__cache_close(jitk_cache *c)
{
	if (!c)
		return;
	free(c->layer);
	free(c->root);
	free(c->top);
	free(c);
}

const char *jitk__cache_root(const jitk_cache *c)
{
	return c ? c->root : NULL;
}

const char *jitk__cache_top(const jitk_cache *c)
{
	return c && c->root ? c->top : NULL;
}

uint64_t jitk__cache_max_bytes(const jitk_cache *c)
{
	return c->max_bytes;
}

const jitk_cache_counters *jitk__cache_counters(const jitk_cache *c)
{
	return &c->n;
}

static void entry_names(char hex[HEXLEN + 1], char shard[3], char name[ENTRY_NAME_MAX],
			const uint8_t key[JITK_HASH_SIZE])
{
	jitk__hex(hex, key, JITK_HASH_SIZE);
	snprintf(shard, 3, "%.2s", hex);
	snprintf(name, ENTRY_NAME_MAX, "%s.jitk", hex);
}

/* Up to n bytes of fd into buf (EINTR retried): how many were read. */
static size_t read_full(int fd, void *buf, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = read(fd, (char *)buf + got, n - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	return got;
}

/* Read and verify the entry name in the directory dfd. *seen: the file
 * that was examined (device and inode, for the caller's unlink check). */
static int entry_read_in(jitk_cache_entry *out, int dfd, const char *name, int allow_root,
			 const char **problem, struct stat *seen)
{
	struct stat st;
	uint8_t *buf = NULL;
	size_t got = 0;
	int fd, rc = -1;

	memset(out, 0, sizeof(*out));
	*problem = NULL;
	/* Examined before it is opened: a link is never followed, and a FIFO
	 * or a device is never opened (opening some devices does things). */
	if (fstatat(dfd, name, seen, AT_SYMLINK_NOFOLLOW)) {
		*problem = errno == ENOENT ? NULL : "cannot be examined";
		return -1;
	}
	if (!S_ISREG(seen->st_mode)) {
		*problem = S_ISLNK(seen->st_mode)  ? "is a symbolic link"
			   : S_ISDIR(seen->st_mode) ? "is a directory"
						    : "not a regular file";
		return -1;
	}
	/* O_NOFOLLOW | O_NONBLOCK: what was swapped in since is refused, not
	 * followed or waited on. */
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		*problem = errno == ENOENT ? NULL : errno == ELOOP ? "is a symbolic link"
							: "cannot be opened";
		return -1;
	}
	if (fstat(fd, &st)) {
		*problem = "cannot be examined";
		goto done;
	}
	*seen = st;
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
	if ((uint64_t)st.st_size > JITK_ENTRY_MAX_SIZE) {
		*problem = "too large";
		goto done;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		*problem = "out of memory";
		goto done;
	}
	got = read_full(fd, buf, (size_t)st.st_size);
	rc = jitk__entry_decode(out, buf, got, problem);
done:
	free(buf);
	close(fd);
	return rc;
}

int jitk__entry_read(jitk_cache_entry *out, const char *path, int allow_root,
		     const char **problem)
{
	const char *slash = strrchr(path, '/');
	char *dir = slash ? jitk__strndup(path, slash == path ? 1 : (size_t)(slash - path)) : NULL;
	int dfd = slash ? -1 : AT_FDCWD, rc = -1;
	struct stat st;

	memset(out, 0, sizeof(*out));
	*problem = NULL;
	if (slash && (!dir || (dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0))
		*problem = dir && errno == ENOENT ? NULL : "cannot be opened";
	else
		rc = entry_read_in(out, dfd, slash ? slash + 1 : path, allow_root, problem, &st);
	if (dfd >= 0)
		close(dfd);
	free(dir);
	return rc;
}

static int lookup_in(jitk_cache *c, const char *root, int layer,
		     const uint8_t key[JITK_HASH_SIZE], const char *target,
		     jitk_cache_entry *out, int *rejected)
{
	char hex[HEXLEN + 1], shard[3], name[ENTRY_NAME_MAX];
	const char *problem = NULL;
	struct stat seen, now;
	int rootfd, dfd = -1, rc = -1;

	memset(out, 0, sizeof(*out));
	memset(&seen, 0, sizeof(seen));
	entry_names(hex, shard, name, key);
	rootfd = open_dir(root);
	if (rootfd >= 0 && (dfd = open_subdir(rootfd, shard)) < 0 && errno != ENOENT && layer)
		problem = "its directory is not a directory (a symbolic link?)";
	/* In the writable cache, the write that follows a miss replaces a
	 * link at the shard and clears a directory at the entry, or says why
	 * it cannot: one message, not one here and one there. */
	if (dfd >= 0)
		rc = entry_read_in(out, dfd, name, layer, &problem, &seen);
	if (!rc && (problem = jitk__entry_mismatch(out, key, target))) {
		jitk__cache_entry_free(out);
		rc = -1;
	}
	if (rc && problem && !layer && S_ISDIR(seen.st_mode))
		problem = NULL;
	if (rc && problem) {
		atomic_fetch_add(&c->n.rejects, 1);
		*rejected = 1;
		jitk__log(&c->log, JITK_LOG_WARN, "cache entry %s/%s/%s rejected: %s", root, shard,
			  name, problem);
		/* A bad entry in our own cache is garbage: remove it so that it
		 * is reported once and replaced - but only the file we read: a
		 * writer may have renamed a good entry over the name since.
		 * Layers are read-only. */
		if (!layer && dfd >= 0 && !fstatat(dfd, name, &now, AT_SYMLINK_NOFOLLOW) &&
		    now.st_dev == seen.st_dev && now.st_ino == seen.st_ino)
			(void)unlinkat(dfd, name, 0);
	}
	/* The recency stamp of LRU pruning: the entry's mtime, set to now on
	 * every hit in the writable cache (layers are read-only). */
	if (!rc && !layer)
		(void)utimensat(dfd, name, NULL, AT_SYMLINK_NOFOLLOW);
	close_fd(dfd);
	close_fd(rootfd);
	return rc;
}

int jitk__cache_get(jitk_cache *c, const uint8_t key[JITK_HASH_SIZE], const char *target,
		    jitk_cache_entry *out, int *rejected)
{
	const char *root = c->layer ? c->layer : c->root;
	int bad = 0;

	if (rejected)
		*rejected = 0;
	if (root && !lookup_in(c, root, c->layer != NULL, key, target, out, &bad)) {
		atomic_fetch_add(&c->n.hits, 1);
		return JITK_OK;
	}
	atomic_fetch_add(&c->n.misses, 1);
	if (rejected)
		*rejected = bad;
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

/* The shard directory of an entry, made when missing. A symbolic link at
 * its name (planted: jitk makes real directories) is replaced; anything
 * else there is refused. */
static int shard_open(jitk_cache *c, int rootfd, const char *shard)
{
	struct stat st;
	int fd;

	if (mkdirat(rootfd, shard, 0755) && errno != EEXIST)
		return -1;
	fd = open_subdir(rootfd, shard);
	if (fd >= 0 || fstatat(rootfd, shard, &st, AT_SYMLINK_NOFOLLOW) || !S_ISLNK(st.st_mode)) {
		if (fd < 0)
			errno = ENOTDIR;
		return fd;
	}
	if (unlinkat(rootfd, shard, 0) || (mkdirat(rootfd, shard, 0755) && errno != EEXIST))
		return -1;
	jitk__log(&c->log, JITK_LOG_WARN,
		  "removed %s/%s: a symbolic link where a cache directory belongs", c->root, shard);
	return open_subdir(rootfd, shard);
}

int jitk__cache_put(jitk_cache *c, const jitk_cache_entry *e)
{
	char hex[HEXLEN + 1], shard[3], final[ENTRY_NAME_MAX], tmp[HEXLEN + 48];
	uint8_t *bytes = NULL;
	size_t len = 0;
	const char *step = "encode", *why = NULL;
	int rootfd = -1, tmpfd = -1, dfd = -1, fd = -1, rc = 0, made = 0;
	static atomic_uint seq;

	if (!c->root)
		return JITK_OK;
	entry_names(hex, shard, final, e->key);
	snprintf(tmp, sizeof(tmp), "%s.%ld.%u", hex, (long)getpid(), atomic_fetch_add(&seq, 1));
	if ((rc = jitk__entry_encode(&bytes, &len, e))) {
		errno = rc == JITK_ENOMEM ? ENOMEM : EFBIG;
		goto fail;
	}
	step = "create";
	if ((rootfd = open_dir(c->root)) < 0 || (tmpfd = open_subdir(rootfd, "tmp")) < 0)
		goto fail;
	fd = fault(step) ? -1
			 : openat(tmpfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		goto fail;
	made = 1;
	step = "write";
	if (write_all(fd, bytes, len / 2))
		goto fail;
	write_delay();
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
	if ((dfd = shard_open(c, rootfd, shard)) < 0)
		goto fail;
	step = "rename";
	if (fault(step))
		goto fail;
	if (renameat(tmpfd, tmp, dfd, final)) {
		char *path;

		/* A directory at the entry's name: cleared when it is debris. */
		if (errno != EISDIR && errno != ENOTEMPTY && errno != EEXIST)
			goto fail;
		path = jitk__asprintf("%s/%s/%s", c->root, shard, final);
		rc = clear_in_way(dfd, final, path ? path : final, &c->log, &why);
		free(path);
		if (rc || renameat(tmpfd, tmp, dfd, final))
			goto fail;
	}
	made = 0;
	(void)fsync(dfd);
	atomic_fetch_add(&c->n.writes, 1);
	rc = JITK_OK;
	if (c->max_bytes && c->top) {
		jitk_prune_result pr;

		/* the prune below takes the entry just written at once */
		if (len > c->max_bytes && !atomic_exchange(&c->small_bound_warned, 1))
			jitk__log(&c->log, JITK_LOG_WARN,
				  "JITK_CACHE_MAX_BYTES=%llu bytes is smaller than one cache entry "
				  "(%zu bytes): every entry is evicted as soon as it is written",
				  (unsigned long long)c->max_bytes, len);

		(void)jitk__cache_prune(&pr, c->top, c->max_bytes, JITK_TEMP_MAX_AGE_S, 0);
	}
	goto done;
fail:
	rc = errno;
	if (fd >= 0)
		close(fd);
	if (made)
		(void)unlinkat(tmpfd, tmp, 0);
	atomic_fetch_add(&c->n.write_failures, 1);
	jitk__log(&c->log, JITK_LOG_WARN,
		  "cannot write cache entry %s/%s/%s (%s: %s); using it from memory", c->root, shard,
		  final, step, why ? why : strerror(rc));
	rc = jitk__error(JITK_EIO, "cache write failed at %s: %s", step, why ? why : strerror(rc));
done:
	free(bytes);
	close_fd(dfd);
	close_fd(tmpfd);
	close_fd(rootfd);
	return rc;
}

/* The holder of a lock writes its pid into the lock file, so that those
 * waiting can say whom they wait for. */
static void say_holder(jitk_cache *c, int fd, const char *hex)
{
	char buf[32];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	long pid = 0;

	if (n > 0) {
		buf[n] = '\0';
		pid = strtol(buf, NULL, 10);
	}
	if (pid > 0)
		jitk__log(&c->log, JITK_LOG_WARN, "waiting for the lock on %s held by pid %ld", hex,
			  pid);
	else
		jitk__log(&c->log, JITK_LOG_WARN, "waiting for the lock on %s (held by another process)",
			  hex);
}

static void write_pid(int fd)
{
	char buf[24];
	int n = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());

	if (pwrite(fd, buf, (size_t)n, 0) == n && ftruncate(fd, n))
		return; /* only a message is at stake */
}

void jitk__cache_lock(jitk_cache *c, const uint8_t key[JITK_HASH_SIZE], int *fd)
{
	char hex[HEXLEN + 1], name[HEXLEN + sizeof(".lock")], *path;
	const char *why = NULL;
	double start;
	int rootfd, dfd = -1, said = 0, err;
	struct stat st;

	*fd = -1;
	if (!c->root)
		return;
	jitk__hex(hex, key, JITK_HASH_SIZE);
	snprintf(name, sizeof(name), "%s.lock", hex);
	path = jitk__asprintf("%s/locks/%s", c->root, name);
	rootfd = open_dir(c->root);
	if (rootfd >= 0)
		dfd = open_subdir(rootfd, "locks");
	if (dfd >= 0 && !clear_in_way(dfd, name, path ? path : name, &c->log, &why))
		*fd = openat(dfd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
	err = errno;
	if (*fd >= 0 && (fstat(*fd, &st) || !S_ISREG(st.st_mode))) {
		close(*fd);
		*fd = -1;
		why = "not a regular file";
	}
	if (*fd < 0) {
		jitk__log(&c->log, JITK_LOG_WARN, "cache lock %s not taken (%s); compiling without it",
			  path ? path : name, why ? why : strerror(err));
		goto done;
	}
	start = jitk__now_ms();
	while (flock(*fd, LOCK_EX | LOCK_NB)) {
		struct timespec ts = { 0, 2000000 }; /* 2 ms */
		double waited;

		err = errno;
		waited = jitk__now_ms() - start;
		if ((err != EWOULDBLOCK && err != EINTR) || waited > LOCK_WAIT_MS) {
			jitk__log(&c->log, JITK_LOG_WARN,
				  "cache lock for %s not taken (%s); compiling without it", hex,
				  err == EWOULDBLOCK ? "timed out" : strerror(err));
			close(*fd);
			*fd = -1;
			goto done;
		}
		if (!said && waited >= LOCK_SAY_MS) {
			said = 1;
			say_holder(c, *fd, hex);
		}
		nanosleep(&ts, NULL);
	}
	write_pid(*fd);
done:
	free(path);
	close_fd(dfd);
	close_fd(rootfd);
}

void jitk__cache_unlock(int fd)
{
	if (fd >= 0)
		close(fd); /* releases the flock */
}

void jitk__cache_evict(jitk_cache *c, const uint8_t key[JITK_HASH_SIZE])
{
	char hex[HEXLEN + 1], shard[3], name[ENTRY_NAME_MAX];
	int rootfd, dfd = -1;

	if (!c->root)
		return;
	entry_names(hex, shard, name, key);
	rootfd = open_dir(c->root);
	if (rootfd >= 0)
		dfd = open_subdir(rootfd, shard);
	if (dfd >= 0 && unlinkat(dfd, name, 0) == 0)
		jitk__log(&c->log, JITK_LOG_INFO, "evicted cache entry %s/%s/%s", c->root, shard, name);
	close_fd(dfd);
	close_fd(rootfd);
}

/* ------------------------------------------------------- auxiliary files */

/* Files of jitk's own beside the entries, named <64 hex>.pkg in
 * v1/packages/: the manifests of header packages (build/packages.c). They
 * are read with the trust checks of entries (no link, a regular file of
 * this user, not writable by others, one link) and written as entries are
 * (a temporary file in tmp/, then a rename), without fsync: a torn one
 * fails its own checksum and is made again. */
int jitk__cache_aux_read(jitk_cache *c, const char *hex, uint8_t **out, size_t *len,
			 size_t max)
{
	char name[HEXLEN + 8];
	struct stat st, seen;
	int rootfd = -1, dfd = -1, fd = -1, rc = JITK_ENOENT;
	size_t got = 0;
	uint8_t *buf = NULL;

	*out = NULL;
	*len = 0;
	if (!c || !c->root || strlen(hex) != HEXLEN || !is_hex(hex, HEXLEN))
		return JITK_ENOENT;
	snprintf(name, sizeof(name), "%s.pkg", hex);
	if ((rootfd = open_dir(c->root)) < 0 || (dfd = open_subdir(rootfd, AUX_DIR)) < 0 ||
	    fstatat(dfd, name, &seen, AT_SYMLINK_NOFOLLOW) || !S_ISREG(seen.st_mode) ||
	    (fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) < 0 ||
	    fstat(fd, &st))
		goto done;
	if (!S_ISREG(st.st_mode) || st.st_uid != jitk__trusted_uid() ||
	    (st.st_mode & (S_IWGRP | S_IWOTH)) || st.st_nlink > 1 || (uint64_t)st.st_size > max)
		goto done;
	if (!(buf = malloc((size_t)st.st_size + 1))) {
		rc = JITK_ENOMEM;
		goto done;
	}
	got = read_full(fd, buf, (size_t)st.st_size);
	buf[got] = 0;
	*out = buf;
	*len = got;
	buf = NULL;
	rc = 0;
done:
	free(buf);
	close_fd(fd);
	close_fd(dfd);
	close_fd(rootfd);
	return rc;
}

int jitk__cache_aux_write(jitk_cache *c, const char *hex, const void *data, size_t len)
{
	char name[HEXLEN + 8], tmp[HEXLEN + 48];
	int rootfd = -1, tmpfd = -1, dfd = -1, fd = -1, rc = -1;
	static atomic_uint seq;

	if (!c || !c->root || strlen(hex) != HEXLEN || !is_hex(hex, HEXLEN))
		return -1;
	snprintf(name, sizeof(name), "%s.pkg", hex);
	snprintf(tmp, sizeof(tmp), "%s.%ld.%u", hex, (long)getpid(), atomic_fetch_add(&seq, 1));
	if ((rootfd = open_dir(c->root)) < 0 || (tmpfd = open_subdir(rootfd, "tmp")) < 0)
		goto done;
	if ((mkdirat(rootfd, AUX_DIR, 0755) && errno != EEXIST) ||
	    (dfd = open_subdir(rootfd, AUX_DIR)) < 0)
		goto done;
	fd = openat(tmpfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		goto done;
	if (write_all(fd, data, len) || fchmod(fd, 0644) || close(fd)) {
		fd = -1;
		(void)unlinkat(tmpfd, tmp, 0);
		goto done;
	}
	fd = -1;
	if (renameat(tmpfd, tmp, dfd, name)) {
		(void)unlinkat(tmpfd, tmp, 0);
		goto done;
	}
	rc = 0;
done:
	close_fd(fd);
	close_fd(dfd);
	close_fd(tmpfd);
	close_fd(rootfd);
	return rc;
}

/* -------------------------------------------------------------- admin */

/* What the walk finds: an entry, temporary or lock file (a regular file of
 * the scheme of its directory), a bad entry (a non-regular file or debris
 * at such a name, or one that fails verification), or something foreign. */
enum { ITEM_ENTRY, ITEM_TEMP, ITEM_LOCK, ITEM_BAD, ITEM_FOREIGN, ITEM_AUX, ITEM_PCH };

typedef struct {
	int kind;
	int dfd;          /* the directory that holds it */
	const char *dir;  /* that directory's name in v1 (NULL: v1) */
	const char *name;
	const char *path; /* for messages */
	const char *why;  /* ITEM_BAD and ITEM_FOREIGN */
	struct stat st;   /* as found, not followed */
} cache_item;

typedef int (*item_fn)(void *ctx, const cache_item *it);

/* Why root/v1 (path v1) is no cache: 0, or the status (error set). */
static int admin_missing(const char *root, const char *v1)
{
	struct stat st;

	if (stat(root, &st))
		return errno == ENOENT || errno == ENOTDIR
			       ? jitk__error(JITK_ENOENT, "no cache at %s", root)
			       : jitk__error(JITK_EIO, "%s: %s", root, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return jitk__error(JITK_ENOENT, "no cache at %s (not a directory)", root);
	if (lstat(v1, &st))
		return jitk__error(JITK_ENOENT, "no cache at %s (no %s directory)", root,
				   JITK_CACHE_SUBDIR);
	if (!S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode))
		return jitk__error(JITK_ENOENT, "no cache at %s (%s is not a directory)", root, v1);
	return 0;
}

/* Open root/v1 for administration, with the refusals cache.h lists. */
static int admin_open(const char *root, int root_ok, int *v1fd, char **v1path)
{
	char why[512];
	const char *bad;
	struct stat st;
	char *v1 = jitk__asprintf("%s/%s", root, JITK_CACHE_SUBDIR);
	int fd = -1, rc;

	*v1fd = -1;
	*v1path = NULL;
	if (!v1)
		return jitk__error(JITK_ENOMEM, "out of memory");
	if ((rc = admin_missing(root, v1)))
		goto done;
	/* The checks of lookups; v1/ is opened without following a link. */
	bad = dir_untrusted(root, 1, root_ok, why, sizeof(why));
	if (!bad)
		bad = dir_untrusted(v1, 0, root_ok, why, sizeof(why));
	if (!bad && ((fd = open_dir(v1)) < 0 || fstat(fd, &st))) {
		rc = jitk__error(JITK_EIO, "%s: %s", v1, strerror(errno));
		goto done;
	}
	if (!bad)
		bad = st_untrusted(&st, v1, root_ok, why, sizeof(why));
	if (bad) {
		rc = jitk__error(JITK_EIO, "refusing to use the cache at %s: %s", root, bad);
		goto done;
	}
	*v1fd = fd;
	*v1path = v1;
	return 0;
done:
	close_fd(fd);
	free(v1);
	return rc;
}

/* it is in a directory holding kind (entries, temporary or lock files). */
static void classify(cache_item *it, int kind)
{
	int named = kind == ITEM_ENTRY  ? is_entry_name(it->name, it->dir)
		    : kind == ITEM_TEMP ? is_temp_name(it->name)
		    : kind == ITEM_AUX	? is_aux_name(it->name)
		    : kind == ITEM_PCH	? is_pch_name(it->name) && S_ISDIR(it->st.st_mode)
					: is_lock_name(it->name);

	it->kind = kind;
	it->why = NULL;
	if (!named) {
		it->kind = ITEM_FOREIGN;
		it->why = "not a cache file";
	} else if (kind == ITEM_PCH) {
		/* a compiler's precompiled headers: its own to remove */
	} else if (S_ISDIR(it->st.st_mode)) {
		it->kind = is_debris(it->dfd, it->name) ? ITEM_BAD : ITEM_FOREIGN;
		it->why = it->kind == ITEM_BAD ? "is a directory" : "a directory holding other files";
	} else if (!S_ISREG(it->st.st_mode)) {
		it->kind = ITEM_BAD;
		it->why = S_ISLNK(it->st.st_mode) ? "is a symbolic link" : "not a regular file";
	}
}

static int walk_dir(int dfd, const char *dname, const char *dpath, int kind, int root_ok,
		    item_fn fn, void *ctx);

/* A name in v1: tmp/, locks/ and the shards are walked when they are real
 * directories that pass the trust checks; a symbolic link at one of those
 * names is bad (never followed); everything else is foreign. */
static int walk_v1_item(cache_item *it, int root_ok, item_fn fn, void *ctx)
{
	const char *n = it->name;
	int kind = !strcmp(n, "tmp")			 ? ITEM_TEMP
		   : !strcmp(n, "locks")		 ? ITEM_LOCK
		   : !strcmp(n, AUX_DIR)		 ? ITEM_AUX
		   : !strcmp(n, PCH_DIR)		 ? ITEM_PCH
		   : strlen(n) == 2 && is_hex(n, 2) ? ITEM_ENTRY
						   : -1;
	char why[512];
	struct stat st;
	int fd, rc;

	it->kind = ITEM_FOREIGN;
	it->why = "not a cache file";
	if (kind >= 0 && S_ISLNK(it->st.st_mode)) {
		it->kind = ITEM_BAD;
		it->why = "is a symbolic link (not followed)";
	} else if (kind >= 0 && !S_ISDIR(it->st.st_mode)) {
		it->why = "not a directory";
	}
	if (kind < 0 || !S_ISDIR(it->st.st_mode))
		return fn(ctx, it);
	fd = open_subdir(it->dfd, n);
	if (fd < 0)
		return errno == ENOENT ? 0 : -1;
	if (fstat(fd, &st) || (it->why = st_untrusted(&st, it->path, root_ok, why, sizeof(why)))) {
		if (!it->why)
			it->why = "cannot be examined";
		close(fd);
		return fn(ctx, it); /* foreign: not walked */
	}
	rc = walk_dir(fd, n, it->path, kind, root_ok, fn, ctx);
	close(fd);
	return rc;
}

/* Call fn for everything in the directory dfd (path dpath) of kind, or
 * walk v1 (kind < 0). Nothing is followed: every name is lstat'ed. */
static int walk_dir(int dfd, const char *dname, const char *dpath, int kind, int root_ok,
		    item_fn fn, void *ctx)
{
	int fd = dup(dfd), rc = 0;
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;

	if (!d) {
		close_fd(fd);
		return -1;
	}
	while (!rc && (e = readdir(d))) {
		cache_item it;
		char *path;

		if (is_dot(e->d_name))
			continue;
		memset(&it, 0, sizeof(it));
		it.dfd = dfd;
		it.dir = dname;
		it.name = e->d_name;
		if (fstatat(dfd, e->d_name, &it.st, AT_SYMLINK_NOFOLLOW))
			continue; /* removed meanwhile */
		if (!(path = jitk__asprintf("%s/%s", dpath, e->d_name))) {
			errno = ENOMEM;
			rc = -1;
			break;
		}
		it.path = path;
		if (kind < 0) {
			rc = walk_v1_item(&it, root_ok, fn, ctx);
		} else {
			classify(&it, kind);
			rc = fn(ctx, &it);
		}
		free(path);
	}
	closedir(d);
	return rc;
}

/* Walk the cache at root; op names it in the error. */
static int walk(const char *root, int root_ok, const char *op, item_fn fn, void *ctx)
{
	char *v1;
	int fd, rc = admin_open(root, root_ok, &fd, &v1), err;

	if (rc)
		return rc;
	rc = walk_dir(fd, NULL, v1, -1, root_ok, fn, ctx);
	err = errno;
	close(fd);
	free(v1);
	return rc ? jitk__error(err == ENOMEM ? JITK_ENOMEM : JITK_EIO, "%s: cannot %s: %s", root,
				op, strerror(err))
		  : 0;
}

/* Remove it: 1 removed, 0 gone meanwhile, -1 could not. */
static int remove_item(const cache_item *it)
{
	if (S_ISDIR(it->st.st_mode) ? !remove_debris(it->dfd, it->name)
				    : !unlinkat(it->dfd, it->name, 0))
		return 1;
	return errno == ENOENT ? 0 : -1;
}

/* Check an entry's contents as a lookup does (root's entries are fine,
 * as in a layer) and that its key is its name: 0 good, 1 bad (*problem),
 * -1 removed meanwhile. keep (NULL allowed) gets a good entry. */
static int entry_check(const cache_item *it, const char **problem, struct stat *seen,
		       jitk_cache_entry *keep)
{
	jitk_cache_entry e;
	char hex[HEXLEN + 1];

	if (entry_read_in(&e, it->dfd, it->name, 1, problem, seen))
		return *problem ? 1 : -1;
	jitk__hex(hex, e.key, JITK_HASH_SIZE);
	if (strncmp(hex, it->name, HEXLEN)) {
		*problem = "key does not match the file name";
	} else {
		/* What a lookup would refuse to load, verify refuses too: an
		 * image that is not code for the target it names. */
		*problem = jitk__entry_kind_problem(&e);
	}
	if (keep && !*problem)
		*keep = e;
	else
		jitk__cache_entry_free(&e);
	return *problem ? 1 : 0;
}

typedef struct {
	jitk_cache_summary *s;
	int verify;
	void (*report)(void *, const char *, const char *, int);
	void *ctx;
} scan_ctx;

static int scan_one(void *p, const cache_item *it)
{
	scan_ctx *sc = p;
	const char *problem = it->why;
	struct stat seen;

	switch (it->kind) {
	case ITEM_TEMP:
		sc->s->temp_files++;
		return 0;
	case ITEM_LOCK:
		sc->s->lock_files++;
		return 0;
	case ITEM_AUX:
	case ITEM_PCH:
		return 0; /* a package manifest, a compiler's PCH: not entries */
	case ITEM_FOREIGN:
		sc->s->foreign++;
		if (sc->verify && sc->report)
			sc->report(sc->ctx, it->path, it->why, 1);
		return 0;
	case ITEM_ENTRY:
		if (sc->verify && entry_check(it, &problem, &seen, NULL) < 0)
			return 0;
		if (!problem) {
			sc->s->entries++;
			sc->s->bytes += (uint64_t)it->st.st_size;
			return 0;
		}
		break;
	}
	sc->s->bad++;
	if (sc->verify && sc->report)
		sc->report(sc->ctx, it->path, problem, 0);
	return 0;
}

int jitk__cache_scan(jitk_cache_summary *out, const char *root, int verify,
		     void (*report)(void *ctx, const char *path,
				    const char *problem, int foreign),
		     void *ctx)
{
	scan_ctx sc = { out, verify, report, ctx };

	memset(out, 0, sizeof(*out));
	return walk(root, 1, "read", scan_one, &sc);
}

typedef struct {
	int (*fn)(void *ctx, const char *path, const jitk_cache_entry *e);
	void (*report)(void *ctx, const char *path, const char *problem);
	void *ctx;
} each_ctx;

static int each_one(void *p, const cache_item *it)
{
	each_ctx *ec = p;
	const char *problem = it->why;
	jitk_cache_entry e;
	struct stat seen;
	int k;

	if (it->kind == ITEM_ENTRY && (k = entry_check(it, &problem, &seen, &e)) <= 0) {
		if (k < 0)
			return 0; /* removed meanwhile */
		k = ec->fn(ec->ctx, it->path, &e);
		jitk__cache_entry_free(&e);
		return k ? -1 : 0;
	}
	if ((it->kind == ITEM_ENTRY || it->kind == ITEM_BAD) && ec->report)
		ec->report(ec->ctx, it->path, problem);
	return 0;
}

int jitk__cache_each(const char *root,
		     int (*fn)(void *ctx, const char *path, const jitk_cache_entry *e),
		     void (*report)(void *ctx, const char *path, const char *problem), void *ctx)
{
	each_ctx ec = { fn, report, ctx };

	return walk(root, 1, "read", each_one, &ec);
}

static int clear_one(void *p, const cache_item *it)
{
	jitk_clear_result *r = p;
	int k;

	if (it->kind == ITEM_LOCK || it->kind == ITEM_PCH)
		return 0; /* a process may hold one (use one) right now */
	if (it->kind == ITEM_FOREIGN) {
		r->foreign++;
		return 0;
	}
	k = remove_item(it);
	r->removed += k > 0;
	r->failed += k < 0;
	return 0;
}

int jitk__cache_clear(jitk_clear_result *out, const char *root)
{
	memset(out, 0, sizeof(*out));
	return walk(root, 0, "clear", clear_one, out);
}

/* --------------------------------------------------------------- prune */

typedef struct {
	char dir[3];
	char name[ENTRY_NAME_MAX];
	uint64_t size;
	struct timespec mtime;
} prune_item;

typedef struct {
	jitk_prune_result *r;
	prune_item *items;
	size_t n, cap;
	time_t now;
	unsigned temp_age;
	int verify;
} prune_ctx;

/* Remove a bad entry - but only the file that was examined: a writer may
 * have renamed a good entry over the name since. */
static int prune_bad(prune_ctx *pc, const cache_item *it, const struct stat *seen)
{
	struct stat now;
	int k = 0;

	if (!fstatat(it->dfd, it->name, &now, AT_SYMLINK_NOFOLLOW) && now.st_dev == seen->st_dev &&
	    now.st_ino == seen->st_ino)
		k = remove_item(it);
	pc->r->bad += k > 0;
	pc->r->failed += k < 0;
	return 0;
}

static int prune_one(void *p, const cache_item *it)
{
	prune_ctx *pc = p;
	const char *problem = NULL;
	struct stat seen = it->st;
	int k;

	switch (it->kind) {
	case ITEM_LOCK:
	case ITEM_AUX:
	case ITEM_PCH:
		return 0;
	case ITEM_FOREIGN:
		pc->r->foreign++;
		return 0;
	case ITEM_TEMP:
		if (it->st.st_mtime + (time_t)pc->temp_age < pc->now && remove_item(it) > 0)
			pc->r->temp++;
		return 0;
	case ITEM_ENTRY:
		if (pc->verify && (k = entry_check(it, &problem, &seen, NULL)))
			return k < 0 ? 0 : prune_bad(pc, it, &seen);
		break;
	default:
		return prune_bad(pc, it, &seen);
	}
	if (pc->n == pc->cap) {
		size_t cap = pc->cap ? 2 * pc->cap : 64;
		prune_item *items = realloc(pc->items, cap * sizeof(*items));

		if (!items) {
			errno = ENOMEM;
			return -1;
		}
		pc->items = items;
		pc->cap = cap;
	}
	snprintf(pc->items[pc->n].dir, sizeof(pc->items[pc->n].dir), "%s", it->dir);
	snprintf(pc->items[pc->n].name, sizeof(pc->items[pc->n].name), "%s", it->name);
	pc->items[pc->n].size = (uint64_t)it->st.st_size;
	pc->items[pc->n].mtime = it->st.st_mtim;
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
	return strcmp(x->name, y->name);
}

int jitk__cache_prune(jitk_prune_result *out, const char *root,
		      uint64_t max_bytes, unsigned temp_age_s, unsigned flags)
{
	prune_ctx pc;
	uint64_t total = 0;
	size_t i;
	char *v1;
	int rc, fd, err;

	memset(out, 0, sizeof(*out));
	memset(&pc, 0, sizeof(pc));
	pc.r = out;
	pc.now = time(NULL);
	pc.temp_age = temp_age_s;
	pc.verify = !!(flags & JITK_PRUNE_VERIFY);
	if ((rc = admin_open(root, 0, &fd, &v1)))
		return rc;
	rc = walk_dir(fd, NULL, v1, -1, 0, prune_one, &pc);
	err = errno;
	free(v1);
	if (rc) {
		close(fd);
		free(pc.items);
		return jitk__error(err == ENOMEM ? JITK_ENOMEM : JITK_EIO, "%s: cannot prune: %s",
				   root, strerror(err));
	}
	for (i = 0; i < pc.n; i++)
		total += pc.items[i].size;
	if (pc.n)
		qsort(pc.items, pc.n, sizeof(*pc.items), older_first);
	for (i = 0; i < pc.n && max_bytes && total > max_bytes; i++) {
		int dfd = open_subdir(fd, pc.items[i].dir);

		if (dfd >= 0 && !unlinkat(dfd, pc.items[i].name, 0)) {
			total -= pc.items[i].size;
			out->evicted++;
			out->evicted_bytes += pc.items[i].size;
		}
		close_fd(dfd);
	}
	close(fd);
	free(pc.items);
	out->bytes_left = total;
	return 0;
}
