/* optlib.h - the libraries only the fleet tier needs, loaded on first use
 * (dlopen of libcurl for the remote cache, of hiredis for leases), so that
 * libjitk itself links neither: a machine with only the NVIDIA driver and
 * jitk's own dependencies runs everything but those tiers, which then say
 * why they are off. JITK_LIBCURL / JITK_LIBHIREDIS name another file to
 * load; the default is the soname jitk was built against. */
#ifndef JITK_OPTLIB_H
#define JITK_OPTLIB_H

#include <curl/curl.h>
#include <hiredis/hiredis.h>

/* The members are in the order optlib.c resolves them, and nothing else. */
typedef struct {
	CURLcode (*global_init)(long flags);
	CURL *(*easy_init)(void);
	CURLcode (*easy_setopt)(CURL *h, CURLoption o, ...);
	CURLcode (*easy_perform)(CURL *h);
	CURLcode (*easy_getinfo)(CURL *h, CURLINFO i, ...);
	const char *(*easy_strerror)(CURLcode rc);
	void (*easy_reset)(CURL *h);
	void (*easy_cleanup)(CURL *h);
	struct curl_slist *(*slist_append)(struct curl_slist *l, const char *s);
	void (*slist_free_all)(struct curl_slist *l);
	curl_version_info_data *(*version_info)(CURLversion v);
} jitk_curl_api;

typedef struct {
	redisReader *(*reader_create)(void);
	void (*reader_free)(redisReader *r);
	int (*reader_feed)(redisReader *r, const char *buf, size_t len);
	int (*reader_get_reply)(redisReader *r, void **reply);
	int (*format_command_argv)(char **target, int argc, const char **argv,
				   const size_t *argvlen);
	void (*free_command)(char *cmd);
	void (*free_reply)(void *reply);
} jitk_hiredis_api;

/* The library's entry points, loaded once per process (thread-safe); NULL
 * when it cannot be loaded, *why (NULL allowed) then says what the loader
 * said. */
const jitk_curl_api *jitk__curl(const char **why);
const jitk_hiredis_api *jitk__hiredis(const char **why);

#endif
