/* crescentd's high availability on etcd (docs/ha.md): the thread that runs
 * the election (elect.h) against etcd (etcd.h) and moves the fence
 * (gate.h) the segments actor checks before it answers a call.
 *
 * The thread is a plain pthread, not an actor: it blocks in etcd requests
 * (each bounded by a third of the lease) and watches, and no actor sends it
 * anything; what others read of it is the gate.
 *
 * The leader key is /crescent/<cluster-id>/leader; its value is a JSON
 * object of the leader's addresses, as clients reach them:
 *     {"rpc": "tcp://H:P", "native": "H:P", "mooncake": "H:P", "http": "H:P",
 *      "event": "tcp://H:P", "replay": "tcp://H:P", "replication": "H:P",
 *      "node": "HOST/PID"}
 * ("native" and "mooncake" only when those endpoints are on, "replication"
 * with --replication-address: where standbys stream the leader's log). */
#ifndef CRESCENT_HA_HA_H
#define CRESCENT_HA_HA_H

#include <stdbool.h>
#include <stddef.h>

#include "ha/gate.h"

struct cr_daemon_config;
struct cr_ha;
struct cr_buf;
struct json_t;

/* Whether the config turns HA on (--ha etcd or --enable-ha). */
bool cr_ha_enabled(const struct cr_daemon_config *config);

/* Checks the HA settings: --ha is '' or etcd; with HA on, endpoints that
 * parse (when given) and a cluster id of [A-Za-z0-9_.-] (at most 128).
 * Returns false with a sentence in error.  cr_ha_start checks what only a
 * starting crescentd needs: endpoints given, and addresses a client can
 * reach (no 0.0.0.0 or '*' host without --ha-advertise-host). */
bool cr_ha_config_check(const struct cr_daemon_config *config, char *error, size_t size);

/* "/crescent/<cluster_id>/leader" into out. */
void cr_ha_leader_key(const char *cluster_id, char *out, size_t size);

/* Starts the election thread (the gate closed until it wins).  Returns
 * CR_OK, CR_ERR_INVALID_PARAMS (no endpoints, an address no client can
 * reach; error says which) or
 * CR_ERR_NOMEM / CR_ERR_IO. */
int cr_ha_start(const struct cr_daemon_config *config, struct cr_ha_gate *gate,
                struct cr_ha **out, char *error, size_t size);

/* Stops the thread.  A leader closes its gate, then resigns (deletes its own
 * key and revokes its lease) so a standby takes over at once, not a lease
 * later. */
void cr_ha_stop(struct cr_ha *ha);

/* Adds the election's view to /health's "ha" object (durable/role.h's):
 * "election": {role, term, leader (the key's addresses), lease_ttl_ms,
 * writable_for_ms, etcd_endpoint, last_etcd_error, counts}; and the
 * Prometheus lines (crescent_ha_*) appended to buf. */
void cr_ha_health_add(struct json_t *ha, struct cr_ha_gate *gate);
void cr_ha_render_metrics(struct cr_buf *buf, struct cr_ha_gate *gate);

#endif
