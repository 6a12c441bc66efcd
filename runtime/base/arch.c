/* arch.c - compile targets: sm_NN[a|f], compute_NN[a|f]; the clock. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/internal.h"

/* -------------------------------------------------------- architectures */

int jitk__arch_parse(jitk_arch *out, const char *s)
{
	const char *p;
	long cc = 0;
	int digits = 0;

	if (!s)
		return -1;
	if (!strncmp(s, "sm_", 3)) {
		out->kind = 's';
		p = s + 3;
	} else if (!strncmp(s, "compute_", 8)) {
		out->kind = 'c';
		p = s + 8;
	} else {
		return -1;
	}
	while (isdigit((unsigned char)*p) && digits < 4) {
		cc = cc * 10 + (*p++ - '0');
		digits++;
	}
	if (digits < 2 || cc < 10)
		return -1;
	out->cc = (int)cc;
	out->suffix = 0;
	if (*p == 'a' || *p == 'f')
		out->suffix = *p++;
	return *p ? -1 : 0;
}

void jitk__arch_format(char out[JITK_ARCH_STRLEN], jitk_arch a)
{
	snprintf(out, JITK_ARCH_STRLEN, "%s_%d%s",
		 a.kind == 'c' ? "compute" : "sm", a.cc,
		 a.suffix == 'a' ? "a" : a.suffix == 'f' ? "f" : "");
}

int jitk__arch_suffix_ok(jitk_arch a)
{
	/* NVRTC 13 (tried for every sm_/compute_ it lists): 'a' exists for
	 * sm_90 and sm_100 onward, 'f' (family) for sm_100 onward. */
	if (a.suffix == 'a')
		return a.cc == 90 || a.cc >= 100;
	if (a.suffix == 'f')
		return a.cc >= 100;
	return !a.suffix;
}

/* ---------------------------------------------------------------- time */

double jitk__now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

double jitk__thread_cpu_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}
