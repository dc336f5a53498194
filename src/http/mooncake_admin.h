/* Mooncake master's admin endpoints on --metrics-port (mooncake_admin.c). */
#ifndef CRESCENT_HTTP_MOONCAKE_ADMIN_H
#define CRESCENT_HTTP_MOONCAKE_ADMIN_H

#include <stdbool.h>

struct cr_http_front;
struct cr_subsystems;

/* Adds /query_key (the reference's current wrapped form, or the older bare
 * one), /batch_query_keys, /get_segments_detail, /role, /ha_status, /leader,
 * /kv_events/status and the /api/v1 ones; mutations need the admin token. */
int cr_mooncake_admin_register(struct cr_http_front *front, struct cr_subsystems *peers,
                               bool query_key_is_bare);

#endif
