/* tier_remote.c - the remote (remote.c) as a tier, with the lease server
 * (lease.c) as its claim. A remote object is verified exactly as a local
 * entry is; nothing the remote or the lease server does fails a build. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/lease.h"
#include "store/remote.h"
#include "store/sign.h"
#include "store/tier.h"

typedef struct {
	jitk_tier base;
	jitk_remote *remote;
	jitk_lease *lease; /* NULL: none */
	jitk_trust *trust;
	jitk_logger log;
} remote_tier;

/* q's key from the remote: 0 with *out after the verification a local
 * entry gets (entry header and checksum, key and target, code for the
 * target, a trusted signature where one is required). JITK_ENOENT on a
 * miss (counted when count_miss) or a reject (counted, warned); JITK_EIO
 * when its URL is off. */
static int fetch(remote_tier *rt, jitk_tier_ask *q, jitk_cache_entry *out, int count_miss)
{
	jitk_remote_counters *n = jitk__remote_counters(rt->remote);
	const char *why = NULL;
	uint8_t *bytes;
	size_t len;
	int rc = jitk__remote_get(rt->remote, q->key, &bytes, &len);

	if (rc == JITK_ENOENT && count_miss)
		atomic_fetch_add(&n->misses, 1);
	if (rc)
		return rc;
	if (!jitk__entry_decode(out, bytes, len, &why) &&
	    ((why = jitk__entry_mismatch(out, q->key, q->target)) ||
	     (why = jitk__entry_kind_problem(out))))
		jitk__cache_entry_free(out);
	free(bytes);
	/* provenance: no trusted key's signature, no use (counted, warned once
	 * per URL; the key is compiled as after a reject) */
	if (!why && jitk__trust_admit(rt->trust, out, JITK_FROM_REMOTE,
				      jitk__remote_url(rt->remote, q->key))) {
		jitk__cache_entry_free(out);
		atomic_fetch_add(&n->rejects, 1);
		q->remote_rejects++;
		q->refused = 1;
		return JITK_ENOENT;
	}
	if (why) {
		atomic_fetch_add(&n->rejects, 1);
		q->remote_rejects++;
		jitk__log(&rt->log, JITK_LOG_WARN, "remote object %.16s... for %s on %s from %s rejected: %s; %s%s",
			  q->key_hex, q->name, q->target, jitk__remote_url(rt->remote, q->key), why,
			  q->no_compile ? "not compiling it: " : "compiling it",
			  q->no_compile ? q->no_compile : "");
		return JITK_ENOENT;
	}
	atomic_fetch_add(&n->hits, 1);
	return 0;
}

static int remote_get(jitk_tier *t, jitk_tier_ask *q, jitk_cache_entry *out)
{
	return fetch((remote_tier *)t, q, out, 1) ? JITK_ENOENT : JITK_OK;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* Before compiling a key the remote lacks: take its lease (*held), or,
 * while another process holds it, poll the remote until the holder's
 * upload arrives (0: *out filled) or the lease is gone or expired (then
 * compile anyway). A lease taken is followed by one more look when
 * look_again (the miss was a miss, not a rejected object): the previous
 * holder may have uploaded and given the lease back between the miss and
 * the take, and without the look this process would compile the key a
 * second time. A read-only process never takes a lease (it uploads
 * nothing that others could wait for) but waits on others'. A wait is
 * bounded by the lease's time to live (and a grace second) - extended
 * while the holder renews its lease, up to JITK_LEASE_WAIT_MAX_MS - and by
 * what is left of the process's wait budget (jitk__lease_wait_left): a wait
 * that ends without the holder's upload is charged to it, and once it is
 * spent, leases are off for the process. */
static int remote_claim(jitk_tier *t, jitk_tier_ask *q, int look_again, jitk_cache_entry *out,
			long *held)
{
	remote_tier *rt = (remote_tier *)t;
	jitk_remote_counters *n = jitk__remote_counters(rt->remote);
	double start = jitk__now_ms(), deadline;
	long left = 0, last, delay = 10, budget;
	int st, rc = JITK_ENOENT;

	*held = -1;
	if (!rt->lease || !jitk__remote_on(rt->remote, q->key))
		return JITK_ENOENT;
	st = jitk__remote_read_only(rt->remote) ? jitk__lease_check(rt->lease, q->key_hex, &left)
						: jitk__lease_take(rt->lease, q->key_hex, &left);
	if (st == JITK_LEASE_TAKEN) {
		*held = 1;
		return look_again ? (fetch(rt, q, out, 0) ? JITK_ENOENT : JITK_OK) : JITK_ENOENT;
	}
	if (st != JITK_LEASE_HELD)
		return JITK_ENOENT;
	atomic_fetch_add(&jitk__lease_counters(rt->lease)->waits, 1);
	jitk__log(&rt->log, JITK_LOG_INFO,
		  "waiting for %s on %s: another process holds the lease on %.16s... (%ld ms left)",
		  q->name, q->target, q->key_hex, left);
	budget = jitk__lease_wait_left(rt->lease);
	if (budget > jitk__lease_ttl(rt->lease) + JITK_LEASE_GRACE_MS)
		budget = jitk__lease_ttl(rt->lease) + JITK_LEASE_GRACE_MS;
	deadline = start + (double)budget;
	last = left;
	for (;;) {
		sleep_ms(delay);
		delay = delay * 2 > 100 ? 100 : delay * 2;
		if (!(rc = fetch(rt, q, out, 0)) || !jitk__remote_on(rt->remote, q->key) ||
		    jitk__now_ms() > deadline)
			break;
		if (jitk__lease_check(rt->lease, q->key_hex, &left) != JITK_LEASE_HELD) {
			/* given back after the upload, or expired: one last look */
			rc = fetch(rt, q, out, 0);
			break;
		}
		if (left > last) {
			/* renewed: the holder lives and compiles; wait as long
			 * as the lease says, up to JITK_LEASE_WAIT_MAX_MS in all */
			double until = jitk__now_ms() + (double)left + JITK_LEASE_GRACE_MS;

			if (until > start + JITK_LEASE_WAIT_MAX_MS)
				until = start + JITK_LEASE_WAIT_MAX_MS;
			if (until > deadline)
				deadline = until;
		}
		last = left;
	}
	atomic_fetch_add(&n->wait_us, (unsigned long long)((jitk__now_ms() - start) * 1000.0));
	if (rc)
		jitk__lease_wasted(rt->lease, jitk__now_ms() - start);
	return rc ? JITK_ENOENT : JITK_OK;
}

static void remote_release(jitk_tier *t, jitk_tier_ask *q, long held)
{
	if (held >= 0)
		jitk__lease_release(((remote_tier *)t)->lease, q->key_hex);
}

/* The upload. An unsigned one never replaces an object that was refused
 * here: it may be signed by a key other nodes trust. Nothing of a
 * read-only remote is uploaded (and the remote takes nothing then). */
static int remote_put(jitk_tier *t, jitk_tier_ask *q, const jitk_cache_entry *e)
{
	remote_tier *rt = (remote_tier *)t;
	uint8_t *bytes = NULL;
	size_t len = 0;
	int rc = JITK_EINVAL;

	if (jitk__remote_read_only(rt->remote) || (q->refused && !*e->sig_name))
		return rc;
	if (!jitk__entry_encode(&bytes, &len, e))
		rc = jitk__remote_put(rt->remote, q->key, bytes, len);
	free(bytes);
	return rc;
}

static void remote_describe(jitk_tier *t, const jitk_tier_ask *q, jbuf *out)
{
	char shown[256];

	jitk__redact_url(shown, sizeof(shown), jitk__remote_url(((remote_tier *)t)->remote, q->key));
	jitk__jbuf_printf(out, "in the remote %s (key %s)", shown, q->key_hex);
}

static void remote_close(jitk_tier *t)
{
	free(t);
}

static const jitk_tier_ops remote_ops = {
	"remote", JITK_ORIGIN_REMOTE, 0, remote_get, remote_claim, remote_release, remote_put,
	remote_describe, remote_close,
};

int jitk__tier_remote_new(jitk_tier **out, jitk_remote *r, jitk_lease *l, jitk_trust *trust,
			  const jitk_logger *log)
{
	remote_tier *rt = calloc(1, sizeof(*rt));

	*out = NULL;
	if (!rt)
		return jitk__error(JITK_ENOMEM, "out of memory");
	rt->base.ops = &remote_ops;
	rt->remote = r;
	rt->lease = l;
	rt->trust = trust;
	rt->log = *log;
	*out = &rt->base;
	return 0;
}
