/* test_deploy.c - deployment controls over a fake device, with real NVRTC
 * compiles on the CPU: a sealed runtime (no compile after warmup), warmup
 * manifests (recorded, read back, precompiled), the lookup order on a GPU
 * (exact target, family target, PTX) at sm_100, sm_103, sm_110, sm_120
 * and sm_121 over caches holding different subsets, jitk explain with a
 * cache, and the profiler ranges (NVTX) a resolve opens, seen through an
 * injection linked into this binary. The test family of tests/families
 * keeps the compiles small. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* An NVTX tool linked in statically (nvtxInit.h, "static injection"): the
 * library's NVTX code finds InitializeInjectionNvtx2_fnptr defined here
 * and hands this file its ranges. NVTX_NO_IMPL: the types only, as a tool
 * includes them. */
#ifndef JITK_NO_NVTX
#define NVTX_NO_IMPL
#include "base/nvtx.h"
#endif

#include "common.h"
#include "fake_device.h"
#include "gpu/runtime.h"

#define SPECS "tests/families/specs"
#define I64 "tadd2[cols=64]"

/* ------------------------------------------------------------ the tool */

#ifndef JITK_NO_NVTX

#define MAX_EVENTS 256
static pthread_mutex_t events_mu = PTHREAD_MUTEX_INITIALIZER;
static char events[MAX_EVENTS][160];
static int nevents, depth, max_depth;
static char domain_name[32];
static int domain_token;

static nvtxDomainHandle_t NVTX_API probe_domain_create(const char *name)
{
	snprintf(domain_name, sizeof(domain_name), "%s", name);
	return (nvtxDomainHandle_t)&domain_token;
}

static int NVTX_API probe_push(nvtxDomainHandle_t d, const nvtxEventAttributes_t *ev)
{
	pthread_mutex_lock(&events_mu);
	if (nevents < MAX_EVENTS)
		snprintf(events[nevents++], sizeof(events[0]), "%*s%s%s", 2 * depth, "",
			 d == (nvtxDomainHandle_t)&domain_token ? "" : "(other domain) ",
			 ev->messageType == NVTX_MESSAGE_TYPE_ASCII ? ev->message.ascii : "?");
	if (++depth > max_depth)
		max_depth = depth;
	pthread_mutex_unlock(&events_mu);
	return depth;
}

static int NVTX_API probe_pop(nvtxDomainHandle_t d)
{
	(void)d;
	pthread_mutex_lock(&events_mu);
	depth--;
	pthread_mutex_unlock(&events_mu);
	return depth;
}

static int NVTX_API probe_init(NvtxGetExportTableFunc_t get)
{
	const NvtxExportTableCallbacks *cb = get(NVTX_ETID_CALLBACKS);
	NvtxFunctionTable t = NULL;
	unsigned n = 0;

	if (!cb || !cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &t, &n) ||
	    n <= NVTX_CBID_CORE2_DomainCreateA)
		return 0;
	*t[NVTX_CBID_CORE2_DomainCreateA] = (NvtxFunctionPointer)probe_domain_create;
	*t[NVTX_CBID_CORE2_DomainRangePushEx] = (NvtxFunctionPointer)probe_push;
	*t[NVTX_CBID_CORE2_DomainRangePop] = (NvtxFunctionPointer)probe_pop;
	return 1;
}

NvtxInitializeInjectionNvtxFunc_t InitializeInjectionNvtx2_fnptr = probe_init;

static void events_reset(void)
{
	pthread_mutex_lock(&events_mu);
	nevents = depth = max_depth = 0;
	pthread_mutex_unlock(&events_mu);
}
#endif

/* ------------------------------------------------------------- helpers */

typedef struct {
	char *dir;
	t_log log;
} fixture;

static int setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->dir = t_tmpdir();
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fixture *f = *state;

	unsetenv("JITK_SEAL");
	unsetenv("JITK_MANIFEST_OUT");
	t_rmtree(f->dir);
	free(f->dir);
	free(f);
	return 0;
}

/* dir/name, the caller's to free. */
static char *fixture_path(const fixture *f, const char *name)
{
	return t_path(f->dir, name);
}

/* A runtime over a fake device of compute capability cc: writable cache
 * `cache` (NULL: none, misses compile in memory), read-only layers
 * `layers` (NULL: none), seal and manifest as the options give them (-1
 * and NULL: the environment), force_compile as given. Warnings go to
 * f->log. */
static jitk_runtime *runtime_forced(fixture *f, fake_device *fake, int cc, const char *cache,
				    const char *layers, int seal, const char *manifest, int force)
{
	jitk_runtime_options o = JITK_RUNTIME_OPTIONS_INIT;
	jitk_compiler_options co = JITK_COMPILER_OPTIONS_INIT;
	jitk_runtime *rt = NULL;

	memset(fake, 0, sizeof(*fake));
	fake->cc = cc;
	fake->sm_count = 132;
	co.specs = SPECS;
	co.cache_dir = cache ? cache : "";
	co.cache_path = layers ? layers : "";
	co.no_compile = 0;
	co.force_compile = force;
	co.log = t_log_fn;
	co.log_payload = &f->log;
	o.compiler = &co;
	o.seal = seal;
	o.manifest = manifest;
	if (jitk__runtime_new_with(&rt, &o, &fake_ops, fake))
		fprintf(stderr, "runtime: %s\n", jitk_error_last()->message);
	assert_non_null(rt);
	return rt;
}

static jitk_runtime *runtime_over(fixture *f, fake_device *fake, int cc, const char *cache,
				  const char *layers, int seal, const char *manifest)
{
	return runtime_forced(f, fake, cc, cache, layers, seal, manifest, 0);
}

/* Precompile name for arch into cache (a fresh compiler): the origin. */
static jitk_origin precompile(const char *cache, const char *name, const char *arch)
{
	jitk_compiler *c = t_compiler(SPECS, cache, NULL, NULL);
	jitk_origin o = JITK_ORIGIN_MEMORY;
	int rc = jitk_precompile(&o, c, name, arch);

	if (rc)
		fprintf(stderr, "precompile %s %s: %s\n", name, arch, jitk_error_last()->message);
	assert_int_equal(rc, 0);
	jitk_compiler_free(c);
	return o;
}

/* The cache key of name on arch, in hex, as the compiler computes it. */
static void key_hex(char out[2 * JITK_HASH_SIZE + 1], jitk_compiler *c, const char *name,
		    const char *arch)
{
	uint8_t key[JITK_HASH_SIZE];

	t_key(c, name, arch, key);
	jitk__hex(out, key, JITK_HASH_SIZE);
}

static jitk_stats stats_of(jitk_runtime *rt, const char *name)
{
	jitk_stats s = JITK_STATS_INIT;

	assert_int_equal(jitk_stats_get(&s, rt, name), 0);
	return s;
}

/* ----------------------------------------------------------------- seal */

/* Sealed with ERROR, a miss is refused with JITK_ENOCOMPILE naming
 * symbol, instance, arch and the whole key: nothing compiled, loaded or
 * launched. Once the cache holds the image, the same sealed runtime
 * resolves it: a hit after sealing is fine. */
static void test_seal_error_refuses_a_miss(void **state)
{
	fixture *f = *state;
	char *cache = fixture_path(f, "cache"), key[2 * JITK_HASH_SIZE + 1], want[512];
	fake_device fake;
	jitk_runtime *rt = runtime_over(f, &fake, 90, cache, NULL, JITK_SEAL_OFF, NULL);
	jitk_tensor out, x, y;
	jitk_arg args[3];
	jitk_kernel *k;
	jitk_stats s = JITK_STATS_INIT;
	const int64_t shape[2] = { 4, 64 };
	const jitk_dtype i32 = JITK_DTYPE_I32;

	assert_int_equal(jitk_runtime_seal(rt, JITK_SEAL_ERROR), 0);
	key_hex(key, rt->comp, I64, "sm_90");
	snprintf(want, sizeof(want),
		 "sealed runtime: " I64 " (symbol tadd2) on sm_90 is not in the cache (target sm_90, "
		 "key %s); compiling refused, nothing launched", key);
	assert_int_equal(jitk_kernel_get(&k, rt, I64), JITK_ENOCOMPILE);
	assert_string_equal(jitk_error_last()->message, want);
	assert_null(k);
	/* the generic call too: an error in every mode, nothing launched */
	jitk_tensor_contiguous(&out, 1ull << 36, i32, 2, shape);
	jitk_tensor_contiguous(&x, 2ull << 36, i32, 2, shape);
	jitk_tensor_contiguous(&y, 3ull << 36, i32, 2, shape);
	args[0] = (jitk_arg){ "out", JITK_ARG_TENSOR, { .tensor = &out } };
	args[1] = (jitk_arg){ "x", JITK_ARG_TENSOR, { .tensor = &x } };
	args[2] = (jitk_arg){ "y", JITK_ARG_TENSOR, { .tensor = &y } };
	assert_int_equal(jitk_call(NULL, rt, "tadd2", JITK_CALL_AUTO, args, 3, NULL), JITK_ENOCOMPILE);
	assert_string_equal(jitk_error_last()->message, want);
	s = stats_of(rt, NULL);
	assert_int_equal(s.compiles, 0);
	assert_int_equal(s.loads, 0);
	assert_int_equal(fake.loads, 0);
	assert_int_equal(fake.nlaunches, 0);
	assert_int_equal(t_count_files(cache, ".jitk"), 0);

	/* precompiled (another process, say): now a hit */
	assert_int_equal(precompile(cache, I64, "sm_90"), JITK_ORIGIN_COMPILED);
	assert_int_equal(jitk_call(NULL, rt, "tadd2", JITK_CALL_STRICT, args, 3, NULL), 0);
	assert_int_equal(fake.nlaunches, 1);
	s = stats_of(rt, I64);
	assert_int_equal(s.compiles, 0);
	assert_int_equal(s.cache_hits, 1);
	assert_int_equal(jitk_kernel_get(&k, rt, I64), 0);
	assert_string_equal(jitk_kernel_target(k), "sm_90");
	jitk_runtime_free(rt);
	free(cache);
}

/* Sealed with WARN, a miss compiles, with one warning that names symbol,
 * instance, arch and key; a hit, or the resolved kernel used again, says
 * nothing. Unsealing (OFF) compiles silently again. */
static void test_seal_warn_logs_and_compiles(void **state)
{
	fixture *f = *state;
	char *cache = fixture_path(f, "cache"), key[2 * JITK_HASH_SIZE + 1], want[512];
	fake_device fake;
	jitk_runtime *rt = runtime_over(f, &fake, 90, cache, NULL, JITK_SEAL_WARN, NULL);
	jitk_kernel *k;

	key_hex(key, rt->comp, I64, "sm_90");
	snprintf(want, sizeof(want),
		 "sealed runtime: compiling " I64 " (symbol tadd2) on sm_90: not in the cache "
		 "(target sm_90, key %s)", key);
	assert_int_equal(jitk_kernel_get(&k, rt, I64), 0);
	assert_int_equal(f->log.warnings, 1);
	assert_string_equal(f->log.last, want);
	assert_int_equal(stats_of(rt, I64).compiles, 1);
	assert_int_equal(jitk_kernel_get(&k, rt, I64), 0);
	assert_int_equal(f->log.warnings, 1);
	/* a hit: silent */
	assert_int_equal(precompile(cache, "tadd2[cols=256]", "sm_90"), JITK_ORIGIN_COMPILED);
	assert_int_equal(jitk_kernel_get(&k, rt, "tadd2[cols=256]"), 0);
	assert_int_equal(f->log.warnings, 1);
	/* unsealed: a miss compiles without a word */
	assert_int_equal(jitk_runtime_seal(rt, JITK_SEAL_OFF), 0);
	assert_int_equal(jitk_kernel_get(&k, rt, "tadd_acc[cols=64]"), 0);
	assert_int_equal(f->log.warnings, 1);
	assert_int_equal(stats_of(rt, NULL).compiles, 2);
	/* not a mode */
	assert_int_equal(jitk_runtime_seal(rt, (jitk_seal_mode)3), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message, "jitk_runtime_seal: 3 is not a jitk_seal_mode");
	assert_int_equal(jitk_runtime_seal(NULL, JITK_SEAL_WARN), JITK_EINVAL);
	jitk_runtime_free(rt);
	free(cache);
}

/* JITK_SEAL=error|warn seals from creation; the option wins over it; a
 * value that is not a mode fails creation (a typo must not leave a
 * deployment unsealed), closing the device. */
static void test_seal_from_the_environment(void **state)
{
	fixture *f = *state;
	jitk_runtime_options o = JITK_RUNTIME_OPTIONS_INIT;
	fake_device fake;
	jitk_runtime *rt;
	jitk_kernel *k;

	setenv("JITK_SEAL", "error", 1);
	rt = runtime_over(f, &fake, 90, NULL, NULL, -1, NULL);
	assert_int_equal(jitk_kernel_get(&k, rt, I64), JITK_ENOCOMPILE);
	assert_non_null(strstr(jitk_error_last()->message, "sealed runtime: " I64 " (symbol tadd2)"));
	jitk_runtime_free(rt);
	/* the option wins */
	rt = runtime_over(f, &fake, 90, NULL, NULL, JITK_SEAL_OFF, NULL);
	assert_int_equal(jitk_kernel_get(&k, rt, I64), 0);
	jitk_runtime_free(rt);

	setenv("JITK_SEAL", "WARN", 1);
	rt = runtime_over(f, &fake, 90, NULL, NULL, -1, NULL);
	assert_int_equal(jitk_kernel_get(&k, rt, I64), 0);
	assert_int_equal(f->log.warnings, 1);
	assert_non_null(strstr(f->log.last, "sealed runtime: compiling " I64));
	jitk_runtime_free(rt);

	setenv("JITK_SEAL", "off", 1);
	rt = runtime_over(f, &fake, 90, NULL, NULL, -1, NULL);
	assert_int_equal(jitk_kernel_get(&k, rt, I64), 0);
	assert_int_equal(f->log.warnings, 1);
	jitk_runtime_free(rt);

	setenv("JITK_SEAL", "eror", 1);
	memset(&fake, 0, sizeof(fake));
	fake.cc = 90;
	rt = (jitk_runtime *)&fake;
	assert_int_equal(t_fake_runtime_with(&rt, &fake, SPECS, NULL, &o), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message, "JITK_SEAL='eror' is not warn, error or off");
	assert_null(rt);
	assert_int_equal(fake.closed, 1);
	unsetenv("JITK_SEAL");
	o.seal = 5;
	assert_int_equal(t_fake_runtime_with(&rt, &fake, SPECS, NULL, &o), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message,
			    "jitk_runtime_options.seal 5 is not a jitk_seal_mode");
}

/* Options of version 3 (the Python binding's, an older program's) have no
 * seal field: _init writes only their bytes, and such a runtime takes the
 * seal from JITK_SEAL. */
static void test_seal_with_version_3_options(void **state)
{
	fixture *f = *state;
	struct {
		unsigned version;
		int device;
		jitk_capture_policy capture;
		int programmatic;
		const jitk_compiler_options *compiler;
		unsigned char after[32]; /* not the caller's: untouched */
	} v3;
	jitk_compiler_options co = JITK_COMPILER_OPTIONS_INIT;
	fake_device fake;
	jitk_runtime *rt = NULL;
	jitk_kernel *k;
	size_t i;

	(void)f;
	memset(&v3, 0x5a, sizeof(v3));
	assert_int_equal(jitk_runtime_options_init((jitk_runtime_options *)(void *)&v3, 3), 0);
	assert_int_equal(v3.version, 3);
	assert_null(v3.compiler);
	for (i = 0; i < sizeof(v3.after); i++)
		assert_int_equal(v3.after[i], 0x5a);
	co.specs = SPECS;
	co.cache_dir = "";
	co.cache_path = "";
	co.log = t_log_fn;
	v3.compiler = &co;
	memset(&fake, 0, sizeof(fake));
	fake.cc = 90;
	setenv("JITK_SEAL", "error", 1);
	assert_int_equal(jitk__runtime_new_with(&rt, (jitk_runtime_options *)(void *)&v3, &fake_ops, &fake), 0);
	assert_int_equal(jitk_kernel_get(&k, rt, I64), JITK_ENOCOMPILE);
	jitk_runtime_free(rt);
	unsetenv("JITK_SEAL");
}

/* A cached image the driver refuses is evicted and compiled again - but
 * not in a runtime sealed with ERROR, which may not compile its
 * replacement: there the entry is kept (another driver may load it; it
 * used to be evicted, then the recompile refused, and the kernel was gone
 * from the cache), nothing compiles, and the error is the driver's,
 * saying so. Sealed with WARN, the recompile's warning says why it
 * compiles (it said "not in the cache"). */
static void test_seal_covers_the_recompile_after_a_driver_rejection(void **state)
{
	fixture *f = *state;
	char *cache = fixture_path(f, "cache");
	fake_device fake;
	jitk_runtime *rt;
	jitk_kernel *k;

	precompile(cache, I64, "sm_90");
	rt = runtime_over(f, &fake, 90, cache, NULL, JITK_SEAL_ERROR, NULL);
	fake.reject_loads = 1;
	assert_int_equal(jitk_kernel_get(&k, rt, I64), JITK_EDRIVER);
	assert_string_equal(jitk_error_last()->message,
			    "the driver rejected the image of " I64 " for sm_90: CUDA_ERROR_INVALID_IMAGE; "
			    "the runtime is sealed: the cache entry is kept and nothing is compiled");
	assert_int_equal(fake.loads, 1);
	assert_int_equal(stats_of(rt, NULL).compiles, 0);
	assert_int_equal(t_count_files(cache, ".jitk"), 1);
	/* the kept entry loads once the driver takes it */
	assert_int_equal(jitk_kernel_get(&k, rt, I64), 0);
	assert_int_equal(stats_of(rt, NULL).compiles, 0);
	jitk_runtime_free(rt);

	rt = runtime_over(f, &fake, 90, cache, NULL, JITK_SEAL_WARN, NULL);
	fake.reject_loads = 1;
	f->log.warnings = 0;
	assert_int_equal(jitk_kernel_get(&k, rt, I64), 0);
	assert_int_equal(stats_of(rt, NULL).compiles, 1);
	assert_int_equal(f->log.warnings, 2); /* evicting, then the seal's */
	assert_non_null(strstr(f->log.last, "sealed runtime: compiling " I64 " (symbol tadd2) on sm_90: "
				"in the cache, but the driver rejected its image (target sm_90"));
	jitk_runtime_free(rt);
	free(cache);
}

/* The seal covers every build of the runtime's compiler, not only the
 * runtime's resolves: jitk_precompile(jitk_runtime_compiler(rt), ...)
 * compiled under JITK_SEAL_ERROR, and the runtime then loaded what it
 * had compiled. Unsealed, the same call compiles. */
static void test_seal_covers_the_runtime_s_compiler(void **state)
{
	fixture *f = *state;
	char *cache = fixture_path(f, "cache");
	fake_device fake;
	jitk_runtime *rt = runtime_over(f, &fake, 90, cache, NULL, JITK_SEAL_ERROR, NULL);
	jitk_origin o = JITK_ORIGIN_MEMORY;
	jitk_kernel *k;

	assert_int_equal(jitk_precompile(&o, jitk_runtime_compiler(rt), I64, "sm_90"), JITK_ENOCOMPILE);
	assert_non_null(strstr(jitk_error_last()->message,
			       "sealed runtime: " I64 " (symbol tadd2) on sm_90 is not in the cache"));
	/* another architecture: refused too */
	assert_int_equal(jitk_precompile(&o, jitk_runtime_compiler(rt), I64, "sm_100"), JITK_ENOCOMPILE);
	assert_int_equal(t_count_files(cache, ".jitk"), 0);
	assert_int_equal(jitk_kernel_get(&k, rt, I64), JITK_ENOCOMPILE);
	assert_int_equal(fake.loads, 0);
	assert_int_equal(atomic_load(&rt->comp->compiles), 0);
	/* unsealed: it compiles */
	assert_int_equal(jitk_runtime_seal(rt, JITK_SEAL_OFF), 0);
	assert_int_equal(jitk_precompile(&o, jitk_runtime_compiler(rt), I64, "sm_90"), 0);
	assert_int_equal(o, JITK_ORIGIN_COMPILED);
	jitk_runtime_free(rt);
	free(cache);
}

/* A cache entry that verifies but is of the wrong kind (an empty image)
 * is a reject; in a runtime sealed with ERROR no compile can replace it,
 * so it is kept (it was evicted), the warning does not say "compiling it
 * again", and the refusal says the entry was rejected, not that the
 * kernel is "not in the cache". */
static void test_seal_keeps_a_rejected_entry(void **state)
{
	fixture *f = *state;
	char *cache = fixture_path(f, "cache"), *names[1] = { "_Z1kv" };
	fake_device fake;
	jitk_runtime *rt = runtime_over(f, &fake, 90, cache, NULL, JITK_SEAL_ERROR, NULL);
	jitk_cache_entry e;
	jitk_kernel *k;

	memset(&e, 0, sizeof(e));
	t_key(rt->comp, I64, "sm_90", e.key);
	snprintf(e.target, sizeof(e.target), "sm_90");
	e.image = "";
	e.names = names;
	e.nnames = 1;
	assert_int_equal(jitk__cache_put(rt->comp->cache, &e), 0);
	f->log.warnings = 0;
	assert_int_equal(jitk_kernel_get(&k, rt, I64), JITK_ENOCOMPILE);
	assert_non_null(strstr(jitk_error_last()->message,
			       " on sm_90 is in the cache, but its entry was rejected (target sm_90"));
	assert_true(f->log.warnings >= 1);
	assert_non_null(strstr(f->log.last, "rejected: the image is empty; kept, not compiled: "
				"the runtime is sealed"));
	assert_int_equal(t_count_files(cache, ".jitk"), 1);
	assert_int_equal(fake.loads, 0);
	jitk_runtime_free(rt);
	free(cache);
}

/* With force_compile (JITK_FORCE_COMPILE=1) a sealed runtime's refusal
 * says that the cache was not looked at; it said a cached kernel was "not
 * in the cache". */
static void test_seal_message_under_force_compile(void **state)
{
	fixture *f = *state;
	char *cache = fixture_path(f, "cache");
	fake_device fake;
	jitk_runtime *rt;
	jitk_kernel *k;

	precompile(cache, I64, "sm_90");
	rt = runtime_forced(f, &fake, 90, cache, NULL, JITK_SEAL_ERROR, NULL, 1);
	assert_int_equal(jitk_kernel_get(&k, rt, I64), JITK_ENOCOMPILE);
	assert_non_null(strstr(jitk_error_last()->message,
			       " on sm_90 is not looked up in the cache (force_compile, "
			       "JITK_FORCE_COMPILE=1, ignores it) (target sm_90"));
	assert_null(strstr(jitk_error_last()->message, "is not in the cache"));
	assert_int_equal(t_count_files(cache, ".jitk"), 1);
	jitk_runtime_free(rt);
	free(cache);
}

/* -------------------------------------------------------------- manifest */

/* A runtime with a manifest writes one "INSTANCE ARCH" line per instance
 * it resolves, once however often it is used; a manifest started later
 * gets what was resolved before first. jitk_precompile_manifest compiles
 * exactly those into a new cache, and a sealed runtime over that cache
 * then resolves all of them without compiling. */
static void test_manifest_records_and_precompiles(void **state)
{
	fixture *f = *state;
	char *m1 = fixture_path(f, "m1.txt"), *m2 = fixture_path(f, "m2.txt"),
	     *cache = fixture_path(f, "cache"), *text;
	fake_device fake;
	jitk_runtime *rt = runtime_over(f, &fake, 90, NULL, NULL, JITK_SEAL_OFF, m1);
	jitk_precompile_counts n = JITK_PRECOMPILE_COUNTS_INIT;
	jitk_compiler *c;
	jitk_kernel *k;

	assert_int_equal(jitk_kernel_get(&k, rt, "tadd3[cols=256]"), 0);
	assert_int_equal(jitk_kernel_get(&k, rt, I64), 0);
	assert_int_equal(jitk_kernel_get(&k, rt, I64), 0);
	assert_int_equal(jitk_preload(rt, (const char *const[]){ I64 }, 1), 0);
	text = t_read(m1, NULL);
	assert_string_equal(text, "tadd3[cols=256] sm_90\n" I64 " sm_90\n");
	free(text);
	/* a second file: what is resolved already, in instance order */
	assert_int_equal(jitk_runtime_manifest(rt, m2), 0);
	assert_int_equal(jitk_kernel_get(&k, rt, "tadd_acc[cols=256]"), 0);
	text = t_read(m2, NULL);
	assert_string_equal(text, "tadd3[cols=256] sm_90\n" I64 " sm_90\ntadd_acc[cols=256] sm_90\n");
	free(text);
	/* m1 is no longer written */
	text = t_read(m1, NULL);
	assert_null(strstr(text, "tadd_acc"));
	free(text);
	/* stopped: nothing more */
	assert_int_equal(jitk_runtime_manifest(rt, NULL), 0);
	assert_int_equal(jitk_kernel_get(&k, rt, "tadd2[cols=256]"), 0);
	text = t_read(m2, NULL);
	assert_null(strstr(text, "tadd2[cols=256]"));
	free(text);
	jitk_runtime_free(rt);

	c = t_compiler(SPECS, cache, NULL, NULL);
	assert_int_equal(jitk_precompile_manifest(&n, c, m2, NULL, NULL, NULL), 0);
	assert_int_equal(n.compiled, 3);
	assert_int_equal(n.cached + n.remote + n.failed + n.gated, 0);
	assert_int_equal(jitk_precompile_manifest(&n, c, m2, NULL, NULL, NULL), 0);
	assert_int_equal(n.cached, 3);
	assert_int_equal(n.compiled, 0);
	jitk_compiler_free(c);
	assert_int_equal(t_count_files(cache, ".jitk"), 3);

	rt = runtime_over(f, &fake, 90, cache, NULL, JITK_SEAL_ERROR, NULL);
	assert_int_equal(jitk_kernel_get(&k, rt, "tadd3[cols=256]"), 0);
	assert_int_equal(jitk_kernel_get(&k, rt, I64), 0);
	assert_int_equal(jitk_kernel_get(&k, rt, "tadd_acc[cols=256]"), 0);
	assert_int_equal(jitk_kernel_get(&k, rt, "tadd2[cols=256]"), JITK_ENOCOMPILE);
	assert_int_equal(stats_of(rt, NULL).compiles, 0);
	jitk_runtime_free(rt);
	free(m1);
	free(m2);
	free(cache);
}

typedef struct {
	char seen[8][64];
	int n;
} progress_log;

static void on_progress(void *ctx, size_t i, size_t n, const jitk_manifest_item *item, int status,
			jitk_origin origin)
{
	progress_log *p = ctx;

	(void)origin;
	if (p->n < 8)
		snprintf(p->seen[p->n++], sizeof(p->seen[0]), "%zu/%zu %s %s %s", i + 1, n,
			 item->instance, item->arch, jitk_status_name(status));
}

/* JITK_MANIFEST_OUT: every runtime of every process appends to one file
 * (O_APPEND); reading it back gives each pair once. An --arch list
 * replaces the recorded architectures; gated pairs are counted, not
 * failures; progress sees each item. */
static void test_manifest_from_the_environment(void **state)
{
	fixture *f = *state;
	char *m = fixture_path(f, "warm.txt"), *cache = fixture_path(f, "cache"), *text;
	fake_device fake;
	jitk_runtime *rt;
	jitk_manifest_item *items;
	jitk_precompile_counts n = JITK_PRECOMPILE_COUNTS_INIT;
	progress_log p;
	jitk_compiler *c;
	jitk_kernel *k;
	size_t count;
	int i;

	setenv("JITK_MANIFEST_OUT", m, 1);
	for (i = 0; i < 2; i++) {
		rt = runtime_over(f, &fake, i ? 100 : 90, NULL, NULL, JITK_SEAL_OFF, NULL);
		assert_int_equal(jitk_kernel_get(&k, rt, "tadd3[cols=64]"), 0);
		jitk_runtime_free(rt);
	}
	rt = runtime_over(f, &fake, 90, NULL, NULL, JITK_SEAL_OFF, NULL);
	assert_int_equal(jitk_kernel_get(&k, rt, "tadd3[cols=64]"), 0);
	jitk_runtime_free(rt);
	unsetenv("JITK_MANIFEST_OUT");
	text = t_read(m, NULL);
	assert_string_equal(text, "tadd3[cols=64] sm_90\ntadd3[cols=64] sm_100\ntadd3[cols=64] sm_90\n");
	free(text);

	c = t_compiler(SPECS, cache, NULL, NULL);
	assert_int_equal(jitk_manifest_read(&items, &count, c, m, NULL), 0);
	assert_int_equal(count, 2);
	assert_string_equal(items[0].instance, "tadd3[cols=64]");
	assert_string_equal(items[0].arch, "sm_90");
	assert_string_equal(items[1].arch, "sm_100");
	jitk_free(items);
	/* the list replaces the architectures: sm_80 is gated for tadd3 */
	memset(&p, 0, sizeof(p));
	assert_int_equal(jitk_precompile_manifest(&n, c, m, "sm_80,sm_120", on_progress, &p), 0);
	assert_int_equal(n.compiled, 1);
	assert_int_equal(n.gated, 1);
	assert_int_equal(n.failed, 0);
	assert_int_equal(p.n, 2);
	assert_string_equal(p.seen[0], "1/2 tadd3[cols=64] sm_80 EARCH");
	assert_string_equal(p.seen[1], "2/2 tadd3[cols=64] sm_120 OK");
	jitk_compiler_free(c);
	free(m);
	free(cache);
}

/* Outputs at paths the user names are regular files of this user: a
 * manifest (JITK_MANIFEST_OUT) or a source dump (JITK_DUMP_DIR) that is a
 * FIFO or a symbolic link is refused with one warning, and what is there
 * is left alone. Before, the manifest was opened through the link and into
 * the FIFO (without a reader, open waited for one forever), and a dump
 * followed a link planted in a shared dump directory and truncated its
 * target. */
static void test_outputs_are_regular_files(void **state)
{
	fixture *f = *state;
	char *fifo = fixture_path(f, "fifo"), *target = fixture_path(f, "target"),
	     *link = fixture_path(f, "link");
	char *dump = fixture_path(f, "dump"), *planted, *text, hex[2 * JITK_HASH_SIZE + 1], name[160];
	fake_device fake;
	jitk_runtime *rt;
	jitk_compiler *c;
	jitk_kernel *k;
	struct stat st;
	int reader;

	assert_int_equal(mkfifo(fifo, 0600), 0);
	t_writef(target, "keep\n");
	assert_int_equal(symlink(target, link), 0);
	/* a FIFO with a reader (so that the old code would not block) */
	reader = open(fifo, O_RDONLY | O_NONBLOCK);
	assert_true(reader >= 0);
	f->log.warnings = 0;
	rt = runtime_over(f, &fake, 90, NULL, NULL, JITK_SEAL_OFF, fifo);
	assert_int_equal(f->log.warnings, 1);
	assert_non_null(strstr(f->log.last, "is a FIFO, not a regular file"));
	assert_non_null(strstr(f->log.last, "not recording a manifest"));
	assert_int_equal(jitk_kernel_get(&k, rt, "tadd3[cols=64]"), 0);
	jitk_runtime_free(rt);
	close(reader);
	/* and without one: refused at once, no wait */
	f->log.warnings = 0;
	setenv("JITK_MANIFEST_OUT", fifo, 1);
	rt = runtime_over(f, &fake, 90, NULL, NULL, JITK_SEAL_OFF, NULL);
	unsetenv("JITK_MANIFEST_OUT");
	assert_int_equal(f->log.warnings, 1);
	assert_non_null(strstr(f->log.last, "is a FIFO"));
	jitk_runtime_free(rt);
	/* a link: refused, its target untouched */
	f->log.warnings = 0;
	rt = runtime_over(f, &fake, 90, NULL, NULL, JITK_SEAL_OFF, link);
	assert_int_equal(f->log.warnings, 1);
	assert_non_null(strstr(f->log.last, "is a symbolic link"));
	assert_int_equal(jitk_kernel_get(&k, rt, "tadd3[cols=64]"), 0);
	jitk_runtime_free(rt);
	text = t_read(target, NULL);
	assert_string_equal(text, "keep\n");
	free(text);

	/* a link planted under the name of a source dump */
	c = t_compiler(SPECS, NULL, NULL, NULL);
	key_hex(hex, c, "tadd3[cols=64]", "sm_90");
	jitk_compiler_free(c);
	assert_int_equal(mkdir(dump, 0700), 0);
	snprintf(name, sizeof(name), "tadd3_cols_64_.sm_90.%.12s.cu", hex);
	planted = t_path(dump, name);
	assert_int_equal(symlink(target, planted), 0);
	setenv("JITK_DUMP_DIR", dump, 1);
	f->log.warnings = 0;
	rt = runtime_over(f, &fake, 90, NULL, NULL, JITK_SEAL_OFF, NULL);
	assert_int_equal(jitk_kernel_get(&k, rt, "tadd3[cols=64]"), 0);
	assert_int_equal(f->log.warnings, 1);
	assert_non_null(strstr(f->log.last, "JITK_DUMP_DIR"));
	assert_non_null(strstr(f->log.last, "is a symbolic link"));
	/* another symbol's dump, with nothing in the way, is written */
	assert_int_equal(jitk_kernel_get(&k, rt, "tadd2[cols=64]"), 0);
	jitk_runtime_free(rt);
	unsetenv("JITK_DUMP_DIR");
	assert_int_equal(lstat(planted, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	text = t_read(target, NULL);
	assert_string_equal(text, "keep\n");
	free(text);
	assert_int_equal(t_count_files(dump, ".cu"), 1);
	free(planted);
	free(dump);
	free(fifo);
	free(target);
	free(link);
}

/* What a manifest may hold, and the one-line errors for what it may not. */
static void test_manifest_reading(void **state)
{
	fixture *f = *state;
	char *m = fixture_path(f, "m.txt"), want[512];
	jitk_compiler *c = t_compiler(SPECS, NULL, NULL, NULL);
	jitk_manifest_item *items;
	size_t n;

	/* comments, blank lines, CRLF, blanks around; a selector expands */
	t_writef(m, "# warmup of rank 0\n\n  tadd2 sm_90 \r\n\ttadd_acc[cols=64]\tcompute_90\n"
		    "tadd2[cols=256] sm_90\n");
	assert_int_equal(jitk_manifest_read(&items, &n, c, m, NULL), 0);
	assert_int_equal(n, 3);
	assert_string_equal(items[0].instance, "tadd2[cols=64]");
	assert_string_equal(items[1].instance, "tadd2[cols=256]");
	assert_string_equal(items[1].arch, "sm_90");
	assert_string_equal(items[2].instance, "tadd_acc[cols=64]");
	assert_string_equal(items[2].arch, "compute_90");
	jitk_free(items);
	assert_int_equal(jitk_manifest_read(&items, &n, c, m, "sm_100f,sm_90a"), 0);
	assert_int_equal(n, 6);
	assert_string_equal(items[0].arch, "sm_100f");
	assert_string_equal(items[1].arch, "sm_90a");
	jitk_free(items);
	/* an empty manifest is no items */
	t_writef(m, "# nothing yet\n");
	assert_int_equal(jitk_manifest_read(&items, &n, c, m, NULL), 0);
	assert_int_equal(n, 0);
	jitk_free(items);

	t_writef(m, "tadd2 sm_90\ntadd2[cols=64]\n");
	assert_int_equal(jitk_manifest_read(&items, &n, c, m, NULL), JITK_EINVAL);
	snprintf(want, sizeof(want), "%s:2: error: expected 'INSTANCE ARCH', got 'tadd2[cols=64]'", m);
	assert_string_equal(jitk_error_last()->message, want);
	assert_null(items);
	assert_int_equal(n, 0);
	t_writef(m, "tadd2 sm_90 extra\n");
	assert_int_equal(jitk_manifest_read(&items, &n, c, m, NULL), JITK_EINVAL);
	t_writef(m, "tadd4 sm_90\n");
	assert_int_equal(jitk_manifest_read(&items, &n, c, m, NULL), JITK_ENOENT);
	snprintf(want, sizeof(want), "%s:1: error: ", m);
	assert_true(!strncmp(jitk_error_last()->message, want, strlen(want)));
	assert_non_null(strstr(jitk_error_last()->message, "tadd4"));
	/* issue 22 #7: a selector is read to its end, in a manifest too */
	t_writef(m, "tadd2[cols=64][cols=256] sm_90\n");
	assert_int_equal(jitk_manifest_read(&items, &n, c, m, NULL), JITK_EINVAL);
	snprintf(want, sizeof(want), "%s:1: error: 'tadd2[cols=64][cols=256]': column 15: "
		 "unexpected text after the selector's ']'", m);
	assert_true(!strncmp(jitk_error_last()->message, want, strlen(want)));
	assert_non_null(strstr(jitk_error_last()->detail, "tadd2[cols=64][cols=256]\n      | "));
	assert_null(items);
	t_writef(m, "tadd2 sm_9x\n");
	assert_int_equal(jitk_manifest_read(&items, &n, c, m, NULL), JITK_EINVAL);
	snprintf(want, sizeof(want),
		 "%s:1: error: 'sm_9x' is not an architecture (sm_90, sm_100a, compute_90...)", m);
	assert_string_equal(jitk_error_last()->message, want);
	/* one NVRTC cannot compile for: named with the ones it can */
	t_writef(m, "tadd2 sm_99\n");
	assert_int_equal(jitk_manifest_read(&items, &n, c, m, NULL), JITK_EINVAL);
	snprintf(want, sizeof(want), "%s:1: error: sm_99 is not a target NVRTC", m);
	assert_true(!strncmp(jitk_error_last()->message, want, strlen(want)));
	/* a control character is quoted, not printed */
	t_writef(m, "tadd2 sm_90\x1b[2J\n");
	assert_int_equal(jitk_manifest_read(&items, &n, c, m, NULL), JITK_EINVAL);
	assert_null(strchr(jitk_error_last()->message, '\x1b'));
	/* the list is checked before the file is read */
	assert_int_equal(jitk_manifest_read(&items, &n, c, m, "sm_90,"), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message,
			    "'' is not an architecture (sm_90, sm_100a, compute_90...)");
	unlink(m);
	assert_int_equal(jitk_manifest_read(&items, &n, c, m, NULL), JITK_EIO);
	snprintf(want, sizeof(want), "%s: cannot open: ", m);
	assert_true(!strncmp(jitk_error_last()->message, want, strlen(want)));
	assert_int_equal(jitk_manifest_read(NULL, &n, c, m, NULL), JITK_EINVAL);
	/* a manifest that cannot be opened for writing: the API says so, the
	 * option only warns */
	{
		fake_device fake;
		jitk_runtime *rt = runtime_over(f, &fake, 90, NULL, NULL, 0, "/nonexistent-dir/m.txt");

		assert_int_equal(f->log.warnings, 1);
		assert_string_equal(f->log.last, "cannot open the manifest /nonexistent-dir/m.txt: "
						 "No such file or directory; not recording a manifest");
		assert_int_equal(jitk_runtime_manifest(rt, "/nonexistent-dir/m.txt"), JITK_EIO);
		jitk_runtime_free(rt);
	}
	jitk_compiler_free(c);
	free(m);
}

/* ------------------------------------------------- exact, family, PTX */

/* One cache directory per target, each holding I64 for that target only;
 * a subset of them is a list of read-only layers. */
static const char *const cached_targets[] = { "sm_100f", "sm_103", "sm_110f", "sm_120f",
					      "compute_100", "sm_100a" };
#define NTARGETS (sizeof(cached_targets) / sizeof(cached_targets[0]))

static char *layers_of(const fixture *f, const char *const *targets, size_t n)
{
	jbuf b;
	size_t i;

	jitk__jbuf_init(&b);
	for (i = 0; i < n; i++)
		jitk__jbuf_printf(&b, "%s%s/%s", i ? ":" : "", f->dir, targets[i]);
	return jitk__jbuf_detach(&b);
}

/* What a sealed (ERROR) runtime on sm_cc over the layers resolves I64 to:
 * the target of the image, or "compile" when it would have to compile. */
static void expect_image(fixture *f, int cc, const char *const *targets, size_t n,
			 const char *want)
{
	char *layers = layers_of(f, targets, n);
	fake_device fake;
	jitk_runtime *rt = runtime_over(f, &fake, cc, NULL, layers, JITK_SEAL_ERROR, NULL);
	jitk_kernel *k = NULL;
	int rc = jitk_kernel_get(&k, rt, I64);
	const char *got = rc == JITK_ENOCOMPILE ? "compile" : rc ? jitk_error_last()->message
							      : jitk_kernel_target(k);

	if (strcmp(got, want))
		fprintf(stderr, "sm_%d over %s: got %s, want %s\n", cc, layers, got, want);
	assert_string_equal(got, want);
	if (!rc) {
		assert_int_equal(stats_of(rt, I64).cache_hits, 1);
		assert_int_equal(fake.loads, 1);
	}
	assert_int_equal(stats_of(rt, I64).compiles, 0);
	jitk_runtime_free(rt);
	free(layers);
}

static void test_lookup_order(void **state)
{
	fixture *f = *state;
	const char *const only_100f[] = { "sm_100f" };
	const char *const exact_and_family[] = { "sm_100f", "sm_103" };
	const char *const only_120f[] = { "sm_120f" };
	const char *const only_110f[] = { "sm_110f" };
	const char *const ptx[] = { "compute_100" };
	const char *const ptx_and_family[] = { "compute_100", "sm_100f" };
	const char *const arch_specific[] = { "sm_100a" };
	size_t i;

	for (i = 0; i < NTARGETS; i++) {
		char *dir = fixture_path(f, cached_targets[i]);

		precompile(dir, I64, cached_targets[i]);
		free(dir);
	}
	/* the exact target first, then the family */
	expect_image(f, 100, only_100f, 1, "sm_100f");
	expect_image(f, 103, only_100f, 1, "sm_100f");
	expect_image(f, 103, exact_and_family, 2, "sm_103");
	expect_image(f, 100, exact_and_family, 2, "sm_100f");
	/* a family is one major version */
	expect_image(f, 110, only_100f, 1, "compile");
	expect_image(f, 120, only_100f, 1, "compile");
	expect_image(f, 110, only_110f, 1, "sm_110f");
	expect_image(f, 120, only_120f, 1, "sm_120f");
	expect_image(f, 121, only_120f, 1, "sm_120f");
	expect_image(f, 110, only_120f, 1, "compile");
	expect_image(f, 100, only_120f, 1, "compile");
	/* PTX last, for any newer GPU, after every cubin that runs */
	expect_image(f, 103, ptx, 1, "compute_100");
	expect_image(f, 110, ptx, 1, "compute_100");
	expect_image(f, 121, ptx, 1, "compute_100");
	expect_image(f, 90, ptx, 1, "compile");
	expect_image(f, 103, ptx_and_family, 2, "sm_100f");
	/* an arch-specific image runs on its own SM only, never a family's */
	expect_image(f, 103, arch_specific, 1, "compile");
	expect_image(f, 100, arch_specific, 1, "sm_100a");
}

/* The targets tried, in order, for each GPU of the issue. */
static void test_run_targets(void **state)
{
	static const struct {
		int cc;
		const char *want;
	} cases[] = {
		{ 100, "sm_100 sm_100a sm_100f compute_100 compute_90 compute_89" },
		{ 103, "sm_103 sm_103a sm_103f sm_100f compute_103 compute_100 compute_90" },
		{ 110, "sm_110 sm_110a sm_110f compute_110 compute_103 compute_100" },
		{ 120, "sm_120 sm_120a sm_120f compute_120 compute_110" },
		{ 121, "sm_121 sm_121a sm_121f sm_120f compute_121 compute_120" },
		{ 90, "sm_90 sm_90a compute_90 compute_89" },
	};
	jitk_compiler *c = t_compiler(SPECS, NULL, NULL, NULL);
	jitk_arch t[JITK_MAX_RUN_TARGETS];
	jitk_run_kind kinds[JITK_MAX_RUN_TARGETS];
	size_t i, j, n;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char got[512] = "", name[JITK_ARCH_STRLEN];

		n = jitk__run_targets(t, kinds, JITK_MAX_RUN_TARGETS, c, cases[i].cc);
		for (j = 0; j < n; j++) {
			jitk__arch_format(name, t[j]);
			snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s", j ? " " : "", name);
		}
		/* the list goes on down to the oldest PTX: compare its start */
		if (strncmp(got, cases[i].want, strlen(cases[i].want)))
			fprintf(stderr, "sm_%d: %s\n", cases[i].cc, got);
		assert_true(!strncmp(got, cases[i].want, strlen(cases[i].want)));
		assert_int_equal(kinds[0], JITK_RUN_EXACT);
		assert_int_equal(kinds[n - 1], JITK_RUN_PTX);
	}
	/* a bounded table is never overrun */
	assert_int_equal(jitk__run_targets(t, kinds, 2, c, 121), 2);
	jitk_compiler_free(c);
}

/* ------------------------------------------------------ explain --cache */

/* With a cache holding only an sm_100f entry, explain on sm_103 names
 * that entry (by path in the writable cache, by key in a layer) and says
 * why; each target tried is listed with its key; with nothing cached it
 * says the kernel would be compiled, and for which key. */
static void test_explain_with_a_cache(void **state)
{
	fixture *f = *state;
	char *cache = fixture_path(f, "cache"), *text, *root, want[1024], k100f[2 * JITK_HASH_SIZE + 1],
	     k103[2 * JITK_HASH_SIZE + 1];
	jitk_compiler *c;

	precompile(cache, I64, "sm_100f");
	c = t_compiler(SPECS, cache, NULL, NULL);
	key_hex(k100f, c, I64, "sm_100f");
	key_hex(k103, c, I64, "sm_103");
	assert_int_equal(jitk_explain_cache(&text, c, I64, "sm_103"), 0);
	root = t_path(cache, "v1");
	snprintf(want, sizeof(want),
		 "  image:    sm_100f, cached at %s/%.2s/%s.jitk: sm_100f is a family target: its "
		 "code runs on sm_100 and every later sm_10x GPU, sm_103 among them, and nothing "
		 "more exact is cached\n", root, k100f, k100f);
	if (!strstr(text, want))
		fprintf(stderr, "%s", text);
	assert_non_null(strstr(text, want));
	assert_true(!strncmp(text, I64 " on sm_103: runs\n", strlen(I64 " on sm_103: runs\n")));
	snprintf(want, sizeof(want), "  lookup:\n    sm_103               exact  %s not cached\n"
		 "    sm_103a              exact  ", k103);
	assert_non_null(strstr(text, want));
	snprintf(want, sizeof(want), " not cached\n    sm_103f              family ");
	assert_non_null(strstr(text, want));
	snprintf(want, sizeof(want), "    sm_100f              family %s cached: this image runs\n",
		 k100f);
	assert_non_null(strstr(text, want));
	/* the lookup stops at the image that runs */
	assert_null(strstr(text, "compute_"));
	jitk_free(text);
	/* the same entry in the second of two read-only layers */
	jitk_compiler_free(c);
	{
		char *layers = jitk__asprintf("%s/nothing:%s", f->dir, cache);

		c = t_compiler(SPECS, NULL, layers, NULL);
		free(layers);
	}
	assert_int_equal(jitk_explain_cache(&text, c, I64, "sm_103"), 0);
	snprintf(want, sizeof(want), "  image:    sm_100f, cached in a read-only layer at %s/%.2s/%s.jitk: ",
		 root, k100f, k100f);
	assert_non_null(strstr(text, want));
	jitk_free(text);
	/* on sm_90 nothing here runs */
	assert_int_equal(jitk_explain_cache(&text, c, I64, "sm_90"), 0);
	key_hex(k103, c, I64, "sm_90");
	snprintf(want, sizeof(want), "  image:    none cached: a runtime would compile it for sm_90 "
		 "(key %s)\n", k103);
	assert_non_null(strstr(text, want));
	assert_non_null(strstr(text, "    compute_89           PTX    "));
	jitk_free(text);
	/* a falling-back instance: each step's image */
	assert_int_equal(jitk_explain_cache(&text, c, "tadd3[cols=64]", "sm_80"), 0);
	assert_non_null(strstr(text, "  fallback: " I64 " (step 1 of 2): runs\n"));
	assert_non_null(strstr(text, "    image:    none cached: a runtime would compile it for sm_80"));
	jitk_free(text);
	/* images are chosen for a GPU */
	assert_int_equal(jitk_explain_cache(&text, c, I64, "sm_100f"), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message,
			    "sm_100f is not a GPU: the image that runs is chosen for a GPU's own "
			    "architecture (sm_NN)");
	assert_int_equal(jitk_explain_cache(&text, c, I64, "compute_90"), JITK_EINVAL);
	/* plain explain says nothing of images */
	assert_int_equal(jitk_explain(&text, c, I64, "sm_103"), 0);
	assert_null(strstr(text, "image:"));
	jitk_free(text);
	jitk_compiler_free(c);
	free(root);
	free(cache);
}

/* ---------------------------------------------------------------- NVTX */

/* A resolve opens the ranges a profiler shows, named after the instance
 * and target, nested, in the domain "jitk": resolve > cache lookup (each
 * target tried) > compile, and load; every push is popped. A resolved
 * kernel opens none. */
static void test_profiler_ranges(void **state)
{
#ifdef JITK_NO_NVTX
	(void)state;
	skip(); /* built without NVTX3 headers: no ranges */
#else
	fixture *f = *state;
	char *cache = fixture_path(f, "cache");
	fake_device fake;
	jitk_runtime *rt;
	jitk_kernel *k;
	int i, lookups = 0, compile = -1, load = -1;

	rt = runtime_over(f, &fake, 90, cache, NULL, JITK_SEAL_OFF, NULL);
	events_reset();
	assert_int_equal(jitk_kernel_get(&k, rt, I64), 0);
	assert_string_equal(domain_name, "jitk");
	assert_true(nevents >= 4);
	assert_string_equal(events[0], "resolve " I64 " on sm_90");
	assert_string_equal(events[1], "  cache lookup " I64 " for sm_90");
	for (i = 1; i < nevents; i++) {
		static const char lookup[] = "  cache lookup " I64 " for ";

		if (!strncmp(events[i], lookup, sizeof(lookup) - 1))
			lookups++;
		if (!strcmp(events[i], "  compile " I64 " for sm_90"))
			compile = i;
		if (!strcmp(events[i], "  load " I64 " (sm_90)"))
			load = i;
	}
	assert_true(lookups >= 2); /* sm_90, then PTX */
	assert_true(compile > 1);
	assert_int_equal(load, nevents - 1);
	assert_int_equal(depth, 0);
	assert_int_equal(max_depth, 2);
	events_reset();
	assert_int_equal(jitk_kernel_get(&k, rt, I64), 0);
	assert_int_equal(nevents, 0);
	jitk_runtime_free(rt);

	/* a fresh runtime over the cache: resolve > one lookup, then load */
	rt = runtime_over(f, &fake, 90, cache, NULL, JITK_SEAL_OFF, NULL);
	events_reset();
	assert_int_equal(jitk_kernel_get(&k, rt, I64), 0);
	assert_int_equal(nevents, 3);
	assert_string_equal(events[1], "  cache lookup " I64 " for sm_90");
	assert_string_equal(events[2], "  load " I64 " (sm_90)");
	assert_int_equal(depth, 0);
	jitk_runtime_free(rt);
	free(cache);
#endif
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_seal_error_refuses_a_miss, setup, teardown),
		cmocka_unit_test_setup_teardown(test_seal_warn_logs_and_compiles, setup, teardown),
		cmocka_unit_test_setup_teardown(test_seal_from_the_environment, setup, teardown),
		cmocka_unit_test_setup_teardown(test_seal_with_version_3_options, setup, teardown),
		cmocka_unit_test_setup_teardown(test_seal_covers_the_runtime_s_compiler, setup, teardown),
		cmocka_unit_test_setup_teardown(test_seal_message_under_force_compile, setup, teardown),
		cmocka_unit_test_setup_teardown(test_seal_keeps_a_rejected_entry, setup, teardown),
		cmocka_unit_test_setup_teardown(test_seal_covers_the_recompile_after_a_driver_rejection,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_manifest_records_and_precompiles, setup, teardown),
		cmocka_unit_test_setup_teardown(test_manifest_from_the_environment, setup, teardown),
		cmocka_unit_test_setup_teardown(test_manifest_reading, setup, teardown),
		cmocka_unit_test_setup_teardown(test_outputs_are_regular_files, setup, teardown),
		cmocka_unit_test_setup_teardown(test_run_targets, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lookup_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_explain_with_a_cache, setup, teardown),
		cmocka_unit_test_setup_teardown(test_profiler_ranges, setup, teardown),
	};

	/* JITK_TEST_FILTER=test_seal* runs the matching tests only */
	if (getenv("JITK_TEST_FILTER"))
		cmocka_set_test_filter(getenv("JITK_TEST_FILTER"));
	return T_RUN_TESTS(tests, NULL, NULL);
}
