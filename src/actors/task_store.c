/* The store's side of copy/move tasks (see task_store.h). */
#include "actors/task_store.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpc/rpc_caps.h"
#include "rpc/rpc_codec.h"
#include "crescent/error.h"

bool cr_task_method_creates(uint16_t method) {
    return method == CRESCENT__MASTER__METHOD__CREATE_COPY_TASK ||
           method == CRESCENT__MASTER__METHOD__CREATE_MOVE_TASK;
}

bool cr_task_method_for_tasks(uint16_t method) {
    return method == CRESCENT__MASTER__METHOD__QUERY_TASK ||
           method == CRESCENT__MASTER__METHOD__FETCH_TASKS ||
           method == CRESCENT__MASTER__METHOD__MARK_TASK_TO_COMPLETE;
}

bool cr_task_ping_wants_tasks(const struct cr_master_call *call) {
    assert(call != NULL);
    if (call->method != CRESCENT__MASTER__METHOD__PING || call->request == NULL) return false;
    const Crescent__Master__PingRequest *req = (const void *)call->request;
    return req->has_max_tasks && req->max_tasks > 0;
}

void cr_task_call_refuse(struct cr_master_call *call, int status, const char *why) {
    assert(call != NULL && cr_task_method_creates(call->method) && status != CR_OK);
    const ProtobufCMessageDescriptor *d =
        call->method == CRESCENT__MASTER__METHOD__CREATE_COPY_TASK
            ? &crescent__master__create_copy_task_response__descriptor
            : &crescent__master__create_move_task_response__descriptor;
    cr_master_call_reply_free(call);
    if (cr_rpc_pack_status(d, status, why, &call->reply, &call->reply_len) == CR_OK) {
        call->status = CR_OK;
        return;
    }
    cr_rpc_reply_nomem(call);
}

_Static_assert(sizeof(((struct cr_task_replica *)0)->cap) == CR_CAP_BYTES, "task capability");

/* Copies a replica into the task, with its capability (`mode` on the
 * range, until the task's timeout) when its segment has a key. */
static void replica_copy(const cr_store *store, const struct cr_store_replica_desc *d,
                         uint8_t mode, struct cr_task_replica *out) {
    snprintf(out->segment, sizeof(out->segment), "%s", d->segment_name);
    snprintf(out->endpoint, sizeof(out->endpoint), "%s", d->endpoint);
    out->buffer = d->buffer;
    out->size = d->size;
    struct cr_store_replica_desc signed_desc = *d;
    cr_rpc_caps_sign_one(&signed_desc, mode,
                         cr_rpc_caps_now_ms() + cr_store_get_config(store)->task_timeout_ms);
    out->has_cap = signed_desc.has_cap;
    memcpy(out->cap, signed_desc.cap, sizeof(out->cap));
}

struct cr_task_detail *cr_task_detail_new(const cr_store *store, enum cr_task_type type,
                                          const struct cr_store_key *key,
                                          const struct cr_store_task_reservation *res) {
    struct cr_task_detail *d = calloc(1, sizeof(*d) + key->key_len + 1);
    if (d == NULL) return NULL;
    d->type = type;
    snprintf(d->tenant, sizeof(d->tenant), "%s",
             key->tenant != NULL && key->tenant[0] != '\0' ? key->tenant : "default");
    d->ref = res->ref;
    d->release_source = type == CR_TASK_MOVE;
    d->executor = res->source_owner;
    replica_copy(store, &res->source, CR_CAP_READ, &d->source);
    d->target_count = res->targets.count;
    for (uint32_t i = 0; i < res->targets.count; i++)
        replica_copy(store, &res->targets.replicas[i], CR_CAP_WRITE, &d->targets[i]);
    d->has_checksum = res->has_checksum;
    d->checksum = res->checksum;
    d->key_len = key->key_len;
    memcpy(d->key, key->key, key->key_len);
    return d;
}

int cr_task_store_create(cr_store *store, uint64_t now_ms, struct cr_master_call *call,
                         struct cr_task_detail **out) {
    assert(store != NULL && call != NULL && out != NULL && cr_task_method_creates(call->method));
    bool copy = call->method == CRESCENT__MASTER__METHOD__CREATE_COPY_TASK;
    const Crescent__Master__CreateCopyTaskRequest *c = (const void *)call->request;
    const Crescent__Master__CreateMoveTaskRequest *m = (const void *)call->request;
    const char *tenant = copy ? c->tenant_id : m->tenant_id;
    const char *key_text = copy ? c->key : m->key;
    const char *source = copy ? c->source : m->source;
    const char *const *targets = copy ? (const char *const *)c->targets
                                      : (const char *const *)&m->target;
    uint32_t n = copy ? (uint32_t)c->n_targets : 1u; /* validated: at most 7 */
    struct cr_store_key key;
    cr_store_key_make(tenant, key_text, (uint32_t)strlen(key_text), &key);
    cr_store_clear_error(store);
    struct cr_store_task_reservation res;
    int rc = cr_store_task_reserve(store, &key, source, targets, n, now_ms, &res);
    if (rc != CR_OK) {
        cr_task_call_refuse(call, rc, cr_store_last_error(store));
        return rc;
    }
    *out = cr_task_detail_new(store, copy ? CR_TASK_COPY : CR_TASK_MOVE, &key, &res);
    if (*out == NULL) {
        cr_store_task_rollback(store, &res.ref);
        cr_task_call_refuse(call, CR_ERR_NOMEM, "out of memory recording the task");
        return CR_ERR_NOMEM;
    }
    return CR_OK;
}

int cr_task_store_create_move(cr_store *store, uint64_t now_ms, const struct cr_store_key *key,
                              const char *source, const char *target,
                              struct cr_task_detail **out) {
    assert(store != NULL && key != NULL && source != NULL && target != NULL && out != NULL);
    cr_store_clear_error(store);
    struct cr_store_task_reservation res;
    int rc = cr_store_task_reserve(store, key, source, &target, 1, now_ms, &res);
    if (rc != CR_OK) return rc;
    *out = cr_task_detail_new(store, CR_TASK_MOVE, key, &res);
    if (*out != NULL) return CR_OK;
    cr_store_task_rollback(store, &res.ref);
    return CR_ERR_NOMEM;
}

/* A check: the verdict, and when the task moved, its new source, executor
 * and targets for the tasks actor to hand out. */
static void run_check(cr_store *store, uint64_t now_ms, struct cr_task_op *op) {
    struct cr_store_task_recheck found;
    op->status = cr_store_task_recheck(store, &op->ref, &op->executor, now_ms, &found);
    op->source_lost = found.source_lost;
    op->executor_known = found.executor_known;
    op->moved = found.moved;
    if (!found.moved) return;
    op->executor = found.res.source_owner;
    replica_copy(store, &found.res.source, CR_CAP_READ, &op->source);
    for (uint32_t i = 0; i < found.res.targets.count; i++)
        replica_copy(store, &found.res.targets.replicas[i], CR_CAP_WRITE, &op->targets[i]);
}

/* An OFFLOAD task's op (store_offload.h): no targets, never moved. */
static void run_offload_op(cr_store *store, uint64_t now_ms, struct cr_task_op *op) {
    switch (op->kind) {
    case CR_TASK_OP_COMMIT:
        op->status = cr_store_offload_commit(store, &op->ref, op->ssd_position, now_ms);
        break;
    case CR_TASK_OP_ROLLBACK:
        cr_store_offload_rollback(store, &op->ref);
        op->status = CR_OK;
        break;
    case CR_TASK_OP_CHECK:
        op->status = cr_store_offload_check(store, &op->ref, &op->executor, &op->executor_known);
        op->source_lost = op->status != CR_OK;
        break;
    case CR_TASK_OP_RELEASE: op->status = CR_OK; break; /* an offload has no source to release */
    }
}

/* A promotion's op (store_promote.h): one target, never moved (the SSD
 * copy is its executor's own). */
static void run_promote_op(cr_store *store, uint64_t now_ms, struct cr_task_op *op) {
    switch (op->kind) {
    case CR_TASK_OP_COMMIT: op->status = cr_store_promote_commit(store, &op->ref, now_ms); break;
    case CR_TASK_OP_ROLLBACK:
        cr_store_promote_rollback(store, &op->ref);
        op->status = CR_OK;
        break;
    case CR_TASK_OP_CHECK:
        op->status = cr_store_promote_check(store, &op->ref, &op->executor, &op->executor_known);
        op->source_lost = op->status != CR_OK;
        break;
    case CR_TASK_OP_RELEASE: op->status = CR_OK; break; /* the SSD copy stays */
    }
}

void cr_task_store_run_op(cr_store *store, uint64_t now_ms, struct cr_task_op *op) {
    assert(store != NULL && op != NULL);
    cr_store_clear_error(store);
    op->lease_deadline_ms = 0;
    if (op->offload || op->promote) {
        (op->offload ? run_offload_op : run_promote_op)(store, now_ms, op);
        snprintf(op->message, sizeof(op->message), "%s", cr_store_last_error(store));
        return;
    }
    switch (op->kind) {
    case CR_TASK_OP_COMMIT:
        op->status = cr_store_task_commit(store, &op->ref, op->release_source, now_ms,
                                          &op->lease_deadline_ms);
        break;
    case CR_TASK_OP_ROLLBACK:
        cr_store_task_rollback(store, &op->ref);
        op->status = CR_OK;
        break;
    case CR_TASK_OP_RELEASE:
        op->status = cr_store_task_release_source(store, &op->ref, now_ms, &op->lease_deadline_ms);
        break;
    case CR_TASK_OP_CHECK: run_check(store, now_ms, op); break;
    }
    snprintf(op->message, sizeof(op->message), "%s", cr_store_last_error(store));
}
