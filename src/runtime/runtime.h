/* The actor runtime: threads that own state and talk only through messages.
 *
 * An actor is one thread with a name, pinned to a CPU from the process's
 * affinity mask (round-robin when actors outnumber CPUs), a message handler,
 * and a timer heap whose timers fire as messages to the actor itself.
 *
 * Channels: one ck_ring SPSC ring per (sending thread, receiving actor),
 * made on that thread's first send and registered in the receiver's inbox.
 * The receiver drains its rings round-robin in bounded batches, so one busy
 * sender cannot starve the others.  No MPSC enqueue anywhere: with more
 * threads than cores, ck's MPSC makes every producer wait on one that was
 * preempted mid-enqueue.
 *
 * Idle: an actor may spin up to `spin_ns`, then parks on its eventfd; with
 * spin_adaptive it spins only while its recent idle periods say work comes
 * soon enough to pay for the spin and the machine has a core free for it
 * (core/spin_policy.h, docs/architecture.md).  A sender
 * makes a syscall only to wake a parked receiver (Dekker-style: the sender
 * publishes the message then reads `parked`; the receiver publishes `parked`
 * then re-reads its rings; an asymmetric barrier, membarrier on the parking
 * side and a compiler barrier on the send side, means one of them sees the
 * other: see runtime_internal.h and docs/architecture.md).
 *
 * Backpressure: a full ring makes the sender wait up to `send_wait_ns`
 * (yielding), then cr_send returns CR_ERR_AGAIN.  Nothing is dropped silently;
 * ring-full events are counted on the receiver.
 *
 * Thread safety: cr_send and cr_ask may be called from any thread.
 * Everything taking a `struct cr_actor *self` is for the actor's own thread
 * only.  Spawn, stop and destroy belong to the thread that owns the runtime. */
#ifndef CRESCENT_ACTORS_RUNTIME_H
#define CRESCENT_ACTORS_RUNTIME_H

#include <stdbool.h>
#include <stdint.h>

#include "core/histogram.h"

#include "msgs/msg.h"

#define CR_ACTORS_MAX 16u           /* actors per runtime */
#define CR_ACTOR_SENDERS_MAX 128u   /* distinct sending threads per actor at once */
#define CR_ACTOR_NAME_MAX 16u       /* including NUL; the kernel's thread-name limit */

struct cr_runtime;
struct cr_actor;
struct cr_actor_stats;

/* Injected clock: monotonic nanoseconds.  Tests pass a manual clock. */
struct cr_clock {
    uint64_t (*now_ns)(void *ctx);
    void *ctx;
};

/* The process's monotonic clock (CLOCK_MONOTONIC). */
struct cr_clock cr_clock_monotonic(void);

/* CLOCK_MONOTONIC in nanoseconds: real time for spins, ask deadlines and
 * uptime, which must not follow an injected (manual) actor clock. */
uint64_t cr_monotonic_ns(void);

/* Threads runnable on the whole machine now, the caller included (the
 * kernel's run queues: /proc/loadavg's fourth field), or 0 when unknown.
 * Tests inject their own. */
struct cr_runnable_probe {
    uint32_t (*runnable)(void *ctx);
    void *ctx;
};

struct cr_runtime_config {
    bool pin_threads;        /* pin actors to CPUs from the affinity mask */
    uint32_t ring_slots;     /* messages per (sender, actor) ring; power of two */
    uint32_t batch_max;      /* messages taken from one ring before moving on */
    uint64_t spin_ns;        /* the longest an idle actor spins before parking (0: never) */
    /* true: an idle actor spins only while its recent traffic says work comes
     * within spin_ns often enough to pay for the spin (core/spin_policy.h)
     * and the machine has a core free for it; false: every idle period spins
     * spin_ns (while the runtime's own threads leave a CPU free). */
    bool spin_adaptive;
    struct cr_runnable_probe runnable_probe; /* NULL runnable: /proc/loadavg */
    uint64_t send_wait_ns;   /* how long cr_send waits on a full ring */
    uint32_t timers_max;     /* pending timers per actor */
    uint32_t lazy_wake_batch; /* cr_send_lazy: lazy sends to one receiver per wake */
    uint64_t lazy_wake_ns;    /* cr_send_lazy: the longest a lazy send waits for its wake */
    struct cr_clock clock;
};

/* Defaults: pinning on, 4096-slot rings, batches of 64, 20 us adaptive
 * spin, 100 ms full-ring wait, 256 timers, lazy wakes every 256 sends or 100 us,
 * CLOCK_MONOTONIC. */
void cr_runtime_config_default(struct cr_runtime_config *config);

/* What an actor does.  Every hook runs on the actor's own thread, except
 * `discard`, which runs on the thread that destroys the runtime. */
struct cr_actor_ops {
    /* Optional: set up state once the thread is running. Non-zero aborts start. */
    int (*start)(struct cr_actor *self, void *state);
    /* Required: handle one message.  Asks must be answered with cr_reply()
     * before handle returns; an ask left unanswered is answered
     * CR_ERR_RPC_FAIL by the runtime and logged as a bug.  (Work that finishes
     * later is done with messages, not by holding an ask open.) */
    void (*handle)(struct cr_actor *self, void *state, struct cr_msg *msg);
    /* Optional: after the final drain, before the thread exits. */
    void (*stop)(struct cr_actor *self, void *state);
    /* Optional: free the payload of a message that will never be handled
     * (it was still queued when the actor was destroyed). */
    void (*discard)(void *state, struct cr_msg *msg);
    /* Optional, for actors that own sockets: wait for socket input or the
     * wake fd for at most timeout_ns (-1: forever, 0: just check), handling
     * any socket input before returning.  Without it the runtime polls the
     * wake fd alone.  The timeout may be well under a millisecond (a lazy
     * send's deadline, cr_send_lazy): a hook that can only sleep in whole
     * milliseconds rounds up (cr_timeout_ms), never down; one that parks
     * after nearly every request keeps it in a timerfd (wait_timer.h). */
    void (*wait)(struct cr_actor *self, void *state, int wake_fd, int64_t timeout_ns);
    /* Optional, for input that arrives without a syscall (shared-memory
     * rings): take what is there now, without blocking and without a
     * syscall, and return the work done (0: none), or -1 when there is
     * nothing to poll at all (no ring open).  The runtime calls it every
     * loop round, after the mailbox, the timers and `poll`; and an actor with a
     * wait hook, which otherwise goes straight to wait when idle, spins
     * under the spin policy calling it while it returns >= 0 (the policy
     * learns from the gaps between its work like any actor's), then
     * parks in wait.  The wait hook must then make the rings' producers
     * wake it before it blocks (their own Dekker handshake). */
    int32_t (*spin_poll)(struct cr_actor *self, void *state);
    /* Optional: add subsystem counters to a stats reply. */
    void (*stats)(struct cr_actor *self, void *state, struct cr_actor_stats *out);
    /* Optional, for handlers whose lookups miss the cache: start loads early.
     * With it, the runtime takes up to CR_PREFETCH_AHEAD messages from a ring
     * at a time and calls prefetch(state, msg, false) on each before handling
     * the first, then prefetch(state, next, true) before handling each one
     * (so a two-step lookup can load its second step a message ahead).  It
     * runs on the actor's thread and must change nothing; an ask's body may
     * be gone (its caller timed out), so it must not read one. */
    void (*prefetch)(void *state, const struct cr_msg *msg, bool deep);
    /* Optional: after every loop round in which the actor handled a message
     * or a timer, before its sends of the round wake their receivers.  An
     * actor that gathers outgoing work while it handles messages (a chain of
     * replies, say) sends it here, so nothing it gathered outlives the round:
     * under load a round is a batch, and an idle actor's last round ends
     * with it.  Not called after the stop hook. */
    void (*round_end)(struct cr_actor *self, void *state);
    /* Optional, with `wait`, for an actor whose sockets carry most of its
     * work (the segments actor serving the RPC edges, rpc/edge.h): handle
     * whatever input is ready without blocking and return how much work that
     * was (0: none).  The runtime then calls poll once per loop round, after
     * the mailbox and the timers and before round_end (which also runs for a
     * round whose only work came from poll), instead of wait(0) every 64 busy
     * rounds; its sends wake their receivers at the end of the round, as a
     * handler's do.  `wait` becomes the blocking half only: it may keep what
     * it found for the next poll.  Not called once the actor is stopping, so
     * a client that keeps sending cannot hold a stop off. */
    uint32_t (*poll)(struct cr_actor *self, void *state);
    /* Optional: names of further stats views of this actor, NULL-terminated
     * (static).  A stats ask with view k > 0 (cr_msg_stats.view) is answered
     * with the k-th name and only the stats hook's counters (no runtime
     * counters): for state that used to be an actor of its own and is now
     * served on this actor's thread (the native RPC endpoint on segments), so
     * its metric families, crescent_<view>_*, keep their names.  The hook
     * sees which in out->view. */
    const char *const *stats_views;
    /* Optional: park with a full fence instead of membarrier(2), and have
     * its senders fence too (cr_barrier_full on both sides; a constant of
     * the actor, so the two sides always agree).  For an actor that parks
     * after nearly every wake while other threads check it rarely: segments
     * with its RPC edges (docs/architecture.md "The RPC edge": a membarrier
     * interrupts every CPU that runs a crescentd thread at that moment,
     * which at one synchronous client is libzmq's I/O thread sending the
     * reply just written, once per call), and the event plane's consumers,
     * woken a few messages at a time (its IPIs were a third of the
     * publisher's CPU at one put client). */
    bool park_fence;
};

/* Messages taken from a ring at once for an actor with a prefetch hook. */
#define CR_PREFETCH_AHEAD 8u

/* One latency histogram of an actor, as the stats hook copies it out:
 * family `crescent_<actor>_<name>` with one label. */
struct cr_actor_histogram {
    const char *name;        /* static, Prometheus-safe, e.g. "request_duration_seconds" */
    const char *help;        /* static */
    const char *label;       /* static label name, e.g. "method" */
    const char *label_value; /* static */
    struct cr_histogram h;
};

/* Counters of one actor.  Runtime fields are filled by the runtime; `extra`
 * carries subsystem counters as (name, value) pairs. */
#define CR_ACTOR_STATS_EXTRA_MAX 96u /* segments has about 75 (the tiers' among them) */
struct cr_actor_stats {
    char name[CR_ACTOR_NAME_MAX];
    uint32_t view;             /* which: 0 the actor, k its k-th stats view (cr_msg_stats) */
    int cpu;                   /* pinned CPU, -1 when not pinned */
    uint64_t messages_handled;
    uint64_t ring_depth;       /* messages queued when the snapshot was taken */
    uint64_t rings;            /* sender rings registered */
    uint64_t parks;            /* times the actor went to sleep */
    uint64_t spins;            /* idle periods it spun in before parking (or finding work) */
    uint64_t spins_busy;       /* idle periods the policy would have spun in, but no core was free */
    uint64_t wakes;            /* wake-ups sent to it by senders */
    uint64_t ring_full;        /* sends that found its ring full */
    uint64_t send_failures;    /* sends that gave up (CR_ERR_AGAIN) */
    uint64_t asks_expired;     /* asks whose caller had timed out */
    uint64_t timers_fired;
    uint32_t extra_count;
    struct {
        const char *name;      /* static string, Prometheus-safe */
        uint64_t value;
    } extra[CR_ACTOR_STATS_EXTRA_MAX];
    /* Histograms: the asker points `histograms` at room for `histograms_max`
     * (NULL: none wanted, the common case) and the stats hook copies at most
     * that many in, setting histogram_count.  The runtime keeps both fields. */
    struct cr_actor_histogram *histograms;
    uint32_t histograms_max;
    uint32_t histogram_count;
};

/* Body of CR_MSG_STATS (an ask). */
struct cr_msg_stats {
    struct cr_actor_stats *out;
    uint32_t view; /* 0: the actor; k: its k-th stats view (stats_views) */
};

/* Creates a runtime (no threads yet). Returns CR_OK, CR_ERR_INVALID_PARAMS
 * (ring_slots not a power of two ≥ 2, zero batch or timers) or CR_ERR_NOMEM. */
int cr_runtime_create(const struct cr_runtime_config *config, struct cr_runtime **out);

/* Registers an actor and starts its thread.  `state` stays owned by the
 * caller until cr_runtime_destroy.  Returns CR_OK, CR_ERR_INVALID_PARAMS
 * (bad name, no handler, CR_ACTORS_MAX reached), CR_ERR_NOMEM or CR_ERR_IO
 * (thread creation failed; logged), or the start hook's error. */
int cr_runtime_spawn(struct cr_runtime *rt, const char *name, const struct cr_actor_ops *ops,
                     void *state, struct cr_actor **out);

/* Stops every actor in spawn order: each refuses new sends (CR_ERR_SHUTDOWN),
 * drains what is queued, runs its stop hook and exits, and is joined before
 * the next is told to stop, so actors spawned first (producers) finish before
 * later ones (consumers).  Stop is a flag plus a wake, so it works even when
 * an actor's inbox is full.  Idempotent. */
void cr_runtime_stop(struct cr_runtime *rt);

/* Stops (if needed) and frees the runtime, its actors and their rings. */
void cr_runtime_destroy(struct cr_runtime *rt);

/* Sends a copy of *msg to `to`.  Returns CR_OK, CR_ERR_AGAIN (ring full for
 * longer than send_wait_ns), CR_ERR_SHUTDOWN (actor stopped) or
 * CR_ERR_NOMEM (the actor has CR_ACTOR_SENDERS_MAX live sender rings).
 * On error the caller still owns the message's payload. */
int cr_send(struct cr_actor *to, const struct cr_msg *msg);

/* cr_send that never waits: a full ring answers CR_ERR_AGAIN at once
 * (counted in the receiver's send_failures), for a sender that has a
 * better answer than a stall (segments refusing a call "busy" rather than
 * holding every RPC for up to send_wait_ns). */
int cr_send_try(struct cr_actor *to, const struct cr_msg *msg);

/* cr_send for a stream whose receiver need not wake per round: store
 * events, which a parked publisher would otherwise be woken for (an eventfd
 * write on the sender, a park with membarrier on the receiver) a few
 * messages at a time.  From an actor, the receiver is woken lazy_wake_ns
 * after the oldest lazy send not woken for yet, or after lazy_wake_batch
 * lazy sends to it, or when the sender asks or exits, whichever comes first;
 * a receiver that is awake takes them as usual.  The deadline holds while
 * the sender is idle too: a sender parks no longer than its oldest lazy
 * send's deadline (on CLOCK_MONOTONIC, not the injected clock) and wakes the
 * receivers then, unless work woke it first; so a receiver fed one message
 * per call at light load wakes once per lazy_wake_ns, not once per call.
 * From any other thread, or inside a wait hook, it is cr_send.  Returns as
 * cr_send. */
int cr_send_lazy(struct cr_actor *to, const struct cr_msg *msg);

/* Sends an ask and blocks (spin briefly, then futex) until the actor replies
 * or `timeout_ns` passes (UINT64_MAX: no limit).  It sets msg's flags, ask
 * and ask_seq: do not reuse *msg for cr_send afterwards.  Body pointers may point into the caller's stack:
 * once the actor starts handling the ask, the caller waits for the reply even
 * past the timeout, so that memory stays valid.  Returns the status given to
 * cr_reply, or CR_ERR_TIMEOUT (never picked up in time), CR_ERR_AGAIN,
 * CR_ERR_SHUTDOWN. */
int cr_ask(struct cr_actor *to, struct cr_msg *msg, uint64_t timeout_ns);

/* Answers the ask `msg` with `status`.  Call once, on the actor's thread,
 * inside handle(); a second call is a bug, logged and ignored. */
void cr_reply(struct cr_msg *msg, int status);

/* Timers: deliver *msg to self after delay_ns.  Returns CR_OK and the id, or
 * CR_ERR_NOMEM when timers_max are pending. */
int cr_actor_timer_after(struct cr_actor *self, uint64_t delay_ns, const struct cr_msg *msg,
                         uint64_t *id_out);
bool cr_actor_timer_cancel(struct cr_actor *self, uint64_t id);

/* Releases the calling thread's sender rings and ask slot now rather than at
 * thread exit (the main thread calls it before exit so nothing is left for
 * leak checkers).  The thread may send again afterwards, on new rings:
 * messages sent after the release are not ordered after those sent before. */
void cr_runtime_thread_release(void);

/* The runtime's clock, as the actors see it. */
uint64_t cr_runtime_now_ns(const struct cr_runtime *rt);

/* The runtime's clock read once per loop round of the calling actor (its
 * drain of the mailbox and its timers): for handlers that need a timestamp
 * per message, where a clock read per message cost a sixth of a store
 * lookup.  A round is bounded (batch_max messages per ring), so the value is
 * at most that round's work old; timers and cr_runtime_clock_changed (a
 * moved manual clock) read it afresh.  Only on self's own thread. */
uint64_t cr_actor_now_ns(struct cr_actor *self);

/* For a wait hook that watched the wake fd itself (in its own epoll set)
 * and saw it not ready: the runtime then skips its read of the wake fd
 * after the wait, a read(2) per park that would find nothing.  A wake that
 * lands after the hook looked is kept in the fd and ends the next wait at
 * once.  Only from self's wait hook. */
void cr_actor_wait_saw_no_wake(struct cr_actor *self);

/* Wakes every actor so it re-reads the clock (tests that move a manual clock). */
void cr_runtime_clock_changed(struct cr_runtime *rt);

/* A wait hook's timeout_ns in whole milliseconds for poll-like calls,
 * rounded up (never early); -1 stays -1 (forever), and it is capped at a
 * minute (the caller loops). */
static inline int cr_timeout_ms(int64_t timeout_ns) {
    if (timeout_ns < 0) return -1;
    int64_t ms = (timeout_ns + 999999) / 1000000;
    return ms > 60000 ? 60000 : (int)ms;
}

/* Accessors. */
const char *cr_actor_name(const struct cr_actor *actor);
/* The name of the actor's stats view `view` (1-based), NULL past the last. */
const char *cr_actor_stats_view(const struct cr_actor *actor, uint32_t view);
uint16_t cr_actor_id(const struct cr_actor *actor);
struct cr_runtime *cr_actor_runtime(const struct cr_actor *actor);
uint32_t cr_runtime_actor_count(const struct cr_runtime *rt);
struct cr_actor *cr_runtime_actor(const struct cr_runtime *rt, uint32_t index);
struct cr_actor *cr_runtime_find(const struct cr_runtime *rt, const char *name);

#endif
