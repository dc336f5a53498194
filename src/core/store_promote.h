/* The SSD tier's way back and its bookkeeping (docs/tiers.md, "Local SSD
 * tier"): promotion of objects read from a store server's SSD back to
 * memory, and what a server reports of its SSD (files it re-registers after
 * a restart, files its own LRU evicted or found corrupt).
 *
 * Promotion.  A GetReplicaList that finds no COMPLETE memory replica but a
 * local_disk one counts a hit on the object (the reader goes to the SSD).
 * promotion_hits hits within promotion_window_ms queue the object; the
 * segments actor takes it (cr_store_promote_next) and begins a promotion: a
 * memory replica is reserved (PROCESSING, as a copy task's target) on the
 * SSD server's own segment, or another one with room, never above the
 * eviction high watermark; the server copies its SSD file there through
 * the transfer layer (an ordinary copy task whose source is the reader
 * segment "<segment>#ssd"); the commit makes it COMPLETE (UPDATE event with
 * both replicas).  The SSD copy stays: a later memory eviction of the object
 * drops the memory replica without writing the SSD again.
 *
 * The hit table is direct-mapped (CR_STORE_PROMOTE_SLOTS, by object id):
 * bounded memory, O(1) per read, and two hot objects sharing a slot only
 * reset each other's count (a promotion comes later, never wrongly).
 * Included by store.h. */
#ifndef CRESCENT_CORE_STORE_PROMOTE_H
#define CRESCENT_CORE_STORE_PROMOTE_H

#include "core/store.h"

#define CR_STORE_PROMOTE_SLOTS 4096u /* hit counters */
#define CR_STORE_PROMOTE_QUEUE 256u  /* objects waiting for a promotion to begin */
#define CR_STORE_PROMOTION_HITS_DEFAULT 2u
#define CR_STORE_PROMOTION_WINDOW_MS_DEFAULT 60000u

/* Turns promotion on (hits >= 1, window_ms >= 1) or off (hits 0; the
 * default).  Returns CR_OK, CR_ERR_INVALID_PARAMS (window 0 with hits) or
 * CR_ERR_NOMEM. */
int cr_store_set_promotion(cr_store *store, uint32_t hits, uint64_t window_ms);

/* The next object that reached its hits (oldest first); false when none. */
bool cr_store_promote_next(cr_store *store, uint32_t *object_id, uint32_t *generation);

/* Begins promoting (object_id, generation): still complete, with a
 * COMPLETE local_disk replica (the source: its server is the executor), no
 * COMPLETE memory replica, no task, a free replica slot, and room for one
 * more allocation below the eviction high watermark: on the source's
 * segment first, else the first other mounted segment (not draining) with
 * room.  Fills *out (one PROCESSING target; source is the local_disk
 * replica, source_offset its position) and *key (pointing into the store
 * until its next change).  Returns CR_OK, CR_ERR_INVALID_PARAMS (no longer
 * a candidate: nothing counted) or CR_ERR_NO_AVAILABLE_HANDLE (no room:
 * counted in promotions_no_room).  Changes nothing on error. */
int cr_store_promote_begin(cr_store *store, uint32_t object_id, uint32_t generation,
                           uint64_t now_ms, struct cr_store_task_reservation *out,
                           struct cr_store_key *key);

/* The executor copied the SSD file into the target: the memory replica
 * becomes COMPLETE (UPDATE event).  As cr_store_task_commit without a
 * source release; counts promotions_done or promotions_failed. */
int cr_store_promote_commit(cr_store *store, const struct cr_store_task_ref *ref,
                            uint64_t now_ms);

/* A failed or timed-out promotion: the target is freed (counted failed). */
void cr_store_promote_rollback(cr_store *store, const struct cr_store_task_ref *ref);

/* After an unmount or an expiry: CR_OK while the local_disk source is still
 * there on a segment `executor` owns and the target is still reserved;
 * else the promotion is rolled back (counted failed) and
 * CR_ERR_OBJECT_NOT_FOUND returned.  *executor_known as offload_check. */
int cr_store_promote_check(cr_store *store, const struct cr_store_task_ref *ref,
                           const struct cr_uuid *executor, bool *executor_known);

/* ---- what a store server reports of its SSD ------------------------------ */

/* One file of the SSD of the server owning mounted segment `segment_name`
 * (its owner must be `client`), found whole after a restart (or written
 * before the master restarted): the object k of `size` bytes whose XXH3 is
 * `checksum`, at `position`.
 *   - a complete object with that size and checksum gains (or has moved to
 *     `position`) its local_disk replica on that segment: UPDATE event
 *     (none when it was already recorded there);
 *   - no such object: it is created complete with that one replica (its
 *     owner `client`; a STORE event), as its memory replicas were lost
 *     with the server;
 * Returns CR_OK (*created says which), CR_ERR_SEGMENT_NOT_FOUND,
 * CR_ERR_ILLEGAL_CLIENT (not the segment's owner), CR_ERR_INVALID_PARAMS
 * (size or checksum differ: the file is of an older put, or a put of the
 * key is in flight; the server deletes it), CR_ERR_NOMEM (replica slots or
 * the object table full).  Changes nothing on error. */
int cr_store_local_disk_register(cr_store *store, const struct cr_store_key *k,
                                 const char *segment_name, const struct cr_uuid *client,
                                 uint64_t position, uint64_t size, uint64_t checksum,
                                 uint64_t now_ms, bool *created);

/* The server owning `segment_name` (its owner must be `client`) no longer
 * has file `position` (its LRU evicted it, or a read found it corrupt):
 * object k's local_disk replica there at that position is dropped (UPDATE
 * event; the object goes when it was its last replica).  A replica at
 * another position (a newer file) is kept.  Returns CR_OK (*dropped says
 * whether one went), CR_ERR_SEGMENT_NOT_FOUND or CR_ERR_ILLEGAL_CLIENT. */
int cr_store_local_disk_gone(cr_store *store, const struct cr_store_key *k,
                             const char *segment_name, const struct cr_uuid *client,
                             uint64_t position, bool *dropped);

#endif
