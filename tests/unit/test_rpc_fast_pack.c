/* The direct encoders (src/rpc/rpc_fast_pack.c) write the bytes protobuf-c
 * writes: GetReplicaListResponse and PutStartResponse over random replica
 * lists (names of every varint-length class, sizes and buffers across the
 * uint64 range, endpoints absent, empty and long), and the status-only and
 * ExistKey successes; and the batch responses written entry by entry
 * (cr_rpc_batch_writer) over random batches of successes and refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpc/rpc_codec.h"
#include "rpc/rpc_fast_pack.h"
#include "master.pb-c.h"

#include "random_values.h"

static const size_t name_lengths[] = {1, 5, 127, 128, 200, 16383, 16384};

static char *any_string(size_t max) {
    size_t len = name_lengths[next() % (sizeof(name_lengths) / sizeof(name_lengths[0]))];
    if (len > max) len = max;
    char *s = malloc(len + 1);
    assert_non_null(s);
    for (size_t i = 0; i < len; i++) s[i] = (char)('a' + next() % 26);
    s[len] = '\0';
    return s;
}

static void random_list(struct cr_store_replica_list *list) {
    list->count = (uint32_t)(next() % (CR_STORE_REPLICAS_MAX + 1));
    static const enum cr_replica_status statuses[] = {
        CR_REPLICA_UNDEFINED, CR_REPLICA_INITIALIZED, CR_REPLICA_PROCESSING,
        CR_REPLICA_COMPLETE,  CR_REPLICA_REMOVED,     CR_REPLICA_FAILED};
    for (uint32_t i = 0; i < list->count; i++) {
        struct cr_store_replica_desc *d = &list->replicas[i];
        memset(d, 0, sizeof(*d));
        d->segment_name = any_string(20000);
        unsigned endpoint = (unsigned)(next() % 3);
        d->endpoint = endpoint == 0 ? NULL : endpoint == 1 ? strdup("") : any_string(300);
        d->size = any_u64();
        d->buffer = any_u64();
        d->status = statuses[next() % 6];
        d->has_cap = next() % 2 == 0; /* a keyed segment's handle carries a capability */
        for (size_t b = 0; b < sizeof(d->cap); b++) d->cap[b] = (uint8_t)next();
    }
}

static void free_list(struct cr_store_replica_list *list) {
    for (uint32_t i = 0; i < list->count; i++) {
        free((char *)list->replicas[i].segment_name);
        free((char *)list->replicas[i].endpoint);
    }
}

/* What rpc_methods.c builds for protobuf-c, packed by protobuf-c. */
/* The list's ReplicaInfos (one handle each), in the caller's arrays
 * (CR_STORE_REPLICAS_MAX each). */
static void infos_pb(const struct cr_store_replica_list *list, Crescent__Master__ReplicaInfo *infos,
                     Crescent__Master__ReplicaInfo **info_ptrs,
                     Crescent__Master__BufHandle *handles,
                     Crescent__Master__BufHandle **handle_ptrs) {
    for (uint32_t i = 0; i < list->count; i++) {
        const struct cr_store_replica_desc *d = &list->replicas[i];
        crescent__master__buf_handle__init(&handles[i]);
        handles[i].segment_name = (char *)d->segment_name;
        handles[i].size = d->size;
        handles[i].buffer = d->buffer;
        handles[i].status = cr_rpc_buf_status(d->status);
        handles[i].transport_endpoint = (char *)d->endpoint;
        handles[i].has_capability = d->has_cap;
        handles[i].capability = (ProtobufCBinaryData){.len = sizeof(d->cap), .data = (uint8_t *)d->cap};
        handle_ptrs[i] = &handles[i];
        crescent__master__replica_info__init(&infos[i]);
        infos[i].n_handles = 1;
        infos[i].handles = &handle_ptrs[i];
        infos[i].status = (Crescent__Master__ReplicaInfo__ReplicaStatus)d->status;
        info_ptrs[i] = &infos[i];
    }
}

static uint8_t *reference_pack(const struct cr_store_replica_list *list, bool put_start,
                               size_t *len) {
    Crescent__Master__ReplicaInfo infos[CR_STORE_REPLICAS_MAX], *info_ptrs[CR_STORE_REPLICAS_MAX];
    Crescent__Master__BufHandle handles[CR_STORE_REPLICAS_MAX], *handle_ptrs[CR_STORE_REPLICAS_MAX];
    infos_pb(list, infos, info_ptrs, handles, handle_ptrs);
    Crescent__Master__GetReplicaListResponse get = CRESCENT__MASTER__GET_REPLICA_LIST_RESPONSE__INIT;
    Crescent__Master__PutStartResponse put = CRESCENT__MASTER__PUT_START_RESPONSE__INIT;
    get.n_replica_list = put.n_replica_list = list->count;
    get.has_checksum_xxh3 = list->has_checksum;
    get.checksum_xxh3 = list->checksum;
    get.has_lease_ttl_ms = list->lease_ms > 0;
    get.lease_ttl_ms = list->lease_ms;
    get.replica_list = put.replica_list = info_ptrs;
    ProtobufCMessage *msg = put_start ? &put.base : &get.base;
    *len = protobuf_c_message_get_packed_size(msg);
    uint8_t *out = malloc(*len + 1);
    assert_non_null(out);
    assert_int_equal(protobuf_c_message_pack(msg, out), *len);
    return out;
}

static void test_same_bytes_as_protobuf_c(void **unused) {
    (void)unused;
    static uint8_t out[CR_STORE_REPLICAS_MAX * 40000];
    for (int round = 0; round < 2000; round++) {
        struct cr_store_replica_list list;
        random_list(&list);
        for (int put_start = 0; put_start < 2; put_start++) {
            /* A checksum only in GetReplicaList (the store never gives one at PutStart). */
            list.has_checksum = !put_start && next() % 2 == 0;
            list.checksum = any_u64();
            list.lease_ms = put_start ? 0 : any_u64();
            size_t want_len;
            uint8_t *want = reference_pack(&list, put_start, &want_len);
            size_t len = cr_rpc_pack_replica_response(&list, out, sizeof(out));
            assert_int_equal(len, want_len);
            assert_memory_equal(out, want, len);
            /* Exactly enough room is enough; a byte less is refused. */
            assert_int_equal(cr_rpc_pack_replica_response(&list, out, want_len), want_len);
            assert_int_equal(cr_rpc_pack_replica_response(&list, out, want_len - 1), 0);
            free(want);
        }
        free_list(&list);
    }
}

/* A peer decodes it: the store's values come back. */
static void test_decodes_with_protobuf_c(void **unused) {
    (void)unused;
    struct cr_store_replica_list list = {.count = 2, .has_checksum = false};
    list.replicas[0] = (struct cr_store_replica_desc){.segment_name = "seg-a",
                                                      .endpoint = "10.0.0.1:7000",
                                                      .buffer = 1ull << 40,
                                                      .size = 4096,
                                                      .status = CR_REPLICA_COMPLETE};
    list.replicas[1] = (struct cr_store_replica_desc){
        .segment_name = "seg-b", .buffer = 7, .size = UINT64_MAX, .status = CR_REPLICA_PROCESSING};
    uint8_t out[256];
    size_t len = cr_rpc_pack_replica_response(&list, out, sizeof(out));
    assert_true(len > 0);
    Crescent__Master__GetReplicaListResponse *r =
        crescent__master__get_replica_list_response__unpack(NULL, len, out);
    assert_non_null(r);
    assert_int_equal(r->status_code, 0);
    assert_null(r->error_message);
    assert_int_equal(r->n_replica_list, 2);
    assert_int_equal(r->replica_list[0]->status,
                     CRESCENT__MASTER__REPLICA_INFO__REPLICA_STATUS__COMPLETE);
    assert_int_equal(r->replica_list[0]->n_handles, 1);
    const Crescent__Master__BufHandle *h = r->replica_list[0]->handles[0];
    assert_string_equal(h->segment_name, "seg-a");
    assert_string_equal(h->transport_endpoint, "10.0.0.1:7000");
    assert_int_equal(h->buffer, 1ull << 40);
    assert_int_equal(h->size, 4096);
    assert_int_equal(h->status, CRESCENT__MASTER__BUF_HANDLE__BUF_STATUS__COMPLETE);
    h = r->replica_list[1]->handles[0];
    assert_null(h->transport_endpoint);
    assert_int_equal(h->size, UINT64_MAX);
    assert_int_equal(h->status, CRESCENT__MASTER__BUF_HANDLE__BUF_STATUS__INIT);
    assert_false(r->has_checksum_xxh3);
    crescent__master__get_replica_list_response__free_unpacked(r, NULL);
    list.has_checksum = true;
    list.checksum = 0x0123456789ABCDEFull;
    len = cr_rpc_pack_replica_response(&list, out, sizeof(out));
    r = crescent__master__get_replica_list_response__unpack(NULL, len, out);
    assert_non_null(r);
    assert_true(r->has_checksum_xxh3);
    assert_int_equal(r->checksum_xxh3, 0x0123456789ABCDEFull);
    assert_false(r->has_lease_ttl_ms);
    crescent__master__get_replica_list_response__free_unpacked(r, NULL);
    list.has_checksum = false;
    /* No replica: just status_code 0. */
    list.count = 0;
    assert_int_equal(cr_rpc_pack_replica_response(&list, out, sizeof(out)), 2);
    assert_int_equal(out[0], 0x08);
    assert_int_equal(out[1], 0x00);
}

static void expect_ok_bytes(ProtobufCMessage *msg, int exists) {
    uint8_t want[16], got[4];
    size_t want_len = protobuf_c_message_pack(msg, want);
    size_t len = cr_rpc_pack_ok_response(exists, got);
    assert_int_equal(len, want_len);
    assert_memory_equal(got, want, len);
}

static void test_ok_responses(void **unused) {
    (void)unused;
    Crescent__Master__PutEndResponse end = CRESCENT__MASTER__PUT_END_RESPONSE__INIT;
    Crescent__Master__PutRevokeResponse revoke = CRESCENT__MASTER__PUT_REVOKE_RESPONSE__INIT;
    Crescent__Master__RemoveResponse rm = CRESCENT__MASTER__REMOVE_RESPONSE__INIT;
    expect_ok_bytes(&end.base, -1);
    expect_ok_bytes(&revoke.base, -1);
    expect_ok_bytes(&rm.base, -1);
    for (int exists = 0; exists <= 1; exists++) {
        Crescent__Master__ExistKeyResponse ex = CRESCENT__MASTER__EXIST_KEY_RESPONSE__INIT;
        ex.has_exists = 1;
        ex.exists = exists;
        expect_ok_bytes(&ex.base, exists);
    }
}

/* One entry of a random batch: a success with a list, or a refusal. */
struct entry {
    bool ok;
    struct cr_store_replica_list list;
    int32_t status;
    char *why;
};

static int32_t any_code(void) {
    static const int32_t edges[] = {INT32_MIN, -1, 1, INT32_MAX, -704, -200};
    return next() % 2 == 0 ? edges[next() % 6] : (int32_t)(uint32_t)next() | 1;
}

static void random_entry(struct entry *e, bool put_start) {
    memset(e, 0, sizeof(*e));
    e->ok = next() % 3 != 0;
    if (e->ok) {
        random_list(&e->list);
        while (e->list.count > 2) { /* keep batches small */
            struct cr_store_replica_desc *d = &e->list.replicas[--e->list.count];
            free((char *)d->segment_name);
            free((char *)d->endpoint);
        }
        e->list.has_checksum = !put_start && next() % 2 == 0;
        e->list.checksum = any_u64();
        e->list.lease_ms = put_start ? 0 : any_u64();
        return;
    }
    e->status = any_code();
    if (e->status == 0) e->status = -1;
    e->why = put_start && next() % 2 == 0 ? any_string(300) : NULL;
}

static void free_entry(struct entry *e) {
    if (e->ok) {
        for (uint32_t i = 0; i < e->list.count; i++) {
            free((char *)e->list.replicas[i].segment_name);
            free((char *)e->list.replicas[i].endpoint);
        }
    }
    free(e->why);
}

/* The entry as rpc_methods.c built it before the writer: a protobuf-c
 * GetReplicaListResponse or PutStartResponse, its pointers into `infos`
 * and `handles` (CR_STORE_REPLICAS_MAX each). */
static ProtobufCMessage *entry_pb(const struct entry *e, bool put_start,
                                  Crescent__Master__GetReplicaListResponse *get,
                                  Crescent__Master__PutStartResponse *put,
                                  Crescent__Master__ReplicaInfo *infos,
                                  Crescent__Master__ReplicaInfo **info_ptrs,
                                  Crescent__Master__BufHandle *handles,
                                  Crescent__Master__BufHandle **handle_ptrs) {
    crescent__master__get_replica_list_response__init(get);
    crescent__master__put_start_response__init(put);
    if (!e->ok) {
        get->status_code = put->status_code = e->status;
        put->error_message = e->why;
        return put_start ? &put->base : &get->base;
    }
    infos_pb(&e->list, infos, info_ptrs, handles, handle_ptrs);
    get->n_replica_list = put->n_replica_list = e->list.count;
    get->replica_list = put->replica_list = info_ptrs;
    get->has_checksum_xxh3 = e->list.has_checksum;
    get->checksum_xxh3 = e->list.checksum;
    get->has_lease_ttl_ms = e->list.lease_ms > 0;
    get->lease_ttl_ms = e->list.lease_ms;
    return put_start ? &put->base : &get->base;
}

static uint8_t *pack_pb(const ProtobufCMessage *msg, size_t *len) {
    *len = protobuf_c_message_get_packed_size(msg);
    uint8_t *out = malloc(*len + 1);
    assert_non_null(out);
    assert_int_equal(protobuf_c_message_pack(msg, out), *len);
    return out;
}

/* The writer's bytes, then its buffer released. */
static void expect_writer(struct cr_rpc_batch_writer *w, const uint8_t *want, size_t want_len) {
    assert_false(w->failed);
    assert_int_equal(w->len, want_len);
    assert_memory_equal(w->buf, want, want_len);
    if (w->buf != w->inline_buf) free(w->buf);
}

#define BATCH_ENTRIES_MAX 40

static void test_batch_lists_same_bytes(void **unused) {
    (void)unused;
    static struct entry entries[BATCH_ENTRIES_MAX];
    static Crescent__Master__GetReplicaListResponse gets[BATCH_ENTRIES_MAX];
    static Crescent__Master__PutStartResponse puts[BATCH_ENTRIES_MAX];
    static Crescent__Master__ReplicaInfo infos[BATCH_ENTRIES_MAX][CR_STORE_REPLICAS_MAX];
    static Crescent__Master__ReplicaInfo *info_ptrs[BATCH_ENTRIES_MAX][CR_STORE_REPLICAS_MAX];
    static Crescent__Master__BufHandle handles[BATCH_ENTRIES_MAX][CR_STORE_REPLICAS_MAX];
    static Crescent__Master__BufHandle *handle_ptrs[BATCH_ENTRIES_MAX][CR_STORE_REPLICAS_MAX];
    static void *msgs[BATCH_ENTRIES_MAX];
    for (int round = 0; round < 400; round++) {
        bool put_start = round % 2 == 1;
        size_t n = (size_t)(next() % (BATCH_ENTRIES_MAX + 1));
        uint8_t inline_buf[256];
        size_t inline_cap = 2 + (size_t)(next() % 255); /* growth from any point */
        struct cr_rpc_batch_writer w;
        cr_rpc_batch_begin(&w, inline_buf, inline_cap, (size_t)(next() % 4096));
        for (size_t i = 0; i < n; i++) {
            random_entry(&entries[i], put_start);
            msgs[i] = entry_pb(&entries[i], put_start, &gets[i], &puts[i], infos[i], info_ptrs[i],
                               handles[i], handle_ptrs[i]);
            if (entries[i].ok)
                cr_rpc_batch_add_replicas(&w, &entries[i].list);
            else
                cr_rpc_batch_add_refusal(&w, entries[i].status, entries[i].why);
        }
        Crescent__Master__BatchGetReplicaListResponse bget =
            CRESCENT__MASTER__BATCH_GET_REPLICA_LIST_RESPONSE__INIT;
        Crescent__Master__BatchPutStartResponse bput =
            CRESCENT__MASTER__BATCH_PUT_START_RESPONSE__INIT;
        bget.n_responses = bput.n_responses = n;
        bget.responses = (Crescent__Master__GetReplicaListResponse **)msgs;
        bput.responses = (Crescent__Master__PutStartResponse **)msgs;
        size_t want_len;
        uint8_t *want = pack_pb(put_start ? &bput.base : &bget.base, &want_len);
        expect_writer(&w, want, want_len);
        free(want);
        for (size_t i = 0; i < n; i++) free_entry(&entries[i]);
    }
}

static void test_batch_codes_same_bytes(void **unused) {
    (void)unused;
    static int32_t codes[4096];
    for (int round = 0; round < 400; round++) {
        size_t n = (size_t)(next() % 64);
        if (round == 0) n = 4096; /* the largest batch */
        uint8_t inline_buf[256];
        struct cr_rpc_batch_writer w;
        cr_rpc_batch_begin(&w, inline_buf, sizeof(inline_buf),
                           round % 2 == 0 ? 2 + n * CR_RPC_BATCH_CODE_MAX : 0);
        for (size_t i = 0; i < n; i++) {
            codes[i] = next() % 3 == 0 ? 0 : any_code();
            cr_rpc_batch_add_code(&w, codes[i]);
        }
        /* BatchExistKey, BatchRemove, BatchPutEnd and BatchPutRevoke: one layout. */
        Crescent__Master__BatchExistKeyResponse ex = CRESCENT__MASTER__BATCH_EXIST_KEY_RESPONSE__INIT;
        Crescent__Master__BatchPutEndResponse end = CRESCENT__MASTER__BATCH_PUT_END_RESPONSE__INIT;
        ex.n_status_codes = end.n_status_codes = n;
        ex.status_codes = end.status_codes = codes;
        size_t want_len, end_len;
        uint8_t *want = pack_pb(&ex.base, &want_len);
        uint8_t *want_end = pack_pb(&end.base, &end_len);
        assert_int_equal(end_len, want_len);
        assert_memory_equal(want_end, want, want_len);
        expect_writer(&w, want, want_len);
        free(want);
        free(want_end);
    }
}

/* A peer decodes a written BatchGetReplicaList: the entries come back in order. */
static void test_batch_decodes_with_protobuf_c(void **unused) {
    (void)unused;
    struct cr_store_replica_list list = {.count = 1, .lease_ms = 5000};
    list.replicas[0] = (struct cr_store_replica_desc){
        .segment_name = "seg-a", .buffer = 4096, .size = 64, .status = CR_REPLICA_COMPLETE};
    uint8_t inline_buf[256];
    struct cr_rpc_batch_writer w;
    cr_rpc_batch_begin(&w, inline_buf, sizeof(inline_buf), 0);
    cr_rpc_batch_add_replicas(&w, &list);
    cr_rpc_batch_add_refusal(&w, -704, NULL);
    cr_rpc_batch_add_replicas(&w, &list);
    Crescent__Master__BatchGetReplicaListResponse *r =
        crescent__master__batch_get_replica_list_response__unpack(NULL, w.len, w.buf);
    assert_non_null(r);
    assert_int_equal(r->status_code, 0);
    assert_int_equal(r->n_responses, 3);
    assert_int_equal(r->responses[0]->status_code, 0);
    assert_int_equal(r->responses[0]->n_replica_list, 1);
    assert_string_equal(r->responses[0]->replica_list[0]->handles[0]->segment_name, "seg-a");
    assert_int_equal(r->responses[0]->lease_ttl_ms, 5000);
    assert_int_equal(r->responses[1]->status_code, -704);
    assert_int_equal(r->responses[1]->n_replica_list, 0);
    assert_int_equal(r->responses[2]->replica_list[0]->handles[0]->buffer, 4096);
    crescent__master__batch_get_replica_list_response__free_unpacked(r, NULL);
    if (w.buf != w.inline_buf) free(w.buf);
}

/* SSD (local_disk) replicas: no handle, where they are, and the read
 * capability of "<segment>#ssd" when the segment has a key (field 10),
 * written as protobuf-c writes them, and decoded back by it. */
static void test_local_disk_replicas_with_capabilities(void **unused) {
    (void)unused;
    static uint8_t out[CR_STORE_REPLICAS_MAX * 40000];
    for (int round = 0; round < 500; round++) {
        struct cr_store_replica_list list;
        random_list(&list);
        Crescent__Master__ReplicaInfo infos[CR_STORE_REPLICAS_MAX], *ptrs[CR_STORE_REPLICAS_MAX];
        Crescent__Master__UUID owners[CR_STORE_REPLICAS_MAX];
        for (uint32_t i = 0; i < list.count; i++) {
            struct cr_store_replica_desc *d = &list.replicas[i];
            d->medium = CR_MEDIUM_LOCAL_DISK;
            if (d->endpoint == NULL) d->endpoint = strdup(""); /* the store always has one */
            for (size_t b = 0; b < sizeof(d->owner.b); b++) d->owner.b[b] = (uint8_t)next();
            crescent__master__replica_info__init(&infos[i]);
            infos[i].status = (Crescent__Master__ReplicaInfo__ReplicaStatus)d->status;
            infos[i].has_medium = true;
            infos[i].medium = CRESCENT__MASTER__REPLICA_INFO__MEDIUM__LOCAL_DISK;
            infos[i].endpoint = (char *)d->endpoint;
            infos[i].segment_name = (char *)d->segment_name;
            infos[i].has_object_size = true;
            infos[i].object_size = d->size;
            infos[i].has_position = true;
            infos[i].position = d->buffer;
            crescent__master__uuid__init(&owners[i]);
            cr_rpc_uuid_to_pb(&d->owner, &owners[i]);
            infos[i].owner = &owners[i];
            infos[i].has_capability = d->has_cap;
            infos[i].capability = (ProtobufCBinaryData){.len = sizeof(d->cap), .data = d->cap};
            ptrs[i] = &infos[i];
        }
        Crescent__Master__GetReplicaListResponse get =
            CRESCENT__MASTER__GET_REPLICA_LIST_RESPONSE__INIT;
        get.n_replica_list = list.count;
        get.replica_list = ptrs;
        list.has_checksum = false;
        list.lease_ms = 0;
        size_t want_len = protobuf_c_message_get_packed_size(&get.base);
        uint8_t *want = malloc(want_len + 1);
        assert_non_null(want);
        assert_int_equal(protobuf_c_message_pack(&get.base, want), want_len);
        size_t len = cr_rpc_pack_replica_response(&list, out, sizeof(out));
        assert_int_equal(len, want_len);
        assert_memory_equal(out, want, len);
        Crescent__Master__GetReplicaListResponse *back =
            crescent__master__get_replica_list_response__unpack(NULL, len, out);
        assert_non_null(back);
        for (uint32_t i = 0; i < list.count; i++) {
            assert_int_equal(back->replica_list[i]->has_capability, list.replicas[i].has_cap);
            if (list.replicas[i].has_cap)
                assert_memory_equal(back->replica_list[i]->capability.data, list.replicas[i].cap,
                                    sizeof(list.replicas[i].cap));
        }
        crescent__master__get_replica_list_response__free_unpacked(back, NULL);
        free(want);
        free_list(&list);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_bytes_as_protobuf_c),
        cmocka_unit_test(test_local_disk_replicas_with_capabilities),
        cmocka_unit_test(test_decodes_with_protobuf_c),
        cmocka_unit_test(test_ok_responses),
        cmocka_unit_test(test_batch_lists_same_bytes),
        cmocka_unit_test(test_batch_codes_same_bytes),
        cmocka_unit_test(test_batch_decodes_with_protobuf_c),
    };
    return cmocka_run_group_tests_name("rpc_fast_pack", tests, NULL, NULL);
}
