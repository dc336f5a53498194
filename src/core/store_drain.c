/* The store core's side of drain jobs (see store_drain.h). */
#include "core/store_drain.h"

#include <assert.h>

#include "core/offset_alloc.h"
#include "core/store_internal.h"

int cr_store_segment_set_draining(cr_store *store, const char *name, bool on) {
    assert(store != NULL && name != NULL);
    int seg = cr_store_segment_lookup(store, name);
    if (seg < 0)
        return cr_store_fail(store, CR_ERR_SEGMENT_NOT_FOUND, "segment %s is not mounted", name);
    store->segments[seg].draining = on;
    return CR_OK;
}

bool cr_store_segment_draining(const cr_store *store, const char *name, bool *draining) {
    assert(store != NULL && name != NULL && draining != NULL);
    int seg = cr_store_segment_lookup(store, name);
    *draining = seg >= 0 && store->segments[seg].draining;
    return seg >= 0;
}

static const struct cr_store_obj *live(const cr_store *store, uint32_t id, uint32_t generation) {
    if (id >= store->slab_high) return NULL;
    const struct cr_store_obj *obj = cr_store_obj_at(store, id);
    return obj->state != CR_OBJ_FREE && obj->generation == generation ? obj : NULL;
}

/* The index of the object's memory replica on segment `seg`, or -1. */
static int replica_on(const struct cr_store_obj *obj, int seg) {
    for (uint32_t r = 0; seg >= 0 && r < obj->replica_count; r++)
        if (cr_store_rep_memory(&cr_store_reps(obj)[r]) && cr_store_reps(obj)[r].segment == (uint32_t)seg)
            return (int)r;
    return -1;
}

enum cr_store_drain_state cr_store_drain_state_of(const cr_store *store, uint32_t id,
                                                  uint32_t generation, const char *source,
                                                  const char *target, uint64_t now_ms,
                                                  uint64_t *size, bool *on_target) {
    assert(store != NULL && source != NULL && size != NULL && on_target != NULL);
    const struct cr_store_obj *obj = live(store, id, generation);
    *size = obj != NULL ? obj->size : 0;
    *on_target = false;
    if (obj == NULL || replica_on(obj, cr_store_segment_lookup(store, source)) < 0)
        return CR_DRAIN_DONE;
    int t = target != NULL ? replica_on(obj, cr_store_segment_lookup(store, target)) : -1;
    *on_target = t >= 0 && cr_store_reps(obj)[t].status == CR_REPLICA_COMPLETE;
    if (obj->tasks > 0) return CR_DRAIN_BUSY;
    if (obj->state != CR_OBJ_COMPLETE || obj->hard_pinned || cr_store_obj_leased(obj, now_ms))
        return CR_DRAIN_BLOCKED;
    return CR_DRAIN_MOVABLE;
}

bool cr_store_drain_next(const cr_store *store, const char *source, uint32_t *cursor,
                         uint32_t *id, uint32_t *generation) {
    assert(store != NULL && source != NULL && cursor != NULL && id != NULL && generation != NULL);
    int seg = cr_store_segment_lookup(store, source);
    for (; seg >= 0 && *cursor < store->slab_high; (*cursor)++) {
        const struct cr_store_obj *obj = cr_store_obj_at(store, *cursor);
        if (obj->state == CR_OBJ_FREE || replica_on(obj, seg) < 0) continue;
        *id = (*cursor)++;
        *generation = obj->generation;
        return true;
    }
    return false;
}

bool cr_store_drain_key(const cr_store *store, uint32_t id, uint32_t generation,
                        struct cr_store_key *out) {
    assert(store != NULL && out != NULL);
    const struct cr_store_obj *obj = live(store, id, generation);
    if (obj == NULL) return false;
    cr_store_key_make(cr_store_tenant_name(store, obj->tenant), obj->key, obj->key_len, out);
    return true;
}

const char *cr_store_drain_target(const cr_store *store, uint32_t id, const char *source,
                                  const char *const *targets, uint32_t n) {
    assert(store != NULL && source != NULL && (n == 0 || targets != NULL));
    const struct cr_store_obj *obj = cr_store_obj_at(store, id);
    int src = cr_store_segment_lookup(store, source);
    uint64_t need = cr_store_alloc_bytes(obj->size);
    const char *best = NULL;
    double best_use = 2.0;
    uint32_t count = n > 0 ? n : store->mounted_count;
    for (uint32_t i = 0; i < count; i++) {
        int seg = n > 0 ? cr_store_segment_lookup(store, targets[i]) : (int)store->mounted[i];
        if (seg < 0 || seg == src || replica_on(obj, seg) >= 0) continue;
        const struct cr_store_segment *s = &store->segments[seg];
        if (s->draining || s->size == 0 || s->size - s->used_bytes < need) continue;
        double use = (double)s->used_bytes / (double)s->size;
        if (use < best_use) best_use = use, best = s->name;
    }
    return best;
}
