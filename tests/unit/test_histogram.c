/* Unit tests for src/core/histogram.c: bucket edges, +Inf, count and sum. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/histogram.h"

static void test_bounds_increase(void **state) {
    (void)state;
    for (uint32_t i = 1; i < CR_HISTOGRAM_BOUNDS; i++)
        assert_true(cr_histogram_bounds_ns[i] > cr_histogram_bounds_ns[i - 1]);
}

static void test_bucket_edges(void **state) {
    (void)state;
    assert_int_equal(cr_histogram_bucket(0), 0);
    for (uint32_t i = 0; i < CR_HISTOGRAM_BOUNDS; i++) {
        /* A bound is inclusive (Prometheus' le), one past it is the next bucket. */
        assert_int_equal(cr_histogram_bucket(cr_histogram_bounds_ns[i]), i);
        assert_int_equal(cr_histogram_bucket(cr_histogram_bounds_ns[i] + 1), i + 1);
    }
    assert_int_equal(cr_histogram_bucket(UINT64_MAX), CR_HISTOGRAM_BOUNDS);
}

static void test_observe_counts_and_sums(void **state) {
    (void)state;
    struct cr_histogram h = {0};
    cr_histogram_observe(&h, 5000);        /* 5 us: first bucket */
    cr_histogram_observe(&h, 3000000);     /* 3 ms: le 5 ms */
    cr_histogram_observe(&h, 60000000000); /* 60 s: +Inf */
    assert_int_equal(h.count, 3);
    assert_int_equal(h.sum_ns, 5000 + 3000000 + 60000000000ull);
    assert_int_equal(h.buckets[0], 1);
    assert_int_equal(h.buckets[cr_histogram_bucket(5000000)], 1);
    assert_int_equal(h.buckets[CR_HISTOGRAM_BOUNDS], 1);
    uint64_t total = 0;
    for (uint32_t i = 0; i < CR_HISTOGRAM_BUCKETS; i++) total += h.buckets[i];
    assert_int_equal(total, h.count);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bounds_increase),
        cmocka_unit_test(test_bucket_edges),
        cmocka_unit_test(test_observe_counts_and_sums),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
