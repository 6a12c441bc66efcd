/* optlib.c - libcurl and hiredis through dlopen (optlib.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/optlib.h"

#ifndef JITK_CURL_SONAME
#define JITK_CURL_SONAME "libcurl.so.4"
#endif
#ifndef JITK_HIREDIS_SONAME
#define JITK_HIREDIS_SONAME "libhiredis.so"
#endif

typedef struct {
	const char *env, *soname;
	pthread_once_t once;
	int ok;
	char why[512];
} lib_state;

/* Open the library (its variable's file, else the soname) and resolve
 * names[i] into slots[i]; any missing one fails the whole library. */
static void *lib_open(lib_state *ls, const char *const *names, void **slots, size_t n)
{
	const char *file = getenv(ls->env);
	void *h;
	size_t i;

	if (!file || !*file)
		file = ls->soname;
	if (!(h = dlopen(file, RTLD_NOW | RTLD_LOCAL))) {
		const char *e = dlerror();

		snprintf(ls->why, sizeof(ls->why), "%s could not be loaded: %s", file,
			 e ? e : "unknown error");
		return NULL;
	}
	for (i = 0; i < n; i++) {
		/* POSIX: dlsym's void * holds a function's address */
		if (!(slots[i] = dlsym(h, names[i]))) {
			snprintf(ls->why, sizeof(ls->why), "%s has no %s (another version than jitk "
				 "was built for?)", file, names[i]);
			dlclose(h);
			return NULL;
		}
	}
	return h; /* never closed: its functions stay in use */
}

/* -------------------------------------------------------------- curl */

static lib_state curl_state = { "JITK_LIBCURL", JITK_CURL_SONAME, PTHREAD_ONCE_INIT, 0, "" };
static jitk_curl_api curl_api;

static void curl_load(void)
{
	static const char *const names[] = {
		"curl_global_init",   "curl_easy_init",    "curl_easy_setopt",
		"curl_easy_perform",  "curl_easy_getinfo", "curl_easy_strerror",
		"curl_easy_reset",    "curl_easy_cleanup", "curl_slist_append",
		"curl_slist_free_all", "curl_version_info",
	};
	void *slots[sizeof(names) / sizeof(names[0])];

	if (!lib_open(&curl_state, names, slots, sizeof(names) / sizeof(names[0])))
		return;
	/* the struct's members are these functions in this order */
	_Static_assert(sizeof(curl_api) == sizeof(slots), "one pointer per name");
	memcpy(&curl_api, slots, sizeof(slots));
	curl_state.ok = 1;
}

const jitk_curl_api *jitk__curl(const char **why)
{
	pthread_once(&curl_state.once, curl_load);
	if (why)
		*why = curl_state.ok ? NULL : curl_state.why;
	return curl_state.ok ? &curl_api : NULL;
}

/* ----------------------------------------------------------- hiredis */

static lib_state redis_state = { "JITK_LIBHIREDIS", JITK_HIREDIS_SONAME, PTHREAD_ONCE_INIT, 0,
				 "" };
static jitk_hiredis_api redis_api;

static void redis_load(void)
{
	static const char *const names[] = {
		"redisReaderCreate",	  "redisReaderFree",  "redisReaderFeed", "redisReaderGetReply",
		"redisFormatCommandArgv", "redisFreeCommand", "freeReplyObject",
	};
	void *slots[sizeof(names) / sizeof(names[0])];

	if (!lib_open(&redis_state, names, slots, sizeof(names) / sizeof(names[0])))
		return;
	_Static_assert(sizeof(redis_api) == sizeof(slots), "one pointer per name");
	memcpy(&redis_api, slots, sizeof(slots));
	redis_state.ok = 1;
}

const jitk_hiredis_api *jitk__hiredis(const char **why)
{
	pthread_once(&redis_state.once, redis_load);
	if (why)
		*why = redis_state.ok ? NULL : redis_state.why;
	return redis_state.ok ? &redis_api : NULL;
}
