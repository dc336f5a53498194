/* crescentd's settings: defaults, command-line flags and the JSON config file.
 *
 * Precedence: defaults < config file (--config FILE or CRESCENT_CONFIG) <
 * flags.  Every setting has one name, used as the flag (--http-address) and,
 * with underscores, as the config key ("http_address").  Unknown keys and
 * wrong types in the file are errors, so a typo never silently does nothing. */
#ifndef CRESCENT_DAEMON_CONFIG_H
#define CRESCENT_DAEMON_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/log.h"

#define CR_CONFIG_ADDRESS_MAX 256u
#define CR_CONFIG_ERROR_MAX 512u
/* The native RPC endpoint's default: best effort (taken: crescentd starts
 * without it and says so), where an address given by the user must bind. */
#define CR_CONFIG_RPC_TCP_DEFAULT "127.0.0.1:50052"
/* Mooncake's master protocol (coro_rpc): docs/mooncake.md says why 50053. */
#define CR_CONFIG_MOONCAKE_RPC_DEFAULT "127.0.0.1:50053"
/* --metrics-port's default (Mooncake's): best effort in the same way. */
#define CR_CONFIG_METRICS_PORT_DEFAULT 9003u

struct cr_daemon_config {
    char config_path[CR_CONFIG_ADDRESS_MAX]; /* empty: none */
    char http_address[CR_CONFIG_ADDRESS_MAX]; /* host:port */
    uint32_t metrics_port; /* Mooncake master's HTTP endpoints; 0: off */
    char metrics_host[CR_CONFIG_ADDRESS_MAX]; /* where metrics_port listens; "": http_address's host */
    char mooncake_query_key[CR_CONFIG_ADDRESS_MAX]; /* /query_key's form: "wrapped" or "bare" */
    uint32_t http_threads;
    uint32_t http_connections_max;
    uint32_t http_idle_timeout_ms;
    char http_allowed_hosts[CR_CONFIG_ADDRESS_MAX];   /* names browsers may use; "*": any */
    char http_allowed_origins[CR_CONFIG_ADDRESS_MAX]; /* other origins that may POST; "*": any */
    bool pin_threads;
    uint32_t spin_us;        /* --spin-us: an idle actor's longest spin */
    bool spin_adaptive;      /* --spin-adaptive: spin only when it pays (runtime.h) */
    uint32_t ring_slots;
    uint32_t ask_timeout_ms;
    enum cr_log_level log_level;

    /* Store master (seed 004 defaults; config keys are the reference's flag names). */
    char rpc_address[CR_CONFIG_ADDRESS_MAX];      /* ZMQ endpoint of the RPC gateway */
    char rpc_tcp_address[CR_CONFIG_ADDRESS_MAX];  /* native TCP endpoint, host:port; "off" */
    uint32_t rpc_tcp_connections_max;             /* open native connections */
    uint32_t rpc_tcp_queue_max;                   /* requests in flight per native connection */
    bool rpc_tcp_with_curve;                      /* serve it (loopback only) with CURVE on */
    char mooncake_rpc_address[CR_CONFIG_ADDRESS_MAX]; /* Mooncake's coro_rpc, host:port; "" off */
    bool enable_http_metadata_server;              /* Mooncake's metadata server (src/mooncake) */
    bool enable_metadata_cleanup_on_timeout;       /* its keys go with an expired client */
    char store_hash_key_model[CR_CONFIG_ADDRESS_MAX]; /* hash-keyed objects' model (indexer) */
    uint32_t store_hash_key_block_size;            /* and block size; 0: not indexed */
    uint32_t http_metadata_server_port;
    char http_metadata_server_host[CR_CONFIG_ADDRESS_MAX];
    char rpc_shm_path[CR_CONFIG_ADDRESS_MAX];     /* same-host shm set-up socket; "auto", "off" */
    uint32_t rpc_shm_clients_max;                 /* shm clients at once */
    uint32_t rpc_shm_ring_bytes;                  /* bytes of each of a client's two rings */
    uint32_t rpc_shm_hello_timeout_ms;            /* a connection silent this long is closed */
    uint32_t default_kv_lease_ttl;                /* ms */
    uint32_t default_kv_soft_pin_ttl;             /* ms */
    bool allow_evict_soft_pinned_objects;
    double eviction_ratio;
    double eviction_high_watermark_ratio;
    uint32_t put_start_discard_timeout_sec;
    uint32_t put_start_release_timeout_sec;
    uint32_t client_ttl;                          /* s */
    uint32_t max_segments_per_client;
    uint32_t min_segment_size_bytes;
    uint32_t max_tenants_per_client;
    uint32_t max_objects;                         /* live objects; eviction keeps room */
    uint32_t max_allocations_per_segment;
    uint32_t regex_max_matches;                   /* keys one regex call may match */
    uint32_t regex_budget_steps;                  /* PCRE2 steps one regex call may take */
    uint32_t task_timeout_sec;                    /* a copy/move task not reported by then fails */
    uint32_t task_retention;                      /* finished tasks kept for QueryTask */
    uint32_t task_max_in_flight;                  /* tasks PENDING or PROCESSING at once */
    uint32_t promotion_hits;       /* SSD reads within the window that copy back to memory; 0 off */
    uint32_t promotion_window_sec; /* the window those reads count in */

    /* Local segment: crescentd hosts store memory itself (src/actors/data.c). */
    uint64_t local_segment_size;                  /* bytes; 0: off */
    char data_address[CR_CONFIG_ADDRESS_MAX];     /* host:port of its transfer server */
    bool data_no_shm;                             /* serve the local segment over tcp only */
    bool data_require_capability;                 /* refuse transfers without a capability */
    bool data_no_verbs;                           /* never open an RDMA device for it */
    char data_rdma_gid_index[CR_CONFIG_ADDRESS_MAX]; /* "auto" or a GID table index */
    char data_rdma_devices[CR_CONFIG_ADDRESS_MAX];   /* "": every active one; "mlx5_0,mlx5_1" */
    char local_segment_ssd_dir[CR_CONFIG_ADDRESS_MAX]; /* "": no SSD tier (docs/tiers.md) */
    uint64_t local_segment_ssd_size;                 /* bytes of SSD files; > 0 with the dir */

    /* Event plane (seed 000). */
    char event_address[CR_CONFIG_ADDRESS_MAX];    /* ZMQ PUB endpoint */
    char event_topic[CR_CONFIG_ADDRESS_MAX];
    uint32_t event_batch_max;                     /* events per batch */
    uint32_t event_flush_us;                      /* a lone event waits at most this */
    uint32_t event_send_hwm;
    char replay_address[CR_CONFIG_ADDRESS_MAX];   /* ZMQ ROUTER endpoint */
    uint32_t replay_batches;                      /* batches kept */
    uint32_t replay_bytes_mb;
    uint32_t replay_sessions_max;
    uint32_t replay_client_hwm;                     /* payload bytes kept */

    /* Security: all empty (the default) means none (see README "Exposing crescentd safely"). */
    char curve_secret_key_file[CR_CONFIG_ADDRESS_MAX]; /* Z85 secret key of the daemon */
    char curve_clients[CR_CONFIG_ADDRESS_MAX];         /* file or directory of client keys */
    char admin_token_file[CR_CONFIG_ADDRESS_MAX];      /* token destructive calls must carry */

    /* Prefix indexer (seed 001). */
    char indexer_config[CR_CONFIG_ADDRESS_MAX];   /* conductor_config.json; empty: none */
    uint32_t indexer_engine_hashes_max;           /* per publisher */
    uint32_t indexer_max_message_mb;              /* ZMQ_MAXMSGSIZE of SUB and DEALER */
    uint32_t prefix_hash_seed;                    /* base seed of the standard hashes (0) */
    char state_dir[CR_CONFIG_ADDRESS_MAX];        /* registrations and the store's log; "" none */
    /* The shared file tier (docs/tiers.md). */
    char root_fs_dir[CR_CONFIG_ADDRESS_MAX];      /* "" none */
    char cluster_id[CR_CONFIG_ADDRESS_MAX];       /* its subdirectory, and HA's key: mooncake_cluster */
    uint64_t global_file_segment_size;            /* bytes; INT64_MAX: unlimited */
    char durability[CR_CONFIG_ADDRESS_MAX];       /* none, async or sync (src/durable) */
    char replication_address[CR_CONFIG_ADDRESS_MAX]; /* leader's listener for standbys; "" off */
    char standby_of[CR_CONFIG_ADDRESS_MAX];       /* a standby's leader; "" not a standby */
    char replication[CR_CONFIG_ADDRESS_MAX];      /* async or sync */
    uint32_t snapshot_every_records;              /* log records between snapshots; 0 never */
    uint32_t keep_diverged;                       /* DIR/diverged-<ms>/ kept; older deleted */

    /* High availability on etcd (src/ha, docs/ha.md): off unless ha is "etcd" or
     * enable_ha (Mooncake's --enable_ha) is set. */
    char ha[16];                                   /* "" off, or "etcd" */
    bool enable_ha;                                /* the same as --ha etcd */
    char etcd_endpoints[CR_CONFIG_ADDRESS_MAX];    /* "h1:2379;h2:2379" */
    /* cluster_id (above, with the file tier) also names the election's key:
     * /crescent/<id>/leader */
    uint32_t ha_lease_ttl;                         /* seconds */
    char ha_advertise_host[CR_CONFIG_ADDRESS_MAX]; /* host put in the key; "": each address's */

    /* Dynamo's KV events over NATS (seed 003, src/actors/indexer_nats.c); "" url: off.
     * Subjects are namespace.<ns>.component.<component>.<subject>. */
    char nats_url[CR_CONFIG_ADDRESS_MAX];
    char nats_namespace[CR_CONFIG_ADDRESS_MAX];
    char nats_component[CR_CONFIG_ADDRESS_MAX];        /* the workers' component ("*": any) */
    char nats_kv_subject[CR_CONFIG_ADDRESS_MAX];       /* RouterEvent */
    char nats_metrics_subject[CR_CONFIG_ADDRESS_MAX];  /* ForwardPassMetrics */
    char nats_router_component[CR_CONFIG_ADDRESS_MAX]; /* where hit-rate events go */
    char nats_hit_rate_subject[CR_CONFIG_ADDRESS_MAX]; /* KVHitRateEvent; "" none */
    char nats_model[CR_CONFIG_ADDRESS_MAX];            /* model name the workers' blocks file under */
    uint32_t nats_block_size;                          /* tokens per block of the workers */
    uint32_t nats_stale_ms;                            /* metrics silent this long: stale */
};

/* Outcome of parsing: run, print help/version and exit 0, or exit 2. */
enum cr_config_action { CR_CONFIG_RUN, CR_CONFIG_EXIT_OK, CR_CONFIG_EXIT_USAGE };

void cr_daemon_config_default(struct cr_daemon_config *config);

/* Parses argv (and the config file it names) into *config.  On
 * CR_CONFIG_EXIT_USAGE, `error` holds one line naming the problem. */
enum cr_config_action cr_daemon_config_parse(int argc, char **argv, struct cr_daemon_config *config,
                                             char error[CR_CONFIG_ERROR_MAX]);

/* Applies a JSON config file.  Returns false with `error` set on a missing
 * file, bad JSON (with line and column), unknown key, wrong type or bad value. */
bool cr_daemon_config_load_file(const char *path, struct cr_daemon_config *config,
                                char error[CR_CONFIG_ERROR_MAX]);

void cr_daemon_config_usage(FILE *out);

#endif
