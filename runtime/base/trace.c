/* trace.c - profiler ranges through NVTX3 (header-only: nothing is linked;
 * the NVTX code compiled in here looks for a tool - NVTX_INJECTION64_PATH,
 * which Nsight Systems and Nsight Compute set - on its first call and
 * dlopens it). Every range is in the domain "jitk". Without a tool the
 * domain is NULL and a range costs one pthread_once check: the name is
 * not even formatted. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/internal.h"

#ifdef JITK_NO_NVTX

void jitk__range_push(const char *fmt, ...)
{
	(void)fmt;
}

void jitk__range_pop(void)
{
}

#else

#include "base/nvtx.h"

static pthread_once_t domain_once = PTHREAD_ONCE_INIT;
static nvtxDomainHandle_t domain;

static void domain_create(void)
{
	domain = nvtxDomainCreateA("jitk");
}

void jitk__range_push(const char *fmt, ...)
{
	nvtxEventAttributes_t ev;
	char name[256];
	va_list ap;

	pthread_once(&domain_once, domain_create);
	if (!domain)
		return;
	va_start(ap, fmt);
	vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	memset(&ev, 0, sizeof(ev));
	ev.version = NVTX_VERSION;
	ev.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
	ev.messageType = NVTX_MESSAGE_TYPE_ASCII;
	ev.message.ascii = name;
	nvtxDomainRangePushEx(domain, &ev);
}

void jitk__range_pop(void)
{
	pthread_once(&domain_once, domain_create);
	if (domain)
		nvtxDomainRangePop(domain);
}

#endif
