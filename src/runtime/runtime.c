/* The actor runtime: clocks, creating the runtime, spawning, stopping and
 * destroying actors, sending, timers and accessors (see runtime.h).  An
 * actor's thread (its loop, dispatch, idling and parking) is actor_loop.c. */
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

void cr_runtime_set_current_actor(struct cr_actor *actor) { tls_actor = actor; }

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
    int rc = pthread_create(&actor->thread, NULL, cr_actor_main, actor);
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

/* Enqueues a copy of *msg for `to`, waiting on a full ring (unless !wait:
 * then CR_ERR_AGAIN at once, counted as a send failure); no wake. */
static int send_enqueue_wait(struct cr_actor *to, const struct cr_msg *msg,
                             struct cr_actor *self, bool wait) {
    assert(to != NULL && msg != NULL);
    assert(msg->type != CR_MSG_INVALID);
    if (atomic_load_explicit(&to->run_state, memory_order_acquire) >= CR_ACTOR_STOPPING)
        return CR_ERR_SHUTDOWN;
    struct cr_ring *ring = cr_mailbox_sender_ring(to);
    if (ring == NULL) return CR_ERR_NOMEM;
    struct cr_msg copy = *msg;
    copy.sender = self != NULL ? self->id : CR_SENDER_EXTERNAL;
    if (cr_ring_enqueue(ring, &copy)) return CR_OK;
    if (wait) return send_wait_full(to, ring, &copy);
    atomic_fetch_add_explicit(&to->ring_full, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&to->send_failures, 1, memory_order_relaxed);
    return CR_ERR_AGAIN;
}

static int send_enqueue(struct cr_actor *to, const struct cr_msg *msg, struct cr_actor *self) {
    return send_enqueue_wait(to, msg, self, true);
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

int cr_send_try(struct cr_actor *to, const struct cr_msg *msg) {
    struct cr_actor *self = tls_actor;
    int rc = send_enqueue_wait(to, msg, self, false);
    if (rc != CR_OK) return rc;
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
