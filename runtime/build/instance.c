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

static void unavailable(jitk_variant *v, const spec_loc *loc, const char *fmt,
			...)
{
	va_list ap;
	int k;

	v->available = 0;
	va_start(ap, fmt);
	k = vsnprintf(v->reason, sizeof(v->reason), fmt, ap);
	va_end(ap);
	if (k >= 0 && (size_t)k < sizeof(v->reason) && loc)
		snprintf(v->reason + k, sizeof(v->reason) - (size_t)k, " [%s:%d:%d]",
			 loc->file, loc->line, loc->col);
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

int jitk__specialize(jitk_variant *v, const spec_set *set, size_t inst,
		     jitk_arch arch)
{
	const spec_instance *in = &set->insts[inst];
	const spec_family *f = in->sym->fam;
	char err[160];
	size_t i, j;
	int arch_specific = 0;

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
			return jitk__error(JITK_ESPEC,
					   "%s:%d:%d: error: tuning key '%s' has no value on sm_%d "
					   "(no matching tuning entry sets it)",
					   f->loc.file, f->loc.line, f->loc.col,
					   f->tuning_keys[i], arch.cc);
	}
	if (arch_specific && arch.kind == 's' && !arch.suffix)
		v->target.suffix = 'a';

	for (i = 0; i < f->nderived; i++) {
		const spec_expr *d = &f->derived[i];
		int64_t val;

		if (jitk__expr_eval(d->e, jitk__variant_lookup, v, &val, err, sizeof(err))) {
			unavailable(v, &d->loc, "'%s = %s' cannot be evaluated: %s", d->name,
				    d->text, err);
			return JITK_OK;
		}
		if (bind(v, d->name, val))
			goto too_many;
	}
	for (i = 0; i < f->nconstraints; i++) {
		const spec_expr *c = &f->constraints[i];
		int64_t ok;

		if (jitk__expr_eval(c->e, jitk__variant_lookup, v, &ok, err, sizeof(err))) {
			unavailable(v, &c->loc, "constraint '%s' cannot be evaluated: %s",
				    c->text, err);
			return JITK_OK;
		}
		if (!ok) {
			unavailable(v, &c->loc, "%s (constraint '%s')", c->message, c->text);
			return JITK_OK;
		}
	}
	return JITK_OK;
too_many:
	return jitk__error(JITK_ESPEC, "%s: more than %d parameter, tuning and derived names",
			   f->name, JITK_MAX_NAMES);
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

/* The C++ type and value of binding i: enum and bool parameters as
 * themselves, integers as int (long long beyond its range). */
static void render_member(jbuf *b, const jitk_variant *v, size_t i)
{
	const spec_family *f = v->set->insts[v->inst].sym->fam;
	const jitk_binding *e = &v->env[i];
	int p = jitk__spec_param_index(f, e->name);

	if (p >= 0 && f->params[p].type == PT_ENUM)
		jitk__jbuf_printf(b, "  static constexpr %s %s = %s::%s;\n", f->params[p].cpp,
				  e->name, f->params[p].cpp, f->params[p].values[e->value]);
	else if (p >= 0 && f->params[p].type == PT_BOOL)
		jitk__jbuf_printf(b, "  static constexpr bool %s = %s;\n", e->name,
				  e->value ? "true" : "false");
	else if (e->value >= INT32_MIN && e->value <= INT32_MAX)
		jitk__jbuf_printf(b, "  static constexpr int %s = %lld;\n", e->name,
				  (long long)e->value);
	else
		jitk__jbuf_printf(b, "  static constexpr long long %s = %lldLL;\n", e->name,
				  (long long)e->value);
}

/* The parameter struct's name: the instance's name as an identifier
 * ("tadd3[cols=256]" -> "tadd3_cols_256"), so that profilers show which
 * instance a kernel is. */
static void render_struct_name(jbuf *b, const char *inst)
{
	const char *p;

	for (p = inst; *p; p++) {
		if (*p == '[' || *p == '=' || *p == ',')
			jitk__jbuf_puts(b, "_");
		else if (*p == '-')
			jitk__jbuf_puts(b, "m");
		else if (*p != ']')
			jitk__jbuf_put(b, p, 1);
	}
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
	int rc;

	memset(tu, 0, sizeof(*tu));
	jitk__jbuf_init(&src);
	jitk__jbuf_init(&ex);
	jitk__jbuf_printf(&ex, "%s<", f->kernel);
	render_struct_name(&ex, in->name);
	jitk__jbuf_puts(&ex, ">");

	jitk__arch_format(target, v->target);
	jitk__jbuf_printf(&src, "// jitk translation unit: family %s (%s), target %s\n",
		    f->name, jitk__variant_params(v, params, sizeof(params)), target);
	jitk__jbuf_puts(&src, template_text);
	/* The template's parameters, by name: P::cols, P::threads... */
	jitk__jbuf_puts(&src, "#line 1 \"jitk-instantiation\"\nstruct ");
	render_struct_name(&src, in->name);
	jitk__jbuf_puts(&src, " {\n");
	for (i = 0; i < v->nenv; i++)
		render_member(&src, v, i);
	jitk__jbuf_puts(&src, "};\n");
	/* The signature check needs nothing from the template's headers. */
	jitk__jbuf_puts(&src, "namespace jitk_check {\n"
		       "template <class A, class B> struct same { static constexpr bool value = false; };\n"
		       "template <class A> struct same<A, A> { static constexpr bool value = true; };\n"
		       "}\n");
	jitk__jbuf_printf(&src, "static_assert(jitk_check::same<decltype(&%s), void (*)(", ex.data);
	for (i = 0; i < f->nargs; i++)
		jitk__jbuf_printf(&src, "%s%s", i ? ", " : "", f->args[i].cpp);
	jitk__jbuf_printf(&src, ")>::value,\n              \"the parameters of %s do not match the args of spec family %s\");\n",
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
