/* crescentd's lifecycle (see daemon.h).
 *
 * Signals: SIGINT and SIGTERM are blocked in every thread before any thread
 * starts, and the main thread takes them with sigwait, so no actor is ever
 * interrupted in a handler and shutdown runs as ordinary code. */
#include "daemon/daemon.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"
#include "actors/subsystems.h"
#include "core/log.h"
#include "crescent/error.h"
#include "crescent/version.h"
#include "daemon/config.h"
#include "daemon/state_dir.h"
#include "durable/role.h"
#include "ha/ha.h"
#include "http/admin.h"
#include "daemon/admin_token.h"
#include "http/dashboard.h"
#include "http/front.h"
#include "http/ha_routes.h"
#include "http/store_routes.h"
#include "mooncake/http_meta.h"

struct daemon {
    struct cr_daemon_config config;
    struct cr_runtime *rt;
    struct cr_subsystems subsystems;
    struct cr_http_front *front;
    struct cr_http_front *metrics_front; /* --metrics-port: Mooncake's endpoints; NULL when 0 */
    struct cr_mc_meta *metadata;         /* --enable-http-metadata-server; NULL when off */
    struct cr_http_admin admin;
    struct cr_ha *ha; /* --ha etcd: the election thread; NULL off */
};

/* The longest a store event waits for segments to wake the publisher and
 * the indexer (cr_send_lazy), at most the publisher's flush window: the
 * publisher counts that window from when the event happened, so waiting in
 * the ring within it delays no subscriber, and at one client the two wake
 * once per window instead of once per put (docs/architecture.md).  Capped,
 * so a long --event-flush-us does not hold the indexer back as long. */
#define EVENT_WAKE_NS_MAX 1000000u

static int start_runtime(struct daemon *d) {
    struct cr_runtime_config rc;
    cr_runtime_config_default(&rc);
    rc.pin_threads = d->config.pin_threads;
    uint64_t flush_ns = (uint64_t)d->config.event_flush_us * 1000u;
    rc.lazy_wake_ns = flush_ns < EVENT_WAKE_NS_MAX ? flush_ns : EVENT_WAKE_NS_MAX;
    rc.spin_ns = (uint64_t)d->config.spin_us * 1000u;
    rc.spin_adaptive = d->config.spin_adaptive;
    rc.ring_slots = d->config.ring_slots;
    int status = cr_runtime_create(&rc, &d->rt);
    if (status != CR_OK) {
        CR_ERROR("daemon", "cannot create the actor runtime: %s", cr_strerror(status));
        return status;
    }
    d->subsystems.ask_timeout_ns = (uint64_t)d->config.ask_timeout_ms * 1000000u;
    d->subsystems.prefix_hash_seed = d->config.prefix_hash_seed;
    d->subsystems.metadata = d->metadata; /* started first: the Mooncake edge may clean it */
    return cr_subsystems_spawn(d->rt, &d->config, &d->subsystems);
}

/* Where --metrics-port listens: --metrics-host, or the host of --http-address. */
static void metrics_address(const struct cr_daemon_config *c, char *out, size_t size) {
    if (c->metrics_host[0] != '\0') {
        bool v6 = strchr(c->metrics_host, ':') != NULL && c->metrics_host[0] != '[';
        snprintf(out, size, v6 ? "[%s]:%u" : "%s:%u", c->metrics_host, c->metrics_port);
        return;
    }
    const char *colon = strrchr(c->http_address, ':');
    snprintf(out, size, "%.*s:%u", (int)(colon - c->http_address), c->http_address,
             c->metrics_port);
}

/* Mooncake master's HTTP endpoints on --metrics-port, so scrapers and
 * scripts written for Mooncake keep working.  Like the native RPC's default
 * address, the default port is best effort: taken, crescentd starts without
 * it and says so; a port the user chose must bind.  Returns 0, or the exit
 * status to use. */
static int start_metrics_http(struct daemon *d) {
    if (d->config.metrics_port == 0) return 0;
    char address[CR_CONFIG_ADDRESS_MAX + 8];
    metrics_address(&d->config, address, sizeof(address));
    if (cr_http_front_create(&d->metrics_front) != CR_OK ||
        cr_http_admin_register_mooncake(d->metrics_front, &d->admin) != CR_OK ||
        cr_mooncake_routes_register(d->metrics_front, &d->subsystems,
                                    strcmp(d->config.mooncake_query_key, "bare") == 0) != CR_OK) {
        CR_ERROR("daemon", "cannot set up the --metrics-port routes");
        return 1;
    }
    char error[512];
    if (cr_http_front_set_browsers(d->metrics_front, d->config.http_allowed_hosts,
                                   d->config.http_allowed_origins, error,
                                   sizeof(error)) != CR_OK) {
        fprintf(stderr, "crescentd: %s\n", error);
        return 2;
    }
    struct cr_admin_token token; /* its mutations (remove_all, ...) need it as the front's do */
    if (!cr_admin_token_read(d->config.admin_token_file, &token, error, sizeof(error)) ||
        cr_http_front_set_admin_token(d->metrics_front, token.text) != CR_OK) {
        fprintf(stderr, "crescentd: %s\n", error);
        return 2;
    }
    struct cr_http_front_limits limits;
    cr_http_front_limits_default(&limits);
    limits.workers = 4; /* scrapers and scripts: a few workers are plenty */
    limits.connections_max = d->config.http_connections_max;
    limits.idle_timeout_ms = d->config.http_idle_timeout_ms;
    if (cr_http_front_start(d->metrics_front, address, &limits, error, sizeof(error)) != CR_OK) {
        if (d->config.metrics_port == CR_CONFIG_METRICS_PORT_DEFAULT) {
            CR_WARN("daemon", "--metrics-port %u (the default) skipped: %s; Mooncake's "
                              "endpoints are off (give --metrics-port PORT, or 0 to say so)",
                    d->config.metrics_port, error);
            cr_http_front_destroy(d->metrics_front);
            d->metrics_front = NULL;
            return 0;
        }
        fprintf(stderr, "crescentd: --metrics-port: %s (--metrics-port 0 turns it off)\n", error);
        return 2;
    }
    return 0;
}

/* Returns 0, or the exit status to use. */
/* Mooncake's HTTP metadata server (src/mooncake/http_meta.h). */
static int start_metadata_http(struct daemon *d) {
    if (!d->config.enable_http_metadata_server) return 0;
    char address[CR_CONFIG_ADDRESS_MAX + 8], error[512];
    const char *host = d->config.http_metadata_server_host;
    bool v6 = strchr(host, ':') != NULL && host[0] != '[';
    snprintf(address, sizeof(address), v6 ? "[%s]:%u" : "%s:%u", host,
             d->config.http_metadata_server_port);
    if (cr_mc_meta_start(address, &d->metadata, error, sizeof(error)) != CR_OK) {
        fprintf(stderr, "crescentd: %s\n", error);
        return 2;
    }
    CR_INFO("daemon", "Mooncake HTTP metadata server on http://%s/metadata", address);
    return 0;
}

static int start_http(struct daemon *d) {
    d->admin = (struct cr_http_admin){.rt = d->rt,
                                      .ha = cr_segments_ha_gate(d->subsystems.states[CR_SUBSYSTEM_SEGMENTS]),
                                      .started_ns = cr_monotonic_ns(),
                                      .ask_timeout_ns = (uint64_t)d->config.ask_timeout_ms * 1000000u};
    if (cr_http_front_create(&d->front) != CR_OK || cr_http_admin_register(d->front, &d->admin) != CR_OK ||
        cr_subsystems_register_routes(&d->subsystems, d->front) != CR_OK ||
        cr_dashboard_register(d->front) != CR_OK || cr_ha_routes_register(d->front) != CR_OK) {
        CR_ERROR("daemon", "cannot set up the HTTP routes");
        return 1;
    }
    char error[512];
    struct cr_admin_token token; /* the RPC gateway read it at spawn: checked there */
    if (!cr_admin_token_read(d->config.admin_token_file, &token, error, sizeof(error)) ||
        cr_http_front_set_admin_token(d->front, token.text) != CR_OK) {
        fprintf(stderr, "crescentd: %s\n", error);
        return 2;
    }
    if (cr_http_front_set_browsers(d->front, d->config.http_allowed_hosts,
                                   d->config.http_allowed_origins, error,
                                   sizeof(error)) != CR_OK) {
        fprintf(stderr, "crescentd: %s\n", error);
        return 2;
    }
    struct cr_http_front_limits limits;
    cr_http_front_limits_default(&limits);
    limits.workers = d->config.http_threads;
    limits.connections_max = d->config.http_connections_max;
    limits.idle_timeout_ms = d->config.http_idle_timeout_ms;
    if (cr_http_front_start(d->front, d->config.http_address, &limits, error, sizeof(error)) !=
        CR_OK) {
        fprintf(stderr, "crescentd: %s\n", error);
        return 2;
    }
    return start_metrics_http(d);
}

static void shutdown_all(struct daemon *d) {
    /* First: a leader closes its fence and resigns, so a standby takes over now. */
    cr_ha_stop(d->ha);
    d->ha = NULL;
    /* Intake first: no HTTP request may ask an actor that is stopping. */
    cr_http_front_destroy(d->metrics_front);
    d->metrics_front = NULL;
    cr_http_front_destroy(d->front);
    d->front = NULL;
    if (d->rt != NULL) cr_runtime_destroy(d->rt);
    d->rt = NULL;
    /* After the actors: the segments thread may remove keys until it stops. */
    cr_mc_meta_stop(d->metadata);
    d->metadata = NULL;
    cr_subsystems_free(&d->subsystems);
    cr_runtime_thread_release();
}

static int wait_for_signal(const sigset_t *signals) {
    int sig = 0;
    while (sigwait(signals, &sig) != 0) {
    }
    return sig;
}

int cr_daemon_main(int argc, char **argv) {
    struct daemon d = {0};
    if (!cr_log_init_from_env()) {
        fprintf(stderr, "crescentd: CRESCENT_LOG_LEVEL='%s' is not DEBUG, INFO, WARN or ERROR\n",
                getenv("CRESCENT_LOG_LEVEL"));
        return 2;
    }
    cr_daemon_config_default(&d.config);
    d.config.log_level = cr_log_get_level();
    char error[CR_CONFIG_ERROR_MAX] = "";
    enum cr_config_action action = cr_daemon_config_parse(argc, argv, &d.config, error);
    if (action == CR_CONFIG_EXIT_OK) return 0;
    if (action == CR_CONFIG_EXIT_USAGE) {
        fprintf(stderr, "crescentd: %s\n", error);
        return 2;
    }
    cr_log_set_level(d.config.log_level);
    /* Before any actor: segments restores the store's log from it at start. */
    if (d.config.state_dir[0] != '\0' &&
        cr_daemon_state_dir_check(d.config.state_dir, error, sizeof(error)) != CR_OK) {
        fprintf(stderr, "crescentd: %s\n", error);
        return 2;
    }

    /* HA with replication: every master starts as a standby following nobody
     * (durable/role.h); the election makes one the leader, the others follow it. */
    if (cr_ha_enabled(&d.config) && d.config.replication_address[0] != '\0')
        cr_role_set(CR_ROLE_STANDBY, 0, "");

    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, NULL); /* inherited by every thread */

    /* A subsystem that cannot use its address or settings is a usage error
     * (exit 2), like a bad flag; anything else failing to start is exit 1. */
    /* The metadata server first: the actors are given it (start_runtime). */
    int exit_status = start_metadata_http(&d);
    int status = exit_status == 0 ? start_runtime(&d) : CR_OK;
    if (exit_status == 0)
        exit_status = status == CR_OK                   ? start_http(&d)
                      : status == CR_ERR_IO ||
                              status == CR_ERR_INVALID_PARAMS ? 2
                                                             : 1;
    if (exit_status != 0) {
        shutdown_all(&d);
        return exit_status;
    }
    if (cr_ha_enabled(&d.config)) {
        /* Last: every endpoint is bound (its address goes into the leader key). */
        struct cr_ha_gate *gate = cr_segments_ha_gate(d.subsystems.states[CR_SUBSYSTEM_SEGMENTS]);
        if (cr_ha_start(&d.config, gate, &d.ha, error, sizeof(error)) != CR_OK) {
            fprintf(stderr, "crescentd: %s\n", error);
            shutdown_all(&d);
            return 2;
        }
    }
    char metrics[CR_CONFIG_ADDRESS_MAX + 8] = "off";
    if (d.metrics_front != NULL) metrics_address(&d.config, metrics, sizeof(metrics));
    CR_INFO("daemon", "crescentd %s ready: http=%s rpc=%s metrics=%s actors=%u pinning=%s",
            CRESCENT_VERSION, d.config.http_address, d.config.rpc_address, metrics,
            cr_runtime_actor_count(d.rt), d.config.pin_threads ? "on" : "off");
    int sig = wait_for_signal(&signals);
    CR_INFO("daemon", "%s received: stopping intake, draining actors", strsignal(sig));
    shutdown_all(&d);
    CR_INFO("daemon", "stopped cleanly");
    return 0;
}
