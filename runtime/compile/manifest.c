/* manifest.c - warmup manifests: the "INSTANCE ARCH" lines a runtime
 * records for every instance it resolves (jitk_runtime_manifest,
 * JITK_MANIFEST_OUT), read back and precompiled (jitk precompile
 * --manifest FILE), so that a sealed deployment starts with exactly what
 * it needs in its cache. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile/compile.h"

#define MANIFEST_MAX_BYTES (16u << 20)

int jitk__manifest_line(char *buf, size_t n, const char *instance, const char *arch)
{
	int k = snprintf(buf, n, "%s %s\n", instance, arch);

	return k > 0 && (size_t)k < n ? k : -1;
}

/* -------------------------------------------------------------- reading */

/* An (instance, target) pair as one number, for the set of those seen. */
static uint64_t pair_code(size_t inst, jitk_arch a)
{
	return (uint64_t)inst << 20 | (uint64_t)a.cc << 3 | (a.kind == 'c') << 2 |
	       (a.suffix == 'a' ? 1u : a.suffix == 'f' ? 2u : 0u);
}

typedef struct {
	size_t inst;
	jitk_arch arch;
} pair;

/* The pairs in the order they first appear, and an open-addressing set of
 * their codes (code + 1, so that 0 is empty) to drop repeats: several
 * processes append to one manifest. */
typedef struct {
	pair *v;
	size_t n, cap;
	uint64_t *set;
	size_t setcap; /* a power of two, at least twice n */
} pair_list;

static int set_insert(uint64_t *set, size_t cap, uint64_t code)
{
	size_t i = (size_t)((code * 0x9e3779b97f4a7c15ull) >> 17) & (cap - 1);

	while (set[i]) {
		if (set[i] == code + 1)
			return 0;
		i = (i + 1) & (cap - 1);
	}
	set[i] = code + 1;
	return 1;
}

/* 1 added, 0 seen before, -1 out of memory. */
static int pairs_add(pair_list *l, size_t inst, jitk_arch a)
{
	if (2 * (l->n + 1) > l->setcap) {
		size_t cap = l->setcap ? 2 * l->setcap : 64, i;
		uint64_t *set = calloc(cap, sizeof(*set));

		if (!set)
			return -1;
		for (i = 0; i < l->n; i++)
			set_insert(set, cap, pair_code(l->v[i].inst, l->v[i].arch));
		free(l->set);
		l->set = set;
		l->setcap = cap;
	}
	if (!set_insert(l->set, l->setcap, pair_code(inst, a)))
		return 0;
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 32;
		pair *v = realloc(l->v, cap * sizeof(*v));

		if (!v)
			return -1;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n].inst = inst;
	l->v[l->n].arch = a;
	l->n++;
	return 1;
}

static int parse_arch(jitk_arch *out, const char *text)
{
	if (jitk__arch_parse(out, text))
		return jitk__spec_arch_error(text, strlen(text));
	return 0;
}

static int parse_target(jitk_arch *out, const jitk_compiler *c, const char *text)
{
	int rc = parse_arch(out, text);

	return rc ? rc : jitk__check_target(c, *out);
}

/* The --arch list: every entry a target this NVRTC compiles for. */
static int parse_archs(jitk_arch **out, size_t *n, const jitk_compiler *c, const char *list)
{
	const char *p = list;
	int rc = 0;

	*out = NULL;
	*n = 0;
	if (!*list)
		return jitk__error(JITK_EINVAL, "the architecture list is empty");
	while (!rc) {
		size_t len = strcspn(p, ",");
		char *one = jitk__strndup(p, len);
		jitk_arch *a = realloc(*out, (*n + 1) * sizeof(**out));

		if (!one || !a) {
			free(one);
			if (a)
				*out = a;
			rc = jitk__error(JITK_ENOMEM, "out of memory");
			break;
		}
		*out = a;
		rc = parse_target(&a[*n], c, one);
		free(one);
		if (!rc)
			++*n;
		if (!p[len])
			break;
		p += len + 1;
	}
	if (rc) {
		free(*out);
		*out = NULL;
		*n = 0;
	}
	return rc;
}

/* Prefix the error of a line with where it is (the detail, a malformed
 * selector's caret, stays). */
static int line_error(const char *path, size_t line)
{
	const jitk_error *e = jitk_error_last();
	int status = e->status;
	char *msg = jitk__strdup(e->message), *detail = jitk__strdup(e->detail);
	int rc = jitk__spec_error(status, detail, "%s:%zu: error: %s", path, line,
				  msg ? msg : "out of memory");

	free(msg);
	free(detail);
	return rc;
}

/* One line: "SELECTOR ARCH" (already trimmed, not a comment). */
static int read_line(pair_list *l, const jitk_compiler *c, char *text, const jitk_arch *archs,
		     size_t narchs, const char *path, size_t lineno)
{
	char *name = text, *arch, *end;
	spec_selection sel;
	jitk_arch recorded;
	size_t i, j;
	int rc = 0;

	arch = name + strcspn(name, " \t");
	end = arch + strspn(arch, " \t");
	if (!*arch || !*end || end[strcspn(end, " \t")])
		return jitk__spec_error(JITK_EINVAL, NULL,
					"%s:%zu: error: expected 'INSTANCE ARCH', got '%s'", path,
					lineno, jitk__spec_quote(text));
	*arch = '\0';
	arch = end;
	/* The recorded architecture must be one even when the list replaces
	 * it (a garbled line is not taken silently), and one this NVRTC
	 * compiles for when it is what will be compiled. */
	if (narchs ? parse_arch(&recorded, arch) : parse_target(&recorded, c, arch))
		return line_error(path, lineno);
	if (jitk__spec_select(&sel, c->specs, name))
		return line_error(path, lineno);
	for (i = 0; i < sel.sym->ninsts && rc >= 0; i++) {
		if (!sel.match[i])
			continue;
		for (j = 0; j < (narchs ? narchs : 1) && rc >= 0; j++)
			rc = pairs_add(l, sel.sym->first + i, narchs ? archs[j] : recorded);
	}
	jitk__spec_selection_free(&sel);
	return rc < 0 ? jitk__error(JITK_ENOMEM, "out of memory") : 0;
}

/* The pairs as the caller's block: the items, then their strings. */
static int pairs_export(jitk_manifest_item **out, const pair_list *l, const jitk_compiler *c)
{
	size_t bytes = l->n * sizeof(**out), i;
	char arch[JITK_ARCH_STRLEN], *p;

	for (i = 0; i < l->n; i++) {
		jitk__arch_format(arch, l->v[i].arch);
		bytes += strlen(c->specs->insts[l->v[i].inst].name) + strlen(arch) + 2;
	}
	*out = malloc(bytes ? bytes : 1);
	if (!*out)
		return jitk__error(JITK_ENOMEM, "out of memory");
	p = (char *)(*out + l->n);
	for (i = 0; i < l->n; i++) {
		const char *name = c->specs->insts[l->v[i].inst].name;

		(*out)[i].instance = p;
		p += sprintf(p, "%s", name) + 1;
		jitk__arch_format(arch, l->v[i].arch);
		(*out)[i].arch = p;
		p += sprintf(p, "%s", arch) + 1;
	}
	return 0;
}

int jitk_manifest_read(jitk_manifest_item **out, size_t *n, const jitk_compiler *c,
		       const char *path, const char *archs)
{
	pair_list l;
	jitk_arch *override = NULL;
	size_t noverride = 0, len = 0, lineno = 0;
	char *text = NULL, *p;
	int rc;

	if ((rc = JITK_NULL_ARGS("jitk_manifest_read", "out n compiler path", out, n, c, path)))
		return rc;
	*out = NULL;
	*n = 0;
	memset(&l, 0, sizeof(l));
	if (archs && (rc = parse_archs(&override, &noverride, c, archs)))
		return rc;
	if ((rc = jitk__read_file(&text, &len, path, MANIFEST_MAX_BYTES)))
		goto done;
	if (memchr(text, '\0', len)) {
		rc = jitk__error(JITK_EINVAL, "%s: error: a NUL byte: not a manifest", path);
		goto done;
	}
	for (p = text; *p && !rc;) {
		char *eol = p + strcspn(p, "\n"), *end = eol, *next = *eol ? eol + 1 : eol;

		lineno++;
		while (end > p && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
			end--;
		*end = '\0';
		p += strspn(p, " \t");
		if (*p && *p != '#')
			rc = read_line(&l, c, p, override, noverride, path, lineno);
		p = next;
	}
	if (!rc)
		rc = pairs_export(out, &l, c);
	if (!rc)
		*n = l.n;
done:
	free(text);
	free(override);
	free(l.v);
	free(l.set);
	return rc;
}

/* --------------------------------------------------------- precompiling */

/* The size of each version of jitk_precompile_counts (jitk.h, "Output
 * structs"). */
static const size_t counts_sizes[] = { 0, JITK_OUT_END(jitk_precompile_counts, gated) };

int jitk_precompile_manifest(jitk_precompile_counts *out, jitk_compiler *c, const char *path,
			     const char *archs, jitk_precompile_progress_fn progress, void *ctx)
{
	jitk_precompile_counts k = JITK_PRECOMPILE_COUNTS_INIT;
	jitk_manifest_item *items = NULL;
	size_t n = 0, i;
	char *first_msg = NULL;
	int rc, first = JITK_OK;

	if (out && (rc = jitk__out_check("jitk_precompile_counts", out->version,
					 JITK_PRECOMPILE_COUNTS_VERSION)))
		return rc;
	if (out)
		jitk__out_fill(out, &k, counts_sizes);
	if ((rc = jitk_manifest_read(&items, &n, c, path, archs)))
		return rc;
	for (i = 0; i < n; i++) {
		jitk_origin origin = JITK_ORIGIN_COMPILED;

		rc = jitk_precompile(&origin, c, items[i].instance, items[i].arch);
		if (rc == JITK_OK && (origin == JITK_ORIGIN_COMPILED || origin == JITK_ORIGIN_MEMORY))
			k.compiled++;
		else if (rc == JITK_OK && (origin == JITK_ORIGIN_CACHE || origin == JITK_ORIGIN_LAYER))
			k.cached++;
		else if (rc == JITK_OK)
			k.remote++; /* any other origin is a remote tier's */
		else if (rc == JITK_EARCH)
			k.gated++;
		else
			k.failed++;
		if (rc && rc != JITK_EARCH && first == JITK_OK) {
			first = rc;
			first_msg = jitk__strdup(jitk_error_last()->message);
		}
		if (progress)
			progress(ctx, i, n, &items[i], rc, origin);
	}
	jitk_free(items);
	if (out)
		jitk__out_fill(out, &k, counts_sizes);
	if (first != JITK_OK)
		jitk__error(first, "%s", first_msg ? first_msg : "out of memory");
	else
		jitk__error_clear();
	free(first_msg);
	return first;
}
