/* runtime.c - the lazily filled symbol table and the generic launch.
 *
 * One slot per symbol instance. The first request takes the slot's mutex,
 * builds (cache layers, else NVRTC), loads with cuLibraryLoadData and
 * publishes the kernel with a release store; every later request is one
 * acquire load. A gate that forbids the instance here is remembered in the
 * slot too, so fallbacks are decided without work. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>


#include "gpu/runtime.h"

/* ------------------------------------------------------------- create */

/* The target for this GPU: its own sm_XX when NVRTC knows it, else PTX
 * for the newest architecture NVRTC supports below it (the driver
 * compiles that PTX for the newer GPU). */
static int pick_arch(jitk_runtime *rt)
{
	const int *archs = rt->comp->archs; /* what the compiler's NVRTC compiles for */
	int best = 0;
	size_t i;

	rt->arch.kind = 's';
	rt->arch.suffix = 0;
	rt->arch.cc = rt->info.cc;
	if (!archs || !rt->comp->narchs)
		return 0;
	for (i = 0; i < rt->comp->narchs; i++) {
		if (archs[i] == rt->info.cc) {
			best = -1;
			break;
		}
		if (archs[i] < rt->info.cc && archs[i] > best)
			best = archs[i];
	}
	if (best > 0) {
		rt->arch.kind = 'c';
		rt->arch.cc = best;
		jitk__log(&rt->comp->log, JITK_LOG_INFO,
			  "GPU sm_%d is newer than this NVRTC; using PTX for compute_%d", rt->info.cc,
			  best);
	}
	return 0;
}

/* Runtime options as versions 1 and 2 laid them out: the compiler's
 * options (version 1) embedded by value. */
typedef struct {
	unsigned version;
	const char *specs, *cache_dir, *cache_path;
	int no_compile, force_compile;
	const char *dump_dir;
	jitk_log_fn log;
	void *log_payload;
	int log_level, cache_read_only;
} compiler_options_v1;

typedef struct {
	unsigned version;
	int device;
	jitk_capture_policy capture;
	compiler_options_v1 compiler;
	int programmatic; /* version 2 */
} runtime_options_v2;

/* The size of each version of jitk_runtime_options from 3 on, whose
 * fields are the current struct's first ones (1 and 2 embedded the
 * compiler's options: runtime_options_v2). */
static const size_t runtime_options_size[] = {
	0,
	0,
	0,
	offsetof(jitk_runtime_options, compiler) + sizeof(const jitk_compiler_options *), /* 3 */
	offsetof(jitk_runtime_options, manifest) + sizeof(const char *),                  /* 4 */
};

int jitk_runtime_options_init(jitk_runtime_options *opts, unsigned version)
{
	if (!opts)
		return jitk__error(JITK_EINVAL, "jitk_runtime_options_init: opts is NULL");
	if (version == 1 || version == 2) {
		runtime_options_v2 *o = (runtime_options_v2 *)(void *)opts;
		size_t n = version == 1 ? offsetof(runtime_options_v2, programmatic) : sizeof(*o);
		runtime_options_v2 def;

		memset(&def, 0, sizeof(def));
		def.version = version;
		def.capture = JITK_CAPTURE_ERROR;
		jitk_compiler_options_init((jitk_compiler_options *)(void *)&def.compiler, 1);
		memcpy(o, &def, n);
		return JITK_OK;
	}
	if (version < 3 || version > JITK_RUNTIME_OPTIONS_VERSION)
		return jitk__error(JITK_EINVAL, "jitk_runtime_options version %u is not 1 to %u",
				   version, JITK_RUNTIME_OPTIONS_VERSION);
	{
		const jitk_runtime_options def = JITK_RUNTIME_OPTIONS_INIT;

		memcpy(opts, &def, runtime_options_size[version]);
		opts->version = version;
	}
	return JITK_OK;
}

/* Options of any version into o (current layout) and *comp (the compiler's
 * options, from the struct itself for versions 1 and 2). */
static int read_options(jitk_runtime_options *o, jitk_compiler_options *comp,
			const jitk_runtime_options *in)
{
	const jitk_runtime_options def = JITK_RUNTIME_OPTIONS_INIT;

	*o = def;
	jitk_compiler_options_init(comp, JITK_COMPILER_OPTIONS_VERSION);
	if (!in)
		return 0;
	if (in->version == 1 || in->version == 2) {
		const runtime_options_v2 *v = (const runtime_options_v2 *)(const void *)in;

		o->device = v->device;
		o->capture = v->capture;
		o->programmatic = in->version == 2 && v->programmatic != 0; /* nonzero: on */
		return jitk__compiler_options_read(comp, (const jitk_compiler_options *)(const void *)&v->compiler);
	}
	if (in->version < 3 || in->version > JITK_RUNTIME_OPTIONS_VERSION)
		return jitk__error(JITK_EINVAL, "jitk_runtime_options version %u is not 1 to %u",
				   in->version, JITK_RUNTIME_OPTIONS_VERSION);
	memcpy(o, in, runtime_options_size[in->version]);
	o->version = JITK_RUNTIME_OPTIONS_VERSION;
	return jitk__compiler_options_read(comp, in->compiler);
}

/* The seal mode to start with: the option, else $JITK_SEAL. A value that
 * is not a mode is an error: a deployment that asked for a seal must not
 * run unsealed because of a typo. */
static int initial_seal(int *out, int opt)
{
	const char *v;

	*out = JITK_SEAL_OFF;
	if (opt >= 0) {
		if (opt > JITK_SEAL_ERROR)
			return jitk__error(JITK_EINVAL, "jitk_runtime_options.seal %d is not a jitk_seal_mode",
					   opt);
		*out = opt;
		return 0;
	}
	if (!(v = jitk__env("JITK_SEAL")) || !strcmp(v, "0") || !strcasecmp(v, "off"))
		return 0;
	if (!strcasecmp(v, "warn"))
		*out = JITK_SEAL_WARN;
	else if (!strcasecmp(v, "error"))
		*out = JITK_SEAL_ERROR;
	else
		return jitk__error(JITK_EINVAL, "JITK_SEAL='%.40s' is not warn, error or off", v);
	return 0;
}

int jitk__runtime_new_with(jitk_runtime **out, const jitk_runtime_options *opts,
			   const jitk_device_ops *ops, void *impl)
{
	jitk_runtime_options o;
	jitk_compiler_options co;
	jitk_runtime *rt = NULL;
	size_t i;
	int rc, seal;

	if (!out) {
		rc = jitk__error(JITK_EINVAL, "jitk_runtime_new: out is NULL");
		goto fail_impl;
	}
	*out = NULL;
	if ((rc = read_options(&o, &co, opts)) || (rc = initial_seal(&seal, o.seal)))
		goto fail_impl;
	rt = calloc(1, sizeof(*rt));
	if (!rt) {
		rc = jitk__error(JITK_ENOMEM, "out of memory");
		goto fail_impl;
	}
	rt->ops = ops;
	rt->impl = impl;
	rt->id = jitk__runtime_id();
	rt->device = o.device;
	rt->capture = o.capture;
	rt->manifest_fd = -1;
	pthread_mutex_init(&rt->ops_mu, NULL);
	pthread_rwlock_init(&rt->configured_mu, NULL);
	pthread_mutex_init(&rt->manifest_mu, NULL);
	pthread_mutex_init(&rt->scratch_mu, NULL);
	if ((rc = ops->open(impl, o.device, &rt->info))) {
		rc = jitk__error(JITK_ENODEV, "cannot open CUDA device %d: %s", o.device,
				 ops->error_name(impl, rc));
		goto fail;
	}
	if ((rc = jitk_compiler_new(&rt->comp, &co)))
		goto fail;
	/* the seal is the compiler's: every build of it obeys it */
	atomic_store(&rt->comp->seal, seal);
	/* positive on, 0 off, negative $JITK_PROGRAMMATIC (a value that is
	 * not a boolean: off, with a warning) */
	rt->programmatic = o.programmatic > 0 ||
			   (o.programmatic < 0 &&
			    jitk__env_bool(&rt->comp->log, "JITK_PROGRAMMATIC", 0,
					   "off: launched the ordinary way"));
	if ((rc = pick_arch(rt)))
		goto fail;
	jitk__arch_format(rt->arch_str, rt->arch);
	rt->nslots = rt->comp->specs->ninsts;
	rt->slots = calloc(rt->nslots ? rt->nslots : 1, sizeof(*rt->slots));
	rt->sym_ops = calloc(rt->comp->specs->nsyms ? rt->comp->specs->nsyms : 1,
			     sizeof(*rt->sym_ops));
	if (!rt->slots || !rt->sym_ops) {
		rc = jitk__error(JITK_ENOMEM, "out of memory");
		goto fail;
	}
	for (i = 0; i < rt->nslots; i++)
		pthread_mutex_init(&rt->slots[i].mu, NULL);
	for (i = 0; i < rt->comp->specs->nsyms; i++) {
		rt->sym_ops[i].rt = rt;
		rt->sym_ops[i].sym = rt->comp->specs->syms[i];
	}
	jitk__log(&rt->comp->log, JITK_LOG_INFO, "device %d: %s, sm_%d, %d SMs; kernels for %s",
		  o.device, rt->info.name, rt->info.cc, rt->info.sm_count, rt->arch_str);
	{
		const char *manifest = o.manifest ? o.manifest : jitk__env("JITK_MANIFEST_OUT");

		/* Like an unusable cache, a manifest that cannot be written
		 * does not stop the runtime: one warning. */
		if (manifest && jitk_runtime_manifest(rt, manifest))
			jitk__log(&rt->comp->log, JITK_LOG_WARN, "%s; not recording a manifest",
				  jitk_error_last()->message);
		jitk__error_clear();
	}
	*out = rt;
	return JITK_OK;
fail:
	jitk_runtime_free(rt);
	return rc;
fail_impl:
	/* The runtime owns impl from the start: close it on every failure. */
	if (ops && ops->close)
		ops->close(impl);
	return rc;
}

int jitk_runtime_new(jitk_runtime **out, const jitk_runtime_options *opts)
{
	const char *why = "no CUDA driver";
	void *impl;

	if (!out)
		return jitk__error(JITK_EINVAL, "jitk_runtime_new: out is NULL");
	*out = NULL;
	if (!jitk__cuda(&why))
		return jitk__error(JITK_ENODEV, "%s", why);
	impl = jitk__cuda_device_new();
	if (!impl)
		return jitk__error(JITK_ENOMEM, "out of memory");
	return jitk__runtime_new_with(out, opts, &jitk__cuda_ops, impl);
}

static void kernel_free(jitk_runtime *rt, jitk_kernel *k)
{
	size_t i, d;

	if (!k)
		return;
	if (k->lib)
		rt->ops->unload(rt->impl, k->lib);
	jitk__built_set_free(k->built);
	jitk__expr_free(k->grid);
	for (i = 0; i < k->nchecks; i++)
		jitk__expr_free(k->checks[i]);
	free(k->checks);
	for (i = 0; i < JITK_MAX_SPEC_ARGS; i++)
		for (d = 0; d < JITK_MAX_DIMS; d++) {
			jitk__expr_free(k->tensors[i].shape[d]);
			jitk__expr_free(k->tensors[i].strides[d]);
		}
	jitk__cache_entry_free(&k->entry);
	free(k);
}

void jitk_runtime_free(jitk_runtime *rt)
{
	size_t i;

	if (!rt)
		return;
	for (i = 0; i < rt->nslots; i++) {
		kernel_free(rt, atomic_load(&rt->slots[i].kernel));
		free(rt->slots[i].reason);
		pthread_mutex_destroy(&rt->slots[i].mu);
	}
	free(rt->slots);
	if (rt->manifest_fd >= 0)
		close(rt->manifest_fd);
	free(rt->manifest_path);
	pthread_mutex_destroy(&rt->manifest_mu);
	for (i = 0; i < rt->nscratch; i++)
		rt->ops->free_mem(rt->impl, rt->scratch[i].ptr);
	for (i = 0; i < rt->nretired; i++)
		rt->ops->free_mem(rt->impl, rt->retired[i]);
	free(rt->scratch);
	free(rt->retired);
	pthread_mutex_destroy(&rt->scratch_mu);
	jitk__ops_free(rt);
	jitk_compiler_free(rt->comp);
	if (rt->ops && rt->ops->close)
		rt->ops->close(rt->impl);
	pthread_mutex_destroy(&rt->ops_mu);
	pthread_rwlock_destroy(&rt->configured_mu);
	free(rt->configured);
	free(rt);
}

/* ------------------------------------------------------------ scratch */

/* Scratch grows in steps of at least twice its size, in whole MiB, so
 * that a process of growing shapes makes few. A smaller one replaced is
 * kept, not freed: a CUDA graph captured with it may still be replayed
 * (the retired list goes with the runtime). */
#define SCRATCH_GRAIN ((size_t)1 << 20)

/* Room for one more of *cap items of size bytes at *p (0 or ENOMEM). */
static int grow(void **p, size_t *cap, size_t n, size_t size)
{
	size_t c = *cap ? 2 * *cap : 4;
	void *q;

	if (n < *cap)
		return 0;
	if (!(q = realloc(*p, c * size)))
		return JITK_ENOMEM;
	*p = q;
	*cap = c;
	return 0;
}

static uint64_t scratch_thread_id(void)
{
	static atomic_ullong next;
	static _Thread_local uint64_t id;

	if (!id)
		id = atomic_fetch_add(&next, 1) + 1;
	return id;
}

/* The scratch of (stream, thread, family), or NULL; under scratch_mu. */
static jitk_scratch *scratch_find(jitk_runtime *rt, jitk_stream stream, uint64_t thread,
				  const void *family)
{
	size_t i;

	for (i = 0; i < rt->nscratch; i++)
		if (rt->scratch[i].stream == stream && rt->scratch[i].thread == thread &&
		    rt->scratch[i].family == family)
			return &rt->scratch[i];
	return NULL;
}

int jitk__scratch(jitk_runtime *rt, jitk_stream stream, const void *family, size_t bytes,
		  const char *symbol, const char *arg, uint64_t *ptr)
{
	/* CU_STREAM_PER_THREAD is one handle for a stream of each thread: the
	 * thread's id, one no later thread is given (as pthread_self's can be) */
	uint64_t thread = stream == (jitk_stream)CU_STREAM_PER_THREAD ? scratch_thread_id() : 0;
	jitk_scratch *sc;
	size_t want;
	uint64_t mem;
	int r;

	pthread_mutex_lock(&rt->scratch_mu);
	sc = scratch_find(rt, stream, thread, family);
	if (sc && sc->bytes >= bytes) {
		*ptr = sc->ptr;
		pthread_mutex_unlock(&rt->scratch_mu);
		return JITK_OK;
	}
	want = bytes;
	if (sc && sc->bytes <= SIZE_MAX / 2 && want < 2 * sc->bytes)
		want = 2 * sc->bytes;
	want = want > SIZE_MAX - SCRATCH_GRAIN ? want : (want + SCRATCH_GRAIN - 1) & ~(SCRATCH_GRAIN - 1);
	pthread_mutex_unlock(&rt->scratch_mu);
	/* made outside the lock (an allocation, a memset, a wait): no other
	 * stream's call waits for it */
	if ((r = rt->ops->alloc_zeroed(rt->impl, want, &mem)))
		return jitk__error(JITK_EDRIVER, "%s: %zu bytes of scratch for %s could not be made: "
				   "%s (%s not launched)", symbol, want, arg,
				   rt->ops->error_name(rt->impl, r), symbol);
	pthread_mutex_lock(&rt->scratch_mu);
	/* another thread's call on this stream may have made one meanwhile */
	sc = scratch_find(rt, stream, thread, family);
	if (sc && sc->bytes >= bytes) {
		*ptr = sc->ptr;
		pthread_mutex_unlock(&rt->scratch_mu);
		rt->ops->free_mem(rt->impl, mem); /* never given to a kernel */
		return JITK_OK;
	}
	if (sc ? grow((void **)&rt->retired, &rt->capretired, rt->nretired, sizeof(*rt->retired))
	       : grow((void **)&rt->scratch, &rt->capscratch, rt->nscratch, sizeof(*rt->scratch))) {
		pthread_mutex_unlock(&rt->scratch_mu);
		rt->ops->free_mem(rt->impl, mem);
		return jitk__error(JITK_ENOMEM, "out of memory");
	}
	if (sc) {
		rt->retired[rt->nretired++] = sc->ptr;
	} else {
		sc = &rt->scratch[rt->nscratch++];
		sc->stream = stream;
		sc->thread = thread;
		sc->family = family;
	}
	sc->ptr = mem;
	sc->bytes = want;
	*ptr = mem;
	pthread_mutex_unlock(&rt->scratch_mu);
	jitk__log(&rt->comp->log, JITK_LOG_INFO, "scratch of %zu bytes for stream %p (%s, %s)",
		  want, stream, symbol, arg);
	return JITK_OK;
}

const char *jitk_runtime_arch(const jitk_runtime *rt)
{
	return rt ? rt->arch_str : NULL;
}

jitk_compiler *jitk_runtime_compiler(jitk_runtime *rt)
{
	return rt ? rt->comp : NULL;
}

/* ------------------------------------------------------------ resolve */

typedef struct {
	const jitk_kernel *k;
	int sm_count;
	int used_slot; /* the expression bound names a slot */
} bind_ctx;

/* Names of launch and shape expressions: the variant's constants, then
 * sm_count, then slots (integer arguments, then dims). */
static int bind_name(void *ctx, const char *name, int64_t *value, int *arg)
{
	bind_ctx *b = ctx;
	const spec_family *f = b->k->fam;
	int i;

	if (!jitk__variant_lookup((void *)&b->k->variant, name, value))
		return 0;
	if (!strcmp(name, "sm_count")) {
		*value = b->sm_count;
		return 0;
	}
	if ((i = jitk__spec_arg_index(f, name)) >= 0) {
		*arg = i;
		b->used_slot = 1;
		return 1;
	}
	for (i = 0; i < (int)f->ndims; i++)
		if (!strcmp(f->dims[i], name)) {
			*arg = (int)f->nargs + i;
			b->used_slot = 1;
			return 1;
		}
	return -1;
}

/* The slot a bare name stands for, or -1 (a constant or an expression). */
static int bare_slot(const bind_ctx *bc, const spec_expr *e)
{
	int64_t v;
	int slot = -1;
	const char *p;

	for (p = e->text; *p; p++)
		if (!(isalnum((unsigned char)*p) || *p == '_'))
			return -1;
	if (isdigit((unsigned char)e->text[0]) || bind_name((void *)bc, e->text, &v, &slot) != 1)
		return -1;
	return slot;
}

static int bind_expr(expr **out, const spec_expr *e, bind_ctx *bc, const char *what)
{
	bc->used_slot = 0;
	if (jitk__expr_bind(out, e->e, bind_name, bc))
		return jitk__error(JITK_ESPEC, "%s:%d:%d: error: cannot bind %s '%s'", e->loc.file,
				   e->loc.line, e->loc.col, what, e->text);
	return 0;
}

/* What a call must do to know a bound dimension: RULE_CONST (its value
 * is *v, folded now) or RULE_EXPR (evaluate it with the call's slots). */
static signed char fold(const bind_ctx *bc, const expr *e, int64_t *v)
{
	if (!bc->used_slot && !jitk__expr_eval_args(e, NULL, v))
		return RULE_CONST;
	return RULE_EXPR;
}

/* Everything about the launch that depends only on the variant. */
static int kernel_prepare(jitk_kernel *k, jitk_runtime *rt)
{
	const spec_family *f = k->fam;
	const int64_t *vals = rt->comp->specs->insts[k->inst].vals;
	bind_ctx bc = { k, rt->info.sm_count, 0 };
	char err[160];
	int64_t v;
	size_t i, d;
	int rc;

	if (f->nargs > JITK_MAX_SPEC_ARGS || f->nargs + f->ndims > JITK_MAX_SLOTS)
		return jitk__error(JITK_ESPEC, "family %s: more than %d arguments and dims",
				   f->name, JITK_MAX_SLOTS);
	for (i = 0; i < f->nargs; i++) {
		const spec_arg *a = &f->args[i];
		jitk_tensor_rule *t = &k->tensors[i];

		k->present[i] = (unsigned char)jitk__spec_cond_holds(&a->when, vals);
		if (a->type == AT_TMA && k->present[i]) {
			if (++k->ntma > JITK_MAX_TMA)
				return jitk__error(JITK_ESPEC, "%s:%d:%d: error: family %s has more than %d "
						   "TMA descriptor arguments", a->loc.file, a->loc.line,
						   a->loc.col, f->name, JITK_MAX_TMA);
			if ((rc = jitk__tma_bind(&k->tma[i], &k->variant, a)))
				return rc;
		}
		if (a->type != AT_TENSOR || !k->present[i])
			continue;
		if (jitk__expr_eval(a->align.e, jitk__variant_lookup, &k->variant, &v, err, sizeof(err)) ||
		    v < 1 || v > 4096 || (v & (v - 1)))
			return jitk__error(JITK_ESPEC, "%s:%d:%d: error: alignment '%s' of argument %s is not a power of two here",
					   a->loc.file, a->loc.line, a->loc.col, a->align.text, a->name);
		t->align = v;
		for (d = 0; d < a->ndim; d++) {
			if ((rc = bind_expr(&t->shape[d], &a->shape[d], &bc, "shape")))
				return rc;
			t->shape_kind[d] = fold(&bc, t->shape[d], &t->shape_value[d]);
			t->shape_slot[d] = (signed char)bare_slot(&bc, &a->shape[d]);
			t->stride_slot[d] = -1;
			if (!a->strides)
				continue;
			if ((rc = bind_expr(&t->strides[d], &a->strides[d], &bc, "stride")))
				return rc;
			t->stride_kind[d] = fold(&bc, t->strides[d], &t->stride_value[d]);
			t->stride_slot[d] = (signed char)bare_slot(&bc, &a->strides[d]);
		}
	}
	if (jitk__expr_eval(f->block.e, jitk__variant_lookup, &k->variant, &v, err, sizeof(err)) ||
	    v < 1 || v > 1024)
		return jitk__error(JITK_ESPEC, "%s:%d:%d: error: block size '%s' is not 1..1024 here",
				   f->block.loc.file, f->block.loc.line, f->block.loc.col,
				   f->block.text);
	k->block = (unsigned)v;
	k->smem = 0;
	if (f->smem.e) {
		if (jitk__expr_eval(f->smem.e, jitk__variant_lookup, &k->variant, &v, err, sizeof(err)) ||
		    v < 0 || v > (1 << 30))
			return jitk__error(JITK_ESPEC, "%s:%d:%d: error: shared_bytes '%s' is out of range here",
					   f->smem.loc.file, f->smem.loc.line, f->smem.loc.col,
					   f->smem.text);
		k->smem = (unsigned)v;
	}
	/* griddepcontrol needs sm_90; the template must wait for it */
	k->programmatic = rt->programmatic && f->programmatic && rt->arch.cc >= 90;
	if ((rc = bind_expr(&k->grid, &f->grid, &bc, "the grid")))
		return rc;
	k->checks = calloc(f->nchecks ? f->nchecks : 1, sizeof(*k->checks));
	if (!k->checks)
		return jitk__error(JITK_ENOMEM, "out of memory");
	for (i = 0; i < f->nchecks; i++) {
		if ((rc = bind_expr(&k->checks[i], &f->checks[i], &bc, "the launch check")))
			return rc;
		k->nchecks++;
		/* one that this variant's constants pass is never evaluated */
		if (jitk__expr_constant(k->checks[i], &v) && v) {
			jitk__expr_free(k->checks[i]);
			k->checks[i] = NULL;
		}
	}
	return 0;
}

/* launch.builder: the builder's kernel (the entry's second name) and the
 * set of blocks it makes. */
static int builder_prepare(jitk_kernel *k, jitk_runtime *rt)
{
	const char *name = rt->comp->specs->insts[k->inst].name;
	int r;

	if (k->entry.nnames < 2)
		return jitk__error(JITK_ECOMPILE, "%s: its cache entry holds no parameter builder "
				   "(%s)", name, k->fam->builder);
	if ((r = rt->ops->get_kernel(rt->impl, k->lib, k->entry.names[1], &k->builder_fn,
				     &k->builder_primary)))
		return jitk__error(JITK_EDRIVER, "%s: the driver has no parameter builder %s in its "
				   "image: %s", name, k->fam->builder, rt->ops->error_name(rt->impl, r));
	return jitk__built_set_new(&k->built);
}

static int load_build(jitk_runtime *rt, jitk_slot *s, jitk_build *b,
		      void **lib, void **fn, void **fn_primary)
{
	int r;

	if (!b->entry.nnames)
		return jitk__error(JITK_ECOMPILE, "%s: cache entry holds no kernel name",
				   rt->comp->specs->insts[b->variant.inst].name);
	atomic_fetch_add(&s->loads, 1);
	jitk__range_push("load %s (%s)", rt->comp->specs->insts[b->variant.inst].name,
			 b->entry.target);
	r = rt->ops->load(rt->impl, b->entry.image, b->entry.is_ptx, lib);
	if (!r) {
		r = rt->ops->get_kernel(rt->impl, *lib, b->entry.names[0], fn, fn_primary);
		if (r) {
			rt->ops->unload(rt->impl, *lib);
			*lib = NULL;
		}
	}
	jitk__range_pop();
	if (r) {
		atomic_fetch_add(&s->load_failures, 1);
		return jitk__error(JITK_EDRIVER, "the driver rejected the image of %s for %s: %s",
				   rt->comp->specs->insts[b->variant.inst].name, rt->arch_str,
				   rt->ops->error_name(rt->impl, r));
	}
	return 0;
}

static void count_build(jitk_slot *s, const jitk_build *b)
{
	if (b->origin == JITK_ORIGIN_COMPILED) {
		atomic_fetch_add(&s->compiles, 1);
		atomic_fetch_add(&s->cache_misses, 1);
		atomic_fetch_add(&s->compile_us, (unsigned long long)(b->compile_ms * 1000));
	} else {
		atomic_fetch_add(&s->cache_hits, 1);
	}
}

/* The image for this GPU: the local tiers for each target that runs here
 * (exact, family, PTX), else a build for rt->arch, which compiles unless
 * the seal (the compiler's) or JITK_NO_COMPILE forbids it
 * (jitk__resolve_image). */
static int find_or_build(jitk_build *b, jitk_runtime *rt, size_t inst, unsigned flags)
{
	int rc = jitk__resolve_image(b, rt->comp, inst, rt->info.cc, rt->arch, flags);

	atomic_fetch_add(&rt->slots[inst].cache_rejects, b->rejects);
	return rc;
}

/* One "INSTANCE ARCH" line into the manifest, under manifest_mu. */
static void manifest_write(jitk_runtime *rt, size_t inst)
{
	char line[JITK_MANIFEST_LINE_MAX];
	int n = jitk__manifest_line(line, sizeof(line), rt->comp->specs->insts[inst].name,
				    rt->arch_str);
	ssize_t w;

	rt->slots[inst].manifest_gen = rt->manifest_gen;
	do
		w = n > 0 ? write(rt->manifest_fd, line, (size_t)n) : -1;
	while (w < 0 && errno == EINTR);
	if (w != n && !rt->manifest_failed) {
		rt->manifest_failed = 1;
		jitk__log(&rt->comp->log, JITK_LOG_WARN, "cannot append %s to the manifest %s: %s",
			  rt->comp->specs->insts[inst].name, rt->manifest_path,
			  n <= 0 ? "name too long" : w < 0 ? strerror(errno) : "short write");
	}
}

/* A newly resolved instance goes into the manifest once. */
static void manifest_record(jitk_runtime *rt, size_t inst)
{
	pthread_mutex_lock(&rt->manifest_mu);
	if (rt->manifest_fd >= 0 && rt->slots[inst].manifest_gen != rt->manifest_gen)
		manifest_write(rt, inst);
	pthread_mutex_unlock(&rt->manifest_mu);
}

static int resolve_build(jitk_kernel **out, jitk_runtime *rt, size_t inst)
{
	jitk_slot *s = &rt->slots[inst];
	jitk_kernel *k = NULL;
	jitk_build b;
	double t0 = jitk__now_ms();
	const char *refused;
	int rc;

	rc = find_or_build(&b, rt, inst, 0);
	if (rc == JITK_EARCH) {
		/* Remember why; later requests answer from the slot. */
		s->reason = jitk__strdup(jitk_error_last()->message);
		atomic_store(&s->state, SLOT_UNAVAILABLE);
		return rc;
	}
	if (rc)
		return rc;
	count_build(s, &b);
	k = calloc(1, sizeof(*k));
	if (!k) {
		jitk__build_free(&b);
		return jitk__error(JITK_ENOMEM, "out of memory");
	}
	k->rt = rt;
	k->inst = inst;
	k->fam = rt->comp->specs->insts[inst].sym->fam;
	k->variant = b.variant;
	rc = load_build(rt, s, &b, &k->lib, &k->fn, &k->fn_primary);
	if (rc && b.origin != JITK_ORIGIN_COMPILED && (refused = jitk__compile_refused(rt->comp, 0))) {
		/* A cached image the driver refuses, where nothing may compile
		 * its replacement: kept (another driver may load it), and the
		 * error says so. */
		char why[512];

		snprintf(why, sizeof(why), "%s", jitk_error_last()->message);
		rc = jitk__error(rc, "%s; %s: the cache entry is kept and nothing is compiled", why,
				 refused);
	} else if (rc && b.origin != JITK_ORIGIN_COMPILED) {
		/* A cached image the driver refuses: evict it, compile once
		 * more, and give up with a clear error if that fails too. */
		jitk__log(&rt->comp->log, JITK_LOG_WARN, "%s; evicting the cache entry and recompiling",
			  jitk_error_last()->message);
		jitk__cache_evict(rt->comp->cache, b.entry.key);
		jitk__build_free(&b);
		rc = find_or_build(&b, rt, inst, JITK_BUILD_FORCE);
		if (!rc) {
			count_build(s, &b);
			rc = load_build(rt, s, &b, &k->lib, &k->fn, &k->fn_primary);
		}
	}
	if (!rc)
		rc = kernel_prepare(k, rt);
	if (rc) {
		jitk__build_free(&b);
		kernel_free(rt, k);
		return rc;
	}
	memcpy(k->key_hex, b.key_hex, sizeof(k->key_hex));
	k->entry = b.entry; /* keep the lowered names */
	memset(&b.entry, 0, sizeof(b.entry));
	jitk__build_free(&b);
	k->lowered = k->entry.names[0];
	if (k->fam->builder && (rc = builder_prepare(k, rt))) {
		kernel_free(rt, k);
		return rc;
	}
	/* The image itself is no longer needed once loaded. */
	free(k->entry.image);
	k->entry.image = NULL;
	k->entry.size = 0;
	atomic_fetch_add(&s->load_us, (unsigned long long)((jitk__now_ms() - t0) * 1000));
	atomic_store_explicit(&s->kernel, k, memory_order_release);
	*out = k;
	return 0;
}

static int resolve_locked(jitk_kernel **out, jitk_runtime *rt, size_t inst)
{
	int rc;

	jitk__range_push("resolve %s on %s", rt->comp->specs->insts[inst].name, rt->arch_str);
	rc = resolve_build(out, rt, inst);
	jitk__range_pop();
	if (!rc)
		manifest_record(rt, inst);
	return rc;
}

int jitk_runtime_seal(jitk_runtime *rt, jitk_seal_mode mode)
{
	static const char *const names[] = { "off", "warn", "error" };

	if (!rt)
		return jitk__error(JITK_EINVAL, "jitk_runtime_seal: NULL runtime");
	if ((int)mode < JITK_SEAL_OFF || mode > JITK_SEAL_ERROR)
		return jitk__error(JITK_EINVAL, "jitk_runtime_seal: %d is not a jitk_seal_mode",
				   (int)mode);
	atomic_store(&rt->comp->seal, (int)mode);
	jitk__log(&rt->comp->log, JITK_LOG_INFO, "runtime sealed: %s", names[mode]);
	return JITK_OK;
}

int jitk_runtime_manifest(jitk_runtime *rt, const char *path)
{
	char *copy = NULL;
	int fd = -1;
	size_t i;

	if (!rt)
		return jitk__error(JITK_EINVAL, "jitk_runtime_manifest: NULL runtime");
	if (path) {
		if (!(copy = jitk__strdup(path)))
			return jitk__error(JITK_ENOMEM, "out of memory");
		/* a regular file of this user: not through a link, and never a
		 * FIFO (opening one would wait for a reader) or a device */
		if (jitk__output_open(&fd, "the manifest", path, O_APPEND)) {
			free(copy);
			return JITK_EIO;
		}
	}
	pthread_mutex_lock(&rt->manifest_mu);
	if (rt->manifest_fd >= 0)
		close(rt->manifest_fd);
	free(rt->manifest_path);
	rt->manifest_fd = fd;
	rt->manifest_path = copy;
	rt->manifest_failed = 0;
	rt->manifest_gen++;
	/* what is resolved already goes in first */
	for (i = 0; fd >= 0 && i < rt->nslots; i++)
		if (atomic_load_explicit(&rt->slots[i].kernel, memory_order_acquire))
			manifest_write(rt, i);
	pthread_mutex_unlock(&rt->manifest_mu);
	return JITK_OK;
}

const char *jitk__unavailable_reason(jitk_runtime *rt, size_t inst)
{
	jitk_slot *s = &rt->slots[inst];

	if (atomic_load(&s->state) == SLOT_UNAVAILABLE)
		return s->reason ? s->reason : "not available on this architecture";
	return NULL;
}

int jitk__resolve(jitk_kernel **out, jitk_runtime *rt, size_t inst,
		  int check_capture, jitk_stream stream)
{
	jitk_slot *s = &rt->slots[inst];
	jitk_kernel *k = atomic_load_explicit(&s->kernel, memory_order_acquire);
	int rc, old_mode = 0, relaxed = 0;

	*out = k;
	if (k)
		return JITK_OK;
	if (atomic_load(&s->state) == SLOT_UNAVAILABLE)
		return jitk__error(JITK_EARCH, "%s", s->reason ? s->reason : "not available");
	if (check_capture) {
		int capturing = 0;

		if (!rt->ops->is_capturing(rt->impl, stream, &capturing) && capturing) {
			if (rt->capture == JITK_CAPTURE_ERROR)
				return jitk__error(JITK_ECAPTURE,
						   "%s is not resolved and the stream is being captured; "
						   "call jitk_preload before capture (nothing was launched)",
						   rt->comp->specs->insts[inst].name);
			relaxed = !rt->ops->capture_mode(rt->impl, CU_STREAM_CAPTURE_MODE_RELAXED,
							 &old_mode);
		}
	}
	pthread_mutex_lock(&s->mu);
	k = atomic_load_explicit(&s->kernel, memory_order_acquire);
	if (k)
		rc = JITK_OK;
	else if (atomic_load(&s->state) == SLOT_UNAVAILABLE)
		rc = jitk__error(JITK_EARCH, "%s", s->reason ? s->reason : "not available");
	else
		rc = resolve_locked(&k, rt, inst);
	pthread_mutex_unlock(&s->mu);
	if (relaxed)
		rt->ops->capture_mode(rt->impl, old_mode, NULL);
	*out = rc ? NULL : k;
	return rc;
}

int jitk_kernel_get(jitk_kernel **out, jitk_runtime *rt, const char *name)
{
	size_t inst;
	int rc;

	if ((rc = JITK_NULL_ARGS("jitk_kernel_get", "out runtime name", out, rt, name)))
		return rc;
	*out = NULL;
	if ((rc = jitk__spec_find(rt->comp->specs, name, &inst)))
		return rc;
	return jitk__resolve(out, rt, inst, 0, NULL);
}

const char *jitk_kernel_target(const jitk_kernel *k)
{
	return k ? k->entry.target : NULL;
}

/* The size of each version of the output structs (jitk.h, "Output
 * structs"). */
static const size_t kernel_info_sizes[] = { 0, JITK_OUT_END(jitk_kernel_info, key) };
static const size_t stats_sizes[] = { 0, JITK_OUT_END(jitk_stats, load_ms) };

int jitk_kernel_info_get(jitk_kernel_info *out, const jitk_kernel *k)
{
	jitk_kernel_info i = JITK_KERNEL_INFO_INIT;
	int rc;

	if (!out || !k)
		return JITK_NULL_ARGS("jitk_kernel_info_get", "out kernel", out, k);
	if ((rc = jitk__out_check("jitk_kernel_info", out->version, JITK_KERNEL_INFO_VERSION)))
		return rc;
	i.instance = k->rt->comp->specs->insts[k->inst].name;
	i.lowered = k->lowered;
	i.handle = k->fn;
	i.block = k->block;
	i.shared_bytes = k->smem;
	i.key = k->key_hex;
	jitk__out_fill(out, &i, kernel_info_sizes);
	return JITK_OK;
}

int jitk_preload(jitk_runtime *rt, const char *const *names, size_t n)
{
	jitk_kernel *k;
	size_t i, j;
	int rc;

	if (!rt)
		return jitk__error(JITK_EINVAL, "jitk_preload: NULL runtime");
	if (!names) {
		for (i = 0; i < rt->nslots; i++) {
			rc = jitk__resolve(&k, rt, i, 0, NULL);
			if (rc && rc != JITK_EARCH) /* gated instances are not errors */
				return rc;
		}
		jitk__error_clear();
		return JITK_OK;
	}
	for (i = 0; i < n; i++) {
		spec_selection sel;

		if (!names[i])
			return jitk__error(JITK_EINVAL, "jitk_preload: names[%zu] is NULL", i);
		if ((rc = jitk__spec_select(&sel, rt->comp->specs, names[i])))
			return rc;
		for (j = 0; j < sel.sym->ninsts && !rc; j++)
			if (sel.match[j])
				rc = jitk__resolve(&k, rt, sel.sym->first + j, 0, NULL);
		jitk__spec_selection_free(&sel);
		if (rc)
			return rc;
	}
	return JITK_OK;
}

/* -------------------------------------------------------------- stats */

static void add_slot(jitk_stats *o, jitk_slot *s)
{
	o->compiles += atomic_load(&s->compiles);
	o->cache_hits += atomic_load(&s->cache_hits);
	o->cache_misses += atomic_load(&s->cache_misses);
	o->cache_rejects += atomic_load(&s->cache_rejects);
	o->loads += atomic_load(&s->loads);
	o->load_failures += atomic_load(&s->load_failures);
	o->launches += atomic_load(&s->launches);
	o->compile_ms += (double)atomic_load(&s->compile_us) / 1000.0;
	o->load_ms += (double)atomic_load(&s->load_us) / 1000.0;
}

int jitk_stats_get(jitk_stats *out, jitk_runtime *rt, const char *name)
{
	jitk_stats s = JITK_STATS_INIT;
	spec_selection sel;
	size_t i;
	int rc;

	if (!out || !rt)
		return JITK_NULL_ARGS("jitk_stats_get", "out runtime", out, rt);
	if ((rc = jitk__out_check("jitk_stats", out->version, JITK_STATS_VERSION)))
		return rc;
	if (!name) {
		for (i = 0; i < rt->nslots; i++)
			add_slot(&s, &rt->slots[i]);
		jitk__out_fill(out, &s, stats_sizes);
		return JITK_OK;
	}
	if ((rc = jitk__spec_select(&sel, rt->comp->specs, name))) {
		jitk__out_fill(out, &s, stats_sizes); /* zeros, as before */
		return rc;
	}
	for (i = 0; i < sel.sym->ninsts; i++)
		if (sel.match[i])
			add_slot(&s, &rt->slots[sel.sym->first + i]);
	jitk__spec_selection_free(&sel);
	jitk__out_fill(out, &s, stats_sizes);
	return JITK_OK;
}
