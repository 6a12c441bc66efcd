/* remote.c - the remote cache tier over HTTP(S) with libcurl.
 *
 * An entry is the object URL/v1/<64 hex key>, its bytes exactly those of
 * a cache entry file. GET 200 is a hit (verified by the compiler), 404 a
 * miss; PUT uploads. Anything else - refused, timed out, another status,
 * a transfer cut short - switches that URL off for the process with one
 * warning: a remote can only make a build faster, never fail it or make
 * it wait more than once. A URL that answers, but slowly, is off once its
 * slow answers have cost one request timeout in all (its time budget).
 * Credentials in a URL never reach a message (jitk__redact). Several URLs share the keys by rendezvous
 * hashing (each key belongs to the URL with the highest hash of URL and
 * key, so adding a URL moves only the keys it takes). Requests to S3 are
 * signed with SigV4 by libcurl when the usual AWS variables are set. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "store/cache.h"
#include "store/optlib.h"
#include "store/remote.h"

#define IDLE_MAX 8 /* handles kept (with their connections) for reuse */
#define OBJECT_MAX ((curl_off_t)JITK_ENTRY_MAX_SIZE)

typedef struct {
	char *base;  /* "https://host/prefix", no trailing slash */
	char *shown; /* base for messages, credentials masked */
	char *name;  /* base without credentials, for the rendezvous weights */
	atomic_int off;
	atomic_ullong slow_us; /* time in its slow answers (the budget) */
} remote_url;

struct jitk_remote {
	remote_url *urls;
	size_t nurls;
	int read_only;
	long connect_ms, timeout_ms;
	long fast_ms; /* an answer within this is not slow: a tenth of timeout_ms */
	jitk_logger log;
	/* SigV4 (S3): NULL when the AWS variables are not set */
	char *sigv4, *akid, *secret, *token_header;
	pthread_mutex_t lock; /* idle, nidle, pid */
	CURL *idle[IDLE_MAX];
	size_t nidle;
	pid_t pid; /* the process the idle handles belong to */
	jitk_remote_counters n;
};

/* ------------------------------------------------------------- SIGPIPE */

void jitk__sigpipe_block(jitk_sigpipe_guard *g)
{
	sigset_t pipe_set, pending;

	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	g->was_pending = !sigpending(&pending) && sigismember(&pending, SIGPIPE) == 1;
	pthread_sigmask(SIG_BLOCK, &pipe_set, &g->old);
}

void jitk__sigpipe_restore(jitk_sigpipe_guard *g)
{
	sigset_t pipe_set, pending;
	struct timespec zero = { 0, 0 };

	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	/* A write to a closed connection made SIGPIPE pending on this thread
	 * (blocked): take it, or it would be delivered when the mask is
	 * restored. */
	if (!g->was_pending && !sigpending(&pending) && sigismember(&pending, SIGPIPE) == 1)
		while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR)
			;
	pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

/* ----------------------------------------------------------- credentials */

/* Copy in to out (n bytes, NUL-terminated, cut if need be) with the user
 * information of every URL in it ("scheme://USER:PASSWORD@host...")
 * replaced by mask. The user information runs to the last '@' before the
 * next character of stops (or the end), which masks more than a URL
 * parser would when a path holds an '@', never less. */
static void copy_masked(char *out, size_t n, const char *in, const char *mask, const char *stops)
{
	size_t o = 0;

	if (!n)
		return;
	while (*in && o + 1 < n) {
		const char *at = NULL, *p;

		if (strncmp(in, "://", 3)) {
			out[o++] = *in++;
			continue;
		}
		for (p = in + 3; *p && !strchr(stops, *p); p++)
			if (*p == '@')
				at = p;
		for (p = "://"; *p && o + 1 < n; p++)
			out[o++] = *p;
		in += 3;
		if (at) {
			for (p = mask; *p && o + 1 < n; p++)
				out[o++] = *p;
			in = at + 1;
		}
	}
	out[o] = '\0';
}

void jitk__redact(char *out, size_t n, const char *in)
{
	copy_masked(out, n, in, "***@", " \t\r\n'\"<>()");
}

void jitk__redact_url(char *out, size_t n, const char *url)
{
	copy_masked(out, n, url, "***@", "");
}

static char *masked_dup(const char *url, const char *mask)
{
	size_t n = strlen(url) + strlen(mask) + 1;
	char *out = malloc(n);

	if (out)
		copy_masked(out, n, url, mask, "");
	return out;
}

/* ---------------------------------------------------------------- open */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;
static const jitk_curl_api *cu; /* libcurl, loaded on first use (optlib.h) */
static const char *curl_why;    /* why it is not there */

static void curl_init(void)
{
	if (!(cu = jitk__curl(&curl_why))) {
		curl_init_rc = CURLE_FAILED_INIT;
		return;
	}
	/* Once per process and never undone: the library cannot know when
	 * the host's last user of libcurl is done. */
	curl_init_rc = cu->global_init(CURL_GLOBAL_DEFAULT);
}

/* Why base cannot be a remote's URL, or NULL. */
static const char *url_problem(const char *base)
{
	size_t i;

	if (strncasecmp(base, "http://", 7) && strncasecmp(base, "https://", 8))
		return "not an http:// or https:// URL";
	for (i = 0; base[i]; i++)
		if ((unsigned char)base[i] <= ' ' || base[i] == '?' || base[i] == '#')
			return "a URL with a space, control character, query or fragment";
	if (!base[strcspn(base, ":") + 3])
		return "no host";
	return NULL;
}

static int add_url(jitk_remote *r, const char *s, size_t n)
{
	char *base = jitk__strndup(s, n);
	const char *bad;
	remote_url *u;

	if (!base)
		return -1;
	while (*base && base[strlen(base) - 1] == '/')
		base[strlen(base) - 1] = '\0';
	if ((bad = url_problem(base))) {
		char shown[256];

		jitk__redact_url(shown, sizeof(shown), base);
		jitk__log(&r->log, JITK_LOG_WARN, "remote cache '%.200s' ignored: %s", shown, bad);
		free(base);
		return 0;
	}
	u = realloc(r->urls, (r->nurls + 1) * sizeof(*u));
	if (!u) {
		free(base);
		return -1;
	}
	r->urls = u;
	u += r->nurls;
	memset(u, 0, sizeof(*u));
	u->base = base;
	u->shown = masked_dup(base, "***@");
	u->name = masked_dup(base, "");
	atomic_init(&u->off, 0);
	atomic_init(&u->slow_us, 0);
	r->nurls++;
	return u->shown && u->name ? 0 : -1;
}

/* SigV4 signing when credentials are in the environment (as the AWS tools
 * read them). */
static int aws_setup(jitk_remote *r)
{
	const char *id = jitk__env("AWS_ACCESS_KEY_ID"), *secret = jitk__env("AWS_SECRET_ACCESS_KEY");
	const char *token = jitk__env("AWS_SESSION_TOKEN"), *region = jitk__env("AWS_REGION");

	if (!id || !secret)
		return 0;
	if (!region)
		region = jitk__env("AWS_DEFAULT_REGION");
	if (!region)
		region = "us-east-1";
	r->sigv4 = jitk__asprintf("aws:amz:%s:s3", region);
	r->akid = jitk__strdup(id);
	r->secret = jitk__strdup(secret);
	if (token)
		r->token_header = jitk__asprintf("x-amz-security-token: %s", token);
	return !r->sigv4 || !r->akid || !r->secret || (token && !r->token_header) ? -1 : 0;
}

int jitk__remote_open(jitk_remote **out, const char *urls, int read_only, long connect_ms,
		      long timeout_ms, const jitk_logger *log)
{
	jitk_remote *r;
	const char *p = urls;

	*out = NULL;
	if (!urls || !*urls)
		return 0;
	if (!(r = calloc(1, sizeof(*r))))
		return jitk__error(JITK_ENOMEM, "out of memory");
	if (log)
		r->log = *log;
	r->read_only = read_only;
	r->connect_ms = connect_ms > 0 ? connect_ms : JITK_REMOTE_CONNECT_MS;
	r->timeout_ms = timeout_ms > 0 ? timeout_ms : JITK_REMOTE_TIMEOUT_MS;
	r->fast_ms = r->timeout_ms / 10 > 0 ? r->timeout_ms / 10 : 1;
	r->pid = getpid();
	pthread_mutex_init(&r->lock, NULL);
	while (*p) {
		size_t n = strcspn(p, ",");

		if (n && add_url(r, p, n))
			goto oom;
		p += n + (p[n] == ',');
	}
	if (aws_setup(r))
		goto oom;
	pthread_once(&curl_once, curl_init);
	if (!cu) {
		jitk__log(&r->log, JITK_LOG_WARN, "remote cache not used: it needs libcurl, and %s",
			  curl_why);
		jitk__remote_close(r);
		return 0;
	}
	if (curl_init_rc != CURLE_OK) {
		jitk__log(&r->log, JITK_LOG_WARN, "remote cache not used: libcurl did not initialize (%s)",
			  cu->easy_strerror(curl_init_rc));
		jitk__remote_close(r);
		return 0;
	}
	if (!r->nurls) {
		jitk__remote_close(r);
		return 0;
	}
	/* With CURLOPT_NOSIGNAL, only the threaded (or c-ares) resolver keeps
	 * a name lookup within the timeouts. */
	if (!(cu->version_info(CURLVERSION_NOW)->features & CURL_VERSION_ASYNCHDNS))
		jitk__log(&r->log, JITK_LOG_WARN,
			  "remote cache: libcurl %s looks names up synchronously: a lookup that hangs is "
			  "not bounded by the remote's timeouts (use IP addresses, or a libcurl with AsynchDNS)",
			  cu->version_info(CURLVERSION_NOW)->version);
	*out = r;
	return 0;
oom:
	jitk__remote_close(r);
	return jitk__error(JITK_ENOMEM, "out of memory");
}

void jitk__remote_close(jitk_remote *r)
{
	size_t i;

	if (!r)
		return;
	/* Handles inherited over fork() are left alone: cleaning one up could
	 * write (a TLS close) on a connection the parent still uses. */
	if (r->pid == getpid())
		for (i = 0; i < r->nidle; i++)
			cu->easy_cleanup(r->idle[i]);
	for (i = 0; i < r->nurls; i++) {
		free(r->urls[i].base);
		free(r->urls[i].shown);
		free(r->urls[i].name);
	}
	free(r->urls);
	free(r->sigv4);
	free(r->akid);
	free(r->secret);
	free(r->token_header);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

int jitk__remote_read_only(const jitk_remote *r)
{
	return r->read_only;
}

jitk_remote_counters *jitk__remote_counters(jitk_remote *r)
{
	return &r->n;
}

/* ------------------------------------------------------------- sharding */

/* The weight of (URL, key); the URL without its credentials, so that
 * nodes with other credentials (a builder that may write, nodes that may
 * only read) agree on every key's URL. */
static uint64_t score(const char *base, const uint8_t key[JITK_HASH_SIZE])
{
	jitk_hasher *h = jitk__hasher_new();
	uint8_t d[JITK_HASH_SIZE];
	uint64_t v = 0;
	int i;

	if (!h)
		return 0;
	jitk__hasher_field(h, "url", base, strlen(base));
	jitk__hasher_field(h, "key", key, JITK_HASH_SIZE);
	if (jitk__hasher_final(h, d))
		return 0;
	for (i = 0; i < 8; i++)
		v = v << 8 | d[i];
	return v;
}

static remote_url *owner(const jitk_remote *r, const uint8_t key[JITK_HASH_SIZE])
{
	size_t i, best = 0;
	uint64_t top = 0;

	for (i = 0; r->nurls > 1 && i < r->nurls; i++) {
		uint64_t s = score(r->urls[i].name, key);

		if (!i || s > top) {
			top = s;
			best = i;
		}
	}
	return &r->urls[best];
}

const char *jitk__remote_url(const jitk_remote *r, const uint8_t key[JITK_HASH_SIZE])
{
	return owner(r, key)->shown;
}

int jitk__remote_on(const jitk_remote *r, const uint8_t key[JITK_HASH_SIZE])
{
	return !atomic_load(&owner(r, key)->off);
}

/* ------------------------------------------------------------- requests */

static CURL *handle_take(jitk_remote *r)
{
	CURL *h = NULL;

	pthread_mutex_lock(&r->lock);
	if (r->pid != getpid()) {
		r->nidle = 0; /* inherited over fork(): see jitk__remote_close */
		r->pid = getpid();
	}
	if (r->nidle)
		h = r->idle[--r->nidle];
	pthread_mutex_unlock(&r->lock);
	return h ? h : cu->easy_init();
}

static void handle_give(jitk_remote *r, CURL *h)
{
	/* curl_easy_reset keeps the handle's live connections. */
	cu->easy_reset(h);
	pthread_mutex_lock(&r->lock);
	if (r->pid == getpid() && r->nidle < IDLE_MAX) {
		r->idle[r->nidle++] = h;
		h = NULL;
	}
	pthread_mutex_unlock(&r->lock);
	if (h)
		cu->easy_cleanup(h);
}

typedef struct {
	uint8_t *data;
	size_t len, cap;
	int too_big;
} sink;

static size_t sink_write(char *p, size_t size, size_t n, void *ctx)
{
	sink *s = ctx;
	size_t k = size * n;

	if ((curl_off_t)(s->len + k) > OBJECT_MAX) {
		s->too_big = 1;
		return 0; /* aborts the transfer */
	}
	if (s->len + k > s->cap) {
		size_t cap = s->cap ? s->cap : 64 << 10;
		uint8_t *d;

		while (cap < s->len + k)
			cap *= 2;
		if (!(d = realloc(s->data, cap)))
			return 0;
		s->data = d;
		s->cap = cap;
	}
	memcpy(s->data + s->len, p, k);
	s->len += k;
	return k;
}

/* The body of an answer to an upload: read and dropped, up to a bound
 * (a status page; an endless one aborts the transfer). */
#define DISCARD_MAX (64u << 10)

static size_t discard(char *p, size_t size, size_t n, void *ctx)
{
	size_t *seen = ctx;

	(void)p;
	*seen += size * n;
	return *seen > DISCARD_MAX ? 0 : size * n;
}

typedef struct {
	const uint8_t *data;
	size_t len, at;
} source;

static size_t source_read(char *p, size_t size, size_t n, void *ctx)
{
	source *s = ctx;
	size_t k = size * n;

	if (k > s->len - s->at)
		k = s->len - s->at;
	memcpy(p, s->data + s->at, k);
	s->at += k;
	return k;
}

/* The request's headers. Unsigned: no "Expect: 100-continue" wait on
 * uploads. Signed (SigV4): the payload's hash (which S3 requires and
 * libcurl signs with) and the session token - and Expect left alone:
 * libcurl 7.88 signs a header the list removes as if it were sent empty,
 * which no server can verify (tests/test_remote.c checks the signatures). */
static struct curl_slist *headers(const jitk_remote *r, const uint8_t *body, size_t len)
{
	struct curl_slist *l, *t;
	uint8_t sum[JITK_HASH_SIZE];
	char line[64 + 2 * JITK_HASH_SIZE];

	if (!r->sigv4)
		return cu->slist_append(NULL, "Expect:");
	if (jitk__sha256(sum, body, len))
		return NULL;
	memcpy(line, "x-amz-content-sha256: ", 22);
	jitk__hex(line + 22, sum, JITK_HASH_SIZE);
	l = cu->slist_append(NULL, line);
	if (l && r->token_header && !(t = cu->slist_append(l, r->token_header))) {
		cu->slist_free_all(l);
		return NULL;
	}
	return l;
}

/* timeout_ms bounds the whole transfer: the name lookup (libcurl's
 * threaded resolver: CURL_VERSION_ASYNCHDNS), connecting and TLS (also
 * within connect_ms), the request and the whole answer. */
static void setup(const jitk_remote *r, CURL *h, const char *url, char *err,
		  struct curl_slist *hdrs, long timeout_ms)
{
	cu->easy_setopt(h, CURLOPT_URL, url);
	/* No signals: no SIGALRM for name lookups, no handler of libcurl's;
	 * SIGPIPE is handled by jitk__sigpipe_block around the transfer. */
	cu->easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	cu->easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, r->connect_ms < timeout_ms ? r->connect_ms
										 : timeout_ms);
	cu->easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
	cu->easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
#if LIBCURL_VERSION_NUM >= 0x075500
	cu->easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
#else
	cu->easy_setopt(h, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
	cu->easy_setopt(h, CURLOPT_ERRORBUFFER, err);
	cu->easy_setopt(h, CURLOPT_USERAGENT, "jitk/" JITK_VERSION);
	cu->easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	if (r->sigv4) {
		cu->easy_setopt(h, CURLOPT_AWS_SIGV4, r->sigv4);
		cu->easy_setopt(h, CURLOPT_USERNAME, r->akid);
		cu->easy_setopt(h, CURLOPT_PASSWORD, r->secret);
	}
}

/* u is off for the process, with one warning (the first) saying why. */
static void url_off(jitk_remote *r, remote_url *u, const char *what)
{
	atomic_fetch_add(&r->n.errors, 1);
	if (!atomic_exchange(&u->off, 1))
		jitk__log(&r->log, JITK_LOG_WARN, "remote cache %s: %s; not using it again in this process",
			  u->shown, what);
}

/* The URL failed. why may quote libcurl, whose messages can hold a URL
 * (a proxy's): masked too. */
static void url_failed(jitk_remote *r, remote_url *u, const char *what, const char *hex,
		       const char *why)
{
	char masked[CURL_ERROR_SIZE + 200], text[CURL_ERROR_SIZE + 300];

	jitk__redact(masked, sizeof(masked), why);
	snprintf(text, sizeof(text), "%s of %.16s... failed (%s)", what, hex, masked);
	url_off(r, u, text);
}

/* How long the next request of u may take: the request timeout, but no
 * more than what is left of u's time budget (one request timeout spent
 * in slow answers), and never less than a fast answer's time. */
static long time_allowed(const jitk_remote *r, remote_url *u)
{
	long long left = (long long)r->timeout_ms - (long long)(atomic_load(&u->slow_us) / 1000);

	return left >= r->timeout_ms ? r->timeout_ms : left > r->fast_ms ? (long)left : r->fast_ms;
}

/* A request of u took ms: an answer slower than fast_ms is charged to u's
 * budget; 1 when that spent it. */
static int charge(const jitk_remote *r, remote_url *u, double ms, unsigned long long *total)
{
	unsigned long long us = (unsigned long long)(ms * 1000.0);

	if (ms <= (double)r->fast_ms)
		return 0;
	*total = atomic_fetch_add(&u->slow_us, us) + us;
	return *total >= (unsigned long long)r->timeout_ms * 1000;
}

/* One GET (put == NULL) or PUT of key's object. */
static int request(jitk_remote *r, const uint8_t key[JITK_HASH_SIZE], const uint8_t *put,
		   size_t put_len, sink *body)
{
	remote_url *u = owner(r, key);
	char hex[2 * JITK_HASH_SIZE + 1], err[CURL_ERROR_SIZE], why[CURL_ERROR_SIZE + 160];
	struct curl_slist *hdrs = NULL;
	jitk_sigpipe_guard g;
	source src = { put, put_len, 0 };
	CURL *h = NULL;
	CURLcode cr;
	long code = 0, allowed = time_allowed(r, u);
	unsigned long long slow = 0;
	size_t seen = 0;
	double t0, ms;
	char *url;
	int rc = JITK_EIO;

	if (atomic_load(&u->off))
		return JITK_EIO;
	jitk__hex(hex, key, JITK_HASH_SIZE);
	url = jitk__asprintf("%s/v1/%s", u->base, hex);
	hdrs = headers(r, put ? put : (const uint8_t *)"", put ? put_len : 0);
	if (!url || !hdrs || !(h = handle_take(r))) {
		snprintf(why, sizeof(why), "out of memory");
		goto failed;
	}
	err[0] = '\0';
	setup(r, h, url, err, hdrs, allowed);
	if (put) {
		cu->easy_setopt(h, CURLOPT_UPLOAD, 1L);
		cu->easy_setopt(h, CURLOPT_READFUNCTION, source_read);
		cu->easy_setopt(h, CURLOPT_READDATA, &src);
		cu->easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)put_len);
		cu->easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
		cu->easy_setopt(h, CURLOPT_WRITEDATA, &seen);
	} else {
		cu->easy_setopt(h, CURLOPT_WRITEFUNCTION, sink_write);
		cu->easy_setopt(h, CURLOPT_WRITEDATA, body);
		cu->easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, OBJECT_MAX);
	}
	t0 = jitk__now_ms();
	jitk__sigpipe_block(&g);
	cr = cu->easy_perform(h);
	jitk__sigpipe_restore(&g);
	ms = jitk__now_ms() - t0;
	atomic_fetch_add(&r->n.us, (unsigned long long)(ms * 1000.0));
	cu->easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
	if (cr != CURLE_OK) {
		snprintf(why, sizeof(why), "%s%s",
			 body && body->too_big ? "the object is larger than any cache entry"
			 : cr == CURLE_FILESIZE_EXCEEDED ? "the object is larger than any cache entry"
			 : seen > DISCARD_MAX ? "an answer to the upload longer than 64 KiB"
			 : *err			   ? err
						   : cu->easy_strerror(cr),
			 cr == CURLE_OPERATION_TIMEDOUT && allowed < r->timeout_ms
				 ? " (the time left of its budget for slow answers)"
				 : "");
	} else if (put ? code >= 200 && code < 300 : code == 200) {
		rc = JITK_OK;
	} else if (!put && code == 404) {
		rc = JITK_ENOENT;
	} else {
		snprintf(why, sizeof(why), "HTTP %ld%s", code,
			 code == 403 && r->sigv4 && !put
				 ? " (S3 answers 403 for a missing object unless s3:ListBucket is granted)"
				 : "");
	}
	if (charge(r, u, ms, &slow) && rc != JITK_EIO) {
		/* answered, but the answers were slow: this one is used, and
		 * the URL is off from now on */
		snprintf(why, sizeof(why),
			 "slow answers took %llu ms in all, its budget of one request timeout (%ld ms)",
			 slow / 1000, r->timeout_ms);
		url_off(r, u, why);
	}
failed:
	if (rc == JITK_EIO)
		url_failed(r, u, put ? "upload" : "download", hex, why);
	if (h)
		handle_give(r, h);
	cu->slist_free_all(hdrs);
	free(url);
	return rc;
}

int jitk__remote_get(jitk_remote *r, const uint8_t key[JITK_HASH_SIZE], uint8_t **out,
		     size_t *len)
{
	sink body = { NULL, 0, 0, 0 };
	int rc = request(r, key, NULL, 0, &body);

	*out = NULL;
	*len = 0;
	if (rc) {
		free(body.data);
		return rc;
	}
	*out = body.data ? body.data : malloc(1);
	*len = body.len;
	if (!*out)
		return JITK_EIO;
	return JITK_OK;
}

int jitk__remote_put(jitk_remote *r, const uint8_t key[JITK_HASH_SIZE], const uint8_t *data,
		     size_t len)
{
	int rc;

	if (r->read_only)
		return JITK_EINVAL;
	if (!(rc = request(r, key, data, len, NULL)))
		atomic_fetch_add(&r->n.uploads, 1);
	return rc;
}
