/* crescentctl events --follow: prints crescentd's store events as JSON lines.
 *
 *   crescentctl events --follow [--from SEQ] [--sub ENDPOINT] [--replay ENDPOINT]
 *                               [--topic T] [--count N]
 *
 * One JSON object per event (src/msgs/store_event_json.h), flushed per batch.
 * With --from it subscribes first, replays from SEQ, then follows live without
 * gaps or duplicates (client/events_follow.h).  Notices go to stderr:
 *   - crescentd restarted: its seq starts again at 0 on every start; the
 *     follower sees seq go backwards with a newer batch timestamp, says so,
 *     and follows the new sequence;
 *   - a gap: batches neither received live nor still in the replay buffer.
 * A reader slower than crescentd (a terminal) costs bounded memory: the
 * follower holds at most 10000 unread live batches, crescentd drops for it
 * past its own send high-water mark, and the follower replays the hole or
 * reports it as a gap. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/events_follow.h"
#include "cmd/crescentctl.h"
#include "crescent/error.h"
#include "msgs/store_event_json.h"

/* 10000: LIVE_RCVHWM in src/client/events_follow.c. */
static const char events_help[] =
    "Prints crescentd's store events as JSON lines, one per event, flushed per batch\n"
    "(with or without --json).\n"
    "\nOptions:\n"
    "  --follow           follow the event stream (required)\n"
    "  --from SEQ         replay from SEQ first, then follow live without gaps or duplicates\n"
    "  --sub ENDPOINT     the events PUB (default $CRESCENT_EVENTS or tcp://127.0.0.1:19997)\n"
    "  --replay ENDPOINT  the replay ROUTER (default $CRESCENT_REPLAY or tcp://127.0.0.1:19998)\n"
    "  --topic T          subscription topic (default mooncake)\n"
    "  --count N          exit after N events\n"
    "  --help             print this help\n"
    "\n"
    "Notices go to stderr: crescentd restarted (seq starts at 0 on every start), and gaps\n"
    "(batches neither received live nor still in the replay buffer).  At most 10000 unread\n"
    "live batches are held here: when the reader is slower than crescentd, crescentd keeps\n"
    "the rest up to its --event-send-hwm and then drops them for this follower, which\n"
    "replays them or reports them as a gap.\n"
    "\n"
    "Example:\n"
    "  crescentctl events --follow --from 0 --count 10\n";

struct events_args {
    cr_events_follow_config config;
    unsigned long long count; /* 0: forever */
    bool follow;
};

static const char *env_or(const char *name, const char *fallback) {
    const char *value = getenv(name);
    return value != NULL && value[0] != '\0' ? value : fallback;
}

static bool parse_u64(const char *text, unsigned long long *out) {
    char *end;
    if (text[0] == '\0' || text[0] == '-') return false;
    *out = strtoull(text, &end, 10);
    return *end == '\0';
}

#define EVENTS_HELP (-1) /* parse_args: --help was printed */

/* Returns 0, EVENTS_HELP, or an exit status after a usage message. */
static int parse_args(int argc, char **argv, struct events_args *a) {
    static const struct option options[] = {
        {"follow", no_argument, NULL, 'f'},      {"from", required_argument, NULL, 'F'},
        {"sub", required_argument, NULL, 's'},   {"replay", required_argument, NULL, 'r'},
        {"topic", required_argument, NULL, 't'}, {"count", required_argument, NULL, 'n'},
        {"help", no_argument, NULL, 'h'},        {0}};
    a->config.sub_endpoint = env_or("CRESCENT_EVENTS", "tcp://127.0.0.1:19997");
    a->config.replay_endpoint = env_or("CRESCENT_REPLAY", "tcp://127.0.0.1:19998");
    a->config.topic = "mooncake";
    opterr = 0;
    int opt;
    unsigned long long value;
    while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
        if (opt == 'h') {
            printf("Usage: crescentctl events --follow [--from SEQ] [--sub EP] [--replay EP]\n\n%s",
                   events_help);
            return EVENTS_HELP;
        } else if (opt == 'f') {
            a->follow = true;
        } else if (opt == 'F' && parse_u64(optarg, &value)) {
            a->config.replay_from_start = true;
            a->config.start_seq = value;
        } else if (opt == 's') {
            a->config.sub_endpoint = optarg;
        } else if (opt == 'r') {
            a->config.replay_endpoint = optarg;
        } else if (opt == 't') {
            a->config.topic = optarg;
        } else if (opt == 'n' && parse_u64(optarg, &value) && value > 0) {
            a->count = value;
        } else {
            ctl_error("events", "bad option or value '%s' (see --help)", argv[optind - 1]);
            return CTL_EXIT_USAGE;
        }
    }
    if (!a->follow || optind != argc) {
        ctl_error("events", "usage: events --follow [--from SEQ] [--sub ENDPOINT]"
                            " [--replay ENDPOINT] [--topic T] [--count N]");
        return CTL_EXIT_USAGE;
    }
    return 0;
}

/* Handles one item; returns how many events it printed. */
static size_t print_item(const cr_events_item *item) {
    char error[256] = "";
    if (item->kind == CR_EVENTS_ITEM_RESTART) {
        fprintf(stderr,
                "crescentctl: event seq went back from %llu to %llu: crescentd restarted "
                "(seq starts at 0 on every start); following the new sequence\n",
                (unsigned long long)item->gap_first, (unsigned long long)item->seq);
        return 0;
    }
    if (item->kind == CR_EVENTS_ITEM_GAP) {
        fprintf(stderr, "crescentctl: batches %llu..%llu were missed and are no longer in the "
                        "replay buffer\n",
                (unsigned long long)item->gap_first, (unsigned long long)item->gap_last);
        return 0;
    }
    if (item->seq > INT64_MAX) return 0;
    json_t *events = NULL;
    int rc = cr_store_event_json_decode(item->payload, item->len, item->seq, &events, error,
                                        sizeof(error));
    if (rc != CR_OK) {
        fprintf(stderr, "crescentctl: batch %llu does not decode: %s\n",
                (unsigned long long)item->seq, error[0] ? error : cr_strerror(rc));
        return 0;
    }
    size_t i;
    json_t *event;
    json_array_foreach(events, i, event) {
        char *line = json_dumps(event, JSON_COMPACT);
        if (line != NULL) puts(line);
        free(line);
    }
    size_t n = json_array_size(events);
    json_decref(events);
    fflush(stdout);
    return n;
}

static int cmd_events(const struct ctl *ctl, int argc, char **argv) {
    (void)ctl;
    struct events_args a = {0};
    int usage = parse_args(argc, argv, &a);
    if (usage == EVENTS_HELP) return CTL_EXIT_OK;
    if (usage != 0) return usage;
    cr_events_follower *follower = NULL;
    int rc = cr_events_follow_create(&a.config, &follower);
    if (rc != CR_OK) {
        ctl_error("events", "cannot follow %s (replay %s): %s", a.config.sub_endpoint,
                  a.config.replay_endpoint, cr_strerror(rc));
        return rc == CR_ERR_INVALID_PARAMS ? CTL_EXIT_USAGE : CTL_EXIT_UNREACHABLE;
    }
    unsigned long long printed = 0;
    while (a.count == 0 || printed < a.count) {
        cr_events_item item;
        rc = cr_events_follow_next(follower, -1, &item);
        if (rc == CR_OK) {
            printed += print_item(&item);
        } else if (rc == CR_ERR_TIMEOUT) {
            fprintf(stderr, "crescentctl: the replay at %s did not answer; following live\n",
                    a.config.replay_endpoint);
        } else if (rc != CR_ERR_PROTOCOL) {
            ctl_error("events", "following events failed: %s", cr_strerror(rc));
            cr_events_follow_destroy(follower);
            return CTL_EXIT_SERVER_FAILURE;
        }
    }
    cr_events_follow_destroy(follower);
    return CTL_EXIT_OK;
}

const struct ctl_command ctl_events_commands[] = {
    {"events", "--follow [--from SEQ] [--sub EP] [--replay EP]",
     "store events as JSON lines (--from: replay, then live; also --topic T, --count N)",
     cmd_events, events_help},
    {0},
};
