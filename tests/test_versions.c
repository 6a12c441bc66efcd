/* test_versions.c - the output structs of jitk.h are versioned as the
 * options are (jitk.h, "Output structs"): a program built against an
 * older header passes a struct of that version's size, and the library
 * fills its fields and writes no byte past them; a version outside 1 to
 * the library's is refused with nothing written. Each struct is planted at
 * the start of a buffer of sentinel bytes, as an older caller's smaller
 * struct would sit in its memory, with the oldest version (1): after the
 * call, every byte past version 1's last field still holds the sentinel
 * (whatever later versions append), and version 1's fields hold the
 * results. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define SENTINEL 0xa5
/* Where version 1 of a struct ends: past its last field. */
#define END_OF(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))

typedef union {
	unsigned char bytes[1024];
	uint64_t align;
} buffer;

typedef struct {
	char *dir, *cache, *specs;
	jitk_compiler *c;
} fixture;

/* The buffer filled with the sentinel, a struct of version v at its start. */
static void *planted(buffer *b, unsigned v)
{
	memset(b->bytes, SENTINEL, sizeof(b->bytes));
	memcpy(b->bytes, &v, sizeof(v));
	return b->bytes;
}

/* Every byte of b from offset from on holds the sentinel. */
static void untouched_from(const buffer *b, size_t from)
{
	size_t i;

	for (i = from; i < sizeof(b->bytes); i++)
		if (b->bytes[i] != SENTINEL) {
			fprintf(stderr, "byte %zu (past version 1's fields at %zu) was written\n", i, from);
			fail();
		}
}

/* Versions 0 and current + 1 are refused by call (on a struct planted in
 * b), naming type, and leave every byte after the version field alone. */
#define REFUSED(b, type, current, call)                                               \
	do {                                                                          \
		unsigned bad_[2] = { 0, (current) + 1 }, k_;                          \
		char want_[128];                                                      \
		for (k_ = 0; k_ < 2; k_++) {                                          \
			planted(b, bad_[k_]);                                         \
			assert_int_equal(call, JITK_EINVAL);                          \
			snprintf(want_, sizeof(want_), "%s version %u is not 1 to %u", type, \
				 bad_[k_], (unsigned)(current));                      \
			assert_non_null(strstr(jitk_error_last()->message, want_));   \
			untouched_from(b, sizeof(unsigned));                          \
		}                                                                     \
	} while (0)

/* A cache holding one entry: tadd2[cols=64] for sm_90. */
static int setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));
	char *specs = t_path(t_root(), "tests/families/specs");
	jitk_origin origin;

	assert_non_null(f);
	t_scratch(&f->dir, &f->cache, &f->specs);
	free(f->specs);
	f->specs = specs;
	f->c = t_compiler(f->specs, f->cache, NULL, NULL);
	assert_int_equal(jitk_precompile(&origin, f->c, "tadd2[cols=64]", "sm_90"), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fixture *f = *state;

	jitk_compiler_free(f->c);
	t_scratch_free(f->dir, f->cache, f->specs);
	free(f);
	return 0;
}

static void test_cache_results_fill_only_their_version(void **state)
{
	fixture *f = *state;
	buffer b;
	jitk_cache_summary *s;
	jitk_prune_result *p;
	jitk_clear_result *r;

	s = planted(&b, 1);
	assert_int_equal(jitk_cache_stats(s, f->cache, 1, NULL, NULL), 0);
	assert_int_equal(s->version, 1);
	assert_int_equal(s->entries, 1);
	assert_int_equal(s->bad + s->temp_files + s->foreign, 0);
	untouched_from(&b, END_OF(jitk_cache_summary, foreign));
	REFUSED(&b, "jitk_cache_summary", JITK_CACHE_SUMMARY_VERSION,
		jitk_cache_stats((jitk_cache_summary *)(void *)b.bytes, f->cache, 1, NULL, NULL));

	p = planted(&b, 1);
	assert_int_equal(jitk_cache_prune(p, f->cache, NULL), 0);
	assert_int_equal(p->evicted + p->bad + p->temp + p->failed, 0);
	assert_true(p->bytes_left > 0);
	untouched_from(&b, END_OF(jitk_prune_result, failed));
	REFUSED(&b, "jitk_prune_result", JITK_PRUNE_RESULT_VERSION,
		jitk_cache_prune((jitk_prune_result *)(void *)b.bytes, f->cache, NULL));

	REFUSED(&b, "jitk_clear_result", JITK_CLEAR_RESULT_VERSION,
		jitk_cache_clear((jitk_clear_result *)(void *)b.bytes, f->cache));
	r = planted(&b, 1);
	assert_int_equal(jitk_cache_clear(r, f->cache), 0);
	assert_int_equal(r->removed, 1);
	assert_int_equal(r->failed, 0);
	untouched_from(&b, END_OF(jitk_clear_result, failed));
}

static void test_bundle_summaries_fill_only_their_version(void **state)
{
	fixture *f = *state;
	char *file = t_path(f->dir, "one.jitkb"), *into = t_path(f->dir, "into");
	jitk_bundle_summary *s;
	buffer b;

	s = planted(&b, 1);
	assert_int_equal(jitk_cache_pack(s, file, f->cache, NULL, NULL, NULL), 0);
	assert_int_equal(s->entries, 1);
	assert_true(s->bytes > 0);
	untouched_from(&b, END_OF(jitk_bundle_summary, bad));
	REFUSED(&b, "jitk_bundle_summary", JITK_BUNDLE_SUMMARY_VERSION,
		jitk_cache_pack((jitk_bundle_summary *)(void *)b.bytes, file, f->cache, NULL, NULL, NULL));

	s = planted(&b, 1);
	assert_int_equal(jitk_bundle_verify(s, file, NULL, NULL), 0);
	assert_int_equal(s->entries, 1);
	assert_int_equal(s->bad, 0);
	untouched_from(&b, END_OF(jitk_bundle_summary, bad));
	REFUSED(&b, "jitk_bundle_summary", JITK_BUNDLE_SUMMARY_VERSION,
		jitk_bundle_verify((jitk_bundle_summary *)(void *)b.bytes, file, NULL, NULL));

	s = planted(&b, 1);
	assert_int_equal(jitk_cache_unpack(s, file, into, NULL, NULL), 0);
	assert_int_equal(s->entries, 1);
	untouched_from(&b, END_OF(jitk_bundle_summary, bad));
	REFUSED(&b, "jitk_bundle_summary", JITK_BUNDLE_SUMMARY_VERSION,
		jitk_cache_unpack((jitk_bundle_summary *)(void *)b.bytes, file, into, NULL, NULL));
	/* NULL stays allowed */
	assert_int_equal(jitk_bundle_verify(NULL, file, NULL, NULL), 0);
	free(file);
	free(into);
}

static void test_compiler_counters_fill_only_their_version(void **state)
{
	fixture *f = *state;
	jitk_remote_stats *r;
	jitk_sign_stats *g;
	jitk_sig_summary *s;
	buffer b;

	r = planted(&b, 1);
	assert_int_equal(jitk_remote_stats_get(r, f->c), 0);
	assert_int_equal(r->hits + r->misses + r->uploads + r->errors, 0);
	assert_true(r->ms == 0.0);
	untouched_from(&b, END_OF(jitk_remote_stats, lease_wait_ms));
	REFUSED(&b, "jitk_remote_stats", JITK_REMOTE_STATS_VERSION,
		jitk_remote_stats_get((jitk_remote_stats *)(void *)b.bytes, f->c));

	g = planted(&b, 1);
	assert_int_equal(jitk_sign_stats_get(g, f->c), 0);
	assert_int_equal(g->signed_entries + g->verified + g->refused, 0);
	assert_int_equal(g->signing, 0);
	untouched_from(&b, END_OF(jitk_sign_stats, signing));
	REFUSED(&b, "jitk_sign_stats", JITK_SIGN_STATS_VERSION,
		jitk_sign_stats_get((jitk_sign_stats *)(void *)b.bytes, f->c));

	s = planted(&b, 1);
	assert_int_equal(jitk_signatures_check(s, f->cache, "", NULL, NULL), 0);
	assert_int_equal(s->entries, 1);
	assert_int_equal(s->unsigned_entries, 1);
	untouched_from(&b, END_OF(jitk_sig_summary, broken));
	REFUSED(&b, "jitk_sig_summary", JITK_SIG_SUMMARY_VERSION,
		jitk_signatures_check((jitk_sig_summary *)(void *)b.bytes, f->cache, "", NULL, NULL));
}

static void test_precompile_counts_fill_only_their_version(void **state)
{
	fixture *f = *state;
	char *manifest = t_path(f->dir, "warmup.txt");
	jitk_precompile_counts *n;
	buffer b;

	t_writef(manifest, "tadd2[cols=64] sm_90\n");
	n = planted(&b, 1);
	assert_int_equal(jitk_precompile_manifest(n, f->c, manifest, NULL, NULL, NULL), 0);
	assert_int_equal(n->cached, 1);
	assert_int_equal(n->compiled + n->remote + n->failed + n->gated, 0);
	untouched_from(&b, END_OF(jitk_precompile_counts, gated));
	/* refused before the manifest is read: a file that is not there */
	REFUSED(&b, "jitk_precompile_counts", JITK_PRECOMPILE_COUNTS_VERSION,
		jitk_precompile_manifest((jitk_precompile_counts *)(void *)b.bytes, f->c,
					 "/nonexistent/warmup.txt", NULL, NULL, NULL));
	assert_int_equal(jitk_precompile_manifest(NULL, f->c, manifest, NULL, NULL, NULL), 0);
	free(manifest);
}

/* The _INIT macros set the current version; fields start at zero. */
static void test_init_macros_set_the_current_version(void **state)
{
	jitk_cache_summary s = JITK_CACHE_SUMMARY_INIT;
	jitk_clear_result r = JITK_CLEAR_RESULT_INIT;
	jitk_prune_result p = JITK_PRUNE_RESULT_INIT;
	jitk_precompile_counts n = JITK_PRECOMPILE_COUNTS_INIT;

	(void)state;
	assert_int_equal(s.version, JITK_CACHE_SUMMARY_VERSION);
	assert_int_equal(r.version, JITK_CLEAR_RESULT_VERSION);
	assert_int_equal(p.version, JITK_PRUNE_RESULT_VERSION);
	assert_int_equal(n.version, JITK_PRECOMPILE_COUNTS_VERSION);
	assert_int_equal(s.entries + r.removed + p.bad + n.gated, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_cache_results_fill_only_their_version, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bundle_summaries_fill_only_their_version, setup, teardown),
		cmocka_unit_test_setup_teardown(test_compiler_counters_fill_only_their_version, setup, teardown),
		cmocka_unit_test_setup_teardown(test_precompile_counts_fill_only_their_version, setup, teardown),
		cmocka_unit_test(test_init_macros_set_the_current_version),
	};

	return T_RUN_TESTS(tests, NULL, NULL);
}
