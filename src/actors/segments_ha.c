/* The segments actor's side of the etcd election (src/ha/gate.h): while
 * this crescentd has not won the election, or its lease may have ended,
 * every mutating call is answered "not the leader" (durable/role.h's
 * status) naming the leader, before the store sees it; reads are served
 * (a standby's store follows the leader's log).  The role contract
 * (segments_repl.c) refuses the same calls once the journal has applied a
 * step-down; this check needs no message to take effect, so a leader
 * paused past its lease refuses the first call after it wakes.  One
 * acquire load per mutating call when --ha is on; nothing when off. */
#include <stdio.h>
#include <stdlib.h>

#include "actors/segments_internal.h"
#include "crescent/error.h"
#include "durable/role.h"
#include "daemon/config.h"
#include "ha/gate.h"
#include "ha/ha.h"
#include "master.pb-c.h"
#include "runtime/runtime.h"

int segments_ha_create(struct segments_state *st, const struct cr_daemon_config *config) {
    if (!cr_ha_enabled(config)) return CR_OK;
    st->ha = malloc(sizeof(*st->ha));
    if (st->ha == NULL || cr_ha_gate_init(st->ha) != CR_OK) {
        free(st->ha);
        st->ha = NULL;
        return CR_ERR_NOMEM;
    }
    return CR_OK;
}

void segments_ha_free(struct segments_state *st) {
    if (st->ha == NULL) return;
    cr_ha_gate_destroy(st->ha);
    free(st->ha);
    st->ha = NULL;
}

struct cr_ha_gate *cr_segments_ha_gate(void *segments_state) {
    struct segments_state *st = segments_state;
    return st != NULL ? st->ha : NULL;
}

bool segments_ha_refuse(struct segments_state *st, struct cr_master_call *call,
                        struct cr_msg *ask_msg) {
    if (!segments_call_mutates(call->method)) return false;
    if (cr_ha_gate_open(st->ha, st->now_ms)) return false;
    st->calls++;
    st->ha_refused++;
    call->status = CR_OK; /* the transport carried it; the answer is the refusal */
    const struct cr_rpc_method *m = cr_rpc_method_find(call->method);
    char why[512];
    cr_ha_gate_refusal(st->ha, why, sizeof(why));
    if (m == NULL || cr_rpc_pack_status(m->response, CR_ROLE_NOT_LEADER_STATUS, why, &call->reply,
                                        &call->reply_len) != CR_OK)
        cr_rpc_reply_nomem(call);
    if (ask_msg != NULL) {
        cr_reply(ask_msg, call->status);
        return true;
    }
    if (call->reply_to == NULL && call->edge == 0) {
        st->replies_dropped++;
        cr_master_call_free(call);
        return true;
    }
    segments_finish(st, call);
    return true;
}
