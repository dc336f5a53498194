/* The segments actor's operation log (docs/durability.md): the round's
 * records to the journal actor, the calls --durability sync holds until
 * their records are on disk, snapshots a slice per round, and the replay of
 * --state-dir at start.  State: segments_internal.h. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/segments_drain.h"
#include "actors/segments_internal.h"
#include "durable/role.h"
#include "core/log.h"
#include "core/store_ssd_park.h"
#include "crescent/error.h"

static void held_append(struct held_list *list, struct cr_master_call *call) {
    call->next = NULL;
    if (list->tail != NULL)
        list->tail->next = call;
    else
        list->head = call;
    list->tail = call;
}

static void held_finish(struct segments_state *st, struct cr_master_call *call) {
    while (call != NULL) {
        struct cr_master_call *next = call->next;
        call->next = NULL;
        segments_finish(st, call);
        call = next;
    }
}

/* Answers the held rounds whose records the journal has synced. */
static void held_release(struct segments_state *st) {
    while (st->groups_count > 0 && st->groups[st->groups_head].lsn <= st->synced_lsn) {
        struct held_group *g = &st->groups[st->groups_head];
        struct cr_master_call *calls = g->head;
        g->head = g->tail = NULL;
        st->groups_head = (st->groups_head + 1) % HELD_GROUPS_MAX;
        st->groups_count--;
        held_finish(st, calls);
    }
}

/* The round's records to the journal; the round's held calls wait for the
 * lsn of its last record. */
void segments_durable_round_end(struct segments_state *st) {
    if (st->peers == NULL) return; /* not wired yet: the feed keeps what it noted */
    uint8_t *block;
    size_t len;
    uint64_t last_lsn;
    if (cr_durable_feed_flush(&st->feed, st->store, st->now_ms, &block, &len, &last_lsn)) {
        struct cr_msg msg = {.type = CR_MSG_DURABLE_APPEND};
        struct cr_msg_durable_append *a = CR_MSG_BODY(&msg, struct cr_msg_durable_append);
        *a = (struct cr_msg_durable_append){.block = block, .len = len, .last_lsn = last_lsn};
        cr_role_note_applied(last_lsn); /* /api/v1/ha: the last record made here */
        struct cr_actor *journal =
            st->peers != NULL ? st->peers->actors[CR_SUBSYSTEM_JOURNAL] : NULL;
        if (journal == NULL || cr_send(journal, &msg) != CR_OK) {
            free(block);
            st->log_blocks_dropped++;
            st->synced_lsn = last_lsn; /* nobody will sync it: do not hold calls forever */
        }
    }
    /* Every record up to feed.next_lsn - 1 was sent: the cut. */
    segments_snapshot_step(st, st->feed.records, &st->snapshot_mark, st->feed.next_lsn - 1);
    if (st->round_held.head == NULL) return;
    uint64_t lsn = st->feed.next_lsn - 1;
    if (st->groups_count == HELD_GROUPS_MAX) { /* wait with the newest group */
        struct held_group *g =
            &st->groups[(st->groups_head + st->groups_count - 1) % HELD_GROUPS_MAX];
        g->tail->next = st->round_held.head;
        g->tail = st->round_held.tail;
        g->lsn = lsn;
    } else {
        st->groups[(st->groups_head + st->groups_count) % HELD_GROUPS_MAX] =
            (struct held_group){.lsn = lsn, .head = st->round_held.head,
                                .tail = st->round_held.tail};
        st->groups_count++;
    }
    st->round_held = (struct held_list){0};
    held_release(st);
}

/* Hands a snapshot block to the journal; false when it is gone (the
 * snapshot is then abandoned: the logs stay whole). */
static bool snapshot_send(struct segments_state *st, uint16_t type, struct cr_buf *buf) {
    struct cr_msg msg = {.type = type};
    struct cr_msg_durable_append *a = CR_MSG_BODY(&msg, struct cr_msg_durable_append);
    size_t len = 0;
    a->block = cr_buf_ok(buf) ? (uint8_t *)cr_buf_take(buf, &len) : NULL;
    a->len = len;
    a->last_lsn = st->snapshot_lsn;
    cr_buf_free(buf);
    if (a->block == NULL && type != CR_MSG_DURABLE_SNAPSHOT_BEGIN) return false;
    if (cr_send(st->peers->actors[CR_SUBSYSTEM_JOURNAL], &msg) == CR_OK) return true;
    free(a->block);
    return false;
}

/* Wakes segments when the next slice is due, if no call does first (a
 * snapshot of an idle store would otherwise move one slice per tick). */
static void snapshot_wake(struct segments_state *st, uint64_t in_ns) {
    if (st->snapshot_step_armed) return;
    struct cr_msg step = {.type = CR_MSG_SEGMENTS_SNAPSHOT_STEP};
    st->snapshot_step_armed = cr_actor_timer_after(st->self, in_ns, &step, NULL) == CR_OK;
}

/* A snapshot's slices, a leader's and a standby's alike, at most one per
 * round and paced (SNAPSHOT_PACE): one begins once `counted_records`
 * passed *mark by snapshot_every, as a fuzzy cut of the store at cut_lsn
 * (objects changed meanwhile are in the log after it, which recovery
 * replays on top). */
void segments_snapshot_step(struct segments_state *st, uint64_t counted_records, uint64_t *mark,
                            uint64_t cut_lsn) {
    assert(mark != NULL);
    if (st->peers == NULL || st->peers->actors[CR_SUBSYSTEM_JOURNAL] == NULL) return;
    const struct cr_runtime *rt = cr_actor_runtime(st->self);
    uint64_t start = cr_runtime_now_ns(rt);
    struct cr_buf buf;
    cr_buf_init(&buf);
    if (!st->snapshot_active) {
        if (st->snapshot_every == 0 || cut_lsn == 0 ||
            counted_records - *mark < st->snapshot_every)
            return;
        st->snapshot_lsn = cut_lsn;
        *mark = counted_records;
        if (!snapshot_send(st, CR_MSG_DURABLE_SNAPSHOT_BEGIN, &buf)) return;
        st->snapshot_active = true;
        st->snapshot_cursor = 0;
        st->snapshot_count = 0;
        st->snapshot_next_ns = 0;
        st->snapshots_begun++;
        cr_durable_feed_snapshot_segments(&st->feed, st->store, st->snapshot_lsn, &buf,
                                          &st->snapshot_count);
        segments_drain_snapshot(st, st->snapshot_lsn, &buf, &st->snapshot_count);
    } else if (start < st->snapshot_next_ns) {
        snapshot_wake(st, st->snapshot_next_ns - start);
        return; /* resting: this round's calls only */
    }
    bool done = cr_durable_feed_snapshot_objects(&st->feed, st->store, st->now_ms,
                                                 st->snapshot_lsn, &st->snapshot_cursor,
                                                 SNAPSHOT_SLICE_OBJECTS, &buf,
                                                 &st->snapshot_count);
    st->snapshot_slices++;
    if (done) cr_durable_feed_snapshot_end(&st->feed, st->snapshot_lsn, st->snapshot_count, &buf);
    if ((buf.len > 0 || done) &&
        !snapshot_send(st, done ? CR_MSG_DURABLE_SNAPSHOT_END : CR_MSG_DURABLE_SNAPSHOT_PART,
                       &buf))
        done = true; /* the journal stopped or no memory: abandoned */
    cr_buf_free(&buf);
    uint64_t end = cr_runtime_now_ns(rt);
    cr_histogram_observe(&st->snapshot_slice_hist, end - start);
    if (end - start > st->snapshot_slice_ns_max) st->snapshot_slice_ns_max = end - start;
    if (done) {
        st->snapshot_active = false;
        return;
    }
    uint64_t rest = (end - start) * SNAPSHOT_PACE;
    st->snapshot_next_ns = end + rest;
    snapshot_wake(st, rest);
}

void segments_durable_synced(struct segments_state *st, const struct cr_msg_durable_synced *m) {
    if (m->lsn > st->synced_lsn) st->synced_lsn = m->lsn;
    held_release(st);
}

/* Replays the state directory's log into the store: on segments' thread
 * before it is reported started, so the clients it restores count as seen
 * on the runtime's clock, and before the journal opens the newest log. */
int segments_durable_start(struct segments_state *st) {
    if (st->durability == CR_DURABILITY_NONE) return CR_OK;
    char err[1024];
    /* The runtime's clock, read now (cr_actor_now_ns is the round's). */
    const struct cr_runtime *rt = cr_actor_runtime(st->self);
    uint64_t t0 = cr_runtime_now_ns(rt);
    int rc = cr_durable_recover(st->state_dir, st->store, t0 / 1000000u, &st->recovery, err,
                                sizeof(err));
    if (rc != CR_OK) {
        CR_ERROR("segments", "--state-dir: cannot restore the store: %s", err);
        fprintf(stderr, "crescentd: --state-dir: cannot restore the store: %s\n", err);
        return rc;
    }
    /* The restored segments' owners count as seen now, after the replay,
     * not when it began: each gets its whole --client-ttl to ping. */
    uint64_t now_ms = cr_runtime_now_ns(rt) / 1000000u;
    uint32_t cursor = 0;
    struct cr_store_segment_view view;
    while (cr_store_segment_next(st->store, &cursor, &view)) {
        (void)cr_store_client_ping(st->store, &view.owner, now_ms, NULL);
        cr_store_client_set_awaiting(st->store, &view.owner); /* until it calls */
        cr_store_ssd_park_know(st->store, view.name); /* its SSD's files need its objects */
    }
    const struct cr_durable_recovery *r = &st->recovery;
    CR_INFO("segments", "restored from %s in %.3f s (read %.3f, replay %.3f of which index %.3f, build %.3f: plan %.3f, claims %.3f on %u thread(s)): "
            "%u log(s), %llu records, %u segments, "
            "%llu objects (%llu dropped: no replica could be placed; %llu replicas dropped)",
            st->state_dir, (double)(cr_runtime_now_ns(rt) - t0) / 1e9, (double)r->read_ns / 1e9,
            (double)r->replay_ns / 1e9, (double)r->index_ns / 1e9,
            (double)r->materialize_ns / 1e9, (double)r->finish_plan_ns / 1e9,
            (double)r->finish_claims_ns / 1e9, r->finish_threads, r->logs,
            (unsigned long long)r->records, r->segments, (unsigned long long)r->objects,
            (unsigned long long)r->objects_dropped, (unsigned long long)r->replicas_dropped);
    rc = cr_durable_feed_init(&st->feed, r->last_lsn + 1,
                              cr_store_get_config(st->store)->max_segments,
                              CR_DATA_SEGMENT_NAME);
    if (rc != CR_OK) return rc;
    st->synced_lsn = r->last_lsn;
    st->feed_on = true;
    return segments_drain_restore(st, now_ms); /* drain jobs, resumed */
}

void segments_durable_hold(struct segments_state *st, struct cr_master_call *call) {
    st->calls_held++;
    held_append(&st->round_held, call);
}

void segments_durable_free(struct segments_state *st) {
    cr_master_call_free_chain(st->round_held.head);
    for (uint32_t i = 0; i < st->groups_count; i++)
        cr_master_call_free_chain(st->groups[(st->groups_head + i) % HELD_GROUPS_MAX].head);
    cr_durable_feed_free(&st->feed);
}
