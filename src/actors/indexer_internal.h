/* Private state of the indexer actor, shared by indexer.c (actor, asks),
 * indexer_sources.c (ZMQ publishers, sequence tracking, replay),
 * indexer_apply.c (decoded batches and store events onto the index) and
 * indexer_conf.c (conductor_config.json).  Everything here is touched only on
 * the indexer's thread, except indexer_conf.c, which create() runs on main. */
#ifndef CRESCENT_ACTORS_INDEXER_INTERNAL_H
#define CRESCENT_ACTORS_INDEXER_INTERNAL_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/prefix_index.h"
#include "daemon/config.h"
#include "core/prefix_map.h"
#include "msgs/indexer_msgs.h"
#include "msgs/kv_event.h"
#include "msgs/store_event.h"

/* Bound on ZMQ publishers (SUB sockets): one zmq_poll covers them all. */
#define CR_INDEXER_SOURCES_MAX 256u
/* Messages drained from one socket per wake, so the mailbox is not starved. */
#define CR_INDEXER_DRAIN_MAX 64u
/* A replay round that has received nothing for this long is given up and
 * asked again (see CR_INDEXER_REPLAY_TRIES).  The deadline moves with every
 * replayed message, so a long replay that keeps progressing is never cut
 * short. */
#define CR_INDEXER_REPLAY_TIMEOUT_NS (2ull * 1000000000u)
/* Batches taken from one replay round before the next is asked from where
 * it ended.  vLLM's and SGLang's replay socket is a ROUTER with ZMQ's
 * default send high-water mark (1000 messages): it answers a request with
 * everything it holds from the start seq and silently drops what does not
 * fit in the send queue.  The first 1000 replies of a fresh connection
 * always fit, so a window well under that never has a hole of the peer's
 * making. */
#define CR_INDEXER_REPLAY_WINDOW 256u
/* Rounds in a row that bring nothing (no answer, or a hole at once) before
 * the replay is abandoned and the publisher marked stale; between them the
 * wait doubles from CR_INDEXER_REPLAY_BACKOFF_NS. */
#define CR_INDEXER_REPLAY_TRIES 5u
#define CR_INDEXER_REPLAY_BACKOFF_NS (100ull * 1000000u)
/* Ranges of seqs a publisher's replay could no longer give, kept per
 * publisher for /services (the newest ones; all are counted). */
#define CR_INDEXER_LOST_RANGES_MAX 4u
/* Name of the instance under which the store's own events are filed (per tenant). */
#define CR_INDEXER_STORE_INSTANCE "crescent-store"

/* Counters of one source (a registered publisher, or the store). */
/* Contexts one publisher (or the store, per tenant) may create.  Contexts
 * are never reclaimed, so without a quota one engine sending junk LoRA or
 * model names could use up the index's CR_PREFIX_CONTEXTS_MAX for everyone. */
#define CR_INDEXER_CONTEXTS_PER_SOURCE 64u

struct indexer_counters {
    uint64_t batches, events, blocks_stored, blocks_removed, clears;
    uint64_t malformed, gaps, restarts, replays, replayed, duplicates, skipped_groups;
    uint64_t orphans;
    uint64_t contexts_created; /* against CR_INDEXER_CONTEXTS_PER_SOURCE */
    uint64_t dp_ranks_seen;    /* bit per DP rank this source has filed blocks under */
    uint64_t replay_timeouts;  /* replay rounds that stalled (CR_INDEXER_REPLAY_TIMEOUT_NS) */
    uint64_t replay_rounds;    /* replay requests sent (windows and retries included) */
    uint64_t replay_holes;     /* rounds cut at a hole the peer's send queue made */
    uint64_t replays_abandoned; /* after CR_INDEXER_REPLAY_TRIES fruitless rounds */
    uint64_t lost_batches;     /* seqs the publisher's replay no longer held */
    uint64_t engine_refusals;  /* stored runs refused at --indexer-engine-hashes-max */
};

struct indexer_seq_range {
    uint64_t first, last;
};

/* What a batch is applied for: instance, registration defaults, counters. */
struct indexer_target {
    uint16_t instance;
    uint8_t dp_rank; /* used when neither batch nor event names one */
    const char *tenant, *model, *lora_name, *salt;
    uint32_t block_size; /* used when the event has none */
    struct indexer_counters *counters;
    struct cr_prefix_map *keys; /* store-dialect events: key id -> engine id */
};

struct indexer_source {
    bool used;
    bool dynamic; /* made by POST /register: saved under --state-dir */
    struct cr_indexer_registration reg;
    struct indexer_target target;
    void *sub;    /* ZMQ SUB */
    void *monitor; /* PAIR reading the SUB's monitor events; NULL if none */
    bool connected, ever_connected; /* the SUB's link, from its monitor */
    uint64_t link_since_ns;         /* when connected last changed (or registration) */
    uint64_t disconnects;
    bool have_batch;
    uint64_t last_batch_ns; /* when a batch (live or replayed) last came */
    void *dealer; /* ZMQ DEALER of the current replay round; NULL between rounds */
    bool have_seq;
    uint64_t last_seq;
    /* A first-subscribe replay was answered: seqs count from 0, so a first
     * live seq above 0 is a gap (the SUB joins late: ZMQ's slow joiner). */
    bool synced;
    bool stale;               /* the index may miss some of its blocks */
    bool engine_bound_hit;    /* a run was refused at --indexer-engine-hashes-max */
    const char *stale_reason; /* a static string; NULL while not stale */
    bool replaying;           /* SUB reads are held until the replay ends */
    /* A replay runs in rounds: each a fresh DEALER (dealer) asking from the
     * next missing seq, taking at most CR_INDEXER_REPLAY_WINDOW batches.
     * It ends at the publisher's end marker.  replay_first: the replay of
     * a first subscribe (from seq 0, nothing pending). */
    bool replay_first;
    uint64_t replay_started_ns, replay_taken_at_start; /* for the log line at its end */
    uint32_t round_taken;     /* batches the current round applied */
    uint32_t round_fails;     /* rounds in a row that brought nothing */
    uint64_t retry_at_ns;     /* dealer is NULL until then (backoff) */
    uint64_t replay_deadline_ns; /* moved forward by every replayed message */
    uint64_t oldest_seq;      /* the first seq the last first-subscribe replay gave */
    bool have_oldest;
    struct indexer_seq_range lost[CR_INDEXER_LOST_RANGES_MAX]; /* newest last */
    uint32_t lost_count;
    /* After a replay, live batches in [window_next, replayed_until] may be
     * copies queued on SUB while the replay delivered them (duplicates) or a
     * restarted publisher's new numbering (see replay_copy in
     * indexer_sources.c).  The window closes at the first live batch that
     * is not a copy. */
    bool after_replay;
    uint64_t replayed_until;
    uint64_t window_next; /* the lowest seq the next copy may have */
    /* The live batch that revealed the gap, applied after the replay. */
    void *pending;
    size_t pending_len;
    uint64_t pending_seq;
    uint64_t last_malformed_log_ns;
    struct indexer_counters counters;
    struct cr_prefix_map keys;
    /* Newest ts among the batches the last replay round delivered: a live
     * copy of one of them is not newer.  -1 before any decoded. */
    double replay_ts_max;
    uint64_t last_replay_log_ns;
};

/* Per instance id: load report and route hit-rate counters. */
struct indexer_instance_info {
    bool has_load;
    struct cr_indexer_load load;
    uint64_t route_requests, route_request_tokens, route_hit_tokens;
    struct cr_prefix_map store_keys; /* the store instance's key id -> engine id */
    /* Created by POST /load and used by nothing else since: counted against
     * CR_INDEXER_LOAD_ONLY_MAX and forgotten CR_INDEXER_LOAD_TTL_NS after
     * load_ns, the time of its last report. */
    bool load_only;
    uint64_t load_ns;
    /* A Dynamo worker seen on NATS (indexer_nats.c): its blocks and load
     * come from there; stale when its metrics are older than --nats-stale-ms. */
    bool nats_worker, nats_stale;
    int64_t nats_worker_id;
    uint64_t nats_metrics_ns; /* last metrics (or first sight) */
};

struct indexer_state {
    struct cr_prefix_index *index;
    struct cr_kv_decoder *decoder;
    void *zmq;
    struct indexer_source sources[CR_INDEXER_SOURCES_MAX];
    uint32_t source_count;
    bool poll_dirty;
    void *pollitems;      /* zmq_pollitem_t[3 * CR_INDEXER_SOURCES_MAX + 1] */
    int16_t *poll_source; /* poll slot -> source index (-1: wake fd) */
    uint8_t *poll_is_dealer; /* 0 SUB, 1 DEALER, 2 monitor */
    uint64_t monitor_seq;    /* names each monitor's inproc endpoint */
    uint32_t poll_count;
    struct indexer_instance_info *instances; /* by instance id, grown on demand */
    uint32_t instance_cap;
    struct indexer_counters store_counters;
    uint64_t store_skipped;
    uint64_t queries, routes, route_request_tokens, route_hit_tokens;
    uint32_t *route_hits; /* by instance id: tokens hit by the current /route; lazily 256 KiB */
    uint64_t registrations_rejected;
    uint64_t unknown_messages, last_unknown_log_ns;
    /* A copy of crescentd's settings at create: its own listening addresses
     * are no publisher endpoint. */
    struct cr_daemon_config config;
    /* Static registrations read by create (conductor_config.json). */
    struct cr_indexer_registration *static_regs;
    uint32_t static_count;
    /* Registrations saved under --state-dir (indexer_persist.c). */
    char persist_path[CR_CONFIG_ADDRESS_MAX + 64]; /* "" without --state-dir */
    struct cr_indexer_registration *saved_regs;
    uint32_t saved_count;
    uint64_t persist_failures;
    uint64_t now_ns; /* refreshed at each handle/wait, and after the wait's poll */
    uint32_t engine_hashes_max; /* --indexer-engine-hashes-max, for messages */
    int64_t max_message_bytes;  /* ZMQ_MAXMSGSIZE of every SUB and DEALER */
    /* The runtime's clock (the actor's, manual in tests); NULL in tests
     * that move now_ns by hand.  indexer_wait reads it after zmq_poll
     * returns: what the poll woke for happened now, not when the wait
     * began (a deadline set from the earlier value after an idle wait of
     * more than CR_INDEXER_REPLAY_TIMEOUT_NS was already past). */
    uint64_t (*clock)(void *ctx);
    void *clock_ctx;
    uint32_t load_only_count; /* instances with load_only set */
    uint64_t load_only_sweep_ns; /* when expired load-only instances are next looked for */
    uint64_t load_only_expired, load_only_rejected;
    struct indexer_nats *nats; /* NULL without --nats-url */
    /* The index's reader-writer lock (indexer_read.c): the actor holds it
     * for writing whenever it runs, except in zmq_poll; HTTP workers read
     * /query answers under it.  Everything above may be read under it. */
    pthread_rwlock_t read_lock;
    bool read_lock_ready;           /* false in states tests build by hand */
    bool write_held;                /* the actor holds it (its thread only) */
    _Atomic uint64_t queries_shared; /* /query answered by a worker under the lock */
};

/* ---- indexer_conf.c ---- */

/* Resolves the conductor config path: the setting (flag or crescent config
 * key "indexer_config"), else env CONDUCTOR_CONFIG_PATH; "" when neither.
 * CRESCENT_CONFIG names crescent's own config file, which may carry
 * "indexer_config"; it is read by the settings loader, not here. */
const char *cr_indexer_conf_path(const char *setting);

/* Parses a conductor_config.json text.  On success returns CR_OK with a
 * malloc'd array of *count registrations.  On error returns
 * CR_ERR_INVALID_PARAMS and one line in error. */
int cr_indexer_conf_parse(const char *text, struct cr_indexer_registration **regs, uint32_t *count,
                          char *error, size_t error_size);

/* Reads and parses the file at path (as cr_indexer_conf_parse). */
int cr_indexer_conf_load(const char *path, struct cr_indexer_registration **regs, uint32_t *count,
                         char *error, size_t error_size);

/* Validates a registration (non-empty instance and endpoint, block_size > 0,
 * dp_rank < 64, tenant defaulted to "default").  Returns CR_OK or
 * CR_ERR_INVALID_PARAMS with one line in error. */
int cr_indexer_registration_check(struct cr_indexer_registration *reg, char *error,
                                  size_t error_size);

/* Refuses an endpoint (field names it: "endpoint", "replay_endpoint") whose
 * host is link-local (169.254.0.0/16, fe80::/10) or that is one of
 * crescentd's own listening addresses in config (same port, on a loopback or
 * wildcard host or the same host); config NULL checks link-local only.
 * Returns CR_OK or CR_ERR_INVALID_PARAMS with one line in error. */
int cr_indexer_endpoint_check(const struct cr_daemon_config *config, const char *field,
                              const char *endpoint, char *error, size_t error_size);

/* ---- indexer_apply.c (pure: no sockets; unit-tested) ---- */

/* Checks a decoded batch against what applying it needs (DP ranks < 64,
 * medium names the registry can take, a block size for token runs, names
 * within bounds).  Returns CR_OK or CR_ERR_PROTOCOL with one line in error;
 * nothing is applied either way. */
int cr_indexer_batch_check(struct cr_prefix_index *index, const struct indexer_target *target,
                           const struct cr_kv_batch *batch, char *error, size_t error_size);

/* Applies a checked batch to the index for target.  Non-prefix groups
 * (sliding window, mamba, other spec kinds) are skipped and counted; runs
 * whose parent is unknown are counted as orphans.  Returns CR_OK or
 * CR_ERR_NOMEM (applied in part; the index stays consistent). */
int cr_indexer_batch_apply(struct cr_prefix_index *index, const struct indexer_target *target,
                           const struct cr_kv_batch *batch);

/* Applies one store event for `instance` (the tenant's
 * CR_INDEXER_STORE_INSTANCE; its tenant scopes the context).  A block's
 * engine id is XXH3 of its block_hash string (of the key when that is ""),
 * so a child's parent_block_hash finds its parent; `keys` maps XXH3(key) ->
 * engine id for BlockUpdateEvent, which names objects by key.  Memory
 * replicas file under medium CPU, disk and local_disk under DISK.  Returns
 * CR_OK, CR_ERR_OBJECT_NOT_FOUND (nothing to place: no token ids, unknown
 * key or parent; counted) or CR_ERR_NOMEM. */
int cr_indexer_store_apply(struct cr_prefix_index *index, const struct cr_store_event *event,
                           uint16_t instance, struct cr_prefix_map *keys,
                           struct indexer_counters *counters);

/* How the store files an object put without token ids whose id (block hash,
 * else key) is a sequence hash, a u64 in decimal or 0x hex (Mooncake's
 * ParseSeqHashFromObjectKey): one block of `block_size` tokens under
 * `model`, named by that hash (/query_by_hash finds it).  block_size 0:
 * such objects are orphans, as without it. */
struct indexer_hash_keys {
    const char *model;
    uint32_t block_size;
};

/* cr_indexer_store_apply, with hash-keyed objects filed as hash_keys says
 * (NULL: not filed, counted as orphans). */
int cr_indexer_store_apply_keyed(struct cr_prefix_index *index, const struct cr_store_event *event,
                                 uint16_t instance, struct cr_prefix_map *keys,
                                 struct indexer_counters *counters,
                                 const struct indexer_hash_keys *hash_keys);

/* Whether s (len bytes, the whole of it) is a u64 in decimal or in hex after
 * "0x"/"0X", as Mooncake reads keys; stricter than its std::stoull: no sign,
 * no whitespace.  Sets *out. */
bool cr_indexer_seq_hash_of(const char *s, size_t len, uint64_t *out);

/* ---- indexer_sources.c ---- */

int indexer_source_add(struct indexer_state *st, const struct cr_indexer_registration *reg,
                       char *error, size_t error_size);
/* Returns CR_OK or CR_ERR_OBJECT_NOT_FOUND. */
int indexer_source_remove(struct indexer_state *st, const char *instance, const char *tenant,
                          uint32_t dp_rank);
void indexer_sources_close(struct indexer_state *st);
void indexer_wait(struct indexer_state *st, int wake_fd, int timeout_ms);
/* Whether any registered publisher files under instance id. */
bool indexer_instance_has_sources(const struct indexer_state *st, uint16_t id);

/* ---- indexer_persist.c ---- */

/* With dir non-empty: creates it if missing and reads the registrations
 * saved there into st->saved_regs.  Returns CR_OK or CR_ERR_INVALID_PARAMS
 * with one line in error (the file, what is wrong, what to do). */
int indexer_persist_load(struct indexer_state *st, const char *dir, char *error,
                         size_t error_size);
/* POST /register: saves the registrations as they will be with reg (when
 * --state-dir is set), then applies it (indexer_source_add).  CR_ERR_IO
 * when the save fails (error names the file and why; nothing changed), or
 * indexer_source_add's refusal (the file is rewritten as it was). */
int indexer_persist_register(struct indexer_state *st, const struct cr_indexer_registration *reg,
                             char *error, size_t error_size);
/* POST /unregister: CR_ERR_OBJECT_NOT_FOUND, CR_ERR_IO when the save
 * without it fails (nothing changed), else the source is removed. */
int indexer_persist_unregister(struct indexer_state *st, const char *instance, const char *tenant,
                               uint32_t dp_rank, char *error, size_t error_size);
void indexer_persist_mark(struct indexer_state *st, const struct cr_indexer_registration *reg);

/* ---- indexer.c ---- */

/* The instance id is now used by a publisher or the store's events: it is
 * no longer load-only (no expiry, not counted against the bound). */
void indexer_instance_claimed(struct indexer_state *st, uint16_t id);
/* Removes instance id from the index (its blocks go) and clears its load,
 * hit counters and store keys; the id may then be reused. */
void indexer_instance_forget(struct indexer_state *st, uint16_t id);

/* The instance's info slot, grown on demand; NULL when out of memory. */
struct indexer_instance_info *indexer_instance_info_get(struct indexer_state *st, uint16_t id);

/* ---- indexer_read.c (the index read by HTTP workers) ---- */

/* Sets up the lock (CR_OK or CR_ERR_NOMEM); destroy is a no-op if never set up. */
int indexer_read_lock_init(struct indexer_state *st);
void indexer_read_lock_destroy(struct indexer_state *st);
/* The actor's hold on the index: taken at each handle and wait hook, dropped
 * around zmq_poll.  No-ops in a state without the lock. */
void indexer_write_begin(struct indexer_state *st);
void indexer_write_end(struct indexer_state *st);

/* ---- indexer_route.c ---- */

/* The /query answer from the index alone (no route, no counters), into
 * *result_out.  scratch NULL: the index's own (the actor's thread only);
 * else the caller's, with the read lock held.  Returns CR_OK or
 * CR_ERR_NOMEM. */
int indexer_answer(struct indexer_state *st, struct cr_prefix_scratch *scratch,
                   const struct cr_indexer_query *q, struct cr_indexer_result **result_out);

/* Answers a /query or /route ask into *result_out (owned by the asker).
 * Returns CR_OK, CR_ERR_NOMEM, or the index's refusal. */
int indexer_query(struct indexer_state *st, const struct cr_indexer_query *q,
                  struct cr_indexer_result **result_out);
/* Files a load report; returns CR_OK or a refusal (unknown instance at the
 * load-only bound). */
int indexer_load(struct indexer_state *st, const struct cr_indexer_load *load);
/* Drops load-only instances whose reports expired (all of them when force). */
void indexer_load_only_sweep(struct indexer_state *st, bool force);

/* ---- indexer_nats.c (Dynamo's subjects over NATS) ---- */

struct cr_actor;
struct cr_actor_stats;
/* With --nats-url: connects (retrying in the background if the server is
 * not up yet) and subscribes; libnats' threads only hand messages over with
 * cr_send.  Returns CR_OK, or an error with a line logged. */
int indexer_nats_start(struct indexer_state *st, struct cr_actor *self);
/* Drains the subscriptions (no callback runs after it) and closes. */
void indexer_nats_stop(struct indexer_state *st);
void indexer_nats_free(struct indexer_state *st);
/* A CR_MSG_INDEXER_NATS message: decoded, checked, applied, freed. */
void indexer_nats_handle(struct indexer_state *st, struct cr_msg_indexer_nats *body);
void indexer_nats_discard(struct cr_msg_indexer_nats *body);
/* Marks workers whose metrics went silent stale (at most every 100 ms). */
void indexer_nats_sweep(struct indexer_state *st);
/* Whether instance id is a stale Dynamo worker (/route leaves it out). */
bool indexer_nats_stale(const struct indexer_state *st, uint16_t id);
/* After a /route chose instance best: the KVHitRateEvent, if it is a worker. */
void indexer_nats_routed(struct indexer_state *st, uint16_t best, uint64_t isl_tokens,
                         uint64_t hit_tokens);
void indexer_nats_stats(const struct indexer_state *st, struct cr_actor_stats *out);

/* ---- indexer_views.c ---- */

json_t *indexer_services_json(const struct indexer_state *st);
json_t *indexer_global_view_json(const struct indexer_state *st);

#endif
