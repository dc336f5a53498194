/* Unit tests for the master's capabilities (src/rpc/rpc_caps.c with the
 * store's segment keys, src/core/store_segments.c): a keyed segment's
 * handles are signed for exactly their range, mode and expiry, which the
 * store server's check (core/xfer_cap.h) accepts, and nothing else; a
 * segment without a key, or whose key was dropped with an unmount, gets
 * none. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/store.h"
#include "core/xfer_cap.h"
#include "crescent/error.h"
#include "rpc/rpc_caps.h"

#define SIZE 4096u
#define NOW 1800000000000ull /* Unix ms */
static const struct cr_uuid OWNER = {{7}};
static const uint8_t KEY[CR_CAP_KEY_BYTES] = {1, 2, 3, 4, 5};

struct fixture {
    cr_store *store;
};

static int setup(void **state) {
    static struct fixture f;
    cr_store_config cfg;
    cr_store_config_default(&cfg);
    cfg.max_objects = 64;
    cfg.max_segments = 4;
    cfg.max_allocations_per_segment = 16;
    assert_int_equal(cr_store_create(&cfg, NULL, &f.store), CR_OK);
    struct cr_store_segment_params keyed = {"keyed", 0x100000, 8 * SIZE, "h:1", "tcp"};
    struct cr_store_segment_params plain = {"plain", 0x900000, 8 * SIZE, "h:2", "tcp"};
    assert_int_equal(cr_store_mount_segment(f.store, &OWNER, &keyed, 0), CR_OK);
    assert_int_equal(cr_store_mount_segment(f.store, &OWNER, &plain, 0), CR_OK);
    assert_int_equal(cr_store_segment_set_key(f.store, "keyed", KEY), CR_OK);
    *state = &f;
    return 0;
}

static int teardown(void **state) {
    struct fixture *f = *state;
    cr_store_destroy(f->store);
    return 0;
}

static void put_on(struct fixture *f, const char *key, const char *segment,
                   struct cr_store_replica_list *list) {
    struct cr_store_put_params put = {.key = key, .key_len = (uint32_t)strlen(key),
                                      .value_length = SIZE, .replica_num = 1,
                                      .preferred_segment = segment};
    assert_int_equal(cr_store_put_start(f->store, &OWNER, &put, 0, list), CR_OK);
    assert_string_equal(list->replicas[0].segment_name, segment);
}

static enum cr_cap_verdict check(const struct cr_store_replica_desc *d, uint8_t mode,
                                 uint64_t addr, uint64_t len, uint64_t now_ms) {
    struct cr_cap cap;
    assert_int_equal(cr_cap_decode(d->cap, &cap), 0);
    return cr_cap_check(KEY, "keyed", 5, &cap, mode, addr, len, now_ms, 0);
}

static void test_write_capability_scoped_to_the_put(void **state) {
    struct fixture *f = *state;
    struct cr_store_replica_list list;
    put_on(f, "w", "keyed", &list);
    cr_rpc_caps_sign(&list, CR_CAP_WRITE, 2000, NOW);
    const struct cr_store_replica_desc *d = &list.replicas[0];
    assert_true(d->has_cap);
    assert_int_equal(check(d, CR_CAP_WRITE, d->buffer, SIZE, NOW), CR_CAP_OK);
    assert_int_equal(check(d, CR_CAP_WRITE, d->buffer, SIZE, NOW + 2000), CR_CAP_OK);
    assert_int_equal(check(d, CR_CAP_WRITE, d->buffer, SIZE, NOW + 2001), CR_CAP_EXPIRED);
    assert_int_equal(check(d, CR_CAP_READ, d->buffer, SIZE, NOW), CR_CAP_WRONG_MODE);
    assert_int_equal(check(d, CR_CAP_WRITE, d->buffer, SIZE + 1, NOW), CR_CAP_OUT_OF_RANGE);
    assert_int_equal(check(d, CR_CAP_WRITE, d->buffer - 1, 1, NOW), CR_CAP_OUT_OF_RANGE);
    /* Another key (the owner restarted, or another segment's) does not verify it. */
    struct cr_cap cap;
    uint8_t other[CR_CAP_KEY_BYTES] = {9};
    assert_int_equal(cr_cap_decode(d->cap, &cap), 0);
    assert_int_equal(cr_cap_check(other, "keyed", 5, &cap, CR_CAP_WRITE, d->buffer, SIZE, NOW, 0),
                     CR_CAP_BAD_MAC);
}

static void test_read_capability_lives_as_long_as_the_lease(void **state) {
    struct fixture *f = *state;
    struct cr_store_replica_list list;
    put_on(f, "r", "keyed", &list);
    assert_int_equal(cr_store_put_end(f->store, &OWNER, NULL, "r", 1, 0), CR_OK);
    assert_int_equal(cr_store_get_replica_list(f->store, NULL, "r", 1, 10, &list), CR_OK);
    assert_true(list.lease_ms > 0);
    cr_rpc_caps_sign(&list, CR_CAP_READ, list.lease_ms, NOW);
    const struct cr_store_replica_desc *d = &list.replicas[0];
    assert_true(d->has_cap);
    assert_int_equal(check(d, CR_CAP_READ, d->buffer, SIZE, NOW + list.lease_ms), CR_CAP_OK);
    assert_int_equal(check(d, CR_CAP_READ, d->buffer + 100, 8, NOW), CR_CAP_OK);
    assert_int_equal(check(d, CR_CAP_READ, d->buffer, SIZE, NOW + list.lease_ms + 1),
                     CR_CAP_EXPIRED);
    assert_int_equal(check(d, CR_CAP_WRITE, d->buffer, SIZE, NOW), CR_CAP_WRONG_MODE);
}

static void test_no_key_no_capability(void **state) {
    struct fixture *f = *state;
    struct cr_store_replica_list list;
    put_on(f, "p", "plain", &list);
    memset(list.replicas[0].cap, 0xee, sizeof(list.replicas[0].cap));
    list.replicas[0].has_cap = true; /* whatever was there: signing clears it */
    cr_rpc_caps_sign(&list, CR_CAP_WRITE, 2000, NOW);
    assert_false(list.replicas[0].has_cap);
    assert_int_equal(cr_store_segment_set_key(f->store, "nosuch", KEY),
                     CR_ERR_SEGMENT_NOT_FOUND);
}

static void test_unmount_drops_the_key(void **state) {
    struct fixture *f = *state;
    assert_int_equal(cr_store_unmount_segment(f->store, &OWNER, "keyed", NULL), CR_OK);
    struct cr_store_segment_params keyed = {"keyed", 0x100000, 8 * SIZE, "h:1", "tcp"};
    assert_int_equal(cr_store_mount_segment(f->store, &OWNER, &keyed, 0), CR_OK);
    struct cr_store_replica_list list;
    put_on(f, "again", "keyed", &list);
    cr_rpc_caps_sign(&list, CR_CAP_WRITE, 2000, NOW);
    assert_false(list.replicas[0].has_cap); /* mounted again without a key */
    /* An identical remount with the key (the owner after a master restart) brings it back. */
    assert_int_equal(cr_store_remount_segment(f->store, &OWNER, &keyed, 0), CR_OK);
    assert_int_equal(cr_store_segment_set_key(f->store, "keyed", KEY), CR_OK);
    put_on(f, "again2", "keyed", &list);
    cr_rpc_caps_sign(&list, CR_CAP_WRITE, 2000, NOW);
    assert_true(list.replicas[0].has_cap);
    assert_int_equal(check(&list.replicas[0], CR_CAP_WRITE, list.replicas[0].buffer, SIZE, NOW),
                     CR_CAP_OK);
}

/* An SSD (local_disk) replica is read from the server's read-only segment
 * "<segment>#ssd" at its position: its capability names that segment and
 * that range, is read-only, and a name too long to sign goes unsigned. */
static void test_local_disk_capability_names_the_ssd_segment(void **state) {
    (void)state;
    struct cr_store_replica_desc d = {.segment_name = "keyed", .buffer = 42, .size = SIZE,
                                      .medium = CR_MEDIUM_LOCAL_DISK, .cap_key = KEY};
    cr_rpc_caps_sign_one(&d, CR_CAP_READ, NOW + 500);
    assert_true(d.has_cap);
    struct cr_cap cap;
    assert_int_equal(cr_cap_decode(d.cap, &cap), 0);
    assert_int_equal(cr_cap_check(KEY, "keyed#ssd", 9, &cap, CR_CAP_READ, 42, SIZE, NOW, 0),
                     CR_CAP_OK);
    assert_int_equal(cr_cap_check(KEY, "keyed#ssd", 9, &cap, CR_CAP_READ, 43, SIZE, NOW, 0),
                     CR_CAP_OUT_OF_RANGE);
    assert_int_equal(cr_cap_check(KEY, "keyed#ssd", 9, &cap, CR_CAP_READ, 42, SIZE, NOW + 501, 0),
                     CR_CAP_EXPIRED);
    /* Not a capability for the memory segment of the same name. */
    assert_int_equal(cr_cap_check(KEY, "keyed", 5, &cap, CR_CAP_READ, 42, SIZE, NOW, 0),
                     CR_CAP_BAD_MAC);
    /* Never a write one: the SSD segment takes no writes. */
    cr_rpc_caps_sign_one(&d, CR_CAP_WRITE, NOW + 500);
    assert_false(d.has_cap);
    /* No key, or "<name>#ssd" over 255 bytes: none. */
    d.cap_key = NULL;
    cr_rpc_caps_sign_one(&d, CR_CAP_READ, NOW + 500);
    assert_false(d.has_cap);
    char name[253];
    memset(name, 'n', sizeof(name) - 1);
    name[sizeof(name) - 1] = '\0'; /* 252 bytes: 256 with the suffix */
    d = (struct cr_store_replica_desc){.segment_name = name, .buffer = 42, .size = SIZE,
                                       .medium = CR_MEDIUM_LOCAL_DISK, .cap_key = KEY};
    cr_rpc_caps_sign_one(&d, CR_CAP_READ, NOW + 500);
    assert_false(d.has_cap);
    name[251] = '\0'; /* 251: 255 with it */
    cr_rpc_caps_sign_one(&d, CR_CAP_READ, NOW + 500);
    assert_true(d.has_cap);
    /* A disk replica (a file) gets none. */
    d = (struct cr_store_replica_desc){.segment_name = "", .medium = CR_MEDIUM_DISK,
                                       .file_path = "/x", .cap_key = KEY};
    cr_rpc_caps_sign_one(&d, CR_CAP_READ, NOW + 500);
    assert_false(d.has_cap);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_local_disk_capability_names_the_ssd_segment),
        cmocka_unit_test_setup_teardown(test_write_capability_scoped_to_the_put, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_capability_lives_as_long_as_the_lease, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_no_key_no_capability, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unmount_drops_the_key, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
