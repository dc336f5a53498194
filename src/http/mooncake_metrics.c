/* Mooncake master's metric families on --metrics-port's /metrics (see
 * mooncake_metrics.h).  One line per family the reference serves that
 * crescent can answer truthfully: MAP, a crescent counter or gauge with the
 * same meaning (rpc requests are summed over the ZMQ, native and shm
 * endpoints); ZERO, a family about something crescent does not have, whose
 * true value is 0 (file storage, tiers and promotion, HA replication).
 * The reference's other families (batches' failures, partial successes and
 * items, copy/move/task calls, cache hits, releases of discarded puts, soft
 * pins) are counts crescent does not keep: they are left out rather than
 * shown as 0 (docs/mooncake.md lists them). */
#include "http/mooncake_metrics.h"

#include <stdbool.h>
#include <string.h>

enum family_type { COUNTER, GAUGE };
enum source { FROM_ACTOR, ZERO_NO_FILES, ZERO_NO_TIERS, ZERO_NO_HA };

struct family {
    const char *name;
    enum family_type type;
    enum source source;
    const char *actor, *counter; /* FROM_ACTOR */
    const char *help;            /* the reference's, word for word */
};

#define MAP(name, type, actor, counter, help) {name, type, FROM_ACTOR, actor, counter, help}
#define ZERO(name, type, why, help) {name, type, ZERO_##why, NULL, NULL, help}

static const struct family families[] = {
    MAP("master_allocated_bytes", GAUGE, "segments", "used_bytes",
        "Total memory bytes currently allocated across all segments"),
    MAP("master_total_capacity_bytes", GAUGE, "segments", "capacity_bytes",
        "Total memory capacity across all mounted segments"),
    ZERO("master_allocated_file_size_bytes", GAUGE, NO_FILES,
         "Total bytes currently allocated for file storage in 3fs/nfs"),
    ZERO("master_total_file_capacity_bytes", GAUGE, NO_FILES,
         "Total capacity for file storage in 3fs/nfs"),
    MAP("master_key_count", GAUGE, "segments", "objects",
        "Total number of keys managed by the master"),
    MAP("master_active_clients", GAUGE, "segments", "clients",
        "Total number of active clients"),
    MAP("master_exist_key_requests_total", COUNTER, "rpc", "requests_exist_key_total",
        "Total number of ExistKey requests received"),
    MAP("master_put_start_requests_total", COUNTER, "rpc", "requests_put_start_total",
        "Total number of PutStart requests received"),
    MAP("master_put_end_requests_total", COUNTER, "rpc", "requests_put_end_total",
        "Total number of PutEnd requests received"),
    MAP("master_put_revoke_requests_total", COUNTER, "rpc", "requests_put_revoke_total",
        "Total number of PutRevoke requests received"),
    MAP("master_get_replica_list_requests_total", COUNTER, "rpc", "requests_get_replica_list_total",
        "Total number of GetReplicaList requests received"),
    MAP("master_get_replica_list_by_regex_requests_total", COUNTER, "rpc", "requests_get_replica_list_by_regex_total",
        "Total number of GetReplicaListByRegex requests received"),
    MAP("master_remove_requests_total", COUNTER, "rpc", "requests_remove_total",
        "Total number of Remove requests received"),
    MAP("master_remove_by_regex_requests_total", COUNTER, "rpc", "requests_remove_by_regex_total",
        "Total number of RemoveByRegex requests received"),
    MAP("master_remove_all_requests_total", COUNTER, "rpc", "requests_remove_all_total",
        "Total number of Remove all requests received"),
    MAP("master_mount_segment_requests_total", COUNTER, "rpc", "requests_mount_segment_total",
        "Total number of MountSegment requests received"),
    MAP("master_unmount_segment_requests_total", COUNTER, "rpc", "requests_unmount_segment_total",
        "Total number of UnmountSegment requests received"),
    MAP("master_remount_segment_requests_total", COUNTER, "rpc", "requests_remount_segment_total",
        "Total number of RemountSegment requests received"),
    MAP("master_ping_requests_total", COUNTER, "rpc", "requests_ping_total",
        "Total number of ping requests received"),
    /* Refusals of every endpoint's calls, counted where they are answered
     * (the segments actor's "store_calls" view). */
    MAP("master_exist_key_failures_total", COUNTER, "store_calls", "failures_exist_key_total",
        "Total number of failed ExistKey requests"),
    MAP("master_put_start_failures_total", COUNTER, "store_calls", "failures_put_start_total",
        "Total number of failed PutStart requests"),
    MAP("master_put_start_alloc_failures_total", COUNTER, "store_calls", "put_start_no_room_total",
        "Total number of PutStart failures caused by replica allocation failure"),
    MAP("master_put_end_failures_total", COUNTER, "store_calls", "failures_put_end_total",
        "Total number of failed PutEnd requests"),
    MAP("master_put_revoke_failures_total", COUNTER, "store_calls", "failures_put_revoke_total",
        "Total number of failed PutRevoke requests"),
    MAP("master_get_replica_list_failures_total", COUNTER, "store_calls", "failures_get_replica_list_total",
        "Total number of failed GetReplicaList requests"),
    MAP("master_get_replica_list_by_regex_failures_total", COUNTER, "store_calls", "failures_get_replica_list_by_regex_total",
        "Total number of failed GetReplicaListByRegex requests"),
    MAP("master_remove_failures_total", COUNTER, "store_calls", "failures_remove_total",
        "Total number of failed Remove requests"),
    MAP("master_remove_by_regex_failures_total", COUNTER, "store_calls", "failures_remove_by_regex_total",
        "Total number of failed RemoveByRegex requests"),
    MAP("master_remove_all_failures_total", COUNTER, "store_calls", "failures_remove_all_total",
        "Total number of failed Remove all requests"),
    MAP("master_mount_segment_failures_total", COUNTER, "store_calls", "failures_mount_segment_total",
        "Total number of failed MountSegment requests"),
    MAP("master_unmount_segment_failures_total", COUNTER, "store_calls", "failures_unmount_segment_total",
        "Total number of failed UnmountSegment requests"),
    MAP("master_remount_segment_failures_total", COUNTER, "store_calls", "failures_remount_segment_total",
        "Total number of failed RemountSegment requests"),
    MAP("master_ping_failures_total", COUNTER, "store_calls", "failures_ping_total",
        "Total number of failed ping requests"),
    MAP("master_put_start_discard_cnt", COUNTER, "segments", "zombies_preempted_total",
        "Total number of discarded PutStart operations"),
    MAP("master_create_copy_task_requests_total", COUNTER, "rpc", "requests_create_copy_task_total",
        "Total number of Copy requests received"),
    MAP("master_create_move_task_requests_total", COUNTER, "rpc", "requests_create_move_task_total",
        "Total number of Move requests received"),
    MAP("master_update_task_requests_total", COUNTER, "rpc", "requests_mark_task_to_complete_total",
        "Total number of MarkTaskToComplete requests received"),
    MAP("master_query_task_requests_total", COUNTER, "rpc", "requests_query_task_total",
        "Total number of QueryTask requests received"),
    MAP("master_fetch_tasks_requests_total", COUNTER, "rpc", "requests_fetch_tasks_total",
        "Total number of FetchTasks requests received"),
    MAP("master_batch_exist_key_requests_total", COUNTER, "rpc", "requests_batch_exist_key_total",
        "Total number of BatchExistKey requests received"),
    MAP("master_batch_query_ip_requests_total", COUNTER, "rpc", "requests_batch_query_ip_total",
        "Total number of BatchQueryIp requests received"),
    MAP("master_batch_replica_clear_requests_total", COUNTER, "rpc", "requests_batch_replica_clear_total",
        "Total number of BatchReplicaClear requests received"),
    MAP("master_batch_get_replica_list_requests_total", COUNTER, "rpc", "requests_batch_get_replica_list_total",
        "Total number of BatchGetReplicaList requests received"),
    MAP("master_batch_put_start_requests_total", COUNTER, "rpc", "requests_batch_put_start_total",
        "Total number of BatchPutStart requests received"),
    MAP("master_batch_put_end_requests_total", COUNTER, "rpc", "requests_batch_put_end_total",
        "Total number of BatchPutEnd requests received"),
    MAP("master_batch_put_revoke_requests_total", COUNTER, "rpc", "requests_batch_put_revoke_total",
        "Total number of BatchPutRevoke requests received"),
    MAP("master_evicted_key_count", COUNTER, "segments", "evictions_total",
        "Total number of keys evicted"),
    MAP("master_evicted_size_bytes", COUNTER, "segments", "evicted_bytes_total",
        "Total bytes of evicted objects"),
    ZERO("master_promotion_in_flight", GAUGE, NO_TIERS,
         "Current number of in-flight L2->L1 promotion tasks"),
    ZERO("master_promotion_admitted_total", COUNTER, NO_TIERS,
         "Total promotion tasks admitted past all gates and enqueued"),
    ZERO("master_promotion_completed_total", COUNTER, NO_TIERS,
         "Total promotion tasks committed via NotifyPromotionSuccess"),
    ZERO("master_promotion_completed_bytes_total", COUNTER, NO_TIERS,
         "Total bytes promoted from LOCAL_DISK to MEMORY"),
    ZERO("master_promotion_expired_total", COUNTER, NO_TIERS,
         "Total promotion tasks expired via the reaper (put_start_release_timeout_sec)"),
    ZERO("master_promotion_failed_total", COUNTER, NO_TIERS,
         "Total promotion tasks aborted by holder via NotifyPromotionFailure (holder reported a downstream failure)"),
    ZERO("master_promotion_cancelled_total", COUNTER, NO_TIERS,
         "Total promotion tasks removed because the prerequisite went away: object removal mid-flight (Remove / UpsertStart / etc.), holder-client expiry (ClearInvalidHandles), or staged replica lost (NotifyPromotionSuccess committed=false)"),
    ZERO("master_promotion_rejected_frequency_total", COUNTER, NO_TIERS,
         "Promotion attempts rejected because CountMinSketch frequency was below promotion_admission_threshold"),
    ZERO("master_promotion_rejected_watermark_total", COUNTER, NO_TIERS,
         "Promotion attempts rejected because DRAM was at or above the eviction high watermark"),
    ZERO("master_promotion_rejected_cap_total", COUNTER, NO_TIERS,
         "Promotion attempts rejected because promotion_in_flight was at promotion_queue_limit"),
    ZERO("master_promotion_candidate_recorded_total", COUNTER, NO_TIERS,
         "New promotion retry candidate entries created"),
    ZERO("master_promotion_candidate_admitted_total", COUNTER, NO_TIERS,
         "Promotion retry candidates successfully queued on background retry"),
    ZERO("master_promotion_candidate_admission_rejected_total", COUNTER, NO_TIERS,
         "Promotion retry candidates that hit a gate again during retry scan"),
    ZERO("master_promotion_candidate_expired_evaluated_total", COUNTER, NO_TIERS,
         "Promotion retry candidates expired or exhausted during a retry scan"),
    ZERO("master_promotion_candidate_expired_unevaluated_total", COUNTER, NO_TIERS,
         "Promotion retry candidates that aged out before the background scheduler ever evaluated them (scan budget too small to reach their shard within the TTL window)"),
    ZERO("master_promotion_candidate_dropped_limit_total", COUNTER, NO_TIERS,
         "Promotion retry candidates dropped at record time because the global candidate count limit was reached"),
    ZERO("ha_oplog_last_sequence_id", GAUGE, NO_HA,
         "Latest OpLog sequence ID written by Primary"),
    ZERO("ha_oplog_applied_sequence_id", GAUGE, NO_HA,
         "Latest OpLog sequence ID applied by Standby"),
    ZERO("ha_oplog_standby_lag", GAUGE, NO_HA,
         "Number of OpLog entries Standby is behind Primary"),
    ZERO("ha_oplog_pending_entries", GAUGE, NO_HA,
         "Number of out-of-order entries waiting in OpLogApplier"),
    ZERO("ha_pending_mutation_queue_size", GAUGE, NO_HA,
         "Number of mutations pending etcd write retry"),
    ZERO("ha_standby_state", GAUGE, NO_HA,
         "Current state of the Standby service (0=STOPPED, 1=CONNECTING, 2=SYNCING, 3=WATCHING, 4=RECOVERING, 5=RECONNECTING, 6=PROMOTING, 7=PROMOTED, 8=FAILED)"),
};

#define FAMILY_COUNT (sizeof(families) / sizeof(families[0]))

const char *cr_mooncake_metric_name(uint32_t i) {
    return i < FAMILY_COUNT ? families[i].name : NULL;
}

/* The counter summed over the actors (and stats views) named `actor`, or,
 * for "rpc", over every store RPC endpoint (rpc, rpc_tcp, rpc_shm and the
 * Mooncake endpoint mooncake_rpc, whose clients Mooncake's master counts);
 * false when none answered with it. */
static bool value_of(const struct cr_metrics_actor *actors, uint32_t count, const char *actor,
                     const char *counter, uint64_t *out) {
    bool prefix = strcmp(actor, "rpc") == 0, found = false;
    *out = 0;
    for (uint32_t i = 0; i < count; i++) {
        const char *name = actors[i].name;
        bool endpoint = strncmp(name, "rpc", 3) == 0 || strcmp(name, "mooncake_rpc") == 0;
        if (!actors[i].up || (prefix ? !endpoint : strcmp(name, actor) != 0))
            continue;
        for (uint32_t e = 0; e < actors[i].stats.extra_count; e++) {
            if (strcmp(actors[i].stats.extra[e].name, counter) != 0) continue;
            *out += actors[i].stats.extra[e].value;
            found = true;
        }
    }
    return found;
}

void cr_mooncake_metrics_render(struct cr_buf *b, const struct cr_metrics_actor *actors,
                                uint32_t count) {
    for (size_t i = 0; i < FAMILY_COUNT; i++) {
        const struct family *f = &families[i];
        uint64_t v = 0;
        if (f->source == FROM_ACTOR && !value_of(actors, count, f->actor, f->counter, &v))
            continue; /* its actor did not answer: no sample rather than a false one */
        cr_buf_appendf(b, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", f->name, f->help, f->name,
                       f->type == COUNTER ? "counter" : "gauge", f->name, (unsigned long long)v);
    }
}
