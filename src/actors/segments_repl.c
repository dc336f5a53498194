/* The segments actor's side of replication (docs/durability.md,
 * "Replication"): a master that does not lead now answers mutating calls
 * "not the leader" and serves the rest.  State: segments_internal.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/segments_internal.h"
#include "core/log.h"
#include "core/store_ssd_park.h"
#include "durable/role.h"

/* The calls that change the store or its tasks.  Ping is not one (a store
 * server pings whoever it knows; a standby forgets nothing by it), nor are
 * the reads and FetchTasks/QueryTask. */
bool segments_call_mutates(uint16_t method) {
    switch (method) {
    case CRESCENT__MASTER__METHOD__MOUNT_SEGMENT:
    case CRESCENT__MASTER__METHOD__REMOUNT_SEGMENT:
    case CRESCENT__MASTER__METHOD__UNMOUNT_SEGMENT:
    case CRESCENT__MASTER__METHOD__PUT_START:
    case CRESCENT__MASTER__METHOD__PUT_END:
    case CRESCENT__MASTER__METHOD__PUT_REVOKE:
    case CRESCENT__MASTER__METHOD__BATCH_PUT_START:
    case CRESCENT__MASTER__METHOD__BATCH_PUT_END:
    case CRESCENT__MASTER__METHOD__BATCH_PUT_REVOKE:
    case CRESCENT__MASTER__METHOD__REMOVE:
    case CRESCENT__MASTER__METHOD__BATCH_REMOVE:
    case CRESCENT__MASTER__METHOD__REMOVE_BY_REGEX:
    case CRESCENT__MASTER__METHOD__REMOVE_ALL:
    case CRESCENT__MASTER__METHOD__BATCH_REPLICA_CLEAR:
    case CRESCENT__MASTER__METHOD__CREATE_COPY_TASK:
    case CRESCENT__MASTER__METHOD__CREATE_MOVE_TASK:
    case CRESCENT__MASTER__METHOD__MARK_TASK_TO_COMPLETE:
    case CRESCENT__MASTER__METHOD__LOCAL_DISK_REPORT: return true;
    default: return false;
    }
}

bool segments_repl_refuse(struct segments_state *st, struct cr_master_call *call,
                          struct cr_msg *ask_msg) {
    if (cr_role_accepts_writes() || !segments_call_mutates(call->method)) return false;
    const struct cr_rpc_method *m = cr_rpc_method_find(call->method);
    char why[CR_ROLE_ADDR_MAX + 128];
    cr_role_refusal(why, sizeof(why));
    st->calls++;
    st->not_leader_refusals++;
    call->status = CR_OK; /* the transport carried it; the answer is the refusal */
    if (m == NULL || cr_rpc_pack_status(m->response, CR_ROLE_NOT_LEADER_STATUS, why,
                                        &call->reply, &call->reply_len) != CR_OK)
        cr_rpc_reply_nomem(call);
    if (ask_msg != NULL) {
        cr_reply(ask_msg, call->status);
        return true;
    }
    if (call->reply_to == NULL) {
        st->replies_dropped++;
        cr_master_call_free(call);
        return true;
    }
    segments_finish(st, call);
    return true;
}

void segments_repl_apply(struct segments_state *st, struct cr_msg_durable_append *a) {
    char err[512];
    uint64_t last = 0;
    if (!st->standby) {
        /* Promoted meanwhile: the journal hands nothing after the promotion. */
        free(a->block);
        return;
    }
    int rc = cr_durable_apply_block(st->store, a->block, a->len, st->now_ms, &st->repl_counts,
                                    &last, err, sizeof(err));
    free(a->block);
    st->repl_blocks_applied++;
    if (rc != CR_OK) {
        st->repl_apply_errors++;
        CR_ERROR("segments", "replication: a record up to lsn %llu was not applied: %s (the "
                 "standby's log has it: a restart applies it)", (unsigned long long)a->last_lsn,
                 err);
    }
    if (a->last_lsn > st->repl_applied_lsn) st->repl_applied_lsn = a->last_lsn;
    cr_role_note_applied(st->repl_applied_lsn);
}

/* A standby starting over (docs/ha.md, "A former leader comes back"): its
 * store held records its leader never had, so all of it goes; the leader's
 * snapshot or whole log comes next and builds it again.  crescentd's own
 * segment (not logged) stays mounted; objects on it go too. */
void segments_repl_reset(struct segments_state *st) {
    uint32_t n = 0;
    uint64_t freed = 0;
    for (;;) { /* one at a time: unmounting changes what the cursor walks */
        uint32_t cursor = 0;
        struct cr_store_segment_view v;
        char name[CR_STORE_NAME_LEN_MAX + 1] = "";
        while (name[0] == '\0' && cr_store_segment_next(st->store, &cursor, &v))
            if (strcmp(v.name, st->feed.volatile_segment) != 0)
                snprintf(name, sizeof(name), "%s", v.name);
        if (name[0] == '\0' || cr_store_unmount_segment(st->store, NULL, name, &freed) != CR_OK)
            break;
        n++;
    }
    uint64_t removed = cr_store_remove_all(st->store, NULL, true, st->now_ms);
    st->snapshot_active = false; /* of the state dropped: the journal abandoned it */
    st->repl_snapshot_mark = st->repl_counts.records;
    st->repl_applied_lsn = 0;
    cr_role_note_applied(0);
    /* The journal ignored this store's snapshot messages since its start
     * over; what follows is of the new state. */
    struct cr_msg done = {.type = CR_MSG_REPL_RESET_DONE};
    if (st->peers == NULL || st->peers->actors[CR_SUBSYSTEM_JOURNAL] == NULL ||
        cr_send(st->peers->actors[CR_SUBSYSTEM_JOURNAL], &done) != CR_OK)
        CR_WARN("segments", "replication: the journal took no reset notice (stopping?): this "
                "standby takes no snapshot of its own until it restarts");
    CR_WARN("segments", "replication: store emptied to start over from the leader (%u "
            "segments, %llu objects dropped)", n, (unsigned long long)(freed + removed));
}

/* A standby's log would grow until it is promoted, and its restart replay
 * all of it: it takes snapshots of its own, the same fuzzy cut as a
 * leader's (segments_snapshot_step), at the last record it applied.  The
 * journal may hold records after that one (a busy stream): it keeps them in
 * the log it cuts and starts the next log after them (journal.c).  A
 * snapshot a leader began before it stepped down goes on here. */
void segments_repl_snapshot_step(struct segments_state *st) {
    segments_snapshot_step(st, st->repl_counts.records, &st->repl_snapshot_mark,
                           st->repl_applied_lsn);
}

/* Every restored segment's owner counts as seen now and awaits its call,
 * as after a restart (docs/durability.md): it has --client-ttl to find the
 * new leader. */
static void owners_await(struct segments_state *st) {
    uint32_t cursor = 0;
    struct cr_store_segment_view v;
    while (cr_store_segment_next(st->store, &cursor, &v)) {
        (void)cr_store_client_ping(st->store, &v.owner, st->now_ms, NULL);
        cr_store_client_set_awaiting(st->store, &v.owner);
        cr_store_ssd_park_know(st->store, v.name); /* its SSD's files need its objects */
    }
}

void segments_repl_role(struct segments_state *st, const struct cr_msg_repl_role *m) {
    if (m->standby) {
        /* Stepped down: what this round changed still goes to the log. */
        if (st->feed_on) segments_durable_round_end(st);
        st->standby = true;
        CR_INFO("segments", "standby from lsn %llu: mutating calls are refused",
                (unsigned long long)m->last_lsn);
        return;
    }
    /* Promoted: every record received is applied (the journal's messages
     * come in order); the log goes on after the last. */
    st->standby = false;
    st->feed.next_lsn = m->last_lsn + 1;
    st->feed.segments_dirty = true; /* the known segments are the recovered ones */
    if (m->last_lsn > st->synced_lsn) st->synced_lsn = m->last_lsn;
    st->repl_applied_lsn = m->last_lsn;
    owners_await(st);
    cr_role_note_applied(m->last_lsn);
    cr_role_set(CR_ROLE_LEADER, m->term, "");
    CR_INFO("segments", "leading at term %llu from lsn %llu", (unsigned long long)m->term,
            (unsigned long long)m->last_lsn);
}

static void add(struct cr_actor_stats *out, const char *name, uint64_t value) {
    if (out->extra_count >= CR_ACTOR_STATS_EXTRA_MAX) return;
    out->extra[out->extra_count].name = name;
    out->extra[out->extra_count].value = value;
    out->extra_count++;
}

void segments_repl_stats(struct segments_state *st, struct cr_actor_stats *out) {
    add(out, "repl_applied_lsn", st->repl_applied_lsn);
    add(out, "repl_blocks_applied_total", st->repl_blocks_applied);
    add(out, "repl_records_applied_total", st->repl_counts.records);
    add(out, "repl_apply_errors_total", st->repl_apply_errors);
    add(out, "repl_replicas_dropped_total", st->repl_counts.replicas_dropped);
}
