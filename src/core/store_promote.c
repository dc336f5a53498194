/* Promotion from a store server's SSD back to memory, and the servers'
 * reports of their SSD (store_promote.h). */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "core/store_internal.h"
#include "core/store_restore.h"
#include "core/store_ssd_park.h"
#include "crescent/error.h"

struct promote_slot {
    uint32_t object_id_plus1; /* 0: empty */
    uint32_t generation;
    uint32_t hits;
    uint64_t window_start_ms;
};

struct promote_queued {
    uint32_t object_id, generation;
};

struct cr_store_promote {
    uint32_t hits_needed;
    uint64_t window_ms;
    uint32_t head, count; /* the queue, a ring */
    struct promote_queued queue[CR_STORE_PROMOTE_QUEUE];
    struct promote_slot slots[CR_STORE_PROMOTE_SLOTS];
};

int cr_store_set_promotion(cr_store *store, uint32_t hits, uint64_t window_ms) {
    assert(store != NULL);
    if (hits == 0) {
        cr_store_promote_free(store);
        return CR_OK;
    }
    if (window_ms == 0)
        return cr_store_fail(store, CR_ERR_INVALID_PARAMS,
                             "a promotion window of 0 ms counts no hits (give one >= 1 ms)");
    if (store->promote == NULL && (store->promote = calloc(1, sizeof(*store->promote))) == NULL)
        return cr_store_fail(store, CR_ERR_NOMEM, "out of memory");
    store->promote->hits_needed = hits;
    store->promote->window_ms = window_ms;
    return CR_OK;
}

void cr_store_promote_free(cr_store *store) {
    free(store->promote);
    store->promote = NULL;
}

/* The COMPLETE replica of `medium` (on `segment` unless CR_STORE_NO_SEGMENT),
 * or -1. */
static int complete_of(const struct cr_store_obj *obj, uint8_t medium, uint32_t segment) {
    for (uint32_t r = 0; r < obj->replica_count; r++) {
        const struct cr_store_replica *rep = &cr_store_reps(obj)[r];
        if (rep->medium == medium && rep->status == CR_REPLICA_COMPLETE &&
            (segment == CR_STORE_NO_SEGMENT || rep->segment == segment))
            return (int)r;
    }
    return -1;
}

/* A read that the SSD will serve: no readable memory replica, a local_disk
 * one.  Hot path: called for every GetReplicaList while promotion is on, so
 * it costs a scan of the object's replicas (already in cache) and, for SSD
 * reads only, one slot. */
void cr_store_promote_note(cr_store *store, uint32_t id, const struct cr_store_obj *obj,
                           uint64_t now_ms) {
    struct cr_store_promote *p = store->promote;
    if (p == NULL || obj->tasks > 0 ||
        complete_of(obj, CR_MEDIUM_MEMORY, CR_STORE_NO_SEGMENT) >= 0 ||
        complete_of(obj, CR_MEDIUM_LOCAL_DISK, CR_STORE_NO_SEGMENT) < 0)
        return;
    store->counters.promotion_hits++;
    struct promote_slot *s = &p->slots[id % CR_STORE_PROMOTE_SLOTS];
    if (s->object_id_plus1 != id + 1 || s->generation != obj->generation ||
        now_ms - s->window_start_ms >= p->window_ms)
        *s = (struct promote_slot){.object_id_plus1 = id + 1, .generation = obj->generation,
                                   .window_start_ms = now_ms};
    if (++s->hits < p->hits_needed) return;
    s->object_id_plus1 = 0; /* counted again from zero after this promotion */
    if (p->count == CR_STORE_PROMOTE_QUEUE) {
        store->counters.promotions_dropped++; /* begins lag far behind: a later hit asks again */
        return;
    }
    p->queue[(p->head + p->count++) % CR_STORE_PROMOTE_QUEUE] =
        (struct promote_queued){id, obj->generation};
}

bool cr_store_promote_next(cr_store *store, uint32_t *object_id, uint32_t *generation) {
    assert(store != NULL && object_id != NULL && generation != NULL);
    struct cr_store_promote *p = store->promote;
    if (p == NULL || p->count == 0) return false;
    *object_id = p->queue[p->head].object_id;
    *generation = p->queue[p->head].generation;
    p->head = (p->head + 1) % CR_STORE_PROMOTE_QUEUE;
    p->count--;
    return true;
}

/* Whether one more allocation of `bytes` keeps the pool below the eviction
 * high watermark: a promotion must not make memory evict something else. */
static bool below_watermark(const cr_store *store, uint64_t bytes) {
    double limit = (double)store->capacity_bytes * store->cfg.eviction_high_watermark_ratio;
    return (double)(store->used_bytes + bytes) < limit;
}

/* Allocates the target on segment `seg` when it can take it. */
static bool allocate_on(cr_store *store, uint32_t seg, uint64_t bytes,
                        struct cr_store_replica *out) {
    struct cr_store_segment *s = &store->segments[seg];
    if (!s->in_use || s->draining) return false;
    cr_offset_allocation a;
    if (cr_offset_alloc_alloc(s->alloc, bytes, &a) != CR_OK) return false;
    *out = (struct cr_store_replica){.offset = a.offset, .size = a.size, .node = a.node,
                                     .segment = (uint16_t)seg, .status = CR_REPLICA_PROCESSING,
                                     .medium = CR_MEDIUM_MEMORY};
    s->used_bytes += a.size;
    store->used_bytes += a.size;
    return true;
}

int cr_store_promote_begin(cr_store *store, uint32_t object_id, uint32_t generation,
                           uint64_t now_ms, struct cr_store_task_reservation *out,
                           struct cr_store_key *key) {
    assert(store != NULL && out != NULL && key != NULL);
    if (object_id >= store->slab_high) return CR_ERR_INVALID_PARAMS;
    struct cr_store_obj *obj = cr_store_obj_at(store, object_id);
    if (obj->state != CR_OBJ_COMPLETE || obj->generation != generation || obj->tasks > 0 ||
        !obj->has_checksum || obj->replica_count >= store->cfg.max_replicas_per_object ||
        complete_of(obj, CR_MEDIUM_MEMORY, CR_STORE_NO_SEGMENT) >= 0)
        return CR_ERR_INVALID_PARAMS;
    int src = complete_of(obj, CR_MEDIUM_LOCAL_DISK, CR_STORE_NO_SEGMENT);
    if (src < 0) return CR_ERR_INVALID_PARAMS;
    int rc = cr_store_obj_reps_reserve(store, obj, obj->replica_count + 1u);
    if (rc != CR_OK) return rc;
    uint64_t bytes = cr_store_alloc_bytes(obj->size);
    uint32_t home = cr_store_reps(obj)[src].segment;
    struct cr_store_replica target;
    bool placed = below_watermark(store, bytes) && allocate_on(store, home, bytes, &target);
    for (uint32_t i = 0; !placed && below_watermark(store, bytes) && i < store->mounted_count; i++)
        placed = store->mounted[i] != home && allocate_on(store, store->mounted[i], bytes, &target);
    if (!placed) {
        cr_store_obj_reps_shrink(obj); /* back as it was */
        store->counters.promotions_no_room++;
        return cr_store_fail(store, CR_ERR_NO_AVAILABLE_HANDLE,
                             "no segment has room for the promoted object below the eviction "
                             "high watermark");
    }
    /* Applied: nothing below fails. */
    const struct cr_store_replica *s = &cr_store_reps(obj)[src];
    out->ref = (struct cr_store_task_ref){
        .object_id = object_id, .generation = generation, .target_count = 1,
        .target_segment = {target.segment}, .target_offset = {target.offset},
        .source_segment = s->segment, .source_offset = s->offset, .size = obj->size};
    out->source_owner = store->segments[s->segment].owner;
    cr_store_reps(obj)[obj->replica_count++] = target;
    store->replica_count++;
    cr_store_tenant_charge(store, obj->tenant, bytes, true);
    obj->tasks++; /* was 0 */
    obj->task_reserved_ms = now_ms;
    struct cr_store_replica_list all;
    cr_store_obj_fill_list(store, obj, false, &all);
    assert(all.count == obj->replica_count);
    out->source = all.replicas[src];
    out->targets.count = 1;
    out->targets.replicas[0] = all.replicas[obj->replica_count - 1];
    out->has_checksum = true;
    out->checksum = obj->checksum;
    *key = (struct cr_store_key){.tenant = cr_store_tenant_name(store, obj->tenant),
                                 .key = obj->key, .key_len = obj->key_len, .hash = obj->hash};
    store->counters.promotions_started++;
    return CR_OK;
}

/* The live object a ref names, or NULL. */
static struct cr_store_obj *ref_object(const cr_store *store,
                                       const struct cr_store_task_ref *ref) {
    if (ref->object_id >= store->slab_high) return NULL;
    struct cr_store_obj *obj = cr_store_obj_at(store, ref->object_id);
    if (obj->state != CR_OBJ_COMPLETE || obj->generation != ref->generation) return NULL;
    return obj;
}

/* Whether the reservation a ref names still holds: the object live, its
 * target reserved.  A check that ended it, or an unmount, leaves it not. */
static bool reserved(const cr_store *store, const struct cr_store_task_ref *ref) {
    const struct cr_store_obj *obj = ref_object(store, ref);
    for (uint32_t r = 0; obj != NULL && r < obj->replica_count; r++) {
        const struct cr_store_replica *rep = &cr_store_reps(obj)[r];
        if (cr_store_rep_memory(rep) && rep->segment == ref->target_segment[0] &&
            rep->offset == ref->target_offset[0] && rep->status == CR_REPLICA_PROCESSING)
            return obj->tasks > 0;
    }
    return false;
}

int cr_store_promote_commit(cr_store *store, const struct cr_store_task_ref *ref,
                            uint64_t now_ms) {
    assert(store != NULL && ref != NULL && ref->target_count == 1);
    if (!reserved(store, ref)) {
        store->counters.promotions_failed++;
        return cr_store_fail(store, CR_ERR_OBJECT_NOT_FOUND,
                             "the promotion ended before its report (object removed, segment "
                             "unmounted)");
    }
    uint64_t lease_deadline_ms = 0;
    uint64_t bytes = ref_object(store, ref)->size; /* reserved(): the object is there */
    int rc = cr_store_task_commit(store, ref, false, now_ms, &lease_deadline_ms);
    if (rc == CR_OK) {
        store->counters.promotions_done++;
        store->counters.promotions_done_bytes += bytes;
    } else {
        store->counters.promotions_failed++;
    }
    return rc;
}

void cr_store_promote_rollback(cr_store *store, const struct cr_store_task_ref *ref) {
    assert(store != NULL && ref != NULL);
    if (reserved(store, ref)) cr_store_task_rollback(store, ref);
    store->counters.promotions_failed++;
}

int cr_store_promote_check(cr_store *store, const struct cr_store_task_ref *ref,
                           const struct cr_uuid *executor, bool *executor_known) {
    assert(store != NULL && ref != NULL && executor != NULL && executor_known != NULL);
    *executor_known = cr_store_client_known(store, executor);
    const struct cr_store_obj *obj = ref_object(store, ref);
    bool ok = obj != NULL && reserved(store, ref) && store->segments[ref->source_segment].in_use &&
              cr_uuid_equal(&store->segments[ref->source_segment].owner, executor);
    int src = ok ? complete_of(obj, CR_MEDIUM_LOCAL_DISK, ref->source_segment) : -1;
    if (src >= 0 && cr_store_reps(obj)[src].offset == ref->source_offset) return CR_OK;
    cr_store_promote_rollback(store, ref);
    return cr_store_fail(store, CR_ERR_OBJECT_NOT_FOUND,
                         "the promotion's SSD copy or its target went (a segment unmounted, "
                         "the object removed): nothing promoted");
}

/* ---- servers' reports ------------------------------------------------------ */

/* The mounted segment `name` owned by `client`, or a negative status. */
static int owned_segment(cr_store *store, const char *name, const struct cr_uuid *client) {
    int seg = name != NULL ? cr_store_segment_lookup(store, name) : -1;
    if (seg < 0)
        return cr_store_fail(store, CR_ERR_SEGMENT_NOT_FOUND, "segment %s is not mounted",
                             name != NULL ? name : "(none)");
    if (!cr_uuid_equal(&store->segments[seg].owner, client))
        return cr_store_fail(store, CR_ERR_ILLEGAL_CLIENT,
                             "segment %s is mounted by another client: only its owner reports "
                             "its SSD", name);
    return seg;
}

/* Creates the object with its one local_disk replica (a STORE event). */
static int recreate(cr_store *store, const struct cr_store_key *k, const char *segment_name,
                    const struct cr_uuid *client, uint64_t position, uint64_t size,
                    uint64_t checksum, uint64_t now_ms) {
    struct cr_store_restore_object o = {
        .tenant = k->tenant != NULL && k->tenant[0] != '\0' ? k->tenant : CR_STORE_DEFAULT_TENANT,
        .key = k->key, .key_len = k->key_len, .size = size, .has_checksum = true,
        .checksum = checksum, .owner = *client, .replica_count = 1,
        .replicas = {{.medium = CR_MEDIUM_LOCAL_DISK, .segment = segment_name,
                      .offset = position, .size = size}}};
    uint32_t dropped = 0;
    int rc = cr_store_restore_object(store, &o, now_ms, &dropped);
    if (rc != CR_OK) return rc;
    uint32_t id = cr_store_find_key(store, k);
    assert(id != CR_STORE_NONE);
    cr_store_obj_emit_store(store, cr_store_obj_at(store, id));
    return CR_OK;
}

int cr_store_local_disk_register(cr_store *store, const struct cr_store_key *k,
                                 const char *segment_name, const struct cr_uuid *client,
                                 uint64_t position, uint64_t size, uint64_t checksum,
                                 uint64_t now_ms, bool *created) {
    assert(store != NULL && k != NULL && client != NULL && created != NULL);
    *created = false;
    int seg = owned_segment(store, segment_name, client);
    if (seg < 0) return seg;
    uint32_t id = cr_store_find_key(store, k);
    if (id == CR_STORE_NONE) {
        /* Only a file the master parked when the segment went, of a key
         * neither put nor removed since; none of a segment it knows is of
         * a removed or replaced put (store_ssd_park.h). */
        if (cr_store_ssd_park_check(store, segment_name, k->hash, position, size, checksum) < 0)
            return cr_store_fail(store, CR_ERR_INVALID_PARAMS,
                                 "no object of this file: its key was removed or put again "
                                 "while the file sat on the server's SSD (the server deletes "
                                 "it)");
        int rc = recreate(store, k, segment_name, client, position, size, checksum, now_ms);
        if (rc == CR_OK) {
            *created = true;
            store->counters.local_disk_registered++;
        }
        return rc;
    }
    struct cr_store_obj *obj = cr_store_obj_at(store, id);
    if (obj->state != CR_OBJ_COMPLETE || obj->size != size ||
        (obj->has_checksum && obj->checksum != checksum))
        return cr_store_fail(store, CR_ERR_INVALID_PARAMS,
                             "the file holds another put of the key (size or checksum differ, "
                             "or a put of it is in flight)");
    int at = complete_of(obj, CR_MEDIUM_LOCAL_DISK, (uint32_t)seg);
    if (at >= 0 && cr_store_reps(obj)[at].offset == position) return CR_OK; /* known already */
    int rc = cr_store_add_local_disk_replica(store, k, segment_name, position, now_ms);
    if (rc == CR_OK) store->counters.local_disk_registered++;
    return rc;
}

int cr_store_local_disk_gone(cr_store *store, const struct cr_store_key *k,
                             const char *segment_name, const struct cr_uuid *client,
                             uint64_t position, bool *dropped) {
    assert(store != NULL && k != NULL && client != NULL && dropped != NULL);
    *dropped = false;
    int seg = owned_segment(store, segment_name, client);
    if (seg < 0) return seg;
    uint32_t id = cr_store_find_key(store, k);
    if (id == CR_STORE_NONE) return CR_OK; /* removed meanwhile: nothing points to the file */
    struct cr_store_obj *obj = cr_store_obj_at(store, id);
    int at = obj->state == CR_OBJ_COMPLETE
                 ? complete_of(obj, CR_MEDIUM_LOCAL_DISK, (uint32_t)seg) : -1;
    if (at < 0 || cr_store_reps(obj)[at].offset != position) return CR_OK;
    cr_store_tenant_charge(store, obj->tenant, cr_store_rep_charge(obj, (uint32_t)at), false);
    cr_store_replica_release(store, &cr_store_reps(obj)[at]);
    cr_store_reps(obj)[at] = cr_store_reps(obj)[--obj->replica_count];
    cr_store_obj_reps_shrink(obj);
    store->replica_count--;
    store->counters.local_disk_gone++;
    *dropped = true;
    if (obj->replica_count == 0) cr_store_obj_remove(store, id);
    else cr_store_obj_emit_update(store, obj);
    return CR_OK;
}
