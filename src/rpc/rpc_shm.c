/* The same-host shared-memory endpoint, server side (see rpc_shm.h and
 * msgs/rpc_shm.h): clients' rings (reading requests, writing replies) and
 * the owner's calls.  The set-up socket is rpc_shm_setup.c.  Single-threaded:
 * every function runs on its owner's thread. */
#include "rpc/rpc_shm_internal.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "runtime/runtime.h"
#include "core/log.h"
#include "crescent/error.h"
#include "msgs/rpc_stream.h"
#include "rdma/xfer_shm.h"

/* ------------------------------------------------------------------------ */
/* Clients */

static void ready_remove(struct cr_rpc_shm_server *srv, uint32_t slot) {
    for (uint32_t i = 0; i < srv->ready_count; i++) {
        if (srv->ready[i] != slot) continue;
        srv->ready[i] = srv->ready[--srv->ready_count];
        return;
    }
}

void cr_rpc_shm_client_close(struct cr_rpc_shm_server *srv, struct client *c, const char *why) {
    CR_DEBUG("rpc_shm", "closing shm client pid %d: %s", c->pid, why);
    epoll_ctl(srv->epoll_fd, EPOLL_CTL_DEL, c->sock, NULL);
    close(c->sock);
    if (c->to_server >= 0) {
        epoll_ctl(srv->epoll_fd, EPOLL_CTL_DEL, c->to_server, NULL);
        close(c->to_server);
    }
    if (c->to_client >= 0) close(c->to_client);
    if (c->map != NULL) munmap(c->map, cr_rpc_shm_map_bytes(srv->ring_bytes));
    if (c->ready) ready_remove(srv, c->slot);
    srv->clients[c->slot] = NULL;
    srv->generation[c->slot]++; /* replies still coming for it are dropped */
    srv->free_slots[srv->free_count++] = c->slot;
    srv->stats.clients_open--;
    free(c->in);
    free(c->out.buf);
    c->in = c->out.buf = NULL;
    c->sock = -1;
    if (!c->dirty) free(c); /* else flush frees it when it reaches it */
}

static bool reply_bytes(struct cr_rpc_shm_server *srv, struct client *c, uint64_t request_id,
                        int32_t status, const uint8_t *body, size_t len);

/* Moves queued reply bytes into the reply ring.  Returns false when the
 * client was closed. */
static bool client_flush(struct cr_rpc_shm_server *srv, struct client *c, uint32_t *moved) {
    size_t wrote = 0;
    while (c->out.off < c->out.len) {
        int64_t room = cr_rpc_shm_ring_room(&c->rep);
        if (room < 0) {
            srv->stats.closed_malformed++;
            cr_rpc_shm_client_close(srv, c, "it moved its reply ring's head outside the ring");
            return false;
        }
        size_t n = c->out.len - c->out.off;
        if ((size_t)room < n) n = (size_t)room;
        if (n == 0) {
            if (cr_rpc_shm_ring_arm_room(&c->rep)) break; /* it wakes us when it reads */
            continue;
        }
        cr_rpc_shm_ring_put(&c->rep, c->out.buf + c->out.off, n);
        c->out.off += n;
        wrote += n;
    }
    if (c->out.off == c->out.len) c->out.off = c->out.len = 0;
    if (wrote > 0) {
        if (moved != NULL) (*moved)++;
        if (cr_rpc_shm_ring_needs_wake(&c->rep)) {
            wake(c->to_client);
            srv->stats.wakes_sent++;
        }
    }
    if (c->out.len - c->out.off > SHM_OUT_MAX) {
        srv->stats.closed_slow++;
        cr_rpc_shm_client_close(srv, c, "its unread replies passed 64 MiB");
        return false;
    }
    return true;
}

static void mark_dirty(struct cr_rpc_shm_server *srv, struct client *c) {
    if (c->dirty) return;
    c->dirty = true;
    c->next_dirty = srv->dirty;
    srv->dirty = c;
}

/* Takes every whole frame from the input buffer while the client has room
 * in flight.  False when the stream is broken (the client is answered and
 * closed). */
static bool take_frames(struct cr_rpc_shm_server *srv, struct client *c, uint32_t *work) {
    size_t pos = 0, n = 0;
    enum cr_rpc_stream_verdict v = CR_RPC_STREAM_MORE;
    uint64_t id = client_id(srv, c);
    while (c->in_flight < srv->queue_max &&
           (v = cr_rpc_stream_next(c->in + pos, c->in_len - pos, CR_RPC_REQUEST_HEADER_BYTES,
                                   CR_RPC_STREAM_REQUEST_MAX, &n)) == CR_RPC_STREAM_FRAME) {
        srv->stats.frames++;
        (*work)++;
        /* Counted first: a call its owner runs inline is answered (done)
         * before on_frame returns. */
        c->in_flight++;
        if (!srv->on_frame(srv->ctx, id, c->in + pos + CR_RPC_STREAM_LEN_BYTES, n))
            c->in_flight--;
        pos += CR_RPC_STREAM_LEN_BYTES + n;
    }
    if (v == CR_RPC_STREAM_BAD) {
        srv->stats.closed_malformed++;
        const uint8_t *p = c->in + pos;
        char text[160];
        snprintf(text, sizeof(text),
                 "malformed frame: length %u is outside %u..%u (msgs/rpc_stream.h); closing "
                 "the connection",
                 (unsigned)p[0] << 24 | (unsigned)p[1] << 16 | (unsigned)p[2] << 8 | p[3],
                 CR_RPC_REQUEST_HEADER_BYTES, CR_RPC_STREAM_REQUEST_MAX);
        if (reply_bytes(srv, c, 0, CR_ERR_PROTOCOL, (const uint8_t *)text, strlen(text)) &&
            client_flush(srv, c, NULL))
            cr_rpc_shm_client_close(srv, c, "malformed frame");
        return false;
    }
    c->in_len -= pos;
    if (pos > 0 && c->in_len > 0) memmove(c->in, c->in + pos, c->in_len);
    if (c->in_cap > 4 * SHM_READ_BUDGET && c->in_len <= SHM_IN_MIN) { /* a big frame left */
        uint8_t *small = realloc(c->in, SHM_IN_MIN);
        if (small != NULL) c->in = small, c->in_cap = SHM_IN_MIN;
    }
    return true;
}

/* Room in the input buffer for n more bytes. */
static bool reserve_in(struct client *c, size_t n) {
    if (c->in_len + n <= c->in_cap) return true;
    size_t cap = c->in_cap > 0 ? c->in_cap : SHM_IN_MIN;
    while (cap < c->in_len + n) cap *= 2;
    uint8_t *grown = realloc(c->in, cap);
    if (grown == NULL) return false;
    c->in = grown;
    c->in_cap = cap;
    return true;
}

/* Copies what the request ring holds (up to the budget) and takes frames. */
static void client_read(struct cr_rpc_shm_server *srv, struct client *c, uint32_t *work) {
    size_t budget = SHM_READ_BUDGET;
    while (budget > 0 && c->in_flight < srv->queue_max) {
        int64_t readable = cr_rpc_shm_ring_readable(&c->req);
        if (readable < 0) {
            srv->stats.closed_malformed++;
            cr_rpc_shm_client_close(srv, c, "it moved its request ring's tail outside the ring");
            return;
        }
        if (readable == 0) return;
        size_t n = (size_t)readable < budget ? (size_t)readable : budget;
        if (!reserve_in(c, n)) {
            cr_rpc_shm_client_close(srv, c, "out of memory for its input buffer");
            return;
        }
        cr_rpc_shm_ring_take(&c->req, c->in + c->in_len, n);
        c->in_len += n;
        budget -= n;
        if (cr_rpc_shm_ring_room_needs_wake(&c->req)) { /* it waits to write the rest */
            wake(c->to_client);
            srv->stats.wakes_sent++;
        }
        if (!take_frames(srv, c, work)) return;
    }
}

/* ------------------------------------------------------------------------ */
/* The owner's calls */

int cr_rpc_shm_server_open(const struct cr_rpc_shm_options *o, struct cr_rpc_shm_server **out,
                           char *why, size_t why_size) {
    assert(o != NULL && out != NULL && o->on_frame != NULL);
    *out = NULL;
    uint32_t rb = o->ring_bytes;
    if (rb < CR_RPC_SHM_RING_MIN || rb > CR_RPC_SHM_RING_MAX || (rb & (rb - 1)) != 0) {
        snprintf(why, why_size, "--rpc-shm-ring-bytes %u is not a power of two in %u..%u", rb,
                 CR_RPC_SHM_RING_MIN, CR_RPC_SHM_RING_MAX);
        return CR_ERR_INVALID_PARAMS;
    }
    struct sockaddr_un addr;
    socklen_t alen;
    if (!cr_rpc_shm_sockaddr(o->path, &addr, &alen)) {
        snprintf(why, why_size, "--rpc-shm-path '%s' is empty or longer than %u bytes", o->path,
                 CR_RPC_SHM_PATH_MAX);
        return CR_ERR_INVALID_PARAMS;
    }
    struct cr_rpc_shm_server *srv = calloc(1, sizeof(*srv));
    if (srv == NULL || o->clients_max == 0 || o->queue_max == 0) {
        free(srv);
        snprintf(why, why_size, srv == NULL ? "out of memory" : "no shm clients allowed");
        return srv == NULL ? CR_ERR_NOMEM : CR_ERR_INVALID_PARAMS;
    }
    srv->listen_fd = -1;
    for (uint32_t i = 0; i < REFUSING_MAX; i++) srv->refusing[i].fd = -1;
    snprintf(srv->path, sizeof(srv->path), "%s", o->path);
    srv->ring_bytes = rb;
    srv->queue_max = o->queue_max;
    srv->clients_max = o->clients_max;
    srv->on_frame = o->on_frame;
    srv->ctx = o->ctx;
    srv->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    srv->clients = calloc(o->clients_max, sizeof(*srv->clients));
    srv->generation = calloc(o->clients_max, sizeof(*srv->generation));
    srv->free_slots = calloc(o->clients_max, sizeof(*srv->free_slots));
    srv->ready = calloc(o->clients_max, sizeof(*srv->ready));
    if (srv->epoll_fd < 0 || srv->clients == NULL || srv->generation == NULL ||
        srv->free_slots == NULL || srv->ready == NULL) {
        snprintf(why, why_size, "out of memory for %u shm clients", o->clients_max);
        cr_rpc_shm_server_close(srv);
        return CR_ERR_NOMEM;
    }
    for (uint32_t i = 0; i < o->clients_max; i++) srv->free_slots[i] = o->clients_max - 1 - i;
    srv->free_count = o->clients_max;
    srv->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (srv->listen_fd < 0 || bind(srv->listen_fd, (struct sockaddr *)&addr, alen) != 0 ||
        listen(srv->listen_fd, 128) != 0) {
        int code = errno;
        snprintf(why, why_size, "cannot serve shm RPC on %s: %s", o->path, strerror(code));
        cr_rpc_shm_server_close(srv);
        return code == EADDRINUSE ? CR_ERR_AGAIN : CR_ERR_IO;
    }
    srv->file = o->path[0] != '@';
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = TAG(TAG_LISTEN, 0)};
    if (epoll_ctl(srv->epoll_fd, EPOLL_CTL_ADD, srv->listen_fd, &ev) != 0) {
        snprintf(why, why_size, "epoll_ctl: %s", strerror(errno));
        cr_rpc_shm_server_close(srv);
        return CR_ERR_IO;
    }
    *out = srv;
    return CR_OK;
}

void cr_rpc_shm_server_close(struct cr_rpc_shm_server *srv) {
    if (srv == NULL) return;
    for (struct client *c = srv->dirty; c != NULL;) { /* closed ones still listed */
        struct client *next = c->next_dirty;
        c->dirty = false;
        if (c->sock < 0) free(c);
        c = next;
    }
    srv->dirty = NULL;
    for (uint32_t i = 0; srv->clients != NULL && i < srv->clients_max; i++)
        if (srv->clients[i] != NULL) cr_rpc_shm_client_close(srv, srv->clients[i], "crescentd stops");
    for (uint32_t i = 0; i < REFUSING_MAX; i++)
        if (srv->refusing[i].fd >= 0) close(srv->refusing[i].fd);
    if (srv->listen_fd >= 0) {
        close(srv->listen_fd);
        if (srv->file) unlink(srv->path);
    }
    if (srv->epoll_fd >= 0) close(srv->epoll_fd);
    free(srv->clients);
    free(srv->generation);
    free(srv->free_slots);
    free(srv->ready);
    free(srv);
}

int cr_rpc_shm_server_fd(const struct cr_rpc_shm_server *srv) { return srv->epoll_fd; }

bool cr_rpc_shm_server_has_clients(const struct cr_rpc_shm_server *srv) {
    return srv->ready_count > 0;
}

uint32_t cr_rpc_shm_server_serve(struct cr_rpc_shm_server *srv) {
    struct epoll_event events[SHM_EVENTS];
    int n = epoll_wait(srv->epoll_fd, events, SHM_EVENTS, 0);
    uint32_t work = 0;
    for (int i = 0; i < n; i++) {
        uint64_t kind = events[i].data.u64 >> 32;
        uint32_t slot = (uint32_t)events[i].data.u64;
        if (kind == TAG_LISTEN) {
            cr_rpc_shm_accept_some(srv, &work);
            continue;
        }
        if (kind == TAG_REFUSE) {
            cr_rpc_shm_refusal_ready(srv, slot);
            continue;
        }
        assert(slot < srv->clients_max);
        struct client *c = srv->clients[slot];
        if (c == NULL) continue; /* closed earlier in this turn */
        if (kind == TAG_WAKE) {
            uint64_t count;
            if (read(c->to_server, &count, sizeof(count)) < 0 && errno != EAGAIN)
                CR_ERROR("rpc_shm", "eventfd read failed: %s", strerror(errno));
        } else {
            uint64_t before = srv->stats.clients_open;
            cr_rpc_shm_client_sock_event(srv, c);
            work += before != srv->stats.clients_open;
        }
    }
    if (n < 0 && errno != EINTR) CR_ERROR("rpc_shm", "epoll_wait failed: %s", strerror(errno));
    return work + cr_rpc_shm_server_poll(srv);
}

uint32_t cr_rpc_shm_server_poll(struct cr_rpc_shm_server *srv) {
    uint32_t work = 0;
    /* Backwards: a client closed here swaps the last entry into its place. */
    for (uint32_t i = srv->ready_count; i-- > 0;) {
        struct client *c = srv->clients[srv->ready[i]];
        assert(c != NULL && c->ready);
        if (c->out.len > c->out.off && !client_flush(srv, c, &work)) continue;
        client_read(srv, c, &work);
    }
    return work;
}

static bool reply_bytes(struct cr_rpc_shm_server *srv, struct client *c, uint64_t request_id,
                        int32_t status, const uint8_t *body, size_t len) {
    if (!cr_rpc_stream_out_reply(&c->out, request_id, status, body, len)) {
        srv->stats.replies_dropped++;
        return false;
    }
    srv->stats.replies++;
    mark_dirty(srv, c);
    return true;
}

bool cr_rpc_shm_server_reply(struct cr_rpc_shm_server *srv, uint64_t client, uint64_t request_id,
                             int32_t status, const uint8_t *body, size_t len, bool done) {
    uint32_t slot = (uint32_t)client, gen = (uint32_t)(client >> 32);
    struct client *c = slot < srv->clients_max && srv->generation[slot] == gen
                           ? srv->clients[slot] : NULL;
    if (c == NULL) {
        srv->stats.replies_dropped++; /* it left meanwhile */
        return false;
    }
    if (done) {
        assert(c->in_flight > 0);
        c->in_flight--;
    }
    return reply_bytes(srv, c, request_id, status, body, len);
}

/* Writes every client that has new replies; a client that had stopped
 * taking frames at queue_max takes the ones it already copied out. */
void cr_rpc_shm_server_flush(struct cr_rpc_shm_server *srv) {
    while (srv->dirty != NULL) {
        struct client *c = srv->dirty;
        srv->dirty = NULL;
        while (c != NULL) {
            struct client *next = c->next_dirty;
            c->dirty = false;
            uint32_t work = 0;
            if (c->sock < 0)
                free(c); /* closed while listed */
            else if (client_flush(srv, c, NULL) && c->in_len > 0 &&
                     c->in_flight < srv->queue_max)
                take_frames(srv, c, &work);
            c = next;
        }
    }
}

bool cr_rpc_shm_server_arm(struct cr_rpc_shm_server *srv) {
    for (uint32_t i = 0; i < srv->ready_count; i++) {
        struct client *c = srv->clients[srv->ready[i]];
        /* A client past queue_max is not read until replies drain: its ring
         * may hold bytes and must not keep us awake. */
        if (c->in_flight >= srv->queue_max) continue;
        if (!cr_rpc_shm_ring_arm(&c->req)) {
            for (uint32_t j = 0; j < i; j++) cr_rpc_shm_ring_disarm(&srv->clients[srv->ready[j]]->req);
            return false;
        }
    }
    return true;
}

void cr_rpc_shm_server_disarm(struct cr_rpc_shm_server *srv) {
    for (uint32_t i = 0; i < srv->ready_count; i++)
        cr_rpc_shm_ring_disarm(&srv->clients[srv->ready[i]]->req);
}

void cr_rpc_shm_server_stats(const struct cr_rpc_shm_server *srv, struct cr_rpc_shm_stats *out) {
    *out = srv->stats;
}
