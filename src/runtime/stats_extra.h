/* A subsystem's counters in an actor's stats snapshot (runtime.h,
 * struct cr_actor_stats, its `extra` pairs): what every stats hook that adds
 * them does, in one place. */
#ifndef CRESCENT_RUNTIME_STATS_EXTRA_H
#define CRESCENT_RUNTIME_STATS_EXTRA_H

#include <stdint.h>

#include "runtime/runtime.h"

/* Adds (name, value) to out's extra pairs; `name` is static and
 * Prometheus-safe.  One past CR_ACTOR_STATS_EXTRA_MAX is left out. */
static inline void cr_actor_stats_add(struct cr_actor_stats *out, const char *name,
                                      uint64_t value) {
    if (out->extra_count >= CR_ACTOR_STATS_EXTRA_MAX) return;
    out->extra[out->extra_count].name = name;
    out->extra[out->extra_count].value = value;
    out->extra_count++;
}

#endif
