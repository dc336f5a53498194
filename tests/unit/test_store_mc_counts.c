/* Unit tests for the store's counts Mooncake's metrics name (src/core:
 * partial allocations, discarded puts parked and released, soft-pinned and
 * cached objects by the stats and by the census walk), injected clock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/store.h"
#include "core/store_internal.h" /* the census's counts, below the stats */
#include "crescent/error.h"

#define OBJ 4096ull

static const struct cr_uuid CLIENT_A = {{1}};
static const struct cr_uuid CLIENT_B = {{2}};

static cr_store *make_store(void) {
    cr_store_config cfg;
    cr_store_config_default(&cfg);
    cfg.max_objects = 1000;
    cfg.max_segments = 8;
    cr_store *s = NULL;
    assert_int_equal(cr_store_create(&cfg, NULL, &s), CR_OK);
    return s;
}

static void mount(cr_store *s, const char *name, uint64_t base, uint64_t size) {
    struct cr_store_segment_params p = {name, base, size, "10.0.0.1:1", "tcp"};
    assert_int_equal(cr_store_mount_segment(s, &CLIENT_A, &p, 0), CR_OK);
}

static int put_start(cr_store *s, const struct cr_uuid *c, const char *key, uint32_t replicas,
                     bool soft, uint64_t now) {
    struct cr_store_replica_list out;
    struct cr_store_put_params p = {.key = key, .key_len = (uint32_t)strlen(key),
                                    .value_length = OBJ, .replica_num = replicas,
                                    .with_soft_pin = soft};
    return cr_store_put_start(s, c, &p, now, &out);
}

static void put(cr_store *s, const char *key, bool soft, uint64_t now) {
    assert_int_equal(put_start(s, &CLIENT_A, key, 1, soft, now), CR_OK);
    assert_int_equal(cr_store_put_end(s, &CLIENT_A, NULL, key, (uint32_t)strlen(key), now), CR_OK);
}

static struct cr_store_stats stats(cr_store *s, uint64_t now) {
    struct cr_store_stats st;
    cr_store_get_stats(s, now, &st);
    return st;
}

/* Two replicas asked where only one segment has room: one placed, counted. */
static void test_partial_allocation(void **state) {
    (void)state;
    cr_store *s = make_store();
    mount(s, "big", 1ull << 32, 1 << 20);
    mount(s, "small", 2ull << 32, OBJ);
    assert_int_equal(put_start(s, &CLIENT_A, "both", 2, false, 0), CR_OK);
    assert_int_equal(stats(s, 0).put_partial_allocations, 0); /* both segments had room */
    assert_int_equal(put_start(s, &CLIENT_A, "one", 2, false, 0), CR_OK);
    assert_int_equal(stats(s, 0).put_partial_allocations, 1);
    cr_store_destroy(s);
}

/* A preempted put's replicas are parked (their bytes counted) and released
 * at the release timeout: one released put, however many replicas. */
static void test_discarded_put_released_once(void **state) {
    (void)state;
    cr_store *s = make_store();
    mount(s, "a", 1ull << 32, 1 << 20);
    mount(s, "b", 2ull << 32, 1 << 20);
    assert_int_equal(put_start(s, &CLIENT_A, "z", 2, false, 0), CR_OK);
    assert_int_equal(put_start(s, &CLIENT_B, "z", 1, false, 30000), CR_OK); /* preempts */
    struct cr_store_stats st = stats(s, 30000);
    assert_int_equal(st.zombies_preempted, 1);
    assert_int_equal(st.discarded_parked, 2);
    assert_int_equal(st.discarded_put_bytes, 2 * OBJ);
    assert_int_equal(st.discards_released, 0);
    assert_int_equal(cr_store_reclaim_discarded(s, 599999), 0);
    assert_int_equal(cr_store_reclaim_discarded(s, 600000), 2 * OBJ);
    st = stats(s, 600000);
    assert_int_equal(st.discards_released, 1);
    assert_int_equal(st.discarded_put_bytes, 0);
    cr_store_destroy(s);
}

/* Soft-pinned objects while their pin holds; cached objects complete ones
 * with a complete memory replica; the census walk counts as the stats do. */
static void test_soft_pins_and_cached_objects(void **state) {
    (void)state;
    cr_store *s = make_store();
    mount(s, "a", 1ull << 32, 1 << 20);
    put(s, "pinned", true, 0);
    put(s, "plain", false, 0);
    assert_int_equal(put_start(s, &CLIENT_A, "inflight", 1, true, 0), CR_OK);
    struct cr_store_stats st = stats(s, 1000);
    assert_int_equal(st.soft_pinned, 2); /* an in-flight put's pin counts too */
    assert_int_equal(st.mem_cached_objects, 2);
    assert_int_equal(st.file_cached_objects, 0);
    uint64_t ttl = cr_store_get_config(s)->default_kv_soft_pin_ttl_ms;
    assert_int_equal(stats(s, ttl).soft_pinned, 0);
    /* the census: nothing until a walk ends, then the walk's counts */
    assert_false(cr_store_lease_census_step(s, 1000, 1));
    assert_int_equal(s->soft_pin_census, 0);
    assert_true(cr_store_lease_census_step(s, 1000, 100));
    assert_int_equal(s->soft_pin_census, 2);
    assert_int_equal(s->mem_cached_census, 2);
    assert_int_equal(s->file_cached_census, 0);
    assert_true(cr_store_lease_census_step(s, ttl, 100)); /* a later walk: pins expired */
    assert_int_equal(s->soft_pin_census, 0);
    assert_int_equal(s->mem_cached_census, 2);
    cr_store_destroy(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_partial_allocation),
        cmocka_unit_test(test_discarded_put_released_once),
        cmocka_unit_test(test_soft_pins_and_cached_objects),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
