/* A bounded binary min-heap of timers, keyed by deadline.
 *
 * Each actor owns one: timers fire as messages to the actor itself, so a
 * timer is a deadline, an id (to cancel it) and the message to deliver.
 * Cancel searches the heap (O(n)): heaps are small and bounded (an actor keeps
 * a handful of periodic timers), so back-pointers would cost more than they save. */
#ifndef CRESCENT_CORE_TIMER_HEAP_H
#define CRESCENT_CORE_TIMER_HEAP_H

#include <stdbool.h>
#include <stdint.h>

#include "msgs/msg.h"

struct cr_timer {
    uint64_t deadline_ns;
    uint64_t id;
    struct cr_msg msg;
};

struct cr_timer_heap {
    struct cr_timer *timers;
    uint32_t count;
    uint32_t capacity;
    uint64_t next_id;
};

/* Returns CR_OK, CR_ERR_INVALID_PARAMS (capacity 0) or CR_ERR_NOMEM. */
int cr_timer_heap_init(struct cr_timer_heap *heap, uint32_t capacity);
void cr_timer_heap_destroy(struct cr_timer_heap *heap);

/* Adds a timer; *id_out gets its id (never 0).  CR_ERR_NOMEM when full. */
int cr_timer_heap_add(struct cr_timer_heap *heap, uint64_t deadline_ns,
                      const struct cr_msg *msg, uint64_t *id_out);

/* Cancels a pending timer. Returns true if it was pending. */
bool cr_timer_heap_cancel(struct cr_timer_heap *heap, uint64_t id);

/* Pops the earliest timer due at `now_ns` whose id is below `id_limit` into
 * *out.  Returns false if there is none.  Timers with equal deadlines pop in
 * id order, so a timer added after `id_limit` was read (id ≥ id_limit) that
 * is due now sorts after every older due timer: stopping at it is exact. */
bool cr_timer_heap_pop_due(struct cr_timer_heap *heap, uint64_t now_ns, uint64_t id_limit,
                           struct cr_timer *out);

/* Deadline of the earliest live timer, or UINT64_MAX when there is none. */
uint64_t cr_timer_heap_next_deadline(struct cr_timer_heap *heap);

#endif
