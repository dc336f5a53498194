/* Disk and local_disk replicas on the store (store_tiers.h). */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "core/store_internal.h"
#include "crescent/error.h"

static const char *const medium_names[CR_MEDIUM_COUNT] = {"memory", "disk", "local_disk"};

const char *cr_replica_medium_name(enum cr_replica_medium medium) {
    return (unsigned)medium < CR_MEDIUM_COUNT ? medium_names[medium] : "?";
}

int cr_replica_medium_parse(const char *name, size_t len, enum cr_replica_medium *out) {
    assert(out != NULL && (name != NULL || len == 0));
    for (unsigned m = 0; m < CR_MEDIUM_COUNT; m++) {
        if (strlen(medium_names[m]) == len && memcmp(medium_names[m], name, len) == 0) {
            *out = (enum cr_replica_medium)m;
            return CR_OK;
        }
    }
    return CR_ERR_INVALID_PARAMS;
}

/* The complete object a key names, or NULL (error message set). */
static struct cr_store_obj *complete_object(cr_store *store, const struct cr_store_key *k) {
    uint32_t id = cr_store_find_key(store, k);
    if (id == CR_STORE_NONE) {
        cr_store_not_found(store);
        return NULL;
    }
    struct cr_store_obj *obj = cr_store_obj_at(store, id);
    if (obj->state != CR_OBJ_COMPLETE) {
        cr_store_fail(store, CR_ERR_OBJECT_NOT_FOUND, "object is still being put");
        return NULL;
    }
    return obj;
}

/* Index of the object's replica of `medium` (on `segment` unless it is
 * CR_STORE_NO_SEGMENT), or -1. */
static int find_medium(const struct cr_store_obj *obj, uint8_t medium, uint32_t segment) {
    for (uint32_t r = 0; r < obj->replica_count; r++) {
        const struct cr_store_replica *rep = &obj->replicas[r];
        if (rep->medium == medium && (segment == CR_STORE_NO_SEGMENT || rep->segment == segment))
            return (int)r;
    }
    return -1;
}

/* Puts `rep` in slot `at` (replacing that replica) or appends it (at < 0). */
static void install(cr_store *store, struct cr_store_obj *obj, int at,
                    const struct cr_store_replica *rep) {
    if (at >= 0) {
        cr_store_replica_release(store, &obj->replicas[at]);
        obj->replicas[at] = *rep;
    } else {
        obj->replicas[obj->replica_count++] = *rep;
        store->replica_count++;
    }
    store->medium_replicas[rep->medium]++;
    store->medium_bytes[rep->medium] += rep->size;
    cr_store_obj_emit_update(store, obj);
}

int cr_store_add_disk_replica(cr_store *store, const struct cr_store_key *k,
                              const char *file_path, uint64_t size, uint64_t checksum,
                              uint64_t now_ms) {
    assert(store != NULL && k != NULL);
    (void)now_ms;
    size_t len = file_path != NULL ? strnlen(file_path, CR_STORE_FILE_PATH_LEN_MAX + 1) : 0;
    if (len == 0 || len > CR_STORE_FILE_PATH_LEN_MAX)
        return cr_store_fail(store, CR_ERR_INVALID_PARAMS,
                             "a disk replica needs a file path of 1 to %u bytes",
                             CR_STORE_FILE_PATH_LEN_MAX);
    struct cr_store_obj *obj = complete_object(store, k);
    if (obj == NULL) return CR_ERR_OBJECT_NOT_FOUND;
    if (obj->size != size || (obj->has_checksum && obj->checksum != checksum))
        return cr_store_fail(store, CR_ERR_INVALID_PARAMS,
                             "the file's size or checksum is not the object's (another put's "
                             "file?)");
    int at = find_medium(obj, CR_MEDIUM_DISK, CR_STORE_NO_SEGMENT);
    if (at < 0 && obj->replica_count >= CR_STORE_REPLICAS_MAX)
        return cr_store_fail(store, CR_ERR_NOMEM, "the object has %u replicas already",
                             CR_STORE_REPLICAS_MAX);
    char *path = malloc(len + 1);
    if (path == NULL) return cr_store_fail(store, CR_ERR_NOMEM, "out of memory");
    memcpy(path, file_path, len + 1);
    struct cr_store_replica rep = {.path = path, .size = size, .segment = CR_STORE_NO_SEGMENT,
                                   .status = CR_REPLICA_COMPLETE, .medium = CR_MEDIUM_DISK};
    install(store, obj, at, &rep);
    return CR_OK;
}

int cr_store_add_local_disk_replica(cr_store *store, const struct cr_store_key *k,
                                    const char *segment_name, uint64_t position,
                                    uint64_t now_ms) {
    assert(store != NULL && k != NULL);
    (void)now_ms;
    int seg = segment_name != NULL ? cr_store_segment_lookup(store, segment_name) : -1;
    if (seg < 0)
        return cr_store_fail(store, CR_ERR_SEGMENT_NOT_FOUND, "segment %s is not mounted",
                             segment_name != NULL ? segment_name : "(none)");
    struct cr_store_obj *obj = complete_object(store, k);
    if (obj == NULL) return CR_ERR_OBJECT_NOT_FOUND;
    int at = find_medium(obj, CR_MEDIUM_LOCAL_DISK, (uint32_t)seg);
    if (at < 0 && obj->replica_count >= CR_STORE_REPLICAS_MAX)
        return cr_store_fail(store, CR_ERR_NOMEM, "the object has %u replicas already",
                             CR_STORE_REPLICAS_MAX);
    struct cr_store_replica rep = {.offset = position, .size = obj->size,
                                   .segment = (uint16_t)seg, .status = CR_REPLICA_COMPLETE,
                                   .medium = CR_MEDIUM_LOCAL_DISK};
    install(store, obj, at, &rep);
    return CR_OK;
}

int cr_store_drop_medium(cr_store *store, const struct cr_store_key *k,
                         enum cr_replica_medium medium, const char *segment_name,
                         uint32_t *dropped) {
    assert(store != NULL && k != NULL && (unsigned)medium < CR_MEDIUM_COUNT);
    if (dropped != NULL) *dropped = 0;
    uint32_t id = cr_store_find_key(store, k);
    if (id == CR_STORE_NONE) return cr_store_not_found(store);
    struct cr_store_obj *obj = cr_store_obj_at(store, id);
    if (obj->state != CR_OBJ_COMPLETE) return CR_OK; /* only PutEnd gives non-memory replicas */
    uint32_t segment = CR_STORE_NO_SEGMENT;
    if (medium == CR_MEDIUM_LOCAL_DISK && segment_name != NULL && segment_name[0] != '\0') {
        int seg = cr_store_segment_lookup(store, segment_name);
        if (seg < 0) return CR_OK; /* its replicas went with the unmount */
        segment = (uint32_t)seg;
    }
    uint32_t n = 0;
    int r;
    while ((r = find_medium(obj, (uint8_t)medium, segment)) >= 0) {
        cr_store_replica_release(store, &obj->replicas[r]);
        obj->replicas[r] = obj->replicas[--obj->replica_count];
        store->replica_count--;
        n++;
    }
    if (dropped != NULL) *dropped = n;
    if (n == 0) return CR_OK;
    if (obj->replica_count == 0) cr_store_obj_remove(store, id);
    else cr_store_obj_emit_update(store, obj);
    return CR_OK;
}
