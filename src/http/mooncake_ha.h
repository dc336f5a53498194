/* Mooncake master's HA words for crescentd's role (docs/mooncake.md, "HA
 * endpoints"): what /role, /ha_status, /leader, /health and /metrics/summary
 * on --metrics-port say, and which of its endpoints a standby refuses.
 *
 * crescent's roles (durable/role.h) and the election's view (ha/gate.h) map
 * onto the reference's MasterAdminServer words:
 *
 *   NONE (no HA)                          leader   serving      no leader view
 *   LEADER, taking writes                 leader   serving      itself
 *   LEADER, fenced (saw a higher term)    standby  standby      the election's leader
 *   STANDBY, no leader known yet          standby  starting     none
 *   STANDBY streaming, not connected or
 *   behind its leader                     standby  catching_up  its leader
 *   STANDBY otherwise                     standby  standby      its leader
 *
 * The leader view (present, leader_address, view_version) comes from the
 * election (--ha etcd): the leader key's Mooncake RPC address when that
 * endpoint is on, else its RPC address without "tcp://"; the view_version is
 * the leader's term (its key's etcd revision).  Without the election (no HA,
 * or a manual --standby-of pair) there is no view: present false. */
#ifndef CRESCENT_HTTP_MOONCAKE_HA_H
#define CRESCENT_HTTP_MOONCAKE_HA_H

#include <stdbool.h>
#include <stdint.h>

#include "durable/role.h"

struct cr_ha_gate;
struct cr_ha_view;
struct cr_http_response;

struct cr_mc_ha {
    const char *role;  /* "leader" or "standby" (static strings) */
    const char *state; /* "serving", "standby", "catching_up" or "starting" */
    bool service_active; /* the reference's service plane: role leader, serving */
    bool present;        /* a leader is known to the election */
    char leader_address[CR_ROLE_ADDR_MAX]; /* "host:port" when present */
    uint64_t view_version;                 /* the leader's term when present */
};

/* The words for a role and (NULL without the election) its view. */
void cr_mc_ha_map(const struct cr_role_status *role, const struct cr_ha_view *view,
                  struct cr_mc_ha *out);

/* The words now: cr_role_get and the gate's view (gate NULL: no election). */
void cr_mc_ha_now(struct cr_ha_gate *gate, struct cr_mc_ha *out);

/* On a master whose service plane is not active (a standby), answers 503
 * {"success":false,"error_code":-...,"error_message":"service plane is not
 * active"} as the reference does and returns true; else false. */
bool cr_mc_ha_refuse_inactive(struct cr_ha_gate *gate, struct cr_http_response *resp);

#endif
