/* bench.c - jitk bench: kernel bandwidth and JIT latencies on the GPU. */
#include <stdio.h>

#include "cli.h"
#include "device.h"

int jitk_cli_bench(int argc, char **argv)
{
	const char *why = "";

	(void)argc;
	(void)argv;
	if (!jitk__cuda(&why)) {
		fprintf(stderr, "jitk bench: needs a GPU: %s\n", why);
		return 1;
	}
	fprintf(stderr, "jitk bench: not written yet\n");
	return 1;
}
