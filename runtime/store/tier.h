/* tier.h - the storage tiers a compiler looks a key up in, in order: the
 * read-only layers and bundles (tier_layers.c), the writable cache
 * (tier_cache.c), the remote with its lease (tier_remote.c). The compiler
 * makes the key of an (instance, target) once, walks the tiers with it,
 * and on a total miss compiles and puts the image into every tier that
 * takes one. A new store is one more file that fills jitk_tier_ops. */
#ifndef JITK_TIER_H
#define JITK_TIER_H

#include "store/cache.h"

/* One key asked of the tiers: made by the compiler, read by the tiers;
 * the tiers add what they found to the counts. */
typedef struct {
	uint8_t key[JITK_HASH_SIZE];
	char key_hex[2 * JITK_HASH_SIZE + 1];
	char target[JITK_ARCH_STRLEN]; /* what the image is code for */
	const char *name;              /* the instance, for messages */
	/* Why nothing may compile now (JITK_NO_COMPILE, a sealed runtime),
	 * or NULL: a bad entry is then kept, not evicted, and the messages
	 * say so. */
	const char *no_compile;
	/* What the tiers found: entries of the local tiers that failed
	 * verification (or were no usable image), remote objects that did,
	 * and whether a remote object was refused for want of a trusted
	 * signature (then an unsigned upload must not replace it). */
	unsigned rejects, remote_rejects;
	int refused;
} jitk_tier_ask;

typedef struct jitk_tier jitk_tier;

typedef struct {
	const char *name; /* "layers", "cache", "remote" */
	int origin;       /* jitk_origin of what it serves */
	/* Local tiers hold no network and are asked for every target a GPU
	 * can run (jitk__lookup_run); the others only for the one it
	 * compiles. */
	int local;
	/* The verified image of q's key: JITK_OK and *out (the caller's);
	 * JITK_ENOENT on a miss, or when what it holds fails verification
	 * (counted in q, logged: never an error). */
	int (*get)(jitk_tier *t, jitk_tier_ask *q, jitk_cache_entry *out);
	/* After a miss, before the compile (NULL: the tier has nothing to
	 * claim): take q's key for this process (*held: what to give release
	 * after the compile, -1 when nothing was taken) and, when look_again
	 * or while another holds it, look for its image once more (what
	 * another process published meanwhile): JITK_OK with *out, else
	 * JITK_ENOENT. */
	int (*claim)(jitk_tier *t, jitk_tier_ask *q, int look_again, jitk_cache_entry *out,
		     long *held);
	void (*release)(jitk_tier *t, jitk_tier_ask *q, long held);
	/* Publish e (NULL: a read-only tier). 0 when the tier took it;
	 * a failure is the tier's to warn about. */
	int (*put)(jitk_tier *t, jitk_tier_ask *q, const jitk_cache_entry *e);
	/* Where q's image is in this tier, for jitk explain --cache: "cached
	 * at PATH" and the like, appended to out. */
	void (*describe)(jitk_tier *t, const jitk_tier_ask *q, jbuf *out);
	void (*close)(jitk_tier *t);
} jitk_tier_ops;

struct jitk_tier {
	const jitk_tier_ops *ops;
};

/* The tiers. Each borrows what it is given (the compiler owns caches,
 * remote, lease and trust) except what it opens itself: the layers.
 * jitk__tier_layers_open: layers is colon-separated directories (caches
 * holding v1/) and bundle files; one that cannot serve is dropped with
 * one warning (a bundle must be a regular file, this user's or root's,
 * not writable by group or others, with a header and index that verify).
 * *out is NULL when none is left. Fails only with JITK_ENOMEM. Its bundle
 * entries are checked against the trust set later (NULL: nothing is
 * checked). */
int jitk__tier_layers_open(jitk_tier **out, const char *layers, const jitk_logger *log);
void jitk__tier_layers_trust(jitk_tier *t, jitk_trust *trust);
/* The layers' own counters (every layer together). */
const jitk_cache_counters *jitk__tier_layers_counters(const jitk_tier *t);
int jitk__tier_cache_new(jitk_tier **out, jitk_cache *c, const jitk_logger *log);
typedef struct jitk_remote jitk_remote;
typedef struct jitk_lease jitk_lease;
int jitk__tier_remote_new(jitk_tier **out, jitk_remote *r, jitk_lease *l, jitk_trust *trust,
			  const jitk_logger *log);
void jitk__tier_close(jitk_tier *t);

/* What every local tier checks of a verified entry before it serves it:
 * 1 when e is a kernel's image (jitk__entry_kind_problem), else 0 with e
 * freed, q->rejects counted and the reject logged (where from: "cache
 * entry KEY..."). */
int jitk__tier_usable(jitk_tier_ask *q, jitk_cache_entry *e, const jitk_logger *log);

#endif
