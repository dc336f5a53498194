/* Store master core: segments, objects, replicas, leases, eviction mechanism,
 * soft pin, zombie puts and client liveness (seed 004, wire-formats §6).
 *
 * Single-threaded (src/core): the segment manager actor owns one cr_store and
 * is the only caller.  Time comes in as `now_ms` (milliseconds, monotonic);
 * randomness comes from a seeded generator inside the store so tests are
 * reproducible.  Nothing here logs; a failing call returns a cr_status and
 * leaves a one-line explanation in cr_store_last_error().
 *
 * Ownership: strings passed in are copied when the store keeps them.  Views
 * and descriptors handed out (replica descriptors, object views, events)
 * point into store memory and stay valid only until the next call that
 * changes the store (any call taking a non-const store). */
#ifndef CRESCENT_CORE_STORE_H
#define CRESCENT_CORE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/offset_alloc.h"

/* Compile-time ceiling for cr_store_config.max_replicas_per_object: replicas
 * live inline in each object so that an object costs no extra allocation. */
#define CR_STORE_REPLICAS_MAX 8u
#define CR_STORE_KEY_LEN_MAX 4096u      /* ceiling for max_key_len */
#define CR_STORE_NAME_LEN_MAX 256u      /* segment names, tenants, protocols */
#define CR_STORE_ENDPOINT_LEN_MAX 256u  /* "host:port" */
#define CR_STORE_ERROR_LEN 256u
/* A disk replica's file path (the shared file tier, docs/tiers.md). */
#define CR_STORE_FILE_PATH_LEN_MAX 1024u
#define CR_STORE_DEFAULT_TENANT "default"

typedef struct cr_store cr_store;

struct cr_uuid {
    uint8_t b[16];
};

/* Settings.  Names follow the reference master's flags. */
typedef struct cr_store_config {
    uint64_t default_kv_lease_ttl_ms;          /* 5000 */
    uint64_t default_kv_soft_pin_ttl_ms;       /* 30 min; at most 24 h */
    bool allow_evict_soft_pinned_objects;      /* true */
    double eviction_high_watermark_ratio;      /* 0.95 */
    double eviction_ratio;                     /* 0.05 */
    uint64_t put_start_discard_timeout_ms;     /* 30 s; < release timeout */
    uint64_t put_start_release_timeout_ms;     /* 10 min */
    uint64_t client_live_ttl_ms;               /* 10 s */
    uint64_t task_timeout_ms;                  /* 300 s: a copy/move task's deadline */
    uint32_t max_key_len;                      /* 4096 bytes */
    uint32_t max_objects;                      /* live objects (incl. in-flight puts): 2^24 */
    uint32_t max_segments;                     /* mounted segments, ≤ 65535 */
    uint32_t max_clients;                      /* known clients */
    uint32_t max_tenants;                      /* tenants holding objects at once */
    uint32_t max_tenants_per_client;           /* of those, created by one client: 16 */
    uint32_t max_segments_per_client;          /* mounted by one client: 64 */
    uint64_t min_segment_size_bytes;           /* smallest segment mounted: 4096 (a page) */
    uint32_t max_replicas_per_object;          /* ≤ CR_STORE_REPLICAS_MAX */
    uint32_t max_allocations_per_segment;      /* live allocations of one segment: 2^24 */
    uint32_t max_discarded;                    /* parked replicas of preempted puts */
    uint64_t max_object_size_bytes;            /* largest value_length accepted */
    uint32_t regex_match_limit;                /* PCRE2 match limit */
    uint32_t regex_depth_limit;                /* PCRE2 depth limit */
    uint32_t regex_max_matches;                /* keys one regex call may match: 10000 */
    uint64_t regex_budget_steps;               /* PCRE2 steps one regex call may take */
    uint32_t block_token_ids_max;              /* token ids kept per PutStart */
    uint64_t rng_seed;                         /* allocation strategy randomness */
    uint32_t put_evictions_max; /* objects one PutStart may evict for room: 0 (crescentd: 64) */
} cr_store_config;

/* Fills *out with the seed defaults. */
void cr_store_config_default(cr_store_config *out);

/* Checks every setting.  Returns CR_OK, or CR_ERR_INVALID_PARAMS and writes a
 * NUL-terminated sentence naming the wrong setting into msg (when msg_len > 0). */
int cr_store_config_validate(const cr_store_config *cfg, char *msg, size_t msg_len);

/* ---- events ------------------------------------------------------------ */

enum cr_store_change_kind {
    CR_STORE_CHANGE_STORE = 1,      /* first PutEnd of an object */
    CR_STORE_CHANGE_UPDATE = 2,     /* replica set of a complete object changed */
    CR_STORE_CHANGE_REMOVE_ALL = 3, /* RemoveAll ran */
};

struct cr_store_event_replica {
    const char *type;     /* "memory", "disk" or "local_disk" (seed 000) */
    const char *location; /* memory, local_disk: an endpoint "host:port"; disk: a file path */
};

/* Block metadata a PutStart may carry; published with the STORE event.
 * Strings are NUL-terminated; NULL and 0 mean "unset". */
struct cr_store_block_meta {
    const char *model_name;
    uint32_t block_size;
    const char *block_hash;
    const char *parent_block_hash;
    const uint32_t *token_ids;
    uint32_t token_count;
};

/* Points into store memory, valid only during the callback.  For UPDATE a
 * replica_count of 0 means the object is gone (removed, evicted, cleared or
 * its last replica unmounted).  Only complete objects publish UPDATE: a put
 * that never ended was never published, so its end says nothing.
 * For REMOVE_ALL key is NULL; tenant is NULL when every tenant was cleared
 * and removed_count says how many objects went. */
struct cr_store_change {
    enum cr_store_change_kind kind;
    const char *tenant;
    const char *key;
    uint32_t key_len;
    const struct cr_store_event_replica *replicas;
    uint32_t replica_count;
    const struct cr_store_block_meta *meta; /* STORE with metadata; NULL otherwise */
    uint64_t removed_count;                 /* REMOVE_ALL only */
};

/* The callback must not call back into the store. */
struct cr_store_event_sink {
    void (*on_event)(void *ctx, const struct cr_store_change *ev);
    void *ctx;
};

/* ---- lifecycle ----------------------------------------------------------- */

/* Creates a store.  `sink` may be NULL (events dropped).  Returns CR_OK,
 * CR_ERR_INVALID_PARAMS (config invalid; see msg via cr_store_config_validate)
 * or CR_ERR_NOMEM. */
int cr_store_create(const cr_store_config *cfg, const struct cr_store_event_sink *sink,
                    cr_store **out);
void cr_store_destroy(cr_store *store);
const cr_store_config *cr_store_get_config(const cr_store *store);

/* The explanation of the last failed call; "" when none. */
const char *cr_store_last_error(const cr_store *store);

/* After a PutStart refused with CR_ERR_NO_AVAILABLE_HANDLE: true when
 * eviction could make room (some mounted segment is at least the object's
 * size), false when the object is larger than every mounted segment, so
 * evicting would destroy data and still not fit it. */
bool cr_store_no_room_evictable(const cr_store *store);

/* Forgets the last explanation, so a caller that clears it before a call
 * knows a non-empty one afterwards belongs to that call. */
void cr_store_clear_error(cr_store *store);

/* ---- clients and segments ---------------------------------------------- */

struct cr_store_segment_params {
    const char *name;
    uint64_t base;
    uint64_t size;
    const char *endpoint; /* "host:port" of the transport */
    const char *protocol; /* "tcp" or "rdma" */
};

/* Gives mounted segment `name` its data-plane capability key (32 bytes,
 * core/xfer_cap.h's CR_CAP_KEY_BYTES), replacing any it had: the RPC layer
 * signs its handles' capabilities with it (rpc/rpc_caps.h).  Kept in memory
 * only: never in views, events, logs or the durable log (a restored segment
 * has none until its owner remounts).  Returns CR_OK or
 * CR_ERR_SEGMENT_NOT_FOUND. */
int cr_store_segment_set_key(cr_store *store, const char *name, const uint8_t key[32]);

/* Mounts a segment owned by `client` (which counts as a sign of life).
 * Returns CR_OK, CR_ERR_SEGMENT_ALREADY_EXISTS (name taken), or
 * CR_ERR_INVALID_PARAMS (size 0, base+size overflows, range overlapping another
 * segment of the same client, bad strings), CR_ERR_NOMEM (segment or client
 * table full).  Changes nothing on error. */
int cr_store_mount_segment(cr_store *store, const struct cr_uuid *client,
                           const struct cr_store_segment_params *params, uint64_t now_ms);

/* Like mount, but a segment of that name already mounted by the same client
 * with identical parameters is CR_OK (no change).  Same name with another
 * owner or other parameters → CR_ERR_SEGMENT_ALREADY_EXISTS. */
int cr_store_remount_segment(cr_store *store, const struct cr_uuid *client,
                             const struct cr_store_segment_params *params, uint64_t now_ms);

/* Unmounts a segment: every replica on it is dropped, objects left with none
 * are freed (counted into *freed_objects when non-NULL), complete objects that
 * keep replicas produce an UPDATE event.  `client` NULL skips the owner check.
 * Returns CR_OK, CR_ERR_SEGMENT_NOT_FOUND or CR_ERR_ILLEGAL_CLIENT. */
int cr_store_unmount_segment(cr_store *store, const struct cr_uuid *client, const char *name,
                             uint64_t *freed_objects);

/* Records the SSD tier the owner of mounted segment `name` announced at its
 * (re)mount, in bytes (0: none): memory eviction offloads objects on that
 * segment there (store_offload.h).  Not identity: a remount may change it.
 * Returns CR_OK or CR_ERR_SEGMENT_NOT_FOUND. */
int cr_store_segment_set_ssd_capacity(cr_store *store, const char *name, uint64_t bytes);

/* Records a heartbeat of a known client (one that mounted or put); an
 * unknown one is not registered.  *was_known (may be NULL) says which: a
 * store server the store has forgotten (restart, expiry) remounts its
 * segments, which makes it known again.  Returns CR_OK. */
int cr_store_client_ping(cr_store *store, const struct cr_uuid *client, uint64_t now_ms,
                         bool *was_known);

/* After a restart: marks a restored client (one the log named as a segment's
 * owner) as not heard from yet; its segments show awaiting_owner until its
 * next call of its own (any touch clears the mark) or its expiry after the
 * TTL.  An unknown client is ignored. */
void cr_store_client_set_awaiting(cr_store *store, const struct cr_uuid *client);
bool cr_store_client_awaiting(const cr_store *store, const struct cr_uuid *client);

/* A client's secret: issued by the master at the client's first Mount or
 * Ping (the caller draws the bytes from getrandom: the store stays pure) and
 * required on its later state-changing calls, so a client id read from
 * GET /api/v1/segments/NAME is not enough to act as that client. */
#define CR_STORE_CLIENT_SECRET_BYTES 16u

/* Gives a known client without a secret `secret` and copies it to *issued
 * (true); a client that has one keeps it (*issued false).  An unknown
 * client gets none.  Returns CR_OK. */
int cr_store_client_issue_secret(cr_store *store, const struct cr_uuid *client,
                                 const uint8_t secret[CR_STORE_CLIENT_SECRET_BYTES],
                                 bool *issued);

/* Names the connection the calls that follow come on (a tag the caller
 * makes from its transport's peer identity; 0 by default).  A client is
 * bound to the connection of the call that first makes it known (its first
 * Mount or PutStart), and its secret is issued only on that connection: a
 * Ping with a put-only client's id from another connection is not given
 * the secret (it was, and the real client was then locked out). */
void cr_store_set_caller(cr_store *store, uint64_t conn);

/* Whether `client` is known, has no secret yet (one is due) and is bound to
 * the current caller's connection (cr_store_set_caller). */
bool cr_store_client_wants_secret(const cr_store *store, const struct cr_uuid *client);

/* Checks `secret` (len bytes, NULL/0: none) against the one `client` was
 * issued, in constant time.  CR_OK when the client is unknown, has no
 * secret, or the secret matches; CR_ERR_ILLEGAL_CLIENT with a sentence
 * saying what to do otherwise. */
int cr_store_client_check_secret(cr_store *store, const struct cr_uuid *client,
                                 const uint8_t *secret, size_t len);

/* Unmounts the segments and revokes the unfinished puts of every client whose
 * last sign of life is older than client_live_ttl_ms, then forgets it.
 * Returns the number of clients expired. */
uint32_t cr_store_expire_clients(cr_store *store, uint64_t now_ms);

/* As cr_store_expire_clients, calling gone(arg, id) for each client it
 * forgets, after its segments are unmounted (gone NULL: none). */
uint32_t cr_store_expire_clients_each(cr_store *store, uint64_t now_ms,
                                      void (*gone)(void *arg, const struct cr_uuid *client),
                                      void *arg);

/* Segments mounted now (O(1)): the segments actor compares it around an
 * expiry, so it reports the TTL unmounting segments, not every CLI call's
 * client being forgotten. */
uint32_t cr_store_mounted_count(const cr_store *store);

/* For each client_ids[i], calls fn(ctx, i, host, host_len) once per distinct
 * host of its segments' endpoints ("host" of "host:port", "v6" of "[v6]:port").
 * Clients without segments produce no call.  Returns CR_OK. */
int cr_store_batch_query_ip(const cr_store *store, const struct cr_uuid *client_ids, size_t n,
                            void (*fn)(void *ctx, size_t index, const char *host,
                                       size_t host_len),
                            void *ctx);

/* ---- objects ------------------------------------------------------------- */

enum cr_replica_status {
    CR_REPLICA_UNDEFINED = 0,
    CR_REPLICA_INITIALIZED = 1,
    CR_REPLICA_PROCESSING = 2,
    CR_REPLICA_COMPLETE = 3,
    CR_REPLICA_REMOVED = 4,
    CR_REPLICA_FAILED = 5,
};

/* The tier a replica lives on (seed 000's replica types).
 *  MEMORY      bytes in a mounted segment: segment, endpoint, buffer.
 *  DISK        a file of the shared file tier (--root_fs_dir): file_path;
 *              an object has at most one.
 *  LOCAL_DISK  the SSD of the store server that owns a mounted segment:
 *              segment (the server's), endpoint, owner, and in `buffer` the
 *              position the server gave it; at most one per segment. */
#ifndef CR_REPLICA_MEDIUM_DEFINED /* the same enum as crescent/client.h's */
#define CR_REPLICA_MEDIUM_DEFINED
enum cr_replica_medium {
    CR_MEDIUM_MEMORY = 0,
    CR_MEDIUM_DISK = 1,
    CR_MEDIUM_LOCAL_DISK = 2,
};
#endif
#define CR_MEDIUM_COUNT 3u

/* "memory", "disk", "local_disk" (the seed's names); "?" out of range. */
const char *cr_replica_medium_name(enum cr_replica_medium medium);
/* Parses one of those names (len bytes); returns CR_OK or CR_ERR_INVALID_PARAMS. */
int cr_replica_medium_parse(const char *name, size_t len, enum cr_replica_medium *out);

/* Where one replica lives.  Memory: buffer = segment base + allocation
 * offset.  Disk: segment_name "" and endpoint/protocol NULL, file_path set.
 * Local disk: the server's segment and endpoint, buffer its SSD position. */
struct cr_store_replica_desc {
    uint32_t segment_id;
    const char *segment_name;
    const char *endpoint;
    const char *protocol;
    uint64_t buffer;
    uint64_t size;
    enum cr_replica_status status;
    enum cr_replica_medium medium;
    const char *file_path; /* DISK only; NULL otherwise */
    struct cr_uuid owner;  /* LOCAL_DISK: the segment owner (Mooncake's client_id) */
    /* MEMORY and LOCAL_DISK: the segment's capability key (NULL: none);
     * valid while the segment is mounted.  The RPC layer signs with it
     * (rpc/rpc_caps.h; a local_disk replica's for "<segment>#ssd"). */
    const uint8_t *cap_key;
    bool has_cap;        /* cap holds a signed capability (rpc/rpc_caps.h) */
    uint8_t cap[48];     /* CR_CAP_BYTES, the wire form */
};

/* One replica list, sized for the ceiling, with the object's checksum (the
 * one PutEnd recorded; has_checksum false when it gave none, and always in
 * PutStart's list) and, from GetReplicaList, how long the lease it granted
 * lasts from `now_ms` (0 elsewhere). */
struct cr_store_replica_list {
    uint32_t count;
    bool has_checksum;
    uint64_t checksum;
    uint64_t lease_ms;
    struct cr_store_replica_desc replicas[CR_STORE_REPLICAS_MAX];
};

/* A key as the store files it: tenant, bytes and hash.  The hash is a pure
 * function of the tenant's name and the key's bytes (XXH3 of the key, seeded
 * with XXH3 of the tenant name), so any thread can make one: the RPC gateway
 * makes it on its own thread, where the request was just decoded, and the
 * segments actor then neither measures nor hashes keys.  The `_k` functions
 * below take one; their plain forms make it first. */
struct cr_store_key {
    const char *tenant; /* NULL or "" → "default" */
    const char *key;
    uint32_t key_len;
    uint64_t hash;
};

void cr_store_key_make(const char *tenant, const char *key, uint32_t key_len,
                       struct cr_store_key *out);

/* cr_store_key_make for n keys of one tenant, whose seed is hashed once (a
 * batch request's keys): key i is lens[i] bytes. */
void cr_store_keys_make(const char *tenant, const char *const *keys, const uint32_t *lens,
                        size_t n, struct cr_store_key *out);

/* Makes the keys of a batch whose entries each name a tenant (puts): a run
 * of entries with the same tenant hashes its seed once.  Zero-initialised
 * before the first key; holds the last tenant pointer, which must stay
 * valid while it is used. */
struct cr_store_key_maker {
    bool primed;
    const char *tenant;
    uint64_t seed;
};

/* cr_store_key_make(tenant, key, key_len, out), with the tenant's seed
 * reused when `tenant` names the maker's last tenant. */
void cr_store_key_make_next(struct cr_store_key_maker *maker, const char *tenant, const char *key,
                            uint32_t key_len, struct cr_store_key *out);

struct cr_store_put_params {
    const char *tenant;            /* NULL or "" → "default" */
    const char *key;
    uint32_t key_len;
    bool key_hashed;               /* key_hash is cr_store_key_make's hash of (tenant, key) */
    uint64_t key_hash;
    uint64_t value_length;         /* 0 .. max_object_size_bytes */
    uint32_t replica_num;
    bool with_soft_pin;
    const char *preferred_segment; /* NULL or "" → none */
    const struct cr_store_block_meta *meta; /* optional; copied until PutEnd */
};

/* Validates a key against the configured bounds (non-empty, ≤ max_key_len).
 * Gateways call it on every key of a batch before applying any.
 * Returns CR_OK or CR_ERR_INVALID_PARAMS. */
int cr_store_validate_key(cr_store *store, const char *key, uint32_t key_len);

/* Tenants: a tenant comes into being with its first object (in flight or
 * complete) and is forgotten with its last, except "default", which always
 * exists; so max_tenants bounds the tenants holding objects at once, not the
 * names ever seen. */
/* Starts a put: allocates up to replica_num replicas on distinct segments,
 * preferred segment first, then random segments (10 tries), then a sweep.
 * Best effort: fewer replicas rather than failure.  value_length 0 is an
 * empty object: each replica takes a 1-byte allocation and its handle says
 * size 0 (cr_store_alloc_bytes in store_internal.h).  An in-flight put older
 * than put_start_discard_timeout_ms is preempted (its replicas are parked
 * until put_start_release_timeout_ms).  Returns CR_OK and fills *out (status
 * INITIALIZED), or CR_ERR_INVALID_PARAMS (bad key/size/replica_num,
 * replica_num above the mounted segment count), CR_ERR_OBJECT_ALREADY_EXISTS,
 * CR_ERR_NO_AVAILABLE_HANDLE (no replica at all), CR_ERR_NOMEM (object,
 * tenant, client or parking table full).  At a full object table it first
 * evicts one object itself (cr_store_evict_for_room's sample; UPDATE event
 * published) and refuses only when none of the sample could go; finding
 * no segment with room, it evicts up to put_evictions_max objects, never
 * one a store server's SSD could keep (store_objects.c).  Changes nothing
 * else on error. */
int cr_store_put_start(cr_store *store, const struct cr_uuid *client,
                       const struct cr_store_put_params *params, uint64_t now_ms,
                       struct cr_store_replica_list *out);

/* Marks the put complete (replicas COMPLETE), records `checksum` (the XXH3
 * of the object's bytes; NULL: none) and emits STORE.  Returns CR_OK (also
 * when already complete with the same checksum: idempotent),
 * CR_ERR_OBJECT_NOT_FOUND, CR_ERR_ILLEGAL_CLIENT (another client started
 * it) or CR_ERR_INVALID_PARAMS (already complete with another checksum). */
int cr_store_put_end(cr_store *store, const struct cr_uuid *client, const char *tenant,
                     const char *key, uint32_t key_len, uint64_t now_ms);
int cr_store_put_end_k(cr_store *store, const struct cr_uuid *client,
                       const struct cr_store_key *key, const uint64_t *checksum,
                       uint64_t now_ms);

/* Cancels an in-flight put and frees its space.  Returns CR_OK,
 * CR_ERR_OBJECT_NOT_FOUND, CR_ERR_ILLEGAL_CLIENT, or CR_ERR_INVALID_PARAMS
 * when the put has already ended. */
int cr_store_put_revoke(cr_store *store, const struct cr_uuid *client, const char *tenant,
                        const char *key, uint32_t key_len);
int cr_store_put_revoke_k(cr_store *store, const struct cr_uuid *client,
                          const struct cr_store_key *key);

/* Grants a lease (deadline = max(deadline, now + lease ttl)) and refreshes
 * the access time (and soft pin).  Returns CR_OK when the key exists and is
 * complete, CR_ERR_OBJECT_NOT_FOUND (missing, unknown tenant) or
 * CR_ERR_OBJECT_NOT_READY (put not ended yet). */
int cr_store_exist_key(cr_store *store, const char *tenant, const char *key, uint32_t key_len,
                       uint64_t now_ms);
int cr_store_exist_key_k(cr_store *store, const struct cr_store_key *key, uint64_t now_ms);

/* Starts the memory loads a lookup of `key` will make, without changing
 * anything: `deep` false prefetches its hash-table slot and the key's bytes;
 * `deep` true reads the slot (prefetched earlier, so cached) and prefetches
 * the object it names.  For a caller that knows its next keys before it
 * needs them (the segments actor, a batch of calls ahead): at a few hundred
 * thousand objects the table and the objects are out of cache, and a lookup
 * was a fifth of a GetReplicaList. */
void cr_store_prefetch(const cr_store *store, const struct cr_store_key *key, bool deep);

/* For a batch that looks up keys[0..n) in order: call before looking up
 * keys[i].  It keeps the loads a few keys ahead (the slot of key i+8, the
 * object of key i+4), so the misses of a batch overlap with its work
 * instead of queueing one per key: a 32-key BatchExistKey spent half its
 * server CPU waiting on them. */
void cr_store_prefetch_batch(const cr_store *store, const struct cr_store_key *keys, size_t n,
                             size_t i);

/* Same as exist_key, and fills *out with the complete replicas. */
int cr_store_get_replica_list(cr_store *store, const char *tenant, const char *key,
                              uint32_t key_len, uint64_t now_ms,
                              struct cr_store_replica_list *out);
int cr_store_get_replica_list_k(cr_store *store, const struct cr_store_key *key, uint64_t now_ms,
                                struct cr_store_replica_list *out);

/* Removes one object (a complete one publishes UPDATE with no replicas).
 * Leased → CR_ERR_OBJECT_HAS_LEASE unless force; an in-flight put →
 * CR_ERR_OBJECT_NOT_READY unless force.  Returns CR_OK or
 * CR_ERR_OBJECT_NOT_FOUND otherwise. */
int cr_store_remove(cr_store *store, const char *tenant, const char *key, uint32_t key_len,
                    bool force, uint64_t now_ms);
int cr_store_remove_k(cr_store *store, const struct cr_store_key *key, bool force,
                      uint64_t now_ms);

/* Removes every complete object of `tenant` (NULL: of every tenant), skipping
 * leased ones unless force; in-flight puts are never touched.  Emits
 * REMOVE_ALL.  Returns the number removed. */
uint64_t cr_store_remove_all(cr_store *store, const char *tenant, bool force, uint64_t now_ms);

/* RemoveAll in slices, so that the caller can serve others in between (at
 * 5 M objects the whole call held the store's thread ~1.2 s).  _begin emits
 * REMOVE_ALL at once (removed_count 0: not known yet), so what consumers
 * learn after it is newer than the clear, and holds the tenant.  _step
 * removes what it finds over at most slots_max slots from the cursor, as
 * cr_store_remove_all would; an object completed or read since _begin is
 * removed with its own UPDATE (no replicas), as a Remove is, because
 * consumers saw it after the clear.  Objects stored behind the cursor
 * meanwhile stay.  Returns true once the walk is done (run->removed is the
 * total; the tenant is released); _cancel releases an unfinished run. */
struct cr_store_remove_all_run {
    int tenant; /* -1: every tenant */
    bool force, done;
    uint32_t cursor;
    uint64_t begin_ms;
    uint64_t removed;
};
void cr_store_remove_all_begin(cr_store *store, const char *tenant, bool force, uint64_t now_ms,
                               struct cr_store_remove_all_run *run);
bool cr_store_remove_all_step(cr_store *store, struct cr_store_remove_all_run *run,
                              uint32_t slots_max, uint64_t now_ms);
void cr_store_remove_all_cancel(cr_store *store, struct cr_store_remove_all_run *run);

/* Sets or clears the hard pin (never evicted).  Returns CR_OK or
 * CR_ERR_OBJECT_NOT_FOUND. */
int cr_store_set_hard_pin(cr_store *store, const char *tenant, const char *key,
                          uint32_t key_len, bool pinned);

/* Seed BatchReplicaClear for objects of `tenant` started by `client` whose
 * lease has expired.  segment_name NULL/"" clears every replica (the object is
 * deleted; only complete objects qualify); otherwise only the replicas on that
 * segment.  cleared[i] is set true for each key cleared.  Validates every key
 * first.  Returns CR_OK, CR_ERR_INVALID_PARAMS or CR_ERR_SEGMENT_NOT_FOUND. */
int cr_store_batch_replica_clear(cr_store *store, const char *tenant, const char *const *keys,
                                 const uint32_t *key_lens, size_t n,
                                 const struct cr_uuid *client, const char *segment_name,
                                 uint64_t now_ms, bool *cleared);

/* Regex operations (PCRE2, match and depth limits from the config).  Matching
 * is done over every key of the tenant before anything is changed.
 * get: calls fn once per matching complete object (granting each a lease).
 * remove: removes matching complete objects, skipping leased unless force;
 * each publishes UPDATE with no replicas.
 * At most regex_max_matches complete objects may match (leased ones count
 * too): one more refuses the whole call before anything is changed — no
 * lease granted, nothing removed — so that one call can neither hold the
 * caller's thread building a huge answer nor half-apply a removal.  The scan
 * stops at the first match over the bound.  The whole call may take at most
 * regex_budget_steps PCRE2 steps (pattern items tried, summed over every key
 * scanned, plus one per key).
 * Return CR_OK, or CR_ERR_INVALID_PARAMS when the pattern does not compile
 * (PCRE2's message in last_error), is too expensive (match/depth limit on a
 * key, or the call's step budget) or matches more than regex_max_matches
 * keys, CR_ERR_NOMEM.  An unknown tenant matches nothing (CR_OK). */
int cr_store_get_replica_list_by_regex(
    cr_store *store, const char *tenant, const char *pattern, uint64_t now_ms,
    void (*fn)(void *ctx, const char *key, uint32_t key_len,
               const struct cr_store_replica_list *replicas),
    void *ctx);
int cr_store_remove_by_regex(cr_store *store, const char *tenant, const char *pattern,
                             bool force, uint64_t now_ms, uint64_t *removed);

/* The same calls in slices, so that a caller can serve others in between.
 * _new compiles the pattern and holds the tenant (a pattern that does not
 * compile gives a finished scan holding that refusal); returns CR_OK or
 * CR_ERR_NOMEM.  _run scans keys until about steps_max more steps are spent
 * (one key may overrun by its own cost, bounded by the match limit): returns
 * CR_ERR_AGAIN while keys remain, CR_OK once the scan is finished, with its
 * verdict kept.  The store may change between slices: objects removed or
 * reused since they matched are skipped when applied, objects stored behind
 * the cursor are not seen.  _by_scan applies a finished scan exactly as the
 * _by_regex calls do, returning the scan's verdict.  _free releases the
 * tenant; call it before the store is destroyed. */
struct cr_store_regex_scan;
int cr_store_regex_scan_new(cr_store *store, const char *tenant, const char *pattern,
                            struct cr_store_regex_scan **out);
int cr_store_regex_scan_run(cr_store *store, struct cr_store_regex_scan *scan,
                            uint64_t steps_max);
void cr_store_regex_scan_free(cr_store *store, struct cr_store_regex_scan *scan);
int cr_store_get_replica_list_by_scan(
    cr_store *store, const struct cr_store_regex_scan *scan, uint64_t now_ms,
    void (*fn)(void *ctx, const char *key, uint32_t key_len,
               const struct cr_store_replica_list *replicas),
    void *ctx);
int cr_store_remove_by_scan(cr_store *store, const struct cr_store_regex_scan *scan, bool force,
                            uint64_t now_ms, uint64_t *removed);


/* ---- listing and stats ---------------------------------------------------- */

struct cr_store_segment_view {
    uint32_t segment_id;
    const char *name;
    const char *endpoint;
    const char *protocol;
    struct cr_uuid owner;
    uint64_t base;
    uint64_t size;
    uint64_t used_bytes;
    uint32_t allocation_count;
    uint64_t ssd_capacity; /* the owner's SSD tier, bytes; 0: none */
    bool awaiting_owner; /* restored by a restart; its owner has not called since */
    bool draining;       /* a drain job's source: no new allocations */
};

/* Iterates mounted segments: start with *cursor = 0; returns false at the end. */
bool cr_store_segment_next(const cr_store *store, uint32_t *cursor,
                           struct cr_store_segment_view *out);
/* Returns CR_OK or CR_ERR_SEGMENT_NOT_FOUND. */
int cr_store_segment_find(const cr_store *store, const char *name,
                          struct cr_store_segment_view *out);

struct cr_store_object_view {
    uint32_t object_id;
    uint32_t generation;
    const char *tenant;
    const char *key;
    uint32_t key_len;
    uint64_t size_bytes;
    bool complete;
    bool soft_pinned; /* soft pin in effect now (TTL not expired) */
    bool hard_pinned;
    uint64_t put_start_ms;
    uint64_t lease_deadline_ms;
    uint64_t last_access_ms;
    struct cr_uuid owner;
    struct cr_store_replica_list replicas;
};

/* Lists objects of `tenant` (NULL: all) whose key starts with prefix (NULL or
 * "" matches all), in slot order from *cursor (start at 0), at most `limit`.
 * *cursor is advanced past the last slot examined: objects added or removed
 * meanwhile never make the walk repeat or skip a surviving object.  Returns
 * the count written; 0 with *cursor unchanged-at-end means done. */
size_t cr_store_list_objects(const cr_store *store, const char *tenant, const char *prefix,
                             uint64_t now_ms, uint32_t *cursor, size_t limit,
                             struct cr_store_object_view *out);
/* The same walk over at most slots_max slots from *cursor, so that a caller
 * can serve others in between (a prefix that matches nothing walked all of
 * 5 M objects in one call, holding the store's thread ~300 ms).  *done is
 * set true once the walk reached the end. */
size_t cr_store_list_objects_slice(const cr_store *store, const char *tenant, const char *prefix,
                                   uint64_t now_ms, uint32_t *cursor, size_t limit,
                                   uint32_t slots_max, struct cr_store_object_view *out,
                                   bool *done);

/* Returns CR_OK or CR_ERR_OBJECT_NOT_FOUND. */
int cr_store_object_find(const cr_store *store, const char *tenant, const char *key,
                         uint32_t key_len, uint64_t now_ms, struct cr_store_object_view *out);

/* ---- tenant quotas (store_quota.c) ------------------------------------------ */

#define CR_STORE_QUOTA_MAX ((UINT64_C(1) << 63) - 1) /* bytes, as the reference's */

struct cr_store_quota_view {
    const char *tenant; /* valid until the next change of the store */
    uint64_t requested_bytes;
    uint64_t effective_bytes; /* requested, or its share when requests pass the capacity */
    uint64_t charged_bytes;   /* replica bytes the tenant holds now */
    bool over_quota;
};

/* Sets a tenant's quota (CR_ERR_INVALID_PARAMS outside [1, CR_STORE_QUOTA_MAX],
 * CR_ERR_NOMEM past max_tenants policies). */
int cr_store_quota_set(cr_store *store, const char *tenant, uint64_t bytes,
                       struct cr_store_quota_view *out);
/* CR_ERR_OBJECT_NOT_FOUND without a policy, CR_ERR_TENANT_NOT_EMPTY while the
 * tenant holds objects. */
int cr_store_quota_delete(cr_store *store, const char *tenant);
int cr_store_quota_get(const cr_store *store, const char *tenant, struct cr_store_quota_view *out);
bool cr_store_quota_next(const cr_store *store, uint32_t *cursor, struct cr_store_quota_view *out);

/* Object slots up to which cr_store_get_stats counts active leases itself
 * (~1 ms); a bigger table is counted by cr_store_lease_census_step in
 * slices, and the stats give the last whole count: /metrics scrapes and
 * /api/v1/stats at 5 M objects walked the table on the store's thread
 * each time. */
#define CR_STORE_STATS_EXACT_SLOTS 65536u

/* Walks at most slots_max object slots of the lease census from where the
 * last step stopped; when a walk reaches the end, its count becomes the one
 * cr_store_get_stats gives for big tables and a new walk starts.  Returns
 * true when this step finished a walk. */
bool cr_store_lease_census_step(cr_store *store, uint64_t now_ms, uint32_t slots_max);

struct cr_store_stats {
    uint64_t capacity_bytes;
    uint64_t used_bytes;
    uint64_t object_count;      /* complete and in-flight */
    uint64_t inflight_puts;
    uint64_t replica_count;
    uint64_t active_leases;     /* counted at call time up to CR_STORE_STATS_EXACT_SLOTS
                                   object slots; past that, the last whole census
                                   (cr_store_lease_census_step) */
    uint64_t segment_count;
    uint64_t client_count;
    uint64_t evictions;
    uint64_t evicted_bytes;
    uint64_t room_evictions;    /* of those, by a PutStart (a full object table, or no room) */
    uint64_t zombies_preempted;
    uint64_t zombie_bytes_reclaimed;
    uint64_t discarded_parked;  /* replicas waiting for the release timeout */
    uint64_t clients_expired;
    uint64_t tenant_count;      /* tenants holding objects, and "default" (always there) */
    uint64_t index_slots;       /* of the key index (it doubles at half full) */
    uint64_t max_objects;
    uint64_t disk_replicas;       /* shared file tier (CR_MEDIUM_DISK) */
    uint64_t disk_bytes;          /* their objects' bytes */
    uint64_t disk_evictions;      /* disk replicas dropped by cr_store_evict_disk */
    uint64_t local_disk_replicas; /* store servers' SSDs (CR_MEDIUM_LOCAL_DISK) */
    uint64_t local_disk_bytes;
    uint64_t offloads_started;    /* evictions handed to a server's SSD (store_offload.h) */
    uint64_t offloads_done;       /* of those, committed: local_disk replica recorded */
    uint64_t offloads_failed;     /* ended without one (failed, lost, object gone) */
    uint64_t ssd_capacity_bytes;  /* the SSD tiers mounted segments' servers announced */
    /* Counted as active_leases is (exactly, or by the census past
     * CR_STORE_STATS_EXACT_SLOTS): soft-pinned objects now, and complete
     * objects with a complete memory replica, and with a complete file
     * (DISK or LOCAL_DISK) replica (Mooncake's mem_/file_cache_nums_). */
    uint64_t soft_pinned;
    uint64_t mem_cached_objects;
    uint64_t file_cached_objects;
    uint64_t put_partial_allocations; /* PutStarts that placed fewer replicas than asked */
    uint64_t discards_released;       /* preempted puts whose parked replicas were freed */
    uint64_t discarded_put_bytes;     /* bytes of preempted puts' replicas still parked */
    uint64_t promotion_hits;      /* GetReplicaLists served by a local_disk replica only */
    uint64_t promotions_started;  /* SSD → memory copies begun (store_promote.h) */
    uint64_t promotions_done;     /* of those, committed: a memory replica added */
    uint64_t promotions_done_bytes; /* their objects' bytes */
    uint64_t promotions_failed;   /* ended without one (failed, lost, object gone) */
    uint64_t promotions_no_room;  /* wanted, but no segment had room below the watermark */
    uint64_t promotions_dropped;  /* wanted while the queue was full */
    uint64_t local_disk_registered; /* SSD files a server re-registered (replica added/created) */
    uint64_t local_disk_gone;     /* local_disk replicas dropped: the server's file went */
};
void cr_store_get_stats(const cr_store *store, uint64_t now_ms, struct cr_store_stats *out);


/* The copy/move tasks' and the eviction mechanism's calls, split out by
 * responsibility; they need the declarations above. */
#include "core/store_evict.h"
#include "core/store_tasks.h"
#include "core/store_tiers.h"
#include "core/store_offload.h"
#include "core/store_promote.h"

#endif
