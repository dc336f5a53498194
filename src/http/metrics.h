/* Prometheus text exposition of actor counters. */
#ifndef CRESCENT_HTTP_METRICS_H
#define CRESCENT_HTTP_METRICS_H

#include <stdbool.h>
#include <stdint.h>

#include "actors/runtime.h"
#include "core/buf.h"

/* One actor's snapshot; `up` is false when it did not answer in time (its
 * counters are then absent, and crescent_actor_up is 0). */
struct cr_metrics_actor {
    bool up;
    char name[CR_ACTOR_NAME_MAX];
    struct cr_actor_stats stats;
};

/* Appends every metric family (HELP, TYPE, one sample per actor). */
void cr_metrics_render(struct cr_buf *out, const struct cr_metrics_actor *actors, uint32_t count,
                       uint64_t uptime_s);

#endif
