/* remote.h - the remote cache tier: entries as objects URL/v1/<key> on an
 * HTTP(S) server (nginx WebDAV, an S3-compatible store), through libcurl.
 * This layer moves bytes; the compiler verifies them exactly as it
 * verifies a local entry. docs/cache-format.md, "The remote". */
#ifndef JITK_REMOTE_H
#define JITK_REMOTE_H

#include <signal.h>
#include <stdatomic.h>

#include "base/internal.h"

#define JITK_REMOTE_CONNECT_MS 100
#define JITK_REMOTE_TIMEOUT_MS 2000

typedef struct jitk_remote jitk_remote;

/* The compiler's counters of the remote (hits, misses and rejects are the
 * compiler's to count: only it knows whether an object verified). */
typedef struct {
	atomic_ullong hits, misses, uploads, rejects, errors;
	atomic_ullong us;      /* time in requests */
	atomic_ullong wait_us; /* time waiting for other processes' leases */
} jitk_remote_counters;

/* urls: comma-separated base URLs (NULL or "" = none: *out stays NULL).
 * A URL that is not http:// or https:// is dropped with one warning; a
 * list with none left is no remote. Never fails but for JITK_ENOMEM. */
int jitk__remote_open(jitk_remote **out, const char *urls, int read_only, long connect_ms,
		      long timeout_ms, const jitk_logger *log);
void jitk__remote_close(jitk_remote *r);
int jitk__remote_read_only(const jitk_remote *r);
jitk_remote_counters *jitk__remote_counters(jitk_remote *r);

/* The URL key belongs to (rendezvous hashing over the URLs); borrowed. */
const char *jitk__remote_url(const jitk_remote *r, const uint8_t key[JITK_HASH_SIZE]);
/* Whether key's URL is still on (it is off after its first failure). */
int jitk__remote_on(const jitk_remote *r, const uint8_t key[JITK_HASH_SIZE]);

/* GET URL/v1/<key>. JITK_OK: *out (the caller frees it) holds the object's
 * *len bytes, not verified. JITK_ENOENT: no such object (404). JITK_EIO:
 * the URL is off, or failed now (then it is off: warned once, counted).
 * Sets no error (jitk_error_last is left alone). */
int jitk__remote_get(jitk_remote *r, const uint8_t key[JITK_HASH_SIZE], uint8_t **out,
		     size_t *len);
/* PUT URL/v1/<key>. JITK_OK (counted as an upload), JITK_EIO as above;
 * JITK_EINVAL when the remote is read-only. */
int jitk__remote_put(jitk_remote *r, const uint8_t key[JITK_HASH_SIZE], const uint8_t *data,
		     size_t len);

/* Credentials never reach a message. jitk__redact copies a message into
 * out (n bytes, cut if need be) with the user information of every URL in
 * it (USER:PASSWORD@ after "scheme://" becomes "***@") masked, as far as
 * the last '@' before a blank, quote, parenthesis or the end;
 * jitk__redact_url masks one URL (or what was meant as one) as far as its
 * last '@'. */
void jitk__redact(char *out, size_t n, const char *in);
void jitk__redact_url(char *out, size_t n, const char *url);

/* No SIGPIPE reaches the host process from jitk's sockets: around every
 * remote or lease operation the calling thread blocks SIGPIPE, and a
 * SIGPIPE raised meanwhile (a write to a connection the peer closed) is
 * taken off the pending set before the thread's mask is restored - unless
 * one was already pending before, which is left for the host. The
 * process's disposition of SIGPIPE is never changed. */
typedef struct {
	sigset_t old;
	int was_pending;
} jitk_sigpipe_guard;
void jitk__sigpipe_block(jitk_sigpipe_guard *g);
void jitk__sigpipe_restore(jitk_sigpipe_guard *g);

#endif
