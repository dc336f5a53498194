/* Drain jobs in the operation log (docs/durability.md, "Drain jobs").
 *
 * A job is logged as a DRAIN_JOB record (durable/record_drain.h) of its
 * whole state when it is created, when a tick changed its status or its
 * counters, and when it ends or is canceled; every snapshot holds one per
 * job kept.  Progress is coarse, one record per job and tick (at most one
 * a second) rather than one per moved object: each move already logs its
 * object's new replicas (an OBJECT_PUT), and what is left to move is read
 * from the store, not from the job; the counters are what the query route
 * reports.  So a drain adds one small record a second to the log whatever
 * its rate, and a crash loses at most the counting of the moves its last
 * tick saw (those objects are on their targets all the same).
 *
 * At start the jobs replayed are restored: a finished one as it was, a
 * running one with its counters, its segments marked draining again, to be
 * resumed by the next tick; one whose segment did not come back FAILED,
 * with that reason (and a record saying so).  Units in flight and retry
 * counts are not logged: the resumed job walks its segments again. */
#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/segments_drain_internal.h"
#include "actors/segments_internal.h"
#include "core/log.h"
#include "core/store_drain.h"
#include "crescent/error.h"
#include "durable/feed.h"
#include "durable/record.h"

_Static_assert(CR_DURABLE_DRAIN_SEGMENTS_MAX == CR_DRAIN_SEGMENTS_MAX,
               "a job's segments fit its record");
_Static_assert(DRAIN_JOBS_MAX == CR_DURABLE_DRAIN_JOBS_MAX, "the replay keeps as many jobs");
_Static_assert(JOB_CANCELED == CR_DURABLE_DRAIN_STATUS_MAX, "statuses as logged");

static struct cr_durable_record *scratch(struct segments_drain *d) {
    if (d->rec == NULL) d->rec = calloc(1, sizeof(*d->rec)); /* zeroed: no key, no replica */
    return d->rec;
}

/* j as a DRAIN_JOB record; false when its names do not fit (refused at
 * create: not seen). */
static bool fill(const struct job *j, struct cr_durable_record *rec) {
    rec->type = CR_DURABLE_DRAIN_JOB;
    struct cr_durable_drain *r = &rec->drain;
    cr_durable_drain_clear(r);
    r->id_first = j->id_first, r->id_second = j->id_second;
    r->status = (uint8_t)j->status;
    r->max_concurrency = j->max_concurrency;
    r->created_wall_ms = j->created_wall_ms;
    r->updated_wall_ms = j->created_wall_ms + (j->updated_mono_ms - j->created_mono_ms);
    r->succeeded = j->succeeded, r->failed = j->failed, r->migrated_bytes = j->migrated_bytes;
    for (uint32_t i = 0; i < j->segment_count; i++)
        if (!cr_durable_drain_add(r, j->segments[i], false)) return false;
    for (uint32_t i = 0; i < j->target_count; i++)
        if (!cr_durable_drain_add(r, j->targets[i], true)) return false;
    snprintf(r->message, sizeof(r->message), "%s", j->message != NULL ? j->message : "");
    return true;
}

void segments_drain_log(struct segments_state *st, struct job *j) {
    assert(st != NULL && j != NULL);
    if (!st->feed_on || st->drain == NULL) return;
    if (j->logged && j->logged_status == (uint8_t)j->status &&
        j->logged_succeeded == j->succeeded && j->logged_failed == j->failed &&
        j->logged_bytes == j->migrated_bytes)
        return;
    struct cr_durable_record *rec = scratch(st->drain);
    if (rec == NULL || !fill(j, rec)) {
        CR_WARN("segments", "drain job %" PRIu64 "-%" PRIu64 ": its record was not logged (%s)",
                j->id_first, j->id_second, rec == NULL ? "no memory" : "names too long");
        return;
    }
    cr_durable_feed_append(&st->feed, rec);
    j->logged = true;
    j->logged_status = (uint8_t)j->status;
    j->logged_succeeded = j->succeeded, j->logged_failed = j->failed;
    j->logged_bytes = j->migrated_bytes;
}

void segments_drain_snapshot(struct segments_state *st, uint64_t lsn, struct cr_buf *out,
                             uint64_t *count) {
    assert(st != NULL && out != NULL && count != NULL);
    struct segments_drain *d = st->drain;
    struct cr_durable_record *rec = d != NULL && d->count > 0 ? scratch(d) : NULL;
    for (uint32_t i = 0; rec != NULL && i < d->count; i++) {
        if (!fill(d->jobs[i], rec)) continue;
        rec->lsn = lsn;
        if (cr_durable_encode(rec, out) == CR_OK) (*count)++;
    }
}

/* A job from its record; NULL when out of memory. */
static struct job *job_from(const struct cr_durable_drain *r, uint64_t now_ms) {
    struct job *j = calloc(1, sizeof(*j));
    if (j == NULL) return NULL;
    bool ok = true;
    uint32_t cursor = 0;
    for (uint32_t i = 0; i < r->segment_count + r->target_count; i++) {
        char *name = strdup(cr_durable_drain_next(r, &cursor));
        ok = ok && name != NULL;
        if (i < r->segment_count)
            j->segments[j->segment_count++] = name;
        else
            j->targets[j->target_count++] = name;
    }
    if (!ok) {
        segments_drain_job_free(j);
        return NULL;
    }
    j->id_first = r->id_first, j->id_second = r->id_second;
    j->status = (enum job_status)r->status;
    j->max_concurrency = r->max_concurrency;
    j->succeeded = r->succeeded, j->failed = r->failed, j->migrated_bytes = r->migrated_bytes;
    /* Its age as logged; the monotonic clock is this process's (the
     * difference is what counts, modulo 2^64). */
    j->created_wall_ms = r->created_wall_ms;
    j->updated_mono_ms = now_ms;
    j->created_mono_ms = now_ms - (r->updated_wall_ms - r->created_wall_ms);
    snprintf(j->reason, sizeof(j->reason), "%s", r->message);
    j->message = j->reason;
    j->logged = true; /* what it says is on disk */
    j->logged_status = r->status;
    j->logged_succeeded = r->succeeded, j->logged_failed = r->failed;
    j->logged_bytes = r->migrated_bytes;
    return j;
}

/* A restored running job: its segments draining again, or FAILED when one
 * of them did not come back. */
static void resume(struct segments_state *st, struct job *j) {
    bool draining;
    for (uint32_t i = 0; i < j->segment_count; i++) {
        if (cr_store_segment_draining(st->store, j->segments[i], &draining)) continue;
        j->status = JOB_FAILED;
        snprintf(j->reason, sizeof(j->reason),
                 "Drain job failed: segment %.100s did not come back after the restart",
                 j->segments[i]);
        CR_WARN("segments", "drain job %" PRIu64 "-%" PRIu64 " failed: segment %s is not in "
                "the restored store", j->id_first, j->id_second, j->segments[i]);
        segments_drain_log(st, j);
        return;
    }
    for (uint32_t i = 0; i < j->segment_count; i++)
        (void)cr_store_segment_set_draining(st->store, j->segments[i], true);
    CR_INFO("segments", "drain job %" PRIu64 "-%" PRIu64 " resumed: %" PRIu64 " object(s), %"
            PRIu64 " bytes moved before the restart", j->id_first, j->id_second, j->succeeded,
            j->migrated_bytes);
}

int segments_drain_restore(struct segments_state *st, uint64_t now_ms) {
    assert(st != NULL);
    struct cr_durable_drain_jobs *set = &st->recovery.drain_jobs;
    if (set->count == 0) return CR_OK;
    if (st->drain == NULL) st->drain = segments_drain_new();
    int rc = st->drain != NULL ? CR_OK : CR_ERR_NOMEM;
    for (uint32_t i = 0; rc == CR_OK && i < set->count; i++) {
        struct job *j = job_from(set->at[i], now_ms);
        if (j == NULL) {
            rc = CR_ERR_NOMEM;
            break;
        }
        st->drain->jobs[st->drain->count++] = j; /* set->count <= DRAIN_JOBS_MAX */
        if (!segments_drain_terminal(j)) resume(st, j);
    }
    if (rc != CR_OK) {
        CR_ERROR("segments", "--state-dir: no memory to restore %u drain job(s)", set->count);
        fprintf(stderr, "crescentd: --state-dir: no memory to restore the drain jobs\n");
    }
    cr_durable_drain_jobs_free(set);
    return rc;
}
