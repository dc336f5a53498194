/* crescentctl's store commands over the store-master RPC (--rpc), built on
 * libcrescent: mount, unmount, put and get (the bytes, with crescentctl_data.c),
 * put-start, put-end, put-revoke, replicas, exist, rm, rm-regex, ls, ping.
 *
 * Identity: crescentd accepts PutEnd/PutRevoke (and unmount) only from the
 * client id that started the put (mounted the segment).  Each crescentctl
 * run has a fresh random id unless --client-id UUID or $CRESCENT_CLIENT_ID
 * gives one, so a two-step put across invocations needs the same id for both. */
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/admin_http.h"
#include "client/client_internal.h"
#include "cmd/crescentctl.h"
#include "core/size_text.h"
#include "crescent/client.h"

/* Options a store command may accept (bit per option). */
enum {
    OPT_TENANT = 1 << 0,
    OPT_CLIENT_ID = 1 << 1,
    OPT_BASE = 1 << 2,
    OPT_ENDPOINT = 1 << 3,
    OPT_PROTOCOL = 1 << 4,
    OPT_REPLICAS = 1 << 5,
    OPT_SOFT_PIN = 1 << 6,
    OPT_PREFERRED = 1 << 7,
    OPT_FORCE = 1 << 8,
    OPT_PREFIX = 1 << 9,
    OPT_LIMIT = 1 << 10,
    OPT_HELP = 1 << 11, /* every command */
    OPT_KEEPALIVE = 1 << 12,
};


#define LS_LIMIT_DEFAULT 1000
#define LS_LIMIT_MAX 1000 /* what GET /api/v1/objects serves in one answer */

struct store_args {
    const char *tenant; /* NULL: "default" */
    const char *client_id;
    uint64_t base;
    const char *endpoint;
    const char *protocol;
    uint64_t replicas;
    bool soft_pin;
    const char *preferred;
    bool force;
    const char *prefix;
    long limit;
    bool keepalive;
    int first; /* argv index of the first positional argument */
};

static const struct option long_options[] = {
    {"tenant", required_argument, NULL, OPT_TENANT},
    {"client-id", required_argument, NULL, OPT_CLIENT_ID},
    {"base", required_argument, NULL, OPT_BASE},
    {"endpoint", required_argument, NULL, OPT_ENDPOINT},
    {"protocol", required_argument, NULL, OPT_PROTOCOL},
    {"replicas", required_argument, NULL, OPT_REPLICAS},
    {"soft-pin", no_argument, NULL, OPT_SOFT_PIN},
    {"preferred", required_argument, NULL, OPT_PREFERRED},
    {"force", no_argument, NULL, OPT_FORCE},
    {"prefix", required_argument, NULL, OPT_PREFIX},
    {"limit", required_argument, NULL, OPT_LIMIT},
    {"keepalive", no_argument, NULL, OPT_KEEPALIVE},
    {"help", no_argument, NULL, OPT_HELP},
    {0},
};

static const char store_help[] =
    "Store commands use crescentd's store RPC: --rpc ENDPOINT (default $CRESCENT_RPC or\n"
    "tcp://127.0.0.1:50051), and --http HOST:PORT for ls.\n"
    "\n"
    "Options:\n"
    "  --tenant T        the key space (default \"default\")\n"
    "  --client-id UUID  this client's identity (default $CRESCENT_CLIENT_ID, else a new\n"
    "                    random id on every run).  crescentd accepts put-end and put-revoke\n"
    "                    only from the id that ran put-start, and unmount only from the id\n"
    "                    that mounted, so give both invocations the same id:\n"
    "                      export CRESCENT_CLIENT_ID=$(cat /proc/sys/kernel/random/uuid)\n"
    "                      crescentctl put-start k1 4K && crescentctl put-end k1\n"
    "                    crescentd unmounts the segments of a client id it has not heard\n"
    "                    from for its --client-ttl (10 s by default): keep a segment\n"
    "                    mounted from here alive with `crescentctl mount --keepalive`\n"
    "                    (or `crescentctl ping --client-id ID` more often than the TTL).\n"
    "                    Once an id has mounted or pinged, crescentd requires the secret it\n"
    "                    issued then on the id's later calls: crescentctl keeps it for you\n"
    "                    in $XDG_RUNTIME_DIR/crescent/client-secrets (else ~/.cache/crescent),\n"
    "                    or give another machine $CRESCENT_CLIENT_SECRET (32 hex digits).\n"
    "  --replicas N      put-start: replicas wanted (default 1; fewer may be granted)\n"
    "  --soft-pin        put-start: keep the object through eviction while possible\n"
    "  --preferred SEG   put-start: try this segment first\n"
    "  --base N          mount: the segment's address in its owner's memory (default 0)\n"
    "  --endpoint H:P    mount: where the owner serves transfers\n"
    "  --protocol P      mount: transfer protocol (default tcp)\n"
    "  --keepalive       mount: stay in the foreground pinging crescentd (a third of its\n"
    "                    client TTL apart); SIGINT or SIGTERM unmounts and exits 0\n"
    "  --force           rm, rm-regex: remove even while a reader holds a lease\n"
    "  --prefix P        ls: keys starting with P;  --limit N: at most N (default 1000)\n"
    "\n"
    "SIZE takes K, M, G, T (binary) suffixes.  Exit status: 0 success, 1 crescentd answered\n"
    "with an error (exist: the key does not exist), 2 usage error, 3 crescentd unreachable\n"
    "(no reply within --timeout-ms).\n";

static int usage_error(const char *command, const char *what, const char *value) {
    ctl_error(command, "%s%s%s%s (see --help)", what, value ? " '" : "", value ? value : "",
              value ? "'" : "");
    return CTL_EXIT_USAGE;
}

static int take_number(const char *command, const char *name, const char *text, uint64_t *out) {
    return cr_parse_size(text, out) ? 0 : usage_error(command, name, text);
}

/* Applies one parsed option to `a`; returns 0 or an exit status. */
static int apply_option(const char *command, int opt, struct store_args *a) {
    switch (opt) {
    case OPT_TENANT: a->tenant = optarg; return 0;
    case OPT_CLIENT_ID: a->client_id = optarg; return 0;
    case OPT_BASE: return take_number(command, "--base wants a number, not", optarg, &a->base);
    case OPT_ENDPOINT: a->endpoint = optarg; return 0;
    case OPT_PROTOCOL: a->protocol = optarg; return 0;
    case OPT_REPLICAS:
        if (take_number(command, "--replicas wants 1 or more, not", optarg, &a->replicas) != 0 ||
            a->replicas == 0)
            return usage_error(command, "--replicas wants 1 or more, not", optarg);
        return 0;
    case OPT_SOFT_PIN: a->soft_pin = true; return 0;
    case OPT_PREFERRED: a->preferred = optarg; return 0;
    case OPT_FORCE: a->force = true; return 0;
    case OPT_KEEPALIVE: a->keepalive = true; return 0;
    case OPT_PREFIX: a->prefix = optarg; return 0;
    case OPT_LIMIT: {
        char *end;
        a->limit = strtol(optarg, &end, 10);
        if (*end != '\0' || a->limit < 1 || a->limit > LS_LIMIT_MAX)
            return usage_error(command, "--limit wants 1 to 1000, not", optarg);
        return 0;
    }
    default: return usage_error(command, "unknown option", NULL);
    }
}

/* Parses a command's options (any order with its positionals) and checks
 * that exactly `positionals` arguments remain.  Returns 0 or an exit status. */
static int parse_args(int argc, char **argv, int allowed, int positionals, struct store_args *a) {
    memset(a, 0, sizeof(*a));
    a->replicas = 1;
    a->limit = LS_LIMIT_DEFAULT;
    a->client_id = getenv("CRESCENT_CLIENT_ID");
    opterr = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, "", long_options, NULL)) != -1) {
        if (opt == OPT_HELP) {
            printf("Usage: crescentctl %s ...\n\n%s", argv[0], store_help);
            exit(CTL_EXIT_OK); /* help is a complete run of the command */
        }
        if (opt == '?' || opt == ':' || (opt & allowed) == 0)
            return usage_error(argv[0], "unknown or misplaced option", argv[optind - 1]);
        int rc = apply_option(argv[0], opt, a);
        if (rc != 0) return rc;
    }
    a->first = optind;
    if (positionals >= 0 && argc - optind != positionals) { /* < 0: the caller counts */
        ctl_error(argv[0], "wants %d argument%s, got %d (see --help)", positionals,
                  positionals == 1 ? "" : "s", argc - optind);
        return CTL_EXIT_USAGE;
    }
    return 0;
}

/* Opens the RPC client with the identity from --client-id / $CRESCENT_CLIENT_ID. */
static int open_client(const struct ctl *ctl, const char *command, const struct store_args *a,
                       cr_client **out) {
    uint8_t id[CR_CLIENT_ID_BYTES];
    struct cr_client_options options = {.timeout_ms = ctl->timeout_ms,
                                        .admin_token = ctl->admin_token};
    if (a->client_id != NULL && a->client_id[0] != '\0') {
        if (cr_client_uuid_parse(a->client_id, id) != CR_OK)
            return usage_error(command, "--client-id (or CRESCENT_CLIENT_ID) is not a UUID:",
                               a->client_id);
        options.client_id = id;
    }
    char error[256];
    int rc = cr_client_open(ctl->rpc_address, &options, out, error, sizeof(error));
    if (rc == CR_OK) ctl_secret_load(ctl->rpc_address, *out);
    if (rc == CR_OK) return 0;
    ctl_error(command, "%s", error);
    return rc == CR_ERR_INVALID_PARAMS ? CTL_EXIT_USAGE : CTL_EXIT_UNREACHABLE;
}

/* Closes the client, keeping a secret crescentd issued to its id for the
 * next crescentctl acting for the same id (crescentctl_secret.c). */
static void close_client(const struct ctl *ctl, cr_client *c) {
    ctl_secret_save(ctl->rpc_address, c);
    cr_client_close(c);
}

/* Reports a failed call; the exit status says whose fault it was. */
static int failed(cr_client *c, const char *command, int rc) {
    ctl_error(command, "%s", cr_client_last_error(c)[0] ? cr_client_last_error(c) : cr_strerror(rc));
    if (rc == CR_ERR_TIMEOUT || rc == CR_ERR_IO || rc == CR_ERR_RPC_FAIL)
        return CTL_EXIT_UNREACHABLE;
    return CTL_EXIT_SERVER_FAILURE;
}

/* Local checks before anything is sent: a bad argument is a usage error. */
static int check_key_arg(const char *command, const char *key) {
    const char *why;
    return cr_client_check_key(key, &why) == CR_OK ? 0 : usage_error(command, why, NULL);
}

static int check_name_arg(const char *command, const char *name, const char *what) {
    char why[128];
    if (name == NULL || cr_client_check_name(name, what, why, sizeof(why)) == CR_OK) return 0;
    return usage_error(command, why, NULL);
}

static const char *replica_status_name(enum cr_replica_status s) {
    static const char *const names[] = {"UNDEFINED", "INITIALIZED", "PROCESSING",
                                        "COMPLETE",  "REMOVED",     "FAILED"};
    return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "?";
}

static const char *replica_tier_name(enum cr_replica_medium m) {
    static const char *const names[] = {"memory", "disk", "local_disk"};
    return (unsigned)m < sizeof(names) / sizeof(names[0]) ? names[m] : "?";
}

/* Disk: the file; local_disk: the server's endpoint and segment. */
static void print_elsewhere(size_t i, const struct cr_replica *r) {
    if (r->medium == CR_MEDIUM_DISK) {
        printf("%-8zu %-11s %-12s %-20s %-18s %12" PRIu64 "  %s\n", i, "disk",
               replica_status_name(r->status), "-", "-", r->object_size, r->file_path);
        return;
    }
    printf("%-8zu %-11s %-12s %-20s 0x%016" PRIx64 " %12" PRIu64 "  %s\n", i,
           replica_tier_name(r->medium), replica_status_name(r->status),
           r->segment_name[0] ? r->segment_name : "-", r->position, r->object_size,
           r->endpoint[0] ? r->endpoint : "-");
}

static void print_replicas(const struct cr_replica_list *list) {
    printf("%-8s %-11s %-12s %-20s %-18s %12s  %s\n", "REPLICA", "TIER", "STATUS", "SEGMENT",
           "BUFFER", "SIZE", "ENDPOINT/FILE");
    for (size_t i = 0; i < list->count; i++) {
        const struct cr_replica *r = &list->replicas[i];
        if (r->medium != CR_MEDIUM_MEMORY) {
            print_elsewhere(i, r);
            continue;
        }
        for (size_t h = 0; h < r->handle_count; h++) {
            const struct cr_buf_handle *b = &r->handles[h];
            printf("%-8zu %-11s %-12s %-20s 0x%016" PRIx64 " %12" PRIu64 "  %s\n", i, "memory",
                   replica_status_name(r->status), b->segment_name, b->buffer, b->size_bytes,
                   b->transport_endpoint[0] ? b->transport_endpoint : "-");
        }
        if (r->handle_count == 0) printf("%-8zu %-11s %-12s (no buffers)\n", i, "memory",
                                         replica_status_name(r->status));
    }
}

static json_t *replicas_json(const struct cr_replica_list *list) {
    json_t *out = json_array();
    for (size_t i = 0; i < list->count; i++) {
        const struct cr_replica *r = &list->replicas[i];
        json_t *buffers = json_array();
        for (size_t h = 0; h < r->handle_count; h++) {
            const struct cr_buf_handle *b = &r->handles[h];
            json_array_append_new(buffers, json_pack("{s:s, s:I, s:I, s:s}", "segment",
                                                     b->segment_name, "buffer",
                                                     (json_int_t)b->buffer, "size_bytes",
                                                     (json_int_t)b->size_bytes, "endpoint",
                                                     b->transport_endpoint));
        }
        json_t *o = json_pack("{s:s, s:s, s:o}", "tier", replica_tier_name(r->medium), "status",
                              replica_status_name(r->status), "buffers", buffers);
        if (o != NULL && r->medium == CR_MEDIUM_DISK)
            json_object_set_new(o, "file_path", json_string(r->file_path));
        if (o != NULL && r->medium == CR_MEDIUM_LOCAL_DISK) {
            json_object_set_new(o, "endpoint", json_string(r->endpoint));
            json_object_set_new(o, "segment", json_string(r->segment_name));
        }
        if (o != NULL && r->medium != CR_MEDIUM_MEMORY)
            json_object_set_new(o, "size_bytes", json_integer((json_int_t)r->object_size));
        json_array_append_new(out, o);
    }
    return out;
}

static const char *client_id_text(cr_client *c, char text[CR_CLIENT_UUID_TEXT]) {
    uint8_t id[CR_CLIENT_ID_BYTES];
    cr_client_get_id(c, id);
    cr_client_uuid_format(id, text);
    return text;
}

/* ---- commands --------------------------------------------------------- */

static volatile sig_atomic_t keepalive_stop;

static void keepalive_signal(int sig) {
    (void)sig;
    keepalive_stop = 1;
}

/* mount --keepalive: pings until SIGINT/SIGTERM, then unmounts.  crescentd
 * unmounts a client's segments after --client-ttl without a ping; a third of
 * the TTL apart leaves two pings' slack for a loaded machine. */
static int keep_alive(const struct ctl *ctl, cr_client *c, const char *command,
                      const char *segment) {
    struct sigaction sa = {.sa_handler = keepalive_signal}; /* no SA_RESTART: sleeps end */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    uint64_t ttl_ms = 0;
    int rc = cr_client_ping(c, &ttl_ms);
    if (rc != CR_OK) return failed(c, command, rc);
    uint64_t period_ms = ttl_ms / 3 > 100 ? ttl_ms / 3 : 100;
    if (!ctl->json)
        printf("keeping %s mounted: a ping every %.1f s (client ttl %.1f s); Ctrl-C unmounts\n",
               segment, (double)period_ms / 1000.0, (double)ttl_ms / 1000.0);
    fflush(stdout);
    while (!keepalive_stop) {
        struct timespec pause = {.tv_sec = (time_t)(period_ms / 1000),
                                 .tv_nsec = (long)(period_ms % 1000) * 1000000L};
        if (nanosleep(&pause, NULL) != 0 && keepalive_stop) break;
        /* A signal during the ping may fail it (EINTR): then unmount all the same. */
        if ((rc = cr_client_ping(c, NULL)) != CR_OK && !keepalive_stop)
            return failed(c, command, rc);
    }
    rc = cr_client_unmount_segment(c, segment);
    if (rc != CR_OK) return failed(c, command, rc);
    if (ctl->json)
        ctl_emit(json_pack("{s:s}", "unmounted", segment));
    else
        printf("unmounted %s\n", segment);
    return CTL_EXIT_OK;
}

static int cmd_mount(const struct ctl *ctl, int argc, char **argv) {
    struct store_args a;
    int rc = parse_args(argc, argv,
                        OPT_BASE | OPT_ENDPOINT | OPT_PROTOCOL | OPT_CLIENT_ID | OPT_KEEPALIVE,
                        2, &a);
    if (rc != 0) return rc;
    struct cr_segment_spec spec = {.name = argv[a.first], .base = a.base,
                                   .transport_endpoint = a.endpoint, .protocol = a.protocol};
    if (!cr_parse_size(argv[a.first + 1], &spec.size_bytes) || spec.size_bytes == 0)
        return usage_error(argv[0], "SIZE wants a positive number (K/M/G/T allowed), not",
                           argv[a.first + 1]);
    if ((rc = check_name_arg(argv[0], spec.name, "segment name")) != 0 ||
        (rc = check_name_arg(argv[0], a.protocol, "protocol")) != 0)
        return rc;
    if (a.endpoint != NULL &&
        (a.endpoint[0] == '\0' || strlen(a.endpoint) > CR_CLIENT_ENDPOINT_MAX))
        return usage_error(argv[0], "--endpoint wants HOST:PORT (1 to 255 bytes)", NULL);
    if (UINT64_MAX - spec.base < spec.size_bytes)
        return usage_error(argv[0], "--base + SIZE does not fit in 64 bits", NULL);
    cr_client *c;
    if ((rc = open_client(ctl, argv[0], &a, &c)) != 0) return rc;
    rc = cr_client_mount_segment(c, &spec);
    char text[CR_CLIENT_UUID_TEXT];
    if (rc == CR_OK && ctl->json)
        ctl_emit(json_pack("{s:s, s:I, s:I, s:s?, s:s, s:s}", "mounted", spec.name, "size_bytes",
                           (json_int_t)spec.size_bytes, "base", (json_int_t)spec.base,
                           "endpoint", a.endpoint, "protocol", a.protocol ? a.protocol : "tcp",
                           "client_id", client_id_text(c, text)));
    else if (rc == CR_OK)
        printf("mounted %s: %" PRIu64 " bytes at 0x%" PRIx64 ", endpoint %s, client %s\n",
               spec.name, spec.size_bytes, spec.base, a.endpoint ? a.endpoint : "-",
               client_id_text(c, text));
    int status = rc == CR_OK ? CTL_EXIT_OK : failed(c, argv[0], rc);
    if (rc == CR_OK && a.keepalive) status = keep_alive(ctl, c, argv[0], spec.name);
    if (rc == CR_ERR_INVALID_PARAMS && a.endpoint == NULL)
        ctl_error(argv[0], "crescentd may want the owner's transfer address: --endpoint H:P");
    close_client(ctl, c);
    return status;
}

static int cmd_unmount(const struct ctl *ctl, int argc, char **argv) {
    struct store_args a;
    int rc = parse_args(argc, argv, OPT_CLIENT_ID, 1, &a);
    if (rc != 0 || (rc = check_name_arg(argv[0], argv[a.first], "segment name")) != 0) return rc;
    cr_client *c;
    if ((rc = open_client(ctl, argv[0], &a, &c)) != 0) return rc;
    rc = cr_client_unmount_segment(c, argv[a.first]);
    if (rc == CR_OK && ctl->json)
        ctl_emit(json_pack("{s:s}", "unmounted", argv[a.first]));
    else if (rc == CR_OK)
        printf("unmounted %s\n", argv[a.first]);
    int status = rc == CR_OK ? CTL_EXIT_OK : failed(c, argv[0], rc);
    close_client(ctl, c);
    return status;
}

static int cmd_put_start(const struct ctl *ctl, int argc, char **argv) {
    struct store_args a;
    int rc = parse_args(argc, argv,
                        OPT_TENANT | OPT_CLIENT_ID | OPT_REPLICAS | OPT_SOFT_PIN | OPT_PREFERRED,
                        2, &a);
    if (rc != 0 || (rc = check_key_arg(argv[0], argv[a.first])) != 0) return rc;
    struct cr_replicate_config config = {.replica_num = a.replicas, .with_soft_pin = a.soft_pin,
                                         .preferred_segment = a.preferred};
    struct cr_put_item item = {.key = argv[a.first], .config = &config};
    if (!cr_parse_size(argv[a.first + 1], &item.size_bytes) || item.size_bytes > INT64_MAX)
        return usage_error(argv[0], "SIZE wants a number of bytes, 0 or more (K/M/G/T allowed), not",
                           argv[a.first + 1]);
    if ((rc = check_name_arg(argv[0], a.tenant, "tenant id")) != 0 ||
        (rc = check_name_arg(argv[0], a.preferred, "preferred segment")) != 0)
        return rc;
    cr_client *c;
    if ((rc = open_client(ctl, argv[0], &a, &c)) != 0) return rc;
    struct cr_replica_list list;
    rc = cr_client_put_start(c, a.tenant, &item, &list);
    char text[CR_CLIENT_UUID_TEXT];
    if (rc == CR_OK && ctl->json) {
        ctl_emit(json_pack("{s:s, s:s, s:I, s:s, s:o}", "key", item.key, "tenant",
                           a.tenant ? a.tenant : CR_CLIENT_DEFAULT_TENANT, "size_bytes",
                           (json_int_t)item.size_bytes, "client_id", client_id_text(c, text),
                           "replicas", replicas_json(&list)));
        cr_client_replica_list_free(&list);
    } else if (rc == CR_OK) {
        client_id_text(c, text);
        printf("put started: %s (%" PRIu64 " bytes, %zu replica%s), client %s\n", item.key,
               item.size_bytes, list.count, list.count == 1 ? "" : "s", text);
        print_replicas(&list);
        printf("finish with: crescentctl put-end %s%s%s --client-id %s\n", item.key,
               a.tenant ? " --tenant " : "", a.tenant ? a.tenant : "", text);
        cr_client_replica_list_free(&list);
    }
    int status = rc == CR_OK ? CTL_EXIT_OK : failed(c, argv[0], rc);
    close_client(ctl, c);
    return status;
}

/* put-end, put-revoke, rm: one key, a status, one line of output. */
static int keyed_command(const struct ctl *ctl, int argc, char **argv, int allowed,
                         const char *done) {
    struct store_args a;
    int rc = parse_args(argc, argv, OPT_TENANT | allowed, 1, &a);
    if (rc != 0 || (rc = check_key_arg(argv[0], argv[a.first])) != 0 ||
        (rc = check_name_arg(argv[0], a.tenant, "tenant id")) != 0)
        return rc;
    cr_client *c;
    if ((rc = open_client(ctl, argv[0], &a, &c)) != 0) return rc;
    const char *key = argv[a.first];
    if (strcmp(argv[0], "put-end") == 0)
        rc = cr_client_put_end(c, a.tenant, key);
    else if (strcmp(argv[0], "put-revoke") == 0)
        rc = cr_client_put_revoke(c, a.tenant, key);
    else
        rc = cr_client_remove(c, a.tenant, key, a.force);
    if (rc == CR_OK && ctl->json)
        ctl_emit(json_pack("{s:s, s:s, s:s, s:b}", "command", argv[0], "key", key, "tenant",
                           a.tenant ? a.tenant : CR_CLIENT_DEFAULT_TENANT, "ok", 1));
    else if (rc == CR_OK)
        printf("%s %s\n", done, key);
    int status = rc == CR_OK ? CTL_EXIT_OK : failed(c, argv[0], rc);
    close_client(ctl, c);
    return status;
}

static int cmd_put_end(const struct ctl *ctl, int argc, char **argv) {
    return keyed_command(ctl, argc, argv, OPT_CLIENT_ID, "put ended:");
}

static int cmd_put_revoke(const struct ctl *ctl, int argc, char **argv) {
    return keyed_command(ctl, argc, argv, OPT_CLIENT_ID, "put revoked:");
}

static int cmd_rm(const struct ctl *ctl, int argc, char **argv) {
    return keyed_command(ctl, argc, argv, OPT_FORCE, "removed");
}

static int cmd_replicas(const struct ctl *ctl, int argc, char **argv) {
    struct store_args a;
    int rc = parse_args(argc, argv, OPT_TENANT, 1, &a);
    if (rc != 0 || (rc = check_key_arg(argv[0], argv[a.first])) != 0 ||
        (rc = check_name_arg(argv[0], a.tenant, "tenant id")) != 0)
        return rc;
    cr_client *c;
    if ((rc = open_client(ctl, argv[0], &a, &c)) != 0) return rc;
    struct cr_replica_list list;
    rc = cr_client_get_replica_list(c, a.tenant, argv[a.first], &list);
    if (rc == CR_OK && ctl->json)
        ctl_emit(json_pack("{s:s, s:s, s:o}", "key", argv[a.first], "tenant",
                           a.tenant ? a.tenant : CR_CLIENT_DEFAULT_TENANT, "replicas",
                           replicas_json(&list)));
    else if (rc == CR_OK)
        printf("%s: %zu replica%s\n", argv[a.first], list.count, list.count == 1 ? "" : "s"),
            print_replicas(&list);
    if (rc == CR_OK) cr_client_replica_list_free(&list);
    int status = rc == CR_OK ? CTL_EXIT_OK : failed(c, argv[0], rc);
    close_client(ctl, c);
    return status;
}

/* Exit 0 when the key exists, 1 when it does not (like test -e). */
/* put KEY FILE|- and get KEY [FILE|-]: the bytes themselves (crescentctl_data.c). */
static int cmd_put(const struct ctl *ctl, int argc, char **argv) {
    struct store_args a;
    int rc = parse_args(argc, argv, OPT_TENANT | OPT_REPLICAS | OPT_SOFT_PIN | OPT_PREFERRED, 2,
                        &a);
    if (rc != 0 || (rc = check_key_arg(argv[0], argv[a.first])) != 0 ||
        (rc = check_name_arg(argv[0], a.tenant, "tenant id")) != 0)
        return rc;
    cr_client *c;
    if ((rc = open_client(ctl, argv[0], &a, &c)) != 0) return rc;
    struct cr_replicate_config config = {.replica_num = a.replicas, .with_soft_pin = a.soft_pin,
                                         .preferred_segment = a.preferred};
    rc = ctl_data_put(c, ctl->json, argv[0], a.tenant, argv[a.first], argv[a.first + 1], &config);
    close_client(ctl, c);
    return rc;
}

static int cmd_get(const struct ctl *ctl, int argc, char **argv) {
    struct store_args a;
    /* FILE is optional: parse as 1 positional, accept a second one. */
    int rc = parse_args(argc, argv, OPT_TENANT, -1, &a);
    if (rc != 0) return rc;
    int left = argc - a.first;
    if (left < 1 || left > 2) return usage_error(argv[0], "want KEY [FILE|-]", NULL);
    if ((rc = check_key_arg(argv[0], argv[a.first])) != 0 ||
        (rc = check_name_arg(argv[0], a.tenant, "tenant id")) != 0)
        return rc;
    cr_client *c;
    if ((rc = open_client(ctl, argv[0], &a, &c)) != 0) return rc;
    rc = ctl_data_get(c, ctl->json, argv[0], a.tenant, argv[a.first],
                      left == 2 ? argv[a.first + 1] : NULL);
    close_client(ctl, c);
    return rc;
}

static int cmd_exist(const struct ctl *ctl, int argc, char **argv) {
    struct store_args a;
    int rc = parse_args(argc, argv, OPT_TENANT, 1, &a);
    if (rc != 0 || (rc = check_key_arg(argv[0], argv[a.first])) != 0 ||
        (rc = check_name_arg(argv[0], a.tenant, "tenant id")) != 0)
        return rc;
    cr_client *c;
    if ((rc = open_client(ctl, argv[0], &a, &c)) != 0) return rc;
    bool exists = false;
    rc = cr_client_exist_key(c, a.tenant, argv[a.first], &exists);
    if (rc == CR_ERR_OBJECT_NOT_FOUND) rc = CR_OK; /* an answer, not a failure */
    int status;
    if (rc == CR_OK || rc == CR_ERR_OBJECT_NOT_READY) {
        bool writing = rc == CR_ERR_OBJECT_NOT_READY;
        if (ctl->json)
            ctl_emit(json_pack("{s:s, s:b, s:b}", "key", argv[a.first], "exists", exists,
                               "being_written", writing));
        else if (writing)
            printf("%s is being written (no put-end yet)\n", argv[a.first]);
        else
            printf("%s %s\n", argv[a.first], exists ? "exists" : "does not exist");
        status = exists && !writing ? CTL_EXIT_OK : CTL_EXIT_SERVER_FAILURE;
    } else {
        status = failed(c, argv[0], rc);
    }
    close_client(ctl, c);
    return status;
}

static int cmd_rm_regex(const struct ctl *ctl, int argc, char **argv) {
    struct store_args a;
    int rc = parse_args(argc, argv, OPT_TENANT | OPT_FORCE, 1, &a);
    if (rc != 0 || (rc = check_name_arg(argv[0], a.tenant, "tenant id")) != 0) return rc;
    const char *regex = argv[a.first];
    if (regex[0] == '\0' || strlen(regex) > CR_CLIENT_KEY_MAX)
        return usage_error(argv[0], "the regex is empty or longer than 4096 bytes", NULL);
    cr_client *c;
    if ((rc = open_client(ctl, argv[0], &a, &c)) != 0) return rc;
    int64_t removed = 0;
    rc = cr_client_remove_by_regex(c, a.tenant, regex, a.force, &removed);
    if (rc == CR_OK && ctl->json)
        ctl_emit(json_pack("{s:I}", "removed", (json_int_t)removed));
    else if (rc == CR_OK)
        printf("removed %" PRId64 " object%s\n", removed, removed == 1 ? "" : "s");
    int status = rc == CR_OK ? CTL_EXIT_OK : failed(c, argv[0], rc);
    close_client(ctl, c);
    return status;
}

static int cmd_ping(const struct ctl *ctl, int argc, char **argv) {
    struct store_args a;
    int rc = parse_args(argc, argv, OPT_CLIENT_ID, 0, &a);
    if (rc != 0) return rc;
    cr_client *c;
    if ((rc = open_client(ctl, argv[0], &a, &c)) != 0) return rc;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct cr_version version;
    rc = cr_client_get_version(c, &version);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    uint64_t ttl_ms = 0;
    if (rc == CR_OK) rc = cr_client_ping(c, &ttl_ms);
    double us = (double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e3;
    char ttl[32];
    ctl_format_duration((double)ttl_ms / 1000.0, ttl, sizeof(ttl));
    if (rc == CR_OK && ctl->json)
        ctl_emit(json_pack("{s:s, s:s, s:b, s:f, s:I}", "version", version.version, "rpc",
                           ctl->rpc_address, "ready", version.ready, "round_trip_us", us,
                           "client_ttl_ms", (json_int_t)ttl_ms));
    else if (rc == CR_OK)
        printf("crescentd %s at %s: %s, round trip %.0f us, client ttl %s\n",
               version.version[0] ? version.version : "?", ctl->rpc_address,
               version.ready ? "ready" : "not ready", us, ttl);
    int status = rc == CR_OK ? (version.ready ? CTL_EXIT_OK : CTL_EXIT_SERVER_FAILURE)
                             : failed(c, argv[0], rc);
    close_client(ctl, c);
    return status;
}

/* ---- ls --------------------------------------------------------------- */

/* Percent-encodes `in` for a query string; false if `out` is too small. */
static bool url_encode(const char *in, char *out, size_t out_size) {
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)in; *p != '\0'; p++) {
        bool plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                     (*p >= '0' && *p <= '9') || strchr("-_.~", *p) != NULL;
        if (o + (plain ? 1 : 3) >= out_size) return false;
        if (plain) {
            out[o++] = (char)*p;
        } else {
            out[o++] = '%', out[o++] = hex[*p >> 4], out[o++] = hex[*p & 15];
        }
    }
    out[o] = '\0';
    return true;
}

/* STATE column of ls: complete or in flight, plus lease and pins. */
static void object_state(json_t *o, char *out, size_t size) {
    char lease[48] = "";
    json_t *left = json_object_get(o, "lease_expires_in_s");
    if (json_is_true(json_object_get(o, "leased")) && json_is_number(left)) {
        char in[24];
        ctl_format_duration(json_number_value(left), in, sizeof(in));
        snprintf(lease, sizeof(lease), ",leased (expires in %s)", in);
    }
    snprintf(out, size, "%s%s%s%s", json_is_true(json_object_get(o, "complete")) ? "complete"
                                                                              : "in-flight",
             lease,
             json_is_true(json_object_get(o, "soft_pinned")) ? ",soft-pinned" : "",
             json_is_true(json_object_get(o, "hard_pinned")) ? ",hard-pinned" : "");
}

/* Prints the objects of /api/v1/objects ({"count", "truncated", "objects":
 * [{"key", "size_bytes", "complete", "leased", ..., "replicas": [...]}]});
 * returns an exit status, or -1 when the answer is not that JSON (the caller
 * then falls back to RPC). */
static int print_objects_json(const struct ctl *ctl, const char *body) {
    json_t *root = json_loads(body, 0, NULL);
    json_t *objects = json_object_get(root, "objects");
    if (!json_is_array(objects)) {
        json_decref(root);
        return -1;
    }
    if (ctl->json) {
        ctl_emit(root);
        return CTL_EXIT_OK;
    }
    printf("%-40s %12s %8s  %s\n", "KEY", "SIZE", "REPLICAS", "STATE");
    size_t i;
    json_t *o;
    json_array_foreach(objects, i, o) {
        const char *key = json_string_value(json_object_get(o, "key"));
        char state[96];
        object_state(o, state, sizeof(state));
        printf("%-40s %12lld %8zu  %s\n", key ? key : "?",
               (long long)json_integer_value(json_object_get(o, "size_bytes")),
               json_array_size(json_object_get(o, "replicas")), state);
    }
    size_t n = json_array_size(objects);
    printf("%zu object%s%s\n", n, n == 1 ? "" : "s",
           json_is_true(json_object_get(root, "truncated")) ? " (more: raise --limit)" : "");
    json_decref(root);
    return CTL_EXIT_OK;
}

/* ls over HTTP (no leases taken).  Returns -1 only when the HTTP front
 * cannot be reached (then the RPC regex path is the fallback); an HTTP
 * error is reported, not silently replaced by a call that leases every
 * matching object. */
static int ls_http(const struct ctl *ctl, const struct store_args *a) {
    char prefix[3 * CR_CLIENT_KEY_MAX + 1] = "", tenant[3 * CR_CLIENT_NAME_MAX + 1] = "";
    if (!url_encode(a->prefix ? a->prefix : "", prefix, sizeof(prefix)) ||
        !url_encode(a->tenant ? a->tenant : CR_CLIENT_DEFAULT_TENANT, tenant, sizeof(tenant)))
        return -1;
    size_t size = strlen(prefix) + strlen(tenant) + 96;
    char *path = malloc(size);
    if (path == NULL) return -1;
    snprintf(path, size, "/api/v1/objects?prefix=%s&limit=%ld&tenant=%s", prefix, a->limit,
             tenant);
    int status = 0;
    char *body = NULL;
    char error[256];
    int rc = cr_admin_http_get(ctl->http_address, path, ctl->timeout_ms, &status, &body, error,
                               sizeof(error));
    free(path);
    int out = -1;
    if (rc == CR_OK && status == 200) {
        out = print_objects_json(ctl, body);
    } else if (rc == CR_OK) {
        ctl_error("ls", "HTTP %d: %s", status, body != NULL ? body : "");
        out = CTL_EXIT_SERVER_FAILURE;
    }
    free(body);
    return out;
}

/* Appends `prefix` with PCRE metacharacters escaped, anchored at the start. */
static char *prefix_regex(const char *prefix) {
    size_t len = strlen(prefix);
    char *out = malloc(2 * len + 2);
    if (out == NULL) return NULL;
    size_t o = 0;
    out[o++] = '^';
    for (size_t i = 0; i < len; i++) {
        if (strchr("\\^$.|?*+()[]{}", prefix[i]) != NULL) out[o++] = '\\';
        out[o++] = prefix[i];
    }
    out[o] = '\0';
    return out;
}

/* ls over RPC: GetReplicaListByRegex (note: grants each object a lease). */
static int ls_rpc(const struct ctl *ctl, const char *command, const struct store_args *a) {
    cr_client *c;
    int rc = open_client(ctl, command, a, &c);
    if (rc != 0) return rc;
    char *regex = prefix_regex(a->prefix ? a->prefix : "");
    struct cr_replica_lists lists;
    rc = regex == NULL ? CR_ERR_NOMEM
                       : cr_client_get_replica_list_by_regex(c, a->tenant, regex, &lists);
    free(regex);
    if (rc == CR_OK && ctl->json) {
        json_t *objects = json_array();
        for (size_t i = 0; i < lists.count && i < (size_t)a->limit; i++)
            json_array_append_new(objects, json_pack("{s:s, s:o}", "key", lists.lists[i].key,
                                                     "replicas", replicas_json(&lists.lists[i])));
        ctl_emit(json_pack("{s:I, s:b, s:o}", "count", (json_int_t)json_array_size(objects),
                           "truncated", lists.count > (size_t)a->limit, "objects", objects));
        cr_client_replica_lists_free(&lists);
    } else if (rc == CR_OK) {
        printf("%-40s %12s %8s  %s\n", "KEY", "SIZE", "REPLICAS", "STATE");
        size_t shown = 0;
        for (size_t i = 0; i < lists.count && shown < (size_t)a->limit; i++, shown++) {
            const struct cr_replica_list *l = &lists.lists[i];
            uint64_t size = l->count > 0 && l->replicas[0].handle_count > 0
                                ? l->replicas[0].handles[0].size_bytes : 0;
            printf("%-40s %12" PRIu64 " %8zu  %s\n", l->key, size, l->count,
                   l->count > 0 ? replica_status_name(l->replicas[0].status) : "-");
        }
        printf("%zu object%s\n", shown, shown == 1 ? "" : "s");
        cr_client_replica_lists_free(&lists);
    }
    int status = rc == CR_OK ? CTL_EXIT_OK : failed(c, command, rc);
    close_client(ctl, c);
    return status;
}

static int cmd_ls(const struct ctl *ctl, int argc, char **argv) {
    struct store_args a;
    int rc = parse_args(argc, argv, OPT_TENANT | OPT_PREFIX | OPT_LIMIT, 0, &a);
    if (rc != 0 || (rc = check_name_arg(argv[0], a.tenant, "tenant id")) != 0) return rc;
    if (a.prefix != NULL && strlen(a.prefix) > CR_CLIENT_KEY_MAX)
        return usage_error(argv[0], "--prefix is longer than 4096 bytes", NULL);
    rc = ls_http(ctl, &a);
    return rc >= 0 ? rc : ls_rpc(ctl, argv[0], &a);
}

/* store-stats: GET /api/v1/stats as aligned "name value" lines. */
static int cmd_store_stats(const struct ctl *ctl, int argc, char **argv) {
    struct store_args a;
    int rc = parse_args(argc, argv, 0, 0, &a);
    if (rc != 0) return rc;
    int status = 0;
    char *body = NULL;
    char error[256] = "";
    rc = cr_admin_http_get(ctl->http_address, "/api/v1/stats", ctl->timeout_ms, &status, &body,
                           error, sizeof(error));
    if (rc != CR_OK) {
        ctl_error(argv[0], "%s", error[0] ? error : cr_strerror(rc));
        return rc == CR_ERR_INVALID_PARAMS ? CTL_EXIT_USAGE : CTL_EXIT_UNREACHABLE;
    }
    json_t *root = json_loads(body, 0, NULL);
    free(body);
    if (status != 200 || !json_is_object(root)) {
        ctl_error(argv[0], "unexpected answer (HTTP %d)", status);
        json_decref(root);
        return CTL_EXIT_SERVER_FAILURE;
    }
    if (ctl->json) {
        ctl_emit(root);
        return CTL_EXIT_OK;
    }
    const char *name;
    json_t *value;
    json_object_foreach(root, name, value) {
        if (json_is_integer(value))
            printf("%-24s %lld\n", name, (long long)json_integer_value(value));
        else if (json_is_real(value))
            printf("%-24s %.4f\n", name, json_real_value(value));
    }
    json_decref(root);
    return CTL_EXIT_OK;
}

/* segments: GET /api/v1/segments as one line per mounted segment. */
static int cmd_segments(const struct ctl *ctl, int argc, char **argv) {
    struct store_args a;
    int rc = parse_args(argc, argv, 0, 0, &a);
    if (rc != 0) return rc;
    int status = 0;
    char *body = NULL;
    char error[256] = "";
    rc = cr_admin_http_get(ctl->http_address, "/api/v1/segments", ctl->timeout_ms, &status,
                           &body, error, sizeof(error));
    if (rc != CR_OK) {
        ctl_error(argv[0], "%s", error[0] ? error : cr_strerror(rc));
        return rc == CR_ERR_INVALID_PARAMS ? CTL_EXIT_USAGE : CTL_EXIT_UNREACHABLE;
    }
    json_t *root = json_loads(body, 0, NULL);
    free(body);
    json_t *list = json_object_get(root, "segments");
    if (status != 200 || !json_is_array(list)) {
        ctl_error(argv[0], "unexpected answer (HTTP %d)", status);
        json_decref(root);
        return CTL_EXIT_SERVER_FAILURE;
    }
    if (ctl->json) {
        ctl_emit(root);
        return CTL_EXIT_OK;
    }
    printf("%-24s %14s %14s %7s  %-8s %s\n", "NAME", "SIZE", "USED", "USED%", "PROTOCOL",
           "ENDPOINT");
    size_t i;
    json_t *seg;
    json_array_foreach(list, i, seg) {
        double size = (double)json_integer_value(json_object_get(seg, "size"));
        double used = (double)json_integer_value(json_object_get(seg, "used_bytes"));
        const char *name = json_string_value(json_object_get(seg, "name"));
        const char *protocol = json_string_value(json_object_get(seg, "protocol"));
        const char *endpoint = json_string_value(json_object_get(seg, "endpoint"));
        printf("%-24s %14.0f %14.0f %6.1f%%  %-8s %s\n", name ? name : "?", size, used,
               size > 0 ? used / size * 100.0 : 0.0, protocol ? protocol : "?",
               endpoint ? endpoint : "?");
    }
    printf("%zu segment%s\n", json_array_size(list), json_array_size(list) == 1 ? "" : "s");
    json_decref(root);
    return CTL_EXIT_OK;
}

#define RPC_NOTE "Over the store RPC (--rpc, default $CRESCENT_RPC or tcp://127.0.0.1:50051).\n"
#define TENANT_OPT "  --tenant T         the key space (default \"default\")\n"
#define CLIENT_OPT                                                                         \
    "  --client-id UUID   this client's identity (default $CRESCENT_CLIENT_ID, else a new\n" \
    "                     one per run): put-end, put-revoke and unmount are accepted only\n" \
    "                     from the id that ran put-start or mount\n"

const struct ctl_command ctl_store_commands[] = {
    {"mount", "NAME SIZE [--base N] [--endpoint H:P] [--keepalive]",
     "mount a segment: contribute SIZE bytes of memory to the store", cmd_mount,
     RPC_NOTE "\nArguments:\n  NAME               the segment's name (unique in crescentd)\n"
     "  SIZE               bytes; K, M, G, T suffixes (binary)\n"
     "\nOptions:\n"
     "  --endpoint H:P     where the owner serves transfers of this memory\n"
     "  --base N           the segment's address in its owner's memory (default 0)\n"
     "  --protocol P       transfer protocol (default tcp)\n"
     "  --keepalive        stay in the foreground, pinging crescentd a third of its client\n"
     "                     TTL apart (it unmounts a quiet client's segments after\n"
     "                     --client-ttl, 10 s by default); SIGINT or SIGTERM unmounts\n" CLIENT_OPT
     "\nExample:\n  crescentctl mount seg0 1G --endpoint 10.0.0.5:12345 --keepalive\n"},
    {"unmount", "NAME [--client-id ID]", "unmount a segment (as the client that mounted it)",
     cmd_unmount,
     RPC_NOTE "\nArguments:\n  NAME               the segment's name\n\nOptions:\n" CLIENT_OPT
     "\nExample:\n  crescentctl unmount seg0 --client-id $CRESCENT_CLIENT_ID\n"},
    {"put-start", "KEY SIZE [--replicas N] [--soft-pin] [--preferred S]",
     "allocate replicas for KEY (then write them, then put-end)", cmd_put_start,
     RPC_NOTE "\nArguments:\n  KEY                the object's key (1 to 4096 bytes)\n"
     "  SIZE               bytes (0: an empty object); K, M, G, T suffixes (binary)\n"
     "\nOptions:\n  --replicas N       replicas wanted (default 1; fewer may be granted)\n"
     "  --soft-pin         keep the object through eviction while possible\n"
     "  --preferred SEG    try this segment first\n" TENANT_OPT CLIENT_OPT
     "\nExample:\n  export CRESCENT_CLIENT_ID=$(cat /proc/sys/kernel/random/uuid)\n"
     "  crescentctl put-start key1 4096 --replicas 1 && crescentctl put-end key1\n"},
    {"put-end", "KEY [--client-id ID]", "complete a put (same client id as put-start)",
     cmd_put_end,
     RPC_NOTE "\nArguments:\n  KEY                the key put-start allocated\n\nOptions:\n" TENANT_OPT
     CLIENT_OPT "\nExample:\n  crescentctl put-end key1 --client-id 6f1c2d3e-4b5a-4c7d-8e9f-0a1b2c3d4e5f\n"},
    {"put-revoke", "KEY [--client-id ID]", "abandon a put (same client id as put-start)",
     cmd_put_revoke,
     RPC_NOTE "\nArguments:\n  KEY                the key put-start allocated\n\nOptions:\n" TENANT_OPT
     CLIENT_OPT "\nExample:\n  crescentctl put-revoke key1\n"},
    {"put", "KEY FILE|- [--replicas N] [--soft-pin] [--preferred S]",
     "store the bytes of FILE (-: stdin) under KEY", cmd_put,
     RPC_NOTE "The bytes go straight to the store servers the master picks (crescent-store,\n"
     "crescentd's local segment), all replicas in parallel; the put ends with the bytes'\n"
     "XXH3 checksum, or is revoked if any write fails.  An empty FILE stores a 0-byte\n"
     "object (get writes an empty file back).\n"
     "A progress line is shown on stderr for objects of 8 MiB or more when it is a tty.\n"
     "\nArguments:\n  KEY                the object's key\n  FILE               a file, or - for stdin\n"
     "\nOptions:\n  --replicas N       replicas wanted (default 1; fewer may be granted)\n"
     "  --soft-pin         keep the object through eviction while possible\n"
     "  --preferred SEG    try this segment first\n" TENANT_OPT
     "\nExample:\n  crescentctl put model/blk-0 kv.bin --replicas 2\n"},
    {"get", "KEY [FILE|-]", "read KEY's bytes into FILE (default stdout)", cmd_get,
     RPC_NOTE "Reads the nearest complete replica (same host first), falling back to the next\n"
     "one if a read fails; the bytes are checked against the put's checksum and written\n"
     "only when they match and the read finished within its lease.\n"
     "\nArguments:\n  KEY                the object's key\n"
     "  FILE               where to write (default, or -: stdout)\n\nOptions:\n" TENANT_OPT
     "\nExample:\n  crescentctl get model/blk-0 copy.bin && cmp kv.bin copy.bin\n"},
    {"replicas", "KEY", "replica list of KEY (takes a read lease)", cmd_replicas,
     RPC_NOTE "\nArguments:\n  KEY                the object's key\n\nOptions:\n" TENANT_OPT
     "\nExample:\n  crescentctl replicas key1\n  crescentctl replicas key1 --json | jq -r "
     "'.replicas[0].buffers[0].endpoint'\n"},
    {"exist", "KEY", "exit 0 if KEY exists, 1 if not", cmd_exist,
     RPC_NOTE "\nArguments:\n  KEY                the object's key\n\nOptions:\n" TENANT_OPT
     "\nExample:\n  crescentctl exist key1 && echo cached\n"},
    {"rm", "KEY [--force]", "remove KEY (--force: even while leased)", cmd_rm,
     RPC_NOTE "\nArguments:\n  KEY                the object's key\n\nOptions:\n"
     "  --force            remove even while a reader holds a lease\n" TENANT_OPT
     "\nExample:\n  crescentctl rm key1\n"},
    {"rm-regex", "REGEX [--force]", "remove every key matching the PCRE2 REGEX", cmd_rm_regex,
     RPC_NOTE "\nArguments:\n  REGEX              a PCRE2 pattern matched against whole keys\n"
     "\nOptions:\n  --force            remove even while a reader holds a lease\n" TENANT_OPT
     "\nExample:\n  crescentctl rm-regex '^session-42/'\n"},
    {"ls", "[--prefix P] [--limit N]", "list objects (HTTP admin; RPC regex if HTTP is down)",
     cmd_ls,
     "Over HTTP (GET /api/v1/objects on --http): takes no lease.  Only when the HTTP front\n"
     "cannot be reached, over the store RPC (GetReplicaListByRegex, which leases them).\n"
     "\nOptions:\n  --prefix P         keys starting with P\n"
     "  --limit N          at most N objects (1 to 1000, default 1000)\n" TENANT_OPT
     "\nExample:\n  crescentctl ls --prefix key --limit 10\n"},
    {"ping", "", "store RPC round trip, version and client TTL", cmd_ping,
     RPC_NOTE "Pings with this client's id (which keeps a segment it mounted alive).\n"
     "\nOptions:\n" CLIENT_OPT "\nExample:\n  crescentctl ping\n"
     "  crescentd 0.1.0 at tcp://127.0.0.1:50051: ready, round trip 180 us, client ttl 10.0 s\n"},
    {"store-stats", "", "store capacity, usage, objects, leases, evictions (HTTP)",
     cmd_store_stats,
     "GET /api/v1/stats on --http as name-value lines.  No arguments.\n"
     "\nExample:\n  crescentctl store-stats\n"},
    {"segments", "", "the mounted segments: size, use, protocol, endpoint (HTTP)", cmd_segments,
     "GET /api/v1/segments on --http, one line per segment, then the count.  No arguments.\n"
     "--json: the /api/v1/segments document.\n"
     "\nExample:\n  crescentctl segments\n  crescentctl segments --json\n"},
    {NULL, NULL, NULL, NULL, NULL},
};
