/* gemm_checks.c - the FP8 GEMM family's launch checks on the fake
 * device (no GPU), over a cache tests/gemm.sh precompiled (one NVRTC
 * compile of a minute per architecture; $JITK_TEST_GEMM_CACHE), as an
 * sm_90 device or, with JITK_TEST_GEMM_CC=100, an sm_100 one (the
 * sm_100a instance: never run on a GPU): bad shapes, strides and dtypes
 * are refused naming the argument before the builder runs or anything
 * launches; M = 0 launches nothing; a good call runs the builder once and
 * launches the kernel with the block it made. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "fake_device.h"
#include "gpu/runtime.h"

#define ADDR(i) ((jitk_devptr)(i) << 36)

static const char *cache;
static int cc = 90;

/* the spec's block_threads: sm_90's cooperative kernel, sm_100's 1-SM one */
static unsigned block_threads(void)
{
	return cc >= 100 ? 256 : 384;
}

/* What the builder writes on a GPU, reduced to what the runtime reads:
 * a 1 KiB block with a's address in it and CUTLASS's geometry. */
static void fake_builder(void *payload, void **args, unsigned run, unsigned char *out,
			 size_t size)
{
	uint32_t h[12] = { 0x6a69746bu, 1024, 132, 1, 1, block_threads(), 1, 1, 1, 1, 1, 200000 };
	uint64_t a;

	(void)payload, (void)run, (void)size;
	memcpy(out, h, sizeof(h));
	memcpy(&a, args[6], 8); /* after out, a_map, b_map, out_map, q_map, c_map */
	memcpy(out + 64 + 256, &a, 8);
}

typedef struct {
	fake_device fake;
	jitk_runtime *rt;
	jitk_tensor a, b, as, bs, bias, out;
} fixture;

static int setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));
	jitk_runtime_options o = JITK_RUNTIME_OPTIONS_INIT;
	jitk_compiler_options co;
	char *specs = t_path(t_root(), "specs");

	f->fake.cc = cc;
	f->fake.sm_count = 132;
	f->fake.builder = fake_builder;
	jitk_compiler_options_init(&co, JITK_COMPILER_OPTIONS_VERSION);
	co.no_compile = 1; /* only what gemm.sh precompiled */
	o.compiler = &co;
	if (t_fake_runtime_with(&f->rt, &f->fake, specs, cache, &o))
		fail_msg("%s", jitk_error_last()->message);
	free(specs);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fixture *f = *state;

	jitk_runtime_free(f->rt);
	free(f);
	return 0;
}

static void tensor(jitk_tensor *t, jitk_devptr p, jitk_dtype dt, int64_t d0, int64_t d1)
{
	const int64_t shape[2] = { d0, d1 };

	assert_int_equal(jitk_tensor_contiguous(t, p, dt, d1 ? 2 : 1, shape), 0);
}

/* gemm_fp8_bias on M x N x K, with a well-formed set of tensors. */
static void problem(fixture *f, int64_t m, int64_t n, int64_t k)
{
	const jitk_dtype e4m3 = { 10, 8, 1 }, bf16 = JITK_DTYPE_BF16,
			 f32 = JITK_DTYPE_F32;

	tensor(&f->a, ADDR(1), e4m3, m, k);
	tensor(&f->b, ADDR(2), e4m3, n, k);
	tensor(&f->as, ADDR(3), f32, 1, 0);
	tensor(&f->bs, ADDR(4), f32, 1, 0);
	tensor(&f->bias, ADDR(5), bf16, n, 0);
	tensor(&f->out, ADDR(6), bf16, m, n);
}

static int call_as(fixture *f, const char *selector)
{
	jitk_arg args[6] = { t_tensor_arg("a", &f->a), t_tensor_arg("b", &f->b), t_tensor_arg("a_scale", &f->as),
			     t_tensor_arg("b_scale", &f->bs), t_tensor_arg("bias", &f->bias), t_tensor_arg("out", &f->out) };

	return jitk_call(NULL, f->rt, selector, JITK_CALL_STRICT, args, 6, NULL);
}

static int call(fixture *f)
{
	return call_as(f, "gemm_fp8_bias");
}

static void refused(fixture *f, const char *word)
{
	int before = f->fake.nlaunches, runs = f->fake.builder_runs;

	assert_int_equal(call(f), JITK_EINVAL);
	if (!strstr(jitk_error_last()->message, word))
		fail_msg("'%s' does not name '%s'", jitk_error_last()->message, word);
	assert_int_equal(f->fake.nlaunches, before);
	assert_int_equal(f->fake.builder_runs, runs);
}

static void test_good_call_launches_the_built_block(void **state)
{
	fixture *f = *state;
	uint64_t a;

	problem(f, 4096, 3072, 3072);
	if (call(f))
		fail_msg("%s", jitk_error_last()->message);
	assert_int_equal(f->fake.builder_runs, 1);
	assert_int_equal(f->fake.nlaunches, 1);
	assert_int_equal(f->fake.launches[0].built_bytes, 1024);
	assert_int_equal(f->fake.launches[0].block[0], block_threads());
	assert_int_equal(f->fake.launches[0].grid[0], 132);
	assert_int_equal(f->fake.launches[0].smem, 200000);
	memcpy(&a, f->fake.launches[0].built + 256, 8);
	assert_int_equal(a, ADDR(1));
	/* M = 0: nothing launched, nothing built (M = 0 is in the small
	 * class, which gemm.sh did not precompile: the instance named) */
	problem(f, 0, 3072, 3072);
	assert_int_equal(call_as(f, "gemm_fp8_bias[mclass=65536]"), 0);
	assert_int_equal(f->fake.nlaunches, 1);
	assert_int_equal(f->fake.builder_runs, 1);
}

static void test_bad_input_is_refused_before_launch(void **state)
{
	fixture *f = *state;

	problem(f, 4096, 3072, 3064);
	refused(f, "of 16");
	problem(f, 4096, 3000, 3072);
	refused(f, "of 16");
	/* B not K-major: its transpose's strides */
	problem(f, 4096, 3072, 3072);
	f->b.strides[0] = 1;
	f->b.strides[1] = 3072;
	refused(f, "b");
	/* a in bf16 */
	problem(f, 4096, 3072, 3072);
	f->a.dtype = (jitk_dtype)JITK_DTYPE_BF16;
	refused(f, "a");
	/* K of a and b differ */
	problem(f, 4096, 3072, 3072);
	tensor(&f->b, ADDR(2), (jitk_dtype){ 10, 8, 1 }, 3072, 1024);
	refused(f, "b: expected shape");
	/* an address TMA cannot take */
	problem(f, 4096, 3072, 3072);
	f->a.data += 8;
	refused(f, "a");
}

/* The size classes: M = 512 takes an mclass=512 instance of its N class
 * (sm_90: 128 x 96 tiles over a 1 x 2 cluster up to N = 9216, 128 x 192
 * over 2 x 1 beyond; sm_100: 128 x 128), which gemm.sh did not
 * precompile: the call says which it needed. */
static void test_small_m_takes_its_own_instance(void **state)
{
	static const struct {
		int64_t n;
		const char *instance;
	} want[] = {
		{ 3072, "mclass=512,nclass=3072" },
		{ 9216, "mclass=512,nclass=9216" },
		{ 12288, "mclass=512,nclass=65536" },
	};
	fixture *f = *state;
	size_t i;

	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		problem(f, 512, want[i].n, 3072);
		assert_int_not_equal(call(f), 0);
		if (!strstr(jitk_error_last()->message, want[i].instance))
			fail_msg("N = %lld: '%s' does not name the %s instance", (long long)want[i].n,
				 jitk_error_last()->message, want[i].instance);
	}
	assert_int_equal(f->fake.nlaunches, 0);
}

/* M > 512 with N > 9216: the other N class, which tunes alike there - the
 * translation unit gemm.sh precompiled (for N = 12288's class) serves N =
 * 3072 too (test_good_call...) and N = 12288 itself. */
static void test_wide_n_shares_the_big_m_kernel(void **state)
{
	fixture *f = *state;

	problem(f, 4096, 12288, 3072);
	if (call(f))
		fail_msg("%s", jitk_error_last()->message);
	assert_int_equal(f->fake.nlaunches, 1);
	assert_int_equal(f->fake.launches[0].block[0], block_threads());
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_good_call_launches_the_built_block, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_input_is_refused_before_launch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_small_m_takes_its_own_instance, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wide_n_shares_the_big_m_kernel, setup, teardown),
	};

	const char *arch = getenv("JITK_TEST_GEMM_CC");

	cache = getenv("JITK_TEST_GEMM_CACHE");
	if (arch && *arch)
		cc = atoi(arch);
	if (cc != 90 && cc != 100) {
		printf("JITK_TEST_GEMM_CC=%s: 90 or 100\n", arch);
		return 1;
	}
	if (!cache || !*cache) {
		printf("SKIP: JITK_TEST_GEMM_CACHE is not set (tests/gemm.sh sets it after its precompile)\n");
		return 77;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
