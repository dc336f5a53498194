/* Fixed-bound latency histogram (see histogram.h). */
#include "core/histogram.h"

#include <assert.h>
#include <stddef.h>

#define US 1000ull
#define MS 1000000ull
#define S 1000000000ull

const uint64_t cr_histogram_bounds_ns[CR_HISTOGRAM_BOUNDS] = {
    10 * US,  25 * US,  50 * US,  100 * US, 250 * US, 500 * US, 1 * MS,
    2500 * US, 5 * MS,  10 * MS,  25 * MS,  50 * MS,  100 * MS, 250 * MS,
    500 * MS, 1 * S,    2500 * MS, 5 * S,   10 * S,
};

uint32_t cr_histogram_bucket(uint64_t ns) {
    /* Most observations are fast: a forward scan stops early. */
    uint32_t i = 0;
    while (i < CR_HISTOGRAM_BOUNDS && ns > cr_histogram_bounds_ns[i]) i++;
    return i;
}

void cr_histogram_observe(struct cr_histogram *h, uint64_t ns) {
    assert(h != NULL);
    h->count++;
    h->sum_ns += ns;
    h->buckets[cr_histogram_bucket(ns)]++;
}
