/* test_cache.c - the disk cache: hits, verification, layers, switches,
 * unusable and untrusted directories, hostile entries, LRU, races. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "compile/compile.h"
#include "store/remote.h"

#define SYM "static_quant_fp8"


/* The path of SYM's sm_90 entry in cache. */
static char *entry_of(jitk_compiler *c, const char *cache)
{
	uint8_t key[JITK_HASH_SIZE];

	t_key(c, SYM, "sm_90", key);
	return t_entry_path(cache, key);
}

static void test_hit_after_miss(void **state)
{
	t_fixture *f = *state;
	t_log log = { 0, "" };
	jitk_compiler *c = t_compiler(f->specs, f->cache, NULL, &log), *c2;
	int origin = -1;
	char *entry;
	struct stat st;

	assert_int_equal(t_build(c, SYM, "sm_90", &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_COMPILED);
	assert_int_equal(t_build(c, SYM, "sm_90", &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_CACHE);
	assert_int_equal(atomic_load(&c->compiles), 1);
	/* A fresh compiler (as in a new process) hits too. */
	c2 = t_compiler(f->specs, f->cache, NULL, &log);
	assert_int_equal(t_build(c2, SYM, "sm_90", &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_CACHE);
	assert_int_equal(atomic_load(&c2->compiles), 0);
	/* Entries are not writable by others; no temporary file is left. */
	entry = entry_of(c, f->cache);
	assert_int_equal(stat(entry, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0644);
	assert_int_equal(t_count_files(f->cache, ".jitk"), 1);
	{
		char *tmp = t_path(f->cache, "v1/tmp");
		assert_int_equal(t_count_files(tmp, ""), 0);
		free(tmp);
	}
	assert_int_equal(log.warnings, 0);
	free(entry);
	jitk_compiler_free(c);
	jitk_compiler_free(c2);
}

/* Damage the entry with damage(), expect a rejected entry, a recompile,
 * and a good entry after. */
static void damaged(t_fixture *f, void (*damage)(const char *path, void *arg), void *arg,
		    const char *problem)
{
	t_log log = { 0, "" };
	jitk_compiler *c = t_compiler(f->specs, f->cache, NULL, &log);
	const jitk_cache_counters *n = jitk__cache_counters(c->cache);
	int origin = -1;
	char *entry = entry_of(c, f->cache);
	jitk_cache_entry e;
	const char *why;

	assert_int_equal(t_build(c, SYM, "sm_90", &origin), 0);
	damage(entry, arg);
	assert_int_equal(t_build(c, SYM, "sm_90", &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_COMPILED);
	assert_int_equal(atomic_load(&n->rejects), 1);
	assert_int_equal(log.warnings, 1);
	if (!strstr(log.last, problem))
		fprintf(stderr, "log: %s\n", log.last);
	assert_non_null(strstr(log.last, problem));
	/* The recompiled entry replaced the bad one. */
	assert_int_equal(jitk__entry_read(&e, entry, 0, &why), 0);
	jitk__cache_entry_free(&e);
	assert_int_equal(t_build(c, SYM, "sm_90", &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_CACHE);
	free(entry);
	jitk_compiler_free(c);
	t_rmtree(f->cache);
}

static void flip_byte(const char *path, void *arg)
{
	size_t len, at;
	char *data = t_read(path, &len);

	at = arg ? (size_t)(uintptr_t)arg - 1 : len / 2; /* arg: offset + 1 */
	data[at] ^= 0x5a;
	t_write(path, data, len);
	free(data);
}

static void truncate_to(const char *path, void *arg)
{
	size_t len;
	char *data = t_read(path, &len);
	size_t keep = (size_t)(uintptr_t)arg;

	if (keep == (size_t)-1)
		keep = len / 2;
	t_write(path, data, keep);
	free(data);
}

static void replace_with(const char *path, void *arg)
{
	size_t len;
	char *data = t_read((const char *)arg, &len);

	unlink(path);
	t_write(path, data, len);
	free(data);
}

static void test_corruption(void **state)
{
	t_fixture *f = *state;

	damaged(f, flip_byte, NULL, "checksum mismatch");
	damaged(f, flip_byte, (void *)(uintptr_t)(100 + 1), "checksum mismatch"); /* in the checksum */
	damaged(f, flip_byte, (void *)(uintptr_t)(0 + 1), "bad magic");
	damaged(f, flip_byte, (void *)(uintptr_t)(8 + 1), "unsupported format version");
	damaged(f, flip_byte, (void *)(uintptr_t)(87 + 1), "sizes out of range"); /* image size, top byte */
	damaged(f, flip_byte, (void *)(uintptr_t)(120 + 1), "bad header fields"); /* reserved */
	damaged(f, truncate_to, (void *)(uintptr_t)0, "empty file");
	damaged(f, truncate_to, (void *)(uintptr_t)64, "truncated header");
	damaged(f, truncate_to, (void *)(uintptr_t)128, "truncated");
	damaged(f, truncate_to, (void *)(uintptr_t)-1, "truncated");
}

/* A valid entry of another key (another architecture) under this key's
 * name is refused, never loaded as this kernel. */
static void test_wrong_entry_under_right_name(void **state)
{
	t_fixture *f = *state;
	jitk_compiler *c = t_compiler(f->specs, f->cache, NULL, NULL);
	int origin;
	char *other = t_path(f->dir, "other.jitk");
	char *entry = entry_of(c, f->cache), *e100;
	uint8_t key[JITK_HASH_SIZE];
	size_t len;
	char *data;

	assert_int_equal(t_build(c, SYM, "sm_100", &origin), 0);
	t_key(c, SYM, "sm_100", key);
	e100 = t_entry_path(f->cache, key);
	data = t_read(e100, &len);
	t_write(other, data, len);
	free(data);
	jitk_compiler_free(c);
	/* The sm_100 entry placed where the sm_90 one belongs. */
	{
		char *shard = jitk__strndup(entry, strrchr(entry, '/') - entry);
		jitk__mkdirs(shard, 0755);
		free(shard);
	}
	replace_with(entry, other);
	{
		t_log log = { 0, "" };
		jitk_compiler *c2 = t_compiler(f->specs, f->cache, NULL, &log);

		assert_int_equal(t_build(c2, SYM, "sm_90", &origin), 0);
		assert_int_equal(origin, JITK_ORIGIN_COMPILED);
		assert_non_null(strstr(log.last, "key mismatch"));
		jitk_compiler_free(c2);
	}
	free(e100);
	free(entry);
	free(other);
}

/* The bytes of a small entry (one name "x", an 8-byte image, sm_90). */
static void tiny_entry(uint8_t **bytes, size_t *len)
{
	jitk_cache_entry e;
	char name[] = "x";
	char *names[1] = { name };
	unsigned char img[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };

	memset(&e, 0, sizeof(e));
	strcpy(e.target, "sm_90");
	e.names = names;
	e.nnames = 1;
	e.image = img;
	e.size = sizeof(img);
	assert_int_equal(jitk__entry_encode(bytes, len, &e), 0);
}

/* Sizes in a header are checked before anything is allocated. */
static void test_huge_header(void **state)
{
	jitk_cache_entry out;
	uint8_t *bytes;
	size_t len;
	const char *problem;
	int i;

	(void)state;
	tiny_entry(&bytes, &len);
	assert_int_equal(jitk__entry_decode(&out, bytes, len, &problem), 0);
	assert_int_equal(out.size, 8);
	assert_string_equal(out.names[0], "x");
	jitk__cache_entry_free(&out);
	/* image size 2^63 */
	for (i = 0; i < 8; i++)
		bytes[80 + i] = i == 7 ? 0x80 : 0;
	assert_int_equal(jitk__entry_decode(&out, bytes, len, &problem), -1);
	assert_string_equal(problem, "sizes out of range");
	free(bytes);
}

/* The reserved field was neither checked nor covered by the checksum
 * (format 1 hashed bytes 0..87 only): now every header byte counts. */
static void test_header_fully_covered(void **state)
{
	jitk_cache_entry out;
	uint8_t *bytes, *copy;
	size_t len, i;
	const char *problem;
	jitk_hasher *h;

	(void)state;
	tiny_entry(&bytes, &len);
	assert_int_equal(bytes[8], JITK_CACHE_FORMAT);
	assert_int_equal(JITK_CACHE_FORMAT, 4);
	copy = malloc(len);
	assert_non_null(copy);
	/* Flipping any single header byte is refused. */
	for (i = 0; i < JITK_ENTRY_HEADER; i++) {
		memcpy(copy, bytes, len);
		copy[i] ^= 0x01;
		if (!jitk__entry_decode(&out, copy, len, &problem)) {
			fprintf(stderr, "header byte %zu flipped: accepted\n", i);
			jitk__cache_entry_free(&out);
			fail();
		}
	}
	/* Reserved set and the checksum made as format 1 made it: refused. */
	memcpy(copy, bytes, len);
	copy[120] = 1;
	h = jitk__hasher_new();
	assert_non_null(h);
	jitk__hasher_update(h, copy, 88);
	jitk__hasher_update(h, copy + JITK_ENTRY_HEADER, len - JITK_ENTRY_HEADER);
	assert_int_equal(jitk__hasher_final(h, copy + 88), 0);
	assert_int_equal(jitk__entry_decode(&out, copy, len, &problem), -1);
	assert_string_equal(problem, "bad header fields");
	free(copy);
	free(bytes);
}

/* JITK_CACHE_MAX_BYTES=10G meant 10 bytes, 1k meant 1 (every entry was
 * evicted as soon as it was written), abc and -1 silently meant no bound. */
static void test_max_bytes_sizes(void **state)
{
	static const struct {
		const char *in;
		uint64_t want;
	} good[] = {
		{ "1", 1 }, { "512", 512 }, { "1k", 1024 }, { "1K", 1024 }, { "64M", 64ull << 20 },
		{ "10G", 10ull << 30 }, { "10g", 10ull << 30 }, { "10GiB", 10ull << 30 },
		{ "10GB", 10ull << 30 }, { "2T", 2ull << 40 }, { "100B", 100 }, { "0", 0 },
		{ "18446744073709551615", UINT64_MAX }, { "16777215T", 16777215ull << 40 },
	};
	static const char *const bad[] = {
		"", "abc", "-1", "+1", " 1", "1 ", "0x10", "1.5G", "10Q", "1Gi", "1iB", "1b",
		"G", "1KK", "18446744073709551616", "16777216T", "1e9",
	};
	static const struct {
		const char *env;
		uint64_t want;
		int warns;
	} env[] = {
		{ "10G", 10ull << 30, 0 }, { "1k", 1024, 0 }, { "512M", 512ull << 20, 0 },
		{ "abc", 0, 1 }, { "-1", 0, 1 }, { "0", 0, 1 }, { "10 G", 0, 1 },
	};
	t_fixture *f = *state;
	uint64_t v;
	size_t i;

	for (i = 0; i < JITK_ARRAY_SIZE(good); i++) {
		v = 7;
		if (jitk__parse_size(&v, good[i].in) || v != good[i].want)
			fprintf(stderr, "'%s': %llu\n", good[i].in, (unsigned long long)v);
		assert_int_equal(jitk__parse_size(&v, good[i].in), 0);
		assert_true(v == good[i].want);
	}
	for (i = 0; i < JITK_ARRAY_SIZE(bad); i++) {
		v = 7;
		if (!jitk__parse_size(&v, bad[i]))
			fprintf(stderr, "'%s' accepted\n", bad[i]);
		assert_int_equal(jitk__parse_size(&v, bad[i]), -1);
		assert_true(v == 0);
	}
	for (i = 0; i < JITK_ARRAY_SIZE(env); i++) {
		t_log log = { 0, "" };
		jitk_compiler *c;
		char want[128];

		setenv("JITK_CACHE_MAX_BYTES", env[i].env, 1);
		c = t_compiler(f->specs, f->cache, NULL, &log);
		assert_true(jitk__cache_max_bytes(c->cache) == env[i].want);
		assert_int_equal(log.warnings, env[i].warns);
		snprintf(want, sizeof(want), "JITK_CACHE_MAX_BYTES='%s' is not a size", env[i].env);
		if (env[i].warns)
			assert_non_null(strstr(log.last, want));
		jitk_compiler_free(c);
	}
	/* What a user saw: with 1M the entry stayed (it was evicted at once). */
	setenv("JITK_CACHE_MAX_BYTES", "1M", 1);
	{
		jitk_compiler *c = t_compiler(f->specs, f->cache, NULL, NULL);
		int origin;

		assert_int_equal(t_build(c, SYM, "sm_90", &origin), 0);
		assert_int_equal(t_count_files(f->cache, ".jitk"), 1);
		jitk_compiler_free(c);
	}
	/* A bound smaller than one entry empties the cache after every
	 * write: one warning says so (it used to be silent). */
	setenv("JITK_CACHE_MAX_BYTES", "1k", 1);
	{
		t_log log = { 0, "" };
		jitk_compiler *c;
		int origin;

		t_rmtree(f->cache);
		c = t_compiler(f->specs, f->cache, NULL, &log);
		assert_int_equal(t_build(c, SYM, "sm_90", &origin), 0);
		assert_int_equal(t_build(c, SYM, "sm_100", &origin), 0);
		assert_int_equal(t_count_files(f->cache, ".jitk"), 0);
		assert_int_equal(log.warnings, 1);
		assert_non_null(strstr(log.last, "JITK_CACHE_MAX_BYTES=1024 bytes is smaller than one "
						 "cache entry"));
		jitk_compiler_free(c);
	}
	unsetenv("JITK_CACHE_MAX_BYTES");
}

/* A NULL where a handle belongs is named: a binding whose object was
 * closed (a Python Compiler after close()) passes NULL, and "NULL
 * argument" did not say which. */
static void test_null_arguments_are_named(void **state)
{
	t_fixture *f = *state;
	jitk_compiler *c = t_compiler(f->specs, NULL, NULL, NULL);
	jitk_cache_summary sum = JITK_CACHE_SUMMARY_INIT;
	jitk_origin origin;
	char *text = NULL;
	size_t *sel = NULL, n;
	int major;

	assert_int_equal(jitk_precompile(&origin, NULL, SYM, "sm_90"), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message, "jitk_precompile: compiler is NULL");
	assert_int_equal(jitk_precompile(&origin, c, SYM, NULL), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message, "jitk_precompile: arch is NULL");
	assert_int_equal(jitk_explain(&text, NULL, SYM, "sm_90"), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message, "jitk_explain: compiler is NULL");
	assert_int_equal(jitk_source(&text, NULL, c, NULL, "sm_90"), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message, "jitk_source: name is NULL");
	assert_int_equal(jitk_select(&sel, &n, c, NULL), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message, "jitk_select: selector is NULL");
	assert_int_equal(jitk_list(&text, NULL, NULL), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message, "jitk_list: compiler is NULL");
	assert_int_equal(jitk_describe(NULL, c, NULL), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message, "jitk_describe: out is NULL");
	assert_int_equal(jitk_cache_stats(&sum, NULL, 0, NULL, NULL), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message, "jitk_cache_stats: dir is NULL");
	assert_int_equal(jitk_nvrtc_version(&major, NULL), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message, "jitk_nvrtc_version: minor is NULL");
	assert_null(text);
	assert_null(sel);
	jitk_compiler_free(c);
}

/* JITK_TEST_ASSUME_UID used to be read from the environment by the trust
 * check of every lookup: a variable must never relax (or change) a
 * security check. The pretended uid is now a test-build global only. */
static void test_no_environment_hook(void **state)
{
	t_fixture *f = *state;
	t_log log = { 0, "" };
	jitk_compiler *c;

	setenv("JITK_TEST_ASSUME_UID", "4242", 1);
	c = t_compiler(f->specs, f->cache, NULL, &log);
	assert_non_null(jitk__cache_root(c->cache));
	assert_int_equal(log.warnings, 0);
	assert_int_equal(jitk__trusted_uid(), (unsigned)geteuid());
	jitk_compiler_free(c);
	unsetenv("JITK_TEST_ASSUME_UID");
}

/* A JITK_CACHE_PATH layer that is a file warned on every lookup (19 times
 * for `jitk list`-sized runs); one that does not exist said nothing. Now:
 * one warning each, when the cache opens. */
static void test_bad_layers_warn_once(void **state)
{
	t_fixture *f = *state;
	char *file = t_path(f->dir, "a-file"), *missing = t_path(f->dir, "missing");
	char *nov1 = t_path(f->dir, "empty");
	char *both = jitk__asprintf("%s:%s", missing, nov1);
	static const char *const archs[] = { "sm_90", "sm_100", "sm_89" };
	t_log log = { 0, "" };
	jitk_compiler *c;
	size_t i;
	int origin;

	t_writef(file, "not a cache\n");
	assert_int_equal(mkdir(nov1, 0755), 0);
	c = t_compiler(f->specs, f->cache, file, &log);
	assert_int_equal(log.warnings, 1);
	assert_non_null(strstr(log.last, file));
	assert_non_null(strstr(log.last, "ignored: not a directory"));
	for (i = 0; i < JITK_ARRAY_SIZE(archs); i++)
		assert_int_equal(t_build(c, SYM, archs[i], &origin), 0);
	assert_int_equal(log.warnings, 1);
	jitk_compiler_free(c);
	log.warnings = 0;
	c = t_compiler(f->specs, f->cache, both, &log);
	assert_int_equal(log.warnings, 2);
	assert_non_null(strstr(log.last, "holds no cache (no v1 directory)"));
	for (i = 0; i < JITK_ARRAY_SIZE(archs); i++)
		assert_int_equal(t_build(c, SYM, archs[i], &origin), 0);
	assert_int_equal(log.warnings, 2);
	jitk_compiler_free(c);
	log.warnings = 0;
	c = t_compiler(f->specs, f->cache, missing, &log);
	assert_int_equal(log.warnings, 1);
	assert_non_null(strstr(log.last, missing));
	assert_non_null(strstr(log.last, "No such file or directory"));
	jitk_compiler_free(c);
	free(file);
	free(missing);
	free(nov1);
	free(both);
}

typedef struct {
	pid_t holder;
	int waits;
	char msg[512];
} wait_log;

static void wait_log_fn(void *payload, jitk_log_level level, const char *msg)
{
	wait_log *w = payload;

	(void)level;
	if (strstr(msg, "waiting for the lock")) {
		w->waits++;
		snprintf(w->msg, sizeof(w->msg), "%s", msg);
		kill(w->holder, SIGKILL); /* its flock dies with it */
	}
}

/* A lock held by a live process was waited on for 120 s in silence: after
 * a second, one warning names the key and the holder's pid. */
static void test_lock_wait_names_holder(void **state)
{
	t_fixture *f = *state;
	wait_log w;
	jitk_logger lg = { wait_log_fn, &w, JITK_LOG_DEBUG };
	jitk_cache *c;
	uint8_t key[JITK_HASH_SIZE];
	char hex[2 * JITK_HASH_SIZE + 1], want[256], b = 1;
	int p[2], fd = -1, st;
	double t0, waited;

	memset(&w, 0, sizeof(w));
	memset(key, 0xab, sizeof(key));
	jitk__hex(hex, key, JITK_HASH_SIZE);
	assert_int_equal(jitk__cache_open(&c, f->cache, &lg), 0);
	assert_int_equal(pipe(p), 0);
	w.holder = fork();
	assert_true(w.holder >= 0);
	if (w.holder == 0) {
		int lfd;

		jitk__cache_lock(c, key, &lfd);
		if (lfd < 0 || write(p[1], &b, 1) != 1)
			_exit(1);
		sleep(20); /* killed long before, when the waiter says whom it waits for */
		_exit(0);
	}
	close(p[1]);
	assert_int_equal(read(p[0], &b, 1), 1); /* the child holds the lock */
	close(p[0]);
	t0 = jitk__now_ms();
	jitk__cache_lock(c, key, &fd);
	waited = jitk__now_ms() - t0;
	assert_int_equal(waitpid(w.holder, &st, 0), w.holder);
	assert_true(fd >= 0);
	assert_int_equal(w.waits, 1);
	snprintf(want, sizeof(want), "waiting for the lock on %s held by pid %ld", hex,
		 (long)w.holder);
	assert_string_equal(w.msg, want);
	assert_true(waited >= 1000.0);
	assert_true(WIFSIGNALED(st));
	jitk__cache_unlock(fd);
	jitk__cache_close(c);
}

static void test_read_only_layer(void **state)
{
	t_fixture *f = *state;
	jitk_compiler *c = t_compiler(f->specs, f->cache, NULL, NULL), *ro;
	jitk_compiler_options o = JITK_COMPILER_OPTIONS_INIT;
	int origin;

	assert_int_equal(t_build(c, SYM, "sm_90", &origin), 0);
	jitk_compiler_free(c);
	/* The cache as a layer, no writable cache, compiling disabled. */
	o.specs = f->specs;
	o.cache_dir = "";
	o.cache_path = f->cache;
	o.no_compile = 1;
	assert_int_equal(jitk_compiler_new(&ro, &o), 0);
	assert_int_equal(t_build(ro, SYM, "sm_90", &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_LAYER);
	/* Not in the layer and compiling disabled: a clear error. */
	assert_int_equal(t_build(ro, SYM, "sm_100", &origin), JITK_ENOCOMPILE);
	assert_non_null(strstr(jitk_error_last()->message, "JITK_NO_COMPILE"));
	assert_int_equal(atomic_load(&ro->compiles), 0);
	jitk_compiler_free(ro);
	/* Force: compiles even with a hit. */
	o.cache_dir = f->cache;
	o.cache_path = "";
	o.no_compile = 0;
	o.force_compile = 1;
	assert_int_equal(jitk_compiler_new(&ro, &o), 0);
	assert_int_equal(t_build(ro, SYM, "sm_90", &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_COMPILED);
	jitk_compiler_free(ro);
}

/* The environment variables, as users set them. */
static void test_environment(void **state)
{
	t_fixture *f = *state;
	jitk_compiler_options o = JITK_COMPILER_OPTIONS_INIT;
	jitk_compiler *c;
	int origin;

	o.specs = f->specs;
	setenv("JITK_CACHE_DIR", f->cache, 1);
	setenv("JITK_NO_COMPILE", "1", 1);
	assert_int_equal(jitk_compiler_new(&c, &o), 0);
	assert_int_equal(t_build(c, SYM, "sm_90", &origin), JITK_ENOCOMPILE);
	jitk_compiler_free(c);
	unsetenv("JITK_NO_COMPILE");
	assert_int_equal(jitk_compiler_new(&c, &o), 0);
	assert_int_equal(t_build(c, SYM, "sm_90", &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_COMPILED);
	assert_string_equal(jitk__cache_root(c->cache) + strlen(f->cache), "/v1");
	jitk_compiler_free(c);
	setenv("JITK_FORCE_COMPILE", "1", 1);
	assert_int_equal(jitk_compiler_new(&c, &o), 0);
	assert_int_equal(t_build(c, SYM, "sm_90", &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_COMPILED);
	jitk_compiler_free(c);
	unsetenv("JITK_FORCE_COMPILE");
	/* JITK_CACHE_PATH: read-only layers; JITK_SPECS: spec directories. */
	unsetenv("JITK_CACHE_DIR");
	setenv("JITK_CACHE_PATH", f->cache, 1);
	setenv("JITK_SPECS", f->specs, 1);
	setenv("HOME", f->dir, 1);
	unsetenv("XDG_CACHE_HOME");
	o.specs = NULL;
	assert_int_equal(jitk_compiler_new(&c, &o), 0);
	assert_int_equal(t_build(c, SYM, "sm_90", &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_LAYER);
	{
		char *want = jitk__asprintf("%s/.cache/jitk/v1", f->dir);
		assert_string_equal(jitk__cache_root(c->cache), want);
		free(want);
	}
	jitk_compiler_free(c);
	unsetenv("JITK_CACHE_PATH");
	unsetenv("JITK_SPECS");
}

/* A compiler from the environment alone (the switches unset in the
 * options), logging into log. */
static jitk_compiler *env_compiler(const t_fixture *f, t_log *log)
{
	jitk_compiler_options o = JITK_COMPILER_OPTIONS_INIT;
	jitk_compiler *c = NULL;

	o.specs = f->specs;
	o.cache_dir = f->cache;
	o.cache_path = "";
	o.log = t_log_fn;
	o.log_payload = log;
	assert_int_equal(jitk_compiler_new(&c, &o), 0);
	return c;
}

/* Boolean variables are parsed strictly: any case of 1/true/yes/on and
 * 0/false/no/off, and anything else ("2", " 1", "enabled") is one warning
 * and the safe meaning, never the unsafe one. Before, only the exact
 * lower-case words counted: JITK_REMOTE_READONLY=TRUE uploaded. */
static void test_boolean_variables_fail_safe(void **state)
{
	static const char *const yes[] = { "1", "TRUE", "Yes", "oN", "true" };
	static const char *const no[] = { "0", "FALSE", "No", "off" };
	static const char *const bad[] = { "2", " 1", "1 ", "enabled", "y", "\x1b[31m" };
	static const char *const safe_on[] = { "JITK_CACHE_READONLY", "JITK_NO_COMPILE",
					       "JITK_REMOTE_READONLY" };
	t_fixture *f = *state;
	jitk_compiler *c;
	size_t i, v;
	int origin;

	/* a cache that is there, so that read-only is one layer without a warning */
	c = t_compiler(f->specs, f->cache, NULL, NULL);
	jitk_compiler_free(c);
	setenv("JITK_REMOTE_CACHE", "http://127.0.0.1:9/never-used", 1);
	for (i = 0; i < sizeof(safe_on) / sizeof(*safe_on); i++) {
		for (v = 0; v < sizeof(yes) / sizeof(*yes) + sizeof(no) / sizeof(*no) +
				    sizeof(bad) / sizeof(*bad);
		     v++) {
			size_t ny = sizeof(yes) / sizeof(*yes), nn = sizeof(no) / sizeof(*no);
			const char *val = v < ny ? yes[v] : v < ny + nn ? no[v - ny] : bad[v - ny - nn];
			int want = v < ny || v >= ny + nn, warned = v >= ny + nn, on = -1;
			t_log log = { 0, "" };

			setenv(safe_on[i], val, 1);
			c = env_compiler(f, &log);
			if (i == 0)
				on = jitk__cache_root(c->cache) == NULL;
			else if (i == 1)
				on = c->no_compile;
			else
				on = jitk__remote_read_only(c->remote);
			if (on != want || log.warnings != warned)
				fprintf(stderr, "%s='%s': on %d, %d warnings: %s\n", safe_on[i], val, on,
					log.warnings, log.last);
			assert_int_equal(on, want);
			assert_int_equal(log.warnings, warned);
			if (warned) {
				assert_non_null(strstr(log.last, safe_on[i]));
				assert_non_null(strstr(log.last, "taken as 1"));
				assert_null(strchr(log.last, '\x1b')); /* one printable line */
			}
			jitk_compiler_free(c);
			unsetenv(safe_on[i]);
		}
	}
	unsetenv("JITK_REMOTE_CACHE");
	/* The behaviours behind them: a read-only cache gets no entry, a
	 * no-compile miss is an error. */
	{
		t_log log = { 0, "" };

		setenv("JITK_CACHE_READONLY", "Yes", 1);
		c = env_compiler(f, &log);
		assert_int_equal(t_build(c, SYM, "sm_90", &origin), 0);
		assert_int_equal(origin, JITK_ORIGIN_COMPILED);
		assert_int_equal(t_count_files(f->cache, ".jitk"), 0);
		jitk_compiler_free(c);
		unsetenv("JITK_CACHE_READONLY");
		setenv("JITK_NO_COMPILE", "2", 1);
		c = env_compiler(f, &log);
		assert_int_equal(t_build(c, SYM, "sm_90", &origin), JITK_ENOCOMPILE);
		jitk_compiler_free(c);
		unsetenv("JITK_NO_COMPILE");
	}
	/* JITK_FORCE_COMPILE's safe meaning is off (the verified cache is
	 * used): an unknown value compiles no more than unset. */
	{
		t_log log = { 0, "" };

		c = env_compiler(f, &log);
		assert_int_equal(t_build(c, SYM, "sm_90", &origin), 0);
		jitk_compiler_free(c);
		setenv("JITK_FORCE_COMPILE", "maybe", 1);
		c = env_compiler(f, &log);
		assert_int_equal(log.warnings, 1);
		assert_non_null(strstr(log.last, "JITK_FORCE_COMPILE='maybe'"));
		assert_int_equal(t_build(c, SYM, "sm_90", &origin), 0);
		assert_int_equal(origin, JITK_ORIGIN_CACHE);
		jitk_compiler_free(c);
		setenv("JITK_FORCE_COMPILE", "YES", 1);
		c = env_compiler(f, &log);
		assert_int_equal(t_build(c, SYM, "sm_90", &origin), 0);
		assert_int_equal(origin, JITK_ORIGIN_COMPILED);
		jitk_compiler_free(c);
		unsetenv("JITK_FORCE_COMPILE");
		assert_int_equal(log.warnings, 1);
	}
}

/* cache pack -o FILE: the temporary is a fresh name made with O_EXCL, and
 * only it is removed; what is at FILE must be a regular file of this user.
 * Before, pack wrote FILE.tmp.PID, and when that name was taken (another
 * user's file, a PID reused in another namespace on shared storage) it
 * failed and then unlinked the file it had not made; and it renamed its
 * bundle over a FIFO, a device or a symbolic link at FILE. */
static void test_pack_output_and_temporary(void **state)
{
	t_fixture *f = *state;
	jitk_bundle_summary sum = JITK_BUNDLE_SUMMARY_INIT;
	jitk_compiler *c = t_compiler(f->specs, f->cache, NULL, NULL);
	char *out_dir = t_path(f->dir, "out"), *out, *planted, *fifo, *link, *target, *sub;
	char name[64];
	struct stat st;
	size_t len;
	char *text;
	int origin;

	assert_int_equal(t_build(c, SYM, "sm_90", &origin), 0);
	jitk_compiler_free(c);
	assert_int_equal(mkdir(out_dir, 0700), 0);
	out = t_path(out_dir, "k.jitkb");
	/* someone else's file under the name pack used to take */
	snprintf(name, sizeof(name), "k.jitkb.tmp.%ld", (long)getpid());
	planted = t_path(out_dir, name);
	t_writef(planted, "not yours\n");
	assert_int_equal(jitk_cache_pack(&sum, out, f->cache, NULL, NULL, NULL), 0);
	assert_int_equal(sum.entries, 1);
	text = t_read(planted, &len);
	assert_string_equal(text, "not yours\n");
	free(text);
	assert_int_equal(t_count_files(out_dir, ""), 2); /* the bundle and the planted file */
	assert_int_equal(stat(out, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0644);
	/* packing over its own earlier bundle is fine */
	assert_int_equal(jitk_cache_pack(&sum, out, f->cache, NULL, NULL, NULL), 0);
	assert_int_equal(t_count_files(out_dir, ""), 2);

	/* a FIFO, a directory, a symbolic link: refused, left as they are */
	fifo = t_path(out_dir, "fifo");
	assert_int_equal(mkfifo(fifo, 0600), 0);
	assert_int_equal(jitk_cache_pack(&sum, fifo, f->cache, NULL, NULL, NULL), JITK_EIO);
	assert_non_null(strstr(jitk_error_last()->message, "is a FIFO, not a regular file"));
	assert_int_equal(lstat(fifo, &st), 0);
	assert_true(S_ISFIFO(st.st_mode));
	sub = t_path(out_dir, "sub");
	assert_int_equal(mkdir(sub, 0700), 0);
	assert_int_equal(jitk_cache_pack(&sum, sub, f->cache, NULL, NULL, NULL), JITK_EIO);
	assert_non_null(strstr(jitk_error_last()->message, "is a directory"));
	target = t_path(out_dir, "target");
	t_writef(target, "keep\n");
	link = t_path(out_dir, "link");
	assert_int_equal(symlink(target, link), 0);
	assert_int_equal(jitk_cache_pack(&sum, link, f->cache, NULL, NULL, NULL), JITK_EIO);
	assert_non_null(strstr(jitk_error_last()->message, "is a symbolic link"));
	assert_int_equal(lstat(link, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	text = t_read(target, &len);
	assert_string_equal(text, "keep\n");
	free(text);
	/* another user's file (pretended: this user is uid 4242 now) */
	jitk__test_assume_uid = 4242;
	assert_int_equal(jitk_cache_pack(&sum, target, f->cache, NULL, NULL, NULL), JITK_EIO);
	jitk__test_assume_uid = -1;
	assert_non_null(strstr(jitk_error_last()->message, "not by this user (uid 4242)"));
	text = t_read(target, &len);
	assert_string_equal(text, "keep\n");
	free(text);
	/* no temporary file of any attempt is left: k.jitkb, the planted
	 * file, the FIFO and the link's target (nftw counts no link) */
	assert_int_equal(t_count_files(out_dir, ""), 4);
	free(out_dir);
	free(out);
	free(planted);
	free(fifo);
	free(link);
	free(target);
	free(sub);
}

static void test_unusable_cache_dir(void **state)
{
	t_fixture *f = *state;
	char *file = t_path(f->dir, "a-file");
	char *under = t_path(file, "cache");
	t_log log = { 0, "" };
	jitk_compiler *c;
	int origin;

	t_writef(file, "not a directory\n");
	c = t_compiler(f->specs, under, NULL, &log);
	assert_int_equal(log.warnings, 1);
	assert_non_null(strstr(log.last, "compiling in memory"));
	assert_null(jitk__cache_root(c->cache));
	assert_int_equal(t_build(c, SYM, "sm_90", &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_COMPILED);
	assert_int_equal(log.warnings, 1); /* one warning, not one per kernel */
	jitk_compiler_free(c);
	/* what the compiler only warns about, jitk_cache_check_writable says
	 * (jitk precompile --cache fails on it) */
	assert_int_equal(jitk_cache_check_writable(under), JITK_EIO);
	assert_non_null(strstr(jitk_error_last()->message, "Not a directory"));
	assert_int_equal(jitk_cache_check_writable(file), JITK_EIO);
	assert_non_null(strstr(jitk_error_last()->message, "is a regular file, not a directory"));
	assert_int_equal(jitk_cache_check_writable(f->cache), JITK_OK);
	assert_int_equal(jitk_cache_check_writable(""), JITK_EINVAL);
	assert_int_equal(jitk_cache_check_writable(NULL), JITK_EINVAL);
	free(file);
	free(under);
}

static void test_untrusted_dirs(void **state)
{
	t_fixture *f = *state;
	t_log log = { 0, "" };
	jitk_compiler *c;
	char *open_dir = t_path(f->dir, "open");

	/* World-writable without the sticky bit. */
	assert_int_equal(mkdir(open_dir, 0777), 0);
	assert_int_equal(chmod(open_dir, 0777), 0);
	c = t_compiler(f->specs, open_dir, NULL, &log);
	assert_null(jitk__cache_root(c->cache));
	assert_non_null(strstr(log.last, "world-writable without the sticky bit"));
	assert_non_null(strstr(log.last, open_dir));
	jitk_compiler_free(c);
	/* Owned by someone else (pretended, as git's safe.directory tests do). */
	jitk__test_assume_uid = 4242;
	log.warnings = 0;
	c = t_compiler(f->specs, f->cache, NULL, &log);
	assert_null(jitk__cache_root(c->cache));
	jitk_compiler_free(c);
	jitk__test_assume_uid = -1;
	c = t_compiler(f->specs, f->cache, NULL, &log);
	assert_non_null(jitk__cache_root(c->cache));
	jitk_compiler_free(c);
	mkdir(f->cache, 0700);
	jitk__test_assume_uid = 4242;
	log.warnings = 0;
	c = t_compiler(f->specs, f->cache, NULL, &log);
	assert_null(jitk__cache_root(c->cache));
	assert_non_null(strstr(log.last, "is owned by uid"));
	assert_non_null(strstr(log.last, "not by this user (uid 4242)"));
	jitk_compiler_free(c);
	jitk__test_assume_uid = -1;
	free(open_dir);
}

/* Entries that are symlinks, FIFOs or hard links are refused. */
static void test_hostile_entries(void **state)
{
	t_fixture *f = *state;
	jitk_compiler *c = t_compiler(f->specs, f->cache, NULL, NULL);
	char *entry = entry_of(c, f->cache), *elsewhere = t_path(f->dir, "elsewhere.jitk");
	char *link2 = t_path(f->dir, "second-link");
	jitk_cache_entry e;
	const char *why;
	int origin;
	size_t len;
	char *data;

	assert_int_equal(t_build(c, SYM, "sm_90", &origin), 0);
	data = t_read(entry, &len);
	t_write(elsewhere, data, len);
	free(data);
	/* symlink to a perfectly good entry */
	unlink(entry);
	assert_int_equal(symlink(elsewhere, entry), 0);
	assert_int_equal(jitk__entry_read(&e, entry, 0, &why), -1);
	assert_string_equal(why, "is a symbolic link");
	/* FIFO: refused without blocking */
	unlink(entry);
	assert_int_equal(mkfifo(entry, 0644), 0);
	assert_int_equal(jitk__entry_read(&e, entry, 0, &why), -1);
	assert_string_equal(why, "not a regular file");
	/* hard link */
	unlink(entry);
	assert_int_equal(link(elsewhere, entry), 0);
	assert_int_equal(jitk__entry_read(&e, entry, 0, &why), -1);
	assert_string_equal(why, "has several hard links");
	/* writable by others */
	unlink(entry);
	data = t_read(elsewhere, &len);
	t_write(entry, data, len);
	free(data);
	chmod(entry, 0666);
	assert_int_equal(jitk__entry_read(&e, entry, 0, &why), -1);
	assert_string_equal(why, "writable by others");
	/* owned by someone else */
	chmod(entry, 0644);
	jitk__test_assume_uid = 4242;
	assert_int_equal(jitk__entry_read(&e, entry, 0, &why), -1);
	assert_string_equal(why, "owned by another user");
	jitk__test_assume_uid = -1;
	assert_int_equal(jitk__entry_read(&e, entry, 0, &why), 0);
	jitk__cache_entry_free(&e);
	/* and the lookup treats each as a miss, then recompiles */
	unlink(entry);
	assert_int_equal(symlink(elsewhere, entry), 0);
	assert_int_equal(t_build(c, SYM, "sm_90", &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_COMPILED);
	free(entry);
	free(elsewhere);
	free(link2);
	jitk_compiler_free(c);
}

static void test_scan_verify_clear(void **state)
{
	t_fixture *f = *state;
	jitk_compiler *c = t_compiler(f->specs, f->cache, NULL, NULL);
	jitk_cache_summary s = JITK_CACHE_SUMMARY_INIT;
	char *entry = entry_of(c, f->cache);
	jitk_clear_result removed = JITK_CLEAR_RESULT_INIT;
	int origin;

	assert_int_equal(t_build(c, SYM, "sm_90", &origin), 0);
	assert_int_equal(t_build(c, SYM, "sm_100", &origin), 0);
	assert_int_equal(jitk__cache_scan(&s, f->cache, 1, NULL, NULL), 0);
	assert_int_equal(s.entries, 2);
	assert_int_equal(s.bad, 0);
	assert_int_equal(s.lock_files, 2);
	flip_byte(entry, NULL);
	assert_int_equal(jitk__cache_scan(&s, f->cache, 1, NULL, NULL), 0);
	assert_int_equal(s.bad, 1);
	assert_int_equal(jitk__cache_clear(&removed, f->cache), 0);
	assert_int_equal(removed.removed, 2);
	assert_int_equal(jitk__cache_scan(&s, f->cache, 1, NULL, NULL), 0);
	assert_int_equal(s.entries, 0);
	free(entry);
	jitk_compiler_free(c);
}

static void test_prune_lru(void **state)
{
	t_fixture *f = *state;
	jitk_compiler *c = t_compiler(f->specs, f->cache, NULL, NULL);
	char *old_tmp = t_path(f->cache, "v1/tmp/" T_HEX64 ".123.0");
	char *young_tmp = t_path(f->cache, "v1/tmp/" T_HEX64 ".123.1");
	char *e90 = entry_of(c, f->cache);
	jitk_prune_result r = JITK_PRUNE_RESULT_INIT;
	jitk_cache_summary s = JITK_CACHE_SUMMARY_INIT;
	struct timespec ts[2];
	struct stat st;
	int origin;

	assert_int_equal(t_build(c, SYM, "sm_90", &origin), 0);
	assert_int_equal(t_build(c, SYM, "sm_100", &origin), 0);
	assert_int_equal(t_build(c, SYM, "sm_89", &origin), 0);
	/* Make the sm_90 entry the oldest, then touch it with a hit. */
	ts[0].tv_sec = ts[1].tv_sec = 1000000000;
	ts[0].tv_nsec = ts[1].tv_nsec = 0;
	assert_int_equal(utimensat(AT_FDCWD, e90, ts, 0), 0);
	assert_int_equal(t_build(c, SYM, "sm_90", &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_CACHE);
	assert_int_equal(stat(e90, &st), 0);
	assert_true(st.st_mtime > 1000000000); /* the hit refreshed the stamp */
	/* Temporary files: an old one is swept, a young one left. */
	t_writef(old_tmp, "x");
	t_writef(young_tmp, "x");
	assert_int_equal(utimensat(AT_FDCWD, old_tmp, ts, 0), 0);
	assert_int_equal(jitk__cache_scan(&s, f->cache, 0, NULL, NULL), 0);
	/* Bound = the two largest entries less one byte: evict the oldest
	 * until it fits. The sm_90 entry was used last and survives. */
	assert_int_equal(jitk__cache_prune(&r, f->cache, s.bytes - 1, 3600, 0), 0);
	assert_int_equal(r.temp, 1);
	assert_int_equal(r.evicted, 1);
	assert_true(r.bytes_left <= s.bytes - 1);
	assert_int_equal(access(e90, F_OK), 0);
	assert_int_equal(access(old_tmp, F_OK), -1);
	assert_int_equal(access(young_tmp, F_OK), 0);
	free(old_tmp);
	free(young_tmp);
	free(e90);
	jitk_compiler_free(c);
}

/* ------------------------------------------------ hostile cache layouts */

/* Files outside the cache that no cache operation may touch: named like
 * cache files to tempt a sloppy walk, and old (an orphan sweep that
 * followed a link would take them). */
static const char *const outside_names[] = {
	"precious.txt", T_HEX64 ".jitk", T_HEX64 ".lock", T_HEX64 ".1.2",
};

static char *make_outside(const t_fixture *f)
{
	char *dir = t_path(f->dir, "outside");
	struct timespec old[2] = { { 1000000000, 0 }, { 1000000000, 0 } };
	size_t i;

	assert_int_equal(mkdir(dir, 0755), 0);
	for (i = 0; i < JITK_ARRAY_SIZE(outside_names); i++) {
		char *p = t_path(dir, outside_names[i]);

		t_writef(p, "data of %s\n", outside_names[i]);
		assert_int_equal(utimensat(AT_FDCWD, p, old, 0), 0);
		free(p);
	}
	return dir;
}

/* Every outside file is there, unchanged, and nothing was added. */
static void assert_outside_intact(const char *dir)
{
	size_t i, len;

	for (i = 0; i < JITK_ARRAY_SIZE(outside_names); i++) {
		char *p = t_path(dir, outside_names[i]);
		char *want = jitk__asprintf("data of %s\n", outside_names[i]);
		char *got;

		assert_int_equal(access(p, F_OK), 0);
		got = t_read(p, &len);
		assert_string_equal(got, want);
		free(got);
		free(want);
		free(p);
	}
	assert_int_equal(t_count_files(dir, ""), (int)JITK_ARRAY_SIZE(outside_names));
}

/* A cache holding SYM's sm_90 entry (and its lock file); *entry: its path. */
static void cache_with_entry(const t_fixture *f, char **entry)
{
	jitk_compiler *c = t_compiler(f->specs, f->cache, NULL, NULL);
	int origin;

	assert_int_equal(t_build(c, SYM, "sm_90", &origin), 0);
	*entry = entry_of(c, f->cache);
	jitk_compiler_free(c);
}

/* A shard name (2 hex digits) other than the entry's: the entry's + n. */
static void other_shard(char out[3], const char *entry, unsigned n)
{
	char mine[3];

	snprintf(mine, sizeof(mine), "%.2s", strrchr(entry, '/') + 1);
	snprintf(out, 3, "%02x", ((unsigned)strtoul(mine, NULL, 16) + n) & 0xffu);
}

/* A report callback of jitk__cache_scan: counts what it gets, by kind. */
typedef struct {
	int bad, foreign;
} counted;

static void count_report(void *ctx, const char *path, const char *problem, int foreign)
{
	counted *n = ctx;

	(void)path;
	(void)problem;
	if (foreign)
		n->foreign++;
	else
		n->bad++;
}

/* cache/v1/<dir>/<shard><i in 62 hex digits><suffix>: a name of jitk's. */
static char *key_path(const t_fixture *f, const char *dir, const char *shard, unsigned i,
		      const char *suffix)
{
	char *p = jitk__asprintf("%s/v1/%s/%.2s%062x%s", f->cache, dir, shard, i, suffix);

	assert_non_null(p);
	return p;
}

static int is_gone(const char *path)
{
	struct stat st;

	return lstat(path, &st) == -1 && errno == ENOENT;
}

static void expect_error(int rc, int want, const char *msg)
{
	assert_int_equal(rc, want);
	if (!strstr(jitk_error_last()->message, msg))
		fprintf(stderr, "message: %s\nwanted: %s\n", jitk_error_last()->message, msg);
	assert_non_null(strstr(jitk_error_last()->message, msg));
}

/* scan (scan_rc), clear and prune (write_rc) of root; msg in each error. */
static void expect_admin(const char *root, int scan_rc, int write_rc, const char *msg)
{
	jitk_cache_summary s = JITK_CACHE_SUMMARY_INIT;
	jitk_clear_result r = JITK_CLEAR_RESULT_INIT;
	jitk_prune_result pr = JITK_PRUNE_RESULT_INIT;

	if (scan_rc)
		expect_error(jitk__cache_scan(&s, root, 1, NULL, NULL), scan_rc, msg);
	else
		assert_int_equal(jitk__cache_scan(&s, root, 1, NULL, NULL), 0);
	if (write_rc) {
		expect_error(jitk__cache_clear(&r, root), write_rc, msg);
		expect_error(jitk__cache_prune(&pr, root, 1, 0, JITK_PRUNE_VERIFY), write_rc, msg);
	} else {
		assert_int_equal(jitk__cache_clear(&r, root), 0);
	}
}

/* cache clear and prune followed links and deleted outside the cache
 * (uid A: ln -s ~B/docs /tmp/shared/v1/ab; uid B: jitk cache clear). Links
 * at every level: a shard, an entry, a temporary and a lock file that
 * point outside, a link loop; then tmp/ and locks/; then v1/ itself.
 * Nothing outside is touched; the links themselves are bad entries and go;
 * v1/ as a link is refused. */
static void test_admin_never_follows_links(void **state)
{
	t_fixture *f = *state;
	char *out = make_outside(f), *entry, s1[3], s2[3], s3[3];
	jitk_clear_result r = JITK_CLEAR_RESULT_INIT;
	jitk_prune_result pr = JITK_PRUNE_RESULT_INIT;
	jitk_cache_summary s = JITK_CACHE_SUMMARY_INIT;
	char *ab, *cd, *loop, *elink, *tlink, *llink;
	char *tmp = t_path(f->cache, "v1/tmp"), *locks = t_path(f->cache, "v1/locks");
	char *v1 = t_path(f->cache, "v1"), *v1real = t_path(f->cache, "v1.real");
	char *o_entry = t_path(out, T_HEX64 ".jitk"), *o_lock = t_path(out, T_HEX64 ".lock");
	char *o_temp = t_path(out, T_HEX64 ".1.2");

	cache_with_entry(f, &entry);
	other_shard(s1, entry, 1);
	other_shard(s2, entry, 2);
	other_shard(s3, entry, 3);
	ab = jitk__asprintf("%s/v1/%s", f->cache, s1);
	cd = jitk__asprintf("%s/v1/%s", f->cache, s2);
	loop = jitk__asprintf("%s/v1/%s", f->cache, s3);
	elink = key_path(f, s2, s2, 1, ".jitk");
	tlink = key_path(f, "tmp", "ab", 2, ".3.4");
	llink = key_path(f, "locks", "ab", 3, ".lock");
	assert_int_equal(symlink(out, ab), 0);
	assert_int_equal(mkdir(cd, 0755), 0);
	assert_int_equal(symlink(o_entry, elink), 0);
	assert_int_equal(symlink(o_temp, tlink), 0);
	assert_int_equal(symlink(o_lock, llink), 0);
	assert_int_equal(symlink(loop, loop), 0);
	assert_int_equal(jitk__cache_scan(&s, f->cache, 1, NULL, NULL), 0);
	assert_int_equal(s.entries, 1);
	assert_int_equal(s.bad, 5);
	assert_int_equal(s.temp_files, 0);
	assert_int_equal(s.lock_files, 1);
	assert_int_equal(s.foreign, 0);
	assert_int_equal(jitk__cache_clear(&r, f->cache), 0);
	assert_int_equal(r.removed, 6);
	assert_int_equal(r.foreign, 0);
	assert_int_equal(r.failed, 0);
	assert_outside_intact(out);
	assert_true(is_gone(entry) && is_gone(ab) && is_gone(elink) && is_gone(tlink) &&
		    is_gone(llink) && is_gone(loop));
	assert_int_equal(t_count_files(locks, ".lock"), 1); /* the real lock file stays */

	/* tmp/ and locks/ as links */
	t_rmtree(tmp);
	t_rmtree(locks);
	assert_int_equal(symlink(out, tmp), 0);
	assert_int_equal(symlink(out, locks), 0);
	assert_int_equal(jitk__cache_scan(&s, f->cache, 1, NULL, NULL), 0);
	assert_int_equal(s.temp_files, 0);
	assert_int_equal(s.lock_files, 0);
	assert_int_equal(s.bad, 2);
	assert_int_equal(jitk__cache_prune(&pr, f->cache, 1, 0, JITK_PRUNE_VERIFY), 0);
	assert_int_equal(pr.bad, 2);
	assert_int_equal(pr.temp, 0);
	assert_outside_intact(out);
	assert_true(is_gone(tmp) && is_gone(locks));

	/* v1/ as a link: refused by every command and by lookups */
	assert_int_equal(rename(v1, v1real), 0);
	assert_int_equal(symlink(out, v1), 0);
	expect_admin(f->cache, JITK_EIO, JITK_EIO, "v1 is a symbolic link");
	assert_non_null(strstr(jitk_error_last()->message, "refusing to use the cache at"));
	{
		t_log log = { 0, "" };
		jitk_compiler *c = t_compiler(f->specs, f->cache, NULL, &log);
		int origin;

		assert_null(jitk__cache_root(c->cache));
		assert_int_equal(log.warnings, 1);
		assert_non_null(strstr(log.last, "v1 is a symbolic link"));
		assert_int_equal(t_build(c, SYM, "sm_90", &origin), 0);
		assert_int_equal(origin, JITK_ORIGIN_COMPILED);
		jitk_compiler_free(c);
	}
	assert_outside_intact(out);
	free(ab);
	free(cd);
	free(loop);
	free(elink);
	free(tlink);
	free(llink);
	free(tmp);
	free(locks);
	free(v1);
	free(v1real);
	free(o_entry);
	free(o_lock);
	free(o_temp);
	free(entry);
	free(out);
}

/* t_write, making the parent directories. */
static void plant(const char *path, const char *text)
{
	char *dir = jitk__strndup(path, (size_t)(strrchr(path, '/') - path));

	assert_non_null(dir);
	assert_int_equal(jitk__mkdirs(dir, 0755), 0);
	t_writef(path, "%s", text);
	free(dir);
}

/* clear deleted files that are not cache entries (v1/photos/p.jpg,
 * v1/src/main.c) and stats counted them as entries. Only names of jitk's
 * schemes in jitk's directories are cache files; the rest is foreign:
 * counted, reported by verify, never removed by clear or prune. */
static void test_admin_leaves_foreign_files(void **state)
{
	static const char *const top[] = {
		"v1/photos/p.jpg", "v1/src/main.c", "v1/notes.txt", "v1/AB/x",
		"v1/tmp/readme", "v1/tmp/" T_HEX64 ".1", "v1/locks/readme",
		"v1/locks/" T_HEX64 ".lock.bak",
	};
	t_fixture *f = *state;
	char *entry, *paths[JITK_ARRAY_SIZE(top) + 5], *dir, sh[3], other[3];
	size_t n = 0, i;
	jitk_cache_summary s = JITK_CACHE_SUMMARY_INIT;
	jitk_clear_result r = JITK_CLEAR_RESULT_INIT;
	jitk_prune_result pr = JITK_PRUNE_RESULT_INIT;
	counted reported = { 0, 0 };

	cache_with_entry(f, &entry);
	dir = jitk__strndup(entry, (size_t)(strrchr(entry, '/') - entry));
	snprintf(sh, sizeof(sh), "%.2s", strrchr(entry, '/') + 1);
	other_shard(other, entry, 1);
	for (i = 0; i < JITK_ARRAY_SIZE(top); i++)
		paths[n++] = t_path(f->cache, top[i]);
	paths[n++] = t_path(dir, "notes.txt");
	paths[n++] = t_path(dir, ".hidden");
	paths[n++] = key_path(f, sh, other, 7, ".jitk"); /* in the wrong shard */
	paths[n++] = jitk__asprintf("%s/%sABCDEF%056d.jitk", dir, sh, 0); /* upper case */
	paths[n++] = jitk__asprintf("%s/v1/%s", f->cache, other); /* a file at a shard name */
	for (i = 0; i < n; i++)
		plant(paths[i], paths[i]);
	/* v1/photos, v1/src and v1/AB count once each (not walked) */
	assert_int_equal(jitk__cache_scan(&s, f->cache, 0, NULL, NULL), 0);
	assert_int_equal(s.entries, 1);
	assert_int_equal(s.foreign, n);
	assert_int_equal(s.bad, 0);
	assert_int_equal(jitk__cache_scan(&s, f->cache, 1, count_report, &reported), 0);
	assert_int_equal(reported.foreign, (int)n);
	assert_int_equal(reported.bad, 0);
	assert_int_equal(s.bad, 0);
	assert_int_equal(jitk__cache_clear(&r, f->cache), 0);
	assert_int_equal(r.removed, 1);
	assert_int_equal(r.foreign, n);
	assert_true(is_gone(entry));
	free(entry);
	cache_with_entry(f, &entry);
	assert_int_equal(jitk__cache_prune(&pr, f->cache, 1, 0, JITK_PRUNE_VERIFY), 0);
	assert_int_equal(pr.evicted, 1);
	assert_int_equal(pr.foreign, n);
	for (i = 0; i < n; i++) {
		size_t len;
		char *got = t_read(paths[i], &len);

		assert_string_equal(got, paths[i]);
		free(got);
		free(paths[i]);
	}
	free(dir);
	free(entry);
}

/* stats, verify, clear and prune of a missing cache said "0 bad" and
 * succeeded; of a cache whose directories fail the trust checks of
 * lookups they went ahead. Now "no cache at PATH" (JITK_ENOENT) and a
 * refusal naming the directory and why (JITK_EIO); nothing is removed. */
static void test_admin_refusals(void **state)
{
	t_fixture *f = *state;
	char *entry, *msg, sh[3];
	char *missing = t_path(f->dir, "nope"), *file = t_path(f->dir, "a-file");
	char *empty = t_path(f->dir, "empty"), *v1 = t_path(f->cache, "v1");
	char *v1file = t_path(f->dir, "v1file"), *v1file_v1 = t_path(v1file, "v1");
	jitk_clear_result r = JITK_CLEAR_RESULT_INIT;

	cache_with_entry(f, &entry);
	snprintf(sh, sizeof(sh), "%.2s", strrchr(entry, '/') + 1);
	msg = jitk__asprintf("no cache at %s", missing);
	expect_admin(missing, JITK_ENOENT, JITK_ENOENT, msg);
	assert_string_equal(jitk_error_last()->message, msg);
	free(msg);
	t_writef(file, "x\n");
	msg = jitk__asprintf("no cache at %s (not a directory)", file);
	expect_admin(file, JITK_ENOENT, JITK_ENOENT, msg);
	free(msg);
	assert_int_equal(mkdir(empty, 0755), 0);
	msg = jitk__asprintf("no cache at %s (no v1 directory)", empty);
	expect_admin(empty, JITK_ENOENT, JITK_ENOENT, msg);
	free(msg);
	assert_int_equal(mkdir(v1file, 0755), 0);
	t_writef(v1file_v1, "x\n");
	expect_admin(v1file, JITK_ENOENT, JITK_ENOENT, "v1 is not a directory");
	/* world-writable without the sticky bit; with it, fine */
	assert_int_equal(chmod(v1, 0777), 0);
	expect_admin(f->cache, JITK_EIO, JITK_EIO, "v1 is world-writable without the sticky bit");
	assert_int_equal(chmod(v1, 01777), 0);
	assert_int_equal(jitk__cache_scan(&(jitk_cache_summary){ 0 }, f->cache, 1, NULL, NULL), 0);
	assert_int_equal(chmod(v1, 0755), 0);
	assert_int_equal(access(entry, F_OK), 0);
	/* another user's cache (pretended): scan accepts root's directories,
	 * as layers do; clear and prune want this user's */
	jitk__test_assume_uid = 4242;
	expect_admin(f->cache, geteuid() == 0 ? 0 : JITK_EIO, JITK_EIO,
		     "not by this user (uid 4242)");
	jitk__test_assume_uid = -1;
	assert_int_equal(access(entry, F_OK), 0);
	if (geteuid() == 0) { /* real foreign owners */
		char *shard = jitk__asprintf("%s/v1/%s", f->cache, sh);
		char *link = t_path(f->dir, "cache-link");

		assert_int_equal(chown(v1, 4242, 4242), 0);
		expect_admin(f->cache, JITK_EIO, JITK_EIO, "v1 is owned by uid 4242");
		assert_int_equal(chown(v1, 0, 0), 0);
		/* a shard of another user's: not walked, and what is in it stays */
		assert_int_equal(chown(shard, 4242, 4242), 0);
		assert_int_equal(jitk__cache_clear(&r, f->cache), 0);
		assert_int_equal(r.removed, 0);
		assert_int_equal(r.foreign, 1);
		assert_int_equal(access(entry, F_OK), 0);
		assert_int_equal(chown(shard, 0, 0), 0);
		/* the named directory a link someone else owns */
		assert_int_equal(symlink(f->cache, link), 0);
		assert_int_equal(lchown(link, 4242, 4242), 0);
		expect_admin(link, JITK_EIO, JITK_EIO, "is a symbolic link owned by uid 4242");
		assert_int_equal(lchown(link, 0, 0), 0);
		assert_int_equal(jitk__cache_scan(&(jitk_cache_summary){ 0 }, link, 1, NULL, NULL), 0);
		free(shard);
		free(link);
	} else {
		printf("SKIP (part): chown needs root\n");
	}
	assert_int_equal(access(entry, F_OK), 0);
	free(entry);
	free(missing);
	free(file);
	free(empty);
	free(v1);
	free(v1file);
	free(v1file_v1);
}

/* A junk file with a valid name survived prune while verify kept failing;
 * a directory at an entry name survived prune and clear. Now prune removes
 * exactly the bad entries verify names (verify is clean after it), and
 * foreign data - a directory holding other files - stays. */
static void test_verify_prune_agree(void **state)
{
	t_fixture *f = *state;
	char *entry, *dir, sh[3], *k[12], *l[2], *t[2], *keep, *inner, *hard;
	char *out = make_outside(f);
	jitk_cache_summary s = JITK_CACHE_SUMMARY_INIT;
	jitk_prune_result pr = JITK_PRUNE_RESULT_INIT;
	counted seen = { 0, 0 };
	size_t len, i;
	int fd, nbad, origin;
	char *data;
	struct stat st;

	cache_with_entry(f, &entry);
	dir = jitk__strndup(entry, (size_t)(strrchr(entry, '/') - entry));
	snprintf(sh, sizeof(sh), "%.2s", strrchr(entry, '/') + 1);
	for (i = 0; i < JITK_ARRAY_SIZE(k); i++)
		k[i] = key_path(f, sh, sh, (unsigned)i + 1, ".jitk");
	l[0] = key_path(f, "locks", "ab", 1, ".lock");
	l[1] = key_path(f, "locks", "ab", 2, ".lock");
	t[0] = key_path(f, "tmp", "ab", 1, ".7.8");
	t[1] = key_path(f, "tmp", "ab", 2, ".7.8");
	keep = t_path(k[2], "keep.txt");
	inner = t_path(k[1], T_HEX64 ".jitk");
	hard = t_path(out, "precious.txt");
	assert_int_equal(mkdir(k[0], 0755), 0);            /* an empty directory */
	assert_int_equal(mkdir(k[1], 0755), 0);            /* one holding jitk debris */
	t_writef(inner, "junk");
	assert_int_equal(mkdir(k[2], 0755), 0);            /* one holding data: foreign */
	t_writef(keep, "keep me\n");
	t_writef(k[3], "garbage\n");                      /* junk under a valid name */
	assert_int_equal(mkfifo(k[4], 0644), 0);           /* a FIFO */
	assert_int_equal(symlink("/dev/zero", k[5]), 0);   /* a link to a device */
	fd = open(k[6], O_WRONLY | O_CREAT, 0644);         /* a huge sparse file */
	assert_true(fd >= 0);
	assert_true(ftruncate(fd, (off_t)1 << 40) == 0 || ftruncate(fd, (off_t)1 << 34) == 0);
	close(fd);
	data = t_read(entry, &len);                        /* a good entry, wrong name */
	t_write(k[7], data, len);
	t_write(k[8], data, len);                          /* writable by others */
	assert_int_equal(chmod(k[8], 0666), 0);
	free(data);
	assert_int_equal(link(hard, k[9]), 0);             /* a hard link to a file outside */
	t_write(k[10], "", 0);                             /* empty */
	nbad = 10;
	if (mknod(k[11], S_IFCHR | 0644, makedev(1, 5)) == 0) /* a device (/dev/zero's numbers) */
		nbad++;
	else
		printf("SKIP (part): mknod: %s\n", strerror(errno));
	assert_int_equal(mkfifo(l[0], 0600), 0);           /* a FIFO at a lock path */
	assert_int_equal(mkdir(l[1], 0700), 0);            /* a directory at a lock path */
	assert_int_equal(mkfifo(t[0], 0600), 0);           /* a FIFO at a temporary name */
	assert_int_equal(symlink(hard, t[1]), 0);          /* a link at a temporary name */
	nbad += 4;

	assert_int_equal(jitk__cache_scan(&s, f->cache, 1, count_report, &seen), 0);
	assert_int_equal(s.bad, nbad);
	assert_int_equal(seen.bad, nbad);
	assert_int_equal(s.foreign, 1);
	assert_int_equal(s.entries, 1);
	assert_int_equal(jitk__cache_prune(&pr, f->cache, 0, JITK_TEMP_MAX_AGE_S, JITK_PRUNE_VERIFY), 0);
	assert_int_equal(pr.bad, nbad);
	assert_int_equal(pr.foreign, 1);
	assert_int_equal(pr.failed, 0);
	assert_int_equal(pr.evicted, 0);
	memset(&seen, 0, sizeof(seen));
	assert_int_equal(jitk__cache_scan(&s, f->cache, 1, count_report, &seen), 0);
	assert_int_equal(s.bad, 0);
	assert_int_equal(seen.bad, 0);
	assert_int_equal(s.foreign, 1);
	assert_int_equal(s.entries, 1);
	data = t_read(keep, &len);
	assert_string_equal(data, "keep me\n");
	free(data);
	assert_int_equal(stat(hard, &st), 0);
	assert_int_equal(st.st_nlink, 1);
	assert_outside_intact(out);
	{
		jitk_compiler *c = t_compiler(f->specs, f->cache, NULL, NULL);

		assert_int_equal(t_build(c, SYM, "sm_90", &origin), 0);
		assert_int_equal(origin, JITK_ORIGIN_CACHE);
		jitk_compiler_free(c);
	}
	for (i = 0; i < JITK_ARRAY_SIZE(k); i++)
		free(k[i]);
	free(l[0]);
	free(l[1]);
	free(t[0]);
	free(t[1]);
	free(keep);
	free(inner);
	free(hard);
	free(dir);
	free(entry);
	free(out);
}

/* A directory at an entry's name warned twice in every process, forever
 * (rejected, then the rename failed). Debris is removed with one warning
 * and the entry written; a directory holding other files warns once per
 * process and is left alone. */
static void test_dir_at_entry_name(void **state)
{
	t_fixture *f = *state;
	char *entry, *inner, *keep;
	jitk_cache_entry e;
	const char *why;
	int origin, i;

	cache_with_entry(f, &entry);
	inner = t_path(entry, T_HEX64 ".jitk");
	keep = t_path(entry, "keep.txt");
	assert_int_equal(unlink(entry), 0);
	assert_int_equal(mkdir(entry, 0755), 0);
	t_writef(inner, "junk");
	for (i = 0; i < 2; i++) { /* two processes, as it were */
		t_log log = { 0, "" };
		jitk_compiler *c = t_compiler(f->specs, f->cache, NULL, &log);

		assert_int_equal(t_build(c, SYM, "sm_90", &origin), 0);
		assert_int_equal(origin, i ? JITK_ORIGIN_CACHE : JITK_ORIGIN_COMPILED);
		assert_int_equal(log.warnings, i ? 0 : 1);
		if (!i) {
			assert_non_null(strstr(log.last, entry));
			assert_non_null(strstr(log.last, "a directory where a cache file belongs"));
		}
		jitk_compiler_free(c);
	}
	assert_int_equal(jitk__entry_read(&e, entry, 0, &why), 0);
	jitk__cache_entry_free(&e);
	assert_int_equal(unlink(entry), 0);
	assert_int_equal(mkdir(entry, 0755), 0);
	t_writef(keep, "keep me\n");
	for (i = 0; i < 2; i++) {
		t_log log = { 0, "" };
		jitk_compiler *c = t_compiler(f->specs, f->cache, NULL, &log);

		assert_int_equal(t_build(c, SYM, "sm_90", &origin), 0);
		assert_int_equal(origin, JITK_ORIGIN_MEMORY); /* compiled; nowhere to publish */
		assert_int_equal(log.warnings, 1);
		assert_non_null(strstr(log.last, "a directory holding other files is in the way"));
		jitk_compiler_free(c);
	}
	assert_int_equal(access(keep, F_OK), 0);
	free(inner);
	free(keep);
	free(entry);
}

/* The write path followed links too: a shard that is a link took the
 * entry outside; tmp/, locks/ or v1/ as links put temporary and lock files
 * outside (and the orphan sweep deleted old files there); a FIFO at a lock
 * path was used as the lock. */
static void test_write_path_links(void **state)
{
	static const char *const links[] = { "v1/tmp", "v1/locks", "v1" };
	t_fixture *f = *state;
	char *out = make_outside(f), *entry, *shard, *lock, hex[2 * JITK_HASH_SIZE + 1];
	jitk_cache_entry e;
	const char *why;
	struct stat st;
	size_t i;
	int origin;

	cache_with_entry(f, &entry);
	shard = jitk__strndup(entry, (size_t)(strrchr(entry, '/') - entry));
	snprintf(hex, sizeof(hex), "%.64s", strrchr(entry, '/') + 1);
	lock = jitk__asprintf("%s/v1/locks/%s.lock", f->cache, hex);
	/* the shard a link: replaced by a real directory, one warning */
	t_rmtree(shard);
	assert_int_equal(symlink(out, shard), 0);
	{
		t_log log = { 0, "" };
		jitk_compiler *c = t_compiler(f->specs, f->cache, NULL, &log);

		assert_int_equal(t_build(c, SYM, "sm_90", &origin), 0);
		assert_int_equal(origin, JITK_ORIGIN_COMPILED);
		assert_int_equal(log.warnings, 1);
		assert_non_null(strstr(log.last, "a symbolic link where a cache directory belongs"));
		jitk_compiler_free(c);
	}
	assert_int_equal(lstat(shard, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(jitk__entry_read(&e, entry, 0, &why), 0);
	jitk__cache_entry_free(&e);
	assert_outside_intact(out);
	/* tmp/, locks/ or v1/ a link: the cache is not used (one warning) */
	for (i = 0; i < JITK_ARRAY_SIZE(links); i++) {
		char *p = t_path(f->cache, links[i]);
		t_log log = { 0, "" };
		jitk_compiler *c;

		t_rmtree(f->cache);
		free(entry);
		cache_with_entry(f, &entry);
		t_rmtree(p);
		assert_int_equal(symlink(out, p), 0);
		c = t_compiler(f->specs, f->cache, NULL, &log);
		assert_null(jitk__cache_root(c->cache));
		assert_int_equal(log.warnings, 1);
		assert_non_null(strstr(log.last, "is a symbolic link"));
		assert_non_null(strstr(log.last, p));
		assert_int_equal(t_build(c, SYM, "sm_90", &origin), 0);
		assert_int_equal(origin, JITK_ORIGIN_COMPILED);
		jitk_compiler_free(c);
		assert_outside_intact(out);
		free(p);
	}
	/* a FIFO at the lock path: removed, one warning, a real lock file */
	t_rmtree(f->cache);
	free(entry);
	cache_with_entry(f, &entry);
	assert_int_equal(unlink(entry), 0);
	assert_int_equal(unlink(lock), 0);
	assert_int_equal(mkfifo(lock, 0600), 0);
	{
		t_log log = { 0, "" };
		jitk_compiler *c = t_compiler(f->specs, f->cache, NULL, &log);

		assert_int_equal(t_build(c, SYM, "sm_90", &origin), 0);
		assert_int_equal(origin, JITK_ORIGIN_COMPILED);
		assert_int_equal(log.warnings, 1);
		assert_non_null(strstr(log.last, "a special file where a cache file belongs"));
		jitk_compiler_free(c);
	}
	assert_int_equal(lstat(lock, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	free(lock);
	free(shard);
	free(entry);
	free(out);
}

typedef struct {
	jitk_compiler *c;
	size_t inst;
	int origin;
	int rc;
} race_arg;

static void *race_thread(void *p)
{
	race_arg *a = p;
	jitk_build b;
	jitk_arch arch;

	jitk__arch_parse(&arch, "sm_90");
	a->rc = jitk__build(&b, a->c, a->inst, arch, 0);
	if (!a->rc) {
		a->origin = b.origin;
		jitk__build_free(&b);
	}
	return NULL;
}

/* 8 threads on one cold key: one compile (the per-key lock), all succeed. */
static void test_threads_compile_once(void **state)
{
	t_fixture *f = *state;
	jitk_compiler *c = t_compiler(f->specs, f->cache, NULL, NULL);
	pthread_t th[8];
	race_arg args[8];
	size_t inst;
	int i, compiled = 0;

	assert_int_equal(jitk__spec_find(c->specs, SYM, &inst), 0);
	for (i = 0; i < 8; i++) {
		args[i].c = c;
		args[i].inst = inst;
		assert_int_equal(pthread_create(&th[i], NULL, race_thread, &args[i]), 0);
	}
	for (i = 0; i < 8; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(args[i].rc, 0);
		compiled += args[i].origin == JITK_ORIGIN_COMPILED;
	}
	assert_int_equal(compiled, 1);
	assert_int_equal(atomic_load(&c->compiles), 1);
	jitk_compiler_free(c);
}

/* 16 processes cold-start the same symbol: one compile among them. */
static void test_processes_compile_once(void **state)
{
	t_fixture *f = *state;
	pid_t pids[16];
	int i, compiled = 0, ok = 0;

	for (i = 0; i < 16; i++) {
		pids[i] = fork();
		assert_true(pids[i] >= 0);
		if (pids[i] == 0) {
			jitk_compiler_options o = JITK_COMPILER_OPTIONS_INIT;
			jitk_compiler *c;
			jitk_origin origin = JITK_ORIGIN_MEMORY;

			o.specs = f->specs;
			o.cache_dir = f->cache;
			o.cache_path = "";
			o.no_compile = 0;
			o.force_compile = 0;
			if (jitk_compiler_new(&c, &o) || jitk_precompile(&origin, c, SYM, "sm_90"))
				_exit(3);
			jitk_compiler_free(c);
			_exit(origin == JITK_ORIGIN_COMPILED ? 0 : 1);
		}
	}
	for (i = 0; i < 16; i++) {
		int st = 0;

		assert_int_equal(waitpid(pids[i], &st, 0), pids[i]);
		assert_true(WIFEXITED(st));
		assert_true(WEXITSTATUS(st) <= 1);
		compiled += WEXITSTATUS(st) == 0;
		ok++;
	}
	assert_int_equal(ok, 16);
	assert_int_equal(compiled, 1);
	{
		jitk_cache_summary s = JITK_CACHE_SUMMARY_INIT;

		assert_int_equal(jitk__cache_scan(&s, f->cache, 1, NULL, NULL), 0);
		assert_int_equal(s.entries, 1);
		assert_int_equal(s.bad, 0);
		assert_int_equal(s.temp_files, 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_hit_after_miss, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_corruption, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_wrong_entry_under_right_name, t_setup, t_teardown),
		cmocka_unit_test(test_huge_header),
		cmocka_unit_test(test_header_fully_covered),
		cmocka_unit_test_setup_teardown(test_max_bytes_sizes, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_no_environment_hook, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_null_arguments_are_named, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_bad_layers_warn_once, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_lock_wait_names_holder, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_admin_never_follows_links, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_admin_leaves_foreign_files, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_admin_refusals, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_verify_prune_agree, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_dir_at_entry_name, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_write_path_links, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_read_only_layer, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_environment, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_boolean_variables_fail_safe, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_pack_output_and_temporary, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_unusable_cache_dir, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_untrusted_dirs, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_hostile_entries, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_scan_verify_clear, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_prune_lru, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_threads_compile_once, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_processes_compile_once, t_setup, t_teardown),
	};

	return T_RUN_TESTS(tests, NULL, NULL);
}
