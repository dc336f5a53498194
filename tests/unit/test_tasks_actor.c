/* The tasks actor with the segments actor on a real runtime and a manual
 * clock: what happens to a copy/move task when its executor is lost.  Calls
 * go in as the RPC gateway sends them (owned MASTER_CALLs answered with
 * MASTER_DONE to a stand-in gateway); nothing sleeps for time to pass: the
 * test moves the clock and waits (bounded) for the actors to react. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rpc/rpc_codec.h"
#include "runtime/runtime.h"
#include "actors/subsystems.h"
#include "crescent/error.h"
#include "daemon/config.h"
#include "http/task_routes.h"
#include "msgs/master_msgs.h"
#include "msgs/store_event.h"

#define KiB (1u << 10)
#define MiB (1u << 20)
#define CALLS_MAX 512u

/* ---- stand-ins for the gateway, the publisher and the indexer ------------ */

struct gateway {
    ProtobufCMessage *resp[CALLS_MAX]; /* written before done[i] is set */
    _Atomic int done[CALLS_MAX];
    _Atomic int hold; /* set: the gateway stops taking messages (its ring fills) */
    _Atomic int held; /* it is stopped in its handler */
};

static void gateway_handle(struct cr_actor *self, void *arg, struct cr_msg *msg) {
    (void)self;
    struct gateway *g = arg;
    if (msg->type != CR_MSG_MASTER_DONE) return;
    while (atomic_load(&g->hold)) {
        atomic_store(&g->held, 1);
        sched_yield();
    }
    struct cr_master_call *head = CR_MSG_BODY(msg, struct cr_msg_master_call)->call;
    for (struct cr_master_call *c = head; c != NULL; c = c->next) {
        const struct cr_rpc_method *m = cr_rpc_method_find(c->method);
        assert_int_equal(c->status, CR_OK);
        g->resp[c->request_id] = protobuf_c_message_unpack(m->response, NULL, c->reply_len,
                                                           c->reply);
        atomic_store(&g->done[c->request_id], 1);
    }
    cr_master_call_free_chain(head);
}

static void events_handle(struct cr_actor *self, void *arg, struct cr_msg *msg) {
    (void)self, (void)arg;
    if (msg->type != CR_MSG_STORE_EVENT) return;
    cr_store_event_chain_release(CR_MSG_BODY(msg, struct cr_msg_store_event)->chain);
}

static const struct cr_actor_ops gateway_ops = {.handle = gateway_handle};
static const struct cr_actor_ops events_ops = {.handle = events_handle};

/* ---- fixture ------------------------------------------------------------- */

struct client {
    Crescent__Master__UUID id;
    uint8_t secret[CR_STORE_CLIENT_SECRET_BYTES];
    protobuf_c_boolean has_secret;
};

struct fixture {
    _Atomic uint64_t now_ns;
    struct cr_runtime *rt;
    struct cr_daemon_config config;
    struct cr_subsystems peers;
    struct gateway gateway;
    struct cr_actor *gateway_actor, *sink;
    uint64_t next_call;
    struct client a, b, c;
};

static uint64_t manual_now(void *ctx) { return atomic_load(&((struct fixture *)ctx)->now_ns); }

#define WAIT_FOR(cond)                                                                             \
    do {                                                                                           \
        struct timespec t0_, t1_;                                                                  \
        clock_gettime(CLOCK_MONOTONIC, &t0_);                                                      \
        while (!(cond)) {                                                                          \
            clock_gettime(CLOCK_MONOTONIC, &t1_);                                                  \
            assert_true(t1_.tv_sec - t0_.tv_sec < 20);                                             \
            sched_yield();                                                                         \
        }                                                                                          \
    } while (0)

static const enum cr_subsystem ACTORS[] = {CR_SUBSYSTEM_SEGMENTS, CR_SUBSYSTEM_LEASES,
                                           CR_SUBSYSTEM_TASKS};

static struct fixture *start_rings(uint32_t max_in_flight, uint32_t ring_slots,
                                   uint64_t send_wait_ns) {
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    cr_daemon_config_default(&f->config);
    f->config.client_ttl = 10;
    f->config.task_max_in_flight = max_in_flight;
    struct cr_runtime_config rc;
    cr_runtime_config_default(&rc);
    rc.pin_threads = false;
    if (ring_slots > 0) rc.ring_slots = ring_slots;
    if (send_wait_ns > 0) rc.send_wait_ns = send_wait_ns;
    rc.clock = (struct cr_clock){.now_ns = manual_now, .ctx = f};
    atomic_store(&f->now_ns, 1000000000ull);
    assert_int_equal(cr_runtime_create(&rc, &f->rt), CR_OK);
    f->peers.config = &f->config;
    f->peers.ask_timeout_ns = 5000000000ull;
    const struct cr_subsystem_def *defs[] = {&cr_segments_def, &cr_leases_def, &cr_tasks_def};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(defs[i]->create(&f->config, &f->peers.states[ACTORS[i]]), CR_OK);
        assert_int_equal(cr_runtime_spawn(f->rt, defs[i]->name, defs[i]->ops,
                                          f->peers.states[ACTORS[i]], &f->peers.actors[ACTORS[i]]),
                         CR_OK);
    }
    assert_int_equal(cr_runtime_spawn(f->rt, "events", &events_ops, NULL, &f->sink), CR_OK);
    f->peers.actors[CR_SUBSYSTEM_PUBLISHER] = f->peers.actors[CR_SUBSYSTEM_INDEXER] = f->sink;
    assert_int_equal(cr_runtime_spawn(f->rt, "gateway", &gateway_ops, &f->gateway,
                                      &f->gateway_actor),
                     CR_OK);
    for (int i = 0; i < 3; i++) {
        struct cr_msg wire = {.type = CR_MSG_WIRE};
        wire.body.ptr[0] = &f->peers;
        assert_int_equal(cr_send(f->peers.actors[ACTORS[i]], &wire), CR_OK);
    }
    struct client *clients[] = {&f->a, &f->b, &f->c};
    for (int i = 0; i < 3; i++) {
        crescent__master__uuid__init(&clients[i]->id);
        clients[i]->id.first = 0xA0 + (uint64_t)i, clients[i]->id.second = 7;
    }
    return f;
}

static struct fixture *start_with(uint32_t max_in_flight) {
    return start_rings(max_in_flight, 0, 0);
}

static struct fixture *start(void) { return start_with(4096); }

static uint64_t tasks_stat(struct fixture *f, const char *name) {
    struct cr_actor_stats s = {0};
    struct cr_msg msg = {.type = CR_MSG_STATS};
    CR_MSG_BODY(&msg, struct cr_msg_stats)->out = &s;
    assert_int_equal(cr_ask(f->peers.actors[CR_SUBSYSTEM_TASKS], &msg, 5000000000ull), CR_OK);
    for (uint32_t i = 0; i < s.extra_count; i++)
        if (strcmp(s.extra[i].name, name) == 0) return s.extra[i].value;
    fail_msg("no stat %s", name);
    return 0;
}

static void stop(struct fixture *f) {
    cr_runtime_destroy(f->rt);
    cr_segments_def.destroy(f->peers.states[CR_SUBSYSTEM_SEGMENTS]);
    cr_leases_def.destroy(f->peers.states[CR_SUBSYSTEM_LEASES]);
    cr_tasks_def.destroy(f->peers.states[CR_SUBSYSTEM_TASKS]);
    for (uint32_t i = 0; i < CALLS_MAX; i++)
        if (f->gateway.resp[i] != NULL) protobuf_c_message_free_unpacked(f->gateway.resp[i], NULL);
    free(f);
}

/* Sends a call to `to` as the gateway does (an owned call, the request in
 * protobuf-c's allocation); returns its request id. */
static uint64_t send_call_async(struct fixture *f, enum cr_subsystem to, uint16_t method,
                                const ProtobufCMessage *req) {
    char err[CR_RPC_ERROR_MAX];
    assert_int_equal(cr_rpc_validate(method, req, err), CR_OK);
    const struct cr_rpc_method *m = cr_rpc_method_find(method);
    struct cr_master_call *call = calloc(1, sizeof(*call));
    uint8_t *packed = NULL;
    size_t len = 0;
    assert_non_null(call);
    assert_int_equal(cr_rpc_pack(req, &packed, &len), CR_OK);
    call->request = protobuf_c_message_unpack(m->request, NULL, len, packed);
    free(packed);
    assert_non_null(call->request);
    assert_true(f->next_call + 1 < CALLS_MAX);
    call->request_id = ++f->next_call;
    call->method = method;
    call->reply_to = f->gateway_actor;
    struct cr_msg msg = {.type = CR_MSG_MASTER_CALL};
    CR_MSG_BODY(&msg, struct cr_msg_master_call)->call = call;
    uint64_t id = call->request_id;
    int rc;
    while ((rc = cr_send(f->peers.actors[to], &msg)) == CR_ERR_AGAIN) sched_yield(); /* tiny rings */
    assert_int_equal(rc, CR_OK);
    return id;
}

/* send_call_async, then waits for its reply; the fixture frees it. */
static ProtobufCMessage *send_call(struct fixture *f, enum cr_subsystem to, uint16_t method,
                                   const ProtobufCMessage *req) {
    uint64_t id = send_call_async(f, to, method, req);
    WAIT_FOR(atomic_load(&f->gateway.done[id]));
    assert_non_null(f->gateway.resp[id]);
    return f->gateway.resp[id];
}

#define SECRET(r, cl)                                                                              \
    ((r).has_client_secret = (cl)->has_secret,                                                     \
     (r).client_secret = (ProtobufCBinaryData){.len = sizeof((cl)->secret), .data = (cl)->secret})

static void mount(struct fixture *f, struct client *cl, const char *name, uint64_t size,
                  uint64_t base) {
    Crescent__Master__MountSegmentRequest r = CRESCENT__MASTER__MOUNT_SEGMENT_REQUEST__INIT;
    r.segment_name = (char *)name;
    r.size = size;
    r.buffer = base;
    r.client_id = &cl->id;
    r.transport_endpoint = "10.0.0.1:7000";
    SECRET(r, cl);
    Crescent__Master__MountSegmentResponse *resp =
        (void *)send_call(f, CR_SUBSYSTEM_SEGMENTS, CRESCENT__MASTER__METHOD__MOUNT_SEGMENT, &r.base);
    assert_int_equal(resp->status_code, CR_OK);
    if (resp->has_client_secret) {
        assert_int_equal(resp->client_secret.len, sizeof(cl->secret));
        memcpy(cl->secret, resp->client_secret.data, sizeof(cl->secret));
        cl->has_secret = 1;
    }
}

static int32_t put(struct fixture *f, struct client *cl, const char *key, int64_t size,
                   int32_t replicas, const char *preferred) {
    Crescent__Master__ReplicateConfig cfg = CRESCENT__MASTER__REPLICATE_CONFIG__INIT;
    cfg.replica_num = replicas;
    cfg.has_replica_num = 1;
    cfg.preferred_segment = (char *)preferred;
    Crescent__Master__PutStartRequest s = CRESCENT__MASTER__PUT_START_REQUEST__INIT;
    s.key = (char *)key;
    s.value_length = size;
    s.config = &cfg;
    s.client_id = &cl->id;
    SECRET(s, cl);
    Crescent__Master__PutStartResponse *started =
        (void *)send_call(f, CR_SUBSYSTEM_SEGMENTS, CRESCENT__MASTER__METHOD__PUT_START, &s.base);
    if (started->status_code != CR_OK) return started->status_code;
    Crescent__Master__PutEndRequest e = CRESCENT__MASTER__PUT_END_REQUEST__INIT;
    e.key = (char *)key;
    e.client_id = &cl->id;
    SECRET(e, cl);
    Crescent__Master__PutEndResponse *ended =
        (void *)send_call(f, CR_SUBSYSTEM_SEGMENTS, CRESCENT__MASTER__METHOD__PUT_END, &e.base);
    return ended->status_code;
}

static void ping(struct fixture *f, struct client *cl) {
    Crescent__Master__PingRequest r = CRESCENT__MASTER__PING_REQUEST__INIT;
    r.client_id = &cl->id;
    SECRET(r, cl);
    Crescent__Master__PingResponse *resp =
        (void *)send_call(f, CR_SUBSYSTEM_SEGMENTS, CRESCENT__MASTER__METHOD__PING, &r.base);
    assert_int_equal(resp->status_code, CR_OK);
}

/* CreateCopyTask of key from `source` to one target: the task id. */
static Crescent__Master__UUID *copy(struct fixture *f, const char *key, const char *source,
                                    const char *target) {
    Crescent__Master__CreateCopyTaskRequest r = CRESCENT__MASTER__CREATE_COPY_TASK_REQUEST__INIT;
    char *targets[] = {(char *)target};
    r.key = (char *)key;
    r.source = (char *)source;
    r.targets = targets;
    r.n_targets = 1;
    Crescent__Master__CreateCopyTaskResponse *resp = (void *)send_call(
        f, CR_SUBSYSTEM_SEGMENTS, CRESCENT__MASTER__METHOD__CREATE_COPY_TASK, &r.base);
    assert_int_equal(resp->status_code, CR_OK);
    assert_non_null(resp->task_id);
    return resp->task_id;
}

static Crescent__Master__QueryTaskResponse *query(struct fixture *f, Crescent__Master__UUID *id) {
    Crescent__Master__QueryTaskRequest r = CRESCENT__MASTER__QUERY_TASK_REQUEST__INIT;
    r.task_id = id;
    Crescent__Master__QueryTaskResponse *resp =
        (void *)send_call(f, CR_SUBSYSTEM_TASKS, CRESCENT__MASTER__METHOD__QUERY_TASK, &r.base);
    assert_int_equal(resp->status_code, CR_OK);
    return resp;
}

static Crescent__Master__FetchTasksResponse *fetch(struct fixture *f, struct client *cl) {
    Crescent__Master__FetchTasksRequest r = CRESCENT__MASTER__FETCH_TASKS_REQUEST__INIT;
    r.client_id = &cl->id;
    SECRET(r, cl);
    Crescent__Master__FetchTasksResponse *resp =
        (void *)send_call(f, CR_SUBSYSTEM_SEGMENTS, CRESCENT__MASTER__METHOD__FETCH_TASKS, &r.base);
    assert_int_equal(resp->status_code, CR_OK);
    return resp;
}

static Crescent__Master__MarkTaskToCompleteResponse *report(struct fixture *f, struct client *cl,
                                                            Crescent__Master__UUID *id) {
    Crescent__Master__MarkTaskToCompleteRequest r =
        CRESCENT__MASTER__MARK_TASK_TO_COMPLETE_REQUEST__INIT;
    r.client_id = &cl->id;
    r.task_id = id;
    r.status = CRESCENT__MASTER__TASK_STATUS__SUCCESS;
    SECRET(r, cl);
    return (void *)send_call(f, CR_SUBSYSTEM_SEGMENTS,
                             CRESCENT__MASTER__METHOD__MARK_TASK_TO_COMPLETE, &r.base);
}

/* The segments holding a COMPLETE replica of key, "a,b," style, sorted. */
static void complete_on(struct fixture *f, const char *key, char *out, size_t len) {
    Crescent__Master__GetReplicaListRequest r = CRESCENT__MASTER__GET_REPLICA_LIST_REQUEST__INIT;
    r.key = (char *)key;
    Crescent__Master__GetReplicaListResponse *resp = (void *)send_call(
        f, CR_SUBSYSTEM_SEGMENTS, CRESCENT__MASTER__METHOD__GET_REPLICA_LIST, &r.base);
    out[0] = '\0';
    const char *names[8];
    size_t n = 0;
    for (size_t i = 0; i < resp->n_replica_list && n < 8; i++) {
        const Crescent__Master__ReplicaInfo *r = resp->replica_list[i];
        if (r->status == CRESCENT__MASTER__REPLICA_INFO__REPLICA_STATUS__COMPLETE &&
            r->n_handles > 0)
            names[n++] = r->handles[0]->segment_name;
    }
    for (size_t i = 1; i < n; i++) /* insertion sort: a handful */
        for (size_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            const char *t = names[j];
            names[j] = names[j - 1], names[j - 1] = t;
        }
    for (size_t i = 0; i < n; i++)
        snprintf(out + strlen(out), len - strlen(out), "%s,", names[i]);
}

static void uuid_text(const Crescent__Master__UUID *id, char out[37]) {
    struct cr_uuid u;
    cr_rpc_uuid_from_pb(id, &u);
    cr_task_id_format(&u, out);
}

static bool same_uuid(const Crescent__Master__UUID *a, const Crescent__Master__UUID *b) {
    return a->first == b->first && a->second == b->second;
}

/* ---- tests ----------------------------------------------------------------- */

/* A's client misses its pings while it holds a fetched task: the task goes
 * to B (which holds a complete replica) with the target reserved anew; A's
 * late report is refused and changes nothing; B's report commits. */
static void test_lost_executor_task_goes_to_another_replica_holder(void **state) {
    (void)state;
    struct fixture *f = start();
    mount(f, &f->a, "seg-a", 4 * MiB, 0x100000);
    mount(f, &f->b, "seg-b", 4 * MiB, 0x100000);
    assert_int_equal(put(f, &f->a, "k", 64 * KiB, 2, NULL), CR_OK);
    mount(f, &f->c, "seg-c", 4 * MiB, 0x100000);
    char on[64];
    complete_on(f, "k", on, sizeof(on));
    assert_string_equal(on, "seg-a,seg-b,");
    Crescent__Master__UUID *task = copy(f, "k", "seg-a", "seg-c");
    Crescent__Master__FetchTasksResponse *got = fetch(f, &f->a);
    assert_int_equal(got->n_tasks, 1);
    uint64_t first_target = got->tasks[0]->targets[0]->buffer;
    assert_int_equal(query(f, task)->status, CRESCENT__MASTER__TASK_STATUS__PROCESSING);
    /* A goes silent; B and C ping every second until A's TTL (10 s) is over. */
    Crescent__Master__QueryTaskResponse *q = NULL;
    for (int s = 0; s < 30; s++) {
        atomic_fetch_add(&f->now_ns, 1000000000ull);
        cr_runtime_clock_changed(f->rt);
        ping(f, &f->b);
        ping(f, &f->c);
        q = query(f, task);
        if (q->status == CRESCENT__MASTER__TASK_STATUS__PENDING) break;
    }
    WAIT_FOR((q = query(f, task))->status == CRESCENT__MASTER__TASK_STATUS__PENDING);
    assert_true(same_uuid(q->assigned_client, &f->b.id));
    char a_id[37];
    uuid_text(&f->a.id, a_id);
    assert_non_null(strstr(q->message, a_id));
    assert_non_null(strstr(q->message, "was lost"));
    assert_non_null(strstr(q->message, "reassigned to client"));
    /* The copy's target is still not readable; the source segment is gone. */
    complete_on(f, "k", on, sizeof(on));
    assert_string_equal(on, "seg-b,");
    /* A's late report: refused, nothing changes. */
    Crescent__Master__MarkTaskToCompleteResponse *late = report(f, &f->a, task);
    assert_int_equal(late->status_code, CR_ERR_ILLEGAL_CLIENT);
    assert_non_null(strstr(late->error_message, "reassigned"));
    assert_non_null(strstr(late->error_message, "changes nothing"));
    assert_int_equal(query(f, task)->status, CRESCENT__MASTER__TASK_STATUS__PENDING);
    complete_on(f, "k", on, sizeof(on));
    assert_string_equal(on, "seg-b,");
    /* B takes it: read from seg-b, into a target reserved anew (A may still
     * write into the old one if it was only stopped). */
    got = fetch(f, &f->b);
    assert_int_equal(got->n_tasks, 1);
    assert_string_equal(got->tasks[0]->source->segment_name, "seg-b");
    assert_string_equal(got->tasks[0]->targets[0]->segment_name, "seg-c");
    assert_true(got->tasks[0]->targets[0]->buffer != first_target);
    assert_int_equal(report(f, &f->b, task)->status_code, CR_OK);
    q = query(f, task);
    assert_int_equal(q->status, CRESCENT__MASTER__TASK_STATUS__SUCCESS);
    assert_non_null(strstr(q->message, a_id));
    complete_on(f, "k", on, sizeof(on));
    assert_string_equal(on, "seg-b,seg-c,");
    stop(f);
}

/* B unmounts the only segment holding the object while its task is out:
 * the task FAILS at once, naming B and its segment, and the target space
 * is free again (a put that needs all of seg-c fits: before, none did). */
static void test_lost_source_without_another_replica_fails_and_frees(void **state) {
    (void)state;
    struct fixture *f = start();
    mount(f, &f->b, "seg-b", 64 * KiB, 0x100000); /* both full with one object */
    assert_int_equal(put(f, &f->b, "solo", 64 * KiB, 1, "seg-b"), CR_OK);
    mount(f, &f->c, "seg-c", 64 * KiB, 0x100000);
    Crescent__Master__UUID *task = copy(f, "solo", "seg-b", "seg-c");
    assert_int_equal(fetch(f, &f->b)->n_tasks, 1);
    assert_int_equal(put(f, &f->c, "probe", 64 * KiB, 1, "seg-c"),
                     CR_ERR_NO_AVAILABLE_HANDLE); /* seg-c is reserved for the copy */
    Crescent__Master__UnmountSegmentRequest u = CRESCENT__MASTER__UNMOUNT_SEGMENT_REQUEST__INIT;
    u.segment_name = "seg-b";
    u.client_id = &f->b.id;
    SECRET(u, &f->b);
    Crescent__Master__UnmountSegmentResponse *un = (void *)send_call(
        f, CR_SUBSYSTEM_SEGMENTS, CRESCENT__MASTER__METHOD__UNMOUNT_SEGMENT, &u.base);
    assert_int_equal(un->status_code, CR_OK);
    Crescent__Master__QueryTaskResponse *q;
    WAIT_FOR((q = query(f, task))->status == CRESCENT__MASTER__TASK_STATUS__FAILED);
    char b_id[37];
    uuid_text(&f->b.id, b_id);
    assert_non_null(strstr(q->message, b_id));
    assert_non_null(strstr(q->message, "seg-b"));
    assert_non_null(strstr(q->message, "reserved replicas freed"));
    assert_int_equal(put(f, &f->c, "probe", 64 * KiB, 1, "seg-c"), CR_OK);
    /* B's report after the fact is refused: the task has ended. */
    assert_int_equal(report(f, &f->b, task)->status_code, CR_ERR_INVALID_PARAMS);
    stop(f);
}

/* --task-max-in-flight: one task more than the flag allows is refused with
 * a message naming the flag, and counted. */
static void test_in_flight_bound_is_the_flag(void **state) {
    (void)state;
    struct fixture *f = start_with(1);
    mount(f, &f->b, "seg-b", 4 * MiB, 0x100000);
    mount(f, &f->c, "seg-c", 4 * MiB, 0x100000);
    assert_int_equal(put(f, &f->b, "k1", 4 * KiB, 1, "seg-b"), CR_OK);
    assert_int_equal(put(f, &f->b, "k2", 4 * KiB, 1, "seg-b"), CR_OK);
    (void)copy(f, "k1", "seg-b", "seg-c");
    Crescent__Master__CreateCopyTaskRequest r = CRESCENT__MASTER__CREATE_COPY_TASK_REQUEST__INIT;
    char *targets[] = {"seg-c"};
    r.key = "k2", r.targets = targets, r.n_targets = 1;
    Crescent__Master__CreateCopyTaskResponse *resp = (void *)send_call(
        f, CR_SUBSYSTEM_SEGMENTS, CRESCENT__MASTER__METHOD__CREATE_COPY_TASK, &r.base);
    assert_int_equal(resp->status_code, CR_ERR_NOMEM);
    assert_non_null(strstr(resp->error_message, "--task-max-in-flight"));
    assert_int_equal(tasks_stat(f, "refused_full_total"), 1);
    assert_int_equal(tasks_stat(f, "max_in_flight"), 1);
    stop(f);
}

/* An answer tasks cannot send (its gateway's ring full past send_wait_ns)
 * is kept and sent when the ring has room, in order: dropped, its call would
 * stay in flight for good at the edge that counts it (issue 28's flood). */
static void test_answers_wait_for_a_full_ring(void **state) {
    (void)state;
    enum { SLOTS = 8, CALLS = 64 };
    struct fixture *f = start_rings(4096, SLOTS, 5000000ull); /* 5 ms waits */
    atomic_store(&f->gateway.hold, 1);
    Crescent__Master__UUID unknown = CRESCENT__MASTER__UUID__INIT;
    unknown.first = 1, unknown.second = 2;
    Crescent__Master__QueryTaskRequest q = CRESCENT__MASTER__QUERY_TASK_REQUEST__INIT;
    q.task_id = &unknown;
    uint64_t first = 0, last = 0;
    for (int i = 0; i < CALLS; i++) {
        last = send_call_async(f, CR_SUBSYSTEM_TASKS, CRESCENT__MASTER__METHOD__QUERY_TASK, &q.base);
        if (i == 0) first = last;
    }
    WAIT_FOR(atomic_load(&f->gateway.held) && tasks_stat(f, "replies_waiting") > 0);
    assert_true(tasks_stat(f, "replies_delayed_total") >= 1);
    atomic_store(&f->gateway.hold, 0);
    /* tasks sends them again at the end of its rounds (a stats ask is one;
     * in crescentd its 1 s tick is the latest). */
    WAIT_FOR(tasks_stat(f, "replies_waiting") == 0);
    for (uint64_t id = first; id <= last; id++) WAIT_FOR(atomic_load(&f->gateway.done[id]));
    assert_int_equal(tasks_stat(f, "replies_lost_total"), 0);
    stop(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_answers_wait_for_a_full_ring),
        cmocka_unit_test(test_lost_executor_task_goes_to_another_replica_holder),
        cmocka_unit_test(test_lost_source_without_another_replica_fails_and_frees),
        cmocka_unit_test(test_in_flight_bound_is_the_flag),
    };
    return cmocka_run_group_tests_name("tasks_actor", tests, NULL, NULL);
}
