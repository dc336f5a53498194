/* Private structures shared by the runtime's files (runtime.c, mailbox.c,
 * ask.c).  Nothing outside src/actors includes this. */
#ifndef CRESCENT_ACTORS_RUNTIME_INTERNAL_H
#define CRESCENT_ACTORS_RUNTIME_INTERNAL_H

#include <ck_ring.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "runtime/runtime.h"
#include "core/spin_policy.h"
#include "core/timer_heap.h"

CK_RING_PROTOTYPE(cr_msg, cr_msg)

#define CR_CACHE_LINE 64

/* One SPSC channel from one thread to one actor.  Two references: the
 * sending thread's cache and the receiving actor's inbox; the last to let go
 * frees it.  ck_ring keeps the consumer's and producer's indexes on separate
 * cache lines. */
struct cr_ring {
    ck_ring_t ring;
    struct cr_msg *buffer;
    _Atomic uint32_t refs;
    /* Set by the sender's thread exit (release), after its last enqueue: the
     * receiver frees the ring once it has seen this and found it empty. */
    _Atomic bool sender_gone;
    /* Set when the actor is destroyed: the sender drops its reference. */
    _Atomic bool receiver_gone;
    uint64_t receiver_uid;
};

enum cr_actor_run_state { CR_ACTOR_STARTING, CR_ACTOR_RUNNING, CR_ACTOR_STOPPING, CR_ACTOR_STOPPED };

struct cr_actor {
    /* Read by senders on every send: kept apart from the receiver's own lines. */
    _Alignas(CR_CACHE_LINE) _Atomic uint32_t parked;
    _Atomic int run_state;
    /* Set by cr_runtime_stop (release) together with an eventfd write: stop
     * travels outside the rings so it cannot be refused by a full inbox. */
    _Atomic bool stop_flag;
    int wake_fd;
    uint64_t uid;
    bool park_fence; /* ops->park_fence, where senders read it */

    _Alignas(CR_CACHE_LINE) _Atomic(struct cr_ring *) slots[CR_ACTOR_SENDERS_MAX];
    _Atomic uint32_t slots_high; /* slots[0, slots_high) may be in use */

    /* Owned by the actor's thread. */
    _Alignas(CR_CACHE_LINE) struct cr_runtime *rt;
    uint16_t id;
    int cpu;
    char name[CR_ACTOR_NAME_MAX];
    const struct cr_actor_ops *ops;
    void *state;
    pthread_t thread;
    bool thread_started;
    bool stop_requested;
    bool wake_quiet; /* cr_actor_wait_saw_no_wake during this wait */
    uint32_t cursor;
    /* Actors (bit = id) this one sent to since its last flush and has not
     * woken yet: an actor's sends wake their receivers once per loop round,
     * after its drain, not once per message (see cr_runtime_flush_wakes). */
    uint32_t wake_pending;
    struct cr_actor *wake_target[CR_ACTORS_MAX]; /* by id: the actors of wake_pending */
    uint32_t deferred_sends; /* since the last flush; a long handler flushes every batch_max */
    /* Lazy sends (cr_send_lazy) not woken for yet: their receivers are woken
     * when this actor is about to block, after lazy_wake_batch lazy sends to
     * one receiver, or lazy_wake_ns after the oldest, whichever is first. */
    uint32_t lazy_pending;
    uint64_t lazy_since_ns;                 /* monotonic time of the oldest */
    uint32_t lazy_count[CR_ACTORS_MAX];     /* by id: lazy sends not woken for */
    bool in_wait;            /* inside ops->wait, which may block: sends wake at once */
    uint64_t round_now_ns;   /* cr_actor_now_ns's reading this round; 0 = not read yet */
    uint32_t round_clock_epoch; /* rt->clock_epoch when round_now_ns was read */
    struct cr_timer_heap timers;
    struct cr_spin_policy spin; /* whether idle periods spin (config.spin_adaptive) */
    int start_status;
    pthread_mutex_t start_lock; /* start-up handshake only */
    pthread_cond_t start_cond;

    /* Counters: the owner writes with relaxed stores; senders add with fetch_add. */
    _Atomic uint64_t handled;
    _Atomic uint64_t parks;
    _Atomic uint64_t spins;
    _Atomic uint64_t spins_busy;
    _Atomic uint64_t timers_fired;
    _Atomic uint64_t asks_expired;
    _Alignas(CR_CACHE_LINE) _Atomic uint64_t wakes;
    _Atomic uint64_t ring_full;
    _Atomic uint64_t send_failures;
};

struct cr_runtime {
    struct cr_runtime_config config;
    struct cr_actor *actors[CR_ACTORS_MAX];
    uint32_t actor_count;
    int cpus[CPU_SETSIZE];
    uint32_t cpu_count;
    bool stopped;
    /* Threads now holding a CPU: actors that are not parked (running or
     * spinning) and askers spinning for a reply.  With more of them than
     * CPUs, a spinner burns a core that a thread with work needs, so an idle
     * actor spins only while active <= spin_limit (itself included) and an
     * asker only while active < spin_limit; otherwise they sleep at once.
     * A heuristic: a momentary miscount only parks a thread early. */
    atomic_uint active;
    uint32_t spin_limit; /* CPUs in the affinity mask */
    /* The machine's runnable threads (config.runnable_probe), read at most
     * once per CR_RUNNABLE_REFRESH_NS by whichever actor needs it first. */
    int loadavg_fd;          /* /proc/loadavg for the default probe, or -1 */
    uint32_t online_cpus;
    _Atomic uint64_t runnable_read_ns;
    _Atomic uint32_t runnable;
    /* Bumped by cr_runtime_clock_changed: cached round times are stale. */
    _Atomic uint32_t clock_epoch;
};

/* An asker takes a CPU to spin on; false when every CPU is taken. */
static inline bool cr_spin_enter(struct cr_runtime *rt) {
    if (atomic_fetch_add_explicit(&rt->active, 1, memory_order_relaxed) < rt->spin_limit)
        return true;
    atomic_fetch_sub_explicit(&rt->active, 1, memory_order_relaxed);
    return false;
}

static inline void cr_spin_leave(struct cr_runtime *rt) {
    atomic_fetch_sub_explicit(&rt->active, 1, memory_order_relaxed);
}

/* Counter bump for a field only its owner thread writes: no locked instruction. */
static inline void cr_counter_bump(_Atomic uint64_t *counter, uint64_t by) {
    atomic_store_explicit(counter, atomic_load_explicit(counter, memory_order_relaxed) + by,
                          memory_order_relaxed);
}

/* Ring operations.  Under TSan, ck's loads and stores (volatile accesses
 * between compiler barriers and fences) look like plain races, because TSan
 * models only C11/__atomic operations.  So in TSan builds the ck calls run in
 * an ignore region and the ring is annotated as what it is: each enqueue
 * releases, each dequeue acquires.  This over-approximates happens-before a
 * little (a dequeue synchronises with every enqueue so far, not only with the
 * one it took) and keeps real races on message payloads visible. */
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
void AnnotateIgnoreReadsBegin(const char *file, int line);
void AnnotateIgnoreReadsEnd(const char *file, int line);
void AnnotateIgnoreWritesBegin(const char *file, int line);
void AnnotateIgnoreWritesEnd(const char *file, int line);
#define CR_TSAN_IGNORE_BEGIN()                        \
    do {                                              \
        AnnotateIgnoreReadsBegin(__FILE__, __LINE__);  \
        AnnotateIgnoreWritesBegin(__FILE__, __LINE__); \
    } while (0)
#define CR_TSAN_IGNORE_END()                        \
    do {                                            \
        AnnotateIgnoreWritesEnd(__FILE__, __LINE__); \
        AnnotateIgnoreReadsEnd(__FILE__, __LINE__);  \
    } while (0)
#define CR_TSAN_RELEASE(addr) __tsan_release(addr)
#define CR_TSAN_ACQUIRE(addr) __tsan_acquire(addr)
#else
#define CR_TSAN_IGNORE_BEGIN() ((void)0)
#define CR_TSAN_IGNORE_END() ((void)0)
#define CR_TSAN_RELEASE(addr) ((void)(addr))
#define CR_TSAN_ACQUIRE(addr) ((void)(addr))
#endif

static inline bool cr_ring_enqueue(struct cr_ring *ring, struct cr_msg *msg) {
    CR_TSAN_RELEASE(ring);
    CR_TSAN_IGNORE_BEGIN();
    bool ok = ck_ring_enqueue_spsc_cr_msg(&ring->ring, ring->buffer, msg);
    CR_TSAN_IGNORE_END();
    return ok;
}

static inline bool cr_ring_dequeue(struct cr_ring *ring, struct cr_msg *msg) {
    CR_TSAN_IGNORE_BEGIN();
    bool ok = ck_ring_dequeue_spsc_cr_msg(&ring->ring, ring->buffer, msg);
    CR_TSAN_IGNORE_END();
    if (ok) CR_TSAN_ACQUIRE(ring);
    return ok;
}

static inline unsigned int cr_ring_size(struct cr_ring *ring) {
    CR_TSAN_IGNORE_BEGIN();
    unsigned int size = ck_ring_size(&ring->ring);
    CR_TSAN_IGNORE_END();
    return size;
}

/* aligned_alloc wants the size to be a multiple of the alignment (C11). */
static inline void *cr_cache_aligned_alloc(size_t size) {
    return aligned_alloc(CR_CACHE_LINE, (size + CR_CACHE_LINE - 1) & ~(size_t)(CR_CACHE_LINE - 1));
}

/* The parking handshake needs a store→load barrier on
 * both sides.  The two sides are not equally hot: a sender checks `parked`
 * on every message, an actor parks only after it has been idle.  So the
 * barrier is asymmetric (as in liburcu and folly): the hot side issues only
 * a compiler barrier, and the cold side issues membarrier(2)
 * PRIVATE_EXPEDITED, which runs a full barrier on every CPU currently
 * running a thread of this process.  Either a sender's store happened
 * before that barrier (and the parking actor sees it) or its later load of
 * `parked` comes after it (and sees parked = 1).  Measured on 2 cores: the
 * per-send mfence waited for the ring index's cache line every message and
 * capped one-way throughput near 9 M msgs/s.
 *
 * Where membarrier is unavailable both sides use a full fence.  Under TSan
 * (which models neither fences nor membarrier) both use a seq_cst RMW of the
 * flag, which it does model. */
void cr_barrier_init(void);
extern bool cr_barrier_asymmetric;
void cr_barrier_heavy_membarrier(void);

static inline void cr_barrier_light(_Atomic uint32_t *flag) {
#if defined(__SANITIZE_THREAD__)
    atomic_fetch_add_explicit(flag, 0, memory_order_seq_cst);
#else
    (void)flag;
    if (__builtin_expect(cr_barrier_asymmetric, 1))
        atomic_signal_fence(memory_order_seq_cst); /* compiler-only */
    else
        atomic_thread_fence(memory_order_seq_cst);
#endif
}

/* A symmetric store→load barrier, for handshakes where neither side is hot
 * enough to justify making the other pay a membarrier (ask replies: one
 * fence per ask is small next to the ask itself, while a membarrier on every
 * sleeping asker measured +15 us at p50). */
static inline void cr_barrier_full(_Atomic uint32_t *flag) {
#if defined(__SANITIZE_THREAD__)
    atomic_fetch_add_explicit(flag, 0, memory_order_seq_cst);
#else
    (void)flag;
    atomic_thread_fence(memory_order_seq_cst);
#endif
}

static inline void cr_barrier_heavy(_Atomic uint32_t *flag) {
#if defined(__SANITIZE_THREAD__)
    atomic_fetch_add_explicit(flag, 0, memory_order_seq_cst);
#else
    (void)flag;
    if (cr_barrier_asymmetric)
        cr_barrier_heavy_membarrier();
    else
        atomic_thread_fence(memory_order_seq_cst);
#endif
}

/* mailbox.c */
struct cr_ring *cr_mailbox_sender_ring(struct cr_actor *to);
uint32_t cr_mailbox_drain(struct cr_actor *actor, void (*dispatch)(struct cr_actor *, struct cr_msg *));
bool cr_mailbox_has_messages(struct cr_actor *actor);
uint64_t cr_mailbox_depth(struct cr_actor *actor, uint64_t *rings_out);
void cr_mailbox_retire_idle(struct cr_actor *actor);
void cr_mailbox_close(struct cr_actor *actor);
void cr_mailbox_wake(struct cr_actor *actor);

/* ask.c */
struct cr_ask_slot *cr_ask_slot_acquire(void);
void cr_ask_slot_release(struct cr_ask_slot *slot);
/* The actor takes the ask: false if the caller already gave up on it. */
bool cr_ask_claim(const struct cr_msg *msg);
/* True while a claimed ask has not been answered. */
bool cr_ask_pending(const struct cr_msg *msg);

/* Saturating a + b, for deadlines built from caller-given durations. */
static inline uint64_t cr_add_sat(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

/* The current thread's actor, or NULL for non-actor threads. */
struct cr_actor *cr_current_actor(void);

/* Wakes the receivers of the calling actor's deferred wakes (not its lazy
 * ones); a no-op off actor threads. */
void cr_runtime_flush_wakes(void);

/* The same, lazy wakes included: for an actor about to block (park, ask,
 * a blocking wait hook, exit), which must leave no receiver asleep. */
void cr_runtime_flush_all_wakes(void);

/* actor_loop.c: an actor thread's body, from its start hook to its stop
 * hook (pthread_create's start routine, called by cr_runtime_spawn). */
void *cr_actor_main(void *arg);

/* runtime.c: makes `actor` the calling thread's cr_current_actor(). */
void cr_runtime_set_current_actor(struct cr_actor *actor);

#endif
