/* tier_cache.c - the writable cache as a tier: its claim is the per-key
 * lock, so that N processes cold-starting together compile a key once. */
#include <stdlib.h>
#include <string.h>

#include "store/tier.h"

typedef struct {
	jitk_tier base;
	jitk_cache *cache;
	jitk_logger log;
} cache_tier;

int jitk__tier_usable(jitk_tier_ask *q, jitk_cache_entry *e, const jitk_logger *log)
{
	const char *why = jitk__entry_kind_problem(e);

	if (!why)
		return 1;
	jitk__log(log, JITK_LOG_WARN, "cache entry %.16s... for %s on %s rejected: %s; %s%s",
		  q->key_hex, q->name, q->target, why,
		  q->no_compile ? "kept, not compiled: " : "compiling it again",
		  q->no_compile ? q->no_compile : "");
	q->rejects++;
	jitk__cache_entry_free(e);
	return 0;
}

static int cache_get(jitk_tier *t, jitk_tier_ask *q, jitk_cache_entry *out)
{
	cache_tier *ct = (cache_tier *)t;
	int rejected = 0;

	if (jitk__cache_get(ct->cache, q->key, q->target, out, &rejected)) {
		q->rejects += (unsigned)rejected;
		return JITK_ENOENT;
	}
	if (!jitk__tier_usable(q, out, &ct->log)) {
		/* evicted only where a compile may replace it */
		if (!q->no_compile)
			jitk__cache_evict(ct->cache, q->key);
		return JITK_ENOENT;
	}
	memcpy(out->key, q->key, JITK_HASH_SIZE);
	return JITK_OK;
}

/* The lock, then one more look: someone may have published while this
 * process waited for it. */
static int cache_claim(jitk_tier *t, jitk_tier_ask *q, int look_again, jitk_cache_entry *out,
		       long *held)
{
	int fd = -1;

	jitk__cache_lock(((cache_tier *)t)->cache, q->key, &fd);
	*held = fd;
	return fd >= 0 && look_again ? cache_get(t, q, out) : JITK_ENOENT;
}

static void cache_release(jitk_tier *t, jitk_tier_ask *q, long held)
{
	(void)t;
	(void)q;
	jitk__cache_unlock((int)held);
}

static int cache_put(jitk_tier *t, jitk_tier_ask *q, const jitk_cache_entry *e)
{
	(void)q;
	return jitk__cache_put(((cache_tier *)t)->cache, e);
}

static void cache_describe(jitk_tier *t, const jitk_tier_ask *q, jbuf *out)
{
	jitk__jbuf_printf(out, "cached at %s/%.2s/%s.jitk", jitk__cache_root(((cache_tier *)t)->cache),
			  q->key_hex, q->key_hex);
}

static void cache_close(jitk_tier *t)
{
	free(t);
}

static const jitk_tier_ops cache_ops = {
	"cache", JITK_ORIGIN_CACHE, 1, cache_get, cache_claim, cache_release, cache_put,
	cache_describe, cache_close,
};

int jitk__tier_cache_new(jitk_tier **out, jitk_cache *c, const jitk_logger *log)
{
	cache_tier *ct = calloc(1, sizeof(*ct));

	*out = NULL;
	if (!ct)
		return jitk__error(JITK_ENOMEM, "out of memory");
	ct->base.ops = &cache_ops;
	ct->cache = c;
	ct->log = *log;
	*out = &ct->base;
	return 0;
}

void jitk__tier_close(jitk_tier *t)
{
	if (t)
		t->ops->close(t);
}
