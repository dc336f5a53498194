/* cr_http_head_parse: the HTTP front's request heads through http_parser,
 * fed whole and in every split a socket could deliver. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "http/request_head.h"

#define BODY_MAX (16u << 20)

/* Feeds `text` to a fresh head in pieces of `step` bytes (the buffer
 * reallocated at every piece, as the front's grows) and returns the final
 * status; *out is the buffer, edited in place, for the caller to free. */
static int parse_in_steps(const char *text, size_t step, struct cr_http_head *head, char **out) {
    size_t len = strlen(text);
    char *buf = NULL;
    int status = CR_HTTP_HEAD_INCOMPLETE;
    cr_http_head_init(head);
    for (size_t have = 0; have < len && status == CR_HTTP_HEAD_INCOMPLETE;) {
        size_t n = len - have < step ? len - have : step;
        char *moved = malloc(have + n + 1);
        assert_non_null(moved);
        if (buf != NULL) memcpy(moved, buf, have);
        free(buf);
        buf = moved;
        memcpy(buf + have, text + have, n);
        have += n;
        buf[have] = '\0';
        status = cr_http_head_parse(head, buf, have, BODY_MAX);
    }
    *out = buf;
    return status;
}

static const char *at(const char *buf, uint32_t offset) {
    return offset != 0 ? buf + offset : NULL;
}

static void test_a_request_split_anywhere_parses_the_same(void **unused) {
    (void)unused;
    static const char text[] =
        "\r\nPOST /api/v1/a%20b?x=1&y=%41 HTTP/1.1\r\nHost: h:80\r\nOrigin: http://o\r\n"
        "content-TYPE: application/msgpack\r\nX-Empty:\r\n"
        "Authorization: Bearer s3cret\r\nExpect: 100-continue\r\n"
        "Content-Length: 5\r\n\r\nhelloGET /next HTTP/1.1\r\n\r\n";
    size_t head_len = strstr(text, "hello") - text;
    for (size_t step = 1; step <= sizeof(text); step++) {
        struct cr_http_head head;
        char *buf;
        assert_int_equal(parse_in_steps(text, step, &head, &buf), CR_HTTP_HEAD_COMPLETE);
        assert_string_equal(head.method, "POST");
        assert_string_equal(at(buf, head.path), "/api/v1/a b");
        assert_string_equal(at(buf, head.query), "x=1&y=%41"); /* decoded by mg_get_var */
        assert_string_equal(at(buf, head.content_type_at), "application/msgpack");
        assert_string_equal(at(buf, head.authorization_at), "Bearer s3cret");
        assert_string_equal(at(buf, head.host_at), "h:80");
        assert_string_equal(at(buf, head.origin_at), "http://o");
        assert_true(head.expect_continue && head.keep_alive);
        assert_int_equal(head.head_len, head_len);
        assert_int_equal(head.body_len, 5);
        /* The body and the pipelined request after it are untouched. */
        size_t rest = strlen(buf + head_len);
        assert_memory_equal(buf + head_len, "helloGET /next", rest < 14 ? rest : 14);
        free(buf);
    }
}

static void test_keep_alive_follows_the_version_and_connection(void **unused) {
    (void)unused;
    static const struct {
        const char *text;
        bool keep_alive;
    } cases[] = {
        {"GET / HTTP/1.1\r\n\r\n", true},
        {"GET / HTTP/1.1\r\nConnection: close\r\n\r\n", false},
        {"GET / HTTP/1.0\r\n\r\n", false},
        {"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", true},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct cr_http_head head;
        char *buf;
        assert_int_equal(parse_in_steps(cases[i].text, 4096, &head, &buf), CR_HTTP_HEAD_COMPLETE);
        assert_int_equal(head.keep_alive, cases[i].keep_alive);
        assert_null(at(buf, head.query));
        assert_null(at(buf, head.content_type_at));
        assert_int_equal(head.body_len, 0);
        free(buf);
    }
}

static void test_bad_heads_get_a_status_and_a_reason(void **unused) {
    (void)unused;
    static const struct {
        const char *text;
        int status;
        const char *why;
    } cases[] = {
        {"GET / HTTP/2.0\r\n\r\n", 400, "HTTP/1.x"},
        {"GET http://h/x HTTP/1.1\r\n\r\n", 400, "must be a path"},
        {"G@T / HTTP/1.1\r\n\r\n", 400, "malformed request"},
        {"GET / HTTP/1.1\r\nBad Header\r\n\r\n", 400, "malformed request"},
        {"POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n", 400, "Content-Length"},
        {"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400,
         "Content-Length"},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 411, "chunked"},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", 411,
         "chunked"},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 411, "chunked"},
        {"POST / HTTP/1.1\r\nContent-Length: 16777217\r\n\r\n", 413, "16 MiB"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        for (size_t step = 1; step <= 4096; step += 4095) {
            struct cr_http_head head;
            char *buf;
            assert_int_equal(parse_in_steps(cases[i].text, step, &head, &buf), cases[i].status);
            if (strstr(head.why, cases[i].why) == NULL) fail_msg("%s: %s", cases[i].text, head.why);
            free(buf);
        }
    }
}

static void test_the_head_is_bounded(void **unused) {
    (void)unused;
    size_t filler = CR_HTTP_HEAD_MAX;
    char *text = malloc(filler + 64);
    assert_non_null(text);
    int n = sprintf(text, "GET / HTTP/1.1\r\nX: ");
    memset(text + n, 'a', filler);
    strcpy(text + n + filler, "\r\n\r\n");
    struct cr_http_head head;
    char *buf;
    assert_int_equal(parse_in_steps(text, 1000, &head, &buf), 431);
    assert_non_null(strstr(head.why, "16384"));
    free(buf);
    /* Just under the bound is a request. */
    strcpy(text + n + filler - 64, "\r\n\r\n");
    assert_int_equal(parse_in_steps(text, 1000, &head, &buf), CR_HTTP_HEAD_COMPLETE);
    free(buf);
    free(text);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_request_split_anywhere_parses_the_same),
        cmocka_unit_test(test_keep_alive_follows_the_version_and_connection),
        cmocka_unit_test(test_bad_heads_get_a_status_and_a_reason),
        cmocka_unit_test(test_the_head_is_bounded),
    };
    return cmocka_run_group_tests_name("request_head", tests, NULL, NULL);
}
