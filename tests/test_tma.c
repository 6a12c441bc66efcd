/* test_tma.c - TMA descriptor arguments (type: tma) on the fake device:
 * what the runtime asks cuTensorMapEncodeTiled for, the checks that name
 * the argument before anything launches, the descriptor passed by value,
 * the call memo that does not encode a hot call again, and the spec's
 * own checks (no GPU). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common.h"
#include "fake_device.h"
#include "gpu/runtime.h"

#define ADDR(i) ((jitk_devptr)(i) << 36)

/* A family whose kernel takes one descriptor of a strided f32 matrix and,
 * for the "two" instance, one of a second tensor that only it has. */
static const char spec_text[] =
	"family: tm\n"
	"template: tm.cuh\n"
	"kernel: tmk\n"
	"params:\n"
	"  two: { type: bool }\n"
	"tuning:\n"
	"  - br: 8\n"
	"    bc: 32\n"
	"args:\n"
	"  x_map: { type: tma, tensor: x, box: [br, bc], swizzle: 128, l2_promotion: 128 }\n"
	"  z_map: { type: tma, tensor: z, box: [4, 4, 8] }\n"
	"  x:     { type: const f32, shape: [rows, cols], strides: [sx, 1], align: 16 }\n"
	"  z:     { type: const i32, shape: [2, 4, 8], when: { two: true } }\n"
	"  y:     { type: f32, shape: [rows, cols], io: out }\n"
	"  rows:  { type: i64 }\n"
	"  cols:  { type: i64 }\n"
	"  sx:    { type: i64 }\n"
	"launch:\n"
	"  grid: cdiv(rows, br)\n"
	"  block: 32\n"
	"symbols:\n"
	"  tm:\n"
	"    params: { two: false }\n"
	"  tm2:\n"
	"    params: { two: true }\n";

static const char template_text[] =
	"template <class P>\n"
	"__global__ void tmk(const __grid_constant__ jitk_tensor_map x_map,\n"
	"                   const __grid_constant__ jitk_tensor_map z_map, const float *x,\n"
	"                   const int *z, float *y, long long rows, long long cols, long long sx)\n"
	"{\n"
	"  if (threadIdx.x == 0 && y) y[0] = x_map.opaque[0] + z_map.opaque[0];\n"
	"}\n";

typedef struct {
	char *dir, *specs, *cache;
} fixture;

static int setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));
	char *p;

	f->dir = t_tmpdir();
	f->specs = t_path(f->dir, "specs");
	f->cache = t_path(f->dir, "cache");
	assert_int_equal(mkdir(f->specs, 0755), 0);
	p = t_path(f->specs, "tm.yaml");
	t_writef(p, "%s", spec_text);
	free(p);
	p = t_path(f->specs, "tm.cuh");
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

/* x: a rows x cols view of a matrix with row stride sx (elements). */
static void matrix(jitk_tensor *t, jitk_devptr p, int64_t rows, int64_t cols, int64_t sx)
{
	const int64_t shape[2] = { rows, cols };
	const jitk_dtype f32 = JITK_DTYPE_F32;

	assert_int_equal(jitk_tensor_contiguous(t, p, f32, 2, shape), 0);
	t->strides[0] = sx;
}

static int call(jitk_runtime *rt, const char *sym, const jitk_tensor *x, const jitk_tensor *y,
		const jitk_tensor *z, jitk_call_mode mode)
{
	jitk_arg args[3];
	size_t n = 0;

	args[n++] = t_tensor_arg("x", x);
	args[n++] = t_tensor_arg("y", y);
	if (z)
		args[n++] = t_tensor_arg("z", z);
	return jitk_call(NULL, rt, sym, mode, args, n, NULL);
}

/* The runtime asks the driver for the tensor as it is: dimensions and box
 * innermost first, the outer strides in bytes, the spec's swizzle and L2
 * promotion, the element type; the kernel gets the 128 bytes it wrote by
 * value (the fake writes the address first), and an instance without the
 * second descriptor gets zeros. */
static void test_descriptor_request(void **state)
{
	fixture *f = *state;
	fake_device fake;
	jitk_runtime *rt;
	jitk_tensor x, y, z;
	const int64_t zshape[3] = { 2, 4, 8 };

	memset(&fake, 0, sizeof(fake));
	fake.cc = 90;
	assert_int_equal(t_fake_runtime(&rt, &fake, f->specs, f->cache, JITK_CAPTURE_ERROR), 0);
	matrix(&x, ADDR(1), 100, 48, 64);
	matrix(&y, ADDR(2), 100, 48, 48);
	assert_int_equal(call(rt, "tm", &x, &y, NULL, JITK_CALL_STRICT), 0);
	assert_int_equal(fake.nlaunches, 1);
	assert_int_equal(fake.tma_encodes, 1);
	assert_int_equal(fake.tma_last.rank, 2);
	assert_int_equal(fake.tma_last.dtype, CU_TENSOR_MAP_DATA_TYPE_FLOAT32);
	assert_int_equal(fake.tma_last.addr, ADDR(1));
	assert_int_equal(fake.tma_last.dims[0], 48);
	assert_int_equal(fake.tma_last.dims[1], 100);
	assert_int_equal(fake.tma_last.strides[0], 64 * 4);
	assert_int_equal(fake.tma_last.box[0], 32);
	assert_int_equal(fake.tma_last.box[1], 8);
	assert_int_equal(fake.tma_last.elem_strides[0], 1);
	assert_int_equal(fake.tma_last.swizzle, CU_TENSOR_MAP_SWIZZLE_128B);
	assert_int_equal(fake.tma_last.l2, CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
	assert_int_equal(fake.tma_last.interleave, CU_TENSOR_MAP_INTERLEAVE_NONE);
	assert_int_equal(fake.tma_last.oob, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
	assert_int_equal(fake.launches[0].values[0], ADDR(1)); /* x_map, by value */
	assert_int_equal(fake.launches[0].values[1], 0);       /* z_map: not in tm */
	assert_int_equal(fake.launches[0].values[2], ADDR(1)); /* x */
	assert_int_equal(fake.launches[0].grid[0], 13);
	/* tm2: both descriptors, a rank-3 i32 one too */
	{
		const jitk_dtype i32 = JITK_DTYPE_I32;

		assert_int_equal(jitk_tensor_contiguous(&z, ADDR(3), i32, 3, zshape), 0);
	}
	assert_int_equal(call(rt, "tm2", &x, &y, &z, JITK_CALL_STRICT), 0);
	assert_int_equal(fake.tma_encodes, 3);
	assert_int_equal(fake.tma_last.rank, 3);
	assert_int_equal(fake.tma_last.dtype, CU_TENSOR_MAP_DATA_TYPE_INT32);
	assert_int_equal(fake.tma_last.dims[0], 8);
	assert_int_equal(fake.tma_last.dims[2], 2);
	assert_int_equal(fake.tma_last.strides[0], 8 * 4);
	assert_int_equal(fake.tma_last.strides[1], 4 * 8 * 4);
	assert_int_equal(fake.tma_last.swizzle, CU_TENSOR_MAP_SWIZZLE_NONE);
	assert_int_equal(fake.launches[1].values[1], ADDR(3));
	jitk_runtime_free(rt);
}

/* A dimension of one element: its stride (anything, as PyTorch and
 * DLPack give it) binds the spec's name only when nothing else does, and
 * the descriptor gets a stride TMA takes (the contiguous one, in 16-byte
 * units) - a one-row matrix with a row stride of 3 or 0 is a tensor TMA
 * can read. */
static void test_one_element_dimension(void **state)
{
	fixture *f = *state;
	fake_device fake;
	jitk_runtime *rt;
	jitk_tensor x, y;
	const int64_t odd[] = { 3, 0, 48 };
	size_t i;

	memset(&fake, 0, sizeof(fake));
	fake.cc = 90;
	assert_int_equal(t_fake_runtime(&rt, &fake, f->specs, f->cache, JITK_CAPTURE_ERROR), 0);
	for (i = 0; i < JITK_ARRAY_SIZE(odd); i++) {
		matrix(&x, ADDR(1), 1, 48, odd[i]);
		matrix(&y, ADDR(2), 1, 48, 48);
		assert_int_equal(call(rt, "tm", &x, &y, NULL, JITK_CALL_STRICT), 0);
		assert_int_equal(fake.tma_last.dims[1], 1);
		assert_int_equal(fake.tma_last.strides[0], 48 * 4); /* 192: a multiple of 16 */
		assert_int_equal(fake.launches[fake.nlaunches - 1].values[7], odd[i]); /* sx */
	}
	/* 5 columns of f32: 20 bytes inside a row, 32 between the one row's */
	matrix(&x, ADDR(1), 1, 5, 7);
	matrix(&y, ADDR(2), 1, 5, 5);
	assert_int_equal(call(rt, "tm", &x, &y, NULL, JITK_CALL_STRICT), 0);
	assert_int_equal(fake.tma_last.strides[0], 32);
	/* two rows: the stride is the tensor's, and must suit TMA */
	matrix(&x, ADDR(1), 2, 5, 7);
	matrix(&y, ADDR(2), 2, 5, 5);
	assert_int_equal(call(rt, "tm", &x, &y, NULL, JITK_CALL_STRICT), JITK_EINVAL);
	assert_non_null(strstr(jitk_error_last()->message, "(28 bytes) a positive multiple of 16"));
	jitk_runtime_free(rt);
}

/* batch: true gives the descriptor one more, outermost dimension of one
 * element with stride 0 and box 1 - what CuTe encodes for an unbatched
 * GEMM operand (bench/gemm_proto/README.md) - and a tensor of four
 * dimensions then leaves no room for it. */
static void test_batch_dimension(void **state)
{
	fixture *f = *state;
	char *specs = t_path(f->dir, "batch_specs"), *yaml, *cuh;
	fake_device fake;
	jitk_runtime *rt;
	jitk_tensor x, y;

	assert_int_equal(mkdir(specs, 0755), 0);
	yaml = t_path(specs, "tb.yaml");
	cuh = t_path(specs, "tm.cuh");
	t_writef(cuh, "%s", template_text);
	t_writef(yaml, "%s", spec_text);
	t_edit(yaml, "family: tm\n", "family: tb\n");
	t_edit(yaml, "box: [br, bc], swizzle: 128, l2_promotion: 128 }",
	       "box: [br, bc], swizzle: 128, l2_promotion: 128, batch: true }");
	memset(&fake, 0, sizeof(fake));
	fake.cc = 90;
	assert_int_equal(t_fake_runtime(&rt, &fake, specs, f->cache, JITK_CAPTURE_ERROR), 0);
	matrix(&x, ADDR(1), 100, 48, 64);
	matrix(&y, ADDR(2), 100, 48, 48);
	assert_int_equal(call(rt, "tm", &x, &y, NULL, JITK_CALL_STRICT), 0);
	assert_int_equal(fake.tma_last.rank, 3);
	assert_int_equal(fake.tma_last.dims[0], 48);
	assert_int_equal(fake.tma_last.dims[1], 100);
	assert_int_equal(fake.tma_last.dims[2], 1);
	assert_int_equal(fake.tma_last.strides[0], 64 * 4);
	assert_int_equal(fake.tma_last.strides[1], 0);
	assert_int_equal(fake.tma_last.box[0], 32);
	assert_int_equal(fake.tma_last.box[1], 8);
	assert_int_equal(fake.tma_last.box[2], 1);
	assert_int_equal(fake.tma_last.elem_strides[2], 1);
	jitk_runtime_free(rt);
	/* z is rank 3 already: with a batch, 4 of TMA's 5; x of rank 5 would not fit */
	t_edit(yaml, "z:     { type: const i32, shape: [2, 4, 8],", "z:     { type: const i32, shape: [1, 1, 2, 4, 8],");
	t_edit(yaml, "z_map: { type: tma, tensor: z, box: [4, 4, 8] }", "z_map: { type: tma, tensor: z, box: [1, 1, 4, 4, 8], batch: true }");
	{
		jitk_compiler_options o = JITK_COMPILER_OPTIONS_INIT;
		jitk_compiler *c = NULL;

		o.specs = specs;
		o.cache_dir = "";
		o.log_level = JITK_LOG_ERROR;
		assert_int_equal(jitk_compiler_new(&c, &o), JITK_ESPEC);
		assert_non_null(strstr(jitk_error_last()->message,
				       "tensor z has 5 dimensions and a batch; TMA takes 1 to 5"));
	}
	free(yaml);
	free(cuh);
	free(specs);
}

/* A hot call (same shapes, strides and addresses) passes the descriptor
 * the memo kept, encoding nothing; a new address is encoded once more. */
static void test_hot_call_does_not_encode(void **state)
{
	fixture *f = *state;
	fake_device fake;
	jitk_runtime *rt;
	jitk_tensor x, y;
	int i;

	memset(&fake, 0, sizeof(fake));
	fake.cc = 90;
	assert_int_equal(t_fake_runtime(&rt, &fake, f->specs, f->cache, JITK_CAPTURE_ERROR), 0);
	matrix(&x, ADDR(1), 64, 32, 32);
	matrix(&y, ADDR(2), 64, 32, 32);
	for (i = 0; i < 10; i++)
		assert_int_equal(call(rt, "tm", &x, &y, NULL, JITK_CALL_STRICT), 0);
	assert_int_equal(fake.nlaunches, 10);
	assert_int_equal(fake.tma_encodes, 1);
	x.data = ADDR(5);
	assert_int_equal(call(rt, "tm", &x, &y, NULL, JITK_CALL_STRICT), 0);
	assert_int_equal(fake.tma_encodes, 2);
	assert_int_equal(fake.launches[10].values[0], ADDR(5));
	assert_int_equal(call(rt, "tm", &x, &y, NULL, JITK_CALL_STRICT), 0);
	assert_int_equal(fake.tma_encodes, 2);
	/* a misaligned address in the memo's path: the full path refuses it */
	x.data = ADDR(5) + 4;
	assert_int_equal(call(rt, "tm", &x, &y, NULL, JITK_CALL_STRICT), JITK_EINVAL);
	assert_int_equal(fake.nlaunches, 12);
	jitk_runtime_free(rt);
}

/* What TMA cannot take is refused before anything launches, naming the
 * descriptor and its tensor; a driver that refuses anyway is named too. */
static void test_checks_name_the_argument(void **state)
{
	static const struct {
		jitk_devptr addr;
		int64_t rows, cols, sx, inner_stride;
		int driver_fails;
		int status;
		const char *want;
	} cases[] = {
		{ ADDR(1) + 8, 64, 32, 32, 1, 0, JITK_EINVAL,
		  "tm: x (0x1000000008) is not 16-byte aligned (nothing launched)" },
		{ ADDR(1), 64, 30, 30, 1, 0, JITK_EINVAL,
		  "tm: x_map: TMA needs the stride of dimension 0 of x (120 bytes) a positive multiple "
		  "of 16 below 2^40 (nothing launched)" },
		{ ADDR(1), 64, 32, (int64_t)1 << 38, 1, 0, JITK_EINVAL,
		  "tm: x_map: TMA needs the stride of dimension 0 of x (1099511627776 bytes) a "
		  "positive multiple of 16 below 2^40 (nothing launched)" },
		{ ADDR(1), 64, 32, 64, 2, 0, JITK_EINVAL,
		  "tm: x: expected strides [64, 1], got [64, 2] (nothing launched)" },
		{ ADDR(1), 64, 32, 32, 1, CUDA_ERROR_INVALID_VALUE, JITK_EINVAL,
		  "tm: x_map: cuTensorMapEncodeTiled refused the descriptor of x: "
		  "CUDA_ERROR_INVALID_VALUE (nothing launched)" },
	};
	fixture *f = *state;
	size_t i;

	for (i = 0; i < JITK_ARRAY_SIZE(cases); i++) {
		fake_device fake;
		jitk_runtime *rt;
		jitk_tensor x, y;

		memset(&fake, 0, sizeof(fake));
		fake.cc = 90;
		fake.tma_fail = cases[i].driver_fails;
		assert_int_equal(t_fake_runtime(&rt, &fake, f->specs, f->cache, JITK_CAPTURE_ERROR), 0);
		matrix(&x, cases[i].addr, cases[i].rows, cases[i].cols, cases[i].sx);
		x.strides[1] = cases[i].inner_stride;
		matrix(&y, ADDR(4096), cases[i].rows, cases[i].cols, cases[i].cols);
		assert_int_equal(call(rt, "tm", &x, &y, NULL, JITK_CALL_STRICT), cases[i].status);
		if (strcmp(jitk_error_last()->message, cases[i].want))
			fprintf(stderr, "case %zu: %s\n", i, jitk_error_last()->message);
		assert_string_equal(jitk_error_last()->message, cases[i].want);
		assert_int_equal(fake.nlaunches, 0);
		jitk_runtime_free(rt);
	}
}

/* The caller gives the tensor, never the descriptor; an empty tensor
 * launches nothing and encodes nothing. */
static void test_misuse_and_empty(void **state)
{
	fixture *f = *state;
	fake_device fake;
	jitk_runtime *rt;
	jitk_tensor x, y;
	jitk_arg args[3];

	memset(&fake, 0, sizeof(fake));
	fake.cc = 90;
	assert_int_equal(t_fake_runtime(&rt, &fake, f->specs, f->cache, JITK_CAPTURE_ERROR), 0);
	matrix(&x, ADDR(1), 64, 32, 32);
	matrix(&y, ADDR(2), 64, 32, 32);
	args[0] = t_tensor_arg("x", &x);
	args[1] = t_tensor_arg("y", &y);
	args[2] = t_tensor_arg("x_map", &x);
	assert_int_equal(jitk_call(NULL, rt, "tm", JITK_CALL_STRICT, args, 3, NULL), JITK_EINVAL);
	assert_string_equal(jitk_error_last()->message,
			    "tm: x_map is the TMA descriptor jitk makes from x: give the tensor only "
			    "(nothing launched)");
	matrix(&x, ADDR(1), 0, 32, 32);
	matrix(&y, ADDR(2), 0, 32, 32);
	/* (no row tells the row stride: it is given) */
	args[2].name = "sx";
	args[2].type = JITK_ARG_I64;
	args[2].v.i64 = 32;
	assert_int_equal(jitk_call(NULL, rt, "tm", JITK_CALL_STRICT, args, 3, NULL), 0);
	assert_int_equal(fake.nlaunches, 0);
	assert_int_equal(fake.tma_encodes, 0);
	jitk_runtime_free(rt);
}

/* The spec's descriptors are checked without a GPU: at load (what it
 * names, its rank) and for every variant (the box, swizzle, interleave
 * and L2 values TMA takes), at the line of the expression. */
static void test_spec_checks(void **state)
{
	static const struct {
		const char *from, *to, *want;
	} cases[] = {
		{ "tensor: x, box: [br, bc]", "tensor: q, box: [br, bc]",
		  "tm.yaml:10:31: error: 'q' is not a tensor argument of tm" },
		{ "tensor: x, box: [br, bc]", "tensor: rows, box: [br, bc]",
		  "tm.yaml:10:31: error: 'rows' is not a tensor argument of tm" },
		{ "box: [br, bc]", "box: [bc]", "tm.yaml:10:39: error: box has 1 dimensions, tensor x 2" },
		{ "box: [br, bc]", "box: [br, bc], shape: [1]",
		  "error: 'shape' does not apply to a TMA descriptor" },
		{ "z_map: { type: tma, tensor: z, box: [4, 4, 8] }", "z_map: { type: tma, tensor: z }",
		  "error: a TMA descriptor needs tensor" },
		{ "  - br: 8\n", "  - br: 300\n",
		  "tm.yaml:10:40: error: box dimension 'br' of x_map is 300; TMA takes 1 to 256 (tm on sm_90)" },
		{ "swizzle: 128", "swizzle: 48",
		  "tm.yaml:10:58: error: swizzle '48' is 48; it must be 0, 32, 64 or 128 (bytes)" },
		{ "    bc: 32\n", "    bc: 6\n",
		  "tm.yaml:10:44: error: the inner box dimension of x_map is 24 bytes; TMA moves "
		  "multiples of 16 (tm on sm_90)" },
		{ "    bc: 32\n", "    bc: 64\n",
		  "tm.yaml:10:44: error: the inner box dimension of x_map is 256 bytes, more than its "
		  "128-byte swizzle span (tm on sm_90)" },
		{ "l2_promotion: 128", "l2_promotion: 100",
		  "error: l2_promotion '100' is 100; it must be 0, 64, 128 or 256 (bytes)" },
		{ "box: [4, 4, 8] }", "box: [4, 4, 8], when: { two: true } }",
		  "error: a TMA descriptor is there when its tensor is: give the 'when' to z" },
		{ "  rows:  { type: i64 }", "  rows:  { type: i64, box: [1] }",
		  "error: 'box' applies to TMA descriptors only (type: tma)" },
	};
	fixture *f = *state;
	size_t i;

	for (i = 0; i < JITK_ARRAY_SIZE(cases); i++) {
		char *dir = t_tmpdir(), *specs = t_path(dir, "specs"), *p, cmd[2048], *explain = NULL;
		jitk_compiler_options o = JITK_COMPILER_OPTIONS_INIT;
		jitk_compiler *c = NULL;
		int rc;

		snprintf(cmd, sizeof(cmd), "cp -r '%s' '%s'", f->specs, specs);
		assert_int_equal(system(cmd), 0);
		p = t_path(specs, "tm.yaml");
		t_edit(p, cases[i].from, cases[i].to);
		free(p);
		o.specs = specs;
		o.cache_dir = "";
		o.log_level = JITK_LOG_ERROR;
		rc = jitk_compiler_new(&c, &o);
		if (!rc) {
			rc = jitk_explain(&explain, c, "tm", "sm_90");
			jitk_free(explain);
		}
		assert_int_not_equal(rc, 0);
		if (!strstr(jitk_error_last()->message, cases[i].want))
			fprintf(stderr, "case %zu: %s\nwanted: %s\n", i, jitk_error_last()->message,
				cases[i].want);
		assert_non_null(strstr(jitk_error_last()->message, cases[i].want));
		jitk_compiler_free(c);
		t_rmtree(dir);
		free(dir);
		free(specs);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_descriptor_request),
		cmocka_unit_test(test_one_element_dimension),
		cmocka_unit_test(test_batch_dimension),
		cmocka_unit_test(test_hot_call_does_not_encode),
		cmocka_unit_test(test_checks_name_the_argument),
		cmocka_unit_test(test_misuse_and_empty),
		cmocka_unit_test(test_spec_checks),
	};

	return T_RUN_TESTS(tests, setup, teardown);
}
