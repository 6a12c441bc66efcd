/* test_runtime.c - the runtime over a fake device: specialization and
 * fallback per architecture, capture state, driver rejections, argument
 * checks, input-scale configuration, stats and racing threads. Real NVRTC
 * compiles run; nothing needs a GPU. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "fake_device.h"
#include "gpu/runtime.h"
#include "jitk/norm_scale_shift.h"
#include "jitk/static_quant_fp8.h"

/* Norm family argument order in specs/norm_scale_shift.yaml. */
enum { P_Y, P_Q, P_ROUT, P_X, P_RES, P_GATE, P_SCALE, P_SHIFT, P_ISCALE, P_ROWS, P_EPS };

/* Fake device addresses 64 GiB apart: no two tensors overlap. */
#define ADDR(i) ((jitk_devptr)(i) << 36)

typedef struct {
	char *dir, *cache, *specs, *specs_ref;
} fixture;

static int setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));

	t_scratch(&f->dir, &f->cache, &f->specs);
	/* The reference's gate: fused fp8 symbols only from sm_100 (the repo's
	 * specs enable them from sm_90). */
	t_copy_tree(f->dir, "      - arch: { min: sm_90 }", "      - arch: { min: sm_100 }");
	f->specs_ref = t_path(f->dir, "specs");
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fixture *f = *state;

	unsetenv("JITK_PROGRAMMATIC"); /* test_programmatic_launch's, should it fail midway */
	t_scratch_free(f->dir, f->cache, f->specs);
	free(f->specs_ref);
	free(f);
	return 0;
}

static jitk_norm_scale_shift_args norm_args(int rows, int hidden)
{
	jitk_norm_scale_shift_args a;

	memset(&a, 0, sizeof(a));
	a.y = ADDR(1);
	a.q = ADDR(2);
	a.residual_out = ADDR(3);
	a.x = ADDR(4);
	a.residual = ADDR(5);
	a.gate = ADDR(6);
	a.scale = ADDR(7);
	a.shift = ADDR(8);
	a.input_scale = ADDR(9);
	a.rows = rows;
	a.hidden = hidden;
	a.eps = 1e-6f;
	return a;
}

/* A runtime over a fake device of compute capability CC with 132 SMs;
 * O NULL for the default options. */
static jitk_runtime *runtime_with(fixture *f, fake_device *fake, int cc, const char *specs,
				  jitk_runtime_options *o)
{
	jitk_runtime_options def = JITK_RUNTIME_OPTIONS_INIT;
	jitk_runtime *rt = NULL;

	memset(fake, 0, sizeof(*fake));
	fake->cc = cc;
	fake->sm_count = 132;
	fake->scale_value = 0.5f;
	if (t_fake_runtime_with(&rt, fake, specs, f->cache, o ? o : &def))
		fprintf(stderr, "%s\n", jitk_error_last()->message);
	assert_non_null(rt);
	return rt;
}

static jitk_runtime *runtime(fixture *f, fake_device *fake, int cc, const char *specs)
{
	return runtime_with(f, fake, cc, specs, NULL);
}

/* Expectations come from the spec, not from numbers copied out of it, so
 * that retuning the YAML does not break these tests: a spec expression of
 * instance NAME on rt's device, evaluated by the spec's own evaluator
 * with the variant's bindings, sm_count and one integer argument. */
typedef struct {
	const jitk_variant *v;
	const char *arg;
	int64_t value, sm_count;
} geo_ctx;

static int geo_lookup(void *ctx, const char *name, int64_t *out)
{
	geo_ctx *g = ctx;

	if (!jitk__variant_lookup((void *)g->v, name, out))
		return 0;
	if (!strcmp(name, "sm_count")) {
		*out = g->sm_count;
		return 0;
	}
	if (g->arg && !strcmp(name, g->arg)) {
		*out = g->value;
		return 0;
	}
	return -1;
}

static int64_t spec_value(jitk_runtime *rt, const char *name, const spec_expr *(*which)(const spec_family *),
			  const char *arg, int64_t value)
{
	jitk_variant v;
	size_t inst;
	geo_ctx g;
	char err[128];
	int64_t out = -1;

	assert_int_equal(jitk__spec_find(rt->comp->specs, name, &inst), 0);
	assert_int_equal(jitk__specialize(&v, rt->comp->specs, inst, rt->arch), 0);
	g.v = &v;
	g.arg = arg;
	g.value = value;
	g.sm_count = rt->info.sm_count;
	assert_int_equal(jitk__expr_eval(which(rt->comp->specs->insts[inst].sym->fam)->e,
					 geo_lookup, &g, &out, err, sizeof(err)), 0);
	return out;
}

static const spec_expr *grid_of(const spec_family *f) { return &f->grid; }
static const spec_expr *block_of(const spec_family *f) { return &f->block; }

#define GRID(rt, name, arg, v) spec_value(rt, name, grid_of, arg, v)
#define BLOCK(rt, name) spec_value(rt, name, block_of, NULL, 0)

/* On sm_90 with the reference's gate the fused fp8 symbols fall back:
 * try_ says why, auto runs the spec's fallback (norm, then quantizer). */
static void test_sm90_falls_back(void **state)
{
	fixture *f = *state;
	fake_device fake;
	jitk_runtime *rt = runtime(f, &fake, 90, f->specs_ref);
	jitk_norm_scale_shift_args a = norm_args(1024, 3072);
	jitk_kernel *k;
	const char *why = NULL;
	int fused = -1;

	assert_string_equal(jitk_runtime_arch(rt), "sm_90");
	assert_int_equal(jitk_kernel_get(&k, rt, "fused_norm_scale_shift_fp8[hidden=3072]"), JITK_EARCH);
	assert_non_null(strstr(jitk_error_last()->message, "needs sm_100 or newer"));
	assert_int_equal(jitk_norm_scale_shift_configure_input_scale(rt, a.input_scale), 0);
	assert_int_equal(jitk_try_fused_norm_scale_shift_fp8(&why, rt, &a, NULL), JITK_FALLBACK);
	assert_non_null(why);
	assert_non_null(strstr(why, "needs sm_100 or newer"));
	assert_int_equal(fake.nlaunches, 0);
	assert_int_equal(jitk_fused_norm_scale_shift_fp8(rt, &a, NULL), JITK_EARCH);
	assert_int_equal(fake.nlaunches, 0);

	assert_int_equal(jitk_auto_fused_norm_scale_shift_fp8(&fused, rt, &a, NULL), 0);
	assert_int_equal(fused, 0);
	assert_int_equal(fake.nlaunches, 2);
	/* the norm, with the spec's geometry for 1024 rows */
	assert_int_equal(fake.launches[0].grid[0],
			 GRID(rt, "fused_norm_scale_shift[hidden=3072]", "rows", 1024));
	assert_int_equal(fake.launches[0].block[0], BLOCK(rt, "fused_norm_scale_shift[hidden=3072]"));
	assert_int_equal(fake.launches[0].nparams, 27); /* the reference's 11, then issue 12's axes */
	assert_int_equal(fake.launches[0].values[P_Y], a.y);
	assert_int_equal(fake.launches[0].values[P_X], a.x);
	assert_int_equal(fake.launches[0].values[P_ROWS], 1024);
	/* the quantizer over the norm's y (the spec's argument map: q, x = y
	 * flattened, input_scale, n = rows * H from the flat shape) */
	assert_int_equal(fake.launches[1].nparams, 4);
	assert_int_equal(fake.launches[1].values[0], a.q);
	assert_int_equal(fake.launches[1].values[1], a.y);
	assert_int_equal(fake.launches[1].values[2], a.input_scale);
	assert_int_equal(fake.launches[1].values[3], 1024 * 3072);
	assert_int_equal(fake.launches[1].block[0], BLOCK(rt, "static_quant_fp8"));
	assert_int_equal(fake.launches[1].grid[0], GRID(rt, "static_quant_fp8", "n", 1024 * 3072));
	jitk_runtime_free(rt);
	assert_int_equal(fake.closed, 1);
	assert_int_equal(fake.unloads, fake.loads);
}

/* The same device with a spec set that allows sm_90 (the repo's): fused,
 * no code change. */
static void test_sm90_spec_allows_fused(void **state)
{
	fixture *f = *state;
	fake_device fake;
	jitk_runtime *rt = runtime(f, &fake, 90, f->specs);
	jitk_norm_scale_shift_args a = norm_args(4096, 3072);
	int fused = -1;

	assert_int_equal(jitk_norm_scale_shift_configure_input_scale(rt, a.input_scale), 0);
	assert_int_equal(jitk_auto_fused_scale_residual_norm_scale_shift_fp8(&fused, rt, &a, NULL), 0);
	assert_int_equal(fused, 1);
	assert_int_equal(fake.nlaunches, 1);
	assert_int_equal(fake.launches[0].values[P_Q], a.q);
	assert_int_equal(fake.launches[0].values[P_RES], a.residual);
	assert_int_equal(fake.launches[0].values[P_GATE], a.gate);
	assert_int_equal(fake.launches[0].values[P_ISCALE], a.input_scale);
	{
		float eps;
		memcpy(&eps, &fake.launches[0].values[P_EPS], 4);
		assert_true(eps == 1e-6f);
	}
	jitk_runtime_free(rt);
}

/* sm_100 runs fused with the spec's vector width there: a pointer
 * aligned to less is a fallback with the reason, not a launch. */
static void test_sm100_and_sm120(void **state)
{
	fixture *f = *state;
	fake_device fake;
	jitk_runtime *rt = runtime(f, &fake, 100, f->specs);
	jitk_norm_scale_shift_args a = norm_args(127, 5120);
	const char *why = NULL;
	char want[128];
	jitk_kernel *k;
	int fused = -1;

	assert_int_equal(jitk_norm_scale_shift_configure_input_scale(rt, a.input_scale), 0);
	assert_int_equal(jitk_auto_fused_norm_scale_shift_fp8(&fused, rt, &a, NULL), 0);
	assert_int_equal(fused, 1);
	assert_int_equal(fake.nlaunches, 1);
	assert_int_equal(fake.launches[0].block[0], BLOCK(rt, "fused_norm_scale_shift_fp8[hidden=5120]"));
	assert_int_equal(fake.launches[0].grid[0],
			 GRID(rt, "fused_norm_scale_shift_fp8[hidden=5120]", "rows", 127));
	assert_int_equal(jitk_kernel_get(&k, rt, "fused_norm_scale_shift_fp8[hidden=5120]"), 0);
	a.x += k->tensors[P_X].align / 2;
	assert_int_equal(jitk_try_fused_norm_scale_shift_fp8(&why, rt, &a, NULL), JITK_FALLBACK);
	snprintf(want, sizeof(want), "x (0x%llx) is not %lld-byte aligned", (unsigned long long)a.x,
		 (long long)k->tensors[P_X].align);
	assert_string_equal(why, want);
	assert_int_equal(fake.nlaunches, 1);
	jitk_runtime_free(rt);

	rt = runtime(f, &fake, 120, f->specs);
	a = norm_args(1, 1536);
	assert_int_equal(jitk_norm_scale_shift_configure_input_scale(rt, a.input_scale), 0);
	assert_int_equal(jitk_try_fused_norm_scale_shift_fp8(&why, rt, &a, NULL), 0);
	assert_int_equal(fake.nlaunches, 1);
	assert_string_equal(jitk_runtime_arch(rt), "sm_120");
	jitk_runtime_free(rt);
}

/* sm_80: no e4m3 conversion. The fused path falls back, and the split
 * path cannot run either: a clear EARCH, and nothing launched (every step
 * of a fallback is checked before the first one runs). */
static void test_sm80(void **state)
{
	fixture *f = *state;
	fake_device fake;
	jitk_runtime *rt = runtime(f, &fake, 80, f->specs);
	jitk_norm_scale_shift_args a = norm_args(64, 3072);
	const char *why = NULL;
	int fused = -1;

	assert_int_equal(jitk_norm_scale_shift_configure_input_scale(rt, a.input_scale), 0);
	assert_int_equal(jitk_try_fused_norm_scale_shift_fp8(&why, rt, &a, NULL), JITK_FALLBACK);
	assert_non_null(strstr(why, "needs sm_89 or newer"));
	assert_int_equal(jitk_auto_fused_norm_scale_shift_fp8(&fused, rt, &a, NULL), JITK_EARCH);
	assert_non_null(strstr(jitk_error_last()->message, "static_quant_fp8"));
	assert_int_equal(fake.nlaunches, 0);
	assert_int_equal(jitk_fused_norm_scale_shift(rt, &a, NULL), 0);
	assert_int_equal(fake.nlaunches, 1);
	jitk_runtime_free(rt);
}

static void test_guards(void **state)
{
	fixture *f = *state;
	fake_device fake;
	jitk_runtime *rt = runtime(f, &fake, 100, f->specs);
	jitk_norm_scale_shift_args a = norm_args(8, 3072);
	const char *why = NULL;
	char want[256];
	int i;

	/* Scale not configured, then invalid values refused. */
	assert_int_equal(jitk_try_fused_norm_scale_shift_fp8(&why, rt, &a, NULL), JITK_FALLBACK);
	snprintf(want, sizeof(want), "input_scale (0x%llx) was not validated with jitk_configure "
		 "(or its memory was freed since)", (unsigned long long)a.input_scale);
	assert_string_equal(why, want);
	fake.scale_value = NAN;
	assert_int_equal(jitk_norm_scale_shift_configure_input_scale(rt, a.input_scale), JITK_EINVAL);
	assert_non_null(strstr(jitk_error_last()->message, "finite, positive"));
	fake.scale_value = 0.0f;
	assert_int_equal(jitk_norm_scale_shift_configure_input_scale(rt, a.input_scale), JITK_EINVAL);
	fake.scale_value = -1.0f;
	assert_int_equal(jitk_norm_scale_shift_configure_input_scale(rt, a.input_scale), JITK_EINVAL);
	fake.scale_value = INFINITY;
	assert_int_equal(jitk_norm_scale_shift_configure_input_scale(rt, a.input_scale), JITK_EINVAL);
	assert_int_equal(jitk_norm_scale_shift_configure_input_scale(rt, a.input_scale + 2), JITK_EINVAL);
	fake.host_ptr = a.input_scale;
	assert_int_equal(jitk_norm_scale_shift_configure_input_scale(rt, a.input_scale), JITK_EINVAL);
	assert_non_null(strstr(jitk_error_last()->message, "not device memory"));
	fake.host_ptr = 0;
	fake.scale_value = 0.4754464328289032f;
	assert_int_equal(jitk_norm_scale_shift_configure_input_scale(rt, a.input_scale), 0);
	assert_int_equal(jitk_try_fused_norm_scale_shift_fp8(&why, rt, &a, NULL), 0);
	assert_int_equal(fake.nlaunches, 1);

	/* Stale: the address was freed and is another allocation now (a new
	 * buffer id), so it is not validated any more. */
	fake.buffer_epoch++;
	assert_int_equal(jitk_try_fused_norm_scale_shift_fp8(&why, rt, &a, NULL), JITK_FALLBACK);
	assert_string_equal(why, want);
	assert_int_equal(jitk_fused_norm_scale_shift_fp8(rt, &a, NULL), JITK_EINVAL);
	assert_non_null(strstr(jitk_error_last()->message, "was not validated with jitk_configure"));
	assert_int_equal(jitk_norm_scale_shift_configure_input_scale(rt, a.input_scale), 0);
	assert_int_equal(jitk_try_fused_norm_scale_shift_fp8(&why, rt, &a, NULL), 0);
	/* Explicitly forgotten. */
	assert_int_equal(jitk_unconfigure(rt, a.input_scale), 0);
	assert_int_equal(jitk_try_fused_norm_scale_shift_fp8(&why, rt, &a, NULL), JITK_FALLBACK);
	assert_int_equal(jitk_unconfigure(rt, a.input_scale), JITK_ENOENT);
	/* The table grows: no fixed cap. */
	for (i = 0; i < 3000; i++)
		assert_int_equal(jitk_norm_scale_shift_configure_input_scale(rt, ADDR(10) + 16 * (jitk_devptr)i), 0);
	assert_int_equal(jitk_norm_scale_shift_configure_input_scale(rt, a.input_scale), 0);
	assert_int_equal(fake.nlaunches, 2);

	/* An unsupported hidden size, a NULL pointer. */
	a.hidden = 4096;
	assert_int_equal(jitk_try_fused_norm_scale_shift_fp8(&why, rt, &a, NULL), JITK_FALLBACK);
	assert_string_equal(why, "no instance for hidden=4096 (from y) (instances: "
			    "fused_norm_scale_shift_fp8[hidden=3072], fused_norm_scale_shift_fp8[hidden=1536], "
			    "fused_norm_scale_shift_fp8[hidden=5120])");
	a.hidden = 3072;
	a.q = 0;
	assert_int_equal(jitk_try_fused_norm_scale_shift_fp8(&why, rt, &a, NULL), JITK_FALLBACK);
	assert_string_equal(why, "q is NULL");
	a.q = ADDR(2);
	/* The residual variant checks its extra tensors; the plain one not. */
	a.gate = 0;
	assert_int_equal(jitk_try_fused_scale_residual_norm_scale_shift_fp8(&why, rt, &a, NULL),
			 JITK_FALLBACK);
	assert_string_equal(why, "gate is NULL");
	assert_int_equal(jitk_try_fused_norm_scale_shift_fp8(&why, rt, &a, NULL), 0);
	assert_int_equal(fake.nlaunches, 3);
	/* Bad arguments are errors, not fallbacks. */
	a.rows = -1;
	assert_int_equal(jitk_try_fused_norm_scale_shift_fp8(&why, rt, &a, NULL), JITK_EINVAL);
	a.rows = 0; /* nothing to do: OK, nothing launched */
	assert_int_equal(jitk_try_fused_norm_scale_shift_fp8(&why, rt, &a, NULL), 0);
	assert_int_equal(jitk_fused_norm_scale_shift(rt, &a, NULL), 0);
	assert_int_equal(jitk_static_quant_fp8(rt, &(jitk_static_quant_fp8_args){ .q = a.q, .x = a.x, .input_scale = a.input_scale, .n = 0 }, NULL), 0);
	assert_int_equal(fake.nlaunches, 3);
	/* Rows past 32-bit element offsets: the spec's (capped) grid. */
	a.rows = 1000000;
	assert_int_equal(jitk_fused_norm_scale_shift_fp8(rt, &a, NULL), 0);
	assert_int_equal(fake.launches[3].grid[0],
			 GRID(rt, "fused_norm_scale_shift_fp8[hidden=3072]", "rows", 1000000));
	assert_int_equal(fake.launches[3].values[P_ROWS], 1000000);
	jitk_runtime_free(rt);
}

/* What jitk.h says a configured address's validation is tied to (issue
 * 22 #16): the address and its driver allocation, not the bytes. A value
 * written there after configure, or a sub-allocator's new tensor at the
 * same address in the same driver allocation (PyTorch's caching
 * allocator: the buffer id stays), is not seen, so jitk_unconfigure is
 * the caller's release, and the Python binding holds and watches its
 * tensors; a new driver allocation at the address is refused. */
static void test_a_configured_address_is_its_allocation_not_its_bytes(void **state)
{
	fixture *f = *state;
	fake_device fake;
	jitk_runtime *rt = runtime(f, &fake, 100, f->specs);
	jitk_norm_scale_shift_args a = norm_args(8, 3072);
	const char *why = NULL;

	fake.scale_value = 0.5f;
	assert_int_equal(jitk_norm_scale_shift_configure_input_scale(rt, a.input_scale), 0);
	fake.scale_value = -3.0f; /* written, or another tensor there: not read again */
	assert_int_equal(jitk_try_fused_norm_scale_shift_fp8(&why, rt, &a, NULL), 0);
	assert_int_equal(fake.nlaunches, 1);
	/* the release before the memory goes back to a pool or is written */
	assert_int_equal(jitk_unconfigure(rt, a.input_scale), 0);
	assert_int_equal(jitk_try_fused_norm_scale_shift_fp8(&why, rt, &a, NULL), JITK_FALLBACK);
	assert_non_null(strstr(why, "was not validated with jitk_configure"));
	assert_int_equal(jitk_norm_scale_shift_configure_input_scale(rt, a.input_scale), JITK_EINVAL);
	assert_non_null(strstr(jitk_error_last()->message, "holds -3"));
	/* a new driver allocation at the address: refused without a release */
	fake.scale_value = 0.5f;
	assert_int_equal(jitk_norm_scale_shift_configure_input_scale(rt, a.input_scale), 0);
	fake.buffer_epoch++;
	assert_int_equal(jitk_try_fused_norm_scale_shift_fp8(&why, rt, &a, NULL), JITK_FALLBACK);
	assert_int_equal(fake.nlaunches, 1);
	jitk_runtime_free(rt);
}

static void tensor2(jitk_tensor *t, jitk_devptr p, jitk_dtype dt, int64_t r, int64_t c)
{
	const int64_t shape[2] = { r, c };

	assert_int_equal(jitk_tensor_contiguous(t, p, dt, 2, shape), 0);
}

static jitk_arg targ(const char *name, const jitk_tensor *t)
{
	jitk_arg a;

	a.name = name;
	a.type = JITK_ARG_TENSOR;
	a.v.tensor = t;
	return a;
}

/* The generic call checks names, kinds, dtypes, shapes, strides,
 * alignment and aliasing before launching anything, naming the argument
 * and the expected and actual shapes; it picks the instance from the
 * shapes and takes rows from them. */
static void test_generic_call_checks(void **state)
{
	fixture *f = *state;
	fake_device fake;
	jitk_runtime *rt = runtime(f, &fake, 90, f->specs);
	const jitk_dtype bf16 = JITK_DTYPE_BF16, fp8 = JITK_DTYPE_FP8_E4M3, f32 = JITK_DTYPE_F32;
	const int64_t n = 4096, one = 1;
	jitk_tensor q, x, s, y, sc, sh, bad;
	jitk_arg args[8];
	jitk_call_info info = JITK_CALL_INFO_INIT;
	jitk_op *op, *op2;

	assert_int_equal(jitk_tensor_contiguous(&q, ADDR(1), fp8, 1, &n), 0);
	assert_int_equal(jitk_tensor_contiguous(&x, ADDR(2), bf16, 1, &n), 0);
	assert_int_equal(jitk_tensor_contiguous(&s, ADDR(3), f32, 1, &one), 0);
	args[0] = targ("q", &q);
	args[1] = targ("x", &x);
	args[2] = targ("input_scale", &s);
	args[3].name = "n";
	args[3].type = JITK_ARG_I64;
	args[3].v.i64 = 5;

	/* Misuse. */
	args[4] = targ("z", &x);
	assert_int_equal(jitk_call(NULL, rt, "static_quant_fp8", JITK_CALL_STRICT, args, 5, NULL), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message, "static_quant_fp8 takes no argument 'z' (nothing launched)");
	args[4] = targ("x", &x);
	assert_int_equal(jitk_call(NULL, rt, "static_quant_fp8", JITK_CALL_TRY, args, 5, NULL), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message, "static_quant_fp8: argument x given twice (nothing launched)");
	args[4] = targ("n", &x);
	args[3] = args[4];
	assert_int_equal(jitk_call(NULL, rt, "static_quant_fp8", JITK_CALL_STRICT, args, 4, NULL), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message, "static_quant_fp8: argument n must be an i64 (nothing launched)");
	assert_int_equal(jitk_call(NULL, rt, "static_quant_fp8", JITK_CALL_STRICT, args, 2, NULL), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message, "static_quant_fp8: missing argument input_scale (nothing launched)");
	/* n comes from the shapes; given, it must agree. */
	args[3].name = "n";
	args[3].type = JITK_ARG_I64;
	args[3].v.i64 = 5;
	assert_int_equal(jitk_call(NULL, rt, "static_quant_fp8", JITK_CALL_STRICT, args, 4, NULL), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message,
			    "static_quant_fp8: argument n is 5, but the tensors' shapes say 4096 (nothing launched)");
	/* dtype, shape, rank */
	assert_int_equal(jitk_tensor_contiguous(&bad, ADDR(2), f32, 1, &n), 0);
	args[1] = targ("x", &bad);
	assert_int_equal(jitk_call(NULL, rt, "static_quant_fp8", JITK_CALL_STRICT, args, 3, NULL), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message,
			    "static_quant_fp8: x must be bf16, not a tensor of dtype code 2 bits 32 (nothing launched)");
	{
		const int64_t m = 4095;

		assert_int_equal(jitk_tensor_contiguous(&bad, ADDR(2), bf16, 1, &m), 0);
	}
	assert_int_equal(jitk_call(NULL, rt, "static_quant_fp8", JITK_CALL_STRICT, args, 3, NULL), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message,
			    "static_quant_fp8: x: expected shape [4096], got [4095] (nothing launched)");
	tensor2(&bad, ADDR(2), bf16, 64, 64);
	assert_int_equal(jitk_call(NULL, rt, "static_quant_fp8", JITK_CALL_STRICT, args, 3, NULL), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message,
			    "static_quant_fp8: x: expected shape [4096], got [64, 64] (nothing launched)");
	/* strides: contiguous means contiguous */
	assert_int_equal(jitk_tensor_contiguous(&bad, ADDR(2), bf16, 1, &n), 0);
	bad.strides[0] = 2;
	assert_int_equal(jitk_call(NULL, rt, "static_quant_fp8", JITK_CALL_STRICT, args, 3, NULL), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message,
			    "static_quant_fp8: x: expected strides [1], got [2] (it must be contiguous) (nothing launched)");
	/* alignment, NULL, aliasing */
	bad.strides[0] = 1;
	bad.data = ADDR(2) + 8;
	assert_int_equal(jitk_call(NULL, rt, "static_quant_fp8", JITK_CALL_STRICT, args, 3, NULL), JITK_EINVAL);
	assert_non_null(strstr(jitk_error_last()->message, "is not 16-byte aligned"));
	bad.data = 0;
	assert_int_equal(jitk_call(NULL, rt, "static_quant_fp8", JITK_CALL_STRICT, args, 3, NULL), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message, "static_quant_fp8: x is NULL (nothing launched)");
	bad.data = ADDR(1) + 4096; /* q ends at ADDR(1) + 4096: no overlap */
	assert_int_equal(jitk_call(NULL, rt, "static_quant_fp8", JITK_CALL_STRICT, args, 3, NULL), 0);
	bad.data = ADDR(1) + 4080;
	assert_int_equal(jitk_call(NULL, rt, "static_quant_fp8", JITK_CALL_STRICT, args, 3, NULL), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message, "static_quant_fp8: q overlaps x in memory (nothing launched)");
	assert_int_equal(fake.nlaunches, 1);
	assert_int_equal(fake.launches[0].values[3], 4096);

	/* The norm: the instance from x's last dimension, rows from its
	 * first, eps from the spec's default. */
	tensor2(&x, ADDR(4), bf16, 10, 1536);
	tensor2(&y, ADDR(5), bf16, 10, 1536);
	{
		const int64_t h = 1536;

		assert_int_equal(jitk_tensor_contiguous(&sc, ADDR(6), bf16, 1, &h), 0);
		assert_int_equal(jitk_tensor_contiguous(&sh, ADDR(7), bf16, 1, &h), 0);
	}
	args[0] = targ("y", &y);
	args[1] = targ("x", &x);
	args[2] = targ("scale", &sc);
	args[3] = targ("shift", &sh);
	assert_int_equal(jitk_op_get(&op, rt, "fused_norm_scale_shift"), 0);
	assert_int_equal(jitk_op_call(&info, op, JITK_CALL_STRICT, args, 4, NULL), 0);
	assert_string_equal(info.instance, "fused_norm_scale_shift[hidden=1536]");
	assert_int_equal(fake.nlaunches, 2);
	assert_int_equal(fake.launches[1].values[P_ROWS], 10); /* absent q, residual_out: 0 */
	{
		float eps;

		memcpy(&eps, &fake.launches[1].values[P_EPS], 4);
		assert_true(eps == 1e-6f);
	}
	/* A [hidden] vector of another size, a wrong row count. */
	{
		const int64_t h = 3072;

		assert_int_equal(jitk_tensor_contiguous(&sc, ADDR(6), bf16, 1, &h), 0);
	}
	assert_int_equal(jitk_op_call(&info, op, JITK_CALL_STRICT, args, 4, NULL), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message,
			    "fused_norm_scale_shift[hidden=1536]: scale: expected shape [1536], got [3072] (nothing launched)");
	{
		const int64_t h = 1536;

		assert_int_equal(jitk_tensor_contiguous(&sc, ADDR(6), bf16, 1, &h), 0);
	}
	tensor2(&y, ADDR(5), bf16, 11, 1536);
	assert_int_equal(jitk_op_call(&info, op, JITK_CALL_STRICT, args, 4, NULL), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message,
			    "fused_norm_scale_shift[hidden=1536]: x: expected shape [11, 1536], got [10, 1536] (nothing launched)");
	/* A selector pins the instance; the shapes must fit it. */
	tensor2(&y, ADDR(5), bf16, 10, 1536);
	assert_int_equal(jitk_op_get(&op2, rt, "fused_norm_scale_shift[hidden=5120]"), 0);
	assert_int_equal(jitk_op_call(&info, op2, JITK_CALL_STRICT, args, 4, NULL), JITK_EINVAL);
	assert_non_null(strstr(jitk_error_last()->message, "y: expected shape [10, 5120], got [10, 1536]"));
	assert_int_equal(jitk_op_get(&op2, rt, "fused_norm_scale_shift[hidden=1536]"), 0);
	assert_int_equal(jitk_op_call(&info, op2, JITK_CALL_STRICT, args, 4, NULL), 0);
	assert_int_equal(jitk_op_get(&op2, rt, "fused_norm_scale_shift[hidden=7]"), JITK_ENOENT);
	assert_int_equal(jitk_call(NULL, rt, "no_such_kernel", JITK_CALL_STRICT, args, 4, NULL), JITK_ENOENT);
	assert_string_equal(jitk_error_last()->message, "no symbol named 'no_such_kernel' (see jitk list)");
	/* a near miss names the nearest symbol */
	assert_int_equal(jitk_call(NULL, rt, "static_quant_fp9", JITK_CALL_STRICT, args, 4, NULL), JITK_ENOENT);
	assert_string_equal(jitk_error_last()->message,
			    "no symbol named 'static_quant_fp9' (did you mean 'static_quant_fp8'? see jitk list)");
	assert_int_equal(jitk_op_get(&op2, rt, "fused_norm_scale_shift[hidden=1563]"), JITK_ENOENT);
	assert_string_equal(jitk_error_last()->message,
			    "'fused_norm_scale_shift[hidden=1563]': column 31: fused_norm_scale_shift has no instance "
			    "with hidden=1563 (see jitk list)");
	assert_int_equal(fake.nlaunches, 3);
	/* An empty problem launches nothing. */
	tensor2(&x, ADDR(4), bf16, 0, 1536);
	tensor2(&y, ADDR(5), bf16, 0, 1536);
	assert_int_equal(jitk_op_call(&info, op, JITK_CALL_STRICT, args, 4, NULL), 0);
	assert_int_equal(fake.nlaunches, 3);
	jitk_runtime_free(rt);
}

/* A [tokens, heads, head_dim] bf16 view at data with the given strides. */
static void heads3(jitk_tensor *t, jitk_devptr data, int64_t tokens, int64_t heads, int64_t dim,
		   int64_t s0, int64_t s1)
{
	const jitk_dtype bf16 = JITK_DTYPE_BF16;
	const int64_t shape[3] = { 1, 1, 1 };

	assert_int_equal(jitk_tensor_contiguous(t, data, bf16, 3, shape), 0);
	t->shape[0] = tokens;
	t->shape[1] = heads;
	t->shape[2] = dim;
	t->strides[0] = s0;
	t->strides[1] = s1;
}

/* Issue 22 #11: the generic call took tensors no memory can hold. A
 * negative dimension was accepted (rc 0, nothing launched), row strides
 * of 2^40 or INT64_MAX were launched, a negative stride was taken as a
 * positive one by the overlap check, and an i32 scalar bound from a
 * dimension of 2^32 + 2 reached the kernel as 2. Each is refused now,
 * naming the argument and the shape and strides it has. */
static void test_impossible_tensors_are_refused(void **state)
{
	fixture *f = *state;
	fake_device fake;
	jitk_runtime *rt = runtime(f, &fake, 90, f->specs);
	const char *want;
	jitk_tensor dst, src;
	jitk_arg args[2];
	jitk_op *op;
	int mode;

	assert_int_equal(jitk_op_get(&op, rt, "copy_heads"), 0);
	args[0] = targ("dst", &dst);
	args[1] = targ("src", &src);
	/* a well-formed call launches */
	heads3(&dst, ADDR(1), 4096, 2, 64, 128, 64);
	heads3(&src, ADDR(2), 4096, 2, 64, 128, 64);
	assert_int_equal(jitk_op_call(NULL, op, JITK_CALL_STRICT, args, 2, NULL), 0);
	assert_int_equal(fake.nlaunches, 1);
	for (mode = JITK_CALL_STRICT; mode <= JITK_CALL_AUTO; mode++) {
		/* a negative dimension (every mode: no fallback holds it) */
		heads3(&src, ADDR(2), 4096, 2, 64, 128, 64);
		heads3(&dst, ADDR(1), 4096, 2, 64, 128, 64);
		dst.shape[0] = -1;
		assert_int_equal(jitk_op_call(NULL, op, mode, args, 2, NULL), JITK_EINVAL);
		assert_string_equal(jitk_error_last()->message, "copy_heads: dst: shape [-1, 2, 64]: "
				    "dimension 0 is negative (nothing launched)");
		/* a rank no tensor has */
		dst.ndim = 7;
		assert_int_equal(jitk_op_call(NULL, op, mode, args, 2, NULL), JITK_EINVAL);
		assert_string_equal(jitk_error_last()->message,
				    "copy_heads: dst has 7 dimensions; jitk takes 0 to 6 (nothing launched)");
		dst.ndim = -1;
		assert_int_equal(jitk_op_call(NULL, op, mode, args, 2, NULL), JITK_EINVAL);
		/* a row stride of 2^40: 4095 rows of 2 TiB, more than any
		 * allocation */
		heads3(&dst, ADDR(1), 4096, 2, 64, (int64_t)1 << 40, 64);
		assert_int_equal(jitk_op_call(NULL, op, mode, args, 2, NULL), JITK_EINVAL);
		assert_string_equal(jitk_error_last()->message,
				    "copy_heads: dst: shape [4096, 2, 64] with strides [1099511627776, 64, 1] "
				    "at 0x1000000000: it spans more than 2^48 bytes (256 TiB), more than any "
				    "allocation (nothing launched)");
		/* INT64_MAX: the extent overflows */
		heads3(&dst, ADDR(1), 4096, 2, 64, INT64_MAX, 64);
		assert_int_equal(jitk_op_call(NULL, op, mode, args, 2, NULL), JITK_EINVAL);
		assert_non_null(strstr(jitk_error_last()->message, "its extent overflows 64 bits"));
		heads3(&dst, ADDR(1), 2, 2, 64, INT64_MIN, 64);
		assert_int_equal(jitk_op_call(NULL, op, mode, args, 2, NULL), JITK_EINVAL);
		assert_non_null(strstr(jitk_error_last()->message, "its extent overflows 64 bits"));
		/* the end of the address space, from either side */
		heads3(&dst, UINT64_MAX - 4096 + 1, 4096, 2, 64, 128, 64);
		assert_int_equal(jitk_op_call(NULL, op, mode, args, 2, NULL), JITK_EINVAL);
		assert_non_null(strstr(jitk_error_last()->message,
				       "it wraps around the end of the address space"));
		heads3(&dst, 1024, 4096, 2, 64, -128, 64);
		assert_int_equal(jitk_op_call(NULL, op, mode, args, 2, NULL), JITK_EINVAL);
		assert_non_null(strstr(jitk_error_last()->message,
				       "it wraps around the end of the address space"));
		/* a negative row stride reaches below the address: dst's
		 * rows run down into src */
		heads3(&dst, ADDR(2) + 4096 * 256, 4096, 2, 64, -128, 64);
		assert_int_equal(jitk_op_call(NULL, op, mode, args, 2, NULL), JITK_EINVAL);
		assert_string_equal(jitk_error_last()->message,
				    "copy_heads[head_dim=64]: dst overlaps src in memory (nothing launched)");
		/* an output broadcast over tokens (row stride 0): 4096
		 * tokens written to one row, racing */
		heads3(&dst, ADDR(1), 4096, 2, 64, 0, 64);
		assert_int_equal(jitk_op_call(NULL, op, mode, args, 2, NULL), JITK_EINVAL);
		assert_string_equal(jitk_error_last()->message,
				    "copy_heads[head_dim=64]: dst is written, but dimension 0 (4096 elements) "
				    "has stride 0: they are one place in memory (nothing launched)");
		/* ...an input may be one (src, every token reading row 0) */
		heads3(&dst, ADDR(1), 4096, 2, 64, 128, 64);
		heads3(&src, ADDR(2), 4096, 2, 64, 0, 64);
		assert_int_equal(jitk_op_call(NULL, op, mode, args, 2, NULL), 0);
		heads3(&src, ADDR(2), 4096, 2, 64, 128, 64);
		/* heads is an i32 the shapes tell: 2^32 + 2 is not 2 */
		heads3(&dst, ADDR(1), 1, ((int64_t)1 << 32) + 2, 64, 0, 64);
		heads3(&src, ADDR(3), 1, ((int64_t)1 << 32) + 2, 64, 0, 64);
		assert_int_equal(jitk_op_call(NULL, op, mode, args, 2, NULL), JITK_EINVAL);
		assert_string_equal(jitk_error_last()->message,
				    "copy_heads[head_dim=64]: argument heads (4294967298, from the tensors' "
				    "shapes) is out of range for i32 (nothing launched)");
	}
	/* the memo takes a repeated call's new address only if it cannot
	 * wrap either */
	heads3(&dst, ADDR(1), 4096, 2, 64, 128, 64);
	heads3(&src, ADDR(2), 4096, 2, 64, 128, 64);
	assert_int_equal(jitk_op_call(NULL, op, JITK_CALL_STRICT, args, 2, NULL), 0);
	dst.data = UINT64_MAX - 4096 + 1;
	assert_int_equal(jitk_op_call(NULL, op, JITK_CALL_STRICT, args, 2, NULL), JITK_EINVAL);
	want = "it wraps around the end of the address space";
	assert_non_null(strstr(jitk_error_last()->message, want));
	assert_int_equal(fake.nlaunches, 5);
	/* jitk_tensor_contiguous: strides past 64 bits are refused (they
	 * overflowed, undefined behaviour) */
	{
		const jitk_dtype bf16 = JITK_DTYPE_BF16;
		const int64_t huge[3] = { (int64_t)1 << 62, 2, 64 };
		jitk_tensor t;

		assert_int_equal(jitk_tensor_contiguous(&t, ADDR(1), bf16, 3, huge), JITK_EINVAL);
		assert_string_equal(jitk_error_last()->message,
				    "jitk_tensor_contiguous: the number of elements overflows 64 bits");
	}
	/* a broadcast dimension (stride 0) costs nothing: 2^62 of them
	 * are one row */
	heads3(&dst, ADDR(1), 4096, 2, 64, 128, 64);
	{
		jitk_tensor wide;

		heads3(&wide, ADDR(5), (int64_t)1 << 62, 2, 64, 0, 64);
		args[1] = targ("src", &wide);
		assert_int_equal(jitk_op_call(NULL, op, JITK_CALL_STRICT, args, 2, NULL), JITK_EINVAL);
		/* refused for its shape, not its extent */
		assert_non_null(strstr(jitk_error_last()->message, "expected shape"));
	}
	jitk_runtime_free(rt);
}

/* Issue 22 #19: a shape's division by zero was reported as "overflows".
 * A copy of tests/families' tadd whose z shape and grid divide by an
 * expression of sx: the message says which dimension (or the grid),
 * its expression, and whether it divides by zero or overflows. */
static void test_shape_division_by_zero_says_so(void **state)
{
	fixture *f = *state;
	char *fam = t_path(f->dir, "fam"), *specs = t_path(fam, "specs"), *tpl = t_path(fam, "templates");
	char *src = t_path(t_root(), "tests/families/specs/tadd.yaml");
	char *srct = t_path(t_root(), "tests/families/templates/tadd.cuh");
	char *yaml = t_path(specs, "tadd.yaml"), *cuh = t_path(tpl, "tadd.cuh"), *text;
	const jitk_dtype i32 = JITK_DTYPE_I32;
	fake_device fake;
	jitk_runtime *rt;
	jitk_tensor acc, z;
	jitk_arg args[3];
	size_t len;

	assert_int_equal(jitk__mkdirs(specs, 0755), 0);
	assert_int_equal(jitk__mkdirs(tpl, 0755), 0);
	text = t_read(src, &len);
	t_write(yaml, text, len);
	free(text);
	text = t_read(srct, &len);
	t_write(cuh, text, len);
	free(text);
	t_edit(yaml, "z:    { type: const i32, shape: [rows, cols]",
	       "z:    { type: const i32, shape: [rows, cols * sx / sx]");
	t_edit(yaml, "grid: cdiv(rows * cols, threads)",
	       "grid: cdiv(rows * cols, threads) + 0 * (cols / (sx + 1))");
	rt = runtime(f, &fake, 90, specs);
	tensor2(&acc, ADDR(1), i32, 100, 64);
	tensor2(&z, ADDR(2), i32, 100, 64);
	args[0] = targ("acc", &acc);
	args[1] = targ("z", &z);
	args[2].name = "sx";
	args[2].type = JITK_ARG_I64;
	args[2].v.i64 = 0;
	assert_int_equal(jitk_call(NULL, rt, "tadd_acc", JITK_CALL_STRICT, args, 3, NULL), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message,
			    "tadd_acc[cols=64]: z: dimension 1 of its shape, 'cols * sx / sx', divides by zero "
			    "for these arguments (nothing launched)");
	args[2].v.i64 = (int64_t)1 << 60;
	assert_int_equal(jitk_call(NULL, rt, "tadd_acc", JITK_CALL_STRICT, args, 3, NULL), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message,
			    "tadd_acc[cols=64]: z: dimension 1 of its shape, 'cols * sx / sx', overflows "
			    "for these arguments (nothing launched)");
	args[2].v.i64 = -1;
	assert_int_equal(jitk_call(NULL, rt, "tadd_acc", JITK_CALL_STRICT, args, 3, NULL), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message,
			    "tadd_acc[cols=64]: the grid 'cdiv(rows * cols, threads) + 0 * (cols / (sx + 1))' "
			    "divides by zero for these arguments (nothing launched)");
	args[2].v.i64 = 1;
	assert_int_equal(jitk_call(NULL, rt, "tadd_acc", JITK_CALL_STRICT, args, 3, NULL), 0);
	assert_int_equal(fake.nlaunches, 1);
	jitk_runtime_free(rt);
	free(fam);
	free(specs);
	free(tpl);
	free(src);
	free(srct);
	free(yaml);
	free(cuh);
}

/* The call memo: a call repeated with the same names, shapes, strides and
 * scalars skips what those decide, launches with this call's addresses,
 * and still checks - and reports as the full path does - what the
 * addresses decide: alignment, NULL, configured tensors, overlap. More
 * keys than the memo holds, and a key in a second runtime, are right. */
static void test_call_memo(void **state)
{
	fixture *f = *state;
	fake_device fake;
	jitk_runtime *rt = runtime(f, &fake, 90, f->specs), *rt2;
	const jitk_dtype bf16 = JITK_DTYPE_BF16, fp8 = JITK_DTYPE_FP8_E4M3, f32 = JITK_DTYPE_F32;
	const int64_t h = 3072, one = 1;
	jitk_tensor y, q, x, sc, sh, s;
	jitk_arg args[6];
	jitk_call_info info = JITK_CALL_INFO_INIT;
	jitk_op *op;
	char want[200];
	int i, round, n = 0;

	fake.scale_value = 0.5f;
	tensor2(&y, ADDR(1), bf16, 8, h);
	tensor2(&q, ADDR(2), fp8, 8, h);
	tensor2(&x, ADDR(3), bf16, 8, h);
	assert_int_equal(jitk_tensor_contiguous(&sc, ADDR(4), bf16, 1, &h), 0);
	assert_int_equal(jitk_tensor_contiguous(&sh, ADDR(5), bf16, 1, &h), 0);
	assert_int_equal(jitk_tensor_contiguous(&s, ADDR(6), f32, 1, &one), 0);
	args[0] = targ("y", &y);
	args[1] = targ("q", &q);
	args[2] = targ("x", &x);
	args[3] = targ("scale", &sc);
	args[4] = targ("shift", &sh);
	args[5] = targ("input_scale", &s);
	assert_int_equal(jitk_configure(rt, "fused_norm_scale_shift_fp8", "input_scale", &s), 0);
	assert_int_equal(jitk_op_get(&op, rt, "fused_norm_scale_shift_fp8"), 0);
	/* new addresses each time: each launch gets its own */
	for (i = 0; i < 3; i++) {
		x.data = ADDR(3) + 4096 * (jitk_devptr)i;
		y.data = ADDR(1) + 8192 * (jitk_devptr)i;
		assert_int_equal(jitk_op_call(&info, op, JITK_CALL_TRY, args, 6, NULL), 0);
		assert_false(info.fallback);
		assert_string_equal(info.instance, "fused_norm_scale_shift_fp8[hidden=3072]");
		assert_int_equal(fake.nlaunches, ++n);
		assert_int_equal(fake.launches[n - 1].values[P_X], x.data);
		assert_int_equal(fake.launches[n - 1].values[P_Y], y.data);
		assert_int_equal(fake.launches[n - 1].values[P_ROWS], 8);
	}
	/* what the addresses decide, after a remembered call */
	x.data = ADDR(3) + 2;
	assert_int_equal(jitk_op_call(&info, op, JITK_CALL_TRY, args, 6, NULL), JITK_FALLBACK);
	snprintf(want, sizeof(want), "x (0x%llx) is not 16-byte aligned", (unsigned long long)x.data);
	assert_string_equal(info.reason, want);
	x.data = 0;
	assert_int_equal(jitk_op_call(&info, op, JITK_CALL_TRY, args, 6, NULL), JITK_FALLBACK);
	assert_string_equal(info.reason, "x is NULL");
	x.data = ADDR(3);
	y.data = ADDR(3) + 4096; /* inside x */
	assert_int_equal(jitk_op_call(&info, op, JITK_CALL_TRY, args, 6, NULL), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message,
			    "fused_norm_scale_shift_fp8[hidden=3072]: y overlaps x in memory (nothing launched)");
	y.data = ADDR(1);
	fake.buffer_epoch++; /* input_scale's memory is another allocation now */
	assert_int_equal(jitk_op_call(&info, op, JITK_CALL_TRY, args, 6, NULL), JITK_FALLBACK);
	assert_non_null(strstr(info.reason, "was not validated with jitk_configure"));
	assert_int_equal(jitk_configure(rt, "fused_norm_scale_shift_fp8", "input_scale", &s), 0);
	assert_int_equal(jitk_op_call(&info, op, JITK_CALL_TRY, args, 6, NULL), 0);
	assert_int_equal(jitk_unconfigure(rt, s.data), 0);
	assert_int_equal(jitk_op_call(&info, op, JITK_CALL_TRY, args, 6, NULL), JITK_FALLBACK);
	assert_int_equal(jitk_configure(rt, "fused_norm_scale_shift_fp8", "input_scale", &s), 0);
	assert_int_equal(fake.nlaunches, n += 1);
	/* a scalar is part of the key */
	{
		jitk_arg eps[7];

		memcpy(eps, args, sizeof(args));
		eps[6].name = "eps";
		eps[6].type = JITK_ARG_F32;
		for (i = 0; i < 2; i++) {
			float e;

			eps[6].v.f32 = i ? 1e-5f : 1e-3f;
			assert_int_equal(jitk_op_call(&info, op, JITK_CALL_STRICT, eps, 7, NULL), 0);
			memcpy(&e, &fake.launches[n++].values[P_EPS], sizeof(e));
			assert_true(e == eps[6].v.f32);
		}
	}
	/* more keys than the memo holds, twice round: each launch right */
	fake.nlaunches = n = 0;
	for (round = 0; round < 2; round++)
		for (i = 1; i <= 40; i++) {
			tensor2(&y, ADDR(1), bf16, i, h);
			tensor2(&q, ADDR(2), fp8, i, h);
			tensor2(&x, ADDR(3), bf16, i, h);
			assert_int_equal(jitk_op_call(&info, op, JITK_CALL_STRICT, args, 6, NULL), 0);
			assert_int_equal(fake.launches[n].values[P_ROWS], i);
			assert_int_equal(fake.launches[n].grid[0],
					 GRID(rt, "fused_norm_scale_shift_fp8[hidden=3072]", "rows", i));
			if (++n == FAKE_MAX_LAUNCHES)
				fake.nlaunches = n = 0;
		}
	/* a shape the memo has seen, then a wrong one: the full path's error */
	tensor2(&x, ADDR(3), bf16, 41, h);
	assert_int_equal(jitk_op_call(&info, op, JITK_CALL_STRICT, args, 6, NULL), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message,
			    "fused_norm_scale_shift_fp8[hidden=3072]: x: expected shape [40, 3072], got [41, 3072] (nothing launched)");
	/* another runtime on the same thread: its own kernels */
	{
		fake_device fake2;

		tensor2(&x, ADDR(3), bf16, 40, h);
		rt2 = runtime(f, &fake2, 90, f->specs);
		assert_int_equal(jitk_configure(rt2, "fused_norm_scale_shift_fp8", "input_scale", &s), 0);
		assert_int_equal(jitk_op_get(&op, rt2, "fused_norm_scale_shift_fp8"), 0);
		assert_int_equal(jitk_op_call(&info, op, JITK_CALL_STRICT, args, 6, NULL), 0);
		assert_int_equal(fake2.nlaunches, 1);
		assert_int_equal(fake2.launches[0].values[P_X], ADDR(3));
		jitk_runtime_free(rt2);
	}
	jitk_runtime_free(rt);
}

/* A family that is only data (tests/families: one YAML file, one
 * template): listed, explained with shapes, called with its shapes
 * checked (a strided view included), and, where its gate fails, run
 * through the spec's fallback with the spec's argument map. */
static void test_data_only_family(void **state)
{
	fixture *f = *state;
	char *specs = t_path(t_root(), "tests/families/specs");
	fake_device fake;
	jitk_runtime *rt;
	const jitk_dtype i32 = JITK_DTYPE_I32;
	jitk_tensor out, x, y, z;
	jitk_arg args[4];
	jitk_call_info info = JITK_CALL_INFO_INIT;
	char *text;
	int cc;

	for (cc = 80; cc <= 90; cc += 10) {
		rt = runtime(f, &fake, cc, specs);
		assert_int_equal(jitk_explain(&text, jitk_runtime_compiler(rt), "tadd3[cols=256]", "sm_80"), 0);
		assert_non_null(strstr(text, "tadd3[cols=256] on sm_80: falls back"));
		assert_non_null(strstr(text, "x              in     i32       [rows, 256] strides [sx, 1] align 4"));
		jitk_free(text);
		tensor2(&out, ADDR(1), i32, 100, 256);
		tensor2(&y, ADDR(3), i32, 100, 256);
		tensor2(&z, ADDR(4), i32, 100, 256);
		/* x: the first 256 columns of a [100, 1024] buffer */
		tensor2(&x, ADDR(2), i32, 100, 256);
		x.strides[0] = 1024;
		args[0] = targ("out", &out);
		args[1] = targ("x", &x);
		args[2] = targ("y", &y);
		args[3] = targ("z", &z);
		assert_int_equal(jitk_call(&info, rt, "tadd3", JITK_CALL_AUTO, args, 4, NULL), 0);
		if (cc >= 90) {
			/* fused: one launch with the stride from x */
			assert_int_equal(info.fallback, 0);
			assert_string_equal(info.instance, "tadd3[cols=256]");
			assert_int_equal(fake.nlaunches, 1);
			assert_int_equal(fake.launches[0].values[0], ADDR(1));
			assert_int_equal(fake.launches[0].values[2], ADDR(2));
			assert_int_equal(fake.launches[0].values[5], 100);
			assert_int_equal(fake.launches[0].values[6], 1024);
		} else {
			/* split: out = x + y, then acc (= out) += z */
			assert_int_equal(info.fallback, 1);
			assert_non_null(strstr(info.reason, "needs sm_90 or newer"));
			/* issue 22 #19: the first step's instance, as jitk.h
			 * says (was NULL) */
			assert_non_null(info.instance);
			assert_string_equal(info.instance, "tadd2[cols=256]");
			assert_int_equal(fake.nlaunches, 2);
			assert_int_equal(fake.launches[0].values[0], ADDR(1));
			assert_int_equal(fake.launches[0].values[2], ADDR(2));
			assert_int_equal(fake.launches[0].values[3], ADDR(3));
			assert_int_equal(fake.launches[0].values[4], 0);
			assert_int_equal(fake.launches[0].values[6], 1024);
			assert_int_equal(fake.launches[1].values[0], 0);
			assert_int_equal(fake.launches[1].values[1], ADDR(1));
			assert_int_equal(fake.launches[1].values[4], ADDR(4));
			assert_int_equal(fake.launches[1].values[5], 100);
		}
		/* its shape rules, from its YAML */
		x.strides[0] = 128;
		assert_int_equal(jitk_call(&info, rt, "tadd3", JITK_CALL_AUTO, args, 4, NULL), JITK_EINVAL);
		assert_non_null(strstr(jitk_error_last()->message, "x's row stride must be at least cols"));
		x.strides[0] = 1024;
		tensor2(&z, ADDR(4), i32, 100, 64);
		assert_int_equal(jitk_call(&info, rt, "tadd3", JITK_CALL_STRICT, args, 4, NULL),
				 cc >= 90 ? JITK_EINVAL : JITK_EARCH);
		if (cc >= 90)
			assert_string_equal(jitk_error_last()->message,
					    "tadd3[cols=256]: z: expected shape [100, 256], got [100, 64] (nothing launched)");
		tensor2(&z, ADDR(1) + 4, i32, 100, 256);
		assert_int_equal(jitk_call(&info, rt, "tadd3", JITK_CALL_AUTO, args, 4, NULL), JITK_EINVAL);
		assert_non_null(strstr(jitk_error_last()->message,
				       cc >= 90 ? "tadd3[cols=256]: out overlaps z in memory"
						: "tadd_acc[cols=256]: acc overlaps z in memory"));
		/* The fallback's steps are all checked before the first runs:
		 * nothing launched, not even the first step. */
		assert_int_equal(fake.nlaunches, cc >= 90 ? 1 : 2);
		jitk_runtime_free(rt);
	}
	free(specs);
}

/* What another thread's call does while the scratch test's allocates. */
typedef struct {
	jitk_runtime *rt;
	const jitk_arg *args;
	jitk_stream stream;
} scratch_race;

static void scratch_race_call(void *p)
{
	scratch_race *r = p;
	jitk_call_info info = JITK_CALL_INFO_INIT;

	assert_int_equal(jitk_call(&info, r->rt, "tsum[parts=4]", JITK_CALL_STRICT, r->args, 2,
				   r->stream), 0);
}

/* The scratch test's call of sym on stream: it launches once, with
 * allocations made so far, and passes the scratch made by allocation
 * alloc (-1: none, NULL). */
static void scratch_call(jitk_runtime *rt, fake_device *fake, const char *sym,
			 const jitk_arg *args, jitk_stream stream, int allocs, int alloc)
{
	jitk_call_info info = JITK_CALL_INFO_INIT;
	int before = fake->nlaunches;

	assert_int_equal(jitk_call(&info, rt, sym, JITK_CALL_STRICT, args, 2, stream), 0);
	assert_int_equal(fake->nlaunches, before + 1);
	assert_int_equal(fake->nallocs, allocs);
	assert_ptr_equal(fake->launches[before].stream, stream);
	assert_int_equal(fake->launches[before].values[2], alloc < 0 ? 0 : fake->alloc_ptr[alloc]);
}

/* out [cols] and x [rows, cols] for the scratch test. */
static void scratch_shape(jitk_tensor *out, jitk_tensor *x, int64_t rows, int64_t cols)
{
	const jitk_dtype i32 = JITK_DTYPE_I32;

	assert_int_equal(jitk_tensor_contiguous(out, ADDR(1), i32, 1, &cols), 0);
	tensor2(x, ADDR(2), i32, rows, cols);
}

/* Scratch (io: scratch): the runtime gives it, zeroed when made, one per
 * stream and family, never smaller than the call's; a larger one replaces it and the
 * old one lives as long as the runtime; the caller may not pass it; an
 * allocation that fails says so and launches nothing. */
static void test_scratch(void **state)
{
	fixture *f = *state;
	char *specs = t_path(t_root(), "tests/families/scratch/specs");
	jitk_stream s1 = (jitk_stream)0x1000, s2 = (jitk_stream)0x2000, s3 = (jitk_stream)0x3000;
	const jitk_dtype i32 = JITK_DTYPE_I32;
	fake_device fake;
	jitk_runtime *rt = runtime(f, &fake, 90, specs);
	jitk_call_info info = JITK_CALL_INFO_INIT;
	jitk_tensor out, x, w;
	jitk_arg args[3];

	scratch_shape(&out, &x, 10, 300);
	args[0] = targ("out", &out);
	args[1] = targ("x", &x);
	scratch_call(rt, &fake, "tsum[parts=4]", args, s1, 1, 0);
	assert_int_equal(fake.alloc_bytes[0], 1u << 20); /* 2 x 300 x 4 bytes, in whole MiB */
	/* the same stream again (the memo's path): the same scratch */
	scratch_call(rt, &fake, "tsum[parts=4]", args, s1, 1, 0);
	/* another stream: its own */
	scratch_call(rt, &fake, "tsum[parts=4]", args, s2, 2, 1);
	assert_true(fake.alloc_ptr[1] != fake.alloc_ptr[0]);
	scratch_call(rt, &fake, "tsum[parts=4]", args, s1, 2, 0);
	/* more than the stream has: twice as much at least (1.2 MB -> 2 MiB,
	 * where whole MiB alone would make it 2 too; 4.8 MB -> 8 MiB, not 5) */
	scratch_shape(&out, &x, 10, 150000);
	scratch_call(rt, &fake, "tsum[parts=4]", args, s1, 3, 2);
	assert_int_equal(fake.alloc_bytes[2], 2u << 20);
	/* and nothing for a call that launches nothing (no rows to sum) */
	scratch_shape(&out, &x, 0, 400000);
	assert_int_equal(jitk_call(&info, rt, "tsum[parts=4]", JITK_CALL_STRICT, args, 2, s1), 0);
	assert_int_equal(fake.nallocs, 3);
	assert_int_equal(fake.nlaunches, 5);
	scratch_shape(&out, &x, 10, 400000);
	scratch_call(rt, &fake, "tsum[parts=4]", args, s1, 4, 3);
	assert_int_equal(fake.alloc_bytes[3], 4u << 20);
	scratch_shape(&out, &x, 10, 600000);
	scratch_call(rt, &fake, "tsum[parts=4]", args, s1, 5, 4);
	assert_int_equal(fake.alloc_bytes[4], 8u << 20);
	/* and the smaller call takes the larger one from then on */
	scratch_shape(&out, &x, 10, 300);
	scratch_call(rt, &fake, "tsum[parts=4]", args, s1, 5, 4);
	/* an instance whose scratch is 0 bytes gets NULL, and makes none */
	scratch_call(rt, &fake, "tsum[parts=1]", args, s3, 5, -1);
	/* the caller may not give it */
	tensor2(&w, ADDR(4), i32, 1, 600);
	args[2] = targ("work", &w);
	assert_int_equal(jitk_call(&info, rt, "tsum[parts=4]", JITK_CALL_STRICT, args, 3, s1),
			 JITK_EINVAL);
	assert_non_null(strstr(jitk_error_last()->message,
			       "work is scratch memory jitk gives the kernel: leave it out (nothing launched)"));
	/* a failed allocation: named, nothing launched, and the next call
	 * on that stream tries again */
	fake.alloc_fail = CUDA_ERROR_OUT_OF_MEMORY;
	assert_int_equal(jitk_call(&info, rt, "tsum[parts=4]", JITK_CALL_STRICT, args, 2, s3),
			 JITK_EDRIVER);
	assert_non_null(strstr(jitk_error_last()->message,
			       "bytes of scratch for work could not be made"));
	assert_int_equal(fake.nlaunches, 9);
	fake.alloc_fail = 0;
	scratch_call(rt, &fake, "tsum[parts=4]", args, s3, 6, 5);
	/* another family on the same stream: a scratch of its own (a family
	 * lays its scratch out as its kernels agree; another may not) */
	scratch_call(rt, &fake, "tsum2[parts=4]", args, s3, 7, 6);
	/* a call on a stream whose scratch another call makes meanwhile (the
	 * allocation is made outside the runtime's lock): it takes that one,
	 * and gives its own back at once */
	{
		scratch_race race = { rt, args, (jitk_stream)0x4000 };

		fake.alloc_hook = scratch_race_call;
		fake.alloc_hook_arg = &race;
		assert_int_equal(jitk_call(&info, rt, "tsum[parts=4]", JITK_CALL_STRICT, args, 2,
					   race.stream), 0);
		assert_int_equal(fake.nallocs, 9);
		assert_int_equal(fake.frees, 1);
		assert_int_equal(fake.launches[11].values[2], fake.alloc_ptr[7]); /* the inner call's */
		assert_int_equal(fake.launches[12].values[2], fake.alloc_ptr[7]);
	}
	/* every scratch, the replaced ones too, goes with the runtime */
	jitk_runtime_free(rt);
	assert_int_equal(fake.frees, 9);
	free(specs);
}

/* Capture: an unresolved kernel requested on a capturing stream returns
 * JITK_ECAPTURE (default policy) and launches nothing; preloaded kernels
 * launch; the RESOLVE policy resolves in relaxed capture mode. */
static void test_capture(void **state)
{
	fixture *f = *state;
	fake_device fake;
	jitk_runtime *rt = runtime(f, &fake, 90, f->specs);
	jitk_norm_scale_shift_args a = norm_args(16, 3072);
	const char *names[1] = { "fused_norm_scale_shift[hidden=3072]" };

	fake.capturing = 1;
	assert_int_equal(jitk_fused_norm_scale_shift(rt, &a, NULL), JITK_ECAPTURE);
	assert_non_null(strstr(jitk_error_last()->message, "jitk_preload"));
	assert_int_equal(fake.nlaunches, 0);
	assert_int_equal(fake.loads, 0);
	fake.capturing = 0;
	{
		const char *holes[2] = { "static_quant_fp8", NULL };

		assert_int_equal(jitk_preload(rt, holes, 2), JITK_EINVAL);
		assert_string_equal(jitk_error_last()->message, "jitk_preload: names[1] is NULL");
	}
	assert_int_equal(jitk_preload(rt, names, 1), 0);
	fake.capturing = 1;
	assert_int_equal(jitk_fused_norm_scale_shift(rt, &a, NULL), 0);
	assert_int_equal(fake.nlaunches, 1);
	jitk_runtime_free(rt);
	/* preload of everything skips the gated instances: on an sm_80
	 * device the data-only family's tadd3 (gated from sm_90) is not
	 * resolved, its fallback steps are (a small spec set: preloading the
	 * shipped specs would compile every kernel) */
	{
		char *fam = t_path(t_root(), "tests/families/specs");
		jitk_stats st = JITK_STATS_INIT;

		rt = runtime(f, &fake, 80, fam);
		assert_int_equal(jitk_preload(rt, NULL, 0), 0);
		assert_int_equal(jitk_stats_get(&st, rt, "tadd2"), 0);
		assert_int_equal(st.loads, 2); /* both cols */
		assert_int_equal(jitk_stats_get(&st, rt, "tadd_acc"), 0);
		assert_int_equal(st.loads, 2);
		assert_int_equal(jitk_stats_get(&st, rt, "tadd3"), 0);
		assert_int_equal(st.loads + st.compiles + st.cache_hits, 0);
		jitk_runtime_free(rt);
		free(fam);
	}

	memset(&fake, 0, sizeof(fake));
	fake.cc = 90;
	fake.capturing = 1;
	assert_int_equal(t_fake_runtime(&rt, &fake, f->specs, f->cache, JITK_CAPTURE_RESOLVE), 0);
	assert_int_equal(jitk_fused_norm_scale_shift(rt, &a, NULL), 0);
	assert_int_equal(fake.nlaunches, 1);
	assert_int_equal(fake.mode_switches, 2); /* to relaxed and back */
	jitk_runtime_free(rt);
}

/* The driver refuses a cached image: evict, compile once more, load. If
 * it refuses again: a clear error. */
static void test_driver_rejects(void **state)
{
	fixture *f = *state;
	fake_device fake;
	jitk_runtime *rt = runtime(f, &fake, 90, f->specs);
	jitk_kernel *k;
	jitk_stats s = JITK_STATS_INIT;

	assert_int_equal(jitk_kernel_get(&k, rt, "static_quant_fp8"), 0);
	jitk_runtime_free(rt);

	rt = runtime(f, &fake, 90, f->specs); /* the cache now holds it */
	fake.reject_loads = 1;
	assert_int_equal(jitk_kernel_get(&k, rt, "static_quant_fp8"), 0);
	assert_int_equal(jitk_stats_get(&s, rt, "static_quant_fp8"), 0);
	assert_int_equal(s.cache_hits, 1);
	assert_int_equal(s.load_failures, 1);
	assert_int_equal(s.compiles, 1);
	assert_int_equal(s.loads, 2);
	jitk_runtime_free(rt);

	rt = runtime(f, &fake, 90, f->specs);
	fake.reject_loads = 2;
	assert_int_equal(jitk_kernel_get(&k, rt, "static_quant_fp8"), JITK_EDRIVER);
	assert_string_equal(jitk_error_last()->message,
			    "the driver rejected the image of static_quant_fp8 for sm_90: CUDA_ERROR_INVALID_IMAGE");
	assert_int_equal(jitk_stats_get(&s, rt, "static_quant_fp8"), 0);
	assert_int_equal(s.load_failures, 2);
	assert_int_equal(s.compiles, 1);
	/* A later request tries again (the failure is not cached). */
	assert_int_equal(jitk_kernel_get(&k, rt, "static_quant_fp8"), 0);
	jitk_runtime_free(rt);

	memset(&fake, 0, sizeof(fake));
	fake.open_fails = CUDA_ERROR_NO_DEVICE;
	assert_int_equal(t_fake_runtime(&rt, &fake, f->specs, f->cache, JITK_CAPTURE_ERROR),
			 JITK_ENODEV);
	assert_string_equal(jitk_error_last()->message, "cannot open CUDA device 0: CUDA_ERROR_NO_DEVICE");
	assert_int_equal(fake.closed, 1);
}

/* A runtime that cannot be made owns its device all the same: the fake is
 * closed once on every early failure (bad options version, NULL out). */
static void test_failed_create_closes_the_device(void **state)
{
	fixture *f = *state;
	jitk_runtime_options o = JITK_RUNTIME_OPTIONS_INIT;
	fake_device fake;
	jitk_runtime *rt = (jitk_runtime *)&fake;

	memset(&fake, 0, sizeof(fake));
	fake.cc = 90;
	o.version = 99;
	assert_int_equal(t_fake_runtime_with(&rt, &fake, f->specs, f->cache, &o), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message, "jitk_runtime_options version 99 is not 1 to 4");
	assert_null(rt);
	assert_int_equal(fake.closed, 1);
	o.version = 0;
	assert_int_equal(t_fake_runtime_with(&rt, &fake, f->specs, f->cache, &o), JITK_EINVAL);
	assert_int_equal(fake.closed, 2);
	assert_int_equal(jitk__runtime_new_with(NULL, NULL, &fake_ops, &fake), JITK_EINVAL);
	assert_int_equal(fake.closed, 3);
	/* a spec set that does not load: closed too */
	assert_int_equal(t_fake_runtime(&rt, &fake, "/nonexistent/specs", f->cache, JITK_CAPTURE_ERROR),
			 JITK_ESPEC);
	assert_int_equal(fake.closed, 4);
	assert_int_equal(fake.loads, 0);
}

/* In the spec at path, n more i32 arguments after the line after. */
static void pad_args(const char *path, const char *after, int n)
{
	char pad[4096];
	size_t used = (size_t)snprintf(pad, sizeof(pad), "%s", after);
	int i;

	for (i = 0; i < n; i++)
		used += (size_t)snprintf(pad + used, sizeof(pad) - used, "  pad%d: { type: i32 }\n", i);
	assert_true(used < sizeof(pad));
	t_edit(path, after, pad);
}

/* Tables of a fixed size fail loudly when full, before anything is
 * compiled: a family with more arguments than a kernel takes is refused
 * when the specs load, at its location. Tables that need no bound have
 * none: launch checks, and the instances a typed symbol picks among (the
 * last of 39 runs). */
static void test_full_tables_fail_loudly(void **state)
{
	fixture *f = *state;
	char *dir = t_path(f->dir, "wide"), *specs = t_path(dir, "specs");
	char *quant = t_path(specs, "static_quant_fp8.yaml"), *norm = t_path(specs, "norm_scale_shift.yaml");
	char hidden[1024];
	size_t used = 0;
	jitk_norm_scale_shift_args a = norm_args(4, 16384);
	fake_device fake;
	jitk_runtime *rt = NULL;
	jitk_kernel *k;
	int i;

	/* static_quant_fp8 with 33 arguments */
	t_copy_tree(dir, NULL, NULL);
	pad_args(quant, "  n:           { type: i64 }\n", 29);
	memset(&fake, 0, sizeof(fake));
	fake.cc = 90;
	assert_int_equal(t_fake_runtime(&rt, &fake, specs, f->cache, JITK_CAPTURE_ERROR), JITK_ESPEC);
	assert_non_null(strstr(jitk_error_last()->message, "static_quant_fp8.yaml:26:3: error: more than 32 arguments (at args)"));
	assert_null(rt);
	assert_int_equal(fake.loads, 0);
	t_rmtree(dir);

	/* ... with 9 launch checks: no table to fill */
	t_copy_tree(dir, NULL, NULL);
	t_edit(quant, "      message: n must not be negative\n",
	       "      message: n must not be negative\n"
	       "    - { check: n >= 0, message: a }\n    - { check: n >= 0, message: b }\n"
	       "    - { check: n >= 0, message: c }\n    - { check: n >= 0, message: d }\n"
	       "    - { check: n >= 0, message: e }\n    - { check: n >= 0, message: f }\n"
	       "    - { check: n >= 0, message: g }\n    - { check: n < 4096, message: the ninth }\n");
	rt = runtime(f, &fake, 90, specs);
	assert_int_equal(jitk_kernel_get(&k, rt, "static_quant_fp8"), 0);
	assert_int_equal(k->nchecks, 9);
	assert_int_equal(jitk_static_quant_fp8(rt, &(jitk_static_quant_fp8_args){ .q = a.q, .x = a.x, .input_scale = a.input_scale, .n = 64 }, NULL), 0);
	assert_int_equal(jitk_static_quant_fp8(rt, &(jitk_static_quant_fp8_args){ .q = a.q, .x = a.x, .input_scale = a.input_scale, .n = 4096 }, NULL), JITK_EINVAL);
	assert_non_null(strstr(jitk_error_last()->message, "the ninth"));
	jitk_runtime_free(rt);
	t_rmtree(dir);

	/* the norm family with 30 arguments before its own */
	t_copy_tree(dir, NULL, NULL);
	pad_args(norm, "args:\n", 30);
	memset(&fake, 0, sizeof(fake));
	fake.cc = 90;
	assert_int_equal(t_fake_runtime(&rt, &fake, specs, f->cache, JITK_CAPTURE_ERROR), JITK_ESPEC);
	assert_non_null(strstr(jitk_error_last()->message, "error: more than 32 arguments (at args)"));
	t_rmtree(dir);

	/* fused_norm_scale_shift with 39 hidden sizes: the last one runs */
	t_copy_tree(dir, NULL, NULL);
	used = (size_t)snprintf(hidden, sizeof(hidden), "hidden: [3072, 1536, 5120");
	for (i = 1; i <= 35; i++)
		used += (size_t)snprintf(hidden + used, sizeof(hidden) - used, ", %d", 8 * i);
	snprintf(hidden + used, sizeof(hidden) - used,
		 ", 16384], modulation: shared, affine: none, outputs: y_q }\n  fused_scale_residual_norm_scale_shift:");
	t_edit(norm, "hidden: [3072, 1536, 5120], modulation: shared, affine: none, outputs: y_q }\n"
	       "  fused_scale_residual_norm_scale_shift:", hidden);
	rt = runtime(f, &fake, 90, specs);
	a.hidden = 16384;
	assert_int_equal(jitk_fused_norm_scale_shift(rt, &a, NULL), 0);
	assert_int_equal(fake.nlaunches, 1);
	assert_int_equal(fake.launches[0].values[P_ROWS], 4);
	a.hidden = 8 * 35;
	assert_int_equal(jitk_fused_norm_scale_shift(rt, &a, NULL), JITK_ESPEC); /* a failed constraint is a spec error, not a gate */
	a.hidden = 4096;
	assert_int_equal(jitk_fused_norm_scale_shift(rt, &a, NULL), JITK_EINVAL);
	assert_true(!strncmp(jitk_error_last()->message,
			     "fused_norm_scale_shift: no instance for hidden=4096 (from y) (instances: "
			     "fused_norm_scale_shift[hidden=3072], ", 108));
	jitk_runtime_free(rt);
	free(quant);
	free(norm);
	free(specs);
	free(dir);
}

/* Cache rejects are counted per build: a resolve that finds a bad entry
 * while another one (of another symbol) is compiling is credited alone. */
typedef struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int a_compiled, b_done;
} rejects_sync;

static void rejects_log(void *payload, jitk_log_level level, const char *msg)
{
	rejects_sync *y = payload;

	(void)level;
	/* A's compile is done and its build not yet counted: hold it there
	 * until B has met (and counted) its bad entry. */
	if (strncmp(msg, "compiled fused_norm_scale_shift[hidden=1536] ", 45))
		return;
	pthread_mutex_lock(&y->mu);
	y->a_compiled = 1;
	pthread_cond_broadcast(&y->cv);
	while (!y->b_done)
		pthread_cond_wait(&y->cv, &y->mu);
	pthread_mutex_unlock(&y->mu);
}

typedef struct {
	jitk_runtime *rt;
	jitk_kernel *k;
	int rc;
} race_arg;

static void *race(void *p)
{
	race_arg *a = p;

	a->rc = jitk_kernel_get(&a->k, a->rt, "fused_norm_scale_shift[hidden=1536]");
	return NULL;
}

static void test_rejects_counted_per_build(void **state)
{
	fixture *f = *state;
	jitk_runtime_options o = JITK_RUNTIME_OPTIONS_INIT;
	rejects_sync y = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 };
	fake_device fake;
	jitk_runtime *rt = runtime(f, &fake, 90, f->specs);
	jitk_kernel *k;
	jitk_stats s = JITK_STATS_INIT;
	race_arg a;
	pthread_t th;
	char *dir, *path = NULL, *bytes;
	size_t len;

	/* B's entry in the cache, then one byte of it flipped */
	assert_int_equal(jitk_kernel_get(&k, rt, "static_quant_fp8"), 0);
	memset(&a, 0, sizeof(a));
	dir = jitk__asprintf("%s/v1/%.2s", f->cache, k->key_hex);
	path = jitk__asprintf("%s/%s.jitk", dir, k->key_hex);
	jitk_runtime_free(rt);
	bytes = t_read(path, &len);
	bytes[len / 2] ^= 0x55;
	t_write(path, bytes, len);
	free(bytes);

	{
		static jitk_compiler_options co = JITK_COMPILER_OPTIONS_INIT;

		co.log = rejects_log;
		co.log_payload = &y;
		co.log_level = JITK_LOG_INFO;
		o.compiler = &co;
	}
	rt = runtime_with(f, &fake, 90, f->specs, &o);
	a.rt = rt;
	assert_int_equal(pthread_create(&th, NULL, race, &a), 0);
	pthread_mutex_lock(&y.mu);
	while (!y.a_compiled)
		pthread_cond_wait(&y.cv, &y.mu);
	pthread_mutex_unlock(&y.mu);
	assert_int_equal(jitk_kernel_get(&k, rt, "static_quant_fp8"), 0); /* B: reject, compile */
	pthread_mutex_lock(&y.mu);
	y.b_done = 1;
	pthread_cond_broadcast(&y.cv);
	pthread_mutex_unlock(&y.mu);
	pthread_join(th, NULL);
	assert_int_equal(a.rc, 0);
	assert_int_equal(jitk_stats_get(&s, rt, "static_quant_fp8"), 0);
	assert_int_equal(s.cache_rejects, 1);
	assert_int_equal(s.compiles, 1);
	assert_int_equal(jitk_stats_get(&s, rt, "fused_norm_scale_shift[hidden=1536]"), 0);
	assert_int_equal(s.cache_rejects, 0);
	assert_int_equal(s.compiles, 1);
	assert_int_equal(jitk_stats_get(&s, rt, NULL), 0);
	assert_int_equal(s.cache_rejects, 1);
	jitk_runtime_free(rt);
	free(path);
	free(dir);
}

/* 8 threads ask for one cold symbol: one compile, one load, one kernel. */
static void test_threads_one_compile(void **state)
{
	fixture *f = *state;
	fake_device fake;
	jitk_runtime *rt = runtime(f, &fake, 90, f->specs);
	pthread_t th[8];
	race_arg args[8];
	jitk_stats s = JITK_STATS_INIT;
	int i;

	for (i = 0; i < 8; i++) {
		args[i].rt = rt;
		assert_int_equal(pthread_create(&th[i], NULL, race, &args[i]), 0);
	}
	for (i = 0; i < 8; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(args[i].rc, 0);
		assert_ptr_equal(args[i].k, args[0].k);
	}
	assert_int_equal(jitk_stats_get(&s, rt, "fused_norm_scale_shift[hidden=1536]"), 0);
	assert_int_equal(s.compiles, 1);
	assert_int_equal(s.loads, 1);
	assert_int_equal(fake.loads, 1);
	printf("  8 threads racing on one cold symbol: %llu compile(s), %llu load(s)\n",
	       (unsigned long long)s.compiles, (unsigned long long)s.loads);
	jitk_runtime_free(rt);
}

static void test_stats(void **state)
{
	fixture *f = *state;
	fake_device fake;
	jitk_runtime *rt = runtime(f, &fake, 90, f->specs);
	jitk_norm_scale_shift_args a = norm_args(16, 3072);
	jitk_stats s = JITK_STATS_INIT;
	int i;

	for (i = 0; i < 5; i++)
		assert_int_equal(jitk_fused_norm_scale_shift(rt, &a, NULL), 0);
	assert_int_equal(jitk_stats_get(&s, rt, "fused_norm_scale_shift"), 0);
	assert_int_equal(s.compiles + s.cache_hits, 1);
	assert_int_equal(jitk_stats_get(&s, rt, "fused_norm_scale_shift[hidden=1536]"), 0);
	assert_int_equal(s.launches, 0);
	assert_int_equal(jitk_stats_get(&s, rt, "fused_norm_scale_shift[hidden=3072]"), 0);
	assert_int_equal(s.launches, 5);
	assert_int_equal(s.launches, 5);
	assert_true(s.load_ms > 0);
	assert_int_equal(jitk_stats_get(&s, rt, NULL), 0);
	assert_int_equal(s.launches, 5);
	assert_int_equal(jitk_stats_get(&s, rt, "nope"), JITK_ENOENT);
	jitk_runtime_free(rt);
}

/* Programmatic dependent launch: only when the runtime asks for it, the
 * spec family declares that its template waits (launch.programmatic), and
 * the GPU has griddepcontrol (sm_90+). Version 1 options still work. */
static int programmatic_launch(fixture *f, int cc, int option, const char *specs, unsigned version)
{
	jitk_runtime_options o = JITK_RUNTIME_OPTIONS_INIT;
	jitk_runtime *rt;
	fake_device fake;
	jitk_norm_scale_shift_args a = norm_args(64, 3072);
	int flags;

	if (version < 3) {
		/* An older program's struct: its own layout (version 2 ended in
		 * programmatic after the embedded compiler options, which were
		 * version 1's: they end at cache_read_only). */
		struct {
			unsigned version;
			int device;
			jitk_capture_policy capture;
			struct {
				unsigned version;
				const char *specs, *cache_dir, *cache_path;
				int no_compile, force_compile;
				const char *dump_dir;
				jitk_log_fn log;
				void *log_payload;
				int log_level, cache_read_only;
			} compiler;
			int programmatic;
		} old;

		assert_int_equal(jitk_runtime_options_init((jitk_runtime_options *)(void *)&old, version), 0);
		old.programmatic = option;
		old.compiler.specs = specs;
		old.compiler.cache_dir = f->cache;
		old.compiler.log = t_log_fn;
		memset(&fake, 0, sizeof(fake));
		fake.cc = cc;
		fake.sm_count = 132;
		assert_int_equal(jitk__runtime_new_with(&rt, (jitk_runtime_options *)(void *)&old, &fake_ops, &fake), 0);
	} else {
		o.programmatic = option;
		rt = runtime_with(f, &fake, cc, specs, &o);
	}
	assert_int_equal(jitk_fused_norm_scale_shift(rt, &a, NULL), 0);
	assert_int_equal(jitk_static_quant_fp8(rt, &(jitk_static_quant_fp8_args){ .q = a.q, .x = a.y, .input_scale = a.input_scale, .n = 64 * 3072 }, NULL),
			 cc >= 89 ? 0 : JITK_EARCH);
	assert_int_equal(fake.nlaunches, cc >= 89 ? 2 : 1);
	flags = fake.launches[0].programmatic;
	if (cc >= 89)
		assert_int_equal(fake.launches[1].programmatic, flags);
	jitk_runtime_free(rt);
	return flags;
}

static void test_programmatic_launch(void **state)
{
	fixture *f = *state;
	char *dir = t_path(f->dir, "nopdl"), *specs = t_path(dir, "specs");

	assert_int_equal(programmatic_launch(f, 90, 1, f->specs, JITK_RUNTIME_OPTIONS_VERSION), 1);
	assert_int_equal(programmatic_launch(f, 100, 1, f->specs, JITK_RUNTIME_OPTIONS_VERSION), 1);
	assert_int_equal(programmatic_launch(f, 90, 0, f->specs, JITK_RUNTIME_OPTIONS_VERSION), 0);
	assert_int_equal(programmatic_launch(f, 80, 1, f->specs, JITK_RUNTIME_OPTIONS_VERSION), 0);
	/* version 1 options have no such field: the 1 set here is not read */
	assert_int_equal(programmatic_launch(f, 90, 1, f->specs, 1), 0);
	assert_int_equal(programmatic_launch(f, 90, 1, f->specs, 2), 1);
	/* version 2 said "nonzero": its -1 is on, never the environment */
	assert_int_equal(programmatic_launch(f, 90, -1, f->specs, 2), 1);
	/* -1 (the default): $JITK_PROGRAMMATIC; an explicit 0 or 1 wins */
	unsetenv("JITK_PROGRAMMATIC");
	assert_int_equal(programmatic_launch(f, 90, -1, f->specs, JITK_RUNTIME_OPTIONS_VERSION), 0);
	setenv("JITK_PROGRAMMATIC", "1", 1);
	assert_int_equal(programmatic_launch(f, 90, -1, f->specs, JITK_RUNTIME_OPTIONS_VERSION), 1);
	assert_int_equal(programmatic_launch(f, 90, 0, f->specs, JITK_RUNTIME_OPTIONS_VERSION), 0);
	assert_int_equal(programmatic_launch(f, 80, -1, f->specs, JITK_RUNTIME_OPTIONS_VERSION), 0);
	setenv("JITK_PROGRAMMATIC", "True", 1); /* the spellings of every boolean variable */
	assert_int_equal(programmatic_launch(f, 90, -1, f->specs, JITK_RUNTIME_OPTIONS_VERSION), 1);
	setenv("JITK_PROGRAMMATIC", "off", 1);
	assert_int_equal(programmatic_launch(f, 90, -1, f->specs, JITK_RUNTIME_OPTIONS_VERSION), 0);
	assert_int_equal(programmatic_launch(f, 90, 1, f->specs, JITK_RUNTIME_OPTIONS_VERSION), 1);
	/* a value that is not a boolean: off, with one warning naming it */
	setenv("JITK_PROGRAMMATIC", "sometimes", 1);
	{
		jitk_compiler_options co = JITK_COMPILER_OPTIONS_INIT;
		jitk_runtime_options o = JITK_RUNTIME_OPTIONS_INIT;
		t_log log = { 0 };
		fake_device fake;
		jitk_runtime *rt;

		co.log = t_log_fn;
		co.log_payload = &log;
		o.compiler = &co;
		rt = runtime_with(f, &fake, 90, f->specs, &o);
		assert_int_equal(log.warnings, 1);
		assert_non_null(strstr(log.last, "JITK_PROGRAMMATIC='sometimes' is not one of"));
		assert_non_null(strstr(log.last, "taken as 0 (off: launched the ordinary way)"));
		jitk_runtime_free(rt);
	}
	assert_int_equal(programmatic_launch(f, 90, -1, f->specs, JITK_RUNTIME_OPTIONS_VERSION), 0);
	/* the option set: the environment is not read */
	assert_int_equal(programmatic_launch(f, 90, 1, f->specs, JITK_RUNTIME_OPTIONS_VERSION), 1);
	unsetenv("JITK_PROGRAMMATIC");
	/* a family that does not declare it */
	t_copy_tree(dir, "  programmatic: true", "  programmatic: false");
	assert_int_equal(programmatic_launch(f, 90, 1, specs, JITK_RUNTIME_OPTIONS_VERSION), 0);
	free(specs);
	free(dir);
}

/* Options: every version from 1 to the current one is read with its own
 * layout; another version is refused (and the device is closed, not
 * leaked); _init fills the defaults of a version. */
static void test_options(void **state)
{
	fixture *f = *state;
	jitk_runtime_options o;
	jitk_compiler_options co;
	fake_device fake;
	jitk_runtime *rt;

	(void)f;
	assert_string_equal(jitk_version(), JITK_VERSION);
	assert_int_equal(jitk_runtime_options_init(&o, JITK_RUNTIME_OPTIONS_VERSION), 0);
	assert_int_equal(o.version, JITK_RUNTIME_OPTIONS_VERSION);
	assert_null(o.compiler);
	assert_int_equal(o.capture, JITK_CAPTURE_ERROR);
	assert_int_equal(jitk_runtime_options_init(&o, 0), JITK_EINVAL);
	assert_int_equal(jitk_runtime_options_init(&o, JITK_RUNTIME_OPTIONS_VERSION + 1), JITK_EINVAL);
	assert_int_equal(jitk_compiler_options_init(&co, 1), 0);
	assert_int_equal(co.no_compile, -1);
	assert_null(co.specs);
	assert_int_equal(jitk_compiler_options_init(&co, 2 + JITK_COMPILER_OPTIONS_VERSION), JITK_EINVAL);

	memset(&fake, 0, sizeof(fake));
	fake.cc = 90;
	o.version = 77;
	assert_int_equal(jitk__runtime_new_with(&rt, &o, &fake_ops, &fake), JITK_EINVAL);
	assert_non_null(strstr(jitk_error_last()->message, "version 77 is not 1 to"));
	assert_null(rt);
	assert_int_equal(fake.closed, 1);
	assert_int_equal(jitk__runtime_new_with(NULL, NULL, &fake_ops, &fake), JITK_EINVAL);
	assert_int_equal(fake.closed, 2);
	/* compiler options of an unknown version inside good runtime options */
	jitk_runtime_options_init(&o, JITK_RUNTIME_OPTIONS_VERSION);
	co.version = 9;
	o.compiler = &co;
	assert_int_equal(jitk__runtime_new_with(&rt, &o, &fake_ops, &fake), JITK_EINVAL);
	assert_int_equal(fake.closed, 3);
}

/* The runtime's output structs (jitk.h, "Output structs"), planted with
 * version 1 at the start of a buffer of sentinel bytes as an older
 * caller's smaller struct: the call fills version 1's fields and no byte
 * past them; versions 0 and current + 1 are refused, nothing written. */
#define SENTINEL 0xa5
#define END_OF(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))

static void *planted(unsigned char *b, size_t n, unsigned version)
{
	memset(b, SENTINEL, n);
	memcpy(b, &version, sizeof(version));
	return b;
}

static void untouched_from(const unsigned char *b, size_t n, size_t from)
{
	size_t i;

	for (i = from; i < n; i++)
		assert_int_equal(b[i], SENTINEL);
}

static void test_output_structs_fill_only_their_version(void **state)
{
	fixture *f = *state;
	fake_device fake;
	jitk_runtime *rt = runtime(f, &fake, 90, f->specs);
	jitk_norm_scale_shift_args a = norm_args(8, 3072);
	union {
		unsigned char b[512];
		uint64_t align;
	} u;
	jitk_kernel_info *ki;
	jitk_call_info *ci;
	jitk_stats *st;
	jitk_kernel *k;
	unsigned v;

	a.q = a.residual_out = a.residual = a.gate = a.input_scale = 0; /* what the symbol takes */
	assert_int_equal(jitk_kernel_get(&k, rt, "fused_norm_scale_shift[hidden=3072]"), 0);
	ki = planted(u.b, sizeof(u.b), 1);
	assert_int_equal(jitk_kernel_info_get(ki, k), 0);
	assert_string_equal(ki->instance, "fused_norm_scale_shift[hidden=3072]");
	assert_int_equal(strlen(ki->key), 64);
	untouched_from(u.b, sizeof(u.b), END_OF(jitk_kernel_info, key));

	ci = planted(u.b, sizeof(u.b), 1);
	assert_int_equal(jitk_call(ci, rt, "fused_norm_scale_shift", JITK_CALL_STRICT, NULL, 0, NULL),
			 JITK_EINVAL); /* missing arguments: info still filled (cleared) */
	assert_null(ci->instance);
	untouched_from(u.b, sizeof(u.b), END_OF(jitk_call_info, instance));
	ci = planted(u.b, sizeof(u.b), 1);
	assert_int_equal(jitk_norm_scale_shift_call(ci, rt, "fused_norm_scale_shift", JITK_CALL_TRY, &a,
						    NULL), 0);
	assert_string_equal(ci->instance, "fused_norm_scale_shift[hidden=3072]");
	assert_int_equal(ci->fallback, 0);
	untouched_from(u.b, sizeof(u.b), END_OF(jitk_call_info, instance));

	st = planted(u.b, sizeof(u.b), 1);
	assert_int_equal(jitk_stats_get(st, rt, "fused_norm_scale_shift"), 0);
	assert_int_equal(st->launches, 1);
	untouched_from(u.b, sizeof(u.b), END_OF(jitk_stats, load_ms));

	for (v = 0; v < 2; v++) {
		unsigned bad = v ? JITK_KERNEL_INFO_VERSION + 1 : 0;

		assert_int_equal(jitk_kernel_info_get(planted(u.b, sizeof(u.b), bad), k), JITK_EINVAL);
		assert_non_null(strstr(jitk_error_last()->message, "jitk_kernel_info version"));
		untouched_from(u.b, sizeof(u.b), sizeof(unsigned));
		bad = v ? JITK_CALL_INFO_VERSION + 1 : 0;
		assert_int_equal(jitk_norm_scale_shift_call(planted(u.b, sizeof(u.b), bad), rt,
							    "fused_norm_scale_shift", JITK_CALL_STRICT, &a,
							    NULL), JITK_EINVAL);
		assert_non_null(strstr(jitk_error_last()->message, "jitk_call_info version"));
		untouched_from(u.b, sizeof(u.b), sizeof(unsigned));
		bad = v ? JITK_STATS_VERSION + 1 : 0;
		assert_int_equal(jitk_stats_get(planted(u.b, sizeof(u.b), bad), rt, NULL), JITK_EINVAL);
		assert_non_null(strstr(jitk_error_last()->message, "jitk_stats version"));
		untouched_from(u.b, sizeof(u.b), sizeof(unsigned));
	}
	assert_int_equal(fake.nlaunches, 1); /* a refused info launches nothing */
	jitk_runtime_free(rt);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_output_structs_fill_only_their_version, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_sm90_falls_back, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sm90_spec_allows_fused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sm100_and_sm120, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sm80, setup, teardown),
		cmocka_unit_test_setup_teardown(test_guards, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_configured_address_is_its_allocation_not_its_bytes,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_generic_call_checks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_impossible_tensors_are_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_shape_division_by_zero_says_so, setup, teardown),
		cmocka_unit_test_setup_teardown(test_call_memo, setup, teardown),
		cmocka_unit_test_setup_teardown(test_data_only_family, setup, teardown),
		cmocka_unit_test_setup_teardown(test_scratch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_options, setup, teardown),
		cmocka_unit_test_setup_teardown(test_capture, setup, teardown),
		cmocka_unit_test_setup_teardown(test_driver_rejects, setup, teardown),
		cmocka_unit_test_setup_teardown(test_threads_one_compile, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stats, setup, teardown),
		cmocka_unit_test_setup_teardown(test_programmatic_launch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failed_create_closes_the_device, setup, teardown),
		cmocka_unit_test_setup_teardown(test_full_tables_fail_loudly, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rejects_counted_per_build, setup, teardown),
	};

	return T_RUN_TESTS(tests, NULL, NULL);
}
