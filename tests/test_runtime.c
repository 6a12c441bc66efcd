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

/* Norm family argument order in specs/norm_scale_shift.yaml. */
enum { P_Y, P_Q, P_ROUT, P_X, P_RES, P_GATE, P_SCALE, P_SHIFT, P_ISCALE, P_ROWS, P_EPS };

typedef struct {
	char *dir, *cache, *specs, *specs_ref;
} fixture;

static int setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));

	f->dir = t_tmpdir();
	f->cache = t_path(f->dir, "cache");
	f->specs = t_path(t_root(), "specs");
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

	t_rmtree(f->dir);
	free(f->dir);
	free(f->cache);
	free(f->specs);
	free(f->specs_ref);
	free(f);
	return 0;
}

static jitk_norm_args norm_args(int rows, int hidden)
{
	jitk_norm_args a;

	memset(&a, 0, sizeof(a));
	a.y = 0x100000;
	a.q = 0x200000;
	a.residual_out = 0x300000;
	a.x = 0x400000;
	a.residual = 0x500000;
	a.gate = 0x600000;
	a.scale = 0x700000;
	a.shift = 0x800000;
	a.input_scale = 0x900000;
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

/* On sm_90 with the reference's gate the fused fp8 symbols fall back:
 * try_ says why, auto runs the split path (norm, then quantizer). */
static void test_sm90_falls_back(void **state)
{
	fixture *f = *state;
	fake_device fake;
	jitk_runtime *rt = runtime(f, &fake, 90, f->specs_ref);
	jitk_norm_args a = norm_args(1024, 3072);
	jitk_kernel *k;
	const char *why = NULL;
	int fused = -1;

	assert_string_equal(jitk_runtime_arch(rt), "sm_90");
	assert_int_equal(jitk_kernel_get(&k, rt, "fused_norm_scale_shift_fp8"), JITK_EARCH);
	assert_non_null(strstr(jitk_error_last()->message, "needs sm_100 or newer"));
	assert_int_equal(jitk_configure_input_scale(rt, a.input_scale), 0);
	assert_int_equal(jitk_try_fused_norm_scale_shift_fp8(rt, &a, NULL, &why), JITK_FALLBACK);
	assert_non_null(why);
	assert_non_null(strstr(why, "needs sm_100 or newer"));
	assert_int_equal(fake.nlaunches, 0);
	assert_int_equal(jitk_fused_norm_scale_shift_fp8(rt, &a, NULL), JITK_EARCH);
	assert_int_equal(fake.nlaunches, 0);

	assert_int_equal(jitk_auto_norm_scale_shift_fp8(rt, &a, NULL, &fused), 0);
	assert_int_equal(fused, 0);
	assert_int_equal(fake.nlaunches, 2);
	/* norm: two warps per row, a row per block; 1024 rows fit 8 blocks
	 * per SM on the fake's 132 SMs, so no block walks two rows yet */
	assert_int_equal(fake.launches[0].grid[0], 1024);
	assert_int_equal(fake.launches[0].block[0], 64);
	assert_int_equal(fake.launches[0].nparams, 11);
	assert_int_equal(fake.launches[0].values[P_Y], a.y);
	assert_int_equal(fake.launches[0].values[P_X], a.x);
	assert_int_equal(fake.launches[0].values[P_ROWS], 1024);
	/* quantizer over the norm's y: q, x = y, input_scale, n = rows * H */
	assert_int_equal(fake.launches[1].nparams, 4);
	assert_int_equal(fake.launches[1].values[0], a.q);
	assert_int_equal(fake.launches[1].values[1], a.y);
	assert_int_equal(fake.launches[1].values[2], a.input_scale);
	assert_int_equal(fake.launches[1].values[3], 1024 * 3072);
	assert_int_equal(fake.launches[1].block[0], 256);
	assert_int_equal(fake.launches[1].grid[0], 384); /* cdiv(3 Mi, 256 x 4 x 8) */
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
	jitk_norm_args a = norm_args(4096, 3072);
	int fused = -1;

	assert_int_equal(jitk_configure_input_scale(rt, a.input_scale), 0);
	assert_int_equal(jitk_auto_scale_residual_norm_scale_shift_fp8(rt, &a, NULL, &fused), 0);
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

/* sm_100 runs fused with 32-byte vectors: 16-byte aligned is not enough
 * there, and the try_ path says so instead of launching. */
static void test_sm100_and_sm120(void **state)
{
	fixture *f = *state;
	fake_device fake;
	jitk_runtime *rt = runtime(f, &fake, 100, f->specs);
	jitk_norm_args a = norm_args(127, 5120);
	const char *why = NULL;
	int fused = -1;

	assert_int_equal(jitk_configure_input_scale(rt, a.input_scale), 0);
	assert_int_equal(jitk_auto_norm_scale_shift_fp8(rt, &a, NULL, &fused), 0);
	assert_int_equal(fused, 1);
	assert_int_equal(fake.nlaunches, 1);
	/* hidden 5120: five warps per row, a row per block */
	assert_int_equal(fake.launches[0].block[0], 160);
	assert_int_equal(fake.launches[0].grid[0], 127);
	a.x += 16;
	assert_int_equal(jitk_try_fused_norm_scale_shift_fp8(rt, &a, NULL, &why), JITK_FALLBACK);
	assert_string_equal(why, "x is NULL or not aligned to the fused kernel's vector width");
	assert_int_equal(fake.nlaunches, 1);
	jitk_runtime_free(rt);

	rt = runtime(f, &fake, 120, f->specs);
	a = norm_args(1, 1536);
	assert_int_equal(jitk_configure_input_scale(rt, a.input_scale), 0);
	assert_int_equal(jitk_try_fused_norm_scale_shift_fp8(rt, &a, NULL, &why), 0);
	assert_int_equal(fake.nlaunches, 1);
	assert_string_equal(jitk_runtime_arch(rt), "sm_120");
	jitk_runtime_free(rt);
}

/* sm_80: no e4m3 conversion. The fused path falls back, and the split
 * path cannot run either: a clear EARCH, nothing launched. */
static void test_sm80(void **state)
{
	fixture *f = *state;
	fake_device fake;
	jitk_runtime *rt = runtime(f, &fake, 80, f->specs);
	jitk_norm_args a = norm_args(64, 3072);
	const char *why = NULL;
	int fused = -1;

	assert_int_equal(jitk_configure_input_scale(rt, a.input_scale), 0);
	assert_int_equal(jitk_try_fused_norm_scale_shift_fp8(rt, &a, NULL, &why), JITK_FALLBACK);
	assert_non_null(strstr(why, "needs sm_89 or newer"));
	assert_int_equal(jitk_auto_norm_scale_shift_fp8(rt, &a, NULL, &fused), JITK_EARCH);
	assert_non_null(strstr(jitk_error_last()->message, "static_quant_fp8"));
	/* The non-quantizing norm runs (the norm launched, not the quantizer). */
	assert_int_equal(fake.nlaunches, 1);
	assert_int_equal(jitk_fused_norm_scale_shift(rt, &a, NULL), 0);
	assert_int_equal(fake.nlaunches, 2);
	jitk_runtime_free(rt);
}

static void test_guards(void **state)
{
	fixture *f = *state;
	fake_device fake;
	jitk_runtime *rt = runtime(f, &fake, 100, f->specs);
	jitk_norm_args a = norm_args(8, 3072);
	const char *why = NULL;

	/* Scale not configured, then invalid values refused. */
	assert_int_equal(jitk_try_fused_norm_scale_shift_fp8(rt, &a, NULL, &why), JITK_FALLBACK);
	assert_string_equal(why, "input_scale was not validated with jitk_configure_input_scale");
	fake.scale_value = NAN;
	assert_int_equal(jitk_configure_input_scale(rt, a.input_scale), JITK_EINVAL);
	assert_non_null(strstr(jitk_error_last()->message, "finite, positive"));
	fake.scale_value = 0.0f;
	assert_int_equal(jitk_configure_input_scale(rt, a.input_scale), JITK_EINVAL);
	fake.scale_value = -1.0f;
	assert_int_equal(jitk_configure_input_scale(rt, a.input_scale), JITK_EINVAL);
	fake.scale_value = INFINITY;
	assert_int_equal(jitk_configure_input_scale(rt, a.input_scale), JITK_EINVAL);
	assert_int_equal(jitk_configure_input_scale(rt, a.input_scale + 2), JITK_EINVAL);
	fake.scale_value = 0.4754464328289032f;
	assert_int_equal(jitk_configure_input_scale(rt, a.input_scale), 0);
	/* Affine, unsupported hidden size, NULL pointer. */
	a.weight = 0x1000;
	assert_int_equal(jitk_try_fused_norm_scale_shift_fp8(rt, &a, NULL, &why), JITK_FALLBACK);
	assert_string_equal(why, "affine LayerNorm (weight/bias) is not fused");
	a.weight = 0;
	a.hidden = 4096;
	assert_int_equal(jitk_try_fused_norm_scale_shift_fp8(rt, &a, NULL, &why), JITK_FALLBACK);
	assert_string_equal(why, "hidden size has no fused instance in the specs");
	a.hidden = 3072;
	a.q = 0;
	assert_int_equal(jitk_try_fused_norm_scale_shift_fp8(rt, &a, NULL, &why), JITK_FALLBACK);
	assert_string_equal(why, "q is NULL or not aligned to the fused kernel's vector width");
	a.q = 0x200000;
	/* The residual variant checks its extra pointers; the plain one not. */
	a.gate = 0;
	assert_int_equal(jitk_try_fused_scale_residual_norm_scale_shift_fp8(rt, &a, NULL, &why),
			 JITK_FALLBACK);
	assert_string_equal(why, "gate is NULL or not aligned to the fused kernel's vector width");
	assert_int_equal(jitk_try_fused_norm_scale_shift_fp8(rt, &a, NULL, &why), 0);
	assert_int_equal(fake.nlaunches, 1);
	/* Bad arguments are errors, not fallbacks. */
	a.rows = -1;
	assert_int_equal(jitk_try_fused_norm_scale_shift_fp8(rt, &a, NULL, &why), JITK_EINVAL);
	a.rows = 0; /* nothing to do: OK, nothing launched */
	assert_int_equal(jitk_try_fused_norm_scale_shift_fp8(rt, &a, NULL, &why), 0);
	assert_int_equal(jitk_fused_norm_scale_shift(rt, &a, NULL), 0);
	assert_int_equal(jitk_static_quant_fp8(rt, a.q, a.x, a.input_scale, 0, NULL), 0);
	assert_int_equal(fake.nlaunches, 1);
	/* Rows past 32-bit element offsets: launched with a capped grid. */
	a.rows = 1000000;
	assert_int_equal(jitk_fused_norm_scale_shift_fp8(rt, &a, NULL), 0);
	assert_int_equal(fake.launches[1].grid[0], 132 * 32);
	assert_int_equal(fake.launches[1].values[P_ROWS], 1000000);
	/* Past 8 blocks per SM, each block walks two rows. */
	a.rows = 4096;
	assert_int_equal(jitk_fused_norm_scale_shift_fp8(rt, &a, NULL), 0);
	assert_int_equal(fake.launches[2].grid[0], 2048);
	jitk_runtime_free(rt);
}

/* The table of validated input scales is fixed: the one past it is
 * refused with a clear error, and those in it keep working. */
static void test_input_scales_table_full(void **state)
{
	fixture *f = *state;
	fake_device fake;
	jitk_runtime *rt = runtime(f, &fake, 90, f->specs);
	jitk_norm_args a = norm_args(8, 3072);
	jitk_devptr p;

	for (p = 0; p < JITK_MAX_SCALES; p++)
		assert_int_equal(jitk_configure_input_scale(rt, 0x10000000 + 4 * p), 0);
	assert_int_equal(jitk_configure_input_scale(rt, 0x10000000 + 4 * p), JITK_ENOMEM);
	assert_string_equal(jitk_error_last()->message, "more than 1024 input scales configured");
	assert_int_equal(jitk_configure_input_scale(rt, 0x10000000), 0); /* already there */
	a.input_scale = 0x10000000 + 4 * (JITK_MAX_SCALES - 1);
	assert_int_equal(jitk_try_fused_norm_scale_shift_fp8(rt, &a, NULL, NULL), 0);
	assert_int_equal(fake.nlaunches, 1);
	jitk_runtime_free(rt);
}

/* The generic launch checks count, types, names, pointers, alignment and
 * the spec's launch checks before launching anything. */
static void test_generic_launch_checks(void **state)
{
	fixture *f = *state;
	fake_device fake;
	jitk_runtime *rt = runtime(f, &fake, 90, f->specs);
	jitk_kernel *k;
	jitk_arg args[4];

	assert_int_equal(jitk_kernel_get(&k, rt, "static_quant_fp8"), 0);
	memset(args, 0, sizeof(args));
	args[0] = (jitk_arg){ "q", JITK_ARG_PTR, { .ptr = 0x1000 } };
	args[1] = (jitk_arg){ "x", JITK_ARG_PTR, { .ptr = 0x2000 } };
	args[2] = (jitk_arg){ NULL, JITK_ARG_PTR, { .ptr = 0x3000 } };
	args[3] = (jitk_arg){ "n", JITK_ARG_I64, { .i64 = 4096 } };
	assert_int_equal(jitk_kernel_launch(k, args, 3, NULL), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message,
			    "static_quant_fp8 takes 4 arguments, not 3 (nothing launched)");
	args[3].type = JITK_ARG_I32;
	assert_int_equal(jitk_kernel_launch(k, args, 4, NULL), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message,
			    "static_quant_fp8: argument n must be of type long long (nothing launched)");
	args[3].type = JITK_ARG_I64;
	args[1].name = "y";
	assert_int_equal(jitk_kernel_launch(k, args, 4, NULL), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message,
			    "static_quant_fp8: argument 1 is x, not y (nothing launched)");
	args[1].name = "x";
	args[1].v.ptr = 0;
	assert_int_equal(jitk_kernel_launch(k, args, 4, NULL), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message,
			    "static_quant_fp8: argument x is NULL (nothing launched)");
	args[1].v.ptr = 0x2008;
	assert_int_equal(jitk_kernel_launch(k, args, 4, NULL), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message,
			    "static_quant_fp8: argument x (0x2008) is not 16-byte aligned (nothing launched)");
	args[1].v.ptr = 0x2000;
	args[3].v.i64 = -5;
	assert_int_equal(jitk_kernel_launch(k, args, 4, NULL), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message,
			    "static_quant_fp8: n must not be negative (n >= 0; nothing launched)");
	assert_int_equal(fake.nlaunches, 0);
	args[3].v.i64 = 4096;
	assert_int_equal(jitk_launch(rt, "static_quant_fp8", args, 4, NULL), 0);
	assert_int_equal(fake.nlaunches, 1);
	assert_int_equal(fake.launches[0].grid[0], 1);
	assert_int_equal(jitk_launch(rt, "no_such_kernel", args, 4, NULL), JITK_ENOENT);
	assert_string_equal(jitk_error_last()->message, "no symbol named 'no_such_kernel' (see jitk list)");
	/* a near miss names the nearest symbol */
	assert_int_equal(jitk_launch(rt, "static_quant_fp9", args, 4, NULL), JITK_ENOENT);
	assert_string_equal(jitk_error_last()->message,
			    "no symbol named 'static_quant_fp9' (did you mean 'static_quant_fp8'? see jitk list)");
	assert_int_equal(jitk_kernel_get(&k, rt, "fused_norm_scale_shift[hidden=1563]"), JITK_ENOENT);
	assert_string_equal(jitk_error_last()->message,
			    "no symbol named 'fused_norm_scale_shift[hidden=1563]' (did you mean "
			    "'fused_norm_scale_shift[hidden=1536]'? see jitk list)");
	assert_int_equal(fake.nlaunches, 1);
	jitk_runtime_free(rt);
}

/* Capture: an unresolved kernel requested on a capturing stream returns
 * JITK_ECAPTURE (default policy) and launches nothing; preloaded kernels
 * launch; the RESOLVE policy resolves in relaxed capture mode. */
static void test_capture(void **state)
{
	fixture *f = *state;
	fake_device fake;
	jitk_runtime *rt = runtime(f, &fake, 90, f->specs);
	jitk_norm_args a = norm_args(16, 3072);
	const char *names[1] = { "fused_norm_scale_shift" };

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
	/* preload of everything skips the gated instances */
	fake.capturing = 0;
	assert_int_equal(jitk_preload(rt, NULL, 0), 0);
	jitk_runtime_free(rt);

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
	jitk_stats s;

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
	assert_string_equal(jitk_error_last()->message, "jitk_runtime_options version 99 is not 1 or 2");
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
		used += (size_t)snprintf(pad + used, sizeof(pad) - used, "  - { name: pad%d, type: i32 }\n", i);
	assert_true(used < sizeof(pad));
	t_edit(path, after, pad);
}

/* Tables of a fixed size fail loudly when full, before anything is
 * compiled: a family with more arguments or launch checks than a kernel
 * object holds, and a typed family whose roles sit past them. A typed
 * symbol with more instances than any fixed table held launches its last
 * one. */
static void test_full_tables_fail_loudly(void **state)
{
	fixture *f = *state;
	char *dir = t_path(f->dir, "wide"), *specs = t_path(dir, "specs");
	char *quant = t_path(specs, "static_quant_fp8.yaml"), *norm = t_path(specs, "norm_scale_shift.yaml");
	char hidden[1024];
	size_t used = 0;
	jitk_norm_args a = norm_args(4, 16384);
	fake_device fake;
	jitk_runtime *rt;
	jitk_kernel *k;
	int i;

	/* static_quant_fp8 with 33 arguments */
	t_copy_tree(dir, NULL, NULL);
	pad_args(quant, "  - { name: n, type: i64 }\n", 29);
	rt = runtime(f, &fake, 90, specs);
	assert_int_equal(jitk_kernel_get(&k, rt, "static_quant_fp8"), JITK_ESPEC);
	assert_string_equal(jitk_error_last()->message,
			    "family static_quant_fp8 has 33 arguments: a kernel takes at most 32 here");
	assert_int_equal(jitk_static_quant_fp8(rt, a.q, a.x, a.input_scale, 64, NULL), JITK_ESPEC);
	assert_int_equal(fake.loads, 0);
	jitk_runtime_free(rt);
	t_rmtree(dir);

	/* ... with 9 launch checks */
	t_copy_tree(dir, NULL, NULL);
	t_edit(quant, "      message: n must not be negative\n",
	       "      message: n must not be negative\n"
	       "    - { check: n >= 0, message: a }\n    - { check: n >= 0, message: b }\n"
	       "    - { check: n >= 0, message: c }\n    - { check: n >= 0, message: d }\n"
	       "    - { check: n >= 0, message: e }\n    - { check: n >= 0, message: f }\n"
	       "    - { check: n >= 0, message: g }\n    - { check: n >= 0, message: h }\n");
	rt = runtime(f, &fake, 90, specs);
	assert_int_equal(jitk_kernel_get(&k, rt, "static_quant_fp8"), JITK_ESPEC);
	assert_string_equal(jitk_error_last()->message,
			    "family static_quant_fp8 has 9 launch checks: a kernel takes at most 8 here");
	assert_int_equal(fake.loads, 0);
	jitk_runtime_free(rt);
	t_rmtree(dir);

	/* the norm family with 30 arguments before its own: the typed entry
	 * points refuse it instead of writing past their value table */
	t_copy_tree(dir, NULL, NULL);
	pad_args(norm, "args:\n", 30);
	rt = runtime(f, &fake, 90, specs);
	a.hidden = 3072;
	assert_int_equal(jitk_fused_norm_scale_shift(rt, &a, NULL), JITK_ESPEC);
	assert_string_equal(jitk_error_last()->message,
			    "family norm_scale_shift has 41 arguments: a kernel takes at most 32 here");
	assert_int_equal(jitk_configure_input_scale(rt, a.input_scale), 0);
	assert_int_equal(jitk_auto_norm_scale_shift_fp8(rt, &a, NULL, NULL), JITK_ESPEC);
	assert_int_equal(fake.loads, 0);
	assert_int_equal(fake.nlaunches, 0);
	jitk_runtime_free(rt);
	t_rmtree(dir);

	/* fused_norm_scale_shift with 39 hidden sizes: the last one runs */
	t_copy_tree(dir, NULL, NULL);
	used = (size_t)snprintf(hidden, sizeof(hidden), "hidden: [3072, 1536, 5120");
	for (i = 1; i <= 35; i++)
		used += (size_t)snprintf(hidden + used, sizeof(hidden) - used, ", %d", 8 * i);
	snprintf(hidden + used, sizeof(hidden) - used, ", 16384] }\n  fused_scale_residual_norm_scale_shift:");
	t_edit(norm, "hidden: [3072, 1536, 5120] }\n  fused_scale_residual_norm_scale_shift:", hidden);
	rt = runtime(f, &fake, 90, specs);
	a.hidden = 16384;
	assert_int_equal(jitk_fused_norm_scale_shift(rt, &a, NULL), 0);
	assert_int_equal(fake.nlaunches, 1);
	assert_int_equal(fake.launches[0].values[P_ROWS], 4);
	a.hidden = 8 * 35;
	assert_int_equal(jitk_fused_norm_scale_shift(rt, &a, NULL), JITK_ESPEC); /* a failed constraint is a spec error, not a gate */
	a.hidden = 4096;
	assert_int_equal(jitk_fused_norm_scale_shift(rt, &a, NULL), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message,
			    "jitk_fused_norm_scale_shift: no instance for hidden=4096 (see jitk list)");
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
	jitk_stats s;
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

	o.compiler.log = rejects_log;
	o.compiler.log_payload = &y;
	o.compiler.log_level = JITK_LOG_INFO;
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
	jitk_stats s;
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
	jitk_norm_args a = norm_args(16, 3072);
	jitk_stats s;
	int i;

	for (i = 0; i < 5; i++)
		assert_int_equal(jitk_fused_norm_scale_shift(rt, &a, NULL), 0);
	assert_int_equal(jitk_stats_get(&s, rt, "fused_norm_scale_shift"), 0);
	assert_int_equal(s.compiles + s.cache_hits, 1);
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
	jitk_norm_args a = norm_args(64, 3072);
	int flags;

	o.version = version;
	o.programmatic = option;
	rt = runtime_with(f, &fake, cc, specs, &o);
	assert_int_equal(jitk_fused_norm_scale_shift(rt, &a, NULL), 0);
	assert_int_equal(jitk_static_quant_fp8(rt, a.q, a.y, a.input_scale, 64 * 3072, NULL),
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
	/* a family that does not declare it */
	t_copy_tree(dir, "  programmatic: true", "  programmatic: false");
	assert_int_equal(programmatic_launch(f, 90, 1, specs, JITK_RUNTIME_OPTIONS_VERSION), 0);
	free(specs);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_sm90_falls_back, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sm90_spec_allows_fused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sm100_and_sm120, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sm80, setup, teardown),
		cmocka_unit_test_setup_teardown(test_guards, setup, teardown),
		cmocka_unit_test_setup_teardown(test_generic_launch_checks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_capture, setup, teardown),
		cmocka_unit_test_setup_teardown(test_driver_rejects, setup, teardown),
		cmocka_unit_test_setup_teardown(test_threads_one_compile, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stats, setup, teardown),
		cmocka_unit_test_setup_teardown(test_programmatic_launch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_input_scales_table_full, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failed_create_closes_the_device, setup, teardown),
		cmocka_unit_test_setup_teardown(test_full_tables_fail_loudly, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rejects_counted_per_build, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
