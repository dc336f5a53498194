/* Memory eviction's offload to a store server's SSD tier (docs/tiers.md,
 * "Local SSD tier"): the mechanism on the store; the segments actor decides
 * when (segments_offload.c) and the tasks actor runs the task.
 *
 * An offload is a task with a source and no targets: the object counts it
 * (obj->tasks, so eviction skips it and a removal without force waits) and
 * keeps every replica until the executor, the server owning the source
 * segment, has written the object to its SSD and reported the file's
 * position.  Only then (cr_store_offload_commit) does the object gain a
 * local_disk replica and lose its memory replicas.  A failure, a deadline
 * or a lost executor ends it with cr_store_task_rollback (the ref has no
 * targets): nothing changes but the count.  Included by store.h. */
#ifndef CRESCENT_CORE_STORE_OFFLOAD_H
#define CRESCENT_CORE_STORE_OFFLOAD_H

#include "core/store.h"

/* Begins offloading eviction victim (object_id, generation) instead of
 * dropping it, when it can be: complete, unleased, not hard-pinned, in no
 * task, with a checksum (the SSD stores only checked bytes), a COMPLETE
 * memory replica on a segment whose owner mounted it with an SSD tier
 * (ssd_capacity >= the object's size), no local_disk replica yet, and a
 * free replica slot.  Returns CR_OK with *out (ref.target_count 0; source
 * and source_owner name the executor's replica; *key the object's tenant and
 * key, pointing into the store until its next change), or CR_ERR_INVALID_PARAMS
 * when it cannot be offloaded (the caller evicts as usual), changing
 * nothing. */
int cr_store_offload_begin(cr_store *store, uint32_t object_id, uint32_t generation,
                           uint64_t now_ms, struct cr_store_task_reservation *out,
                           struct cr_store_key *key);

/* The executor wrote the object to its SSD at `position`: records a
 * local_disk replica on the source segment and drops the object's memory
 * replicas unless a lease protects them now (a reader may be copying; the
 * next eviction drops them, the SSD copy being there), then publishes one
 * UPDATE event.  Ends the offload.  Returns CR_OK, or (ending the offload,
 * changing nothing else) CR_ERR_OBJECT_NOT_FOUND: the object was removed
 * or replaced, or the source segment unmounted or its replica gone; or
 * CR_ERR_NOMEM: the object would keep its memory replica beside the new one
 * and its replica array could not be allocated. */
int cr_store_offload_commit(cr_store *store, const struct cr_store_task_ref *ref,
                            uint64_t position, uint64_t now_ms);

/* The offload failed (the executor's report, a deadline): ends it, as
 * cr_store_task_rollback, and counts it.  Never fails. */
void cr_store_offload_rollback(cr_store *store, const struct cr_store_task_ref *ref);

/* After an unmount or a client's expiry (*executor_known: whether the
 * executor is still a client of the store): CR_OK while the source replica is
 * still on a segment `executor` owns; else the offload is ended (as
 * cr_store_task_rollback) and CR_ERR_OBJECT_NOT_FOUND returned.  Never
 * moves an offload to another server: its SSD is the point. */
int cr_store_offload_check(cr_store *store, const struct cr_store_task_ref *ref,
                           const struct cr_uuid *executor, bool *executor_known);

/* Whether the object a ref names is still offloading from its source
 * (same generation, the memory replica at source_offset still there). */
bool cr_store_offload_live(const cr_store *store, const struct cr_store_task_ref *ref);

#endif
