/* Mooncake master's HA words for crescentd's role (see mooncake_ha.h). */
#include "http/mooncake_ha.h"

#include <assert.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ha/gate.h"
#include "http/front.h"
#include "http/mooncake_reply.h"

/* The leader key's address a Mooncake client dials: its Mooncake RPC
 * endpoint when on, else crescent's RPC endpoint (scheme dropped). */
static bool leader_address(const char *key_value, char *out, size_t size) {
    json_t *doc = key_value[0] != '\0' ? json_loads(key_value, 0, NULL) : NULL;
    const char *addr = json_string_value(json_object_get(doc, "mooncake"));
    if (addr == NULL || addr[0] == '\0') addr = json_string_value(json_object_get(doc, "rpc"));
    if (addr != NULL && strncmp(addr, "tcp://", 6) == 0) addr += 6;
    bool found = addr != NULL && addr[0] != '\0' && strlen(addr) < size;
    if (found) snprintf(out, size, "%s", addr);
    json_decref(doc);
    return found;
}

void cr_mc_ha_map(const struct cr_role_status *role, const struct cr_ha_view *view,
                  struct cr_mc_ha *out) {
    assert(role != NULL && out != NULL);
    memset(out, 0, sizeof(*out));
    bool leads = role->role == CR_ROLE_NONE || (role->role == CR_ROLE_LEADER && !role->fenced);
    if (leads) {
        out->role = "leader", out->state = "serving";
    } else {
        bool known = role->leader[0] != '\0' || (view != NULL && view->leader_value[0] != '\0');
        bool streaming = role->role == CR_ROLE_STANDBY && role->leader[0] != '\0';
        out->role = "standby";
        out->state = !known                                               ? "starting"
                     : streaming && (!role->connected || role->lag_records > 0) ? "catching_up"
                                                                                : "standby";
    }
    out->service_active = leads;
    if (view == NULL || role->role == CR_ROLE_NONE) return; /* no election, no view */
    const char *value = view->leader_value[0] != '\0' ? view->leader_value
                        : view->leader                ? view->self
                                                      : "";
    out->present = leader_address(value, out->leader_address, sizeof(out->leader_address));
    out->view_version = out->present ? (uint64_t)view->term : 0;
}

void cr_mc_ha_now(struct cr_ha_gate *gate, struct cr_mc_ha *out) {
    struct cr_role_status *role = malloc(sizeof(*role)); /* both are kilobytes */
    struct cr_ha_view *view = gate != NULL ? malloc(sizeof(*view)) : NULL;
    if (role == NULL || (gate != NULL && view == NULL)) {
        /* Out of memory: say nothing is known rather than guess a role. */
        memset(out, 0, sizeof(*out));
        out->role = "standby", out->state = "starting";
        free(role), free(view);
        return;
    }
    cr_role_get(role);
    if (view != NULL) cr_ha_gate_view(gate, view);
    cr_mc_ha_map(role, view, out);
    free(role), free(view);
}

bool cr_mc_ha_refuse_inactive(struct cr_ha_gate *gate, struct cr_http_response *resp) {
    struct cr_mc_ha ha;
    cr_mc_ha_now(gate, &ha);
    if (ha.service_active) return false;
    cr_mc_respond_error(resp, 503, MC_UNAVAILABLE_IN_CURRENT_MODE, "service plane is not active");
    return true;
}
