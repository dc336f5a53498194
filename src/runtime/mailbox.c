/* Mailboxes: the SPSC rings between sending threads and actors.
 *
 * Each thread keeps a small cache (thread-local) of the rings it has made,
 * keyed by the receiving actor's uid; the receiving actor keeps the same
 * rings in its inbox slots.  A ring is made on a thread's first send to an
 * actor, so the hot path is: find the ring in the cache, copy the message in,
 * fence, and look at the receiver's `parked` flag. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/runtime_internal.h"
#include "core/log.h"
#include "crescent/error.h"

/* Rings one thread can hold at once; stale ones (their actor is gone) are
 * dropped to make room. */
#define SENDER_RINGS_MAX 64u

struct sender_cache {
    uint32_t count;
    uint32_t last; /* index of the last ring used: most sends repeat it */
    struct {
        uint64_t uid;
        struct cr_ring *ring;
    } entries[SENDER_RINGS_MAX];
    struct cr_ask_slot *ask_slot;
};

static __thread struct sender_cache *tls_cache;
static pthread_key_t cache_key;
static pthread_once_t cache_key_once = PTHREAD_ONCE_INIT;

static void ring_unref(struct cr_ring *ring) {
    if (atomic_fetch_sub_explicit(&ring->refs, 1, memory_order_acq_rel) != 1) return;
    free(ring->buffer);
    free(ring);
}

/* Thread exit (or cr_runtime_thread_release): hand every ring over to its
 * receiver, which frees it once drained. */
static void cache_release(void *arg) {
    struct sender_cache *cache = arg;
    if (cache == NULL) return;
    for (uint32_t i = 0; i < cache->count; i++) {
        /* Release: our last enqueue happens-before the receiver sees gone. */
        atomic_store_explicit(&cache->entries[i].ring->sender_gone, true, memory_order_release);
        ring_unref(cache->entries[i].ring);
    }
    if (cache->ask_slot != NULL) cr_ask_slot_release(cache->ask_slot);
    free(cache);
    if (tls_cache == cache) tls_cache = NULL;
}

static void cache_key_create(void) {
    int rc = pthread_key_create(&cache_key, cache_release);
    assert(rc == 0);
    (void)rc;
}

static struct sender_cache *cache_get(void) {
    if (tls_cache != NULL) return tls_cache;
    pthread_once(&cache_key_once, cache_key_create);
    /* One allocation per thread for its lifetime, not per message. */
    struct sender_cache *cache = calloc(1, sizeof(*cache));
    if (cache == NULL) return NULL;
    if (pthread_setspecific(cache_key, cache) != 0) {
        free(cache);
        return NULL;
    }
    tls_cache = cache;
    return cache;
}

void cr_runtime_thread_release(void) {
    struct sender_cache *cache = tls_cache;
    if (cache == NULL) return;
    pthread_setspecific(cache_key, NULL);
    cache_release(cache);
}

struct cr_ask_slot *cr_mailbox_thread_ask_slot(void);
struct cr_ask_slot *cr_mailbox_thread_ask_slot(void) {
    struct sender_cache *cache = cache_get();
    if (cache == NULL) return NULL;
    if (cache->ask_slot == NULL) cache->ask_slot = cr_ask_slot_acquire();
    return cache->ask_slot;
}

/* Drops cached rings whose actor was destroyed. */
static void cache_compact(struct sender_cache *cache) {
    uint32_t kept = 0;
    for (uint32_t i = 0; i < cache->count; i++) {
        if (atomic_load_explicit(&cache->entries[i].ring->receiver_gone, memory_order_acquire)) {
            ring_unref(cache->entries[i].ring);
        } else {
            cache->entries[kept++] = cache->entries[i];
        }
    }
    cache->count = kept;
    cache->last = 0;
}

static struct cr_ring *ring_create(struct cr_actor *to) {
    uint32_t slots = to->rt->config.ring_slots;
    struct cr_ring *ring = cr_cache_aligned_alloc(sizeof(*ring));
    if (ring == NULL) return NULL;
    memset(ring, 0, sizeof(*ring));
    ring->buffer = cr_cache_aligned_alloc((size_t)slots * sizeof(struct cr_msg));
    if (ring->buffer == NULL) {
        free(ring);
        return NULL;
    }
    /* Touched whole here, once: otherwise its pages become resident one by
     * one as the ring first wraps, which for a quiet sender (an HTTP worker's
     * ring to the indexer) takes hours, and showed in the 1-hour soak as a
     * slow RSS climb (bench/RESULTS.md).  A ring is made on a sender's first
     * message to an actor, not per message. */
    memset(ring->buffer, 0, (size_t)slots * sizeof(struct cr_msg));
    ck_ring_init(&ring->ring, slots);
    atomic_init(&ring->refs, 2);
    ring->receiver_uid = to->uid;
    return ring;
}

/* Publishes `ring` in a free inbox slot of `to`.  Only senders fill slots
 * (CAS from NULL) and only the receiver empties them. */
static bool inbox_register(struct cr_actor *to, struct cr_ring *ring) {
    for (uint32_t i = 0; i < CR_ACTOR_SENDERS_MAX; i++) {
        struct cr_ring *expected = NULL;
        if (!atomic_compare_exchange_strong_explicit(&to->slots[i], &expected, ring,
                                                     memory_order_release, memory_order_relaxed))
            continue;
        uint32_t high = atomic_load_explicit(&to->slots_high, memory_order_relaxed);
        while (high < i + 1 &&
               !atomic_compare_exchange_weak_explicit(&to->slots_high, &high, i + 1,
                                                      memory_order_release, memory_order_relaxed)) {
        }
        return true;
    }
    return false;
}

struct cr_ring *cr_mailbox_sender_ring(struct cr_actor *to) {
    struct sender_cache *cache = cache_get();
    if (cache == NULL) return NULL;
    if (cache->count > 0 && cache->entries[cache->last].uid == to->uid)
        return cache->entries[cache->last].ring;
    for (uint32_t i = 0; i < cache->count; i++) {
        if (cache->entries[i].uid == to->uid) {
            cache->last = i;
            return cache->entries[i].ring;
        }
    }
    if (cache->count == SENDER_RINGS_MAX) cache_compact(cache);
    if (cache->count == SENDER_RINGS_MAX) return NULL;

    struct cr_ring *ring = ring_create(to);
    if (ring == NULL) return NULL;
    if (!inbox_register(to, ring)) {
        free(ring->buffer);
        free(ring);
        CR_WARN("runtime", "actor %s has %u sender rings: no room for another thread", to->name,
                CR_ACTOR_SENDERS_MAX);
        return NULL;
    }
    cache->entries[cache->count].uid = to->uid;
    cache->entries[cache->count].ring = ring;
    cache->last = cache->count++;
    return ring;
}

/* Frees a ring whose sender has exited, once it is empty.  The order of the
 * two loads matters: gone first (acquire), then emptiness, so no message the
 * sender enqueued before leaving can be missed. */
static void maybe_retire(struct cr_actor *actor, uint32_t index, struct cr_ring *ring) {
    if (!atomic_load_explicit(&ring->sender_gone, memory_order_acquire)) return;
    if (cr_ring_size(ring) != 0) return;
    atomic_store_explicit(&actor->slots[index], NULL, memory_order_release);
    ring_unref(ring);
}

/* Frees the rings of senders that have exited, so their inbox slots are
 * free for new threads even if this actor has been idle since. */
void cr_mailbox_retire_idle(struct cr_actor *actor) {
    uint32_t high = atomic_load_explicit(&actor->slots_high, memory_order_acquire);
    for (uint32_t i = 0; i < high; i++) {
        struct cr_ring *ring = atomic_load_explicit(&actor->slots[i], memory_order_acquire);
        if (ring != NULL) maybe_retire(actor, i, ring);
    }
}

typedef void (*dispatch_fn)(struct cr_actor *, struct cr_msg *);

static uint32_t drain_one_by_one(struct cr_actor *actor, struct cr_ring *ring,
                                 uint32_t batch_max, dispatch_fn dispatch) {
    uint32_t taken = 0;
    struct cr_msg msg;
    while (taken < batch_max && cr_ring_dequeue(ring, &msg)) {
        dispatch(actor, &msg);
        taken++;
    }
    return taken;
}

/* For an actor with a prefetch hook: takes up to CR_PREFETCH_AHEAD messages,
 * prefetches for all of them, then handles them in order, each after the
 * deep prefetch of the one behind it.  Same order and batch bound as
 * drain_one_by_one; the ring's slots are only freed a little earlier. */
static uint32_t drain_ahead(struct cr_actor *actor, struct cr_ring *ring, uint32_t batch_max,
                            dispatch_fn dispatch) {
    const struct cr_actor_ops *ops = actor->ops;
    uint32_t taken = 0;
    while (taken < batch_max) {
        struct cr_msg msgs[CR_PREFETCH_AHEAD];
        uint32_t n = 0;
        while (n < CR_PREFETCH_AHEAD && taken + n < batch_max && cr_ring_dequeue(ring, &msgs[n]))
            n++;
        for (uint32_t i = 0; i < n; i++) ops->prefetch(actor->state, &msgs[i], false);
        for (uint32_t i = 0; i < n; i++) {
            if (i + 1 < n) ops->prefetch(actor->state, &msgs[i + 1], true);
            dispatch(actor, &msgs[i]);
        }
        if (n == 0) break; /* the ring is empty */
        taken += n;
    }
    return taken;
}

uint32_t cr_mailbox_drain(struct cr_actor *actor, dispatch_fn dispatch) {
    uint32_t high = atomic_load_explicit(&actor->slots_high, memory_order_acquire);
    uint32_t batch_max = actor->rt->config.batch_max;
    uint32_t total = 0;
    for (uint32_t k = 0; k < high; k++) {
        /* Start at a rotating ring so no sender is always served first. */
        uint32_t index = (actor->cursor + k) % high;
        struct cr_ring *ring = atomic_load_explicit(&actor->slots[index], memory_order_acquire);
        if (ring == NULL) continue;
        uint32_t taken = actor->ops->prefetch != NULL
                             ? drain_ahead(actor, ring, batch_max, dispatch)
                             : drain_one_by_one(actor, ring, batch_max, dispatch);
        if (taken == 0) maybe_retire(actor, index, ring);
        total += taken;
    }
    actor->cursor++;
    return total;
}

bool cr_mailbox_has_messages(struct cr_actor *actor) {
    uint32_t high = atomic_load_explicit(&actor->slots_high, memory_order_acquire);
    for (uint32_t i = 0; i < high; i++) {
        struct cr_ring *ring = atomic_load_explicit(&actor->slots[i], memory_order_acquire);
        if (ring != NULL && cr_ring_size(ring) != 0) return true;
    }
    return false;
}

uint64_t cr_mailbox_depth(struct cr_actor *actor, uint64_t *rings_out) {
    uint32_t high = atomic_load_explicit(&actor->slots_high, memory_order_acquire);
    uint64_t depth = 0, rings = 0;
    for (uint32_t i = 0; i < high; i++) {
        struct cr_ring *ring = atomic_load_explicit(&actor->slots[i], memory_order_acquire);
        if (ring == NULL) continue;
        depth += cr_ring_size(ring);
        rings++;
    }
    if (rings_out != NULL) *rings_out = rings;
    return depth;
}

/* The actor is being destroyed: discard what is still queued and let the
 * senders know (they drop their reference on their next send or exit). */
void cr_mailbox_close(struct cr_actor *actor) {
    for (uint32_t i = 0; i < CR_ACTOR_SENDERS_MAX; i++) {
        struct cr_ring *ring = atomic_load_explicit(&actor->slots[i], memory_order_acquire);
        if (ring == NULL) continue;
        struct cr_msg msg;
        while (cr_ring_dequeue(ring, &msg)) {
            /* An ask still queued belongs to a caller that will time out. */
            if (!(msg.flags & CR_MSG_ASK) && actor->ops->discard != NULL)
                actor->ops->discard(actor->state, &msg);
        }
        atomic_store_explicit(&ring->receiver_gone, true, memory_order_release);
        atomic_store_explicit(&actor->slots[i], NULL, memory_order_relaxed);
        ring_unref(ring);
    }
}

/* Called by a sender after publishing a message: the light side of the
 * parking handshake (see cr_barrier_light); park() is the heavy side.  An
 * actor that parks with a fence (ops.park_fence) needs one here too. */
void cr_mailbox_wake(struct cr_actor *actor) {
    if (actor->park_fence)
        cr_barrier_full(&actor->parked); /* it parks with a fence, not a membarrier */
    else
        cr_barrier_light(&actor->parked);
    if (atomic_load_explicit(&actor->parked, memory_order_relaxed) == 0) return;
    if (atomic_exchange_explicit(&actor->parked, 0, memory_order_acq_rel) == 0) return;
    atomic_fetch_add_explicit(&actor->wakes, 1, memory_order_relaxed);
    uint64_t one = 1;
    ssize_t n = write(actor->wake_fd, &one, sizeof(one));
    if (n != (ssize_t)sizeof(one) && errno != EAGAIN)
        CR_ERROR("runtime", "write(eventfd) to wake %s failed: %s", actor->name, strerror(errno));
}
