/* Offload of evicted objects to a store server's SSD (store_offload.h). */
#include <assert.h>

#include "core/store_internal.h"
#include "crescent/error.h"

/* The object a ref names, or NULL when it was freed or replaced since. */
static struct cr_store_obj *ref_object(const cr_store *store,
                                       const struct cr_store_task_ref *ref) {
    if (ref->object_id >= store->slab_high) return NULL;
    struct cr_store_obj *obj = cr_store_obj_at(store, ref->object_id);
    if (obj->state != CR_OBJ_COMPLETE || obj->generation != ref->generation) return NULL;
    return obj;
}

/* The COMPLETE memory replica at (segment, offset), or -1. */
static int memory_at(const struct cr_store_obj *obj, uint32_t segment, uint64_t offset) {
    for (uint32_t r = 0; r < obj->replica_count; r++) {
        const struct cr_store_replica *rep = &cr_store_reps(obj)[r];
        if (cr_store_rep_memory(rep) && rep->segment == segment && rep->offset == offset &&
            rep->status == CR_REPLICA_COMPLETE)
            return (int)r;
    }
    return -1;
}

static bool has_local_disk_on(const struct cr_store_obj *obj, uint32_t segment) {
    for (uint32_t r = 0; r < obj->replica_count; r++)
        if (cr_store_reps(obj)[r].medium == CR_MEDIUM_LOCAL_DISK && cr_store_reps(obj)[r].segment == segment)
            return true;
    return false;
}

/* An offload ends (any way): the memory replica it frees (one allocation)
 * no longer counts as pending. */
static void pending_done(cr_store *store, const struct cr_store_task_ref *ref) {
    uint64_t bytes = cr_store_alloc_bytes(ref->size);
    store->offload_pending_bytes =
        store->offload_pending_bytes > bytes ? store->offload_pending_bytes - bytes : 0;
}

/* The memory replica to offload: the first COMPLETE one whose segment's
 * owner has an SSD tier that can hold the object, without a local_disk
 * replica there already; or -1. */
static int pick_source(const cr_store *store, const struct cr_store_obj *obj) {
    for (uint32_t r = 0; r < obj->replica_count; r++) {
        const struct cr_store_replica *rep = &cr_store_reps(obj)[r];
        if (!cr_store_rep_memory(rep) || rep->status != CR_REPLICA_COMPLETE) continue;
        const struct cr_store_segment *seg = &store->segments[rep->segment];
        if (seg->ssd_capacity >= obj->size && !has_local_disk_on(obj, rep->segment))
            return (int)r;
    }
    return -1;
}

bool cr_store_offload_wanted(const cr_store *store, const struct cr_store_obj *obj) {
    assert(store != NULL && obj != NULL);
    for (uint32_t r = 0; r < obj->replica_count; r++)
        if (!cr_store_rep_memory(&cr_store_reps(obj)[r])) return false; /* eviction keeps it */
    return obj->has_checksum && obj->replica_count < store->cfg.max_replicas_per_object &&
           pick_source(store, obj) >= 0;
}

int cr_store_offload_begin(cr_store *store, uint32_t object_id, uint32_t generation,
                           uint64_t now_ms, struct cr_store_task_reservation *out,
                           struct cr_store_key *key) {
    assert(store != NULL && out != NULL && key != NULL);
    if (object_id >= store->slab_high) return CR_ERR_INVALID_PARAMS;
    struct cr_store_obj *obj = cr_store_obj_at(store, object_id);
    if (obj->generation != generation || obj->state != CR_OBJ_COMPLETE || obj->hard_pinned ||
        cr_store_obj_busy(obj, now_ms) || !obj->has_checksum ||
        obj->replica_count >= store->cfg.max_replicas_per_object)
        return CR_ERR_INVALID_PARAMS;
    int src = pick_source(store, obj);
    if (src < 0) return CR_ERR_INVALID_PARAMS;
    const struct cr_store_replica *s = &cr_store_reps(obj)[src];
    *out = (struct cr_store_task_reservation){
        .ref = {.object_id = object_id, .generation = generation, .target_count = 0,
                .source_segment = s->segment, .source_offset = s->offset, .size = obj->size},
        .source_owner = store->segments[s->segment].owner};
    struct cr_store_replica_list all;
    cr_store_obj_fill_list(store, obj, false, &all);
    assert(all.count == obj->replica_count);
    out->source = all.replicas[src];
    out->has_checksum = true;
    out->checksum = obj->checksum;
    *key = (struct cr_store_key){.tenant = cr_store_tenant_name(store, obj->tenant),
                                 .key = obj->key, .key_len = obj->key_len, .hash = obj->hash};
    store->offload_pending_bytes += cr_store_alloc_bytes(obj->size);
    obj->tasks++; /* < UINT8_MAX: busy() was false, so it was 0 */
    obj->task_reserved_ms = now_ms;
    store->counters.offloads_started++;
    return CR_OK;
}

/* Drops every memory replica of obj (eviction's part of the commit).  The
 * tenant is charged per memory replica (cr_store_rep_charge; an object's
 * removal uncharges what cr_store_obj_charge says), so each one dropped is
 * uncharged here; the local_disk replica added charges nothing. */
static void drop_memory(cr_store *store, struct cr_store_obj *obj) {
    for (uint32_t r = 0; r < obj->replica_count;) {
        if (!cr_store_rep_memory(&cr_store_reps(obj)[r])) {
            r++;
            continue;
        }
        store->counters.evicted_bytes += cr_store_reps(obj)[r].size;
        cr_store_tenant_charge(store, obj->tenant, cr_store_alloc_bytes(obj->size), false);
        cr_store_replica_release(store, &cr_store_reps(obj)[r]);
        cr_store_reps(obj)[r] = cr_store_reps(obj)[--obj->replica_count];
        store->replica_count--;
    }
}

/* Replicas that are not in the memory pool. */
static uint32_t count_off_memory(const struct cr_store_obj *obj) {
    uint32_t n = 0;
    for (uint32_t r = 0; r < obj->replica_count; r++)
        n += !cr_store_rep_memory(&cr_store_reps(obj)[r]);
    return n;
}

int cr_store_offload_commit(cr_store *store, const struct cr_store_task_ref *ref,
                            uint64_t position, uint64_t now_ms) {
    assert(store != NULL && ref != NULL && ref->target_count == 0);
    pending_done(store, ref);
    struct cr_store_obj *obj = ref_object(store, ref);
    if (obj == NULL) {
        store->counters.offloads_failed++;
        return cr_store_fail(store, CR_ERR_OBJECT_NOT_FOUND,
                             "object was removed during the offload");
    }
    assert(obj->tasks > 0);
    obj->tasks--;
    if (memory_at(obj, ref->source_segment, ref->source_offset) < 0 ||
        obj->replica_count >= CR_STORE_REPLICAS_MAX) {
        store->counters.offloads_failed++;
        return cr_store_fail(store, CR_ERR_OBJECT_NOT_FOUND,
                             "the source segment was unmounted during the offload");
    }
    struct cr_store_replica rep = {.offset = position, .size = obj->size,
                                   .segment = (uint16_t)ref->source_segment,
                                   .status = CR_REPLICA_COMPLETE,
                                   .medium = CR_MEDIUM_LOCAL_DISK};
    /* The memory replicas go first when they go at all: the usual object
     * (one memory replica) then ends with its one local_disk replica inline,
     * and never takes an overflow array on the way. */
    bool drop = !cr_store_obj_leased(obj, now_ms);
    uint32_t after = (drop ? count_off_memory(obj) : obj->replica_count) + 1u;
    if (cr_store_obj_reps_reserve(store, obj, after) != CR_OK) {
        store->counters.offloads_failed++;
        return CR_ERR_NOMEM; /* the object unchanged; the message is set */
    }
    if (drop) {
        drop_memory(store, obj);
        store->counters.evictions++;
    }
    cr_store_reps(obj)[obj->replica_count++] = rep;
    store->replica_count++;
    store->medium_replicas[CR_MEDIUM_LOCAL_DISK]++;
    store->medium_bytes[CR_MEDIUM_LOCAL_DISK] += rep.size;
    store->counters.offloads_done++;
    cr_store_obj_reps_shrink(obj); /* the room reserved may have been more than needed */
    cr_store_obj_emit_update(store, obj);
    return CR_OK;
}

void cr_store_offload_rollback(cr_store *store, const struct cr_store_task_ref *ref) {
    assert(store != NULL && ref != NULL && ref->target_count == 0);
    pending_done(store, ref);
    cr_store_task_rollback(store, ref);
    store->counters.offloads_failed++;
}

int cr_store_offload_check(cr_store *store, const struct cr_store_task_ref *ref,
                           const struct cr_uuid *executor, bool *executor_known) {
    assert(store != NULL && ref != NULL && executor != NULL && executor_known != NULL);
    *executor_known = cr_store_client_known(store, executor);
    const struct cr_store_obj *obj = ref_object(store, ref);
    if (obj != NULL && memory_at(obj, ref->source_segment, ref->source_offset) >= 0 &&
        cr_uuid_equal(&store->segments[ref->source_segment].owner, executor))
        return CR_OK;
    pending_done(store, ref);
    cr_store_task_rollback(store, ref);
    store->counters.offloads_failed++;
    return cr_store_fail(store, CR_ERR_OBJECT_NOT_FOUND,
                         "the server offloading the object lost its segment (or the object "
                         "went): nothing offloaded");
}

bool cr_store_offload_live(const cr_store *store, const struct cr_store_task_ref *ref) {
    assert(store != NULL && ref != NULL);
    const struct cr_store_obj *obj = ref_object(store, ref);
    return obj != NULL && memory_at(obj, ref->source_segment, ref->source_offset) >= 0;
}
