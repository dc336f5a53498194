/* Mooncake master's metric families on --metrics-port's /metrics (see
 * mooncake_metrics.h): all 131 a bare mooncake_master serves, each one line
 * with the reference's name, type and help, word for word, and where
 * crescent counts it:
 *   SUM          the sum of crescent counters with the same meaning, from the
 *                actors' stats (rpc requests are summed over the ZMQ,
 *                native, shm and Mooncake endpoints); no sample when none of
 *                them answered, rather than a false one;
 *   SUM_OR_ZERO  the same, but 0 when their source is not running, which is
 *                then the true value: no Mooncake endpoint, no CopyStart can
 *                arrive; no --state-dir, no operation log is written;
 *   PROMOTION_IN_FLIGHT  promotions begun and not ended (segments' counters);
 *   ZERO_*       true 0 by construction, for what crescent does not do
 *                (the parts of Mooncake's promotion crescent's has not: a
 *                frequency sketch, a reaper, retry candidates, cancellation
 *                apart from failure; out-of-order op-log entries,
 *                since a standby applies its leader's stream in order;
 *                mutations retried into etcd, since crescent writes none);
 *   HA_*         from the replication role (journal's repl_role).
 * docs/mooncake.md ("Metrics") says where each comes from. */
#include "http/mooncake_metrics.h"

#include <stdbool.h>
#include <string.h>

enum family_type { COUNTER, GAUGE };
enum kind {
    SUM,
    SUM_OR_ZERO,
    PROMOTION_IN_FLIGHT,
    ZERO_NO_PROMOTION,
    ZERO_IN_ORDER,
    ZERO_NO_ETCD_MUTATIONS,
    HA_APPLIED,
    HA_STATE
};

struct source {
    const char *actor, *counter;
};

#define SOURCES_MAX 3

struct family {
    const char *name;
    enum family_type type;
    enum kind kind;
    struct source src[SOURCES_MAX]; /* SUM, SUM_OR_ZERO: summed; unused ones NULL */
    const char *help;               /* the reference's, word for word */
};

static const struct family families[] = {
    {"master_allocated_bytes", GAUGE, SUM, {{"segments", "used_bytes"}},
     "Total memory bytes currently allocated across all segments"},
    {"master_total_capacity_bytes", GAUGE, SUM, {{"segments", "capacity_bytes"}},
     "Total memory capacity across all mounted segments"},
    {"master_allocated_file_size_bytes", GAUGE, SUM, {{"segments", "file_tier_used_bytes"}},
     "Total bytes currently allocated for file storage in 3fs/nfs"},
    {"master_total_file_capacity_bytes", GAUGE, SUM, {{"segments", "file_tier_capacity_bytes"}},
     "Total capacity for file storage in 3fs/nfs"},
    {"master_key_count", GAUGE, SUM, {{"segments", "objects"}},
     "Total number of keys managed by the master"},
    {"master_soft_pin_key_count", GAUGE, SUM, {{"mooncake_calls", "soft_pinned_objects"}},
     "Total number of soft-pinned keys managed by the master"},
    {"master_active_clients", GAUGE, SUM, {{"segments", "clients"}},
     "Total number of active clients"},
    {"master_exist_key_requests_total", COUNTER, SUM, {{"rpc", "requests_exist_key_total"}},
     "Total number of ExistKey requests received"},
    {"master_exist_key_failures_total", COUNTER, SUM, {{"store_calls", "failures_exist_key_total"}},
     "Total number of failed ExistKey requests"},
    {"master_put_start_requests_total", COUNTER, SUM, {{"rpc", "requests_put_start_total"}},
     "Total number of PutStart requests received"},
    {"master_put_start_failures_total", COUNTER, SUM, {{"store_calls", "failures_put_start_total"}},
     "Total number of failed PutStart requests"},
    {"master_put_start_alloc_failures_total", COUNTER, SUM, {{"store_calls", "put_start_no_room_total"}},
     "Total number of PutStart failures caused by replica allocation failure"},
    {"master_put_start_partial_allocations_total", COUNTER, SUM, {{"mooncake_calls", "put_start_partial_allocations_total"}},
     "Total number of PutStart requests that succeeded with fewer replicas than requested (best-effort degradation)"},
    {"master_put_end_requests_total", COUNTER, SUM, {{"rpc", "requests_put_end_total"}},
     "Total number of PutEnd requests received"},
    {"master_put_end_failures_total", COUNTER, SUM, {{"store_calls", "failures_put_end_total"}},
     "Total number of failed PutEnd requests"},
    {"master_put_revoke_requests_total", COUNTER, SUM, {{"rpc", "requests_put_revoke_total"}},
     "Total number of PutRevoke requests received"},
    {"master_put_revoke_failures_total", COUNTER, SUM, {{"store_calls", "failures_put_revoke_total"}},
     "Total number of failed PutRevoke requests"},
    {"master_get_replica_list_requests_total", COUNTER, SUM, {{"rpc", "requests_get_replica_list_total"}},
     "Total number of GetReplicaList requests received"},
    {"master_get_replica_list_failures_total", COUNTER, SUM, {{"store_calls", "failures_get_replica_list_total"}},
     "Total number of failed GetReplicaList requests"},
    {"master_get_replica_list_by_regex_requests_total", COUNTER, SUM, {{"rpc", "requests_get_replica_list_by_regex_total"}},
     "Total number of GetReplicaListByRegex requests received"},
    {"master_get_replica_list_by_regex_failures_total", COUNTER, SUM, {{"store_calls", "failures_get_replica_list_by_regex_total"}},
     "Total number of failed GetReplicaListByRegex requests"},
    {"master_remove_requests_total", COUNTER, SUM, /* a BatchRemove's keys count, as Mooncake's */
     {{"rpc", "requests_remove_total"}, {"mooncake_calls", "batch_remove_items_total"}},
     "Total number of Remove requests received"},
    {"master_remove_failures_total", COUNTER, SUM,
     {{"store_calls", "failures_remove_total"}, {"mooncake_calls", "batch_remove_failed_items_total"}},
     "Total number of failed Remove requests"},
    {"master_remove_by_regex_requests_total", COUNTER, SUM, {{"rpc", "requests_remove_by_regex_total"}},
     "Total number of RemoveByRegex requests received"},
    {"master_remove_by_regex_failures_total", COUNTER, SUM, {{"store_calls", "failures_remove_by_regex_total"}},
     "Total number of failed RemoveByRegex requests"},
    {"master_remove_all_requests_total", COUNTER, SUM, {{"rpc", "requests_remove_all_total"}},
     "Total number of Remove all requests received"},
    {"master_remove_all_failures_total", COUNTER, SUM, {{"store_calls", "failures_remove_all_total"}},
     "Total number of failed Remove all requests"},
    {"master_mount_segment_requests_total", COUNTER, SUM, {{"rpc", "requests_mount_segment_total"}},
     "Total number of MountSegment requests received"},
    {"master_mount_segment_failures_total", COUNTER, SUM, {{"store_calls", "failures_mount_segment_total"}},
     "Total number of failed MountSegment requests"},
    {"master_unmount_segment_requests_total", COUNTER, SUM, {{"rpc", "requests_unmount_segment_total"}},
     "Total number of UnmountSegment requests received"},
    {"master_unmount_segment_failures_total", COUNTER, SUM, {{"store_calls", "failures_unmount_segment_total"}},
     "Total number of failed UnmountSegment requests"},
    {"master_remount_segment_requests_total", COUNTER, SUM, {{"rpc", "requests_remount_segment_total"}},
     "Total number of RemountSegment requests received"},
    {"master_remount_segment_failures_total", COUNTER, SUM, {{"store_calls", "failures_remount_segment_total"}},
     "Total number of failed RemountSegment requests"},
    {"master_ping_requests_total", COUNTER, SUM, {{"rpc", "requests_ping_total"}},
     "Total number of ping requests received"},
    {"master_ping_failures_total", COUNTER, SUM, {{"store_calls", "failures_ping_total"}},
     "Total number of failed ping requests"},
    {"master_copy_start_requests_total", COUNTER, SUM_OR_ZERO, {{"mooncake_rpc", "refused_copy_start_total"}},
     "Total number of CopyStart requests received"},
    {"master_copy_start_failures_total", COUNTER, SUM_OR_ZERO, {{"mooncake_rpc", "refused_copy_start_total"}},
     "Total number of failed CopyStart requests"},
    {"master_copy_end_requests_total", COUNTER, SUM_OR_ZERO, {{"mooncake_rpc", "refused_copy_end_total"}},
     "Total number of CopyEnd requests received"},
    {"master_copy_end_failures_total", COUNTER, SUM_OR_ZERO, {{"mooncake_rpc", "refused_copy_end_total"}},
     "Total number of failed CopyEnd requests"},
    {"master_copy_revoke_requests_total", COUNTER, SUM_OR_ZERO, {{"mooncake_rpc", "refused_copy_revoke_total"}},
     "Total number of CopyRevoke requests received"},
    {"master_copy_revoke_failures_total", COUNTER, SUM_OR_ZERO, {{"mooncake_rpc", "refused_copy_revoke_total"}},
     "Total number of failed CopyRevoke requests"},
    {"master_move_start_requests_total", COUNTER, SUM_OR_ZERO, {{"mooncake_rpc", "refused_move_start_total"}},
     "Total number of MoveStart requests received"},
    {"master_move_start_failures_total", COUNTER, SUM_OR_ZERO, {{"mooncake_rpc", "refused_move_start_total"}},
     "Total number of failed MoveStart requests"},
    {"master_move_end_requests_total", COUNTER, SUM_OR_ZERO, {{"mooncake_rpc", "refused_move_end_total"}},
     "Total number of MoveEnd requests received"},
    {"master_move_end_failures_total", COUNTER, SUM_OR_ZERO, {{"mooncake_rpc", "refused_move_end_total"}},
     "Total number of failed MoveEnd requests"},
    {"master_move_revoke_requests_total", COUNTER, SUM_OR_ZERO, {{"mooncake_rpc", "refused_move_revoke_total"}},
     "Total number of MoveRevoke requests received"},
    {"master_move_revoke_failures_total", COUNTER, SUM_OR_ZERO, {{"mooncake_rpc", "refused_move_revoke_total"}},
     "Total number of failed MoveRevoke requests"},
    {"master_evict_disk_replica_requests_total", COUNTER, SUM_OR_ZERO, {{"mooncake_rpc", "refused_evict_disk_replica_total"}},
     "Total number of EvictDiskReplica requests received"},
    {"master_evict_disk_replica_failures_total", COUNTER, SUM_OR_ZERO, {{"mooncake_rpc", "refused_evict_disk_replica_total"}},
     "Total number of failed EvictDiskReplica requests"},
    {"master_create_copy_task_requests_total", COUNTER, SUM, {{"rpc", "requests_create_copy_task_total"}, {"mooncake_rpc", "refused_create_copy_task_total"}},
     "Total number of Copy requests received"},
    {"master_create_copy_task_failures_total", COUNTER, SUM, {{"mooncake_calls", "failures_create_copy_task_total"}, {"tasks", "failures_create_copy_task_total"}, {"mooncake_rpc", "refused_create_copy_task_total"}},
     "Total number of failed Copy requests"},
    {"master_create_move_task_requests_total", COUNTER, SUM, {{"rpc", "requests_create_move_task_total"}, {"mooncake_rpc", "refused_create_move_task_total"}},
     "Total number of Move requests received"},
    {"master_create_move_task_failures_total", COUNTER, SUM, {{"mooncake_calls", "failures_create_move_task_total"}, {"tasks", "failures_create_move_task_total"}, {"mooncake_rpc", "refused_create_move_task_total"}},
     "Total number of failed Move requests"},
    {"master_update_task_requests_total", COUNTER, SUM, {{"rpc", "requests_mark_task_to_complete_total"}, {"mooncake_rpc", "refused_mark_task_to_complete_total"}},
     "Total number of MarkTaskToComplete requests received"},
    {"master_update_task_failures_total", COUNTER, SUM, {{"mooncake_calls", "failures_mark_task_to_complete_total"}, {"tasks", "failures_mark_task_to_complete_total"}, {"mooncake_rpc", "refused_mark_task_to_complete_total"}},
     "Total number of failed MarkTaskToComplete requests"},
    {"master_query_task_requests_total", COUNTER, SUM, {{"rpc", "requests_query_task_total"}, {"mooncake_rpc", "refused_query_task_total"}},
     "Total number of QueryTask requests received"},
    {"master_query_task_failures_total", COUNTER, SUM, {{"mooncake_calls", "failures_query_task_total"}, {"tasks", "failures_query_task_total"}, {"mooncake_rpc", "refused_query_task_total"}},
     "Total number of failed QueryTask requests"},
    {"master_fetch_tasks_requests_total", COUNTER, SUM, {{"rpc", "requests_fetch_tasks_total"}},
     "Total number of FetchTasks requests received"},
    {"master_fetch_tasks_failures_total", COUNTER, SUM, {{"mooncake_calls", "failures_fetch_tasks_total"}, {"tasks", "failures_fetch_tasks_total"}},
     "Total number of failed FetchTasks requests"},
    {"master_batch_exist_key_requests_total", COUNTER, SUM, {{"rpc", "requests_batch_exist_key_total"}},
     "Total number of BatchExistKey requests received"},
    {"master_batch_exist_key_failures_total", COUNTER, SUM, {{"mooncake_calls", "batch_exist_key_failures_total"}},
     "Total number of failed BatchExistKey requests"},
    {"master_batch_exist_key_partial_successes_total", COUNTER, SUM, {{"mooncake_calls", "batch_exist_key_partial_successes_total"}},
     "Total number of partially successful BatchExistKey requests"},
    {"master_batch_exist_key_items_total", COUNTER, SUM, {{"mooncake_calls", "batch_exist_key_items_total"}},
     "Total number of items processed in BatchExistKey requests"},
    {"master_batch_exist_key_failed_items_total", COUNTER, SUM, {{"mooncake_calls", "batch_exist_key_failed_items_total"}},
     "Total number of failed items in BatchExistKey requests"},
    {"master_batch_query_ip_requests_total", COUNTER, SUM, {{"rpc", "requests_batch_query_ip_total"}},
     "Total number of BatchQueryIp requests received"},
    {"master_batch_query_ip_failures_total", COUNTER, SUM, {{"mooncake_calls", "batch_query_ip_failures_total"}},
     "Total number of failed BatchQueryIp requests"},
    {"master_batch_query_ip_partial_successes_total", COUNTER, SUM, {{"mooncake_calls", "batch_query_ip_partial_successes_total"}},
     "Total number of partially successful BatchQueryIp requests"},
    {"master_batch_query_ip_items_total", COUNTER, SUM, {{"mooncake_calls", "batch_query_ip_items_total"}},
     "Total number of items processed in BatchQueryIp requests"},
    {"master_batch_query_ip_failed_items_total", COUNTER, SUM, {{"mooncake_calls", "batch_query_ip_failed_items_total"}},
     "Total number of failed items in BatchQueryIp requests"},
    {"master_batch_replica_clear_requests_total", COUNTER, SUM, {{"rpc", "requests_batch_replica_clear_total"}},
     "Total number of BatchReplicaClear requests received"},
    {"master_batch_replica_clear_failures_total", COUNTER, SUM, {{"mooncake_calls", "batch_replica_clear_failures_total"}},
     "Total number of failed BatchReplicaClear requests"},
    {"master_batch_replica_clear_partial_successes_total", COUNTER, SUM, {{"mooncake_calls", "batch_replica_clear_partial_successes_total"}},
     "Total number of partially successful BatchReplicaClear requests"},
    {"master_batch_replica_clear_items_total", COUNTER, SUM, {{"mooncake_calls", "batch_replica_clear_items_total"}},
     "Total number of items processed in BatchReplicaClear requests"},
    {"master_batch_replica_clear_failed_items_total", COUNTER, SUM, {{"mooncake_calls", "batch_replica_clear_failed_items_total"}},
     "Total number of failed items in BatchReplicaClear requests"},
    {"master_batch_get_replica_list_requests_total", COUNTER, SUM, {{"rpc", "requests_batch_get_replica_list_total"}},
     "Total number of BatchGetReplicaList requests received"},
    {"master_batch_get_replica_list_failures_total", COUNTER, SUM, {{"mooncake_calls", "batch_get_replica_list_failures_total"}},
     "Total number of failed BatchGetReplicaList requests"},
    {"master_batch_get_replica_list_partial_successes_total", COUNTER, SUM, {{"mooncake_calls", "batch_get_replica_list_partial_successes_total"}},
     "Total number of partially successful BatchGetReplicaList requests"},
    {"master_batch_get_replica_list_items_total", COUNTER, SUM, {{"mooncake_calls", "batch_get_replica_list_items_total"}},
     "Total number of items processed in BatchGetReplicaList requests"},
    {"master_batch_get_replica_list_failed_items_total", COUNTER, SUM, {{"mooncake_calls", "batch_get_replica_list_failed_items_total"}},
     "Total number of failed items in BatchGetReplicaList requests"},
    {"master_batch_put_start_requests_total", COUNTER, SUM, {{"rpc", "requests_batch_put_start_total"}},
     "Total number of BatchPutStart requests received"},
    {"master_batch_put_start_failures_total", COUNTER, SUM, {{"mooncake_calls", "batch_put_start_failures_total"}},
     "Total number of failed BatchPutStart requests"},
    {"master_batch_put_start_partial_successes_total", COUNTER, SUM, {{"mooncake_calls", "batch_put_start_partial_successes_total"}},
     "Total number of partially successful BatchPutStart requests"},
    {"master_batch_put_start_items_total", COUNTER, SUM, {{"mooncake_calls", "batch_put_start_items_total"}},
     "Total number of items processed in BatchPutStart requests"},
    {"master_batch_put_start_failed_items_total", COUNTER, SUM, {{"mooncake_calls", "batch_put_start_failed_items_total"}},
     "Total number of failed items in BatchPutStart requests"},
    {"master_batch_put_end_requests_total", COUNTER, SUM, {{"rpc", "requests_batch_put_end_total"}},
     "Total number of BatchPutEnd requests received"},
    {"master_batch_put_end_failures_total", COUNTER, SUM, {{"mooncake_calls", "batch_put_end_failures_total"}},
     "Total number of failed BatchPutEnd requests"},
    {"master_batch_put_end_partial_successes_total", COUNTER, SUM, {{"mooncake_calls", "batch_put_end_partial_successes_total"}},
     "Total number of partially successful BatchPutEnd requests"},
    {"master_batch_put_end_items_total", COUNTER, SUM, {{"mooncake_calls", "batch_put_end_items_total"}},
     "Total number of items processed in BatchPutEnd requests"},
    {"master_batch_put_end_failed_items_total", COUNTER, SUM, {{"mooncake_calls", "batch_put_end_failed_items_total"}},
     "Total number of failed items in BatchPutEnd requests"},
    {"master_batch_put_revoke_requests_total", COUNTER, SUM, {{"rpc", "requests_batch_put_revoke_total"}},
     "Total number of BatchPutRevoke requests received"},
    {"master_batch_put_revoke_failures_total", COUNTER, SUM, {{"mooncake_calls", "batch_put_revoke_failures_total"}},
     "Total number of failed BatchPutRevoke requests"},
    {"master_batch_put_revoke_partial_successes_total", COUNTER, SUM, {{"mooncake_calls", "batch_put_revoke_partial_successes_total"}},
     "Total number of partially successful BatchPutRevoke requests"},
    {"master_batch_put_revoke_items_total", COUNTER, SUM, {{"mooncake_calls", "batch_put_revoke_items_total"}},
     "Total number of items processed in BatchPutRevoke requests"},
    {"master_batch_put_revoke_failed_items_total", COUNTER, SUM, {{"mooncake_calls", "batch_put_revoke_failed_items_total"}},
     "Total number of failed items in BatchPutRevoke requests"},
    {"mem_cache_hit_nums_", COUNTER, SUM, {{"mooncake_calls", "mem_cache_hits_total"}},
     "Total number of GetReplicaList results served from the memory pool"},
    {"file_cache_hit_nums_", COUNTER, SUM, {{"mooncake_calls", "file_cache_hits_total"}},
     "Total number of GetReplicaList results served from the SSD cache"},
    {"mem_cache_hit_bytes_total", COUNTER, SUM, {{"mooncake_calls", "mem_cache_hit_bytes_total"}},
     "Total bytes of GetReplicaList results served from the memory pool"},
    {"file_cache_hit_bytes_total", COUNTER, SUM, {{"mooncake_calls", "file_cache_hit_bytes_total"}},
     "Total bytes of GetReplicaList results served from the SSD cache"},
    {"mem_cache_nums_", GAUGE, SUM, {{"mooncake_calls", "mem_cached_objects"}},
     "Current number of cached values in the memory pool"},
    {"file_cache_nums_", GAUGE, SUM, {{"mooncake_calls", "file_cached_objects"}},
     "Current number of cached values in SSD cache"},
    {"valid_get_nums_", COUNTER, SUM, {{"mooncake_calls", "gets_valid_total"}},
     "Total number of GetReplicaList operations that returned at least one completed replica"},
    {"total_get_nums_", COUNTER, SUM, {{"mooncake_calls", "gets_total"}},
     "Total number of GetReplicaList operations"},
    {"master_successful_evictions_total", COUNTER, SUM, {{"mooncake_calls", "evictions_successful_total"}},
     "Total number of successful eviction operations"},
    {"master_attempted_evictions_total", COUNTER, SUM, {{"mooncake_calls", "evictions_attempted_total"}},
     "Total number of attempted eviction operations"},
    {"master_evicted_key_count", COUNTER, SUM, {{"segments", "evictions_total"}},
     "Total number of keys evicted"},
    {"master_evicted_size_bytes", COUNTER, SUM, {{"segments", "evicted_bytes_total"}},
     "Total bytes of evicted objects"},
    {"master_put_start_discard_cnt", COUNTER, SUM, {{"segments", "zombies_preempted_total"}},
     "Total number of discarded PutStart operations"},
    {"master_put_start_release_cnt", COUNTER, SUM, {{"mooncake_calls", "discards_released_total"}},
     "Total number of released PutStart operations"},
    {"master_put_start_discarded_staging_size", GAUGE, SUM, {{"mooncake_calls", "discarded_put_bytes"}},
     "Total size of memory replicas in discarded but not yet released PutStart operations"},
    {"master_promotion_in_flight", GAUGE, PROMOTION_IN_FLIGHT, {},
     "Current number of in-flight L2->L1 promotion tasks"},
    {"master_promotion_admitted_total", COUNTER, SUM_OR_ZERO, {{"segments", "promotions_started_total"}},
     "Total promotion tasks admitted past all gates and enqueued"},
    {"master_promotion_completed_total", COUNTER, SUM_OR_ZERO, {{"segments", "promotions_done_total"}},
     "Total promotion tasks committed via NotifyPromotionSuccess"},
    {"master_promotion_completed_bytes_total", COUNTER, SUM_OR_ZERO, {{"segments", "promotions_done_bytes_total"}},
     "Total bytes promoted from LOCAL_DISK to MEMORY"},
    {"master_promotion_expired_total", COUNTER, ZERO_NO_PROMOTION, {},
     "Total promotion tasks expired via the reaper (put_start_release_timeout_sec)"},
    {"master_promotion_failed_total", COUNTER, SUM_OR_ZERO, {{"segments", "promotions_failed_total"}},
     "Total promotion tasks aborted by holder via NotifyPromotionFailure (holder reported a downstream failure)"},
    {"master_promotion_cancelled_total", COUNTER, ZERO_NO_PROMOTION, {},
     "Total promotion tasks removed because the prerequisite went away: object removal mid-flight (Remove / UpsertStart / etc.), holder-client expiry (ClearInvalidHandles), or staged replica lost (NotifyPromotionSuccess committed=false)"},
    {"master_promotion_rejected_frequency_total", COUNTER, ZERO_NO_PROMOTION, {},
     "Promotion attempts rejected because CountMinSketch frequency was below promotion_admission_threshold"},
    {"master_promotion_rejected_watermark_total", COUNTER, SUM_OR_ZERO, {{"segments", "promotions_no_room_total"}},
     "Promotion attempts rejected because DRAM was at or above the eviction high watermark"},
    {"master_promotion_rejected_cap_total", COUNTER, ZERO_NO_PROMOTION, {},
     "Promotion attempts rejected because promotion_in_flight was at promotion_queue_limit"},
    {"master_promotion_candidate_recorded_total", COUNTER, ZERO_NO_PROMOTION, {},
     "New promotion retry candidate entries created"},
    {"master_promotion_candidate_admitted_total", COUNTER, ZERO_NO_PROMOTION, {},
     "Promotion retry candidates successfully queued on background retry"},
    {"master_promotion_candidate_admission_rejected_total", COUNTER, ZERO_NO_PROMOTION, {},
     "Promotion retry candidates that hit a gate again during retry scan"},
    {"master_promotion_candidate_expired_evaluated_total", COUNTER, ZERO_NO_PROMOTION, {},
     "Promotion retry candidates expired or exhausted during a retry scan"},
    {"master_promotion_candidate_expired_unevaluated_total", COUNTER, ZERO_NO_PROMOTION, {},
     "Promotion retry candidates that aged out before the background scheduler ever evaluated them (scan budget too small to reach their shard within the TTL window)"},
    {"master_promotion_candidate_dropped_limit_total", COUNTER, ZERO_NO_PROMOTION, {},
     "Promotion retry candidates dropped at record time because the global candidate count limit was reached"},
    {"ha_oplog_last_sequence_id", GAUGE, SUM_OR_ZERO, {{"journal", "log_written_lsn"}},
     "Latest OpLog sequence ID written by Primary"},
    {"ha_oplog_applied_sequence_id", GAUGE, HA_APPLIED, {},
     "Latest OpLog sequence ID applied by Standby"},
    {"ha_oplog_standby_lag", GAUGE, SUM_OR_ZERO, {{"journal", "repl_lag_records_max"}},
     "Number of OpLog entries Standby is behind Primary"},
    {"ha_oplog_pending_entries", GAUGE, ZERO_IN_ORDER, {},
     "Number of out-of-order entries waiting in OpLogApplier"},
    {"ha_pending_mutation_queue_size", GAUGE, ZERO_NO_ETCD_MUTATIONS, {},
     "Number of mutations pending etcd write retry"},
    {"ha_standby_state", GAUGE, HA_STATE, {},
     "Current state of the Standby service (0=STOPPED, 1=CONNECTING, 2=SYNCING, 3=WATCHING, 4=RECOVERING, 5=RECONNECTING, 6=PROMOTING, 7=PROMOTED, 8=FAILED)"},
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

/* crescent's replication role (journal's repl_role: 0 none, 1 leader,
 * 2 standby); 0 without a journal (no --state-dir: no replication). */
static uint64_t role_of(const struct cr_metrics_actor *actors, uint32_t count) {
    uint64_t role = 0;
    return value_of(actors, count, "journal", "repl_role", &role) ? role : 0;
}

/* Mooncake's StandbyState values (ha_standby_state's help). */
enum { MC_STANDBY_STOPPED = 0, MC_STANDBY_WATCHING = 3 };

static bool family_value(const struct family *f, const struct cr_metrics_actor *actors,
                         uint32_t count, uint64_t *out) {
    *out = 0;
    switch (f->kind) {
    case SUM:
    case SUM_OR_ZERO: {
        bool found = false;
        for (size_t s = 0; s < SOURCES_MAX && f->src[s].actor != NULL; s++) {
            uint64_t v;
            if (!value_of(actors, count, f->src[s].actor, f->src[s].counter, &v)) continue;
            *out += v;
            found = true;
        }
        return found || f->kind == SUM_OR_ZERO;
    }
    case PROMOTION_IN_FLIGHT: { /* begun, neither committed nor failed yet */
        uint64_t begun, done, failed;
        if (!value_of(actors, count, "segments", "promotions_started_total", &begun)) return false;
        value_of(actors, count, "segments", "promotions_done_total", &done);
        value_of(actors, count, "segments", "promotions_failed_total", &failed);
        *out = begun > done + failed ? begun - done - failed : 0;
        return true;
    }
    case ZERO_NO_PROMOTION:
    case ZERO_IN_ORDER:
    case ZERO_NO_ETCD_MUTATIONS: return true;
    case HA_APPLIED: /* a standby's applied LSN; a leader applies no one's log */
        if (role_of(actors, count) != 2) return true;
        return value_of(actors, count, "segments", "repl_applied_lsn", out);
    case HA_STATE: /* a standby follows its leader's stream (WATCHING); else none runs */
        *out = role_of(actors, count) == 2 ? MC_STANDBY_WATCHING : MC_STANDBY_STOPPED;
        return true;
    }
    return false;
}

bool cr_mooncake_metric_value(const struct cr_metrics_actor *actors, uint32_t count,
                              const char *name, uint64_t *out) {
    for (size_t i = 0; i < FAMILY_COUNT; i++)
        if (strcmp(families[i].name, name) == 0)
            return family_value(&families[i], actors, count, out);
    *out = 0;
    return false;
}

void cr_mooncake_metrics_render(struct cr_buf *b, const struct cr_metrics_actor *actors,
                                uint32_t count) {
    for (size_t i = 0; i < FAMILY_COUNT; i++) {
        const struct family *f = &families[i];
        uint64_t v;
        if (!family_value(f, actors, count, &v))
            continue; /* its actor did not answer: no sample rather than a false one */
        cr_buf_appendf(b, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", f->name, f->help, f->name,
                       f->type == COUNTER ? "counter" : "gauge", f->name, (unsigned long long)v);
    }
}
