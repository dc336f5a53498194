/* Private layout of cr_store, shared by store.c, store_objects.c,
 * store_regex.c and store_evict.c.  Nothing outside src/core/store*.c
 * includes this file. */
#ifndef CRESCENT_CORE_STORE_INTERNAL_H
#define CRESCENT_CORE_STORE_INTERNAL_H

#include <assert.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/store.h"
#include "crescent/error.h"

#define CR_STORE_NONE UINT32_MAX
/* Objects live in fixed chunks so that growing the slab never moves them
 * and memory is only taken for chunks in use. */
#define CR_STORE_CHUNK_SHIFT 12u
#define CR_STORE_CHUNK_OBJECTS (1u << CR_STORE_CHUNK_SHIFT)

enum cr_store_obj_state {
    CR_OBJ_FREE = 0,
    CR_OBJ_INFLIGHT = 1,
    CR_OBJ_COMPLETE = 2,
};

/* A replica: memory (segment, allocation offset and node), disk (its
 * file path, owned, in place of the offset; segment CR_STORE_NO_SEGMENT) or
 * local_disk (the server's segment, the server's position in `offset`, no
 * allocation).  24 bytes: the medium takes what was padding. */
#define CR_STORE_NO_SEGMENT UINT16_MAX
struct cr_store_replica {
    union {
        uint64_t offset;
        char *path; /* CR_MEDIUM_DISK: malloc'd, freed by cr_store_replica_release */
    };
    uint64_t size;
    uint32_t node;
    uint16_t segment;
    uint8_t status; /* enum cr_replica_status */
    uint8_t medium; /* enum cr_replica_medium */
};
_Static_assert(sizeof(struct cr_store_replica) == 24, "replicas stay 24 bytes");

/* The node of a memory replica a bulk restore placed without claiming its
 * range (store_restore_bulk.c): no allocator hands out this node (they
 * count at most 2^30), and releasing such a replica frees nothing. */
#define CR_STORE_NODE_UNCLAIMED UINT32_MAX

static inline bool cr_store_rep_memory(const struct cr_store_replica *r) {
    return r->medium == CR_MEDIUM_MEMORY;
}

/* Block metadata copied at PutStart; one malloc holding strings and ids. */
struct cr_store_meta_copy {
    struct cr_store_block_meta meta;
    /* string and token bytes follow */
};

/* Short keys live inside the object: one cache miss and one malloc fewer on
 * the hot paths.  Fields read by every lookup sit in the first cache line. */
#define CR_STORE_KEY_INLINE 32u

struct cr_store_obj {
    char *key; /* key_inline or a malloc'd copy; key_len bytes, no NUL */
    uint64_t hash;
    uint32_t key_len;
    uint16_t tenant;
    uint8_t state;
    uint8_t replica_count;
    char key_inline[CR_STORE_KEY_INLINE];
    uint64_t lease_deadline_ms;
    uint64_t last_access_ms;
    uint64_t size;
    uint64_t put_start_ms;
    struct cr_store_meta_copy *meta;
    struct cr_uuid owner;
    uint32_t generation;
    uint32_t link_prev; /* in-flight list; free list uses link_next */
    uint32_t link_next;
    bool with_soft_pin;
    bool hard_pinned;
    bool has_checksum;
    /* Copy/move tasks holding a reservation on this object (store_tasks.c):
     * while any does, eviction skips the object and a removal without force
     * is refused, because an executor may be writing a reserved replica.
     * (Beside the flags: no padding hole, 8 bytes less per object.) */
    uint8_t tasks;
    uint64_t checksum; /* PutEnd's XXH3 of the bytes, when has_checksum */
    uint64_t task_reserved_ms; /* the latest reservation's time */
    /* The replicas, read through cr_store_reps(obj): nearly every object has
     * one (Mooncake's replica_num defaults to 1), kept in rep_inline; an
     * object that needs more holds all of them in reps_more, an array of
     * CR_STORE_REPLICAS_MAX malloc'd by cr_store_obj_reps_reserve (and freed
     * with the object).  NULL means inline, not a pointer to rep_inline: a
     * zeroed slab (cr_store_slab_reserve) or a copied object stays valid
     * with nothing to fix up.  Beside each other, so that a one-replica
     * object's replica list reads the lines its lookup read before. */
    struct cr_store_replica *reps_more;
    struct cr_store_replica rep_inline;
};
/* 176, not 336 with eight replicas inline: a restart writes every byte of
 * the slab (10 M objects were 3.2 GB the kernel zeroed first); keep it. */
_Static_assert(sizeof(struct cr_store_obj) <= 176, "an object stays at most 176 bytes");

static inline struct cr_store_replica *cr_store_reps_mut(struct cr_store_obj *obj) {
    return obj->reps_more != NULL ? obj->reps_more : &obj->rep_inline;
}
static inline const struct cr_store_replica *cr_store_reps_const(const struct cr_store_obj *obj) {
    return obj->reps_more != NULL ? obj->reps_more : &obj->rep_inline;
}
/* An object's replicas [0, replica_count): const for a const object. */
#define cr_store_reps(obj)                                                                   \
    _Generic((obj), const struct cr_store_obj *: cr_store_reps_const,                        \
             default: cr_store_reps_mut)(obj)

static inline void cr_store_obj_free_key(struct cr_store_obj *obj) {
    if (obj->key != obj->key_inline) free(obj->key);
    obj->key = NULL;
}

/* Frees the overflow array (with the object, or once it is back to one
 * replica); the replicas' own resources are the caller's. */
static inline void cr_store_obj_free_reps(struct cr_store_obj *obj) {
    free(obj->reps_more);
    obj->reps_more = NULL;
}

/* Back inline when the object is down to at most one replica (a removal,
 * an eviction, a task's rollback): the array is freed, so a store whose
 * objects went back to one replica holds no overflow arrays. */
static inline void cr_store_obj_reps_shrink(struct cr_store_obj *obj) {
    if (obj->reps_more == NULL || obj->replica_count > 1) return;
    if (obj->replica_count == 1) obj->rep_inline = obj->reps_more[0];
    cr_store_obj_free_reps(obj);
}

struct cr_store_segment {
    char *name;
    char *endpoint;
    char *protocol;
    uint64_t name_hash;
    uint64_t base;
    uint64_t size;
    uint64_t used_bytes;
    cr_offset_alloc *alloc;
    struct cr_uuid owner;
    uint32_t mounted_pos; /* index in store->mounted */
    uint64_t ssd_capacity; /* the owner's SSD tier (offload target), bytes; 0: none */
    bool in_use;
    bool draining; /* a drain job's source: no new allocations (store_drain.c) */
    bool has_cap_key;
    uint8_t cap_key[32]; /* CR_CAP_KEY_BYTES: cr_store_segment_set_key */
};

struct cr_store_client {
    struct cr_uuid id;
    uint64_t last_seen_ms;
    uint64_t conn; /* the connection (cr_store_set_caller) that first made it known */
    uint8_t secret[CR_STORE_CLIENT_SECRET_BYTES]; /* issued once; goes with the client */
    bool has_secret;
    bool in_use;
    bool awaiting; /* restored from the log, not heard from since (its segments
                      await their owner; any call of its own clears it) */
};

/* A tenant lives while something holds its id: each of its objects
 * (complete or in flight) and each call that keeps the id across changes
 * (cr_store_tenant_ref).  Slot 0 is "default" and never freed; a free slot
 * has name NULL and is reused by the next new tenant. */
struct cr_store_tenant {
    char *name;
    uint64_t seed;
    uint32_t refs;
    uint64_t charged; /* replica bytes of its objects (store_quota.c) */
    struct cr_uuid creator; /* the client whose put created it (max_tenants_per_client) */
};

/* A tenant's quota policy (store_quota.c). */
struct cr_store_quota {
    char *name;
    uint64_t requested;
};

/* A replica of a preempted put, parked until its release timeout. */
struct cr_store_discarded {
    uint64_t put_start_ms;
    struct cr_store_replica replica;
    /* A preempted put's replicas (preempt): the first of them is the put
     * (Mooncake counts released PutStarts, not replicas); 0 for a task's
     * reserved replica, which is no put. */
    uint8_t put; /* 0, CR_STORE_DISCARD_PUT_FIRST or _MORE */
};
enum { CR_STORE_DISCARD_PUT_FIRST = 1, CR_STORE_DISCARD_PUT_MORE = 2 };

/* Open-addressing slot: the high 32 hash bits, object id + 1.  A key's home
 * slot is the top bits of hash_hi (cr_store_home), so the index can double
 * from the slots alone, without reading an object; hash_hi whole is the
 * filter that spares a key comparison. */
struct cr_store_slot {
    uint32_t hash_hi;
    uint32_t id_plus1;
};

/* The key index starts this small and doubles at half full, up to the size
 * max_objects needs: an idle store's index is 128 KiB, not the 256 MiB that
 * 16 M objects take. */
#define CR_STORE_INDEX_SLOTS_MIN (1u << 14)

/* Regions of chunks a restore maps at once (cr_store_slab_reserve). */
#define CR_STORE_SLAB_REGIONS_MAX 8u

struct cr_store {
    cr_store_config cfg;
    struct cr_store_event_sink sink;
    uint64_t rng;
    uint64_t caller_conn; /* cr_store_set_caller: the connection of the call being run */

    struct cr_store_obj **chunks; /* max_objects / CHUNK rounded up */
    uint32_t chunk_count;         /* chunks allocated */
    /* Chunks mapped together by cr_store_slab_reserve (not calloc'd one by
     * one): chunks [first, first + count) lie in one mapping of `bytes`. */
    struct cr_store_slab_region {
        void *base;
        size_t bytes;
        uint32_t first, count;
    } slab_regions[CR_STORE_SLAB_REGIONS_MAX];
    uint32_t slab_region_count;
    uint32_t slab_high;           /* slots ever handed out */
    uint32_t lease_census_cursor; /* cr_store_lease_census_step: next slot */
    uint64_t lease_census_partial;/* leases counted by the walk under way */
    uint64_t lease_census;        /* the last whole walk's count */
    /* The same walk's soft-pinned objects, and objects with a complete
     * memory / file (disk or SSD) replica: partial and last whole. */
    uint64_t soft_pin_census_partial, soft_pin_census;
    uint64_t mem_cached_census_partial, mem_cached_census;
    uint64_t file_cached_census_partial, file_cached_census;
    uint32_t free_head;           /* free list of recycled slots */
    uint32_t object_count;

    struct cr_store_slot *table;
    uint32_t table_mask;  /* slots - 1 */
    uint32_t table_shift; /* 32 - log2(slots): home = hash_hi >> table_shift */
    uint32_t table_slots_max; /* the size max_objects needs (load <= 1/2) */

    uint32_t inflight_head; /* oldest PutStart first */
    uint32_t inflight_tail;
    uint32_t inflight_count;

    struct cr_store_segment *segments; /* max_segments */
    uint32_t *mounted;                 /* ids of mounted segments, dense */
    uint32_t mounted_count;

    struct cr_store_client *clients; /* open addressing, clients_mask + 1 */
    uint32_t clients_mask;
    uint32_t client_count;

    struct cr_store_tenant *tenants; /* max_tenants slots */
    uint32_t tenant_count;           /* live tenants, "default" included */
    uint32_t tenant_high;            /* slots [0, tenant_high) may be live */

    struct cr_store_discarded *discarded;
    uint32_t discarded_count;

    struct cr_store_quota *quotas; /* max_tenants slots, [0, quota_count) set */
    uint32_t quota_count;
    uint64_t quota_requested_sum;

    uint64_t capacity_bytes;
    uint64_t used_bytes;
    uint64_t replica_count;
    /* Replicas and bytes off the memory pool (store_tiers.c), by medium. */
    uint64_t medium_replicas[CR_MEDIUM_COUNT];
    uint64_t medium_bytes[CR_MEDIUM_COUNT];
    void (*file_hook)(void *ctx, const char *path); /* cr_store_set_file_hook */
    void *file_hook_ctx;
    bool file_hook_muted; /* a replacement keeping its path */
    struct cr_store_stats counters; /* only the cumulative fields are kept here */
    struct cr_store_ssd_park *ssd_park; /* store_ssd_park.c; NULL: nothing parked */
    /* Memory that offloads in flight will free once committed
     * (store_offload.c): eviction does not count it as used, or every poll
     * until the first commit would hand more objects to the SSD. */
    uint64_t offload_pending_bytes;
    struct cr_store_promote *promote; /* SSD hit counters (store_promote.c); NULL: off */

    struct cr_store_bulk *bulk; /* a bulk restore under way (store_restore_bulk.c); NULL: none */
    /* Objects restored but not yet in the key index (store_restore_index.c);
     * NULL: every object is in it. */
    struct cr_store_index_pending *index_pending;

    char err[CR_STORE_ERROR_LEN];
    /* The last NO_AVAILABLE_HANDLE: could freeing space have made room?  False
     * when the object is larger than every mounted segment. */
    bool no_room_evictable;
    /* Unit tests set it to make the next overflow arrays' malloc fail
     * (cr_store_reps_alloc), so that the unwinding is tested; never set
     * otherwise. */
    bool reps_alloc_fails;
};

/* store_quota.c: a tenant's replica bytes go up or down; a PutStart of
 * `bytes` more is admitted or refused TENANT_QUOTA_EXCEEDED. */
void cr_store_tenant_charge(cr_store *store, uint16_t tenant, uint64_t bytes, bool add);
int cr_store_quota_admit(cr_store *store, const char *tenant, uint64_t bytes);
void cr_store_quotas_free(cr_store *store);

/* Records the message for cr_store_last_error and returns `status`. */
int cr_store_fail(cr_store *store, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Bytes to allocate for a replica of a value_length-byte object.  A 0-byte
 * object's replicas each take a 1-byte allocation while the object (and so
 * every BufHandle) records size 0: every replica then owns an allocator node
 * and an address inside its segment, so release, eviction, unmount, zombie
 * reclaim and task reservations need no case for "holds no bytes", and the
 * allocator's bound on allocations per segment bounds these objects too. */
static inline uint64_t cr_store_alloc_bytes(uint64_t value_length) {
    return value_length > 0 ? value_length : 1;
}

/* What replica r charges its tenant: memory replicas only.  A disk or
 * local_disk replica takes no segment space, and tenant quotas are on the
 * memory pool (docs/tiers.md). */
static inline uint64_t cr_store_rep_charge(const struct cr_store_obj *obj, uint32_t r) {
    assert(r < obj->replica_count);
    return cr_store_rep_memory(&cr_store_reps(obj)[r]) ? cr_store_alloc_bytes(obj->size) : 0;
}

/* What all of an object's replicas charge its tenant. */
static inline uint64_t cr_store_obj_charge(const struct cr_store_obj *obj) {
    uint64_t bytes = 0;
    for (uint32_t r = 0; r < obj->replica_count; r++) bytes += cr_store_rep_charge(obj, r);
    return bytes;
}

static inline struct cr_store_obj *cr_store_obj_at(const cr_store *store, uint32_t id) {
    return &store->chunks[id >> CR_STORE_CHUNK_SHIFT][id & (CR_STORE_CHUNK_OBJECTS - 1)];
}

static inline uint32_t cr_store_home(const cr_store *store, uint64_t hash) {
    return (uint32_t)(hash >> 32) >> store->table_shift;
}

static inline uint64_t cr_store_rng_next(uint64_t *state) {
    /* xorshift64*: fast, good enough to spread replicas and samples. */
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

static inline bool cr_uuid_equal(const struct cr_uuid *a, const struct cr_uuid *b) {
    return memcmp(a->b, b->b, sizeof(a->b)) == 0;
}

/* store.c */
/* An anonymous mapping, zeroed, hinted to huge pages and written through
 * (see store.c for why); NULL when the kernel refuses it. */
void *cr_store_map_zeroed(size_t bytes);
void cr_store_unmap(void *p, size_t bytes);
/* Like cr_store_map_zeroed, but 2 MiB-aligned and not touched: each 2 MiB
 * faults in once, as one huge page where the kernel gives them. */
void *cr_store_map_huge(size_t bytes);
int cr_store_tenant_lookup(const cr_store *store, const char *tenant); /* -1 unknown */
uint64_t cr_store_tenant_seed(const char *tenant); /* the seed of its keys' hashes */
/* Finds or adds a tenant; a new one holds no reference yet, so the caller
 * takes one (cr_store_tenant_ref) before anything else can run.  Returns
 * CR_OK, CR_ERR_INVALID_PARAMS (name too long) or CR_ERR_NOMEM (table full). */
int cr_store_tenant_intern(cr_store *store, const char *tenant, uint16_t *out);
void cr_store_tenant_ref(cr_store *store, uint16_t tenant);
/* Drops a reference; the last one frees the tenant's slot (except "default"). */
void cr_store_tenant_unref(cr_store *store, uint16_t tenant);
const char *cr_store_tenant_name(const cr_store *store, uint16_t tenant);
bool cr_store_client_known(const cr_store *store, const struct cr_uuid *client);
int cr_store_client_touch(cr_store *store, const struct cr_uuid *client, uint64_t now_ms);
int cr_store_segment_lookup(const cr_store *store, const char *name); /* -1 unknown */
void cr_store_replica_release(cr_store *store, const struct cr_store_replica *replica);

/* store_objects.c */
/* Makes room in the key index for one more object, doubling it at half
 * full.  Returns CR_OK or CR_ERR_NOMEM (message set). */
int cr_store_index_reserve(cr_store *store);
/* The same for `more` objects at once (a restore sizes it once); grows to
 * at most the index's ceiling, where the last insert fails as above. */
int cr_store_index_reserve_for(cr_store *store, uint64_t more);
/* Maps the slab chunks `more` new objects need beyond those allocated, in
 * one region hinted to huge pages (store_objects.c).  CR_OK, or
 * CR_ERR_NOMEM (nothing changed: the slab grows chunk by chunk as before). */
int cr_store_slab_reserve(cr_store *store, uint64_t more);
uint32_t cr_store_obj_find(const cr_store *store, uint16_t tenant, const char *key,
                           uint32_t key_len, uint64_t hash);
uint64_t cr_store_key_hash(const cr_store *store, uint16_t tenant, const char *key,
                           uint32_t key_len);
void cr_store_obj_free(cr_store *store, uint32_t id);
/* Makes room for `count` replicas in the object (count <= CR_STORE_REPLICAS_MAX):
 * above one, its replicas move to an overflow array.  Call before
 * replica_count grows.  CR_OK, or CR_ERR_NOMEM with the message set and the
 * object unchanged. */
int cr_store_obj_reps_reserve(cr_store *store, struct cr_store_obj *obj, uint32_t count);
/* An overflow array for a new object's replicas (PutStart, restore), taken
 * before anything changes; NULL: CR_ERR_NOMEM, message set. */
struct cr_store_replica *cr_store_reps_alloc(cr_store *store);
/* A new object's `count` replicas: inline for one, else into `more`
 * (cr_store_reps_alloc, owned by the object from now; NULL for one). */
static inline void cr_store_obj_reps_init(struct cr_store_obj *obj, struct cr_store_replica *more,
                                          const struct cr_store_replica *reps, uint32_t count) {
    assert(obj->reps_more == NULL && count <= CR_STORE_REPLICAS_MAX);
    assert((count > 1) == (more != NULL));
    obj->reps_more = more;
    memcpy(cr_store_reps(obj), reps, count * sizeof(*reps));
}
void cr_store_obj_fill_list(const cr_store *store, const struct cr_store_obj *obj,
                            bool complete_only, struct cr_store_replica_list *out);
void cr_store_obj_emit_update(cr_store *store, const struct cr_store_obj *obj);
/* A STORE event for an object that appears other than by PutEnd (store_promote.c). */
void cr_store_obj_emit_store(cr_store *store, const struct cr_store_obj *obj);
void cr_store_obj_remove(cr_store *store, uint32_t id); /* free + "gone" event if published */
bool cr_store_obj_leased(const struct cr_store_obj *obj, uint64_t now_ms);
/* Leased, or holding a copy/move task's reservation: not to be removed
 * without force, nor evicted. */
bool cr_store_obj_busy(const struct cr_store_obj *obj, uint64_t now_ms);
bool cr_store_obj_soft_pinned(const cr_store *store, const struct cr_store_obj *obj,
                              uint64_t now_ms);
void cr_store_obj_grant_lease(cr_store *store, struct cr_store_obj *obj, uint64_t now_ms);
void cr_store_obj_drop_segment(cr_store *store, uint32_t segment, uint64_t *freed);
void cr_store_obj_revoke_client(cr_store *store, const struct cr_uuid *client);
void cr_store_discarded_drop_segment(cr_store *store, uint32_t segment);

/* For store_restore.c: slab_take, table_insert and slab_has_room of
 * store_objects.c. */
uint32_t cr_store_slab_take(cr_store *store, uint32_t *generation);
void cr_store_table_insert(cr_store *store, uint32_t id, uint64_t hash);
bool cr_store_slab_has_room(const cr_store *store);

/* store_restore_bulk.c: a memory replica placed unclaimed on segment `seg`. */
void cr_store_bulk_note(cr_store *store, uint32_t seg);

/* store_objects.c: frees object `id` as cr_store_obj_free does, except that
 * its key index slot is the caller's (the sorted build reuses it for the
 * key's later object, store_restore_index.c). */
void cr_store_obj_free_unindexed(cr_store *store, uint32_t id);

/* store_restore_index.c: while the index is deferred, room for one more
 * object restored without it (slab, index size, the pending array); false
 * when there is none: the caller builds the index and goes on without. */
bool cr_store_index_pending_room(cr_store *store);
/* Object `id`, of hash `hash`, is to be put in the index by the build. */
void cr_store_index_pending_add(cr_store *store, uint32_t id, uint64_t hash);
/* Frees the notes of a deferred index unbuilt (cr_store_destroy). */
void cr_store_restore_index_drop(cr_store *store);

/* store_evict.c */
/* Evicts one object, the oldest of a small sample, to make room for a
 * PutStart.  keep_offloadable (room in a segment, which an offload frees
 * too): objects cr_store_offload_wanted names are not drawn, and
 * *offloadable_seen (may be NULL) tells whether one was passed over.
 * Returns false when none of the sample could be evicted. */
bool cr_store_evict_for_room(cr_store *store, uint64_t now_ms, bool keep_offloadable,
                             bool *offloadable_seen);

/* store_offload.c: whether dropping obj's memory replicas would lose an
 * object a store server's SSD could keep: no replica on another tier, and
 * cr_store_offload_begin would take it once it is idle (a checksum, a free
 * replica slot, a COMPLETE memory replica on a segment whose SSD holds its
 * size). */
bool cr_store_offload_wanted(const cr_store *store, const struct cr_store_obj *obj);

/* store_segments.c: frees segment `id`'s slot, allocator and name; its
 * objects' replicas must already be dropped (cr_store_obj_drop_segment).
 * Used by unmount and by cr_store_destroy. */
void cr_store_segment_release(cr_store *store, uint32_t id);

/* Lookups shared by the object files (store_objects.c, store_reads.c,
 * store_remove.c); inline because they sit on every read's path. */
/* Finds a key; returns CR_STORE_NONE for unknown tenants and keys. */
static inline uint32_t cr_store_find_key(const cr_store *store, const struct cr_store_key *k) {
    int t = cr_store_tenant_lookup(store, k->tenant);
    if (t < 0 || k->key == NULL) return CR_STORE_NONE;
    return cr_store_obj_find(store, (uint16_t)t, k->key, k->key_len, k->hash);
}

/* cr_store_find_key for the plain (unhashed) forms. */
static inline uint32_t cr_store_find_plain(const cr_store *store, const char *tenant,
                                           const char *key, uint32_t key_len) {
    if (key == NULL) return CR_STORE_NONE;
    struct cr_store_key k;
    cr_store_key_make(tenant, key, key_len, &k);
    return cr_store_find_key(store, &k);
}

static inline int cr_store_not_found(cr_store *store) {
    return cr_store_fail(store, CR_ERR_OBJECT_NOT_FOUND, "object not found");
}

/* store_promote.c: a GetReplicaList of object `id` (promotion's hits),
 * and the release of the hit table. */
void cr_store_promote_note(cr_store *store, uint32_t id, const struct cr_store_obj *obj,
                           uint64_t now_ms);
void cr_store_promote_free(cr_store *store);

#endif
