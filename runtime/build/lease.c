/* lease.c - leases on cold keys on a Redis server, through hiredis.
 *
 * A lease is the Redis key jitk:lease:v1:<64 hex>, set with NX and a TTL
 * (PX) to a token naming this process (host, pid, random); it is given
 * back with a compare-and-delete script, so an expired lease that another
 * process took since is never deleted. One connection per process, made
 * on first use, used under a mutex; connecting and every command time out
 * after the connect timeout (100 ms by default): a lease is only worth
 * having if it is quick, so a slow server fails open like a dead one.
 * hiredis writes with write(2): jitk__sigpipe_block covers every call. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "build/lease.h"
#include "build/remote.h"

#define KEY_PREFIX "jitk:lease:v1:"

struct jitk_lease {
	char *url; /* for messages, without the password */
	char *host, *user, *password;
	int port, db;
	long timeout_ms, ttl_ms;
	char token[160];
	jitk_logger log;
	pthread_mutex_t lock; /* ctx, pid */
	redisContext *ctx;
	pid_t pid; /* the process ctx was connected in */
	atomic_int off;
	jitk_lease_counters n;
};

/* ---------------------------------------------------------------- open */

/* redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]; HOST may be [IPv6]. */
static const char *parse_url(jitk_lease *l, const char *url)
{
	const char *p, *at, *host, *end;
	char *rest = NULL;
	long v;

	if (strncasecmp(url, "redis://", 8))
		return "not a redis:// URL";
	p = url + 8;
	at = strchr(p, '@');
	if (at) {
		const char *colon = memchr(p, ':', (size_t)(at - p));

		if (!colon)
			return "credentials without a ':' (redis://[USER]:PASSWORD@HOST)";
		if (colon > p && !(l->user = jitk__strndup(p, (size_t)(colon - p))))
			return "out of memory";
		if (!(l->password = jitk__strndup(colon + 1, (size_t)(at - colon - 1))))
			return "out of memory";
		p = at + 1;
	}
	if (*p == '[') {
		host = p + 1;
		if (!(end = strchr(host, ']')))
			return "an IPv6 address without ']'";
		p = end + 1;
	} else {
		host = p;
		end = p + strcspn(p, ":/");
		p = end;
	}
	if (end == host)
		return "no host";
	if (!(l->host = jitk__strndup(host, (size_t)(end - host))))
		return "out of memory";
	l->port = 6379;
	if (*p == ':') {
		v = strtol(p + 1, &rest, 10);
		if (rest == p + 1 || v < 1 || v > 65535)
			return "a bad port";
		l->port = (int)v;
		p = rest;
	}
	if (*p == '/' && p[1]) {
		v = strtol(p + 1, &rest, 10);
		if (rest == p + 1 || *rest || v < 0 || v > 1000000)
			return "a bad database number";
		l->db = (int)v;
		p = rest;
	} else if (*p == '/') {
		p++;
	}
	if (*p)
		return "unexpected text after the host";
	return NULL;
}

static void make_token(jitk_lease *l)
{
	char host[64] = "";
	unsigned long long rnd = 0;

	if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd))
		rnd = (unsigned long long)time(NULL) ^ (unsigned long long)(uintptr_t)l;
	(void)gethostname(host, sizeof(host) - 1);
	snprintf(l->token, sizeof(l->token), "%s:%ld:%016llx", host, (long)getpid(), rnd);
}

int jitk__lease_open(jitk_lease **out, const char *url, long timeout_ms, long ttl_ms,
		     const jitk_logger *log)
{
	jitk_lease *l;
	const char *bad;

	*out = NULL;
	if (!url || !*url)
		return 0;
	if (!(l = calloc(1, sizeof(*l))))
		return jitk__error(JITK_ENOMEM, "out of memory");
	if (log)
		l->log = *log;
	l->timeout_ms = timeout_ms > 0 ? timeout_ms : JITK_REMOTE_CONNECT_MS;
	l->ttl_ms = ttl_ms > 0 ? ttl_ms : JITK_LEASE_TTL_MS;
	pthread_mutex_init(&l->lock, NULL);
	if ((bad = parse_url(l, url))) {
		int oom = !strcmp(bad, "out of memory");

		if (!oom)
			jitk__log(&l->log, JITK_LOG_WARN, "lease server '%.200s' ignored: %s",
				  strchr(url, '@') ? "redis://...@..." : url, bad);
		jitk__lease_close(l);
		return oom ? jitk__error(JITK_ENOMEM, "out of memory") : 0;
	}
	l->url = jitk__asprintf("redis://%s%s%s:%d", strchr(l->host, ':') ? "[" : "", l->host,
				strchr(l->host, ':') ? "]" : "", l->port);
	if (!l->url) {
		jitk__lease_close(l);
		return jitk__error(JITK_ENOMEM, "out of memory");
	}
	make_token(l);
	*out = l;
	return 0;
}

void jitk__lease_close(jitk_lease *l)
{
	if (!l)
		return;
	if (l->ctx)
		redisFree(l->ctx); /* closes the socket; writes nothing */
	pthread_mutex_destroy(&l->lock);
	free(l->url);
	free(l->host);
	free(l->user);
	free(l->password);
	free(l);
}

long jitk__lease_ttl(const jitk_lease *l)
{
	return l->ttl_ms;
}

jitk_lease_counters *jitk__lease_counters(jitk_lease *l)
{
	return &l->n;
}

/* ------------------------------------------------------------ commands */

/* The server failed: off for the process, one warning. Lock held. */
static void failed(jitk_lease *l, const char *what, const char *why)
{
	atomic_fetch_add(&l->n.errors, 1);
	if (!atomic_exchange(&l->off, 1))
		jitk__log(&l->log, JITK_LOG_WARN,
			  "lease server %s: %s failed (%s); compiling without leases in this process",
			  l->url, what, why && *why ? why : "no answer");
	if (l->ctx) {
		redisFree(l->ctx);
		l->ctx = NULL;
	}
}

static redisReply *run(jitk_lease *l, const char *what, int argc, const char **argv);

/* Connect (again after fork()), authenticate, select. Lock held. */
static int connect_now(jitk_lease *l)
{
	struct timeval tv = { l->timeout_ms / 1000, (l->timeout_ms % 1000) * 1000 };
	redisReply *r;
	char db[16];

	if (l->ctx && l->pid == getpid())
		return 0;
	if (l->ctx)
		redisFree(l->ctx); /* the parent's connection: only our copy closes */
	l->pid = getpid();
	l->ctx = redisConnectWithTimeout(l->host, l->port, tv);
	if (!l->ctx || l->ctx->err) {
		failed(l, "connecting", l->ctx ? l->ctx->errstr : "out of memory");
		return -1;
	}
	if (redisSetTimeout(l->ctx, tv) != REDIS_OK) {
		failed(l, "connecting", "cannot set a timeout");
		return -1;
	}
	if (l->password) {
		const char *auth[3] = { "AUTH", l->user ? l->user : l->password, l->password };

		if (!(r = run(l, "AUTH", l->user ? 3 : 2, auth)))
			return -1;
		freeReplyObject(r);
	}
	if (l->db) {
		const char *sel[2] = { "SELECT", db };

		snprintf(db, sizeof(db), "%d", l->db);
		if (!(r = run(l, "SELECT", 2, sel)))
			return -1;
		freeReplyObject(r);
	}
	return 0;
}

/* One command on the connection; NULL after a failure (then off). Lock
 * held. */
static redisReply *run(jitk_lease *l, const char *what, int argc, const char **argv)
{
	jitk_sigpipe_guard g;
	redisReply *r;

	jitk__sigpipe_block(&g);
	r = redisCommandArgv(l->ctx, argc, argv, NULL);
	jitk__sigpipe_restore(&g);
	if (!r || r->type == REDIS_REPLY_ERROR) {
		char why[256];

		snprintf(why, sizeof(why), "%s", r ? r->str : l->ctx->errstr);
		if (r)
			freeReplyObject(r);
		failed(l, what, why);
		return NULL;
	}
	return r;
}

/* Connect if needed, then run the command. */
static redisReply *command(jitk_lease *l, const char *what, int argc, const char **argv)
{
	redisReply *r = NULL;

	if (atomic_load(&l->off))
		return NULL;
	pthread_mutex_lock(&l->lock);
	if (!atomic_load(&l->off) && !connect_now(l))
		r = run(l, what, argc, argv);
	pthread_mutex_unlock(&l->lock);
	return r;
}

static void key_name(char out[sizeof(KEY_PREFIX) + 64], const char *hex)
{
	snprintf(out, sizeof(KEY_PREFIX) + 64, KEY_PREFIX "%.64s", hex);
}

/* PTTL: HELD (*left_ms), FREE, or OFF. */
static int pttl(jitk_lease *l, const char *key, long *left_ms)
{
	const char *argv[2] = { "PTTL", key };
	redisReply *r = command(l, "PTTL", 2, argv);
	int st;

	if (!r)
		return JITK_LEASE_OFF;
	if (r->type != REDIS_REPLY_INTEGER) {
		freeReplyObject(r);
		pthread_mutex_lock(&l->lock);
		failed(l, "PTTL", "an answer that is not an integer");
		pthread_mutex_unlock(&l->lock);
		return JITK_LEASE_OFF;
	}
	/* -2: no such key; -1: a key without expiry, which jitk never sets:
	 * waiting on it could be forever, so it does not count. */
	st = r->integer >= 0 ? JITK_LEASE_HELD : JITK_LEASE_FREE;
	*left_ms = r->integer >= 0 ? (long)r->integer : 0;
	freeReplyObject(r);
	return st;
}

int jitk__lease_take(jitk_lease *l, const char *hex, long *left_ms)
{
	char key[sizeof(KEY_PREFIX) + 64], ttl[24];
	const char *argv[6] = { "SET", key, l->token, "NX", "PX", ttl };
	redisReply *r;
	int st;

	*left_ms = 0;
	key_name(key, hex);
	snprintf(ttl, sizeof(ttl), "%ld", l->ttl_ms);
	if (!(r = command(l, "SET", 6, argv)))
		return JITK_LEASE_OFF;
	st = r->type == REDIS_REPLY_STATUS && !strcasecmp(r->str, "OK") ? JITK_LEASE_TAKEN
	     : r->type == REDIS_REPLY_NIL			       ? JITK_LEASE_HELD
								       : -1;
	freeReplyObject(r);
	if (st < 0) {
		pthread_mutex_lock(&l->lock);
		failed(l, "SET", "an unexpected answer");
		pthread_mutex_unlock(&l->lock);
		return JITK_LEASE_OFF;
	}
	if (st == JITK_LEASE_TAKEN) {
		atomic_fetch_add(&l->n.taken, 1);
		*left_ms = l->ttl_ms;
		return st;
	}
	/* Held; how long for (it may have expired in between: then go). */
	st = pttl(l, key, left_ms);
	return st == JITK_LEASE_FREE ? JITK_LEASE_OFF : st;
}

int jitk__lease_check(jitk_lease *l, const char *hex, long *left_ms)
{
	char key[sizeof(KEY_PREFIX) + 64];

	*left_ms = 0;
	key_name(key, hex);
	return pttl(l, key, left_ms);
}

void jitk__lease_release(jitk_lease *l, const char *hex)
{
	static const char script[] =
		"if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) "
		"else return 0 end";
	char key[sizeof(KEY_PREFIX) + 64];
	const char *argv[5] = { "EVAL", script, "1", key, l->token };
	redisReply *r;

	key_name(key, hex);
	if ((r = command(l, "EVAL (release)", 5, argv)))
		freeReplyObject(r);
}
