/* Drain jobs: Mooncake's /api/v1/drain_jobs (its MasterService::CreateDrainJob,
 * ProcessDrainJobs at kvcache-ai/Mooncake 3b5a594), on the segments actor.
 *
 * A job marks its segments draining (the store allocates nothing new on
 * them), then once a second (segments' tick):
 *   1. looks at its moves in flight: a move whose object left the source
 *      and sits on its target succeeded (its bytes count as migrated); one
 *      whose object went away or whose source stayed failed (a unit is
 *      tried up to 3 times, as the reference's kMaxDrainUnitRetries);
 *   2. with no move in flight and no object left on its segments, it
 *      SUCCEEDED and unmounts them (the reference marks them DRAINED for
 *      their owner to unmount); when every object left has failed 3 times,
 *      it FAILED and its segments take allocations again;
 *   3. otherwise it starts moves, up to max_concurrency in flight: each
 *      movable object (complete, unleased, not hard-pinned, no task) goes to
 *      the least used segment (among target_segments when given) that is
 *      not draining, does not hold it and has room, as a move task the
 *      source segment's owner runs (src/actors/tasks.c).  Objects it cannot
 *      move now are blocked_units.
 * A unit is (object, source segment).  The walk is over every object, per
 * job and tick, as the reference's: an admin operation, not a hot path. */
#include "actors/segments_drain.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <jansson.h>

#include "actors/segments_drain_internal.h"
#include "actors/segments_internal.h"
#include "actors/subsystems.h"
#include "actors/task_store.h"
#include "core/log.h"
#include "core/store_drain.h"
#include "crescent/error.h"
#include "durable/role.h"
#include "msgs/task_msgs.h"

static const char *const STATUS_NAMES[] = {"CREATED",   "PLANNING", "RUNNING",
                                           "SUCCEEDED", "FAILED",   "CANCELED"};

#define DRAIN_UNIT_RETRIES 3u    /* the reference's kMaxDrainUnitRetries */
#define DRAIN_CONCURRENCY_MAX 1024u

/* Mooncake's ErrorCode values. */
#define MC_INTERNAL_ERROR (-1)
#define MC_SEGMENT_NOT_FOUND (-101)
#define MC_INVALID_PARAMS (-600)
#define MC_UNAVAILABLE_IN_CURRENT_STATUS (-1010)
#define MC_JOB_NOT_FOUND (-1402)

struct segments_drain *segments_drain_new(void) { return calloc(1, sizeof(struct segments_drain)); }

void segments_drain_job_free(struct job *j) {
    if (j == NULL) return;
    for (uint32_t i = 0; i < j->segment_count; i++) free(j->segments[i]);
    for (uint32_t i = 0; i < j->target_count; i++) free(j->targets[i]);
    free(j->active.at);
    free(j->retries.at);
    free(j);
}

void segments_drain_free(struct segments_drain *d) {
    if (d == NULL) return;
    for (uint32_t i = 0; i < d->count; i++) segments_drain_job_free(d->jobs[i]);
    free(d->rec);
    free(d);
}

bool segments_drain_terminal(const struct job *j) { return j->status >= JOB_SUCCEEDED; }

static bool terminal(const struct job *j) { return segments_drain_terminal(j); }

void segments_drain_counts(const struct segments_drain *d, uint64_t out[4]) {
    uint64_t running = 0;
    for (uint32_t i = 0; d != NULL && i < d->count; i++) running += !terminal(d->jobs[i]);
    out[0] = running;
    out[1] = d != NULL ? d->count - running : 0;
    out[2] = d != NULL ? d->moves_succeeded : 0;
    out[3] = d != NULL ? d->bytes_moved : 0;
}

/* ---- units ------------------------------------------------------------- */

static struct unit *units_find(struct units *u, uint32_t id, uint32_t generation, uint32_t source) {
    for (uint32_t i = 0; i < u->count; i++)
        if (u->at[i].id == id && u->at[i].generation == generation && u->at[i].source == source)
            return &u->at[i];
    return NULL;
}

static struct unit *units_add(struct units *u, const struct unit *v) {
    if (u->count == u->cap) {
        uint32_t cap = u->cap ? 2 * u->cap : 16;
        struct unit *at = realloc(u->at, cap * sizeof(*at));
        if (at == NULL) return NULL;
        u->at = at, u->cap = cap;
    }
    u->at[u->count] = *v;
    return &u->at[u->count++];
}

static bool unit_terminal(struct job *j, uint32_t id, uint32_t generation, uint32_t source) {
    const struct unit *r = units_find(&j->retries, id, generation, source);
    return r != NULL && r->tries >= DRAIN_UNIT_RETRIES;
}

/* A failed move of unit v: counted, and retried until DRAIN_UNIT_RETRIES. */
static void unit_failed(struct job *j, const struct unit *v) {
    j->failed++;
    struct unit *r = units_find(&j->retries, v->id, v->generation, v->source);
    if (r == NULL) {
        struct unit fresh = *v;
        fresh.tries = 0;
        r = units_add(&j->retries, &fresh);
    }
    if (r != NULL) r->tries++;
}

/* ---- the tick ----------------------------------------------------------- */

/* Step 1: the moves in flight. */
static void refresh(struct segments_state *st, struct segments_drain *d, struct job *j) {
    for (uint32_t i = 0; i < j->active.count;) {
        struct unit *u = &j->active.at[i];
        uint64_t size;
        bool on_target;
        enum cr_store_drain_state s = cr_store_drain_state_of(
            st->store, u->id, u->generation, j->segments[u->source], u->target, st->now_ms, &size,
            &on_target);
        bool keep = s == CR_DRAIN_BUSY || (s == CR_DRAIN_BLOCKED && on_target);
        if (keep) { /* still moving, or moved and waiting for a reader's lease */
            i++;
            continue;
        }
        if (s == CR_DRAIN_DONE && size > 0) {
            j->succeeded++, j->migrated_bytes += u->bytes;
            d->moves_succeeded++, d->bytes_moved += u->bytes;
        } else {
            unit_failed(j, u);
        }
        j->active.at[i] = j->active.at[--j->active.count];
    }
}

static void set_draining(struct segments_state *st, struct job *j, bool on) {
    for (uint32_t i = 0; i < j->segment_count; i++)
        (void)cr_store_segment_set_draining(st->store, j->segments[i], on);
}

/* Step 2: true when the job ended (unmounting its segments when it
 * succeeded: counted into *unmounted). */
static bool maybe_complete(struct segments_state *st, struct job *j, uint32_t *unmounted) {
    if (j->active.count > 0) return false;
    bool remaining = false, all_terminal = true;
    for (uint32_t s = 0; s < j->segment_count; s++) {
        uint32_t cursor = 0, id, gen;
        while (cr_store_drain_next(st->store, j->segments[s], &cursor, &id, &gen)) {
            remaining = true;
            if (!unit_terminal(j, id, gen, s)) all_terminal = false;
        }
    }
    if (!remaining) {
        for (uint32_t s = 0; s < j->segment_count; s++) {
            uint64_t freed = 0;
            if (cr_store_unmount_segment(st->store, NULL, j->segments[s], &freed) == CR_OK)
                (*unmounted)++;
        }
        j->status = JOB_SUCCEEDED;
        j->message = "Drain job finished successfully";
        CR_INFO("segments", "drain job %" PRIu64 "-%" PRIu64 " finished: %" PRIu64
                " object(s), %" PRIu64 " bytes moved; %u segment(s) unmounted",
                j->id_first, j->id_second, j->succeeded, j->migrated_bytes, j->segment_count);
    } else if (all_terminal) {
        set_draining(st, j, false);
        j->status = JOB_FAILED;
        j->message = "Drain job failed: unrecoverable units remain";
        CR_WARN("segments", "drain job %" PRIu64 "-%" PRIu64 " failed: objects left on its "
                "segments could not be moved in %u tries each; the segments take allocations "
                "again", j->id_first, j->id_second, DRAIN_UNIT_RETRIES);
    } else {
        return false;
    }
    j->updated_mono_ms = st->now_ms;
    return true;
}

/* A move task for unit v, handed to tasks as if CreateMoveTask had come
 * (its answer comes back to segments and is dropped). */
static int start_move(struct segments_state *st, struct job *j, struct unit *v) {
    struct cr_store_key key;
    if (!cr_store_drain_key(st->store, v->id, v->generation, &key)) return CR_ERR_OBJECT_NOT_FOUND;
    struct cr_task_detail *detail = NULL;
    int rc = cr_task_store_create_move(st->store, st->now_ms, &key, j->segments[v->source],
                                       v->target, &detail);
    if (rc != CR_OK) return rc;
    struct cr_master_call *call = calloc(1, sizeof(*call));
    struct cr_msg fwd = {.type = CR_MSG_TASK_CREATE};
    struct cr_msg_task_create *body = CR_MSG_BODY(&fwd, struct cr_msg_task_create);
    if (call != NULL) {
        call->method = CRESCENT__MASTER__METHOD__CREATE_MOVE_TASK;
        call->reply_to = st->self;
        body->call = call, body->detail = detail;
        if (cr_send_try(st->peers->actors[CR_SUBSYSTEM_TASKS], &fwd) == CR_OK) return CR_OK;
    }
    cr_store_task_rollback(st->store, &detail->ref);
    free(detail);
    free(call);
    return CR_ERR_AGAIN;
}

/* Step 3: new moves, up to max_concurrency in flight. */
static void schedule(struct segments_state *st, struct segments_drain *d, struct job *j) {
    if (j->status == JOB_CREATED) j->status = JOB_PLANNING;
    uint64_t blocked = 0;
    for (uint32_t s = 0; s < j->segment_count; s++) {
        uint32_t cursor = 0, id, gen;
        while (cr_store_drain_next(st->store, j->segments[s], &cursor, &id, &gen)) {
            if (units_find(&j->active, id, gen, s) != NULL || unit_terminal(j, id, gen, s))
                continue;
            uint64_t size;
            bool on_target;
            enum cr_store_drain_state state = cr_store_drain_state_of(
                st->store, id, gen, j->segments[s], NULL, st->now_ms, &size, &on_target);
            const char *target =
                state == CR_DRAIN_MOVABLE
                    ? cr_store_drain_target(st->store, id, j->segments[s],
                                            (const char *const *)j->targets, j->target_count)
                    : NULL;
            if (target == NULL) {
                blocked++;
                continue;
            }
            if (j->active.count >= j->max_concurrency) continue;
            struct unit v = {.id = id, .generation = gen, .source = s, .bytes = size};
            snprintf(v.target, sizeof(v.target), "%s", target);
            int rc = start_move(st, j, &v);
            if (rc == CR_OK && units_add(&j->active, &v) != NULL) {
                d->moves_started++;
            } else if (rc == CR_OK || rc == CR_ERR_NO_AVAILABLE_HANDLE || rc == CR_ERR_AGAIN ||
                       rc == CR_ERR_INVALID_PARAMS) {
                blocked++; /* (a started move we could not record is watched no more) */
            } else {
                unit_failed(j, &v);
            }
        }
    }
    j->blocked = blocked;
    j->status = JOB_RUNNING;
    j->message = "Drain job running";
    j->updated_mono_ms = st->now_ms;
}

/* A running job one of whose segments is no longer mounted (unmounted by
 * hand, or its owner gone: after a restart, an owner that did not come
 * back within --client-ttl) FAILED, saying which: its objects went with it. */
static bool segment_gone(struct segments_state *st, struct job *j) {
    bool draining;
    for (uint32_t i = 0; i < j->segment_count; i++) {
        if (cr_store_segment_draining(st->store, j->segments[i], &draining)) continue;
        set_draining(st, j, false);
        j->status = JOB_FAILED;
        snprintf(j->reason, sizeof(j->reason),
                 "Drain job failed: segment %.100s is no longer mounted", j->segments[i]);
        j->message = j->reason;
        j->updated_mono_ms = st->now_ms;
        CR_WARN("segments", "drain job %" PRIu64 "-%" PRIu64 " failed: segment %s was unmounted",
                j->id_first, j->id_second, j->segments[i]);
        return true;
    }
    return false;
}

uint32_t segments_drain_tick(struct segments_state *st) {
    assert(st != NULL);
    struct segments_drain *d = st->drain;
    uint32_t unmounted = 0;
    /* A standby's leader drains; so does a promoted standby's next tick. */
    if (d == NULL || st->standby || st->peers == NULL || !cr_role_accepts_writes()) return 0;
    for (uint32_t i = 0; i < d->count; i++) {
        struct job *j = d->jobs[i];
        if (terminal(j)) continue;
        refresh(st, d, j);
        if (!segment_gone(st, j) && !maybe_complete(st, j, &unmounted)) schedule(st, d, j);
        segments_drain_log(st, j); /* when its status or counters changed */
    }
    return unmounted;
}

/* ---- create, query, cancel --------------------------------------------- */

static json_t *error_doc(int code, const char *message) {
    return json_pack("{s:b, s:i, s:s}", "success", 0, "error_code", code, "error_message",
                     message);
}

static struct job *job_find(struct segments_drain *d, uint64_t first, uint64_t second) {
    for (uint32_t i = 0; i < d->count; i++)
        if (d->jobs[i]->id_first == first && d->jobs[i]->id_second == second) return d->jobs[i];
    return NULL;
}

static bool named_in(char *const *list, uint32_t n, const char *name) {
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(list[i], name) == 0) return true;
    return false;
}

/* Whether the job's names fit its DRAIN_JOB record (record_drain.h): about
 * 12 KB of them, which 64 segments of 190-byte names fill. */
static bool names_fit(const struct cr_drain_request *r) {
    size_t bytes = 0;
    for (uint32_t i = 0; i < r->segment_count; i++) bytes += strlen(r->segments[i]) + 1;
    for (uint32_t i = 0; i < r->target_count; i++) bytes += strlen(r->targets[i]) + 1;
    return bytes <= CR_DURABLE_DRAIN_NAMES_MAX;
}

/* The reference's ValidateDrainRequestLocked, in its order. */
static int validate(const cr_store *store, const struct cr_drain_request *r) {
    if (r->segment_count == 0 || r->max_concurrency == 0) return MC_INVALID_PARAMS;
    for (uint32_t i = 0; i < r->segment_count; i++)
        for (uint32_t k = 0; k < i; k++)
            if (strcmp(r->segments[i], r->segments[k]) == 0) return MC_INVALID_PARAMS;
    bool draining;
    for (uint32_t i = 0; i < r->segment_count; i++) {
        if (!cr_store_segment_draining(store, r->segments[i], &draining))
            return MC_SEGMENT_NOT_FOUND;
        if (draining) return MC_UNAVAILABLE_IN_CURRENT_STATUS;
    }
    if (!names_fit(r)) return MC_INVALID_PARAMS;
    for (uint32_t i = 0; i < r->target_count; i++) {
        if (named_in((char *const *)r->segments, r->segment_count, r->targets[i]))
            return MC_INVALID_PARAMS;
        if (!cr_store_segment_draining(store, r->targets[i], &draining)) return MC_SEGMENT_NOT_FOUND;
        if (draining) return MC_UNAVAILABLE_IN_CURRENT_STATUS;
    }
    return 0;
}

static const char *code_name(int code) {
    switch (code) {
    case MC_SEGMENT_NOT_FOUND: return "SEGMENT_NOT_FOUND";
    case MC_INVALID_PARAMS: return "INVALID_PARAMS";
    case MC_UNAVAILABLE_IN_CURRENT_STATUS: return "UNAVAILABLE_IN_CURRENT_STATUS";
    case MC_JOB_NOT_FOUND: return "JOB_NOT_FOUND";
    default: return "INTERNAL_ERROR";
    }
}

/* Room for one more job: the oldest finished one goes when all are taken. */
static bool make_room(struct segments_drain *d) {
    if (d->count < DRAIN_JOBS_MAX) return true;
    for (uint32_t i = 0; i < d->count; i++) {
        if (!terminal(d->jobs[i])) continue;
        segments_drain_job_free(d->jobs[i]);
        memmove(&d->jobs[i], &d->jobs[i + 1], (d->count - i - 1) * sizeof(d->jobs[0]));
        d->count--;
        return true;
    }
    return false;
}

static char *dup_or_null(const char *s, bool *ok) {
    char *copy = strdup(s);
    *ok = *ok && copy != NULL;
    return copy;
}

static json_t *create(struct segments_state *st, const struct cr_master_admin_query *q) {
    const struct cr_drain_request *r = q->drain;
    int code = validate(st->store, r);
    if (code != 0) return error_doc(code, code_name(code));
    struct segments_drain *d = st->drain;
    struct job *j = make_room(d) ? calloc(1, sizeof(*j)) : NULL;
    if (j == NULL)
        return error_doc(MC_INTERNAL_ERROR, "64 drain jobs are running: wait for one to end");
    bool ok = true;
    for (uint32_t i = 0; i < r->segment_count; i++) j->segments[i] = dup_or_null(r->segments[i], &ok);
    for (uint32_t i = 0; i < r->target_count; i++) j->targets[i] = dup_or_null(r->targets[i], &ok);
    j->segment_count = r->segment_count, j->target_count = r->target_count;
    uint64_t id[2];
    ok = ok && getrandom(id, sizeof(id), 0) == (ssize_t)sizeof(id);
    if (!ok) {
        segments_drain_job_free(j);
        return error_doc(MC_INTERNAL_ERROR, "out of memory or entropy creating the job");
    }
    j->id_first = id[0], j->id_second = id[1];
    j->max_concurrency = r->max_concurrency < DRAIN_CONCURRENCY_MAX ? r->max_concurrency
                                                                     : DRAIN_CONCURRENCY_MAX;
    j->status = JOB_CREATED;
    j->created_wall_ms = q->wall_now_ms;
    j->created_mono_ms = j->updated_mono_ms = st->now_ms;
    j->message = "Drain job created";
    set_draining(st, j, true);
    d->jobs[d->count++] = j;
    segments_drain_log(st, j);
    char text[48];
    snprintf(text, sizeof(text), "%" PRIu64 "-%" PRIu64, j->id_first, j->id_second);
    CR_INFO("segments", "drain job %s created: %u segment(s), %u move(s) at a time", text,
            j->segment_count, j->max_concurrency);
    return json_pack("{s:b, s:s, s:s, s:i, s:s}", "success", 1, "job_id", text, "status",
                     "CREATED", "error_code", 0, "error_message", "");
}

static json_t *query(struct segments_state *st, struct job *j) {
    char text[48];
    snprintf(text, sizeof(text), "%" PRIu64 "-%" PRIu64, j->id_first, j->id_second);
    json_t *segments = json_array();
    for (uint32_t i = 0; i < j->segment_count; i++)
        json_array_append_new(segments, json_string(j->segments[i]));
    (void)st;
    return json_pack("{s:b, s:s, s:i, s:s, s:i, s:s, s:I, s:I, s:o, s:I, s:I, s:I, s:I, s:I, "
                     "s:s, s:i, s:s}",
                     "success", 1, "job_id", text, "type", 0, "type_name", "DRAIN", "status",
                     (int)j->status, "status_name", STATUS_NAMES[j->status],
                     "created_at_ms_epoch", (json_int_t)j->created_wall_ms,
                     "last_updated_at_ms_epoch",
                     (json_int_t)(j->created_wall_ms + (j->updated_mono_ms - j->created_mono_ms)),
                     "segments", segments, "succeeded_units", (json_int_t)j->succeeded,
                     "failed_units", (json_int_t)j->failed, "blocked_units",
                     (json_int_t)j->blocked, "active_units", (json_int_t)j->active.count,
                     "migrated_bytes", (json_int_t)j->migrated_bytes, "message", j->message,
                     "error_code", 0, "error_message", "");
}

static json_t *cancel(struct segments_state *st, struct job *j) {
    if (terminal(j) || j->active.count > 0)
        return error_doc(MC_UNAVAILABLE_IN_CURRENT_STATUS, "UNAVAILABLE_IN_CURRENT_STATUS");
    j->status = JOB_CANCELED;
    j->message = "Drain job canceled";
    j->updated_mono_ms = st->now_ms;
    set_draining(st, j, false);
    segments_drain_log(st, j);
    char text[48];
    snprintf(text, sizeof(text), "%" PRIu64 "-%" PRIu64, j->id_first, j->id_second);
    return json_pack("{s:b, s:s, s:s, s:i, s:s}", "success", 1, "job_id", text, "status",
                     "CANCELED", "error_code", 0, "error_message", "");
}

int segments_drain_admin(struct segments_state *st, const struct cr_master_admin_query *q,
                         char **json_out) {
    assert(st != NULL && q != NULL && q->drain != NULL && json_out != NULL);
    *json_out = NULL;
    if (st->drain == NULL) st->drain = segments_drain_new(); /* at the first request */
    if (st->drain == NULL) return CR_ERR_NOMEM;
    json_t *doc;
    if (q->kind == CR_MASTER_ADMIN_DRAIN_CREATE) {
        doc = create(st, q);
    } else {
        struct job *j = job_find(st->drain, q->drain->id_first, q->drain->id_second);
        doc = j == NULL ? error_doc(MC_JOB_NOT_FOUND, "JOB_NOT_FOUND")
              : q->kind == CR_MASTER_ADMIN_DRAIN_CANCEL ? cancel(st, j)
                                                        : query(st, j);
    }
    *json_out = doc != NULL ? json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(doc);
    return *json_out != NULL ? CR_OK : CR_ERR_NOMEM;
}
