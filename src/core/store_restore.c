/* Restoring complete objects at their recorded offsets (store_restore.h). */
#include "core/store_restore.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "core/store_internal.h"
#include "crescent/error.h"

struct placed {
    uint32_t count;
    struct cr_store_replica replicas[CR_STORE_REPLICAS_MAX];
};

static void placed_release(cr_store *store, struct placed *p) {
    for (uint32_t i = 0; i < p->count; i++) cr_store_replica_release(store, &p->replicas[i]);
    p->count = 0;
}

/* A disk or local_disk replica: no segment space, so nothing to claim. */
static bool place_other(cr_store *store, const struct cr_store_restore_object *o,
                        const struct cr_store_restore_replica *r, struct placed *out) {
    struct cr_store_replica rep = {.size = o->size, .status = CR_REPLICA_COMPLETE,
                                   .medium = (uint8_t)r->medium};
    for (uint32_t j = 0; j < out->count; j++)
        if (out->replicas[j].medium == CR_MEDIUM_DISK && r->medium == CR_MEDIUM_DISK)
            return false;
    if (r->medium == CR_MEDIUM_DISK) {
        size_t len = r->file_path != NULL ? strnlen(r->file_path, CR_STORE_FILE_PATH_LEN_MAX + 1)
                                          : 0;
        if (len == 0 || len > CR_STORE_FILE_PATH_LEN_MAX) return false;
        if ((rep.path = malloc(len + 1)) == NULL) return false;
        memcpy(rep.path, r->file_path, len + 1);
        rep.segment = CR_STORE_NO_SEGMENT;
    } else {
        int seg = r->segment != NULL ? cr_store_segment_lookup(store, r->segment) : -1;
        if (seg < 0) return false;
        for (uint32_t j = 0; j < out->count; j++)
            if (out->replicas[j].medium == CR_MEDIUM_LOCAL_DISK &&
                out->replicas[j].segment == (uint32_t)seg)
                return false;
        rep.segment = (uint16_t)seg;
        rep.offset = r->offset;
    }
    store->medium_replicas[rep.medium]++;
    store->medium_bytes[rep.medium] += rep.size;
    out->replicas[out->count++] = rep;
    return true;
}

/* Claims each replica's range in its segment; the ones that cannot be are
 * counted and left out. */
static void place_replicas(cr_store *store, const struct cr_store_restore_object *o,
                           struct placed *out, uint32_t *dropped) {
    out->count = 0;
    uint64_t want = cr_store_alloc_bytes(o->size);
    for (uint32_t i = 0; i < o->replica_count; i++) {
        const struct cr_store_restore_replica *r = &o->replicas[i];
        if (r->medium != CR_MEDIUM_MEMORY) {
            if ((unsigned)r->medium >= CR_MEDIUM_COUNT || !place_other(store, o, r, out))
                (*dropped)++;
            continue;
        }
        int seg = r->segment != NULL ? cr_store_segment_lookup(store, r->segment) : -1;
        bool twice = false;
        for (uint32_t j = 0; j < out->count && seg >= 0; j++)
            twice = twice || (out->replicas[j].segment == (uint32_t)seg &&
                              out->replicas[j].medium == CR_MEDIUM_MEMORY);
        if (seg < 0 || twice || r->size != want) {
            (*dropped)++;
            continue;
        }
        if (store->bulk != NULL) { /* claimed by cr_store_restore_finish */
            cr_store_bulk_note(store, (uint32_t)seg);
            out->replicas[out->count++] = (struct cr_store_replica){
                .offset = r->offset, .size = r->size, .node = CR_STORE_NODE_UNCLAIMED,
                .segment = (uint16_t)seg, .status = CR_REPLICA_COMPLETE};
            continue;
        }
        cr_offset_allocation a;
        if (cr_offset_alloc_claim(store->segments[seg].alloc, r->offset, r->size, &a) != CR_OK) {
            (*dropped)++;
            continue;
        }
        out->replicas[out->count++] = (struct cr_store_replica){
            .offset = a.offset, .size = a.size, .node = a.node, .segment = (uint16_t)seg,
            .status = CR_REPLICA_COMPLETE};
        store->segments[seg].used_bytes += a.size;
        store->used_bytes += a.size;
    }
}

int cr_store_restore_object(cr_store *store, const struct cr_store_restore_object *o,
                            uint64_t now_ms, uint32_t *dropped_replicas) {
    assert(store != NULL && o != NULL && dropped_replicas != NULL);
    assert(o->replica_count <= CR_STORE_REPLICAS_MAX);
    if (o->key == NULL || o->key_len == 0 || o->key_len > store->cfg.max_key_len)
        return cr_store_fail(store, CR_ERR_INVALID_PARAMS, "key of %u bytes out of bounds",
                             o->key_len);
    if (o->size > store->cfg.max_object_size_bytes)
        return cr_store_fail(store, CR_ERR_INVALID_PARAMS,
                             "object of %llu bytes exceeds max_object_size_bytes",
                             (unsigned long long)o->size);
    /* No room to defer one more (a snapshot holding keys twice at
     * max_objects): the index is built now, and the rest go in directly. */
    if (store->index_pending != NULL && !cr_store_index_pending_room(store))
        (void)cr_store_restore_index_build(store);
    bool deferred = store->index_pending != NULL;
    int t = cr_store_tenant_lookup(store, o->tenant);
    uint64_t hash = 0;
    if (t >= 0) {
        hash = cr_store_key_hash(store, (uint16_t)t, o->key, o->key_len);
        if (!deferred &&
            cr_store_obj_find(store, (uint16_t)t, o->key, o->key_len, hash) != CR_STORE_NONE)
            return cr_store_fail(store, CR_ERR_OBJECT_ALREADY_EXISTS, "object exists");
    }
    if (!cr_store_slab_has_room(store))
        return cr_store_fail(store, CR_ERR_NOMEM, "object table full (max_objects %u)",
                             store->cfg.max_objects);
    int rc = cr_store_index_reserve(store);
    if (rc != CR_OK) return rc;
    char *key_copy = NULL;
    if (o->key_len > CR_STORE_KEY_INLINE && (key_copy = malloc(o->key_len)) == NULL)
        return cr_store_fail(store, CR_ERR_NOMEM, "out of memory");
    struct placed placed;
    place_replicas(store, o, &placed, dropped_replicas);
    if (placed.count == 0) {
        free(key_copy);
        return cr_store_fail(store, CR_ERR_SEGMENT_NOT_FOUND,
                             "none of the object's replicas could be placed");
    }
    struct cr_store_replica *more = NULL; /* an object of more than one replica */
    if (placed.count > 1 && (more = cr_store_reps_alloc(store)) == NULL) {
        placed_release(store, &placed);
        free(key_copy);
        return CR_ERR_NOMEM;
    }
    uint16_t tenant;
    rc = cr_store_tenant_intern(store, o->tenant, &tenant);
    uint32_t generation = 0;
    uint32_t id = rc == CR_OK ? cr_store_slab_take(store, &generation) : CR_STORE_NONE;
    if (id == CR_STORE_NONE) {
        placed_release(store, &placed);
        free(key_copy);
        free(more);
        /* A tenant interned for this object only, with no reference yet,
         * is taken again by the next object of that name. */
        return rc != CR_OK ? rc : cr_store_fail(store, CR_ERR_NOMEM, "out of memory");
    }
    cr_store_tenant_ref(store, tenant);
    /* Hashed above when the tenant was known (its id is the same now). */
    if (t < 0) hash = cr_store_key_hash(store, tenant, o->key, o->key_len);
    struct cr_store_obj *obj = cr_store_obj_at(store, id);
    *obj = (struct cr_store_obj){
        .key = key_copy, .hash = hash, .size = o->size, .put_start_ms = now_ms,
        .last_access_ms = now_ms, .owner = o->owner, .key_len = o->key_len,
        .generation = generation, .tenant = tenant, .state = CR_OBJ_COMPLETE,
        .replica_count = (uint8_t)placed.count, .with_soft_pin = o->with_soft_pin,
        .hard_pinned = o->hard_pinned, .has_checksum = o->has_checksum,
        .checksum = o->checksum, .link_prev = CR_STORE_NONE, .link_next = CR_STORE_NONE};
    cr_store_obj_reps_init(obj, more, placed.replicas, placed.count);
    /* Memory replicas only, as cr_store_obj_free uncharges (store_internal.h). */
    cr_store_tenant_charge(store, tenant, cr_store_obj_charge(obj), true);
    if (obj->key == NULL) {
        memcpy(obj->key_inline, o->key, o->key_len);
        obj->key = obj->key_inline;
    } else {
        memcpy(obj->key, o->key, o->key_len);
    }
    if (deferred)
        cr_store_index_pending_add(store, id, hash);
    else
        cr_store_table_insert(store, id, hash);
    store->object_count++;
    store->replica_count += placed.count;
    return CR_OK;
}

int cr_store_restore_reserve(cr_store *store, uint64_t objects) {
    assert(store != NULL);
    uint64_t room = store->cfg.max_objects - store->object_count;
    if (objects > room) objects = room;
    int rc = cr_store_index_reserve_for(store, objects);
    int slab = cr_store_slab_reserve(store, objects);
    return rc != CR_OK ? rc : slab;
}

void cr_store_restore_slab_region(const cr_store *store, void **base, size_t *bytes) {
    assert(store != NULL && base != NULL && bytes != NULL);
    *base = NULL;
    *bytes = 0;
    if (store->slab_region_count == 0) return;
    const struct cr_store_slab_region *r = &store->slab_regions[store->slab_region_count - 1];
    *base = r->base;
    *bytes = r->bytes;
}

void cr_store_restore_prefetch(const cr_store *store, const char *tenant, const char *key,
                               uint32_t key_len) {
    assert(store != NULL && tenant != NULL && key != NULL);
    if (store->index_pending != NULL) return; /* no index slot to load: not even hashed */
    int t = cr_store_tenant_lookup(store, tenant);
    if (t < 0) return;
    uint64_t hash = cr_store_key_hash(store, (uint16_t)t, key, key_len);
    __builtin_prefetch(&store->table[cr_store_home(store, hash)], 1);
}
