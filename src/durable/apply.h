/* Applying one log record to a live store: what a standby does with each
 * record its leader streams (docs/durability.md, "Replication").
 *
 * Records state effects (record.h), so applying one is idempotent: a
 * segment's MOUNT replaces a different segment of that name, an object's
 * PUT replaces the object of that key, a REMOVE of a key that is gone is
 * no change.  So a record received twice (a reconnect's catch-up overlapping
 * what came before) leaves the same store.
 *
 * Pure like src/core: no threads, no I/O. */
#ifndef CRESCENT_DURABLE_APPLY_H
#define CRESCENT_DURABLE_APPLY_H

#include <stddef.h>
#include <stdint.h>

#include "core/store.h"
#include "core/store_restore.h"
#include "durable/record.h"

/* What applying records did (added to by each call). */
struct cr_durable_apply_counts {
    uint64_t records;
    uint64_t objects_put;
    uint64_t objects_removed;
    uint64_t segments_mounted;
    uint64_t segments_unmounted;
    uint64_t replicas_dropped; /* could not be placed: a divergence, logged by the caller */
    uint64_t objects_dropped;  /* none of its replicas could be placed */
};

/* The restore form of an OBJECT_PUT record (its strings point into rec). */
void cr_durable_restore_from(const struct cr_durable_record *rec,
                             struct cr_store_restore_object *out);

/* Applies rec to store at now_ms.  Returns CR_OK, or the store's error with
 * a sentence in err (a table of the store full); an object whose replicas
 * cannot be placed is counted, not an error. */
int cr_durable_apply(cr_store *store, const struct cr_durable_record *rec, uint64_t now_ms,
                     struct cr_durable_apply_counts *counts, char *err, size_t err_len);

/* Applies every framed record of block[0..len) (already checked by the
 * stream decoder).  Stops at the first error. */
int cr_durable_apply_block(cr_store *store, const uint8_t *block, size_t len, uint64_t now_ms,
                           struct cr_durable_apply_counts *counts, uint64_t *last_lsn, char *err,
                           size_t err_len);

#endif
