/* Runtime tests for the idle spin (runtime.h, core/spin_policy.h): an idle
 * actor spins only when a core is free for it.  The machine's runnable-thread
 * count is injected (config.runnable_probe), so the outcome does not depend
 * on how loaded the test machine is; waits are for counters, bounded by a
 * deadline only a hang would reach.  The policy's arithmetic is tested on a
 * made-up clock in test_spin_policy.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <poll.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

#include "runtime/runtime.h"
#include "crescent/error.h"

struct probe {
    uint32_t runnable; /* what the probe answers */
    atomic_uint calls;
};

static uint32_t probe_runnable(void *ctx) {
    struct probe *p = ctx;
    atomic_fetch_add(&p->calls, 1);
    return p->runnable;
}

static void ignore(struct cr_actor *self, void *state, struct cr_msg *msg) {
    (void)self, (void)state, (void)msg;
}

static const struct cr_actor_ops quiet_ops = {.handle = ignore};

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static struct cr_actor_stats stats(struct cr_actor *actor) {
    struct cr_actor_stats out = {0};
    struct cr_msg msg = {.type = CR_MSG_STATS};
    CR_MSG_BODY(&msg, struct cr_msg_stats)->out = &out;
    assert_int_equal(cr_ask(actor, &msg, 5000000000u), CR_OK);
    return out;
}

/* Starts one idle actor with `config` and `ops` and returns its stats once
 * it has been through at least `periods` idle periods that ended in a park. */
static struct cr_actor_stats idle_ops_stats(struct cr_runtime_config *config,
                                            const struct cr_actor_ops *ops, void *state,
                                            uint64_t periods) {
    struct cr_runtime *rt;
    struct cr_actor *actor;
    config->pin_threads = false;
    assert_int_equal(cr_runtime_create(config, &rt), CR_OK);
    assert_int_equal(cr_runtime_spawn(rt, "idle", ops, state, &actor), CR_OK);
    uint64_t deadline = now_ns() + 10000000000u;
    struct cr_actor_stats s = stats(actor);
    while (s.parks < periods) {
        assert_true(now_ns() < deadline);
        sched_yield();
        s = stats(actor);
    }
    cr_runtime_destroy(rt);
    cr_runtime_thread_release();
    return s;
}

static struct cr_actor_stats idle_actor_stats(struct cr_runtime_config *config, uint64_t periods) {
    return idle_ops_stats(config, &quiet_ops, NULL, periods);
}

/* More runnable threads than CPUs: the actor never spins, though its
 * (fresh, optimistic) policy would have. */
static void test_busy_machine_never_spins(void **unused) {
    (void)unused;
    struct probe probe = {.runnable = 100000};
    struct cr_runtime_config config;
    cr_runtime_config_default(&config);
    config.runnable_probe = (struct cr_runnable_probe){probe_runnable, &probe};
    struct cr_actor_stats s = idle_actor_stats(&config, 3);
    assert_int_equal(s.spins, 0);
    assert_true(s.spins_busy >= 1);
    assert_true(atomic_load(&probe.calls) >= 1);
}

/* A core free (or the count unknown): the fresh actor spins first. */
static void test_free_core_spins(void **unused) {
    (void)unused;
    for (uint32_t runnable = 0; runnable <= 1; runnable++) {
        struct probe probe = {.runnable = runnable};
        struct cr_runtime_config config;
        cr_runtime_config_default(&config);
        config.runnable_probe = (struct cr_runnable_probe){probe_runnable, &probe};
        struct cr_actor_stats s = idle_actor_stats(&config, 1);
        assert_true(s.spins >= 1);
        assert_int_equal(s.spins_busy, 0);
    }
}

/* spin_adaptive off: every idle period spins, and nobody asks the kernel. */
static void test_fixed_spin_ignores_the_probe(void **unused) {
    (void)unused;
    struct probe probe = {.runnable = 100000};
    struct cr_runtime_config config;
    cr_runtime_config_default(&config);
    config.spin_adaptive = false;
    config.runnable_probe = (struct cr_runnable_probe){probe_runnable, &probe};
    struct cr_actor_stats s = idle_actor_stats(&config, 3);
    assert_true(s.spins >= 1);
    assert_int_equal(s.spins_busy, 0);
    assert_int_equal(atomic_load(&probe.calls), 0);
}

/* spin_ns 0: never spins, whatever the machine. */
static void test_zero_spin_never_spins(void **unused) {
    (void)unused;
    struct probe probe = {.runnable = 1};
    struct cr_runtime_config config;
    cr_runtime_config_default(&config);
    config.spin_ns = 0;
    config.runnable_probe = (struct cr_runnable_probe){probe_runnable, &probe};
    struct cr_actor_stats s = idle_actor_stats(&config, 3);
    assert_int_equal(s.spins, 0);
    assert_int_equal(s.spins_busy, 0);
}

/* An actor with a wait hook (sockets) and a poll hook (shared-memory
 * rings): `answer` is what poll returns (0: rings open, nothing in them;
 * -1: no ring to poll).  Its wait returns within a millisecond, so parks
 * add up without traffic. */
struct pollster {
    int32_t answer;
    atomic_uint polls;
};

static int32_t poll_hook(struct cr_actor *self, void *state) {
    (void)self;
    struct pollster *p = state;
    atomic_fetch_add(&p->polls, 1);
    return p->answer;
}

static void short_wait(struct cr_actor *self, void *state, int wake_fd, int64_t timeout_ns) {
    (void)self, (void)state;
    struct pollfd pfd = {.fd = wake_fd, .events = POLLIN};
    int timeout_ms = cr_timeout_ms(timeout_ns);
    poll(&pfd, 1, timeout_ms < 0 || timeout_ms > 1 ? 1 : timeout_ms);
}

static const struct cr_actor_ops wait_ops = {.handle = ignore, .wait = short_wait};
static const struct cr_actor_ops poll_ops = {.handle = ignore, .wait = short_wait,
                                             .spin_poll = poll_hook};

static struct cr_actor_stats poll_actor_stats(const struct cr_actor_ops *ops, int32_t answer,
                                              uint32_t runnable, uint32_t *polls) {
    struct probe probe = {.runnable = runnable};
    struct pollster p = {.answer = answer};
    struct cr_runtime_config config;
    cr_runtime_config_default(&config);
    config.runnable_probe = (struct cr_runnable_probe){probe_runnable, &probe};
    struct cr_actor_stats s = idle_ops_stats(&config, ops, &p, 3);
    if (polls != NULL) *polls = atomic_load(&p.polls);
    return s;
}

/* A socket actor without a poll hook goes straight to its wait: a spin
 * could not see its sockets without a syscall. */
static void test_wait_hook_alone_never_spins(void **unused) {
    (void)unused;
    struct cr_actor_stats s = poll_actor_stats(&wait_ops, 0, 1, NULL);
    assert_int_equal(s.spins, 0);
    assert_int_equal(s.spins_busy, 0);
}

/* With rings to poll and a core free, it spins calling poll, then parks. */
static void test_poll_hook_spins_on_a_free_core(void **unused) {
    (void)unused;
    uint32_t polls = 0;
    struct cr_actor_stats s = poll_actor_stats(&poll_ops, 0, 1, &polls);
    assert_true(s.spins >= 1);
    assert_true(s.parks >= 3);
    assert_true(polls > s.parks); /* polled while spinning, not only once per round */
}

/* No ring open (poll says -1): as a plain socket actor, no spin. */
static void test_poll_hook_without_rings_never_spins(void **unused) {
    (void)unused;
    uint32_t polls = 0;
    struct cr_actor_stats s = poll_actor_stats(&poll_ops, -1, 1, &polls);
    assert_int_equal(s.spins, 0);
    assert_true(polls >= 1);
}

/* Rings, but no core free: no spin, counted as such. */
static void test_poll_hook_on_a_busy_machine_never_spins(void **unused) {
    (void)unused;
    struct cr_actor_stats s = poll_actor_stats(&poll_ops, 0, 100000, NULL);
    assert_int_equal(s.spins, 0);
    assert_true(s.spins_busy >= 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_busy_machine_never_spins),
        cmocka_unit_test(test_free_core_spins),
        cmocka_unit_test(test_fixed_spin_ignores_the_probe),
        cmocka_unit_test(test_zero_spin_never_spins),
        cmocka_unit_test(test_wait_hook_alone_never_spins),
        cmocka_unit_test(test_poll_hook_spins_on_a_free_core),
        cmocka_unit_test(test_poll_hook_without_rings_never_spins),
        cmocka_unit_test(test_poll_hook_on_a_busy_machine_never_spins),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
