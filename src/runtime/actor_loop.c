/* An actor's thread: its loop (dispatch, timers), idling (spin or park on
 * its eventfd, the Dekker handshake of docs/architecture.md), pinning and
 * its start and stop.  Spawning it is runtime.c. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "runtime/runtime_internal.h"
#include "core/log.h"
#include "crescent/error.h"

/* ------------------------------------------------------------------------ */
/* Dispatch */

static void fill_stats(struct cr_actor *actor, struct cr_actor_stats *out, uint32_t view) {
    struct cr_actor_histogram *histograms = out->histograms;
    uint32_t histograms_max = out->histograms_max;
    memset(out, 0, sizeof(*out));
    out->histograms = histograms;
    out->histograms_max = histograms_max;
    out->view = view;
    if (view > 0) { /* a view: its name and the hook's counters only */
        const char *name = cr_actor_stats_view(actor, view);
        snprintf(out->name, sizeof(out->name), "%s", name != NULL ? name : "?");
        out->cpu = actor->cpu;
        if (name != NULL && actor->ops->stats != NULL) actor->ops->stats(actor, actor->state, out);
        assert(out->extra_count <= CR_ACTOR_STATS_EXTRA_MAX);
        assert(out->histogram_count <= out->histograms_max);
        return;
    }
    memcpy(out->name, actor->name, sizeof(out->name));
    out->cpu = actor->cpu;
    out->messages_handled = atomic_load_explicit(&actor->handled, memory_order_relaxed);
    out->ring_depth = cr_mailbox_depth(actor, &out->rings);
    out->parks = atomic_load_explicit(&actor->parks, memory_order_relaxed);
    out->spins = atomic_load_explicit(&actor->spins, memory_order_relaxed);
    out->spins_busy = atomic_load_explicit(&actor->spins_busy, memory_order_relaxed);
    out->wakes = atomic_load_explicit(&actor->wakes, memory_order_relaxed);
    out->ring_full = atomic_load_explicit(&actor->ring_full, memory_order_relaxed);
    out->send_failures = atomic_load_explicit(&actor->send_failures, memory_order_relaxed);
    out->asks_expired = atomic_load_explicit(&actor->asks_expired, memory_order_relaxed);
    out->timers_fired = atomic_load_explicit(&actor->timers_fired, memory_order_relaxed);
    if (actor->ops->stats != NULL) actor->ops->stats(actor, actor->state, out);
    assert(out->extra_count <= CR_ACTOR_STATS_EXTRA_MAX);
    assert(out->histogram_count <= out->histograms_max);
}

static void dispatch_user(struct cr_actor *actor, struct cr_msg *msg) {
    actor->ops->handle(actor, actor->state, msg);
    if ((msg->flags & CR_MSG_ASK) && cr_ask_pending(msg)) {
        CR_ERROR("runtime", "bug: actor %s left an ask of type %u unanswered", actor->name,
                 msg->type);
        cr_reply(msg, CR_ERR_RPC_FAIL);
    }
}

static void dispatch(struct cr_actor *actor, struct cr_msg *msg) {
    if ((msg->flags & CR_MSG_ASK) && !cr_ask_claim(msg)) {
        cr_counter_bump(&actor->asks_expired, 1);
        return;
    }
    switch (msg->type) {
    case CR_MSG_STATS:
        assert(msg->flags & CR_MSG_ASK);
        fill_stats(actor, CR_MSG_BODY(msg, struct cr_msg_stats)->out,
                   CR_MSG_BODY(msg, struct cr_msg_stats)->view);
        cr_reply(msg, CR_OK);
        break;
    default:
        dispatch_user(actor, msg);
        break;
    }
    cr_counter_bump(&actor->handled, 1);
}

/* Fires the timers due now that existed on entry: a handler that re-arms
 * with delay 0 (due again at once under a manual or coarse clock) waits for
 * the next round, so timers cannot starve the mailbox or a stop. */
static uint32_t fire_timers(struct cr_actor *actor) {
    if (actor->timers.count == 0) return 0;
    uint64_t now = cr_runtime_now_ns(actor->rt);
    uint64_t id_limit = actor->timers.next_id;
    struct cr_timer timer;
    uint32_t fired = 0;
    while (cr_timer_heap_pop_due(&actor->timers, now, id_limit, &timer)) {
        dispatch(actor, &timer.msg);
        fired++;
    }
    cr_counter_bump(&actor->timers_fired, fired);
    return fired;
}

/* ------------------------------------------------------------------------ */
/* Idling */

#define CR_PARK_MAX_NS (60ull * 1000000000u) /* the longest one sleep; the loop parks again */

/* How long a park may sleep: until the next timer (on the runtime's clock,
 * in whole milliseconds rounded up, as always: a manual clock that stands
 * still a hair before a deadline costs a wake per millisecond, not a busy
 * loop) or the oldest lazy send's deadline (CLOCK_MONOTONIC, to the
 * nanosecond: see cr_send_lazy), whichever is first; -1: neither, sleep
 * until woken. */
static int64_t park_timeout_ns(struct cr_actor *actor) {
    uint64_t left = UINT64_MAX;
    uint64_t deadline = cr_timer_heap_next_deadline(&actor->timers);
    if (deadline != UINT64_MAX) {
        uint64_t now = cr_runtime_now_ns(actor->rt);
        uint64_t gap = deadline > now ? deadline - now : 0;
        left = gap < CR_PARK_MAX_NS ? (gap + 999999u) / 1000000u * 1000000u : CR_PARK_MAX_NS;
    }
    if (actor->lazy_pending != 0) {
        uint64_t due = cr_add_sat(actor->lazy_since_ns, actor->rt->config.lazy_wake_ns);
        uint64_t now = cr_monotonic_ns();
        uint64_t lazy_left = due > now ? due - now : 0;
        if (lazy_left < left) left = lazy_left;
    }
    if (left == UINT64_MAX) return -1;
    return (int64_t)(left < CR_PARK_MAX_NS ? left : CR_PARK_MAX_NS);
}

static void wake_fd_drain(struct cr_actor *actor) {
    uint64_t count;
    ssize_t n = read(actor->wake_fd, &count, sizeof(count));
    if (n < 0 && errno != EAGAIN && errno != EINTR)
        CR_ERROR("runtime", "read(eventfd) of %s failed: %s", actor->name, strerror(errno));
}

/* A wait hook may send and then block (poll): its sends wake their
 * receivers at once, or they would sleep as long as the hook does. */
static void call_wait(struct cr_actor *actor, int64_t timeout_ns) {
    actor->wake_quiet = false; /* says this wait's view only */
    actor->in_wait = true;
    actor->ops->wait(actor, actor->state, actor->wake_fd, timeout_ns);
    actor->in_wait = false;
}

/* Announces `parked`, re-checks for work (a sender may have enqueued before
 * seeing the flag), then sleeps on the wake fd (and the actor's sockets).
 * Lazy sends not woken for yet stay so: the sleep ends by their deadline at
 * the latest, and the loop round after it wakes their receivers. */
static void park(struct cr_actor *actor) {
    atomic_store_explicit(&actor->parked, 1, memory_order_relaxed);
    if (actor->park_fence)
        cr_barrier_full(&actor->parked); /* its senders fence too (cr_mailbox_wake) */
    else
        cr_barrier_heavy(&actor->parked);
    int64_t timeout_ns = park_timeout_ns(actor);
    if (timeout_ns == 0 || atomic_load_explicit(&actor->stop_flag, memory_order_acquire) ||
        cr_mailbox_has_messages(actor)) {
        atomic_store_explicit(&actor->parked, 0, memory_order_relaxed);
        return; /* a racing sender's wake, if any, is absorbed on a later park */
    }
    cr_counter_bump(&actor->parks, 1);
    atomic_fetch_sub_explicit(&actor->rt->active, 1, memory_order_relaxed);
    if (actor->ops->wait != NULL) {
        call_wait(actor, timeout_ns);
    } else {
        struct pollfd pfd = {.fd = actor->wake_fd, .events = POLLIN};
        struct timespec ts = {.tv_sec = (time_t)(timeout_ns / 1000000000),
                              .tv_nsec = (long)(timeout_ns % 1000000000)};
        if (ppoll(&pfd, 1, timeout_ns < 0 ? NULL : &ts, NULL) < 0 && errno != EINTR)
            CR_ERROR("runtime", "ppoll on %s's wake fd failed: %s", actor->name, strerror(errno));
    }
    atomic_fetch_add_explicit(&actor->rt->active, 1, memory_order_relaxed);
    atomic_store_explicit(&actor->parked, 0, memory_order_relaxed);
    if (!actor->wake_quiet) wake_fd_drain(actor);
}

/* ------------------------------------------------------------------------ */
/* The actor thread */

static void actor_pin(struct cr_actor *actor) {
    if (actor->cpu < 0) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(actor->cpu, &set);
    int rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
    if (rc != 0) {
        CR_WARN("runtime", "cannot pin %s to CPU %d (%s): running unpinned", actor->name,
                actor->cpu, strerror(rc));
        actor->cpu = -1;
    }
}

static void actor_signal_started(struct cr_actor *actor, int status) {
    pthread_mutex_lock(&actor->start_lock);
    actor->start_status = status;
    atomic_store_explicit(&actor->run_state, status == CR_OK ? CR_ACTOR_RUNNING : CR_ACTOR_STOPPED,
                          memory_order_release);
    pthread_cond_signal(&actor->start_cond);
    pthread_mutex_unlock(&actor->start_lock);
}

/* Stop: refuse new sends (STOPPING), then drain what is queued.  The drain
 * is bounded because nobody can add to it any more. */
static void check_stop(struct cr_actor *actor) {
    if (actor->stop_requested || !atomic_load_explicit(&actor->stop_flag, memory_order_acquire))
        return;
    actor->stop_requested = true;
    atomic_store_explicit(&actor->run_state, CR_ACTOR_STOPPING, memory_order_seq_cst);
}

/* Whether a core is free for a spinner: the machine's runnable threads
 * (the caller included) do not outnumber its CPUs.  The count is read at
 * most once per CR_RUNNABLE_REFRESH_NS per runtime; unknown counts as free. */
#define CR_RUNNABLE_REFRESH_NS 1000000u

static bool core_free(struct cr_runtime *rt, uint64_t now) {
    const struct cr_runnable_probe *probe = &rt->config.runnable_probe;
    if (probe->runnable == NULL) return true;
    uint64_t read_at = atomic_load_explicit(&rt->runnable_read_ns, memory_order_relaxed);
    if ((read_at == 0 || now - read_at >= CR_RUNNABLE_REFRESH_NS) &&
        atomic_compare_exchange_strong_explicit(&rt->runnable_read_ns, &read_at, now,
                                                memory_order_relaxed, memory_order_relaxed))
        atomic_store_explicit(&rt->runnable, probe->runnable(probe->ctx), memory_order_relaxed);
    uint32_t runnable = atomic_load_explicit(&rt->runnable, memory_order_relaxed);
    return runnable == 0 || runnable <= rt->online_cpus;
}

/* An idle period begins: how long to spin before parking (0: park now).
 * Never while the runtime's own threads hold every CPU; adaptive, only
 * while the actor's traffic pays for it and a core is free (runtime.h). */
static uint64_t idle_spin_ns(struct cr_actor *actor, uint64_t now) {
    struct cr_runtime *rt = actor->rt;
    if (atomic_load_explicit(&rt->active, memory_order_relaxed) > rt->spin_limit) return 0;
    uint64_t window = rt->config.spin_adaptive ? cr_spin_policy_begin(&actor->spin)
                                               : rt->config.spin_ns;
    if (window == 0) return 0;
    if (rt->config.spin_adaptive && !core_free(rt, now)) {
        cr_counter_bump(&actor->spins_busy, 1);
        return 0;
    }
    cr_counter_bump(&actor->spins, 1);
    return window;
}

/* Socket-owning actors (those with a wait hook) do not spin: a poll over
 * their sockets would cost a syscall per spin, so they go straight to it;
 * unless their spin_poll hook has shared-memory rings to look at, which
 * costs no syscall (their poll hook is then left out of the spin steps).  Others spin (idle_spin_ns) and park; an idle period lasts
 * from the first round without work to the next round with some, however
 * many parks it spans, and its length teaches the actor's spin policy. */
static void actor_loop(struct cr_actor *actor) {
    uint64_t idle_since = 0; /* 0: not idle */
    uint64_t spin_ns = 0;    /* this idle period's spin */
    uint32_t busy_rounds = 0;
    bool spin_step = false; /* this round is a step of an idle spin on rings */
    for (;;) {
        check_stop(actor);
        /* A stopping actor drains messages but fires no more timers: a timer
         * that keeps re-arming would otherwise keep it alive.  Pending timers
         * go to the discard hook when the runtime is destroyed. */
        actor->round_now_ns = 0; /* a new round: cr_actor_now_ns reads the clock again */
        uint32_t work = cr_mailbox_drain(actor, dispatch);
        actor->round_now_ns = 0; /* timers see the time they fire at */
        bool pollable = false; /* spin_poll said it has rings to poll */
        if (!actor->stop_requested) {
            work += fire_timers(actor);
            /* A spin step does not call poll, which may cost a syscall (an
             * epoll_wait) per step; spin_poll costs none. */
            if (actor->ops->poll != NULL && !spin_step) work += actor->ops->poll(actor, actor->state);
            if (actor->ops->spin_poll != NULL) {
                int32_t polled = actor->ops->spin_poll(actor, actor->state);
                pollable = polled >= 0;
                if (polled > 0) work += (uint32_t)polled;
            }
        }
        spin_step = false;
        if (work > 0 && actor->ops->round_end != NULL) actor->ops->round_end(actor, actor->state);
        cr_runtime_flush_wakes();
        if (actor->lazy_pending != 0 &&
            cr_monotonic_ns() - actor->lazy_since_ns >= actor->rt->config.lazy_wake_ns)
            cr_runtime_flush_all_wakes();
        if (actor->stop_requested && work == 0) return;
        if (work > 0) {
            if (idle_since != 0) cr_spin_policy_observe(&actor->spin, cr_monotonic_ns() - idle_since);
            idle_since = 0;
            /* Keep sockets served while messages keep coming. */
            if (actor->ops->wait != NULL && actor->ops->poll == NULL && ++busy_rounds % 64 == 0)
                call_wait(actor, 0);
            continue;
        }
        if (actor->ops->wait == NULL || pollable) {
            uint64_t now = cr_monotonic_ns();
            if (idle_since == 0) {
                idle_since = now;
                spin_ns = idle_spin_ns(actor, now);
            }
            if (now - idle_since < spin_ns) {
                /* A ring's request is seen one spin step late: keep the step
                 * short (a pause is ~40-140 cycles) while rings are polled. */
                int pauses = pollable ? 4 : 32;
                for (int i = 0; i < pauses; i++) __builtin_ia32_pause();
                spin_step = pollable && actor->ops->wait != NULL;
                continue;
            }
        }
        cr_mailbox_retire_idle(actor); /* free the slots of exited senders */
        park(actor);
    }
}

void *cr_actor_main(void *arg) {
    struct cr_actor *actor = arg;
    cr_runtime_set_current_actor(actor);
    pthread_setname_np(pthread_self(), actor->name);
    actor_pin(actor);
    int status = actor->ops->start != NULL ? actor->ops->start(actor, actor->state) : CR_OK;
    cr_runtime_flush_wakes(); /* what the start hook sent, even if it failed */
    actor_signal_started(actor, status);
    if (status != CR_OK) return NULL;

    atomic_fetch_add_explicit(&actor->rt->active, 1, memory_order_relaxed);
    actor_loop(actor);
    atomic_fetch_sub_explicit(&actor->rt->active, 1, memory_order_relaxed);
    /* No new messages from here on; take what raced in before the flag. */
    atomic_store_explicit(&actor->run_state, CR_ACTOR_STOPPED, memory_order_seq_cst);
    while (cr_mailbox_drain(actor, dispatch) > 0) cr_runtime_flush_wakes();
    if (actor->ops->stop != NULL) actor->ops->stop(actor, actor->state);
    cr_runtime_flush_all_wakes(); /* a stop hook may hand over a last message */
    cr_runtime_thread_release();
    return NULL;
}
