/* Store objects: the (tenant, key) hash table, the object slab, keys, the
 * allocation strategy and the put operations (PutStart, PutEnd, PutRevoke).
 * Reads and views are store_reads.c, removals store_remove.c.
 *
 * Objects sit in fixed chunks of a slab addressed by a 32-bit id; recycled
 * ids carry a generation so that an eviction decided earlier can be checked
 * against the object it named.  The index is open addressing with linear
 * probing over 8-byte slots (hash filter + id) and backward-shift deletion.
 * The only malloc per object is its key (and the block metadata a PutStart
 * may carry, kept until PutEnd). */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "core/store_internal.h"
#include "core/store_ssd_park.h"
#include "crescent/error.h"

#define ALLOC_RANDOM_TRIES 10u

struct put_plan {
    uint16_t tenant; /* valid when tenant_known */
    bool tenant_known;
    uint64_t hash;
    uint32_t existing; /* object preempted, or CR_STORE_NONE */
    char *key_copy;
    struct cr_store_meta_copy *meta_copy;
    struct cr_store_replica *reps_more; /* the object's, when count > 1 */
    uint32_t count;
    struct cr_store_replica replicas[CR_STORE_REPLICAS_MAX];
};

static void table_insert(cr_store *store, uint32_t id, uint64_t hash);
static void table_delete(cr_store *store, uint32_t id, uint64_t hash);
static void emit_object(cr_store *store, enum cr_store_change_kind kind,
                        const struct cr_store_obj *obj, uint32_t replica_count);

/* ---- hash table and slab ---------------------------------------------------- */

uint64_t cr_store_key_hash(const cr_store *store, uint16_t tenant, const char *key,
                           uint32_t key_len) {
    assert(tenant < store->tenant_high && store->tenants[tenant].name != NULL);
    assert(key != NULL);
    return XXH3_64bits_withSeed(key, key_len, store->tenants[tenant].seed);
}

uint32_t cr_store_obj_find(const cr_store *store, uint16_t tenant, const char *key,
                           uint32_t key_len, uint64_t hash) {
    assert(store != NULL && key != NULL);
    uint32_t hi = (uint32_t)(hash >> 32);
    for (uint32_t i = cr_store_home(store, hash);; i = (i + 1) & store->table_mask) {
        const struct cr_store_slot *slot = &store->table[i];
        if (slot->id_plus1 == 0) return CR_STORE_NONE;
        if (slot->hash_hi != hi) continue;
        const struct cr_store_obj *obj = cr_store_obj_at(store, slot->id_plus1 - 1);
        if (obj->tenant == tenant && obj->key_len == key_len &&
            memcmp(obj->key, key, key_len) == 0)
            return slot->id_plus1 - 1;
    }
}

static void slot_put(struct cr_store_slot *table, uint32_t mask, uint32_t shift,
                     struct cr_store_slot slot) {
    uint32_t i = slot.hash_hi >> shift;
    while (table[i].id_plus1 != 0) i = (i + 1) & mask;
    table[i] = slot;
}

static void table_insert(cr_store *store, uint32_t id, uint64_t hash) {
    assert(store->index_pending == NULL); /* store_restore_index.c inserts its own */
    assert(((uint64_t)store->object_count + 1) * 2 <= (uint64_t)store->table_mask + 1);
    if (store->ssd_park != NULL) cr_store_ssd_park_forget(store, hash); /* a put of the key */
    slot_put(store->table, store->table_mask, store->table_shift,
             (struct cr_store_slot){(uint32_t)(hash >> 32), id + 1});
}

/* Doubles the index at half full.  Homes are the top hash bits, kept in the
 * slots, so the new index is filled from the old one alone, in home order:
 * a sequential pass, no object read (at 16 M objects, one random read per
 * object would stall the puts for seconds).  The new index is written
 * through and hinted to huge pages like the first one (cr_store_map_zeroed).
 * Doubling costs a pause in the put that crosses the threshold: about a
 * slot copy per object (bench/RESULTS.md), amortised over as many puts. */
int cr_store_index_reserve(cr_store *store) { return cr_store_index_reserve_for(store, 1); }

int cr_store_index_reserve_for(cr_store *store, uint64_t more) {
    assert(store != NULL);
    uint64_t slots = (uint64_t)store->table_mask + 1, want = slots;
    while (((uint64_t)store->object_count + more) * 2 > want && want < store->table_slots_max)
        want *= 2;
    if (want == slots) {
        if (((uint64_t)store->object_count + more) * 2 <= slots) return CR_OK;
        /* the slab refuses first: max_objects */
        return cr_store_fail(store, CR_ERR_NOMEM, "key index full at %llu slots",
                             (unsigned long long)slots);
    }
    struct cr_store_slot *grown = cr_store_map_zeroed(want * sizeof(*grown));
    if (grown == NULL)
        return cr_store_fail(store, CR_ERR_NOMEM,
                             "out of memory growing the key index to %llu slots (%llu MiB) "
                             "for %llu objects",
                             (unsigned long long)want,
                             (unsigned long long)(want * sizeof(*grown) >> 20),
                             (unsigned long long)(store->object_count + more));
    uint32_t mask = (uint32_t)(want - 1);
    uint32_t shift = 32u - (uint32_t)__builtin_ctzll(want);
    for (uint64_t i = 0; i < slots; i++)
        if (store->table[i].id_plus1 != 0) slot_put(grown, mask, shift, store->table[i]);
    cr_store_unmap(store->table, slots * sizeof(*grown));
    store->table = grown;
    store->table_mask = mask;
    store->table_shift = shift;
    return CR_OK;
}

static void table_delete(cr_store *store, uint32_t id, uint64_t hash) {
    assert(store->index_pending == NULL); /* objects restored since are not in it */
    if (store->ssd_park != NULL) cr_store_ssd_park_forget(store, hash); /* a removal */
    uint32_t mask = store->table_mask;
    uint32_t hole = cr_store_home(store, hash);
    while (store->table[hole].id_plus1 != id + 1) {
        assert(store->table[hole].id_plus1 != 0);
        hole = (hole + 1) & mask;
    }
    for (uint32_t i = (hole + 1) & mask; store->table[i].id_plus1 != 0; i = (i + 1) & mask) {
        uint32_t home = store->table[i].hash_hi >> store->table_shift;
        bool stays = (hole <= i) ? (home > hole && home <= i) : (home > hole || home <= i);
        if (stays) continue;
        store->table[hole] = store->table[i];
        hole = i;
    }
    store->table[hole] = (struct cr_store_slot){0, 0};
}

static bool slab_has_room(const cr_store *store) {
    return store->free_head != CR_STORE_NONE || store->slab_high < store->cfg.max_objects;
}

/* Every line of a free object, for the put that takes it next.  Objects are
 * freed in whatever order removals and evictions come, so the free list
 * leads anywhere in the slab: reading the head's link and then filling the
 * object were cache (and TLB) misses on every put, three quarters of
 * cr_store_put_start's own time under batched puts (bench/RESULTS.md).  One
 * put ahead is a whole put's work of warning. */
static void obj_prefetch_write(const cr_store *store, uint32_t id) {
    const char *from = (const char *)cr_store_obj_at(store, id);
    for (size_t off = 0; off < sizeof(struct cr_store_obj); off += 64)
        __builtin_prefetch(from + off, 1);
    __builtin_prefetch(from + sizeof(struct cr_store_obj) - 1, 1);
}

/* Returns a slot id and the generation its next object gets, or
 * CR_STORE_NONE.  A new chunk is allocated once per 4096 objects: amortised,
 * and it keeps the slab from moving.  A slot never used before is not read:
 * its generation is 0 by construction, and the object's first touch is the
 * write that fills it.  (Reading a fresh calloc'd page first maps the zero
 * page, and the write after it is a copy-on-write fault with a TLB shootdown
 * to the other CPUs: that was a fifth of the first million puts' time.) */
static uint32_t slab_take(cr_store *store, uint32_t *generation) {
    uint32_t id = store->free_head;
    if (id != CR_STORE_NONE) {
        struct cr_store_obj *obj = cr_store_obj_at(store, id);
        store->free_head = obj->link_next;
        *generation = obj->generation;
        if (store->free_head != CR_STORE_NONE) obj_prefetch_write(store, store->free_head);
        return id;
    }
    *generation = 0;
    if (store->slab_high == store->cfg.max_objects) return CR_STORE_NONE;
    uint32_t chunk = store->slab_high >> CR_STORE_CHUNK_SHIFT;
    if (chunk == store->chunk_count) {
        store->chunks[chunk] = calloc(CR_STORE_CHUNK_OBJECTS, sizeof(struct cr_store_obj));
        if (store->chunks[chunk] == NULL) return CR_STORE_NONE;
        store->chunk_count++;
    }
    return store->slab_high++;
}

/* A restore knows how many objects come (store_restore.h): their chunks
 * are mapped in one go, 2 MiB-aligned and hinted to huge pages, rather
 * than calloc'd 1.3 MiB at a time and faulted in 4 KiB by 4 KiB.  At 10 M
 * objects that was 800 k page faults, each a VM exit on a virtual machine
 * (bench/RESULTS.md).  Memory still follows use: a page of the region
 * costs nothing until an object is written into it, and the region holds
 * no more chunks than the objects announced need. */
int cr_store_slab_reserve(cr_store *store, uint64_t more) {
    assert(store != NULL);
    uint64_t want = (uint64_t)store->slab_high + more;
    if (want > store->cfg.max_objects) want = store->cfg.max_objects;
    uint64_t chunks = (want + CR_STORE_CHUNK_OBJECTS - 1) >> CR_STORE_CHUNK_SHIFT;
    if (chunks <= store->chunk_count) return CR_OK;
    if (store->slab_region_count == CR_STORE_SLAB_REGIONS_MAX)
        return cr_store_fail(store, CR_ERR_NOMEM, "no slab region left");
    uint32_t n = (uint32_t)(chunks - store->chunk_count);
    size_t chunk_bytes = (size_t)CR_STORE_CHUNK_OBJECTS * sizeof(struct cr_store_obj);
    char *base = cr_store_map_huge((size_t)n * chunk_bytes);
    if (base == NULL)
        return cr_store_fail(store, CR_ERR_NOMEM, "out of memory mapping %u slab chunks", n);
    store->slab_regions[store->slab_region_count++] = (struct cr_store_slab_region){
        .base = base, .bytes = (size_t)n * chunk_bytes, .first = store->chunk_count, .count = n};
    for (uint32_t i = 0; i < n; i++)
        store->chunks[store->chunk_count + i] = (struct cr_store_obj *)(base + i * chunk_bytes);
    store->chunk_count += n;
    return CR_OK;
}

static void inflight_append(cr_store *store, uint32_t id) {
    struct cr_store_obj *obj = cr_store_obj_at(store, id);
    obj->link_prev = store->inflight_tail;
    obj->link_next = CR_STORE_NONE;
    if (store->inflight_tail != CR_STORE_NONE)
        cr_store_obj_at(store, store->inflight_tail)->link_next = id;
    else
        store->inflight_head = id;
    store->inflight_tail = id;
    store->inflight_count++;
}

static void inflight_unlink(cr_store *store, uint32_t id) {
    struct cr_store_obj *obj = cr_store_obj_at(store, id);
    assert(obj->state == CR_OBJ_INFLIGHT && store->inflight_count > 0);
    if (obj->link_prev != CR_STORE_NONE)
        cr_store_obj_at(store, obj->link_prev)->link_next = obj->link_next;
    else
        store->inflight_head = obj->link_next;
    if (obj->link_next != CR_STORE_NONE)
        cr_store_obj_at(store, obj->link_next)->link_prev = obj->link_prev;
    else
        store->inflight_tail = obj->link_prev;
    store->inflight_count--;
}

/* Removes the object from every index and recycles its slot.  With
 * release_space false the caller has taken over the replicas (parking). */
static void obj_free_ex(cr_store *store, uint32_t id, bool release_space, bool indexed) {
    struct cr_store_obj *obj = cr_store_obj_at(store, id);
    assert(obj->state != CR_OBJ_FREE);
    if (indexed) table_delete(store, id, obj->hash);
    if (obj->state == CR_OBJ_INFLIGHT) inflight_unlink(store, id);
    for (uint32_t r = 0; r < obj->replica_count && release_space; r++) {
        /* A task's reserved replica may still be written by its executor:
         * parked rather than handed to the next put. */
        const struct cr_store_replica *rep = &cr_store_reps(obj)[r];
        /* Reclaimed once both the release timeout and the task's deadline
         * have passed (the parking table counts from the entry's time). */
        uint64_t release = store->cfg.put_start_release_timeout_ms;
        uint64_t task = store->cfg.task_timeout_ms;
        if (rep->status == CR_REPLICA_PROCESSING &&
            store->discarded_count < store->cfg.max_discarded)
            store->discarded[store->discarded_count++] = (struct cr_store_discarded){
                obj->task_reserved_ms + (task > release ? task - release : 0), *rep, 0};
        else
            cr_store_replica_release(store, rep);
    }
    cr_store_tenant_charge(store, obj->tenant, cr_store_obj_charge(obj), false);
    store->replica_count -= obj->replica_count;
    cr_store_obj_free_key(obj);
    cr_store_obj_free_reps(obj);
    free(obj->meta);
    uint32_t generation = obj->generation + 1;
    uint16_t tenant = obj->tenant;
    memset(obj, 0, sizeof(*obj));
    obj->generation = generation;
    obj->link_next = store->free_head;
    store->free_head = id;
    store->object_count--;
    cr_store_tenant_unref(store, tenant); /* a tenant's last object frees its slot */
}

void cr_store_obj_free(cr_store *store, uint32_t id) {
    obj_free_ex(store, id, true, true);
}

void cr_store_obj_free_unindexed(cr_store *store, uint32_t id) {
    obj_free_ex(store, id, true, false);
}

/* ---- replica storage (store_internal.h) --------------------------------------- */

struct cr_store_replica *cr_store_reps_alloc(cr_store *store) {
    assert(store != NULL);
    struct cr_store_replica *more =
        store->reps_alloc_fails ? NULL : malloc(CR_STORE_REPLICAS_MAX * sizeof(*more));
    if (more == NULL)
        (void)cr_store_fail(store, CR_ERR_NOMEM,
                            "out of memory for an object's replica array (%zu bytes)",
                            CR_STORE_REPLICAS_MAX * sizeof(*more));
    return more;
}

int cr_store_obj_reps_reserve(cr_store *store, struct cr_store_obj *obj, uint32_t count) {
    assert(store != NULL && obj != NULL && count <= CR_STORE_REPLICAS_MAX);
    if (count <= 1 || obj->reps_more != NULL) return CR_OK;
    struct cr_store_replica *more = cr_store_reps_alloc(store);
    if (more == NULL) return CR_ERR_NOMEM;
    if (obj->replica_count == 1) more[0] = obj->rep_inline;
    obj->rep_inline = (struct cr_store_replica){0}; /* no stale path pointer */
    obj->reps_more = more;
    return CR_OK;
}

/* ---- small object helpers ------------------------------------------------------ */

bool cr_store_obj_leased(const struct cr_store_obj *obj, uint64_t now_ms) {
    return obj->lease_deadline_ms > now_ms;
}

bool cr_store_obj_busy(const struct cr_store_obj *obj, uint64_t now_ms) {
    return obj->tasks > 0 || cr_store_obj_leased(obj, now_ms);
}

/* The soft pin lapses when the object goes unaccessed for soft_pin_ttl and
 * comes back with the next access: evaluated here, so no sweep is needed. */
bool cr_store_obj_soft_pinned(const cr_store *store, const struct cr_store_obj *obj,
                              uint64_t now_ms) {
    if (!obj->with_soft_pin) return false;
    return now_ms < obj->last_access_ms ||
           now_ms - obj->last_access_ms < store->cfg.default_kv_soft_pin_ttl_ms;
}

void cr_store_obj_grant_lease(cr_store *store, struct cr_store_obj *obj, uint64_t now_ms) {
    assert(obj->state == CR_OBJ_COMPLETE);
    uint64_t deadline = now_ms + store->cfg.default_kv_lease_ttl_ms;
    if (deadline > obj->lease_deadline_ms) obj->lease_deadline_ms = deadline;
    /* The access time also renews the soft pin (cr_store_obj_soft_pinned). */
    if (now_ms > obj->last_access_ms) obj->last_access_ms = now_ms;
}

void cr_store_obj_fill_list(const cr_store *store, const struct cr_store_obj *obj,
                            bool complete_only, struct cr_store_replica_list *out) {
    assert(store != NULL && out != NULL);
    out->count = 0;
    out->lease_ms = 0;
    out->has_checksum = obj->has_checksum;
    out->checksum = obj->checksum;
    for (uint32_t r = 0; r < obj->replica_count; r++) {
        const struct cr_store_replica *rep = &cr_store_reps(obj)[r];
        if (complete_only && rep->status != CR_REPLICA_COMPLETE) continue;
        struct cr_store_replica_desc *d = &out->replicas[out->count++];
        if (rep->medium == CR_MEDIUM_DISK) {
            *d = (struct cr_store_replica_desc){
                .segment_id = CR_STORE_NO_SEGMENT, .segment_name = "", .size = obj->size,
                .status = (enum cr_replica_status)rep->status, .medium = CR_MEDIUM_DISK,
                .file_path = rep->path};
            continue;
        }
        const struct cr_store_segment *seg = &store->segments[rep->segment];
        bool local = rep->medium == CR_MEDIUM_LOCAL_DISK;
        *d = (struct cr_store_replica_desc){
            .segment_id = rep->segment, .segment_name = seg->name,
            .endpoint = seg->endpoint, .protocol = seg->protocol,
            .buffer = local ? rep->offset : seg->base + rep->offset, .size = obj->size,
            .status = (enum cr_replica_status)rep->status,
            .medium = (enum cr_replica_medium)rep->medium,
            .owner = local ? seg->owner : (struct cr_uuid){{0}},
            .cap_key = seg->has_cap_key ? seg->cap_key : NULL};
    }
}

/* The seed's [type, location] pair of one replica. */
static struct cr_store_event_replica event_replica(const cr_store *store,
                                                   const struct cr_store_replica *rep) {
    const char *type = cr_replica_medium_name((enum cr_replica_medium)rep->medium);
    if (rep->medium == CR_MEDIUM_DISK) return (struct cr_store_event_replica){type, rep->path};
    return (struct cr_store_event_replica){type, store->segments[rep->segment].endpoint};
}

/* Publishes the object with its first replica_count replicas (0: it is gone). */
static void emit_object(cr_store *store, enum cr_store_change_kind kind,
                        const struct cr_store_obj *obj, uint32_t replica_count) {
    assert(replica_count <= obj->replica_count);
    if (store->sink.on_event == NULL) return;
    /* Readable replicas only: a copy/move task's reserved replica is not
     * one until its commit. */
    struct cr_store_event_replica reps[CR_STORE_REPLICAS_MAX];
    uint32_t n = 0;
    for (uint32_t r = 0; r < replica_count; r++)
        if (cr_store_reps(obj)[r].status == CR_REPLICA_COMPLETE)
            reps[n++] = event_replica(store, &cr_store_reps(obj)[r]);
    struct cr_store_change ev = {
        .kind = kind, .tenant = cr_store_tenant_name(store, obj->tenant), .key = obj->key,
        .key_len = obj->key_len, .replicas = reps, .replica_count = n,
        .meta = (kind == CR_STORE_CHANGE_STORE && obj->meta) ? &obj->meta->meta : NULL};
    store->sink.on_event(store->sink.ctx, &ev);
}

void cr_store_obj_emit_update(cr_store *store, const struct cr_store_obj *obj) {
    emit_object(store, CR_STORE_CHANGE_UPDATE, obj, obj->replica_count);
}

void cr_store_obj_emit_store(cr_store *store, const struct cr_store_obj *obj) {
    emit_object(store, CR_STORE_CHANGE_STORE, obj, obj->replica_count);
}

/* Frees an object and, when subscribers were told of it (it is complete:
 * its STORE event went out at PutEnd), tells them it is gone with an UPDATE
 * that lists no replica.  An in-flight put was never published, so freeing
 * it (revoke, zombie reclaim, preemption, forced remove) says nothing. */
void cr_store_obj_remove(cr_store *store, uint32_t id) {
    const struct cr_store_obj *obj = cr_store_obj_at(store, id);
    if (obj->state == CR_OBJ_COMPLETE) emit_object(store, CR_STORE_CHANGE_UPDATE, obj, 0);
    cr_store_obj_free(store, id);
}

static struct cr_store_key key_seeded(const char *tenant, uint64_t seed, const char *key,
                                      uint32_t key_len) {
    return (struct cr_store_key){tenant, key, key_len, XXH3_64bits_withSeed(key, key_len, seed)};
}

void cr_store_key_make(const char *tenant, const char *key, uint32_t key_len,
                       struct cr_store_key *out) {
    assert(key != NULL && out != NULL);
    *out = key_seeded(tenant, cr_store_tenant_seed(tenant), key, key_len);
}

void cr_store_keys_make(const char *tenant, const char *const *keys, const uint32_t *lens,
                        size_t n, struct cr_store_key *out) {
    assert(keys != NULL && lens != NULL && out != NULL);
    uint64_t seed = cr_store_tenant_seed(tenant);
    for (size_t i = 0; i < n; i++) {
        assert(keys[i] != NULL);
        out[i] = key_seeded(tenant, seed, keys[i], lens[i]);
    }
}

static bool same_tenant(const char *a, const char *b) {
    if (a == b) return true;
    if (a == NULL || a[0] == '\0') return b == NULL || b[0] == '\0';
    return b != NULL && strcmp(a, b) == 0;
}

void cr_store_key_make_next(struct cr_store_key_maker *maker, const char *tenant, const char *key,
                            uint32_t key_len, struct cr_store_key *out) {
    assert(maker != NULL && key != NULL && out != NULL);
    /* "" and NULL are both the default tenant, and hash as it does. */
    if (!maker->primed || !same_tenant(maker->tenant, tenant)) {
        maker->seed = cr_store_tenant_seed(tenant);
        maker->primed = true;
    }
    maker->tenant = tenant;
    *out = key_seeded(tenant, maker->seed, key, key_len);
}


void cr_store_prefetch(const cr_store *store, const struct cr_store_key *k, bool deep) {
    assert(store != NULL && k != NULL);
    const struct cr_store_slot *slot = &store->table[cr_store_home(store, k->hash)];
    if (!deep) {
        __builtin_prefetch(slot);
        __builtin_prefetch(k->key); /* written by the gateway's thread: a miss here */
        return;
    }
    /* The home slot only: a probe that goes on is rare at the table's load. */
    if (slot->id_plus1 == 0 || slot->hash_hi != (uint32_t)(k->hash >> 32)) return;
    /* Every line up to the end of the inline replica: the key and state,
     * the lease and access times, the flags, and what a replica list reads
     * (an object with more replicas reads its overflow array besides).  An
     * object (176 bytes) does not start on a line, so it spans three or
     * four lines. */
    const char *from = (const char *)cr_store_obj_at(store, slot->id_plus1 - 1);
    const char *to = (const char *)(&((const struct cr_store_obj *)(const void *)from)->rep_inline + 1);
    for (const char *p = from; p < to; p += 64) __builtin_prefetch(p);
    __builtin_prefetch(to - 1);
}

/* Keys between a slot's prefetch and its object's, and between the
 * object's and its lookup: a few keys' work covers a miss. */
#define PREFETCH_AHEAD 4u

void cr_store_prefetch_batch(const cr_store *store, const struct cr_store_key *keys, size_t n,
                             size_t i) {
    assert(store != NULL && keys != NULL && i < n);
    if (i == 0) { /* the pipeline's start: what the steps before 0 would have done */
        for (size_t j = 0; j < n && j < 2 * PREFETCH_AHEAD; j++)
            cr_store_prefetch(store, &keys[j], false);
        for (size_t j = 0; j < n && j < PREFETCH_AHEAD; j++) cr_store_prefetch(store, &keys[j], true);
    }
    if (i + 2 * PREFETCH_AHEAD < n) cr_store_prefetch(store, &keys[i + 2 * PREFETCH_AHEAD], false);
    if (i + PREFETCH_AHEAD < n) cr_store_prefetch(store, &keys[i + PREFETCH_AHEAD], true);
}


int cr_store_validate_key(cr_store *store, const char *key, uint32_t key_len) {
    assert(store != NULL);
    if (key == NULL || key_len == 0)
        return cr_store_fail(store, CR_ERR_INVALID_PARAMS, "empty key");
    if (key_len > store->cfg.max_key_len)
        return cr_store_fail(store, CR_ERR_INVALID_PARAMS, "key of %u bytes exceeds %u", key_len,
                             store->cfg.max_key_len);
    return CR_OK;
}

/* ---- PutStart --------------------------------------------------------------- */

static bool strnok(const char *s) {
    return s == NULL || strnlen(s, CR_STORE_NAME_LEN_MAX + 1) <= CR_STORE_NAME_LEN_MAX;
}

static int put_validate(cr_store *store, const struct cr_store_put_params *p) {
    int rc = cr_store_validate_key(store, p->key, p->key_len);
    if (rc != CR_OK) return rc;
    const cr_store_config *c = &store->cfg;
    if (p->value_length > c->max_object_size_bytes) /* 0 is an empty object */
        return cr_store_fail(store, CR_ERR_INVALID_PARAMS, "value_length must be in [0, %llu]",
                             (unsigned long long)c->max_object_size_bytes);
    if (p->replica_num == 0 || p->replica_num > c->max_replicas_per_object)
        return cr_store_fail(store, CR_ERR_INVALID_PARAMS, "replica_num must be in [1, %u]",
                             c->max_replicas_per_object);
    if (p->replica_num > store->mounted_count)
        return cr_store_fail(store, CR_ERR_INVALID_PARAMS,
                             "replica_num %u above the %u mounted segments", p->replica_num,
                             store->mounted_count);
    if (!strnok(p->tenant) || !strnok(p->preferred_segment))
        return cr_store_fail(store, CR_ERR_INVALID_PARAMS, "tenant or segment name too long");
    const struct cr_store_block_meta *m = p->meta;
    if (m != NULL && (!strnok(m->model_name) || !strnok(m->block_hash) ||
                      !strnok(m->parent_block_hash) || m->token_count > c->block_token_ids_max ||
                      (m->token_count > 0 && m->token_ids == NULL)))
        return cr_store_fail(store, CR_ERR_INVALID_PARAMS, "block metadata out of bounds");
    return CR_OK;
}

static char *meta_put_string(char **cursor, const char *s) {
    if (s == NULL) s = "";
    size_t len = strlen(s) + 1;
    char *dst = *cursor;
    memcpy(dst, s, len);
    *cursor += len;
    return dst;
}

/* One allocation for the whole metadata: it lives only until PutEnd. */
static struct cr_store_meta_copy *meta_copy(const struct cr_store_block_meta *m) {
    size_t tokens = (size_t)m->token_count * sizeof(uint32_t);
    size_t strings = strlen(m->model_name ? m->model_name : "") +
                     strlen(m->block_hash ? m->block_hash : "") +
                     strlen(m->parent_block_hash ? m->parent_block_hash : "") + 3;
    struct cr_store_meta_copy *copy = malloc(sizeof(*copy) + tokens + strings);
    if (copy == NULL) return NULL;
    uint32_t *ids = (uint32_t *)(copy + 1);
    if (tokens > 0) memcpy(ids, m->token_ids, tokens);
    char *cursor = (char *)ids + tokens;
    copy->meta = (struct cr_store_block_meta){
        .block_size = m->block_size, .token_ids = ids, .token_count = m->token_count};
    copy->meta.model_name = meta_put_string(&cursor, m->model_name);
    copy->meta.block_hash = meta_put_string(&cursor, m->block_hash);
    copy->meta.parent_block_hash = meta_put_string(&cursor, m->parent_block_hash);
    return copy;
}

static bool plan_uses(const struct put_plan *plan, uint32_t segment) {
    for (uint32_t i = 0; i < plan->count; i++) {
        if (plan->replicas[i].segment == segment) return true;
    }
    return false;
}

static bool plan_try(cr_store *store, struct put_plan *plan, uint32_t segment, uint64_t size) {
    if (plan_uses(plan, segment)) return false;
    struct cr_store_segment *seg = &store->segments[segment];
    if (seg->draining) return false; /* a drain job empties it (store_drain.c) */
    cr_offset_allocation a;
    if (cr_offset_alloc_alloc(seg->alloc, size, &a) != CR_OK) return false;
    plan->replicas[plan->count++] = (struct cr_store_replica){
        .offset = a.offset, .size = a.size, .node = a.node, .segment = (uint16_t)segment,
        .status = CR_REPLICA_INITIALIZED};
    seg->used_bytes += a.size;
    store->used_bytes += a.size;
    return true;
}

/* Preferred segment, then random segments, then one sweep from a random
 * start so that failure really means no segment had room. */
static void plan_allocate(cr_store *store, struct put_plan *plan,
                          const struct cr_store_put_params *p) {
    uint32_t want = p->replica_num;
    uint64_t bytes = cr_store_alloc_bytes(p->value_length);
    if (p->preferred_segment != NULL && p->preferred_segment[0] != '\0') {
        int pref = cr_store_segment_lookup(store, p->preferred_segment);
        if (pref >= 0) plan_try(store, plan, (uint32_t)pref, bytes);
    }
    uint32_t n = store->mounted_count;
    for (uint32_t t = 0; t < ALLOC_RANDOM_TRIES * want && plan->count < want; t++) {
        uint32_t seg = store->mounted[cr_store_rng_next(&store->rng) % n];
        plan_try(store, plan, seg, bytes);
    }
    uint32_t start = (uint32_t)(cr_store_rng_next(&store->rng) % n);
    for (uint32_t i = 0; i < n && plan->count < want; i++)
        plan_try(store, plan, store->mounted[(start + i) % n], bytes);
}

static void plan_unwind(cr_store *store, struct put_plan *plan) {
    for (uint32_t i = 0; i < plan->count; i++) cr_store_replica_release(store, &plan->replicas[i]);
    plan->count = 0;
    free(plan->key_copy);
    free(plan->meta_copy);
    free(plan->reps_more);
}

/* One client may create at most max_tenants_per_client of the tenants that
 * hold objects, so that one caller cannot fill the table for everyone. */
static int tenant_check_creator(cr_store *store, const struct cr_uuid *client) {
    uint32_t created = 0;
    for (uint32_t i = 1; i < store->tenant_high; i++)
        created += store->tenants[i].name != NULL && cr_uuid_equal(&store->tenants[i].creator, client);
    if (created < store->cfg.max_tenants_per_client) return CR_OK;
    return cr_store_fail(store, CR_ERR_NOMEM,
                         "this client created %u tenants that still hold objects "
                         "(max_tenants_per_client): remove their objects, or raise "
                         "--max-tenants-per-client",
                         created);
}

/* Decides whether the key may be written and whether a zombie is preempted. */
static int plan_check_existing(cr_store *store, struct put_plan *plan, const struct cr_uuid *client,
                               const struct cr_store_put_params *p, uint64_t now_ms) {
    int t = cr_store_tenant_lookup(store, p->tenant);
    plan->existing = CR_STORE_NONE;
    plan->tenant_known = t >= 0;
    if (t < 0) {
        if (store->tenant_count == store->cfg.max_tenants)
            return cr_store_fail(store, CR_ERR_NOMEM,
                                 "tenant table full: %u tenants hold objects (max_tenants)",
                                 store->cfg.max_tenants);
        return tenant_check_creator(store, client);
    }
    plan->tenant = (uint16_t)t;
    plan->hash = p->key_hashed ? p->key_hash
                               : cr_store_key_hash(store, plan->tenant, p->key, p->key_len);
    uint32_t id = cr_store_obj_find(store, plan->tenant, p->key, p->key_len, plan->hash);
    if (id == CR_STORE_NONE) return CR_OK;
    const struct cr_store_obj *obj = cr_store_obj_at(store, id);
    bool zombie = obj->state == CR_OBJ_INFLIGHT && now_ms >= obj->put_start_ms &&
                  now_ms - obj->put_start_ms >= store->cfg.put_start_discard_timeout_ms;
    if (!zombie)
        return cr_store_fail(store, CR_ERR_OBJECT_ALREADY_EXISTS, "%s",
                             obj->state == CR_OBJ_COMPLETE ? "object exists"
                                                           : "object is being written");
    if (store->discarded_count + obj->replica_count > store->cfg.max_discarded)
        return cr_store_fail(store, CR_ERR_NOMEM, "discarded replica table full");
    plan->existing = id;
    return CR_OK;
}

static int plan_check_room(cr_store *store, const struct cr_uuid *client) {
    if (!slab_has_room(store))
        return cr_store_fail(store, CR_ERR_NOMEM,
                             "object table full: %u objects and none of those sampled can be "
                             "evicted (leased, pinned, in flight or held by a task): raise "
                             "max_objects (--max-objects), or remove objects",
                             store->object_count);
    if (store->client_count == store->cfg.max_clients && !cr_store_client_known(store, client))
        return cr_store_fail(store, CR_ERR_NOMEM, "client table full (max_clients)");
    return cr_store_index_reserve(store);
}

/* Why no segment took a replica: the bytes, or a segment's allocation
 * table at max_allocations_per_segment. */
static int no_room(cr_store *store, uint64_t size) {
    uint32_t full = 0;
    uint64_t largest = 0;
    for (uint32_t i = 0; i < store->mounted_count; i++) {
        const struct cr_store_segment *seg = &store->segments[store->mounted[i]];
        cr_offset_alloc_stats st;
        cr_offset_alloc_get_stats(seg->alloc, &st);
        full += st.allocation_count >= store->cfg.max_allocations_per_segment;
        if (seg->size > largest) largest = seg->size;
    }
    store->no_room_evictable = size <= largest;
    if (!store->no_room_evictable)
        return cr_store_fail(store, CR_ERR_NO_AVAILABLE_HANDLE,
                             "no segment has %llu free bytes: the largest of the %u mounted "
                             "segment(s) holds %llu bytes in all, so the object can never fit "
                             "(nothing was evicted for it); mount a larger segment",
                             (unsigned long long)size, store->mounted_count,
                             (unsigned long long)largest);
    if (full == 0)
        return cr_store_fail(store, CR_ERR_NO_AVAILABLE_HANDLE, "no segment has %llu free bytes",
                             (unsigned long long)size);
    return cr_store_fail(store, CR_ERR_NO_AVAILABLE_HANDLE,
                         "no segment has %llu free bytes or a free allocation: %u of %u segments "
                         "hold %u allocations each (max_allocations_per_segment, "
                         "--max-allocations-per-segment)",
                         (unsigned long long)size, full, store->mounted_count,
                         store->cfg.max_allocations_per_segment);
}

/* Moves a zombie's replicas to the parking table and drops the object. */
static void preempt(cr_store *store, uint32_t id) {
    struct cr_store_obj *obj = cr_store_obj_at(store, id);
    for (uint32_t r = 0; r < obj->replica_count; r++) {
        assert(store->discarded_count < store->cfg.max_discarded);
        store->discarded[store->discarded_count++] = (struct cr_store_discarded){
            obj->put_start_ms, cr_store_reps(obj)[r],
            r == 0 ? CR_STORE_DISCARD_PUT_FIRST : CR_STORE_DISCARD_PUT_MORE};
    }
    store->counters.zombies_preempted++;
    obj_free_ex(store, id, false, true);
}

static int plan_commit(cr_store *store, struct put_plan *plan, const struct cr_uuid *client,
                       const struct cr_store_put_params *p, uint64_t now_ms, uint32_t *id_out) {
    uint32_t generation;
    uint32_t id = slab_take(store, &generation);
    if (id == CR_STORE_NONE) return cr_store_fail(store, CR_ERR_NOMEM, "out of memory");
    if (!plan->tenant_known) {
        int rc = cr_store_tenant_intern(store, p->tenant, &plan->tenant);
        if (rc != CR_OK) { /* strdup failed: hand the slot back, caller unwinds */
            cr_store_obj_at(store, id)->link_next = store->free_head;
            store->free_head = id;
            return rc;
        }
        if (plan->tenant != 0) store->tenants[plan->tenant].creator = *client;
        plan->hash = p->key_hashed ? p->key_hash
                                   : cr_store_key_hash(store, plan->tenant, p->key, p->key_len);
    }
    /* The new object's reference, taken before a preempted object of the
     * same tenant drops its own: that may be the tenant's last. */
    cr_store_tenant_ref(store, plan->tenant);
    cr_store_tenant_charge(store, plan->tenant, cr_store_alloc_bytes(p->value_length) * plan->count,
                           true);
    if (plan->existing != CR_STORE_NONE) preempt(store, plan->existing);
    int rc = cr_store_client_touch(store, client, now_ms);
    assert(rc == CR_OK); /* room was checked */
    (void)rc;
    struct cr_store_obj *obj = cr_store_obj_at(store, id);
    *obj = (struct cr_store_obj){
        .key = plan->key_copy, .hash = plan->hash, .size = p->value_length,
        .put_start_ms = now_ms, .last_access_ms = now_ms, .meta = plan->meta_copy,
        .owner = *client, .key_len = p->key_len, .generation = generation,
        .tenant = plan->tenant, .state = CR_OBJ_INFLIGHT, .replica_count = (uint8_t)plan->count,
        .with_soft_pin = p->with_soft_pin};
    cr_store_obj_reps_init(obj, plan->reps_more, plan->replicas, plan->count);
    if (obj->key == NULL) { /* short key: kept inline */
        memcpy(obj->key_inline, p->key, p->key_len);
        obj->key = obj->key_inline;
    }
    table_insert(store, id, plan->hash);
    inflight_append(store, id);
    store->object_count++;
    store->replica_count += plan->count;
    *id_out = id;
    return CR_OK;
}

static int put_start_once(cr_store *store, const struct cr_uuid *client,
                          const struct cr_store_put_params *p, uint64_t now_ms,
                          struct cr_store_replica_list *out) {
    out->count = 0;
    out->has_checksum = false;
    out->lease_ms = 0;
    struct put_plan plan = {0};
    int rc = put_validate(store, p);
    /* Before the key is looked up: the victim may be the last object of the
     * put's tenant, which then leaves the tenant table. */
    if (rc == CR_OK && !slab_has_room(store)) (void)cr_store_evict_for_room(store, now_ms, false, NULL);
    if (rc == CR_OK) rc = plan_check_existing(store, &plan, client, p, now_ms);
    if (rc == CR_OK) rc = plan_check_room(store, client);
    /* The tenant's quota, charged per replica asked for (value_length and
     * replica_num are bounded by put_validate: no overflow). */
    if (rc == CR_OK)
        rc = cr_store_quota_admit(store, p->tenant,
                                  cr_store_alloc_bytes(p->value_length) * p->replica_num);
    if (rc != CR_OK) return rc;
    if (p->key_len > CR_STORE_KEY_INLINE) {
        plan.key_copy = malloc(p->key_len);
        if (plan.key_copy == NULL) return cr_store_fail(store, CR_ERR_NOMEM, "out of memory");
        memcpy(plan.key_copy, p->key, p->key_len);
    }
    if (p->meta != NULL && (plan.meta_copy = meta_copy(p->meta)) == NULL) {
        plan_unwind(store, &plan);
        return cr_store_fail(store, CR_ERR_NOMEM, "out of memory");
    }
    plan_allocate(store, &plan, p);
    if (plan.count == 0) {
        plan_unwind(store, &plan);
        return no_room(store, cr_store_alloc_bytes(p->value_length));
    }
    /* Only an object of more than one replica takes an overflow array. */
    if (plan.count > 1 && (plan.reps_more = cr_store_reps_alloc(store)) == NULL) {
        plan_unwind(store, &plan);
        return CR_ERR_NOMEM;
    }
    uint32_t id = CR_STORE_NONE; /* set by plan_commit on success */
    rc = plan_commit(store, &plan, client, p, now_ms, &id);
    if (rc != CR_OK) {
        plan_unwind(store, &plan);
        return rc;
    }
    /* Placed fewer than asked: Mooncake's best-effort degradation too. */
    if (plan.count < p->replica_num) store->counters.put_partial_allocations++;
    cr_store_obj_fill_list(store, cr_store_obj_at(store, id), false, out);
    return CR_OK;
}

/* A PutStart that finds no segment with room evicts for itself, one object
 * at a time (the oldest of a small sample, as at a full object table), and
 * tries again: the leases actor's passes keep used bytes below the high
 * watermark, but a steady put load into a full store would otherwise be
 * refused NO_AVAILABLE_HANDLE between two passes.  Each try starts over
 * (the victim may have been the last object of the put's tenant).  At most
 * put_evictions_max objects go for one put (0: none, the store's
 * default; crescentd sets 64); an object that can never fit,
 * or a store with nothing evictable (leased, pinned, in flight), is refused
 * as before.  Objects a store server's SSD could keep are not dropped for a
 * put (cr_store_evict_for_room): when only those are left, the put is
 * refused NO_AVAILABLE_HANDLE, which asks the segments actor for a pass,
 * and the pass offloads them; the client retries. */

int cr_store_put_start(cr_store *store, const struct cr_uuid *client,
                       const struct cr_store_put_params *p, uint64_t now_ms,
                       struct cr_store_replica_list *out) {
    assert(store != NULL && client != NULL && p != NULL && out != NULL);
    int rc = put_start_once(store, client, p, now_ms, out);
    bool offloadable = false;
    for (uint32_t i = 0; i < store->cfg.put_evictions_max && rc == CR_ERR_NO_AVAILABLE_HANDLE &&
                         store->no_room_evictable &&
                         cr_store_evict_for_room(store, now_ms, true, &offloadable);
         i++) {
        rc = put_start_once(store, client, p, now_ms, out);
    }
    if (rc == CR_ERR_NO_AVAILABLE_HANDLE && store->no_room_evictable && offloadable)
        return cr_store_fail(store, rc,
                             "no segment has %llu free bytes yet: the objects eviction would "
                             "free are kept on their store server's SSD first (offloaded, not "
                             "dropped); retry the put shortly",
                             (unsigned long long)cr_store_alloc_bytes(p->value_length));
    return rc;
}

/* ---- PutEnd, PutRevoke ------------------------------------------------------- */

int cr_store_put_end(cr_store *store, const struct cr_uuid *client, const char *tenant,
                     const char *key, uint32_t key_len, uint64_t now_ms) {
    if (key == NULL) return cr_store_not_found(store);
    struct cr_store_key k;
    cr_store_key_make(tenant, key, key_len, &k);
    return cr_store_put_end_k(store, client, &k, NULL, now_ms);
}

int cr_store_put_end_k(cr_store *store, const struct cr_uuid *client,
                       const struct cr_store_key *key, const uint64_t *checksum,
                       uint64_t now_ms) {
    assert(store != NULL && client != NULL && key != NULL);
    uint32_t id = cr_store_find_key(store, key);
    if (id == CR_STORE_NONE) return cr_store_not_found(store);
    struct cr_store_obj *obj = cr_store_obj_at(store, id);
    if (!cr_uuid_equal(&obj->owner, client))
        return cr_store_fail(store, CR_ERR_ILLEGAL_CLIENT, "put started by another client");
    if (obj->state == CR_OBJ_COMPLETE) {
        /* A retried PutEnd is fine; one that disagrees on the bytes is not. */
        bool same = checksum == NULL ? !obj->has_checksum
                                     : obj->has_checksum && obj->checksum == *checksum;
        if (same) return CR_OK;
        return cr_store_fail(store, CR_ERR_INVALID_PARAMS,
                             "put already ended with another checksum");
    }
    inflight_unlink(store, id);
    obj->has_checksum = checksum != NULL;
    obj->checksum = checksum != NULL ? *checksum : 0;
    obj->state = CR_OBJ_COMPLETE;
    for (uint32_t r = 0; r < obj->replica_count; r++)
        cr_store_reps(obj)[r].status = CR_REPLICA_COMPLETE;
    if (now_ms > obj->last_access_ms) obj->last_access_ms = now_ms;
    emit_object(store, CR_STORE_CHANGE_STORE, obj, obj->replica_count);
    free(obj->meta); /* only the STORE event needed it */
    obj->meta = NULL;
    return CR_OK;
}

int cr_store_put_revoke(cr_store *store, const struct cr_uuid *client, const char *tenant,
                        const char *key, uint32_t key_len) {
    if (key == NULL) return cr_store_not_found(store);
    struct cr_store_key k;
    cr_store_key_make(tenant, key, key_len, &k);
    return cr_store_put_revoke_k(store, client, &k);
}

int cr_store_put_revoke_k(cr_store *store, const struct cr_uuid *client,
                          const struct cr_store_key *key) {
    assert(store != NULL && client != NULL && key != NULL);
    uint32_t id = cr_store_find_key(store, key);
    if (id == CR_STORE_NONE) return cr_store_not_found(store);
    struct cr_store_obj *obj = cr_store_obj_at(store, id);
    if (!cr_uuid_equal(&obj->owner, client))
        return cr_store_fail(store, CR_ERR_ILLEGAL_CLIENT, "put started by another client");
    if (obj->state != CR_OBJ_INFLIGHT)
        return cr_store_fail(store, CR_ERR_INVALID_PARAMS, "put already ended");
    cr_store_obj_free(store, id);
    return CR_OK;
}

/* ---- for store_restore.c ------------------------------------------------------ */

uint32_t cr_store_slab_take(cr_store *store, uint32_t *generation) {
    return slab_take(store, generation);
}

void cr_store_table_insert(cr_store *store, uint32_t id, uint64_t hash) {
    table_insert(store, id, hash);
}

bool cr_store_slab_has_room(const cr_store *store) { return slab_has_room(store); }
