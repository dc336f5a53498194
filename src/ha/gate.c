/* The HA fence's shared state (gate.h). */
#include "ha/gate.h"

#include <assert.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "crescent/error.h"

int cr_ha_gate_init(struct cr_ha_gate *gate) {
    assert(gate != NULL);
    memset(gate, 0, sizeof(*gate));
    atomic_init(&gate->writable_until_ms, 0);
    atomic_init(&gate->term, 0);
    return pthread_mutex_init(&gate->lock, NULL) == 0 ? CR_OK : CR_ERR_NOMEM;
}

void cr_ha_gate_destroy(struct cr_ha_gate *gate) {
    if (gate != NULL) pthread_mutex_destroy(&gate->lock);
}

void cr_ha_gate_view(struct cr_ha_gate *gate, struct cr_ha_view *out) {
    assert(gate != NULL && out != NULL);
    pthread_mutex_lock(&gate->lock);
    *out = gate->view;
    pthread_mutex_unlock(&gate->lock);
}

void cr_ha_gate_refusal(struct cr_ha_gate *gate, char *out, size_t size) {
    assert(gate != NULL && out != NULL);
    int64_t term;
    char leader[CR_ETCD_VALUE_MAX + 1];
    bool me;
    pthread_mutex_lock(&gate->lock);
    term = gate->view.term;
    me = gate->view.leader;
    snprintf(leader, sizeof(leader), "%s", gate->view.leader_value);
    pthread_mutex_unlock(&gate->lock);
    json_t *value = json_loads(leader, 0, NULL);
    const char *rpc = json_string_value(json_object_get(value, "rpc"));
    if (me)
        snprintf(out, size, "not the leader: its lease of term %lld could not be renewed in time; "
                 "it steps down", (long long)term);
    else if (rpc != NULL)
        snprintf(out, size, "not the leader: a standby of term %lld; the leader is at %.200s",
                 (long long)term, rpc);
    else
        snprintf(out, size, "not the leader: no leader is elected yet (etcd decides)");
    json_decref(value);
}
