/* Copy/move tasks on the store: reserve target replicas, commit or roll
 * them back, release a move's source once unleased (see store.h).
 *
 * A reserved replica is PROCESSING: replica lists and events list COMPLETE
 * replicas only, so nothing can read it before the commit.  The object
 * counts its reservations (obj->tasks) so that eviction skips it and a
 * removal without force is refused while an executor may be writing. */
#include <assert.h>

#include "core/store_internal.h"
#include "crescent/error.h"

/* The memory replica of `obj` on `segment`, or -1 (tasks copy memory to
 * memory; the other tiers are the clients' and servers' to move). */
static int replica_on(const struct cr_store_obj *obj, uint32_t segment) {
    for (uint32_t r = 0; r < obj->replica_count; r++)
        if (cr_store_reps(obj)[r].segment == segment && cr_store_rep_memory(&cr_store_reps(obj)[r]))
            return (int)r;
    return -1;
}

/* The reserved (or committed) replica a ref names, or -1. */
static int replica_at(const struct cr_store_obj *obj, uint32_t segment, uint64_t offset) {
    int r = replica_on(obj, segment);
    return r >= 0 && cr_store_reps(obj)[r].offset == offset ? r : -1;
}

/* The object a ref names, or NULL when it was freed (or replaced) since. */
static struct cr_store_obj *ref_object(cr_store *store, const struct cr_store_task_ref *ref) {
    if (ref->object_id >= store->slab_high) return NULL;
    struct cr_store_obj *obj = cr_store_obj_at(store, ref->object_id);
    if (obj->state != CR_OBJ_COMPLETE || obj->generation != ref->generation) return NULL;
    return obj;
}

static void drop_replica(cr_store *store, struct cr_store_obj *obj, uint32_t r) {
    cr_store_tenant_charge(store, obj->tenant, cr_store_rep_charge(obj, r), false);
    cr_store_replica_release(store, &cr_store_reps(obj)[r]);
    cr_store_reps(obj)[r] = cr_store_reps(obj)[--obj->replica_count];
    cr_store_obj_reps_shrink(obj); /* indexes stay: a shrink keeps replica 0 at 0 */
    store->replica_count--;
}

/* The source replica: the named segment's, or the first complete one. */
static int pick_source(cr_store *store, const struct cr_store_obj *obj, const char *source,
                       int *segment_out) {
    if (source == NULL || source[0] == '\0') {
        for (uint32_t r = 0; r < obj->replica_count; r++)
            if (cr_store_reps(obj)[r].status == CR_REPLICA_COMPLETE &&
                cr_store_rep_memory(&cr_store_reps(obj)[r])) {
                *segment_out = cr_store_reps(obj)[r].segment;
                return (int)r;
            }
        return cr_store_fail(store, CR_ERR_INVALID_PARAMS, "object has no complete replica");
    }
    int seg = cr_store_segment_lookup(store, source);
    if (seg < 0)
        return cr_store_fail(store, CR_ERR_SEGMENT_NOT_FOUND, "source segment %s is not mounted",
                             source);
    int r = replica_on(obj, (uint32_t)seg);
    if (r < 0 || cr_store_reps(obj)[r].status != CR_REPLICA_COMPLETE)
        return cr_store_fail(store, CR_ERR_INVALID_PARAMS,
                             "source segment %s holds no complete replica of the object",
                             source);
    *segment_out = seg;
    return r;
}

/* Every target: mounted, named once, not the source, holding no replica. */
static int check_targets(cr_store *store, const struct cr_store_obj *obj, int source_segment,
                         const char *const *targets, uint32_t n, uint32_t *segments) {
    if (n == 0) return cr_store_fail(store, CR_ERR_INVALID_PARAMS, "no target segment");
    if (obj->replica_count + n > store->cfg.max_replicas_per_object)
        return cr_store_fail(store, CR_ERR_INVALID_PARAMS,
                             "%u replicas plus %u targets exceed %u per object",
                             obj->replica_count, n, store->cfg.max_replicas_per_object);
    if (obj->tasks == UINT8_MAX)
        return cr_store_fail(store, CR_ERR_NOMEM, "object has 255 tasks in flight");
    for (uint32_t i = 0; i < n; i++) {
        int seg = cr_store_segment_lookup(store, targets[i]);
        if (seg < 0)
            return cr_store_fail(store, CR_ERR_SEGMENT_NOT_FOUND,
                                 "target segment %s is not mounted", targets[i]);
        if (seg == source_segment)
            return cr_store_fail(store, CR_ERR_INVALID_PARAMS,
                                 "target segment %s is the source", targets[i]);
        if (store->segments[seg].draining)
            return cr_store_fail(store, CR_ERR_INVALID_PARAMS,
                                 "target segment %s is being drained", targets[i]);
        if (replica_on(obj, (uint32_t)seg) >= 0)
            return cr_store_fail(store, CR_ERR_INVALID_PARAMS,
                                 "target segment %s already holds a replica of the object",
                                 targets[i]);
        for (uint32_t j = 0; j < i; j++)
            if (segments[j] == (uint32_t)seg)
                return cr_store_fail(store, CR_ERR_INVALID_PARAMS,
                                     "target segment %s is named twice", targets[i]);
        segments[i] = (uint32_t)seg;
    }
    return CR_OK;
}

/* Allocates every target or none. */
static int allocate_targets(cr_store *store, const struct cr_store_obj *obj,
                            const uint32_t *segments, uint32_t n, const char *const *targets,
                            struct cr_store_replica *out) {
    for (uint32_t i = 0; i < n; i++) {
        struct cr_store_segment *seg = &store->segments[segments[i]];
        cr_offset_allocation a;
        if (cr_offset_alloc_alloc(seg->alloc, cr_store_alloc_bytes(obj->size), &a) != CR_OK) {
            for (uint32_t j = 0; j < i; j++) cr_store_replica_release(store, &out[j]);
            return cr_store_fail(store, CR_ERR_NO_AVAILABLE_HANDLE,
                                 "target segment %s has no room for %llu bytes", targets[i],
                                 (unsigned long long)obj->size);
        }
        out[i] = (struct cr_store_replica){.offset = a.offset, .size = a.size, .node = a.node,
                                           .segment = (uint16_t)segments[i],
                                           .status = CR_REPLICA_PROCESSING};
        seg->used_bytes += a.size;
        store->used_bytes += a.size;
    }
    return CR_OK;
}

/* Fills a reservation's descriptors: replica `src` as the source, replicas
 * at[0..n) as the targets, in that order. */
static void describe(cr_store *store, const struct cr_store_obj *obj, int src, const int *at,
                     uint32_t n, struct cr_store_task_reservation *out) {
    const struct cr_store_replica *s = &cr_store_reps(obj)[src];
    out->source_owner = store->segments[s->segment].owner;
    struct cr_store_replica_list all;
    cr_store_obj_fill_list(store, obj, false, &all);
    assert(all.count == obj->replica_count);
    out->has_checksum = all.has_checksum;
    out->checksum = all.checksum;
    out->source = all.replicas[src];
    out->targets.count = n;
    for (uint32_t i = 0; i < n; i++) out->targets.replicas[i] = all.replicas[at[i]];
}

int cr_store_task_reserve(cr_store *store, const struct cr_store_key *key, const char *source,
                          const char *const *targets, uint32_t n, uint64_t now_ms,
                          struct cr_store_task_reservation *out) {
    assert(store != NULL && key != NULL && out != NULL && (targets != NULL || n == 0));
    int t = cr_store_tenant_lookup(store, key->tenant);
    uint32_t id = t < 0 ? CR_STORE_NONE
                        : cr_store_obj_find(store, (uint16_t)t, key->key, key->key_len, key->hash);
    if (id == CR_STORE_NONE) return cr_store_fail(store, CR_ERR_OBJECT_NOT_FOUND, "no such key");
    struct cr_store_obj *obj = cr_store_obj_at(store, id);
    if (obj->state != CR_OBJ_COMPLETE)
        return cr_store_fail(store, CR_ERR_OBJECT_NOT_READY, "put has not ended");
    int source_segment = -1;
    int src = pick_source(store, obj, source, &source_segment);
    if (src < 0) return src;
    uint32_t segments[CR_STORE_REPLICAS_MAX];
    struct cr_store_replica reserved[CR_STORE_REPLICAS_MAX];
    int rc = n > CR_STORE_REPLICAS_MAX
                 ? cr_store_fail(store, CR_ERR_INVALID_PARAMS, "more than %u targets",
                                 CR_STORE_REPLICAS_MAX)
                 : check_targets(store, obj, source_segment, targets, n, segments);
    if (rc == CR_OK) rc = cr_store_obj_reps_reserve(store, obj, obj->replica_count + n);
    if (rc == CR_OK) rc = allocate_targets(store, obj, segments, n, targets, reserved);
    if (rc != CR_OK) {
        cr_store_obj_reps_shrink(obj); /* as it was, if room was made */
        return rc;
    }
    /* Applied: nothing below fails. */
    const struct cr_store_replica *s = &cr_store_reps(obj)[src];
    out->ref = (struct cr_store_task_ref){.object_id = id, .generation = obj->generation,
                                          .target_count = n, .source_segment = s->segment,
                                          .source_offset = s->offset, .size = obj->size};
    for (uint32_t i = 0; i < n; i++) {
        cr_store_reps(obj)[obj->replica_count++] = reserved[i];
        out->ref.target_segment[i] = reserved[i].segment;
        out->ref.target_offset[i] = reserved[i].offset;
    }
    store->replica_count += n;
    cr_store_tenant_charge(store, obj->tenant, cr_store_alloc_bytes(obj->size) * n, true);
    obj->tasks++;
    obj->task_reserved_ms = now_ms;
    int at[CR_STORE_REPLICAS_MAX];
    for (uint32_t i = 0; i < n; i++) at[i] = (int)(obj->replica_count - n + i);
    describe(store, obj, src, at, n, out);
    return CR_OK;
}

/* Ends the reservation a ref holds on a live object. */
static void end_reservation(struct cr_store_obj *obj) {
    assert(obj->tasks > 0);
    obj->tasks--;
}

void cr_store_task_rollback(cr_store *store, const struct cr_store_task_ref *ref) {
    assert(store != NULL && ref != NULL);
    struct cr_store_obj *obj = ref_object(store, ref);
    if (obj == NULL) return; /* freed: its reserved space was parked */
    for (uint32_t i = 0; i < ref->target_count; i++) {
        int r = replica_at(obj, ref->target_segment[i], ref->target_offset[i]);
        if (r >= 0 && cr_store_reps(obj)[r].status == CR_REPLICA_PROCESSING)
            drop_replica(store, obj, (uint32_t)r);
    }
    end_reservation(obj);
    if (obj->replica_count == 0) cr_store_obj_free(store, ref->object_id);
}

/* Drops the source replica unless leased. */
static int release_source(cr_store *store, struct cr_store_obj *obj,
                          const struct cr_store_task_ref *ref, uint64_t now_ms,
                          uint64_t *lease_deadline_ms) {
    if (cr_store_obj_leased(obj, now_ms)) {
        *lease_deadline_ms = obj->lease_deadline_ms;
        return cr_store_fail(store, CR_ERR_OBJECT_HAS_LEASE, "source is leased until %llu ms",
                             (unsigned long long)obj->lease_deadline_ms);
    }
    int r = replica_at(obj, ref->source_segment, ref->source_offset);
    if (r >= 0) drop_replica(store, obj, (uint32_t)r);
    return CR_OK;
}

/* The live object a ref names, and where each reserved target sits in it
 * (at[i]).  Returns CR_OK, or CR_ERR_OBJECT_NOT_FOUND: the object is gone,
 * or a target's segment was unmounted (what is left of the reservation is
 * then rolled back). */
static int reserved_targets(cr_store *store, const struct cr_store_task_ref *ref,
                            struct cr_store_obj **obj_out, int *at) {
    struct cr_store_obj *obj = ref_object(store, ref);
    if (obj == NULL)
        return cr_store_fail(store, CR_ERR_OBJECT_NOT_FOUND, "object was removed during the task");
    for (uint32_t i = 0; i < ref->target_count; i++) {
        at[i] = replica_at(obj, ref->target_segment[i], ref->target_offset[i]);
        if (at[i] < 0 || cr_store_reps(obj)[at[i]].status != CR_REPLICA_PROCESSING) {
            cr_store_task_rollback(store, ref);
            return cr_store_fail(store, CR_ERR_OBJECT_NOT_FOUND,
                                 "a target segment was unmounted during the task");
        }
    }
    *obj_out = obj;
    return CR_OK;
}

int cr_store_task_commit(cr_store *store, const struct cr_store_task_ref *ref,
                         bool release_source_now, uint64_t now_ms, uint64_t *lease_deadline_ms) {
    assert(store != NULL && ref != NULL && lease_deadline_ms != NULL);
    struct cr_store_obj *obj;
    int at[CR_STORE_REPLICAS_MAX];
    int rc = reserved_targets(store, ref, &obj, at);
    if (rc != CR_OK) return rc;
    for (uint32_t i = 0; i < ref->target_count; i++)
        cr_store_reps(obj)[at[i]].status = CR_REPLICA_COMPLETE;
    end_reservation(obj);
    rc = release_source_now ? release_source(store, obj, ref, now_ms, lease_deadline_ms) : CR_OK;
    cr_store_obj_emit_update(store, obj);
    return rc;
}

int cr_store_task_release_source(cr_store *store, const struct cr_store_task_ref *ref,
                                 uint64_t now_ms, uint64_t *lease_deadline_ms) {
    assert(store != NULL && ref != NULL && lease_deadline_ms != NULL);
    struct cr_store_obj *obj = ref_object(store, ref);
    if (obj == NULL)
        return cr_store_fail(store, CR_ERR_OBJECT_NOT_FOUND, "object was removed during the task");
    uint32_t before = obj->replica_count;
    int rc = release_source(store, obj, ref, now_ms, lease_deadline_ms);
    if (rc == CR_OK && obj->replica_count != before) cr_store_obj_emit_update(store, obj);
    return rc;
}

/* Parks a reserved replica's space until task_timeout_ms from now (the
 * parking table counts put_start_release_timeout_ms from the entry's time),
 * or frees it when the table is full, as a forced removal does. */
static void park_for_task(cr_store *store, const struct cr_store_replica *rep, uint64_t now_ms) {
    uint64_t release = store->cfg.put_start_release_timeout_ms;
    uint64_t task = store->cfg.task_timeout_ms;
    if (store->discarded_count < store->cfg.max_discarded)
        store->discarded[store->discarded_count++] =
            (struct cr_store_discarded){now_ms + (task > release ? task - release : 0), *rep, 0};
    else
        cr_store_replica_release(store, rep);
}

/* Reserves every target again on its own segment: the new space replaces
 * the old in the object, the old is parked.  Changes nothing on error. */
static int rereserve_targets(cr_store *store, struct cr_store_obj *obj,
                             struct cr_store_task_ref *ref, const int *at, uint64_t now_ms) {
    uint32_t n = ref->target_count;
    const char *names[CR_STORE_REPLICAS_MAX] = {0};
    struct cr_store_replica fresh[CR_STORE_REPLICAS_MAX];
    for (uint32_t i = 0; i < n; i++) names[i] = store->segments[ref->target_segment[i]].name;
    int rc = allocate_targets(store, obj, ref->target_segment, n, names, fresh);
    if (rc != CR_OK) return rc;
    for (uint32_t i = 0; i < n; i++) {
        park_for_task(store, &cr_store_reps(obj)[at[i]], now_ms);
        cr_store_reps(obj)[at[i]] = fresh[i];
        ref->target_offset[i] = fresh[i].offset;
    }
    obj->task_reserved_ms = now_ms;
    return CR_OK;
}

int cr_store_task_recheck(cr_store *store, struct cr_store_task_ref *ref,
                          const struct cr_uuid *executor, uint64_t now_ms,
                          struct cr_store_task_recheck *out) {
    assert(store != NULL && ref != NULL && executor != NULL && out != NULL);
    assert(ref->target_count > 0 && ref->target_count <= CR_STORE_REPLICAS_MAX);
    *out = (struct cr_store_task_recheck){.executor_known = cr_store_client_known(store, executor)};
    struct cr_store_obj *obj;
    int at[CR_STORE_REPLICAS_MAX];
    int rc = reserved_targets(store, ref, &obj, at);
    if (rc != CR_OK) return rc;
    int src = replica_at(obj, ref->source_segment, ref->source_offset);
    if (src >= 0 && cr_store_reps(obj)[src].status == CR_REPLICA_COMPLETE &&
        cr_uuid_equal(&store->segments[ref->source_segment].owner, executor))
        return CR_OK;
    out->source_lost = true;
    /* Never back to the same executor: a report names only the task, so its
     * late report of the old assignment could commit targets not written. */
    int next = -1;
    for (uint32_t r = 0; r < obj->replica_count && next < 0; r++)
        if (cr_store_reps(obj)[r].status == CR_REPLICA_COMPLETE && cr_store_rep_memory(&cr_store_reps(obj)[r]) &&
            !cr_uuid_equal(&store->segments[cr_store_reps(obj)[r].segment].owner, executor))
            next = (int)r;
    rc = next < 0 ? cr_store_fail(store, CR_ERR_OBJECT_NOT_FOUND,
                                  "no other client holds a complete replica to copy from")
                  : rereserve_targets(store, obj, ref, at, now_ms);
    if (rc != CR_OK) {
        cr_store_task_rollback(store, ref);
        return rc;
    }
    ref->source_segment = cr_store_reps(obj)[next].segment;
    ref->source_offset = cr_store_reps(obj)[next].offset;
    out->moved = true;
    out->res.ref = *ref;
    describe(store, obj, next, at, ref->target_count, &out->res);
    return CR_OK;
}
