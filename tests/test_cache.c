/* test_cache.c - the disk cache: hits, verification, layers, switches,
 * unusable and untrusted directories, hostile entries, LRU, races. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "build/compile.h"

#define SYM "static_quant_fp8"


/* The path of SYM's sm_90 entry in cache. */
static char *entry_of(jitk_compiler *c, const char *cache)
{
	jitk_tu tu;
	jitk_variant v;
	jitk_arch a;
	uint8_t key[JITK_HASH_SIZE];
	char hex[2 * JITK_HASH_SIZE + 1];
	size_t inst;
	char *p;

	jitk__arch_parse(&a, "sm_90");
	assert_int_equal(jitk__spec_find(c->specs, SYM, &inst), 0);
	assert_int_equal(jitk__prepare(&tu, key, &v, c, inst, a), 0);
	jitk__tu_free(&tu);
	jitk__hex(hex, key, JITK_HASH_SIZE);
	p = jitk__asprintf("%s/v1/%.2s/%s.jitk", cache, hex, hex);
	assert_non_null(p);
	return p;
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
	jitk_tu tu;
	jitk_variant v;
	jitk_arch a;
	uint8_t key[JITK_HASH_SIZE];
	char hex[2 * JITK_HASH_SIZE + 1];
	size_t inst, len;
	char *data;

	assert_int_equal(t_build(c, SYM, "sm_100", &origin), 0);
	jitk__arch_parse(&a, "sm_100");
	jitk__spec_find(c->specs, SYM, &inst);
	assert_int_equal(jitk__prepare(&tu, key, &v, c, inst, a), 0);
	jitk__tu_free(&tu);
	jitk__hex(hex, key, JITK_HASH_SIZE);
	e100 = jitk__asprintf("%s/v1/%.2s/%s.jitk", f->cache, hex, hex);
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

/* Sizes in a header are checked before anything is allocated. */
static void test_huge_header(void **state)
{
	jitk_cache_entry e, out;
	uint8_t *bytes;
	size_t len;
	const char *problem;
	char name[] = "x";
	char *names[1] = { name };
	unsigned char img[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	int i;

	(void)state;
	memset(&e, 0, sizeof(e));
	strcpy(e.target, "sm_90");
	e.names = names;
	e.nnames = 1;
	e.image = img;
	e.size = sizeof(img);
	assert_int_equal(jitk__entry_encode(&bytes, &len, &e), 0);
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
	setenv("JITK_TEST_ASSUME_UID", "4242", 1);
	log.warnings = 0;
	c = t_compiler(f->specs, f->cache, NULL, &log);
	assert_null(jitk__cache_root(c->cache));
	jitk_compiler_free(c);
	unsetenv("JITK_TEST_ASSUME_UID");
	c = t_compiler(f->specs, f->cache, NULL, &log);
	assert_non_null(jitk__cache_root(c->cache));
	jitk_compiler_free(c);
	mkdir(f->cache, 0700);
	setenv("JITK_TEST_ASSUME_UID", "4242", 1);
	log.warnings = 0;
	c = t_compiler(f->specs, f->cache, NULL, &log);
	assert_null(jitk__cache_root(c->cache));
	assert_non_null(strstr(log.last, "is owned by uid"));
	assert_non_null(strstr(log.last, "not by this user (uid 4242)"));
	jitk_compiler_free(c);
	unsetenv("JITK_TEST_ASSUME_UID");
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
	setenv("JITK_TEST_ASSUME_UID", "4242", 1);
	assert_int_equal(jitk__entry_read(&e, entry, 0, &why), -1);
	assert_string_equal(why, "owned by another user");
	unsetenv("JITK_TEST_ASSUME_UID");
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
	jitk_cache_summary s;
	char *entry = entry_of(c, f->cache);
	uint64_t removed;
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
	assert_int_equal(removed, 2);
	assert_int_equal(jitk__cache_scan(&s, f->cache, 1, NULL, NULL), 0);
	assert_int_equal(s.entries, 0);
	free(entry);
	jitk_compiler_free(c);
}

static void test_prune_lru(void **state)
{
	t_fixture *f = *state;
	jitk_compiler *c = t_compiler(f->specs, f->cache, NULL, NULL);
	char *old_tmp = t_path(f->cache, "v1/tmp/stale"), *young_tmp = t_path(f->cache, "v1/tmp/young");
	char *e90 = entry_of(c, f->cache);
	jitk_prune_result r;
	jitk_cache_summary s;
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
	assert_int_equal(jitk__cache_prune(&r, f->cache, s.bytes - 1, 3600), 0);
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
			int origin = -1;

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
		jitk_cache_summary s;

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
		cmocka_unit_test_setup_teardown(test_read_only_layer, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_environment, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_unusable_cache_dir, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_untrusted_dirs, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_hostile_entries, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_scan_verify_clear, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_prune_lru, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_threads_compile_once, t_setup, t_teardown),
		cmocka_unit_test_setup_teardown(test_processes_compile_once, t_setup, t_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
