/* The RPC intake's pre-scan (cr_rpc_prescan, src/rpc/rpc_codec.c): what
 * it refuses before protobuf-c allocates, and that the largest legitimate
 * request still passes.  Issue 10 item 3: protobuf-c keeps every unknown
 * field as an allocation of its own, and the pre-scan counted only field
 * numbers below 16, so 16 MiB of `80 01 00` (field 16, varint 0) raised RSS
 * by 490 MB. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpc/rpc_codec.h"

static uint8_t *repeat3(const uint8_t unit[3], size_t n) {
    uint8_t *body = malloc(n * 3 + 1);
    assert_non_null(body);
    for (size_t i = 0; i < n; i++) memcpy(body + i * 3, unit, 3);
    return body;
}

static void test_unknown_fields_bounded(void **unused) {
    (void)unused;
    const ProtobufCMessageDescriptor *d = &crescent__master__get_version_request__descriptor;
    static const uint8_t unit[3] = {0x80, 0x01, 0x00}; /* field 16, varint 0 */
    uint8_t *body = repeat3(unit, CR_RPC_UNKNOWN_FIELDS_MAX + 1);
    assert_null(cr_rpc_prescan(d, body, CR_RPC_UNKNOWN_FIELDS_MAX * 3, CR_MASTER_BATCH_MAX));
    const char *why = cr_rpc_prescan(d, body, (CR_RPC_UNKNOWN_FIELDS_MAX + 1) * 3,
                                     CR_MASTER_BATCH_MAX);
    assert_non_null(why);
    assert_non_null(strstr(why, "fields unknown to master.proto"));
    free(body);
    /* The frame: 16 MiB of them, refused at the 65th. */
    size_t n = (16u << 20) / 3;
    body = repeat3(unit, n);
    assert_non_null(cr_rpc_prescan(d, body, n * 3, CR_MASTER_BATCH_MAX));
    free(body);
    /* Field numbers below 16 that the message lacks count as unknown too. */
    static const uint8_t low[3] = {0x08 | (9 << 3), 0x01, 0x00};
    body = repeat3(low, 100);
    assert_non_null(cr_rpc_prescan(d, body, 300, CR_MASTER_BATCH_MAX));
    free(body);
}

/* A BatchPutStart of 4096 puts, each with a block of 64 token ids: the
 * largest legitimate request shape, well inside the allocation budget. */
static void test_largest_batch_passes(void **unused) {
    (void)unused;
    enum { N = 4096, TOKENS = 64 };
    uint32_t tokens[TOKENS];
    for (uint32_t i = 0; i < TOKENS; i++) tokens[i] = i;
    Crescent__Master__ReplicateConfig config = CRESCENT__MASTER__REPLICATE_CONFIG__INIT;
    config.preferred_segment = "seg";
    Crescent__Master__UUID uuid = CRESCENT__MASTER__UUID__INIT;
    Crescent__Master__BlockInfo block = CRESCENT__MASTER__BLOCK_INFO__INIT;
    block.model_name = "m";
    block.block_hash = "h";
    block.parent_block_hash = "p";
    block.n_token_ids = TOKENS;
    block.token_ids = tokens;
    uint64_t slices[2] = {1, 2};
    Crescent__Master__PutStartRequest *reqs = calloc(N, sizeof(*reqs));
    Crescent__Master__PutStartRequest **ptrs = calloc(N, sizeof(*ptrs));
    char (*keys)[16] = calloc(N, 16);
    assert_true(reqs != NULL && ptrs != NULL && keys != NULL);
    for (int i = 0; i < N; i++) {
        crescent__master__put_start_request__init(&reqs[i]);
        snprintf(keys[i], 16, "key-%d", i);
        reqs[i].key = keys[i];
        reqs[i].value_length = 1;
        reqs[i].config = &config;
        reqs[i].tenant_id = "t";
        reqs[i].client_id = &uuid;
        reqs[i].block = &block;
        reqs[i].n_slice_lengths = 2;
        reqs[i].slice_lengths = slices;
        ptrs[i] = &reqs[i];
    }
    Crescent__Master__BatchPutStartRequest batch = CRESCENT__MASTER__BATCH_PUT_START_REQUEST__INIT;
    batch.n_requests = N;
    batch.requests = ptrs;
    size_t len = protobuf_c_message_get_packed_size(&batch.base);
    uint8_t *body = malloc(len);
    assert_non_null(body);
    protobuf_c_message_pack(&batch.base, body);
    assert_null(cr_rpc_prescan(&crescent__master__batch_put_start_request__descriptor, body, len,
                               CR_MASTER_BATCH_MAX));
    /* Unpacked into an arena (several chunks at this size), it packs back
     * to the same bytes. */
    void *arena = NULL;
    ProtobufCMessage *got =
        cr_rpc_unpack(&crescent__master__batch_put_start_request__descriptor, body, len, &arena);
    assert_non_null(got);
    assert_non_null(arena);
    assert_int_equal(protobuf_c_message_get_packed_size(got), len);
    uint8_t *again = malloc(len);
    assert_non_null(again);
    protobuf_c_message_pack(got, again);
    assert_memory_equal(again, body, len);
    free(again);
    cr_rpc_request_arena_free(arena);
    free(body);
    free(keys);
    free(ptrs);
    free(reqs);
}

/* cr_rpc_unpack decodes what protobuf-c's own unpack decodes, into its
 * arena: every prefix of a BatchPutStart (most of them malformed) is refused
 * by both or decoded by both to the same message, and a refusal keeps no
 * arena. */
static void test_unpack_into_arena_as_protobuf_c(void **unused) {
    (void)unused;
    enum { N = 40 };
    Crescent__Master__UUID uuid = CRESCENT__MASTER__UUID__INIT;
    Crescent__Master__ReplicateConfig config = CRESCENT__MASTER__REPLICATE_CONFIG__INIT;
    Crescent__Master__PutStartRequest reqs[N], *ptrs[N];
    char keys[N][40];
    for (int i = 0; i < N; i++) {
        crescent__master__put_start_request__init(&reqs[i]);
        snprintf(keys[i], sizeof(keys[i]), "key-%d-%.*s", i, i % 17, "abcdefghijklmnopq");
        reqs[i].key = keys[i];
        reqs[i].value_length = 4096 + i;
        reqs[i].config = &config;
        reqs[i].client_id = &uuid;
        if (i % 2 == 0) reqs[i].tenant_id = "t";
        ptrs[i] = &reqs[i];
    }
    Crescent__Master__BatchPutStartRequest batch = CRESCENT__MASTER__BATCH_PUT_START_REQUEST__INIT;
    batch.n_requests = N;
    batch.requests = ptrs;
    const ProtobufCMessageDescriptor *d = &crescent__master__batch_put_start_request__descriptor;
    size_t len = protobuf_c_message_get_packed_size(&batch.base);
    uint8_t *body = malloc(len), *a = malloc(len), *b = malloc(len);
    assert_true(body != NULL && a != NULL && b != NULL);
    protobuf_c_message_pack(&batch.base, body);
    size_t decoded = 0;
    for (size_t cut = 0; cut <= len; cut++) {
        void *arena = (void *)1;
        ProtobufCMessage *got = cr_rpc_unpack(d, body, cut, &arena);
        ProtobufCMessage *want = protobuf_c_message_unpack(d, NULL, cut, body);
        assert_int_equal(got != NULL, want != NULL);
        if (got == NULL) {
            assert_null(arena);
            continue;
        }
        decoded++;
        size_t n = protobuf_c_message_get_packed_size(want);
        assert_int_equal(protobuf_c_message_get_packed_size(got), n);
        protobuf_c_message_pack(got, a);
        protobuf_c_message_pack(want, b);
        assert_memory_equal(a, b, n);
        cr_rpc_request_arena_free(arena);
        protobuf_c_message_free_unpacked(want, NULL);
    }
    assert_true(decoded > N); /* every whole entry, and the empty body */
    free(body);
    free(a);
    free(b);
}

/* Many small strings in a repeated field at each of several levels: the
 * per-field bound alone allowed 4096 × 4096 entries. */
static void test_allocation_budget(void **unused) {
    (void)unused;
    const ProtobufCMessageDescriptor *d = &crescent__master__batch_exist_key_request__descriptor;
    /* keys = 1: 4096 empty strings pass, 4097 repeat too often. */
    static const uint8_t key[2] = {0x0a, 0x00};
    uint8_t *body = malloc(2 * (CR_MASTER_BATCH_MAX + 1));
    assert_non_null(body);
    for (size_t i = 0; i <= CR_MASTER_BATCH_MAX; i++) memcpy(body + 2 * i, key, 2);
    assert_null(cr_rpc_prescan(d, body, 2 * CR_MASTER_BATCH_MAX, CR_MASTER_BATCH_MAX));
    const char *why = cr_rpc_prescan(d, body, 2 * (CR_MASTER_BATCH_MAX + 1), CR_MASTER_BATCH_MAX);
    assert_non_null(why);
    assert_non_null(strstr(why, "4096 times"));
    free(body);
    /* requests = 1 of BatchPutStart, 4096 entries each with the key field 40
     * times: every count within 4096, but 163,840 strings in all. */
    enum { ENTRIES = 4096, KEYS = 40 };
    uint8_t entry[2 + 2 * KEYS];
    entry[0] = 0x0a;
    entry[1] = 2 * KEYS;
    for (int i = 0; i < KEYS; i++) entry[2 + 2 * i] = 0x0a, entry[3 + 2 * i] = 0x00;
    body = malloc(sizeof(entry) * ENTRIES);
    assert_non_null(body);
    for (int i = 0; i < ENTRIES; i++) memcpy(body + i * sizeof(entry), entry, sizeof(entry));
    why = cr_rpc_prescan(&crescent__master__batch_put_start_request__descriptor, body,
                         sizeof(entry) * ENTRIES, CR_MASTER_BATCH_MAX);
    assert_non_null(why);
    assert_non_null(strstr(why, "strings, entries and messages in one request"));
    free(body);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unknown_fields_bounded),
        cmocka_unit_test(test_largest_batch_passes),
        cmocka_unit_test(test_allocation_budget),
        cmocka_unit_test(test_unpack_into_arena_as_protobuf_c),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
