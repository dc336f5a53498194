/* Unit tests of the store's object capacity (src/core/store*.c): the key
 * index and the segments' allocation tables grow with use, eviction runs on
 * counts as well as bytes, a PutStart at a full object table makes its own
 * room, and a refusal names the flag to raise.  Injected clock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/store.h"
#include "crescent/error.h"

#define OBJ 4096ull
#define GIB (1ull << 30)

static const struct cr_uuid CLIENT = {{7}};

struct counter {
    uint32_t stores;
    uint32_t gone; /* UPDATE with no replica: removed or evicted */
};

static void count_event(void *ctx, const struct cr_store_change *ev) {
    struct counter *c = ctx;
    if (ev->kind == CR_STORE_CHANGE_STORE) c->stores++;
    if (ev->kind == CR_STORE_CHANGE_UPDATE && ev->replica_count == 0) c->gone++;
}

static cr_store *make(uint32_t max_objects, uint32_t max_allocations, struct counter *events) {
    cr_store_config cfg;
    cr_store_config_default(&cfg);
    cfg.max_objects = max_objects;
    cfg.max_allocations_per_segment = max_allocations;
    struct cr_store_event_sink sink = {count_event, events};
    cr_store *s = NULL;
    assert_int_equal(cr_store_create(&cfg, events ? &sink : NULL, &s), CR_OK);
    struct cr_store_segment_params p = {"seg0", 1ull << 40, 64 * GIB, "10.0.0.1:1", "tcp"};
    assert_int_equal(cr_store_mount_segment(s, &CLIENT, &p, 0), CR_OK);
    return s;
}

static int put_at(cr_store *s, uint32_t i, bool soft, uint64_t now) {
    char key[32];
    int len = snprintf(key, sizeof(key), "blk/%u", i);
    struct cr_store_replica_list out;
    struct cr_store_put_params p = {.key = key, .key_len = (uint32_t)len, .value_length = OBJ,
                                    .replica_num = 1, .with_soft_pin = soft};
    int rc = cr_store_put_start(s, &CLIENT, &p, now, &out);
    if (rc != CR_OK) return rc;
    return cr_store_put_end(s, &CLIENT, NULL, key, (uint32_t)len, now);
}

static bool has(cr_store *s, uint32_t i, uint64_t now) {
    char key[32];
    int len = snprintf(key, sizeof(key), "blk/%u", i);
    struct cr_store_object_view v;
    return cr_store_object_find(s, NULL, key, (uint32_t)len, now, &v) == CR_OK;
}

static struct cr_store_stats stats(cr_store *s, uint64_t now) {
    struct cr_store_stats st;
    cr_store_get_stats(s, now, &st);
    return st;
}

/* The key index starts small and doubles; every key stays findable through
 * the doublings, and removals (backward shifts) keep working after them. */
static void test_index_grows(void **state) {
    (void)state;
    cr_store *s = make(1u << 24, 1u << 24, NULL);
    assert_true(stats(s, 0).index_slots <= (1u << 14)); /* not sized for 16 M up front */
    const uint32_t n = 100000;
    for (uint32_t i = 0; i < n; i++) assert_int_equal(put_at(s, i, false, i), CR_OK);
    struct cr_store_stats st = stats(s, n);
    assert_int_equal(st.object_count, n);
    assert_true(st.index_slots >= 2 * n && st.index_slots <= 4 * n);
    for (uint32_t i = 0; i < n; i += 2) {
        char key[32];
        int len = snprintf(key, sizeof(key), "blk/%u", i);
        assert_int_equal(cr_store_remove(s, NULL, key, (uint32_t)len, false, n), CR_OK);
    }
    for (uint32_t i = 0; i < n; i++) assert_int_equal(has(s, i, n), i % 2 == 1);
    cr_store_destroy(s);
}

/* One segment holds more allocations than the allocator's first storage,
 * and refuses one past max_allocations_per_segment, naming the flag. */
static void test_segment_allocations_grow_to_the_limit(void **state) {
    (void)state;
    cr_store *s = make(1u << 20, 5000, NULL);
    for (uint32_t i = 0; i < 5000; i++) assert_int_equal(put_at(s, i, false, 0), CR_OK);
    struct cr_store_segment_view v;
    assert_int_equal(cr_store_segment_find(s, "seg0", &v), CR_OK);
    assert_int_equal(v.allocation_count, 5000);
    assert_int_equal(put_at(s, 5000, false, 0), CR_ERR_NO_AVAILABLE_HANDLE);
    assert_non_null(strstr(cr_store_last_error(s), "--max-allocations-per-segment"));
    struct cr_store_usage u;
    cr_store_usage(s, &u);
    assert_true(u.ratio < 0.01);           /* the bytes are nearly all free */
    assert_true(u.count_ratio >= 1.0);     /* the busiest segment's table is full */
    assert_true(cr_evict_objects_to_free(cr_store_get_config(s), &u) >= 250);
    cr_store_destroy(s);
}

/* The count watermark: objects near max_objects ask for a pass although the
 * bytes are far below theirs; the pass evicts the oldest, soft-pinned last,
 * leased and hard-pinned never, and publishes each eviction. */
static void test_eviction_by_count(void **state) {
    (void)state;
    struct counter events = {0};
    cr_store *s = make(1000, 1u << 20, &events);
    for (uint32_t i = 0; i < 100; i++) assert_int_equal(put_at(s, i, true, i), CR_OK);
    for (uint32_t i = 100; i < 960; i++) assert_int_equal(put_at(s, i, false, i), CR_OK);
    uint64_t now = 1000;
    for (uint32_t i = 100; i < 110; i++) { /* the ten oldest plain ones: leased */
        char key[32];
        int len = snprintf(key, sizeof(key), "blk/%u", i);
        assert_int_equal(cr_store_exist_key(s, NULL, key, (uint32_t)len, now), CR_OK);
    }
    char pinned[] = "blk/110";
    assert_int_equal(cr_store_set_hard_pin(s, NULL, pinned, sizeof(pinned) - 1, true), CR_OK);
    struct cr_store_usage u;
    cr_store_usage(s, &u);
    const cr_store_config *cfg = cr_store_get_config(s);
    assert_int_equal(cr_evict_bytes_to_free(cfg, &u, false), 0);
    assert_true(u.count_ratio >= 0.95);
    uint64_t want = cr_evict_objects_to_free(cfg, &u);
    assert_true(want >= 48 && want <= 960);
    uint64_t rng = 99;
    cr_store_evict_pass(s, now, &rng, 0, want);
    struct cr_store_stats st = stats(s, now);
    assert_true(st.evictions >= want);
    assert_int_equal(events.gone, st.evictions);
    cr_store_usage(s, &u);
    assert_int_equal(cr_evict_objects_to_free(cfg, &u), 0); /* below the watermark again */
    for (uint32_t i = 100; i <= 110; i++) assert_true(has(s, i, now)); /* leased, pinned */
    for (uint32_t i = 0; i < 100; i++) assert_true(has(s, i, now));   /* soft-pinned: last */
    uint32_t young_gone = 0;
    for (uint32_t i = 860; i < 960; i++) young_gone += !has(s, i, now);
    assert_true(young_gone < 10); /* approximately LRU: the youngest mostly stay */
    cr_store_destroy(s);
}

/* Without a pass, a PutStart at a full table evicts the oldest of a sample
 * itself: puts keep succeeding under churn, each eviction published. */
static void test_put_at_full_table_makes_room(void **state) {
    (void)state;
    struct counter events = {0};
    cr_store *s = make(200, 1u << 20, &events);
    for (uint32_t i = 0; i < 5000; i++) assert_int_equal(put_at(s, i, false, i), CR_OK);
    struct cr_store_stats st = stats(s, 5000);
    assert_int_equal(st.object_count, 200);
    assert_int_equal(st.room_evictions, 4800);
    assert_int_equal(st.evictions, 4800);
    assert_int_equal(events.stores, 5000);
    assert_int_equal(events.gone, 4800);
    for (uint32_t i = 4990; i < 5000; i++) assert_true(has(s, i, 5000)); /* the newest stay */
    cr_store_destroy(s);
}

/* Soft-pinned objects go only when the setting allows it, and then last. */
static void test_room_soft_pinned_last(void **state) {
    (void)state;
    cr_store_config cfg;
    cr_store_config_default(&cfg);
    cfg.max_objects = 50;
    cfg.allow_evict_soft_pinned_objects = false;
    cr_store *s = NULL;
    assert_int_equal(cr_store_create(&cfg, NULL, &s), CR_OK);
    struct cr_store_segment_params p = {"seg0", 1ull << 40, GIB, "10.0.0.1:1", "tcp"};
    assert_int_equal(cr_store_mount_segment(s, &CLIENT, &p, 0), CR_OK);
    for (uint32_t i = 0; i < 50; i++) assert_int_equal(put_at(s, i, true, i), CR_OK);
    assert_int_equal(put_at(s, 50, false, 100), CR_ERR_NOMEM);
    assert_non_null(strstr(cr_store_last_error(s), "--max-objects"));
    for (uint32_t i = 0; i < 50; i++) assert_true(has(s, i, 100));
    cr_store_destroy(s);
}

/* Truly full: every object leased, hard-pinned or in flight.  The refusal
 * says so and names the flag; nothing was evicted; a lease running out
 * makes room again. */
static void test_refusal_when_truly_full(void **state) {
    (void)state;
    struct counter events = {0};
    cr_store *s = make(3, 1u << 20, &events);
    assert_int_equal(put_at(s, 0, false, 0), CR_OK);
    assert_int_equal(put_at(s, 1, false, 0), CR_OK);
    struct cr_store_replica_list out;
    struct cr_store_put_params inflight = {.key = "open", .key_len = 4, .value_length = OBJ,
                                           .replica_num = 1};
    assert_int_equal(cr_store_put_start(s, &CLIENT, &inflight, 0, &out), CR_OK);
    assert_int_equal(cr_store_exist_key(s, NULL, "blk/0", 5, 10), CR_OK); /* leased */
    assert_int_equal(cr_store_set_hard_pin(s, NULL, "blk/1", 5, true), CR_OK);
    assert_int_equal(put_at(s, 2, false, 20), CR_ERR_NOMEM);
    const char *why = cr_store_last_error(s);
    assert_non_null(strstr(why, "object table full"));
    assert_non_null(strstr(why, "--max-objects"));
    assert_int_equal(stats(s, 20).evictions, 0);
    assert_int_equal(events.gone, 0);
    uint64_t after_lease = 10 + cr_store_get_config(s)->default_kv_lease_ttl_ms;
    assert_int_equal(put_at(s, 2, false, after_lease), CR_OK);
    assert_false(has(s, 0, after_lease)); /* the lease ran out: it made the room */
    assert_int_equal(events.gone, 1);
    cr_store_destroy(s);
}

static void test_config_bounds(void **state) {
    (void)state;
    cr_store_config cfg;
    char msg[128];
    cr_store_config_default(&cfg);
    assert_true(cfg.max_objects >= (1u << 24));
    assert_true(cfg.max_allocations_per_segment >= (1u << 24));
    cfg.max_objects = 1u << 30;
    assert_int_equal(cr_store_config_validate(&cfg, msg, sizeof(msg)), CR_OK);
    cfg.max_objects = (1u << 30) + 1;
    assert_int_equal(cr_store_config_validate(&cfg, msg, sizeof(msg)), CR_ERR_INVALID_PARAMS);
    assert_non_null(strstr(msg, "max_objects"));
    /* The usage of an empty store: no count pressure. */
    cr_store *s = make(1000, 1000, NULL);
    struct cr_store_usage u;
    cr_store_usage(s, &u);
    assert_int_equal(u.objects, 0);
    assert_int_equal(u.max_objects, 1000);
    assert_true(u.count_ratio == 0.0);
    assert_int_equal(cr_evict_objects_to_free(cr_store_get_config(s), &u), 0);
    cr_store_destroy(s);
}

static void test_choose_by_count(void **state) {
    (void)state;
    struct cr_evict_candidate pool[] = {
        {1, 0, 100, 50, false}, {2, 0, 100, 10, true}, {3, 0, 100, 30, false},
        {4, 0, 100, 20, false}, {5, 0, 100, 5, true},
    };
    /* objects only: the three oldest plain ones, then soft-pinned */
    assert_int_equal(cr_evict_choose(pool, 5, 0, 2, true), 2);
    assert_int_equal(pool[0].object_id, 4);
    assert_int_equal(pool[1].object_id, 3);
    assert_int_equal(cr_evict_choose(pool, 5, 0, 4, true), 4);
    assert_int_equal(pool[3].object_id, 5);
    assert_int_equal(cr_evict_choose(pool, 5, 0, 4, false), 3);
    /* both targets: the larger wins */
    assert_int_equal(cr_evict_choose(pool, 5, 250, 1, true), 3);
    assert_int_equal(cr_evict_choose(pool, 5, 100, 2, true), 2);
    cr_store_config cfg;
    cr_store_config_default(&cfg);
    struct cr_store_usage u = {.objects = 950, .max_objects = 1000, .count_ratio = 0.95};
    assert_int_equal(cr_evict_objects_to_free(&cfg, &u), 48); /* 5% of 950, rounded */
    u.count_ratio = 0.94;
    assert_int_equal(cr_evict_objects_to_free(&cfg, &u), 0);
    u = (struct cr_store_usage){.objects = 1000, .max_objects = 1000, .count_ratio = 1.0};
    assert_int_equal(cr_evict_objects_to_free(&cfg, &u), 100); /* 1 - 0.95 + 0.05 */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_index_grows),
        cmocka_unit_test(test_segment_allocations_grow_to_the_limit),
        cmocka_unit_test(test_eviction_by_count),
        cmocka_unit_test(test_put_at_full_table_makes_room),
        cmocka_unit_test(test_room_soft_pinned_last),
        cmocka_unit_test(test_refusal_when_truly_full),
        cmocka_unit_test(test_config_bounds),
        cmocka_unit_test(test_choose_by_count),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
