/* crescentd settings (see config.h).  One table describes every setting; the
 * flag parser, the config-file loader and --help all read it, so they cannot
 * drift apart. */
#include "daemon/config.h"

#include <assert.h>
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/size_text.h"
#include "ha/ha.h"
#include "mooncake/flags.h"
#include "crescent/version.h"

enum setting_type {
    SETTING_STRING, SETTING_U32, SETTING_BOOL, SETTING_LOG_LEVEL, SETTING_RATIO,
    SETTING_SIZE, /* uint64_t bytes: 1073741824, 64K, 512M, 1G, 1T (binary); 0 allowed */
};

struct setting {
    const char *name; /* flag name; the config key is the same with '_' for '-' */
    enum setting_type type;
    size_t offset;
    uint32_t min, max; /* SETTING_U32 bounds */
    const char *value_name;
    const char *help;
};

/* String settings for which '' is a value (off, none, every one, the
 * default's meaning), also on the command line: --rpc-tcp-address ''. */
static const char *const empty_allowed[] = {
    "metrics-host", "rpc-tcp-address", "data-rdma-devices", "curve-secret-key-file",
    "curve-clients", "admin-token-file", "indexer-config", "state-dir", "nats-url",
    "nats-hit-rate-subject", "nats-model", "http-allowed-hosts", "http-allowed-origins",
    "store-hash-key-model",
    "ha", "etcd-endpoints", "ha-advertise-host",
    "replication-address", "standby-of",
    "root-fs-dir", "local-segment-ssd-dir",
};

static bool empty_ok(const struct setting *s) {
    for (size_t i = 0; i < sizeof(empty_allowed) / sizeof(empty_allowed[0]); i++)
        if (strcmp(s->name, empty_allowed[i]) == 0) return true;
    return false;
}

#define FIELD(field) offsetof(struct cr_daemon_config, field)

static const struct setting settings[] = {
    {"http-address", SETTING_STRING, FIELD(http_address), 0, 0, "HOST:PORT",
     "address of the HTTP front (admin API, /health, /metrics)"},
    {"metrics-port", SETTING_U32, FIELD(metrics_port), 0, 65535, "PORT",
     "Mooncake master's HTTP endpoints and metric names; 0: off; the default is skipped "
     "with a warning when taken"},
    {"metrics-host", SETTING_STRING, FIELD(metrics_host), 0, 0, "HOST",
     "host --metrics-port listens on; '': the host of --http-address"},
    {"mooncake-query-key", SETTING_STRING, FIELD(mooncake_query_key), 0, 0, "FORM",
     "--metrics-port's /query_key answers as Mooncake does now (wrapped: {\"success\":true,"
     "\"data\":[...]}) or did before mid-2026 (bare: one descriptor a line)"},
    {"http-threads", SETTING_U32, FIELD(http_threads), 1, 256, "N",
     "HTTP worker threads running handlers (idle connections take none)"},
    {"http-connections-max", SETTING_U32, FIELD(http_connections_max), 1, 1000000, "N",
     "open HTTP connections; past it the one idle the longest is closed"},
    {"http-idle-timeout-ms", SETTING_U32, FIELD(http_idle_timeout_ms), 1, 86400000, "MS",
     "an HTTP connection with no request this long is closed"},
    {"http-allowed-hosts", SETTING_STRING, FIELD(http_allowed_hosts), 0, 0, "NAMES",
     "host names (comma-separated) the HTTP front answers besides localhost and IP "
     "addresses, e.g. crescent.example.com; others get 403 (DNS rebinding); *: any"},
    {"http-allowed-origins", SETTING_STRING, FIELD(http_allowed_origins), 0, 0, "ORIGINS",
     "web origins (comma-separated) besides the front's own whose pages may POST, e.g. "
     "https://ui.example.com; others get 403 (cross-site requests); *: any"},
    {"pin-threads", SETTING_BOOL, FIELD(pin_threads), 0, 0, "BOOL",
     "pin each actor thread to a CPU of the process's affinity mask"},
    {"spin-us", SETTING_U32, FIELD(spin_us), 0, 10000, "US",
     "the longest an idle actor spins before it sleeps; 0: never spin"},
    {"spin-adaptive", SETTING_BOOL, FIELD(spin_adaptive), 0, 0, "BOOL",
     "spin only while work tends to come within --spin-us and a core is free; "
     "false: every idle period spins --spin-us"},
    {"ring-slots", SETTING_U32, FIELD(ring_slots), 2, 1u << 20, "N",
     "messages per (sender, actor) ring; a power of two"},
    {"ask-timeout-ms", SETTING_U32, FIELD(ask_timeout_ms), 1, 600000, "MS",
     "how long an HTTP request waits for an actor's answer"},
    {"log-level", SETTING_LOG_LEVEL, FIELD(log_level), 0, 0, "LEVEL",
     "DEBUG, INFO, WARN or ERROR (also CRESCENT_LOG_LEVEL)"},
    /* Store master */
    {"rpc-address", SETTING_STRING, FIELD(rpc_address), 0, 0, "ENDPOINT",
     "ZMQ endpoint of the store-master RPC (protobuf over ROUTER)"},
    {"rpc-tcp-address", SETTING_STRING, FIELD(rpc_tcp_address), 0, 0, "HOST:PORT",
     "native TCP endpoint of the same RPC (crescent://HOST:PORT, no encryption); '' off; "
     "the default is skipped with a warning when taken"},
    {"mooncake-rpc-address", SETTING_STRING, FIELD(mooncake_rpc_address), 0, 0, "HOST:PORT",
     "Mooncake's own master protocol (coro_rpc + struct_pack) for Mooncake's clients; 'off' "
     "turns it off; "
     "Mooncake's --rpc_port/--port/--rpc_address set its port and host (docs/mooncake.md)"},
    {"enable-http-metadata-server", SETTING_BOOL, FIELD(enable_http_metadata_server), 0, 0,
     "BOOL", "serve Mooncake's HTTP metadata server (GET/PUT/DELETE /metadata?key=) for its "
     "Transfer Engine (docs/mooncake.md)"},
    {"http-metadata-server-port", SETTING_U32, FIELD(http_metadata_server_port), 1, 65535, "PORT",
     "port of the HTTP metadata server"},
    {"http-metadata-server-host", SETTING_STRING, FIELD(http_metadata_server_host), 0, 0, "HOST",
     "address the HTTP metadata server listens on (loopback unless told)"},
    {"enable-metadata-cleanup-on-timeout", SETTING_BOOL,
     FIELD(enable_metadata_cleanup_on_timeout), 0, 0, "BOOL",
     "when a Mooncake client misses its TTL, remove its segments' keys (mooncake/ram/NAME, "
     "mooncake/rpc_meta/NAME) from the HTTP metadata server, as Mooncake's master does"},
    {"store-hash-key-model", SETTING_STRING, FIELD(store_hash_key_model), 0, 0, "NAME",
     "model under which the indexer files stored objects without token ids whose key is a "
     "sequence hash (decimal or 0x hex u64, as Mooncake's keys: docs/mooncake.md)"},
    {"store-hash-key-block-size", SETTING_U32, FIELD(store_hash_key_block_size), 0, 1u << 20, "N",
     "tokens per block of those objects (one block each); 0 leaves them unindexed"},
    {"rpc-tcp-connections-max", SETTING_U32, FIELD(rpc_tcp_connections_max), 1, 1000000, "N",
     "open native RPC connections; one more is accepted and closed at once"},
    {"rpc-tcp-queue-max", SETTING_U32, FIELD(rpc_tcp_queue_max), 1, 65536, "N",
     "requests in flight per native RPC connection; past it the connection waits"},
    {"rpc-tcp-with-curve", SETTING_BOOL, FIELD(rpc_tcp_with_curve), 0, 0, "BOOL",
     "with CURVE on, serve the native RPC anyway (loopback addresses only)"},
    {"rpc-shm-path", SETTING_STRING, FIELD(rpc_shm_path), 0, 0, "NAME",
     "same-host shared-memory RPC (shm://NAME): @NAME abstract or a socket path; auto: "
     "@crescent-rpc/PORT (PORT of --rpc-address), skipped with a warning when taken; off: none"},
    {"rpc-shm-clients-max", SETTING_U32, FIELD(rpc_shm_clients_max), 1, 65536, "N",
     "shm RPC clients at once; one more is refused with an error naming this flag"},
    {"rpc-shm-ring-bytes", SETTING_U32, FIELD(rpc_shm_ring_bytes), 4096, 1u << 26, "BYTES",
     "each shm client's request and reply ring (a power of two; larger frames cross in pieces)"},
    {"rpc-shm-hello-timeout-ms", SETTING_U32, FIELD(rpc_shm_hello_timeout_ms), 1, 3600000, "MS",
     "a shm connection that has not said hello this long after connecting is closed"},
    {"default-kv-lease-ttl", SETTING_U32, FIELD(default_kv_lease_ttl), 1, 86400000, "MS",
     "lease granted by ExistKey and GetReplicaList"},
    {"default-kv-soft-pin-ttl", SETTING_U32, FIELD(default_kv_soft_pin_ttl), 1, 86400000, "MS",
     "an unread soft-pinned object loses its pin after this"},
    {"allow-evict-soft-pinned-objects", SETTING_BOOL, FIELD(allow_evict_soft_pinned_objects), 0, 0,
     "BOOL", "evict soft-pinned objects when nothing else frees enough"},
    {"eviction-ratio", SETTING_RATIO, FIELD(eviction_ratio), 0, 0, "RATIO",
     "share of capacity one eviction frees (0 to 1)"},
    {"eviction-high-watermark-ratio", SETTING_RATIO, FIELD(eviction_high_watermark_ratio), 0, 0,
     "RATIO", "usage that starts eviction (0 to 1)"},
    {"put-start-discard-timeout-sec", SETTING_U32, FIELD(put_start_discard_timeout_sec), 1, 86400,
     "S", "an unfinished put older than this may be preempted"},
    {"put-start-release-timeout-sec", SETTING_U32, FIELD(put_start_release_timeout_sec), 1, 604800,
     "S", "space of an unfinished put older than this is reclaimed"},
    {"client-ttl", SETTING_U32, FIELD(client_ttl), 1, 3600, "S",
     "a client silent this long loses its segments and unfinished puts"},
    {"max-segments-per-client", SETTING_U32, FIELD(max_segments_per_client), 1, 65535, "N",
     "segments one client may have mounted"},
    {"min-segment-size-bytes", SETTING_U32, FIELD(min_segment_size_bytes), 1, 4000000000u, "BYTES",
     "smallest segment a client may mount"},
    {"max-tenants-per-client", SETTING_U32, FIELD(max_tenants_per_client), 1, 65535, "N",
     "tenants holding objects that one client's puts may have created"},
    {"max-objects", SETTING_U32, FIELD(max_objects), 1, 1u << 30, "N",
     "live objects (in-flight puts too); past the eviction watermark the oldest are evicted"},
    {"max-allocations-per-segment", SETTING_U32, FIELD(max_allocations_per_segment), 1, 1u << 30,
     "N", "objects one segment may hold; past the eviction watermark objects are evicted"},
    {"regex-max-matches", SETTING_U32, FIELD(regex_max_matches), 1, 1u << 28, "N",
     "keys one regex call may match; one more fails it whole"},
    {"regex-budget-steps", SETTING_U32, FIELD(regex_budget_steps), 1, 4000000000u, "N",
     "PCRE2 steps (pattern items tried) one regex call may take over all keys"},
    {"task-timeout-sec", SETTING_U32, FIELD(task_timeout_sec), 1, 86400, "S",
     "a copy/move task not reported by then is rolled back and FAILED"},
    {"task-retention", SETTING_U32, FIELD(task_retention), 1, 1000000, "N",
     "finished copy/move tasks kept for QueryTask; the oldest goes first"},
    {"task-max-in-flight", SETTING_U32, FIELD(task_max_in_flight), 1, 262144, "N",
     "copy/move tasks running at once (each holds its reserved replicas); one more is refused"},
    {"promotion-hits", SETTING_U32, FIELD(promotion_hits), 0, 1000000, "N",
     "gets of an object served by a store server's SSD only, within --promotion-window-sec, "
     "that copy it back to memory when there is room (0: never)"},
    {"promotion-window-sec", SETTING_U32, FIELD(promotion_window_sec), 1, 86400, "S",
     "the window --promotion-hits count in"},
    /* Local segment (crescentd as a store server too) */
    {"local-segment-size", SETTING_SIZE, FIELD(local_segment_size), 0, 0, "SIZE",
     "memory crescentd hosts as a store segment (taken as written); 0 turns it off"},
    {"data-address", SETTING_STRING, FIELD(data_address), 0, 0, "HOST:PORT",
     "where the local segment's transfers are served (port 0: a free one)"},
    {"data-no-shm", SETTING_BOOL, FIELD(data_no_shm), 0, 0, "BOOL",
     "serve the local segment over tcp only, never by shared memory to same-host clients"},
    {"data-require-capability", SETTING_BOOL, FIELD(data_require_capability), 0, 0, "BOOL",
     "refuse local-segment transfers that carry no capability from this master (default "
     "false: one sent is still checked); Mooncake clients' descriptors carry none"},
    {"data-no-verbs", SETTING_BOOL, FIELD(data_no_verbs), 0, 0, "BOOL",
     "never open an RDMA device for the local segment and its task transfers: tcp (and shm)"},
    {"data-rdma-devices", SETTING_STRING, FIELD(data_rdma_devices), 0, 0, "NAME,..",
     "RDMA devices to use (at most 4, e.g. mlx5_0,mlx5_1); empty: every one whose port is "
     "active. Large objects are striped over all of them"},
    {"data-rdma-gid-index", SETTING_STRING, FIELD(data_rdma_gid_index), 0, 0, "N|auto",
     "RDMA GID table index to route by; auto: the first RoCE v2 entry with an IPv4-mapped "
     "address (then v2, then the first; InfiniBand: 0)"},
    {"local-segment-ssd-dir", SETTING_STRING, FIELD(local_segment_ssd_dir), 0, 0, "DIR",
     "an SSD tier for the local segment in this directory (created if missing): objects "
     "evicted from it are offloaded there, as crescent-store --ssd-dir; '' none"},
    {"local-segment-ssd-size", SETTING_SIZE, FIELD(local_segment_ssd_size), 0, 0, "SIZE",
     "bytes of the local segment's SSD files at most (e.g. 200G); goes with "
     "--local-segment-ssd-dir"},
    /* Event plane */
    {"event-address", SETTING_STRING, FIELD(event_address), 0, 0, "ENDPOINT",
     "ZMQ PUB endpoint of the store events"},
    {"event-topic", SETTING_STRING, FIELD(event_topic), 0, 0, "TOPIC",
     "topic frame of every event message"},
    {"event-batch-max", SETTING_U32, FIELD(event_batch_max), 1, 100000, "N",
     "events per batch at most"},
    {"event-flush-us", SETTING_U32, FIELD(event_flush_us), 1, 10000000, "US",
     "longest a store event waits before its batch is sent, counted from the change; also "
     "how long (at most 1000) segments may hold store events before waking the publisher "
     "and the indexer"},
    {"event-send-hwm", SETTING_U32, FIELD(event_send_hwm), 1, 100000000, "N",
     "ZMQ send high-water mark of the PUB socket"},
    {"replay-address", SETTING_STRING, FIELD(replay_address), 0, 0, "ENDPOINT",
     "ZMQ ROUTER endpoint answering replay requests"},
    {"replay-batches", SETTING_U32, FIELD(replay_batches), 1, 10000000, "N",
     "batches kept for replay"},
    {"replay-sessions-max", SETTING_U32, FIELD(replay_sessions_max), 1, 65536, "N",
     "replays in progress at once; one more gets the end marker alone"},
    {"replay-client-hwm", SETTING_U32, FIELD(replay_client_hwm), 8, 1000000, "N",
     "batches queued to one replay client; a queue full for 5 s drops the client"},
    {"replay-bytes-mb", SETTING_U32, FIELD(replay_bytes_mb), 1, 65536, "MB",
     "payload bytes kept for replay"},
    /* Security */
    {"curve-secret-key-file", SETTING_STRING, FIELD(curve_secret_key_file), 0, 0, "FILE",
     "Z85 CURVE secret key: turns CurveZMQ on for the RPC, event and replay sockets"},
    {"curve-clients", SETTING_STRING, FIELD(curve_clients), 0, 0, "PATH",
     "file or directory of Z85 client public keys allowed to connect (with CURVE)"},
    {"admin-token-file", SETTING_STRING, FIELD(admin_token_file), 0, 0, "FILE",
     "token that destructive RPCs and HTTP mutations must carry (Bearer)"},
    /* Prefix indexer */
    {"indexer-config", SETTING_STRING, FIELD(indexer_config), 0, 0, "FILE",
     "conductor_config.json of static publishers (also CONDUCTOR_CONFIG_PATH)"},
    {"indexer-engine-hashes-max", SETTING_U32, FIELD(indexer_engine_hashes_max), 1, 1u << 30, "N",
     "engine block hashes one publisher may have in the index; runs past it are refused"},
    {"indexer-max-message-mb", SETTING_U32, FIELD(indexer_max_message_mb), 1, 2047, "MB",
     "largest message taken from a publisher (ZMQ_MAXMSGSIZE); a larger one drops the link"},
    {"prefix-hash-seed", SETTING_U32, FIELD(prefix_hash_seed), 0, UINT32_MAX, "SEED",
     "XXH3 seed of the prefix index's block and sequence hashes (token queries and events "
     "with tokens alike); 1337 is NVIDIA Dynamo's, whose token-less events need it"},
    {"root-fs-dir", SETTING_STRING, FIELD(root_fs_dir), 0, 0, "DIR",
     "shared file tier: every put is also persisted by its client under DIR/<cluster-id>, "
     "mounted at the same path on every client (Mooncake's --root_fs_dir); '' none; "
     "docs/tiers.md"},
    {"cluster-id", SETTING_STRING, FIELD(cluster_id), 0, 0, "ID",
     "the cluster's name (Mooncake's --cluster_id): the file tier's subdirectory under "
     "--root-fs-dir, and with --ha etcd the key its leader is elected on, /crescent/ID/leader"},
    {"global-file-segment-size", SETTING_SIZE, FIELD(global_file_segment_size), 0, 0, "SIZE",
     "bytes the file tier may hold; past it the least recently used files are evicted "
     "(Mooncake's --global_file_segment_size; default 9223372036854775807: unlimited)"},
    {"state-dir", SETTING_STRING, FIELD(state_dir), 0, 0, "DIR",
     "directory kept across restarts: publishers registered with /register, the store's "
     "metadata log (--durability) and the event sequence (numbers continue, never reused)"},
    {"durability", SETTING_STRING, FIELD(durability), 0, 0, "MODE",
     "with --state-dir, how the store's metadata is kept: none, async (synced every 10 ms) or "
     "sync (a mutating call is answered once its record is on disk); docs/durability.md"},
    {"replication-address", SETTING_STRING, FIELD(replication_address), 0, 0, "HOST:PORT",
     "with --state-dir, stream the store's log to standbys that connect here (off by default); "
     "docs/durability.md, Replication"},
    {"standby-of", SETTING_STRING, FIELD(standby_of), 0, 0, "HOST:PORT",
     "run as a hot standby of the leader whose --replication-address this is: apply its log, "
     "serve reads, refuse mutating calls (promote: POST /api/v1/ha/promote)"},
    {"replication", SETTING_STRING, FIELD(replication), 0, 0, "MODE",
     "async, or sync (a mutating call is answered once a standby has its record)"},
    {"snapshot-every-records", SETTING_U32, FIELD(snapshot_every_records), 0, UINT32_MAX, "N",
     "with --state-dir, a snapshot of the store after every N log records; the logs before "
     "it are then removed (0: never; the log grows)"},
    {"keep-diverged", SETTING_U32, FIELD(keep_diverged), 0, UINT32_MAX, "N",
     "with --state-dir, keep the N newest DIR/diverged-<ms>/ directories a standby's start "
     "over leaves (a former leader's records its new leader lacked); older ones are deleted at "
     "start and after each start over (docs/ha.md)"},
    /* High availability on etcd (docs/ha.md) */
    {"ha", SETTING_STRING, FIELD(ha), 0, 0, "BACKEND",
     "high availability: 'etcd' elects one leader among crescentds of --cluster-id on an etcd "
     "lease; the others are standbys that refuse mutating calls naming it; '' off"},
    {"enable-ha", SETTING_BOOL, FIELD(enable_ha), 0, 0, NULL,
     "the same as --ha etcd (Mooncake's spelling)"},
    {"etcd-endpoints", SETTING_STRING, FIELD(etcd_endpoints), 0, 0, "H:P;H:P",
     "etcd's client endpoints for --ha etcd, tried in turn ('127.0.0.1:2379;10.0.0.2:2379')"},
    {"ha-lease-ttl", SETTING_U32, FIELD(ha_lease_ttl), 2, 3600, "SECONDS",
     "the leader's etcd lease: renewed every third of it; a leader that cannot renew stops "
     "answering calls before it ends, and a standby takes over within about twice it"},
    {"ha-advertise-host", SETTING_STRING, FIELD(ha_advertise_host), 0, 0, "HOST",
     "the host clients reach this crescentd at, written in the leader key; '': each bound "
     "address's own host (which must then not be 0.0.0.0)"},
    /* Dynamo over NATS */
    {"nats-url", SETTING_STRING, FIELD(nats_url), 0, 0, "URL",
     "NATS server to take Dynamo's KV events and load metrics from (nats://HOST:PORT); '' off"},
    {"nats-namespace", SETTING_STRING, FIELD(nats_namespace), 0, 0, "NS",
     "Dynamo namespace: subjects are namespace.NS.component.COMPONENT.SUBJECT"},
    {"nats-component", SETTING_STRING, FIELD(nats_component), 0, 0, "NAME",
     "the workers' Dynamo component ('*': any component)"},
    {"nats-kv-subject", SETTING_STRING, FIELD(nats_kv_subject), 0, 0, "SUBJECT",
     "last token of the RouterEvent subject"},
    {"nats-metrics-subject", SETTING_STRING, FIELD(nats_metrics_subject), 0, 0, "SUBJECT",
     "last token of the ForwardPassMetrics subject"},
    {"nats-router-component", SETTING_STRING, FIELD(nats_router_component), 0, 0, "NAME",
     "component the hit-rate events are published under"},
    {"nats-hit-rate-subject", SETTING_STRING, FIELD(nats_hit_rate_subject), 0, 0, "SUBJECT",
     "last token of the KVHitRateEvent subject published after each /route; '' none"},
    {"nats-model", SETTING_STRING, FIELD(nats_model), 0, 0, "NAME",
     "model the workers' blocks are filed under (the 'model' of /query and /route)"},
    {"nats-block-size", SETTING_U32, FIELD(nats_block_size), 1, 1u << 20, "N",
     "tokens per KV block of the Dynamo workers"},
    {"nats-stale-ms", SETTING_U32, FIELD(nats_stale_ms), 1, 86400000, "MS",
     "a worker whose load metrics are silent this long is stale: /route leaves it out"},
};

#define SETTING_COUNT (sizeof(settings) / sizeof(settings[0]))

void cr_daemon_config_default(struct cr_daemon_config *config) {
    memset(config, 0, sizeof(*config));
    snprintf(config->http_address, sizeof(config->http_address), "127.0.0.1:13333");
    snprintf(config->durability, sizeof(config->durability), "async");
    snprintf(config->replication, sizeof(config->replication), "async");
    config->snapshot_every_records = 1000000;
    config->keep_diverged = 2;
    config->ha_lease_ttl = 5;
    config->metrics_port = CR_CONFIG_METRICS_PORT_DEFAULT; /* as Mooncake's master */
    config->http_threads = 16;
    config->http_connections_max = 4096; /* as cr_http_front_limits_default */
    config->http_idle_timeout_ms = 60000;
    config->pin_threads = true;
    config->spin_us = 20;
    config->spin_adaptive = true;
    config->ring_slots = 4096;
    config->ask_timeout_ms = 2000;
    config->log_level = CR_LOG_INFO;
    snprintf(config->mooncake_query_key, sizeof(config->mooncake_query_key), "wrapped");
    snprintf(config->rpc_address, sizeof(config->rpc_address), "tcp://127.0.0.1:50051");
    snprintf(config->rpc_tcp_address, sizeof(config->rpc_tcp_address), "%s",
             CR_CONFIG_RPC_TCP_DEFAULT);
    snprintf(config->mooncake_rpc_address, sizeof(config->mooncake_rpc_address), "%s",
             CR_CONFIG_MOONCAKE_RPC_DEFAULT);
    config->http_metadata_server_port = 8080; /* as Mooncake's master */
    snprintf(config->http_metadata_server_host, sizeof(config->http_metadata_server_host),
             "127.0.0.1");
    config->rpc_tcp_connections_max = 4096; /* as the HTTP front's */
    config->rpc_tcp_queue_max = 1024;       /* about ZMQ's default high-water mark (1000) */
    snprintf(config->rpc_shm_path, sizeof(config->rpc_shm_path), "auto");
    config->rpc_shm_clients_max = 64;       /* same-host processes: a handful of engines */
    config->rpc_shm_ring_bytes = 1u << 18;  /* 256 KiB each way, touched lazily */
    config->rpc_shm_hello_timeout_ms = 2000; /* libcrescent says hello as it connects */
    config->default_kv_lease_ttl = 5000;
    config->default_kv_soft_pin_ttl = 30 * 60 * 1000;
    config->allow_evict_soft_pinned_objects = true;
    config->eviction_ratio = 0.05;
    config->eviction_high_watermark_ratio = 0.95;
    config->put_start_discard_timeout_sec = 30;
    config->put_start_release_timeout_sec = 600;
    config->client_ttl = 10;
    config->max_segments_per_client = 64;  /* as cr_store_config_default */
    config->min_segment_size_bytes = 4096;  /* as cr_store_config_default */
    config->max_tenants_per_client = 16;    /* as cr_store_config_default */
    config->max_objects = 1u << 24;                 /* as cr_store_config_default */
    config->max_allocations_per_segment = 1u << 24; /* as cr_store_config_default */
    config->regex_max_matches = 10000;         /* as cr_store_config_default */
    config->local_segment_size = 1ull << 30;
    snprintf(config->cluster_id, sizeof(config->cluster_id), "mooncake_cluster");
    config->global_file_segment_size = (uint64_t)INT64_MAX; /* Mooncake's: unlimited */
    snprintf(config->data_address, sizeof(config->data_address), "127.0.0.1:0");
    snprintf(config->data_rdma_gid_index, sizeof(config->data_rdma_gid_index), "auto");
    config->regex_budget_steps = 100000000u;   /* as cr_store_config_default */
    config->task_timeout_sec = 300;            /* wire-formats §6 */
    config->task_retention = 10000;
    config->task_max_in_flight = 4096;
    config->promotion_hits = 2;        /* docs/tiers.md, "Promotion" */
    config->promotion_window_sec = 60;
    snprintf(config->event_address, sizeof(config->event_address), "tcp://127.0.0.1:19997");
    snprintf(config->event_topic, sizeof(config->event_topic), "mooncake");
    config->event_batch_max = 50;
    config->event_flush_us = 1000;
    config->event_send_hwm = 100000;
    snprintf(config->replay_address, sizeof(config->replay_address), "tcp://127.0.0.1:19998");
    config->replay_batches = 10000;
    config->replay_bytes_mb = 64;
    config->replay_sessions_max = 256;
    config->replay_client_hwm = 256; /* batches (ZMQ counts whole messages) */
    /* An engine holds at most its KV blocks (GPU and offload tiers): a
     * million is far above a large GPU's count, and bounds the map at
     * about 64 MiB per publisher. */
    config->indexer_engine_hashes_max = 1u << 20;
    config->indexer_max_message_mb = 64; /* a 2M-token event is ~10 MB of msgpack */
    snprintf(config->nats_namespace, sizeof(config->nats_namespace), "dynamo");
    snprintf(config->nats_component, sizeof(config->nats_component), "VllmWorker");
    snprintf(config->nats_kv_subject, sizeof(config->nats_kv_subject), "kv_events");
    snprintf(config->nats_metrics_subject, sizeof(config->nats_metrics_subject), "load_metrics");
    snprintf(config->nats_router_component, sizeof(config->nats_router_component), "Router");
    snprintf(config->nats_hit_rate_subject, sizeof(config->nats_hit_rate_subject), "kv-hit-rate");
    config->nats_block_size = 16;  /* vLLM's default block size */
    config->nats_stale_ms = 5000;  /* 50 of Dynamo's 100 ms metrics periods */
    config->store_hash_key_block_size = 16; /* as --nats-block-size */
}

static void default_text(const struct setting *s, char *out, size_t size) {
    struct cr_daemon_config defaults;
    cr_daemon_config_default(&defaults);
    const char *base = (const char *)&defaults;
    static const char *const levels[] = {"DEBUG", "INFO", "WARN", "ERROR"};
    switch (s->type) {
    case SETTING_STRING: snprintf(out, size, "%s", base + s->offset); break;
    case SETTING_U32: snprintf(out, size, "%u", *(const uint32_t *)(const void *)(base + s->offset)); break;
    case SETTING_BOOL: snprintf(out, size, "%s", *(const bool *)(base + s->offset) ? "true" : "false"); break;
    case SETTING_LOG_LEVEL:
        snprintf(out, size, "%s", levels[*(const enum cr_log_level *)(const void *)(base + s->offset)]);
        break;
    case SETTING_RATIO: snprintf(out, size, "%g", *(const double *)(const void *)(base + s->offset)); break;
    case SETTING_SIZE:
        snprintf(out, size, "%llu", (unsigned long long)*(const uint64_t *)(const void *)(base + s->offset));
        break;
    }
    if (out[0] == '\0') snprintf(out, size, "none");
}

void cr_daemon_config_usage(FILE *out) {
    fprintf(out,
            "Usage: crescentd [OPTIONS]\n"
            "\n"
            "crescent's daemon: the KV-cache control plane (store master, event plane,\n"
            "prefix indexer) behind one HTTP front. Runs until SIGINT or SIGTERM.\n"
            "\n"
            "Options (each also a key of the JSON config file, and a flag, with '_' for '-' as\n"
            "Mooncake's master spells them: --default_kv_lease_ttl; -flag=value works too).\n"
            "Mooncake master's own flags work with its meaning or are refused with the reason:\n"
            "see --help-mooncake. Bools: bare --flag, --noflag, true/false/1/0.\n"
            "Durations (MS, S, US) take a unit too: 500ms, 5s, 10m, 1h.\n"
            "  --config FILE             JSON config file (also CRESCENT_CONFIG); flags win\n");
    for (size_t i = 0; i < SETTING_COUNT; i++) {
        char flag[64], def[CR_CONFIG_ADDRESS_MAX];
        snprintf(flag, sizeof(flag), "--%s %s", settings[i].name, settings[i].value_name);
        default_text(&settings[i], def, sizeof(def));
        if (strlen(flag) > 25)
            fprintf(out, "  %s\n  %-25s %s (default %s)\n", flag, "", settings[i].help, def);
        else
            fprintf(out, "  %-25s %s (default %s)\n", flag, settings[i].help, def);
    }
    fprintf(out,
            "  --no-pin                  same as --pin-threads false\n"
            "  --port, --rpc_port PORT   Mooncake's: the port of --mooncake-rpc-address\n"
            "  --rpc_address HOST        Mooncake's (a host, not an endpoint): the host of\n"
            "                            --mooncake-rpc-address\n"
            "  --rpc_thread_num, --max_threads N\n"
            "                            Mooncake's: accepted with a warning; crescentd's RPC\n"
            "                            gateway is one actor thread\n"
            "  --flagfile FILE           gflags' flag file: one --flag=value a line, '#' comments\n"
            "  --print-config            print the resolved settings as a --config file and exit\n"
            "  --help-mooncake           Mooncake master's flags: each honoured (crescent's\n"
            "                            setting, or the one value crescent does) or refused, and\n"
            "                            why (docs/mooncake.md)\n"
            "  --help                    print this help and exit\n"
            "  --version                 print the version and exit\n"
            "\n"
            "Exit status: 0 after a clean shutdown, 2 for a bad flag, a bad config file or\n"
            "an address that cannot be bound, 1 for any other failure to start.\n");
}

/* ------------------------------------------------------------------------ */
/* Values */

static bool parse_u32(const char *text, uint32_t *out) {
    if (text == NULL || *text == '\0') return false;
    errno = 0;
    char *end = NULL;
    unsigned long long value = strtoull(text, &end, 10);
    if (errno != 0 || *end != '\0' || text[0] == '-' || value > UINT32_MAX) return false;
    *out = (uint32_t)value;
    return true;
}

static bool parse_bool(const char *text, bool *out) {
    if (strcmp(text, "true") == 0 || strcmp(text, "1") == 0 || strcmp(text, "yes") == 0) {
        *out = true;
        return true;
    }
    if (strcmp(text, "false") == 0 || strcmp(text, "0") == 0 || strcmp(text, "no") == 0) {
        *out = false;
        return true;
    }
    return false;
}

/* Microseconds per unit of a duration setting (its value_name), 0 for others. */
static double unit_us(const char *name) {
    if (strcmp(name, "US") == 0) return 1.0;
    if (strcmp(name, "MS") == 0) return 1e3;
    if (strcmp(name, "S") == 0) return 1e6;
    return 0.0;
}

static const char *unit_text(const char *name) {
    return strcmp(name, "US") == 0 ? "us" : strcmp(name, "MS") == 0 ? "ms" : "s";
}

/* A duration: a whole number in the setting's unit (Mooncake's raw values),
 * or a number with a unit: 250us, 500ms, 5s, 1.5s, 10m, 1h.  It must come to
 * a whole number of the setting's unit. */
static bool parse_duration(const char *text, double unit, uint32_t *out) {
    static const struct {
        const char *suffix;
        double us;
    } units[] = {{"us", 1.0}, {"ms", 1e3}, {"s", 1e6}, {"m", 60e6}, {"h", 3600e6}};
    char *end = NULL;
    if (text[0] < '0' || text[0] > '9') return false;
    double value = strtod(text, &end);
    double us = -1.0;
    if (*end == '\0') {
        if (strchr(text, '.') != NULL) return false;
        us = value * unit;
    }
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]) && us < 0; i++)
        if (strcmp(end, units[i].suffix) == 0) us = value * units[i].us;
    double n = us / unit;
    if (us < 0 || n > (double)UINT32_MAX || n != (double)(uint64_t)n) return false;
    *out = (uint32_t)n;
    return true;
}

/* Validates and stores one value given as text (flags). */
static bool apply_text(const struct setting *s, const char *text, struct cr_daemon_config *config,
                       char error[CR_CONFIG_ERROR_MAX]) {
    char *field = (char *)config + s->offset;
    switch (s->type) {
    case SETTING_STRING:
        if ((text[0] == '\0' && !empty_ok(s)) || strlen(text) >= CR_CONFIG_ADDRESS_MAX) {
            snprintf(error, CR_CONFIG_ERROR_MAX, "%s: must be %u to %u characters", s->name,
                     empty_ok(s) ? 0u : 1u, CR_CONFIG_ADDRESS_MAX - 1);
            return false;
        }
        snprintf(field, CR_CONFIG_ADDRESS_MAX, "%s", text);
        return true;
    case SETTING_U32: {
        uint32_t value;
        double unit = unit_us(s->value_name);
        bool parsed = unit > 0 ? parse_duration(text, unit, &value) : parse_u32(text, &value);
        if (!parsed || value < s->min || value > s->max) {
            if (unit > 0)
                snprintf(error, CR_CONFIG_ERROR_MAX,
                         "%s: '%s' is not a duration from %u to %u %s (a number of %s, or one "
                         "with a unit: 500ms, 5s, 10m, 1h)",
                         s->name, text, s->min, s->max, unit_text(s->value_name),
                         unit_text(s->value_name));
            else
                snprintf(error, CR_CONFIG_ERROR_MAX, "%s: '%s' is not a whole number from %u to %u",
                         s->name, text, s->min, s->max);
            return false;
        }
        *(uint32_t *)(void *)field = value;
        return true;
    }
    case SETTING_BOOL:
        if (!parse_bool(text, (bool *)field)) {
            snprintf(error, CR_CONFIG_ERROR_MAX, "%s: '%s' is not true or false", s->name, text);
            return false;
        }
        return true;
    case SETTING_LOG_LEVEL:
        if (!cr_log_parse_level(text, (enum cr_log_level *)(void *)field)) {
            snprintf(error, CR_CONFIG_ERROR_MAX, "%s: '%s' is not DEBUG, INFO, WARN or ERROR",
                     s->name, text);
            return false;
        }
        return true;
    case SETTING_RATIO: {
        char *end = NULL;
        double value = strtod(text, &end);
        if (end == text || *end != '\0' || !(value > 0.0 && value <= 1.0)) {
            snprintf(error, CR_CONFIG_ERROR_MAX, "%s: '%s' is not a ratio above 0 and at most 1",
                     s->name, text);
            return false;
        }
        *(double *)(void *)field = value;
        return true;
    }
    case SETTING_SIZE:
        if (!cr_parse_size(text, (uint64_t *)(void *)field)) {
            snprintf(error, CR_CONFIG_ERROR_MAX, "%s: '%s' is not a size in bytes (a number, "
                     "or one with K, M, G or T)", s->name, text);
            return false;
        }
        return true;
    }
    return false;
}

/* Settings that depend on each other, checked once everything is applied. */
static bool validate(const struct cr_daemon_config *config, char error[CR_CONFIG_ERROR_MAX]) {
    if (config->put_start_discard_timeout_sec >= config->put_start_release_timeout_sec) {
        snprintf(error, CR_CONFIG_ERROR_MAX,
                 "put-start-discard-timeout-sec (%u) must be less than "
                 "put-start-release-timeout-sec (%u)",
                 config->put_start_discard_timeout_sec, config->put_start_release_timeout_sec);
        return false;
    }
    if ((config->rpc_shm_ring_bytes & (config->rpc_shm_ring_bytes - 1)) != 0) {
        snprintf(error, CR_CONFIG_ERROR_MAX, "rpc-shm-ring-bytes: %u is not a power of two",
                 config->rpc_shm_ring_bytes);
        return false;
    }
    if ((config->ring_slots & (config->ring_slots - 1)) != 0) {
        snprintf(error, CR_CONFIG_ERROR_MAX, "ring-slots: %u is not a power of two",
                 config->ring_slots);
        return false;
    }
    if ((config->curve_secret_key_file[0] == '\0') != (config->curve_clients[0] == '\0')) {
        snprintf(error, CR_CONFIG_ERROR_MAX,
                 "curve-secret-key-file and curve-clients go together: set both to turn "
                 "CurveZMQ on, or neither");
        return false;
    }
    if (strcmp(config->replication, "async") != 0 && strcmp(config->replication, "sync") != 0) {
        snprintf(error, CR_CONFIG_ERROR_MAX, "replication: '%s' is not async or sync",
                 config->replication);
        return false;
    }
    if ((config->replication_address[0] != '\0' || config->standby_of[0] != '\0') &&
        (config->state_dir[0] == '\0' || strcmp(config->durability, "none") == 0)) {
        snprintf(error, CR_CONFIG_ERROR_MAX, "%s needs --state-dir with --durability async or "
                 "sync: the log it streams is the one kept there",
                 config->standby_of[0] != '\0' ? "standby-of" : "replication-address");
        return false;
    }
    if (strcmp(config->durability, "none") != 0 && strcmp(config->durability, "async") != 0 &&
        strcmp(config->durability, "sync") != 0) {
        snprintf(error, CR_CONFIG_ERROR_MAX, "durability: '%s' is not none, async or sync",
                 config->durability);
        return false;
    }
    if (!cr_ha_config_check(config, error, CR_CONFIG_ERROR_MAX)) return false;
    if ((config->local_segment_ssd_dir[0] != '\0') != (config->local_segment_ssd_size > 0) ||
        (config->local_segment_ssd_dir[0] != '\0' && config->local_segment_size == 0)) {
        snprintf(error, CR_CONFIG_ERROR_MAX, "local-segment-ssd-dir and local-segment-ssd-size "
                 "go together, with a local segment (--local-segment-size above 0)");
        return false;
    }
    uint32_t gid;
    if (strcmp(config->data_rdma_gid_index, "auto") != 0 &&
        (!parse_u32(config->data_rdma_gid_index, &gid) || gid > 255)) {
        snprintf(error, CR_CONFIG_ERROR_MAX, "data-rdma-gid-index: '%s' is not auto or 0..255",
                 config->data_rdma_gid_index);
        return false;
    }
    if (strcmp(config->mooncake_query_key, "wrapped") != 0 &&
        strcmp(config->mooncake_query_key, "bare") != 0) {
        snprintf(error, CR_CONFIG_ERROR_MAX, "mooncake-query-key: '%s' is not wrapped or bare",
                 config->mooncake_query_key);
        return false;
    }
    const char *colon = strrchr(config->http_address, ':');
    uint32_t port;
    if (colon == NULL || colon == config->http_address || !parse_u32(colon + 1, &port) ||
        port > 65535) {
        snprintf(error, CR_CONFIG_ERROR_MAX, "http-address: '%s' is not HOST:PORT",
                 config->http_address);
        return false;
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* Config file */

static const struct setting *find_setting(const char *name, bool key_form) {
    for (size_t i = 0; i < SETTING_COUNT; i++) {
        const char *a = settings[i].name, *b = name;
        while (*a != '\0' && (*a == *b || (key_form && *a == '-' && *b == '_'))) a++, b++;
        if (*a == '\0' && *b == '\0') return &settings[i];
    }
    return NULL;
}

static bool apply_json(const struct setting *s, const char *key, json_t *value,
                       struct cr_daemon_config *config, char error[CR_CONFIG_ERROR_MAX]) {
    char text[CR_CONFIG_ADDRESS_MAX];
    bool type_ok = false;
    switch (s->type) {
    case SETTING_STRING:
    case SETTING_LOG_LEVEL:
        type_ok = json_is_string(value);
        if (type_ok) snprintf(text, sizeof(text), "%s", json_string_value(value));
        break;
    case SETTING_SIZE: /* 1073741824 or "1G" */
        type_ok = json_is_string(value) || (json_is_integer(value) && json_integer_value(value) >= 0);
        if (json_is_string(value)) snprintf(text, sizeof(text), "%s", json_string_value(value));
        else if (type_ok) snprintf(text, sizeof(text), "%lld", (long long)json_integer_value(value));
        break;
    case SETTING_U32:
        /* Durations may also be strings with a unit ("5s"). */
        type_ok = json_is_integer(value) || (json_is_string(value) && unit_us(s->value_name) > 0);
        if (json_is_integer(value))
            snprintf(text, sizeof(text), "%lld", (long long)json_integer_value(value));
        else if (type_ok)
            snprintf(text, sizeof(text), "%s", json_string_value(value));
        break;
    case SETTING_BOOL:
        type_ok = json_is_boolean(value);
        if (type_ok) snprintf(text, sizeof(text), "%s", json_is_true(value) ? "true" : "false");
        break;
    case SETTING_RATIO:
        type_ok = json_is_number(value);
        if (type_ok) snprintf(text, sizeof(text), "%.17g", json_number_value(value));
        break;
    }
    if (!type_ok) {
        static const char *const wanted[] = {"a string", "an integer", "true or false", "a string",
                                             "a number", "a size (bytes, or a string like \"1G\")"};
        snprintf(error, CR_CONFIG_ERROR_MAX, "key \"%s\" must be %s", key, wanted[s->type]);
        return false;
    }
    return apply_text(s, text, config, error);
}

bool cr_daemon_config_load_file(const char *path, struct cr_daemon_config *config,
                                char error[CR_CONFIG_ERROR_MAX]) {
    json_error_t json_error;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &json_error);
    if (root == NULL) {
        if (json_error.line < 0)
            snprintf(error, CR_CONFIG_ERROR_MAX, "config file %s: %s", path, json_error.text);
        else
            snprintf(error, CR_CONFIG_ERROR_MAX, "config file %s:%d:%d: %s", path,
                     json_error.line, json_error.column, json_error.text);
        return false;
    }
    bool ok = json_is_object(root);
    if (!ok) snprintf(error, CR_CONFIG_ERROR_MAX, "config file %s: top level must be an object", path);
    const char *key;
    json_t *value;
    /* Apply to a copy: a bad file changes nothing. */
    struct cr_daemon_config staged = *config;
    json_object_foreach(root, key, value) {
        if (!ok) break;
        const struct setting *s = find_setting(key, true);
        if (s == NULL) {
            snprintf(error, CR_CONFIG_ERROR_MAX, "config file %s: unknown key \"%s\"", path, key);
            ok = false;
        } else if (!apply_json(s, key, value, &staged, error)) {
            char detail[CR_CONFIG_ERROR_MAX];
            snprintf(detail, sizeof(detail), "%s", error);
            snprintf(error, CR_CONFIG_ERROR_MAX, "config file %.200s: %.280s", path, detail);
            ok = false;
        }
    }
    json_decref(root);
    if (ok) *config = staged;
    return ok;
}

/* ------------------------------------------------------------------------ */
/* Flags */

enum {
    OPT_HELP = 1000,
    OPT_HELP_MOONCAKE,
    OPT_PRINT_CONFIG,
    OPT_VERSION,
    OPT_CONFIG,
    OPT_NO_PIN,
    OPT_RPC_PORT,    /* Mooncake's --port / --rpc_port: --mooncake-rpc-address's port */
    OPT_RPC_HOST,    /* Mooncake's --rpc_address HOST: --mooncake-rpc-address's host */
    OPT_RPC_THREADS, /* Mooncake's --rpc_thread_num / --max_threads */
    OPT_SETTING,
};

/* Mooncake master's flags without a crescent setting of the same name. */
static const struct {
    const char *name;
    int id;
} mooncake_flags[] = {
    {"port", OPT_RPC_PORT},           {"rpc_port", OPT_RPC_PORT},
    {"rpc-port", OPT_RPC_PORT},       {"rpc_thread_num", OPT_RPC_THREADS},
    {"max_threads", OPT_RPC_THREADS},
};
#define MOONCAKE_FLAG_COUNT (sizeof(mooncake_flags) / sizeof(mooncake_flags[0]))

/* "HOST:PORT" (--mooncake-rpc-address) with the host or the port replaced. */
static bool set_rpc_part(char endpoint[CR_CONFIG_ADDRESS_MAX], const char *host, const char *port,
                         char error[CR_CONFIG_ERROR_MAX]) {
    const char *scheme_end = strstr(endpoint, "://");
    scheme_end = scheme_end != NULL ? scheme_end : endpoint - 3; /* no scheme */
    const char *colon = strrchr(endpoint, ':');
    if (colon == NULL || colon < scheme_end + 3) {
        snprintf(error, CR_CONFIG_ERROR_MAX,
                 "--port/--rpc_address: --mooncake-rpc-address '%s' is not HOST:PORT", endpoint);
        return false;
    }
    char old_host[CR_CONFIG_ADDRESS_MAX];
    snprintf(old_host, sizeof(old_host), "%.*s", (int)(colon - scheme_end - 3), scheme_end + 3);
    char updated[CR_CONFIG_ADDRESS_MAX];
    int n = snprintf(updated, sizeof(updated), "%.*s%s:%s", (int)(scheme_end + 3 - endpoint),
                     endpoint, host != NULL ? host : old_host, port != NULL ? port : colon + 1);
    if (n < 0 || (size_t)n >= sizeof(updated)) {
        snprintf(error, CR_CONFIG_ERROR_MAX, "--rpc_address: '%s' is too long", host);
        return false;
    }
    memcpy(endpoint, updated, sizeof(updated));
    return true;
}

/* Mooncake's flags that map onto crescent's settings (applied after the others). */
static bool apply_mooncake_flag(int opt, const char *value, struct cr_daemon_config *config,
                                char error[CR_CONFIG_ERROR_MAX]) {
    uint32_t n;
    if (opt == OPT_RPC_THREADS) {
        if (!parse_u32(value, &n)) {
            snprintf(error, CR_CONFIG_ERROR_MAX, "rpc_thread_num: '%s' is not a whole number",
                     value);
            return false;
        }
        CR_WARN("config", "--rpc_thread_num/--max_threads %u has no effect: crescentd's RPC "
                          "gateway is one actor thread feeding the store master",
                n);
        return true;
    }
    if (opt == OPT_RPC_PORT) {
        if (!parse_u32(value, &n) || n > 65535) {
            snprintf(error, CR_CONFIG_ERROR_MAX, "port: '%s' is not a port from 0 to 65535",
                     value);
            return false;
        }
        /* Mooncake: rpc_port 0 means "use --port". */
        return n == 0 || set_rpc_part(config->mooncake_rpc_address, NULL, value, error);
    }
    assert(opt == OPT_RPC_HOST);
    return set_rpc_part(config->mooncake_rpc_address, value, NULL, error);
}

/* `crescentd --rpc_port 50051` (Mooncake's default port, the one flag a
 * Mooncake launch needs): the ZMQ endpoint, if still on its default
 * tcp://127.0.0.1:50051, steps aside to the port the Mooncake endpoint left
 * (docs/mooncake.md, "Ports"). */
static void mooncake_takes_zmq_port(struct cr_daemon_config *config) {
    static const char zmq_default[] = "tcp://127.0.0.1:50051";
    const char *colon = strrchr(config->mooncake_rpc_address, ':');
    if (colon == NULL || strcmp(colon, ":50051") != 0) return;
    if (strcmp(config->rpc_address, zmq_default) != 0) return;
    snprintf(config->rpc_address, sizeof(config->rpc_address), "tcp://127.0.0.1:%s",
             strrchr(CR_CONFIG_MOONCAKE_RPC_DEFAULT, ':') + 1);
    CR_INFO("config", "the Mooncake master endpoint takes port 50051: crescent's ZMQ RPC "
            "moves to %s (set --rpc-address to choose)", config->rpc_address);
}

/* The resolved settings as a config file (--print-config): every key, so the
 * output can be saved and given back with --config. */
static void print_config(const struct cr_daemon_config *config, FILE *out) {
    json_t *doc = json_object();
    const char *base = (const char *)config;
    for (size_t i = 0; i < SETTING_COUNT && doc != NULL; i++) {
        const struct setting *s = &settings[i];
        char key[64];
        snprintf(key, sizeof(key), "%s", s->name);
        for (char *c = key; *c != '\0'; c++)
            if (*c == '-') *c = '_';
        static const char *const levels[] = {"DEBUG", "INFO", "WARN", "ERROR"};
        json_t *v = NULL;
        switch (s->type) {
        case SETTING_STRING: v = json_string(base + s->offset); break;
        case SETTING_U32: v = json_integer(*(const uint32_t *)(const void *)(base + s->offset)); break;
        case SETTING_BOOL: v = json_boolean(*(const bool *)(base + s->offset)); break;
        case SETTING_LOG_LEVEL:
            v = json_string(levels[*(const enum cr_log_level *)(const void *)(base + s->offset)]);
            break;
        case SETTING_RATIO: v = json_real(*(const double *)(const void *)(base + s->offset)); break;
        case SETTING_SIZE:
            v = json_integer((json_int_t)*(const uint64_t *)(const void *)(base + s->offset));
            break;
        }
        json_object_set_new(doc, key, v);
    }
    char *text = doc != NULL ? json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    if (text != NULL) fprintf(out, "%s\n", text);
    free(text);
    json_decref(doc);
}

/* Finds --config first so the file applies before the other flags. */
static const char *find_config_path(int argc, char **argv) {
    const char *path = getenv("CRESCENT_CONFIG");
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) path = argv[i + 1];
        else if (strncmp(argv[i], "--config=", 9) == 0) path = argv[i] + 9;
    }
    return path;
}

static enum cr_config_action parse_args(int argc, char **argv, struct cr_daemon_config *config,
                                        char error[CR_CONFIG_ERROR_MAX]) {
    /* Every setting also in gflags' spelling (underscores), as Mooncake's
     * master takes them, and Mooncake's own names for the rest. */
    struct option options[2 * SETTING_COUNT + MOONCAKE_FLAG_COUNT + 7];
    char underscored[SETTING_COUNT][64];
    size_t n = 0;
    for (size_t i = 0; i < SETTING_COUNT; i++) {
        options[n++] = (struct option){settings[i].name, required_argument, NULL, OPT_SETTING + (int)i};
        snprintf(underscored[i], sizeof(underscored[i]), "%s", settings[i].name);
        for (char *c = underscored[i]; *c != '\0'; c++)
            if (*c == '-') *c = '_';
        if (strcmp(underscored[i], settings[i].name) != 0)
            options[n++] = (struct option){underscored[i], required_argument, NULL,
                                           OPT_SETTING + (int)i};
    }
    for (size_t i = 0; i < MOONCAKE_FLAG_COUNT; i++)
        options[n++] = (struct option){mooncake_flags[i].name, required_argument, NULL,
                                       mooncake_flags[i].id};
    options[n++] = (struct option){"help", no_argument, NULL, OPT_HELP};
    options[n++] = (struct option){"help-mooncake", no_argument, NULL, OPT_HELP_MOONCAKE};
    options[n++] = (struct option){"print-config", no_argument, NULL, OPT_PRINT_CONFIG};
    options[n++] = (struct option){"version", no_argument, NULL, OPT_VERSION};
    options[n++] = (struct option){"config", required_argument, NULL, OPT_CONFIG};
    options[n++] = (struct option){"no-pin", no_argument, NULL, OPT_NO_PIN};
    options[n] = (struct option){0};
    assert(n < sizeof(options) / sizeof(options[0]));
    /* Mooncake's flags that edit the RPC address wait until --rpc-address is in. */
    struct {
        int opt;
        const char *value;
    } deferred[16];
    size_t deferred_count = 0;

    const char *path = find_config_path(argc, argv);
    if (path != NULL && *path != '\0') {
        snprintf(config->config_path, sizeof(config->config_path), "%s", path);
        if (!cr_daemon_config_load_file(path, config, error)) return CR_CONFIG_EXIT_USAGE;
    }
    bool print = false;
    opterr = 0;
    optind = 1;
    for (;;) {
        int index = 0;
        /* _only: gflags also takes -flag and -flag=value. */
        int opt = getopt_long_only(argc, argv, "", options, &index);
        if (opt == -1) break;
        if (opt == OPT_HELP) {
            cr_daemon_config_usage(stdout);
            return CR_CONFIG_EXIT_OK;
        }
        if (opt == OPT_HELP_MOONCAKE) {
            cr_mooncake_flags_print(stdout);
            return CR_CONFIG_EXIT_OK;
        }
        if (opt == OPT_VERSION) {
            puts("crescentd " CRESCENT_VERSION);
            return CR_CONFIG_EXIT_OK;
        }
        if (opt == OPT_PRINT_CONFIG) {
            print = true;
            continue;
        }
        if (opt == OPT_CONFIG) continue; /* applied above */
        if (opt == OPT_NO_PIN) {
            config->pin_threads = false;
            continue;
        }
        if (opt >= OPT_SETTING && strcmp(options[index].name, "rpc_address") == 0 &&
            strstr(optarg, "://") == NULL)
            opt = OPT_RPC_HOST; /* Mooncake's --rpc_address is a host */
        if (opt >= OPT_SETTING && opt < OPT_SETTING + (int)SETTING_COUNT) {
            if (!apply_text(&settings[opt - OPT_SETTING], optarg, config, error))
                return CR_CONFIG_EXIT_USAGE;
            continue;
        }
        if (opt == OPT_RPC_PORT || opt == OPT_RPC_HOST || opt == OPT_RPC_THREADS) {
            if (deferred_count == sizeof(deferred) / sizeof(deferred[0])) {
                snprintf(error, CR_CONFIG_ERROR_MAX, "too many --port/--rpc_address flags");
                return CR_CONFIG_EXIT_USAGE;
            }
            deferred[deferred_count].opt = opt;
            deferred[deferred_count++].value = optarg;
            continue;
        }
        const char *bad = argv[optind - 1];
        if (opt == ':' || (opt == '?' && optopt != 0))
            snprintf(error, CR_CONFIG_ERROR_MAX, "option %s needs a value (see --help)", bad);
        else
            snprintf(error, CR_CONFIG_ERROR_MAX, "unknown option %s (see --help)", bad);
        return CR_CONFIG_EXIT_USAGE;
    }
    if (optind < argc) {
        snprintf(error, CR_CONFIG_ERROR_MAX, "unexpected argument '%s' (see --help)", argv[optind]);
        return CR_CONFIG_EXIT_USAGE;
    }
    for (size_t i = 0; i < deferred_count; i++)
        if (!apply_mooncake_flag(deferred[i].opt, deferred[i].value, config, error))
            return CR_CONFIG_EXIT_USAGE;
    mooncake_takes_zmq_port(config);
    if (!validate(config, error)) return CR_CONFIG_EXIT_USAGE;
    if (print) {
        print_config(config, stdout);
        return CR_CONFIG_EXIT_OK;
    }
    return CR_CONFIG_RUN;
}

enum cr_config_action cr_daemon_config_parse(int argc, char **argv, struct cr_daemon_config *config,
                                             char error[CR_CONFIG_ERROR_MAX]) {
    int n = 0;
    char **args = NULL;
    if (!cr_mooncake_flags_rewrite(argc, argv, &n, &args, error, CR_CONFIG_ERROR_MAX))
        return CR_CONFIG_EXIT_USAGE;
    enum cr_config_action action = parse_args(n, args, config, error);
    cr_mooncake_argv_free(n, args);
    return action;
}
