/* Leader election on an etcd lease, as a state machine without I/O or
 * clocks: the caller (ha.c's thread) asks what to do next, does it against
 * etcd (etcd.h), and reports the result with the time it *sent* the
 * request.  Time is a parameter (now_ms on a monotonic clock), so tests
 * drive every schedule, partitions and pauses included.
 *
 * The rules (docs/ha.md, "Fencing"):
 *   - a candidate grants itself a lease of ttl_ms and creates the leader key
 *     attached to it, only if the key is absent (a txn); the key's
 *     create_revision is the new leader's term, the fencing token;
 *   - a leader renews its lease every ttl_ms / 3 and reads the key each
 *     time; it may answer mutating calls only until writable_until_ms,
 *     which is the send time of its last successful renewal (or grant) plus
 *     the TTL etcd confirmed, less a margin (ttl_ms / 10, at least 100 ms).
 *     etcd counts the lease from when it *received* the request, later than
 *     the send, so the leader's own deadline always falls before etcd can
 *     expire the key and let another be elected;
 *   - past that deadline, or when a renewal says the lease is gone, or the
 *     key is no longer its own, a leader steps down at once (a new term is
 *     another's or its own next one);
 *   - a standby reads the key (and watches it for ttl_ms / 3); while a
 *     leader holds it the standby follows that leader; once it is absent,
 *     it campaigns.
 *
 * Single-threaded: owned by the HA thread. */
#ifndef CRESCENT_HA_ELECT_H
#define CRESCENT_HA_ELECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ha/etcd_json.h"

enum cr_elect_role {
    CR_ELECT_STANDBY = 0, /* following the key's holder, or campaigning */
    CR_ELECT_LEADER = 1,
};

enum cr_elect_action {
    CR_ELECT_WAIT = 0,      /* nothing until *wake_ms */
    CR_ELECT_GRANT = 1,     /* grant a lease of ttl_s() seconds */
    CR_ELECT_CREATE = 2,    /* create the key with our value on our lease, if absent */
    CR_ELECT_KEEPALIVE = 3, /* renew our lease */
    CR_ELECT_OBSERVE = 4,   /* read the key (a standby then watches it until *wake_ms) */
};

struct cr_elect_stats {
    uint64_t elections;      /* terms this node won */
    uint64_t step_downs;     /* times it stopped leading */
    uint64_t leaders_seen;   /* changes of the leader a standby follows (failovers seen) */
    uint64_t renew_failures; /* renewals that failed or found the lease gone */
    uint64_t etcd_failures;  /* requests of any kind that failed */
};

struct cr_elect {
    uint64_t ttl_ms;
    uint64_t tick_ms;   /* ttl_ms / 3 */
    uint64_t margin_ms; /* taken off the lease's end */
    enum cr_elect_role role;
    int64_t lease;                /* ours; 0: none */
    uint64_t lease_valid_until_ms; /* by our own clock, margin taken off */
    int64_t term;                  /* our key's create_revision while leader; the followed one's else */
    uint64_t writable_until_ms;    /* leader only: mutating calls allowed before this */
    uint64_t next_renew_ms;
    uint64_t next_observe_ms;
    bool renewed_since_observe;
    bool want_create; /* the key was seen absent: campaign */
    struct cr_etcd_kv leader; /* the key as last read (found false: none) */
    int64_t followed_term;    /* the leader a standby follows (0: none yet) */
    struct cr_elect_stats stats;
};

/* A machine for a lease of ttl_ms (at least 1000, whole seconds: etcd's
 * TTLs are seconds), starting as a standby that reads the key first. */
void cr_elect_init(struct cr_elect *e, uint64_t ttl_ms, uint64_t now_ms);

/* What to do now; for CR_ELECT_WAIT and CR_ELECT_OBSERVE, *wake_ms is when
 * to ask again (at the latest).  A leader whose deadline has passed steps
 * down here, before anything else (the caller sees role change). */
enum cr_elect_action cr_elect_next(struct cr_elect *e, uint64_t now_ms, uint64_t *wake_ms);

/* The lease TTL to ask etcd for, in seconds. */
int64_t cr_elect_ttl_s(const struct cr_elect *e);

/* Results.  sent_ms is when the request was sent; ok false: it failed (no
 * endpoint answered, or etcd refused it). */
void cr_elect_granted(struct cr_elect *e, uint64_t sent_ms, bool ok, int64_t lease, int64_t ttl_s);
/* created: the txn put our key (revision: its create_revision); otherwise
 * holder is the key's current holder (found false: it vanished between). */
void cr_elect_created(struct cr_elect *e, uint64_t sent_ms, bool ok, bool created,
                      int64_t revision, const struct cr_etcd_kv *holder);
/* ttl_s: the lease's TTL after renewal; 0 when etcd says it is gone. */
void cr_elect_renewed(struct cr_elect *e, uint64_t sent_ms, bool ok, int64_t ttl_s);
/* The key as read (kv->found false: absent). */
void cr_elect_observed(struct cr_elect *e, uint64_t now_ms, bool ok, const struct cr_etcd_kv *kv);

/* Whether a mutating call may be answered at now_ms. */
static inline bool cr_elect_writable(const struct cr_elect *e, uint64_t now_ms) {
    return e->role == CR_ELECT_LEADER && now_ms < e->writable_until_ms;
}

#endif
