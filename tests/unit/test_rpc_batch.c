/* crescentd's hand-written decoder of the batch requests
 * (cr_rpc_batch_decode, src/rpc/rpc_batch.c) against the general path
 * (pre-scan, protobuf-c's unpack, cr_rpc_validate, cr_rpc_batch_from_pb):
 * random requests of the six batch methods packed by protobuf-c (0..40
 * keys or puts, keys of every varint-length class up to the 4096-byte
 * bound and bytes of every value but NUL, tenants absent, empty and at the
 * 23-byte bound, puts with and without block metadata, token ids, slice
 * lengths, secrets, checksums) must be accepted by the decoder with the
 * same values; the same bodies cut short, with bytes changed and with
 * fields appended, and the hostile cases below, must never be accepted
 * where the general path refuses, nor read differently. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpc_batch_check.h"

#define RANDOM_VALUES_SEED 0x6A09E667F3BCC909ull
#include "random_values.h"

#define M(name) CRESCENT__MASTER__METHOD__##name

static const uint16_t methods[] = {M(BATCH_GET_REPLICA_LIST), M(BATCH_EXIST_KEY), M(BATCH_REMOVE),
                                   M(BATCH_PUT_START),        M(BATCH_PUT_END),   M(BATCH_PUT_REVOKE)};

/* ---- random requests ------------------------------------------------------ */

/* The parts of one request, freed together once it is packed. */
static void **parts;
static size_t parts_count, parts_cap;

static void *part(size_t size) {
    if (parts_count == parts_cap) {
        parts_cap = parts_cap ? 2 * parts_cap : 1024;
        parts = realloc(parts, parts_cap * sizeof(*parts));
        assert_non_null(parts);
    }
    void *p = malloc(size);
    assert_non_null(p);
    parts[parts_count++] = p;
    return p;
}

static void free_parts(void) {
    for (size_t i = 0; i < parts_count; i++) free(parts[i]);
    parts_count = 0;
}

/* A string of `len` bytes, none NUL. */
static char *bytes_string(size_t len) {
    char *s = part(len + 1);
    for (size_t i = 0; i < len; i++) s[i] = (char)(1 + next() % 255);
    s[len] = '\0';
    return s;
}

static char *any_key(void) {
    static const size_t lengths[] = {1, 2, 16, 127, 128, 300, 4096};
    return bytes_string(lengths[next() % 7]);
}

/* NULL: the default; else 0..23 bytes. */
static char *any_tenant(void) {
    static const size_t lengths[] = {0, 1, 7, 23};
    unsigned pick = (unsigned)(next() % 5);
    return pick == 4 ? NULL : bytes_string(lengths[pick]);
}

static char *maybe_name(void) {
    static const size_t lengths[] = {0, 1, 40, 255};
    unsigned pick = (unsigned)(next() % 5);
    return pick == 4 ? NULL : bytes_string(lengths[pick]);
}

static Crescent__Master__UUID *any_uuid(void) {
    Crescent__Master__UUID *u = part(sizeof(*u));
    crescent__master__uuid__init(u);
    u->first = any_u64(), u->second = any_u64();
    return u;
}

static void any_secret(protobuf_c_boolean *has, ProtobufCBinaryData *out) {
    *has = next() % 2;
    out->len = *has ? (size_t)(next() % 33) : 0;
    out->data = part(out->len + 1);
    for (size_t i = 0; i < out->len; i++) out->data[i] = (uint8_t)next(); /* NUL too */
}

static Crescent__Master__BlockInfo *any_block(void) {
    if (next() % 2) return NULL;
    Crescent__Master__BlockInfo *b = part(sizeof(*b));
    crescent__master__block_info__init(b);
    b->model_name = maybe_name();
    b->block_hash = maybe_name();
    b->parent_block_hash = maybe_name();
    b->has_block_size = next() % 2;
    b->block_size = (uint32_t)any_u64();
    b->n_token_ids = (size_t)(next() % 4 == 0 ? 0 : next() % 300);
    b->token_ids = part((b->n_token_ids + 1) * sizeof(*b->token_ids));
    for (size_t i = 0; i < b->n_token_ids; i++) b->token_ids[i] = (uint32_t)any_u64();
    return b;
}

static ProtobufCMessage *any_put_start(void) {
    Crescent__Master__PutStartRequest *r = part(sizeof(*r));
    Crescent__Master__ReplicateConfig *c = part(sizeof(*c));
    crescent__master__put_start_request__init(r);
    crescent__master__replicate_config__init(c);
    r->key = any_key();
    r->value_length = (int64_t)(any_u64() >> 1);
    c->has_replica_num = next() % 4 != 0;
    c->replica_num = c->has_replica_num ? 1 + next() % CR_STORE_REPLICAS_MAX : 1;
    c->has_with_soft_pin = next() % 2;
    c->with_soft_pin = next() % 2;
    c->preferred_segment = maybe_name();
    r->config = c;
    r->n_slice_lengths = (size_t)(next() % 3);
    r->slice_lengths = part((r->n_slice_lengths + 1) * sizeof(*r->slice_lengths));
    for (size_t i = 0; i < r->n_slice_lengths; i++) r->slice_lengths[i] = any_u64();
    char *tenant = any_tenant();
    if (tenant != NULL) r->tenant_id = tenant;
    r->client_id = any_uuid();
    r->block = any_block();
    any_secret(&r->has_client_secret, &r->client_secret);
    return &r->base;
}

/* PutEndRequest or PutRevokeRequest. */
static ProtobufCMessage *any_put_end(bool end) {
    Crescent__Master__PutEndRequest *e = part(sizeof(*e));
    Crescent__Master__PutRevokeRequest *v = part(sizeof(*v));
    crescent__master__put_end_request__init(e);
    crescent__master__put_revoke_request__init(v);
    char *key = any_key(), *tenant = any_tenant();
    Crescent__Master__UUID *id = any_uuid();
    if (end) {
        e->key = key, e->client_id = id;
        if (tenant != NULL) e->tenant_id = tenant;
        e->has_checksum_xxh3 = next() % 2;
        e->checksum_xxh3 = next();
        any_secret(&e->has_client_secret, &e->client_secret);
        return &e->base;
    }
    v->key = key, v->client_id = id;
    if (tenant != NULL) v->tenant_id = tenant;
    any_secret(&v->has_client_secret, &v->client_secret);
    return &v->base;
}

/* A random valid request of `method`, packed (malloc'd); *len set. */
static uint8_t *any_request(uint16_t method, size_t count, size_t *len) {
    union {
        Crescent__Master__BatchRemoveRequest rm;
        Crescent__Master__BatchExistKeyRequest keys;
        Crescent__Master__BatchPutEndRequest puts;
    } u;
    ProtobufCMessage *msg = &u.keys.base;
    const struct cr_rpc_method *m = cr_rpc_method_find(method);
    protobuf_c_message_init(m->request, &u);
    if (method == M(BATCH_PUT_START) || method == M(BATCH_PUT_END) ||
        method == M(BATCH_PUT_REVOKE)) {
        u.puts.n_requests = count;
        u.puts.requests = part((count + 1) * sizeof(void *));
        for (size_t i = 0; i < count; i++)
            u.puts.requests[i] = (void *)(method == M(BATCH_PUT_START)
                                              ? any_put_start()
                                              : any_put_end(method == M(BATCH_PUT_END)));
    } else {
        u.keys.n_keys = count;
        u.keys.keys = part((count + 1) * sizeof(char *));
        for (size_t i = 0; i < count; i++) u.keys.keys[i] = any_key();
        char *tenant = any_tenant();
        if (tenant != NULL) u.keys.tenant_id = tenant;
        if (method == M(BATCH_REMOVE)) {
            u.rm.has_force = next() % 2;
            u.rm.force = next() % 2;
            u.rm.admin_token = next() % 2 ? bytes_string(next() % 40) : NULL;
        }
    }
    *len = protobuf_c_message_get_packed_size(msg);
    uint8_t *body = malloc(*len + 64); /* room for appended fields */
    assert_non_null(body);
    assert_int_equal(protobuf_c_message_pack(msg, body), *len);
    free_parts();
    return body;
}

/* ---- mutations ------------------------------------------------------------ */

/* Fields to append to a body: known ones again (a second tenant, force,
 * key, entry), unknown ones, wrong wire types, malformed ones. */
static const struct {
    const char *bytes;
    size_t len;
} appended[] = {
    {"\x12\x01t", 3},          /* tenant_id again, or a PutStart's value_length as bytes */
    {"\x0a\x01k", 3},          /* one more key, or an entry that is not one */
    {"\x0a\x00", 2},           /* an empty key, or an empty entry */
    {"\x18\x01", 2},           /* force, or a wrong field */
    {"\x18\x81\x00", 3},       /* force in two bytes */
    {"\x78\x05", 2},           /* field 15, unknown */
    {"\x72\x03tok", 5},        /* admin_token */
    {"\x80\x01\x00", 3},       /* field 16 in a two-byte tag */
    {"\x08\x01", 2},           /* field 1 as a varint */
    {"\x0b", 1},               /* a group */
    {"\x0a\x05k\0ey", 7},      /* a key with a NUL */
    {"\x0a\x80\x00", 3},       /* a length in two bytes, zero */
    {"\x0a\x81\x80\x80\x00k", 6}, /* a length in four bytes */
    {"\x12\x18" "aaaaaaaaaaaaaaaaaaaaaaaa", 26}, /* a 24-byte tenant */
};

static void check(uint16_t method, const uint8_t *body, size_t len) {
    enum check_outcome out = check_batch_body(method, body, len);
    if (out == CHECK_MISMATCH) {
        fprintf(stderr, "method %u, %zu bytes:", method, len);
        for (size_t i = 0; i < len && i < 256; i++) fprintf(stderr, " %02x", body[i]);
        fprintf(stderr, "\n");
    }
    assert_int_not_equal(out, CHECK_MISMATCH);
}

static void mutate_and_check(uint16_t method, uint8_t *body, size_t len) {
    uint8_t *copy = malloc(len + 64);
    assert_non_null(copy);
    for (unsigned round = 0; round < 24; round++) {
        memcpy(copy, body, len);
        size_t n = len;
        switch (round % 3) {
        case 0: n = len > 0 ? (size_t)(next() % len) : 0; break; /* cut short */
        case 1:
            for (unsigned k = 0; k < 1 + next() % 3 && len > 0; k++)
                copy[next() % len] = (uint8_t)next();
            break;
        default: {
            size_t a = (size_t)(next() % (sizeof(appended) / sizeof(appended[0])));
            memcpy(copy + len, appended[a].bytes, appended[a].len);
            n = len + appended[a].len;
        }
        }
        check(method, copy, n);
    }
    free(copy);
}

/* ---- tests ---------------------------------------------------------------- */

/* Valid requests as protobuf-c packs them: the decoder takes every one. */
static void test_random_requests_decode_as_protobuf_c(void **state) {
    (void)state;
    for (unsigned i = 0; i < 1200; i++) {
        uint16_t method = methods[i % 6];
        size_t len, count = (size_t)(next() % 4 == 0 ? next() % 3 : next() % 41);
        uint8_t *body = any_request(method, count, &len);
        enum check_outcome out = check_batch_body(method, body, len);
        if (out != CHECK_BOTH) fprintf(stderr, "request %u (method %u): %d\n", i, method, out);
        assert_int_equal(out, CHECK_BOTH);
        mutate_and_check(method, body, len);
        free(body);
    }
}

/* The bounds the general path refuses, at and past each. */
static void test_bounds(void **state) {
    (void)state;
    const uint16_t get = M(BATCH_GET_REPLICA_LIST);
    size_t max = CR_MASTER_BATCH_MAX + 1;
    uint8_t *body = malloc(max * 3);
    assert_non_null(body);
    for (size_t i = 0; i < max; i++) memcpy(body + 3 * i, "\x0a\x01k", 3);
    assert_int_equal(check_batch_body(get, body, 3 * CR_MASTER_BATCH_MAX), CHECK_BOTH);
    assert_int_equal(check_batch_body(get, body, 3 * max), CHECK_REFUSED);
    free(body);

    /* A key of 4096 bytes and one of 4097. */
    body = malloc(3 + CR_STORE_KEY_LEN_MAX + 1);
    assert_non_null(body);
    body[0] = 0x0a, body[1] = 0x80, body[2] = 0x20; /* 4096 */
    memset(body + 3, 'k', CR_STORE_KEY_LEN_MAX + 1);
    assert_int_equal(check_batch_body(get, body, 3 + CR_STORE_KEY_LEN_MAX), CHECK_BOTH);
    body[1] = 0x81;
    assert_int_equal(check_batch_body(get, body, 3 + CR_STORE_KEY_LEN_MAX + 1), CHECK_REFUSED);
    free(body);

    /* Tenants of 23 and 24 bytes; an empty key; a NUL in a key. */
    static const uint8_t t23[] = "\x0a\x01k\x12\x17" "aaaaaaaaaaaaaaaaaaaaaaa";
    static const uint8_t t24[] = "\x0a\x01k\x12\x18" "aaaaaaaaaaaaaaaaaaaaaaaa";
    assert_int_equal(check_batch_body(get, t23, sizeof(t23) - 1), CHECK_BOTH);
    assert_int_equal(check_batch_body(get, t24, sizeof(t24) - 1), CHECK_REFUSED);
    assert_int_equal(check_batch_body(get, (const uint8_t *)"\x0a\x00", 2), CHECK_REFUSED);
    assert_int_equal(check_batch_body(get, (const uint8_t *)"\x0a\x02k\0", 4), CHECK_REFUSED);
    /* An empty batch, and one with only a tenant. */
    assert_int_equal(check_batch_body(get, (const uint8_t *)"", 0), CHECK_BOTH);
    assert_int_equal(check_batch_body(get, (const uint8_t *)"\x12\x01t", 3), CHECK_BOTH);
}

/* Forms the decoder leaves to protobuf-c, which accepts them. */
static void test_declined_forms_go_the_general_way(void **state) {
    (void)state;
    const uint16_t exist = M(BATCH_EXIST_KEY), rm = M(BATCH_REMOVE);
    /* A second tenant (the last one counts), an unknown field, force in two bytes. */
    assert_int_equal(check_batch_body(exist, (const uint8_t *)"\x0a\x01k\x12\x01t\x12\x01u", 9),
                     CHECK_GENERAL);
    assert_int_equal(check_batch_body(exist, (const uint8_t *)"\x0a\x01k\x78\x05", 5),
                     CHECK_GENERAL);
    assert_int_equal(check_batch_body(rm, (const uint8_t *)"\x0a\x01k\x18\x81\x00", 6),
                     CHECK_GENERAL);
    /* force and admin_token are BatchRemove's only (unknown to BatchExistKey). */
    assert_int_equal(check_batch_body(rm, (const uint8_t *)"\x0a\x01k\x18\x01\x72\x01x", 8),
                     CHECK_BOTH);
    assert_int_equal(check_batch_body(exist, (const uint8_t *)"\x0a\x01k\x18\x01", 5),
                     CHECK_GENERAL);
}

/* A PutStart without its required parts, with a config given twice (which
 * protobuf-c merges), with replica_num out of range. */
static void test_put_entries(void **state) {
    (void)state;
    const uint16_t start = M(BATCH_PUT_START), end = M(BATCH_PUT_END);
    /* key k, value_length 5, config {replica_num 2}, client_id {1, 2} */
    static const uint8_t ok[] = "\x0a\x0f\x0a\x01k\x10\x05\x1a\x02\x08\x02\x32\x04\x08\x01\x10\x02";
    assert_int_equal(check_batch_body(start, ok, sizeof(ok) - 1), CHECK_BOTH);
    static const uint8_t no_client[] = "\x0a\x09\x0a\x01k\x10\x05\x1a\x02\x08\x02";
    assert_int_equal(check_batch_body(start, no_client, sizeof(no_client) - 1), CHECK_REFUSED);
    static const uint8_t nine[] = "\x0a\x0f\x0a\x01k\x10\x05\x1a\x02\x08\x09\x32\x04\x08\x01\x10\x02";
    assert_int_equal(check_batch_body(start, nine, sizeof(nine) - 1), CHECK_REFUSED);
    static const uint8_t twice[] =
        "\x0a\x13\x0a\x01k\x10\x05\x1a\x02\x08\x02\x1a\x02\x08\x03\x32\x04\x08\x01\x10\x02";
    assert_int_equal(check_batch_body(start, twice, sizeof(twice) - 1), CHECK_GENERAL);
    /* A PutEnd with its checksum; a PutRevoke with one is an unknown field. */
    static const uint8_t end_ok[] = "\x0a\x12\x0a\x01k\x1a\x04\x08\x01\x10\x02\x21" "12345678";
    assert_int_equal(check_batch_body(end, end_ok, sizeof(end_ok) - 1), CHECK_BOTH);
    assert_int_equal(check_batch_body(M(BATCH_PUT_REVOKE), end_ok, sizeof(end_ok) - 1),
                     CHECK_GENERAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_requests_decode_as_protobuf_c),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_declined_forms_go_the_general_way),
        cmocka_unit_test(test_put_entries),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    free(parts);
    return failed;
}
