/* test_compile.c - specialization, translation units, cache keys and the
 * NVRTC compile of every template variant (no GPU needed). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "compile/compile.h"

static char *build_dir; /* where this test binary's build is: BUILD/tests/.. */

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
		assert_int_equal(tu.noptions, 9);
		assert_string_equal(tu.options[1], "--std=c++17");
		assert_string_equal(tu.options[2], "--fmad=true");
		assert_string_equal(tu.options[3], "--ftz=false");
		assert_string_equal(tu.options[4], "--prec-div=true");
		assert_string_equal(tu.options[5], "--prec-sqrt=true");
		/* NVRTC searches no directory, not even the working one. */
		assert_string_equal(tu.options[6], "--no-source-include");
		/* NVRTC 12.9+: its own cache never serves or stores anything;
		 * names it would make up are fixed (the same bytes every time). */
		assert_string_equal(tu.options[7], "--no-cache");
		assert_string_equal(tu.options[8], "--frandom-seed=jitk");
		/* no header packages: no search directory, nothing more in the key */
		assert_int_equal(tu.nincludes, 0);
		assert_null(tu.packages);
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

/* A family NAME with two size classes (mclass by m, nclass by n: the
 * values NVALS, "64, 1024" when NULL) and the tuning entries TUNING, its
 * template using P::threads. */
static void size_class_family_n(const char *dir, const char *name, const char *nvals,
				const char *tuning)
{
	char *p, file[64];

	snprintf(file, sizeof(file), "%s.yaml", name);
	p = t_path(dir, file);
	t_writef(p, "family: %s\ntemplate: %s.cuh\nkernel: %sk\n"
		    "params:\n"
		    "  mclass: { type: int, values: [512, 4096], size_of: m }\n"
		    "  nclass: { type: int, values: [%s], size_of: n }\n"
		    "tuning:\n%s"
		    "args:\n  x: { type: f32, shape: [m, n], io: out }\n  m: { type: i64 }\n"
		    "  n: { type: i64 }\n"
		    "launch:\n  grid: m\n  block: threads\n"
		    "symbols:\n  %s: { params: { mclass: [512, 4096], nclass: [%s] } }\n",
		 name, name, name, nvals ? nvals : "64, 1024", tuning, name, nvals ? nvals : "64, 1024");
	free(p);
	snprintf(file, sizeof(file), "%s.cuh", name);
	p = t_path(dir, file);
	t_writef(p, "template <class P> __global__ void %sk(float *x, long long m, long long n)\n"
		    "{ if (threadIdx.x < P::threads && blockIdx.x < m) x[blockIdx.x * n] = 1.0f; }\n",
		 name);
	free(p);
}

static void size_class_family(const char *dir, const char *name, const char *tuning)
{
	size_class_family_n(dir, name, NULL, tuning);
}

/* The name expression of NAME on ARCH holds WANT. */
static void name_has(jitk_compiler *c, const char *name, const char *arch, const char *want)
{
	uint8_t key[JITK_HASH_SIZE];
	jitk_variant v;
	jitk_tu tu;

	prepare(c, name, arch, &tu, key, &v);
	if (!strstr(tu.name_expr, want))
		fail_msg("%s on %s: kernel %s, not %s", name, arch, tu.name_expr, want);
	assert_null(strstr(tu.source, "constexpr int mclass")); /* never a member */
	assert_null(strstr(tu.source, "constexpr int nclass"));
	jitk__tu_free(&tu);
}

/* Instances X and Y on ARCH are one translation unit (SAME) or two. */
static void one_unit(jitk_compiler *c, const char *x, const char *y, const char *arch, int same)
{
	uint8_t a[JITK_HASH_SIZE], b[JITK_HASH_SIZE];

	key_of(c, x, arch, a);
	key_of(c, y, arch, b);
	if (!memcmp(a, b, JITK_HASH_SIZE) != !!same)
		fail_msg("%s and %s on %s: %s", x, y, arch,
			 same ? "two translation units, not one" : "one translation unit, not two");
}

/* Size classes (size_of) choose tuning, never the math: they are not
 * members of the parameter struct, and instances that differ in them
 * alone and tune alike share one translation unit - one key, one compile
 * - under a name that no instance tuned otherwise has. */
static void test_size_class_keys(void **state)
{
	char *dir = t_tmpdir(), *cache = t_path(dir, "cache");
	jitk_compiler *c;
	jitk_origin o1, o2;

	(void)state;
	/* (512, 1024) tunes apart from the other three */
	size_class_family(dir, "sc", "  - threads: 128\n"
				     "  - when: { mclass: [512], nclass: [1024] }\n    threads: 64\n"
				     "  - arch: { min: sm_100 }\n    threads: 256\n");
	/* all four alike, the keys set in another order for each M class */
	size_class_family(dir, "so", "  - when: { mclass: [512] }\n    a: 1\n"
				     "  - threads: 128\n    b: 2\n"
				     "  - when: { mclass: [4096] }\n    a: 1\n");
	/* (512, 64) and (4096, 1024) alike, (512, 1024) and (4096, 64) alike:
	 * no class leaves out a size class without standing for both */
	size_class_family(dir, "sx", "  - threads: 128\n"
				     "  - when: { mclass: [512], nclass: [1024] }\n    threads: 64\n"
				     "  - when: { mclass: [4096], nclass: [64] }\n    threads: 64\n");
	/* three N classes, the first two alike at M = 512: named for the
	 * first, one unit; the third apart */
	size_class_family_n(dir, "s3", "64, 1024, 8192",
			    "  - threads: 128\n"
			    "  - when: { mclass: [512], nclass: [8192] }\n    threads: 64\n");
	/* a name that leaves M out stands for every M: N = 64 may not name
	 * (512, 1024), since (4096, 64) tunes apart (a review's case, where
	 * (512, 1024) and (4096, 8192) both became ce_nclass_64) */
	size_class_family_n(dir, "ce", "64, 1024, 8192",
			    "  - threads: 128\n"
			    "  - when: { mclass: [4096], nclass: [64] }\n    threads: 64\n"
			    "  - when: { nclass: [8192] }\n    threads: 64\n");
	c = t_compiler(dir, cache, NULL, NULL);

	name_has(c, "ce[mclass=512,nclass=1024]", "sm_90", "cek<ce_nclass_1024>");
	name_has(c, "ce[mclass=4096,nclass=8192]", "sm_90", "cek<ce_nclass_8192>");
	one_unit(c, "ce[mclass=512,nclass=1024]", "ce[mclass=4096,nclass=1024]", "sm_90", 1);
	one_unit(c, "ce[mclass=512,nclass=1024]", "ce[mclass=4096,nclass=8192]", "sm_90", 0);

	one_unit(c, "s3[mclass=512,nclass=64]", "s3[mclass=512,nclass=1024]", "sm_90", 1);
	name_has(c, "s3[mclass=512,nclass=1024]", "sm_90", "s3k<s3_nclass_64>");
	one_unit(c, "s3[mclass=512,nclass=64]", "s3[mclass=512,nclass=8192]", "sm_90", 0);
	name_has(c, "s3[mclass=512,nclass=8192]", "sm_90", "s3k<s3_mclass_512_nclass_8192>");

	/* N = 64 tunes alike for both M: one translation unit, the M class
	 * (the first in order) left out of its name */
	one_unit(c, "sc[mclass=512,nclass=64]", "sc[mclass=4096,nclass=64]", "sm_90", 1);
	name_has(c, "sc[mclass=4096,nclass=64]", "sm_90", "sck<sc_nclass_64>");
	/* (4096, 1024) tunes as they do, but leaving out both classes would
	 * name (512, 1024) too: it leaves out N alone, a unit of its own */
	one_unit(c, "sc[mclass=512,nclass=64]", "sc[mclass=4096,nclass=1024]", "sm_90", 0);
	name_has(c, "sc[mclass=4096,nclass=1024]", "sm_90", "sck<sc_mclass_4096>");
	/* (512, 1024) tunes apart, named for both of its classes */
	one_unit(c, "sc[mclass=512,nclass=64]", "sc[mclass=512,nclass=1024]", "sm_90", 0);
	name_has(c, "sc[mclass=512,nclass=1024]", "sm_90", "sck<sc_mclass_512_nclass_1024>");
	/* sm_100's entry sets them all alike: one for all four */
	one_unit(c, "sc[mclass=512,nclass=1024]", "sc[mclass=4096,nclass=64]", "sm_100", 1);
	name_has(c, "sc[mclass=512,nclass=1024]", "sm_100", "sck<sc>");

	/* the members in the spec's order, not the entries': one for all */
	one_unit(c, "so[mclass=512,nclass=64]", "so[mclass=4096,nclass=1024]", "sm_90", 1);
	name_has(c, "so[mclass=4096,nclass=1024]", "sm_90", "sok<so>");

	/* two tunings never share a name */
	name_has(c, "sx[mclass=512,nclass=64]", "sm_90", "sxk<sx_mclass_512_nclass_64>");
	name_has(c, "sx[mclass=512,nclass=1024]", "sm_90", "sxk<sx_mclass_512_nclass_1024>");

	/* one compile serves both */
	assert_int_equal(jitk_precompile(&o1, c, "sc[mclass=512,nclass=64]", "sm_90"), 0);
	assert_int_equal(jitk_precompile(&o2, c, "sc[mclass=4096,nclass=64]", "sm_90"), 0);
	assert_int_equal(o1, JITK_ORIGIN_COMPILED);
	assert_int_equal(o2, JITK_ORIGIN_CACHE);
	jitk_compiler_free(c);
	t_rmtree(dir);
	free(cache);
	free(dir);
}

/* Builds instance i for arch and checks it is clean; says why and returns
 * 1 when not. */
static int clean_build(jitk_compiler *c, size_t i, const char *archname)
{
	jitk_build b;
	jitk_arch arch;
	const char *name = c->specs->insts[i].name;
	int bad = 0;

	jitk__arch_parse(&arch, archname);
	if (jitk__build(&b, c, i, arch, JITK_BUILD_PTXAS_INFO)) {
		fprintf(stderr, "%s %s: %s\n%s\n", name, archname, jitk_error_last()->message,
			jitk_error_last()->detail);
		return 1;
	}
	if (!b.log || strstr(b.log, "warning") ||
	    !strstr(b.log, "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads")) {
		fprintf(stderr, "%s %s: not clean:\n%s\n", name, archname, b.log ? b.log : "(no log)");
		bad = 1;
	} else if (b.entry.nnames != 1 || strncmp(b.entry.names[0], "_ZN4jitk", 8) ||
		   b.entry.size <= 1000 || memcmp(b.entry.image, "\177ELF", 4)) {
		fprintf(stderr, "%s %s: not one lowered jitk:: name and a cubin\n", name, archname);
		bad = 1;
	}
	jitk__build_free(&b);
	return bad;
}

typedef struct {
	jitk_compiler *c;
	size_t stride;
} every_variant;

/* Instance i * stride for sm_90 and sm_100: the builds that were clean. */
static long build_both(void *ctx, size_t i)
{
	const every_variant *e = ctx;

	if (e->c->specs->insts[i * e->stride].sym->fam->nincludes)
		return 0; /* header-package families: test_packages builds them (minutes each) */
	if (clean_build(e->c, i * e->stride, "sm_90") || clean_build(e->c, i * e->stride, "sm_100"))
		return -1;
	return 2;
}

/* Every instance compiles for sm_90 and sm_100 with no warning, no stack
 * frame and no spills (ptxas -v), and the lowered name is kept. Two
 * processes share the builds. Families on header packages (CuTe, CUB)
 * are left to test_packages: each of their builds takes up to a minute.
 * In a sanitizer build every 5th instance is
 * built: the library's memory use is the same for each, and NVRTC itself
 * is not instrumented (the plain build builds them all). */
static void test_every_variant_compiles_clean(void **state)
{
	char *specs = repo_specs();
	every_variant e = { t_compiler(specs, NULL, NULL, NULL), 1 };
	size_t n;
	long built;

	(void)state;
#if defined(__SANITIZE_ADDRESS__)
	e.stride = 5;
#endif
	n = (e.c->specs->ninsts + e.stride - 1) / e.stride;
	built = t_parallel_sum(n, build_both, &e);
	{
		size_t i, self_contained = 0;

		for (i = 0; i < n; i++)
			self_contained += !e.c->specs->insts[i * e.stride].sym->fam->nincludes;
		assert_true(self_contained > 0);
		/* every self-contained instance (of the stride), none gated there */
		assert_int_equal(built, 2 * (long)self_contained);
	}
	printf("every variant: %ld builds clean (%s)\n", built,
	       e.stride == 1 ? "every instance, sm_90 and sm_100" : "every 5th instance: sanitizer build");
	jitk_compiler_free(e.c);
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

/* ------------------------------------------------------ hostile inputs */

/* jitk_compiler_new over specs: the status, and the message in msg. */
static int load(const char *specs, char *msg, size_t n)
{
	jitk_compiler_options o = JITK_COMPILER_OPTIONS_INIT;
	jitk_compiler *c = NULL;
	int rc;

	o.specs = specs;
	o.cache_dir = "";
	o.cache_path = "";
	o.log_level = JITK_LOG_ERROR;
	rc = jitk_compiler_new(&c, &o);
	snprintf(msg, n, "%s", rc ? jitk_error_last()->message : "");
	jitk_compiler_free(c);
	return rc;
}

/* s with every from replaced by to (a new string). */
static char *subst(const char *s, const char *from, const char *to)
{
	jbuf b;
	const char *p;

	jitk__jbuf_init(&b);
	while ((p = strstr(s, from))) {
		jitk__jbuf_put(&b, s, (size_t)(p - s));
		jitk__jbuf_puts(&b, to);
		s = p + strlen(from);
	}
	jitk__jbuf_puts(&b, s);
	assert_false(b.oom);
	return jitk__jbuf_detach(&b);
}

/* The option filter on its own: what it lets through, and why not. */
static void test_option_allow_list(void **state)
{
	static const struct {
		const char *opt, *why; /* NULL: allowed */
	} cases[] = {
		{ "-DFOO", NULL },
		{ "-DFOO=1", NULL },
		{ "-DMSG=a b", NULL },
		{ "--define-macro=BAR=x", NULL },
		{ "-UFOO", NULL },
		{ "--undefine-macro=FOO", NULL },
		{ "--maxrregcount=64", NULL },
		{ "-maxrregcount=255", NULL },
		{ "--restrict", NULL },
		{ "-lineinfo", NULL },
		{ "--generate-line-info", NULL },
		{ "--std=c++20", NULL },
		{ "-std=c++17", NULL },
		{ "-default-device", NULL },
		{ "-w", NULL },
		{ "--diag-suppress=177,550", NULL },
		{ "--extra-device-vectorization", NULL },
		/* hostile: each of these passed the old deny list */
		{ "--time=/tmp/x.csv", "it writes a file" },
		{ "-time=/tmp/x.csv", "it writes a file" },
		{ "--fdevice-time-trace=/tmp/x.json", "it writes a file" },
		{ "--dlink-time-opt", "it makes LTO IR instead of a cubin" },
		{ "-dlto", "it makes LTO IR instead of a cubin" },
		{ "--optix-ir", "it makes OptiX IR instead of a cubin" },
		{ "--fdevice-syntax-only", "it makes a cubin without the kernel" },
		{ "--ptxas-options=-v", "jitk does not check what it passes on to ptxas" },
		{ "-Xptxas", "jitk does not check what it passes on to ptxas" },
		{ "-D__CUDA_ARCH__=1", "the macro name is reserved (__ or _ and a capital letter)" },
		{ "-U__CUDA_ARCH__", "the macro name is reserved (__ or _ and a capital letter)" },
		{ "-D_Foo", "the macro name is reserved (__ or _ and a capital letter)" },
		{ "-DCUDA_VERSION=9000", "the macro name is reserved (CUDA*, NVRTC* and JITK* belong to the toolchain and jitk)" },
		{ "-Djitk=evil", "the macro name is reserved (CUDA*, NVRTC* and JITK* belong to the toolchain and jitk)" },
		{ "-Dstatic_assert=sizeof", "the macro name is a C++ keyword" },
		{ "-DF(x)=x", "the macro name is not an identifier (no function-like macros)" },
		{ "-D", "the macro name is not an identifier" },
		{ "-D1X", "the macro name is not an identifier" },
		{ "-DX=a\n#include </etc/hostname>", "it contains a control character or a non-ASCII byte" },
		{ "--maxrregcount=0", "the value is out of range" },
		{ "--maxrregcount=256", "the value is out of range" },
		{ "--maxrregcount=032", "the value has a leading zero" },
		{ "--maxrregcount=x", "the value is not a number" },
		{ "--diag-suppress=177,", "the value is not a number" },
		{ "--std=c++14", "the templates need c++17 or c++20" },
		{ "-G", "a debug build (no optimization) would be cached as the kernel; use --generate-line-info for profiling" },
		{ "-I/usr/include", "it reads files outside the template" },
		{ "--pre-include=/etc/passwd", "it reads a file outside the template" },
		{ "-dc", "it makes relocatable code that needs a link step" },
		{ "-rdc=true", "it makes relocatable code that needs a link step" },
		{ "--create-pch=/tmp/x.pch", "it writes a file" },
		{ "-pch", "it reads and writes precompiled headers" },
		{ "--use_fast_math", "jitk fixes the numerics" },
		{ "-arch=sm_90", "jitk sets the target" },
		{ "--split-compile=4", "it is not one of the options jitk allows (docs/spec-format.md lists them)" },
		{ "nonsense", "it is not an option" },
	};
	size_t i;

	(void)state;
	for (i = 0; i < JITK_ARRAY_SIZE(cases); i++) {
		const char *why = jitk__nvrtc_option_problem(cases[i].opt);

		if (!cases[i].why != !why || (why && strcmp(why, cases[i].why)))
			fprintf(stderr, "%s: %s\n", cases[i].opt, why ? why : "(allowed)");
		if (cases[i].why)
			assert_string_equal(why, cases[i].why);
		else
			assert_null(why);
	}
}

/* A copy of the tree whose static_quant_fp8 spec has the nvrtc_options
 * line given (at line 40, before symbols:). */
static char *tree_with_options(const char *dir, const char *line)
{
	char *spec = t_path(dir, "specs/static_quant_fp8.yaml");
	char *with = jitk__asprintf("%s\nsymbols:", line);

	t_copy_tree(dir, NULL, NULL);
	t_edit(spec, "\nsymbols:", with);
	free(with);
	free(spec);
	return t_path(dir, "specs");
}

/* Spec-time refusals, with the location of the option (hostile specs). */
static void test_spec_refuses_options(void **state)
{
	static const struct {
		const char *line, *want;
	} cases[] = {
		{ "nvrtc_options: [--time=TRACE]",
		  "38:17: error: option '--time=TRACE' is not allowed in a spec: it writes a file" },
		{ "nvrtc_options: [-DOK, --fdevice-time-trace=TRACE]",
		  "38:23: error: option '--fdevice-time-trace=TRACE' is not allowed in a spec: it writes a file" },
		{ "nvrtc_options: [--dlink-time-opt]",
		  "38:17: error: option '--dlink-time-opt' is not allowed in a spec: it makes LTO IR instead of a cubin" },
		{ "nvrtc_options: [--optix-ir]",
		  "38:17: error: option '--optix-ir' is not allowed in a spec: it makes OptiX IR instead of a cubin" },
		{ "nvrtc_options: [--ptxas-options=-v]",
		  "38:17: error: option '--ptxas-options=-v' is not allowed in a spec: jitk does not check what it passes on to ptxas" },
		{ "nvrtc_options: [-D__CUDA_ARCH__=1000]",
		  "38:17: error: option '-D__CUDA_ARCH__=1000' is not allowed in a spec: the macro name is reserved (__ or _ and a capital letter)" },
		/* A bare -D would take the next option as its value. */
		{ "nvrtc_options: [-D, --time=TRACE]",
		  "38:17: error: option '-D' is not allowed in a spec: the macro name is not an identifier" },
		{ "nvrtc_options: [\"-DX=1\\n#include </etc/hostname>\"]",
		  "38:17: error: option '-DX=1?#include </etc/hostname>' is not allowed in a spec: it contains a control character or a non-ASCII byte" },
	};
	size_t i;

	(void)state;
	for (i = 0; i < JITK_ARRAY_SIZE(cases); i++) {
		/* TRACE: the path of a file that must not be written. */
		char *dir = t_tmpdir(), *trace = t_path(dir, "trace.csv");
		char *line = subst(cases[i].line, "TRACE", trace), *specs, *want, *where;
		char msg[1024];
		struct stat st;

		specs = tree_with_options(dir, line);
		assert_int_equal(load(specs, msg, sizeof(msg)), JITK_ESPEC);
		where = jitk__asprintf("%s/static_quant_fp8.yaml:%s (at nvrtc_options)", specs,
				       cases[i].want);
		want = subst(where, "TRACE", trace);
		free(where);
		assert_string_equal(msg, want);
		assert_int_not_equal(stat(trace, &st), 0);
		free(want);
		free(specs);
		free(line);
		t_rmtree(dir);
		free(trace);
		free(dir);
	}
}

/* Every allowed option (both spellings) is one NVRTC takes, and the build
 * still gives a cubin with the kernel; a spec's --std replaces jitk's. */
static void test_allowed_options_reach_nvrtc(void **state)
{
	static const char *const lines[] = {
		"nvrtc_options: [--restrict, --extra-device-vectorization, --generate-line-info, "
		"--device-as-default-execution-space, --device-int128, --display-error-number, "
		"--maxrregcount=64, --diag-suppress=177, --diag-warn=550, --diag-error=1000, "
		"--define-macro=JK_A=1, --undefine-macro=JK_B, --std=c++20]",
		"nvrtc_options: [-restrict, -extra-device-vectorization, -lineinfo, -default-device, "
		"-device-int128, -no-err-no, -maxrregcount=128, -diag-suppress=177, -w, "
		"\"-DJK_MSG=a b\", -UJK_B, -std=c++17]",
	};
	size_t i, k;

	(void)state;
	for (i = 0; i < JITK_ARRAY_SIZE(lines); i++) {
		char *dir = t_tmpdir(), *specs = tree_with_options(dir, lines[i]);
		t_log log = { 0, "" };
		jitk_compiler *c = t_compiler(specs, NULL, NULL, &log);
		jitk_tu tu;
		jitk_variant v;
		uint8_t key[JITK_HASH_SIZE];
		int origin = -1, stds = 0;

		prepare(c, "static_quant_fp8", "sm_90", &tu, key, &v);
		for (k = 0; k < tu.noptions; k++)
			stds += !strncmp(tu.options[k], "--std=", 6) || !strncmp(tu.options[k], "-std=", 5);
		assert_int_equal(stds, 1);
		assert_string_equal(tu.options[1], i ? "-std=c++17" : "--std=c++20");
		jitk__tu_free(&tu);
		assert_int_equal(t_build(c, "static_quant_fp8", "sm_90", &origin), 0);
		assert_int_equal(origin, JITK_ORIGIN_COMPILED);
		if (log.warnings)
			fprintf(stderr, "%s\n", log.last);
		assert_int_equal(log.warnings, 0);
		jitk_compiler_free(c);
		free(specs);
		t_rmtree(dir);
		free(dir);
	}
}

/* Whatever made the spec set, the translation unit only carries allowed
 * options: the check runs again where the options are assembled. */
static void test_options_rechecked_at_compile_time(void **state)
{
	char *dir = t_tmpdir(), *specs = tree_with_options(dir, "nvrtc_options: [-DOK]");
	char *trace = t_path(dir, "trace.csv"), want[1024];
	jitk_compiler *c = t_compiler(specs, NULL, NULL, NULL);
	spec_family *f = NULL;
	jitk_build b;
	jitk_arch a;
	size_t inst, i;
	struct stat st;

	(void)state;
	assert_int_equal(jitk__spec_find(c->specs, "static_quant_fp8", &inst), 0);
	f = (spec_family *)c->specs->insts[inst].sym->fam;
	assert_int_equal(f->noptions, 1);
	f->options[0] = jitk__arena_printf(c->specs->arena, "--time=%s", trace);
	jitk__arch_parse(&a, "sm_90");
	assert_int_equal(jitk__build(&b, c, inst, a, 0), JITK_ESPEC);
	snprintf(want, sizeof(want), "%s:%d:%d: error: family static_quant_fp8: NVRTC option #1 "
		 "is not allowed: it writes a file", f->loc.file, f->loc.line, f->loc.col);
	assert_string_equal(jitk_error_last()->message, want);
	assert_int_not_equal(stat(trace, &st), 0);
	(void)i;
	jitk_compiler_free(c);
	free(specs);
	free(trace);
	t_rmtree(dir);
	free(dir);
}

/* NVRTC got at most 38 options: the 39th and later were dropped without a
 * word. 60 macros, each of which the template insists on. */
static void test_more_than_38_options(void **state)
{
	char *dir = t_tmpdir(), *specs, *tmpl;
	jitk_compiler *c;
	jbuf line, need;
	int i, origin = -1;

	(void)state;
	jitk__jbuf_init(&line);
	jitk__jbuf_init(&need);
	jitk__jbuf_puts(&line, "nvrtc_options: [");
	for (i = 0; i < 60; i++) {
		jitk__jbuf_printf(&line, "%s-DJK_%d", i ? ", " : "", i);
		jitk__jbuf_printf(&need, "#ifndef JK_%d\n#error option JK_%d did not reach NVRTC\n#endif\n", i, i);
	}
	jitk__jbuf_puts(&line, "]");
	specs = tree_with_options(dir, line.data);
	tmpl = t_path(dir, "templates/static_quant_fp8.cuh");
	jitk__jbuf_puts(&need, "namespace jitk {");
	t_edit(tmpl, "namespace jitk {", need.data);
	c = t_compiler(specs, NULL, NULL, NULL);
	if (t_build(c, "static_quant_fp8", "sm_90", &origin))
		fprintf(stderr, "%s\n", jitk_error_last()->message);
	assert_int_equal(t_build(c, "static_quant_fp8", "sm_90", &origin), 0);
	jitk_compiler_free(c);
	jitk__jbuf_free(&line);
	jitk__jbuf_free(&need);
	free(tmpl);
	free(specs);
	t_rmtree(dir);
	free(dir);
}

/* What an image must be for its target. */
static void test_image_checks(void **state)
{
	char *specs = repo_specs();
	jitk_compiler *c = t_compiler(specs, NULL, NULL, NULL);
	jitk_build cubin, ptx;
	jitk_arch sm90, sm100, c90, c90a;
	size_t inst;
	const char *name;
	char *bad;
	uint8_t *elf;

	(void)state;
	jitk__arch_parse(&sm90, "sm_90");
	jitk__arch_parse(&sm100, "sm_100");
	jitk__arch_parse(&c90, "compute_90");
	jitk__arch_parse(&c90a, "compute_90a");
	assert_int_equal(jitk__spec_find(c->specs, "static_quant_fp8", &inst), 0);
	assert_int_equal(jitk__build(&cubin, c, inst, sm90, 0), 0);
	assert_int_equal(jitk__build(&ptx, c, inst, c90, 0), 0);
	name = cubin.entry.names[0];
#define PROBLEM(img, size, is_ptx, t, n) \
	jitk__image_problem(img, size, is_ptx, t, (const char *const *)&name, n)
	assert_null(PROBLEM(cubin.entry.image, cubin.entry.size, 0, sm90, 1));
	assert_null(PROBLEM(ptx.entry.image, ptx.entry.size, 1, c90, 1));
	assert_string_equal(PROBLEM(cubin.entry.image, 0, 0, sm90, 1), "the image is empty");
	assert_string_equal(PROBLEM(cubin.entry.image, cubin.entry.size, 0, sm100, 1),
			    "the cubin is for another SM than the requested target");
	assert_string_equal(PROBLEM(cubin.entry.image, cubin.entry.size, 0, c90, 1),
			    "the image is not PTX, the target needs PTX");
	assert_string_equal(PROBLEM(ptx.entry.image, ptx.entry.size, 1, sm90, 1),
			    "the image is PTX, the target needs a cubin");
	assert_string_equal(PROBLEM(ptx.entry.image, ptx.entry.size, 1, c90a, 1),
			    "the PTX text is not for the requested target (.target differs)");
	assert_string_equal(PROBLEM(ptx.entry.image, ptx.entry.size - 1, 1, c90, 1),
			    "the PTX text is not one NUL-terminated string");
	assert_string_equal(PROBLEM("// x\n.target sm_90\n", sizeof("// x\n.target sm_90\n"), 1, c90, 1),
			    "the PTX text does not start with a .version directive");
	assert_string_equal(PROBLEM("\177ELF", 5, 0, sm90, 1), "the image is not an ELF file (cubin)");
	elf = malloc(cubin.entry.size);
	memcpy(elf, cubin.entry.image, cubin.entry.size);
	elf[18] = 62; /* x86-64 */
	assert_string_equal(PROBLEM(elf, cubin.entry.size, 0, sm90, 1),
			    "the image is an ELF file for another machine than CUDA (e_machine is not 190)");
	elf[18] = 190;
	elf[4] = 1;
	assert_string_equal(PROBLEM(elf, cubin.entry.size, 0, sm90, 1),
			    "the image is not a 64-bit little-endian ELF file");
	free(elf);
	name = "_Z9not_therev";
	assert_string_equal(PROBLEM(cubin.entry.image, cubin.entry.size, 0, sm90, 1),
			    "the cubin lacks the kernel's symbol");
	assert_string_equal(PROBLEM(ptx.entry.image, ptx.entry.size, 1, c90, 1),
			    "the PTX text lacks the kernel's .entry");
	bad = jitk__strdup(ptx.entry.image);
	assert_non_null(strstr(bad, ".target sm_90"));
	memcpy(strstr(bad, ".target sm_90"), ".target sm_80", 13);
	name = cubin.entry.names[0];
	assert_string_equal(PROBLEM(bad, strlen(bad) + 1, 1, c90, 1),
			    "the PTX text is not for the requested target (.target differs)");
#undef PROBLEM
	free(bad);
	jitk__build_free(&cubin);
	jitk__build_free(&ptx);
	jitk_compiler_free(c);
	free(specs);
}

/* Entries that verify (checksums, key, target) but hold the wrong thing:
 * what an older jitk published for --dlink-time-opt (an empty image), LTO
 * IR, a cubin for another SM, an entry without a kernel name. Each is a
 * reject: a warning, a compile, and a good entry after. */
static void test_wrong_kind_cache_entries(void **state)
{
	static const char *const whys[] = {
		"the image is empty", "the image is not an ELF file (cubin)",
		"the cubin is for another SM than the requested target",
		"it does not hold one kernel name (or a kernel's and its builder's)",
	};
	char *dir = t_tmpdir(), *cache = t_path(dir, "cache"), *specs = repo_specs();
	size_t k;

	(void)state;
	for (k = 0; k < JITK_ARRAY_SIZE(whys); k++) {
		t_log log = { 0, "" };
		jitk_compiler *c = t_compiler(specs, cache, NULL, &log);
		jitk_build other, b;
		jitk_cache_entry e;
		jitk_tu tu;
		jitk_variant v;
		jitk_arch a;
		uint8_t key[JITK_HASH_SIZE];
		char *names[1] = { "_Z1kv" }, lto[64];
		size_t inst;
		int origin = -1;

		jitk__arch_parse(&a, "sm_100");
		assert_int_equal(jitk__spec_find(c->specs, "static_quant_fp8", &inst), 0);
		assert_int_equal(jitk__build(&other, c, inst, a, JITK_BUILD_FORCE), 0);
		jitk__arch_parse(&a, "sm_90");
		prepare(c, "static_quant_fp8", "sm_90", &tu, key, &v);
		jitk__tu_free(&tu);
		memset(&e, 0, sizeof(e));
		memcpy(e.key, key, JITK_HASH_SIZE);
		snprintf(e.target, sizeof(e.target), "sm_90");
		memset(lto, 0x43, sizeof(lto)); /* LTO IR is not ELF */
		e.names = names;
		e.nnames = 1;
		if (k == 0) {
			e.image = "";
			e.size = 0;
		} else if (k == 1) {
			e.image = lto;
			e.size = sizeof(lto);
		} else {
			e.image = other.entry.image; /* the sm_100 cubin */
			e.size = other.entry.size;
			e.names = other.entry.names;
			e.nnames = k == 3 ? 0 : 1;
		}
		if (k == 3) { /* the right cubin, but no name */
			jitk_build right;

			assert_int_equal(jitk__build(&right, c, inst, a, JITK_BUILD_FORCE), 0);
			e.image = right.entry.image;
			e.size = right.entry.size;
			assert_int_equal(jitk__cache_put(c->cache, &e), 0);
			jitk__build_free(&right);
		} else {
			assert_int_equal(jitk__cache_put(c->cache, &e), 0);
		}
		jitk__build_free(&other);
		/* cache verify names it too: a lookup would not load it */
		{
			jitk_cache_summary sum = JITK_CACHE_SUMMARY_INIT;

			assert_int_equal(jitk__cache_scan(&sum, cache, 1, NULL, NULL), 0);
			assert_int_equal(sum.entries, 1);
			assert_int_equal(sum.bad, 1);
		}
		log.warnings = 0;
		assert_int_equal(jitk__build(&b, c, inst, a, 0), 0);
		assert_int_equal(b.origin, JITK_ORIGIN_COMPILED);
		assert_null(jitk__image_problem(b.entry.image, b.entry.size, 0, a,
						(const char *const *)b.entry.names, 1));
		jitk__build_free(&b);
		assert_int_equal(log.warnings, 1);
		assert_non_null(strstr(log.last, whys[k]));
		assert_non_null(strstr(log.last, "for static_quant_fp8 on sm_90 rejected"));
		/* The bad entry is gone; the next build is a plain hit. */
		log.warnings = 0;
		assert_int_equal(t_build(c, "static_quant_fp8", "sm_90", &origin), 0);
		assert_int_equal(origin, JITK_ORIGIN_CACHE);
		assert_int_equal(log.warnings, 0);
		jitk_compiler_free(c);
	}
	t_rmtree(dir);
	free(dir);
	free(cache);
	free(specs);
}

/* A tree whose static_quant_fp8 template has its `#include "common.cuh"`
 * line replaced by text; then loaded. */
static int load_template(const char *dir, const char *text, char *msg, size_t n)
{
	char *tmpl = t_path(dir, "templates/static_quant_fp8.cuh"), *specs = t_path(dir, "specs");
	int rc;

	t_copy_tree(dir, NULL, NULL);
	t_edit(tmpl, "#include \"common.cuh\"\n", text);
	rc = load(specs, msg, n);
	free(tmpl);
	free(specs);
	return rc;
}

/* Every file NVRTC could read is either inlined (so in the key) or
 * refused with file:line:col. Before: `#include </abs/path.h>` compiled
 * and the key ignored the header, so an edit served a stale entry. */
static void test_template_includes(void **state)
{
	static const struct {
		const char *text; /* ABS: an existing header outside the tree */
		int line, col;
		const char *want; /* NULL: loads */
	} cases[] = {
		{ "#include <ABS>\n#include \"common.cuh\"\n", 6, 1,
		  "#include <ABS>: angle-bracket includes are refused (NVRTC would read the file "
		  "outside the cache key); include templates with \"quoted\" relative names, which "
		  "jitk inlines, or name the header packages the family includes from (includes: in "
		  "the spec)" },
		{ "#include <cuda_fp16.h>\n#include \"common.cuh\"\n", 6, 1,
		  "#include <cuda_fp16.h>: angle-bracket includes are refused (NVRTC would read the "
		  "file outside the cache key); include templates with \"quoted\" relative names, "
		  "which jitk inlines, or name the header packages the family includes from "
		  "(includes: in the spec)" },
		{ "#include \"ABS\"\n#include \"common.cuh\"\n", 6, 10,
		  "#include \"ABS\": absolute include paths are refused (name the file relative to "
		  "the including one)" },
		{ "#define H <ABS>\n#include H\n#include \"common.cuh\"\n", 7, 1,
		  "#include of a macro or other computed name is refused (jitk can only inline "
		  "#include \"name\")" },
		{ "#if __has_include(<ABS>)\n#endif\n#include \"common.cuh\"\n", 6, 5,
		  "__has_include is refused in a template (it asks the file system, whose answer "
		  "is not in the cache key)" },
		{ "/* c */ #include \"common.cuh\"\n", 6, 9,
		  "write the include as #include \"common.cuh\" alone on one line (jitk inlines "
		  "only that form)" },
		{ "#inc\\\nlude \"common.cuh\"\n", 6, 1,
		  "write the include as #include \"common.cuh\" alone on one line (jitk inlines "
		  "only that form)" },
		{ "%:include \"common.cuh\"\n", 6, 1,
		  "write the include as #include \"common.cuh\" alone on one line (jitk inlines "
		  "only that form)" },
		{ "#include \"common.cuh\" /* a comment\n that goes on */\n", 6, 1,
		  "write the include as #include \"common.cuh\" alone on one line (jitk inlines "
		  "only that form)" },
		{ "#include \"common.cuh\" junk\n", 6, 23, "unexpected text after the #include file name" },
		{ "#include_next <ABS>\n", 6, 1,
		  "#include_next is not supported in a template (jitk inlines \"quoted\" #includes only)" },
		{ "  #  import \"common.cuh\"\n", 6, 3,
		  "#import is not supported in a template (jitk inlines \"quoted\" #includes only)" },
		{ "#embed \"common.cuh\"\n", 6, 1,
		  "#embed is not supported in a template (jitk inlines \"quoted\" #includes only)" },
		{ "#include \"missing.cuh\"\n", 6, 10, "included file 'TDIR/missing.cuh' not found" },
		{ "#include \"\"\n", 6, 10, "empty file name in #include" },
		/* Not includes at all: comments, strings, raw strings, #if 0 is
		 * not special (refused above), digit separators. */
		{ "/*\n#include <ABS>\n*/\n#include \"common.cuh\"\n", 0, 0, NULL },
		{ "// #include <ABS>\n#include \"common.cuh\"\n", 0, 0, NULL },
		{ "#include \"common.cuh\" // fine\nstatic const char *s1 = \"#include <ABS>\";\n"
		  "static const char *s2 = R\"x(\n#include <ABS>\n)x\";\nstatic const int big = 1'000'000;\n",
		  0, 0, NULL },
		{ "  #  include   \"common.cuh\"\n", 0, 0, NULL },
	};
	char *abs_dir = t_tmpdir(), *abs = t_path(abs_dir, "outside.h");
	size_t i;

	(void)state;
	t_writef(abs, "#define OUTSIDE 1\n");
	for (i = 0; i < JITK_ARRAY_SIZE(cases); i++) {
		char *dir = t_tmpdir(), *tdir = t_path(dir, "specs/../templates");
		char *text = subst(cases[i].text, "ABS", abs), *want = NULL, msg[1024];
		int rc;

		rc = load_template(dir, text, msg, sizeof(msg));
		if (cases[i].want) {
			char *w = jitk__asprintf("%s/static_quant_fp8.cuh:%d:%d: error: %s", tdir,
						 cases[i].line, cases[i].col, cases[i].want);
			char *w2 = subst(w, "ABS", abs);

			want = subst(w2, "TDIR", tdir);
			free(w);
			free(w2);
			if (rc != JITK_ESPEC || strcmp(msg, want))
				fprintf(stderr, "case %zu: %s\n", i, msg);
			assert_int_equal(rc, JITK_ESPEC);
			assert_string_equal(msg, want);
		} else {
			if (rc)
				fprintf(stderr, "case %zu: %s\n", i, msg);
			assert_int_equal(rc, 0);
		}
		free(want);
		free(text);
		free(tdir);
		t_rmtree(dir);
		free(dir);
	}
	t_rmtree(abs_dir);
	free(abs_dir);
	free(abs);
}

/* Include graphs: a template including itself and a cycle inline each
 * file once; fan-out past the table and nesting past the depth fail with
 * their own messages, at the include that overflowed; NUL bytes too. */
static void test_include_limits(void **state)
{
	char *dir = t_tmpdir(), *tdir = t_path(dir, "specs/../templates"), msg[1024], *want;
	char *tmpl = t_path(dir, "templates/static_quant_fp8.cuh");
	char *specs = t_path(dir, "specs"), *a = t_path(dir, "templates/a.cuh");
	char *b = t_path(dir, "templates/b.cuh");
	jitk_compiler *c;
	jitk_tu tu;
	jitk_variant v;
	uint8_t key[JITK_HASH_SIZE];
	jbuf text;
	int i;

	(void)state;
	t_copy_tree(dir, NULL, NULL);
	/* Itself, and a -> b -> a. */
	t_writef(a, "#pragma once\n#include \"b.cuh\"\nstruct from_a {};\n");
	t_writef(b, "#include \"a.cuh\"\nstruct from_b {};\n");
	assert_int_equal(load_template(dir, "#include \"static_quant_fp8.cuh\"\n#include \"a.cuh\"\n"
				       "#include \"common.cuh\"\n", msg, sizeof(msg)), 0);
	t_writef(a, "#pragma once\n#include \"b.cuh\"\nstruct from_a {};\n");
	t_writef(b, "#include \"a.cuh\"\nstruct from_b {};\n");
	c = t_compiler(specs, NULL, NULL, NULL);
	prepare(c, "static_quant_fp8", "sm_90", &tu, key, &v);
	assert_non_null(strstr(tu.source, "struct from_a {};"));
	assert_null(strstr(strstr(tu.source, "struct from_a {};") + 1, "struct from_a {};"));
	assert_null(strstr(strstr(tu.source, "struct from_b {};") + 1, "struct from_b {};"));
	assert_null(strstr(strstr(tu.source, "static_quant_fp8(") + 1, "__global__ void static_quant_fp8("));
	jitk__tu_free(&tu);
	assert_int_equal(t_build(c, "static_quant_fp8", "sm_90", NULL), 0);
	jitk_compiler_free(c);

	/* Fan-out: 70 headers. */
	jitk__jbuf_init(&text);
	for (i = 0; i < 70; i++) {
		char *h = jitk__asprintf("%s/templates/h%d.cuh", dir, i);

		t_writef(h, "// header %d\n", i);
		free(h);
		jitk__jbuf_printf(&text, "#include \"h%d.cuh\"\n", i);
	}
	jitk__jbuf_puts(&text, "#include \"common.cuh\"\n");
	assert_int_equal(load_template(dir, text.data, msg, sizeof(msg)), JITK_ESPEC);
	want = jitk__asprintf("%s/static_quant_fp8.cuh:69:10: error: a template may include at most 63 files",
			      tdir);
	assert_string_equal(msg, want);
	free(want);
	jitk__jbuf_free(&text);

	/* Depth: d0 -> d1 -> ... -> d29. */
	for (i = 0; i < 30; i++) {
		char *h = jitk__asprintf("%s/templates/d%d.cuh", dir, i);

		t_writef(h, "// depth %d\n#include \"d%d.cuh\"\n", i, i + 1);
		free(h);
	}
	assert_int_equal(load_template(dir, "#include \"d0.cuh\"\n#include \"common.cuh\"\n", msg,
				       sizeof(msg)), JITK_ESPEC);
	want = jitk__asprintf("%s/d15.cuh:2:10: error: includes nested more than 16 deep", tdir);
	assert_string_equal(msg, want);
	free(want);

	/* A NUL byte would cut the translation unit short. */
	assert_int_equal(load_template(dir, "#include \"common.cuh\"\n", msg, sizeof(msg)), 0);
	t_write(tmpl, "// x\n\0#include </etc/hostname>\n", 31);
	assert_int_equal(load(specs, msg, sizeof(msg)), JITK_ESPEC);
	want = jitk__asprintf("%s/static_quant_fp8.cuh:2: error: NUL byte in a template", tdir);
	assert_string_equal(msg, want);
	free(want);

	free(tmpl);
	free(specs);
	free(a);
	free(b);
	free(tdir);
	t_rmtree(dir);
	free(dir);
}

/* Targets NVRTC does not have are refused by name, with the list, in
 * explain, precompile and the build (jitk source uses jitk__prepare). */
static void test_targets_validated(void **state)
{
	static const char *const bad[] = { "sm_89a", "sm_99", "sm_1000", "sm_90f", "sm_80a",
					   "compute_89a", "compute_91", "sm_75f" };
	char *specs = repo_specs(), *text = NULL, want[512];
	jitk_compiler *c = t_compiler(specs, NULL, NULL, NULL);
	jitk_tu tu;
	jitk_variant v;
	jitk_arch a;
	uint8_t key[JITK_HASH_SIZE];
	size_t i, inst;
	jitk_origin origin;

	(void)state;
	assert_int_equal(jitk__spec_find(c->specs, "fused_norm_scale_shift_fp8[hidden=3072]", &inst), 0);
	for (i = 0; i < JITK_ARRAY_SIZE(bad); i++) {
		assert_int_equal(jitk_explain(&text, c, "fused_norm_scale_shift_fp8[hidden=3072]", bad[i]), JITK_EINVAL);
		assert_null(text);
		assert_true(!strncmp(jitk_error_last()->message, bad[i], strlen(bad[i])));
		assert_non_null(strstr(jitk_error_last()->message, " is not a target NVRTC "));
		assert_int_equal(jitk_precompile(&origin, c, "fused_norm_scale_shift_fp8[hidden=3072]", bad[i]),
				 JITK_EINVAL);
		assert_int_equal(jitk__arch_parse(&a, bad[i]), 0);
		assert_int_equal(jitk__prepare(&tu, key, &v, c, inst, a), JITK_EINVAL);
	}
	/* The exact text, for this NVRTC's list. */
	{
		jbuf list;
		size_t k;

		jitk__jbuf_init(&list);
		for (k = 0; k < c->narchs; k++)
			jitk__jbuf_printf(&list, "%s%d", k ? " " : "", c->archs[k]);
		jitk__jbuf_puts(&list, "; with 'a': ");
		for (k = 0; k < c->narchs; k++)
			if (c->archs[k] == 90 || c->archs[k] >= 100)
				jitk__jbuf_printf(&list, "%s%d", c->archs[k] == 90 ? "" : " ", c->archs[k]);
		jitk__jbuf_puts(&list, "; with 'f': ");
		for (k = 0; k < c->narchs; k++)
			if (c->archs[k] >= 100)
				jitk__jbuf_printf(&list, "%s%d", c->archs[k] == 100 ? "" : " ", c->archs[k]);
		assert_int_equal(jitk_explain(&text, c, "static_quant_fp8", "sm_89a"), JITK_EINVAL);
		snprintf(want, sizeof(want), "sm_89a is not a target NVRTC %d.%d can compile for: sm_89 "
			 "has no 'a' variant (sm_NN and compute_NN for NN in %s)", c->nvrtc_major,
			 c->nvrtc_minor, list.data);
		assert_string_equal(jitk_error_last()->message, want);
		assert_int_equal(jitk_explain(&text, c, "static_quant_fp8", "sm_99"), JITK_EINVAL);
		snprintf(want, sizeof(want), "sm_99 is not a target NVRTC %d.%d can compile for (sm_NN "
			 "and compute_NN for NN in %s)", c->nvrtc_major, c->nvrtc_minor, list.data);
		assert_string_equal(jitk_error_last()->message, want);
		jitk__jbuf_free(&list);
	}
	/* Real ones still run. */
	assert_int_equal(jitk_explain(&text, c, "fused_norm_scale_shift_fp8[hidden=3072]", "sm_100f"), 0);
	assert_true(!strncmp(text, "fused_norm_scale_shift_fp8[hidden=3072] on sm_100f: runs", 56));
	free(text);
	assert_int_equal(jitk_explain(&text, c, "fused_norm_scale_shift_fp8[hidden=3072]", "sm_90a"), 0);
	free(text);
	jitk_compiler_free(c);
	free(specs);
}

/* jitk_check_target: with a compiler, the targets explain and precompile
 * refuse, with their message; without one, the syntax alone (what the
 * CLI checks before it loads the specs). jitk_cache_format: the format
 * of the entries. */
static void test_check_target_public(void **state)
{
	static const char not_arch[] = "' is not an architecture (sm_90, sm_100a, compute_90...)";
	char *specs = repo_specs(), want[128];
	jitk_compiler *c = t_compiler(specs, NULL, NULL, NULL);

	(void)state;
	assert_int_equal(jitk_check_target(NULL, "sm_90"), 0);
	assert_int_equal(jitk_check_target(NULL, "sm_99"), 0); /* well formed */
	assert_int_equal(jitk_check_target(c, "sm_90"), 0);
	assert_int_equal(jitk_check_target(c, "sm_90a"), 0);
	assert_int_equal(jitk_check_target(c, "sm_99"), JITK_EINVAL);
	assert_true(!strncmp(jitk_error_last()->message, "sm_99 is not a target NVRTC ", 28));
	assert_int_equal(jitk_check_target(NULL, "sm_9x"), JITK_EINVAL);
	snprintf(want, sizeof(want), "'sm_9x%s", not_arch);
	assert_string_equal(jitk_error_last()->message, want);
	assert_int_equal(jitk_check_target(c, "compute_"), JITK_EINVAL);
	snprintf(want, sizeof(want), "'compute_%s", not_arch);
	assert_string_equal(jitk_error_last()->message, want);
	assert_int_equal(jitk_check_target(NULL, NULL), JITK_EINVAL);
	assert_int_equal(jitk_cache_format(), JITK_CACHE_FORMAT);
	jitk_compiler_free(c);
	free(specs);
}

/* The suffix rule agrees with NVRTC itself for every number it lists, and
 * numbers it does not list fail in NVRTC too. */
static void test_target_rule_matches_nvrtc(void **state)
{
	static const char src[] = "extern \"C\" __global__ void k(int *x) { *x = 1; }\n";
	static const char *const suffix[] = { "", "a", "f" };
	char *specs = repo_specs();
	jitk_compiler *c = t_compiler(specs, NULL, NULL, NULL);
	int extra[] = { 52, 91, 99, 122, 130 };
	size_t i, k, kind, n = c->narchs + JITK_ARRAY_SIZE(extra), tried = 0;

	(void)state;
	for (i = 0; i < n; i++)
		for (k = 0; k < 3; k++)
			for (kind = 0; kind < 2; kind++) {
				int cc = i < c->narchs ? c->archs[i] : extra[i - c->narchs];
				const char *kname = "k";
				char arch[32], opt[64];
				const char *opts[1] = { opt };
				jitk_compiled out;
				jitk_arch a;
				int ok, compiled;

				snprintf(arch, sizeof(arch), "%s_%d%s", kind ? "compute" : "sm", cc, suffix[k]);
				snprintf(opt, sizeof(opt), "--gpu-architecture=%s", arch);
				assert_int_equal(jitk__arch_parse(&a, arch), 0);
				ok = jitk__check_target(c, a) == 0;
				compiled = jitk__nvrtc_compile(&out, src, "t.cu", opts, 1, &kname, 1,
							       (int)kind) == 0;
				if (ok != compiled)
					fprintf(stderr, "%s: jitk says %d, NVRTC %d\n", arch, ok, compiled);
				assert_int_equal(ok, compiled);
				if (compiled)
					assert_null(jitk__image_problem(out.image, out.size, out.is_ptx, a,
									(const char *const *)out.lowered, 1));
				jitk__compiled_free(&out);
				tried++;
			}
	assert_true(tried >= 60);
	jitk_compiler_free(c);
	free(specs);
}

/* A compile that succeeds with warnings says so through the logger (the
 * log used to be dropped). */
static void test_warnings_logged(void **state)
{
	char *dir = t_tmpdir(), *specs = t_path(dir, "specs");
	char *tmpl = t_path(dir, "templates/static_quant_fp8.cuh");
	t_log log = { 0, "" };
	jitk_compiler *c;

	(void)state;
	t_copy_tree(dir, NULL, NULL);
	t_edit(tmpl, "	wait_for_prior_kernels(); // before any global memory access\n",
	       "	wait_for_prior_kernels(); // before any global memory access\n	int jitk_unused_variable;\n");
	c = t_compiler(specs, NULL, NULL, &log);
	assert_int_equal(t_build(c, "static_quant_fp8", "sm_90", NULL), 0);
	if (log.warnings != 1)
		fprintf(stderr, "%d warnings, the last: %s\n", log.warnings, log.last);
	assert_int_equal(log.warnings, 1);
	assert_true(!strncmp(log.last, "compiling static_quant_fp8 () for sm_90: static_quant_fp8.cuh(", 62));
	assert_non_null(strstr(log.last, "warning #177-D: variable \"jitk_unused_variable\" was declared but never referenced"));
	jitk_compiler_free(c);
	/* Twelve: the first eight, then how many more. */
	t_edit(tmpl, "	int jitk_unused_variable;\n",
	       "	int u0, u1, u2, u3, u4, u5, u6, u7, u8, u9, u10, u11;\n");
	log.warnings = 0;
	c = t_compiler(specs, NULL, NULL, &log);
	assert_int_equal(t_build(c, "static_quant_fp8", "sm_90", NULL), 0);
	assert_int_equal(log.warnings, 9);
	assert_string_equal(log.last, "compiling static_quant_fp8 () for sm_90: 4 more NVRTC warnings "
				      "(JITK_LOG=debug shows the log)");
	jitk_compiler_free(c);
	free(tmpl);
	free(specs);
	t_rmtree(dir);
	free(dir);
}

/* `jitk precompile` of a template that does not compile printed the first
 * NVRTC error line twice (the message quotes it, then the log). */
static void test_cli_prints_first_error_once(void **state)
{
	char *dir = t_tmpdir(), *specs = t_path(dir, "specs"), *out = t_path(dir, "stderr");
	char *tmpl = t_path(dir, "templates/static_quant_fp8.cuh"), *cmd, *text, *p;
	size_t len;
	int st, n = 0;

	(void)state;
	t_copy_tree(dir, NULL, NULL);
	t_edit(tmpl, "const float rcp", "const flaot rcp");
	cmd = jitk__asprintf("%s/jitk precompile static_quant_fp8 --arch sm_90 --specs %s --cache %s/c "
			     ">/dev/null 2>%s", build_dir, specs, dir, out);
	st = system(cmd);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 1);
	text = t_read(out, &len);
	for (p = text; (p = strstr(p, "identifier \"flaot\" is undefined")); p++)
		n++;
	if (n != 1)
		fprintf(stderr, "%s", text);
	assert_int_equal(n, 1);
	/* ... once, in the message, and the rest of the log after it. */
	assert_non_null(strstr(text, "jitk: compiling static_quant_fp8 () for sm_90 failed: "
				     "static_quant_fp8.cuh(21): error: identifier \"flaot\" is undefined\n"
				     "  \tconst flaot rcp"));
	assert_non_null(strstr(text, "1 error detected in the compilation"));
	free(text);
	free(cmd);
	free(tmpl);
	free(out);
	free(specs);
	t_rmtree(dir);
	free(dir);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_specialization),
		cmocka_unit_test(test_keys),
		cmocka_unit_test(test_size_class_keys),
		cmocka_unit_test(test_explain_gates),
		cmocka_unit_test(test_compile_errors),
		cmocka_unit_test(test_vector_loads),
		cmocka_unit_test(test_every_variant_compiles_clean),
		cmocka_unit_test(test_option_allow_list),
		cmocka_unit_test(test_spec_refuses_options),
		cmocka_unit_test(test_allowed_options_reach_nvrtc),
		cmocka_unit_test(test_options_rechecked_at_compile_time),
		cmocka_unit_test(test_more_than_38_options),
		cmocka_unit_test(test_image_checks),
		cmocka_unit_test(test_wrong_kind_cache_entries),
		cmocka_unit_test(test_template_includes),
		cmocka_unit_test(test_include_limits),
		cmocka_unit_test(test_targets_validated),
		cmocka_unit_test(test_check_target_public),
		cmocka_unit_test(test_target_rule_matches_nvrtc),
		cmocka_unit_test(test_warnings_logged),
		cmocka_unit_test(test_cli_prints_first_error_once),
	};
	char *slash;

	(void)argc;
	build_dir = jitk__strdup(argv[0]);
	if ((slash = strrchr(build_dir, '/')))
		*slash = '\0';
	if ((slash = strrchr(build_dir, '/')))
		*slash = '\0';
	else
		strcpy(build_dir, ".");
	{
		int rc = T_RUN_TESTS(tests, NULL, NULL);

		free(build_dir);
		return rc;
	}
}
