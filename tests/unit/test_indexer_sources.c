/* Unit tests for the indexer's publisher side (src/actors/indexer_sources.c):
 * replay rounds, their no-progress timeout, duplicates versus restarts after
 * a replay, and registrations that fail.  The indexer's state is driven on
 * this thread (indexer_wait), fed by a fake engine -- a PUB and a replay
 * ROUTER on inproc endpoints of the indexer's own ZMQ context -- and its
 * clock (st->now_ns) is moved by hand, so timeouts are tested without
 * sleeping.  Waits for ZMQ delivery are bounded polls. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <msgpack.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <zmq.h>

#include "actors/indexer_internal.h"
#include "actors/subsystems.h"
#include "crescent/error.h"
#include "daemon/config.h"

#define BS 4u
#define SEC 1000000000ull
#define TS_OLD 1700000000.0 /* the engine's batches before it restarts */
#define TS_NEW 1700000600.0 /* after: ten minutes later */

struct fx {
    struct indexer_state *st;
    void *pub, *router;
    char pub_ep[64], router_ep[64];
    int wake_fd;
    uint64_t next_seq; /* the engine's next live seq */
    msgpack_sbuffer buf;
    msgpack_packer pk;
    uint8_t ident[256]; /* the ROUTER identity of the last replay request */
    size_t ident_len;
};

static int setup(void **state) {
    static unsigned n;
    struct fx *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    struct cr_daemon_config config;
    cr_daemon_config_default(&config);
    config.indexer_config[0] = '\0';
    unsetenv("CONDUCTOR_CONFIG_PATH");
    void *st;
    assert_int_equal(cr_indexer_def.create(&config, &st), CR_OK);
    f->st = st;
    f->st->now_ns = 1000 * SEC;
    f->wake_fd = eventfd(0, EFD_NONBLOCK);
    assert_true(f->wake_fd >= 0);
    n++;
    snprintf(f->pub_ep, sizeof(f->pub_ep), "inproc://engine-pub-%u", n);
    snprintf(f->router_ep, sizeof(f->router_ep), "inproc://engine-replay-%u", n);
    int zero = 0;
    f->pub = zmq_socket(f->st->zmq, ZMQ_PUB);
    f->router = zmq_socket(f->st->zmq, ZMQ_ROUTER);
    assert_non_null(f->pub);
    assert_non_null(f->router);
    zmq_setsockopt(f->pub, ZMQ_LINGER, &zero, sizeof(zero));
    zmq_setsockopt(f->router, ZMQ_LINGER, &zero, sizeof(zero));
    assert_int_equal(zmq_bind(f->pub, f->pub_ep), 0);
    assert_int_equal(zmq_bind(f->router, f->router_ep), 0);
    msgpack_sbuffer_init(&f->buf);
    msgpack_packer_init(&f->pk, &f->buf, msgpack_sbuffer_write);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    struct fx *f = *state;
    indexer_sources_close(f->st);
    zmq_close(f->pub);
    zmq_close(f->router);
    cr_indexer_def.destroy(f->st);
    close(f->wake_fd);
    msgpack_sbuffer_destroy(&f->buf);
    free(f);
    return 0;
}

/* ---- the fake engine ---- */

static void pk_str(msgpack_packer *pk, const char *s) {
    msgpack_pack_str(pk, strlen(s));
    msgpack_pack_str_body(pk, s, strlen(s));
}

/* [ts, [["BlockStored", [hash], nil, tokens, BS, nil, nil, nil]], nil]; no
 * event when hash is 0.  The same arguments give the same bytes. */
static void build_batch(struct fx *f, double ts, uint64_t hash) {
    msgpack_sbuffer_clear(&f->buf);
    msgpack_pack_array(&f->pk, 3);
    msgpack_pack_double(&f->pk, ts);
    msgpack_pack_array(&f->pk, hash != 0 ? 1 : 0);
    if (hash != 0) {
        msgpack_pack_array(&f->pk, 8);
        pk_str(&f->pk, "BlockStored");
        msgpack_pack_array(&f->pk, 1);
        msgpack_pack_uint64(&f->pk, hash);
        msgpack_pack_nil(&f->pk);
        msgpack_pack_array(&f->pk, BS);
        for (uint32_t i = 0; i < BS; i++) msgpack_pack_uint32(&f->pk, (uint32_t)hash * 10 + i);
        msgpack_pack_uint32(&f->pk, BS);
        msgpack_pack_nil(&f->pk);
        msgpack_pack_nil(&f->pk);
        msgpack_pack_nil(&f->pk);
    }
    msgpack_pack_nil(&f->pk);
}

static void be64_put(uint8_t *p, uint64_t v) {
    for (int i = 7; i >= 0; i--, v >>= 8) p[i] = (uint8_t)v;
}

/* Publishes [topic "", seq, batch] live. */
static void publish(struct fx *f, uint64_t seq, double ts, uint64_t hash) {
    uint8_t seq_be[8];
    be64_put(seq_be, seq);
    build_batch(f, ts, hash);
    assert_int_equal(zmq_send(f->pub, "", 0, ZMQ_SNDMORE), 0);
    assert_int_equal(zmq_send(f->pub, seq_be, 8, ZMQ_SNDMORE), 8);
    assert_int_equal(zmq_send(f->pub, f->buf.data, f->buf.size, 0), (int)f->buf.size);
}

/* Answers on the ROUTER to `ident`: [id, "", seq, batch], vLLM's layout. */
static void reply_to(struct fx *f, const uint8_t *ident, size_t ident_len, uint64_t seq,
                     double ts, uint64_t hash) {
    uint8_t seq_be[8];
    be64_put(seq_be, seq);
    build_batch(f, ts, hash);
    zmq_send(f->router, ident, ident_len, ZMQ_SNDMORE);
    zmq_send(f->router, "", 0, ZMQ_SNDMORE);
    zmq_send(f->router, seq_be, 8, ZMQ_SNDMORE);
    zmq_send(f->router, f->buf.data, f->buf.size, 0);
}

/* The end marker [id, "", FF*8, ""]. */
static void end_to(struct fx *f, const uint8_t *ident, size_t ident_len) {
    static const uint8_t ff[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    zmq_send(f->router, ident, ident_len, ZMQ_SNDMORE);
    zmq_send(f->router, "", 0, ZMQ_SNDMORE);
    zmq_send(f->router, ff, 8, ZMQ_SNDMORE);
    zmq_send(f->router, "", 0, 0);
}

static void reply(struct fx *f, uint64_t seq, double ts, uint64_t hash) {
    reply_to(f, f->ident, f->ident_len, seq, ts, hash);
}

static uint64_t real_ms(void);

/* Runs the indexer (bounded: 2 s) until a replay request reaches the
 * engine; keeps the requester's identity and returns the seq it asks from. */
static uint64_t replay_request(struct fx *f) {
    zmq_pollitem_t item = {.socket = f->router, .events = ZMQ_POLLIN};
    uint64_t until = real_ms() + 2000;
    while (zmq_poll(&item, 1, 0) == 0 && real_ms() < until)
        indexer_wait(f->st, f->wake_fd, 2);
    assert_int_equal(zmq_poll(&item, 1, 0), 1);
    int len = zmq_recv(f->router, f->ident, sizeof(f->ident), 0);
    assert_true(len > 0 && (size_t)len <= sizeof(f->ident));
    f->ident_len = (size_t)len;
    uint8_t frame[16];
    assert_int_equal(zmq_recv(f->router, frame, sizeof(frame), 0), 0); /* the delimiter */
    assert_int_equal(zmq_recv(f->router, frame, sizeof(frame), 0), 8);
    uint64_t start = 0;
    for (int i = 0; i < 8; i++) start = start << 8 | frame[i];
    return start;
}

/* ---- the indexer ---- */

static struct indexer_source *source(struct fx *f) {
    for (uint32_t i = 0; i < CR_INDEXER_SOURCES_MAX; i++)
        if (f->st->sources[i].used) return &f->st->sources[i];
    fail_msg("no source registered");
    return NULL;
}

static struct cr_indexer_registration registration(struct fx *f, const char *instance) {
    struct cr_indexer_registration reg = {.dp_rank = 0, .block_size = BS};
    snprintf(reg.instance_id, sizeof(reg.instance_id), "%s", instance);
    snprintf(reg.tenant_id, sizeof(reg.tenant_id), "default");
    snprintf(reg.endpoint, sizeof(reg.endpoint), "%s", f->pub_ep);
    snprintf(reg.replay_endpoint, sizeof(reg.replay_endpoint), "%s", f->router_ep);
    snprintf(reg.type, sizeof(reg.type), "vLLM");
    snprintf(reg.model, sizeof(reg.model), "m");
    return reg;
}

static uint64_t real_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Runs the indexer's wait hook until cond holds (at most 2 s of real time:
 * inproc delivery takes microseconds). */
#define PUMP_UNTIL(f, cond)                                                                        \
    do {                                                                                           \
        uint64_t until_ = real_ms() + 2000;                                                        \
        while (!(cond) && real_ms() < until_) indexer_wait((f)->st, (f)->wake_fd, 2);             \
        assert_true(cond);                                                                         \
    } while (0)

/* Runs the wait hook a few rounds: for checks that something did NOT happen
 * (what is already queued on inproc is read in the first round). */
static void pump_idle(struct fx *f) {
    for (int i = 0; i < 5; i++) indexer_wait(f->st, f->wake_fd, 2);
}

/* Registers the engine (which holds no batch yet: its first-subscribe
 * replay from seq 0 gets the end marker alone) and publishes empty batches
 * until the SUB takes them (a SUB joins asynchronously; what it missed is
 * a gap from seq 0, answered here too).  Counters are zeroed, so tests
 * count from a connected engine.  Returns the last seq taken. */
static uint64_t connect_engine(struct fx *f) {
    struct cr_indexer_registration reg = registration(f, "e");
    char error[CR_INDEXER_ERROR_MAX];
    assert_int_equal(indexer_source_add(f->st, &reg, error, sizeof(error)), CR_OK);
    struct indexer_source *s = source(f);
    assert_true(s->replaying);
    assert_int_equal(replay_request(f), 0); /* first subscribe: everything it holds */
    end_to(f, f->ident, f->ident_len);
    PUMP_UNTIL(f, !s->replaying);
    assert_false(s->have_seq);
    uint64_t until = real_ms() + 2000;
    while (!s->have_seq && real_ms() < until) {
        publish(f, f->next_seq++, TS_OLD, 0);
        for (int i = 0; i < 5 && !s->have_seq; i++) indexer_wait(f->st, f->wake_fd, 2);
        if (s->replaying) { /* the SUB joined after seq 0 */
            for (uint64_t q = replay_request(f); q < f->next_seq; q++) reply(f, q, TS_OLD, 0);
            end_to(f, f->ident, f->ident_len);
            PUMP_UNTIL(f, !s->replaying);
        }
    }
    PUMP_UNTIL(f, s->have_seq && s->last_seq == f->next_seq - 1);
    assert_false(s->stale);
    memset(&s->counters, 0, sizeof(s->counters));
    return s->last_seq;
}

/* Tokens matched for the block of `hash` (see build_batch) at instance "e". */
static uint32_t held(struct fx *f, uint64_t hash) {
    struct cr_prefix_context_key key = {.tenant = "default", .model = "m", .block_size = BS};
    uint32_t tokens[BS];
    for (uint32_t i = 0; i < BS; i++) tokens[i] = (uint32_t)hash * 10 + i;
    const struct cr_prefix_match *m;
    size_t count;
    assert_int_equal(
        cr_prefix_index_query_tokens(f->st->index, &key, tokens, BS, NULL, 0, &m, &count), CR_OK);
    return count == 1 ? m[0].longest_tokens : 0;
}

/* A gap: seqs last+1 .. last+lost are lost, last+lost+1 is published and
 * starts a replay, asked from last+1. */
static void open_gap(struct fx *f, uint64_t last, uint64_t lost, double ts) {
    f->next_seq = last + lost + 2;
    publish(f, last + lost + 1, ts, last + lost + 1);
    PUMP_UNTIL(f, source(f)->replaying);
    assert_int_equal(replay_request(f), last + 1);
}

/* ---- replay rounds ---- */

/* A replay that keeps delivering is not cut short, however long it takes
 * in all: the timeout counts from the last message received. */
static void test_long_replay_that_progresses_is_not_abandoned(void **state) {
    struct fx *f = *state;
    uint64_t last = connect_engine(f);
    struct indexer_source *s = source(f);
    open_gap(f, last, 5, TS_OLD); /* last+1 .. last+5 lost */
    for (uint64_t i = 1; i <= 5; i++) {
        f->st->now_ns += 3 * SEC / 2; /* 7.5 s in all, 1.5 s between messages */
        reply(f, last + i, TS_OLD, last + i);
        PUMP_UNTIL(f, s->counters.replayed == i || !s->replaying);
        assert_true(s->replaying);
    }
    end_to(f, f->ident, f->ident_len);
    PUMP_UNTIL(f, !s->replaying);
    assert_false(s->stale);
    assert_int_equal(s->counters.replay_timeouts, 0);
    assert_int_equal(s->counters.replays, 1);
    assert_int_equal(s->last_seq, last + 6);
    assert_null(s->dealer); /* the round's DEALER is closed with it */
    for (uint64_t i = 1; i <= 6; i++) assert_int_equal(held(f, last + i), BS);
}

/* A round that stalls after progress is asked again at once from the
 * first missing seq; rounds that bring nothing are asked again after a
 * doubling wait, and after CR_INDEXER_REPLAY_TRIES of them the replay is
 * abandoned: the publisher marked stale with the seqs missed, and the
 * batch that revealed the gap applied. */
static void test_stalled_replay_is_retried_then_abandoned(void **state) {
    struct fx *f = *state;
    uint64_t last = connect_engine(f);
    struct indexer_source *s = source(f);
    open_gap(f, last, 3, TS_OLD); /* last+1 .. last+3 lost */
    f->st->now_ns += SEC;
    reply(f, last + 1, TS_OLD, last + 1);
    PUMP_UNTIL(f, s->counters.replayed == 1);
    /* Past the start's deadline, not the reply's: the round goes on. */
    f->st->now_ns += CR_INDEXER_REPLAY_TIMEOUT_NS - 1;
    pump_idle(f);
    assert_int_equal(s->counters.replay_rounds, 1);
    f->st->now_ns += 1;
    pump_idle(f);
    assert_int_equal(replay_request(f), last + 2); /* at once: the round had progressed */
    for (uint32_t fails = 1; fails <= CR_INDEXER_REPLAY_TRIES; fails++) {
        assert_true(s->replaying);
        f->st->now_ns += CR_INDEXER_REPLAY_TIMEOUT_NS; /* this round stalls */
        pump_idle(f);
        if (fails == CR_INDEXER_REPLAY_TRIES) break;
        assert_null(s->dealer); /* waiting out the backoff */
        f->st->now_ns += (CR_INDEXER_REPLAY_BACKOFF_NS << (fails - 1)) - 1;
        pump_idle(f);
        assert_null(s->dealer);
        f->st->now_ns += 1;
        pump_idle(f);
        assert_int_equal(replay_request(f), last + 2);
    }
    PUMP_UNTIL(f, !s->replaying);
    assert_true(s->stale);
    assert_non_null(strstr(s->stale_reason, "unanswered"));
    assert_int_equal(s->counters.replay_timeouts, CR_INDEXER_REPLAY_TRIES + 1);
    assert_int_equal(s->counters.replays_abandoned, 1);
    assert_int_equal(s->lost_count, 1);
    assert_int_equal(s->lost[0].first, last + 2);
    assert_int_equal(s->lost[0].last, last + 3);
    assert_null(s->dealer);
    assert_int_equal(s->last_seq, last + 4);
    assert_int_equal(held(f, last + 1), BS);
    assert_int_equal(held(f, last + 4), BS);
}

/* Replies still in flight for an earlier round must not be read by the
 * next round, which has a DEALER of its own. */
static void test_late_replies_do_not_reach_the_next_round(void **state) {
    struct fx *f = *state;
    uint64_t last = connect_engine(f);
    struct indexer_source *s = source(f);
    open_gap(f, last, 1, TS_OLD);
    uint8_t old_ident[sizeof(f->ident)];
    size_t old_len = f->ident_len;
    memcpy(old_ident, f->ident, old_len);
    f->st->now_ns += CR_INDEXER_REPLAY_TIMEOUT_NS;
    pump_idle(f); /* round 1 stalled */
    f->st->now_ns += CR_INDEXER_REPLAY_BACKOFF_NS;
    pump_idle(f);
    assert_int_equal(replay_request(f), last + 1); /* round 2 */
    reply_to(f, old_ident, old_len, last + 1, TS_OLD, 999); /* round 1's late answer */
    end_to(f, old_ident, old_len);
    reply(f, last + 1, TS_OLD, last + 1); /* round 2's */
    PUMP_UNTIL(f, s->counters.replayed == 1);
    assert_true(s->replaying);
    end_to(f, f->ident, f->ident_len);
    PUMP_UNTIL(f, !s->replaying);
    assert_int_equal(s->last_seq, last + 2);
    assert_int_equal(s->counters.replays, 1);
    assert_int_equal(s->counters.replay_rounds, 2);
    assert_int_equal(s->counters.replay_timeouts, 1);
    assert_false(s->stale);
    assert_int_equal(held(f, last + 1), BS);
    assert_int_equal(held(f, 999), 0);
}

/* A hole after replies that came is the peer's send queue at work, not a
 * loss: asked again from the first missing seq.  A round's first reply
 * past the seq asked for is a loss: the publisher no longer holds it. */
static void test_hole_is_asked_again_and_loss_is_a_range(void **state) {
    struct fx *f = *state;
    uint64_t last = connect_engine(f);
    struct indexer_source *s = source(f);
    open_gap(f, last, 9, TS_OLD); /* last+1 .. last+9 lost */
    reply(f, last + 1, TS_OLD, last + 1);
    reply(f, last + 2, TS_OLD, last + 2);
    reply(f, last + 5, TS_OLD, last + 5); /* last+3, last+4 dropped by the queue */
    assert_int_equal(replay_request(f), last + 3);
    assert_int_equal(s->counters.replay_holes, 1);
    assert_false(s->stale);
    reply(f, last + 3, TS_OLD, last + 3);
    PUMP_UNTIL(f, s->counters.replayed == 3);
    f->st->now_ns += CR_INDEXER_REPLAY_TIMEOUT_NS; /* stalls after progress: asked again */
    pump_idle(f);
    assert_int_equal(replay_request(f), last + 4);
    reply(f, last + 6, TS_OLD, last + 6); /* its oldest is newer: last+4, last+5 gone */
    for (uint64_t i = 7; i <= 10; i++) reply(f, last + i, TS_OLD, last + i);
    end_to(f, f->ident, f->ident_len);
    PUMP_UNTIL(f, !s->replaying);
    assert_true(s->stale);
    assert_non_null(strstr(s->stale_reason, "history lost"));
    assert_int_equal(s->lost_count, 1);
    assert_int_equal(s->lost[0].first, last + 4);
    assert_int_equal(s->lost[0].last, last + 5);
    assert_int_equal(s->counters.lost_batches, 2);
    assert_int_equal(s->last_seq, last + 10);
    assert_int_equal(held(f, last + 3), BS);
    assert_int_equal(held(f, last + 4), 0);
    assert_int_equal(held(f, last + 9), BS);
}

/* A replay takes CR_INDEXER_REPLAY_WINDOW batches a round, then asks for
 * the next window: never more than the peer's send queue holds. */
static void test_replay_is_asked_in_windows(void **state) {
    struct fx *f = *state;
    uint64_t last = connect_engine(f);
    struct indexer_source *s = source(f);
    uint64_t lost = CR_INDEXER_REPLAY_WINDOW + 10;
    open_gap(f, last, lost, TS_OLD);
    for (uint64_t i = 1; i <= lost; i++) reply(f, last + i, TS_OLD, 0); /* answered whole */
    assert_int_equal(replay_request(f), last + 1 + CR_INDEXER_REPLAY_WINDOW);
    for (uint64_t i = 1 + CR_INDEXER_REPLAY_WINDOW; i <= lost; i++) reply(f, last + i, TS_OLD, 0);
    end_to(f, f->ident, f->ident_len);
    PUMP_UNTIL(f, !s->replaying);
    assert_false(s->stale);
    assert_int_equal(s->counters.replay_rounds, 2);
    assert_int_equal(s->counters.replayed, lost);
    assert_int_equal(s->last_seq, last + lost + 1);
}

/* First subscribe to an engine that already has history: the replay from
 * seq 0 gets its oldest batch on (not a loss), applied before the live
 * stream, whose copies of replayed batches are dropped. */
static void test_first_subscribe_replays_history(void **state) {
    struct fx *f = *state;
    struct cr_indexer_registration reg = registration(f, "e");
    char error[CR_INDEXER_ERROR_MAX];
    assert_int_equal(indexer_source_add(f->st, &reg, error, sizeof(error)), CR_OK);
    struct indexer_source *s = source(f);
    assert_int_equal(replay_request(f), 0);
    for (uint64_t i = 40; i <= 50; i++) reply(f, i, TS_OLD, i); /* 0..39 left its buffer */
    end_to(f, f->ident, f->ident_len);
    PUMP_UNTIL(f, !s->replaying);
    assert_false(s->stale);
    assert_true(s->have_oldest);
    assert_int_equal(s->oldest_seq, 40);
    assert_int_equal(s->last_seq, 50);
    for (uint64_t i = 40; i <= 50; i++) assert_int_equal(held(f, i), BS);
    /* Live: copies (the SUB may have taken some of the replayed ones), then news. */
    uint64_t until = real_ms() + 2000;
    while (s->last_seq < 51 && real_ms() < until) {
        publish(f, 50, TS_OLD, 50);
        publish(f, 51, TS_OLD, 51);
        pump_idle(f);
        if (s->replaying) fail_msg("no gap expected");
    }
    assert_int_equal(s->last_seq, 51);
    assert_int_equal(s->counters.restarts, 0);
    assert_int_equal(held(f, 51), BS);
}

static uint64_t fake_clock(void *ctx) { return *(const uint64_t *)ctx; }

/* The gap is seen after a long idle wait: the clock read before the wait
 * is 10 s old when the batch that reveals the gap arrives.  The round's
 * deadline counts from when the batch arrived, so the round is not
 * abandoned at the next wait (as the wait hook sets now_ns before it). */
static void test_gap_after_an_idle_wait_gets_its_full_deadline(void **state) {
    struct fx *f = *state;
    uint64_t last = connect_engine(f);
    struct indexer_source *s = source(f);
    uint64_t clock_now = f->st->now_ns + 10 * SEC; /* what the poll returns at */
    f->st->clock = fake_clock;
    f->st->clock_ctx = &clock_now;
    open_gap(f, last, 1, TS_OLD);
    assert_true(s->replay_deadline_ns >= clock_now + CR_INDEXER_REPLAY_TIMEOUT_NS);
    f->st->now_ns = clock_now; /* the wait hook's read before the next wait */
    pump_idle(f);
    assert_true(s->replaying);
    assert_int_equal(s->counters.replay_timeouts, 0);
    reply(f, last + 1, TS_OLD, last + 1);
    end_to(f, f->ident, f->ident_len);
    PUMP_UNTIL(f, !s->replaying);
    assert_false(s->stale);
    assert_int_equal(held(f, last + 1), BS);
    assert_int_equal(held(f, last + 2), BS);
}

/* ---- after a replay: duplicates and restarts ---- */

/* Live copies of replayed batches, queued on SUB during the replay, are
 * dropped as duplicates; the window closes at the next new seq. */
static void test_live_copies_after_a_replay_are_duplicates(void **state) {
    struct fx *f = *state;
    uint64_t last = connect_engine(f);
    struct indexer_source *s = source(f);
    open_gap(f, last, 1, TS_OLD);
    publish(f, last + 3, TS_OLD, last + 3); /* queued on SUB: the replay holds it */
    publish(f, last + 4, TS_OLD, last + 4);
    for (uint64_t i = 1; i <= 4; i++) reply(f, last + i, TS_OLD, last + i);
    end_to(f, f->ident, f->ident_len);
    /* The batch that revealed the gap and both live copies. */
    PUMP_UNTIL(f, !s->replaying && s->counters.duplicates == 3);
    publish(f, last + 5, TS_OLD, last + 5);
    PUMP_UNTIL(f, s->last_seq == last + 5);
    assert_int_equal(s->counters.restarts, 0);
    assert_int_equal(s->counters.duplicates, 3);
    assert_false(s->after_replay);
    for (uint64_t i = 1; i <= 5; i++) assert_int_equal(held(f, last + i), BS);
}

/* The engine restarted after the replay and its new run's first batch seen
 * is numbered inside the replayed window, below the last live copy: seq
 * went back, a restart -- even with a ts that alone would pass for a copy. */
static void test_restart_going_back_inside_the_window(void **state) {
    struct fx *f = *state;
    uint64_t last = connect_engine(f);
    struct indexer_source *s = source(f);
    open_gap(f, last, 1, TS_OLD);
    publish(f, last + 3, TS_OLD, last + 3);
    publish(f, last + 4, TS_OLD, last + 4);
    for (uint64_t i = 1; i <= 8; i++) reply(f, last + i, TS_OLD, last + i);
    end_to(f, f->ident, f->ident_len);
    PUMP_UNTIL(f, !s->replaying && s->counters.duplicates == 3);
    assert_int_equal(s->replayed_until, last + 8);
    publish(f, last + 3, TS_OLD, 777); /* the new run */
    PUMP_UNTIL(f, s->counters.restarts == 1 || s->counters.duplicates > 3);
    /* Its earlier batches are asked for from its buffer. */
    assert_int_equal(replay_request(f), 0);
    for (uint64_t i = 0; i < last + 3; i++) reply(f, i, TS_OLD, 0);
    end_to(f, f->ident, f->ident_len);
    PUMP_UNTIL(f, !s->replaying);
    assert_false(s->stale);
    assert_int_equal(s->counters.restarts, 1);
    assert_int_equal(s->counters.duplicates, 3);
    assert_int_equal(s->last_seq, last + 3);
    assert_int_equal(held(f, 777), BS);
    assert_int_equal(held(f, last + 1), 0); /* the old run's blocks were cleared */
}

/* At the top of the seq space: the last batch sent twice is a copy, not a
 * restart (its blocks stay), and the seq after 2^64-1 is 0, a continuation. */
static void test_seq_at_the_top_repeats_and_wraps(void **state) {
    struct fx *f = *state;
    connect_engine(f);
    struct indexer_source *s = source(f);
    s->last_seq = UINT64_MAX - 1; /* as if it had published that long */
    publish(f, UINT64_MAX, TS_OLD, 41);
    PUMP_UNTIL(f, s->last_seq == UINT64_MAX);
    assert_int_equal(held(f, 41), BS);
    publish(f, UINT64_MAX, TS_OLD, 41); /* the same batch again */
    PUMP_UNTIL(f, s->counters.duplicates == 1 || s->counters.restarts > 0);
    assert_int_equal(s->counters.restarts, 0);
    assert_int_equal(held(f, 41), BS);
    publish(f, 0, TS_OLD, 42); /* wraps */
    PUMP_UNTIL(f, s->last_seq == 0 || s->counters.restarts > 0);
    assert_int_equal(s->counters.restarts, 0);
    assert_int_equal(s->counters.gaps, 0);
    assert_false(s->replaying);
    assert_int_equal(held(f, 41), BS);
    assert_int_equal(held(f, 42), BS);
}

/* No live copy came (SUB dropped them), and the restarted engine's first
 * batch seen is numbered inside the window: its ts is newer than every
 * replayed batch, so it cannot be a copy.  A true copy before it, with its
 * replayed twin's ts, is still a duplicate. */
static void test_restart_newer_than_the_replay_inside_the_window(void **state) {
    struct fx *f = *state;
    uint64_t last = connect_engine(f);
    struct indexer_source *s = source(f);
    open_gap(f, last, 1, TS_OLD);
    for (uint64_t i = 1; i <= 8; i++) reply(f, last + i, TS_OLD + (double)i, last + i);
    end_to(f, f->ident, f->ident_len);
    PUMP_UNTIL(f, !s->replaying);
    assert_int_equal(s->last_seq, last + 8);
    publish(f, last + 3, TS_OLD + 3.0, last + 3); /* a copy of replayed last+3 */
    PUMP_UNTIL(f, s->counters.duplicates == 2);   /* with the batch that revealed the gap */
    publish(f, last + 5, TS_NEW, 888);            /* the new run, seq still rising */
    PUMP_UNTIL(f, s->counters.restarts == 1 || s->counters.duplicates > 2);
    assert_int_equal(replay_request(f), 0); /* the new run's earlier batches */
    for (uint64_t i = 0; i < last + 5; i++) reply(f, i, TS_NEW, 0);
    end_to(f, f->ident, f->ident_len);
    PUMP_UNTIL(f, !s->replaying);
    assert_int_equal(s->counters.restarts, 1);
    assert_int_equal(s->counters.duplicates, 2);
    assert_int_equal(s->last_seq, last + 5);
    assert_int_equal(held(f, 888), BS);
    assert_int_equal(held(f, last + 8), 0);
    publish(f, last + 6, TS_NEW, 889); /* and the new run goes on */
    PUMP_UNTIL(f, s->last_seq == last + 6);
    assert_int_equal(held(f, 889), BS);
    assert_int_equal(s->counters.gaps, 2); /* the first, and the new run's start */
    assert_false(s->stale);
}

/* ---- registrations ---- */

static uint32_t instances(struct fx *f) {
    struct cr_prefix_summary sum;
    cr_prefix_index_summary(f->st->index, &sum);
    return sum.instances;
}

/* A registration refused for an endpoint leaves no instance behind. */
static void test_failed_registration_leaves_nothing(void **state) {
    struct fx *f = *state;
    char error[CR_INDEXER_ERROR_MAX];
    struct cr_indexer_registration reg = registration(f, "bad-sub");
    snprintf(reg.endpoint, sizeof(reg.endpoint), "nope://x");
    assert_int_equal(indexer_source_add(f->st, &reg, error, sizeof(error)), CR_ERR_INVALID_PARAMS);
    assert_non_null(strstr(error, "nope://x"));
    reg = registration(f, "bad-replay");
    snprintf(reg.replay_endpoint, sizeof(reg.replay_endpoint), "nope://y");
    assert_int_equal(indexer_source_add(f->st, &reg, error, sizeof(error)), CR_ERR_INVALID_PARAMS);
    assert_non_null(strstr(error, "nope://y"));
    assert_int_equal(f->st->source_count, 0);
    assert_int_equal(instances(f), 0);
}

/* Registering a key again with an endpoint that fails keeps the earlier
 * registration: nothing of the failed attempt, nothing lost. */
static void test_failed_reregistration_keeps_the_old_one(void **state) {
    struct fx *f = *state;
    uint64_t last = connect_engine(f);
    publish(f, last + 1, TS_OLD, 5);
    PUMP_UNTIL(f, source(f)->last_seq == last + 1);
    char error[CR_INDEXER_ERROR_MAX];
    struct cr_indexer_registration reg = registration(f, "e");
    snprintf(reg.endpoint, sizeof(reg.endpoint), "nope://x");
    assert_int_equal(indexer_source_add(f->st, &reg, error, sizeof(error)), CR_ERR_INVALID_PARAMS);
    assert_int_equal(f->st->source_count, 1);
    assert_string_equal(source(f)->reg.endpoint, f->pub_ep);
    assert_int_equal(instances(f), 1);
    assert_int_equal(held(f, 5), BS);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_long_replay_that_progresses_is_not_abandoned, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_stalled_replay_is_retried_then_abandoned, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_hole_is_asked_again_and_loss_is_a_range, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_replay_is_asked_in_windows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_first_subscribe_replays_history, setup, teardown),
        cmocka_unit_test_setup_teardown(test_late_replies_do_not_reach_the_next_round, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_gap_after_an_idle_wait_gets_its_full_deadline, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_live_copies_after_a_replay_are_duplicates, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_seq_at_the_top_repeats_and_wraps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restart_going_back_inside_the_window, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restart_newer_than_the_replay_inside_the_window, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_failed_registration_leaves_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_reregistration_keeps_the_old_one, setup,
                                        teardown),
    };
    return cmocka_run_group_tests_name("indexer_sources", tests, NULL, NULL);
}
