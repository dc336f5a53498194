/* The RPC gateway actor: the store master's intake.
 *
 * Owns the ZMQ ROUTER bound to rpc_address.  Its `wait` hook polls the
 * socket and the wake fd; each request (identity, method, request id, body,
 * in one frame or three: msgs/rpc_frame.h) has its envelope read here, then
 * goes through the intake shared with the native endpoint (rpc_intake.c:
 * decoded with protobuf-c, validated, admin-gated) and is handed to the
 * segments actor as an owned struct cr_master_call (CR_MSG_MASTER_CALL).
 * Segments runs it and sends the call back (CR_MSG_MASTER_DONE) with the
 * packed response; the gateway writes the reply with ZMQ_DONTWAIT.  No ask
 * blocks here, so many requests are in flight and replies leave in the order
 * segments finishes them.  QueryTask goes to the tasks actor instead, which
 * answers it the same way; FetchTasks and MarkTaskToComplete go to segments
 * for the executor's secret check, then on to tasks, which answers them;
 * CreateCopyTask and CreateMoveTask go to segments, which reserves their
 * targets and passes them on to tasks (msgs/task_msgs.h).
 *
 * Anything wrong with a request (frame count or sizes, unknown method, a body
 * protobuf cannot decode, a value out of range) is answered at once and
 * counted; nothing reaches segments half-checked.  A reply that cannot be
 * written now (peer gone, its queue full) is dropped and counted: one slow
 * client never stalls the others.
 *
 * Ownership of a call: the gateway allocates it; the MASTER_CALL message
 * hands it to segments; MASTER_DONE hands it back; the gateway frees it
 * after writing the reply.  Discard hooks on both sides free calls left in
 * a ring at shutdown. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "actors/curve.h"
#include "actors/rpc_codec.h"
#include "actors/rpc_intake.h"
#include "actors/subsystems.h"
#include "core/log.h"
#include "crescent/error.h"
#include "daemon/config.h"
#include "msgs/master_msgs.h"
#include "msgs/rpc_frame.h"

#define RPC_READ_BATCH 256u /* requests read per wait before serving the mailbox again */

struct rpc_state {
    void *zctx;
    void *router;
    struct cr_curve_server *curve; /* NULL: CURVE off */
    struct cr_rpc_intake intake;   /* counters, admin token, peers (shared with rpc_tcp.c) */
    char address[CR_CONFIG_ADDRESS_MAX];
    struct cr_actor *self;
    uint64_t last_log_ns;
};

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
    zmq_msg_t m;
    /* The one frame is built before the identity goes out: a failure after
     * it would leave a half message that the next reply would complete. */
    bool made = to->one_frame && zmq_msg_init_size(&m, CR_RPC_REPLY_HEADER_BYTES + body_len) == 0;
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
             zmq_send(st->router, code, sizeof(code), ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0 &&
             zmq_send(st->router, body, body_len, ZMQ_DONTWAIT) >= 0;
    }
    if (!ok) {
        st->intake.send_dropped++;
        return false;
    }
    st->intake.replies++;
    return true;
}

static void send_error(struct rpc_state *st, const struct cr_master_call *to, int32_t status,
                       const char *text) {
    send_reply(st, to, status, text, strlen(text));
}

/* A chain of finished calls (MASTER_DONE): each reply goes out in order. */
static void on_done(struct rpc_state *st, struct cr_master_call *call) {
    /* One clock read per round (cr_actor_now_ns), as received_ns is one per
     * batch read: the latency is exact to a round, with no read per call. */
    uint64_t now_ns = call != NULL ? cr_actor_now_ns(st->self) : 0;
    while (call != NULL) {
        struct cr_master_call *next = call->next;
        cr_rpc_intake_done(&st->intake, call, now_ns);
        send_reply(st, call, call->status,
                   call->reply != NULL ? call->reply : (const uint8_t *)"", call->reply_len);
        cr_master_call_free(call);
        call = next;
    }
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
             * read can find nothing. */
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
        st->intake.malformed++;
        cr_rpc_refusal_text(&no, CR_ERR_PROTOCOL,
                            "malformed request: expected one frame [method u16][request id "
                            "u64][body] or three frames [method u16] [request id u64] [body]");
    } else if (cr_rpc_intake_take(&st->intake, call, in->body, in->body_len, &no)) {
        return; /* segments (or tasks) owns it now */
    }
    send_reply(st, call, no.status, no.body, no.len);
    cr_rpc_refusal_free(&no);
    cr_master_call_free(call);
}

static void rpc_wait(struct cr_actor *self, void *arg, int wake_fd, int timeout_ms) {
    struct rpc_state *st = arg;
    zmq_pollitem_t items[2] = {{.socket = st->router, .events = ZMQ_POLLIN},
                               {.fd = wake_fd, .events = ZMQ_POLLIN}};
    /* Until CR_MSG_WIRE names segments, requests wait in the socket (bound
     * at create, so clients connect from the first moment): read now, they
     * could only be answered "busy". */
    bool wired = st->intake.segments != NULL;
    if (!wired) items[0] = items[1];
    if (zmq_poll(items, wired ? 2 : 1, timeout_ms) < 0) {
        if (zmq_errno() != EINTR) CR_ERROR("rpc", "zmq_poll failed: %s", zmq_strerror(zmq_errno()));
        return;
    }
    if (!wired || !(items[0].revents & ZMQ_POLLIN)) return;
    struct incoming in;
    uint64_t now_ns = cr_runtime_now_ns(cr_actor_runtime(self)); /* one read per batch */
    for (uint32_t n = 0; n < RPC_READ_BATCH && read_message(st, &in); n++) {
        if (in.kept > 0) handle_request(st, &in, now_ns);
        incoming_close(&in);
    }
}

/* ------------------------------------------------------------------------ */
/* Actor hooks */

static int rpc_start(struct cr_actor *self, void *arg) {
    struct rpc_state *st = arg;
    st->self = self;
    st->intake.self = self;
    return CR_OK;
}

static void rpc_handle(struct cr_actor *self, void *arg, struct cr_msg *msg) {
    struct rpc_state *st = arg;
    switch (msg->type) {
    case CR_MSG_WIRE: {
        cr_rpc_intake_wire(&st->intake, msg->body.ptr[0]);
        return;
    }
    case CR_MSG_MASTER_DONE: on_done(st, CR_MSG_BODY(msg, struct cr_msg_master_call)->call); return;
    default: {
        uint64_t now = cr_runtime_now_ns(cr_actor_runtime(self));
        if (cr_log_ratelimit(&st->last_log_ns, now, 60ull * 1000000000u))
            CR_WARN("rpc", "message type %u from sender %u is not handled here", msg->type,
                    msg->sender);
        if (msg->flags & CR_MSG_ASK) cr_reply(msg, CR_ERR_INVALID_PARAMS);
    }
    }
}

static void rpc_discard(void *arg, struct cr_msg *msg) {
    (void)arg;
    if (msg->type == CR_MSG_MASTER_DONE)
        cr_master_call_free_chain(CR_MSG_BODY(msg, struct cr_msg_master_call)->call);
}

static void rpc_stats(struct cr_actor *self, void *arg, struct cr_actor_stats *out) {
    (void)self;
    const struct rpc_state *st = arg;
    cr_rpc_intake_stats(&st->intake, out);
}

static void rpc_destroy(void *arg) {
    struct rpc_state *st = arg;
    if (st == NULL) return;
    if (st->router != NULL) zmq_close(st->router);
    if (st->zctx != NULL) zmq_ctx_term(st->zctx);
    cr_curve_server_join(st->curve); /* the context's end ended it */
    free(st);
}

static int set_int(void *sock, int option, int value) {
    return zmq_setsockopt(sock, option, &value, sizeof(value));
}

/* Binds on the main thread, before any actor runs, so a bad or busy address
 * fails the daemon's start.  The socket is then used only by the actor's
 * thread (thread creation is the full barrier ZMQ asks for on migration). */
static int rpc_create(const struct cr_daemon_config *config, void **state_out) {
    struct rpc_state *st = calloc(1, sizeof(*st));
    if (st == NULL) return CR_ERR_NOMEM;
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
        rpc_destroy(st);
        return CR_ERR_IO;
    }
    char why[512];
    if (!cr_rpc_intake_init(&st->intake, config->admin_token_file, why, sizeof(why))) {
        fprintf(stderr, "crescentd: %s\n", why);
        rpc_destroy(st);
        return CR_ERR_INVALID_PARAMS;
    }
    int rc = cr_curve_server_start(st->zctx, st->router, config, "RPC", &st->curve);
    if (rc != CR_OK) {
        rpc_destroy(st);
        return rc;
    }
    if (zmq_bind(st->router, st->address) != 0) {
        int err = zmq_errno();
        /* CR_ERR_IO from a create hook makes crescentd exit 2 (see daemon.c). */
        fprintf(stderr, "crescentd: cannot bind the RPC address %s: %s\n", st->address,
                zmq_strerror(err));
        rpc_destroy(st);
        return CR_ERR_IO;
    }
    *state_out = st;
    return CR_OK;
}

static const struct cr_actor_ops rpc_ops = {
    .start = rpc_start,
    .handle = rpc_handle,
    .discard = rpc_discard,
    .wait = rpc_wait,
    .stats = rpc_stats,
};

const struct cr_subsystem_def cr_rpc_def = {
    .name = "rpc",
    .ops = &rpc_ops,
    .create = rpc_create,
    .destroy = rpc_destroy,
};
