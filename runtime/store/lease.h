/* lease.h - cross-machine leases on cold keys, on a Redis server (hiredis).
 * Before compiling a key the remote lacks, a process takes the key's lease
 * (SET NX PX); the others poll the remote until the holder has uploaded
 * it or the lease expired. Every failure fails open: the lease server is
 * then off for the process (one warning) and everyone compiles.
 * docs/cache-format.md, "Leases". */
#ifndef JITK_LEASE_H
#define JITK_LEASE_H

#include <stdatomic.h>

#include "base/internal.h"

#define JITK_LEASE_TTL_MS 10000
/* How long past a lease's time to live a waiter still looks for the
 * holder's upload. */
#define JITK_LEASE_GRACE_MS 1000
/* The longest wait on a lease its holder keeps renewing (a compile that
 * takes that long is compiled by the waiter too). */
#define JITK_LEASE_WAIT_MAX_MS (15L * 60 * 1000)

typedef struct jitk_lease jitk_lease;

typedef struct {
	atomic_ullong taken, waits, errors;
} jitk_lease_counters;

/* url: redis://[[USER]:PASSWORD@]HOST[:PORT][/DB] (NULL or "" = none:
 * *out stays NULL). A URL that does not parse is dropped with one warning.
 * Nothing is connected yet. Fails only with JITK_ENOMEM. */
int jitk__lease_open(jitk_lease **out, const char *url, long timeout_ms, long ttl_ms,
		     const jitk_logger *log);
void jitk__lease_close(jitk_lease *l);
long jitk__lease_ttl(const jitk_lease *l);
jitk_lease_counters *jitk__lease_counters(jitk_lease *l);

/* What a lease operation found. */
enum {
	JITK_LEASE_OFF = 0,   /* no lease server (or it failed now): go ahead */
	JITK_LEASE_TAKEN = 1, /* this process holds the lease now */
	JITK_LEASE_HELD = 2,  /* another holds it; *left_ms: its time left */
	JITK_LEASE_FREE = 3   /* nobody holds it */
};

/* Take the lease on the key hex (64 hex digits): TAKEN, HELD or OFF. */
int jitk__lease_take(jitk_lease *l, const char *hex, long *left_ms);
/* Whether someone holds it: HELD, FREE or OFF. A holder renews its
 * leases while it compiles (each ttl / 4, back to ttl): a *left_ms that
 * went up since the last look is a holder that is alive. */
int jitk__lease_check(jitk_lease *l, const char *hex, long *left_ms);
/* Give back a lease this process took (only if it still holds it: an
 * expired lease someone else took since is left alone). */
void jitk__lease_release(jitk_lease *l, const char *hex);

/* The wait budget: the time a process may spend, in all keys together,
 * in waits for other processes' leases that end without the holder's
 * upload (a holder that died, a server that says "held" forever): one
 * lease's longest wait, ttl + JITK_LEASE_GRACE_MS. What is left of it, in
 * ms (0 once leases are off); a wait takes no longer. */
long jitk__lease_wait_left(jitk_lease *l);
/* A wait of ms ended without an upload: charged to the budget; once it is
 * spent, leases are off for the process (one warning, one error). */
void jitk__lease_wasted(jitk_lease *l, double ms);

#endif
