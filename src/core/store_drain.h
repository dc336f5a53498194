/* What a drain job (Mooncake's /api/v1/drain_jobs, src/actors/segments_drain.c)
 * needs from the store core (store_drain.c): a segment that takes no new
 * allocations, the objects with a replica on it, and where each can go. */
#ifndef CRESCENT_CORE_STORE_DRAIN_H
#define CRESCENT_CORE_STORE_DRAIN_H

#include <stdbool.h>
#include <stdint.h>

#include "core/store.h"

/* Marks a mounted segment draining (or not): a draining segment stays
 * readable, but puts and task targets never allocate on it.  A mount
 * starts not draining.  Returns CR_OK or CR_ERR_SEGMENT_NOT_FOUND. */
int cr_store_segment_set_draining(cr_store *store, const char *name, bool on);

/* Whether `name` is mounted (return) and draining (*draining). */
bool cr_store_segment_draining(const cr_store *store, const char *name, bool *draining);

/* One object's state for a drain of one source segment. */
enum cr_store_drain_state {
    CR_DRAIN_DONE = 0,    /* gone, or no replica on the source any more */
    CR_DRAIN_BUSY = 1,    /* a copy/move task holds a reservation on it */
    CR_DRAIN_BLOCKED = 2, /* hard-pinned, leased, or its put has not ended */
    CR_DRAIN_MOVABLE = 3, /* complete, unleased, unpinned, no task */
};

/* The state of object (id, generation) for a drain of `source`; *size is
 * its size and *on_target whether `target` (may be NULL) holds a complete
 * replica of it. */
enum cr_store_drain_state cr_store_drain_state_of(const cr_store *store, uint32_t id,
                                                  uint32_t generation, const char *source,
                                                  const char *target, uint64_t now_ms,
                                                  uint64_t *size, bool *on_target);

/* The next object from *cursor (start at 0) with a memory replica on
 * `source`: its id and generation; false at the end. */
bool cr_store_drain_next(const cr_store *store, const char *source, uint32_t *cursor,
                         uint32_t *id, uint32_t *generation);

/* The object's key (pointing into store memory, valid until the next
 * change); false when (id, generation) is gone. */
bool cr_store_drain_key(const cr_store *store, uint32_t id, uint32_t generation,
                        struct cr_store_key *out);

/* Where the object can go: the least used (by fraction) mounted segment
 * that is not draining, not `source`, holds no replica of it and has room
 * for it, among targets[0..n) when n > 0 (else every mounted segment);
 * NULL when none. */
const char *cr_store_drain_target(const cr_store *store, uint32_t id, const char *source,
                                  const char *const *targets, uint32_t n);

#endif
