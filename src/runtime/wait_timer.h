/* A wait hook's deadline kept in a timerfd (CLOCK_MONOTONIC) that sits in
 * the hook's own epoll set, armed only when the deadline moves earlier,
 * instead of a timeout given to every epoll_wait.
 *
 * Why: an actor that parks after nearly every request it serves (segments
 * at one synchronous client) armed and cancelled a kernel hrtimer on every
 * park with a timed epoll_pwait2.  On the 2-core VM a park with a timeout
 * under a millisecond (a lazy send's deadline, cr_send_lazy: every park
 * while store events wait for their wake) cost about 5 µs more CPU than an
 * untimed one, and one with a long timeout (a timer a second away) about
 * 1 µs (bench/RESULTS.md, "ZMQ endpoint at N=1 and 8").  The timerfd stays
 * armed across parks: one timerfd_settime per new, earlier deadline.
 *
 * The rule: before blocking with a wait hook's timeout_ns, the timer must
 * fire no later than now + timeout_ns.  It is re-armed when it is not armed
 * or armed later than that; a timer armed earlier is kept (it fires early:
 * one wake that finds nothing due, after which the loop parks again and the
 * timer is armed for the new deadline).  When the hook finds the fd ready it
 * calls cr_wait_timer_fired, which reads it (so it stops being ready) and
 * marks it unarmed.  Not thread-safe: one actor's thread. */
#ifndef CRESCENT_ACTORS_WAIT_TIMER_H
#define CRESCENT_ACTORS_WAIT_TIMER_H

#include <stdbool.h>
#include <stdint.h>

struct cr_wait_timer {
    int fd;            /* timerfd, nonblocking; -1: none (the ms fallback) */
    uint64_t armed_ns; /* CLOCK_MONOTONIC deadline it is armed for; 0: not armed */
    uint64_t arms;     /* timerfd_settime calls (tests, stats) */
};

/* Creates the timerfd.  Returns false (fd -1, errno kept) when it cannot;
 * the timer then still works, as whole-millisecond epoll timeouts. */
bool cr_wait_timer_init(struct cr_wait_timer *t);
void cr_wait_timer_close(struct cr_wait_timer *t);

/* Before an epoll_wait over a set that holds t->fd, for a wait hook's
 * timeout_ns (-1: none, 0: do not block, > 0: wake by now_ns + timeout_ns,
 * now_ns on CLOCK_MONOTONIC).  Returns the epoll_wait timeout to use: -1
 * or 0 as asked, or -1 for a positive timeout the timer now covers; without
 * a timerfd (or when arming fails), the timeout in milliseconds, rounded
 * up. */
int cr_wait_timer_before(struct cr_wait_timer *t, int64_t timeout_ns, uint64_t now_ns);

/* The fd was found ready: reads its expiry count and marks it unarmed. */
void cr_wait_timer_fired(struct cr_wait_timer *t);

#endif
