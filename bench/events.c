/* Benchmark: the event plane (publisher + replay actors) on TCP loopback.
 *
 * The publisher and replay actors run in a runtime in this process, fed
 * CR_MSG_STORE_EVENT from the main thread (as the segments actor would);
 * one SUB on a receiver thread reads every batch over tcp://127.0.0.1.
 * Events are BlockUpdateEvents (key of 26 bytes carrying the send time, one
 * replica), batches of 50, flush 1 ms, PUB high-water mark 100000.
 *
 * Cases:
 *   throughput: N events as fast as the producer can hand them over; ops =
 *               events received by the subscriber (all of them: loss fails
 *               the run) over the time from the first send to the last receipt.
 *   rate R:     events paced at R/s (in 100 µs steps) for a fixed time;
 *               latency = receipt time - send time of every event; the line
 *               says "sustained" when the receiver got every event and kept
 *               within 5% of R.
 *   replay:     10000 kept batches (500000 events) replayed to one DEALER,
 *               from the request to the end marker.
 *
 * usage: events [events_for_throughput]   (default 2000000) */
#include <msgpack.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "harness.h"
#include "runtime/runtime.h"
#include "actors/subsystems.h"
#include "crescent/error.h"
#include "daemon/config.h"
#include "msgs/event_msgs.h"
#include "msgs/store_msgs.h"

struct plane {
    struct cr_daemon_config config;
    struct cr_runtime *rt;
    struct cr_subsystems peers;
};

struct receiver {
    void *zctx;
    void *sub;
    const char *endpoint;
    uint64_t expected_events;
    _Atomic uint64_t events;
    _Atomic uint64_t batches;
    _Atomic uint64_t seq_errors;
    _Atomic uint64_t last_ns;
    _Atomic int stop;
    struct bench_latency *latency; /* NULL: count only */
    pthread_t thread;
};

static int free_port(void) {
    void *ctx = zmq_ctx_new(), *s = zmq_socket(ctx, ZMQ_PUB);
    char ep[64];
    size_t len = sizeof(ep);
    zmq_bind(s, "tcp://127.0.0.1:*");
    zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, ep, &len);
    zmq_close(s);
    zmq_ctx_term(ctx);
    return atoi(strrchr(ep, ':') + 1);
}

static void plane_start(struct plane *pl, uint32_t replay_batches) {
    memset(pl, 0, sizeof(*pl));
    cr_daemon_config_default(&pl->config);
    snprintf(pl->config.event_address, sizeof(pl->config.event_address), "tcp://127.0.0.1:%d",
             free_port());
    snprintf(pl->config.replay_address, sizeof(pl->config.replay_address), "tcp://127.0.0.1:%d",
             free_port());
    pl->config.replay_batches = replay_batches;
    pl->config.replay_bytes_mb = 1024;
    struct cr_runtime_config rc;
    cr_runtime_config_default(&rc);
    rc.pin_threads = false;
    if (cr_runtime_create(&rc, &pl->rt) != CR_OK) abort();
    const struct cr_subsystem_def *defs[2] = {&cr_publisher_def, &cr_replay_def};
    enum cr_subsystem which[2] = {CR_SUBSYSTEM_PUBLISHER, CR_SUBSYSTEM_REPLAY};
    for (int i = 0; i < 2; i++) {
        if (defs[i]->create(&pl->config, &pl->peers.states[which[i]]) != CR_OK ||
            cr_runtime_spawn(pl->rt, defs[i]->name, defs[i]->ops, pl->peers.states[which[i]],
                             &pl->peers.actors[which[i]]) != CR_OK)
            abort();
    }
    struct cr_msg wire = {.type = CR_MSG_WIRE};
    wire.body.ptr[0] = &pl->peers;
    if (cr_send(pl->peers.actors[CR_SUBSYSTEM_PUBLISHER], &wire) != CR_OK) abort();
}

static void plane_stop(struct plane *pl) {
    cr_runtime_destroy(pl->rt);
    cr_publisher_def.destroy(pl->peers.states[CR_SUBSYSTEM_PUBLISHER]);
    cr_replay_def.destroy(pl->peers.states[CR_SUBSYSTEM_REPLAY]);
}

static void publish(struct plane *pl, uint64_t sent_ns) {
    static const cr_store_replica replica = {CR_REPLICA_MEMORY, {"tcp://10.0.0.1:6000", 19}};
    char key[32];
    int len = snprintf(key, sizeof(key), "t%020llu-abcd", (unsigned long long)sent_ns);
    cr_store_event_chain *chain;
    cr_event_str k = {key, (size_t)len};
    size_t need;
    /* A chain of one event in a 256-byte block, as segments sends a round of
     * one store change. */
    if (cr_store_event_chain_new(256, &chain) != CR_OK ||
        cr_store_event_chain_add(chain, CR_STORE_EVENT_BLOCK_UPDATE, k, &replica, 1, NULL,
                                 &need) != CR_OK)
        abort();
    struct cr_msg msg = {.type = CR_MSG_STORE_EVENT};
    CR_MSG_BODY(&msg, struct cr_msg_store_event)->chain = chain;
    while (cr_send(pl->peers.actors[CR_SUBSYSTEM_PUBLISHER], &msg) != CR_OK) {
    }
}

/* Event count of a payload [ts, [events]] from its array header. */
static uint64_t payload_events(const uint8_t *p, size_t len) {
    if (len < 11) return 0;
    uint8_t h = p[10];
    if ((h & 0xf0) == 0x90) return h & 0x0f;
    if (h == 0xdc && len >= 13) return (uint64_t)p[11] << 8 | p[12];
    return 0;
}

/* Latency of every event: its key carries the send time. */
static void sample_latency(struct receiver *r, const uint8_t *p, size_t len, uint64_t now) {
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    if (msgpack_unpack_next(&up, (const char *)p, len, NULL) == MSGPACK_UNPACK_SUCCESS) {
        msgpack_object events = up.data.via.array.ptr[1];
        for (uint32_t i = 0; i < events.via.array.size; i++) {
            msgpack_object key = events.via.array.ptr[i].via.array.ptr[1];
            uint64_t sent = strtoull(key.via.str.ptr + 1, NULL, 10);
            bench_latency_add(r->latency, now - sent);
        }
    }
    msgpack_unpacked_destroy(&up);
}

static void *receiver_main(void *arg) {
    struct receiver *r = arg;
    uint64_t next_seq = 0;
    bool first = true;
    while (!atomic_load(&r->stop) && atomic_load(&r->events) < r->expected_events) {
        zmq_msg_t parts[3];
        zmq_pollitem_t item = {r->sub, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&item, 1, 100) <= 0) continue;
        for (int i = 0; i < 3; i++) {
            zmq_msg_init(&parts[i]);
            zmq_msg_recv(&parts[i], r->sub, 0);
        }
        uint64_t now = bench_now_ns();
        const uint8_t *s = zmq_msg_data(&parts[1]);
        uint64_t seq = 0;
        for (int i = 0; i < 8; i++) seq = seq << 8 | s[i];
        if (!first && seq != next_seq) atomic_fetch_add(&r->seq_errors, 1);
        first = false;
        next_seq = seq + 1;
        const uint8_t *p = zmq_msg_data(&parts[2]);
        size_t len = zmq_msg_size(&parts[2]);
        if (r->latency != NULL) sample_latency(r, p, len, now);
        atomic_fetch_add(&r->events, payload_events(p, len));
        atomic_fetch_add(&r->batches, 1);
        atomic_store(&r->last_ns, now);
        for (int i = 0; i < 3; i++) zmq_msg_close(&parts[i]);
    }
    return NULL;
}

/* Connects a SUB and waits until it sees a probe event (slow joiner). */
static void receiver_start(struct receiver *r, struct plane *pl) {
    int zero = 0;
    r->zctx = zmq_ctx_new();
    r->sub = zmq_socket(r->zctx, ZMQ_SUB);
    zmq_setsockopt(r->sub, ZMQ_RCVHWM, &zero, sizeof(zero));
    zmq_setsockopt(r->sub, ZMQ_SUBSCRIBE, "", 0);
    zmq_connect(r->sub, pl->config.event_address);
    for (;;) {
        publish(pl, bench_now_ns());
        zmq_pollitem_t item = {r->sub, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&item, 1, 20) > 0) break;
    }
    /* Drain the probes. */
    zmq_pollitem_t item = {r->sub, 0, ZMQ_POLLIN, 0};
    while (zmq_poll(&item, 1, 100) > 0) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        zmq_msg_recv(&m, r->sub, 0);
        zmq_msg_close(&m);
    }
    if (pthread_create(&r->thread, NULL, receiver_main, r) != 0) abort();
}

static void receiver_stop(struct receiver *r) {
    atomic_store(&r->stop, 1);
    pthread_join(r->thread, NULL);
    int zero = 0;
    zmq_setsockopt(r->sub, ZMQ_LINGER, &zero, sizeof(zero));
    zmq_close(r->sub);
    zmq_ctx_term(r->zctx);
}

/* Waits until the receiver has `events` or nothing came for 2 s. */
static void receiver_wait(struct receiver *r, uint64_t events) {
    uint64_t last = 0, idle_since = bench_now_ns();
    while (atomic_load(&r->events) < events) {
        uint64_t got = atomic_load(&r->events);
        if (got != last) {
            last = got;
            idle_since = bench_now_ns();
        } else if (bench_now_ns() - idle_since > 2000000000u) {
            return;
        }
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

static void case_throughput(uint64_t events) {
    struct plane pl;
    plane_start(&pl, 10000);
    struct receiver r = {.expected_events = events};
    receiver_start(&r, &pl);
    uint64_t start = bench_now_ns();
    for (uint64_t i = 0; i < events; i++) publish(&pl, 0);
    uint64_t sent_ns = bench_now_ns() - start;
    receiver_wait(&r, events);
    uint64_t elapsed = atomic_load(&r.last_ns) - start;
    bench_report("events: publish → 1 SUB, as fast as possible", atomic_load(&r.events), elapsed,
                 NULL);
    printf("  sent %llu in %.3f s (%.0f/s handed over), received %llu events in %llu batches, "
           "seq errors %llu%s\n",
           (unsigned long long)events, sent_ns / 1e9, events / (sent_ns / 1e9),
           (unsigned long long)atomic_load(&r.events), (unsigned long long)atomic_load(&r.batches),
           (unsigned long long)atomic_load(&r.seq_errors),
           atomic_load(&r.events) == events ? "" : "  LOSS");
    receiver_stop(&r);
    plane_stop(&pl);
}

/* Paced at `rate` events/s for `seconds`; returns true if sustained. */
static bool case_rate(uint64_t rate, double seconds) {
    struct plane pl;
    plane_start(&pl, 10000);
    uint64_t events = (uint64_t)(rate * seconds);
    struct bench_latency lat;
    bench_latency_init(&lat, events + 16);
    struct receiver r = {.expected_events = events, .latency = &lat};
    receiver_start(&r, &pl); /* the thread starts after the probes are drained */
    const uint64_t step_ns = 100000;
    double per_step = (double)rate * step_ns / 1e9, owed = 0;
    uint64_t start = bench_now_ns(), sent = 0;
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    while (sent < events) {
        owed += per_step;
        while (owed >= 1 && sent < events) {
            publish(&pl, bench_now_ns());
            sent++;
            owed -= 1;
        }
        next.tv_nsec += (long)step_ns;
        if (next.tv_nsec >= 1000000000) {
            next.tv_sec++;
            next.tv_nsec -= 1000000000;
        }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
    }
    double send_s = (bench_now_ns() - start) / 1e9;
    receiver_wait(&r, events);
    uint64_t got = atomic_load(&r.events);
    bool sustained = got == events && send_s <= seconds * 1.05;
    char name[96];
    snprintf(name, sizeof(name), "events: paced %llu/s%s", (unsigned long long)rate,
             sustained ? " (sustained)" : " (NOT sustained)");
    receiver_stop(&r);
    bench_report(name, got, (uint64_t)(send_s * 1e9), &lat);
    if (!sustained)
        printf("  received %llu of %llu, sending took %.3f s for %.3f s planned\n",
               (unsigned long long)got, (unsigned long long)events, send_s, seconds);
    bench_latency_free(&lat);
    plane_stop(&pl);
    return sustained;
}

static uint64_t replay_info_newest(struct plane *pl) {
    struct cr_replay_info info;
    struct cr_msg msg = {.type = CR_MSG_REPLAY_INFO};
    CR_MSG_BODY(&msg, struct cr_msg_replay_info)->out = &info;
    if (cr_ask(pl->peers.actors[CR_SUBSYSTEM_REPLAY], &msg, 2000000000u) != CR_OK) abort();
    return info.has_batches ? info.newest_seq + 1 : 0;
}

static void case_replay(void) {
    const uint64_t batches = 10000;
    struct plane pl;
    plane_start(&pl, (uint32_t)batches);
    for (uint64_t i = 0; i < batches * 50; i++) publish(&pl, 0);
    while (replay_info_newest(&pl) < batches) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    void *zctx = zmq_ctx_new(), *dealer = zmq_socket(zctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(dealer, ZMQ_RCVHWM, &zero, sizeof(zero));
    zmq_connect(dealer, pl.config.replay_address);
    uint8_t seq0[8] = {0};
    uint64_t start = bench_now_ns(), got = 0;
    zmq_send(dealer, "", 0, ZMQ_SNDMORE);
    zmq_send(dealer, seq0, 8, 0);
    for (;;) {
        zmq_msg_t parts[3];
        for (int i = 0; i < 3; i++) {
            zmq_msg_init(&parts[i]);
            zmq_msg_recv(&parts[i], dealer, 0);
        }
        bool end = zmq_msg_size(&parts[1]) == 8 && ((uint8_t *)zmq_msg_data(&parts[1]))[0] == 0xff;
        for (int i = 0; i < 3; i++) zmq_msg_close(&parts[i]);
        if (end) break;
        got++;
    }
    uint64_t elapsed = bench_now_ns() - start;
    bench_report("events: replay 10000 batches (500k events) to 1 DEALER", got, elapsed, NULL);
    printf("  %llu batches in %.2f ms\n", (unsigned long long)got, elapsed / 1e6);
    zmq_close(dealer);
    zmq_ctx_term(zctx);
    plane_stop(&pl);
}

int main(int argc, char **argv) {
    uint64_t events = argc > 1 ? strtoull(argv[1], NULL, 10) : 2000000;
    case_throughput(events);
    static const uint64_t rates[] = {10000, 100000, 250000, 500000, 1000000, 2000000};
    uint64_t best = 0;
    for (size_t i = 0; i < sizeof(rates) / sizeof(rates[0]); i++) {
        double seconds = rates[i] <= 100000 ? 2.0 : 1.0;
        if (case_rate(rates[i], seconds)) best = rates[i];
    }
    printf("maximum sustained paced rate: %llu events/s\n", (unsigned long long)best);
    case_replay();
    cr_runtime_thread_release();
    return 0;
}
