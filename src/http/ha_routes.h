/* The HA routes (docs/durability.md, "Replication"):
 *   GET  /api/v1/ha          this master's role, term, lag and standbys
 *   POST /api/v1/ha/promote  a standby leads (admin token; manual failover)
 */
#ifndef CRESCENT_HTTP_HA_ROUTES_H
#define CRESCENT_HTTP_HA_ROUTES_H

#include <jansson.h>

#include "http/front.h"

/* The role as JSON (also /health's "ha"): a new reference. */
json_t *cr_ha_json(void);

int cr_ha_routes_register(struct cr_http_front *front);

#endif
