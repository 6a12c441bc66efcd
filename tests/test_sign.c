/* test_sign.c - provenance (issue 23): builders sign what they publish,
 * nodes trust listed keys and refuse what no trusted key signed. Remote
 * objects are served by nginx (WebDAV) on loopback, planted by the test
 * or uploaded by a signing builder; bundles are packed here. Each attack
 * asserts what reached the node: no refused object used or stored (the
 * node's own cache holds what it compiled itself, byte for byte the
 * reference), the counters (refused, verified, remote hits, compiles) and
 * the status. Only the compile half: no GPU. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "servers.h"
#include "store/bundle.h"
#include "compile/compile.h"
#include "store/sign.h"

#define K1 "tadd2[cols=64]"
#define K2 "tadd2[cols=256]"
#define ARCH "sm_90"

enum { KEY_A, KEY_B, KEY_E, NKEYS }; /* ci-a and ci-b are trusted; evil is not */
static const char *const key_names[NKEYS] = { "ci-a", "ci-b", "evil" };

typedef struct {
	char *dir, *specs;
	char *secret[NKEYS], *pub[NKEYS]; /* secret key files, public key lines */
	jitk_cache_entry ref1, ref2;      /* K1's and K2's entries as compiled, unsigned */
	server web;
	int have_web;
	int n; /* for fresh names */
} fixture;

/* -------------------------------------------------------------- helpers */

static char *fresh(fixture *f, const char *what)
{
	char *p = jitk__asprintf("%s/%s-%d", f->dir, what, ++f->n);

	assert_int_equal(jitk__mkdirs(p, 0700), 0);
	return p;
}

/* A node (read_only: uploads nothing) or a builder (signs with key,
 * KEY_* or -1: none) over cache and remote (NULL: none). */
typedef struct {
	const char *cache, *remote, *layers, *trusted;
	int read_only, require, no_compile, key;
} node_cfg;

static jitk_compiler *open_node(const fixture *f, const node_cfg *n, t_log *log)
{
	jitk_compiler_options o;
	jitk_compiler *c = NULL;
	int rc;

	assert_int_equal(jitk_compiler_options_init(&o, JITK_COMPILER_OPTIONS_VERSION), 0);
	o.specs = f->specs;
	o.cache_dir = n->cache ? n->cache : "";
	o.cache_path = n->layers ? n->layers : "";
	o.no_compile = n->no_compile;
	o.force_compile = 0;
	o.log = t_log_fn;
	o.log_payload = log;
	o.log_level = JITK_LOG_DEBUG;
	o.remote = n->remote ? n->remote : "";
	o.remote_read_only = n->read_only;
	o.remote_lease = "";
	o.signing_key = n->key >= 0 ? f->secret[n->key] : "";
	o.trusted_keys = n->trusted ? n->trusted : "";
	o.require_sigs = n->require;
	rc = jitk_compiler_new(&c, &o);
	if (rc)
		fprintf(stderr, "compiler: %s\n", jitk_error_last()->message);
	assert_int_equal(rc, 0);
	return c;
}

static jitk_sign_stats sign_stats(const jitk_compiler *c)
{
	jitk_sign_stats s = JITK_SIGN_STATS_INIT;

	assert_int_equal(jitk_sign_stats_get(&s, c), 0);
	return s;
}

static jitk_remote_stats remote_stats(const jitk_compiler *c)
{
	jitk_remote_stats s = JITK_REMOTE_STATS_INIT;

	assert_int_equal(jitk_remote_stats_get(&s, c), 0);
	return s;
}

/* Build name for ARCH: the status, *origin on success (a cubin). */
static int build(jitk_compiler *c, const char *name, unsigned flags, int *origin)
{
	return t_build_flags(c, name, ARCH, flags, origin);
}

static void entry_copy(jitk_cache_entry *out, const jitk_cache_entry *e)
{
	uint8_t *bytes;
	size_t len;
	const char *problem;

	assert_int_equal(jitk__entry_encode(&bytes, &len, e), 0);
	assert_int_equal(jitk__entry_decode(out, bytes, len, &problem), 0);
	free(bytes);
}

/* e signed with key k (a copy; the caller frees it). */
static void signed_copy(const fixture *f, jitk_cache_entry *out, const jitk_cache_entry *e, int k)
{
	jitk_signer *s;

	entry_copy(out, e);
	assert_int_equal(jitk__signer_load(&s, f->secret[k]), 0);
	assert_int_equal(jitk__sign_entry(s, out), 0);
	jitk__signer_free(s);
}

/* Put e (encoded) where URL_OF(prefix) serves it for key. */
static void plant(const fixture *f, const char *prefix, const uint8_t *key, const uint8_t *bytes,
		  size_t len)
{
	char hex[2 * JITK_HASH_SIZE + 1], *dir, *p;

	jitk__hex(hex, key, JITK_HASH_SIZE);
	dir = jitk__asprintf("%s/store/%s/v1", f->dir, prefix);
	assert_int_equal(jitk__mkdirs(dir, 0755), 0);
	p = jitk__asprintf("%s/%s", dir, hex);
	t_write(p, bytes, len);
	free(p);
	free(dir);
}

static void plant_entry(const fixture *f, const char *prefix, const uint8_t *key,
			const jitk_cache_entry *e)
{
	uint8_t *bytes;
	size_t len;

	assert_int_equal(jitk__entry_encode(&bytes, &len, e), 0);
	plant(f, prefix, key, bytes, len);
	free(bytes);
}

static char *url_of(const fixture *f, const char *prefix)
{
	return jitk__asprintf("%s/%s", f->web.url, prefix);
}

/* What a case sets up: a fresh directory, a node's cache in it, the
 * remote's objects under a prefix of the directory's name, and the usual
 * node - read-only, trusting ci-a, signatures required by default. */
typedef struct {
	char *dir, *cache, *url;
	const char *prefix;
	node_cfg node;
} scene;

static void scene_open(fixture *f, scene *s, const char *what)
{
	s->dir = fresh(f, what);
	s->prefix = s->dir + strlen(f->dir) + 1;
	s->cache = t_path(s->dir, "node");
	s->url = url_of(f, s->prefix);
	memset(&s->node, 0, sizeof(s->node));
	s->node.cache = s->cache;
	s->node.remote = s->url;
	s->node.read_only = 1;
	s->node.key = -1;
	s->node.require = -1;
	s->node.trusted = f->pub[KEY_A];
}

static void scene_free(scene *s)
{
	free(s->dir);
	free(s->cache);
	free(s->url);
}

/* The node's own cache holds key's entry as it compiled it itself: made
 * here, unsigned, the reference's image - never the object it refused. */
static void assert_compiled_here(const char *cache, const jitk_cache_entry *ref)
{
	char *p = t_entry_path(cache, ref->key);
	jitk_cache_entry e;
	const char *problem = NULL;

	assert_int_equal(jitk__entry_read(&e, p, 0, &problem), 0);
	assert_int_equal(e.from, JITK_FROM_HERE);
	assert_string_equal(e.sig_name, "");
	assert_int_equal(e.size, ref->size);
	assert_memory_equal(e.image, ref->image, ref->size);
	jitk__cache_entry_free(&e);
	free(p);
}

/* No entry for key in the cache. */
static void assert_not_stored(const char *cache, const uint8_t *key)
{
	char *p = t_entry_path(cache, key);
	struct stat st;

	assert_int_equal(lstat(p, &st), -1);
	free(p);
}

/* ---------------------------------------------------------------- setup */

static int group_setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));
	t_log log = { 0, "" };
	node_cfg n = { 0 };
	jitk_compiler *c;
	const char *problem;
	char *cache, *p;
	uint8_t key[JITK_HASH_SIZE];
	int k, origin;

	assert_non_null(f);
	f->dir = t_tmpdir();
	f->specs = t_path(t_root(), "tests/families/specs");
	for (k = 0; k < NKEYS; k++) {
		f->secret[k] = jitk__asprintf("%s/%s.secret", f->dir, key_names[k]);
		assert_int_equal(jitk_key_generate(&f->pub[k], key_names[k], f->secret[k]), 0);
	}
	cache = t_path(f->dir, "ref");
	n.cache = cache;
	n.key = -1;
	n.require = -1;
	c = open_node(f, &n, &log);
	assert_int_equal(build(c, K1, 0, &origin), 0);
	assert_int_equal(build(c, K2, 0, &origin), 0);
	t_key(c, K1, ARCH, key);
	p = t_entry_path(cache, key);
	assert_int_equal(jitk__entry_read(&f->ref1, p, 0, &problem), 0);
	free(p);
	t_key(c, K2, ARCH, key);
	p = t_entry_path(cache, key);
	assert_int_equal(jitk__entry_read(&f->ref2, p, 0, &problem), 0);
	free(p);
	jitk_compiler_free(c);
	free(cache);
	f->have_web = !nginx_start(&f->web, f->dir);
	*state = f;
	return 0;
}

static int group_teardown(void **state)
{
	fixture *f = *state;
	int k;

	if (f->have_web)
		server_free(&f->web);
	for (k = 0; k < NKEYS; k++) {
		free(f->secret[k]);
		jitk_free(f->pub[k]);
	}
	jitk__cache_entry_free(&f->ref1);
	jitk__cache_entry_free(&f->ref2);
	t_rmtree(f->dir);
	free(f->dir);
	free(f->specs);
	free(f);
	return 0;
}

#define NEED_WEB(f)                                                            \
	do {                                                                   \
		if (!(f)->have_web)                                            \
			skip();                                                \
	} while (0)

/* ---------------------------------------------------------------- cases */

/* The fleet as it should run: a builder signs and uploads; a node that
 * trusts its key verifies the object once, keeps it in its own cache
 * with its origin, and loads it from there without verifying again. The
 * cost of one verification is measured here (docs/reliability.md). */
static void test_a_signed_object_is_verified_once(void **state)
{
	fixture *f = *state;
	char *bc, *text = NULL, *p;
	node_cfg bn = { 0 };
	t_log log = { 0, "" };
	scene sc;
	jitk_compiler *c;
	jitk_sign_stats ss;
	jitk_cache_entry e;
	const char *problem, *signer;
	jitk_trust *t;
	double t0, us;
	int origin, i, reps = 2000;

	NEED_WEB(f);
	scene_open(f, &sc, "fleet");
	bc = t_path(sc.dir, "builder");
	bn.cache = bc, bn.remote = sc.url, bn.key = KEY_A, bn.require = -1;
	c = open_node(f, &bn, &log);
	assert_int_equal(build(c, K1, 0, &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_COMPILED);
	assert_int_equal(sign_stats(c).signed_entries, 1);
	assert_int_equal(remote_stats(c).uploads, 1);
	jitk_compiler_free(c);

	c = open_node(f, &sc.node, &log);
	t0 = jitk__now_ms();
	assert_int_equal(build(c, K1, 0, &origin), 0);
	printf("sign: a remote hit with its signature verified: %.2f ms\n", jitk__now_ms() - t0);
	assert_int_equal(origin, JITK_ORIGIN_REMOTE);
	ss = sign_stats(c);
	assert_int_equal(ss.verified, 1);
	assert_int_equal(ss.refused, 0);
	assert_int_equal(ss.required, 1);
	assert_int_equal(atomic_load(&c->compiles), 0);
	jitk_compiler_free(c);

	/* Stored with its origin and signature; the next load reads the
	 * user's own cache and verifies nothing. */
	p = t_entry_path(sc.cache, f->ref1.key);
	assert_int_equal(jitk__entry_read(&e, p, 0, &problem), 0);
	free(p);
	assert_int_equal(e.from, JITK_FROM_REMOTE | JITK_FROM_VERIFIED);
	assert_string_equal(e.sig_name, "ci-a");
	assert_memory_equal(e.image, f->ref1.image, f->ref1.size);
	c = open_node(f, &sc.node, &log);
	assert_int_equal(build(c, K1, 0, &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_CACHE);
	assert_int_equal(sign_stats(c).verified, 0);
	assert_int_equal(remote_stats(c).hits + remote_stats(c).misses, 0);
	/* jitk explain says where it came from */
	assert_int_equal(jitk_explain_cache(&text, c, K1, ARCH), 0);
	assert_non_null(strstr(text, "origin:   fetched from a remote, signed by ci-a (verified "
				     "against the trusted keys)"));
	jitk_free(text);
	jitk_compiler_free(c);
	assert_int_equal(log.warnings, 0);

	/* The cost of one verification: the fingerprint (SHA-256 of the
	 * entry) and the ed25519 check. */
	assert_int_equal(jitk__trust_new(&t, f->pub[KEY_A], 1, NULL), 0);
	assert_int_equal(jitk__trust_check(t, &e, &signer), JITK_SIG_TRUSTED);
	t0 = jitk__now_ms();
	for (i = 0; i < reps; i++)
		assert_int_equal(jitk__trust_check(t, &e, &signer), JITK_SIG_TRUSTED);
	us = (jitk__now_ms() - t0) * 1000.0 / reps;
	t0 = jitk__now_ms();
	for (i = 0; i < reps; i++) {
		char fp[JITK_FINGERPRINT_MAX];

		assert_int_equal(jitk__fingerprint(fp, &e), 0);
	}
	printf("sign: one verification of a %zu-byte cubin: %.1f us (mean of %d), of which the "
	       "fingerprint %.1f us\n",
	       e.size, us, reps, (jitk__now_ms() - t0) * 1000.0 / reps);
	assert_true(us < 20000.0); /* a hang guard, not a speed test */
	jitk__trust_free(t);
	jitk__cache_entry_free(&e);
	free(bc);
	scene_free(&sc);
}

/* An object signed with a key the node does not trust is refused: not
 * used, not stored, compiled here; one warning for the URL however many
 * of its objects are refused. */
static void test_an_untrusted_key_is_refused(void **state)
{
	fixture *f = *state;
	t_log log = { 0, "" };
	jitk_cache_entry e1, e2;
	jitk_compiler *c;
	jitk_sign_stats ss;
	scene sc;
	int origin;

	NEED_WEB(f);
	scene_open(f, &sc, "untrusted");
	signed_copy(f, &e1, &f->ref1, KEY_E);
	signed_copy(f, &e2, &f->ref2, KEY_E);
	plant_entry(f, sc.prefix, f->ref1.key, &e1);
	plant_entry(f, sc.prefix, f->ref2.key, &e2);
	c = open_node(f, &sc.node, &log);
	assert_int_equal(build(c, K1, 0, &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_COMPILED);
	assert_int_equal(log.warnings, 1);
	assert_non_null(strstr(log.last, "refused: signed by a key that is not trusted"));
	assert_non_null(strstr(log.last, "key evil"));
	assert_int_equal(build(c, K2, 0, &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_COMPILED);
	assert_int_equal(log.warnings, 1); /* warned once per URL */
	ss = sign_stats(c);
	assert_int_equal(ss.refused, 2);
	assert_int_equal(ss.verified, 0);
	assert_int_equal(remote_stats(c).hits, 0);
	assert_int_equal(remote_stats(c).rejects, 2);
	assert_int_equal(atomic_load(&c->compiles), 2);
	jitk_compiler_free(c);
	assert_compiled_here(sc.cache, &f->ref1);
	assert_compiled_here(sc.cache, &f->ref2);
	jitk__cache_entry_free(&e1);
	jitk__cache_entry_free(&e2);
	scene_free(&sc);
}

/* A trusted key's signature with one bit flipped (the checksum made
 * right again, as an attacker would) does not verify; nor does a valid
 * signature over other bytes. */
static void test_a_forged_signature_is_refused(void **state)
{
	fixture *f = *state;
	t_log log = { 0, "" };
	jitk_cache_entry e, other;
	jitk_compiler *c;
	jitk_trust *t;
	const char *signer;
	scene sc;
	int origin, bit;

	NEED_WEB(f);
	scene_open(f, &sc, "forged");
	assert_int_equal(jitk__trust_new(&t, f->pub[KEY_A], 1, NULL), 0);
	signed_copy(f, &e, &f->ref1, KEY_A);
	assert_int_equal(jitk__trust_check(t, &e, &signer), JITK_SIG_TRUSTED);
	/* every bit of the signature matters */
	for (bit = 0; bit < 8 * JITK_SIG_SIZE; bit++) {
		e.sig[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		assert_int_equal(jitk__trust_check(t, &e, &signer), JITK_SIG_BAD);
		e.sig[bit / 8] ^= (uint8_t)(1u << (bit % 8));
	}
	/* the signature of K1's bytes on other bytes: K2's image */
	entry_copy(&other, &f->ref2);
	memcpy(other.key, e.key, JITK_HASH_SIZE);
	memcpy(other.sig, e.sig, JITK_SIG_SIZE);
	memcpy(other.sig_name, e.sig_name, sizeof(e.sig_name));
	assert_int_equal(jitk__trust_check(t, &other, &signer), JITK_SIG_BAD);
	jitk__cache_entry_free(&other);
	jitk__trust_free(t);

	e.sig[17] ^= 0x10;
	plant_entry(f, sc.prefix, f->ref1.key, &e);
	c = open_node(f, &sc.node, &log);
	assert_int_equal(build(c, K1, 0, &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_COMPILED);
	assert_non_null(strstr(log.last, "its signature does not verify"));
	assert_int_equal(sign_stats(c).refused, 1);
	assert_int_equal(remote_stats(c).hits, 0);
	jitk_compiler_free(c);
	assert_compiled_here(sc.cache, &f->ref1);
	jitk__cache_entry_free(&e);
	scene_free(&sc);
}

/* The format 3 bytes of e (what jitk wrote before signatures): the same
 * entry, version 3, bytes 104..111 zero, the checksum made again. */
static uint8_t *format3(const jitk_cache_entry *e, size_t *len)
{
	uint8_t *bytes, head[JITK_ENTRY_HEADER];

	assert_string_equal(e->sig_name, "");
	assert_int_equal(e->from, 0);
	assert_int_equal(jitk__entry_encode(&bytes, len, e), 0);
	jitk__put32(bytes + 8, 3);
	memcpy(head, bytes, sizeof(head));
	memset(head + 88, 0, JITK_SUM_SIZE);
	assert_int_equal(jitk__checksum(bytes + 88, head, sizeof(head), bytes + JITK_ENTRY_HEADER,
					*len - JITK_ENTRY_HEADER),
			 0);
	return bytes;
}

/* A signed object with its signature section removed (re-encoded as
 * format 4, and as format 3, which has none) is unsigned: refused where
 * signatures are required, used unchecked where they are not. */
static void test_a_stripped_signature_is_refused(void **state)
{
	fixture *f = *state;
	t_log log = { 0, "" };
	jitk_cache_entry e, back;
	jitk_compiler *c;
	const char *problem;
	uint8_t *bytes;
	size_t len;
	scene sc;
	char *lax;
	int origin;

	NEED_WEB(f);
	scene_open(f, &sc, "stripped");
	lax = t_path(sc.dir, "lax");
	signed_copy(f, &e, &f->ref1, KEY_A);
	e.sig_name[0] = '\0';
	plant_entry(f, sc.prefix, f->ref1.key, &e);
	bytes = format3(&f->ref2, &len);
	/* a format 3 entry reads as an unsigned one */
	assert_int_equal(jitk__entry_decode(&back, bytes, len, &problem), 0);
	assert_int_equal(back.format, 3);
	assert_string_equal(back.sig_name, "");
	jitk__cache_entry_free(&back);
	plant(f, sc.prefix, f->ref2.key, bytes, len);
	free(bytes);

	c = open_node(f, &sc.node, &log);
	assert_int_equal(build(c, K1, 0, &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_COMPILED);
	assert_non_null(strstr(log.last, "refused: not signed"));
	assert_int_equal(build(c, K2, 0, &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_COMPILED);
	assert_int_equal(sign_stats(c).refused, 2);
	assert_int_equal(remote_stats(c).hits, 0);
	jitk_compiler_free(c);
	assert_compiled_here(sc.cache, &f->ref1);
	assert_compiled_here(sc.cache, &f->ref2);

	/* signatures not required (JITK_REQUIRE_SIGS=0): both used, unchecked */
	sc.node.cache = lax, sc.node.require = 0;
	c = open_node(f, &sc.node, &log);
	assert_int_equal(build(c, K1, 0, &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_REMOTE);
	assert_int_equal(build(c, K2, 0, &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_REMOTE);
	assert_int_equal(sign_stats(c).unverified, 2);
	assert_int_equal(sign_stats(c).refused, 0);
	jitk_compiler_free(c);
	jitk__cache_entry_free(&e);
	free(lax);
	scene_free(&sc);
}

/* A valid signed object served under another key's name: with its own
 * header, a key mismatch (a reject); with the header rewritten to the
 * key asked for, its signature (over the key it was made for) fails. So
 * a signature cannot be replayed for other options, sources or targets:
 * each is in the key. */
static void test_an_object_under_another_keys_name_is_refused(void **state)
{
	fixture *f = *state;
	t_log log = { 0, "" };
	jitk_cache_entry e, moved;
	jitk_compiler *c;
	uint8_t *bytes;
	size_t len;
	scene sc;
	int origin;

	NEED_WEB(f);
	scene_open(f, &sc, "renamed");
	signed_copy(f, &e, &f->ref1, KEY_A);
	/* as it is, under K2's name */
	assert_int_equal(jitk__entry_encode(&bytes, &len, &e), 0);
	plant(f, sc.prefix, f->ref2.key, bytes, len);
	free(bytes);
	c = open_node(f, &sc.node, &log);
	assert_int_equal(build(c, K2, 0, &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_COMPILED);
	assert_non_null(strstr(log.last, "key mismatch"));
	assert_int_equal(remote_stats(c).rejects, 1);
	jitk_compiler_free(c);
	assert_compiled_here(sc.cache, &f->ref2);

	/* its header rewritten to K2 (checksum made right), K1's signature kept */
	t_rmtree(sc.cache);
	entry_copy(&moved, &e);
	memcpy(moved.key, f->ref2.key, JITK_HASH_SIZE);
	plant_entry(f, sc.prefix, f->ref2.key, &moved);
	c = open_node(f, &sc.node, &log);
	assert_int_equal(build(c, K2, 0, &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_COMPILED);
	assert_non_null(strstr(log.last, "its signature does not verify"));
	assert_int_equal(sign_stats(c).refused, 1);
	assert_int_equal(remote_stats(c).hits, 0);
	jitk_compiler_free(c);
	assert_compiled_here(sc.cache, &f->ref2);
	jitk__cache_entry_free(&moved);
	jitk__cache_entry_free(&e);
	scene_free(&sc);
}

/* Bundles: `jitk cache pack` signs with JITK_SIGNING_KEY. A bundle signed
 * by the trusted key serves every entry (0 compiled); the same entries
 * re-signed by an untrusted key are refused as a layer (compiled here; an
 * error under JITK_NO_COMPILE), by unpack (not written) and named by
 * jitk_signatures_check. */
static void test_a_bundle_resigned_by_an_untrusted_key_is_refused(void **state)
{
	fixture *f = *state;
	char *dir = fresh(f, "bundle"), *bc = t_path(dir, "builder"), *nc = t_path(dir, "node");
	char *good = t_path(dir, "good.jitkb"), *evil = t_path(dir, "evil.jitkb");
	char *again = t_path(dir, "again.jitkb"), *un = t_path(dir, "unpacked");
	node_cfg bn = { 0 }, nn = { 0 };
	t_log log = { 0, "" };
	jitk_bundle_summary bs = JITK_BUNDLE_SUMMARY_INIT;
	jitk_sig_summary ss = JITK_SIG_SUMMARY_INIT;
	jitk_compiler *c;
	char *a, *b;
	size_t la, lb;
	int origin;

	bn.cache = bc, bn.key = KEY_A, bn.require = -1;
	c = open_node(f, &bn, &log);
	assert_int_equal(build(c, K1, 0, &origin), 0);
	assert_int_equal(build(c, K2, 0, &origin), 0);
	jitk_compiler_free(c);
	setenv("JITK_SIGNING_KEY", f->secret[KEY_A], 1);
	assert_int_equal(jitk_cache_pack(&bs, good, bc, NULL, NULL, NULL), 0);
	assert_int_equal(bs.entries, 2);
	/* signatures are deterministic: the same cache packs to the same bytes */
	assert_int_equal(jitk_cache_pack(NULL, again, bc, NULL, NULL, NULL), 0);
	a = t_read(good, &la);
	b = t_read(again, &lb);
	assert_int_equal(la, lb);
	assert_memory_equal(a, b, la);
	free(a), free(b);
	setenv("JITK_SIGNING_KEY", f->secret[KEY_E], 1);
	assert_int_equal(jitk_cache_pack(NULL, evil, bc, NULL, NULL, NULL), 0);
	unsetenv("JITK_SIGNING_KEY");
	assert_int_equal(jitk_signatures_check(&ss, evil, f->pub[KEY_A], NULL, NULL), 0);
	assert_int_equal(ss.entries, 2);
	assert_int_equal(ss.untrusted, 2);
	ss.version = JITK_SIG_SUMMARY_VERSION;
	assert_int_equal(jitk_signatures_check(&ss, good, f->pub[KEY_A], NULL, NULL), 0);
	assert_int_equal(ss.trusted, 2);

	/* the trusted bundle: every entry from the layer, nothing compiled */
	nn.cache = nc, nn.layers = good, nn.key = -1, nn.require = -1, nn.no_compile = 1;
	nn.trusted = f->pub[KEY_A];
	c = open_node(f, &nn, &log);
	assert_int_equal(build(c, K1, 0, &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_LAYER);
	assert_int_equal(build(c, K2, 0, &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_LAYER);
	assert_int_equal(sign_stats(c).verified, 2);
	assert_int_equal(atomic_load(&c->compiles), 0);
	jitk_compiler_free(c);
	assert_int_equal(log.warnings, 0);

	/* re-signed by evil: refused, and without compiling, an error */
	nn.layers = evil;
	c = open_node(f, &nn, &log);
	assert_int_equal(build(c, K1, 0, &origin), JITK_ENOCOMPILE);
	assert_int_equal(sign_stats(c).refused, 1);
	jitk_compiler_free(c);
	assert_not_stored(nc, f->ref1.key);
	log.warnings = 0;
	nn.no_compile = 0;
	c = open_node(f, &nn, &log);
	assert_int_equal(build(c, K1, 0, &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_COMPILED);
	assert_int_equal(build(c, K2, 0, &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_COMPILED);
	assert_int_equal(sign_stats(c).refused, 2);
	assert_int_equal(log.warnings, 1); /* once per bundle */
	assert_non_null(strstr(log.last, "bundle entry"));
	jitk_compiler_free(c);
	assert_compiled_here(nc, &f->ref1);
	assert_compiled_here(nc, &f->ref2);

	/* unpack with the node's settings leaves the refused entries out */
	setenv("JITK_TRUSTED_KEYS", f->pub[KEY_A], 1);
	bs.version = JITK_BUNDLE_SUMMARY_VERSION;
	assert_int_equal(jitk_cache_unpack(&bs, evil, un, NULL, NULL), 0);
	assert_int_equal(bs.entries, 0);
	assert_int_equal(bs.bad, 2);
	assert_not_stored(un, f->ref1.key);
	assert_int_equal(jitk_cache_unpack(&bs, good, un, NULL, NULL), 0);
	assert_int_equal(bs.entries, 2);
	unsetenv("JITK_TRUSTED_KEYS");
	{
		char *p = t_entry_path(un, f->ref1.key);
		jitk_cache_entry e;
		const char *problem;

		assert_int_equal(jitk__entry_read(&e, p, 0, &problem), 0);
		assert_int_equal(e.from, JITK_FROM_BUNDLE | JITK_FROM_VERIFIED);
		assert_string_equal(e.sig_name, "ci-a");
		jitk__cache_entry_free(&e);
		free(p);
	}
	free(dir), free(bc), free(nc), free(good), free(evil), free(again), free(un);
}

/* The signature section's own bytes, each made consistent with the
 * checksum: truncated, oversized, a length of 2^32-1, another algorithm,
 * a bad name. Each is a malformed entry (a reject, whatever the policy):
 * refused before its bytes are looked at, compiled here. */
static void test_bad_signature_fields_are_rejected(void **state)
{
	fixture *f = *state;
	static const struct {
		const char *what;
		long size_delta;     /* to the section's size in the header and the file */
		int at;              /* a u32 of the section to set (-1: none) */
		uint32_t value;
		const char *problem;
	} cases[] = {
		{ "truncated by one byte", -1, -1, 0, "bad signature section (its sizes disagree)" },
		{ "cut to 8 bytes", -(8 + 4 + JITK_SIG_SIZE) + 8, -1, 0, "bad signature section (its size)" },
		{ "one byte too many", 1, -1, 0, "bad signature section (its sizes disagree)" },
		{ "larger than any section", 1000, -1, 0, "sizes out of range" },
		{ "name length 2^32-1", 0, 4, 0xffffffffu, "bad signature section (its sizes disagree)" },
		{ "name length 65", 0, 4, 65, "bad signature section (its sizes disagree)" },
		{ "another algorithm", 0, 0, 2, "bad signature section (an algorithm other than ed25519)" },
		{ "a name with a slash", 0, 8, 0x2f2f2f2fu, "bad signature section (a bad key name)" },
	};
	t_log log = { 0, "" };
	jitk_cache_entry e, out;
	jitk_compiler *c;
	size_t i;

	signed_copy(f, &e, &f->ref1, KEY_A);
	assert_int_equal(strlen(e.sig_name), 4); /* "ci-a": a section of 8 + 4 + 64 bytes */
	for (i = 0; i < JITK_ARRAY_SIZE(cases); i++) {
		uint8_t *bytes, *big, head[JITK_ENTRY_HEADER];
		size_t len, sec_at, sec, nlen;
		const char *problem = NULL;

		assert_int_equal(jitk__entry_encode(&bytes, &len, &e), 0);
		sec = jitk__get32(bytes + 104);
		sec_at = len - sec;
		assert_int_equal(sec, 8 + 4 + JITK_SIG_SIZE);
		nlen = (size_t)((long)sec + cases[i].size_delta);
		big = calloc(1, sec_at + nlen);
		memcpy(big, bytes, sec_at + (nlen < sec ? nlen : sec));
		jitk__put32(big + 104, (uint32_t)nlen);
		if (cases[i].at >= 0)
			jitk__put32(big + sec_at + (size_t)cases[i].at, cases[i].value);
		memcpy(head, big, sizeof(head));
		memset(head + 88, 0, JITK_SUM_SIZE);
		assert_int_equal(jitk__checksum(big + 88, head, sizeof(head), big + JITK_ENTRY_HEADER,
						sec_at + nlen - JITK_ENTRY_HEADER),
				 0);
		if (!jitk__entry_decode(&out, big, sec_at + nlen, &problem)) {
			fprintf(stderr, "%s: accepted\n", cases[i].what);
			fail();
		}
		if (strcmp(problem, cases[i].problem)) {
			fprintf(stderr, "%s: '%s'\n", cases[i].what, problem);
			fail();
		}
		/* two of them as remote objects, end to end */
		if (i == 0 || i == 4) {
			if (!f->have_web) {
				free(big), free(bytes);
				continue;
			}
			scene sc;
			int origin;

			scene_open(f, &sc, "section");
			plant(f, sc.prefix, f->ref1.key, big, sec_at + nlen);
			sc.node.require = 0; /* not even required */
			c = open_node(f, &sc.node, &log);
			assert_int_equal(build(c, K1, 0, &origin), 0);
			assert_int_equal(origin, JITK_ORIGIN_COMPILED);
			assert_non_null(strstr(log.last, cases[i].problem));
			assert_int_equal(remote_stats(c).rejects, 1);
			assert_int_equal(remote_stats(c).hits, 0);
			jitk_compiler_free(c);
			assert_compiled_here(sc.cache, &f->ref1);
			scene_free(&sc);
		}
		free(big);
		free(bytes);
	}
	jitk__cache_entry_free(&e);
}

/* Rotation: two keys trusted at once serve both generations; retiring
 * one (its line removed) refuses its objects from then on. What a node
 * verified before stays in its own cache, which is trusted as the
 * user's: jitk_signatures_check finds it there. */
static void test_key_rotation(void **state)
{
	fixture *f = *state;
	char *n2, *both;
	t_log log = { 0, "" };
	jitk_sig_summary ss = JITK_SIG_SUMMARY_INIT;
	jitk_cache_entry e1, e2;
	jitk_compiler *c;
	scene sc;
	int origin;

	NEED_WEB(f);
	scene_open(f, &sc, "rotation");
	n2 = t_path(sc.dir, "n2");
	both = jitk__asprintf("%s\n%s\n", f->pub[KEY_A], f->pub[KEY_B]);
	signed_copy(f, &e1, &f->ref1, KEY_A); /* the old key */
	signed_copy(f, &e2, &f->ref2, KEY_B); /* the new one */
	plant_entry(f, sc.prefix, f->ref1.key, &e1);
	plant_entry(f, sc.prefix, f->ref2.key, &e2);
	sc.node.trusted = both;
	c = open_node(f, &sc.node, &log);
	assert_int_equal(sign_stats(c).trusted_keys, 2);
	assert_int_equal(build(c, K1, 0, &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_REMOTE);
	assert_int_equal(build(c, K2, 0, &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_REMOTE);
	assert_int_equal(sign_stats(c).verified, 2);
	jitk_compiler_free(c);

	/* ci-a retired: a fresh node refuses its object */
	sc.node.cache = n2, sc.node.trusted = f->pub[KEY_B];
	c = open_node(f, &sc.node, &log);
	assert_int_equal(build(c, K1, 0, &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_COMPILED);
	assert_int_equal(build(c, K2, 0, &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_REMOTE);
	assert_int_equal(sign_stats(c).refused, 1);
	assert_int_equal(sign_stats(c).verified, 1);
	jitk_compiler_free(c);
	assert_compiled_here(n2, &f->ref1);

	/* the first node's cache keeps what it verified; the check names it */
	sc.node.cache = sc.cache;
	c = open_node(f, &sc.node, &log);
	assert_int_equal(build(c, K1, 0, &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_CACHE);
	jitk_compiler_free(c);
	assert_int_equal(jitk_signatures_check(&ss, sc.cache, f->pub[KEY_B], NULL, NULL), 0);
	assert_int_equal(ss.entries, 2);
	assert_int_equal(ss.trusted, 1);
	assert_int_equal(ss.untrusted, 1);
	jitk__cache_entry_free(&e1);
	jitk__cache_entry_free(&e2);
	free(n2), free(both);
	scene_free(&sc);
}

/* A sealed runtime that requires signatures, served by a remote holding
 * one signed and one unsigned object: the signed one is a hit; the
 * unsigned one is refused, and compiling it is refused too (nothing
 * compiled, nothing stored). JITK_NO_COMPILE the same. */
static void test_a_sealed_runtime_gets_only_signed_code(void **state)
{
	fixture *f = *state;
	t_log log = { 0, "" };
	jitk_cache_entry e1;
	jitk_compiler *c;
	scene sc;
	int origin, pass;

	NEED_WEB(f);
	scene_open(f, &sc, "sealed");
	signed_copy(f, &e1, &f->ref1, KEY_A);
	plant_entry(f, sc.prefix, f->ref1.key, &e1);
	plant_entry(f, sc.prefix, f->ref2.key, &f->ref2); /* unsigned */
	for (pass = 0; pass < 2; pass++) {
		unsigned flags = pass ? 0 : JITK_BUILD_SEAL_ERROR;

		t_rmtree(sc.cache);
		sc.node.no_compile = pass; /* pass 1: JITK_NO_COMPILE instead of the seal */
		c = open_node(f, &sc.node, &log);
		assert_int_equal(build(c, K1, flags, &origin), 0);
		assert_int_equal(origin, JITK_ORIGIN_REMOTE);
		assert_int_equal(build(c, K2, flags, &origin), JITK_ENOCOMPILE);
		assert_non_null(strstr(jitk_error_last()->message, pass ? "JITK_NO_COMPILE" : "sealed runtime"));
		assert_int_equal(sign_stats(c).verified, 1);
		assert_int_equal(sign_stats(c).refused, 1);
		assert_int_equal(atomic_load(&c->compiles), 0);
		jitk_compiler_free(c);
		assert_not_stored(sc.cache, f->ref2.key);
	}
	jitk__cache_entry_free(&e1);
	scene_free(&sc);
}

/* A writable node that refuses an object compiles the key but does not
 * upload an unsigned replacement over it (another node may trust its
 * signer: a node in mid-rotation would otherwise erase the new key's
 * objects); a signing one uploads its own signed object. */
static void test_no_unsigned_upload_replaces_a_refused_object(void **state)
{
	fixture *f = *state;
	char *obj, *before, *after;
	t_log log = { 0, "" };
	jitk_cache_entry e, got;
	jitk_compiler *c;
	const char *problem;
	char hex[2 * JITK_HASH_SIZE + 1];
	size_t lb, la;
	scene sc;
	int origin;

	NEED_WEB(f);
	scene_open(f, &sc, "upload");
	jitk__hex(hex, f->ref1.key, JITK_HASH_SIZE);
	obj = jitk__asprintf("%s/store/%s/v1/%s", f->dir, sc.prefix, hex);
	signed_copy(f, &e, &f->ref1, KEY_B);
	plant_entry(f, sc.prefix, f->ref1.key, &e);
	before = t_read(obj, &lb);
	sc.node.read_only = 0;
	c = open_node(f, &sc.node, &log);
	assert_int_equal(build(c, K1, 0, &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_COMPILED);
	assert_int_equal(remote_stats(c).uploads, 0);
	jitk_compiler_free(c);
	after = t_read(obj, &la);
	assert_int_equal(la, lb);
	assert_memory_equal(after, before, la);
	free(after);

	t_rmtree(sc.cache);
	sc.node.key = KEY_A;
	c = open_node(f, &sc.node, &log);
	assert_int_equal(build(c, K1, 0, &origin), 0);
	assert_int_equal(origin, JITK_ORIGIN_COMPILED);
	assert_int_equal(remote_stats(c).uploads, 1);
	jitk_compiler_free(c);
	after = t_read(obj, &la);
	assert_int_equal(jitk__entry_decode(&got, (uint8_t *)after, la, &problem), 0);
	assert_string_equal(got.sig_name, "ci-a");
	jitk__cache_entry_free(&got);
	free(after);
	free(before);
	jitk__cache_entry_free(&e);
	free(obj);
	scene_free(&sc);
}

/* Key files and settings: what jitk_key_generate writes and refuses, the
 * checks on a signing key file, malformed trusted keys (the base64 never
 * echoed), a key file of trusted keys, and JITK_REQUIRE_SIGS read
 * strictly. */
static void test_keys_and_settings(void **state)
{
	fixture *f = *state;
	char *dir = fresh(f, "keys"), *sec = t_path(dir, "k.secret"), *lnk = t_path(dir, "l.secret");
	char *file = t_path(dir, "trusted"), *text, *line = NULL, *pubsec = t_path(dir, "pub.secret");
	char *cache = t_path(dir, "c"), *secline;
	node_cfg nn = { 0 };
	t_log log = { 0, "" };
	jitk_compiler_options o;
	jitk_compiler *c = NULL;
	jitk_signer *s = NULL;
	jitk_trust *t = NULL;
	struct stat st;
	size_t len;

	assert_int_equal(jitk_key_generate(&line, "k-1", sec), 0);
	assert_int_equal(strncmp(line, "k-1:", 4), 0);
	assert_int_equal(strlen(line), 4 + 44);
	assert_int_equal(stat(sec, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	jitk_free(line);
	/* an existing file, a link (even to nowhere): refused, left alone */
	text = t_read(sec, &len);
	assert_int_equal(jitk_key_generate(&line, "k-2", sec), JITK_EIO);
	assert_non_null(strstr(jitk_error_last()->message, "exists"));
	free(text);
	assert_int_equal(symlink("nowhere", lnk), 0);
	assert_int_equal(jitk_key_generate(&line, "k-2", lnk), JITK_EIO);
	assert_non_null(strstr(jitk_error_last()->message, "symbolic link"));
	assert_int_equal(lstat(lnk, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	assert_int_equal(jitk_key_generate(&line, "-bad", pubsec), JITK_EINVAL);
	assert_int_equal(jitk_key_generate(&line, "a:b", pubsec), JITK_EINVAL);

	/* the signing key file */
	assert_int_equal(jitk__signer_load(&s, sec), 0);
	assert_string_equal(jitk__signer_name(s), "k-1");
	jitk__signer_free(s);
	assert_int_equal(chmod(sec, 0644), 0);
	assert_int_equal(jitk__signer_load(&s, sec), JITK_EINVAL);
	assert_non_null(strstr(jitk_error_last()->message, "readable by others"));
	assert_int_equal(chmod(sec, 0620), 0);
	assert_int_equal(jitk__signer_load(&s, sec), JITK_EINVAL);
	assert_non_null(strstr(jitk_error_last()->message, "writable by others"));
	assert_int_equal(chmod(sec, 0600), 0);
	t_writef(pubsec, "%s\n", f->pub[KEY_A]);
	assert_int_equal(chmod(pubsec, 0600), 0);
	assert_int_equal(jitk__signer_load(&s, pubsec), JITK_EINVAL);
	assert_non_null(strstr(jitk_error_last()->message, "a public key, not a secret one"));
	/* a compiler with a bad signing key does not start */
	assert_int_equal(jitk_compiler_options_init(&o, JITK_COMPILER_OPTIONS_VERSION), 0);
	o.specs = f->specs, o.cache_dir = "", o.remote = "", o.signing_key = pubsec;
	o.log = t_log_fn, o.log_payload = &log;
	assert_int_equal(jitk_compiler_new(&c, &o), JITK_EINVAL);
	assert_null(c);

	/* trusted keys: malformed, a secret key pasted, a name twice */
	assert_int_equal(jitk__trust_new(&t, "ci-a", -1, NULL), JITK_EINVAL);
	assert_int_equal(jitk__trust_new(&t, "ci-a:AAAA", -1, NULL), JITK_EINVAL);
	secline = t_read(f->secret[KEY_A], &len);
	secline[strcspn(secline, "\n")] = '\0';
	assert_int_equal(jitk__trust_new(&t, secline, -1, NULL), JITK_EINVAL);
	assert_non_null(strstr(jitk_error_last()->message, "a secret key, not a public one"));
	assert_null(strstr(jitk_error_last()->message, strchr(secline, ':') + 1));
	free(secline);
	text = jitk__asprintf("%s %s", f->pub[KEY_A], f->pub[KEY_A]);
	assert_int_equal(jitk__trust_new(&t, text, -1, NULL), JITK_EINVAL);
	assert_non_null(strstr(jitk_error_last()->message, "listed twice"));
	free(text);
	/* a file of them: comments, blank lines, commas */
	t_writef(file, "# the builders\n\n%s  # this year's\n%s,\n", f->pub[KEY_A], f->pub[KEY_B]);
	assert_int_equal(chmod(file, 0644), 0);
	assert_int_equal(jitk__trust_new(&t, file, -1, NULL), 0);
	assert_non_null(t);
	assert_int_equal(jitk__trust_required(t), 1);
	jitk__trust_free(t);
	t = NULL;
	/* a file with no key (a list that did not arrive) still requires */
	t_writef(file, "# nothing yet\n");
	assert_int_equal(jitk__trust_new(&t, file, -1, NULL), 0);
	assert_non_null(t);
	assert_int_equal(jitk__trust_required(t), 1);
	jitk__trust_free(t);
	t = NULL;
	t_writef(file, "bogus\n");
	assert_int_equal(jitk__trust_new(&t, file, -1, NULL), JITK_EINVAL);
	assert_non_null(strstr(jitk_error_last()->message, ":1: error:"));
	assert_int_equal(chmod(file, 0666), 0);
	assert_int_equal(jitk__trust_new(&t, file, -1, NULL), JITK_EINVAL);
	assert_non_null(strstr(jitk_error_last()->message, "writable by others"));

	/* JITK_REQUIRE_SIGS: any case of the words; anything else warns once
	 * and means required */
	nn.cache = cache, nn.key = -1, nn.require = -1, nn.trusted = f->pub[KEY_A];
	setenv("JITK_REQUIRE_SIGS", "OFF", 1);
	c = open_node(f, &nn, &log);
	assert_int_equal(sign_stats(c).required, 0);
	jitk_compiler_free(c);
	setenv("JITK_REQUIRE_SIGS", "Yes", 1);
	nn.trusted = "";
	log.warnings = 0;
	c = open_node(f, &nn, &log); /* required, and nothing trusted: said once */
	assert_int_equal(sign_stats(c).required, 1);
	assert_int_equal(log.warnings, 1);
	assert_non_null(strstr(log.last, "every remote object and bundle entry is refused"));
	jitk_compiler_free(c);
	setenv("JITK_REQUIRE_SIGS", "maybe", 1);
	nn.trusted = f->pub[KEY_A];
	log.warnings = 0;
	c = open_node(f, &nn, &log);
	assert_int_equal(sign_stats(c).required, 1);
	assert_int_equal(log.warnings, 1);
	assert_non_null(strstr(log.last, "JITK_REQUIRE_SIGS='maybe'"));
	jitk_compiler_free(c);
	unsetenv("JITK_REQUIRE_SIGS");
	/* nothing set: nothing checked */
	nn.trusted = "";
	c = open_node(f, &nn, &log);
	assert_null(c->trust);
	jitk_compiler_free(c);
	free(dir), free(sec), free(lnk), free(file), free(pubsec), free(cache);
}

/* Older options structs (version 2, before provenance) are still taken,
 * with the new fields at their defaults. */
static void test_options_version_2_still_accepted(void **state)
{
	fixture *f = *state;
	jitk_compiler_options o;
	jitk_compiler *c = NULL;

	memset(&o, 0xab, sizeof(o)); /* what a version 2 caller never wrote */
	assert_int_equal(jitk_compiler_options_init(&o, 2), 0);
	o.specs = f->specs, o.cache_dir = "", o.remote = "";
	assert_int_equal(jitk_compiler_new(&c, &o), 0);
	assert_null(c->signer);
	assert_null(c->trust);
	jitk_compiler_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_signed_object_is_verified_once),
		cmocka_unit_test(test_an_untrusted_key_is_refused),
		cmocka_unit_test(test_a_forged_signature_is_refused),
		cmocka_unit_test(test_a_stripped_signature_is_refused),
		cmocka_unit_test(test_an_object_under_another_keys_name_is_refused),
		cmocka_unit_test(test_a_bundle_resigned_by_an_untrusted_key_is_refused),
		cmocka_unit_test(test_bad_signature_fields_are_rejected),
		cmocka_unit_test(test_key_rotation),
		cmocka_unit_test(test_a_sealed_runtime_gets_only_signed_code),
		cmocka_unit_test(test_no_unsigned_upload_replaces_a_refused_object),
		cmocka_unit_test(test_keys_and_settings),
		cmocka_unit_test(test_options_version_2_still_accepted),
	};

	unsetenv("JITK_SIGNING_KEY");
	unsetenv("JITK_TRUSTED_KEYS");
	unsetenv("JITK_REQUIRE_SIGS");
	return T_RUN_TESTS(tests, group_setup, group_teardown);
}
