/* common.h - helpers shared by the cmocka tests. */
#ifndef JITK_TEST_COMMON_H
#define JITK_TEST_COMMON_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "jitk.h"

/* A key-shaped name (64 hex digits), for cache files planted by hand. */
#define T_HEX64 "ab0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd"

/* Run a cmocka group with a timeout for each test (JITK_TEST_TIMEOUT
 * seconds, default 300): a hanging test fails by name. Use through
 * T_RUN_TESTS(tests, group_setup, group_teardown). */
int t_run_tests(const char *name, const struct CMUnitTest *tests, size_t n,
		CMFixtureFunction group_setup, CMFixtureFunction group_teardown);
#define T_RUN_TESTS(tests, gs, gt) \
	t_run_tests(#tests, tests, sizeof(tests) / sizeof((tests)[0]), gs, gt)

/* The repository root (tests run from it; $JITK_TEST_ROOT overrides). */
const char *t_root(void);
/* A fresh private directory under $TMPDIR; removed by t_rmtree. */
char *t_tmpdir(void);
void t_rmtree(const char *path);
/* Write (or append) a file; abort the test on failure. */
void t_write(const char *path, const void *data, size_t n);
void t_writef(const char *path, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
char *t_read(const char *path, size_t *len);
char *t_path(const char *dir, const char *name);
/* A tensor argument named name (jitk_call's). */
jitk_arg t_tensor_arg(const char *name, const jitk_tensor *t);
/* Copy the repository's specs/ and templates/ into dir/specs and
 * dir/templates, replacing every occurrence of from by to in the specs
 * (from may be NULL). */
void t_copy_tree(const char *dir, const char *from, const char *to);
/* Replace every FROM in the file at PATH by TO; FROM must occur. */
void t_edit(const char *path, const char *from, const char *to);
/* Count files under dir whose name ends with suffix. */
int t_count_files(const char *dir, const char *suffix);
/* fn(ctx, i) for every i in [0, n), shared by two processes (the CI
 * machine has two cores; NVRTC compiles one program at a time per
 * process): each call returns a count (>= 0), or -1 having said why it
 * failed. Returns the sum of the counts; fails the test when a call
 * failed or a process did not finish. */
long t_parallel_sum(size_t n, long (*fn)(void *ctx, size_t i), void *ctx);

/* Compiler over the given spec dirs and cache (NULL: in memory), logs
 * silenced and counted. */
typedef struct {
	int warnings;   /* warnings and errors logged */
	char last[512]; /* the last of them */
} t_log;
void t_log_fn(void *payload, jitk_log_level level, const char *msg);
jitk_compiler *t_compiler(const char *specs, const char *cache,
			  const char *layers, t_log *log);

/* A private directory with a cache path inside it and the repo's specs
 * (t_scratch; t_scratch_free removes the directory and frees the three);
 * t_setup/t_teardown fit cmocka's setup and teardown slots with them. */
void t_scratch(char **dir, char **cache, char **specs);
void t_scratch_free(char *dir, char *cache, char *specs);
typedef struct {
	char *dir, *cache, *specs;
} t_fixture;
int t_setup(void **state);
/* The test hooks of the cache (cache.h) back to off; t_teardown does it. */
void t_reset_hooks(void);
int t_teardown(void **state);

/* Build NAME for ARCH with compiler c (a jitk_compiler *): the status, and
 * the origin when it succeeds; a successful image must be a cubin. */
int t_build(void *c, const char *name, const char *arch, int *origin);
/* The same with jitk__build's flags (JITK_BUILD_SEAL_ERROR...). */
int t_build_flags(void *c, const char *name, const char *arch, unsigned flags, int *origin);
/* The cache key (JITK_HASH_SIZE bytes) of NAME on ARCH as compiler c
 * computes it, and the path of its entry in the cache at dir (malloc'd). */
void t_key(void *c, const char *name, const char *arch, uint8_t *key);
char *t_entry_path(const char *dir, const uint8_t *key);
/* Two entry files' bytes hold the same entry: equal but for the origin
 * field (where each cache got it from: bytes 108..111) and the checksum
 * that covers it (bytes 88..103). */
void t_assert_same_entry(const void *a, size_t la, const void *b, size_t lb);

#endif
