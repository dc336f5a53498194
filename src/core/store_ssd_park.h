/* What the master keeps of a store server's SSD files while the server is
 * away (docs/tiers.md, "What the server reports: SSD evictions, restarts").
 *
 * A segment with an SSD tier that goes (its owner expired, unmounted or
 * drained) takes its local_disk replicas with it, and objects whose only
 * replica was there are dropped.  When the server comes back it re-registers
 * every file it holds; an object the master no longer has is created again
 * from its file, but only when the master *parked* that file as it dropped
 * the segment and the key was neither put nor removed since.  So a key
 * removed, or replaced by a newer put, while the server was away (or while
 * its only copy sat on that SSD) never comes back with its old bytes: the
 * registration is refused and the server deletes the file.
 *
 * A segment the master has no record of at all (first seen by this run of
 * crescentd: it restarted without --state-dir, or the segment was dropped
 * by an earlier run) keeps the old rule: its files re-create their objects,
 * as they are the only record there is.  A segment restored from
 * --state-dir has a record (every object on it was restored with it).
 *
 * Parked files are (key hash, position, size, checksum) under their
 * segment's name: about 48 bytes each, at most max_objects in all (past it a
 * file is not parked, counted, and its registration is refused: the cache
 * loses it, it never serves stale bytes).  A put or a removal of a key (an
 * object created or freed) forgets its parked files, which costs one branch
 * per object while nothing is parked and one hash probe while something is. */
#ifndef CRESCENT_CORE_STORE_SSD_PARK_H
#define CRESCENT_CORE_STORE_SSD_PARK_H

#include <stdint.h>

#include "core/store.h"

/* Before mounted segment `seg` is dropped: when it has an SSD tier, records
 * it and parks its objects' complete local_disk replicas.  The frees of the
 * drop that follows do not forget them (cr_store_ssd_park_mute). */
void cr_store_ssd_park_segment(cr_store *store, uint32_t seg);

/* A segment restored from the durable log: the master has a record of it
 * (a file of it whose object is not there is refused). */
void cr_store_ssd_park_know(cr_store *store, const char *segment_name);

/* An object of key hash `hash` created or freed: its parked files are forgotten. */
void cr_store_ssd_park_forget(cr_store *store, uint64_t hash);

/* RemoveAll (of any tenant): every parked file is forgotten (they keep
 * only key hashes, not tenants). */
void cr_store_ssd_park_forget_all(cr_store *store);

/* While a dropped segment's objects are freed: they went with the segment,
 * not by a put or a removal, so their parked files stay. */
void cr_store_ssd_park_mute(cr_store *store, bool muted);

/* A file re-registered whose object is not there: 1 when it was parked
 * (the caller re-creates the object, which forgets it), 0 when the master
 * has no record of the segment, -1 when it has one without this file. */
int cr_store_ssd_park_check(const cr_store *store, const char *segment_name, uint64_t hash,
                            uint64_t position, uint64_t size, uint64_t checksum);

/* Files parked now, and files not parked because the table was full. */
void cr_store_ssd_park_counts(const cr_store *store, uint64_t *parked, uint64_t *overflow);

void cr_store_ssd_park_free(cr_store *store);

#endif
