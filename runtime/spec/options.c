/* options.c - what a spec may pass to NVRTC (an allow list) and the
 * C++ keywords its names and macros may not be. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "spec/spec.h"

/* ------------------------------------------------------- NVRTC options */

/* Macro names a spec may not define or undefine: the implementation's
 * (__x, _X), CUDA's, NVRTC's and jitk's own, and C++ keywords (defining
 * one would rewrite the code jitk generates, e.g. its signature check). */
static const char *const cxx_keywords[] = {
	"alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor",
	"bool", "break", "case", "catch", "char", "char8_t", "char16_t",
	"char32_t", "class", "compl", "concept", "const", "consteval",
	"constexpr", "constinit", "const_cast", "continue", "co_await",
	"co_return", "co_yield", "decltype", "default", "defined", "delete",
	"do", "double", "dynamic_cast", "else", "enum", "explicit", "export",
	"extern", "false", "float", "for", "friend", "goto", "if", "inline",
	"int", "long", "mutable", "namespace", "new", "noexcept", "not",
	"not_eq", "nullptr", "operator", "or", "or_eq", "private", "protected",
	"public", "register", "reinterpret_cast", "requires", "return", "short",
	"signed", "sizeof", "static", "static_assert", "static_cast", "struct",
	"switch", "template", "this", "thread_local", "throw", "true", "try",
	"typedef", "typeid", "typename", "union", "unsigned", "using",
	"virtual", "void", "volatile", "wchar_t", "while", "xor", "xor_eq",
	NULL
};

int jitk__cxx_keyword(const char *s, size_t n)
{
	size_t i;

	for (i = 0; cxx_keywords[i]; i++)
		if (strlen(cxx_keywords[i]) == n && !strncmp(s, cxx_keywords[i], n))
			return 1;
	return 0;
}

static const char *macro_problem(const char *s, int value_allowed)
{
	static const char *const prefixes[] = { "cuda", "nvrtc", "jitk", NULL };
	const char *p = s;
	size_t n, i;

	if (!isalpha((unsigned char)*p) && *p != '_')
		return "the macro name is not an identifier";
	while (isalnum((unsigned char)*p) || *p == '_')
		p++;
	n = (size_t)(p - s);
	if (*p && !(value_allowed && *p == '='))
		return value_allowed ? "the macro name is not an identifier (no function-like macros)"
				     : "the macro name is not an identifier";
	if (s[0] == '_' && (s[1] == '_' || isupper((unsigned char)s[1])))
		return "the macro name is reserved (__ or _ and a capital letter)";
	for (i = 0; prefixes[i]; i++)
		if (n >= strlen(prefixes[i]) && !strncasecmp(s, prefixes[i], strlen(prefixes[i])))
			return "the macro name is reserved (CUDA*, NVRTC* and JITK* belong to the toolchain and jitk)";
	if (jitk__cxx_keyword(s, n))
		return "the macro name is a C++ keyword";
	return NULL;
}

static const char *number_problem(const char *s, long lo, long hi, int list)
{
	for (;;) {
		long v = 0;
		int digits = 0;

		if (*s == '0' && isdigit((unsigned char)s[1]))
			return "the value has a leading zero";
		while (isdigit((unsigned char)*s) && digits < 6) {
			v = v * 10 + (*s++ - '0');
			digits++;
		}
		if (!digits || isdigit((unsigned char)*s))
			return "the value is not a number";
		if (v < lo || v > hi)
			return "the value is out of range";
		if (list && *s == ',') {
			s++;
			continue;
		}
		return *s ? "the value is not a number" : NULL;
	}
}

enum { OPT_FLAG, OPT_STD, OPT_REGS, OPT_DIAG, OPT_DEFINE, OPT_UNDEF };

/* The allow list: nothing here reads or writes a file, changes the target
 * or what NVRTC produces (a cubin or PTX), passes text on to ptxas, or
 * changes jitk's numerics. docs/spec-format.md lists it with reasons. */
static const struct {
	const char *name; /* OPT_FLAG: the whole option; else its prefix */
	int kind;
} allowed_options[] = {
	{ "--restrict", OPT_FLAG },
	{ "-restrict", OPT_FLAG },
	{ "--extra-device-vectorization", OPT_FLAG },
	{ "-extra-device-vectorization", OPT_FLAG },
	{ "--generate-line-info", OPT_FLAG },
	{ "-lineinfo", OPT_FLAG },
	{ "--device-as-default-execution-space", OPT_FLAG },
	{ "-default-device", OPT_FLAG },
	{ "--device-int128", OPT_FLAG },
	{ "-device-int128", OPT_FLAG },
	{ "--disable-warnings", OPT_FLAG },
	{ "-w", OPT_FLAG },
	{ "--display-error-number", OPT_FLAG },
	{ "-err-no", OPT_FLAG },
	{ "--no-display-error-number", OPT_FLAG },
	{ "-no-err-no", OPT_FLAG },
	{ "--std=", OPT_STD },
	{ "-std=", OPT_STD },
	{ "--maxrregcount=", OPT_REGS },
	{ "-maxrregcount=", OPT_REGS },
	{ "--diag-suppress=", OPT_DIAG },
	{ "-diag-suppress=", OPT_DIAG },
	{ "--diag-warn=", OPT_DIAG },
	{ "-diag-warn=", OPT_DIAG },
	{ "--diag-error=", OPT_DIAG },
	{ "-diag-error=", OPT_DIAG },
	{ "--define-macro=", OPT_DEFINE },
	{ "-D", OPT_DEFINE },
	{ "--undefine-macro=", OPT_UNDEF },
	{ "-U", OPT_UNDEF },
};

/* Options refused with a specific reason (prefixes, long and short). */
static const struct {
	const char *prefix, *why;
} refused_options[] = {
	{ "--time", "it writes a file" },
	{ "-time", "it writes a file" },
	{ "--fdevice-time-trace", "it writes a file" },
	{ "-fdevice-time-trace", "it writes a file" },
	{ "--create-pch", "it writes a file" },
	{ "--pch-dir", "it writes files" },
	{ "-pch", "it reads and writes precompiled headers" },
	{ "--pch", "it reads and writes precompiled headers" },
	{ "--use-pch", "it reads a file" },
	{ "--include-path", "it reads files outside the template" },
	{ "-I", "it reads files outside the template" },
	{ "--pre-include", "it reads a file outside the template" },
	{ "-include", "it reads a file outside the template" },
	{ "--dlink-time-opt", "it makes LTO IR instead of a cubin" },
	{ "-dlto", "it makes LTO IR instead of a cubin" },
	{ "--gen-opt-lto", "it makes LTO IR instead of a cubin" },
	{ "--optix-ir", "it makes OptiX IR instead of a cubin" },
	{ "--device-c", "it makes relocatable code that needs a link step" },
	{ "-dc", "it makes relocatable code that needs a link step" },
	{ "--device-w", "it makes relocatable code that needs a link step" },
	{ "-dw", "it makes relocatable code that needs a link step" },
	{ "--relocatable-device-code", "it makes relocatable code that needs a link step" },
	{ "-rdc", "it makes relocatable code that needs a link step" },
	{ "--extensible-whole-program", "it changes the kind of code NVRTC makes" },
	{ "-ewp", "it changes the kind of code NVRTC makes" },
	{ "--fdevice-syntax-only", "it makes a cubin without the kernel" },
	{ "-fdevice-syntax-only", "it makes a cubin without the kernel" },
	{ "--device-debug", "a debug build (no optimization) would be cached as the kernel; "
			    "use --generate-line-info for profiling" },
	{ "-G", "a debug build (no optimization) would be cached as the kernel; "
		"use --generate-line-info for profiling" },
	{ "--ptxas-options", "jitk does not check what it passes on to ptxas" },
	{ "-Xptxas", "jitk does not check what it passes on to ptxas" },
	{ "--gpu-architecture", "jitk sets the target" },
	{ "-arch", "jitk sets the target" },
	{ "--use_fast_math", "jitk fixes the numerics" },
	{ "-use_fast_math", "jitk fixes the numerics" },
	{ "--ftz", "jitk fixes the numerics" },
	{ "-ftz", "jitk fixes the numerics" },
	{ "--prec-div", "jitk fixes the numerics" },
	{ "-prec-div", "jitk fixes the numerics" },
	{ "--prec-sqrt", "jitk fixes the numerics" },
	{ "-prec-sqrt", "jitk fixes the numerics" },
	{ "--fmad", "jitk fixes the numerics" },
	{ "-fmad", "jitk fixes the numerics" },
};

const char *jitk__nvrtc_option_problem(const char *opt)
{
	const char *p;
	size_t i;

	for (p = opt; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
			return "it contains a control character or a non-ASCII byte";
	for (i = 0; i < JITK_ARRAY_SIZE(allowed_options); i++) {
		size_t n = strlen(allowed_options[i].name);
		const char *v = opt + n;

		if (allowed_options[i].kind == OPT_FLAG) {
			if (!strcmp(opt, allowed_options[i].name))
				return NULL;
			continue;
		}
		if (strncmp(opt, allowed_options[i].name, n))
			continue;
		switch (allowed_options[i].kind) {
		case OPT_STD:
			return !strcmp(v, "c++17") || !strcmp(v, "c++20")
				       ? NULL
				       : "the templates need c++17 or c++20";
		case OPT_REGS:
			return number_problem(v, 1, 255, 0);
		case OPT_DIAG:
			return number_problem(v, 1, 99999, 1);
		case OPT_DEFINE:
			return macro_problem(v, 1);
		default:
			return macro_problem(v, 0);
		}
	}
	for (i = 0; i < JITK_ARRAY_SIZE(refused_options); i++)
		if (!strncmp(opt, refused_options[i].prefix, strlen(refused_options[i].prefix)))
			return refused_options[i].why;
	return opt[0] == '-' ? "it is not one of the options jitk allows (docs/spec-format.md lists them)"
			     : "it is not an option";
}
