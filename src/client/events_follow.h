/* Following crescentd's store events: live over SUB, optionally replayed
 * first from a seq over a DEALER, delivered in seq order without gaps or
 * duplicates where the replay buffer allows.
 *
 * With a start seq the follower subscribes FIRST, then asks for the replay;
 * live batches that arrive meanwhile are buffered.  Replayed batches are
 * delivered, then the buffered live ones, skipping every seq already
 * delivered (dedupe by seq).  If the live stream ever skips seqs (the
 * subscriber fell behind the PUB high-water mark, or joined late) and a
 * replay endpoint is set, the follower replays the missing range once; what
 * the replay buffer no longer holds is reported as a gap.
 *
 * Restarts: crescentd numbers batches from 0 each time it starts, and a
 * batch's ts never goes backwards within one run.  Two signs of a restart:
 *   - a live batch numbered at or below the last delivered one but with a
 *     newer ts (without a replay endpoint this is the only one);
 *   - a live batch numbered ahead: the repair replay starts at the last
 *     delivered seq, and if the answer is not that very batch (same seq,
 *     same ts), the numbering belongs to a new crescentd.
 * Either way the follower returns CR_EVENTS_ITEM_RESTART and, with a replay
 * endpoint, delivers the new run from seq 0 (replayed, then live).  Not
 * detected: a new run whose first batch seen has exactly the next expected
 * seq (it is taken as the continuation).

 * Single-threaded: one follower belongs to one thread.  Links with libzmq. */
#ifndef CRESCENT_CLIENT_EVENTS_FOLLOW_H
#define CRESCENT_CLIENT_EVENTS_FOLLOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CR_EVENTS_LIVE_BUFFER_DEFAULT 100000u /* live batches held during a replay */

typedef struct cr_events_follower cr_events_follower;

typedef struct cr_events_follow_config {
    const char *sub_endpoint;    /* PUB endpoint, e.g. tcp://127.0.0.1:19997 */
    const char *replay_endpoint; /* ROUTER endpoint; NULL: no replay, no gap repair */
    const char *topic;           /* subscription prefix; NULL means "mooncake" */
    bool replay_from_start;      /* replay from start_seq before following live */
    uint64_t start_seq;
    uint32_t live_buffer_max;    /* 0 means CR_EVENTS_LIVE_BUFFER_DEFAULT */
    int replay_timeout_ms;       /* a replay round that stalls this long fails; 0: 5000 */
} cr_events_follow_config;

typedef enum cr_events_item_kind {
    CR_EVENTS_ITEM_BATCH = 0,   /* seq, payload */
    CR_EVENTS_ITEM_GAP = 1,     /* batches [gap_first, gap_last] cannot be delivered */
    CR_EVENTS_ITEM_RESTART = 2, /* seq went back from gap_first to seq: crescentd restarted */
} cr_events_item_kind;

typedef struct cr_events_item {
    cr_events_item_kind kind;
    uint64_t seq;
    const uint8_t *payload; /* BATCH: valid until the next call on the follower */
    size_t len;
    uint64_t gap_first;
    uint64_t gap_last;
} cr_events_item;

/* Connects the sockets (and sends the first replay request when asked).
 * Returns CR_OK, CR_ERR_INVALID_PARAMS (no sub endpoint, replay without a
 * replay endpoint, an endpoint zmq refuses), CR_ERR_NOMEM or CR_ERR_IO. */
int cr_events_follow_create(const cr_events_follow_config *config, cr_events_follower **out);

/* Waits up to timeout_ms (-1: forever) for the next item.  Returns CR_OK
 * with *item set, CR_ERR_TIMEOUT when nothing came, CR_ERR_PROTOCOL when a
 * peer sent a message of the wrong shape (it is skipped; call again),
 * CR_ERR_NOMEM when more than live_buffer_max live batches arrived during a
 * replay, CR_ERR_TIMEOUT also when a replay round stalled (then live
 * following continues without it), or CR_ERR_IO. */
int cr_events_follow_next(cr_events_follower *follower, int timeout_ms, cr_events_item *item);

/* Closes the sockets and frees the follower.  NULL is ignored. */
void cr_events_follow_destroy(cr_events_follower *follower);

#endif
