/* The tasks actor: copy/move tasks (seed 004 CreateCopyTask, CreateMoveTask,
 * QueryTask, MarkTaskToComplete; wire-formats §6).
 *
 * It owns the task table (src/core/task_table.c) and drives each task; the
 * segments actor owns the store and applies what tasks decides.  A task:
 *
 *  1. CreateCopyTask / CreateMoveTask reach segments (MASTER_CALL), which
 *     validates them against the store and reserves the target replicas
 *     (PROCESSING: allocated, never listed to readers), then hands the call
 *     and the reservation to tasks (TASK_CREATE).  Tasks files a PENDING task
 *     for the executor, the client that mounted the source segment, and
 *     answers the call with the task id.  A refusal never reaches tasks.
 *  2. The executor calls FetchTasks (after its Ping): its PENDING tasks come
 *     back with source and target addresses and become PROCESSING.
 *  3. It moves the bytes and reports with MarkTaskToComplete.  SUCCESS:
 *     tasks sends TASK_OP commit to segments (targets COMPLETE; a move also
 *     drops its source unless a lease protects it); FAILED: rollback
 *     (targets freed).  The report is answered when segments' verdict is
 *     back (TASK_OP_DONE), and the task ends SUCCESS or FAILED.
 *  4. A move whose source is leased stays PROCESSING after the commit: every
 *     tick past the lease's deadline tasks asks segments to release the
 *     source (TASK_OP release), until the task's own deadline.
 *
 *  Offloads (docs/tiers.md, "Local SSD tier") are tasks too, created by
 *  segments itself when eviction picks an object a store server with an SSD
 *  tier holds (TASK_CREATE without a call): no targets; the executor
 *  writes the object from its segment to its SSD and reports the position
 *  (MarkTaskToComplete.position); commit records the local_disk replica and
 *  frees memory.  A lost executor fails an offload (never reassigned: its
 *  SSD is the point), and a failed offload's report is answered with the
 *  failure, so the server deletes the file nobody will read.
 *
 *  5. An executor lost: after an unmount or a client's expiry segments
 *     sends TASKS_RECHECK, and every task not committed gets a TASK_OP
 *     check (when no op of its own is out; else at the next tick).  Segments
 *     answers "source still held", or moves the task to another COMPLETE
 *     replica's owner with its targets reserved anew (the old space parked:
 *     a stopped executor may write late), or rolls it back (no replica
 *     left, a target gone).  Moved: PENDING again for the new executor with
 *     a fresh deadline; the lost one's late report is refused.  Rolled
 *     back: FAILED, naming the lost executor.
 *
 * Deadlines (--task-timeout-sec, 300 s) are checked every second on the
 * runtime clock (tests drive it): a task not reported in time is rolled back
 * and FAILED, so an executor that died never leaves a reserved replica
 * behind, and its late report is refused; a move still waiting for its lease
 * at the deadline is FAILED with both replicas kept (the copy is committed,
 * readable, and nothing is lost).  One TASK_OP per task is in flight at a
 * time.  A lost TASK_OP (segments stopping) only happens at shutdown, when
 * the store goes too.  At most --task-max-in-flight (4096) tasks are in
 * flight.  The last --task-retention (10000) finished tasks are kept for
 * QueryTask and /api/v1/tasks, the oldest dropped first. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "rpc/rpc_codec.h"
#include "actors/subsystems.h"
#include "actors/task_store.h"
#include "core/log.h"
#include "core/task_table.h"
#include "crescent/error.h"
#include "daemon/config.h"
#include "http/task_routes.h"
#include "msgs/task_msgs.h"
#include "runtime/stats_extra.h"

#define TASKS_TICK_NS 1000000000ull /* deadline and lease checks: once a second */
#define FETCH_DEFAULT 16u

struct tasks_state {
    struct cr_actor *self;
    struct cr_subsystems *peers; /* NULL until WIRE */
    struct cr_task_table *table;
    uint64_t timeout_ms;
    uint64_t now_ms;        /* runtime clock, refreshed per message */
    uint64_t epoch_base_ms; /* wall clock at start, for QueryTask's timestamps */
    uint64_t mono_base_ms;  /* runtime clock at start */
    uint64_t rng[2];        /* task ids: xorshift128+, seeded from getrandom */
    uint64_t created, succeeded, failed, timed_out, bytes_moved;
    uint64_t ops_dropped; /* TASK_OP that could not be sent */
    uint64_t pings_with_tasks; /* Ping responses that handed tasks out */
    uint32_t max_in_flight; /* --task-max-in-flight */
    uint64_t refused_full;  /* creations refused: max_in_flight tasks in flight */
    uint64_t rechecks;     /* unmounts/expiries segments told of */
    uint64_t reassigned;   /* tasks handed to another executor */
    uint64_t failed_lost;  /* tasks FAILED because their executor or a target was lost */
    uint64_t offloads_created, offloads_done, offloads_failed, offloaded_bytes; /* OFFLOAD tasks */
    uint64_t last_log_ns;
    /* Answered calls whose gateway's ring was full, oldest first
     * (reply_as_is); sent again at every round's end. */
    struct cr_master_call *unsent_head, *unsent_tail;
    uint64_t unsent;          /* calls waiting there now */
    uint64_t replies_delayed; /* times a reply had to wait there */
    uint64_t replies_lost;    /* replies to a gateway that was stopping */
    /* Calls answered with a refusal here, by method (Mooncake's
     * master_{create_copy,create_move,query,fetch,update}_task(s)_failures_total). */
    uint64_t refused_create_copy, refused_create_move, refused_query, refused_fetch,
        refused_mark;
};

/* ------------------------------------------------------------------------ */
/* Helpers */

static uint64_t epoch_now(const struct tasks_state *st) {
    return st->epoch_base_ms + (st->now_ms - st->mono_base_ms);
}

static bool same_client(const struct cr_uuid *a, const struct cr_uuid *b) {
    return memcmp(a->b, b->b, sizeof(a->b)) == 0;
}

static uint64_t rng_next(struct tasks_state *st) {
    uint64_t s1 = st->rng[0];
    const uint64_t s0 = st->rng[1];
    st->rng[0] = s0;
    s1 ^= s1 << 23;
    st->rng[1] = s1 ^ s0 ^ (s1 >> 17) ^ (s0 >> 26);
    return st->rng[1] + s0;
}

/* A random (version 4) UUID. */
static void new_id(struct tasks_state *st, struct cr_uuid *out) {
    uint64_t a = rng_next(st), b = rng_next(st);
    memcpy(out->b, &a, 8);
    memcpy(out->b + 8, &b, 8);
    out->b[6] = (uint8_t)((out->b[6] & 0x0f) | 0x40);
    out->b[8] = (uint8_t)((out->b[8] & 0x3f) | 0x80);
}

/* Sends one answered call back to its gateway.  A full ring (the gateway
 * busy past send_wait_ns) keeps the call for the next round (unsent_retry):
 * a reply dropped here would leave the call in flight for good at the edge
 * that counts it (segments bounds its calls at tasks, and a connection its
 * calls in flight).  Only a gateway that is stopping loses its replies. */
static void unsent_keep(struct tasks_state *st, struct cr_master_call *call) {
    call->next = NULL;
    if (st->unsent_tail != NULL)
        st->unsent_tail->next = call;
    else
        st->unsent_head = call;
    st->unsent_tail = call;
    st->unsent++;
}

static bool send_done(struct tasks_state *st, struct cr_master_call *call) {
    call->next = NULL;
    struct cr_msg done = {.type = CR_MSG_MASTER_DONE};
    CR_MSG_BODY(&done, struct cr_msg_master_call)->call = call;
    int rc = call->reply_to != NULL ? cr_send(call->reply_to, &done) : CR_ERR_SHUTDOWN;
    if (rc == CR_OK) return true;
    if (rc == CR_ERR_AGAIN) return false;
    st->replies_lost++;
    cr_master_call_free(call); /* the gateway is stopping */
    return true;
}

/* Sends a call back to the gateway with the reply it holds; behind the
 * replies already waiting, so a connection's replies keep their order. */
static void reply_as_is(struct tasks_state *st, struct cr_master_call *call) {
    if (st->unsent_head != NULL || !send_done(st, call)) {
        if (st->unsent_head == NULL) st->replies_delayed++;
        unsent_keep(st, call);
    }
}

/* At every round's end: the replies a full ring held back, oldest first,
 * until the ring is full again. */
static void unsent_retry(struct tasks_state *st) {
    while (st->unsent_head != NULL) {
        struct cr_master_call *call = st->unsent_head;
        struct cr_master_call *next = call->next;
        if (!send_done(st, call)) {
            call->next = next; /* still first */
            return;
        }
        st->unsent_head = next;
        if (next == NULL) st->unsent_tail = NULL;
        st->unsent--;
    }
}

/* Packs resp into the call (inline when it fits) and sends it back. */
static void answer(struct tasks_state *st, struct cr_master_call *call, ProtobufCMessage *resp) {
    size_t len = protobuf_c_message_get_packed_size(resp);
    if (len <= sizeof(call->reply_inline)) {
        call->reply = call->reply_inline;
        call->reply_len = protobuf_c_message_pack(resp, call->reply_inline);
        call->status = CR_OK;
    } else if (cr_rpc_pack(resp, &call->reply, &call->reply_len) == CR_OK) {
        call->status = CR_OK;
    } else {
        cr_rpc_reply_nomem(call);
    }
    reply_as_is(st, call);
}

static void count_refusal(struct tasks_state *st, uint16_t method) {
    switch (method) {
    case CRESCENT__MASTER__METHOD__CREATE_COPY_TASK: st->refused_create_copy++; break;
    case CRESCENT__MASTER__METHOD__CREATE_MOVE_TASK: st->refused_create_move++; break;
    case CRESCENT__MASTER__METHOD__QUERY_TASK: st->refused_query++; break;
    case CRESCENT__MASTER__METHOD__FETCH_TASKS: st->refused_fetch++; break;
    case CRESCENT__MASTER__METHOD__MARK_TASK_TO_COMPLETE: st->refused_mark++; break;
    default: break;
    }
}

/* Answers a call with only a status and a reason. */
static void answer_status(struct tasks_state *st, struct cr_master_call *call, int status,
                          const char *why) {
    if (status != CR_OK) count_refusal(st, call->method);
    const struct cr_rpc_method *m = cr_rpc_method_find(call->method);
    assert(m != NULL);
    _Alignas(max_align_t) uint8_t storage[256];
    assert(m->response->sizeof_message <= sizeof(storage));
    protobuf_c_message_init(m->response, storage);
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(m->response, 1);
    int32_t code = status;
    memcpy(storage + f->offset, &code, sizeof(code));
    if (why != NULL && why[0] != '\0') cr_rpc_set_error_message((ProtobufCMessage *)storage, why);
    answer(st, call, (ProtobufCMessage *)storage);
}

/* Sends an operation on the task's reservation to segments.  False when
 * segments cannot take it (stopping). */
static bool send_op(struct tasks_state *st, struct cr_task *task, enum cr_task_op_kind kind) {
    struct cr_task_detail *d = task->detail;
    struct cr_task_op *op = calloc(1, sizeof(*op));
    if (op == NULL) return false;
    *op = (struct cr_task_op){.kind = kind, .task_id = task->id, .ref = d->ref,
                              .release_source = d->release_source, .executor = d->executor,
                              .offload = d->type == CR_TASK_OFFLOAD, .promote = d->promote,
                              .ssd_position = d->ssd_position};
    struct cr_msg msg = {.type = CR_MSG_TASK_OP};
    CR_MSG_BODY(&msg, struct cr_msg_task_op)->op = op;
    if (cr_send(st->peers->actors[CR_SUBSYSTEM_SEGMENTS], &msg) != CR_OK) {
        free(op);
        st->ops_dropped++;
        return false;
    }
    d->op_in_flight = true;
    d->op_kind = kind;
    return true;
}

/* Ends a task: frees its detail, answers a held report, counts it. */
static void finish(struct tasks_state *st, struct cr_task *task, enum cr_task_status status,
                   const char *message) {
    struct cr_task_detail *d = task->detail;
    assert(d != NULL && !d->op_in_flight);
    char noted[CR_TASK_MESSAGE_MAX];
    if (status == CR_TASK_SUCCESS && d->reassigned > 0) { /* say who ran it, and why */
        char lost[37];
        cr_task_id_format(&d->lost_executor, lost);
        snprintf(noted, sizeof(noted), "%.60s, by the executor it was reassigned to after "
                 "client %s was lost", message, lost);
        message = noted;
    }
    struct cr_master_call *held = d->held;
    bool offload = d->type == CR_TASK_OFFLOAD;
    /* An offload reported done whose commit failed: its file is nobody's. */
    bool refuse = offload && status != CR_TASK_SUCCESS && d->op_kind == CR_TASK_OP_COMMIT;
    if (status == CR_TASK_SUCCESS) {
        st->succeeded++;
        st->bytes_moved += d->ref.size * d->ref.target_count;
        st->offloads_done += offload;
        st->offloaded_bytes += offload ? d->ref.size : 0;
    } else {
        st->failed++;
        st->offloads_failed += offload;
    }
    free(d);
    task->detail = NULL;
    cr_task_table_finish(st->table, task, status, message, epoch_now(st));
    /* That executor is told, so it deletes the file it wrote. */
    if (held != NULL)
        answer_status(st, held, refuse ? CR_ERR_OBJECT_NOT_FOUND : CR_OK,
                      refuse ? message : NULL);
}

/* ------------------------------------------------------------------------ */
/* Creation (from segments, with the reservation) */

static void on_create(struct tasks_state *st, struct cr_master_call *call,
                      struct cr_task_detail *detail) {
    struct cr_uuid id;
    new_id(st, &id);
    struct cr_task *task = NULL;
    int rc = cr_task_table_add(st->table, &id, detail->type, &detail->executor, epoch_now(st),
                               st->now_ms + st->timeout_ms, detail, &task);
    if (rc != CR_OK) {
        /* Hand the reservation back: a task-less op, answered and dropped. */
        struct cr_task_op *op = calloc(1, sizeof(*op));
        struct cr_msg msg = {.type = CR_MSG_TASK_OP};
        if (op != NULL) {
            *op = (struct cr_task_op){.kind = CR_TASK_OP_ROLLBACK, .ref = detail->ref,
                                      .offload = detail->type == CR_TASK_OFFLOAD,
                                      .promote = detail->promote};
            CR_MSG_BODY(&msg, struct cr_msg_task_op)->op = op;
            if (cr_send(st->peers->actors[CR_SUBSYSTEM_SEGMENTS], &msg) != CR_OK) free(op);
        }
        free(detail);
        char why[CR_RPC_ERROR_MAX];
        st->refused_full++;
        if (call == NULL) return; /* an offload: the object stays in memory, evictable again */
        snprintf(why, sizeof(why), "%u copy/move tasks are in flight, the most crescentd runs "
                 "at once (--task-max-in-flight); retry when some finish, or raise the flag",
                 st->max_in_flight);
        cr_task_call_refuse(call, rc, why);
        count_refusal(st, call->method);
        reply_as_is(st, call);
        return;
    }
    st->created++;
    cr_task_table_update(st->table, task, CR_TASK_PENDING, "waiting for the executor to fetch it",
                         epoch_now(st));
    if (call == NULL) { /* an offload or promotion segments created: nobody waits for its id */
        st->offloads_created += detail->type == CR_TASK_OFFLOAD;
        return;
    }
    Crescent__Master__UUID pb_id;
    cr_rpc_uuid_to_pb(&id, &pb_id);
    /* The two responses have the same layout: status_code, task_id, error_message. */
    Crescent__Master__CreateCopyTaskResponse resp = CRESCENT__MASTER__CREATE_COPY_TASK_RESPONSE__INIT;
    if (call->method == CRESCENT__MASTER__METHOD__CREATE_MOVE_TASK)
        resp.base.descriptor = &crescent__master__create_move_task_response__descriptor;
    resp.task_id = &pb_id;
    answer(st, call, &resp.base);
}

/* ------------------------------------------------------------------------ */
/* QueryTask, FetchTasks, MarkTaskToComplete (from the gateway) */

static void on_query(struct tasks_state *st, struct cr_master_call *call) {
    const Crescent__Master__QueryTaskRequest *req = (const void *)call->request;
    struct cr_uuid id;
    cr_rpc_uuid_from_pb(req->task_id, &id);
    const struct cr_task *t = cr_task_table_find(st->table, &id);
    if (t == NULL) {
        answer_status(st, call, CR_ERR_OBJECT_NOT_FOUND,
                      "no such task (finished tasks are kept up to --task-retention)");
        return;
    }
    Crescent__Master__UUID pb_id, pb_client;
    cr_rpc_uuid_to_pb(&t->id, &pb_id);
    cr_rpc_uuid_to_pb(&t->executor, &pb_client);
    Crescent__Master__QueryTaskResponse resp = CRESCENT__MASTER__QUERY_TASK_RESPONSE__INIT;
    resp.id = &pb_id;
    resp.has_type = resp.has_status = 1;
    resp.type = (Crescent__Master__TaskType)t->type;
    resp.status = (Crescent__Master__TaskStatus)t->status;
    resp.has_created_at_ms_epoch = resp.has_last_updated_at_ms_epoch = 1;
    resp.created_at_ms_epoch = (int64_t)t->created_epoch_ms;
    resp.last_updated_at_ms_epoch = (int64_t)t->updated_epoch_ms;
    resp.assigned_client = &pb_client;
    resp.message = (char *)t->message;
    answer(st, call, &resp.base);
}

static void handle_pb(const struct cr_task_replica *r, Crescent__Master__BufHandle *h) {
    crescent__master__buf_handle__init(h);
    h->segment_name = (char *)r->segment;
    h->size = r->size;
    h->buffer = r->buffer;
    h->status = CRESCENT__MASTER__BUF_HANDLE__BUF_STATUS__INIT;
    h->transport_endpoint = (char *)r->endpoint;
    if (r->has_cap) {
        h->has_capability = 1;
        h->capability = (ProtobufCBinaryData){.len = sizeof(r->cap), .data = (uint8_t *)r->cap};
    }
}

/* One assignment's protobuf pieces, pointing into the task's detail. */
struct assignment {
    Crescent__Master__TaskAssignment a;
    Crescent__Master__UUID id;
    Crescent__Master__BufHandle source;
    Crescent__Master__BufHandle targets[CR_STORE_REPLICAS_MAX];
    Crescent__Master__BufHandle *target_ptrs[CR_STORE_REPLICAS_MAX];
};

static void assignment_fill(const struct tasks_state *st, const struct cr_task *t,
                            struct assignment *out) {
    const struct cr_task_detail *d = t->detail;
    crescent__master__task_assignment__init(&out->a);
    cr_rpc_uuid_to_pb(&t->id, &out->id);
    out->a.task_id = &out->id;
    out->a.type = (Crescent__Master__TaskType)t->type;
    out->a.key = (char *)d->key;
    out->a.tenant_id = (char *)d->tenant;
    handle_pb(&d->source, &out->source);
    out->a.source = &out->source;
    for (uint32_t i = 0; i < d->target_count; i++) {
        handle_pb(&d->targets[i], &out->targets[i]);
        out->target_ptrs[i] = &out->targets[i];
    }
    out->a.n_targets = d->target_count;
    out->a.targets = out->target_ptrs;
    out->a.has_checksum_xxh3 = d->has_checksum;
    out->a.checksum_xxh3 = d->checksum;
    out->a.has_deadline_in_ms = 1;
    out->a.deadline_in_ms = t->deadline_ms > st->now_ms ? t->deadline_ms - st->now_ms : 0;
}

/* Hands out up to `want` of `client`'s PENDING tasks (now PROCESSING) into
 * as/ptrs (want entries each); returns how many. */
static size_t hand_out(struct tasks_state *st, const struct cr_uuid *client, uint32_t want,
                       struct assignment *as, Crescent__Master__TaskAssignment **ptrs) {
    size_t n = 0;
    for (uint32_t i = cr_task_table_active_count(st->table); i-- > 0 && n < want;) {
        struct cr_task *t = cr_task_table_active_at(st->table, i);
        if (t->status != CR_TASK_PENDING || memcmp(&t->executor, client, sizeof(*client)) != 0)
            continue;
        cr_task_table_update(st->table, t, CR_TASK_PROCESSING, "handed to its executor",
                             epoch_now(st));
        assignment_fill(st, t, &as[n]);
        ptrs[n] = &as[n].a;
        n++;
    }
    return n;
}

static void on_fetch(struct tasks_state *st, struct cr_master_call *call) {
    const Crescent__Master__FetchTasksRequest *req = (const void *)call->request;
    struct cr_uuid client;
    cr_rpc_uuid_from_pb(req->client_id, &client);
    uint32_t want = req->has_max_tasks ? req->max_tasks : FETCH_DEFAULT; /* validated: ≤ 256 */
    struct assignment *as = calloc(want, sizeof(*as));
    Crescent__Master__TaskAssignment **ptrs = calloc(want, sizeof(*ptrs));
    if (as == NULL || ptrs == NULL) {
        free(as), free(ptrs);
        answer_status(st, call, CR_ERR_NOMEM, "out of memory listing tasks");
        return;
    }
    Crescent__Master__FetchTasksResponse resp = CRESCENT__MASTER__FETCH_TASKS_RESPONSE__INIT;
    resp.n_tasks = hand_out(st, &client, want, as, ptrs);
    resp.tasks = ptrs;
    answer(st, call, &resp.base); /* packs before the details can change */
    free(as);
    free(ptrs);
}

/* A ping segments ran (the client is known, the response packed): its
 * client's PENDING tasks are added to the response (seed 004's hand-out).
 * Out of memory: the ping goes back as segments packed it, without tasks;
 * they stay PENDING for the next ping. */
static void on_ping(struct tasks_state *st, struct cr_master_call *call) {
    const Crescent__Master__PingRequest *req = (const void *)call->request;
    assert(req->has_max_tasks && req->max_tasks > 0 && req->max_tasks <= 256);
    Crescent__Master__PingResponse *resp = crescent__master__ping_response__unpack(
        NULL, call->reply_len, call->reply);
    struct assignment *as = calloc(req->max_tasks, sizeof(*as));
    Crescent__Master__TaskAssignment **ptrs = calloc(req->max_tasks, sizeof(*ptrs));
    if (resp != NULL && as != NULL && ptrs != NULL) {
        struct cr_uuid client;
        cr_rpc_uuid_from_pb(req->client_id, &client);
        resp->n_tasks = hand_out(st, &client, req->max_tasks, as, ptrs);
        resp->tasks = ptrs;
        st->pings_with_tasks += resp->n_tasks > 0;
        cr_master_call_reply_free(call);
        answer(st, call, &resp->base);
        resp->n_tasks = 0, resp->tasks = NULL; /* ours, not the unpacked message's */
    } else {
        reply_as_is(st, call);
    }
    if (resp != NULL) crescent__master__ping_response__free_unpacked(resp, NULL);
    free(as);
    free(ptrs);
}

/* A report from a client the task is not assigned to: the executor it was
 * taken from, or any other. */
static void refuse_other_client(struct tasks_state *st, const struct cr_task *t,
                                const struct cr_uuid *client, struct cr_master_call *call) {
    const struct cr_task_detail *d = t->detail;
    char why[CR_RPC_ERROR_MAX], now_id[37];
    cr_task_id_format(&t->executor, now_id);
    if (d->reassigned > 0 && same_client(client, &d->lost_executor))
        snprintf(why, sizeof(why), "task was reassigned to client %s after %.120s; this late "
                 "report is refused and changes nothing", now_id, d->lost_why);
    else
        snprintf(why, sizeof(why), "task is assigned to client %s, not to this one", now_id);
    answer_status(st, call, CR_ERR_ILLEGAL_CLIENT, why);
}

static void on_report(struct tasks_state *st, struct cr_master_call *call) {
    const Crescent__Master__MarkTaskToCompleteRequest *req = (const void *)call->request;
    struct cr_uuid id, client;
    cr_rpc_uuid_from_pb(req->task_id, &id);
    cr_rpc_uuid_from_pb(req->client_id, &client);
    struct cr_task *t = cr_task_table_find(st->table, &id);
    char why[CR_RPC_ERROR_MAX];
    if (t == NULL) {
        answer_status(st, call, CR_ERR_OBJECT_NOT_FOUND, "no such task");
        return;
    }
    if (t->detail == NULL) {
        snprintf(why, sizeof(why), "task already ended %s: %.180s", cr_task_status_name(t->status),
                 t->message);
        answer_status(st, call, CR_ERR_INVALID_PARAMS, why);
        return;
    }
    struct cr_task_detail *d = t->detail;
    if (!same_client(&t->executor, &client)) {
        refuse_other_client(st, t, &client, call);
        return;
    }
    if (d->op_in_flight && d->op_kind == CR_TASK_OP_CHECK) {
        answer_status(st, call, CR_ERR_AGAIN, "the task is being checked after a segment was "
                      "unmounted or a client expired; retry");
        return;
    }
    if (t->status != CR_TASK_PROCESSING || d->op_in_flight || d->committed) {
        answer_status(st, call, CR_ERR_INVALID_PARAMS,
                      t->status == CR_TASK_PENDING ? "task was not fetched (FetchTasks) yet"
                                                   : "task was already reported");
        return;
    }
    bool ok = req->status == CRESCENT__MASTER__TASK_STATUS__SUCCESS;
    if (ok && d->type == CR_TASK_OFFLOAD && !req->has_position) {
        answer_status(st, call, CR_ERR_INVALID_PARAMS, "an offload's success report needs the "
                      "object's SSD position (MarkTaskToCompleteRequest.position)");
        return;
    }
    d->ssd_position = req->position;
    snprintf(why, sizeof(why), "executor reported %s%s%s", ok ? "success" : "failure",
             req->message != NULL && req->message[0] ? ": " : "",
             req->message != NULL ? req->message : "");
    if (!send_op(st, t, ok ? CR_TASK_OP_COMMIT : CR_TASK_OP_ROLLBACK)) {
        answer_status(st, call, CR_ERR_SHUTDOWN, "crescentd is stopping");
        return;
    }
    d->held = call;
    cr_task_table_update(st->table, t, CR_TASK_PROCESSING, why, epoch_now(st));
}

static void on_call(struct tasks_state *st, struct cr_master_call *call) {
    switch (call->method) {
    case CRESCENT__MASTER__METHOD__QUERY_TASK: on_query(st, call); return;
    case CRESCENT__MASTER__METHOD__FETCH_TASKS: on_fetch(st, call); return;
    case CRESCENT__MASTER__METHOD__PING: on_ping(st, call); return;
    case CRESCENT__MASTER__METHOD__MARK_TASK_TO_COMPLETE: on_report(st, call); return;
    default:
        answer_status(st, call, CR_ERR_INVALID_PARAMS, "not a task method");
    }
}

/* ------------------------------------------------------------------------ */
/* Segments' verdicts, deadlines, leases */

static void wait_for_lease(struct tasks_state *st, struct cr_task *t, uint64_t lease_ms) {
    struct cr_task_detail *d = t->detail;
    d->committed = true;
    d->lease_deadline_ms = lease_ms;
    char why[CR_TASK_MESSAGE_MAX];
    snprintf(why, sizeof(why), "copied; source segment %.100s is leased for %llu ms more, released "
             "then", d->source.segment,
             (unsigned long long)(lease_ms > st->now_ms ? lease_ms - st->now_ms : 0));
    cr_task_table_update(st->table, t, CR_TASK_PROCESSING, why, epoch_now(st));
    struct cr_master_call *held = d->held;
    d->held = NULL;
    if (held != NULL) answer_status(st, held, CR_OK, NULL);
}

/* How the executor was lost, for the task's message: its client expired
 * (which unmounts every segment it had) or its source segment went. */
static void lost_reason(const struct cr_task_detail *d, bool executor_known, char *out,
                        size_t len) {
    char id[37];
    cr_task_id_format(&d->executor, id);
    if (executor_known)
        snprintf(out, len, "executor client %s lost its source segment %.60s (unmounted)", id,
                 d->source.segment);
    else
        snprintf(out, len, "executor client %s was lost (no ping for --client-ttl: its "
                 "segments were unmounted)", id);
}

/* The store took the task from a lost executor and reserved its targets
 * anew: the task waits for the new executor, with a fresh deadline. */
static void reassign(struct tasks_state *st, struct cr_task *t, const struct cr_task_op *op,
                     const char *lost) {
    struct cr_task_detail *d = t->detail;
    assert(op->moved && op->ref.target_count == d->target_count);
    d->lost_executor = d->executor;
    snprintf(d->lost_why, sizeof(d->lost_why), "%s", lost);
    d->executor = t->executor = op->executor;
    d->ref = op->ref;
    d->source = op->source;
    memcpy(d->targets, op->targets, d->target_count * sizeof(d->targets[0]));
    d->release_source = false; /* a move's source went with the lost segment */
    d->reassigned++;
    st->reassigned++;
    t->deadline_ms = st->now_ms + st->timeout_ms;
    char id[37], why[CR_TASK_MESSAGE_MAX];
    cr_task_id_format(&op->executor, id);
    snprintf(why, sizeof(why), "reassigned to client %s (holding a complete replica) after "
             "%.150s", id, lost);
    cr_task_table_update(st->table, t, CR_TASK_PENDING, why, epoch_now(st));
    CR_INFO("tasks", "task of '%.64s': %s", d->key, why);
}

/* A check's verdict: nothing lost, reassigned, or FAILED (the store has
 * freed the reserved replicas already). */
static void on_checked(struct tasks_state *st, struct cr_task *t, const struct cr_task_op *op) {
    struct cr_task_detail *d = t->detail;
    if (op->status == CR_OK && !op->moved) return;
    char lost[160] = "", why[CR_TASK_MESSAGE_MAX];
    if (op->source_lost) lost_reason(d, op->executor_known, lost, sizeof(lost));
    if (op->status == CR_OK) {
        reassign(st, t, op, lost);
        return;
    }
    st->failed_lost++;
    snprintf(why, sizeof(why), "%.140s%s%.80s; reserved replicas freed", lost,
             lost[0] != '\0' ? ", and " : "", op->message);
    finish(st, t, CR_TASK_FAILED, why);
}

static void on_op_done(struct tasks_state *st, struct cr_task_op *op) {
    struct cr_task *t = cr_task_table_find(st->table, &op->task_id);
    if (t == NULL || t->detail == NULL) { /* a creation refused above: nothing waits */
        free(op);
        return;
    }
    struct cr_task_detail *d = t->detail;
    d->op_in_flight = false;
    char why[CR_TASK_MESSAGE_MAX];
    if (op->kind == CR_TASK_OP_CHECK) {
        on_checked(st, t, op);
    } else if (op->kind == CR_TASK_OP_ROLLBACK) {
        snprintf(why, sizeof(why), "%s", t->message); /* the reason set when it was sent */
        finish(st, t, CR_TASK_FAILED, why);
    } else if (op->status == CR_OK) {
        finish(st, t, CR_TASK_SUCCESS, "Task completed successfully");
    } else if (op->status == CR_ERR_OBJECT_HAS_LEASE) {
        wait_for_lease(st, t, op->lease_deadline_ms);
    } else {
        snprintf(why, sizeof(why), "%s: %.200s", op->kind == CR_TASK_OP_COMMIT ? "commit failed"
                 : "source not released", op->message);
        finish(st, t, CR_TASK_FAILED, why);
    }
    free(op);
}

/* A task past its deadline: rolled back (reserved replicas freed) and
 * FAILED, or, for a committed move, FAILED with both replicas kept. */
static void expire(struct tasks_state *st, struct cr_task *t) {
    struct cr_task_detail *d = t->detail;
    char why[CR_TASK_MESSAGE_MAX];
    st->timed_out++;
    if (d->committed) {
        snprintf(why, sizeof(why), "deadline passed (%llu s, --task-timeout-sec) while source "
                 "segment %.100s stayed leased: copied, source kept",
                 (unsigned long long)(st->timeout_ms / 1000u), d->source.segment);
        finish(st, t, CR_TASK_FAILED, why);
        return;
    }
    snprintf(why, sizeof(why), "deadline passed (%llu s, --task-timeout-sec) before the executor "
             "reported; reserved replicas freed", (unsigned long long)(st->timeout_ms / 1000u));
    cr_task_table_update(st->table, t, CR_TASK_PROCESSING, why, epoch_now(st));
    if (!send_op(st, t, CR_TASK_OP_ROLLBACK)) finish(st, t, CR_TASK_FAILED, why);
}

/* Sends a CHECK for every task marked for one that has no op out; a task
 * whose op is out, or whose send failed, keeps its mark for the next pass
 * (the next op's end or tick).  Committed tasks need no executor. */
static void recheck_pass(struct tasks_state *st) {
    for (uint32_t i = cr_task_table_active_count(st->table); i-- > 0;) {
        struct cr_task_detail *d = cr_task_table_active_at(st->table, i)->detail;
        if (!d->recheck || d->op_in_flight) continue;
        if (d->committed || send_op(st, cr_task_table_active_at(st->table, i), CR_TASK_OP_CHECK))
            d->recheck = false;
    }
}

/* Segments unmounted something or expired a client: every task in flight
 * checks that its executor still holds its source. */
static void on_recheck(struct tasks_state *st) {
    st->rechecks++;
    for (uint32_t i = cr_task_table_active_count(st->table); i-- > 0;)
        ((struct cr_task_detail *)cr_task_table_active_at(st->table, i)->detail)->recheck = true;
    recheck_pass(st);
}

static void on_tick(struct tasks_state *st) {
    recheck_pass(st);
    for (uint32_t i = cr_task_table_active_count(st->table); i-- > 0;) {
        struct cr_task *t = cr_task_table_active_at(st->table, i);
        struct cr_task_detail *d = t->detail;
        if (d->op_in_flight) continue;
        if (st->now_ms >= t->deadline_ms)
            expire(st, t);
        else if (d->committed && st->now_ms >= d->lease_deadline_ms)
            (void)send_op(st, t, CR_TASK_OP_RELEASE); /* retried next tick if refused */
    }
    struct cr_msg tick = {.type = CR_MSG_TASKS_TICK};
    if (cr_actor_timer_after(st->self, TASKS_TICK_NS, &tick, NULL) != CR_OK)
        CR_ERROR("tasks", "cannot arm the deadline timer: task deadlines stop");
}

/* ------------------------------------------------------------------------ */
/* Actor hooks */

static void on_admin(struct tasks_state *st, struct cr_msg *msg) {
    const struct cr_msg_tasks_admin *a = CR_MSG_BODY(msg, struct cr_msg_tasks_admin);
    int rc = cr_task_routes_render(st->table, st->now_ms, a->id, a->json_out);
    if (msg->flags & CR_MSG_ASK)
        cr_reply(msg, rc);
    else
        free(*a->json_out);
}

static void tasks_handle(struct cr_actor *self, void *arg, struct cr_msg *msg) {
    struct tasks_state *st = arg;
    st->now_ms = cr_actor_now_ns(self) / 1000000u;
    switch (msg->type) {
    case CR_MSG_WIRE:
        st->peers = msg->body.ptr[0];
        on_tick(st);
        return;
    case CR_MSG_TASK_CREATE: {
        struct cr_msg_task_create *c = CR_MSG_BODY(msg, struct cr_msg_task_create);
        on_create(st, c->call, c->detail);
        return;
    }
    case CR_MSG_MASTER_CALL:
        if (msg->flags & CR_MSG_ASK) { /* task calls come from the gateway only */
            cr_reply(msg, CR_ERR_INVALID_PARAMS);
            return;
        }
        on_call(st, CR_MSG_BODY(msg, struct cr_msg_master_call)->call);
        return;
    case CR_MSG_TASK_OP_DONE: on_op_done(st, CR_MSG_BODY(msg, struct cr_msg_task_op)->op); return;
    case CR_MSG_TASKS_TICK: on_tick(st); return;
    case CR_MSG_TASKS_RECHECK: on_recheck(st); return;
    case CR_MSG_TASKS_ADMIN: on_admin(st, msg); return;
    default:
        if (cr_log_ratelimit(&st->last_log_ns, st->now_ms * 1000000u, 60ull * 1000000000u))
            CR_WARN("tasks", "message type %u from sender %u is not handled here", msg->type,
                    msg->sender);
        if (msg->flags & CR_MSG_ASK) cr_reply(msg, CR_ERR_INVALID_PARAMS);
    }
}

static int tasks_start(struct cr_actor *self, void *arg) {
    struct tasks_state *st = arg;
    st->self = self;
    st->now_ms = st->mono_base_ms = cr_actor_now_ns(self) / 1000000u;
    return CR_OK;
}

static void tasks_discard(void *arg, struct cr_msg *msg) {
    (void)arg;
    if (msg->type == CR_MSG_TASK_CREATE) {
        struct cr_msg_task_create *c = CR_MSG_BODY(msg, struct cr_msg_task_create);
        cr_master_call_free(c->call);
        free(c->detail);
    } else if (msg->type == CR_MSG_MASTER_CALL && !(msg->flags & CR_MSG_ASK)) {
        cr_master_call_free(CR_MSG_BODY(msg, struct cr_msg_master_call)->call);
    } else if (msg->type == CR_MSG_TASK_OP_DONE) {
        free(CR_MSG_BODY(msg, struct cr_msg_task_op)->op);
    }
}

static void tasks_stats(struct cr_actor *self, void *arg, struct cr_actor_stats *out) {
    (void)self;
    struct tasks_state *st = arg;
    cr_actor_stats_add(out, "created_total", st->created);
    cr_actor_stats_add(out, "succeeded_total", st->succeeded);
    cr_actor_stats_add(out, "failed_total", st->failed);
    cr_actor_stats_add(out, "pings_with_tasks_total", st->pings_with_tasks);
    cr_actor_stats_add(out, "timed_out_total", st->timed_out);
    cr_actor_stats_add(out, "reassigned_total", st->reassigned);
    cr_actor_stats_add(out, "failed_lost_total", st->failed_lost);
    cr_actor_stats_add(out, "rechecks_total", st->rechecks);
    cr_actor_stats_add(out, "in_flight", cr_task_table_active_count(st->table));
    cr_actor_stats_add(out, "max_in_flight", st->max_in_flight);
    cr_actor_stats_add(out, "refused_full_total", st->refused_full);
    cr_actor_stats_add(out, "finished_kept", cr_task_table_finished_count(st->table));
    cr_actor_stats_add(out, "finished_dropped_total", cr_task_table_dropped(st->table));
    cr_actor_stats_add(out, "bytes_moved_total", st->bytes_moved);
    cr_actor_stats_add(out, "offloads_created_total", st->offloads_created);
    cr_actor_stats_add(out, "offloads_done_total", st->offloads_done);
    cr_actor_stats_add(out, "offloads_failed_total", st->offloads_failed);
    cr_actor_stats_add(out, "offloaded_bytes_total", st->offloaded_bytes);
    cr_actor_stats_add(out, "ops_dropped_total", st->ops_dropped);
    cr_actor_stats_add(out, "replies_waiting", st->unsent);
    cr_actor_stats_add(out, "replies_delayed_total", st->replies_delayed);
    cr_actor_stats_add(out, "replies_lost_total", st->replies_lost);
    cr_actor_stats_add(out, "failures_create_copy_task_total", st->refused_create_copy);
    cr_actor_stats_add(out, "failures_create_move_task_total", st->refused_create_move);
    cr_actor_stats_add(out, "failures_query_task_total", st->refused_query);
    cr_actor_stats_add(out, "failures_fetch_tasks_total", st->refused_fetch);
    cr_actor_stats_add(out, "failures_mark_task_to_complete_total", st->refused_mark);
}

static void tasks_round_end(struct cr_actor *self, void *arg) {
    (void)self;
    unsent_retry(arg);
}

static void tasks_destroy(void *arg) {
    struct tasks_state *st = arg;
    if (st == NULL) return;
    for (uint32_t i = cr_task_table_active_count(st->table); i-- > 0;) {
        struct cr_task *t = cr_task_table_active_at(st->table, i);
        struct cr_task_detail *d = t->detail;
        if (d->held != NULL) cr_master_call_free(d->held);
        free(d);
        t->detail = NULL;
    }
    cr_task_table_destroy(st->table);
    cr_master_call_free_chain(st->unsent_head); /* their gateway stopped first */
    free(st);
}

static int tasks_create(const struct cr_daemon_config *config, void **state_out) {
    struct tasks_state *st = calloc(1, sizeof(*st));
    if (st == NULL) return CR_ERR_NOMEM;
    /* Each task in flight holds its reserved replicas and a ~5 KiB detail:
     * --task-max-in-flight bounds both; one more is refused, naming it. */
    st->max_in_flight = config->task_max_in_flight;
    int rc = cr_task_table_create(st->max_in_flight, config->task_retention, &st->table);
    if (rc != CR_OK) {
        free(st);
        return rc;
    }
    st->timeout_ms = (uint64_t)config->task_timeout_sec * 1000u;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    st->epoch_base_ms = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
    if (getrandom(st->rng, sizeof(st->rng), 0) != (ssize_t)sizeof(st->rng))
        st->rng[0] = st->epoch_base_ms, st->rng[1] = (uint64_t)ts.tv_nsec;
    st->rng[0] |= 1u; /* xorshift128+ needs a non-zero state */
    *state_out = st;
    return CR_OK;
}

static const struct cr_actor_ops tasks_ops = {
    .start = tasks_start,
    .handle = tasks_handle,
    .discard = tasks_discard,
    .stats = tasks_stats,
    .round_end = tasks_round_end,
};

const struct cr_subsystem_def cr_tasks_def = {
    .name = "tasks",
    .ops = &tasks_ops,
    .create = tasks_create,
    .destroy = tasks_destroy,
    .register_routes = cr_task_routes_register,
};
