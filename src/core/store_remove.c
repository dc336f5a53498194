/* Store objects: removal (Remove, RemoveAll), replicas dropped with their
 * segment or client, and BatchReplicaClear. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "core/store_internal.h"
#include "core/store_ssd_park.h"
#include "crescent/error.h"

int cr_store_remove(cr_store *store, const char *tenant, const char *key, uint32_t key_len,
                    bool force, uint64_t now_ms) {
    if (key == NULL) return cr_store_not_found(store);
    struct cr_store_key k;
    cr_store_key_make(tenant, key, key_len, &k);
    return cr_store_remove_k(store, &k, force, now_ms);
}

int cr_store_remove_k(cr_store *store, const struct cr_store_key *key, bool force,
                      uint64_t now_ms) {
    assert(store != NULL && key != NULL);
    uint32_t id = cr_store_find_key(store, key);
    if (id == CR_STORE_NONE) {
        /* Gone with a server's segment and parked: the removal still counts,
         * its file must not bring the key back (store_ssd_park.h). */
        cr_store_ssd_park_forget(store, key->hash);
        return cr_store_not_found(store);
    }
    const struct cr_store_obj *obj = cr_store_obj_at(store, id);
    if (!force && obj->state == CR_OBJ_INFLIGHT)
        return cr_store_fail(store, CR_ERR_OBJECT_NOT_READY, "put has not ended");
    if (!force && cr_store_obj_leased(obj, now_ms))
        return cr_store_fail(store, CR_ERR_OBJECT_HAS_LEASE,
                             "object is leased: the lease expires in %.1f s (or remove with force)",
                             (double)(obj->lease_deadline_ms - now_ms) / 1000.0);
    if (!force && obj->tasks > 0)
        return cr_store_fail(store, CR_ERR_OBJECT_HAS_LEASE,
                             "object has %u copy/move task(s) in flight (or remove with force)",
                             obj->tasks);
    cr_store_obj_remove(store, id);
    return CR_OK;
}

static void remove_all_event(cr_store *store, int t, uint64_t removed) {
    if (store->sink.on_event == NULL) return;
    struct cr_store_change ev = {.kind = CR_STORE_CHANGE_REMOVE_ALL,
                                .tenant = (t >= 0) ? cr_store_tenant_name(store, (uint16_t)t)
                                                   : NULL,
                                .removed_count = removed};
    store->sink.on_event(store->sink.ctx, &ev);
}

/* Starts a run; `announce`: the REMOVE_ALL event goes now (the sliced form)
 * rather than at the end with the count (the whole call). */
static void remove_all_start(cr_store *store, const char *tenant, bool force, uint64_t now_ms,
                             bool announce, struct cr_store_remove_all_run *run) {
    assert(store != NULL && run != NULL);
    *run = (struct cr_store_remove_all_run){.force = force, .begin_ms = now_ms, .tenant = -1};
    run->tenant = (tenant != NULL) ? cr_store_tenant_lookup(store, tenant) : -1;
    if (tenant != NULL && run->tenant < 0) {
        run->done = true; /* an unknown tenant has nothing to remove */
        return;
    }
    /* Holds the tenant across the walk: its name goes into the event after
     * its last object may have gone. */
    if (run->tenant >= 0) cr_store_tenant_ref(store, (uint16_t)run->tenant);
    cr_store_ssd_park_forget_all(store); /* files parked hold no tenant: all of them */
    if (announce) remove_all_event(store, run->tenant, 0);
    else run->begin_ms = UINT64_MAX; /* no object is newer than the event */
}

static void remove_all_release(cr_store *store, struct cr_store_remove_all_run *run) {
    if (run->tenant >= 0) cr_store_tenant_unref(store, (uint16_t)run->tenant);
    run->tenant = -1;
    run->done = true;
}

static bool remove_all_walk(cr_store *store, struct cr_store_remove_all_run *run,
                            uint32_t slots_max, uint64_t now_ms) {
    if (run->done) return true;
    uint32_t end = store->slab_high - run->cursor > slots_max ? run->cursor + slots_max
                                                               : store->slab_high;
    for (; run->cursor < end; run->cursor++) {
        uint32_t id = run->cursor;
        const struct cr_store_obj *obj = cr_store_obj_at(store, id);
        if (obj->state != CR_OBJ_COMPLETE ||
            (run->tenant >= 0 && obj->tenant != (uint16_t)run->tenant))
            continue;
        if (!run->force && cr_store_obj_busy(obj, now_ms)) continue;
        if (obj->last_access_ms >= run->begin_ms)
            cr_store_obj_remove(store, id); /* seen after the clear: its own UPDATE */
        else
            cr_store_obj_free(store, id);
        run->removed++;
    }
    return run->cursor >= store->slab_high;
}

uint64_t cr_store_remove_all(cr_store *store, const char *tenant, bool force, uint64_t now_ms) {
    assert(store != NULL);
    struct cr_store_remove_all_run run;
    remove_all_start(store, tenant, force, now_ms, false, &run);
    if (run.done) return 0;
    remove_all_walk(store, &run, UINT32_MAX, now_ms);
    remove_all_event(store, run.tenant, run.removed);
    remove_all_release(store, &run);
    return run.removed;
}

void cr_store_remove_all_begin(cr_store *store, const char *tenant, bool force, uint64_t now_ms,
                               struct cr_store_remove_all_run *run) {
    remove_all_start(store, tenant, force, now_ms, true, run);
}

bool cr_store_remove_all_step(cr_store *store, struct cr_store_remove_all_run *run,
                              uint32_t slots_max, uint64_t now_ms) {
    assert(store != NULL && run != NULL && slots_max > 0);
    if (run->done) return true;
    if (!remove_all_walk(store, run, slots_max, now_ms)) return false;
    remove_all_release(store, run);
    return true;
}

void cr_store_remove_all_cancel(cr_store *store, struct cr_store_remove_all_run *run) {
    assert(store != NULL && run != NULL);
    if (!run->done) remove_all_release(store, run);
}

/* Drops replica r (already released or parked by the caller's choice). */
static void obj_drop_replica(cr_store *store, struct cr_store_obj *obj, uint32_t r) {
    assert(r < obj->replica_count);
    cr_store_tenant_charge(store, obj->tenant, cr_store_rep_charge(obj, r), false);
    cr_store_replica_release(store, &cr_store_reps(obj)[r]);
    cr_store_reps(obj)[r] = cr_store_reps(obj)[--obj->replica_count];
    cr_store_obj_reps_shrink(obj); /* replica 0 stays at 0: callers' indexes hold */
    store->replica_count--;
}

/* After replicas were dropped: publish the change, free the object if empty. */
static bool obj_after_drop(cr_store *store, uint32_t id) {
    struct cr_store_obj *obj = cr_store_obj_at(store, id);
    if (obj->state == CR_OBJ_COMPLETE) cr_store_obj_emit_update(store, obj);
    if (obj->replica_count > 0) return false;
    cr_store_obj_free(store, id);
    return true;
}

void cr_store_obj_drop_segment(cr_store *store, uint32_t segment, uint64_t *freed) {
    assert(store != NULL && freed != NULL);
    for (uint32_t id = 0; id < store->slab_high; id++) {
        struct cr_store_obj *obj = cr_store_obj_at(store, id);
        if (obj->state == CR_OBJ_FREE) continue;
        bool dropped = false;
        for (uint32_t r = 0; r < obj->replica_count;) {
            if (cr_store_reps(obj)[r].segment != segment) {
                r++;
                continue;
            }
            obj_drop_replica(store, obj, r);
            dropped = true;
        }
        if (dropped && obj_after_drop(store, id)) (*freed)++;
    }
}

void cr_store_obj_revoke_client(cr_store *store, const struct cr_uuid *client) {
    assert(store != NULL && client != NULL);
    uint32_t id = store->inflight_head;
    while (id != CR_STORE_NONE) {
        struct cr_store_obj *obj = cr_store_obj_at(store, id);
        uint32_t next = obj->link_next;
        if (cr_uuid_equal(&obj->owner, client)) cr_store_obj_free(store, id);
        id = next;
    }
}

static bool clear_one(cr_store *store, uint32_t id, const struct cr_uuid *client, int segment,
                      uint64_t now_ms) {
    struct cr_store_obj *obj = cr_store_obj_at(store, id);
    if (obj->state != CR_OBJ_COMPLETE || !cr_uuid_equal(&obj->owner, client) ||
        cr_store_obj_busy(obj, now_ms))
        return false;
    if (segment < 0) {
        while (obj->replica_count > 0) obj_drop_replica(store, obj, 0);
        obj_after_drop(store, id);
        return true;
    }
    for (uint32_t r = 0; r < obj->replica_count; r++) {
        if (cr_store_reps(obj)[r].segment != (uint32_t)segment) continue;
        obj_drop_replica(store, obj, r);
        obj_after_drop(store, id);
        return true;
    }
    return false;
}

int cr_store_batch_replica_clear(cr_store *store, const char *tenant, const char *const *keys,
                                 const uint32_t *key_lens, size_t n,
                                 const struct cr_uuid *client, const char *segment_name,
                                 uint64_t now_ms, bool *cleared) {
    assert(store != NULL && client != NULL);
    assert(n == 0 || (keys != NULL && key_lens != NULL && cleared != NULL));
    for (size_t i = 0; i < n; i++) {
        int rc = cr_store_validate_key(store, keys[i], key_lens[i]);
        if (rc != CR_OK) return rc;
    }
    int segment = -1;
    if (segment_name != NULL && segment_name[0] != '\0') {
        segment = cr_store_segment_lookup(store, segment_name);
        if (segment < 0)
            return cr_store_fail(store, CR_ERR_SEGMENT_NOT_FOUND, "segment %s is not mounted",
                                 segment_name);
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t id = cr_store_find_plain(store, tenant, keys[i], key_lens[i]);
        cleared[i] = id != CR_STORE_NONE && clear_one(store, id, client, segment, now_ms);
    }
    return CR_OK;
}
