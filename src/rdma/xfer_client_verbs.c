/* The transfer client's verbs side (design in README.md, "verbs").
 *
 * At create the client opens the first RDMA device (context + PD) when there
 * is one.  cr_xfer_client_register registers a buffer on that PD once.  At a
 * peer's first use, when it is not same-host, the client opens a control
 * connection to the peer's tcp port, creates a QP set (a CQ and
 * connections_per_peer RC QPs), sends HELLO with its QPs and connects them to
 * the QPs of the answer.  A segment's key (rkey, base, size) is asked for
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
 * fails with the work completion's status, the peer takes no new verbs ops,
 * and once every posted request is reaped the QP set and control connection
 * close; the next op to the peer says hello again (new QPs, keys asked
 * again). */
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
#define POLL_BATCH 32

/* ---- the device and registered buffers ---------------------------------- */

void cr_xfer_verbs_client_open(struct cr_xfer_client *cli) {
    if (cli->cfg.verbs_disabled) {
        cli->verbs_devices = 0;
        snprintf(cli->verbs_error, sizeof(cli->verbs_error), "disabled by config");
        return;
    }
    cli->verbs_devices = cr_xfer_verbs_probe(cli->verbs_error, sizeof(cli->verbs_error));
    if (cli->verbs_devices == 0) return;
    char why[sizeof(cli->verbs_error)];
    int gid = cli->cfg.rdma_gid_index_set ? cli->cfg.rdma_gid_index : -1;
    if (cr_xfer_verbs_device_open(0, 1, gid, &cli->verbs_dev, why, sizeof(why)) != CR_OK) {
        CR_WARN("xfer", "an RDMA device is present but cannot be opened (%s): transfers use tcp",
                why);
        cli->verbs_devices = 0;
        snprintf(cli->verbs_error, sizeof(cli->verbs_error), "RDMA device unusable: %.120s", why);
    }
}

void cr_xfer_verbs_client_close(struct cr_xfer_client *cli) {
    for (uint32_t i = 0; i < CR_XFER_BUFFERS_MAX; i++) cr_xfer_verbs_buffer_release(&cli->buffers[i]);
    memset(cli->buffers, 0, sizeof(cli->buffers));
    cr_xfer_verbs_device_close(cli->verbs_dev);
    cli->verbs_dev = NULL;
}

int cr_xfer_verbs_buffer_register(struct cr_xfer_client *cli, struct xfer_buffer *b) {
    if (cli->verbs_dev == NULL) return CR_OK; /* tcp and shm need no registration */
    uint32_t rkey = 0;
    int rc = cr_xfer_verbs_register(cli->verbs_dev, b->addr, b->len, &b->mr, &b->lkey, &rkey,
                                    cli->last_error, sizeof(cli->last_error));
    if (rc != CR_OK) b->mr = NULL;
    return rc;
}

void cr_xfer_verbs_buffer_release(struct xfer_buffer *b) {
    cr_xfer_verbs_deregister(b->mr);
    b->mr = NULL;
}

/* The lkey of the registered buffer holding [addr, addr + len), or false. */
static bool find_lkey(const struct cr_xfer_client *cli, const void *addr, uint64_t len,
                      uint32_t *lkey) {
    for (uint32_t i = 0; i < CR_XFER_BUFFERS_MAX; i++) {
        const struct xfer_buffer *b = &cli->buffers[i];
        if (b->mr != NULL && cr_xfer_range_inside((uintptr_t)b->addr, b->len, (uintptr_t)addr, len)) {
            *lkey = b->lkey;
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
    int rc = cr_xfer_verbs_open(cli->verbs_dev, cli->cfg.connections_per_peer, SEND_DEPTH, &v->qps,
                                why, why_size);
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
    return cr_xfer_verbs_connect(v->qps, &theirs, why, why_size);
}

bool cr_xfer_verbs_peer_connect(struct cr_xfer_client *cli, struct xfer_peer *peer, char *why,
                                size_t why_size) {
    assert(peer->verbs == NULL);
    if (cli->verbs_dev == NULL) {
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
static const struct xfer_verbs_key *segment_key(struct xfer_peer *peer, const char *segment) {
    struct xfer_verbs_peer *v = peer->verbs;
    size_t len = strlen(segment);
    for (uint32_t i = 0; i < CR_XFER_VERBS_KEYS_MAX; i++) {
        const struct xfer_verbs_key *k = &v->keys[i];
        if (k->used && k->name_len == len && memcmp(k->name, segment, len) == 0)
            return k->tcp_only ? NULL : k;
    }
    struct cr_xfer_request req = {.op = CR_XFER_FRAME_KEY, .name_len = (uint8_t)len,
                                  .name = segment};
    uint8_t answer[CR_XFER_VERBS_KEY_BYTES];
    int32_t status = CR_OK;
    uint64_t got = 0;
    char why[160];
    struct cr_xfer_verbs_key key = {0};
    int rc = exchange(v, &req, &status, answer, sizeof(answer), &got, why, sizeof(why));
    if (rc == CR_OK && status == CR_OK && got > 0 &&
        cr_xfer_verbs_key_decode(answer, got, &key) != CR_OK) {
        rc = CR_ERR_PROTOCOL;
        snprintf(why, sizeof(why), "the peer's key for segment '%.64s' does not decode", segment);
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
        if (!find_lkey(cli, op->iov[i].iov_base, op->iov[i].iov_len, &local[count].lkey))
            return CR_XFER_VERBS_USE_TCP; /* not registered memory */
        count++;
    }
    if (count == 0) return CR_XFER_VERBS_USE_TCP;
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
    const struct xfer_verbs_key *k = segment_key(peer, op->segment);
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

/* The op's failure in words: the peer, the op, the work completion status. */
static void describe(const struct xfer_op_slot *slot, const char *reason, char *out, size_t size) {
    bool access = strcmp(reason, "remote access error") == 0;
    snprintf(out, size, "%s: RDMA %s of segment '%.48s' range 0x%llx+%llu failed: %s%s",
             slot->peer->endpoint, slot->opcode == CR_XFER_WRITE ? "WRITE" : "READ",
             slot->segment, (unsigned long long)slot->remote_addr,
             (unsigned long long)slot->length, reason,
             access ? " (the segment was unregistered, or the range left it)" : "");
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
                describe(slot, done[i].reason, message, sizeof(message));
                if (!v->failed)
                    CR_WARN("xfer", "%s; the peer's QPs close once drained, the next op says "
                            "hello again", message);
                v->failed = true;
            }
            cr_xfer_part_done(cli, (uint32_t)done[i].wr_id, done[i].status, message);
        }
    } while (n == POLL_BATCH);
}

void cr_xfer_verbs_run(struct cr_xfer_client *cli) {
    if (cli->verbs_dev == NULL) return;
    for (uint32_t i = 0; i < CR_XFER_PEERS_MAX; i++) {
        struct xfer_peer *peer = &cli->peers[i];
        if (!peer->used || peer->verbs == NULL) continue;
        if (cr_xfer_verbs_outstanding(peer->verbs->qps) > 0) reap(cli, peer);
        if (peer->verbs->failed && cr_xfer_verbs_outstanding(peer->verbs->qps) == 0) {
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
