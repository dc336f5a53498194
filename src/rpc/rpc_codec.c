/* Method table, request validation and response packing (see rpc_codec.h). */
#include "rpc/rpc_codec.h"
#include "msgs/pb_wire.h"
#include "msgs/rpc_frame.h"

#include <assert.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/read_latency.h"
#include "crescent/error.h"

#define M(ID, METRIC, REQ, RESP)                                                                   \
    {                                                                                              \
        .id = CRESCENT__MASTER__METHOD__##ID, .name = METRIC,                                      \
        .metric = "requests_" METRIC "_total",                                                     \
        .request = &crescent__master__##REQ##_request__descriptor,                                 \
        .response = &crescent__master__##RESP##_response__descriptor                               \
    }

static const struct cr_rpc_method methods[] = {
    M(GET_VERSION, "get_version", get_version, get_version),
    M(PING, "ping", ping, ping),
    M(MOUNT_SEGMENT, "mount_segment", mount_segment, mount_segment),
    M(REMOUNT_SEGMENT, "remount_segment", mount_segment, mount_segment),
    M(UNMOUNT_SEGMENT, "unmount_segment", unmount_segment, unmount_segment),
    M(PUT_START, "put_start", put_start, put_start),
    M(PUT_END, "put_end", put_end, put_end),
    M(PUT_REVOKE, "put_revoke", put_revoke, put_revoke),
    M(BATCH_PUT_START, "batch_put_start", batch_put_start, batch_put_start),
    M(BATCH_PUT_END, "batch_put_end", batch_put_end, batch_put_end),
    M(BATCH_PUT_REVOKE, "batch_put_revoke", batch_put_revoke, batch_put_revoke),
    M(EXIST_KEY, "exist_key", exist_key, exist_key),
    M(BATCH_EXIST_KEY, "batch_exist_key", batch_exist_key, batch_exist_key),
    M(GET_REPLICA_LIST, "get_replica_list", get_replica_list, get_replica_list),
    M(BATCH_GET_REPLICA_LIST, "batch_get_replica_list", batch_get_replica_list,
      batch_get_replica_list),
    M(GET_REPLICA_LIST_BY_REGEX, "get_replica_list_by_regex", get_replica_list_by_regex,
      get_replica_list_by_regex),
    M(REMOVE, "remove", remove, remove),
    M(BATCH_REMOVE, "batch_remove", batch_remove, batch_remove),
    M(REMOVE_BY_REGEX, "remove_by_regex", remove_by_regex, remove_by_regex),
    M(REMOVE_ALL, "remove_all", remove_all, remove_all),
    M(BATCH_QUERY_IP, "batch_query_ip", batch_query_ip, batch_query_ip),
    M(BATCH_REPLICA_CLEAR, "batch_replica_clear", batch_replica_clear, batch_replica_clear),
    M(CREATE_COPY_TASK, "create_copy_task", create_copy_task, create_copy_task),
    M(CREATE_MOVE_TASK, "create_move_task", create_move_task, create_move_task),
    M(QUERY_TASK, "query_task", query_task, query_task),
    M(FETCH_TASKS, "fetch_tasks", fetch_tasks, fetch_tasks),
    M(MARK_TASK_TO_COMPLETE, "mark_task_to_complete", mark_task_to_complete,
      mark_task_to_complete),
    M(DISK_REPLICA_REPORT, "disk_replica_report", disk_replica_report, disk_replica_report),
    M(LOCAL_DISK_REPORT, "local_disk_report", local_disk_report, local_disk_report),
};
#undef M

const struct cr_rpc_method *cr_rpc_method_find(uint16_t id) {
    /* 29 entries: a linear scan is a few compares, cheaper than keeping a
     * second table in sync. */
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
        if (methods[i].id == id) return &methods[i];
    return NULL;
}

const struct cr_rpc_method *cr_rpc_methods(size_t *count) {
    *count = sizeof(methods) / sizeof(methods[0]);
    return methods;
}

/* ------------------------------------------------------------------------ */
/* Wire pre-scan */

/* cr_pb_read_varint over a pointer pair. */
static bool read_varint(const uint8_t **p, const uint8_t *end, uint64_t *out) {
    size_t pos = 0;
    bool ok = cr_pb_read_varint(*p, (size_t)(end - *p), &pos, out);
    *p += pos;
    return ok;
}

/* What one request may make protobuf-c allocate, across all its levels. */
struct prescan {
    uint32_t max_repeat;
    uint32_t unknown_left; /* unknown fields still allowed */
    uint32_t allocs_left;  /* fields that allocate still allowed */
    const char *why;       /* the reason of a refusal */
};

static bool refuse(struct prescan *ps, const char *why) {
    ps->why = why;
    return false;
}

/* Walks one message's wire bytes with its descriptor, without allocating:
 * every field (by descriptor index, whatever its number) at most max_repeat
 * times (a body of millions of tiny entries is refused before protobuf-c
 * allocates memory for each: 62 MiB of empty keys cost 2.3 GB), unknown
 * fields at most CR_RPC_UNKNOWN_FIELDS_MAX in the whole request and the
 * fields that allocate (strings, bytes, sub-messages, repeated entries,
 * unknown fields) at most CR_RPC_ALLOCS_MAX (protobuf-c keeps each unknown
 * field as an allocation of its own: 16 MiB of `80 01 00` took 490 MB), no
 * NUL byte inside a string (protobuf-c keeps strings NUL-terminated and drops
 * their length, so "k\0one" and "k\0two" would both become the key "k"),
 * sub-messages checked the same way. */
static bool prescan_message(const ProtobufCMessageDescriptor *desc, const uint8_t *p,
                            const uint8_t *end, struct prescan *ps, int depth) {
    enum { FIELDS_TRACKED = 32, DEPTH_MAX = 8 };
    uint32_t counts[FIELDS_TRACKED] = {0};
    assert(desc->n_fields <= FIELDS_TRACKED);
    if (depth > DEPTH_MAX) return refuse(ps, "messages nest deeper than 8 levels");
    while (p < end) {
        uint64_t tag, len = 0;
        if (!read_varint(&p, end, &tag)) return refuse(ps, "a field tag is cut short");
        switch (tag & 7) {
        case 0:
            if (!read_varint(&p, end, &len)) return refuse(ps, "a varint is cut short");
            len = 0;
            break;
        case 1: len = 8; break;
        case 2:
            if (!read_varint(&p, end, &len)) return refuse(ps, "a length is cut short");
            break;
        case 5: len = 4; break;
        default: return refuse(ps, "a field has a wire type master.proto does not use");
        }
        if (len > (uint64_t)(end - p)) return refuse(ps, "a field runs past the body");
        const uint8_t *value = p;
        p += len;
        uint64_t number = tag >> 3;
        const ProtobufCFieldDescriptor *field =
            number <= UINT32_MAX ? protobuf_c_message_descriptor_get_field(desc, (unsigned)number)
                                 : NULL;
        if (field == NULL) {
            if (ps->unknown_left == 0 || ps->allocs_left == 0)
                return refuse(ps, "more than " CR_RPC_STR(CR_RPC_UNKNOWN_FIELDS_MAX)
                                  " fields unknown to master.proto");
            ps->unknown_left--;
            ps->allocs_left--;
            continue;
        }
        uint32_t seen = ++counts[field - desc->fields];
        if (seen > ps->max_repeat) return refuse(ps, "a field repeats more than 4096 times (the batch bound)");
        /* A repeated scalar's entries share one array; every string and
         * sub-message is an allocation of its own. */
        bool allocates = field->type == PROTOBUF_C_TYPE_STRING ||
                         field->type == PROTOBUF_C_TYPE_BYTES ||
                         field->type == PROTOBUF_C_TYPE_MESSAGE ||
                         (field->label == PROTOBUF_C_LABEL_REPEATED && seen == 1);
        if (allocates && ps->allocs_left-- == 0)
            return refuse(ps, "more than " CR_RPC_STR(CR_RPC_ALLOCS_MAX)
                              " strings, entries and messages in one request");
        if ((tag & 7) != 2) continue;
        if (field->type == PROTOBUF_C_TYPE_STRING && memchr(value, 0, len) != NULL)
            return refuse(ps, "a string has a NUL byte");
        if (field->type == PROTOBUF_C_TYPE_MESSAGE &&
            !prescan_message(field->descriptor, value, value + len, ps, depth + 1))
            return false;
    }
    return true;
}

const char *cr_rpc_prescan(const ProtobufCMessageDescriptor *desc, const uint8_t *body,
                           size_t len, uint32_t max_repeat) {
    assert(desc != NULL && (body != NULL || len == 0));
    struct prescan ps = {.max_repeat = max_repeat,
                         .unknown_left = CR_RPC_UNKNOWN_FIELDS_MAX,
                         .allocs_left = CR_RPC_ALLOCS_MAX};
    if (prescan_message(desc, body, body + len, &ps, 0)) return NULL;
    assert(ps.why != NULL);
    return ps.why;
}

/* ------------------------------------------------------------------------ */
/* Validation */

static int fail(char err[CR_RPC_ERROR_MAX], const char *fmt, const char *what, size_t index) {
    snprintf(err, CR_RPC_ERROR_MAX, fmt, what, index);
    return CR_ERR_INVALID_PARAMS;
}

/* A Ping's read latency report (core/read_latency.h): each entry whole, at
 * most one per tier. */
static int check_read_latency(const Crescent__Master__PingRequest *r,
                              char err[CR_RPC_ERROR_MAX]) {
    if (r->n_read_latency > CR_READ_LATENCY_TIERS)
        return fail(err, "%s: %zu entries, at most one per tier (3)", "read_latency",
                    r->n_read_latency);
    unsigned seen = 0;
    for (size_t i = 0; i < r->n_read_latency; i++) {
        const Crescent__Master__PingRequest__ReadLatency *e = r->read_latency[i];
        if (cr_read_latency_check(e->tier, e->count, e->buckets, e->n_buckets, err,
                                  CR_RPC_ERROR_MAX) != 0)
            return CR_ERR_INVALID_PARAMS;
        if (seen & (1u << e->tier))
            return fail(err, "%s: tier %zu twice", "read_latency", e->tier);
        seen |= 1u << e->tier;
    }
    return CR_OK;
}

static int check_key(const char *key, size_t index, char err[CR_RPC_ERROR_MAX]) {
    size_t len = key != NULL ? strlen(key) : 0;
    if (len == 0) return fail(err, "%s %zu is empty", "key", index);
    if (len > CR_STORE_KEY_LEN_MAX)
        return fail(err, "%s %zu is longer than 4096 bytes", "key", index);
    return CR_OK;
}

static int check_keys(char **keys, size_t n, char err[CR_RPC_ERROR_MAX]) {
    if (n > CR_MASTER_BATCH_MAX) return fail(err, "%s: %zu entries, more than 4096", "batch", n);
    for (size_t i = 0; i < n; i++) {
        int rc = check_key(keys[i], i, err);
        if (rc != CR_OK) return rc;
    }
    return CR_OK;
}

static int check_tenant(const char *tenant, char err[CR_RPC_ERROR_MAX]) {
    if (tenant != NULL && strlen(tenant) > CR_MASTER_TENANT_MAX)
        return fail(err, "%s is longer than 23 bytes%.0zu", "tenant_id", 0);
    return CR_OK;
}

static int check_client(const void *client_id, char err[CR_RPC_ERROR_MAX]) {
    if (client_id == NULL) return fail(err, "%s is required by this method%.0zu", "client_id", 0);
    return CR_OK;
}

static int check_put_start(const Crescent__Master__PutStartRequest *r, size_t index,
                           char err[CR_RPC_ERROR_MAX]) {
    int rc = check_key(r->key, index, err);
    if (rc == CR_OK) rc = check_tenant(r->tenant_id, err);
    if (rc == CR_OK) rc = check_client(r->client_id, err);
    if (rc != CR_OK) return rc;
    if (r->value_length < 0) /* 0 is an empty object */
        return fail(err, "%s of put %zu must not be negative", "value_length", index);
    uint64_t replicas = r->config->replica_num;
    if (replicas == 0 || replicas > CR_STORE_REPLICAS_MAX)
        return fail(err, "%s of put %zu must be 1 to 8", "replica_num", index);
    /* The store's own static checks, repeated here so that no entry of a
     * batch can be refused by the store after earlier entries were applied. */
    if (r->config->preferred_segment != NULL &&
        strlen(r->config->preferred_segment) >= CR_STORE_NAME_LEN_MAX)
        return fail(err, "%s of put %zu is longer than 255 bytes", "preferred_segment", index);
    const Crescent__Master__BlockInfo *b = r->block;
    if (b == NULL) return CR_OK;
    if (b->n_token_ids > CR_RPC_TOKEN_IDS_MAX)
        return fail(err, "%s of put %zu: more than 65536 token ids", "block", index);
    const char *names[] = {b->model_name, b->block_hash, b->parent_block_hash};
    for (size_t i = 0; i < 3; i++) {
        if (names[i] != NULL && strlen(names[i]) >= CR_STORE_NAME_LEN_MAX)
            return fail(err, "%s of put %zu: a name or hash longer than 255 bytes", "block", index);
    }
    return CR_OK;
}

/* Batches of puts, ends and revokes: every entry checked before any applies. */
static int check_put_batch(uint16_t method, const ProtobufCMessage *req,
                           char err[CR_RPC_ERROR_MAX]) {
    size_t n;
    void **items;
    if (method == CRESCENT__MASTER__METHOD__BATCH_PUT_START) {
        const Crescent__Master__BatchPutStartRequest *r = (const void *)req;
        n = r->n_requests, items = (void **)r->requests;
    } else if (method == CRESCENT__MASTER__METHOD__BATCH_PUT_END) {
        const Crescent__Master__BatchPutEndRequest *r = (const void *)req;
        n = r->n_requests, items = (void **)r->requests;
    } else {
        const Crescent__Master__BatchPutRevokeRequest *r = (const void *)req;
        n = r->n_requests, items = (void **)r->requests;
    }
    if (n > CR_MASTER_BATCH_MAX) return fail(err, "%s: %zu entries, more than 4096", "batch", n);
    for (size_t i = 0; i < n; i++) {
        int rc;
        if (method == CRESCENT__MASTER__METHOD__BATCH_PUT_START) {
            rc = check_put_start(items[i], i, err);
        } else {
            /* PutEndRequest and PutRevokeRequest have the same layout. */
            const Crescent__Master__PutEndRequest *e = items[i];
            rc = check_key(e->key, i, err);
            if (rc == CR_OK) rc = check_tenant(e->tenant_id, err);
            if (rc == CR_OK) rc = check_client(e->client_id, err);
        }
        if (rc != CR_OK) return rc;
    }
    return CR_OK;
}

/* Requests whose fields 1 and 2 are a key and a tenant (ExistKey, Get,
 * Remove, PutEnd, PutRevoke). */
static int check_key_tenant(const ProtobufCMessage *req, char err[CR_RPC_ERROR_MAX]) {
    const Crescent__Master__ExistKeyRequest *r = (const void *)req;
    int rc = check_key(r->key, 0, err);
    return rc == CR_OK ? check_tenant(r->tenant_id, err) : rc;
}

/* Requests whose fields are repeated keys then a tenant. */
static int check_keys_tenant(const ProtobufCMessage *req, char err[CR_RPC_ERROR_MAX]) {
    const Crescent__Master__BatchExistKeyRequest *r = (const void *)req;
    int rc = check_keys(r->keys, r->n_keys, err);
    return rc == CR_OK ? check_tenant(r->tenant_id, err) : rc;
}

static int check_mount(const Crescent__Master__MountSegmentRequest *r, char err[CR_RPC_ERROR_MAX]) {
    int rc = check_client(r->client_id, err);
    if (rc != CR_OK) return rc;
    size_t len = strlen(r->segment_name);
    if (len == 0 || len >= CR_STORE_NAME_LEN_MAX)
        return fail(err, "%s must be 1 to 255 bytes%.0zu", "segment_name", 0);
    if (r->size == 0) return fail(err, "%s must be positive%.0zu", "size", 0);
    return CR_OK;
}

/* A segment name of a task request: 1 to 255 bytes. */
static int check_segment_name(const char *name, const char *what, char err[CR_RPC_ERROR_MAX]) {
    size_t len = name != NULL ? strlen(name) : 0;
    if (len == 0 || len >= CR_STORE_NAME_LEN_MAX)
        return fail(err, "%s must be a segment name of 1 to 255 bytes%.0zu", what, 0);
    return CR_OK;
}

/* CreateCopyTask: 1 to 7 distinct targets, none the source (the store
 * checks mounts and replicas; these are the request's own contradictions). */
static int check_copy_task(const Crescent__Master__CreateCopyTaskRequest *r,
                           char err[CR_RPC_ERROR_MAX]) {
    int rc = check_key(r->key, 0, err);
    if (rc == CR_OK) rc = check_tenant(r->tenant_id, err);
    if (rc != CR_OK) return rc;
    if (r->n_targets == 0 || r->n_targets >= CR_STORE_REPLICAS_MAX)
        return fail(err, "%s: %zu given, 1 to 7 allowed", "targets", r->n_targets);
    if (r->source != NULL && r->source[0] != '\0') {
        rc = check_segment_name(r->source, "source", err);
        if (rc != CR_OK) return rc;
    }
    for (size_t i = 0; i < r->n_targets; i++) {
        rc = check_segment_name(r->targets[i], "every target", err);
        if (rc != CR_OK) return rc;
        if (r->source != NULL && strcmp(r->targets[i], r->source) == 0)
            return fail(err, "%s %zu is the source segment", "target", i);
        for (size_t j = 0; j < i; j++)
            if (strcmp(r->targets[i], r->targets[j]) == 0)
                return fail(err, "%s %zu names the same segment as an earlier one", "target", i);
    }
    return CR_OK;
}

static int check_move_task(const Crescent__Master__CreateMoveTaskRequest *r,
                           char err[CR_RPC_ERROR_MAX]) {
    int rc = check_key(r->key, 0, err);
    if (rc == CR_OK) rc = check_tenant(r->tenant_id, err);
    if (rc == CR_OK) rc = check_segment_name(r->source, "source", err);
    if (rc == CR_OK) rc = check_segment_name(r->target, "target", err);
    if (rc == CR_OK && strcmp(r->source, r->target) == 0)
        return fail(err, "%s equals the source segment%.0zu", "target", 0);
    return rc;
}

static int check_task_report(const Crescent__Master__MarkTaskToCompleteRequest *r,
                             char err[CR_RPC_ERROR_MAX]) {
    if (r->status != CRESCENT__MASTER__TASK_STATUS__SUCCESS &&
        r->status != CRESCENT__MASTER__TASK_STATUS__FAILED)
        return fail(err, "%s must be SUCCESS or FAILED%.0zu", "status", 0);
    if (r->message != NULL && strlen(r->message) > CR_STORE_KEY_LEN_MAX)
        return fail(err, "%s is longer than 4096 bytes%.0zu", "message", 0);
    return CR_OK;
}

int cr_rpc_validate(uint16_t method, const ProtobufCMessage *req, char err[CR_RPC_ERROR_MAX]) {
    assert(req != NULL && err != NULL);
    err[0] = '\0';
    switch (method) {
    case CRESCENT__MASTER__METHOD__MOUNT_SEGMENT:
    case CRESCENT__MASTER__METHOD__REMOUNT_SEGMENT: return check_mount((const void *)req, err);
    case CRESCENT__MASTER__METHOD__UNMOUNT_SEGMENT:
        return check_client(((const Crescent__Master__UnmountSegmentRequest *)req)->client_id, err);
    case CRESCENT__MASTER__METHOD__PUT_START: return check_put_start((const void *)req, 0, err);
    case CRESCENT__MASTER__METHOD__PUT_END:
    case CRESCENT__MASTER__METHOD__PUT_REVOKE: {
        int rc = check_key_tenant(req, err);
        return rc == CR_OK
                   ? check_client(((const Crescent__Master__PutEndRequest *)req)->client_id, err)
                   : rc;
    }
    case CRESCENT__MASTER__METHOD__BATCH_PUT_START:
    case CRESCENT__MASTER__METHOD__BATCH_PUT_END:
    case CRESCENT__MASTER__METHOD__BATCH_PUT_REVOKE: return check_put_batch(method, req, err);
    case CRESCENT__MASTER__METHOD__EXIST_KEY:
    case CRESCENT__MASTER__METHOD__GET_REPLICA_LIST:
    case CRESCENT__MASTER__METHOD__REMOVE: return check_key_tenant(req, err);
    case CRESCENT__MASTER__METHOD__BATCH_EXIST_KEY:
    case CRESCENT__MASTER__METHOD__BATCH_GET_REPLICA_LIST:
    case CRESCENT__MASTER__METHOD__BATCH_REMOVE: return check_keys_tenant(req, err);
    case CRESCENT__MASTER__METHOD__GET_REPLICA_LIST_BY_REGEX:
    case CRESCENT__MASTER__METHOD__REMOVE_BY_REGEX: {
        /* Both requests share the layout: key_regex, tenant_id. */
        const Crescent__Master__RemoveByRegexRequest *r = (const void *)req;
        if (strlen(r->key_regex) > CR_STORE_KEY_LEN_MAX)
            return fail(err, "%s is longer than 4096 bytes%.0zu", "key_regex", 0);
        return check_tenant(r->tenant_id, err);
    }
    case CRESCENT__MASTER__METHOD__REMOVE_ALL:
        return check_tenant(((const Crescent__Master__RemoveAllRequest *)req)->tenant_id, err);
    case CRESCENT__MASTER__METHOD__BATCH_QUERY_IP: {
        size_t n = ((const Crescent__Master__BatchQueryIpRequest *)req)->n_client_ids;
        return n > CR_MASTER_BATCH_MAX ? fail(err, "%s: %zu ids, more than 4096", "batch", n)
                                       : CR_OK;
    }
    case CRESCENT__MASTER__METHOD__BATCH_REPLICA_CLEAR: {
        const Crescent__Master__BatchReplicaClearRequest *r = (const void *)req;
        int rc = check_keys(r->object_keys, r->n_object_keys, err);
        return rc == CR_OK ? check_tenant(r->tenant_id, err) : rc;
    }
    case CRESCENT__MASTER__METHOD__CREATE_COPY_TASK: return check_copy_task((const void *)req, err);
    case CRESCENT__MASTER__METHOD__CREATE_MOVE_TASK: return check_move_task((const void *)req, err);
    case CRESCENT__MASTER__METHOD__FETCH_TASKS: {
        const Crescent__Master__FetchTasksRequest *r = (const void *)req;
        if (r->has_max_tasks && (r->max_tasks == 0 || r->max_tasks > 256))
            return fail(err, "%s must be 1 to 256%.0zu", "max_tasks", 0);
        return CR_OK;
    }
    case CRESCENT__MASTER__METHOD__PING: {
        const Crescent__Master__PingRequest *r = (const void *)req;
        if (r->has_max_tasks && r->max_tasks > 256)
            return fail(err, "%s must be 0 to 256%.0zu", "max_tasks", 0);
        return check_read_latency(r, err);
    }
    case CRESCENT__MASTER__METHOD__MARK_TASK_TO_COMPLETE:
        return check_task_report((const void *)req, err);
    case CRESCENT__MASTER__METHOD__DISK_REPLICA_REPORT: {
        const Crescent__Master__DiskReplicaReportRequest *r = (const void *)req;
        if (r->n_entries > CR_MASTER_BATCH_MAX)
            return fail(err, "%s: %zu entries, more than 4096", "batch", r->n_entries);
        for (size_t i = 0; i < r->n_entries; i++) {
            int rc = check_key(r->entries[i]->key, i, err);
            if (rc == CR_OK) rc = check_tenant(r->entries[i]->tenant_id, err);
            if (rc != CR_OK) return rc;
        }
        return CR_OK;
    }
    case CRESCENT__MASTER__METHOD__LOCAL_DISK_REPORT: {
        const Crescent__Master__LocalDiskReportRequest *r = (const void *)req;
        if (r->n_entries > CR_MASTER_BATCH_MAX)
            return fail(err, "%s: %zu entries, more than 4096", "batch", r->n_entries);
        if (r->segment_name[0] == '\0' || strlen(r->segment_name) >= CR_STORE_NAME_LEN_MAX)
            return fail(err, "%s must be 1 to 255 bytes%.0zu", "segment_name", 0);
        for (size_t i = 0; i < r->n_entries; i++) {
            int rc = check_key(r->entries[i]->key, i, err);
            if (rc == CR_OK) rc = check_tenant(r->entries[i]->tenant_id, err);
            if (rc != CR_OK) return rc;
        }
        return CR_OK;
    }
    default: return CR_OK; /* GET_VERSION, QUERY_TASK: required fields suffice */
    }
}

/* ------------------------------------------------------------------------ */
/* Packing */

bool cr_rpc_read_envelope(size_t frames, const uint8_t *const data[3], const size_t size[3],
                          struct cr_rpc_envelope *env) {
    assert(data != NULL && size != NULL && env != NULL);
    *env = (struct cr_rpc_envelope){.one_frame = frames == 1};
    if (env->one_frame) {
        if (size[0] < CR_RPC_REQUEST_HEADER_BYTES) return false;
        env->method = cr_rpc_get_u16(data[0]);
        env->request_id = cr_rpc_get_u64(data[0] + CR_RPC_METHOD_BYTES);
        env->body = data[0] + CR_RPC_REQUEST_HEADER_BYTES;
        env->body_len = size[0] - CR_RPC_REQUEST_HEADER_BYTES;
        return true;
    }
    /* Three frames: read what is readable, for the error reply's id. */
    if (frames >= 1 && size[0] == CR_RPC_METHOD_BYTES) env->method = cr_rpc_get_u16(data[0]);
    if (frames >= 2 && size[1] == CR_RPC_ID_BYTES) env->request_id = cr_rpc_get_u64(data[1]);
    if (frames != CR_RPC_REQUEST_FRAMES || size[0] != CR_RPC_METHOD_BYTES ||
        size[1] != CR_RPC_ID_BYTES)
        return false;
    env->body = data[2];
    env->body_len = size[2];
    return true;
}

int cr_rpc_pack(const ProtobufCMessage *msg, uint8_t **out, size_t *len_out) {
    assert(msg != NULL && out != NULL && len_out != NULL);
    size_t len = protobuf_c_message_get_packed_size(msg);
    uint8_t *buf = malloc(len > 0 ? len : 1);
    if (buf == NULL) return CR_ERR_NOMEM;
    size_t written = protobuf_c_message_pack(msg, buf);
    assert(written == len);
    *out = buf;
    *len_out = written;
    return CR_OK;
}

int cr_rpc_pack_status(const ProtobufCMessageDescriptor *response, int32_t status,
                       const char *message, uint8_t **out, size_t *len_out) {
    assert(response != NULL && response->sizeof_message <= 256);
    /* Every response's field 1 is `required int32 status_code`, and every
     * other field is optional or repeated, so a zeroed message with only
     * status_code (and error_message) set is a valid response of any type. */
    _Alignas(max_align_t) uint8_t storage[256];
    protobuf_c_message_init(response, storage);
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(response, 1);
    assert(f != NULL && f->type == PROTOBUF_C_TYPE_INT32);
    memcpy(storage + f->offset, &status, sizeof(status));
    if (message != NULL && message[0] != '\0')
        cr_rpc_set_error_message((ProtobufCMessage *)storage, message);
    return cr_rpc_pack((const ProtobufCMessage *)storage, out, len_out);
}

void cr_rpc_reply_nomem(struct cr_master_call *call) {
    assert(call != NULL);
    static const char text[] = "out of memory building the response";
    call->status = CR_ERR_NOMEM;
    call->reply = (uint8_t *)strdup(text);
    call->reply_len = call->reply != NULL ? sizeof(text) - 1 : 0;
}

int32_t cr_rpc_status_code(const ProtobufCMessage *resp) {
    assert(resp != NULL);
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field(resp->descriptor, 1);
    assert(f != NULL && f->type == PROTOBUF_C_TYPE_INT32); /* every response's field 1 */
    int32_t code;
    memcpy(&code, (const char *)resp + f->offset, sizeof(code));
    return code;
}

void cr_rpc_set_error_message(ProtobufCMessage *resp, const char *text) {
    assert(resp != NULL && text != NULL);
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field_by_name(resp->descriptor, "error_message");
    assert(f != NULL && f->type == PROTOBUF_C_TYPE_STRING); /* every response has one */
    memcpy((char *)resp + f->offset, &text, sizeof(text));
}

void cr_rpc_uuid_from_pb(const Crescent__Master__UUID *in, struct cr_uuid *out) {
    assert(in != NULL && out != NULL);
    for (int i = 0; i < 8; i++) {
        out->b[i] = (uint8_t)(in->first >> (56 - 8 * i));
        out->b[8 + i] = (uint8_t)(in->second >> (56 - 8 * i));
    }
}

void cr_rpc_uuid_to_pb(const struct cr_uuid *in, Crescent__Master__UUID *out) {
    assert(in != NULL && out != NULL);
    crescent__master__uuid__init(out);
    out->first = out->second = 0;
    for (int i = 0; i < 8; i++) {
        out->first = out->first << 8 | in->b[i];
        out->second = out->second << 8 | in->b[8 + i];
    }
}

void cr_master_call_reply_free(struct cr_master_call *call) {
    assert(call != NULL);
    if (call->reply != call->reply_inline) free(call->reply);
    call->reply = NULL;
    call->reply_len = 0;
}

/* ------------------------------------------------------------------------ */
/* Request arenas (cr_rpc_unpack) */

struct request_chunk {
    struct request_chunk *next;
    size_t used, size;
    _Alignas(max_align_t) uint8_t data[];
};

/* The first chunk's bytes: enough for the unpacked form of most requests
 * (structs and copies of their strings; 32 keys of a batch take about
 * 1 KiB), capped so a 16 MiB body does not reserve 64 MiB up front. */
#define REQUEST_CHUNK_MIN 1024u
#define REQUEST_CHUNK_FIRST_MAX (64u * 1024u)

static void *request_alloc(void *data, size_t size) {
    struct request_chunk **head = data;
    if (size > SIZE_MAX - 2 * sizeof(max_align_t)) return NULL;
    size = (size + _Alignof(max_align_t) - 1) & ~(size_t)(_Alignof(max_align_t) - 1);
    struct request_chunk *c = *head;
    if (c == NULL || c->size - c->used < size) {
        size_t want = c == NULL ? REQUEST_CHUNK_MIN : c->size * 2;
        if (want < size) want = size;
        if (want > SIZE_MAX - sizeof(*c)) return NULL;
        struct request_chunk *n = malloc(sizeof(*n) + want);
        if (n == NULL) return NULL;
        *n = (struct request_chunk){.next = c, .used = 0, .size = want};
        *head = c = n;
    }
    assert(c->size - c->used >= size);
    void *p = c->data + c->used;
    c->used += size;
    return p;
}

static void request_free(void *data, void *p) {
    (void)data, (void)p; /* the arena is freed whole */
}

void *cr_rpc_request_alloc(void **arena, size_t size) {
    assert(arena != NULL);
    return request_alloc(arena, size);
}

void cr_rpc_request_arena_free(void *arena) {
    struct request_chunk *c = arena;
    while (c != NULL) {
        struct request_chunk *next = c->next;
        free(c);
        c = next;
    }
}

ProtobufCMessage *cr_rpc_unpack(const ProtobufCMessageDescriptor *desc, const uint8_t *body,
                                size_t len, void **arena) {
    assert(desc != NULL && arena != NULL && (body != NULL || len == 0));
    struct request_chunk *head = NULL;
    /* A first chunk sized from the body (the unpacked form is mostly its
     * strings plus a struct per field group), so most requests need one. */
    size_t first = len < REQUEST_CHUNK_FIRST_MAX / 4 ? 4 * len : REQUEST_CHUNK_FIRST_MAX;
    if (first > REQUEST_CHUNK_MIN) {
        head = malloc(sizeof(*head) + first);
        if (head == NULL) {
            *arena = NULL;
            return NULL;
        }
        *head = (struct request_chunk){.next = NULL, .used = 0, .size = first};
    }
    ProtobufCAllocator allocator = {
        .alloc = request_alloc, .free = request_free, .allocator_data = &head};
    ProtobufCMessage *msg = protobuf_c_message_unpack(desc, &allocator, len, body);
    if (msg == NULL) {
        cr_rpc_request_arena_free(head);
        head = NULL;
    }
    *arena = head;
    return msg;
}

void cr_master_call_free(struct cr_master_call *call) {
    if (call == NULL) return;
    if (call->request_arena != NULL)
        cr_rpc_request_arena_free(call->request_arena);
    else if (call->request != NULL)
        protobuf_c_message_free_unpacked(call->request, NULL);
    cr_master_call_reply_free(call);
    free(call);
}

void cr_master_call_free_chain(struct cr_master_call *head) {
    while (head != NULL) {
        struct cr_master_call *next = head->next;
        cr_master_call_free(head);
        head = next;
    }
}

bool cr_rpc_needs_admin(uint16_t method, const ProtobufCMessage *request) {
    switch (method) {
    case CRESCENT__MASTER__METHOD__REMOVE_ALL:
    case CRESCENT__MASTER__METHOD__REMOVE_BY_REGEX:
    case CRESCENT__MASTER__METHOD__BATCH_REPLICA_CLEAR:
    case CRESCENT__MASTER__METHOD__BATCH_QUERY_IP: return true;
    case CRESCENT__MASTER__METHOD__REMOVE:
        return ((const Crescent__Master__RemoveRequest *)(const void *)request)->force;
    case CRESCENT__MASTER__METHOD__BATCH_REMOVE:
        return ((const Crescent__Master__BatchRemoveRequest *)(const void *)request)->force;
    default: return false;
    }
}
