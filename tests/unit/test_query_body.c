/* The /query fast parser's token lists (src/http/indexer_request.c): ids are
 * read eight bytes at a time where eight bytes remain, and one digit at a time
 * near the end of the body; both must give what jansson gives, for every
 * digit count, and refuse what the fast path leaves to the full parser. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "core/buf.h"
#include "crescent/error.h"
#include "http/indexer_request.h"

/* Every digit count 1..10, at every alignment against the body's end. */
static const uint32_t ids[] = {0,        7,         42,         999,       1000,      65535,
                               151935,   1234567,   12345678,   99999999,  100000000, 123456789,
                               999999999, 1000000000, 4294967295u, 10,       9,         100};

static char *body_with(const uint32_t *v, size_t n, const char *sep) {
    struct cr_buf b;
    cr_buf_init(&b);
    cr_buf_appendf(&b, "{\"model\":\"m\",\"block_size\":4,\"token_ids\":[");
    for (size_t i = 0; i < n; i++) cr_buf_appendf(&b, "%s%u", i > 0 ? sep : "", v[i]);
    cr_buf_appendf(&b, "]}");
    size_t len;
    return cr_buf_take(&b, &len);
}

static void expect_same_as_jansson(const char *body) {
    struct cr_indexer_request fast, full;
    char detail[256];
    assert_int_equal(cr_indexer_request_fast(body, strlen(body), &fast), CR_OK);
    json_t *root = cr_indexer_body_parse(body, strlen(body), false, detail, sizeof(detail));
    assert_non_null(root);
    assert_int_equal(cr_indexer_request_from_json(root, false, &full, detail, sizeof(detail)),
                     CR_OK);
    json_decref(root);
    assert_int_equal(fast.token_count, full.token_count);
    assert_memory_equal(fast.tokens, full.tokens, fast.token_count * sizeof(uint32_t));
    cr_indexer_request_free(&fast);
    cr_indexer_request_free(&full);
}

static void test_every_digit_count_and_alignment(void **state) {
    (void)state;
    size_t n = sizeof(ids) / sizeof(ids[0]);
    /* Rotating the list moves each id to every position, near the end too. */
    uint32_t v[sizeof(ids) / sizeof(ids[0])];
    const char *seps[] = {",", ", ", " ,\n"};
    for (size_t s = 0; s < 3; s++) {
        for (size_t r = 0; r < n; r++) {
            for (size_t i = 0; i < n; i++) v[i] = ids[(i + r) % n];
            for (size_t len = 1; len <= n; len++) {
                char *body = body_with(v, len, seps[s]);
                expect_same_as_jansson(body);
                free(body);
            }
        }
    }
}

static void test_values_read(void **state) {
    (void)state;
    char *body = body_with(ids, sizeof(ids) / sizeof(ids[0]), ",");
    struct cr_indexer_request q;
    assert_int_equal(cr_indexer_request_fast(body, strlen(body), &q), CR_OK);
    assert_int_equal(q.token_count, sizeof(ids) / sizeof(ids[0]));
    assert_memory_equal(q.tokens, ids, sizeof(ids));
    cr_indexer_request_free(&q);
    free(body);
}

/* Bodies the fast path must leave to the full parser, with the bad id far
 * from the end (eight-byte reads) and at the end (byte reads). */
static void test_refused_anywhere(void **state) {
    (void)state;
    const char *bad[] = {"01", "4294967296", "12345678901", "1.5", "1e3", "-1", "1a", "00000000"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char body[256];
        snprintf(body, sizeof(body),
                 "{\"model\":\"m\",\"block_size\":4,\"token_ids\":[%s,123456,7777777]}", bad[i]);
        struct cr_indexer_request q;
        assert_int_equal(cr_indexer_request_fast(body, strlen(body), &q), CR_ERR_AGAIN);
        snprintf(body, sizeof(body), "{\"model\":\"m\",\"block_size\":4,\"token_ids\":[5,%s]}",
                 bad[i]);
        assert_int_equal(cr_indexer_request_fast(body, strlen(body), &q), CR_ERR_AGAIN);
    }
}

/* A body nested past CR_JSON_DEPTH_MAX is refused before jansson recurses
 * (issue 10 item 1: ~950 levels overflowed a CivetWeb worker's stack);
 * brackets inside strings do not count, and the bound itself is accepted. */
static void test_nesting_bounded(void **state) {
    (void)state;
    char detail[CR_INDEXER_DETAIL_MAX];
    for (unsigned depth = CR_JSON_DEPTH_MAX; depth <= 100000; depth = depth * 10 + 1) {
        size_t len = depth * 2;
        char *body = malloc(len);
        assert_non_null(body);
        memset(body, '[', depth);
        memset(body + depth, ']', depth);
        json_t *v = cr_indexer_body_parse(body, len, false, detail, sizeof(detail));
        if (depth == CR_JSON_DEPTH_MAX) {
            assert_non_null(v);
        } else {
            assert_null(v);
            assert_non_null(strstr(detail, "nested deeper than 32 levels"));
        }
        json_decref(v);
        free(body);
    }
    static const char in_strings[] = "{\"a\":\"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\\\"\","
                                     "\"b\":[{\"c\":\"{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{\"}]}";
    json_t *v = cr_indexer_body_parse(in_strings, strlen(in_strings), false, detail,
                                      sizeof(detail));
    assert_non_null(v);
    json_decref(v);
    assert_false(cr_json_depth_ok("{\"a\":[[[", 8, 3, detail, sizeof(detail)));
    assert_string_equal(detail, "byte 7: arrays and objects nested deeper than 3 levels "
                                "(crescent's bound on request bodies)");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_digit_count_and_alignment),
        cmocka_unit_test(test_values_read),
        cmocka_unit_test(test_refused_anywhere),
        cmocka_unit_test(test_nesting_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
