/* sign.c - provenance: who made a cache entry.
 *
 * A builder signs each entry it publishes with an ed25519 key (OpenSSL 3's
 * EVP: no curve code here); a node lists the public keys it trusts and, by
 * default once it lists any, refuses a remote object or a bundle entry that
 * none of them signed. The signature covers a fingerprint of the entry's
 * format, key, target and a SHA-256 digest of its contents, so it cannot be
 * replayed under another key or target. Keys have names (Nix's
 * "NAME:BASE64" lines), so that several can be trusted at once and one
 * retired by removing its line. docs/cache-format.md, "Signatures". */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "store/bundle.h"
#include "store/cache.h"
#include "store/sign.h"

#define SEED_SIZE 32
#define PUB_SIZE 32
#define KEY_FILE_MAX 4096         /* a secret key file */
#define KEYS_FILE_MAX (1u << 20)  /* a file of trusted keys */
#define KEYS_MAX 1024             /* trusted keys */
#define SIG_ALG_ED25519 1u

struct jitk_signer {
	char name[JITK_KEY_NAME_MAX + 1];
	EVP_PKEY *key;
};

typedef struct {
	char name[JITK_KEY_NAME_MAX + 1];
	uint8_t pub[PUB_SIZE];
	EVP_PKEY *key; /* made on first use, under the trust's lock */
} trusted_key;

struct jitk_trust {
	trusted_key *keys;
	size_t nkeys;
	int require;
	jitk_logger log;
	pthread_mutex_t lock; /* warned, and the keys' EVP_PKEYs */
	char **warned;        /* the sources a refusal was warned about */
	size_t nwarned;
	atomic_ullong verified, refused, unverified, verify_ns;
};

/* -------------------------------------------------------------- base64 */

static int b64_char(int c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '+' || c == '/';
}

/* Decode exactly want bytes from the n characters at s, canonical base64
 * only (what encoding them gives back); 0 or -1. got: the size it holds
 * (for "a secret key, not a public one"), or 0 when it is no base64. */
static int b64_decode(uint8_t *out, size_t want, const char *s, size_t n, size_t *got)
{
	/* at most 64 bytes: 88 characters, which decode to 66 with padding */
	unsigned char buf[96], again[128];
	size_t i, pad = 0;
	int len;

	*got = 0;
	if (!n || n % 4 || n > 88 || want > 64)
		return -1;
	for (i = 0; i < n; i++) {
		if (s[i] == '=' && i >= n - 2)
			pad++;
		else if (pad || !b64_char((unsigned char)s[i]))
			return -1;
	}
	len = EVP_DecodeBlock(buf, (const unsigned char *)s, (int)n);
	if (len < 0 || (size_t)len < pad)
		return -1;
	*got = (size_t)len - pad;
	if (*got != want)
		return -1;
	EVP_EncodeBlock(again, buf, (int)want);
	i = strlen((const char *)again) == n && !memcmp(again, s, n);
	if (i)
		memcpy(out, buf, want);
	OPENSSL_cleanse(buf, sizeof(buf));
	return i ? 0 : -1;
}

/* ----------------------------------------------------------- key names */

/* A key's name: 1 to 64 of [A-Za-z0-9._-], starting with a letter or a
 * digit (so a name never reads as a path, an option or a comment). */
static int name_ok(const char *s, size_t n)
{
	size_t i;

	if (!n || n > JITK_KEY_NAME_MAX || !((s[0] >= 'A' && s[0] <= 'Z') ||
					     (s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9')))
		return 0;
	for (i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return 0;
	}
	return 1;
}

#define NAME_RULE "1 to 64 letters, digits, '.', '_' or '-', starting with a letter or a digit"

/* --------------------------------------------------------------- files */

/* Read the file at path (at most max bytes) after checking what it is:
 * a regular file owned by this user or root, writable by nobody else, and
 * when secret, readable by nobody but its owner and group. JITK_EINVAL or
 * JITK_EIO naming what (the variable) and the path. */
static int read_checked(char **out, const char *what, const char *path, size_t max, int secret)
{
	struct stat st;
	char *buf = NULL;
	size_t len = 0;
	int fd, rc = 0;

	*out = NULL;
	/* O_NONBLOCK: a FIFO is refused below, not waited on */
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return jitk__error(JITK_EIO, "%s %s: %s", what, path, strerror(errno));
	if (fstat(fd, &st))
		rc = jitk__error(JITK_EIO, "%s %s: %s", what, path, strerror(errno));
	else if (!S_ISREG(st.st_mode))
		rc = jitk__error(JITK_EINVAL, "%s %s is not a regular file", what, path);
	else if (st.st_uid != jitk__trusted_uid() && st.st_uid != 0)
		rc = jitk__error(JITK_EINVAL, "%s %s is owned by uid %u, not by this user or root", what,
				 path, (unsigned)st.st_uid);
	else if (st.st_mode & (S_IWGRP | S_IWOTH))
		rc = jitk__error(JITK_EINVAL, "%s %s is writable by others (chmod go-w)", what, path);
	else if (secret && (st.st_mode & S_IROTH))
		rc = jitk__error(JITK_EINVAL, "%s %s is readable by others (chmod 600)", what, path);
	else if ((uint64_t)st.st_size > max)
		rc = jitk__error(JITK_EINVAL, "%s %s is larger than %zu bytes", what, path, max);
	else if (!(buf = malloc((size_t)st.st_size + 1)))
		rc = jitk__error(JITK_ENOMEM, "out of memory");
	while (!rc && len < (size_t)st.st_size) {
		ssize_t k = read(fd, buf + len, (size_t)st.st_size - len);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			rc = jitk__error(JITK_EIO, "%s %s: %s", what, path, k ? strerror(errno) : "cut short");
		else
			len += (size_t)k;
	}
	close(fd);
	if (rc) {
		if (buf)
			OPENSSL_cleanse(buf, (size_t)st.st_size + 1);
		free(buf);
		return rc;
	}
	buf[len] = '\0';
	*out = buf;
	return 0;
}

/* ------------------------------------------------------------- signing */

/* "NAME:BASE64" of seed and public key, one line. */
static int parse_secret(jitk_signer *s, const char *text, const char *path)
{
	uint8_t both[SEED_SIZE + PUB_SIZE], pub[PUB_SIZE];
	const char *colon = strchr(text, ':');
	size_t n = strcspn(text, "\r\n"), got = 0, publen = PUB_SIZE;
	int rc = 0;

	if (text[n] && text[n + strspn(text + n, "\r\n")])
		return jitk__error(JITK_EINVAL, "JITK_SIGNING_KEY %s: more than one line", path);
	if (!colon || (size_t)(colon - text) >= n || !name_ok(text, (size_t)(colon - text)))
		return jitk__error(JITK_EINVAL, "JITK_SIGNING_KEY %s: not a secret key (NAME:BASE64, "
				   "NAME " NAME_RULE ")", path);
	if (b64_decode(both, sizeof(both), colon + 1, n - (size_t)(colon + 1 - text), &got))
		return jitk__error(JITK_EINVAL, "JITK_SIGNING_KEY %s: %s", path,
				   got == PUB_SIZE ? "a public key, not a secret one"
						   : "not a secret key (NAME:BASE64 of 64 bytes)");
	memcpy(s->name, text, (size_t)(colon - text));
	s->name[colon - text] = '\0';
	s->key = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, both, SEED_SIZE);
	/* the public half must be the secret's: a damaged file signs nothing */
	if (!s->key || EVP_PKEY_get_raw_public_key(s->key, pub, &publen) != 1)
		rc = jitk__error(JITK_EINVAL, "JITK_SIGNING_KEY %s: OpenSSL does not take the key", path);
	else if (memcmp(pub, both + SEED_SIZE, PUB_SIZE))
		rc = jitk__error(JITK_EINVAL, "JITK_SIGNING_KEY %s: its public half is not its secret "
				 "key's (a damaged file?)", path);
	OPENSSL_cleanse(both, sizeof(both));
	return rc;
}

int jitk__signer_load(jitk_signer **out, const char *path)
{
	jitk_signer *s;
	char *text = NULL;
	int rc;

	*out = NULL;
	if ((rc = read_checked(&text, "JITK_SIGNING_KEY", path, KEY_FILE_MAX, 1)))
		return rc;
	if (!(s = calloc(1, sizeof(*s))))
		rc = jitk__error(JITK_ENOMEM, "out of memory");
	else if (!(rc = parse_secret(s, text, path)))
		*out = s;
	OPENSSL_cleanse(text, strlen(text));
	free(text);
	if (rc)
		jitk__signer_free(s);
	return rc;
}

int jitk__signer_open(jitk_signer **out, const char *option)
{
	const char *path = option ? option : jitk__env("JITK_SIGNING_KEY");

	*out = NULL;
	return path && *path ? jitk__signer_load(out, path) : 0;
}

void jitk__signer_free(jitk_signer *s)
{
	if (!s)
		return;
	EVP_PKEY_free(s->key);
	free(s);
}

const char *jitk__signer_name(const jitk_signer *s)
{
	return s->name;
}

static void names_table(jitk_hasher *h, const jitk_cache_entry *e)
{
	size_t i;

	for (i = 0; i < e->nnames; i++)
		jitk__hasher_update(h, e->names[i], strlen(e->names[i]) + 1);
}

int jitk__fingerprint(char out[JITK_FINGERPRINT_MAX], const jitk_cache_entry *e)
{
	uint8_t fields[24], digest[JITK_HASH_SIZE];
	char key[2 * JITK_HASH_SIZE + 1], sum[2 * JITK_HASH_SIZE + 1];
	jitk_hasher *h = jitk__hasher_new();
	uint64_t names = 0;
	size_t i;

	if (!h)
		return -1;
	for (i = 0; i < e->nnames; i++)
		names += strlen(e->names[i]) + 1;
	/* the header's bytes 64..87: what the names and the image are */
	jitk__put64(fields, names);
	jitk__put32(fields + 8, (uint32_t)e->nnames);
	jitk__put32(fields + 12, e->is_ptx ? 1u : 0u);
	jitk__put64(fields + 16, e->size);
	jitk__hasher_update(h, fields, sizeof(fields));
	names_table(h, e);
	jitk__hasher_update(h, e->image, e->size);
	if (jitk__hasher_final(h, digest))
		return -1;
	jitk__hex(key, e->key, JITK_HASH_SIZE);
	jitk__hex(sum, digest, JITK_HASH_SIZE);
	snprintf(out, JITK_FINGERPRINT_MAX, "jitk-sig-v1;%d;%s;%.15s;%s", JITK_CACHE_FORMAT, key,
		 e->target, sum);
	return 0;
}

int jitk__sign_entry(const jitk_signer *s, jitk_cache_entry *e)
{
	char fp[JITK_FINGERPRINT_MAX];
	EVP_MD_CTX *m = EVP_MD_CTX_new();
	size_t len = JITK_SIG_SIZE;
	int ok;

	ok = m && !jitk__fingerprint(fp, e) && EVP_DigestSignInit(m, NULL, NULL, NULL, s->key) == 1 &&
	     EVP_DigestSign(m, e->sig, &len, (const unsigned char *)fp, strlen(fp)) == 1 &&
	     len == JITK_SIG_SIZE;
	EVP_MD_CTX_free(m);
	if (!ok) {
		memset(e->sig, 0, sizeof(e->sig));
		e->sig_name[0] = '\0';
		return jitk__error(JITK_ENOMEM, "signing with the key %s failed (OpenSSL)", s->name);
	}
	memcpy(e->sig_name, s->name, sizeof(e->sig_name));
	return 0;
}

/* ------------------------------------------------ the signature section */

/* Section: algorithm u32 (1: ed25519), name length u32, the name, the
 * 64-byte signature; nothing else. */
size_t jitk__sig_section_size(const jitk_cache_entry *e)
{
	return e->sig_name[0] ? 8 + strlen(e->sig_name) + JITK_SIG_SIZE : 0;
}

void jitk__sig_section_put(uint8_t *p, const jitk_cache_entry *e)
{
	size_t n = strlen(e->sig_name);

	if (!n)
		return;
	jitk__put32(p, SIG_ALG_ED25519);
	jitk__put32(p + 4, (uint32_t)n);
	memcpy(p + 8, e->sig_name, n);
	memcpy(p + 8 + n, e->sig, JITK_SIG_SIZE);
}

const char *jitk__sig_section_get(jitk_cache_entry *e, const uint8_t *p, size_t n)
{
	uint32_t alg, len;

	e->sig_name[0] = '\0';
	if (!n)
		return NULL;
	if (n < 8 + 1 + JITK_SIG_SIZE || n > JITK_SIG_SECTION_MAX)
		return "bad signature section (its size)";
	alg = jitk__get32(p);
	len = jitk__get32(p + 4);
	if (alg != SIG_ALG_ED25519)
		return "bad signature section (an algorithm other than ed25519)";
	if (len > JITK_KEY_NAME_MAX || (size_t)len + 8 + JITK_SIG_SIZE != n)
		return "bad signature section (its sizes disagree)";
	if (!name_ok((const char *)p + 8, len))
		return "bad signature section (a bad key name)";
	memcpy(e->sig_name, p + 8, len);
	e->sig_name[len] = '\0';
	memcpy(e->sig, p + 8 + len, JITK_SIG_SIZE);
	return NULL;
}

/* ----------------------------------------------------------- verifying */

static atomic_int require_warned;

/* $JITK_REQUIRE_SIGS: def when unset; parsed as every boolean variable
 * (jitk__env_bool): an unknown value is warned about once per process and
 * means the safe thing, required. */
static int require_from_env(const jitk_logger *log, int def)
{
	const char *name = "JITK_REQUIRE_SIGS";

	if (!jitk__env(name))
		return def;
	/* a known value reads the same whatever the safe meaning */
	if (jitk__env_bool(NULL, name, 1, "") == jitk__env_bool(NULL, name, 0, ""))
		return jitk__env_bool(NULL, name, 1, "");
	return jitk__env_bool(atomic_exchange(&require_warned, 1) ? NULL : log, name, 1,
			      "signatures are required");
}

/* One "NAME:BASE64" word into t; where says where it is for messages. */
static int add_key(jitk_trust *t, const char *w, size_t n, const char *where)
{
	const char *colon = memchr(w, ':', n);
	uint8_t pub[PUB_SIZE];
	size_t got = 0, i, nlen = colon ? (size_t)(colon - w) : 0;
	trusted_key *k;

	if (!colon || !name_ok(w, nlen))
		return jitk__error(JITK_EINVAL, "%s: '%.*s' is not a public key NAME:BASE64 (NAME "
				   NAME_RULE ")", where, (int)(n > 40 ? 40 : n), w);
	/* the base64 is never echoed: it may be a secret key pasted by mistake */
	if (b64_decode(pub, sizeof(pub), colon + 1, n - nlen - 1, &got))
		return jitk__error(JITK_EINVAL, "%s: the key %.*s is %s", where, (int)nlen, w,
				   got == SEED_SIZE + PUB_SIZE ? "a secret key, not a public one (keep it off the nodes)"
							       : "not the base64 of a 32-byte ed25519 public key");
	for (i = 0; i < t->nkeys; i++)
		if (strlen(t->keys[i].name) == nlen && !memcmp(t->keys[i].name, w, nlen))
			return jitk__error(JITK_EINVAL, "%s: the key name %.*s is listed twice", where,
					   (int)nlen, w);
	if (t->nkeys >= KEYS_MAX)
		return jitk__error(JITK_EINVAL, "%s: more than %d trusted keys", where, KEYS_MAX);
	if (!(k = realloc(t->keys, (t->nkeys + 1) * sizeof(*k))))
		return jitk__error(JITK_ENOMEM, "out of memory");
	t->keys = k;
	k += t->nkeys;
	memcpy(k->name, w, nlen);
	k->name[nlen] = '\0';
	/* EVP waits for the first check: its start-up (OpenSSL's configuration
	 * and provider, 0.6-0.7 ms) is not for processes that only read their
	 * own cache */
	memcpy(k->pub, pub, PUB_SIZE);
	k->key = NULL;
	t->nkeys++;
	return 0;
}

/* Words separated by white space or commas; in a file, '#' starts a
 * comment that runs to the end of the line. */
static int add_keys(jitk_trust *t, const char *text, const char *file)
{
	const char *p = text;
	unsigned line = 1;
	char where[600];

	while (*p) {
		size_t n;
		int rc;

		if (*p == '\n')
			line++;
		if (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n' || *p == ',') {
			p++;
			continue;
		}
		if (*p == '#' && file) {
			p += strcspn(p, "\n");
			continue;
		}
		n = strcspn(p, " \t\r\n,");
		if (file)
			snprintf(where, sizeof(where), "%.500s:%u: error", file, line);
		else
			snprintf(where, sizeof(where), "JITK_TRUSTED_KEYS");
		if ((rc = add_key(t, p, n, where)))
			return rc;
		p += n;
	}
	return 0;
}

int jitk__trust_new(jitk_trust **out, const char *keys, int require, const jitk_logger *log)
{
	jitk_trust *t;
	char *text = NULL;
	int rc = 0, file;

	*out = NULL;
	if (!keys)
		keys = jitk__env("JITK_TRUSTED_KEYS");
	if (!keys)
		keys = "";
	file = keys[0] == '/' || keys[0] == '.';
	if (!(t = calloc(1, sizeof(*t))))
		return jitk__error(JITK_ENOMEM, "out of memory");
	if (log)
		t->log = *log;
	pthread_mutex_init(&t->lock, NULL);
	if (file && (rc = read_checked(&text, "JITK_TRUSTED_KEYS", keys, KEYS_FILE_MAX, 0)))
		goto done;
	if ((rc = add_keys(t, file ? text : keys, file ? keys : NULL)))
		goto done;
	/* keys asked for but none there (an empty file) still mean "check":
	 * a list that failed to arrive never turns verification off */
	t->require = require >= 0 ? !!require : require_from_env(&t->log, *keys != '\0');
	if (!t->nkeys && !t->require)
		goto done; /* nothing to check */
	if (!t->nkeys)
		jitk__log(&t->log, JITK_LOG_WARN,
			  "signatures are required (JITK_REQUIRE_SIGS) but no key is trusted "
			  "(JITK_TRUSTED_KEYS): every remote object and bundle entry is refused");
	*out = t;
	t = NULL;
done:
	free(text);
	jitk__trust_free(t);
	return rc;
}

void jitk__trust_free(jitk_trust *t)
{
	size_t i;

	if (!t)
		return;
	for (i = 0; i < t->nkeys; i++)
		EVP_PKEY_free(t->keys[i].key);
	free(t->keys);
	for (i = 0; i < t->nwarned; i++)
		free(t->warned[i]);
	free(t->warned);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

int jitk__trust_required(const jitk_trust *t)
{
	return t && t->require;
}

jitk_sig_state jitk__trust_check(jitk_trust *t, const jitk_cache_entry *e, const char **signer)
{
	char fp[JITK_FINGERPRINT_MAX];
	trusted_key *k = NULL;
	EVP_PKEY *key;
	EVP_MD_CTX *m;
	double t0;
	size_t i;
	int ok;

	*signer = e->sig_name;
	if (!e->sig_name[0])
		return JITK_SIG_UNSIGNED;
	for (i = 0; t && i < t->nkeys && !k; i++)
		if (!strcmp(t->keys[i].name, e->sig_name))
			k = &t->keys[i];
	if (!k)
		return JITK_SIG_UNTRUSTED;
	t0 = jitk__now_ms();
	pthread_mutex_lock(&t->lock);
	if (!k->key)
		k->key = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, k->pub, PUB_SIZE);
	key = k->key;
	pthread_mutex_unlock(&t->lock);
	m = EVP_MD_CTX_new();
	/* (no key object: OpenSSL failed, nothing verifies) */
	ok = m && key && !jitk__fingerprint(fp, e) && EVP_DigestVerifyInit(m, NULL, NULL, NULL, key) == 1 &&
	     EVP_DigestVerify(m, e->sig, JITK_SIG_SIZE, (const unsigned char *)fp, strlen(fp)) == 1;
	EVP_MD_CTX_free(m);
	atomic_fetch_add(&t->verify_ns, (unsigned long long)((jitk__now_ms() - t0) * 1e6));
	return ok ? JITK_SIG_TRUSTED : JITK_SIG_BAD;
}

const char *jitk__trust_verdict(jitk_trust *t, jitk_cache_entry *e, unsigned from)
{
	const char *signer;
	jitk_sig_state st;

	e->from = from;
	if (!t)
		return NULL;
	if (!t->require) {
		/* not required: taken as it is, the signature left unchecked */
		atomic_fetch_add(&t->unverified, 1);
		return NULL;
	}
	st = jitk__trust_check(t, e, &signer);
	switch (st) {
	case JITK_SIG_TRUSTED:
		e->from |= JITK_FROM_VERIFIED;
		atomic_fetch_add(&t->verified, 1);
		return NULL;
	case JITK_SIG_UNSIGNED: return "not signed (signatures are required)";
	case JITK_SIG_UNTRUSTED: return "signed by a key that is not trusted (JITK_TRUSTED_KEYS)";
	case JITK_SIG_BAD: return "its signature does not verify (forged, or made for other bytes, key or target)";
	}
	return "?";
}

/* 1 the first time source is seen (then it is remembered). */
static int first_for(jitk_trust *t, const char *source)
{
	char **w;
	size_t i;
	int first = 1;

	pthread_mutex_lock(&t->lock);
	for (i = 0; i < t->nwarned && first; i++)
		first = strcmp(t->warned[i], source) != 0;
	if (first && (w = realloc(t->warned, (t->nwarned + 1) * sizeof(*w)))) {
		t->warned = w;
		if ((w[t->nwarned] = jitk__strdup(source)))
			t->nwarned++;
	}
	pthread_mutex_unlock(&t->lock);
	return first;
}

int jitk__trust_admit(jitk_trust *t, jitk_cache_entry *e, unsigned from, const char *source)
{
	const char *why = jitk__trust_verdict(t, e, from);
	char hex[2 * JITK_HASH_SIZE + 1];
	int first;

	if (!why)
		return 0;
	atomic_fetch_add(&t->refused, 1);
	jitk__hex(hex, e->key, JITK_HASH_SIZE);
	first = first_for(t, source);
	jitk__log(&t->log, first ? JITK_LOG_WARN : JITK_LOG_INFO,
		  "%s %.16s... (%s) from %s refused: %s%s%s; compiling it%s",
		  from == JITK_FROM_REMOTE ? "remote object" : "bundle entry", hex, e->target, source,
		  why, e->sig_name[0] ? ", key " : "", e->sig_name,
		  first ? " (further refusals from there are counted, not warned about)" : "");
	return -1;
}

void jitk__origin_text(char *out, size_t n, const jitk_cache_entry *e)
{
	unsigned src = e->from & 0xffu;
	const char *where = src == JITK_FROM_REMOTE ? "fetched from a remote"
			    : src == JITK_FROM_BUNDLE ? "taken from a bundle"
						      : "compiled into this cache";

	if (e->format == 3)
		snprintf(out, n, "not recorded (a format 3 entry: unsigned)");
	else if (!e->sig_name[0])
		snprintf(out, n, "%s, unsigned", where);
	else if (e->from & JITK_FROM_VERIFIED)
		snprintf(out, n, "%s, signed by %s (verified against the trusted keys)", where,
			 e->sig_name);
	else if (src == JITK_FROM_HERE)
		snprintf(out, n, "%s, signed by %s", where, e->sig_name);
	else
		snprintf(out, n, "%s, signed by %s (not verified: signatures were not required)", where,
			 e->sig_name);
}

/* -------------------------------------------------------------- public */

int jitk_key_generate(char **out, const char *name, const char *secret_file)
{
	uint8_t both[SEED_SIZE + PUB_SIZE];
	char b64[4 * sizeof(both) / 3 + 8], pub64[4 * PUB_SIZE / 3 + 8], *line = NULL;
	size_t len = SEED_SIZE, plen = PUB_SIZE;
	EVP_PKEY *k = NULL;
	int fd = -1, rc = 0, made = 0;

	if (!out || !name || !secret_file)
		return jitk__error(JITK_EINVAL, "jitk_key_generate: NULL argument");
	*out = NULL;
	if (!name_ok(name, strlen(name)))
		return jitk__error(JITK_EINVAL, "'%.80s' is not a key name (" NAME_RULE ")", name);
	if (!(k = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519")) ||
	    EVP_PKEY_get_raw_private_key(k, both, &len) != 1 || len != SEED_SIZE ||
	    EVP_PKEY_get_raw_public_key(k, both + SEED_SIZE, &plen) != 1 || plen != PUB_SIZE) {
		rc = jitk__error(JITK_ENOMEM, "generating an ed25519 key failed (OpenSSL)");
		goto done;
	}
	EVP_EncodeBlock((unsigned char *)b64, both, (int)sizeof(both));
	EVP_EncodeBlock((unsigned char *)pub64, both + SEED_SIZE, PUB_SIZE);
	line = jitk__asprintf("%s:%s", name, pub64);
	/* O_EXCL with O_CREAT: an existing file, and a link (even one to
	 * nowhere), are refused, never written through */
	fd = open(secret_file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
	if (fd < 0) {
		struct stat st;
		int e = errno;

		rc = jitk__error(JITK_EIO, "%s: %s", secret_file,
				 e != EEXIST ? strerror(e)
				 : !lstat(secret_file, &st) && S_ISLNK(st.st_mode)
					 ? "is a symbolic link (refused: a key is never written through one)"
					 : "exists (a key file is never overwritten)");
		goto done;
	}
	made = 1;
	if (!line) {
		rc = jitk__error(JITK_ENOMEM, "out of memory");
		goto done;
	}
	{
		char *text = jitk__asprintf("%s:%s\n", name, b64);
		size_t n = text ? strlen(text) : 0, at = 0;

		while (text && at < n) {
			ssize_t w = write(fd, text + at, n - at);

			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				break;
			at += (size_t)w;
		}
		if (!text)
			rc = jitk__error(JITK_ENOMEM, "out of memory");
		else if (at < n || fchmod(fd, 0600) || fsync(fd))
			rc = jitk__error(JITK_EIO, "%s: %s", secret_file, strerror(errno ? errno : EIO));
		if (text)
			OPENSSL_cleanse(text, n);
		free(text);
	}
done:
	OPENSSL_cleanse(both, sizeof(both));
	OPENSSL_cleanse(b64, sizeof(b64));
	EVP_PKEY_free(k);
	if (fd >= 0 && close(fd) && !rc)
		rc = jitk__error(JITK_EIO, "%s: %s", secret_file, strerror(errno));
	if (rc && made)
		(void)unlink(secret_file);
	if (rc) {
		free(line);
		return rc;
	}
	*out = line;
	return 0;
}

static const size_t sig_summary_sizes[] = { 0, JITK_OUT_END(jitk_sig_summary, broken) };

void jitk__trust_stats(jitk_sign_stats *s, const jitk_trust *t)
{
	if (!t)
		return;
	s->required = t->require;
	s->trusted_keys = (unsigned)t->nkeys;
	s->verified = atomic_load(&t->verified);
	s->refused = atomic_load(&t->refused);
	s->unverified = atomic_load(&t->unverified);
	s->verify_ms = (double)atomic_load(&t->verify_ns) / 1e6;
}

/* ------------------------------------------- jitk cache verify --trusted */

typedef struct {
	jitk_trust *t;
	jitk_sig_summary *out;
	jitk_sig_report_fn report;
	void *ctx;
} check_ctx;

static void check_one(check_ctx *x, const char *what, const jitk_cache_entry *e)
{
	const char *signer;
	jitk_sig_state st = jitk__trust_check(x->t, e, &signer);

	x->out->entries++;
	if (st == JITK_SIG_TRUSTED)
		x->out->trusted++;
	else if (st == JITK_SIG_UNTRUSTED)
		x->out->untrusted++;
	else if (st == JITK_SIG_BAD)
		x->out->bad++;
	else
		x->out->unsigned_entries++;
	if (x->report)
		x->report(x->ctx, what, e->target, st, signer);
}

static int check_dir_entry(void *p, const char *path, const jitk_cache_entry *e)
{
	check_one(p, path, e);
	return 0;
}

static void check_dir_bad(void *p, const char *path, const char *problem)
{
	check_ctx *x = p;

	(void)path;
	(void)problem;
	x->out->broken++;
}

int jitk_signatures_check(jitk_sig_summary *out, const char *path, const char *trusted_keys,
			  jitk_sig_report_fn report, void *ctx)
{
	jitk_sig_summary s = JITK_SIG_SUMMARY_INIT;
	check_ctx x = { NULL, &s, report, ctx };
	jitk_bundle *b = NULL;
	struct stat st;
	char why[256];
	uint32_t i;
	int rc;

	if (!out || !path)
		return jitk__error(JITK_EINVAL, "jitk_signatures_check: NULL argument");
	if ((rc = jitk__out_check("jitk_sig_summary", out->version, JITK_SIG_SUMMARY_VERSION)))
		return rc;
	/* every key given, none required: only checking */
	if ((rc = jitk__trust_new(&x.t, trusted_keys, 0, NULL)))
		return rc;
	if (!stat(path, &st) && S_ISREG(st.st_mode)) {
		if (jitk__bundle_open(&b, path, 0, why, sizeof(why))) {
			rc = jitk__error(JITK_EIO, "%s: %s", path, why);
			goto done;
		}
		for (i = 0; i < jitk__bundle_count(b); i++) {
			jitk_cache_entry e;
			const char *problem = NULL;
			char what[2 * JITK_HASH_SIZE + 8];

			if (jitk__bundle_entry(b, i, &e, &problem)) {
				s.broken++;
				continue;
			}
			snprintf(what, sizeof(what), "key ");
			jitk__hex(what + 4, e.key, JITK_HASH_SIZE);
			check_one(&x, what, &e);
			jitk__cache_entry_free(&e);
		}
	} else if ((rc = jitk__cache_each(path, check_dir_entry, check_dir_bad, &x))) {
		goto done;
	}
	jitk__out_fill(out, &s, sig_summary_sizes);
	rc = JITK_OK;
done:
	jitk__bundle_close(b);
	jitk__trust_free(x.t);
	return rc;
}
