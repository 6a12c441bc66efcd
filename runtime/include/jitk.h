/*
 * jitk.h - JIT kernel compiler and loader for CUDA.
 *
 * Two layers, one header:
 *
 *  - the compiler (jitk_compiler_*): YAML specs, template instantiation,
 *    NVRTC and the on-disk cubin cache. It needs no GPU and no libcuda.so.1,
 *    so CPU-only machines can precompile caches.
 *  - the runtime (jitk_runtime_*, jitk_kernel_*, and the generic call
 *    jitk_call): bound to one device through the CUDA Driver API, loaded at
 *    run time; kernels are requested by name, resolved once (cache layers,
 *    else NVRTC) and launched with cuLaunchKernel.
 *
 * Every kernel family is reachable through the generic call (jitk_call),
 * which checks tensors against the spec's argument table; the library
 * holds no family's code. Typed calls for C users are generated from a
 * family's spec (jitk header FAMILY: static inline functions over
 * jitk_call, docs/api.md "Typed calls").
 *
 * Conventions: functions return a status (JITK_OK == 0, errors < 0,
 * JITK_FALLBACK > 0). The out-parameter comes first and is named out; what
 * is returned through **out is owned by the caller unless said otherwise.
 * After a failure, jitk_error_last() tells what happened on this thread.
 * The library never prints; it logs through the callback in the options.
 *
 * Output structs: a struct the caller passes for the library to fill
 * (jitk_precompile_counts, jitk_cache_summary, jitk_clear_result,
 * jitk_prune_result, jitk_remote_stats, jitk_bundle_summary,
 * jitk_sign_stats, jitk_sig_summary, jitk_kernel_info, jitk_call_info,
 * jitk_stats) starts with unsigned version, as the
 * options structs do; set it before the call (its _INIT macro does). The
 * library accepts every version from 1 to its own, fills the fields of the
 * caller's version and writes no byte past them, so that a program built
 * against an older header - whose struct is that version's size - keeps
 * working with a newer library; fields are only ever appended, each with
 * a new version. Any other version is JITK_EINVAL ("TYPE version V is not
 * 1 to N"), with nothing written. What the library allocates or owns
 * (the arrays of jitk_manifest_read and jitk_bench_cases, jitk_error) is
 * read through its pointer and never versioned: new fields there come
 * with new functions.
 */
#ifndef JITK_H
#define JITK_H

#include <stddef.h>
#include <stdint.h>

#include "jitk/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built with hidden visibility; what is here is exported. */
#if defined(__GNUC__) && __GNUC__ >= 4
#define JITK_API __attribute__((visibility("default")))
#else
#define JITK_API
#endif

/* ---------------------------------------------------------------- status */

/* X(name, value, description): one list generates the enum, jitk_strerror()
 * and jitk_status_name(). */
#define JITK_STATUS_LIST(X)                                                   \
	X(OK, 0, "success")                                                   \
	X(FALLBACK, 1, "fused path not applicable; nothing was launched")     \
	X(EINVAL, -1, "invalid argument")                                     \
	X(ENOMEM, -2, "out of memory")                                        \
	X(ENOENT, -3, "no such symbol")                                       \
	X(ESPEC, -4, "invalid kernel spec")                                   \
	X(EARCH, -5, "not available on this architecture")                   \
	X(ECOMPILE, -6, "kernel compilation failed")                          \
	X(ENOCOMPILE, -7, "cache miss while compiling is disabled")           \
	X(EIO, -8, "input/output error")                                      \
	X(ENODEV, -9, "no CUDA driver or device")                             \
	X(EDRIVER, -10, "CUDA driver call failed")                            \
	X(ECAPTURE, -11, "kernel not resolved and the stream is capturing")

typedef enum {
#define JITK_STATUS_ENUM_(name, value, text) JITK_##name = value,
	JITK_STATUS_LIST(JITK_STATUS_ENUM_)
#undef JITK_STATUS_ENUM_
	JITK_STATUS_END_ = -12
} jitk_status;

/* A static description of status ("invalid argument"); never NULL. */
JITK_API const char *jitk_strerror(int status);
/* The enumerator's name without prefix ("EINVAL"); never NULL. */
JITK_API const char *jitk_status_name(int status);

/* What the last failing call on this thread reported. message is one line
 * that names what failed (file:line:col for specs; symbol, variant and
 * architecture for compiles). detail holds the full NVRTC log after a
 * compile error (else ""). Both stay valid until the next jitk call on this
 * thread. Never NULL; status is JITK_OK when nothing failed yet. */
typedef struct {
	int status;
	const char *message;
	const char *detail;
} jitk_error;
JITK_API const jitk_error *jitk_error_last(void);

/* --------------------------------------------------------------- logging */

typedef enum {
	JITK_LOG_ERROR = 0,
	JITK_LOG_WARN = 1,
	JITK_LOG_INFO = 2,
	JITK_LOG_DEBUG = 3
} jitk_log_level;

/* Called with one line (no newline), possibly from several threads at
 * once; must not call back into jitk. */
typedef void (*jitk_log_fn)(void *payload, jitk_log_level level,
			    const char *message);

/* ------------------------------------------------------------ library */

/* "0.2.0": the library's version (JITK_VERSION is the header's). */
JITK_API const char *jitk_version(void);
/* The same as one number, 10000*major + 100*minor + patch (200 for
 * 0.2.0): what a program built with one jitk.h compares at run time with
 * JITK_VERSION_NUMBER, the header's, to learn what the library it runs
 * with has (an older library rejects newer options versions). */
JITK_API int jitk_version_number(void);
/* Free memory the library returned through an out-parameter (texts of
 * jitk_explain, jitk_source, jitk_describe, jitk_select). NULL is a no-op. */
JITK_API void jitk_free(void *p);

/* -------------------------------------------------------------- compiler */

typedef struct jitk_compiler jitk_compiler;

/* Options of the compiler. NULL strings and negative integers mean "take
 * it from the environment, else the default":
 *   specs       colon-separated spec directories ($JITK_SPECS, else the
 *               installed share/jitk/specs, else ./specs)
 *   cache_dir   writable cache ($JITK_CACHE_DIR, else $XDG_CACHE_HOME/jitk,
 *               else ~/.cache/jitk); "" = no writable cache
 *   cache_path  colon-separated read-only layers ($JITK_CACHE_PATH)
 *   no_compile  a cache miss is an error ($JITK_NO_COMPILE=1)
 *   force_compile  ignore every cache hit ($JITK_FORCE_COMPILE=1)
 *   dump_dir    write every instantiated source there ($JITK_DUMP_DIR)
 *   log_level   $JITK_LOG=error|warn|info|debug, default warn
 *   cache_read_only  use cache_dir for lookups only, never write it
 *               ($JITK_CACHE_READONLY=1); misses compile in memory
 * Version 2 adds the remote tier (docs/cache-format.md, "The remote"):
 *   remote      comma-separated base URLs, http:// or https://
 *               ($JITK_REMOTE_CACHE); "" = none. Objects are
 *               URL/v1/<key>; several URLs share the keys by rendezvous
 *               hashing. Looked up after the local layers and cache; a
 *               hit is verified like a local entry, then published into
 *               the writable cache; a miss is compiled and uploaded (PUT).
 *               Requests to S3 are signed (SigV4) when AWS_ACCESS_KEY_ID
 *               and AWS_SECRET_ACCESS_KEY are set.
 *   remote_read_only  look up only, never upload ($JITK_REMOTE_READONLY=1)
 *   remote_lease  redis://[:PASSWORD@]HOST[:PORT][/DB] ($JITK_REMOTE_LEASE):
 *               a process about to compile a key the remote lacks takes
 *               a lease on it; the others poll the remote until the lease
 *               holder has uploaded it or the lease expired; "" = none
 *   remote_connect_timeout_ms  per connection (HTTP and Redis); < 1: 100.
 *               Also each Redis command with its whole reply.
 *   remote_timeout_ms  per HTTP request, all included; < 1: 2000. Also
 *               each URL's time budget: answers slower than a tenth of it
 *               are charged to the budget, a request takes no longer than
 *               what is left of it, and once it is spent the URL is off
 *   remote_lease_ttl_ms  how long a lease lasts (the longest anyone waits
 *               for its holder, plus a second); < 1: 10000. Waits that end
 *               without the holder's upload share a budget of one such
 *               wait per process; once it is spent, leases are off
 * A URL that fails once (refused, timed out, an HTTP status other than 200,
 * 404 or a 2xx for an upload, a cut transfer) or spends its time budget is
 * off for the rest of the process, with one warning; a lease server that
 * fails or spends its wait budget is off likewise. The remote never fails
 * a build. Credentials in a URL never reach a message (masked: ***).
 *   signing_key  FILE ($JITK_SIGNING_KEY): a secret key (jitk_key_generate)
 *               that signs every entry this compiler compiles, and so what
 *               it publishes to the cache and uploads to the remote
 *   trusted_keys the public keys whose signatures are trusted
 *               ($JITK_TRUSTED_KEYS): "NAME:BASE64" words separated by
 *               white space or commas, or a file of them (a value starting
 *               with '/' or '.'; '#' comments)
 *   require_sigs 1: a remote object or a bundle layer's entry is used only
 *               with a valid signature of a trusted key; refused ones are
 *               never used nor stored, counted (jitk_sign_stats_get),
 *               warned about once per URL or bundle and compiled; 0: none
 *               is checked; -1 (default): $JITK_REQUIRE_SIGS (1/true/yes/on,
 *               0/false/no/off; anything else: one warning, and required),
 *               else on whenever trusted_keys is set and not ""
 *               (a file holding no key yet included)
 * A bad signing key or trusted key list is JITK_EINVAL naming it.
 * Flags and options win over the environment. Fill one with
 * jitk_compiler_options_init (or JITK_COMPILER_OPTIONS_INIT); a program
 * built against an older header passes its older version, which stays
 * accepted. */
typedef struct {
	unsigned version;
	const char *specs;
	const char *cache_dir;
	const char *cache_path;
	int no_compile;
	int force_compile;
	const char *dump_dir;
	jitk_log_fn log;
	void *log_payload;
	int log_level;
	int cache_read_only;
	/* version 2 */
	const char *remote;
	int remote_read_only;
	const char *remote_lease;
	int remote_connect_timeout_ms;
	int remote_timeout_ms;
	int remote_lease_ttl_ms;
	/* version 3 */
	const char *signing_key;
	const char *trusted_keys;
	int require_sigs;
} jitk_compiler_options;

#define JITK_COMPILER_OPTIONS_VERSION 3
#define JITK_COMPILER_OPTIONS_INIT                                            \
	{ JITK_COMPILER_OPTIONS_VERSION, NULL, NULL, NULL, -1, -1, NULL,      \
	  NULL, NULL, -1, -1, NULL, -1, NULL, -1, -1, -1, NULL, NULL, -1 }

/* Set every field to its default for the given version (1 to
 * JITK_COMPILER_OPTIONS_VERSION). JITK_EINVAL for another version. */
JITK_API int jitk_compiler_options_init(jitk_compiler_options *opts, unsigned version);

/* Load and validate every spec, set up the cache. *out is the caller's,
 * freed with jitk_compiler_free(). JITK_ESPEC (with file:line:col in
 * jitk_error_last()) when a spec is bad, JITK_EINVAL for bad options,
 * JITK_ENOMEM. An unusable cache directory is not an error: the compiler
 * then works in memory and logs one warning. Thread-safe once created. */
JITK_API int jitk_compiler_new(jitk_compiler **out, const jitk_compiler_options *opts);
/* NULL is a no-op. */
JITK_API void jitk_compiler_free(jitk_compiler *compiler);

/* Names (docs/spec-format.md, "Names"). A symbol is a name the specs
 * define ("tadd3"); its instances are named
 * "symbol[param=value,...]" after the parameters the symbol lists several
 * values for (just "symbol" when it has one instance). A selector is a
 * symbol name with an optional "[param=value,...]" naming any parameters;
 * it selects the matching instances. It is read to its end: nothing may
 * follow the ']', and an empty item, a missing '=' or value, or a stray
 * bracket is JITK_EINVAL, the message naming the column ("'x[a=1]]':
 * column 8: ...") and the error's detail quoting the selector with a caret
 * under it. Every function taking a NAME takes a selector; those acting
 * on one instance need it to select exactly one (JITK_EINVAL naming the
 * candidates otherwise). */
JITK_API size_t jitk_symbol_count(const jitk_compiler *compiler);
JITK_API const char *jitk_symbol_name(const jitk_compiler *compiler, size_t i);
JITK_API size_t jitk_instance_count(const jitk_compiler *compiler);
JITK_API const char *jitk_instance_name(const jitk_compiler *compiler, size_t i);
/* The instances selector selects: *out is a jitk_free'd array of *n
 * indices for jitk_instance_name. JITK_ENOENT (with the nearest symbol
 * name), JITK_EINVAL for a malformed selector. */
JITK_API int jitk_select(size_t **out, size_t *n, const jitk_compiler *compiler,
			 const char *selector);

/* The symbols of the specs as JSON (docs/api.md "Describing symbols"):
 * families, parameters, instances, argument tables with dtypes, shapes,
 * strides, io and defaults, fallback steps. selector NULL = every symbol.
 * *out is jitk_free'd. For bindings that generate their ops from it. */
JITK_API int jitk_describe(char **out, const jitk_compiler *compiler, const char *selector);

/* Human-readable decision for every instance NAME selects on ARCH
 * ("sm_90", "sm_100a", ...): the variant that runs, its arguments with
 * their shapes, or the fallback and the reason. *out is jitk_free'd.
 * Returns JITK_OK when the symbol or its fallback can run, JITK_EARCH when
 * neither can (text still written), JITK_ENOENT, JITK_EINVAL for a
 * malformed architecture or one NVRTC cannot compile for (the message lists
 * those it can). Needs no GPU. */
JITK_API int jitk_explain(char **out, jitk_compiler *compiler, const char *name,
			  const char *arch);

/* jitk_explain, and for each instance that runs (or fallback step), which
 * image a GPU of ARCH (sm_NN) would run from the compiler's cache layers
 * and writable cache, and why: the targets a runtime's lookup tries, in
 * order - the exact one, the family targets (an sm_100f image runs on
 * sm_103), then PTX - each with its key and what the cache holds for it,
 * then the image that wins ("image:   sm_100f, cached ...") or that the
 * kernel would be compiled. Reads the cache as a lookup does: create the
 * compiler with cache_read_only = 1 to leave the cache untouched (no
 * recency stamps, no removal of entries that fail verification).
 * JITK_EINVAL for an ARCH that is not sm_NN; otherwise as jitk_explain. */
JITK_API int jitk_explain_cache(char **out, jitk_compiler *compiler, const char *name,
				const char *arch);

/* The translation unit NVRTC compiles for the one instance NAME selects
 * on ARCH (*out), and its options followed by one line
 * "name-expression EXPR" (*out_options, NULL allowed). jitk_free both. */
JITK_API int jitk_source(char **out, char **out_options, jitk_compiler *compiler,
			 const char *name, const char *arch);

/* Where a precompiled image came from. */
typedef enum {
	JITK_ORIGIN_COMPILED = 0, /* NVRTC ran now */
	JITK_ORIGIN_CACHE = 1,    /* the writable cache */
	JITK_ORIGIN_LAYER = 2,    /* a read-only layer */
	JITK_ORIGIN_MEMORY = 3,   /* compiled, but writing the cache failed */
	JITK_ORIGIN_REMOTE = 4    /* the remote tier (now also in the writable cache) */
} jitk_origin;

/* Make sure the cubin of the one instance NAME selects, for ARCH, is in
 * the cache (compiling it if needed). *out (NULL allowed) says where it
 * came from. JITK_EARCH when a gate forbids the symbol there,
 * JITK_ECOMPILE, JITK_ENOCOMPILE, JITK_ESPEC, JITK_EINVAL as for
 * jitk_explain. */
JITK_API int jitk_precompile(jitk_origin *out, jitk_compiler *compiler, const char *name,
			     const char *arch);

/* ------------------------------------------------------------ manifests */

/* A warmup manifest (written by jitk_runtime_manifest or
 * JITK_MANIFEST_OUT) is text, one "INSTANCE ARCH" line per instance a
 * process resolved ("tadd3[cols=64] sm_90"); blank lines and lines
 * starting with '#' are comments. A NAME may be any selector (a symbol
 * name stands for every instance it has). Several processes may append to
 * one file: repeated lines are read once. */
typedef struct {
	const char *instance;
	const char *arch;
} jitk_manifest_item;

/* Read the manifest at path: *out is an array of *n distinct (instance,
 * architecture) pairs, in the order they first appear, in one block that
 * jitk_free frees (the strings are inside it). archs (NULL: as recorded)
 * is a comma-separated list of architectures that replaces each recorded
 * one: every instance once per listed architecture. JITK_EIO when the
 * file cannot be read; JITK_ENOENT (an unknown symbol) or JITK_EINVAL (a
 * malformed line, an architecture NVRTC cannot compile for) with
 * "PATH:LINE: error: ..." in jitk_error_last(). */
JITK_API int jitk_manifest_read(jitk_manifest_item **out, size_t *n,
				const jitk_compiler *compiler, const char *path,
				const char *archs);

/* What jitk_precompile_manifest did: images compiled now (or kept in
 * memory), found in the cache or a layer, found in a remote tier, that
 * failed, and instances a gate keeps off their architecture. An output
 * struct (see the top of this file): set version first. */
typedef struct {
	unsigned version;
	size_t compiled, cached, remote, failed, gated;
} jitk_precompile_counts;

#define JITK_PRECOMPILE_COUNTS_VERSION 1
#define JITK_PRECOMPILE_COUNTS_INIT { JITK_PRECOMPILE_COUNTS_VERSION, 0, 0, 0, 0, 0 }

/* Called after each item: its index, jitk_precompile's status and the
 * origin (meaningful when the status is JITK_OK). */
typedef void (*jitk_precompile_progress_fn)(void *ctx, size_t index, size_t n,
					    const jitk_manifest_item *item, int status,
					    jitk_origin origin);

/* jitk_manifest_read, then jitk_precompile of every item, in order, one
 * after the other. out (NULL allowed) gets the counts (JITK_EINVAL before
 * anything is read for a version of it that is not 1 to
 * JITK_PRECOMPILE_COUNTS_VERSION). JITK_OK when no
 * item failed (gated items are not failures); else the status and message
 * of the first failure, after every item was tried. Errors of
 * jitk_manifest_read are returned before anything is compiled. A CLI
 * that compiles in parallel reads the manifest itself and calls
 * jitk_precompile for each item. */
JITK_API int jitk_precompile_manifest(jitk_precompile_counts *out, jitk_compiler *compiler,
				      const char *path, const char *archs,
				      jitk_precompile_progress_fn progress, void *ctx);

/* Make sure ARCH is a target this NVRTC can compile for: JITK_EINVAL
 * naming it and listing those it can, else JITK_OK. With compiler NULL,
 * only that ARCH is well formed ("sm_90", "sm_100a", "compute_90"...):
 * JITK_EINVAL saying it is not an architecture, else JITK_OK. */
JITK_API int jitk_check_target(const jitk_compiler *compiler, const char *arch);

/* Tool helpers: jitk_list, jitk_nearest and jitk_parse_size serve the
 * jitk command and the bindings. They are exported but not part of the
 * stable API: their texts and limits may change in any release.
 *
 * A table of every instance the selector selects (NULL: all): name,
 * family, parameter values and the architecture gates that apply, one
 * line each after a header line (jitk list). *out is jitk_free'd. */
JITK_API int jitk_list(char **out, const jitk_compiler *compiler, const char *selector);

/* The writable cache directory this compiler uses (borrowed), or NULL
 * when it works without one. */
JITK_API const char *jitk_compiler_cache_dir(const jitk_compiler *compiler);

/* JITK_OK when a compiler given dir as its cache_dir would write cache
 * entries there: the directories are this user's (made when missing), not
 * writable by others, and writable. Else JITK_EIO with the reason in
 * jitk_error_last(), which a compiler only warns about before compiling
 * in memory; for callers to whom a cache that cannot be written is a
 * failure (jitk precompile --cache DIR). JITK_EINVAL for NULL or "". */
JITK_API int jitk_cache_check_writable(const char *dir);

/* The version of the NVRTC library jitk runs with. */
JITK_API int jitk_nvrtc_version(int *major, int *minor);

/* (A tool helper, see jitk_list.) Of n candidate words, the one nearest to word (edit distance, within a
 * bound that grows with the word's length): its index, or -1. For "did
 * you mean" messages. */
JITK_API int jitk_nearest(const char *word, const char *const *candidates, size_t n);

/* (A tool helper, see jitk_list.) A size with an optional K, M, G or T suffix (powers of 1024; "B" or
 * "iB" may follow): "512M", "10G". JITK_EINVAL for anything else. */
JITK_API int jitk_parse_size(uint64_t *out, const char *text);

/* ----------------------------------------------- cache administration */

/* The default writable cache directory: $JITK_CACHE_DIR, else
 * $XDG_CACHE_HOME/jitk, else ~/.cache/jitk. *out is jitk_free'd;
 * JITK_ENOENT when none of them is set. */
JITK_API int jitk_cache_default_dir(char **out);

/* The format number of the cache entries this library writes (4; it
 * reads format 3 entries too, as unsigned ones: docs/cache-format.md). */
JITK_API int jitk_cache_format(void);

/* Each function below administers the cache at dir (the directory
 * holding v1/). It refuses, with one message, a dir that does not exist
 * (JITK_ENOENT, "no cache at DIR") or whose directories fail the trust
 * checks of lookups (JITK_EIO). The walk never follows a symbolic link
 * and only touches names of jitk's schemes (docs/cache-format.md); other
 * files are foreign: counted, never removed. Their results are output
 * structs (see the top of this file): set version first (the _INIT
 * macros); another version is JITK_EINVAL before anything is looked at. */
typedef struct {
	unsigned version;
	uint64_t entries, bytes, bad, temp_files, lock_files, foreign;
} jitk_cache_summary;

#define JITK_CACHE_SUMMARY_VERSION 1
#define JITK_CACHE_SUMMARY_INIT { JITK_CACHE_SUMMARY_VERSION, 0, 0, 0, 0, 0, 0 }
/* report (NULL allowed) gets each bad entry (foreign == 0) and, when
 * verifying, each foreign file (foreign == 1). */
typedef void (*jitk_cache_report_fn)(void *ctx, const char *path, const char *problem,
				     int foreign);
/* Count (verify: also read and check every entry as a lookup does). */
JITK_API int jitk_cache_stats(jitk_cache_summary *out, const char *dir, int verify,
			      jitk_cache_report_fn report, void *ctx);

/* Remove every entry, temporary file and bad entry (lock files stay).
 * failed: what could not be removed. */
typedef struct {
	unsigned version;
	uint64_t removed, foreign, failed;
} jitk_clear_result;

#define JITK_CLEAR_RESULT_VERSION 1
#define JITK_CLEAR_RESULT_INIT { JITK_CLEAR_RESULT_VERSION, 0, 0, 0 }
JITK_API int jitk_cache_clear(jitk_clear_result *out, const char *dir);

/* Remove the bad entries verify names, temporary files older than an
 * hour, and the least recently used entries beyond max_bytes (a positive
 * size as jitk_parse_size reads it; NULL: no bound). A max_bytes that is
 * not one is JITK_EINVAL before anything is looked at or removed. */
typedef struct {
	unsigned version;
	uint64_t bad, temp, evicted, evicted_bytes, bytes_left, foreign, failed;
} jitk_prune_result;

#define JITK_PRUNE_RESULT_VERSION 1
#define JITK_PRUNE_RESULT_INIT { JITK_PRUNE_RESULT_VERSION, 0, 0, 0, 0, 0, 0, 0 }
JITK_API int jitk_cache_prune(jitk_prune_result *out, const char *dir, const char *max_bytes);

/* Counters of the remote tier of one compiler (all zero without one).
 * An output struct (see the top of this file): set version
 * (JITK_REMOTE_STATS_INIT does) before the call; the fields of that
 * version are filled, so the struct can grow. */
typedef struct {
	unsigned version;
	uint64_t hits;         /* objects fetched, verified and used */
	uint64_t misses;       /* lookups the remote had no object for */
	uint64_t uploads;      /* objects written (PUT) */
	uint64_t rejects;      /* objects that failed verification: neither used nor stored */
	uint64_t errors;       /* failed requests and spent time budgets; each turns its URL off */
	uint64_t lease_taken;  /* cold keys this process took the lease on */
	uint64_t lease_waits;  /* cold keys another process held the lease on */
	uint64_t lease_errors; /* lease server failures, a spent wait budget (leases are then off) */
	double ms;             /* time in HTTP requests */
	double lease_wait_ms;  /* time waiting for other processes' leases */
} jitk_remote_stats;

#define JITK_REMOTE_STATS_VERSION 1
#define JITK_REMOTE_STATS_INIT { JITK_REMOTE_STATS_VERSION, 0, 0, 0, 0, 0, 0, 0, 0, 0.0, 0.0 }

/* JITK_EINVAL for a NULL argument or a version that is not 1 to
 * JITK_REMOTE_STATS_VERSION. Thread-safe. */
JITK_API int jitk_remote_stats_get(jitk_remote_stats *out, const jitk_compiler *compiler);

/* --------------------------------------------------------------- bundles */

/* A bundle is one file holding verified cache entries and a sorted index
 * (docs/cache-format.md, "Bundles"): for shared file systems with file
 * count quotas, or a cache shipped inside a wheel or an image. A bundle
 * named in JITK_CACHE_PATH (or cache_path) is a read-only layer, like a
 * directory. */

/* What a bundle operation did: an output struct (see the top of this
 * file). Set version (JITK_BUNDLE_SUMMARY_INIT) first; a version that is
 * not 1 to JITK_BUNDLE_SUMMARY_VERSION is JITK_EINVAL before anything is
 * read. */
typedef struct {
	unsigned version;
	uint64_t entries; /* packed, unpacked, or verified good */
	uint64_t bytes;   /* their size in entry bytes */
	uint64_t skipped; /* pack: not of an architecture asked for; unpack: already there */
	uint64_t bad;     /* entries that failed verification (never packed or unpacked) */
} jitk_bundle_summary;

#define JITK_BUNDLE_SUMMARY_VERSION 1
#define JITK_BUNDLE_SUMMARY_INIT { JITK_BUNDLE_SUMMARY_VERSION, 0, 0, 0, 0 }

/* Called for each bad entry: what names it (a path, or "key KEY (TARGET)"
 * for an entry of a bundle), problem says why ("checksum mismatch"). */
typedef void (*jitk_bundle_report_fn)(void *payload, const char *what, const char *problem);

/* Write every entry of the cache at cache_dir (NULL: the default writable
 * cache, as jitk_compiler_new finds it) whose target is for one of the SM
 * numbers in archs (comma-separated: "sm_90,sm_100"; sm_90 takes sm_90,
 * sm_90a and compute_90 entries; NULL = every entry) into the bundle file.
 * Each entry is verified as a lookup would verify it (bad ones are
 * reported and left out). The file is written next to its final name and
 * renamed into place, so a reader never sees part of one; entries are in
 * key order, so the same cache gives the same bytes. With
 * $JITK_SIGNING_KEY set, every entry is signed with that key (replacing
 * the signature it had; ed25519 is deterministic, so the bytes stay the
 * same for the same key). JITK_ENOENT or JITK_EIO (refused as jitk cache
 * verify refuses a cache), JITK_EINVAL for a bad architecture list,
 * JITK_EIO when the file cannot be written or the signing key cannot be
 * used. report and out may be NULL. */
JITK_API int jitk_cache_pack(jitk_bundle_summary *out, const char *file, const char *cache_dir,
			     const char *archs, jitk_bundle_report_fn report, void *payload);

/* Publish every entry of the bundle file into the writable cache at
 * cache_dir (NULL: the default) with the normal atomic write path; entries
 * already there (and good) are skipped, bad ones reported and left out -
 * among them those $JITK_TRUSTED_KEYS and $JITK_REQUIRE_SIGS refuse, as a
 * compiler would refuse them (JITK_EINVAL for a malformed key list).
 * JITK_ENOENT (no such file), JITK_EIO (not a bundle, a header or index
 * that fails verification, or a cache directory that cannot be used). */
JITK_API int jitk_cache_unpack(jitk_bundle_summary *out, const char *file, const char *cache_dir,
			       jitk_bundle_report_fn report, void *payload);

/* Check every byte of the bundle file: header and index (checksum, order,
 * bounds, layout, zero padding) and every entry as a lookup would (header,
 * checksum, key and target as indexed, code for its target). JITK_OK
 * with out->bad counting the bad entries (each reported);
 * JITK_ENOENT, or JITK_EIO when the header or index is bad (message says
 * why). */
JITK_API int jitk_bundle_verify(jitk_bundle_summary *out, const char *file,
				jitk_bundle_report_fn report, void *payload);

/* ------------------------------------------------------------ provenance */

/* Who signed a cache entry (docs/cache-format.md, "Signatures"). */
typedef enum {
	JITK_SIG_UNSIGNED = 0,  /* no signature */
	JITK_SIG_TRUSTED = 1,   /* a valid signature of a trusted key */
	JITK_SIG_UNTRUSTED = 2, /* signed with a key that is not trusted */
	JITK_SIG_BAD = 3        /* names a trusted key, but the signature does not verify */
} jitk_sig_state;

/* Make an ed25519 key named name (1 to 64 of [A-Za-z0-9._-], starting
 * with a letter or a digit): the secret key is written to secret_file
 * ("NAME:BASE64", mode 0600), which must not exist (an existing file or a
 * symbolic link there is refused, never written through); *out gets the
 * public key line "NAME:BASE64" for JITK_TRUSTED_KEYS (jitk_free it).
 * JITK_EINVAL for a bad name, JITK_EIO (naming the file) when it cannot
 * be created. */
JITK_API int jitk_key_generate(char **out, const char *name, const char *secret_file);

/* The provenance counters of one compiler, an output struct (see the top
 * of this file). Set version first (JITK_SIGN_STATS_INIT). */
typedef struct {
	unsigned version;
	uint64_t signed_entries; /* entries this compiler compiled and signed */
	uint64_t verified;       /* objects whose trusted signature was checked, then used */
	uint64_t refused;        /* remote objects and bundle entries refused: unsigned,
				    untrusted or a bad signature */
	uint64_t unverified;     /* used unchecked: trusted keys set, signatures not required */
	double verify_ms;        /* time spent checking signatures */
	unsigned trusted_keys;   /* how many keys are trusted */
	int required;            /* whether signatures are required */
	int signing;             /* whether this compiler signs */
} jitk_sign_stats;

#define JITK_SIGN_STATS_VERSION 1
#define JITK_SIGN_STATS_INIT { JITK_SIGN_STATS_VERSION, 0, 0, 0, 0, 0.0, 0, 0, 0 }

/* JITK_EINVAL for a NULL argument or a version that is not 1 to
 * JITK_SIGN_STATS_VERSION. Thread-safe. */
JITK_API int jitk_sign_stats_get(jitk_sign_stats *out, const jitk_compiler *compiler);

/* What jitk_signatures_check found, an output struct (see the top of
 * this file): set version first. broken: entries that fail the checks of
 * a lookup (jitk cache verify names them). */
typedef struct {
	unsigned version;
	uint64_t entries, trusted, untrusted, bad, unsigned_entries, broken;
} jitk_sig_summary;

#define JITK_SIG_SUMMARY_VERSION 1
#define JITK_SIG_SUMMARY_INIT { JITK_SIG_SUMMARY_VERSION, 0, 0, 0, 0, 0, 0 }

/* Called per entry: what names it (a path, or "key KEY" in a bundle), its
 * target, the state of its signature and the key name it claims ("" when
 * unsigned). */
typedef void (*jitk_sig_report_fn)(void *ctx, const char *what, const char *target,
				   jitk_sig_state state, const char *signer);

/* Check who signed each entry of path - a cache directory (holding v1/) or
 * a bundle file - against trusted_keys (as the trusted_keys option; NULL:
 * $JITK_TRUSTED_KEYS). Reads only. JITK_EINVAL for a bad key list,
 * JITK_ENOENT or JITK_EIO as jitk_cache_stats and jitk_bundle_verify
 * refuse a cache or a bundle. */
JITK_API int jitk_signatures_check(jitk_sig_summary *out, const char *path,
				   const char *trusted_keys, jitk_sig_report_fn report, void *ctx);

/* --------------------------------------------------------------- runtime */

typedef struct jitk_runtime jitk_runtime;
typedef struct jitk_kernel jitk_kernel;

/* A CUstream or cudaStream_t (NULL = the legacy default stream). */
typedef void *jitk_stream;
/* A CUdeviceptr, or a cudaMalloc'd pointer cast to an integer. */
typedef uint64_t jitk_devptr;

/* What happens when a kernel that is not resolved yet is requested while
 * its stream is being captured into a CUDA graph. */
typedef enum {
	/* Return JITK_ECAPTURE and launch nothing: resolve (jitk_preload)
	 * before capture. The capture itself is left intact. Default. */
	JITK_CAPTURE_ERROR = 0,
	/* Resolve anyway: compiling and cuLibraryLoadData are not stream
	 * operations, so a relaxed-mode capture survives. */
	JITK_CAPTURE_RESOLVE = 1
} jitk_capture_policy;

/* A sealed runtime (jitk_runtime_seal): what a resolve that would compile
 * - a cache miss - does. A cache hit is always fine. */
typedef enum {
	JITK_SEAL_OFF = 0,  /* compile as usual */
	JITK_SEAL_WARN = 1, /* log a warning naming symbol, instance, arch and key, then compile */
	JITK_SEAL_ERROR = 2 /* refuse: JITK_ENOCOMPILE with the same names; nothing is launched */
} jitk_seal_mode;

/* Options of a runtime; fill with jitk_runtime_options_init. Version 3
 * points to the compiler's options instead of embedding them, so that
 * either struct can grow; version 4 (current) adds seal and manifest;
 * versions 1 and 2 (embedded) are still accepted from older programs.
 *   device       CUDA device ordinal
 *   capture      see jitk_capture_policy
 *   programmatic positive: on sm_90 and newer, launch the kernels of
 *                families that declare `launch: { programmatic: true }`
 *                (their templates wait with griddepcontrol.wait before
 *                touching memory) with programmatic dependent launch, so
 *                that a launch and its set-up overlap the end of the kernel
 *                before it on the stream. Results are the same either way.
 *                0: never; -1 (default from version 3 on):
 *                $JITK_PROGRAMMATIC (1, true, yes, on), else off
 *   compiler     the compiler's options (NULL: every default)
 *   seal         a jitk_seal_mode the runtime starts with; -1 (default):
 *                $JITK_SEAL=off|warn|error, else off
 *   manifest     record every instance resolved into this file, as
 *                jitk_runtime_manifest does; NULL (default):
 *                $JITK_MANIFEST_OUT, else none */
typedef struct {
	unsigned version;
	int device;
	jitk_capture_policy capture;
	int programmatic;
	const jitk_compiler_options *compiler;
	int seal;             /* version 4 */
	const char *manifest; /* version 4 */
} jitk_runtime_options;

#define JITK_RUNTIME_OPTIONS_VERSION 4
#define JITK_RUNTIME_OPTIONS_INIT                                             \
	{ JITK_RUNTIME_OPTIONS_VERSION, 0, JITK_CAPTURE_ERROR, -1, NULL, -1, NULL }

/* Defaults for the given version (1 to JITK_RUNTIME_OPTIONS_VERSION; for
 * 1 or 2, opts points to a struct of that version's layout, as an older
 * header declared it). JITK_EINVAL for another version. */
JITK_API int jitk_runtime_options_init(jitk_runtime_options *opts, unsigned version);

/* Open the CUDA driver (libcuda.so.1, looked up at run time), bind the
 * device, read its architecture and load the specs. *out is the caller's.
 * JITK_ENODEV when there is no driver or device, JITK_ESPEC, JITK_ENOMEM,
 * JITK_EINVAL for options of an unknown version or a seal mode (option or
 * $JITK_SEAL) that is not one. A manifest file that cannot be opened is
 * logged, not an error. Makes the device's primary
 * context current on this thread when no context is. Kernels load with
 * cuLibraryLoadData, so they launch in any context of the device. All
 * other runtime functions are thread-safe. opts may point to a version 1,
 * 2, 3 or 4 struct, each read with its own layout (NULL: defaults). */
JITK_API int jitk_runtime_new(jitk_runtime **out, const jitk_runtime_options *opts);
/* NULL is a no-op. No launch of this runtime may be in flight. */
JITK_API void jitk_runtime_free(jitk_runtime *rt);
/* "sm_90" and so on; borrowed. */
JITK_API const char *jitk_runtime_arch(const jitk_runtime *rt);
/* The compiler the runtime owns; borrowed. */
JITK_API jitk_compiler *jitk_runtime_compiler(jitk_runtime *rt);

/* Seal rt (or unseal it: JITK_SEAL_OFF), typically once warmup is done:
 * from now on a resolve that would compile warns or is refused
 * (jitk_seal_mode), and so does every other build of the runtime's
 * compiler (jitk_precompile on jitk_runtime_compiler(rt)). A cached image
 * the driver rejects is then not evicted where no compile may replace it
 * (JITK_SEAL_ERROR): the resolve fails with JITK_EDRIVER saying so. The
 * messages say why a compile would have been needed (not in the cache,
 * force_compile, a rejected entry or remote object, a driver rejection).
 * JITK_EINVAL for another mode. Thread-safe; resolves already under way
 * finish under the mode they started with. */
JITK_API int jitk_runtime_seal(jitk_runtime *rt, jitk_seal_mode mode);

/* Record into the manifest file at path every instance rt has resolved
 * and each one it resolves from now on, one "INSTANCE ARCH" line each
 * (ARCH: what the runtime builds for, jitk_runtime_arch), appended with
 * O_APPEND, one write() per line, so that lines of several processes do
 * not mix and a crash loses nothing written. jitk precompile --manifest
 * (jitk_precompile_manifest) compiles exactly those. path NULL stops
 * recording. JITK_EIO (with errno's text) when the file cannot be opened;
 * a later write that fails is logged once. Thread-safe. */
JITK_API int jitk_runtime_manifest(jitk_runtime *rt, const char *path);

/* The kernel of the one instance NAME selects, resolved on first use: the
 * cache (read-only layers, then the writable cache) for the targets that
 * run on this GPU in turn - the exact one (sm_103, then sm_103a), its
 * family targets (sm_103f, sm_100f), PTX (compute_103, ...) - else NVRTC
 * for the exact target, then cuLibraryLoadData. Later calls are one
 * lock-free read.
 * *out is borrowed from rt. JITK_ENOENT, JITK_EINVAL (the selector names
 * several instances), JITK_EARCH (a gate forbids it here; see
 * jitk_explain), JITK_ECOMPILE, JITK_ENOCOMPILE (also: a sealed runtime
 * refused to compile), JITK_EDRIVER. */
JITK_API int jitk_kernel_get(jitk_kernel **out, jitk_runtime *rt, const char *name);

/* What a resolved kernel is: its instance's name, the lowered (mangled)
 * name of its entry point, the CUkernel (launchable with cuLaunchKernel in
 * any context of the device, for callers that launch it themselves), its
 * block size and dynamic shared memory, and its cache key (64 hex
 * digits). All borrowed from the runtime. An output struct (see the top
 * of this file): set version first (JITK_KERNEL_INFO_INIT). */
typedef struct {
	unsigned version;
	const char *instance;
	const char *lowered;
	void *handle;
	unsigned block;
	unsigned shared_bytes;
	const char *key;
} jitk_kernel_info;

#define JITK_KERNEL_INFO_VERSION 1
#define JITK_KERNEL_INFO_INIT { JITK_KERNEL_INFO_VERSION, NULL, NULL, NULL, 0, 0, NULL }
JITK_API int jitk_kernel_info_get(jitk_kernel_info *out, const jitk_kernel *k);
/* The target of the image a resolved kernel runs ("sm_90", "sm_100f" on an
 * sm_103 GPU when the cache held that, "compute_90"); borrowed from the
 * runtime. NULL for NULL. */
JITK_API const char *jitk_kernel_target(const jitk_kernel *k);

/* Resolve every instance the N selectors select (every instance that can
 * run on this device when names is NULL; gated ones are skipped) so that
 * later calls never compile or load, e.g. before CUDA graph capture. Stops
 * at the first failure. */
JITK_API int jitk_preload(jitk_runtime *rt, const char *const *names, size_t n);

/* ------------------------------------------------ tensors and the call */

/* An element type, with DLPack's meanings (DLDataType): code 0 int,
 * 1 uint, 2 float, 4 bfloat, 10 float8_e4m3fn; bits; lanes (1). */
typedef struct {
	uint8_t code;
	uint8_t bits;
	uint16_t lanes;
} jitk_dtype;

#define JITK_DTYPE_BF16 { 4, 16, 1 }
#define JITK_DTYPE_F32 { 2, 32, 1 }
#define JITK_DTYPE_FP8_E4M3 { 10, 8, 1 }
#define JITK_DTYPE_I32 { 0, 32, 1 }
#define JITK_DTYPE_I64 { 0, 64, 1 }
#define JITK_DTYPE_U8 { 1, 8, 1 }

#define JITK_MAX_DIMS 6

/* A tensor in device memory, with DLPack's meanings: data is the address
 * of the first element (DLPack's data + byte_offset), shape and strides
 * have ndim entries, strides counted in elements. */
typedef struct {
	jitk_devptr data;
	jitk_dtype dtype;
	int32_t ndim;
	int64_t shape[JITK_MAX_DIMS];
	int64_t strides[JITK_MAX_DIMS];
} jitk_tensor;

/* Fill t as a C-contiguous tensor. JITK_EINVAL for ndim outside
 * 0..JITK_MAX_DIMS, a negative dimension, or strides past 64 bits. */
JITK_API int jitk_tensor_contiguous(jitk_tensor *t, jitk_devptr data, jitk_dtype dtype,
				    int32_t ndim, const int64_t *shape);

/* A benchmark case a family's spec declares (its bench key,
 * docs/spec-format.md): a symbol called on contiguous tensors of these
 * shapes; what jitk bench --family NAME runs. */
typedef struct {
	const char *name; /* the tensor argument */
	jitk_dtype dtype;
	int written;      /* the kernel writes it (io out or inout) */
	int configured;   /* its spec says configured: jitk_configure it first */
	int32_t ndim;
	int64_t shape[JITK_MAX_DIMS];
} jitk_bench_tensor;

typedef struct {
	const char *symbol; /* a selector */
	size_t ntensors;
	const jitk_bench_tensor *tensors;
	int64_t flops; /* 0: not counted */
	int64_t bytes; /* what one call moves: the spec's, else the tensors' sizes */
	const char *peak; /* NULL, or what flops count against: "fp8_dense", "bf16_dense" */
} jitk_bench_case;

/* The cases of family (*n of them, 0 when its spec has none) in one block
 * *out, jitk_free'd. JITK_ENOENT for an unknown family (naming the
 * nearest). */
JITK_API int jitk_bench_cases(jitk_bench_case **out, size_t *n, const jitk_compiler *compiler,
			      const char *family);

/* One named argument of a call: a tensor, or a scalar of the spec's
 * type. */
typedef enum {
	JITK_ARG_I32 = 2,
	JITK_ARG_I64 = 3,
	JITK_ARG_F32 = 4,
	JITK_ARG_TENSOR = 5,
	/* A DLPack tensor (a DLTensor; jitk_op_call_dlpack only). */
	JITK_ARG_DLPACK = 6
} jitk_arg_type;

typedef struct {
	const char *name;
	jitk_arg_type type;
	union {
		const jitk_tensor *tensor;
		const void *dlpack; /* a DLTensor (dlpack/dlpack.h) */
		int32_t i32;
		int64_t i64;
		float f32;
	} v;
} jitk_arg;

typedef enum {
	/* Any failed check is an error (JITK_EINVAL naming the argument);
	 * a gate that forbids the instance here is JITK_EARCH. */
	JITK_CALL_STRICT = 0,
	/* Where the gate, the shapes (no instance for them), a tensor check
	 * (alignment, strides, NULL) or a configured guard rules the
	 * instance out: launch nothing, return JITK_FALLBACK and the reason.
	 * A misused call (unknown, missing or repeated names, wrong kinds)
	 * stays JITK_EINVAL. */
	JITK_CALL_TRY = 1,
	/* TRY, and on JITK_FALLBACK run the spec's fallback steps (strictly):
	 * the same bytes out, for a family whose fallback is its split
	 * path. */
	JITK_CALL_AUTO = 2
} jitk_call_mode;

/* What a call did. instance is borrowed from the runtime; reason stays
 * valid until the next call on this thread; NULL when not applicable. An
 * output struct (see the top of this file): set version first
 * (JITK_CALL_INFO_INIT); a call given another version returns JITK_EINVAL
 * and launches nothing. */
typedef struct {
	unsigned version;
	int fallback;         /* the fallback ran (AUTO) or would have to (TRY) */
	const char *reason;   /* why the instance was ruled out */
	const char *instance; /* the instance launched (the first step's, after a fallback) */
} jitk_call_info;

#define JITK_CALL_INFO_VERSION 1
#define JITK_CALL_INFO_INIT { JITK_CALL_INFO_VERSION, 0, NULL, NULL }

/* An operation: a selector bound to a runtime, resolved by name once.
 * Borrowed from rt (freed with it). */
typedef struct jitk_op jitk_op;
JITK_API int jitk_op_get(jitk_op **out, jitk_runtime *rt, const char *selector);

/* Call the op with ARGS, matched by name (any order; scalars with a spec
 * default may be left out; integer scalars that a tensor's shape or
 * strides determine, such as rows, may be left out too). The instance is
 * picked from the shapes (the dims of parameters the symbol lists several
 * values for), then every dtype, rank, shape, stride, alignment and
 * aliasing rule and launch check of the spec is checked, and the kernel
 * is launched on stream. Before any of that, in every mode, a tensor no
 * memory can hold is JITK_EINVAL: a rank outside 0..JITK_MAX_DIMS, a
 * negative dimension, an extent that overflows, exceeds 2^48 bytes or
 * wraps around the address space; so are a written tensor with a stride-0
 * dimension and an i32 scalar a shape tells that does not fit. Errors name
 * the argument and the expected and actual shapes; nothing is launched
 * after an error. A grid of 0 (an empty problem) launches nothing. out
 * (NULL allowed) says what ran: after an AUTO fallback, instance is the
 * first step's. */
JITK_API int jitk_op_call(jitk_call_info *out, jitk_op *op, jitk_call_mode mode,
			  const jitk_arg *args, size_t nargs, jitk_stream stream);
/* jitk_op_get, then jitk_op_call. */
JITK_API int jitk_call(jitk_call_info *out, jitk_runtime *rt, const char *selector,
		       jitk_call_mode mode, const jitk_arg *args, size_t nargs,
		       jitk_stream stream);

/* The generic call with tensors given as DLPack tensors: arguments of
 * type JITK_ARG_DLPACK point to a DLTensor (dlpack/dlpack.h; its layout is
 * the same from DLPack 0.6 to 1.x: pass a DLManagedTensor's dl_tensor, or
 * a DLManagedTensorVersioned's). Each is turned into a jitk_tensor: data +
 * byte_offset, the dtype, the shape, and the strides (NULL: C-contiguous);
 * it must be on a CUDA device (kDLCUDA or kDLCUDAManaged) whose device_id
 * is the runtime's device, with lanes 1 and at most JITK_MAX_DIMS
 * dimensions, else JITK_EINVAL naming the argument (nothing launched).
 * JITK_ARG_TENSOR and scalar arguments may be mixed in. Then as
 * jitk_op_call. The caller keeps the DLPack tensors alive for the call;
 * the kernel runs on stream, on which the producer must have made the data
 * ready (DLPack's __dlpack__(stream=...) protocol). */
JITK_API int jitk_op_call_dlpack(jitk_call_info *out, jitk_op *op, jitk_call_mode mode,
				 const jitk_arg *args, size_t nargs, jitk_stream stream);
/* jitk_op_get, then jitk_op_call_dlpack. */
JITK_API int jitk_call_dlpack(jitk_call_info *out, jitk_runtime *rt, const char *selector,
			      jitk_call_mode mode, const jitk_arg *args, size_t nargs,
			      jitk_stream stream);

/* Validate a tensor that an argument with `configured: RULE` in the spec
 * of symbol's family requires (a static quantization scale: one finite,
 * positive f32): reads its value from the device once (synchronously; not
 * during capture) and records it, tied to its allocation (the driver's
 * buffer id), so that a freed and reallocated address is not taken as
 * validated. JITK_EINVAL (the value in the message) when the rule fails.
 * jitk_unconfigure forgets an address (JITK_ENOENT if it was not
 * configured).
 *
 * What is remembered is the address and the driver allocation (cuMemAlloc
 * and the like) that holds it, not the bytes: the library cannot see a
 * write into the memory after the read, nor a sub-allocator (PyTorch's
 * caching allocator, CuPy's memory pool, any pool of the caller's) that
 * frees the tensor and hands the same address in the same driver
 * allocation to another one. Keep a configured tensor's memory allocated
 * and unwritten while it is configured, and call jitk_unconfigure before
 * freeing it to a pool or writing it (then jitk_configure again). The
 * Python binding does this for its tensors: it holds each configured
 * tensor until unconfigure, and undoes a validation whose torch.Tensor
 * was written since (its version counter). */
JITK_API int jitk_configure(jitk_runtime *rt, const char *symbol, const char *arg,
			    const jitk_tensor *t);
JITK_API int jitk_unconfigure(jitk_runtime *rt, jitk_devptr data);

/* --------------------------------------------------------------- stats */

/* Counters of one kernel (or of all, when name is NULL; a selector sums
 * the instances it selects). An output struct (see the top of this
 * file): set version first (JITK_STATS_INIT). */
typedef struct {
	unsigned version;
	uint64_t compiles;     /* NVRTC runs */
	uint64_t cache_hits;   /* cubins found on disk */
	uint64_t cache_misses; /* lookups that found nothing usable */
	uint64_t cache_rejects; /* entries that failed verification */
	uint64_t loads;        /* cuLibraryLoadData calls */
	uint64_t load_failures; /* images the driver rejected */
	uint64_t launches;
	double compile_ms; /* total time inside NVRTC */
	double load_ms;    /* total time resolving: cache + load */
} jitk_stats;

#define JITK_STATS_VERSION 1
#define JITK_STATS_INIT { JITK_STATS_VERSION, 0, 0, 0, 0, 0, 0, 0, 0.0, 0.0 }

JITK_API int jitk_stats_get(jitk_stats *out, jitk_runtime *rt, const char *name);

#ifdef __cplusplus
}
#endif

#endif
