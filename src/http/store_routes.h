/* The store master's admin routes (GET /api/v1/segments, /segments/{name},
 * /objects, /objects/{key}, /stats) and the JSON they answer.
 *
 * The handlers run on HTTP workers and ask the segments actor
 * (CR_MSG_MASTER_ADMIN); the segments actor renders the answer on its own
 * thread with cr_store_admin_render, so no store state leaves that thread. */
#ifndef CRESCENT_HTTP_STORE_ROUTES_H
#define CRESCENT_HTTP_STORE_ROUTES_H

#include <stdint.h>

#include "core/store.h"
#include "msgs/master_msgs.h"

struct cr_http_front;
struct cr_read_latency_sums;
struct cr_subsystems;

/* Extra counters of the segments actor shown by /api/v1/stats. */
struct cr_store_admin_counters {
    uint64_t events_sent;
    uint64_t events_dropped;
    uint64_t zombie_reclaims;
    const struct cr_read_latency_sums *reads; /* clients' reports (NULL: none) */
};

/* Renders the answer to `q` as JSON text (malloc'd) into *json_out.  For the
 * segments actor's thread only.  Returns CR_OK, CR_ERR_SEGMENT_NOT_FOUND,
 * CR_ERR_OBJECT_NOT_FOUND, CR_ERR_INVALID_PARAMS or CR_ERR_NOMEM. */
int cr_store_admin_render(const cr_store *store, uint64_t now_ms,
                          const struct cr_store_admin_counters *counters,
                          const struct cr_master_admin_query *q, char **json_out);

/* /api/v1/objects's JSON for the objects of these keys that exist, in the
 * given order, each once, at most q->limit, matching q->prefix.  For the
 * segments actor's thread (segments_recent.c). */
int cr_store_admin_render_keys(const cr_store *store, uint64_t now_ms,
                               const struct cr_master_admin_query *q, const char *const *tenants,
                               const char *const *keys, const uint32_t *lens, uint32_t n,
                               char **json_out);

/* Asks the segments actor to render `q` (wall_now_ms is set here); on CR_OK
 * *json_out is the malloc'd JSON.  For HTTP workers. */
int cr_store_routes_ask(struct cr_subsystems *peers, struct cr_master_admin_query *q,
                        char **json_out);

/* Mooncake master's store endpoints, in its shapes (text/plain, one item per
 * line): GET /get_all_keys, /get_all_segments, /query_segment?segment=, and
 * its admin endpoints (http/mooncake_admin.h).  For the --metrics-port front. */
int cr_mooncake_routes_register(struct cr_http_front *front, struct cr_subsystems *peers,
                                bool query_key_is_bare);

/* Adds the routes; handlers ask peers->actors[CR_SUBSYSTEM_SEGMENTS]. */
int cr_store_routes_register(struct cr_http_front *front, struct cr_subsystems *peers);

#endif
