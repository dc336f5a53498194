/* Ask: a blocking request from any thread to an actor, with a timeout.
 *
 * Each thread has one ask slot (it can wait for one reply at a time).  The
 * slot's 32-bit word holds (sequence << 2 | phase) and doubles as the futex:
 *
 *   WAITING  --actor claims-->   CLAIMED --actor replies--> DONE
 *   WAITING  --caller times out--> ABANDONED   (the actor skips the message)
 *
 * The caller can only abandon an ask nobody has claimed, so once the actor
 * starts on it, everything the message points to (often the caller's stack)
 * stays valid until DONE.  Sequence numbers stop a stale message (from an
 * abandoned ask) from claiming the slot's next ask.
 *
 * Slots are never freed while the process runs: a message naming a slot may
 * sit in a ring after its thread exited.  Freed slots go to a free list and
 * are reused by later threads, so their number is bounded by the peak number
 * of threads that asked at once. */
#include <errno.h>
#include <linux/futex.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "runtime/runtime_internal.h"
#include "core/log.h"
#include "crescent/error.h"

enum ask_phase { ASK_WAITING = 0, ASK_CLAIMED = 1, ASK_DONE = 2, ASK_ABANDONED = 3 };

#define ASK_WORD(seq, phase) (((seq) << 2) | (uint32_t)(phase))
#define ASK_PHASE(word) ((enum ask_phase)((word)&3u))
#define ASK_SEQ_MASK 0x3fffffffu

struct cr_ask_slot {
    _Atomic uint32_t word;
    /* Set by a caller about to sleep in futex_wait, so a replier makes the
     * wake syscall only when someone sleeps (Dekker pair with `word`, with a
     * full fence on both sides: see cr_barrier_full). */
    _Atomic uint32_t sleeping;
    int status;
    uint32_t seq;
    /* How long this thread spins before sleeping on its next ask (owner
     * only).  Adaptive, as glibc's adaptive mutexes: back to the full
     * spin_ns after a reply that came within it, halved (down to
     * ASK_SPIN_MIN_NS) after one that did not, so a thread whose asks queue
     * behind others' stops burning the core the actor needs. */
    uint64_t spin_ns;
    struct cr_ask_slot *next_free;
};

#define ASK_SPIN_MIN_NS 1000u

static pthread_mutex_t free_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cr_ask_slot *free_slots;

struct cr_ask_slot *cr_mailbox_thread_ask_slot(void);

struct cr_ask_slot *cr_ask_slot_acquire(void) {
    /* Taken once per thread, not per ask: the lock is off the hot path. */
    pthread_mutex_lock(&free_lock);
    struct cr_ask_slot *slot = free_slots;
    if (slot != NULL) free_slots = slot->next_free;
    pthread_mutex_unlock(&free_lock);
    if (slot == NULL) slot = calloc(1, sizeof(*slot));
    return slot;
}

void cr_ask_slot_release(struct cr_ask_slot *slot) {
    pthread_mutex_lock(&free_lock);
    slot->next_free = free_slots;
    free_slots = slot;
    pthread_mutex_unlock(&free_lock);
}

static long futex(_Atomic uint32_t *word, int op, uint32_t value, const struct timespec *timeout) {
    return syscall(SYS_futex, (uint32_t *)word, op, value, timeout, NULL, 0);
}

bool cr_ask_claim(const struct cr_msg *msg) {
    assert(msg->flags & CR_MSG_ASK);
    uint32_t expected = ASK_WORD(msg->ask_seq, ASK_WAITING);
    return atomic_compare_exchange_strong_explicit(&msg->ask->word, &expected,
                                                   ASK_WORD(msg->ask_seq, ASK_CLAIMED),
                                                   memory_order_acq_rel, memory_order_acquire);
}

bool cr_ask_pending(const struct cr_msg *msg) {
    uint32_t word = atomic_load_explicit(&msg->ask->word, memory_order_acquire);
    return word == ASK_WORD(msg->ask_seq, ASK_CLAIMED);
}

void cr_reply(struct cr_msg *msg, int status) {
    assert(msg->flags & CR_MSG_ASK);
    struct cr_ask_slot *slot = msg->ask;
    /* Only the claiming actor writes status while CLAIMED; a second reply
     * would race the caller's next ask, so it is refused (and is a bug). */
    if (atomic_load_explicit(&slot->word, memory_order_relaxed) !=
        ASK_WORD(msg->ask_seq, ASK_CLAIMED)) {
        assert(!"cr_reply called twice for one ask");
        CR_ERROR("runtime", "bug: second reply to an ask of type %u ignored", msg->type);
        return;
    }
    slot->status = status;
    /* Release: the status and whatever the handler wrote into the caller's
     * memory happen-before the caller sees DONE. */
    atomic_store_explicit(&slot->word, ASK_WORD(msg->ask_seq, ASK_DONE), memory_order_release);
    cr_barrier_full(&slot->word);
    if (atomic_load_explicit(&slot->sleeping, memory_order_relaxed))
        futex(&slot->word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL);
}

/* Sleeps until the word changes from `seen` or `deadline_ns` (0: none) passes. */
static void ask_sleep(struct cr_ask_slot *slot, uint32_t seen, uint64_t deadline_ns) {
    struct timespec timeout, *timeout_ptr = NULL;
    if (deadline_ns != 0) {
        uint64_t now = cr_monotonic_ns();
        if (now >= deadline_ns) return;
        uint64_t left = deadline_ns - now;
        timeout.tv_sec = (time_t)(left / 1000000000u);
        timeout.tv_nsec = (long)(left % 1000000000u);
        timeout_ptr = &timeout;
    }
    atomic_store_explicit(&slot->sleeping, 1, memory_order_relaxed);
    cr_barrier_full(&slot->sleeping);
    if (atomic_load_explicit(&slot->word, memory_order_acquire) == seen)
        futex(&slot->word, FUTEX_WAIT_PRIVATE, seen, timeout_ptr);
    atomic_store_explicit(&slot->sleeping, 0, memory_order_relaxed);
}

/* Waits for DONE; gives up (ABANDONED) at the deadline only if unclaimed. */
static int ask_wait_loop(struct cr_ask_slot *slot, uint32_t seq, uint64_t timeout_ns,
                         uint64_t spin_ns, struct cr_runtime *rt, bool *spinning) {
    uint64_t start = cr_monotonic_ns();
    uint64_t deadline = cr_add_sat(start, timeout_ns);
    for (;;) {
        uint32_t word = atomic_load_explicit(&slot->word, memory_order_acquire);
        if (word == ASK_WORD(seq, ASK_DONE)) return slot->status;
        uint64_t now = cr_monotonic_ns();
        if (ASK_PHASE(word) == ASK_WAITING && now >= deadline) {
            uint32_t expected = word;
            if (atomic_compare_exchange_strong_explicit(&slot->word, &expected,
                                                        ASK_WORD(seq, ASK_ABANDONED),
                                                        memory_order_acq_rel,
                                                        memory_order_acquire))
                return CR_ERR_TIMEOUT;
            continue; /* claimed meanwhile: wait for the reply */
        }
        if (*spinning && now - start < spin_ns) {
            __builtin_ia32_pause();
            continue;
        }
        if (*spinning) cr_spin_leave(rt), *spinning = false;
        ask_sleep(slot, word, ASK_PHASE(word) == ASK_WAITING ? deadline : 0);
    }
}

/* Spins first (for the slot's adaptive time) only while a CPU is free to
 * spin on (see cr_spin_enter). */
static int ask_wait(struct cr_ask_slot *slot, uint32_t seq, uint64_t timeout_ns,
                    struct cr_runtime *rt) {
    uint64_t full = rt->config.spin_ns, start = cr_monotonic_ns();
    if (slot->spin_ns == 0 || slot->spin_ns > full) slot->spin_ns = full; /* first ask */
    bool spinning = slot->spin_ns > 0 && cr_spin_enter(rt);
    int rc = ask_wait_loop(slot, seq, timeout_ns, slot->spin_ns, rt, &spinning);
    if (spinning) cr_spin_leave(rt);
    if (cr_monotonic_ns() - start <= full)
        slot->spin_ns = full;
    else if (slot->spin_ns / 2 >= ASK_SPIN_MIN_NS)
        slot->spin_ns /= 2;
    return rc;
}

int cr_ask(struct cr_actor *to, struct cr_msg *msg, uint64_t timeout_ns) {
    assert(to != NULL && msg != NULL);
    assert(cr_current_actor() != to); /* an actor asking itself would deadlock */
    cr_runtime_flush_all_wakes(); /* an actor about to block leaves no receiver asleep */
    struct cr_ask_slot *slot = cr_mailbox_thread_ask_slot();
    if (slot == NULL) return CR_ERR_NOMEM;
    slot->seq = (slot->seq + 1) & ASK_SEQ_MASK;
    atomic_store_explicit(&slot->word, ASK_WORD(slot->seq, ASK_WAITING), memory_order_relaxed);
    msg->flags |= CR_MSG_ASK;
    msg->ask = slot;
    msg->ask_seq = slot->seq;
    int rc = cr_send(to, msg);
    if (rc != CR_OK) return rc;
    return ask_wait(slot, slot->seq, timeout_ns, to->rt);
}
