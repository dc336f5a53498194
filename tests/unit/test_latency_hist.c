/* Unit tests for src/core/latency_hist.c: bucket arithmetic at every
 * boundary, the relative-error bound of reported values against exact
 * percentiles of random samples, merging, and the empty histogram. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/latency_hist.h"

#define SAMPLES 200000u

/* The documented bound, in integers (a double rounds 2^56 - 1 up to 2^56):
 * exact <= reported and reported - exact < exact * 2^-SUB_BITS; below
 * 2^SUB_BITS that means equal. */
static bool within_bound(uint64_t exact, uint64_t reported) {
    if (reported < exact) return false;
    return reported == exact || reported - exact < (exact >> CR_HIST_SUB_BITS);
}

/* xorshift64*: deterministic, so a failure reproduces. */
static uint64_t rng_next(uint64_t *state) {
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * UINT64_C(2685821657736338717);
}

/* Log-uniform over [1, 2^bits): latencies span many orders of magnitude. */
static uint64_t log_uniform(uint64_t *state, unsigned bits) {
    unsigned exponent = (unsigned)(rng_next(state) % bits);
    uint64_t mantissa = rng_next(state);
    return (UINT64_C(1) << exponent) | (exponent == 0 ? 0 : mantissa >> (64 - exponent));
}

static struct cr_latency_hist *make(void) {
    struct cr_latency_hist *hist = malloc(sizeof(*hist));
    assert_non_null(hist);
    cr_latency_hist_reset(hist);
    return hist;
}

static int compare_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Every bucket's range contains exactly the values that map to it, ranges are
 * contiguous, and each range is narrower than bound * its lowest value. */
static void test_buckets_contiguous_and_narrow(void **state) {
    (void)state;
    assert_int_equal(cr_latency_hist_bucket_low(0), 0);
    for (uint32_t b = 0; b < CR_HIST_BUCKETS; b++) {
        uint64_t low = cr_latency_hist_bucket_low(b), high = cr_latency_hist_bucket_high(b);
        assert_true(low <= high);
        assert_int_equal(cr_latency_hist_bucket_of(low), b);
        assert_int_equal(cr_latency_hist_bucket_of(high), b);
        if (b + 1 < CR_HIST_BUCKETS) assert_int_equal(cr_latency_hist_bucket_low(b + 1), high + 1);
        assert_true(within_bound(low, high));
    }
    assert_int_equal(cr_latency_hist_bucket_high(CR_HIST_BUCKETS - 1), UINT64_MAX);
    assert_int_equal(cr_latency_hist_bucket_of(UINT64_MAX), CR_HIST_BUCKETS - 1);
}

/* Exact below 2^SUB_BITS; at each power of two the bucket starts anew. */
static void test_small_values_exact(void **state) {
    (void)state;
    for (uint64_t v = 0; v < 2 * CR_HIST_SUB_COUNT; v++) {
        struct cr_latency_hist *hist = make();
        cr_latency_hist_record(hist, v);
        cr_latency_hist_record(hist, UINT64_C(1) << 40); /* max far above: no capping */
        assert_int_equal(cr_latency_hist_value_at(hist, 50.0), v);
        free(hist);
    }
    for (unsigned e = CR_HIST_SUB_BITS; e < 64; e++) {
        uint64_t p = UINT64_C(1) << e;
        assert_int_equal(cr_latency_hist_bucket_low(cr_latency_hist_bucket_of(p)), p);
        assert_int_equal(cr_latency_hist_bucket_high(cr_latency_hist_bucket_of(p - 1)), p - 1);
    }
}

/* The documented bound: for every percentile, exact <= reported and
 * reported - exact < exact * 2^-SUB_BITS, against the sorted samples. */
static void test_percentiles_within_bound(void **state) {
    (void)state;
    uint64_t rng = 0x9e3779b97f4a7c15u;
    uint64_t *samples = malloc(SAMPLES * sizeof(uint64_t));
    assert_non_null(samples);
    struct cr_latency_hist *hist = make();
    for (uint32_t i = 0; i < SAMPLES; i++) {
        samples[i] = log_uniform(&rng, 40);
        cr_latency_hist_record(hist, samples[i]);
    }
    qsort(samples, SAMPLES, sizeof(uint64_t), compare_u64);
    assert_int_equal(hist->total_count, SAMPLES);
    assert_int_equal(hist->min_value, samples[0]);
    assert_int_equal(hist->max_value, samples[SAMPLES - 1]);
    static const double points[] = {0.0, 1.0, 10.0, 25.0, 50.0, 75.0, 90.0, 99.0,
                                    99.9, 99.99, 99.999, 100.0};
    for (size_t i = 0; i < sizeof(points) / sizeof(points[0]); i++) {
        double rank = (double)SAMPLES * points[i] / 100.0;
        size_t index = rank < 1.0 ? 0 : (size_t)(rank + 0.999999) - 1; /* ceil(rank) - 1 */
        uint64_t exact = samples[index], reported = cr_latency_hist_value_at(hist, points[i]);
        assert_true(reported >= exact);
        assert_true(within_bound(exact, reported));
    }
    assert_int_equal(cr_latency_hist_value_at(hist, 100.0), samples[SAMPLES - 1]);
    free(hist);
    free(samples);
}

/* Every single value, recorded alone, is reported within the bound and
 * never above itself once capped by the maximum. */
static void test_single_values_within_bound(void **state) {
    (void)state;
    uint64_t rng = 42;
    struct cr_latency_hist *hist = make();
    for (int i = 0; i < 20000; i++) {
        uint64_t v = log_uniform(&rng, 63);
        uint64_t high = cr_latency_hist_bucket_high(cr_latency_hist_bucket_of(v));
        assert_true(high >= v);
        assert_true(within_bound(v, high));
        cr_latency_hist_reset(hist);
        cr_latency_hist_record(hist, v);
        assert_int_equal(cr_latency_hist_value_at(hist, 99.0), v); /* capped at max */
    }
    free(hist);
}

static void test_merge_equals_single(void **state) {
    (void)state;
    uint64_t rng = 7;
    struct cr_latency_hist *a = make(), *b = make(), *all = make();
    for (int i = 0; i < 50000; i++) {
        uint64_t v = log_uniform(&rng, 30);
        cr_latency_hist_record(i % 3 == 0 ? a : b, v);
        cr_latency_hist_record(all, v);
    }
    cr_latency_hist_record_n(b, 5, 0); /* a zero count changes nothing */
    cr_latency_hist_merge(a, b);
    assert_memory_equal(a, all, sizeof(*a));
    free(a);
    free(b);
    free(all);
}

static void test_empty_and_mean(void **state) {
    (void)state;
    struct cr_latency_hist *hist = make();
    assert_int_equal(cr_latency_hist_value_at(hist, 50.0), 0);
    assert_true(cr_latency_hist_mean(hist) == 0.0);
    cr_latency_hist_record_n(hist, 1000, 3);
    cr_latency_hist_record(hist, 3000);
    assert_true(cr_latency_hist_mean(hist) == 1500.0);
    assert_int_equal(hist->min_value, 1000);
    assert_int_equal(cr_latency_hist_value_at(hist, 75.0), cr_latency_hist_bucket_high(
                                                               cr_latency_hist_bucket_of(1000)));
    assert_int_equal(cr_latency_hist_value_at(hist, 76.0), 3000);
    free(hist);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buckets_contiguous_and_narrow),
        cmocka_unit_test(test_small_values_exact),
        cmocka_unit_test(test_percentiles_within_bound),
        cmocka_unit_test(test_single_values_within_bound),
        cmocka_unit_test(test_merge_equals_single),
        cmocka_unit_test(test_empty_and_mean),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
