/* util.c - buffers, errors, logging, files, hashing, architectures. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

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
		if (!strcmp(v, names[i]))
			return (int)i;
	return def;
}

/* --------------------------------------------------------------- files */

static const char *file_kind(unsigned mode)
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
				 file_kind((unsigned)st.st_mode));
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

int jitk__env_flag(const char *name)
{
	const char *v = jitk__env(name);

	return v && (!strcmp(v, "1") || !strcmp(v, "true") ||
		     !strcmp(v, "yes") || !strcmp(v, "on"));
}

/* -------------------------------------------------------------- hashing */

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

void jitk__hasher_field(jitk_hasher *h, const char *tag, const void *data,
			size_t n)
{
	char prefix[96];
	int k = snprintf(prefix, sizeof(prefix), "%s %zu:", tag, n);

	jitk__hasher_update(h, prefix, (size_t)k);
	jitk__hasher_update(h, data, n);
	jitk__hasher_update(h, "\n", 1);
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

int jitk__sha256(uint8_t out[JITK_HASH_SIZE], const void *data, size_t n)
{
	jitk_hasher *h = jitk__hasher_new();

	if (!h)
		return -1;
	jitk__hasher_update(h, data, n);
	return jitk__hasher_final(h, out);
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
