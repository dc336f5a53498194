/* Drain jobs (Mooncake's /api/v1/drain_jobs, segments_drain.c): the
 * segments actor empties segments by moving their objects with move tasks,
 * then unmounts them. */
#ifndef CRESCENT_ACTORS_SEGMENTS_DRAIN_H
#define CRESCENT_ACTORS_SEGMENTS_DRAIN_H

#include <stdbool.h>
#include <stdint.h>

#include "core/store.h"

#define CR_DRAIN_SEGMENTS_MAX 64u /* segments (and targets) one job names */

/* A request, parsed on the HTTP worker (the reference's
 * CreateDrainJobRequest, or a job id for query/cancel). */
struct cr_drain_request {
    const char *segments[CR_DRAIN_SEGMENTS_MAX];
    uint32_t segment_count;
    const char *targets[CR_DRAIN_SEGMENTS_MAX];
    uint32_t target_count;
    uint32_t max_concurrency;
    uint64_t id_first, id_second; /* query/cancel: Mooncake's "FIRST-SECOND" */
};

struct segments_drain;
struct segments_state;
struct cr_master_admin_query;

struct segments_drain *segments_drain_new(void);
void segments_drain_free(struct segments_drain *d);

/* The create/query/cancel answer, in the reference's JSON (with
 * error_code and error_message on a refusal), malloc'd into *json_out. */
int segments_drain_admin(struct segments_state *st, const struct cr_master_admin_query *q,
                         char **json_out);

/* Once a second: moves, progress, completion.  Returns how many segments
 * it unmounted (finished drains), for the caller to log and tell tasks. */
uint32_t segments_drain_tick(struct segments_state *st);

/* The operation log's side (segments_drain_durable.c): _restore takes the
 * jobs recovery replayed (st->recovery.drain_jobs) and resumes the running
 * ones, at start once the feed is on; _snapshot appends a DRAIN_JOB record
 * (lsn `lsn`) per job kept to a snapshot, adding them to *count. */
struct cr_buf;
int segments_drain_restore(struct segments_state *st, uint64_t now_ms);
void segments_drain_snapshot(struct segments_state *st, uint64_t lsn, struct cr_buf *out,
                             uint64_t *count);

/* Stats: jobs running, finished, objects moved, bytes moved. */
void segments_drain_counts(const struct segments_drain *d, uint64_t out[4]);

#endif
