/* A store server's SSD files parked while it is away (src/core/store_ssd_park.c,
 * docs/tiers.md "What the server reports"): when its segment goes, the master
 * keeps a record of the local_disk replicas it had there, and a file the
 * server re-registers after its restart re-creates its object only when it
 * was parked and its key was neither put nor removed since.  A key removed
 * while its only copy sat on the SSD, removed while the server was away, or
 * put again with other bytes, is refused (the server deletes the file); a
 * segment the master has no record of takes its files back as before. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/store.h"
#include "core/store_ssd_park.h"
#include "crescent/error.h"

#define OBJ 4096ull
static const struct cr_uuid PLAIN = {{1}};
static const struct cr_uuid SSD_SERVER = {{2}};
static const struct cr_uuid SSD_SERVER_AGAIN = {{3}};

static void mount(cr_store *s, const struct cr_uuid *owner, const char *name, uint64_t base,
                  bool ssd) {
    struct cr_store_segment_params b = {name, base, 1 << 20, "10.0.0.2:7000", "tcp"};
    assert_int_equal(cr_store_mount_segment(s, owner, &b, 0), CR_OK);
    if (ssd) assert_int_equal(cr_store_segment_set_ssd_capacity(s, name, 1ull << 30), CR_OK);
}

static cr_store *make_store(void) {
    cr_store_config cfg;
    cr_store_config_default(&cfg);
    cfg.max_objects = 1024;
    cfg.max_segments = 8;
    cfg.max_allocations_per_segment = 1024;
    cr_store *s = NULL;
    assert_int_equal(cr_store_create(&cfg, NULL, &s), CR_OK);
    mount(s, &SSD_SERVER, "ssd", 2ull << 32, true);
    mount(s, &PLAIN, "mem", 3ull << 32, false);
    return s;
}

static struct cr_store_key key_of(const char *key) {
    struct cr_store_key k;
    cr_store_key_make(NULL, key, (uint32_t)strlen(key), &k);
    return k;
}

static void put_on(cr_store *s, const char *key, const char *segment, uint64_t sum) {
    struct cr_store_replica_list l;
    struct cr_store_put_params p = {.key = key, .key_len = (uint32_t)strlen(key),
                                    .value_length = OBJ, .replica_num = 1,
                                    .preferred_segment = segment};
    assert_int_equal(cr_store_put_start(s, &PLAIN, &p, 1, &l), CR_OK);
    struct cr_store_key k = key_of(key);
    assert_int_equal(cr_store_put_end_k(s, &PLAIN, &k, &sum, 1), CR_OK);
}

/* Puts key on "ssd" and offloads it to file `position`: SSD only then. */
static void offloaded(cr_store *s, const char *key, uint64_t position) {
    put_on(s, key, "ssd", 0x77);
    struct cr_store_object_view v;
    assert_int_equal(cr_store_object_find(s, NULL, key, (uint32_t)strlen(key), 2, &v), CR_OK);
    struct cr_store_task_reservation res;
    struct cr_store_key k;
    assert_int_equal(cr_store_offload_begin(s, v.object_id, v.generation, 10, &res, &k), CR_OK);
    assert_int_equal(cr_store_offload_commit(s, &res.ref, position, 10), CR_OK);
}

static int reg(cr_store *s, const char *key, uint64_t position, uint64_t sum) {
    struct cr_store_key k = key_of(key);
    bool created = false;
    return cr_store_local_disk_register(s, &k, "ssd", &SSD_SERVER_AGAIN, position, OBJ, sum, 30,
                                        &created);
}

static bool readable(cr_store *s, const char *key) {
    struct cr_store_object_view v;
    return cr_store_object_find(s, NULL, key, (uint32_t)strlen(key), 31, &v) == CR_OK &&
           v.complete;
}

static void only_parked_files_of_untouched_keys_come_back(void **state) {
    (void)state;
    cr_store *s = make_store();
    offloaded(s, "kept", 1);
    offloaded(s, "removed-up", 2);
    offloaded(s, "removed-away", 3);
    offloaded(s, "put-again", 4);
    offloaded(s, "lost-then-put", 5);
    assert_int_equal(cr_store_remove(s, NULL, "removed-up", 10, true, 11), CR_OK);
    /* the server goes: its segment, and the objects only it held, with it */
    uint64_t freed = 0;
    assert_int_equal(cr_store_unmount_segment(s, &SSD_SERVER, "ssd", &freed), CR_OK);
    assert_int_equal(freed, 4);
    uint64_t parked = 0, overflow = 0;
    cr_store_ssd_park_counts(s, &parked, &overflow);
    assert_int_equal(parked, 4);
    /* meanwhile: a removal of a key already gone, a new put of another */
    assert_int_equal(cr_store_remove(s, NULL, "removed-away", 12, true, 12),
                     CR_ERR_OBJECT_NOT_FOUND);
    put_on(s, "put-again", "mem", 0x88);
    put_on(s, "lost-then-put", "mem", 0x99);
    assert_int_equal(cr_store_remove(s, NULL, "lost-then-put", 13, true, 13), CR_OK);
    /* it comes back under a new client id and re-registers its five files */
    mount(s, &SSD_SERVER_AGAIN, "ssd", 2ull << 32, true);
    assert_int_equal(reg(s, "kept", 1, 0x77), CR_OK);
    assert_int_equal(reg(s, "kept", 1, 0x77), CR_OK); /* known now */
    assert_int_equal(reg(s, "removed-up", 2, 0x77), CR_ERR_INVALID_PARAMS);
    assert_int_equal(reg(s, "removed-away", 3, 0x77), CR_ERR_INVALID_PARAMS);
    assert_int_equal(reg(s, "put-again", 4, 0x77), CR_ERR_INVALID_PARAMS); /* the new put's bytes */
    assert_int_equal(reg(s, "lost-then-put", 5, 0x77), CR_ERR_INVALID_PARAMS);
    assert_true(readable(s, "kept"));
    assert_false(readable(s, "removed-up"));
    assert_false(readable(s, "removed-away"));
    assert_false(readable(s, "lost-then-put"));
    struct cr_store_object_view v;
    assert_int_equal(cr_store_object_find(s, NULL, "put-again", 9, 31, &v), CR_OK);
    assert_true(v.replicas.checksum == 0x88);
    /* a file at another position than the one parked is not that file */
    offloaded(s, "other", 6);
    assert_int_equal(cr_store_unmount_segment(s, &SSD_SERVER_AGAIN, "ssd", &freed), CR_OK);
    mount(s, &SSD_SERVER_AGAIN, "ssd", 2ull << 32, true);
    assert_int_equal(reg(s, "other", 7, 0x77), CR_ERR_INVALID_PARAMS);
    assert_int_equal(reg(s, "other", 6, 0x76), CR_ERR_INVALID_PARAMS);
    assert_int_equal(reg(s, "other", 6, 0x77), CR_OK);
    cr_store_destroy(s);
}

static void a_segment_without_a_record_takes_its_files_back(void **state) {
    (void)state;
    cr_store *s = make_store();
    /* first seen by this master (it restarted without state): the old rule */
    mount(s, &SSD_SERVER_AGAIN, "ssd2", 4ull << 32, true);
    struct cr_store_key k = key_of("from-before");
    bool created = false;
    assert_int_equal(cr_store_local_disk_register(s, &k, "ssd2", &SSD_SERVER_AGAIN, 9, OBJ, 0x77,
                                                  30, &created),
                     CR_OK);
    assert_true(created);
    /* a segment restored from the log has a record: its objects came back with it */
    cr_store_ssd_park_know(s, "ssd");
    assert_int_equal(cr_store_unmount_segment(s, &SSD_SERVER, "ssd", NULL), CR_OK);
    mount(s, &SSD_SERVER_AGAIN, "ssd", 2ull << 32, true);
    assert_int_equal(reg(s, "removed-before-the-restart", 1, 0x77), CR_ERR_INVALID_PARAMS);
    /* RemoveAll forgets every parked file */
    offloaded(s, "a", 2);
    assert_int_equal(cr_store_unmount_segment(s, &SSD_SERVER_AGAIN, "ssd", NULL), CR_OK);
    uint64_t parked = 0, overflow = 0;
    cr_store_ssd_park_counts(s, &parked, &overflow);
    assert_int_equal(parked, 1);
    (void)cr_store_remove_all(s, NULL, true, 40);
    cr_store_ssd_park_counts(s, &parked, &overflow);
    assert_int_equal(parked, 0);
    cr_store_destroy(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(only_parked_files_of_untouched_keys_come_back),
        cmocka_unit_test(a_segment_without_a_record_takes_its_files_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
