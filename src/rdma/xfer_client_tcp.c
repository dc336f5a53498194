/* The transfer client's tcp connections.
 *
 * A connection carries a FIFO of parts (requests): [head, sent) were written
 * and await their response, [sent, tail) wait to be written.  The server
 * answers in order, so the response at the front of the stream belongs to
 * parts[head]; its request_id must match, else the stream is out of step and
 * the connection fails.
 *
 * Writing: every unsent request of a connection goes out in one writev per
 * CR_XFER_CONN_TX_BATCH requests, headers encoded into the connection's
 * header area and WRITE payloads straight from the caller's iovecs.
 * Reading: response headers and the small payloads that come with them land
 * in the receive buffer (copied out: cheaper than a syscall per response);
 * a READ payload still to come is read with readv straight into the caller's
 * iovecs, with the receive buffer after it for the next header.
 *
 * Any error (peer closed, refusal, malformed response, no progress for
 * op_timeout_ms) fails every part of the connection with a message that names
 * the peer; the next op to this peer connects again. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "core/log.h"
#include "crescent/error.h"
#include "rdma/xfer_client_internal.h"
#include "rdma/xfer_internal.h"

#define RX_IOV_MAX 16u
#define TX_IOV_MAX 64u

static struct xfer_part *part_at(struct xfer_tcp_conn *c, uint32_t index) {
    return &c->parts[index % CR_XFER_CONN_PARTS];
}

static bool is_write(const struct xfer_tcp_conn *c, const struct xfer_part *p) {
    return c->cli->ops[p->op].opcode == CR_XFER_WRITE;
}

static void set_events(struct xfer_tcp_conn *c, uint32_t events) {
    if (c->events == events) return;
    struct epoll_event ev = {.events = events, .data.ptr = c};
    if (epoll_ctl(c->cli->epoll_fd, EPOLL_CTL_MOD, c->fd, &ev) == 0) c->events = events;
}

int cr_xfer_tcp_connect(struct xfer_tcp_conn *c) {
    assert(c->fd < 0);
    struct cr_xfer_client *cli = c->cli;
    struct xfer_peer *peer = c->peer;
    int fd = socket(peer->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 ||
        (connect(fd, (struct sockaddr *)&peer->addr, peer->addr_len) != 0 &&
         (errno != EINPROGRESS || cr_xfer_wait_connected(fd, cli->cfg.connect_timeout_ms) != 0)) ||
        !cr_xfer_socket_tune(fd)) {
        snprintf(cli->last_error, sizeof(cli->last_error), "%s: tcp connect failed: %s",
                 peer->endpoint, strerror(errno));
        if (fd >= 0) close(fd);
        return CR_ERR_IO;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    if (epoll_ctl(cli->epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        snprintf(cli->last_error, sizeof(cli->last_error), "%s: epoll_ctl failed: %s",
                 peer->endpoint, strerror(errno));
        close(fd);
        return CR_ERR_IO;
    }
    c->fd = fd;
    cli->tcp_open++;
    c->events = EPOLLIN;
    c->answered = false;
    c->head = c->sent = c->tail = 0;
    c->send_offset = c->bytes_queued = c->payload_left = 0;
    c->rx_pos = c->rx_fill = 0;
    return CR_OK;
}

bool cr_xfer_tcp_has_room(const struct xfer_tcp_conn *c, uint32_t parts) {
    return c->tail - c->head + parts <= CR_XFER_CONN_PARTS;
}

void cr_xfer_tcp_enqueue(struct xfer_tcp_conn *c, const struct xfer_part *part) {
    assert(c->fd >= 0 && cr_xfer_tcp_has_room(c, 1));
    if (c->head == c->tail) c->last_progress_ns = cr_xfer_now_ns();
    struct xfer_part *p = part_at(c, c->tail++);
    *p = *part;
    p->request_id = c->next_request_id++;
    c->bytes_queued += p->length;
    if (!c->dirty) {
        c->dirty = true;
        c->cli->dirty[c->cli->dirty_count++] = c;
    }
}

void cr_xfer_tcp_fail(struct xfer_tcp_conn *c, int status, const char *reason) {
    struct cr_xfer_client *cli = c->cli;
    if (c->fd >= 0) {
        epoll_ctl(cli->epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
        c->fd = -1;
        assert(cli->tcp_open > 0);
        cli->tcp_open--;
    }
    char message[CR_XFER_MESSAGE_MAX];
    snprintf(message, sizeof(message), "%s: %s", c->peer->endpoint, reason);
    /* Detach the parts first: a callback may submit to this peer again. */
    uint32_t head = c->head, tail = c->tail;
    c->head = c->sent = c->tail = 0;
    c->bytes_queued = c->payload_left = 0;
    struct xfer_part failed[CR_XFER_CONN_PARTS];
    uint32_t count = 0;
    for (uint32_t i = head; i != tail; i++) failed[count++] = *part_at(c, i);
    for (uint32_t i = 0; i < count; i++) cr_xfer_part_done(cli, failed[i].op, status, message);
}

/* Lays out the unsent parts as iovecs (headers encoded into c->headers).
 * Returns the iovec count. */
static int gather_unsent(struct xfer_tcp_conn *c, struct iovec *iov) {
    uint32_t n = 0;
    uint64_t skip = c->send_offset;
    for (uint32_t i = c->sent, k = 0; i != c->tail && k < CR_XFER_CONN_TX_BATCH; i++, k++) {
        if (n + 2 > TX_IOV_MAX) break;
        const struct xfer_part *p = part_at(c, i);
        const struct xfer_op_slot *op = &c->cli->ops[p->op];
        struct cr_xfer_request req = {
            .op = op->opcode == CR_XFER_WRITE ? CR_XFER_FRAME_WRITE : CR_XFER_FRAME_READ,
            .name_len = op->segment_len, .request_id = p->request_id,
            .addr = p->remote_addr, .length = p->length, .name = op->segment,
            .has_cap = op->has_cap, .cap = op->cap};
        size_t header_len = cr_xfer_request_encode(&req, c->headers[k]);
        if (skip < header_len) iov[n++] = (struct iovec){c->headers[k] + skip, header_len - skip};
        uint64_t payload_skip = skip > header_len ? skip - header_len : 0;
        skip = 0;
        if (op->opcode != CR_XFER_WRITE || p->length == payload_skip) continue;
        uint32_t room = TX_IOV_MAX - n;
        uint32_t used = cr_xfer_iov_slice(op->iov, op->iov_count, p->local_offset + payload_skip,
                                          p->length - payload_skip, iov + n, room);
        n += used;
        if (used == room) break; /* possibly cut short: nothing after it this round */
    }
    return (int)n;
}

/* Marks `bytes` written: advances `sent` over every part completely out. */
static void advance_sent(struct xfer_tcp_conn *c, uint64_t bytes) {
    while (bytes > 0) {
        assert(c->sent != c->tail);
        const struct xfer_part *p = part_at(c, c->sent);
        const struct xfer_op_slot *op = &c->cli->ops[p->op];
        uint64_t total = CR_XFER_REQUEST_HEADER_BYTES + op->segment_len +
                         (op->has_cap ? CR_CAP_BYTES : 0) + (op->opcode == CR_XFER_WRITE ? p->length : 0);
        uint64_t left = total - c->send_offset;
        if (bytes < left) {
            c->send_offset += bytes;
            return;
        }
        bytes -= left;
        c->send_offset = 0;
        c->sent++;
    }
}

void cr_xfer_tcp_flush(struct xfer_tcp_conn *c) {
    while (c->fd >= 0 && c->sent != c->tail) {
        struct iovec iov[TX_IOV_MAX];
        int n = gather_unsent(c, iov);
        ssize_t wrote = writev(c->fd, iov, n);
        if (wrote < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                set_events(c, EPOLLIN | EPOLLOUT);
                return;
            }
            char reason[96];
            snprintf(reason, sizeof(reason), "send failed: %s", strerror(errno));
            cr_xfer_tcp_fail(c, CR_ERR_IO, reason);
            return;
        }
        c->last_progress_ns = cr_xfer_now_ns();
        advance_sent(c, (uint64_t)wrote);
    }
    if (c->fd >= 0) set_events(c, EPOLLIN);
}

/* The head part finished (its response and payload are in). */
static void head_done(struct xfer_tcp_conn *c) {
    struct xfer_part p = *part_at(c, c->head++);
    c->bytes_queued -= p.length;
    cr_xfer_part_done(c->cli, p.op, CR_OK, NULL);
}

/* Handles every whole response in the receive buffer.  Returns false after
 * failing the connection. */
static bool take_responses(struct xfer_tcp_conn *c) {
    while (c->fd >= 0 && c->payload_left == 0 && c->rx_fill - c->rx_pos >= CR_XFER_RESPONSE_BYTES) {
        struct cr_xfer_response resp;
        if (c->head == c->sent || cr_xfer_response_parse(c->rx + c->rx_pos, &resp) != CR_OK ||
            resp.request_id != part_at(c, c->head)->request_id) {
            /* Bad bytes before any good response: the connect reached something
             * that is not a transfer server (a proxy, an HTTP port, a made-up
             * endpoint that a gateway accepts).  Say so, not "out of step". */
            cr_xfer_tcp_fail(c, c->answered ? CR_ERR_PROTOCOL : CR_ERR_IO,
                             c->answered ? "response out of step with the requests"
                             : memcmp(c->rx + c->rx_pos, "HTTP/", 5) == 0
                                 ? "connect: an HTTP server answered, not a crescent transfer "
                                   "server (check the endpoint)"
                                 : "connect: the peer is not a crescent transfer server (its "
                                   "first answer is not a transfer response; check the endpoint)");
            return false;
        }
        c->answered = true;
        c->rx_pos += CR_XFER_RESPONSE_BYTES;
        struct xfer_part *p = part_at(c, c->head);
        if (resp.status != CR_OK) {
            struct xfer_op_slot *op = &c->cli->ops[p->op];
            char reason[CR_XFER_MESSAGE_MAX];
            snprintf(reason, sizeof(reason), "segment '%.64s' range 0x%llx+%llu %s", op->segment,
                     (unsigned long long)p->remote_addr, (unsigned long long)p->length,
                     resp.status == CR_ERR_SEGMENT_NOT_FOUND ? "refused: no such segment"
                     : resp.status == CR_ERR_INVALID_PARAMS  ? "out of bounds"
                     : resp.status == CR_ERR_ILLEGAL_CLIENT
                         ? "refused: no valid capability for it (the server's log says why)"
                                                             : cr_strerror(resp.status));
            cr_xfer_tcp_fail(c, resp.status, reason);
            return false;
        }
        uint64_t expect = is_write(c, p) ? 0 : p->length;
        if (resp.length != expect) {
            cr_xfer_tcp_fail(c, CR_ERR_PROTOCOL, "response length differs from the request");
            return false;
        }
        uint64_t have = c->rx_fill - c->rx_pos;
        uint64_t take = have < expect ? have : expect;
        const struct xfer_op_slot *op = &c->cli->ops[p->op];
        cr_xfer_iov_copy_in(op->iov, op->iov_count, p->local_offset, c->rx + c->rx_pos, take);
        c->rx_pos += take;
        c->payload_left = expect - take;
        if (c->payload_left == 0) head_done(c);
    }
    if (c->rx_pos == c->rx_fill) c->rx_pos = c->rx_fill = 0;
    return c->fd >= 0;
}

/* One readv: the rest of the head READ's payload straight into the caller's
 * memory, then the receive buffer.  Returns the bytes read or -1 (errno);
 * *drained: fewer bytes came than there was room for, so the socket had no
 * more (another readv would only say EAGAIN: a syscall per response). */
static ssize_t read_some(struct xfer_tcp_conn *c, bool *drained) {
    if (c->rx_pos > 0) {
        memmove(c->rx, c->rx + c->rx_pos, c->rx_fill - c->rx_pos);
        c->rx_fill -= c->rx_pos;
        c->rx_pos = 0;
    }
    struct iovec iov[RX_IOV_MAX + 1];
    uint32_t n = 0;
    const struct xfer_part *p = part_at(c, c->head);
    if (c->payload_left > 0) {
        const struct xfer_op_slot *op = &c->cli->ops[p->op];
        n = cr_xfer_iov_slice(op->iov, op->iov_count, p->local_offset + p->length - c->payload_left,
                              c->payload_left, iov, RX_IOV_MAX);
    }
    iov[n++] = (struct iovec){c->rx + c->rx_fill, CR_XFER_CONN_RX_BYTES - c->rx_fill};
    ssize_t got = readv(c->fd, iov, (int)n);
    if (got <= 0) return got == 0 ? (errno = ECONNRESET, -1) : got;
    uint64_t bytes = (uint64_t)got, room = 0;
    for (uint32_t i = 0; i < n; i++) room += iov[i].iov_len;
    *drained = bytes < room;
    if (c->payload_left > 0) {
        uint64_t direct = 0;
        for (uint32_t i = 0; i + 1 < n; i++) direct += iov[i].iov_len;
        direct = bytes < direct ? bytes : direct;
        c->payload_left -= direct;
        bytes -= direct;
        if (c->payload_left == 0) head_done(c);
    }
    c->rx_fill += bytes;
    return got;
}

void cr_xfer_tcp_event(struct xfer_tcp_conn *c, uint32_t events) {
    if (events & EPOLLOUT) cr_xfer_tcp_flush(c);
    if (c->fd < 0 || !(events & (EPOLLIN | EPOLLHUP | EPOLLERR))) return;
    bool drained = false;
    for (int round = 0; round < 16 && c->fd >= 0 && !drained; round++) {
        ssize_t got = read_some(c, &drained);
        if (got < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) return;
            if (errno == EINTR) continue;
            char reason[96];
            snprintf(reason, sizeof(reason), "connection lost: %s",
                     errno == ECONNRESET ? "closed by the server" : strerror(errno));
            cr_xfer_tcp_fail(c, CR_ERR_IO, reason);
            return;
        }
        c->last_progress_ns = cr_xfer_now_ns();
        if (!take_responses(c)) return;
    }
}

void cr_xfer_tcp_check_timeout(struct xfer_tcp_conn *c, uint64_t now_ns) {
    if (c->fd < 0 || c->head == c->tail) return;
    uint64_t limit_ns = (uint64_t)c->cli->cfg.op_timeout_ms * 1000000u;
    if (now_ns - c->last_progress_ns <= limit_ns) return;
    char reason[96];
    snprintf(reason, sizeof(reason), "no progress for %u ms (op_timeout_ms)",
             c->cli->cfg.op_timeout_ms);
    cr_xfer_tcp_fail(c, CR_ERR_TIMEOUT, reason);
}
