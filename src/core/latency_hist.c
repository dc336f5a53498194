/* Log-linear latency histogram: see latency_hist.h for the error bound. */
#include "core/latency_hist.h"

#include <assert.h>
#include <math.h>
#include <string.h>

_Static_assert(CR_HIST_SUB_BITS >= 1 && CR_HIST_SUB_BITS <= 16, "sub-bucket bits out of range");

uint32_t cr_latency_hist_bucket_of(uint64_t value) {
    if (value < CR_HIST_SUB_COUNT) return (uint32_t)value;
    uint32_t exponent = 63u - (uint32_t)__builtin_clzll(value); /* >= CR_HIST_SUB_BITS */
    uint32_t shift = exponent - CR_HIST_SUB_BITS;
    /* value >> shift lies in [SUB_COUNT, 2 * SUB_COUNT): the top bits, leading 1 included. */
    uint64_t bucket = (uint64_t)shift * CR_HIST_SUB_COUNT + (value >> shift);
    assert(bucket < CR_HIST_BUCKETS);
    return (uint32_t)bucket;
}

uint64_t cr_latency_hist_bucket_low(uint32_t bucket) {
    assert(bucket < CR_HIST_BUCKETS);
    if (bucket < 2 * CR_HIST_SUB_COUNT) return bucket; /* exact, and the first exponent */
    uint32_t shift = bucket / CR_HIST_SUB_COUNT - 1;
    uint64_t top = bucket - (uint64_t)shift * CR_HIST_SUB_COUNT;
    return top << shift;
}

uint64_t cr_latency_hist_bucket_high(uint32_t bucket) {
    assert(bucket < CR_HIST_BUCKETS);
    if (bucket < 2 * CR_HIST_SUB_COUNT) return bucket;
    uint32_t shift = bucket / CR_HIST_SUB_COUNT - 1;
    return cr_latency_hist_bucket_low(bucket) + ((UINT64_C(1) << shift) - 1);
}

void cr_latency_hist_reset(struct cr_latency_hist *hist) {
    assert(hist != NULL);
    memset(hist, 0, sizeof(*hist));
    hist->min_value = UINT64_MAX;
}

void cr_latency_hist_record_n(struct cr_latency_hist *hist, uint64_t value, uint64_t count) {
    assert(hist != NULL);
    if (count == 0) return;
    hist->counts[cr_latency_hist_bucket_of(value)] += count;
    hist->total_count += count;
    hist->sum += (double)value * (double)count;
    if (value < hist->min_value) hist->min_value = value;
    if (value > hist->max_value) hist->max_value = value;
}

void cr_latency_hist_merge(struct cr_latency_hist *into, const struct cr_latency_hist *from) {
    assert(into != NULL && from != NULL);
    if (from->total_count == 0) return;
    for (uint32_t i = 0; i < CR_HIST_BUCKETS; i++) into->counts[i] += from->counts[i];
    into->total_count += from->total_count;
    into->sum += from->sum;
    if (from->min_value < into->min_value) into->min_value = from->min_value;
    if (from->max_value > into->max_value) into->max_value = from->max_value;
}

uint64_t cr_latency_hist_value_at(const struct cr_latency_hist *hist, double percentile) {
    assert(hist != NULL);
    assert(percentile >= 0.0 && percentile <= 100.0);
    if (hist->total_count == 0) return 0;
    double wanted = ceil(percentile / 100.0 * (double)hist->total_count);
    uint64_t rank = wanted < 1.0 ? 1 : (uint64_t)wanted;
    if (rank > hist->total_count) rank = hist->total_count;
    uint64_t seen = 0;
    for (uint32_t i = 0; i < CR_HIST_BUCKETS; i++) {
        seen += hist->counts[i];
        if (seen >= rank) {
            uint64_t high = cr_latency_hist_bucket_high(i);
            return high < hist->max_value ? high : hist->max_value;
        }
    }
    assert(0 && "counts add up to less than total_count");
    return hist->max_value;
}

double cr_latency_hist_mean(const struct cr_latency_hist *hist) {
    assert(hist != NULL);
    return hist->total_count == 0 ? 0.0 : hist->sum / (double)hist->total_count;
}
