/* libcrescent without crescentd: the reply scanner, the envelope, ids,
 * UUIDs, argument checks, protobuf -> C copies, and the client against a
 * scripted in-test ZMQ ROUTER (request frames as sent, blocking calls,
 * out-of-order pipelined replies, transport errors, timeouts). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "client/client_internal.h"
#include "msgs/rpc_frame.h"

/* ---- helpers ---------------------------------------------------------- */

static size_t pack_msg(const ProtobufCMessage *m, uint8_t *out, size_t cap) {
    size_t len = protobuf_c_message_get_packed_size(m);
    assert_true(len <= cap);
    assert_int_equal(protobuf_c_message_pack(m, out), len);
    return len;
}

/* A GetReplicaListResponse with `n` one-handle replicas on seg<i>. */
static size_t pack_replica_reply(int32_t status, unsigned n, uint8_t *out, size_t cap) {
    Crescent__Master__BufHandle h[4];
    Crescent__Master__BufHandle *hp[4];
    Crescent__Master__ReplicaInfo info[4];
    Crescent__Master__ReplicaInfo *ip[4];
    char names[4][16];
    assert_true(n <= 4);
    for (unsigned i = 0; i < n; i++) {
        crescent__master__buf_handle__init(&h[i]);
        snprintf(names[i], sizeof(names[i]), "seg%u", i);
        h[i].segment_name = names[i];
        h[i].size = 4096;
        h[i].buffer = 0x1000u * (i + 1);
        h[i].status = CRESCENT__MASTER__BUF_HANDLE__BUF_STATUS__COMPLETE;
        h[i].transport_endpoint = "10.0.0.1:7000";
        hp[i] = &h[i];
        crescent__master__replica_info__init(&info[i]);
        info[i].n_handles = 1;
        info[i].handles = &hp[i];
        info[i].status = CRESCENT__MASTER__REPLICA_INFO__REPLICA_STATUS__COMPLETE;
        ip[i] = &info[i];
    }
    Crescent__Master__GetReplicaListResponse r = CRESCENT__MASTER__GET_REPLICA_LIST_RESPONSE__INIT;
    r.status_code = status;
    r.n_replica_list = n;
    r.replica_list = ip;
    return pack_msg(&r.base, out, cap);
}

/* ---- scanner and envelope --------------------------------------------- */

static void test_scan_reads_status_and_field2(void **unused) {
    (void)unused;
    uint8_t buf[1024];
    struct cr_client_scan scan;
    size_t len = pack_replica_reply(0, 3, buf, sizeof(buf));
    assert_int_equal(cr_client_scan_reply(buf, len, &scan), CR_OK);
    assert_int_equal(scan.status_code, 0);
    assert_int_equal(scan.field2_count, 3);

    Crescent__Master__ExistKeyResponse e = CRESCENT__MASTER__EXIST_KEY_RESPONSE__INIT;
    e.status_code = CR_ERR_OBJECT_NOT_FOUND; /* negative: a 10-byte varint */
    e.has_exists = 1;
    e.exists = 1;
    len = pack_msg(&e.base, buf, sizeof(buf));
    assert_int_equal(cr_client_scan_reply(buf, len, &scan), CR_OK);
    assert_int_equal(scan.status_code, CR_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(scan.field2_varint, 1);
}

static void test_scan_rejects_malformed(void **unused) {
    (void)unused;
    uint8_t buf[1024];
    struct cr_client_scan scan;
    size_t len = pack_replica_reply(0, 2, buf, sizeof(buf));
    for (size_t cut = 1; cut < len; cut++) { /* a truncation never reads as the whole */
        int rc = cr_client_scan_reply(buf, cut, &scan);
        assert_true(rc == CR_ERR_PROTOCOL || (rc == CR_OK && scan.field2_count < 2));
    }
    assert_int_equal(cr_client_scan_reply(buf, len - 1, &scan), CR_ERR_PROTOCOL);
    assert_int_equal(cr_client_scan_reply(NULL, 0, &scan), CR_ERR_PROTOCOL); /* no status */
    const uint8_t no_status[] = {0x10, 0x01};                             /* field 2 only */
    assert_int_equal(cr_client_scan_reply(no_status, sizeof(no_status), &scan), CR_ERR_PROTOCOL);
    const uint8_t group[] = {0x08, 0x00, 0x1b};                           /* wire type 3 */
    assert_int_equal(cr_client_scan_reply(group, sizeof(group), &scan), CR_ERR_PROTOCOL);
    const uint8_t long_varint[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                   0xff, 0xff, 0xff, 0xff, 0x01};
    assert_int_equal(cr_client_scan_reply(long_varint, sizeof(long_varint), &scan),
                     CR_ERR_PROTOCOL);
    const uint8_t huge_len[] = {0x08, 0x00, 0x12, 0xff, 0xff, 0xff, 0xff, 0x0f};
    assert_int_equal(cr_client_scan_reply(huge_len, sizeof(huge_len), &scan), CR_ERR_PROTOCOL);
    const uint8_t status_as_bytes[] = {0x0a, 0x00};
    assert_int_equal(cr_client_scan_reply(status_as_bytes, 2, &scan), CR_ERR_PROTOCOL);
    const uint8_t out_of_range[] = {0x08, 0x80, 0x80, 0x80, 0x80, 0x10}; /* 2^32 */
    assert_int_equal(cr_client_scan_reply(out_of_range, 6, &scan), CR_ERR_PROTOCOL);
    const uint8_t field0[] = {0x00, 0x00};
    assert_int_equal(cr_client_scan_reply(field0, 2, &scan), CR_ERR_PROTOCOL);
}

static void test_envelope_and_ids(void **unused) {
    (void)unused;
    uint8_t id[8], status[4];
    cr_rpc_put_u64(id, 0x0102030405060708ull);
    cr_rpc_put_i32(status, CR_ERR_PROTOCOL);
    uint64_t id_out;
    int32_t status_out;
    assert_int_equal(cr_client_parse_envelope(id, 8, status, 4, &id_out, &status_out), CR_OK);
    assert_true(id_out == 0x0102030405060708ull);
    assert_int_equal(status_out, CR_ERR_PROTOCOL);
    assert_int_equal(cr_client_parse_envelope(id, 7, status, 4, &id_out, &status_out),
                     CR_ERR_PROTOCOL);
    assert_int_equal(cr_client_parse_envelope(id, 8, status, 5, &id_out, &status_out),
                     CR_ERR_PROTOCOL);
    uint64_t made = cr_client_make_id(77, true, CR_METHOD_GET_REPLICA_LIST);
    assert_int_equal(cr_client_id_method(made), CR_METHOD_GET_REPLICA_LIST);
    assert_true(cr_client_id_sync(made));
    assert_false(cr_client_id_sync(cr_client_make_id(77, false, CR_METHOD_REMOVE)));
    assert_true(made >> CR_CLIENT_ID_SEQ_SHIFT == 77);
}

static void test_uuid_text(void **unused) {
    (void)unused;
    uint8_t id[16], back[16];
    for (int i = 0; i < 16; i++) id[i] = (uint8_t)(i * 17);
    char text[CR_CLIENT_UUID_TEXT];
    cr_client_uuid_format(id, text);
    assert_string_equal(text, "00112233-4455-6677-8899-aabbccddeeff");
    assert_int_equal(cr_client_uuid_parse(text, back), CR_OK);
    assert_memory_equal(id, back, 16);
    assert_int_equal(cr_client_uuid_parse("00112233445566778899AABBCCDDEEFF", back), CR_OK);
    assert_memory_equal(id, back, 16);
    assert_int_equal(cr_client_uuid_parse("00112233-4455-6677-8899-aabbccddeefg", back),
                     CR_ERR_INVALID_PARAMS);
    assert_int_equal(cr_client_uuid_parse("001122334-455-6677-8899-aabbccddeeff", back),
                     CR_ERR_INVALID_PARAMS);
    assert_int_equal(cr_client_uuid_parse("", back), CR_ERR_INVALID_PARAMS);
    Crescent__Master__UUID pb;
    cr_client_uuid_to_pb(id, &pb);
    assert_true(pb.first == 0x0011223344556677ull && pb.second == 0x8899aabbccddeeffull);
    cr_client_uuid_from_pb(&pb, back);
    assert_memory_equal(id, back, 16);
}

static void test_argument_checks(void **unused) {
    (void)unused;
    const char *why;
    assert_int_equal(cr_client_check_key("k", &why), CR_OK);
    assert_int_equal(cr_client_check_key("", &why), CR_ERR_INVALID_PARAMS);
    assert_int_equal(cr_client_check_key(NULL, &why), CR_ERR_INVALID_PARAMS);
    char *big = malloc(CR_CLIENT_KEY_MAX + 2);
    assert_non_null(big);
    memset(big, 'a', CR_CLIENT_KEY_MAX + 1);
    big[CR_CLIENT_KEY_MAX + 1] = '\0';
    assert_int_equal(cr_client_check_key(big, &why), CR_ERR_INVALID_PARAMS);
    big[CR_CLIENT_KEY_MAX] = '\0';
    assert_int_equal(cr_client_check_key(big, &why), CR_OK);
    char msg[128];
    assert_int_equal(cr_client_check_name(big, "tenant id", msg, sizeof(msg)),
                     CR_ERR_INVALID_PARAMS);
    assert_non_null(strstr(msg, "tenant id"));
    free(big);
}

static void test_descriptors_cover_every_method(void **unused) {
    (void)unused;
    const ProtobufCEnumDescriptor *methods = &crescent__master__method__descriptor;
    for (unsigned i = 0; i < methods->n_values; i++) {
        int value = methods->values[i].value;
        if (value == 0) {
            assert_null(cr_client_response_descriptor(0));
            continue;
        }
        const ProtobufCMessageDescriptor *d = cr_client_response_descriptor((uint16_t)value);
        assert_non_null(d);
        /* Every response's field 1 is the int32 status_code. */
        const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(d, 1);
        assert_non_null(f);
        assert_string_equal(f->name, "status_code");
    }
    assert_null(cr_client_response_descriptor(999));
    uint8_t buf[512];
    size_t len = pack_replica_reply(CR_ERR_OBJECT_HAS_LEASE, 1, buf, sizeof(buf));
    ProtobufCMessage *m = protobuf_c_message_unpack(
        cr_client_response_descriptor(CR_METHOD_GET_REPLICA_LIST), NULL, len, buf);
    assert_non_null(m);
    assert_int_equal(cr_client_response_status(m), CR_ERR_OBJECT_HAS_LEASE);
    protobuf_c_message_free_unpacked(m, NULL);
}

static void test_replicas_deep_copy(void **unused) {
    (void)unused;
    uint8_t buf[1024];
    size_t len = pack_replica_reply(0, 2, buf, sizeof(buf));
    Crescent__Master__GetReplicaListResponse *r =
        crescent__master__get_replica_list_response__unpack(NULL, len, buf);
    assert_non_null(r);
    struct cr_replica_list list;
    assert_int_equal(cr_client_replicas_from_pb(r->replica_list, r->n_replica_list, &list), CR_OK);
    crescent__master__get_replica_list_response__free_unpacked(r, NULL); /* copy stands alone */
    assert_int_equal(list.count, 2);
    assert_int_equal(list.replicas[1].status, CR_REPLICA_COMPLETE);
    assert_int_equal(list.replicas[1].handle_count, 1);
    assert_string_equal(list.replicas[1].handles[0].segment_name, "seg1");
    assert_true(list.replicas[1].handles[0].buffer == 0x2000);
    assert_string_equal(list.replicas[1].handles[0].transport_endpoint, "10.0.0.1:7000");
    cr_client_replica_list_free(&list);
    assert_int_equal(list.count, 0);
    cr_client_replica_list_free(&list); /* a zeroed list frees to nothing */
}

/* ---- against a scripted ROUTER ---------------------------------------- */

struct fake {
    void *context;
    void *router;
    char endpoint[64];
    bool three_frame_replies; /* answer in the three-frame layout even to one frame */
};

static void fake_open(struct fake *f) {
    memset(f, 0, sizeof(*f));
    f->context = zmq_ctx_new();
    f->router = zmq_socket(f->context, ZMQ_ROUTER);
    int linger = 0;
    zmq_setsockopt(f->router, ZMQ_LINGER, &linger, sizeof(linger));
    assert_int_equal(zmq_bind(f->router, "tcp://127.0.0.1:*"), 0);
    size_t size = sizeof(f->endpoint);
    assert_int_equal(zmq_getsockopt(f->router, ZMQ_LAST_ENDPOINT, f->endpoint, &size), 0);
}

static void fake_close(struct fake *f) {
    zmq_close(f->router);
    zmq_ctx_term(f->context);
}

/* One received request: identity, method, id, body. */
struct request {
    uint8_t identity[256];
    size_t identity_len;
    int frames;
    uint16_t method;
    uint64_t id;
    uint8_t body[4096];
    size_t body_len;
};

/* Receives one request (waits up to 5 s); false on timeout. */
static bool fake_recv(struct fake *f, struct request *r) {
    zmq_pollitem_t item = {.socket = f->router, .events = ZMQ_POLLIN};
    if (zmq_poll(&item, 1, 5000) <= 0) return false;
    uint8_t frame[4096];
    int more = 1;
    r->frames = 0;
    while (more) {
        int n = zmq_recv(f->router, frame, sizeof(frame), 0);
        assert_true(n >= 0);
        size_t len = (size_t)n < sizeof(frame) ? (size_t)n : sizeof(frame);
        size_t more_size = sizeof(more);
        zmq_getsockopt(f->router, ZMQ_RCVMORE, &more, &more_size);
        if (r->frames == 0) memcpy(r->identity, frame, r->identity_len = len);
        if (r->frames == 1 && !more && len >= CR_RPC_REQUEST_HEADER_BYTES) { /* one frame */
            r->method = cr_rpc_get_u16(frame);
            r->id = cr_rpc_get_u64(frame + CR_RPC_METHOD_BYTES);
            memcpy(r->body, frame + CR_RPC_REQUEST_HEADER_BYTES,
                   r->body_len = len - CR_RPC_REQUEST_HEADER_BYTES);
        }
        if (r->frames == 1 && more && len == 2) r->method = cr_rpc_get_u16(frame);
        if (r->frames == 2 && len == 8) r->id = cr_rpc_get_u64(frame);
        if (r->frames == 3) memcpy(r->body, frame, r->body_len = len);
        r->frames++;
    }
    return true;
}

static void fake_reply(struct fake *f, const struct request *r, uint64_t id, int32_t status,
                       const void *body, size_t len) {
    uint8_t id_bytes[8], status_bytes[4];
    cr_rpc_put_u64(id_bytes, id);
    cr_rpc_put_i32(status_bytes, status);
    assert_true(zmq_send(f->router, r->identity, r->identity_len, ZMQ_SNDMORE) >= 0);
    if (r->frames == 2 && !f->three_frame_replies) { /* as the gateway: the request's layout */
        uint8_t frame[CR_RPC_REPLY_HEADER_BYTES + 1024];
        assert_true(len <= 1024);
        memcpy(frame, id_bytes, 8);
        memcpy(frame + 8, status_bytes, 4);
        memcpy(frame + CR_RPC_REPLY_HEADER_BYTES, body, len);
        assert_true(zmq_send(f->router, frame, CR_RPC_REPLY_HEADER_BYTES + len, 0) >= 0);
        return;
    }
    assert_true(zmq_send(f->router, id_bytes, 8, ZMQ_SNDMORE) >= 0);
    assert_true(zmq_send(f->router, status_bytes, 4, ZMQ_SNDMORE) >= 0);
    assert_true(zmq_send(f->router, body, len, 0) >= 0);
}

/* The server thread of the blocking tests: answers `count` requests. */
struct script {
    struct fake *fake;
    int count;
    int mode; /* 0: replica list, 1: transport error, 2: other_id's reply, then the
                 right one, 3: a batch answer with one status code */
    uint64_t other_id; /* mode 2: a pipelined request of the client's */
    struct request seen;
};

static void *serve(void *arg) {
    struct script *s = arg;
    for (int i = 0; i < s->count; i++) {
        if (!fake_recv(s->fake, &s->seen)) return NULL;
        uint8_t body[1024];
        if (s->mode == 1) {
            static const char text[] = "body does not decode as GetReplicaListRequest";
            fake_reply(s->fake, &s->seen, s->seen.id, CR_ERR_PROTOCOL, text, sizeof(text) - 1);
            continue;
        }
        if (s->mode == 4) { /* a refusal with crescentd's reason */
            Crescent__Master__GetReplicaListResponse r =
                CRESCENT__MASTER__GET_REPLICA_LIST_RESPONSE__INIT;
            r.status_code = CR_ERR_OBJECT_NOT_FOUND;
            r.error_message = "object not found in tenant t1";
            size_t n = pack_msg(&r.base, body, sizeof(body));
            fake_reply(s->fake, &s->seen, s->seen.id, CR_OK, body, n);
            continue;
        }
        if (s->mode == 3) {
            int32_t codes[1] = {CR_ERR_OBJECT_NOT_FOUND};
            Crescent__Master__BatchExistKeyResponse r =
                CRESCENT__MASTER__BATCH_EXIST_KEY_RESPONSE__INIT;
            r.n_status_codes = 1;
            r.status_codes = codes;
            size_t n = pack_msg(&r.base, body, sizeof(body));
            fake_reply(s->fake, &s->seen, s->seen.id, CR_OK, body, n);
            continue;
        }
        size_t len = pack_replica_reply(0, 2, body, sizeof(body));
        if (s->mode == 2) /* the reply to a pipelined request arrives first */
            fake_reply(s->fake, &s->seen, s->other_id, 0, "\x08\x00\x10\x01", 4);
        fake_reply(s->fake, &s->seen, s->seen.id, CR_OK, body, len);
    }
    return NULL;
}

static cr_client *connect_to(struct fake *f, int timeout_ms) {
    static const uint8_t id[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    struct cr_client_options options = {.timeout_ms = timeout_ms, .client_id = id};
    cr_client *c = NULL;
    char error[128];
    assert_int_equal(cr_client_open(f->endpoint, &options, &c, error, sizeof(error)), CR_OK);
    return c;
}

static void test_blocking_call_frames_and_reply(void **unused) {
    (void)unused;
    struct fake f;
    fake_open(&f);
    cr_client *c = connect_to(&f, 5000);
    struct script s = {.fake = &f, .count = 1, .mode = 2};
    assert_int_equal(cr_client_submit_exist_key(c, NULL, "e", &s.other_id), CR_OK);
    struct request pipelined;
    assert_true(fake_recv(&f, &pipelined)); /* the server thread sees the blocking call only */
    assert_true(pipelined.id == s.other_id);
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, serve, &s), 0);
    struct cr_replica_list list;
    assert_int_equal(cr_client_get_replica_list(c, NULL, "k1", &list), CR_OK);
    pthread_join(thread, NULL);
    /* The request as it went on the wire: identity and one frame. */
    assert_int_equal(s.seen.frames, 2);
    assert_int_equal(s.seen.method, CR_METHOD_GET_REPLICA_LIST);
    assert_true(cr_client_id_sync(s.seen.id));
    Crescent__Master__GetReplicaListRequest *req =
        crescent__master__get_replica_list_request__unpack(NULL, s.seen.body_len, s.seen.body);
    assert_non_null(req);
    assert_string_equal(req->key, "k1");
    assert_string_equal(req->tenant_id, "default");
    crescent__master__get_replica_list_request__free_unpacked(req, NULL);
    /* The reply, decoded. */
    assert_int_equal(list.count, 2);
    assert_string_equal(list.replicas[0].handles[0].segment_name, "seg0");
    cr_client_replica_list_free(&list);
    /* The other reply that came first was kept for poll, decoded by the scanner. */
    struct cr_completion done[4];
    assert_int_equal(cr_client_in_flight(c), 1);
    assert_int_equal(cr_client_poll(c, done, 4, 0), 1);
    assert_true(done[0].request_id == s.other_id);
    assert_int_equal(done[0].method, CR_METHOD_EXIST_KEY);
    assert_int_equal(done[0].status, CR_OK);
    assert_true(done[0].exists);
    assert_int_equal(cr_client_in_flight(c), 0);
    cr_client_close(c);
    fake_close(&f);
}

/* A refused call's error_message is what the caller reads. */
static void test_refusal_reason_reaches_the_caller(void **unused) {
    (void)unused;
    struct fake f;
    fake_open(&f);
    cr_client *c = connect_to(&f, 5000);
    struct script s = {.fake = &f, .count = 1, .mode = 4};
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, serve, &s), 0);
    struct cr_replica_list list;
    assert_int_equal(cr_client_get_replica_list(c, NULL, "k1", &list), CR_ERR_OBJECT_NOT_FOUND);
    pthread_join(thread, NULL);
    assert_non_null(strstr(cr_client_last_error(c), "object not found in tenant t1"));
    cr_client_close(c);
    fake_close(&f);
}

/* Replies in the three-frame layout (a server that answers so) are read too. */
static void test_three_frame_replies_understood(void **unused) {
    (void)unused;
    struct fake f;
    fake_open(&f);
    f.three_frame_replies = true;
    cr_client *c = connect_to(&f, 5000);
    struct script s = {.fake = &f, .count = 1, .mode = 0};
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, serve, &s), 0);
    struct cr_replica_list list;
    assert_int_equal(cr_client_get_replica_list(c, NULL, "k1", &list), CR_OK);
    pthread_join(thread, NULL);
    assert_int_equal(list.count, 2);
    cr_client_replica_list_free(&list);
    cr_client_close(c);
    fake_close(&f);
}

static void test_transport_error_and_validation(void **unused) {
    (void)unused;
    struct fake f;
    fake_open(&f);
    cr_client *c = connect_to(&f, 5000);
    /* Refused before sending: nothing reaches the server. */
    struct cr_replica_list list;
    assert_int_equal(cr_client_get_replica_list(c, NULL, "", &list), CR_ERR_INVALID_PARAMS);
    assert_non_null(strstr(cr_client_last_error(c), "empty"));
    struct cr_put_item item = {.key = "k", .size_bytes = (uint64_t)INT64_MAX + 1};
    assert_int_equal(cr_client_put_start(c, "t", &item, &list), CR_ERR_INVALID_PARAMS);
    assert_non_null(strstr(cr_client_last_error(c), "0..2^63-1"));
    struct cr_replicate_config zero = {.replica_num = 0};
    item.size_bytes = 1;
    item.config = &zero;
    assert_int_equal(cr_client_put_start(c, "t", &item, &list), CR_ERR_INVALID_PARAMS);
    struct script s = {.fake = &f, .count = 1, .mode = 1};
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, serve, &s), 0);
    assert_int_equal(cr_client_get_replica_list(c, "t1", "k", &list), CR_ERR_PROTOCOL);
    pthread_join(thread, NULL);
    assert_non_null(strstr(cr_client_last_error(c), "does not decode"));
    assert_int_equal(s.seen.method, CR_METHOD_GET_REPLICA_LIST); /* the first thing sent */
    cr_client_close(c);
    fake_close(&f);
}

static void test_timeout_then_late_reply_dropped(void **unused) {
    (void)unused;
    struct fake f;
    fake_open(&f);
    cr_client *c = connect_to(&f, 100);
    assert_int_equal(cr_client_remove(c, NULL, "k", true), CR_ERR_TIMEOUT);
    assert_non_null(strstr(cr_client_last_error(c), "no reply"));
    struct request r;
    assert_true(fake_recv(&f, &r));
    Crescent__Master__RemoveRequest *req =
        crescent__master__remove_request__unpack(NULL, r.body_len, r.body);
    assert_non_null(req);
    assert_true(req->has_force && req->force);
    crescent__master__remove_request__free_unpacked(req, NULL);
    fake_reply(&f, &r, r.id, CR_OK, "\x08\x00", 2); /* too late */
    uint64_t ping_id;
    assert_int_equal(cr_client_submit_ping(c, &ping_id), CR_OK);
    struct request p;
    assert_true(fake_recv(&f, &p));
    fake_reply(&f, &p, p.id, CR_OK, "\x08\x00", 2);
    struct cr_completion done[4];
    int n = cr_client_poll(c, done, 4, 2000);
    assert_int_equal(n, 1); /* the ping only: the late remove reply was dropped */
    assert_true(done[0].request_id == ping_id);
    assert_int_equal(cr_client_in_flight(c), 0);
    cr_client_close(c);
    fake_close(&f);
}

static void test_pipelined_out_of_order(void **unused) {
    (void)unused;
    struct fake f;
    fake_open(&f);
    cr_client *c = connect_to(&f, 5000);
    uint64_t ids[3];
    struct cr_put_item item = {.key = "p", .size_bytes = 4096};
    assert_int_equal(cr_client_submit_put_start(c, "t", &item, &ids[0]), CR_OK);
    assert_int_equal(cr_client_submit_exist_key(c, NULL, "e", &ids[1]), CR_OK);
    assert_int_equal(cr_client_submit_get_replica_list(c, NULL, "g", &ids[2]), CR_OK);
    assert_int_equal(cr_client_in_flight(c), 3);
    struct request r[3];
    for (int i = 0; i < 3; i++) {
        assert_true(fake_recv(&f, &r[i]));
        assert_true(r[i].id == ids[i]);
    }
    Crescent__Master__PutStartRequest *ps =
        crescent__master__put_start_request__unpack(NULL, r[0].body_len, r[0].body);
    assert_non_null(ps);
    assert_int_equal(ps->value_length, 4096);
    assert_int_equal(ps->config->replica_num, 1);
    assert_non_null(ps->client_id);
    assert_true(ps->client_id->first == 0x0102030405060708ull);
    crescent__master__put_start_request__free_unpacked(ps, NULL);
    uint8_t body[1024];
    size_t len = pack_replica_reply(0, 3, body, sizeof(body));
    fake_reply(&f, &r[2], r[2].id, CR_OK, body, len);             /* newest first */
    fake_reply(&f, &r[1], r[1].id, CR_OK, "\x08\xc4\xfa\xff\xff\xff\xff\xff\xff\xff\x01", 11);
    fake_reply(&f, &r[0], r[0].id, CR_ERR_PROTOCOL, "bad", 3);
    struct cr_completion done[3];
    int got = 0;
    while (got < 3) {
        int n = cr_client_poll(c, done + got, (size_t)(3 - got), 2000);
        assert_true(n > 0);
        got += n;
    }
    assert_true(done[0].request_id == ids[2]);
    assert_int_equal(done[0].replica_count, 3);
    assert_true(done[1].request_id == ids[1]);
    assert_int_equal(done[1].status, -700); /* c4 fa ff .. 01 is -700 */
    assert_true(done[2].request_id == ids[0]);
    assert_int_equal(done[2].status, CR_ERR_PROTOCOL);
    assert_int_equal(cr_client_in_flight(c), 0);
    assert_int_equal(cr_client_poll(c, done, 3, 0), 0);
    cr_client_close(c);
    fake_close(&f);
}

/* The client's clock, shifted by the test: time still flows (so a wait for a
 * message that is on its way ends), and deadlines pass when the test says. */
struct shifted_clock {
    int64_t offset_ms;
};

static int64_t shifted_ms(void *ctx) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 +
           ((struct shifted_clock *)ctx)->offset_ms;
}

/* A pipelined request whose reply never comes completes once, as a timeout,
 * so in_flight reaches 0; its reply, arriving late, is dropped and does not
 * count against the request still in flight. */
static void test_unanswered_pipelined_request_times_out_once(void **unused) {
    (void)unused;
    struct fake f;
    fake_open(&f);
    cr_client *c = connect_to(&f, 60000);
    struct shifted_clock clock = {0};
    c->clock_ms = shifted_ms;
    c->clock_ctx = &clock;
    uint64_t a, b;
    assert_int_equal(cr_client_submit_ping(c, &a), CR_OK);
    clock.offset_ms += 30000;
    assert_int_equal(cr_client_submit_exist_key(c, NULL, "e", &b), CR_OK);
    struct request ra, rb;
    assert_true(fake_recv(&f, &ra) && ra.id == a);
    assert_true(fake_recv(&f, &rb) && rb.id == b);
    struct cr_completion done[4];
    assert_int_equal(cr_client_poll(c, done, 4, 0), 0);
    assert_int_equal(cr_client_in_flight(c), 2);
    clock.offset_ms += 30001; /* a is past its 60 s, b is not */
    assert_int_equal(cr_client_poll(c, done, 4, 0), 1);
    assert_true(done[0].request_id == a);
    assert_int_equal(done[0].method, CR_METHOD_PING);
    assert_int_equal(done[0].status, CR_ERR_TIMEOUT);
    assert_int_equal(cr_client_in_flight(c), 1);
    fake_reply(&f, &ra, ra.id, CR_OK, "\x08\x00", 2); /* too late */
    fake_reply(&f, &rb, rb.id, CR_OK, "\x08\x00\x10\x01", 4);
    assert_int_equal(cr_client_poll(c, done, 4, 5000), 1); /* b's only */
    assert_true(done[0].request_id == b);
    assert_int_equal(done[0].status, CR_OK);
    assert_true(done[0].exists);
    assert_int_equal(cr_client_in_flight(c), 0);
    assert_int_equal(cr_client_poll(c, done, 4, 0), 0);
    /* A crescentd that never answers: polling until in_flight is 0 ends. */
    assert_int_equal(cr_client_submit_ping(c, &a), CR_OK);
    assert_true(fake_recv(&f, &ra));
    clock.offset_ms += 60000;
    int polls = 0;
    while (cr_client_in_flight(c) > 0) {
        assert_true(++polls < 3);
        assert_true(cr_client_poll(c, done, 4, -1) >= 0);
    }
    assert_true(done[0].request_id == a && done[0].status == CR_ERR_TIMEOUT);
    cr_client_close(c);
    fake_close(&f);
}

static void test_batch_encoding_and_count_check(void **unused) {
    (void)unused;
    struct fake f;
    fake_open(&f);
    cr_client *c = connect_to(&f, 5000);
    const char *keys[] = {"a", "b"};
    struct cr_status_list st;
    assert_int_equal(cr_client_batch_exist_key(c, NULL, keys, 0, &st), CR_ERR_INVALID_PARAMS);
    const char *bad[] = {"a", ""};
    assert_int_equal(cr_client_batch_exist_key(c, NULL, bad, 2, &st), CR_ERR_INVALID_PARAMS);
    assert_non_null(strstr(cr_client_last_error(c), "key #1"));
    struct script s = {.fake = &f, .count = 1, .mode = 3};
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, serve, &s), 0);
    /* Two keys asked, one status answered: refused, nothing half-filled. */
    assert_int_equal(cr_client_batch_exist_key(c, "t9", keys, 2, &st), CR_ERR_PROTOCOL);
    pthread_join(thread, NULL);
    assert_int_equal(st.count, 0);
    assert_null(st.statuses);
    assert_int_equal(s.seen.method, CR_METHOD_BATCH_EXIST_KEY);
    Crescent__Master__BatchExistKeyRequest *req =
        crescent__master__batch_exist_key_request__unpack(NULL, s.seen.body_len, s.seen.body);
    assert_non_null(req);
    assert_int_equal(req->n_keys, 2);
    assert_string_equal(req->keys[1], "b");
    assert_string_equal(req->tenant_id, "t9");
    crescent__master__batch_exist_key_request__free_unpacked(req, NULL);
    cr_client_close(c);
    fake_close(&f);
}

static void test_shared_context_outlives_its_clients(void **unused) {
    (void)unused;
    struct fake f;
    fake_open(&f);
    void *shared = zmq_ctx_new();
    assert_non_null(shared);
    struct cr_client_options options = {.timeout_ms = 5000, .zmq_context = shared};
    cr_client *a, *b;
    assert_int_equal(cr_client_open(f.endpoint, &options, &a, NULL, 0), CR_OK);
    assert_int_equal(cr_client_open(f.endpoint, &options, &b, NULL, 0), CR_OK);
    cr_client_close(a); /* must not terminate the shared context */
    uint64_t id;
    assert_int_equal(cr_client_submit_ping(b, &id), CR_OK);
    struct request r;
    assert_true(fake_recv(&f, &r));
    fake_reply(&f, &r, r.id, CR_OK, "\x08\x00", 2);
    struct cr_completion done;
    assert_int_equal(cr_client_poll(b, &done, 1, 2000), 1);
    assert_true(done.request_id == id && done.status == CR_OK);
    cr_client_close(b);
    assert_int_equal(zmq_ctx_term(shared), 0); /* returns: no socket left open */
    fake_close(&f);
}

static void test_open_rejects_bad_arguments(void **unused) {
    (void)unused;
    cr_client *c = (cr_client *)1;
    char error[128];
    assert_int_equal(cr_client_open("", NULL, &c, error, sizeof(error)), CR_ERR_INVALID_PARAMS);
    assert_null(c);
    assert_int_equal(cr_client_open("nonsense", NULL, &c, error, sizeof(error)),
                     CR_ERR_INVALID_PARAMS);
    assert_non_null(strstr(error, "nonsense"));
    struct cr_client_options bad = {.timeout_ms = -5};
    assert_int_equal(cr_client_open("tcp://127.0.0.1:1", &bad, &c, error, sizeof(error)),
                     CR_ERR_INVALID_PARAMS);
    assert_int_equal(cr_client_open("tcp://127.0.0.1:1", NULL, &c, NULL, 0), CR_OK);
    uint8_t a[16], b[16];
    cr_client_get_id(c, a);
    assert_int_equal(a[6] >> 4, 4); /* a random v4 UUID */
    cr_client *d;
    assert_int_equal(cr_client_open("tcp://127.0.0.1:1", NULL, &d, NULL, 0), CR_OK);
    cr_client_get_id(d, b);
    assert_memory_not_equal(a, b, 16);
    assert_int_equal(cr_client_set_timeout(c, 0), CR_ERR_INVALID_PARAMS);
    cr_client_close(c);
    cr_client_close(d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scan_reads_status_and_field2),
        cmocka_unit_test(test_scan_rejects_malformed),
        cmocka_unit_test(test_envelope_and_ids),
        cmocka_unit_test(test_uuid_text),
        cmocka_unit_test(test_argument_checks),
        cmocka_unit_test(test_descriptors_cover_every_method),
        cmocka_unit_test(test_replicas_deep_copy),
        cmocka_unit_test(test_blocking_call_frames_and_reply),
        cmocka_unit_test(test_three_frame_replies_understood),
        cmocka_unit_test(test_refusal_reason_reaches_the_caller),
        cmocka_unit_test(test_transport_error_and_validation),
        cmocka_unit_test(test_timeout_then_late_reply_dropped),
        cmocka_unit_test(test_pipelined_out_of_order),
        cmocka_unit_test(test_unanswered_pipelined_request_times_out_once),
        cmocka_unit_test(test_batch_encoding_and_count_check),
        cmocka_unit_test(test_shared_context_outlives_its_clients),
        cmocka_unit_test(test_open_rejects_bad_arguments),
    };
    return cmocka_run_group_tests_name("client", tests, NULL, NULL);
}
