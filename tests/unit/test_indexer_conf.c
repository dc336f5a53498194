/* Unit tests for the indexer's request parsing: conductor_config.json and
 * /register bodies (src/actors/indexer_conf.c), query and load bodies in
 * JSON and msgpack (src/http/indexer_request.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "actors/indexer_internal.h"
#include "crescent/error.h"
#include "http/indexer_request.h"

static void test_conf_good(void **state) {
    (void)state;
    const char *text =
        "{\"http_server_port\": 13333, \"kvevent_instance\": {"
        " \"node1\": {\"endpoint\": \"tcp://127.0.0.1:5557\", \"replay_endpoint\": "
        "\"tcp://127.0.0.1:5558\", \"type\": \"vLLM\", \"modelname\": \"qwen\", \"lora_name\": "
        "\"\","
        " \"tenant_id\": \"\", \"block_size\": 128, \"dp_rank\": 2, \"additionalsalt\": \"s\"}}}";
    struct cr_indexer_registration *regs;
    uint32_t n;
    char err[256];
    assert_int_equal(cr_indexer_conf_parse(text, &regs, &n, err, sizeof(err)), CR_OK);
    assert_int_equal(n, 1);
    assert_string_equal(regs[0].instance_id, "node1"); /* from the key */
    assert_string_equal(regs[0].tenant_id, "default");
    assert_int_equal(regs[0].block_size, 128);
    assert_int_equal(regs[0].dp_rank, 2);
    assert_string_equal(regs[0].salt, "s");
    free(regs);
    assert_int_equal(cr_indexer_conf_parse("{}", &regs, &n, err, sizeof(err)), CR_OK);
    assert_int_equal(n, 0);
    free(regs);
}

static void expect_conf_error(const char *text, const char *needle) {
    struct cr_indexer_registration *regs = (void *)1;
    uint32_t n = 7;
    char err[256] = "";
    assert_int_equal(cr_indexer_conf_parse(text, &regs, &n, err, sizeof(err)),
                     CR_ERR_INVALID_PARAMS);
    assert_null(regs);
    assert_int_equal(n, 0);
    if (strstr(err, needle) == NULL) fail_msg("'%s' does not mention '%s'", err, needle);
}

static void test_conf_errors(void **state) {
    (void)state;
    expect_conf_error("{bad", "line 1");
    expect_conf_error("[]", "object");
    expect_conf_error("{\"kvevent_instance\": 3}", "kvevent_instance");
    expect_conf_error("{\"kvevent_instance\": {\"x\": {\"endpoint\": \"tcp://a:1\", "
                      "\"block_size\": 16}}}",
                      "modelname");
    expect_conf_error("{\"kvevent_instance\": {\"x\": {\"endpoint\": \"tcp://a:1\", "
                      "\"modelname\": \"m\", \"block_size\": 0}}}",
                      "block_size");
    expect_conf_error("{\"kvevent_instance\": {\"x\": {\"endpoint\": \"tcp://a:1\", "
                      "\"modelname\": \"m\", \"block_size\": \"16\"}}}",
                      "block_size");
    expect_conf_error("{\"kvevent_instance\": {\"x\": {\"endpoint\": \"tcp://a:1\", "
                      "\"modelname\": \"m\", \"block_size\": 16, \"dp_rank\": 64}}}",
                      "dp_rank");
    expect_conf_error("{\"kvevent_instance\": {\"x\": {\"endpoint\": 5, "
                      "\"modelname\": \"m\", \"block_size\": 16}}}",
                      "endpoint");
}

static void test_conf_path_precedence(void **state) {
    (void)state;
    setenv("CONDUCTOR_CONFIG_PATH", "/env.json", 1);
    assert_string_equal(cr_indexer_conf_path("/flag.json"), "/flag.json");
    assert_string_equal(cr_indexer_conf_path(""), "/env.json");
    unsetenv("CONDUCTOR_CONFIG_PATH");
    assert_string_equal(cr_indexer_conf_path(""), "");
}

static int parse_query(const char *body, size_t len, bool msgpack, bool by_hash,
                       struct cr_indexer_request *req, char *detail) {
    json_t *root = cr_indexer_body_parse(body, len, msgpack, detail, 256);
    if (root == NULL) return CR_ERR_PROTOCOL;
    int rc = cr_indexer_request_from_json(root, by_hash, req, detail, 256);
    json_decref(root);
    return rc;
}

static void test_query_bodies(void **state) {
    (void)state;
    struct cr_indexer_request q;
    char detail[256];
    const char *ok =
        "{\"model\":\"m\",\"token_ids\":[1,2,3],\"block_size\":2,\"cache_salt\":\"x\"}";
    assert_int_equal(parse_query(ok, strlen(ok), false, false, &q, detail), CR_OK);
    assert_int_equal(q.token_count, 3);
    assert_string_equal(q.tenant, "default");
    assert_string_equal(q.salt, "x");
    cr_indexer_request_free(&q);
    /* u64 hashes: bare integers above INT64_MAX, negatives, decimal and 0x strings. */
    const char *h = "{\"model\":\"m\",\"block_size\":2,\"block_hash\":[18446744073709551615,-1,"
                    "\"18446744073709551614\",\"0x10\", 9223372036854775808]}";
    assert_int_equal(parse_query(h, strlen(h), false, true, &q, detail), CR_OK);
    assert_int_equal(q.hash_count, 5);
    assert_true(q.hashes[0] == UINT64_MAX && q.hashes[1] == UINT64_MAX);
    assert_true(q.hashes[2] == UINT64_MAX - 1 && q.hashes[3] == 16);
    assert_true(q.hashes[4] == (1ull << 63));
    cr_indexer_request_free(&q);
    const char *bad[] = {
        "{\"model\":\"m\",\"token_ids\":[1],\"block_size\":0}",
        "{\"model\":\"m\",\"token_ids\":[1]}",
        "{\"token_ids\":[1],\"block_size\":1}",
        "{\"model\":\"m\",\"token_ids\":[4294967296],\"block_size\":1}",
        "{\"model\":\"m\",\"token_ids\":[1.5],\"block_size\":1}",
        "{\"model\":\"m\",\"token_ids\":[1],\"block_size\":1,\"tenant_id\":7}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(parse_query(bad[i], strlen(bad[i]), false, false, &q, detail),
                         CR_ERR_INVALID_PARAMS);
    /* A string containing digits is left alone by the big-integer quoting. */
    const char *s = "{\"model\":\"99999999999999999999\",\"token_ids\":[1],\"block_size\":1}";
    assert_int_equal(parse_query(s, strlen(s), false, false, &q, detail), CR_OK);
    assert_string_equal(q.model, "99999999999999999999");
    cr_indexer_request_free(&q);
}

static void test_msgpack_bodies(void **state) {
    (void)state;
    struct cr_indexer_request q;
    char detail[256];
    /* {"model": "m", "block_size": 1, "seq_hashes": [0xffffffffffffffff, -2]} */
    const unsigned char mp[] = {0x83, 0xa5, 'm',  'o',  'd',  'e',  'l',  0xa1, 'm',  0xaa, 'b',
                                'l',  'o',  'c',  'k',  '_',  's',  'i',  'z',  'e',  0x01, 0xaa,
                                's',  'e',  'q',  '_',  'h',  'a',  's',  'h',  'e',  's',  0x92,
                                0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe};
    assert_int_equal(parse_query((const char *)mp, sizeof(mp), true, true, &q, detail), CR_OK);
    assert_int_equal(q.hash_count, 2);
    assert_true(q.hashes[0] == UINT64_MAX && q.hashes[1] == UINT64_MAX - 1);
    cr_indexer_request_free(&q);
    /* An array claiming 2^32-1 elements in 5 bytes, truncations, trailing bytes. */
    const unsigned char huge[] = {0xdd, 0xff, 0xff, 0xff, 0xff};
    assert_null(cr_indexer_body_parse((const char *)huge, sizeof(huge), true, detail, 256));
    for (size_t cut = 0; cut < sizeof(mp); cut++)
        assert_null(cr_indexer_body_parse((const char *)mp, cut, true, detail, 256));
    const unsigned char trailing[] = {0x80, 0x00};
    assert_null(cr_indexer_body_parse((const char *)trailing, 2, true, detail, 256));
    unsigned char deep[64];
    memset(deep, 0x91, sizeof(deep));
    assert_null(cr_indexer_body_parse((const char *)deep, sizeof(deep), true, detail, 256));
}

/* The fast path agrees with the jansson path on every body it accepts, and
 * leaves everything else to it. */
static void test_fast_path_matches_full_parser(void **state) {
    (void)state;
    const char *accepted[] = {
        "{\"model\":\"m\",\"token_ids\":[1,2,3],\"block_size\":2}",
        " { \"block_size\" : 16 , \"token_ids\" : [ ] , \"model\" : \"\" } ",
        "{\"model\":\"m\",\"token_ids\":[4294967295,0],\"block_size\":1,\"tenant_id\":\"t\","
        "\"lora_name\":\"l\",\"additionalsalt\":\"a\",\"instance_id\":\"i\",\"x\":5}",
        "{\"model\":\"m\",\"token_ids\":[1],\"block_size\":1,\"cache_salt\":\"c\","
        "\"additionalsalt\":\"a\"}",
        "{\"model\":\"m\",\"token_ids\":[1],\"token_ids\":[2,3],\"block_size\":1}",
        "{\"model\":\"m\",\"token_ids\":[1],\"block_size\":1,\"top_k\":4}",
        "{\"top_k\":65536,\"model\":\"m\",\"token_ids\":[1],\"block_size\":1}",
    };
    for (size_t i = 0; i < sizeof(accepted) / sizeof(accepted[0]); i++) {
        struct cr_indexer_request a, b;
        char detail[256];
        assert_int_equal(cr_indexer_request_fast(accepted[i], strlen(accepted[i]), &a), CR_OK);
        assert_int_equal(parse_query(accepted[i], strlen(accepted[i]), false, false, &b, detail),
                         CR_OK);
        assert_string_equal(a.model, b.model);
        assert_string_equal(a.tenant, b.tenant);
        assert_string_equal(a.lora, b.lora);
        assert_string_equal(a.salt, b.salt);
        assert_string_equal(a.instance, b.instance);
        assert_int_equal(a.has_instance, b.has_instance);
        assert_int_equal(a.block_size, b.block_size);
        assert_int_equal(a.top_k, b.top_k);
        assert_int_equal(a.token_count, b.token_count);
        if (a.token_count > 0)
            assert_memory_equal(a.tokens, b.tokens, a.token_count * sizeof(uint32_t));
        cr_indexer_request_free(&a);
        cr_indexer_request_free(&b);
    }
    const char *declined[] = {
        "",
        "{",
        "{}",
        "{\"model\":\"m\",\"token_ids\":[1],\"block_size\":0}",
        "{\"model\":\"m\",\"token_ids\":[1]}",
        "{\"model\":\"m\",\"token_ids\":[01],\"block_size\":1}",
        "{\"model\":\"m\",\"token_ids\":[1.0],\"block_size\":1}",
        "{\"model\":\"m\",\"token_ids\":[-1],\"block_size\":1}",
        "{\"model\":\"m\",\"token_ids\":[4294967296],\"block_size\":1}",
        "{\"model\":\"m\\n\",\"token_ids\":[1],\"block_size\":1}",
        "{\"model\":null,\"token_ids\":[1],\"block_size\":1}",
        "{\"model\":\"m\",\"token_ids\":[1,],\"block_size\":1}",
        "{\"model\":\"m\",\"token_ids\":[1],\"block_size\":1,\"x\":{}}",
        "{\"model\":\"m\",\"token_ids\":[1],\"block_size\":1} x",
        "{\"model\":\"m\",\"token_ids\":[1],\"block_size\":1,}",
        "{\"model\":\"\xc3\xa9\",\"token_ids\":[1],\"block_size\":1}",
        "{\"model\":\"m\",\"token_ids\":[1],\"block_size\":1,\"top_k\":0}",
        "{\"model\":\"m\",\"token_ids\":[1],\"block_size\":1,\"top_k\":65537}",
        "{\"model\":\"m\",\"token_ids\":[1],\"block_size\":1,\"top_k\":null}",
        "{\"model\":\"m\",\"token_ids\":[1],\"block_size\":1,\"top_k\":\"4\"}",
    };
    for (size_t i = 0; i < sizeof(declined) / sizeof(declined[0]); i++) {
        struct cr_indexer_request a;
        assert_int_equal(cr_indexer_request_fast(declined[i], strlen(declined[i]), &a),
                         CR_ERR_AGAIN);
        assert_null(a.tokens);
    }
}

/* top_k: an integer from 1 to 65536; null is absent; the error names it. */
static void test_query_top_k(void **state) {
    (void)state;
    struct cr_indexer_request q;
    char detail[256];
    const char *absent = "{\"model\":\"m\",\"token_ids\":[1],\"block_size\":1,\"top_k\":null}";
    assert_int_equal(parse_query(absent, strlen(absent), false, false, &q, detail), CR_OK);
    assert_int_equal(q.top_k, 0);
    cr_indexer_request_free(&q);
    const char *bad[] = {"0", "65537", "-1", "\"4\"", "1.5", "true"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char body[128];
        snprintf(body, sizeof(body), "{\"model\":\"m\",\"token_ids\":[1],\"block_size\":1,"
                 "\"top_k\":%s}", bad[i]);
        assert_int_equal(parse_query(body, strlen(body), false, false, &q, detail),
                         CR_ERR_INVALID_PARAMS);
        assert_non_null(strstr(detail, "'top_k' must be an integer from 1 to 65536"));
    }
}

static void test_load_bodies(void **state) {
    (void)state;
    struct cr_indexer_load l;
    char detail[256];
    json_t *root = json_loads("{\"instance_id\":\"a\",\"metrics\":{\"kv_active_blocks\":3,"
                              "\"kv_total_blocks\":10,\"gpu_cache_usage_perc\":0.5}}",
                              0, NULL);
    assert_int_equal(cr_indexer_load_from_json(root, &l, detail, sizeof(detail)), CR_OK);
    assert_int_equal(l.kv_active_blocks, 3);
    assert_string_equal(l.tenant_id, "default");
    json_decref(root);
    root = json_loads("{\"instance_id\":\"a\",\"kv_active_blocks\":-1}", 0, NULL);
    assert_int_equal(cr_indexer_load_from_json(root, &l, detail, sizeof(detail)),
                     CR_ERR_INVALID_PARAMS);
    json_decref(root);
}

/* Bodies found by tests/fuzz/fuzz_indexer_request.c: each used to be accepted
 * (or to hit undefined behaviour) and must now be refused. */
static void test_fuzz_regressions(void **state) {
    (void)state;
    char detail[256];
    /* Not JSON: a 20-digit literal with a leading zero, a big literal used as
     * a key.  Quoting them as big integers made jansson accept both. */
    const char *not_json[] = {
        "{\"model\":\"m\",\"block_size\":2,\"block_hash\":[09223372036854775807]}",
        "{\"model\":\"m\",\"block_size\":2, 99999999999999999999 :1}",
    };
    for (size_t i = 0; i < sizeof(not_json) / sizeof(not_json[0]); i++) {
        detail[0] = '\0';
        assert_null(cr_indexer_body_parse(not_json[i], strlen(not_json[i]), false, detail, 256));
        assert_true(detail[0] != '\0');
    }
    /* A NUL byte after a number, which jansson 2.14 skips. */
    const char nul[] = "{\"model\":\"m\",\"token_ids\":[1.5\0],\"block_size\":1}";
    detail[0] = '\0';
    assert_null(cr_indexer_body_parse(nul, sizeof(nul) - 1, false, detail, 256));
    assert_non_null(strstr(detail, "NUL"));
    /* A load counter of 1e300 has no uint64_t value (the cast was undefined). */
    json_t *root = json_loads("{\"instance_id\":\"a\",\"kv_active_blocks\":1e300}", 0, NULL);
    struct cr_indexer_load l;
    assert_int_equal(cr_indexer_load_from_json(root, &l, detail, sizeof(detail)),
                     CR_ERR_INVALID_PARAMS);
    assert_non_null(strstr(detail, "kv_active_blocks"));
    json_decref(root);
    /* Big literals in value position are still quoted. */
    const char *big = "{\"model\":\"m\",\"block_size\":2,\"block_hash\":[ 18446744073709551615 ]}";
    root = cr_indexer_body_parse(big, strlen(big), false, detail, 256);
    assert_non_null(root);
    json_decref(root);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conf_good),
        cmocka_unit_test(test_conf_errors),
        cmocka_unit_test(test_conf_path_precedence),
        cmocka_unit_test(test_query_bodies),
        cmocka_unit_test(test_msgpack_bodies),
        cmocka_unit_test(test_query_top_k),
        cmocka_unit_test(test_load_bodies),
        cmocka_unit_test(test_fast_path_matches_full_parser),
        cmocka_unit_test(test_fuzz_regressions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
