/* libcrescent's calls on an open cr_client (client.c opens it): the request
 * envelope of src/msgs/rpc_frame.h sent over ZMQ, the native stream or shm,
 * blocking calls matched by request id, and the pipelined submit/poll path.
 * Not locked: one cr_client per thread. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "client/client_internal.h"
#include "msgs/rpc_stream.h"

#define STASH_INITIAL 64u
/* Scratch layout: [native length u32][method u16][id u64][body]. */
#define SCRATCH_HEAD (CR_RPC_STREAM_LEN_BYTES + CR_RPC_REQUEST_HEADER_BYTES)

/* One received reply.  `body` stays a zmq_msg_t so it is read in place. */
struct reply {
    bool well_formed; /* the envelope parsed (one frame, or three; msgs/rpc_frame.h) */
    uint64_t id;
    int32_t status;
    zmq_msg_t body;   /* owns the bytes that `data` points into */
    const uint8_t *data;
    size_t len;
};

/* Every deadline is taken on the client's clock (monotonic, or a test's). */
static int64_t now_ms(const cr_client *c) { return c->clock_ms(c->clock_ctx); }

/* ---- sending ---------------------------------------------------------- */

/* Sends one frame without blocking forever: waits for room until `deadline`. */
static int send_frame(cr_client *c, const void *data, size_t len, int flags, int64_t deadline) {
    for (;;) {
        if (zmq_send(c->socket, data, len, flags | ZMQ_DONTWAIT) >= 0) return CR_OK;
        if (errno == EINTR) continue;
        if (errno != EAGAIN)
            return cr_client_fail(c, CR_ERR_IO, "zmq_send: %s", zmq_strerror(errno));
        int64_t left = deadline - now_ms(c);
        if (left <= 0)
            return cr_client_fail(c, CR_ERR_TIMEOUT,
                                  "the send queue stayed full for %d ms (crescentd not reading?)",
                                  c->timeout_ms);
        zmq_pollitem_t item = {.socket = c->socket, .events = ZMQ_POLLOUT};
        if (zmq_poll(&item, 1, (long)left) < 0 && errno != EINTR)
            return cr_client_fail(c, CR_ERR_IO, "zmq_poll: %s", zmq_strerror(errno));
    }
}

/* Packs `request` into the scratch buffer after room for the native
 * length prefix and the envelope's header (kept between calls, so the hot
 * path allocates only when a larger body than ever before is sent). */
static int pack(cr_client *c, const ProtobufCMessage *request, size_t *len) {
    size_t size = protobuf_c_message_get_packed_size(request);
    if (size > CR_RPC_BODY_MAX)
        return cr_client_fail(c, CR_ERR_INVALID_PARAMS, "the request is %zu bytes, over %u",
                              size, CR_RPC_BODY_MAX);
    if (SCRATCH_HEAD + size > c->scratch_size || c->scratch == NULL) {
        size_t want = SCRATCH_HEAD + size;
        if (want < 256) want = 256;
        uint8_t *grown = realloc(c->scratch, want);
        if (grown == NULL) return cr_client_fail(c, CR_ERR_NOMEM, "out of memory packing");
        c->scratch = grown;
        c->scratch_size = want;
    }
    *len = protobuf_c_message_pack(request, c->scratch + SCRATCH_HEAD);
    assert(*len == size);
    return CR_OK;
}

/* One frame [method][id][body] (msgs/rpc_frame.h): ZMQ's cost is per frame,
 * not per byte, at these sizes.  zmq_send copies it (ZMQ allocates for frames
 * over 33 bytes); a zero-copy zmq_msg_init_data would need the buffer to
 * outlive the send, i.e. one per request in flight, which costs more than the
 * copy saves at tens of bytes per request. */
static int send_request(cr_client *c, uint16_t method, uint64_t id,
                        const ProtobufCMessage *request) {
    size_t len = 0;
    int rc = pack(c, request, &len);
    if (rc != CR_OK) return rc;
    uint8_t *frame = c->scratch + CR_RPC_STREAM_LEN_BYTES;
    cr_rpc_put_u16(frame, method);
    cr_rpc_put_u64(frame + CR_RPC_METHOD_BYTES, id);
    int64_t deadline = now_ms(c) + c->timeout_ms;
    if (c->tcp_address != NULL || c->shm != NULL) {
        cr_rpc_stream_put_len(c->scratch, (uint32_t)(CR_RPC_REQUEST_HEADER_BYTES + len));
        return c->shm != NULL ? cr_client_shm_send(c, c->scratch, SCRATCH_HEAD + len, deadline)
                              : cr_client_tcp_send(c, c->scratch, SCRATCH_HEAD + len, deadline);
    }
    return send_frame(c, frame, CR_RPC_REQUEST_HEADER_BYTES + len, 0, deadline);
}

int cr_client_submit(cr_client *c, uint16_t method, const ProtobufCMessage *request,
                     uint64_t *request_id) {
    assert(c != NULL && request != NULL && request_id != NULL);
    int rc = cr_client_pending_reserve(c); /* before sending: a sent request is always tracked */
    if (rc != CR_OK) return rc;
    uint64_t id = cr_client_make_id(c->next_seq++, false, method);
    rc = send_request(c, method, id, request);
    if (rc != CR_OK) return rc;
    cr_client_pending_add(c, id, now_ms(c) + c->timeout_ms);
    *request_id = id;
    c->error[0] = '\0';
    return CR_OK;
}

/* ---- receiving -------------------------------------------------------- */

static void reply_close(struct reply *r) { zmq_msg_close(&r->body); }

/* Reads and drops the rest of a multipart message with more than 3 frames. */
static void drain(cr_client *c, int more) {
    zmq_msg_t extra;
    zmq_msg_init(&extra);
    while (more) {
        if (zmq_msg_recv(&extra, c->socket, 0) < 0 && errno != EINTR) break;
        more = zmq_msg_more(&extra);
    }
    zmq_msg_close(&extra);
}

/* Receives one reply (CR_ERR_AGAIN when none is queued).  On CR_OK the
 * caller owns r->body (reply_close); r->well_formed says whether it had the
 * envelope of one frame or of three, and r->data/len are the body. */
static int recv_frames(cr_client *c, struct reply *r, int flags) {
    zmq_msg_t head[2];
    zmq_msg_init(&head[0]);
    zmq_msg_init(&head[1]);
    zmq_msg_init(&r->body);
    r->well_formed = false;
    r->data = NULL;
    r->len = 0;
    int rc = zmq_msg_recv(&head[0], c->socket, flags);
    if (rc < 0) {
        int code = errno;
        zmq_msg_close(&head[0]);
        zmq_msg_close(&head[1]);
        zmq_msg_close(&r->body);
        if (code == EAGAIN) return CR_ERR_AGAIN;
        return cr_client_fail(c, code == EINTR ? CR_ERR_AGAIN : CR_ERR_IO, "zmq_msg_recv: %s",
                              zmq_strerror(code));
    }
    if (!zmq_msg_more(&head[0])) { /* one frame: [id][status][body] */
        zmq_msg_move(&r->body, &head[0]);
        const uint8_t *p = zmq_msg_data(&r->body);
        size_t size = zmq_msg_size(&r->body);
        if (size >= CR_RPC_REPLY_HEADER_BYTES &&
            cr_client_parse_envelope(p, CR_RPC_ID_BYTES, p + CR_RPC_ID_BYTES,
                                     CR_RPC_STATUS_BYTES, &r->id, &r->status) == CR_OK) {
            r->well_formed = true;
            r->data = p + CR_RPC_REPLY_HEADER_BYTES;
            r->len = size - CR_RPC_REPLY_HEADER_BYTES;
        }
        zmq_msg_close(&head[0]);
        zmq_msg_close(&head[1]);
        return CR_OK;
    }
    /* The remaining parts of a message are already here: block-free reads. */
    int parts = 1, more = 1;
    if (zmq_msg_recv(&head[1], c->socket, 0) >= 0) parts++, more = zmq_msg_more(&head[1]);
    if (parts == 2 && more && zmq_msg_recv(&r->body, c->socket, 0) >= 0)
        parts++, more = zmq_msg_more(&r->body);
    drain(c, more);
    if (parts == 3 && !more &&
        cr_client_parse_envelope(zmq_msg_data(&head[0]), zmq_msg_size(&head[0]),
                                 zmq_msg_data(&head[1]), zmq_msg_size(&head[1]), &r->id,
                                 &r->status) == CR_OK) {
        r->well_formed = true;
        r->data = zmq_msg_data(&r->body);
        r->len = zmq_msg_size(&r->body);
    }
    zmq_msg_close(&head[0]);
    zmq_msg_close(&head[1]);
    return CR_OK;
}

/* The stream transports' reply (crescent://, shm://): the payload is the
 * one-frame envelope, in the client's receive buffer until the next
 * receive. */
static int recv_native(cr_client *c, int64_t timeout_ms, struct reply *r) {
    zmq_msg_init(&r->body); /* unused; reply_close closes it all the same */
    const uint8_t *p;
    size_t size;
    int rc = c->shm != NULL ? cr_client_shm_recv(c, timeout_ms, &p, &size)
                            : cr_client_tcp_recv(c, timeout_ms, &p, &size);
    if (rc != CR_OK) {
        zmq_msg_close(&r->body);
        return rc;
    }
    assert(size >= CR_RPC_REPLY_HEADER_BYTES); /* cr_rpc_stream_next's minimum */
    r->well_formed = cr_client_parse_envelope(p, CR_RPC_ID_BYTES, p + CR_RPC_ID_BYTES,
                                              CR_RPC_STATUS_BYTES, &r->id, &r->status) == CR_OK;
    r->data = p + CR_RPC_REPLY_HEADER_BYTES;
    r->len = size - CR_RPC_REPLY_HEADER_BYTES;
    return CR_OK;
}

/* Waits up to `timeout_ms` for one reply: CR_OK, CR_ERR_TIMEOUT or CR_ERR_IO.
 *
 * A blocking read bounded by ZMQ_RCVTIMEO, as a bare ZMQ client's recv: ZMQ
 * looks at its mailbox once and sleeps in that poll(2) until the reply's
 * signal.  A non-blocking read and then zmq_poll, as this did before, made
 * ZMQ look at the mailbox four times per reply (each a poll(2) and a
 * getpid(2)): 15 syscalls per synchronous call against the echo client's 9,
 * CPU that 64 client threads on two cores take from crescentd. */
static int recv_reply(cr_client *c, int64_t timeout_ms, struct reply *r) {
    if (c->tcp_address != NULL || c->shm != NULL) return recv_native(c, timeout_ms, r);
    int64_t deadline = now_ms(c) + timeout_ms;
    for (;;) {
        int64_t left = deadline - now_ms(c);
        if (left <= 0) { /* what is queued only: no wait */
            int rc = recv_frames(c, r, ZMQ_DONTWAIT);
            return rc == CR_ERR_AGAIN ? CR_ERR_TIMEOUT : rc;
        }
        int wait_ms = left > INT_MAX ? INT_MAX : (int)left;
        if (!c->link_up && c->monitor != NULL) {
            /* Before the first handshake: fail at once when it cannot happen. */
            int rc = cr_client_monitor_wait(c, wait_ms);
            if (rc != CR_OK && rc != CR_ERR_AGAIN) return rc;
            continue;
        }
        if (wait_ms != c->rcvtimeo_ms) {
            if (zmq_setsockopt(c->socket, ZMQ_RCVTIMEO, &wait_ms, sizeof(wait_ms)) != 0)
                return cr_client_fail(c, CR_ERR_IO, "zmq_setsockopt(ZMQ_RCVTIMEO): %s",
                                      zmq_strerror(errno));
            c->rcvtimeo_ms = wait_ms;
        }
        int rc = recv_frames(c, r, 0); /* CR_ERR_AGAIN: the timeout passed, or EINTR */
        if (rc != CR_ERR_AGAIN) return rc;
    }
}

/* Turns a pipelined reply into a completion (scan only, no unpack). */
static void complete(const struct reply *r, struct cr_completion *out) {
    assert(r->well_formed);
    memset(out, 0, sizeof(*out));
    out->request_id = r->id;
    out->method = (enum cr_method)cr_client_id_method(r->id);
    if (r->status != CR_OK) {
        out->status = r->status;
        return;
    }
    struct cr_client_scan scan;
    if (cr_client_scan_reply(r->data, r->len, &scan) != CR_OK) {
        out->status = CR_ERR_PROTOCOL;
        return;
    }
    out->status = scan.status_code;
    out->exists = scan.field2_varint != 0;
    out->replica_count = scan.field2_count;
}

static int stash_push(cr_client *c, const struct cr_completion *done) {
    if (c->stash_count == c->stash_capacity) {
        size_t capacity = c->stash_capacity ? c->stash_capacity * 2 : STASH_INITIAL;
        struct cr_completion *grown = malloc(capacity * sizeof(*grown));
        if (grown == NULL) return CR_ERR_NOMEM;
        for (size_t i = 0; i < c->stash_count; i++)
            grown[i] = c->stash[(c->stash_head + i) % c->stash_capacity];
        free(c->stash);
        c->stash = grown;
        c->stash_capacity = capacity;
        c->stash_head = 0;
    }
    c->stash[(c->stash_head + c->stash_count) % c->stash_capacity] = *done;
    c->stash_count++;
    return CR_OK;
}

/* Whether a reply answers a pipelined request still waiting for it.  Others
 * are dropped: late replies to blocking calls or to requests that already
 * completed with CR_ERR_TIMEOUT, and replies whose id cannot be read (their
 * request, if any, times out: it gets one completion either way). */
static bool answers_pending(const cr_client *c, const struct reply *r) {
    return r->well_formed && !cr_client_id_sync(r->id) && cr_client_pending_waiting(c, r->id);
}

/* A reply that is not the awaited one: a pipelined request's reply is kept
 * for the next poll. */
static void set_aside(cr_client *c, const struct reply *r) {
    if (!answers_pending(c, r)) return;
    struct cr_completion done;
    complete(r, &done);
    /* Out of memory: the request stays pending and completes as a timeout. */
    if (stash_push(c, &done) != CR_OK) return;
    bool settled = cr_client_pending_settle(c, r->id);
    assert(settled);
    (void)settled;
}

int cr_client_refused(cr_client *c, int32_t status, const char *why, size_t why_len) {
    if (why == NULL || why_len == 0)
        return cr_client_fail(c, status, "crescentd: %s (%s)", cr_strerror(status),
                              cr_status_name(status));
    int shown = why_len > CR_CLIENT_ERROR_MAX ? (int)CR_CLIENT_ERROR_MAX : (int)why_len;
    return cr_client_fail(c, status, "crescentd: %.*s (%s)", shown, why, cr_status_name(status));
}

/* Decodes the awaited reply of a blocking call; see cr_client_call (and
 * cr_client_call_decode, when `decode` is set). */
static int finish_call(cr_client *c, uint16_t method, struct reply *r,
                       ProtobufCMessage **response, cr_client_decode_fn decode, void *ctx) {
    const char *body = (const char *)r->data;
    size_t len = r->len;
    if (r->status != CR_OK) {
        int shown = len > 300 ? 300 : (int)len;
        return cr_client_fail(c, r->status, "crescentd refused the request (%s): %.*s",
                              cr_status_name(r->status), shown, body);
    }
    if (decode != NULL) return decode(c, r->data, len, ctx);
    const ProtobufCMessageDescriptor *desc = cr_client_response_descriptor(method);
    assert(desc != NULL);
    ProtobufCMessage *msg = protobuf_c_message_unpack(desc, NULL, len, (const uint8_t *)body);
    if (msg == NULL)
        return cr_client_fail(c, CR_ERR_PROTOCOL, "the reply (%zu bytes) is not a valid %s",
                              len, desc->name);
    int32_t status = cr_client_response_status(msg);
    if (status != CR_OK) {
        const char *why = cr_client_response_error(msg);
        int rc = cr_client_refused(c, status, why, why != NULL ? strlen(why) : 0);
        protobuf_c_message_free_unpacked(msg, NULL);
        return rc;
    }
    *response = msg;
    return CR_OK;
}

static int call_once(cr_client *c, uint16_t method, const ProtobufCMessage *request,
                     ProtobufCMessage **response, cr_client_decode_fn decode, void *ctx) {
    c->error[0] = '\0';
    uint64_t id = cr_client_make_id(c->next_seq++, true, method);
    int rc = send_request(c, method, id, request);
    if (rc != CR_OK) return rc;
    int64_t deadline = now_ms(c) + c->timeout_ms;
    for (;;) {
        int64_t left = deadline - now_ms(c);
        struct reply r;
        rc = recv_reply(c, left > 0 ? left : 0, &r);
        if (rc == CR_ERR_TIMEOUT)
            return cr_client_fail(c, rc, "no reply from crescentd within %d ms "
                                  "(is it running, with this --rpc endpoint?)", c->timeout_ms);
        if (rc != CR_OK) return rc;
        if (!r.well_formed) {
            reply_close(&r);
            return cr_client_fail(c, CR_ERR_PROTOCOL, "crescentd sent a reply that is not "
                                  "[id 8 bytes][status 4 bytes][body]");
        }
        /* Id 0: the server could not read our id; we wait for one reply at a
         * time on the blocking path, so it answers this request. */
        if (r.id == id || (r.id == 0 && r.status != CR_OK)) {
            rc = finish_call(c, method, &r, response, decode, ctx);
            reply_close(&r);
            return rc;
        }
        set_aside(c, &r);
        reply_close(&r);
    }
}

/* A call, and for an etcd:// client the leader followed (client_follow.c):
 * "not the leader" (RPC_FAIL with that reason: nothing was done) is sent again to the new leader; a lost
 * answer only for a call that is safe to repeat.  At most three leaders. */
static int call(cr_client *c, uint16_t method, const ProtobufCMessage *request,
                ProtobufCMessage **response, cr_client_decode_fn decode, void *ctx) {
    int rc = call_once(c, method, request, response, decode, ctx);
    for (int tries = 0; c->follow != NULL && tries < 3; tries++) {
        bool refused = rc == CR_ERR_RPC_FAIL && strncmp(c->error, "crescentd: not the leader",
                                                        strlen("crescentd: not the leader")) == 0;
        if (!refused && rc != CR_ERR_TIMEOUT && rc != CR_ERR_IO && rc != CR_ERR_SHUTDOWN)
            return rc;
        char first[CR_CLIENT_ERROR_MAX];
        snprintf(first, sizeof(first), "%s", c->error);
        /* A refusal or a second silence: wait for another term; a first
         * silence may be a broken connection to the same leader. */
        int frc = cr_client_follow_leader(c, refused || tries > 0);
        if (frc != CR_OK) {
            char why[CR_CLIENT_ERROR_MAX];
            snprintf(why, sizeof(why), "%s", c->error);
            return cr_client_fail(c, rc, "%.200s; following the leader: %.280s", first, why);
        }
        if (!refused && !cr_client_follow_retry_safe(method))
            return cr_client_fail(c, rc, "%.200s; the call may or may not have been applied by "
                                  "the old leader, so it is not sent again (now connected to "
                                  "the leader in etcd)", first);
        rc = call_once(c, method, request, response, decode, ctx);
    }
    return rc;
}

int cr_client_call(cr_client *c, uint16_t method, const ProtobufCMessage *request,
                   ProtobufCMessage **response) {
    assert(c != NULL && request != NULL && response != NULL);
    *response = NULL;
    return call(c, method, request, response, NULL, NULL);
}

int cr_client_call_decode(cr_client *c, uint16_t method, const ProtobufCMessage *request,
                          cr_client_decode_fn decode, void *ctx) {
    assert(c != NULL && request != NULL && decode != NULL);
    return call(c, method, request, NULL, decode, ctx);
}

static size_t take_stash(cr_client *c, struct cr_completion *out, size_t max) {
    size_t n = 0;
    while (n < max && c->stash_count > 0) {
        out[n++] = c->stash[c->stash_head];
        c->stash_head = (c->stash_head + 1) % c->stash_capacity;
        c->stash_count--;
    }
    return n;
}

/* Takes one reply that answers a waiting request into *out; drops others. */
static bool take_reply(cr_client *c, const struct reply *r, struct cr_completion *out) {
    if (!answers_pending(c, r)) return false;
    complete(r, out);
    bool settled = cr_client_pending_settle(c, r->id);
    assert(settled);
    return settled;
}

/* Waits for the first completion until the caller's deadline or the oldest
 * request's, whichever comes first: a request whose reply never comes
 * completes as CR_ERR_TIMEOUT instead of keeping in_flight above 0 forever.
 * Replies already queued are taken before anything is declared timed out. */
int cr_client_poll(cr_client *c, struct cr_completion *out, size_t max, int timeout_ms) {
    assert(c != NULL && out != NULL && max > 0 && max <= INT_MAX);
    size_t n = take_stash(c, out, max);
    int64_t wait_ms = timeout_ms < 0 ? c->timeout_ms : timeout_ms;
    int64_t deadline = now_ms(c) + wait_ms;
    int rc = CR_OK;
    while (n < max) {
        int64_t now = now_ms(c), until = deadline;
        int64_t oldest = cr_client_pending_next_deadline(c);
        if (oldest < until) until = oldest;
        if (n > 0 || until < now) until = now; /* wait only for the first */
        struct reply r;
        rc = recv_reply(c, until - now, &r);
        if (rc == CR_ERR_TIMEOUT) {
            rc = CR_OK;
            now = now_ms(c);
            n += cr_client_pending_expire(c, now, out + n, max - n);
            if (n > 0 || now >= deadline) break;
            continue;
        }
        if (rc != CR_OK) break;
        if (take_reply(c, &r, &out[n])) n++;
        reply_close(&r);
    }
    /* A transport error is reported only when nothing was taken: completions
     * already settled must reach the caller, or they would be lost. */
    return n > 0 || rc == CR_OK ? (int)n : rc;
}
