/* crescentctl: command-line client of crescentd.
 *
 * Exit status: 0 success, 1 the server answered with a failure (unhealthy,
 * an error status), 2 bad usage, 3 crescentd could not be reached. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/crescentctl.h"
#include "core/log.h"
#include "crescent/version.h"

static bool json_errors;
static const char *error_command;
static char error_text[1024];

void ctl_error(const char *command, const char *fmt, ...) {
    char message[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof(message), fmt, ap);
    va_end(ap);
    if (!json_errors) {
        fprintf(stderr, "crescentctl%s%s: %s\n", command ? " " : "", command ? command : "",
                message);
        return;
    }
    size_t used = strlen(error_text);
    snprintf(error_text + used, sizeof(error_text) - used, "%s%s", used ? "; " : "", message);
    if (command != NULL) error_command = command;
}

void ctl_emit(json_t *doc) {
    /* 15 digits: a double such as 930.979 prints as written, not as 930.97900000000004. */
    char *text = doc != NULL ? json_dumps(doc, JSON_COMPACT | JSON_REAL_PRECISION(15)) : NULL;
    if (text != NULL) puts(text);
    free(text);
    json_decref(doc);
}

void ctl_format_duration(double seconds, char *out, size_t size) {
    double a = seconds < 0 ? -seconds : seconds;
    const char *sign = seconds < 0 ? "-" : "";
    if (a < 60)
        snprintf(out, size, "%s%.1f s", sign, a);
    else if (a < 3600)
        snprintf(out, size, "%s%d min %d s", sign, (int)(a / 60), (int)a % 60);
    else
        snprintf(out, size, "%s%d h %d min", sign, (int)(a / 3600), (int)a % 3600 / 60);
}

/* With --json, the collected error as one document on stderr. */
static int finish(const char *command, int status) {
    if (json_errors && error_text[0] != '\0') {
        json_t *e = json_pack("{s:s, s:s?, s:i}", "error", error_text, "command",
                              error_command ? error_command : command, "exit_code", status);
        char *text = e != NULL ? json_dumps(e, JSON_COMPACT) : NULL;
        if (text != NULL) fprintf(stderr, "%s\n", text);
        free(text);
        json_decref(e);
    }
    return status;
}

/* Removes every "--json" before a "--" from argv; returns whether there was one. */
static bool take_json_flag(int *argc, char **argv) {
    bool found = false;
    int out = 1;
    bool rest = false;
    for (int i = 1; i < *argc; i++) {
        if (!rest && strcmp(argv[i], "--") == 0) rest = true;
        if (!rest && strcmp(argv[i], "--json") == 0) {
            found = true;
            continue;
        }
        argv[out++] = argv[i];
    }
    argv[out] = NULL;
    *argc = out;
    return found;
}

static bool wants_help(int argc, char **argv) {
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return true;
    return false;
}

static void command_help(const struct ctl_command *c) {
    printf("Usage: crescentctl [--json] %s %s\n\n%s.\n", c->name, c->args, c->summary);
    if (c->help != NULL) printf("\n%s", c->help);
    printf("\nGlobal options (before or after the command): --json, --http HOST:PORT, --rpc "
           "ENDPOINT,\n--timeout-ms MS (crescentctl --help).  Exit status: 0 success, 1 "
           "crescentd answered\nwith a failure, 2 usage error, 3 crescentd unreachable.\n");
}

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
            "  --json             one JSON document on stdout (JSON lines for events --follow);\n"
            "                     errors as {\"error\",\"command\",\"exit_code\"} on stderr\n"
            "  --http HOST:PORT   crescentd's HTTP front (default $CRESCENT_HTTP or 127.0.0.1:13333)\n"
            "  --rpc ENDPOINT     crescentd's store RPC (default $CRESCENT_RPC or tcp://127.0.0.1:50051;\n"
            "                     crescent://HOST:PORT: its native endpoint, --rpc-tcp-address;\n"
            "                     shm://NAME: same host, shared memory, --rpc-shm-path;\n"
            "                     etcd://H:P;H:P[/ID]: the leader elected in etcd, followed)\n"
            "  --timeout-ms MS    give up on a request after MS milliseconds (default 5000)\n"
            "  --admin-token-file FILE  crescentd's admin token, for rm-regex, rm --force, unmount\n"
            "                     of another's segment (default $CRESCENT_ADMIN_TOKEN)\n"
            "  --help             print this help; crescentctl CMD --help explains one command\n"
            "\nExit status: 0 success, 1 server-side failure, 2 usage error, 3 crescentd unreachable.\n",
            "version", "print crescentctl's version");
}

static const char *env_or(const char *name, const char *fallback) {
    const char *value = getenv(name);
    return value != NULL && value[0] != '\0' ? value : fallback;
}

/* --admin-token-file FILE: its first line, as crescentd reads it. */
static bool read_token(const char *path, struct ctl *ctl) {
    static char token[300];
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        ctl_error(NULL, "--admin-token-file: cannot read %s: %s", path, strerror(errno));
        return false;
    }
    bool got = fgets(token, sizeof(token), f) != NULL;
    fclose(f);
    token[got ? strcspn(token, "\r\n") : 0] = '\0';
    if (token[0] == '\0') {
        ctl_error(NULL, "--admin-token-file: %s holds no token on its first line", path);
        return false;
    }
    ctl->admin_token = token;
    return true;
}

int main(int argc, char **argv) {
    /* libcrescent's transfer layer logs each peer's transport at INFO: for a
     * command-line tool that is noise unless asked for. */
    if (getenv("CRESCENT_LOG_LEVEL") == NULL) cr_log_set_level(CR_LOG_WARN);
    else if (!cr_log_init_from_env()) cr_log_set_level(CR_LOG_WARN);
    json_errors = take_json_flag(&argc, argv);
    struct ctl ctl = {.json = json_errors, .http_address = env_or("CRESCENT_HTTP", "127.0.0.1:13333"),
                      .rpc_address = env_or("CRESCENT_RPC", "tcp://127.0.0.1:50051"),
                      .timeout_ms = 5000};
    static const struct option options[] = {{"http", required_argument, NULL, 'H'},
                                            {"rpc", required_argument, NULL, 'R'},
                                            {"timeout-ms", required_argument, NULL, 't'},
                                            {"admin-token-file", required_argument, NULL, 'A'},
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
                ctl_error(NULL, "--timeout-ms wants 1 to 600000, not '%s'", optarg);
                return finish(NULL, CTL_EXIT_USAGE);
            }
            ctl.timeout_ms = (int)ms;
        } else if (opt == 'A') {
            if (!read_token(optarg, &ctl)) return finish(NULL, CTL_EXIT_USAGE);
        } else if (opt == 'h') {
            usage(stdout);
            return CTL_EXIT_OK;
        } else {
            ctl_error(NULL, "unknown option %s (see --help)", argv[optind - 1]);
            return finish(NULL, CTL_EXIT_USAGE);
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return CTL_EXIT_USAGE;
    }
    int first = optind;
    const char *command = argv[first];
    if (strcmp(command, "version") == 0) {
        if (ctl.json)
            ctl_emit(json_pack("{s:s}", "version", CRESCENT_VERSION));
        else
            puts("crescentctl " CRESCENT_VERSION);
        return CTL_EXIT_OK;
    }
    for (size_t g = 0; g < sizeof(groups) / sizeof(groups[0]); g++) {
        for (const struct ctl_command *c = groups[g]; c->name != NULL; c++) {
            if (strcmp(c->name, command) == 0) {
                if (wants_help(argc - first, argv + first)) {
                    command_help(c);
                    return CTL_EXIT_OK;
                }
                optind = 0; /* a command may run getopt on its own argv; 0 resets GNU getopt */
                return finish(command, c->run(&ctl, argc - first, argv + first));
            }
        }
    }
    ctl_error(NULL, "unknown command '%s' (see --help)", command);
    return finish(NULL, CTL_EXIT_USAGE);
}
