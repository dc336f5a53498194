/* Event plane, actor level: the publisher and replay actors in a runtime,
 * fed CR_MSG_STORE_EVENT from the test thread, read with a ZMQ SUB and
 * DEALERs like any foreign client.
 *
 * Endpoints are ipc:// paths unique to the process, so tests never collide
 * with other daemons.  Waits are for observable states (a message, a counter)
 * bounded by deadlines only a hang would reach; PUB/SUB's slow-joiner window
 * is closed by publishing probe events until the subscriber sees one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "runtime/runtime.h"
#include "actors/subsystems.h"
#include "client/events_follow.h"
#include "crescent/error.h"
#include "daemon/config.h"
#include "msgs/event_msgs.h"
#include "msgs/store_event_json.h"
#include "msgs/store_msgs.h"

#define WAIT_MS 5000
static const uint8_t FF8[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

struct plane {
    struct cr_daemon_config config;
    struct cr_runtime *rt;
    struct cr_subsystems peers;
    void *zctx;
    void *sub;
    uint64_t next_seq; /* next seq the subscriber expects */
    struct cr_clock clock; /* the actors' clock; now_ns NULL: the real one */
};

struct frame_set {
    uint32_t parts;
    size_t len[5];
    uint8_t *data[5];
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

static void put_be64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (56 - 8 * i));
}

static void frames_free(struct frame_set *f) {
    for (uint32_t i = 0; i < f->parts && i < 5; i++) free(f->data[i]);
    memset(f, 0, sizeof(*f));
}

/* Receives one multipart message within timeout_ms; false on timeout. */
static bool recv_frames(void *sock, struct frame_set *f, int timeout_ms) {
    memset(f, 0, sizeof(*f));
    zmq_pollitem_t item = {sock, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&item, 1, timeout_ms) <= 0) return false;
    int more = 0;
    size_t more_size = sizeof(more);
    do {
        zmq_msg_t msg;
        zmq_msg_init(&msg);
        assert_true(zmq_msg_recv(&msg, sock, 0) >= 0);
        if (f->parts < 5) {
            f->len[f->parts] = zmq_msg_size(&msg);
            f->data[f->parts] = malloc(f->len[f->parts] + 1);
            memcpy(f->data[f->parts], zmq_msg_data(&msg), f->len[f->parts]);
        }
        f->parts++;
        zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &more_size);
        zmq_msg_close(&msg);
    } while (more);
    return true;
}

/* A chain of one event, as segments sends them. */
static cr_store_event_chain *make_event(cr_store_event_kind kind, const char *key) {
    cr_store_replica replica = {CR_REPLICA_MEMORY, cr_event_str_c("tcp://10.0.0.1:6000")};
    cr_store_event_chain *chain = NULL;
    size_t need = 0;
    assert_int_equal(cr_store_event_chain_new(0, &chain), CR_OK);
    assert_int_equal(
        cr_store_event_chain_add(chain, kind, cr_event_str_c(key), &replica, 1, NULL, &need),
        CR_OK);
    return chain;
}

/* since_ns: when the event happened, on the actors' clock (0: unknown). */
static void publish_since(struct plane *pl, cr_store_event_kind kind, const char *key,
                          uint64_t since_ns) {
    struct cr_msg msg = {.type = CR_MSG_STORE_EVENT};
    CR_MSG_BODY(&msg, struct cr_msg_store_event)->chain = make_event(kind, key);
    CR_MSG_BODY(&msg, struct cr_msg_store_event)->since_ns = since_ns;
    assert_int_equal(cr_send(pl->peers.actors[CR_SUBSYSTEM_PUBLISHER], &msg), CR_OK);
}

static void publish(struct plane *pl, cr_store_event_kind kind, const char *key) {
    publish_since(pl, kind, key, 0);
}

static struct cr_publisher_info publisher_info(struct plane *pl) {
    struct cr_publisher_info info;
    struct cr_msg msg = {.type = CR_MSG_PUBLISHER_INFO};
    CR_MSG_BODY(&msg, struct cr_msg_publisher_info)->out = &info;
    assert_int_equal(cr_ask(pl->peers.actors[CR_SUBSYSTEM_PUBLISHER], &msg, 2000000000u), CR_OK);
    return info;
}

static struct cr_replay_info replay_info(struct plane *pl) {
    struct cr_replay_info info;
    struct cr_msg msg = {.type = CR_MSG_REPLAY_INFO};
    CR_MSG_BODY(&msg, struct cr_msg_replay_info)->out = &info;
    assert_int_equal(cr_ask(pl->peers.actors[CR_SUBSYSTEM_REPLAY], &msg, 2000000000u), CR_OK);
    return info;
}

/* Waits until the replay actor keeps a batch with seq `seq`. */
static void wait_kept(struct plane *pl, uint64_t seq) {
    uint64_t deadline = now_ms() + WAIT_MS;
    for (;;) {
        struct cr_replay_info info = replay_info(pl);
        if (info.has_batches && info.newest_seq >= seq) return;
        assert_true(now_ms() < deadline);
        usleep(1000);
    }
}

/* Checks one received event message and returns its seq; counts its events. */
static uint64_t check_event_message(struct frame_set *f, const char *topic, size_t *events_out) {
    assert_int_equal(f->parts, 3);
    assert_int_equal(f->len[0], strlen(topic));
    assert_memory_equal(f->data[0], topic, strlen(topic));
    assert_int_equal(f->len[1], 8);
    uint64_t seq = be64(f->data[1]);
    json_t *events = NULL;
    char error[256];
    assert_int_equal(cr_store_event_json_decode(f->data[2], f->len[2], seq, &events, error,
                                                sizeof(error)),
                     CR_OK);
    *events_out = json_array_size(events);
    json_decref(events);
    return seq;
}

/* Publishes probes until the subscriber sees one (PUB/SUB slow joiner);
 * afterwards pl->next_seq is the seq the next batch will carry. */
static void wait_subscribed(struct plane *pl) {
    uint64_t deadline = now_ms() + WAIT_MS;
    for (;;) {
        publish(pl, CR_STORE_EVENT_REMOVE_ALL, NULL);
        struct frame_set f;
        if (recv_frames(pl->sub, &f, 20)) {
            size_t n;
            uint64_t seq = check_event_message(&f, pl->config.event_topic, &n);
            frames_free(&f);
            /* Drain what the other probes produced, then stop. */
            while (recv_frames(pl->sub, &f, 50)) {
                seq = check_event_message(&f, pl->config.event_topic, &n);
                frames_free(&f);
            }
            pl->next_seq = seq + 1;
            assert_int_equal(publisher_info(pl).next_seq, pl->next_seq);
            return;
        }
        assert_true(now_ms() < deadline);
    }
}

static void plane_config(struct plane *pl, const char *name) {
    memset(pl, 0, sizeof(*pl));
    cr_daemon_config_default(&pl->config);
    snprintf(pl->config.event_address, sizeof(pl->config.event_address),
             "ipc:///tmp/crescent-test-%d-%s-pub", (int)getpid(), name);
    snprintf(pl->config.replay_address, sizeof(pl->config.replay_address),
             "ipc:///tmp/crescent-test-%d-%s-replay", (int)getpid(), name);
}

static void plane_start(struct plane *pl) {
    struct cr_runtime_config rc;
    cr_runtime_config_default(&rc);
    rc.pin_threads = false;
    if (pl->clock.now_ns != NULL) rc.clock = pl->clock;
    assert_int_equal(cr_runtime_create(&rc, &pl->rt), CR_OK);
    pl->peers.config = &pl->config;
    pl->peers.ask_timeout_ns = 2000000000u;
    const struct cr_subsystem_def *defs[2] = {&cr_publisher_def, &cr_replay_def};
    enum cr_subsystem which[2] = {CR_SUBSYSTEM_PUBLISHER, CR_SUBSYSTEM_REPLAY};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(defs[i]->create(&pl->config, &pl->peers.states[which[i]]), CR_OK);
        assert_int_equal(cr_runtime_spawn(pl->rt, defs[i]->name, defs[i]->ops,
                                          pl->peers.states[which[i]], &pl->peers.actors[which[i]]),
                         CR_OK);
    }
    for (int i = 0; i < 2; i++) {
        struct cr_msg wire = {.type = CR_MSG_WIRE};
        wire.body.ptr[0] = &pl->peers;
        assert_int_equal(cr_send(pl->peers.actors[which[i]], &wire), CR_OK);
    }
    pl->zctx = zmq_ctx_new();
    pl->sub = zmq_socket(pl->zctx, ZMQ_SUB);
    int hwm = 0; /* unbounded: the tests count every batch */
    zmq_setsockopt(pl->sub, ZMQ_RCVHWM, &hwm, sizeof(hwm));
    assert_int_equal(zmq_setsockopt(pl->sub, ZMQ_SUBSCRIBE, pl->config.event_topic,
                                    strlen(pl->config.event_topic)),
                     0);
    assert_int_equal(zmq_connect(pl->sub, pl->config.event_address), 0);
    wait_subscribed(pl);
}

static void plane_stop(struct plane *pl) {
    int linger = 0;
    zmq_setsockopt(pl->sub, ZMQ_LINGER, &linger, sizeof(linger));
    zmq_close(pl->sub);
    zmq_ctx_term(pl->zctx);
    cr_runtime_destroy(pl->rt);
    cr_publisher_def.destroy(pl->peers.states[CR_SUBSYSTEM_PUBLISHER]);
    cr_replay_def.destroy(pl->peers.states[CR_SUBSYSTEM_REPLAY]);
    cr_runtime_thread_release();
}

/* Receives event messages until `events` events arrived; checks seq is
 * contiguous from pl->next_seq.  Returns the batch count. */
static uint64_t receive_events(struct plane *pl, size_t events) {
    uint64_t batches = 0;
    size_t got = 0;
    while (got < events) {
        struct frame_set f;
        assert_true(recv_frames(pl->sub, &f, WAIT_MS));
        size_t n;
        assert_int_equal(check_event_message(&f, pl->config.event_topic, &n), pl->next_seq);
        frames_free(&f);
        pl->next_seq++;
        got += n;
        batches++;
    }
    assert_int_equal(got, events);
    return batches;
}

static void *dealer_connect(struct plane *pl) {
    void *dealer = zmq_socket(pl->zctx, ZMQ_DEALER);
    int linger = 0;
    zmq_setsockopt(dealer, ZMQ_LINGER, &linger, sizeof(linger));
    assert_int_equal(zmq_connect(dealer, pl->config.replay_address), 0);
    return dealer;
}

static void replay_request(void *dealer, uint64_t start_seq) {
    uint8_t seq_be[8];
    put_be64(seq_be, start_seq);
    assert_int_equal(zmq_send(dealer, "", 0, ZMQ_SNDMORE), 0);
    assert_int_equal(zmq_send(dealer, seq_be, 8, 0), 8);
}

/* Reads a replay to its end marker; returns the seqs in *seqs (malloc'd). */
static size_t replay_read(void *dealer, uint64_t **seqs) {
    size_t count = 0, cap = 64;
    *seqs = malloc(cap * sizeof(uint64_t));
    for (;;) {
        struct frame_set f;
        assert_true(recv_frames(dealer, &f, WAIT_MS));
        assert_int_equal(f.parts, 3);
        assert_int_equal(f.len[0], 0);
        assert_int_equal(f.len[1], 8);
        if (memcmp(f.data[1], FF8, 8) == 0) {
            assert_int_equal(f.len[2], 8);
            assert_memory_equal(f.data[2], FF8, 8); /* both marker variants at once */
            frames_free(&f);
            return count;
        }
        size_t n;
        json_t *events = NULL;
        assert_int_equal(cr_store_event_json_decode(f.data[2], f.len[2], be64(f.data[1]), &events,
                                                    NULL, 0),
                         CR_OK);
        n = json_array_size(events);
        assert_true(n > 0);
        json_decref(events);
        if (count == cap) *seqs = realloc(*seqs, (cap *= 2) * sizeof(uint64_t));
        (*seqs)[count++] = be64(f.data[1]);
        frames_free(&f);
    }
}

/* ------------------------------------------------------------------------ */

static void test_frames_and_event_counts(void **state) {
    (void)state;
    struct plane pl;
    plane_config(&pl, "frames");
    snprintf(pl.config.event_topic, sizeof(pl.config.event_topic), "kvtopic");
    plane_start(&pl);
    struct cr_publisher_info before = publisher_info(&pl);
    publish(&pl, CR_STORE_EVENT_BLOCK_STORE, "a");
    publish(&pl, CR_STORE_EVENT_BLOCK_UPDATE, "a");
    publish(&pl, CR_STORE_EVENT_REMOVE_ALL, NULL);
    receive_events(&pl, 3);
    struct cr_publisher_info after = publisher_info(&pl);
    assert_int_equal(after.events_by_kind[0] - before.events_by_kind[0], 1);
    assert_int_equal(after.events_by_kind[1] - before.events_by_kind[1], 1);
    assert_int_equal(after.events_by_kind[2] - before.events_by_kind[2], 1);
    assert_int_equal(after.next_seq, pl.next_seq);
    assert_int_equal(after.send_drops, 0);
    plane_stop(&pl);
}

static void test_batch_by_count(void **state) {
    (void)state;
    struct plane pl;
    plane_config(&pl, "count");
    pl.config.event_batch_max = 4;
    pl.config.event_flush_us = 10000000; /* 10 s: only the count can send these */
    plane_start(&pl);
    for (int i = 0; i < 8; i++) publish(&pl, CR_STORE_EVENT_BLOCK_UPDATE, "k");
    assert_int_equal(receive_events(&pl, 8), 2);
    plane_stop(&pl);
}

/* The actors' clock for test_lone_event_flushed_by_time: the real one
 * (so start-up's probes flush) until the test freezes it, then moved by
 * the test alone. */
struct stoppable_clock {
    _Atomic uint64_t frozen_ns; /* 0: follows CLOCK_MONOTONIC */
};

static uint64_t stoppable_now(void *ctx) {
    uint64_t frozen = atomic_load(&((struct stoppable_clock *)ctx)->frozen_ns);
    return frozen != 0 ? frozen : cr_monotonic_ns();
}

/* Starts a plane whose publisher batches up to 50 events for 20 ms, on
 * `clock`, and freezes that clock; returns the frozen time. */
static uint64_t plane_start_frozen(struct plane *pl, const char *name,
                                   struct stoppable_clock *clock) {
    plane_config(pl, name);
    pl->config.event_batch_max = 50;
    pl->config.event_flush_us = 20000; /* 20 ms */
    pl->clock = (struct cr_clock){.now_ns = stoppable_now, .ctx = clock};
    plane_start(pl);
    uint64_t start = stoppable_now(clock);
    atomic_store(&clock->frozen_ns, start);
    return start;
}

static void clock_set(struct plane *pl, struct stoppable_clock *clock, uint64_t now_ns) {
    atomic_store(&clock->frozen_ns, now_ns);
    cr_runtime_clock_changed(pl->rt);
}

static void test_lone_event_flushed_by_time(void **state) {
    (void)state;
    struct stoppable_clock clock = {0};
    struct plane pl;
    uint64_t start = plane_start_frozen(&pl, "time", &clock);
    publish(&pl, CR_STORE_EVENT_BLOCK_STORE, "lone");
    /* Held for more events: taken (this thread's ask follows its send),
     * not sent, until 20 ms of the actors' time have passed. */
    struct frame_set f;
    for (uint64_t passed_us = 0; passed_us < 20000; passed_us += 9999) {
        clock_set(&pl, &clock, start + passed_us * 1000u);
        assert_int_equal(publisher_info(&pl).events_pending, 1);
        assert_false(recv_frames(pl.sub, &f, 50));
    }
    clock_set(&pl, &clock, start + 20000000u); /* then sent alone, with no more events */
    assert_int_equal(receive_events(&pl, 1), 1);
    assert_int_equal(publisher_info(&pl).events_pending, 0);
    plane_stop(&pl);
}

/* The flush window counts from when the event happened (since_ns, set by
 * segments), not from when it reached the publisher: an event that waited
 * 15 ms of a 20 ms window on the way (segments' lazy wake) goes out 5 ms
 * after it arrives. */
static void test_flush_window_counts_from_the_event(void **state) {
    (void)state;
    struct stoppable_clock clock = {0};
    struct plane pl;
    uint64_t start = plane_start_frozen(&pl, "since", &clock);
    publish_since(&pl, CR_STORE_EVENT_BLOCK_STORE, "late", start - 15000000u);
    struct frame_set f;
    clock_set(&pl, &clock, start + 4999000u);
    assert_int_equal(publisher_info(&pl).events_pending, 1); /* taken, not due yet */
    assert_false(recv_frames(pl.sub, &f, 50));
    clock_set(&pl, &clock, start + 5000000u);
    assert_int_equal(receive_events(&pl, 1), 1);
    assert_int_equal(publisher_info(&pl).events_pending, 0);
    plane_stop(&pl);
}

static void test_seq_contiguous_under_load(void **state) {
    (void)state;
    struct plane pl;
    plane_config(&pl, "load");
    plane_start(&pl);
    const size_t events = 20000;
    for (size_t i = 0; i < events; i++) publish(&pl, CR_STORE_EVENT_BLOCK_UPDATE, "load");
    uint64_t batches = receive_events(&pl, events);
    assert_true(batches >= events / 50);
    plane_stop(&pl);
}

static void test_replay_ranges(void **state) {
    (void)state;
    struct plane pl;
    plane_config(&pl, "replay");
    pl.config.event_batch_max = 1;
    plane_start(&pl);
    for (int i = 0; i < 20; i++) publish(&pl, CR_STORE_EVENT_BLOCK_STORE, "r");
    receive_events(&pl, 20);
    uint64_t newest = pl.next_seq - 1;
    wait_kept(&pl, newest);
    void *dealer = dealer_connect(&pl);
    uint64_t *seqs;
    replay_request(dealer, 0); /* from 0: everything kept */
    size_t n = replay_read(dealer, &seqs);
    assert_int_equal(n, newest + 1);
    for (size_t i = 0; i < n; i++) assert_int_equal(seqs[i], i);
    free(seqs);
    replay_request(dealer, newest - 5); /* from the middle */
    n = replay_read(dealer, &seqs);
    assert_int_equal(n, 6);
    assert_int_equal(seqs[0], newest - 5);
    assert_int_equal(seqs[5], newest);
    free(seqs);
    replay_request(dealer, newest + 1); /* beyond the newest: the marker only */
    assert_int_equal(replay_read(dealer, &seqs), 0);
    free(seqs);
    struct cr_replay_info info = replay_info(&pl);
    assert_int_equal(info.sessions_served, 3);
    assert_int_equal(info.sessions_clamped, 0);
    assert_int_equal(info.oldest_seq, 0);
    assert_int_equal(info.newest_seq, newest);
    zmq_close(dealer);
    plane_stop(&pl);
}

static void test_replay_before_oldest_and_malformed(void **state) {
    (void)state;
    struct plane pl;
    plane_config(&pl, "oldest");
    pl.config.event_batch_max = 1;
    pl.config.replay_batches = 5;
    plane_start(&pl);
    for (int i = 0; i < 12; i++) publish(&pl, CR_STORE_EVENT_BLOCK_UPDATE, "o");
    receive_events(&pl, 12);
    uint64_t newest = pl.next_seq - 1;
    wait_kept(&pl, newest);
    void *dealer = dealer_connect(&pl);
    uint64_t *seqs;
    replay_request(dealer, 0); /* before the oldest kept: from the oldest */
    size_t n = replay_read(dealer, &seqs);
    assert_int_equal(n, 5);
    for (size_t i = 0; i < n; i++) assert_int_equal(seqs[i], newest - 4 + i);
    free(seqs);
    assert_int_equal(replay_info(&pl).sessions_clamped, 1);
    /* Malformed: a 4-byte seq, then an extra frame: each gets the marker only. */
    assert_int_equal(zmq_send(dealer, "", 0, ZMQ_SNDMORE), 0);
    assert_int_equal(zmq_send(dealer, "abcd", 4, 0), 4);
    assert_int_equal(replay_read(dealer, &seqs), 0);
    free(seqs);
    uint8_t seq_be[8] = {0};
    assert_int_equal(zmq_send(dealer, "", 0, ZMQ_SNDMORE), 0);
    assert_int_equal(zmq_send(dealer, seq_be, 8, ZMQ_SNDMORE), 8);
    assert_int_equal(zmq_send(dealer, "x", 1, 0), 1);
    assert_int_equal(replay_read(dealer, &seqs), 0);
    free(seqs);
    struct cr_replay_info info = replay_info(&pl);
    assert_int_equal(info.malformed_requests, 2);
    assert_int_equal(info.batches_kept, 5);
    assert_int_equal(info.oldest_seq, newest - 4);
    zmq_close(dealer);
    plane_stop(&pl);
}

/* Many clients replay at once while publishing continues: every client gets
 * a contiguous run from 0 and its marker; the live stream stays contiguous. */
static void test_many_replay_clients_while_publishing(void **state) {
    (void)state;
    enum { CLIENTS = 16, BEFORE = 300, DURING = 3000 };
    struct plane pl;
    plane_config(&pl, "many");
    pl.config.event_batch_max = 1;
    plane_start(&pl);
    for (int i = 0; i < BEFORE; i++) publish(&pl, CR_STORE_EVENT_BLOCK_STORE, "m");
    receive_events(&pl, BEFORE);
    wait_kept(&pl, pl.next_seq - 1);
    uint64_t kept_newest = pl.next_seq - 1;
    void *dealers[CLIENTS];
    for (int c = 0; c < CLIENTS; c++) {
        dealers[c] = dealer_connect(&pl);
        replay_request(dealers[c], 0);
    }
    for (int i = 0; i < DURING; i++) publish(&pl, CR_STORE_EVENT_BLOCK_UPDATE, "m");
    for (int c = 0; c < CLIENTS; c++) {
        uint64_t *seqs;
        size_t n = replay_read(dealers[c], &seqs);
        assert_true(n >= kept_newest + 1);
        for (size_t i = 0; i < n; i++) assert_int_equal(seqs[i], i);
        free(seqs);
        zmq_close(dealers[c]);
    }
    receive_events(&pl, DURING);
    struct cr_replay_info info = replay_info(&pl);
    assert_int_equal(info.sessions_served, CLIENTS);
    assert_int_equal(info.clients_dropped, 0);
    assert_int_equal(publisher_info(&pl).handoff_drops, 0);
    plane_stop(&pl);
}

/* A client that asks and vanishes costs nothing to the next one. */
static void test_vanished_replay_client(void **state) {
    (void)state;
    struct plane pl;
    plane_config(&pl, "vanish");
    pl.config.event_batch_max = 1;
    plane_start(&pl);
    for (int i = 0; i < 2000; i++) publish(&pl, CR_STORE_EVENT_BLOCK_UPDATE, "v");
    receive_events(&pl, 2000);
    wait_kept(&pl, pl.next_seq - 1);
    void *gone = dealer_connect(&pl);
    replay_request(gone, 0);
    /* Close only once the request has arrived (linger 0 would discard it). */
    uint64_t deadline = now_ms() + WAIT_MS;
    for (;;) {
        struct cr_replay_info info = replay_info(&pl);
        if (info.sessions_active + info.sessions_served + info.clients_dropped >= 1) break;
        assert_true(now_ms() < deadline);
        usleep(1000);
    }
    zmq_close(gone);
    void *dealer = dealer_connect(&pl);
    replay_request(dealer, 0);
    uint64_t *seqs;
    assert_int_equal(replay_read(dealer, &seqs), pl.next_seq);
    free(seqs);
    /* The vanished session ended either way: served (queued before the peer
     * left) or dropped; none stays open. */
    deadline = now_ms() + WAIT_MS;
    for (;;) {
        struct cr_replay_info info = replay_info(&pl);
        if (info.sessions_served + info.clients_dropped == 2) {
            assert_int_equal(info.sessions_active, 0);
            break;
        }
        assert_true(now_ms() < deadline);
        usleep(1000);
    }
    zmq_close(dealer);
    plane_stop(&pl);
}

/* Pulls the next BATCH (skipping nothing else) and checks its seq. */
static void expect_batch(cr_events_follower *f, uint64_t seq) {
    cr_events_item item;
    assert_int_equal(cr_events_follow_next(f, WAIT_MS, &item), CR_OK);
    assert_int_equal(item.kind, CR_EVENTS_ITEM_BATCH);
    assert_int_equal(item.seq, seq);
    assert_true(item.len > 10);
}

/* The follower: replay from 0 while publishing goes on, then live, with
 * every seq exactly once; then a restart of the plane (seq from 0 again) is
 * reported and the new life is delivered from 0. */
static void test_follower_replay_live_and_restart(void **state) {
    (void)state;
    struct plane pl;
    plane_config(&pl, "follow");
    pl.config.event_batch_max = 1;
    plane_start(&pl);
    for (int i = 0; i < 30; i++) publish(&pl, CR_STORE_EVENT_BLOCK_UPDATE, "f");
    receive_events(&pl, 30);
    wait_kept(&pl, pl.next_seq - 1);
    cr_events_follow_config fc = {.sub_endpoint = pl.config.event_address,
                                  .replay_endpoint = pl.config.replay_address,
                                  .topic = pl.config.event_topic,
                                  .replay_from_start = true,
                                  .start_seq = 0};
    cr_events_follower *f = NULL;
    assert_int_equal(cr_events_follow_create(&fc, &f), CR_OK);
    uint64_t expect = 0;
    cr_events_item item;
    for (int i = 0; i < 200; i++) { /* publish while the follower replays */
        publish(&pl, CR_STORE_EVENT_BLOCK_STORE, "live");
        /* 1 ms each: the publishing outlasts the SUB's joining, so live
         * batches arrive during the replay too. */
        if (cr_events_follow_next(f, 1, &item) == CR_OK) {
            assert_int_equal(item.kind, CR_EVENTS_ITEM_BATCH);
            assert_int_equal(item.seq, expect++);
        }
    }
    receive_events(&pl, 200);
    while (expect < pl.next_seq) expect_batch(f, expect++);
    assert_int_equal(cr_events_follow_next(f, 50, &item), CR_ERR_TIMEOUT); /* no duplicates */

    /* A new plane on the same endpoints numbers from 0 again. */
    plane_stop(&pl);
    plane_config(&pl, "follow");
    pl.config.event_batch_max = 1;
    plane_start(&pl);
    /* Publish until the follower's SUB has reconnected and noticed. */
    uint64_t deadline = now_ms() + WAIT_MS, published = 0;
    int rc;
    while ((rc = cr_events_follow_next(f, 20, &item)) == CR_ERR_TIMEOUT) {
        assert_true(now_ms() < deadline);
        publish(&pl, CR_STORE_EVENT_BLOCK_STORE, "second");
        published++;
    }
    assert_int_equal(rc, CR_OK);
    assert_int_equal(item.kind, CR_EVENTS_ITEM_RESTART);
    assert_int_equal(item.gap_first, expect - 1);
    receive_events(&pl, published);
    /* The new life from 0: replayed up to the live batch, then live. */
    for (uint64_t seq = 0; seq < pl.next_seq; seq++) expect_batch(f, seq);
    cr_events_follow_destroy(f);
    plane_stop(&pl);
}

static void test_bind_failure(void **state) {
    (void)state;
    void *zctx = zmq_ctx_new();
    void *holder = zmq_socket(zctx, ZMQ_PUB);
    assert_int_equal(zmq_bind(holder, "tcp://127.0.0.1:*"), 0);
    char endpoint[128];
    size_t len = sizeof(endpoint);
    assert_int_equal(zmq_getsockopt(holder, ZMQ_LAST_ENDPOINT, endpoint, &len), 0);
    struct plane pl;
    plane_config(&pl, "bind");
    snprintf(pl.config.event_address, sizeof(pl.config.event_address), "%s", endpoint);
    void *st = NULL;
    assert_int_equal(cr_publisher_def.create(&pl.config, &st), CR_ERR_IO);
    assert_null(st);
    snprintf(pl.config.replay_address, sizeof(pl.config.replay_address), "%s", endpoint);
    assert_int_equal(cr_replay_def.create(&pl.config, &st), CR_ERR_IO);
    assert_null(st);
    zmq_close(holder);
    zmq_ctx_term(zctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frames_and_event_counts),
        cmocka_unit_test(test_batch_by_count),
        cmocka_unit_test(test_lone_event_flushed_by_time),
        cmocka_unit_test(test_flush_window_counts_from_the_event),
        cmocka_unit_test(test_seq_contiguous_under_load),
        cmocka_unit_test(test_replay_ranges),
        cmocka_unit_test(test_replay_before_oldest_and_malformed),
        cmocka_unit_test(test_many_replay_clients_while_publishing),
        cmocka_unit_test(test_vanished_replay_client),
        cmocka_unit_test(test_follower_replay_live_and_restart),
        cmocka_unit_test(test_bind_failure),
    };
    return cmocka_run_group_tests_name("event_plane", tests, NULL, NULL);
}
