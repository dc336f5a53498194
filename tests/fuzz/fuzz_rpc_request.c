/* libFuzzer target for the store-master RPC gateway's request path
 * (src/rpc/rpc.c's check_frames + decode, src/rpc/rpc_codec.c), and
 * the methods that run what it accepts (src/rpc/rpc_methods.c) on a real
 * store, with no sockets.
 *
 * Input: byte 0 picks the frame layout (msgs/rpc_frame.h), the rest is the
 * frames:
 *   bits 7, 6 clear: three frames [method][request id][body], 2-byte method,
 *                    8-byte id;
 *   bit 7 clear, bit 6 set: one frame, the whole rest ([method|id|body]);
 *   bit 7 set:   three frames with method length = bits 0-1, id length =
 *                bits 2-5, and with bit 6 set the body frame is missing.
 * The envelope is read by the gateway's own cr_rpc_read_envelope.
 *
 * Invariants checked besides "no crash":
 *  - a refused request gets an error code (PROTOCOL for frames or a body
 *    protobuf cannot decode, INVALID_PARAMS for an unknown method or an
 *    out-of-range value) and, from cr_rpc_validate, a non-empty sentence;
 *    the status-only response it is then answered with decodes as the
 *    method's response type with that status_code;
 *  - an accepted request satisfies every bound cr_rpc_validate documents,
 *    checked independently by walking the message's descriptor: keys 1..4096
 *    bytes, tenants at most 23, batches at most 4096, value_length > 0,
 *    replica_num 1..8, client ids where required, segment names 1..255, a
 *    Ping's read latency report whole (one entry per tier, 20 buckets adding
 *    up to its count), and the master's sums of those reports stay whole;
 *  - the pre-scan bounds what protobuf-c allocates: an accepted request
 *    holds at most CR_RPC_UNKNOWN_FIELDS_MAX unknown fields over all its
 *    levels (protobuf-c keeps each as an allocation of its own);
 *  - running an accepted request on the store gives a reply that decodes as
 *    the method's response, whose status_code is what the method returned
 *    (batches: the reply decodes; their code is per entry).
 * Build and run instructions are in tests/fuzz/README.md. */
#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "rpc/rpc_codec.h"
#include "rpc/rpc_methods.h"
#include "actors/task_store.h"
#include "core/read_latency.h"
#include "core/store.h"
#include "fuzz_store.h"
#include "crescent/error.h"
#include "master.pb-c.h"
#include "msgs/master_msgs.h"
#include "msgs/rpc_frame.h"

static cr_store *store;
static struct cr_rpc_arena *arena;
static uint64_t inputs, now_ms = 1000;

/* ---- independent check of the documented bounds ---- */

static const void *field_at(const ProtobufCMessage *m, size_t offset) {
    return (const char *)m + offset;
}

static bool is(const ProtobufCMessage *m, const ProtobufCMessageDescriptor *d) {
    return m->descriptor == d;
}

static bool needs_client(const ProtobufCMessage *m) {
    return is(m, &crescent__master__mount_segment_request__descriptor) ||
           is(m, &crescent__master__unmount_segment_request__descriptor) ||
           is(m, &crescent__master__put_start_request__descriptor) ||
           is(m, &crescent__master__put_end_request__descriptor) ||
           is(m, &crescent__master__put_revoke_request__descriptor) ||
           is(m, &crescent__master__ping_request__descriptor);
}

static void check_key(const char *key) {
    size_t len = key != NULL ? strlen(key) : 0;
    if (len == 0 || len > CR_STORE_KEY_LEN_MAX) abort();
}

static void check_bounds(const ProtobufCMessage *m);

/* A Ping's read latency report, restated from core/read_latency.h: at most
 * one entry per tier, 20 buckets that add up to count, count <= 2^40. */
static void check_read_latency(const Crescent__Master__PingRequest *r) {
    if (r->n_read_latency > 3) abort();
    unsigned seen = 0;
    for (size_t i = 0; i < r->n_read_latency; i++) {
        const Crescent__Master__PingRequest__ReadLatency *e = r->read_latency[i];
        if (e->tier >= 3 || (seen & (1u << e->tier)) || e->n_buckets != CR_HISTOGRAM_BUCKETS ||
            e->count > CR_READ_LATENCY_REPORT_MAX)
            abort();
        seen |= 1u << e->tier;
        unsigned __int128 total = 0;
        for (size_t b = 0; b < e->n_buckets; b++) total += e->buckets[b];
        if (total != e->count) abort();
    }
}

static void check_field(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f) {
    const char *name = f->name;
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
        size_t n = *(const size_t *)field_at(m, f->quantifier_offset);
        void *const *items = *(void *const *const *)field_at(m, f->offset);
        bool batch = strcmp(name, "keys") == 0 || strcmp(name, "object_keys") == 0 ||
                     strcmp(name, "requests") == 0 || strcmp(name, "client_ids") == 0;
        if (batch && n > CR_MASTER_BATCH_MAX) abort();
        for (size_t i = 0; i < n && f->type == PROTOBUF_C_TYPE_STRING && batch; i++)
            check_key(items[i]);
        for (size_t i = 0; i < n && f->type == PROTOBUF_C_TYPE_MESSAGE; i++)
            check_bounds(items[i]);
        return;
    }
    const void *p = field_at(m, f->offset);
    if (f->type == PROTOBUF_C_TYPE_STRING) {
        const char *s = *(const char *const *)p;
        if (strcmp(name, "key") == 0) check_key(s);
        if (strcmp(name, "tenant_id") == 0 && s != NULL && strlen(s) > CR_MASTER_TENANT_MAX)
            abort();
        if (strcmp(name, "segment_name") == 0 &&
            is(m, &crescent__master__mount_segment_request__descriptor) &&
            (s == NULL || s[0] == '\0' || strlen(s) >= CR_STORE_NAME_LEN_MAX))
            abort();
    } else if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
        const ProtobufCMessage *sub = *(const ProtobufCMessage *const *)p;
        if (strcmp(name, "client_id") == 0 && sub == NULL && needs_client(m)) abort();
        if (strcmp(name, "block") == 0 && sub != NULL &&
            ((const Crescent__Master__BlockInfo *)sub)->n_token_ids > (1u << 20))
            abort();
        if (sub != NULL) check_bounds(sub);
    } else if (strcmp(name, "value_length") == 0 && *(const int64_t *)p < 0) {
        abort();
    } else if (strcmp(name, "replica_num") == 0 &&
               (*(const uint64_t *)p == 0 || *(const uint64_t *)p > CR_STORE_REPLICAS_MAX)) {
        abort();
    }
}

static void check_bounds(const ProtobufCMessage *m) {
    const ProtobufCMessageDescriptor *d = m->descriptor;
    if (is(m, &crescent__master__ping_request__descriptor)) check_read_latency((const void *)m);
    for (unsigned i = 0; i < d->n_fields; i++) check_field(m, &d->fields[i]);
}

/* ---- the responses a request is answered with ---- */

static int32_t status_code_of(const ProtobufCMessageDescriptor *response, const uint8_t *body,
                              size_t len) {
    ProtobufCMessage *r = protobuf_c_message_unpack(response, NULL, len, body);
    if (r == NULL) abort(); /* a reply the client cannot decode */
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(response, 1);
    int32_t code = *(const int32_t *)field_at(r, f->offset);
    protobuf_c_message_free_unpacked(r, NULL);
    return code;
}

static void refused_with_status(const struct cr_rpc_method *m, const char *err) {
    uint8_t *body;
    size_t len;
    if (cr_rpc_pack_status(m->response, CR_ERR_INVALID_PARAMS, err, &body, &len) != CR_OK) abort();
    if (status_code_of(m->response, body, len) != CR_ERR_INVALID_PARAMS) abort();
    free(body);
}

static void run_on_store(const struct cr_rpc_method *m, ProtobufCMessage *request,
                         void *request_arena) {
    fuzz_store_refresh(&store, &arena, inputs);
    struct cr_master_call *call = calloc(1, sizeof(*call));
    if (call == NULL) abort();
    call->method = m->id;
    call->request = request;
    call->request_arena = request_arena;
    static struct cr_read_latency_sums reads; /* Ping's reports add up here */
    struct cr_rpc_run run = {.store = store, .arena = arena, .now_ms = now_ms += 37,
                             .client_ttl_ms = 10000, .reads = &reads};
    int code = cr_rpc_methods_run(&run, call);
    /* A batch returns its first failing entry's code, which its response
     * carries per entry rather than in status_code. */
    bool batch = strncmp(m->metric, "requests_batch_", 15) == 0;
    if (call->status == CR_OK && call->reply == NULL) {
        /* FetchTasks/MarkTaskToComplete whose secret passed: tasks answers */
        if (!cr_rpc_methods_task_gated(m->id) || code != CR_OK) abort();
    } else if (call->status == CR_OK) {
        int32_t replied = status_code_of(m->response, call->reply, call->reply_len);
        if (!batch && replied != code) abort();
    } else if (call->status != CR_ERR_NOMEM || call->reply_len == 0) {
        abort();
    }
    cr_master_call_free(call); /* frees the request too */
    for (uint32_t t = 0; t < CR_READ_LATENCY_TIERS; t++) { /* sums stay whole */
        const struct cr_histogram *h = &reads.tiers[t];
        unsigned __int128 total = 0;
        for (uint32_t b = 0; b < CR_HISTOGRAM_BUCKETS; b++) total += h->buckets[b];
        if (h->count < UINT64_MAX && total != h->count) abort();
    }
}

/* ---- the gateway's path ---- */

/* What the envelope reader must have found, restated from rpc_frame.h. */
static void check_envelope(const uint8_t *frames[3], const size_t lens[3], size_t count, bool ok,
                           const struct cr_rpc_envelope *env) {
    if (env->one_frame != (count == 1)) abort();
    bool want = count == 1 ? lens[0] >= CR_RPC_REQUEST_HEADER_BYTES
                           : count == 3 && lens[0] == 2 && lens[1] == 8;
    if (ok != want) abort();
    if (!ok) return;
    const uint8_t *body = count == 1 ? frames[0] + CR_RPC_REQUEST_HEADER_BYTES : frames[2];
    size_t body_len = count == 1 ? lens[0] - CR_RPC_REQUEST_HEADER_BYTES : lens[2];
    if (env->body != body || env->body_len != body_len ||
        env->method != cr_rpc_get_u16(frames[0]) ||
        env->request_id != cr_rpc_get_u64(count == 1 ? frames[0] + 2 : frames[1]))
        abort();
}

/* Unknown fields kept by protobuf-c in msg and every sub-message. */
static size_t unknown_fields(const ProtobufCMessage *msg) {
    size_t n = msg->n_unknown_fields;
    const ProtobufCMessageDescriptor *d = msg->descriptor;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->type != PROTOBUF_C_TYPE_MESSAGE) continue;
        const void *at = field_at(msg, f->offset);
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t count = *(const size_t *)field_at(msg, f->quantifier_offset);
            ProtobufCMessage *const *items = *(ProtobufCMessage *const *const *)at;
            for (size_t j = 0; j < count; j++) n += unknown_fields(items[j]);
        } else if (*(ProtobufCMessage *const *)at != NULL) {
            n += unknown_fields(*(ProtobufCMessage *const *)at);
        }
    }
    return n;
}

static int handle(const uint8_t *frames[3], const size_t lens[3], size_t count) {
    struct cr_rpc_envelope env;
    bool ok = cr_rpc_read_envelope(count, frames, lens, &env);
    check_envelope(frames, lens, count, ok, &env);
    if (!ok || env.body_len > CR_RPC_BODY_MAX) return CR_ERR_PROTOCOL;
    uint16_t method = env.method;
    const struct cr_rpc_method *m = cr_rpc_method_find(method);
    if (m == NULL) return CR_ERR_INVALID_PARAMS;
    if (m->id != method || m->request == NULL || m->response == NULL) abort();
    /* As the gateway: the allocation-free pre-scan, then the unpack into
     * the request's arena. */
    if (cr_rpc_prescan(m->request, env.body, env.body_len, CR_MASTER_BATCH_MAX) != NULL)
        return CR_ERR_PROTOCOL;
    void *req_arena = NULL;
    ProtobufCMessage *req = cr_rpc_unpack(m->request, env.body, env.body_len, &req_arena);
    if (req == NULL) {
        if (req_arena != NULL) abort(); /* nothing is kept of a failed unpack */
        /* protobuf-c's own unpack agrees that the body does not decode */
        ProtobufCMessage *plain =
            protobuf_c_message_unpack(m->request, NULL, env.body_len, env.body);
        if (plain != NULL) abort();
        return CR_ERR_PROTOCOL;
    }
    if (unknown_fields(req) > CR_RPC_UNKNOWN_FIELDS_MAX) abort();
    char err[CR_RPC_ERROR_MAX];
    memset(err, 'x', sizeof(err));
    int rc = cr_rpc_validate(method, req, err);
    if (rc != CR_OK) {
        if (rc != CR_ERR_INVALID_PARAMS || err[0] == '\0' ||
            strnlen(err, sizeof(err)) == sizeof(err))
            abort();
        refused_with_status(m, err);
        cr_rpc_request_arena_free(req_arena);
        return rc;
    }
    check_bounds(req);
    /* Copy/move task calls are run by task_store.c and the tasks actor, not
     * by cr_rpc_methods_run (whose assertion they tripped). */
    if (cr_task_method_creates(method) ||
        (cr_task_method_for_tasks(method) && !cr_rpc_methods_task_gated(method))) {
        cr_rpc_request_arena_free(req_arena);
        return CR_OK;
    }
    run_on_store(m, req, req_arena);
    return CR_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    inputs++;
    size_t lens[3] = {CR_RPC_METHOD_BYTES, CR_RPC_ID_BYTES, 0}, count = 3;
    if (data[0] & 0x80) {
        lens[0] = data[0] & 3u;
        lens[1] = (data[0] >> 2) & 15u;
        if (data[0] & 0x40) count = 2;
    } else if (data[0] & 0x40) {
        count = 1;
        lens[0] = size - 1;
        lens[1] = 0;
    }
    const uint8_t *p = data + 1, *end = data + size;
    const uint8_t *frames[3];
    uint8_t *copies[3] = {NULL, NULL, NULL};
    for (size_t i = 0; i < 3; i++) {
        size_t left = (size_t)(end - p);
        if (i == 2) lens[2] = count == 3 ? left : 0;
        if (lens[i] > left) lens[i] = left;
        /* Each frame in its own exactly sized buffer, as ZMQ hands them over. */
        copies[i] = malloc(lens[i] > 0 ? lens[i] : 1);
        if (copies[i] == NULL) abort();
        memcpy(copies[i], p, lens[i]);
        frames[i] = copies[i];
        p += lens[i];
    }
    int rc = handle(frames, lens, count);
    if (rc != CR_OK && rc != CR_ERR_PROTOCOL && rc != CR_ERR_INVALID_PARAMS) abort();
    for (size_t i = 0; i < 3; i++) free(copies[i]);
    return 0;
}

/* ---- seed corpus: the requests of the unit and integration tests (one per
 * method, valid and refused), written when CR_FUZZ_SEEDS is set ---- */

static void write_raw_seed(const char *dir, uint16_t method, const uint8_t *body, size_t len) {
    static unsigned n;
    char path[4096];
    snprintf(path, sizeof(path), "%s/seed-%03u", dir, n++);
    FILE *f = fopen(path, "wb");
    if (f != NULL) {
        uint8_t head[1 + CR_RPC_METHOD_BYTES + CR_RPC_ID_BYTES] = {0};
        cr_rpc_put_u16(head + 1, method);
        cr_rpc_put_u64(head + 3, 42);
        fwrite(head, 1, sizeof(head), f);
        fwrite(body, 1, len, f);
        fclose(f);
    }
}

static void write_seed(const char *dir, const ProtobufCMessage *msg, uint16_t method) {
    uint8_t *body;
    size_t len;
    if (cr_rpc_pack(msg, &body, &len) != CR_OK) abort();
    write_raw_seed(dir, method, body, len);
    free(body);
}

/* Unknown fields: a GetVersion with exactly the bound of them and one more,
 * and an ExistKey whose known fields are followed by unknown ones of every
 * wire type (field 16 varint, 17 fixed64, 18 bytes, 19 fixed32). */
static void seeds_unknown(const char *dir) {
    uint8_t body[3 * (CR_RPC_UNKNOWN_FIELDS_MAX + 1)];
    for (size_t i = 0; i <= CR_RPC_UNKNOWN_FIELDS_MAX; i++)
        body[3 * i] = 0x80, body[3 * i + 1] = 0x01, body[3 * i + 2] = 0x00;
    write_raw_seed(dir, CRESCENT__MASTER__METHOD__GET_VERSION, body,
                   3 * CR_RPC_UNKNOWN_FIELDS_MAX);
    write_raw_seed(dir, CRESCENT__MASTER__METHOD__GET_VERSION, body, sizeof(body));
    static const uint8_t exist[] = {0x0a, 0x02, 'k', '1', 0x12, 0x01, 't',  0x80, 0x01, 0x05,
                                    0x89, 0x01, 1,    2,   3,   4,    5,    6,    7,    8,
                                    0x92, 0x01, 0x02, 'x', 'y', 0x9d, 0x01, 1,    2,    3,
                                    4};
    write_raw_seed(dir, CRESCENT__MASTER__METHOD__EXIST_KEY, exist, sizeof(exist));
}

static void seeds_puts(const char *dir, Crescent__Master__UUID *client) {
    Crescent__Master__ReplicateConfig cfg = CRESCENT__MASTER__REPLICATE_CONFIG__INIT;
    cfg.has_replica_num = 1, cfg.replica_num = 2;
    uint32_t tokens[] = {1, 2, 3, 4};
    Crescent__Master__BlockInfo block = CRESCENT__MASTER__BLOCK_INFO__INIT;
    block.model_name = "llama", block.has_block_size = 1, block.block_size = 4;
    block.n_token_ids = 4, block.token_ids = tokens;
    Crescent__Master__PutStartRequest put = CRESCENT__MASTER__PUT_START_REQUEST__INIT;
    put.key = "k1", put.value_length = 4096, put.config = &cfg, put.client_id = client;
    put.block = &block;
    write_seed(dir, &put.base, CRESCENT__MASTER__METHOD__PUT_START);
    Crescent__Master__PutStartRequest *puts[] = {&put, &put};
    Crescent__Master__BatchPutStartRequest batch = CRESCENT__MASTER__BATCH_PUT_START_REQUEST__INIT;
    batch.n_requests = 2, batch.requests = puts;
    write_seed(dir, &batch.base, CRESCENT__MASTER__METHOD__BATCH_PUT_START);
    put.value_length = 0; /* an empty object: accepted */
    write_seed(dir, &put.base, CRESCENT__MASTER__METHOD__PUT_START);
    put.value_length = -1; /* refused */
    write_seed(dir, &put.base, CRESCENT__MASTER__METHOD__PUT_START);
    Crescent__Master__PutEndRequest end = CRESCENT__MASTER__PUT_END_REQUEST__INIT;
    end.key = "k1", end.client_id = client;
    write_seed(dir, &end.base, CRESCENT__MASTER__METHOD__PUT_END);
    write_seed(dir, &end.base, CRESCENT__MASTER__METHOD__PUT_REVOKE);
    Crescent__Master__PutEndRequest *ends[] = {&end};
    Crescent__Master__BatchPutEndRequest bend = CRESCENT__MASTER__BATCH_PUT_END_REQUEST__INIT;
    bend.n_requests = 1, bend.requests = ends;
    write_seed(dir, &bend.base, CRESCENT__MASTER__METHOD__BATCH_PUT_END);
}

/* The calls that carry a client's secret (field 13): right-sized, and one
 * byte short (refused by the store as a wrong secret, never read past). */
static void seeds_secrets(const char *dir, Crescent__Master__UUID *client) {
    static uint8_t secret[16] = {0x5e, 0xc7, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06,
                                 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e};
    for (size_t len = 16; len >= 15; len--) {
        ProtobufCBinaryData bin = {.len = len, .data = secret};
        Crescent__Master__PingRequest ping = CRESCENT__MASTER__PING_REQUEST__INIT;
        ping.client_id = client, ping.has_client_secret = 1, ping.client_secret = bin;
        write_seed(dir, &ping.base, CRESCENT__MASTER__METHOD__PING);
        Crescent__Master__MountSegmentRequest mount = CRESCENT__MASTER__MOUNT_SEGMENT_REQUEST__INIT;
        mount.buffer = 0x10000, mount.size = 1u << 20, mount.segment_name = "seg1";
        mount.client_id = client, mount.has_client_secret = 1, mount.client_secret = bin;
        write_seed(dir, &mount.base, CRESCENT__MASTER__METHOD__MOUNT_SEGMENT);
        Crescent__Master__UnmountSegmentRequest unmount =
            CRESCENT__MASTER__UNMOUNT_SEGMENT_REQUEST__INIT;
        unmount.segment_name = "seg1", unmount.client_id = client;
        unmount.has_client_secret = 1, unmount.client_secret = bin;
        write_seed(dir, &unmount.base, CRESCENT__MASTER__METHOD__UNMOUNT_SEGMENT);
        Crescent__Master__PutEndRequest end = CRESCENT__MASTER__PUT_END_REQUEST__INIT;
        end.key = "k1", end.client_id = client, end.has_client_secret = 1, end.client_secret = bin;
        write_seed(dir, &end.base, CRESCENT__MASTER__METHOD__PUT_END);
        Crescent__Master__PutRevokeRequest rev = CRESCENT__MASTER__PUT_REVOKE_REQUEST__INIT;
        rev.key = "k1", rev.client_id = client, rev.has_client_secret = 1, rev.client_secret = bin;
        write_seed(dir, &rev.base, CRESCENT__MASTER__METHOD__PUT_REVOKE);
        Crescent__Master__PutRevokeRequest *revs[] = {&rev, &rev};
        Crescent__Master__BatchPutRevokeRequest brev =
            CRESCENT__MASTER__BATCH_PUT_REVOKE_REQUEST__INIT;
        brev.n_requests = 2, brev.requests = revs;
        write_seed(dir, &brev.base, CRESCENT__MASTER__METHOD__BATCH_PUT_REVOKE);
    }
}

static void seeds_keys(const char *dir, Crescent__Master__UUID *client) {
    Crescent__Master__ExistKeyRequest exist = CRESCENT__MASTER__EXIST_KEY_REQUEST__INIT;
    exist.key = "k1", exist.tenant_id = "t";
    write_seed(dir, &exist.base, CRESCENT__MASTER__METHOD__EXIST_KEY);
    write_seed(dir, &exist.base, CRESCENT__MASTER__METHOD__GET_REPLICA_LIST);
    write_seed(dir, &exist.base, CRESCENT__MASTER__METHOD__REMOVE);
    char *keys[] = {"k1", "k2", "k3"};
    Crescent__Master__BatchExistKeyRequest bexist = CRESCENT__MASTER__BATCH_EXIST_KEY_REQUEST__INIT;
    bexist.n_keys = 3, bexist.keys = keys;
    write_seed(dir, &bexist.base, CRESCENT__MASTER__METHOD__BATCH_EXIST_KEY);
    write_seed(dir, &bexist.base, CRESCENT__MASTER__METHOD__BATCH_GET_REPLICA_LIST);
    write_seed(dir, &bexist.base, CRESCENT__MASTER__METHOD__BATCH_REMOVE);
    Crescent__Master__RemoveByRegexRequest rx = CRESCENT__MASTER__REMOVE_BY_REGEX_REQUEST__INIT;
    rx.key_regex = "^k[0-9]+$";
    write_seed(dir, &rx.base, CRESCENT__MASTER__METHOD__REMOVE_BY_REGEX);
    write_seed(dir, &rx.base, CRESCENT__MASTER__METHOD__GET_REPLICA_LIST_BY_REGEX);
    Crescent__Master__RemoveAllRequest all = CRESCENT__MASTER__REMOVE_ALL_REQUEST__INIT;
    write_seed(dir, &all.base, CRESCENT__MASTER__METHOD__REMOVE_ALL);
    Crescent__Master__UUID *ids[] = {client};
    Crescent__Master__BatchQueryIpRequest ip = CRESCENT__MASTER__BATCH_QUERY_IP_REQUEST__INIT;
    ip.n_client_ids = 1, ip.client_ids = ids;
    write_seed(dir, &ip.base, CRESCENT__MASTER__METHOD__BATCH_QUERY_IP);
    Crescent__Master__BatchReplicaClearRequest clr =
        CRESCENT__MASTER__BATCH_REPLICA_CLEAR_REQUEST__INIT;
    clr.n_object_keys = 2, clr.object_keys = keys, clr.client_id = client;
    write_seed(dir, &clr.base, CRESCENT__MASTER__METHOD__BATCH_REPLICA_CLEAR);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *dir = getenv("CR_FUZZ_SEEDS");
    if (dir == NULL) return 0;
    mkdir(dir, 0755);
    Crescent__Master__UUID client = CRESCENT__MASTER__UUID__INIT;
    client.first = 1, client.second = 2;
    Crescent__Master__GetVersionRequest ver = CRESCENT__MASTER__GET_VERSION_REQUEST__INIT;
    write_seed(dir, &ver.base, CRESCENT__MASTER__METHOD__GET_VERSION);
    Crescent__Master__PingRequest ping = CRESCENT__MASTER__PING_REQUEST__INIT;
    ping.client_id = &client;
    write_seed(dir, &ping.base, CRESCENT__MASTER__METHOD__PING);
    uint64_t buckets[CR_HISTOGRAM_BUCKETS] = {[0] = 3, [4] = 1, [CR_HISTOGRAM_BOUNDS] = 1};
    Crescent__Master__PingRequest__ReadLatency lat =
        CRESCENT__MASTER__PING_REQUEST__READ_LATENCY__INIT;
    lat.tier = 1, lat.count = 5, lat.sum_ns = 12345678, lat.n_buckets = CR_HISTOGRAM_BUCKETS;
    lat.buckets = buckets;
    Crescent__Master__PingRequest__ReadLatency *lats[] = {&lat};
    ping.n_read_latency = 1, ping.read_latency = lats;
    write_seed(dir, &ping.base, CRESCENT__MASTER__METHOD__PING);
    ping.n_read_latency = 0, ping.read_latency = NULL;
    Crescent__Master__MountSegmentRequest mount = CRESCENT__MASTER__MOUNT_SEGMENT_REQUEST__INIT;
    mount.buffer = 0x10000, mount.size = 64u << 20, mount.segment_name = "seg0";
    mount.client_id = &client, mount.transport_endpoint = "127.0.0.1:7000";
    write_seed(dir, &mount.base, CRESCENT__MASTER__METHOD__MOUNT_SEGMENT);
    write_seed(dir, &mount.base, CRESCENT__MASTER__METHOD__REMOUNT_SEGMENT);
    Crescent__Master__UnmountSegmentRequest unmount =
        CRESCENT__MASTER__UNMOUNT_SEGMENT_REQUEST__INIT;
    unmount.segment_name = "seg0", unmount.client_id = &client;
    write_seed(dir, &unmount.base, CRESCENT__MASTER__METHOD__UNMOUNT_SEGMENT);
    seeds_puts(dir, &client);
    seeds_keys(dir, &client);
    seeds_secrets(dir, &client);
    seeds_unknown(dir);
    return 0;
}
