/* internal.h - declarations shared by the library's files; not API. */
#ifndef JITK_INTERNAL_H
#define JITK_INTERNAL_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "jitk.h"

#define JITK_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#if defined(__GNUC__)
#define JITK_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define JITK_PRINTF(f, a)
#endif

/* ------------------------------------------------------------- buffers */

/* A growable NUL-terminated byte buffer. After an allocation failure the
 * buffer stays valid, stops growing and oom is set; check it once at the
 * end instead of after every append. */
typedef struct {
	char *data;
	size_t len;
	size_t cap;
	int oom;
} jbuf;

void jitk__jbuf_init(jbuf *b);
void jitk__jbuf_free(jbuf *b);
void jitk__jbuf_put(jbuf *b, const void *data, size_t n);
void jitk__jbuf_puts(jbuf *b, const char *s);
void jitk__jbuf_printf(jbuf *b, const char *fmt, ...) JITK_PRINTF(2, 3);
void jitk__jbuf_vprintf(jbuf *b, const char *fmt, va_list ap);
/* Hand the bytes over (caller frees); NULL when oom. Resets b. */
char *jitk__jbuf_detach(jbuf *b);

char *jitk__strdup(const char *s);
char *jitk__strndup(const char *s, size_t n);
char *jitk__asprintf(const char *fmt, ...) JITK_PRINTF(1, 2);

/* Edit distance (insertions, deletions, substitutions) between two words,
 * for "did you mean" suggestions; JITK_EDIT_FAR when either is longer than
 * JITK_EDIT_MAX_LEN. */
#define JITK_EDIT_MAX_LEN 256
#define JITK_EDIT_FAR 1000000
int jitk__edit_distance(const char *a, const char *b);

/* -------------------------------------------------------------- errors */

/* Record status with a formatted one-line message for jitk_error_last();
 * returns status so that `return jitk__error(...)` reads naturally. */
int jitk__error(int status, const char *fmt, ...) JITK_PRINTF(2, 3);
/* The same, with a detail text (NVRTC log, offending spec line). */
int jitk__error_detail(int status, const char *detail, const char *fmt, ...)
	JITK_PRINTF(3, 4);
void jitk__error_clear(void);

/* An API call's pointer arguments: JITK_EINVAL "FN: NAME is NULL" for the
 * first that is NULL (names: the arguments' names, space-separated, in
 * order), else 0. JITK_NULL_ARGS("jitk_list", "out compiler", out, c). */
int jitk__null_args(const char *fn, const char *names, size_t n, const void *const *ptrs);
#define JITK_NULL_ARGS(fn, names, ...)                                                  \
	jitk__null_args(fn, names, sizeof((const void *[]){ __VA_ARGS__ }) / sizeof(void *), \
			(const void *[]){ __VA_ARGS__ })

/* Output structs (jitk.h, "Output structs"): a struct the library fills
 * starts with unsigned version, any from 1 to the current one. The library
 * fills a full struct of its own, then jitk__out_fill copies what the
 * caller's version holds: sizes[v] is the size of version v's fields
 * (from the struct's start to the end of v's last field), so that nothing
 * past them is written. jitk__out_check: JITK_EINVAL "TYPE version V is
 * not 1 to N" for another version, nothing written. */
int jitk__out_check(const char *type, unsigned version, unsigned current);
void jitk__out_fill(void *out, const void *full, const size_t *sizes);
/* Where a version ends: past its last field (not sizeof, whose trailing
 * padding the next version's fields may take). */
#define JITK_OUT_END(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))

/* ------------------------------------------------------------- logging */

typedef struct {
	jitk_log_fn fn;
	void *payload;
	int level;
} jitk_logger;

void jitk__log(const jitk_logger *lg, jitk_log_level level, const char *fmt,
	       ...) JITK_PRINTF(3, 4);
/* JITK_LOG parsed; def when unset or unknown. */
int jitk__log_level_from_env(int def);

/* --------------------------------------------------------------- files */

/* Read a whole regular file of at most max bytes into a NUL-terminated
 * malloc'd buffer. Never blocks on a FIFO or device: anything but a
 * regular file (after following symbolic links) is JITK_EIO "PATH: is a
 * FIFO, not a regular file" without being read. JITK_EIO (errno in the
 * message), JITK_EINVAL when the file is larger than max. */
int jitk__read_file(char **out, size_t *out_len, const char *path, size_t max);
/* "a FIFO", "a character device", "a regular file"... for a st_mode. */
const char *jitk__file_kind(unsigned mode);

/* mkdir -p with mode for each created level. 0 or -1 (errno set). */
int jitk__mkdirs(const char *path, unsigned mode);
/* A boolean environment variable, the one parser of them all: unset or
 * empty is 0; "1", "true", "yes", "on" are 1 and "0", "false", "no", "off"
 * are 0, in any case; anything else ("2", " 1", "enabled") is the safe
 * value, with one warning through lg (NULL: none) naming the variable and
 * saying what it was taken as: safe_means describes that meaning
 * ("read-only"). JITK_ENV_BOOL_VALUES says the accepted spellings. */
int jitk__env_bool(const jitk_logger *lg, const char *name, int safe, const char *safe_means);
#define JITK_ENV_BOOL_VALUES "1, true, yes, on or 0, false, no, off"
/* getenv, but NULL for empty values. */
const char *jitk__env(const char *name);

/* A size: decimal digits, optionally followed by K, M, G or T (powers of
 * 1024, either case) and optionally by B or iB ("512", "64K", "10G",
 * "10GiB", "100B"). 0, or -1 for anything else (signs, spaces, hex,
 * fractions, overflow); *out is 0 then. */
int jitk__parse_size(uint64_t *out, const char *s);
/* How to say what a size is, in messages about one. */
#define JITK_SIZE_SYNTAX \
	"a positive number of bytes, optionally with K, M, G or T: 512M, 10G"

/* -------------------------------------------------------------- hashing */

#define JITK_HASH_SIZE 32 /* SHA-256 */

typedef struct jitk_hasher jitk_hasher;
jitk_hasher *jitk__hasher_new(void);
void jitk__hasher_update(jitk_hasher *h, const void *data, size_t n);
/* Length-prefixed field: "tag <len>:<bytes>\n", so that no two different
 * field sequences hash alike. */
void jitk__hasher_field(jitk_hasher *h, const char *tag, const void *data,
			size_t n);
/* Writes the digest and frees h. 0, or -1 when the library failed. */
int jitk__hasher_final(jitk_hasher *h, uint8_t out[JITK_HASH_SIZE]);
int jitk__sha256(uint8_t out[JITK_HASH_SIZE], const void *data, size_t n);

/* The checksum of cache entries: XXH3-128 over a then b (either may be
 * empty). 0, or -1 when out of memory. */
#define JITK_SUM_SIZE 16
int jitk__checksum(uint8_t out[JITK_SUM_SIZE], const void *a, size_t na, const void *b,
		   size_t nb);
void jitk__hex(char *out, const uint8_t *bytes, size_t n);

/* ----------------------------------------------------- profiler ranges */

/* A range in the profiler's timeline (NVTX, domain "jitk"; trace.c),
 * named from fmt: "resolve NAME on ARCH". Pushes and pops pair up on each
 * thread. Without an attached tool nothing is formatted or recorded. */
void jitk__range_push(const char *fmt, ...) JITK_PRINTF(1, 2);
void jitk__range_pop(void);

/* ---------------------------------------------------------------- time */

double jitk__now_ms(void);
/* This thread's CPU time (ms): what a piece of work cost apart from
 * waiting, whatever else the machine is doing. */
double jitk__thread_cpu_ms(void);

/* -------------------------------------------------------- architectures */

/* A compile target: sm_90 (cc 90, kind 's'), sm_100a (suffix 'a'),
 * sm_100f (suffix 'f'), compute_90 (kind 'c': PTX instead of a cubin). */
typedef struct {
	int cc;
	char kind;
	char suffix;
} jitk_arch;

#define JITK_ARCH_STRLEN 24

/* 0 on success, -1 for anything else than sm_NN[a|f] / compute_NN[a|f]. */
int jitk__arch_parse(jitk_arch *out, const char *s);
void jitk__arch_format(char out[JITK_ARCH_STRLEN], jitk_arch a);
/* Whether the suffix exists for the architecture ('a': sm_90 and sm_100
 * onward; 'f': sm_100 onward). Which numbers exist is NVRTC's to say
 * (jitk__nvrtc_archs). */
int jitk__arch_suffix_ok(jitk_arch a);
#endif
