/* spec.h - the spec model: families, symbols and their instances. */
#ifndef JITK_SPEC_H
#define JITK_SPEC_H

#include <stddef.h>
#include <stdint.h>

#include "jitk.h"
#include "base/arena.h"
#include "base/internal.h"
#include "spec/expr.h"

/* Arguments of one family, at most (the kernel parameter table). */
#define JITK_MAX_SPEC_ARGS 32
/* The most bytes a parameter builder (launch.builder) may make: its
 * jitk_params_out is a 64-byte header and these (the driver takes 4 KiB
 * of kernel parameters on every target). */
#define JITK_BUILT_MAX 4032
#define JITK_STR_(x) #x
#define JITK_STR(x) JITK_STR_(x)

typedef struct {
	const char *file; /* borrowed from the spec set */
	int line, col;
} spec_loc;

enum spec_ptype { PT_INT, PT_BOOL, PT_ENUM };

typedef struct {
	char *name;
	enum spec_ptype type;
	char **values; /* enum value names */
	size_t nvalues;
	int64_t *allowed; /* int: optional allowed set */
	size_t nallowed;
	int64_t min, max, multiple_of;
	char *cpp; /* enum: the C++ enum type, values rendered cpp::value */
	/* int: a size class of this shape name (size_of: m): a call takes the
	 * instance with the smallest value >= m, else the largest */
	char *size_of;
	spec_loc loc;
} spec_param;

/* Values are int64 for every type: ints as is, bools 0/1, enums the index
 * of the value name. */
typedef struct {
	size_t param;
	int64_t *vals; /* any of these */
	size_t nvals;
} spec_term;

typedef struct {
	spec_term *terms; /* all of these */
	size_t n;
} spec_cond;

typedef struct {
	int min, max; /* compute capability, e.g. 90; 0 = unbounded */
} spec_arch_range;

typedef struct {
	spec_cond when;
	spec_arch_range arch;
	char *reason;
	spec_loc loc;
} spec_gate;

typedef struct {
	char *key;
	int64_t value;
	spec_loc loc;
} spec_kv;

typedef struct {
	spec_cond when;
	spec_arch_range arch;
	spec_kv *kv;
	size_t n;
	int arch_specific; /* -1 unset, else 0/1: compile for sm_XXa */
	spec_loc loc;
} spec_tuning;

typedef struct {
	char *name; /* NULL for checks */
	char *text;
	expr *e;
	char *message; /* checks only */
	spec_loc loc;
} spec_expr;

/* Header packages (a spec directory's packages.yaml; docs/spec-format.md
 * "Header packages"): named include roots that a family may name in its
 * includes. Where a root is, is found when a family first needs it
 * (build/packages.c): $JITK_PACKAGE_<NAME>, else the first of find that
 * is a directory. */
typedef struct {
	char *env;        /* $env/path (path relative, may be NULL) */
	char *path;       /* without env: absolute */
	char *configured; /* what configure found under this name */
	spec_loc loc;
} spec_find;

typedef struct {
	char *name;
	char *description;
	spec_find *find;
	size_t nfind;
	char **search; /* the -I directories, relative to the root ("." is it) */
	size_t nsearch;
	spec_loc loc;
} spec_package;

/* A package a family includes from. */
typedef struct {
	char *name;
	size_t package; /* index in the set's packages (linked at load) */
	spec_loc loc;
} spec_include;

#define SPEC_MAX_PACKAGES 64 /* in a spec set */
#define SPEC_MAX_INCLUDES 8  /* packages of one family */
#define SPEC_MAX_SEARCH 8    /* search directories of one package */

enum spec_atype { AT_TENSOR, AT_I32, AT_I64, AT_F32, AT_TMA };

/* A TMA descriptor argument (type: tma): a CUtensorMap the runtime
 * encodes from a tensor argument of the same call (cuTensorMapEncodeTiled)
 * and passes by value (the kernel takes const __grid_constant__
 * jitk_tensor_map). box and element_strides are in the tensor's order
 * (outermost first, like its shape); every expression is a constant of
 * the variant (parameters, tuning, derived values). */
#define SPEC_TMA_MAX_RANK 5
typedef struct {
	char *tensor;      /* the tensor argument's name ... */
	size_t tensor_arg; /* ... and its index (linked when the args are read) */
	spec_loc tensor_loc;
	spec_expr *box;
	size_t nbox;
	spec_expr *elem_strides; /* NULL: all 1 */
	size_t nelem_strides;
	spec_expr swizzle;    /* bytes: 0 (none), 32, 64, 128 */
	spec_expr interleave; /* bytes: 0 (none), 16, 32 */
	spec_expr l2;         /* L2 promotion bytes: 0, 64, 128, 256 */
	int oob_nan;          /* out-of-bounds elements read as NaN, not 0 */
	int batch;            /* one more, outermost dimension of one (stride 0) */
} spec_tma;
/* scratch: device memory the runtime gives the kernel, not the caller
 * (docs/spec-format.md, "Scratch"): zeroed when made, one per stream, and
 * left by every launch as it found it. */
enum spec_io { IO_IN, IO_OUT, IO_INOUT, IO_SCRATCH };

/* Element types of tensor arguments, with DLPack's type code and bits. */
typedef struct {
	const char *name; /* "bf16" */
	const char *cpp;  /* "jitk::bf16" */
	unsigned char code, bits;
} spec_elem;

/* Value rules a configured tensor must satisfy (jitk_configure). */
enum spec_rule { RULE_NONE = 0, RULE_POSITIVE_FINITE = 1 };

/* One argument of the kernel, in parameter order. Tensors are passed to
 * the kernel as their data pointer; their shape and strides are integer
 * expressions over parameters, tuning keys, derived values, integer
 * scalar arguments and the family's dims. */
typedef struct {
	char *name;
	enum spec_atype type;
	const spec_elem *elem; /* tensors: element type */
	char *cpp;  /* C++ parameter type, e.g. "const jitk::bf16 *" */
	int is_const;
	enum spec_io io;
	spec_expr *shape; /* tensors: ndim dims */
	size_t ndim;
	spec_expr *strides; /* tensors: ndim strides in elements, or NULL = contiguous */
	spec_expr align; /* tensors: required alignment of the data in bytes */
	int nullable;
	enum spec_rule configured;
	int has_default; /* scalars: def applies when the caller omits it */
	int64_t def_i;
	float def_f;
	spec_cond when; /* absent from a symbol when false */
	spec_tma *tma;  /* AT_TMA */
	spec_loc loc;
} spec_arg;

/* A benchmark case (bench:): a symbol called on tensors of these shapes,
 * contiguous; the bytes counted are their sizes unless bytes says. */
typedef struct {
	char *name;  /* a tensor argument of the family */
	size_t arg;  /* its index */
	int64_t *dims;
	size_t ndims;
	spec_loc loc;
} spec_bench_tensor;

typedef struct {
	char *symbol; /* a selector */
	spec_bench_tensor *tensors;
	size_t ntensors;
	int64_t flops; /* 0: not counted */
	int64_t bytes; /* 0: the tensors' sizes */
	char *peak;    /* NULL, "fp8_dense" or "bf16_dense" */
	spec_loc loc;
} spec_bench;

typedef struct {
	char *name;
	char *file; /* spec file path as given */
	char *template_path;
	char *kernel;
	char *description;
	spec_param *params;
	size_t nparams;
	spec_gate *gates;
	size_t ngates;
	spec_tuning *tuning;
	size_t ntuning;
	char **tuning_keys; /* every key any tuning entry sets */
	size_t ntuning_keys;
	spec_expr *derived;
	size_t nderived;
	spec_expr *constraints;
	size_t nconstraints;
	char **options; /* extra NVRTC options */
	size_t noptions;
	spec_include *includes; /* header packages, in -I order */
	size_t nincludes;
	spec_arg *args;
	size_t nargs;
	char **dims; /* free shape variables, bound from tensor shapes */
	size_t ndims;
	size_t (*may_alias)[2]; /* argument index pairs that may share bytes */
	size_t nmay_alias;
	spec_expr grid, block, smem;
	int programmatic; /* launch.programmatic: the template waits (PDL-safe) */
	/* launch.builder: a kernel of the template that makes the kernel's one
	 * parameter on the device (docs/spec-format.md, builder), or NULL */
	char *builder;
	spec_expr *checks; /* launch-time argument checks */
	size_t nchecks;
	spec_bench *bench; /* jitk bench --family NAME */
	size_t nbench;
	spec_loc loc;
} spec_family;

/* One argument of a fallback step: the callee's argument takes the
 * caller's argument (flat: a contiguous tensor viewed as 1-D). */
typedef struct {
	char *callee;
	char *caller;
	int flat;
	spec_loc loc;
} spec_argmap;

/* A fallback step: a symbol, with arguments mapped by name (unmapped
 * ones take the caller's argument of the same name). */
typedef struct {
	char *symbol;
	spec_argmap *map;
	size_t nmap;
	spec_loc loc;
} spec_fallback;

typedef struct {
	char *name;
	spec_family *fam;
	int64_t **vals; /* per family param: the listed values */
	size_t *nvals;
	spec_gate *gates;
	size_t ngates;
	spec_fallback *fallback; /* steps, run in order */
	size_t nfallback;
	char *description;
	size_t first, ninsts; /* its instances: insts[first .. first + ninsts) */
	spec_loc loc;
} spec_symbol;

typedef struct {
	char *name; /* canonical: "sym", or "sym[cols=256]" naming every
		     * parameter the symbol lists several values for */
	spec_symbol *sym;
	int64_t *vals; /* per family param */
	size_t *fallback; /* per fallback step: the instance whose values of
			   * the shared parameters match (see explain) */
	size_t nfallback;
} spec_instance;

typedef struct {
	char **files;
	size_t nfiles;
	spec_family **fams;
	size_t nfams;
	spec_symbol **syms;
	size_t nsyms;
	spec_instance *insts;
	size_t ninsts;
	spec_package *packages; /* every packages.yaml's, in load order */
	size_t npackages;
	size_t *by_name; /* instance ids sorted by name */
	size_t nplanned; /* while loading: instances of the symbols parsed */
	jitk_arena *arena; /* owns the set and everything it points to */
} spec_set;

/* Limits that keep a spec set small whatever the input: instances are
 * counted (with overflow checks) before anything is allocated for them. */
#define SPEC_MAX_SYMBOL_INSTANCES 4096
#define SPEC_MAX_INSTANCES 65536 /* in one spec set */
#define SPEC_MAX_FALLBACKS 16    /* per symbol */
/* Parameters, tuning keys and derived values of a family, together (a
 * variant binds them all). */
#define SPEC_MAX_NAMES 64
/* Launch geometry, checked for every variant on the CPU: threads per
 * block; dynamic shared memory per block (227 KiB, the most any target
 * allows: sm_90 and sm_100; the driver checks the device's own limit);
 * pointer alignment (a power of two). */
#define SPEC_MAX_BLOCK 1024
#define SPEC_MAX_SHARED_BYTES 232448
#define SPEC_MAX_ALIGN 4096

/* Load every *.yaml of the directories (sorted by name), or the listed
 * files. JITK_ESPEC with "file:line:col: error: ..." in jitk_error_last(),
 * the offending line in its detail. */
int jitk__spec_set_load_dirs(spec_set **out, const char *const *dirs, size_t n);
int jitk__spec_set_load_files(spec_set **out, const char *const *files, size_t n);
/* Load one spec from memory, named name (template paths relative to
 * name's directory). For the fuzzer and tests. */
int jitk__spec_set_load_buffer(spec_set **out, const char *name, const char *text,
			 size_t len);
void jitk__spec_set_free(spec_set *s);

/* The naming rule (docs/spec-format.md): a selector is a symbol name,
 * optionally followed by "[param=value,...]" with any of the family's
 * parameters in any order; it selects the symbol's instances whose values
 * match. jitk__spec_select gives the symbol and a bit per instance of it
 * (out->match[i] for instance sym->first + i; malloc'd, free with
 * jitk__spec_selection_free). JITK_ENOENT for an unknown symbol (with the
 * nearest name), JITK_EINVAL for a malformed selector, an unknown
 * parameter or value; a selector matching nothing is JITK_ENOENT. */
typedef struct {
	const spec_symbol *sym;
	unsigned char *match;
	size_t n; /* instances selected */
} spec_selection;
int jitk__spec_select(spec_selection *out, const spec_set *s, const char *selector);
void jitk__spec_selection_free(spec_selection *sel);
/* Exactly one instance: the selector must select one (JITK_EINVAL naming
 * the candidates otherwise). */
int jitk__spec_find(const spec_set *s, const char *selector, size_t *out);
/* Index of a symbol by name, or -1. */
int jitk__spec_symbol_index(const spec_set *s, const char *name);
/* Index of an argument of family f by name, or -1. */
int jitk__spec_arg_index(const spec_family *f, const char *name);
/* The element type called name ("bf16"), or NULL. */
const spec_elem *jitk__spec_elem(const char *name);
/* Index of a family parameter, or -1. */
int jitk__spec_param_index(const spec_family *f, const char *name);
/* Render a parameter value as text ("layer", "true", "3072"). */
const char *jitk__spec_value_text(const spec_param *p, int64_t v, char buf[32]);
int jitk__spec_cond_holds(const spec_cond *c, const int64_t *vals);

/* Record an error whose message quotes spec text: control characters
 * (a newline in a block scalar, an escape sequence) are written as \n,
 * \x1b... so that the message stays one printable line. */
int jitk__spec_error(int status, const char *detail, const char *fmt, ...)
	JITK_PRINTF(3, 4);
/* Append s to b with control characters escaped the same way. */
void jitk__spec_escape(jbuf *b, const char *s);
/* s, or its first 96 bytes and "..." when longer (a long expression quoted
 * in a message); from a small per-thread ring: use it at once. */
const char *jitk__spec_quote(const char *s);
/* JITK_EINVAL: the first len bytes of text are not an architecture (one
 * printable line: "'sm_90\n' is not an architecture (sm_90, ...)"). */
int jitk__spec_arch_error(const char *text, size_t len);

/* ----------------------------------------- NVRTC options (options.c) */

/* NULL when a spec may pass opt to NVRTC (an allow list of options that
 * neither read nor write files, nor change the target, the kind of output
 * or the numerics), else a static reason. */
const char *jitk__nvrtc_option_problem(const char *opt);
/* The n bytes at s are a C++20 keyword or alternative token ("int",
 * "template", "and"; also "defined"). */
int jitk__cxx_keyword(const char *s, size_t n);

#endif
