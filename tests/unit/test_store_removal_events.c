/* Every change of a published object's replica set reaches the event sink
 * (issue 10 item 4): Remove, RemoveByRegex, eviction, BatchReplicaClear,
 * client expiry and unmount each publish an UPDATE with the replicas left
 * (none when the object is gone); puts never published (revoked, reclaimed
 * zombies, forced removal of an in-flight put) publish nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/store.h"
#include "crescent/error.h"

#define OBJ 4096ull
#define SEG (64 * 1024ull)
#define EV_MAX 32

static const struct cr_uuid ALICE = {{1}};
static const struct cr_uuid BOB = {{2}};

struct seen {
    enum cr_store_change_kind kind;
    char key[32];
    uint32_t replicas;
    char location0[32];
};

struct sink {
    struct seen ev[EV_MAX];
    int count;
};

static void record(void *ctx, const struct cr_store_change *ev) {
    struct sink *s = ctx;
    assert_true(s->count < EV_MAX);
    struct seen *e = &s->ev[s->count++];
    memset(e, 0, sizeof(*e));
    e->kind = ev->kind;
    if (ev->key != NULL) snprintf(e->key, sizeof(e->key), "%.*s", (int)ev->key_len, ev->key);
    e->replicas = ev->replica_count;
    if (ev->replica_count > 0)
        snprintf(e->location0, sizeof(e->location0), "%s", ev->replicas[0].location);
}

struct fx {
    struct sink sink;
    cr_store *store;
};

static int setup(void **state) {
    struct fx *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    cr_store_config cfg;
    cr_store_config_default(&cfg);
    cfg.max_objects = 64;
    cfg.max_segments = 8;
    cfg.max_allocations_per_segment = 64;
    cfg.client_live_ttl_ms = 1000;
    struct cr_store_event_sink sink = {record, &f->sink};
    assert_int_equal(cr_store_create(&cfg, &sink, &f->store), CR_OK);
    struct cr_store_segment_params a = {"a", 0, SEG, "10.0.0.1:7000", "tcp"};
    struct cr_store_segment_params b = {"b", 1ull << 32, SEG, "10.0.0.2:7000", "tcp"};
    assert_int_equal(cr_store_mount_segment(f->store, &ALICE, &a, 0), CR_OK);
    assert_int_equal(cr_store_mount_segment(f->store, &BOB, &b, 0), CR_OK);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    struct fx *f = *state;
    cr_store_destroy(f->store);
    free(f);
    return 0;
}

static void start_on(struct fx *f, const char *key, uint32_t replicas, const char *segment) {
    struct cr_store_put_params p = {.key = key, .key_len = (uint32_t)strlen(key),
                                    .value_length = OBJ, .replica_num = replicas,
                                    .preferred_segment = segment};
    struct cr_store_replica_list l;
    assert_int_equal(cr_store_put_start(f->store, &ALICE, &p, 0, &l), CR_OK);
    assert_int_equal(l.count, replicas);
}

static void start(struct fx *f, const char *key, uint32_t replicas) {
    start_on(f, key, replicas, NULL);
}

/* A complete object with `replicas` replicas (the first on `segment` when
 * not NULL).  The sink is emptied before and after, so a test sees only
 * what follows its puts. */
static void put_on(struct fx *f, const char *key, uint32_t replicas, const char *segment) {
    f->sink.count = 0;
    start_on(f, key, replicas, segment);
    assert_int_equal(cr_store_put_end(f->store, &ALICE, NULL, key, (uint32_t)strlen(key), 0),
                     CR_OK);
    assert_int_equal(f->sink.count, 1);
    assert_int_equal(f->sink.ev[0].kind, CR_STORE_CHANGE_STORE);
    f->sink.count = 0;
}

static void put(struct fx *f, const char *key, uint32_t replicas) {
    put_on(f, key, replicas, NULL);
}

static void expect_gone(const struct fx *f, int i, const char *key) {
    assert_true(i < f->sink.count);
    assert_int_equal(f->sink.ev[i].kind, CR_STORE_CHANGE_UPDATE);
    assert_string_equal(f->sink.ev[i].key, key);
    assert_int_equal(f->sink.ev[i].replicas, 0);
}

static void test_remove_publishes_gone(void **state) {
    struct fx *f = *state;
    put(f, "k", 2);
    assert_int_equal(cr_store_remove(f->store, NULL, "k", 1, false, 0), CR_OK);
    assert_int_equal(f->sink.count, 1);
    expect_gone(f, 0, "k");
    /* A refused remove (leased) and a remove of nothing publish nothing. */
    put(f, "leased", 1);
    struct cr_store_replica_list l;
    assert_int_equal(cr_store_get_replica_list(f->store, NULL, "leased", 6, 10, &l), CR_OK);
    assert_int_equal(cr_store_remove(f->store, NULL, "leased", 6, false, 10),
                     CR_ERR_OBJECT_HAS_LEASE);
    assert_int_equal(cr_store_remove(f->store, NULL, "k", 1, false, 10), CR_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(f->sink.count, 0);
}

/* BatchRemove is Remove per key in the gateway: one event per key removed. */
static void test_batch_remove_publishes_each(void **state) {
    struct fx *f = *state;
    put(f, "k1", 1);
    put(f, "k2", 1);
    const char *keys[] = {"k1", "missing", "k2"};
    for (int i = 0; i < 3; i++)
        (void)cr_store_remove(f->store, NULL, keys[i], (uint32_t)strlen(keys[i]), false, 0);
    assert_int_equal(f->sink.count, 2);
    expect_gone(f, 0, "k1");
    expect_gone(f, 1, "k2");
}

static void test_remove_by_regex_publishes_each(void **state) {
    struct fx *f = *state;
    put(f, "x1", 1);
    put(f, "x2", 1);
    put(f, "y1", 1);
    uint64_t removed = 0;
    assert_int_equal(cr_store_remove_by_regex(f->store, NULL, "^x", false, 0, &removed), CR_OK);
    assert_int_equal(removed, 2);
    assert_int_equal(f->sink.count, 2);
    bool first_is_x1 = strcmp(f->sink.ev[0].key, "x1") == 0; /* table order */
    expect_gone(f, 0, first_is_x1 ? "x1" : "x2");
    expect_gone(f, 1, first_is_x1 ? "x2" : "x1");
}

static void test_eviction_publishes_gone(void **state) {
    struct fx *f = *state;
    put(f, "old", 1);
    uint64_t rng = 7;
    struct cr_evict_candidate c[4];
    size_t n = cr_store_sample_eviction_candidates(f->store, 100000, &rng, 4, c);
    assert_true(n >= 1);
    assert_true(cr_store_evict(f->store, c[0].object_id, c[0].generation, 100000));
    assert_int_equal(f->sink.count, 1);
    expect_gone(f, 0, "old");
    /* The pass used when policy and mechanism are not split publishes too. */
    put(f, "old2", 1);
    assert_true(cr_store_evict_pass(f->store, 200000, &rng, OBJ, 0) >= OBJ);
    assert_int_equal(f->sink.count, 1);
    expect_gone(f, 0, "old2");
}

static void test_batch_replica_clear_publishes_what_is_left(void **state) {
    struct fx *f = *state;
    put(f, "two", 2);
    put(f, "one", 1);
    const char *keys[] = {"two"};
    uint32_t lens[] = {3};
    bool cleared[2];
    assert_int_equal(cr_store_batch_replica_clear(f->store, NULL, keys, lens, 1, &ALICE, "a",
                                                  100000, cleared),
                     CR_OK);
    assert_true(cleared[0]);
    assert_int_equal(f->sink.count, 1);
    assert_int_equal(f->sink.ev[0].kind, CR_STORE_CHANGE_UPDATE);
    assert_int_equal(f->sink.ev[0].replicas, 1);
    assert_string_equal(f->sink.ev[0].location0, "10.0.0.2:7000");
    const char *all[] = {"two", "one"};
    uint32_t all_lens[] = {3, 3};
    assert_int_equal(cr_store_batch_replica_clear(f->store, NULL, all, all_lens, 2, &ALICE, NULL,
                                                  100000, cleared),
                     CR_OK);
    assert_int_equal(f->sink.count, 3);
    expect_gone(f, 1, "two");
    expect_gone(f, 2, "one");
}

static void test_unmount_and_client_expiry_publish(void **state) {
    struct fx *f = *state;
    put(f, "two", 2);
    put_on(f, "one", 1, "a");
    put_on(f, "bobs", 1, "b");
    /* Bob stays alive; Alice misses her TTL: segment "a" goes. */
    assert_int_equal(cr_store_client_ping(f->store, &BOB, 5000, NULL), CR_OK);
    assert_int_equal(cr_store_expire_clients(f->store, 5500), 1);
    assert_int_equal(f->sink.count, 2); /* "bobs" on b is untouched */
    bool two_first = strcmp(f->sink.ev[0].key, "two") == 0; /* table order */
    const struct seen *two = &f->sink.ev[two_first ? 0 : 1];
    assert_int_equal(two->kind, CR_STORE_CHANGE_UPDATE);
    assert_string_equal(two->key, "two");
    assert_int_equal(two->replicas, 1);
    assert_string_equal(two->location0, "10.0.0.2:7000");
    expect_gone(f, two_first ? 1 : 0, "one");
    f->sink.count = 0;
    assert_int_equal(cr_store_unmount_segment(f->store, &BOB, "b", NULL), CR_OK);
    assert_int_equal(f->sink.count, 2);
    for (int i = 0; i < f->sink.count; i++) assert_int_equal(f->sink.ev[i].replicas, 0);
}

/* Puts subscribers never heard of leave without a word. */
static void test_unpublished_puts_publish_nothing(void **state) {
    struct fx *f = *state;
    start(f, "revoked", 1);
    assert_int_equal(cr_store_put_revoke(f->store, &ALICE, NULL, "revoked", 7), CR_OK);
    start(f, "forced", 1);
    assert_int_equal(cr_store_remove(f->store, NULL, "forced", 6, true, 0), CR_OK);
    start(f, "zombie", 1);
    cr_store_config cfg;
    cr_store_config_default(&cfg);
    assert_true(cr_store_reclaim_discarded(f->store, cfg.put_start_release_timeout_ms) > 0);
    assert_int_equal(f->sink.count, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_remove_publishes_gone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_remove_publishes_each, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remove_by_regex_publishes_each, setup, teardown),
        cmocka_unit_test_setup_teardown(test_eviction_publishes_gone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_replica_clear_publishes_what_is_left, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_unmount_and_client_expiry_publish, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unpublished_puts_publish_nothing, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
