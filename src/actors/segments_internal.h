/* The segments actor's state, shared by segments.c (the actor, its calls
 * and edges) and segments_durable.c (its operation log: the held calls of
 * --durability sync, snapshots, recovery at start).  Nothing else includes
 * this file. */
#ifndef CRESCENT_ACTORS_SEGMENTS_INTERNAL_H
#define CRESCENT_ACTORS_SEGMENTS_INTERNAL_H

#include <assert.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>

#include "actors/subsystems.h"
#include "core/histogram.h"
#include "core/store.h"
#include "durable/durable.h"
#include "durable/apply.h"
#include "durable/feed.h"
#include "msgs/durable_msgs.h"
#include "rpc/rpc_codec.h"
#include "msgs/master_msgs.h"
#include "msgs/store_event.h"
#include "rpc/edge.h"
#include "rpc/rpc_codec.h"
#include "rpc/rpc_methods.h"
#include "actors/segments_mc.h"
#include "runtime/wait_timer.h"

#define SEGMENTS_TICK_NS 1000000000ull /* client expiry period */
/* The stats' census of leases, soft pins and cached objects walks the slab
 * at 262,144 slots a second (5 M objects counted every ~20 s), in 16 steps
 * of 16,384: one step of 262,144 once a second held the store thread 10-30 ms
 * at 10 M objects (a call's p99 was that stall, bench/RESULTS.md). */
#define CENSUS_STEPS_PER_TICK 16u
#define CENSUS_STEP_SLOTS 16384u
#define EVICT_NEEDED_MIN_GAP_MS 10u    /* coalesces no-space notices to leases */
#define SAMPLE_MAX 4096u               /* candidates per poll, a declared bound */
static_assert(SAMPLE_MAX <= UINT16_MAX, "a sample's count fits its message");
/* Finished calls go back in chains, one MASTER_DONE per chain: sent when it
 * holds `done_cap` calls or the round ends (round_end), whichever is first.
 * The cap is a quarter of the calls the previous round handled (1 to
 * DONE_CHAIN_MAX), so the gateway gets about four chains per round and can
 * work on the first while the rest are run: with one chain per round the two
 * threads took turns, and a fixed cap of 16 cost a fifth of the throughput
 * at 8 calls in flight while a cap of 2 cost a tenth at 64
 * (bench/RESULTS.md).  Up to DONE_TARGETS_MAX gateways may have a chain open
 * at once (crescentd has one; the bench up to eight). */
#define DONE_CHAIN_MAX 16u
#define DONE_CHAINS_PER_ROUND 4u
#define DONE_TARGETS_MAX 8u
/* Store events go to the publisher and the indexer the same way: one chain
 * of up to EVENT_CHAIN_MAX events of one tenant per message, sent when full,
 * when the tenant changes, or when the round ends. */
#define EVENT_CHAIN_MAX 32u
/* A chain's block is sized by the one before it (events_room): the bytes
 * that one used, rounded up to a power of two, or twice its room when it
 * filled up, between these bounds.  A round of one change (one client's
 * call) takes a small block that malloc serves from its per-thread cache;
 * a batch of 32 grows to the largest in a few rounds.  A fixed 8 KiB block
 * made one-event chains cost a large malloc each: bench/events' publisher
 * fed one event per message fell from 2.8 M to 0.8-1.3 M events/s. */
#define EVENT_CHAIN_BYTES_MIN 256u
#define EVENT_CHAIN_BYTES_MAX CR_STORE_EVENT_CHAIN_BYTES_DEFAULT
/* A regex call runs in slices of about this many PCRE2 steps, one per loop
 * round, so the calls and asks queued meanwhile are served in between
 * (about a millisecond each on the 2-core VM). */
#define REGEX_SLICE_STEPS 50000u
/* Object slots one RemoveAll slice walks: ~1-2 ms on the store's thread
 * (the whole walk of 5 M objects held it ~1.2 s). */
#define REMOVE_ALL_SLICE_SLOTS 8192u
/* An edge's calls that another actor answers (QueryTask, a Ping that wants
 * tasks, FetchTasks, MarkTaskToComplete, CreateCopy/MoveTask) are at tasks
 * at most this many at once; past it they are refused "busy" at once.  Why:
 * every one is a message on the ring to tasks and its answer one on the
 * ring back, both ring_slots (4096) long.  Unbounded, a flood of them (16
 * connections pipelining 2000 QueryTask each) filled both rings: segments
 * waited on its send to tasks (send_wait_ns per call, a whole round of
 * them) while tasks waited on its send back, and the store answered
 * nothing, SIGTERM included, for minutes.  A quarter of the ring leaves the
 * rest to the task ops and rechecks that share it. */
#define AT_TASKS_MAX 1024u

/* The RPC edges served on this thread (edge.h): one epoll set for their
 * fds and the wake fd.  wait blocks in it and keeps what it found; poll
 * serves that, or asks the set again without blocking. */
#define EDGE_EVENTS 64u
#define EDGE_WAKE_TAG UINT64_MAX
#define EDGE_TIMER_TAG (UINT64_MAX - 1) /* the park's deadline (wait_timer.h) */
/* Rounds whose held calls (--durability sync) wait for the journal at once:
 * the journal syncs every round it writes, so a few are ever waiting; past
 * the bound a round's calls are answered once the one before is synced. */
#define HELD_GROUPS_MAX 256u
/* Objects a snapshot looks at per slice (docs/durability.md): a quarter of
 * a millisecond of the store thread on a quiet machine, so a call waits
 * behind at most one.  After a slice the store thread rests SNAPSHOT_PACE
 * times as long as the slice took before the next (a timer wakes it when
 * no call does): a snapshot takes at most a 1/(1 + SNAPSHOT_PACE) share of
 * the store thread, and the journal writes it at that pace, so on a busy
 * machine the two do not crowd out the threads that serve calls. */
#define SNAPSHOT_SLICE_OBJECTS 1024u
#define SNAPSHOT_PACE 3u

struct cr_edge_host {
    struct segments_state *st;
    int epoll_fd;
    bool wake_added;
    /* The park's deadline (a timer's, a lazy send's), in the epoll set: armed
     * when it moves earlier, not on every park (wait_timer.h). */
    struct cr_wait_timer timer;
    struct cr_edge *edges[CR_EDGES_MAX];
    uint32_t count;
    uint32_t watched; /* edge fds in the set */
    struct epoll_event found[EDGE_EVENTS]; /* by wait, for the next poll */
    int found_count;
    /* poll served a set that wait found: the next poll does not ask epoll
     * again without blocking (see segments_poll). */
    bool served_wait_set;
    bool again[CR_EDGES_MAX]; /* cr_edge_again: serve next round, epoll or not */
    uint64_t again_tag[CR_EDGES_MAX];
    uint32_t again_count;
};

struct done_chain {
    struct cr_actor *to;
    struct cr_master_call *head, *tail;
    uint32_t count;
};

/* Calls of one round held until the journal has synced `lsn` (sync mode). */
struct held_group {
    uint64_t lsn;
    struct cr_master_call *head, *tail;
};

struct held_list {
    struct cr_master_call *head, *tail;
};

struct segments_state {
    cr_store *store;
    /* The shared file tier (segments_files.c). */
    struct cr_rpc_files files;
    bool files_can_delete;   /* crescentd sees the directory: it deletes dropped files */
    /* Atomic: the deleting thread (segments_files.c) counts too. */
    _Atomic uint64_t files_deleted, files_left, files_delete_failed;
    uint64_t files_last_log_ns;
    struct files_unlinker *files_unlinker; /* NULL: deletes on the store's thread */
    /* Read latency per tier clients report with Ping (core/read_latency.h). */
    struct cr_read_latency_sums reads;
    struct cr_rpc_arena *arena; /* response scratch, reused by every call */
    uint64_t client_ttl_ms;
    struct cr_actor *self;
    struct cr_subsystems *peers; /* NULL until WIRE */
    uint64_t now_ms;             /* runtime clock, refreshed per message */
    struct cr_ha_gate *ha;       /* --ha etcd: the fence (segments_ha.c); NULL off */
    uint64_t ha_refused;         /* calls refused "not the leader" by the election's fence */
    uint64_t rng;                /* eviction sampling */
    uint64_t last_evict_needed_ms;
    uint64_t calls;
    uint64_t call_errors;     /* responses whose status_code is not OK */
    uint64_t replies_dropped; /* MASTER_DONE that could not be sent */
    uint64_t not_leader_refusals; /* mutating calls refused: not the leader */
    uint64_t events_sent;
    uint64_t events_dropped;
    uint64_t evict_polls;
    uint64_t evictions_applied;
    uint64_t evictions_refused; /* victims that no longer qualified at apply time */
    uint64_t zombie_reclaims;
    uint64_t samples_dropped;
    uint64_t task_ops;
    uint64_t task_ops_dropped; /* TASK_OP_DONE that could not be sent */
    uint64_t task_pings_unforwarded; /* pings answered without tasks: tasks busy */
    uint64_t offloads_unsent;  /* offloads begun but not handed to tasks (busy): retried */
    uint32_t at_tasks;         /* edge calls sent to tasks whose answer is not back */
    uint64_t tasks_busy;       /* edge calls refused "busy": AT_TASKS_MAX at tasks */
    bool task_recheck_due; /* an unmount or expiry tasks was not told of yet */
    uint64_t last_log_ns;
    struct done_chain done[DONE_TARGETS_MAX]; /* [0, done_open): this round's targets */
    uint32_t done_open;
    uint32_t done_cap;    /* calls per chain this round */
    uint32_t round_calls; /* calls handled so far this round */
    /* Events not sent yet: the round's chain, segments' one reference (the
     * indexer's second is taken when it is sent); NULL when none. */
    cr_store_event_chain *events;
    uint32_t events_tenant_len;
    uint32_t events_room; /* bytes of the next chain's block (EVENT_CHAIN_BYTES_MIN..MAX) */
    char events_tenant[CR_MASTER_TENANT_MAX + 1];
    uint64_t events_since_ns; /* the runtime clock when the chain's first event happened */
    /* Regex calls waiting, oldest first (linked through call->next); the
     * first is being scanned by regex_scan, one slice per round. */
    struct cr_master_call *regex_head, *regex_tail;
    struct cr_store_regex_scan *regex_scan;
    /* RemoveAll calls wait in the same queue and run in slices too: the
     * first one's walk, while remove_all_active. */
    struct cr_store_remove_all_run remove_all;
    bool remove_all_active;
    bool regex_step_armed;
    uint64_t regex_slices, remove_all_slices;
    struct cr_edge_host host;
    /* The operation log (src/durable): the round's records go to the
     * journal actor at round end; with --durability sync a call that
     * changed something is answered only once the journal has synced its
     * round's records. */
    enum cr_durability durability;
    const char *state_dir;
    struct cr_durable_feed feed;
    bool feed_on;
    /* Replication (segments_repl.c): a standby applies its leader's records
     * and makes none of its own; --replication sync holds calls as
     * --durability sync does, until a standby has their records. */
    bool standby;
    bool repl_sync;
    uint64_t repl_applied_lsn;
    uint64_t repl_blocks_applied;
    uint64_t repl_apply_errors;
    struct cr_durable_apply_counts repl_counts;
    uint64_t repl_snapshot_mark; /* repl_counts.records when a standby's snapshot began */
    uint64_t synced_lsn;
    struct held_list round_held; /* this round's, lsn not known yet */
    struct held_group groups[HELD_GROUPS_MAX]; /* oldest first, from groups_head */
    uint32_t groups_head, groups_count;
    uint64_t calls_held;
    uint64_t log_blocks_dropped; /* the journal was gone: records not written */
    struct cr_durable_recovery recovery;
    uint64_t snapshot_every; /* records; 0 never */
    uint64_t snapshot_mark;  /* feed.records when the last snapshot began */
    bool snapshot_active;
    uint64_t snapshot_lsn;
    uint32_t snapshot_cursor;
    uint64_t snapshot_count;
    uint64_t snapshot_next_ns;  /* the next slice is not due before (monotonic) */
    bool snapshot_step_armed;   /* a CR_MSG_SEGMENTS_SNAPSHOT_STEP timer is set */
    uint64_t snapshot_slices;   /* slices taken, all snapshots */
    /* How long each slice held the store thread (a call that came meanwhile
     * waited that long at most): crescent_segments_snapshot_slice_seconds. */
    struct cr_histogram snapshot_slice_hist;
    uint64_t snapshot_slice_ns_max;
    uint64_t snapshots_begun;
    struct segments_recent *recent; /* the last objects put (segments_recent.c) */
    struct segments_drain *drain;   /* Mooncake's drain jobs (segments_drain.c) */
    /* Calls whose answer was a refusal, by method (the "store_calls" stats
     * view: Mooncake's master_*_failures_total), and PutStarts refused for
     * want of room (master_put_start_alloc_failures_total). */
    uint64_t method_failures[CR_RPC_METHOD_SLOTS];
    uint64_t put_start_no_room;
    struct segments_mc_counts mc; /* Mooncake's other counts (segments_mc.c) */
};

/* segments.c: a finished call goes back to its edge or gateway. */
void segments_finish(struct segments_state *st, struct cr_master_call *call);

/* segments_offload.c: eviction victim v becomes an OFFLOAD task for the
 * server whose SSD tier can take it.  True when it is not to be dropped now
 * (handed over, or kept for the next pass); false: evict as ever. */
bool segments_offload_victim(struct segments_state *st, const struct cr_evict_candidate *v);

struct cr_daemon_config;
/* segments_promote.c: --promotion-hits on the store (at create), and the
 * objects that reached them become promotion tasks (each tick). */
int segments_promote_setup(struct segments_state *st, const struct cr_daemon_config *config);
void segments_promote_tick(struct segments_state *st);

/* segments_durable.c */
/* Replays --state-dir into the store (on segments' thread, at start). */
int segments_durable_start(struct segments_state *st);
/* Round end: the round's records to the journal, a snapshot's next slice. */
void segments_durable_round_end(struct segments_state *st);
/* A call that changed the store waits for its round's records (sync). */
void segments_durable_hold(struct segments_state *st, struct cr_master_call *call);
void segments_durable_synced(struct segments_state *st, const struct cr_msg_durable_synced *m);
/* Frees the calls still held (segments is destroyed: never answered). */
void segments_durable_free(struct segments_state *st);

/* HA (segments_ha.c): the fence's gate, made when --ha etcd is on (CR_OK or
 * CR_ERR_NOMEM); a mutating call refused "not the leader" when this node may
 * not answer it now (true: answered, the caller is done with it); the gate freed. */
struct cr_daemon_config;
int segments_ha_create(struct segments_state *st, const struct cr_daemon_config *config);
bool segments_ha_refuse(struct segments_state *st, struct cr_master_call *call,
                        struct cr_msg *ask_msg);
void segments_ha_free(struct segments_state *st);

/* segments_repl.c: replication (docs/durability.md, "Replication") */
/* A mutating call on a master that does not lead now (a standby, a fenced
 * leader) is answered "not the leader" here: true when it was. */
bool segments_repl_refuse(struct segments_state *st, struct cr_master_call *call,
                          struct cr_msg *ask_msg);
/* The calls that change the store or its tasks (segments_repl.c): what a
 * master that does not lead refuses. */
bool segments_call_mutates(uint16_t method);
/* A block of the leader's records (CR_MSG_REPL_APPLY), applied to the store. */
void segments_repl_apply(struct segments_state *st, struct cr_msg_durable_append *a);
/* The journal's role change (CR_MSG_REPL_ROLE). */
void segments_repl_role(struct segments_state *st, const struct cr_msg_repl_role *m);
void segments_repl_stats(struct segments_state *st, struct cr_actor_stats *out);
void segments_repl_reset(struct segments_state *st);
/* A standby's own snapshots: one slice per round, begun every
 * --snapshot-every-records records applied, cut at the last applied. */
void segments_repl_snapshot_step(struct segments_state *st);
/* segments_durable.c: one slice of a snapshot (a leader's or a
 * standby's), begun once counted_records passed *mark by
 * --snapshot-every-records, cut at cut_lsn (0: nothing to cut yet). */
void segments_snapshot_step(struct segments_state *st, uint64_t counted_records, uint64_t *mark,
                            uint64_t cut_lsn);

/* segments_reads.c: the clients' read latency per tier, as /metrics histograms. */
void segments_read_latency_stats(const struct segments_state *st, struct cr_actor_stats *out);

/* segments_files.c: the shared file tier on the master's side. */
void segments_files_init(struct segments_state *st, const struct cr_daemon_config *config);
void segments_files_start(struct segments_state *st);
/* Deletes what is queued and stops the deleting thread (after the store is gone). */
void segments_files_stop(struct segments_state *st);
/* Unlinks path only while it names the file fd (O_PATH) was opened on: 1
 * deleted (or gone already), 0 kept (a newer file has the name), -1 failed
 * (errno set).  The deleting thread's step, tested on its own. */
int segments_files_unlink_same(int fd, const char *path);

#endif
