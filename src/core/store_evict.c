/* Eviction mechanism and zombie-put reclamation.
 *
 * Policy and mechanism are split so that the lease/eviction actor can decide
 * and the segment manager apply: sampling reads the store, cr_evict_choose is
 * a pure function over samples, and cr_store_evict revalidates each victim
 * (generation, lease, pin, state) at the moment it is applied, because leases
 * may have been granted between the decision and the application. */
#include <assert.h>
#include <stdlib.h>

#include "core/store_internal.h"
#include "crescent/error.h"

#define SAMPLE_DRAWS_PER_RESULT 8u
#define PASS_SAMPLE_SIZE 64u
#define PASS_VICTIMS_PER_ROUND 16u /* the oldest quarter of each sample */
#define PASS_STALL_ROUNDS 4u
#define ROOM_SAMPLE_SIZE 16u /* a PutStart's own eviction at a full table */

/* Bytes the object holds in the memory pool (the other tiers' replicas
 * hold none). */
static uint64_t obj_bytes(const struct cr_store_obj *obj) {
    uint64_t bytes = 0;
    for (uint32_t r = 0; r < obj->replica_count; r++)
        if (cr_store_rep_memory(&cr_store_reps(obj)[r])) bytes += cr_store_reps(obj)[r].size;
    return bytes;
}

static bool has_memory(const struct cr_store_obj *obj) {
    for (uint32_t r = 0; r < obj->replica_count; r++)
        if (cr_store_rep_memory(&cr_store_reps(obj)[r])) return true;
    return false;
}

/* An object with no memory replica frees no pool space: the file tier's
 * own eviction deals with it. */
static bool evictable(const struct cr_store_obj *obj, uint64_t now_ms) {
    return obj->state == CR_OBJ_COMPLETE && !obj->hard_pinned &&
           !cr_store_obj_busy(obj, now_ms) && has_memory(obj);
}

/* Drops the memory replicas of an object that has replicas elsewhere and
 * publishes its remaining ones; frees an object left with none. */
static void evict_memory(cr_store *store, uint32_t id) {
    struct cr_store_obj *obj = cr_store_obj_at(store, id);
    for (uint32_t r = 0; r < obj->replica_count;) {
        if (!cr_store_rep_memory(&cr_store_reps(obj)[r])) {
            r++;
            continue;
        }
        cr_store_replica_release(store, &cr_store_reps(obj)[r]);
        cr_store_reps(obj)[r] = cr_store_reps(obj)[--obj->replica_count];
        store->replica_count--;
    }
    cr_store_obj_reps_shrink(obj);
    if (obj->replica_count == 0) {
        cr_store_obj_remove(store, id);
        return;
    }
    cr_store_obj_emit_update(store, obj);
}

/* The sampling; keep_offloadable leaves out (and notes in *offloadable_seen)
 * the objects an SSD could keep. */
static size_t sample(const cr_store *store, uint64_t now_ms, uint64_t *rng, size_t sample_size,
                     bool keep_offloadable, bool *offloadable_seen,
                     struct cr_evict_candidate *out) {
    if (store->slab_high == 0) return 0;
    size_t count = 0;
    size_t draws = sample_size * SAMPLE_DRAWS_PER_RESULT;
    for (size_t d = 0; d < draws && count < sample_size; d++) {
        uint32_t id = (uint32_t)(cr_store_rng_next(rng) % store->slab_high);
        const struct cr_store_obj *obj = cr_store_obj_at(store, id);
        if (!evictable(obj, now_ms)) continue;
        if (keep_offloadable && cr_store_offload_wanted(store, obj)) {
            *offloadable_seen = true;
            continue;
        }
        out[count++] = (struct cr_evict_candidate){
            .object_id = id, .generation = obj->generation, .size_bytes = obj_bytes(obj),
            .last_access_ms = obj->last_access_ms,
            .soft_pinned = cr_store_obj_soft_pinned(store, obj, now_ms)};
    }
    return count;
}

size_t cr_store_sample_eviction_candidates(const cr_store *store, uint64_t now_ms,
                                           uint64_t *rng, size_t sample_size,
                                           struct cr_evict_candidate *out) {
    assert(store != NULL && rng != NULL && *rng != 0);
    assert(out != NULL || sample_size == 0);
    return sample(store, now_ms, rng, sample_size, false, NULL, out);
}

static int by_id(const void *a, const void *b) {
    const struct cr_evict_candidate *x = a, *y = b;
    return (x->object_id > y->object_id) - (x->object_id < y->object_id);
}

/* Non-soft-pinned first, then least recently used first. */
static int by_preference(const void *a, const void *b) {
    const struct cr_evict_candidate *x = a, *y = b;
    if (x->soft_pinned != y->soft_pinned) return x->soft_pinned ? 1 : -1;
    return (x->last_access_ms > y->last_access_ms) - (x->last_access_ms < y->last_access_ms);
}

size_t cr_evict_choose(struct cr_evict_candidate *pool, size_t n, uint64_t bytes_to_free,
                       uint64_t objects_to_free, bool allow_soft_pinned) {
    assert(pool != NULL || n == 0);
    if (n == 0 || (bytes_to_free == 0 && objects_to_free == 0)) return 0;
    qsort(pool, n, sizeof(*pool), by_id);
    size_t unique = 1;
    for (size_t i = 1; i < n; i++) {
        if (pool[i].object_id != pool[unique - 1].object_id) pool[unique++] = pool[i];
    }
    qsort(pool, unique, sizeof(*pool), by_preference);
    uint64_t total = 0;
    size_t k = 0;
    while (k < unique && (total < bytes_to_free || k < objects_to_free)) {
        if (pool[k].soft_pinned && !allow_soft_pinned) break;
        total += pool[k].size_bytes;
        k++;
    }
    assert(k <= unique);
    return k;
}

uint64_t cr_evict_bytes_to_free(const cr_store_config *cfg, const struct cr_store_usage *usage,
                                bool alloc_failed) {
    assert(cfg != NULL && usage != NULL);
    if (usage->capacity_bytes == 0) return 0;
    if (!alloc_failed && usage->ratio < cfg->eviction_high_watermark_ratio) return 0;
    double ratio = cfg->eviction_ratio;
    double over = usage->ratio - cfg->eviction_high_watermark_ratio + cfg->eviction_ratio;
    if (over > ratio) ratio = over;
    uint64_t bytes = (uint64_t)(ratio * (double)usage->capacity_bytes + 0.5);
    return bytes > 0 ? bytes : 1;
}

uint64_t cr_evict_objects_to_free(const cr_store_config *cfg, const struct cr_store_usage *usage) {
    assert(cfg != NULL && usage != NULL);
    if (usage->objects == 0 || usage->count_ratio < cfg->eviction_high_watermark_ratio) return 0;
    double ratio = cfg->eviction_ratio;
    double over = usage->count_ratio - cfg->eviction_high_watermark_ratio + cfg->eviction_ratio;
    if (over > ratio) ratio = over;
    uint64_t objects = (uint64_t)(ratio * (double)usage->objects + 0.5);
    if (objects > usage->objects) objects = usage->objects;
    return objects > 0 ? objects : 1;
}

bool cr_store_evict(cr_store *store, uint32_t object_id, uint32_t generation, uint64_t now_ms) {
    assert(store != NULL);
    if (object_id >= store->slab_high) return false;
    const struct cr_store_obj *obj = cr_store_obj_at(store, object_id);
    if (obj->generation != generation || !evictable(obj, now_ms)) return false;
    store->counters.evictions++;
    store->counters.evicted_bytes += obj_bytes(obj);
    bool elsewhere = false;
    for (uint32_t r = 0; r < obj->replica_count; r++)
        elsewhere = elsewhere || !cr_store_rep_memory(&cr_store_reps(obj)[r]);
    if (elsewhere) evict_memory(store, object_id);
    else cr_store_obj_remove(store, object_id);
    return true;
}

static bool released(uint64_t put_start_ms, uint64_t now_ms, uint64_t timeout_ms) {
    return now_ms >= put_start_ms && now_ms - put_start_ms >= timeout_ms;
}

uint64_t cr_store_reclaim_discarded(cr_store *store, uint64_t now_ms) {
    assert(store != NULL);
    uint64_t timeout = store->cfg.put_start_release_timeout_ms;
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < store->discarded_count;) {
        struct cr_store_discarded *d = &store->discarded[i];
        if (!released(d->put_start_ms, now_ms, timeout)) {
            i++;
            continue;
        }
        bytes += d->replica.size;
        store->counters.discards_released += d->put == CR_STORE_DISCARD_PUT_FIRST;
        cr_store_replica_release(store, &d->replica);
        *d = store->discarded[--store->discarded_count];
    }
    /* The in-flight list is in PutStart order, so the old ones lead it. */
    while (store->inflight_head != CR_STORE_NONE) {
        uint32_t id = store->inflight_head;
        const struct cr_store_obj *obj = cr_store_obj_at(store, id);
        if (!released(obj->put_start_ms, now_ms, timeout)) break;
        bytes += obj_bytes(obj);
        cr_store_obj_free(store, id);
    }
    store->counters.zombie_bytes_reclaimed += bytes;
    return bytes;
}

void cr_store_discarded_drop_segment(cr_store *store, uint32_t segment) {
    assert(store != NULL);
    for (uint32_t i = 0; i < store->discarded_count;) {
        struct cr_store_discarded *d = &store->discarded[i];
        if (d->replica.segment != segment) {
            i++;
            continue;
        }
        cr_store_replica_release(store, &d->replica);
        *d = store->discarded[--store->discarded_count];
    }
}

/* What a pass has freed so far, and what it must. */
struct pass_progress {
    uint64_t bytes, objects;
    uint64_t bytes_target, objects_target;
};

static bool pass_done(const struct pass_progress *p) {
    return p->bytes >= p->bytes_target && p->objects >= p->objects_target;
}

static uint64_t left(uint64_t done, uint64_t target) {
    return done < target ? target - done : 0;
}

/* One phase of a pass: rounds of sample → choose → evict until the targets
 * are met or sampling stops finding victims. */
static void evict_phase(cr_store *store, uint64_t now_ms, uint64_t *rng,
                        struct pass_progress *p, bool allow_soft_pinned) {
    struct cr_evict_candidate pool[PASS_SAMPLE_SIZE];
    uint32_t stall = 0;
    uint64_t max_rounds = (uint64_t)store->object_count + PASS_SAMPLE_SIZE;
    for (uint64_t round = 0; round < max_rounds && !pass_done(p); round++) {
        size_t n = cr_store_sample_eviction_candidates(store, now_ms, rng, PASS_SAMPLE_SIZE, pool);
        size_t k = cr_evict_choose(pool, n, left(p->bytes, p->bytes_target),
                                   left(p->objects, p->objects_target), allow_soft_pinned);
        if (k > PASS_VICTIMS_PER_ROUND) k = PASS_VICTIMS_PER_ROUND;
        uint64_t before = p->objects;
        for (size_t i = 0; i < k; i++) {
            if (!cr_store_evict(store, pool[i].object_id, pool[i].generation, now_ms)) continue;
            p->bytes += pool[i].size_bytes;
            p->objects++;
        }
        stall = (p->objects == before) ? stall + 1 : 0;
        if (stall == PASS_STALL_ROUNDS) break;
    }
}

uint64_t cr_store_evict_pass(cr_store *store, uint64_t now_ms, uint64_t *rng,
                             uint64_t bytes_to_free, uint64_t objects_to_free) {
    assert(store != NULL && rng != NULL);
    struct pass_progress p = {.bytes_target = bytes_to_free, .objects_target = objects_to_free};
    p.bytes = cr_store_reclaim_discarded(store, now_ms);
    if (!pass_done(&p)) evict_phase(store, now_ms, rng, &p, false);
    if (!pass_done(&p) && store->cfg.allow_evict_soft_pinned_objects)
        evict_phase(store, now_ms, rng, &p, true);
    return p.bytes;
}

/* A PutStart at a full object table, or finding no segment with room,
 * evicts one object itself: the leases actor's passes keep usage below the
 * watermarks, but a burst of puts between two passes would otherwise be
 * refused.  The oldest of a small sample goes, soft-pinned ones only when
 * the setting allows and no other was drawn; its UPDATE event is published
 * like any eviction's.  For segment room (keep_offloadable) an object an
 * SSD could keep is never drawn: this path cannot file the offload task
 * (the segments actor does, when the put's refusal asks for a pass), and
 * dropping it would lose what the pass would have kept.  At a full object
 * table an offload frees no slot, so there it is drawn like any other. */
bool cr_store_evict_for_room(cr_store *store, uint64_t now_ms, bool keep_offloadable,
                             bool *offloadable_seen) {
    assert(store != NULL);
    struct cr_evict_candidate pool[ROOM_SAMPLE_SIZE];
    bool seen = false;
    size_t n = sample(store, now_ms, &store->rng, ROOM_SAMPLE_SIZE, keep_offloadable, &seen, pool);
    if (offloadable_seen != NULL) *offloadable_seen = *offloadable_seen || seen;
    size_t k = cr_evict_choose(pool, n, 0, 1, store->cfg.allow_evict_soft_pinned_objects);
    for (size_t i = 0; i < k; i++) {
        if (!cr_store_evict(store, pool[i].object_id, pool[i].generation, now_ms)) continue;
        store->counters.room_evictions++;
        return true;
    }
    return false;
}
