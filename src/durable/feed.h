/* The segments actor's side of the operation log: what changed in a round
 * of calls, as records (record.h), in one block for the journal actor.
 *
 * The store tells of every change to a complete object through its event
 * sink (a STORE, an UPDATE, a REMOVE_ALL); the feed notes the key, and at
 * the round's end reads each noted object's state as it is then and writes
 * one record of it: OBJECT_PUT with its replicas, or OBJECT_REMOVE when it
 * is gone or no longer complete.  Segments are compared with the last
 * round's list when a call may have mounted or unmounted one.  So a round
 * costs one record per object it changed, whatever the calls in between,
 * and the store thread makes no system call and one malloc (the block) per
 * round; noting a change is a copy of its key into a buffer that is reused.
 *
 * Single-threaded: owned by segments. */
#ifndef CRESCENT_DURABLE_FEED_H
#define CRESCENT_DURABLE_FEED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/store.h"
#include "durable/record.h"

struct cr_durable_known_segment;

struct cr_durable_feed {
    uint64_t next_lsn;
    uint64_t changes;        /* changes noted so far (sync mode holds calls that made any) */
    struct cr_buf block;     /* this round's framed records */
    uint64_t block_last_lsn; /* of the block's last record */
    struct cr_buf dirty;     /* noted keys: u16 tenant length, tenant, u32 key length, key */
    bool segments_dirty;
    uint32_t segment_epoch;
    uint32_t max_segments;
    struct cr_durable_known_segment **known; /* by segment id, max_segments */
    struct cr_durable_record *rec;           /* scratch */
    /* A segment whose memory dies with crescentd (its local segment): not
     * logged, nor replicas on it ("" none). */
    char volatile_segment[CR_STORE_NAME_LEN_MAX + 1];
    uint64_t records;
    uint64_t failures; /* out of memory: a round's records lost (logged) */
};

/* Sets up a feed whose first record gets lsn next_lsn; `volatile_segment`
 * (NULL: none) names a segment left out of the log.  Returns CR_OK or
 * CR_ERR_NOMEM. */
int cr_durable_feed_init(struct cr_durable_feed *feed, uint64_t next_lsn, uint32_t max_segments,
                         const char *volatile_segment);
void cr_durable_feed_free(struct cr_durable_feed *feed);

/* Notes a store event (call it from the store's event sink). */
void cr_durable_feed_note(struct cr_durable_feed *feed, const struct cr_store_change *ev);

/* Notes that a segment may have been mounted or unmounted. */
static inline void cr_durable_feed_note_segments(struct cr_durable_feed *feed) {
    feed->segments_dirty = true;
    feed->changes++;
}

/* Appends a record made elsewhere (a drain job's, record_drain.h) to the
 * round's block, with the next lsn (set in rec). */
void cr_durable_feed_append(struct cr_durable_feed *feed, struct cr_durable_record *rec);

/* Ends the round: writes the records of what was noted, reading the store
 * as it is now, and hands over the block (malloc'd; the caller frees or
 * passes it on) with the lsn of its last record.  Returns false when there
 * is nothing to write (or no memory for it, counted in failures). */
bool cr_durable_feed_flush(struct cr_durable_feed *feed, const cr_store *store, uint64_t now_ms,
                           uint8_t **block, size_t *len, uint64_t *last_lsn);

/* Snapshots (docs/durability.md): taken on segments' thread a slice per
 * round, a fuzzy cut made exact by the log from its starting lsn on.
 * _segments appends a MOUNT record (lsn `lsn`) per logged segment;
 * _objects appends an OBJECT_PUT record per complete object from *cursor
 * (start at 0), at most `limit` objects looked at, and returns true once
 * the walk is done.  Both add the records written to *count. */
void cr_durable_feed_snapshot_segments(struct cr_durable_feed *feed, const cr_store *store,
                                       uint64_t lsn, struct cr_buf *out, uint64_t *count);
void cr_durable_feed_snapshot_end(struct cr_durable_feed *feed, uint64_t lsn, uint64_t count,
                                  struct cr_buf *out);
bool cr_durable_feed_snapshot_objects(struct cr_durable_feed *feed, const cr_store *store,
                                      uint64_t now_ms, uint64_t lsn, uint32_t *cursor,
                                      size_t limit, struct cr_buf *out, uint64_t *count);

#endif
