/* Unit tests for the finish's claims on two threads (durable/finish.h):
 * the store is the one a one-thread finish makes (TSan, under `zig build
 * tsan`, checks the two threads for races), the split balances the claim
 * counts, and one thread does the same. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "durable/finish.h"
#include "restore_finish_fixture.h" /* the stores compared */

static void same_as_one(uint64_t seed, uint32_t objects, uint32_t clash, uint32_t threads) {
    cr_store *one = fx_restored(seed, objects, clash);
    struct cr_store_restore_dropped d1;
    assert_int_equal(cr_store_restore_finish(one, &d1), CR_OK);
    cr_store *s = fx_restored(seed, objects, clash);
    struct cr_store_restore_dropped d;
    struct cr_durable_finish_times t;
    assert_int_equal(cr_durable_finish(s, threads, &d, &t), CR_OK);
    assert_int_equal(t.threads, threads);
    assert_false(cr_store_restore_bulk(s));
    assert_int_equal(d.replicas, d1.replicas);
    assert_int_equal(d.objects, d1.objects);
    assert_true(d.replicas > 0);
    fx_assert_same(one, s);
    fx_assert_no_overlap(s);
    cr_store_destroy(s);
    cr_store_destroy(one);
}

static void test_two_threads(void **unused) {
    (void)unused;
    same_as_one(0x9e3779b97f4a7c15ull, 4000, 0, 2);
    same_as_one(0x1234567ull, 4000, 5, 2);
}

static void test_one_thread(void **unused) {
    (void)unused;
    same_as_one(0x1234567ull, 2000, 5, 1);
}

/* The split: two ranges whose claim counts differ by at most one
 * segment's, whatever the counts. */
static void test_split_balances(void **unused) {
    (void)unused;
    cr_store *s = fx_restored(7, 3000, 0);
    struct cr_store_restore_plan *plan = NULL;
    assert_int_equal(cr_store_restore_finish_prepare(s, &plan), CR_OK);
    uint64_t c[FX_SEGMENTS], total = 0, most = 0;
    for (uint32_t g = 0; g < FX_SEGMENTS; g++) {
        c[g] = cr_store_restore_plan_claims(plan, g);
        total += c[g];
        if (c[g] > most) most = c[g];
    }
    uint32_t k = cr_durable_finish_split(plan);
    assert_true(k > 0 && k < FX_SEGMENTS);
    uint64_t lo = 0;
    for (uint32_t g = 0; g < k; g++) lo += c[g];
    uint64_t hi = total - lo, diff = lo > hi ? lo - hi : hi - lo;
    assert_true(diff <= most);
    /* And no other cut is closer to half. */
    uint64_t prefix = 0;
    for (uint32_t j = 0; j <= FX_SEGMENTS; j++) {
        uint64_t other = prefix > total - prefix ? 2 * prefix - total : total - 2 * prefix;
        assert_true(diff <= other);
        if (j < FX_SEGMENTS) prefix += c[j];
    }
    struct cr_store_restore_part parts[1];
    cr_store_restore_finish_claims(s, plan, 0, FX_SEGMENTS, &parts[0]);
    struct cr_store_restore_dropped d;
    cr_store_restore_finish_end(s, plan, parts, 1, &d);
    cr_store_destroy(s);
}

/* A restore whose claims are all on one segment: one range is empty, the
 * other thread claims nothing, and the store is still whole. */
static void test_one_segment(void **unused) {
    (void)unused;
    cr_store *s = fx_store();
    for (uint32_t i = 0; i < 100; i++)
        fx_restore(s, "t", i, (uint32_t[]){2}, (uint64_t[]){(i * 37u) % 100u}, 1, 0);
    struct cr_store_restore_dropped d;
    struct cr_durable_finish_times t;
    assert_int_equal(cr_durable_finish(s, 2, &d, &t), CR_OK);
    assert_int_equal(d.replicas, 0);
    assert_int_equal(s->segments[2].used_bytes, 100 * FX_OBJ);
    assert_int_equal(s->used_bytes, 100 * FX_OBJ);
    fx_assert_no_overlap(s);
    cr_store_destroy(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_threads),
        cmocka_unit_test(test_one_thread),
        cmocka_unit_test(test_split_balances),
        cmocka_unit_test(test_one_segment),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
