/* The fence between the HA thread (ha.c), which wins and loses elections,
 * and the segments actor, which answers store calls: a leader may answer
 * calls only until the deadline its lease allows (elect.h), and a standby
 * answers no mutating call, naming the leader instead ("not the leader",
 * durable/role.h's CR_ROLE_NOT_LEADER_STATUS).
 *
 * Threads: the HA thread writes; segments reads the deadline with one
 * acquire load per call (its own clock, CLOCK_MONOTONIC, against the
 * deadline in the same clock), so a leader paused past its lease (SIGSTOP)
 * refuses the first call after it wakes, before the HA thread has run.
 * The rest (role, term, addresses, counters: for /health, metrics and
 * refusals' messages) is a snapshot under a mutex, read off the hot path. */
#ifndef CRESCENT_HA_GATE_H
#define CRESCENT_HA_GATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/histogram.h"
#include "ha/elect.h"
#include "ha/etcd_json.h"

struct cr_ha_view {
    bool leader;                            /* this node leads now */
    int64_t term;                           /* the leader's term (its key's create_revision) */
    char self[CR_ETCD_VALUE_MAX + 1];       /* this node's addresses (JSON), as in the key */
    char leader_value[CR_ETCD_VALUE_MAX + 1]; /* the leader's (JSON); "" none known */
    char etcd_endpoint[256];                /* the etcd endpoint answering now */
    char last_error[320];                   /* the last etcd failure ("" none) */
    uint64_t lease_ttl_ms;
    uint64_t writable_for_ms; /* leader: how long its lease still allows writes */
    struct cr_elect_stats elect;
    uint64_t etcd_requests, etcd_errors, etcd_failovers;
    uint64_t etcd_latency_buckets[CR_HISTOGRAM_BUCKETS]; /* core/histogram.h's bounds, per bucket */
    uint64_t etcd_latency_count, etcd_latency_sum_ns;
};

struct cr_ha_gate {
    _Atomic uint64_t writable_until_ms; /* CLOCK_MONOTONIC ms; 0: not writable */
    _Atomic int64_t term;
    pthread_mutex_t lock;
    struct cr_ha_view view;
};

/* Returns CR_OK or CR_ERR_NOMEM; a new gate is closed (not writable). */
int cr_ha_gate_init(struct cr_ha_gate *gate);
void cr_ha_gate_destroy(struct cr_ha_gate *gate);

/* Whether a call may be answered at now_ms (segments' clock). */
static inline bool cr_ha_gate_open(struct cr_ha_gate *gate, uint64_t now_ms) {
    return now_ms < atomic_load_explicit(&gate->writable_until_ms, memory_order_acquire);
}

/* A copy of the view (any thread). */
void cr_ha_gate_view(struct cr_ha_gate *gate, struct cr_ha_view *out);

/* The refusal's sentence: "not the leader (term T); the leader is RPC"
 * (from the view). */
void cr_ha_gate_refusal(struct cr_ha_gate *gate, char *out, size_t size);

#endif
