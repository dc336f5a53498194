/* The store core's eviction mechanism (store_evict.c): usage, candidate
 * samples, applying victims, zombie reclaim.  The leases actor decides
 * (policy); these calls only do.  Included by store.h. */
#ifndef CRESCENT_CORE_STORE_EVICT_H
#define CRESCENT_CORE_STORE_EVICT_H

#include "core/store.h"

/* ---- eviction (mechanism; the lease/eviction actor decides) -------------- */

/* Room used, in bytes and in counts.  max_objects and the segments'
 * allocation tables are limits on counts that fill independently of the
 * bytes (a million small objects fill the object table of a store whose
 * segments are nearly empty), so eviction watches both. */
struct cr_store_usage {
    uint64_t capacity_bytes;
    uint64_t used_bytes;
    double ratio; /* used / capacity; 0 when nothing is mounted */
    uint64_t objects;     /* live, in-flight puts included */
    uint64_t max_objects;
    /* The fuller of objects / max_objects and, over the mounted segments,
     * allocations / max_allocations_per_segment. */
    double count_ratio;
};
void cr_store_usage(const cr_store *store, struct cr_store_usage *out);

struct cr_evict_candidate {
    uint32_t object_id;
    uint32_t generation;
    uint64_t size_bytes; /* bytes freed if evicted (all replicas) */
    uint64_t last_access_ms;
    bool soft_pinned;
};

/* Redis-style sampling: draws random object slots and returns up to
 * sample_size evictable ones (complete, unleased, not hard-pinned) into out.
 * *rng is the caller's xorshift state (non-zero).  Returns the count. */
size_t cr_store_sample_eviction_candidates(const cr_store *store, uint64_t now_ms,
                                           uint64_t *rng, size_t sample_size,
                                           struct cr_evict_candidate *out);

/* Pure policy: reorders pool[0..n) (duplicates removed) so that the victims
 * come first and returns their count: oldest non-soft-pinned first until
 * both bytes_to_free and objects_to_free are reached; soft-pinned ones
 * (oldest first) only when allow_soft_pinned and the others do not suffice. */
size_t cr_evict_choose(struct cr_evict_candidate *pool, size_t n, uint64_t bytes_to_free,
                       uint64_t objects_to_free, bool allow_soft_pinned);

/* Bytes one eviction pass should free: 0 below the high watermark (unless
 * alloc_failed), else capacity * max(eviction_ratio, ratio - high + eviction_ratio). */
uint64_t cr_evict_bytes_to_free(const cr_store_config *cfg, const struct cr_store_usage *usage,
                                bool alloc_failed);

/* Objects one eviction pass should free (the count watermark, with the
 * byte watermark's ratios): 0 while count_ratio is below
 * eviction_high_watermark_ratio, else
 * objects * max(eviction_ratio, count_ratio - high + eviction_ratio), at
 * least 1.  A segment whose allocation table nears full is relieved by
 * evicting that share of all objects (sampling does not aim at a segment). */
uint64_t cr_evict_objects_to_free(const cr_store_config *cfg, const struct cr_store_usage *usage);

/* Revalidates (same generation, complete, unleased, not hard-pinned, with
 * a memory replica) and drops the object's memory replicas: an object with
 * a disk or local_disk replica stays, publishing UPDATE with those; one
 * with none is freed, publishing UPDATE with no replicas.  Returns true
 * when it was evicted. */
bool cr_store_evict(cr_store *store, uint32_t object_id, uint32_t generation, uint64_t now_ms);

/* Frees the space of zombie puts whose PutStart is older than
 * put_start_release_timeout_ms: parked replicas of preempted puts and
 * in-flight puts never ended.  Returns the bytes reclaimed. */
uint64_t cr_store_reclaim_discarded(cr_store *store, uint64_t now_ms);

/* One complete pass for callers that do not split policy and mechanism:
 * reclaims zombies, then samples/chooses/evicts in rounds until
 * bytes_to_free and objects_to_free are reached or no progress.  Returns
 * the bytes freed. */
uint64_t cr_store_evict_pass(cr_store *store, uint64_t now_ms, uint64_t *rng,
                             uint64_t bytes_to_free, uint64_t objects_to_free);

#endif
