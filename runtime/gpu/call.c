/* call.c - the generic checked call: arguments by name, the instance
 * picked from the tensors' shapes, every dtype, shape, stride, alignment,
 * aliasing and configured-tensor rule of the spec checked, then the
 * launch; in TRY and AUTO modes a ruled-out instance is a fallback, and
 * AUTO runs the spec's fallback steps.
 *
 * A call never allocates: its state lives on the stack, the resolved
 * kernel holds the shapes and strides bound to the variant, and a
 * per-thread memo (below) lets a repeated call skip what its key decides. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/runtime.h"

/* ------------------------------------------------------------- tensors */

int jitk_tensor_contiguous(jitk_tensor *t, jitk_devptr data, jitk_dtype dtype,
			   int32_t ndim, const int64_t *shape)
{
	int64_t stride = 1;
	int32_t i;

	if (!t || ndim < 0 || ndim > JITK_MAX_DIMS || (ndim && !shape))
		return jitk__error(JITK_EINVAL, "jitk_tensor_contiguous: bad arguments");
	memset(t, 0, sizeof(*t));
	t->data = data;
	t->dtype = dtype;
	t->ndim = ndim;
	for (i = ndim; i-- > 0;) {
		if (shape[i] < 0)
			return jitk__error(JITK_EINVAL, "jitk_tensor_contiguous: dimension %d is negative",
					   (int)i);
		t->shape[i] = shape[i];
		t->strides[i] = stride;
		if (__builtin_mul_overflow(stride, shape[i] ? shape[i] : 1, &stride))
			return jitk__error(JITK_EINVAL, "jitk_tensor_contiguous: the number of elements "
					   "overflows 64 bits");
	}
	return JITK_OK;
}

/* No element (a dimension of 0). The number of elements itself may
 * overflow: a broadcast dimension (stride 0) costs no memory. */
static int is_empty(const jitk_tensor *t)
{
	int32_t i;

	for (i = 0; i < t->ndim; i++)
		if (!t->shape[i])
			return 1;
	return 0;
}
/* "[4096, 3072]" */
static const char *shape_text(char *buf, size_t n, const int64_t *dims, int nd)
{
	size_t used = 0;
	int i;

	used += (size_t)snprintf(buf, n, "[");
	for (i = 0; i < nd && used < n; i++)
		used += (size_t)snprintf(buf + used, n - used, "%s%lld", i ? ", " : "",
					 (long long)dims[i]);
	if (used < n)
		snprintf(buf + used, n - used, "]");
	return buf;
}

/* ------------------------------------------------------------------ ops */

int jitk_op_get(jitk_op **out, jitk_runtime *rt, const char *selector)
{
	spec_selection sel;
	jitk_op *op;
	int i, rc;

	if (!out || !rt || !selector)
		return jitk__error(JITK_EINVAL, "jitk_op_get: NULL argument");
	*out = NULL;
	if (!strchr(selector, '[')) {
		if ((i = jitk__spec_symbol_index(rt->comp->specs, selector)) >= 0) {
			*out = &rt->sym_ops[i];
			return JITK_OK;
		}
	}
	if ((rc = jitk__spec_select(&sel, rt->comp->specs, selector)))
		return rc;
	pthread_mutex_lock(&rt->ops_mu);
	for (op = rt->extra_ops; op; op = op->next)
		if (!strcmp(op->selector, selector))
			break;
	if (!op && (op = calloc(1, sizeof(*op)))) {
		op->rt = rt;
		op->sym = sel.sym;
		op->match = sel.match;
		sel.match = NULL;
		op->selector = jitk__strdup(selector);
		if (!op->selector) {
			free(op->match);
			free(op);
			op = NULL;
		} else {
			op->next = rt->extra_ops;
			rt->extra_ops = op;
		}
	}
	pthread_mutex_unlock(&rt->ops_mu);
	jitk__spec_selection_free(&sel);
	if (!op)
		return jitk__error(JITK_ENOMEM, "out of memory");
	*out = op;
	return JITK_OK;
}

void jitk__ops_free(jitk_runtime *rt)
{
	jitk_op *op = rt->extra_ops, *next;

	for (; op; op = next) {
		next = op->next;
		free(op->match);
		free(op->selector);
		free(op);
	}
	rt->extra_ops = NULL;
	free(rt->sym_ops);
	rt->sym_ops = NULL;
}

/* ------------------------------------------------------------ the call */

/* Parameters of a family, at most, that a fallback step matches by name. */
#define MAX_MATCHED_PARAMS 64

/* A call's state. */
typedef struct {
	jitk_op *op;
	jitk_call_mode mode;
	int lenient; /* a fallback step: arguments the instance does not take are dropped */
	int dry;     /* check everything, launch nothing */
	const spec_family *f;
	const char *name; /* the instance's name once picked, else the symbol */
	size_t inst;      /* the instance, once picked; SIZE_MAX before */
	const jitk_arg *given[JITK_MAX_SPEC_ARGS]; /* per family argument */
	int64_t slots[JITK_MAX_SLOTS];
	unsigned char slot_set[JITK_MAX_SLOTS];
	char reason[320]; /* why a TRY call falls back */
	/* A fallback step: per parameter of this symbol's family, whether
	 * the caller fixes it (the caller's instance, or every instance the
	 * caller could pick, has a parameter of that name with one value)
	 * and the value. */
	int parent;
	unsigned char want_set[MAX_MATCHED_PARAMS];
	int64_t want[MAX_MATCHED_PARAMS];
	jitk_stream stream;
	/* once launched: what the call memo keeps */
	jitk_kernel *k;
	unsigned grid;
	uint64_t params[JITK_MAX_SPEC_ARGS];
	uint64_t scratch_bytes[JITK_MAX_SPEC_ARGS]; /* io: scratch arguments' sizes */
	/* TMA descriptor arguments: which, what was asked, what was made */
	size_t ntma;
	unsigned char tma_arg[JITK_MAX_TMA];
	jitk_tma_request tma_req[JITK_MAX_TMA];
	_Alignas(64) unsigned char tma[JITK_MAX_TMA][128];
} call;

/* Instance i of the op's symbol is one the call may pick: the op selects
 * it (a bare symbol name selects every instance: match is NULL then), and
 * in a fallback step it has the calling instance's value of every
 * parameter that the symbol lists several values of and the caller's
 * family also has (the rule jitk explain shows). */
static int selected(const call *c, size_t i)
{
	const spec_symbol *s = c->op->sym;
	const int64_t *vals;
	size_t p;

	if (c->op->match && !c->op->match[i])
		return 0;
	if (!c->parent)
		return 1;
	vals = c->op->rt->comp->specs->insts[s->first + i].vals;
	for (p = 0; p < s->fam->nparams && p < MAX_MATCHED_PARAMS; p++)
		if (s->nvals[p] > 1 && c->want_set[p] && vals[p] != c->want[p])
			return 0;
	return 1;
}

/* Every instance the call may pick has the same value of parameter p. */
static int param_fixed(const call *c, size_t p)
{
	const spec_symbol *s = c->op->sym;
	const spec_instance *insts = c->op->rt->comp->specs->insts + s->first;
	size_t i, first = SIZE_MAX;

	for (i = 0; i < s->ninsts; i++) {
		if (!selected(c, i))
			continue;
		if (first == SIZE_MAX)
			first = i;
		else if (insts[i].vals[p] != insts[first].vals[p])
			return 0;
	}
	return 1;
}

/* A guard failed: in TRY and AUTO the instance is ruled out (FALLBACK with
 * the reason), in STRICT it is an error. */
static int rule_out(call *c, int strict_status, const char *fmt, ...) JITK_PRINTF(3, 4);

static int rule_out(call *c, int strict_status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->reason, sizeof(c->reason), fmt, ap);
	va_end(ap);
	if (c->mode == JITK_CALL_STRICT)
		return jitk__error(strict_status, "%s: %s (nothing launched)", c->name, c->reason);
	return JITK_FALLBACK;
}

static const char *kind_text(const spec_arg *a)
{
	switch (a->type) {
	case AT_TENSOR: return "a tensor";
	case AT_I32: return "an i32";
	case AT_I64: return "an i64";
	case AT_F32: return "an f32";
	case AT_TMA: return "a TMA descriptor";
	}
	return "?";
}

/* No tensor spans more bytes than this: no allocation, in any memory a
 * GPU reaches, is as large (256 TiB). */
#define SPAN_MAX ((uint64_t)1 << 48)

/* The byte range [*lo, *hi) tensor t spans, its dimensions not negative
 * (*lo == *hi == data when it is empty; negative strides reach below
 * data). NULL, or why no memory can hold it: the extent overflows 64
 * bits, is more than SPAN_MAX bytes, or wraps around the address space
 * (a NULL tensor's range is not looked at: it is passed as NULL). */
static const char *tensor_span(const jitk_tensor *t, uint64_t *lo, uint64_t *hi)
{
	uint64_t size = t->dtype.bits / 8u ? t->dtype.bits / 8u : 1u, up = 0, down = 0, m, s;
	int32_t d;

	*lo = *hi = t->data;
	for (d = 0; d < t->ndim; d++)
		if (!t->shape[d])
			return NULL;
	for (d = 0; d < t->ndim; d++) {
		uint64_t *side = t->strides[d] < 0 ? &down : &up;

		s = t->strides[d] < 0 ? -(uint64_t)t->strides[d] : (uint64_t)t->strides[d];
		if (__builtin_mul_overflow((uint64_t)t->shape[d] - 1, s, &m) ||
		    __builtin_add_overflow(*side, m, side))
			return "its extent overflows 64 bits";
	}
	if (__builtin_add_overflow(up, 1, &up) || __builtin_mul_overflow(up, size, &up) ||
	    __builtin_mul_overflow(down, size, &down) || __builtin_add_overflow(up, down, &m))
		return "its extent overflows 64 bits";
	if (m > SPAN_MAX)
		return "it spans more than 2^48 bytes (256 TiB), more than any allocation";
	if (t->data && (t->data < down || up > UINT64_MAX - t->data))
		return "it wraps around the end of the address space";
	*lo = t->data - down;
	*hi = t->data + up;
	return NULL;
}

/* A tensor no memory can hold is an error in every mode, whatever the
 * spec says: a rank outside 0..JITK_MAX_DIMS, a negative dimension, an
 * extent that overflows, exceeds any allocation or wraps around. */
static int check_tensor(const call *c, const char *name, const jitk_tensor *t)
{
	char shape[128], strides[128];
	uint64_t lo, hi;
	const char *why;
	int32_t d;

	if (t->ndim < 0 || t->ndim > JITK_MAX_DIMS)
		return jitk__error(JITK_EINVAL, "%s: %s has %d dimensions; jitk takes 0 to %d "
				   "(nothing launched)", c->name, name, (int)t->ndim, JITK_MAX_DIMS);
	for (d = 0; d < t->ndim; d++)
		if (t->shape[d] < 0)
			return jitk__error(JITK_EINVAL, "%s: %s: shape %s: dimension %d is negative "
					   "(nothing launched)", c->name, name,
					   shape_text(shape, sizeof(shape), t->shape, t->ndim), (int)d);
	if ((why = tensor_span(t, &lo, &hi)))
		return jitk__error(JITK_EINVAL, "%s: %s: shape %s with strides %s at 0x%llx: %s "
				   "(nothing launched)", c->name, name,
				   shape_text(shape, sizeof(shape), t->shape, t->ndim),
				   shape_text(strides, sizeof(strides), t->strides, t->ndim),
				   (unsigned long long)t->data, why);
	return 0;
}

/* Match the given arguments to the family's by name. Misuse is always an
 * error. */
static int match_args(call *c, const jitk_arg *args, size_t nargs)
{
	const spec_family *f = c->f;
	size_t i, j, next = 0;
	int rc;

	memset(c->given, 0, sizeof(c->given));
	for (i = 0; i < nargs; i++) {
		const jitk_arg *g = &args[i];
		int k = -1;

		if (!g->name)
			return jitk__error(JITK_EINVAL, "%s: argument %zu has no name (nothing launched)",
					   c->name, i);
		/* Arguments usually come in the spec's order, some left out:
		 * look from after the previous one, around. */
		for (j = 0; j < f->nargs && k < 0; j++) {
			size_t m = (next + j) % f->nargs;

			if (!strcmp(f->args[m].name, g->name))
				k = (int)m;
		}
		next = (size_t)k + 1;
		if (k < 0)
			return jitk__error(JITK_EINVAL, "%s takes no argument '%s' (nothing launched)",
					   c->name, g->name);
		if (c->given[k])
			return jitk__error(JITK_EINVAL, "%s: argument %s given twice (nothing launched)",
					   c->name, g->name);
		if (f->args[k].io == IO_SCRATCH)
			return jitk__error(JITK_EINVAL, "%s: %s is scratch memory jitk gives the kernel: "
					   "leave it out (nothing launched)", c->name, g->name);
		if (f->args[k].type == AT_TMA)
			return jitk__error(JITK_EINVAL, "%s: %s is the TMA descriptor jitk makes from %s: "
					   "give the tensor only (nothing launched)", c->name, g->name,
					   f->args[k].tma->tensor);
		if ((f->args[k].type == AT_TENSOR) != (g->type == JITK_ARG_TENSOR) ||
		    (f->args[k].type == AT_I32 && g->type != JITK_ARG_I32) ||
		    (f->args[k].type == AT_I64 && g->type != JITK_ARG_I64 && g->type != JITK_ARG_I32) ||
		    (f->args[k].type == AT_F32 && g->type != JITK_ARG_F32))
			return jitk__error(JITK_EINVAL, "%s: argument %s must be %s (nothing launched)",
					   c->name, g->name, kind_text(&f->args[k]));
		if (g->type == JITK_ARG_TENSOR && !g->v.tensor)
			return jitk__error(JITK_EINVAL, "%s: argument %s: the tensor pointer is NULL (nothing launched)",
					   c->name, g->name);
		if (g->type == JITK_ARG_TENSOR && (rc = check_tensor(c, g->name, g->v.tensor)))
			return rc;
		c->given[k] = g;
	}
	return 0;
}

/* The value of a varying parameter, from the first given tensor whose
 * shape names it bare; 0 when no tensor tells. */
static int param_from_shapes(const call *c, size_t p, int64_t *out, const char **from)
{
	const spec_family *f = c->f;
	size_t i, d;

	for (i = 0; i < f->nargs; i++) {
		const spec_arg *a = &f->args[i];
		const jitk_tensor *t;

		if (a->type != AT_TENSOR || !c->given[i])
			continue;
		t = c->given[i]->v.tensor;
		for (d = 0; d < a->ndim && d < (size_t)t->ndim; d++)
			if ((size_t)t->ndim == a->ndim &&
			    !strcmp(a->shape[d].text, f->params[p].size_of ? f->params[p].size_of
									   : f->params[p].name)) {
				*out = t->shape[d];
				*from = a->name;
				return 1;
			}
	}
	return 0;
}

/* Pick the instance: the selected instance whose varying parameters equal
 * what the tensors' shapes say. */
static int pick_instance(call *c, size_t *out)
{
	const spec_symbol *s = c->op->sym;
	const spec_family *f = c->f;
	const spec_set *set = c->op->rt->comp->specs;
	int64_t want[64];
	unsigned char known[64];
	size_t i, p, first = SIZE_MAX, n = 0;

	memset(known, 0, sizeof(known));
	for (i = 0; i < s->ninsts; i++)
		if (selected(c, i)) {
			n++;
			if (first == SIZE_MAX)
				first = i;
		}
	if (n == 1) {
		*out = s->first + first;
		return 0;
	}
	for (p = 0; p < f->nparams && p < JITK_ARRAY_SIZE(want); p++) {
		const char *from = NULL;

		if (s->nvals[p] < 2 || param_fixed(c, p))
			continue; /* one value among the instances selected */
		if (!param_from_shapes(c, p, &want[p], &from))
			return jitk__error(JITK_EINVAL, "%s: no tensor argument tells '%s' (select an instance, "
					   "e.g. %s; nothing launched)", c->name, f->params[p].name,
					   set->insts[s->first + first].name);
		known[p] = 1;
		if (f->params[p].size_of) {
			/* a size class: the smallest value among the instances
			 * that holds the size, else the largest */
			int64_t best = INT64_MIN, top = INT64_MIN;

			for (i = 0; i < s->ninsts; i++) {
				int64_t v = set->insts[s->first + i].vals[p];

				if (!selected(c, i))
					continue;
				if (v > top)
					top = v;
				if (v >= want[p] && (best == INT64_MIN || v < best))
					best = v;
			}
			want[p] = best != INT64_MIN ? best : top;
		}
	}
	for (i = 0; i < s->ninsts; i++) {
		const spec_instance *in = &set->insts[s->first + i];
		int ok = selected(c, i);

		for (p = 0; p < f->nparams && ok; p++)
			if (known[p] && in->vals[p] != want[p])
				ok = 0;
		if (ok) {
			*out = s->first + i;
			return 0;
		}
	}
	/* No instance: say what the shapes asked for, and what there is. */
	{
		char have[256], list[256];
		size_t used = 0, lu = 0;

		have[0] = list[0] = '\0';
		for (p = 0; p < f->nparams && p < JITK_ARRAY_SIZE(want); p++) {
			const char *from = NULL;
			char buf[32];

			if (!known[p])
				continue;
			param_from_shapes(c, p, &want[p], &from);
			used += (size_t)snprintf(have + used, used < sizeof(have) ? sizeof(have) - used : 0,
						 "%s%s=%s (from %s)", used ? ", " : "", f->params[p].name,
						 jitk__spec_value_text(&f->params[p], want[p], buf), from);
		}
		for (i = 0; i < s->ninsts; i++)
			if (selected(c, i))
				lu += (size_t)snprintf(list + lu, lu < sizeof(list) ? sizeof(list) - lu : 0,
						       "%s%s", lu ? ", " : "",
						       set->insts[s->first + i].name);
		return rule_out(c, JITK_EINVAL, "no instance for %s (instances: %s)", have, list);
	}
}

/* Set slot s (an integer argument or a dim) from a tensor, unless an
 * earlier argument set it: then the checks compare this tensor with the
 * shape the earlier one implies, and name both shapes. */
static void bind_slot(call *c, int s, int64_t v)
{
	if (s >= 0 && !c->slot_set[s]) {
		c->slots[s] = v;
		c->slot_set[s] = 1;
	}
}

/* Set the slots a tensor's bare dims and strides name. A size-1
 * dimension's stride says nothing (as in PyTorch and DLPack): a scalar
 * argument it names keeps its default, but a dims name or a scalar with
 * no default takes it when nothing else told (late), which then cannot
 * be wrong. */
static void bind_slots(call *c, const jitk_kernel *k, size_t i, int late)
{
	const spec_arg *a = &c->f->args[i];
	const jitk_tensor_rule *r = &k->tensors[i];
	const jitk_tensor *t = c->given[i]->v.tensor;
	size_t d;

	if ((size_t)t->ndim != a->ndim)
		return; /* reported by the checks */
	for (d = 0; d < a->ndim; d++) {
		if (!late)
			bind_slot(c, r->shape_slot[d], t->shape[d]);
		if (!late && t->shape[d] > 1 && a->strides)
			bind_slot(c, r->stride_slot[d], t->strides[d]);
		if (late && t->shape[d] <= 1 && a->strides && r->stride_slot[d] >= 0 &&
		    (r->stride_slot[d] >= (int)c->f->nargs || !c->f->args[r->stride_slot[d]].has_default))
			bind_slot(c, r->stride_slot[d], t->strides[d]);
	}
}

/* A scalar or dim that no tensor told: when a tensor whose shape names it
 * was given with another rank, that is the error to report (its shape is
 * checked only later). 0 when there is none. */
static int wrong_rank(call *c, const jitk_kernel *k, const char *name)
{
	const spec_family *f = c->f;
	char want[128], got[128];
	size_t i, d, used;

	for (i = 0; i < f->nargs; i++) {
		const spec_arg *a = &f->args[i];
		const jitk_tensor *t;
		int names = 0;

		if (a->type != AT_TENSOR || !k->present[i] || !c->given[i])
			continue;
		t = c->given[i]->v.tensor;
		for (d = 0; d < a->ndim; d++)
			names |= !strcmp(a->shape[d].text, name);
		if (!names || (size_t)t->ndim == a->ndim)
			continue;
		used = (size_t)snprintf(want, sizeof(want), "[");
		for (d = 0; d < a->ndim && used < sizeof(want); d++)
			used += (size_t)snprintf(want + used, sizeof(want) - used, "%s%s", d ? ", " : "",
						 a->shape[d].text);
		if (used < sizeof(want))
			snprintf(want + used, sizeof(want) - used, "]");
		return jitk__error(JITK_EINVAL, "%s: %s: expected shape %s (%zu dimensions), got %s (nothing launched)",
				   c->name, a->name, want, a->ndim,
				   shape_text(got, sizeof(got), t->shape, t->ndim));
	}
	return 0;
}

/* The scalars: given, else bound from a tensor, else the spec's
 * default. */
static int bind_scalars(call *c, const jitk_kernel *k, uint64_t *params)
{
	const spec_family *f = c->f;
	size_t i;

	for (i = 0; i < f->nargs; i++) {
		const spec_arg *a = &f->args[i];
		const jitk_arg *g = c->given[i];

		if (a->type == AT_TENSOR || a->type == AT_TMA || !k->present[i]) {
			if (g && !k->present[i] && !c->lenient)
				return jitk__error(JITK_EINVAL, "%s takes no argument '%s' (nothing launched)",
						   c->name, a->name);
			/* An absent scalar is 0 for the launch checks too, as
			 * for the kernel (the loader lets no shape, stride or
			 * grid of this instance use it). */
			if (a->type != AT_TENSOR) {
				c->slots[i] = 0;
				c->slot_set[i] = 1;
			}
			continue;
		}
		if (g) {
			int64_t v = g->type == JITK_ARG_I32 ? g->v.i32 : g->type == JITK_ARG_I64 ? g->v.i64 : 0;

			if (a->type == AT_F32) {
				memcpy(&params[i], &g->v.f32, sizeof(float));
				continue;
			}
			if (c->slot_set[i] && c->slots[i] != v)
				return jitk__error(JITK_EINVAL, "%s: argument %s is %lld, but the tensors' shapes say %lld (nothing launched)",
						   c->name, a->name, (long long)v, (long long)c->slots[i]);
			c->slots[i] = v;
			c->slot_set[i] = 1;
		} else if (!c->slot_set[i]) {
			int rc;

			if (!a->has_default && (rc = wrong_rank(c, k, a->name)))
				return rc;
			if (!a->has_default)
				return jitk__error(JITK_EINVAL, "%s: missing argument %s (nothing launched)",
						   c->name, a->name);
			if (a->type == AT_F32) {
				memcpy(&params[i], &a->def_f, sizeof(float));
				continue;
			}
			c->slots[i] = a->def_i;
			c->slot_set[i] = 1;
		}
		if (a->type == AT_I32) {
			int32_t v32 = (int32_t)c->slots[i];

			/* given, or bound from a shape (a dimension of 2^32 + 2
			 * must not reach the kernel as 2) */
			if (c->slots[i] < INT32_MIN || c->slots[i] > INT32_MAX)
				return jitk__error(JITK_EINVAL, "%s: argument %s (%lld%s) is out of range "
						   "for i32 (nothing launched)", c->name, a->name,
						   (long long)c->slots[i],
						   g ? "" : ", from the tensors' shapes");
			memcpy(&params[i], &v32, sizeof(v32));
		} else {
			params[i] = (uint64_t)c->slots[i];
		}
	}
	for (i = 0; i < f->ndims; i++) {
		int rc;

		if (c->slot_set[f->nargs + i])
			continue;
		if ((rc = wrong_rank(c, k, f->dims[i])))
			return rc;
		return jitk__error(JITK_EINVAL, "%s: no tensor tells the dimension %s (nothing launched)",
				   c->name, f->dims[i]);
	}
	return 0;
}

static int configured_ok(jitk_runtime *rt, jitk_devptr data, enum spec_rule rule)
{
	uint64_t id = 0;
	size_t i;
	int found = -1;

	pthread_rwlock_rdlock(&rt->configured_mu);
	for (i = 0; i < rt->nconfigured; i++)
		if (rt->configured[i].data == data && rt->configured[i].rule == rule) {
			found = (int)i;
			break;
		}
	if (found >= 0)
		id = rt->configured[found].buffer_id;
	pthread_rwlock_unlock(&rt->configured_mu);
	if (found < 0)
		return 0;
	/* The same address may now be another allocation: its buffer id
	 * (never reused in a process) tells. */
	{
		uint64_t now = 0;

		if (rt->ops->buffer_id(rt->impl, data, &now) || now != id)
			return 0;
	}
	return 1;
}

static int may_alias(const spec_family *f, size_t a, size_t b)
{
	size_t i;

	for (i = 0; i < f->nmay_alias; i++)
		if ((f->may_alias[i][0] == a && f->may_alias[i][1] == b) ||
		    (f->may_alias[i][0] == b && f->may_alias[i][1] == a))
			return 1;
	return 0;
}

/* What jitk__expr_eval_args's failure rc means, for a message. */
static const char *eval_failure(int rc)
{
	return rc == -2 ? "divides by zero" : "overflows";
}

/* A dimension or stride of a rule for this call: a constant of the
 * variant, a slot, or an expression over the slots. */
static int rule_value(const call *c, signed char kind, signed char slot, int64_t value,
		      const expr *e, int64_t *out)
{
	if (kind == RULE_CONST) {
		*out = value;
		return 0;
	}
	if (slot >= 0) {
		*out = c->slots[slot];
		return 0;
	}
	return jitk__expr_eval_args(e, c->slots, out);
}

/* A scratch argument (io: scratch): its size in bytes, from its shape
 * (the memory is given just before the launch, give_scratch). */
static int scratch_arg(call *c, const jitk_kernel *k, size_t i, uint64_t *params)
{
	const spec_arg *a = &c->f->args[i];
	const jitk_tensor_rule *r = &k->tensors[i];
	uint64_t bytes;
	int64_t n;
	int rc;

	if ((rc = rule_value(c, r->shape_kind[0], r->shape_slot[0], r->shape_value[0], r->shape[0],
			     &n)))
		return jitk__error(JITK_EINVAL, "%s: scratch %s: its size, '%s', %s for these "
				   "arguments (nothing launched)", c->name, a->name, a->shape[0].text,
				   eval_failure(rc));
	if (n < 0 || __builtin_mul_overflow((uint64_t)n, (uint64_t)(a->elem->bits / 8), &bytes) ||
	    bytes > SPAN_MAX)
		return jitk__error(JITK_EINVAL, "%s: scratch %s: %lld elements of %s is no size jitk "
				   "can give (nothing launched)", c->name, a->name, (long long)n,
				   a->elem->name);
	c->scratch_bytes[i] = bytes;
	params[i] = 0; /* given just before the launch (give_scratch) */
	return 0;
}

/* The scratch of a call that launches, once every check has passed: the
 * stream's (per family) for each scratch argument of some size. */
static int give_scratch(jitk_runtime *rt, const spec_family *f, const char *name,
			jitk_stream stream, const uint64_t *bytes, uint64_t *params)
{
	size_t i;
	int rc;

	for (i = 0; i < f->nargs; i++)
		if (bytes[i] && (rc = jitk__scratch(rt, stream, f, (size_t)bytes[i], name,
						     f->args[i].name, &params[i])))
			return rc;
	return 0;
}

/* Every tensor against its rule. What a fallback could not do better -
 * a wrong dtype or shape, overlapping outputs - is an error in every
 * mode; alignment, strides, NULL and configured tensors are the fused
 * kernels' guards (rule_out). */
static int check_tensors(call *c, const jitk_kernel *k, uint64_t *params)
{
	const spec_family *f = c->f;
	char want[128], got[128];
	uint64_t lo[JITK_MAX_SPEC_ARGS], hi[JITK_MAX_SPEC_ARGS];
	unsigned char has[JITK_MAX_SPEC_ARGS];
	size_t i, j, d;
	int rc;

	for (i = 0; i < f->nargs; i++) {
		const spec_arg *a = &f->args[i];
		const jitk_tensor_rule *r = &k->tensors[i];
		const jitk_tensor *t;
		int64_t dims[JITK_MAX_DIMS], strides[JITK_MAX_DIMS], stride = 1;

		if (a->type != AT_TENSOR || !k->present[i])
			continue;
		if (a->io == IO_SCRATCH) {
			if ((rc = scratch_arg(c, k, i, params)))
				return rc;
			continue;
		}
		if (!c->given[i]) {
			if (a->nullable)
				continue;
			return jitk__error(JITK_EINVAL, "%s: missing argument %s (nothing launched)",
					   c->name, a->name);
		}
		t = c->given[i]->v.tensor;
		if (t->dtype.code != a->elem->code || t->dtype.bits != a->elem->bits ||
		    t->dtype.lanes != 1)
			return jitk__error(JITK_EINVAL, "%s: %s must be %s, not a tensor of dtype code %u bits %u (nothing launched)",
					   c->name, a->name, a->elem->name, t->dtype.code, t->dtype.bits);
		for (d = 0; d < a->ndim; d++)
			if ((rc = rule_value(c, r->shape_kind[d], r->shape_slot[d], r->shape_value[d],
					     r->shape[d], &dims[d])))
				return jitk__error(JITK_EINVAL, "%s: %s: dimension %zu of its shape, '%s', %s "
						   "for these arguments (nothing launched)", c->name,
						   a->name, d, a->shape[d].text, eval_failure(rc));
		for (d = 0; d < a->ndim; d++)
			if ((size_t)t->ndim != a->ndim || t->shape[d] != dims[d])
				return jitk__error(JITK_EINVAL, "%s: %s: expected shape %s, got %s (nothing launched)",
						   c->name, a->name,
						   shape_text(want, sizeof(want), dims, (int)a->ndim),
						   shape_text(got, sizeof(got), t->shape, t->ndim));
		/* Strides: the spec's, else contiguous; a size-1 dimension's
		 * stride is not looked at. */
		for (d = a->ndim; d-- > 0;) {
			if (a->strides) {
				if ((rc = rule_value(c, r->stride_kind[d], r->stride_slot[d],
						     r->stride_value[d], r->strides[d], &strides[d])))
					return jitk__error(JITK_EINVAL, "%s: %s: stride %zu, '%s', %s for "
							   "these arguments (nothing launched)", c->name,
							   a->name, d, a->strides[d].text, eval_failure(rc));
			} else {
				strides[d] = stride;
				/* (a broadcast tensor of this shape is checked
				 * against strides that overflow: it is not
				 * contiguous) */
				if (__builtin_mul_overflow(stride, dims[d] ? dims[d] : 1, &stride))
					return rule_out(c, JITK_EINVAL, "%s: shape %s: contiguous "
							"strides overflow 64 bits", a->name,
							shape_text(want, sizeof(want), dims, (int)a->ndim));
			}
		}
		for (d = 0; d < a->ndim; d++)
			if (dims[d] > 1 && t->strides[d] != strides[d])
				return rule_out(c, JITK_EINVAL, "%s: expected strides %s, got %s%s", a->name,
						shape_text(want, sizeof(want), strides, (int)a->ndim),
						shape_text(got, sizeof(got), t->strides, t->ndim),
						a->strides ? "" : " (it must be contiguous)");
		params[i] = t->data;
		if (is_empty(t))
			continue; /* an empty tensor's address is never used */
		/* A tensor the kernel writes must not be a broadcast: the
		 * elements of a dimension of stride 0 are one place, and the
		 * threads writing them would race. */
		for (d = 0; d < a->ndim && a->io != IO_IN; d++)
			if (dims[d] > 1 && !t->strides[d])
				return jitk__error(JITK_EINVAL, "%s: %s is written, but dimension %zu "
						   "(%lld elements) has stride 0: they are one place in "
						   "memory (nothing launched)", c->name, a->name, d,
						   (long long)dims[d]);
		if (!t->data) {
			if (a->nullable)
				continue;
			return rule_out(c, JITK_EINVAL, "%s is NULL", a->name);
		}
		if (t->data % (uint64_t)r->align)
			return rule_out(c, JITK_EINVAL, "%s (0x%llx) is not %lld-byte aligned", a->name,
					(unsigned long long)t->data, (long long)r->align);
		if (a->configured && !configured_ok(c->op->rt, t->data, a->configured))
			return rule_out(c, JITK_EINVAL, "%s (0x%llx) was not validated with jitk_configure "
					"(or its memory was freed since)", a->name,
					(unsigned long long)t->data);
	}
	/* What a kernel writes must not overlap anything else it is given:
	 * the byte range of each tensor, once. */
	for (i = 0; i < f->nargs; i++) {
		has[i] = f->args[i].type == AT_TENSOR && c->given[i] && k->present[i] &&
			 !is_empty(c->given[i]->v.tensor) && c->given[i]->v.tensor->data;
		if (has[i])
			tensor_span(c->given[i]->v.tensor, &lo[i], &hi[i]); /* checked by match_args */
	}
	for (i = 0; i < f->nargs; i++) {
		if (!has[i] || f->args[i].io == IO_IN)
			continue;
		for (j = 0; j < f->nargs; j++) {
			if (j == i || !has[j] || may_alias(f, i, j))
				continue;
			if (lo[i] < hi[j] && lo[j] < hi[i])
				return jitk__error(JITK_EINVAL, "%s: %s overlaps %s in memory (nothing launched)",
						   c->name, f->args[i].name, f->args[j].name);
		}
	}
	return 0;
}

/* ------------------------------------------------------ TMA descriptors */

/* The driver's names for what the spec says in bytes and types. */
static int tma_dtype(const spec_elem *e)
{
	if (!strcmp(e->name, "bf16"))
		return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
	if (!strcmp(e->name, "f32"))
		return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
	if (!strcmp(e->name, "i32"))
		return CU_TENSOR_MAP_DATA_TYPE_INT32;
	if (!strcmp(e->name, "i64"))
		return CU_TENSOR_MAP_DATA_TYPE_INT64;
	return CU_TENSOR_MAP_DATA_TYPE_UINT8; /* u8, fp8_e4m3: bytes */
}

static void tma_enums(jitk_tma_request *r, const jitk_tma_bound *b)
{
	r->interleave = b->interleave == 16   ? CU_TENSOR_MAP_INTERLEAVE_16B
			: b->interleave == 32 ? CU_TENSOR_MAP_INTERLEAVE_32B
					      : CU_TENSOR_MAP_INTERLEAVE_NONE;
	r->swizzle = b->swizzle == 32	 ? CU_TENSOR_MAP_SWIZZLE_32B
		     : b->swizzle == 64	 ? CU_TENSOR_MAP_SWIZZLE_64B
		     : b->swizzle == 128 ? CU_TENSOR_MAP_SWIZZLE_128B
					 : CU_TENSOR_MAP_SWIZZLE_NONE;
	r->l2 = b->l2 == 64    ? CU_TENSOR_MAP_L2_PROMOTION_L2_64B
		: b->l2 == 128 ? CU_TENSOR_MAP_L2_PROMOTION_L2_128B
		: b->l2 == 256 ? CU_TENSOR_MAP_L2_PROMOTION_L2_256B
			       : CU_TENSOR_MAP_L2_PROMOTION_NONE;
	r->oob = b->oob_nan ? CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA
			    : CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE;
}

/* What TMA needs of the base address: 16 bytes, 32 with a 32-byte
 * interleave. */
static uint64_t tma_align(const jitk_tma_bound *b)
{
	return b->interleave == 32 ? 32 : 16;
}

/* Descriptor argument i of the call, from its tensor: the address,
 * strides and sizes checked as the driver would (a clear error naming the
 * argument instead of its CUDA_ERROR_INVALID_VALUE), then encoded into
 * out. An empty tensor gets a zero descriptor (nothing reads it). */
static int tma_encode(call *c, const jitk_kernel *k, size_t i, jitk_tma_request *r, void *out)
{
	const spec_family *f = c->f;
	const spec_arg *a = &f->args[i];
	const jitk_tma_bound *b = &k->tma[i];
	size_t ti = a->tma->tensor_arg, d, n = b->rank;
	int64_t step[JITK_MAX_DIMS]; /* bytes between elements of each dimension */
	const jitk_tensor *t;
	int rc;

	memset(out, 0, 128);
	memset(r, 0, sizeof(*r));
	if (!c->given[ti])
		return jitk__error(JITK_EINVAL, "%s: %s: there is no tensor %s to make the TMA "
				   "descriptor from (nothing launched)", c->name, a->name, a->tma->tensor);
	t = c->given[ti]->v.tensor;
	if (is_empty(t))
		return 0;
	if (t->data % tma_align(b))
		return rule_out(c, JITK_EINVAL, "%s: TMA needs %s (0x%llx) %llu-byte aligned", a->name,
				a->tma->tensor, (unsigned long long)t->data,
				(unsigned long long)tma_align(b));
	if (t->shape[n - 1] > 1 && t->strides[n - 1] != 1)
		return rule_out(c, JITK_EINVAL, "%s: TMA needs the last dimension of %s contiguous "
				"(its stride is %lld)", a->name, a->tma->tensor,
				(long long)t->strides[n - 1]);
	r->dtype = tma_dtype(f->args[ti].elem);
	r->rank = (unsigned)n;
	r->addr = t->data;
	/* A dimension of one element is never stepped over, so its stride
	 * (anything, in PyTorch and DLPack) is replaced by one TMA takes:
	 * the contiguous one over what is inside it, in 16-byte units. */
	{
		int64_t inner = (int64_t)b->elem_bytes * (t->shape[n - 1] > 0 ? t->shape[n - 1] : 1);

		for (d = n - 1; d-- > 0;) {
			int64_t contig = (inner + 15) / 16 * 16;

			step[d] = t->shape[d] <= 1 ? contig : t->strides[d] * (int64_t)b->elem_bytes;
			inner = step[d] * (t->shape[d] > 0 ? t->shape[d] : 1);
			if (inner >= (1ll << 40))
				inner = 1ll << 40; /* refused below, if it is used */
		}
	}
	for (d = 0; d < n; d++) {
		size_t j = n - 1 - d; /* the driver's order: innermost first */

		if ((uint64_t)t->shape[d] > (1ull << 32))
			return jitk__error(JITK_EINVAL, "%s: dimension %zu of %s is %lld; TMA takes at "
					   "most 2^32 (nothing launched)", c->name, d, a->tma->tensor,
					   (long long)t->shape[d]);
		r->dims[j] = (uint64_t)t->shape[d];
		r->box[j] = (uint32_t)b->box[d];
		r->elem_strides[j] = (uint32_t)b->elem_strides[d];
		if (d + 1 < n) {
			int64_t bytes = step[d];

			if (bytes <= 0 || bytes % 16 || bytes >= (1ll << 40))
				return rule_out(c, JITK_EINVAL, "%s: TMA needs the stride of dimension %zu "
						"of %s (%lld bytes) a positive multiple of 16 below 2^40",
						a->name, d, a->tma->tensor, (long long)bytes);
			r->strides[j - 1] = (uint64_t)bytes;
		}
	}
	if (b->batch) {
		/* one more, outermost dimension of one element: never stepped
		 * over, so its stride is 0 (what CuTe encodes for a batch of 1) */
		r->dims[n] = 1;
		r->box[n] = 1;
		r->elem_strides[n] = 1;
		r->strides[n - 1] = 0;
		r->rank = (unsigned)n + 1;
	}
	tma_enums(r, b);
	if ((rc = c->op->rt->ops->tensor_map(c->op->rt->impl, out, r)))
		return jitk__error(JITK_EINVAL, "%s: %s: cuTensorMapEncodeTiled refused the descriptor "
				   "of %s: %s (nothing launched)", c->name, a->name, a->tma->tensor,
				   c->op->rt->ops->error_name(c->op->rt->impl, rc));
	return 0;
}

static int encode_tmas(call *c, const jitk_kernel *k)
{
	size_t i;
	int rc;

	c->ntma = 0;
	for (i = 0; i < c->f->nargs; i++) {
		if (c->f->args[i].type != AT_TMA || !k->present[i])
			continue;
		if ((rc = tma_encode(c, k, i, &c->tma_req[c->ntma], c->tma[c->ntma])))
			return rc;
		c->tma_arg[c->ntma++] = (unsigned char)i;
	}
	return 0;
}

/* The launch checks and the grid for the call's slots: 0 and *grid set
 * (0: an empty problem, nothing to launch), or the error. */
static int launch_grid(const jitk_kernel *k, const int64_t *slots, unsigned *grid_out)
{
	const spec_family *f = k->fam;
	const char *name = k->rt->comp->specs->insts[k->inst].name;
	int64_t grid = 0, ok;
	size_t i;
	int rc;

	*grid_out = 0;
	for (i = 0; i < k->nchecks; i++)
		if (k->checks[i] && (jitk__expr_eval_args(k->checks[i], slots, &ok) || !ok))
			return jitk__error(JITK_EINVAL, "%s: %s (%s; nothing launched)", name,
					   f->checks[i].message, f->checks[i].text);
	if ((rc = jitk__expr_eval_args(k->grid, slots, &grid)))
		return jitk__error(JITK_EINVAL, "%s: the grid '%s' %s for these arguments "
				   "(nothing launched)", name, f->grid.text, eval_failure(rc));
	if (grid <= 0)
		return JITK_OK; /* empty problem: nothing to launch */
	if (grid > 0x7fffffff)
		return jitk__error(JITK_EINVAL, "%s: grid of %lld blocks is too large", name,
				   (long long)grid);
	*grid_out = (unsigned)grid;
	return JITK_OK;
}

/* Launch k on grid blocks (none for 0) with one parameter value per
 * family argument. */
/* What a TMA descriptor argument absent from the instance gets: 128 zero
 * bytes (the kernel's parameter is that large). */
static const _Alignas(64) unsigned char no_tma[128];

static int launch_kernel(jitk_kernel *k, unsigned grid, const uint64_t *params,
			 size_t ntma, const unsigned char *tma_arg, unsigned char (*tma)[128],
			 jitk_stream stream)
{
	jitk_runtime *rt = k->rt;
	void *ptrs[JITK_MAX_SPEC_ARGS];
	jitk_launch l;
	size_t i;
	int r;

	if (!grid)
		return JITK_OK;
	if (k->built) {
		if ((r = jitk__built_launch(k, params, ntma, tma_arg,
					    (const unsigned char(*)[128])tma, stream)))
			return r;
		atomic_fetch_add_explicit(&rt->slots[k->inst].launches, 1, memory_order_relaxed);
		return JITK_OK;
	}
	for (i = 0; i < k->fam->nargs; i++)
		ptrs[i] = k->fam->args[i].type == AT_TMA ? (void *)no_tma : (void *)&params[i];
	for (i = 0; i < ntma; i++)
		ptrs[tma_arg[i]] = tma[i]; /* passed by value: the driver copies 128 bytes */
	memset(&l, 0, sizeof(l));
	l.kernel = k->fn;
	l.primary = k->fn_primary;
	l.grid[0] = grid;
	l.grid[1] = l.grid[2] = 1;
	l.block[0] = k->block;
	l.block[1] = l.block[2] = 1;
	l.smem = k->smem;
	l.stream = stream;
	l.params = ptrs;
	l.nparams = k->fam->nargs;
	l.programmatic = k->programmatic;
	r = rt->ops->launch(rt->impl, &l);
	if (r)
		return jitk__error(JITK_EDRIVER, "launching %s failed: %s",
				   rt->comp->specs->insts[k->inst].name,
				   rt->ops->error_name(rt->impl, r));
	atomic_fetch_add_explicit(&rt->slots[k->inst].launches, 1, memory_order_relaxed);
	return JITK_OK;
}

static int call_once(call *c, jitk_call_info *info, const jitk_arg *args, size_t nargs,
		     jitk_stream stream)
{
	jitk_runtime *rt = c->op->rt;
	uint64_t *params = c->params;
	jitk_kernel *k;
	size_t inst = 0, i;
	int rc;

	c->f = c->op->sym->fam;
	c->name = c->op->sym->name;
	c->stream = stream;
	c->inst = SIZE_MAX;
	c->k = NULL;
	c->ntma = 0;
	memset(c->slot_set, 0, sizeof(c->slot_set));
	memset(params, 0, sizeof(c->params));
	memset(c->scratch_bytes, 0, sizeof(c->scratch_bytes));
	if ((rc = match_args(c, args, nargs)) || (rc = pick_instance(c, &inst)))
		return rc;
	c->inst = inst;
	c->name = rt->comp->specs->insts[inst].name;
	info->instance = c->name;
	if (c->mode != JITK_CALL_STRICT && jitk__unavailable_reason(rt, inst))
		return rule_out(c, JITK_EARCH, "%s", jitk__unavailable_reason(rt, inst));
	rc = jitk__resolve(&k, rt, inst, 1, stream);
	if (rc == JITK_EARCH && c->mode != JITK_CALL_STRICT)
		return rule_out(c, JITK_EARCH, "%s", jitk__unavailable_reason(rt, inst));
	if (rc)
		return rc;
	for (int late = 0; late < 2; late++)
		for (i = 0; i < c->f->nargs; i++)
			if (c->f->args[i].type == AT_TENSOR && c->given[i] && k->present[i])
				bind_slots(c, k, i, late);
	if ((rc = bind_scalars(c, k, params)) || (rc = check_tensors(c, k, params)) ||
	    (rc = encode_tmas(c, k)) || (rc = launch_grid(k, c->slots, &c->grid)) || c->dry ||
	    (c->grid && (rc = give_scratch(rt, c->f, c->name, stream, c->scratch_bytes, params))) ||
	    (rc = launch_kernel(k, c->grid, params, c->ntma, c->tma_arg, c->tma, stream)))
		return rc;
	c->k = k;
	return JITK_OK;
}

/* ------------------------------------------------------------ the memo */

/* A call that launched its instance is remembered, per thread, under what
 * decides everything but the addresses: the op, the mode and each
 * argument's name (the pointer), type and value (for a tensor: dtype,
 * shape and strides). A later call with the same key skips the instance
 * pick, the binding and every shape, stride and expression check: it
 * checks only what the addresses decide (NULL, alignment, configured
 * tensors, overlap) and launches. Whatever it does not accept takes the
 * full path, which reports it. */
#define MEMO_ENTRIES 16
#define MEMO_ARGS 16
#define MEMO_KEY 96

typedef struct {
	unsigned char arg;      /* in the call's arguments */
	unsigned char fam;      /* the family's argument */
	unsigned char nullable; /* a NULL address is passed as it is */
	unsigned char configured; /* enum spec_rule, 0: none */
	uint32_t overlap;       /* bit j: must not overlap tensor j (it writes) */
	uint64_t align_mask;
	uint64_t below;         /* bytes below the address (negative strides) */
	uint64_t span;          /* bytes from the lowest past the highest element; 0: empty */
} memo_tensor;

typedef struct {
	const jitk_op *op; /* NULL: an unused entry */
	uint64_t rt_id;
	size_t nkey;
	int64_t key[MEMO_KEY];
	jitk_kernel *k;
	const char *instance;
	unsigned grid;
	size_t ntensors;
	memo_tensor t[MEMO_ARGS];
	uint64_t params[JITK_MAX_SPEC_ARGS]; /* the scalars; the addresses per call */
	/* scratch: which arguments, how many bytes (the stream's, per call) */
	size_t nscratch;
	unsigned char scratch_arg[JITK_MAX_SPEC_ARGS];
	uint64_t scratch_bytes[JITK_MAX_SPEC_ARGS];
	/* TMA descriptors, made for the address in req: a call with the
	 * same address passes them as they are, another one re-encodes. */
	size_t ntma;
	unsigned char tma_arg[JITK_MAX_TMA];
	unsigned char tma_tensor[JITK_MAX_TMA]; /* its tensor in t[] */
	uint64_t tma_align[JITK_MAX_TMA];
	jitk_tma_request tma_req[JITK_MAX_TMA];
	_Alignas(64) unsigned char tma[JITK_MAX_TMA][128];
} memo_entry;

static _Thread_local memo_entry memo[MEMO_ENTRIES];
static _Thread_local unsigned memo_next;
static atomic_ullong runtime_ids;

uint64_t jitk__runtime_id(void)
{
	return atomic_fetch_add(&runtime_ids, 1) + 1;
}

/* The key of a call into key (MEMO_KEY words): its length, or 0 when it
 * has no key (too many arguments or dimensions, a DLPack argument). */
static size_t memo_key(int64_t *key, jitk_call_mode mode, const jitk_arg *args, size_t nargs)
{
	size_t i, n = 0;
	int32_t d;

	if (nargs > MEMO_ARGS)
		return 0;
	key[n++] = mode;
	for (i = 0; i < nargs; i++) {
		const jitk_arg *g = &args[i];
		const jitk_tensor *t = g->v.tensor;

		if (n + 2 + 2 * JITK_MAX_DIMS > MEMO_KEY)
			return 0;
		key[n++] = (int64_t)(uintptr_t)g->name;
		switch (g->type) {
		case JITK_ARG_TENSOR:
			if (!t || t->ndim < 0 || t->ndim > JITK_MAX_DIMS)
				return 0;
			key[n++] = (int64_t)g->type | (int64_t)t->dtype.code << 8 |
				   (int64_t)t->dtype.bits << 16 | (int64_t)t->dtype.lanes << 24 |
				   (int64_t)t->ndim << 40;
			for (d = 0; d < t->ndim; d++) {
				key[n++] = t->shape[d];
				key[n++] = t->strides[d];
			}
			break;
		case JITK_ARG_I32:
			key[n++] = g->type;
			key[n++] = g->v.i32;
			break;
		case JITK_ARG_I64:
			key[n++] = g->type;
			key[n++] = g->v.i64;
			break;
		case JITK_ARG_F32: {
			uint32_t bits;

			memcpy(&bits, &g->v.f32, sizeof(bits));
			key[n++] = g->type;
			key[n++] = bits;
			break;
		}
		default:
			return 0;
		}
	}
	return n;
}

static memo_entry *memo_find(const jitk_op *op, const int64_t *key, size_t nkey)
{
	size_t i;

	for (i = 0; i < MEMO_ENTRIES; i++) {
		memo_entry *e = &memo[i];

		if (e->op == op && e->rt_id == op->rt->id && e->nkey == nkey &&
		    !memcmp(e->key, key, nkey * sizeof(*key)))
			return e;
	}
	return NULL;
}

/* Remember call c, which launched (or found nothing to launch). */
static void memo_store(const call *c, const int64_t *key, size_t nkey, const jitk_arg *args,
		       size_t nargs)
{
	const spec_family *f = c->f;
	const jitk_kernel *k = c->k;
	memo_entry *e = memo_find(c->op, key, nkey);
	size_t i, j, nt = 0;

	if (!e) {
		e = &memo[memo_next++ % MEMO_ENTRIES];
		e->op = NULL;
	}
	for (i = 0; i < nargs; i++) {
		const jitk_arg *g = &args[i];
		const jitk_tensor *t;
		memo_tensor *mt;
		int a = -1;
		uint64_t lo, hi;

		for (j = 0; j < f->nargs && a < 0; j++)
			if (c->given[j] == g)
				a = (int)j;
		if (a < 0 || g->type != JITK_ARG_TENSOR)
			continue;
		t = g->v.tensor;
		mt = &e->t[nt++];
		mt->arg = (unsigned char)i;
		mt->fam = (unsigned char)a;
		mt->nullable = f->args[a].nullable;
		mt->configured = (unsigned char)f->args[a].configured;
		mt->align_mask = (uint64_t)k->tensors[a].align - 1;
		mt->overlap = 0;
		mt->below = mt->span = 0;
		if (!is_empty(t)) {
			tensor_span(t, &lo, &hi); /* checked by match_args */
			mt->below = t->data - lo;
			mt->span = hi - lo;
		}
	}
	/* the pairs the overlap check looks at */
	for (i = 0; i < nt; i++) {
		if (!e->t[i].span || f->args[e->t[i].fam].io == IO_IN)
			continue;
		for (j = 0; j < nt; j++)
			if (j != i && e->t[j].span && !may_alias(f, e->t[i].fam, e->t[j].fam))
				e->t[i].overlap |= 1u << j;
	}
	e->ntma = 0;
	for (i = 0; i < c->ntma; i++) {
		size_t ti = f->args[c->tma_arg[i]].tma->tensor_arg;

		for (j = 0; j < nt && e->t[j].fam != ti; j++)
			;
		if (j == nt) {
			e->op = NULL; /* not kept: the full path each time */
			return;
		}
		e->tma_arg[i] = c->tma_arg[i];
		e->tma_tensor[i] = (unsigned char)j;
		e->tma_align[i] = tma_align(&k->tma[c->tma_arg[i]]);
		e->tma_req[i] = c->tma_req[i];
		memcpy(e->tma[i], c->tma[i], 128);
		e->ntma++;
	}
	memcpy(e->key, key, nkey * sizeof(*key));
	e->nkey = nkey;
	e->k = c->k;
	e->instance = c->name;
	e->grid = c->grid;
	e->ntensors = nt;
	memcpy(e->params, c->params, sizeof(e->params));
	for (i = 0; i < nt; i++)
		e->params[e->t[i].fam] = 0;
	e->nscratch = 0;
	for (i = 0; i < f->nargs; i++)
		if (c->scratch_bytes[i]) {
			e->params[i] = 0;
			e->scratch_arg[e->nscratch] = (unsigned char)i;
			e->scratch_bytes[e->nscratch++] = c->scratch_bytes[i];
		}
	e->rt_id = c->op->rt->id;
	e->op = c->op;
}

/* A call the memo holds: 1 when launched (or failed to launch: *rc),
 * 0 when the full path must take it. */
static int memo_call(int *rc, jitk_call_info *info, memo_entry *e, const jitk_arg *args,
		     jitk_stream stream)
{
	uint64_t params[JITK_MAX_SPEC_ARGS], lo[MEMO_ARGS], hi[MEMO_ARGS];
	size_t i, j;

	memcpy(params, e->params, sizeof(params));
	for (i = 0; i < e->ntensors; i++) {
		const memo_tensor *mt = &e->t[i];
		uint64_t data = args[mt->arg].v.tensor->data;

		params[mt->fam] = data;
		lo[i] = hi[i] = data;
		if (!mt->span)
			continue;
		if (!data) {
			if (!mt->nullable)
				return 0;
			continue; /* passed as NULL, never overlaps */
		}
		/* this address must not wrap around either */
		if (data < mt->below || mt->span - mt->below > UINT64_MAX - data)
			return 0;
		lo[i] = data - mt->below;
		hi[i] = lo[i] + mt->span;
		if ((data & mt->align_mask) ||
		    (mt->configured && !configured_ok(e->op->rt, data, mt->configured)))
			return 0;
	}
	for (i = 0; i < e->ntensors; i++)
		for (j = 0; e->t[i].overlap >> j; j++)
			if ((e->t[i].overlap >> j & 1) && lo[i] < hi[j] && lo[j] < hi[i])
				return 0;
	for (i = 0; i < e->ntma; i++) {
		const memo_tensor *mt = &e->t[e->tma_tensor[i]];
		uint64_t data = args[mt->arg].v.tensor->data;

		if (!mt->span || data == e->tma_req[i].addr)
			continue;
		if (data % e->tma_align[i])
			return 0;
		e->tma_req[i].addr = data;
		if (e->op->rt->ops->tensor_map(e->op->rt->impl, e->tma[i], &e->tma_req[i])) {
			e->op = NULL; /* forgotten: the full path says why */
			return 0;
		}
	}
	for (i = 0; e->grid && i < e->nscratch; i++)
		if ((*rc = jitk__scratch(e->op->rt, stream, e->k->fam, (size_t)e->scratch_bytes[i],
					 e->instance, e->k->fam->args[e->scratch_arg[i]].name,
					 &params[e->scratch_arg[i]])))
			return 1;
	info->instance = e->instance;
	*rc = launch_kernel(e->k, e->grid, params, e->ntma, e->tma_arg, e->tma, stream);
	return 1;
}

static int flatten(jitk_tensor *out, const jitk_tensor *t, const char *name)
{
	int64_t stride = 1;
	int32_t d;

	/* (the caller's call checked t's extent: the product cannot overflow
	 * once every stride is the contiguous one) */
	for (d = t->ndim; d-- > 0;) {
		if (t->shape[d] > 1 && t->strides[d] != stride)
			return jitk__error(JITK_EINVAL, "flat(%s): %s is not contiguous (nothing launched)",
					   name, name);
		stride *= t->shape[d];
	}
	return jitk_tensor_contiguous(out, t->data, t->dtype, 1, &stride);
}

/* One fallback step: a strict call of its symbol with the mapped
 * arguments (dry: checked, not launched); *instance is the step's
 * instance. */
static int run_step(call *c, const spec_fallback *fb, const jitk_arg *args, size_t nargs,
		    jitk_stream stream, int dry, const char **instance)
{
	jitk_runtime *rt = c->op->rt;
	const spec_family *callee =
		rt->comp->specs->syms[jitk__spec_symbol_index(rt->comp->specs, fb->symbol)]->fam;
	jitk_arg out[JITK_MAX_SPEC_ARGS];
	jitk_tensor flat[JITK_MAX_SPEC_ARGS];
	jitk_call_info info = JITK_CALL_INFO_INIT;
	size_t n = 0, i, m;
	jitk_op *op;
	call sub;
	int rc;

	for (i = 0; i < callee->nargs; i++) {
		const char *from = callee->args[i].name;
		const jitk_arg *g = NULL;
		int isflat = 0;
		size_t j;

		if (callee->args[i].io == IO_SCRATCH)
			continue; /* jitk gives the step its own */
		for (m = 0; m < fb->nmap; m++)
			if (!strcmp(fb->map[m].callee, from)) {
				from = fb->map[m].caller;
				isflat = fb->map[m].flat;
			}
		for (j = 0; j < nargs; j++)
			if (!strcmp(args[j].name, from))
				g = &args[j];
		if (!g)
			continue;
		out[n] = *g;
		out[n].name = callee->args[i].name;
		if (isflat) {
			if ((rc = flatten(&flat[n], g->v.tensor, from)))
				return rc;
			out[n].v.tensor = &flat[n];
		}
		n++;
	}
	if ((rc = jitk_op_get(&op, rt, fb->symbol)))
		return rc;
	memset(&sub, 0, sizeof(sub));
	memset(&info, 0, sizeof(info));
	sub.op = op;
	sub.mode = JITK_CALL_STRICT;
	sub.lenient = 1;
	sub.dry = dry;
	/* the step's instance agrees with ours (or, when the shapes picked
	 * none, with what every instance we could pick agrees on) on the
	 * parameters we share: the values of the instance the loader linked
	 * to (enums converted by name) */
	sub.parent = 1;
	{
		const spec_symbol *s = c->op->sym;
		const spec_instance *insts = rt->comp->specs->insts, *ref = NULL;
		size_t j;

		if (c->inst != SIZE_MAX) {
			ref = &insts[c->inst];
		} else {
			for (j = 0; j < s->ninsts && !selected(c, j); j++)
				;
			if (j < s->ninsts)
				ref = &insts[s->first + j];
		}
		for (i = 0; ref && i < callee->nparams && i < MAX_MATCHED_PARAMS; i++) {
			int p = jitk__spec_param_index(c->f, callee->params[i].name);

			if (p < 0 || (c->inst == SIZE_MAX && !param_fixed(c, (size_t)p)))
				continue;
			sub.want[i] = insts[ref->fallback[fb - s->fallback]].vals[i];
			sub.want_set[i] = 1;
		}
	}
	rc = call_once(&sub, &info, out, n, stream);
	*instance = info.instance;
	return rc;
}

/* The fallback steps, in order; every step is checked before the first
 * launches, so that a bad argument never leaves the work half done.
 * *first is the first step's instance (jitk_call_info.instance). */
static int run_fallback(call *c, const jitk_arg *args, size_t nargs, jitk_stream stream,
			const char **first)
{
	const spec_symbol *s = c->op->sym;
	const char *instance = NULL;
	size_t step;
	int rc, dry;

	for (dry = 1; dry >= 0; dry--)
		for (step = 0; step < s->nfallback; step++) {
			if ((rc = run_step(c, &s->fallback[step], args, nargs, stream, dry, &instance)))
				return rc;
			if (!step)
				*first = instance;
		}
	return JITK_OK;
}

/* Why this thread's last TRY or AUTO call fell back (jitk_call_info). */
static _Thread_local char last_reason[320];

/* The size of each version of jitk_call_info (jitk.h, "Output structs"). */
static const size_t call_info_sizes[] = { 0, JITK_OUT_END(jitk_call_info, instance) };

int jitk__call_info_clear(jitk_call_info *out)
{
	const jitk_call_info none = JITK_CALL_INFO_INIT;
	int rc;

	if (!out)
		return 0;
	if ((rc = jitk__out_check("jitk_call_info", out->version, JITK_CALL_INFO_VERSION)))
		return rc;
	jitk__out_fill(out, &none, call_info_sizes);
	return 0;
}

int jitk_op_call(jitk_call_info *out, jitk_op *op, jitk_call_mode mode, const jitk_arg *args,
		 size_t nargs, jitk_stream stream)
{
	jitk_call_info info = JITK_CALL_INFO_INIT;
	int64_t key[MEMO_KEY];
	memo_entry *e;
	size_t nkey;
	call c;
	int rc;

	if ((rc = jitk__call_info_clear(out)))
		return rc;
	if (!op || (nargs && !args))
		return jitk__error(JITK_EINVAL, "jitk_op_call: NULL argument");
	if (nargs > JITK_MAX_SPEC_ARGS)
		return jitk__error(JITK_EINVAL, "%s: %zu arguments is more than any symbol takes",
				   op->sym->name, nargs);
	if (mode != JITK_CALL_STRICT && mode != JITK_CALL_TRY && mode != JITK_CALL_AUTO)
		return jitk__error(JITK_EINVAL, "jitk_op_call: unknown mode %d", (int)mode);
	nkey = memo_key(key, mode, args, nargs);
	if (nkey && (e = memo_find(op, key, nkey)) && memo_call(&rc, &info, e, args, stream)) {
		if (!rc)
			jitk__error_clear();
		if (out)
			jitk__out_fill(out, &info, call_info_sizes);
		return rc;
	}
	c.op = op;
	c.mode = mode;
	c.lenient = 0;
	c.dry = 0;
	c.reason[0] = '\0';
	c.parent = 0;
	rc = call_once(&c, &info, args, nargs, stream);
	if (!rc && nkey && c.k)
		memo_store(&c, key, nkey, args, nargs);
	if (rc == JITK_FALLBACK) {
		snprintf(last_reason, sizeof(last_reason), "%s", c.reason);
		jitk__error_clear();
		info.fallback = 1;
		info.reason = last_reason;
		if (mode == JITK_CALL_AUTO) {
			if (!op->sym->nfallback) {
				rc = jitk__error(JITK_EARCH, "%s: %s, and it has no fallback (nothing launched)",
						 c.name, c.reason);
			} else {
				info.instance = NULL;
				rc = run_fallback(&c, args, nargs, stream, &info.instance);
				if (rc)
					info.instance = NULL;
			}
		}
	} else if (!rc) {
		jitk__error_clear();
	}
	if (out)
		jitk__out_fill(out, &info, call_info_sizes);
	return rc;
}

int jitk_call(jitk_call_info *out, jitk_runtime *rt, const char *selector, jitk_call_mode mode,
	      const jitk_arg *args, size_t nargs, jitk_stream stream)
{
	jitk_op *op;
	int rc;

	if ((rc = jitk__call_info_clear(out)))
		return rc;
	if ((rc = jitk_op_get(&op, rt, selector)))
		return rc;
	return jitk_op_call(out, op, mode, args, nargs, stream);
}

/* ---------------------------------------------------------- configure */

int jitk_configure(jitk_runtime *rt, const char *symbol, const char *arg, const jitk_tensor *t)
{
	const spec_family *f;
	const spec_arg *a;
	uint64_t id = 0;
	float v = 0.0f;
	size_t i;
	int k, r, rc = JITK_OK;

	if (!rt || !symbol || !arg || !t)
		return jitk__error(JITK_EINVAL, "jitk_configure: NULL argument");
	if ((k = jitk__spec_symbol_index(rt->comp->specs, symbol)) < 0)
		return jitk__error(JITK_ENOENT, "no symbol named '%s' (see jitk list)", symbol);
	f = rt->comp->specs->syms[k]->fam;
	if ((k = jitk__spec_arg_index(f, arg)) < 0 || !f->args[k].configured)
		return jitk__error(JITK_EINVAL, "%s has no configured argument '%s'", symbol, arg);
	a = &f->args[k];
	if (t->dtype.code != a->elem->code || t->dtype.bits != a->elem->bits || t->ndim != 1 ||
	    t->shape[0] != 1)
		return jitk__error(JITK_EINVAL, "%s of %s: expected a %s tensor of shape [1]", arg,
				   symbol, a->elem->name);
	if (!t->data || t->data % 4)
		return jitk__error(JITK_EINVAL, "%s 0x%llx is NULL or not 4-byte aligned", arg,
				   (unsigned long long)t->data);
	if ((r = rt->ops->buffer_id(rt->impl, t->data, &id)))
		return jitk__error(JITK_EINVAL, "%s 0x%llx is not device memory of this process: %s",
				   arg, (unsigned long long)t->data, rt->ops->error_name(rt->impl, r));
	if ((r = rt->ops->read(rt->impl, &v, t->data, sizeof(v))))
		return jitk__error(JITK_EDRIVER, "reading %s 0x%llx failed: %s", arg,
				   (unsigned long long)t->data, rt->ops->error_name(rt->impl, r));
	if (!isfinite(v) || !(v > 0.0f))
		return jitk__error(JITK_EINVAL, "%s 0x%llx holds %g: it must be one finite, positive fp32",
				   arg, (unsigned long long)t->data, (double)v);
	pthread_rwlock_wrlock(&rt->configured_mu);
	for (i = 0; i < rt->nconfigured; i++)
		if (rt->configured[i].data == t->data && rt->configured[i].rule == a->configured)
			break;
	if (i == rt->nconfigured && rt->nconfigured == rt->capconfigured) {
		size_t cap = rt->capconfigured ? 2 * rt->capconfigured : 16;
		jitk_configured *p = realloc(rt->configured, cap * sizeof(*p));

		if (!p) {
			rc = jitk__error(JITK_ENOMEM, "out of memory");
		} else {
			rt->configured = p;
			rt->capconfigured = cap;
		}
	}
	if (!rc) {
		rt->configured[i].data = t->data;
		rt->configured[i].buffer_id = id;
		rt->configured[i].rule = a->configured;
		if (i == rt->nconfigured)
			rt->nconfigured++;
	}
	pthread_rwlock_unlock(&rt->configured_mu);
	return rc;
}

int jitk_unconfigure(jitk_runtime *rt, jitk_devptr data)
{
	size_t i, n = 0;

	if (!rt)
		return jitk__error(JITK_EINVAL, "jitk_unconfigure: NULL runtime");
	pthread_rwlock_wrlock(&rt->configured_mu);
	for (i = 0; i < rt->nconfigured;)
		if (rt->configured[i].data == data) {
			rt->configured[i] = rt->configured[--rt->nconfigured];
			n++;
		} else {
			i++;
		}
	pthread_rwlock_unlock(&rt->configured_mu);
	return n ? JITK_OK
		 : jitk__error(JITK_ENOENT, "0x%llx was not configured", (unsigned long long)data);
}
