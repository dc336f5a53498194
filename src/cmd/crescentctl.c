/* crescentctl: command-line client of crescentd.
 *
 * Exit status: 0 success, 1 the server answered with a failure (unhealthy,
 * an error status), 2 bad usage, 3 crescentd could not be reached. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/admin_http.h"
#include "crescent/error.h"
#include "crescent/version.h"

#define EXIT_SERVER_FAILURE 1
#define EXIT_USAGE 2
#define EXIT_UNREACHABLE 3

struct ctl {
    const char *http_address;
    int timeout_ms;
};

static void usage(FILE *out) {
    fprintf(out,
            "Usage: crescentctl [--http HOST:PORT] [--timeout-ms MS] COMMAND\n"
            "\n"
            "Commands:\n"
            "  health     ask crescentd whether every actor answers (exit 1 if not)\n"
            "  stats      per-actor counters as a table\n"
            "  metrics    the Prometheus text of GET /metrics\n"
            "  version    print crescentctl's version\n"
            "\n"
            "Options:\n"
            "  --http HOST:PORT   crescentd's HTTP front (default $CRESCENT_HTTP or 127.0.0.1:13333)\n"
            "  --timeout-ms MS    give up on a request after MS milliseconds (default 5000)\n"
            "  --help             print this help\n"
            "\n"
            "Exit status: 0 success, 1 server-side failure, 2 usage error, 3 crescentd unreachable.\n");
}

/* GETs `path`; prints the reason and returns an exit status on failure. */
static int fetch(const struct ctl *ctl, const char *path, int *status, char **body) {
    char error[512] = "";
    int rc = cr_admin_http_get(ctl->http_address, path, ctl->timeout_ms, status, body, error,
                               sizeof(error));
    if (rc == CR_OK) return 0;
    fprintf(stderr, "crescentctl: %s\n", error[0] ? error : cr_strerror(rc));
    return rc == CR_ERR_INVALID_PARAMS ? EXIT_USAGE : EXIT_UNREACHABLE;
}

static int cmd_health(const struct ctl *ctl) {
    int status;
    char *body;
    int rc = fetch(ctl, "/health", &status, &body);
    if (rc != 0) return rc;
    json_t *root = json_loads(body, 0, NULL);
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
    return status == 200 ? 0 : EXIT_SERVER_FAILURE;
}

static long long field(json_t *obj, const char *key) {
    return (long long)json_integer_value(json_object_get(obj, key));
}

static int cmd_stats(const struct ctl *ctl) {
    int status;
    char *body;
    int rc = fetch(ctl, "/api/v1/actors", &status, &body);
    if (rc != 0) return rc;
    json_t *root = json_loads(body, 0, NULL);
    free(body);
    json_t *actors = json_object_get(root, "actors");
    if (status != 200 || !json_is_array(actors)) {
        fprintf(stderr, "crescentctl: unexpected answer (HTTP %d)\n", status);
        json_decref(root);
        return EXIT_SERVER_FAILURE;
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
        printf("%-10s %4lld %12lld %6lld %8lld %8lld %9lld %7lld\n", name ? name : "?",
               field(a, "cpu"), field(a, "messages_handled"), field(a, "ring_depth"),
               field(a, "parks"), field(a, "wakes"), field(a, "ring_full"), field(a, "asks_expired"));
    }
    json_decref(root);
    return 0;
}

static int cmd_metrics(const struct ctl *ctl) {
    int status;
    char *body;
    int rc = fetch(ctl, "/metrics", &status, &body);
    if (rc != 0) return rc;
    fputs(body, stdout);
    free(body);
    return status == 200 ? 0 : EXIT_SERVER_FAILURE;
}

int main(int argc, char **argv) {
    struct ctl ctl = {.http_address = getenv("CRESCENT_HTTP"), .timeout_ms = 5000};
    if (ctl.http_address == NULL || ctl.http_address[0] == '\0') ctl.http_address = "127.0.0.1:13333";
    static const struct option options[] = {{"http", required_argument, NULL, 'H'},
                                            {"timeout-ms", required_argument, NULL, 't'},
                                            {"help", no_argument, NULL, 'h'},
                                            {0}};
    opterr = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, "+", options, NULL)) != -1) {
        if (opt == 'H') {
            ctl.http_address = optarg;
        } else if (opt == 't') {
            char *end;
            long ms = strtol(optarg, &end, 10);
            if (*end != '\0' || ms <= 0 || ms > 600000) {
                fprintf(stderr, "crescentctl: --timeout-ms wants 1 to 600000, not '%s'\n", optarg);
                return EXIT_USAGE;
            }
            ctl.timeout_ms = (int)ms;
        } else if (opt == 'h') {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "crescentctl: unknown option %s (see --help)\n", argv[optind - 1]);
            return EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return EXIT_USAGE;
    }
    const char *command = argv[optind];
    if (optind + 1 < argc) {
        fprintf(stderr, "crescentctl: %s takes no arguments (see --help)\n", command);
        return EXIT_USAGE;
    }
    if (strcmp(command, "health") == 0) return cmd_health(&ctl);
    if (strcmp(command, "stats") == 0) return cmd_stats(&ctl);
    if (strcmp(command, "metrics") == 0) return cmd_metrics(&ctl);
    if (strcmp(command, "version") == 0) return (puts("crescentctl " CRESCENT_VERSION), 0);
    fprintf(stderr, "crescentctl: unknown command '%s' (see --help)\n", command);
    return EXIT_USAGE;
}
