/* A latency histogram with fixed bucket bounds, for Prometheus histograms.
 * Single-threaded: one owner observes; others read a copy. */
#ifndef CRESCENT_CORE_HISTOGRAM_H
#define CRESCENT_CORE_HISTOGRAM_H

#include <stdint.h>

/* Upper bounds in nanoseconds (10 us to 10 s, roughly 1-2.5-5 apart), plus +Inf. */
#define CR_HISTOGRAM_BOUNDS 19u
#define CR_HISTOGRAM_BUCKETS (CR_HISTOGRAM_BOUNDS + 1u)
extern const uint64_t cr_histogram_bounds_ns[CR_HISTOGRAM_BOUNDS];

struct cr_histogram {
    uint64_t count;
    uint64_t sum_ns;
    uint64_t buckets[CR_HISTOGRAM_BUCKETS]; /* per bucket, not cumulative; last is +Inf */
};

/* Counts one observation of `ns` in the first bucket whose bound is >= ns. */
void cr_histogram_observe(struct cr_histogram *h, uint64_t ns);

/* The bucket index cr_histogram_observe would count `ns` in. */
uint32_t cr_histogram_bucket(uint64_t ns);

#endif
