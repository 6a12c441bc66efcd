/* cli.h - the jitk command's pieces. The command is a client of the
 * library like any other: it includes jitk.h only, and
 * the build compiles it without the library's internal include path. */
#ifndef JITK_CLI_H
#define JITK_CLI_H

#define CLI_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* jitk bench [...]: kernel and JIT timings on the GPU (bench.c). */
int jitk_cli_bench(int argc, char **argv);
/* jitk key generate NAME -o PREFIX: a signing key (key.c). */
int jitk_cli_key(int argc, char **argv);
/* jitk header FAMILY [-o FILE]: typed calls from a spec (header.c). */
int jitk_cli_header(int argc, char **argv);

/* A usage error: "jitk: MESSAGE" and then usage (when not NULL) on
 * stderr, exit status 2. */
void jitk_cli_usage_error(const char *usage, const char *fmt, ...)
	__attribute__((format(printf, 2, 3), noreturn));
/* The whole of s as a decimal number from min to max, else a usage error
 * naming what (an option). */
long jitk_cli_number(const char *what, const char *s, long min, long max);
/* Milliseconds on a monotonic clock. */
double jitk_cli_now_ms(void);

#endif
