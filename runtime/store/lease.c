/* lease.c - leases on cold keys on a Redis server, through hiredis.
 *
 * A lease is the Redis key jitk:lease:v1:<64 hex>, set with NX and a TTL
 * (PX) to a token naming this process (host, pid, random); it is given
 * back with a compare-and-delete script, so an expired lease that another
 * process took since is never deleted. One connection per process, made
 * on first use, used under a mutex. hiredis formats the commands and
 * parses the replies; the socket is jitk's own, so that every step has a
 * deadline for the whole of it, not for each read: the name lookup and
 * the connection together, then each command (sent and its whole reply
 * read), each within the connect timeout (100 ms by default). A lease is
 * only worth having if it is quick, so a slow server fails open like a
 * dead one. A reply is bounded too (REPLY_MAX bytes, and never an array:
 * no command jitk sends answers with one), so a server streaming an
 * endless reply costs one timeout and no memory. Writes use MSG_NOSIGNAL,
 * inside jitk__sigpipe_block as every remote operation is. */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "store/optlib.h"
#include "store/lease.h"
#include "store/remote.h"

#define KEY_PREFIX "jitk:lease:v1:"
/* The longest reply read: jitk's commands answer with a status, an
 * integer, a nil or an error line, all far shorter. */
#define REPLY_MAX 1024

struct jitk_lease {
	char *url; /* for messages, without the password */
	char *host, *user, *password;
	int port, db;
	long timeout_ms, ttl_ms;
	char token[160];
	jitk_logger log;
	pthread_mutex_t lock; /* fd, pid */
	int fd;    /* the connection, or -1 */
	pid_t pid; /* the process fd was connected in */
	atomic_int off;
	atomic_ullong wasted_us; /* waits that ended without the holder's upload */
	jitk_lease_counters n;
	/* renewal: the keys this process holds, and the thread renewing them */
	pthread_mutex_t held_lock; /* held, nheld, stop, renewer_pid */
	pthread_cond_t wake;
	char (*held)[65];
	size_t nheld, held_cap;
	int stop;
	pid_t renewer_pid; /* the process the thread runs in (0: none) */
	pthread_t renewer;
	struct jitk_lease *next; /* in the list of live leases (fork safety) */
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

/* hiredis, loaded by the first lease server (optlib.h; once per process) */
#define hr (jitk__hiredis(NULL))

/* ---------------------------------------------------------------- fork */

/* fork() copies the lease's mutexes as they are: one that another thread
 * held (the renewer, inside a command, for up to the timeout) stayed
 * locked for ever in the child, which has no such thread, and the child's
 * first lease operation hung (a Python program forking its workers after
 * a compile). So every live lease is in a list, and around fork() the
 * forking thread takes all their locks and gives them back on both sides:
 * the child's copies are then unlocked by their owner. A fork waits for a
 * command in flight, which its deadlines bound. The order is the list's
 * lock, then each lease's held_lock, then its lock; the rest of this file
 * never holds both of a lease's locks at once, nor either while taking
 * the list's, so no order of theirs crosses this one. */
static pthread_mutex_t leases_lock = PTHREAD_MUTEX_INITIALIZER;
static jitk_lease *leases;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static int fork_err; /* pthread_atfork's error, if it failed */

static void fork_prepare(void)
{
	pthread_mutex_lock(&leases_lock);
	for (jitk_lease *l = leases; l; l = l->next) {
		pthread_mutex_lock(&l->held_lock);
		pthread_mutex_lock(&l->lock);
	}
}

static void fork_parent(void)
{
	for (jitk_lease *l = leases; l; l = l->next) {
		pthread_mutex_unlock(&l->lock);
		pthread_mutex_unlock(&l->held_lock);
	}
	pthread_mutex_unlock(&leases_lock);
}

/* The renewer is not in the child: the keys it renewed are the parent's,
 * and the child starts its own at its first take (held_add). It may have
 * been waiting on wake, a waiter that glibc's condition variable counts
 * and that never leaves in the child (destroying it, in close, waited for
 * ever): made anew, not destroyed. The token names the child; the
 * connection is the parent's, and the child's first command makes its own
 * (connect_now, by pid). */
static void fork_child(void)
{
	for (jitk_lease *l = leases; l; l = l->next) {
		l->renewer_pid = 0;
		l->nheld = 0;
		pthread_cond_init(&l->wake, NULL);
		make_token(l);
		pthread_mutex_unlock(&l->lock);
		pthread_mutex_unlock(&l->held_lock);
	}
	pthread_mutex_unlock(&leases_lock);
}

static void fork_register(void)
{
	fork_err = pthread_atfork(fork_prepare, fork_parent, fork_child);
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
	l->fd = -1;
	pthread_mutex_init(&l->lock, NULL);
	pthread_mutex_init(&l->held_lock, NULL);
	pthread_cond_init(&l->wake, NULL);
	if ((bad = parse_url(l, url))) {
		int oom = !strcmp(bad, "out of memory");
		char shown[256];

		jitk__redact_url(shown, sizeof(shown), url);
		if (!oom)
			jitk__log(&l->log, JITK_LOG_WARN, "lease server '%.200s' ignored: %s", shown, bad);
		jitk__lease_close(l);
		return oom ? jitk__error(JITK_ENOMEM, "out of memory") : 0;
	}
	l->url = jitk__asprintf("redis://%s%s%s:%d", strchr(l->host, ':') ? "[" : "", l->host,
				strchr(l->host, ':') ? "]" : "", l->port);
	if (!l->url) {
		jitk__lease_close(l);
		return jitk__error(JITK_ENOMEM, "out of memory");
	}
	{
		const char *why;
		const jitk_hiredis_api *api = jitk__hiredis(&why);

		if (!api) {
			jitk__log(&l->log, JITK_LOG_WARN, "lease server %s not used: leases need "
				  "hiredis, and %s; compiling without leases in this process", l->url,
				  why);
			jitk__lease_close(l);
			return 0;
		}
	}
	pthread_once(&fork_once, fork_register);
	if (fork_err) {
		jitk__log(&l->log, JITK_LOG_WARN, "lease server %s not used: no fork handlers (%s); "
			  "compiling without leases in this process", l->url, strerror(fork_err));
		jitk__lease_close(l);
		return 0;
	}
	make_token(l);
	pthread_mutex_lock(&leases_lock);
	l->next = leases;
	leases = l;
	pthread_mutex_unlock(&leases_lock);
	*out = l;
	return 0;
}

void jitk__lease_close(jitk_lease *l)
{
	int join;

	if (!l)
		return;
	pthread_mutex_lock(&leases_lock);
	for (jitk_lease **p = &leases; *p; p = &(*p)->next)
		if (*p == l) {
			*p = l->next;
			break;
		}
	pthread_mutex_unlock(&leases_lock);
	pthread_mutex_lock(&l->held_lock);
	join = l->renewer_pid && l->renewer_pid == getpid();
	l->stop = 1;
	pthread_cond_broadcast(&l->wake);
	pthread_mutex_unlock(&l->held_lock);
	if (join)
		pthread_join(l->renewer, NULL);
	if (l->fd >= 0)
		close(l->fd); /* writes nothing; in a child, closes only its copy */
	pthread_cond_destroy(&l->wake);
	pthread_mutex_destroy(&l->held_lock);
	free(l->held);
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

/* Turn leases off for the process, with one warning saying what. */
static void turn_off(jitk_lease *l, const char *what)
{
	atomic_fetch_add(&l->n.errors, 1);
	if (!atomic_exchange(&l->off, 1))
		jitk__log(&l->log, JITK_LOG_WARN, "lease server %s: %s; compiling without leases in this process",
			  l->url, what);
}

/* The server failed: off for the process, one warning. Lock held. */
static void failed(jitk_lease *l, const char *what, const char *why)
{
	char text[320];

	snprintf(text, sizeof(text), "%s failed (%s)", what, why && *why ? why : "no answer");
	turn_off(l, text);
	if (l->fd >= 0) {
		close(l->fd);
		l->fd = -1;
	}
}

/* Wait until fd is ready for events or the deadline (jitk__now_ms) has
 * passed: 1 ready, 0 deadline, -1 error (errno). */
static int wait_fd(int fd, short events, double deadline)
{
	for (;;) {
		double left = deadline - jitk__now_ms();
		struct pollfd p = { fd, events, 0 };
		int k;

		if (left <= 0)
			return 0;
		k = poll(&p, 1, (int)left + 1);
		if (k > 0)
			return 1;
		if (k < 0 && errno != EINTR)
			return -1;
	}
}

/* A name lookup, run on its own thread so that the caller can stop
 * waiting at its deadline (getaddrinfo has none); the thread and the
 * caller share it, and the last one done frees it. */
typedef struct {
	pthread_mutex_t mu;
	pthread_cond_t done_cv;
	int refs, done, rc;
	char *host, port[8];
	struct addrinfo *res;
} lookup;

static void lookup_unref(lookup *q)
{
	int left;

	pthread_mutex_lock(&q->mu);
	left = --q->refs;
	pthread_mutex_unlock(&q->mu);
	if (left)
		return;
	if (q->res)
		freeaddrinfo(q->res);
	pthread_cond_destroy(&q->done_cv);
	pthread_mutex_destroy(&q->mu);
	free(q->host);
	free(q);
}

static const struct addrinfo tcp_hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };

static void *lookup_thread(void *arg)
{
	lookup *q = arg;
	struct addrinfo *res = NULL;
	int rc = getaddrinfo(q->host, q->port, &tcp_hints, &res);

	pthread_mutex_lock(&q->mu);
	q->rc = rc;
	q->res = res;
	q->done = 1;
	pthread_cond_signal(&q->done_cv);
	pthread_mutex_unlock(&q->mu);
	lookup_unref(q);
	return NULL;
}

/* Resolve l->host by the deadline: 0 with *out (freeaddrinfo), else -1
 * with why. A numeric address needs no thread. */
static int resolve(jitk_lease *l, double deadline, struct addrinfo **out, char *why, size_t n)
{
	struct addrinfo numeric = tcp_hints;
	pthread_condattr_t ca;
	pthread_t t;
	sigset_t all, old;
	struct timespec ts;
	lookup *q;
	char port[8];
	int rc;

	snprintf(port, sizeof(port), "%d", l->port);
	numeric.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
	*out = NULL;
	if (!getaddrinfo(l->host, port, &numeric, out))
		return 0;
	if (!(q = calloc(1, sizeof(*q))) || !(q->host = jitk__strdup(l->host))) {
		free(q);
		snprintf(why, n, "out of memory");
		return -1;
	}
	memcpy(q->port, port, sizeof(port));
	q->refs = 2;
	pthread_mutex_init(&q->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&q->done_cv, &ca);
	pthread_condattr_destroy(&ca);
	/* the thread takes no signal of the host's */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&t, NULL, lookup_thread, q);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		q->refs = 1;
		lookup_unref(q);
		snprintf(why, n, "cannot start a name lookup: %s", strerror(rc));
		return -1;
	}
	pthread_detach(t);
	{
		double left = deadline - jitk__now_ms();
		long ms = left > 0 ? (long)left : 0;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += ms / 1000;
		ts.tv_nsec += (ms % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
	}
	pthread_mutex_lock(&q->mu);
	while (!q->done && pthread_cond_timedwait(&q->done_cv, &q->mu, &ts) != ETIMEDOUT)
		;
	if (q->done && !q->rc) {
		*out = q->res;
		q->res = NULL;
	}
	rc = q->done ? q->rc : EAI_AGAIN;
	if (!q->done)
		snprintf(why, n, "looking up %.100s took longer than %ld ms", l->host, l->timeout_ms);
	else if (rc)
		snprintf(why, n, "cannot look up %.100s: %s", l->host, gai_strerror(rc));
	pthread_mutex_unlock(&q->mu);
	lookup_unref(q);
	return *out ? 0 : -1;
}

/* A TCP connection to one of the addresses by the deadline, or -1 with
 * why. */
static int tcp_connect(const struct addrinfo *ai, double deadline, char *why, size_t n)
{
	int one = 1;

	snprintf(why, n, "no address");
	for (; ai; ai = ai->ai_next) {
		int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), err = 0;
		socklen_t len = sizeof(err);

		if (fd < 0) {
			snprintf(why, n, "%s", strerror(errno));
			continue;
		}
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) && errno != EINPROGRESS) {
			err = errno;
		} else {
			int w = wait_fd(fd, POLLOUT, deadline);

			if (w == 0)
				err = ETIMEDOUT;
			else if (w < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len))
				err = errno;
		}
		if (!err) {
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
			return fd;
		}
		snprintf(why, n, "%s", err == ETIMEDOUT ? "connect timed out" : strerror(err));
		close(fd);
		if (err == ETIMEDOUT)
			break;
	}
	return -1;
}

static redisReply *run(jitk_lease *l, const char *what, int argc, const char **argv);

/* Connect (again after fork()), authenticate, select. Lock held. */
static int connect_now(jitk_lease *l)
{
	double deadline = jitk__now_ms() + (double)l->timeout_ms;
	struct addrinfo *ai = NULL;
	redisReply *r;
	char db[16], why[256];

	if (l->fd >= 0 && l->pid == getpid())
		return 0;
	if (l->fd >= 0)
		close(l->fd); /* the parent's connection: only our copy closes */
	l->fd = -1;
	l->pid = getpid();
	if (resolve(l, deadline, &ai, why, sizeof(why)) ||
	    (l->fd = tcp_connect(ai, deadline, why, sizeof(why))) < 0) {
		if (ai)
			freeaddrinfo(ai);
		failed(l, "connecting", why);
		return -1;
	}
	freeaddrinfo(ai);
	if (l->password) {
		const char *auth[3] = { "AUTH", l->user ? l->user : l->password, l->password };

		if (!(r = run(l, "AUTH", l->user ? 3 : 2, auth)))
			return -1;
		hr->free_reply(r);
	}
	if (l->db) {
		const char *sel[2] = { "SELECT", db };

		snprintf(db, sizeof(db), "%d", l->db);
		if (!(r = run(l, "SELECT", 2, sel)))
			return -1;
		hr->free_reply(r);
	}
	return 0;
}

/* Send the formatted command by the deadline: NULL, or why not. */
static const char *send_all(int fd, const char *cmd, size_t len, double deadline)
{
	size_t at = 0;

	while (at < len) {
		ssize_t k = send(fd, cmd + at, len - at, MSG_NOSIGNAL);
		int w;

		if (k > 0) {
			at += (size_t)k;
			continue;
		}
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			return strerror(errno);
		if ((w = wait_fd(fd, POLLOUT, deadline)) <= 0)
			return w ? strerror(errno) : "timed out sending";
	}
	return NULL;
}

/* Read one whole reply by the deadline into *out: NULL, or why not (then
 * why holds the text). */
static const char *read_reply(jitk_lease *l, redisReader *rd, double deadline, void **out,
			      char *why, size_t n)
{
	char buf[256];
	size_t got = 0;

	*out = NULL;
	while (!*out) {
		ssize_t k;
		int w = wait_fd(l->fd, POLLIN, deadline);

		if (w == 0) {
			snprintf(why, n, "no whole answer within %ld ms", l->timeout_ms);
			return why;
		}
		if (w < 0)
			return strerror(errno);
		k = recv(l->fd, buf, sizeof(buf), 0);
		if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
			continue;
		if (k < 0)
			return strerror(errno);
		if (k == 0)
			return "the server closed the connection";
		/* an array (or a RESP3 aggregate) is never an answer to what
		 * jitk asks, and hiredis would allocate its elements up front */
		if (!got && (!buf[0] || !strchr("+-:$", buf[0]))) {
			snprintf(why, n, "an answer of a kind no lease command gets ('%c')",
				 buf[0] >= ' ' && buf[0] < 127 ? buf[0] : '?');
			return why;
		}
		if ((got += (size_t)k) > REPLY_MAX) {
			snprintf(why, n, "an answer longer than %d bytes", REPLY_MAX);
			return why;
		}
		if (hr->reader_feed(rd, buf, (size_t)k) != REDIS_OK ||
		    hr->reader_get_reply(rd, out) != REDIS_OK) {
			snprintf(why, n, "not the Redis protocol (%s)", rd->errstr);
			return why;
		}
	}
	if (rd->len > rd->pos)
		return "more than one answer to one command";
	return NULL;
}

/* One command on the connection, sent and its whole reply read within
 * the timeout; NULL after a failure (then off). Lock held. */
static redisReply *run(jitk_lease *l, const char *what, int argc, const char **argv)
{
	double deadline = jitk__now_ms() + (double)l->timeout_ms;
	jitk_sigpipe_guard g;
	redisReader *rd = NULL;
	void *r = NULL;
	char *cmd = NULL, why[256] = "";
	const char *bad = NULL;
	int len = hr->format_command_argv(&cmd, argc, argv, NULL);

	if (len < 0 || !(rd = hr->reader_create())) {
		bad = "out of memory";
	} else {
		jitk__sigpipe_block(&g);
		if (!(bad = send_all(l->fd, cmd, (size_t)len, deadline)))
			bad = read_reply(l, rd, deadline, &r, why, sizeof(why));
		jitk__sigpipe_restore(&g);
	}
	if (!bad && ((redisReply *)r)->type == REDIS_REPLY_ERROR) {
		snprintf(why, sizeof(why), "%s", ((redisReply *)r)->str);
		bad = why;
	}
	if (bad) {
		char copy[256];

		snprintf(copy, sizeof(copy), "%s", bad);
		if (r)
			hr->free_reply(r);
		r = NULL;
		failed(l, what, copy);
	}
	if (cmd)
		hr->free_command(cmd);
	if (rd)
		hr->reader_free(rd);
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
		hr->free_reply(r);
		pthread_mutex_lock(&l->lock);
		failed(l, "PTTL", "an answer that is not an integer");
		pthread_mutex_unlock(&l->lock);
		return JITK_LEASE_OFF;
	}
	/* -2: no such key; -1: a key without expiry, which jitk never sets:
	 * waiting on it could be forever, so it does not count. */
	st = r->integer >= 0 ? JITK_LEASE_HELD : JITK_LEASE_FREE;
	*left_ms = r->integer >= 0 ? (long)r->integer : 0;
	hr->free_reply(r);
	return st;
}

/* ------------------------------------------------------------ renewal */

/* A lease lives ttl_ms (10 s by default), and a compile may take longer:
 * a CUTLASS GEMM is a minute of NVRTC, and a busy machine makes that many.
 * A lease expired under its holder let every waiter compile the key too
 * (8 processes, 8 compiles of one GEMM). So the holder keeps its leases
 * alive while it compiles: a thread of this lease, started at the first
 * take in a process, renews every key the process holds each ttl / 4
 * (PEXPIRE back to ttl, only while the value is still this process's
 * token: a lease that expired and went to another process is left to
 * it). A holder that dies stops renewing, and its lease is gone within
 * ttl, as before. Waiters see the renewal as a time to live that went up
 * (jitk__lease_check) and wait on. */

static int held_find(const jitk_lease *l, const char *hex)
{
	for (size_t i = 0; i < l->nheld; i++)
		if (!strncmp(l->held[i], hex, 64))
			return (int)i;
	return -1;
}

static void held_drop(jitk_lease *l, const char *hex)
{
	int i;

	pthread_mutex_lock(&l->held_lock);
	if ((i = held_find(l, hex)) >= 0)
		memcpy(l->held[i], l->held[--l->nheld], sizeof(l->held[0]));
	pthread_mutex_unlock(&l->held_lock);
}

/* Renew one key: 1 renewed, 0 no longer this process's, -1 the server
 * failed (leases are off then). */
static int renew_one(jitk_lease *l, const char *hex)
{
	static const char script[] =
		"if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], "
		"ARGV[2]) else return 0 end";
	char key[sizeof(KEY_PREFIX) + 64], ttl[24];
	const char *argv[6] = { "EVAL", script, "1", key, l->token, ttl };
	redisReply *r;
	int st;

	key_name(key, hex);
	snprintf(ttl, sizeof(ttl), "%ld", l->ttl_ms);
	if (!(r = command(l, "EVAL (renew)", 6, argv)))
		return -1;
	st = r->type == REDIS_REPLY_INTEGER && r->integer == 1;
	hr->free_reply(r);
	return st;
}

static void *renew_loop(void *arg)
{
	jitk_lease *l = arg;
	long period = l->ttl_ms / 4 > 5 ? l->ttl_ms / 4 : 5;
	char(*keys)[65] = NULL;
	size_t cap = 0;

	pthread_mutex_lock(&l->held_lock);
	while (!l->stop) {
		struct timespec ts;
		size_t n;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += period / 1000;
		ts.tv_nsec += (period % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L)
			ts.tv_sec++, ts.tv_nsec -= 1000000000L;
		while (!l->stop && pthread_cond_timedwait(&l->wake, &l->held_lock, &ts) != ETIMEDOUT)
			;
		if (l->stop)
			break;
		if (l->nheld > cap) {
			char(*k)[65] = realloc(keys, l->nheld * sizeof(*keys));

			if (!k)
				continue; /* try again next period */
			keys = k, cap = l->nheld;
		}
		n = l->nheld;
		memcpy(keys, l->held, n * sizeof(*keys));
		pthread_mutex_unlock(&l->held_lock);
		for (size_t i = 0; i < n; i++)
			if (!renew_one(l, keys[i]))
				held_drop(l, keys[i]);
		pthread_mutex_lock(&l->held_lock);
	}
	pthread_mutex_unlock(&l->held_lock);
	free(keys);
	return NULL;
}

/* Remember a key this process took, and see that the renewer runs here
 * (after a fork, the parent's thread is not in the child: fork_child
 * cleared renewer_pid and the parent's keys, and the child's own starts
 * here). */
static void held_add(jitk_lease *l, const char *hex)
{
	pid_t me = getpid();

	pthread_mutex_lock(&l->held_lock);
	if (l->renewer_pid != me) {
		int e;

		e = pthread_create(&l->renewer, NULL, renew_loop, l);
		l->renewer_pid = e ? 0 : me;
		if (e)
			jitk__log(&l->log, JITK_LOG_WARN, "lease server %s: no thread to renew leases "
				  "(%s): a compile longer than a lease's %ld ms lets others compile too",
				  l->url, strerror(e), l->ttl_ms);
	}
	if (held_find(l, hex) < 0) {
		if (l->nheld == l->held_cap) {
			size_t cap = l->held_cap ? 2 * l->held_cap : 8;
			char(*h)[65] = realloc(l->held, cap * sizeof(*h));

			if (h)
				l->held = h, l->held_cap = cap;
		}
		if (l->nheld < l->held_cap)
			snprintf(l->held[l->nheld++], 65, "%.64s", hex);
	}
	pthread_mutex_unlock(&l->held_lock);
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
	hr->free_reply(r);
	if (st < 0) {
		pthread_mutex_lock(&l->lock);
		failed(l, "SET", "an unexpected answer");
		pthread_mutex_unlock(&l->lock);
		return JITK_LEASE_OFF;
	}
	if (st == JITK_LEASE_TAKEN) {
		atomic_fetch_add(&l->n.taken, 1);
		held_add(l, hex);
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

	held_drop(l, hex);
	key_name(key, hex);
	if ((r = command(l, "EVAL (release)", 5, argv)))
		hr->free_reply(r);
}

/* -------------------------------------------------------------- budget */

long jitk__lease_wait_left(jitk_lease *l)
{
	long long left = (long long)(l->ttl_ms + JITK_LEASE_GRACE_MS) -
			 (long long)(atomic_load(&l->wasted_us) / 1000);

	return atomic_load(&l->off) || left <= 0 ? 0 : (long)left;
}

void jitk__lease_wasted(jitk_lease *l, double ms)
{
	unsigned long long us = ms > 0 ? (unsigned long long)(ms * 1000.0) : 0;
	unsigned long long total = atomic_fetch_add(&l->wasted_us, us) + us;
	long budget = l->ttl_ms + JITK_LEASE_GRACE_MS;
	char what[200];

	if (total < (unsigned long long)budget * 1000)
		return;
	snprintf(what, sizeof(what),
		 "waiting for other processes' leases took %llu ms in all without an upload, "
		 "the budget of one lease's wait (%ld ms)",
		 total / 1000, budget);
	turn_off(l, what);
}
