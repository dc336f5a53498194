/* The HTTP front's browser checks (src/http/browsers.c): which Host,
 * Origin and body types pass, and the allow-lists' parsing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "crescent/error.h"
#include "http/browsers.h"

static struct cr_http_names parse(const char *csv, bool origins) {
    struct cr_http_names names;
    char error[256];
    assert_int_equal(cr_http_names_parse(csv, origins, "--flag", &names, error, sizeof(error)),
                     CR_OK);
    return names;
}

static void test_hosts_loopback_and_literals_pass_names_need_the_list(void **unused) {
    (void)unused;
    struct cr_http_names none = parse("", false);
    static const char *const pass[] = {NULL, "127.0.0.1:13333", "127.0.0.1", "10.1.2.3:80",
                                       "[::1]:13333", "[fe80::1]", "localhost:13333",
                                       "LOCALHOST", "localhost.", "app.localhost:8080"};
    for (size_t i = 0; i < sizeof(pass) / sizeof(pass[0]); i++)
        assert_true(cr_http_host_allowed(&none, pass[i]));
    static const char *const refuse[] = {"evil.example", "evil.example:13333", "",
                                         "x", "localhost.evil.example", "evillocalhost",
                                         "[::1", "[::1]x", "[evil.example]", "127.0.0.1.evil.example"};
    for (size_t i = 0; i < sizeof(refuse) / sizeof(refuse[0]); i++)
        assert_false(cr_http_host_allowed(&none, refuse[i]));
    struct cr_http_names some = parse(" crescent.example.com , other.example", false);
    assert_int_equal(some.count, 2);
    assert_true(cr_http_host_allowed(&some, "Crescent.Example.com:13333"));
    assert_true(cr_http_host_allowed(&some, "other.example"));
    assert_false(cr_http_host_allowed(&some, "evil.example"));
    struct cr_http_names any = parse("*", false);
    assert_true(cr_http_host_allowed(&any, "evil.example"));
}

static void test_origins_same_origin_or_listed(void **unused) {
    (void)unused;
    struct cr_http_names none = parse(NULL, true);
    assert_true(cr_http_origin_allowed(&none, NULL, "127.0.0.1:13333"));
    assert_true(cr_http_origin_allowed(&none, "http://127.0.0.1:13333", "127.0.0.1:13333"));
    assert_true(cr_http_origin_allowed(&none, "http://LocalHost:1", "localhost:1"));
    assert_false(cr_http_origin_allowed(&none, "http://evil.example", "127.0.0.1:13333"));
    assert_false(cr_http_origin_allowed(&none, "http://127.0.0.1:8000", "127.0.0.1:13333"));
    assert_false(cr_http_origin_allowed(&none, "null", "127.0.0.1:13333"));
    assert_false(cr_http_origin_allowed(&none, "http://127.0.0.1:13333", NULL));
    struct cr_http_names ui = parse("https://ui.example.com", true);
    assert_true(cr_http_origin_allowed(&ui, "https://ui.example.com", "127.0.0.1:13333"));
    assert_false(cr_http_origin_allowed(&ui, "http://ui.example.com", "127.0.0.1:13333"));
    struct cr_http_names any = parse("*", true);
    assert_true(cr_http_origin_allowed(&any, "null", "127.0.0.1:1"));
}

static void test_bad_lists_say_which_name(void **unused) {
    (void)unused;
    struct cr_http_names names;
    char error[256];
    assert_int_equal(cr_http_names_parse("a,,b", false, "--h", &names, error, sizeof(error)),
                     CR_ERR_INVALID_PARAMS);
    assert_non_null(strstr(error, "--h"));
    assert_int_equal(cr_http_names_parse("http://a", false, "--h", &names, error, sizeof(error)),
                     CR_ERR_INVALID_PARAMS);
    assert_non_null(strstr(error, "http://a"));
    assert_int_equal(cr_http_names_parse("ui.example", true, "--o", &names, error, sizeof(error)),
                     CR_ERR_INVALID_PARAMS);
    assert_non_null(strstr(error, "ui.example"));
    assert_int_equal(cr_http_names_parse("https://a/b", true, "--o", &names, error,
                                         sizeof(error)),
                     CR_ERR_INVALID_PARAMS);
    char many[512] = "";
    for (int i = 0; i < 17; i++) snprintf(many + strlen(many), 32, "%sh%d", i ? "," : "", i);
    assert_int_equal(cr_http_names_parse(many, false, "--h", &names, error, sizeof(error)),
                     CR_ERR_INVALID_PARAMS);
}

static void test_body_types(void **unused) {
    (void)unused;
    assert_true(cr_http_body_type_allowed("application/json"));
    assert_true(cr_http_body_type_allowed("Application/JSON; charset=utf-8"));
    assert_true(cr_http_body_type_allowed("application/msgpack"));
    assert_false(cr_http_body_type_allowed(NULL));
    assert_false(cr_http_body_type_allowed("text/plain"));
    assert_false(cr_http_body_type_allowed("text/plain; a=application/json"));
    assert_false(cr_http_body_type_allowed("application/x-www-form-urlencoded"));
    assert_false(cr_http_body_type_allowed("multipart/form-data; boundary=x"));
    assert_false(cr_http_body_type_allowed("application/jsonx"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hosts_loopback_and_literals_pass_names_need_the_list),
        cmocka_unit_test(test_origins_same_origin_or_listed),
        cmocka_unit_test(test_bad_lists_say_which_name),
        cmocka_unit_test(test_body_types),
    };
    return cmocka_run_group_tests_name("http_browsers", tests, NULL, NULL);
}
