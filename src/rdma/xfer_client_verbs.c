/* The transfer client's verbs side (design in README.md, "verbs").
 *
 * At create the client opens its RDMA devices (the ones named in the config,
 * or every one whose port is active; a context + PD each).
 * cr_xfer_client_register registers a buffer on every device once.  At a
 * peer's first use, when it is not same-host, the client opens a control
 * connection to the peer's tcp port, creates a QP set (connections_per_peer
 * RC QPs spread over its devices, a CQ per device), sends HELLO with its
 * devices and QPs and connects them to the QPs of the answer.  A segment's key (rkey, base, size) is asked for
 * with KEY on the first op that names it and cached.  Both are blocking
 * request/answer exchanges with the connect timeout as deadline, like the shm
 * map request: they happen once per peer and segment.
 *
 * An op goes by verbs when all its local memory lies in registered buffers,
 * the segment has a key and the range lies inside it: one RDMA READ or WRITE
 * per stripe (4 MiB and more: one stripe per QP), wr_id = the op's slot.
 * Completions are reaped in cr_xfer_client_poll (busy-polled: no completion
 * channel).  Anything else goes by tcp.
 *
 * A failed work request leaves its QP in error and flushes the rest: the op
 * fails with the work completion's status, naming the device.  A path
 * failure (nobody answers, a local error) takes only that QP out: later ops
 * go on the QPs left, on the other devices.  When none is left, or the peer
 * refused an access (its key went stale), the peer takes no new verbs ops,
 * and once every posted request is reaped the QP set and control connection
 * close; the next op to the peer says hello again (new QPs, keys asked
 * again) -- after every QP failed on its path, only after VERBS_RETRY_MS of
 * tcp. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/log.h"
#include "crescent/error.h"
#include "rdma/xfer_client_internal.h"
#include "rdma/xfer_frame.h"
#include "rdma/xfer_internal.h"
#include "rdma/xfer_verbs.h"

#define SEND_DEPTH 128u /* outstanding work requests per QP */
#define VERBS_RETRY_MS 30000u /* tcp after every QP failed, before saying hello again */
#define POLL_BATCH 32

/* ---- the device and registered buffers ---------------------------------- */

void cr_xfer_verbs_client_open(struct cr_xfer_client *cli) {
    if (cli->cfg.verbs_disabled) {
        cli->verbs_devices = 0;
        snprintf(cli->verbs_error, sizeof(cli->verbs_error), "disabled by config");
        return;
    }
    char why[sizeof(cli->verbs_error)];
    if (cr_xfer_verbs_probe(why, sizeof(why)) == 0) {
        memcpy(cli->verbs_error, why, sizeof(why));
        return;
    }
    int gid = cli->cfg.rdma_gid_index_set ? cli->cfg.rdma_gid_index : -1;
    cli->verbs_devices = cr_xfer_verbs_devices_open(cli->cfg.rdma_devices, gid, cli->verbs_devs,
                                                    why, sizeof(why));
    if (cli->verbs_devices == 0) {
        CR_WARN("xfer", "RDMA devices are present but none can be used (%s): transfers use tcp",
                why);
        snprintf(cli->verbs_error, sizeof(cli->verbs_error), "%.150s", why);
    }
}

void cr_xfer_verbs_client_close(struct cr_xfer_client *cli) {
    for (uint32_t i = 0; i < CR_XFER_BUFFERS_MAX; i++) cr_xfer_verbs_buffer_release(&cli->buffers[i]);
    memset(cli->buffers, 0, sizeof(cli->buffers));
    cr_xfer_verbs_devices_close(cli->verbs_devs, cli->verbs_devices);
    cli->verbs_devices = 0;
}

int cr_xfer_verbs_buffer_register(struct cr_xfer_client *cli, struct xfer_buffer *b) {
    if (cli->verbs_devices == 0) return CR_OK; /* tcp and shm need no registration */
    return cr_xfer_verbs_region_register(cli->verbs_devs, cli->verbs_devices, b->addr, b->len,
                                         &b->region, cli->last_error, sizeof(cli->last_error));
}

void cr_xfer_verbs_buffer_release(struct xfer_buffer *b) { cr_xfer_verbs_region_deregister(&b->region); }

/* The lkeys of the registered buffer holding [addr, addr + len), or false. */
static bool find_lkeys(const struct cr_xfer_client *cli, const void *addr, uint64_t len,
                       uint32_t *lkey) {
    for (uint32_t i = 0; i < CR_XFER_BUFFERS_MAX; i++) {
        const struct xfer_buffer *b = &cli->buffers[i];
        if (b->region.count > 0 &&
            cr_xfer_range_inside((uintptr_t)b->addr, b->len, (uintptr_t)addr, len)) {
            memcpy(lkey, b->region.lkey, sizeof(b->region.lkey));
            return true;
        }
    }
    return false;
}

/* ---- the control connection --------------------------------------------- */

static bool send_all(int fd, const uint8_t *buf, size_t len) {
    while (len > 0) {
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        buf += n;
        len -= (size_t)n;
    }
    return true;
}

static bool recv_all(int fd, uint8_t *buf, size_t len) {
    while (len > 0) {
        ssize_t n = recv(fd, buf, len, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            if (n == 0) errno = ECONNRESET;
            return false;
        }
        buf += n;
        len -= (size_t)n;
    }
    return true;
}

/* A blocking connection to the peer's tcp port, send and receive bounded by
 * the connect timeout.  Returns the fd or -1 (errno). */
static int control_connect(const struct cr_xfer_client *cli, const struct xfer_peer *peer) {
    int fd = socket(peer->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (connect(fd, (const struct sockaddr *)&peer->addr, peer->addr_len) != 0 &&
        (errno != EINPROGRESS || cr_xfer_wait_connected(fd, cli->cfg.connect_timeout_ms) != 0)) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    uint32_t ms = cli->cfg.connect_timeout_ms;
    struct timeval tv = {.tv_sec = (time_t)(ms / 1000u), .tv_usec = (suseconds_t)(ms % 1000u) * 1000};
    int one = 1;
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    return fd;
}

/* Sends one setup request and receives its answer: at most `max` payload
 * bytes into payload.  Returns CR_OK with *status and *len set, or CR_ERR_IO /
 * CR_ERR_PROTOCOL with why set. */
static int exchange(struct xfer_verbs_peer *v, const struct cr_xfer_request *req, int32_t *status,
                    uint8_t *payload, uint64_t max, uint64_t *len, char *why, size_t why_size) {
    uint8_t frame[CR_XFER_REQUEST_MAX_BYTES];
    struct cr_xfer_request r = *req;
    r.request_id = v->next_request_id++;
    size_t n = cr_xfer_request_encode(&r, frame);
    uint8_t head[CR_XFER_RESPONSE_BYTES];
    if (!send_all(v->fd, frame, n) || !recv_all(v->fd, head, sizeof(head))) {
        snprintf(why, why_size, "control connection: %s",
                 errno == EAGAIN || errno == EWOULDBLOCK ? "no answer within connect_timeout_ms"
                                                         : strerror(errno));
        return CR_ERR_IO;
    }
    struct cr_xfer_response resp;
    if (cr_xfer_response_parse(head, &resp) != CR_OK || resp.request_id != r.request_id ||
        resp.length > max) {
        snprintf(why, why_size, "control connection: malformed answer (not a crescent "
                                "transfer server of this version?)");
        return CR_ERR_PROTOCOL;
    }
    if (resp.length > 0 && !recv_all(v->fd, payload, resp.length)) {
        snprintf(why, why_size, "control connection: %s", strerror(errno));
        return CR_ERR_IO;
    }
    *status = resp.status;
    *len = resp.length;
    return CR_OK;
}

static void session_free(struct xfer_verbs_peer *v) {
    if (v == NULL) return;
    cr_xfer_verbs_close(v->qps); /* first: the HCA stops touching memory for them */
    if (v->fd >= 0) close(v->fd);
    free(v);
}

/* HELLO: our QPs out, the peer's back, ours connected to them. */
static int say_hello(struct cr_xfer_client *cli, struct xfer_verbs_peer *v, char *why,
                     size_t why_size) {
    int rc = cr_xfer_verbs_open(cli->verbs_devs, cli->verbs_devices, cli->cfg.connections_per_peer,
                                SEND_DEPTH, &v->qps, why, why_size);
    if (rc != CR_OK) return rc;
    struct cr_xfer_verbs_hello ours, theirs;
    uint8_t hello[CR_XFER_VERBS_HELLO_BYTES], answer[CR_XFER_VERBS_HELLO_BYTES];
    cr_xfer_verbs_local_hello(v->qps, &ours);
    cr_xfer_verbs_hello_encode(&ours, hello);
    struct cr_xfer_request req = {.op = CR_XFER_FRAME_HELLO, .hello = hello};
    int32_t status = CR_OK;
    uint64_t len = 0;
    rc = exchange(v, &req, &status, answer, sizeof(answer), &len, why, why_size);
    if (rc != CR_OK) return rc;
    if (status != CR_OK) {
        snprintf(why, why_size, "the peer refused the verbs hello (%s; see its log)",
                 cr_strerror(status));
        return status;
    }
    if (len == 0) {
        snprintf(why, why_size, "the peer has no RDMA device (its protocol is tcp)");
        return CR_ERR_IO;
    }
    if (len != CR_XFER_VERBS_HELLO_BYTES ||
        cr_xfer_verbs_hello_decode(answer, len, &theirs) != CR_OK) {
        snprintf(why, why_size, "the peer's verbs hello does not decode");
        return CR_ERR_PROTOCOL;
    }
    v->peer_devices = theirs.device_count;
    return cr_xfer_verbs_connect(v->qps, &theirs, why, why_size);
}

bool cr_xfer_verbs_peer_connect(struct cr_xfer_client *cli, struct xfer_peer *peer, char *why,
                                size_t why_size) {
    assert(peer->verbs == NULL);
    if (cli->verbs_devices == 0) {
        snprintf(why, why_size, "%s", cli->verbs_error);
        return false;
    }
    struct xfer_verbs_peer *v = calloc(1, sizeof(*v));
    if (v == NULL) {
        snprintf(why, why_size, "out of memory");
        return false;
    }
    v->fd = control_connect(cli, peer);
    if (v->fd < 0) {
        snprintf(why, why_size, "control connection: connect: %s", strerror(errno));
        free(v);
        return false;
    }
    if (say_hello(cli, v, why, why_size) != CR_OK) {
        session_free(v);
        return false;
    }
    peer->verbs = v;
    peer->verbs_offered = true;
    return true;
}

/* ---- keys ---------------------------------------------------------------- */

/* The cached key of `segment`, asked for with KEY when not cached.  NULL:
 * tcp for this op (not registered on the peer's device, no such segment --
 * tcp then says so -- or the control connection failed: v->failed). */
static const struct xfer_verbs_key *segment_key(struct xfer_peer *peer, const char *segment,
                                                const struct cr_cap *cap) {
    struct xfer_verbs_peer *v = peer->verbs;
    size_t len = strlen(segment);
    for (uint32_t i = 0; i < CR_XFER_VERBS_KEYS_MAX; i++) {
        const struct xfer_verbs_key *k = &v->keys[i];
        if (k->used && k->name_len == len && memcmp(k->name, segment, len) == 0)
            return k->tcp_only ? NULL : k;
    }
    /* The first op's capability goes with the KEY: the server hands an rkey
     * out only for one (when it requires them). */
    struct cr_xfer_request req = {.op = CR_XFER_FRAME_KEY, .name_len = (uint8_t)len,
                                  .name = segment, .has_cap = cap != NULL};
    if (cap != NULL) req.cap = *cap;
    uint8_t answer[CR_XFER_VERBS_KEY_BYTES];
    int32_t status = CR_OK;
    uint64_t got = 0;
    char why[224];
    struct cr_xfer_verbs_key key = {0};
    int rc = exchange(v, &req, &status, answer, sizeof(answer), &got, why, sizeof(why));
    if (rc == CR_OK && status == CR_OK && got > 0 &&
        (cr_xfer_verbs_key_decode(answer, got, &key) != CR_OK ||
         key.device_count != v->peer_devices)) {
        rc = CR_ERR_PROTOCOL;
        snprintf(why, sizeof(why), "the peer's key for segment '%.64s' does not decode or does "
                 "not give an rkey for each of its %u devices", segment, v->peer_devices);
    }
    if (rc != CR_OK) {
        CR_WARN("xfer", "peer %s: verbs key request failed (%s): tcp until it reconnects",
                peer->endpoint, why);
        v->failed = true;
        return NULL;
    }
    if (status == CR_ERR_SEGMENT_NOT_FOUND) return NULL; /* not cached: it may be registered later */
    struct xfer_verbs_key *k = NULL;
    for (uint32_t i = 0; i < CR_XFER_VERBS_KEYS_MAX && k == NULL; i++)
        if (!v->keys[i].used) k = &v->keys[i];
    if (k == NULL) k = &v->keys[v->next_evict++ % CR_XFER_VERBS_KEYS_MAX];
    *k = (struct xfer_verbs_key){.used = true, .tcp_only = status != CR_OK || got == 0,
                                 .name_len = (uint8_t)len, .key = key};
    memcpy(k->name, segment, len + 1);
    return k->tcp_only ? NULL : k;
}

/* ---- ops ----------------------------------------------------------------- */

int cr_xfer_verbs_submit(struct cr_xfer_client *cli, struct xfer_peer *peer,
                         const struct cr_xfer_op *op, uint64_t length) {
    struct cr_xfer_verbs_local local[CR_XFER_OP_IOV_MAX];
    uint32_t count = 0;
    for (uint32_t i = 0; i < op->iov_count; i++) {
        if (op->iov[i].iov_len == 0) continue;
        local[count] = (struct cr_xfer_verbs_local){.addr = op->iov[i].iov_base,
                                                    .length = op->iov[i].iov_len};
        if (!find_lkeys(cli, op->iov[i].iov_base, op->iov[i].iov_len, local[count].lkey))
            return CR_XFER_VERBS_USE_TCP; /* not registered memory */
        count++;
    }
    if (count == 0) return CR_XFER_VERBS_USE_TCP;
    if (peer->verbs == NULL && cr_xfer_now_ns() < peer->verbs_retry_ns)
        return CR_XFER_VERBS_USE_TCP; /* every QP failed not long ago */
    if (peer->verbs == NULL) { /* closed after a failure: hello again */
        char why[192];
        if (!cr_xfer_verbs_peer_connect(cli, peer, why, sizeof(why))) {
            CR_WARN("xfer", "peer %s: verbs reconnect failed (%s): transport tcp from now on",
                    peer->endpoint, why);
            peer->verbs_offered = false;
            return CR_XFER_VERBS_USE_TCP;
        }
        CR_INFO("xfer", "peer %s: verbs reconnected", peer->endpoint);
    }
    if (peer->verbs->failed) return CR_XFER_VERBS_USE_TCP;
    const struct xfer_verbs_key *k = segment_key(peer, op->segment, op->cap);
    if (k == NULL || !cr_xfer_range_inside(k->key.base, k->key.size, op->remote_addr, length))
        return CR_XFER_VERBS_USE_TCP; /* tcp answers with the refusal and its message */
    uint32_t index = cli->free_op; /* the slot cr_xfer_op_take takes: its wr_id */
    uint32_t posted = 0;
    int rc = cr_xfer_verbs_post(peer->verbs->qps, op->opcode == CR_XFER_WRITE, local, count,
                                op->remote_addr, k->key.rkey, length, index, &posted);
    if (rc == CR_ERR_AGAIN) {
        snprintf(cli->last_error, sizeof(cli->last_error),
                 "%s: verbs send queues full (%u per QP): poll and retry", peer->endpoint,
                 SEND_DEPTH);
        return CR_ERR_AGAIN;
    }
    if (rc == CR_ERR_IO) peer->verbs->failed = true;
    if (posted == 0) return CR_XFER_VERBS_USE_TCP;
    cli->verbs_outstanding += posted;
    uint32_t taken = cr_xfer_op_take(cli, op, length, peer);
    assert(taken == index);
    struct xfer_op_slot *slot = &cli->ops[taken];
    slot->verbs = true;
    slot->parts_left = posted;
    if (rc != CR_OK) { /* some stripes are on the wire, the rest never went */
        slot->status = CR_ERR_IO;
        snprintf(slot->message, sizeof(slot->message), "%s: ibv_post_send refused a stripe",
                 peer->endpoint);
    }
    return CR_OK;
}

/* The op's failure in words: the peer, the op, the device, the work
 * completion status. */
static void describe(const struct xfer_op_slot *slot, const char *device, const char *reason,
                     char *out, size_t size) {
    bool access = strcmp(reason, "remote access error") == 0;
    snprintf(out, size, "%s: RDMA %s of segment '%.48s' range 0x%llx+%llu on %s failed: %s%s",
             slot->peer->endpoint, slot->opcode == CR_XFER_WRITE ? "WRITE" : "READ",
             slot->segment, (unsigned long long)slot->remote_addr,
             (unsigned long long)slot->length, device, reason,
             access ? " (the segment was unregistered, or the range left it)" : "");
}

/* A work request failed on QP qp.  A refusal by the peer (a stale key)
 * ends the session; a path failure takes that QP out, and the session ends
 * when none is left. */
static void qp_failed(struct xfer_peer *peer, const struct cr_xfer_verbs_completion *c,
                      const char *message) {
    struct xfer_verbs_peer *v = peer->verbs;
    if (c->remote_access) {
        if (!v->failed)
            CR_WARN("xfer", "%s; the peer's QPs close once drained, the next op says hello again",
                    message);
        v->failed = true;
        return;
    }
    if (!cr_xfer_verbs_qp_fail(v->qps, c->qp)) return; /* flushed after its first error */
    uint32_t left = cr_xfer_verbs_live_qps(v->qps);
    if (left > 0) {
        CR_WARN("xfer", "%s; the QPs on that path are left out, %u QP(s) left for the peer",
                message, left);
        return;
    }
    CR_WARN("xfer", "%s; every verbs QP to the peer has failed: transport tcp for %u s, then "
            "hello again", message, VERBS_RETRY_MS / 1000u);
    v->failed = v->paths_failed = true;
}

static void reap(struct cr_xfer_client *cli, struct xfer_peer *peer) {
    struct xfer_verbs_peer *v = peer->verbs;
    struct cr_xfer_verbs_completion done[POLL_BATCH];
    int n;
    do {
        n = cr_xfer_verbs_poll(v->qps, done, POLL_BATCH);
        for (int i = 0; i < n; i++) {
            assert(done[i].wr_id < cli->cfg.max_ops && cli->verbs_outstanding > 0);
            struct xfer_op_slot *slot = &cli->ops[done[i].wr_id];
            assert(slot->used && slot->verbs && slot->peer == peer);
            cli->verbs_outstanding--;
            char message[320] = ""; /* cut to CR_XFER_MESSAGE_MAX by part_done */
            if (done[i].status != CR_OK) {
                describe(slot, cr_xfer_verbs_qp_device(v->qps, done[i].qp), done[i].reason,
                         message, sizeof(message));
                qp_failed(peer, &done[i], message);
            }
            cr_xfer_part_done(cli, (uint32_t)done[i].wr_id, done[i].status, message);
        }
    } while (n == POLL_BATCH);
}

void cr_xfer_verbs_run(struct cr_xfer_client *cli) {
    if (cli->verbs_devices == 0) return;
    for (uint32_t i = 0; i < CR_XFER_PEERS_MAX; i++) {
        struct xfer_peer *peer = &cli->peers[i];
        if (!peer->used || peer->verbs == NULL) continue;
        if (cr_xfer_verbs_outstanding(peer->verbs->qps) > 0) reap(cli, peer);
        if (peer->verbs->failed && cr_xfer_verbs_outstanding(peer->verbs->qps) == 0) {
            if (peer->verbs->paths_failed)
                peer->verbs_retry_ns = cr_xfer_now_ns() + (uint64_t)VERBS_RETRY_MS * 1000000u;
            session_free(peer->verbs);
            peer->verbs = NULL;
        }
    }
}

void cr_xfer_verbs_peer_close(struct cr_xfer_client *cli, struct xfer_peer *peer) {
    struct xfer_verbs_peer *v = peer->verbs;
    if (v == NULL) return;
    assert(cli->verbs_outstanding >= cr_xfer_verbs_outstanding(v->qps));
    cli->verbs_outstanding -= cr_xfer_verbs_outstanding(v->qps);
    peer->verbs = NULL;
    session_free(v); /* QPs destroyed: nothing touches the ops' memory any more */
    for (uint32_t i = 0; i < cli->cfg.max_ops; i++) {
        struct xfer_op_slot *slot = &cli->ops[i];
        if (!slot->used || !slot->verbs || slot->peer != peer) continue;
        slot->parts_left = 1;
        cr_xfer_part_done(cli, i, CR_ERR_SHUTDOWN, "client shutting down");
    }
}
