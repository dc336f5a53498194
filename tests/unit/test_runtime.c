/* Runtime tests: ordering, loss, parking, ask, backpressure, shutdown, timers.
 *
 * These run under TSan too (zig build tsan).  No test sleeps for timing:
 * waits are for observable states (counters, flags), bounded by a deadline
 * that only a hang would reach. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/runtime.h"
#include "crescent/error.h"

#define PRODUCERS_MAX 16
#define MSG_TEST_BLOCK (CR_MSG_SUBSYSTEM_BASE + 1)  /* ask: block until released */
#define MSG_TEST_TIMER (CR_MSG_SUBSYSTEM_BASE + 2)  /* ask: arm a timer (body u64 delay) */
#define MSG_TEST_FIRED (CR_MSG_SUBSYSTEM_BASE + 3)  /* the timer's message */
#define MSG_TEST_QUERY (CR_MSG_SUBSYSTEM_BASE + 4)  /* ask: copy the counters out */
#define MSG_TEST_REARM (CR_MSG_SUBSYSTEM_BASE + 5)  /* timer that re-arms itself with delay 0 */

struct test_state {
    uint64_t next_seq[PRODUCERS_MAX];
    uint64_t received;
    _Atomic uint64_t received_seen; /* = received, for a thread that must not ask */
    uint64_t order_errors;
    uint64_t fired;
    _Atomic uint64_t discarded;
    /* MSG_TEST_BLOCK: the actor spins here until the test releases it. */
    _Atomic int blocked;
    _Atomic int release;
    bool slow;        /* CR_MSG_TEST_SEQ takes ~2 us, like real work */
    uint64_t rearms;  /* MSG_TEST_REARM fired */
};

struct test_query {
    uint64_t received, order_errors, fired;
};

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void test_handle(struct cr_actor *self, void *arg, struct cr_msg *msg) {
    struct test_state *st = arg;
    switch (msg->type) {
    case CR_MSG_TEST_SEQ: {
        struct cr_msg_test_seq *body = CR_MSG_BODY(msg, struct cr_msg_test_seq);
        if (body->seq != st->next_seq[body->producer]) st->order_errors++;
        st->next_seq[body->producer] = body->seq + 1;
        st->received++;
        atomic_store(&st->received_seen, st->received);
        if (st->slow) {
            struct timespec t0, t1;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            do clock_gettime(CLOCK_MONOTONIC, &t1);
            while ((t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec) < 2000);
        }
        break;
    }
    case MSG_TEST_REARM: {
        st->rearms++;
        struct cr_msg again = {.type = MSG_TEST_REARM};
        cr_actor_timer_after(self, 0, &again, NULL);
        break;
    }
    case CR_MSG_TEST_ECHO: {
        struct cr_msg_test_echo *body = CR_MSG_BODY(msg, struct cr_msg_test_echo);
        *body->out = body->value;
        cr_reply(msg, CR_OK);
        break;
    }
    case MSG_TEST_BLOCK:
        atomic_store(&st->blocked, 1);
        while (!atomic_load(&st->release)) sched_yield();
        atomic_store(&st->blocked, 0);
        if (msg->flags & CR_MSG_ASK) cr_reply(msg, CR_OK);
        break;
    case MSG_TEST_TIMER: {
        struct cr_msg fire = {.type = MSG_TEST_FIRED};
        int rc = cr_actor_timer_after(self, msg->body.u64[0], &fire, NULL);
        cr_reply(msg, rc);
        break;
    }
    case MSG_TEST_FIRED:
        st->fired++;
        break;
    case MSG_TEST_QUERY: {
        struct test_query *out = msg->body.ptr[0];
        out->received = st->received;
        out->order_errors = st->order_errors;
        out->fired = st->fired;
        cr_reply(msg, CR_OK);
        break;
    }
    default:
        fail_msg("unexpected message type %u", msg->type);
    }
}

static void test_discard(void *arg, struct cr_msg *msg) {
    (void)msg;
    struct test_state *st = arg;
    atomic_fetch_add(&st->discarded, 1);
}

static const struct cr_actor_ops test_ops = {
    .handle = test_handle,
    .discard = test_discard,
};

struct fixture {
    struct cr_runtime *rt;
    struct cr_actor *actor;
    struct test_state state;
};

/* The same actor parking with a fence instead of a membarrier (park_fence). */
static const struct cr_actor_ops test_fence_ops = {
    .handle = test_handle,
    .discard = test_discard,
    .park_fence = true,
};

static struct fixture *fixture_new_ops(const struct cr_runtime_config *config,
                                       const struct cr_actor_ops *ops) {
    struct fixture *fx = calloc(1, sizeof(*fx));
    assert_non_null(fx);
    assert_int_equal(cr_runtime_create(config, &fx->rt), CR_OK);
    assert_int_equal(cr_runtime_spawn(fx->rt, "test", ops, &fx->state, &fx->actor), CR_OK);
    return fx;
}

static struct fixture *fixture_new(const struct cr_runtime_config *config) {
    return fixture_new_ops(config, &test_ops);
}

static void fixture_free(struct fixture *fx) {
    cr_runtime_destroy(fx->rt);
    cr_runtime_thread_release();
    free(fx);
}

static struct test_query query(struct fixture *fx) {
    struct test_query out = {0};
    struct cr_msg msg = {.type = MSG_TEST_QUERY};
    msg.body.ptr[0] = &out;
    assert_int_equal(cr_ask(fx->actor, &msg, 5000000000u), CR_OK);
    return out;
}

/* Messages from different threads travel on different rings, so a query
 * from this thread is not ordered after them: wait for the count instead. */
static struct test_query wait_received(struct fixture *fx, uint64_t expected) {
    uint64_t deadline = now_ns() + 10000000000u;
    struct test_query q = query(fx);
    while (q.received < expected) {
        assert_true(now_ns() < deadline);
        sched_yield();
        q = query(fx);
    }
    assert_int_equal(q.received, expected); /* and never more */
    return q;
}

static struct cr_actor_stats stats(struct cr_actor *actor) {
    struct cr_actor_stats out = {0};
    struct cr_msg msg = {.type = CR_MSG_STATS};
    CR_MSG_BODY(&msg, struct cr_msg_stats)->out = &out;
    assert_int_equal(cr_ask(actor, &msg, 5000000000u), CR_OK);
    return out;
}

/* ------------------------------------------------------------------------ */

struct producer_arg {
    struct cr_actor *actor;
    uint32_t producer;
    uint64_t count;
    uint64_t sent_ok;
    bool stop_on_shutdown;
};

static void *producer_main(void *arg) {
    struct producer_arg *p = arg;
    for (uint64_t seq = 0; seq < p->count; seq++) {
        struct cr_msg msg = {.type = CR_MSG_TEST_SEQ};
        struct cr_msg_test_seq *body = CR_MSG_BODY(&msg, struct cr_msg_test_seq);
        body->producer = p->producer;
        body->seq = seq;
        int rc;
        while ((rc = cr_send(p->actor, &msg)) == CR_ERR_AGAIN) {
        }
        if (rc == CR_ERR_SHUTDOWN && p->stop_on_shutdown) break;
        assert_int_equal(rc, CR_OK);
        p->sent_ok++;
    }
    return NULL;
}

static void *producer_thread(void *arg) {
    producer_main(arg);
    cr_runtime_thread_release();
    return NULL;
}

static void run_producers(struct fixture *fx, uint32_t producers, uint64_t per_producer) {
    pthread_t threads[PRODUCERS_MAX];
    struct producer_arg args[PRODUCERS_MAX];
    assert_true(producers <= PRODUCERS_MAX);
    for (uint32_t i = 0; i < producers; i++) {
        args[i] = (struct producer_arg){.actor = fx->actor, .producer = i, .count = per_producer};
        assert_int_equal(pthread_create(&threads[i], NULL, producer_thread, &args[i]), 0);
    }
    for (uint32_t i = 0; i < producers; i++) pthread_join(threads[i], NULL);
}

static void test_fifo_per_sender(void **unused) {
    (void)unused;
    struct cr_runtime_config config;
    cr_runtime_config_default(&config);
    struct fixture *fx = fixture_new(&config);
    run_producers(fx, 4, 50000);
    struct test_query q = wait_received(fx, 4 * 50000);
    assert_int_equal(q.order_errors, 0);
    for (int i = 0; i < 4; i++) assert_int_equal(fx->state.next_seq[i], 50000);
    fixture_free(fx);
}

static void test_no_loss_more_producers_than_cores(void **unused) {
    (void)unused;
    struct cr_runtime_config config;
    cr_runtime_config_default(&config);
    config.ring_slots = 64; /* small rings: producers hit full and must wait, not drop */
    struct fixture *fx = fixture_new(&config);
    run_producers(fx, PRODUCERS_MAX, 20000);
    struct test_query q = wait_received(fx, (uint64_t)PRODUCERS_MAX * 20000);
    assert_int_equal(q.order_errors, 0);
    /* Threads exited: their rings are retired once drained, leaving the query ring. The
     * actor retires them when it is about to park, which on a loaded machine can come a
     * while after the last message: wait for it, bounded. */
    uint64_t deadline = now_ns() + 10000000000u;
    struct cr_actor_stats s = stats(fx->actor);
    while (s.rings > 2 && now_ns() < deadline) {
        usleep(1000);
        s = stats(fx->actor);
    }
    assert_true(s.rings <= 2);
    fixture_free(fx);
}

/* Waits until the actor is asleep (its parks counter moved past `parks`). */
static void wait_parked(struct fixture *fx, uint64_t parks_before) {
    uint64_t deadline = now_ns() + 5000000000u;
    while (stats(fx->actor).parks <= parks_before) {
        assert_true(now_ns() < deadline);
        sched_yield();
    }
}

static void park_and_wake(const struct cr_actor_ops *ops) {
    struct cr_runtime_config config;
    cr_runtime_config_default(&config);
    config.spin_ns = 1000;
    struct fixture *fx = fixture_new_ops(&config, ops);
    uint64_t expected = 0;
    for (int round = 0; round < 50; round++) {
        struct cr_actor_stats before = stats(fx->actor);
        wait_parked(fx, before.parks);
        /* On: a burst while it sleeps must wake it. */
        struct producer_arg p = {.actor = fx->actor, .producer = 0, .count = 100};
        fx->state.next_seq[0] = 0;
        producer_main(&p);
        expected += 100;
        assert_int_equal(query(fx).received, expected);
    }
    struct cr_actor_stats s = stats(fx->actor);
    assert_true(s.parks >= 50);
    assert_true(s.wakes >= 50);
    assert_int_equal(query(fx).order_errors, 0);
    fixture_free(fx);
}

static void test_park_and_wake(void **unused) {
    (void)unused;
    park_and_wake(&test_ops);
}

/* park_fence: the parking actor fences instead of a membarrier, and so do
 * its senders; every burst must still wake it. */
static void test_park_and_wake_fenced(void **unused) {
    (void)unused;
    park_and_wake(&test_fence_ops);
}

/* Many senders at once against a fenced parker: none of their wakes is lost
 * (a lost one would leave messages unhandled until the deadline). */
static void test_fenced_no_loss_many_senders(void **unused) {
    (void)unused;
    struct cr_runtime_config config;
    cr_runtime_config_default(&config);
    config.spin_ns = 0; /* it parks whenever it is idle */
    struct fixture *fx = fixture_new_ops(&config, &test_fence_ops);
    run_producers(fx, 8, 20000);
    /* Watched without asking: an ask would wake it and hide a lost wake. */
    uint64_t deadline = now_ns() + 10000000000u;
    while (atomic_load(&fx->state.received_seen) < 8 * 20000) {
        assert_true(now_ns() < deadline);
        usleep(100);
    }
    assert_int_equal(wait_received(fx, 8 * 20000).order_errors, 0);
    fixture_free(fx);
}

static void test_ask_reply(void **unused) {
    (void)unused;
    struct cr_runtime_config config;
    cr_runtime_config_default(&config);
    struct fixture *fx = fixture_new(&config);
    for (uint64_t i = 0; i < 10000; i++) {
        uint64_t out = 0;
        struct cr_msg msg = {.type = CR_MSG_TEST_ECHO};
        *CR_MSG_BODY(&msg, struct cr_msg_test_echo) = (struct cr_msg_test_echo){i * 7, &out};
        assert_int_equal(cr_ask(fx->actor, &msg, 5000000000u), CR_OK);
        assert_int_equal(out, i * 7);
    }
    fixture_free(fx);
}

static void *release_later(void *arg) {
    struct fixture *fx = arg;
    atomic_store(&fx->state.release, 1);
    return NULL;
}

static void test_ask_timeout(void **unused) {
    (void)unused;
    struct cr_runtime_config config;
    cr_runtime_config_default(&config);
    struct fixture *fx = fixture_new(&config);
    struct cr_msg block = {.type = MSG_TEST_BLOCK};
    assert_int_equal(cr_send(fx->actor, &block), CR_OK);
    while (!atomic_load(&fx->state.blocked)) sched_yield();

    uint64_t out = 0;
    struct cr_msg msg = {.type = CR_MSG_TEST_ECHO};
    *CR_MSG_BODY(&msg, struct cr_msg_test_echo) = (struct cr_msg_test_echo){42, &out};
    uint64_t start = now_ns();
    assert_int_equal(cr_ask(fx->actor, &msg, 20000000u), CR_ERR_TIMEOUT);
    assert_true(now_ns() - start >= 20000000u);
    assert_int_equal(out, 0); /* the abandoned ask was never run */

    pthread_t thread;
    pthread_create(&thread, NULL, release_later, fx);
    pthread_join(thread, NULL);
    /* The expired ask is skipped; a new one on the same slot works. */
    *CR_MSG_BODY(&msg, struct cr_msg_test_echo) = (struct cr_msg_test_echo){43, &out};
    msg.flags = 0;
    assert_int_equal(cr_ask(fx->actor, &msg, 5000000000u), CR_OK);
    assert_int_equal(out, 43);
    assert_int_equal(stats(fx->actor).asks_expired, 1);
    fixture_free(fx);
}

static void test_ring_full(void **unused) {
    (void)unused;
    struct cr_runtime_config config;
    cr_runtime_config_default(&config);
    config.ring_slots = 8;
    config.send_wait_ns = 5000000; /* 5 ms */
    struct fixture *fx = fixture_new(&config);
    struct cr_msg block = {.type = MSG_TEST_BLOCK};
    assert_int_equal(cr_send(fx->actor, &block), CR_OK);
    while (!atomic_load(&fx->state.blocked)) sched_yield();

    /* ck rings hold size - 1 entries. */
    uint32_t accepted = 0;
    int rc = CR_OK;
    for (uint64_t seq = 0; rc == CR_OK; seq++) {
        struct cr_msg msg = {.type = CR_MSG_TEST_SEQ};
        CR_MSG_BODY(&msg, struct cr_msg_test_seq)->seq = seq;
        rc = cr_send(fx->actor, &msg);
        if (rc == CR_OK) accepted++;
        assert_true(accepted <= 8);
    }
    assert_int_equal(rc, CR_ERR_AGAIN);
    assert_int_equal(accepted, 7);
    atomic_store(&fx->state.release, 1);
    /* This thread's ring is still full: an ask now would wait send_wait_ns
     * (5 ms) for room and fail if the actor is not scheduled by then. */
    uint64_t deadline = now_ns() + 30000000000u;
    while (atomic_load(&fx->state.received_seen) < 7) {
        assert_true(now_ns() < deadline);
        sched_yield();
    }
    assert_int_equal(query(fx).received, 7); /* nothing lost, nothing invented */
    struct cr_actor_stats s = stats(fx->actor);
    assert_true(s.ring_full >= 1);
    assert_int_equal(s.send_failures, 1);
    fixture_free(fx);
}

/* cr_send_try on a full ring answers CR_ERR_AGAIN without waiting: with
 * send_wait_ns at 60 s, a waiting send would take a minute (the bound below
 * is generous for a loaded machine and far below that). */
static void test_send_try_never_waits(void **unused) {
    (void)unused;
    struct cr_runtime_config config;
    cr_runtime_config_default(&config);
    config.ring_slots = 8;
    config.send_wait_ns = 60000000000ull;
    struct fixture *fx = fixture_new(&config);
    struct cr_msg block = {.type = MSG_TEST_BLOCK};
    assert_int_equal(cr_send(fx->actor, &block), CR_OK);
    while (!atomic_load(&fx->state.blocked)) sched_yield();
    uint32_t accepted = 0;
    int rc = CR_OK;
    uint64_t start = now_ns();
    for (uint64_t seq = 0; rc == CR_OK; seq++) {
        struct cr_msg msg = {.type = CR_MSG_TEST_SEQ};
        CR_MSG_BODY(&msg, struct cr_msg_test_seq)->seq = seq;
        rc = cr_send_try(fx->actor, &msg);
        if (rc == CR_OK) accepted++;
        assert_true(accepted <= 8);
    }
    assert_int_equal(rc, CR_ERR_AGAIN);
    assert_true(now_ns() - start < 10000000000ull);
    assert_int_equal(accepted, 7);
    atomic_store(&fx->state.release, 1);
    uint64_t deadline = now_ns() + 30000000000u;
    while (atomic_load(&fx->state.received_seen) < 7) {
        assert_true(now_ns() < deadline);
        sched_yield();
    }
    assert_int_equal(query(fx).received, 7);
    struct cr_actor_stats s = stats(fx->actor);
    assert_true(s.ring_full >= 1);
    assert_int_equal(s.send_failures, 1);
    fixture_free(fx);
}

static void test_shutdown_in_flight(void **unused) {
    (void)unused;
    struct cr_runtime_config config;
    cr_runtime_config_default(&config);
    config.ring_slots = 1024;
    struct fixture *fx = fixture_new(&config);
    pthread_t threads[4];
    struct producer_arg args[4];
    for (uint32_t i = 0; i < 4; i++) {
        args[i] = (struct producer_arg){
            .actor = fx->actor, .producer = i, .count = UINT64_MAX, .stop_on_shutdown = true};
        pthread_create(&threads[i], NULL, producer_thread, &args[i]);
    }
    while (stats(fx->actor).messages_handled < 10000) sched_yield();
    cr_runtime_stop(fx->rt);
    for (int i = 0; i < 4; i++) pthread_join(threads[i], NULL);
    uint64_t sent = 0;
    for (int i = 0; i < 4; i++) sent += args[i].sent_ok;
    uint64_t handled = fx->state.received;
    /* Every accepted message was either handled or handed to discard at destroy. */
    cr_runtime_destroy(fx->rt);
    fx->rt = NULL;
    assert_int_equal(handled + atomic_load(&fx->state.discarded), sent);
    assert_int_equal(fx->state.order_errors, 0);
    cr_runtime_thread_release();
    free(fx);
}

struct manual_clock {
    _Atomic uint64_t now;
};

static uint64_t manual_now(void *ctx) { return atomic_load(&((struct manual_clock *)ctx)->now); }

static void test_timers_manual_clock(void **unused) {
    (void)unused;
    struct manual_clock clock = {1000};
    struct cr_runtime_config config;
    cr_runtime_config_default(&config);
    config.clock = (struct cr_clock){.now_ns = manual_now, .ctx = &clock};
    struct fixture *fx = fixture_new(&config);

    struct cr_msg arm = {.type = MSG_TEST_TIMER};
    arm.body.u64[0] = 100000000; /* 100 ms of manual time */
    assert_int_equal(cr_ask(fx->actor, &arm, 5000000000u), CR_OK);

    atomic_store(&clock.now, 1000 + 50000000);
    cr_runtime_clock_changed(fx->rt);
    for (int i = 0; i < 100; i++) assert_int_equal(query(fx).fired, 0);

    atomic_store(&clock.now, 1000 + 100000000);
    cr_runtime_clock_changed(fx->rt);
    uint64_t deadline = now_ns() + 5000000000u;
    while (query(fx).fired == 0) assert_true(now_ns() < deadline);
    assert_int_equal(query(fx).fired, 1);
    assert_int_equal(stats(fx->actor).timers_fired, 1);
    fixture_free(fx);
}

static void test_config_and_spawn_errors(void **unused) {
    (void)unused;
    struct cr_runtime_config config;
    cr_runtime_config_default(&config);
    struct cr_runtime *rt = NULL;
    config.ring_slots = 1000; /* not a power of two */
    assert_int_equal(cr_runtime_create(&config, &rt), CR_ERR_INVALID_PARAMS);
    cr_runtime_config_default(&config);
    config.pin_threads = false;
    assert_int_equal(cr_runtime_create(&config, &rt), CR_OK);
    struct test_state st = {0};
    struct cr_actor_ops no_handler = {0};
    assert_int_equal(cr_runtime_spawn(rt, "x", &no_handler, &st, NULL), CR_ERR_INVALID_PARAMS);
    assert_int_equal(cr_runtime_spawn(rt, "a-name-far-too-long", &test_ops, &st, NULL),
                     CR_ERR_INVALID_PARAMS);
    struct cr_actor *actor = NULL;
    assert_int_equal(cr_runtime_spawn(rt, "ok", &test_ops, &st, &actor), CR_OK);
    assert_ptr_equal(cr_runtime_find(rt, "ok"), actor);
    assert_int_equal(stats(actor).cpu, -1); /* pinning switched off */
    cr_runtime_stop(rt);
    struct cr_msg msg = {.type = CR_MSG_TEST_SEQ};
    assert_int_equal(cr_send(actor, &msg), CR_ERR_SHUTDOWN);
    cr_runtime_destroy(rt);
    cr_runtime_thread_release();
}

/* ------------------------------------------------------------------------ */
/* Regressions found in review */

struct one_shot_arg {
    struct cr_actor *actor;
    int rc;
};

static void *send_once_thread(void *arg) {
    struct one_shot_arg *a = arg;
    struct cr_msg msg = {.type = CR_MSG_TEST_SEQ};
    CR_MSG_BODY(&msg, struct cr_msg_test_seq)->producer = PRODUCERS_MAX - 1;
    a->rc = cr_send(a->actor, &msg);
    cr_runtime_thread_release();
    return NULL;
}

static int send_from_new_thread(struct cr_actor *actor) {
    struct one_shot_arg a = {.actor = actor};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, send_once_thread, &a), 0);
    pthread_join(t, NULL);
    return a.rc;
}

/* Sends MSG_TEST_BLOCK from a new thread.  The rc goes back to the test's
 * thread: a cmocka assert on another thread cannot fail the test cleanly. */
static void *block_thread(void *arg) {
    struct one_shot_arg *a = arg;
    struct cr_msg block = {.type = MSG_TEST_BLOCK};
    a->rc = cr_send(a->actor, &block);
    cr_runtime_thread_release();
    return NULL;
}

/* Blocks the actor from a new thread, retrying while every inbox slot is
 * taken: slots of exited senders come back one by one as the actor drains
 * them, so right after one came back the next may not have yet. */
static void block_actor(struct fixture *fx) {
    uint64_t deadline = now_ns() + 10000000000u;
    for (;;) {
        struct one_shot_arg a = {.actor = fx->actor};
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, block_thread, &a), 0);
        pthread_join(t, NULL);
        if (a.rc == CR_OK) break;
        assert_int_equal(a.rc, CR_ERR_NOMEM);
        assert_true(now_ns() < deadline);
        sched_yield();
    }
    while (!atomic_load(&fx->state.blocked)) sched_yield();
}

static void *stop_thread(void *arg) {
    cr_runtime_stop(arg);
    return NULL;
}

/* Every inbox slot taken by threads that have exited: a new sender gets a
 * clear CR_ERR_NOMEM, slots come back once the actor drains, and stop works
 * regardless (it was a message once, and hung when no slot was free). */
static void test_inbox_full_and_stop(void **unused) {
    (void)unused;
    struct cr_runtime_config config;
    cr_runtime_config_default(&config);
    config.pin_threads = false;
    struct fixture *fx = fixture_new(&config);
    block_actor(fx);
    for (uint32_t i = 1; i < CR_ACTOR_SENDERS_MAX; i++)
        assert_int_equal(send_from_new_thread(fx->actor), CR_OK);
    assert_int_equal(send_from_new_thread(fx->actor), CR_ERR_NOMEM);

    atomic_store(&fx->state.release, 1);
    uint64_t deadline = now_ns() + 10000000000u;
    while (send_from_new_thread(fx->actor) != CR_OK) assert_true(now_ns() < deadline);

    /* Fill the slots again while it is blocked, then stop from another
     * thread: the stop must not need a slot. */
    atomic_store(&fx->state.release, 0);
    block_actor(fx);
    while (send_from_new_thread(fx->actor) == CR_OK) {
    }
    pthread_t stopper;
    pthread_create(&stopper, NULL, stop_thread, fx->rt);
    atomic_store(&fx->state.release, 1);
    struct timespec limit;
    clock_gettime(CLOCK_REALTIME, &limit);
    limit.tv_sec += 10;
    assert_int_equal(pthread_timedjoin_np(stopper, NULL, &limit), 0);
    fixture_free(fx);
}

/* Producers that never stop sending cannot keep a stopping actor alive:
 * STOPPING refuses new sends, so the final drain is bounded. */
static void test_stop_bounded_under_load(void **unused) {
    (void)unused;
    struct cr_runtime_config config;
    cr_runtime_config_default(&config);
    struct fixture *fx = fixture_new(&config);
    fx->state.slow = true;
    pthread_t threads[4];
    struct producer_arg args[4];
    for (uint32_t i = 0; i < 4; i++) {
        args[i] = (struct producer_arg){
            .actor = fx->actor, .producer = i, .count = UINT64_MAX, .stop_on_shutdown = true};
        pthread_create(&threads[i], NULL, producer_thread, &args[i]);
    }
    while (stats(fx->actor).messages_handled < 1000) sched_yield();
    uint64_t start = now_ns();
    cr_runtime_stop(fx->rt);
    /* At most a full ring per producer (4 x 4096 x 2 us ≈ 33 ms) is left. */
    assert_true(now_ns() - start < 5000000000u);
    for (int i = 0; i < 4; i++) pthread_join(threads[i], NULL);
    fixture_free(fx);
}

/* A timer re-armed with delay 0 is due again at once under a manual clock;
 * it must not starve the mailbox. */
static void test_timer_rearm_zero_does_not_starve(void **unused) {
    (void)unused;
    struct manual_clock clock = {1000};
    struct cr_runtime_config config;
    cr_runtime_config_default(&config);
    config.clock = (struct cr_clock){.now_ns = manual_now, .ctx = &clock};
    struct fixture *fx = fixture_new(&config);
    struct cr_msg arm = {.type = MSG_TEST_TIMER};
    arm.body.u64[0] = 0;
    assert_int_equal(cr_ask(fx->actor, &arm, 5000000000u), CR_OK);
    /* MSG_TEST_TIMER arms a MSG_TEST_FIRED; make one that re-arms itself. */
    struct cr_msg rearm = {.type = MSG_TEST_REARM};
    assert_int_equal(cr_send(fx->actor, &rearm), CR_OK);
    for (int i = 0; i < 100; i++) query(fx); /* each ask is answered */
    assert_true(stats(fx->actor).timers_fired > 0);
    fixture_free(fx);
}

static void test_ask_without_limit(void **unused) {
    (void)unused;
    struct cr_runtime_config config;
    cr_runtime_config_default(&config);
    struct fixture *fx = fixture_new(&config);
    uint64_t out = 0;
    struct cr_msg msg = {.type = CR_MSG_TEST_ECHO};
    *CR_MSG_BODY(&msg, struct cr_msg_test_echo) = (struct cr_msg_test_echo){99, &out};
    assert_int_equal(cr_ask(fx->actor, &msg, UINT64_MAX), CR_OK); /* no overflow to "expired" */
    assert_int_equal(out, 99);
    fixture_free(fx);
}

/* ---- a wait hook that sends, then blocks ---------------------------------
 * An actor's sends normally wake their receivers at the end of its round; a
 * socket actor's wait hook may send and then block in poll, so sends from
 * inside it must wake at once, or the receiver sleeps as long as the hook. */

struct hooked_state {
    struct cr_actor *target;
    bool pending; /* the next wait sends one message to target */
    uint64_t seq;
};

static void hooked_handle(struct cr_actor *self, void *arg, struct cr_msg *msg) {
    (void)self;
    struct hooked_state *st = arg;
    if (msg->type == MSG_TEST_QUERY) st->pending = true;
}

static void hooked_wait(struct cr_actor *self, void *arg, int wake_fd, int64_t timeout_ns) {
    (void)self;
    struct hooked_state *st = arg;
    if (st->pending) {
        st->pending = false;
        struct cr_msg msg = {.type = CR_MSG_TEST_SEQ};
        *CR_MSG_BODY(&msg, struct cr_msg_test_seq) =
            (struct cr_msg_test_seq){.producer = 1, .seq = st->seq++};
        assert_int_equal(cr_send(st->target, &msg), CR_OK);
    }
    struct pollfd pfd = {.fd = wake_fd, .events = POLLIN};
    (void)poll(&pfd, 1, cr_timeout_ms(timeout_ns)); /* -1 when idle: sleeps until woken */
}

static const struct cr_actor_ops hooked_ops = {.handle = hooked_handle, .wait = hooked_wait};

struct counter_state {
    _Atomic uint64_t received;
};

static void counter_handle(struct cr_actor *self, void *arg, struct cr_msg *msg) {
    (void)self;
    if (msg->type == CR_MSG_TEST_SEQ)
        atomic_fetch_add(&((struct counter_state *)arg)->received, 1);
}

static const struct cr_actor_ops counter_ops = {.handle = counter_handle};

/* A wait hook that tells the runtime when it saw the wake fd not ready
 * (cr_actor_wait_saw_no_wake), as segments' does. */
struct quiet_state {
    struct counter_state counter;
    _Atomic uint64_t waits;
};

static void quiet_handle(struct cr_actor *self, void *arg, struct cr_msg *msg) {
    counter_handle(self, &((struct quiet_state *)arg)->counter, msg);
}

static void quiet_wait(struct cr_actor *self, void *arg, int wake_fd, int64_t timeout_ns) {
    struct quiet_state *st = arg;
    atomic_fetch_add(&st->waits, 1);
    struct pollfd pfd = {.fd = wake_fd, .events = POLLIN};
    if (poll(&pfd, 1, cr_timeout_ms(timeout_ns)) == 0) cr_actor_wait_saw_no_wake(self);
}

static const struct cr_actor_ops quiet_ops = {.handle = quiet_handle, .wait = quiet_wait};

/* Wakes still arrive, and a wake fd that was ready is still drained: were it
 * not, every later wait would return at once and the waits would run away. */
static void test_wait_saw_no_wake(void **unused) {
    (void)unused;
    struct cr_runtime_config config;
    cr_runtime_config_default(&config);
    config.spin_ns = 0;
    config.pin_threads = false;
    struct cr_runtime *rt;
    assert_int_equal(cr_runtime_create(&config, &rt), CR_OK);
    struct quiet_state st = {0};
    struct cr_actor *actor;
    assert_int_equal(cr_runtime_spawn(rt, "quiet", &quiet_ops, &st, &actor), CR_OK);
    for (uint64_t round = 1; round <= 20; round++) {
        struct cr_msg msg = {.type = CR_MSG_TEST_SEQ};
        assert_int_equal(cr_send(actor, &msg), CR_OK);
        uint64_t deadline = now_ns() + 2000000000u;
        while (atomic_load(&st.counter.received) < round) {
            assert_true(now_ns() < deadline);
            sched_yield();
        }
    }
    /* Idle now: it blocks in one wait for good.  A wake fd left readable
     * would end every wait at once, thousands within the 200 ms watched
     * here (a correct runtime passes however long this takes). */
    uint64_t waits = atomic_load(&st.waits), until = now_ns() + 200000000u;
    while (now_ns() < until && atomic_load(&st.waits) < waits + 1000) sched_yield();
    assert_true(atomic_load(&st.waits) < waits + 1000);
    cr_runtime_destroy(rt);
    cr_runtime_thread_release();
}

static void test_send_from_wait_hook_wakes_at_once(void **unused) {
    (void)unused;
    struct cr_runtime_config config;
    cr_runtime_config_default(&config);
    config.spin_ns = 0; /* idle actors park at once: the counter is asleep when the hook sends */
    config.pin_threads = false;
    struct cr_runtime *rt;
    assert_int_equal(cr_runtime_create(&config, &rt), CR_OK);
    struct counter_state counter = {0};
    struct cr_actor *counter_actor, *hooked_actor;
    assert_int_equal(cr_runtime_spawn(rt, "counter", &counter_ops, &counter, &counter_actor),
                     CR_OK);
    struct hooked_state hooked = {.target = counter_actor};
    assert_int_equal(cr_runtime_spawn(rt, "hooked", &hooked_ops, &hooked, &hooked_actor), CR_OK);
    for (uint64_t round = 1; round <= 20; round++) {
        struct cr_msg go = {.type = MSG_TEST_QUERY};
        assert_int_equal(cr_send(hooked_actor, &go), CR_OK);
        /* The hooked actor handles it, parks, sends from its hook and blocks
         * in poll with no timeout; nothing else wakes the counter (no ask to
         * it here), so only an immediate wake delivers the message. */
        uint64_t deadline = now_ns() + 2000000000u;
        while (atomic_load(&counter.received) < round) {
            assert_true(now_ns() < deadline);
            sched_yield();
        }
    }
    cr_runtime_destroy(rt);
    cr_runtime_thread_release();
}

/* ---- lazy sends -----------------------------------------------------------
 * cr_send_lazy leaves a parked receiver asleep until lazy_wake_batch lazy
 * sends have gone to it or lazy_wake_ns have passed, even while the sender
 * itself is parked.  The receiver here is a wait-hook actor, which parks at
 * once (no spin), so only a wake can deliver; each case leaves one rule
 * able to. */

struct sleeper_state {
    _Atomic uint64_t received;
};

static void sleeper_handle(struct cr_actor *self, void *arg, struct cr_msg *msg) {
    (void)self;
    if (msg->type == CR_MSG_TEST_SEQ)
        atomic_fetch_add(&((struct sleeper_state *)arg)->received, 1);
}

static void sleeper_wait(struct cr_actor *self, void *arg, int wake_fd, int64_t timeout_ns) {
    (void)self, (void)arg;
    struct pollfd pfd = {.fd = wake_fd, .events = POLLIN};
    (void)poll(&pfd, 1, cr_timeout_ms(timeout_ns));
}

static const struct cr_actor_ops sleeper_ops = {.handle = sleeper_handle, .wait = sleeper_wait};

/* MSG_TEST_QUERY body: u64[0] lazy sends to make, u64[1] nonzero: then
 * stay in the handler until the sleeper has them all (up to 5 s). */
struct lazy_state {
    struct cr_actor *target;
    struct sleeper_state *sleeper;
    _Atomic int delivered_while_busy;
};

static void lazy_handle(struct cr_actor *self, void *arg, struct cr_msg *msg) {
    (void)self;
    struct lazy_state *st = arg;
    if (msg->type != MSG_TEST_QUERY) return;
    uint64_t n = msg->body.u64[0];
    uint64_t before = atomic_load(&st->sleeper->received);
    for (uint64_t i = 0; i < n; i++) {
        struct cr_msg seq = {.type = CR_MSG_TEST_SEQ};
        *CR_MSG_BODY(&seq, struct cr_msg_test_seq) = (struct cr_msg_test_seq){.seq = i};
        assert_int_equal(cr_send_lazy(st->target, &seq), CR_OK);
    }
    if (msg->body.u64[1] == 0) return;
    uint64_t deadline = now_ns() + 5000000000u;
    while (atomic_load(&st->sleeper->received) < before + n && now_ns() < deadline) sched_yield();
    atomic_store(&st->delivered_while_busy, atomic_load(&st->sleeper->received) >= before + n);
}

static const struct cr_actor_ops lazy_ops = {.handle = lazy_handle};

struct lazy_fixture {
    struct cr_runtime *rt;
    struct cr_actor *sender, *receiver;
    struct sleeper_state sleeper;
    struct lazy_state lazy;
};

static void lazy_fixture_start(struct lazy_fixture *fx, const struct cr_runtime_config *config) {
    memset(fx, 0, sizeof(*fx));
    assert_int_equal(cr_runtime_create(config, &fx->rt), CR_OK);
    assert_int_equal(cr_runtime_spawn(fx->rt, "sleeper", &sleeper_ops, &fx->sleeper, &fx->receiver),
                     CR_OK);
    fx->lazy = (struct lazy_state){.target = fx->receiver, .sleeper = &fx->sleeper};
    assert_int_equal(cr_runtime_spawn(fx->rt, "lazy", &lazy_ops, &fx->lazy, &fx->sender), CR_OK);
    uint64_t deadline = now_ns() + 5000000000u; /* the sleeper is parked before anything is sent */
    while (stats(fx->receiver).parks == 0) {
        assert_true(now_ns() < deadline);
        sched_yield();
    }
}

static void lazy_send(struct lazy_fixture *fx, uint64_t count, bool stay) {
    struct cr_msg go = {.type = MSG_TEST_QUERY};
    go.body.u64[0] = count;
    go.body.u64[1] = stay;
    assert_int_equal(cr_send(fx->sender, &go), CR_OK);
}

static void wait_sleeper(struct lazy_fixture *fx, uint64_t count) {
    uint64_t deadline = now_ns() + 5000000000u;
    while (atomic_load(&fx->sleeper.received) < count) {
        assert_true(now_ns() < deadline);
        sched_yield();
    }
}

static void lazy_config(struct cr_runtime_config *config) {
    cr_runtime_config_default(config);
    config->pin_threads = false;
    config->spin_ns = 60ull * 1000000000u; /* the sender never parks by itself */
    config->spin_adaptive = false;          /* not even on a busy machine */
    config->lazy_wake_ns = 60ull * 1000000000u;
    config->lazy_wake_batch = 1000000;
}

static void test_lazy_send_waits_then_batch_wakes(void **unused) {
    (void)unused;
    struct cr_runtime_config config;
    lazy_config(&config);
    config.lazy_wake_batch = 8;
    struct lazy_fixture fx;
    lazy_fixture_start(&fx, &config);
    /* Fewer than a batch, sender spinning: the sleeper is not woken. */
    lazy_send(&fx, 7, false);
    struct timespec pause = {0, 20 * 1000000};
    nanosleep(&pause, NULL);
    assert_int_equal(atomic_load(&fx.sleeper.received), 0);
    /* The 8th lazy send wakes it, while the sender is still in its handler. */
    lazy_send(&fx, 1, true);
    wait_sleeper(&fx, 8);
    uint64_t deadline = now_ns() + 5000000000u;
    while (!atomic_load(&fx.lazy.delivered_while_busy)) {
        assert_true(now_ns() < deadline);
        sched_yield();
    }
    cr_runtime_destroy(fx.rt);
    cr_runtime_thread_release();
}

/* `rounds` lazy sends, one at a time, each delivered by lazy_wake_ns alone. */
static void lazy_deadline_delivers(uint64_t spin_ns, uint64_t lazy_wake_ns, uint64_t rounds) {
    struct cr_runtime_config config;
    lazy_config(&config);
    config.spin_ns = spin_ns;
    config.lazy_wake_ns = lazy_wake_ns;
    struct lazy_fixture fx;
    lazy_fixture_start(&fx, &config);
    for (uint64_t round = 1; round <= rounds; round++) {
        lazy_send(&fx, 1, false);
        wait_sleeper(&fx, round);
    }
    cr_runtime_destroy(fx.rt);
    cr_runtime_thread_release();
}

/* The sender spins idle (60 s), checking the 1 ms deadline every round. */
static void test_lazy_send_time_bound(void **unused) {
    (void)unused;
    lazy_deadline_delivers(60ull * 1000000000u, 1000000, 1);
}

/* The sender parks (it is idle, spin 0) with a lazy send pending: the park
 * does not wake the receiver, the deadline does (60 s here: never during the
 * test).  Before, a parking sender woke its lazy receivers, so at one call
 * at a time every store event cost the publisher a wake. */
static void test_lazy_send_outlives_the_senders_park(void **unused) {
    (void)unused;
    struct cr_runtime_config config;
    lazy_config(&config);
    config.spin_ns = 0; /* the sender parks as soon as it is idle */
    struct lazy_fixture fx;
    lazy_fixture_start(&fx, &config);
    uint64_t parks = stats(fx.sender).parks;
    lazy_send(&fx, 1, false);
    /* Each stats ask wakes the sender, which parks again after answering:
     * two more parks mean it parked at least once after the lazy send. */
    uint64_t deadline = now_ns() + 5000000000u;
    while (stats(fx.sender).parks < parks + 2) {
        assert_true(now_ns() < deadline);
        sched_yield();
    }
    /* A wake given at the park would deliver within microseconds; give it
     * 50 ms to show up (it must not). */
    uint64_t until = now_ns() + 50000000u;
    while (now_ns() < until) {
        assert_int_equal(atomic_load(&fx.sleeper.received), 0);
        sched_yield();
    }
    cr_runtime_destroy(fx.rt); /* the sender's exit wakes it: nothing is lost */
    cr_runtime_thread_release();
}

/* The deadline reaches a receiver while the sender sleeps: the sender's park
 * ends at the oldest lazy send's deadline (300 us here, under the whole
 * milliseconds a poll timeout has) and the round after it wakes the
 * receiver.  Without the timed park this hangs (the 5 s bound fails). */
static void test_lazy_send_deadline_while_sender_parked(void **unused) {
    (void)unused;
    lazy_deadline_delivers(0, 300 * 1000, 20); /* spin 0: parks as soon as it is idle */
}

/* ---- round_end ------------------------------------------------------------
 * A gatherer counts messages as it handles them and publishes the count in
 * its round_end hook, as segments gathers replies into chains. */

struct gatherer_state {
    uint64_t pending;              /* handled this round */
    _Atomic uint64_t published;    /* sum of what round_end published */
    _Atomic uint64_t largest;      /* largest count one round_end published */
    _Atomic uint64_t round_ends;   /* calls of round_end */
    _Atomic int blocked, release;  /* MSG_TEST_BLOCK gate */
};

static void gatherer_handle(struct cr_actor *self, void *arg, struct cr_msg *msg) {
    (void)self;
    struct gatherer_state *st = arg;
    if (msg->type == MSG_TEST_BLOCK) {
        atomic_store(&st->blocked, 1);
        while (!atomic_load(&st->release)) sched_yield();
        return;
    }
    if (msg->type == CR_MSG_TEST_SEQ) st->pending++;
}

static void gatherer_round_end(struct cr_actor *self, void *arg) {
    (void)self;
    struct gatherer_state *st = arg;
    atomic_fetch_add(&st->round_ends, 1);
    if (st->pending > atomic_load(&st->largest)) atomic_store(&st->largest, st->pending);
    atomic_fetch_add(&st->published, st->pending);
    st->pending = 0;
}

static const struct cr_actor_ops gatherer_ops = {.handle = gatherer_handle,
                                                 .round_end = gatherer_round_end};

static void test_round_end_after_each_busy_round(void **unused) {
    (void)unused;
    struct cr_runtime_config config;
    cr_runtime_config_default(&config);
    config.pin_threads = false;
    config.spin_ns = 60ull * 1000000000u; /* idle rounds keep coming while the test runs */
    config.spin_adaptive = false;
    struct cr_runtime *rt;
    assert_int_equal(cr_runtime_create(&config, &rt), CR_OK);
    struct gatherer_state st = {0};
    struct cr_actor *actor;
    assert_int_equal(cr_runtime_spawn(rt, "gatherer", &gatherer_ops, &st, &actor), CR_OK);
    /* Ten messages queued behind a blocked handler are one round: the hook
     * sees all ten at once, and publishes them without another message. */
    struct cr_msg block = {.type = MSG_TEST_BLOCK};
    assert_int_equal(cr_send(actor, &block), CR_OK);
    uint64_t deadline = now_ns() + 5000000000u;
    while (!atomic_load(&st.blocked)) {
        assert_true(now_ns() < deadline);
        sched_yield();
    }
    for (uint64_t i = 0; i < 10; i++) {
        struct cr_msg seq = {.type = CR_MSG_TEST_SEQ};
        *CR_MSG_BODY(&seq, struct cr_msg_test_seq) = (struct cr_msg_test_seq){.seq = i};
        assert_int_equal(cr_send(actor, &seq), CR_OK);
    }
    atomic_store(&st.release, 1);
    while (atomic_load(&st.published) < 10) {
        assert_true(now_ns() < deadline);
        sched_yield();
    }
    assert_int_equal(atomic_load(&st.published), 10);
    assert_int_equal(atomic_load(&st.largest), 10);
    /* Idle rounds (the actor spins for a minute) do not call it. */
    struct timespec pause = {0, 20 * 1000000};
    nanosleep(&pause, NULL);
    assert_int_equal(atomic_load(&st.round_ends), 1);
    cr_runtime_destroy(rt);
    cr_runtime_thread_release();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fifo_per_sender),
        cmocka_unit_test(test_no_loss_more_producers_than_cores),
        cmocka_unit_test(test_park_and_wake),
        cmocka_unit_test(test_park_and_wake_fenced),
        cmocka_unit_test(test_fenced_no_loss_many_senders),
        cmocka_unit_test(test_ask_reply),
        cmocka_unit_test(test_ask_timeout),
        cmocka_unit_test(test_ring_full),
        cmocka_unit_test(test_send_try_never_waits),
        cmocka_unit_test(test_shutdown_in_flight),
        cmocka_unit_test(test_timers_manual_clock),
        cmocka_unit_test(test_config_and_spawn_errors),
        cmocka_unit_test(test_inbox_full_and_stop),
        cmocka_unit_test(test_stop_bounded_under_load),
        cmocka_unit_test(test_timer_rearm_zero_does_not_starve),
        cmocka_unit_test(test_ask_without_limit),
        cmocka_unit_test(test_send_from_wait_hook_wakes_at_once),
        cmocka_unit_test(test_wait_saw_no_wake),
        cmocka_unit_test(test_lazy_send_waits_then_batch_wakes),
        cmocka_unit_test(test_lazy_send_time_bound),
        cmocka_unit_test(test_lazy_send_outlives_the_senders_park),
        cmocka_unit_test(test_lazy_send_deadline_while_sender_parked),
        cmocka_unit_test(test_round_end_after_each_busy_round),
    };
    return cmocka_run_group_tests_name("runtime", tests, NULL, NULL);
}
