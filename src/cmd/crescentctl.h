/* crescentctl's command table.  Each command group lives in its own file
 * (crescentctl_<group>.c) and exports a NULL-terminated table; crescentctl.c
 * parses the global options and dispatches. */
#ifndef CRESCENT_CMD_CRESCENTCTL_H
#define CRESCENT_CMD_CRESCENTCTL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#define CTL_EXIT_OK 0
#define CTL_EXIT_SERVER_FAILURE 1 /* the server answered with a failure */
#define CTL_EXIT_USAGE 2
#define CTL_EXIT_UNREACHABLE 3    /* crescentd could not be reached */

struct ctl {
    const char *http_address; /* --http */
    const char *rpc_address;  /* --rpc */
    int timeout_ms;
    bool json;                /* --json: one JSON document on stdout, errors as JSON */
    const char *admin_token;  /* --admin-token-file's first line; NULL: $CRESCENT_ADMIN_TOKEN */
};

struct ctl_command {
    const char *name;
    const char *args;    /* shown in --help after the name, e.g. "KEY [--force]" */
    const char *summary; /* one line for --help */
    /* argv[0] is the command name; returns an exit status. */
    int (*run)(const struct ctl *ctl, int argc, char **argv);
    /* `CMD --help` after the usage line: what it does, arguments, options, an example. */
    const char *help;
};

/* crescentctl_data.c: `put KEY FILE|-` and `get KEY [FILE|-]` over an open
 * client (the store group parses their arguments).  Return exit statuses. */
struct cr_client;
struct cr_replicate_config;
int ctl_data_put(struct cr_client *c, bool json, const char *command, const char *tenant,
                 const char *key, const char *path, const struct cr_replicate_config *config);
/* --json with a FILE: {"key","file","size_bytes"} on stdout once written; to
 * stdout the bytes are the output, as without --json. */
int ctl_data_get(struct cr_client *c, bool json, const char *command, const char *tenant,
                 const char *key, const char *path);

/* Reports an error of `command` (NULL: crescentctl itself): a line on stderr,
 * or with --json collected into the one {"error", "command", "exit_code"}
 * document written to stderr when the command returns. */
void ctl_error(const char *command, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Writes `doc` (taken) as one compact JSON line on stdout. */
void ctl_emit(json_t *doc);

/* Seconds as a person reads them: "4.2 s", "12 min 5 s", "3 h 2 min". */
void ctl_format_duration(double seconds, char *out, size_t size);

extern const struct ctl_command ctl_admin_commands[];
extern const struct ctl_command ctl_store_commands[];
extern const struct ctl_command ctl_events_commands[];
extern const struct ctl_command ctl_task_commands[];

/* Client secrets kept across crescentctl processes for the same client id
 * (crescentctl_secret.c): load after opening a client, save before closing. */
void ctl_secret_load(const char *endpoint, struct cr_client *c);
void ctl_secret_save(const char *endpoint, const struct cr_client *c);

#endif
