/* fresh_hit - what the first cache hit costs in a fresh process.
 *
 *   fresh_hit [--runs N] [--mode compile|gpu|gpu-share] [--specs DIR]
 *             [--cache DIR] [NAME [ARCH]]
 *
 * Makes sure NAME's image for ARCH is in the cache (a private temporary
 * cache unless --cache is given), then starts itself N times (default 50)
 * as a fresh process and reports medians of what each child measured with
 * clock_gettime from main() on, and of the whole process as the parent saw
 * it (spawn to exit: exec, dynamic loading, everything):
 *
 *   compile    jitk_compiler_new, then jitk_precompile of NAME for ARCH:
 *              a cache hit through the compile half (specialize, key,
 *              lookup, read, verify), then a second one in the same process.
 *              Needs no GPU. ARCH defaults to sm_90.
 *   gpu        jitk_runtime_new, then the first jitk_kernel_get: the whole
 *              first resolve, the driver's module load included.
 *   gpu-share  jitk_runtime_new, then jitk_precompile (jitk's own share of
 *              a resolve: everything but the module load), then
 *              jitk_kernel_get (the lookup again, warm, and the load).
 *
 * Public API only. Exit 0, 1 on failure, 2 on a usage error. */
#include <errno.h>
#include <ftw.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "jitk.h"

extern char **environ;

#define MAX_RUNS 1000
#define NFIELDS 4

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int usage(void)
{
	fprintf(stderr, "usage: fresh_hit [--runs N] [--mode compile|gpu|gpu-share] [--specs DIR] "
			"[--cache DIR] [NAME [ARCH]]\n");
	return 2;
}

static int fail(const char *what)
{
	const jitk_error *e = jitk_error_last();

	fprintf(stderr, "fresh_hit: %s: %s (%s)\n", what, e->message, jitk_status_name(e->status));
	return 1;
}

typedef struct {
	const char *mode, *specs, *cache, *name, *arch;
	int runs;
} config;

static void compiler_opts(jitk_compiler_options *co, const config *cf)
{
	jitk_compiler_options_init(co, JITK_COMPILER_OPTIONS_VERSION);
	co->specs = cf->specs;
	co->cache_dir = cf->cache;
	co->cache_path = "";
	co->no_compile = 0;
	co->force_compile = 0;
	co->log_level = JITK_LOG_ERROR;
}

static int is_hit(jitk_origin o)
{
	return o == JITK_ORIGIN_CACHE || o == JITK_ORIGIN_LAYER;
}

/* One fresh process: t[0] = set-up (compiler or runtime), t[1] = the
 * first hit (or resolve), t[2] = the second step, t[3] = main to done;
 * printed as one line for the parent. */
static int child(const config *cf, double t_main)
{
	jitk_compiler_options co;
	jitk_compiler *c = NULL;
	jitk_runtime *rt = NULL;
	jitk_kernel *k;
	jitk_origin o = JITK_ORIGIN_COMPILED;
	double t[NFIELDS] = { 0 }, a;
	int rc = 1;

	compiler_opts(&co, cf);
	a = now_us();
	if (!strcmp(cf->mode, "compile")) {
		if (jitk_compiler_new(&c, &co))
			return fail("jitk_compiler_new");
		t[0] = now_us() - a;
		a = now_us();
		if (jitk_precompile(&o, c, cf->name, cf->arch) || !is_hit(o)) {
			rc = fail("jitk_precompile (not a hit?)");
			goto done;
		}
		t[1] = now_us() - a;
		a = now_us();
		if (jitk_precompile(&o, c, cf->name, cf->arch)) {
			rc = fail("jitk_precompile");
			goto done;
		}
		t[2] = now_us() - a;
	} else {
		jitk_runtime_options ro;

		jitk_runtime_options_init(&ro, JITK_RUNTIME_OPTIONS_VERSION);
		ro.compiler = &co;
		if (jitk_runtime_new(&rt, &ro))
			return fail("jitk_runtime_new");
		t[0] = now_us() - a;
		a = now_us();
		if (!strcmp(cf->mode, "gpu-share")) {
			if (jitk_precompile(&o, jitk_runtime_compiler(rt), cf->name, jitk_runtime_arch(rt)) ||
			    !is_hit(o)) {
				rc = fail("jitk_precompile (not a hit?)");
				goto done;
			}
			t[1] = now_us() - a;
			a = now_us();
			if (jitk_kernel_get(&k, rt, cf->name)) {
				rc = fail("jitk_kernel_get");
				goto done;
			}
			t[2] = now_us() - a;
		} else {
			if (jitk_kernel_get(&k, rt, cf->name)) {
				rc = fail("jitk_kernel_get");
				goto done;
			}
			t[1] = now_us() - a;
		}
	}
	t[3] = now_us() - t_main;
	printf("%.1f %.1f %.1f %.1f\n", t[0], t[1], t[2], t[3]);
	rc = 0;
done:
	jitk_runtime_free(rt);
	jitk_compiler_free(c);
	return rc;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void report(const char *what, double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	printf("%-26s %9.1f %9.1f %9.1f %9.1f %9.1f\n", what, v[n / 2], v[n / 10],
	       v[n - 1 - n / 10], v[0], v[n - 1]);
}

/* Make sure the image is cached (the parent's own process, not measured). */
static int seed(config *cf)
{
	jitk_compiler_options co;
	jitk_compiler *c = NULL;
	jitk_runtime *rt = NULL;
	jitk_origin o;
	static char arch[32];
	int rc;

	compiler_opts(&co, cf);
	if (strcmp(cf->mode, "compile")) {
		jitk_runtime_options ro;

		jitk_runtime_options_init(&ro, JITK_RUNTIME_OPTIONS_VERSION);
		ro.compiler = &co;
		if (jitk_runtime_new(&rt, &ro))
			return fail("jitk_runtime_new");
		snprintf(arch, sizeof(arch), "%s", jitk_runtime_arch(rt));
		cf->arch = arch;
		rc = jitk_precompile(&o, jitk_runtime_compiler(rt), cf->name, cf->arch);
	} else {
		if (jitk_compiler_new(&c, &co))
			return fail("jitk_compiler_new");
		rc = jitk_precompile(&o, c, cf->name, cf->arch);
	}
	if (rc)
		rc = fail("jitk_precompile");
	jitk_runtime_free(rt);
	jitk_compiler_free(c);
	return rc;
}

static int parent(config *cf, const char *self)
{
	static double v[NFIELDS + 1][MAX_RUNS];
	static const char *const names[3][NFIELDS] = {
		{ "jitk_compiler_new", "first hit (precompile)", "second hit, same process", "main() to done" },
		{ "jitk_runtime_new", "first jitk_kernel_get", "", "main() to done" },
		{ "jitk_runtime_new", "first hit (precompile)", "then jitk_kernel_get", "main() to done" },
	};
	int m = !strcmp(cf->mode, "compile") ? 0 : !strcmp(cf->mode, "gpu") ? 1 : 2;
	char tmpl[] = "/tmp/jitk-fresh-XXXXXX", runs[16];
	int i, j, rc = 1, own_cache = !cf->cache;

	if (own_cache) {
		if (!mkdtemp(tmpl)) {
			perror("fresh_hit: mkdtemp");
			return 1;
		}
		cf->cache = tmpl;
	}
	if (seed(cf))
		goto done;
	snprintf(runs, sizeof(runs), "%d", cf->runs);
	for (i = 0; i < cf->runs; i++) {
		char *argv[] = { (char *)self, "--child", "--mode", (char *)cf->mode, "--specs",
				 (char *)cf->specs, "--cache", (char *)cf->cache,
				 (char *)cf->name, (char *)cf->arch, NULL };
		posix_spawn_file_actions_t fa;
		int fds[2], st;
		pid_t pid;
		double a, b;
		FILE *in;

		if (pipe(fds)) {
			perror("fresh_hit: pipe");
			goto done;
		}
		posix_spawn_file_actions_init(&fa);
		posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
		posix_spawn_file_actions_addclose(&fa, fds[0]);
		a = now_us();
		if ((errno = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, environ))) {
			perror("fresh_hit: posix_spawn");
			goto done;
		}
		posix_spawn_file_actions_destroy(&fa);
		close(fds[1]);
		waitpid(pid, &st, 0);
		b = now_us();
		in = fdopen(fds[0], "r");
		if (!in || !WIFEXITED(st) || WEXITSTATUS(st) ||
		    fscanf(in, "%lf %lf %lf %lf", &v[0][i], &v[1][i], &v[2][i], &v[3][i]) != 4) {
			fprintf(stderr, "fresh_hit: run %d failed\n", i + 1);
			if (in)
				fclose(in);
			goto done;
		}
		fclose(in);
		v[4][i] = b - a;
	}
	printf("fresh_hit: %d fresh processes, %s on %s, mode %s (microseconds)\n", cf->runs,
	       cf->name, cf->arch, cf->mode);
	printf("%-26s %9s %9s %9s %9s %9s\n", "", "median", "p10", "p90", "min", "max");
	for (j = 0; j < NFIELDS; j++)
		if (*names[m][j])
			report(names[m][j], v[j], cf->runs);
	report("process (spawn to exit)", v[4], cf->runs);
	rc = 0;
done:
	if (own_cache && nftw(tmpl, remove_one, 16, FTW_DEPTH | FTW_PHYS))
		fprintf(stderr, "fresh_hit: could not remove %s\n", tmpl);
	return rc;
}

int main(int argc, char **argv)
{
	double t_main = now_us();
	config cf = { "compile", "specs", NULL, "fused_norm_scale_shift_fp8[hidden=3072]", "sm_90", 50 };
	int i, is_child = 0, pos = 0;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--child")) {
			is_child = 1;
		} else if (!strcmp(a, "--runs") && i + 1 < argc) {
			cf.runs = atoi(argv[++i]);
			if (cf.runs < 1 || cf.runs > MAX_RUNS)
				return usage();
		} else if (!strcmp(a, "--mode") && i + 1 < argc) {
			cf.mode = argv[++i];
			if (strcmp(cf.mode, "compile") && strcmp(cf.mode, "gpu") &&
			    strcmp(cf.mode, "gpu-share"))
				return usage();
		} else if (!strcmp(a, "--specs") && i + 1 < argc) {
			cf.specs = argv[++i];
		} else if (!strcmp(a, "--cache") && i + 1 < argc) {
			cf.cache = argv[++i];
		} else if (a[0] == '-') {
			return usage();
		} else if (pos == 0) {
			cf.name = a;
			pos++;
		} else if (pos == 1) {
			cf.arch = a;
			pos++;
		} else {
			return usage();
		}
	}
	if (is_child)
		return cf.cache ? child(&cf, t_main) : usage();
	return parent(&cf, argv[0]);
}
