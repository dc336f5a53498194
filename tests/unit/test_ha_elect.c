/* The election state machine (src/ha/elect.c) on a controlled clock, and
 * the etcd answer decoder (src/ha/etcd_json.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "crescent/error.h"
#include "ha/elect.h"
#include "ha/etcd_json.h"

static struct cr_etcd_kv key(int64_t create_rev, int64_t lease) {
    struct cr_etcd_kv kv = {.found = true, .create_revision = create_rev,
                            .mod_revision = create_rev, .lease = lease};
    strcpy(kv.key, "crescent/c/leader");
    kv.key_len = strlen(kv.key);
    return kv;
}

/* Runs a standby through an empty key to leadership at term 7 on lease 42
 * granted at `now`. */
static void elect_at(struct cr_elect *e, uint64_t now) {
    uint64_t wake = 0;
    assert_int_equal(cr_elect_next(e, now, &wake), CR_ELECT_OBSERVE);
    struct cr_etcd_kv none = {0};
    cr_elect_observed(e, now, true, &none);
    assert_int_equal(cr_elect_next(e, now, &wake), CR_ELECT_GRANT);
    assert_int_equal(cr_elect_ttl_s(e), 2);
    cr_elect_granted(e, now, true, 42, 2);
    assert_int_equal(cr_elect_next(e, now, &wake), CR_ELECT_CREATE);
    cr_elect_created(e, now, true, true, 7, &none);
    assert_int_equal(e->role, CR_ELECT_LEADER);
    assert_int_equal(e->term, 7);
}

static void test_campaign_wins_and_renews(void **unused) {
    (void)unused;
    struct cr_elect e;
    cr_elect_init(&e, 2000, 1000);
    elect_at(&e, 1000);
    assert_int_equal(e.stats.elections, 1);
    /* Writable until grant send + TTL - margin (200 ms of 2 s). */
    assert_true(cr_elect_writable(&e, 2799));
    assert_false(cr_elect_writable(&e, 2800));
    uint64_t wake = 0;
    assert_int_equal(cr_elect_next(&e, 1000, &wake), CR_ELECT_WAIT);
    assert_int_equal(wake, 1666);
    assert_int_equal(cr_elect_next(&e, 1666, &wake), CR_ELECT_KEEPALIVE);
    cr_elect_renewed(&e, 1666, true, 2);
    assert_true(cr_elect_writable(&e, 3465));
    assert_false(cr_elect_writable(&e, 3466));
    /* After a renewal the leader reads its key. */
    assert_int_equal(cr_elect_next(&e, 1670, &wake), CR_ELECT_OBSERVE);
    struct cr_etcd_kv mine = key(7, 42);
    cr_elect_observed(&e, 1670, true, &mine);
    assert_int_equal(e.role, CR_ELECT_LEADER);
    assert_int_equal(cr_elect_next(&e, 1700, &wake), CR_ELECT_WAIT);
}

/* etcd unreachable: renewals fail; the leader stops being writable before
 * its lease could have ended at etcd (grant sent at 1000, TTL 2 s). */
static void test_leader_fences_itself_when_renewals_fail(void **unused) {
    (void)unused;
    struct cr_elect e;
    cr_elect_init(&e, 2000, 1000);
    elect_at(&e, 1000);
    uint64_t now = 1666, wake = 0;
    while (now < 3000) {
        enum cr_elect_action a = cr_elect_next(&e, now, &wake);
        if (e.role != CR_ELECT_LEADER) break;
        if (a == CR_ELECT_KEEPALIVE) cr_elect_renewed(&e, now, false, 0);
        assert_true(now < 1000 + 2000); /* still leader only while etcd's lease lives */
        now += 50;
    }
    assert_int_equal(e.role, CR_ELECT_STANDBY);
    assert_true(now >= 2800 && now < 3000);
    assert_true(e.stats.renew_failures >= 3);
    assert_int_equal(e.stats.step_downs, 1);
    assert_false(cr_elect_writable(&e, now));
}

/* A process paused past its lease (SIGSTOP): on waking, it is not writable
 * and steps down before it does anything else. */
static void test_paused_leader_steps_down_on_wake(void **unused) {
    (void)unused;
    struct cr_elect e;
    cr_elect_init(&e, 2000, 0);
    elect_at(&e, 0);
    assert_false(cr_elect_writable(&e, 10000));
    uint64_t wake = 0;
    assert_int_equal(cr_elect_next(&e, 10000, &wake), CR_ELECT_OBSERVE);
    assert_int_equal(e.role, CR_ELECT_STANDBY);
    /* Another won term 9 meanwhile: follow it; a late renewal answer changes nothing. */
    struct cr_etcd_kv other = key(9, 77);
    cr_elect_observed(&e, 10000, true, &other);
    cr_elect_renewed(&e, 10000, true, 2);
    assert_int_equal(e.role, CR_ELECT_STANDBY);
    assert_int_equal(e.term, 9);
    assert_false(cr_elect_writable(&e, 10001));
}

static void test_lease_gone_or_key_taken_steps_down(void **unused) {
    (void)unused;
    struct cr_elect e;
    cr_elect_init(&e, 3000, 0);
    uint64_t wake;
    struct cr_etcd_kv none = {0};
    cr_elect_next(&e, 0, &wake);
    cr_elect_observed(&e, 0, true, &none);
    cr_elect_next(&e, 0, &wake);
    cr_elect_granted(&e, 0, true, 5, 3);
    cr_elect_next(&e, 0, &wake);
    cr_elect_created(&e, 0, true, true, 3, &none);
    assert_int_equal(e.role, CR_ELECT_LEADER);
    cr_elect_renewed(&e, 1000, true, 0); /* etcd: no such lease */
    assert_int_equal(e.role, CR_ELECT_STANDBY);
    /* Leader again (new lease), then its key is deleted under it. */
    cr_elect_next(&e, 1000, &wake);
    cr_elect_observed(&e, 1000, true, &none);
    assert_int_equal(cr_elect_next(&e, 1000, &wake), CR_ELECT_GRANT);
    cr_elect_granted(&e, 1000, true, 6, 3);
    cr_elect_created(&e, 1000, true, true, 11, &none);
    assert_int_equal(e.term, 11);
    cr_elect_observed(&e, 1500, true, &none);
    assert_int_equal(e.role, CR_ELECT_STANDBY);
    assert_int_equal(e.stats.step_downs, 2);
    assert_true(e.want_create);
}

static void test_standby_follows_and_counts_failovers(void **unused) {
    (void)unused;
    struct cr_elect e;
    cr_elect_init(&e, 2000, 0);
    uint64_t wake = 0;
    struct cr_etcd_kv a = key(4, 100), none = {0};
    assert_int_equal(cr_elect_next(&e, 0, &wake), CR_ELECT_OBSERVE);
    assert_int_equal(wake, 666);
    cr_elect_observed(&e, 0, true, &a);
    assert_int_equal(e.term, 4);
    assert_int_equal(cr_elect_next(&e, 700, &wake), CR_ELECT_OBSERVE);
    /* The leader's key expired: campaign, lose the race to term 8. */
    cr_elect_observed(&e, 700, true, &none);
    assert_int_equal(cr_elect_next(&e, 700, &wake), CR_ELECT_GRANT);
    cr_elect_granted(&e, 700, true, 55, 2);
    assert_int_equal(cr_elect_next(&e, 701, &wake), CR_ELECT_CREATE);
    struct cr_etcd_kv b = key(8, 200);
    cr_elect_created(&e, 701, true, false, 0, &b);
    assert_int_equal(e.role, CR_ELECT_STANDBY);
    assert_int_equal(e.term, 8);
    assert_int_equal(e.stats.leaders_seen, 1);
    assert_int_equal(cr_elect_next(&e, 702, &wake), CR_ELECT_OBSERVE);
    /* etcd down: retried, never leader. */
    cr_elect_observed(&e, 702, false, &none);
    assert_int_equal(cr_elect_next(&e, 703, &wake), CR_ELECT_WAIT);
    assert_int_equal(wake, 702 + 250);
}

/* A create whose answer was lost: the next read finds the key on our lease
 * (while it lives) and that is our term. */
static void test_lost_create_answer_is_recognised(void **unused) {
    (void)unused;
    struct cr_elect e;
    cr_elect_init(&e, 2000, 0);
    uint64_t wake;
    struct cr_etcd_kv none = {0};
    cr_elect_next(&e, 0, &wake);
    cr_elect_observed(&e, 0, true, &none);
    cr_elect_next(&e, 0, &wake);
    cr_elect_granted(&e, 0, true, 42, 2);
    cr_elect_next(&e, 0, &wake);
    cr_elect_created(&e, 0, false, false, 0, &none);
    assert_int_equal(e.role, CR_ELECT_STANDBY);
    assert_int_equal(cr_elect_next(&e, 300, &wake), CR_ELECT_OBSERVE);
    struct cr_etcd_kv mine = key(13, 42);
    cr_elect_observed(&e, 300, true, &mine);
    assert_int_equal(e.role, CR_ELECT_LEADER);
    assert_int_equal(e.term, 13);
}

static void test_decode_answers(void **unused) {
    (void)unused;
    char err[CR_ETCD_ERROR_MAX];
    int64_t rev = 0, id = 0, ttl = 0;
    struct cr_etcd_kv kv;
    const char *range = "{\"header\":{\"revision\":\"5\"},\"kvs\":[{\"key\":\"Zm9v\","
                        "\"create_revision\":\"2\",\"mod_revision\":\"3\",\"version\":\"1\","
                        "\"value\":\"YmFy\",\"lease\":\"99\"}],\"count\":\"1\"}";
    assert_int_equal(cr_etcd_decode_range(range, strlen(range), &rev, &kv, err), CR_OK);
    assert_true(kv.found);
    assert_string_equal(kv.key, "foo");
    assert_string_equal(kv.value, "bar");
    assert_int_equal(kv.create_revision, 2);
    assert_int_equal(kv.lease, 99);
    assert_int_equal(rev, 5);
    const char *empty = "{\"header\":{\"revision\":\"5\"}}";
    assert_int_equal(cr_etcd_decode_range(empty, strlen(empty), &rev, &kv, err), CR_OK);
    assert_false(kv.found);
    const char *txn_ok = "{\"header\":{\"revision\":\"2\"},\"succeeded\":true,\"responses\":"
                         "[{\"response_put\":{\"header\":{\"revision\":\"2\"}}}]}";
    bool ok = false;
    assert_int_equal(cr_etcd_decode_txn(txn_ok, strlen(txn_ok), &ok, &rev, &kv, err), CR_OK);
    assert_true(ok);
    assert_int_equal(rev, 2);
    const char *grant = "{\"header\":{\"revision\":\"1\"},\"ID\":\"4111120309618345477\",\"TTL\":\"2\"}";
    assert_int_equal(cr_etcd_decode_grant(grant, strlen(grant), &id, &ttl, err), CR_OK);
    assert_int_equal(id, 4111120309618345477LL);
    assert_int_equal(ttl, 2);
    const char *gone = "{\"result\":{\"header\":{\"revision\":\"2\"},\"ID\":\"1\"}}";
    assert_int_equal(cr_etcd_decode_keepalive(gone, strlen(gone), 1, &ttl, err), CR_OK);
    assert_int_equal(ttl, 0);
    uint32_t events = 0;
    bool deleted = false;
    const char *del = "{\"result\":{\"header\":{\"revision\":\"9\"},\"events\":[{\"type\":\"DELETE\","
                      "\"kv\":{\"key\":\"Zm9v\",\"mod_revision\":\"9\"}}]}}";
    assert_int_equal(cr_etcd_decode_watch(del, strlen(del), &events, &deleted, &rev, err), CR_OK);
    assert_int_equal(events, 1);
    assert_true(deleted);
}

static void test_decode_refusals(void **unused) {
    (void)unused;
    static const char *const bad[] = {
        "", "[]", "{", "{\"header\":{}}x",
        "{\"header\":{\"revision\":\"x5\"}}",
        "{\"header\":{\"revision\":\"5\"},\"kvs\":[{\"key\":\"Zm9v\",\"create_revision\":\"2\"},"
        "{\"key\":\"Zm9v\",\"create_revision\":\"2\"}],\"count\":\"2\"}",
        "{\"header\":{\"revision\":\"5\"},\"kvs\":[{\"key\":\"Zm9v!\",\"create_revision\":\"2\"}],"
        "\"count\":\"1\"}",
        "{\"header\":{\"revision\":\"5\"},\"kvs\":[{\"key\":\"Zm9v\"}],\"count\":\"1\"}",
        "{\"header\":{\"revision\":\"5\"},\"kvs\":[{\"key\":\"Zm9v\",\"create_revision\":\"3\","
        "\"mod_revision\":\"2\"}],\"count\":\"1\"}",
        "{\"error\":\"etcdserver: requested lease not found\",\"code\":5}",
        "{\"header\":{\"revision\":\"5\"},\"header\":{\"revision\":\"6\"}}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char err[CR_ETCD_ERROR_MAX] = "";
        int64_t rev;
        struct cr_etcd_kv kv;
        assert_int_equal(cr_etcd_decode_range(bad[i], strlen(bad[i]), &rev, &kv, err),
                         CR_ERR_PROTOCOL);
        assert_true(strlen(err) > 0);
    }
    char err[CR_ETCD_ERROR_MAX];
    int64_t id, ttl;
    const char *zero = "{\"ID\":\"5\"}";
    assert_int_equal(cr_etcd_decode_grant(zero, strlen(zero), &id, &ttl, err), CR_ERR_PROTOCOL);
    const char *other = "{\"result\":{\"header\":{\"revision\":\"2\"},\"ID\":\"2\",\"TTL\":\"5\"}}";
    assert_int_equal(cr_etcd_decode_keepalive(other, strlen(other), 1, &ttl, err), CR_ERR_PROTOCOL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_campaign_wins_and_renews),
        cmocka_unit_test(test_leader_fences_itself_when_renewals_fail),
        cmocka_unit_test(test_paused_leader_steps_down_on_wake),
        cmocka_unit_test(test_lease_gone_or_key_taken_steps_down),
        cmocka_unit_test(test_standby_follows_and_counts_failovers),
        cmocka_unit_test(test_lost_create_answer_is_recognised),
        cmocka_unit_test(test_decode_answers),
        cmocka_unit_test(test_decode_refusals),
    };
    return cmocka_run_group_tests_name("ha_elect", tests, NULL, NULL);
}
