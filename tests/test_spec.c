/* test_spec.c - the spec loader: every bad case names file:line:col and
 * the exact message; hostile inputs fail fast; good specs load. */
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "spec/expr.h"
#include "base/internal.h"
#include "compile/instance.h"
#include "spec/spec.h"

static int load_one(const char *path, spec_set **out)
{
	const char *files[1] = { path };

	return jitk__spec_set_load_files(out, files, 1);
}

/* Characters (not bytes) of s before position p. */
static size_t chars_before(const char *s, const char *p)
{
	size_t n = 0;

	for (; s < p; s++)
		n += ((unsigned char)*s & 0xc0) != 0x80;
	return n;
}

/* The character at 1-based character column col of s's line. */
static const char *char_at(const char *s, int col)
{
	for (; *s && *s != '\n'; s++)
		if (((unsigned char)*s & 0xc0) != 0x80 && --col == 0)
			return s;
	return s;
}

/* The message is one printable line, and the detail quotes line `line` of
 * text with its caret under the character at col (long lines are cut
 * around it, with "..."). */
static void check_message_and_caret(const char *text, int line, int col)
{
	const jitk_error *e = jitk_error_last();
	const char *src = text, *quoted, *caret, *target;
	const unsigned char *m;
	char num[16];
	size_t at;
	int l;

	for (m = (const unsigned char *)e->message; *m; m++)
		assert_true(*m >= 0x20 && *m != 0x7f);
	for (l = 1; l < line; l++) {
		src = strchr(src, '\n');
		assert_non_null(src);
		src++;
	}
	target = char_at(src, col);
	snprintf(num, sizeof(num), "%5d | ", line);
	quoted = strstr(e->detail, num);
	assert_non_null(quoted);
	quoted += strlen(num);
	caret = strstr(quoted, "\n      | ");
	assert_non_null(caret);
	caret += strlen("\n      | ");
	assert_non_null(strchr(caret, '^'));
	at = chars_before(caret, strchr(caret, '^'));
	if (!*target || *target == '\n') {
		/* past the end of the line: the caret follows the text */
		assert_int_equal(at, chars_before(quoted, strchr(quoted, '\n')));
		return;
	}
	assert_memory_equal(char_at(quoted, (int)at + 1), target, 1);
}

/* The corpus: tests/specs/bad/NAME.yaml starts with "# expect: MSG";
 * loading it must fail with exactly "PATH:MSG". */
static void test_bad_corpus(void **state)
{
	char *dir = t_path(t_root(), "tests/specs/bad");
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0, nspec = 0;

	(void)state;
	assert_non_null(d);
	while ((e = readdir(d))) {
		char *path, *text, *nl, *want;
		spec_set *set = NULL;
		size_t len;
		int rc;

		if (!strstr(e->d_name, ".yaml"))
			continue;
		path = t_path(dir, e->d_name);
		text = t_read(path, &len);
		assert_true(!strncmp(text, "# expect: ", 10));
		nl = strchr(text, '\n');
		assert_non_null(nl);
		*nl = '\0';
		want = jitk__asprintf("%s:%s", path, text + 10);
		rc = load_one(path, &set);
		if (!strncmp(nl + 1, "# arch: ", 8)) {
			/* The spec loads; specializing it on that architecture
			 * fails (the first instance that fails, in order). */
			char arch[32];
			jitk_arch a;
			jitk_variant v;
			size_t i;

			assert_int_equal(rc, 0);
			assert_int_equal(sscanf(nl + 9, "%31s", arch), 1);
			assert_int_equal(jitk__arch_parse(&a, arch), 0);
			for (i = 0; i < set->ninsts && !rc; i++)
				rc = jitk__specialize(&v, set, i, a);
			if (rc != JITK_ESPEC || strcmp(jitk_error_last()->message, want))
				fprintf(stderr, "case %s\n  want: %s\n  got:  %s (%d)\n", e->d_name,
					want, jitk_error_last()->message, rc);
			assert_int_equal(rc, JITK_ESPEC);
			assert_string_equal(jitk_error_last()->message, want);
			jitk__spec_set_free(set);
			nspec++;
			goto next;
		}
		if (rc != JITK_ESPEC || strcmp(jitk_error_last()->message, want))
			fprintf(stderr, "case %s\n  want: %s\n  got:  %s (%d)\n", e->d_name, want,
				jitk_error_last()->message, rc);
		assert_int_equal(rc, JITK_ESPEC);
		assert_string_equal(jitk_error_last()->message, want);
		/* The offending line is quoted with a caret in the detail. */
		{
			int line = 0, col = 0;

			assert_int_equal(sscanf(text + 10, "%d:%d:", &line, &col), 2);
			*nl = '\n';
			check_message_and_caret(text, line, col);
		}
		assert_null(set);
next:
		free(want);
		free(text);
		free(path);
		n++;
	}
	closedir(d);
	free(dir);
	printf("  %d bad specs, %d of them fail at specialization\n", n, nspec);
	assert_true(n >= 101);
	assert_true(nspec >= 22);
}

static char *good_text(void)
{
	char *p = t_path(t_root(), "tests/specs/good/minimal.yaml");
	size_t len;
	char *text = t_read(p, &len);

	free(p);
	return text;
}

/* Write text as dir/NAME with the template path made absolute, load it,
 * expect JITK_ESPEC at line:col with msg (a prefix of the message after
 * "path:line:col: error: "). */
static void expect_error(const char *dir, const char *name, const void *text,
			 size_t len, int line, int col, const char *msg)
{
	char *path = t_path(dir, name), *want;
	spec_set *set = NULL;
	double t0 = jitk__now_ms();
	int rc;

	t_write(path, text, len);
	rc = load_one(path, &set);
	want = jitk__asprintf("%s:%d:%d: error: %s", path, line, col, msg);
	if (rc != JITK_ESPEC || strncmp(jitk_error_last()->message, want, strlen(want)))
		fprintf(stderr, "case %s\n  want: %s\n  got:  %s\n", name, want,
			jitk_error_last()->message);
	assert_int_equal(rc, JITK_ESPEC);
	assert_true(!strncmp(jitk_error_last()->message, want, strlen(want)));
	assert_null(set);
	printf("  %-22s rejected in %.2f ms\n", name, jitk__now_ms() - t0);
	free(want);
	free(path);
}

static char *absolute_template(const char *text)
{
	const char *rel = "../../../templates/";
	const char *p = strstr(text, rel);
	char *abs_root = realpath(t_root(), NULL), *out;

	assert_non_null(p);
	assert_non_null(abs_root);
	out = jitk__asprintf("%.*s%s/templates/%s", (int)(p - text), text, abs_root,
			     p + strlen(rel));
	free(abs_root);
	return out;
}

/* minimal.yaml with its template line replaced by "template: tpl". */
static char *with_template(const char *tpl)
{
	char *base = good_text(), *line = strstr(base, "template: "), *eol, *out;

	assert_non_null(line);
	eol = strchr(line, '\n');
	out = jitk__asprintf("%.*stemplate: %s%s", (int)(line - base), base, tpl, eol);
	free(base);
	return out;
}

/* Load path (a file, or a directory when dir is set): JITK_ESPEC with
 * exactly "PREFIX:WANT" where PREFIX is the path of the file, well under
 * the test's alarm. */
static void expect_load(const char *path, int dir, const char *file,
			const char *want)
{
	const char *one[1] = { path };
	spec_set *set = NULL;
	double t0 = jitk__now_ms();
	char *full = jitk__asprintf("%s:%s", file, want);
	int rc = dir ? jitk__spec_set_load_dirs(&set, one, 1)
		     : jitk__spec_set_load_files(&set, one, 1);

	if (rc != JITK_ESPEC || strcmp(jitk_error_last()->message, full))
		fprintf(stderr, "load %s\n  want: %s\n  got:  %s (%d)\n", path, full,
			jitk_error_last()->message, rc);
	assert_int_equal(rc, JITK_ESPEC);
	assert_string_equal(jitk_error_last()->message, full);
	assert_null(set);
	/* a hang or a blow-up, not a speed test: generous on a loaded machine */
	assert_true(jitk__now_ms() - t0 < 30000);
	free(full);
}

/* Issue 10 #6: a FIFO, a device or a directory where a spec, template or
 * included header should be is refused at once, naming the path and what
 * it is - jitk used to block forever in open() on a FIFO. alarm() turns a
 * hang into a failure. Symbolic links are followed (a spec tree may link
 * files in), but the target must be a regular file too. */
static void test_not_regular_files(void **state)
{
	char *dir = t_tmpdir(), *specs = t_path(dir, "specs"), *spec, *fifo, *text;
	char *link, *abs_base = good_text(), *abs = absolute_template(abs_base);
	char *tpl, *hdr, *inlined = NULL;
	spec_set *set = NULL;
	const char *one[1];

	(void)state;
	alarm(60);
	assert_int_equal(jitk__mkdirs(specs, 0755), 0);
	/* A FIFO among the spec files of a directory. */
	fifo = t_path(specs, "x.yaml");
	assert_int_equal(mkfifo(fifo, 0644), 0);
	expect_load(specs, 1, fifo, "1:1: error: cannot read the spec file: is a FIFO, not a regular file");
	/* ... and named as a file, and through a symbolic link. */
	expect_load(fifo, 0, fifo, "1:1: error: cannot read the spec file: is a FIFO, not a regular file");
	link = t_path(dir, "link.yaml");
	assert_int_equal(symlink(fifo, link), 0);
	expect_load(link, 0, link, "1:1: error: cannot read the spec file: is a FIFO, not a regular file");
	unlink(link);
	unlink(fifo);
	/* A directory named like a spec file. */
	assert_int_equal(mkdir(fifo, 0755), 0);
	expect_load(specs, 1, fifo, "1:1: error: cannot read the spec file: is a directory, not a regular file");
	rmdir(fifo);
	free(fifo);
	/* A symbolic link to a good spec is followed. */
	spec = t_path(dir, "good.yaml");
	t_write(spec, abs, strlen(abs));
	assert_int_equal(symlink(spec, link), 0);
	one[0] = link;
	assert_int_equal(jitk__spec_set_load_files(&set, one, 1), 0);
	assert_int_equal(set->ninsts, 1);
	jitk__spec_set_free(set);
	set = NULL;
	unlink(link);
	free(link);

	/* The template: a FIFO, a character device, a directory. */
	fifo = t_path(dir, "fifo.cuh");
	assert_int_equal(mkfifo(fifo, 0644), 0);
	text = with_template("fifo.cuh");
	t_write(spec, text, strlen(text));
	expect_load(spec, 0, spec, "2:11: error: template 'fifo.cuh' cannot be read: is a FIFO, not a regular file (at template)");
	free(text);
	text = with_template("/dev/zero");
	t_write(spec, text, strlen(text));
	expect_load(spec, 0, spec, "2:11: error: template '/dev/zero' cannot be read: is a character device, not a regular file (at template)");
	free(text);
	text = with_template(".");
	t_write(spec, text, strlen(text));
	expect_load(spec, 0, spec, "2:11: error: template '.' cannot be read: is a directory, not a regular file (at template)");
	free(text);

	/* An included header that is a FIFO, or a link to /dev/zero: the
	 * inliner fails at once, naming the header. */
	tpl = t_path(dir, "t.cuh");
	t_writef(tpl, "#pragma once\n#include \"fifo.cuh\"\n");
	assert_int_not_equal(jitk__inline_template(&inlined, tpl), 0);
	assert_null(inlined);
	assert_non_null(strstr(jitk_error_last()->message, fifo));
	assert_non_null(strstr(jitk_error_last()->message, "is a FIFO, not a regular file"));
	hdr = t_path(dir, "zero.cuh");
	assert_int_equal(symlink("/dev/zero", hdr), 0);
	t_writef(tpl, "#pragma once\n#include \"zero.cuh\"\n");
	assert_int_not_equal(jitk__inline_template(&inlined, tpl), 0);
	assert_non_null(strstr(jitk_error_last()->message, "is a character device, not a regular file"));
	alarm(0);
	free(hdr);
	free(tpl);
	free(fifo);
	free(spec);
	free(abs);
	free(abs_base);
	free(specs);
	t_rmtree(dir);
	free(dir);
}

static void test_hostile_inputs(void **state)
{
	char *dir = t_tmpdir(), *base = good_text(), *abs = absolute_template(base);
	jbuf b;
	size_t i;

	(void)state;
	/* A 200 KB nesting bomb stops at the depth limit, not in libyaml. */
	jitk__jbuf_init(&b);
	jitk__jbuf_puts(&b, "family: ");
	for (i = 0; i < 100000; i++)
		jitk__jbuf_puts(&b, "[");
	for (i = 0; i < 100000; i++)
		jitk__jbuf_puts(&b, "]");
	expect_error(dir, "nest.yaml", b.data, b.len, 1, 24, "nesting deeper than 16 levels");
	jitk__jbuf_free(&b);

	/* Mappings nest the same way. */
	jitk__jbuf_init(&b);
	for (i = 0; i < 40; i++)
		jitk__jbuf_printf(&b, "%*sk%zu:\n", (int)(2 * i), "", i);
	expect_error(dir, "nest_map.yaml", b.data, b.len, 17, 33, "nesting deeper than 16 levels");
	jitk__jbuf_free(&b);

	/* An alias bomb ("billion laughs") dies at its first anchor. */
	{
		const char *lol = "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a]\n"
				  "c: [*b, *b, *b, *b, *b, *b, *b]\n";
		expect_error(dir, "laughs.yaml", lol, strlen(lol), 1, 4,
			     "anchors and aliases are not allowed (anchor '&a')");
	}
	/* An alias cycle: the same. */
	{
		const char *cyc = "a: &a [*a]\n";
		expect_error(dir, "cycle.yaml", cyc, strlen(cyc), 1, 4,
			     "anchors and aliases are not allowed (anchor '&a')");
	}
	/* A 64 MB scalar is refused by size before parsing. */
	{
		size_t big = 64u << 20;
		char *s = malloc(big);

		assert_non_null(s);
		memcpy(s, "family: ", 8);
		memset(s + 8, 'a', big - 8);
		expect_error(dir, "big.yaml", s, big, 1, 1, "file is larger than the 1048576-byte limit");
		free(s);
	}
	/* A million keys: over the size limit; 5000 keys: over the key limit. */
	jitk__jbuf_init(&b);
	for (i = 0; i < 5000; i++)
		jitk__jbuf_printf(&b, "k%zu: 1\n", i);
	expect_error(dir, "keys.yaml", b.data, b.len, 4097, 1, "more than 4096 keys in one mapping");
	jitk__jbuf_free(&b);
	jitk__jbuf_init(&b);
	for (i = 0; i < 1000000; i++)
		jitk__jbuf_printf(&b, "k%zu: 1\n", i);
	expect_error(dir, "million.yaml", b.data, b.len, 1, 1, "file is larger than");
	jitk__jbuf_free(&b);

	/* NUL bytes, invalid UTF-8, UTF-16. */
	expect_error(dir, "nul.yaml", "family: t\0x\n", 12, 1, 10,
		     "invalid input: control characters are not allowed");
	expect_error(dir, "utf8.yaml", "family: t\xff\xfe\n", 12, 1, 10,
		     "invalid input: invalid leading UTF-8 octet");
	expect_error(dir, "utf16.yaml", "\xff\xfe" "f\0a\0", 6, 1, 1, "invalid input:");
	/* Empty files, and files with only comments. */
	expect_error(dir, "empty.yaml", "", 0, 1, 1, "empty file");
	expect_error(dir, "comments.yaml", "# nothing\n", 10, 1, 1, "empty file");
	/* Wrong top level. */
	expect_error(dir, "scalar.yaml", "hello\n", 6, 1, 1,
		     "expected a mapping at the top level, got a scalar");
	/* Unknown tags. */
	expect_error(dir, "tag.yaml", "family: !custom t\n", 18, 1, 9,
		     "tags are not allowed (tag '!custom')");
	/* Complex keys. */
	expect_error(dir, "complex.yaml", "? [a]\n: 1\n", 10, 1, 3, "mapping keys must be scalars");

	/* A byte-order mark and CRLF line ends are fine. */
	{
		char *p = t_path(dir, "bom.yaml");
		char *crlf = t_path(dir, "crlf.yaml");
		spec_set *set = NULL;
		jbuf c;

		jitk__jbuf_init(&b);
		jitk__jbuf_puts(&b, "\xef\xbb\xbf");
		jitk__jbuf_puts(&b, abs);
		t_write(p, b.data, b.len);
		assert_int_equal(load_one(p, &set), 0);
		jitk__spec_set_free(set);
		jitk__jbuf_free(&b);
		jitk__jbuf_init(&c);
		for (i = 0; abs[i]; i++)
			jitk__jbuf_puts(&c, abs[i] == '\n' ? "\r\n" : (char[]){ abs[i], 0 });
		t_write(crlf, c.data, c.len);
		set = NULL;
		assert_int_equal(load_one(crlf, &set), 0);
		assert_int_equal(set->ninsts, 1);
		jitk__spec_set_free(set);
		jitk__jbuf_free(&c);
		free(p);
		free(crlf);
	}
	free(abs);
	free(base);
	t_rmtree(dir);
	free(dir);
}

/* The same symbol in two files: both locations named. */
static void test_duplicate_symbol(void **state)
{
	char *dir = t_tmpdir(), *base = good_text(), *abs = absolute_template(base);
	char *a = t_path(dir, "a.yaml"), *b = t_path(dir, "b.yaml"), *other, *want;
	const char *files[2] = { a, b };
	spec_set *set = NULL;
	char *p;

	(void)state;
	t_write(a, abs, strlen(abs));
	other = jitk__strdup(abs);
	p = strstr(other, "family: t");
	assert_non_null(p);
	p[8] = 'u';
	t_write(b, other, strlen(other));
	assert_int_equal(jitk__spec_set_load_files(&set, files, 2), JITK_ESPEC);
	want = jitk__asprintf("%s:21:3: error: symbol 's' is already defined at %s:21:3 (at symbols)", b, a);
	assert_string_equal(jitk_error_last()->message, want);
	free(want);
	free(other);
	free(a);
	free(b);
	free(abs);
	free(base);
	t_rmtree(dir);
	free(dir);
}

static const char *const targets[] = { "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120" };

/* Every instance of set specializes without an error on every target
 * (gated off or available); returns how many are available. */
static int specialize_all(const spec_set *set)
{
	size_t i, a;
	int available = 0;

	for (i = 0; i < set->ninsts; i++)
		for (a = 0; a < sizeof(targets) / sizeof(targets[0]); a++) {
			jitk_variant v;
			jitk_arch arch;
			int rc;

			assert_int_equal(jitk__arch_parse(&arch, targets[a]), 0);
			rc = jitk__specialize(&v, set, i, arch);
			if (rc)
				fprintf(stderr, "%s on %s: %s\n", set->insts[i].name, targets[a],
					jitk_error_last()->message);
			assert_int_equal(rc, 0);
			available += v.available;
		}
	return available;
}

/* The good specs load, and every instance specializes on every target. */
static void test_good_specs(void **state)
{
	char *dir = t_path(t_root(), "tests/specs/good");
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	(void)state;
	assert_non_null(d);
	while ((e = readdir(d))) {
		char *path;
		spec_set *set = NULL;

		if (!strstr(e->d_name, ".yaml"))
			continue;
		path = t_path(dir, e->d_name);
		if (load_one(path, &set))
			fprintf(stderr, "%s\n", jitk_error_last()->message);
		assert_non_null(set);
		assert_true(specialize_all(set) > 0);
		jitk__spec_set_free(set);
		free(path);
		n++;
	}
	closedir(d);
	free(dir);
	assert_true(n >= 3);
}

/* A gate's reason is spec text: a block scalar's newlines are escaped in
 * the reason, which stays one line; the trailing newline is dropped. */
static void test_gate_reason_one_line(void **state)
{
	char *base = good_text(), *abs = absolute_template(base), *text;
	spec_set *set = NULL;
	jitk_variant v;
	jitk_arch a;

	(void)state;
	text = jitk__asprintf("%sgates:\n  - arch: { min: sm_100 }\n    reason: |\n      two\n      lines\n", abs);
	assert_int_equal(jitk__spec_set_load_buffer(&set, "gate.yaml", text, strlen(text)), 0);
	assert_int_equal(jitk__arch_parse(&a, "sm_90"), 0);
	assert_int_equal(jitk__specialize(&v, set, 0, a), 0);
	assert_false(v.available);
	assert_string_equal(v.reason, "needs sm_100 or newer: two\\nlines [gate.yaml:23:5]");
	jitk__spec_set_free(set);
	free(text);
	free(abs);
	free(base);
}

/* A family's bench key through the public API: the cases in order, each
 * tensor's type, direction and shape, the bytes a call moves; an unknown
 * family names the nearest. */
static void test_bench_cases(void **state)
{
	char *specs = t_path(t_root(), "specs");
	jitk_compiler *c = t_compiler(specs, NULL, NULL, NULL);
	jitk_bench_case *cases = NULL;
	size_t n = 0;

	(void)state;
	assert_int_equal(jitk_bench_cases(&cases, &n, c, "tma_copy"), 0);
	assert_int_equal(n, 3);
	assert_string_equal(cases[1].symbol, "tma_transpose");
	assert_int_equal(cases[1].ntensors, 2);
	assert_string_equal(cases[1].tensors[0].name, "x");
	assert_int_equal(cases[1].tensors[0].written, 0);
	assert_int_equal(cases[1].tensors[0].dtype.code, 4); /* bf16 */
	assert_int_equal(cases[1].tensors[0].dtype.bits, 16);
	assert_string_equal(cases[1].tensors[1].name, "yt");
	assert_int_equal(cases[1].tensors[1].written, 1);
	assert_int_equal(cases[1].tensors[1].ndim, 2);
	assert_int_equal(cases[1].tensors[1].shape[0], 8192);
	assert_int_equal(cases[1].tensors[1].shape[1], 16384);
	assert_int_equal(cases[1].bytes, 2ll * 2 * 16384 * 8192);
	assert_int_equal(cases[1].flops, 0);
	jitk_free(cases);
	/* three tensors of three types: 1 + 4 + 2 bytes per element of a row */
	assert_int_equal(jitk_bench_cases(&cases, &n, c, "per_token_quant_fp8_cub"), 0);
	assert_int_equal(n, 2);
	assert_int_equal(cases[0].bytes, 4096ll * 3072 * (1 + 2) + 4096 * 4);
	jitk_free(cases);
	assert_int_equal(jitk_bench_cases(&cases, &n, c, "tma_cop"), JITK_ENOENT);
	assert_null(cases);
	assert_non_null(strstr(jitk_error_last()->message, "did you mean 'tma_copy'"));
	jitk_compiler_free(c);
	free(specs);
}

/* The run-time version number is the header's and the string's. */
static void test_version_number(void **state)
{
	char want[32];
	int n = jitk_version_number();

	(void)state;
	assert_int_equal(n, JITK_VERSION_NUMBER);
	snprintf(want, sizeof(want), "%d.%d.%d", n / 10000, n / 100 % 100, n % 100);
	assert_string_equal(jitk_version(), want);
}

static void test_repo_specs(void **state)
{
	char *dir = t_path(t_root(), "specs");
	const char *dirs[1] = { dir };
	spec_set *set = NULL;
	size_t id, id2;

	(void)state;
	assert_int_equal(jitk__spec_set_load_dirs(&set, dirs, 1), 0);
	/* Every symbol expands to the product of its listed values. */
	{
		size_t total = 0, i, p;

		for (i = 0; i < set->nsyms; i++) {
			size_t n = 1;

			for (p = 0; p < set->syms[i]->fam->nparams; p++)
				n *= set->syms[i]->nvals[p];
			assert_int_equal(set->syms[i]->ninsts, n);
			assert_int_equal(set->syms[i]->first, total);
			total += n;
		}
		assert_int_equal(set->ninsts, total);
	}
	/* The naming rule: a symbol with several instances names each after
	 * its listed parameters, the first too; a bare name selects them all
	 * and so is not one instance. */
	assert_int_equal(jitk__spec_find(set, "fused_norm_scale_shift_fp8[hidden=1536]", &id), 0);
	assert_string_equal(set->insts[id].name, "fused_norm_scale_shift_fp8[hidden=1536]");
	assert_int_equal(jitk__spec_find(set, "fused_norm_scale_shift_fp8[hidden=3072]", &id2), 0);
	assert_string_equal(set->insts[id2].name, "fused_norm_scale_shift_fp8[hidden=3072]");
	assert_int_equal(jitk__spec_find(set, "fused_norm_scale_shift_fp8", &id), JITK_EINVAL);
	assert_non_null(strstr(jitk_error_last()->message, "names 3 instances"));
	/* Any parameter, any order, in a selector; a fixed one must match. */
	assert_int_equal(jitk__spec_find(set, "fused_norm_scale_shift_fp8[hidden=3072,norm=layer]", &id), 0);
	assert_int_equal(id, id2);
	assert_int_equal(jitk__spec_find(set, "fused_norm_scale_shift_fp8[norm=rms,hidden=3072]", &id), JITK_ENOENT);
	assert_int_equal(jitk__spec_find(set, "fused_norm_scale_shift_fp8[hidden=4096]", &id), JITK_ENOENT);
	assert_int_equal(jitk__spec_find(set, "fused_norm_scale_shift_fp8[hiden=3072]", &id), JITK_EINVAL);
	assert_int_equal(jitk__spec_find(set, "fused_norm_scale_shift_fp8[hidden]", &id), JITK_EINVAL);
	assert_int_equal(jitk__spec_find(set, "no_such_symbol", &id), JITK_ENOENT);
	assert_int_equal(jitk__spec_find(set, "fused_norm_scale_shif_fp8", &id), JITK_ENOENT);
	assert_non_null(strstr(jitk_error_last()->message, "did you mean 'fused_norm_scale_shift_fp8'"));
	/* A symbol with one instance: its bare name is the instance. */
	assert_int_equal(jitk__spec_find(set, "static_quant_fp8", &id), 0);
	assert_string_equal(set->insts[id].name, "static_quant_fp8");
	/* Fallbacks resolve to the instance with the same hidden size. */
	assert_int_equal(jitk__spec_find(set, "fused_scale_residual_norm_scale_shift_fp8[hidden=5120]", &id), 0);
	assert_int_equal(set->insts[id].nfallback, 2);
	assert_string_equal(set->insts[set->insts[id].fallback[0]].name,
			    "fused_scale_residual_norm_scale_shift[hidden=5120]");
	assert_string_equal(set->insts[set->insts[id].fallback[1]].name, "static_quant_fp8");
	/* ...and map the quantizer's arguments onto the norm's tensors. */
	{
		const spec_fallback *fb = &set->insts[id].sym->fallback[1];

		assert_string_equal(fb->symbol, "static_quant_fp8");
		assert_int_equal(fb->nmap, 2);
		assert_string_equal(fb->map[1].callee, "x");
		assert_string_equal(fb->map[1].caller, "y");
		assert_true(fb->map[1].flat);
	}
	/* Issue 10 #9: failed constraints and evaluation errors are errors
	 * now, not gates: the repository's specs have none on any target. */
	assert_true(specialize_all(set) > 0); /* and asserts no error, on every target */
	jitk__spec_set_free(set);
	free(dir);
}

/* Issue 22 #7: a selector is parsed to its end. Text after the first ']'
 * was ignored, so "x[a=1][a=2]" selected a=1 and "x[a=1],b=2]" all of a's
 * instances; a trailing comma and stray brackets passed. Each malformed
 * selector is now refused with the column of the offending character, and
 * the detail quotes the selector with a caret under it. */
static void test_selectors_are_parsed_to_their_end(void **state)
{
	static const struct {
		const char *sel;
		int status, col;
		const char *msg; /* after "'SEL': column COL: " */
	} bad[] = {
		{ "copy_heads[head_dim=64][head_dim=128]", JITK_EINVAL, 24,
		  "unexpected text after the selector's ']'" },
		{ "copy_heads[head_dim=64],head_dim=128]", JITK_EINVAL, 24,
		  "unexpected text after the selector's ']'" },
		{ "copy_heads[head_dim=64]]]", JITK_EINVAL, 24,
		  "unexpected text after the selector's ']'" },
		{ "copy_heads[head_dim=64] ", JITK_EINVAL, 24,
		  "unexpected text after the selector's ']'" },
		{ "copy_heads]]]", JITK_EINVAL, 11, "unexpected ']' in the symbol name" },
		{ "copy_heads,x", JITK_EINVAL, 11, "unexpected ',' in the symbol name" },
		{ "copy_heads[head_dim=64,]", JITK_EINVAL, 24, "expected param=value after ','" },
		{ "copy_heads[]", JITK_EINVAL, 12, "expected param=value after '['" },
		{ "copy_heads[", JITK_EINVAL, 12, "expected param=value after '['" },
		{ "copy_heads[=64]", JITK_EINVAL, 12, "expected param=value after '['" },
		{ "copy_heads[head_dim]", JITK_EINVAL, 20, "expected '=' after the parameter name" },
		{ "copy_heads[head_dim[=64]", JITK_EINVAL, 20, "expected '=' after the parameter name" },
		{ "copy_heads[head_dim=]", JITK_EINVAL, 21, "expected a value after '='" },
		{ "copy_heads[head_dim=64", JITK_EINVAL, 23, "expected ',' or ']' after the value" },
		{ "copy_heads[head_dim=64=1]", JITK_EINVAL, 23, "expected ',' or ']' after the value" },
		{ "copy_heads[hd=64]", JITK_EINVAL, 12, "copy_heads has no parameter 'hd'" },
		{ "copy_heads[head_dim=64,head_dim=64]", JITK_EINVAL, 24,
		  "parameter 'head_dim' given twice" },
		{ "copy_heads[head_dim=63]", JITK_ENOENT, 21,
		  "copy_heads has no instance with head_dim=63 (see jitk list)" },
	};
	char *dir = t_path(t_root(), "specs");
	const char *dirs[1] = { dir };
	spec_set *set = NULL;
	spec_selection sel;
	size_t i, id;

	(void)state;
	assert_int_equal(jitk__spec_set_load_dirs(&set, dirs, 1), 0);
	for (i = 0; i < JITK_ARRAY_SIZE(bad); i++) {
		char *want = jitk__asprintf("'%s': column %d: %s", bad[i].sel, bad[i].col, bad[i].msg);
		int rc = jitk__spec_select(&sel, set, bad[i].sel);

		if (rc != bad[i].status || strncmp(jitk_error_last()->message, want, strlen(want)))
			fprintf(stderr, "case %s\n  want: %s\n  got:  %s (%d)\n", bad[i].sel, want,
				jitk_error_last()->message, rc);
		assert_int_equal(rc, bad[i].status);
		assert_true(!strncmp(jitk_error_last()->message, want, strlen(want)));
		assert_null(sel.match);
		check_message_and_caret(bad[i].sel, 1, bad[i].col);
		/* jitk_kernel_get's path says the same */
		assert_int_equal(jitk__spec_find(set, bad[i].sel, &id), bad[i].status);
		assert_true(!strncmp(jitk_error_last()->message, want, strlen(want)));
		free(want);
	}
	/* The well-formed ones still select what they say. */
	assert_int_equal(jitk__spec_select(&sel, set, "copy_heads"), 0);
	assert_int_equal(sel.n, 3);
	jitk__spec_selection_free(&sel);
	assert_int_equal(jitk__spec_select(&sel, set, "copy_heads[head_dim=128]"), 0);
	assert_int_equal(sel.n, 1);
	assert_true(sel.match[1]);
	jitk__spec_selection_free(&sel);
	assert_int_equal(jitk__spec_find(set, "fused_norm_scale_shift_fp8[norm=layer,hidden=1536]", &id), 0);
	assert_string_equal(set->insts[id].name, "fused_norm_scale_shift_fp8[hidden=1536]");
	jitk__spec_set_free(set);
	free(dir);
}

/* jitk explain on a spec error: the instance's own error is the call's
 * status and message (the CLI prints it); a fallback's is named on its
 * step's line instead of the step being left out. */
static void test_explain_spec_errors(void **state)
{
	char *dir = t_tmpdir(), *specs = t_path(dir, "specs"), *path = t_path(specs, "x.yaml");
	char *base = good_text(), *abs = absolute_template(base), *text = NULL, *want;
	static const char syms[] =
		"  s:\n    params: { hidden: 3072, norm: layer, residual: false }\n"
		"    gates:\n      - arch: { min: sm_90 }\n        reason: hopper only\n"
		"    fallback: [u]\n"
		"  u: { params: { hidden: 3072, norm: layer, residual: false } }\n";
	const char *sym = "  s: { params: { hidden: 3072, norm: layer, residual: false } }\n";
	char *cut = strstr(abs, sym);
	jitk_compiler *c;
	t_log log = { 0, "" };

	(void)state;
	assert_non_null(cut);
	assert_int_equal(jitk__mkdirs(specs, 0755), 0);
	*cut = '\0';
	t_writef(path, "%s%sconstraints:\n  - check: hidden < 3000\n    message: too wide\n", abs,
		 syms);
	c = t_compiler(specs, NULL, NULL, &log);
	want = jitk__asprintf("%s:29:12: error: constraint 'hidden < 3000' fails: too wide (u on sm_80)",
			      path);
	assert_int_equal(jitk_explain(&text, c, "u", "sm_80"), JITK_ESPEC);
	assert_string_equal(jitk_error_last()->message, want);
	free(text);
	text = NULL;
	assert_int_equal(jitk_explain(&text, c, "s", "sm_80"), JITK_EARCH);
	assert_non_null(text);
	{
		char *line = jitk__asprintf("  fallback: u (step 1 of 1): %s\n", want);

		assert_non_null(strstr(text, line));
		free(line);
	}
	free(text);
	free(want);
	jitk_compiler_free(c);
	free(abs);
	free(base);
	free(path);
	free(specs);
	t_rmtree(dir);
	free(dir);
}

static int64_t eval_str(const char *s, int *failed)
{
	expr *e = NULL;
	char err[128];
	int pos = 0;
	int64_t v = 0;

	*failed = 0;
	if (jitk__expr_parse(&e, s, err, sizeof(err), &pos)) {
		*failed = 1;
		return pos;
	}
	if (jitk__expr_eval(e, NULL, NULL, &v, err, sizeof(err)))
		*failed = 2;
	jitk__expr_free(e);
	return v;
}

static void test_expressions(void **state)
{
	int f;

	(void)state;
	assert_int_equal(eval_str("1 + 2 * 3", &f), 7);
	assert_int_equal(f, 0);
	assert_int_equal(eval_str("(1 + 2) * 3", &f), 9);
	assert_int_equal(eval_str("10 - 4 - 3", &f), 3);
	assert_int_equal(eval_str("7 / 2 * 2", &f), 6);
	assert_int_equal(eval_str("cdiv(7, 2)", &f), 4);
	assert_int_equal(eval_str("cdiv(8, 2)", &f), 4);
	assert_int_equal(eval_str("min(3, max(1, 2))", &f), 2);
	assert_int_equal(eval_str("3 <= 3 && 2 < 1 || !0", &f), 1);
	assert_int_equal(eval_str("-5 % 3", &f), -2);
	assert_int_equal(eval_str("3072 % (32 * 8) == 0", &f), 1);
	eval_str("1 / 0", &f);
	assert_int_equal(f, 2);
	eval_str("9223372036854775807 + 1", &f);
	assert_int_equal(f, 2);
	eval_str("x", &f);
	assert_int_equal(f, 2);
	assert_int_equal(eval_str("1 +", &f), 3);
	assert_int_equal(f, 1);
	assert_int_equal(eval_str("foo(1, 2)", &f), 0);
	assert_int_equal(f, 1);
	assert_int_equal(eval_str("1 = 2", &f), 2);
	assert_int_equal(f, 1);
	eval_str("((((((((((((((((((((((((((((((((((1))))))))))))))))))))))))))))))))))", &f);
	assert_int_equal(f, 1);
}

/* A file name is user text too: a newline or an escape sequence in it is
 * escaped in the message, which stays one line; so is a name looked up. */
static void test_paths_in_messages(void **state)
{
	char *dir = t_tmpdir(), *specs = t_path(dir, "specs"), *bad, *want;
	spec_set *set = NULL;
	const char *one[1] = { specs };
	size_t id;

	(void)state;
	assert_int_equal(jitk__mkdirs(specs, 0755), 0);
	bad = t_path(specs, "a\nb\033[2J.yaml");
	t_writef(bad, "family: [\n");
	want = jitk__asprintf("%s/a\\nb\\x1b[2J.yaml:2:1: error: invalid YAML: did not find "
			      "expected node content while parsing a flow node", specs);
	assert_int_equal(jitk__spec_set_load_dirs(&set, one, 1), JITK_ESPEC);
	assert_string_equal(jitk_error_last()->message, want);
	assert_null(strchr(jitk_error_last()->message, '\n'));
	free(want);
	unlink(bad);
	free(bad);
	bad = t_path(specs, "ok.yaml");
	{
		char *base = good_text(), *abs = absolute_template(base);

		t_write(bad, abs, strlen(abs));
		free(abs);
		free(base);
	}
	assert_int_equal(jitk__spec_set_load_dirs(&set, one, 1), 0);
	assert_int_equal(jitk__spec_find(set, "no\nsuch", &id), JITK_ENOENT);
	assert_string_equal(jitk_error_last()->message, "no symbol named 'no\\nsuch' (see jitk list)");
	jitk__spec_set_free(set);
	free(bad);
	free(specs);
	t_rmtree(dir);
	free(dir);
}

/* ------------------------------------------------------- instances */

/* A family "name" with int parameters p0..p{nparams-1} and the repo's
 * quantizer template; symbols are appended by the caller. */
static void family_head(jbuf *b, const char *name, int nparams)
{
	char *root = realpath(t_root(), NULL);
	int i;

	assert_non_null(root);
	jitk__jbuf_printf(b, "family: %s\ntemplate: %s/templates/static_quant_fp8.cuh\n"
			  "kernel: jitk::static_quant_fp8\nparams:\n", name, root);
	for (i = 0; i < nparams; i++)
		jitk__jbuf_printf(b, "  p%d: { type: int }\n", i);
	jitk__jbuf_puts(b, "# parameters by name\nargs:\n  n: { type: i64 }\n"
			   "launch:\n  grid: 1\n  block: 32\nsymbols:\n");
	free(root);
}

/* "[0, 1, ..., n-1]" */
static void value_list(jbuf *b, int n)
{
	int i;

	jitk__jbuf_puts(b, "[");
	for (i = 0; i < n; i++)
		jitk__jbuf_printf(b, "%s%d", i ? ", " : "", i);
	jitk__jbuf_puts(b, "]");
}

static void sym3(jbuf *b, int i, int n0, int n1, int n2, const char *extra)
{
	jitk__jbuf_printf(b, "  s%d:\n    params: { p0: ", i);
	value_list(b, n0);
	jitk__jbuf_puts(b, ", p1: ");
	value_list(b, n1);
	jitk__jbuf_puts(b, ", p2: ");
	value_list(b, n2);
	jitk__jbuf_printf(b, " }\n%s", extra ? extra : "");
}

/* Load text as dir/name: JITK_ESPEC with exactly "PATH:WANT". */
static void expect_text(const char *dir, const char *name, const jbuf *b,
			const char *want)
{
	char *path = t_path(dir, name);

	t_write(path, b->data, b->len);
	expect_load(path, 0, path, want);
	free(path);
}

/* Issue 10 #8: 1000 symbols x 16^3 values made 4 096 000 instances (706 MB,
 * 4.3 s for jitk list). Instances are counted as symbols are parsed, with
 * overflow checks, before anything is allocated: at most 4096 per symbol
 * and 65 536 per spec set, the error at the symbol that goes over. */
static void test_instance_limits(void **state)
{
	char *dir = t_tmpdir(), *path = t_path(dir, "many.yaml");
	const char *one[1] = { path };
	spec_set *set = NULL;
	size_t id;
	double t0;
	jbuf b;
	int i, line;

	(void)state;
	alarm(120);
	/* The bomb: refused at the 17th symbol. */
	jitk__jbuf_init(&b);
	family_head(&b, "bomb", 3);
	for (i = 0; i < 1000; i++)
		sym3(&b, i, 16, 16, 16, NULL);
	line = 15 + 2 * 16; /* the symbols start at line 15, two lines each */
	{
		char *want = jitk__asprintf("%d:3: error: symbol 's16' brings the spec set to 69632 "
					    "instances; the limit is 65536 (at symbols)", line);
		expect_text(dir, "bomb.yaml", &b, want);
		free(want);
	}
	jitk__jbuf_free(&b);

	/* One symbol over its own limit; one whose count overflows 64 bits
	 * (4^32 = 2^64 used to wrap to 0 instances, silently). */
	jitk__jbuf_init(&b);
	family_head(&b, "big", 3);
	sym3(&b, 0, 17, 16, 16, NULL);
	expect_text(dir, "big.yaml", &b, "15:3: error: symbol 's0' expands to 4352 instances (one per "
		    "combination of the listed values); the limit is 4096 (at symbols)");
	jitk__jbuf_free(&b);
	jitk__jbuf_init(&b);
	family_head(&b, "wrap", 32);
	jitk__jbuf_puts(&b, "  s0:\n    params:\n");
	for (i = 0; i < 32; i++)
		jitk__jbuf_printf(&b, "      p%d: [0, 1, 2, 3]\n", i);
	expect_text(dir, "wrap.yaml", &b, "44:3: error: symbol 's0' expands to more than 2^64 "
		    "instances (one per combination of the listed values); the limit is 4096 (at symbols)");
	jitk__jbuf_free(&b);

	/* Exactly at the limit, each symbol falling back to the next: loads,
	 * in linear time (the old linker searched every instance for every
	 * fallback: 2^32 comparisons here), with the right fallbacks. */
	jitk__jbuf_init(&b);
	family_head(&b, "full", 3);
	for (i = 0; i < 16; i++) {
		char fb[32];

		snprintf(fb, sizeof(fb), "    fallback: [s%d]\n", i + 1);
		sym3(&b, i, 16, 16, 16, i < 15 ? fb : NULL);
	}
	t_write(path, b.data, b.len);
	jitk__jbuf_free(&b);
	t0 = jitk__now_ms();
	assert_int_equal(jitk__spec_set_load_files(&set, one, 1), 0);
	printf("  65536 instances with fallbacks loaded in %.0f ms\n", jitk__now_ms() - t0);
	assert_true(jitk__now_ms() - t0 < 120000); /* a blow-up, not a speed test */
	assert_int_equal(set->ninsts, 65536);
	assert_int_equal(jitk__spec_find(set, "s3[p0=5,p1=7,p2=11]", &id), 0);
	assert_int_equal(set->insts[id].nfallback, 1);
	assert_string_equal(set->insts[set->insts[id].fallback[0]].name, "s4[p0=5,p1=7,p2=11]");
	assert_int_equal(jitk__spec_find(set, "s14[p0=15,p1=15,p2=15]", &id), 0);
	assert_string_equal(set->insts[set->insts[id].fallback[0]].name, "s15[p0=15,p1=15,p2=15]");
	jitk__spec_set_free(set);
	set = NULL;

	/* More than 16 fallbacks. */
	jitk__jbuf_init(&b);
	family_head(&b, "fb", 3);
	sym3(&b, 0, 1, 1, 1, "    fallback: [s1, s1, s1, s1, s1, s1, s1, s1, s1, s1, s1, s1, s1, s1, s1, s1, s1]\n");
	sym3(&b, 1, 1, 1, 1, NULL);
	expect_text(dir, "fb.yaml", &b, "17:80: error: more than 16 fallbacks (at symbols.s0)");
	jitk__jbuf_free(&b);
	alarm(0);
	free(path);
	t_rmtree(dir);
	free(dir);
}

/* A variant binds every parameter, tuning key and derived value: more than
 * 64 used to fail at specialization with no location; now the 65th name
 * is an error at load, at its line. */
static void test_name_limit(void **state)
{
	char *dir = t_tmpdir();
	jbuf b;
	int i;

	(void)state;
	jitk__jbuf_init(&b);
	family_head(&b, "names", 65);
	jitk__jbuf_puts(&b, "  s0:\n    params:\n");
	for (i = 0; i < 65; i++)
		jitk__jbuf_printf(&b, "      p%d: 1\n", i);
	expect_text(dir, "params.yaml", &b, "69:3: error: 'p64' is one name too many: a family has at "
		    "most 64 parameters, tuning keys and derived values together (at params)");
	jitk__jbuf_free(&b);
	jitk__jbuf_init(&b);
	family_head(&b, "names", 3);
	jitk__jbuf_puts(&b, "  s0: { params: { p0: 1, p1: 1, p2: 1 } }\ntuning:\n  -\n");
	for (i = 0; i < 40; i++)
		jitk__jbuf_printf(&b, "    t%d: 1\n", i);
	jitk__jbuf_puts(&b, "derive:\n");
	for (i = 0; i < 30; i++)
		jitk__jbuf_printf(&b, "  d%d: t%d + 1\n", i, i);
	expect_text(dir, "mixed.yaml", &b, "80:3: error: 'd21' is one name too many: a family has at "
		    "most 64 parameters, tuning keys and derived values together (at derive)");
	jitk__jbuf_free(&b);
	t_rmtree(dir);
	free(dir);
}

/* A fallback into another family matches enum values by name: the two
 * families may list the values in different orders (the linker compared
 * the indexes, and fell back from e=y to the instance with e=x). */
static void test_fallback_enum_by_name(void **state)
{
	char *dir = t_tmpdir(), *a = t_path(dir, "a.yaml"), *bpath = t_path(dir, "b.yaml");
	char *root = realpath(t_root(), NULL);
	const char *files[2] = { a, bpath };
	static const char fmt[] =
		"family: %s\ntemplate: %s/templates/static_quant_fp8.cuh\nkernel: jitk::static_quant_fp8\n"
		"params:\n  e: { type: enum, values: [%s], cpp: jitk::E }\n  h: { type: int }\n"
		"# parameters by name\nargs:\n  n: { type: i64 }\nlaunch:\n  grid: 1\n  block: 32\n"
		"symbols:\n  %s:\n    params: { e: [x, y], h: [1, 2] }\n%s";
	spec_set *set = NULL;
	size_t id;

	(void)state;
	assert_non_null(root);
	t_writef(a, fmt, "fa", root, "x, y", "sa", "    fallback: [sb]\n");
	t_writef(bpath, fmt, "fb", root, "y, x", "sb", "");
	assert_int_equal(jitk__spec_set_load_files(&set, files, 2), 0);
	assert_int_equal(jitk__spec_find(set, "sa[e=y,h=1]", &id), 0);
	assert_string_equal(set->insts[set->insts[id].fallback[0]].name, "sb[e=y,h=1]");
	assert_int_equal(jitk__spec_find(set, "sa[e=x,h=1]", &id), 0);
	assert_string_equal(set->insts[set->insts[id].fallback[0]].name, "sb[e=x,h=1]");
	assert_int_equal(jitk__spec_find(set, "sa[e=y,h=2]", &id), 0);
	assert_string_equal(set->insts[set->insts[id].fallback[0]].name, "sb[e=y,h=2]");
	jitk__spec_set_free(set);
	free(root);
	free(a);
	free(bpath);
	t_rmtree(dir);
	free(dir);
}

/* ------------------------------------------------ deep expressions */

/* text with "head" then n copies of "unit" then "tail". */
static char *repeat(const char *head, const char *unit, size_t n, const char *tail)
{
	jbuf b;
	size_t i;

	jitk__jbuf_init(&b);
	jitk__jbuf_puts(&b, head);
	for (i = 0; i < n; i++)
		jitk__jbuf_puts(&b, unit);
	jitk__jbuf_puts(&b, tail);
	return jitk__jbuf_detach(&b);
}

typedef struct {
	const char *spec_base; /* minimal.yaml with an absolute template path */
	int failures;
} deep_ctx;

#define DEEP_TOO_TALL "expression too deep (more than 64 nested operations; split it with derive)"
#define DEEP_NESTED "expression nested too deeply (more than 32 levels of parentheses, calls and unary operators)"

/* Runs on a 256 KiB stack: cmocka's asserts cannot be used here. */
static void deep_expect(deep_ctx *d, const char *what, const char *text, int pos,
			const char *msg)
{
	expr *e = NULL;
	char err[160];
	int got = -1;

	if (!jitk__expr_parse(&e, text, err, sizeof(err), &got)) {
		fprintf(stderr, "%s: parsed\n", what);
		jitk__expr_free(e);
		d->failures++;
	} else if (got != pos || strcmp(err, msg)) {
		fprintf(stderr, "%s: at %d '%s', want %d '%s'\n", what, got, err, pos, msg);
		d->failures++;
	}
}

static void *deep_worker(void *arg)
{
	deep_ctx *d = arg;
	static const struct {
		const char *what, *head, *unit, *tail;
		size_t n;
		int pos;
		const char *msg;
	} cases[] = {
		/* the 60 KB derive value: 30 001 terms */
		{ "sum", "0", "+0", "+8", 30000, 127, DEEP_TOO_TALL },
		{ "difference", "9", " - 1", "", 30000, 254, DEEP_TOO_TALL },
		{ "product", "x", "*x", "", 20000, 127, DEEP_TOO_TALL },
		{ "quotients", "x", "/2%3", "", 20000, 127, DEEP_TOO_TALL },
		{ "and", "1", "&&1", "", 20000, 190, DEEP_TOO_TALL },
		{ "or", "0", "||0", "", 20000, 190, DEEP_TOO_TALL },
		{ "negations", "", "- ", "x", 30000, 62, DEEP_NESTED },
		{ "nots", "", "!", "0", 30000, 31, DEEP_NESTED },
		{ "mixed unary", "", "-!", "0", 20000, 31, DEEP_NESTED },
		{ "parentheses", "", "(", "1", 30000, 32, DEEP_NESTED },
		{ "calls", "", "min(1, ", "1", 20000, 221, DEEP_NESTED },
		{ "right-deep sums", "", "1+(", "1", 20000, 96, DEEP_NESTED },
		{ "sums in calls", "", "max(0+0+0+0, ", "1", 20000, 407, DEEP_NESTED },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *t = repeat(cases[i].head, cases[i].unit, cases[i].n, cases[i].tail);

		deep_expect(d, cases[i].what, t, cases[i].pos, cases[i].msg);
		free(t);
	}
	/* The tallest tree allowed still works end to end: parse, visit,
	 * bind, eval, free. */
	{
		char *t = repeat("1", "+1", 63, ""), err[160];
		expr *e = NULL;
		int pos;
		int64_t v = 0;

		if (jitk__expr_parse(&e, t, err, sizeof(err), &pos) ||
		    jitk__expr_eval(e, NULL, NULL, &v, err, sizeof(err)) || v != 64) {
			fprintf(stderr, "63 additions: %s\n", err);
			d->failures++;
		}
		jitk__expr_free(e);
		free(t);
	}
	/* Through the loader: the derive value, with file:line:col. */
	{
		char *terms = repeat("0", "+0", 30000, "+8");
		char *text = jitk__asprintf("%sderive:\n  d: %s\n", d->spec_base, terms);
		int line = 2, rc;
		const char *c;
		char *want;
		spec_set *set = NULL;

		for (c = d->spec_base; *c; c++)
			line += *c == '\n';
		want = jitk__asprintf("deep.yaml:%d:133: error: bad expression '%.96s...': " DEEP_TOO_TALL
				      " (at derive)", line, terms);
		rc = jitk__spec_set_load_buffer(&set, "deep.yaml", text, strlen(text));
		if (rc != JITK_ESPEC || strcmp(jitk_error_last()->message, want)) {
			fprintf(stderr, "derive: %d %s\n  want %s\n", rc, jitk_error_last()->message, want);
			d->failures++;
		}
		jitk__spec_set_free(set);
		free(want);
		free(text);
		free(terms);
	}
	return NULL;
}

/* Issue 10 #7: a 60 KB derive value of 30 001 terms made a left-deep tree
 * that eval (and visit, free) recursed over: a segfault with a 512 KiB
 * stack. Every direction of depth is now bounded at parse time. The
 * checks run in a forked child on a thread with a 256 KiB stack, so that
 * a stack overflow fails the test instead of killing the test program. */
static void test_deep_expressions(void **state)
{
	char *base = good_text(), *abs = absolute_template(base);
	deep_ctx d = { abs, 0 };
	pid_t pid;
	int status = 0;

	(void)state;
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		pthread_attr_t attr;
		pthread_t th;

		if (pthread_attr_init(&attr) || pthread_attr_setstacksize(&attr, 256 << 10) ||
		    pthread_create(&th, &attr, deep_worker, &d) || pthread_join(th, NULL))
			_exit(3);
		_exit(d.failures ? 1 : 0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (WIFSIGNALED(status))
		fprintf(stderr, "child died of signal %d\n", WTERMSIG(status));
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	free(abs);
	free(base);
}

static int order[4], norder;

static void note(void *p)
{
	order[norder++] = *(int *)p;
}

/* The arena the spec model lives in: zeroed, aligned memory; a large
 * request in a chunk of its own without losing the current one; copies
 * that keep the old elements; cleanups run last-registered first, once;
 * a size that overflows fails and is remembered. */
static void test_arena(void **state)
{
	jitk_arena *a = jitk__arena_new();
	static int one = 1, two = 2;
	char *s, *big, *after;
	size_t *grown, i;
	int *ints;

	(void)state;
	assert_non_null(a);
	ints = jitk__arena_array(a, 3, sizeof(int));
	assert_non_null(ints);
	assert_int_equal(ints[0] | ints[1] | ints[2], 0);
	s = jitk__arena_strdup(a, "abc");
	assert_int_equal((uintptr_t)s % _Alignof(max_align_t), 0);
	assert_string_equal(s, "abc");
	assert_string_equal(jitk__arena_strndup(a, "abcdef", 2), "ab");
	assert_string_equal(jitk__arena_printf(a, "%s.%d", "x", 42), "x.42");
	big = jitk__arena_alloc(a, 100000);
	assert_non_null(big);
	assert_int_equal(big[0] | big[99999], 0);
	after = jitk__arena_alloc(a, 8);
	assert_true(after > s && after < s + 4096); /* still in the first chunk */
	grown = jitk__arena_array(a, 2, sizeof(size_t));
	grown[0] = 7;
	grown[1] = 8;
	grown = jitk__arena_grow(a, grown, 2, 5, sizeof(size_t));
	assert_int_equal(grown[0], 7);
	assert_int_equal(grown[1], 8);
	for (i = 2; i < 5; i++)
		assert_int_equal(grown[i], 0);
	assert_non_null(jitk__arena_alloc(a, 0));
	assert_false(jitk__arena_failed(a));
	assert_null(jitk__arena_array(a, SIZE_MAX / 2, 4));
	assert_true(jitk__arena_failed(a));
	assert_true(jitk__arena_size(a) > 100000);
	norder = 0;
	assert_int_equal(jitk__arena_defer(a, note, &one), 0);
	assert_int_equal(jitk__arena_defer(a, note, &two), 0);
	jitk__arena_free(a);
	assert_int_equal(norder, 2);
	assert_int_equal(order[0], 2);
	assert_int_equal(order[1], 1);
	jitk__arena_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_corpus),
		cmocka_unit_test(test_hostile_inputs),
		cmocka_unit_test(test_not_regular_files),
		cmocka_unit_test(test_paths_in_messages),
		cmocka_unit_test(test_duplicate_symbol),
		cmocka_unit_test(test_repo_specs),
		cmocka_unit_test(test_selectors_are_parsed_to_their_end),
		cmocka_unit_test(test_good_specs),
		cmocka_unit_test(test_gate_reason_one_line),
		cmocka_unit_test(test_explain_spec_errors),
		cmocka_unit_test(test_bench_cases),
		cmocka_unit_test(test_version_number),
		cmocka_unit_test(test_expressions),
		cmocka_unit_test(test_deep_expressions),
		cmocka_unit_test(test_instance_limits),
		cmocka_unit_test(test_name_limit),
		cmocka_unit_test(test_fallback_enum_by_name),
		cmocka_unit_test(test_arena),
	};

	return T_RUN_TESTS(tests, NULL, NULL);
}
