/* The store core's copy/move task calls (store_tasks.c): reserve a task's
 * targets, commit or roll them back, release a move's source.  The tasks
 * actor decides; these calls are the mechanism.  Included by store.h. */
#ifndef CRESCENT_CORE_STORE_TASKS_H
#define CRESCENT_CORE_STORE_TASKS_H

#include "core/store.h"

/* ---- copy/move tasks (store_tasks.c; the tasks actor drives them) -------- */

/* What a task reserved, to name it again at commit or rollback: the object
 * by slot and generation (a key removed and put again is another object),
 * each reserved replica by segment and offset. */
struct cr_store_task_ref {
    uint32_t object_id;
    uint32_t generation;
    uint32_t target_count;
    uint32_t target_segment[CR_STORE_REPLICAS_MAX];
    uint64_t target_offset[CR_STORE_REPLICAS_MAX];
    uint32_t source_segment;
    uint64_t source_offset;
    uint64_t size;
};

struct cr_store_task_reservation {
    struct cr_store_task_ref ref;
    struct cr_store_replica_desc source; /* a COMPLETE replica to read */
    struct cr_uuid source_owner;         /* the client that mounted its segment */
    struct cr_store_replica_list targets; /* reserved, status PROCESSING */
    bool has_checksum;                    /* PutEnd's, for the executor to verify */
    uint64_t checksum;
};

/* Reserves one replica of a complete object on each segment of targets[0..n)
 * (PROCESSING: allocated, never in a replica list or event until committed)
 * and names the replica to read: on `source` when given, else the first
 * complete one.  While reserved the object is not evicted and not removed
 * without force; a forced removal or a client's expiry parks the reserved
 * space instead of freeing it, until both put_start_release_timeout_ms and
 * task_timeout_ms have passed since the reservation, so an executor still
 * writing cannot corrupt the next object placed there.
 * Returns CR_OK and fills *out, or (changing nothing):
 * CR_ERR_OBJECT_NOT_FOUND (no such key), CR_ERR_OBJECT_NOT_READY (put not
 * ended), CR_ERR_SEGMENT_NOT_FOUND (source or a target not mounted),
 * CR_ERR_INVALID_PARAMS (n 0 or too many replicas, a target named twice or
 * equal to the source, source holding no complete replica, a target already
 * holding one), CR_ERR_NO_AVAILABLE_HANDLE (a target has no room),
 * CR_ERR_NOMEM (255 tasks on the object).  Descriptors point into store
 * memory (valid until the next change). */
int cr_store_task_reserve(cr_store *store, const struct cr_store_key *key, const char *source,
                          const char *const *targets, uint32_t n, uint64_t now_ms,
                          struct cr_store_task_reservation *out);

/* Makes the reserved replicas COMPLETE (they become readable and the
 * object's UPDATE event lists them).  With release_source, then drops the
 * source replica unless a lease protects it (one UPDATE event in all when it
 * goes at once).  Ends the reservation either way.  Returns CR_OK,
 * CR_ERR_OBJECT_HAS_LEASE (committed, source kept: *lease_deadline_ms says
 * until when; call cr_store_task_release_source later), or, changing
 * nothing but ending the reservation and freeing what is left of it,
 * CR_ERR_OBJECT_NOT_FOUND (the object was removed or a reserved replica's
 * segment unmounted meanwhile). */
int cr_store_task_commit(cr_store *store, const struct cr_store_task_ref *ref,
                         bool release_source, uint64_t now_ms, uint64_t *lease_deadline_ms);

/* Frees the reserved replicas that still exist and ends the reservation;
 * readers never saw them, so no event.  An object left without replicas
 * is freed.  Never fails (a vanished object is fine). */
void cr_store_task_rollback(cr_store *store, const struct cr_store_task_ref *ref);

/* What a re-check of a task found (cr_store_task_recheck). */
struct cr_store_task_recheck {
    bool moved;          /* a new source and new target reservations (res) */
    bool source_lost;    /* the source replica or its owner's segment is gone */
    bool executor_known; /* the old executor is still a client of the store */
    struct cr_store_task_reservation res; /* when moved; ref == the new *ref */
};

/* After a segment was unmounted or a client expired: checks a task's
 * reservation (ref) and its source, read by `executor`.  Source replica
 * still COMPLETE on a segment `executor` owns, targets still reserved:
 * CR_OK, nothing changed.  Source gone: a COMPLETE replica on a segment of
 * another client becomes the source (that client the executor, never
 * `executor` again, out->res.source_owner) and every target is
 * reserved again on its segment, while the old target space is parked until
 * task_timeout_ms from now (the lost executor may be stopped, not dead, and
 * write there late); *ref becomes the new reservation, out->moved is set.
 * Errors, the reservation rolled back (as cr_store_task_rollback):
 * CR_ERR_OBJECT_NOT_FOUND (object removed, a target segment unmounted, or no
 * other client's complete replica to copy from), CR_ERR_NO_AVAILABLE_HANDLE (a target
 * segment has no room for the new reservation). */
int cr_store_task_recheck(cr_store *store, struct cr_store_task_ref *ref,
                          const struct cr_uuid *executor, uint64_t now_ms,
                          struct cr_store_task_recheck *out);

/* A committed move's source, released once unleased: CR_OK (dropped, UPDATE
 * event; also when it is already gone), CR_ERR_OBJECT_HAS_LEASE with
 * *lease_deadline_ms, CR_ERR_OBJECT_NOT_FOUND (the object is gone). */
int cr_store_task_release_source(cr_store *store, const struct cr_store_task_ref *ref,
                                 uint64_t now_ms, uint64_t *lease_deadline_ms);

#endif
