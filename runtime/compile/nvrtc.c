/* nvrtc.c - one translation unit through NVRTC to a cubin (or PTX), with
 * the lowered names of its name expressions and the full log. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* RTLD_DEFAULT */
#endif
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <nvrtc.h>

#include "compile/compile.h"

int jitk__nvrtc_version(int *major, int *minor)
{
	if (nvrtcVersion(major, minor) != NVRTC_SUCCESS)
		return jitk__error(JITK_ECOMPILE, "nvrtcVersion failed");
	return 0;
}

int jitk__nvrtc_archs(int **out, size_t *n)
{
	int count = 0;

	*out = NULL;
	*n = 0;
	if (nvrtcGetNumSupportedArchs(&count) != NVRTC_SUCCESS || count <= 0)
		return jitk__error(JITK_ECOMPILE, "nvrtcGetNumSupportedArchs failed");
	if (!(*out = calloc((size_t)count, sizeof(**out))))
		return jitk__error(JITK_ENOMEM, "out of memory");
	if (nvrtcGetSupportedArchs(*out) != NVRTC_SUCCESS) {
		free(*out);
		*out = NULL;
		return jitk__error(JITK_ECOMPILE, "nvrtcGetSupportedArchs failed");
	}
	*n = (size_t)count;
	return 0;
}

/* ------------------------------------------------ precompiled headers */

/* NVRTC 12.8+'s PCH calls, looked up in the NVRTC already loaded (an
 * older one has none: then no PCH). */
typedef nvrtcResult (*pch_size_fn)(size_t *);
typedef nvrtcResult (*pch_set_fn)(size_t);
typedef nvrtcResult (*pch_status_fn)(nvrtcProgram);
typedef nvrtcResult (*pch_required_fn)(nvrtcProgram, size_t *);

static struct {
	pthread_once_t once;
	pch_size_fn get_heap;
	pch_set_fn set_heap;
	pch_status_fn status;
	pch_required_fn required;
} pch = { PTHREAD_ONCE_INIT, NULL, NULL, NULL, NULL };

static void pch_lookup(void)
{
	pch.get_heap = (pch_size_fn)dlsym(RTLD_DEFAULT, "nvrtcGetPCHHeapSize");
	pch.set_heap = (pch_set_fn)dlsym(RTLD_DEFAULT, "nvrtcSetPCHHeapSize");
	pch.status = (pch_status_fn)dlsym(RTLD_DEFAULT, "nvrtcGetPCHCreateStatus");
	pch.required = (pch_required_fn)dlsym(RTLD_DEFAULT, "nvrtcGetPCHHeapSizeRequired");
	if (!pch.get_heap || !pch.set_heap || !pch.status || !pch.required)
		pch.get_heap = NULL;
}

int jitk__nvrtc_pch_available(void)
{
	pthread_once(&pch.once, pch_lookup);
	return pch.get_heap != NULL;
}

int jitk__nvrtc_pch_heap(size_t at_least)
{
	size_t now = 0;

	if (!jitk__nvrtc_pch_available() || pch.get_heap(&now) != NVRTC_SUCCESS)
		return -1;
	if (now >= at_least)
		return 0;
	return pch.set_heap(at_least) == NVRTC_SUCCESS ? 0 : -1;
}

/* After a compile with -pch: whether a PCH was made, and the heap it
 * would have needed when the heap was too small. */
static void pch_result(jitk_compiled *out, nvrtcProgram prog)
{
	nvrtcResult r;

	out->pch = JITK_PCH_NONE;
	if (!jitk__nvrtc_pch_available())
		return;
	r = pch.status(prog);
	if (r == NVRTC_SUCCESS)
		out->pch = JITK_PCH_CREATED;
	else if (r == NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED &&
		 pch.required(prog, &out->pch_heap_required) == NVRTC_SUCCESS)
		out->pch = JITK_PCH_HEAP_EXHAUSTED;
	else if (r == NVRTC_ERROR_PCH_CREATE)
		out->pch = JITK_PCH_FAILED;
}

#define NVRTC_TRY(call)                                                       \
	do {                                                                  \
		nvrtcResult r_ = (call);                                      \
		if (r_ != NVRTC_SUCCESS) {                                    \
			rc = jitk__error(JITK_ECOMPILE, "%s failed: %s", #call, \
					 nvrtcGetErrorString(r_));            \
			goto done;                                            \
		}                                                             \
	} while (0)

int jitk__nvrtc_compile(jitk_compiled *out, const char *source,
			const char *source_name, const char *const *options,
			size_t noptions, const char *const *exprs,
			size_t nexprs, int want_ptx)
{
	nvrtcProgram prog = NULL;
	nvrtcResult cr;
	size_t size = 0, i;
	double t0 = jitk__now_ms(), c0 = jitk__thread_cpu_ms();
	int rc = 0;

	memset(out, 0, sizeof(*out));
	NVRTC_TRY(nvrtcCreateProgram(&prog, source, source_name, 0, NULL, NULL));
	for (i = 0; i < nexprs; i++)
		NVRTC_TRY(nvrtcAddNameExpression(prog, exprs[i]));
	cr = nvrtcCompileProgram(prog, (int)noptions, options);
	if (nvrtcGetProgramLogSize(prog, &size) == NVRTC_SUCCESS && size > 1) {
		out->log = malloc(size);
		if (out->log && nvrtcGetProgramLog(prog, out->log) != NVRTC_SUCCESS)
			out->log[0] = '\0';
	}
	pch_result(out, prog);
	if (cr != NVRTC_SUCCESS) {
		rc = JITK_ECOMPILE; /* the caller names symbol, variant, arch */
		goto done;
	}
	if (want_ptx) {
		NVRTC_TRY(nvrtcGetPTXSize(prog, &size));
		out->image = malloc(size ? size : 1);
		if (!out->image)
			goto oom;
		NVRTC_TRY(nvrtcGetPTX(prog, out->image));
	} else {
		NVRTC_TRY(nvrtcGetCUBINSize(prog, &size));
		out->image = malloc(size ? size : 1);
		if (!out->image)
			goto oom;
		NVRTC_TRY(nvrtcGetCUBIN(prog, out->image));
	}
	out->size = size;
	out->is_ptx = want_ptx;
	out->lowered = calloc(nexprs ? nexprs : 1, sizeof(*out->lowered));
	if (!out->lowered)
		goto oom;
	for (i = 0; i < nexprs; i++) {
		const char *lowered = NULL;

		NVRTC_TRY(nvrtcGetLoweredName(prog, exprs[i], &lowered));
		out->lowered[i] = jitk__strdup(lowered);
		if (!out->lowered[i])
			goto oom;
		out->nlowered++;
	}
	out->ms = jitk__now_ms() - t0;
	out->cpu_ms = jitk__thread_cpu_ms() - c0;
	goto done;
oom:
	rc = jitk__error(JITK_ENOMEM, "out of memory");
done:
	if (prog)
		nvrtcDestroyProgram(&prog);
	if (rc && rc != JITK_ECOMPILE) {
		char *log = out->log;

		out->log = NULL;
		jitk__compiled_free(out);
		out->log = log;
	}
	return rc;
}

void jitk__compiled_free(jitk_compiled *c)
{
	size_t i;

	free(c->image);
	for (i = 0; i < c->nlowered; i++)
		free(c->lowered[i]);
	free(c->lowered);
	free(c->log);
	memset(c, 0, sizeof(*c));
}
