/* Store objects: reads (ExistKey, GetReplicaList, hard pins) and the views
 * the admin API lists. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "core/store_internal.h"
#include "crescent/error.h"

static int read_object(cr_store *store, const struct cr_store_key *key, uint64_t now_ms,
                       struct cr_store_obj **out, uint32_t *id_out) {
    uint32_t id = cr_store_find_key(store, key);
    if (id == CR_STORE_NONE) return cr_store_not_found(store);
    struct cr_store_obj *obj = cr_store_obj_at(store, id);
    if (obj->state != CR_OBJ_COMPLETE)
        return cr_store_fail(store, CR_ERR_OBJECT_NOT_READY, "put has not ended");
    cr_store_obj_grant_lease(store, obj, now_ms);
    *out = obj;
    *id_out = id;
    return CR_OK;
}

int cr_store_exist_key(cr_store *store, const char *tenant, const char *key, uint32_t key_len,
                       uint64_t now_ms) {
    if (key == NULL) return cr_store_not_found(store);
    struct cr_store_key k;
    cr_store_key_make(tenant, key, key_len, &k);
    return cr_store_exist_key_k(store, &k, now_ms);
}

int cr_store_exist_key_k(cr_store *store, const struct cr_store_key *key, uint64_t now_ms) {
    assert(store != NULL && key != NULL);
    struct cr_store_obj *obj;
    uint32_t id;
    return read_object(store, key, now_ms, &obj, &id);
}

int cr_store_get_replica_list(cr_store *store, const char *tenant, const char *key,
                              uint32_t key_len, uint64_t now_ms,
                              struct cr_store_replica_list *out) {
    out->count = 0;
    out->has_checksum = false;
    out->lease_ms = 0;
    if (key == NULL) return cr_store_not_found(store);
    struct cr_store_key k;
    cr_store_key_make(tenant, key, key_len, &k);
    return cr_store_get_replica_list_k(store, &k, now_ms, out);
}

int cr_store_get_replica_list_k(cr_store *store, const struct cr_store_key *key, uint64_t now_ms,
                                struct cr_store_replica_list *out) {
    assert(store != NULL && key != NULL && out != NULL);
    out->count = 0;
    out->has_checksum = false;
    out->lease_ms = 0;
    struct cr_store_obj *obj;
    uint32_t id;
    int rc = read_object(store, key, now_ms, &obj, &id);
    if (rc != CR_OK) return rc;
    cr_store_obj_fill_list(store, obj, true, out);
    if (store->promote != NULL) cr_store_promote_note(store, id, obj, now_ms);
    out->lease_ms = obj->lease_deadline_ms - now_ms; /* >= the TTL: just granted */
    return CR_OK;
}

int cr_store_set_hard_pin(cr_store *store, const char *tenant, const char *key,
                          uint32_t key_len, bool pinned) {
    assert(store != NULL);
    uint32_t id = cr_store_find_plain(store, tenant, key, key_len);
    if (id == CR_STORE_NONE) return cr_store_not_found(store);
    cr_store_obj_at(store, id)->hard_pinned = pinned;
    return CR_OK;
}


static void object_view(const cr_store *store, uint32_t id, uint64_t now_ms,
                        struct cr_store_object_view *out) {
    const struct cr_store_obj *obj = cr_store_obj_at(store, id);
    bool soft = cr_store_obj_soft_pinned(store, obj, now_ms);
    *out = (struct cr_store_object_view){
        .object_id = id, .generation = obj->generation,
        .tenant = cr_store_tenant_name(store, obj->tenant), .key = obj->key,
        .key_len = obj->key_len, .size_bytes = obj->size,
        .complete = obj->state == CR_OBJ_COMPLETE, .soft_pinned = soft,
        .hard_pinned = obj->hard_pinned, .put_start_ms = obj->put_start_ms,
        .lease_deadline_ms = obj->lease_deadline_ms, .last_access_ms = obj->last_access_ms,
        .owner = obj->owner};
    cr_store_obj_fill_list(store, obj, false, &out->replicas);
}

int cr_store_object_find(const cr_store *store, const char *tenant, const char *key,
                         uint32_t key_len, uint64_t now_ms, struct cr_store_object_view *out) {
    assert(store != NULL && out != NULL);
    uint32_t id = cr_store_find_plain(store, tenant, key, key_len);
    if (id == CR_STORE_NONE) return CR_ERR_OBJECT_NOT_FOUND;
    object_view(store, id, now_ms, out);
    return CR_OK;
}

size_t cr_store_list_objects(const cr_store *store, const char *tenant, const char *prefix,
                             uint64_t now_ms, uint32_t *cursor, size_t limit,
                             struct cr_store_object_view *out) {
    bool done;
    return cr_store_list_objects_slice(store, tenant, prefix, now_ms, cursor, limit, UINT32_MAX,
                                       out, &done);
}

size_t cr_store_list_objects_slice(const cr_store *store, const char *tenant, const char *prefix,
                                   uint64_t now_ms, uint32_t *cursor, size_t limit,
                                   uint32_t slots_max, struct cr_store_object_view *out,
                                   bool *done) {
    assert(store != NULL && cursor != NULL && done != NULL && slots_max > 0);
    assert(out != NULL || limit == 0);
    *done = true;
    int t = (tenant != NULL) ? cr_store_tenant_lookup(store, tenant) : -1;
    if (tenant != NULL && t < 0) return 0;
    size_t plen = prefix ? strlen(prefix) : 0;
    size_t count = 0;
    uint32_t end = *cursor < store->slab_high && store->slab_high - *cursor > slots_max
                       ? *cursor + slots_max
                       : store->slab_high;
    for (; *cursor < end && count < limit; (*cursor)++) {
        const struct cr_store_obj *obj = cr_store_obj_at(store, *cursor);
        if (obj->state == CR_OBJ_FREE || (t >= 0 && obj->tenant != (uint16_t)t)) continue;
        if (plen > 0 && (obj->key_len < plen || memcmp(obj->key, prefix, plen) != 0)) continue;
        object_view(store, *cursor, now_ms, &out[count++]);
    }
    *done = *cursor >= store->slab_high;
    return count;
}
