/* Mooncake's flags for its master endpoint (src/daemon/config.c,
 * docs/mooncake.md "Ports"): --rpc_port/--port and --rpc_address HOST
 * address --mooncake-rpc-address, and `--rpc_port 50051`, the one flag a
 * Mooncake launch needs, moves crescent's ZMQ endpoint off its default
 * 50051 only while that endpoint is at its default. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/config.h"

static struct cr_daemon_config parse_ok(int argc, const char **argv) {
    struct cr_daemon_config c;
    cr_daemon_config_default(&c);
    char error[CR_CONFIG_ERROR_MAX] = "";
    assert_int_equal(cr_daemon_config_parse(argc, (char **)argv, &c, error), CR_CONFIG_RUN);
    return c;
}

static void test_defaults(void **state) {
    (void)state;
    const char *argv[] = {"crescentd"};
    struct cr_daemon_config c = parse_ok(1, argv);
    assert_string_equal(c.mooncake_rpc_address, "127.0.0.1:50053");
    assert_string_equal(c.rpc_address, "tcp://127.0.0.1:50051");
    assert_false(c.enable_http_metadata_server);
    assert_int_equal(c.http_metadata_server_port, 8080);
    assert_string_equal(c.http_metadata_server_host, "127.0.0.1");
}

static void test_rpc_port_50051_moves_the_default_zmq_endpoint(void **state) {
    (void)state;
    const char *argv[] = {"crescentd", "--rpc_port", "50051"};
    struct cr_daemon_config c = parse_ok(3, argv);
    assert_string_equal(c.mooncake_rpc_address, "127.0.0.1:50051");
    assert_string_equal(c.rpc_address, "tcp://127.0.0.1:50053");
}

static void test_named_zmq_endpoint_stays(void **state) {
    (void)state;
    const char *argv[] = {"crescentd", "--port", "50051", "--rpc-address", "tcp://127.0.0.1:7000"};
    struct cr_daemon_config c = parse_ok(5, argv);
    assert_string_equal(c.mooncake_rpc_address, "127.0.0.1:50051");
    assert_string_equal(c.rpc_address, "tcp://127.0.0.1:7000");
}

static void test_host_and_port(void **state) {
    (void)state;
    const char *argv[] = {"crescentd", "--rpc_address", "0.0.0.0", "--port", "6000",
                          "--enable_http_metadata_server=true", "--http_metadata_server_port",
                          "18080"};
    struct cr_daemon_config c = parse_ok(8, argv);
    assert_string_equal(c.mooncake_rpc_address, "0.0.0.0:6000");
    assert_string_equal(c.rpc_address, "tcp://127.0.0.1:50051");
    assert_true(c.enable_http_metadata_server);
    assert_int_equal(c.http_metadata_server_port, 18080);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_rpc_port_50051_moves_the_default_zmq_endpoint),
        cmocka_unit_test(test_named_zmq_endpoint_stays),
        cmocka_unit_test(test_host_and_port),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
