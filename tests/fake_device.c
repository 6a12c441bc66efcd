/* fake_device.c - a device for the runtime tests: architecture, capture
 * state and load failures are the test's to set (the driver half). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_device.h"
#include "gpu/device.h"

static int fake_open(void *impl, int ordinal, jitk_device_info *info)
{
	fake_device *f = impl;

	(void)ordinal;
	if (f->open_fails)
		return f->open_fails;
	info->cc = f->cc;
	info->sm_count = f->sm_count ? f->sm_count : 132;
	snprintf(info->name, sizeof(info->name), "fake sm_%d", f->cc);
	return 0;
}

static int fake_load(void *impl, const void *image, int is_ptx, void **lib)
{
	fake_device *f = impl;
	static const unsigned char elf[4] = { 0x7f, 'E', 'L', 'F' };

	f->loads++;
	if (f->reject_loads > 0) {
		f->reject_loads--;
		return CUDA_ERROR_INVALID_IMAGE;
	}
	/* A real cubin is an ELF image; PTX is text. */
	if (!is_ptx && memcmp(image, elf, 4))
		return CUDA_ERROR_INVALID_IMAGE;
	*lib = malloc(1);
	return *lib ? 0 : CUDA_ERROR_OUT_OF_MEMORY;
}

static int fake_get_kernel(void *impl, void *lib, const char *name, void **kernel,
			   void **primary)
{
	fake_device *f = impl;

	*primary = NULL; /* launches take the kernel */
	f->kernels_got++;
	*kernel = name[0] == '_' ? lib : NULL; /* lowered names are mangled */
	return *kernel ? 0 : CUDA_ERROR_NOT_FOUND;
}

static void fake_unload(void *impl, void *lib)
{
	fake_device *f = impl;

	f->unloads++;
	free(lib);
}

static int fake_launch_fn(void *impl, const jitk_launch *ln)
{
	fake_device *f = impl;
	fake_launch *l;
	size_t i;

	if (f->nlaunches == FAKE_MAX_LAUNCHES)
		return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
	if (ln->nparams > FAKE_MAX_PARAMS)
		return CUDA_ERROR_INVALID_VALUE; /* more than a fake_launch records */
	l = &f->launches[f->nlaunches++];
	memset(l, 0, sizeof(*l));
	memcpy(l->grid, ln->grid, sizeof(l->grid));
	memcpy(l->block, ln->block, sizeof(l->block));
	memcpy(l->cluster, ln->cluster, sizeof(l->cluster));
	l->smem = ln->smem;
	l->kernel = ln->kernel;
	l->stream = ln->stream;
	l->nparams = ln->nparams;
	l->programmatic = ln->programmatic;
	l->built_bytes = ln->built_bytes;
	if (ln->built_bytes)
		memcpy(l->built, ln->params[0],
		       ln->built_bytes < FAKE_BUILT_BYTES ? ln->built_bytes : FAKE_BUILT_BYTES);
	else
		for (i = 0; i < ln->nparams; i++)
			memcpy(&l->values[i], ln->params[i], 8);
	return 0;
}

static int fake_is_capturing(void *impl, void *stream, int *capturing)
{
	fake_device *f = impl;

	(void)stream;
	*capturing = f->capturing;
	return 0;
}

static int fake_capture_mode(void *impl, int mode, int *old)
{
	fake_device *f = impl;

	(void)mode;
	f->mode_switches++;
	if (old)
		*old = 0;
	return 0;
}

static int fake_read(void *impl, void *dst, uint64_t src, size_t n)
{
	fake_device *f = impl;

	(void)src;
	if (n != sizeof(float))
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(dst, &f->scale_value, sizeof(float));
	return 0;
}

/* Allocation ids: a test "frees and reallocates" every address by bumping
 * buffer_epoch; host_ptr is not device memory. */
static int fake_buffer_id(void *impl, uint64_t ptr, uint64_t *id)
{
	fake_device *f = impl;

	if (f->host_ptr && ptr == f->host_ptr)
		return CUDA_ERROR_INVALID_VALUE;
	*id = ptr ^ ((uint64_t)f->buffer_epoch << 48);
	return 0;
}

static const char *fake_error_name(void *impl, int code)
{
	(void)impl;
	switch (code) {
	case CUDA_ERROR_INVALID_IMAGE: return "CUDA_ERROR_INVALID_IMAGE";
	case CUDA_ERROR_NOT_FOUND: return "CUDA_ERROR_NOT_FOUND";
	case CUDA_ERROR_NO_DEVICE: return "CUDA_ERROR_NO_DEVICE";
	case CUDA_ERROR_INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
	default: return "CUDA_ERROR_UNKNOWN";
	}
}

static void fake_close(void *impl)
{
	fake_device *f = impl;

	f->closed++;
}

/* The request is recorded; the descriptor is its address and rank, so
 * that a test can tell which one a launch got. */
static int fake_tensor_map(void *impl, void *out, const jitk_tma_request *r)
{
	fake_device *f = impl;

	f->tma_encodes++;
	f->tma_last = *r;
	if (f->tma_fail)
		return f->tma_fail;
	memset(out, 0, 128);
	memcpy(out, &r->addr, sizeof(r->addr));
	memcpy((char *)out + 8, &r->rank, sizeof(r->rank));
	return 0;
}

static int fake_run_builder(void *impl, void *kernel, void *primary, void **const *args,
			    unsigned nruns, const void *in, size_t in_bytes, size_t size, void *out)
{
	fake_device *f = impl;
	unsigned r;

	(void)kernel, (void)primary;
	f->builder_runs++;
	if (f->builder_fail)
		return f->builder_fail;
	if (!f->builder)
		return CUDA_ERROR_NOT_FOUND;
	for (r = 0; r < nruns; r++) {
		uint64_t at = 0x7e0000000000ull + r * size; /* where it "writes" */

		memcpy(args[r][0], &at, sizeof(at));
		memset((unsigned char *)out + r * size, 0, size);
		memcpy((unsigned char *)out + r * size, in, in_bytes);
		f->builder(f->builder_payload, args[r], r, (unsigned char *)out + r * size, size);
	}
	return 0;
}

static int fake_set_shared(void *impl, void *kernel, void *primary, unsigned bytes)
{
	fake_device *f = impl;

	(void)kernel, (void)primary;
	f->shared_set = bytes;
	return 0;
}

/* Scratch memory: addresses from 0x7f0000000000 up, 1 MiB apart at
 * least, each recorded; alloc_fail makes the next one fail. */
static int fake_alloc_zeroed(void *impl, size_t bytes, uint64_t *ptr)
{
	fake_device *f = impl;

	*ptr = 0;
	if (f->alloc_hook) {
		void (*hook)(void *) = f->alloc_hook;

		f->alloc_hook = NULL;
		hook(f->alloc_hook_arg);
	}
	if (f->alloc_fail)
		return f->alloc_fail;
	if (f->nallocs >= FAKE_MAX_ALLOCS)
		return CUDA_ERROR_OUT_OF_MEMORY;
	f->next_alloc = f->next_alloc ? f->next_alloc : 0x7f0000000000ull;
	*ptr = f->next_alloc;
	f->next_alloc += ((uint64_t)bytes + (1u << 20)) & ~(uint64_t)((1u << 20) - 1);
	f->alloc_bytes[f->nallocs] = bytes;
	f->alloc_ptr[f->nallocs++] = *ptr;
	return 0;
}

static void fake_free_mem(void *impl, uint64_t ptr)
{
	fake_device *f = impl;
	int i;

	for (i = 0; i < f->nallocs; i++)
		if (f->alloc_ptr[i] == ptr)
			f->frees++;
}

const jitk_device_ops fake_ops = {
	fake_open, fake_load, fake_get_kernel, fake_unload, fake_launch_fn,
	fake_is_capturing, fake_capture_mode, fake_read, fake_buffer_id, fake_error_name,
	fake_close, fake_tensor_map, fake_run_builder, fake_set_shared,
	fake_alloc_zeroed, fake_free_mem,
};

int t_fake_runtime(jitk_runtime **out, fake_device *fake, const char *specs,
		   const char *cache, jitk_capture_policy capture)
{
	jitk_runtime_options o = JITK_RUNTIME_OPTIONS_INIT;

	o.capture = capture;
	return t_fake_runtime_with(out, fake, specs, cache, &o);
}

int t_fake_runtime_with(jitk_runtime **out, fake_device *fake, const char *specs,
			const char *cache, jitk_runtime_options *o_in)
{
	jitk_runtime_options o = *o_in;
	jitk_compiler_options co;

	if (o_in->compiler)
		co = *o_in->compiler;
	else
		jitk_compiler_options_init(&co, JITK_COMPILER_OPTIONS_VERSION);
	co.specs = specs;
	co.cache_dir = cache ? cache : "";
	co.cache_path = "";
	/* the environment's switches never reach a test; a caller's own
	 * no_compile does (gemm_checks: only what gemm.sh precompiled) */
	co.no_compile = o_in->compiler && o_in->compiler->no_compile > 0;
	co.force_compile = 0;
	if (!co.log) { /* the caller's logger, else silenced and counted */
		co.log = t_log_fn;
		co.log_payload = NULL;
	}
	o.compiler = &co;
	return jitk__runtime_new_with(out, &o, &fake_ops, fake);
}
