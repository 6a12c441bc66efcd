/* built.c - kernels whose one parameter a builder makes on the device
 * (a spec's launch.builder; docs/spec-format.md, "builder").
 *
 * A CUTLASS kernel takes one struct, its Params: the arguments turned into
 * the collectives' layouts, the tile scheduler's divisors, TMA descriptors.
 * jitk runs no family code on the host, and the struct's layout is the
 * kernel's translation unit's own (nvcc and NVRTC lay it out differently),
 * so the template supplies a builder: a one-thread kernel of the same
 * translation unit taking the spec's arguments, that writes the struct
 * and the launch geometry (jitk_params_out). Running it on every call
 * would cost a launch; instead, for each new set of scalar values (the
 * problem's shape), jitk runs it three times on marker arguments:
 *
 *   run 0 and run 1: each address argument a marker address, each TMA
 *                    descriptor argument a marker pattern of 128 bytes;
 *   run 2:           each address moved by its own distance.
 *
 * Bytes that differ between runs 0 and 1 are padding (nobody reads them);
 * a descriptor pattern found in the block is where that descriptor goes;
 * an 8-byte word that moved by argument i's distance is argument i's
 * address plus a constant. Anything else that changes is refused: the
 * block depends on an address in a way a patch cannot reproduce. A call
 * then copies the block, writes its own addresses and descriptors at
 * those places and launches: no builder run, no host CUTLASS code. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "gpu/runtime.h"

#define MARK_BASE 0x100000000000ull  /* 16 TiB: no allocation of a test lies there */
#define MARK_STEP 0x010000000000ull  /* 1 TiB between two arguments' markers */
#define MARK_DELTA 0x100040ull       /* run 2 moves argument i by (i + 1) MiB + 64 (i + 1) */
#define HEADER_BYTES 64
#define RUN_BYTES (HEADER_BYTES + JITK_BUILT_MAX)
#define BUILT_ENTRIES 32

/* What a builder writes (the translation unit's jitk_params_out). */
typedef struct {
	uint32_t magic, bytes, grid[3], block[3], cluster[3], shared_bytes;
	int32_t sm_count;
	uint32_t pad[3];
} built_header;

_Static_assert(sizeof(built_header) == HEADER_BYTES, "jitk_params_out's header is 64 bytes");
#define BUILT_MAGIC 0x6a69746bu
#define BUILT_REFUSED 0x6a69746eu /* the builder refused: out->params, why */

int jitk__built_analyze(jitk_built_block *out, const unsigned char *runs, size_t run_bytes,
			const uint64_t marks[2][JITK_MAX_SPEC_ARGS], size_t nargs,
			const unsigned char (*patterns)[128], const unsigned char *pattern_arg,
			size_t npatterns, char *why, size_t nwhy)
{
	const unsigned char *r0 = runs + HEADER_BYTES, *r1 = r0 + run_bytes, *r2 = r1 + run_bytes;
	built_header h[3];
	size_t n, o, i, t, np = 0;
	unsigned char *covered;

	for (i = 0; i < 3; i++)
		memcpy(&h[i], runs + i * run_bytes, sizeof(h[i]));
	if (h[0].magic == BUILT_REFUSED) {
		const char *r = (const char *)r0;
		size_t len = 0;

		while (len < 200 && len < run_bytes - HEADER_BYTES && r[len] >= ' ' && r[len] <= '~')
			len++;
		snprintf(why, nwhy, "it refused these arguments: %.*s", (int)len, r);
		return JITK_EINVAL;
	}
	if (h[0].magic != BUILT_MAGIC) {
		snprintf(why, nwhy, "the builder wrote no jitk_params_out (magic 0x%08x, not 0x%08x)",
			 (unsigned)h[0].magic, BUILT_MAGIC);
		return JITK_EINVAL;
	}
	if (memcmp(&h[0], &h[1], 12 * sizeof(uint32_t)) ||
	    memcmp(&h[0], &h[2], 12 * sizeof(uint32_t))) {
		snprintf(why, nwhy, "the builder's launch geometry depends on the arguments' addresses");
		return JITK_EINVAL;
	}
	n = h[0].bytes;
	if (!n || n > JITK_BUILT_MAX || n + HEADER_BYTES > run_bytes) {
		snprintf(why, nwhy, "the builder made a block of %zu bytes (1 to %d)", n,
			 JITK_BUILT_MAX);
		return JITK_EINVAL;
	}
	if (!h[0].block[0] || !h[0].block[1] || !h[0].block[2] || !h[0].grid[0] ||
	    !h[0].grid[1] || !h[0].grid[2]) {
		snprintf(why, nwhy, "the builder's block or grid has a dimension of 0");
		return JITK_EINVAL;
	}
	memset(out, 0, sizeof(*out));
	covered = calloc(n, 1);
	out->patches = calloc(n / 8 + npatterns + 1, sizeof(*out->patches));
	out->bytes = malloc(n);
	if (!covered || !out->patches || !out->bytes) {
		free(covered);
		jitk__built_block_free(out);
		snprintf(why, nwhy, "out of memory");
		return JITK_ENOMEM;
	}
	memcpy(out->bytes, r0, n);
	out->size = n;
	memcpy(out->grid, h[0].grid, sizeof(out->grid));
	memcpy(out->block, h[0].block, sizeof(out->block));
	memcpy(out->cluster, h[0].cluster, sizeof(out->cluster));
	out->shared_bytes = h[0].shared_bytes;
	/* descriptors: their patterns, where the builder copied them */
	for (t = 0; t < npatterns; t++)
		for (o = 0; o + 128 <= n; o += 8) {
			if (memcmp(r0 + o, patterns[t], 128) || memcmp(r2 + o, patterns[t], 128))
				continue;
			out->patches[np].at = (uint32_t)o;
			out->patches[np].kind = BUILT_TMA;
			out->patches[np].arg = pattern_arg[t];
			out->patches[np++].index = (unsigned char)t;
			memset(covered + o, 1, 128);
			o += 120;
		}
	/* addresses: the words that moved by one argument's distance */
	for (o = 0; o < n; o++) {
		uint64_t v0, v1, v2, d;
		size_t w = o & ~(size_t)7;

		if (covered[o] || (r0[o] == r2[o] && r0[o] == r1[o]) || r0[o] != r1[o])
			continue; /* the same, or padding (runs 0 and 1 disagree) */
		if (w + 8 > n)
			goto refuse;
		memcpy(&v0, r0 + w, 8);
		memcpy(&v1, r1 + w, 8);
		memcpy(&v2, r2 + w, 8);
		if (v0 != v1)
			goto refuse;
		d = v2 - v0;
		for (i = 0; i < nargs; i++) {
			int64_t addend = (int64_t)(v0 - marks[0][i]);

			if (!marks[0][i] || d != marks[1][i] - marks[0][i] ||
			    addend <= -(1ll << 32) || addend >= (1ll << 32))
				continue;
			out->patches[np].at = (uint32_t)w;
			out->patches[np].kind = BUILT_ADDRESS;
			out->patches[np].arg = (unsigned char)i;
			out->patches[np++].addend = addend;
			memset(covered + w, 1, 8);
			break;
		}
		if (i == nargs)
			goto refuse;
		o = w + 7;
		continue;
refuse:
		snprintf(why, nwhy, "byte %zu of the block it makes changes with the arguments' "
			 "addresses, but is no argument's address plus a constant", o);
		free(covered);
		jitk__built_block_free(out);
		return JITK_EINVAL;
	}
	free(covered);
	out->npatches = np;
	return JITK_OK;
}

void jitk__built_block_free(jitk_built_block *b)
{
	free(b->bytes);
	free(b->patches);
	memset(b, 0, sizeof(*b));
}

void jitk__built_apply(const jitk_built_block *b, unsigned char *dst, const uint64_t *params,
		       const unsigned char (*tma)[128])
{
	size_t i;

	memcpy(dst, b->bytes, b->size);
	for (i = 0; i < b->npatches; i++) {
		const jitk_built_patch *p = &b->patches[i];

		if (p->kind == BUILT_TMA) {
			memcpy(dst + p->at, tma[p->index], 128);
		} else {
			uint64_t v = params[p->arg] + (uint64_t)p->addend;

			memcpy(dst + p->at, &v, 8);
		}
	}
}

/* ------------------------------------------------------------ the set */

typedef struct {
	int used;
	size_t nkey;
	uint64_t key[JITK_MAX_SPEC_ARGS + 1];
	jitk_built_block b;
} built_entry;

struct jitk_built_set {
	pthread_mutex_t mu;
	built_entry e[BUILT_ENTRIES];
	unsigned next;
	unsigned shared_set; /* the dynamic shared memory the kernel may take */
};

int jitk__built_set_new(jitk_built_set **out)
{
	jitk_built_set *s = calloc(1, sizeof(*s));

	*out = NULL;
	if (!s)
		return jitk__error(JITK_ENOMEM, "out of memory");
	pthread_mutex_init(&s->mu, NULL);
	*out = s;
	return JITK_OK;
}

void jitk__built_set_free(jitk_built_set *s)
{
	size_t i;

	if (!s)
		return;
	for (i = 0; i < BUILT_ENTRIES; i++)
		jitk__built_block_free(&s->e[i].b);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

/* What the block depends on: every scalar argument's value, and which
 * addresses are NULL (a builder may take a NULL pointer otherwise). */
static size_t built_key(uint64_t *key, const jitk_kernel *k, const uint64_t *params)
{
	const spec_family *f = k->fam;
	uint64_t nulls = 0;
	size_t i, n = 0;

	for (i = 0; i < f->nargs; i++) {
		if (f->args[i].type == AT_TMA)
			continue;
		if (f->args[i].type == AT_TENSOR)
			nulls |= (uint64_t)(params[i] == 0) << i;
		else
			key[n++] = params[i];
	}
	key[n++] = nulls;
	return n;
}

/* The three runs of the builder for these scalars, and what they show. */
static int learn(jitk_built_block *out, jitk_kernel *k, const uint64_t *params,
		 size_t ntma, const unsigned char *tma_arg)
{
	jitk_runtime *rt = k->rt;
	const spec_family *f = k->fam;
	const char *name = rt->comp->specs->insts[k->inst].name;
	uint64_t vals[3][JITK_MAX_SPEC_ARGS], marks[2][JITK_MAX_SPEC_ARGS], at[3];
	_Alignas(64) unsigned char pat[JITK_MAX_TMA][128];
	_Alignas(64) static const unsigned char zero_tma[128];
	void *ptrs[3][JITK_MAX_SPEC_ARGS + 1], **args[3];
	built_header in;
	unsigned char *runs;
	char why[256];
	size_t i, t, r;
	int rc;

	memset(marks, 0, sizeof(marks));
	for (i = 0; i < f->nargs; i++) {
		vals[0][i] = vals[1][i] = vals[2][i] = params[i];
		if (f->args[i].type == AT_TENSOR && params[i]) {
			vals[0][i] = vals[1][i] = marks[0][i] = MARK_BASE + (i + 1) * MARK_STEP;
			vals[2][i] = marks[1][i] = marks[0][i] + (i + 1) * MARK_DELTA;
		}
	}
	for (t = 0; t < ntma; t++) {
		memcpy(pat[t], "jitk-tma", 8);
		for (i = 8; i < 128; i++)
			pat[t][i] = (unsigned char)(i * 7 + t * 61 + 0x5a);
	}
	for (r = 0; r < 3; r++) {
		args[r] = ptrs[r];
		ptrs[r][0] = &at[r];
		for (i = 0; i < f->nargs; i++)
			ptrs[r][i + 1] = f->args[i].type == AT_TMA ? (void *)zero_tma
								  : (void *)&vals[r][i];
		for (t = 0; t < ntma; t++)
			ptrs[r][tma_arg[t] + 1] = pat[t];
	}
	memset(&in, 0, sizeof(in));
	in.sm_count = rt->info.sm_count;
	if (!(runs = calloc(3, RUN_BYTES)))
		return jitk__error(JITK_ENOMEM, "out of memory");
	rc = rt->ops->run_builder(rt->impl, k->builder_fn, k->builder_primary, args, 3, &in,
				  sizeof(in), RUN_BYTES, runs);
	if (rc) {
		free(runs);
		return jitk__error(JITK_EDRIVER, "%s: running its parameter builder %s failed: %s "
				   "(nothing launched)", name, f->builder,
				   rt->ops->error_name(rt->impl, rc));
	}
	rc = jitk__built_analyze(out, runs, RUN_BYTES, (const uint64_t(*)[JITK_MAX_SPEC_ARGS])marks,
				 f->nargs, (const unsigned char(*)[128])pat, tma_arg, ntma, why,
				 sizeof(why));
	free(runs);
	if (rc)
		return jitk__error(rc, "%s: its parameter builder %s: %s (nothing launched)", name,
				   f->builder, why);
	if (out->block[0] * out->block[1] * out->block[2] != k->block) {
		rc = jitk__error(JITK_ESPEC, "%s: its parameter builder %s says %u x %u x %u threads "
				 "per block, the spec's launch.block %u", name, f->builder,
				 out->block[0], out->block[1], out->block[2], k->block);
		jitk__built_block_free(out);
	}
	return rc;
}

int jitk__built_launch(jitk_kernel *k, const uint64_t *params, size_t ntma,
		       const unsigned char *tma_arg, const unsigned char (*tma)[128],
		       jitk_stream stream)
{
	jitk_runtime *rt = k->rt;
	jitk_built_set *s = k->built;
	uint64_t key[JITK_MAX_SPEC_ARGS + 1];
	_Alignas(64) unsigned char block[JITK_BUILT_MAX];
	jitk_launch l;
	built_entry *e = NULL;
	void *ptrs[1] = { block };
	size_t nkey = built_key(key, k, params), i;
	int rc = JITK_OK;

	pthread_mutex_lock(&s->mu);
	for (i = 0; i < BUILT_ENTRIES && !e; i++)
		if (s->e[i].used && s->e[i].nkey == nkey &&
		    !memcmp(s->e[i].key, key, nkey * sizeof(*key)))
			e = &s->e[i];
	if (!e) {
		jitk_built_block b;

		if ((rc = learn(&b, k, params, ntma, tma_arg)))
			goto out;
		if (b.shared_bytes > s->shared_set) {
			int r = rt->ops->set_shared(rt->impl, k->fn, k->fn_primary, b.shared_bytes);

			if (r) {
				rc = jitk__error(JITK_EDRIVER, "%s: %u bytes of dynamic shared memory "
						 "refused: %s (nothing launched)",
						 rt->comp->specs->insts[k->inst].name, b.shared_bytes,
						 rt->ops->error_name(rt->impl, r));
				jitk__built_block_free(&b);
				goto out;
			}
			s->shared_set = b.shared_bytes;
		}
		e = &s->e[s->next++ % BUILT_ENTRIES];
		jitk__built_block_free(&e->b);
		e->b = b;
		e->used = 1;
		e->nkey = nkey;
		memcpy(e->key, key, nkey * sizeof(*key));
	}
	jitk__built_apply(&e->b, block, params, tma);
	memset(&l, 0, sizeof(l));
	l.kernel = k->fn;
	l.primary = k->fn_primary;
	memcpy(l.grid, e->b.grid, sizeof(l.grid));
	memcpy(l.block, e->b.block, sizeof(l.block));
	memcpy(l.cluster, e->b.cluster, sizeof(l.cluster));
	if (l.cluster[0] * l.cluster[1] * l.cluster[2] <= 1)
		memset(l.cluster, 0, sizeof(l.cluster));
	l.smem = e->b.shared_bytes;
	l.built_bytes = e->b.size;
	pthread_mutex_unlock(&s->mu);
	l.stream = stream;
	l.params = ptrs;
	l.nparams = 1;
	l.programmatic = k->programmatic;
	if ((rc = rt->ops->launch(rt->impl, &l)))
		return jitk__error(JITK_EDRIVER, "launching %s failed: %s",
				   rt->comp->specs->insts[k->inst].name,
				   rt->ops->error_name(rt->impl, rc));
	return JITK_OK;
out:
	pthread_mutex_unlock(&s->mu);
	return rc;
}
