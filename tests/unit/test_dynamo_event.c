/* Dynamo's RouterEvent / ForwardPassMetrics / KVHitRateEvent payloads
 * (src/msgs/dynamo_event.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "crescent/error.h"
#include "msgs/dynamo_event.h"

static struct cr_dyn_decoder *dec;
static char err[256];

static int ev(const char *json, struct cr_dyn_router_event *out, enum cr_dyn_bad *cause) {
    err[0] = '\0';
    return cr_dyn_decode_router_event(dec, json, strlen(json), out, cause, err, sizeof(err));
}

static void test_seed_stored(void **unused) {
    (void)unused;
    struct cr_dyn_router_event e;
    enum cr_dyn_bad cause;
    assert_int_equal(ev("{\"worker_id\": -7, \"data\": {\"Stored\": {\"request_id\": \"r1\", "
                        "\"token_ids\": [1,2,3,4], \"block_hashes\": [18446744073709551615, 5], "
                        "\"lora_id\": null}}}",
                        &e, &cause),
                     CR_OK);
    assert_int_equal(e.worker_id, -7);
    assert_int_equal(e.kind, CR_KV_EVENT_STORED);
    assert_int_equal(e.hash_count, 2);
    assert_true(e.hashes[0] == UINT64_MAX);
    assert_true(e.hashes[1] == 5);
    assert_false(e.has_parent);
    assert_false(e.has_lora_id);
    assert_true(e.has_token_ids);
    assert_int_equal(e.token_count, 4);
    assert_int_equal(e.token_ids[3], 4);
    /* The seed's block_hashes are compute_block_hash_for_seq's local hashes. */
    assert_non_null(e.local_hashes);
    assert_true(e.local_hashes[0] == UINT64_MAX && e.local_hashes[1] == 5);
}

static void test_dynamo_envelope(void **unused) {
    (void)unused;
    struct cr_dyn_router_event e;
    enum cr_dyn_bad cause;
    assert_int_equal(ev("{\"worker_id\": 3, \"event\": {\"event_id\": 9, \"data\": {\"stored\": "
                        "{\"parent_hash\": 12345678901234567890, \"blocks\": [{\"block_hash\": 1, "
                        "\"tokens_hash\": 2}, {\"block_hash\": 3, \"tokens_hash\": 4}]}}}}",
                        &e, &cause),
                     CR_OK);
    assert_int_equal(e.worker_id, 3);
    assert_true(e.has_event_id && e.event_id == 9);
    assert_true(e.has_parent && e.parent_hash == 12345678901234567890ull);
    assert_int_equal(e.hash_count, 2);
    assert_true(e.hashes[1] == 3);
    assert_false(e.has_token_ids);
    assert_non_null(e.local_hashes); /* the blocks' tokens_hash */
    assert_true(e.local_hashes[0] == 2 && e.local_hashes[1] == 4);
    /* Exactly as Dynamo's serde writes it: dp_rank, storage_tier, mm_extra_info. */
    assert_int_equal(ev("{\"worker_id\": 3, \"storage_tier\": \"device\", \"event\": "
                        "{\"event_id\": 12, \"data\": {\"stored\": {\"parent_hash\": null, "
                        "\"blocks\": [{\"block_hash\": 18446744073709551615, \"tokens_hash\": "
                        "14643705804678351452, \"mm_extra_info\": null}]}}, \"dp_rank\": 0}}",
                        &e, &cause),
                     CR_OK);
    assert_false(e.has_parent);
    assert_true(e.hashes[0] == UINT64_MAX);
    assert_true(e.local_hashes[0] == 0xCB38E4D7FB2DCA5CULL);
    /* blocks without tokens_hash: no local hashes; some with and some without: refused. */
    assert_int_equal(ev("{\"worker_id\": 3, \"event\": {\"event_id\": 13, \"data\": "
                        "{\"stored\": {\"parent_hash\": null, \"blocks\": [{\"block_hash\": 1}]}}}}",
                        &e, &cause),
                     CR_OK);
    assert_null(e.local_hashes);
    assert_int_equal(ev("{\"worker_id\": 3, \"event\": {\"event_id\": 10, \"data\": {\"removed\": "
                        "{\"block_hashes\": [1]}}}}", &e, &cause), CR_OK);
    assert_int_equal(e.kind, CR_KV_EVENT_REMOVED);
    assert_int_equal(e.hash_count, 1);
    assert_int_equal(ev("{\"worker_id\": 3, \"event\": {\"event_id\": 11, \"data\": \"cleared\"}}",
                        &e, &cause), CR_OK);
    assert_int_equal(e.kind, CR_KV_EVENT_CLEARED);
    assert_int_equal(ev("{\"worker_id\": 3, \"data\": {\"Cleared\": null}}", &e, &cause), CR_OK);
    assert_int_equal(e.kind, CR_KV_EVENT_CLEARED);
}

static void expect_bad(const char *json, enum cr_dyn_bad want) {
    struct cr_dyn_router_event e;
    enum cr_dyn_bad cause = CR_DYN_BAD_KINDS;
    assert_int_equal(ev(json, &e, &cause), CR_ERR_PROTOCOL);
    if (cause != want) fail_msg("%s: cause %s, want %s (%s)", json, cr_dyn_bad_name(cause),
                                cr_dyn_bad_name(want), err);
    assert_true(err[0] != '\0');
}

static void test_bad_events(void **unused) {
    (void)unused;
    expect_bad("", CR_DYN_BAD_JSON);
    expect_bad("{\"worker_id\": 1", CR_DYN_BAD_JSON);
    expect_bad("[1,2]", CR_DYN_BAD_JSON);
    expect_bad("{\"worker_id\": \"w\", \"data\": \"Cleared\"}", CR_DYN_BAD_FIELD);
    expect_bad("{\"worker_id\": 18446744073709551615, \"data\": \"Cleared\"}", CR_DYN_BAD_FIELD);
    expect_bad("{\"data\": \"Cleared\"}", CR_DYN_BAD_FIELD);
    expect_bad("{\"worker_id\": 1}", CR_DYN_BAD_FIELD);
    expect_bad("{\"worker_id\": 1, \"data\": {\"Moved\": {}}}", CR_DYN_BAD_KIND);
    expect_bad("{\"worker_id\": 1, \"data\": {\"Stored\": {\"block_hashes\": [-1]}}}",
               CR_DYN_BAD_HASH);
    expect_bad("{\"worker_id\": 1, \"data\": {\"Stored\": {\"block_hashes\": [1.5]}}}",
               CR_DYN_BAD_HASH);
    expect_bad("{\"worker_id\": 1, \"data\": {\"Stored\": {\"block_hashes\": "
               "[18446744073709551616]}}}", CR_DYN_BAD_HASH);
    expect_bad("{\"worker_id\": 1, \"data\": {\"Removed\": {\"block_hashes\": 4}}}",
               CR_DYN_BAD_FIELD);
    expect_bad("{\"worker_id\": 1, \"data\": {\"Stored\": {\"block_hashes\": [1], "
               "\"token_ids\": [4294967296]}}}", CR_DYN_BAD_TOKENS);
    expect_bad("{\"worker_id\": 1, \"data\": {\"Stored\": {\"block_hashes\": [1], "
               "\"parent_hash\": \"x\"}}}", CR_DYN_BAD_FIELD);
    expect_bad("{\"worker_id\": 1, \"data\": {\"Cleared\": {\"x\": 1}}}", CR_DYN_BAD_FIELD);
    expect_bad("{\"worker_id\": 1, \"event\": {\"event_id\": 1}}", CR_DYN_BAD_FIELD);
    expect_bad("{\"worker_id\": 1, \"data\": {\"stored\": {\"blocks\": [{\"block_hash\": 1, "
               "\"tokens_hash\": 2}, {\"block_hash\": 3}]}}}", CR_DYN_BAD_FIELD);
    expect_bad("{\"worker_id\": 1, \"data\": {\"stored\": {\"blocks\": [{\"block_hash\": 1}, "
               "{\"block_hash\": 3, \"tokens_hash\": 4}]}}}", CR_DYN_BAD_FIELD);
    expect_bad("{\"worker_id\": 1, \"data\": {\"stored\": {\"blocks\": [{\"block_hash\": 1, "
               "\"tokens_hash\": -2}]}}}", CR_DYN_BAD_HASH);
}

static void test_limits(void **unused) {
    (void)unused;
    size_t n = CR_DYN_MAX_HASHES + 1;
    char *json = malloc(n * 2 + 128);
    assert_non_null(json);
    size_t at = (size_t)sprintf(json, "{\"worker_id\": 1, \"data\": {\"Removed\": {\"block_hashes\": [");
    for (size_t i = 0; i < n; i++) at += (size_t)sprintf(json + at, i ? ",1" : "1");
    sprintf(json + at, "]}}}");
    expect_bad(json, CR_DYN_BAD_LIMIT);
    free(json);
}

static void test_metrics(void **unused) {
    (void)unused;
    struct cr_dyn_metrics m;
    enum cr_dyn_bad cause;
    const char *ok = "{\"worker_id\": 5, \"endpoint_name\": \"generate\", \"metrics\": "
                     "{\"request_active_slots\": 2, \"request_total_slots\": 8, "
                     "\"kv_active_blocks\": 10, \"kv_total_blocks\": 100, "
                     "\"gpu_cache_usage_perc\": 0.1, \"gpu_prefix_cache_hit_rate\": 0.5, "
                     "\"num_requests_waiting\": 3}}";
    assert_int_equal(cr_dyn_decode_metrics(ok, strlen(ok), &m, &cause, err, sizeof(err)), CR_OK);
    assert_int_equal(m.worker_id, 5);
    assert_string_equal(m.endpoint_name, "generate");
    assert_int_equal(m.kv_active_blocks, 10);
    assert_int_equal(m.kv_total_blocks, 100);
    assert_int_equal(m.num_requests_waiting, 3);
    assert_true(m.gpu_prefix_cache_hit_rate == 0.5);
    const char *bare = "{\"worker_id\": 6, \"kv_active_blocks\": 1, \"kv_total_blocks\": 4}";
    assert_int_equal(cr_dyn_decode_metrics(bare, strlen(bare), &m, &cause, err, sizeof(err)), CR_OK);
    assert_int_equal(m.worker_id, 6);
    assert_int_equal(m.kv_total_blocks, 4);
    const char *bad[] = {
        "{\"worker_id\": 6}",
        "{\"metrics\": {\"kv_total_blocks\": 4}}",
        "{\"worker_id\": 6, \"metrics\": {\"kv_total_blocks\": -4}}",
        "{\"worker_id\": 6, \"metrics\": {\"kv_total_blocks\": 4, \"gpu_cache_usage_perc\": 2}}",
        "{\"worker_id\": 6, \"metrics\": 7}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cause = CR_DYN_BAD_KINDS;
        assert_int_equal(cr_dyn_decode_metrics(bad[i], strlen(bad[i]), &m, &cause, err, sizeof(err)),
                         CR_ERR_PROTOCOL);
        assert_int_equal(cause, CR_DYN_BAD_FIELD);
    }
    const char *junk = "not json";
    assert_int_equal(cr_dyn_decode_metrics(junk, strlen(junk), &m, &cause, err, sizeof(err)),
                     CR_ERR_PROTOCOL);
    assert_int_equal(cause, CR_DYN_BAD_JSON);
}

static void test_hit_rate(void **unused) {
    (void)unused;
    char buf[128];
    size_t n = cr_dyn_hit_rate_json(buf, sizeof(buf), 64, 32, -2);
    assert_string_equal(buf, "{\"isl_tokens\":64,\"hit_tokens\":32,\"worker_id\":-2}");
    assert_int_equal(n, strlen(buf));
    assert_int_equal(cr_dyn_hit_rate_json(buf, 10, 64, 32, -2), 0);
}

static int setup(void **unused) {
    (void)unused;
    return cr_dyn_decoder_create(&dec);
}

static int teardown(void **unused) {
    (void)unused;
    cr_dyn_decoder_destroy(dec);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_stored), cmocka_unit_test(test_dynamo_envelope),
        cmocka_unit_test(test_bad_events),  cmocka_unit_test(test_limits),
        cmocka_unit_test(test_metrics),     cmocka_unit_test(test_hit_rate),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
