/* test_built.c - kernels whose one parameter a builder makes (a spec's
 * launch.builder) on the fake device: the block the builder writes is
 * learned once per set of scalars, each call's addresses and TMA
 * descriptors are patched into it, the launch takes the builder's
 * geometry (cluster and shared memory too), and a builder whose block
 * depends on an address in another way is refused before any launch. The
 * fake device plays the builder (what a CUTLASS Params builder does: copy
 * the arguments into a struct, an address plus an offset, padding that
 * differs run to run). No GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common.h"
#include "fake_device.h"
#include "gpu/runtime.h"

#define ADDR(i) ((jitk_devptr)(i) << 36)

static const char spec_text[] =
	"family: bt\n"
	"template: bt.cuh\n"
	"kernel: btk\n"
	"params: {}\n"
	"tuning:\n"
	"  - tile: 128\n"
	"args:\n"
	"  x_map: { type: tma, tensor: x, box: [tile, 16] }\n"
	"  x:     { type: const f32, shape: [m, 16], align: 16 }\n"
	"  y:     { type: f32, shape: [m, 16], io: out }\n"
	"  bias:  { type: const f32, shape: [16], nullable: true }\n"
	"  m:     { type: i64 }\n"
	"launch:\n"
	"  grid: cdiv(m, tile)\n"
	"  block: 384\n"
	"  builder: btb\n"
	"symbols:\n"
	"  bt: { params: {} }\n";

/* What the builder would do on a GPU; the fake device plays it. */
static const char template_text[] =
	"template <class P> struct blk { long long m; };\n"
	"template <class P> __global__ void btk(const __grid_constant__ blk<P> b) {}\n"
	"template <class P>\n"
	"__global__ void btb(jitk_params_out *out, const __grid_constant__ jitk_tensor_map x_map,\n"
	"                    const float *x, float *y, const float *bias, long long m)\n"
	"{\n"
	"  out->magic = JITK_PARAMS_MAGIC;\n"
	"  out->bytes = sizeof(blk<P>);\n"
	"}\n";

typedef struct {
	char *dir, *specs, *cache;
	int mode; /* what the fake builder does wrong: 0 nothing, 1 shift an
		   * address, 2 another block size */
} fixture;

/* The block: m at 0, x's descriptor at 64, x at 192, y + 64 at 200, bias
 * at 208, padding that differs in every run at 216. */
static void fake_builder(void *payload, void **args, unsigned run, unsigned char *out,
			 size_t size)
{
	const fixture *f = payload;
	uint32_t h[16] = { 0x6a69746bu, 256, 0, 1, 1, 384, 1, 1, 2, 1, 1, 200000 };
	uint64_t x, y, bias, pad = run, bad;
	int64_t m;
	unsigned char *p = out + 64;

	(void)size;
	memcpy(&x, args[2], 8);
	memcpy(&y, args[3], 8);
	memcpy(&bias, args[4], 8);
	memcpy(&m, args[5], 8);
	h[2] = (uint32_t)((m + 127) / 128);
	if (f->mode == 2)
		h[5] = 256;
	memcpy(&h[12], out + 48, 4); /* the sm_count jitk gave */
	memcpy(out, h, sizeof(h));
	memcpy(p, &m, 8);
	memcpy(p + 64, args[1], 128);
	memcpy(p + 192, &x, 8);
	y += 64;
	memcpy(p + 200, &y, 8);
	memcpy(p + 208, &bias, 8);
	memcpy(p + 216, &pad, 8);
	if (f->mode == 1) {
		bad = x >> 4; /* what a descriptor does with an address */
		memcpy(p + 224, &bad, 8);
	}
}

static int setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));
	char *p;

	f->dir = t_tmpdir();
	f->specs = t_path(f->dir, "specs");
	f->cache = t_path(f->dir, "cache");
	assert_int_equal(mkdir(f->specs, 0755), 0);
	p = t_path(f->specs, "bt.yaml");
	t_writef(p, "%s", spec_text);
	free(p);
	p = t_path(f->specs, "bt.cuh");
	t_writef(p, "%s", template_text);
	free(p);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fixture *f = *state;

	t_rmtree(f->dir);
	free(f->dir);
	free(f->specs);
	free(f->cache);
	free(f);
	return 0;
}

static int call(jitk_runtime *rt, int64_t m, jitk_devptr x, jitk_devptr y, jitk_devptr bias)
{
	const int64_t shape[2] = { m, 16 }, bshape[1] = { 16 };
	const jitk_dtype f32 = JITK_DTYPE_F32;
	jitk_tensor tx, ty, tb;
	jitk_arg args[3];

	assert_int_equal(jitk_tensor_contiguous(&tx, x, f32, 2, shape), 0);
	assert_int_equal(jitk_tensor_contiguous(&ty, y, f32, 2, shape), 0);
	assert_int_equal(jitk_tensor_contiguous(&tb, bias, f32, 1, bshape), 0);
	args[0] = t_tensor_arg("x", &tx);
	args[1] = t_tensor_arg("y", &ty);
	args[2] = t_tensor_arg("bias", &tb);
	return jitk_call(NULL, rt, "bt", JITK_CALL_STRICT, args, bias ? 3 : 2, NULL);
}

static uint64_t word(const fake_launch *l, size_t at)
{
	uint64_t v;

	memcpy(&v, l->built + at, 8);
	return v;
}

static void start(fixture *f, fake_device *fake, jitk_runtime **rt)
{
	memset(fake, 0, sizeof(*fake));
	fake->cc = 90;
	fake->sm_count = 132;
	fake->builder = fake_builder;
	fake->builder_payload = f;
	if (t_fake_runtime(rt, fake, f->specs, f->cache, JITK_CAPTURE_ERROR))
		fail_msg("%s", jitk_error_last()->message);
}

/* One learning per shape: calls with other addresses patch the same
 * block; a new m, or a NULL bias, runs the builder again. */
static void test_block_is_learned_once_and_patched(void **state)
{
	fixture *f = *state;
	fake_device fake;
	jitk_runtime *rt;
	const fake_launch *l;

	start(f, &fake, &rt);
	assert_int_equal(call(rt, 300, ADDR(1), ADDR(2), ADDR(3)), 0);
	assert_int_equal(fake.builder_runs, 1);
	assert_int_equal(fake.nlaunches, 1);
	l = &fake.launches[0];
	assert_int_equal(l->built_bytes, 256);
	assert_int_equal(l->nparams, 1);
	assert_int_equal(word(l, 0), 300);
	assert_int_equal(word(l, 64), ADDR(1)); /* the fake's descriptor: x's address first */
	assert_int_equal(word(l, 192), ADDR(1));
	assert_int_equal(word(l, 200), ADDR(2) + 64);
	assert_int_equal(word(l, 208), ADDR(3));
	assert_int_equal(l->grid[0], 3);
	assert_int_equal(l->block[0], 384);
	assert_int_equal(l->cluster[0], 2);
	assert_int_equal(l->cluster[1], 1);
	assert_int_equal(l->smem, 200000);
	assert_int_equal(fake.shared_set, 200000);

	assert_int_equal(call(rt, 300, ADDR(4), ADDR(5), ADDR(6)), 0);
	assert_int_equal(fake.builder_runs, 1);
	l = &fake.launches[1];
	assert_int_equal(word(l, 64), ADDR(4));
	assert_int_equal(word(l, 192), ADDR(4));
	assert_int_equal(word(l, 200), ADDR(5) + 64);
	assert_int_equal(word(l, 208), ADDR(6));

	assert_int_equal(call(rt, 1000, ADDR(4), ADDR(5), ADDR(6)), 0);
	assert_int_equal(fake.builder_runs, 2);
	assert_int_equal(word(&fake.launches[2], 0), 1000);
	assert_int_equal(fake.launches[2].grid[0], 8);

	assert_int_equal(call(rt, 300, ADDR(7), ADDR(8), 0), 0);
	assert_int_equal(fake.builder_runs, 3);
	assert_int_equal(word(&fake.launches[3], 192), ADDR(7));
	assert_int_equal(word(&fake.launches[3], 208), 0);
	jitk_runtime_free(rt);
}

/* No rows: nothing to launch, and no builder run either. */
static void test_empty_problem_runs_nothing(void **state)
{
	fixture *f = *state;
	fake_device fake;
	jitk_runtime *rt;

	start(f, &fake, &rt);
	assert_int_equal(call(rt, 0, ADDR(1), ADDR(2), ADDR(3)), 0);
	assert_int_equal(fake.builder_runs, 0);
	assert_int_equal(fake.nlaunches, 0);
	jitk_runtime_free(rt);
}

/* A block with a word that follows an address in no patchable way, or a
 * builder whose block size is not the spec's: an error naming the
 * instance and the builder, nothing launched. */
static void test_unpatchable_block_is_refused(void **state)
{
	fixture *f = *state;
	fake_device fake;
	jitk_runtime *rt;

	f->mode = 1;
	start(f, &fake, &rt);
	assert_int_equal(call(rt, 300, ADDR(1), ADDR(2), ADDR(3)), JITK_EINVAL);
	assert_non_null(strstr(jitk_error_last()->message, "btb"));
	assert_non_null(strstr(jitk_error_last()->message, "byte 224"));
	assert_int_equal(fake.nlaunches, 0);
	jitk_runtime_free(rt);

	f->mode = 2;
	start(f, &fake, &rt);
	assert_int_equal(call(rt, 300, ADDR(1), ADDR(2), ADDR(3)), JITK_ESPEC);
	assert_non_null(strstr(jitk_error_last()->message, "launch.block 384"));
	assert_int_equal(fake.nlaunches, 0);
	jitk_runtime_free(rt);

	f->mode = 0;
	start(f, &fake, &rt);
	fake.builder_fail = CUDA_ERROR_INVALID_VALUE;
	assert_int_equal(call(rt, 300, ADDR(1), ADDR(2), ADDR(3)), JITK_EDRIVER);
	assert_non_null(strstr(jitk_error_last()->message, "parameter builder btb"));
	assert_int_equal(fake.nlaunches, 0);
	jitk_runtime_free(rt);
}

/* The analysis alone: a block without the magic, one of too many bytes,
 * and a builder's refusal. */
static void test_analyze_refuses_what_no_builder_made(void **state)
{
	unsigned char runs[3][4096 + 64];
	uint64_t marks[2][JITK_MAX_SPEC_ARGS];
	jitk_built_block b;
	char why[256];
	uint32_t h[2] = { 0x6a69746bu, 5000 };

	(void)state;
	memset(runs, 0, sizeof(runs));
	memset(marks, 0, sizeof(marks));
	assert_int_equal(jitk__built_analyze(&b, &runs[0][0], sizeof(runs[0]),
					     (const uint64_t(*)[JITK_MAX_SPEC_ARGS])marks, 0, NULL,
					     NULL, 0, why, sizeof(why)),
			 JITK_EINVAL);
	assert_non_null(strstr(why, "magic"));
	for (int r = 0; r < 3; r++)
		memcpy(runs[r], h, sizeof(h));
	assert_int_equal(jitk__built_analyze(&b, &runs[0][0], sizeof(runs[0]),
					     (const uint64_t(*)[JITK_MAX_SPEC_ARGS])marks, 0, NULL,
					     NULL, 0, why, sizeof(why)),
			 JITK_EINVAL);
	assert_non_null(strstr(why, "5000 bytes"));
	/* a builder that refused: its reason, printable characters only */
	h[0] = 0x6a69746eu;
	for (int r = 0; r < 3; r++) {
		memcpy(runs[r], h, sizeof(h));
		memcpy(runs[r] + 64, "no room\n\x01" "for this", 18);
	}
	assert_int_equal(jitk__built_analyze(&b, &runs[0][0], sizeof(runs[0]),
					     (const uint64_t(*)[JITK_MAX_SPEC_ARGS])marks, 0, NULL,
					     NULL, 0, why, sizeof(why)),
			 JITK_EINVAL);
	assert_string_equal(why, "it refused these arguments: no room");
}

/* A size class (size_of): an int parameter whose instance is the one with
 * the smallest value that holds the call's size, else the largest - how
 * a GEMM takes one tile for small M and another for large. */
static void test_size_class_picks_the_instance(void **state)
{
	fixture *f = *state;
	char *specs = t_path(f->dir, "sc_specs"), *p;
	static const int64_t rows[] = { 1, 100, 512, 513, 4096, 100000 };
	static const char *const want[] = { "sc[mclass=512]", "sc[mclass=512]", "sc[mclass=512]",
					     "sc[mclass=4096]", "sc[mclass=4096]", "sc[mclass=4096]" };
	fake_device fake;
	jitk_runtime *rt;
	size_t i;

	assert_int_equal(mkdir(specs, 0755), 0);
	p = t_path(specs, "sc.yaml");
	t_writef(p, "family: sc\ntemplate: sc.cuh\nkernel: sck\n"
		    "params:\n  mclass: { type: int, values: [512, 4096], size_of: m }\n"
		    "args:\n  x: { type: f32, shape: [m, 16], io: out }\n  m: { type: i64 }\n"
		    "launch:\n  grid: m\n  block: 32\n"
		    "symbols:\n  sc: { params: { mclass: [512, 4096] } }\n");
	free(p);
	p = t_path(specs, "sc.cuh");
	t_writef(p, "template <class P> __global__ void sck(float *x, long long m) {}\n");
	free(p);
	memset(&fake, 0, sizeof(fake));
	fake.cc = 90;
	if (t_fake_runtime(&rt, &fake, specs, f->cache, JITK_CAPTURE_ERROR))
		fail_msg("%s", jitk_error_last()->message);
	for (i = 0; i < JITK_ARRAY_SIZE(rows); i++) {
		const int64_t shape[2] = { rows[i], 16 };
		const jitk_dtype f32 = JITK_DTYPE_F32;
		jitk_call_info info = JITK_CALL_INFO_INIT;
		jitk_tensor x;
		jitk_arg a;

		assert_int_equal(jitk_tensor_contiguous(&x, ADDR(1), f32, 2, shape), 0);
		a = t_tensor_arg("x", &x);
		if (jitk_call(&info, rt, "sc", JITK_CALL_STRICT, &a, 1, NULL))
			fail_msg("%s", jitk_error_last()->message);
		assert_non_null(info.instance);
		assert_string_equal(info.instance, want[i]);
	}
	jitk_runtime_free(rt);
	free(specs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_block_is_learned_once_and_patched, setup, teardown),
		cmocka_unit_test_setup_teardown(test_empty_problem_runs_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unpatchable_block_is_refused, setup, teardown),
		cmocka_unit_test(test_analyze_refuses_what_no_builder_made),
		cmocka_unit_test_setup_teardown(test_size_class_picks_the_instance, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
