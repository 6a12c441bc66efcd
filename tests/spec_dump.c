/* spec_dump.c - everything the spec loader makes of its input, as text,
 * for tests/spec_diff.sh: the loader of two revisions must print the same
 * bytes for every input.
 *
 *   spec_dump --dirs DIR[:DIR...]   the spec set: the whole model, each
 *                                   instance specialized on a few
 *                                   architectures, the translation unit on
 *                                   sm_90, jitk_describe and jitk_explain
 *   spec_dump --files FILE...       each file alone (jitk__spec_set_load_files)
 *   spec_dump --buffers NAME FILE...  each file's bytes loaded as NAME
 *                                   (jitk__spec_set_load_buffer, as the fuzzer)
 *
 * A load that fails prints its status, message and detail; one that
 * succeeds prints the model and the specializations. Only fields that every
 * revision of spec.h has are read.
 *
 * Built with -DSPEC_DUMP_OOM (and no sanitizer: it replaces malloc), also
 *   spec_dump --oom FILE...          each file loaded again and again, the
 *                                    k-th allocation failing, k = 1, 2, ...:
 *                                    every load must end as the one without
 *                                    failures did or with JITK_ENOMEM ("out of
 *                                    memory..."), and free all it allocated */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jitk.h"
#include "base/internal.h"
#include "compile/instance.h"
#include "spec/spec.h"

#ifdef SPEC_DUMP_OOM
void *__libc_malloc(size_t n);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t n);
void __libc_free(void *p);

static long fail_at = -1, nalloc, live;
static int counting;

static int fail_now(void)
{
	return counting && ++nalloc == fail_at;
}

void *malloc(size_t n)
{
	void *p = fail_now() ? NULL : __libc_malloc(n);

	live += p && counting;
	return p;
}

void *calloc(size_t n, size_t size)
{
	void *p = fail_now() ? NULL : __libc_calloc(n, size);

	live += p && counting;
	return p;
}

void *realloc(void *p, size_t n)
{
	void *r = fail_now() ? NULL : __libc_realloc(p, n);

	live += r && !p && counting;
	return r;
}

void free(void *p)
{
	live -= p && counting;
	__libc_free(p);
}

/* One load of path with allocation k failing (-1: none). */
static int oom_load(const char *path, long k, char *msg, size_t size, long *allocs)
{
	const char *files[1] = { path };
	spec_set *set = NULL;
	int rc;

	jitk__error_clear();
	fail_at = k;
	nalloc = live = 0;
	counting = 1;
	rc = jitk__spec_set_load_files(&set, files, 1);
	snprintf(msg, size, "%s", rc ? jitk_error_last()->message : "");
	jitk__spec_set_free(set);
	jitk__error_clear();
	counting = 0;
	*allocs = nalloc;
	return live ? -1000 : rc;
}

static int oom_sweep(const char *path)
{
	char want[512], got[512];
	long total, k, n;
	int rc0 = oom_load(path, -1, want, sizeof(want), &total), rc, nomem = 0;

	for (k = 1; k <= total; k++) {
		rc = oom_load(path, k, got, sizeof(got), &n);
		/* The same result (the message may be lost: jitk_error_last says
		 * "out of memory" when it cannot keep one), or JITK_ENOMEM. */
		if (rc == -1000 || !((rc == rc0 && (!strcmp(got, want) || !strcmp(got, "out of memory"))) ||
				     (rc == JITK_ENOMEM && !strncmp(got, "out of memory", 13)))) {
			printf("FAIL %s: allocation %ld of %ld failing: rc=%d '%s'%s\n", path, k,
			       total, rc, got, rc == -1000 ? " (leaked)" : "");
			return 1;
		}
		nomem += rc == JITK_ENOMEM;
	}
	printf("oom %s: %ld allocations, each failing once: %d loads JITK_ENOMEM, %ld as without "
	       "failures (rc %d)\n", path, total, nomem, total - nomem, rc0);
	return 0;
}
#endif

static const char *const archs[] = { "sm_80", "sm_90", "sm_100a", "compute_120", "sm_10",
				     "sm_9999" };

static void loc(const spec_loc *l)
{
	printf(" @%s:%d:%d", l->file ? l->file : "-", l->line, l->col);
}

static void str(const char *k, const char *s)
{
	printf(" %s=%s%s%s", k, s ? "\"" : "", s ? s : "NULL", s ? "\"" : "");
}

static void cond(const char *k, const spec_cond *c)
{
	size_t i, j;

	printf(" %s={", k);
	for (i = 0; i < c->n; i++) {
		printf("%sp%zu:", i ? " " : "", c->terms[i].param);
		for (j = 0; j < c->terms[i].nvals; j++)
			printf("%s%lld", j ? "," : "", (long long)c->terms[i].vals[j]);
	}
	printf("}");
}

static void range(const spec_arch_range *r)
{
	printf(" arch=%d..%d", r->min, r->max);
}

static void xpr(const char *k, const spec_expr *e)
{
	printf("      %s:", k);
	str("name", e->name);
	str("text", e->text);
	str("message", e->message);
	printf(" e=%s", e->e ? "yes" : "no");
	loc(&e->loc);
	printf("\n");
}

static void gates(const char *ind, const spec_gate *g, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		printf("%sgate", ind);
		cond("when", &g[i].when);
		range(&g[i].arch);
		str("reason", g[i].reason);
		loc(&g[i].loc);
		printf("\n");
	}
}

static void family(const spec_family *f)
{
	size_t i, j;

	printf("family");
	str("name", f->name);
	str("file", f->file);
	str("template", f->template_path);
	str("kernel", f->kernel);
	str("description", f->description);
	printf(" programmatic=%d", f->programmatic);
	loc(&f->loc);
	printf("\n");
	for (i = 0; i < f->nparams; i++) {
		const spec_param *p = &f->params[i];

		printf("  param");
		str("name", p->name);
		printf(" type=%d min=%lld max=%lld multiple_of=%lld", (int)p->type,
		       (long long)p->min, (long long)p->max, (long long)p->multiple_of);
		str("cpp", p->cpp);
		printf(" values=[");
		for (j = 0; j < p->nvalues; j++)
			printf("%s%s", j ? "," : "", p->values[j]);
		printf("] allowed=[");
		for (j = 0; j < p->nallowed; j++)
			printf("%s%lld", j ? "," : "", (long long)p->allowed[j]);
		printf("]");
		loc(&p->loc);
		printf("\n");
	}
	gates("  ", f->gates, f->ngates);
	for (i = 0; i < f->ntuning; i++) {
		const spec_tuning *t = &f->tuning[i];

		printf("  tuning");
		cond("when", &t->when);
		range(&t->arch);
		printf(" arch_specific=%d", t->arch_specific);
		loc(&t->loc);
		printf("\n");
		for (j = 0; j < t->n; j++) {
			printf("    kv");
			str("key", t->kv[j].key);
			printf(" value=%lld", (long long)t->kv[j].value);
			loc(&t->kv[j].loc);
			printf("\n");
		}
	}
	printf("  tuning_keys=[");
	for (i = 0; i < f->ntuning_keys; i++)
		printf("%s%s", i ? "," : "", f->tuning_keys[i]);
	printf("]\n");
	for (i = 0; i < f->nderived; i++)
		xpr("derived", &f->derived[i]);
	for (i = 0; i < f->nconstraints; i++)
		xpr("constraint", &f->constraints[i]);
	printf("  options=[");
	for (i = 0; i < f->noptions; i++)
		printf("%s\"%s\"", i ? "," : "", f->options[i]);
	printf("]\n  dims=[");
	for (i = 0; i < f->ndims; i++)
		printf("%s%s", i ? "," : "", f->dims[i]);
	printf("]\n");
	for (i = 0; i < f->nargs; i++) {
		const spec_arg *a = &f->args[i];

		printf("  arg");
		str("name", a->name);
		printf(" type=%d elem=%s", (int)a->type, a->elem ? a->elem->name : "NULL");
		str("cpp", a->cpp);
		printf(" const=%d io=%d ndim=%zu strides=%s nullable=%d configured=%d",
		       a->is_const, (int)a->io, a->ndim, a->strides ? "yes" : "no", a->nullable,
		       (int)a->configured);
		printf(" default=%d/%lld/%.9g", a->has_default, (long long)a->def_i,
		       (double)a->def_f);
		cond("when", &a->when);
		loc(&a->loc);
		printf("\n");
		for (j = 0; j < a->ndim; j++)
			xpr("shape", &a->shape[j]);
		for (j = 0; a->strides && j < a->ndim; j++)
			xpr("stride", &a->strides[j]);
		xpr("align", &a->align);
	}
	for (i = 0; i < f->nmay_alias; i++)
		printf("  may_alias %zu %zu\n", f->may_alias[i][0], f->may_alias[i][1]);
	xpr("grid", &f->grid);
	xpr("block", &f->block);
	xpr("smem", &f->smem);
	for (i = 0; i < f->nchecks; i++)
		xpr("check", &f->checks[i]);
}

static void symbol(const spec_set *s, const spec_symbol *y)
{
	size_t i, j;

	printf("symbol");
	str("name", y->name);
	str("family", y->fam->name);
	str("description", y->description);
	printf(" first=%zu ninsts=%zu", y->first, y->ninsts);
	loc(&y->loc);
	printf("\n  vals=");
	for (i = 0; i < y->fam->nparams; i++) {
		printf("%s[", i ? " " : "");
		for (j = 0; j < y->nvals[i]; j++)
			printf("%s%lld", j ? "," : "", (long long)y->vals[i][j]);
		printf("]");
	}
	printf("\n");
	gates("  ", y->gates, y->ngates);
	for (i = 0; i < y->nfallback; i++) {
		const spec_fallback *fb = &y->fallback[i];

		printf("  fallback");
		str("symbol", fb->symbol);
		loc(&fb->loc);
		printf("\n");
		for (j = 0; j < fb->nmap; j++) {
			printf("    map");
			str("callee", fb->map[j].callee);
			str("caller", fb->map[j].caller);
			printf(" flat=%d", fb->map[j].flat);
			loc(&fb->map[j].loc);
			printf("\n");
		}
	}
	(void)s;
}

static void specialize_all(const spec_set *s, int with_tu)
{
	size_t i, a, k;

	for (i = 0; i < s->ninsts; i++) {
		const spec_instance *in = &s->insts[i];

		printf("instance %zu", i);
		str("name", in->name);
		str("symbol", in->sym->name);
		printf(" vals=");
		for (k = 0; k < in->sym->fam->nparams; k++)
			printf("%s%lld", k ? "," : "", (long long)in->vals[k]);
		printf(" fallback=");
		for (k = 0; k < in->nfallback; k++)
			printf("%s%zu", k ? "," : "", in->fallback[k]);
		printf("\n");
		for (a = 0; a < JITK_ARRAY_SIZE(archs); a++) {
			jitk_variant v;
			jitk_arch arch;
			int rc;

			jitk__arch_parse(&arch, archs[a]);
			rc = jitk__specialize(&v, s, i, arch);
			printf("  %s: rc=%d", archs[a], rc);
			if (rc) {
				printf(" %s\n", jitk_error_last()->message);
				continue;
			}
			printf(" available=%d reason=\"%s\" env=", v.available, v.reason);
			for (k = 0; k < v.nenv; k++)
				printf("%s%s=%lld", k ? "," : "", v.env[k].name,
				       (long long)v.env[k].value);
			printf("\n");
			if (with_tu && a == 1 && v.available) {
				jitk_template tpl;
				jitk_tu tu;

				memset(&tpl, 0, sizeof(tpl));
				if (jitk__template_load(&tpl, s->insts[i].sym->fam->template_path, 1) ||
				    jitk__tu_make(&tu, &v, &tpl)) {
					printf("  tu: %s\n", jitk_error_last()->message);
				} else {
					printf("  tu name_expr=%s\n%s\n", tu.name_expr, tu.source);
					for (k = 0; k < tu.noptions; k++)
						printf("  option %s\n", tu.options[k]);
					jitk__tu_free(&tu);
				}
				jitk__template_free(&tpl);
			}
		}
	}
	printf("by_name=");
	for (i = 0; i < s->ninsts; i++)
		printf("%s%zu", i ? "," : "", s->by_name[i]);
	printf("\n");
}

static void dump_set(const spec_set *s, int with_tu)
{
	size_t i;

	printf("files=");
	for (i = 0; i < s->nfiles; i++)
		printf("%s%s", i ? "," : "", s->files[i]);
	printf("\n");
	for (i = 0; i < s->nfams; i++)
		family(s->fams[i]);
	for (i = 0; i < s->nsyms; i++)
		symbol(s, s->syms[i]);
	specialize_all(s, with_tu);
}

static void result(int rc, spec_set *set, int with_tu)
{
	const jitk_error *e = jitk_error_last();

	printf("rc=%d\n", rc);
	if (rc) {
		printf("message=%s\ndetail=%s\n", e->message, e->detail ? e->detail : "(none)");
		if (set)
			printf("BUG: a set after an error\n");
		return;
	}
	dump_set(set, with_tu);
	jitk__spec_set_free(set);
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (!fseek(f, 0, SEEK_END) && (n = ftell(f)) >= 0 && !fseek(f, 0, SEEK_SET) &&
	    (buf = malloc((size_t)n + 1)) && fread(buf, 1, (size_t)n, f) == (size_t)n) {
		*len = (size_t)n;
	} else {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

static void describe_dirs(const char *dirs)
{
	jitk_compiler_options o;
	jitk_compiler *c = NULL;
	char *out = NULL;
	size_t i, a;
	int rc;

	jitk_compiler_options_init(&o, JITK_COMPILER_OPTIONS_VERSION);
	o.specs = dirs;
	o.cache_dir = "";
	o.cache_path = "";
	rc = jitk_compiler_new(&c, &o);
	printf("compiler rc=%d\n", rc);
	if (rc) {
		printf("message=%s\n", jitk_error_last()->message);
		return;
	}
	rc = jitk_describe(&out, c, NULL);
	printf("describe rc=%d\n%s\n", rc, out ? out : jitk_error_last()->message);
	jitk_free(out);
	for (i = 0; i < jitk_instance_count(c); i++)
		for (a = 0; a < 4; a++) {
			out = NULL;
			rc = jitk_explain(&out, c, jitk_instance_name(c, i), archs[a]);
			printf("explain %s %s rc=%d\n%s\n", jitk_instance_name(c, i), archs[a], rc,
			       out ? out : jitk_error_last()->message);
			jitk_free(out);
		}
	jitk_compiler_free(c);
}

int main(int argc, char **argv)
{
	int i, rc;

	if (argc >= 3 && !strcmp(argv[1], "--dirs")) {
		char *copy = jitk__strdup(argv[2]), *p, *save = NULL;
		const char *dirs[64];
		size_t n = 0;
		spec_set *set = NULL;

		for (p = strtok_r(copy, ":", &save); p && n < 64; p = strtok_r(NULL, ":", &save))
			dirs[n++] = p;
		rc = jitk__spec_set_load_dirs(&set, dirs, n);
		result(rc, set, 1);
		free(copy);
		describe_dirs(argv[2]);
		return 0;
	}
#ifdef SPEC_DUMP_OOM
	if (argc >= 2 && !strcmp(argv[1], "--oom")) {
		jitk__error(JITK_EINVAL, "warm up");
		printf("oom sweep\n");
		for (i = 2, rc = 0; i < argc; i++)
			rc |= oom_sweep(argv[i]);
		return rc;
	}
#endif
	if (argc >= 2 && !strcmp(argv[1], "--files")) {
		for (i = 2; i < argc; i++) {
			const char *files[1] = { argv[i] };
			spec_set *set = NULL;

			printf("== %s\n", argv[i]);
			rc = jitk__spec_set_load_files(&set, files, 1);
			result(rc, set, 0);
		}
		return 0;
	}
	if (argc >= 3 && !strcmp(argv[1], "--buffers")) {
		for (i = 3; i < argc; i++) {
			spec_set *set = NULL;
			size_t len = 0;
			char *text = slurp(argv[i], &len);

			printf("== %s\n", argv[i]);
			if (!text) {
				printf("unreadable\n");
				continue;
			}
			rc = jitk__spec_set_load_buffer(&set, argv[2], text, len);
			result(rc, set, 0);
			free(text);
		}
		return 0;
	}
	fprintf(stderr, "usage: spec_dump --dirs D[:D...] | --files F... | --buffers NAME F...\n");
	return 2;
}
