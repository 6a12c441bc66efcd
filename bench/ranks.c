/* ranks.c - one inference rank's cold start, for bench/ranks.sh: wait for
 * the start signal (a file appearing), then open a runtime on this
 * process's GPU, resolve the given selectors (jitk_preload: cache, else
 * NVRTC under the cache's lock, then cuLibraryLoadData) and print the time
 * from the signal to every kernel being ready, with this process's
 * compile and cache-hit counts. Public API only.
 *
 *   ranks GO_FILE SELECTOR...    (cache: $JITK_CACHE_DIR; specs: $JITK_SPECS) */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jitk.h>

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
	jitk_runtime_options o = JITK_RUNTIME_OPTIONS_INIT;
	const char *rank = getenv("RANK");
	jitk_runtime *rt;
	jitk_stats s = JITK_STATS_INIT;
	struct stat st;
	double t0;
	int waited = 0;

	if (argc < 3) {
		fprintf(stderr, "usage: ranks GO_FILE SELECTOR...\n");
		return 2;
	}
	while (stat(argv[1], &st)) {
		if (++waited > 120000) { /* 2 minutes */
			fprintf(stderr, "ranks: no start signal (%s)\n", argv[1]);
			return 1;
		}
		usleep(1000);
	}
	t0 = now_ms();
	if (jitk_runtime_new(&rt, &o) ||
	    jitk_preload(rt, (const char *const *)argv + 2, (size_t)argc - 2) ||
	    jitk_stats_get(&s, rt, NULL)) {
		fprintf(stderr, "rank %s: %s\n", rank ? rank : "?", jitk_error_last()->message);
		return 1;
	}
	printf("rank=%s arch=%s first_use_ms=%.2f compiles=%llu cache_hits=%llu\n",
	       rank ? rank : "?", jitk_runtime_arch(rt), now_ms() - t0,
	       (unsigned long long)s.compiles, (unsigned long long)s.cache_hits);
	jitk_runtime_free(rt);
	return 0;
}
