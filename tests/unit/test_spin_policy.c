/* Unit tests for src/core/spin_policy.c: when an idle actor spins.  The
 * policy takes the times it is told, so these tests run on a made-up clock
 * (idle periods of chosen lengths) and never sleep. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/spin_policy.h"

#define WINDOW 20000u /* the runtime's default spin_ns */

/* A manual clock: an actor goes idle at `now` and gets work `gap` later. */
struct idle_clock {
    uint64_t now;
};

/* One idle period of `gap` ns: returns the spin the policy chose for it. */
static uint64_t idle_period(struct cr_spin_policy *p, struct idle_clock *clock, uint64_t gap) {
    uint64_t idle_since = clock->now;
    uint64_t spin = cr_spin_policy_begin(p);
    clock->now += gap;
    cr_spin_policy_observe(p, clock->now - idle_since);
    clock->now += 1000; /* the work itself */
    return spin;
}

static void test_fresh_actor_spins(void **state) {
    (void)state;
    struct cr_spin_policy p;
    cr_spin_policy_init(&p, WINDOW);
    assert_true(cr_spin_policy_pays(&p));
    assert_int_equal(cr_spin_policy_begin(&p), WINDOW);
}

static void test_zero_window_never_spins(void **state) {
    (void)state;
    struct cr_spin_policy p;
    struct idle_clock clock = {0};
    cr_spin_policy_init(&p, 0);
    for (int i = 0; i < 100; i++) assert_int_equal(idle_period(&p, &clock, 100), 0);
}

/* Work that comes well inside the window keeps the actor spinning. */
static void test_dense_traffic_keeps_spinning(void **state) {
    (void)state;
    struct cr_spin_policy p;
    struct idle_clock clock = {0};
    cr_spin_policy_init(&p, WINDOW);
    for (int i = 0; i < 1000; i++) assert_int_equal(idle_period(&p, &clock, WINDOW / 4), WINDOW);
}

/* Gaps far past the window (one client's round trips, idle timers): after a
 * few misses the actor parks at once, but for one probe spin per
 * CR_SPIN_PROBE_EVERY idle periods. */
static void test_sparse_traffic_parks_at_once(void **state) {
    (void)state;
    struct cr_spin_policy p;
    struct idle_clock clock = {0};
    cr_spin_policy_init(&p, WINDOW);
    int spun_at_first = 0;
    for (int i = 0; i < 8; i++) spun_at_first += idle_period(&p, &clock, 10 * WINDOW) != 0;
    assert_true(spun_at_first <= 4); /* three or four misses turn it off */
    assert_false(cr_spin_policy_pays(&p));
    int spins = 0;
    for (unsigned i = 0; i < 10 * CR_SPIN_PROBE_EVERY; i++)
        spins += idle_period(&p, &clock, 10 * WINDOW) != 0;
    assert_int_equal(spins, 10);
    assert_false(cr_spin_policy_pays(&p));
}

/* Traffic that turns dense again is noticed within a bounded number of
 * idle periods, from the gaps seen while parked. */
static void test_recovers_when_traffic_returns(void **state) {
    (void)state;
    struct cr_spin_policy p;
    struct idle_clock clock = {0};
    cr_spin_policy_init(&p, WINDOW);
    for (int i = 0; i < 200; i++) idle_period(&p, &clock, 50 * WINDOW);
    assert_false(cr_spin_policy_pays(&p));
    int periods = 0;
    while (!cr_spin_policy_pays(&p) && periods < 100) {
        idle_period(&p, &clock, WINDOW / 10);
        periods++;
    }
    assert_true(cr_spin_policy_pays(&p));
    assert_true(periods <= 12);
}

/* Hits that come late in the window save little: they pay only when nearly
 * every idle period is one; one miss in five is enough to park. */
static void test_late_hits_need_a_high_hit_rate(void **state) {
    (void)state;
    struct cr_spin_policy p;
    struct idle_clock clock = {0};
    cr_spin_policy_init(&p, WINDOW);
    for (int i = 0; i < 100; i++) idle_period(&p, &clock, WINDOW * 9 / 10);
    assert_true(cr_spin_policy_pays(&p));
    for (int i = 0; i < 100; i++) idle_period(&p, &clock, i % 5 == 0 ? 5 * WINDOW : WINDOW * 9 / 10);
    assert_false(cr_spin_policy_pays(&p));
    /* The same miss rate with early hits still pays. */
    cr_spin_policy_init(&p, WINDOW);
    for (int i = 0; i < 100; i++) idle_period(&p, &clock, i % 5 == 0 ? 5 * WINDOW : WINDOW / 20);
    assert_true(cr_spin_policy_pays(&p));
}

/* A gap exactly at the window is a hit; one past it is a miss. */
static void test_window_edge(void **state) {
    (void)state;
    struct cr_spin_policy p;
    cr_spin_policy_init(&p, WINDOW);
    cr_spin_policy_observe(&p, WINDOW);
    assert_int_equal(p.hit_q16, CR_SPIN_ONE);
    cr_spin_policy_observe(&p, WINDOW + 1);
    assert_true(p.hit_q16 < CR_SPIN_ONE);
}

static void test_loadavg_runnable(void **state) {
    (void)state;
    assert_int_equal(cr_loadavg_runnable("0.52 0.58 0.59 3/245 1234\n"), 3);
    assert_int_equal(cr_loadavg_runnable("52.87 64.21 54.51 30/425 8459\n"), 30);
    assert_int_equal(cr_loadavg_runnable(""), 0);
    assert_int_equal(cr_loadavg_runnable("0.52 0.58 0.59"), 0);
    assert_int_equal(cr_loadavg_runnable("0.52 0.58 0.59 x/245 1"), 0);
    assert_int_equal(cr_loadavg_runnable("0.52 0.58 0.59 7 1"), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fresh_actor_spins),
        cmocka_unit_test(test_zero_window_never_spins),
        cmocka_unit_test(test_dense_traffic_keeps_spinning),
        cmocka_unit_test(test_sparse_traffic_parks_at_once),
        cmocka_unit_test(test_recovers_when_traffic_returns),
        cmocka_unit_test(test_late_hits_need_a_high_hit_rate),
        cmocka_unit_test(test_window_edge),
        cmocka_unit_test(test_loadavg_runnable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
