/* libcrescent's hand-written decoder of BatchGetReplicaListResponse and
 * BatchPutStartResponse (src/client/client_decode.c) against protobuf-c's
 * unpack followed by the copy it replaces (cr_client_replicas_from_pb and
 * cr_client_list_extras_from_pb): random replies packed by protobuf-c
 * (entries with 0..4 replicas of 0..3 handles, names of every varint-length
 * class, endpoints absent, empty and long, sizes and statuses across their
 * ranges, checksums and leases present or not, refusals with a reason),
 * then the same replies cut short and with bytes changed: both accept the
 * same inputs and, where they do, give the same lists. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client_internal.h"

#define RANDOM_VALUES_SEED 0x2545F4914F6CDD1Dull
#include "random_values.h"

static int32_t any_i32(void) {
    static const int32_t edges[] = {0, 1, -1, -706, INT32_MIN, INT32_MAX, 3, 127, 128};
    return next() % 2 ? edges[next() % 9] : (int32_t)(uint32_t)next();
}

static char *any_string(void) {
    static const size_t lengths[] = {0, 1, 9, 127, 128, 300};
    size_t len = lengths[next() % 6];
    char *s = malloc(len + 1);
    assert_non_null(s);
    for (size_t i = 0; i < len; i++) s[i] = (char)('a' + next() % 26);
    s[len] = '\0';
    return s;
}

/* ---- random replies, as protobuf-c structs -------------------------------- */

static Crescent__Master__ReplicaInfo **random_replicas(size_t *count) {
    *count = (size_t)(next() % 5);
    Crescent__Master__ReplicaInfo **infos = calloc(*count + 1, sizeof(*infos));
    assert_non_null(infos);
    for (size_t i = 0; i < *count; i++) {
        Crescent__Master__ReplicaInfo *r = malloc(sizeof(*r));
        assert_non_null(r);
        crescent__master__replica_info__init(r);
        r->status = (Crescent__Master__ReplicaInfo__ReplicaStatus)any_i32();
        r->n_handles = (size_t)(next() % 4);
        r->handles = calloc(r->n_handles + 1, sizeof(*r->handles));
        assert_non_null(r->handles);
        for (size_t j = 0; j < r->n_handles; j++) {
            Crescent__Master__BufHandle *h = malloc(sizeof(*h));
            assert_non_null(h);
            crescent__master__buf_handle__init(h);
            h->segment_name = any_string();
            unsigned endpoint = (unsigned)(next() % 3);
            h->transport_endpoint = endpoint == 0 ? NULL : any_string();
            h->size = any_u64();
            h->buffer = any_u64();
            h->status = (Crescent__Master__BufHandle__BufStatus)any_i32();
            r->handles[j] = h;
        }
        if (next() % 2 == 0) { /* an SSD replica: where it is, and its capability */
            r->has_medium = true;
            r->medium = CRESCENT__MASTER__REPLICA_INFO__MEDIUM__LOCAL_DISK;
            r->endpoint = any_string();
            r->segment_name = any_string();
            r->has_position = true;
            r->position = any_u64();
            r->has_object_size = true;
            r->object_size = any_u64();
            r->owner = malloc(sizeof(*r->owner));
            assert_non_null(r->owner);
            crescent__master__uuid__init(r->owner);
            r->owner->first = any_u64();
            r->owner->second = any_u64();
            /* 48 bytes make a capability; another length parses as none */
            static const size_t cap_lengths[] = {48, 48, 0, 47, 49};
            r->has_capability = next() % 3 != 0;
            r->capability.len = cap_lengths[next() % 5];
            r->capability.data = malloc(r->capability.len + 1);
            assert_non_null(r->capability.data);
            for (size_t b = 0; b < r->capability.len; b++) r->capability.data[b] = (uint8_t)next();
        }
        infos[i] = r;
    }
    return infos;
}

static void free_replicas(Crescent__Master__ReplicaInfo **infos, size_t count) {
    for (size_t i = 0; i < count; i++) {
        for (size_t j = 0; j < infos[i]->n_handles; j++) {
            free(infos[i]->handles[j]->segment_name);
            free(infos[i]->handles[j]->transport_endpoint);
            free(infos[i]->handles[j]);
        }
        free(infos[i]->handles);
        free(infos[i]->endpoint);
        free(infos[i]->segment_name);
        free(infos[i]->capability.data);
        free(infos[i]->owner);
        free(infos[i]);
    }
    free(infos);
}

/* Packs a random Batch{GetReplicaList,PutStart}Response into a malloc'd
 * buffer of *len bytes. */
static uint8_t *random_reply(bool get, size_t *len) {
    size_t n = (size_t)(next() % 41);
    Crescent__Master__GetReplicaListResponse *gets = calloc(n + 1, sizeof(*gets));
    Crescent__Master__GetReplicaListResponse **get_ptrs = calloc(n + 1, sizeof(*get_ptrs));
    Crescent__Master__PutStartResponse *puts = calloc(n + 1, sizeof(*puts));
    Crescent__Master__PutStartResponse **put_ptrs = calloc(n + 1, sizeof(*put_ptrs));
    assert_true(gets && get_ptrs && puts && put_ptrs);
    for (size_t i = 0; i < n; i++) {
        crescent__master__get_replica_list_response__init(&gets[i]);
        crescent__master__put_start_response__init(&puts[i]);
        gets[i].status_code = puts[i].status_code = next() % 3 ? 0 : any_i32();
        gets[i].replica_list = random_replicas(&gets[i].n_replica_list);
        puts[i].replica_list = gets[i].replica_list;
        puts[i].n_replica_list = gets[i].n_replica_list;
        gets[i].has_checksum_xxh3 = next() % 2;
        gets[i].checksum_xxh3 = next();
        gets[i].has_lease_ttl_ms = next() % 2;
        gets[i].lease_ttl_ms = any_u64();
        gets[i].error_message = puts[i].error_message = next() % 4 ? NULL : any_string();
        get_ptrs[i] = &gets[i];
        put_ptrs[i] = &puts[i];
    }
    Crescent__Master__BatchGetReplicaListResponse bg =
        CRESCENT__MASTER__BATCH_GET_REPLICA_LIST_RESPONSE__INIT;
    Crescent__Master__BatchPutStartResponse bp = CRESCENT__MASTER__BATCH_PUT_START_RESPONSE__INIT;
    bg.status_code = bp.status_code = next() % 5 ? 0 : any_i32();
    bg.error_message = bp.error_message = next() % 2 ? NULL : any_string();
    bg.n_responses = bp.n_responses = n;
    bg.responses = get_ptrs;
    bp.responses = put_ptrs;
    const ProtobufCMessage *m = get ? &bg.base : &bp.base;
    *len = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(*len + 1);
    assert_non_null(buf);
    assert_int_equal(protobuf_c_message_pack(m, buf), *len);
    for (size_t i = 0; i < n; i++) {
        free_replicas(gets[i].replica_list, gets[i].n_replica_list);
        free(gets[i].error_message);
    }
    free(bg.error_message);
    free(gets), free(get_ptrs), free(puts), free(put_ptrs);
    return buf;
}

/* ---- the reference: protobuf-c's unpack and the copy -------------------- */

static int reference(const uint8_t *buf, size_t len, bool get, struct cr_client_top *top,
                     struct cr_replica_lists *out) {
    memset(out, 0, sizeof(*out));
    const ProtobufCMessageDescriptor *desc =
        get ? &crescent__master__batch_get_replica_list_response__descriptor
            : &crescent__master__batch_put_start_response__descriptor;
    ProtobufCMessage *m = protobuf_c_message_unpack(desc, NULL, len, buf);
    if (m == NULL) return CR_ERR_PROTOCOL;
    /* Both responses: status_code, n_responses, responses, error_message. */
    const Crescent__Master__BatchGetReplicaListResponse *bg = (const void *)m;
    const Crescent__Master__BatchPutStartResponse *bp = (const void *)m;
    top->status_code = get ? bg->status_code : bp->status_code;
    const char *error = get ? bg->error_message : bp->error_message;
    top->error = error;
    top->error_len = error != NULL ? strlen(error) : 0;
    size_t n = get ? bg->n_responses : bp->n_responses;
    out->lists = n > 0 ? calloc(n, sizeof(*out->lists)) : NULL;
    for (size_t i = 0; i < n; i++) {
        struct cr_replica_list *l = &out->lists[i];
        if (get) {
            const Crescent__Master__GetReplicaListResponse *e = bg->responses[i];
            assert_int_equal(cr_client_replicas_from_pb(e->replica_list, e->n_replica_list, l),
                             CR_OK);
            cr_client_list_extras_from_pb(e, l);
            l->status = e->status_code;
        } else {
            const Crescent__Master__PutStartResponse *e = bp->responses[i];
            assert_int_equal(cr_client_replicas_from_pb(e->replica_list, e->n_replica_list, l),
                             CR_OK);
            l->status = e->status_code;
        }
        out->count = i + 1;
    }
    /* The top-level error is compared while m lives: copied here. */
    top->error = error != NULL ? strdup(error) : NULL;
    protobuf_c_message_free_unpacked(m, NULL);
    return CR_OK;
}

static void same_lists(const struct cr_replica_lists *a, const struct cr_replica_lists *b) {
    assert_int_equal(a->count, b->count);
    for (size_t i = 0; i < a->count; i++) {
        const struct cr_replica_list *x = &a->lists[i], *y = &b->lists[i];
        assert_null(x->key);
        assert_int_equal(x->status, y->status);
        assert_int_equal(x->count, y->count);
        assert_int_equal(x->has_checksum, y->has_checksum);
        assert_true(x->checksum_xxh3 == y->checksum_xxh3);
        assert_true(x->lease_ttl_ms == y->lease_ttl_ms);
        for (size_t r = 0; r < x->count; r++) {
            const struct cr_replica *p = &x->replicas[r], *q = &y->replicas[r];
            assert_int_equal(p->status, q->status);
            assert_int_equal(p->handle_count, q->handle_count);
            assert_true((p->handles == NULL) == (p->handle_count == 0));
            assert_int_equal(p->medium, q->medium);
            assert_string_equal(p->endpoint, q->endpoint);
            assert_string_equal(p->segment_name, q->segment_name);
            assert_true(p->position == q->position && p->object_size == q->object_size);
            assert_int_equal(p->has_capability, q->has_capability);
            if (p->has_capability) assert_memory_equal(p->capability, q->capability, 48);
            for (size_t h = 0; h < p->handle_count; h++) {
                const struct cr_buf_handle *s = &p->handles[h], *t = &q->handles[h];
                assert_string_equal(s->segment_name, t->segment_name);
                assert_string_equal(s->transport_endpoint, t->transport_endpoint);
                assert_true(s->size_bytes == t->size_bytes);
                assert_true(s->buffer == t->buffer);
                assert_int_equal(s->status, t->status);
            }
        }
    }
}

/* Both decoders on `buf`: the same verdict and, when accepted, the same. */
static bool compare(const uint8_t *buf, size_t len, bool get) {
    struct cr_client_top top_a, top_b = {0};
    struct cr_replica_lists a, b;
    int rc_a = cr_client_decode_replica_lists(buf, len, get, &top_a, &a);
    int rc_b = reference(buf, len, get, &top_b, &b);
    if (rc_a != rc_b) {
        fprintf(stderr, "DIFF mine %d pbc %d get %d:", rc_a, rc_b, get);
        for (size_t i = 0; i < len && i < 80; i++) fprintf(stderr, " %02x", buf[i]);
        fprintf(stderr, "\n");
    }
    assert_int_equal(rc_a, rc_b);
    if (rc_a == CR_OK) {
        assert_int_equal(top_a.status_code, top_b.status_code);
        /* protobuf-c's C string ends at a NUL byte; the shown text does too. */
        size_t shown = top_a.error != NULL ? strnlen(top_a.error, top_a.error_len) : 0;
        assert_int_equal(shown, top_b.error_len);
        if (shown > 0) assert_memory_equal(top_a.error, top_b.error, shown);
        same_lists(&a, &b);
    } else {
        assert_int_equal(a.count, 0);
        assert_null(a.lists);
    }
    free((char *)top_b.error);
    cr_client_replica_lists_free(&a);
    cr_client_replica_lists_free(&b);
    assert_int_equal(a.count, 0);
    return rc_a == CR_OK;
}

static void test_random_replies_decode_as_protobuf_c(void **unused) {
    (void)unused;
    for (int round = 0; round < 600; round++) {
        bool get = round % 2 == 0;
        size_t len;
        uint8_t *buf = random_reply(get, &len);
        assert_true(compare(buf, len, get));
        free(buf);
    }
}

static void test_cut_and_changed_replies_refused_alike(void **unused) {
    (void)unused;
    size_t accepted = 0, refused = 0;
    for (int round = 0; round < 300; round++) {
        bool get = round % 2 == 0;
        size_t len;
        uint8_t *buf = random_reply(get, &len);
        for (int cut = 0; cut < 8 && len > 0; cut++) {
            size_t at = (size_t)(next() % len);
            compare(buf, at, get) ? accepted++ : refused++;
        }
        for (int change = 0; change < 16 && len > 0; change++) {
            uint8_t *copy = malloc(len);
            assert_non_null(copy);
            memcpy(copy, buf, len);
            for (int k = 0; k < 1 + (int)(next() % 3); k++)
                copy[next() % len] = (uint8_t)next();
            compare(copy, len, get) ? accepted++ : refused++;
            free(copy);
        }
        free(buf);
    }
    /* Both outcomes happened: the comparison saw refusals, not only copies. */
    assert_true(accepted > 100 && refused > 100);
}

/* Required fields missing and known fields of another wire type. */
static void test_required_fields_and_wire_types(void **unused) {
    (void)unused;
    static const struct {
        const char *why;
        uint8_t bytes[24];
        size_t len;
    } cases[] = {
        {"no top-level status", {0x12, 0x02, 0x08, 0x00}, 4},
        {"entry without status", {0x08, 0x00, 0x12, 0x00}, 4},
        {"status as a string", {0x0a, 0x00}, 2},
        {"handle without buffer",
         {0x08, 0x00, 0x12, 0x0e, 0x08, 0x00, 0x12, 0x0a, 0x0a, 0x06, 0x0a, 0x00, 0x10, 0x00,
          0x20, 0x01, 0x10, 0x01},
         18},
        {"checksum as a varint", {0x08, 0x00, 0x12, 0x04, 0x08, 0x00, 0x18, 0x01}, 8},
        {"a group", {0x08, 0x00, 0x1b}, 3},
        {"field number 0", {0x08, 0x00, 0x02, 0x00}, 4},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct cr_client_top top;
        struct cr_replica_lists out;
        int rc = cr_client_decode_replica_lists(cases[i].bytes, cases[i].len, true, &top, &out);
        if (rc != CR_ERR_PROTOCOL) fail_msg("%s: accepted", cases[i].why);
        compare(cases[i].bytes, cases[i].len, true);
    }
    /* Accepted: an empty success; an unknown field of any wire type; the
     * checksum of a PutStartResponse (unknown there) of any type; a replica
     * and a handle without their status (required, but with a default:
     * protobuf-c takes the default). */
    const uint8_t ok_empty[] = {0x08, 0x00};
    const uint8_t ok_unknown[] = {0x08, 0x00, 0x38, 0x05, 0x41, 1, 2, 3, 4, 5,
                                  6,    7,    8,    0x4d, 1,    2, 3, 4};
    const uint8_t put_checksum_varint[] = {0x08, 0x00, 0x12, 0x04, 0x08, 0x00, 0x18, 0x01};
    assert_true(compare(ok_empty, sizeof(ok_empty), true));
    assert_true(compare(ok_unknown, sizeof(ok_unknown), true));
    assert_true(compare(put_checksum_varint, sizeof(put_checksum_varint), false));
    const uint8_t no_statuses[] = {0x08, 0x00, 0x12, 0x0e, 0x08, 0x00, 0x12, 0x0a, 0x0a, 0x08,
                                   0x0a, 0x00, 0x10, 0x00, 0x18, 0x00, 0x2a, 0x00};
    assert_true(compare(no_statuses, sizeof(no_statuses), true));
    /* Found by fuzz_client_decode: protobuf-c refuses field number 0 only
     * in a one-byte tag (above); in a longer one it is an unknown field. */
    const uint8_t tag0_long[] = {0x08, 0xff, 0xff, 0xff, 0x05, 0x80, 0x00, 0x00};
    assert_true(compare(tag0_long, sizeof(tag0_long), false));
    /* ... also inside a handle, beside its required fields. */
    const uint8_t handle_tag0[] = {0x08, 0x00, 0x12, 0x11, 0x08, 0x00, 0x12, 0x0d, 0x0a,
                                   0x09, 0x80, 0x00, 0x00, 0x0a, 0x00, 0x10, 0x00, 0x18,
                                   0x00, 0x10, 0x01};
    assert_true(compare(handle_tag0, sizeof(handle_tag0), true));
    /* Found by fuzz_client_decode: protobuf-c reads a length in at most 5
     * bytes: a 10-byte length refuses the reply though its value (cut to 64
     * bits) is 0; a 5-byte one is read whole (here 2^32: too long). */
    const uint8_t len_10_bytes[] = {0x08, 0x40, 0x52, 0x80, 0x80, 0x80, 0x80, 0x80,
                                    0x80, 0x80, 0x80, 0x80, 0x02, 0x48, 0x21};
    const uint8_t len_past_32[] = {0x08, 0x40, 0x52, 0x80, 0x80, 0x80, 0x80, 0x10, 0x48, 0x21};
    assert_false(compare(len_10_bytes, sizeof(len_10_bytes), true));
    assert_false(compare(len_past_32, sizeof(len_past_32), true));
    const uint8_t len_5_bytes[] = {0x08, 0x40, 0x52, 0x80, 0x80, 0x80, 0x80, 0x00, 0x48, 0x21};
    assert_true(compare(len_5_bytes, sizeof(len_5_bytes), true));
}

/* Lists made by either path free with cr_client_replica_list_free one by
 * one, as a caller keeping some of a batch's lists does. */
static void test_lists_free_one_by_one(void **unused) {
    (void)unused;
    size_t len;
    uint8_t *buf = random_reply(true, &len);
    struct cr_client_top top;
    struct cr_replica_lists out;
    assert_int_equal(cr_client_decode_replica_lists(buf, len, true, &top, &out), CR_OK);
    for (size_t i = 0; i < out.count; i++) cr_client_replica_list_free(&out.lists[i]);
    cr_client_replica_lists_free(&out); /* the freed lists are zeroed: nothing twice */
    free(buf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_replies_decode_as_protobuf_c),
        cmocka_unit_test(test_cut_and_changed_replies_refused_alike),
        cmocka_unit_test(test_required_fields_and_wire_types),
        cmocka_unit_test(test_lists_free_one_by_one),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
