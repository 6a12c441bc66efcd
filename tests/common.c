/* common.c - helpers shared by the cmocka tests. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "compile/compile.h"
#include "base/internal.h"

const char *t_root(void)
{
	const char *r = getenv("JITK_TEST_ROOT");

	return r && *r ? r : ".";
}

char *t_tmpdir(void)
{
	const char *base = getenv("TMPDIR");
	char *tmpl = jitk__asprintf("%s/jitk-test-XXXXXX", base && *base ? base : "/tmp");

	assert_non_null(tmpl);
	assert_non_null(mkdtemp(tmpl));
	return tmpl;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (flag == FTW_DP)
		chmod(path, 0700), rmdir(path);
	else
		unlink(path);
	return 0;
}

void t_rmtree(const char *path)
{
	if (path)
		nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

void t_write(const char *path, const void *data, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, n), (ssize_t)n);
	close(fd);
}

void t_writef(const char *path, const char *fmt, ...)
{
	jbuf b;
	va_list ap;

	jitk__jbuf_init(&b);
	va_start(ap, fmt);
	jitk__jbuf_vprintf(&b, fmt, ap);
	va_end(ap);
	assert_false(b.oom);
	t_write(path, b.data ? b.data : "", b.len);
	jitk__jbuf_free(&b);
}

char *t_read(const char *path, size_t *len)
{
	char *out = NULL;

	assert_int_equal(jitk__read_file(&out, len, path, 1u << 30), 0);
	return out;
}

jitk_arg t_tensor_arg(const char *name, const jitk_tensor *t)
{
	jitk_arg a;

	a.name = name;
	a.type = JITK_ARG_TENSOR;
	a.v.tensor = t;
	return a;
}

char *t_path(const char *dir, const char *name)
{
	char *p = jitk__asprintf("%s/%s", dir, name);

	assert_non_null(p);
	return p;
}

static char *replace_all(const char *s, const char *from, const char *to)
{
	jbuf b;
	const char *p = s, *q;

	jitk__jbuf_init(&b);
	while (from && (q = strstr(p, from))) {
		jitk__jbuf_put(&b, p, (size_t)(q - p));
		jitk__jbuf_puts(&b, to);
		p = q + strlen(from);
	}
	jitk__jbuf_puts(&b, p);
	return jitk__jbuf_detach(&b);
}

static int t_is_dir(const char *p)
{
	struct stat st;

	return !stat(p, &st) && S_ISDIR(st.st_mode);
}

static void copy_dir(const char *src, const char *dst, const char *from, const char *to)
{
	DIR *d = opendir(src);
	struct dirent *e;

	assert_non_null(d);
	assert_int_equal(jitk__mkdirs(dst, 0755), 0);
	while ((e = readdir(d))) {
		char *s, *t, *text, *out;
		size_t len;

		if (e->d_name[0] == '.')
			continue;
		s = t_path(src, e->d_name);
		t = t_path(dst, e->d_name);
		if (t_is_dir(s)) { /* templates/include/jitk */
			copy_dir(s, t, from, to);
			free(s);
			free(t);
			continue;
		}
		text = t_read(s, &len);
		out = replace_all(text, from, to);
		t_write(t, out, strlen(out));
		free(out);
		free(text);
		free(s);
		free(t);
	}
	closedir(d);
}

void t_edit(const char *path, const char *from, const char *to)
{
	size_t len;
	char *text = t_read(path, &len), *out;

	assert_non_null(strstr(text, from));
	out = replace_all(text, from, to);
	t_write(path, out, strlen(out));
	free(out);
	free(text);
}

void t_copy_tree(const char *dir, const char *from, const char *to)
{
	char *s = t_path(t_root(), "specs"), *t = t_path(t_root(), "templates");
	char *ds = t_path(dir, "specs"), *dt = t_path(dir, "templates");

	copy_dir(s, ds, from, to);
	copy_dir(t, dt, NULL, NULL);
	free(s);
	free(t);
	free(ds);
	free(dt);
}

static int count_suffix;
static const char *count_what;

static int count_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	size_t n = strlen(path), m = strlen(count_what);

	(void)st;
	(void)ftw;
	if (flag == FTW_F && n >= m && !strcmp(path + n - m, count_what))
		count_suffix++;
	return 0;
}

int t_count_files(const char *dir, const char *suffix)
{
	count_suffix = 0;
	count_what = suffix;
	nftw(dir, count_one, 16, FTW_PHYS);
	return count_suffix;
}

void t_log_fn(void *payload, jitk_log_level level, const char *msg)
{
	t_log *l = payload;

	if (!l)
		return;
	if (level > JITK_LOG_WARN)
		return;
	l->warnings++;
	snprintf(l->last, sizeof(l->last), "%s", msg);
}

jitk_compiler *t_compiler(const char *specs, const char *cache,
			  const char *layers, t_log *log)
{
	jitk_compiler_options o = JITK_COMPILER_OPTIONS_INIT;
	jitk_compiler *c = NULL;
	int rc;

	o.specs = specs;
	o.cache_dir = cache ? cache : "";
	o.cache_path = layers ? layers : "";
	o.no_compile = 0;
	o.force_compile = 0;
	o.log = t_log_fn;
	o.log_payload = log;
	o.log_level = JITK_LOG_DEBUG;
	rc = jitk_compiler_new(&c, &o);
	if (rc)
		fprintf(stderr, "compiler: %s\n", jitk_error_last()->message);
	assert_int_equal(rc, 0);
	return c;
}

void t_reset_hooks(void)
{
	jitk__test_write_delay_us = 0;
	jitk__test_fail_step = NULL;
	jitk__test_fail_errno = 0;
	jitk__test_assume_uid = -1;
}

void t_scratch(char **dir, char **cache, char **specs)
{
	*dir = t_tmpdir();
	*cache = t_path(*dir, "cache");
	*specs = t_path(t_root(), "specs");
}

void t_scratch_free(char *dir, char *cache, char *specs)
{
	t_rmtree(dir);
	free(dir);
	free(cache);
	free(specs);
}

int t_setup(void **state)
{
	t_fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	t_scratch(&f->dir, &f->cache, &f->specs);
	*state = f;
	return 0;
}

int t_teardown(void **state)
{
	t_fixture *f = *state;

	t_reset_hooks();
	/* what a failed test may have left set */
	unsetenv("JITK_TEST_ASSUME_UID");
	unsetenv("JITK_CACHE_MAX_BYTES");
	t_scratch_free(f->dir, f->cache, f->specs);
	free(f);
	return 0;
}

int t_build(void *compiler, const char *name, const char *arch, int *origin)
{
	return t_build_flags(compiler, name, arch, 0, origin);
}

int t_build_flags(void *compiler, const char *name, const char *arch, unsigned flags,
		  int *origin)
{
	jitk_compiler *c = compiler;
	jitk_build b;
	jitk_arch a;
	size_t inst;
	int rc;

	assert_int_equal(jitk__arch_parse(&a, arch), 0);
	assert_int_equal(jitk__spec_find(c->specs, name, &inst), 0);
	rc = jitk__build(&b, c, inst, a, flags);
	if (!rc) {
		if (origin)
			*origin = b.origin;
		assert_memory_equal(b.entry.image, "\177ELF", 4);
		assert_int_equal(b.entry.nnames, 1);
		jitk__build_free(&b);
	}
	return rc;
}

void t_key(void *compiler, const char *name, const char *arch, uint8_t *key)
{
	jitk_compiler *c = compiler;
	jitk_tu tu;
	jitk_variant v;
	jitk_arch a;
	size_t inst;

	assert_int_equal(jitk__arch_parse(&a, arch), 0);
	assert_int_equal(jitk__spec_find(c->specs, name, &inst), 0);
	assert_int_equal(jitk__prepare(&tu, key, &v, c, inst, a), 0);
	jitk__tu_free(&tu);
}

char *t_entry_path(const char *dir, const uint8_t *key)
{
	char hex[2 * JITK_HASH_SIZE + 1];
	char *p;

	jitk__hex(hex, key, JITK_HASH_SIZE);
	p = jitk__asprintf("%s/v1/%.2s/%s.jitk", dir, hex, hex);
	assert_non_null(p);
	return p;
}

void t_assert_same_entry(const void *a, size_t la, const void *b, size_t lb)
{
	uint8_t *x = malloc(la ? la : 1), *y = malloc(lb ? lb : 1);

	assert_int_equal(la, lb);
	assert_true(la >= 128);
	assert_non_null(x);
	assert_non_null(y);
	memcpy(x, a, la);
	memcpy(y, b, lb);
	memset(x + 88, 0, 16);
	memset(y + 88, 0, 16);
	memset(x + 108, 0, 4);
	memset(y + 108, 0, 4);
	assert_memory_equal(x, y, la);
	free(x);
	free(y);
}

/* ------------------------------------------------------ per-test timeout */

/* Each test runs under its own alarm: a test that hangs fails by name
 * after JITK_TEST_TIMEOUT seconds (default 300) instead of holding the
 * whole binary until the runner's timeout. The alarm is armed in a setup
 * wrapper that then calls the test's own setup (tests run one at a time,
 * in order, so a counter says which test is starting). */
#define T_MAX_TESTS 256

static const struct CMUnitTest *t_tests;
static CMFixtureFunction t_setups[T_MAX_TESTS], t_teardowns[T_MAX_TESTS];
static size_t t_next;
static volatile const char *t_current = "?";
static unsigned t_seconds;

static void t_alarm(int sig)
{
	char msg[256];
	int n;

	(void)sig;
	n = snprintf(msg, sizeof(msg), "TIMEOUT: test %s ran past %u s\n", (const char *)t_current,
		     t_seconds);
	if (n > 0 && write(2, msg, (size_t)n) < 0)
		_exit(125);
	_exit(124);
}

static int t_watch_setup(void **state)
{
	size_t i = t_next++;

	t_current = t_tests[i].name;
	signal(SIGALRM, t_alarm);
	alarm(t_seconds);
	return t_setups[i] ? t_setups[i](state) : 0;
}

static int t_watch_teardown(void **state)
{
	size_t i = t_next - 1;
	int rc = t_teardowns[i] ? t_teardowns[i](state) : 0;

	alarm(0);
	return rc;
}

int t_run_tests(const char *name, const struct CMUnitTest *tests, size_t n,
		CMFixtureFunction group_setup, CMFixtureFunction group_teardown)
{
	struct CMUnitTest *w = calloc(n ? n : 1, sizeof(*w));
	const char *env = getenv("JITK_TEST_TIMEOUT");
	/* JITK_TEST_ONLY=NAME: run only the tests whose name contains NAME
	 * (while working on one) */
	const char *only = getenv("JITK_TEST_ONLY");
	size_t i, m = 0;
	int rc;

	assert_true(n <= T_MAX_TESTS && w);
	t_seconds = env && atoi(env) > 0 ? (unsigned)atoi(env) : 300;
	t_tests = w;
	t_next = 0;
	for (i = 0; i < n; i++) {
		if (only && *only && !strstr(tests[i].name, only))
			continue;
		w[m] = tests[i];
		t_setups[m] = tests[i].setup_func;
		t_teardowns[m] = tests[i].teardown_func;
		w[m].setup_func = t_watch_setup;
		w[m].teardown_func = t_watch_teardown;
		m++;
	}
	rc = _cmocka_run_group_tests(name, w, m, group_setup, group_teardown);
	free(w);
	return rc;
}

long t_parallel_sum(size_t n, long (*fn)(void *ctx, size_t i), void *ctx)
{
	int fds[2][2];
	pid_t pid[2];
	long total = 0;
	size_t w, i;

	for (w = 0; w < 2; w++) {
		assert_int_equal(pipe(fds[w]), 0);
		fflush(NULL);
		pid[w] = fork();
		assert_true(pid[w] >= 0);
		if (pid[w] == 0) {
			long sum = 0;

			close(fds[w][0]);
			for (i = w; i < n; i += 2) {
				long r = fn(ctx, i);

				if (r < 0)
					_exit(1);
				sum += r;
			}
			fflush(NULL);
			_exit(write(fds[w][1], &sum, sizeof(sum)) == (ssize_t)sizeof(sum) ? 0 : 2);
		}
		close(fds[w][1]);
	}
	for (w = 0; w < 2; w++) {
		long sum = 0;
		int st = 0;
		ssize_t got = read(fds[w][0], &sum, sizeof(sum));

		close(fds[w][0]);
		assert_int_equal(waitpid(pid[w], &st, 0), pid[w]);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		assert_int_equal(got, (ssize_t)sizeof(sum));
		total += sum;
	}
	return total;
}
