/* test_packages.c - header packages (docs/spec-format.md "Header packages"):
 * the registry and includes in specs, package includes in templates, the
 * tree hash in the key (bytes, not paths), the trust rules of a tree and
 * its manifest. No GPU; the small kernels compile with NVRTC. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "compile/compile.h"

/* A spec set of four families over two packages, a and b, whose roots
 * are $T_PKG_A and $T_PKG_B: fa includes a, fb a and b, fc b, fd none. */
typedef struct {
	char *dir, *specs, *pkga, *pkgb;
} t_tree;

static const char registry[] =
	"packages:\n"
	"  pkga:\n"
	"    find:\n"
	"      - { env: T_PKG_A }\n"
	"    search: [., inc]\n"
	"  pkgb:\n"
	"    find:\n"
	"      - { env: T_PKG_B }\n";

static void family(const t_tree *t, const char *name, const char *includes,
		   const char *template_text)
{
	char *spec = jitk__asprintf("%s/%s.yaml", t->specs, name);
	char *tpl = jitk__asprintf("%s/%s.cuh", t->specs, name);

	t_writef(tpl, "%s\ntemplate <class P> __global__ void k(int *out, long long n)\n"
		 "{ if (threadIdx.x == 0) out[0] = VALUE + P::extra; }\n", template_text);
	t_writef(spec, "family: %s\ntemplate: %s.cuh\nkernel: k\n%s%s%sparams: {}\n"
		 "tuning:\n  - extra: 0\nargs:\n  out: { type: i32, shape: [n], io: out }\n"
		 "  n: { type: i64 }\nlaunch:\n  grid: 1\n  block: 32\nsymbols:\n  %s:\n"
		 "    params: {}\n", name, name, includes ? "includes: [" : "",
		 includes ? includes : "", includes ? "]\n" : "", name);
	free(spec);
	free(tpl);
}

static void tree_new(t_tree *t)
{
	t->dir = t_tmpdir();
	t->specs = t_path(t->dir, "specs");
	t->pkga = t_path(t->dir, "pkga");
	t->pkgb = t_path(t->dir, "pkgb");
	assert_int_equal(mkdir(t->specs, 0755), 0);
	assert_int_equal(mkdir(t->pkga, 0755), 0);
	assert_int_equal(mkdir(t->pkgb, 0755), 0);
	{
		char *p = t_path(t->pkga, "inc");

		assert_int_equal(mkdir(p, 0755), 0);
		free(p);
		p = t_path(t->pkga, "sub");
		assert_int_equal(mkdir(p, 0755), 0);
		free(p);
	}
	{
		char *a = t_path(t->pkga, "pa.h"), *ai = t_path(t->pkga, "inc/pi.h"),
		     *deep = t_path(t->pkga, "sub/deep.h"), *b = t_path(t->pkgb, "pb.h");

		t_writef(a, "#pragma once\n#define PA 1\n");
		t_writef(ai, "#pragma once\n#include \"../sub/deep.h\"\n#define PI 2\n");
		t_writef(deep, "#pragma once\n#define DEEP 3\n");
		/* a header including its sibling by a quoted name, which no
		 * search directory reaches: NVRTC finds it next to the header */
		{
			char *s1 = t_path(t->pkga, "sub/s1.h"), *s2 = t_path(t->pkga, "sub/s2.h");

			t_writef(s1, "#pragma once\n#include \"s2.h\"\n");
			t_writef(s2, "#pragma once\n#define S2 0\n");
			free(s1);
			free(s2);
		}
		t_writef(b, "#pragma once\n#define PB 4\n");
		free(a);
		free(ai);
		free(deep);
		free(b);
	}
	{
		char *r = t_path(t->specs, "packages.yaml");

		t_writef(r, "%s", registry);
		free(r);
	}
	family(t, "fa", "pkga", "#include <pa.h>\n#include <pi.h>\n#include <sub/s1.h>\n"
	       "#define VALUE (PA + PI + S2)");
	family(t, "fb", "pkga, pkgb", "#include <pa.h>\n#include <pb.h>\n#define VALUE (PA + PB)");
	family(t, "fc", "pkgb", "#include <pb.h>\n#define VALUE PB");
	family(t, "fd", NULL, "#define VALUE 5");
	setenv("T_PKG_A", t->pkga, 1);
	setenv("T_PKG_B", t->pkgb, 1);
}

static void tree_free(t_tree *t)
{
	t_rmtree(t->dir);
	free(t->dir);
	free(t->specs);
	free(t->pkga);
	free(t->pkgb);
	unsetenv("T_PKG_A");
	unsetenv("T_PKG_B");
}

static const char *const fams[] = { "fa", "fb", "fc", "fd" };

static void keys(const char *specs, const char *cache, uint8_t out[4][JITK_HASH_SIZE])
{
	jitk_compiler *c = t_compiler(specs, cache, NULL, NULL);
	size_t i;

	for (i = 0; i < 4; i++)
		t_key(c, fams[i], "sm_90", out[i]);
	jitk_compiler_free(c);
}

/* A status and message of loading specs (or of preparing name). */
static int load(const char *specs, const char *name, char *msg, size_t n)
{
	jitk_compiler_options o = JITK_COMPILER_OPTIONS_INIT;
	jitk_compiler *c = NULL;
	int rc;

	o.specs = specs;
	o.cache_dir = "";
	o.log_level = JITK_LOG_ERROR;
	rc = jitk_compiler_new(&c, &o);
	if (!rc && name) {
		jitk_tu tu;
		jitk_variant v;
		uint8_t key[JITK_HASH_SIZE];
		jitk_arch a = { 90, 's', 0 };
		size_t inst;

		assert_int_equal(jitk__spec_find(c->specs, name, &inst), 0);
		rc = jitk__prepare(&tu, key, &v, c, inst, a);
		if (!rc)
			jitk__tu_free(&tu);
	}
	snprintf(msg, n, "%s", rc ? jitk_error_last()->message : "");
	jitk_compiler_free(c);
	return rc;
}

static void want_in(const char *msg, const char *part)
{
	if (!strstr(msg, part))
		fprintf(stderr, "message: %s\nwanted:  %s\n", msg, part);
	assert_non_null(strstr(msg, part));
}

/* A spec names packages a registry defines, and says where it is wrong:
 * an unknown package (with the nearest name), a registry entry that could
 * look outside what it names. */
static void test_unknown_packages_are_spec_errors(void **state)
{
	static const struct {
		const char *registry; /* NULL: the good one */
		const char *includes;
		const char *want;
	} cases[] = {
		{ NULL, "pkga, pkgz", "fx.yaml:4:18: error: unknown header package 'pkgz' (did you "
				      "mean 'pkga'?)" },
		{ NULL, "other", "fx.yaml:4:12: error: unknown header package 'other' (it is in no "
				 "packages.yaml of the spec directories)" },
		{ NULL, "pkga, pkga", "fx.yaml:4:18: error: package 'pkga' listed twice" },
		{ "packages:\n  Cuda:\n    find: [{ env: X }]\n", "pkga",
		  "packages.yaml:2:3: error: package name 'Cuda' is not lower-case" },
		{ "packages:\n  p:\n    find: [{ path: rel/dir, configured: p }]\n", "pkga",
		  "packages.yaml:3:12: error: 'configured' stands alone" },
		{ "packages:\n  p:\n    find: [{ env: X, path: ../up }]\n", "pkga",
		  "packages.yaml:3:28: error: path '../up' below $X has a '..' component" },
		{ "packages:\n  p:\n    find: [{ configured: p, env: X }]\n", "pkga",
		  "packages.yaml:3:12: error: 'configured' stands alone" },
		{ "packages:\n  p:\n    find: [{ env: X }]\n    search: [inc/../..]\n", "pkga",
		  "packages.yaml:4:14: error: search directory 'inc/../..' has a '..' component" },
		{ "packages:\n  p:\n    find: [{ env: X }]\n    search: [/usr/include]\n", "pkga",
		  "packages.yaml:4:14: error: search directory '/usr/include' is absolute" },
		{ "packages:\n  p:\n    find: [{ env: X }]\n    serch: [.]\n", "pkga",
		  "packages.yaml:4:5: error: unknown key 'serch' (did you mean 'search'?)" },
	};
	size_t i;

	(void)state;
	for (i = 0; i < JITK_ARRAY_SIZE(cases); i++) {
		t_tree t;
		char msg[1024], *p;

		tree_new(&t);
		family(&t, "fx", cases[i].includes, "#define VALUE 1");
		if (cases[i].registry) {
			p = t_path(t.specs, "packages.yaml");
			t_writef(p, "%s", cases[i].registry);
			free(p);
			p = t_path(t.specs, "fa.yaml"); /* would name pkga */
			unlink(p);
			free(p);
			p = t_path(t.specs, "fb.yaml");
			unlink(p);
			free(p);
			p = t_path(t.specs, "fc.yaml");
			unlink(p);
			free(p);
		}
		assert_int_equal(load(t.specs, NULL, msg, sizeof(msg)), JITK_ESPEC);
		want_in(msg, cases[i].want);
		tree_free(&t);
	}
}

/* #include <...> in a family with packages: moved to the top of the
 * translation unit, so refused where that would change its meaning, and
 * refused when its name could leave the package roots or names a header
 * none of them has - each at the include's file:line:col. */
static void test_package_include_rules(void **state)
{
	static const struct {
		const char *text;
		int at_prepare; /* found when the packages are looked at */
		const char *want;
	} cases[] = {
		{ "#if 1\n#include <pa.h>\n#endif\n#define VALUE 1", 0,
		  "fx.cuh:2:10: error: #include <pa.h> inside #if" },
		{ "#define X 1\n#include <pa.h>\n#define VALUE 1", 0,
		  "fx.cuh:2:10: error: #include <pa.h> after the #define or #undef at fx.cuh:1" },
		{ "#include <../pkgb/pb.h>\n#define VALUE 1", 0,
		  "fx.cuh:1:10: error: #include <../pkgb/pb.h>: a '..' component" },
		{ "#include </etc/hostname>\n#define VALUE 1", 0,
		  "fx.cuh:1:10: error: #include </etc/hostname>: an absolute path" },
		{ "#include <pa.h> // fine\n#include <pa.h\n#define VALUE 1", 0,
		  "fx.cuh:2:10: error: missing '>' after the #include file name" },
		{ "/* c */ #include <pa.h>\n#define VALUE 1", 0,
		  "fx.cuh:1:9: error: write the include as #include <pa.h> alone on one line" },
		{ "#include <pb.h>\n#define VALUE 1", 1,
		  "fx.cuh:1:10: error: #include <pb.h>: no such header in the family's packages: pkga (" },
		{ "#include <sub/deep.h>\n#include <pi.h>\n#define VALUE DEEP", 1, NULL },
	};
	size_t i;

	(void)state;
	for (i = 0; i < JITK_ARRAY_SIZE(cases); i++) {
		t_tree t;
		char msg[1024];
		int rc;

		tree_new(&t);
		family(&t, "fx", "pkga", cases[i].text);
		rc = load(t.specs, cases[i].at_prepare ? "fx" : NULL, msg, sizeof(msg));
		if (!cases[i].want) {
			if (rc)
				fprintf(stderr, "case %zu: %s\n", i, msg);
			assert_int_equal(rc, 0);
		} else {
			assert_int_equal(rc, JITK_ESPEC);
			want_in(msg, cases[i].want);
		}
		tree_free(&t);
	}
}

/* Edit (from -> to) or make (from NULL) a file of a package, then the
 * keys again into after: moved[i] says which of the four must change. */
static void edit_and_compare(const t_tree *t, const char *root, const char *file,
			     const char *from, const char *to, uint8_t before[4][JITK_HASH_SIZE],
			     uint8_t after[4][JITK_HASH_SIZE], const int moved[4])
{
	char *p = t_path(root, file);
	size_t i;

	if (from)
		t_edit(p, from, to);
	else
		t_writef(p, "%s", "");
	free(p);
	keys(t->specs, NULL, after);
	for (i = 0; i < 4; i++)
		if (moved[i])
			assert_memory_not_equal(before[i], after[i], JITK_HASH_SIZE);
		else
			assert_memory_equal(before[i], after[i], JITK_HASH_SIZE);
}

/* One byte changed anywhere under a root - in a header no kernel
 * includes, too (its __has_include answer could depend on it) - changes
 * the key of every instance whose family includes that package, and of no
 * other. A new file does too. */
static void test_one_byte_changes_its_users_keys(void **state)
{
	uint8_t k0[4][JITK_HASH_SIZE], k1[4][JITK_HASH_SIZE], k2[4][JITK_HASH_SIZE],
		k3[4][JITK_HASH_SIZE];
	t_tree t;

	(void)state;
	tree_new(&t);
	keys(t.specs, NULL, k0);
	/* pkgb: fb and fc */
	edit_and_compare(&t, t.pkgb, "pb.h", "PB 4", "PB 5", k0, k1, (const int[4]){ 0, 1, 1, 0 });
	/* a header of pkga nothing includes: fa and fb */
	edit_and_compare(&t, t.pkga, "sub/deep.h", "DEEP 3", "DEEP 7", k1, k2,
			 (const int[4]){ 1, 1, 0, 0 });
	/* a new, empty file in pkgb */
	edit_and_compare(&t, t.pkgb, "new.h", NULL, NULL, k2, k3, (const int[4]){ 0, 1, 1, 0 });
	tree_free(&t);
}

/* The same headers at another path give the same key: the location of a
 * package never enters it (and two installs share cache entries). */
static void test_same_headers_elsewhere_same_key(void **state)
{
	uint8_t k0[4][JITK_HASH_SIZE], k1[4][JITK_HASH_SIZE];
	char cmd[4096], *copy_a, *copy_b;
	t_tree t;
	size_t i;

	(void)state;
	tree_new(&t);
	keys(t.specs, NULL, k0);
	copy_a = t_path(t.dir, "elsewhere/a");
	copy_b = t_path(t.dir, "elsewhere/b");
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s/elsewhere' && cp -rp '%s' '%s' && cp -rp '%s' '%s'",
		 t.dir, t.pkga, copy_a, t.pkgb, copy_b);
	assert_int_equal(system(cmd), 0);
	setenv("T_PKG_A", copy_a, 1);
	setenv("T_PKG_B", copy_b, 1);
	keys(t.specs, NULL, k1);
	for (i = 0; i < 4; i++)
		assert_memory_equal(k0[i], k1[i], JITK_HASH_SIZE);
	/* a path without env is relative to packages.yaml */
	{
		char *reg = t_path(t.specs, "packages.yaml");

		t_edit(reg, "      - { env: T_PKG_A }\n", "      - { path: ../elsewhere/a }\n");
		unsetenv("T_PKG_A");
		keys(t.specs, NULL, k1);
		assert_memory_equal(k0[0], k1[0], JITK_HASH_SIZE);
		t_edit(reg, "      - { path: ../elsewhere/a }\n", "      - { env: T_PKG_A }\n");
		free(reg);
	}
	/* and $JITK_PACKAGE_PKGA wins over the registry's places */
	setenv("JITK_PACKAGE_PKGA", t.pkga, 1);
	setenv("T_PKG_A", "/nonexistent", 1);
	keys(t.specs, NULL, k1);
	assert_memory_equal(k0[0], k1[0], JITK_HASH_SIZE);
	unsetenv("JITK_PACKAGE_PKGA");
	free(copy_a);
	free(copy_b);
	tree_free(&t);
}

/* A header edited while a process runs: the compile that follows walks the
 * trees again, so the image goes under the key of what it was compiled
 * from - never under the key taken before the edit. */
static void test_edit_in_a_running_process(void **state)
{
	uint8_t before[JITK_HASH_SIZE], after[JITK_HASH_SIZE];
	char *cache, *p, *path;
	jitk_compiler *c;
	t_tree t;
	int origin = -1;

	(void)state;
	tree_new(&t);
	cache = t_path(t.dir, "cache");
	c = t_compiler(t.specs, cache, NULL, NULL);
	t_key(c, "fa", "sm_90", before);
	p = t_path(t.pkga, "pa.h");
	t_edit(p, "PA 1", "PA 9");
	free(p);
	assert_int_equal(t_build(c, "fa", "sm_90", &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_COMPILED);
	t_key(c, "fa", "sm_90", after);
	assert_memory_not_equal(before, after, JITK_HASH_SIZE);
	path = t_entry_path(cache, before);
	assert_int_not_equal(access(path, F_OK), 0);
	free(path);
	path = t_entry_path(cache, after);
	assert_int_equal(access(path, F_OK), 0);
	free(path);
	jitk_compiler_free(c);
	free(cache);
	tree_free(&t);
}

static int sigalrm_seen;

static void on_alarm(int sig)
{
	(void)sig;
	sigalrm_seen = 1;
}

/* What a read of a FIFO would hang in runs under alarm: the test fails
 * instead (sigalrm_seen), and the old handler comes back after. */
static void alarm_begin(struct sigaction *old, unsigned seconds)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sigaction(SIGALRM, &sa, old);
	sigalrm_seen = 0;
	alarm(seconds);
}

static void alarm_end(const struct sigaction *old)
{
	alarm(0);
	sigaction(SIGALRM, old, NULL);
	assert_int_equal(sigalrm_seen, 0);
}

/* What a tree may not hold: a symbolic link, a FIFO (never opened: the
 * test would hang), a file others or the group can write, a directory
 * the group can write, a file another user owns (as root, who can give
 * one away), a name with a control character. Each is refused naming the
 * package and the path; nothing is compiled. */
static void test_hostile_trees_refused(void **state)
{
	static const struct {
		const char *what, *want;
	} cases[] = {
		{ "symlink", "is a symbolic link" },
		{ "fifo", "is a FIFO, not a file or directory" },
		{ "world", "is writable by others" },
		{ "groupdir", "is writable by its group" },
		{ "owner", "is owned by uid 12345, neither this user" },
		{ "name", "holds a name with a control character" },
	};
	struct sigaction old;
	size_t i;

	(void)state;
	for (i = 0; i < JITK_ARRAY_SIZE(cases); i++) {
		char msg[1024], *p = NULL;
		t_tree t;
		int rc;

		tree_new(&t);
		if (!strcmp(cases[i].what, "symlink")) {
			p = t_path(t.pkga, "sub/link.h");
			assert_int_equal(symlink("../pa.h", p), 0);
		} else if (!strcmp(cases[i].what, "fifo")) {
			p = t_path(t.pkga, "sub/fifo.h");
			assert_int_equal(mkfifo(p, 0644), 0);
		} else if (!strcmp(cases[i].what, "world")) {
			p = t_path(t.pkga, "pa.h");
			assert_int_equal(chmod(p, 0646), 0);
		} else if (!strcmp(cases[i].what, "groupdir")) {
			p = t_path(t.pkga, "sub");
			assert_int_equal(chmod(p, 0775), 0);
		} else if (!strcmp(cases[i].what, "owner")) {
			p = t_path(t.pkga, "sub/deep.h");
			if (geteuid() != 0 || chown(p, 12345, 12345)) {
				fprintf(stderr, "(skipping the other-owner case: needs root to chown)\n");
				free(p);
				tree_free(&t);
				continue;
			}
		} else {
			p = t_path(t.pkga, "sub/bad\033name.h");
			t_writef(p, "x");
		}
		alarm_begin(&old, 20);
		rc = load(t.specs, "fa", msg, sizeof(msg));
		alarm_end(&old);
		assert_int_equal(rc, JITK_EIO);
		want_in(msg, "header package pkga: ");
		want_in(msg, cases[i].want);
		/* the families without pkga are untouched */
		assert_int_equal(load(t.specs, "fc", msg, sizeof(msg)), 0);
		free(p);
		tree_free(&t);
	}
}

/* A header outside every root is never read, however it is named: by the
 * template (absolute, or "..") or by a header inside a package that
 * reaches out with more ".." than it is deep, or an absolute name. The
 * header is a FIFO: reading it would hang the test (under alarm). */
static void test_header_outside_never_read(void **state)
{
	static const struct {
		const char *file, *text, *tpl; /* a header put in pkga, or NULL */
		int status;
		const char *want;
	} cases[] = {
		{ NULL, NULL, "#include </OUT/fifo.h>\n#define VALUE 1", JITK_ESPEC,
		  "an absolute path" },
		{ NULL, NULL, "#include <../out/fifo.h>\n#define VALUE 1", JITK_ESPEC,
		  "a '..' component" },
		{ "sub/esc.h", "#pragma once\n#include \"../../out/fifo.h\"\n", NULL, JITK_EIO,
		  "sub/esc.h: line 2 includes a file outside the package's root" },
		{ "esc.h", "#pragma once\n  #  include </OUT/fifo.h>\n", NULL, JITK_EIO,
		  "esc.h: line 2 includes a file outside the package's root" },
		{ "inc/esc.h", "#include_next <../out/fifo.h>\n", NULL, JITK_EIO,
		  "inc/esc.h: line 1 includes a file outside" },
		/* within the tree: fine */
		{ "sub/ok.h", "#include \"../pa.h\"\n#include <sub/deep.h>\n", NULL, 0, NULL },
	};
	struct sigaction old;
	size_t i;

	(void)state;
	for (i = 0; i < JITK_ARRAY_SIZE(cases); i++) {
		char msg[1024], *out, *fifo, text[512];
		t_tree t;
		int rc;

		tree_new(&t);
		out = t_path(t.dir, "out");
		fifo = t_path(out, "fifo.h");
		assert_int_equal(mkdir(out, 0755), 0);
		assert_int_equal(mkfifo(fifo, 0644), 0);
		if (cases[i].file) {
			char *p = t_path(t.pkga, cases[i].file);
			const char *at = strstr(cases[i].text, "/OUT/");

			if (at)
				snprintf(text, sizeof(text), "%.*s%s%s", (int)(at - cases[i].text),
					 cases[i].text, out, at + 4);
			else
				snprintf(text, sizeof(text), "%s", cases[i].text);
			t_writef(p, "%s", text);
			free(p);
		}
		if (cases[i].tpl) {
			const char *at = strstr(cases[i].tpl, "/OUT/");

			if (at)
				snprintf(text, sizeof(text), "%.*s%s%s", (int)(at - cases[i].tpl),
					 cases[i].tpl, out, at + 4);
			else
				snprintf(text, sizeof(text), "%s", cases[i].tpl);
			family(&t, "fx", "pkga", text);
		}
		alarm_begin(&old, 20);
		rc = load(t.specs, "fa", msg, sizeof(msg));
		if (!rc && cases[i].tpl)
			rc = load(t.specs, "fx", msg, sizeof(msg));
		alarm_end(&old);
		if (rc != cases[i].status)
			fprintf(stderr, "case %zu: %s\n", i, msg);
		assert_int_equal(rc, cases[i].status);
		if (cases[i].want)
			want_in(msg, cases[i].want);
		free(out);
		free(fifo);
		tree_free(&t);
	}
}

/* Without --no-source-include (which would keep NVRTC from finding a
 * header's quoted siblings), NVRTC adds the main file's directory - the
 * working directory - for the main file's quoted includes only: a
 * package header's quoted include of a name that is only in the working
 * directory (a FIFO: the test would hang if it were opened) is not found
 * there, and the compile fails instead. */
static void test_working_directory_never_searched(void **state)
{
	struct sigaction old;
	char *cwd = getcwd(NULL, 0), *here, *fifo, *p, *cache;
	jitk_compiler *c;
	t_tree t;
	int rc;

	(void)state;
	tree_new(&t);
	here = t_path(t.dir, "cwd");
	fifo = t_path(here, "only_here.h");
	assert_int_equal(mkdir(here, 0755), 0);
	assert_int_equal(mkfifo(fifo, 0644), 0);
	p = t_path(t.pkga, "sub/cw.h");
	t_writef(p, "#pragma once\n#include \"only_here.h\"\n");
	free(p);
	family(&t, "fx", "pkga", "#include <sub/cw.h>\n#define VALUE 1");
	cache = t_path(t.dir, "cache");
	c = t_compiler(t.specs, cache, NULL, NULL);
	assert_int_equal(chdir(here), 0);
	alarm_begin(&old, 60);
	rc = t_build(c, "fx", "sm_90", NULL);
	alarm(0);
	assert_int_equal(chdir(cwd), 0);
	alarm_end(&old);
	assert_int_equal(rc, JITK_ECOMPILE);
	assert_non_null(strstr(jitk_error_last()->message, "cannot open source file \"only_here.h\""));
	jitk_compiler_free(c);
	free(cache);
	free(here);
	free(fifo);
	free(cwd);
	tree_free(&t);
}

/* A warm process reads no header: the manifest in the cache keeps each
 * file's digest with its stat. A file whose stat changed is read again,
 * a damaged manifest is made again, and without a cache every process
 * reads the tree. Files are only remembered once their times are older
 * than JITK_PKG_RACY_NS, so the test waits that long once. */
static void test_manifest_spares_reads(void **state)
{
	const jitk_package *p;
	jitk_compiler *c;
	char *cache, *f, *dir, cmd[4096];
	struct timespec ts = { JITK_PKG_RACY_NS / 1000000000ll, 100000000 };
	t_tree t;

	(void)state;
	tree_new(&t);
	cache = t_path(t.dir, "cache");
	nanosleep(&ts, NULL);
	c = t_compiler(t.specs, cache, NULL, NULL);
	assert_int_equal(jitk__package_get(c->packages, 0, &p), 0);
	assert_int_equal(p->files, 5);
	assert_int_equal(p->hashed, 5); /* cold */
	jitk_compiler_free(c);
	c = t_compiler(t.specs, cache, NULL, NULL);
	assert_int_equal(jitk__package_get(c->packages, 0, &p), 0);
	assert_int_equal(p->hashed, 0); /* warm: every digest from the manifest */
	jitk_compiler_free(c);
	/* a changed stat (same size: one byte) is read again */
	f = t_path(t.pkga, "sub/deep.h");
	t_edit(f, "DEEP 3", "DEEP 8");
	c = t_compiler(t.specs, cache, NULL, NULL);
	assert_int_equal(jitk__package_get(c->packages, 0, &p), 0);
	assert_int_equal(p->hashed, 1);
	jitk_compiler_free(c);
	/* a damaged manifest: read everything, no error, made again */
	dir = t_path(cache, "v1/packages");
	snprintf(cmd, sizeof(cmd), "for m in '%s'/*.pkg; do printf X | dd of=\"$m\" bs=1 seek=200 "
		 "conv=notrunc 2>/dev/null; done", dir);
	assert_int_equal(system(cmd), 0);
	c = t_compiler(t.specs, cache, NULL, NULL);
	assert_int_equal(jitk__package_get(c->packages, 0, &p), 0);
	assert_int_equal(p->hashed, 5);
	jitk_compiler_free(c);
	/* jitk cache clear removes manifests; prune and verify leave them */
	{
		jitk_clear_result r = JITK_CLEAR_RESULT_INIT;

		assert_int_equal(t_count_files(dir, ".pkg"), 1);
		assert_int_equal(jitk__cache_clear(&r, cache), 0);
		assert_int_equal(r.foreign, 0);
		assert_int_equal(t_count_files(dir, ".pkg"), 0);
	}
	/* in memory: every process reads */
	c = t_compiler(t.specs, NULL, NULL, NULL);
	assert_int_equal(jitk__package_get(c->packages, 0, &p), 0);
	assert_int_equal(p->hashed, 5);
	jitk_compiler_free(c);
	free(dir);
	free(f);
	free(cache);
	tree_free(&t);
}

/* The warm check is a stat of each file and directory the manifest lists
 * (no listing, no read), trusted only when the manifest has the whole
 * tree clean. Each kind of change is made to its own copy of pkga (one
 * wait for the racy window in all): every one is seen - the tree walked
 * again, and the hash what a walk without any manifest gives. */
static void change_in_place(const char *root)
{
	/* the same size, the same inode: only the file's own times move */
	char *p = t_path(root, "sub/deep.h");
	int fd = open(p, O_WRONLY);

	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, "9", 1, 26), 1); /* "#define DEEP 3": the digit */
	close(fd);
	free(p);
}

static void change_add(const char *root)
{
	char *p = t_path(root, "sub/new.h");

	t_writef(p, "%s", "");
	free(p);
}

static void change_remove(const char *root)
{
	char *p = t_path(root, "sub/s2.h");

	assert_int_equal(unlink(p), 0);
	free(p);
}

static void change_rename(const char *root)
{
	char *a = t_path(root, "pa.h"), *b = t_path(root, "pz.h");

	assert_int_equal(rename(a, b), 0);
	free(a);
	free(b);
}

static void change_new_dir(const char *root)
{
	char *p = t_path(root, "inc/more");

	assert_int_equal(mkdir(p, 0755), 0);
	free(p);
}

static void change_mode(const char *root)
{
	char *p = t_path(root, "inc/pi.h");

	assert_int_equal(chmod(p, 0664), 0);
	free(p);
}

static void test_stat_check_sees_every_change(void **state)
{
	static void (*const change[])(const char *) = { change_in_place, change_add, change_remove,
							 change_rename, change_new_dir, change_mode };
	enum { N = sizeof(change) / sizeof(change[0]) };
	struct timespec ts = { JITK_PKG_RACY_NS / 1000000000ll, 100000000 };
	char *root[N], *cache, cmd[4096];
	const jitk_package *p;
	jitk_compiler *c;
	t_tree t;
	size_t i;

	(void)state;
	tree_new(&t);
	cache = t_path(t.dir, "cache");
	for (i = 0; i < N; i++) {
		char name[32];

		snprintf(name, sizeof(name), "copy%zu", i);
		root[i] = t_path(t.dir, name);
		snprintf(cmd, sizeof(cmd), "cp -rp '%s' '%s'", t.pkga, root[i]);
		assert_int_equal(system(cmd), 0);
	}
	nanosleep(&ts, NULL);
	for (i = 0; i < N; i++) {
		uint8_t before[JITK_HASH_SIZE], walked[JITK_HASH_SIZE];
		int rc;

		setenv("T_PKG_A", root[i], 1);
		/* cold: walked, the manifest made whole */
		c = t_compiler(t.specs, cache, NULL, NULL);
		assert_int_equal(jitk__package_get(c->packages, 0, &p), 0);
		assert_int_equal(p->checked, 0);
		memcpy(before, p->hash, JITK_HASH_SIZE);
		jitk_compiler_free(c);
		/* warm: the stat check, the same hash */
		c = t_compiler(t.specs, cache, NULL, NULL);
		assert_int_equal(jitk__package_get(c->packages, 0, &p), 0);
		assert_int_equal(p->checked, 1);
		assert_int_equal(p->hashed, 0);
		assert_int_equal(p->files, 5);
		assert_memory_equal(p->hash, before, JITK_HASH_SIZE);
		jitk_compiler_free(c);
		change[i](root[i]);
		c = t_compiler(t.specs, cache, NULL, NULL);
		rc = jitk__package_get(c->packages, 0, &p);
		if (change[i] == change_mode) {
			/* a file writable by its group: refused, not trusted */
			assert_int_equal(rc, JITK_EIO);
			want_in(jitk_error_last()->message, "writable by its group");
			jitk_compiler_free(c);
			continue;
		}
		assert_int_equal(rc, 0);
		assert_int_equal(p->checked, 0);
		assert_memory_not_equal(p->hash, before, JITK_HASH_SIZE);
		assert_int_equal(jitk__package_tree_hash(walked, root[i], NULL), 0);
		assert_memory_equal(p->hash, walked, JITK_HASH_SIZE);
		jitk_compiler_free(c);
	}
	for (i = 0; i < N; i++)
		free(root[i]);
	free(cache);
	tree_free(&t);
}

/* The repository's packages, where they are installed: their cold and
 * warm tree hash (the numbers docs/performance.md quotes), and that both
 * pass the tree rules. Skips a package that is not installed. */
static void test_real_packages(void **state)
{
	char *specs = t_path(t_root(), "specs"), *dir = t_tmpdir(), *cache = t_path(dir, "cache");
	jitk_compiler *c;
	size_t i, k;

	(void)state;
	c = t_compiler(specs, cache, NULL, NULL);
	for (i = 0; i < c->specs->npackages; i++) {
		const jitk_package *p;
		double cold, warm = 1e9;

		if (jitk__package_get(c->packages, i, &p)) {
			fprintf(stderr, "(package %s skipped: %s)\n", c->specs->packages[i].name,
				jitk_error_last()->message);
			continue;
		}
		cold = p->ms;
		for (k = 0; k < 3; k++) {
			int changed;
			spec_family f = { 0 };
			spec_include inc = { (char *)"", i, { "", 0, 0 } };

			f.includes = &inc;
			f.nincludes = 1;
			assert_int_equal(jitk__packages_recheck(c->packages, &f, &changed), 0);
			assert_int_equal(changed, 0);
			if (p->ms < warm)
				warm = p->ms;
		}
		fprintf(stderr, "package %s: %zu files, %.1f MB: tree hash cold %.1f ms, warm (stat "
			"only) %.2f ms (%.2f us per file)\n", p->spec->name, p->files,
			(double)p->bytes / 1e6, cold, warm, warm * 1000.0 / (double)p->files);
	}
	jitk_compiler_free(c);
	t_rmtree(dir);
	free(dir);
	free(cache);
	free(specs);
}

/* DIR/specs with the repository's packages.yaml and family h on the cuda
 * package (instances h[v=0..3]); NULL, saying so, where the cuda package
 * or NVRTC's PCH is not here. */
static char *pch_family(const char *dir)
{
	char *specs = t_path(dir, "specs"), *spec, *tpl, *probe = t_path(t_root(), "specs"), *src, *text;
	jitk_compiler *c = t_compiler(probe, NULL, NULL, NULL);
	const jitk_package *p;
	int found = 0;
	size_t i, n;

	for (i = 0; i < c->specs->npackages; i++)
		if (!strcmp(c->specs->packages[i].name, "cuda"))
			found = !jitk__package_get(c->packages, i, &p);
	jitk_compiler_free(c);
	free(probe);
	if (!found || !jitk__nvrtc_pch_available()) {
		fprintf(stderr, "(skipped: no cuda package or no NVRTC PCH here)\n");
		free(specs);
		return NULL;
	}
	assert_int_equal(mkdir(specs, 0755), 0);
	src = t_path(t_root(), "specs/packages.yaml");
	text = t_read(src, &n);
	free(src);
	src = t_path(specs, "packages.yaml");
	t_write(src, text, n);
	free(text);
	free(src);
	spec = t_path(specs, "h.yaml");
	tpl = t_path(specs, "h.cuh");
	t_writef(tpl, "#include <cuda/std/cstdint>\n#include <cuda_fp16.h>\n"
		 "template <class P> __global__ void h(int *out, long long n)\n"
		 "{ if (threadIdx.x == 0) out[0] = (cuda::std::int32_t)__half2float(__float2half(1.5f)) + P::v; }\n");
	t_writef(spec, "family: h\ntemplate: h.cuh\nkernel: h\nincludes: [cuda]\n"
		 "params:\n  v: { type: int, min: 0, max: 9 }\nargs:\n"
		 "  out: { type: i32, shape: [n], io: out }\n  n: { type: i64 }\n"
		 "launch:\n  grid: 1\n  block: 32\nsymbols:\n  h:\n    params: { v: [0, 1, 2, 3] }\n");
	free(spec);
	free(tpl);
	return specs;
}

/* h[v=V] compiled now for sm_90 into *b. */
static void pch_compile(jitk_compiler *c, size_t v, jitk_build *b)
{
	jitk_arch a = { 90, 's', 0 };
	char name[32];
	size_t inst;

	snprintf(name, sizeof(name), "h[v=%zu]", v);
	assert_int_equal(jitk__spec_find(c->specs, name, &inst), 0);
	assert_int_equal(jitk__build(b, c, inst, a, 0), 0);
	assert_int_equal(b->origin, JITK_ORIGIN_COMPILED);
}

/* The repository's cuda package with a family of three instances: the
 * images compiled with NVRTC's precompiled header (made by the first,
 * used by the next two) are the bytes of those compiled without; the PCH
 * files are in the cache's v1/pch/ while the compiler lives, gone after,
 * and NVRTC wrote none into /tmp. */
static void test_pch_same_bytes(void **state)
{
	char *dir = t_tmpdir(), *specs, *cache[2] = { NULL, NULL }, *pchdir, tmpl[96];
	void *image[3];
	size_t size[3], i;
	int run;

	(void)state;
	if (!(specs = pch_family(dir))) {
		t_rmtree(dir);
		free(dir);
		return;
	}
	for (run = 0; run < 2; run++) {
		jitk_compiler *c;

		cache[run] = t_path(dir, run ? "cache-nopch" : "cache-pch");
		setenv("JITK_PCH", run ? "0" : "1", 1);
		c = t_compiler(specs, cache[run], NULL, NULL);
		for (i = 0; i < 3; i++) {
			jitk_build b;

			pch_compile(c, i, &b);
			if (!run) {
				image[i] = malloc(b.entry.size);
				memcpy(image[i], b.entry.image, b.entry.size);
				size[i] = b.entry.size;
			} else {
				assert_int_equal(size[i], b.entry.size);
				assert_memory_equal(image[i], b.entry.image, size[i]);
			}
			jitk__build_free(&b);
		}
		pchdir = t_path(cache[run], "v1/pch");
		if (!run)
			assert_true(t_count_files(pchdir, ".pch") >= 1);
		jitk_compiler_free(c);
		assert_int_equal(t_count_files(pchdir, ".pch"), 0);
		free(pchdir);
	}
	unsetenv("JITK_PCH");
	snprintf(tmpl, sizeof(tmpl), "/tmp/__nvrtc_auto_pch_%ld_0", (long)getpid());
	assert_int_not_equal(access(tmpl, F_OK), 0);
	for (i = 0; i < 3; i++)
		free(image[i]);
	free(cache[0]);
	free(cache[1]);
	free(specs);
	t_rmtree(dir);
	free(dir);
}

/* By default a family's PCH stays while it pays: here the headers are
 * most of the compile (a compile with the PCH takes 0.1-0.2x the CPU time
 * of one without, against the 0.8 that turns it off), so after the first
 * compile (the yardstick, without), the second (makes it) and two that
 * use it, the family still has it, and the yardstick is recorded. */
static void test_pch_kept_where_it_pays(void **state)
{
	char *dir = t_tmpdir(), *specs, *cache;
	jitk_compiler *c;
	size_t i, fi;

	(void)state;
	if (!(specs = pch_family(dir))) {
		t_rmtree(dir);
		free(dir);
		return;
	}
	unsetenv("JITK_PCH");
	cache = t_path(dir, "cache");
	c = t_compiler(specs, cache, NULL, NULL);
	assert_int_equal(c->pch_mode, -1);
	for (i = 0; i < 4; i++) {
		jitk_build b;

		pch_compile(c, i, &b);
		jitk__build_free(&b);
	}
	for (fi = 0; fi < c->specs->nfams && strcmp(c->specs->fams[fi]->name, "h"); fi++)
		;
	assert_true(fi < c->specs->nfams);
	assert_int_equal(atomic_load(&c->fam_pch[fi].compiles), 4);
	assert_true(atomic_load(&c->fam_pch[fi].plain_us) > 0);
	assert_int_equal(atomic_load(&c->fam_pch[fi].off), 0);
	jitk_compiler_free(c);
	free(cache);
	free(specs);
	t_rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unknown_packages_are_spec_errors),
		cmocka_unit_test(test_package_include_rules),
		cmocka_unit_test(test_one_byte_changes_its_users_keys),
		cmocka_unit_test(test_same_headers_elsewhere_same_key),
		cmocka_unit_test(test_edit_in_a_running_process),
		cmocka_unit_test(test_hostile_trees_refused),
		cmocka_unit_test(test_header_outside_never_read),
		cmocka_unit_test(test_working_directory_never_searched),
		cmocka_unit_test(test_manifest_spares_reads),
		cmocka_unit_test(test_stat_check_sees_every_change),
		cmocka_unit_test(test_real_packages),
		cmocka_unit_test(test_pch_same_bytes),
		cmocka_unit_test(test_pch_kept_where_it_pays),
	};

	return T_RUN_TESTS(tests, NULL, NULL);
}
