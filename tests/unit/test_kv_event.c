/* Unit tests for src/msgs/kv_event.c: every dialect the indexer ingests,
 * built with msgpack-c's packer, plus malformed, truncated and oversized
 * payloads.
 *
 * Seed-corpus mode: with KV_CORPUS_DIR=<dir> in the environment every
 * payload the tests decode is also written to <dir>/seed_NNNN, which is the
 * libFuzzer seed corpus for tests/fuzz/fuzz_kv_event.c. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <msgpack.h>

#include "crescent/error.h"
#include "msgs/kv_event.h"

/* ---- fixture helpers -------------------------------------------------- */

static msgpack_sbuffer sb;
static msgpack_packer pk;
static struct cr_kv_decoder *dec;
static char err[256];
static unsigned corpus_counter;

static int setup(void **state) {
    (void)state;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    return cr_kv_decoder_create(&dec) == CR_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    msgpack_sbuffer_destroy(&sb);
    cr_kv_decoder_destroy(dec);
    dec = NULL;
    return 0;
}

static void pstr(const char *s) { msgpack_pack_str_with_body(&pk, s, strlen(s)); }
static void praw(const void *bytes, size_t n) { msgpack_sbuffer_write(&sb, bytes, n); }

static void write_corpus(const void *data, size_t len) {
    const char *dir = getenv("KV_CORPUS_DIR");
    if (dir == NULL) return;
    char path[512];
    snprintf(path, sizeof(path), "%s/seed_%04u", dir, corpus_counter++);
    FILE *f = fopen(path, "wb");
    if (f == NULL) return;
    fwrite(data, 1, len, f);
    fclose(f);
}

/* Decodes bytes from an exactly-sized heap copy, so ASan flags any over-read. */
static int decode_bytes(const void *data, size_t len, const struct cr_kv_batch **out) {
    void *copy = malloc(len ? len : 1);
    assert_non_null(copy);
    if (len) memcpy(copy, data, len);
    write_corpus(data, len);
    err[0] = 'x';
    err[1] = '\0';
    int rc = cr_kv_decode(dec, copy, len, out, err, sizeof(err));
    free(copy);
    return rc;
}

static const struct cr_kv_batch *decode_ok(void) {
    const struct cr_kv_batch *b = NULL;
    int rc = decode_bytes(sb.data, sb.size, &b);
    if (rc != CR_OK) fail_msg("decode failed: %s", err);
    assert_non_null(b);
    return b;
}

/* Asserts CR_ERR_PROTOCOL, no batch, and a message containing `want`. */
static void decode_fails(const char *want) {
    const struct cr_kv_batch *b = (const void *)1;
    assert_int_equal(decode_bytes(sb.data, sb.size, &b), CR_ERR_PROTOCOL);
    assert_null(b);
    if (strstr(err, want) == NULL) fail_msg("error \"%s\" lacks \"%s\"", err, want);
}

static void u64s(uint64_t *out, unsigned n, uint64_t base) {
    for (unsigned i = 0; i < n; i++) out[i] = base + i;
}

/* ["BlockStored", hashes, parent|nil, tokens(nh*bs), bs, nil, medium] */
static void pack_vllm_stored(const uint64_t *hashes, unsigned nh, const uint64_t *parent,
                             unsigned bs, const char *medium) {
    msgpack_pack_array(&pk, 7);
    pstr("BlockStored");
    msgpack_pack_array(&pk, nh);
    for (unsigned i = 0; i < nh; i++) msgpack_pack_uint64(&pk, hashes[i]);
    if (parent) msgpack_pack_uint64(&pk, *parent);
    else msgpack_pack_nil(&pk);
    msgpack_pack_array(&pk, nh * bs);
    for (unsigned i = 0; i < nh * bs; i++) msgpack_pack_uint32(&pk, 1000 + i);
    msgpack_pack_uint32(&pk, bs);
    msgpack_pack_nil(&pk);
    pstr(medium);
}

static void pack_vllm_removed(const uint64_t *hashes, unsigned nh) {
    msgpack_pack_array(&pk, 3);
    pstr("BlockRemoved");
    msgpack_pack_array(&pk, nh);
    for (unsigned i = 0; i < nh; i++) msgpack_pack_uint64(&pk, hashes[i]);
    pstr("CPU");
}

static void pack_cleared(void) {
    msgpack_pack_array(&pk, 1);
    pstr("AllBlocksCleared");
}

/* Starts [ts, [<n events>], ...]; end_batch3 packs the dp rank (< 0: nil). */
static void begin_batch3(unsigned n) {
    msgpack_pack_array(&pk, 3);
    msgpack_pack_double(&pk, 1700000000.5);
    msgpack_pack_array(&pk, n);
}

static void end_batch3(long dp) {
    if (dp < 0) msgpack_pack_nil(&pk);
    else msgpack_pack_uint32(&pk, (uint32_t)dp);
}

static void batch_one_stored(void) {
    uint64_t h[2] = {11, 12};
    begin_batch3(1);
    pack_vllm_stored(h, 2, NULL, 4, "GPU");
    end_batch3(0);
}

/* ---- vLLM positional -------------------------------------------------- */

static void test_vllm_array_stored(void **state) {
    (void)state;
    uint64_t h[3], parent = 0xdeadbeefcafef00dull;
    u64s(h, 3, UINT64_MAX - 2);
    begin_batch3(1);
    pack_vllm_stored(h, 3, &parent, 16, "GPU");
    end_batch3(3);
    const struct cr_kv_batch *b = decode_ok();
    assert_true(b->ts == 1700000000.5);
    assert_true(b->has_dp_rank);
    assert_int_equal(b->dp_rank, 3);
    assert_int_equal(b->event_count, 1);
    const struct cr_kv_event *e = &b->events[0];
    assert_int_equal(e->kind, CR_KV_EVENT_STORED);
    assert_int_equal(e->dialect, CR_KV_DIALECT_VLLM_ARRAY);
    assert_int_equal(e->hash_count, 3);
    assert_true(e->hashes[0] == UINT64_MAX - 2 && e->hashes[2] == UINT64_MAX);
    assert_true(e->has_parent && e->parent_hash == parent);
    assert_true(e->has_token_ids);
    assert_int_equal(e->token_count, 48);
    assert_int_equal(e->token_ids[0], 1000);
    assert_int_equal(e->token_ids[47], 1047);
    assert_int_equal(e->block_size, 16);
    assert_false(e->has_lora_id);
    assert_string_equal(e->medium.ptr, "GPU");
    assert_null(e->lora_name.ptr);
    assert_false(e->seq_hashes);
    assert_int_equal(e->spec_kind, CR_KV_SPEC_UNSET);
}

/* Length-5 (oldest) BlockStored: no lora_id, medium or later fields. */
static void test_vllm_array_stored_length5(void **state) {
    (void)state;
    msgpack_pack_array(&pk, 2);
    msgpack_pack_double(&pk, 1.0);
    msgpack_pack_array(&pk, 1);
    msgpack_pack_array(&pk, 5);
    pstr("BlockStored");
    msgpack_pack_array(&pk, 1);
    msgpack_pack_int64(&pk, -5);
    msgpack_pack_nil(&pk);
    msgpack_pack_array(&pk, 2);
    msgpack_pack_uint8(&pk, 1);
    msgpack_pack_uint8(&pk, 2);
    msgpack_pack_uint8(&pk, 2);
    const struct cr_kv_batch *b = decode_ok();
    assert_false(b->has_dp_rank);
    assert_int_equal(b->events[0].hash_count, 1);
    assert_true(b->events[0].hashes[0] == (uint64_t)-5);
    assert_null(b->events[0].medium.ptr);
    assert_false(b->events[0].has_parent);
}

/* 12 known positions plus three unknown trailing ones. */
static void test_vllm_array_trailing_extras(void **state) {
    (void)state;
    begin_batch3(1);
    msgpack_pack_array(&pk, 15);
    pstr("BlockStored");
    msgpack_pack_array(&pk, 1);
    msgpack_pack_uint64(&pk, 7);
    msgpack_pack_uint64(&pk, 6);
    msgpack_pack_array(&pk, 2);
    msgpack_pack_uint32(&pk, 70000);
    msgpack_pack_uint32(&pk, UINT32_MAX);
    msgpack_pack_uint32(&pk, 2);
    msgpack_pack_int64(&pk, 42);                         /* lora_id */
    pstr("cpu");                                          /* medium */
    pstr("adapter-a");                                    /* lora_name */
    msgpack_pack_array(&pk, 1);                           /* extra_keys: [[ "mm", 3 ]] */
    msgpack_pack_array(&pk, 2);
    pstr("mm");
    msgpack_pack_int8(&pk, 3);
    msgpack_pack_uint8(&pk, 1);                           /* group_idx */
    pstr("sliding_window");                               /* kv_cache_spec_kind */
    msgpack_pack_uint32(&pk, 4096);                       /* sliding window */
    pstr("future");
    msgpack_pack_map(&pk, 1);
    pstr("k");
    msgpack_pack_array(&pk, 0);
    msgpack_pack_true(&pk);
    end_batch3(-1);
    const struct cr_kv_batch *b = decode_ok();
    assert_false(b->has_dp_rank);
    const struct cr_kv_event *e = &b->events[0];
    assert_true(e->has_parent && e->parent_hash == 6);
    assert_int_equal(e->token_ids[1], UINT32_MAX);
    assert_true(e->has_lora_id && e->lora_id == 42);
    assert_string_equal(e->medium.ptr, "cpu");
    assert_string_equal(e->lora_name.ptr, "adapter-a");
    assert_true(e->has_group_idx && e->group_idx == 1);
    assert_int_equal(e->spec_kind, CR_KV_SPEC_SLIDING_WINDOW);
    assert_string_equal(e->spec_kind_name.ptr, "sliding_window");
    assert_true(e->has_sliding_window && e->sliding_window == 4096);
}

static void test_vllm_spec_kinds(void **state) {
    (void)state;
    static const char *names[] = {"full_attention", "MambaSpec", "chunked_local", "FULL"};
    static const enum cr_kv_spec_kind kinds[] = {CR_KV_SPEC_FULL_ATTENTION, CR_KV_SPEC_MAMBA,
                                                 CR_KV_SPEC_OTHER, CR_KV_SPEC_FULL_ATTENTION};
    begin_batch3(4);
    for (unsigned i = 0; i < 4; i++) {
        msgpack_pack_map(&pk, 2);
        pstr("type");
        pstr("BlockStored");
        pstr("kv_cache_spec_kind");
        pstr(names[i]);
    }
    end_batch3(0);
    const struct cr_kv_batch *b = decode_ok();
    for (unsigned i = 0; i < 4; i++) assert_int_equal(b->events[i].spec_kind, kinds[i]);
}

/* Hashes in every msgpack integer encoding, forced byte by byte. */
static void test_hash_every_int_width(void **state) {
    (void)state;
    static const struct {
        uint8_t bytes[9];
        size_t len;
        uint64_t want;
    } cases[] = {
        {{0x05}, 1, 5},                                             /* positive fixint */
        {{0xcc, 0xc8}, 2, 200},                                      /* uint8 */
        {{0xcd, 0x12, 0x34}, 3, 0x1234},                             /* uint16 */
        {{0xce, 0x89, 0xab, 0xcd, 0xef}, 5, 0x89abcdef},             /* uint32 */
        {{0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe}, 9, UINT64_MAX - 1}, /* uint64 */
        {{0xff}, 1, UINT64_MAX},                                     /* negative fixint -1 */
        {{0xe0}, 1, (uint64_t)-32},                                  /* negative fixint -32 */
        {{0xd0, 0x80}, 2, (uint64_t)-128},                           /* int8 */
        {{0xd0, 0x05}, 2, 5},                                        /* int8, positive */
        {{0xd1, 0x80, 0x00}, 3, (uint64_t)-32768},                   /* int16 */
        {{0xd2, 0x80, 0, 0, 0}, 5, (uint64_t)INT32_MIN},             /* int32 */
        {{0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0}, 9, (uint64_t)INT64_MIN}, /* int64 */
        {{0xd3, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 9, (uint64_t)INT64_MAX},
    };
    const unsigned n = sizeof(cases) / sizeof(cases[0]);
    begin_batch3(1);
    msgpack_pack_array(&pk, 3);
    pstr("BlockRemoved");
    msgpack_pack_array(&pk, n);
    for (unsigned i = 0; i < n; i++) praw(cases[i].bytes, cases[i].len);
    msgpack_pack_nil(&pk);
    end_batch3(0);
    const struct cr_kv_batch *b = decode_ok();
    const struct cr_kv_event *e = &b->events[0];
    assert_int_equal(e->kind, CR_KV_EVENT_REMOVED);
    assert_int_equal(e->hash_count, n);
    for (unsigned i = 0; i < n; i++) {
        if (e->hashes[i] != cases[i].want)
            fail_msg("case %u: got %llx want %llx", i, (unsigned long long)e->hashes[i],
                     (unsigned long long)cases[i].want);
    }
    assert_null(e->medium.ptr);
}

/* bin hashes: last 8 bytes big-endian; shorter bins zero-padded on the left. */
static void test_hash_bin(void **state) {
    (void)state;
    uint8_t digest[32];
    for (unsigned i = 0; i < 32; i++) digest[i] = (uint8_t)i;
    const uint8_t eight[8] = {0x80, 1, 2, 3, 4, 5, 6, 7};
    const uint8_t two[2] = {0x01, 0x02};
    begin_batch3(1);
    msgpack_pack_array(&pk, 5);
    pstr("BlockStored");
    msgpack_pack_array(&pk, 4);
    msgpack_pack_bin_with_body(&pk, digest, 32);
    msgpack_pack_bin_with_body(&pk, eight, 8);
    msgpack_pack_bin_with_body(&pk, two, 2);
    msgpack_pack_bin_with_body(&pk, two, 0);
    msgpack_pack_bin_with_body(&pk, digest, 32); /* parent */
    msgpack_pack_nil(&pk);                       /* no tokens */
    msgpack_pack_uint8(&pk, 16);
    end_batch3(0);
    const struct cr_kv_event *e = &decode_ok()->events[0];
    assert_true(e->hashes[0] == 0x18191a1b1c1d1e1full);
    assert_true(e->hashes[1] == 0x8001020304050607ull);
    assert_true(e->hashes[2] == 0x0102);
    assert_true(e->hashes[3] == 0);
    assert_true(e->has_parent && e->parent_hash == 0x18191a1b1c1d1e1full);
    assert_false(e->has_token_ids);
}

/* A defect of the reference: AllBlocksCleared must not fail the batch. */
static void test_cleared_mid_batch(void **state) {
    (void)state;
    uint64_t h[2] = {1, 2};
    begin_batch3(3);
    pack_vllm_stored(h, 2, NULL, 4, "GPU");
    pack_cleared();
    pack_vllm_removed(h, 2);
    end_batch3(1);
    const struct cr_kv_batch *b = decode_ok();
    assert_int_equal(b->event_count, 3);
    assert_int_equal(b->events[0].kind, CR_KV_EVENT_STORED);
    assert_int_equal(b->events[1].kind, CR_KV_EVENT_CLEARED);
    assert_int_equal(b->events[2].kind, CR_KV_EVENT_REMOVED);
    assert_string_equal(b->events[2].medium.ptr, "CPU");
    assert_true(b->events[2].hashes[1] == 2);
}

/* ---- vLLM >= 0.26 maps, SGLang, map batches --------------------------- */

static void test_vllm_map_events(void **state) {
    (void)state;
    begin_batch3(3);
    msgpack_pack_map(&pk, 6);
    pstr("block_hashes");
    msgpack_pack_array(&pk, 1);
    msgpack_pack_uint64(&pk, 99);
    pstr("unknown_future_field");
    msgpack_pack_map(&pk, 1);
    pstr("x");
    msgpack_pack_array(&pk, 1);
    msgpack_pack_double(&pk, 2.5);
    pstr("type");
    pstr("BlockStored");
    pstr("token_ids");
    msgpack_pack_array(&pk, 4);
    for (int i = 0; i < 4; i++) msgpack_pack_int(&pk, i);
    pstr("block_size");
    msgpack_pack_int(&pk, 4);
    pstr("medium");
    pstr("GPU");
    msgpack_pack_map(&pk, 2); /* removed: absent medium and group_idx */
    pstr("type");
    pstr("BlockRemoved");
    pstr("block_hashes");
    msgpack_pack_array(&pk, 1);
    msgpack_pack_uint64(&pk, 99);
    msgpack_pack_map(&pk, 1);
    pstr("type");
    pstr("AllBlocksCleared");
    end_batch3(0);
    const struct cr_kv_batch *b = decode_ok();
    const struct cr_kv_event *e = &b->events[0];
    assert_int_equal(e->dialect, CR_KV_DIALECT_VLLM_MAP);
    assert_int_equal(e->kind, CR_KV_EVENT_STORED);
    assert_true(e->hash_count == 1 && e->hashes[0] == 99);
    assert_false(e->has_parent);
    assert_int_equal(e->token_count, 4);
    assert_int_equal(e->token_ids[3], 3);
    assert_string_equal(e->medium.ptr, "GPU");
    assert_int_equal(b->events[1].kind, CR_KV_EVENT_REMOVED);
    assert_null(b->events[1].medium.ptr);
    assert_false(b->events[1].has_group_idx);
    assert_int_equal(b->events[2].kind, CR_KV_EVENT_CLEARED);
}

static void test_map_batch_vllm(void **state) {
    (void)state;
    msgpack_pack_map(&pk, 4);
    pstr("events");
    msgpack_pack_array(&pk, 1);
    pack_cleared();
    pstr("extra");
    msgpack_pack_nil(&pk);
    pstr("data_parallel_rank");
    msgpack_pack_uint8(&pk, 7);
    pstr("ts");
    msgpack_pack_float(&pk, 2.5f);
    const struct cr_kv_batch *b = decode_ok();
    assert_true(b->ts == 2.5);
    assert_true(b->has_dp_rank && b->dp_rank == 7);
    assert_int_equal(b->event_count, 1);
}

/* SGLang: signed int64 hashes, attn_dp_rank, one block per page. */
static void test_sglang_map_batch(void **state) {
    (void)state;
    msgpack_pack_map(&pk, 3);
    pstr("ts");
    msgpack_pack_double(&pk, 10.0);
    pstr("attn_dp_rank");
    msgpack_pack_int(&pk, 2);
    pstr("events");
    msgpack_pack_array(&pk, 2);
    msgpack_pack_array(&pk, 7);
    pstr("BlockStored");
    msgpack_pack_array(&pk, 1);
    msgpack_pack_int64(&pk, INT64_MIN + 1);
    msgpack_pack_int64(&pk, -42);
    msgpack_pack_array(&pk, 1);
    msgpack_pack_uint16(&pk, 300);
    msgpack_pack_uint8(&pk, 1);
    msgpack_pack_nil(&pk);
    msgpack_pack_nil(&pk);
    msgpack_pack_map(&pk, 2);
    pstr("type");
    pstr("BlockRemoved");
    pstr("block_hashes");
    msgpack_pack_array(&pk, 1);
    msgpack_pack_int64(&pk, -1);
    const struct cr_kv_batch *b = decode_ok();
    assert_true(b->has_dp_rank && b->dp_rank == 2);
    assert_true(b->events[0].hashes[0] == (uint64_t)(INT64_MIN + 1));
    assert_true(b->events[0].parent_hash == (uint64_t)-42);
    assert_true(b->events[1].hashes[0] == UINT64_MAX);
}

static void test_two_element_batch(void **state) {
    (void)state;
    msgpack_pack_array(&pk, 2);
    msgpack_pack_double(&pk, 3.0);
    msgpack_pack_array(&pk, 0);
    const struct cr_kv_batch *b = decode_ok();
    assert_false(b->has_dp_rank);
    assert_int_equal(b->event_count, 0);
}

/* ---- standardized and store events ------------------------------------ */

static void pack_std_common(const char *type, unsigned extra) {
    msgpack_pack_map(&pk, 11 + extra);
    pstr("event_id");
    msgpack_pack_uint64(&pk, 77);
    pstr("timestamp");
    msgpack_pack_uint64(&pk, 1700000000123ull);
    pstr("event_type");
    pstr(type);
    pstr("model_name");
    pstr("llama");
    pstr("block_size");
    msgpack_pack_uint16(&pk, 2);
    pstr("additional_salt");
    pstr("salt");
    pstr("lora_name");
    msgpack_pack_nil(&pk);
    pstr("tenant_id");
    pstr("t1");
    pstr("backend_id");
    pstr("b1");
    pstr("medium");
    pstr("DISK");
    pstr("dp_rank");
    msgpack_pack_uint8(&pk, 1);
}

static void test_standardized_events(void **state) {
    (void)state;
    msgpack_pack_array(&pk, 3);
    msgpack_pack_uint64(&pk, 1700000000250ull);
    msgpack_pack_array(&pk, 3);
    pack_std_common("stored", 4);
    pstr("seq_hashes");
    msgpack_pack_array(&pk, 2);
    msgpack_pack_uint64(&pk, 500);
    msgpack_pack_int64(&pk, -500);
    pstr("base_block_idx");
    msgpack_pack_uint8(&pk, 3);
    pstr("parent_hash");
    msgpack_pack_uint64(&pk, 400);
    pstr("token_ids");
    msgpack_pack_array(&pk, 4);
    for (int i = 0; i < 4; i++) msgpack_pack_int(&pk, 9 + i);
    pack_std_common("removed", 1);
    pstr("seq_hashes");
    msgpack_pack_array(&pk, 1);
    msgpack_pack_uint64(&pk, 500);
    pack_std_common("cleared", 0);
    msgpack_pack_uint8(&pk, 5);
    const struct cr_kv_batch *b = decode_ok();
    assert_true(b->ts > 1700000000.249 && b->ts < 1700000000.251);
    assert_true(b->has_dp_rank && b->dp_rank == 5);
    const struct cr_kv_event *e = &b->events[0];
    assert_int_equal(e->dialect, CR_KV_DIALECT_STANDARD);
    assert_int_equal(e->kind, CR_KV_EVENT_STORED);
    assert_true(e->seq_hashes);
    assert_true(e->has_event_id && e->event_id == 77);
    assert_true(e->has_timestamp_ms && e->timestamp_ms == 1700000000123ll);
    assert_string_equal(e->model_name.ptr, "llama");
    assert_string_equal(e->additional_salt.ptr, "salt");
    assert_string_equal(e->tenant_id.ptr, "t1");
    assert_string_equal(e->backend_id.ptr, "b1");
    assert_string_equal(e->medium.ptr, "DISK");
    assert_null(e->lora_name.ptr);
    assert_true(e->has_dp_rank && e->dp_rank == 1);
    assert_true(e->hash_count == 2 && e->hashes[1] == (uint64_t)-500);
    assert_true(e->has_base_block_idx && e->base_block_idx == 3);
    assert_true(e->has_parent && e->parent_hash == 400);
    assert_int_equal(e->token_count, 4);
    assert_int_equal(b->events[1].kind, CR_KV_EVENT_REMOVED);
    assert_int_equal(b->events[1].hash_count, 1);
    assert_int_equal(b->events[2].kind, CR_KV_EVENT_CLEARED);
}

static void pack_replicas(void) {
    msgpack_pack_array(&pk, 2);
    msgpack_pack_array(&pk, 2);
    pstr("memory");
    pstr("tcp://192.168.1.10:6000");
    msgpack_pack_array(&pk, 2);
    pstr("disk");
    pstr("/data/blocks/block_12345.bin");
}

/* Seed 000's own example, byte for byte in structure. */
static void test_store_events(void **state) {
    (void)state;
    msgpack_pack_array(&pk, 2);
    msgpack_pack_double(&pk, 1712345678.25);
    msgpack_pack_array(&pk, 3);
    msgpack_pack_array(&pk, 8);
    pstr("BlockStoreEvent");
    pstr("key_12345");
    pack_replicas();
    pstr("llama2-7b");
    msgpack_pack_uint32(&pk, 512);
    pstr("0x41234125");
    pstr("");
    msgpack_pack_array(&pk, 5);
    for (int i = 1; i <= 5; i++) msgpack_pack_int(&pk, i);
    msgpack_pack_array(&pk, 3);
    pstr("BlockUpdateEvent");
    pstr("key_12345");
    msgpack_pack_array(&pk, 0);
    msgpack_pack_array(&pk, 1);
    pstr("RemoveAllEvent");
    const struct cr_kv_batch *b = decode_ok();
    assert_true(b->ts == 1712345678.25);
    const struct cr_kv_event *e = &b->events[0];
    assert_int_equal(e->dialect, CR_KV_DIALECT_STORE);
    assert_int_equal(e->kind, CR_KV_EVENT_STORED);
    assert_string_equal(e->key.ptr, "key_12345");
    assert_int_equal(e->replica_count, 2);
    assert_string_equal(e->replicas[1].type.ptr, "disk");
    assert_string_equal(e->replicas[0].location.ptr, "tcp://192.168.1.10:6000");
    assert_string_equal(e->model_name.ptr, "llama2-7b");
    assert_int_equal(e->block_size, 512);
    assert_string_equal(e->block_hash.ptr, "0x41234125");
    assert_int_equal(e->parent_block_hash.len, 0);
    assert_int_equal(e->token_count, 5);
    assert_int_equal(e->token_ids[4], 5);
    assert_int_equal(b->events[1].kind, CR_KV_EVENT_UPDATED);
    assert_int_equal(b->events[1].replica_count, 0);
    assert_int_equal(b->events[2].kind, CR_KV_EVENT_CLEARED);
    assert_string_equal(cr_kv_event_kind_name(b->events[1].kind), "UPDATED");
}

/* ---- malformed input -------------------------------------------------- */

static void test_token_count_mismatch_message(void **state) {
    (void)state;
    uint64_t h[3] = {1, 2, 3};
    begin_batch3(4);
    for (int i = 0; i < 3; i++) pack_cleared();
    msgpack_pack_array(&pk, 5);
    pstr("BlockStored");
    msgpack_pack_array(&pk, 3);
    for (int i = 0; i < 3; i++) msgpack_pack_uint64(&pk, h[i]);
    msgpack_pack_nil(&pk);
    msgpack_pack_array(&pk, 40);
    for (int i = 0; i < 40; i++) msgpack_pack_int(&pk, i);
    msgpack_pack_int(&pk, 16);
    end_batch3(0);
    decode_fails("event 3");
    assert_string_equal(err, "event 3: BlockStored.token_ids length 40 != 3 blocks * 16");
}

static void test_standard_token_mismatch(void **state) {
    (void)state;
    msgpack_pack_array(&pk, 2);
    msgpack_pack_uint64(&pk, 1);
    msgpack_pack_array(&pk, 1);
    pack_std_common("stored", 2);
    pstr("seq_hashes");
    msgpack_pack_array(&pk, 1);
    msgpack_pack_uint64(&pk, 500);
    pstr("token_ids");
    msgpack_pack_array(&pk, 3);
    for (int i = 0; i < 3; i++) msgpack_pack_int(&pk, i);
    decode_fails("event 0: stored.token_ids length 3 != 1 blocks * 2");
}

struct bad_case {
    const char *want;
    void (*pack)(void);
};

static void bad_ts_string(void) {
    msgpack_pack_array(&pk, 2);
    pstr("now");
    msgpack_pack_array(&pk, 0);
}
static void bad_ts_nan(void) {
    msgpack_pack_array(&pk, 2);
    msgpack_pack_double(&pk, NAN);
    msgpack_pack_array(&pk, 0);
}
static void bad_batch_len4(void) {
    msgpack_pack_array(&pk, 4);
    msgpack_pack_double(&pk, 1);
    msgpack_pack_array(&pk, 0);
    msgpack_pack_nil(&pk);
    msgpack_pack_nil(&pk);
}
static void bad_batch_scalar(void) { msgpack_pack_int(&pk, 3); }
static void bad_events_map(void) {
    msgpack_pack_array(&pk, 2);
    msgpack_pack_double(&pk, 1);
    msgpack_pack_map(&pk, 0);
}
static void bad_event_int(void) {
    begin_batch3(1);
    msgpack_pack_int(&pk, 5);
    end_batch3(0);
}
static void bad_event_type(void) {
    begin_batch3(1);
    msgpack_pack_array(&pk, 1);
    pstr("BlockExploded");
    end_batch3(0);
}
static void bad_event_empty(void) {
    begin_batch3(1);
    msgpack_pack_array(&pk, 0);
    end_batch3(0);
}
static void bad_map_no_type(void) {
    begin_batch3(1);
    msgpack_pack_map(&pk, 1);
    pstr("block_hashes");
    msgpack_pack_array(&pk, 0);
    end_batch3(0);
}
static void bad_hash_str(void) {
    begin_batch3(1);
    msgpack_pack_array(&pk, 2);
    pstr("BlockRemoved");
    msgpack_pack_array(&pk, 2);
    msgpack_pack_int(&pk, 1);
    pstr("0xabc");
    end_batch3(0);
}
static void bad_hash_float(void) {
    begin_batch3(1);
    msgpack_pack_array(&pk, 2);
    pstr("BlockRemoved");
    msgpack_pack_array(&pk, 1);
    msgpack_pack_double(&pk, 1.5);
    end_batch3(0);
}
static void pack_stored_one_token(void (*token)(void)) {
    begin_batch3(1);
    msgpack_pack_array(&pk, 5);
    pstr("BlockStored");
    msgpack_pack_array(&pk, 1);
    msgpack_pack_int(&pk, 1);
    msgpack_pack_nil(&pk);
    msgpack_pack_array(&pk, 1);
    token();
    msgpack_pack_int(&pk, 1);
    end_batch3(0);
}
static void token_negative(void) { msgpack_pack_int(&pk, -1); }
static void token_too_big(void) { msgpack_pack_uint64(&pk, (uint64_t)UINT32_MAX + 1); }
static void bad_token_negative(void) { pack_stored_one_token(token_negative); }
static void bad_token_too_big(void) { pack_stored_one_token(token_too_big); }
static void bad_block_size_str(void) {
    begin_batch3(1);
    msgpack_pack_array(&pk, 5);
    pstr("BlockStored");
    msgpack_pack_array(&pk, 0);
    msgpack_pack_nil(&pk);
    msgpack_pack_array(&pk, 0);
    pstr("16");
    end_batch3(0);
}
static void bad_stored_short(void) {
    begin_batch3(1);
    msgpack_pack_array(&pk, 4);
    pstr("BlockStored");
    msgpack_pack_array(&pk, 0);
    msgpack_pack_nil(&pk);
    msgpack_pack_array(&pk, 0);
    end_batch3(0);
}
static void bad_medium_int(void) {
    begin_batch3(1);
    msgpack_pack_array(&pk, 3);
    pstr("BlockRemoved");
    msgpack_pack_array(&pk, 0);
    msgpack_pack_int(&pk, 3);
    end_batch3(0);
}
static void bad_dp_negative(void) {
    msgpack_pack_array(&pk, 3);
    msgpack_pack_double(&pk, 1);
    msgpack_pack_array(&pk, 0);
    msgpack_pack_int(&pk, -1);
}
static void bad_map_batch_no_events(void) {
    msgpack_pack_map(&pk, 1);
    pstr("ts");
    msgpack_pack_double(&pk, 1);
}
static void bad_store_short(void) {
    begin_batch3(1);
    msgpack_pack_array(&pk, 7);
    pstr("BlockStoreEvent");
    for (int i = 0; i < 6; i++) pstr("");
    end_batch3(0);
}
static void bad_store_replica(void) {
    begin_batch3(1);
    msgpack_pack_array(&pk, 3);
    pstr("BlockUpdateEvent");
    pstr("k");
    msgpack_pack_array(&pk, 1);
    msgpack_pack_array(&pk, 1);
    pstr("memory");
    end_batch3(0);
}
static void bad_std_type(void) {
    begin_batch3(1);
    msgpack_pack_map(&pk, 1);
    pstr("event_type");
    pstr("evicted");
    end_batch3(0);
}
static void bad_long_string(void) {
    static char big[CR_KV_MAX_STRING_BYTES + 2];
    memset(big, 'a', sizeof(big) - 1);
    begin_batch3(1);
    msgpack_pack_array(&pk, 3);
    pstr("BlockRemoved");
    msgpack_pack_array(&pk, 0);
    pstr(big);
    end_batch3(0);
}
static void bad_trailing_bytes(void) {
    msgpack_pack_array(&pk, 2);
    msgpack_pack_double(&pk, 1);
    msgpack_pack_array(&pk, 0);
    msgpack_pack_nil(&pk);
}
static void bad_reserved_byte(void) {
    static const uint8_t bytes[] = {0x92, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0x91, 0xc1};
    praw(bytes, sizeof(bytes));
}
static void bad_huge_array_claim(void) {
    static const uint8_t bytes[] = {0x92, 0x01, 0xdd, 0xff, 0xff, 0xff, 0xff, 0x00};
    praw(bytes, sizeof(bytes));
}
static void bad_huge_map_claim(void) {
    static const uint8_t bytes[] = {0xdf, 0xff, 0xff, 0xff, 0xff};
    praw(bytes, sizeof(bytes));
}
static void bad_huge_str_claim(void) {
    static const uint8_t bytes[] = {0x92, 0x01, 0xdb, 0xff, 0xff, 0xff, 0xf0, 0x00};
    praw(bytes, sizeof(bytes));
}
static void bad_too_deep(void) {
    begin_batch3(1);
    msgpack_pack_array(&pk, 2); /* depth 3: the event */
    pstr("AllBlocksCleared");
    for (int i = 0; i < 6; i++) msgpack_pack_array(&pk, 1); /* depths 4..9 */
    msgpack_pack_nil(&pk);
    end_batch3(0);
}

static void test_malformed_table(void **state) {
    (void)state;
    static const struct bad_case cases[] = {
        {"batch ts is str", bad_ts_string},
        {"not finite", bad_ts_nan},
        {"batch array has 4 elements", bad_batch_len4},
        {"batch is uint", bad_batch_scalar},
        {"batch events is map", bad_events_map},
        {"event 0: event is uint", bad_event_int},
        {"event 0: unknown event type", bad_event_type},
        {"event 0: empty event array", bad_event_empty},
        {"neither \"type\" nor \"event_type\"", bad_map_no_type},
        {"BlockRemoved.block_hashes[1] is str", bad_hash_str},
        {"BlockRemoved.block_hashes[0] is float", bad_hash_float},
        {"BlockStored.token_ids[0] is not a u32", bad_token_negative},
        {"BlockStored.token_ids[0] is not a u32", bad_token_too_big},
        {"BlockStored.block_size is str", bad_block_size_str},
        {"BlockStored has 4 elements", bad_stored_short},
        {"BlockRemoved.medium is uint", bad_medium_int},
        {"batch.dp_rank is int", bad_dp_negative},
        {"lacks \"ts\" or \"events\"", bad_map_batch_no_events},
        {"BlockStoreEvent has 7 elements", bad_store_short},
        {"replicas[0] is not a [type, location] pair", bad_store_replica},
        {"unknown event_type", bad_std_type},
        {"BlockRemoved.medium is 4097 bytes", bad_long_string},
        {"trailing bytes", bad_trailing_bytes},
        {"malformed msgpack at byte 11", bad_reserved_byte},
        {"claims 4294967295 elements", bad_huge_array_claim},
        {"claims 8589934590 elements", bad_huge_map_claim},
        {"truncated", bad_huge_str_claim},
        {"nested deeper than 8", bad_too_deep},
    };
    for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        msgpack_sbuffer_clear(&sb);
        cases[i].pack();
        decode_fails(cases[i].want);
    }
}

/* Nesting exactly at the limit (8 levels) is accepted. */
static void test_depth_at_limit_ok(void **state) {
    (void)state;
    begin_batch3(1);
    msgpack_pack_array(&pk, 2);
    pstr("AllBlocksCleared");
    for (int i = 0; i < 5; i++) msgpack_pack_array(&pk, 1); /* depths 4..8 */
    msgpack_pack_nil(&pk);
    end_batch3(0);
    assert_int_equal(decode_ok()->events[0].kind, CR_KV_EVENT_CLEARED);
}

static void test_oversized_counts(void **state) {
    (void)state;
    begin_batch3(CR_KV_MAX_EVENTS_PER_BATCH + 1);
    for (unsigned i = 0; i <= CR_KV_MAX_EVENTS_PER_BATCH; i++) pack_cleared();
    end_batch3(0);
    decode_fails("batch has 16385 events, limit 16384");

    msgpack_sbuffer_clear(&sb);
    begin_batch3(1);
    msgpack_pack_array(&pk, 2);
    pstr("BlockRemoved");
    msgpack_pack_array(&pk, CR_KV_MAX_HASHES_PER_EVENT + 1);
    for (unsigned i = 0; i <= CR_KV_MAX_HASHES_PER_EVENT; i++) msgpack_pack_int(&pk, 1);
    end_batch3(0);
    decode_fails("event 0: BlockRemoved.block_hashes has 65537 hashes, limit 65536");

    msgpack_sbuffer_clear(&sb);
    begin_batch3(1);
    msgpack_pack_array(&pk, 5);
    pstr("BlockStored");
    msgpack_pack_array(&pk, 0);
    msgpack_pack_nil(&pk);
    msgpack_pack_array(&pk, CR_KV_MAX_TOKENS_PER_EVENT + 1);
    for (unsigned i = 0; i <= CR_KV_MAX_TOKENS_PER_EVENT; i++) msgpack_pack_int(&pk, 1);
    msgpack_pack_int(&pk, 16);
    end_batch3(0);
    decode_fails("token_ids has 2097153 tokens");

    msgpack_sbuffer_clear(&sb);
    batch_one_stored();
    const struct cr_kv_batch *b = (const void *)1;
    assert_int_equal(cr_kv_decode(dec, sb.data, CR_KV_MAX_PAYLOAD_BYTES + 1u, &b, err,
                                  sizeof(err)),
                     CR_ERR_PROTOCOL);
    assert_null(b);
    assert_non_null(strstr(err, "limit"));
}

/* A rich batch cut at every byte offset fails cleanly (run under ASan). */
static void test_truncated_every_offset(void **state) {
    (void)state;
    uint64_t h[3] = {1, 2, 3}, parent = 9;
    msgpack_pack_array(&pk, 3);
    msgpack_pack_double(&pk, 5.5);
    msgpack_pack_array(&pk, 4);
    pack_vllm_stored(h, 3, &parent, 2, "GPU");
    pack_cleared();
    pack_vllm_removed(h, 3);
    msgpack_pack_map(&pk, 2);
    pstr("type");
    pstr("BlockRemoved");
    pstr("block_hashes");
    msgpack_pack_array(&pk, 1);
    msgpack_pack_bin_with_body(&pk, "0123456789abcdef0123456789abcdef", 32);
    msgpack_pack_uint8(&pk, 0);
    assert_int_equal(decode_ok()->event_count, 4);
    for (size_t cut = 0; cut < sb.size; cut++) {
        const struct cr_kv_batch *b = (const void *)1;
        assert_int_equal(decode_bytes(sb.data, cut, &b), CR_ERR_PROTOCOL);
        assert_null(b);
        assert_true(err[0] != '\0' && strcmp(err, "x") != 0);
    }
}

/* A decoder is reusable after errors, across shapes, and with err == NULL. */
static void test_decoder_reuse(void **state) {
    (void)state;
    uint64_t h[64];
    u64s(h, 64, 100);
    begin_batch3(40);
    for (int i = 0; i < 40; i++) pack_vllm_stored(h, 64, NULL, 16, "GPU"); /* > 64 KiB */
    end_batch3(0);
    for (int round = 0; round < 3; round++) {
        const struct cr_kv_batch *b = decode_ok();
        assert_int_equal(b->event_count, 40);
        assert_true(b->events[39].hashes[63] == 163);
        assert_int_equal(b->events[39].token_ids[1023], 2023);
    }
    const struct cr_kv_batch *b = NULL;
    const uint8_t junk[] = {0x93, 0xc1};
    assert_int_equal(cr_kv_decode(dec, junk, sizeof(junk), &b, NULL, 0), CR_ERR_PROTOCOL);
    assert_int_equal(cr_kv_decode(dec, junk, sizeof(junk), &b, err, 1), CR_ERR_PROTOCOL);
    assert_string_equal(err, "");
    msgpack_sbuffer_clear(&sb);
    batch_one_stored();
    b = decode_ok();
    assert_int_equal(b->events[0].token_count, 8);
    assert_int_equal(cr_kv_decode(dec, sb.data, sb.size, &b, NULL, 0), CR_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_vllm_array_stored, setup, teardown),
        cmocka_unit_test_setup_teardown(test_vllm_array_stored_length5, setup, teardown),
        cmocka_unit_test_setup_teardown(test_vllm_array_trailing_extras, setup, teardown),
        cmocka_unit_test_setup_teardown(test_vllm_spec_kinds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hash_every_int_width, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hash_bin, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cleared_mid_batch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_vllm_map_events, setup, teardown),
        cmocka_unit_test_setup_teardown(test_map_batch_vllm, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sglang_map_batch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_two_element_batch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_standardized_events, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_events, setup, teardown),
        cmocka_unit_test_setup_teardown(test_token_count_mismatch_message, setup, teardown),
        cmocka_unit_test_setup_teardown(test_standard_token_mismatch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_malformed_table, setup, teardown),
        cmocka_unit_test_setup_teardown(test_depth_at_limit_ok, setup, teardown),
        cmocka_unit_test_setup_teardown(test_oversized_counts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_truncated_every_offset, setup, teardown),
        cmocka_unit_test_setup_teardown(test_decoder_reuse, setup, teardown),
    };
    return cmocka_run_group_tests_name("kv_event", tests, NULL, NULL);
}
