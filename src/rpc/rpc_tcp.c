/* The native TCP endpoint of the store master (--rpc-tcp-address): an edge
 * of the segments actor (edge.h), served on segments' own thread.
 *
 * Why beside the ZMQ gateway: a call through ZMQ crosses four threads
 * (libzmq's I/O thread → rpc → segments → rpc → libzmq's I/O thread); here
 * the thread that owns the store reads the request from the socket, runs
 * the intake (the same as the ZMQ gateway's: rpc_intake.c), runs the call
 * and queues the reply, written at the end of the round: no thread crossing
 * at all for segments' calls, and no libzmq framing on either side.
 *
 * Framing: msgs/rpc_stream.h (a length prefix before the one-frame ZMQ
 * envelope).  Bounds: --rpc-tcp-connections-max open connections (one more
 * is accepted and closed at once, logged), --rpc-tcp-queue-max requests in
 * flight per connection (past it the connection is not read until replies
 * drain: TCP's flow control pushes back on the client; only calls another
 * actor answers stay in flight across rounds), reply bytes queued for a
 * connection above RPC_TCP_OUT_PAUSE pause its reading too, and a reply that
 * would take them above RPC_TCP_OUT_MAX is not queued and the connection is
 * closed at the round's end (a client that does not read its replies).  Both
 * are checked at every reply, not once a round: a round may take up to
 * queue_max calls from a connection, and large replies (a BatchGetReplicaList
 * of 4096 keys is ~15 MB) piled up hundreds of MB before the round's end
 * looked.  So a connection holds at most RPC_TCP_OUT_PAUSE plus one reply of
 * replies unwritten.  A frame longer than 16 MiB plus the header, or shorter than the
 * header, is answered with a transport error under request id 0 and the
 * connection is closed; other connections are not affected.
 *
 * A call carries its connection as (slot, generation) in call->identity:
 * a reply for a connection closed meanwhile finds another generation in the
 * slot and is dropped (counted in send_dropped_total). */
#include <assert.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rpc/edge.h"
#include "actors/subsystems.h"
#include "core/log.h"
#include "crescent/error.h"
#include "daemon/config.h"
#include "msgs/rpc_stream.h"
#include "rpc/stream_listen.h"

#define RPC_TCP_EVENTS 64u
#define RPC_TCP_READ_CHUNK (64u << 10)     /* bytes asked of read() at a time */
#define RPC_TCP_READ_BUDGET (256u << 10)   /* per connection per loop turn: fairness */
#define RPC_TCP_OUT_PAUSE (4u << 20)       /* queued reply bytes that pause reading */
#define RPC_TCP_OUT_MAX (64u << 20)        /* queued reply bytes that close the connection */
#define RPC_TCP_ACCEPT_BATCH 64u
#define RPC_TCP_LISTEN_TAG CR_EDGE_TAG_MAX

struct conn {
    int fd;
    uint32_t slot;
    uint8_t *in; /* bytes read, not yet a whole frame */
    size_t in_len, in_cap;
    struct cr_rpc_stream_out out; /* replies not yet written */
    uint32_t in_flight;   /* calls at segments or tasks */
    uint32_t events;      /* registered with epoll */
    bool dirty;           /* on the flush list */
    bool slow;            /* a reply passed RPC_TCP_OUT_MAX: closed at the flush */
    struct conn *next_dirty;
    char peer[64];
};

struct rpc_tcp_state {
    struct cr_edge edge; /* first: the edge is the state */
    int listen_fd;
    bool listen_added;
    bool off_for_curve; /* an address was given, but CURVE is on */
    bool default_busy;  /* the default address was taken: serving nothing */
    uint32_t taken;     /* frames handled, for the loop's work count */
    struct conn **conns;  /* by slot */
    uint32_t *generation; /* by slot; bumped at every close */
    uint32_t *free_slots;
    uint32_t free_count, conns_max, queue_max, open;
    struct conn *dirty;
    char address[CR_CONFIG_ADDRESS_MAX];
    uint64_t accepted, refused_full, closed_malformed, closed_slow, last_log_ns;
};

/* ------------------------------------------------------------------------ */
/* Connections */

static uint64_t now_ns(struct rpc_tcp_state *st) { return cr_edge_now_ns(&st->edge); }

static void set_events(struct rpc_tcp_state *st, struct conn *c, uint32_t events) {
    if (c->events == events) return;
    if (!cr_edge_rewatch(&st->edge, c->fd, events, c->slot))
        CR_ERROR("rpc_tcp", "the events of %s were not changed", c->peer);
    c->events = events;
}

/* Reading pauses while the connection has queue_max calls in flight or
 * RPC_TCP_OUT_PAUSE bytes of replies unwritten, writing waits for EPOLLOUT
 * only while replies are unwritten and no flush is due: a connection on the
 * flush list is written at the end of this round (flush_dirty) and asks for
 * EPOLLOUT there if the socket took less than all.  (Asking here too made two
 * epoll_ctl calls per synchronous call, EPOLLOUT on and off again: 7% of
 * segments' time in a native BatchGetReplicaList run.) */
/* Whether the connection may take another request now: its calls in
 * flight and its unwritten replies, checked before every frame. */
static bool conn_takes(const struct rpc_tcp_state *st, const struct conn *c) {
    return c->in_flight < st->queue_max && c->out.len - c->out.off < RPC_TCP_OUT_PAUSE &&
           !c->slow;
}

static void update_events(struct rpc_tcp_state *st, struct conn *c) {
    size_t queued = c->out.len - c->out.off;
    uint32_t events = 0;
    if (conn_takes(st, c)) events |= EPOLLIN;
    if (queued > 0 && !c->dirty) events |= EPOLLOUT;
    set_events(st, c, events);
}

static void conn_close(struct rpc_tcp_state *st, struct conn *c, const char *why) {
    CR_DEBUG("rpc_tcp", "closing %s: %s", c->peer, why);
    cr_edge_unwatch(&st->edge, c->fd);
    close(c->fd);
    st->conns[c->slot] = NULL;
    st->generation[c->slot]++; /* replies still coming for it are dropped */
    st->free_slots[st->free_count++] = c->slot;
    st->open--;
    /* A connection still on the flush list stays allocated, marked closed
     * (fd -1), until flush_dirty (or destroy) reaches it and frees it. */
    c->fd = -1;
    free(c->in);
    free(c->out.buf);
    c->in = c->out.buf = NULL;
    if (!c->dirty) free(c);
}

/* Writes what is queued.  Returns false when the connection was closed. */
static bool conn_flush(struct rpc_tcp_state *st, struct conn *c) {
    if (c->slow) {
        st->closed_slow++;
        conn_close(st, c, "its unread replies passed 64 MiB");
        return false;
    }
    while (c->out.off < c->out.len) {
        ssize_t n = send(c->fd, c->out.buf + c->out.off, c->out.len - c->out.off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            c->out.off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        conn_close(st, c, n < 0 ? strerror(errno) : "send returned 0");
        return false;
    }
    if (c->out.off == c->out.len) c->out.off = c->out.len = 0;
    update_events(st, c);
    return true;
}

static void mark_dirty(struct rpc_tcp_state *st, struct conn *c) {
    if (c->dirty) return;
    c->dirty = true;
    c->next_dirty = st->dirty;
    st->dirty = c;
}

static bool take_frames(struct rpc_tcp_state *st, struct conn *c, uint64_t received_ns);

/* Writes every connection that has new replies: one send per connection
 * per loop round, however many replies the round brought it.  A connection
 * that had stopped taking frames at --rpc-tcp-queue-max takes the ones it
 * already read once its replies make room: they would otherwise wait for
 * bytes the client may never send. */
static void flush_dirty(struct rpc_tcp_state *st) {
    while (st->dirty != NULL) {
        struct conn *c = st->dirty;
        st->dirty = NULL;
        while (c != NULL) {
            struct conn *next = c->next_dirty;
            c->dirty = false;
            if (c->fd < 0)
                free(c); /* closed while listed */
            else if (conn_flush(st, c) && c->in_len > 0 && conn_takes(st, c) &&
                     take_frames(st, c, now_ns(st)))
                update_events(st, c);
            c = next;
        }
    }
}

/* Queues one reply frame.  False (nothing queued, counted) when out of
 * memory, or when it would take the connection's unwritten replies past
 * RPC_TCP_OUT_MAX: the connection is then marked slow, takes no more
 * requests and is closed at the round's end (conn_flush), and its later
 * replies are dropped. */
static bool queue_reply(struct rpc_tcp_state *st, struct conn *c, uint64_t request_id,
                        int32_t status, const uint8_t *body, size_t len) {
    mark_dirty(st, c);
    if (c->slow || c->out.len - c->out.off + len > RPC_TCP_OUT_MAX) {
        c->slow = true;
        st->edge.intake.send_dropped++;
        return false;
    }
    if (!cr_rpc_stream_out_reply(&c->out, request_id, status, body, len)) {
        st->edge.intake.send_dropped++;
        return false;
    }
    st->edge.intake.replies++;
    return true;
}

/* ------------------------------------------------------------------------ */
/* Requests */

static void put_u32(uint8_t *p, uint32_t v) { cr_rpc_stream_put_len(p, v); }
static uint32_t get_u32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* One whole request frame's payload: the one-frame envelope. */
static void handle_frame(struct rpc_tcp_state *st, struct conn *c, const uint8_t *payload,
                         size_t len, uint64_t received_ns) {
    st->taken++;
    const uint8_t *data[3] = {payload, NULL, NULL};
    const size_t size[3] = {len, 0, 0};
    struct cr_rpc_envelope env;
    bool ok = cr_rpc_read_envelope(1, data, size, &env);
    assert(ok); /* the frame's length is at least the header (cr_rpc_stream_next) */
    (void)ok;
    struct cr_master_call *call = calloc(1, sizeof(*call));
    if (call == NULL) {
        static const char oom[] = "out of memory";
        queue_reply(st, c, env.request_id, CR_ERR_NOMEM, (const uint8_t *)oom, sizeof(oom) - 1);
        return;
    }
    call->one_frame = true;
    call->method = env.method;
    call->request_id = env.request_id;
    call->received_ns = received_ns;
    call->identity_len = 8;
    put_u32(call->identity, c->slot);
    put_u32(call->identity + 4, st->generation[c->slot]);
    struct cr_rpc_refusal no;
    c->in_flight++; /* first: a call segments runs inline is done (rpc_tcp_done) at once */
    if (cr_edge_submit(&st->edge, call, env.body, env.body_len, &no)) return;
    c->in_flight--;
    queue_reply(st, c, call->request_id, no.status, no.body, no.len);
    cr_rpc_refusal_free(&no);
    cr_master_call_free(call);
}

/* Takes every whole frame from the read buffer.  Returns false when the
 * stream is broken (the connection is then answered and closed). */
static bool take_frames(struct rpc_tcp_state *st, struct conn *c, uint64_t received_ns) {
    size_t pos = 0, n = 0;
    enum cr_rpc_stream_verdict v = CR_RPC_STREAM_MORE;
    while (conn_takes(st, c) &&
           (v = cr_rpc_stream_next(c->in + pos, c->in_len - pos, CR_RPC_REQUEST_HEADER_BYTES,
                                   CR_RPC_STREAM_REQUEST_MAX, &n)) == CR_RPC_STREAM_FRAME) {
        handle_frame(st, c, c->in + pos + CR_RPC_STREAM_LEN_BYTES, n, received_ns);
        pos += CR_RPC_STREAM_LEN_BYTES + n;
    }
    if (v == CR_RPC_STREAM_BAD) {
        st->edge.intake.malformed++;
        st->closed_malformed++;
        char text[160];
        snprintf(text, sizeof(text),
                 "malformed frame: length %u is outside %u..%u (msgs/rpc_stream.h); closing "
                 "the connection",
                 get_u32(c->in + pos), CR_RPC_REQUEST_HEADER_BYTES, CR_RPC_STREAM_REQUEST_MAX);
        queue_reply(st, c, 0, CR_ERR_PROTOCOL, (const uint8_t *)text, strlen(text));
        if (conn_flush(st, c)) conn_close(st, c, "malformed frame");
        return false;
    }
    c->in_len -= pos;
    if (pos > 0 && c->in_len > 0) memmove(c->in, c->in + pos, c->in_len);
    /* A large frame grew the buffer: give the memory back once it is gone. */
    if (c->in_cap > 4 * RPC_TCP_READ_CHUNK && c->in_len <= RPC_TCP_READ_CHUNK) {
        uint8_t *small = realloc(c->in, RPC_TCP_READ_CHUNK);
        if (small != NULL) c->in = small, c->in_cap = RPC_TCP_READ_CHUNK;
    }
    return true;
}

/* Room for the next read: a chunk, or the rest of the frame being read. */
static bool reserve_in(struct conn *c) {
    size_t frame = 0, want = c->in_len + RPC_TCP_READ_CHUNK;
    if (cr_rpc_stream_next(c->in, c->in_len, CR_RPC_REQUEST_HEADER_BYTES,
                           CR_RPC_STREAM_REQUEST_MAX, &frame) == CR_RPC_STREAM_MORE &&
        CR_RPC_STREAM_LEN_BYTES + frame > want)
        want = CR_RPC_STREAM_LEN_BYTES + frame;
    if (want <= c->in_cap) return true;
    uint8_t *grown = realloc(c->in, want);
    if (grown == NULL) return false;
    c->in = grown;
    c->in_cap = want;
    return true;
}

static void conn_read(struct rpc_tcp_state *st, struct conn *c, uint64_t received_ns) {
    size_t budget = RPC_TCP_READ_BUDGET;
    while (budget > 0 && conn_takes(st, c)) {
        if (!reserve_in(c)) {
            conn_close(st, c, "out of memory for its read buffer");
            return;
        }
        ssize_t n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (n <= 0) {
            conn_close(st, c, n == 0 ? "the peer closed it" : strerror(errno));
            return;
        }
        bool drained = (size_t)n < c->in_cap - c->in_len;
        c->in_len += (size_t)n;
        budget = (size_t)n < budget ? budget - (size_t)n : 0;
        if (!take_frames(st, c, received_ns)) return;
        /* A short read took all there was: epoll (level-triggered) says
         * when more comes, without a recv that finds nothing. */
        if (drained) break;
    }
    update_events(st, c);
}

static void conn_open(struct rpc_tcp_state *st, int fd, const struct sockaddr_storage *addr) {
    char host[48] = "?", port[8] = "?";
    getnameinfo((const struct sockaddr *)addr, sizeof(*addr), host, sizeof(host), port,
                sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV);
    if (st->free_count == 0) {
        st->refused_full++;
        if (cr_log_ratelimit(&st->last_log_ns, now_ns(st), 10ull * 1000000000u))
            CR_WARN("rpc_tcp", "connection from %s:%s refused: %u connections are open "
                    "(--rpc-tcp-connections-max)", host, port, st->conns_max);
        close(fd);
        return;
    }
    struct conn *c = calloc(1, sizeof(*c));
    int one = 1;
    /* Replies are one frame each and written whole: Nagle would hold a
     * reply back waiting for the client's ACK of the previous one. */
    if (c == NULL || setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
        CR_WARN("rpc_tcp", "connection from %s:%s dropped: %s", host, port,
                c == NULL ? "out of memory" : strerror(errno));
        free(c);
        close(fd);
        return;
    }
    c->fd = fd;
    c->slot = st->free_slots[--st->free_count];
    snprintf(c->peer, sizeof(c->peer), "%s:%s", host, port);
    if (!cr_edge_watch(&st->edge, fd, EPOLLIN, c->slot)) {
        CR_ERROR("rpc_tcp", "connection from %s dropped", c->peer);
        st->free_slots[st->free_count++] = c->slot;
        free(c);
        close(fd);
        return;
    }
    c->events = EPOLLIN;
    st->conns[c->slot] = c;
    st->open++;
    st->accepted++;
}

static void accept_some(struct rpc_tcp_state *st) {
    for (unsigned i = 0; i < RPC_TCP_ACCEPT_BATCH; i++) {
        struct sockaddr_storage addr;
        socklen_t len = sizeof(addr);
        int fd = accept4(st->listen_fd, (struct sockaddr *)&addr, &len,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            conn_open(st, fd, &addr);
            continue;
        }
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK &&
            cr_log_ratelimit(&st->last_log_ns, now_ns(st), 10ull * 1000000000u))
            CR_WARN("rpc_tcp", "accept on %s failed: %s", st->address, strerror(errno));
        return;
    }
}

/* ------------------------------------------------------------------------ */
/* Edge hooks (edge.h), on the segments thread */

static uint32_t rpc_tcp_ready(struct cr_edge *edge, uint64_t tag, uint32_t events) {
    struct rpc_tcp_state *st = (struct rpc_tcp_state *)edge;
    if (tag == RPC_TCP_LISTEN_TAG) {
        accept_some(st);
        return 0;
    }
    assert(tag < st->conns_max);
    struct conn *c = st->conns[tag];
    if (c == NULL) return 0; /* closed earlier in this round */
    if ((events & EPOLLOUT) && !conn_flush(st, c)) return 0;
    uint32_t before = st->taken;
    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) conn_read(st, c, now_ns(st));
    return st->taken - before;
}

/* A finished call: its reply is queued to its connection, written at the
 * end of the round (rpc_tcp_flush). */
static void rpc_tcp_done(struct cr_edge *edge, struct cr_master_call *call) {
    struct rpc_tcp_state *st = (struct rpc_tcp_state *)edge;
    assert(call->identity_len == 8);
    uint32_t slot = get_u32(call->identity), gen = get_u32(call->identity + 4);
    struct conn *c = slot < st->conns_max && st->generation[slot] == gen ? st->conns[slot] : NULL;
    if (c != NULL) {
        assert(c->in_flight > 0);
        c->in_flight--;
        queue_reply(st, c, call->request_id, call->status,
                    call->reply != NULL ? call->reply : (const uint8_t *)"", call->reply_len);
    } else {
        st->edge.intake.send_dropped++; /* its connection closed meanwhile */
    }
    cr_master_call_free(call);
}

static void rpc_tcp_flush(struct cr_edge *edge) { flush_dirty((struct rpc_tcp_state *)edge); }

static void rpc_tcp_wire(struct cr_edge *edge, const struct cr_subsystems *peers) {
    (void)peers;
    struct rpc_tcp_state *st = (struct rpc_tcp_state *)edge;
    /* Until now, connections waited in the listen backlog: their requests
     * could only have been answered "busy". */
    if (st->listen_fd >= 0 && !st->listen_added)
        st->listen_added = cr_edge_watch(edge, st->listen_fd, EPOLLIN, RPC_TCP_LISTEN_TAG);
    /* Said once every address is bound: a start that fails on a later
     * address prints only the line naming it. */
    if (st->listen_added)
        CR_INFO("rpc_tcp", "native RPC on %s (crescent://%s)", st->address, st->address);
    else if (st->default_busy)
        CR_WARN("rpc_tcp", "the native RPC endpoint is off: its default address %s is in "
                "use (another crescentd?); set --rpc-tcp-address to serve it elsewhere",
                st->address);
    else if (st->off_for_curve)
        CR_INFO("rpc_tcp", "the native RPC endpoint is off: CURVE is on and it has no "
                "encryption (--rpc-tcp-with-curve serves it on loopback anyway)");
}

static void add_stat(struct cr_actor_stats *out, const char *name, uint64_t value) {
    if (out->extra_count >= CR_ACTOR_STATS_EXTRA_MAX) return;
    out->extra[out->extra_count].name = name;
    out->extra[out->extra_count].value = value;
    out->extra_count++;
}

static void rpc_tcp_stats(const struct cr_edge *edge, struct cr_actor_stats *out) {
    const struct rpc_tcp_state *st = (const struct rpc_tcp_state *)edge;
    add_stat(out, "connections_open", st->open);
    add_stat(out, "connections_accepted_total", st->accepted);
    add_stat(out, "connections_refused_total", st->refused_full);
    add_stat(out, "connections_closed_malformed_total", st->closed_malformed);
    add_stat(out, "connections_closed_slow_total", st->closed_slow);
}

static void rpc_tcp_destroy(struct cr_edge *edge) {
    struct rpc_tcp_state *st = (struct rpc_tcp_state *)edge;
    if (st == NULL) return;
    for (struct conn *c = st->dirty; c != NULL;) { /* closed ones still listed */
        struct conn *next = c->next_dirty;
        if (c->fd < 0) free(c);
        c = next;
    }
    for (uint32_t i = 0; st->conns != NULL && i < st->conns_max; i++) {
        struct conn *c = st->conns[i];
        if (c == NULL) continue;
        close(c->fd);
        free(c->in);
        free(c->out.buf);
        free(c);
    }
    if (st->listen_fd >= 0) close(st->listen_fd);
    free(st->conns);
    free(st->generation);
    free(st->free_slots);
    free(st);
}

/* Whether a bound address is on loopback (127.0.0.0/8, ::1). */
static bool is_loopback(const void *address) {
    const struct sockaddr *sa = address;
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)(const void *)sa)->sin_addr.s_addr) >> 24) ==
               127;
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)(const void *)sa;
        return IN6_IS_ADDR_LOOPBACK(&a6->sin6_addr) ||
               (IN6_IS_ADDR_V4MAPPED(&a6->sin6_addr) && a6->sin6_addr.s6_addr[12] == 127);
    }
    return false;
}

/* With CURVE on, only a loopback address and only with --rpc-tcp-with-curve:
 * the native endpoint has no encryption and no client keys, so next to a
 * CURVE-protected ZMQ endpoint it would be a way around CURVE for anyone
 * who can reach it. */
static bool loopback_or_refuse(const void *sa, const char *address, const void *arg) {
    (void)arg;
    if (is_loopback(sa)) return true;
    fprintf(stderr, "crescentd: --rpc-tcp-address %s is not a loopback address, and the "
            "native RPC endpoint has no encryption: with CURVE on it serves loopback only "
            "(or turn it off with --rpc-tcp-address '')\n", address);
    return false;
}

/* Binds HOST:PORT ([V6]:PORT); the default address taken leaves the
 * endpoint off (said at WIRE: another crescentd on this host, each with its
 * own --rpc-address, must not fail to start because the first took 50052). */
static int listen_on(struct rpc_tcp_state *st, const struct cr_daemon_config *config) {
    bool curve = config->curve_secret_key_file[0] != '\0';
    struct cr_stream_listen spec = {.address = st->address,
                                    .flag = "--rpc-tcp-address",
                                    .what = "native RPC",
                                    .default_address = CR_CONFIG_RPC_TCP_DEFAULT,
                                    .accept_address = curve ? loopback_or_refuse : NULL};
    return cr_stream_listen(&spec, &st->listen_fd, &st->default_busy);
}

static const struct cr_edge_ops rpc_tcp_ops = {
    .wire = rpc_tcp_wire,
    .ready = rpc_tcp_ready,
    .done = rpc_tcp_done,
    .flush = rpc_tcp_flush,
    .stats = rpc_tcp_stats,
    .destroy = rpc_tcp_destroy,
};

int cr_rpc_tcp_edge_create(const struct cr_daemon_config *config, struct cr_edge **out) {
    struct rpc_tcp_state *st = calloc(1, sizeof(*st));
    if (st == NULL) return CR_ERR_NOMEM;
    st->listen_fd = -1;
    st->edge.ops = &rpc_tcp_ops;
    st->edge.name = "rpc_tcp";
    int rc = CR_OK;
    snprintf(st->address, sizeof(st->address), "%s", config->rpc_tcp_address);
    char why[512];
    bool curve = config->curve_secret_key_file[0] != '\0';
    if (!cr_rpc_intake_init(&st->edge.intake, config->admin_token_file, why, sizeof(why))) {
        fprintf(stderr, "crescentd: %s\n", why);
        rc = CR_ERR_INVALID_PARAMS;
    } else if (st->address[0] == '\0' || (curve && !config->rpc_tcp_with_curve)) {
        st->off_for_curve = st->address[0] != '\0'; /* off: serves nothing */
    } else {
        st->conns_max = config->rpc_tcp_connections_max;
        st->queue_max = config->rpc_tcp_queue_max;
        st->conns = calloc(st->conns_max, sizeof(*st->conns));
        st->generation = calloc(st->conns_max, sizeof(*st->generation));
        st->free_slots = calloc(st->conns_max, sizeof(*st->free_slots));
        if (st->conns == NULL || st->generation == NULL || st->free_slots == NULL) {
            fprintf(stderr, "crescentd: out of memory for %u native RPC connections\n",
                    st->conns_max);
            rc = CR_ERR_NOMEM;
        } else {
            for (uint32_t i = 0; i < st->conns_max; i++) st->free_slots[i] = st->conns_max - 1 - i;
            st->free_count = st->conns_max;
            rc = listen_on(st, config);
        }
    }
    if (rc != CR_OK) {
        rpc_tcp_destroy(&st->edge);
        return rc;
    }
    *out = &st->edge;
    return CR_OK;
}
