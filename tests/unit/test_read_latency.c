/* Unit tests for src/core/read_latency.c: the checks of a client's read
 * latency report, the sums, and the quantile the dashboard shows. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/read_latency.h"

static void fill(uint64_t *b, uint64_t first, uint64_t last) {
    memset(b, 0, CR_HISTOGRAM_BUCKETS * sizeof(*b));
    b[0] = first;
    b[CR_HISTOGRAM_BOUNDS] = last;
}

static void test_check_accepts_a_whole_report(void **state) {
    (void)state;
    uint64_t b[CR_HISTOGRAM_BUCKETS];
    char why[160] = "";
    fill(b, 3, 2);
    assert_int_equal(cr_read_latency_check(0, 5, b, CR_HISTOGRAM_BUCKETS, why, sizeof(why)), 0);
    assert_int_equal(cr_read_latency_check(2, 5, b, CR_HISTOGRAM_BUCKETS, why, sizeof(why)), 0);
    fill(b, 0, 0);
    assert_int_equal(cr_read_latency_check(1, 0, b, CR_HISTOGRAM_BUCKETS, why, sizeof(why)), 0);
}

static void test_check_refuses_bad_reports(void **state) {
    (void)state;
    uint64_t b[CR_HISTOGRAM_BUCKETS];
    char why[160] = "";
    fill(b, 3, 2);
    assert_int_equal(cr_read_latency_check(3, 5, b, CR_HISTOGRAM_BUCKETS, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "tier 3"));
    assert_int_equal(cr_read_latency_check(0, 5, b, CR_HISTOGRAM_BUCKETS - 1, why, sizeof(why)),
                     -1);
    assert_non_null(strstr(why, "buckets, want"));
    assert_int_equal(cr_read_latency_check(0, 4, b, CR_HISTOGRAM_BUCKETS, why, sizeof(why)), -1);
    assert_int_equal(cr_read_latency_check(0, 6, b, CR_HISTOGRAM_BUCKETS, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "add up to 5"));
    /* Buckets whose sum wraps to exactly count. */
    fill(b, UINT64_MAX, 6);
    assert_int_equal(cr_read_latency_check(0, 5, b, CR_HISTOGRAM_BUCKETS, why, sizeof(why)), -1);
    fill(b, CR_READ_LATENCY_REPORT_MAX + 1, 0);
    assert_int_equal(cr_read_latency_check(0, CR_READ_LATENCY_REPORT_MAX + 1, b,
                                           CR_HISTOGRAM_BUCKETS, why, sizeof(why)), -1);
}

static void test_add_sums_and_saturates(void **state) {
    (void)state;
    struct cr_read_latency_sums s;
    memset(&s, 0, sizeof(s));
    uint64_t b[CR_HISTOGRAM_BUCKETS];
    fill(b, 3, 2);
    cr_read_latency_add(&s, 1, 5, 1000, b);
    cr_read_latency_add(&s, 1, 5, 500, b);
    assert_int_equal(s.tiers[1].count, 10);
    assert_int_equal(s.tiers[1].sum_ns, 1500);
    assert_int_equal(s.tiers[1].buckets[0], 6);
    assert_int_equal(s.tiers[1].buckets[CR_HISTOGRAM_BOUNDS], 4);
    assert_int_equal(s.tiers[0].count, 0);
    assert_int_equal(s.reports, 2);
    cr_read_latency_add(&s, 1, 5, UINT64_MAX, b);
    assert_true(s.tiers[1].sum_ns == UINT64_MAX);
    assert_string_equal(cr_read_latency_tier_names[2], "local_disk");
}

static void test_quantile_is_a_bucket_bound(void **state) {
    (void)state;
    struct cr_histogram h;
    memset(&h, 0, sizeof(h));
    assert_int_equal(cr_read_latency_quantile_ns(&h, 0.5), 0);
    for (int i = 0; i < 9; i++) cr_histogram_observe(&h, 20000); /* le 25 us */
    cr_histogram_observe(&h, 3000000);                            /* le 5 ms */
    assert_int_equal(cr_read_latency_quantile_ns(&h, 0.5), 25000);
    assert_int_equal(cr_read_latency_quantile_ns(&h, 0.9), 25000);
    assert_int_equal(cr_read_latency_quantile_ns(&h, 0.99), 5000000);
    cr_histogram_observe(&h, 60000000000ull); /* +Inf */
    assert_true(cr_read_latency_quantile_ns(&h, 1.0) == UINT64_MAX);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_accepts_a_whole_report),
        cmocka_unit_test(test_check_refuses_bad_reports),
        cmocka_unit_test(test_add_sums_and_saturates),
        cmocka_unit_test(test_quantile_is_a_bucket_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
