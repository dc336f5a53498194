/* The local segment: crescentd as a store server of its own store.
 *
 * With --local-segment-size above 0 (default 1 GiB), this actor allocates
 * that much memfd memory (src/rdma/xfer.h: huge pages when there are free
 * ones; pages are taken only as they are written), serves it through a
 * transfer server on --data-address (loopback by default), and mounts it in
 * the store at start, so that crescentd alone is a complete store.  The
 * actor is a client of the store like any store server: it mounts and pings
 * with its own client id, by sending MASTER_CALLs to the segments actor
 * (no RPC hop), and remounts if a ping finds the store has forgotten it.
 *
 * It also runs the copy/move tasks whose source is the local segment
 * (data_tasks.h): asked for with each heartbeat Ping, run on this thread,
 * reported with MarkTaskToComplete.  While one runs (its targets written,
 * a few milliseconds for 4 MiB), the local segment's own transfers wait.
 *
 * With --local-segment-ssd-dir it is also a store server with an SSD tier
 * (tier/ssd_host.h, crescent-store's code): it announces the tier at mount,
 * runs the master's REPLICA_OFFLOAD tasks (the object written from the
 * segment to a file: a write, fdatasync and rename on this thread, during
 * which the segment's transfers wait, as for a copy task) and serves the
 * files as the read-only segment "crescentd-local#ssd", under the segment's
 * capability key.  Files its LRU evicts (or a read finds corrupt) are
 * reported after each ping (data_ssd.h), so their replicas are dropped.
 *
 * Threads: the transfer server is driven only here, from the wait hook
 * (its epoll fd and the runtime's wake fd in one epoll set), on this actor's
 * pinned thread like every other.  With size 0 the actor only answers stats. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <unistd.h>

#include "actors/data_ssd.h"
#include "actors/data_tasks.h"
#include "rpc/rpc_codec.h"
#include "actors/subsystems.h"
#include "client/task_exec.h"
#include "core/log.h"
#include "crescent/error.h"
#include "daemon/config.h"
#include "msgs/master_msgs.h"
#include "rdma/xfer.h"
#include "rdma/xfer_verbs.h"
#include "tier/ssd_host.h"
#include "runtime/stats_extra.h"

#define DATA_SEGMENT_NAME CR_DATA_SEGMENT_NAME
#define DATA_TASKS_PER_PING 16u /* copy/move tasks taken per heartbeat; a full round pings again */
#define SSD_PROMOTION_HITS 2u   /* SSD reads that ask for promotion (crescent-store's default) */

struct data_state {
    struct cr_actor *self;
    struct cr_subsystems *peers;
    struct cr_xfer_segment segment;
    struct cr_xfer_server *xfer;
    struct cr_xfer_client *exec; /* writes the targets of the tasks this segment runs */
    int epoll_fd;
    int wake_fd_added;       /* the runtime's wake fd once added to epoll_fd; -1 before */
    Crescent__Master__UUID id;
    /* The secret the store issued to this client at its first mount: later
     * pings and remounts carry it like any client's (proto/master.proto). */
    uint8_t secret[CR_STORE_CLIENT_SECRET_BYTES];
    bool has_secret;
    /* The local segment's capability key, sent in every (re)mount; never logged. */
    uint8_t cap_key[CR_CAP_KEY_BYTES];
    bool has_cap_key;
    bool mounted;
    uint32_t ping_every_ms;  /* a quarter of the client TTL */
    uint64_t mounts, mount_failures, pings, remounts, send_failures;
    uint64_t tasks_run, tasks_failed, task_reports_refused;
    uint32_t task_reports_in_flight; /* MarkTaskToComplete sent, reply not yet seen */
    /* --local-segment-ssd-dir: the SSD tier (store NULL: none), its size told
     * at mount, and its offloads. */
    struct cr_store_ssd ssd;
    bool ssd_open;
    uint64_t ssd_capacity;
    uint64_t offloads_run, offloads_failed, offload_files_removed;
    uint64_t ssd_gone_reported, ssd_gone_reports_refused; /* files gone, told the master */
};

/* ---- calls to the segments actor ------------------------------------------ */

/* Sends one request, built on the stack, as an owned call whose reply comes
 * back as MASTER_DONE.  The request is packed and unpacked so that the call
 * owns it in protobuf-c's allocation, as a gateway-made call does. */
/* True when the call is on its way (a reply will come). */
static bool send_call(struct data_state *st, uint16_t method, const ProtobufCMessage *req) {
    const struct cr_rpc_method *m = cr_rpc_method_find(method);
    struct cr_master_call *call = calloc(1, sizeof(*call));
    uint8_t *packed = NULL;
    size_t len = 0;
    if (m != NULL && call != NULL && cr_rpc_pack(req, &packed, &len) == CR_OK)
        call->request = protobuf_c_message_unpack(m->request, NULL, len, packed);
    free(packed);
    if (call == NULL || call->request == NULL) {
        free(call);
        st->send_failures++;
        return false;
    }
    call->method = method;
    call->reply_to = st->self;
    struct cr_msg msg = {.type = CR_MSG_MASTER_CALL};
    CR_MSG_BODY(&msg, struct cr_msg_master_call)->call = call;
    if (cr_send(st->peers->actors[CR_SUBSYSTEM_SEGMENTS], &msg) != CR_OK) {
        st->send_failures++;
        cr_master_call_free(call);
        return false;
    }
    return true;
}

static void mount(struct data_state *st, bool again) {
    Crescent__Master__MountSegmentRequest req = CRESCENT__MASTER__MOUNT_SEGMENT_REQUEST__INIT;
    req.buffer = (uint64_t)(uintptr_t)st->segment.base;
    req.size = st->segment.size;
    req.segment_name = DATA_SEGMENT_NAME;
    req.client_id = &st->id;
    req.transport_endpoint = (char *)cr_xfer_server_endpoint(st->xfer);
    req.protocol = (char *)cr_xfer_server_protocol(st->xfer);
    req.has_client_secret = st->has_secret;
    req.client_secret = (ProtobufCBinaryData){.len = sizeof(st->secret), .data = st->secret};
    req.has_capability_key = st->has_cap_key;
    req.capability_key = (ProtobufCBinaryData){.len = sizeof(st->cap_key), .data = st->cap_key};
    req.has_ssd_capacity = st->ssd_capacity > 0;
    req.ssd_capacity = st->ssd_capacity;
    send_call(st, again ? CRESCENT__MASTER__METHOD__REMOUNT_SEGMENT
                        : CRESCENT__MASTER__METHOD__MOUNT_SEGMENT, &req.base);
}

static void ping(struct data_state *st) {
    Crescent__Master__PingRequest req = CRESCENT__MASTER__PING_REQUEST__INIT;
    req.client_id = &st->id;
    req.has_max_tasks = st->mounted && st->exec != NULL;
    req.max_tasks = DATA_TASKS_PER_PING;
    req.has_client_secret = st->has_secret;
    req.client_secret = (ProtobufCBinaryData){.len = sizeof(st->secret), .data = st->secret};
    send_call(st, CRESCENT__MASTER__METHOD__PING, &req.base);
    st->pings++;
}

/* Runs the tasks a ping handed out and reports each; a full round may have
 * left more behind, so it pings again at once. */
static void run_tasks(struct data_state *st, const Crescent__Master__PingResponse *p) {
    for (size_t i = 0; i < p->n_tasks; i++) {
        const Crescent__Master__TaskAssignment *a = p->tasks[i];
        char why[CR_TASK_EXEC_ERROR_MAX];
        bool offload = a->type == CRESCENT__MASTER__TASK_TYPE__REPLICA_OFFLOAD;
        uint64_t position = 0;
        int rc = offload ? cr_data_task_offload(&st->segment, DATA_SEGMENT_NAME, &st->ssd, a,
                                                &position, why, sizeof(why))
                         : cr_data_task_run(&st->segment, DATA_SEGMENT_NAME, st->exec, a, why,
                                            sizeof(why));
        st->tasks_run++;
        st->tasks_failed += rc != CR_OK;
        st->offloads_run += offload;
        st->offloads_failed += offload && rc != CR_OK;
        if (rc != CR_OK)
            CR_WARN("data", "%s task of '%.100s': %s", offload ? "offload" : "copy/move", a->key,
                    why);
        Crescent__Master__MarkTaskToCompleteRequest r =
            CRESCENT__MASTER__MARK_TASK_TO_COMPLETE_REQUEST__INIT;
        r.has_position = offload && rc == CR_OK; /* where the SSD file is */
        r.position = position;
        r.client_id = &st->id;
        r.task_id = a->task_id;
        r.status = rc == CR_OK ? CRESCENT__MASTER__TASK_STATUS__SUCCESS
                               : CRESCENT__MASTER__TASK_STATUS__FAILED;
        r.message = rc == CR_OK ? NULL : why;
        r.has_client_secret = st->has_secret;
        r.client_secret = (ProtobufCBinaryData){.len = sizeof(st->secret), .data = st->secret};
        st->task_reports_in_flight +=
            send_call(st, CRESCENT__MASTER__METHOD__MARK_TASK_TO_COMPLETE, &r.base);
    }
    if (p->n_tasks == DATA_TASKS_PER_PING) ping(st);
}

/* The SSD tier's files gone since (its LRU made room for an offload, a read
 * found one corrupt) are told to the master (data_ssd.h), which drops their
 * replicas: a stale local_disk replica is never offered.  Only once every
 * offload report sent has its reply: the master records an offload's
 * replica on the tasks actor's way (MarkTaskToComplete is answered after
 * segments commits it), so a gone report sent before could reach segments
 * first, find no replica to drop, and leave the one recorded after it
 * pointing at a file the SSD let go. */
static void report_ssd_gone(struct data_state *st) {
    struct cr_data_ssd_gone g;
    while (st->mounted && st->task_reports_in_flight == 0 &&
           cr_data_ssd_gone_take(&st->ssd, DATA_SEGMENT_NAME, &g)) {
        g.req.client_id = &st->id;
        g.req.has_client_secret = st->has_secret;
        g.req.client_secret = (ProtobufCBinaryData){.len = sizeof(st->secret), .data = st->secret};
        send_call(st, CRESCENT__MASTER__METHOD__LOCAL_DISK_REPORT, &g.req.base);
        st->ssd_gone_reported += g.req.n_entries;
        cr_data_ssd_gone_free(&g);
    }
}

/* An offload's success report refused (the object went, the task ended):
 * nobody will read its SSD file, so it is deleted, as crescent-store does
 * (client/task_exec_offload.c).  A transport failure keeps it: the master may
 * have recorded it. */
static void drop_refused_offload(struct data_state *st, const struct cr_master_call *call,
                                 int32_t status) {
    const Crescent__Master__MarkTaskToCompleteRequest *req = (const void *)call->request;
    if (status == CR_OK || req == NULL || !req->has_position || st->ssd.store == NULL) return;
    if (status != CR_ERR_OBJECT_NOT_FOUND && status != CR_ERR_INVALID_PARAMS &&
        status != CR_ERR_ILLEGAL_CLIENT)
        return;
    cr_store_ssd_remove(&st->ssd, req->position);
    st->offload_files_removed++;
}

/* A store forgotten and remounted issues a new secret: the last one wins. */
static void take_secret(struct data_state *st, protobuf_c_boolean has, ProtobufCBinaryData in) {
    if (!has || in.len != sizeof(st->secret)) return;
    memcpy(st->secret, in.data, sizeof(st->secret));
    st->has_secret = true;
}

/* A reply: a mount's outcome is logged; a ping that finds this client
 * forgotten remounts. */
static void on_reply(struct data_state *st, const struct cr_master_call *call) {
    const struct cr_rpc_method *m = cr_rpc_method_find(call->method);
    ProtobufCMessage *resp = call->status == CR_OK && m != NULL
                                 ? protobuf_c_message_unpack(m->response, NULL, call->reply_len,
                                                             call->reply)
                                 : NULL;
    int32_t status = resp != NULL ? cr_rpc_status_code(resp) : CR_ERR_PROTOCOL;
    if (call->method == CRESCENT__MASTER__METHOD__PING && resp != NULL) {
        const Crescent__Master__PingResponse *p = (const void *)resp;
        take_secret(st, p->has_client_secret, p->client_secret);
        if (p->has_client_ttl_ms && p->client_ttl_ms >= 4) st->ping_every_ms = (uint32_t)(p->client_ttl_ms / 4);
        if (p->has_client_known && !p->client_known && st->mounted) {
            CR_WARN("data", "the store forgot the local segment's client: remounting");
            st->remounts++;
            mount(st, true);
        }
        if (p->n_tasks > 0 && st->exec != NULL) run_tasks(st, p);
        report_ssd_gone(st);
    } else if (call->method == CRESCENT__MASTER__METHOD__LOCAL_DISK_REPORT) {
        st->ssd_gone_reports_refused += status != CR_OK;
        if (status != CR_OK)
            CR_WARN("data", "the master refused the SSD tier's report of gone files: %s "
                    "(those replicas fail their reads cleanly; gets fall back to other replicas)",
                    cr_strerror(status));
    } else if (call->method == CRESCENT__MASTER__METHOD__MARK_TASK_TO_COMPLETE) {
        assert(st->task_reports_in_flight > 0);
        st->task_reports_in_flight--;
        st->task_reports_refused += status != CR_OK;
        const Crescent__Master__MarkTaskToCompleteResponse *r = (const void *)resp;
        if (status != CR_OK)
            CR_WARN("data", "the master refused a task report: %s: %s", cr_strerror(status),
                    r != NULL && r->error_message != NULL ? r->error_message : "");
        drop_refused_offload(st, call, status);
        report_ssd_gone(st); /* held while offload reports were in flight */
    } else if (call->method != CRESCENT__MASTER__METHOD__PING) {
        if (resp != NULL) {
            const Crescent__Master__MountSegmentResponse *r = (const void *)resp;
            take_secret(st, r->has_client_secret, r->client_secret);
        }
        st->mounted = status == CR_OK;
        st->mounts += status == CR_OK;
        st->mount_failures += status != CR_OK;
        if (status == CR_OK)
            CR_INFO("data", "local segment '%s' mounted: %llu bytes%s, served on %s://%s",
                    DATA_SEGMENT_NAME, (unsigned long long)st->segment.size,
                    st->segment.huge_pages ? " (huge pages)" : "",
                    cr_xfer_server_protocol(st->xfer), cr_xfer_server_endpoint(st->xfer));
        else
            CR_ERROR("data", "mounting the local segment failed: %s", cr_strerror(status));
    }
    if (resp != NULL) protobuf_c_message_free_unpacked(resp, NULL);
}

static void arm_tick(struct data_state *st) {
    struct cr_msg tick = {.type = CR_MSG_DATA_TICK};
    if (cr_actor_timer_after(st->self, (uint64_t)st->ping_every_ms * 1000000ull, &tick, NULL) !=
        CR_OK)
        CR_ERROR("data", "cannot arm the heartbeat timer: the local segment will expire");
}

/* ---- actor hooks ---------------------------------------------------------- */

static int data_start(struct cr_actor *self, void *arg) {
    struct data_state *st = arg;
    st->self = self;
    return CR_OK;
}

static void data_handle(struct cr_actor *self, void *arg, struct cr_msg *msg) {
    (void)self;
    struct data_state *st = arg;
    switch (msg->type) {
    case CR_MSG_WIRE:
        st->peers = msg->body.ptr[0];
        if (st->xfer == NULL) return; /* --local-segment-size 0 */
        mount(st, false);
        arm_tick(st);
        return;
    case CR_MSG_DATA_TICK:
        ping(st);
        arm_tick(st);
        return;
    case CR_MSG_MASTER_DONE: {
        struct cr_master_call *head = CR_MSG_BODY(msg, struct cr_msg_master_call)->call;
        for (const struct cr_master_call *c = head; c != NULL; c = c->next) on_reply(st, c);
        cr_master_call_free_chain(head);
        return;
    }
    default: CR_WARN("data", "message type %u is not handled here", msg->type); return;
    }
}

static void data_discard(void *arg, struct cr_msg *msg) {
    (void)arg;
    if (msg->type == CR_MSG_MASTER_DONE)
        cr_master_call_free_chain(CR_MSG_BODY(msg, struct cr_msg_master_call)->call);
}

/* Milliseconds left until deadline_ns (-1: none), rounded up: never early. */
static int ms_left(uint64_t deadline_ns) {
    if (deadline_ns == UINT64_MAX) return -1;
    uint64_t now = cr_monotonic_ns();
    return now >= deadline_ns ? 0 : (int)((deadline_ns - now + 999999u) / 1000000u);
}

/* Sleeps on the transfer server's fd and the wake fd together, serving
 * transfers as they come, until the wake fd fires (a message, a stop) or
 * timeout_ns pass (a timer is due; slept in whole milliseconds, rounded up).  Serving a request and sleeping again
 * here, rather than returning to the runtime after each, keeps an idle
 * actor's cost per transfer to the transfer's own syscalls: every return
 * went through a runtime round and a new park (an eventfd read, a
 * membarrier) on the 2-core machines where a Get's latency is measured. */
static void data_wait(struct cr_actor *self, void *arg, int wake_fd, int64_t timeout_ns) {
    (void)self;
    struct data_state *st = arg;
    if (st->wake_fd_added != wake_fd) {
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = wake_fd};
        if (epoll_ctl(st->epoll_fd, EPOLL_CTL_ADD, wake_fd, &ev) != 0 && errno != EEXIST)
            CR_ERROR("data", "epoll_ctl(wake fd): %s", strerror(errno));
        st->wake_fd_added = wake_fd;
    }
    uint64_t deadline_ns = timeout_ns < 0 ? UINT64_MAX : cr_monotonic_ns() + (uint64_t)timeout_ns;
    for (int wait_ms = cr_timeout_ms(timeout_ns);;) {
        struct epoll_event events[2];
        int n = epoll_wait(st->epoll_fd, events, 2, wait_ms);
        if (n < 0 && errno != EINTR) CR_ERROR("data", "epoll_wait: %s", strerror(errno));
        bool woken = false;
        for (int i = 0; i < n; i++) woken |= events[i].data.fd == wake_fd;
        if (st->xfer != NULL && n > (int)woken) (void)cr_xfer_server_run(st->xfer, 0);
        if (woken || n <= 0 || (wait_ms = ms_left(deadline_ns)) == 0) return;
    }
}

static void data_stats(struct cr_actor *self, void *arg, struct cr_actor_stats *out) {
    (void)self;
    struct data_state *st = arg;
    cr_actor_stats_add(out, "segment_bytes", st->xfer != NULL ? st->segment.size : 0);
    cr_actor_stats_add(out, "mounted", st->mounted);
    cr_actor_stats_add(out, "mounts_total", st->mounts);
    cr_actor_stats_add(out, "mount_failures_total", st->mount_failures);
    cr_actor_stats_add(out, "remounts_total", st->remounts);
    cr_actor_stats_add(out, "pings_total", st->pings);
    cr_actor_stats_add(out, "send_failures_total", st->send_failures);
    cr_actor_stats_add(out, "tasks_run_total", st->tasks_run);
    cr_actor_stats_add(out, "tasks_failed_total", st->tasks_failed);
    cr_actor_stats_add(out, "task_reports_refused_total", st->task_reports_refused);
    cr_actor_stats_add(out, "offloads_run_total", st->offloads_run);
    cr_actor_stats_add(out, "offloads_failed_total", st->offloads_failed);
    cr_actor_stats_add(out, "offload_files_removed_total", st->offload_files_removed);
    cr_actor_stats_add(out, "ssd_capacity_bytes", st->ssd_capacity);
    cr_actor_stats_add(out, "ssd_gone_reported_total", st->ssd_gone_reported);
    cr_actor_stats_add(out, "ssd_gone_reports_refused_total", st->ssd_gone_reports_refused);
    if (st->xfer == NULL) return;
    struct cr_xfer_server_stats x;
    cr_xfer_server_get_stats(st->xfer, &x);
    cr_actor_stats_add(out, "transfer_reads_total", x.requests_read);
    cr_actor_stats_add(out, "transfer_writes_total", x.requests_written);
    cr_actor_stats_add(out, "transfer_bytes_read_total", x.bytes_read);
    cr_actor_stats_add(out, "transfer_bytes_written_total", x.bytes_written);
    cr_actor_stats_add(out, "transfer_refused_total",
                       x.refused_out_of_bounds + x.refused_no_segment + x.refused_malformed);
    cr_actor_stats_add(out, "transfer_connections_open", x.connections_open);
    cr_actor_stats_add(out, "transfer_shm_refused_total", x.shm_refused_peer);
    cr_actor_stats_add(out, "transfer_shm_refused_unsealed_total", x.shm_refused_unsealed);
    cr_actor_stats_add(out, "transfer_shm_files_total", x.shm_files);
    cr_actor_stats_add(out, "transfer_shm_files_refused_total", x.shm_files_refused);
    uint64_t cap_refused = 0;
    for (int v = 0; v < CR_CAP_VERDICTS; v++) cap_refused += x.refused_capability[v];
    cr_actor_stats_add(out, "transfer_capability_refused_total", cap_refused);
    /* By cause ("missing" counts, among others, every Mooncake client's
     * transfer under --data-require-capability: its descriptors carry none). */
    static const char *const by_cause[CR_CAP_VERDICTS] = {
        [CR_CAP_MISSING] = "transfer_capability_refused_missing_total",
        [CR_CAP_NO_KEY] = "transfer_capability_refused_no_key_total",
        [CR_CAP_BAD_MAC] = "transfer_capability_refused_bad_mac_total",
        [CR_CAP_EXPIRED] = "transfer_capability_refused_expired_total",
        [CR_CAP_OUT_OF_RANGE] = "transfer_capability_refused_out_of_range_total",
        [CR_CAP_WRONG_MODE] = "transfer_capability_refused_wrong_mode_total"};
    for (int v = CR_CAP_MISSING; v < CR_CAP_VERDICTS; v++)
        cr_actor_stats_add(out, by_cause[v], x.refused_capability[v]);
    cr_actor_stats_add(out, "transfer_capability_checked_total", x.capability_checked);
}

static void data_destroy(void *arg) {
    struct data_state *st = arg;
    if (st == NULL) return;
    cr_xfer_client_destroy(st->exec);
    cr_xfer_server_destroy(st->xfer);
    if (st->ssd_open) cr_store_ssd_close(&st->ssd); /* after the server: no reader left */
    cr_xfer_segment_free(&st->segment);
    if (st->epoll_fd >= 0) close(st->epoll_fd);
    free(st);
}

/* --local-segment-ssd-dir: opens the tier (checking its files), serves it as
 * "crescentd-local#ssd" under the segment's key, and has it announced at
 * mount.  A failure is crescentd's start's (exit 2), with the flags named. */
static int open_ssd(struct data_state *st, const struct cr_daemon_config *config) {
    char why[512];
    int rc = cr_store_ssd_open(&st->ssd, config->local_segment_ssd_dir,
                               config->local_segment_ssd_size, SSD_PROMOTION_HITS, why,
                               sizeof(why));
    st->ssd_open = true; /* its lock exists either way */
    if (rc != CR_OK) {
        fprintf(stderr, "crescentd: %s (--local-segment-ssd-dir, --local-segment-ssd-size)\n",
                why);
        return rc;
    }
    const char *name = DATA_SEGMENT_NAME CR_CAP_SSD_SUFFIX;
    rc = cr_xfer_server_register_reader(st->xfer, name, cr_store_ssd_read, &st->ssd);
    if (rc == CR_OK && st->has_cap_key) rc = cr_xfer_server_set_key(st->xfer, name, st->cap_key);
    if (rc == CR_OK) rc = cr_xfer_server_set_opener(st->xfer, name, cr_store_ssd_open_value);
    if (rc != CR_OK) {
        fprintf(stderr, "crescentd: cannot serve the local segment's SSD tier as '%s': %s\n",
                name, cr_strerror(rc));
        return rc;
    }
    st->ssd_capacity = config->local_segment_ssd_size;
    st->ssd.reports = true; /* gone files are noted for report_ssd_gone */
    return CR_OK;
}

/* Allocates, binds and registers on the main thread, so that a data address
 * in use fails crescentd's start (exit 2) instead of a running actor. */
static int data_create(const struct cr_daemon_config *config, void **state_out) {
    struct data_state *st = calloc(1, sizeof(*st));
    if (st == NULL) return CR_ERR_NOMEM;
    st->wake_fd_added = -1;
    st->ping_every_ms = config->client_ttl * 1000u / 4;
    st->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    uint8_t id[16];
    if (st->epoll_fd < 0 || getrandom(id, sizeof(id), 0) != (ssize_t)sizeof(id)) {
        data_destroy(st);
        return CR_ERR_IO;
    }
    crescent__master__uuid__init(&st->id);
    for (int i = 0; i < 8; i++) {
        st->id.first = st->id.first << 8 | id[i];
        st->id.second = st->id.second << 8 | id[8 + i];
    }
    *state_out = st;
    if (config->local_segment_size == 0) return CR_OK;
    int rc = cr_xfer_segment_alloc(config->local_segment_size, &st->segment);
    if (rc != CR_OK) {
        fprintf(stderr, "crescentd: cannot allocate the %llu-byte local segment: %s "
                "(--local-segment-size, 0 turns it off)\n",
                (unsigned long long)config->local_segment_size, cr_strerror(rc));
        return rc == CR_ERR_INVALID_PARAMS ? rc : CR_ERR_IO;
    }
    int gid = -1; /* validated with the config: "auto" or 0..255 */
    bool gid_ok = cr_xfer_verbs_parse_gid_index(config->data_rdma_gid_index, &gid);
    assert(gid_ok);
    (void)gid_ok;
    struct cr_xfer_server_config xc = {.tcp_address = config->data_address,
                                       .shm_disabled = config->data_no_shm,
                                       .verbs_disabled = config->data_no_verbs,
                                       .rdma_devices = config->data_rdma_devices,
                                       .rdma_gid_index_set = gid >= 0,
                                       .rdma_gid_index = (uint8_t)(gid < 0 ? 0 : gid),
                                       .require_capability = config->data_require_capability};
    if (config->data_no_verbs)
        CR_INFO("data", "verbs off (--data-no-verbs true): the local segment and its copy/move "
                "tasks move bytes by tcp%s, protocol tcp at the master",
                config->data_no_shm ? "" : " (and shm on this host)");
    rc = cr_xfer_server_create(&xc, &st->xfer);
    if (rc == CR_OK) rc = cr_xfer_server_register_segment(st->xfer, DATA_SEGMENT_NAME, &st->segment);
    if (rc == CR_OK) { /* the key the master signs this segment's capabilities with */
        st->has_cap_key = cr_cap_key_generate(st->cap_key) == 0 &&
                          cr_xfer_server_set_key(st->xfer, DATA_SEGMENT_NAME, st->cap_key) == CR_OK;
        if (!st->has_cap_key && config->data_require_capability) rc = CR_ERR_IO;
    }
    struct cr_xfer_client_config cc = {.shm_disabled = config->data_no_shm,
                                       .verbs_disabled = config->data_no_verbs,
                                       .rdma_devices = config->data_rdma_devices,
                                       .rdma_gid_index_set = xc.rdma_gid_index_set,
                                       .rdma_gid_index = xc.rdma_gid_index};
    if (rc == CR_OK) rc = cr_xfer_client_create(&cc, &st->exec);
    if (rc == CR_OK && config->local_segment_ssd_dir[0] != '\0' && open_ssd(st, config) != CR_OK)
        return CR_ERR_IO;
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = -1};
    if (rc == CR_OK &&
        epoll_ctl(st->epoll_fd, EPOLL_CTL_ADD, cr_xfer_server_fd(st->xfer), &ev) != 0)
        rc = CR_ERR_IO;
    if (rc != CR_OK) {
        fprintf(stderr, "crescentd: cannot serve the local segment on %s: %s (--data-address)\n",
                config->data_address, cr_strerror(rc));
        return rc == CR_ERR_INVALID_PARAMS ? rc : CR_ERR_IO;
    }
    return CR_OK;
}

static const struct cr_actor_ops data_ops = {
    .start = data_start,
    .handle = data_handle,
    .discard = data_discard,
    .wait = data_wait,
    .stats = data_stats,
};

const struct cr_subsystem_def cr_data_def = {
    .name = "data",
    .ops = &data_ops,
    .create = data_create,
    .destroy = data_destroy,
};
