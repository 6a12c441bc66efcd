/* header.c - jitk header FAMILY [-o FILE]: a C header of typed calls for
 * one kernel family, generated from its spec (jitk_describe's JSON), so
 * that no family-specific C lives in the library (docs/api.md, "Typed
 * calls"). Every function it writes is a static inline over jitk_call:
 * the fields of the family's args struct become named arguments, tensors
 * contiguous and shaped by the spec's expressions over the dimension
 * fields; the spec picks the instance and checks everything. Exit status:
 * 0 ok, 1 failure, 2 usage. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "jitk.h"
#include "json.h"

static const char usage_header[] =
	"usage: jitk header FAMILY [-o FILE] [--specs DIR]\n"
	"\n"
	"Write a C header of typed calls for the kernel family FAMILY, generated\n"
	"from its spec: a struct of its arguments (device pointers, dimensions,\n"
	"scalars), and for each symbol S static inline functions over the generic\n"
	"call: jitk_S (strict), jitk_try_S (the reason when it cannot run),\n"
	"jitk_auto_S (S or its fallback, for symbols with one), plus\n"
	"jitk_FAMILY_call (any selector, the fields that are set) and\n"
	"jitk_FAMILY_configure_ARG for arguments the spec says are configured.\n"
	"To stdout, or to FILE (written next to it, then renamed).\n";

/* One argument of the family (its spec's args, in order). */
typedef enum { ARG_TENSOR, ARG_I32, ARG_I64, ARG_F32 } arg_kind;
typedef struct {
	const char *name;
	arg_kind kind;
	const json *j;   /* its describe entry (of the first symbol) */
	int field;       /* it is a field of the args struct */
	int every;       /* every instance of every symbol takes it */
} garg;

typedef struct {
	const char *family;
	const json *syms[512];
	size_t nsyms;
	garg args[64];
	size_t nargs;
	const char *dims[32]; /* fields that are no argument: parameters, family dims */
	size_t ndims;
	FILE *out;
	char err[512];
} gen;

static int gen_fail(gen *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int gen_fail(gen *g, const char *fmt, ...)
{
	va_list ap;

	if (!g->err[0]) {
		va_start(ap, fmt);
		vsnprintf(g->err, sizeof(g->err), fmt, ap);
		va_end(ap);
	}
	return -1;
}

static int is_dim(const gen *g, const char *name, size_t n)
{
	size_t i;

	for (i = 0; i < g->ndims; i++)
		if (strlen(g->dims[i]) == n && !strncmp(g->dims[i], name, n))
			return 1;
	return 0;
}

static garg *arg_named(gen *g, const char *name, size_t n)
{
	size_t i;

	for (i = 0; i < g->nargs; i++)
		if (strlen(g->args[i].name) == n && !strncmp(g->args[i].name, name, n))
			return &g->args[i];
	return NULL;
}

/* How many instances of symbol s take argument name: none (0), some (1),
 * all (2). */
static int presence(const json *s, const char *name)
{
	const json *args = json_get(s, "args"), *p = NULL;
	size_t i, on = 0;

	for (i = 0; args && i < args->n && !p; i++) {
		const char *n = json_get_str(&args->items[i], "name");

		if (n && !strcmp(n, name))
			p = json_get(&args->items[i], "present");
	}
	if (!p || p->type != JSON_ARRAY || !p->n)
		return 0;
	for (i = 0; i < p->n; i++)
		on += p->items[i].type == JSON_BOOL && p->items[i].number;
	return on == p->n ? 2 : on > 0;
}

/* Whether name is among the items (strings) of a json array. */
static int in_list(const json *list, const char *name, size_t n)
{
	size_t i;

	for (i = 0; list && i < list->n; i++)
		if (list->items[i].type == JSON_STRING && strlen(list->items[i].str) == n &&
		    !strncmp(list->items[i].str, name, n))
			return 1;
	return 0;
}

static int is_param(const json *s, const char *name, size_t n)
{
	const json *params = json_get(s, "params");
	size_t i;

	for (i = 0; params && i < params->n; i++) {
		const char *p = json_get_str(&params->items[i], "name");

		if (p && strlen(p) == n && !strncmp(p, name, n))
			return 1;
	}
	return 0;
}

/* Each identifier of the expressions in list (shape or strides) to fn. */
static int each_ident(gen *g, const json *list, int (*fn)(gen *, const char *, size_t, void *),
		      void *ctx)
{
	size_t i;

	for (i = 0; list && list->type == JSON_ARRAY && i < list->n; i++) {
		const char *p = list->items[i].type == JSON_STRING ? list->items[i].str : "";

		while (*p) {
			size_t n = 0;

			if (isalpha((unsigned char)*p) || *p == '_') {
				while (isalnum((unsigned char)p[n]) || p[n] == '_')
					n++;
				if (fn(g, p, n, ctx))
					return -1;
				p += n;
			} else {
				p++;
			}
		}
	}
	return 0;
}

static int mark_shape_ident(gen *g, const char *name, size_t n, void *ctx)
{
	const json *s = ctx;
	garg *a = arg_named(g, name, n);

	if (a) {
		if (a->kind == ARG_TENSOR)
			return gen_fail(g, "a shape names the tensor %.*s", (int)n, name);
		a->field = 1;
		return 0;
	}
	if (is_dim(g, name, n))
		return 0;
	if (!is_param(s, name, n) && !in_list(json_get(s, "dims"), name, n))
		return gen_fail(g, "a shape names %.*s, which is no argument, parameter or dimension "
				   "of the family (a typed call cannot tell its value)", (int)n, name);
	if (g->ndims == CLI_ARRAY_SIZE(g->dims))
		return gen_fail(g, "more than %zu dimensions", CLI_ARRAY_SIZE(g->dims));
	g->dims[g->ndims] = strndup(name, n);
	if (!g->dims[g->ndims])
		return gen_fail(g, "out of memory");
	g->ndims++;
	return 0;
}

static int mark_stride_ident(gen *g, const char *name, size_t n, void *ctx)
{
	int *named = ctx;
	garg *a = arg_named(g, name, n);

	if (a)
		named[a - g->args] = 1;
	return 0;
}

/* The family's arguments, which are fields, which every symbol takes, and
 * the dimensions. A scalar that only strides name is left to the call
 * (the contiguous tensors tell it), so it is no field. */
static int collect(gen *g)
{
	const json *args = json_get(g->syms[0], "args");
	int stride_named[64] = { 0 };
	size_t i, k;

	if (!args || args->type != JSON_ARRAY)
		return gen_fail(g, "no argument table");
	if (args->n > CLI_ARRAY_SIZE(g->args))
		return gen_fail(g, "more than %zu arguments", CLI_ARRAY_SIZE(g->args));
	for (i = 0; i < args->n; i++) {
		const json *a = &args->items[i];
		const char *kind = json_get_str(a, "kind");
		garg *ga = &g->args[g->nargs++];

		ga->name = json_get_str(a, "name");
		ga->j = a;
		if (!ga->name || !kind)
			return gen_fail(g, "argument %zu has no name or kind", i);
		if (json_get_str(a, "io") && !strcmp(json_get_str(a, "io"), "scratch")) {
			g->nargs--; /* the runtime's, not the caller's */
			continue;
		}
		if (!strcmp(kind, "tensor"))
			ga->kind = ARG_TENSOR;
		else if (!strcmp(kind, "i32"))
			ga->kind = ARG_I32;
		else if (!strcmp(kind, "i64"))
			ga->kind = ARG_I64;
		else if (!strcmp(kind, "f32"))
			ga->kind = ARG_F32;
		else
			return gen_fail(g, "argument %s is of kind '%s'", ga->name, kind);
		ga->every = 1;
		for (k = 0; k < g->nsyms; k++) {
			int p = presence(g->syms[k], ga->name);

			ga->field |= p > 0;
			ga->every &= p == 2;
		}
	}
	for (i = 0; i < g->nargs; i++) {
		garg *a = &g->args[i];

		if (a->kind != ARG_TENSOR || !a->field)
			continue;
		if (each_ident(g, json_get(a->j, "shape"), mark_shape_ident, (void *)g->syms[0]) ||
		    each_ident(g, json_get(a->j, "strides"), mark_stride_ident, stride_named))
			return -1;
	}
	/* a scalar no shape names but strides do: the call takes it from them */
	for (i = 0; i < g->nargs; i++) {
		garg *a = &g->args[i];
		int in_shape = 0;

		if (a->kind == ARG_TENSOR || !stride_named[i] || !a->field)
			continue;
		for (k = 0; k < g->nargs && !in_shape; k++) {
			const json *sh = json_get(g->args[k].j, "shape");

			in_shape = g->args[k].kind == ARG_TENSOR && g->args[k].field &&
				   in_list(sh, a->name, strlen(a->name));
		}
		if (!in_shape)
			a->field = 0;
	}
	return 0;
}

/* ------------------------------------------------------------- output */

static const char *dtype_macro(const char *dtype)
{
	static const char *const names[][2] = {
		{ "bf16", "JITK_DTYPE_BF16" }, { "fp8_e4m3", "JITK_DTYPE_FP8_E4M3" },
		{ "f32", "JITK_DTYPE_F32" },   { "i32", "JITK_DTYPE_I32" },
		{ "i64", "JITK_DTYPE_I64" },   { "u8", "JITK_DTYPE_U8" },
	};
	size_t i;

	for (i = 0; dtype && i < CLI_ARRAY_SIZE(names); i++)
		if (!strcmp(names[i][0], dtype))
			return names[i][1];
	return NULL;
}

/* The expression e (a shape's dimension) as C over the fields of a:
 * identifiers, integers, + - * / % and parentheses. */
static int c_expr(gen *g, char *out, size_t n, const char *e, const char *arg)
{
	size_t used = 0;
	const char *p = e;

	while (*p) {
		int w = 0;

		if (isalpha((unsigned char)*p) || *p == '_') {
			size_t k = 0;

			while (isalnum((unsigned char)p[k]) || p[k] == '_')
				k++;
			w = snprintf(out + used, n - used, "(int64_t)a->%.*s", (int)k, p);
			p += k;
		} else if (isdigit((unsigned char)*p)) {
			size_t k = 0;

			while (isdigit((unsigned char)p[k]))
				k++;
			w = snprintf(out + used, n - used, "%.*s", (int)k, p);
			p += k;
		} else if (strchr("+-*/%() ", *p)) {
			w = snprintf(out + used, n - used, "%c", *p);
			p++;
		} else {
			return gen_fail(g, "the shape of %s has '%s': a typed call takes identifiers, "
					   "integers, + - * / %% and parentheses", arg, e);
		}
		if (w < 0 || (size_t)w >= n - used)
			return gen_fail(g, "the shape of %s is too long", arg);
		used += (size_t)w;
	}
	return 0;
}

static const char *c_type(arg_kind k)
{
	return k == ARG_I32 ? "int32_t" : k == ARG_F32 ? "float" : "int64_t";
}

/* A shape or strides list as text: "[rows, hidden]". */
static void list_text(char *out, size_t n, const json *list)
{
	size_t i, used = 0;

	used += (size_t)snprintf(out, n, "[");
	for (i = 0; list && i < list->n && used < n; i++)
		used += (size_t)snprintf(out + used, n - used, "%s%s", i ? ", " : "",
					 list->items[i].type == JSON_STRING ? list->items[i].str : "?");
	if (used < n)
		snprintf(out + used, n - used, "]");
}

static void emit_struct(gen *g)
{
	FILE *o = g->out;
	size_t i;

	fprintf(o, "/* The arguments of the family's symbols, by the spec's names: device\n"
		   " * pointers of C-contiguous tensors (shaped by the spec from the fields\n"
		   " * below), the dimensions the shapes name and the scalars. A symbol\n"
		   " * reads the fields it takes (each function says which); set them after\n"
		   " * jitk_%s_args_init. */\n"
		   "typedef struct {\n",
		g->family);
	for (i = 0; i < g->nargs; i++) {
		const garg *a = &g->args[i];
		const json *def = json_get(a->j, "default");
		const char *rule = json_get_str(a->j, "configured");
		char decl[128], shape[160];

		if (!a->field)
			continue;
		snprintf(decl, sizeof(decl), "%s %s;", a->kind == ARG_TENSOR ? "jitk_devptr" : c_type(a->kind),
			 a->name);
		if (a->kind == ARG_TENSOR) {
			list_text(shape, sizeof(shape), json_get(a->j, "shape"));
			fprintf(o, "\t%-24s /* %s %s %s%s%s */\n", decl, json_get_str(a->j, "io"),
				json_get_str(a->j, "dtype"), shape, rule ? ", configured: " : "",
				rule ? rule : "");
		} else if (def && def->type == JSON_NUMBER) {
			fprintf(o, "\t%-24s /* default %.9g */\n", decl, def->number);
		} else {
			fprintf(o, "\t%s\n", decl);
		}
	}
	for (i = 0; i < g->ndims; i++) {
		char decl[128];

		snprintf(decl, sizeof(decl), "int64_t %s;", g->dims[i]);
		fprintf(o, "\t%-24s /* a dimension the shapes name */\n", decl);
	}
	fprintf(o, "} jitk_%s_args;\n\n", g->family);
	fprintf(o, "/* Every field 0, but the scalars that have a default: that. */\n"
		   "static inline void jitk_%s_args_init(jitk_%s_args *a)\n{\n"
		   "\tmemset(a, 0, sizeof(*a));\n",
		g->family, g->family);
	for (i = 0; i < g->nargs; i++) {
		const json *def = json_get(g->args[i].j, "default");

		if (g->args[i].field && g->args[i].kind != ARG_TENSOR && def && def->type == JSON_NUMBER)
			fprintf(o, "\ta->%s = %.9g%s;\n", g->args[i].name, def->number,
				g->args[i].kind == ARG_F32 ? "f" : "");
	}
	fprintf(o, "}\n\n");
}

/* The family's one call: the arguments take[] says ('1' pass, '2' pass
 * when set, '0' leave out), in the order of the family's fields. */
static int emit_run(gen *g)
{
	FILE *o = g->out;
	size_t i, d, nf = 0;
	char e[512];

	for (i = 0; i < g->nargs; i++)
		nf += g->args[i].field;
	fprintf(o, "/* (the generated calls' own) The fields take says, one character each in\n"
		   " * the order of the struct's arguments: '1' passed, '2' passed when set\n"
		   " * (nonzero), '0' left out. */\n"
		   "static inline int jitk__%s_run(jitk_call_info *info, jitk_runtime *rt,\n"
		   "\t\tconst char *selector, jitk_call_mode mode, const jitk_%s_args *a,\n"
		   "\t\tconst char *take, jitk_stream stream)\n"
		   "{\n"
		   "\tjitk_tensor t[%zu];\n\tjitk_arg v[%zu];\n\tint64_t d[JITK_MAX_DIMS];\n"
		   "\tsize_t n = 0;\n\tint rc;\n\n"
		   "\tif (!a)\n\t\treturn jitk_call(info, rt, selector, mode, NULL, 0, stream);\n",
		g->family, g->family, nf ? nf : 1, nf ? nf : 1);
	for (i = 0, nf = 0; i < g->nargs; i++) {
		const garg *a = &g->args[i];
		const json *shape = json_get(a->j, "shape");

		if (!a->field)
			continue;
		fprintf(o, "\tif (jitk__typed_take(take[%zu], a->%s != 0)) {\n", nf++, a->name);
		if (a->kind != ARG_TENSOR) {
			fprintf(o, "\t\tjitk__typed_%s(v, &n, \"%s\", a->%s);\n\t}\n",
				a->kind == ARG_I32 ? "i32" : a->kind == ARG_I64 ? "i64" : "f32", a->name,
				a->name);
			continue;
		}
		if (!dtype_macro(json_get_str(a->j, "dtype")))
			return gen_fail(g, "%s: no jitk.h macro for dtype %s", a->name,
					json_get_str(a->j, "dtype"));
		if (!shape || shape->type != JSON_ARRAY || shape->n > JITK_MAX_DIMS)
			return gen_fail(g, "%s: no shape of at most %d dimensions", a->name, JITK_MAX_DIMS);
		fprintf(o, "\t\tconst jitk_dtype dt = %s;\n\n", dtype_macro(json_get_str(a->j, "dtype")));
		for (d = 0; d < shape->n; d++) {
			if (c_expr(g, e, sizeof(e), shape->items[d].type == JSON_STRING ? shape->items[d].str : "?",
				   a->name))
				return -1;
			fprintf(o, "\t\td[%zu] = %s;\n", d, e);
		}
		fprintf(o, "\t\tif ((rc = jitk__typed_tensor(v, t, &n, \"%s\", a->%s, dt, %zu, d)))\n"
			   "\t\t\treturn rc;\n\t}\n",
			a->name, a->name, shape->n);
	}
	fprintf(o, "\t(void)t;\n\t(void)d;\n\t(void)rc;\n"
		   "\treturn jitk_call(info, rt, selector, mode, v, n, stream);\n}\n\n");
	return 0;
}

/* What symbol s takes, as the take string of emit_run and as text. */
static void take_of(const gen *g, const json *s, char *take, char *names, size_t n)
{
	size_t i, k = 0, used = 0;

	names[0] = '\0';
	for (i = 0; i < g->nargs; i++) {
		int p;

		if (!g->args[i].field)
			continue;
		p = presence(s, g->args[i].name);
		take[k++] = p == 2 ? '1' : p == 1 ? '2' : '0';
		if (p && used < n)
			used += (size_t)snprintf(names + used, n - used, "%s%s%s", used ? ", " : "",
						 g->args[i].name, p == 1 ? " (some instances)" : "");
	}
	take[k] = '\0';
	for (i = 0; i < g->ndims && used < n; i++)
		used += (size_t)snprintf(names + used, n - used, "%s%s", i ? ", " : ", and the dimension ",
					 g->dims[i]);
}

/* The comment's text wrapped at 72 columns after " * ". */
static void emit_wrapped(FILE *o, const char *text)
{
	const char *p = text;
	size_t col = 3, k;

	fputs(" *", o);
	while (*p) {
		size_t w = strcspn(p, " \t\n");

		if (col + 1 + w > 76) {
			fputs("\n *", o);
			col = 2;
		}
		fputc(' ', o);
		/* a star and a slash in a description must not end the comment */
		for (k = 0; k < w; k++) {
			fputc(p[k], o);
			if (p[k] == '*' && p[k + 1] == '/')
				fputc('\\', o);
		}
		col += 1 + w;
		p += w;
		while (*p == ' ' || *p == '\t' || *p == '\n')
			p++;
	}
	fputs("\n", o);
}

static void emit_symbol(gen *g, const json *s)
{
	FILE *o = g->out;
	const char *name = json_get_str(s, "name"), *desc = json_get_str(s, "description");
	const json *fb = json_get(s, "fallback");
	const char *F = g->family;
	char take[80], names[1024], text[1400];

	take_of(g, s, take, names, sizeof(names));
	snprintf(text, sizeof(text), "%s%s%s%s Takes %s.", name, desc && *desc ? ": " : ".",
		 desc && *desc ? desc : "",
		 desc && *desc && desc[strlen(desc) - 1] != '.' ? "." : "", names);
	fprintf(o, "/*\n");
	emit_wrapped(o, text);
	fprintf(o, " */\n"
		   "static inline int jitk_%s(jitk_runtime *rt, const jitk_%s_args *a,\n"
		   "\t\tjitk_stream stream)\n"
		   "{\n\treturn jitk__%s_run(NULL, rt, \"%s\", JITK_CALL_STRICT, a,\n"
		   "\t\t\"%s\", stream);\n}\n\n",
		name, F, F, name, take);
	fprintf(o, "static inline int jitk_try_%s(const char **reason, jitk_runtime *rt,\n"
		   "\t\tconst jitk_%s_args *a, jitk_stream stream)\n"
		   "{\n\tjitk_call_info info = JITK_CALL_INFO_INIT;\n"
		   "\tint rc = jitk__%s_run(&info, rt, \"%s\", JITK_CALL_TRY, a,\n"
		   "\t\t\"%s\", stream);\n\n"
		   "\tif (reason)\n\t\t*reason = rc == JITK_FALLBACK ? info.reason : NULL;\n"
		   "\treturn rc;\n}\n\n",
		name, F, F, name, take);
	if (fb && fb->type == JSON_ARRAY && fb->n)
		fprintf(o, "static inline int jitk_auto_%s(int *used_symbol, jitk_runtime *rt,\n"
			   "\t\tconst jitk_%s_args *a, jitk_stream stream)\n"
			   "{\n\tjitk_call_info info = JITK_CALL_INFO_INIT;\n"
			   "\tint rc = jitk__%s_run(&info, rt, \"%s\", JITK_CALL_AUTO, a,\n"
			   "\t\t\"%s\", stream);\n\n"
			   "\tif (used_symbol)\n\t\t*used_symbol = !rc && !info.fallback;\n"
			   "\treturn rc;\n}\n\n",
			name, F, F, name, take);
}

static void emit_family_call(gen *g)
{
	FILE *o = g->out;
	char take[80], always[1024], text[1400];
	size_t i, k = 0, used = 0;

	always[0] = '\0';
	for (i = 0; i < g->nargs; i++) {
		if (!g->args[i].field)
			continue;
		take[k++] = g->args[i].every ? '1' : '2';
		if (g->args[i].every && used < sizeof(always))
			used += (size_t)snprintf(always + used, sizeof(always) - used, "%s%s",
						 used ? ", " : "", g->args[i].name);
	}
	take[k] = '\0';
	snprintf(text, sizeof(text), "Any symbol of the family (a selector, \"symbol[param=value]\"), in "
		 "mode, with the fields of a that are set (nonzero)%s%s%s: a field the symbol does "
		 "not take is an error naming it, one it needs and that is not set is \"missing "
		 "argument NAME\". info as for jitk_call (NULL allowed).",
		 used ? ", and always " : "", always, used ? " (every symbol takes them)" : "");
	fprintf(o, "/*\n");
	emit_wrapped(o, text);
	fprintf(o, " */\n"
		   "static inline int jitk_%s_call(jitk_call_info *info, jitk_runtime *rt,\n"
		   "\t\tconst char *selector, jitk_call_mode mode, const jitk_%s_args *a,\n"
		   "\t\tjitk_stream stream)\n"
		   "{\n\treturn jitk__%s_run(info, rt, selector, mode, a,\n\t\t\"%s\", stream);\n}\n\n",
		g->family, g->family, g->family, take);
}

/* jitk_FAMILY_configure_ARG for each configured argument of a constant
 * shape (a scale: [1]). */
static int emit_configure(gen *g)
{
	FILE *o = g->out;
	size_t i, k, d;

	for (i = 0; i < g->nargs; i++) {
		const garg *a = &g->args[i];
		const char *rule = json_get_str(a->j, "configured"), *sym = NULL;
		const json *shape = json_get(a->j, "shape");
		char dims[128];
		size_t used = 0;
		int constant = 1;

		if (a->kind != ARG_TENSOR || !a->field || !rule || !shape)
			continue;
		for (k = 0; k < g->nsyms && !sym; k++)
			if (presence(g->syms[k], a->name))
				sym = json_get_str(g->syms[k], "name");
		dims[0] = '\0';
		for (d = 0; d < shape->n && constant; d++) {
			const char *t = shape->items[d].type == JSON_STRING ? shape->items[d].str : "";

			constant = *t && strspn(t, "0123456789") == strlen(t);
			used += (size_t)snprintf(dims + used, sizeof(dims) - used, "%s%s", d ? ", " : "", t);
		}
		if (!constant || !sym || used >= sizeof(dims))
			continue;
		fprintf(o, "/* Validate %s (%s) once, at model load: jitk_configure on the\n"
			   " * family's %s (jitk.h says what is remembered, and for how long). */\n"
			   "static inline int jitk_%s_configure_%s(jitk_runtime *rt, jitk_devptr data)\n"
			   "{\n\tconst jitk_dtype dt = %s;\n\tconst int64_t d[%zu] = { %s };\n"
			   "\tjitk_tensor t;\n\tint rc;\n\n"
			   "\tif ((rc = jitk_tensor_contiguous(&t, data, dt, %zu, d)))\n\t\treturn rc;\n"
			   "\treturn jitk_configure(rt, \"%s\", \"%s\", &t);\n}\n\n",
			a->name, rule, a->name, g->family, a->name, dtype_macro(json_get_str(a->j, "dtype")),
			shape->n, dims, shape->n, sym, a->name);
	}
	return 0;
}

/* What every generated header shares, once per translation unit. */
static void emit_common(FILE *o)
{
	fputs("#ifndef JITK_TYPED_CALLS_\n#define JITK_TYPED_CALLS_\n"
	      "/* (the generated calls' own) */\n"
	      "static inline int jitk__typed_take(char take, int set)\n"
	      "{\n\treturn take == '1' || (take == '2' && set);\n}\n\n"
	      "static inline int jitk__typed_tensor(jitk_arg *v, jitk_tensor *t, size_t *n, const char *name,\n"
	      "\t\tjitk_devptr p, jitk_dtype dt, int32_t nd, const int64_t *shape)\n"
	      "{\n\tint rc = jitk_tensor_contiguous(&t[*n], p, dt, nd, shape);\n\n"
	      "\tif (rc)\n\t\treturn rc;\n"
	      "\tv[*n].name = name;\n\tv[*n].type = JITK_ARG_TENSOR;\n\tv[*n].v.tensor = &t[*n];\n"
	      "\t(*n)++;\n\treturn JITK_OK;\n}\n\n",
	      o);
	fputs("static inline void jitk__typed_i32(jitk_arg *v, size_t *n, const char *name, int32_t x)\n"
	      "{\n\tv[*n].name = name;\n\tv[*n].type = JITK_ARG_I32;\n\tv[*n].v.i32 = x;\n\t(*n)++;\n}\n\n"
	      "static inline void jitk__typed_i64(jitk_arg *v, size_t *n, const char *name, int64_t x)\n"
	      "{\n\tv[*n].name = name;\n\tv[*n].type = JITK_ARG_I64;\n\tv[*n].v.i64 = x;\n\t(*n)++;\n}\n\n"
	      "static inline void jitk__typed_f32(jitk_arg *v, size_t *n, const char *name, float x)\n"
	      "{\n\tv[*n].name = name;\n\tv[*n].type = JITK_ARG_F32;\n\tv[*n].v.f32 = x;\n\t(*n)++;\n}\n"
	      "#endif\n\n",
	      o);
}

static int emit(gen *g)
{
	FILE *o = g->out;
	char guard[128];
	size_t i;

	for (i = 0; g->family[i] && i + 1 < sizeof(guard); i++)
		guard[i] = (char)toupper((unsigned char)g->family[i]);
	guard[i] = '\0';
	fprintf(o, "/*\n * jitk/%s.h - typed calls of the kernel family %s,\n"
		   " * generated by `jitk header %s` (jitk %s) from its spec:\n"
		   " * do not edit.\n *\n"
		   " * Each function is a static inline over the generic call (jitk_call,\n"
		   " * jitk.h): the fields of jitk_%s_args become named\n"
		   " * arguments, and the spec picks the instance from the shapes, checks every\n"
		   " * tensor and runs the fallback (docs/api.md, \"Typed calls\"). Statuses are\n"
		   " * jitk_call's; jitk_error_last() says what failed.\n */\n"
		   "#ifndef JITK_%s_H\n#define JITK_%s_H\n\n#include <stdint.h>\n#include <string.h>\n\n"
		   "#include \"jitk.h\"\n\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n",
		g->family, g->family, g->family, jitk_version(), g->family, guard, guard);
	emit_common(o);
	emit_struct(g);
	if (emit_run(g))
		return -1;
	emit_family_call(g);
	if (emit_configure(g))
		return -1;
	for (i = 0; i < g->nsyms; i++)
		emit_symbol(g, g->syms[i]);
	fprintf(o, "#ifdef __cplusplus\n}\n#endif\n\n#endif\n");
	return 0;
}

/* --------------------------------------------------------- command */

/* The symbols of family in the description, or a "did you mean" error. */
static int find_family(gen *g, const json *doc)
{
	const json *syms = json_get(doc, "symbols");
	const char *fams[512];
	size_t i, k, nfams = 0;
	int near;

	for (i = 0; syms && i < syms->n; i++) {
		const char *f = json_get_str(&syms->items[i], "family");

		if (!f)
			continue;
		if (!strcmp(f, g->family)) {
			if (g->nsyms == CLI_ARRAY_SIZE(g->syms))
				return gen_fail(g, "more than %zu symbols", CLI_ARRAY_SIZE(g->syms));
			g->syms[g->nsyms++] = &syms->items[i];
		}
		for (k = 0; k < nfams && strcmp(fams[k], f); k++)
			;
		if (k == nfams && nfams < CLI_ARRAY_SIZE(fams))
			fams[nfams++] = f;
	}
	if (g->nsyms)
		return 0;
	near = jitk_nearest(g->family, fams, nfams);
	return near >= 0 ? gen_fail(g, "no family '%s' in the specs (did you mean '%s'?)", g->family,
				    fams[near])
			 : gen_fail(g, "no family '%s' in the specs", g->family);
}

/* C identifiers the header declares must not collide. */
static int check_names(gen *g)
{
	size_t i, k;

	for (i = 0; i < g->nsyms; i++) {
		const char *s = json_get_str(g->syms[i], "name");
		size_t fl = strlen(g->family);

		if (!strncmp(s, g->family, fl) &&
		    (!strcmp(s + fl, "_args") || !strcmp(s + fl, "_args_init") || !strcmp(s + fl, "_call") ||
		     !strncmp(s + fl, "_configure_", 11)))
			return gen_fail(g, "the function of symbol %s would be named like the family's "
					   "own jitk_%s", s, s);
	}
	for (i = 0; i < g->ndims; i++)
		for (k = 0; k < g->nargs; k++)
			if (g->args[k].field && !strcmp(g->dims[i], g->args[k].name))
				return gen_fail(g, "%s is both a dimension and an argument", g->dims[i]);
	return 0;
}

/* Whether files a and b hold the same bytes. */
static int same_file(const char *a, const char *b)
{
	FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
	int same = fa && fb, ca, cb;

	while (same) {
		ca = getc(fa);
		cb = getc(fb);
		same = ca == cb;
		if (ca == EOF)
			break;
	}
	if (fa)
		fclose(fa);
	if (fb)
		fclose(fb);
	return same;
}

static int write_header(const char *family, const char *specs, const char *path)
{
	jitk_compiler_options co = JITK_COMPILER_OPTIONS_INIT;
	jitk_compiler *c = NULL;
	char *text = NULL, *tmp = NULL;
	json *doc = NULL;
	gen *g = calloc(1, sizeof(*g));
	int rc = 1;
	size_t i;

	if (!g) {
		fprintf(stderr, "jitk: out of memory\n");
		return 1;
	}
	g->family = family;
	co.specs = specs;
	co.cache_dir = ""; /* no cache: nothing is compiled */
	co.cache_path = "";
	co.remote = "";
	if (jitk_compiler_new(&c, &co) || jitk_describe(&text, c, NULL)) {
		fprintf(stderr, "jitk: %s\n", jitk_error_last()->message);
		goto done;
	}
	if (json_parse(&doc, text, g->err, sizeof(g->err)) || find_family(g, doc) || collect(g) ||
	    check_names(g)) {
		fprintf(stderr, "jitk header: %s: %s\n", family, g->err);
		goto done;
	}
	if (path) {
		if (!(tmp = malloc(strlen(path) + 32))) {
			fprintf(stderr, "jitk: out of memory\n");
			goto done;
		}
		sprintf(tmp, "%s.tmp%ld", path, (long)getpid());
		if (!(g->out = fopen(tmp, "w"))) {
			fprintf(stderr, "jitk: %s: %s\n", tmp, strerror(errno));
			goto done;
		}
	} else {
		g->out = stdout;
	}
	if (emit(g)) {
		fprintf(stderr, "jitk header: %s: %s\n", family, g->err);
		goto done;
	}
	if (fflush(g->out) || ferror(g->out)) {
		fprintf(stderr, "jitk: %s: %s\n", tmp ? tmp : "stdout", strerror(errno));
		goto done;
	}
	if (tmp) {
		int closed = fclose(g->out);

		g->out = NULL;
		if (!closed && same_file(tmp, path)) {
			rc = 0; /* the same text: the file and its time stay (ninja's restat) */
			goto done;
		}
		if (closed || rename(tmp, path)) {
			fprintf(stderr, "jitk: %s: %s\n", path, strerror(errno));
			goto done;
		}
	}
	rc = 0;
done:
	if (g->out && g->out != stdout)
		fclose(g->out);
	if (tmp)
		(void)unlink(tmp); /* renamed already, or not wanted */
	free(tmp);
	for (i = 0; i < g->ndims; i++)
		free((void *)g->dims[i]);
	free(g);
	json_free(doc);
	jitk_free(text);
	jitk_compiler_free(c);
	return rc;
}

int jitk_cli_header(int argc, char **argv)
{
	const char *family = NULL, *out = NULL, *specs = NULL;
	int i;

	for (i = 0; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fputs(usage_header, stdout);
			return 0;
		}
		if (!strcmp(a, "-o") || !strcmp(a, "--specs")) {
			if (i + 1 >= argc)
				jitk_cli_usage_error(usage_header, "option '%s' needs a value", a);
			*(a[1] == 'o' ? &out : &specs) = argv[++i];
		} else if (!strncmp(a, "--specs=", 8)) {
			specs = a + 8;
		} else if (a[0] == '-' && a[1]) {
			jitk_cli_usage_error(usage_header, "unknown option '%.64s'", a);
		} else if (!family) {
			family = a;
		} else {
			jitk_cli_usage_error(usage_header, "unexpected argument '%.64s'", a);
		}
	}
	if (!family)
		jitk_cli_usage_error(usage_header, "header: which family?");
	for (i = 0; family[i]; i++)
		if (!isalnum((unsigned char)family[i]) && family[i] != '_')
			jitk_cli_usage_error(NULL, "'%.64s' is not a family name (letters, digits, '_')",
					     family);
	return write_header(family, specs, out);
}
