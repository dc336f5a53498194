/* The transfer server: hosts registered segments and serves tcp requests.
 *
 * Protocol (frame in xfer_frame.h): a client opens connections and pipelines
 * requests on each; the server handles a connection's requests in order and
 * answers each, so responses come back in request order.  A READ is answered
 * with a response header and the bytes, written with writev straight from
 * segment memory; a WRITE's payload is read with readv straight into segment
 * memory and answered with a header once all of it arrived.
 *
 * Every request is validated before any byte moves: the frame must decode
 * (else: counted as malformed, connection closed at once) and the named
 * segment must exist and contain [addr, addr + length) (else: counted, an
 * error response is sent best effort, the connection is closed).  A bad
 * client costs only its own connection; everyone else keeps being served.
 * With capabilities (xfer_server_cap.c) the request's capability must then
 * allow it (else: counted by cause, refused with CR_ERR_ILLEGAL_CLIENT,
 * connection closed).
 *
 * Hot path: no allocation after accept.  A connection owns a receive buffer
 * (RX_BYTES) and a ring of TX_SLOTS queued responses.  Bytes of a WRITE that
 * arrive in the same read as their header (at most RX_BYTES) are copied from
 * the receive buffer: one read for many small pipelined requests costs less
 * than a syscall per request.  The rest of a payload is read with readv into
 * [segment memory, receive buffer], so the next header arrives in the same
 * call.  Responses queued while a read batch is handled go out in one writev.
 * When the ring is full the server stops reading that connection (TCP then
 * pushes back on the client) until responses drain.
 *
 * HELLO and KEY (verbs setup, xfer_server_verbs.c) come on a client's control
 * connection and are answered with a small payload from the connection (the
 * server's hello) or from the response slot (a key). */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/log.h"
#include "crescent/error.h"
#include "rdma/xfer.h"
#include "rdma/xfer_frame.h"
#include "rdma/xfer_internal.h"
#include "rdma/xfer_server_internal.h"
#include "rdma/xfer_shm.h"
#include "rdma/xfer_verbs.h"

#define RX_BYTES 16384u        /* receive buffer: many pipelined small requests */
#define TX_SLOTS 64u           /* queued responses per connection */
#define TX_IOV_MAX 64u         /* iovecs per writev: two per response */
#define READS_PER_EVENT 16u    /* bound the work on one connection per event */
#define EVENTS_PER_WAIT 64u

struct tx_slot {
    uint8_t header[CR_XFER_RESPONSE_BYTES];
    const uint8_t *payload; /* segment memory of a READ, a verbs answer, or NULL */
    uint64_t payload_len;
    uint8_t key[CR_XFER_VERBS_KEY_BYTES]; /* a KEY's answer */
    void *owned; /* a reader segment's staged bytes (the payload), freed once sent */
    uint64_t owned_cap;
};

struct xfer_conn {
    int kind; /* CR_XFER_CONN_TCP */
    struct cr_xfer_server *srv;
    struct xfer_conn *prev, *next; /* srv->conns */
    int fd;
    uint32_t events;         /* epoll mask currently registered */
    char peer[64];           /* "host:port" for messages */
    size_t rx_pos, rx_fill;  /* unparsed bytes: rx[rx_pos, rx_fill) */
    uint8_t *write_dst;      /* WRITE payload still to receive */
    uint64_t write_left;
    uint32_t write_request_id;
    uint32_t tx_head, tx_count;
    uint64_t tx_sent;        /* bytes of the head slot already sent */
    bool closing;            /* refused: flush, then close */
    struct cr_xfer_verbs *verbs; /* the QP set of a client's HELLO, or NULL */
    void *spare;             /* the last reader buffer sent, kept for the next read: */
    uint64_t spare_cap;      /* a fresh 1 MiB malloc is an mmap and 256 page faults */
    uint8_t hello[CR_XFER_VERBS_HELLO_BYTES]; /* our answer to it */
    struct tx_slot tx[TX_SLOTS];
    uint8_t rx[RX_BYTES];
};

/* ---- segments ----------------------------------------------------------- */

const struct cr_xfer_server_segment *cr_xfer_server_find(const struct cr_xfer_server *srv,
                                                         const char *name, size_t len) {
    for (uint32_t i = 0; i < CR_XFER_SERVER_SEGMENTS_MAX; i++) {
        const struct cr_xfer_server_segment *seg = &srv->segments[i];
        if (seg->used && seg->name_len == len && memcmp(seg->name, name, len) == 0) return seg;
    }
    return NULL;
}

static int add_segment(struct cr_xfer_server *srv, const char *name, void *base, uint64_t size,
                       int fd) {
    size_t len = name == NULL ? 0 : strlen(name);
    if (!cr_xfer_name_valid(name, len) || base == NULL || size == 0 ||
        (uintptr_t)base + size < (uintptr_t)base)
        return CR_ERR_INVALID_PARAMS;
    if (cr_xfer_server_find(srv, name, len) != NULL) return CR_ERR_SEGMENT_ALREADY_EXISTS;
    for (uint32_t i = 0; i < CR_XFER_SERVER_SEGMENTS_MAX; i++) {
        struct cr_xfer_server_segment *seg = &srv->segments[i];
        if (seg->used) continue;
        int dup_fd = -1;
        if (fd >= 0 && (dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0) {
            CR_ERROR("xfer", "segment '%s': dup of its memfd failed: %s", name, strerror(errno));
            return CR_ERR_IO;
        }
        memcpy(seg->name, name, len + 1);
        seg->name_len = (uint8_t)len;
        seg->base = (uint8_t *)base;
        seg->size = size;
        seg->fd = dup_fd;
        seg->used = true;
        cr_xfer_server_verbs_register(srv, seg);
        cr_xfer_shm_bump(srv, i);
        return CR_OK;
    }
    return CR_ERR_NOMEM;
}

int cr_xfer_server_register(struct cr_xfer_server *srv, const char *name, void *base,
                            uint64_t size) {
    assert(srv != NULL);
    return add_segment(srv, name, base, size, -1);
}

int cr_xfer_server_register_segment(struct cr_xfer_server *srv, const char *name,
                                    const struct cr_xfer_segment *seg) {
    assert(srv != NULL && seg != NULL);
    if (seg->fd < 0) return CR_ERR_INVALID_PARAMS;
    return add_segment(srv, name, seg->base, seg->size, seg->fd);
}

int cr_xfer_server_register_reader(struct cr_xfer_server *srv, const char *name,
                                   cr_xfer_reader_fn fn, void *arg) {
    assert(srv != NULL && fn != NULL);
    size_t len = name == NULL ? 0 : strlen(name);
    if (!cr_xfer_name_valid(name, len)) return CR_ERR_INVALID_PARAMS;
    if (cr_xfer_server_find(srv, name, len) != NULL) return CR_ERR_SEGMENT_ALREADY_EXISTS;
    for (uint32_t i = 0; i < CR_XFER_SERVER_SEGMENTS_MAX; i++) {
        struct cr_xfer_server_segment *seg = &srv->segments[i];
        if (seg->used) continue;
        memcpy(seg->name, name, len + 1);
        seg->name_len = (uint8_t)len;
        seg->fd = -1; /* no memfd: shm clients use tcp; no region: so do verbs ones */
        seg->reader = fn;
        seg->reader_arg = arg;
        seg->used = true;
        cr_xfer_shm_bump(srv, i);
        return CR_OK;
    }
    return CR_ERR_NOMEM;
}

int cr_xfer_server_set_opener(struct cr_xfer_server *srv, const char *name,
                              cr_xfer_opener_fn fn) {
    assert(srv != NULL && fn != NULL);
    size_t len = name == NULL ? 0 : strlen(name);
    struct cr_xfer_server_segment *seg =
        (struct cr_xfer_server_segment *)cr_xfer_server_find(srv, name, len);
    if (seg == NULL || seg->reader == NULL) return CR_ERR_SEGMENT_NOT_FOUND;
    seg->opener = fn;
    return CR_OK;
}

int cr_xfer_server_unregister(struct cr_xfer_server *srv, const char *name) {
    assert(srv != NULL);
    size_t len = name == NULL ? 0 : strlen(name);
    struct cr_xfer_server_segment *seg =
        (struct cr_xfer_server_segment *)cr_xfer_server_find(srv, name, len);
    if (seg == NULL) return CR_ERR_SEGMENT_NOT_FOUND;
    if (seg->fd >= 0) close(seg->fd);
    cr_xfer_server_verbs_unregister(seg); /* its rkey fails from now on */
    memset(seg, 0, sizeof(*seg));
    seg->fd = -1;
    cr_xfer_shm_bump(srv, (uint32_t)(seg - srv->segments));
    return CR_OK;
}

/* ---- connections -------------------------------------------------------- */

static void conn_close(struct xfer_conn *c) {
    struct cr_xfer_server *srv = c->srv;
    for (uint32_t i = 0; i < c->tx_count; i++) free(c->tx[(c->tx_head + i) % TX_SLOTS].owned);
    free(c->spare);
    epoll_ctl(srv->epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    cr_xfer_server_verbs_hangup(srv, c->verbs);
    if (c->prev != NULL) c->prev->next = c->next;
    if (c->next != NULL) c->next->prev = c->prev;
    if (srv->conns == c) srv->conns = c->next;
    assert(srv->stats.connections_open > 0);
    srv->stats.connections_open--;
    srv->stats.connections_closed++;
    free(c);
}

static void conn_set_events(struct xfer_conn *c, uint32_t events) {
    if (c->events == events) return;
    struct epoll_event ev = {.events = events, .data.ptr = c};
    if (epoll_ctl(c->srv->epoll_fd, EPOLL_CTL_MOD, c->fd, &ev) == 0) c->events = events;
}

static struct tx_slot *tx_push(struct xfer_conn *c, uint32_t request_id, int status,
                               const uint8_t *payload, uint64_t payload_len) {
    assert(c->tx_count < TX_SLOTS);
    struct tx_slot *slot = &c->tx[(c->tx_head + c->tx_count) % TX_SLOTS];
    c->tx_count++;
    struct cr_xfer_response resp = {
        .request_id = request_id, .status = status, .length = payload_len};
    cr_xfer_response_encode(&resp, slot->header);
    slot->payload = payload;
    slot->payload_len = payload_len;
    slot->owned = NULL;
    return slot;
}

/* A sent slot's reader buffer: kept as the connection's spare (the larger
 * of the two), the other freed. */
static void release_owned(struct xfer_conn *c, struct tx_slot *slot) {
    if (slot->owned == NULL) return;
    if (slot->owned_cap > c->spare_cap) {
        free(c->spare);
        c->spare = slot->owned;
        c->spare_cap = slot->owned_cap;
    } else {
        free(slot->owned);
    }
    slot->owned = NULL;
}

/* Sends queued responses with as few writev calls as the socket allows.
 * Returns false when the connection failed (the caller closes it). */
static bool tx_flush(struct xfer_conn *c) {
    while (c->tx_count > 0) {
        struct iovec iov[TX_IOV_MAX];
        uint32_t n = 0;
        uint64_t skip = c->tx_sent;
        for (uint32_t i = 0; i < c->tx_count && n + 2 <= TX_IOV_MAX; i++) {
            struct tx_slot *slot = &c->tx[(c->tx_head + i) % TX_SLOTS];
            uint64_t header_left = skip < CR_XFER_RESPONSE_BYTES ? CR_XFER_RESPONSE_BYTES - skip : 0;
            if (header_left > 0)
                iov[n++] = (struct iovec){slot->header + (CR_XFER_RESPONSE_BYTES - header_left),
                                          header_left};
            uint64_t payload_skip = skip > CR_XFER_RESPONSE_BYTES ? skip - CR_XFER_RESPONSE_BYTES : 0;
            if (slot->payload_len > payload_skip)
                iov[n++] = (struct iovec){(void *)(slot->payload + payload_skip),
                                          slot->payload_len - payload_skip};
            skip = 0;
        }
        ssize_t sent = writev(c->fd, iov, (int)n);
        if (sent < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                conn_set_events(c, EPOLLOUT);
                return true;
            }
            return false;
        }
        uint64_t left = (uint64_t)sent;
        while (left > 0) {
            struct tx_slot *slot = &c->tx[c->tx_head];
            uint64_t slot_left = CR_XFER_RESPONSE_BYTES + slot->payload_len - c->tx_sent;
            if (left < slot_left) {
                c->tx_sent += left;
                break;
            }
            left -= slot_left;
            release_owned(c, slot);
            c->tx_sent = 0;
            c->tx_head = (c->tx_head + 1) % TX_SLOTS;
            c->tx_count--;
        }
    }
    if (!c->closing) conn_set_events(c, EPOLLIN);
    return true;
}

/* A request that names no segment or leaves it: answered with the status
 * best effort, then the connection closes (the client must not keep
 * pipelining after a refusal it has not seen). */
static void refuse(struct xfer_conn *c, const struct cr_xfer_request *req, int status) {
    struct cr_xfer_server *srv = c->srv;
    uint64_t now = cr_xfer_now_ns();
    if (status == CR_ERR_ILLEGAL_CLIENT) {
        /* a capability refusal: counted and logged by cr_xfer_server_cap_check */
        if (c->tx_count < TX_SLOTS) tx_push(c, req->request_id, status, NULL, 0);
        c->closing = true;
        return;
    }
    if (status == CR_ERR_SEGMENT_NOT_FOUND) {
        srv->stats.refused_no_segment++;
    } else {
        srv->stats.refused_out_of_bounds++;
    }
    if (cr_log_ratelimit(&srv->last_refusal_log_ns, now, 1000000000ull))
        CR_WARN("xfer", "%s: segment '%.*s' range 0x%llx+%llu refused (%s); closing", c->peer,
                (int)req->name_len, req->name, (unsigned long long)req->addr,
                (unsigned long long)req->length,
                status == CR_ERR_SEGMENT_NOT_FOUND ? "no such segment" : "out of bounds");
    if (c->tx_count < TX_SLOTS) tx_push(c, req->request_id, status, NULL, 0);
    c->closing = true;
}

/* HELLO and KEY: answered at once.  A refused HELLO (a second one, no room
 * for QPs, a QP that would not connect) closes the connection like any
 * refusal; a KEY for an unknown segment is an answer, not a refusal. */
static bool serve_setup(struct xfer_conn *c, const struct cr_xfer_request *req) {
    struct cr_xfer_server *srv = c->srv;
    uint8_t key[CR_XFER_VERBS_KEY_BYTES];
    uint64_t len = 0;
    if (req->op == CR_XFER_FRAME_KEY) {
        /* An rkey opens the whole segment to one-sided access the server never
         * sees: it is handed out only for a capability (any mode, any range). */
        const struct cr_xfer_server_segment *seg =
            cr_xfer_server_find(srv, req->name, req->name_len);
        if (seg != NULL &&
            cr_xfer_server_cap_check(srv, c->peer, seg, 0, 0, 0, req->has_cap, &req->cap) !=
                CR_CAP_OK) {
            refuse(c, req, CR_ERR_ILLEGAL_CLIENT);
            return false;
        }
        int status = cr_xfer_server_verbs_key(srv, req->name, req->name_len, key, &len);
        struct tx_slot *slot = tx_push(c, req->request_id, status, NULL, len);
        memcpy(slot->key, key, len);
        slot->payload = len > 0 ? slot->key : NULL;
        return true;
    }
    int status = cr_xfer_server_verbs_hello(srv, c->peer, req->hello, &c->verbs, c->hello, &len);
    if (status == CR_ERR_PROTOCOL) srv->stats.refused_malformed++;
    tx_push(c, req->request_id, status, status == CR_OK && len > 0 ? c->hello : NULL, len);
    if (status == CR_OK) return true;
    c->closing = true;
    return false;
}

/* A READ of a reader segment: its bytes staged in a buffer the slot owns
 * (the connection's spare when it is large enough, else a new one).  A
 * reader's failure is an answer, not a refusal: the connection stays. */
static bool serve_reader(struct xfer_conn *c, const struct cr_xfer_server_segment *seg,
                         const struct cr_xfer_request *req) {
    struct cr_xfer_server *srv = c->srv;
    if (req->op != CR_XFER_FRAME_READ) {
        refuse(c, req, CR_ERR_INVALID_PARAMS); /* read-only: a WRITE's payload is not taken */
        return false;
    }
    /* The same capability rule as a memory segment's: a server that requires
     * capabilities serves none of a reader's bytes without one. */
    if (cr_xfer_server_cap_check(srv, c->peer, seg, CR_CAP_READ, req->addr, req->length,
                                 req->has_cap, &req->cap) != CR_CAP_OK) {
        refuse(c, req, CR_ERR_ILLEGAL_CLIENT);
        return false;
    }
    void *bytes = NULL;
    uint64_t cap = 0;
    if (req->length > 0 && c->spare_cap >= req->length) {
        bytes = c->spare;
        cap = c->spare_cap;
        c->spare = NULL;
        c->spare_cap = 0;
    } else if (req->length > 0) {
        bytes = malloc(req->length);
        cap = req->length;
    }
    int status = req->length > 0 && bytes == NULL ? CR_ERR_NOMEM
                 : seg->reader(seg->reader_arg, req->addr, req->length, bytes);
    if (status != CR_OK) {
        if (c->spare == NULL) {
            c->spare = bytes;
            c->spare_cap = cap;
        } else {
            free(bytes);
        }
        tx_push(c, req->request_id, status, NULL, 0);
        return true;
    }
    struct tx_slot *slot = tx_push(c, req->request_id, CR_OK, bytes, req->length);
    slot->owned = bytes;
    slot->owned_cap = cap;
    srv->stats.requests_read++;
    srv->stats.bytes_read += req->length;
    return true;
}

/* Validates and starts one request.  Returns false when the connection must
 * stop reading (refused). */
static bool serve_request(struct xfer_conn *c, const struct cr_xfer_request *req) {
    struct cr_xfer_server *srv = c->srv;
    if (req->op == CR_XFER_FRAME_HELLO || req->op == CR_XFER_FRAME_KEY) return serve_setup(c, req);
    const struct cr_xfer_server_segment *seg = cr_xfer_server_find(srv, req->name, req->name_len);
    if (seg == NULL) {
        refuse(c, req, CR_ERR_SEGMENT_NOT_FOUND);
        return false;
    }
    if (seg->reader != NULL) return serve_reader(c, seg, req);
    if (!cr_xfer_range_inside((uintptr_t)seg->base, seg->size, req->addr, req->length)) {
        refuse(c, req, CR_ERR_INVALID_PARAMS);
        return false;
    }
    uint8_t mode = req->op == CR_XFER_FRAME_READ ? CR_CAP_READ : CR_CAP_WRITE;
    if (cr_xfer_server_cap_check(srv, c->peer, seg, mode, req->addr, req->length, req->has_cap,
                                 &req->cap) != CR_CAP_OK) {
        refuse(c, req, CR_ERR_ILLEGAL_CLIENT);
        return false;
    }
    uint8_t *at = seg->base + (req->addr - (uintptr_t)seg->base);
    if (req->op == CR_XFER_FRAME_READ) {
        tx_push(c, req->request_id, CR_OK, at, req->length);
        srv->stats.requests_read++;
        srv->stats.bytes_read += req->length;
        return true;
    }
    c->write_dst = at;
    c->write_left = req->length;
    c->write_request_id = req->request_id;
    return true;
}

/* Moves WRITE payload bytes already in the receive buffer into the segment,
 * and acknowledges the WRITE once its payload is complete. */
static void take_buffered_payload(struct xfer_conn *c) {
    size_t have = c->rx_fill - c->rx_pos;
    size_t take = have < c->write_left ? have : (size_t)c->write_left;
    memcpy(c->write_dst, c->rx + c->rx_pos, take);
    c->rx_pos += take;
    c->write_dst += take;
    c->write_left -= take;
}

static void finish_write_if_done(struct xfer_conn *c, uint64_t length) {
    (void)length;
    if (c->write_left > 0 || c->write_dst == NULL) return;
    tx_push(c, c->write_request_id, CR_OK, NULL, 0);
    c->srv->stats.requests_written++;
    c->write_dst = NULL;
}

/* Parses and serves every whole request in the receive buffer.  Returns
 * false on a malformed frame (the caller closes the connection). */
static bool parse_requests(struct xfer_conn *c) {
    while (c->write_left == 0 && c->tx_count < TX_SLOTS && !c->closing) {
        struct cr_xfer_request req;
        size_t used = 0;
        int rc = cr_xfer_request_parse(c->rx + c->rx_pos, c->rx_fill - c->rx_pos,
                                       c->srv->max_request_bytes, &req, &used);
        if (rc == CR_ERR_AGAIN) break;
        if (rc != CR_OK) return false;
        c->rx_pos += used;
        if (!serve_request(c, &req)) break;
        if (req.op == CR_XFER_FRAME_WRITE) {
            c->srv->stats.bytes_written += req.length;
            take_buffered_payload(c);
            finish_write_if_done(c, req.length);
        }
    }
    if (c->rx_pos == c->rx_fill) c->rx_pos = c->rx_fill = 0;
    return true;
}

/* One read: straight into segment memory while a WRITE payload is pending
 * (the receive buffer takes what follows it), else into the receive buffer.
 * *drained: fewer bytes came than there was room for, so the socket had no
 * more for now (level-triggered epoll reports what comes later). */
static ssize_t conn_read(struct xfer_conn *c, bool *drained) {
    if (c->rx_pos > 0 && c->write_left == 0) { /* keep a partial header at the front */
        memmove(c->rx, c->rx + c->rx_pos, c->rx_fill - c->rx_pos);
        c->rx_fill -= c->rx_pos;
        c->rx_pos = 0;
    }
    struct iovec iov[2];
    int n = 0;
    if (c->write_left > 0) {
        assert(c->rx_pos == c->rx_fill);
        c->rx_pos = c->rx_fill = 0;
        iov[n++] = (struct iovec){c->write_dst, c->write_left};
    }
    iov[n++] = (struct iovec){c->rx + c->rx_fill, RX_BYTES - c->rx_fill};
    ssize_t got = readv(c->fd, iov, n);
    if (got <= 0) return got;
    uint64_t bytes = (uint64_t)got;
    *drained = bytes < (uint64_t)iov[0].iov_len + (n > 1 ? (uint64_t)iov[1].iov_len : 0);
    if (c->write_left > 0) {
        uint64_t into_segment = bytes < c->write_left ? bytes : c->write_left;
        c->write_dst += into_segment;
        c->write_left -= into_segment;
        bytes -= into_segment;
        finish_write_if_done(c, 0);
    }
    c->rx_fill += bytes;
    return got;
}

static void conn_malformed(struct xfer_conn *c) {
    struct cr_xfer_server *srv = c->srv;
    srv->stats.refused_malformed++;
    if (cr_log_ratelimit(&srv->last_refusal_log_ns, cr_xfer_now_ns(), 1000000000ull))
        CR_WARN("xfer", "%s: malformed transfer frame; closing the connection", c->peer);
    conn_close(c);
}

/* Serves the requests already received, flushing responses whenever the
 * ring fills.  Returns false when the connection was closed. */
static bool serve_buffered(struct xfer_conn *c) {
    for (;;) {
        if (!parse_requests(c)) {
            conn_malformed(c);
            return false;
        }
        if (c->closing || c->tx_count < TX_SLOTS) return true;
        if (!tx_flush(c)) {
            conn_close(c);
            return false;
        }
        if (c->tx_count == TX_SLOTS) { /* socket full: wait until it drains */
            conn_set_events(c, EPOLLOUT);
            return true;
        }
    }
}

/* Sends what is queued; closes a refused connection once its refusal went
 * out (or could not go out at once: it is best effort). */
static void flush_or_close(struct xfer_conn *c) {
    if (!tx_flush(c) || c->closing) conn_close(c);
}

/* Reads until the socket is drained (a short read: no readv that only says
 * EAGAIN before the responses go out), serving what came, then flushes. */
static void conn_readable(struct xfer_conn *c) {
    bool drained = false;
    for (uint32_t round = 0; round < READS_PER_EVENT && !drained; round++) {
        if (c->closing || c->tx_count == TX_SLOTS) break;
        ssize_t got = conn_read(c, &drained);
        if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            conn_close(c); /* peer gone */
            return;
        }
        if (!serve_buffered(c)) return;
        if (got < 0) break;
    }
    if (c->tx_count == TX_SLOTS && !c->closing) return; /* waiting for EPOLLOUT */
    flush_or_close(c);
}

static void conn_writable(struct xfer_conn *c) {
    if (!tx_flush(c)) {
        conn_close(c);
        return;
    }
    /* Room again: requests may be waiting in the receive buffer already. */
    if (!serve_buffered(c)) return;
    if (c->tx_count == TX_SLOTS && !c->closing) return;
    flush_or_close(c);
}

static void accept_connections(struct cr_xfer_server *srv) {
    for (;;) {
        struct sockaddr_storage addr;
        socklen_t len = sizeof(addr);
        int fd = accept4(srv->listen_fd, (struct sockaddr *)&addr, &len, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                CR_WARN("xfer", "%s: accept failed: %s", srv->endpoint, strerror(errno));
            return;
        }
        if (srv->stats.connections_open >= srv->max_connections) {
            srv->stats.connections_refused++;
            srv->stats.connections_closed++;
            close(fd);
            continue;
        }
        struct xfer_conn *c = calloc(1, sizeof(*c));
        if (c == NULL || !cr_xfer_socket_tune(fd)) {
            free(c);
            close(fd);
            continue;
        }
        c->kind = CR_XFER_CONN_TCP;
        c->srv = srv;
        c->fd = fd;
        c->events = EPOLLIN;
        cr_xfer_endpoint_format(&addr, c->peer, sizeof(c->peer));
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (epoll_ctl(srv->epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
            free(c);
            close(fd);
            continue;
        }
        c->next = srv->conns;
        if (c->next != NULL) c->next->prev = c;
        srv->conns = c;
        srv->stats.connections_accepted++;
        srv->stats.connections_open++;
    }
}

int cr_xfer_server_run(struct cr_xfer_server *srv, int timeout_ms) {
    assert(srv != NULL);
    struct epoll_event events[EVENTS_PER_WAIT];
    int n = epoll_wait(srv->epoll_fd, events, EVENTS_PER_WAIT, timeout_ms);
    if (n < 0) return errno == EINTR ? 0 : CR_ERR_IO;
    for (int i = 0; i < n; i++) {
        void *tag = events[i].data.ptr;
        if (tag == &srv->listen_fd) {
            accept_connections(srv);
        } else if (tag == &srv->shm_listen_fd) {
            cr_xfer_shm_accept(srv);
        } else if (*(int *)tag == CR_XFER_CONN_SHM) {
            cr_xfer_shm_readable(tag);
        } else {
            struct xfer_conn *c = tag;
            if (events[i].events & EPOLLOUT) {
                conn_writable(c);
            } else {
                conn_readable(c);
            }
        }
    }
    return n;
}

void cr_xfer_server_destroy(struct cr_xfer_server *srv) {
    if (srv == NULL) return;
    while (srv->conns != NULL) conn_close(srv->conns);
    cr_xfer_shm_close_all(srv);
    for (uint32_t i = 0; i < CR_XFER_SERVER_SEGMENTS_MAX; i++) {
        if (!srv->segments[i].used) continue;
        if (srv->segments[i].fd >= 0) close(srv->segments[i].fd);
        cr_xfer_server_verbs_unregister(&srv->segments[i]);
    }
    cr_xfer_server_verbs_close(srv); /* after every QP set and region on it */
    if (srv->listen_fd >= 0) close(srv->listen_fd);
    if (srv->epoll_fd >= 0) close(srv->epoll_fd);
    free(srv);
}
