/* Messages between the segments actor and the journal actor (the store's
 * operation log, src/durable/journal.c).
 *
 * Segments gathers the round's records (src/durable/feed.c) into one heap
 * block and hands it over at round end: one message and one malloc per
 * round of calls, never per call.  The journal writes blocks in order,
 * syncs them by --durability, and tells segments how far the log is on
 * disk, which is what --durability sync waits for before a mutating call is
 * answered. */
#ifndef CRESCENT_MSGS_DURABLE_MSGS_H
#define CRESCENT_MSGS_DURABLE_MSGS_H

#include <stddef.h>
#include <stdint.h>

#include "msgs/store_msgs.h"

enum cr_durable_msg_type {
    /* segments → journal: body cr_msg_durable_append; the block is the
     * receiver's (free()). */
    CR_MSG_DURABLE_APPEND = CR_MSG_STORE_FIRST + 50,
    /* journal → segments: body cr_msg_durable_synced. */
    CR_MSG_DURABLE_SYNCED = CR_MSG_STORE_FIRST + 51,
    /* journal → itself: the async mode's sync deadline. */
    CR_MSG_DURABLE_TICK = CR_MSG_STORE_FIRST + 52,
    /* segments → journal: a snapshot begins at lsn (cr_msg_durable_append's
     * last_lsn; no block): the journal syncs the log so far, starts the next
     * log after its last record (lsn + 1 on a leader; later on a standby
     * whose journal took more of the stream) and a snapshot file. */
    CR_MSG_DURABLE_SNAPSHOT_BEGIN = CR_MSG_STORE_FIRST + 53,
    /* segments → journal: cr_msg_durable_append, a block of the snapshot's
     * records (segments first, then objects, a slice per round). */
    CR_MSG_DURABLE_SNAPSHOT_PART = CR_MSG_STORE_FIRST + 54,
    /* segments → journal: cr_msg_durable_append, the end record's block:
     * the journal syncs and renames the snapshot, then drops the logs and
     * snapshots it makes redundant. */
    CR_MSG_DURABLE_SNAPSHOT_END = CR_MSG_STORE_FIRST + 55,
    /* any thread → journal: body.ptr[0] a malloc'd cr_role_request
     * (durable/role.h), carried out in order with the log stream. */
    CR_MSG_ROLE_REQUEST = CR_MSG_STORE_FIRST + 56,
    /* journal → itself: replication's 100 ms timer (reconnect, lag). */
    CR_MSG_REPL_TICK = CR_MSG_STORE_FIRST + 57,
    /* journal → segments (a standby): cr_msg_durable_append, a block of the
     * leader's records to apply (the journal has it for its log too). */
    CR_MSG_REPL_APPLY = CR_MSG_STORE_FIRST + 58,
    /* journal → segments: cr_msg_repl_role; segments leads from the record
     * after last_lsn at term, or (standby true) stops making records. */
    CR_MSG_REPL_ROLE = CR_MSG_STORE_FIRST + 59,
    /* journal → segments (a standby starting over, docs/ha.md): empty the
     * store (every object, every logged segment); the leader's snapshot or
     * whole log follows. */
    CR_MSG_REPL_RESET = CR_MSG_STORE_FIRST + 60,
    /* segments → journal: the store was emptied (REPL_RESET handled); the
     * snapshot messages segments sent before it were of the state dropped,
     * and the journal ignores them until this one (no body). */
    CR_MSG_REPL_RESET_DONE = CR_MSG_STORE_FIRST + 61,
};

struct cr_msg_repl_role {
    uint64_t term;
    uint64_t last_lsn;
    bool standby;
};

struct cr_msg_durable_append {
    uint8_t *block;    /* framed records (src/durable/record.h), malloc'd */
    size_t len;
    uint64_t last_lsn; /* of the block's last record */
};

struct cr_msg_durable_synced {
    uint64_t lsn; /* every record up to it is on disk */
};

#endif
