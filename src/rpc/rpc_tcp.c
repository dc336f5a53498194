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
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "rpc/edge.h"
#include "actors/subsystems.h"
#include "core/log.h"
#include "crescent/error.h"
#include "daemon/config.h"
#include "msgs/rpc_stream.h"
#include "rpc/stream_conns.h"
#include "rpc/stream_listen.h"
#include "runtime/stats_extra.h"

#define RPC_TCP_READ_CHUNK (64u << 10)     /* bytes asked of read() at a time */
#define RPC_TCP_READ_BUDGET (256u << 10)   /* per connection per loop turn: fairness */
#define RPC_TCP_OUT_PAUSE (4u << 20)       /* queued reply bytes that pause reading */
#define RPC_TCP_OUT_MAX (64u << 20)        /* queued reply bytes that close the connection */
#define RPC_TCP_LISTEN_TAG CR_EDGE_TAG_MAX

struct conn {
    struct cr_stream_conn s;      /* first: the table's part (stream_conns.h) */
    struct cr_rpc_stream_out out; /* replies not yet written */
    bool slow; /* a reply passed RPC_TCP_OUT_MAX: closed at the flush */
};

struct rpc_tcp_state {
    struct cr_edge edge; /* first: the edge is the state */
    int listen_fd;
    bool listen_added;
    bool off_for_curve; /* an address was given, but CURVE is on */
    bool default_busy;  /* the default address was taken: serving nothing */
    uint32_t taken;     /* frames handled, for the loop's work count */
    uint32_t queue_max;
    struct cr_stream_conns conns;
    char address[CR_CONFIG_ADDRESS_MAX];
    uint64_t closed_malformed, closed_slow;
};

/* ------------------------------------------------------------------------ */
/* Connections */

static uint64_t now_ns(struct rpc_tcp_state *st) { return cr_edge_now_ns(&st->edge); }

static struct conn *conn_of(struct cr_stream_conn *s) { return (struct conn *)s; }

/* The table frees the read buffer; this, the replies. */
static void conn_release(struct cr_stream_conn *s) {
    struct conn *c = conn_of(s);
    free(c->out.buf);
    c->out.buf = NULL;
}

/* Reading pauses while the connection has queue_max calls in flight or
 * RPC_TCP_OUT_PAUSE bytes of replies unwritten, writing waits for EPOLLOUT
 * only while replies are unwritten and no flush is due: a connection on the
 * flush list is written at the end of this round (flush_one) and asks for
 * EPOLLOUT there if the socket took less than all.  (Asking here too made two
 * epoll_ctl calls per synchronous call, EPOLLOUT on and off again: 7% of
 * segments' time in a native BatchGetReplicaList run.) */
/* Whether the connection may take another request now: its calls in
 * flight and its unwritten replies, checked before every frame. */
static bool conn_takes(const struct rpc_tcp_state *st, const struct conn *c) {
    return c->s.in_flight < st->queue_max && c->out.len - c->out.off < RPC_TCP_OUT_PAUSE &&
           !c->slow;
}

static void update_events(struct rpc_tcp_state *st, struct conn *c) {
    size_t queued = c->out.len - c->out.off;
    uint32_t events = 0;
    if (conn_takes(st, c)) events |= EPOLLIN;
    if (queued > 0 && !c->s.dirty) events |= EPOLLOUT;
    cr_stream_conn_set_events(&st->conns, &c->s, events);
}

/* Writes what is queued.  Returns false when the connection was closed. */
static bool conn_flush(struct rpc_tcp_state *st, struct conn *c) {
    if (c->slow) {
        st->closed_slow++;
        cr_stream_conn_close(&st->conns, &c->s, "its unread replies passed 64 MiB");
        return false;
    }
    if (!cr_stream_conn_send(&st->conns, &c->s, c->out.buf, c->out.len, &c->out.off))
        return false;
    if (c->out.off == c->out.len) c->out.off = c->out.len = 0;
    update_events(st, c);
    return true;
}

static bool take_frames(struct rpc_tcp_state *st, struct conn *c, uint64_t received_ns);

/* A connection with new replies, at the end of the round: one send however
 * many replies the round brought it.  A connection that had stopped taking
 * frames at --rpc-tcp-queue-max takes the ones it already read once its
 * replies make room: they would otherwise wait for bytes the client may
 * never send. */
static void flush_one(struct cr_stream_conns *conns, struct cr_stream_conn *s) {
    struct rpc_tcp_state *st = (struct rpc_tcp_state *)conns->edge;
    struct conn *c = conn_of(s);
    if (conn_flush(st, c) && c->s.in_len > 0 && conn_takes(st, c) &&
        take_frames(st, c, now_ns(st)))
        update_events(st, c);
}

/* Queues one reply frame.  False (nothing queued, counted) when out of
 * memory, or when it would take the connection's unwritten replies past
 * RPC_TCP_OUT_MAX: the connection is then marked slow, takes no more
 * requests and is closed at the round's end (conn_flush), and its later
 * replies are dropped. */
static bool queue_reply(struct rpc_tcp_state *st, struct conn *c, uint64_t request_id,
                        int32_t status, const uint8_t *body, size_t len) {
    cr_stream_conn_mark_dirty(&st->conns, &c->s);
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
    put_u32(call->identity, c->s.slot);
    put_u32(call->identity + 4, st->conns.generation[c->s.slot]);
    struct cr_rpc_refusal no;
    c->s.in_flight++; /* first: a call segments runs inline is done (rpc_tcp_done) at once */
    if (cr_edge_submit(&st->edge, call, env.body, env.body_len, &no)) return;
    c->s.in_flight--;
    queue_reply(st, c, call->request_id, no.status, no.body, no.len);
    cr_rpc_refusal_free(&no);
    cr_master_call_free(call);
}

/* Takes every whole frame from the read buffer.  Returns false when the
 * stream is broken (the connection is then answered and closed). */
static bool take_frames(struct rpc_tcp_state *st, struct conn *c, uint64_t received_ns) {
    struct cr_stream_conn *s = &c->s;
    size_t pos = 0, n = 0;
    enum cr_rpc_stream_verdict v = CR_RPC_STREAM_MORE;
    while (conn_takes(st, c) &&
           (v = cr_rpc_stream_next(s->in + pos, s->in_len - pos, CR_RPC_REQUEST_HEADER_BYTES,
                                   CR_RPC_STREAM_REQUEST_MAX, &n)) == CR_RPC_STREAM_FRAME) {
        handle_frame(st, c, s->in + pos + CR_RPC_STREAM_LEN_BYTES, n, received_ns);
        pos += CR_RPC_STREAM_LEN_BYTES + n;
    }
    if (v == CR_RPC_STREAM_BAD) {
        st->edge.intake.malformed++;
        st->closed_malformed++;
        char text[160];
        snprintf(text, sizeof(text),
                 "malformed frame: length %u is outside %u..%u (msgs/rpc_stream.h); closing "
                 "the connection",
                 get_u32(s->in + pos), CR_RPC_REQUEST_HEADER_BYTES, CR_RPC_STREAM_REQUEST_MAX);
        queue_reply(st, c, 0, CR_ERR_PROTOCOL, (const uint8_t *)text, strlen(text));
        if (conn_flush(st, c)) cr_stream_conn_close(&st->conns, s, "malformed frame");
        return false;
    }
    s->in_len -= pos;
    if (pos > 0 && s->in_len > 0) memmove(s->in, s->in + pos, s->in_len);
    /* A large frame grew the buffer: give the memory back once it is gone. */
    if (s->in_cap > 4 * RPC_TCP_READ_CHUNK && s->in_len <= RPC_TCP_READ_CHUNK) {
        uint8_t *small = realloc(s->in, RPC_TCP_READ_CHUNK);
        if (small != NULL) s->in = small, s->in_cap = RPC_TCP_READ_CHUNK;
    }
    return true;
}

/* Room for the next read: a chunk, or the rest of the frame being read. */
static size_t read_want(const struct cr_stream_conn *s) {
    size_t frame = 0, want = s->in_len + RPC_TCP_READ_CHUNK;
    if (cr_rpc_stream_next(s->in, s->in_len, CR_RPC_REQUEST_HEADER_BYTES,
                           CR_RPC_STREAM_REQUEST_MAX, &frame) == CR_RPC_STREAM_MORE &&
        CR_RPC_STREAM_LEN_BYTES + frame > want)
        want = CR_RPC_STREAM_LEN_BYTES + frame;
    return want;
}

static void conn_read(struct rpc_tcp_state *st, struct conn *c, uint64_t received_ns) {
    size_t budget = RPC_TCP_READ_BUDGET;
    while (budget > 0 && conn_takes(st, c)) {
        bool drained = false;
        ssize_t n = cr_stream_conn_read(&st->conns, &c->s, read_want(&c->s), &drained);
        if (n < 0) return; /* closed */
        if (n == 0) break;
        budget = (size_t)n < budget ? budget - (size_t)n : 0;
        if (!take_frames(st, c, received_ns)) return;
        /* A short read took all there was: epoll (level-triggered) says
         * when more comes, without a recv that finds nothing. */
        if (drained) break;
    }
    update_events(st, c);
}

/* ------------------------------------------------------------------------ */
/* Edge hooks (edge.h), on the segments thread */

static uint32_t rpc_tcp_ready(struct cr_edge *edge, uint64_t tag, uint32_t events) {
    struct rpc_tcp_state *st = (struct rpc_tcp_state *)edge;
    if (tag == RPC_TCP_LISTEN_TAG) {
        cr_stream_conns_accept(&st->conns, st->listen_fd, now_ns(st));
        return 0;
    }
    assert(tag < st->conns.max);
    struct cr_stream_conn *s = st->conns.conns[tag];
    if (s == NULL) return 0; /* closed earlier in this round */
    if ((events & EPOLLOUT) && !conn_flush(st, conn_of(s))) return 0;
    uint32_t before = st->taken;
    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) conn_read(st, conn_of(s), now_ns(st));
    return st->taken - before;
}

/* A finished call: its reply is queued to its connection, written at the
 * end of the round (rpc_tcp_flush). */
static void rpc_tcp_done(struct cr_edge *edge, struct cr_master_call *call) {
    struct rpc_tcp_state *st = (struct rpc_tcp_state *)edge;
    assert(call->identity_len == 8);
    struct cr_stream_conn *s =
        cr_stream_conns_find(&st->conns, get_u32(call->identity), get_u32(call->identity + 4));
    if (s != NULL) {
        assert(s->in_flight > 0);
        s->in_flight--;
        queue_reply(st, conn_of(s), call->request_id, call->status,
                    call->reply != NULL ? call->reply : (const uint8_t *)"", call->reply_len);
    } else {
        st->edge.intake.send_dropped++; /* its connection closed meanwhile */
    }
    cr_master_call_free(call);
}

static void rpc_tcp_flush(struct cr_edge *edge) {
    cr_stream_conns_flush(&((struct rpc_tcp_state *)edge)->conns, flush_one);
}

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

static void rpc_tcp_stats(const struct cr_edge *edge, struct cr_actor_stats *out) {
    const struct rpc_tcp_state *st = (const struct rpc_tcp_state *)edge;
    cr_actor_stats_add(out, "connections_open", st->conns.open);
    cr_actor_stats_add(out, "connections_accepted_total", st->conns.accepted);
    cr_actor_stats_add(out, "connections_refused_total", st->conns.refused_full);
    cr_actor_stats_add(out, "connections_closed_malformed_total", st->closed_malformed);
    cr_actor_stats_add(out, "connections_closed_slow_total", st->closed_slow);
}

static void rpc_tcp_destroy(struct cr_edge *edge) {
    struct rpc_tcp_state *st = (struct rpc_tcp_state *)edge;
    if (st == NULL) return;
    cr_stream_conns_free(&st->conns);
    if (st->listen_fd >= 0) close(st->listen_fd);
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
        st->queue_max = config->rpc_tcp_queue_max;
        st->conns = (struct cr_stream_conns){.edge = &st->edge,
                                             .log_tag = "rpc_tcp",
                                             .address = st->address,
                                             .full_hint = " (--rpc-tcp-connections-max)",
                                             .conn_size = sizeof(struct conn),
                                             .release = conn_release};
        rc = cr_stream_conns_init(&st->conns, config->rpc_tcp_connections_max);
        if (rc != CR_OK)
            fprintf(stderr, "crescentd: out of memory for %u native RPC connections\n",
                    config->rpc_tcp_connections_max);
        else
            rc = listen_on(st, config);
    }
    if (rc != CR_OK) {
        rpc_tcp_destroy(&st->edge);
        return rc;
    }
    *out = &st->edge;
    return CR_OK;
}
