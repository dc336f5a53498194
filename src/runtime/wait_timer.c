/* A wait hook's deadline in a timerfd armed only when it moves earlier
 * (wait_timer.h says why). */
#include "runtime/wait_timer.h"

#include <assert.h>
#include <errno.h>
#include <string.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "runtime/runtime.h"
#include "core/log.h"

bool cr_wait_timer_init(struct cr_wait_timer *t) {
    *t = (struct cr_wait_timer){.fd = -1};
    t->fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    return t->fd >= 0;
}

void cr_wait_timer_close(struct cr_wait_timer *t) {
    if (t->fd >= 0) close(t->fd);
    t->fd = -1;
    t->armed_ns = 0;
}

/* Arms the fd for the absolute deadline; false when the kernel refuses. */
static bool arm(struct cr_wait_timer *t, uint64_t deadline_ns) {
    struct itimerspec when = {
        .it_value = {.tv_sec = (time_t)(deadline_ns / 1000000000u),
                     .tv_nsec = (long)(deadline_ns % 1000000000u)},
    };
    t->arms++;
    if (timerfd_settime(t->fd, TFD_TIMER_ABSTIME, &when, NULL) != 0) {
        CR_ERROR("runtime", "timerfd_settime failed: %s; this wait sleeps in whole milliseconds",
                 strerror(errno));
        t->armed_ns = 0;
        return false;
    }
    t->armed_ns = deadline_ns;
    return true;
}

int cr_wait_timer_before(struct cr_wait_timer *t, int64_t timeout_ns, uint64_t now_ns) {
    if (timeout_ns <= 0) return timeout_ns < 0 ? -1 : 0;
    uint64_t deadline = now_ns + (uint64_t)timeout_ns;
    assert(deadline > now_ns); /* timeouts are capped at a minute (runtime.c) */
    /* An earlier deadline already armed covers this one (it fires early at
     * worst); 0 as a deadline never occurs on CLOCK_MONOTONIC after boot. */
    if (t->fd >= 0 && t->armed_ns != 0 && t->armed_ns <= deadline) return -1;
    if (t->fd >= 0 && arm(t, deadline)) return -1;
    return cr_timeout_ms(timeout_ns);
}

void cr_wait_timer_fired(struct cr_wait_timer *t) {
    assert(t->fd >= 0);
    uint64_t expirations;
    /* EAGAIN: re-armed for later since it was found ready; nothing to read. */
    if (read(t->fd, &expirations, sizeof(expirations)) < 0 && errno != EAGAIN && errno != EINTR)
        CR_ERROR("runtime", "read of a timerfd failed: %s", strerror(errno));
    t->armed_ns = 0;
}
