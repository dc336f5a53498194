/* The store master's intake, shared by every endpoint (see
 * rpc_intake.h): lookup, pre-scan, decode, validation, the admin gate, and
 * the hand-over to the owning actor. */
#include "rpc/rpc_intake.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpc/rpc_batch.h"
#include "rpc/rpc_methods.h"
#include "actors/subsystems.h"
#include "actors/task_store.h"
#include "core/log.h"
#include "crescent/error.h"
#include "msgs/rpc_frame.h"
#include "runtime/stats_extra.h"

bool cr_rpc_intake_init(struct cr_rpc_intake *in, const char *admin_token_file, char *why,
                        size_t why_size) {
    assert(in != NULL && admin_token_file != NULL);
    memset(in, 0, sizeof(*in));
    return cr_admin_token_read(admin_token_file, &in->admin, why, why_size);
}

void cr_rpc_intake_wire(struct cr_rpc_intake *in, const struct cr_subsystems *peers) {
    in->segments = peers->actors[CR_SUBSYSTEM_SEGMENTS];
    in->tasks = peers->actors[CR_SUBSYSTEM_TASKS];
}

void cr_rpc_refusal_text(struct cr_rpc_refusal *out, int32_t status, const char *text) {
    assert(status != CR_OK);
    snprintf(out->text, sizeof(out->text), "%s", text);
    out->status = status;
    out->body = (const uint8_t *)out->text;
    out->len = strlen(out->text);
    out->owned = NULL;
}

void cr_rpc_refusal_free(struct cr_rpc_refusal *out) {
    free(out->owned);
    out->owned = NULL;
}

/* A refusal as the method's response carrying status_code `code`. */
static void refuse_status(struct cr_rpc_refusal *out, const struct cr_rpc_method *m, int32_t code,
                          const char *why) {
    uint8_t *body;
    size_t len;
    if (cr_rpc_pack_status(m->response, code, why, &body, &len) != CR_OK) {
        cr_rpc_refusal_text(out, CR_ERR_NOMEM, "out of memory encoding the response");
        return;
    }
    *out = (struct cr_rpc_refusal){.status = CR_OK, .body = body, .len = len, .owned = body};
}

/* The request's admin_token (field CR_RPC_ADMIN_TOKEN_FIELD), NULL when it
 * has none; found through the descriptor, so every request type that
 * declares the field is read the same way. */
static const char *request_admin_token(const struct cr_master_call *call) {
    if (call->batch != NULL) return call->batch->admin_token;
    const ProtobufCMessage *request = call->request;
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field(request->descriptor, CR_RPC_ADMIN_TOKEN_FIELD);
    if (f == NULL || f->type != PROTOBUF_C_TYPE_STRING || f->label == PROTOBUF_C_LABEL_REPEATED)
        return NULL;
    return *(char *const *)(const void *)((const char *)request + f->offset);
}

/* cr_rpc_needs_admin, for a batch read by hand too. */
static bool needs_admin(const struct cr_master_call *call) {
    if (call->batch != NULL)
        return call->method == CRESCENT__MASTER__METHOD__BATCH_REMOVE && call->batch->force;
    return cr_rpc_needs_admin(call->method, call->request);
}

/* With --admin-token-file: marks calls that carry the token (call->admin)
 * and refuses the destructive ones that do not (cr_rpc_needs_admin).
 * Without it every call passes and none is marked. */
static bool admin_gate(struct cr_rpc_intake *in, const struct cr_rpc_method *m,
                       struct cr_master_call *call, struct cr_rpc_refusal *out) {
    if (in->admin.len == 0) return true;
    const char *given = request_admin_token(call);
    call->admin = given != NULL && cr_admin_token_allows(&in->admin, given, strlen(given));
    if (call->admin || !needs_admin(call)) return true;
    in->admin_refused++;
    char text[CR_RPC_ERROR_MAX];
    snprintf(text, sizeof(text),
             "%s %s: this crescentd runs with --admin-token-file, so %s needs the admin token "
             "in admin_token (libcrescent/crescentctl: CRESCENT_ADMIN_TOKEN or "
             "--admin-token-file)",
             m->name, given != NULL ? "refused: wrong admin token" : "refused: no admin token",
             m->name);
    refuse_status(out, m, CR_ERR_ILLEGAL_CLIENT, text);
    return false;
}

/* Decodes and validates; on failure fills `out` and returns false. */
static bool decode(struct cr_rpc_intake *in, const struct cr_rpc_method *m,
                   struct cr_master_call *call, const uint8_t *body, size_t len,
                   struct cr_rpc_refusal *out) {
    call->request = NULL;
    /* A batch in the forms clients send is read by hand, validated as it
     * is read; anything else, refusals included, goes the general way. */
    if (cr_rpc_batch_method(call->method) &&
        cr_rpc_batch_decode(call->method, body, len, &call->request_arena, &call->batch))
        return admin_gate(in, m, call, out);
    const char *why = cr_rpc_prescan(m->request, body, len, CR_MASTER_BATCH_MAX);
    if (why == NULL) {
        call->request = cr_rpc_unpack(m->request, body, len, &call->request_arena);
        why = "a required field is missing or a value is malformed";
    }
    if (call->request == NULL) {
        in->decode_errors++;
        char text[256];
        snprintf(text, sizeof(text), "the body is not a valid %s: %s", m->request->name, why);
        cr_rpc_refusal_text(out, CR_ERR_PROTOCOL, text);
        return false;
    }
    char err[CR_RPC_ERROR_MAX];
    if (cr_rpc_validate(call->method, call->request, err) != CR_OK) {
        in->invalid++;
        CR_DEBUG("rpc", "request %llu refused: %s", (unsigned long long)call->request_id, err);
        refuse_status(out, m, CR_ERR_INVALID_PARAMS, err);
        return false;
    }
    if (!admin_gate(in, m, call, out)) return false;
    cr_rpc_call_prepare_key(call); /* here, not on segments' thread */
    return true;
}

bool cr_rpc_intake_for_tasks(const struct cr_master_call *call) {
    /* FetchTasks and MarkTaskToComplete go through segments, which checks
     * the executor's secret (it holds the client table) and passes them on. */
    return cr_task_method_for_tasks(call->method) && !cr_rpc_methods_task_gated(call->method);
}

bool cr_rpc_intake_forward(struct cr_rpc_intake *in, struct cr_master_call *call,
                           struct cr_rpc_refusal *out) {
    struct cr_msg msg = {.type = CR_MSG_MASTER_CALL};
    CR_MSG_BODY(&msg, struct cr_msg_master_call)->call = call;
    call->reply_to = in->self;
    /* To tasks: never wait on a full ring (cr_send_try), the edge runs on
     * segments' thread and a wait of up to send_wait_ns (100 ms) there held
     * every RPC; the call is refused "busy" instead.  To segments: cr_send,
     * as before. */
    bool to_tasks = cr_rpc_intake_for_tasks(call);
    struct cr_actor *to = to_tasks ? in->tasks : in->segments;
    int rc = to == NULL ? CR_ERR_SHUTDOWN : to_tasks ? cr_send_try(to, &msg) : cr_send(to, &msg);
    if (rc != CR_OK) {
        in->not_ready++;
        cr_rpc_refusal_text(out, rc, "the store master is busy or stopping; retry");
        return false;
    }
    in->in_flight++;
    return true;
}

bool cr_rpc_intake_check(struct cr_rpc_intake *in, struct cr_master_call *call,
                         const uint8_t *body, size_t len, struct cr_rpc_refusal *out) {
    assert(in != NULL && call != NULL && out != NULL && (body != NULL || len == 0));
    if (len > CR_RPC_BODY_MAX) {
        in->malformed++;
        cr_rpc_refusal_text(out, CR_ERR_PROTOCOL, "request body above 16 MiB");
        return false;
    }
    const struct cr_rpc_method *m = cr_rpc_method_find(call->method);
    if (m == NULL) {
        in->unknown_method++;
        char text[96];
        snprintf(text, sizeof(text), "unknown method %u (see enum Method in master.proto)",
                 call->method);
        cr_rpc_refusal_text(out, CR_ERR_INVALID_PARAMS, text);
        return false;
    }
    in->requests[m->id]++;
    return decode(in, m, call, body, len, out);
}

bool cr_rpc_intake_take(struct cr_rpc_intake *in, struct cr_master_call *call,
                        const uint8_t *body, size_t len, struct cr_rpc_refusal *out) {
    return cr_rpc_intake_check(in, call, body, len, out) && cr_rpc_intake_forward(in, call, out);
}

void cr_rpc_intake_done(struct cr_rpc_intake *in, const struct cr_master_call *call,
                        uint64_t now_ns) {
    assert(in->in_flight > 0);
    assert(call->method < CR_RPC_METHOD_SLOTS); /* only known methods are forwarded */
    in->in_flight--;
    cr_histogram_observe(&in->latency[call->method],
                         now_ns > call->received_ns ? now_ns - call->received_ns : 0);
}

void cr_rpc_intake_stats(const struct cr_rpc_intake *in, struct cr_actor_stats *out) {
    cr_actor_stats_add(out, "replies_total", in->replies);
    cr_actor_stats_add(out, "malformed_total", in->malformed);
    cr_actor_stats_add(out, "unknown_method_total", in->unknown_method);
    cr_actor_stats_add(out, "decode_errors_total", in->decode_errors);
    cr_actor_stats_add(out, "invalid_total", in->invalid);
    cr_actor_stats_add(out, "busy_total", in->not_ready);
    cr_actor_stats_add(out, "send_dropped_total", in->send_dropped);
    cr_actor_stats_add(out, "in_flight", in->in_flight);
    cr_actor_stats_add(out, "admin_refused_total", in->admin_refused);
    size_t n;
    const struct cr_rpc_method *m = cr_rpc_methods(&n);
    for (size_t i = 0; i < n; i++) cr_actor_stats_add(out, m[i].metric, in->requests[m[i].id]);
    for (size_t i = 0; i < n && out->histogram_count < out->histograms_max; i++) {
        struct cr_actor_histogram *h = &out->histograms[out->histogram_count++];
        *h = (struct cr_actor_histogram){
            .name = "request_duration_seconds",
            .help = "Store RPC requests from being read to their reply being written.",
            .label = "method",
            .label_value = m[i].name,
            .h = in->latency[m[i].id]};
    }
}
