/* crescentd's role in Mooncake's HA words (src/http/mooncake_ha.c): each of
 * crescent's roles and the election's view onto /role, /ha_status, /leader. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "ha/gate.h"
#include "http/mooncake_ha.h"

static const char *const KEY_A =
    "{\"rpc\":\"tcp://127.0.0.1:24201\",\"mooncake\":\"127.0.0.1:24301\",\"http\":\"127.0.0.1:1\"}";
static const char *const KEY_NO_MOONCAKE = "{\"rpc\":\"tcp://10.0.0.2:50051\"}";

static struct cr_role_status role(enum cr_role r) {
    struct cr_role_status s;
    memset(&s, 0, sizeof(s));
    s.role = r;
    return s;
}

static struct cr_ha_view *view(bool leads, int64_t term, const char *leader, const char *self) {
    static struct cr_ha_view v;
    memset(&v, 0, sizeof(v));
    v.leader = leads, v.term = term;
    snprintf(v.leader_value, sizeof(v.leader_value), "%s", leader);
    snprintf(v.self, sizeof(v.self), "%s", self);
    return &v;
}

static void test_lone_master_is_leader_serving_without_a_view(void **unused) {
    (void)unused;
    struct cr_role_status s = role(CR_ROLE_NONE);
    struct cr_mc_ha ha;
    cr_mc_ha_map(&s, NULL, &ha);
    assert_string_equal(ha.role, "leader");
    assert_string_equal(ha.state, "serving");
    assert_true(ha.service_active);
    assert_false(ha.present);
}

static void test_elected_leader_names_its_mooncake_address_and_term(void **unused) {
    (void)unused;
    struct cr_role_status s = role(CR_ROLE_LEADER);
    s.term = 7;
    struct cr_mc_ha ha;
    cr_mc_ha_map(&s, view(true, 7, "", KEY_A), &ha); /* the key not read back yet: self */
    assert_string_equal(ha.role, "leader");
    assert_string_equal(ha.state, "serving");
    assert_true(ha.present);
    assert_string_equal(ha.leader_address, "127.0.0.1:24301");
    assert_int_equal(ha.view_version, 7);
    /* Without the Mooncake endpoint: the RPC address, its scheme dropped. */
    cr_mc_ha_map(&s, view(true, 7, KEY_NO_MOONCAKE, KEY_NO_MOONCAKE), &ha);
    assert_string_equal(ha.leader_address, "10.0.0.2:50051");
}

static void test_standby_states(void **unused) {
    (void)unused;
    struct cr_mc_ha ha;
    /* Before the election: nobody known. */
    struct cr_role_status s = role(CR_ROLE_STANDBY);
    cr_mc_ha_map(&s, view(false, 0, "", KEY_A), &ha);
    assert_string_equal(ha.role, "standby");
    assert_string_equal(ha.state, "starting");
    assert_false(ha.service_active);
    assert_false(ha.present);
    /* A leader known, its stream not connected yet. */
    snprintf(s.leader, sizeof(s.leader), "127.0.0.1:9000");
    cr_mc_ha_map(&s, view(false, 3, KEY_NO_MOONCAKE, KEY_A), &ha);
    assert_string_equal(ha.state, "catching_up");
    assert_true(ha.present);
    assert_string_equal(ha.leader_address, "10.0.0.2:50051");
    assert_int_equal(ha.view_version, 3);
    /* Connected but behind. */
    s.connected = true, s.lag_records = 5;
    cr_mc_ha_map(&s, view(false, 3, KEY_NO_MOONCAKE, KEY_A), &ha);
    assert_string_equal(ha.state, "catching_up");
    /* Caught up. */
    s.lag_records = 0;
    cr_mc_ha_map(&s, view(false, 3, KEY_NO_MOONCAKE, KEY_A), &ha);
    assert_string_equal(ha.state, "standby");
    assert_false(ha.service_active);
    /* No stream configured: the election's leader is enough. */
    struct cr_role_status plain = role(CR_ROLE_STANDBY);
    cr_mc_ha_map(&plain, view(false, 3, KEY_NO_MOONCAKE, KEY_A), &ha);
    assert_string_equal(ha.state, "standby");
    /* A manual pair (no election): no view. */
    cr_mc_ha_map(&s, NULL, &ha);
    assert_string_equal(ha.state, "standby");
    assert_false(ha.present);
}

static void test_fenced_leader_is_no_longer_serving(void **unused) {
    (void)unused;
    struct cr_role_status s = role(CR_ROLE_LEADER);
    s.fenced = true, s.term = 3, s.highest_term = 9;
    struct cr_mc_ha ha;
    cr_mc_ha_map(&s, view(false, 9, KEY_NO_MOONCAKE, KEY_A), &ha);
    assert_string_equal(ha.role, "standby");
    assert_string_equal(ha.state, "standby");
    assert_false(ha.service_active);
    assert_int_equal(ha.view_version, 9);
}

static void test_a_malformed_key_is_no_view(void **unused) {
    (void)unused;
    struct cr_role_status s = role(CR_ROLE_STANDBY);
    struct cr_mc_ha ha;
    static const char *const bad[] = {"not json", "{}", "{\"rpc\":5}", "{\"rpc\":\"tcp://\"}"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_mc_ha_map(&s, view(false, 4, bad[i], KEY_A), &ha);
        assert_false(ha.present);
        assert_int_equal(ha.view_version, 0);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lone_master_is_leader_serving_without_a_view),
        cmocka_unit_test(test_elected_leader_names_its_mooncake_address_and_term),
        cmocka_unit_test(test_standby_states),
        cmocka_unit_test(test_fenced_leader_is_no_longer_serving),
        cmocka_unit_test(test_a_malformed_key_is_no_view),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
