/* Read latency per tier reported by clients (see read_latency.h). */
#include "core/read_latency.h"

#include <assert.h>
#include <stdio.h>

const char *const cr_read_latency_tier_names[CR_READ_LATENCY_TIERS] = {"memory", "disk",
                                                                       "local_disk"};

int cr_read_latency_check(uint32_t tier, uint64_t count, const uint64_t *buckets,
                          size_t n_buckets, char *why, size_t why_len) {
    assert(why != NULL && why_len > 0);
    if (tier >= CR_READ_LATENCY_TIERS) {
        snprintf(why, why_len, "read_latency: tier %u, want 0 (memory), 1 (disk) or 2 "
                 "(local_disk)", tier);
        return -1;
    }
    if (n_buckets != CR_HISTOGRAM_BUCKETS || buckets == NULL) {
        snprintf(why, why_len, "read_latency: %zu buckets, want %u (the bounds 10 us .. 10 s "
                 "and +Inf)", n_buckets, CR_HISTOGRAM_BUCKETS);
        return -1;
    }
    if (count > CR_READ_LATENCY_REPORT_MAX) {
        snprintf(why, why_len, "read_latency: count %llu, more than one report may carry",
                 (unsigned long long)count);
        return -1;
    }
    uint64_t total = 0;
    for (size_t i = 0; i < n_buckets; i++) {
        if (buckets[i] > count - total) { /* also catches a sum that would wrap */
            snprintf(why, why_len, "read_latency: buckets add up to more than count %llu",
                     (unsigned long long)count);
            return -1;
        }
        total += buckets[i];
    }
    if (total != count) {
        snprintf(why, why_len, "read_latency: buckets add up to %llu, count is %llu",
                 (unsigned long long)total, (unsigned long long)count);
        return -1;
    }
    return 0;
}

static uint64_t add_sat(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

void cr_read_latency_add(struct cr_read_latency_sums *s, uint32_t tier, uint64_t count,
                         uint64_t sum_ns, const uint64_t *buckets) {
    assert(s != NULL && tier < CR_READ_LATENCY_TIERS && buckets != NULL);
    struct cr_histogram *h = &s->tiers[tier];
    h->count = add_sat(h->count, count);
    h->sum_ns = add_sat(h->sum_ns, sum_ns);
    for (uint32_t i = 0; i < CR_HISTOGRAM_BUCKETS; i++)
        h->buckets[i] = add_sat(h->buckets[i], buckets[i]);
    s->reports++;
}

uint64_t cr_read_latency_quantile_ns(const struct cr_histogram *h, double q) {
    assert(h != NULL && q > 0 && q <= 1);
    if (h->count == 0) return 0;
    double rank = q * (double)h->count;
    uint64_t cumulative = 0;
    for (uint32_t i = 0; i < CR_HISTOGRAM_BOUNDS; i++) {
        cumulative += h->buckets[i];
        if ((double)cumulative >= rank) return cr_histogram_bounds_ns[i];
    }
    return UINT64_MAX;
}
