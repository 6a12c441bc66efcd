/* tier_layers.c - the read-only layers as one tier ($JITK_CACHE_PATH, a
 * compiler's cache_path): cache directories and bundles, tried in the
 * order given. Nothing is ever written into a layer. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "store/bundle.h"
#include "store/sign.h"
#include "store/tier.h"

typedef struct {
	char *top;          /* as given */
	jitk_cache *dir;    /* a cache directory, or NULL */
	jitk_bundle *bundle; /* or a bundle */
} layer;

typedef struct {
	jitk_tier base;
	layer *layers;
	size_t n;
	jitk_logger log;
	jitk_trust *trust; /* bundle entries are checked against it */
	jitk_cache_counters counts;
} layers_tier;

/* A bundle layer: a bad entry is a reject (logged, counted) and a miss,
 * and so is one that no trusted key signed. */
static int bundle_get(layers_tier *lt, jitk_bundle *b, jitk_tier_ask *q, jitk_cache_entry *out)
{
	const char *problem = NULL;
	int rc = jitk__bundle_get(b, q->key, q->target, out, &problem);

	if (rc && problem) {
		atomic_fetch_add(&lt->counts.rejects, 1);
		q->rejects++;
		jitk__log(&lt->log, JITK_LOG_WARN, "cache entry %s in bundle %s rejected: %s",
			  q->key_hex, jitk__bundle_path(b), problem);
	}
	if (!rc && jitk__trust_admit(lt->trust, out, JITK_FROM_BUNDLE, jitk__bundle_path(b))) {
		jitk__cache_entry_free(out);
		atomic_fetch_add(&lt->counts.rejects, 1);
		q->rejects++;
		rc = JITK_ENOENT;
	}
	return rc ? JITK_ENOENT : JITK_OK;
}

static int layers_get(jitk_tier *t, jitk_tier_ask *q, jitk_cache_entry *out)
{
	layers_tier *lt = (layers_tier *)t;
	size_t i;

	for (i = 0; i < lt->n; i++) {
		layer *l = &lt->layers[i];
		int rejected = 0;

		if (l->bundle ? bundle_get(lt, l->bundle, q, out)
			      : jitk__cache_get(l->dir, q->key, q->target, out, &rejected)) {
			if (rejected) {
				atomic_fetch_add(&lt->counts.rejects, 1);
				q->rejects++;
			}
			continue;
		}
		/* a reject here is a miss of the whole tier: the next layers
		 * are not asked for an entry that one layer holds badly */
		if (!jitk__tier_usable(q, out, &lt->log))
			break;
		memcpy(out->key, q->key, JITK_HASH_SIZE);
		atomic_fetch_add(&lt->counts.hits, 1);
		return JITK_OK;
	}
	atomic_fetch_add(&lt->counts.misses, 1);
	return JITK_ENOENT;
}

/* The first layer holding q's entry: the lookup tries them in this order,
 * so it is the one that was read. */
static void layers_describe(jitk_tier *t, const jitk_tier_ask *q, jbuf *out)
{
	layers_tier *lt = (layers_tier *)t;
	size_t i;

	for (i = 0; i < lt->n; i++) {
		layer *l = &lt->layers[i];

		if (l->bundle) {
			jitk_cache_entry e;
			const char *problem;

			if (jitk__bundle_get(l->bundle, q->key, q->target, &e, &problem))
				continue;
			jitk__cache_entry_free(&e);
			jitk__jbuf_printf(out, "cached in the read-only bundle %s (key %s)", l->top,
					  q->key_hex);
			return;
		} else {
			char *path = jitk__asprintf("%s/%s/%.2s/%s.jitk", l->top, JITK_CACHE_SUBDIR,
						    q->key_hex, q->key_hex);
			struct stat st;
			int here = path && !lstat(path, &st) && S_ISREG(st.st_mode);

			if (here)
				jitk__jbuf_printf(out, "cached in a read-only layer at %s", path);
			free(path);
			if (here)
				return;
		}
	}
	jitk__jbuf_printf(out, "cached in a read-only layer (key %s)", q->key_hex);
}

static void layers_close(jitk_tier *t)
{
	layers_tier *lt = (layers_tier *)t;
	size_t i;

	for (i = 0; i < lt->n; i++) {
		free(lt->layers[i].top);
		jitk__cache_close(lt->layers[i].dir);
		jitk__bundle_close(lt->layers[i].bundle);
	}
	free(lt->layers);
	free(lt);
}

static const jitk_tier_ops layers_ops = {
	"layers", JITK_ORIGIN_LAYER, 1, layers_get, NULL, NULL, NULL, layers_describe, layers_close,
};

/* A layer that is a file is a bundle: opened (and its index checked) now,
 * so that a bad one is one warning, not one per lookup. */
static int add_bundle(layers_tier *lt, layer *l)
{
	char why[256];

	if (!jitk__bundle_magic(l->top)) {
		jitk__log(&lt->log, JITK_LOG_WARN,
			  "cache layer %s ignored: not a directory or a jitk bundle", l->top);
		return 0;
	}
	if (jitk__bundle_open(&l->bundle, l->top, 1, why, sizeof(why))) {
		jitk__log(&lt->log, JITK_LOG_WARN, "cache layer %s ignored: a bundle, but %s", l->top,
			  why);
		return strcmp(why, "out of memory") ? 0 : -1;
	}
	return 0;
}

static int add_layer(layers_tier *lt, const char *top, size_t len)
{
	layer *l = &lt->layers[lt->n];
	struct stat st;
	char why[256];
	int rc = 0;

	memset(l, 0, sizeof(*l));
	if (!(l->top = jitk__strndup(top, len)))
		return -1;
	if (!stat(l->top, &st) && S_ISREG(st.st_mode))
		rc = add_bundle(lt, l);
	else if ((rc = jitk__cache_open_layer(&l->dir, l->top, &lt->log, why, sizeof(why))) == -1)
		/* Once here, not once per lookup. */
		jitk__log(&lt->log, JITK_LOG_WARN, "cache layer %s ignored: %s", l->top, why);
	if (l->bundle || l->dir) {
		lt->n++;
		return 0;
	}
	free(l->top);
	return rc == -1 ? 0 : rc;
}

int jitk__tier_layers_open(jitk_tier **out, const char *layers, const jitk_logger *log)
{
	layers_tier *lt;
	size_t most = 1;
	const char *p;

	*out = NULL;
	if (!layers || !*layers)
		return 0;
	for (p = layers; *p; p++)
		most += *p == ':';
	if (!(lt = calloc(1, sizeof(*lt))) || !(lt->layers = calloc(most, sizeof(*lt->layers)))) {
		free(lt);
		return jitk__error(JITK_ENOMEM, "out of memory");
	}
	lt->base.ops = &layers_ops;
	if (log)
		lt->log = *log;
	for (p = layers; *p;) {
		size_t len = strcspn(p, ":");

		if (len && add_layer(lt, p, len)) {
			layers_close(&lt->base);
			return jitk__error(JITK_ENOMEM, "out of memory");
		}
		p += len + (p[len] == ':');
	}
	if (!lt->n) {
		layers_close(&lt->base);
		return 0;
	}
	*out = &lt->base;
	return 0;
}

void jitk__tier_layers_trust(jitk_tier *t, jitk_trust *trust)
{
	if (t)
		((layers_tier *)t)->trust = trust;
}

const jitk_cache_counters *jitk__tier_layers_counters(const jitk_tier *t)
{
	return &((const layers_tier *)t)->counts;
}
