/* crescentctl: command-line client of crescentd.
 *
 * Exit status: 0 success, 1 the server answered with a failure (unhealthy,
 * an error status), 2 bad usage, 3 crescentd could not be reached. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/crescentctl.h"
#include "crescent/version.h"

/* Command groups, in --help order. */
static const struct ctl_command *const groups[] = {ctl_admin_commands, ctl_store_commands,
                                                   ctl_task_commands, ctl_events_commands};

static void usage(FILE *out) {
    fprintf(out, "Usage: crescentctl [--http HOST:PORT] [--rpc ENDPOINT] [--timeout-ms MS] COMMAND [ARGS]\n"
                 "\nCommands:\n");
    for (size_t g = 0; g < sizeof(groups) / sizeof(groups[0]); g++) {
        for (const struct ctl_command *c = groups[g]; c->name != NULL; c++) {
            char left[64];
            snprintf(left, sizeof(left), "%s %s", c->name, c->args);
            fprintf(out, "  %-28s %s\n", left, c->summary);
        }
    }
    fprintf(out,
            "  %-28s %s\n"
            "\nOptions:\n"
            "  --http HOST:PORT   crescentd's HTTP front (default $CRESCENT_HTTP or 127.0.0.1:13333)\n"
            "  --rpc ENDPOINT     crescentd's store RPC (default $CRESCENT_RPC or tcp://127.0.0.1:50051)\n"
            "  --timeout-ms MS    give up on a request after MS milliseconds (default 5000)\n"
            "  --help             print this help\n"
            "\nExit status: 0 success, 1 server-side failure, 2 usage error, 3 crescentd unreachable.\n",
            "version", "print crescentctl's version");
}

static const char *env_or(const char *name, const char *fallback) {
    const char *value = getenv(name);
    return value != NULL && value[0] != '\0' ? value : fallback;
}

int main(int argc, char **argv) {
    struct ctl ctl = {.http_address = env_or("CRESCENT_HTTP", "127.0.0.1:13333"),
                      .rpc_address = env_or("CRESCENT_RPC", "tcp://127.0.0.1:50051"),
                      .timeout_ms = 5000};
    static const struct option options[] = {{"http", required_argument, NULL, 'H'},
                                            {"rpc", required_argument, NULL, 'R'},
                                            {"timeout-ms", required_argument, NULL, 't'},
                                            {"help", no_argument, NULL, 'h'},
                                            {0}};
    opterr = 0;
    int opt;
    /* "+": stop at the command, so its own options are left to it. */
    while ((opt = getopt_long(argc, argv, "+", options, NULL)) != -1) {
        if (opt == 'H') {
            ctl.http_address = optarg;
        } else if (opt == 'R') {
            ctl.rpc_address = optarg;
        } else if (opt == 't') {
            char *end;
            long ms = strtol(optarg, &end, 10);
            if (*end != '\0' || ms <= 0 || ms > 600000) {
                fprintf(stderr, "crescentctl: --timeout-ms wants 1 to 600000, not '%s'\n", optarg);
                return CTL_EXIT_USAGE;
            }
            ctl.timeout_ms = (int)ms;
        } else if (opt == 'h') {
            usage(stdout);
            return CTL_EXIT_OK;
        } else {
            fprintf(stderr, "crescentctl: unknown option %s (see --help)\n", argv[optind - 1]);
            return CTL_EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return CTL_EXIT_USAGE;
    }
    int first = optind;
    const char *command = argv[first];
    if (strcmp(command, "version") == 0) {
        puts("crescentctl " CRESCENT_VERSION);
        return CTL_EXIT_OK;
    }
    for (size_t g = 0; g < sizeof(groups) / sizeof(groups[0]); g++) {
        for (const struct ctl_command *c = groups[g]; c->name != NULL; c++) {
            if (strcmp(c->name, command) == 0) {
                optind = 0; /* a command may run getopt on its own argv; 0 resets GNU getopt */
                return c->run(&ctl, argc - first, argv + first);
            }
        }
    }
    fprintf(stderr, "crescentctl: unknown command '%s' (see --help)\n", command);
    return CTL_EXIT_USAGE;
}
