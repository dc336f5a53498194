/* Unit tests for the store's side of drain jobs (src/core/store_drain.c): a
 * draining segment takes no new allocations, the objects on it are listed
 * with their state, and a target is the least used segment with room. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/store.h"
#include "core/store_drain.h"
#include "crescent/error.h"

#define SIZE 4096u
static const struct cr_uuid OWNER = {{1}};

static cr_store *make(void) {
    cr_store_config cfg;
    cr_store_config_default(&cfg);
    cfg.max_objects = 1024;
    cfg.max_segments = 8;
    cfg.max_allocations_per_segment = 64;
    cr_store *s;
    assert_int_equal(cr_store_create(&cfg, NULL, &s), CR_OK);
    const char *names[] = {"seg-a", "seg-b", "seg-c"};
    for (int i = 0; i < 3; i++) {
        struct cr_store_segment_params p = {names[i], 0x10000000ull * (i + 1), 8 * SIZE, "h:1",
                                            "tcp"};
        assert_int_equal(cr_store_mount_segment(s, &OWNER, &p, 0), CR_OK);
    }
    return s;
}

static int put(cr_store *s, const char *key, const char *preferred, bool end) {
    struct cr_store_put_params p = {.key = key, .key_len = (uint32_t)strlen(key),
                                    .value_length = SIZE, .replica_num = 1,
                                    .preferred_segment = preferred};
    struct cr_store_replica_list list;
    int rc = cr_store_put_start(s, &OWNER, &p, 0, &list);
    if (rc == CR_OK && preferred != NULL) assert_string_equal(list.replicas[0].segment_name, preferred);
    if (rc == CR_OK && end) rc = cr_store_put_end(s, &OWNER, NULL, key, (uint32_t)strlen(key), 0);
    return rc;
}

static void test_a_draining_segment_takes_no_allocations(void **state) {
    (void)state;
    cr_store *s = make();
    bool draining = true;
    assert_true(cr_store_segment_draining(s, "seg-a", &draining));
    assert_false(draining);
    assert_false(cr_store_segment_draining(s, "nope", &draining));
    assert_int_equal(cr_store_segment_set_draining(s, "nope", true), CR_ERR_SEGMENT_NOT_FOUND);
    assert_int_equal(cr_store_segment_set_draining(s, "seg-a", true), CR_OK);
    assert_true(cr_store_segment_draining(s, "seg-a", &draining));
    assert_true(draining);
    struct cr_store_segment_view v;
    assert_int_equal(cr_store_segment_find(s, "seg-a", &v), CR_OK);
    assert_true(v.draining);
    /* Preferred or not, no put lands on seg-a. */
    char key[16];
    for (int i = 0; i < 8; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        struct cr_store_put_params p = {.key = key, .key_len = (uint32_t)strlen(key),
                                        .value_length = SIZE, .replica_num = 1,
                                        .preferred_segment = "seg-a"};
        struct cr_store_replica_list list;
        assert_int_equal(cr_store_put_start(s, &OWNER, &p, 0, &list), CR_OK);
        assert_string_not_equal(list.replicas[0].segment_name, "seg-a");
    }
    assert_int_equal(cr_store_segment_find(s, "seg-a", &v), CR_OK);
    assert_int_equal(v.used_bytes, 0);
    /* Nor does a task's target. */
    assert_int_equal(cr_store_segment_set_draining(s, "seg-a", false), CR_OK);
    assert_int_equal(put(s, "on-b", "seg-b", true), CR_OK);
    assert_int_equal(cr_store_segment_set_draining(s, "seg-a", true), CR_OK);
    struct cr_store_key k;
    cr_store_key_make(NULL, "on-b", 4, &k);
    const char *targets[] = {"seg-a"};
    struct cr_store_task_reservation res;
    assert_int_equal(cr_store_task_reserve(s, &k, "seg-b", targets, 1, 0, &res),
                     CR_ERR_INVALID_PARAMS);
    assert_non_null(strstr(cr_store_last_error(s), "being drained"));
    cr_store_destroy(s);
}

static void test_objects_on_a_segment_and_their_state(void **state) {
    (void)state;
    cr_store *s = make();
    assert_int_equal(put(s, "done", "seg-a", true), CR_OK);
    assert_int_equal(put(s, "writing", "seg-a", false), CR_OK);
    assert_int_equal(put(s, "elsewhere", "seg-b", true), CR_OK);
    uint32_t cursor = 0, id, gen, n = 0;
    uint32_t ids[4], gens[4];
    while (cr_store_drain_next(s, "seg-a", &cursor, &id, &gen)) ids[n] = id, gens[n++] = gen;
    assert_int_equal(n, 2);
    cursor = 0;
    assert_false(cr_store_drain_next(s, "nope", &cursor, &id, &gen));
    uint64_t size;
    bool on_target;
    int movable = 0, blocked = 0;
    for (uint32_t i = 0; i < n; i++) {
        enum cr_store_drain_state st =
            cr_store_drain_state_of(s, ids[i], gens[i], "seg-a", "seg-b", 0, &size, &on_target);
        assert_int_equal(size, SIZE);
        assert_false(on_target);
        movable += st == CR_DRAIN_MOVABLE;
        blocked += st == CR_DRAIN_BLOCKED; /* its put has not ended */
        struct cr_store_key k;
        assert_true(cr_store_drain_key(s, ids[i], gens[i], &k));
        assert_true(k.key_len == 4 || k.key_len == 7);
    }
    assert_int_equal(movable, 1);
    assert_int_equal(blocked, 1);
    /* A stale generation is gone; so is an object whose replica left. */
    assert_int_equal(cr_store_drain_state_of(s, ids[0], gens[0] + 1, "seg-a", NULL, 0, &size,
                                             &on_target),
                     CR_DRAIN_DONE);
    assert_false(cr_store_drain_key(s, ids[0], gens[0] + 1, &(struct cr_store_key){0}));
    cr_store_destroy(s);
}

static void test_target_is_the_least_used_with_room(void **state) {
    (void)state;
    cr_store *s = make();
    assert_int_equal(put(s, "x", "seg-a", true), CR_OK);
    assert_int_equal(put(s, "b1", "seg-b", true), CR_OK);
    uint32_t cursor = 0, id, gen;
    assert_true(cr_store_drain_next(s, "seg-a", &cursor, &id, &gen));
    assert_string_equal(cr_store_drain_target(s, id, "seg-a", NULL, 0), "seg-c");
    const char *only_b[] = {"seg-b"};
    assert_string_equal(cr_store_drain_target(s, id, "seg-a", only_b, 1), "seg-b");
    assert_int_equal(cr_store_segment_set_draining(s, "seg-c", true), CR_OK);
    assert_string_equal(cr_store_drain_target(s, id, "seg-a", NULL, 0), "seg-b");
    /* seg-b full (seg-a draining too, so the puts cannot land there): nowhere to go. */
    assert_int_equal(cr_store_segment_set_draining(s, "seg-a", true), CR_OK);
    char key[16];
    int rc = CR_OK;
    for (int i = 2; rc == CR_OK; i++) {
        snprintf(key, sizeof(key), "b%d", i);
        rc = put(s, key, "seg-b", true);
    }
    assert_int_equal(rc, CR_ERR_NO_AVAILABLE_HANDLE);
    assert_null(cr_store_drain_target(s, id, "seg-a", NULL, 0));
    const char *self[] = {"seg-a"};
    assert_null(cr_store_drain_target(s, id, "seg-a", self, 1));
    cr_store_destroy(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_draining_segment_takes_no_allocations),
        cmocka_unit_test(test_objects_on_a_segment_and_their_state),
        cmocka_unit_test(test_target_is_the_least_used_with_room),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
