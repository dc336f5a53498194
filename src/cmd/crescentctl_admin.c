/* crescentctl's admin commands over the HTTP front: health, stats, metrics. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "client/admin_http.h"
#include "cmd/crescentctl.h"
#include "crescent/error.h"

/* Admin commands take no arguments. */
static int no_arguments(int argc, char **argv) {
    if (argc <= 1) return 0;
    ctl_error(argv[0], "takes no arguments (see --help)");
    return CTL_EXIT_USAGE;
}

/* GETs `path`; prints the reason and returns an exit status on failure. */
static int fetch(const struct ctl *ctl, const char *path, int *status, char **body) {
    char error[512] = "";
    int rc = cr_admin_http_get(ctl->http_address, path, ctl->timeout_ms, status, body, error,
                               sizeof(error));
    if (rc == CR_OK) return 0;
    ctl_error(NULL, "%s", error[0] ? error : cr_strerror(rc));
    return rc == CR_ERR_INVALID_PARAMS ? CTL_EXIT_USAGE : CTL_EXIT_UNREACHABLE;
}

static int cmd_health(const struct ctl *ctl, int argc, char **argv) {
    if (no_arguments(argc, argv)) return CTL_EXIT_USAGE;
    int status;
    char *body;
    int rc = fetch(ctl, "/health", &status, &body);
    if (rc != 0) return rc;
    json_t *root = json_loads(body, 0, NULL);
    if (ctl->json) {
        ctl_emit(root != NULL ? root : json_pack("{s:s}", "status", "unknown"));
        free(body);
        return status == 200 ? 0 : CTL_EXIT_SERVER_FAILURE;
    }
    const char *state = json_string_value(json_object_get(root, "status"));
    printf("%s (HTTP %d) version %s, uptime %llds, %lld actors\n", state ? state : "unknown",
           status, json_string_value(json_object_get(root, "version")) ?: "?",
           (long long)json_integer_value(json_object_get(root, "uptime_seconds")),
           (long long)json_integer_value(json_object_get(root, "actors")));
    json_t *down = json_object_get(root, "unresponsive");
    size_t i;
    json_t *name;
    json_array_foreach(down, i, name) printf("  unresponsive: %s\n", json_string_value(name));
    json_decref(root);
    free(body);
    return status == 200 ? 0 : CTL_EXIT_SERVER_FAILURE;
}

/* HA (docs/ha.md): this crescentd's role, term and leader, from /health. */
static int cmd_ha(const struct ctl *ctl, int argc, char **argv) {
    if (no_arguments(argc, argv)) return CTL_EXIT_USAGE;
    int status;
    char *body;
    int rc = fetch(ctl, "/health", &status, &body);
    if (rc != 0) return rc;
    json_t *root = json_loads(body, 0, NULL);
    free(body);
    json_t *ha = json_object_get(root, "ha");
    if (!json_is_object(ha) || (json_object_get(ha, "election") == NULL &&
                                strcmp(json_string_value(json_object_get(ha, "role")) ?: "",
                                       "none") == 0)) {
        ctl_error("ha", "this crescentd runs without HA (start it with --ha etcd)");
        json_decref(root);
        return CTL_EXIT_SERVER_FAILURE;
    }
    if (ctl->json) {
        ctl_emit(json_incref(ha));
        json_decref(root);
        return CTL_EXIT_OK;
    }
    /* "election": the etcd election's view (src/ha); the rest: the store
     * master's role contract (durable/role.h), lag included. */
    json_t *el = json_object_get(ha, "election");
    json_t *leader = json_object_get(el, "leader"), *counts = json_object_get(el, "counts");
    const char *rpc = json_string_value(json_object_get(leader, "rpc"));
    const char *http = json_string_value(json_object_get(leader, "http"));
    printf("role %s, term %lld, leader %s (http %s), lease TTL %lld ms\n",
           json_string_value(json_object_get(el != NULL ? el : ha, "role")) ?: "?",
           (long long)json_integer_value(json_object_get(el != NULL ? el : ha, "term")),
           rpc ? rpc : "none", http ? http : "-",
           (long long)json_integer_value(json_object_get(el, "lease_ttl_ms")));
    printf("store master: %s, term %lld%s\n", json_string_value(json_object_get(ha, "role")) ?: "?",
           (long long)json_integer_value(json_object_get(ha, "term")),
           json_is_true(json_object_get(ha, "fenced")) ? ", fenced" : "");
    if (el != NULL)
        printf("etcd %s; elections %lld, step-downs %lld, leader changes seen %lld, lease renew "
               "failures %lld\n",
               json_string_value(json_object_get(el, "etcd_endpoint")) ?: "?",
               (long long)json_integer_value(json_object_get(counts, "elections")),
               (long long)json_integer_value(json_object_get(counts, "step_downs")),
               (long long)json_integer_value(json_object_get(counts, "leaders_seen")),
               (long long)json_integer_value(json_object_get(counts, "renew_failures")));
    if (json_object_get(ha, "lag_records") != NULL)
        printf("lag %lld records, %lld ms (stream %s)\n",
               (long long)json_integer_value(json_object_get(ha, "lag_records")),
               (long long)json_integer_value(json_object_get(ha, "lag_ms")),
               json_is_true(json_object_get(ha, "connected")) ? "up" : "down");
    else if (json_is_array(json_object_get(ha, "standbys"))) {
        json_t *list = json_object_get(ha, "standbys"), *s;
        size_t i;
        printf("standbys connected: %zu\n", json_array_size(list));
        json_array_foreach(list, i, s)
            printf("  %s: acknowledged lsn %lld, lag %lld records, %lld ms\n",
                   json_string_value(json_object_get(s, "address")) ?: "?",
                   (long long)json_integer_value(json_object_get(s, "acked_lsn")),
                   (long long)json_integer_value(json_object_get(s, "lag_records")),
                   (long long)json_integer_value(json_object_get(s, "lag_ms")));
    }
    if (json_integer_value(json_object_get(ha, "log_bytes")) > 0)
        printf("log %lld bytes; last snapshot at lsn %lld\n",
               (long long)json_integer_value(json_object_get(ha, "log_bytes")),
               (long long)json_integer_value(json_object_get(ha, "snapshot_lsn")));
    const char *last = json_string_value(json_object_get(el, "last_etcd_error"));
    if (last != NULL) printf("last etcd error: %s\n", last);
    json_decref(root);
    return CTL_EXIT_OK;
}

static long long field(json_t *obj, const char *key) {
    return (long long)json_integer_value(json_object_get(obj, key));
}

/* GETs `path` and parses its JSON answer; NULL (exit status in *rc) on failure. */
static json_t *fetch_json(const struct ctl *ctl, const char *path, int *rc) {
    int status;
    char *body;
    if ((*rc = fetch(ctl, path, &status, &body)) != 0) return NULL;
    json_t *root = json_loads(body, 0, NULL);
    free(body);
    if (status != 200 || !json_is_object(root)) {
        ctl_error(NULL, "unexpected answer to %s (HTTP %d)", path, status);
        json_decref(root);
        *rc = CTL_EXIT_SERVER_FAILURE;
        return NULL;
    }
    return root;
}

/* Prints an object's members as "  name value" lines, nested objects as a.b. */
static void print_members(const char *prefix, json_t *obj) {
    const char *key;
    json_t *value;
    json_object_foreach(obj, key, value) {
        char name[128];
        snprintf(name, sizeof(name), "%s%s", prefix, key);
        if (json_is_object(value)) {
            char nested[sizeof(name) + 1]; /* name and a dot */
            snprintf(nested, sizeof(nested), "%s.", name);
            print_members(nested, value);
        } else if (json_is_real(value)) {
            printf("  %-36s %.6g\n", name, json_real_value(value));
        } else if (json_is_integer(value)) {
            printf("  %-36s %lld\n", name, (long long)json_integer_value(value));
        } else if (json_is_null(value)) {
            printf("  %-36s -\n", name);
        }
    }
}

static json_t *actor_named(json_t *actors, const char *name) {
    size_t i;
    json_t *a;
    json_array_foreach(actors, i, a) {
        const char *n = json_string_value(json_object_get(a, "name"));
        if (n != NULL && strcmp(n, name) == 0) return a;
    }
    return NULL;
}

/* The actor table, then the store, the event plane and the indexer. */
static int cmd_stats(const struct ctl *ctl, int argc, char **argv) {
    if (no_arguments(argc, argv)) return CTL_EXIT_USAGE;
    int rc;
    json_t *root = fetch_json(ctl, "/api/v1/actors", &rc);
    if (root == NULL) return rc;
    json_t *actors = json_object_get(root, "actors");
    if (!json_is_array(actors)) {
        ctl_error(NULL, "/api/v1/actors has no actors list");
        json_decref(root);
        return CTL_EXIT_SERVER_FAILURE;
    }
    json_t *store = fetch_json(ctl, "/api/v1/stats", &rc);
    json_t *events = store != NULL ? fetch_json(ctl, "/api/v1/events", &rc) : NULL;
    if (events == NULL) {
        json_decref(store);
        json_decref(root);
        return rc;
    }
    if (ctl->json) {
        ctl_emit(json_pack("{s:O, s:o, s:o}", "actors", actors, "store", store, "events", events));
        json_decref(root);
        return 0;
    }
    printf("%-10s %4s %12s %6s %8s %8s %9s %7s\n", "ACTOR", "CPU", "HANDLED", "DEPTH", "PARKS",
           "WAKES", "RING_FULL", "EXPIRED");
    size_t i;
    json_t *a;
    json_array_foreach(actors, i, a) {
        const char *name = json_string_value(json_object_get(a, "name"));
        if (!json_is_true(json_object_get(a, "up"))) {
            printf("%-10s  (did not answer)\n", name ? name : "?");
            continue;
        }
        const char *served_by = json_string_value(json_object_get(a, "served_by"));
        if (served_by != NULL) { /* a stats view: its thread is that actor's */
            printf("%-10s  (served by %s)\n", name ? name : "?", served_by);
            continue;
        }
        printf("%-10s %4lld %12lld %6lld %8lld %8lld %9lld %7lld\n", name ? name : "?",
               field(a, "cpu"), field(a, "messages_handled"), field(a, "ring_depth"),
               field(a, "parks"), field(a, "wakes"), field(a, "ring_full"), field(a, "asks_expired"));
    }
    printf("\nstore (GET /api/v1/stats)\n");
    print_members("", store);
    printf("\nevent plane (GET /api/v1/events)\n");
    print_members("", events);
    json_t *indexer = actor_named(actors, "indexer");
    if (indexer != NULL && json_is_object(json_object_get(indexer, "counters"))) {
        printf("\nprefix indexer (GET /api/v1/actors, indexer)\n");
        print_members("", json_object_get(indexer, "counters"));
    }
    json_decref(events);
    json_decref(store);
    json_decref(root);
    return 0;
}

/* Prometheus text as {"samples": [{"name", "labels": {...}, "value"}]}: the
 * sample lines (comments dropped); label values hold no escapes in ours. */
static json_t *metrics_json(const char *text) {
    json_t *samples = json_array();
    for (const char *line = text; line != NULL && *line != '\0';) {
        const char *end = strchr(line, '\n');
        size_t len = end != NULL ? (size_t)(end - line) : strlen(line);
        char buf[512];
        if (line[0] != '#' && len > 0 && len < sizeof(buf)) {
            memcpy(buf, line, len);
            buf[len] = '\0';
            char *value = strrchr(buf, ' ');
            char *brace = strchr(buf, '{');
            json_t *labels = json_object();
            if (value != NULL) *value++ = '\0';
            if (brace != NULL && brace < value) {
                *brace = '\0';
                for (char *p = brace + 1; *p != '\0' && *p != '}';) {
                    char *eq = strchr(p, '=');
                    char *close = eq != NULL && eq[1] == '"' ? strchr(eq + 2, '"') : NULL;
                    if (close == NULL) break;
                    *eq = '\0';
                    json_object_set_new(labels, p, json_stringn(eq + 2, (size_t)(close - eq - 2)));
                    p = close + 1;
                    if (*p == ',') p++;
                }
            }
            if (value != NULL)
                json_array_append_new(samples, json_pack("{s:s, s:o, s:f}", "name", buf, "labels",
                                                         labels, "value", strtod(value, NULL)));
            else
                json_decref(labels);
        }
        line = end != NULL ? end + 1 : NULL;
    }
    return json_pack("{s:o}", "samples", samples);
}

static int cmd_metrics(const struct ctl *ctl, int argc, char **argv) {
    if (no_arguments(argc, argv)) return CTL_EXIT_USAGE;
    int status;
    char *body;
    int rc = fetch(ctl, "/metrics", &status, &body);
    if (rc != 0) return rc;
    if (ctl->json)
        ctl_emit(metrics_json(body));
    else
        fputs(body, stdout);
    free(body);
    return status == 200 ? 0 : CTL_EXIT_SERVER_FAILURE;
}

/* Writes one Z85 key and a newline to a new file; false after saying why. */
static bool write_key(const char *path, const char *key, mode_t mode) {
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, mode);
    if (fd < 0) {
        ctl_error("keygen", "cannot create %s: %s (an existing key is never overwritten)", path,
                  strerror(errno));
        return false;
    }
    char line[64];
    int n = snprintf(line, sizeof(line), "%s\n", key);
    bool ok = write(fd, line, (size_t)n) == n;
    if (close(fd) != 0 || !ok) {
        ctl_error("keygen", "cannot write %s: %s", path, strerror(errno));
        return false;
    }
    return true;
}

/* `keygen PREFIX`: the secret key goes to PREFIX.key (owner-only), the public
 * one to PREFIX.pub (README, "Exposing crescentd safely").  Local: no crescentd. */
static int cmd_keygen(const struct ctl *ctl, int argc, char **argv) {
    if (argc != 2 || argv[1][0] == '-') {
        ctl_error("keygen", "wants one PREFIX (writes PREFIX.key and PREFIX.pub)");
        return CTL_EXIT_USAGE;
    }
    char public[41], secret[41], path[4096];
    if (!zmq_has("curve") || zmq_curve_keypair(public, secret) != 0) {
        ctl_error("keygen", "this libzmq cannot make CURVE keys (built without libsodium)");
        return CTL_EXIT_SERVER_FAILURE;
    }
    char pub_path[4096];
    snprintf(path, sizeof(path), "%s.key", argv[1]);
    if (!write_key(path, secret, 0600)) return CTL_EXIT_SERVER_FAILURE;
    snprintf(pub_path, sizeof(pub_path), "%s.pub", argv[1]);
    if (!write_key(pub_path, public, 0644)) return CTL_EXIT_SERVER_FAILURE;
    if (ctl->json) {
        ctl_emit(json_pack("{s:s, s:s, s:s}", "public_key", public, "secret_key_file", path,
                           "public_key_file", pub_path));
        return CTL_EXIT_OK;
    }
    /* stdout stays the public key alone (scripts take it with $(...)); what was
     * written goes to stderr. */
    printf("%s\n", public);
    fprintf(stderr, "wrote %s (secret key, 0600) and %s (public key, 0644)\n", path, pub_path);
    return CTL_EXIT_OK;
}

const struct ctl_command ctl_admin_commands[] = {
    {"health", "", "ask crescentd whether every actor answers (exit 1 if not)", cmd_health,
     "GET /health on --http.  No arguments.\n"
     "\nExample:\n  crescentctl health\n  ok (HTTP 200) version 0.1.0, uptime 42s, 7 actors\n"
     "  crescentctl health --json   # the /health document\n"},
    {"ha", "", "HA on etcd: this crescentd's role, term, leader and lag", cmd_ha,
     "GET /health on --http and prints its \"ha\" object: the election's role\n"
     "(leader or standby), term (the etcd revision of the election, the fencing\n"
     "token), the leader's RPC and HTTP addresses, the lease TTL and counters; the\n"
     "store master's role and term as applied, and a standby's replication lag in\n"
     "records and ms (docs/ha.md).  --json: the object as is.\n"
     "\nExample:\n  crescentctl ha\n  crescentctl --http 10.0.0.2:13333 ha\n"
     "  role standby, term 4, leader tcp://10.0.0.1:50051 (http 10.0.0.1:13333), lease TTL 5000 ms\n"},
    {"stats", "", "per-actor counters, then the store, event plane and indexer", cmd_stats,
     "GET /api/v1/actors, /api/v1/stats and /api/v1/events on --http: a table of the\n"
     "actors' runtime counters, then the store's, the event plane's and the prefix\n"
     "indexer's numbers.  No arguments.  --json: {\"actors\", \"store\", \"events\"}.\n"
     "\nExample:\n  crescentctl stats\n  crescentctl --http 10.0.0.2:13333 stats --json\n"},
    {"metrics", "", "the Prometheus text of GET /metrics", cmd_metrics,
     "GET /metrics on --http, printed as is.  No arguments.  --json: {\"samples\":\n"
     "[{\"name\", \"labels\", \"value\"}]}.\n"
     "\nExample:\n  crescentctl metrics | grep crescent_rpc_request_duration_seconds_count\n"},
    {"keygen", "PREFIX", "write a CurveZMQ key pair: PREFIX.key (secret, 0600) and PREFIX.pub",
     cmd_keygen,
     "Makes a CURVE key pair with libzmq (libsodium) and writes the Z85 secret key to\n"
     "PREFIX.key (mode 0600) and the public key to PREFIX.pub; prints the public key.\n"
     "Existing files are never overwritten.  For crescentd: --curve-secret-key-file\n"
     "PREFIX.key; for a client: its PREFIX.pub goes in crescentd's --curve-clients and\n"
     "CRESCENT_CURVE_PUBLIC_KEY / CRESCENT_CURVE_SECRET_KEY take the two keys' text.\n"
     "\nExample:\n  crescentctl keygen /etc/crescent/server\n"},
    {NULL, NULL, NULL, NULL, NULL},
};
