/* Unit tests for src/runtime/wait_timer.c: a wait hook's deadline in a
 * timerfd, armed only when it moves earlier.  What matters is that a park
 * never sleeps past its deadline (a lazy send's wake, a timer) while a later
 * deadline keeps the armed timer.  Readiness is awaited with bounded polls
 * (10 s, which only a missed deadline reaches); nothing depends on timing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <poll.h>
#include <unistd.h>

#include "runtime/runtime.h"
#include "runtime/wait_timer.h"

#define BOUND_MS 10000
#define MS 1000000ll
#define S 1000000000ll

/* Whether the fd turns ready within ms milliseconds. */
static bool ready_within(int fd, int ms) {
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    return poll(&pfd, 1, ms) == 1 && (pfd.revents & POLLIN);
}

static void test_no_timeout_arms_nothing(void **state) {
    (void)state;
    struct cr_wait_timer t;
    assert_true(cr_wait_timer_init(&t));
    uint64_t now = cr_monotonic_ns();
    assert_int_equal(cr_wait_timer_before(&t, -1, now), -1);
    assert_int_equal(cr_wait_timer_before(&t, 0, now), 0);
    assert_int_equal(t.arms, 0);
    assert_int_equal(t.armed_ns, 0);
    cr_wait_timer_close(&t);
}

/* Parks after parks with the same or a later deadline make no syscall. */
static void test_a_later_deadline_keeps_the_armed_timer(void **state) {
    (void)state;
    struct cr_wait_timer t;
    assert_true(cr_wait_timer_init(&t));
    uint64_t now = cr_monotonic_ns();
    assert_int_equal(cr_wait_timer_before(&t, 10 * S, now), -1);
    assert_int_equal(t.arms, 1);
    assert_int_equal(t.armed_ns, now + 10 * S);
    assert_int_equal(cr_wait_timer_before(&t, 20 * S, now), -1);
    assert_int_equal(cr_wait_timer_before(&t, 10 * S - 1000, now + 1000), -1); /* the same deadline */
    assert_int_equal(t.arms, 1);
    assert_int_equal(t.armed_ns, now + 10 * S);
    assert_false(ready_within(t.fd, 0));
    cr_wait_timer_close(&t);
}

/* A timer armed a minute away must not hold a deadline a millisecond away:
 * the park would oversleep it (the lost wake this module could cause). */
static void test_an_earlier_deadline_rearms(void **state) {
    (void)state;
    struct cr_wait_timer t;
    assert_true(cr_wait_timer_init(&t));
    uint64_t now = cr_monotonic_ns();
    assert_int_equal(cr_wait_timer_before(&t, 60 * S, now), -1);
    now = cr_monotonic_ns();
    assert_int_equal(cr_wait_timer_before(&t, 1 * MS, now), -1);
    assert_int_equal(t.arms, 2);
    assert_int_equal(t.armed_ns, now + 1 * MS);
    assert_true(ready_within(t.fd, BOUND_MS));
    assert_true(cr_monotonic_ns() >= now + 1 * MS); /* never early either */
    cr_wait_timer_close(&t);
}

/* Once it fired and was read, the fd is quiet and the next park arms anew. */
static void test_fired_reads_and_disarms(void **state) {
    (void)state;
    struct cr_wait_timer t;
    assert_true(cr_wait_timer_init(&t));
    assert_int_equal(cr_wait_timer_before(&t, 1 * MS, cr_monotonic_ns()), -1);
    assert_true(ready_within(t.fd, BOUND_MS));
    cr_wait_timer_fired(&t);
    assert_int_equal(t.armed_ns, 0);
    assert_false(ready_within(t.fd, 0));
    /* A deadline already passed: armed, and ready at once. */
    uint64_t now = cr_monotonic_ns();
    assert_int_equal(cr_wait_timer_before(&t, 1, now), -1);
    assert_int_equal(t.arms, 2);
    assert_true(ready_within(t.fd, BOUND_MS));
    cr_wait_timer_fired(&t);
    cr_wait_timer_fired(&t); /* nothing to read: EAGAIN, still fine */
    assert_false(ready_within(t.fd, 0));
    cr_wait_timer_close(&t);
}

/* Without a timerfd the caller sleeps in whole milliseconds, rounded up. */
static void test_without_a_timerfd_milliseconds(void **state) {
    (void)state;
    struct cr_wait_timer t = {.fd = -1};
    assert_int_equal(cr_wait_timer_before(&t, 1, cr_monotonic_ns()), 1);
    assert_int_equal(cr_wait_timer_before(&t, 2 * MS + 1, cr_monotonic_ns()), 3);
    assert_int_equal(cr_wait_timer_before(&t, -1, cr_monotonic_ns()), -1);
    assert_int_equal(t.arms, 0);
    cr_wait_timer_close(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_timeout_arms_nothing),
        cmocka_unit_test(test_a_later_deadline_keeps_the_armed_timer),
        cmocka_unit_test(test_an_earlier_deadline_rearms),
        cmocka_unit_test(test_fired_reads_and_disarms),
        cmocka_unit_test(test_without_a_timerfd_milliseconds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
