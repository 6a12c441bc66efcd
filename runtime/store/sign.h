/* sign.h - provenance of cache entries: ed25519 signatures (OpenSSL 3's
 * EVP) over a fingerprint of (entry format, key, target, content digest),
 * the signing key of a builder, the trusted keys of a node and what a node
 * does with a remote object or bundle entry that no trusted key signed.
 * docs/cache-format.md, "Signatures", describes the bytes. */
#ifndef JITK_SIGN_H
#define JITK_SIGN_H

#include "store/cache.h"

/* "jitk-sig-v1;4;<64 hex>;<target>;<64 hex>" and its NUL */
#define JITK_FINGERPRINT_MAX 192

typedef struct jitk_signer jitk_signer; /* a secret key: what a builder signs with */
/* (jitk_trust, the trusted public keys and the policy, is declared in cache.h) */

/* ------------------------------------------------------------- signing */

/* Load the secret key file at path ("NAME:BASE64" of the 32-byte seed and
 * the 32-byte public key, as jitk_key_generate writes it). The file must
 * be a regular file (not a link), this user's, readable and writable by
 * nobody else. JITK_EINVAL with "PATH: why" otherwise. */
int jitk__signer_load(jitk_signer **out, const char *path);
/* The signing key an option names, else $JITK_SIGNING_KEY (NULL or "":
 * *out stays NULL). */
int jitk__signer_open(jitk_signer **out, const char *option);
void jitk__signer_free(jitk_signer *s);
const char *jitk__signer_name(const jitk_signer *s);
/* Sign e (its key, target, flags, names and image as they are now): sets
 * e->sig_name and e->sig, replacing a signature it had. JITK_ENOMEM when
 * OpenSSL fails. Thread-safe. */
int jitk__sign_entry(const jitk_signer *s, jitk_cache_entry *e);

/* The message a signature signs, into out (JITK_FINGERPRINT_MAX bytes):
 * "jitk-sig-v1;FORMAT;KEY;TARGET;DIGEST" with the key and the content
 * digest (SHA-256 of the header's bytes 64..87 as e encodes them, its
 * names table and its image) in lower-case hex. 0, or -1 when hashing
 * failed. */
int jitk__fingerprint(char out[JITK_FINGERPRINT_MAX], const jitk_cache_entry *e);

/* The signature section of a format 4 entry (after its image): its size
 * for e (0 when unsigned), its bytes into p, and parsed from the n bytes
 * at p into e (NULL, or why it is malformed). */
size_t jitk__sig_section_size(const jitk_cache_entry *e);
void jitk__sig_section_put(uint8_t *p, const jitk_cache_entry *e);
const char *jitk__sig_section_get(jitk_cache_entry *e, const uint8_t *p, size_t n);

/* ----------------------------------------------------------- verifying */

/* The trusted keys (keys: "NAME:BASE64" words separated by white space or
 * commas, or, when it starts with '/' or '.', a file of them where '#'
 * starts a comment; NULL: $JITK_TRUSTED_KEYS) and whether signatures are
 * required (require: 0 or 1; -1: $JITK_REQUIRE_SIGS, else on exactly when
 * keys is not empty - a file of comments only included). *out stays NULL when no key is set and signatures are not
 * required: nothing is checked. JITK_EINVAL naming the variable or file
 * (and line) for a malformed key, a name listed twice, a file that is not
 * a regular file, this user's or root's and writable by nobody else. */
int jitk__trust_new(jitk_trust **out, const char *keys, int require, const jitk_logger *log);
void jitk__trust_free(jitk_trust *t);
int jitk__trust_required(const jitk_trust *t);

/* What e's signature is worth against t's keys (t NULL: no key): the
 * state, and in *signer (borrowed from e) the name it claims. */
jitk_sig_state jitk__trust_check(jitk_trust *t, const jitk_cache_entry *e, const char **signer);
/* May e, which came from a remote or a bundle (from: JITK_FROM_REMOTE or
 * JITK_FROM_BUNDLE), be used? NULL: yes, and e->from is set to from, with
 * JITK_FROM_VERIFIED when a trusted key's signature was checked; else why
 * not (static text). t NULL admits everything. Counts nothing. */
const char *jitk__trust_verdict(jitk_trust *t, jitk_cache_entry *e, unsigned from);
/* jitk__trust_verdict, counted: 0 when e may be used; -1 when it is
 * refused, which is warned about once per source (a URL, a bundle path)
 * and logged at info level after that. The caller frees a refused e and
 * treats it as a miss. */
int jitk__trust_admit(jitk_trust *t, jitk_cache_entry *e, unsigned from, const char *source);

/* One line for jitk explain: where the entry came from and who signed it
 * ("compiled here", "a remote, signed by ci-1 (verified when stored)"). */
void jitk__origin_text(char *out, size_t n, const jitk_cache_entry *e);

/* The trust's share of jitk_sign_stats (required, keys, counters); nothing
 * for a NULL t. */
void jitk__trust_stats(jitk_sign_stats *s, const jitk_trust *t);

#endif
