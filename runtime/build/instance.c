/* instance.c - specialization: which variant runs on an architecture, with
 * which tuning, and the exact translation unit NVRTC compiles for it. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build/instance.h"

static int arch_in(const spec_arch_range *r, int cc)
{
	return (!r->min || cc >= r->min) && (!r->max || cc <= r->max);
}

static void range_text(char *buf, size_t n, const spec_arch_range *r)
{
	if (r->min && r->max)
		snprintf(buf, n, "sm_%d to sm_%d", r->min, r->max);
	else if (r->min)
		snprintf(buf, n, "sm_%d or newer", r->min);
	else
		snprintf(buf, n, "sm_%d or older", r->max);
}

static int bind(jitk_variant *v, const char *name, int64_t value)
{
	size_t i;

	for (i = 0; i < v->nenv; i++)
		if (!strcmp(v->env[i].name, name)) {
			v->env[i].value = value;
			return 0;
		}
	if (v->nenv == JITK_MAX_NAMES)
		return -1;
	v->env[v->nenv].name = name;
	v->env[v->nenv].value = value;
	v->nenv++;
	return 0;
}

int jitk__variant_lookup(void *variant, const char *name, int64_t *out)
{
	const jitk_variant *v = variant;
	size_t i;

	for (i = 0; i < v->nenv; i++)
		if (!strcmp(v->env[i].name, name)) {
			*out = v->env[i].value;
			return 0;
		}
	return -1;
}

static void unavailable(jitk_variant *v, const spec_loc *loc, const char *fmt,
			...) JITK_PRINTF(3, 4);

/* A gate forbids the variant: the reason is spec text (a block scalar may
 * hold newlines), kept one printable line. */
static void unavailable(jitk_variant *v, const spec_loc *loc, const char *fmt,
			...)
{
	jbuf raw, out;
	va_list ap;

	v->available = 0;
	jitk__jbuf_init(&raw);
	jitk__jbuf_init(&out);
	va_start(ap, fmt);
	jitk__jbuf_vprintf(&raw, fmt, ap);
	va_end(ap);
	if (loc)
		jitk__jbuf_printf(&raw, " [%s:%d:%d]", loc->file, loc->line, loc->col);
	jitk__spec_escape(&out, raw.data ? raw.data : "out of memory");
	snprintf(v->reason, sizeof(v->reason), "%s", out.data ? out.data : "out of memory");
	jitk__jbuf_free(&raw);
	jitk__jbuf_free(&out);
}

static int spec_fail(const jitk_variant *v, const spec_loc *loc, const char *fmt,
		     ...) JITK_PRINTF(3, 4);

/* The spec cannot be specialized for this instance and architecture: an
 * error (JITK_ESPEC) at loc, naming both - never a gate. */
static int spec_fail(const jitk_variant *v, const spec_loc *loc, const char *fmt,
		     ...)
{
	char arch[JITK_ARCH_STRLEN];
	jbuf msg;
	va_list ap;
	int rc;

	jitk__arch_format(arch, v->arch);
	jitk__jbuf_init(&msg);
	va_start(ap, fmt);
	jitk__jbuf_vprintf(&msg, fmt, ap);
	va_end(ap);
	rc = msg.oom ? jitk__error(JITK_ENOMEM, "out of memory")
		     : jitk__spec_error(JITK_ESPEC, NULL, "%s:%d:%d: error: %s (%s on %s)",
					loc->file, loc->line, loc->col, msg.data,
					v->set->insts[v->inst].name, arch);
	jitk__jbuf_free(&msg);
	return rc;
}

static int check_gates(jitk_variant *v, const spec_gate *g, size_t n,
		       const int64_t *vals)
{
	size_t i;

	for (i = 0; i < n; i++) {
		char range[64];

		if (!jitk__spec_cond_holds(&g[i].when, vals) || arch_in(&g[i].arch, v->arch.cc))
			continue;
		range_text(range, sizeof(range), &g[i].arch);
		unavailable(v, &g[i].loc, "needs %s: %s", range, g[i].reason);
		return 1;
	}
	return 0;
}

/* Where the family first sets tuning key key (every key is set somewhere). */
static const spec_loc *tuning_key_loc(const spec_family *f, const char *key)
{
	size_t i, j;

	for (i = 0; i < f->ntuning; i++)
		for (j = 0; j < f->tuning[i].n; j++)
			if (!strcmp(f->tuning[i].kv[j].key, key))
				return &f->tuning[i].kv[j].loc;
	return &f->loc;
}

/* Evaluate a spec expression in the variant; an error names it. */
static int eval_expr(const jitk_variant *v, const spec_expr *x, const char *what,
		     int64_t *out)
{
	char err[160];

	if (!jitk__expr_eval(x->e, jitk__variant_lookup, (void *)v, out, err, sizeof(err)))
		return 0;
	return spec_fail(v, &x->loc, "%s '%s' cannot be evaluated: %s", what,
			 jitk__spec_quote(x->text), err);
}

/* The launch geometry that depends only on the variant, checked here so
 * that explain and precompile catch it, not only a launch on the GPU. */
static int check_geometry(const jitk_variant *v, const spec_family *f)
{
	int64_t val;
	size_t i;
	int rc;

	if ((rc = eval_expr(v, &f->block, "launch.block", &val)))
		return rc;
	if (val < 1 || val > SPEC_MAX_BLOCK)
		return spec_fail(v, &f->block.loc,
				 "launch.block '%s' is %lld; it must be 1 to %d",
				 jitk__spec_quote(f->block.text), (long long)val, SPEC_MAX_BLOCK);
	if (f->smem.e) {
		if ((rc = eval_expr(v, &f->smem, "launch.shared_bytes", &val)))
			return rc;
		if (val < 0 || val > SPEC_MAX_SHARED_BYTES)
			return spec_fail(v, &f->smem.loc,
					 "launch.shared_bytes '%s' is %lld; it must be 0 to %d",
					 jitk__spec_quote(f->smem.text), (long long)val,
					 SPEC_MAX_SHARED_BYTES);
	}
	for (i = 0; i < f->nargs; i++) {
		const spec_arg *a = &f->args[i];

		if (a->type != AT_PTR || !a->align.e)
			continue;
		if ((rc = eval_expr(v, &a->align, "alignment", &val)))
			return rc;
		if (val < 1 || val > SPEC_MAX_ALIGN || (val & (val - 1)))
			return spec_fail(v, &a->align.loc,
					 "alignment '%s' of argument %s is %lld; it must be a power "
					 "of two from 1 to %d",
					 jitk__spec_quote(a->align.text), a->name, (long long)val,
					 SPEC_MAX_ALIGN);
	}
	return 0;
}

int jitk__specialize(jitk_variant *v, const spec_set *set, size_t inst,
		     jitk_arch arch)
{
	const spec_instance *in = &set->insts[inst];
	const spec_family *f = in->sym->fam;
	size_t i, j;
	int arch_specific = 0, rc;

	memset(v, 0, sizeof(*v));
	v->set = set;
	v->inst = inst;
	v->arch = arch;
	v->target = arch;
	v->available = 1;
	for (i = 0; i < f->nparams; i++)
		if (bind(v, f->params[i].name, in->vals[i]))
			goto too_many;
	if (check_gates(v, f->gates, f->ngates, in->vals) ||
	    check_gates(v, in->sym->gates, in->sym->ngates, in->vals))
		return JITK_OK;

	/* Tuning: every matching entry in order, later ones override. */
	for (i = 0; i < f->ntuning; i++) {
		const spec_tuning *t = &f->tuning[i];

		if (!arch_in(&t->arch, arch.cc) || !jitk__spec_cond_holds(&t->when, in->vals))
			continue;
		for (j = 0; j < t->n; j++)
			if (bind(v, t->kv[j].key, t->kv[j].value))
				goto too_many;
		if (t->arch_specific >= 0)
			arch_specific = t->arch_specific;
	}
	for (i = 0; i < f->ntuning_keys; i++) {
		int64_t dummy;

		if (jitk__variant_lookup(v, f->tuning_keys[i], &dummy))
			return spec_fail(v, tuning_key_loc(f, f->tuning_keys[i]),
					 "tuning key '%s' has no value (no tuning entry that "
					 "applies here sets it)", f->tuning_keys[i]);
	}
	if (arch_specific && arch.kind == 's' && !arch.suffix)
		v->target.suffix = 'a';

	/* Derived values, constraints and the geometry: a value that cannot
	 * be computed or a constraint that fails is a bug in the spec, an
	 * error - a gate is the only way to say "not on this architecture". */
	for (i = 0; i < f->nderived; i++) {
		const spec_expr *d = &f->derived[i];
		int64_t val;

		if ((rc = eval_expr(v, d, "derived value", &val)))
			return rc;
		if (bind(v, d->name, val))
			goto too_many;
	}
	for (i = 0; i < f->nconstraints; i++) {
		const spec_expr *c = &f->constraints[i];
		int64_t ok;

		if ((rc = eval_expr(v, c, "constraint", &ok)))
			return rc;
		if (!ok)
			return spec_fail(v, &c->loc, "constraint '%s' fails: %s",
					 jitk__spec_quote(c->text), c->message);
	}
	return check_geometry(v, f);
too_many:
	return spec_fail(v, &f->loc, "more than %d parameter, tuning and derived names",
			 JITK_MAX_NAMES);
}

const char *jitk__variant_params(const jitk_variant *v, char *buf, size_t n)
{
	const spec_instance *in = &v->set->insts[v->inst];
	const spec_family *f = in->sym->fam;
	size_t i, used = 0;

	buf[0] = '\0';
	for (i = 0; i < f->nparams && used < n; i++) {
		char tmp[32];
		int k = snprintf(buf + used, n - used, "%s%s=%s", i ? " " : "",
				 f->params[i].name,
				 jitk__spec_value_text(&f->params[i], in->vals[i], tmp));

		if (k < 0)
			break;
		used += (size_t)k;
	}
	return buf;
}

/* ------------------------------------------------------------ sources */

#define INLINE_MAX_FILES 64
#define INLINE_MAX_DEPTH 16

typedef struct {
	char *paths[INLINE_MAX_FILES];
	size_t n;
} seen_set;

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

/* `#include "name"` on this line? Then name and len locate the name. */
static int quoted_include(const char *line, const char *end, const char **name,
			  size_t *len)
{
	const char *p = line, *q;

	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	if (p == end || *p != '#')
		return 0;
	p++;
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	if ((size_t)(end - p) < 7 || strncmp(p, "include", 7))
		return 0;
	p += 7;
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	if (p == end || *p != '"')
		return 0;
	q = memchr(p + 1, '"', (size_t)(end - p - 1));
	if (!q)
		return 0;
	*name = p + 1;
	*len = (size_t)(q - p - 1);
	return 1;
}

static int is_pragma_once(const char *line, const char *end)
{
	const char *p = line;

	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	if (p == end || *p++ != '#')
		return 0;
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	if ((size_t)(end - p) < 6 || strncmp(p, "pragma", 6))
		return 0;
	p += 6;
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	if ((size_t)(end - p) < 4 || strncmp(p, "once", 4))
		return 0;
	p += 4;
	while (p < end && isspace((unsigned char)*p))
		p++;
	return p == end;
}

static int inline_file(jbuf *out, const char *path, seen_set *seen, int depth,
		       const char *from, int from_line)
{
	char *text = NULL, *real = realpath(path, NULL);
	const char *p, *end;
	size_t i, len;
	int line = 1, rc = 0;

	if (!real) {
		if (from)
			return jitk__error(JITK_ESPEC, "%s:%d:1: error: included file '%s' not found",
					   from, from_line, path);
		return jitk__error(JITK_ESPEC, "%s: template not found", path);
	}
	for (i = 0; i < seen->n; i++)
		if (!strcmp(seen->paths[i], real)) {
			free(real);
			return 0;
		}
	if (depth > INLINE_MAX_DEPTH || seen->n == INLINE_MAX_FILES) {
		free(real);
		return jitk__error(JITK_ESPEC, "%s:%d:1: error: includes nested too deeply or too many files",
				   from ? from : path, from_line);
	}
	seen->paths[seen->n++] = real;
	if ((rc = jitk__read_file(&text, &len, path, 1u << 20)))
		return jitk__error(JITK_ESPEC, "template %s: %s", path,
				   jitk_error_last()->message);
	jitk__jbuf_printf(out, "#line 1 \"%s\"\n", base_name(path));
	for (p = text, end = text + len; p < end; line++) {
		const char *eol = memchr(p, '\n', (size_t)(end - p)), *name;
		size_t nlen;

		if (!eol)
			eol = end;
		if (quoted_include(p, eol, &name, &nlen)) {
			const char *slash = strrchr(path, '/');
			char *inc = slash ? jitk__asprintf("%.*s/%.*s", (int)(slash - path), path,
							   (int)nlen, name)
					  : jitk__strndup(name, nlen);

			if (!inc) {
				rc = jitk__error(JITK_ENOMEM, "out of memory");
				break;
			}
			rc = inline_file(out, inc, seen, depth + 1, path, line);
			free(inc);
			if (rc)
				break;
			jitk__jbuf_printf(out, "#line %d \"%s\"\n", line + 1, base_name(path));
		} else if (is_pragma_once(p, eol)) {
			jitk__jbuf_puts(out, "\n");
		} else {
			jitk__jbuf_put(out, p, (size_t)(eol - p));
			jitk__jbuf_puts(out, "\n");
		}
		p = eol < end ? eol + 1 : end;
	}
	free(text);
	return rc;
}

int jitk__inline_template(char **out, const char *path)
{
	seen_set seen;
	jbuf b;
	size_t i;
	int rc;

	*out = NULL;
	seen.n = 0;
	jitk__jbuf_init(&b);
	rc = inline_file(&b, path, &seen, 0, NULL, 0);
	for (i = 0; i < seen.n; i++)
		free(seen.paths[i]);
	if (rc) {
		jitk__jbuf_free(&b);
		return rc;
	}
	*out = jitk__jbuf_detach(&b);
	return *out ? 0 : jitk__error(JITK_ENOMEM, "out of memory");
}

static int render_targ(jbuf *b, const jitk_variant *v, const char *name)
{
	const spec_family *f = v->set->insts[v->inst].sym->fam;
	int p = jitk__spec_param_index(f, name);
	int64_t val;

	if (jitk__variant_lookup((void *)v, name, &val))
		return jitk__error(JITK_ESPEC, "%s: template argument '%s' has no value",
				   f->name, name);
	if (p >= 0 && f->params[p].type == PT_ENUM)
		jitk__jbuf_printf(b, "%s::%s", f->params[p].cpp, f->params[p].values[val]);
	else if (p >= 0 && f->params[p].type == PT_BOOL)
		jitk__jbuf_puts(b, val ? "true" : "false");
	else
		jitk__jbuf_printf(b, "%lld", (long long)val);
	return 0;
}

static const char *const base_options[] = {
	"--std=c++17", "--fmad=true", "--ftz=false", "--prec-div=true",
	"--prec-sqrt=true",
};

int jitk__tu_make(jitk_tu *tu, const jitk_variant *v, const char *template_text)
{
	const spec_instance *in = &v->set->insts[v->inst];
	const spec_family *f = in->sym->fam;
	char target[JITK_ARCH_STRLEN], params[256];
	jbuf src, ex;
	size_t i, n = 0;
	int rc = 0;

	memset(tu, 0, sizeof(*tu));
	jitk__jbuf_init(&src);
	jitk__jbuf_init(&ex);
	jitk__jbuf_printf(&ex, "%s<", f->kernel);
	for (i = 0; i < f->ntargs && !rc; i++) {
		if (i)
			jitk__jbuf_puts(&ex, ", ");
		rc = render_targ(&ex, v, f->targs[i]);
	}
	jitk__jbuf_puts(&ex, ">");
	if (rc)
		goto fail;

	jitk__arch_format(target, v->target);
	jitk__jbuf_printf(&src, "// jitk translation unit: family %s (%s), target %s\n",
		    f->name, jitk__variant_params(v, params, sizeof(params)), target);
	jitk__jbuf_puts(&src, "// bindings:");
	for (i = 0; i < v->nenv; i++)
		jitk__jbuf_printf(&src, " %s=%lld", v->env[i].name, (long long)v->env[i].value);
	jitk__jbuf_puts(&src, "\n");
	jitk__jbuf_puts(&src, template_text);
	jitk__jbuf_puts(&src, "#line 1 \"jitk-instantiation\"\n");
	jitk__jbuf_printf(&src, "static_assert(jitk::same_type<decltype(&%s), void (*)(", ex.data);
	for (i = 0; i < f->nargs; i++)
		jitk__jbuf_printf(&src, "%s%s", i ? ", " : "", f->args[i].cpp);
	jitk__jbuf_printf(&src, ")>::value,\n              \"the parameters of %s do not match the args list of spec family %s\");\n",
		    f->kernel, f->name);
	tu->source = jitk__jbuf_detach(&src);
	tu->name_expr = jitk__jbuf_detach(&ex);
	if (!tu->source || !tu->name_expr)
		goto oom;

	tu->options = calloc(1 + JITK_ARRAY_SIZE(base_options) + f->noptions,
			     sizeof(*tu->options));
	if (!tu->options)
		goto oom;
	tu->options[n++] = jitk__asprintf("--gpu-architecture=%s", target);
	for (i = 0; i < JITK_ARRAY_SIZE(base_options); i++)
		tu->options[n++] = jitk__strdup(base_options[i]);
	for (i = 0; i < f->noptions; i++)
		tu->options[n++] = jitk__strdup(f->options[i]);
	tu->noptions = n;
	for (i = 0; i < n; i++)
		if (!tu->options[i])
			goto oom;
	return 0;
oom:
	rc = jitk__error(JITK_ENOMEM, "out of memory");
fail:
	jitk__jbuf_free(&src);
	jitk__jbuf_free(&ex);
	jitk__tu_free(tu);
	return rc;
}

void jitk__tu_free(jitk_tu *tu)
{
	size_t i;

	free(tu->source);
	free(tu->name_expr);
	for (i = 0; i < tu->noptions; i++)
		free(tu->options[i]);
	free(tu->options);
	memset(tu, 0, sizeof(*tu));
}
