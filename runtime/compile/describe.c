/* describe.c - what the specs define, for people and programs: names and
 * selectors, jitk explain (with the argument table), jitk source, and a
 * JSON description that bindings generate their operations from. */
#include <math.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>

#include "compile/compile.h"

const char *jitk_version(void)
{
	return JITK_VERSION;
}

int jitk_version_number(void)
{
	return JITK_VERSION_NUMBER;
}

void jitk_free(void *p)
{
	free(p);
}

/* ---------------------------------------------------------------- names */

size_t jitk_symbol_count(const jitk_compiler *c)
{
	return c ? c->specs->nsyms : 0;
}

const char *jitk_symbol_name(const jitk_compiler *c, size_t i)
{
	return c && i < c->specs->nsyms ? c->specs->syms[i]->name : NULL;
}

size_t jitk_instance_count(const jitk_compiler *c)
{
	return c ? c->specs->ninsts : 0;
}

const char *jitk_instance_name(const jitk_compiler *c, size_t i)
{
	return c && i < c->specs->ninsts ? c->specs->insts[i].name : NULL;
}

int jitk_select(size_t **out, size_t *n, const jitk_compiler *c, const char *selector)
{
	spec_selection sel;
	size_t i, k = 0;
	int rc;

	if ((rc = JITK_NULL_ARGS("jitk_select", "out n compiler selector", out, n, c, selector)))
		return rc;
	*out = NULL;
	*n = 0;
	if ((rc = jitk__spec_select(&sel, c->specs, selector)))
		return rc;
	*out = malloc(sel.n * sizeof(**out));
	if (!*out) {
		jitk__spec_selection_free(&sel);
		return jitk__error(JITK_ENOMEM, "out of memory");
	}
	for (i = 0; i < sel.sym->ninsts; i++)
		if (sel.match[i])
			(*out)[k++] = sel.sym->first + i;
	*n = k;
	jitk__spec_selection_free(&sel);
	return JITK_OK;
}

static int check_arch(const jitk_compiler *c, jitk_arch *a, const char *arch)
{
	if (jitk__arch_parse(a, arch))
		return jitk__spec_arch_error(arch, strlen(arch));
	return jitk__check_target(c, *a);
}

/* ------------------------------------------------------------- explain */

static const char *io_name(const spec_arg *a)
{
	if (a->type == AT_TMA)
		return "tma";
	if (a->type != AT_TENSOR)
		return a->type == AT_I32 ? "i32" : a->type == AT_I64 ? "i64" : "f32";
	return a->io == IO_OUT ? "out" : a->io == IO_INOUT ? "inout" : a->io == IO_SCRATCH ? "scratch" : "in";
}

/* A dimension as the variant knows it: a number where it is a constant of
 * the variant (cols -> 256), else its text (rows). */
static void put_dim(jbuf *b, const jitk_variant *v, const spec_expr *d)
{
	char err[64];
	int64_t x;

	if (!jitk__expr_eval(d->e, jitk__variant_lookup, (void *)v, &x, err, sizeof(err)))
		jitk__jbuf_printf(b, "%lld", (long long)x);
	else
		jitk__jbuf_puts(b, d->text);
}

static void put_dims(jbuf *b, const jitk_variant *v, const spec_expr *d, size_t n)
{
	size_t i;

	jitk__jbuf_puts(b, "[");
	for (i = 0; i < n; i++) {
		if (i)
			jitk__jbuf_puts(b, ", ");
		put_dim(b, v, &d[i]);
	}
	jitk__jbuf_puts(b, "]");
}

/* The argument table of a variant, one line per argument it takes. */
static void describe_args(jbuf *out, const jitk_variant *v, const char *indent)
{
	const spec_instance *in = &v->set->insts[v->inst];
	const spec_family *f = in->sym->fam;
	size_t i;

	jitk__jbuf_printf(out, "%sargs:\n", indent);
	for (i = 0; i < f->nargs; i++) {
		const spec_arg *a = &f->args[i];
		jbuf line;

		if (!jitk__spec_cond_holds(&a->when, in->vals))
			continue;
		jitk__jbuf_init(&line);
		jitk__jbuf_printf(&line, "%s  %-14s %s", indent, a->name, io_name(a));
		if (a->type == AT_TENSOR) {
			char err[64];
			int64_t al;

			jitk__jbuf_printf(&line, "%*s%-9s ", strlen(io_name(a)) < 7 ? 7 - (int)strlen(io_name(a)) : 1, "", a->elem->name);
			put_dims(&line, v, a->shape, a->ndim);
			if (a->strides) {
				jitk__jbuf_puts(&line, " strides ");
				put_dims(&line, v, a->strides, a->ndim);
			}
			if (!jitk__expr_eval(a->align.e, jitk__variant_lookup, (void *)v, &al, err,
					     sizeof(err)))
				jitk__jbuf_printf(&line, " align %lld", (long long)al);
			if (a->nullable)
				jitk__jbuf_puts(&line, " nullable");
			if (a->configured)
				jitk__jbuf_puts(&line, " configured: positive_finite");
		} else if (a->type == AT_TMA) {
			const spec_tma *t = a->tma;

			jitk__jbuf_printf(&line, "%*sof %s, box ", 4, "", t->tensor);
			put_dims(&line, v, t->box, t->nbox);
			if (t->elem_strides) {
				jitk__jbuf_puts(&line, " element strides ");
				put_dims(&line, v, t->elem_strides, t->nelem_strides);
			}
			jitk__jbuf_puts(&line, ", swizzle ");
			put_dim(&line, v, &t->swizzle);
			jitk__jbuf_puts(&line, ", interleave ");
			put_dim(&line, v, &t->interleave);
			jitk__jbuf_puts(&line, ", L2 promotion ");
			put_dim(&line, v, &t->l2);
			jitk__jbuf_printf(&line, ", out of bounds %s%s (jitk makes it)",
					  t->oob_nan ? "NaN" : "0",
					  t->batch ? ", a batch of one outermost" : "");
		} else if (a->has_default) {
			if (a->type == AT_F32)
				jitk__jbuf_printf(&line, "%*sdefault %g", 4, "", (double)a->def_f);
			else
				jitk__jbuf_printf(&line, "%*sdefault %lld", 4, "", (long long)a->def_i);
		}
		jitk__jbuf_puts(&line, "\n");
		jitk__jbuf_puts(out, line.data ? line.data : "");
		jitk__jbuf_free(&line);
	}
}

/* The header packages a family includes from: where each is and its tree
 * hash (what the key holds), or why it cannot be used here. */
static void describe_packages(jbuf *out, jitk_compiler *c, const spec_family *f,
			      const char *indent)
{
	size_t i;

	for (i = 0; i < f->nincludes; i++) {
		const jitk_package *p;

		jitk__jbuf_printf(out, "%s%s", indent, i ? "          " : "packages: ");
		if (jitk__package_get(c->packages, f->includes[i].package, &p)) {
			jitk__jbuf_printf(out, "%s: not usable here: %s\n", f->includes[i].name,
					  jitk_error_last()->message);
			jitk__error_clear();
			continue;
		}
		jitk__jbuf_printf(out, "%s sha256:%s (%s, from %s; %zu files, %.1f MB)\n",
				  p->spec->name, p->hex, p->root, p->from, p->files,
				  (double)p->bytes / 1e6);
	}
}

/* The other instances of v's symbol that are its translation unit (size
 * classes that tune alike: docs/spec-format.md), one compile for all. */
static void describe_shared(jbuf *out, jitk_compiler *c, const jitk_variant *v, const jitk_tu *tu,
			    const char *indent)
{
	static const jitk_template no_template = { .text = (char *)"" };
	const spec_instance *in = &c->specs->insts[v->inst];
	const spec_symbol *s = in->sym;
	jitk_variant *o = malloc(sizeof(*o));
	size_t i, q, n = 0;

	for (i = s->first; o && i < s->first + s->ninsts; i++) {
		jitk_tu t;

		for (q = 0; q < s->fam->nparams; q++)
			if (!s->fam->params[q].size_of && c->specs->insts[i].vals[q] != in->vals[q])
				break;
		if (i == v->inst || q < s->fam->nparams || jitk__specialize(o, c->specs, i, v->arch) ||
		    !o->available)
			continue; /* another parameter than a size class apart, or gated */
		if (jitk__tu_make(&t, o, &no_template))
			continue;
		if (!strcmp(t.source, tu->source)) {
			if (n++)
				jitk__jbuf_puts(out, ", ");
			else
				jitk__jbuf_printf(out, "%sshares:   ", indent);
			jitk__jbuf_puts(out, c->specs->insts[i].name);
		}
		jitk__tu_free(&t);
	}
	if (n)
		jitk__jbuf_puts(out, " (one translation unit, compiled once: the size classes tune "
			       "alike)\n");
	free(o);
}

static void describe_variant(jbuf *out, jitk_compiler *c, const jitk_variant *v,
			     const char *indent)
{
	static const jitk_template no_template = { .text = (char *)"" };
	const spec_instance *in = &c->specs->insts[v->inst];
	const spec_family *f = in->sym->fam;
	jitk_tu tu;
	char target[JITK_ARCH_STRLEN];
	size_t i;

	jitk__arch_format(target, v->target);
	jitk__jbuf_printf(out, "%starget:   %s\n%sbindings:", indent, target, indent);
	for (i = f->nparams; i < v->nenv; i++)
		jitk__jbuf_printf(out, " %s=%lld", v->env[i].name, (long long)v->env[i].value);
	jitk__jbuf_puts(out, "\n");
	if (!jitk__tu_make(&tu, v, &no_template)) {
		jitk__jbuf_printf(out, "%skernel:   %s\n", indent, tu.name_expr);
		if (tu.builder_expr)
			jitk__jbuf_printf(out, "%sbuilder:  %s (makes the kernel's parameter on the "
					  "device; docs/spec-format.md)\n", indent, tu.builder_expr);
		describe_shared(out, c, v, &tu, indent);
		jitk__tu_free(&tu);
	}
	describe_packages(out, c, f, indent);
	describe_args(out, v, indent);
}

/* --------------------------------------------------- explain --cache */

static const char *probe_state_text(jitk_probe_state st)
{
	switch (st) {
	case JITK_PROBE_HIT: return "cached: this image runs";
	case JITK_PROBE_MISSING: return "not cached";
	case JITK_PROBE_REJECTED: return "cached, but the entry fails verification (a miss)";
	case JITK_PROBE_GATED: return "a gate forbids the instance on this target";
	case JITK_PROBE_FOREIGN: return "an arch-specific image, which runs on its own SM only";
	case JITK_PROBE_NO_TARGET: return "its tuning asks for a target NVRTC does not have";
	}
	return "?";
}

/* Why the winning image runs on gpu. */
static void put_why(jbuf *b, const jitk_run_probe *p, jitk_arch gpu)
{
	char t[JITK_ARCH_STRLEN], g[JITK_ARCH_STRLEN];

	jitk__arch_format(t, p->target);
	jitk__arch_format(g, gpu);
	if (p->kind == JITK_RUN_EXACT)
		jitk__jbuf_printf(b, "the exact target of %s", g);
	else if (p->kind == JITK_RUN_FAMILY)
		jitk__jbuf_printf(b, "%s is a family target: its code runs on sm_%d and every later "
				  "sm_%dx GPU, %s among them, and nothing more exact is cached",
				  t, p->target.cc, p->target.cc / 10, g);
	else
		jitk__jbuf_printf(b, "PTX: the driver compiles %s for %s when it loads it (the first "
				  "load takes longer), and no cubin that runs here is cached", t, g);
}

/* Whether two variants bind every name alike (the tuning an image was
 * built with against the GPU's own). */
static int same_bindings(const jitk_variant *x, const jitk_variant *y)
{
	size_t i;

	if (x->nenv != y->nenv)
		return 0;
	for (i = 0; i < x->nenv; i++)
		if (strcmp(x->env[i].name, y->env[i].name) || x->env[i].value != y->env[i].value)
			return 0;
	return 1;
}

/* Which image a runtime on gpu would run for inst (the lookup order of
 * jitk__lookup_run, over the compiler's tiers), and each target it tries. */
static void describe_image(jbuf *b, jitk_compiler *c, size_t inst, jitk_arch gpu,
			   const jitk_variant *own, const char *indent)
{
	jitk_run_probe probes[JITK_MAX_RUN_TARGETS];
	jitk_build bb;
	size_t n = 0, i;
	int rc = jitk__lookup_run(&bb, c, inst, gpu.cc, probes, &n);
	char t[JITK_ARCH_STRLEN], t_origin[200];

	if (rc == JITK_OK) {
		const jitk_run_probe *p = &probes[n - 1];
		jitk_tier *tier = jitk__compiler_tier(c, p->origin);
		jitk_tier_ask q;

		/* where it is: the tier that served it says (the lookup's own list) */
		memset(&q, 0, sizeof(q));
		memcpy(q.key, p->key, JITK_HASH_SIZE);
		memcpy(q.key_hex, p->key_hex, sizeof(q.key_hex));
		jitk__arch_format(q.target, p->target);
		jitk__jbuf_printf(b, "%simage:    %s, ", indent, q.target);
		if (tier)
			tier->ops->describe(tier, &q, b);
		else
			jitk__jbuf_printf(b, "cached (key %s)", p->key_hex);
		jitk__jbuf_puts(b, ": ");
		put_why(b, p, gpu);
		jitk__jbuf_puts(b, "\n");
		/* provenance: recorded in the entry (sign.h) */
		jitk__origin_text(t_origin, sizeof(t_origin), &bb.entry);
		jitk__jbuf_printf(b, "%sorigin:   %s\n", indent, t_origin);
		if (!same_bindings(&bb.variant, own)) {
			jitk__jbuf_printf(b, "%s           built with its target's tuning:", indent);
			for (i = c->specs->insts[inst].sym->fam->nparams; i < bb.variant.nenv; i++)
				jitk__jbuf_printf(b, " %s=%lld", bb.variant.env[i].name,
						  (long long)bb.variant.env[i].value);
			jitk__jbuf_puts(b, "\n");
		}
		jitk__build_free(&bb);
	} else if (rc == JITK_ENOENT && c->force_compile) {
		jitk__jbuf_printf(b, "%simage:    none: force_compile ignores the cache; a runtime "
				  "compiles it\n", indent);
	} else if (rc == JITK_ENOENT) {
		jitk__arch_format(t, n ? probes[0].target : gpu);
		jitk__jbuf_printf(b, "%simage:    none cached: a runtime would compile it for %s (key %s)\n",
				  indent, t, n ? probes[0].key_hex : "?");
	} else {
		jitk__jbuf_printf(b, "%simage:    none: %s\n", indent, jitk_error_last()->message);
	}
	jitk__error_clear();
	if (n)
		jitk__jbuf_printf(b, "%slookup:\n", indent);
	for (i = 0; i < n; i++) {
		const jitk_run_probe *p = &probes[i];
		char asked[JITK_ARCH_STRLEN + 16];

		jitk__arch_format(asked, p->asked);
		if (p->target.suffix != p->asked.suffix) {
			jitk__arch_format(t, p->target);
			snprintf(asked + strlen(asked), sizeof(asked) - strlen(asked), " (%s)", t);
		}
		jitk__jbuf_printf(b, "%s  %-20s %-6s %-16s %s\n", indent, asked,
				  p->kind == JITK_RUN_EXACT ? "exact" : p->kind == JITK_RUN_FAMILY ? "family" : "PTX",
				  *p->key_hex ? p->key_hex : "-", probe_state_text(p->state));
	}
}

/* Explain one instance; *runs is cleared when neither it nor its
 * fallback can run. with_cache: also which cached image would run. */
static int explain_one(jbuf *b, jitk_compiler *c, size_t inst, jitk_arch a, int *runs,
		       int with_cache)
{
	const spec_instance *in = &c->specs->insts[inst];
	jitk_variant v;
	char params[256], archs[JITK_ARCH_STRLEN];
	size_t i;
	int rc, ok = 1;

	if ((rc = jitk__specialize(&v, c->specs, inst, a)))
		return rc;
	if (v.available && (rc = jitk__check_target(c, v.target)))
		return rc;
	jitk__arch_format(archs, a);
	if (!v.available) {
		for (i = 0; i < in->nfallback; i++) {
			jitk_variant fv;

			if (jitk__specialize(&fv, c->specs, in->fallback[i], a) || !fv.available)
				ok = 0;
		}
		if (!in->nfallback)
			ok = 0;
	}
	jitk__jbuf_printf(b, "%s on %s: %s\n", in->name, archs,
			  v.available ? "runs" : ok ? "falls back" : "unavailable");
	jitk__jbuf_printf(b, "  symbol:   %s (family %s: %s)\n", in->name, in->sym->fam->name,
			  jitk__variant_params(&v, params, sizeof(params)));
	if (v.available) {
		describe_variant(b, c, &v, "  ");
		if (with_cache)
			describe_image(b, c, inst, a, &v, "  ");
	} else {
		jitk__jbuf_printf(b, "  reason:   %s\n", v.reason);
		if (!in->nfallback)
			jitk__jbuf_puts(b, "  fallback: none\n");
		for (i = 0; i < in->nfallback; i++) {
			jitk_variant fv;

			if (jitk__specialize(&fv, c->specs, in->fallback[i], a)) {
				/* the step's spec error, on its own line */
				jitk__jbuf_printf(b, "  fallback: %s (step %zu of %zu): %s\n",
						  c->specs->insts[in->fallback[i]].name, i + 1,
						  in->nfallback, jitk_error_last()->message);
				continue;
			}
			jitk__jbuf_printf(b, "  fallback: %s (step %zu of %zu): %s\n",
					  c->specs->insts[in->fallback[i]].name, i + 1, in->nfallback,
					  fv.available ? "runs" : fv.reason);
			if (fv.available)
				describe_variant(b, c, &fv, "    ");
			if (fv.available && with_cache)
				describe_image(b, c, in->fallback[i], a, &fv, "    ");
		}
	}
	if (!ok)
		*runs = 0;
	return 0;
}

static int explain(char **out, jitk_compiler *c, const char *name, const char *arch,
		   int with_cache)
{
	size_t *insts = NULL, n = 0, i;
	jitk_arch a;
	jbuf b;
	char archs[JITK_ARCH_STRLEN];
	int rc, runs = 1;

	if ((rc = JITK_NULL_ARGS(with_cache ? "jitk_explain_cache" : "jitk_explain",
				 "out compiler name arch", out, c, name, arch)))
		return rc;
	*out = NULL;
	if ((rc = check_arch(c, &a, arch)))
		return rc;
	if (with_cache && (a.kind != 's' || a.suffix))
		return jitk__error(JITK_EINVAL, "%s is not a GPU: the image that runs is chosen for a "
				   "GPU's own architecture (sm_NN)", arch);
	if ((rc = jitk_select(&insts, &n, c, name)))
		return rc;
	jitk__jbuf_init(&b);
	for (i = 0; i < n && !rc; i++) {
		if (i)
			jitk__jbuf_puts(&b, "\n");
		rc = explain_one(&b, c, insts[i], a, &runs, with_cache);
	}
	free(insts);
	if (rc) {
		jitk__jbuf_free(&b);
		return rc;
	}
	*out = jitk__jbuf_detach(&b);
	if (!*out)
		return jitk__error(JITK_ENOMEM, "out of memory");
	jitk__arch_format(archs, a);
	if (!runs)
		return jitk__error(JITK_EARCH, "%s cannot run on %s, nor its fallback", name, archs);
	return JITK_OK;
}

int jitk_explain(char **out, jitk_compiler *c, const char *name, const char *arch)
{
	return explain(out, c, name, arch, 0);
}

int jitk_explain_cache(char **out, jitk_compiler *c, const char *name, const char *arch)
{
	return explain(out, c, name, arch, 1);
}

/* -------------------------------------------------------------- source */

int jitk_source(char **out, char **out_options, jitk_compiler *c, const char *name,
		const char *arch)
{
	uint8_t key[JITK_HASH_SIZE];
	jitk_variant v;
	jitk_tu tu;
	jitk_arch a;
	size_t inst, i;
	jbuf o;
	int rc;

	if ((rc = JITK_NULL_ARGS("jitk_source", "out compiler name arch", out, c, name, arch)))
		return rc;
	*out = NULL;
	if (out_options)
		*out_options = NULL;
	if ((rc = check_arch(c, &a, arch)) || (rc = jitk__spec_find(c->specs, name, &inst)) ||
	    (rc = jitk__prepare(&tu, key, &v, c, inst, a)))
		return rc;
	jitk__jbuf_init(&o);
	for (i = 0; i < tu.noptions; i++)
		jitk__jbuf_printf(&o, "%s\n", tu.options[i]);
	/* the header packages' directories: given to NVRTC, not in the key */
	for (i = 0; i < tu.nincludes; i++)
		jitk__jbuf_printf(&o, "--include-path=%s\n", tu.includes[i]);
	jitk__jbuf_printf(&o, "name-expression %s\n", tu.name_expr);
	*out = tu.source;
	tu.source = NULL;
	jitk__tu_free(&tu);
	if (out_options)
		*out_options = jitk__jbuf_detach(&o);
	else
		jitk__jbuf_free(&o);
	if (out_options && !*out_options) {
		free(*out);
		*out = NULL;
		return jitk__error(JITK_ENOMEM, "out of memory");
	}
	return JITK_OK;
}

/* ---------------------------------------------------------------- JSON */

static void json_str(jbuf *b, const char *s)
{
	jitk__jbuf_puts(b, "\"");
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			jitk__jbuf_printf(b, "\\%c", ch);
		else if (ch < 0x20)
			jitk__jbuf_printf(b, "\\u%04x", ch);
		else
			jitk__jbuf_put(b, s, 1);
	}
	jitk__jbuf_puts(b, "\"");
}

static void json_value(jbuf *b, const spec_param *p, int64_t v)
{
	char buf[32];

	if (p->type == PT_INT)
		jitk__jbuf_printf(b, "%lld", (long long)v);
	else if (p->type == PT_BOOL)
		jitk__jbuf_puts(b, v ? "true" : "false");
	else
		json_str(b, jitk__spec_value_text(p, v, buf));
}

static void json_exprs(jbuf *b, const spec_expr *e, size_t n)
{
	size_t i;

	jitk__jbuf_puts(b, "[");
	for (i = 0; i < n; i++) {
		if (i)
			jitk__jbuf_puts(b, ", ");
		json_str(b, e[i].text);
	}
	jitk__jbuf_puts(b, "]");
}

static void json_arg(jbuf *b, const spec_set *set, const spec_symbol *s, const spec_arg *a)
{
	size_t i;

	jitk__jbuf_puts(b, "{\"name\": ");
	json_str(b, a->name);
	if (a->type == AT_TENSOR) {
		jitk__jbuf_printf(b, ", \"kind\": \"tensor\", \"dtype\": \"%s\", \"io\": \"%s\", \"shape\": ",
				  a->elem->name, io_name(a));
		json_exprs(b, a->shape, a->ndim);
		jitk__jbuf_puts(b, ", \"strides\": ");
		if (a->strides)
			json_exprs(b, a->strides, a->ndim);
		else
			jitk__jbuf_puts(b, "null");
		jitk__jbuf_printf(b, ", \"nullable\": %s, \"configured\": %s",
				  a->nullable ? "true" : "false",
				  a->configured ? "\"positive_finite\"" : "null");
	} else {
		jitk__jbuf_printf(b, ", \"kind\": \"%s\"", io_name(a));
		if (a->has_default && a->type == AT_F32)
			jitk__jbuf_printf(b, ", \"default\": %.9g", (double)a->def_f);
		else if (a->has_default)
			jitk__jbuf_printf(b, ", \"default\": %lld", (long long)a->def_i);
	}
	jitk__jbuf_puts(b, ", \"present\": [");
	for (i = 0; i < s->ninsts; i++)
		jitk__jbuf_printf(b, "%s%s", i ? ", " : "",
				  jitk__spec_cond_holds(&a->when, set->insts[s->first + i].vals)
					  ? "true" : "false");
	jitk__jbuf_puts(b, "]}");
}

static void json_symbol(jbuf *b, const spec_set *set, const spec_symbol *s)
{
	const spec_family *f = s->fam;
	size_t i, j, k;

	jitk__jbuf_puts(b, "{\"name\": ");
	json_str(b, s->name);
	jitk__jbuf_puts(b, ", \"family\": ");
	json_str(b, f->name);
	jitk__jbuf_puts(b, ", \"description\": ");
	json_str(b, s->description ? s->description : f->description ? f->description : "");
	jitk__jbuf_puts(b, ", \"params\": [");
	for (i = 0; i < f->nparams; i++) {
		const spec_param *p = &f->params[i];

		jitk__jbuf_printf(b, "%s{\"name\": ", i ? ", " : "");
		json_str(b, p->name);
		jitk__jbuf_printf(b, ", \"type\": \"%s\", \"values\": [",
				  p->type == PT_INT ? "int" : p->type == PT_BOOL ? "bool" : "enum");
		for (j = 0; j < s->nvals[i]; j++) {
			if (j)
				jitk__jbuf_puts(b, ", ");
			json_value(b, p, s->vals[i][j]);
		}
		if (p->type == PT_ENUM) { /* the numbers shape and launch expressions see */
			jitk__jbuf_puts(b, "], \"codes\": [");
			for (j = 0; j < s->nvals[i]; j++)
				jitk__jbuf_printf(b, "%s%lld", j ? ", " : "", (long long)s->vals[i][j]);
		}
		jitk__jbuf_puts(b, "]}");
	}
	jitk__jbuf_puts(b, "], \"instances\": [");
	for (i = 0; i < s->ninsts; i++) {
		const spec_instance *in = &set->insts[s->first + i];

		jitk__jbuf_printf(b, "%s{\"name\": ", i ? ", " : "");
		json_str(b, in->name);
		jitk__jbuf_puts(b, ", \"params\": {");
		for (j = 0; j < f->nparams; j++) {
			jitk__jbuf_printf(b, "%s", j ? ", " : "");
			json_str(b, f->params[j].name);
			jitk__jbuf_puts(b, ": ");
			json_value(b, &f->params[j], in->vals[j]);
		}
		jitk__jbuf_puts(b, "}}");
	}
	jitk__jbuf_puts(b, "], \"dims\": [");
	for (i = 0; i < f->ndims; i++) {
		if (i)
			jitk__jbuf_puts(b, ", ");
		json_str(b, f->dims[i]);
	}
	/* A TMA descriptor is no argument a caller gives: listed apart, with
	 * the tensor jitk makes it from. */
	jitk__jbuf_puts(b, "], \"args\": [");
	for (i = 0, k = 0; i < f->nargs; i++) {
		if (f->args[i].type == AT_TMA)
			continue;
		if (k++)
			jitk__jbuf_puts(b, ", ");
		json_arg(b, set, s, &f->args[i]);
	}
	jitk__jbuf_puts(b, "], \"tma\": [");
	for (i = 0, k = 0; i < f->nargs; i++) {
		if (f->args[i].type != AT_TMA)
			continue;
		jitk__jbuf_printf(b, "%s{\"name\": ", k++ ? ", " : "");
		json_str(b, f->args[i].name);
		jitk__jbuf_puts(b, ", \"tensor\": ");
		json_str(b, f->args[i].tma->tensor);
		jitk__jbuf_puts(b, "}");
	}
	jitk__jbuf_puts(b, "], \"may_alias\": [");
	for (i = 0; i < f->nmay_alias; i++) {
		jitk__jbuf_printf(b, "%s[", i ? ", " : "");
		json_str(b, f->args[f->may_alias[i][0]].name);
		jitk__jbuf_puts(b, ", ");
		json_str(b, f->args[f->may_alias[i][1]].name);
		jitk__jbuf_puts(b, "]");
	}
	jitk__jbuf_puts(b, "], \"fallback\": [");
	for (i = 0; i < s->nfallback; i++) {
		const spec_fallback *fb = &s->fallback[i];

		jitk__jbuf_printf(b, "%s{\"symbol\": ", i ? ", " : "");
		json_str(b, fb->symbol);
		jitk__jbuf_puts(b, ", \"map\": {");
		for (k = 0; k < fb->nmap; k++) {
			jitk__jbuf_printf(b, "%s", k ? ", " : "");
			json_str(b, fb->map[k].callee);
			jitk__jbuf_printf(b, ": {\"arg\": ");
			json_str(b, fb->map[k].caller);
			jitk__jbuf_printf(b, ", \"flat\": %s}", fb->map[k].flat ? "true" : "false");
		}
		jitk__jbuf_puts(b, "}}");
	}
	jitk__jbuf_puts(b, "]}");
}

int jitk_describe(char **out, const jitk_compiler *c, const char *selector)
{
	spec_selection sel;
	size_t i;
	jbuf b;
	int rc;

	if ((rc = JITK_NULL_ARGS("jitk_describe", "out compiler", out, c)))
		return rc;
	*out = NULL;
	memset(&sel, 0, sizeof(sel));
	if (selector && (rc = jitk__spec_select(&sel, c->specs, selector)))
		return rc;
	jitk__jbuf_init(&b);
	jitk__jbuf_printf(&b, "{\"jitk\": \"%s\", \"symbols\": [", JITK_VERSION);
	for (i = 0; i < c->specs->nsyms; i++) {
		const spec_symbol *s = c->specs->syms[i];

		if (selector && s != sel.sym)
			continue;
		if (b.len && b.data[b.len - 1] == '}')
			jitk__jbuf_puts(&b, ", ");
		json_symbol(&b, c->specs, s);
	}
	jitk__jbuf_puts(&b, "]}\n");
	jitk__spec_selection_free(&sel);
	*out = jitk__jbuf_detach(&b);
	return *out ? JITK_OK : jitk__error(JITK_ENOMEM, "out of memory");
}

int jitk_bench_cases(jitk_bench_case **out, size_t *n, const jitk_compiler *c, const char *family)
{
	const spec_family *f = NULL;
	jitk_bench_case *cases;
	jitk_bench_tensor *t;
	size_t i, j, k, nt = 0;
	int rc;

	if ((rc = JITK_NULL_ARGS("jitk_bench_cases", "out n compiler family", out, n, c, family)))
		return rc;
	*out = NULL;
	*n = 0;
	for (i = 0; i < c->specs->nfams && !f; i++)
		if (!strcmp(c->specs->fams[i]->name, family))
			f = c->specs->fams[i];
	if (!f) {
		const char *best = NULL;
		int bestd = 3, d;

		for (i = 0; i < c->specs->nfams; i++)
			if ((d = jitk__edit_distance(family, c->specs->fams[i]->name)) < bestd) {
				bestd = d;
				best = c->specs->fams[i]->name;
			}
		return jitk__error(JITK_ENOENT, "no family '%s' in the specs%s%s%s", family,
				   best ? " (did you mean '" : "", best ? best : "", best ? "'?)" : "");
	}
	for (i = 0; i < f->nbench; i++)
		nt += f->bench[i].ntensors;
	/* one block: the cases, then their tensors (names stay the spec set's) */
	if (!(cases = calloc(1, (f->nbench ? f->nbench : 1) * sizeof(*cases) +
				   (nt ? nt : 1) * sizeof(*t))))
		return jitk__error(JITK_ENOMEM, "out of memory");
	t = (jitk_bench_tensor *)(void *)(cases + (f->nbench ? f->nbench : 1));
	for (i = 0; i < f->nbench; i++) {
		const spec_bench *b = &f->bench[i];
		int64_t bytes = 0;

		cases[i].symbol = b->symbol;
		cases[i].tensors = t;
		cases[i].ntensors = b->ntensors;
		cases[i].flops = b->flops;
		cases[i].peak = b->peak;
		for (j = 0; j < b->ntensors; j++, t++) {
			const spec_arg *a = &f->args[b->tensors[j].arg];
			int64_t elems = 1;

			t->name = a->name;
			t->dtype.code = a->elem->code;
			t->dtype.bits = a->elem->bits;
			t->dtype.lanes = 1;
			t->written = a->io != IO_IN;
			t->configured = a->configured != RULE_NONE;
			t->ndim = (int32_t)b->tensors[j].ndims;
			for (k = 0; k < b->tensors[j].ndims && k < JITK_MAX_DIMS; k++) {
				t->shape[k] = b->tensors[j].dims[k];
				elems *= t->shape[k]; /* the spec bounds it: 2^48 bytes */
			}
			bytes += elems * (a->elem->bits / 8);
		}
		cases[i].bytes = b->bytes ? b->bytes : bytes;
	}
	*out = cases;
	*n = f->nbench;
	return 0;
}
