/* test_compile.c - specialization, translation units, cache keys and the
 * NVRTC compile of every template variant (no GPU needed). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "build/compile.h"

static char *repo_specs(void)
{
	return t_path(t_root(), "specs");
}

static void prepare(jitk_compiler *c, const char *name, const char *arch,
		    jitk_tu *tu, uint8_t key[JITK_HASH_SIZE], jitk_variant *v)
{
	jitk_arch a;
	size_t inst;
	int rc;

	assert_int_equal(jitk__arch_parse(&a, arch), 0);
	assert_int_equal(jitk__spec_find(c->specs, name, &inst), 0);
	rc = jitk__prepare(tu, key, v, c, inst, a);
	if (rc)
		fprintf(stderr, "%s\n", jitk_error_last()->message);
	assert_int_equal(rc, 0);
}

/* Each instance becomes a translation unit whose parameter struct holds
 * every binding of the variant by name, and the expected options and name
 * expression. The values come from the variant (the spec), so retuning
 * the YAML does not break this test. */
static void test_specialization(void **state)
{
	static const struct {
		const char *name, *arch, *expr, *params;
	} cases[] = {
		{ "fused_norm_scale_shift[hidden=3072]", "sm_90",
		  "jitk::norm_scale_shift<fused_norm_scale_shift_hidden_3072>",
		  "static constexpr jitk::Norm norm = jitk::Norm::layer;\n"
		  "  static constexpr bool residual = false;\n"
		  "  static constexpr jitk::Quant quantize = jitk::Quant::none;\n"
		  "  static constexpr int hidden = 3072;\n" },
		{ "fused_norm_scale_shift_fp8[hidden=3072]", "sm_90",
		  "jitk::norm_scale_shift<fused_norm_scale_shift_fp8_hidden_3072>",
		  "static constexpr jitk::Quant quantize = jitk::Quant::fp8_e4m3;\n" },
		{ "fused_norm_scale_shift_fp8[hidden=3072]", "sm_100",
		  "jitk::norm_scale_shift<fused_norm_scale_shift_fp8_hidden_3072>", NULL },
		{ "fused_scale_residual_norm_scale_shift_fp8[hidden=5120]", "sm_100",
		  "jitk::norm_scale_shift<fused_scale_residual_norm_scale_shift_fp8_hidden_5120>",
		  "static constexpr bool residual = true;\n"
		  "  static constexpr jitk::Quant quantize = jitk::Quant::fp8_e4m3;\n"
		  "  static constexpr int hidden = 5120;\n" },
		{ "fused_scale_residual_norm_scale_shift[hidden=1536]", "sm_90",
		  "jitk::norm_scale_shift<fused_scale_residual_norm_scale_shift_hidden_1536>", NULL },
		{ "rms_norm_scale_shift_fp8[hidden=3072]", "sm_90",
		  "jitk::norm_scale_shift<rms_norm_scale_shift_fp8_hidden_3072>",
		  "static constexpr jitk::Norm norm = jitk::Norm::rms;\n" },
		{ "static_quant_fp8", "sm_90", "jitk::static_quant_fp8<static_quant_fp8>", NULL },
		{ "static_quant_fp8", "sm_100", "jitk::static_quant_fp8<static_quant_fp8>", NULL },
	};
	char *specs = repo_specs();
	jitk_compiler *c = t_compiler(specs, NULL, NULL, NULL);
	size_t i, j;

	(void)state;
	for (i = 0; i < JITK_ARRAY_SIZE(cases); i++) {
		jitk_tu tu;
		jitk_variant v;
		uint8_t key[JITK_HASH_SIZE];
		char want[160];

		prepare(c, cases[i].name, cases[i].arch, &tu, key, &v);
		assert_string_equal(tu.name_expr, cases[i].expr);
		snprintf(want, sizeof(want), "--gpu-architecture=%s", cases[i].arch);
		assert_string_equal(tu.options[0], want);
		assert_int_equal(tu.noptions, 6);
		assert_string_equal(tu.options[1], "--std=c++17");
		assert_string_equal(tu.options[2], "--fmad=true");
		assert_string_equal(tu.options[3], "--ftz=false");
		assert_string_equal(tu.options[4], "--prec-div=true");
		assert_string_equal(tu.options[5], "--prec-sqrt=true");
		/* The struct names every binding with its value. */
		snprintf(want, sizeof(want), "struct %s {\n", cases[i].expr + strcspn(cases[i].expr, "<") + 1);
		want[strlen(want) - 4] = '\0';
		strcat(want, " {\n");
		assert_non_null(strstr(tu.source, want));
		if (cases[i].params)
			assert_non_null(strstr(tu.source, cases[i].params));
		for (j = v.set->insts[v.inst].sym->fam->nparams; j < v.nenv; j++) {
			snprintf(want, sizeof(want), " %s = %lld;\n", v.env[j].name,
				 (long long)v.env[j].value);
			assert_non_null(strstr(tu.source, want));
		}
		/* The translation unit is self-contained: templates inlined,
		 * line markers by base name only, and a signature check. */
		assert_non_null(strstr(tu.source, "#line 1 \"common.cuh\""));
		assert_null(strstr(tu.source, "#include \""));
		assert_null(strstr(tu.source, t_root()[0] == '/' ? t_root() : "/specs/"));
		assert_non_null(strstr(tu.source, "static_assert(jitk_check::same<decltype(&"));
		jitk__tu_free(&tu);
	}
	jitk_compiler_free(c);
	free(specs);
}

static void key_of(jitk_compiler *c, const char *name, const char *arch,
		   uint8_t key[JITK_HASH_SIZE])
{
	jitk_tu tu;
	jitk_variant v;

	prepare(c, name, arch, &tu, key, &v);
	jitk__tu_free(&tu);
}

static void test_keys(void **state)
{
	char *specs = repo_specs();
	char *dir = t_tmpdir(), *copy_specs = t_path(dir, "specs");
	char *header = t_path(dir, "templates/common.cuh");
	jitk_compiler *c = t_compiler(specs, NULL, NULL, NULL), *c2, *c3;
	uint8_t a[JITK_HASH_SIZE], b[JITK_HASH_SIZE];
	size_t len;
	char *text;

	(void)state;
	/* Same inputs, same key - also from another compiler object. */
	key_of(c, "fused_norm_scale_shift_fp8[hidden=3072]", "sm_100", a);
	c2 = t_compiler(specs, NULL, NULL, NULL);
	key_of(c2, "fused_norm_scale_shift_fp8[hidden=3072]", "sm_100", b);
	assert_memory_equal(a, b, JITK_HASH_SIZE);
	/* One parameter, the architecture, or the arch-specific suffix
	 * changes the key. */
	key_of(c, "fused_norm_scale_shift[hidden=3072]", "sm_100", b);
	assert_memory_not_equal(a, b, JITK_HASH_SIZE);
	key_of(c, "fused_norm_scale_shift_fp8[hidden=1536]", "sm_100", b);
	assert_memory_not_equal(a, b, JITK_HASH_SIZE);
	key_of(c, "fused_norm_scale_shift_fp8[hidden=3072]", "sm_100a", b);
	assert_memory_not_equal(a, b, JITK_HASH_SIZE);
	key_of(c, "fused_norm_scale_shift[hidden=3072]", "sm_90", a);
	key_of(c, "fused_norm_scale_shift[hidden=3072]", "sm_89", b);
	assert_memory_not_equal(a, b, JITK_HASH_SIZE);

	/* The same tree somewhere else: the same key (relocatable caches). */
	t_copy_tree(dir, NULL, NULL);
	c3 = t_compiler(copy_specs, NULL, NULL, NULL);
	key_of(c, "fused_norm_scale_shift_fp8[hidden=3072]", "sm_100", a);
	key_of(c3, "fused_norm_scale_shift_fp8[hidden=3072]", "sm_100", b);
	assert_memory_equal(a, b, JITK_HASH_SIZE);
	jitk_compiler_free(c3);
	/* Editing a header that the template includes changes the key. */
	text = t_read(header, &len);
	t_writef(header, "%s\n// an edit\n", text);
	free(text);
	c3 = t_compiler(copy_specs, NULL, NULL, NULL);
	key_of(c3, "fused_norm_scale_shift_fp8[hidden=3072]", "sm_100", b);
	assert_memory_not_equal(a, b, JITK_HASH_SIZE);
	jitk_compiler_free(c3);

	jitk_compiler_free(c);
	jitk_compiler_free(c2);
	t_rmtree(dir);
	free(dir);
	free(copy_specs);
	free(header);
	free(specs);
}

/* Every instance compiles for sm_90 and sm_100 with no warning, no stack
 * frame and no spills (ptxas -v), and the lowered name is kept. */
static void test_every_variant_compiles_clean(void **state)
{
	static const char *const archs[] = { "sm_90", "sm_100" };
	char *specs = repo_specs();
	jitk_compiler *c = t_compiler(specs, NULL, NULL, NULL);
	size_t i, a, n = 0;

	(void)state;
	for (i = 0; i < c->specs->ninsts; i++)
		for (a = 0; a < 2; a++) {
			jitk_build b;
			jitk_arch arch;
			int rc;

			jitk__arch_parse(&arch, archs[a]);
			rc = jitk__build(&b, c, i, arch, JITK_BUILD_PTXAS_INFO);
			if (rc)
				fprintf(stderr, "%s\n%s\n", jitk_error_last()->message,
					jitk_error_last()->detail);
			assert_int_equal(rc, 0);
			assert_non_null(b.log);
			if (strstr(b.log, "warning") || !strstr(b.log, "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"))
				fprintf(stderr, "%s %s:\n%s\n", c->specs->insts[i].name, archs[a], b.log);
			assert_null(strstr(b.log, "warning"));
			assert_non_null(strstr(b.log, "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"));
			assert_int_equal(b.entry.nnames, 1);
			assert_true(!strncmp(b.entry.names[0], "_ZN4jitk", 8));
			assert_true(b.entry.size > 1000);
			assert_memory_equal(b.entry.image, "\177ELF", 4);
			jitk__build_free(&b);
			n++;
		}
	assert_int_equal(n, 2 * c->specs->ninsts); /* every instance, none gated there */
	jitk_compiler_free(c);
	free(specs);
}

/* The PTX of the norm and quantizer kernels moves bf16 with 16-byte
 * vector loads (and 32-byte ones on sm_100). */
static void test_vector_loads(void **state)
{
	static const char *const names[] = {
		"fused_norm_scale_shift[hidden=3072]", "fused_scale_residual_norm_scale_shift_fp8[hidden=3072]",
		"fused_norm_scale_shift_fp8[hidden=5120]", "static_quant_fp8",
	};
	char *specs = repo_specs();
	jitk_compiler *c = t_compiler(specs, NULL, NULL, NULL);
	size_t i;

	(void)state;
	for (i = 0; i < JITK_ARRAY_SIZE(names); i++) {
		jitk_build b;
		jitk_arch arch;
		size_t inst;

		assert_int_equal(jitk__spec_find(c->specs, names[i], &inst), 0);
		jitk__arch_parse(&arch, "compute_90");
		if (jitk__build(&b, c, inst, arch, 0) == 0) {
			assert_true(b.entry.is_ptx);
			assert_non_null(strstr(b.entry.image, "ld.global.v4.u32") ?
					strstr(b.entry.image, "ld.global.v4.u32") :
					strstr(b.entry.image, "ld.global.nc.v4.u32"));
			assert_null(strstr(b.entry.image, "ld.global.u16")); /* no scalar bf16 loads */
			jitk__build_free(&b);
		}
		jitk__arch_parse(&arch, "compute_100");
		assert_int_equal(jitk__build(&b, c, inst, arch, 0), 0);
		assert_non_null(strstr(b.entry.image, "ld.global.v8.u32"));
		assert_non_null(strstr(b.entry.image, "st.global.v8.u32") ?
				strstr(b.entry.image, "st.global.v8.u32") :
				strstr(b.entry.image, "st.global.v4.u32"));
		jitk__build_free(&b);
	}
	jitk_compiler_free(c);
	free(specs);
}

/* A template that does not compile: one line naming symbol, variant and
 * architecture; the whole NVRTC log in the detail. A kernel whose
 * parameters differ from the spec's args: caught by the signature check. */
static void test_compile_errors(void **state)
{
	char *dir = t_tmpdir(), *specs = t_path(dir, "specs");
	char *tmpl = t_path(dir, "templates/static_quant_fp8.cuh");
	char *spec = t_path(dir, "specs/static_quant_fp8.yaml");
	char *text, *p;
	jitk_compiler *c;
	jitk_build b;
	jitk_arch arch;
	size_t inst, len;

	(void)state;
	t_copy_tree(dir, NULL, NULL);
	text = t_read(tmpl, &len);
	p = strstr(text, "const float rcp");
	assert_non_null(p);
	memcpy(p, "const flaot rcp", 15);
	t_write(tmpl, text, len);
	free(text);
	c = t_compiler(specs, NULL, NULL, NULL);
	jitk__arch_parse(&arch, "sm_90");
	assert_int_equal(jitk__spec_find(c->specs, "static_quant_fp8", &inst), 0);
	assert_int_equal(jitk__build(&b, c, inst, arch, 0), JITK_ECOMPILE);
	assert_true(!strncmp(jitk_error_last()->message,
			     "compiling static_quant_fp8 () for sm_90 failed: ", 48));
	assert_non_null(strstr(jitk_error_last()->message, "flaot"));
	assert_non_null(strstr(jitk_error_last()->detail, "static_quant_fp8.cuh("));
	jitk_compiler_free(c);

	/* Restore the template; break the spec's argument list instead. */
	t_copy_tree(dir, "n:           { type: i64 }", "n:           { type: i32 }");
	(void)spec;
	c = t_compiler(specs, NULL, NULL, NULL);
	assert_int_equal(jitk__spec_find(c->specs, "static_quant_fp8", &inst), 0);
	assert_int_equal(jitk__build(&b, c, inst, arch, 0), JITK_ECOMPILE);
	assert_non_null(strstr(jitk_error_last()->detail,
			       "do not match the args of spec family static_quant_fp8"));
	jitk_compiler_free(c);
	t_rmtree(dir);
	free(dir);
	free(specs);
	free(tmpl);
	free(spec);
}

/* explain on the architectures the gates distinguish. */
static void test_explain_gates(void **state)
{
	static const struct {
		const char *name, *arch, *first;
		int rc;
		const char *has;
	} cases[] = {
		{ "fused_norm_scale_shift_fp8[hidden=3072]", "sm_80",
		  "fused_norm_scale_shift_fp8[hidden=3072] on sm_80: unavailable", JITK_EARCH,
		  "needs sm_89 or newer" },
		{ "fused_norm_scale_shift_fp8[hidden=3072]", "sm_89",
		  "fused_norm_scale_shift_fp8[hidden=3072] on sm_89: falls back", 0,
		  "fallback: fused_norm_scale_shift[hidden=3072] (step 1 of 2): runs" },
		{ "fused_norm_scale_shift_fp8[hidden=3072]", "sm_90",
		  "fused_norm_scale_shift_fp8[hidden=3072] on sm_90: runs", 0, "    x              in     bf16      [rows, 3072] align 16" },
		{ "fused_norm_scale_shift_fp8[hidden=3072]", "sm_100",
		  "fused_norm_scale_shift_fp8[hidden=3072] on sm_100: runs", 0, "    input_scale    in     f32       [1] align 4 configured: positive_finite" },
		{ "fused_norm_scale_shift_fp8[hidden=3072]", "sm_120",
		  "fused_norm_scale_shift_fp8[hidden=3072] on sm_120: runs", 0, "target:   sm_120" },
		{ "fused_norm_scale_shift[hidden=3072]", "sm_80", "fused_norm_scale_shift[hidden=3072] on sm_80: runs", 0,
		  "    eps            f32    default 1e-06" },
		{ "rms_norm_scale_shift_fp8[hidden=3072]", "sm_90", "rms_norm_scale_shift_fp8[hidden=3072] on sm_90: runs", 0,
		  "kernel:   jitk::norm_scale_shift<rms_norm_scale_shift_fp8_hidden_3072>" },
		{ "static_quant_fp8", "sm_80", "static_quant_fp8 on sm_80: unavailable",
		  JITK_EARCH, "fallback: none" },
		{ "fused_scale_residual_norm_scale_shift_fp8[hidden=5120]", "sm_89",
		  "fused_scale_residual_norm_scale_shift_fp8[hidden=5120] on sm_89: falls back", 0,
		  "fallback: fused_scale_residual_norm_scale_shift[hidden=5120] (step 1 of 2): runs" },
	};
	char *specs = repo_specs();
	jitk_compiler *c = t_compiler(specs, NULL, NULL, NULL);
	size_t i;
	char *text;

	(void)state;
	for (i = 0; i < JITK_ARRAY_SIZE(cases); i++) {
		int rc = jitk_explain(&text, c, cases[i].name, cases[i].arch);

		assert_int_equal(rc, cases[i].rc);
		assert_non_null(text);
		if (strncmp(text, cases[i].first, strlen(cases[i].first)) || !strstr(text, cases[i].has))
			fprintf(stderr, "%s", text);
		assert_true(!strncmp(text, cases[i].first, strlen(cases[i].first)));
		assert_non_null(strstr(text, cases[i].has));
		free(text);
	}
	assert_int_equal(jitk_explain(&text, c, "nope", "sm_90"), JITK_ENOENT);
	/* A bare name explains every instance of the symbol. */
	assert_int_equal(jitk_explain(&text, c, "fused_norm_scale_shift_fp8", "sm_90"), 0);
	assert_non_null(strstr(text, "fused_norm_scale_shift_fp8[hidden=1536] on sm_90: runs"));
	assert_non_null(strstr(text, "fused_norm_scale_shift_fp8[hidden=3072] on sm_90: runs"));
	assert_non_null(strstr(text, "fused_norm_scale_shift_fp8[hidden=5120] on sm_90: runs"));
	free(text);
	assert_int_equal(jitk_explain(&text, c, "static_quant_fp8", "hopper"), JITK_EINVAL);
	jitk_compiler_free(c);
	free(specs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_specialization),
		cmocka_unit_test(test_keys),
		cmocka_unit_test(test_explain_gates),
		cmocka_unit_test(test_compile_errors),
		cmocka_unit_test(test_vector_loads),
		cmocka_unit_test(test_every_variant_compiles_clean),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
