/* Putting a store back as a restart found it (src/durable/recover.c): each
 * complete object with its replicas where they were, so the bytes that the
 * store servers still hold are found again.  Pure like the rest of the
 * store: the caller reads the log and the snapshot.
 *
 * Leases, in-flight puts, copy/move tasks and client secrets are not
 * restored: a restart ends them (docs/durability.md). */
#ifndef CRESCENT_CORE_STORE_RESTORE_H
#define CRESCENT_CORE_STORE_RESTORE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/store.h"

struct cr_store_restore_replica {
    enum cr_replica_medium medium; /* 0: memory */
    const char *segment; /* memory, local_disk: a mounted segment's name */
    uint64_t offset;     /* memory: within the segment; local_disk: the server's position */
    uint64_t size;       /* memory: bytes allocated; otherwise the object's size */
    const char *file_path; /* disk: the file */
};

struct cr_store_restore_object {
    const char *tenant; /* "" → "default" */
    const char *key;
    uint32_t key_len;
    uint64_t size;      /* the value's length */
    bool has_checksum;
    uint64_t checksum;
    bool with_soft_pin;
    bool hard_pinned;
    struct cr_uuid owner;
    uint32_t replica_count;
    struct cr_store_restore_replica replicas[CR_STORE_REPLICAS_MAX];
};

/* Adds a complete object with its replicas at their offsets (last access
 * now_ms, no lease), publishing no event.  In a bulk restore (below) memory
 * replicas are placed unclaimed: their ranges are checked at its finish.  A replica whose segment is not
 * mounted, whose range is taken or lies outside its segment (memory), a
 * second disk replica or one with a bad path, is left out
 * and counted in *dropped_replicas (the caller logs them); an object left
 * with none is not added.  Returns CR_OK, CR_ERR_SEGMENT_NOT_FOUND (no
 * replica could be placed), CR_ERR_OBJECT_ALREADY_EXISTS (the key is
 * there), CR_ERR_INVALID_PARAMS (key or tenant out of bounds) or
 * CR_ERR_NOMEM (a table is full: message in cr_store_last_error).  Changes
 * nothing on error. */
int cr_store_restore_object(cr_store *store, const struct cr_store_restore_object *o,
                            uint64_t now_ms, uint32_t *dropped_replicas);

/* Sizes the key index for `objects` more objects (at most max_objects in
 * all) before restoring them: one rehash instead of a doubling every time
 * the count crosses a power of two; and maps the object slab's chunks for
 * them in one region of huge pages (cr_store_slab_reserve).  Returns CR_OK
 * or CR_ERR_NOMEM (the restore then grows each as it goes, or fails where
 * it would have). */
int cr_store_restore_reserve(cr_store *store, uint64_t objects);

/* The newest slab region cr_store_restore_reserve mapped (*bytes 0: none).
 * Its pages cost their first write a fault and the kernel's zeroing (on a
 * virtual machine, most of a large restore's time): a caller may populate
 * them (madvise MADV_POPULATE_WRITE, which changes no byte) on a thread of
 * its own while it restores into them.  The region stays mapped until the
 * store is destroyed. */
void cr_store_restore_slab_region(const cr_store *store, void **base, size_t *bytes);

/* A hint before restoring (tenant, key) a few objects later: starts the
 * load of the key index slot it probes, so that a restore of millions of
 * objects does not wait for one cache miss per object.  Changes nothing. */
void cr_store_restore_prefetch(const cr_store *store, const char *tenant, const char *key,
                               uint32_t key_len);

/* ---- bulk restore (store_restore_bulk.c) ----------------------------------
 *
 * A restart restores a snapshot straight into the store and then applies
 * the log after it (src/durable/recover.c).  The snapshot is a fuzzy cut:
 * it may hold an object removed during the cut beside another placed at
 * the same offset later, so ranges cannot be claimed as objects arrive.
 * Between begin and finish, cr_store_restore_object places each memory
 * replica WITHOUT claiming its range (its node is CR_STORE_NODE_UNCLAIMED,
 * store_internal.h): segment used bytes stay 0, and removing the object
 * (a later record's remove, replacement or unmount) frees nothing.  The
 * finish claims every replica still in the store, per segment in
 * ascending offset order (what cr_offset_alloc_claim takes in O(1)).
 * Meanwhile the store publishes no event and calls no file hook: the
 * records replayed describe changes published before the restart. */

struct cr_store_restore_dropped {
    uint64_t objects;  /* left with no replica, removed */
    uint64_t replicas; /* a range that overlaps one claimed, or lies outside its segment */
};

/* Starts a bulk restore.  Returns CR_OK, CR_ERR_NOMEM (message set), or
 * CR_ERR_INVALID_PARAMS when one is under way already. */
int cr_store_restore_begin(cr_store *store);

/* Whether a bulk restore is under way. */
bool cr_store_restore_bulk(const cr_store *store);

/* ---- the key index, deferred (store_restore_index.c) ------------------------
 *
 * Inserting millions of objects one by one into the key index is a cache
 * miss at random per object (and one more for the duplicate-key lookup).
 * Within a bulk restore, the caller may defer the index for a run of
 * cr_store_restore_object calls (a snapshot's objects) and build it at once
 * afterwards, in home-slot order: a sequential walk of the table.
 *
 * While the index is deferred, cr_store_restore_object:
 *  - puts each object in the slab and notes it for the build; the key is not
 *    looked up, so it never returns CR_ERR_OBJECT_ALREADY_EXISTS: a key
 *    restored twice is held twice until the build, which keeps the one
 *    restored LAST (as removing the earlier and restoring again would) and
 *    frees the other (its replicas unclaimed: nothing in the allocators);
 *  - builds the index first, and goes on without deferring, when there is
 *    no room to defer one more (max_objects reached by such duplicates, the
 *    index at its ceiling, or no memory for the note);
 *  and cr_store_restore_prefetch does nothing.
 * Nothing else may use the key index meanwhile: no lookup, removal, put or
 * unmount (the objects restored since are not in it; asserted).  The
 * caller builds it before applying any record other than an object's
 * restore or a segment's mount; cr_store_restore_finish and
 * cr_store_restore_abort build it when the caller has not. */

/* Defers the key index for the objects restored from now on; `objects`
 * sizes the notes (8 bytes an object; they grow past it).  Returns CR_OK
 * (also when deferred already), CR_ERR_INVALID_PARAMS (no bulk restore) or
 * CR_ERR_NOMEM (message set; nothing deferred: the restore goes on as
 * without). */
int cr_store_restore_index_defer(cr_store *store, uint64_t objects);

/* Whether the key index is deferred. */
bool cr_store_restore_index_deferred(const cr_store *store);

/* Puts every object restored since the defer into the key index, sorted by
 * home slot (without the memory to sort: in restore order, the same index
 * built at random), and ends the deferral.  A key restored more than once
 * keeps its last object; the earlier ones are freed (no event).  Returns
 * how many were, 0 when nothing is deferred.  Cannot fail. */
uint64_t cr_store_restore_index_build(cr_store *store);

/* Ends a bulk restore: claims each live object's memory replicas, per
 * segment in ascending offset order (ties: the object in the lower slot,
 * which was restored first, wins).  A replica whose range overlaps one
 * claimed before it, or lies outside its segment, is dropped; an object
 * left with no replica is removed.  Both are counted in *dropped (the
 * caller logs them).  The store is then as if every object had been
 * restored outside bulk mode.  Returns CR_OK, or CR_ERR_NOMEM (message
 * set; the restore is still under way: call cr_store_restore_abort). */
int cr_store_restore_finish(cr_store *store, struct cr_store_restore_dropped *dropped);

/* ---- the finish in phases, for a caller with threads (src/durable/recover.c) --
 *
 * cr_store_restore_finish is these three, on one thread:
 *  1. cr_store_restore_finish_prepare: builds the key index if deferred,
 *     collects every unclaimed memory replica and sorts each segment's by
 *     offset (the plan);
 *  2. cr_store_restore_finish_claims for segment ranges that cover
 *     [0, cr_store_restore_plan_segments) once: claims those segments'
 *     replicas; a claim that fails is only noted in its part;
 *  3. cr_store_restore_finish_end: adds the parts' bytes to the store's,
 *     drops the failed replicas (and objects left with none), frees the
 *     plan and ends the bulk restore.
 * The result is the same however the segments are split (same claims, same
 * drops in the same order), so the caller splits them as it likes.
 *
 * Threads: calls of phase 2 on DISJOINT segment ranges may run at once, on
 * different threads (and nothing else may use the store meanwhile).  They
 * are race-free because a call writes only its own segments' allocators
 * and used_bytes, the `node` field of the replicas on those segments (a
 * replica is on one segment: two calls never write the same replica), and
 * its own range of the plan's array; it reads the plan's bounds, the
 * objects' slot, state, replica array pointer and those same replicas'
 * offset, size and segment, which nobody writes until phase 3.  It never
 * reads a replica of another segment, changes no object's state or
 * replica count, and touches no store-wide count or tenant charge (phase 3
 * does).  src/core itself starts no thread. */

struct cr_store_restore_plan; /* opaque; phase 3 frees it */

/* What one phase-2 call did, for phase 3. */
struct cr_store_restore_part {
    uint32_t seg_lo, seg_hi; /* the segments claimed: [seg_lo, seg_hi) */
    uint64_t bytes;          /* allocated by the claims */
    uint64_t claimed;        /* replicas claimed */
    uint64_t failed;         /* claims that failed (kept in the plan), dropped by phase 3 */
};

/* Phase 1.  Returns CR_OK with *plan, or CR_ERR_NOMEM (message set; no
 * plan; the restore is still under way: call cr_store_restore_abort). */
int cr_store_restore_finish_prepare(cr_store *store, struct cr_store_restore_plan **plan);

/* The segment ids the plan covers (max_segments), and how many claims
 * segment seg has: to split the segments into ranges of about equal work. */
uint32_t cr_store_restore_plan_segments(const struct cr_store_restore_plan *plan);
uint64_t cr_store_restore_plan_claims(const struct cr_store_restore_plan *plan, uint32_t seg);

/* Phase 2 for the segments [seg_lo, seg_hi), filling *part.  Cannot fail
 * (a claim that fails is a drop for phase 3).  See "Threads" above. */
void cr_store_restore_finish_claims(cr_store *store, struct cr_store_restore_plan *plan,
                                    uint32_t seg_lo, uint32_t seg_hi,
                                    struct cr_store_restore_part *part);

/* Phase 3, after every phase-2 call has returned: parts[0..n) in ascending
 * segment order, covering every segment once (asserted).  Fills *dropped
 * as cr_store_restore_finish does.  Cannot fail. */
void cr_store_restore_finish_end(cr_store *store, struct cr_store_restore_plan *plan,
                                 const struct cr_store_restore_part *parts, uint32_t n,
                                 struct cr_store_restore_dropped *dropped);

/* Ends a bulk restore that failed: removes every object (no event), so
 * nothing unclaimed outlives it.  Segments stay mounted. */
void cr_store_restore_abort(cr_store *store);

#endif
