/* Read latency per tier as clients report it to the master (docs/tiers.md,
 * "Read latency per tier").
 *
 * Clients read replicas directly, so only they can time a read; libcrescent
 * keeps one histogram per tier (memory, disk, local_disk) and sends what it
 * observed since its last report with a Ping (PingRequest.read_latency).
 * crescentd checks each report in full (cr_read_latency_check, before
 * anything is applied) and adds it to its own sums, which /metrics serves as
 * crescent_segments_read_latency_seconds{tier=...} and /api/v1/stats as
 * "read_latency".  Single-threaded: the segments actor owns the sums. */
#ifndef CRESCENT_CORE_READ_LATENCY_H
#define CRESCENT_CORE_READ_LATENCY_H

#include <stddef.h>
#include <stdint.h>

#include "core/histogram.h"

/* memory, disk, local_disk: the order of CR_READ_TIER_* (crescent/client.h). */
#define CR_READ_LATENCY_TIERS 3u
extern const char *const cr_read_latency_tier_names[CR_READ_LATENCY_TIERS];

/* Reads at most one report may carry per tier: far above what a client does
 * between two pings, low enough that no sum of reports can wrap a counter. */
#define CR_READ_LATENCY_REPORT_MAX (1ull << 40)

struct cr_read_latency_sums {
    struct cr_histogram tiers[CR_READ_LATENCY_TIERS];
    uint64_t reports; /* report entries added */
};

/* Checks one report entry: a known tier, exactly CR_HISTOGRAM_BUCKETS
 * buckets (per bucket, not cumulative, the last +Inf) that add up to
 * `count`, and count at most CR_READ_LATENCY_REPORT_MAX.  Returns 0, or -1
 * with a sentence in why. */
int cr_read_latency_check(uint32_t tier, uint64_t count, const uint64_t *buckets,
                          size_t n_buckets, char *why, size_t why_len);

/* Adds a checked entry to the sums (counters saturate rather than wrap). */
void cr_read_latency_add(struct cr_read_latency_sums *s, uint32_t tier, uint64_t count,
                         uint64_t sum_ns, const uint64_t *buckets);

/* The upper bound (ns) of the bucket holding quantile q (0 < q <= 1) of h:
 * what Prometheus' histogram_quantile reports at best without
 * interpolation; UINT64_MAX when it falls in +Inf, 0 for an empty h. */
uint64_t cr_read_latency_quantile_ns(const struct cr_histogram *h, double q);

#endif
