/* The replay actor: the last N batches, replayed on request over ZMQ ROUTER.
 *
 * It owns the cr_replay_buffer (replay_batches, replay_bytes_mb) and takes
 * each batch from the publisher by reference (CR_MSG_EVENT_BATCH).  A request
 * [id, "", start_seq (8-byte BE)] opens a session that gets every batch kept
 * at that moment with seq >= start_seq as [id, "", seq, payload], then the
 * end marker [id, "", FF×8, FF×8] (seed-style clients read the payload frame,
 * vLLM-style clients the seq frame).  A start below the oldest kept batch
 * replays from the oldest (counted); beyond the newest, only the end marker;
 * a malformed request gets the end marker and is counted.
 *
 * Sessions are served in chunks, SESSION_CHUNK batches per session per loop
 * round, so a long replay never keeps the actor from its mailbox (where the
 * publisher's hand-offs wait).  Sends never block: ROUTER_MANDATORY plus
 * DONTWAIT.  Each peer's send queue holds at most replay_client_hwm
 * messages (SNDHWM): a session whose queue is full waits, from where it
 * stopped, until its client reads, and one that has not moved for
 * REPLAY_STALL_NS is dropped and counted (clients_stalled), as is one whose
 * peer is gone.  At most replay_sessions_max sessions run at once; a request
 * past that gets the end marker alone, counted.  So a client that never
 * reads costs at most its queue and REPLAY_SNDBUF_BYTES of socket buffer (it
 * was the whole replay: ~2.3 MB of queued frames for 10,000 batches, with no
 * bound on the number of such clients). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "rpc/curve.h"
#include "actors/subsystems.h"
#include "core/log.h"
#include "core/replay_buffer.h"
#include "crescent/error.h"
#include "daemon/config.h"
#include "msgs/event_msgs.h"
#include "runtime/stats_extra.h"

#define REPLAY_SESSION_CHUNK 128u  /* batches per session per loop round */
#define REPLAY_STALL_NS (5ull * 1000000000u) /* a full queue this long drops the session */
#define REPLAY_IDLE_POLL_MS 10     /* sessions all waiting on full queues */
/* Kernel send buffer per replay connection: without it TCP autotuning let a
 * never-reading client hold up to 4 MiB of socket memory. */
#define REPLAY_SNDBUF_BYTES (256 * 1024)
#define REPLAY_REQUESTS_PER_ROUND 256u
#define REPLAY_ID_MAX 255u         /* ZMQ routing ids are at most 255 bytes */
#define REPLAY_LINGER_MS 100
#define LOG_INTERVAL_NS (60ull * 1000000000u)

static const uint8_t end_marker[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

struct replay_session {
    uint8_t id[REPLAY_ID_MAX];
    uint8_t id_len;
    cr_replay_cursor cursor;
    uint64_t moved_ns; /* when it last sent a batch (or opened) */
};

struct replay {
    struct cr_curve_server *curve; /* NULL: CURVE off */
    char address[CR_CONFIG_ADDRESS_MAX];
    cr_replay_buffer_config buffer_config;
    void *zctx;
    void *router;
    cr_replay_buffer *buffer;
    struct replay_session *sessions; /* [0, session_count) in progress */
    uint32_t session_count;
    uint32_t sessions_max; /* replay_sessions_max */
    int client_hwm;        /* replay_client_hwm */
    bool moved;            /* some session sent something in the last pump */
    struct cr_replay_info info;
    uint64_t unknown_messages;
    uint64_t last_log_ns;
};

static void replay_close_sockets(struct replay *r) {
    if (r->router != NULL) zmq_close(r->router);
    r->router = NULL;
    if (r->zctx != NULL) zmq_ctx_term(r->zctx);
    r->zctx = NULL;
    cr_curve_server_join(r->curve); /* the context's end ended it */
    r->curve = NULL;
}

/* Opens and binds the ROUTER on the main thread, before the actor runs, so a
 * bad or busy address fails the daemon's start with a line naming it; the
 * actor's thread owns the socket from its creation on (a full barrier). */
static int replay_open_socket(struct replay *r, const struct cr_daemon_config *config) {
    int hwm = r->client_hwm, sndbuf = REPLAY_SNDBUF_BYTES;
    int one = 1, linger = REPLAY_LINGER_MS;
    r->zctx = zmq_ctx_new();
    r->router = r->zctx != NULL ? zmq_socket(r->zctx, ZMQ_ROUTER) : NULL;
    if (r->router == NULL || zmq_setsockopt(r->router, ZMQ_SNDHWM, &hwm, sizeof(hwm)) != 0 ||
        zmq_setsockopt(r->router, ZMQ_SNDBUF, &sndbuf, sizeof(sndbuf)) != 0 ||
        zmq_setsockopt(r->router, ZMQ_ROUTER_MANDATORY, &one, sizeof(one)) != 0 ||
        zmq_setsockopt(r->router, ZMQ_LINGER, &linger, sizeof(linger)) != 0) {
        CR_ERROR("replay", "cannot create the ROUTER socket: %s", zmq_strerror(errno));
        return CR_ERR_IO;
    }
    int rc = cr_curve_server_start(r->zctx, r->router, config, "replay", &r->curve);
    if (rc != CR_OK) return rc;
    if (zmq_bind(r->router, r->address) != 0) {
        fprintf(stderr, "crescentd: cannot bind the replay address %s (replay_address): %s\n",
                r->address, zmq_strerror(errno));
        return CR_ERR_IO;
    }
    CR_INFO("replay", "answering replay requests on %s", r->address);
    return CR_OK;
}

static void replay_destroy(void *state) {
    struct replay *r = state;
    if (r == NULL) return;
    cr_replay_buffer_destroy(r->buffer);
    free(r->sessions);
    free(r);
}

static int replay_create(const struct cr_daemon_config *config, void **state_out) {
    assert(config != NULL && state_out != NULL);
    struct replay *r = calloc(1, sizeof(*r));
    if (r == NULL) return CR_ERR_NOMEM;
    snprintf(r->address, sizeof(r->address), "%s", config->replay_address);
    r->buffer_config.max_batches = config->replay_batches;
    r->buffer_config.max_bytes = (uint64_t)config->replay_bytes_mb << 20;
    r->sessions_max = config->replay_sessions_max;
    r->client_hwm = (int)config->replay_client_hwm;
    r->sessions = calloc(r->sessions_max, sizeof(*r->sessions));
    int rc = r->sessions == NULL ? CR_ERR_NOMEM
                                 : cr_replay_buffer_create(&r->buffer_config, &r->buffer);
    if (rc != CR_OK)
        CR_ERROR("replay", "cannot create the replay buffer (%u batches, %u MiB): %s",
                 config->replay_batches, config->replay_bytes_mb, cr_strerror(rc));
    if (rc == CR_OK) rc = replay_open_socket(r, config);
    if (rc != CR_OK) {
        replay_destroy(r);
        return rc;
    }
    *state_out = r;
    return CR_OK;
}

/* ------------------------------------------------------------------------ */
/* Sending */

static void batch_free_fn(void *data, void *hint) {
    (void)data;
    cr_event_batch_unref(hint);
}

/* Sends [id, "", seq frame, payload frame]; `batch` NULL sends the end
 * marker.  Returns false when the peer cannot be written now (gone, or its
 * queue is full); nothing of the message is sent then. */
enum send_result { SENT, QUEUE_FULL, FAILED };

static bool replay_send_rest(struct replay *r, cr_event_batch *batch);

static enum send_result replay_send_ex(struct replay *r, const struct replay_session *s,
                                       cr_event_batch *batch);

static bool replay_send(struct replay *r, const struct replay_session *s, cr_event_batch *batch) {
    return replay_send_ex(r, s, batch) == SENT;
}

/* With ROUTER_MANDATORY the id frame fails (EHOSTUNREACH for a peer that is
 * gone, EAGAIN for a full queue) before anything is queued; the later frames
 * go to the pipe it chose. */
static enum send_result replay_send_ex(struct replay *r, const struct replay_session *s,
                                       cr_event_batch *batch) {
    if (zmq_send(r->router, s->id, s->id_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
        return errno == EAGAIN ? QUEUE_FULL : FAILED;
    return replay_send_rest(r, batch) ? SENT : FAILED;
}

static bool replay_send_rest(struct replay *r, cr_event_batch *batch) {
    int more = ZMQ_SNDMORE | ZMQ_DONTWAIT;
    if (zmq_send(r->router, "", 0, more) < 0) return false;
    if (batch == NULL) {
        if (zmq_send(r->router, end_marker, 8, more) < 0) return false;
        return zmq_send(r->router, end_marker, 8, ZMQ_DONTWAIT) >= 0;
    }
    uint8_t seq_be[8];
    for (int i = 0; i < 8; i++) seq_be[i] = (uint8_t)(batch->seq >> (56 - 8 * i));
    if (zmq_send(r->router, seq_be, 8, more) < 0) return false;
    zmq_msg_t msg; /* zero copy: zmq holds a reference until the bytes are written */
    if (zmq_msg_init_data(&msg, batch->bytes, batch->len, batch_free_fn,
                          cr_event_batch_ref(batch)) != 0) {
        cr_event_batch_unref(batch);
        /* Complete the message already begun, with a copy. */
        return zmq_send(r->router, batch->bytes, batch->len, ZMQ_DONTWAIT) >= 0;
    }
    if (zmq_msg_send(&msg, r->router, ZMQ_DONTWAIT) >= 0) return true;
    zmq_msg_close(&msg);
    return false;
}

static void replay_drop_session(struct replay *r, uint32_t index) {
    assert(index < r->session_count);
    r->sessions[index] = r->sessions[--r->session_count];
}

static void replay_log_drop(struct cr_actor *self, struct replay *r, const char *why) {
    if (cr_log_ratelimit(&r->last_log_ns, cr_runtime_now_ns(cr_actor_runtime(self)),
                         LOG_INTERVAL_NS))
        CR_WARN("replay", "replay client dropped: %s (%llu dropped, %llu stalled so far)", why,
                (unsigned long long)r->info.clients_dropped,
                (unsigned long long)r->info.clients_stalled);
}

/* Sends one chunk of session `index`.  Returns false when the session ended
 * (finished or dropped) and was removed. */
static bool replay_pump_session(struct cr_actor *self, struct replay *r, uint32_t index) {
    struct replay_session *s = &r->sessions[index];
    uint64_t now = cr_runtime_now_ns(cr_actor_runtime(self));
    for (uint32_t sent = 0; sent < REPLAY_SESSION_CHUNK; sent++) {
        cr_replay_cursor before = s->cursor;
        cr_event_batch *batch = cr_replay_buffer_next(r->buffer, &s->cursor);
        enum send_result res = replay_send_ex(r, s, batch);
        if (res == QUEUE_FULL && now - s->moved_ns < REPLAY_STALL_NS) {
            s->cursor = before; /* the client has not read yet: try again later */
            return true;
        }
        if (res != SENT) {
            if (res == QUEUE_FULL) r->info.clients_stalled++;
            else r->info.clients_dropped++;
            replay_log_drop(self, r,
                            res == QUEUE_FULL ? "its queue stayed full for 5 s (replay_client_hwm)"
                                              : zmq_strerror(errno));
            replay_drop_session(r, index);
            return false;
        }
        s->moved_ns = now;
        r->moved = true;
        if (batch == NULL) {
            r->info.sessions_served++;
            replay_drop_session(r, index);
            return false;
        }
        r->info.batches_replayed++;
    }
    return true;
}

static void replay_pump(struct cr_actor *self, struct replay *r) {
    uint32_t i = 0;
    r->moved = false;
    while (i < r->session_count)
        if (replay_pump_session(self, r, i)) i++; /* else: slot i now holds the last one */
}

/* ------------------------------------------------------------------------ */
/* Requests */

/* Receives one whole request (all its frames).  Returns the frame count, or
 * 0 when none is waiting.  Keeps the first three frames' bytes. */
static uint32_t replay_recv_request(struct replay *r, struct replay_session *s, size_t *empty_len,
                                    uint8_t seq_be[8], size_t *seq_len) {
    uint32_t parts = 0;
    int more = 0;
    size_t more_size = sizeof(more);
    do {
        zmq_msg_t part;
        zmq_msg_init(&part);
        if (zmq_msg_recv(&part, r->router, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&part);
            return parts; /* EAGAIN before the first frame: nothing waiting */
        }
        size_t len = zmq_msg_size(&part);
        const uint8_t *data = zmq_msg_data(&part);
        if (parts == 0) {
            s->id_len = (uint8_t)(len > REPLAY_ID_MAX ? REPLAY_ID_MAX : len);
            memcpy(s->id, data, s->id_len);
        } else if (parts == 1) {
            *empty_len = len;
        } else if (parts == 2) {
            *seq_len = len;
            if (len == 8) memcpy(seq_be, data, 8);
        }
        parts++;
        zmq_getsockopt(r->router, ZMQ_RCVMORE, &more, &more_size);
        zmq_msg_close(&part);
    } while (more);
    return parts;
}

/* Opens a session for a valid request (or answers at once when full). */
static void replay_open(struct cr_actor *self, struct replay *r, const struct replay_session *req,
                        uint64_t start_seq) {
    if (r->session_count == r->sessions_max) {
        r->info.clients_dropped++;
        replay_log_drop(self, r, "too many replays in progress (replay_sessions_max)");
        if (replay_send(r, req, NULL)) r->info.sessions_served++; /* an empty replay */
        return;
    }
    struct replay_session *s = &r->sessions[r->session_count++];
    *s = *req;
    s->moved_ns = cr_runtime_now_ns(cr_actor_runtime(self));
    bool clamped = false;
    cr_replay_buffer_find_from(r->buffer, start_seq, &s->cursor, &clamped);
    if (clamped) r->info.sessions_clamped++;
}

/* Reads up to REPLAY_REQUESTS_PER_ROUND requests. */
static void replay_read_requests(struct cr_actor *self, struct replay *r) {
    for (uint32_t n = 0; n < REPLAY_REQUESTS_PER_ROUND; n++) {
        struct replay_session req = {0};
        uint8_t seq_be[8] = {0};
        size_t empty_len = 1, seq_len = 0;
        uint32_t parts = replay_recv_request(r, &req, &empty_len, seq_be, &seq_len);
        if (parts == 0) return;
        if (parts == 3 && empty_len == 0 && seq_len == 8 && req.id_len > 0) {
            uint64_t start = 0;
            for (int i = 0; i < 8; i++) start = start << 8 | seq_be[i];
            replay_open(self, r, &req, start);
            continue;
        }
        r->info.malformed_requests++;
        if (cr_log_ratelimit(&r->last_log_ns, cr_runtime_now_ns(cr_actor_runtime(self)),
                             LOG_INTERVAL_NS))
            CR_WARN("replay", "malformed replay request (%u frames; want [id, \"\", 8-byte seq])",
                    parts);
        if (req.id_len > 0 && !replay_send(r, &req, NULL)) r->info.clients_dropped++;
    }
}

/* ------------------------------------------------------------------------ */
/* Messages, wait, stats */

static void replay_keep(struct cr_actor *self, struct replay *r, cr_event_batch *batch) {
    assert(batch != NULL);
    int rc = cr_replay_buffer_push(r->buffer, batch);
    if (rc == CR_ERR_INVALID_PARAMS) {
        /* seq did not grow: the publisher restarted its numbering. */
        r->info.restarts++;
        CR_WARN("replay", "batch seq %llu is not above the newest kept: clearing the buffer",
                (unsigned long long)batch->seq);
        cr_replay_buffer_clear(r->buffer);
        rc = cr_replay_buffer_push(r->buffer, batch);
    }
    if (rc == CR_OK) return;
    r->info.oversized_batches++;
    if (cr_log_ratelimit(&r->last_log_ns, cr_runtime_now_ns(cr_actor_runtime(self)),
                         LOG_INTERVAL_NS))
        CR_WARN("replay", "batch %llu (%zu bytes) not kept: %s", (unsigned long long)batch->seq,
                batch->len, cr_strerror(rc));
    cr_event_batch_unref(batch);
}

static void replay_fill_info(struct replay *r, struct cr_replay_info *out) {
    cr_replay_buffer_stats st;
    cr_replay_buffer_get_stats(r->buffer, &st);
    *out = r->info;
    out->sessions_active = r->session_count;
    out->batches_kept = st.batch_count;
    out->bytes_kept = st.bytes;
    out->has_batches = st.batch_count > 0;
    out->oldest_seq = st.batch_count > 0 ? st.oldest_seq : 0;
    out->newest_seq = st.batch_count > 0 ? st.newest_seq : 0;
}

static void replay_handle(struct cr_actor *self, void *state, struct cr_msg *msg) {
    struct replay *r = state;
    switch (msg->type) {
    case CR_MSG_EVENT_BATCH:
        replay_keep(self, r, CR_MSG_BODY(msg, struct cr_msg_event_batch)->batch);
        return;
    case CR_MSG_WIRE:
        return; /* replay sends to no peer */
    case CR_MSG_REPLAY_INFO:
        if (msg->flags & CR_MSG_ASK) {
            replay_fill_info(r, CR_MSG_BODY(msg, struct cr_msg_replay_info)->out);
            cr_reply(msg, CR_OK);
        }
        return;
    default:
        r->unknown_messages++;
        if (cr_log_ratelimit(&r->last_log_ns, cr_runtime_now_ns(cr_actor_runtime(self)),
                             LOG_INTERVAL_NS))
            CR_WARN("replay", "message type %u from sender %u is not handled here", msg->type,
                    msg->sender);
        if (msg->flags & CR_MSG_ASK) cr_reply(msg, CR_ERR_INVALID_PARAMS);
    }
}

/* Polls the ROUTER and the wake fd; with replays in progress it does not
 * sleep, so the runtime's loop alternates one chunk per session with a
 * mailbox drain. */
static void replay_wait(struct cr_actor *self, void *state, int wake_fd, int64_t timeout_ns) {
    struct replay *r = state;
    int timeout_ms = cr_timeout_ms(timeout_ns);
    zmq_pollitem_t items[2] = {{r->router, 0, ZMQ_POLLIN, 0}, {NULL, wake_fd, ZMQ_POLLIN, 0}};
    /* Sessions that moved: no sleep.  Sessions all waiting on full queues:
     * look again soon (ZMQ says nothing when a peer's queue drains). */
    if (r->session_count > 0) timeout_ms = r->moved || timeout_ms == 0 ? 0
                                           : timeout_ms < 0 || timeout_ms > REPLAY_IDLE_POLL_MS
                                               ? REPLAY_IDLE_POLL_MS
                                               : timeout_ms;
    if (zmq_poll(items, 2, timeout_ms) < 0 && errno != EINTR)
        CR_ERROR("replay", "zmq_poll failed: %s", zmq_strerror(errno));
    if (items[0].revents & ZMQ_POLLIN) replay_read_requests(self, r);
    replay_pump(self, r);
}

static void replay_stop(struct cr_actor *self, void *state) {
    (void)self;
    struct replay *r = state;
    r->session_count = 0; /* replays in progress end without their marker */
    replay_close_sockets(r);
}

static void replay_discard(void *state, struct cr_msg *msg) {
    (void)state;
    if (msg->type == CR_MSG_EVENT_BATCH)
        cr_event_batch_unref(CR_MSG_BODY(msg, struct cr_msg_event_batch)->batch);
}

static void replay_stats(struct cr_actor *self, void *state, struct cr_actor_stats *out) {
    (void)self;
    struct cr_replay_info info;
    replay_fill_info(state, &info);
    cr_actor_stats_add(out, "sessions_total", info.sessions_served);
    cr_actor_stats_add(out, "sessions_clamped_total", info.sessions_clamped);
    cr_actor_stats_add(out, "malformed_requests_total", info.malformed_requests);
    cr_actor_stats_add(out, "clients_dropped_total", info.clients_dropped);
    cr_actor_stats_add(out, "clients_stalled_total", info.clients_stalled);
    cr_actor_stats_add(out, "batches_replayed_total", info.batches_replayed);
    cr_actor_stats_add(out, "sessions_active", info.sessions_active);
    cr_actor_stats_add(out, "batches_kept", info.batches_kept);
    cr_actor_stats_add(out, "bytes_kept", info.bytes_kept);
    cr_actor_stats_add(out, "oldest_seq", info.oldest_seq);
    cr_actor_stats_add(out, "newest_seq", info.newest_seq);
    cr_actor_stats_add(out, "restarts_total", info.restarts);
    cr_actor_stats_add(out, "oversized_batches_total", info.oversized_batches);
    cr_actor_stats_add(out, "unknown_messages_total", ((struct replay *)state)->unknown_messages);
}

static const struct cr_actor_ops replay_ops = {
    .handle = replay_handle,
    .stop = replay_stop,
    .discard = replay_discard,
    .wait = replay_wait,
    .stats = replay_stats,
    .park_fence = true, /* woken for a few messages, parks after each wake */
};

const struct cr_subsystem_def cr_replay_def = {
    .name = "replay",
    .ops = &replay_ops,
    .create = replay_create,
    .destroy = replay_destroy,
};
