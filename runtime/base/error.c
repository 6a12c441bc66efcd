/* error.c - status codes, the per-thread last error, output structs,
 * logging. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/internal.h"

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
