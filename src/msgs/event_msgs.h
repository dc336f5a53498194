/* Messages of the event plane (publisher, replay): types 128..191.
 *
 * The publisher receives CR_MSG_STORE_EVENT (store_msgs.h), encodes each
 * batch once and hands the replay actor one reference to it with
 * CR_MSG_EVENT_BATCH.  The two info asks serve GET /api/v1/events; the same
 * numbers go out through each actor's stats hook (Prometheus). */
#ifndef CRESCENT_MSGS_EVENT_MSGS_H
#define CRESCENT_MSGS_EVENT_MSGS_H

#include <stdbool.h>
#include <stdint.h>

#include "msgs/msg.h"
#include "msgs/store_event.h"
#include "msgs/store_msgs.h"

enum cr_event_msg_type {
    /* publisher → replay: body cr_msg_event_batch; one batch reference moves. */
    CR_MSG_EVENT_BATCH = CR_MSG_EVENTS_FIRST + 0,
    /* ask → publisher: body cr_msg_publisher_info. */
    CR_MSG_PUBLISHER_INFO = CR_MSG_EVENTS_FIRST + 1,
    /* ask → replay: body cr_msg_replay_info. */
    CR_MSG_REPLAY_INFO = CR_MSG_EVENTS_FIRST + 2,
};

struct cr_msg_event_batch {
    cr_event_batch *batch; /* one reference, owned by the receiver */
};

/* The publisher's counters. */
struct cr_publisher_info {
    uint64_t next_seq;       /* seq the next batch gets */
    uint64_t first_seq;      /* seq this process started at (above every seq an
                                earlier run of a --state-dir used); history starts there */
    uint64_t batches_sent;
    uint64_t events_sent;
    uint64_t events_by_kind[CR_STORE_EVENT_KIND_COUNT];
    uint64_t events_pending; /* appended to the batch being built */
    uint64_t send_drops;     /* batches zmq_send refused (EAGAIN or error) */
    uint64_t encode_errors;  /* events that could not be encoded (out of memory) */
    uint64_t handoff_drops;  /* batches the replay actor could not take */
};

struct cr_msg_publisher_info {
    struct cr_publisher_info *out;
};

/* The replay actor's counters and what it keeps. */
struct cr_replay_info {
    uint64_t sessions_served;    /* requests answered with an end marker */
    uint64_t sessions_clamped;   /* start seq below the oldest kept batch */
    uint64_t malformed_requests; /* answered with the end marker only */
    uint64_t clients_dropped;    /* sessions ended because a send failed */
    uint64_t clients_stalled;    /* sessions dropped: their queue stayed full */
    uint64_t batches_replayed;
    uint64_t sessions_active;
    uint64_t batches_kept;
    uint64_t bytes_kept;
    bool has_batches;            /* oldest/newest are meaningful */
    uint64_t oldest_seq;
    uint64_t newest_seq;
    uint64_t restarts;           /* seq went backwards: buffer cleared */
    uint64_t oversized_batches;  /* a batch above replay_bytes_mb alone: not kept */
};

struct cr_msg_replay_info {
    struct cr_replay_info *out;
};

#endif
