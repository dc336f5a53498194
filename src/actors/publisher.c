/* The publisher actor: store events → seed-000 batches on a ZMQ PUB socket.
 *
 * It takes CR_MSG_STORE_EVENT (a chain of cr_store_events, one reference to
 * each owned), appends each event to the batch being built and drops it.  A batch goes out when it
 * holds event_batch_max events or when event_flush_us has passed since its
 * first event, as three frames [topic, seq (8-byte big-endian), payload];
 * seq starts at 0 and grows by one per batch; with --state-dir it continues
 * across restarts (src/durable/seqmark.h: numbers are claimed in blocks with
 * a durable high-water mark written before the block is used, so a crash may
 * skip numbers but never reuses one).  Each batch is encoded once:
 * the PUB send takes one reference (zero-copy), the replay actor another
 * (CR_MSG_EVENT_BATCH), and neither re-encodes it.
 *
 * The flush deadline is kept here, not in the runtime's timer heap: the
 * runtime sleeps in whole milliseconds (park rounds up), which would hold a
 * lone event up to one extra millisecond against a 1 ms default flush.  The
 * wait hook sleeps on the wake fd with ppoll, to the microsecond.
 *
 * Slow subscribers: libzmq's PUB never blocks; a subscriber whose queue is
 * at the high-water mark misses batches alone (the others still get them)
 * and sees a seq gap it can fill from the replay actor.  zmq_send failures
 * (EAGAIN, or any other error) are counted as send drops. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "rpc/curve.h"
#include "actors/subsystems.h"
#include "core/log.h"
#include "crescent/error.h"
#include "daemon/config.h"
#include "durable/seqmark.h"
#include "http/events_routes.h"
#include "msgs/event_msgs.h"
#include "msgs/store_msgs.h"
#include "runtime/stats_extra.h"

#define PUBLISHER_LINGER_MS 200 /* at shutdown, time given to the last batches */
#define LOG_INTERVAL_NS (60ull * 1000000000u)

struct publisher {
    struct cr_curve_server *curve; /* NULL: CURVE off */
    char address[CR_CONFIG_ADDRESS_MAX];
    char topic[CR_CONFIG_ADDRESS_MAX];
    size_t topic_len;
    uint32_t batch_max;
    uint64_t flush_ns;
    int send_hwm;
    const char *state_dir; /* NULL: sequence numbers restart at 0 */
    uint64_t claimed;      /* seqs below it are covered by the mark on disk */

    void *zctx;
    void *pub;
    cr_event_encoder *encoder;
    uint64_t deadline_ns; /* flush the pending batch by then; 0: none pending */
    double last_ts_s;     /* batch timestamps never go backwards */
    struct cr_actor *replay; /* from CR_MSG_WIRE; NULL: no hand-off yet */

    struct cr_publisher_info info;
    uint64_t unknown_messages;
    uint64_t last_log_ns;
};

static void publisher_close_sockets(struct publisher *p) {
    if (p->pub != NULL) zmq_close(p->pub);
    p->pub = NULL;
    if (p->zctx != NULL) zmq_ctx_term(p->zctx); /* waits for the linger period at most */
    p->zctx = NULL;
    cr_curve_server_join(p->curve); /* the context's end ended it */
    p->curve = NULL;
}

/* Opens and binds the PUB socket on the main thread, before the actor runs,
 * so a bad or busy address fails the daemon's start with a line naming it.
 * The actor's thread then owns the socket (thread creation is the full
 * barrier ZMQ asks for when a socket moves between threads). */
static int publisher_open(struct publisher *p, const struct cr_daemon_config *config) {
    int linger = PUBLISHER_LINGER_MS;
    p->zctx = zmq_ctx_new();
    p->pub = p->zctx != NULL ? zmq_socket(p->zctx, ZMQ_PUB) : NULL;
    if (p->pub == NULL ||
        zmq_setsockopt(p->pub, ZMQ_SNDHWM, &p->send_hwm, sizeof(p->send_hwm)) != 0 ||
        zmq_setsockopt(p->pub, ZMQ_LINGER, &linger, sizeof(linger)) != 0) {
        CR_ERROR("publisher", "cannot create the PUB socket: %s", zmq_strerror(errno));
        return CR_ERR_IO;
    }
    int rc = cr_curve_server_start(p->zctx, p->pub, config, "event", &p->curve);
    if (rc != CR_OK) return rc;
    if (zmq_bind(p->pub, p->address) != 0) {
        fprintf(stderr, "crescentd: cannot bind the event address %s (event_address): %s\n",
                p->address, zmq_strerror(errno));
        return CR_ERR_IO;
    }
    CR_INFO("publisher", "publishing store events on %s, topic '%s'", p->address, p->topic);
    return CR_OK;
}

static void publisher_destroy(void *state) {
    struct publisher *p = state;
    if (p == NULL) return;
    publisher_close_sockets(p); /* still open when the actor never ran */
    cr_event_encoder_destroy(p->encoder);
    free(p);
}

/* Claims seqs up to `upto` (exclusive) on disk before any of them is used.
 * One write and two fsyncs per CR_SEQMARK_BLOCK batches: the reason this
 * syscall is allowed on the publisher's path. */
static int publisher_seq_claim(struct publisher *p, uint64_t upto) {
    char err[512];
    int rc = cr_seqmark_store(p->state_dir, upto, err, sizeof(err));
    if (rc != CR_OK) {
        CR_ERROR("publisher", "%s", err);
        return rc;
    }
    p->claimed = upto;
    return CR_OK;
}

/* With --state-dir: continue from the mark the last run left. */
static int publisher_seq_resume(struct publisher *p, const struct cr_daemon_config *config) {
    char err[512];
    uint64_t mark = 0;
    p->state_dir = config->state_dir; /* the config outlives the actors */
    int rc = cr_seqmark_load(p->state_dir, &mark, err, sizeof(err));
    if (rc != CR_OK) {
        fprintf(stderr, "crescentd: %s\n", err);
        return rc;
    }
    p->info.next_seq = p->info.first_seq = mark;
    rc = publisher_seq_claim(p, mark + CR_SEQMARK_BLOCK);
    if (rc != CR_OK) {
        fprintf(stderr, "crescentd: cannot claim event sequence numbers under %s\n",
                p->state_dir);
        return rc;
    }
    if (mark > 0)
        CR_INFO("publisher", "event sequence continues at %llu (from %s/%s)",
                (unsigned long long)mark, p->state_dir, CR_SEQMARK_FILE);
    return CR_OK;
}

static int publisher_create(const struct cr_daemon_config *config, void **state_out) {
    assert(config != NULL && state_out != NULL);
    struct publisher *p = calloc(1, sizeof(*p));
    if (p == NULL) return CR_ERR_NOMEM;
    snprintf(p->address, sizeof(p->address), "%s", config->event_address);
    snprintf(p->topic, sizeof(p->topic), "%s", config->event_topic);
    p->topic_len = strlen(p->topic);
    p->batch_max = config->event_batch_max;
    p->flush_ns = (uint64_t)config->event_flush_us * 1000u;
    p->send_hwm = config->event_send_hwm > INT32_MAX ? INT32_MAX : (int)config->event_send_hwm;
    cr_event_encoder_config ec = {.max_events = p->batch_max};
    int rc = cr_event_encoder_create(&ec, &p->encoder);
    if (rc != CR_OK)
        CR_ERROR("publisher", "cannot create the event encoder (batch max %u): %s", p->batch_max,
                 cr_strerror(rc));
    if (rc == CR_OK && config->state_dir[0] != '\0') rc = publisher_seq_resume(p, config);
    if (rc == CR_OK) rc = publisher_open(p, config);
    if (rc != CR_OK) {
        publisher_destroy(p);
        return rc;
    }
    *state_out = p;
    return CR_OK;
}


/* Wall-clock seconds for the batch, never below the previous batch's. */
static double publisher_ts(struct publisher *p) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double now = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
    if (now < p->last_ts_s) now = p->last_ts_s;
    p->last_ts_s = now;
    return now;
}

/* zmq's free function for a zero-copy payload: drops its batch reference.
 * It may run on a zmq I/O thread; the reference count is atomic. */
static void batch_free_fn(void *data, void *hint) {
    (void)data;
    cr_event_batch_unref(hint);
}

static void publisher_send(struct cr_actor *self, struct publisher *p, cr_event_batch *batch) {
    uint8_t seq_be[8];
    for (int i = 0; i < 8; i++) seq_be[i] = (uint8_t)(batch->seq >> (56 - 8 * i));
    int flags = ZMQ_SNDMORE | ZMQ_DONTWAIT;
    bool ok = zmq_send(p->pub, p->topic, p->topic_len, flags) >= 0 &&
              zmq_send(p->pub, seq_be, sizeof(seq_be), flags) >= 0;
    if (ok) {
        /* Zero copy: zmq keeps a reference until every subscriber's copy is
         * written (zmq_msg_init_data mallocs its small header; one per batch). */
        zmq_msg_t msg;
        if (zmq_msg_init_data(&msg, batch->bytes, batch->len, batch_free_fn,
                              cr_event_batch_ref(batch)) != 0) {
            /* The topic and seq frames are already queued with SNDMORE: the
             * message must be completed here, or the next batch's frames
             * would be appended to it.  A copy needs no zmq header alloc. */
            cr_event_batch_unref(batch);
            ok = zmq_send(p->pub, batch->bytes, batch->len, ZMQ_DONTWAIT) >= 0;
        } else if (zmq_msg_send(&msg, p->pub, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&msg); /* calls batch_free_fn */
            ok = false;
        }
    }
    if (ok) return;
    int err = errno;
    p->info.send_drops++;
    uint64_t now = cr_runtime_now_ns(cr_actor_runtime(self));
    if (cr_log_ratelimit(&p->last_log_ns, now, LOG_INTERVAL_NS))
        CR_WARN("publisher", "batch %llu not sent: %s (%llu send drops so far)",
                (unsigned long long)batch->seq, zmq_strerror(err),
                (unsigned long long)p->info.send_drops);
}

/* Moves the caller's batch reference to the replay actor. */
static void publisher_handoff(struct publisher *p, cr_event_batch *batch) {
    struct cr_msg msg = {.type = CR_MSG_EVENT_BATCH};
    CR_MSG_BODY(&msg, struct cr_msg_event_batch)->batch = batch;
    /* cr_send waits (up to send_wait_ns) only when replay's ring is full. */
    if (p->replay != NULL && cr_send(p->replay, &msg) == CR_OK) return;
    p->info.handoff_drops++;
    cr_event_batch_unref(batch);
}

/* Finishes and sends the batch being built, if it has events. */
static void publisher_flush(struct cr_actor *self, struct publisher *p) {
    if (cr_event_encoder_event_count(p->encoder) == 0) {
        p->deadline_ns = 0;
        return;
    }
    if (p->state_dir != NULL && p->info.next_seq >= p->claimed &&
        publisher_seq_claim(p, p->info.next_seq + CR_SEQMARK_BLOCK) != CR_OK) {
        /* A number not covered by the mark could be reused after a crash:
         * hold the events and try again after another flush period. */
        p->deadline_ns = cr_runtime_now_ns(cr_actor_runtime(self)) + p->flush_ns;
        return;
    }
    cr_event_batch *batch;
    int rc = cr_event_encoder_finish(p->encoder, p->info.next_seq, publisher_ts(p), &batch);
    if (rc != CR_OK) {
        /* Out of memory: the events stay pending; try again after another flush period. */
        p->deadline_ns = cr_runtime_now_ns(cr_actor_runtime(self)) + p->flush_ns;
        CR_ERROR("publisher", "cannot finish batch %llu: %s", (unsigned long long)p->info.next_seq,
                 cr_strerror(rc));
        return;
    }
    p->deadline_ns = 0;
    p->info.next_seq++;
    p->info.batches_sent++;
    p->info.events_sent += batch->event_count;
    for (int k = 0; k < CR_STORE_EVENT_KIND_COUNT; k++)
        p->info.events_by_kind[k] += batch->event_count_by_kind[k];
    publisher_send(self, p, batch);
    publisher_handoff(p, batch);
}

static void publisher_flush_if_due(struct cr_actor *self, struct publisher *p) {
    if (p->deadline_ns != 0 && cr_runtime_now_ns(cr_actor_runtime(self)) >= p->deadline_ns)
        publisher_flush(self, p);
}

/* Encodes `event` (its chain's, borrowed) into the pending batch.
 * since_ns: when it happened (its chain's first event; 0: now). */
static void publisher_take(struct cr_actor *self, struct publisher *p,
                           const cr_store_event *event, uint64_t since_ns) {
    assert(event != NULL);
    int rc = cr_event_encoder_append(p->encoder, event);
    if (rc == CR_ERR_AGAIN) { /* full: only when a finish failed for lack of memory */
        publisher_flush(self, p);
        rc = cr_event_encoder_append(p->encoder, event);
    }
    if (rc != CR_OK) {
        p->info.encode_errors++;
        CR_ERROR("publisher", "store event dropped: %s (%llu so far)", cr_strerror(rc),
                 (unsigned long long)p->info.encode_errors);
        return;
    }
    /* The flush deadline starts when the batch's first event happened, not
     * when it got here: the time it waited for segments' lazy wake
     * (cr_send_lazy) is part of the window.  At most one clock read per batch. */
    if (cr_event_encoder_event_count(p->encoder) == 1)
        p->deadline_ns = (since_ns != 0 ? since_ns : cr_runtime_now_ns(cr_actor_runtime(self))) +
                         p->flush_ns;
    if (cr_event_encoder_is_full(p->encoder)) publisher_flush(self, p);
}

static void publisher_fill_info(struct publisher *p, struct cr_publisher_info *out) {
    *out = p->info;
    out->events_pending = cr_event_encoder_event_count(p->encoder);
}

static void publisher_handle(struct cr_actor *self, void *state, struct cr_msg *msg) {
    struct publisher *p = state;
    switch (msg->type) {
    case CR_MSG_STORE_EVENT: { /* a chain, in order */
        const struct cr_msg_store_event *body = CR_MSG_BODY(msg, struct cr_msg_store_event);
        for (const cr_store_event *event = body->chain->head; event != NULL; event = event->next)
            publisher_take(self, p, event, body->since_ns);
        cr_store_event_chain_release(body->chain);
        return;
    }
    case CR_MSG_WIRE: {
        const struct cr_subsystems *peers = msg->body.ptr[0];
        p->replay = peers->actors[CR_SUBSYSTEM_REPLAY];
        return;
    }
    case CR_MSG_PUBLISHER_INFO:
        if (msg->flags & CR_MSG_ASK) {
            publisher_fill_info(p, CR_MSG_BODY(msg, struct cr_msg_publisher_info)->out);
            cr_reply(msg, CR_OK);
        }
        return;
    default:
        p->unknown_messages++;
        if (cr_log_ratelimit(&p->last_log_ns, cr_runtime_now_ns(cr_actor_runtime(self)),
                             LOG_INTERVAL_NS))
            CR_WARN("publisher", "message type %u from sender %u is not handled here", msg->type,
                    msg->sender);
        if (msg->flags & CR_MSG_ASK) cr_reply(msg, CR_ERR_INVALID_PARAMS);
    }
}

/* The PUB socket never has input, so the wait is on the wake fd alone, cut
 * short at the flush deadline (ppoll: microsecond precision). */
static void publisher_wait(struct cr_actor *self, void *state, int wake_fd, int64_t timeout_ns) {
    struct publisher *p = state;
    publisher_flush_if_due(self, p);
    if (timeout_ns == 0) return;
    uint64_t wait_ns = timeout_ns < 0 ? UINT64_MAX : (uint64_t)timeout_ns;
    if (p->deadline_ns != 0) {
        uint64_t now = cr_runtime_now_ns(cr_actor_runtime(self));
        uint64_t left = p->deadline_ns > now ? p->deadline_ns - now : 0;
        if (left < wait_ns) wait_ns = left;
    }
    struct pollfd pfd = {.fd = wake_fd, .events = POLLIN};
    struct timespec ts = {.tv_sec = (time_t)(wait_ns / 1000000000u),
                          .tv_nsec = (long)(wait_ns % 1000000000u)};
    if (ppoll(&pfd, 1, wait_ns == UINT64_MAX ? NULL : &ts, NULL) < 0 && errno != EINTR)
        CR_ERROR("publisher", "ppoll on the wake fd failed: %s", strerror(errno));
    publisher_flush_if_due(self, p);
}

/* After the final drain: send what is pending, then close (lingering). */
static void publisher_stop(struct cr_actor *self, void *state) {
    struct publisher *p = state;
    publisher_flush(self, p);
    publisher_close_sockets(p);
}

static void publisher_discard(void *state, struct cr_msg *msg) {
    (void)state;
    if (msg->type == CR_MSG_STORE_EVENT)
        cr_store_event_chain_release(CR_MSG_BODY(msg, struct cr_msg_store_event)->chain);
}

static void publisher_stats(struct cr_actor *self, void *state, struct cr_actor_stats *out) {
    (void)self;
    struct publisher *p = state;
    cr_actor_stats_add(out, "seq", p->info.next_seq);
    cr_actor_stats_add(out, "batches_total", p->info.batches_sent);
    cr_actor_stats_add(out, "events_total", p->info.events_sent);
    cr_actor_stats_add(out, "block_store_events_total",
                       p->info.events_by_kind[CR_STORE_EVENT_BLOCK_STORE]);
    cr_actor_stats_add(out, "block_update_events_total",
                       p->info.events_by_kind[CR_STORE_EVENT_BLOCK_UPDATE]);
    cr_actor_stats_add(out, "remove_all_events_total",
                       p->info.events_by_kind[CR_STORE_EVENT_REMOVE_ALL]);
    cr_actor_stats_add(out, "events_pending", cr_event_encoder_event_count(p->encoder));
    cr_actor_stats_add(out, "send_drops_total", p->info.send_drops);
    cr_actor_stats_add(out, "encode_errors_total", p->info.encode_errors);
    cr_actor_stats_add(out, "handoff_drops_total", p->info.handoff_drops);
    cr_actor_stats_add(out, "unknown_messages_total", p->unknown_messages);
}

static const struct cr_actor_ops publisher_ops = {
    .handle = publisher_handle,
    .stop = publisher_stop,
    .discard = publisher_discard,
    .wait = publisher_wait,
    .stats = publisher_stats,
    .park_fence = true, /* woken for a few messages, parks after each wake */
};

const struct cr_subsystem_def cr_publisher_def = {
    .name = "publisher",
    .ops = &publisher_ops,
    .create = publisher_create,
    .destroy = publisher_destroy,
    .register_routes = cr_events_register_routes,
};
