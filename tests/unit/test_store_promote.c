/* The SSD tier's way back on the store core (src/core/store_promote.c):
 * GetReplicaLists served by a local_disk replica only count hits; enough of
 * them within the window queue a promotion, which reserves a memory replica
 * (never above the eviction high watermark) and commits it with one UPDATE
 * event listing both tiers; a store server's reports re-register SSD files
 * (re-creating objects its restart lost) and drop replicas whose file went,
 * only at the position reported. */
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
#include "store_tier_fixture.h"

static const struct cr_uuid PLAIN = {{1}};
static const struct cr_uuid SSD_SERVER = {{2}};

static cr_store *make_store(struct recorder *rec, uint64_t ssd_segment_size) {
    cr_store *s = store_with_recorder(rec);
    mount_segment(s, &SSD_SERVER, "ssd", 2ull << 32, ssd_segment_size, "10.0.0.2:7000");
    assert_int_equal(cr_store_segment_set_ssd_capacity(s, "ssd", 1ull << 30), CR_OK);
    assert_int_equal(cr_store_set_promotion(s, 2, 1000), CR_OK);
    return s;
}

static void put(cr_store *s, const char *key) { put_on(s, &PLAIN, key, "ssd", true); }

/* Puts key and offloads it: only a local_disk replica at position 7 is left. */
static void offloaded(cr_store *s, const char *key) {
    put(s, key);
    struct cr_store_object_view v;
    view(s, key, &v);
    struct cr_store_task_reservation res;
    struct cr_store_key k;
    assert_int_equal(cr_store_offload_begin(s, v.object_id, v.generation, 10, &res, &k), CR_OK);
    assert_int_equal(cr_store_offload_commit(s, &res.ref, 7, 10), CR_OK);
    view(s, key, &v);
    assert_int_equal(v.replicas.count, 1);
    assert_int_equal(v.replicas.replicas[0].medium, CR_MEDIUM_LOCAL_DISK);
}

static void get(cr_store *s, const char *key, uint64_t now_ms) {
    struct cr_store_replica_list l;
    assert_int_equal(cr_store_get_replica_list(s, NULL, key, (uint32_t)strlen(key), now_ms, &l),
                     CR_OK);
}

static void hits_in_the_window_promote_with_one_update(void **state) {
    (void)state;
    struct recorder rec = {0};
    cr_store *s = make_store(&rec, 1 << 20);
    offloaded(s, "k1");
    uint32_t id, gen;
    get(s, "k1", 100);
    assert_false(cr_store_promote_next(s, &id, &gen));
    get(s, "k1", 1200); /* outside the 1 s window: counted from one again */
    assert_false(cr_store_promote_next(s, &id, &gen));
    get(s, "k1", 1300);
    assert_true(cr_store_promote_next(s, &id, &gen));
    assert_false(cr_store_promote_next(s, &id, &gen)); /* asked once */
    struct cr_store_task_reservation res;
    struct cr_store_key k;
    assert_int_equal(cr_store_promote_begin(s, id, gen, 1300, &res, &k), CR_OK);
    assert_memory_equal(k.key, "k1", 2);
    assert_memory_equal(&res.source_owner, &SSD_SERVER, sizeof(SSD_SERVER));
    assert_int_equal(res.source.medium, CR_MEDIUM_LOCAL_DISK);
    assert_int_equal(res.source.buffer, 7); /* the SSD position */
    assert_int_equal(res.targets.count, 1);
    assert_int_equal(res.targets.replicas[0].medium, CR_MEDIUM_MEMORY);
    assert_string_equal(res.targets.replicas[0].segment_name, "ssd");
    assert_true(res.has_checksum && res.checksum == 0x77);
    /* in flight: reads still count nothing, no second promotion */
    get(s, "k1", 1301);
    get(s, "k1", 1302);
    assert_false(cr_store_promote_next(s, &id, &gen));
    int events = rec.count;
    assert_int_equal(cr_store_promote_commit(s, &res.ref, 1400), CR_OK);
    assert_int_equal(rec.count, events + 1);
    assert_int_equal(rec.kind, CR_STORE_CHANGE_UPDATE);
    assert_true(strcmp(rec.pairs, "local_disk=10.0.0.2:7000;memory=10.0.0.2:7000") == 0 ||
                strcmp(rec.pairs, "memory=10.0.0.2:7000;local_disk=10.0.0.2:7000") == 0);
    /* memory hits from now on: not counted */
    get(s, "k1", 1500);
    get(s, "k1", 1501);
    assert_false(cr_store_promote_next(s, &id, &gen));
    struct cr_store_stats st;
    cr_store_get_stats(s, 1501, &st);
    assert_int_equal(st.promotions_started, 1);
    assert_int_equal(st.promotions_done, 1);
    assert_int_equal(st.promotions_failed, 0);
    assert_int_equal(st.promotion_hits, 3);
    cr_store_destroy(s);
}

static void no_room_below_the_watermark_no_promotion(void **state) {
    (void)state;
    struct recorder rec = {0};
    /* room for 10 objects: 0.95 of it is 9.5; 9 in memory leave no room */
    cr_store *s = make_store(&rec, 10 * OBJ);
    offloaded(s, "cold");
    char key[16];
    for (int i = 0; i < 9; i++) {
        snprintf(key, sizeof(key), "hot%d", i);
        put(s, key);
    }
    get(s, "cold", 100);
    get(s, "cold", 101);
    uint32_t id, gen;
    assert_true(cr_store_promote_next(s, &id, &gen));
    struct cr_store_task_reservation res;
    struct cr_store_key k;
    int events = rec.count;
    assert_int_equal(cr_store_promote_begin(s, id, gen, 102, &res, &k),
                     CR_ERR_NO_AVAILABLE_HANDLE);
    assert_int_equal(rec.count, events);
    struct cr_store_stats st;
    cr_store_get_stats(s, 102, &st);
    assert_int_equal(st.promotions_no_room, 1);
    assert_int_equal(st.used_bytes, 9 * OBJ);
    cr_store_destroy(s);
}

static void rollback_and_lost_server_end_it(void **state) {
    (void)state;
    struct recorder rec = {0};
    cr_store *s = make_store(&rec, 1 << 20);
    offloaded(s, "k1");
    get(s, "k1", 100);
    get(s, "k1", 101);
    uint32_t id, gen;
    assert_true(cr_store_promote_next(s, &id, &gen));
    struct cr_store_task_reservation res;
    struct cr_store_key k;
    assert_int_equal(cr_store_promote_begin(s, id, gen, 102, &res, &k), CR_OK);
    struct cr_store_stats st;
    cr_store_get_stats(s, 102, &st);
    assert_int_equal(st.used_bytes, OBJ);
    int events = rec.count;
    cr_store_promote_rollback(s, &res.ref);
    assert_int_equal(rec.count, events); /* readers never saw the reservation */
    cr_store_get_stats(s, 103, &st);
    assert_int_equal(st.used_bytes, 0);
    assert_int_equal(st.promotions_failed, 1);
    /* again; a check from its owner is fine, from another client it ends it */
    get(s, "k1", 200);
    get(s, "k1", 201);
    assert_true(cr_store_promote_next(s, &id, &gen));
    assert_int_equal(cr_store_promote_begin(s, id, gen, 202, &res, &k), CR_OK);
    bool known = false;
    assert_int_equal(cr_store_promote_check(s, &res.ref, &SSD_SERVER, &known), CR_OK);
    assert_true(known);
    assert_int_equal(cr_store_promote_check(s, &res.ref, &PLAIN, &known),
                     CR_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(cr_store_promote_commit(s, &res.ref, 203), CR_ERR_OBJECT_NOT_FOUND);
    view(s, "k1", &(struct cr_store_object_view){0});
    cr_store_get_stats(s, 203, &st);
    assert_int_equal(st.used_bytes, 0);
    assert_int_equal(st.promotions_done, 0);
    cr_store_destroy(s);
}

static void reports_register_and_drop_at_the_position(void **state) {
    (void)state;
    struct recorder rec = {0};
    cr_store *s = make_store(&rec, 1 << 20);
    offloaded(s, "k1");
    struct cr_store_key k;
    cr_store_key_make(NULL, "k1", 2, &k);
    bool created = true, dropped = true;
    /* only the owner reports; the same file again changes nothing */
    assert_int_equal(cr_store_local_disk_register(s, &k, "ssd", &PLAIN, 7, OBJ, 0x77, 20,
                                                  &created),
                     CR_ERR_ILLEGAL_CLIENT);
    int events = rec.count;
    assert_int_equal(cr_store_local_disk_register(s, &k, "ssd", &SSD_SERVER, 7, OBJ, 0x77, 20,
                                                  &created),
                     CR_OK);
    assert_false(created);
    assert_int_equal(rec.count, events);
    /* another put's file is refused */
    assert_int_equal(cr_store_local_disk_register(s, &k, "ssd", &SSD_SERVER, 9, OBJ, 0x78, 20,
                                                  &created),
                     CR_ERR_INVALID_PARAMS);
    /* a stale position's eviction keeps the replica */
    assert_int_equal(cr_store_local_disk_gone(s, &k, "ssd", &SSD_SERVER, 8, &dropped), CR_OK);
    assert_false(dropped);
    assert_int_equal(rec.count, events);
    /* the file at 7 went: the object with it (its last replica) */
    assert_int_equal(cr_store_local_disk_gone(s, &k, "ssd", &SSD_SERVER, 7, &dropped), CR_OK);
    assert_true(dropped);
    assert_int_equal(rec.count, events + 1);
    assert_int_equal(rec.kind, CR_STORE_CHANGE_UPDATE);
    assert_string_equal(rec.pairs, "");
    struct cr_store_object_view v;
    assert_int_equal(cr_store_object_find(s, NULL, "k1", 2, 21, &v), CR_ERR_OBJECT_NOT_FOUND);
    /* a restarted server re-registers it: the object is back, SSD only */
    assert_int_equal(cr_store_local_disk_register(s, &k, "ssd", &SSD_SERVER, 11, OBJ, 0x77, 22,
                                                  &created),
                     CR_OK);
    assert_true(created);
    assert_int_equal(rec.kind, CR_STORE_CHANGE_STORE);
    assert_string_equal(rec.pairs, "local_disk=10.0.0.2:7000");
    view(s, "k1", &v);
    assert_true(v.complete);
    assert_int_equal(v.size_bytes, OBJ);
    assert_true(v.replicas.has_checksum && v.replicas.checksum == 0x77);
    assert_int_equal(v.replicas.count, 1);
    assert_int_equal(v.replicas.replicas[0].buffer, 11);
    struct cr_store_stats st;
    cr_store_get_stats(s, 22, &st);
    assert_int_equal(st.local_disk_replicas, 1);
    assert_int_equal(st.local_disk_registered, 1);
    assert_int_equal(st.local_disk_gone, 1);
    /* its tenant is charged nothing for it: removal leaves nothing charged */
    struct cr_store_quota_view q;
    assert_int_equal(cr_store_quota_set(s, "default", 1 << 30, &q), CR_OK);
    assert_int_equal(q.charged_bytes, 0);
    cr_store_destroy(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hits_in_the_window_promote_with_one_update),
        cmocka_unit_test(no_room_below_the_watermark_no_promotion),
        cmocka_unit_test(rollback_and_lost_server_end_it),
        cmocka_unit_test(reports_register_and_drop_at_the_position),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
