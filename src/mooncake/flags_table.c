/* One line per flag of Mooncake's master at kvcache-ai/Mooncake 3b5a594
 * (docs/mooncake-flags.tsv, sorted as there).  What each kind means is in
 * flags.h; a refusal names crescent's equivalent or says why there is none.
 * Switching a flag to honoured is its line becoming SETTING (with the crescent
 * setting that now carries its meaning), or WHEN with the value now built. */
#include "mooncake/flags.h"

#define SETTING(name, is_bool, setting) {name, is_bool, CR_MC_SETTING, setting, NULL}
#define WHEN(name, is_bool, value, reason) {name, is_bool, CR_MC_WHEN, value, reason}
#define IGNORED(name, is_bool) \
    {name, is_bool, CR_MC_IGNORED, NULL, "deprecated in the reference, which ignores it too"}
#define SWITCH(name, setting, reason) {name, true, CR_MC_SWITCH, setting, reason}
#define REFUSED(name, is_bool, reason) {name, is_bool, CR_MC_REFUSED, NULL, reason}

/* Reasons shared by families of flags. */
#define HA_YET "crescent keeps no op log or snapshots in etcd: its metadata is durable " \
               "under --state-dir (--durability, --snapshot-every-records; docs/durability.md) " \
               "and its leader is elected on an etcd lease (--enable_ha, docs/ha.md)"
#define RPC_KNOB "crescent's Mooncake endpoint (--mooncake-rpc-address, or --rpc_port/--port/" \
                 "--rpc_address) is served on the store's own thread and has no such knob"
#define NOF "crescent has no NVMe-oF tier: its SSD tier is each store server's own SSD " \
            "(crescent-store --ssd-dir, --ssd-size; docs/tiers.md)"
#define OFFLOAD "crescent offloads an object memory eviction picks to the SSD of the store " \
                "server holding it whenever that server runs with crescent-store --ssd-dir " \
                "(docs/tiers.md); start it without --ssd-dir for no offload"
#define TASKS_BOUND "crescent's offloads and promotions are tasks, bounded with copy and move " \
                    "tasks by --task-max-in-flight (docs/tiers.md)"
#define KV_EVENTS "crescent always publishes its store events as ZMQ PUB batches at " \
                  "--event-address (topic --event-topic, replay at --replay-address; " \
                  "docs/http-api.md), not the RFC #1527 publisher"
#define NO_K8S "crescent has no Kubernetes label routing; give clients --rpc-address"
#define NO_CXL "crescent has no CXL memory segments; mount memory segments (crescentctl mount)"
#define NO_HEAT "crescent adds no replicas by access heat: replicas come from the put's " \
                "replica count and copy tasks (crescentctl copy)"

static const struct cr_mooncake_flag table[] = {
    WHEN("allocation_strategy", false, "random",
         "crescent places a replica in the preferred segment, then random segments (the "
         "reference's 'random'); other strategies are not built"),
    SETTING("allow_evict_soft_pinned_objects", true, "allow-evict-soft-pinned-objects"),
    REFUSED("batch_oplog_retry_timeout_sec", false, HA_YET),
    SETTING("client_ttl", false, "client-ttl"),
    SETTING("cluster_id", false, "cluster-id"),
    REFUSED("config_path", false,
            "Mooncake's master config file: write it as a --flagfile (one --key=value a "
            "line; every key is the flag of the same name) or as crescent's --config JSON"),
    REFUSED("cxl_path", false, NO_CXL),
    REFUSED("cxl_size", false, NO_CXL),
    SETTING("default_kv_lease_ttl", false, "default-kv-lease-ttl"),
    SETTING("default_kv_soft_pin_ttl", false, "default-kv-soft-pin-ttl"),
    REFUSED("dynamic_replication_admission_qps_threshold", false, NO_HEAT),
    REFUSED("dynamic_replication_heat_window_seconds", false, NO_HEAT),
    REFUSED("dynamic_replication_max_memory_replicas", false, NO_HEAT),
    WHEN("dynamic_replication_mode", false, "off", NO_HEAT),
    WHEN("enable_cxl", true, "false", NO_CXL),
    WHEN("enable_disk_eviction", true, "true",
         "a store server's SSD always evicts its least recently used files past "
         "crescent-store --ssd-size, and the file tier past --global_file_segment_size"),
    SETTING("enable_ha", true, "enable-ha"),
    SETTING("enable_http_metadata_server", true, "enable-http-metadata-server"),
    REFUSED("enable_kv_events", true, KV_EVENTS),
    SETTING("enable_metadata_cleanup_on_timeout", true, "enable-metadata-cleanup-on-timeout"),
    WHEN("enable_metric_reporting", true, "false",
         "crescentd does not log its metrics periodically: scrape /metrics (crescent_*) or "
         "--metrics-port's /metrics (Mooncake's names), or GET /metrics/summary"),
    WHEN("enable_multi_tenants", true, "false",
         "crescent keeps tenants' keys apart always, without strict admission: "
         "--max-tenants-per-client bounds them"),
    WHEN("enable_offload", true, "true", OFFLOAD),
    WHEN("enable_oplog", true, "false", HA_YET),
    WHEN("enable_snapshot", true, "false", HA_YET),
    WHEN("enable_snapshot_restore", true, "false", HA_YET),
    SETTING("etcd_endpoints", false, "etcd-endpoints"),
    SETTING("eviction_high_watermark_ratio", false, "eviction-high-watermark-ratio"),
    SETTING("eviction_ratio", false, "eviction-ratio"),
    SETTING("global_file_segment_size", false, "global-file-segment-size"),
    REFUSED("ha_backend_connstring", false,
            "crescent's HA backend is etcd: give its endpoints with --etcd_endpoints"),
    WHEN("ha_backend_type", false, "etcd",
         "crescent's HA backend is etcd only (--enable_ha, --etcd_endpoints; docs/ha.md)"),
    SETTING("http_metadata_server_host", false, "http-metadata-server-host"),
    SETTING("http_metadata_server_port", false, "http-metadata-server-port"),
    IGNORED("kv_events_additional_salt", false),
    REFUSED("kv_events_backend_id", false, KV_EVENTS),
    REFUSED("kv_events_bind_endpoint", false,
            "crescent's store events are at --event-address (ZMQ PUB, on by default)"),
    IGNORED("kv_events_block_size", false),
    IGNORED("kv_events_dp_rank", false),
    REFUSED("kv_events_emit_legacy_compat", true, KV_EVENTS),
    REFUSED("kv_events_emit_object_key", true, KV_EVENTS),
    IGNORED("kv_events_lora_name", false),
    IGNORED("kv_events_model_name", false),
    REFUSED("kv_events_queue_capacity", false,
            "crescent's event queue is the PUB socket's --event-send-hwm (messages) and "
            "--replay-batches for replay"),
    IGNORED("kv_events_tenant_id", false),
    REFUSED("max_kv_soft_pin_ttl", false,
            "a put cannot ask crescent for its own soft-pin TTL: every soft-pinned object "
            "has --default-kv-soft-pin-ttl"),
    REFUSED("max_retry_attempts", false,
            "crescent does not retry copy/move tasks: one not reported within "
            "--task-timeout-sec is rolled back and FAILED; submit it again"),
    SETTING("max_threads", false, "max_threads"),
    SETTING("max_total_finished_tasks", false, "task-retention"),
    REFUSED("max_total_pending_tasks", false,
            "crescent bounds pending and processing tasks together: --task-max-in-flight"),
    REFUSED("max_total_processing_tasks", false,
            "crescent bounds pending and processing tasks together: --task-max-in-flight"),
    WHEN("memory_allocator", false, "offset",
         "crescent's segments use its offset allocator (the reference's 'offset'); "
         "cachelib is not built"),
    SETTING("metrics_host", false, "metrics-host"),
    SETTING("metrics_port", false, "metrics-port"),
    REFUSED("nof_eviction_high_watermark_ratio", false, NOF),
    REFUSED("nof_eviction_ratio", false, NOF),
    REFUSED("nof_heartbeat_failures_threshold", false, NOF),
    REFUSED("nof_heartbeat_interval_sec", false, NOF),
    REFUSED("nof_heartbeat_probe_timeout_ms", false, NOF),
    REFUSED("offload_cap_ratio", false,
            "crescent has no per-cycle offload cap: " TASKS_BOUND),
    WHEN("offload_force_evict", true, "false",
         "crescent never drops an object it can offload: eviction files a REPLICA_OFFLOAD "
         "task for it and skips it until the task ends (--task-max-in-flight bounds them)"),
    WHEN("offload_on_evict", true, "true",
         "crescent offloads when memory eviction picks an object (crescent-store --ssd-dir; "
         "docs/tiers.md), never at PutEnd"),
    REFUSED("offloading_queue_limit", false,
            "crescent has no offload queue of its own: " TASKS_BOUND),
    REFUSED("oplog_batch_max_entries", false, HA_YET),
    REFUSED("oplog_poll_interval_ms", false, HA_YET),
    REFUSED("pending_task_timeout_sec", false,
            "crescent has one timeout from a task's creation to its report: --task-timeout-sec"),
    REFUSED("pod_name", false, NO_K8S),
    REFUSED("pod_namespace", false, NO_K8S),
    SETTING("port", false, "port"),
    REFUSED("processing_task_timeout_sec", false,
            "crescent has one timeout from a task's creation to its report: --task-timeout-sec"),
    SETTING("promotion_admission_threshold", false, "promotion-hits"),
    REFUSED("promotion_max_per_heartbeat", false,
            "crescent has no per-heartbeat promotion cap: " TASKS_BOUND),
    SWITCH("promotion_on_hit", "promotion-hits",
           "=true keeps crescent's promotion on (gets an SSD serves, --promotion-hits, default "
           "2, within --promotion-window-sec); =false turns it off (--promotion-hits=0), "
           "whatever --promotion-hits or --promotion_admission_threshold say"),
    REFUSED("promotion_queue_limit", false,
            "crescent has no promotion queue limit of its own: " TASKS_BOUND),
    SETTING("put_start_discard_timeout_sec", false, "put-start-discard-timeout-sec"),
    SETTING("put_start_release_timeout_sec", false, "put-start-release-timeout-sec"),
    REFUSED("quota_bytes", false,
            "crescent's SSD tier size is each store server's own: crescent-store --ssd-size"),
    SETTING("root_fs_dir", false, "root-fs-dir"),
    SETTING("rpc_address", false, "rpc_address"),
    REFUSED("rpc_conn_timeout_seconds", false, RPC_KNOB),
    REFUSED("rpc_enable_tcp_no_delay", true, RPC_KNOB),
    REFUSED("rpc_interface", false, RPC_KNOB),
    SETTING("rpc_port", false, "rpc_port"),
    SETTING("rpc_thread_num", false, "rpc_thread_num"),
    REFUSED("snapshot_backup_dir", false, HA_YET),
    REFUSED("snapshot_catalog_backend_connstring", false, HA_YET),
    REFUSED("snapshot_catalog_backend_type", false, HA_YET),
    REFUSED("snapshot_catalog_store_connstring", false, HA_YET),
    REFUSED("snapshot_catalog_store_type", false, HA_YET),
    REFUSED("snapshot_child_timeout_seconds", false, HA_YET),
    REFUSED("snapshot_interval_seconds", false, HA_YET),
    REFUSED("snapshot_object_store_type", false, HA_YET),
    REFUSED("snapshot_payload_backend_type", false, HA_YET),
    REFUSED("snapshot_payload_store_type", false, HA_YET),
    REFUSED("snapshot_retention_count", false, HA_YET),
    REFUSED("tenant_quota_connector_type", false,
            "crescent keeps tenant quotas in memory, set with PUT /api/v1/tenant_quotas on "
            "--metrics-port; it reads no policy file or etcd, so set them again after a restart"),
    REFUSED("tenant_quota_connector_uri", false,
            "crescent keeps tenant quotas in memory, set with PUT /api/v1/tenant_quotas on "
            "--metrics-port; it reads no policy file or etcd, so set them again after a restart"),
};

const struct cr_mooncake_flag *cr_mooncake_flags(size_t *count) {
    *count = sizeof(table) / sizeof(table[0]);
    return table;
}
