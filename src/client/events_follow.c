/* Following store events: SUB first, replay, dedupe by seq (events_follow.h). */
#include "client/events_follow.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "client/client_curve.h"
#include "crescent/error.h"

#define QUEUE_INITIAL 1024u
#define REPLAY_TIMEOUT_MS_DEFAULT 5000
/* Live batches libzmq may hold unread for the follower.  A reader slower
 * than the publisher (a terminal) fills it, and the publisher then drops
 * batches for this subscriber instead of the follower's memory growing: the
 * follower sees the hole by seq, replays it, or reports it as a gap. */
#define LIVE_RCVHWM 10000

static const uint8_t FF8[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

struct live_batch {
    uint64_t seq;
    zmq_msg_t payload;
};

enum source { FROM_LIVE, FROM_REPLAY };

struct cr_events_follower {
    void *zctx;
    void *sub;
    void *dealer;  /* NULL without a replay endpoint; a new one per replay round */
    char *replay_endpoint;
    int replay_timeout_ms;
    bool verify;   /* this round starts at the last delivered batch, to compare it */

    bool replaying;          /* a replay round is in progress */
    uint64_t replay_last_ms; /* when the round last made progress */
    bool repair_tried;       /* a replay was already asked for `repaired_for` */
    uint64_t repaired_for;

    bool have_next;
    uint64_t next; /* next seq to deliver */
    bool have_ts;
    double last_ts; /* ts of the last batch delivered */

    /* Live batches waiting (during a replay, or put back for a repair). */
    struct live_batch *queue;
    uint32_t head, count, cap, cap_max;

    bool held; /* `pending` waits behind a notice just returned */
    struct live_batch pending;
    enum source pending_source;

    bool current_valid; /* the payload the last BATCH item points into */
    zmq_msg_t current;
};

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static uint64_t be64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | p[i];
    return v;
}

/* The batch's ts: [ts, events] starts 0x92 0xcb and 8 bytes of float64. */
static bool payload_ts(const zmq_msg_t *payload, double *ts_out) {
    const uint8_t *p = zmq_msg_data((zmq_msg_t *)payload);
    if (zmq_msg_size((zmq_msg_t *)payload) < 10 || p[0] != 0x92 || p[1] != 0xcb) return false;
    uint64_t bits = be64(p + 2);
    double ts;
    memcpy(&ts, &bits, sizeof(ts));
    if (!isfinite(ts)) return false;
    *ts_out = ts;
    return true;
}

/* ------------------------------------------------------------------------ */
/* The live queue: a growing ring, bounded by cap_max. */

static int queue_grow(cr_events_follower *f) {
    if (f->cap == f->cap_max) return CR_ERR_NOMEM;
    uint32_t cap = f->cap == 0 ? QUEUE_INITIAL : f->cap * 2;
    if (cap > f->cap_max) cap = f->cap_max;
    struct live_batch *q = malloc((size_t)cap * sizeof(*q));
    if (q == NULL) return CR_ERR_NOMEM;
    for (uint32_t i = 0; i < f->count; i++) q[i] = f->queue[(f->head + i) % f->cap];
    free(f->queue);
    f->queue = q;
    f->head = 0;
    f->cap = cap;
    return CR_OK;
}

/* Moves *b (its payload) into the queue, at the front or the back. */
static int queue_put(cr_events_follower *f, struct live_batch *b, bool front) {
    if (f->count == f->cap) {
        int rc = queue_grow(f);
        if (rc != CR_OK) return rc;
    }
    uint32_t slot;
    if (front) {
        f->head = (f->head + f->cap - 1) % f->cap;
        slot = f->head;
    } else {
        slot = (f->head + f->count) % f->cap;
    }
    f->queue[slot].seq = b->seq;
    zmq_msg_init(&f->queue[slot].payload);
    zmq_msg_move(&f->queue[slot].payload, &b->payload);
    f->count++;
    return CR_OK;
}

static void queue_take(cr_events_follower *f, struct live_batch *out) {
    assert(f->count > 0);
    out->seq = f->queue[f->head].seq;
    zmq_msg_move(&out->payload, &f->queue[f->head].payload);
    zmq_msg_close(&f->queue[f->head].payload);
    f->head = (f->head + 1) % f->cap;
    f->count--;
}

/* ------------------------------------------------------------------------ */
/* Receiving */

/* Receives one message of up to 4 frames into parts[]; returns the frame
 * count (frames past 4 are read and dropped), or -1 with errno. */
static int recv_parts(void *sock, zmq_msg_t parts[4]) {
    int n = 0, more = 0;
    size_t more_size = sizeof(more);
    do {
        zmq_msg_t msg;
        zmq_msg_init(&msg);
        if (zmq_msg_recv(&msg, sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&msg);
            if (n == 0) return -1;
            continue; /* the rest of a multipart message is always there */
        }
        if (n < 4) {
            zmq_msg_init(&parts[n]);
            zmq_msg_move(&parts[n], &msg);
        }
        zmq_msg_close(&msg);
        n++;
        zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &more_size);
    } while (more);
    return n;
}

static void close_parts(zmq_msg_t parts[4], int n) {
    for (int i = 0; i < n && i < 4; i++) zmq_msg_close(&parts[i]);
}

/* Live: [topic, seq, payload]. */
static int recv_live(cr_events_follower *f, struct live_batch *out) {
    zmq_msg_t parts[4];
    int n = recv_parts(f->sub, parts);
    if (n < 0) return errno == EAGAIN ? CR_ERR_AGAIN : CR_ERR_IO;
    int rc = CR_ERR_PROTOCOL;
    if (n == 3 && zmq_msg_size(&parts[1]) == 8) {
        out->seq = be64(zmq_msg_data(&parts[1]));
        zmq_msg_init(&out->payload);
        zmq_msg_move(&out->payload, &parts[2]);
        rc = CR_OK;
    }
    close_parts(parts, n);
    return rc;
}

/* Replay: ["", seq, payload]; CR_ERR_SHUTDOWN reports the end marker. */
static int recv_replay(cr_events_follower *f, struct live_batch *out) {
    zmq_msg_t parts[4];
    int n = recv_parts(f->dealer, parts);
    if (n < 0) return errno == EAGAIN ? CR_ERR_AGAIN : CR_ERR_IO;
    int rc = CR_ERR_PROTOCOL;
    if (n == 3 && zmq_msg_size(&parts[0]) == 0 && zmq_msg_size(&parts[1]) == 8) {
        bool seq_ff = memcmp(zmq_msg_data(&parts[1]), FF8, 8) == 0;
        bool payload_ff =
            zmq_msg_size(&parts[2]) == 8 && memcmp(zmq_msg_data(&parts[2]), FF8, 8) == 0;
        if (seq_ff || payload_ff) {
            rc = CR_ERR_SHUTDOWN;
        } else {
            out->seq = be64(zmq_msg_data(&parts[1]));
            zmq_msg_init(&out->payload);
            zmq_msg_move(&out->payload, &parts[2]);
            rc = CR_OK;
        }
    }
    close_parts(parts, n);
    return rc;
}

/* A fresh DEALER per round: replies still in flight for an abandoned round
 * are discarded with the old socket instead of being read as this round's. */
static int new_dealer(cr_events_follower *f) {
    int zero = 0;
    if (f->dealer != NULL) zmq_close(f->dealer);
    f->dealer = zmq_socket(f->zctx, ZMQ_DEALER);
    if (f->dealer == NULL) return CR_ERR_IO;
    zmq_setsockopt(f->dealer, ZMQ_LINGER, &zero, sizeof(zero));
    char error[256];
    if (cr_curve_client_setup(f->dealer, NULL, error, sizeof(error)) != CR_OK)
        return CR_ERR_INVALID_PARAMS; /* the SUB's setup already said why */
    return zmq_connect(f->dealer, f->replay_endpoint) == 0 ? CR_OK : CR_ERR_INVALID_PARAMS;
}

static int send_replay_request(cr_events_follower *f, uint64_t start_seq) {
    int rc = new_dealer(f);
    if (rc != CR_OK) return rc;
    uint8_t seq_be[8];
    for (int i = 0; i < 8; i++) seq_be[i] = (uint8_t)(start_seq >> (56 - 8 * i));
    if (zmq_send(f->dealer, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
        zmq_send(f->dealer, seq_be, 8, ZMQ_DONTWAIT) < 0)
        return CR_ERR_IO;
    f->replaying = true;
    f->replay_last_ms = now_ms();
    f->repair_tried = true;
    f->repaired_for = start_seq;
    return CR_OK;
}

/* ------------------------------------------------------------------------ */
/* Deciding what a batch is: deliver, skip, notice first, or repair first. */

enum verdict { DELIVERED, SKIPPED, NOTICE, REPAIRING };

static void deliver(cr_events_follower *f, struct live_batch *b, cr_events_item *item) {
    double ts;
    if (payload_ts(&b->payload, &ts)) {
        f->last_ts = ts;
        f->have_ts = true;
    }
    f->have_next = true;
    f->next = b->seq + 1;
    if (f->current_valid) zmq_msg_close(&f->current);
    zmq_msg_init(&f->current);
    zmq_msg_move(&f->current, &b->payload);
    zmq_msg_close(&b->payload);
    f->current_valid = true;
    *item = (cr_events_item){.kind = CR_EVENTS_ITEM_BATCH,
                             .seq = b->seq,
                             .payload = zmq_msg_data(&f->current),
                             .len = zmq_msg_size(&f->current)};
}

/* Holds *b behind a notice; it is delivered on the next call. */
static enum verdict notice(cr_events_follower *f, struct live_batch *b, enum source src,
                           cr_events_item *item, cr_events_item_kind kind, uint64_t first,
                           uint64_t last) {
    *item = (cr_events_item){.kind = kind, .seq = b->seq, .gap_first = first, .gap_last = last};
    f->next = b->seq; /* the held batch passes on the next call */
    f->have_ts = false;
    f->held = true;
    f->pending.seq = b->seq;
    zmq_msg_init(&f->pending.payload);
    zmq_msg_move(&f->pending.payload, &b->payload);
    zmq_msg_close(&b->payload);
    f->pending_source = src;
    return NOTICE;
}

static enum verdict consider_behind(cr_events_follower *f, struct live_batch *b, enum source src,
                                    cr_events_item *item) {
    double ts;
    /* Newer than everything delivered but numbered lower: a new crescentd. */
    if (src == FROM_LIVE && f->have_ts && payload_ts(&b->payload, &ts) && ts > f->last_ts) {
        uint64_t last = f->next - 1;
        /* With a replay, the new life is delivered from 0: the batch waits in
         * front of the queue and its seq above 0 starts a replay from 0. */
        if (f->dealer == NULL || queue_put(f, b, true) != CR_OK)
            return notice(f, b, src, item, CR_EVENTS_ITEM_RESTART, last, b->seq);
        *item = (cr_events_item){.kind = CR_EVENTS_ITEM_RESTART, .gap_first = last,
                                 .seq = f->queue[f->head].seq};
        f->next = 0;
        f->have_ts = false;
        f->repair_tried = false;
        return NOTICE;
    }
    zmq_msg_close(&b->payload); /* a duplicate */
    return SKIPPED;
}

/* A live batch ahead of `next`: batches are missing, or crescentd restarted
 * and its new numbering happens to be ahead.  Ask the replay once per gap,
 * from the last delivered batch when there is one, so its first answer
 * tells the two apart (verify_verdict).  The live batch waits at the front
 * of the queue.  Returns false when no repair is possible. */
static bool start_repair(cr_events_follower *f, struct live_batch *b) {
    if (f->dealer == NULL || (f->repair_tried && f->repaired_for == f->next)) return false;
    uint64_t from = f->have_ts && f->next > 0 ? f->next - 1 : f->next;
    if (queue_put(f, b, true) != CR_OK) return false;
    if (send_replay_request(f, from) != CR_OK) {
        queue_take(f, b);
        return false;
    }
    f->repaired_for = f->next;
    f->verify = from != f->next;
    return true;
}

static enum verdict consider(cr_events_follower *f, struct live_batch *b, enum source src,
                             cr_events_item *item) {
    if (!f->have_next || b->seq == f->next) {
        deliver(f, b, item);
        return DELIVERED;
    }
    if (b->seq < f->next) return consider_behind(f, b, src, item);
    if (src == FROM_LIVE && start_repair(f, b)) return REPAIRING;
    return notice(f, b, src, item, CR_EVENTS_ITEM_GAP, f->next, b->seq - 1);
}

/* ------------------------------------------------------------------------ */

int cr_events_follow_create(const cr_events_follow_config *config, cr_events_follower **out) {
    if (config == NULL || out == NULL || config->sub_endpoint == NULL ||
        (config->replay_from_start && config->replay_endpoint == NULL))
        return CR_ERR_INVALID_PARAMS;
    cr_events_follower *f = calloc(1, sizeof(*f));
    if (f == NULL) return CR_ERR_NOMEM;
    const char *topic = config->topic != NULL ? config->topic : "mooncake";
    f->cap_max = config->live_buffer_max ? config->live_buffer_max : CR_EVENTS_LIVE_BUFFER_DEFAULT;
    f->replay_timeout_ms = config->replay_timeout_ms > 0 ? config->replay_timeout_ms
                                                         : REPLAY_TIMEOUT_MS_DEFAULT;
    int zero = 0, hwm = LIVE_RCVHWM, rc = CR_ERR_INVALID_PARAMS;
    f->zctx = zmq_ctx_new();
    f->sub = f->zctx != NULL ? zmq_socket(f->zctx, ZMQ_SUB) : NULL;
    if (f->sub == NULL) {
        rc = CR_ERR_IO;
        goto fail;
    }
    zmq_setsockopt(f->sub, ZMQ_LINGER, &zero, sizeof(zero));
    if (zmq_setsockopt(f->sub, ZMQ_RCVHWM, &hwm, sizeof(hwm)) != 0) {
        rc = CR_ERR_IO;
        goto fail;
    }
    char error[256];
    if (cr_curve_client_setup(f->sub, NULL, error, sizeof(error)) != CR_OK) {
        fprintf(stderr, "crescent events: %s\n", error);
        goto fail;
    }
    /* Subscribe first: whatever is published from now on is either seen live or replayed. */
    if (zmq_setsockopt(f->sub, ZMQ_SUBSCRIBE, topic, strlen(topic)) != 0 ||
        zmq_connect(f->sub, config->sub_endpoint) != 0)
        goto fail;
    if (config->replay_endpoint != NULL) {
        f->replay_endpoint = strdup(config->replay_endpoint);
        rc = f->replay_endpoint != NULL ? new_dealer(f) : CR_ERR_NOMEM;
        if (rc != CR_OK) goto fail;
        rc = CR_ERR_INVALID_PARAMS;
    }
    if (config->replay_from_start) {
        f->have_next = true;
        f->next = config->start_seq;
        rc = send_replay_request(f, config->start_seq);
        if (rc != CR_OK) goto fail;
    }
    *out = f;
    return CR_OK;
fail:
    cr_events_follow_destroy(f);
    return rc;
}

void cr_events_follow_destroy(cr_events_follower *f) {
    if (f == NULL) return;
    while (f->count > 0) {
        struct live_batch b;
        zmq_msg_init(&b.payload);
        queue_take(f, &b);
        zmq_msg_close(&b.payload);
    }
    free(f->queue);
    if (f->held) zmq_msg_close(&f->pending.payload);
    if (f->current_valid) zmq_msg_close(&f->current);
    if (f->dealer != NULL) zmq_close(f->dealer);
    if (f->sub != NULL) zmq_close(f->sub);
    free(f->replay_endpoint);
    if (f->zctx != NULL) zmq_ctx_term(f->zctx);
    free(f);
}

/* The first answer of a verify round (it started at next - 1): the last
 * delivered batch again with the same ts, or a later batch not older than it
 * (the buffer evicted ours), means the same crescentd: the round goes on.
 * A different ts, or the end marker first (nothing at or above next - 1),
 * means a new crescentd numbered from 0: report the restart and deliver its
 * batches from 0 (the queued live batch triggers a replay from 0). */
static int verify_verdict(cr_events_follower *f, struct live_batch *b, int rc,
                          cr_events_item *item) {
    f->verify = false;
    double ts = 0;
    bool has_ts = rc == CR_OK && payload_ts(&b->payload, &ts);
    if (has_ts && b->seq == f->next - 1 && ts == f->last_ts) {
        zmq_msg_close(&b->payload); /* delivered already */
        return SKIPPED;
    }
    if (has_ts && b->seq > f->next - 1 && ts >= f->last_ts)
        return (int)consider(f, b, FROM_REPLAY, item);
    if (rc == CR_OK) zmq_msg_close(&b->payload);
    *item = (cr_events_item){.kind = CR_EVENTS_ITEM_RESTART, .gap_first = f->next - 1,
                             .seq = f->count > 0 ? f->queue[f->head].seq : 0};
    f->replaying = false;
    f->next = 0;
    f->have_ts = false;
    f->repair_tried = false;
    return NOTICE;
}

/* One step of a replay round: wait on both sockets; live batches are
 * queued, replayed ones considered.  Returns a verdict (≥ 0), -1 when
 * nothing happened within wait_ms, or an error status (all below -1). */
static int replay_step(cr_events_follower *f, int wait_ms, cr_events_item *item) {
    zmq_pollitem_t items[2] = {{f->sub, 0, ZMQ_POLLIN, 0}, {f->dealer, 0, ZMQ_POLLIN, 0}};
    if (zmq_poll(items, 2, wait_ms) < 0) return errno == EINTR ? -1 : CR_ERR_IO;
    struct live_batch b;
    if (items[0].revents & ZMQ_POLLIN) {
        int rc = recv_live(f, &b);
        if (rc == CR_OK && queue_put(f, &b, false) != CR_OK) {
            zmq_msg_close(&b.payload);
            f->replaying = false; /* give up the round: memory bounds it */
            return CR_ERR_NOMEM;
        }
        if (rc == CR_ERR_PROTOCOL) return rc;
    }
    if (!(items[1].revents & ZMQ_POLLIN)) return -1;
    int rc = recv_replay(f, &b);
    if (rc == CR_ERR_AGAIN) return -1;
    f->replay_last_ms = now_ms();
    if (f->verify && (rc == CR_OK || rc == CR_ERR_SHUTDOWN)) return verify_verdict(f, &b, rc, item);
    if (rc == CR_ERR_SHUTDOWN) {
        f->replaying = false;
        return SKIPPED;
    }
    if (rc != CR_OK) return rc;
    return (int)consider(f, &b, FROM_REPLAY, item);
}

static int live_step(cr_events_follower *f, int wait_ms, cr_events_item *item) {
    struct live_batch b;
    zmq_msg_init(&b.payload);
    if (f->count > 0) {
        queue_take(f, &b);
        return (int)consider(f, &b, FROM_LIVE, item);
    }
    zmq_msg_close(&b.payload);
    zmq_pollitem_t poll_item = {f->sub, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&poll_item, 1, wait_ms) < 0) return errno == EINTR ? -1 : CR_ERR_IO;
    if (!(poll_item.revents & ZMQ_POLLIN)) return -1;
    int rc = recv_live(f, &b);
    if (rc == CR_ERR_AGAIN) return -1;
    if (rc != CR_OK) return rc;
    return (int)consider(f, &b, FROM_LIVE, item);
}

int cr_events_follow_next(cr_events_follower *f, int timeout_ms, cr_events_item *item) {
    assert(f != NULL && item != NULL);
    if (f->held) {
        f->held = false;
        struct live_batch b = {.seq = f->pending.seq};
        zmq_msg_init(&b.payload);
        zmq_msg_move(&b.payload, &f->pending.payload);
        zmq_msg_close(&f->pending.payload);
        deliver(f, &b, item);
        return CR_OK;
    }
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        uint64_t now = now_ms();
        int wait_ms = deadline == UINT64_MAX ? 100 : (now >= deadline ? 0 : (int)(deadline - now));
        if (wait_ms > 100) wait_ms = 100; /* re-check the replay stall */
        int v = f->replaying ? replay_step(f, wait_ms, item) : live_step(f, wait_ms, item);
        if (v == DELIVERED || v == NOTICE) return CR_OK;
        if (v < -1) return v; /* an error status */
        if (v != -1) continue;
        /* A replay has stalled only when a look at its socket that began
         * after the bound had passed found nothing.  Judged before the look,
         * or by a look that began earlier, the time the caller spent away
         * from us (a reader whose stdout was full, a stopped process) was
         * charged to a replay whose answer was already waiting. */
        if (f->replaying && now >= f->replay_last_ms &&
            now - f->replay_last_ms >= (uint64_t)f->replay_timeout_ms) {
            f->replaying = false; /* the replay stalled: follow live, report gaps */
            return CR_ERR_TIMEOUT;
        }
        now = now_ms();
        if (now >= deadline) return CR_ERR_TIMEOUT;
    }
}
