/* A small etcd v3 client over etcd's JSON gateway (libcurl + jansson): the
 * calls crescent's leader election and leader-following clients make.
 *
 * Endpoints are "host:port" separated by ';' or ',' ("h1:2379;h2:2379",
 * an "http://" prefix allowed).  A request goes to the endpoint that last
 * answered; when it cannot be reached, times out or answers 5xx, the next
 * endpoint is tried, each at most once per request, and the one that
 * answers becomes the current one.  An answer is decoded and validated
 * fully (etcd_json.h) before anything of it is used.
 *
 * Threads: a cr_etcd is used by one thread at a time.  The first open
 * initialises libcurl once for the process (pthread_once). */
#ifndef CRESCENT_HA_ETCD_H
#define CRESCENT_HA_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ha/etcd_json.h"

#define CR_ETCD_ENDPOINTS_MAX 16u
#define CR_ETCD_ENDPOINT_LEN_MAX 256u

struct cr_etcd;

struct cr_etcd_stats {
    uint64_t requests;        /* sent, each endpoint tried counting once */
    uint64_t errors;          /* requests that failed (unreachable, 5xx, refused, undecodable) */
    uint64_t failovers;       /* times the current endpoint changed */
    uint64_t last_latency_ns; /* of the last request that got an answer */
};

/* Parses the endpoint list and sets up a client whose every request gives
 * up after timeout_ms.  Returns CR_OK, CR_ERR_INVALID_PARAMS (err names the
 * bad endpoint) or CR_ERR_NOMEM. */
int cr_etcd_open(const char *endpoints, uint32_t timeout_ms, struct cr_etcd **out, char *err,
                 size_t err_len);
void cr_etcd_close(struct cr_etcd *etcd);

/* Changes the per-request timeout. */
void cr_etcd_set_timeout(struct cr_etcd *etcd, uint32_t timeout_ms);

/* "host:port" of the endpoint requests go to now. */
const char *cr_etcd_current(const struct cr_etcd *etcd);
struct cr_etcd_stats cr_etcd_stats(const struct cr_etcd *etcd);

/* Every call below returns CR_OK; CR_ERR_IO when no endpoint answered (err
 * names the last endpoint and libcurl's reason); CR_ERR_PROTOCOL when etcd
 * refused the request or its answer did not decode (err says which). */

/* Reads one key: *revision is the store's revision, kv->found whether it is. */
int cr_etcd_get(struct cr_etcd *etcd, const char *key, int64_t *revision, struct cr_etcd_kv *kv,
                char *err, size_t err_len);

/* Creates key = value attached to lease (0: none) only if the key does not
 * exist (a txn comparing its create_revision with 0).  *created; the key's
 * revision when created (the new key's create_revision); otherwise the
 * holder's kv in *holder. */
int cr_etcd_create(struct cr_etcd *etcd, const char *key, const char *value, size_t value_len,
                   int64_t lease, bool *created, int64_t *revision, struct cr_etcd_kv *holder,
                   char *err, size_t err_len);

/* Deletes key only while its create_revision is still `create_revision`
 * (a leader resigning removes its own key, never a successor's). */
int cr_etcd_delete_if(struct cr_etcd *etcd, const char *key, int64_t create_revision,
                      char *err, size_t err_len);

/* Grants a lease of ttl_s seconds: *id and the TTL etcd granted. */
int cr_etcd_grant(struct cr_etcd *etcd, int64_t ttl_s, int64_t *id, int64_t *granted_ttl_s,
                  char *err, size_t err_len);

/* Renews a lease once: *ttl_s is its TTL after renewal, 0 when it is gone. */
int cr_etcd_keepalive(struct cr_etcd *etcd, int64_t id, int64_t *ttl_s, char *err, size_t err_len);

/* Revokes a lease (its keys are deleted with it). */
int cr_etcd_revoke(struct cr_etcd *etcd, int64_t id, char *err, size_t err_len);

/* Watches key from revision start (0: from now) for at most wait_ms:
 * *changed is true as soon as an event on it arrives (then returns at
 * once), false when wait_ms passed without one. */
int cr_etcd_watch(struct cr_etcd *etcd, const char *key, int64_t start, uint32_t wait_ms,
                  bool *changed, char *err, size_t err_len);

#endif
