/* Unit tests for copy/move tasks on the store (src/core/store_tasks.c):
 * reservations are never readable, commit and rollback, a move's source
 * waits for its lease, removal and eviction respect reservations. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/store.h"
#include "crescent/error.h"

#define SIZE 4096u
static const struct cr_uuid OWNER_A = {{1}};
static const struct cr_uuid OWNER_B = {{2}};

struct recorder {
    int updates;
    uint32_t last_replicas;
    char last_locations[4][32];
};

static void record(void *ctx, const struct cr_store_change *ev) {
    struct recorder *r = ctx;
    if (ev->kind != CR_STORE_CHANGE_UPDATE) return;
    r->updates++;
    r->last_replicas = ev->replica_count;
    for (uint32_t i = 0; i < ev->replica_count && i < 4; i++)
        snprintf(r->last_locations[i], sizeof(r->last_locations[i]), "%s",
                 ev->replicas[i].location);
}

struct fixture {
    cr_store *store;
    struct recorder rec;
    struct cr_store_key key;
};

/* Three segments (a and b of owner A, c of owner B) and one complete object
 * "k" with one replica on seg-a. */
static int setup(void **state) {
    static struct fixture f;
    memset(&f, 0, sizeof(f));
    cr_store_config cfg;
    cr_store_config_default(&cfg);
    cfg.max_objects = 1024;
    cfg.max_segments = 8;
    cfg.max_allocations_per_segment = 64;
    struct cr_store_event_sink sink = {record, &f.rec};
    assert_int_equal(cr_store_create(&cfg, &sink, &f.store), CR_OK);
    const char *names[] = {"seg-a", "seg-b", "seg-c"};
    const char *eps[] = {"h:1", "h:2", "h:3"};
    for (int i = 0; i < 3; i++) {
        struct cr_store_segment_params p = {names[i], 0x10000000ull * (i + 1), 4 * SIZE, eps[i],
                                            "tcp"};
        assert_int_equal(cr_store_mount_segment(f.store, i == 2 ? &OWNER_B : &OWNER_A, &p, 0),
                         CR_OK);
    }
    struct cr_store_put_params put = {.key = "k", .key_len = 1, .value_length = SIZE,
                                      .replica_num = 1, .preferred_segment = "seg-a"};
    struct cr_store_replica_list list;
    assert_int_equal(cr_store_put_start(f.store, &OWNER_A, &put, 0, &list), CR_OK);
    assert_string_equal(list.replicas[0].segment_name, "seg-a");
    assert_int_equal(cr_store_put_end(f.store, &OWNER_A, NULL, "k", 1, 0), CR_OK);
    cr_store_key_make(NULL, "k", 1, &f.key);
    f.rec.updates = 0;
    *state = &f;
    return 0;
}

static int teardown(void **state) {
    struct fixture *f = *state;
    cr_store_destroy(f->store);
    return 0;
}

static uint32_t readable(struct fixture *f, uint64_t now_ms) {
    struct cr_store_replica_list list;
    assert_int_equal(cr_store_get_replica_list_k(f->store, &f->key, now_ms, &list), CR_OK);
    return list.count;
}

static void test_copy_reserve_commit(void **state) {
    struct fixture *f = *state;
    const char *targets[] = {"seg-b", "seg-c"};
    struct cr_store_task_reservation res;
    assert_int_equal(cr_store_task_reserve(f->store, &f->key, NULL, targets, 2, 10, &res), CR_OK);
    assert_string_equal(res.source.segment_name, "seg-a");
    assert_memory_equal(&res.source_owner, &OWNER_A, sizeof(OWNER_A));
    assert_int_equal(res.targets.count, 2);
    assert_string_equal(res.targets.replicas[0].segment_name, "seg-b");
    assert_int_equal(res.targets.replicas[1].status, CR_REPLICA_PROCESSING);
    assert_int_equal(res.targets.replicas[1].buffer, 0x30000000ull); /* seg-c base + 0 */
    assert_int_equal(readable(f, 10), 1); /* the reservation is not readable */
    assert_int_equal(f->rec.updates, 0);
    uint64_t lease = 0;
    assert_int_equal(cr_store_task_commit(f->store, &res.ref, false, 20, &lease), CR_OK);
    assert_int_equal(readable(f, 20), 3);
    assert_int_equal(f->rec.updates, 1);
    assert_int_equal(f->rec.last_replicas, 3);
    /* Committed: a removal is refused only for the lease now. */
    assert_int_equal(cr_store_remove_k(f->store, &f->key, false, 1000000), CR_OK);
}

static void test_refusals(void **state) {
    struct fixture *f = *state;
    struct cr_store_task_reservation res;
    const char *b[] = {"seg-b"}, *a[] = {"seg-a"}, *nope[] = {"seg-x"}, *twice[] = {"seg-b",
                                                                                     "seg-b"};
    struct cr_store_key missing;
    cr_store_key_make(NULL, "missing", 7, &missing);
    assert_int_equal(cr_store_task_reserve(f->store, &missing, NULL, b, 1, 0, &res),
                     CR_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(cr_store_task_reserve(f->store, &f->key, NULL, nope, 1, 0, &res),
                     CR_ERR_SEGMENT_NOT_FOUND);
    assert_string_equal(cr_store_last_error(f->store), "target segment seg-x is not mounted");
    assert_int_equal(cr_store_task_reserve(f->store, &f->key, NULL, a, 1, 0, &res),
                     CR_ERR_INVALID_PARAMS); /* seg-a is the source */
    assert_int_equal(cr_store_task_reserve(f->store, &f->key, "seg-b", b, 1, 0, &res),
                     CR_ERR_INVALID_PARAMS); /* seg-b holds no replica */
    assert_int_equal(cr_store_task_reserve(f->store, &f->key, "seg-x", b, 1, 0, &res),
                     CR_ERR_SEGMENT_NOT_FOUND);
    assert_int_equal(cr_store_task_reserve(f->store, &f->key, NULL, twice, 2, 0, &res),
                     CR_ERR_INVALID_PARAMS);
    assert_int_equal(cr_store_task_reserve(f->store, &f->key, NULL, b, 0, 0, &res),
                     CR_ERR_INVALID_PARAMS);
    /* An object being written is not ready. */
    struct cr_store_put_params put = {.key = "w", .key_len = 1, .value_length = SIZE,
                                      .replica_num = 1, .preferred_segment = "seg-a"};
    struct cr_store_replica_list list;
    assert_int_equal(cr_store_put_start(f->store, &OWNER_A, &put, 0, &list), CR_OK);
    struct cr_store_key w;
    cr_store_key_make(NULL, "w", 1, &w);
    assert_int_equal(cr_store_task_reserve(f->store, &w, NULL, b, 1, 0, &res),
                     CR_ERR_OBJECT_NOT_READY);
    /* A target already holding one: reserve seg-b, then ask again. */
    assert_int_equal(cr_store_task_reserve(f->store, &f->key, NULL, b, 1, 0, &res), CR_OK);
    struct cr_store_task_reservation again;
    assert_int_equal(cr_store_task_reserve(f->store, &f->key, NULL, b, 1, 0, &again),
                     CR_ERR_INVALID_PARAMS);
    /* No room: seg-c holds four objects of SIZE at most. */
    struct cr_store_stats before, after;
    cr_store_get_stats(f->store, 0, &before);
    const char *c[] = {"seg-c"};
    for (int i = 0; i < 4; i++) {
        char key[16];
        snprintf(key, sizeof(key), "f%d", i);
        struct cr_store_put_params fill = {.key = key, .key_len = 2, .value_length = SIZE,
                                           .replica_num = 1, .preferred_segment = "seg-c"};
        assert_int_equal(cr_store_put_start(f->store, &OWNER_B, &fill, 0, &list), CR_OK);
    }
    cr_store_get_stats(f->store, 0, &before);
    assert_int_equal(cr_store_task_reserve(f->store, &f->key, NULL, c, 1, 0, &again),
                     CR_ERR_NO_AVAILABLE_HANDLE);
    cr_store_get_stats(f->store, 0, &after);
    assert_int_equal(after.used_bytes, before.used_bytes); /* nothing half-reserved */
}

static void test_rollback_frees(void **state) {
    struct fixture *f = *state;
    struct cr_store_stats before, during, after;
    cr_store_get_stats(f->store, 0, &before);
    const char *b[] = {"seg-b"};
    struct cr_store_task_reservation res;
    assert_int_equal(cr_store_task_reserve(f->store, &f->key, NULL, b, 1, 0, &res), CR_OK);
    cr_store_get_stats(f->store, 0, &during);
    assert_int_equal(during.used_bytes, before.used_bytes + SIZE);
    /* Reserved: not removable without force, not evictable. */
    assert_int_equal(cr_store_remove_k(f->store, &f->key, false, 1000000),
                     CR_ERR_OBJECT_HAS_LEASE);
    uint64_t rng = 1;
    assert_int_equal(cr_store_evict_pass(f->store, 1000000, &rng, SIZE, 0), 0);
    cr_store_task_rollback(f->store, &res.ref);
    cr_store_get_stats(f->store, 0, &after);
    assert_int_equal(after.used_bytes, before.used_bytes);
    assert_int_equal(f->rec.updates, 0); /* readers never saw it */
    assert_int_equal(readable(f, 0), 1);
    assert_int_equal(cr_store_remove_k(f->store, &f->key, false, 1000000), CR_OK);
}

static void test_move_waits_for_lease(void **state) {
    struct fixture *f = *state;
    const char *c[] = {"seg-c"};
    struct cr_store_task_reservation res;
    assert_int_equal(cr_store_task_reserve(f->store, &f->key, "seg-a", c, 1, 0, &res), CR_OK);
    assert_int_equal(readable(f, 100), 1); /* a reader takes a lease: 100 + 5000 ms */
    uint64_t lease = 0;
    assert_int_equal(cr_store_task_commit(f->store, &res.ref, true, 200, &lease),
                     CR_ERR_OBJECT_HAS_LEASE);
    assert_int_equal(lease, 5100);
    assert_int_equal(f->rec.last_replicas, 2); /* committed, source kept */
    assert_int_equal(cr_store_task_release_source(f->store, &res.ref, 5099, &lease),
                     CR_ERR_OBJECT_HAS_LEASE);
    assert_int_equal(cr_store_task_release_source(f->store, &res.ref, 5100, &lease), CR_OK);
    assert_int_equal(f->rec.updates, 2);
    assert_int_equal(f->rec.last_replicas, 1);
    assert_string_equal(f->rec.last_locations[0], "h:3");
    struct cr_store_replica_list list;
    assert_int_equal(cr_store_get_replica_list_k(f->store, &f->key, 6000, &list), CR_OK);
    assert_string_equal(list.replicas[0].segment_name, "seg-c");
}

static void test_move_unleased_one_event(void **state) {
    struct fixture *f = *state;
    const char *b[] = {"seg-b"};
    struct cr_store_task_reservation res;
    assert_int_equal(cr_store_task_reserve(f->store, &f->key, "seg-a", b, 1, 0, &res), CR_OK);
    uint64_t lease = 0;
    assert_int_equal(cr_store_task_commit(f->store, &res.ref, true, 0, &lease), CR_OK);
    assert_int_equal(f->rec.updates, 1);
    assert_int_equal(f->rec.last_replicas, 1);
    assert_string_equal(f->rec.last_locations[0], "h:2");
}

/* The object removed by force mid-task: the commit fails, the reserved
 * space stays parked (an executor may still write it) until the release
 * timeout, and a new object of the same key is not mistaken for it. */
static void test_forced_removal_mid_task(void **state) {
    struct fixture *f = *state;
    const char *b[] = {"seg-b"};
    struct cr_store_task_reservation res;
    assert_int_equal(cr_store_task_reserve(f->store, &f->key, NULL, b, 1, 50, &res), CR_OK);
    assert_int_equal(cr_store_remove_k(f->store, &f->key, true, 60), CR_OK);
    struct cr_store_stats s;
    cr_store_get_stats(f->store, 60, &s);
    assert_int_equal(s.used_bytes, SIZE); /* the reservation, parked */
    assert_int_equal(s.discarded_parked, 1);
    struct cr_store_put_params put = {.key = "k", .key_len = 1, .value_length = SIZE,
                                      .replica_num = 1, .preferred_segment = "seg-b"};
    struct cr_store_replica_list list;
    assert_int_equal(cr_store_put_start(f->store, &OWNER_A, &put, 70, &list), CR_OK);
    assert_int_not_equal(list.replicas[0].buffer, res.targets.replicas[0].buffer);
    assert_int_equal(cr_store_put_end(f->store, &OWNER_A, NULL, "k", 1, 70), CR_OK);
    uint64_t lease = 0;
    assert_int_equal(cr_store_task_commit(f->store, &res.ref, false, 80, &lease),
                     CR_ERR_OBJECT_NOT_FOUND);
    cr_store_task_rollback(f->store, &res.ref); /* harmless on a vanished object */
    const cr_store_config *cfg = cr_store_get_config(f->store);
    uint64_t last = 50 + (cfg->put_start_release_timeout_ms > cfg->task_timeout_ms
                              ? cfg->put_start_release_timeout_ms
                              : cfg->task_timeout_ms);
    assert_int_equal(cr_store_reclaim_discarded(f->store, last - 1), 0);
    assert_int_equal(cr_store_reclaim_discarded(f->store, last), SIZE);
}

/* A release timeout shorter than the task timeout: the parked reservation
 * still waits for the task's deadline. */
static void test_parked_through_task_deadline(void **state) {
    struct fixture *f = *state;
    cr_store_destroy(f->store);
    cr_store_config cfg;
    cr_store_config_default(&cfg);
    cfg.put_start_discard_timeout_ms = 1000;
    cfg.put_start_release_timeout_ms = 2000;
    cfg.task_timeout_ms = 60000;
    assert_int_equal(cr_store_create(&cfg, NULL, &f->store), CR_OK);
    struct cr_store_segment_params p[2] = {{"s1", 0x1000, 4 * SIZE, "h:1", "tcp"},
                                           {"s2", 0x9000, 4 * SIZE, "h:2", "tcp"}};
    for (int i = 0; i < 2; i++)
        assert_int_equal(cr_store_mount_segment(f->store, &OWNER_A, &p[i], 0), CR_OK);
    struct cr_store_put_params put = {.key = "k", .key_len = 1, .value_length = SIZE,
                                      .replica_num = 1, .preferred_segment = "s1"};
    struct cr_store_replica_list list;
    assert_int_equal(cr_store_put_start(f->store, &OWNER_A, &put, 0, &list), CR_OK);
    assert_int_equal(cr_store_put_end(f->store, &OWNER_A, NULL, "k", 1, 0), CR_OK);
    const char *t[] = {"s2"};
    struct cr_store_task_reservation res;
    assert_int_equal(cr_store_task_reserve(f->store, &f->key, NULL, t, 1, 100, &res), CR_OK);
    assert_int_equal(cr_store_remove_k(f->store, &f->key, true, 200), CR_OK);
    assert_int_equal(cr_store_reclaim_discarded(f->store, 100 + 59999), 0);
    assert_int_equal(cr_store_reclaim_discarded(f->store, 100 + 60000), SIZE);
}

/* A target segment unmounted mid-task: the commit fails and frees the rest. */
static void test_target_unmounted(void **state) {
    struct fixture *f = *state;
    const char *targets[] = {"seg-b", "seg-c"};
    struct cr_store_task_reservation res;
    assert_int_equal(cr_store_task_reserve(f->store, &f->key, NULL, targets, 2, 0, &res), CR_OK);
    assert_int_equal(cr_store_unmount_segment(f->store, &OWNER_B, "seg-c", NULL), CR_OK);
    uint64_t lease = 0;
    assert_int_equal(cr_store_task_commit(f->store, &res.ref, false, 0, &lease),
                     CR_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(readable(f, 0), 1);
    struct cr_store_stats s;
    cr_store_get_stats(f->store, 0, &s);
    assert_int_equal(s.used_bytes, SIZE);
    assert_int_equal(cr_store_remove_k(f->store, &f->key, false, 1000000), CR_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_copy_reserve_commit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rollback_frees, setup, teardown),
        cmocka_unit_test_setup_teardown(test_move_waits_for_lease, setup, teardown),
        cmocka_unit_test_setup_teardown(test_move_unleased_one_event, setup, teardown),
        cmocka_unit_test_setup_teardown(test_forced_removal_mid_task, setup, teardown),
        cmocka_unit_test_setup_teardown(test_target_unmounted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_parked_through_task_deadline, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
