/* Mooncake master's metric families (docs/mooncake-metrics.tsv), for
 * --metrics-port's GET /metrics: a board built for mooncake_master reads
 * crescentd unchanged where crescent counts the same thing. */
#ifndef CRESCENT_HTTP_MOONCAKE_METRICS_H
#define CRESCENT_HTTP_MOONCAKE_METRICS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/buf.h"
#include "http/metrics.h"

/* Appends every family crescent has a value for, with the reference's name,
 * type and help, from the actors' collected stats. */
void cr_mooncake_metrics_render(struct cr_buf *b, const struct cr_metrics_actor *actors,
                                uint32_t count);

/* One family's value by its Mooncake name (as /metrics serves it); false
 * when it has none now (its actor did not answer) or no such family. */
bool cr_mooncake_metric_value(const struct cr_metrics_actor *actors, uint32_t count,
                              const char *name, uint64_t *out);

/* Every family crescent serves, in order: for the tests and the docs. */
const char *cr_mooncake_metric_name(uint32_t i);

#endif
