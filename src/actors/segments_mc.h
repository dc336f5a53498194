/* Mooncake master's per-call counts that crescent's own stats do not keep
 * (the segments actor's "mooncake_calls" stats view, read by
 * src/http/mooncake_metrics.c): the batch calls' per-entry outcomes as
 * Mooncake's rpc_service counts them, GetReplicaList's cache hits, eviction
 * passes, the task calls' refusals, and the store's gauges Mooncake names
 * (soft-pinned keys, cached objects, discarded puts).  Kept in this struct
 * rather than the actor's main stats array, which is nearly full.
 * Single-threaded: the segments actor's thread only. */
#ifndef CRESCENT_ACTORS_SEGMENTS_MC_H
#define CRESCENT_ACTORS_SEGMENTS_MC_H

#include <stdbool.h>
#include <stdint.h>

#include "core/store.h"
#include "rpc/rpc_methods.h"
#include "runtime/runtime.h"

/* The batch methods Mooncake counts, in its order. */
enum segments_mc_batch {
    MC_BATCH_EXIST_KEY,
    MC_BATCH_QUERY_IP,
    MC_BATCH_REPLICA_CLEAR,
    MC_BATCH_GET_REPLICA_LIST,
    MC_BATCH_PUT_START,
    MC_BATCH_PUT_END,
    MC_BATCH_PUT_REVOKE,
    MC_BATCH_COUNT
};

struct segments_mc_batch_counts {
    uint64_t failures;          /* calls whose every entry failed */
    uint64_t partial_successes; /* calls with some entries failed, not all */
    uint64_t items, failed_items;
};

struct segments_mc_counts {
    struct segments_mc_batch_counts batch[MC_BATCH_COUNT];
    uint64_t gets, gets_valid, mem_hits, file_hits, mem_hit_bytes, file_hit_bytes;
    uint64_t evict_attempts, evict_successes; /* eviction passes applied, those that freed some */
    uint64_t create_copy_failures, create_move_failures; /* refused where segments answers */
    /* BatchRemove's entries and those refused: Mooncake counts them as
     * Remove requests and failures. */
    uint64_t batch_remove_items, batch_remove_failed;
};

/* A call the store ran (cr_rpc_methods_run): its method, status and what
 * its entries came to. */
void segments_mc_note_call(struct segments_mc_counts *c, uint16_t method, int rc,
                           const struct cr_rpc_outcome *o);

/* A CreateCopyTask/CreateMoveTask refused before it reached tasks. */
void segments_mc_note_task_refused(struct segments_mc_counts *c, uint16_t method);

/* An eviction pass's victims applied: `evicted` of them went (dropped or
 * handed to an SSD). */
void segments_mc_note_evict_pass(struct segments_mc_counts *c, uint32_t evicted);

/* The view's counters (stat names: see segments_mc.c), with the store's. */
void segments_mc_stats(const struct segments_mc_counts *c, const struct cr_store_stats *s,
                       const uint64_t *method_failures, struct cr_actor_stats *out);

#endif
