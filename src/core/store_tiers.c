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
        const struct cr_store_replica *rep = &cr_store_reps(obj)[r];
        if (rep->medium == medium && (segment == CR_STORE_NO_SEGMENT || rep->segment == segment))
            return (int)r;
    }
    return -1;
}

/* Room for the replica `install` puts at `at`: none needed to replace one;
 * one more slot to append (at < 0), which fails at CR_STORE_REPLICAS_MAX or
 * when the overflow array cannot be had (nothing changed then). */
static int make_room(cr_store *store, struct cr_store_obj *obj, int at) {
    if (at >= 0) return CR_OK;
    if (obj->replica_count >= CR_STORE_REPLICAS_MAX)
        return cr_store_fail(store, CR_ERR_NOMEM, "the object has %u replicas already",
                             CR_STORE_REPLICAS_MAX);
    return cr_store_obj_reps_reserve(store, obj, obj->replica_count + 1u);
}

/* Puts `rep` in slot `at` (replacing that replica) or appends it (at < 0). */
static void install(cr_store *store, struct cr_store_obj *obj, int at,
                    const struct cr_store_replica *rep) {
    if (at >= 0) {
        /* The same file reported again is not a file to delete. */
        store->file_hook_muted = rep->medium == CR_MEDIUM_DISK &&
                                 strcmp(cr_store_reps(obj)[at].path, rep->path) == 0;
        cr_store_replica_release(store, &cr_store_reps(obj)[at]);
        store->file_hook_muted = false;
        cr_store_reps(obj)[at] = *rep;
    } else {
        cr_store_reps(obj)[obj->replica_count++] = *rep;
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
    int rc = make_room(store, obj, at);
    if (rc != CR_OK) return rc;
    char *path = malloc(len + 1);
    if (path == NULL) {
        cr_store_obj_reps_shrink(obj); /* as it was */
        return cr_store_fail(store, CR_ERR_NOMEM, "out of memory");
    }
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
    int rc = make_room(store, obj, at);
    if (rc != CR_OK) return rc;
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
        cr_store_replica_release(store, &cr_store_reps(obj)[r]);
        cr_store_reps(obj)[r] = cr_store_reps(obj)[--obj->replica_count];
        store->replica_count--;
        n++;
    }
    cr_store_obj_reps_shrink(obj);
    if (dropped != NULL) *dropped = n;
    if (n == 0) return CR_OK;
    if (obj->replica_count == 0) cr_store_obj_remove(store, id);
    else cr_store_obj_emit_update(store, obj);
    return CR_OK;
}

/* ---- file-tier eviction ---------------------------------------------------- */

#define DISK_SAMPLE 32u
#define DISK_STALL_ROUNDS 4u

struct disk_victim {
    uint32_t id, generation;
    uint64_t last_access_ms;
};

static int by_access(const void *a, const void *b) {
    const struct disk_victim *x = a, *y = b;
    return (x->last_access_ms > y->last_access_ms) - (x->last_access_ms < y->last_access_ms);
}

/* Up to DISK_SAMPLE objects with a disk replica that may lose it now. */
static size_t sample_disk(const cr_store *store, uint64_t now_ms, uint64_t *rng,
                          struct disk_victim *out) {
    size_t n = 0;
    for (uint32_t d = 0; d < DISK_SAMPLE * 8 && n < DISK_SAMPLE && store->slab_high > 0; d++) {
        uint32_t id = (uint32_t)(cr_store_rng_next(rng) % store->slab_high);
        const struct cr_store_obj *obj = cr_store_obj_at(store, id);
        if (obj->state != CR_OBJ_COMPLETE || obj->hard_pinned || cr_store_obj_busy(obj, now_ms) ||
            find_medium(obj, CR_MEDIUM_DISK, CR_STORE_NO_SEGMENT) < 0)
            continue;
        out[n++] = (struct disk_victim){id, obj->generation, obj->last_access_ms};
    }
    return n;
}

uint64_t cr_store_evict_disk(cr_store *store, uint64_t limit_bytes, uint64_t now_ms,
                             uint64_t *rng) {
    assert(store != NULL && rng != NULL && *rng != 0);
    uint64_t freed = 0;
    uint32_t stall = 0;
    while (store->medium_bytes[CR_MEDIUM_DISK] > limit_bytes && stall < DISK_STALL_ROUNDS) {
        struct disk_victim pool[DISK_SAMPLE];
        size_t n = sample_disk(store, now_ms, rng, pool);
        qsort(pool, n, sizeof(pool[0]), by_access);
        size_t take = (n + 3) / 4; /* the oldest quarter of the sample */
        uint64_t before = freed;
        for (size_t i = 0; i < take && store->medium_bytes[CR_MEDIUM_DISK] > limit_bytes; i++) {
            struct cr_store_obj *obj = cr_store_obj_at(store, pool[i].id);
            if (obj->generation != pool[i].generation || obj->state != CR_OBJ_COMPLETE) continue;
            int r = find_medium(obj, CR_MEDIUM_DISK, CR_STORE_NO_SEGMENT);
            if (r < 0) continue;
            freed += cr_store_reps(obj)[r].size;
            cr_store_replica_release(store, &cr_store_reps(obj)[r]);
            cr_store_reps(obj)[r] = cr_store_reps(obj)[--obj->replica_count];
            cr_store_obj_reps_shrink(obj);
            store->replica_count--;
            store->counters.disk_evictions++;
            if (obj->replica_count == 0) cr_store_obj_remove(store, pool[i].id);
            else cr_store_obj_emit_update(store, obj);
        }
        stall = freed == before ? stall + 1 : 0;
    }
    return freed;
}

void cr_store_set_file_hook(cr_store *store, void (*fn)(void *ctx, const char *path),
                            void *ctx) {
    assert(store != NULL);
    store->file_hook = fn;
    store->file_hook_ctx = ctx;
}
