/* util.c - buffers, errors, logging, files, hashing, architectures. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifdef JITK_SHA256_EVP
#include <openssl/evp.h>
#else
#define OPENSSL_SUPPRESS_DEPRECATED /* SHA256_Init: see "hashing" below */
#include <openssl/sha.h>
#endif

/* xxHash compiled into this file (XXH_INLINE_ALL: every function static),
 * its own warnings left to its authors. */
#define XXH_INLINE_ALL
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
#include <xxhash.h>
#pragma GCC diagnostic pop

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

/* -------------------------------------------------------------- status */

const char *jitk_strerror(int status)
{
	switch (status) {
#define JITK_STATUS_TEXT_(name, value, text)                                  \
	case value:                                                           \
		return text;
		JITK_STATUS_LIST(JITK_STATUS_TEXT_)
#undef JITK_STATUS_TEXT_
	default:
		return "unknown status";
	}
}

const char *jitk_status_name(int status)
{
	switch (status) {
#define JITK_STATUS_NAME_(name, value, text)                                  \
	case value:                                                           \
		return #name;
		JITK_STATUS_LIST(JITK_STATUS_NAME_)
#undef JITK_STATUS_NAME_
	default:
		return "UNKNOWN";
	}
}

/* -------------------------------------------------------------- errors */

/* One record per thread, freed by the key's destructor when the thread
 * ends so that leak checkers stay quiet. */
struct error_slot {
	jitk_error pub;
	char *message;
	char *detail;
};

static pthread_key_t error_key;
static pthread_once_t error_once = PTHREAD_ONCE_INIT;
static const jitk_error error_none = { JITK_OK, "", "" };
static const jitk_error error_oom = { JITK_ENOMEM, "out of memory", "" };

static void error_slot_free(void *p)
{
	struct error_slot *s = p;

	if (!s)
		return;
	free(s->message);
	free(s->detail);
	free(s);
}

static void error_key_make(void)
{
	(void)pthread_key_create(&error_key, error_slot_free);
}

static struct error_slot *error_slot_get(int create)
{
	struct error_slot *s;

	pthread_once(&error_once, error_key_make);
	s = pthread_getspecific(error_key);
	if (!s && create) {
		s = calloc(1, sizeof(*s));
		if (s && pthread_setspecific(error_key, s)) {
			free(s);
			s = NULL;
		}
	}
	return s;
}

static int error_vset(int status, const char *detail, const char *fmt,
		      va_list ap)
{
	struct error_slot *s = error_slot_get(1);
	jbuf b;

	if (!s)
		return status;
	jitk__jbuf_init(&b);
	jitk__jbuf_vprintf(&b, fmt, ap);
	free(s->message);
	free(s->detail);
	s->message = jitk__jbuf_detach(&b);
	s->detail = jitk__strdup(detail ? detail : "");
	s->pub.status = status;
	s->pub.message = s->message ? s->message : "out of memory";
	s->pub.detail = s->detail ? s->detail : "";
	return status;
}

int jitk__error(int status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	error_vset(status, NULL, fmt, ap);
	va_end(ap);
	return status;
}

int jitk__error_detail(int status, const char *detail, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	error_vset(status, detail, fmt, ap);
	va_end(ap);
	return status;
}

int jitk__null_args(const char *fn, const char *names, size_t n, const void *const *ptrs)
{
	size_t i, len;

	for (i = 0; i < n; i++) {
		len = strcspn(names, " ");
		if (!ptrs[i])
			return jitk__error(JITK_EINVAL, "%s: %.*s is NULL", fn, (int)len, names);
		names += len + (names[len] == ' ');
	}
	return 0;
}

int jitk__out_check(const char *type, unsigned version, unsigned current)
{
	if (version < 1 || version > current)
		return jitk__error(JITK_EINVAL, "%s version %u is not 1 to %u (set it with its _INIT macro)",
				   type, version, current);
	return 0;
}

void jitk__out_fill(void *out, const void *full, const size_t *sizes)
{
	unsigned version;
	size_t n;

	memcpy(&version, out, sizeof(version));
	n = sizes[version];
	/* the caller's version field stays as it is */
	if (n > sizeof(version))
		memcpy((char *)out + sizeof(version), (const char *)full + sizeof(version),
		       n - sizeof(version));
}

void jitk__error_clear(void)
{
	struct error_slot *s = error_slot_get(0);

	if (!s)
		return;
	free(s->message);
	free(s->detail);
	s->message = NULL;
	s->detail = NULL;
	s->pub = error_none;
}

const jitk_error *jitk_error_last(void)
{
	struct error_slot *s = error_slot_get(0);

	if (!s)
		return &error_none;
	if (s->pub.status != JITK_OK && !s->message)
		return &error_oom;
	return s->pub.message ? &s->pub : &error_none;
}

/* ------------------------------------------------------------- logging */

void jitk__log(const jitk_logger *lg, jitk_log_level level, const char *fmt,
	       ...)
{
	char line[1024];
	va_list ap;

	if (!lg || !lg->fn || (int)level > lg->level)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	lg->fn(lg->payload, level, line);
}

int jitk__log_level_from_env(int def)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };
	const char *v = jitk__env("JITK_LOG");
	size_t i;

	if (!v)
		return def;
	for (i = 0; i < JITK_ARRAY_SIZE(names); i++)
		if (!strcasecmp(v, names[i]))
			return (int)i;
	return def;
}

/* --------------------------------------------------------------- files */

const char *jitk__file_kind(unsigned mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: return "a regular file";
	case S_IFDIR: return "a directory";
	case S_IFIFO: return "a FIFO";
	case S_IFCHR: return "a character device";
	case S_IFBLK: return "a block device";
	case S_IFSOCK: return "a socket";
	case S_IFLNK: return "a symbolic link";
	default: return "not a regular file";
	}
}

int jitk__read_file(char **out, size_t *out_len, const char *path, size_t max)
{
	struct stat st;
	char *buf = NULL;
	size_t got = 0;
	int fd, rc = JITK_OK;

	*out = NULL;
	if (out_len)
		*out_len = 0;
	/* O_NONBLOCK: opening a FIFO for reading would wait for a writer
	 * forever; a device may block too. Nothing but a regular file is read
	 * (the flag changes nothing for those). Symbolic links are followed:
	 * specs and templates are the user's own files, and a tree may link
	 * them in from elsewhere. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return jitk__error(JITK_EIO, "%s: cannot open: %s", path,
				   strerror(errno));
	if (fstat(fd, &st)) {
		rc = jitk__error(JITK_EIO, "%s: cannot stat: %s", path, strerror(errno));
		goto done;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = jitk__error(JITK_EIO, "%s: is %s, not a regular file", path,
				 jitk__file_kind((unsigned)st.st_mode));
		goto done;
	}
	if ((uint64_t)st.st_size > max) {
		rc = jitk__error(JITK_EINVAL,
				 "%s: file is %lld bytes; the limit is %zu",
				 path, (long long)st.st_size, max);
		goto done;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		rc = jitk__error(JITK_ENOMEM, "out of memory reading %s", path);
		goto done;
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = jitk__error(JITK_EIO, "%s: read failed: %s", path,
					 n ? strerror(errno) : "file shrank");
			goto done;
		}
		got += (size_t)n;
	}
	buf[got] = '\0';
	*out = buf;
	buf = NULL;
	if (out_len)
		*out_len = got;
done:
	free(buf);
	close(fd);
	return rc;
}

int jitk__mkdirs(const char *path, unsigned mode)
{
	char *p = jitk__strdup(path), *s;
	int rc = 0;

	if (!p) {
		errno = ENOMEM;
		return -1;
	}
	for (s = p + 1;; s++) {
		if (*s == '/' || *s == '\0') {
			char c = *s;

			*s = '\0';
			if (mkdir(p, (mode_t)mode) && errno != EEXIST) {
				rc = -1;
				break;
			}
			*s = c;
			if (!c)
				break;
		}
	}
	free(p);
	return rc;
}

const char *jitk__env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

int jitk__env_bool(const jitk_logger *lg, const char *name, int safe, const char *safe_means)
{
	static const char *const on[] = { "1", "true", "yes", "on" };
	static const char *const off[] = { "0", "false", "no", "off" };
	const char *v = jitk__env(name);
	char shown[48];
	size_t i;

	if (!v)
		return 0;
	for (i = 0; i < JITK_ARRAY_SIZE(on); i++) {
		if (!strcasecmp(v, on[i]))
			return 1;
		if (!strcasecmp(v, off[i]))
			return 0;
	}
	/* the value as one printable line, however it was spelled */
	for (i = 0; v[i] && i < sizeof(shown) - 4; i++)
		shown[i] = v[i] >= 0x20 && v[i] < 0x7f ? v[i] : '?';
	snprintf(shown + i, sizeof(shown) - i, "%s", v[i] ? "..." : "");
	if (lg)
		jitk__log(lg, JITK_LOG_WARN, "%s='%s' is not one of " JITK_ENV_BOOL_VALUES
			  ": taken as %d (%s)", name, shown, safe ? 1 : 0, safe_means);
	return safe ? 1 : 0;
}

int jitk__parse_size(uint64_t *out, const char *s)
{
	static const char units[] = "KMGT";
	uint64_t v = 0, mul = 1;
	const char *p = s, *u;

	*out = 0;
	if (!s || *p < '0' || *p > '9')
		return -1; /* also refuses "", "-1", "+1", " 1" */
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
			return -1;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (*p && (u = strchr(units, toupper((unsigned char)*p)))) {
		int i;

		for (i = 0; i <= u - units; i++)
			mul *= 1024;
		p++;
		if (*p == 'i' && p[1] == 'B')
			p++;
	}
	if (*p == 'B')
		p++;
	if (*p || v > UINT64_MAX / mul)
		return -1;
	*out = v * mul;
	return 0;
}

/* -------------------------------------------------------------- hashing */

/* SHA-256 through OpenSSL's digest functions themselves, not EVP: EVP's
 * first use in a process loads the configuration and the default provider
 * and fetches the algorithm (600-700 us on the 2-core CI machine, more
 * than the whole rest of a cache hit); SHA256_Init has no such start-up
 * and runs the same assembly (SHA-NI where the CPU has it). OpenSSL 3
 * marks these functions deprecated but builds them unless configured with
 * no-deprecated; configure then falls back to EVP (JITK_SHA256_EVP). */
#ifdef JITK_SHA256_EVP
struct jitk_hasher {
	EVP_MD_CTX *ctx;
	int failed;
};

jitk_hasher *jitk__hasher_new(void)
{
	jitk_hasher *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	h->ctx = EVP_MD_CTX_new();
	if (!h->ctx || EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) != 1) {
		EVP_MD_CTX_free(h->ctx);
		free(h);
		return NULL;
	}
	return h;
}

void jitk__hasher_update(jitk_hasher *h, const void *data, size_t n)
{
	if (n && EVP_DigestUpdate(h->ctx, data, n) != 1)
		h->failed = 1;
}

int jitk__hasher_final(jitk_hasher *h, uint8_t out[JITK_HASH_SIZE])
{
	unsigned len = 0;
	int rc = h->failed ? -1 : 0;

	if (!rc && (EVP_DigestFinal_ex(h->ctx, out, &len) != 1 ||
		    len != JITK_HASH_SIZE))
		rc = -1;
	EVP_MD_CTX_free(h->ctx);
	free(h);
	return rc;
}
#else
struct jitk_hasher {
	SHA256_CTX ctx;
	int failed;
};

jitk_hasher *jitk__hasher_new(void)
{
	jitk_hasher *h = calloc(1, sizeof(*h));

	if (h && SHA256_Init(&h->ctx) != 1) {
		free(h);
		return NULL;
	}
	return h;
}

void jitk__hasher_update(jitk_hasher *h, const void *data, size_t n)
{
	if (n && SHA256_Update(&h->ctx, data, n) != 1)
		h->failed = 1;
}

int jitk__hasher_final(jitk_hasher *h, uint8_t out[JITK_HASH_SIZE])
{
	int rc = SHA256_Final(out, &h->ctx) == 1 && !h->failed ? 0 : -1;

	free(h);
	return rc;
}
#endif

void jitk__hasher_field(jitk_hasher *h, const char *tag, const void *data,
			size_t n)
{
	char prefix[96];
	int k = snprintf(prefix, sizeof(prefix), "%s %zu:", tag, n);

	jitk__hasher_update(h, prefix, (size_t)k);
	jitk__hasher_update(h, data, n);
	jitk__hasher_update(h, "\n", 1);
}

int jitk__sha256(uint8_t out[JITK_HASH_SIZE], const void *data, size_t n)
{
	jitk_hasher *h = jitk__hasher_new();

	if (!h)
		return -1;
	jitk__hasher_update(h, data, n);
	return jitk__hasher_final(h, out);
}

/* XXH3-128 (xxHash, inlined from its header: no library to load at run
 * time) for the checksums of cache entries, which guard against torn and
 * corrupted files, not against an adversary (the trust checks of the
 * cache do that; the key stays SHA-256): about ten times faster than
 * SHA-256 over a cubin. The digest is written in xxHash's canonical
 * (big-endian) byte order. */
int jitk__checksum(uint8_t out[JITK_SUM_SIZE], const void *a, size_t na, const void *b,
		   size_t nb)
{
	XXH3_state_t *st = XXH3_createState();
	XXH128_canonical_t c;
	int rc = -1;

	if (!st)
		return -1;
	if (XXH3_128bits_reset(st) == XXH_OK && XXH3_128bits_update(st, a, na) == XXH_OK &&
	    XXH3_128bits_update(st, b, nb) == XXH_OK) {
		XXH128_canonicalFromHash(&c, XXH3_128bits_digest(st));
		memcpy(out, c.digest, JITK_SUM_SIZE);
		rc = 0;
	}
	XXH3_freeState(st);
	return rc;
}

void jitk__hex(char *out, const uint8_t *bytes, size_t n)
{
	static const char digits[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < n; i++) {
		out[2 * i] = digits[bytes[i] >> 4];
		out[2 * i + 1] = digits[bytes[i] & 15];
	}
	out[2 * n] = '\0';
}

/* ---------------------------------------------------------------- time */

double jitk__now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* -------------------------------------------------------- architectures */

int jitk__arch_parse(jitk_arch *out, const char *s)
{
	const char *p;
	long cc = 0;
	int digits = 0;

	if (!s)
		return -1;
	if (!strncmp(s, "sm_", 3)) {
		out->kind = 's';
		p = s + 3;
	} else if (!strncmp(s, "compute_", 8)) {
		out->kind = 'c';
		p = s + 8;
	} else {
		return -1;
	}
	while (isdigit((unsigned char)*p) && digits < 4) {
		cc = cc * 10 + (*p++ - '0');
		digits++;
	}
	if (digits < 2 || cc < 10)
		return -1;
	out->cc = (int)cc;
	out->suffix = 0;
	if (*p == 'a' || *p == 'f')
		out->suffix = *p++;
	return *p ? -1 : 0;
}

void jitk__arch_format(char out[JITK_ARCH_STRLEN], jitk_arch a)
{
	snprintf(out, JITK_ARCH_STRLEN, "%s_%d%s",
		 a.kind == 'c' ? "compute" : "sm", a.cc,
		 a.suffix == 'a' ? "a" : a.suffix == 'f' ? "f" : "");
}

int jitk__arch_suffix_ok(jitk_arch a)
{
	/* NVRTC 13 (tried for every sm_/compute_ it lists): 'a' exists for
	 * sm_90 and sm_100 onward, 'f' (family) for sm_100 onward. */
	if (a.suffix == 'a')
		return a.cc == 90 || a.cc >= 100;
	if (a.suffix == 'f')
		return a.cc >= 100;
	return !a.suffix;
}

/* Where the SM number sits in a cubin's e_flags: the ELF OS ABI byte says
 * which encoding (0x33: CUDA toolkits up to 12, SM in bits 0-7; 0x41: the
 * ABI of CUDA 13, SM in bits 8-15). An ABI we do not know is not judged. */
static int cubin_sm(const unsigned char *h)
{
	uint32_t flags = (uint32_t)h[48] | (uint32_t)h[49] << 8 |
			 (uint32_t)h[50] << 16 | (uint32_t)h[51] << 24;

	if (h[7] == 0x33)
		return (int)(flags & 0xff);
	if (h[7] == 0x41)
		return (int)((flags >> 8) & 0xff);
	return -1;
}

/* Skip blank lines and // comments of PTX text; the next line. */
static const char *ptx_next(const char *p)
{
	for (;;) {
		while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
			p++;
		if (p[0] != '/' || p[1] != '/')
			return p;
		while (*p && *p != '\n')
			p++;
	}
}

static int has_entry(const char *ptx, const char *name)
{
	size_t n = strlen(name);
	const char *p = ptx;

	while ((p = strstr(p, ".entry "))) {
		p += 7;
		if (!strncmp(p, name, n) && (p[n] == '(' || isspace((unsigned char)p[n])))
			return 1;
	}
	return 0;
}

const char *jitk__image_problem(const void *image, size_t size, int is_ptx,
				jitk_arch t, const char *const *names, size_t nnames)
{
	const unsigned char *h = image;
	size_t i;

	if (!image || !size)
		return "the image is empty";
	if (is_ptx != (t.kind == 'c'))
		return is_ptx ? "the image is PTX, the target needs a cubin"
			      : "the image is not PTX, the target needs PTX";
	if (is_ptx) {
		const char *p = image;
		char want[JITK_ARCH_STRLEN + 8];
		size_t n;

		if (memchr(image, '\0', size) != (const char *)image + size - 1)
			return "the PTX text is not one NUL-terminated string";
		p = ptx_next(p);
		if (strncmp(p, ".version ", 9))
			return "the PTX text does not start with a .version directive";
		p = ptx_next(p + strcspn(p, "\n"));
		n = (size_t)snprintf(want, sizeof(want), ".target sm_%d%s", t.cc,
				     t.suffix == 'a' ? "a" : t.suffix == 'f' ? "f" : "");
		if (strncmp(p, want, n) || (p[n] && p[n] != ',' && !isspace((unsigned char)p[n])))
			return "the PTX text is not for the requested target (.target differs)";
		for (i = 0; i < nnames; i++)
			if (!has_entry(image, names[i]))
				return "the PTX text lacks the kernel's .entry";
		return NULL;
	}
	if (size < 64 || memcmp(h, "\177ELF", 4))
		return "the image is not an ELF file (cubin)";
	if (h[4] != 2 || h[5] != 1)
		return "the image is not a 64-bit little-endian ELF file";
	if ((h[18] | h[19] << 8) != 190)
		return "the image is an ELF file for another machine than CUDA (e_machine is not 190)";
	if (cubin_sm(h) >= 0 && cubin_sm(h) != t.cc)
		return "the cubin is for another SM than the requested target";
	for (i = 0; i < nnames; i++)
		if (!memmem(image, size, names[i], strlen(names[i]) + 1))
			return "the cubin lacks the kernel's symbol";
	return NULL;
}

/* ------------------------------------------------------- NVRTC options */

/* Macro names a spec may not define or undefine: the implementation's
 * (__x, _X), CUDA's, NVRTC's and jitk's own, and C++ keywords (defining
 * one would rewrite the code jitk generates, e.g. its signature check). */
static const char *const cxx_keywords[] = {
	"alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor",
	"bool", "break", "case", "catch", "char", "char8_t", "char16_t",
	"char32_t", "class", "compl", "concept", "const", "consteval",
	"constexpr", "constinit", "const_cast", "continue", "co_await",
	"co_return", "co_yield", "decltype", "default", "defined", "delete",
	"do", "double", "dynamic_cast", "else", "enum", "explicit", "export",
	"extern", "false", "float", "for", "friend", "goto", "if", "inline",
	"int", "long", "mutable", "namespace", "new", "noexcept", "not",
	"not_eq", "nullptr", "operator", "or", "or_eq", "private", "protected",
	"public", "register", "reinterpret_cast", "requires", "return", "short",
	"signed", "sizeof", "static", "static_assert", "static_cast", "struct",
	"switch", "template", "this", "thread_local", "throw", "true", "try",
	"typedef", "typeid", "typename", "union", "unsigned", "using",
	"virtual", "void", "volatile", "wchar_t", "while", "xor", "xor_eq",
	NULL
};

int jitk__cxx_keyword(const char *s, size_t n)
{
	size_t i;

	for (i = 0; cxx_keywords[i]; i++)
		if (strlen(cxx_keywords[i]) == n && !strncmp(s, cxx_keywords[i], n))
			return 1;
	return 0;
}

static const char *macro_problem(const char *s, int value_allowed)
{
	static const char *const prefixes[] = { "cuda", "nvrtc", "jitk", NULL };
	const char *p = s;
	size_t n, i;

	if (!isalpha((unsigned char)*p) && *p != '_')
		return "the macro name is not an identifier";
	while (isalnum((unsigned char)*p) || *p == '_')
		p++;
	n = (size_t)(p - s);
	if (*p && !(value_allowed && *p == '='))
		return value_allowed ? "the macro name is not an identifier (no function-like macros)"
				     : "the macro name is not an identifier";
	if (s[0] == '_' && (s[1] == '_' || isupper((unsigned char)s[1])))
		return "the macro name is reserved (__ or _ and a capital letter)";
	for (i = 0; prefixes[i]; i++)
		if (n >= strlen(prefixes[i]) && !strncasecmp(s, prefixes[i], strlen(prefixes[i])))
			return "the macro name is reserved (CUDA*, NVRTC* and JITK* belong to the toolchain and jitk)";
	if (jitk__cxx_keyword(s, n))
		return "the macro name is a C++ keyword";
	return NULL;
}

static const char *number_problem(const char *s, long lo, long hi, int list)
{
	for (;;) {
		long v = 0;
		int digits = 0;

		if (*s == '0' && isdigit((unsigned char)s[1]))
			return "the value has a leading zero";
		while (isdigit((unsigned char)*s) && digits < 6) {
			v = v * 10 + (*s++ - '0');
			digits++;
		}
		if (!digits || isdigit((unsigned char)*s))
			return "the value is not a number";
		if (v < lo || v > hi)
			return "the value is out of range";
		if (list && *s == ',') {
			s++;
			continue;
		}
		return *s ? "the value is not a number" : NULL;
	}
}

enum { OPT_FLAG, OPT_STD, OPT_REGS, OPT_DIAG, OPT_DEFINE, OPT_UNDEF };

/* The allow list: nothing here reads or writes a file, changes the target
 * or what NVRTC produces (a cubin or PTX), passes text on to ptxas, or
 * changes jitk's numerics. docs/spec-format.md lists it with reasons. */
static const struct {
	const char *name; /* OPT_FLAG: the whole option; else its prefix */
	int kind;
} allowed_options[] = {
	{ "--restrict", OPT_FLAG },
	{ "-restrict", OPT_FLAG },
	{ "--extra-device-vectorization", OPT_FLAG },
	{ "-extra-device-vectorization", OPT_FLAG },
	{ "--generate-line-info", OPT_FLAG },
	{ "-lineinfo", OPT_FLAG },
	{ "--device-as-default-execution-space", OPT_FLAG },
	{ "-default-device", OPT_FLAG },
	{ "--device-int128", OPT_FLAG },
	{ "-device-int128", OPT_FLAG },
	{ "--disable-warnings", OPT_FLAG },
	{ "-w", OPT_FLAG },
	{ "--display-error-number", OPT_FLAG },
	{ "-err-no", OPT_FLAG },
	{ "--no-display-error-number", OPT_FLAG },
	{ "-no-err-no", OPT_FLAG },
	{ "--std=", OPT_STD },
	{ "-std=", OPT_STD },
	{ "--maxrregcount=", OPT_REGS },
	{ "-maxrregcount=", OPT_REGS },
	{ "--diag-suppress=", OPT_DIAG },
	{ "-diag-suppress=", OPT_DIAG },
	{ "--diag-warn=", OPT_DIAG },
	{ "-diag-warn=", OPT_DIAG },
	{ "--diag-error=", OPT_DIAG },
	{ "-diag-error=", OPT_DIAG },
	{ "--define-macro=", OPT_DEFINE },
	{ "-D", OPT_DEFINE },
	{ "--undefine-macro=", OPT_UNDEF },
	{ "-U", OPT_UNDEF },
};

/* Options refused with a specific reason (prefixes, long and short). */
static const struct {
	const char *prefix, *why;
} refused_options[] = {
	{ "--time", "it writes a file" },
	{ "-time", "it writes a file" },
	{ "--fdevice-time-trace", "it writes a file" },
	{ "-fdevice-time-trace", "it writes a file" },
	{ "--create-pch", "it writes a file" },
	{ "--pch-dir", "it writes files" },
	{ "-pch", "it reads and writes precompiled headers" },
	{ "--pch", "it reads and writes precompiled headers" },
	{ "--use-pch", "it reads a file" },
	{ "--include-path", "it reads files outside the template" },
	{ "-I", "it reads files outside the template" },
	{ "--pre-include", "it reads a file outside the template" },
	{ "-include", "it reads a file outside the template" },
	{ "--dlink-time-opt", "it makes LTO IR instead of a cubin" },
	{ "-dlto", "it makes LTO IR instead of a cubin" },
	{ "--gen-opt-lto", "it makes LTO IR instead of a cubin" },
	{ "--optix-ir", "it makes OptiX IR instead of a cubin" },
	{ "--device-c", "it makes relocatable code that needs a link step" },
	{ "-dc", "it makes relocatable code that needs a link step" },
	{ "--device-w", "it makes relocatable code that needs a link step" },
	{ "-dw", "it makes relocatable code that needs a link step" },
	{ "--relocatable-device-code", "it makes relocatable code that needs a link step" },
	{ "-rdc", "it makes relocatable code that needs a link step" },
	{ "--extensible-whole-program", "it changes the kind of code NVRTC makes" },
	{ "-ewp", "it changes the kind of code NVRTC makes" },
	{ "--fdevice-syntax-only", "it makes a cubin without the kernel" },
	{ "-fdevice-syntax-only", "it makes a cubin without the kernel" },
	{ "--device-debug", "a debug build (no optimization) would be cached as the kernel; "
			    "use --generate-line-info for profiling" },
	{ "-G", "a debug build (no optimization) would be cached as the kernel; "
		"use --generate-line-info for profiling" },
	{ "--ptxas-options", "jitk does not check what it passes on to ptxas" },
	{ "-Xptxas", "jitk does not check what it passes on to ptxas" },
	{ "--gpu-architecture", "jitk sets the target" },
	{ "-arch", "jitk sets the target" },
	{ "--use_fast_math", "jitk fixes the numerics" },
	{ "-use_fast_math", "jitk fixes the numerics" },
	{ "--ftz", "jitk fixes the numerics" },
	{ "-ftz", "jitk fixes the numerics" },
	{ "--prec-div", "jitk fixes the numerics" },
	{ "-prec-div", "jitk fixes the numerics" },
	{ "--prec-sqrt", "jitk fixes the numerics" },
	{ "-prec-sqrt", "jitk fixes the numerics" },
	{ "--fmad", "jitk fixes the numerics" },
	{ "-fmad", "jitk fixes the numerics" },
};

const char *jitk__nvrtc_option_problem(const char *opt)
{
	const char *p;
	size_t i;

	for (p = opt; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
			return "it contains a control character or a non-ASCII byte";
	for (i = 0; i < JITK_ARRAY_SIZE(allowed_options); i++) {
		size_t n = strlen(allowed_options[i].name);
		const char *v = opt + n;

		if (allowed_options[i].kind == OPT_FLAG) {
			if (!strcmp(opt, allowed_options[i].name))
				return NULL;
			continue;
		}
		if (strncmp(opt, allowed_options[i].name, n))
			continue;
		switch (allowed_options[i].kind) {
		case OPT_STD:
			return !strcmp(v, "c++17") || !strcmp(v, "c++20")
				       ? NULL
				       : "the templates need c++17 or c++20";
		case OPT_REGS:
			return number_problem(v, 1, 255, 0);
		case OPT_DIAG:
			return number_problem(v, 1, 99999, 1);
		case OPT_DEFINE:
			return macro_problem(v, 1);
		default:
			return macro_problem(v, 0);
		}
	}
	for (i = 0; i < JITK_ARRAY_SIZE(refused_options); i++)
		if (!strncmp(opt, refused_options[i].prefix, strlen(refused_options[i].prefix)))
			return refused_options[i].why;
	return opt[0] == '-' ? "it is not one of the options jitk allows (docs/spec-format.md lists them)"
			     : "it is not an option";
}
