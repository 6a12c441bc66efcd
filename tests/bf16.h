/* bf16.h - the host's bfloat16: round to nearest even (NaN kept quiet)
 * and back. Header-only, C and C++ (the GPU tests and the QK emulation). */
#ifndef JITK_TEST_BF16_H
#define JITK_TEST_BF16_H

#include <stdint.h>
#include <string.h>

static inline uint16_t bf16_rn(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

static inline float bf16_f(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;

	memcpy(&f, &u, 4);
	return f;
}

#endif
