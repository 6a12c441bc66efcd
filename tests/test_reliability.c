/* test_reliability.c - the cache under crashes, races, I/O faults and
 * missing or read-only directories. Each scenario asserts counters or
 * exact outcomes; docs/reliability.md tabulates them. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "compile/compile.h"

#define SYM "static_quant_fp8"


static jitk_compiler *compiler(const t_fixture *f, int force, t_log *log)
{
	jitk_compiler_options o = JITK_COMPILER_OPTIONS_INIT;
	jitk_compiler *c = NULL;

	o.specs = f->specs;
	o.cache_dir = f->cache;
	o.cache_path = "";
	o.no_compile = 0;
	o.force_compile = force;
	o.log = t_log_fn;
	o.log_payload = log;
	o.log_level = JITK_LOG_WARN;
	assert_int_equal(jitk_compiler_new(&c, &o), 0);
	return c;
}

static int build(jitk_compiler *c, const char *arch, int *origin)
{
	return t_build(c, SYM, arch, origin);
}

static void verify_clean(const t_fixture *f, jitk_cache_summary *s)
{
	assert_int_equal(jitk__cache_scan(s, f->cache, 1, NULL, NULL), 0);
	assert_int_equal(s->bad, 0);
}

/* The next process after a kill: not blocked, served a good entry (counts
 * a cache hit in *hits), the cache verifies clean; the time it took. */
static double next_process(const t_fixture *f, int *hits)
{
	jitk_cache_summary s = JITK_CACHE_SUMMARY_INIT;
	double t0 = jitk__now_ms();
	int origin = -1;
	jitk_compiler *c = compiler(f, 0, NULL);

	assert_int_equal(build(c, "sm_90", &origin), 0);
	*hits += origin == JITK_ORIGIN_CACHE;
	assert_int_equal(atomic_load(&jitk__cache_counters(c->cache)->rejects), 0);
	jitk_compiler_free(c);
	verify_clean(f, &s);
	return jitk__now_ms() - t0;
}

static int temp_files(const t_fixture *f)
{
	char *tmp = t_path(f->cache, "v1/tmp");
	int n = t_count_files(tmp, "");

	free(tmp);
	return n;
}

static pid_t start_writer(const t_fixture *f)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		jitk_compiler *c = compiler(f, 1, NULL);

		build(c, "sm_90", NULL);
		_exit(0);
	}
	return pid;
}

/* A writer killed at any moment (while compiling, writing, renaming) never
 * leaves an entry that is served corrupt, and never a lock that blocks the
 * next process. Two kinds of trial:
 *  - killed surely inside the write: the hook holds the writer between the
 *    two halves of its entry for a minute; the parent waits (bounded) until
 *    its temporary file exists, then kills it. Each such trial must leave
 *    an orphaned temporary file and nothing else wrong.
 *  - killed at a pseudo-random moment from fork to a little past the write
 *    (a fixed seed, JITK_CRASH_SEED to change it; JITK_CRASH_TRIALS the
 *    count): whatever phase it lands in, the same outcome. Nothing is
 *    asserted about which phase was hit, only that each was harmless. */
static void test_sigkill_trials(void **state)
{
	t_fixture *f = *state;
	const char *env = getenv("JITK_CRASH_TRIALS"), *seed_env = getenv("JITK_CRASH_SEED");
	int trials = env ? atoi(env) : 100, i, orphaned = 0, hits = 0, sure = 4;
	double t_compile, worst = 0, t;
	unsigned seed = seed_env ? (unsigned)strtoul(seed_env, NULL, 10) : 12345u;

	/* How long does a whole child (start, compile, write) take here? The
	 * kill window is calibrated on that, so that kills land in every
	 * phase on fast and on sanitizer-slowed builds alike. */
	jitk__test_write_delay_us = 20000;
	t_compile = 0;
	for (i = 0; i < 3; i++) {
		double t0 = jitk__now_ms();
		pid_t pid = start_writer(f);
		int st;

		assert_int_equal(waitpid(pid, &st, 0), pid);
		if (jitk__now_ms() - t0 > t_compile)
			t_compile = jitk__now_ms() - t0;
	}
	for (i = 0; i < sure; i++) {
		pid_t pid;
		int st, waited;

		if (i % 2) { /* every other trial starts cold: no entry to fall back on */
			jitk_clear_result removed = JITK_CLEAR_RESULT_INIT;

			assert_int_equal(jitk__cache_clear(&removed, f->cache), 0);
		}
		assert_int_equal(temp_files(f), 0);
		jitk__test_write_delay_us = 60u * 1000u * 1000u;
		pid = start_writer(f);
		for (waited = 0; temp_files(f) == 0 && waited < 120000; waited += 2)
			usleep(2000);
		assert_int_equal(temp_files(f), 1); /* half an entry, held by the hook */
		kill(pid, SIGKILL);
		assert_int_equal(waitpid(pid, &st, 0), pid);
		assert_true(WIFSIGNALED(st));
		orphaned++;
		jitk__test_write_delay_us = 20000;
		t = next_process(f, &hits);
		worst = t > worst ? t : worst;
		/* the orphan is a young temporary file: left for the sweep */
		assert_int_equal(temp_files(f), 1);
		{
			char *tmp = t_path(f->cache, "v1/tmp");

			t_rmtree(tmp);
			assert_int_equal(mkdir(tmp, 0700), 0);
			free(tmp);
		}
	}
	srand(seed);
	for (i = 0; i < trials; i++) {
		pid_t pid;
		int st;

		if (i % 2) {
			jitk_clear_result removed = JITK_CLEAR_RESULT_INIT;

			assert_int_equal(jitk__cache_clear(&removed, f->cache), 0);
		}
		pid = start_writer(f);
		/* anywhere from fork to a little past the write */
		usleep((useconds_t)((double)rand() / RAND_MAX * t_compile * 1.1 * 1000.0));
		kill(pid, SIGKILL);
		assert_int_equal(waitpid(pid, &st, 0), pid);
		orphaned += temp_files(f) > 0;
		t = next_process(f, &hits);
		worst = t > worst ? t : worst;
	}
	assert_true(worst < 60000.0); /* a stale lock would wait 120 s */
	printf("  %d SIGKILL trials inside the write and %d at pseudo-random moments (seed %u, "
	       "window %.0f ms): 0 bad entries, %d left an orphaned temp file, next process: %d "
	       "cache hits, %d compiles, slowest %.0f ms\n",
	       sure, trials, seed, t_compile * 1.1, orphaned, hits, sure + trials - hits, worst);
	assert_true(orphaned >= sure);
}

/* Orphans older than the threshold are swept when a cache opens; young
 * temporary files (perhaps a live writer's) are left. */
static void test_orphan_sweep(void **state)
{
	t_fixture *f = *state;
	jitk_compiler *c = compiler(f, 0, NULL);
	char *old = t_path(f->cache, "v1/tmp/" T_HEX64 ".123.0");
	char *young = t_path(f->cache, "v1/tmp/" T_HEX64 ".123.1");
	struct timespec ts[2] = { { 1000000000, 0 }, { 1000000000, 0 } };

	jitk_compiler_free(c);
	t_writef(old, "partial");
	t_writef(young, "partial");
	assert_int_equal(utimensat(AT_FDCWD, old, ts, 0), 0);
	c = compiler(f, 0, NULL);
	assert_int_equal(access(old, F_OK), -1);
	assert_int_equal(access(young, F_OK), 0);
	jitk_compiler_free(c);
	free(old);
	free(young);
}

static void run_writers(const t_fixture *f, int n, double seconds, pid_t *pids)
{
	int i;

	for (i = 0; i < n; i++) {
		pids[i] = fork();
		assert_true(pids[i] >= 0);
		if (pids[i] == 0) {
			jitk_compiler *c = compiler(f, 1, NULL);
			double t0 = jitk__now_ms();
			int bad = 0;

			while (jitk__now_ms() - t0 < seconds * 1000.0)
				bad |= build(c, i % 2 ? "sm_100" : "sm_90", NULL) != 0;
			jitk_compiler_free(c);
			_exit(bad);
		}
	}
}

static void wait_ok(pid_t *pids, int n)
{
	int i, st;

	for (i = 0; i < n; i++) {
		assert_int_equal(waitpid(pids[i], &st, 0), pids[i]);
		assert_true(WIFEXITED(st));
		assert_int_equal(WEXITSTATUS(st), 0);
	}
}

/* A reader asks 200 times while writers keep replacing the same entry
 * (and others): never a torn or rejected entry. Then a process clears and
 * prunes while writers are active: the writers still succeed, and nothing
 * half-written is ever served. */
static void test_readers_writers_clear(void **state)
{
	t_fixture *f = *state;
	pid_t w[3], cl;
	jitk_compiler *c;
	int i, origin, hits = 0;
	jitk_cache_summary s = JITK_CACHE_SUMMARY_INIT;

	c = compiler(f, 0, NULL);
	assert_int_equal(build(c, "sm_90", &origin), 0);
	run_writers(f, 2, 3.0, w);
	for (i = 0; i < 200; i++) {
		assert_int_equal(build(c, "sm_90", &origin), 0);
		hits += origin == JITK_ORIGIN_CACHE;
	}
	assert_int_equal(atomic_load(&jitk__cache_counters(c->cache)->rejects), 0);
	wait_ok(w, 2);
	printf("  200 reads during 2 writers: %d hits, 0 rejected\n", hits);

	run_writers(f, 3, 2.0, w);
	cl = fork();
	assert_true(cl >= 0);
	if (cl == 0) {
		double t0 = jitk__now_ms();
		jitk_clear_result removed = JITK_CLEAR_RESULT_INIT;
		jitk_prune_result pr = JITK_PRUNE_RESULT_INIT;

		while (jitk__now_ms() - t0 < 2000.0) {
			jitk__cache_clear(&removed, f->cache);
			jitk__cache_prune(&pr, f->cache, 1, 0, JITK_PRUNE_VERIFY); /* evict everything, sweep all temps */
		}
		_exit(0);
	}
	for (i = 0; i < 100; i++)
		assert_int_equal(build(c, "sm_90", &origin), 0);
	assert_int_equal(atomic_load(&jitk__cache_counters(c->cache)->rejects), 0);
	wait_ok(w, 3);
	wait_ok(&cl, 1);
	verify_clean(f, &s);
	jitk_compiler_free(c);
}

/* A full disk or an I/O error at any step of publishing: the kernel is
 * still returned (from memory), one warning names the step, the failure is
 * counted, and no partial entry or temporary file is left. */
static void test_io_faults(void **state)
{
	static const struct {
		const char *step;
		int err;
	} faults[] = {
		{ "create", ENOSPC }, { "write", ENOSPC }, { "write", EIO },
		{ "fsync", EIO }, { "rename", EIO },
	};
	t_fixture *f = *state;
	size_t i;

	for (i = 0; i < JITK_ARRAY_SIZE(faults); i++) {
		t_log log = { 0, "" };
		jitk_compiler *c = compiler(f, 0, &log);
		char *tmp = t_path(f->cache, "v1/tmp");
		int origin = -1;

		jitk__test_fail_step = faults[i].step;
		jitk__test_fail_errno = faults[i].err;
		assert_int_equal(build(c, "sm_90", &origin), 0);
		jitk__test_fail_step = NULL;
		assert_int_equal(origin, JITK_ORIGIN_MEMORY); /* compiled, kept in memory */
		assert_int_equal(atomic_load(&jitk__cache_counters(c->cache)->write_failures), 1);
		assert_int_equal(log.warnings, 1);
		assert_non_null(strstr(log.last, faults[i].step));
		assert_non_null(strstr(log.last, strerror(faults[i].err)));
		assert_int_equal(t_count_files(f->cache, ".jitk"), 0);
		assert_int_equal(t_count_files(tmp, ""), 0);
		/* and the next attempt, with the disk back, publishes */
		assert_int_equal(build(c, "sm_90", &origin), 0);
		assert_int_equal(origin, JITK_ORIGIN_COMPILED);
		assert_int_equal(t_count_files(f->cache, ".jitk"), 1);
		t_rmtree(f->cache);
		jitk_compiler_free(c);
		free(tmp);
	}
}

/* No HOME, no XDG_CACHE_HOME, no JITK_CACHE_DIR: compile in memory, one
 * warning. */
static void test_missing_home(void **state)
{
	t_fixture *f = *state;
	jitk_compiler_options o = JITK_COMPILER_OPTIONS_INIT;
	char *home = getenv("HOME") ? jitk__strdup(getenv("HOME")) : NULL;
	char *xdg = getenv("XDG_CACHE_HOME") ? jitk__strdup(getenv("XDG_CACHE_HOME")) : NULL;
	t_log log = { 0, "" };
	jitk_compiler *c;
	int origin;

	unsetenv("HOME");
	unsetenv("XDG_CACHE_HOME");
	unsetenv("JITK_CACHE_DIR");
	o.specs = f->specs;
	o.log = t_log_fn;
	o.log_payload = &log;
	assert_int_equal(jitk_compiler_new(&c, &o), 0);
	assert_int_equal(log.warnings, 1);
	assert_non_null(strstr(log.last, "compiling in memory"));
	assert_null(jitk__cache_root(c->cache));
	assert_int_equal(build(c, "sm_90", &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_COMPILED);
	assert_int_equal(log.warnings, 1);
	jitk_compiler_free(c);
	if (home)
		setenv("HOME", home, 1);
	if (xdg)
		setenv("XDG_CACHE_HOME", xdg, 1);
	free(home);
	free(xdg);
}

/* A cache directory this user cannot write: in memory, one warning.
 * (root can write anyway: skipped there, saying so.) */
static void test_read_only_dir(void **state)
{
	t_fixture *f = *state;
	t_log log = { 0, "" };
	jitk_compiler *c;
	int origin;

	assert_int_equal(mkdir(f->cache, 0500), 0);
	if (access(f->cache, W_OK) == 0) {
		printf("SKIP: this user (uid %u) can write a 0500 directory\n", (unsigned)geteuid());
		chmod(f->cache, 0700);
		skip();
	}
	c = compiler(f, 0, &log);
	assert_null(jitk__cache_root(c->cache));
	assert_int_equal(log.warnings, 1);
	assert_int_equal(build(c, "sm_90", &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_COMPILED);
	jitk_compiler_free(c);
	chmod(f->cache, 0700);
}

/* The explicit read-only option: the cache serves hits, misses compile in
 * memory, and nothing is ever written (checked by file counts). */
static void test_read_only_option(void **state)
{
	t_fixture *f = *state;
	jitk_compiler_options o = JITK_COMPILER_OPTIONS_INIT;
	jitk_compiler *c = compiler(f, 0, NULL), *ro;
	int origin = -1;

	assert_int_equal(build(c, "sm_90", &origin), 0);
	jitk_compiler_free(c);
	o.specs = f->specs;
	o.cache_dir = f->cache;
	o.cache_path = "";
	o.cache_read_only = 1;
	assert_int_equal(jitk_compiler_new(&ro, &o), 0);
	assert_null(jitk__cache_root(ro->cache));
	assert_int_equal(build(ro, "sm_90", &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_LAYER);
	assert_int_equal(build(ro, "sm_100", &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_COMPILED);
	assert_int_equal(t_count_files(f->cache, ".jitk"), 1);
	assert_int_equal(t_count_files(f->cache, ".lock"), 1);
	jitk_compiler_free(ro);
	/* the same through the environment */
	setenv("JITK_CACHE_READONLY", "1", 1);
	o.cache_read_only = -1;
	assert_int_equal(jitk_compiler_new(&ro, &o), 0);
	assert_int_equal(build(ro, "sm_100", &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_COMPILED);
	assert_int_equal(t_count_files(f->cache, ".jitk"), 1);
	jitk_compiler_free(ro);
	unsetenv("JITK_CACHE_READONLY");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_io_faults, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_missing_home, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_read_only_dir, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_read_only_option, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_orphan_sweep, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_readers_writers_clear, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_sigkill_trials, t_setup, t_teardown),
	};

	return T_RUN_TESTS(tests, NULL, NULL);
}
