/* bench/ring: the actor runtime's channels.
 *
 *   actor→actor one way     one actor sends N messages to another (both pinned)
 *   actor↔actor ping-pong   round trip of one message each way
 *   N threads → one actor   aggregate throughput, N = 1, 2, 4, 8
 *   ask (awake)             cr_ask from a non-actor thread, receiver spinning
 *   ask (parked)            the same with the receiver asleep before each ask
 *
 * Usage: ring [--quick] [--no-pin]
 *   --quick: 10x fewer messages, for a smoke run; --no-pin: actors unpinned */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>

#include "runtime/runtime.h"
#include "crescent/error.h"
#include "harness.h"

#define MSG_BENCH_RUN (CR_MSG_SUBSYSTEM_BASE + 1)  /* to the sender actor: send body.u64[0] msgs */
#define MSG_BENCH_DATA (CR_MSG_SUBSYSTEM_BASE + 2) /* counted by the sink */
#define MSG_BENCH_PING (CR_MSG_SUBSYSTEM_BASE + 3) /* sink answers with PONG to body.ptr[0] */
#define MSG_BENCH_PONG (CR_MSG_SUBSYSTEM_BASE + 4)

struct sink {
    uint64_t received;
    uint64_t expected;
    _Atomic uint64_t done_ns; /* set when `expected` messages have arrived */
};

struct source {
    struct cr_actor *target;
    struct bench_latency *rtt;
    uint64_t ping_sent_ns;
    uint64_t pings_left;
    _Atomic int pings_done;
};

static void sink_handle(struct cr_actor *self, void *arg, struct cr_msg *msg) {
    (void)self;
    struct sink *st = arg;
    if (msg->type == MSG_BENCH_DATA) {
        if (++st->received == st->expected) atomic_store(&st->done_ns, bench_now_ns());
    } else if (msg->type == MSG_BENCH_PING) {
        struct cr_msg pong = {.type = MSG_BENCH_PONG};
        while (cr_send(msg->body.ptr[0], &pong) == CR_ERR_AGAIN) {
        }
    } else if (msg->type == CR_MSG_TEST_ECHO) {
        struct cr_msg_test_echo *body = CR_MSG_BODY(msg, struct cr_msg_test_echo);
        *body->out = body->value;
        cr_reply(msg, CR_OK);
    }
}

static void source_ping(struct source *st, struct cr_actor *self) {
    struct cr_msg ping = {.type = MSG_BENCH_PING};
    ping.body.ptr[0] = self;
    st->ping_sent_ns = bench_now_ns();
    while (cr_send(st->target, &ping) == CR_ERR_AGAIN) {
    }
}

static void source_handle(struct cr_actor *self, void *arg, struct cr_msg *msg) {
    struct source *st = arg;
    if (msg->type == MSG_BENCH_RUN) {
        struct cr_msg data = {.type = MSG_BENCH_DATA};
        for (uint64_t i = 0; i < msg->body.u64[0]; i++) {
            data.body.u64[0] = i;
            while (cr_send(st->target, &data) == CR_ERR_AGAIN) {
            }
        }
    } else if (msg->type == MSG_BENCH_PING) { /* start of the ping-pong series */
        st->pings_left = msg->body.u64[0];
        source_ping(st, self);
    } else if (msg->type == MSG_BENCH_PONG) {
        bench_latency_add(st->rtt, bench_now_ns() - st->ping_sent_ns);
        if (--st->pings_left > 0) source_ping(st, self);
        else atomic_store(&st->pings_done, 1);
    }
}

static const struct cr_actor_ops sink_ops = {.handle = sink_handle};
static const struct cr_actor_ops source_ops = {.handle = source_handle};

static bool pin_threads = true;

static struct cr_runtime *runtime_new(uint64_t spin_ns) {
    struct cr_runtime_config config;
    cr_runtime_config_default(&config);
    config.spin_ns = spin_ns;
    config.spin_adaptive = false; /* the channel's cost, with the spin as configured */
    config.pin_threads = pin_threads;
    struct cr_runtime *rt = NULL;
    int rc = cr_runtime_create(&config, &rt);
    assert(rc == CR_OK);
    (void)rc;
    return rt;
}

static void wait_done(_Atomic uint64_t *done_ns) {
    while (atomic_load(done_ns) == 0) usleep(1000); /* rarely: the main thread must not steal the actors' CPUs */
}

static void bench_actor_to_actor(uint64_t count) {
    struct cr_runtime *rt = runtime_new(20000);
    struct sink sink = {.expected = count};
    struct source source = {0};
    struct cr_actor *sink_actor, *source_actor;
    cr_runtime_spawn(rt, "sink", &sink_ops, &sink, &sink_actor);
    source.target = sink_actor;
    cr_runtime_spawn(rt, "source", &source_ops, &source, &source_actor);

    struct cr_msg run = {.type = MSG_BENCH_RUN};
    run.body.u64[0] = count;
    uint64_t start = bench_now_ns();
    cr_send(source_actor, &run);
    wait_done(&sink.done_ns);
    bench_report(pin_threads ? "actor->actor one way (pinned)" : "actor->actor one way (unpinned)", count, atomic_load(&sink.done_ns) - start, NULL);
    if (getenv("RING_BENCH_DEBUG")) {
        struct cr_actor_stats st = {0};
        struct cr_msg q = {.type = CR_MSG_STATS};
        CR_MSG_BODY(&q, struct cr_msg_stats)->out = &st;
        cr_ask(sink_actor, &q, 1000000000u);
        printf("  sink: ring_full %llu parks %llu wakes %llu send_failures %llu\n",
               (unsigned long long)st.ring_full, (unsigned long long)st.parks,
               (unsigned long long)st.wakes, (unsigned long long)st.send_failures);
    }

    struct bench_latency rtt;
    uint64_t pings = count / 100 > 100000 ? 100000 : count / 100;
    bench_latency_init(&rtt, pings);
    source.rtt = &rtt;
    struct cr_msg ping = {.type = MSG_BENCH_PING};
    ping.body.u64[0] = pings;
    start = bench_now_ns();
    cr_send(source_actor, &ping);
    while (!atomic_load(&source.pings_done)) usleep(1000);
    bench_report("actor<->actor ping-pong round trip", pings, bench_now_ns() - start, &rtt);
    bench_latency_free(&rtt);
    cr_runtime_destroy(rt);
}

struct producer {
    struct cr_actor *target;
    uint64_t count;
    pthread_barrier_t *barrier;
};

static void *producer_main(void *arg) {
    struct producer *p = arg;
    struct cr_msg data = {.type = MSG_BENCH_DATA};
    pthread_barrier_wait(p->barrier);
    for (uint64_t i = 0; i < p->count; i++) {
        data.body.u64[0] = i;
        while (cr_send(p->target, &data) == CR_ERR_AGAIN) {
        }
    }
    cr_runtime_thread_release();
    return NULL;
}

static void bench_threads_to_actor(uint32_t threads, uint64_t total) {
    struct cr_runtime *rt = runtime_new(20000);
    struct sink sink = {.expected = total / threads * threads};
    struct cr_actor *sink_actor;
    cr_runtime_spawn(rt, "sink", &sink_ops, &sink, &sink_actor);
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, threads + 1);
    pthread_t tids[8];
    struct producer producers[8];
    for (uint32_t i = 0; i < threads; i++) {
        producers[i] = (struct producer){sink_actor, total / threads, &barrier};
        pthread_create(&tids[i], NULL, producer_main, &producers[i]);
    }
    pthread_barrier_wait(&barrier);
    uint64_t start = bench_now_ns();
    wait_done(&sink.done_ns);
    char name[64];
    snprintf(name, sizeof(name), "%u thread(s) -> one actor", threads);
    bench_report(name, sink.expected, atomic_load(&sink.done_ns) - start, NULL);
    for (uint32_t i = 0; i < threads; i++) pthread_join(tids[i], NULL);
    pthread_barrier_destroy(&barrier);
    cr_runtime_destroy(rt);
}

static void bench_ask(const char *name, uint64_t spin_ns, uint64_t asks, bool let_it_park) {
    struct cr_runtime *rt = runtime_new(spin_ns);
    struct sink sink = {0};
    struct cr_actor *sink_actor;
    cr_runtime_spawn(rt, "sink", &sink_ops, &sink, &sink_actor);
    struct bench_latency lat;
    bench_latency_init(&lat, asks);
    uint64_t busy_ns = 0;
    for (uint64_t i = 0; i < asks; i++) {
        if (let_it_park) usleep(200); /* far past the receiver's spin: it is asleep */
        uint64_t out = 0;
        struct cr_msg msg = {.type = CR_MSG_TEST_ECHO};
        *CR_MSG_BODY(&msg, struct cr_msg_test_echo) = (struct cr_msg_test_echo){i, &out};
        uint64_t t0 = bench_now_ns();
        int rc = cr_ask(sink_actor, &msg, 1000000000u);
        uint64_t took = bench_now_ns() - t0;
        assert(rc == CR_OK && out == i);
        (void)rc;
        busy_ns += took;
        bench_latency_add(&lat, took);
    }
    bench_report(name, asks, busy_ns, &lat);
    bench_latency_free(&lat);
    cr_runtime_destroy(rt);
    cr_runtime_thread_release();
}

int main(int argc, char **argv) {
    bool quick = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) quick = true;
        else if (strcmp(argv[i], "--no-pin") == 0) pin_threads = false;
    }
    uint64_t scale = quick ? 10 : 1;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    printf("bench/ring: %ld online CPUs; one line per case (ops/s = messages or asks per second)\n",
           cpus);
    bench_actor_to_actor(50000000 / scale);
    for (uint32_t threads = 1; threads <= 8; threads *= 2)
        bench_threads_to_actor(threads, 20000000 / scale);
    bench_ask("ask round trip, receiver awake (spinning)", 1000000000u, 200000 / scale, false);
    bench_ask("ask round trip, receiver parked", 0, 5000 / scale, true);
    return 0;
}
