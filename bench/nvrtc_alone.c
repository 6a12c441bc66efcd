/* nvrtc_alone - compile a translation unit with NVRTC and nothing else,
 * from the output of `jitk source NAME --arch A` and `... --options`: the
 * baseline that jitk's cold compile is compared with, and proof that a
 * jitk compile can be reproduced with NVRTC alone.
 *
 *   nvrtc_alone SOURCE.cu OPTIONS.txt [OUT.cubin]
 *
 * OPTIONS.txt: one option per line, then "name-expression EXPR" lines.
 * NVRTC_ALONE_REPS=N compiles N times in the process and prints each
 * compile's time (the first pays NVRTC's start-up; bench/nvrtc_study.sh). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nvrtc.h>

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	if (buf)
		buf[n] = '\0';
	fclose(f);
	return buf;
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
	char *src, *opts, *line, *save = NULL;
	const char *options[64], *exprs[8];
	int nopt = 0, nexpr = 0, i, reps, rep;
	nvrtcProgram prog;
	size_t size = 0;
	double t0 = now_ms();

	if (argc < 3) {
		fprintf(stderr, "usage: nvrtc_alone SOURCE OPTIONS [OUT.cubin]\n");
		return 2;
	}
	src = slurp(argv[1]);
	opts = slurp(argv[2]);
	if (!src || !opts) {
		fprintf(stderr, "nvrtc_alone: cannot read inputs\n");
		return 1;
	}
	for (line = strtok_r(opts, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		int is_expr = !strncmp(line, "name-expression ", 16);

		if (!*line)
			continue;
		if (is_expr ? nexpr == 8 : nopt == 64) {
			fprintf(stderr, "nvrtc_alone: more than %s in %s\n",
				is_expr ? "8 name expressions" : "64 options", argv[2]);
			return 1;
		}
		if (is_expr)
			exprs[nexpr++] = line + 16;
		else
			options[nopt++] = line;
	}
	reps = getenv("NVRTC_ALONE_REPS") ? atoi(getenv("NVRTC_ALONE_REPS")) : 1;
	for (rep = 0; rep < (reps > 0 ? reps : 1); rep++) {
		double t1 = now_ms();

		if (rep)
			nvrtcDestroyProgram(&prog);
		if (nvrtcCreateProgram(&prog, src, "jitk-instantiation.cu", 0, NULL, NULL))
			return 1;
		for (i = 0; i < nexpr; i++)
			nvrtcAddNameExpression(prog, exprs[i]);
		if (nvrtcCompileProgram(prog, nopt, options) != NVRTC_SUCCESS) {
			nvrtcGetProgramLogSize(prog, &size);
			if (size > 1) {
				char *log = malloc(size);
				nvrtcGetProgramLog(prog, log);
				fputs(log, stderr);
				free(log);
			}
			return 1;
		}
		if (reps > 1)
			printf("compile %d: %.2f ms\n", rep + 1, now_ms() - t1);
	}
	nvrtcGetProgramLogSize(prog, &size);
	if (size > 1) { /* warnings, or ptxas -v when asked for */
		char *log = malloc(size);
		nvrtcGetProgramLog(prog, log);
		fputs(log, stderr);
		free(log);
	}
	nvrtcGetCUBINSize(prog, &size);
	if (argc > 3) {
		char *cubin = malloc(size);
		FILE *f = fopen(argv[3], "wb");

		nvrtcGetCUBIN(prog, cubin);
		if (f) {
			fwrite(cubin, 1, size, f);
			fclose(f);
		}
		free(cubin);
	}
	for (i = 0; i < nexpr; i++) {
		const char *lowered = NULL;

		nvrtcGetLoweredName(prog, exprs[i], &lowered);
		printf("%s -> %s\n", exprs[i], lowered ? lowered : "?");
	}
	nvrtcDestroyProgram(&prog);
	printf("cubin %zu bytes, %.1f ms in NVRTC\n", size, now_ms() - t0);
	free(src);
	free(opts);
	return 0;
}
