/* libcrescent: copy/move tasks (see include/crescent/client.h). */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client_internal.h"

#define FETCH_MAX 256u
#define COPY_TARGETS_MAX 7u

const char *cr_client_task_type_name(enum cr_client_task_type type) {
    return type == CR_CLIENT_TASK_MOVE      ? "REPLICA_MOVE"
           : type == CR_CLIENT_TASK_OFFLOAD ? "REPLICA_OFFLOAD"
                                            : "REPLICA_COPY";
}

const char *cr_client_task_status_name(enum cr_client_task_status status) {
    switch (status) {
    case CR_CLIENT_TASK_PENDING: return "PENDING";
    case CR_CLIENT_TASK_PROCESSING: return "PROCESSING";
    case CR_CLIENT_TASK_SUCCESS: return "SUCCESS";
    case CR_CLIENT_TASK_FAILED: return "FAILED";
    }
    return "UNKNOWN";
}

/* Both create responses: status_code, task_id. */
static int take_task_id(cr_client *c, ProtobufCMessage *msg, uint8_t task_id[CR_CLIENT_ID_BYTES]) {
    const Crescent__Master__CreateCopyTaskResponse *r = (const void *)msg;
    int rc = r->task_id != NULL ? CR_OK
                                : cr_client_fail(c, CR_ERR_PROTOCOL, "reply carries no task id");
    if (rc == CR_OK) cr_client_uuid_from_pb(r->task_id, task_id);
    protobuf_c_message_free_unpacked(msg, NULL);
    return rc;
}

int cr_client_create_copy_task(cr_client *c, const char *tenant, const char *key,
                               const char *source, const char *const *targets, size_t count,
                               uint8_t task_id[CR_CLIENT_ID_BYTES]) {
    assert(c != NULL && task_id != NULL);
    int rc = cr_client_check_tenant(c, &tenant);
    if (rc == CR_OK) rc = cr_client_require_key(c, key);
    if (rc == CR_OK && (count == 0 || count > COPY_TARGETS_MAX || targets == NULL))
        rc = cr_client_fail(c, CR_ERR_INVALID_PARAMS, "a copy names 1 to %u targets, not %zu",
                            COPY_TARGETS_MAX, count);
    for (size_t i = 0; rc == CR_OK && i < count; i++)
        rc = cr_client_require_name(c, targets[i], "target segment name");
    if (rc == CR_OK && source != NULL) rc = cr_client_require_name(c, source, "source segment name");
    if (rc != CR_OK) return rc;
    Crescent__Master__CreateCopyTaskRequest req = CRESCENT__MASTER__CREATE_COPY_TASK_REQUEST__INIT;
    req.key = (char *)key;
    req.tenant_id = (char *)tenant;
    req.n_targets = count;
    req.targets = (char **)targets;
    req.source = (char *)source;
    ProtobufCMessage *msg;
    rc = cr_client_call(c, CR_METHOD_CREATE_COPY_TASK, &req.base, &msg);
    return rc == CR_OK ? take_task_id(c, msg, task_id) : rc;
}

int cr_client_create_move_task(cr_client *c, const char *tenant, const char *key,
                               const char *source, const char *target,
                               uint8_t task_id[CR_CLIENT_ID_BYTES]) {
    assert(c != NULL && task_id != NULL);
    int rc = cr_client_check_tenant(c, &tenant);
    if (rc == CR_OK) rc = cr_client_require_key(c, key);
    if (rc == CR_OK) rc = cr_client_require_name(c, source, "source segment name");
    if (rc == CR_OK) rc = cr_client_require_name(c, target, "target segment name");
    if (rc != CR_OK) return rc;
    Crescent__Master__CreateMoveTaskRequest req = CRESCENT__MASTER__CREATE_MOVE_TASK_REQUEST__INIT;
    req.key = (char *)key;
    req.tenant_id = (char *)tenant;
    req.source = (char *)source;
    req.target = (char *)target;
    ProtobufCMessage *msg;
    rc = cr_client_call(c, CR_METHOD_CREATE_MOVE_TASK, &req.base, &msg);
    return rc == CR_OK ? take_task_id(c, msg, task_id) : rc;
}

int cr_client_query_task(cr_client *c, const uint8_t task_id[CR_CLIENT_ID_BYTES],
                         struct cr_task_info *out) {
    assert(c != NULL && task_id != NULL && out != NULL);
    memset(out, 0, sizeof(*out));
    Crescent__Master__UUID id;
    cr_client_uuid_to_pb(task_id, &id);
    Crescent__Master__QueryTaskRequest req = CRESCENT__MASTER__QUERY_TASK_REQUEST__INIT;
    req.task_id = &id;
    ProtobufCMessage *msg;
    int rc = cr_client_call(c, CR_METHOD_QUERY_TASK, &req.base, &msg);
    if (rc != CR_OK) return rc;
    const Crescent__Master__QueryTaskResponse *r = (const void *)msg;
    memcpy(out->id, task_id, CR_CLIENT_ID_BYTES);
    out->type = (enum cr_client_task_type)r->type;
    out->status = (enum cr_client_task_status)r->status;
    out->created_at_ms_epoch = r->created_at_ms_epoch;
    out->last_updated_at_ms_epoch = r->last_updated_at_ms_epoch;
    if (r->assigned_client != NULL) cr_client_uuid_from_pb(r->assigned_client, out->assigned_client);
    snprintf(out->message, sizeof(out->message), "%s", r->message != NULL ? r->message : "");
    protobuf_c_message_free_unpacked(msg, NULL);
    return CR_OK;
}

static void handle_free(struct cr_buf_handle *h) {
    free(h->segment_name);
    free(h->transport_endpoint);
}

void cr_client_task_assignments_free(struct cr_task_assignments *list) {
    if (list == NULL) return;
    for (size_t i = 0; i < list->count; i++) {
        struct cr_task_assignment *a = &list->tasks[i];
        free(a->tenant);
        free(a->key);
        handle_free(&a->source);
        for (size_t t = 0; t < a->target_count; t++) handle_free(&a->targets[t]);
        free(a->targets);
    }
    free(list->tasks);
    memset(list, 0, sizeof(*list));
}

static bool handle_copy(const Crescent__Master__BufHandle *in, struct cr_buf_handle *out) {
    out->segment_name = strdup(in->segment_name != NULL ? in->segment_name : "");
    out->transport_endpoint = strdup(in->transport_endpoint != NULL ? in->transport_endpoint : "");
    out->size_bytes = in->size;
    out->buffer = in->buffer;
    out->status = (enum cr_buf_status)in->status;
    out->has_capability = in->has_capability && in->capability.len == CR_CLIENT_CAPABILITY_BYTES;
    if (out->has_capability) memcpy(out->capability, in->capability.data, CR_CLIENT_CAPABILITY_BYTES);
    return out->segment_name != NULL && out->transport_endpoint != NULL;
}

/* Deep-copies one assignment; false on out of memory (what was taken is
 * freed with the list). */
static bool assignment_copy(const Crescent__Master__TaskAssignment *in,
                            struct cr_task_assignment *out) {
    cr_client_uuid_from_pb(in->task_id, out->id);
    out->type = (enum cr_client_task_type)in->type;
    out->tenant = strdup(in->tenant_id != NULL ? in->tenant_id : CR_CLIENT_DEFAULT_TENANT);
    out->key = strdup(in->key);
    out->deadline_in_ms = in->deadline_in_ms;
    out->has_checksum = in->has_checksum_xxh3;
    out->checksum_xxh3 = in->checksum_xxh3;
    bool ok = out->tenant != NULL && out->key != NULL && handle_copy(in->source, &out->source);
    out->targets = calloc(in->n_targets > 0 ? in->n_targets : 1, sizeof(*out->targets));
    if (!ok || out->targets == NULL) return false;
    for (size_t t = 0; t < in->n_targets; t++) {
        out->target_count = t + 1;
        if (!handle_copy(in->targets[t], &out->targets[t])) return false;
    }
    return true;
}

/* Deep-copies a response's tasks into *out; frees the response. */
static int copy_assignments(cr_client *c, ProtobufCMessage *msg,
                            Crescent__Master__TaskAssignment *const *tasks, size_t n,
                            struct cr_task_assignments *out) {
    out->tasks = calloc(n > 0 ? n : 1, sizeof(*out->tasks));
    bool ok = out->tasks != NULL;
    for (size_t i = 0; ok && i < n; i++) {
        out->count = i + 1;
        ok = assignment_copy(tasks[i], &out->tasks[i]);
    }
    protobuf_c_message_free_unpacked(msg, NULL);
    if (ok) return CR_OK;
    cr_client_task_assignments_free(out);
    return cr_client_fail(c, CR_ERR_NOMEM, "out of memory copying the tasks");
}

/* Checks `max` and clears *out before a call that hands tasks out. */
static int tasks_begin(cr_client *c, uint32_t max, struct cr_task_assignments *out) {
    assert(c != NULL && out != NULL);
    memset(out, 0, sizeof(*out));
    if (max == 0 || max > FETCH_MAX)
        return cr_client_fail(c, CR_ERR_INVALID_PARAMS, "take 1 to %u tasks, not %u", FETCH_MAX,
                              max);
    return CR_OK;
}

int cr_client_fetch_tasks(cr_client *c, uint32_t max, struct cr_task_assignments *out) {
    ProtobufCMessage *msg;
    Crescent__Master__UUID id;
    Crescent__Master__FetchTasksRequest req = CRESCENT__MASTER__FETCH_TASKS_REQUEST__INIT;
    int rc = tasks_begin(c, max, out);
    if (rc != CR_OK) return rc;
    cr_client_uuid_to_pb(c->id, &id);
    req.client_id = &id, req.has_max_tasks = 1, req.max_tasks = max;
    cr_client_secret_to_pb(c, &req.has_client_secret, &req.client_secret);
    if ((rc = cr_client_call(c, CR_METHOD_FETCH_TASKS, &req.base, &msg)) != CR_OK) return rc;
    const Crescent__Master__FetchTasksResponse *r = (const void *)msg;
    return copy_assignments(c, msg, r->tasks, r->n_tasks, out);
}

int cr_client_heartbeat_tasks(cr_client *c, uint32_t max, uint64_t *ttl_ms, bool *known,
                              struct cr_task_assignments *out) {
    int rc = tasks_begin(c, max, out);
    if (rc != CR_OK) return rc;
    Crescent__Master__UUID id;
    cr_client_uuid_to_pb(c->id, &id);
    Crescent__Master__PingRequest req = CRESCENT__MASTER__PING_REQUEST__INIT;
    req.client_id = &id;
    req.has_max_tasks = 1;
    req.max_tasks = max;
    cr_client_secret_to_pb(c, &req.has_client_secret, &req.client_secret);
    struct cr_client_read_report reads;
    cr_client_read_report_attach(c, &reads, &req);
    ProtobufCMessage *msg;
    rc = cr_client_call(c, CR_METHOD_PING, &req.base, &msg);
    if (rc != CR_OK) return rc;
    const Crescent__Master__PingResponse *r = (const void *)msg;
    if (r->status_code == CR_OK) cr_client_read_report_sent(c, &reads);
    cr_client_secret_take(c, r->has_client_secret, r->client_secret);
    if (ttl_ms != NULL) *ttl_ms = r->has_client_ttl_ms ? r->client_ttl_ms : 0;
    /* A master that does not say is taken to know us (as cr_client_heartbeat). */
    if (known != NULL) *known = !r->has_client_known || r->client_known;
    return copy_assignments(c, msg, r->tasks, r->n_tasks, out);
}

static int mark(cr_client *c, const uint8_t task_id[CR_CLIENT_ID_BYTES], bool success,
                const char *message, bool has_position, uint64_t position) {
    assert(c != NULL && task_id != NULL);
    Crescent__Master__UUID id, client;
    cr_client_uuid_to_pb(task_id, &id);
    cr_client_uuid_to_pb(c->id, &client);
    Crescent__Master__MarkTaskToCompleteRequest req =
        CRESCENT__MASTER__MARK_TASK_TO_COMPLETE_REQUEST__INIT;
    req.client_id = &client;
    req.task_id = &id;
    req.status = success ? CRESCENT__MASTER__TASK_STATUS__SUCCESS
                         : CRESCENT__MASTER__TASK_STATUS__FAILED;
    req.message = (char *)message;
    req.has_position = has_position;
    req.position = position;
    cr_client_secret_to_pb(c, &req.has_client_secret, &req.client_secret);
    ProtobufCMessage *msg;
    int rc = cr_client_call(c, CR_METHOD_MARK_TASK_TO_COMPLETE, &req.base, &msg);
    if (rc == CR_OK) protobuf_c_message_free_unpacked(msg, NULL);
    return rc;
}

int cr_client_mark_task_to_complete(cr_client *c, const uint8_t task_id[CR_CLIENT_ID_BYTES],
                                    bool success, const char *message) {
    return mark(c, task_id, success, message, false, 0);
}

int cr_client_mark_task_offloaded(cr_client *c, const uint8_t task_id[CR_CLIENT_ID_BYTES],
                                  uint64_t position) {
    return mark(c, task_id, true, NULL, true, position);
}
