/* etcd:// endpoints: a client that follows the elected leader (docs/ha.md).
 *
 *     etcd://HOST:PORT[;HOST:PORT...][/CLUSTER_ID]      (cluster id "mooncake_cluster")
 *
 * At open the leader key /crescent/CLUSTER_ID/leader is read from etcd
 * (src/ha/etcd.h, every endpoint tried in turn) and the client connects to
 * the leader's native endpoint (crescent://), or its ZMQ one (tcp://) when
 * CURVE keys are set or it has no native one.  A blocking call that the
 * server refuses as "not the leader" (it did nothing: durable/role.h's
 * status, a message starting so), or that gets no answer, makes
 * the client read the key again, waiting up to its timeout for a leader of
 * another term, reconnect, and send the call again when that is safe: a
 * refusal always is; after a lost answer, only calls that change
 * nothing or may be repeated (reads, Ping, GetVersion, QueryTask).  Others
 * fail with the reason.  Pipelined calls (cr_client_submit/poll) are not
 * resent: their completions say what happened, and the next blocking call
 * follows. */
#include <assert.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/client_internal.h"
#include "crescent/error.h"
#include "ha/etcd.h"

#define ENDPOINT_MAX 256u
#define RESOLVE_POLL_MS 100

struct cr_client_follow {
    struct cr_etcd *etcd;
    char key[160]; /* /crescent/<at most 128>/leader */
    char cluster[129];
    bool curve; /* CURVE keys given: only the ZMQ endpoint will do */
    struct cr_client_options options;
    char *curve_server_key, *curve_public_key, *curve_secret_key;
    char leader[ENDPOINT_MAX]; /* the endpoint connected to */
    int64_t term;              /* its key's create_revision */
    uint64_t follows;          /* reconnections to a new leader */
};

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms) {
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The endpoint to use from the key's value, or false when it names none. */
static bool choose(const struct cr_client_follow *f, const char *value, char *out, size_t size) {
    json_t *v = json_loads(value, 0, NULL);
    const char *native = json_string_value(json_object_get(v, "native"));
    const char *rpc = json_string_value(json_object_get(v, "rpc"));
    bool ok = true;
    if (!f->curve && native != NULL && native[0] != '\0')
        snprintf(out, size, "%s%s", CR_CLIENT_NATIVE_SCHEME, native);
    else if (rpc != NULL && rpc[0] != '\0')
        snprintf(out, size, "%s", rpc);
    else
        ok = false;
    json_decref(v);
    return ok;
}

/* Reads the key until it names a leader of a term other than `not_term`
 * (0: any), for up to wait_ms.  Sets out and *term. */
static int resolve(cr_client *c, int64_t not_term, int wait_ms, char *out, size_t size,
                   int64_t *term, char *error, size_t error_size) {
    struct cr_client_follow *f = c->follow;
    int64_t deadline = mono_ms() + wait_ms;
    char why[300] = "";
    for (;;) {
        int64_t rev = 0;
        struct cr_etcd_kv kv;
        int rc = cr_etcd_get(f->etcd, f->key, &rev, &kv, why, sizeof(why));
        if (rc == CR_OK && !kv.found)
            snprintf(why, sizeof(why), "etcd has no leader at %s (none elected yet)", f->key);
        else if (rc == CR_OK && kv.create_revision == not_term)
            snprintf(why, sizeof(why), "etcd still names the leader of term %lld",
                     (long long)not_term);
        else if (rc == CR_OK && !choose(f, kv.value, out, size))
            snprintf(why, sizeof(why), "the leader key %s names no RPC endpoint", f->key);
        else if (rc == CR_OK) {
            *term = kv.create_revision;
            return CR_OK;
        }
        if (mono_ms() >= deadline) {
            snprintf(error, error_size, "no leader to follow within %d ms: %s", wait_ms, why);
            return rc == CR_OK ? CR_ERR_TIMEOUT : rc;
        }
        sleep_ms(RESOLVE_POLL_MS);
    }
}

int cr_client_follow_open(cr_client *c, const char *endpoint,
                          const struct cr_client_options *options, char *error,
                          size_t error_size) {
    assert(c != NULL && strncmp(endpoint, CR_CLIENT_ETCD_SCHEME, strlen(CR_CLIENT_ETCD_SCHEME)) == 0);
    struct cr_client_follow *f = calloc(1, sizeof(*f));
    if (f == NULL) return CR_ERR_NOMEM;
    c->follow = f;
    const char *list = endpoint + strlen(CR_CLIENT_ETCD_SCHEME);
    const char *slash = strchr(list, '/');
    char hosts[ENDPOINT_MAX];
    snprintf(hosts, sizeof(hosts), "%.*s", (int)(slash != NULL ? (size_t)(slash - list) : strlen(list)), list);
    const char *id = slash != NULL ? slash + 1 : "mooncake_cluster";
    size_t n = strlen(id);
    snprintf(f->cluster, sizeof(f->cluster), "%.128s", id);
    if (n == 0 || n > 128 || strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                     "0123456789_.-") != n) {
        snprintf(error, error_size, "'%s': the cluster id after '/' must be A-Z a-z 0-9 _ . - "
                 "(etcd://HOST:PORT;HOST:PORT/CLUSTER_ID)", endpoint);
        return CR_ERR_INVALID_PARAMS;
    }
    snprintf(f->key, sizeof(f->key), "/crescent/%s/leader", f->cluster);
    int rc = cr_etcd_open(hosts, (uint32_t)(c->timeout_ms < 2000 ? c->timeout_ms : 2000), &f->etcd,
                          error, error_size);
    if (rc != CR_OK) return rc;
    if (options != NULL) {
        f->options = *options;
        f->curve_server_key = options->curve_server_key ? strdup(options->curve_server_key) : NULL;
        f->curve_public_key = options->curve_public_key ? strdup(options->curve_public_key) : NULL;
        f->curve_secret_key = options->curve_secret_key ? strdup(options->curve_secret_key) : NULL;
        f->options.curve_server_key = f->curve_server_key;
        f->options.curve_public_key = f->curve_public_key;
        f->options.curve_secret_key = f->curve_secret_key;
        f->curve = f->curve_server_key != NULL || getenv("CRESCENT_CURVE_SERVER_KEY") != NULL;
    } else {
        f->curve = getenv("CRESCENT_CURVE_SERVER_KEY") != NULL;
    }
    rc = resolve(c, 0, c->timeout_ms, f->leader, sizeof(f->leader), &f->term, error, error_size);
    if (rc != CR_OK) return rc;
    return cr_client_transport_open(c, f->leader, &f->options, error, error_size);
}

void cr_client_follow_close(cr_client *c) {
    struct cr_client_follow *f = c->follow;
    if (f == NULL) return;
    cr_etcd_close(f->etcd);
    free(f->curve_server_key);
    free(f->curve_public_key);
    free(f->curve_secret_key);
    free(f);
    c->follow = NULL;
}

bool cr_client_follow_retry_safe(uint16_t method) {
    switch (method) {
    case CRESCENT__MASTER__METHOD__GET_VERSION:
    case CRESCENT__MASTER__METHOD__PING:
    case CRESCENT__MASTER__METHOD__EXIST_KEY:
    case CRESCENT__MASTER__METHOD__BATCH_EXIST_KEY:
    case CRESCENT__MASTER__METHOD__GET_REPLICA_LIST:
    case CRESCENT__MASTER__METHOD__BATCH_GET_REPLICA_LIST:
    case CRESCENT__MASTER__METHOD__GET_REPLICA_LIST_BY_REGEX:
    case CRESCENT__MASTER__METHOD__BATCH_QUERY_IP:
    case CRESCENT__MASTER__METHOD__QUERY_TASK:
        return true;
    default:
        return false;
    }
}

/* Reconnects to the leader etcd names now: of another term than the one
 * connected to when `new_term` (the old one refused or vanished), else any
 * (the same leader, after a connection that broke). */
int cr_client_follow_leader(cr_client *c, bool new_term) {
    struct cr_client_follow *f = c->follow;
    assert(f != NULL);
    char endpoint[ENDPOINT_MAX], why[CR_CLIENT_ERROR_MAX];
    int64_t term = 0;
    int rc = resolve(c, new_term ? f->term : 0, c->timeout_ms, endpoint, sizeof(endpoint), &term,
                     why, sizeof(why));
    if (rc != CR_OK) return cr_client_fail(c, rc, "%s", why);
    cr_client_transport_close(c);
    rc = cr_client_transport_open(c, endpoint, &f->options, why, sizeof(why));
    if (rc != CR_OK) return cr_client_fail(c, rc, "cannot connect to the leader %s: %s", endpoint, why);
    snprintf(f->leader, sizeof(f->leader), "%s", endpoint);
    if (term != f->term) f->follows++;
    f->term = term;
    return CR_OK;
}

const char *cr_client_leader(const cr_client *c, long long *term) {
    assert(c != NULL);
    if (c->follow == NULL) return NULL;
    if (term != NULL) *term = (long long)c->follow->term;
    return c->follow->leader;
}
