/* The segments actor's side of replication (docs/durability.md,
 * "Replication"): a master that does not lead now answers mutating calls
 * "not the leader" and serves the rest.  State: segments_internal.h. */
#include <stdio.h>

#include "actors/segments_internal.h"
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
    case CRESCENT__MASTER__METHOD__MARK_TASK_TO_COMPLETE: return true;
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
