/* hash.c - SHA-256 (the cache key), XXH3-128 (entry checksums), hex. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef JITK_SHA256_EVP
#include <openssl/evp.h>
#else
#define OPENSSL_SUPPRESS_DEPRECATED /* SHA256_Init: see "hashing" below */
#include <openssl/sha.h>
#endif

/* xxHash compiled into this file (XXH_INLINE_ALL: every function static),
 * its own warnings left to its authors. */
#define XXH_INLINE_ALL
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
#include <xxhash.h>
#pragma GCC diagnostic pop

#include "base/internal.h"

/* -------------------------------------------------------------- hashing */

/* SHA-256 through OpenSSL's digest functions themselves, not EVP: EVP's
 * first use in a process loads the configuration and the default provider
 * and fetches the algorithm (600-700 us on the 2-core CI machine, more
 * than the whole rest of a cache hit); SHA256_Init has no such start-up
 * and runs the same assembly (SHA-NI where the CPU has it). OpenSSL 3
 * marks these functions deprecated but builds them unless configured with
 * no-deprecated; configure then falls back to EVP (JITK_SHA256_EVP). */
#ifdef JITK_SHA256_EVP
struct jitk_hasher {
	EVP_MD_CTX *ctx;
	int failed;
};

jitk_hasher *jitk__hasher_new(void)
{
	jitk_hasher *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	h->ctx = EVP_MD_CTX_new();
	if (!h->ctx || EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) != 1) {
		EVP_MD_CTX_free(h->ctx);
		free(h);
		return NULL;
	}
	return h;
}

void jitk__hasher_update(jitk_hasher *h, const void *data, size_t n)
{
	if (n && EVP_DigestUpdate(h->ctx, data, n) != 1)
		h->failed = 1;
}

int jitk__hasher_final(jitk_hasher *h, uint8_t out[JITK_HASH_SIZE])
{
	unsigned len = 0;
	int rc = h->failed ? -1 : 0;

	if (!rc && (EVP_DigestFinal_ex(h->ctx, out, &len) != 1 ||
		    len != JITK_HASH_SIZE))
		rc = -1;
	EVP_MD_CTX_free(h->ctx);
	free(h);
	return rc;
}
#else
struct jitk_hasher {
	SHA256_CTX ctx;
	int failed;
};

jitk_hasher *jitk__hasher_new(void)
{
	jitk_hasher *h = calloc(1, sizeof(*h));

	if (h && SHA256_Init(&h->ctx) != 1) {
		free(h);
		return NULL;
	}
	return h;
}

void jitk__hasher_update(jitk_hasher *h, const void *data, size_t n)
{
	if (n && SHA256_Update(&h->ctx, data, n) != 1)
		h->failed = 1;
}

int jitk__hasher_final(jitk_hasher *h, uint8_t out[JITK_HASH_SIZE])
{
	int rc = SHA256_Final(out, &h->ctx) == 1 && !h->failed ? 0 : -1;

	free(h);
	return rc;
}
#endif

void jitk__hasher_field(jitk_hasher *h, const char *tag, const void *data,
			size_t n)
{
	char prefix[96];
	int k = snprintf(prefix, sizeof(prefix), "%s %zu:", tag, n);

	jitk__hasher_update(h, prefix, (size_t)k);
	jitk__hasher_update(h, data, n);
	jitk__hasher_update(h, "\n", 1);
}

int jitk__sha256(uint8_t out[JITK_HASH_SIZE], const void *data, size_t n)
{
	jitk_hasher *h = jitk__hasher_new();

	if (!h)
		return -1;
	jitk__hasher_update(h, data, n);
	return jitk__hasher_final(h, out);
}

/* XXH3-128 (xxHash, inlined from its header: no library to load at run
 * time) for the checksums of cache entries, which guard against torn and
 * corrupted files, not against an adversary (the trust checks of the
 * cache do that; the key stays SHA-256): about ten times faster than
 * SHA-256 over a cubin. The digest is written in xxHash's canonical
 * (big-endian) byte order. */
int jitk__checksum(uint8_t out[JITK_SUM_SIZE], const void *a, size_t na, const void *b,
		   size_t nb)
{
	XXH3_state_t *st = XXH3_createState();
	XXH128_canonical_t c;
	int rc = -1;

	if (!st)
		return -1;
	if (XXH3_128bits_reset(st) == XXH_OK && XXH3_128bits_update(st, a, na) == XXH_OK &&
	    XXH3_128bits_update(st, b, nb) == XXH_OK) {
		XXH128_canonicalFromHash(&c, XXH3_128bits_digest(st));
		memcpy(out, c.digest, JITK_SUM_SIZE);
		rc = 0;
	}
	XXH3_freeState(st);
	return rc;
}

void jitk__hex(char *out, const uint8_t *bytes, size_t n)
{
	static const char digits[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < n; i++) {
		out[2 * i] = digits[bytes[i] >> 4];
		out[2 * i + 1] = digits[bytes[i] & 15];
	}
	out[2 * n] = '\0';
}
