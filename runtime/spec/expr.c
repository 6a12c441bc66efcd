/* expr.c - a recursive-descent parser and evaluator for the spec format's
 * integer expressions. Grammar, loosest binding first:
 *   or:  and ("||" and)*        and: cmp ("&&" cmp)*
 *   cmp: sum (("=="|"!="|"<"|"<="|">"|">=") sum)?
 *   sum: term (("+"|"-") term)* term: unary (("*"|"/"|"%") unary)*
 *   unary: ("-"|"!") unary | primary
 *   primary: NUMBER | NAME | NAME "(" or "," or ")" | "(" or ")"
 * Functions: min, max, cdiv (ceiling division). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec/expr.h"

/* Parentheses, function calls and unary operators nest at most this deep
 * (the parser recurses once per level)... */
#define EXPR_MAX_DEPTH 32
/* ... and no tree is taller than this in any direction: a chain of 30 000
 * '+' is a left-deep tree as tall as it is long, and everything that walks
 * trees (eval, bind, visit, free) recurses once per level. */
#define EXPR_MAX_HEIGHT 64
#define EXPR_STR_(x) #x
#define EXPR_STR(x) EXPR_STR_(x)

enum op {
	OP_NUM, OP_NAME, OP_NEG, OP_NOT, OP_ADD, OP_SUB, OP_MUL, OP_DIV,
	OP_MOD, OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_AND, OP_OR,
	OP_MIN, OP_MAX, OP_CDIV, OP_ARG
};

struct expr {
	enum op op;
	int64_t num;
	char *name;
	int pos;
	int height; /* 1 for a leaf */
	expr *a, *b;
};

typedef struct {
	const char *s;
	size_t i;
	int depth;
	char *err;
	size_t err_size;
	int err_pos;
	int failed;
} parser;

static expr *fail(parser *p, size_t pos, const char *msg)
{
	if (!p->failed) {
		snprintf(p->err, p->err_size, "%s", msg);
		p->err_pos = (int)pos;
		p->failed = 1;
	}
	return NULL;
}

static expr *too_deep(parser *p, size_t pos)
{
	return fail(p, pos, "expression nested too deeply (more than " EXPR_STR(EXPR_MAX_DEPTH)
		    " levels of parentheses, calls and unary operators)");
}

static void skip_space(parser *p)
{
	while (p->s[p->i] == ' ' || p->s[p->i] == '\t')
		p->i++;
}

static int accept(parser *p, const char *tok)
{
	size_t n = strlen(tok);

	skip_space(p);
	if (strncmp(p->s + p->i, tok, n))
		return 0;
	/* "<" must not swallow the first half of "<=" and so on. */
	if (n == 1 && strchr("<>!=", tok[0]) && p->s[p->i + 1] == '=')
		return 0;
	p->i += n;
	return 1;
}

static expr *node(parser *p, enum op op, size_t pos, expr *a, expr *b)
{
	expr *e;

	if (p->failed) {
		jitk__expr_free(a);
		jitk__expr_free(b);
		return NULL;
	}
	e = calloc(1, sizeof(*e));
	if (!e) {
		jitk__expr_free(a);
		jitk__expr_free(b);
		return fail(p, pos, "out of memory");
	}
	e->op = op;
	e->pos = (int)pos;
	e->a = a;
	e->b = b;
	e->height = 1 + (a && (!b || a->height >= b->height) ? a->height : b ? b->height : 0);
	if (e->height > EXPR_MAX_HEIGHT) {
		jitk__expr_free(e);
		return fail(p, pos, "expression too deep (more than " EXPR_STR(EXPR_MAX_HEIGHT)
			    " nested operations; split it with derive)");
	}
	return e;
}

static expr *parse_or(parser *p);

static expr *parse_primary(parser *p)
{
	size_t start;

	skip_space(p);
	start = p->i;
	if (isdigit((unsigned char)p->s[p->i])) {
		int64_t v = 0;
		expr *e;

		if (p->s[p->i] == '0' && isdigit((unsigned char)p->s[p->i + 1]))
			return fail(p, start, "leading zeros are not allowed (YAML 1.1 reads them as octal)");

		while (isdigit((unsigned char)p->s[p->i])) {
			int d = p->s[p->i++] - '0';

			if (v > (INT64_MAX - d) / 10)
				return fail(p, start, "number too large");
			v = v * 10 + d;
		}
		if (isalpha((unsigned char)p->s[p->i]) || p->s[p->i] == '_')
			return fail(p, start, "malformed number");
		e = node(p, OP_NUM, start, NULL, NULL);
		if (e)
			e->num = v;
		return e;
	}
	if (isalpha((unsigned char)p->s[p->i]) || p->s[p->i] == '_') {
		size_t n;
		expr *e;

		while (isalnum((unsigned char)p->s[p->i]) || p->s[p->i] == '_')
			p->i++;
		n = p->i - start;
		if (accept(p, "(")) {
			static const struct { const char *name; enum op op; } fns[] = {
				{ "min", OP_MIN }, { "max", OP_MAX }, { "cdiv", OP_CDIV }
			};
			size_t k;
			expr *a, *b;

			for (k = 0; k < sizeof(fns) / sizeof(fns[0]); k++)
				if (strlen(fns[k].name) == n &&
				    !strncmp(p->s + start, fns[k].name, n))
					break;
			if (k == sizeof(fns) / sizeof(fns[0]))
				return fail(p, start, "unknown function (known: min, max, cdiv)");
			a = parse_or(p);
			if (!accept(p, ",")) {
				jitk__expr_free(a);
				return fail(p, p->i, "expected ','");
			}
			b = parse_or(p);
			if (!accept(p, ")")) {
				jitk__expr_free(a);
				jitk__expr_free(b);
				return fail(p, p->i, "expected ')'");
			}
			return node(p, fns[k].op, start, a, b);
		}
		e = node(p, OP_NAME, start, NULL, NULL);
		if (!e)
			return NULL;
		e->name = malloc(n + 1);
		if (!e->name) {
			jitk__expr_free(e);
			return fail(p, start, "out of memory");
		}
		memcpy(e->name, p->s + start, n);
		e->name[n] = '\0';
		return e;
	}
	if (accept(p, "(")) {
		expr *e = parse_or(p);

		if (!accept(p, ")")) {
			jitk__expr_free(e);
			return fail(p, p->i, "expected ')'");
		}
		return e;
	}
	return fail(p, start, p->s[start] ? "expected a number, a name or '('"
					   : "unexpected end of expression");
}

static expr *parse_unary(parser *p)
{
	size_t pos;
	enum op op;
	expr *e;

	skip_space(p);
	pos = p->i;
	if (accept(p, "-"))
		op = OP_NEG;
	else if (accept(p, "!"))
		op = OP_NOT;
	else
		return parse_primary(p);
	if (++p->depth > EXPR_MAX_DEPTH)
		return too_deep(p, pos);
	e = node(p, op, pos, parse_unary(p), NULL);
	p->depth--;
	return e;
}

/* One precedence level of left-associative binary operators. */
typedef struct {
	const char *tok;
	enum op op;
} binop;

static expr *parse_level(parser *p, expr *(*next)(parser *),
			 const binop *ops, size_t nops, int chain)
{
	expr *e = next(p);

	while (!p->failed) {
		size_t k, pos;

		skip_space(p);
		pos = p->i;
		for (k = 0; k < nops; k++)
			if (accept(p, ops[k].tok))
				break;
		if (k == nops)
			break;
		e = node(p, ops[k].op, pos, e, next(p));
		if (!chain)
			break;
	}
	return e;
}

static expr *parse_term(parser *p)
{
	static const binop ops[] = { { "*", OP_MUL }, { "/", OP_DIV }, { "%", OP_MOD } };

	return parse_level(p, parse_unary, ops, 3, 1);
}

static expr *parse_sum(parser *p)
{
	static const binop ops[] = { { "+", OP_ADD }, { "-", OP_SUB } };

	return parse_level(p, parse_term, ops, 2, 1);
}

static expr *parse_cmp(parser *p)
{
	static const binop ops[] = {
		{ "==", OP_EQ }, { "!=", OP_NE }, { "<=", OP_LE },
		{ ">=", OP_GE }, { "<", OP_LT }, { ">", OP_GT }
	};

	return parse_level(p, parse_sum, ops, 6, 0);
}

static expr *parse_and(parser *p)
{
	static const binop ops[] = { { "&&", OP_AND } };

	return parse_level(p, parse_cmp, ops, 1, 1);
}

static expr *parse_or(parser *p)
{
	static const binop ops[] = { { "||", OP_OR } };
	expr *e;

	if (++p->depth > EXPR_MAX_DEPTH)
		return too_deep(p, p->i);
	e = parse_level(p, parse_and, ops, 1, 1);
	p->depth--;
	return e;
}

int jitk__expr_parse(expr **out, const char *text, char *err, size_t err_size,
	       int *err_pos)
{
	parser p = { text, 0, 0, err, err_size, 0, 0 };
	expr *e = parse_or(&p);

	skip_space(&p);
	if (!p.failed && text[p.i]) {
		jitk__expr_free(e);
		e = fail(&p, p.i, "unexpected characters after the expression");
	}
	if (p.failed) {
		jitk__expr_free(e);
		*out = NULL;
		*err_pos = p.err_pos;
		return -1;
	}
	*out = e;
	return 0;
}

void jitk__expr_free(expr *e)
{
	if (!e)
		return;
	jitk__expr_free(e->a);
	jitk__expr_free(e->b);
	free(e->name);
	free(e);
}

typedef struct {
	expr_lookup_fn lookup;
	void *ctx;
	const int64_t *args;
	char *err;
	size_t err_size;
} evaluator;

static int eval(const evaluator *ev, const expr *e, int64_t *out)
{
	int64_t a = 0, b = 0;

	switch (e->op) {
	case OP_NUM:
		*out = e->num;
		return 0;
	case OP_ARG:
		*out = ev->args[e->num];
		return 0;
	case OP_NAME:
		if (!ev->lookup || ev->lookup(ev->ctx, e->name, out)) {
			snprintf(ev->err, ev->err_size, "unknown name '%s'", e->name);
			return -1;
		}
		return 0;
	case OP_AND:
	case OP_OR:
		if (eval(ev, e->a, &a))
			return -1;
		if ((e->op == OP_AND) == !a) {
			*out = e->op == OP_OR;
			return 0;
		}
		if (eval(ev, e->b, &b))
			return -1;
		*out = b != 0;
		return 0;
	default:
		break;
	}
	if (eval(ev, e->a, &a) || (e->b && eval(ev, e->b, &b)))
		return -1;
	switch (e->op) {
	case OP_NEG:
		if (a == INT64_MIN)
			goto overflow;
		*out = -a;
		return 0;
	case OP_NOT: *out = !a; return 0;
	case OP_ADD:
		if (__builtin_add_overflow(a, b, out))
			goto overflow;
		return 0;
	case OP_SUB:
		if (__builtin_sub_overflow(a, b, out))
			goto overflow;
		return 0;
	case OP_MUL:
		if (__builtin_mul_overflow(a, b, out))
			goto overflow;
		return 0;
	case OP_DIV:
	case OP_MOD:
	case OP_CDIV:
		if (b == 0) {
			snprintf(ev->err, ev->err_size, "division by zero");
			return -1;
		}
		if (a == INT64_MIN && b == -1)
			goto overflow;
		if (e->op == OP_DIV)
			*out = a / b;
		else if (e->op == OP_MOD)
			*out = a % b;
		else
			*out = a / b + ((a % b != 0) && ((a < 0) == (b < 0)));
		return 0;
	case OP_EQ: *out = a == b; return 0;
	case OP_NE: *out = a != b; return 0;
	case OP_LT: *out = a < b; return 0;
	case OP_LE: *out = a <= b; return 0;
	case OP_GT: *out = a > b; return 0;
	case OP_GE: *out = a >= b; return 0;
	case OP_MIN: *out = a < b ? a : b; return 0;
	case OP_MAX: *out = a > b ? a : b; return 0;
	default:
		snprintf(ev->err, ev->err_size, "bad expression node");
		return -1;
	}
overflow:
	snprintf(ev->err, ev->err_size, "integer overflow");
	return -1;
}

int jitk__expr_eval(const expr *e, expr_lookup_fn lookup, void *ctx, int64_t *out,
	      char *err, size_t err_size)
{
	evaluator ev = { lookup, ctx, NULL, err, err_size };

	return eval(&ev, e, out);
}

int jitk__expr_eval_args(const expr *e, const int64_t *args, int64_t *out)
{
	char err[64];
	evaluator ev = { NULL, NULL, args, err, sizeof(err) };

	if (!eval(&ev, e, out))
		return 0;
	return strcmp(err, "division by zero") ? -1 : -2;
}

/* Replace a bound node whose value the constants decide by that constant
 * (its children freed): an operator over constants, or && / || whose left
 * side decides. A node that would fail (overflow, division by zero) stays,
 * so that the call reports it as before. */
static void fold(expr *e)
{
	evaluator ev;
	char err[32];
	int64_t v;

	if (e->op == OP_NUM || e->op == OP_ARG || e->op == OP_NAME || !e->a || e->a->op != OP_NUM)
		return;
	if (e->b && e->b->op != OP_NUM &&
	    !((e->op == OP_AND && !e->a->num) || (e->op == OP_OR && e->a->num)))
		return;
	ev = (evaluator){ NULL, NULL, NULL, err, sizeof(err) };
	if (eval(&ev, e, &v))
		return;
	jitk__expr_free(e->a);
	jitk__expr_free(e->b);
	e->a = e->b = NULL;
	e->op = OP_NUM;
	e->num = v;
	e->height = 1;
}

int jitk__expr_bind(expr **out, const expr *e, expr_resolve_fn resolve, void *ctx)
{
	expr *b;
	int64_t value = 0;
	int arg = 0, r;

	*out = NULL;
	if (!e)
		return 0;
	b = calloc(1, sizeof(*b));
	if (!b)
		return -1;
	*b = *e;
	b->name = NULL;
	b->a = b->b = NULL;
	if (e->op == OP_NAME) {
		r = resolve(ctx, e->name, &value, &arg);
		if (r < 0) {
			free(b);
			return -1;
		}
		b->op = r ? OP_ARG : OP_NUM;
		b->num = r ? arg : value;
	}
	if (jitk__expr_bind(&b->a, e->a, resolve, ctx) || jitk__expr_bind(&b->b, e->b, resolve, ctx)) {
		jitk__expr_free(b);
		return -1;
	}
	fold(b);
	*out = b;
	return 0;
}

int jitk__expr_constant(const expr *e, int64_t *value)
{
	if (!e || e->op != OP_NUM)
		return 0;
	*value = e->num;
	return 1;
}

int jitk__expr_visit_names(const expr *e, int (*fn)(void *ctx, const char *name,
					       int pos),
		     void *ctx)
{
	int rc;

	if (!e)
		return 0;
	if (e->op == OP_NAME)
		return fn(ctx, e->name, e->pos);
	rc = jitk__expr_visit_names(e->a, fn, ctx);
	return rc ? rc : jitk__expr_visit_names(e->b, fn, ctx);
}
