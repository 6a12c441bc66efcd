/* runtime.c - the lazily filled symbol table and the generic launch.
 *
 * One slot per symbol instance. The first request takes the slot's mutex,
 * builds (cache layers, else NVRTC), loads with cuLibraryLoadData and
 * publishes the kernel with a release store; every later request is one
 * acquire load. A gate that forbids the instance here is remembered in the
 * slot too, so fallbacks are decided without work. */
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#include <nvrtc.h>

#include "gpu/runtime.h"

/* ------------------------------------------------------------- create */

/* The target for this GPU: its own sm_XX when NVRTC knows it, else PTX
 * for the newest architecture NVRTC supports below it (the driver
 * compiles that PTX for the newer GPU). */
static int pick_arch(jitk_runtime *rt)
{
	int n = 0, *archs, best = 0, i;

	rt->arch.kind = 's';
	rt->arch.suffix = 0;
	rt->arch.cc = rt->info.cc;
	if (nvrtcGetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0)
		return 0;
	archs = calloc((size_t)n, sizeof(*archs));
	if (!archs)
		return jitk__error(JITK_ENOMEM, "out of memory");
	if (nvrtcGetSupportedArchs(archs) == NVRTC_SUCCESS) {
		for (i = 0; i < n; i++) {
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
				  "GPU sm_%d is newer than this NVRTC; using PTX for compute_%d",
				  rt->info.cc, best);
		}
	}
	free(archs);
	return 0;
}

int jitk__runtime_new_with(jitk_runtime **out, const jitk_runtime_options *opts,
			   const jitk_device_ops *ops, void *impl)
{
	jitk_runtime_options o = JITK_RUNTIME_OPTIONS_INIT;
	jitk_runtime *rt;
	size_t i;
	int rc;

	/* The device is ours from here on: every early return closes it. */
	if (!out) {
		rc = jitk__error(JITK_EINVAL, "jitk_runtime_new: out is NULL");
		goto fail_early;
	}
	*out = NULL;
	if (opts) {
		if (opts->version == 1) { /* without the fields of version 2 */
			memcpy(&o, opts, offsetof(jitk_runtime_options, programmatic));
		} else if (opts->version == JITK_RUNTIME_OPTIONS_VERSION) {
			o = *opts;
		} else {
			rc = jitk__error(JITK_EINVAL, "jitk_runtime_options version %u is not 1 or %u",
					 opts->version, JITK_RUNTIME_OPTIONS_VERSION);
			goto fail_early;
		}
		o.version = JITK_RUNTIME_OPTIONS_VERSION;
	}
	rt = calloc(1, sizeof(*rt));
	if (!rt) {
		rc = jitk__error(JITK_ENOMEM, "out of memory");
		goto fail_early;
	}
	rt->ops = ops;
	rt->impl = impl;
	rt->capture = o.capture;
	rt->programmatic = o.programmatic != 0;
	pthread_mutex_init(&rt->scales_mu, NULL);
	if ((rc = ops->open(impl, o.device, &rt->info))) {
		rc = jitk__error(JITK_ENODEV, "cannot open CUDA device %d: %s", o.device,
				 ops->error_name(impl, rc));
		goto fail;
	}
	if ((rc = jitk_compiler_new(&rt->comp, &o.compiler)))
		goto fail;
	if ((rc = pick_arch(rt)))
		goto fail;
	jitk__arch_format(rt->arch_str, rt->arch);
	rt->nslots = rt->comp->specs->ninsts;
	rt->slots = calloc(rt->nslots ? rt->nslots : 1, sizeof(*rt->slots));
	if (!rt->slots) {
		rc = jitk__error(JITK_ENOMEM, "out of memory");
		goto fail;
	}
	for (i = 0; i < rt->nslots; i++)
		pthread_mutex_init(&rt->slots[i].mu, NULL);
	if ((rc = jitk__typed_init(rt)))
		goto fail;
	jitk__log(&rt->comp->log, JITK_LOG_INFO, "device %d: %s, sm_%d, %d SMs; kernels for %s",
		  o.device, rt->info.name, rt->info.cc, rt->info.sm_count, rt->arch_str);
	*out = rt;
	return JITK_OK;
fail:
	jitk_runtime_free(rt);
	return rc;
fail_early:
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
	size_t i;

	if (!k)
		return;
	if (k->lib)
		rt->ops->unload(rt->impl, k->lib);
	jitk__expr_free(k->grid);
	for (i = 0; i < k->nchecks; i++)
		jitk__expr_free(k->checks[i]);
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
	jitk__typed_free(rt);
	jitk_compiler_free(rt->comp);
	if (rt->ops && rt->ops->close)
		rt->ops->close(rt->impl);
	pthread_mutex_destroy(&rt->scales_mu);
	free(rt);
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
} bind_ctx;

static int bind_name(void *ctx, const char *name, int64_t *value, int *arg)
{
	const bind_ctx *b = ctx;
	size_t i;

	if (!jitk__variant_lookup((void *)&b->k->variant, name, value))
		return 0;
	if (!strcmp(name, "sm_count")) {
		*value = b->sm_count;
		return 0;
	}
	for (i = 0; i < b->k->fam->nargs; i++)
		if (!strcmp(b->k->fam->args[i].name, name)) {
			*arg = (int)i;
			return 1;
		}
	return -1;
}

/* Everything about the launch that depends only on the variant. */
static int kernel_prepare(jitk_kernel *k, jitk_runtime *rt)
{
	const spec_family *f = k->fam;
	const int64_t *vals = rt->comp->specs->insts[k->inst].vals;
	bind_ctx bc = { k, rt->info.sm_count };
	char err[160];
	int64_t v;
	size_t i;

	for (i = 0; i < f->nargs; i++) {
		const spec_arg *a = &f->args[i];

		k->present[i] = (unsigned char)jitk__spec_cond_holds(&a->when, vals);
		if (k->present[i])
			k->argi[k->nargs++] = (unsigned char)i;
		k->nullable[i] = (unsigned char)a->nullable;
		if (a->type != AT_PTR)
			continue;
		if (jitk__expr_eval(a->align.e, jitk__variant_lookup, &k->variant, &v, err, sizeof(err)) ||
		    v < 1 || v > 4096 || (v & (v - 1)))
			return jitk__error(JITK_ESPEC, "%s:%d:%d: error: alignment '%s' of argument %s is not a power of two here",
					   a->loc.file, a->loc.line, a->loc.col, a->align.text, a->name);
		k->align[i] = v;
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
	if (jitk__expr_bind(&k->grid, f->grid.e, bind_name, &bc))
		return jitk__error(JITK_ESPEC, "family %s: cannot bind the grid expression", f->name);
	for (i = 0; i < f->nchecks; i++) {
		if (jitk__expr_bind(&k->checks[i], f->checks[i].e, bind_name, &bc))
			return jitk__error(JITK_ESPEC, "family %s: cannot bind a launch check", f->name);
		k->check_src[i] = &f->checks[i];
		k->nchecks++;
	}
	return 0;
}

int jitk__family_fits(const spec_family *f)
{
	if (f->nargs > JITK_MAX_ARGS)
		return jitk__error(JITK_ESPEC, "family %s has %zu arguments: a kernel takes at most %d here",
				   f->name, f->nargs, JITK_MAX_ARGS);
	if (f->nchecks > JITK_MAX_CHECKS)
		return jitk__error(JITK_ESPEC,
				   "family %s has %zu launch checks: a kernel takes at most %d here",
				   f->name, f->nchecks, JITK_MAX_CHECKS);
	return 0;
}

static int load_build(jitk_runtime *rt, jitk_slot *s, jitk_build *b,
		      void **lib, void **fn)
{
	int r;

	if (!b->entry.nnames)
		return jitk__error(JITK_ECOMPILE, "%s: cache entry holds no kernel name",
				   rt->comp->specs->insts[b->variant.inst].name);
	atomic_fetch_add(&s->loads, 1);
	r = rt->ops->load(rt->impl, b->entry.image, b->entry.is_ptx, lib);
	if (!r) {
		r = rt->ops->get_kernel(rt->impl, *lib, b->entry.names[0], fn);
		if (r) {
			rt->ops->unload(rt->impl, *lib);
			*lib = NULL;
		}
	}
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

static int resolve_locked(jitk_kernel **out, jitk_runtime *rt, size_t inst)
{
	jitk_slot *s = &rt->slots[inst];
	jitk_kernel *k = NULL;
	jitk_build b;
	double t0 = jitk__now_ms();
	int rc;

	/* before compiling anything: the kernel object must hold it */
	if ((rc = jitk__family_fits(rt->comp->specs->insts[inst].sym->fam)))
		return rc;
	rc = jitk__build(&b, rt->comp, inst, rt->arch, 0);
	atomic_fetch_add(&s->cache_rejects, b.rejects);
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
	rc = load_build(rt, s, &b, &k->lib, &k->fn);
	if (rc && b.origin != JITK_ORIGIN_COMPILED) {
		/* A cached image the driver refuses: evict it, compile once
		 * more, and give up with a clear error if that fails too. */
		jitk__log(&rt->comp->log, JITK_LOG_WARN, "%s; evicting the cache entry and recompiling",
			  jitk_error_last()->message);
		jitk__cache_evict(rt->comp->cache, b.entry.key);
		jitk__build_free(&b);
		rc = jitk__build(&b, rt->comp, inst, rt->arch, JITK_BUILD_FORCE);
		atomic_fetch_add(&s->cache_rejects, b.rejects);
		if (!rc) {
			count_build(s, &b);
			rc = load_build(rt, s, &b, &k->lib, &k->fn);
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
	/* The image itself is no longer needed once loaded. */
	free(k->entry.image);
	k->entry.image = NULL;
	k->entry.size = 0;
	atomic_fetch_add(&s->load_us, (unsigned long long)((jitk__now_ms() - t0) * 1000));
	atomic_store_explicit(&s->kernel, k, memory_order_release);
	*out = k;
	return 0;
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

	if (!out || !rt || !name)
		return jitk__error(JITK_EINVAL, "jitk_kernel_get: NULL argument");
	*out = NULL;
	if ((rc = jitk__spec_find(rt->comp->specs, name, &inst)))
		return rc;
	return jitk__resolve(out, rt, inst, 0, NULL);
}

int jitk_preload(jitk_runtime *rt, const char *const *names, size_t n)
{
	jitk_kernel *k;
	size_t i, inst;
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
		if (!names[i])
			return jitk__error(JITK_EINVAL, "jitk_preload: names[%zu] is NULL", i);
		if ((rc = jitk__spec_find(rt->comp->specs, names[i], &inst)) ||
		    (rc = jitk__resolve(&k, rt, inst, 0, NULL)))
			return rc;
	}
	return JITK_OK;
}

/* ------------------------------------------------------------- launch */

int jitk__launch_values(jitk_kernel *k, const uint64_t *values,
			jitk_stream stream)
{
	const spec_family *f = k->fam;
	jitk_runtime *rt = k->rt;
	void *params[JITK_MAX_ARGS];
	int64_t ints[JITK_MAX_ARGS];
	int64_t grid = 0, ok;
	size_t i;
	int r;

	for (i = 0; i < f->nargs; i++) {
		const spec_arg *a = &f->args[i];

		params[i] = (void *)&values[i];
		ints[i] = a->type == AT_I32 ? (int64_t)(int32_t)values[i] : (int64_t)values[i];
		if (a->type != AT_PTR || !k->present[i])
			continue;
		if (!values[i]) {
			if (k->nullable[i])
				continue;
			return jitk__error(JITK_EINVAL, "%s: argument %s is NULL (nothing launched)",
					   rt->comp->specs->insts[k->inst].name, a->name);
		}
		if (values[i] % (uint64_t)k->align[i])
			return jitk__error(JITK_EINVAL,
					   "%s: argument %s (0x%llx) is not %lld-byte aligned (nothing launched)",
					   rt->comp->specs->insts[k->inst].name, a->name,
					   (unsigned long long)values[i], (long long)k->align[i]);
	}
	for (i = 0; i < k->nchecks; i++) {
		if (jitk__expr_eval_args(k->checks[i], ints, &ok) || !ok)
			return jitk__error(JITK_EINVAL, "%s: %s (%s; nothing launched)",
					   rt->comp->specs->insts[k->inst].name,
					   k->check_src[i]->message, k->check_src[i]->text);
	}
	if (jitk__expr_eval_args(k->grid, ints, &grid))
		return jitk__error(JITK_EINVAL, "%s: the grid '%s' overflows for these arguments",
				   rt->comp->specs->insts[k->inst].name, f->grid.text);
	if (grid <= 0)
		return JITK_OK; /* empty problem: nothing to launch */
	if (grid > 0x7fffffff)
		return jitk__error(JITK_EINVAL, "%s: grid of %lld blocks is too large",
				   rt->comp->specs->insts[k->inst].name, (long long)grid);
	{
		const unsigned g[3] = { (unsigned)grid, 1, 1 }, bl[3] = { k->block, 1, 1 };

		r = rt->ops->launch(rt->impl, k->fn, g, bl, k->smem, stream, params, f->nargs,
				    k->programmatic);
	}
	if (r)
		return jitk__error(JITK_EDRIVER, "launching %s failed: %s",
				   rt->comp->specs->insts[k->inst].name,
				   rt->ops->error_name(rt->impl, r));
	atomic_fetch_add_explicit(&rt->slots[k->inst].launches, 1, memory_order_relaxed);
	return JITK_OK;
}

int jitk_kernel_launch(jitk_kernel *k, const jitk_arg *args, size_t nargs,
		       jitk_stream stream)
{
	uint64_t values[JITK_MAX_ARGS];
	const char *sym;
	size_t i;

	if (!k || (nargs && !args))
		return jitk__error(JITK_EINVAL, "jitk_kernel_launch: NULL argument");
	sym = k->rt->comp->specs->insts[k->inst].name;
	if (nargs != k->nargs)
		return jitk__error(JITK_EINVAL, "%s takes %zu arguments, not %zu (nothing launched)",
				   sym, k->nargs, nargs);
	memset(values, 0, sizeof(values));
	for (i = 0; i < nargs; i++) {
		const spec_arg *a = &k->fam->args[k->argi[i]];
		jitk_arg_type want = a->type == AT_PTR ? JITK_ARG_PTR :
				     a->type == AT_I32 ? JITK_ARG_I32 :
				     a->type == AT_I64 ? JITK_ARG_I64 : JITK_ARG_F32;

		if (args[i].name && strcmp(args[i].name, a->name))
			return jitk__error(JITK_EINVAL, "%s: argument %zu is %s, not %s (nothing launched)",
					   sym, i, a->name, args[i].name);
		if (args[i].type != want)
			return jitk__error(JITK_EINVAL, "%s: argument %s must be of type %s (nothing launched)",
					   sym, a->name, a->cpp);
		switch (want) {
		case JITK_ARG_PTR: values[k->argi[i]] = args[i].v.ptr; break;
		case JITK_ARG_I64: values[k->argi[i]] = (uint64_t)args[i].v.i64; break;
		case JITK_ARG_I32: memcpy(&values[k->argi[i]], &args[i].v.i32, 4); break;
		case JITK_ARG_F32: memcpy(&values[k->argi[i]], &args[i].v.f32, 4); break;
		}
	}
	return jitk__launch_values(k, values, stream);
}

int jitk_launch(jitk_runtime *rt, const char *name, const jitk_arg *args,
		size_t nargs, jitk_stream stream)
{
	jitk_kernel *k;
	size_t inst;
	int rc;

	if (!rt || !name)
		return jitk__error(JITK_EINVAL, "jitk_launch: NULL argument");
	if ((rc = jitk__spec_find(rt->comp->specs, name, &inst)) ||
	    (rc = jitk__resolve(&k, rt, inst, 1, stream)))
		return rc;
	return jitk_kernel_launch(k, args, nargs, stream);
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
	size_t i, inst;
	int rc;

	if (!out || !rt)
		return jitk__error(JITK_EINVAL, "jitk_stats_get: NULL argument");
	memset(out, 0, sizeof(*out));
	if (!name) {
		for (i = 0; i < rt->nslots; i++)
			add_slot(out, &rt->slots[i]);
		return JITK_OK;
	}
	if ((rc = jitk__spec_find(rt->comp->specs, name, &inst)))
		return rc;
	add_slot(out, &rt->slots[inst]);
	return JITK_OK;
}
