/* Actor threads: spawn, the message loop, idling, timers, stop (see runtime.h). */
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

static __thread struct cr_actor *tls_actor;
static _Atomic uint64_t next_actor_uid = 1;

uint64_t cr_monotonic_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t monotonic_now_ns(void *ctx) {
    (void)ctx;
    return cr_monotonic_ns();
}

struct cr_clock cr_clock_monotonic(void) {
    return (struct cr_clock){.now_ns = monotonic_now_ns, .ctx = NULL};
}

void cr_runtime_config_default(struct cr_runtime_config *config) {
    memset(config, 0, sizeof(*config));
    config->pin_threads = true;
    config->ring_slots = 4096;
    config->batch_max = 64;
    config->spin_ns = 20 * 1000;
    config->spin_adaptive = true;
    config->send_wait_ns = 100 * 1000 * 1000;
    config->timers_max = 256;
    config->lazy_wake_batch = 256;
    config->lazy_wake_ns = 100 * 1000;
    config->clock = cr_clock_monotonic();
}

struct cr_actor *cr_current_actor(void) { return tls_actor; }

uint64_t cr_runtime_now_ns(const struct cr_runtime *rt) {
    return rt->config.clock.now_ns(rt->config.clock.ctx);
}

void cr_actor_wait_saw_no_wake(struct cr_actor *self) {
    assert(self == tls_actor && self->in_wait);
    self->wake_quiet = true;
}

uint64_t cr_actor_now_ns(struct cr_actor *self) {
    assert(self == tls_actor);
    uint32_t epoch = atomic_load_explicit(&self->rt->clock_epoch, memory_order_acquire);
    if (self->round_now_ns == 0 || self->round_clock_epoch != epoch) {
        self->round_now_ns = cr_runtime_now_ns(self->rt);
        self->round_clock_epoch = epoch;
    }
    return self->round_now_ns;
}

/* ------------------------------------------------------------------------ */
/* Runtime lifecycle */

static void runtime_read_cpus(struct cr_runtime *rt) {
    cpu_set_t set;
    rt->cpu_count = 0;
    if (sched_getaffinity(0, sizeof(set), &set) != 0) {
        CR_WARN("runtime", "sched_getaffinity failed (%s): actors will not be pinned",
                strerror(errno));
        return;
    }
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (CPU_ISSET(cpu, &set)) rt->cpus[rt->cpu_count++] = cpu;
    }
}

/* The default runnable probe: the fourth field of /proc/loadavg ("R/T":
 * threads runnable now on the whole machine, the reader included).  One
 * pread on a file kept open. */
static uint32_t loadavg_runnable(void *ctx) {
    struct cr_runtime *rt = ctx;
    char text[128];
    ssize_t n = pread(rt->loadavg_fd, text, sizeof(text) - 1, 0);
    if (n <= 0) return 0;
    text[n] = '\0';
    return cr_loadavg_runnable(text);
}

static void runtime_open_probe(struct cr_runtime *rt) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    rt->online_cpus = online > 0 ? (uint32_t)online : 1;
    rt->loadavg_fd = -1;
    if (!rt->config.spin_adaptive || rt->config.runnable_probe.runnable != NULL) return;
    rt->loadavg_fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
    if (rt->loadavg_fd < 0) {
        CR_WARN("runtime", "cannot open /proc/loadavg (%s): idle actors will spin without "
                "checking that a core is free", strerror(errno));
        return;
    }
    rt->config.runnable_probe = (struct cr_runnable_probe){.runnable = loadavg_runnable, .ctx = rt};
}

static uint32_t runtime_spin_limit(const struct cr_runtime *rt) {
    if (rt->cpu_count > 0) return rt->cpu_count;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online > 0 ? (uint32_t)online : 1;
}

int cr_runtime_create(const struct cr_runtime_config *config, struct cr_runtime **out) {
    assert(config != NULL && out != NULL);
    bool power_of_two = config->ring_slots >= 2 && (config->ring_slots & (config->ring_slots - 1)) == 0;
    if (!power_of_two || config->batch_max == 0 || config->timers_max == 0 ||
        config->lazy_wake_batch == 0 || config->clock.now_ns == NULL)
        return CR_ERR_INVALID_PARAMS;
    cr_barrier_init();
    struct cr_runtime *rt = calloc(1, sizeof(*rt));
    if (rt == NULL) return CR_ERR_NOMEM;
    rt->config = *config;
    if (config->pin_threads) runtime_read_cpus(rt);
    rt->spin_limit = runtime_spin_limit(rt);
    runtime_open_probe(rt);
    *out = rt;
    return CR_OK;
}

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

static void *actor_main(void *arg) {
    struct cr_actor *actor = arg;
    tls_actor = actor;
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

/* ------------------------------------------------------------------------ */
/* Spawn, stop, destroy */

static struct cr_actor *actor_alloc(struct cr_runtime *rt, const char *name,
                                    const struct cr_actor_ops *ops, void *state) {
    struct cr_actor *actor = cr_cache_aligned_alloc(sizeof(*actor));
    if (actor == NULL) return NULL;
    memset(actor, 0, sizeof(*actor));
    if (cr_timer_heap_init(&actor->timers, rt->config.timers_max) != CR_OK) {
        free(actor);
        return NULL;
    }
    actor->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (actor->wake_fd < 0) {
        CR_ERROR("runtime", "eventfd for actor %s failed: %s", name, strerror(errno));
        cr_timer_heap_destroy(&actor->timers);
        free(actor);
        return NULL;
    }
    actor->rt = rt;
    cr_spin_policy_init(&actor->spin, rt->config.spin_ns);
    actor->id = (uint16_t)rt->actor_count;
    actor->uid = atomic_fetch_add(&next_actor_uid, 1);
    actor->cpu = rt->cpu_count > 0 ? rt->cpus[rt->actor_count % rt->cpu_count] : -1;
    snprintf(actor->name, sizeof(actor->name), "%s", name);
    actor->ops = ops;
    actor->park_fence = ops->park_fence;
    actor->state = state;
    atomic_init(&actor->run_state, CR_ACTOR_STARTING);
    pthread_mutex_init(&actor->start_lock, NULL);
    pthread_cond_init(&actor->start_cond, NULL);
    return actor;
}

static void actor_free(struct cr_actor *actor) {
    cr_mailbox_close(actor);
    /* Pending timer messages may own payloads too. */
    struct cr_timer timer;
    while (cr_timer_heap_pop_due(&actor->timers, UINT64_MAX, UINT64_MAX, &timer)) {
        if (actor->ops->discard != NULL) actor->ops->discard(actor->state, &timer.msg);
    }
    close(actor->wake_fd);
    cr_timer_heap_destroy(&actor->timers);
    pthread_mutex_destroy(&actor->start_lock);
    pthread_cond_destroy(&actor->start_cond);
    free(actor);
}

int cr_runtime_spawn(struct cr_runtime *rt, const char *name, const struct cr_actor_ops *ops,
                     void *state, struct cr_actor **out) {
    assert(rt != NULL && name != NULL && ops != NULL);
    if (ops->handle == NULL || name[0] == '\0' || strlen(name) >= CR_ACTOR_NAME_MAX ||
        rt->actor_count == CR_ACTORS_MAX || rt->stopped)
        return CR_ERR_INVALID_PARAMS;
    struct cr_actor *actor = actor_alloc(rt, name, ops, state);
    if (actor == NULL) return CR_ERR_NOMEM;
    int rc = pthread_create(&actor->thread, NULL, actor_main, actor);
    if (rc != 0) {
        CR_ERROR("runtime", "pthread_create for actor %s failed: %s", name, strerror(rc));
        actor_free(actor);
        return CR_ERR_IO;
    }
    actor->thread_started = true;
    pthread_mutex_lock(&actor->start_lock);
    while (atomic_load(&actor->run_state) == CR_ACTOR_STARTING)
        pthread_cond_wait(&actor->start_cond, &actor->start_lock);
    pthread_mutex_unlock(&actor->start_lock);
    if (actor->start_status != CR_OK) {
        int status = actor->start_status;
        pthread_join(actor->thread, NULL);
        actor_free(actor);
        return status;
    }
    rt->actors[rt->actor_count++] = actor;
    CR_DEBUG("runtime", "actor %s started (id %u, cpu %d)", actor->name, actor->id, actor->cpu);
    if (out != NULL) *out = actor;
    return CR_OK;
}

void cr_runtime_stop(struct cr_runtime *rt) {
    assert(rt != NULL);
    if (rt->stopped) return;
    rt->stopped = true;
    for (uint32_t i = 0; i < rt->actor_count; i++) {
        struct cr_actor *actor = rt->actors[i];
        /* A flag and a wake, not a message: it needs no ring slot and cannot
         * be refused by a full inbox.  The eventfd counter makes the wake
         * stick even if the actor is between its checks and its poll. */
        atomic_store_explicit(&actor->stop_flag, true, memory_order_release);
        uint64_t one = 1;
        if (write(actor->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
            CR_ERROR("runtime", "stop wake of %s failed: %s", actor->name, strerror(errno));
        pthread_join(actor->thread, NULL);
        actor->thread_started = false;
    }
}

void cr_runtime_destroy(struct cr_runtime *rt) {
    if (rt == NULL) return;
    cr_runtime_stop(rt);
    for (uint32_t i = 0; i < rt->actor_count; i++) actor_free(rt->actors[i]);
    if (rt->loadavg_fd >= 0) close(rt->loadavg_fd);
    free(rt);
}

/* ------------------------------------------------------------------------ */
/* Sending */

/* The ring is full: wait for the receiver to make room, up to send_wait_ns.
 * Spin only briefly (the receiver may be draining on another core), then
 * sleep with exponential backoff.  Sleeping, not sched_yield, is what frees
 * the CPU when there are more threads than cores: under CFS a yielding
 * producer keeps most of its time slice, and the consumer it waits for
 * starves (measured on 2 cores: rings full for 10+ ms). */
static int send_wait_full(struct cr_actor *to, struct cr_ring *ring, struct cr_msg *msg) {
    atomic_fetch_add_explicit(&to->ring_full, 1, memory_order_relaxed);
    uint64_t start = cr_monotonic_ns();
    uint64_t sleep_ns = 20000; /* first sleep 20 us, doubling to 1 ms */
    for (;;) {
        cr_mailbox_wake(to); /* it cannot drain while asleep */
        if (atomic_load_explicit(&to->run_state, memory_order_acquire) >= CR_ACTOR_STOPPING)
            return CR_ERR_SHUTDOWN;
        uint64_t waited = cr_monotonic_ns() - start;
        if (waited < 2000) {
            for (int i = 0; i < 16; i++) __builtin_ia32_pause();
        } else {
            struct timespec pause = {.tv_sec = 0, .tv_nsec = (long)sleep_ns};
            nanosleep(&pause, NULL);
            if (sleep_ns < 1000000) sleep_ns *= 2;
        }
        if (cr_ring_enqueue(ring, msg)) return CR_OK;
        if (cr_monotonic_ns() - start >= to->rt->config.send_wait_ns) {
            atomic_fetch_add_explicit(&to->send_failures, 1, memory_order_relaxed);
            return CR_ERR_AGAIN;
        }
    }
}

/* Enqueues a copy of *msg for `to`, waiting on a full ring; no wake. */
static int send_enqueue(struct cr_actor *to, const struct cr_msg *msg, struct cr_actor *self) {
    assert(to != NULL && msg != NULL);
    assert(msg->type != CR_MSG_INVALID);
    if (atomic_load_explicit(&to->run_state, memory_order_acquire) >= CR_ACTOR_STOPPING)
        return CR_ERR_SHUTDOWN;
    struct cr_ring *ring = cr_mailbox_sender_ring(to);
    if (ring == NULL) return CR_ERR_NOMEM;
    struct cr_msg copy = *msg;
    copy.sender = self != NULL ? self->id : CR_SENDER_EXTERNAL;
    if (!cr_ring_enqueue(ring, &copy)) return send_wait_full(to, ring, &copy);
    return CR_OK;
}

/* A send from an actor of the same runtime, outside its wait hook, may
 * leave the wake to the sender's loop. */
static bool wake_may_wait(const struct cr_actor *self, const struct cr_actor *to,
                          const struct cr_msg *msg) {
    return self != NULL && self->rt == to->rt && !(msg->flags & CR_MSG_ASK) && !self->in_wait;
}

static void defer_wake(struct cr_actor *self, struct cr_actor *to) {
    self->wake_pending |= 1u << to->id;
    self->wake_target[to->id] = to; /* not rt->actors[]: to may still be spawning */
    if (++self->deferred_sends >= self->rt->config.batch_max) cr_runtime_flush_wakes();
}

int cr_send(struct cr_actor *to, const struct cr_msg *msg) {
    struct cr_actor *self = tls_actor;
    int rc = send_enqueue(to, msg, self);
    if (rc != CR_OK) return rc;
    /* An actor's sends wake their receivers when its loop round ends: a
     * handler that sends to a parked actor per message would otherwise pay a
     * wake syscall each time, and the receiver a park, for one message.
     * Asks wake at once: the asker blocks next. */
    if (wake_may_wait(self, to, msg))
        defer_wake(self, to);
    else
        cr_mailbox_wake(to);
    return CR_OK;
}

int cr_send_lazy(struct cr_actor *to, const struct cr_msg *msg) {
    struct cr_actor *self = tls_actor;
    int rc = send_enqueue(to, msg, self);
    if (rc != CR_OK) return rc;
    if (!wake_may_wait(self, to, msg)) {
        cr_mailbox_wake(to);
        return CR_OK;
    }
    uint32_t bit = 1u << to->id;
    if (self->lazy_pending == 0) self->lazy_since_ns = cr_monotonic_ns(); /* once per batch */
    self->lazy_pending |= bit;
    self->wake_target[to->id] = to;
    if (++self->lazy_count[to->id] >= self->rt->config.lazy_wake_batch) {
        self->lazy_pending &= ~bit; /* a batch is due: one wake per lazy_wake_batch sends */
        self->lazy_count[to->id] = 0;
        cr_mailbox_wake(to);
    }
    return CR_OK;
}

_Static_assert(CR_ACTORS_MAX <= 32, "wake_pending has a bit per actor");

void cr_runtime_flush_wakes(void) {
    struct cr_actor *self = tls_actor;
    if (self == NULL) return;
    for (uint32_t pending = self->wake_pending; pending != 0; pending &= pending - 1) {
        uint32_t id = (uint32_t)__builtin_ctz(pending);
        cr_mailbox_wake(self->wake_target[id]);
        self->lazy_count[id] = 0; /* this wake covers its lazy sends too */
    }
    self->lazy_pending &= ~self->wake_pending;
    self->wake_pending = 0;
    self->deferred_sends = 0;
}

void cr_runtime_flush_all_wakes(void) {
    struct cr_actor *self = tls_actor;
    if (self == NULL) return;
    self->wake_pending |= self->lazy_pending;
    cr_runtime_flush_wakes();
    assert(self->lazy_pending == 0);
}

/* ------------------------------------------------------------------------ */
/* Timers and accessors */

int cr_actor_timer_after(struct cr_actor *self, uint64_t delay_ns, const struct cr_msg *msg,
                         uint64_t *id_out) {
    assert(self == tls_actor);
    assert(!(msg->flags & CR_MSG_ASK));
    uint64_t id = 0;
    struct cr_msg copy = *msg;
    copy.sender = self->id;
    uint64_t deadline = cr_add_sat(cr_runtime_now_ns(self->rt), delay_ns);
    int rc = cr_timer_heap_add(&self->timers, deadline, &copy, &id);
    if (id_out != NULL) *id_out = id;
    return rc;
}

bool cr_actor_timer_cancel(struct cr_actor *self, uint64_t id) {
    assert(self == tls_actor);
    return cr_timer_heap_cancel(&self->timers, id);
}

void cr_runtime_clock_changed(struct cr_runtime *rt) {
    atomic_fetch_add_explicit(&rt->clock_epoch, 1, memory_order_release);
    for (uint32_t i = 0; i < rt->actor_count; i++) {
        struct cr_actor *actor = rt->actors[i];
        uint64_t one = 1;
        if (write(actor->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
            CR_ERROR("runtime", "wake of %s failed: %s", actor->name, strerror(errno));
    }
}

const char *cr_actor_name(const struct cr_actor *actor) { return actor->name; }
const char *cr_actor_stats_view(const struct cr_actor *actor, uint32_t view) {
    const char *const *views = actor->ops->stats_views;
    for (uint32_t i = 1; views != NULL && views[i - 1] != NULL; i++)
        if (i == view) return views[i - 1];
    return NULL;
}
uint16_t cr_actor_id(const struct cr_actor *actor) { return actor->id; }
struct cr_runtime *cr_actor_runtime(const struct cr_actor *actor) { return actor->rt; }
uint32_t cr_runtime_actor_count(const struct cr_runtime *rt) { return rt->actor_count; }

struct cr_actor *cr_runtime_actor(const struct cr_runtime *rt, uint32_t index) {
    return index < rt->actor_count ? rt->actors[index] : NULL;
}

struct cr_actor *cr_runtime_find(const struct cr_runtime *rt, const char *name) {
    for (uint32_t i = 0; i < rt->actor_count; i++) {
        if (strcmp(rt->actors[i]->name, name) == 0) return rt->actors[i];
    }
    return NULL;
}
