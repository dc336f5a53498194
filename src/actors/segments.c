/* The segments actor: the store master's mechanism.
 *
 * Owns the cr_store (segments, allocators, objects, replicas, leases,
 * clients).  It runs the RPC calls the gateway hands over (CR_MSG_MASTER_CALL
 * → CR_MSG_MASTER_DONE, finished calls chained: one message per batch),
 * answers the leases actor's eviction polls with a
 * usage figure and a sample of candidates, revalidates and applies the
 * victims it chooses, reclaims zombie puts when told to, expires silent
 * clients every second, reserves, commits and rolls back the replicas of
 * copy/move tasks for the tasks actor (task_store.c), and turns every store
 * change into a store event: a round's events go into one
 * cr_store_event_chain shared by reference count, the publisher and the
 * indexer each getting a reference (sent lazily: see cr_send_lazy).
 *
 * Time is the runtime's clock (cr_runtime_now_ns), so tests can inject it. */
#include <assert.h>
#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "rpc/edge.h"
#include "rpc/rpc_codec.h"
#include "rpc/rpc_methods.h"
#include "actors/task_store.h"
#include "actors/subsystems.h"
#include "runtime/wait_timer.h"
#include "core/log.h"
#include "core/store.h"
#include "crescent/error.h"
#include "daemon/config.h"
#include "http/store_routes.h"
#include "msgs/master_msgs.h"
#include "msgs/store_event.h"
#include "msgs/store_msgs.h"
#include "msgs/task_msgs.h"
#include "actors/segments_internal.h"
#include "actors/segments_drain.h"
#include "actors/segments_mc.h"
#include "actors/segments_recent.h"
#include "http/mooncake_quotas.h"
#include "durable/role.h"
#include "runtime/stats_extra.h"

static const char *const segments_views[] = {"rpc",          "rpc_tcp",     "rpc_shm",
                                             "mooncake_rpc", "store_calls", "mooncake_calls",
                                             NULL};

/* The "store_calls" view: refusals of the single-key and segment calls
 * (every endpoint's: ZMQ, native, shm, Mooncake's), as Mooncake counts its
 * master_*_failures_total.  Batches are left out: their verdict is per
 * entry, which Mooncake counts as items and partial successes. */
static const struct {
    uint16_t method;
    const char *stat;
} failure_stats[] = {
    {CRESCENT__MASTER__METHOD__EXIST_KEY, "failures_exist_key_total"},
    {CRESCENT__MASTER__METHOD__PUT_START, "failures_put_start_total"},
    {CRESCENT__MASTER__METHOD__PUT_END, "failures_put_end_total"},
    {CRESCENT__MASTER__METHOD__PUT_REVOKE, "failures_put_revoke_total"},
    {CRESCENT__MASTER__METHOD__GET_REPLICA_LIST, "failures_get_replica_list_total"},
    {CRESCENT__MASTER__METHOD__GET_REPLICA_LIST_BY_REGEX, "failures_get_replica_list_by_regex_total"},
    {CRESCENT__MASTER__METHOD__REMOVE, "failures_remove_total"},
    {CRESCENT__MASTER__METHOD__REMOVE_BY_REGEX, "failures_remove_by_regex_total"},
    {CRESCENT__MASTER__METHOD__REMOVE_ALL, "failures_remove_all_total"},
    {CRESCENT__MASTER__METHOD__MOUNT_SEGMENT, "failures_mount_segment_total"},
    {CRESCENT__MASTER__METHOD__REMOUNT_SEGMENT, "failures_remount_segment_total"},
    {CRESCENT__MASTER__METHOD__UNMOUNT_SEGMENT, "failures_unmount_segment_total"},
    {CRESCENT__MASTER__METHOD__PING, "failures_ping_total"},
};

/* A call answered with a refusal (status_code != OK). */
static void count_failure(struct segments_state *st, const struct cr_master_call *call, int rc) {
    if (call->method >= CR_RPC_METHOD_SLOTS) return;
    st->method_failures[call->method]++;
    if (call->method == CRESCENT__MASTER__METHOD__PUT_START && rc == CR_ERR_NO_AVAILABLE_HANDLE)
        st->put_start_no_room++;
}

/* ------------------------------------------------------------------------ */
/* Store events → publisher and indexer */

/* Starts the round's chain of `tenant`'s events, with room for events_room
 * bytes or `need`, whichever is more. */
static int events_open(struct segments_state *st, size_t need, const char *tenant,
                       size_t tenant_len) {
    assert(st->events == NULL && tenant_len <= CR_MASTER_TENANT_MAX);
    assert(st->events_room >= EVENT_CHAIN_BYTES_MIN && st->events_room <= EVENT_CHAIN_BYTES_MAX);
    int rc = cr_store_event_chain_new(need > st->events_room ? need : st->events_room,
                                      &st->events);
    if (rc != CR_OK) return rc;
    memcpy(st->events_tenant, tenant, tenant_len);
    st->events_tenant[tenant_len] = '\0';
    st->events_tenant_len = (uint32_t)tenant_len;
    st->events_since_ns = cr_actor_now_ns(st->self); /* the round's reading: no clock call */
    return CR_OK;
}

/* Hands a consumer the chain and one reference to it; drops that reference
 * if the consumer cannot take it. */
static void events_send_to(struct segments_state *st, enum cr_subsystem to,
                           cr_store_event_chain *chain) {
    uint32_t count = chain->count; /* once sent, the chain may be gone */
    struct cr_msg msg = {.type = CR_MSG_STORE_EVENT};
    struct cr_msg_store_event *body = CR_MSG_BODY(&msg, struct cr_msg_store_event);
    _Static_assert(sizeof(body->tenant) > CR_MASTER_TENANT_MAX, "a tenant fits the body");
    body->chain = chain;
    memcpy(body->tenant, st->events_tenant, st->events_tenant_len + 1);
    body->since_ns = st->events_since_ns;
    /* Lazy: under load the consumers take chains in batches rather than
     * being woken (a syscall here, a park there) for each. */
    if (cr_send_lazy(st->peers->actors[to], &msg) != CR_OK) {
        st->events_dropped += count;
        cr_store_event_chain_release(chain);
        return;
    }
    st->events_sent += count;
}

/* The next chain's room: what this one used, or twice its room when `full`. */
static void events_size_next(struct segments_state *st, const cr_store_event_chain *chain,
                             bool full) {
    size_t want = full ? 2 * chain->capacity : chain->used;
    size_t room = EVENT_CHAIN_BYTES_MIN;
    while (room < want && room < EVENT_CHAIN_BYTES_MAX) room *= 2;
    st->events_room = (uint32_t)room;
}

/* Sends the chain being filled, if any, to the publisher and the indexer;
 * `full`: it has no room for the next event. */
static void events_send_sized(struct segments_state *st, bool full) {
    cr_store_event_chain *chain = st->events;
    if (chain == NULL) return;
    st->events = NULL;
    events_size_next(st, chain, full);
    if (chain->count == 0) { /* opened for an event that could not be added */
        cr_store_event_chain_release(chain);
        return;
    }
    cr_store_event_chain_ref(chain); /* the indexer's reference */
    events_send_to(st, CR_SUBSYSTEM_PUBLISHER, chain);
    events_send_to(st, CR_SUBSYSTEM_INDEXER, chain);
}

static void events_send(struct segments_state *st) {
    events_send_sized(st, false);
}

/* Appends the store change to the chain being filled.  A change that does
 * not fit ends that chain and opens the next one, sized for it if it alone
 * is larger (a long token list). */
static int events_add(struct segments_state *st, const struct cr_store_change *ev,
                      const char *tenant, size_t tenant_len) {
    cr_store_replica reps[CR_STORE_REPLICAS_MAX];
    uint32_t n =
        ev->replica_count <= CR_STORE_REPLICAS_MAX ? ev->replica_count : CR_STORE_REPLICAS_MAX;
    for (uint32_t i = 0; i < n; i++) {
        const char *t = ev->replicas[i].type; /* the seed's pair: its type, not always memory */
        reps[i].type = t != NULL && strcmp(t, "local_disk") == 0 ? CR_REPLICA_LOCAL_DISK
                       : t != NULL && strcmp(t, "disk") == 0     ? CR_REPLICA_DISK
                                                                  : CR_REPLICA_MEMORY;
        reps[i].location =
            (cr_event_str){ev->replicas[i].location, strlen(ev->replicas[i].location)};
    }
    cr_store_event_kind kind = ev->kind == CR_STORE_CHANGE_REMOVE_ALL ? CR_STORE_EVENT_REMOVE_ALL
                               : ev->kind == CR_STORE_CHANGE_UPDATE   ? CR_STORE_EVENT_BLOCK_UPDATE
                                                                      : CR_STORE_EVENT_BLOCK_STORE;
    cr_store_event_info info = {0};
    const struct cr_store_block_meta *m = ev->meta;
    if (m != NULL) {
        info.model_name = (cr_event_str){m->model_name, m->model_name ? strlen(m->model_name) : 0};
        info.block_size = m->block_size;
        info.block_hash = (cr_event_str){m->block_hash, m->block_hash ? strlen(m->block_hash) : 0};
        info.parent_block_hash = (cr_event_str){
            m->parent_block_hash, m->parent_block_hash ? strlen(m->parent_block_hash) : 0};
        info.token_ids = m->token_ids;
        info.token_count = m->token_count;
    }
    cr_event_str key = {ev->key, ev->key_len};
    if (st->events == NULL) {
        int rc = events_open(st, 0, tenant, tenant_len);
        if (rc != CR_OK) return rc;
    }
    size_t need = 0;
    int rc = cr_store_event_chain_add(st->events, kind, key, reps, n, &info, &need);
    if (rc != CR_ERR_AGAIN) return rc;
    events_send_sized(st, true);
    rc = events_open(st, need, tenant, tenant_len);
    if (rc != CR_OK) return rc;
    rc = cr_store_event_chain_add(st->events, kind, key, reps, n, &info, &need);
    assert(rc != CR_ERR_AGAIN); /* a chain of `need` bytes holds it */
    return rc;
}

/* One event per change, for the publisher and the indexer, in the round's
 * chain of its tenant. */
static void on_store_event(void *ctx, const struct cr_store_change *ev) {
    struct segments_state *st = ctx;
    if (st->standby) return; /* the leader's records, applied: the leader publishes them */
    if (st->feed_on) cr_durable_feed_note(&st->feed, ev);
    if (ev->kind == CR_STORE_CHANGE_STORE)
        segments_recent_note(st->recent, ev->tenant, ev->key, ev->key_len);
    if (st->peers == NULL) {
        st->events_dropped += 2;
        return;
    }
    /* The gateway refuses tenants longer than CR_MASTER_TENANT_MAX, so this
     * never cuts. */
    const char *tenant = ev->tenant != NULL ? ev->tenant : "";
    size_t len = strnlen(tenant, CR_MASTER_TENANT_MAX);
    if (st->events != NULL &&
        (len != st->events_tenant_len || memcmp(tenant, st->events_tenant, len) != 0))
        events_send(st); /* a chain is of one tenant */
    if (events_add(st, ev, tenant, len) != CR_OK) {
        st->events_dropped += 2;
        return;
    }
    if (st->events->count == EVENT_CHAIN_MAX) events_send(st);
}

/* ------------------------------------------------------------------------ */
/* RPC calls */

static void notify_no_space(struct segments_state *st) {
    if (st->peers == NULL || st->now_ms - st->last_evict_needed_ms < EVICT_NEEDED_MIN_GAP_MS)
        return;
    st->last_evict_needed_ms = st->now_ms;
    struct cr_msg msg = {.type = CR_MSG_EVICT_NEEDED};
    (void)cr_send(st->peers->actors[CR_SUBSYSTEM_LEASES], &msg); /* the next tick polls anyway */
}

static void done_send(struct segments_state *st, struct done_chain *chain) {
    if (chain->count == 0) return;
    struct cr_msg done = {.type = CR_MSG_MASTER_DONE};
    CR_MSG_BODY(&done, struct cr_msg_master_call)->call = chain->head;
    if (cr_send(chain->to, &done) != CR_OK) {
        st->replies_dropped += chain->count; /* the gateway is stopping */
        cr_master_call_free_chain(chain->head);
    }
    chain->head = chain->tail = NULL;
    chain->count = 0;
}

static void done_send_all(struct segments_state *st) {
    for (uint32_t i = 0; i < st->done_open; i++) done_send(st, &st->done[i]);
    st->done_open = 0;
}

/* Appends a finished call to its gateway's chain. */
static void done_append(struct segments_state *st, struct cr_master_call *call) {
    struct done_chain *chain = NULL;
    for (uint32_t i = 0; i < st->done_open && chain == NULL; i++)
        if (st->done[i].to == call->reply_to) chain = &st->done[i];
    if (chain == NULL) {
        if (st->done_open == DONE_TARGETS_MAX) done_send_all(st);
        chain = &st->done[st->done_open++];
        *chain = (struct done_chain){.to = call->reply_to};
    }
    call->next = NULL;
    if (chain->tail != NULL)
        chain->tail->next = call;
    else
        chain->head = call;
    chain->tail = call;
    if (++chain->count >= st->done_cap) done_send(st, chain);
}

/* A finished call goes back: to its edge's connection at once (edge.h),
 * or in its gateway's MASTER_DONE chain. */
void segments_finish(struct segments_state *st, struct cr_master_call *call) {
    if (call->edge == 0) {
        done_append(st, call);
        return;
    }
    assert(call->edge <= st->host.count);
    struct cr_edge *edge = st->host.edges[call->edge - 1];
    cr_rpc_intake_done(&edge->intake, call, cr_actor_now_ns(st->self));
    edge->ops->done(edge, call);
}

/* Whether an edge's call may go to tasks now (AT_TASKS_MAX); a gateway's
 * call (edge 0) is answered to the gateway and bounded there.  False is
 * counted and said, at most once every ten seconds. */
static bool tasks_room(struct segments_state *st, const struct cr_master_call *call) {
    if (call->edge == 0 || st->at_tasks < AT_TASKS_MAX) return true;
    st->tasks_busy++;
    uint64_t now_ns = cr_actor_now_ns(st->self);
    if (cr_log_ratelimit(&st->last_log_ns, now_ns, 10ull * 1000000000u))
        CR_WARN("segments", "%u RPC calls are waiting for the tasks actor: further task calls "
                "(QueryTask, FetchTasks, ...) are refused busy until they drain "
                "(crescent_segments_tasks_busy_total: %llu)", AT_TASKS_MAX,
                (unsigned long long)st->tasks_busy);
    return false;
}

/* An edge's call went to tasks: its answer comes back as MASTER_DONE.
 * `edge` is the call's, read before the send: once sent, the call is the
 * tasks actor's, which may have answered it and its sender freed it. */
static void tasks_sent(struct segments_state *st, uint8_t edge) {
    if (edge != 0) st->at_tasks++;
}

/* CreateCopyTask/CreateMoveTask: the targets are reserved here, then the
 * call goes on to tasks, which answers it; a refusal is answered from here.
 * `ask`: the message when the call came as an ask (refused), else NULL. */
static void on_task_create(struct segments_state *st, struct cr_msg *ask,
                           struct cr_master_call *call) {
    struct cr_task_detail *detail = NULL;
    if (ask != NULL) {
        cr_task_call_refuse(call, CR_ERR_INVALID_PARAMS, "tasks are created over RPC only");
        cr_reply(ask, call->status);
        return;
    }
    bool room = tasks_room(st, call);
    int rc = room ? cr_task_store_create(st->store, st->now_ms, call, &detail) : CR_ERR_AGAIN;
    if (!room) cr_task_call_refuse(call, CR_ERR_AGAIN, "the tasks actor is busy; retry");
    if (rc == CR_OK) {
        struct cr_msg fwd = {.type = CR_MSG_TASK_CREATE};
        struct cr_msg_task_create *body = CR_MSG_BODY(&fwd, struct cr_msg_task_create);
        body->call = call, body->detail = detail;
        uint8_t edge = call->edge;
        if (cr_send_try(st->peers->actors[CR_SUBSYSTEM_TASKS], &fwd) == CR_OK) {
            tasks_sent(st, edge);
            return;
        }
        cr_store_task_rollback(st->store, &detail->ref);
        free(detail);
        cr_task_call_refuse(call, CR_ERR_AGAIN, "the tasks actor is busy or stopping; retry");
    }
    st->call_errors++;
    segments_mc_note_task_refused(&st->mc, call->method);
    if (call->reply_to == NULL) {
        st->replies_dropped++;
        cr_master_call_free(call);
        return;
    }
    segments_finish(st, call);
}

static void on_task_op(struct segments_state *st, struct cr_task_op *op) {
    cr_task_store_run_op(st->store, st->now_ms, op);
    struct cr_msg done = {.type = CR_MSG_TASK_OP_DONE};
    CR_MSG_BODY(&done, struct cr_msg_task_op)->op = op;
    /* cr_send, which may wait on a full ring: a verdict must not be lost
     * (tasks holds the reservation until it comes), and tasks sends at most
     * one op per task in flight; the calls that share this ring are sent
     * with cr_send_try and refused "busy" instead of waiting. */
    if (cr_send(st->peers->actors[CR_SUBSYSTEM_TASKS], &done) != CR_OK) {
        st->task_ops_dropped++; /* tasks is stopping: its deadlines are gone too */
        free(op);
    }
}

/* After an unmount or a client's expiry, tasks checks that the executors of
 * its tasks still hold their sources (reassigning or failing those that do
 * not).  A send that fails is retried at the next tick. */
static void tell_tasks_recheck(struct segments_state *st) {
    st->task_recheck_due = true;
    if (st->peers == NULL || st->peers->actors[CR_SUBSYSTEM_TASKS] == NULL) return;
    struct cr_msg msg = {.type = CR_MSG_TASKS_RECHECK};
    if (cr_send_try(st->peers->actors[CR_SUBSYSTEM_TASKS], &msg) == CR_OK)
        st->task_recheck_due = false;
}

/* A ping that asks for its client's tasks goes on to tasks, which adds them
 * to the packed response and answers; false (tasks stopping or its ring
 * full): the ping is answered here without tasks, and the executor gets them
 * at its next ping.  FetchTasks and MarkTaskToComplete whose secret passed
 * go on the same way (refused with "retry" when tasks cannot take them). */
static bool ping_to_tasks(struct segments_state *st, struct cr_master_call *call) {
    struct cr_msg fwd = {.type = CR_MSG_MASTER_CALL};
    CR_MSG_BODY(&fwd, struct cr_msg_master_call)->call = call;
    uint8_t edge = call->edge;
    if (tasks_room(st, call) && cr_send_try(st->peers->actors[CR_SUBSYSTEM_TASKS], &fwd) == CR_OK) {
        tasks_sent(st, edge);
        return true;
    }
    st->task_pings_unforwarded++;
    return false;
}

/* Runs a call (with its finished regex scan, if any) and sends it back. */
static void run_call(struct segments_state *st, struct cr_master_call *call, bool ask,
                     const struct cr_store_regex_scan *scan,
                     const struct cr_store_remove_all_run *removed) {
    struct cr_rpc_run run = {.store = st->store,
                             .arena = st->arena,
                             .now_ms = st->now_ms,
                             .client_ttl_ms = st->client_ttl_ms,
                             .scan = scan,
                             .remove_all = removed,
                             .files = &st->files,
                             .reads = &st->reads};
    st->calls++;
    st->round_calls++;
    uint64_t changes = st->feed.changes;
    int rc = cr_rpc_methods_run(&run, call);
    if (rc != CR_OK) st->call_errors++, count_failure(st, call, rc);
    segments_mc_note_call(&st->mc, call->method, rc, &run.outcome);
    if (st->feed_on && (call->method == CRESCENT__MASTER__METHOD__MOUNT_SEGMENT ||
                        call->method == CRESCENT__MASTER__METHOD__REMOUNT_SEGMENT ||
                        call->method == CRESCENT__MASTER__METHOD__UNMOUNT_SEGMENT))
        cr_durable_feed_note_segments(&st->feed);
    /* --durability sync: a call that changed the store is answered once its
     * round's records are on disk. */
    bool hold = st->feed_on && (st->durability == CR_DURABILITY_SYNC || st->repl_sync) &&
                st->feed.changes != changes;
    if (call->method == CRESCENT__MASTER__METHOD__UNMOUNT_SEGMENT) tell_tasks_recheck(st);
    if (run.no_space) notify_no_space(st);
    if (ask) return; /* the asker owns the call */
    if (call->reply_to == NULL) {
        st->replies_dropped++;
        cr_master_call_free(call);
        return;
    }
    if (rc == CR_OK && cr_task_ping_wants_tasks(call) && ping_to_tasks(st, call)) return;
    if (rc == CR_OK && cr_rpc_methods_task_gated(call->method) && call->reply == NULL) {
        if (ping_to_tasks(st, call)) return;
        const struct cr_rpc_method *m = cr_rpc_method_find(call->method);
        assert(m != NULL);
        if (cr_rpc_pack_status(m->response, CR_ERR_AGAIN,
                               "the tasks actor is busy or stopping; retry", &call->reply,
                               &call->reply_len) != CR_OK)
            cr_rpc_reply_nomem(call);
    }
    if (hold) {
        segments_durable_hold(st, call);
        return;
    }
    segments_finish(st, call);
}

/* Asks for the next regex slice in the next loop round (a timer due now:
 * timers armed by a handler fire in the next round, after its messages). */
static bool regex_arm(struct segments_state *st) {
    if (st->regex_step_armed) return true;
    struct cr_msg step = {.type = CR_MSG_SEGMENTS_REGEX_STEP};
    st->regex_step_armed = cr_actor_timer_after(st->self, 0, &step, NULL) == CR_OK;
    return st->regex_step_armed;
}

/* One slice of the oldest regex call; a finished call is applied and sent.
 * Without a timer slot the scan runs to its end here (still bounded by
 * regex_budget_steps). */
/* One slice of a RemoveAll's walk; true once it is done.  Without a timer
 * slot the walk runs to its end here. */
static bool remove_all_slice(struct segments_state *st, const char *tenant, bool force) {
    if (!st->remove_all_active) {
        cr_store_remove_all_begin(st->store, tenant, force, st->now_ms, &st->remove_all);
        st->remove_all_active = true;
    }
    st->remove_all_slices++;
    if (cr_store_remove_all_step(st->store, &st->remove_all, REMOVE_ALL_SLICE_SLOTS, st->now_ms))
        return true;
    if (regex_arm(st)) return false;
    return cr_store_remove_all_step(st->store, &st->remove_all, UINT32_MAX, st->now_ms);
}

static void regex_step(struct segments_state *st) {
    st->regex_step_armed = false;
    struct cr_master_call *call = st->regex_head;
    if (call == NULL) return;
    const char *all_tenant;
    bool force;
    if (cr_rpc_methods_remove_all(call, &all_tenant, &force)) {
        if (!remove_all_slice(st, all_tenant, force)) return;
        st->regex_head = call->next;
        if (st->regex_head == NULL) st->regex_tail = NULL;
        call->next = NULL;
        run_call(st, call, false, NULL, &st->remove_all);
        st->remove_all_active = false;
        if (st->regex_head != NULL && !regex_arm(st)) regex_step(st);
        return;
    }
    if (st->regex_scan == NULL) {
        const char *tenant, *pattern;
        bool regex = cr_rpc_methods_regex(call, &tenant, &pattern);
        assert(regex);
        (void)regex;
        if (cr_store_regex_scan_new(st->store, tenant, pattern, &st->regex_scan) != CR_OK)
            st->regex_scan = NULL; /* out of memory: the call scans whole below, or fails */
    }
    if (st->regex_scan != NULL) {
        st->regex_slices++;
        int rc = cr_store_regex_scan_run(st->store, st->regex_scan, REGEX_SLICE_STEPS);
        if (rc == CR_ERR_AGAIN && regex_arm(st)) return;
        if (rc == CR_ERR_AGAIN) (void)cr_store_regex_scan_run(st->store, st->regex_scan, UINT64_MAX);
    }
    st->regex_head = call->next;
    if (st->regex_head == NULL) st->regex_tail = NULL;
    call->next = NULL;
    run_call(st, call, false, st->regex_scan, NULL);
    cr_store_regex_scan_free(st->store, st->regex_scan);
    st->regex_scan = NULL;
    if (st->regex_head != NULL && !regex_arm(st)) regex_step(st);
}

/* Runs a call that came as a message (`ask`: the message when an ask, else
 * NULL) or from an edge (inline, ask NULL). */
static void serve_call(struct segments_state *st, struct cr_master_call *call,
                       struct cr_msg *ask_msg) {
    bool ask = ask_msg != NULL;
    const char *tenant, *pattern;
    if (st->ha != NULL && segments_ha_refuse(st, call, ask_msg)) return;
    if (segments_repl_refuse(st, call, ask_msg)) return; /* a standby: not the leader */
    if (cr_task_method_creates(call->method)) {
        st->calls++;
        on_task_create(st, ask_msg, call);
        return;
    }
    /* An ask must be answered by its handler: its regex scans whole (and
     * its RemoveAll walks whole). */
    bool force;
    if (!ask && st->self != NULL &&
        (cr_rpc_methods_regex(call, &tenant, &pattern) ||
         cr_rpc_methods_remove_all(call, &tenant, &force))) {
        call->next = NULL;
        if (st->regex_tail != NULL)
            st->regex_tail->next = call;
        else
            st->regex_head = call;
        st->regex_tail = call;
        if (!regex_arm(st)) regex_step(st);
        return;
    }
    run_call(st, call, ask, NULL, NULL);
    if (ask) cr_reply(ask_msg, call->status);
}

static void on_call(struct segments_state *st, struct cr_msg *msg) {
    serve_call(st, CR_MSG_BODY(msg, struct cr_msg_master_call)->call,
               (msg->flags & CR_MSG_ASK) ? msg : NULL);
}

/* ------------------------------------------------------------------------ */
/* The edges (edge.h) */

static uint64_t edge_tag(const struct cr_edge *edge, uint64_t tag) {
    assert(tag <= CR_EDGE_TAG_MAX);
    return (uint64_t)edge->index << 56 | tag;
}

bool cr_edge_watch(struct cr_edge *edge, int fd, uint32_t events, uint64_t tag) {
    struct epoll_event ev = {.events = events, .data.u64 = edge_tag(edge, tag)};
    if (epoll_ctl(edge->host->epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        CR_ERROR("segments", "%s: epoll_ctl(ADD) failed: %s", edge->name, strerror(errno));
        return false;
    }
    edge->host->watched++;
    return true;
}

bool cr_edge_rewatch(struct cr_edge *edge, int fd, uint32_t events, uint64_t tag) {
    struct epoll_event ev = {.events = events, .data.u64 = edge_tag(edge, tag)};
    if (epoll_ctl(edge->host->epoll_fd, EPOLL_CTL_MOD, fd, &ev) == 0) return true;
    CR_ERROR("segments", "%s: epoll_ctl(MOD) failed: %s", edge->name, strerror(errno));
    return false;
}

void cr_edge_unwatch(struct cr_edge *edge, int fd) {
    if (epoll_ctl(edge->host->epoll_fd, EPOLL_CTL_DEL, fd, NULL) == 0) edge->host->watched--;
}

void cr_edge_again(struct cr_edge *edge, uint64_t tag) {
    struct cr_edge_host *h = edge->host;
    assert(tag <= CR_EDGE_TAG_MAX);
    h->again_tag[edge->index] = tag;
    if (!h->again[edge->index]) h->again[edge->index] = true, h->again_count++;
}

uint64_t cr_edge_now_ns(const struct cr_edge *edge) {
    return cr_actor_now_ns(edge->host->st->self);
}

bool cr_edge_submit(struct cr_edge *edge, struct cr_master_call *call, const uint8_t *body,
                    size_t len, struct cr_rpc_refusal *out) {
    struct segments_state *st = edge->host->st;
    assert(call->edge == 0 && edge->host->edges[edge->index] == edge);
    if (!cr_rpc_intake_check(&edge->intake, call, body, len, out)) return false;
    call->edge = (uint8_t)(edge->index + 1);
    /* Another actor's call goes by message and comes back as MASTER_DONE. */
    if (cr_rpc_intake_for_tasks(call)) {
        if (!tasks_room(st, call)) {
            edge->intake.not_ready++;
            cr_rpc_refusal_text(out, CR_ERR_AGAIN, "the tasks actor is busy; retry");
            call->edge = 0;
            return false;
        }
        uint8_t edge_id = call->edge;
        if (!cr_rpc_intake_forward(&edge->intake, call, out)) {
            call->edge = 0;
            return false;
        }
        tasks_sent(st, edge_id);
        return true;
    }
    call->reply_to = st->self; /* where tasks answers a call segments passes on */
    edge->intake.in_flight++;
    st->now_ms = cr_actor_now_ns(st->self) / 1000000u;
    serve_call(st, call, NULL);
    return true;
}

int cr_segments_edge_add(void *segments_state, struct cr_edge *edge) {
    struct segments_state *st = segments_state;
    struct cr_edge_host *h = &st->host;
    if (h->count == CR_EDGES_MAX) {
        CR_ERROR("segments", "cannot serve the RPC endpoint %s: segments serves at most %u "
                 "endpoints (CR_EDGES_MAX in src/rpc/edge.h)", edge->name, CR_EDGES_MAX);
        edge->ops->destroy(edge);
        return CR_ERR_NOMEM;
    }
    edge->host = h;
    edge->index = (uint8_t)h->count;
    h->edges[h->count++] = edge;
    return CR_OK;
}

/* MASTER_DONE: calls of the edges that went on to tasks come back. */
static void on_edge_calls_done(struct segments_state *st, struct cr_master_call *call) {
    while (call != NULL) {
        struct cr_master_call *next = call->next;
        call->next = NULL;
        if (call->edge == 0) { /* a drain job's move (segments_drain.c): answered, done */
            cr_master_call_free(call);
            call = next;
            continue;
        }
        assert(st->at_tasks > 0);
        st->at_tasks--;
        segments_finish(st, call);
        call = next;
    }
}

/* Blocks until an edge fd or the wake fd is ready (or the timeout); what it
 * found is served by the next poll, in the loop round that follows. */
static void segments_wait(struct cr_actor *self, void *arg, int wake_fd, int64_t timeout_ns) {
    struct cr_edge_host *h = &((struct segments_state *)arg)->host;
    if (!h->wake_added) {
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = EDGE_WAKE_TAG};
        h->wake_added = epoll_ctl(h->epoll_fd, EPOLL_CTL_ADD, wake_fd, &ev) == 0;
        if (!h->wake_added) {
            CR_ERROR("segments", "epoll_ctl(ADD) of the wake fd failed: %s", strerror(errno));
            struct pollfd pfd = {.fd = wake_fd, .events = POLLIN};
            (void)poll(&pfd, 1, cr_timeout_ms(timeout_ns)); /* the mailbox is still served */
            return;
        }
    }
    /* An edge to serve again next round (cr_edge_again): look, do not sleep. */
    if (h->again_count > 0) timeout_ns = 0;
    /* Edges with rings (edge.h arm) must be told to wake us before we block. */
    uint32_t armed = 0;
    while (timeout_ns != 0 && armed < h->count &&
           (h->edges[armed]->ops->arm == NULL || h->edges[armed]->ops->arm(h->edges[armed])))
        armed++;
    if (armed < h->count && timeout_ns != 0) timeout_ns = 0; /* input came: do not block */
    int n = epoll_wait(h->epoll_fd, h->found, EDGE_EVENTS,
                       cr_wait_timer_before(&h->timer, timeout_ns, cr_monotonic_ns()));
    if (n < 0 && errno != EINTR) CR_ERROR("segments", "epoll_wait failed: %s", strerror(errno));
    h->found_count = n > 0 ? n : 0;
    bool woken = false;
    for (int i = 0; i < h->found_count; i++) woken |= h->found[i].data.u64 == EDGE_WAKE_TAG;
    if (n >= 0 && !woken) cr_actor_wait_saw_no_wake(self); /* no read(2) of it that finds nothing */
    for (uint32_t i = 0; i < armed; i++)
        if (h->edges[i]->ops->disarm != NULL) h->edges[i]->ops->disarm(h->edges[i]);
}

/* The runtime's spin_poll: the edges' rings, no syscall; -1 when no edge
 * has any (then segments does not spin, as any socket actor). */
static int32_t segments_spin_poll(struct cr_actor *self, void *arg) {
    (void)self;
    struct cr_edge_host *h = &((struct segments_state *)arg)->host;
    int32_t work = -1;
    for (uint32_t i = 0; i < h->count; i++) {
        int32_t n = h->edges[i]->ops->poll != NULL ? h->edges[i]->ops->poll(h->edges[i]) : -1;
        if (n >= 0) work = (work > 0 ? work : 0) + n;
    }
    return work;
}

/* Serves what wait found, or what is ready now: each ready edge fd goes to
 * its edge.  Returns the fds served (the round's work). */
static uint32_t segments_poll(struct cr_actor *self, void *arg) {
    (void)self;
    struct cr_edge_host *h = &((struct segments_state *)arg)->host;
    uint32_t work = 0;
    for (uint32_t i = 0; h->again_count > 0 && i < h->count; i++) {
        if (!h->again[i]) continue;
        h->again[i] = false, h->again_count--; /* ready may ask again */
        work += 1 + h->edges[i]->ops->ready(h->edges[i], h->again_tag[i], EPOLLIN);
    }
    int n = h->found_count;
    h->found_count = 0;
    /* The round after one that served wait's set: if the mailbox is empty
     * too, segments parks next and its wait asks epoll anyway (returning at
     * once if an fd is ready), so asking here as well would be a second
     * epoll_wait(2) per call at one client.  Under load segments does not
     * park between rounds, wait finds nothing, and every round asks here. */
    bool skip = n == 0 && h->served_wait_set;
    h->served_wait_set = n > 0;
    if (n == 0 && !skip && h->watched > 0) {
        n = epoll_wait(h->epoll_fd, h->found, EDGE_EVENTS, 0);
        if (n < 0) {
            if (errno != EINTR) CR_ERROR("segments", "epoll_wait failed: %s", strerror(errno));
            return work;
        }
    }
    for (int i = 0; i < n; i++) {
        uint64_t tag = h->found[i].data.u64;
        if (tag == EDGE_WAKE_TAG) continue; /* the runtime drains it */
        if (tag == EDGE_TIMER_TAG) { /* a deadline passed: the loop's round sees to it */
            cr_wait_timer_fired(&h->timer);
            continue;
        }
        uint32_t index = (uint32_t)(tag >> 56);
        assert(index < h->count);
        struct cr_edge *edge = h->edges[index];
        work += 1 + edge->ops->ready(edge, tag & CR_EDGE_TAG_MAX, h->found[i].events);
    }
    return work;
}

static void edges_wire(struct segments_state *st) {
    for (uint32_t i = 0; i < st->host.count; i++) {
        struct cr_edge *edge = st->host.edges[i];
        cr_rpc_intake_wire(&edge->intake, st->peers);
        edge->intake.self = st->self;
        edge->ops->wire(edge, st->peers);
    }
}

/* A stats view (segments_views): the edge of that name, if it exists. */
static void edge_stats(struct segments_state *st, struct cr_actor_stats *out) {
    for (uint32_t i = 0; i < st->host.count; i++) {
        const struct cr_edge *edge = st->host.edges[i];
        if (strcmp(edge->name, out->name) != 0) continue;
        if (edge->ops->stats != NULL) edge->ops->stats(edge, out);
        cr_rpc_intake_stats(&edge->intake, out);
    }
}

/* ------------------------------------------------------------------------ */
/* Eviction and zombies: leases decides, this actor revalidates and applies */

static void on_evict_poll(struct segments_state *st, const struct cr_msg_evict_poll *poll) {
    st->evict_polls++;
    struct cr_store_usage usage;
    cr_store_usage(st->store, &usage);
    const cr_store_config *cfg = cr_store_get_config(st->store);
    struct cr_msg msg = {.type = CR_MSG_EVICT_SAMPLE};
    struct cr_msg_evict_sample *s = CR_MSG_BODY(&msg, struct cr_msg_evict_sample);
    s->seq = poll->seq;
    s->bytes_to_free = cr_evict_bytes_to_free(cfg, &usage, poll->alloc_failed != 0);
    s->objects_to_free = (uint32_t)cr_evict_objects_to_free(cfg, &usage); /* ≤ max_objects */
    s->used_bytes = usage.used_bytes;
    s->capacity_bytes = usage.capacity_bytes;
    if (s->bytes_to_free > 0 || s->objects_to_free > 0) {
        size_t want = poll->sample_size < SAMPLE_MAX ? poll->sample_size : SAMPLE_MAX;
        /* One allocation per poll (ten a second, more while a pass goes on), owned by leases. */
        s->candidates = malloc((want > 0 ? want : 1) * sizeof(*s->candidates));
        if (s->candidates != NULL)
            s->count = (uint16_t)cr_store_sample_eviction_candidates(st->store, st->now_ms,
                                                                     &st->rng, want, s->candidates);
    }
    if (cr_send(st->peers->actors[CR_SUBSYSTEM_LEASES], &msg) != CR_OK) {
        free(s->candidates);
        st->samples_dropped++;
    }
}

static void on_evict_apply(struct segments_state *st, struct cr_msg_evict_apply *apply) {
    uint32_t gone = 0;
    for (uint32_t i = 0; i < apply->count && !st->standby; i++) { /* a standby: its leader evicts */
        const struct cr_evict_candidate *v = &apply->victims[i];
        uint64_t unsent = st->offloads_unsent;
        if (segments_offload_victim(st, v)) { /* to its server's SSD, not dropped */
            gone += st->offloads_unsent == unsent; /* handed over, not kept for the next pass */
            continue;
        }
        if (cr_store_evict(st->store, v->object_id, v->generation, st->now_ms))
            st->evictions_applied++, gone++;
        else
            st->evictions_refused++; /* leased, re-pinned or gone since the sample */
    }
    if (apply->count > 0 && !st->standby) segments_mc_note_evict_pass(&st->mc, gone);
    free(apply->victims);
}

/* A client the store forgot after its TTL: edges that keep state per client
 * (Mooncake's: the secret it adds to the client's calls, its segments'
 * metadata keys) drop it. */
static void edges_client_gone(void *arg, const struct cr_uuid *client) {
    struct cr_edge_host *h = arg;
    for (uint32_t i = 0; i < h->count; i++)
        if (h->edges[i]->ops->client_gone != NULL)
            h->edges[i]->ops->client_gone(h->edges[i], client);
}

static void on_tick(struct segments_state *st) {
    segments_promote_tick(st); /* SSD objects read often, back to memory */
    uint32_t mounted = cr_store_mounted_count(st->store);
    /* A standby's clients call its leader: it expires none (a promotion
     * gives each its TTL again). */
    uint32_t expired =
        st->standby ? 0
                    : cr_store_expire_clients_each(st->store, st->now_ms, edges_client_gone,
                                                   &st->host);
    if (expired > 0 && st->feed_on) cr_durable_feed_note_segments(&st->feed);
    uint32_t unmounted = mounted - cr_store_mounted_count(st->store);
    uint32_t drained = segments_drain_tick(st); /* finished drains unmount their segments */
    if (drained > 0 && st->feed_on) cr_durable_feed_note_segments(&st->feed);
    if (drained > 0) tell_tasks_recheck(st);
    /* Every crescentctl call is a client that goes silent: only clients that
     * held segments are news. */
    if (unmounted > 0)
        CR_INFO("segments", "%u client(s) missed their TTL: %u segment(s) unmounted", expired,
                unmounted);
    else if (expired > 0)
        CR_DEBUG("segments", "%u client(s) without segments forgotten after their TTL", expired);
    if (expired > 0 || st->task_recheck_due) tell_tasks_recheck(st);
    struct cr_msg tick = {.type = CR_MSG_SEGMENTS_TICK};
    if (cr_actor_timer_after(st->self, SEGMENTS_TICK_NS, &tick, NULL) != CR_OK)
        CR_ERROR("segments", "cannot arm the client-expiry timer: clients will not expire");
}

/* The lease count of the stats, for a table too big to walk per scrape: a
 * step of CENSUS_STEP_SLOTS every 1/CENSUS_STEPS_PER_TICK of a second, on a
 * timer of its own. */
static void on_census_step(struct segments_state *st) {
    cr_store_lease_census_step(st->store, st->now_ms, CENSUS_STEP_SLOTS);
    struct cr_msg step = {.type = CR_MSG_SEGMENTS_CENSUS_STEP};
    if (cr_actor_timer_after(st->self, SEGMENTS_TICK_NS / CENSUS_STEPS_PER_TICK, &step, NULL) !=
        CR_OK)
        CR_ERROR("segments", "cannot arm the census timer: lease and pin counts stop updating");
}

static void on_admin(struct segments_state *st, struct cr_msg *msg) {
    const struct cr_msg_master_admin *a = CR_MSG_BODY(msg, struct cr_msg_master_admin);
    struct cr_store_admin_counters counters = {.events_sent = st->events_sent,
                                               .events_dropped = st->events_dropped,
                                               .zombie_reclaims = st->zombie_reclaims,
                                               .reads = &st->reads};
    int rc;
    if (a->query->kind == CR_MASTER_ADMIN_REMOVE_ALL && !cr_role_accepts_writes()) {
        *a->json_out = NULL; /* a standby: the leader removes */
        rc = CR_ROLE_NOT_LEADER_STATUS;
    } else if (a->query->kind == CR_MASTER_ADMIN_REMOVE_ALL) {
        /* The one admin mutation (Mooncake's POST /api/v1/remove_all): its
         * store events go out at the round's end like a call's. */
        uint64_t n = cr_store_remove_all(st->store, a->query->tenant, a->query->force, st->now_ms);
        *a->json_out = NULL;
        rc = asprintf(a->json_out, "{\"removed_count\":%llu}", (unsigned long long)n) < 0
                 ? CR_ERR_NOMEM
                 : CR_OK;
        if (rc != CR_OK) *a->json_out = NULL;
    } else if (a->query->kind == CR_MASTER_ADMIN_RECENT_OBJECTS) {
        rc = segments_recent_render(st->recent, st->store, st->now_ms, a->query, a->json_out);
    } else if (a->query->kind == CR_MASTER_ADMIN_QUOTAS ||
               a->query->kind == CR_MASTER_ADMIN_QUOTA_SET ||
               a->query->kind == CR_MASTER_ADMIN_QUOTA_DELETE) {
        rc = cr_mooncake_quotas_apply(st->store, a->query, a->json_out);
    } else if (a->query->kind >= CR_MASTER_ADMIN_DRAIN_CREATE &&
               a->query->kind <= CR_MASTER_ADMIN_DRAIN_CANCEL) {
        rc = a->query->kind != CR_MASTER_ADMIN_DRAIN_QUERY && !cr_role_accepts_writes()
                 ? CR_ROLE_NOT_LEADER_STATUS
                 : segments_drain_admin(st, a->query, a->json_out);
    } else {
        rc = cr_store_admin_render(st->store, st->now_ms, &counters, a->query, a->json_out);
    }
    if (msg->flags & CR_MSG_ASK)
        cr_reply(msg, rc);
    else
        free(*a->json_out); /* not an ask: nobody waits for it */
}

/* ------------------------------------------------------------------------ */
/* Actor hooks */

static void segments_handle(struct cr_actor *self, void *arg, struct cr_msg *msg) {
    struct segments_state *st = arg;
    st->now_ms = cr_actor_now_ns(self) / 1000000u;
    switch (msg->type) {
    case CR_MSG_WIRE:
        st->peers = msg->body.ptr[0];
        on_tick(st);
        on_census_step(st);
        edges_wire(st);
        return;
    case CR_MSG_MASTER_CALL: on_call(st, msg); return;
    case CR_MSG_MASTER_DONE:
        on_edge_calls_done(st, CR_MSG_BODY(msg, struct cr_msg_master_call)->call);
        return;
    case CR_MSG_EVICT_POLL:
        if (st->peers != NULL) on_evict_poll(st, CR_MSG_BODY(msg, struct cr_msg_evict_poll));
        return;
    case CR_MSG_EVICT_APPLY:
        on_evict_apply(st, CR_MSG_BODY(msg, struct cr_msg_evict_apply));
        return;
    case CR_MSG_REPL_APPLY:
        segments_repl_apply(st, CR_MSG_BODY(msg, struct cr_msg_durable_append));
        return;
    case CR_MSG_REPL_ROLE:
        segments_repl_role(st, CR_MSG_BODY(msg, struct cr_msg_repl_role));
        return;
    case CR_MSG_REPL_RESET: segments_repl_reset(st); return;
    case CR_MSG_ZOMBIE_RECLAIM:
        if (st->standby) return;
        st->zombie_reclaims += cr_store_reclaim_discarded(st->store, st->now_ms) > 0;
        return;
    case CR_MSG_SEGMENTS_TICK: on_tick(st); return;
    case CR_MSG_SEGMENTS_CENSUS_STEP: on_census_step(st); return;
    case CR_MSG_TASK_OP:
        st->task_ops++;
        on_task_op(st, CR_MSG_BODY(msg, struct cr_msg_task_op)->op);
        return;
    case CR_MSG_SEGMENTS_REGEX_STEP: regex_step(st); return;
    case CR_MSG_SEGMENTS_SNAPSHOT_STEP: st->snapshot_step_armed = false; return; /* round end */
    case CR_MSG_MASTER_ADMIN: on_admin(st, msg); return;
    case CR_MSG_DURABLE_SYNCED:
        segments_durable_synced(st, CR_MSG_BODY(msg, struct cr_msg_durable_synced));
        return;
    default:
        if (cr_log_ratelimit(&st->last_log_ns, st->now_ms * 1000000u, 60ull * 1000000000u))
            CR_WARN("segments", "message type %u from sender %u is not handled here", msg->type,
                    msg->sender);
        if (msg->flags & CR_MSG_ASK) cr_reply(msg, CR_ERR_INVALID_PARAMS);
    }
}

static int segments_start(struct cr_actor *self, void *arg) {
    struct segments_state *st = arg;
    st->self = self;
    int rc = segments_durable_start(st);
    st->repl_applied_lsn = st->recovery.last_lsn;
    cr_role_note_applied(st->repl_applied_lsn);
    if (rc == CR_OK) segments_files_start(st); /* after the log's restore: see there */
    return rc;
}

/* The round's batch is done: its replies go back now. */
static void segments_round_end(struct cr_actor *self, void *arg) {
    (void)self;
    struct segments_state *st = arg;
    if (st->feed_on && !st->standby) segments_durable_round_end(st);
    else if (st->feed_on) segments_repl_snapshot_step(st); /* a standby's own snapshots */
    done_send_all(st);
    events_send(st);
    for (uint32_t i = 0; i < st->host.count; i++) st->host.edges[i]->ops->flush(st->host.edges[i]);
    uint32_t cap = st->round_calls / DONE_CHAINS_PER_ROUND;
    st->done_cap = cap < 1 ? 1 : cap > DONE_CHAIN_MAX ? DONE_CHAIN_MAX : cap;
    st->round_calls = 0;
}

/* Calls queued behind the one running: start their key lookups' loads.  Not
 * asks (an ask's call may be gone if its caller timed out). */
static void segments_prefetch(void *arg, const struct cr_msg *msg, bool deep) {
    const struct segments_state *st = arg;
    if (msg->type != CR_MSG_MASTER_CALL || (msg->flags & CR_MSG_ASK)) return;
    cr_rpc_methods_prefetch(st->store, CR_MSG_BODY(msg, struct cr_msg_master_call)->call, deep);
}

static void segments_discard(void *arg, struct cr_msg *msg) {
    (void)arg;
    if (msg->type == CR_MSG_MASTER_CALL && !(msg->flags & CR_MSG_ASK))
        cr_master_call_free(CR_MSG_BODY(msg, struct cr_msg_master_call)->call);
    else if (msg->type == CR_MSG_MASTER_DONE) /* an edge's calls back from tasks */
        cr_master_call_free_chain(CR_MSG_BODY(msg, struct cr_msg_master_call)->call);
    else if (msg->type == CR_MSG_EVICT_APPLY)
        free(CR_MSG_BODY(msg, struct cr_msg_evict_apply)->victims);
    else if (msg->type == CR_MSG_TASK_OP)
        free(CR_MSG_BODY(msg, struct cr_msg_task_op)->op);
    else if (msg->type == CR_MSG_REPL_APPLY)
        free(CR_MSG_BODY(msg, struct cr_msg_durable_append)->block);
}

static void segments_stats(struct cr_actor *self, void *arg, struct cr_actor_stats *out) {
    struct segments_state *st = arg;
    if (out->view > 0 && strcmp(out->name, "store_calls") == 0) {
        for (size_t i = 0; i < sizeof(failure_stats) / sizeof(failure_stats[0]); i++)
            cr_actor_stats_add(out, failure_stats[i].stat,
                               st->method_failures[failure_stats[i].method]);
        cr_actor_stats_add(out, "put_start_no_room_total", st->put_start_no_room);
        return;
    }
    if (out->view > 0 && strcmp(out->name, "mooncake_calls") == 0) {
        struct cr_store_stats s;
        cr_store_get_stats(st->store, cr_runtime_now_ns(cr_actor_runtime(self)) / 1000000u, &s);
        segments_mc_stats(&st->mc, &s, st->method_failures, out);
        return;
    }
    if (out->view > 0) {
        edge_stats(st, out);
        return;
    }
    struct cr_store_stats s;
    cr_store_get_stats(st->store, cr_runtime_now_ns(cr_actor_runtime(self)) / 1000000u, &s);
    cr_actor_stats_add(out, "capacity_bytes", s.capacity_bytes);
    cr_actor_stats_add(out, "used_bytes", s.used_bytes);
    cr_actor_stats_add(out, "objects", s.object_count);
    cr_actor_stats_add(out, "max_objects", s.max_objects);
    cr_actor_stats_add(out, "key_index_slots", s.index_slots);
    cr_actor_stats_add(out, "inflight_puts", s.inflight_puts);
    cr_actor_stats_add(out, "replicas", s.replica_count);
    cr_actor_stats_add(out, "leases_active", s.active_leases);
    cr_actor_stats_add(out, "segments", s.segment_count);
    cr_actor_stats_add(out, "clients", s.client_count);
    cr_actor_stats_add(out, "evictions_total", s.evictions);
    cr_actor_stats_add(out, "evicted_bytes_total", s.evicted_bytes);
    cr_actor_stats_add(out, "room_evictions_total", s.room_evictions);
    cr_actor_stats_add(out, "zombies_preempted_total", s.zombies_preempted);
    cr_actor_stats_add(out, "zombie_bytes_reclaimed_total", s.zombie_bytes_reclaimed);
    cr_actor_stats_add(out, "discarded_parked", s.discarded_parked);
    cr_actor_stats_add(out, "clients_expired_total", s.clients_expired);
    cr_actor_stats_add(out, "file_tier_capacity_bytes",
                       st->files.root[0] ? st->files.quota_bytes : 0);
    cr_actor_stats_add(out, "file_tier_used_bytes", s.disk_bytes);
    cr_actor_stats_add(out, "file_tier_replicas", s.disk_replicas);
    cr_actor_stats_add(out, "file_tier_evictions_total", s.disk_evictions);
    cr_actor_stats_add(out, "file_tier_reported_total", st->files.reported_files);
    cr_actor_stats_add(out, "file_tier_dropped_total", st->files.dropped_files);
    cr_actor_stats_add(out, "file_tier_persist_failed_missing_total", st->files.failed[0]);
    cr_actor_stats_add(out, "file_tier_persist_failed_read_only_total", st->files.failed[1]);
    cr_actor_stats_add(out, "file_tier_persist_failed_full_total", st->files.failed[2]);
    cr_actor_stats_add(out, "file_tier_persist_failed_other_total", st->files.failed[3]);
    cr_actor_stats_add(out, "file_tier_persist_skipped_busy_total", st->files.skipped_busy);
    cr_actor_stats_add(out, "file_tier_files_deleted_total", st->files_deleted);
    cr_actor_stats_add(out, "file_tier_files_left_total", st->files_left);
    cr_actor_stats_add(out, "local_disk_used_bytes", s.local_disk_bytes);
    cr_actor_stats_add(out, "local_disk_replicas", s.local_disk_replicas);
    cr_actor_stats_add(out, "local_disk_capacity_bytes", s.ssd_capacity_bytes);
    cr_actor_stats_add(out, "offloads_started_total", s.offloads_started);
    cr_actor_stats_add(out, "offloads_done_total", s.offloads_done);
    cr_actor_stats_add(out, "offloads_failed_total", s.offloads_failed);
    segments_read_latency_stats(st, out);
    cr_actor_stats_add(out, "promotion_hits_total", s.promotion_hits);
    cr_actor_stats_add(out, "promotions_started_total", s.promotions_started);
    cr_actor_stats_add(out, "promotions_done_total", s.promotions_done);
    cr_actor_stats_add(out, "promotions_done_bytes_total", s.promotions_done_bytes);
    cr_actor_stats_add(out, "promotions_failed_total", s.promotions_failed);
    cr_actor_stats_add(out, "promotions_no_room_total",
                       s.promotions_no_room + s.promotions_dropped);
    cr_actor_stats_add(out, "local_disk_registered_total", s.local_disk_registered);
    cr_actor_stats_add(out, "local_disk_gone_total", s.local_disk_gone);
    cr_actor_stats_add(out, "calls_total", st->calls);
    cr_actor_stats_add(out, "call_errors_total", st->call_errors);
    cr_actor_stats_add(out, "replies_dropped_total", st->replies_dropped);
    cr_actor_stats_add(out, "not_leader_refusals_total", st->not_leader_refusals);
    segments_repl_stats(st, out);
    cr_actor_stats_add(out, "events_sent_total", st->events_sent);
    cr_actor_stats_add(out, "events_dropped_total", st->events_dropped);
    cr_actor_stats_add(out, "evict_polls_total", st->evict_polls);
    cr_actor_stats_add(out, "evictions_refused_total", st->evictions_refused);
    cr_actor_stats_add(out, "regex_slices_total", st->regex_slices);
    cr_actor_stats_add(out, "remove_all_slices_total", st->remove_all_slices);
    cr_actor_stats_add(out, "eviction_samples_dropped_total", st->samples_dropped);
    cr_actor_stats_add(out, "task_ops_total", st->task_ops);
    cr_actor_stats_add(out, "task_ops_dropped_total", st->task_ops_dropped);
    cr_actor_stats_add(out, "task_pings_unforwarded_total", st->task_pings_unforwarded);
    cr_actor_stats_add(out, "calls_at_tasks", st->at_tasks);
    cr_actor_stats_add(out, "tasks_busy_total", st->tasks_busy);
    if (st->ha != NULL) cr_actor_stats_add(out, "ha_refused_total", st->ha_refused);
    cr_actor_stats_add(out, "log_records_total", st->feed.records);
    cr_actor_stats_add(out, "log_calls_held_total", st->calls_held);
    cr_actor_stats_add(out, "log_blocks_dropped_total", st->log_blocks_dropped + st->feed.failures);
    cr_actor_stats_add(out, "restored_objects", st->recovery.objects);
    cr_actor_stats_add(out, "snapshots_begun_total", st->snapshots_begun);
    cr_actor_stats_add(out, "snapshot_slices_total", st->snapshot_slices);
    cr_actor_stats_add(out, "snapshot_slice_ns_max", st->snapshot_slice_ns_max);
    if (out->histograms != NULL && out->histogram_count < out->histograms_max)
        out->histograms[out->histogram_count++] = (struct cr_actor_histogram){
            .name = "snapshot_slice_seconds",
            .help = "How long each snapshot slice held the store thread (a call waits behind "
                    "one slice at most; docs/durability.md, Snapshots).",
            .label = "log",
            .label_value = "store",
            .h = st->snapshot_slice_hist};
}

static void segments_destroy(void *arg) {
    struct segments_state *st = arg;
    if (st == NULL) return;
    assert(st->events == NULL && st->done_open == 0); /* every round ends by sending them */
    cr_store_regex_scan_free(st->store, st->regex_scan); /* stopped mid-scan: no answer */
    if (st->remove_all_active) cr_store_remove_all_cancel(st->store, &st->remove_all);
    cr_master_call_free_chain(st->regex_head);
    segments_durable_free(st);
    segments_ha_free(st);
    cr_store_destroy(st->store);
    segments_files_stop(st);
    cr_rpc_arena_free(st->arena);
    segments_recent_free(st->recent);
    segments_drain_free(st->drain);
    for (uint32_t i = 0; i < st->host.count; i++) st->host.edges[i]->ops->destroy(st->host.edges[i]);
    if (st->host.epoll_fd >= 0) close(st->host.epoll_fd);
    cr_wait_timer_close(&st->host.timer);
    free(st);
}

static void store_config_from(const struct cr_daemon_config *c, cr_store_config *out) {
    cr_store_config_default(out);
    out->default_kv_lease_ttl_ms = c->default_kv_lease_ttl;
    out->default_kv_soft_pin_ttl_ms = c->default_kv_soft_pin_ttl;
    out->allow_evict_soft_pinned_objects = c->allow_evict_soft_pinned_objects;
    /* A PutStart into a full store evicts for itself (store_objects.c). */
    out->put_evictions_max = 64;
    out->eviction_ratio = c->eviction_ratio;
    out->eviction_high_watermark_ratio = c->eviction_high_watermark_ratio;
    out->put_start_discard_timeout_ms = (uint64_t)c->put_start_discard_timeout_sec * 1000u;
    out->put_start_release_timeout_ms = (uint64_t)c->put_start_release_timeout_sec * 1000u;
    out->client_live_ttl_ms = (uint64_t)c->client_ttl * 1000u;
    out->task_timeout_ms = (uint64_t)c->task_timeout_sec * 1000u;
    out->regex_max_matches = c->regex_max_matches;
    out->regex_budget_steps = c->regex_budget_steps;
    out->max_segments_per_client = c->max_segments_per_client;
    out->min_segment_size_bytes = c->min_segment_size_bytes;
    out->max_tenants_per_client = c->max_tenants_per_client;
    out->max_objects = c->max_objects;
    out->max_allocations_per_segment = c->max_allocations_per_segment;
}

static int segments_create(const struct cr_daemon_config *config, void **state_out) {
    struct segments_state *st = calloc(1, sizeof(*st));
    if (st == NULL) return CR_ERR_NOMEM;
    st->events_room = EVENT_CHAIN_BYTES_MIN;
    cr_store_config cfg;
    store_config_from(config, &cfg);
    char why[CR_STORE_ERROR_LEN];
    int rc = cr_store_config_validate(&cfg, why, sizeof(why));
    if (rc != CR_OK) {
        CR_ERROR("segments", "store settings refused: %s", why);
        free(st);
        return rc;
    }
    struct cr_store_event_sink sink = {.on_event = on_store_event, .ctx = st};
    st->arena = cr_rpc_arena_new();
    st->recent = segments_recent_new();
    rc = st->arena != NULL && st->recent != NULL ? cr_store_create(&cfg, &sink, &st->store) : CR_ERR_NOMEM;
    if (rc == CR_OK) rc = segments_promote_setup(st, config);
    if (rc != CR_OK) {
        CR_ERROR("segments", "cannot create the store: %s", cr_strerror(rc));
        cr_rpc_arena_free(st->arena);
        segments_recent_free(st->recent);
        free(st);
        return rc;
    }
    st->host.st = st;
    st->host.timer.fd = -1; /* not made yet: segments_destroy closes only what exists */
    st->host.epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (st->host.epoll_fd < 0) {
        CR_ERROR("segments", "epoll_create1 failed: %s", strerror(errno));
        segments_destroy(st);
        return CR_ERR_IO;
    }
    /* Without the timerfd the park's deadlines are whole milliseconds (logged). */
    struct epoll_event timer_ev = {.events = EPOLLIN, .data.u64 = EDGE_TIMER_TAG};
    if (!cr_wait_timer_init(&st->host.timer) ||
        epoll_ctl(st->host.epoll_fd, EPOLL_CTL_ADD, st->host.timer.fd, &timer_ev) != 0) {
        CR_WARN("segments", "no timerfd for its park's deadlines (%s): store events may reach "
                "the publisher up to 1 ms late", strerror(errno));
        cr_wait_timer_close(&st->host.timer);
    }
    st->client_ttl_ms = cfg.client_live_ttl_ms;
    if (segments_ha_create(st, config) != CR_OK) {
        segments_destroy(st);
        return CR_ERR_NOMEM;
    }
    segments_files_init(st, config);
    st->durability = cr_durability_of(config);
    struct cr_role_status role; /* a standby by flag, or made one before start (role.h) */
    cr_role_get(&role);
    st->standby = config->standby_of[0] != '\0' || role.role == CR_ROLE_STANDBY;
    st->repl_sync = config->replication_address[0] != '\0' &&
                    strcmp(config->replication, "sync") == 0;
    st->state_dir = config->state_dir; /* the config outlives the actors */
    st->snapshot_every = config->snapshot_every_records;
    st->done_cap = 1;
    st->rng = cfg.rng_seed | 1u;
    *state_out = st;
    return CR_OK;
}

static const struct cr_actor_ops segments_ops = {
    .start = segments_start,
    .handle = segments_handle,
    .discard = segments_discard,
    .stats = segments_stats,
    .prefetch = segments_prefetch,
    .round_end = segments_round_end,
    .wait = segments_wait,
    .poll = segments_poll,
    .spin_poll = segments_spin_poll,
    .stats_views = segments_views,
    /* Under light load segments parks after every call it serves from its
     * edges, and its senders (tasks, leases, data, HTTP) are few. */
    .park_fence = true,
};

const struct cr_subsystem_def cr_segments_def = {
    .name = "segments",
    .ops = &segments_ops,
    .create = segments_create,
    .destroy = segments_destroy,
    .register_routes = cr_store_routes_register,
};
