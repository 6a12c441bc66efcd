/* nvtx.h - NVTX3 (header-only, in the CUDA toolkit) with its own warnings
 * left to its authors; for trace.c, and for tools (define NVTX_NO_IMPL
 * first: the types without the implementation). */
#ifndef JITK_NVTX_H
#define JITK_NVTX_H

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wunused-function"
#include <nvtx3/nvToolsExt.h>
#pragma GCC diagnostic pop

#endif
