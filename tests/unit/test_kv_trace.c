/* cr_kv_trace (Mooncake trace lines) and cr_kv_lru (the simulated engine
 * cache that trace replay feeds). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/kv_lru.h"
#include "core/kv_trace.h"
#include "crescent/error.h"

static int add(struct cr_kv_trace *t, const char *line, enum cr_kv_trace_bad *cause) {
    return cr_kv_trace_add_line(t, line, strlen(line), cause);
}

static void test_good_lines(void **unused) {
    (void)unused;
    struct cr_kv_trace t;
    cr_kv_trace_init(&t);
    enum cr_kv_trace_bad cause;
    assert_int_equal(add(&t, "{\"timestamp\": 0, \"input_length\": 1030, \"output_length\": 6, "
                             "\"hash_ids\": [0, 1, 2]}\n", &cause), CR_OK);
    assert_int_equal(add(&t, "\n", &cause), CR_OK); /* blank: nothing */
    assert_int_equal(add(&t, "{\"hash_ids\":[0,1,7],\"timestamp\":40,\"extra\":\"x\"}", &cause),
                     CR_OK);
    assert_int_equal(t.count, 2);
    assert_int_equal(t.lines, 2);
    assert_int_equal(t.requests[0].input_length, 1030);
    assert_int_equal(t.requests[0].output_length, 6);
    assert_int_equal(t.requests[1].timestamp_ms, 40);
    assert_int_equal(t.requests[1].output_length, 0);
    assert_int_equal(t.requests[1].block_count, 3);
    assert_int_equal(cr_kv_trace_ids(&t, 1)[2], 7);
    assert_int_equal(cr_kv_trace_ids(&t, 0)[1], 1);
    assert_int_equal(t.max_id, 7);
    for (int i = 0; i < CR_KV_TRACE_BAD_KINDS; i++) assert_int_equal(t.bad[i], 0);
    cr_kv_trace_free(&t);
}

static void test_bad_lines(void **unused) {
    (void)unused;
    static const struct {
        const char *line;
        enum cr_kv_trace_bad cause;
    } cases[] = {
        {"{\"timestamp\": 5, \"hash_ids\": [1, 2", CR_KV_TRACE_BAD_JSON},
        {"[1, 2, 3]", CR_KV_TRACE_BAD_JSON},
        {"{\"hash_ids\": [1]}", CR_KV_TRACE_BAD_FIELD},
        {"{\"timestamp\": \"5\", \"hash_ids\": [1]}", CR_KV_TRACE_BAD_FIELD},
        {"{\"timestamp\": 5, \"hash_ids\": 1}", CR_KV_TRACE_BAD_FIELD},
        {"{\"timestamp\": 5, \"output_length\": -1, \"hash_ids\": [1]}", CR_KV_TRACE_BAD_FIELD},
        {"{\"timestamp\": 5, \"hash_ids\": [1, -2]}", CR_KV_TRACE_BAD_HASH_ID},
        {"{\"timestamp\": 5, \"hash_ids\": [1, 2.5]}", CR_KV_TRACE_BAD_HASH_ID},
        {"{\"timestamp\": 5, \"hash_ids\": [9007199254740992]}", CR_KV_TRACE_BAD_HASH_ID},
        {"{\"timestamp\": 5, \"hash_ids\": [3, 4, 3]}", CR_KV_TRACE_BAD_ORDER},
        {"{\"timestamp\": 5, \"hash_ids\": []}", CR_KV_TRACE_BAD_EMPTY},
        {"{\"timestamp\": 9, \"hash_ids\": [1]}", CR_KV_TRACE_BAD_TIME}, /* after 10 */
    };
    struct cr_kv_trace t;
    cr_kv_trace_init(&t);
    enum cr_kv_trace_bad cause;
    assert_int_equal(add(&t, "{\"timestamp\": 10, \"hash_ids\": [1, 2]}", &cause), CR_OK);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(add(&t, cases[i].line, &cause), CR_ERR_INVALID_PARAMS);
        assert_int_equal(cause, cases[i].cause);
        assert_int_equal(t.count, 1); /* nothing half-added */
        assert_int_equal(t.id_count, 2);
    }
    assert_int_equal(t.bad[CR_KV_TRACE_BAD_JSON], 2);
    assert_int_equal(t.bad[CR_KV_TRACE_BAD_FIELD], 4);
    assert_int_equal(t.bad[CR_KV_TRACE_BAD_HASH_ID], 3);
    assert_int_equal(t.bad[CR_KV_TRACE_BAD_ORDER], 1);
    assert_int_equal(t.bad[CR_KV_TRACE_BAD_EMPTY], 1);
    assert_int_equal(t.bad[CR_KV_TRACE_BAD_TIME], 1);
    assert_string_equal(cr_kv_trace_bad_name(CR_KV_TRACE_BAD_ORDER), "hash_ids_out_of_order");
    cr_kv_trace_free(&t);
}

static void test_load_file(void **unused) {
    (void)unused;
    char path[] = "/tmp/test_kv_trace_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fprintf(f, "{\"timestamp\": 0, \"hash_ids\": [0, 1]}\nnot json\n\n"
               "{\"timestamp\": 3, \"hash_ids\": [0, 2]}\nnot json either\n");
    fclose(f);
    struct cr_kv_trace t;
    cr_kv_trace_init(&t);
    char err[256] = "";
    assert_int_equal(cr_kv_trace_load(&t, path, err, sizeof(err)), CR_OK);
    assert_int_equal(t.count, 2);
    assert_int_equal(t.bad[CR_KV_TRACE_BAD_JSON], 2);
    cr_kv_trace_free(&t);
    unlink(path);
    assert_int_equal(cr_kv_trace_load(&t, path, err, sizeof(err)), CR_ERR_IO);
    assert_non_null(strstr(err, path));
}

struct served {
    uint32_t run_start[16], run_len[16];
    uint64_t removed[16];
    struct cr_kv_lru_result r;
};

static struct cr_kv_lru_result *serve(struct cr_kv_lru *lru, struct served *s,
                                      const uint64_t *keys, uint32_t n) {
    s->r = (struct cr_kv_lru_result){.run_start = s->run_start, .run_len = s->run_len,
                                     .removed = s->removed};
    assert_int_equal(cr_kv_lru_serve(lru, keys, n, &s->r), CR_OK);
    return &s->r;
}

static void test_lru(void **unused) {
    (void)unused;
    struct cr_kv_lru lru;
    assert_int_equal(cr_kv_lru_init(&lru, 0), CR_ERR_INVALID_PARAMS);
    assert_int_equal(cr_kv_lru_init(&lru, 4), CR_OK);
    struct served s;
    const uint64_t a[] = {10, 11, 12};
    struct cr_kv_lru_result *r = serve(&lru, &s, a, 3);
    assert_int_equal(r->hit, 0);
    assert_int_equal(r->stored, 3);
    assert_int_equal(r->run_count, 1);
    assert_int_equal(r->run_start[0], 0);
    assert_int_equal(r->run_len[0], 3);
    assert_int_equal(r->removed_count, 0);
    /* Shares 10, 11: stores 20 and 21, evicting the LRU block, 12 (the
     * tail of the older chain goes first). */
    const uint64_t b[] = {10, 11, 20, 21};
    r = serve(&lru, &s, b, 4);
    assert_int_equal(r->hit, 2);
    assert_int_equal(r->stored, 2);
    assert_int_equal(r->run_count, 1);
    assert_int_equal(r->run_start[0], 2);
    assert_int_equal(r->run_len[0], 2);
    assert_int_equal(r->removed_count, 1);
    assert_int_equal(r->removed[0], 12);
    assert_int_equal(cr_kv_lru_prefix(&lru, a, 3), 2);
    assert_int_equal(lru.used, 4);
    /* A hole in the middle: two runs, in chain order. */
    const uint64_t c[] = {30, 11, 31};
    r = serve(&lru, &s, c, 3);
    assert_int_equal(r->hit, 0);
    assert_int_equal(r->run_count, 2);
    assert_int_equal(r->run_start[0], 0);
    assert_int_equal(r->run_start[1], 2);
    assert_int_equal(r->removed_count, 2); /* 21 then 20: the other chain's tail first */
    assert_int_equal(r->removed[0], 21);
    assert_int_equal(r->removed[1], 20);
    assert_int_equal(lru.evictions, 3);
    const uint64_t too_long[] = {1, 2, 3, 4, 5};
    assert_int_equal(cr_kv_lru_serve(&lru, too_long, 5, &s.r), CR_ERR_INVALID_PARAMS);
    cr_kv_lru_free(&lru);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_lines),
        cmocka_unit_test(test_bad_lines),
        cmocka_unit_test(test_load_file),
        cmocka_unit_test(test_lru),
    };
    return cmocka_run_group_tests_name("kv_trace", tests, NULL, NULL);
}
