/* Memory eviction's offload to a store server's SSD on the store core
 * (src/core/store_offload.c): only objects on a segment mounted with an SSD
 * tier, with a checksum, qualify; the object keeps its memory replica (and
 * is neither evicted again nor removed without force) until the commit,
 * which records the local_disk replica and frees memory in one UPDATE
 * event; a rollback or a lost segment changes nothing but the count. */
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

static cr_store *make_store(struct recorder *rec) {
    cr_store *s = store_with_recorder(rec);
    mount_segment(s, &PLAIN, "plain", 1ull << 32, 1 << 20, "10.0.0.1:7000");
    mount_segment(s, &SSD_SERVER, "ssd", 2ull << 32, 1 << 20, "10.0.0.2:7000");
    assert_int_equal(cr_store_segment_set_ssd_capacity(s, "ssd", 1ull << 30), CR_OK);
    assert_int_equal(cr_store_segment_set_ssd_capacity(s, "none", 1), CR_ERR_SEGMENT_NOT_FOUND);
    return s;
}

static void put(cr_store *s, const char *key, const char *segment, bool checksum) {
    put_on(s, &PLAIN, key, segment, checksum);
}

static void only_ssd_segments_with_a_checksum_qualify(void **state) {
    (void)state;
    struct recorder rec = {0};
    cr_store *s = make_store(&rec);
    put(s, "on-plain", "plain", true);
    put(s, "no-sum", "ssd", false);
    struct cr_store_object_view v;
    struct cr_store_task_reservation res;
    struct cr_store_key k;
    view(s, "on-plain", &v);
    assert_int_equal(cr_store_offload_begin(s, v.object_id, v.generation, 10, &res, &k),
                     CR_ERR_INVALID_PARAMS);
    view(s, "no-sum", &v);
    assert_int_equal(cr_store_offload_begin(s, v.object_id, v.generation, 10, &res, &k),
                     CR_ERR_INVALID_PARAMS);
    /* eviction as ever for them */
    assert_true(cr_store_evict(s, v.object_id, v.generation, 10));
    cr_store_destroy(s);
}

static void commit_records_local_disk_and_frees_memory(void **state) {
    (void)state;
    struct recorder rec = {0};
    cr_store *s = make_store(&rec);
    put(s, "k1", "ssd", true);
    struct cr_store_object_view v;
    view(s, "k1", &v);
    struct cr_store_task_reservation res;
    struct cr_store_key k;
    assert_int_equal(cr_store_offload_begin(s, v.object_id, v.generation, 10, &res, &k), CR_OK);
    assert_int_equal(k.key_len, 2);
    assert_memory_equal(k.key, "k1", 2);
    assert_memory_equal(&res.source_owner, &SSD_SERVER, sizeof(SSD_SERVER));
    assert_string_equal(res.source.segment_name, "ssd");
    assert_true(res.has_checksum && res.checksum == 0x77);
    assert_int_equal(res.ref.target_count, 0);
    /* Until the commit: the memory replica stays, no second eviction, no
     * removal without force. */
    int events = rec.count;
    assert_false(cr_store_evict(s, v.object_id, v.generation, 11));
    assert_int_equal(cr_store_offload_begin(s, v.object_id, v.generation, 11, &res, &k),
                     CR_ERR_INVALID_PARAMS);
    assert_int_not_equal(cr_store_remove(s, NULL, "k1", 2, false, 11), CR_OK);
    assert_int_equal(rec.count, events);
    struct cr_store_stats st;
    cr_store_get_stats(s, 11, &st);
    uint64_t used = st.used_bytes;
    assert_int_equal(cr_store_offload_commit(s, &res.ref, 42, 12), CR_OK);
    assert_int_equal(rec.count, events + 1); /* one UPDATE */
    assert_string_equal(rec.pairs, "local_disk=10.0.0.2:7000");
    cr_store_get_stats(s, 12, &st);
    assert_true(st.used_bytes < used);
    assert_int_equal(st.local_disk_replicas, 1);
    assert_int_equal(st.offloads_started, 1);
    assert_int_equal(st.offloads_done, 1);
    struct cr_store_replica_list l;
    assert_int_equal(cr_store_get_replica_list(s, NULL, "k1", 2, 13, &l), CR_OK);
    assert_int_equal(l.count, 1);
    assert_int_equal(l.replicas[0].medium, CR_MEDIUM_LOCAL_DISK);
    assert_int_equal(l.replicas[0].buffer, 42);
    /* Removable again (no task holds it; the tenant's charge balances). */
    assert_int_equal(cr_store_remove(s, NULL, "k1", 2, false, 1000000), CR_OK); /* lease over */
    cr_store_destroy(s);
}

static void rollback_and_lost_segment_change_nothing(void **state) {
    (void)state;
    struct recorder rec = {0};
    cr_store *s = make_store(&rec);
    put(s, "k1", "ssd", true);
    struct cr_store_object_view v;
    view(s, "k1", &v);
    struct cr_store_task_reservation res;
    struct cr_store_key k;
    assert_int_equal(cr_store_offload_begin(s, v.object_id, v.generation, 10, &res, &k), CR_OK);
    int events = rec.count;
    cr_store_offload_rollback(s, &res.ref);
    assert_int_equal(rec.count, events);
    bool known = false;
    /* evictable again; a check of a live offload from its owner is fine */
    assert_int_equal(cr_store_offload_begin(s, v.object_id, v.generation, 11, &res, &k), CR_OK);
    assert_int_equal(cr_store_offload_check(s, &res.ref, &SSD_SERVER, &known), CR_OK);
    assert_true(known);
    /* the server's segment goes: the check ends the offload, the commit of a
     * late report is refused */
    assert_int_equal(cr_store_unmount_segment(s, &SSD_SERVER, "ssd", NULL), CR_OK);
    assert_int_equal(cr_store_offload_check(s, &res.ref, &SSD_SERVER, &known),
                     CR_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(cr_store_offload_commit(s, &res.ref, 7, 12), CR_ERR_OBJECT_NOT_FOUND);
    struct cr_store_stats st;
    cr_store_get_stats(s, 12, &st);
    assert_int_equal(st.local_disk_replicas, 0);
    assert_int_equal(st.offloads_done, 0);
    assert_true(st.offloads_failed >= 2);
    cr_store_destroy(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(only_ssd_segments_with_a_checksum_qualify),
        cmocka_unit_test(commit_records_local_disk_and_frees_memory),
        cmocka_unit_test(rollback_and_lost_segment_change_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
