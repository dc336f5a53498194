/* Unit tests for the finish of a bulk restore in phases (store_restore.h):
 * claims split into 2 or 3 segment ranges (some empty) give the same store
 * as the one-call finish (replicas, nodes, used bytes, counts, charges),
 * the same drops when ranges overlap (objects on segments in different
 * ranges among them), and leave no free range over a restored replica. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "restore_finish_fixture.h" /* the stores compared */

/* Finishes s in phases, the parts' ranges bounded by cuts[0..n+1)
 * (cuts[0] = 0, cuts[n] = the plan's segments). */
static void finish_split(cr_store *s, const uint32_t *cuts, uint32_t n,
                         struct cr_store_restore_dropped *d) {
    struct cr_store_restore_plan *plan = NULL;
    assert_int_equal(cr_store_restore_finish_prepare(s, &plan), CR_OK);
    assert_non_null(plan);
    assert_int_equal(cr_store_restore_plan_segments(plan), FX_SEGMENTS);
    assert_int_equal(cuts[n], FX_SEGMENTS);
    struct cr_store_restore_part parts[4];
    /* Last range first: the order of the calls must not matter. */
    for (uint32_t k = n; k-- > 0;)
        cr_store_restore_finish_claims(s, plan, cuts[k], cuts[k + 1], &parts[k]);
    assert_true(cr_store_restore_bulk(s));
    cr_store_restore_finish_end(s, plan, parts, n, d);
    assert_false(cr_store_restore_bulk(s));
}

/* The one-call finish and each split, on the same restore. */
static void compare(uint64_t seed, uint32_t objects, uint32_t clash, bool want_drops) {
    static const uint32_t cuts[][4] = {
        {0, 4}, {0, 2, 4}, {0, 1, 4}, {0, 3, 4}, {0, 0, 4}, {0, 4, 4}, {0, 1, 3, 4}, {0, 2, 2, 4}};
    static const uint32_t ranges[] = {1, 2, 2, 2, 2, 2, 3, 3};
    cr_store *one = fx_restored(seed, objects, clash);
    struct cr_store_restore_dropped d1;
    assert_int_equal(cr_store_restore_finish(one, &d1), CR_OK);
    if (want_drops) {
        assert_true(d1.replicas >= 5); /* the made-to-lose ones at least */
        assert_true(d1.objects >= 1);
    }
    fx_assert_no_overlap(one);
    for (size_t c = 0; c < sizeof(ranges) / sizeof(ranges[0]); c++) {
        cr_store *s = fx_restored(seed, objects, clash);
        struct cr_store_restore_dropped d;
        finish_split(s, cuts[c], ranges[c], &d);
        assert_int_equal(d.replicas, d1.replicas);
        assert_int_equal(d.objects, d1.objects);
        fx_assert_same(one, s);
        fx_assert_no_overlap(s);
        cr_store_destroy(s);
    }
    cr_store_destroy(one);
}

static void test_split_same_as_one(void **unused) {
    (void)unused;
    compare(0x9e3779b97f4a7c15ull, 3000, 0, true); /* drops: the made-to-lose ones */
}

static void test_overlaps_same_drops(void **unused) {
    (void)unused;
    compare(0x1234567ull, 3000, 5, true);
    compare(0xfeedbeefull, 600, 2, true);
}

/* The parts count what they did: the claims, bytes and failures sum to
 * the plan's; a failure is not applied before the end (the replica is
 * still in its object, unclaimed, and counted). */
static void test_parts_count(void **unused) {
    (void)unused;
    cr_store *s = fx_restored(42, 1000, 4);
    uint64_t replicas = s->replica_count;
    struct cr_store_restore_plan *plan = NULL;
    assert_int_equal(cr_store_restore_finish_prepare(s, &plan), CR_OK);
    uint64_t planned = 0;
    for (uint32_t g = 0; g < FX_SEGMENTS; g++) planned += cr_store_restore_plan_claims(plan, g);
    assert_int_equal(planned, replicas);
    struct cr_store_restore_part parts[2];
    cr_store_restore_finish_claims(s, plan, 0, 2, &parts[0]);
    cr_store_restore_finish_claims(s, plan, 2, 4, &parts[1]);
    assert_int_equal(parts[0].seg_lo, 0);
    assert_int_equal(parts[1].seg_hi, 4);
    uint64_t claimed = parts[0].claimed + parts[1].claimed;
    uint64_t failed = parts[0].failed + parts[1].failed;
    assert_int_equal(claimed + failed, planned);
    assert_true(failed > 0);
    assert_int_equal(s->replica_count, replicas); /* nothing dropped yet */
    assert_int_equal(s->used_bytes, 0);           /* nor added */
    assert_int_equal(s->segments[0].used_bytes + s->segments[1].used_bytes, parts[0].bytes);
    assert_int_equal(s->segments[2].used_bytes + s->segments[3].used_bytes, parts[1].bytes);
    struct cr_store_restore_dropped d;
    cr_store_restore_finish_end(s, plan, parts, 2, &d);
    assert_int_equal(d.replicas, failed);
    assert_int_equal(s->replica_count, replicas - failed);
    assert_int_equal(s->used_bytes, parts[0].bytes + parts[1].bytes);
    cr_store_destroy(s);
}

/* An empty restore: the phases run with no claim. */
static void test_empty(void **unused) {
    (void)unused;
    cr_store *s = fx_store();
    struct cr_store_restore_plan *plan = NULL;
    assert_int_equal(cr_store_restore_finish_prepare(s, &plan), CR_OK);
    struct cr_store_restore_part parts[2];
    cr_store_restore_finish_claims(s, plan, 0, 1, &parts[0]);
    cr_store_restore_finish_claims(s, plan, 1, 4, &parts[1]);
    struct cr_store_restore_dropped d;
    cr_store_restore_finish_end(s, plan, parts, 2, &d);
    assert_int_equal(d.replicas + d.objects, 0);
    assert_int_equal(s->used_bytes, 0);
    assert_false(cr_store_restore_bulk(s));
    cr_store_destroy(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_same_as_one),
        cmocka_unit_test(test_overlaps_same_drops),
        cmocka_unit_test(test_parts_count),
        cmocka_unit_test(test_empty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
