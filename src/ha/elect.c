/* Leader election as a state machine (elect.h): the rules, no I/O. */
#include "ha/elect.h"

#include <assert.h>
#include <string.h>

/* How soon a failed request is tried again. */
static uint64_t retry_ms(const struct cr_elect *e) { return e->tick_ms < 250 ? e->tick_ms : 250; }

void cr_elect_init(struct cr_elect *e, uint64_t ttl_ms, uint64_t now_ms) {
    assert(e != NULL && ttl_ms >= 1000 && ttl_ms % 1000 == 0);
    memset(e, 0, sizeof(*e));
    e->ttl_ms = ttl_ms;
    e->tick_ms = ttl_ms / 3;
    e->margin_ms = ttl_ms / 10 > 100 ? ttl_ms / 10 : 100;
    e->role = CR_ELECT_STANDBY;
    e->next_observe_ms = now_ms;
}

int64_t cr_elect_ttl_s(const struct cr_elect *e) { return (int64_t)(e->ttl_ms / 1000); }

/* Stops leading: no mutating call from now on.  The lease is dropped (it
 * may be dead, and a term must never be resumed once its deadline passed). */
static void step_down(struct cr_elect *e, uint64_t now_ms) {
    assert(e->role == CR_ELECT_LEADER);
    e->role = CR_ELECT_STANDBY;
    e->writable_until_ms = 0;
    e->lease = 0;
    e->lease_valid_until_ms = 0;
    e->want_create = false;
    e->next_observe_ms = now_ms;
    e->stats.step_downs++;
}

static void become_leader(struct cr_elect *e, int64_t term) {
    assert(term > 0 && e->lease != 0);
    e->role = CR_ELECT_LEADER;
    e->term = term;
    e->followed_term = term;
    e->writable_until_ms = e->lease_valid_until_ms;
    e->want_create = false;
    e->renewed_since_observe = false;
    e->stats.elections++;
}

/* A standby follows the key's holder (found false: none, campaign). */
static void follow(struct cr_elect *e, uint64_t now_ms, const struct cr_etcd_kv *kv) {
    e->leader = *kv;
    if (!kv->found) {
        e->want_create = true;
        return;
    }
    e->want_create = false;
    if (e->lease != 0 && kv->lease == e->lease && now_ms < e->lease_valid_until_ms) {
        become_leader(e, kv->create_revision); /* our own create, its answer lost */
        return;
    }
    if (kv->create_revision != e->followed_term) {
        if (e->followed_term != 0) e->stats.leaders_seen++;
        e->followed_term = kv->create_revision;
    }
    e->term = kv->create_revision;
}

enum cr_elect_action cr_elect_next(struct cr_elect *e, uint64_t now_ms, uint64_t *wake_ms) {
    assert(e != NULL && wake_ms != NULL);
    if (e->role == CR_ELECT_LEADER && now_ms >= e->writable_until_ms) step_down(e, now_ms);
    if (e->role == CR_ELECT_LEADER) {
        if (now_ms >= e->next_renew_ms) return CR_ELECT_KEEPALIVE;
        *wake_ms = e->next_renew_ms < e->writable_until_ms ? e->next_renew_ms : e->writable_until_ms;
        if (e->renewed_since_observe) return CR_ELECT_OBSERVE;
        return CR_ELECT_WAIT;
    }
    if (now_ms < e->next_observe_ms) {
        *wake_ms = e->next_observe_ms;
        return CR_ELECT_WAIT;
    }
    if (e->want_create) {
        /* A lease with less than a tick left could end before the create. */
        if (e->lease == 0 || now_ms + e->tick_ms >= e->lease_valid_until_ms) return CR_ELECT_GRANT;
        return CR_ELECT_CREATE;
    }
    *wake_ms = now_ms + e->tick_ms;
    return CR_ELECT_OBSERVE;
}

void cr_elect_granted(struct cr_elect *e, uint64_t sent_ms, bool ok, int64_t lease, int64_t ttl_s) {
    assert(e != NULL);
    if (!ok || lease == 0 || ttl_s <= 0) {
        e->stats.etcd_failures++;
        e->next_observe_ms = sent_ms + retry_ms(e);
        return;
    }
    e->lease = lease;
    e->lease_valid_until_ms = sent_ms + (uint64_t)ttl_s * 1000u - e->margin_ms;
    e->next_renew_ms = sent_ms + e->tick_ms;
}

void cr_elect_created(struct cr_elect *e, uint64_t sent_ms, bool ok, bool created,
                      int64_t revision, const struct cr_etcd_kv *holder) {
    assert(e != NULL && holder != NULL);
    if (e->role == CR_ELECT_LEADER) return; /* a late answer; nothing to do */
    if (!ok) {
        /* It may have been applied: read the key before campaigning again
         * (a key on our lease is ours). */
        e->stats.etcd_failures++;
        e->want_create = false;
        e->next_observe_ms = sent_ms + retry_ms(e);
        return;
    }
    if (created) {
        assert(revision > 0);
        if (sent_ms >= e->lease_valid_until_ms) return; /* too late to use: observe again */
        become_leader(e, revision);
        return;
    }
    follow(e, sent_ms, holder);
    if (!holder->found) e->next_observe_ms = sent_ms; /* gone again: campaign at once */
}

void cr_elect_renewed(struct cr_elect *e, uint64_t sent_ms, bool ok, int64_t ttl_s) {
    assert(e != NULL);
    if (e->role != CR_ELECT_LEADER) return; /* a standby keeps no lease alive */
    if (!ok) {
        e->stats.renew_failures++;
        e->stats.etcd_failures++;
        e->next_renew_ms = sent_ms + retry_ms(e);
        return;
    }
    if (ttl_s <= 0) { /* etcd says the lease is gone: so is the term */
        e->stats.renew_failures++;
        step_down(e, sent_ms);
        return;
    }
    uint64_t until = sent_ms + (uint64_t)ttl_s * 1000u - e->margin_ms;
    if (until > e->lease_valid_until_ms) e->lease_valid_until_ms = until;
    e->writable_until_ms = e->lease_valid_until_ms;
    e->next_renew_ms = sent_ms + e->tick_ms;
    e->renewed_since_observe = true;
}

void cr_elect_observed(struct cr_elect *e, uint64_t now_ms, bool ok, const struct cr_etcd_kv *kv) {
    assert(e != NULL && kv != NULL);
    if (!ok) {
        e->stats.etcd_failures++;
        if (e->role == CR_ELECT_STANDBY) e->next_observe_ms = now_ms + retry_ms(e);
        return;
    }
    if (e->role == CR_ELECT_LEADER) {
        e->renewed_since_observe = false;
        if (!kv->found || kv->create_revision != e->term || kv->lease != e->lease) {
            step_down(e, now_ms); /* the key is no longer ours (deleted, or another's) */
            follow(e, now_ms, kv);
        }
        return;
    }
    follow(e, now_ms, kv);
    e->next_observe_ms = now_ms;
}
