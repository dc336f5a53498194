/* crescent-store's flags (see crescent_store.h). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/crescent_store.h"
#include "core/size_text.h"
#include "crescent/version.h"
#include "rdma/xfer_verbs.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: crescent-store [flags]\n"
            "\n"
            "A store server: hosts one segment of memory for crescent's KV-cache store,\n"
            "mounts it at crescentd's store master and serves reads and writes of it to\n"
            "clients (libcrescent, crescentctl put/get).  Stops on SIGTERM or SIGINT,\n"
            "unmounting the segment first.\n"
            "\n"
            "  --master ENDPOINT        crescentd's RPC address (default tcp://127.0.0.1:50051;\n"
            "                           crescent://HOST:PORT: its native endpoint;\n"
            "                           shm://NAME: its same-host shared memory;\n"
            "                           etcd://H:P;H:P[/ID]: the leader elected in etcd,\n"
            "                           followed; the segment is remounted on a new one)\n"
            "  --segment-name NAME      name of the segment at the master (default: the\n"
            "                           data endpoint, host:port)\n"
            "  --segment-size SIZE      bytes to host: 1073741824, 64M, 1G (default 1G);\n"
            "                           memfd memory, huge pages when the system has free\n"
            "                           ones, taken from the system only as it is written\n"
            "  --data-address HOST:PORT where transfers are served (default 127.0.0.1:0:\n"
            "                           loopback, a free port); bind another address to\n"
            "                           serve other machines\n"
            "  --no-shm                 do not serve same-host clients over shared memory\n"
            "  --data-require-capability refuse transfers without the master's capability\n"
            "                           (default: off; one sent is always checked): only\n"
            "                           clients the master handed this range to may read\n"
            "                           or write it; Mooncake clients carry none; the SSD\n"
            "                           tier's reads (--ssd-dir) need one too (the master\n"
            "                           signs one into each of its replicas)\n"
            "  --no-verbs               never open an RDMA device (libibverbs): transfers\n"
            "                           go by tcp (and shm), protocol tcp at the master\n"
            "  --rdma-devices NAME,..   RDMA devices to use, at most 4 (e.g. mlx5_0,mlx5_1;\n"
            "                           default: every one whose port is active); objects of\n"
            "                           4 MiB and more are striped over all of them\n"
            "  --rdma-gid-index N|auto  GID table index the RDMA QPs route by (default\n"
            "                           auto: the first RoCE v2 entry with an IPv4-mapped\n"
            "                           address, then RoCE v2, then the first; InfiniBand: 0)\n"
            "  --cpu N                  pin the transfer thread to CPU N (default: one of\n"
            "                           the CPUs this process may use, chosen by pid)\n"
            "  --no-pin                 leave the transfer thread unpinned\n"
            "  --ping-interval-ms MS    heartbeat period (default 1000; never longer than a\n"
            "                           quarter of the master's client TTL)\n"
            "  --timeout-ms MS          per request to the master (default 2000)\n"
            "  --ssd-dir PATH           an SSD tier in this directory (created if missing):\n"
            "                           objects evicted from memory are kept here, one\n"
            "                           checksummed file each, and served from it\n"
            "                           (docs/tiers.md); needs --ssd-size\n"
            "  --ssd-size SIZE          bytes of SSD files at most: 64G, 1T; the least\n"
            "                           recently used files go first\n"
            "  --promotion-hits N       SSD reads within a minute that ask for the object to\n"
            "                           be copied back to memory (default 2; 0: never)\n"
            "  --help, --version\n"
            "\n"
            "After a master restart (or when this server missed pings for longer than the\n"
            "client TTL) the next heartbeat finds the master does not know it and remounts\n"
            "the segment.  After each heartbeat it runs the copy/move tasks whose source is\n"
            "its segment (crescentctl copy/move): reads the object, checks its checksum,\n"
            "writes the targets, reports.  CRESCENT_LOG_LEVEL sets the log level (DEBUG,\n"
            "INFO, WARN, ERROR).  A crescentd with --curve-secret-key-file is reached with\n"
            "the keys in CRESCENT_CURVE_SERVER_KEY, CRESCENT_CURVE_PUBLIC_KEY and\n"
            "CRESCENT_CURVE_SECRET_KEY, as libcrescent reads them; it unmounts only its\n"
            "own segment, which needs no admin token.\n");
}

static bool parse_u32(const char *text, uint32_t min, uint32_t max, uint32_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno != 0 || *end != '\0' || text[0] < '0' || text[0] > '9' || v < min || v > max)
        return false;
    *out = (uint32_t)v;
    return true;
}

static bool copy(char *dst, size_t cap, const char *src) {
    size_t n = strlen(src);
    if (n == 0 || n >= cap) return false;
    memcpy(dst, src, n + 1);
    return true;
}

enum { OPT_MASTER = 256, OPT_NAME, OPT_SIZE, OPT_DATA, OPT_NO_SHM, OPT_REQUIRE_CAP, OPT_NO_VERBS, OPT_DEVICES, OPT_GID, OPT_CPU, OPT_NO_PIN,
       OPT_PING, OPT_TIMEOUT, OPT_SSD_DIR, OPT_SSD_SIZE, OPT_PROMOTION_HITS, OPT_HELP,
       OPT_VERSION };

static const struct option options[] = {
    {"master", required_argument, NULL, OPT_MASTER},
    {"segment-name", required_argument, NULL, OPT_NAME},
    {"segment-size", required_argument, NULL, OPT_SIZE},
    {"data-address", required_argument, NULL, OPT_DATA},
    {"no-shm", no_argument, NULL, OPT_NO_SHM},
    {"data-require-capability", no_argument, NULL, OPT_REQUIRE_CAP},
    {"no-verbs", no_argument, NULL, OPT_NO_VERBS},
    {"rdma-devices", required_argument, NULL, OPT_DEVICES},
    {"rdma-gid-index", required_argument, NULL, OPT_GID},
    {"cpu", required_argument, NULL, OPT_CPU},
    {"no-pin", no_argument, NULL, OPT_NO_PIN},
    {"ping-interval-ms", required_argument, NULL, OPT_PING},
    {"timeout-ms", required_argument, NULL, OPT_TIMEOUT},
    {"ssd-dir", required_argument, NULL, OPT_SSD_DIR},
    {"ssd-size", required_argument, NULL, OPT_SSD_SIZE},
    {"promotion-hits", required_argument, NULL, OPT_PROMOTION_HITS},
    {"help", no_argument, NULL, OPT_HELP},
    {"version", no_argument, NULL, OPT_VERSION},
    {NULL, 0, NULL, 0},
};

static int bad(const char *flag, const char *value, const char *want) {
    fprintf(stderr, "crescent-store: --%s '%s': %s (--help lists the flags)\n", flag, value, want);
    return CR_STORE_OPTIONS_USAGE;
}

static int apply(int opt, const char *arg, struct cr_store_options *o) {
    uint32_t cpu;
    switch (opt) {
    case OPT_MASTER:
        return copy(o->master, sizeof(o->master), arg) ? 0 : bad("master", arg, "want tcp://HOST:PORT");
    case OPT_NAME:
        return copy(o->segment_name, sizeof(o->segment_name), arg) ? 0
                                                                   : bad("segment-name", arg, "1 to 255 bytes");
    case OPT_SIZE:
        return cr_parse_size(arg, &o->segment_size) && o->segment_size > 0
                   ? 0 : bad("segment-size", arg, "want bytes > 0, or a number with K, M, G or T");
    case OPT_DATA:
        return copy(o->data_address, sizeof(o->data_address), arg) ? 0
                                                                   : bad("data-address", arg, "want HOST:PORT");
    case OPT_NO_SHM: o->no_shm = true; return 0;
    case OPT_REQUIRE_CAP: o->require_capability = true; return 0;
    case OPT_NO_VERBS: o->no_verbs = true; return 0;
    case OPT_DEVICES:
        return copy(o->rdma_devices, sizeof(o->rdma_devices), arg)
                   ? 0 : bad("rdma-devices", arg, "want NAME[,NAME..], 1 to 255 bytes");
    case OPT_GID:
        return cr_xfer_verbs_parse_gid_index(arg, &o->rdma_gid_index)
                   ? 0 : bad("rdma-gid-index", arg, "want auto or 0..255");
    case OPT_CPU:
        if (!parse_u32(arg, 0, 4095, &cpu)) return bad("cpu", arg, "want a CPU number");
        o->cpu = (int)cpu;
        return 0;
    case OPT_NO_PIN: o->cpu = CR_STORE_CPU_NONE; return 0;
    case OPT_PING:
        return parse_u32(arg, 1, 3600000, &o->ping_interval_ms) ? 0
                                                                 : bad("ping-interval-ms", arg, "want 1..3600000");
    case OPT_TIMEOUT:
        return parse_u32(arg, 1, 3600000, &o->timeout_ms) ? 0 : bad("timeout-ms", arg, "want 1..3600000");
    case OPT_SSD_DIR:
        return copy(o->ssd_dir, sizeof(o->ssd_dir), arg) ? 0
                                                          : bad("ssd-dir", arg, "1 to 4095 bytes");
    case OPT_SSD_SIZE:
        return cr_parse_size(arg, &o->ssd_size) && o->ssd_size > 0
                   ? 0 : bad("ssd-size", arg, "want bytes > 0, or a number with K, M, G or T");
    case OPT_PROMOTION_HITS:
        return parse_u32(arg, 0, 1000000, &o->promotion_hits)
                   ? 0 : bad("promotion-hits", arg, "want 0..1000000");
    default: return CR_STORE_OPTIONS_USAGE;
    }
}

int cr_store_options_parse(int argc, char **argv, struct cr_store_options *o) {
    *o = (struct cr_store_options){.segment_size = 1ull << 30, .cpu = CR_STORE_CPU_AUTO,
                                   .rdma_gid_index = -1,
                                   .ping_interval_ms = 1000, .timeout_ms = 2000,
                                   .promotion_hits = 2};
    snprintf(o->master, sizeof(o->master), "tcp://127.0.0.1:50051");
    snprintf(o->data_address, sizeof(o->data_address), "127.0.0.1:0");
    optind = 1;
    opterr = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
        if (opt == OPT_HELP) {
            usage(stdout);
            return CR_STORE_OPTIONS_HELP;
        }
        if (opt == OPT_VERSION) {
            printf("crescent-store %s\n", CRESCENT_VERSION);
            return CR_STORE_OPTIONS_HELP;
        }
        if (opt == '?' || opt == ':') {
            fprintf(stderr, "crescent-store: unknown flag or missing value: %s (--help lists the "
                    "flags)\n", argv[optind - 1]);
            return CR_STORE_OPTIONS_USAGE;
        }
        int rc = apply(opt, optarg, o);
        if (rc != 0) return rc;
    }
    if (optind < argc) {
        fprintf(stderr, "crescent-store: unexpected argument '%s' (--help lists the flags)\n",
                argv[optind]);
        return CR_STORE_OPTIONS_USAGE;
    }
    if ((o->ssd_dir[0] != '\0') != (o->ssd_size > 0)) {
        fprintf(stderr, "crescent-store: --ssd-dir and --ssd-size go together (--help lists the "
                "flags)\n");
        return CR_STORE_OPTIONS_USAGE;
    }
    return CR_STORE_OPTIONS_RUN;
}
