/* image.h - whether an image is code for its target (image.c). */
#ifndef JITK_IMAGE_H
#define JITK_IMAGE_H

#include "base/internal.h"

/* NULL when image holds code for target t: for sm_ targets a 64-bit CUDA
 * ELF (e_machine 190) for t's SM, for compute_ targets one NUL-terminated
 * PTX text whose .target is t; either way with a symbol or .entry for each
 * of names. Else a static reason. */
const char *jitk__image_problem(const void *image, size_t size, int is_ptx,
				jitk_arch t, const char *const *names, size_t nnames);

#endif
