/* A log-linear latency histogram with a bounded relative error, in the
 * manner of HdrHistogram (no Debian package ships the C one).
 *
 * Values are unsigned 64-bit (nanoseconds in crescent-bench).  Values below
 * 2^CR_HIST_SUB_BITS have a bucket each (exact); above, every power of two
 * [2^e, 2^(e+1)) is split into 2^CR_HIST_SUB_BITS equal buckets of width
 * 2^(e - CR_HIST_SUB_BITS).  A value is reported as the highest value of its
 * bucket, so a reported value r for a recorded value v satisfies
 *     v <= r  and  r - v < v * 2^-CR_HIST_SUB_BITS   (0.78 % at 7 bits),
 * and never exceeds the largest value recorded.
 *
 * Fixed size (CR_HIST_BUCKETS counters, 58 KiB), no allocation: recording is
 * an index computation and one increment.  Not thread-safe: one histogram per
 * recording thread, merged afterwards with cr_latency_hist_merge. */
#ifndef CRESCENT_CORE_LATENCY_HIST_H
#define CRESCENT_CORE_LATENCY_HIST_H

#include <stdint.h>

#define CR_HIST_SUB_BITS 7u
#define CR_HIST_SUB_COUNT (1u << CR_HIST_SUB_BITS)
/* Exponents CR_HIST_SUB_BITS..63 each take CR_HIST_SUB_COUNT buckets, plus the
 * exact range below 2^CR_HIST_SUB_BITS. */
#define CR_HIST_BUCKETS ((64u - CR_HIST_SUB_BITS) * CR_HIST_SUB_COUNT + CR_HIST_SUB_COUNT)

struct cr_latency_hist {
    uint64_t total_count;
    uint64_t min_value;      /* UINT64_MAX while empty */
    uint64_t max_value;
    double sum;              /* for the mean; a double: sums of ns overflow nothing */
    uint64_t counts[CR_HIST_BUCKETS];
};

/* Empties `hist`. */
void cr_latency_hist_reset(struct cr_latency_hist *hist);

/* Records `count` occurrences of `value`. */
void cr_latency_hist_record_n(struct cr_latency_hist *hist, uint64_t value, uint64_t count);

static inline void cr_latency_hist_record(struct cr_latency_hist *hist, uint64_t value) {
    cr_latency_hist_record_n(hist, value, 1);
}

/* Adds every count of `from` into `into`. */
void cr_latency_hist_merge(struct cr_latency_hist *into, const struct cr_latency_hist *from);

/* The value at `percentile` (0..100): the highest value of the bucket that
 * holds the ceil(percentile/100 * total)-th smallest recorded value (at least
 * the first), capped at the largest value recorded.  0 when empty. */
uint64_t cr_latency_hist_value_at(const struct cr_latency_hist *hist, double percentile);

/* Mean of the recorded values (exact, from the sum); 0 when empty. */
double cr_latency_hist_mean(const struct cr_latency_hist *hist);

/* Bucket arithmetic, exposed for tests and for callers that walk the buckets:
 * the bucket of `value`, and the lowest / highest value a bucket holds. */
uint32_t cr_latency_hist_bucket_of(uint64_t value);
uint64_t cr_latency_hist_bucket_low(uint32_t bucket);
uint64_t cr_latency_hist_bucket_high(uint32_t bucket);

#endif
