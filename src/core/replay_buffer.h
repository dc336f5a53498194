/* Replay buffer: the last N encoded event batches, for replay requests.
 *
 * A ring of cr_event_batch references ordered by sequence number, bounded
 * both by count (default 10000, the reference publisher's figure) and by
 * payload bytes (default 64 MiB, so a burst of large batches cannot hold
 * unbounded memory).  Pushing past either bound evicts the oldest batches and
 * drops the ring's reference to them; a batch still being sent elsewhere
 * stays alive through its own references.
 *
 * Replay sessions walk the ring with a cursor that stores absolute positions
 * (the number of pushes before a batch), not ring slots, so a session that
 * is paused by a slow client stays valid while pushes and evictions go on:
 * batches evicted under it are skipped and counted in the cursor.
 *
 * Single-threaded (src/core): the replay actor owns each instance. */
#ifndef CRESCENT_CORE_REPLAY_BUFFER_H
#define CRESCENT_CORE_REPLAY_BUFFER_H

#include <stdbool.h>
#include <stdint.h>

#include "msgs/store_event.h"

#define CR_REPLAY_BUFFER_MAX_BATCHES_DEFAULT 10000u
#define CR_REPLAY_BUFFER_MAX_BYTES_DEFAULT (64ull * 1024 * 1024)
/* The ring's slots are allocated up front; this caps that allocation. */
#define CR_REPLAY_BUFFER_MAX_BATCHES_LIMIT (1u << 24)

typedef struct cr_replay_buffer cr_replay_buffer;

typedef struct cr_replay_buffer_config {
    uint32_t max_batches; /* 0 means 10000 */
    uint64_t max_bytes;   /* payload bytes kept; 0 means 64 MiB */
} cr_replay_buffer_config;

typedef struct cr_replay_buffer_stats {
    uint32_t batch_count;     /* batches kept now */
    uint64_t bytes;           /* their payload bytes */
    uint64_t pushed_total;    /* batches ever pushed */
    uint64_t evicted_total;   /* batches dropped by the bounds or by clear */
    uint64_t oldest_seq;      /* meaningful only when batch_count > 0 */
    uint64_t newest_seq;      /* meaningful only when batch_count > 0 */
} cr_replay_buffer_stats;

/* A replay session's position: batches at absolute positions
 * [next_position, end_position) remain to be sent. */
typedef struct cr_replay_cursor {
    uint64_t next_position;
    uint64_t end_position;
    uint64_t skipped_batches; /* evicted before this cursor reached them */
} cr_replay_cursor;

/* Creates an empty buffer.  `config` NULL means defaults.  Returns CR_OK,
 * CR_ERR_INVALID_PARAMS (max_batches above the limit) or CR_ERR_NOMEM. */
int cr_replay_buffer_create(const cr_replay_buffer_config *config, cr_replay_buffer **out);

/* Drops every reference the buffer holds and frees it.  NULL is ignored. */
void cr_replay_buffer_destroy(cr_replay_buffer *buffer);

/* Appends `batch`, taking over the caller's reference on success, then evicts
 * the oldest batches until both bounds hold.  Returns CR_OK,
 * CR_ERR_INVALID_PARAMS when batch->seq is not above the newest kept seq
 * (after a publisher restart, clear first), or CR_ERR_NOMEM when the batch
 * alone exceeds max_bytes.  On error nothing changes and the caller keeps
 * its reference. */
int cr_replay_buffer_push(cr_replay_buffer *buffer, cr_event_batch *batch);

/* Evicts every batch (e.g. when the publisher restarts its sequence at 0).
 * Open cursors end at their next step. */
void cr_replay_buffer_clear(cr_replay_buffer *buffer);

/* Starts a replay of every kept batch with seq >= start_seq, as kept now
 * (batches pushed later are not part of it).  When start_seq is below the
 * oldest kept seq the replay starts at the oldest and *clamped_out is set
 * true; when it is beyond the newest the cursor is empty.  Never fails. */
void cr_replay_buffer_find_from(const cr_replay_buffer *buffer, uint64_t start_seq,
                                cr_replay_cursor *cursor_out, bool *clamped_out);

/* Returns the cursor's next batch and advances it, or NULL when it is done.
 * The batch is borrowed (immutable, see store_event.h): it stays valid until
 * the next push or clear; take a reference (cr_event_batch_ref, e.g. for a
 * zero-copy send) to keep it longer.  Changes only the cursor. */
cr_event_batch *cr_replay_buffer_next(const cr_replay_buffer *buffer,
                                      cr_replay_cursor *cursor);

/* Batches the cursor has yet to visit (evicted ones included). */
uint64_t cr_replay_cursor_remaining(const cr_replay_cursor *cursor);

void cr_replay_buffer_get_stats(const cr_replay_buffer *buffer, cr_replay_buffer_stats *out);

#endif
