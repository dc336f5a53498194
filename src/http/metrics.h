/* Prometheus text exposition of actor counters. */
#ifndef CRESCENT_HTTP_METRICS_H
#define CRESCENT_HTTP_METRICS_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "runtime/runtime.h"
#include "core/buf.h"
#include "http/front.h"

/* One actor's snapshot; `up` is false when it did not answer in time (its
 * counters are then absent, and crescent_actor_up is 0). */
struct cr_metrics_actor {
    bool up;
    char name[CR_ACTOR_NAME_MAX];
    /* A stats view of another actor (runtime.h: stats_views), e.g. rpc_tcp
     * served by segments: only its own counters and histograms, no runtime
     * families (those are the serving actor's). */
    bool view;
    char served_by[CR_ACTOR_NAME_MAX];
    struct cr_actor_stats stats;
};

/* Actors and their stats views at most. */
#define CR_METRICS_ENTRIES_MAX (CR_ACTORS_MAX + 8u)

/* Appends every metric family, each with HELP and TYPE: the runtime's per
 * actor (label `actor`), each subsystem's own counters (`_total`: counter,
 * else gauge), the actors' latency histograms, and the HTTP routes' latency
 * (crescent_http_request_duration_seconds{method, route}). */
void cr_metrics_render(struct cr_buf *out, const struct cr_metrics_actor *actors, uint32_t count,
                       const struct cr_http_route_latency *routes, uint32_t route_count,
                       uint64_t uptime_s);

/* Appends the per-publisher families (crescent_indexer_publisher_*, labels
 * instance, tenant, dp_rank) from the indexer's /services answer: link
 * connected, link age, last batch age, last seq, gaps, replays, replayed and
 * lost batches, stale.  With services NULL the families are empty. */
/* crescent_http_requests_refused_total{reason}: requests the front refused
 * before a handler ran (browsers.h's checks, a missing admin token). */
void cr_metrics_render_refusals(struct cr_buf *out, const struct cr_http_refusals *refused);

void cr_metrics_render_publishers(struct cr_buf *out, json_t *services);

/* HELP text of subsystem counter `name` of `actor`: from a table, else made
 * from the name in `scratch`. */
const char *cr_metrics_help(const char *actor, const char *name, char *scratch, size_t size);

#endif
