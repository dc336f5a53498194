/* Mooncake master's /metrics/summary line (see mooncake_summary.h). */
#include "http/mooncake_summary.h"

#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "http/mooncake_metrics.h"

/* The windowed counters: rates of their growth since the previous request. */
#define WINDOWED(X)                                                                                \
    X(PUT_START, "master_put_start_requests_total")                                                \
    X(PUT_START_F, "master_put_start_failures_total")                                              \
    X(PUT_END, "master_put_end_requests_total")                                                    \
    X(PUT_END_F, "master_put_end_failures_total")                                                  \
    X(PUT_REVOKE, "master_put_revoke_requests_total")                                              \
    X(PUT_REVOKE_F, "master_put_revoke_failures_total")                                            \
    X(GET, "master_get_replica_list_requests_total")                                               \
    X(GET_F, "master_get_replica_list_failures_total")                                             \
    X(EXIST, "master_exist_key_requests_total")                                                    \
    X(EXIST_F, "master_exist_key_failures_total")                                                  \
    X(DEL, "master_remove_requests_total")                                                         \
    X(DEL_F, "master_remove_failures_total")                                                       \
    X(DEL_ALL, "master_remove_all_requests_total")                                                 \
    X(DEL_ALL_F, "master_remove_all_failures_total")                                               \
    X(PING, "master_ping_requests_total")                                                          \
    X(PING_F, "master_ping_failures_total")                                                        \
    X(COPY_START, "master_copy_start_requests_total")                                              \
    X(COPY_START_F, "master_copy_start_failures_total")                                            \
    X(COPY_END, "master_copy_end_requests_total")                                                  \
    X(COPY_END_F, "master_copy_end_failures_total")                                                \
    X(COPY_REVOKE, "master_copy_revoke_requests_total")                                            \
    X(COPY_REVOKE_F, "master_copy_revoke_failures_total")                                          \
    X(MOVE_START, "master_move_start_requests_total")                                              \
    X(MOVE_START_F, "master_move_start_failures_total")                                            \
    X(MOVE_END, "master_move_end_requests_total")                                                  \
    X(MOVE_END_F, "master_move_end_failures_total")                                                \
    X(MOVE_REVOKE, "master_move_revoke_requests_total")                                            \
    X(MOVE_REVOKE_F, "master_move_revoke_failures_total")                                          \
    X(EVICT_DISK, "master_evict_disk_replica_requests_total")                                      \
    X(EVICT_DISK_F, "master_evict_disk_replica_failures_total")                                    \
    BATCH(X, B_PUT_START, "put_start")                                                             \
    BATCH(X, B_PUT_END, "put_end")                                                                 \
    BATCH(X, B_PUT_REVOKE, "put_revoke")                                                           \
    BATCH(X, B_GET, "get_replica_list")                                                            \
    BATCH(X, B_EXIST, "exist_key")                                                                 \
    BATCH(X, B_QUERY_IP, "query_ip")                                                               \
    BATCH(X, B_CLEAR, "replica_clear")                                                             \
    X(CREATE_MOVE, "master_create_move_task_requests_total")                                       \
    X(CREATE_MOVE_F, "master_create_move_task_failures_total")                                     \
    X(CREATE_COPY, "master_create_copy_task_requests_total")                                       \
    X(CREATE_COPY_F, "master_create_copy_task_failures_total")                                     \
    X(QUERY_TASK, "master_query_task_requests_total")                                              \
    X(QUERY_TASK_F, "master_query_task_failures_total")                                            \
    X(FETCH_TASKS, "master_fetch_tasks_requests_total")                                            \
    X(FETCH_TASKS_F, "master_fetch_tasks_failures_total")                                          \
    X(MARK_TASK, "master_update_task_requests_total")                                              \
    X(MARK_TASK_F, "master_update_task_failures_total")                                            \
    X(ALLOC_FAIL, "master_put_start_alloc_failures_total")                                         \
    X(PARTIAL_ALLOC, "master_put_start_partial_allocations_total")

#define BATCH(X, id, m)                                                                            \
    X(id, "master_batch_" m "_requests_total")                                                     \
    X(id##_F, "master_batch_" m "_failures_total")                                                 \
    X(id##_P, "master_batch_" m "_partial_successes_total")                                        \
    X(id##_I, "master_batch_" m "_items_total")                                                    \
    X(id##_FI, "master_batch_" m "_failed_items_total")

#define AS_ENUM(id, name) W_##id,
#define AS_NAME(id, name) name,
enum { WINDOWED(AS_ENUM) W_COUNT };
static const char *const windowed[] = {WINDOWED(AS_NAME)};
_Static_assert(W_COUNT == CR_MC_SUMMARY_WINDOWED, "the window holds every windowed counter");

struct reading {
    const struct cr_metrics_actor *actors;
    uint32_t count;
    uint64_t delta[W_COUNT];
    double elapsed_s; /* 0: no previous reading */
};

static uint64_t value(const struct reading *r, const char *name) {
    uint64_t v = 0;
    (void)cr_mooncake_metric_value(r->actors, r->count, name, &v);
    return v;
}

static uint64_t delta(const struct reading *r, int id) { return r->delta[id]; }

/* Counters never fall, but a reading whose actor did not answer is 0:
 * clamped at 0, as the reference clamps its deltas. */
static uint64_t minus(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

/* Mooncake's byte_size_to_string (mooncake-store/include/utils.h). */
static void bytes(struct cr_buf *b, uint64_t n) {
    const double kb = 1024.0, mb = kb * 1024.0, gb = mb * 1024.0, tb = gb * 1024.0;
    if (n == (uint64_t)INT64_MAX) cr_buf_appendf(b, "infinite");
    else if (n >= (uint64_t)tb) cr_buf_appendf(b, "%.2f TB", (double)n / tb);
    else if (n >= (uint64_t)gb) cr_buf_appendf(b, "%.2f GB", (double)n / gb);
    else if (n >= (uint64_t)mb) cr_buf_appendf(b, "%.2f MB", (double)n / mb);
    else if (n >= (uint64_t)kb) cr_buf_appendf(b, "%.2f KB", (double)n / kb);
    else cr_buf_appendf(b, "%llu B", (unsigned long long)n);
}

static void rate(struct cr_buf *b, const struct reading *r, uint64_t n) {
    cr_buf_appendf(b, "%.2f", r->elapsed_s > 0 ? (double)n / r->elapsed_s : 0.0);
}

/* "Success/Total" of a method: its requests less its failures. */
static void pair(struct cr_buf *b, const struct reading *r, int req, int fail) {
    rate(b, r, minus(delta(r, req), delta(r, fail)));
    cr_buf_appendf(b, "/");
    rate(b, r, delta(r, req));
}

/* A batch: "(Req=Success/PartialSuccess/Total, Item=Success/Total)". */
static void batch(struct cr_buf *b, const struct reading *r, const char *label, int id) {
    cr_buf_appendf(b, "%s:(Req=", label);
    rate(b, r, minus(minus(delta(r, id), delta(r, id + 1)), delta(r, id + 2)));
    cr_buf_appendf(b, "/");
    rate(b, r, delta(r, id + 2));
    cr_buf_appendf(b, "/");
    rate(b, r, delta(r, id));
    cr_buf_appendf(b, ", Item=");
    rate(b, r, minus(delta(r, id + 3), delta(r, id + 4)));
    cr_buf_appendf(b, "/");
    rate(b, r, delta(r, id + 3));
    cr_buf_appendf(b, "), ");
}

static void task(struct cr_buf *b, const struct reading *r, const char *label, int req, int fail,
                 const char *sep) {
    cr_buf_appendf(b, "%s:(Req=", label);
    pair(b, r, req, fail);
    cr_buf_appendf(b, ")%s", sep);
}

static void storage(struct cr_buf *b, const struct reading *r) {
    uint64_t used = value(r, "master_allocated_bytes");
    uint64_t cap = value(r, "master_total_capacity_bytes");
    cr_buf_appendf(b, "Mem Storage: ");
    bytes(b, used);
    cr_buf_appendf(b, " / ");
    bytes(b, cap);
    if (cap > 0) cr_buf_appendf(b, " (%.1f%%)", (double)used / (double)cap * 100.0);
    /* NVMe-oF SSD segments: crescent has none. */
    cr_buf_appendf(b, " | NVMe-oF SSD: 0 B / 0 B | SSD Storage: ");
    bytes(b, value(r, "master_allocated_file_size_bytes"));
    cr_buf_appendf(b, " / ");
    bytes(b, value(r, "master_total_file_capacity_bytes"));
    cr_buf_appendf(b, " | Keys: %llu (soft-pinned: %llu) | Clients: %llu",
                   (unsigned long long)value(r, "master_key_count"),
                   (unsigned long long)value(r, "master_soft_pin_key_count"),
                   (unsigned long long)value(r, "master_active_clients"));
}

static void requests(struct cr_buf *b, const struct reading *r) {
    static const struct {
        const char *label;
        int req;
    } single[] = {
        {"PutStart", W_PUT_START},   {"PutEnd", W_PUT_END},       {"PutRevoke", W_PUT_REVOKE},
        {"Get", W_GET},              {"Exist", W_EXIST},          {"Del", W_DEL},
        {"DelAll", W_DEL_ALL},       {"Ping", W_PING},            {"CopyStart", W_COPY_START},
        {"CopyEnd", W_COPY_END},     {"CopyRevoke", W_COPY_REVOKE}, {"MoveStart", W_MOVE_START},
        {"MoveEnd", W_MOVE_END},     {"MoveRevoke", W_MOVE_REVOKE},
        {"EvictDiskReplica", W_EVICT_DISK},
    };
    cr_buf_appendf(b, " | Requests (Success/Total per sec): ");
    for (size_t i = 0; i < sizeof(single) / sizeof(single[0]); i++) {
        cr_buf_appendf(b, "%s%s=", i ? ", " : "", single[i].label);
        pair(b, r, single[i].req, single[i].req + 1); /* each _F follows its request */
    }
    cr_buf_appendf(b, " | Batch Requests (per sec, Req=Success/PartialSuccess/Total, "
                      "Item=Success/Total): ");
    batch(b, r, "PutStart", W_B_PUT_START);
    batch(b, r, "PutEnd", W_B_PUT_END);
    batch(b, r, "PutRevoke", W_B_PUT_REVOKE);
    batch(b, r, "Get", W_B_GET);
    batch(b, r, "ExistKey", W_B_EXIST);
    batch(b, r, "QueryIp", W_B_QUERY_IP);
    batch(b, r, "Clear", W_B_CLEAR);
    task(b, r, "CreateMoveTask", W_CREATE_MOVE, W_CREATE_MOVE_F, ", ");
    task(b, r, "CreateCopyTask", W_CREATE_COPY, W_CREATE_COPY_F, ", ");
    task(b, r, "QueryTask", W_QUERY_TASK, W_QUERY_TASK_F, ", ");
    task(b, r, "FetchTasks", W_FETCH_TASKS, W_FETCH_TASKS_F, ", ");
    task(b, r, "MarkTaskToComplete", W_MARK_TASK, W_MARK_TASK_F, "");
}

/* Eviction totals are cumulative in the reference; its allocation
 * failures are windowed.  crescent evicts memory only: "Mem Eviction"
 * repeats the totals and "NoF Eviction" is 0. */
static void eviction(struct cr_buf *b, const struct reading *r) {
    unsigned long long ok = value(r, "master_successful_evictions_total"),
                       tries = value(r, "master_attempted_evictions_total"),
                       keys = value(r, "master_evicted_key_count");
    uint64_t size = value(r, "master_evicted_size_bytes");
    cr_buf_appendf(b, " | Eviction: Success/Attempts=%llu/%llu, AllocFail=%llu, PartialAlloc=%llu, "
                      "keys=%llu, size=",
                   ok, tries, (unsigned long long)delta(r, W_ALLOC_FAIL),
                   (unsigned long long)delta(r, W_PARTIAL_ALLOC), keys);
    bytes(b, size);
    cr_buf_appendf(b, " | Mem Eviction: Success/Attempts=%llu/%llu, keys=%llu, size=", ok, tries,
                   keys);
    bytes(b, size);
    cr_buf_appendf(b, " | NoF Eviction: Success/Attempts=0/0, keys=0, size=0 B");
    cr_buf_appendf(b, " | Discard: Released/Total=%llu/%llu, StagingSize=",
                   (unsigned long long)value(r, "master_put_start_release_cnt"),
                   (unsigned long long)value(r, "master_put_start_discard_cnt"));
    bytes(b, value(r, "master_put_start_discarded_staging_size"));
}

/* The journal's counter, 0 without one (no --state-dir). */
static uint64_t journal(const struct reading *r, const char *counter) {
    for (uint32_t i = 0; i < r->count; i++) {
        const struct cr_metrics_actor *a = &r->actors[i];
        if (!a->up || a->view || strcmp(a->name, "journal") != 0) continue;
        for (uint32_t e = 0; e < a->stats.extra_count; e++)
            if (strcmp(a->stats.extra[e].name, counter) == 0) return a->stats.extra[e].value;
    }
    return 0;
}

/* Promotion (crescent promotes nothing: 0), crescent's metadata snapshots
 * (--state-dir), and the HA part: the op log's positions as /metrics
 * serves them; batch and sync commits are the journal's blocks written and
 * synced, checksum failures the replication frames a standby refused,
 * watch disconnections its reconnects to the leader; crescent writes no
 * mutation to etcd and skips no entry. */
static void tail(struct cr_buf *b, const struct reading *r) {
    cr_buf_appendf(b, " | Promotion: in_flight=0, admitted=0, completed=0, failed=0, "
                      "cancelled=0, expired=0, bytes=0 B, rejected(freq/wm/cap)=0/0/0");
    cr_buf_appendf(b, " | Snapshots: Success=%llu, Fail=%llu}",
                   (unsigned long long)journal(r, "snapshots_total"),
                   (unsigned long long)journal(r, "snapshot_failures_total"));
    cr_buf_appendf(b,
                   ", ha={HA Metrics Summary: last_seq=%llu, applied_seq=%llu, lag=%llu, "
                   "pending=%llu, mutation_queue=%llu, batch_commits=%llu, sync_commits=%llu, "
                   "skipped=0, checksum_fail=%llu, etcd_fail=0, watch_disconn=%llu, state=%llu}",
                   (unsigned long long)value(r, "ha_oplog_last_sequence_id"),
                   (unsigned long long)value(r, "ha_oplog_applied_sequence_id"),
                   (unsigned long long)value(r, "ha_oplog_standby_lag"),
                   (unsigned long long)value(r, "ha_oplog_pending_entries"),
                   (unsigned long long)value(r, "ha_pending_mutation_queue_size"),
                   (unsigned long long)journal(r, "log_blocks_total"),
                   (unsigned long long)journal(r, "log_syncs_total"),
                   (unsigned long long)journal(r, "repl_bad_frames_total"),
                   (unsigned long long)journal(r, "repl_reconnects_total"),
                   (unsigned long long)value(r, "ha_standby_state"));
}

void cr_mc_summary_render(struct cr_buf *b, const struct cr_metrics_actor *actors, uint32_t count,
                          uint64_t now_ns, struct cr_mc_summary_window *window,
                          const struct cr_mc_ha *ha) {
    assert(b != NULL && window != NULL && ha != NULL && (actors != NULL || count == 0));
    struct reading r = {.actors = actors, .count = count};
    uint64_t now[W_COUNT];
    for (size_t i = 0; i < W_COUNT; i++) {
        now[i] = value(&r, windowed[i]);
        r.delta[i] = window->initialized ? minus(now[i], window->values[i]) : 0;
    }
    if (window->initialized && now_ns > window->at_ns)
        r.elapsed_s = (double)(now_ns - window->at_ns) / 1e9;
    window->initialized = true;
    window->at_ns = now_ns;
    for (size_t i = 0; i < W_COUNT; i++) window->values[i] = now[i];
    /* The role and state /role and /ha_status say (mooncake_ha.h). */
    cr_buf_appendf(b, "role=%s, state=%s, service_ready=%s, master={", ha->role, ha->state,
                   ha->service_active ? "true" : "false");
    storage(b, &r);
    requests(b, &r);
    eviction(b, &r);
    tail(b, &r);
}
