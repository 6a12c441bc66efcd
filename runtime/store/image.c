/* image.c - whether an image is code for its target: a CUDA ELF for the
 * SM, or PTX for the virtual architecture, with the kernels in it. */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "store/image.h"

/* Where the SM number sits in a cubin's e_flags: the ELF OS ABI byte says
 * which encoding (0x33: CUDA toolkits up to 12, SM in bits 0-7; 0x41: the
 * ABI of CUDA 13, SM in bits 8-15). An ABI we do not know is not judged. */
static int cubin_sm(const unsigned char *h)
{
	uint32_t flags = (uint32_t)h[48] | (uint32_t)h[49] << 8 |
			 (uint32_t)h[50] << 16 | (uint32_t)h[51] << 24;

	if (h[7] == 0x33)
		return (int)(flags & 0xff);
	if (h[7] == 0x41)
		return (int)((flags >> 8) & 0xff);
	return -1;
}

/* Skip blank lines and // comments of PTX text; the next line. */
static const char *ptx_next(const char *p)
{
	for (;;) {
		while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
			p++;
		if (p[0] != '/' || p[1] != '/')
			return p;
		while (*p && *p != '\n')
			p++;
	}
}

static int has_entry(const char *ptx, const char *name)
{
	size_t n = strlen(name);
	const char *p = ptx;

	while ((p = strstr(p, ".entry "))) {
		p += 7;
		if (!strncmp(p, name, n) && (p[n] == '(' || isspace((unsigned char)p[n])))
			return 1;
	}
	return 0;
}

const char *jitk__image_problem(const void *image, size_t size, int is_ptx,
				jitk_arch t, const char *const *names, size_t nnames)
{
	const unsigned char *h = image;
	size_t i;

	if (!image || !size)
		return "the image is empty";
	if (is_ptx != (t.kind == 'c'))
		return is_ptx ? "the image is PTX, the target needs a cubin"
			      : "the image is not PTX, the target needs PTX";
	if (is_ptx) {
		const char *p = image;
		char want[JITK_ARCH_STRLEN + 8];
		size_t n;

		if (memchr(image, '\0', size) != (const char *)image + size - 1)
			return "the PTX text is not one NUL-terminated string";
		p = ptx_next(p);
		if (strncmp(p, ".version ", 9))
			return "the PTX text does not start with a .version directive";
		p = ptx_next(p + strcspn(p, "\n"));
		n = (size_t)snprintf(want, sizeof(want), ".target sm_%d%s", t.cc,
				     t.suffix == 'a' ? "a" : t.suffix == 'f' ? "f" : "");
		if (strncmp(p, want, n) || (p[n] && p[n] != ',' && !isspace((unsigned char)p[n])))
			return "the PTX text is not for the requested target (.target differs)";
		for (i = 0; i < nnames; i++)
			if (!has_entry(image, names[i]))
				return "the PTX text lacks the kernel's .entry";
		return NULL;
	}
	if (size < 64 || memcmp(h, "\177ELF", 4))
		return "the image is not an ELF file (cubin)";
	if (h[4] != 2 || h[5] != 1)
		return "the image is not a 64-bit little-endian ELF file";
	if ((h[18] | h[19] << 8) != 190)
		return "the image is an ELF file for another machine than CUDA (e_machine is not 190)";
	if (cubin_sm(h) >= 0 && cubin_sm(h) != t.cc)
		return "the cubin is for another SM than the requested target";
	for (i = 0; i < nnames; i++)
		if (!memmem(image, size, names[i], strlen(names[i]) + 1))
			return "the cubin lacks the kernel's symbol";
	return NULL;
}
