/* Unit tests of tenant quotas (src/core/store_quota.c): a tenant is charged
 * its replicas' bytes from PutStart until they go (revoke, remove, unmount),
 * a PutStart past the quota is refused TENANT_QUOTA_EXCEEDED, a policy set
 * later sees what the tenant already holds, effective quotas are shares of
 * the capacity when the requests pass it, and a tenant holding objects keeps
 * its policy.  Injected clock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/store.h"
#include "core/store_tiers.h"
#include "crescent/error.h"

#define KIB 1024ull
#define MIB (1024ull * KIB)

static const struct cr_uuid CLIENT = {{9}};

static cr_store *make(uint64_t segment_bytes) {
    cr_store_config cfg;
    cr_store_config_default(&cfg);
    cr_store *s = NULL;
    assert_int_equal(cr_store_create(&cfg, NULL, &s), CR_OK);
    struct cr_store_segment_params a = {"seg0", 1ull << 40, segment_bytes, "10.0.0.1:1", "tcp"};
    struct cr_store_segment_params b = {"seg1", 1ull << 41, segment_bytes, "10.0.0.2:1", "tcp"};
    assert_int_equal(cr_store_mount_segment(s, &CLIENT, &a, 0), CR_OK);
    assert_int_equal(cr_store_mount_segment(s, &CLIENT, &b, 0), CR_OK);
    return s;
}

static int put(cr_store *s, const char *tenant, const char *key, uint64_t bytes, uint32_t replicas,
               bool end) {
    struct cr_store_replica_list out;
    struct cr_store_put_params p = {.tenant = tenant, .key = key, .key_len = (uint32_t)strlen(key),
                                    .value_length = bytes, .replica_num = replicas};
    int rc = cr_store_put_start(s, &CLIENT, &p, 1, &out);
    if (rc != CR_OK || !end) return rc;
    return cr_store_put_end(s, &CLIENT, tenant, key, (uint32_t)strlen(key), 1);
}

static uint64_t charged(cr_store *s, const char *tenant) {
    struct cr_store_quota_view v;
    assert_int_equal(cr_store_quota_get(s, tenant, &v), CR_OK);
    return v.charged_bytes;
}

static void test_charged_per_replica_and_refused_past_the_quota(void **state) {
    (void)state;
    cr_store *s = make(64 * MIB);
    struct cr_store_quota_view v;
    assert_int_equal(cr_store_quota_set(s, "t1", 40 * KIB, &v), CR_OK);
    assert_int_equal(v.requested_bytes, 40 * KIB);
    assert_int_equal(v.effective_bytes, 40 * KIB);
    assert_int_equal(put(s, "t1", "a", 8 * KIB, 2, true), CR_OK); /* 16 KiB: two replicas */
    assert_int_equal(charged(s, "t1"), 16 * KIB);
    assert_int_equal(put(s, "t1", "b", 16 * KIB, 1, false), CR_OK); /* in flight counts too */
    assert_int_equal(charged(s, "t1"), 32 * KIB);
    assert_int_equal(put(s, "t1", "c", 8 * KIB + 1, 1, true), CR_ERR_TENANT_QUOTA_EXCEEDED);
    assert_non_null(strstr(cr_store_last_error(s), "quota"));
    assert_int_equal(put(s, "t1", "c", 8 * KIB, 1, true), CR_OK); /* exactly full */
    assert_int_equal(put(s, "t1", "d", 0, 1, true), CR_ERR_TENANT_QUOTA_EXCEEDED); /* 1 byte */
    /* Another tenant, and the default one, have no policy: not limited. */
    assert_int_equal(put(s, "t2", "a", 1 * MIB, 1, true), CR_OK);
    assert_int_equal(put(s, NULL, "a", 1 * MIB, 1, true), CR_OK);
    /* Revoke, remove and unmount give the bytes back. */
    assert_int_equal(cr_store_put_revoke(s, &CLIENT, "t1", "b", 1), CR_OK);
    assert_int_equal(charged(s, "t1"), 24 * KIB);
    assert_int_equal(cr_store_remove(s, "t1", "c", 1, false, 2), CR_OK);
    assert_int_equal(charged(s, "t1"), 16 * KIB);
    uint64_t freed = 0;
    assert_int_equal(cr_store_unmount_segment(s, &CLIENT, "seg1", &freed), CR_OK);
    assert_int_equal(charged(s, "t1"), 8 * KIB); /* "a" lost its replica on seg1 */
    cr_store_destroy(s);
}

/* A disk or local_disk replica takes no memory: it charges nothing, and the
 * object's removal takes back its memory replicas' bytes only (crescentd
 * aborted on the charge going below zero when the file tier was on). */
static void test_disk_replicas_charge_nothing(void **state) {
    (void)state;
    cr_store *s = make(64 * MIB);
    struct cr_store_quota_view v;
    assert_int_equal(cr_store_quota_set(s, "t1", 1 * MIB, &v), CR_OK);
    assert_int_equal(put(s, "t1", "a", 8 * KIB, 1, true), CR_OK);
    assert_int_equal(put(s, "t1", "b", 8 * KIB, 1, true), CR_OK);
    struct cr_store_key a, b;
    cr_store_key_make("t1", "a", 1, &a);
    cr_store_key_make("t1", "b", 1, &b);
    assert_int_equal(cr_store_add_disk_replica(s, &a, "/fs/t1/a.obj", 8 * KIB, 0, 2), CR_OK);
    assert_int_equal(cr_store_add_local_disk_replica(s, &b, "seg0", 0, 2), CR_OK);
    assert_int_equal(charged(s, "t1"), 16 * KIB);
    assert_int_equal(cr_store_remove(s, "t1", "a", 1, false, 3), CR_OK);
    assert_int_equal(charged(s, "t1"), 8 * KIB);
    uint32_t dropped = 0;
    assert_int_equal(cr_store_drop_medium(s, &b, CR_MEDIUM_LOCAL_DISK, "seg0", &dropped), CR_OK);
    assert_int_equal(dropped, 1);
    assert_int_equal(charged(s, "t1"), 8 * KIB);
    assert_int_equal(cr_store_remove(s, "t1", "b", 1, false, 4), CR_OK);
    assert_int_equal(charged(s, "t1"), 0);
    cr_store_destroy(s);
}

static void test_policy_set_later_sees_what_is_held(void **state) {
    (void)state;
    cr_store *s = make(64 * MIB);
    assert_int_equal(put(s, "t1", "a", 12 * KIB, 1, true), CR_OK);
    struct cr_store_quota_view v;
    assert_int_equal(cr_store_quota_set(s, "t1", 8 * KIB, &v), CR_OK);
    assert_int_equal(v.charged_bytes, 12 * KIB);
    assert_true(v.over_quota);
    assert_int_equal(put(s, "t1", "b", 1, 1, true), CR_ERR_TENANT_QUOTA_EXCEEDED);
    /* Holding objects, the tenant keeps its policy; emptied, it may go. */
    assert_int_equal(cr_store_quota_delete(s, "t1"), CR_ERR_TENANT_NOT_EMPTY);
    assert_int_equal(cr_store_remove(s, "t1", "a", 1, false, 2), CR_OK);
    assert_int_equal(cr_store_quota_delete(s, "t1"), CR_OK);
    assert_int_equal(cr_store_quota_get(s, "t1", &v), CR_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(cr_store_quota_delete(s, "t1"), CR_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(put(s, "t1", "b", 1 * MIB, 1, true), CR_OK); /* no policy: no limit */
    cr_store_destroy(s);
}

static void test_effective_quota_is_a_share_past_the_capacity(void **state) {
    (void)state;
    cr_store *s = make(1 * MIB); /* two segments: 2 MiB */
    struct cr_store_quota_view v;
    assert_int_equal(cr_store_quota_set(s, "a", 1 * MIB, &v), CR_OK);
    assert_int_equal(v.effective_bytes, 1 * MIB);
    assert_int_equal(cr_store_quota_set(s, "b", 3 * MIB, &v), CR_OK); /* 4 MiB asked of 2 */
    assert_int_equal(v.effective_bytes, 3 * MIB / 2);
    assert_int_equal(cr_store_quota_get(s, "a", &v), CR_OK);
    assert_int_equal(v.effective_bytes, 1 * MIB / 2);
    assert_int_equal(put(s, "a", "k", 1 * MIB / 2 + 1, 1, true), CR_ERR_TENANT_QUOTA_EXCEEDED);
    assert_int_equal(put(s, "a", "k", 1 * MIB / 2, 1, true), CR_OK);
    /* Bounds, and the list. */
    assert_int_equal(cr_store_quota_set(s, "a", 0, &v), CR_ERR_INVALID_PARAMS);
    assert_int_equal(cr_store_quota_set(s, "a", CR_STORE_QUOTA_MAX + 1, &v), CR_ERR_INVALID_PARAMS);
    uint32_t cursor = 0, n = 0;
    while (cr_store_quota_next(s, &cursor, &v)) n++;
    assert_int_equal(n, 2);
    cr_store_destroy(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_charged_per_replica_and_refused_past_the_quota),
        cmocka_unit_test(test_disk_replicas_charge_nothing),
        cmocka_unit_test(test_policy_set_later_sees_what_is_held),
        cmocka_unit_test(test_effective_quota_is_a_share_past_the_capacity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
