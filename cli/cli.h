/* cli.h - the jitk command's pieces. */
#ifndef JITK_CLI_H
#define JITK_CLI_H

/* jitk bench [...]: kernel and JIT timings on the GPU (bench.c). */
int jitk_cli_bench(int argc, char **argv);

#endif
