/* test_remote.c - the remote tier, leases and bundles against real servers
 * on loopback, started and stopped here: nginx with a WebDAV config in a
 * temporary directory, redis-server, and fake servers written below that
 * misbehave on purpose (accept and never answer, answer 500, cut a
 * transfer, reset the connection, serve wrong bytes, trickle, answer
 * slowly; a "Redis" that trickles, streams an endless reply or says
 * "held" forever). A test
 * whose server binary is missing says so and is skipped; .ci/run installs
 * nginx-light and redis-server, so CI runs them all. Only the compile
 * half is used: no GPU. Measured times are printed (docs/reliability.md
 * quotes them) and asserted loosely. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/hmac.h>

#include "common.h"
#include "store/bundle.h"
#include "compile/compile.h"
#include "servers.h"

#define SYM "static_quant_fp8"
#define SYM2 "tadd2"
#define ARCH "sm_90"

/* ---------------------------------------------------- the fake servers */

enum {
	FAKE_SILENT,   /* accept, read, never answer */
	FAKE_500,      /* every request: 500 */
	FAKE_SERVE,    /* GET: 200 with the given bytes (at rate bytes per 100 ms); PUT: 201 */
	FAKE_CUT,      /* GET: Content-Length of the whole, half the bytes, close */
	FAKE_RESET,    /* GET: headers and half the bytes, then a reset */
	FAKE_PUT_RESET, /* GET: 404; PUT: reset after the request head, body unread */
	FAKE_STORE,    /* GET and PUT on a directory; request heads appended to dir/heads.log */
	FAKE_REDIS_RESET, /* accept, read, reset */
	FAKE_REDIS_TRICKLE, /* each command: an integer reply, one digit per 50 ms, never ended */
	FAKE_REDIS_FLOOD, /* each command: "*2147483647" and elements as fast as they go */
	FAKE_REDIS_BULK, /* each command: "$2147483647" and bytes as fast as they go */
	FAKE_REDIS_HELD /* SET NX: nil (held); PTTL: 5000; anything else: OK */
};

typedef struct {
	int mode;
	const uint8_t *obj;
	size_t len;
	long rate;      /* FAKE_SERVE: bytes per 100 ms, 0 = at once */
	const char *dir; /* FAKE_STORE */
	long delay_ms;  /* FAKE_STORE: each answer after this long */
} fake_cfg;

static void send_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		ssize_t k = send(fd, c, n, MSG_NOSIGNAL);

		if (k <= 0)
			return;
		c += k;
		n -= (size_t)k;
	}
}

static void reset_close(int fd)
{
	struct linger l = { 1, 0 };

	setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	close(fd);
}

/* Read a request head (up to the blank line) into buf; its length, or -1;
 * *total: the bytes read (the head and the start of a body). */
static ssize_t read_head(int fd, char *buf, size_t cap, size_t *total)
{
	size_t n = 0;

	while (n + 1 < cap) {
		ssize_t k = recv(fd, buf + n, cap - 1 - n, 0);
		char *end;

		if (k <= 0)
			return -1;
		n += (size_t)k;
		buf[n] = '\0';
		*total = n;
		if ((end = strstr(buf, "\r\n\r\n")))
			return (ssize_t)(end + 4 - buf);
	}
	return -1;
}

static size_t content_length(const char *head)
{
	const char *p = strcasestr(head, "\r\ncontent-length:");

	return p ? (size_t)strtoull(p + 17, NULL, 10) : 0;
}

/* Read the rest of a body of len bytes (some already in buf after head). */
static uint8_t *read_body(int fd, const char *buf, size_t got, size_t len)
{
	uint8_t *b = malloc(len + 1);
	size_t n = got < len ? got : len;

	memcpy(b, buf, n);
	while (n < len) {
		ssize_t k = recv(fd, b + n, len - n, 0);

		if (k <= 0)
			break;
		n += (size_t)k;
	}
	return b;
}

static void answer(int fd, const char *status, const void *body, size_t len, long rate)
{
	char head[256];
	size_t at = 0;

	snprintf(head, sizeof(head), "HTTP/1.1 %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
		 status, len);
	send_all(fd, head, strlen(head));
	while (at < len) {
		size_t k = rate && len - at > (size_t)rate ? (size_t)rate : len - at;

		send_all(fd, (const char *)body + at, k);
		at += k;
		if (rate && at < len)
			usleep(100000);
	}
}

static void fake_one(int fd, const fake_cfg *f)
{
	char buf[16384], method[16] = "", path[512] = "";
	size_t len, got = 0;
	ssize_t h = read_head(fd, buf, sizeof(buf), &got);
	uint8_t *body;

	if (h < 0) {
		close(fd);
		return;
	}
	sscanf(buf, "%15s %511s", method, path);
	len = content_length(buf);
	got -= (size_t)h;
	if (f->mode == FAKE_PUT_RESET && !strcmp(method, "PUT")) {
		reset_close(fd);
		return;
	}
	body = !strcmp(method, "PUT") ? read_body(fd, buf + h, got, len) : NULL;
	if (f->mode == FAKE_500) {
		answer(fd, "500 Internal Server Error", "", 0, 0);
	} else if (body && f->mode != FAKE_STORE) {
		answer(fd, "201 Created", "", 0, 0);
	} else if (f->mode == FAKE_SERVE) {
		answer(fd, "200 OK", f->obj, f->len, f->rate);
	} else if (f->mode == FAKE_CUT || f->mode == FAKE_RESET) {
		char head[256];

		snprintf(head, sizeof(head), "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n", f->len);
		send_all(fd, head, strlen(head));
		send_all(fd, f->obj, f->len / 2);
		if (f->mode == FAKE_RESET) {
			usleep(20000);
			reset_close(fd);
			free(body);
			return;
		}
	} else if (f->mode == FAKE_PUT_RESET) {
		answer(fd, "404 Not Found", "", 0, 0);
	} else if (f->mode == FAKE_STORE) {
		char *file = jitk__asprintf("%s%s", f->dir, path), *log = t_path(f->dir, "heads.log");
		int lfd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		size_t n = 0;
		char *data;

		/* each request head, then a NUL */
		if (lfd >= 0) {
			if (write(lfd, buf, (size_t)h + 1) < 0)
				_exit(3);
			close(lfd);
		}
		if (f->delay_ms)
			usleep((useconds_t)f->delay_ms * 1000);
		if (body) {
			char *slash = strrchr(file, '/');

			*slash = '\0';
			jitk__mkdirs(file, 0755);
			*slash = '/';
			t_write(file, body, len);
			answer(fd, "201 Created", "", 0, 0);
		} else if (!jitk__read_file(&data, &n, file, 1u << 30)) {
			answer(fd, "200 OK", data, n, 0);
			free(data);
		} else {
			answer(fd, "404 Not Found", "", 0, 0);
		}
		free(log);
		free(file);
	}
	free(body);
	close(fd);
}

/* The length of the first whole RESP command (an array of bulk strings)
 * in buf, 0 when it is not all there yet, -1 when it is not one; *cmd:
 * its first word. */
static ssize_t redis_command(const char *buf, size_t n, char cmd[16])
{
	const char *p = buf, *end = buf + n;
	long argc, i;

	if (n < 1 || *p != '*')
		return n ? -1 : 0;
	if (!memchr(p, '\n', (size_t)(end - p)))
		return 0;
	argc = strtol(p + 1, NULL, 10);
	p = (const char *)memchr(p, '\n', (size_t)(end - p)) + 1;
	for (i = 0; i < argc; i++) {
		const char *nl;
		long len;

		if (p >= end || *p != '$' || !(nl = memchr(p, '\n', (size_t)(end - p))))
			return p >= end || (*p == '$') ? 0 : -1;
		len = strtol(p + 1, NULL, 10);
		if (nl + 1 + len + 2 > end)
			return 0;
		if (i == 0)
			snprintf(cmd, 16, "%.*s", (int)(len < 15 ? len : 15), nl + 1);
		p = nl + 1 + len + 2;
	}
	return p - buf;
}

/* One connection of a hostile "Redis": each command read whole, then
 * answered as f->mode says, until the client goes away (or 30 s). */
static void fake_redis(int fd, const fake_cfg *f)
{
	char buf[4096], cmd[16], chunk[65536];
	size_t n = 0;
	double t0 = jitk__now_ms();

	while (jitk__now_ms() - t0 < 30000) {
		struct pollfd p = { fd, POLLIN, 0 };
		ssize_t k, len;

		if (poll(&p, 1, 1000) <= 0 || (k = recv(fd, buf + n, sizeof(buf) - n, 0)) <= 0)
			break;
		n += (size_t)k;
		while ((len = redis_command(buf, n, cmd)) > 0) {
			size_t i;

			memmove(buf, buf + len, n - (size_t)len);
			n -= (size_t)len;
			if (f->mode == FAKE_REDIS_HELD) {
				const char *r = !strcasecmp(cmd, "SET")    ? "$-1\r\n"
						: !strcasecmp(cmd, "PTTL") ? ":5000\r\n"
									   : "+OK\r\n";

				send_all(fd, r, strlen(r));
				continue;
			}
			if (f->mode == FAKE_REDIS_TRICKLE) {
				send_all(fd, ":", 1);
				while (jitk__now_ms() - t0 < 30000 && send(fd, "1", 1, MSG_NOSIGNAL) == 1)
					usleep(50000);
				goto out;
			}
			send_all(fd, f->mode == FAKE_REDIS_FLOOD ? "*2147483647\r\n" : "$2147483647\r\n", 13);
			for (i = 0; i + 4 <= sizeof(chunk); i += 4)
				memcpy(chunk + i, f->mode == FAKE_REDIS_FLOOD ? ":1\r\n" : "aaaa", 4);
			while (jitk__now_ms() - t0 < 30000 &&
			       send(fd, chunk, sizeof(chunk), MSG_NOSIGNAL) > 0)
				;
			goto out;
		}
		if (len < 0)
			break;
	}
out:
	close(fd);
}

/* Serve f on a free port from a child process until server_stop. */
static void fake_start(server *s, const fake_cfg *f)
{
	int lfd = listen_on(0, 64);

	memset(s, 0, sizeof(*s));
	s->port = port_of(lfd);
	snprintf(s->url, sizeof(s->url), "%s://127.0.0.1:%d",
		 f->mode >= FAKE_REDIS_RESET ? "redis" : "http", s->port);
	s->pid = fork();
	assert_true(s->pid >= 0);
	if (s->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		for (;;) {
			int fd = accept(lfd, NULL, NULL);
			char buf[4096];

			if (fd < 0)
				continue;
			if (f->mode == FAKE_SILENT)
				continue; /* never answered, kept open until the end */
			if (f->mode == FAKE_REDIS_RESET) {
				struct pollfd p = { fd, POLLIN, 0 };

				if (poll(&p, 1, 1000) > 0 && recv(fd, buf, sizeof(buf), 0) < 0)
					_exit(3);
				reset_close(fd);
				continue;
			}
			if (f->mode > FAKE_REDIS_RESET) {
				fake_redis(fd, f);
				continue;
			}
			fake_one(fd, f);
		}
	}
	close(lfd);
}

/* ------------------------------------------------------- the fixture */

typedef struct {
	char *dir, *specs;
	uint8_t *ref, *ref2; /* SYM's and SYM2's entry bytes for ARCH */
	size_t ref_len, ref2_len;
	uint8_t key[JITK_HASH_SIZE];
	double compile_ms; /* one compile of SYM, warm */
} fixture;

static const char *instance_of(jitk_compiler *c, const char *selector)
{
	size_t *ids = NULL, n = 0;
	const char *name;

	assert_int_equal(jitk_select(&ids, &n, c, selector), 0);
	assert_true(n >= 1);
	name = jitk_instance_name(c, ids[0]);
	jitk_free(ids);
	return name;
}

/* A compiler over f's specs logging to log_fn with the given remote
 * request timeout and lease time to live (-1: the defaults). */
static jitk_compiler *compiler_logged(const fixture *f, const char *cache, const char *remote,
				      const char *lease, int read_only, jitk_log_fn log_fn, void *log,
				      int timeout_ms, int ttl_ms)
{
	jitk_compiler_options o;
	jitk_compiler *c = NULL;

	assert_int_equal(jitk_compiler_options_init(&o, JITK_COMPILER_OPTIONS_VERSION), 0);
	o.specs = f->specs;
	o.cache_dir = cache ? cache : "";
	o.cache_path = "";
	o.no_compile = 0;
	o.force_compile = 0;
	o.log = log_fn;
	o.log_payload = log;
	o.log_level = JITK_LOG_DEBUG;
	o.remote = remote ? remote : "";
	o.remote_read_only = read_only;
	o.remote_lease = lease ? lease : "";
	o.remote_timeout_ms = timeout_ms;
	o.remote_lease_ttl_ms = ttl_ms;
	assert_int_equal(jitk_compiler_new(&c, &o), 0);
	return c;
}

static jitk_compiler *compiler_timed(const fixture *f, const char *cache, const char *remote,
				     const char *lease, int read_only, t_log *log, int timeout_ms,
				     int ttl_ms)
{
	return compiler_logged(f, cache, remote, lease, read_only, t_log_fn, log, timeout_ms, ttl_ms);
}

static jitk_compiler *compiler(const fixture *f, const char *cache, const char *remote,
			       const char *lease, int read_only, t_log *log)
{
	return compiler_timed(f, cache, remote, lease, read_only, log, -1, -1);
}

static int group_setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));
	t_log log = { 0, "" };
	jitk_compiler *c;
	uint8_t key2[JITK_HASH_SIZE];
	char *cache, *p;
	double t0;

	f->dir = t_tmpdir();
	/* A small spec set - static_quant_fp8 and the data-only test family -
	 * so that the tests that compile every instance stay quick however
	 * many families the repository grows. */
	{
		char *sd = t_path(f->dir, "specs"), *src = t_path(t_root(), "specs/static_quant_fp8.yaml");
		char *dst = t_path(sd, "static_quant_fp8.yaml"), *tpl, *text;
		size_t len;

		assert_int_equal(jitk__mkdirs(sd, 0755), 0);
		text = t_read(src, &len);
		t_write(dst, text, len);
		char *root = realpath(t_root(), NULL);

		assert_non_null(root);
		tpl = jitk__asprintf("template: %s/templates/", root);
		t_edit(dst, "template: ../templates/", tpl);
		f->specs = jitk__asprintf("%s:%s/tests/families/specs", sd, root);
		free(sd), free(src), free(dst), free(tpl), free(text), free(root);
	}
	cache = t_path(f->dir, "ref");
	c = compiler(f, cache, NULL, NULL, 0, &log);
	assert_int_equal(jitk_precompile(NULL, c, instance_of(c, SYM2), ARCH), 0);
	t0 = jitk__now_ms();
	assert_int_equal(jitk_precompile(NULL, c, SYM, ARCH), 0);
	f->compile_ms = jitk__now_ms() - t0;
	t_key(c, SYM, ARCH, f->key);
	t_key(c, instance_of(c, SYM2), ARCH, key2);
	p = t_entry_path(cache, f->key);
	f->ref = (uint8_t *)t_read(p, &f->ref_len);
	free(p);
	p = t_entry_path(cache, key2);
	f->ref2 = (uint8_t *)t_read(p, &f->ref2_len);
	free(p);
	jitk_compiler_free(c);
	free(cache);
	*state = f;
	return 0;
}

static int group_teardown(void **state)
{
	fixture *f = *state;

	t_rmtree(f->dir);
	free(f->dir);
	free(f->specs);
	free(f->ref);
	free(f->ref2);
	free(f);
	return 0;
}

/* A fresh directory under the fixture's. */
static char *fresh(const fixture *f, const char *name)
{
	char *p = t_path(f->dir, name);

	t_rmtree(p);
	assert_int_equal(jitk__mkdirs(p, 0755), 0);
	return p;
}

/* Build SYM for ARCH: the status; origin and the time taken. The image
 * must be the reference's, byte for byte. */
static int build_sym(jitk_compiler *c, const fixture *f, int *origin, double *ms)
{
	jitk_build b;
	jitk_arch a;
	size_t inst;
	double t0 = jitk__now_ms();
	int rc;

	assert_int_equal(jitk__arch_parse(&a, ARCH), 0);
	assert_int_equal(jitk__spec_find(c->specs, SYM, &inst), 0);
	rc = jitk__build(&b, c, inst, a, 0);
	*ms = jitk__now_ms() - t0;
	if (!rc) {
		uint8_t *bytes;
		size_t len;

		*origin = b.origin;
		assert_int_equal(jitk__entry_encode(&bytes, &len, &b.entry), 0);
		t_assert_same_entry(bytes, len, f->ref, f->ref_len);
		free(bytes);
		jitk__build_free(&b);
	}
	return rc;
}

/* The local cache at dir holds exactly the reference entry, good. */
static void holds_only_ref(const fixture *f, const char *dir)
{
	jitk_cache_summary s = JITK_CACHE_SUMMARY_INIT;
	char *p = t_entry_path(dir, f->key), *data;
	size_t len;

	assert_int_equal(jitk__cache_scan(&s, dir, 1, NULL, NULL), 0);
	assert_int_equal(s.entries, 1);
	assert_int_equal(s.bad, 0);
	assert_int_equal(s.temp_files, 0);
	data = t_read(p, &len);
	t_assert_same_entry(data, len, f->ref, f->ref_len);
	free(data);
	free(p);
}

/* jitk_precompile with the origin as an int (like build_sym's). */
static int precompile(jitk_compiler *c, const char *name, const char *arch, int *origin)
{
	jitk_origin o = JITK_ORIGIN_MEMORY;
	int rc = jitk_precompile(&o, c, name, arch);

	*origin = (int)o;
	return rc;
}

static jitk_remote_stats stats_of(const jitk_compiler *c)
{
	jitk_remote_stats s = JITK_REMOTE_STATS_INIT;

	assert_int_equal(jitk_remote_stats_get(&s, c), 0);
	return s;
}

/* --------------------------------------------------------------- SIGPIPE */

/* A child writes to a socket whose peer is gone (EPIPE and SIGPIPE), with
 * or without the guard around the write. */
static void epipe_child(int guarded)
{
	jitk_sigpipe_guard g;
	sigset_t pending, mask;
	int sv[2];
	char c = 'x';
	ssize_t w;

	signal(SIGPIPE, SIG_DFL);
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		_exit(2);
	close(sv[1]);
	if (guarded)
		jitk__sigpipe_block(&g);
	w = write(sv[0], &c, 1);
	if (guarded)
		jitk__sigpipe_restore(&g);
	if (w >= 0 || errno != EPIPE)
		_exit(3);
	sigpending(&pending);
	pthread_sigmask(SIG_BLOCK, NULL, &mask);
	_exit(sigismember(&pending, SIGPIPE) ? 4 : sigismember(&mask, SIGPIPE) ? 5 : 0);
}

static void test_no_sigpipe_reaches_the_host(void **state)
{
	jitk_sigpipe_guard g;
	sigset_t pipe_set, old;
	struct timespec zero = { 0, 0 };
	int guarded, st;

	(void)state;
	for (guarded = 0; guarded <= 1; guarded++) {
		pid_t pid = fork();

		assert_true(pid >= 0);
		if (!pid)
			epipe_child(guarded);
		assert_int_equal(waitpid(pid, &st, 0), pid);
		if (guarded) {
			/* lives; nothing pending; the mask as it was */
			assert_true(WIFEXITED(st));
			assert_int_equal(WEXITSTATUS(st), 0);
		} else {
			/* the control: the same write kills an unguarded process */
			assert_true(WIFSIGNALED(st));
			assert_int_equal(WTERMSIG(st), SIGPIPE);
		}
	}
	/* A SIGPIPE the host had pending before is left for the host. */
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	raise(SIGPIPE);
	jitk__sigpipe_block(&g);
	jitk__sigpipe_restore(&g);
	assert_int_equal(sigtimedwait(&pipe_set, NULL, &zero), SIGPIPE);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* An 8 MB upload into a server that resets the connection after the
 * request head (the client is still writing), and lease commands to a
 * "Redis" that resets: the process, with SIGPIPE's default action, lives
 * and gets an error. */
static void test_server_closes_mid_request(void **state)
{
	fixture *f = *state;
	fake_cfg put_reset = { FAKE_PUT_RESET, NULL, 0, 0, NULL, 0 };
	fake_cfg redis_reset = { FAKE_REDIS_RESET, NULL, 0, 0, NULL, 0 };
	server http, redis;
	int st, round;

	fake_start(&http, &put_reset);
	fake_start(&redis, &redis_reset);
	for (round = 0; round < 2; round++) {
		pid_t pid = fork();

		assert_true(pid >= 0);
		if (!pid) {
			jitk_remote *r = NULL;
			jitk_lease *l = NULL;
			size_t big = 8u << 20;
			uint8_t *buf = calloc(1, big);
			long left;
			int ok = 1, i;

			signal(SIGPIPE, SIG_DFL);
			if (round == 0) {
				if (jitk__remote_open(&r, http.url, 0, 0, 0, NULL) || !r || !buf)
					_exit(2);
				ok = jitk__remote_put(r, f->key, buf, big) == JITK_EIO && !jitk__remote_on(r, f->key);
			} else {
				if (jitk__lease_open(&l, redis.url, 0, 0, NULL) || !l)
					_exit(2);
				for (i = 0; i < 3; i++)
					ok &= jitk__lease_take(l, "ab", &left) == JITK_LEASE_OFF;
				ok &= atomic_load(&jitk__lease_counters(l)->errors) == 1;
			}
			jitk__remote_close(r);
			jitk__lease_close(l);
			free(buf);
			_exit(ok ? 0 : 1);
		}
		assert_int_equal(waitpid(pid, &st, 0), pid);
		if (!WIFEXITED(st))
			fprintf(stderr, "killed by signal %d\n", WTERMSIG(st));
		assert_true(WIFEXITED(st));
		assert_int_equal(WEXITSTATUS(st), 0);
	}
	server_stop(&http);
	server_stop(&redis);
}

/* ------------------------------------------------------------ sharing */

typedef struct {
	const char *other; /* compare with the same entry in this cache */
	size_t n;
} same_ctx;

static int same_entry(void *ctx, const char *path, const jitk_cache_entry *e)
{
	same_ctx *s = ctx;
	char *mine = t_entry_path(s->other, e->key), *a, *b;
	size_t la, lb;

	a = t_read(path, &la);
	b = t_read(mine, &lb);
	t_assert_same_entry(a, la, b, lb);
	s->n++;
	free(a);
	free(b);
	free(mine);
	return 0;
}

static void test_two_caches_share_through_nginx(void **state)
{
	fixture *f = *state;
	char *dir = fresh(f, "share"), *a = t_path(dir, "a"), *b = t_path(dir, "b");
	char *ro = t_path(dir, "ro"), *store = t_path(dir, "store/share"), *url;
	t_log log = { 0, "" };
	jitk_compiler *c;
	jitk_remote_stats st;
	same_ctx same = { NULL, 0 };
	server s;
	size_t n, i;
	double t0, first_s, second_s;
	int origin;

	if (nginx_start(&s, dir)) {
		free(dir), free(a), free(b), free(ro), free(store);
		skip();
	}
	url = jitk__asprintf("%s/share/", s.url); /* a trailing slash is dropped */
	c = compiler(f, a, url, NULL, 0, &log);
	/* every instance of the fixture's small spec set */
	n = jitk_instance_count(c);
	t0 = jitk__now_ms();
	for (i = 0; i < n; i++) {
		jitk_origin o = JITK_ORIGIN_MEMORY;

		assert_int_equal(jitk_precompile(&o, c, jitk_instance_name(c, i), ARCH), 0);
		assert_int_equal(o, JITK_ORIGIN_COMPILED);
	}
	first_s = (jitk__now_ms() - t0) / 1000;
	st = stats_of(c);
	assert_int_equal(st.misses, n);
	assert_int_equal(st.uploads, n);
	assert_int_equal(st.hits + st.rejects + st.errors, 0);
	jitk_compiler_free(c);
	assert_int_equal(t_count_files(store, ""), (int)n);

	/* A second machine's fresh cache: every kernel from the remote. */
	c = compiler(f, b, url, NULL, 0, &log);
	t0 = jitk__now_ms();
	for (i = 0; i < n; i++) {
		jitk_origin o = JITK_ORIGIN_MEMORY;

		assert_int_equal(jitk_precompile(&o, c, jitk_instance_name(c, i), ARCH), 0);
		assert_int_equal(o, JITK_ORIGIN_REMOTE);
	}
	second_s = (jitk__now_ms() - t0) / 1000;
	st = stats_of(c);
	assert_int_equal(atomic_load(&c->compiles), 0);
	assert_int_equal(st.hits, n);
	assert_int_equal(st.misses + st.uploads + st.rejects + st.errors, 0);
	jitk_compiler_free(c);
	/* published into the local cache, byte for byte the first's */
	same.other = a;
	assert_int_equal(jitk__cache_each(b, same_entry, NULL, &same), 0);
	assert_int_equal(same.n, n);
	printf("remote: %zu kernels for %s: first cache %.2f s (%zu compiled, %zu uploaded), second "
	       "cache %.2f s (0 compiled, %zu remote)\n",
	       n, ARCH, first_s, n, n, second_s, n);

	/* Then local hits: the remote is not asked. */
	c = compiler(f, b, url, NULL, 0, &log);
	assert_int_equal(build_sym(c, f, &origin, &t0), 0);
	assert_int_equal(origin, JITK_ORIGIN_CACHE);
	st = stats_of(c);
	assert_int_equal(st.hits + st.misses + st.uploads, 0);
	jitk_compiler_free(c);

	/* A read-only client compiles what the remote lacks, uploads nothing. */
	c = compiler(f, ro, url, NULL, 1, &log);
	assert_int_equal(precompile(c, SYM, "sm_100", &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_COMPILED);
	st = stats_of(c);
	assert_int_equal(st.misses, 1);
	assert_int_equal(st.uploads, 0);
	jitk_compiler_free(c);
	assert_int_equal(t_count_files(store, ""), (int)n);
	assert_int_equal(log.warnings, 0);

	/* A sealed runtime's builds: a remote hit is no compile, so it is
	 * served; a key the remote lacks is refused, not compiled. */
	{
		char *sealed = t_path(dir, "sealed");
		jitk_build bd;
		jitk_arch arch;
		size_t inst;

		c = compiler(f, sealed, url, NULL, 1, &log);
		assert_int_equal(jitk__spec_find(c->specs, SYM, &inst), 0);
		assert_int_equal(jitk__arch_parse(&arch, ARCH), 0);
		assert_int_equal(jitk__build(&bd, c, inst, arch, JITK_BUILD_SEAL_ERROR), 0);
		assert_int_equal(bd.origin, JITK_ORIGIN_REMOTE);
		jitk__build_free(&bd);
		assert_int_equal(jitk__arch_parse(&arch, "sm_100"), 0);
		assert_int_equal(jitk__build(&bd, c, inst, arch, JITK_BUILD_SEAL_ERROR),
				 JITK_ENOCOMPILE);
		assert_non_null(strstr(jitk_error_last()->message, "sealed runtime: "));
		assert_int_equal(atomic_load(&c->compiles), 0);
		jitk_compiler_free(c);
		free(sealed);
	}
	server_free(&s);
	free(url), free(dir), free(a), free(b), free(ro), free(store);
}

/* How many of c's instances' keys jitk__remote_url gives to the URL that
 * ends in "/x"; *held: how many of those have an object in store x_store. */
static size_t keys_on_x(jitk_compiler *c, const char *x_store, size_t *held)
{
	size_t i, n = jitk_instance_count(c), on_x = 0;

	*held = 0;
	for (i = 0; i < n; i++) {
		uint8_t key[JITK_HASH_SIZE];
		char hex[2 * JITK_HASH_SIZE + 1], *obj;
		struct stat sbuf;
		const char *u;

		t_key(c, jitk_instance_name(c, i), ARCH, key);
		jitk__hex(hex, key, JITK_HASH_SIZE);
		u = jitk__remote_url(c->remote, key);
		if (strcmp(u + strlen(u) - 2, "/x"))
			continue;
		on_x++;
		obj = jitk__asprintf("%s/%s", x_store, hex);
		*held += stat(obj, &sbuf) == 0;
		free(obj);
	}
	return on_x;
}

/* Keys are sharded by rendezvous hashing: each object on the URL that
 * jitk__remote_url names, both URLs used, the order of the list does not
 * matter; with one URL down, the live one's keys hit and only the rest
 * compile. Rendezvous weights depend on the URLs, whose port is the
 * server's of this run: the second URL's spelling is the first (of y0,
 * y1, ...) under which both URLs own keys, so that the test means the
 * same in every run. */
static void test_rendezvous_over_urls(void **state)
{
	fixture *f = *state;
	char *dir = fresh(f, "shard"), *a = t_path(dir, "a"), *b = t_path(dir, "b"), *d = t_path(dir, "d");
	char *sa = t_path(dir, "store/x/v1"), *sb, *name;
	char *urls, *reversed, *half;
	t_log log = { 0, "" };
	jitk_compiler *c;
	jitk_remote_stats st;
	server s;
	size_t n, i, on_x, held, tries, live_held;
	int dead;

	if (nginx_start(&s, dir)) {
		free(dir), free(a), free(b), free(d), free(sa);
		skip();
	}
	for (tries = 0;; tries++) {
		assert_true(tries < 64);
		urls = jitk__asprintf("%s/x,%s/y%zu", s.url, s.url, tries);
		c = compiler(f, a, urls, NULL, 0, &log);
		n = jitk_instance_count(c);
		on_x = keys_on_x(c, sa, &held);
		if (on_x > 0 && on_x < n)
			break;
		jitk_compiler_free(c);
		free(urls);
	}
	name = jitk__asprintf("store/y%zu/v1", tries);
	sb = t_path(dir, name);
	free(name);
	reversed = jitk__asprintf("%s/y%zu,%s/x", s.url, tries, s.url);
	for (i = 0; i < n; i++) {
		uint8_t key[JITK_HASH_SIZE];
		char hex[2 * JITK_HASH_SIZE + 1], *obj;
		struct stat sbuf;
		const char *u;

		assert_int_equal(jitk_precompile(NULL, c, jitk_instance_name(c, i), ARCH), 0);
		t_key(c, jitk_instance_name(c, i), ARCH, key);
		jitk__hex(hex, key, JITK_HASH_SIZE);
		u = jitk__remote_url(c->remote, key);
		obj = jitk__asprintf("%s/%s", !strcmp(u + strlen(u) - 2, "/x") ? sa : sb, hex);
		assert_int_equal(stat(obj, &sbuf), 0); /* on the URL that owns it */
		free(obj);
	}
	jitk_compiler_free(c);
	assert_int_equal(t_count_files(sa, ""), (int)on_x);
	assert_int_equal(t_count_files(sb, ""), (int)(n - on_x));
	printf("remote: rendezvous over 2 URLs: %zu and %zu of %zu keys\n", on_x, n - on_x, n);

	c = compiler(f, b, reversed, NULL, 0, &log);
	for (i = 0; i < n; i++)
		assert_int_equal(jitk_precompile(NULL, c, jitk_instance_name(c, i), ARCH), 0);
	st = stats_of(c);
	assert_int_equal(st.hits, n);
	assert_int_equal(atomic_load(&c->compiles), 0);
	jitk_compiler_free(c);
	assert_int_equal(log.warnings, 0);

	/* x and a URL nothing answers, spelled (as above) so that the dead
	 * URL owns a key and x owns one that it holds */
	dead = free_port();
	for (tries = 0;; tries++) {
		assert_true(tries < 64);
		half = jitk__asprintf("%s/x,http://127.0.0.1:%d/y%zu", s.url, dead, tries);
		c = compiler(f, d, half, NULL, 0, &log);
		on_x = keys_on_x(c, sa, &live_held);
		if (on_x < n && live_held)
			break;
		jitk_compiler_free(c);
		free(half);
	}
	for (i = 0; i < n; i++)
		assert_int_equal(jitk_precompile(NULL, c, jitk_instance_name(c, i), ARCH), 0);
	st = stats_of(c);
	assert_int_equal(st.errors, 1); /* the dead URL: off after its first failure */
	assert_int_equal(log.warnings, 1);
	assert_int_equal(st.hits, live_held);
	assert_int_equal(atomic_load(&c->compiles), n - live_held);
	printf("remote: x and a dead URL: %zu hits on x, %zu compiled\n", live_held, n - live_held);
	jitk_compiler_free(c);
	server_free(&s);
	free(urls), free(reversed), free(half);
	free(dir), free(a), free(b), free(d), free(sa), free(sb);
}

/* Threads share one compiler's handles; a forked child does not reuse the
 * parent's connections, and the parent's still work after; a process that
 * may not compile takes remote hits and names the remote in a miss. */
typedef struct {
	jitk_compiler *c;
	size_t first, n;
	int failed;
} thread_job;

static void *build_some(void *p)
{
	thread_job *j = p;
	size_t i;

	for (i = j->first; i < j->n; i += 8) {
		jitk_origin o = JITK_ORIGIN_MEMORY;

		if (jitk_precompile(&o, j->c, jitk_instance_name(j->c, i), ARCH) ||
		    o != JITK_ORIGIN_REMOTE)
			j->failed++;
	}
	return NULL;
}

static void test_threads_fork_and_no_compile(void **state)
{
	fixture *f = *state;
	char *dir = fresh(f, "threads"), *seed = t_path(dir, "seed"), *a = t_path(dir, "a");
	char *b = t_path(dir, "b"), *url;
	t_log log = { 0, "" };
	jitk_compiler_options o;
	jitk_compiler *c;
	jitk_remote_stats st;
	thread_job jobs[8];
	pthread_t tids[8];
	server s;
	size_t n, i;
	int origin, stw;
	double ms;
	pid_t pid;

	if (nginx_start(&s, dir)) {
		free(dir), free(seed), free(a), free(b);
		skip();
	}
	url = jitk__asprintf("%s/t", s.url);
	c = compiler(f, seed, url, NULL, 0, &log);
	n = jitk_instance_count(c);
	for (i = 0; i < n; i++)
		assert_int_equal(jitk_precompile(NULL, c, jitk_instance_name(c, i), ARCH), 0);
	assert_int_equal(jitk_precompile(NULL, c, SYM, "sm_100"), 0);
	assert_int_equal(jitk_precompile(NULL, c, instance_of(c, SYM2), "sm_100"), 0);
	jitk_compiler_free(c);

	c = compiler(f, a, url, NULL, 0, &log);
	for (i = 0; i < 8; i++) {
		jobs[i].c = c;
		jobs[i].first = i;
		jobs[i].n = n;
		jobs[i].failed = 0;
		assert_int_equal(pthread_create(&tids[i], NULL, build_some, &jobs[i]), 0);
	}
	for (i = 0; i < 8; i++) {
		assert_int_equal(pthread_join(tids[i], NULL), 0);
		assert_int_equal(jobs[i].failed, 0);
	}
	st = stats_of(c);
	assert_int_equal(st.hits, n);
	assert_int_equal(st.errors, 0);
	/* a child of a process that used the remote: its own connections */
	pid = fork();
	assert_true(pid >= 0);
	if (!pid)
		_exit(precompile(c, SYM, "sm_100", &origin) || origin != JITK_ORIGIN_REMOTE ? 1 : 0);
	assert_int_equal(waitpid(pid, &stw, 0), pid);
	assert_true(WIFEXITED(stw) && WEXITSTATUS(stw) == 0);
	assert_int_equal(precompile(c, instance_of(c, SYM2), "sm_100", &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_REMOTE);
	assert_int_equal(stats_of(c).errors, 0);
	jitk_compiler_free(c);

	/* JITK_NO_COMPILE: the remote still serves; a miss names it */
	assert_int_equal(jitk_compiler_options_init(&o, JITK_COMPILER_OPTIONS_VERSION), 0);
	o.specs = f->specs;
	o.cache_dir = b;
	o.cache_path = "";
	o.no_compile = 1;
	o.remote = url;
	o.log = t_log_fn;
	o.log_payload = &log;
	assert_int_equal(jitk_compiler_new(&c, &o), 0);
	assert_int_equal(build_sym(c, f, &origin, &ms), 0);
	assert_int_equal(origin, JITK_ORIGIN_REMOTE);
	assert_int_equal(precompile(c, SYM, "sm_89", &origin), JITK_ENOCOMPILE);
	assert_non_null(strstr(jitk_error_last()->message, "is not in the cache or the remote"));
	assert_int_equal(atomic_load(&c->compiles), 0);
	jitk_compiler_free(c);
	assert_int_equal(log.warnings, 0);
	server_free(&s);
	free(url), free(dir), free(seed), free(a), free(b);
}

/* ------------------------------------------------------ a bad remote */

enum { SERVES_REF, SERVES_CORRUPT, SERVES_OTHER, SERVES_SHORT };

typedef struct {
	const char *name;
	int mode;        /* a FAKE_ mode; -1: nothing listens; -2: a full backlog */
	int content;     /* what FAKE_SERVE serves */
	long rate;       /* FAKE_SERVE: bytes per 100 ms */
	int origin;      /* what the build reports */
	unsigned errors, rejects, uploads;
	const char *said; /* in the one warning ("" for none) */
	double min_ms, max_ms; /* bounds on the time beyond one compile */
} fault_case;

/* Every way the remote can misbehave: the right bytes, status OK, the
 * local cache holding only the good entry, one warning at most, and a
 * bounded time (printed). */
static void test_a_bad_remote_never_fails_a_build(void **state)
{
	static const fault_case cases[] = {
		{ "refused (nothing listens)", -1, 0, 0, JITK_ORIGIN_COMPILED, 1, 0, 0,
		  "download of", 0, 1000 },
		{ "connect never completes", -2, 0, 0, JITK_ORIGIN_COMPILED, 1, 0, 0,
		  "download of", 80, 1500 },
		{ "accepts, never answers", FAKE_SILENT, 0, 0, JITK_ORIGIN_COMPILED, 1, 0, 0,
		  "timed out", 1800, 3500 },
		{ "HTTP 500", FAKE_500, 0, 0, JITK_ORIGIN_COMPILED, 1, 0, 0, "(HTTP 500)", 0, 1000 },
		{ "transfer cut short", FAKE_CUT, 0, 0, JITK_ORIGIN_COMPILED, 1, 0, 0,
		  "transfer closed", 0, 1000 },
		{ "reset mid-response", FAKE_RESET, 0, 0, JITK_ORIGIN_COMPILED, 1, 0, 0,
		  "download of", 0, 1000 },
		{ "upload reset mid-request", FAKE_PUT_RESET, 0, 0, JITK_ORIGIN_COMPILED, 1, 0, 0,
		  "upload of", 0, 1000 },
		{ "truncated object", FAKE_SERVE, SERVES_SHORT, 0, JITK_ORIGIN_COMPILED, 0, 1, 1,
		  "rejected: truncated", 0, 1000 },
		{ "corrupted object", FAKE_SERVE, SERVES_CORRUPT, 0, JITK_ORIGIN_COMPILED, 0, 1, 1,
		  "rejected: checksum mismatch", 0, 1000 },
		{ "another key's object", FAKE_SERVE, SERVES_OTHER, 0, JITK_ORIGIN_COMPILED, 0, 1, 1,
		  "rejected: key mismatch", 0, 1000 },
		{ "slow (2 KB per 100 ms)", FAKE_SERVE, SERVES_REF, 2048, JITK_ORIGIN_REMOTE, 0, 0, 0, "",
		  200, 1500 },
		{ "too slow (256 B per 100 ms)", FAKE_SERVE, SERVES_REF, 256, JITK_ORIGIN_COMPILED, 1, 0,
		  0, "timed out", 1800, 3500 },
	};
	fixture *f = *state;
	size_t i;

	for (i = 0; i < JITK_ARRAY_SIZE(cases); i++) {
		const fault_case *k = &cases[i];
		char *cache = fresh(f, "fault");
		uint8_t *obj = malloc(f->ref_len + f->ref2_len);
		fake_cfg cfg = { k->mode, obj, f->ref_len, k->rate, NULL, 0 };
		t_log log = { 0, "" };
		jitk_remote_stats st;
		jitk_compiler *c;
		server s;
		int origin = -1, full[4] = { -1, -1, -1, -1 }, lfd = -1, j;
		double ms;
		char url[64];

		memcpy(obj, f->ref, f->ref_len);
		if (k->content == SERVES_CORRUPT)
			obj[f->ref_len - 100] ^= 0x20; /* in the image */
		if (k->content == SERVES_OTHER) {
			memcpy(obj, f->ref2, f->ref2_len);
			cfg.len = f->ref2_len;
		}
		if (k->content == SERVES_SHORT)
			cfg.len = f->ref_len / 2;
		memset(&s, 0, sizeof(s));
		if (k->mode == -1) {
			snprintf(url, sizeof(url), "http://127.0.0.1:%d", free_port());
		} else if (k->mode == -2) {
			/* backlog 0 holds one connection; fill it: SYNs are dropped */
			lfd = listen_on(0, 0);
			for (j = 0; j < 4; j++) {
				full[j] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
				{
					struct sockaddr_in a;

					memset(&a, 0, sizeof(a));
					a.sin_family = AF_INET;
					a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
					a.sin_port = htons((uint16_t)port_of(lfd));
					(void)connect(full[j], (struct sockaddr *)&a, sizeof(a));
				}
			}
			usleep(50000);
			snprintf(url, sizeof(url), "http://127.0.0.1:%d", port_of(lfd));
		} else {
			fake_start(&s, &cfg);
			snprintf(url, sizeof(url), "%s", s.url);
		}
		c = compiler(f, cache, url, NULL, 0, &log);
		assert_int_equal(build_sym(c, f, &origin, &ms), 0);
		st = stats_of(c);
		printf("remote: %-28s %5.0f ms (one compile: %.0f ms)\n", k->name, ms, f->compile_ms);
		if (origin != k->origin || st.errors != k->errors || st.rejects != k->rejects ||
		    st.uploads != k->uploads || (*k->said && !strstr(log.last, k->said)) ||
		    log.warnings != (*k->said ? 1 : 0))
			fprintf(stderr, "%s: origin %d, %llu errors, %llu rejects, %llu uploads, %d warnings, last: %s\n",
				k->name, origin, (unsigned long long)st.errors,
				(unsigned long long)st.rejects, (unsigned long long)st.uploads, log.warnings,
				log.last);
		assert_int_equal(origin, k->origin);
		assert_int_equal(st.errors, k->errors);
		assert_int_equal(st.rejects, k->rejects);
		assert_int_equal(st.uploads, k->uploads);
		assert_int_equal(st.hits, k->origin == JITK_ORIGIN_REMOTE);
		assert_int_equal(log.warnings, *k->said ? 1 : 0);
		if (*k->said)
			assert_non_null(strstr(log.last, k->said));
		/* off after a failure, on after a reject */
		assert_int_equal(jitk__remote_on(c->remote, f->key), k->errors == 0);
		/* Time bounds that no load can break: below, the remote's own
		 * wait where it must have waited (the build took at least that
		 * long, whatever the compile cost); above, a guard against a
		 * wait without end, 10 s past the case's expectation. What the
		 * remote did is asserted by the counts above. */
		if (k->min_ms > 0)
			assert_true(ms >= k->min_ms - 50);
		assert_true(ms <= k->max_ms + 3 * f->compile_ms + 10000);
		jitk_compiler_free(c);
		holds_only_ref(f, cache);
		server_stop(&s);
		for (j = 0; j < 4; j++)
			if (full[j] >= 0)
				close(full[j]);
		if (lfd >= 0)
			close(lfd);
		free(obj);
		free(cache);
	}
}

/* A remote that answers every request, but only after 700 ms, with a
 * request timeout of 1 s: each answer is slower than a tenth of the
 * timeout, so it is charged to the URL's time budget (one request
 * timeout); the next request may take only what is left (300 ms), times
 * out, and the URL is off for the process. Before, every kernel paid the
 * whole 700 ms for its GET and again for its PUT (the 5 kernels
 * took 10.4 s instead of 1.4 s at 1.8 s an answer). */
static void test_a_slow_remote_is_switched_off(void **state)
{
	fixture *f = *state;
	char *dir = fresh(f, "slow"), *cache = t_path(dir, "c"), *store = t_path(dir, "store");
	char *heads = t_path(store, "heads.log"), *log_data;
	fake_cfg cfg = { FAKE_STORE, NULL, 0, 0, store, 700 };
	t_log log = { 0, "" };
	jitk_remote_stats st;
	jitk_compiler *c;
	server s;
	size_t i, n = 5, requests = 0, len;
	double t0, ms;

	assert_int_equal(jitk__mkdirs(store, 0755), 0);
	fake_start(&s, &cfg);
	c = compiler_timed(f, cache, s.url, NULL, 0, &log, 1000, -1);
	assert_true(jitk_instance_count(c) >= n);
	t0 = jitk__now_ms();
	for (i = 0; i < n; i++) {
		int origin;

		assert_int_equal(precompile(c, jitk_instance_name(c, i), ARCH, &origin), 0);
		assert_int_equal(origin, JITK_ORIGIN_COMPILED);
	}
	ms = jitk__now_ms() - t0;
	st = stats_of(c);
	server_stop(&s);
	log_data = t_read(heads, &len);
	for (i = 0; i + 11 <= len; i++) /* each request line */
		requests += !memcmp(log_data + i, " HTTP/1.1\r\n", 11);
	printf("remote: every answer after 700 ms (1 s timeout): %zu kernels in %.0f ms, %zu requests, "
	       "%.0f ms in them (one compile: %.0f ms)\n",
	       n, ms, requests, st.ms, f->compile_ms);
	/* the first GET, and the PUT after it that timed out (only the GET
	 * when the machine is so loaded that it took over 1 s) */
	assert_true(requests >= 1 && requests <= 2);
	assert_int_equal(st.errors, 1);
	assert_int_equal(st.uploads, 0);
	assert_true(st.ms < 1000 + 300);
	assert_int_equal(log.warnings, 1);
	assert_non_null(strstr(log.last, requests == 2 ? "(the time left of its budget for slow answers)"
						       : "timed out"));
	assert_non_null(strstr(log.last, "not using it again in this process"));
	jitk_compiler_free(c);
	free(log_data), free(heads), free(dir), free(cache), free(store);
}

/* A rejected remote object in a build that may not compile was warned
 * about as "...; compiling it", and the refusal then said the kernel was
 * "not in the cache": now the warning says it is not compiled and why,
 * and the refusal says that the remote's object was rejected. Sealed
 * (JITK_SEAL_ERROR) and with JITK_NO_COMPILE. */
static void test_a_refused_compile_says_what_happened_to_the_remote_object(void **state)
{
	fixture *f = *state;
	char *cache = fresh(f, "sealed-remote");
	uint8_t *obj = malloc(f->ref_len);
	fake_cfg cfg = { FAKE_SERVE, obj, f->ref_len, 0, NULL, 0 };
	server s;
	int round;

	memcpy(obj, f->ref, f->ref_len);
	obj[f->ref_len - 100] ^= 0x20;
	fake_start(&s, &cfg);
	for (round = 0; round < 2; round++) {
		t_log log = { 0, "" };
		jitk_compiler *c = compiler(f, cache, s.url, NULL, 0, &log);
		int origin;

		if (round == 0)
			atomic_store(&c->seal, JITK_SEAL_ERROR);
		else
			c->no_compile = 1;
		assert_int_equal(precompile(c, SYM, ARCH, &origin), JITK_ENOCOMPILE);
		assert_non_null(strstr(jitk_error_last()->message,
				       " is in the remote, but its object was rejected ("));
		assert_int_equal(log.warnings, 1);
		assert_non_null(strstr(log.last, round ? "rejected: checksum mismatch; not compiling it: "
							 "compiling is disabled (JITK_NO_COMPILE)"
						       : "rejected: checksum mismatch; not compiling it: "
							 "the runtime is sealed"));
		assert_int_equal(atomic_load(&c->compiles), 0);
		jitk_compiler_free(c);
		assert_int_equal(t_count_files(cache, ".jitk"), 0);
	}
	server_stop(&s);
	free(obj), free(cache);
}

/* Every message, one after the other. */
typedef struct {
	int n;
	char text[8192];
} all_log;

static void all_log_fn(void *payload, jitk_log_level level, const char *msg)
{
	all_log *l = payload;
	size_t at = strlen(l->text);

	if (level > JITK_LOG_WARN)
		return;
	l->n++;
	snprintf(l->text + at, sizeof(l->text) - at, "%s\n", msg);
}

/* A compiler whose messages all go to l. */
static jitk_compiler *compiler_all(const fixture *f, const char *cache, const char *remote,
				   const char *lease, all_log *l)
{
	return compiler_logged(f, cache, remote, lease, 0, all_log_fn, l, -1, -1);
}

/* None of the secrets of the URLs below is in l; every message is there. */
static void no_secret_in(const all_log *l, int messages)
{
	static const char *const secrets[] = { "alice", "s3cret", "bob", "pa55", "eve", "pr0xy" };
	size_t i;

	if (l->n != messages)
		fprintf(stderr, "%d messages, not %d:\n%s", l->n, messages, l->text);
	assert_int_equal(l->n, messages);
	for (i = 0; i < JITK_ARRAY_SIZE(secrets); i++) {
		if (strstr(l->text, secrets[i]))
			fprintf(stderr, "'%s' in:\n%s", secrets[i], l->text);
		assert_null(strstr(l->text, secrets[i]));
	}
}

/* Credentials in a remote's URL were printed in every warning (the lease
 * URL's were masked). Masked now wherever a URL reaches a message: a
 * failed request, a rejected object, a URL that is not one, a lease
 * server that fails or is ignored, and libcurl's own texts (which quote a
 * proxy's URL); `jitk explain` and `jitk cache stats` print only these
 * warnings (tests/remote.sh). Nodes with other credentials, or none,
 * agree on every key's URL: the credentials are not in the weights. */
static void test_credentials_never_reach_a_message(void **state)
{
	fixture *f = *state;
	char *cache = fresh(f, "secrets"), url[200], lease[200], hex[2 * JITK_HASH_SIZE + 1];
	const char *proxy = getenv("http_proxy"), *no_proxy = getenv("no_proxy");
	char *saved_proxy = proxy ? jitk__strdup(proxy) : NULL;
	char *saved_no_proxy = no_proxy ? jitk__strdup(no_proxy) : NULL;
	uint8_t *obj = malloc(f->ref_len);
	fake_cfg cfg = { FAKE_SERVE, obj, f->ref_len, 0, NULL, 0 };
	jitk_compiler *c, *plain;
	jitk_lease *l;
	all_log log;
	server s;
	long left;
	size_t i;
	int origin;

	/* a URL that fails, and a lease server that fails */
	memset(&log, 0, sizeof(log));
	snprintf(url, sizeof(url), "http://alice:s3cret@127.0.0.1:%d/x", free_port());
	c = compiler_all(f, cache, url, "", &log);
	assert_int_equal(precompile(c, SYM, ARCH, &origin), 0);
	jitk_compiler_free(c);
	snprintf(lease, sizeof(lease), "redis://bob:pa55@127.0.0.1:%d", free_port());
	assert_int_equal(jitk__lease_open(&l, lease, 0, 0, &(jitk_logger){ all_log_fn, &log, JITK_LOG_WARN }), 0);
	jitk__hex(hex, f->key, JITK_HASH_SIZE);
	assert_int_equal(jitk__lease_take(l, hex, &left), JITK_LEASE_OFF);
	jitk__lease_close(l);
	no_secret_in(&log, 2);
	assert_non_null(strstr(log.text, "remote cache http://***@127.0.0.1:"));

	/* a rejected object */
	memset(&log, 0, sizeof(log));
	memcpy(obj, f->ref, f->ref_len);
	obj[f->ref_len - 100] ^= 0x20;
	fake_start(&s, &cfg);
	snprintf(url, sizeof(url), "http://alice:s3cret@127.0.0.1:%d", s.port);
	t_rmtree(cache);
	c = compiler_all(f, cache, url, "", &log);
	assert_int_equal(precompile(c, SYM, ARCH, &origin), 0);
	jitk_compiler_free(c);
	server_stop(&s);
	no_secret_in(&log, 1);
	assert_non_null(strstr(log.text, " from http://***@127.0.0.1:"));
	assert_non_null(strstr(log.text, " rejected: checksum mismatch"));

	/* URLs that are not ones; a lease server ignored for want of a remote,
	 * or for a bad port */
	memset(&log, 0, sizeof(log));
	c = compiler_all(f, NULL, "ftp://alice:s3cret@h/x,http://alice:s3cret@h/a b",
			 "redis://bob:pa55@h/x", &log);
	jitk_compiler_free(c);
	c = compiler_all(f, NULL, "http://h/x", "redis://bob:pa55@h:99999", &log);
	jitk_compiler_free(c);
	no_secret_in(&log, 4);
	assert_non_null(strstr(log.text, "remote cache 'ftp://***@h/x' ignored"));
	assert_non_null(strstr(log.text, "lease server redis://***@h/x ignored: there is no remote cache"));
	assert_non_null(strstr(log.text, "lease server 'redis://***@h:99999' ignored: a bad port"));

	/* libcurl's text quotes the proxy URL, credentials and all */
	memset(&log, 0, sizeof(log));
	setenv("http_proxy", "socks9://eve:pr0xy@127.0.0.1:1", 1);
	unsetenv("no_proxy");
	t_rmtree(cache);
	c = compiler_all(f, cache, "http://alice:s3cret@127.0.0.1:1/x", "", &log);
	assert_int_equal(precompile(c, SYM, ARCH, &origin), 0);
	jitk_compiler_free(c);
	if (saved_proxy)
		setenv("http_proxy", saved_proxy, 1);
	else
		unsetenv("http_proxy");
	if (saved_no_proxy)
		setenv("no_proxy", saved_no_proxy, 1);
	no_secret_in(&log, 1);
	assert_non_null(strstr(log.text, "'socks9://***@127.0.0.1:1'"));

	/* the same URLs with other credentials or none: the same owner for
	 * every key */
	memset(&log, 0, sizeof(log));
	c = compiler_all(f, NULL, "http://alice:s3cret@a.test/x,http://alice:s3cret@b.test/x,http://c.test/x",
			 "", &log);
	plain = compiler_all(f, NULL, "http://a.test/x,http://bob:pa55@b.test/x,http://c.test/x", "", &log);
	for (i = 0; i < jitk_instance_count(c); i++) {
		uint8_t key[JITK_HASH_SIZE];
		const char *u1, *u2;

		t_key(c, jitk_instance_name(c, i), ARCH, key);
		u1 = jitk__remote_url(c->remote, key);
		u2 = jitk__remote_url(plain->remote, key);
		assert_string_equal(strrchr(u1, '@') ? strrchr(u1, '@') + 1 : u1 + 7,
				    strrchr(u2, '@') ? strrchr(u2, '@') + 1 : u2 + 7);
	}
	jitk_compiler_free(plain);
	jitk_compiler_free(c);
	no_secret_in(&log, 0);
	free(saved_proxy), free(saved_no_proxy), free(obj), free(cache);
}

/* ---------------------------------------------------------------- leases */

static void hex_of(char out[2 * JITK_HASH_SIZE + 1], const uint8_t key[JITK_HASH_SIZE])
{
	jitk__hex(out, key, JITK_HASH_SIZE);
}

/* Another process holds the lease: the build waits, polling the remote,
 * and takes the holder's upload (0 compiles); when the holder never
 * uploads, the build compiles once the lease expires. A read-only client
 * never takes a lease. */
static void test_lease_wait_and_expiry(void **state)
{
	fixture *f = *state;
	char *dir = fresh(f, "lease"), *rdir = t_path(dir, "redis"), *c1 = t_path(dir, "c1");
	char *c2 = t_path(dir, "c2"), *c3 = t_path(dir, "c3"), *url, hex[2 * JITK_HASH_SIZE + 1];
	t_log log = { 0, "" };
	jitk_compiler *c;
	jitk_remote_stats st;
	jitk_lease *other;
	server web, redis;
	uint8_t key2[JITK_HASH_SIZE];
	long left;
	double ms;
	int origin, stw;
	pid_t pid;

	assert_int_equal(jitk__mkdirs(rdir, 0755), 0);
	if (nginx_start(&web, dir) || redis_start(&redis, rdir)) {
		server_free(&web);
		free(dir), free(rdir), free(c1), free(c2), free(c3);
		skip();
	}
	url = jitk__asprintf("%s/lw", web.url);
	assert_int_equal(jitk__lease_open(&other, redis.url, 0, 700, NULL), 0);
	hex_of(hex, f->key);
	assert_int_equal(jitk__lease_take(other, hex, &left), JITK_LEASE_TAKEN);
	/* The holder uploads after 300 ms. */
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		jitk_remote *r = NULL;

		usleep(300000);
		if (jitk__remote_open(&r, url, 0, 0, 0, NULL) || jitk__remote_put(r, f->key, f->ref, f->ref_len))
			_exit(1);
		jitk__remote_close(r);
		_exit(0);
	}
	c = compiler(f, c1, url, redis.url, 0, &log);
	assert_int_equal(build_sym(c, f, &origin, &ms), 0);
	assert_int_equal(waitpid(pid, &stw, 0), pid);
	assert_true(WIFEXITED(stw) && WEXITSTATUS(stw) == 0);
	st = stats_of(c);
	printf("remote: lease held elsewhere, holder uploads after 300 ms: remote hit after %.0f ms\n", ms);
	assert_int_equal(origin, JITK_ORIGIN_REMOTE);
	assert_int_equal(atomic_load(&c->compiles), 0);
	assert_int_equal(st.lease_waits, 1);
	assert_int_equal(st.lease_taken, 0);
	assert_true(ms >= 250 && ms < 12000); /* waited; no hang (the counts say what happened) */
	assert_true(st.lease_wait_ms >= 250);
	jitk_compiler_free(c);
	holds_only_ref(f, c1);

	/* A holder that died before its upload (a live one renews its lease:
	 * test_a_lease_outlives_its_ttl_while_its_holder_compiles): compile
	 * when the lease expires. */
	c = compiler(f, c2, url, redis.url, 0, &log);
	t_key(c, instance_of(c, SYM2), ARCH, key2);
	hex_of(hex, key2);
	ms = jitk__now_ms(); /* before the take: its expiry is 700 ms after this at least */
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		jitk_lease *dying = NULL;

		if (jitk__lease_open(&dying, redis.url, 0, 700, NULL) || !dying ||
		    jitk__lease_take(dying, hex, &left) != JITK_LEASE_TAKEN)
			_exit(1);
		_exit(0); /* no release, no renewal any more */
	}
	assert_int_equal(waitpid(pid, &stw, 0), pid);
	assert_true(WIFEXITED(stw) && WEXITSTATUS(stw) == 0);
	assert_int_equal(precompile(c, instance_of(c, SYM2), ARCH, &origin), 0);
	ms = jitk__now_ms() - ms;
	printf("remote: lease of a holder that died (700 ms to live), no upload: compiled after %.0f ms\n",
	       ms);
	assert_int_equal(origin, JITK_ORIGIN_COMPILED);
	assert_true(ms >= 690 && ms < 700 + 12000 + 3 * f->compile_ms); /* waited for the expiry; no hang */
	st = stats_of(c);
	assert_int_equal(st.lease_waits, 1);
	assert_int_equal(st.uploads, 1);
	jitk_compiler_free(c);

	/* This process's own lease: taken, and given back after the upload. */
	c = compiler(f, c3, url, redis.url, 0, &log);
	assert_int_equal(precompile(c, SYM, "sm_100", &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_COMPILED);
	st = stats_of(c);
	assert_int_equal(st.lease_taken, 1);
	jitk_compiler_free(c);
	/* no lease is left on the sm_100 key */
	c = compiler(f, NULL, NULL, NULL, 0, &log);
	t_key(c, SYM, "sm_100", key2);
	jitk_compiler_free(c);
	hex_of(hex, key2);
	assert_int_equal(jitk__lease_check(other, hex, &left), JITK_LEASE_FREE);

	/* A read-only client takes none. */
	t_rmtree(c3);
	c = compiler(f, c3, url, redis.url, 1, &log);
	assert_int_equal(precompile(c, SYM, "sm_89", &origin), 0);
	st = stats_of(c);
	assert_int_equal(st.lease_taken, 0);
	assert_int_equal(st.uploads, 0);
	jitk_compiler_free(c);
	assert_int_equal(log.warnings, 0);
	jitk__lease_close(other);
	server_free(&redis);
	server_free(&web);
	free(url), free(dir), free(rdir), free(c1), free(c2), free(c3);
}

/* The lease server refuses, or accepts and never answers: leases are off
 * for the process at once (one warning, counted), builds go ahead. */
static void test_lease_server_down_or_slow(void **state)
{
	fixture *f = *state;
	fake_cfg silent = { FAKE_SILENT, NULL, 0, 0, NULL, 0 };
	char *dir = fresh(f, "lease-down"), *cache = t_path(dir, "c"), *url, lease[64];
	server web, slow;
	int round;

	if (nginx_start(&web, dir)) {
		free(dir), free(cache);
		skip();
	}
	fake_start(&slow, &silent);
	for (round = 0; round < 2; round++) {
		t_log log = { 0, "" };
		jitk_compiler *c;
		jitk_remote_stats st;
		int origin;
		double ms;

		t_rmtree(cache);
		url = jitk__asprintf("%s/down%d", web.url, round);
		if (round == 0)
			snprintf(lease, sizeof(lease), "redis://127.0.0.1:%d", free_port());
		else
			snprintf(lease, sizeof(lease), "redis://127.0.0.1:%d/0", slow.port);
		c = compiler(f, cache, url, lease, 0, &log);
		assert_int_equal(build_sym(c, f, &origin, &ms), 0);
		st = stats_of(c);
		printf("remote: lease server %s: compiled in %.0f ms (one compile: %.0f ms)\n",
		       round ? "accepts, never answers" : "refuses", ms, f->compile_ms);
		assert_int_equal(origin, JITK_ORIGIN_COMPILED);
		assert_int_equal(st.lease_errors, 1);
		assert_int_equal(st.uploads, 1);
		assert_int_equal(log.warnings, 1);
		assert_non_null(strstr(log.last, "compiling without leases in this process"));
		assert_true(ms - f->compile_ms < 10000); /* no hang; lease_errors == 1: off after one */
		jitk_compiler_free(c);
		holds_only_ref(f, cache);
		free(url);
	}
	server_stop(&slow);
	server_free(&web);
	free(dir), free(cache);
}

/* Run fn in a child of this process, which inherits c (it connects on its
 * own: neither the remote's handles nor the lease's connection cross a
 * fork), for at most limit_ms: fn's exit status, or -1 when the child had
 * to be killed at the limit. *ms: how long it ran; *rss_kb: its peak
 * resident size. */
typedef int (*child_fn)(jitk_compiler *c, t_log *log, const char *said);

static int in_child(child_fn fn, jitk_compiler *c, t_log *log, const char *said, double limit_ms,
		    double *ms, long *rss_kb)
{
	struct rusage ru;
	double t0 = jitk__now_ms();
	int st = 0;
	pid_t pid = fork(), w;

	assert_true(pid >= 0);
	if (!pid)
		_exit(fn(c, log, said));
	while ((w = wait4(pid, &st, WNOHANG, &ru)) == 0 && jitk__now_ms() - t0 < limit_ms)
		usleep(10000);
	*ms = jitk__now_ms() - t0;
	if (w == 0) {
		kill(pid, SIGKILL);
		assert_int_equal(wait4(pid, &st, 0, &ru), pid);
	} else {
		assert_int_equal(w, pid);
	}
	*rss_kb = ru.ru_maxrss;
	return w == 0 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* In the child: SYM compiles, with leases off after one lease error and
 * one warning that says `said`. 0, or which of these failed. */
static int build_without_leases(jitk_compiler *c, t_log *log, const char *said)
{
	jitk_remote_stats st = JITK_REMOTE_STATS_INIT;
	jitk_origin origin = JITK_ORIGIN_MEMORY;
	int rc = jitk_precompile(&origin, c, SYM, ARCH) ? 10 : origin != JITK_ORIGIN_COMPILED ? 11 : 0;

	if (jitk_remote_stats_get(&st, c))
		rc = 12;
	if (!rc && st.lease_errors != 1)
		rc = 13;
	if (!rc && (log->warnings != 1 || !strstr(log->last, said) ||
		    !strstr(log->last, "compiling without leases in this process")))
		rc = 14;
	if (rc)
		fprintf(stderr, "child: %d, %llu lease errors, %d warnings, last: %s\n", rc,
			(unsigned long long)st.lease_errors, log->warnings, log->last);
	return rc;
}

/* A lease server that answers one byte every 50 ms (this hung a
 * precompile for ever: the 100 ms timeout was per read, not per command),
 * streams an endless array (`*2147483647` and elements: one process grew
 * to 1.9 GB in 26 s) or an endless bulk string: every command has a
 * deadline for its whole reply, and a reply is bounded in size and never
 * an array. One warning, leases off, the build compiles, within about one
 * timeout and with no memory to speak of. Each case runs in a child that
 * is killed after 10 s, so that the unfixed client fails the test instead
 * of hanging it. */
static void test_lease_server_trickles_or_floods(void **state)
{
	static const struct {
		const char *name;
		int mode;
		const char *said;
	} cases[] = {
		{ "one byte per 50 ms", FAKE_REDIS_TRICKLE, "SET failed (no whole answer within 100 ms)" },
		{ "an endless array", FAKE_REDIS_FLOOD, "SET failed (an answer of a kind no lease command gets ('*'))" },
		{ "an endless string", FAKE_REDIS_BULK, "SET failed (an answer longer than 1024 bytes)" },
	};
	fixture *f = *state;
	char *dir = fresh(f, "lease-hostile"), *cache = t_path(dir, "c"), *store = t_path(dir, "store");
	fake_cfg web_cfg = { FAKE_STORE, NULL, 0, 0, store, 0 };
	struct rusage self;
	server web;
	size_t i;

	assert_int_equal(jitk__mkdirs(store, 0755), 0);
	fake_start(&web, &web_cfg);
	for (i = 0; i < JITK_ARRAY_SIZE(cases); i++) {
		fake_cfg cfg = { cases[i].mode, NULL, 0, 0, NULL, 0 };
		t_log log = { 0, "" };
		jitk_compiler *c;
		server redis;
		double ms;
		long rss;
		int rc;

		fake_start(&redis, &cfg);
		t_rmtree(cache);
		t_rmtree(store); /* the remote misses, so that the lease is asked */
		assert_int_equal(jitk__mkdirs(store, 0755), 0);
		c = compiler(f, cache, web.url, redis.url, 0, &log);
		getrusage(RUSAGE_SELF, &self);
		rc = in_child(build_without_leases, c, &log, cases[i].said, 10000, &ms, &rss);
		printf("remote: lease server sends %s: compiled in %.0f ms (one compile: %.0f ms), peak RSS %ld MB\n",
		       cases[i].name, ms, f->compile_ms, rss / 1024);
		assert_int_equal(rc, 0);
		assert_true(rss < self.ru_maxrss + 64 * 1024);
		jitk_compiler_free(c);
		server_stop(&redis);
	}
	server_stop(&web);
	free(dir), free(cache), free(store);
}

/* A lease server that says "held" for every key and never lets go cost
 * each key the lease's time to live and a second (11 s and about 100
 * GETs per key by default), and leases stayed on. Now the waits that end
 * without the holder's upload share one budget per process, one such
 * wait (ttl + 1 s): the first key waits, then leases are off (one
 * warning) and the other keys compile at once. */
static void test_a_lease_held_for_ever_costs_one_wait(void **state)
{
	fixture *f = *state;
	char *dir = fresh(f, "lease-held"), *cache = t_path(dir, "c"), *store = t_path(dir, "store");
	fake_cfg web_cfg = { FAKE_STORE, NULL, 0, 0, store, 0 };
	fake_cfg held = { FAKE_REDIS_HELD, NULL, 0, 0, NULL, 0 };
	t_log log = { 0, "" };
	jitk_remote_stats st;
	jitk_compiler *c;
	server web, redis;
	double t0, ms;
	size_t i;

	assert_int_equal(jitk__mkdirs(store, 0755), 0);
	fake_start(&web, &web_cfg);
	fake_start(&redis, &held);
	c = compiler_timed(f, cache, web.url, redis.url, 0, &log, -1, 200);
	assert_true(jitk_instance_count(c) >= 3);
	t0 = jitk__now_ms();
	for (i = 0; i < 3; i++) {
		int origin;

		assert_int_equal(precompile(c, jitk_instance_name(c, i), ARCH, &origin), 0);
		assert_int_equal(origin, JITK_ORIGIN_COMPILED);
	}
	ms = jitk__now_ms() - t0;
	st = stats_of(c);
	printf("remote: a lease held for ever (200 ms to live): 3 kernels in %.0f ms, %llu waits\n", ms,
	       (unsigned long long)st.lease_waits);
	assert_int_equal(st.lease_waits, 1);
	assert_int_equal(st.lease_errors, 1);
	assert_int_equal(st.lease_taken, 0);
	assert_int_equal(st.uploads, 3);
	assert_true(st.lease_wait_ms >= 1200 - 50);
	assert_int_equal(log.warnings, 1);
	assert_non_null(strstr(log.last, "waiting for other processes' leases took "));
	assert_non_null(strstr(log.last, "without an upload, the budget of one lease's wait (1200 ms); "
				"compiling without leases in this process"));
	jitk_compiler_free(c);
	server_stop(&redis);
	server_stop(&web);
	free(dir), free(cache), free(store);
}

/* 32 processes over two local cache directories cold-start K kernels
 * against one remote at once, without and with the lease: the totals
 * compiled (printed). Without, each directory's lock holder compiles what
 * the remote does not have yet (K to 2K); with, K. */
static int cold_start(const fixture *f, const char *dir, const char *url, const char *lease,
		      const char *const *names, int k, double *secs)
{
	pid_t pids[32];
	int go[2], i, total = 0, st;
	double t0 = jitk__now_ms();
	char *caches[2] = { t_path(dir, "one"), t_path(dir, "two") };

	assert_int_equal(pipe(go), 0);
	for (i = 0; i < 32; i++) {
		pids[i] = fork();
		assert_true(pids[i] >= 0);
		if (!pids[i]) {
			jitk_compiler_options o = JITK_COMPILER_OPTIONS_INIT;
			jitk_compiler *c;
			char b;
			int j, compiled = 0;

			close(go[1]);
			if (read(go[0], &b, 1) < 0) /* all start together */
				_exit(100);
			o.specs = f->specs;
			o.cache_dir = caches[i % 2];
			o.cache_path = "";
			o.no_compile = 0;
			o.force_compile = 0;
			o.remote = url;
			o.remote_lease = lease ? lease : "";
			if (jitk_compiler_new(&c, &o))
				_exit(101);
			for (j = 0; j < k; j++) {
				jitk_origin origin;

				if (jitk_precompile(&origin, c, names[j], ARCH))
					_exit(102);
				compiled += origin == JITK_ORIGIN_COMPILED;
			}
			jitk_compiler_free(c);
			_exit(compiled);
		}
	}
	close(go[0]);
	close(go[1]);
	for (i = 0; i < 32; i++) {
		assert_int_equal(waitpid(pids[i], &st, 0), pids[i]);
		assert_true(WIFEXITED(st));
		assert_true(WEXITSTATUS(st) <= k);
		total += WEXITSTATUS(st);
	}
	*secs = (jitk__now_ms() - t0) / 1000;
	for (i = 0; i < 2; i++) {
		jitk_cache_summary s = JITK_CACHE_SUMMARY_INIT;

		assert_int_equal(jitk__cache_scan(&s, caches[i], 1, NULL, NULL), 0);
		assert_int_equal(s.entries, (uint64_t)k);
		assert_int_equal(s.bad, 0);
		free(caches[i]);
	}
	return total;
}

/* A compile longer than the lease's time to live (a CUTLASS GEMM is a
 * minute of NVRTC; a lease lives 10 s): the holder renews its lease while
 * it compiles, and the others wait on it (before the renewal, every
 * process whose wait outlived the lease compiled the key too: 8 of 8
 * processes for one GEMM). Here this process holds a lease of 600 ms on
 * the key and a child uploads the entry after 2 s; a compiler waiting on
 * the lease gets it from the remote and compiles nothing. */
static void test_a_lease_outlives_its_ttl_while_its_holder_compiles(void **state)
{
	fixture *f = *state;
	char *dir = fresh(f, "renew"), *rdir = t_path(dir, "redis"), *cache = t_path(dir, "c");
	char hex[2 * JITK_HASH_SIZE + 1], *url;
	t_log log = { 0, "" };
	jitk_lease *holder;
	jitk_compiler *c;
	server web, redis;
	double ms;
	long left;
	int origin, stw;
	pid_t pid;

	assert_int_equal(jitk__mkdirs(rdir, 0755), 0);
	if (nginx_start(&web, dir) || redis_start(&redis, rdir)) {
		server_free(&web);
		free(dir), free(rdir), free(cache);
		skip();
	}
	url = jitk__asprintf("%s/renew", web.url);
	assert_int_equal(jitk__lease_open(&holder, redis.url, 0, 600, NULL), 0);
	hex_of(hex, f->key);
	assert_int_equal(jitk__lease_take(holder, hex, &left), JITK_LEASE_TAKEN);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		jitk_remote *r = NULL;

		usleep(2000000); /* "compiling": past three times the lease's life */
		if (jitk__remote_open(&r, url, 0, 0, 0, NULL) || jitk__remote_put(r, f->key, f->ref, f->ref_len))
			_exit(1);
		jitk__remote_close(r);
		_exit(0);
	}
	c = compiler(f, cache, url, redis.url, 0, &log);
	assert_int_equal(build_sym(c, f, &origin, &ms), 0);
	assert_int_equal(waitpid(pid, &stw, 0), pid);
	assert_true(WIFEXITED(stw) && WEXITSTATUS(stw) == 0);
	printf("remote: a lease of 600 ms renewed by its holder, upload after 2 s: remote hit after %.0f ms\n",
	       ms);
	assert_int_equal(origin, JITK_ORIGIN_REMOTE);
	assert_int_equal(atomic_load(&c->compiles), 0);
	assert_true(ms >= 1500); /* it waited past the lease's first life */
	jitk__lease_release(holder, hex);
	jitk__lease_close(holder);
	jitk_compiler_free(c);
	server_free(&redis);
	server_free(&web);
	free(url), free(dir), free(rdir), free(cache);
}

/* One command to a Redis server on fd (inline), and its answer in out: a
 * status, error or integer line, or a bulk string's text. Fails the test
 * when none comes within 10 s. */
static void redis_ask(int fd, const char *cmd, char *out, size_t cap)
{
	struct timeval tv = { 10, 0 };
	size_t n = 0, want = 0;

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	send_all(fd, cmd, strlen(cmd));
	send_all(fd, "\r\n", 2);
	for (;;) {
		char *eol;
		ssize_t k = recv(fd, out + n, cap - 1 - n, 0);

		assert_true(k > 0);
		out[n += (size_t)k] = 0;
		if (!(eol = strstr(out, "\r\n")))
			continue;
		if (out[0] != '$')
			break;
		want = (size_t)(eol - out) + 2 + strtoul(out + 1, NULL, 10) + 2;
		assert_true(want < cap);
		if (n >= want)
			break;
	}
}

/* In a child of a process whose lease is being renewed: take a lease on
 * a key of its own through the parent's lease object, see it held, give
 * it back and close the lease (joining the child's own renewer). 0, or
 * the step that failed; a step that hangs ends in SIGALRM after 20 s. */
static int lease_in_child(jitk_lease *l, int i)
{
	char hex[2 * JITK_HASH_SIZE + 1];
	long left;
	int rc = 0;

	signal(SIGALRM, SIG_DFL); /* not the test runner's own timeout */
	alarm(20);
	snprintf(hex, sizeof(hex), "c0ffee%058x", (unsigned)i);
	if (jitk__lease_take(l, hex, &left) != JITK_LEASE_TAKEN)
		rc = 1;
	else if (jitk__lease_check(l, hex, &left) != JITK_LEASE_HELD)
		rc = 2;
	if (!rc) {
		jitk__lease_release(l, hex);
		if (jitk__lease_check(l, hex, &left) != JITK_LEASE_FREE)
			rc = 3;
	}
	jitk__lease_close(l);
	return rc;
}

/* Fork a child that runs lease_in_child on l and see it succeed; the
 * fork's time in *fork_ms. */
static void child_takes_a_lease(jitk_lease *l, int i, double *fork_ms)
{
	double t0 = jitk__now_ms();
	pid_t pid = fork();
	int st;

	assert_true(pid >= 0);
	if (!pid)
		_exit(lease_in_child(l, i));
	*fork_ms = jitk__now_ms() - t0;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM)
		fail_msg("child %d: a lease operation hung (its 20 s alarm went off)", i);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		fail_msg("child %d: %s %d", i, WIFEXITED(st) ? "failed at step" : "killed by signal",
			 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
}

/* A process forked while its lease's renewer thread held one of the
 * lease's mutexes (the connection's, held across each command, for up to
 * the timeout) gave its child a mutex locked for ever: the child's first
 * lease operation hung (a Python program forking workers after a compile
 * with JITK_REMOTE_LEASE set). And a child of a renewer waiting on its
 * condition variable hung in the lease's close (glibc's destroy waits for
 * that waiter, which is not in the child). Here the renewer is caught
 * inside its command for certain: the server is paused for writes
 * (CLIENT PAUSE WRITE, 1 s), so the renewal's EVAL waits unanswered, and
 * the test forks once the server counts it blocked. Then 50 forks at
 * moments spread over the renewer's period. Each child takes, checks and
 * gives back a lease of its own through the inherited object, and closes
 * it, under a 20 s alarm. */
static void test_a_child_forked_while_the_renewer_holds_the_lock_takes_a_lease(void **state)
{
	fixture *f = *state;
	char *dir = fresh(f, "renew-fork"), hex[2 * JITK_HASH_SIZE + 1], info[4096];
	jitk_lease *l;
	server redis;
	double t0, ms, most = 0;
	long left;
	int fd;

	if (redis_start(&redis, dir)) {
		free(dir);
		skip();
	}
	/* a timeout longer than the pause: the renewal waits it out */
	assert_int_equal(jitk__lease_open(&l, redis.url, 10000, 200, NULL), 0);
	hex_of(hex, f->key);
	assert_int_equal(jitk__lease_take(l, hex, &left), JITK_LEASE_TAKEN);
	assert_true((fd = connect_to(redis.port)) >= 0);
	redis_ask(fd, "CLIENT PAUSE 1000 WRITE", info, sizeof(info));
	assert_string_equal(info, "+OK\r\n");
	/* the renewal comes within 50 ms (ttl / 4); INFO is no write */
	t0 = jitk__now_ms();
	do {
		assert_true(jitk__now_ms() - t0 < 10000);
		usleep(5000);
		redis_ask(fd, "INFO clients", info, sizeof(info));
	} while (!strstr(info, "blocked_clients:1\r\n"));
	child_takes_a_lease(l, 0, &ms);
	printf("remote: fork while the renewer's command waits on a paused server: the fork took "
	       "%.0f ms (until the command's answer)\n",
	       ms);
	/* the key may have expired in the pause: the renewer renews another */
	hex[0] = hex[0] == 'f' ? '0' : 'f';
	assert_int_equal(jitk__lease_take(l, hex, &left), JITK_LEASE_TAKEN);
	for (int i = 1; i <= 50; i++) {
		usleep((useconds_t)(i * 7919 % 50000));
		child_takes_a_lease(l, i, &ms);
		most = ms > most ? ms : most;
	}
	printf("remote: 50 forks while the lease renews every 50 ms: each child took a lease; "
	       "the slowest fork took %.1f ms\n",
	       most);
	/* and the parent's lease works on */
	jitk__lease_release(l, hex);
	assert_int_equal(jitk__lease_check(l, hex, &left), JITK_LEASE_FREE);
	assert_int_equal(atomic_load(&jitk__lease_counters(l)->errors), 0);
	jitk__lease_close(l);
	close(fd);
	server_free(&redis);
	free(dir);
}

static void test_32_processes_with_and_without_lease(void **state)
{
	fixture *f = *state;
	char *dir = fresh(f, "fleet"), *rdir = t_path(dir, "redis"), *d1 = t_path(dir, "r1");
	char *d2 = t_path(dir, "r2"), *u1, *u2;
	const char *names[2];
	t_log log = { 0, "" };
	jitk_compiler *c;
	server web, redis;
	int without, with;
	double s1, s2;

	assert_int_equal(jitk__mkdirs(rdir, 0755), 0);
	if (nginx_start(&web, dir) || redis_start(&redis, rdir)) {
		server_free(&web);
		free(dir), free(rdir), free(d1), free(d2);
		skip();
	}
	c = compiler(f, NULL, NULL, NULL, 0, &log);
	names[0] = SYM;
	names[1] = instance_of(c, SYM2);
	u1 = jitk__asprintf("%s/without", web.url);
	u2 = jitk__asprintf("%s/with", web.url);
	without = cold_start(f, d1, u1, NULL, names, 2, &s1);
	with = cold_start(f, d2, u2, redis.url, names, 2, &s2);
	printf("remote: 32 processes, 2 cache directories, 2 kernels, one remote: %d compiles "
	       "without the lease (%.2f s), %d with it (%.2f s)\n",
	       without, s1, with, s2);
	assert_true(without >= 2 && without <= 4);
	assert_int_equal(with, 2);
	jitk_compiler_free(c);
	server_free(&redis);
	server_free(&web);
	free(u1), free(u2), free(dir), free(rdir), free(d1), free(d2);
}

/* ------------------------------------------------------------------- S3 */

/* The value of header name in a request head, trimmed (static buffer). */
static const char *header_value(const char *head, const char *name)
{
	static char v[1024];
	const char *p = head;
	size_t n = strlen(name);

	while ((p = strstr(p, "\r\n"))) {
		p += 2;
		if (!strncasecmp(p, name, n) && p[n] == ':') {
			const char *s = p + n + 1, *e = strstr(s, "\r\n");

			while (*s == ' ')
				s++;
			while (e > s && e[-1] == ' ')
				e--;
			snprintf(v, sizeof(v), "%.*s", (int)(e - s), s);
			return v;
		}
	}
	return NULL;
}

static void hmac(uint8_t out[32], const void *key, size_t klen, const char *msg)
{
	unsigned int n = 32;

	assert_non_null(HMAC(EVP_sha256(), key, (int)klen, (const uint8_t *)msg, strlen(msg), out, &n));
}

/* Check one request's AWS Signature Version 4 as S3 would: rebuild the
 * canonical request from what arrived, sign it with the secret, compare. */
static void check_sigv4(const char *head, const char *secret, const char *region,
			const uint8_t *body, size_t len)
{
	char method[16], path[512], date[9], *signed_hdrs, *p, *tok, *save = NULL;
	char hexsum[65], canon_hex[65], sig_hex[65], scope[128];
	const char *sig;
	char *auth, *amzdate;
	uint8_t sum[32], k[32], k2[32];
	jbuf canon, sts;
	char *ksecret;

	assert_non_null(header_value(head, "authorization"));
	auth = jitk__strdup(header_value(head, "authorization"));
	assert_int_equal(sscanf(head, "%15s %511s", method, path), 2);
	assert_non_null(header_value(head, "x-amz-date"));
	amzdate = jitk__strdup(header_value(head, "x-amz-date"));
	snprintf(date, sizeof(date), "%.8s", amzdate);
	snprintf(scope, sizeof(scope), "%s/%s/s3/aws4_request", date, region);
	p = jitk__asprintf("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/%s, SignedHeaders=", scope);
	if (strncmp(auth, p, strlen(p)))
		fprintf(stderr, "Authorization: %s\n", auth);
	assert_memory_equal(auth, p, strlen(p));
	signed_hdrs = jitk__strdup(auth + strlen(p));
	free(p);
	sig = strstr(auth, ", Signature=");
	assert_non_null(sig);
	signed_hdrs[strcspn(signed_hdrs, ",")] = '\0';
	assert_non_null(strstr(signed_hdrs, "host"));
	assert_non_null(strstr(signed_hdrs, "x-amz-content-sha256"));
	assert_non_null(strstr(signed_hdrs, "x-amz-date"));
	assert_non_null(strstr(signed_hdrs, "x-amz-security-token"));
	/* the payload's hash is the body's, and S3 checks it */
	assert_int_equal(jitk__sha256(sum, body, len), 0);
	jitk__hex(hexsum, sum, 32);
	assert_string_equal(header_value(head, "x-amz-content-sha256"), hexsum);
	assert_string_equal(header_value(head, "x-amz-security-token"), "TOKEN/with+chars=");

	jitk__jbuf_init(&canon);
	jitk__jbuf_printf(&canon, "%s\n%s\n\n", method, path);
	p = jitk__strdup(signed_hdrs);
	for (tok = strtok_r(p, ";", &save); tok; tok = strtok_r(NULL, ";", &save)) {
		const char *v = header_value(head, tok);

		if (!v)
			fprintf(stderr, "no %s in:\n%s\n", tok, head);
		assert_non_null(v);
		jitk__jbuf_printf(&canon, "%s:%s\n", tok, v);
	}
	free(p);
	jitk__jbuf_printf(&canon, "\n%s\n%s", signed_hdrs, hexsum);
	assert_false(canon.oom);
	assert_int_equal(jitk__sha256(sum, canon.data, canon.len), 0);
	jitk__hex(canon_hex, sum, 32);
	jitk__jbuf_init(&sts);
	jitk__jbuf_printf(&sts, "AWS4-HMAC-SHA256\n%s\n%s\n%s", amzdate, scope, canon_hex);
	ksecret = jitk__asprintf("AWS4%s", secret);
	hmac(k, ksecret, strlen(ksecret), date);
	hmac(k2, k, 32, region);
	hmac(k, k2, 32, "s3");
	hmac(k2, k, 32, "aws4_request");
	hmac(k, k2, 32, sts.data);
	jitk__hex(sig_hex, k, 32);
	assert_string_equal(sig + strlen(", Signature="), sig_hex);
	free(ksecret);
	free(signed_hdrs);
	free(auth);
	free(amzdate);
	jitk__jbuf_free(&canon);
	jitk__jbuf_free(&sts);
}

/* With the AWS variables set, every request is signed (SigV4, service s3,
 * the region, the session token, the payload's hash): the signatures are
 * checked here as S3 computes them. */
static void test_s3_signing(void **state)
{
	fixture *f = *state;
	char *dir = fresh(f, "s3"), *a = t_path(dir, "a"), *b = t_path(dir, "b"), *log_path, *heads;
	fake_cfg cfg = { FAKE_STORE, NULL, 0, 0, NULL, 0 };
	const char *secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
	t_log log = { 0, "" };
	jitk_compiler *c;
	server s;
	size_t len, at, n = 0;
	int origin;
	double ms;

	cfg.dir = dir;
	fake_start(&s, &cfg);
	setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE", 1);
	setenv("AWS_SECRET_ACCESS_KEY", secret, 1);
	setenv("AWS_SESSION_TOKEN", "TOKEN/with+chars=", 1);
	setenv("AWS_REGION", "eu-west-1", 1);
	{
		char url[96];

		snprintf(url, sizeof(url), "%s/bucket", s.url);
		c = compiler(f, a, url, NULL, 0, &log);
		assert_int_equal(build_sym(c, f, &origin, &ms), 0);
		assert_int_equal(origin, JITK_ORIGIN_COMPILED);
		assert_int_equal(stats_of(c).uploads, 1);
		jitk_compiler_free(c);
		c = compiler(f, b, url, NULL, 0, &log);
		assert_int_equal(build_sym(c, f, &origin, &ms), 0);
		assert_int_equal(origin, JITK_ORIGIN_REMOTE);
		jitk_compiler_free(c);
	}
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	unsetenv("AWS_SESSION_TOKEN");
	unsetenv("AWS_REGION");
	server_stop(&s);
	assert_int_equal(log.warnings, 0);
	/* GET (miss), PUT, GET (hit) */
	log_path = t_path(dir, "heads.log");
	heads = t_read(log_path, &len);
	for (at = 0; at < len; at += strlen(heads + at) + 1, n++) {
		const char *h = heads + at;
		int put = !strncmp(h, "PUT ", 4);

		check_sigv4(h, secret, "eu-west-1", put ? f->ref : (const uint8_t *)"", put ? f->ref_len : 0);
	}
	assert_int_equal(n, 3);
	free(heads);
	free(log_path);
	free(dir), free(a), free(b);
}

/* --------------------------------------------------------------- bundles */

typedef struct {
	int n;
	char last[512];
} t_reports;

static void report_fn(void *payload, const char *what, const char *problem)
{
	t_reports *r = payload;

	r->n++;
	snprintf(r->last, sizeof(r->last), "%s: %s", what, problem);
}

/* Every index record's entry, read through a plain mmap of the file, is
 * byte for byte the entry file of its key in cache: the format needs no
 * parser but the header's and records' fixed fields. */
static void mmap_matches(const char *file, const char *cache, uint32_t want)
{
	int fd = open(file, O_RDONLY);
	struct stat st;
	const uint8_t *m;
	uint64_t index_at;
	uint32_t count, i;

	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	assert_true(m != MAP_FAILED);
	assert_memory_equal(m, "JITKBND1", 8);
	count = jitk__get32(m + 20);
	index_at = jitk__get64(m + 24);
	assert_int_equal(count, want);
	assert_int_equal(jitk__get64(m + 32), (uint64_t)st.st_size);
	for (i = 0; i < count; i++) {
		const uint8_t *r = m + index_at + (size_t)i * JITK_BUNDLE_RECORD;
		uint64_t at = jitk__get64(r + 48), len = jitk__get64(r + 56);
		char *p = t_entry_path(cache, r), *data;
		size_t n;

		assert_int_equal(at % JITK_BUNDLE_ALIGN, 0);
		data = t_read(p, &n);
		assert_int_equal(n, len);
		assert_memory_equal(data, m + at, n);
		free(data);
		free(p);
	}
	munmap((void *)m, (size_t)st.st_size);
	close(fd);
}

static void flip_at(const char *file, size_t at)
{
	size_t len;
	char *data = t_read(file, &len);

	data[at] ^= 0x11;
	t_write(file, data, len);
	free(data);
}

static void test_bundles(void **state)
{
	fixture *f = *state;
	char *dir = fresh(f, "bundle"), *cache = t_path(dir, "cache"), *file = t_path(dir, "k.jitkb");
	char *copy = t_path(dir, "k2.jitkb"), *none = t_path(dir, "none.jitkb"), *into = t_path(dir, "into");
	char *empty = t_path(dir, "empty"), *text;
	jitk_bundle_summary s = JITK_BUNDLE_SUMMARY_INIT;
	jitk_compiler_options o;
	t_reports rep = { 0, "" };
	t_log log = { 0, "" };
	jitk_compiler *c;
	jitk_cache_summary cs = JITK_CACHE_SUMMARY_INIT;
	size_t n, i, len, len2;
	char *a, *b;

	/* a cache with every kernel for ARCH and one for sm_100 */
	c = compiler(f, cache, NULL, NULL, 0, &log);
	n = jitk_instance_count(c);
	for (i = 0; i < n; i++)
		assert_int_equal(jitk_precompile(NULL, c, jitk_instance_name(c, i), ARCH), 0);
	assert_int_equal(jitk_precompile(NULL, c, SYM, "sm_100"), 0);
	jitk_compiler_free(c);

	assert_int_equal(jitk_cache_pack(&s, file, cache, ARCH, report_fn, &rep), 0);
	assert_int_equal(s.entries, n);
	assert_int_equal(s.skipped, 1); /* the sm_100 entry */
	assert_int_equal(s.bad, 0);
	assert_int_equal(rep.n, 0);
	mmap_matches(file, cache, (uint32_t)n);
	/* the same cache packs to the same bytes */
	assert_int_equal(jitk_cache_pack(NULL, copy, cache, ARCH, NULL, NULL), 0);
	a = t_read(file, &len);
	b = t_read(copy, &len2);
	assert_int_equal(len, len2);
	assert_memory_equal(a, b, len);
	free(b);
	assert_int_equal(jitk_bundle_verify(&s, file, report_fn, &rep), 0);
	assert_int_equal(s.entries, n);
	assert_int_equal(s.bad, 0);
	assert_int_equal(t_count_files(dir, ".tmp"), 0);
	printf("remote: bundle of %zu kernels: %zu bytes\n", n, len);

	/* The bundle as the only layer, compiling disabled: every instance. */
	assert_int_equal(jitk_compiler_options_init(&o, JITK_COMPILER_OPTIONS_VERSION), 0);
	o.specs = f->specs;
	o.cache_dir = "";
	o.cache_path = file;
	o.no_compile = 1;
	o.log = t_log_fn;
	o.log_payload = &log;
	assert_int_equal(jitk_compiler_new(&c, &o), 0);
	for (i = 0; i < n; i++) {
		jitk_origin origin = JITK_ORIGIN_MEMORY;

		assert_int_equal(jitk_precompile(&origin, c, jitk_instance_name(c, i), ARCH), 0);
		assert_int_equal(origin, JITK_ORIGIN_LAYER);
	}
	assert_int_equal(atomic_load(&c->compiles), 0);
	assert_int_equal(jitk_precompile(NULL, c, SYM, "sm_100"), JITK_ENOCOMPILE);
	jitk_compiler_free(c);
	assert_int_equal(log.warnings, 0);

	/* A byte of one entry flipped: verify names it; a lookup rejects it. */
	memcpy(b = malloc(len), a, len);
	flip_at(file, JITK_BUNDLE_HEADER + 300);
	assert_int_equal(jitk_bundle_verify(&s, file, report_fn, &rep), 0);
	assert_int_equal(s.bad, 1);
	assert_int_equal(s.entries, n - 1);
	assert_non_null(strstr(rep.last, "checksum mismatch"));
	assert_int_equal(jitk_cache_unpack(&s, file, into, report_fn, &rep), 0);
	assert_int_equal(s.entries, n - 1);
	assert_int_equal(s.bad, 1);
	assert_int_equal(jitk__cache_scan(&cs, into, 1, NULL, NULL), 0);
	assert_int_equal(cs.entries, n - 1);
	assert_int_equal(cs.bad, 0);
	c = compiler(f, empty, NULL, NULL, 0, &log);
	jitk_compiler_free(c);
	o.cache_dir = "";
	o.no_compile = 0;
	log.warnings = 0;
	assert_int_equal(jitk_compiler_new(&c, &o), 0);
	for (i = 0; i < n; i++)
		assert_int_equal(jitk_precompile(NULL, c, jitk_instance_name(c, i), ARCH), 0);
	assert_int_equal(atomic_load(&c->compiles), 1);
	/* the bundle is a read-only layer: its tier counts the reject */
	assert_int_equal(atomic_load(&jitk__tier_layers_counters(c->layers)->rejects), 1);
	assert_int_equal(log.warnings, 1);
	assert_non_null(strstr(log.last, "rejected: checksum mismatch"));
	jitk_compiler_free(c);

	/* A byte of the index flipped: no bundle; as a layer, one warning. */
	t_write(file, b, len);
	flip_at(file, len - 10);
	assert_int_equal(jitk_bundle_verify(&s, file, report_fn, &rep), JITK_EIO);
	assert_non_null(strstr(jitk_error_last()->message, "header or index checksum mismatch"));
	log.warnings = 0;
	assert_int_equal(jitk_compiler_new(&c, &o), 0);
	assert_int_equal(log.warnings, 1);
	assert_non_null(strstr(log.last, "ignored: a bundle, but header or index checksum mismatch"));
	jitk_compiler_free(c);
	/* Cut short: its size is not its header's. */
	t_write(file, b, len - 64);
	assert_int_equal(jitk_bundle_verify(&s, file, NULL, NULL), JITK_EIO);
	assert_non_null(strstr(jitk_error_last()->message, "its size is not the size in its header"));
	/* Nonzero padding is found too (no checksum covers it). */
	t_write(file, b, len);
	{
		uint64_t end = jitk__get64((uint8_t *)b + jitk__get64((uint8_t *)b + 24) + 56) +
			       JITK_BUNDLE_HEADER;

		if (end % JITK_BUNDLE_ALIGN) {
			flip_at(file, (size_t)end);
			assert_int_equal(jitk_bundle_verify(&s, file, report_fn, &rep), 0);
			assert_int_equal(s.bad, 1);
			assert_non_null(strstr(rep.last, "padding after the entry is not zero"));
		}
	}
	t_write(file, b, len);

	/* Unpack into a fresh cache: every entry; again: all already there. */
	t_rmtree(into);
	assert_int_equal(jitk_cache_unpack(&s, file, into, NULL, NULL), 0);
	assert_int_equal(s.entries, n);
	assert_int_equal(jitk_cache_unpack(&s, file, into, NULL, NULL), 0);
	assert_int_equal(s.entries, 0);
	assert_int_equal(s.skipped, n);
	assert_int_equal(jitk__cache_scan(&cs, into, 1, NULL, NULL), 0);
	assert_int_equal(cs.entries, n);
	assert_int_equal(cs.bad, 0);

	/* Refusals, one message each. */
	assert_int_equal(jitk_bundle_verify(&s, none, NULL, NULL), JITK_ENOENT);
	assert_non_null(strstr(jitk_error_last()->message, "no bundle at"));
	text = t_path(dir, "text");
	t_writef(text, "not a bundle at all, but long enough to hold a header........................"
		       "..................................................................\n");
	assert_int_equal(jitk_bundle_verify(&s, text, NULL, NULL), JITK_EIO);
	assert_non_null(strstr(jitk_error_last()->message, "not a jitk bundle (bad magic)"));
	assert_int_equal(jitk_cache_pack(&s, file, cache, "sm_9x", NULL, NULL), JITK_EINVAL);
	assert_int_equal(jitk_cache_pack(&s, file, none, NULL, NULL, NULL), JITK_ENOENT);
	assert_int_equal(jitk_cache_unpack(&s, file, "", NULL, NULL), JITK_EIO);
	s.version = 99;
	assert_int_equal(jitk_bundle_verify(&s, file, NULL, NULL), JITK_EINVAL);
	/* --arch sm_100: only that entry */
	s.version = JITK_BUNDLE_SUMMARY_VERSION;
	assert_int_equal(jitk_cache_pack(&s, copy, cache, "sm_100", NULL, NULL), 0);
	assert_int_equal(s.entries, 1);
	assert_int_equal(s.skipped, n);

	free(a), free(b), free(text);
	free(dir), free(cache), free(file), free(copy), free(none), free(into), free(empty);
}

/* ------------------------------------------------------------- options */

static void test_options_and_urls(void **state)
{
	fixture *f = *state;
	jitk_compiler_options o;
	jitk_remote_stats st = JITK_REMOTE_STATS_INIT;
	t_log log = { 0, "" };
	jitk_compiler *c;
	struct {
		unsigned version;
		const char *specs, *cache_dir, *cache_path;
		int no_compile, force_compile;
		const char *dump_dir;
		jitk_log_fn log;
		void *log_payload;
		int log_level, cache_read_only;
	} v1; /* what a program built against version 1 passes */

	/* version 1: no remote fields read; the environment still counts */
	assert_int_equal(jitk_compiler_options_init((jitk_compiler_options *)(void *)&v1, 1), 0);
	v1.specs = f->specs;
	v1.cache_dir = "";
	v1.log = t_log_fn;
	v1.log_payload = &log;
	setenv("JITK_REMOTE_CACHE", "http://127.0.0.1:1", 1);
	assert_int_equal(jitk_compiler_new(&c, (jitk_compiler_options *)(void *)&v1), 0);
	assert_non_null(c->remote);
	jitk_compiler_free(c);
	unsetenv("JITK_REMOTE_CACHE");
	assert_int_equal(jitk_compiler_new(&c, (jitk_compiler_options *)(void *)&v1), 0);
	assert_null(c->remote);
	assert_int_equal(jitk_remote_stats_get(&st, c), 0);
	assert_int_equal(st.hits + st.errors, 0);
	st.version = 7;
	assert_int_equal(jitk_remote_stats_get(&st, c), JITK_EINVAL);
	jitk_compiler_free(c);

	/* version 2 defaults; bad URLs are one warning each and no remote */
	assert_int_equal(jitk_compiler_options_init(&o, 2), 0);
	assert_null(o.remote);
	assert_int_equal(o.remote_read_only, -1);
	assert_int_equal(o.remote_timeout_ms, -1);
	assert_int_equal(jitk_compiler_options_init(&o, JITK_COMPILER_OPTIONS_VERSION + 1), JITK_EINVAL);
	c = compiler(f, NULL, "ftp://x/y,http://,http://h/a b,http://h/?q", "redis://h:99999", 0, &log);
	assert_null(c->remote);
	assert_int_equal(log.warnings, 5);
	assert_non_null(strstr(log.last, "lease server redis://h:99999 ignored: there is no remote cache"));
	jitk_compiler_free(c);
	log.warnings = 0;
	c = compiler(f, NULL, "http://127.0.0.1:1", "redis://h:99999", 0, &log);
	assert_non_null(c->remote);
	assert_null(c->lease);
	assert_int_equal(log.warnings, 1);
	assert_non_null(strstr(log.last, "ignored: a bad port"));
	jitk_compiler_free(c);
	log.warnings = 0;
	c = compiler(f, NULL, "http://127.0.0.1:1", "redis://:secret@[::1]:6380/2", 0, &log);
	assert_non_null(c->lease);
	assert_int_equal(log.warnings, 0);
	jitk_compiler_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_sigpipe_reaches_the_host),
		cmocka_unit_test(test_server_closes_mid_request),
		cmocka_unit_test(test_options_and_urls),
		cmocka_unit_test(test_two_caches_share_through_nginx),
		cmocka_unit_test(test_rendezvous_over_urls),
		cmocka_unit_test(test_threads_fork_and_no_compile),
		cmocka_unit_test(test_a_bad_remote_never_fails_a_build),
		cmocka_unit_test(test_a_slow_remote_is_switched_off),
		cmocka_unit_test(test_a_refused_compile_says_what_happened_to_the_remote_object),
		cmocka_unit_test(test_credentials_never_reach_a_message),
		cmocka_unit_test(test_lease_wait_and_expiry),
		cmocka_unit_test(test_lease_server_down_or_slow),
		cmocka_unit_test(test_lease_server_trickles_or_floods),
		cmocka_unit_test(test_a_lease_held_for_ever_costs_one_wait),
		cmocka_unit_test(test_32_processes_with_and_without_lease),
		cmocka_unit_test(test_a_lease_outlives_its_ttl_while_its_holder_compiles),
		cmocka_unit_test(test_a_child_forked_while_the_renewer_holds_the_lock_takes_a_lease),
		cmocka_unit_test(test_s3_signing),
		cmocka_unit_test(test_bundles),
	};

	/* the user's settings are not the test's */
	unsetenv("JITK_REMOTE_CACHE");
	unsetenv("JITK_REMOTE_READONLY");
	unsetenv("JITK_REMOTE_LEASE");
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	/* JITK_TEST_FILTER=test_lease* runs the matching tests only */
	if (getenv("JITK_TEST_FILTER"))
		cmocka_set_test_filter(getenv("JITK_TEST_FILTER"));
	return T_RUN_TESTS(tests, group_setup, group_teardown);
}
