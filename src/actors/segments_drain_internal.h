/* Drain jobs' state, shared by segments_drain.c (the jobs) and
 * segments_drain_durable.c (their records in the operation log). */
#ifndef CRESCENT_ACTORS_SEGMENTS_DRAIN_INTERNAL_H
#define CRESCENT_ACTORS_SEGMENTS_DRAIN_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "actors/segments_drain.h"
#include "durable/record_drain.h"

#define DRAIN_JOBS_MAX 64u /* kept, finished ones dropped oldest first */

struct segments_state;
struct cr_durable_record;
struct cr_buf;

enum job_status { JOB_CREATED, JOB_PLANNING, JOB_RUNNING, JOB_SUCCEEDED, JOB_FAILED, JOB_CANCELED };

struct unit {
    uint32_t id, generation;
    uint32_t source; /* index into job->segments */
    uint32_t tries;  /* failed moves so far (retry entries) */
    uint64_t bytes;
    char target[CR_STORE_NAME_LEN_MAX + 1];
};

struct units {
    struct unit *at;
    uint32_t count, cap;
};

struct job {
    uint64_t id_first, id_second;
    enum job_status status;
    uint64_t created_wall_ms, created_mono_ms, updated_mono_ms;
    char *segments[CR_DRAIN_SEGMENTS_MAX];
    uint32_t segment_count;
    char *targets[CR_DRAIN_SEGMENTS_MAX];
    uint32_t target_count;
    uint32_t max_concurrency;
    uint64_t succeeded, failed, blocked, migrated_bytes;
    struct units active;  /* moves in flight */
    struct units retries; /* units that failed, with their count */
    const char *message;
    char reason[CR_DURABLE_DRAIN_MESSAGE_MAX + 1]; /* a message made at run time */
    /* What its last DRAIN_JOB record said (logged false: none yet). */
    bool logged;
    uint8_t logged_status;
    uint64_t logged_succeeded, logged_failed, logged_bytes;
};

struct segments_drain {
    struct job *jobs[DRAIN_JOBS_MAX];
    uint32_t count;
    uint64_t moves_started, moves_succeeded, bytes_moved;
    struct cr_durable_record *rec; /* scratch for records (segments_drain_durable.c) */
};

bool segments_drain_terminal(const struct job *j);
void segments_drain_job_free(struct job *j);

/* segments_drain_durable.c.  _log appends j's DRAIN_JOB record to this
 * round's log block when it changed since its last one (nothing without
 * --state-dir). */
void segments_drain_log(struct segments_state *st, struct job *j);

#endif
