/* The store master's ZMQ endpoint (--rpc-address): an edge of the segments
 * actor (edge.h), served on segments' own thread.
 *
 * Owns the ZMQ ROUTER bound to rpc_address.  Its ZMQ_FD is in segments'
 * epoll set; each request (identity, method, request id, body, in one frame
 * or three: msgs/rpc_frame.h) has its envelope read here, then goes through
 * the intake shared with the native endpoint (rpc_intake.c: decoded with
 * protobuf-c, validated, admin-gated) and to cr_edge_submit: segments runs
 * its own calls inline and the reply is written at once with ZMQ_DONTWAIT,
 * so a call crosses libzmq's I/O thread → segments → libzmq's I/O thread,
 * as a bare ZMQ echo does.  QueryTask goes to the tasks actor, which
 * answers it as MASTER_DONE to segments; FetchTasks and MarkTaskToComplete
 * are checked by segments (the executor's secret) and answered by tasks;
 * CreateCopyTask and CreateMoveTask are reserved by segments and answered by
 * tasks (msgs/task_msgs.h).  Replies leave in the order calls finish.
 *
 * ZMQ_FD is edge-triggered in effect: it signals that the socket's state
 * may have changed, and any zmq_recv, zmq_send or ZMQ_EVENTS read can
 * consume that signal.  So a read drains with ZMQ_DONTWAIT until EAGAIN (or
 * a batch, then cr_edge_again), and after the round's sends ZMQ_EVENTS is
 * read again (rpc_flush): a request that arrived meanwhile is served next
 * round instead of waiting for a signal already consumed.
 *
 * Anything wrong with a request (frame count or sizes, unknown method, a body
 * protobuf cannot decode, a value out of range) is answered at once and
 * counted; nothing reaches the store half-checked.  A reply that cannot be
 * written now (peer gone, its queue full) is dropped and counted: one slow
 * client never stalls the others.
 *
 * Unread replies are bounded at every reply, in bytes: ZMQ's own bound
 * (SNDHWM) counts messages, and 1000 BatchGetReplicaList replies of 15 MB
 * each would be 15 GB queued for a peer that does not read.  A reply of
 * RPC_OUT_ACCOUNTED bytes or more is handed to ZMQ in a buffer of ours whose
 * free callback (on libzmq's I/O thread, once the bytes are written or the
 * peer is gone) takes its size off its peer's count; a reply that would take
 * that count past RPC_OUT_MAX is answered with a short "busy" refusal
 * instead (counted in replies_refused_unread_total).  Peers are counted in
 * RPC_OUT_BUCKETS buckets by a hash of their identity: two peers that share
 * a bucket share its bound (conservative, never more memory), which at a
 * few hundred clients is rare.  Smaller replies stay under SNDHWM times
 * RPC_OUT_ACCOUNTED per peer.
 *
 * Ownership of a call: this edge allocates it; cr_edge_submit takes it; it
 * comes back through rpc_done, which writes the reply and frees it. */
#include <assert.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <zmq.h>

#include "rpc/curve.h"
#include "rpc/edge.h"
#include "rpc/rpc_codec.h"
#include "actors/subsystems.h"
#include "core/log.h"
#include "crescent/error.h"
#include "daemon/config.h"
#include "msgs/master_msgs.h"
#include "msgs/rpc_frame.h"
#include "runtime/stats_extra.h"

#define RPC_READ_BATCH 256u /* requests read per round before serving the mailbox again */
#define RPC_FD_TAG 0u
#define RPC_OUT_ACCOUNTED (16u << 10) /* replies from this size on are counted per peer */
#define RPC_OUT_MAX (64u << 20)       /* a peer's unwritten reply bytes, as the native endpoint's */
#define RPC_OUT_BUCKETS 4096u

/* A counted reply's buffer: the bytes ZMQ sends, and where to give its size
 * back when ZMQ frees it (reply_freed, on libzmq's I/O thread). */
struct counted_reply {
    _Atomic uint64_t *bucket;
    size_t size;
    uint8_t data[];
};

struct rpc_state {
    struct cr_edge edge; /* first: the edge is the state */
    void *zctx;
    void *router;
    int fd;        /* ZMQ_FD */
    bool watched;  /* fd in segments' epoll set (from wire on) */
    /* A reply went out since a read last found the socket empty: a send may
     * have consumed the fd's signal of a request that came meanwhile. */
    bool sent_since_empty;
    struct cr_curve_server *curve; /* NULL: CURVE off */
    char address[CR_CONFIG_ADDRESS_MAX];
    /* Unwritten bytes of counted replies, by bucket of peer identity: added
     * here, taken off on libzmq's I/O thread (reply_freed). */
    _Atomic uint64_t *out_bytes;
    uint64_t refused_unread; /* replies refused: their peer had RPC_OUT_MAX unread */
    uint64_t last_log_ns;
};

/* ------------------------------------------------------------------------ */
/* Unread reply bytes, per peer */

static _Atomic uint64_t *out_bucket(struct rpc_state *st, const struct cr_master_call *to) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a: identities are short */
    for (size_t i = 0; i < to->identity_len; i++) h = (h ^ to->identity[i]) * 0x100000001b3ull;
    return &st->out_bytes[h % RPC_OUT_BUCKETS];
}

static void reply_freed(void *data, void *hint) {
    (void)data;
    struct counted_reply *r = hint;
    atomic_fetch_sub_explicit(r->bucket, r->size, memory_order_relaxed);
    free(r);
}

/* A counted message of `size` bytes for peer `to` (its bytes to be filled
 * at zmq_msg_data).  False: the peer has RPC_OUT_MAX unread (*unread set),
 * or no memory. */
static bool counted_msg(struct rpc_state *st, const struct cr_master_call *to, size_t size,
                        zmq_msg_t *m, bool *unread) {
    _Atomic uint64_t *bucket = out_bucket(st, to);
    *unread = atomic_load_explicit(bucket, memory_order_relaxed) + size > RPC_OUT_MAX;
    if (*unread) return false;
    struct counted_reply *r = malloc(sizeof(*r) + size);
    if (r == NULL) return false;
    r->bucket = bucket;
    r->size = size;
    atomic_fetch_add_explicit(bucket, size, memory_order_relaxed);
    if (zmq_msg_init_data(m, r->data, size, reply_freed, r) != 0) {
        reply_freed(r->data, r);
        return false;
    }
    return true;
}

/* Says, at most once every ten seconds, that a peer's replies are refused. */
static void say_unread(struct rpc_state *st, const struct cr_master_call *to) {
    st->refused_unread++;
    if (cr_log_ratelimit(&st->last_log_ns, cr_edge_now_ns(&st->edge), 10ull * 1000000000u))
        CR_WARN("rpc", "a ZMQ client has %u MiB of replies it does not read: its replies are "
                "refused busy until it reads them (request %llu; "
                "crescent_rpc_replies_refused_unread_total %llu)", RPC_OUT_MAX >> 20,
                (unsigned long long)to->request_id, (unsigned long long)st->refused_unread);
}

/* ------------------------------------------------------------------------ */
/* Replies */

/* Writes the reply in the request's layout (see msgs/rpc_frame.h) without
 * blocking.  Returns false (and counts the drop) when the peer cannot take
 * it now. */
static bool send_reply(struct rpc_state *st, const struct cr_master_call *to, int32_t status,
                       const void *body, size_t body_len) {
    /* ROUTER_MANDATORY makes an unknown identity EHOSTUNREACH instead of a
     * silent drop; EAGAIN means the peer's queue is full.  Once the identity
     * frame is accepted, ZMQ accepts the rest of the message atomically. */
    /* Any send, even one that fails, may process ZMQ's commands. */
    st->sent_since_empty = true;
    zmq_msg_t m;
    /* The one frame is built before the identity goes out: a failure after
     * it would leave a half message that the next reply would complete.  A
     * large body goes in a counted message (RPC_OUT_MAX); one that does not
     * fit its peer's bound is answered with a short refusal instead. */
    size_t frame = (to->one_frame ? CR_RPC_REPLY_HEADER_BYTES : 0) + body_len;
    bool counted = frame >= RPC_OUT_ACCOUNTED, unread = false;
    if (counted && !counted_msg(st, to, frame, &m, &unread)) {
        if (!unread) {
            st->edge.intake.send_dropped++;
            return false;
        }
        say_unread(st, to);
        static const char busy[] = "busy: 64 MiB of earlier replies to this client are unread; "
                                   "read them, then retry";
        status = CR_ERR_AGAIN, body = busy, body_len = sizeof(busy) - 1, counted = false;
    }
    bool made = to->one_frame && (counted || zmq_msg_init_size(&m, CR_RPC_REPLY_HEADER_BYTES +
                                                                       body_len) == 0);
    bool ok = !to->one_frame || made;
    if (made) {
        uint8_t *p = zmq_msg_data(&m);
        cr_rpc_put_u64(p, to->request_id);
        cr_rpc_put_i32(p + CR_RPC_ID_BYTES, status);
        if (body_len > 0) memcpy(p + CR_RPC_REPLY_HEADER_BYTES, body, body_len);
    }
    if (ok) ok = zmq_send(st->router, to->identity, to->identity_len,
                          ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0;
    if (made) {
        if (ok) ok = zmq_msg_send(&m, st->router, ZMQ_DONTWAIT) >= 0;
        if (!ok) zmq_msg_close(&m); /* not sent: still ours */
    } else if (ok && !to->one_frame) {
        uint8_t id[CR_RPC_ID_BYTES], code[CR_RPC_STATUS_BYTES];
        cr_rpc_put_u64(id, to->request_id);
        cr_rpc_put_i32(code, status);
        ok = zmq_send(st->router, id, sizeof(id), ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0 &&
             zmq_send(st->router, code, sizeof(code), ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0;
        if (counted) {
            if (ok) memcpy(zmq_msg_data(&m), body, body_len);
            ok = ok && zmq_msg_send(&m, st->router, ZMQ_DONTWAIT) >= 0;
            if (!ok) zmq_msg_close(&m);
        } else {
            ok = ok && zmq_send(st->router, body, body_len, ZMQ_DONTWAIT) >= 0;
        }
    } else if (counted) {
        zmq_msg_close(&m); /* the identity was refused: nothing of it went */
    }
    if (!ok) {
        st->edge.intake.send_dropped++;
        return false;
    }
    st->edge.intake.replies++;
    return true;
}

static void send_error(struct rpc_state *st, const struct cr_master_call *to, int32_t status,
                       const char *text) {
    send_reply(st, to, status, text, strlen(text));
}

/* ------------------------------------------------------------------------ */
/* Requests */

/* One multipart message as read from the ROUTER: identity plus at most
 * three frames are kept; `frames` counts them all. */
struct incoming {
    zmq_msg_t part[1 + CR_RPC_REQUEST_FRAMES];
    size_t kept;
    size_t frames;
    /* The request's fields once the layout is known (see read_envelope). */
    const uint8_t *body;
    size_t body_len;
};

static void incoming_close(struct incoming *in) {
    for (size_t i = 0; i < in->kept; i++) zmq_msg_close(&in->part[i]);
}

/* Reads one whole message.  Returns false when none is waiting. */
static bool read_message(struct rpc_state *st, struct incoming *in) {
    in->kept = in->frames = 0;
    for (;;) {
        zmq_msg_t scratch,
            *part = in->kept < 1 + CR_RPC_REQUEST_FRAMES ? &in->part[in->kept] : &scratch;
        zmq_msg_init(part);
        if (zmq_msg_recv(part, st->router, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(part);
            /* ZMQ delivers the parts of a message together: only the first
             * read can find nothing.  That read processed ZMQ's commands
             * (consuming the fd's signal) and found no request after them. */
            if (in->frames == 0) st->sent_since_empty = false;
            return in->frames > 0;
        }
        in->frames++;
        bool more = zmq_msg_more(part);
        if (part == &scratch)
            zmq_msg_close(part);
        else
            in->kept++;
        if (!more) return true;
    }
}

static const uint8_t *part_data(struct incoming *in, size_t i) { return zmq_msg_data(&in->part[i]); }
static size_t part_size(struct incoming *in, size_t i) { return zmq_msg_size(&in->part[i]); }

/* Reads the envelope (cr_rpc_read_envelope) into call and in->body. */
static bool read_envelope(struct incoming *in, struct cr_master_call *call) {
    const uint8_t *data[3] = {NULL, NULL, NULL};
    size_t size[3] = {0, 0, 0};
    for (size_t i = 1; i < in->kept; i++) {
        data[i - 1] = part_data(in, i);
        size[i - 1] = part_size(in, i);
    }
    struct cr_rpc_envelope env;
    bool ok = cr_rpc_read_envelope(in->frames - 1, data, size, &env);
    call->one_frame = env.one_frame;
    call->method = env.method;
    call->request_id = env.request_id;
    in->body = env.body;
    in->body_len = env.body_len;
    return ok;
}

static void set_identity(struct cr_master_call *call, struct incoming *in) {
    size_t len = part_size(in, 0);
    call->identity_len = (uint8_t)(len > CR_MASTER_IDENTITY_MAX ? CR_MASTER_IDENTITY_MAX : len);
    memcpy(call->identity, part_data(in, 0), call->identity_len);
}

static void handle_request(struct rpc_state *st, struct incoming *in, uint64_t now_ns) {
    /* One allocation per request carries it to segments and back; protobuf-c
     * allocates the decoded request anyway. */
    struct cr_master_call *call = calloc(1, sizeof(*call));
    if (call == NULL) {
        struct cr_master_call bare = {0}; /* only what the reply needs */
        set_identity(&bare, in);
        (void)read_envelope(in, &bare);
        send_error(st, &bare, CR_ERR_NOMEM, "out of memory");
        return;
    }
    set_identity(call, in);
    call->received_ns = now_ns;
    struct cr_rpc_refusal no;
    if (!read_envelope(in, call)) {
        st->edge.intake.malformed++;
        cr_rpc_refusal_text(&no, CR_ERR_PROTOCOL,
                            "malformed request: expected one frame [method u16][request id "
                            "u64][body] or three frames [method u16] [request id u64] [body]");
    } else if (cr_edge_submit(&st->edge, call, in->body, in->body_len, &no)) {
        return; /* answered (rpc_done), or at tasks */
    }
    send_reply(st, call, no.status, no.body, no.len);
    cr_rpc_refusal_free(&no);
    cr_master_call_free(call);
}

/* ------------------------------------------------------------------------ */
/* Edge hooks (edge.h), on the segments thread */

/* Whether ZMQ has a request waiting.  Reading ZMQ_EVENTS also consumes the
 * fd's signal, so it is read only where a request found here is served. */
static bool has_input(struct rpc_state *st) {
    int events = 0;
    size_t len = sizeof(events);
    if (zmq_getsockopt(st->router, ZMQ_EVENTS, &events, &len) != 0) return false;
    return (events & ZMQ_POLLIN) != 0;
}

/* Reads requests until ZMQ has none (EAGAIN) or RPC_READ_BATCH were read:
 * then the rest are read next round (cr_edge_again), after the mailbox. */
static uint32_t rpc_ready(struct cr_edge *edge, uint64_t tag, uint32_t events) {
    (void)tag, (void)events;
    struct rpc_state *st = (struct rpc_state *)edge;
    struct incoming in;
    uint64_t now_ns = cr_edge_now_ns(edge); /* one read per batch */
    uint32_t n = 0;
    for (; n < RPC_READ_BATCH && read_message(st, &in); n++) {
        if (in.kept > 0) handle_request(st, &in, now_ns);
        incoming_close(&in);
    }
    if (n == RPC_READ_BATCH) cr_edge_again(edge, RPC_FD_TAG);
    return n;
}

/* A finished call: its reply goes out now (ZMQ queues it). */
static void rpc_done(struct cr_edge *edge, struct cr_master_call *call) {
    struct rpc_state *st = (struct rpc_state *)edge;
    send_reply(st, call, call->status, call->reply != NULL ? call->reply : (const uint8_t *)"",
               call->reply_len);
    cr_master_call_free(call);
}

/* After the round's sends: a request that arrived while they ran may have
 * consumed the fd's signal, so ZMQ is asked directly.  Not when the last
 * thing this socket did was a read that found it empty (rpc_ready answers
 * its inline calls before that read): the question would cost a poll(2) of
 * ZMQ's mailbox, and a getpid(2), per round for nothing. */
static void rpc_flush(struct cr_edge *edge) {
    struct rpc_state *st = (struct rpc_state *)edge;
    if (!st->watched || !st->sent_since_empty) return;
    if (has_input(st))
        cr_edge_again(edge, RPC_FD_TAG);
    else
        st->sent_since_empty = false; /* that question found it empty too */
}

/* Until wired, requests wait in the socket (bound at create, so clients
 * connect from the first moment): read earlier, they could only have been
 * answered "busy". */
static void rpc_wire(struct cr_edge *edge, const struct cr_subsystems *peers) {
    (void)peers;
    struct rpc_state *st = (struct rpc_state *)edge;
    if (st->watched) return;
    st->watched = cr_edge_watch(edge, st->fd, EPOLLIN, RPC_FD_TAG);
    /* Requests that came before: the fd's signal may be spent already. */
    if (st->watched) cr_edge_again(edge, RPC_FD_TAG);
}

static void rpc_destroy(struct cr_edge *edge) {
    struct rpc_state *st = (struct rpc_state *)edge;
    if (st == NULL) return;
    if (st->router != NULL) zmq_close(st->router);
    if (st->zctx != NULL) zmq_ctx_term(st->zctx);
    cr_curve_server_join(st->curve); /* the context's end ended it */
    free(st->out_bytes);              /* after the context: no free callback is left */
    free(st);
}

static void rpc_stats(const struct cr_edge *edge, struct cr_actor_stats *out) {
    const struct rpc_state *st = (const struct rpc_state *)edge;
    cr_actor_stats_add(out, "replies_refused_unread_total", st->refused_unread);
}

static const struct cr_edge_ops rpc_ops = {
    .wire = rpc_wire,
    .ready = rpc_ready,
    .done = rpc_done,
    .flush = rpc_flush,
    .stats = rpc_stats,
    .destroy = rpc_destroy,
};

static int set_int(void *sock, int option, int value) {
    return zmq_setsockopt(sock, option, &value, sizeof(value));
}

/* Binds on the main thread, before any actor runs, so a bad or busy address
 * fails the daemon's start.  The socket is then used only by the actor's
 * thread (thread creation is the full barrier ZMQ asks for on migration). */
int cr_rpc_edge_create(const struct cr_daemon_config *config, struct cr_edge **out) {
    struct rpc_state *st = calloc(1, sizeof(*st));
    if (st == NULL) return CR_ERR_NOMEM;
    st->edge.ops = &rpc_ops;
    st->edge.name = "rpc";
    st->fd = -1;
    st->out_bytes = calloc(RPC_OUT_BUCKETS, sizeof(*st->out_bytes));
    if (st->out_bytes == NULL) {
        free(st);
        return CR_ERR_NOMEM;
    }
    snprintf(st->address, sizeof(st->address), "%s", config->rpc_address);
    st->zctx = zmq_ctx_new();
    st->router = st->zctx != NULL ? zmq_socket(st->zctx, ZMQ_ROUTER) : NULL;
    if (st->router == NULL || set_int(st->router, ZMQ_LINGER, 0) != 0 ||
        set_int(st->router, ZMQ_ROUTER_MANDATORY, 1) != 0 ||
        /* ZMQ refuses (and drops the peer of) a frame above this before it
         * is buffered: a body limit checked after receiving it bounds nothing. */
        zmq_setsockopt(st->router, ZMQ_MAXMSGSIZE, &(int64_t){CR_RPC_BODY_MAX + 64},
                       sizeof(int64_t)) != 0) {
        fprintf(stderr, "crescentd: cannot create the RPC socket: %s\n", zmq_strerror(errno));
        rpc_destroy(&st->edge);
        return CR_ERR_IO;
    }
    char why[512];
    if (!cr_rpc_intake_init(&st->edge.intake, config->admin_token_file, why, sizeof(why))) {
        fprintf(stderr, "crescentd: %s\n", why);
        rpc_destroy(&st->edge);
        return CR_ERR_INVALID_PARAMS;
    }
    int rc = cr_curve_server_start(st->zctx, st->router, config, "RPC", &st->curve);
    if (rc != CR_OK) {
        rpc_destroy(&st->edge);
        return rc;
    }
    if (zmq_bind(st->router, st->address) != 0) {
        int err = zmq_errno();
        /* CR_ERR_IO from a create hook makes crescentd exit 2 (see daemon.c). */
        fprintf(stderr, "crescentd: cannot bind the RPC address %s: %s\n", st->address,
                zmq_strerror(err));
        rpc_destroy(&st->edge);
        return CR_ERR_IO;
    }
    size_t fd_len = sizeof(st->fd);
    if (zmq_getsockopt(st->router, ZMQ_FD, &st->fd, &fd_len) != 0) {
        fprintf(stderr, "crescentd: cannot get the RPC socket's ZMQ_FD: %s\n",
                zmq_strerror(zmq_errno()));
        rpc_destroy(&st->edge);
        return CR_ERR_IO;
    }
    *out = &st->edge;
    return CR_OK;
}
