/* Admin routes of the HTTP front: GET /health, GET /metrics, GET /api/v1/actors.
 * Each asks every actor for its stats, so they also prove the actors answer. */
#ifndef CRESCENT_HTTP_ADMIN_H
#define CRESCENT_HTTP_ADMIN_H

#include <stdint.h>

#include "runtime/runtime.h"
#include "http/front.h"
#include "http/mooncake_summary.h"

struct cr_ha_gate;

struct cr_http_admin {
    struct cr_runtime *rt;
    uint64_t started_ns;     /* CLOCK_MONOTONIC at start */
    uint64_t ask_timeout_ns; /* per actor */
    const struct cr_http_front *front; /* set by cr_http_admin_register: route latencies */
    struct cr_ha_gate *ha;             /* --ha etcd: role, term, leader (src/ha); NULL off */
    struct cr_mc_summary_window summary; /* /metrics/summary's previous reading */
};

int cr_http_admin_register(struct cr_http_front *front, struct cr_http_admin *admin);

/* The --metrics-port front's share: /health, /metrics in Mooncake master's
 * metric names (mooncake_metrics.h) and its /metrics/summary (mooncake_summary.h).
 * `admin` must be the one registered on the main front (its route latencies). */
int cr_http_admin_register_mooncake(struct cr_http_front *front, struct cr_http_admin *admin);

#endif
