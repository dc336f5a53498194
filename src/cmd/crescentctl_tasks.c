/* crescentctl's copy/move task commands over the store-master RPC (--rpc):
 * copy, move, task.  A task is carried out by the store server that holds
 * the source replica; these commands create tasks and watch them. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd/crescentctl.h"
#include "crescent/client.h"

#define WAIT_POLL_MS 200 /* QueryTask period while --wait watches a task */

struct task_args {
    const char *tenant;
    const char *source;
    bool wait;
    int first; /* argv index of the first positional */
};

#define TASK_NOTE                                                                             \
    "crescentd hands a task to the client that mounted its source segment, which copies\n"     \
    "the bytes and reports; a task not reported within crescentd's --task-timeout-sec\n"        \
    "(300 s) is rolled back and FAILED.  If that client is lost (it misses its pings for\n"     \
    "--client-ttl, or the segment is unmounted) the task goes to another client holding a\n"   \
    "complete replica, or FAILS at once naming it.  Finished tasks are kept for `task` up\n"   \
    "to crescentd's --task-retention (10000).\n"
#define WAIT_OPT                                                                              \
    "  --wait             watch the task until it ends, printing each change of status or\n"  \
    "                     message on stderr; exit 0 on SUCCESS, 1 on FAILED\n"
static int usage_error(const char *command, const char *what) {
    ctl_error(command, "%s (see --help)", what);
    return CTL_EXIT_USAGE;
}

/* Options anywhere; at least `min` and at most `max` positionals. */
static int parse_args(int argc, char **argv, int min, int max, struct task_args *a) {
    static const struct option options[] = {
        {"tenant", required_argument, NULL, 't'}, {"source", required_argument, NULL, 's'},
        {"wait", no_argument, NULL, 'w'},         {0},
    };
    memset(a, 0, sizeof(*a));
    opterr = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
        switch (opt) {
        case 't': a->tenant = optarg; break;
        case 's': a->source = optarg; break;
        case 'w': a->wait = true; break;
        default: return usage_error(argv[0], "unknown option");
        }
    }
    a->first = optind;
    int n = argc - optind;
    if (n < min || n > max) {
        ctl_error(argv[0], "wants %d%s argument%s, got %d (see --help)", min,
                  max > min ? " or more" : "", min == 1 ? "" : "s", n);
        return CTL_EXIT_USAGE;
    }
    return 0;
}

static int open_client(const struct ctl *ctl, const char *command, cr_client **out) {
    struct cr_client_options options = {.timeout_ms = ctl->timeout_ms};
    char error[256];
    int rc = cr_client_open(ctl->rpc_address, &options, out, error, sizeof(error));
    if (rc == CR_OK) return 0;
    ctl_error(command, "%s", error);
    return rc == CR_ERR_INVALID_PARAMS ? CTL_EXIT_USAGE : CTL_EXIT_UNREACHABLE;
}

static int failed(cr_client *c, const char *command, int rc) {
    ctl_error(command, "%s",
              cr_client_last_error(c)[0] ? cr_client_last_error(c) : cr_strerror(rc));
    if (rc == CR_ERR_TIMEOUT || rc == CR_ERR_IO || rc == CR_ERR_RPC_FAIL)
        return CTL_EXIT_UNREACHABLE;
    if (rc == CR_ERR_INVALID_PARAMS && cr_client_last_error(c)[0] == '\0') return CTL_EXIT_USAGE;
    return CTL_EXIT_SERVER_FAILURE;
}

static void print_task(const struct ctl *ctl, const struct cr_task_info *t) {
    char id[CR_CLIENT_UUID_TEXT], client[CR_CLIENT_UUID_TEXT];
    cr_client_uuid_format(t->id, id);
    cr_client_uuid_format(t->assigned_client, client);
    if (ctl->json) { /* the fields of GET /api/v1/tasks/ID */
        ctl_emit(json_pack("{s:s, s:s, s:s, s:I, s:I, s:s, s:s}", "id", id, "type",
                           cr_client_task_type_name(t->type), "status",
                           cr_client_task_status_name(t->status), "created_at_ms_epoch",
                           (json_int_t)t->created_at_ms_epoch, "last_updated_at_ms_epoch",
                           (json_int_t)t->last_updated_at_ms_epoch, "assigned_client", client,
                           "message", t->message));
        return;
    }
    printf("task %s\n  type      %s\n  status    %s\n  created   %lld ms since epoch\n"
           "  updated   %lld ms since epoch\n  executor  %s\n  message   %s\n",
           id, cr_client_task_type_name(t->type), cr_client_task_status_name(t->status),
           (long long)t->created_at_ms_epoch, (long long)t->last_updated_at_ms_epoch, client,
           t->message);
}

static bool finished(const struct cr_task_info *t) {
    return t->status == CR_CLIENT_TASK_SUCCESS || t->status == CR_CLIENT_TASK_FAILED;
}

/* Watches a task until it ends, printing each change on stderr. */
static int wait_task(const struct ctl *ctl, cr_client *c, const char *command,
                     const uint8_t id[CR_CLIENT_ID_BYTES]) {
    struct cr_task_info t, last = {.status = (enum cr_client_task_status)-1};
    for (;;) {
        int rc = cr_client_query_task(c, id, &t);
        if (rc != CR_OK) return failed(c, command, rc);
        if (!ctl->json && (t.status != last.status || strcmp(t.message, last.message) != 0))
            fprintf(stderr, "%s: %s\n", cr_client_task_status_name(t.status), t.message);
        if (finished(&t)) break;
        last = t;
        struct timespec pause = {0, WAIT_POLL_MS * 1000000L};
        nanosleep(&pause, NULL);
    }
    print_task(ctl, &t);
    return t.status == CR_CLIENT_TASK_SUCCESS ? CTL_EXIT_OK : CTL_EXIT_SERVER_FAILURE;
}

/* Prints a new task's id, then watches it with --wait. */
static int created(const struct ctl *ctl, cr_client *c, const char *command,
                   const struct task_args *a, int rc, const uint8_t id[CR_CLIENT_ID_BYTES]) {
    if (rc != CR_OK) return failed(c, command, rc);
    if (a->wait) return wait_task(ctl, c, command, id); /* --json: the final task only */
    char text[CR_CLIENT_UUID_TEXT];
    cr_client_uuid_format(id, text);
    if (ctl->json)
        ctl_emit(json_pack("{s:s}", "task_id", text));
    else
        printf("%s\n", text);
    return CTL_EXIT_OK;
}

static int cmd_copy(const struct ctl *ctl, int argc, char **argv) {
    struct task_args a;
    int rc = parse_args(argc, argv, 2, 8, &a);
    cr_client *c;
    if (rc != 0 || (rc = open_client(ctl, argv[0], &c)) != 0) return rc;
    uint8_t id[CR_CLIENT_ID_BYTES];
    rc = cr_client_create_copy_task(c, a.tenant, argv[a.first], a.source,
                                    (const char *const *)&argv[a.first + 1],
                                    (size_t)(argc - a.first - 1), id);
    int status = created(ctl, c, argv[0], &a, rc, id);
    cr_client_close(c);
    return status;
}

static int cmd_move(const struct ctl *ctl, int argc, char **argv) {
    struct task_args a;
    int rc = parse_args(argc, argv, 3, 3, &a);
    if (rc == 0 && a.source != NULL) return usage_error(argv[0], "move names its SOURCE itself");
    cr_client *c;
    if (rc != 0 || (rc = open_client(ctl, argv[0], &c)) != 0) return rc;
    uint8_t id[CR_CLIENT_ID_BYTES];
    rc = cr_client_create_move_task(c, a.tenant, argv[a.first], argv[a.first + 1],
                                    argv[a.first + 2], id);
    int status = created(ctl, c, argv[0], &a, rc, id);
    cr_client_close(c);
    return status;
}

static int cmd_task(const struct ctl *ctl, int argc, char **argv) {
    struct task_args a;
    int rc = parse_args(argc, argv, 1, 1, &a);
    if (rc != 0) return rc;
    uint8_t id[CR_CLIENT_ID_BYTES];
    if (cr_client_uuid_parse(argv[a.first], id) != CR_OK)
        return usage_error(argv[0], "a task id is a UUID (as copy and move print it)");
    cr_client *c;
    if ((rc = open_client(ctl, argv[0], &c)) != 0) return rc;
    int status;
    if (a.wait) {
        status = wait_task(ctl, c, argv[0], id);
    } else {
        struct cr_task_info t;
        rc = cr_client_query_task(c, id, &t);
        if (rc == CR_OK) print_task(ctl, &t);
        status = rc == CR_OK ? CTL_EXIT_OK : failed(c, argv[0], rc);
    }
    cr_client_close(c);
    return status;
}

const struct ctl_command ctl_task_commands[] = {
    {"copy", "KEY TARGET... [--source S] [--wait]",
     "copy KEY onto other segments: prints the copy task's id", cmd_copy,
     TASK_NOTE "\nArguments:\n  KEY                the object (complete: its put ended)\n"
     "  TARGET...          1 to 7 segments that hold no replica of KEY\n"
     "\nOptions:\n  --source SEG       read from this segment (default: any complete replica)\n"
     "  --tenant T         the key space (default \"default\")\n" WAIT_OPT
     "\nExample:\n  crescentctl copy key1 seg1 seg2 --wait\n"},
    {"move", "KEY SOURCE TARGET [--wait]",
     "move KEY's replica from SOURCE to TARGET (released once no lease holds it)", cmd_move,
     TASK_NOTE "\nArguments:\n  KEY                the object (complete: its put ended)\n"
     "  SOURCE             a segment holding a complete replica of KEY\n"
     "  TARGET             a segment holding none\n"
     "\nOptions:\n  --tenant T         the key space (default \"default\")\n" WAIT_OPT
     "\nExample:\n  crescentctl move key1 seg0 seg1 --wait\n"},
    {"task", "ID [--wait]", "a copy/move task's type, status, times, executor and message",
     cmd_task,
     TASK_NOTE "\nArguments:\n  ID                 the task id copy or move printed (a UUID)\n"
     "\nOptions:\n" WAIT_OPT
     "\nExample:\n  crescentctl task 3f2a9c1e-0b7d-4e8a-9c61-2d5f7a8b9c0d --wait\n"},
    {NULL, NULL, NULL, NULL, NULL},
};
