/* Unit tests for a PutStart that evicts for its own room (store_objects.c,
 * put_evictions_max): a steady put load into a full store is not refused
 * between two eviction passes, and what cannot go stays; on a segment whose
 * server has an SSD tier only objects with a copy elsewhere go, the others
 * wait for the pass's offload. */
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
#define SEGMENT (16u * SIZE)
#define SUM 0x5eedull /* every put records a checksum, as libcrescent's do */
static const struct cr_uuid OWNER = {{1}};

static cr_store *make(uint32_t put_evictions_max) {
    cr_store_config cfg;
    cr_store_config_default(&cfg);
    cfg.max_objects = 1024;
    cfg.max_segments = 4;
    cfg.put_evictions_max = put_evictions_max;
    cr_store *s;
    assert_int_equal(cr_store_create(&cfg, NULL, &s), CR_OK);
    struct cr_store_segment_params p = {"seg0", 0x10000000ull, SEGMENT, "h:1", "tcp"};
    assert_int_equal(cr_store_mount_segment(s, &OWNER, &p, 0), CR_OK);
    return s;
}

static int put(cr_store *s, uint32_t i, uint64_t size, bool end, uint64_t now) {
    char key[32];
    int len = snprintf(key, sizeof(key), "k%u", i);
    struct cr_store_put_params p = {.key = key, .key_len = (uint32_t)len, .value_length = size,
                                    .replica_num = 1};
    struct cr_store_replica_list list;
    int rc = cr_store_put_start(s, &OWNER, &p, now, &list);
    struct cr_store_key k;
    cr_store_key_make(NULL, key, (uint32_t)len, &k);
    uint64_t sum = SUM;
    if (rc == CR_OK && end) rc = cr_store_put_end_k(s, &OWNER, &k, &sum, now);
    return rc;
}

static bool exists(cr_store *s, uint32_t i, uint64_t now, struct cr_store_object_view *v) {
    char key[32];
    int len = snprintf(key, sizeof(key), "k%u", i);
    return cr_store_object_find(s, NULL, key, (uint32_t)len, now, v) == CR_OK;
}

/* What a store server's SSD holds of object i (its re-registration's call). */
static void on_ssd(cr_store *s, uint32_t i, uint64_t now) {
    char key[32];
    int len = snprintf(key, sizeof(key), "k%u", i);
    struct cr_store_key k;
    cr_store_key_make(NULL, key, (uint32_t)len, &k);
    bool created = true;
    assert_int_equal(cr_store_local_disk_register(s, &k, "seg0", &OWNER, 100 + i, SIZE, SUM, now,
                                                  &created),
                     CR_OK);
    assert_false(created);
}

static struct cr_store_stats stats(cr_store *s) {
    struct cr_store_stats st;
    cr_store_get_stats(s, 0, &st);
    return st;
}

static void test_steady_puts_into_a_full_store_all_succeed(void **state) {
    (void)state;
    cr_store *s = make(64);
    for (uint32_t i = 0; i < 200; i++) assert_int_equal(put(s, i, SIZE, true, i), CR_OK);
    struct cr_store_stats st = stats(s);
    assert_true(st.object_count <= SEGMENT / SIZE);
    assert_true(st.room_evictions >= 200 - SEGMENT / SIZE);
    /* The newest is there; the oldest went. */
    char key[32];
    snprintf(key, sizeof(key), "k%u", 199);
    struct cr_store_object_view v;
    assert_int_equal(cr_store_object_find(s, NULL, key, (uint32_t)strlen(key), 300, &v), CR_OK);
    assert_int_equal(cr_store_object_find(s, NULL, "k0", 2, 300, &v), CR_ERR_OBJECT_NOT_FOUND);
    cr_store_destroy(s);
}

static void test_without_put_evictions_a_full_store_refuses(void **state) {
    (void)state;
    cr_store *s = make(0);
    uint32_t i = 0;
    while (put(s, i, SIZE, true, i) == CR_OK) i++;
    assert_int_equal(i, SEGMENT / SIZE);
    assert_int_equal(put(s, 1000, SIZE, true, 1000), CR_ERR_NO_AVAILABLE_HANDLE);
    assert_int_equal(stats(s).room_evictions, 0);
    cr_store_destroy(s);
}

static void test_nothing_evictable_or_never_fits_is_refused_at_once(void **state) {
    (void)state;
    cr_store *s = make(64);
    /* Puts still in flight cannot be evicted. */
    for (uint32_t i = 0; i < SEGMENT / SIZE; i++) assert_int_equal(put(s, i, SIZE, false, i), CR_OK);
    assert_int_equal(put(s, 100, SIZE, true, 100), CR_ERR_NO_AVAILABLE_HANDLE);
    assert_int_equal(stats(s).room_evictions, 0);
    assert_int_equal(stats(s).object_count, SEGMENT / SIZE);
    cr_store_destroy(s);
    /* Larger than the segment: nothing is evicted for it. */
    s = make(64);
    assert_int_equal(put(s, 0, SIZE, true, 0), CR_OK);
    assert_int_equal(put(s, 1, 2ull * SEGMENT, true, 1), CR_ERR_NO_AVAILABLE_HANDLE);
    assert_non_null(strstr(cr_store_last_error(s), "can never fit"));
    assert_int_equal(stats(s).object_count, 1);
    cr_store_destroy(s);
}

/* seg0's server has an SSD tier: of a full store only the objects that
 * already have a local_disk copy go for a put (they stay, on the SSD); the
 * others would be dropped, so the put is refused (the pass offloads them)
 * and succeeds once an offload has freed memory. */
static void test_a_put_drops_nothing_an_ssd_could_keep(void **state) {
    (void)state;
    cr_store *s = make(64);
    assert_int_equal(cr_store_segment_set_ssd_capacity(s, "seg0", 1ull << 30), CR_OK);
    const uint32_t full = SEGMENT / SIZE;
    for (uint32_t i = 0; i < full; i++) assert_int_equal(put(s, i, SIZE, true, i), CR_OK);
    for (uint32_t i = 0; i < 4; i++) on_ssd(s, i, 20);
    struct cr_store_object_view v;
    for (uint32_t n = 0; n < 4; n++) /* room: one copied object's memory each */
        assert_int_equal(put(s, 100 + n, SIZE, true, 30 + n), CR_OK);
    assert_int_equal(stats(s).room_evictions, 4);
    assert_int_equal(put(s, 104, SIZE, true, 40), CR_ERR_NO_AVAILABLE_HANDLE);
    assert_non_null(strstr(cr_store_last_error(s), "SSD"));
    assert_true(cr_store_no_room_evictable(s)); /* the caller asks for a pass */
    assert_int_equal(stats(s).room_evictions, 4);
    for (uint32_t i = 0; i < full; i++) {
        assert_true(exists(s, i, 41, &v)); /* nothing dropped */
        assert_int_equal(v.replicas.count, 1); /* k0..k3: on the SSD only; others in memory */
        assert_int_equal(v.replicas.replicas[0].medium,
                         i < 4 ? CR_MEDIUM_LOCAL_DISK : CR_MEDIUM_MEMORY);
    }
    /* The pass's offload of k4 (begin, the server's write, commit) frees
     * its memory: the retried put fits. */
    assert_true(exists(s, 4, 42, &v));
    struct cr_store_task_reservation res;
    struct cr_store_key key;
    assert_int_equal(cr_store_offload_begin(s, v.object_id, v.generation, 42, &res, &key), CR_OK);
    assert_int_equal(cr_store_offload_commit(s, &res.ref, 7, 43), CR_OK);
    assert_int_equal(put(s, 104, SIZE, true, 44), CR_OK);
    assert_int_equal(stats(s).object_count, full + 5);
    cr_store_destroy(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_steady_puts_into_a_full_store_all_succeed),
        cmocka_unit_test(test_without_put_evictions_a_full_store_refuses),
        cmocka_unit_test(test_nothing_evictable_or_never_fits_is_refused_at_once),
        cmocka_unit_test(test_a_put_drops_nothing_an_ssd_could_keep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
