/* Mooncake's master calls (src/mooncake/mc_calls.c) against bytes captured
 * between Mooncake's own client and mooncake_master (the commit in
 * docs/mooncake.md; tests/fixtures/mooncake/frames.jsonl holds the whole
 * capture): requests decode into the crescent requests that do the same,
 * and crescent's answers encode into exactly the bytes mooncake_master
 * sent for the same outcome. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crescent/error.h"
#include "master.pb-c.h"
#include "mooncake/mc_calls.h"
#include "mooncake/mc_internal.h"

static size_t unhex(const char *hex, uint8_t *out, size_t cap) {
    size_t n = strlen(hex) / 2;
    assert_true(n <= cap);
    for (size_t i = 0; i < n; i++) sscanf(hex + 2 * i, "%2hhx", &out[i]);
    return n;
}

static void assert_bytes(const struct cr_sp_writer *w, const char *hex) {
    uint8_t want[1024];
    size_t n = unhex(hex, want, sizeof(want));
    if (w->len != n || memcmp(w->buf, want, n) != 0) {
        fprintf(stderr, "got  ");
        for (size_t i = 0; i < w->len; i++) fprintf(stderr, "%02x", w->buf[i]);
        fprintf(stderr, "\nwant %s\n", hex);
        fail();
    }
}

static const struct cr_mc_fn *fn(uint32_t id) {
    const char *other;
    const struct cr_mc_fn *f = cr_mc_fn_find(id, &other);
    assert_non_null(f);
    return f;
}

#define MOUNT_REQ                                                                                  \
    "af0df79e04fdfdfd04048989ff800c0404800c800c800cfffd04048989ffff00860c5ee2898348cf8f656a010eb8" \
    "e0ef0f3132372e302e302e313a3133323133000000e0407f000000000004000000000f3132372e302e302e313a31" \
    "333231330374637000f5c82af68a204af3a94745c49f6451db"

static void *decode(uint32_t id, const char *hex, struct cr_mc_state *st, uint16_t method,
                    const ProtobufCMessageDescriptor *desc) {
    uint8_t body[1024];
    size_t n = unhex(hex, body, sizeof(body));
    struct cr_mc_request req;
    char err[256];
    assert_int_equal(cr_mc_decode(fn(id), body, n, st, &req, err, sizeof(err)), CR_OK);
    assert_int_equal(req.method, method);
    void *m = protobuf_c_message_unpack(desc, NULL, req.body_len, req.body);
    assert_non_null(m);
    cr_mc_request_free(&req);
    return m;
}

static void test_local_answers(void **state) {
    (void)state;
    struct cr_sp_writer w = {0};
    assert_true(cr_mc_answer_local(fn(0x7b81bb56u), &w)); /* ServiceReady: "2.0.0" */
    assert_bytes(&w, "35ccb31c0487800c01000105322e302e30");
    w.len = 0;
    assert_true(cr_mc_answer_local(fn(0x8da9b0a6u), &w)); /* GetStorageConfig */
    assert_bytes(&w, "eb68b59c0487fd800c0b04ff01000100010000000000000000");
    free(w.buf);
}

static void test_mount_and_put_start(void **state) {
    (void)state;
    struct cr_mc_state st = {0};
    Crescent__Master__MountSegmentRequest *m =
        decode(0x3e7ec4bbu, MOUNT_REQ, &st, CRESCENT__MASTER__METHOD__MOUNT_SEGMENT,
               &crescent__master__mount_segment_request__descriptor);
    assert_string_equal(m->segment_name, "127.0.0.1:13213");
    assert_int_equal(m->buffer, 0x7f40e0000000ull);
    assert_int_equal(m->size, 64ull << 20);
    assert_string_equal(m->transport_endpoint, "127.0.0.1:13213");
    assert_string_equal(m->protocol, "tcp");
    assert_int_equal(m->client_id->first, 0xf34a208af62ac8f5ull);
    protobuf_c_message_free_unpacked(&m->base, NULL);

    Crescent__Master__PutStartRequest *p = decode(
        0x65ea9ac1u,
        "0fbd85e304fdfd04048989ff800c04fd0404040685040b84800c800c84800c0b06800c8584800cff800cff"
        "00f5c82af68a204af3a94745c49f6451db016ba0860100000000000100000000000000000000000000000000"
        "00000000000000000000000000000000000764656661756c74",
        &st, CRESCENT__MASTER__METHOD__PUT_START, &crescent__master__put_start_request__descriptor);
    assert_string_equal(p->key, "k");
    assert_int_equal(p->value_length, 100000);
    assert_int_equal(p->n_slice_lengths, 1);
    assert_int_equal(p->config->replica_num, 1);
    assert_string_equal(p->tenant_id, "default");
    protobuf_c_message_free_unpacked(&p->base, NULL);

    /* crescent's answer: one replica on that segment, PROCESSING. */
    Crescent__Master__BufHandle h = CRESCENT__MASTER__BUF_HANDLE__INIT;
    h.segment_name = "127.0.0.1:13213", h.size = 100000, h.buffer = 0x7f40e0000000ull;
    h.transport_endpoint = "127.0.0.1:13213";
    Crescent__Master__BufHandle *hs[] = {&h};
    Crescent__Master__ReplicaInfo ri = CRESCENT__MASTER__REPLICA_INFO__INIT;
    ri.n_handles = 1, ri.handles = hs;
    ri.status = CRESCENT__MASTER__REPLICA_INFO__REPLICA_STATUS__PROCESSING;
    Crescent__Master__ReplicaInfo *ris[] = {&ri};
    Crescent__Master__PutStartResponse r = CRESCENT__MASTER__PUT_START_RESPONSE__INIT;
    r.n_replica_list = 1, r.replica_list = ris;
    uint8_t packed[512];
    size_t n = protobuf_c_message_pack(&r.base, packed);
    struct cr_sp_writer w = {0};
    assert_true(cr_mc_answer(fn(0x65ea9ac1u), CR_OK, packed, n, 0, NULL, &st, &w));
    assert_bytes(&w,
                 "a72739c4048784fd0486fdfd0404800c800cfffffdfd0404800c800cfffffd800c04fffdfd0404"
                 "8989ff04800cfffd800c04040401ffff01ff01000101010000000000000000a08601000000000000"
                 "0000e0407f0000037463700f3132372e302e302e313a313332313302000000");
    /* A duplicate put: OBJECT_ALREADY_EXISTS (-705). */
    r.n_replica_list = 0, r.status_code = CR_ERR_OBJECT_ALREADY_EXISTS;
    n = protobuf_c_message_pack(&r.base, packed);
    w.len = 0;
    assert_true(cr_mc_answer(fn(0x65ea9ac1u), CR_OK, packed, n, 0, NULL, &st, &w));
    assert_bytes(&w,
                 "a72739c4048784fd0486fdfd0404800c800cfffffdfd0404800c800cfffffd800c04fffdfd0404"
                 "8989ff04800cfffd800c04040401ffff01ff0100003ffdffff");
    free(w.buf);
    cr_mc_state_free(&st);
}

static void test_get_exist_remove(void **state) {
    (void)state;
    struct cr_mc_state st = {0};
    Crescent__Master__GetReplicaListRequest *g =
        decode(0x1f7ef174u, "d91ef97c04fd800c800cff00016b0764656661756c74", &st,
               CRESCENT__MASTER__METHOD__GET_REPLICA_LIST,
               &crescent__master__get_replica_list_request__descriptor);
    assert_string_equal(g->key, "k");
    protobuf_c_message_free_unpacked(&g->base, NULL);

    Crescent__Master__BufHandle h = CRESCENT__MASTER__BUF_HANDLE__INIT;
    h.segment_name = "127.0.0.1:13213", h.size = 100000, h.buffer = 0x7f40e0000000ull;
    h.transport_endpoint = "127.0.0.1:13213";
    Crescent__Master__BufHandle *hs[] = {&h};
    Crescent__Master__ReplicaInfo ri = CRESCENT__MASTER__REPLICA_INFO__INIT;
    ri.n_handles = 1, ri.handles = hs;
    ri.status = CRESCENT__MASTER__REPLICA_INFO__REPLICA_STATUS__COMPLETE;
    Crescent__Master__ReplicaInfo *ris[] = {&ri};
    Crescent__Master__GetReplicaListResponse r = CRESCENT__MASTER__GET_REPLICA_LIST_RESPONSE__INIT;
    r.n_replica_list = 1, r.replica_list = ris, r.has_lease_ttl_ms = 1, r.lease_ttl_ms = 3000;
    uint8_t packed[512];
    size_t n = protobuf_c_message_pack(&r.base, packed);
    struct cr_sp_writer w = {0};
    assert_true(cr_mc_answer(fn(0x1f7ef174u), CR_OK, packed, n, 0, NULL, &st, &w));
    const char *grlr = "6d27c6880487fd84fd0486fdfd0404800c800cfffffdfd0404800c800cfffffd800c04ff"
                       "fdfd04048989ff04800cfffd800c04040401ffff01ff048504ff01";
    char want[1024];
    snprintf(want, sizeof(want), "%s%s", grlr,
             "000101010000000000000000a086010000000000000000e0407f0000037463700f3132372e302e302e"
             "313a313332313303000000b80b00000000000000");
    assert_bytes(&w, want);
    /* A missing key: OBJECT_NOT_FOUND (-704). */
    r.n_replica_list = 0, r.has_lease_ttl_ms = 0, r.status_code = CR_ERR_OBJECT_NOT_FOUND;
    n = protobuf_c_message_pack(&r.base, packed);
    w.len = 0;
    assert_true(cr_mc_answer(fn(0x1f7ef174u), CR_OK, packed, n, 0, NULL, &st, &w));
    snprintf(want, sizeof(want), "%s%s", grlr, "000040fdffff");
    assert_bytes(&w, want);

    /* BatchExistKey(k, b1, nope): true, true, false. */
    Crescent__Master__BatchExistKeyRequest *be =
        decode(0xb89fa6b0u, "638df70004fd84800c800cff0003016b026231046e6f70650764656661756c74",
               &st, CRESCENT__MASTER__METHOD__BATCH_EXIST_KEY,
               &crescent__master__batch_exist_key_request__descriptor);
    assert_int_equal(be->n_keys, 3);
    assert_string_equal(be->keys[2], "nope");
    protobuf_c_message_free_unpacked(&be->base, NULL);
    int32_t codes[] = {0, 0, CR_ERR_OBJECT_NOT_FOUND};
    Crescent__Master__BatchExistKeyResponse ber = CRESCENT__MASTER__BATCH_EXIST_KEY_RESPONSE__INIT;
    ber.n_status_codes = 3, ber.status_codes = codes;
    n = protobuf_c_message_pack(&ber.base, packed);
    w.len = 0;
    assert_true(cr_mc_answer(fn(0xb89fa6b0u), CR_OK, packed, n, 3, NULL, &st, &w));
    assert_bytes(&w, "5d8c5f2a0484870b010003010101010100");

    /* Remove under a lease: OBJECT_HAS_LEASE (-706); then done. */
    Crescent__Master__RemoveRequest *rm =
        decode(0xf1b09774u, "ef9fe81804fd800c0b800cff00016b000764656661756c74", &st,
               CRESCENT__MASTER__METHOD__REMOVE, &crescent__master__remove_request__descriptor);
    assert_string_equal(rm->key, "k");
    assert_false(rm->force);
    protobuf_c_message_free_unpacked(&rm->base, NULL);
    Crescent__Master__RemoveResponse rr = CRESCENT__MASTER__REMOVE_RESPONSE__INIT;
    rr.status_code = CR_ERR_OBJECT_HAS_LEASE;
    n = protobuf_c_message_pack(&rr.base, packed);
    w.len = 0;
    assert_true(cr_mc_answer(fn(0xf1b09774u), CR_OK, packed, n, 0, NULL, &st, &w));
    assert_bytes(&w, "cd6828af0487fa0100003efdffff");
    rr.status_code = 0;
    n = protobuf_c_message_pack(&rr.base, packed);
    w.len = 0;
    assert_true(cr_mc_answer(fn(0xf1b09774u), CR_OK, packed, n, 0, NULL, &st, &w));
    assert_bytes(&w, "cd6828af0487fa010001");
    free(w.buf);
    cr_mc_state_free(&st);
}

/* Every truncation of a captured request, and a changed type hash, is
 * refused with CR_ERR_PROTOCOL, never read. */
static void test_truncated_and_foreign(void **state) {
    (void)state;
    struct cr_mc_state st = {0};
    uint8_t body[512];
    size_t n = unhex(MOUNT_REQ, body, sizeof(body));
    char err[256];
    struct cr_mc_request req;
    for (size_t cut = 0; cut < n; cut++)
        assert_int_equal(cr_mc_decode(fn(0x3e7ec4bbu), body, cut, &st, &req, err, sizeof(err)),
                         CR_ERR_PROTOCOL);
    body[1] ^= 0x10;
    assert_int_equal(cr_mc_decode(fn(0x3e7ec4bbu), body, n, &st, &req, err, sizeof(err)),
                     CR_ERR_PROTOCOL);
    assert_non_null(strstr(err, "MountSegment"));
    const char *other = NULL;
    assert_null(cr_mc_fn_find(0x7801dba0u, &other)); /* CreateCopyTask: not served */
    assert_string_equal(other, "CreateCopyTask");
    /* UpsertEnd, not served: UNAVAILABLE_IN_CURRENT_MODE (-1011) in its
     * tl::expected<void, ErrorCode>, the type mooncake_master's answers have. */
    struct cr_sp_writer w = {0};
    assert_true(cr_mc_unavailable(0x2e20e258u, &w));
    assert_bytes(&w, "cd6828af0487fa0100000dfcffff");
    w.len = 0;
    assert_false(cr_mc_unavailable(0xb1bcd72fu, &w)); /* BatchUpsertEnd: a vector */
    assert_false(cr_mc_unavailable(0x12345678u, &w)); /* not Mooncake's */
    free(w.buf);
    cr_mc_state_free(&st);
}

/* GetReplicaListByRegex: crescent's map entries become Mooncake's map; an
 * entry without a key (optional in protobuf's map entries; found by
 * fuzz_mc_calls) is the empty key, not a crash. */
static void test_regex_map(void **state) {
    (void)state;
    struct cr_mc_state st = {0};
    Crescent__Master__GetReplicaListByRegexResponse__ObjectMapEntry e[2] = {
        CRESCENT__MASTER__GET_REPLICA_LIST_BY_REGEX_RESPONSE__OBJECT_MAP_ENTRY__INIT,
        CRESCENT__MASTER__GET_REPLICA_LIST_BY_REGEX_RESPONSE__OBJECT_MAP_ENTRY__INIT};
    e[0].key = "b1";
    Crescent__Master__GetReplicaListByRegexResponse__ObjectMapEntry *es[] = {&e[0], &e[1]};
    Crescent__Master__GetReplicaListByRegexResponse r =
        CRESCENT__MASTER__GET_REPLICA_LIST_BY_REGEX_RESPONSE__INIT;
    r.n_object_map = 2, r.object_map = es;
    uint8_t packed[256];
    size_t n = protobuf_c_message_pack(&r.base, packed);
    struct cr_sp_writer w = {0};
    assert_true(cr_mc_answer(fn(0xfe6af93cu), CR_OK, packed, n, 0, NULL, &st, &w));
    /* header (hash 7343c040 | 1, metainfo, literal, NUL: 4 + 1 + 56 + 1 bytes), then
     * has_value, 2 entries: "b1" with no replicas, "" with none */
    assert_int_equal(w.len, 62 + 1 + 1 + 3 + 1 + 1 + 1);
    assert_memory_equal(w.buf + 62, "\x01\x02\x02" "b1" "\x00\x00\x00", 8);
    free(w.buf);
    cr_mc_state_free(&st);
}

/* The store expired a client: its secret and the segments it mounted are
 * forgotten, each segment named to the callback; another client's stay. */
static void note_name(void *arg, const char *name) {
    char *out = arg;
    strcat(out, name);
    strcat(out, ";");
}

static void test_forget_client(void **state) {
    (void)state;
    struct cr_mc_state st = {0};
    struct cr_mc_uuid a = {1, 2}, b = {3, 4};
    struct cr_mc_segment seg = {.id = {10, 1}, .client = a, .name = "a0", .protocol = "tcp"};
    assert_true(cr_mc_segment_note(&st, &seg));
    seg.id.second = 2, snprintf(seg.name, sizeof(seg.name), "a1");
    assert_true(cr_mc_segment_note(&st, &seg));
    seg.id.second = 3, seg.client = b, snprintf(seg.name, sizeof(seg.name), "b0");
    assert_true(cr_mc_segment_note(&st, &seg));
    ProtobufCBinaryData secret = {4, (uint8_t *)"abcd"};
    cr_mc_secret_note(&st, &a, &secret);
    cr_mc_secret_note(&st, &b, &secret);
    char names[64] = "";
    assert_int_equal(cr_mc_state_forget_client(&st, &a, note_name, names), 2);
    assert_string_equal(names, "a0;a1;");
    assert_null(cr_mc_secret_of(&st, &a));
    assert_non_null(cr_mc_secret_of(&st, &b));
    assert_int_equal(st.segment_count, 1);
    assert_string_equal(st.segments[0].name, "b0");
    assert_int_equal(cr_mc_state_forget_client(&st, &a, NULL, NULL), 0);
    cr_mc_state_free(&st);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_local_answers),
        cmocka_unit_test(test_mount_and_put_start),
        cmocka_unit_test(test_get_exist_remove),
        cmocka_unit_test(test_truncated_and_foreign),
        cmocka_unit_test(test_regex_map),
        cmocka_unit_test(test_forget_client),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
