/* crescent-bench: point it at a running crescentd and get trustworthy
 * latency percentiles and throughput of its store master (see usage()).
 *
 * A run: open one cr_client per connection and check it answers; mount a
 * fake segment if --mount-fake; preload the key space (get/exist/mix) or
 * each connection's keys (remove) with batch puts; start one worker thread
 * per connection (crescent-bench_store.c); print a progress line while they
 * run and ping for the fake segment's owner; merge their histograms; print
 * the summary and write the JSON; remove every key the run created and
 * unmount what it mounted.  Everything happens under the run's own tenant
 * (bench-<run id> unless --tenant), with keys named after the run
 * id, so a live deployment's data is never touched. */
#include <assert.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/crescent-bench.h"

#define PROGRESS_NS 500000000u   /* progress line and owner ping period */
#define FAKE_SEGMENT_BYTES_DEFAULT (UINT64_C(64) << 30)

struct run {
    struct bench_options opt;
    struct bench_worker *workers;
    pthread_t *threads;
    cr_client *control;          /* set-up, pings, clean-up */
    bool reachable;              /* control answered: clean-up may talk to crescentd */
    struct bench_zipf *zipf;
    struct bench_indexer indexer;
    char segment[64];
    bool mounted;
};

static void usage(FILE *out) {
    fprintf(out,
        "usage: crescent-bench [options]\n"
        "Measures a running crescentd's store master over its RPC (libcrescent), from\n"
        "outside: latency percentiles (p50 ... p99.99, max; log-linear histogram, values\n"
        "reported at most 0.78%% above the true ones), throughput, errors by status.\n"
        "\n"
        "Workload\n"
        "  --workload W        get | put | exist | remove | mix: the store RPC (default get)\n"
        "                      query | route: the prefix indexer's HTTP (POST /query, /route)\n"
        "                      trace-route | trace-store: a request trace (--trace, below)\n"
        "                        get    GetReplicaList of a key of the key space (takes a lease)\n"
        "                        put    PutStart + PutEnd of a fresh key (latency: start sent to end answered)\n"
        "                        exist  ExistKey of a key of the key space\n"
        "                        remove Remove(force) of keys put before the run (needs --count; no warm-up)\n"
        "                        mix    by --mix ratio; its removes take keys its puts created\n"
        "                      put-bytes | get-bytes: values through the data plane\n"
        "                        put-bytes  Put of --object-bytes of value under a fresh key;\n"
        "                                   past --keys (default 16) values per connection\n"
        "                                   the oldest is removed, untimed\n"
        "                        get-bytes  get_into of a key of the key space (preloaded with values)\n"
        "                        (one call at a time per connection; ops/s, GB/s, percentiles;\n"
        "                        --keys defaults to 16 here; --object-bytes up to 1 GiB)\n"
        "  --mix G:P:E:R       weights of get:put:exist:remove for mix (default 8:1:1:0)\n"
        "  --keys N            key space preloaded for get/exist/mix (default 10000)\n"
        "  --distribution D    uniform | zipfian (default uniform)\n"
        "  --zipf-theta T      zipfian skew, 0 < T < 1 (default 0.99, as YCSB)\n"
        "  --object-bytes N    size the puts declare (default 4096)\n"
        "Indexer workloads (query, route): the bench registers --instances simulated vLLM\n"
        "publishers (under its tenant), publishes --prompts prompts cached by them, waits\n"
        "until the indexer applied them, queries them, and unregisters its instances at the end\n"
        "  --http HOST:PORT    crescentd's HTTP front (default 127.0.0.1:13333)\n"
        "  --prompts N         prompts published and queried (default 1000, max 65535;\n"
        "                      --distribution picks among them)\n"
        "  --prompt-tokens N   tokens per prompt (default 1024, max 65536)\n"
        "  --shared-prefix F   share of every prompt common to all (default 0.5)\n"
        "  --instances N       simulated publishers; prompt p is cached by p mod N (default 4)\n"
        "  --block-size N      tokens per block (default 16)\n"
        "Trace workloads: a Mooncake FAST'25 trace (JSON Lines: timestamp, input_length,\n"
        "output_length, hash_ids) replayed in order on one connection; a hash id is one\n"
        "block of --block-size tokens all equal to the id; bad lines are skipped, counted\n"
        "by cause, the first of each cause logged\n"
        "  --workload trace-route  --instances simulated engines (vLLM publishers, max 64)\n"
        "                      with --kv-blocks each and LRU eviction; each request goes\n"
        "                      to POST /route, the chosen engine serves it and publishes\n"
        "                      what it stored and evicted, then POST /load; reports the hit\n"
        "                      rate against the best engine in hindsight and random routing,\n"
        "                      events/s, /route p50/p99 (--http)\n"
        "  --workload trace-store  the store as the cache pool (--rpc): per request\n"
        "                      BatchExistKey, BatchGet of the prefix hit, BatchPut of the\n"
        "                      misses; hit rate, evictions (the store's), keys/s, p99 per call\n"
        "  --trace FILE        the trace\n"
        "  --trace-speed X     X times the trace's own pace; 0: as fast as possible (default)\n"
        "  --kv-blocks N       trace-route: KV cache blocks per engine (default 2048)\n"
        "  --block-bytes N     trace-store: bytes per block, moved through the data plane\n"
        "                      (e.g. 512 tokens x 12 KiB/token of Qwen2.5-0.5B in bf16 =\n"
        "                      6291456); with --mount-fake or unset, metadata only (4 KiB)\n"
        "  --batch N           keys per request: the batch calls, one request in flight per\n"
        "                      connection (default 1: the pipelined single-key calls)\n"
        "Load\n"
        "  --connections N     connections, each driven by its own thread (default 1; --threads\n"
        "                      is the same: a libcrescent client belongs to one thread)\n"
        "  --depth N           requests in flight per connection (default 1; max %u; the\n"
        "                      store's pipelined calls, query/route's HTTP/1.1 pipelining)\n"
        "  --rate R            open loop: R operations/s over all connections, latency counted\n"
        "                      from when each was due (coordinated omission corrected, as wrk2;\n"
        "                      the uncorr. row and latency_uncorrected_us count from each send);\n"
        "                      give --depth room for R x latency. Default: closed loop\n"
        "  --duration S        measured seconds (default 5); an open loop that falls behind\n"
        "                      stops sending max(1 s, S/10) after the window\n"
        "  --count N           measured operations instead of a duration\n"
        "  --warmup S          seconds run and not measured first (default 1)\n"
        "Deployment\n"
        "  --rpc ENDPOINT      crescentd's RPC (default tcp://127.0.0.1:50051; crescent://HOST:PORT\n"
        "                      for its native endpoint, --rpc-tcp-address; shm://NAME for its\n"
        "                      same-host shared memory, --rpc-shm-path; etcd://H:P;H:P[/ID]\n"
        "                      for the leader elected in etcd, followed when it changes)\n"
        "  --tenant NAME       tenant of every key, at most 23 bytes (default bench-<run id>)\n"
        "  --mount-fake        mount a fake segment for the run (an empty test deployment;\n"
        "                      it is metadata only: nothing reads or writes its memory)\n"
        "  --fake-segment-bytes N  its size (default 64 GiB)\n"
        "  --timeout-ms MS     per request (default 5000)\n"
        "Output\n"
        "  --json PATH         every number as JSON (- for stdout; the table then goes to stderr)\n"
        "  --report PATH       a self-contained HTML page: summary, latency-by-percentile plot,\n"
        "                      throughput and latency over time (uPlot, inlined)\n"
        "  --quiet             no progress line (it is only shown when stderr is a terminal)\n"
        "\n"
        "Safe on a live deployment: nothing is mounted unless --mount-fake, and every key the\n"
        "run created is removed at the end (Remove with force; leases do not block it).\n"
        "Exit status: 0 no errors, 1 some operations failed, 2 usage, 3 crescentd unreachable\n"
        "or the set-up refused (e.g. no segment has room: mount one or use --mount-fake).\n",
        BENCH_DEPTH_MAX);
}

/* ---- options ------------------------------------------------------------- */

static bool parse_u64(const char *text, uint64_t min, uint64_t max, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || text[0] == '-' || v < min || v > max)
        return false;
    *out = v;
    return true;
}

static bool parse_double(const char *text, double min, double max, double *out) {
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno != 0 || end == text || *end != '\0' || !(v >= min && v <= max)) return false;
    *out = v;
    return true;
}

static bool parse_mix(const char *text, unsigned mix[OP_KINDS]) {
    unsigned g, p, e, r;
    char tail;
    if (sscanf(text, "%u:%u:%u:%u%c", &g, &p, &e, &r, &tail) != 4) return false;
    if (g > 1000000 || p > 1000000 || e > 1000000 || r > 1000000 || g + p + e + r == 0)
        return false;
    mix[OP_GET] = g, mix[OP_PUT] = p, mix[OP_EXIST] = e, mix[OP_REMOVE] = r;
    return true;
}

static bool set_workload(struct bench_options *opt, const char *name) {
    opt->workload = name;
    opt->trace = strcmp(name, "trace-route") == 0 || strcmp(name, "trace-store") == 0;
    opt->trace_store = strcmp(name, "trace-store") == 0;
    if (opt->trace) return true;
    opt->values = strcmp(name, "put-bytes") == 0 || strcmp(name, "get-bytes") == 0;
    if (opt->values) name = name[0] == 'p' ? "put" : "get";
    for (int op = 0; op < OP_KINDS; op++) {
        if (strcmp(name, bench_op_names[op]) != 0) continue;
        memset(opt->mix, 0, sizeof(opt->mix));
        opt->mix[op] = 1;
        return true;
    }
    return strcmp(name, "mix") == 0;
}

enum { OPT_WORKLOAD = 256, OPT_MIX, OPT_KEYS, OPT_DIST, OPT_THETA, OPT_OBJECT, OPT_BATCH,
       OPT_CONNECTIONS, OPT_DEPTH, OPT_RATE, OPT_DURATION, OPT_COUNT, OPT_WARMUP, OPT_RPC,
       OPT_TENANT, OPT_MOUNT_FAKE, OPT_FAKE_BYTES, OPT_TIMEOUT, OPT_JSON, OPT_QUIET, OPT_HELP,
       OPT_REPORT, OPT_HTTP, OPT_PROMPTS, OPT_PROMPT_TOKENS, OPT_SHARED, OPT_INSTANCES, OPT_BLOCK_SIZE,
       OPT_TRACE, OPT_TRACE_SPEED, OPT_KV_BLOCKS, OPT_BLOCK_BYTES };

static const struct option long_options[] = {
    {"workload", required_argument, 0, OPT_WORKLOAD}, {"mix", required_argument, 0, OPT_MIX},
    {"keys", required_argument, 0, OPT_KEYS}, {"distribution", required_argument, 0, OPT_DIST},
    {"zipf-theta", required_argument, 0, OPT_THETA},
    {"object-bytes", required_argument, 0, OPT_OBJECT},
    {"batch", required_argument, 0, OPT_BATCH},
    {"connections", required_argument, 0, OPT_CONNECTIONS},
    {"threads", required_argument, 0, OPT_CONNECTIONS},
    {"depth", required_argument, 0, OPT_DEPTH}, {"rate", required_argument, 0, OPT_RATE},
    {"duration", required_argument, 0, OPT_DURATION}, {"count", required_argument, 0, OPT_COUNT},
    {"warmup", required_argument, 0, OPT_WARMUP}, {"rpc", required_argument, 0, OPT_RPC},
    {"tenant", required_argument, 0, OPT_TENANT},
    {"mount-fake", no_argument, 0, OPT_MOUNT_FAKE},
    {"fake-segment-bytes", required_argument, 0, OPT_FAKE_BYTES},
    {"timeout-ms", required_argument, 0, OPT_TIMEOUT}, {"json", required_argument, 0, OPT_JSON},
    {"quiet", no_argument, 0, OPT_QUIET}, {"help", no_argument, 0, OPT_HELP},
    {"report", required_argument, 0, OPT_REPORT}, {"http", required_argument, 0, OPT_HTTP}, {"prompts", required_argument, 0, OPT_PROMPTS},
    {"prompt-tokens", required_argument, 0, OPT_PROMPT_TOKENS},
    {"shared-prefix", required_argument, 0, OPT_SHARED},
    {"instances", required_argument, 0, OPT_INSTANCES},
    {"block-size", required_argument, 0, OPT_BLOCK_SIZE},
    {"trace", required_argument, 0, OPT_TRACE},
    {"trace-speed", required_argument, 0, OPT_TRACE_SPEED},
    {"kv-blocks", required_argument, 0, OPT_KV_BLOCKS},
    {"block-bytes", required_argument, 0, OPT_BLOCK_BYTES},
    {0, 0, 0, 0},
};

/* Applies one option; returns false (after a message) when its value is bad. */
static bool apply_option(struct bench_options *opt, int c, const char *arg) {
    uint64_t u = 0;
    bool ok = true;
    switch (c) {
    case OPT_WORKLOAD: ok = set_workload(opt, arg); break;
    case OPT_MIX: ok = parse_mix(arg, opt->mix); break;
    case OPT_KEYS: ok = parse_u64(arg, 1, UINT64_C(1) << 32, &opt->keys); break;
    case OPT_DIST:
        ok = strcmp(arg, "uniform") == 0 || strcmp(arg, "zipfian") == 0;
        opt->distribution = strcmp(arg, "zipfian") == 0 ? DIST_ZIPFIAN : DIST_UNIFORM;
        break;
    case OPT_THETA: ok = parse_double(arg, 0.01, 0.999, &opt->zipf_theta); break;
    case OPT_OBJECT: ok = parse_u64(arg, 1, INT64_MAX, &opt->object_bytes); break;
    case OPT_BATCH: ok = parse_u64(arg, 1, CR_CLIENT_BATCH_MAX, &u), opt->batch = (unsigned)u; break;
    case OPT_CONNECTIONS:
        ok = parse_u64(arg, 1, BENCH_CONNECTIONS_MAX, &u), opt->connections = (unsigned)u;
        break;
    case OPT_DEPTH: ok = parse_u64(arg, 1, BENCH_DEPTH_MAX, &u), opt->depth = (unsigned)u; break;
    case OPT_RATE: ok = parse_double(arg, 0.001, 1e8, &opt->rate); break;
    case OPT_DURATION: ok = parse_double(arg, 0.001, BENCH_SECONDS_MAX / 2, &opt->duration_s); break;
    case OPT_COUNT: ok = parse_u64(arg, 1, UINT64_C(1) << 40, &opt->count); break;
    case OPT_WARMUP: ok = parse_double(arg, 0.0, BENCH_SECONDS_MAX / 2, &opt->warmup_s); break;
    case OPT_RPC: opt->rpc_address = arg; break;
    case OPT_TENANT: opt->tenant = arg; ok = strlen(arg) >= 1 && strlen(arg) <= CR_CLIENT_NAME_MAX; break;
    case OPT_MOUNT_FAKE: opt->mount_fake = true; break;
    case OPT_FAKE_BYTES: ok = parse_u64(arg, 1, UINT64_C(1) << 50, &opt->fake_segment_bytes); break;
    case OPT_TIMEOUT: ok = parse_u64(arg, 1, 3600000, &u), opt->timeout_ms = (int)u; break;
    case OPT_JSON: opt->json_path = arg; break;
    case OPT_QUIET: opt->quiet = true; break;
    case OPT_REPORT: opt->report_path = arg; break;
    case OPT_HTTP: opt->http_address = arg; break;
    case OPT_PROMPTS: ok = parse_u64(arg, 1, 65535, &opt->keys); break;
    case OPT_PROMPT_TOKENS:
        ok = parse_u64(arg, 1, 65536, &u), opt->prompt_tokens = (unsigned)u;
        break;
    case OPT_SHARED: ok = parse_double(arg, 0.0, 1.0, &opt->shared_prefix); break;
    case OPT_INSTANCES: ok = parse_u64(arg, 1, 64, &u), opt->instances = (unsigned)u; break;
    case OPT_BLOCK_SIZE: ok = parse_u64(arg, 1, 1024, &u), opt->block_size = (unsigned)u; break;
    case OPT_TRACE: opt->trace_path = arg; break;
    case OPT_TRACE_SPEED: ok = parse_double(arg, 0.0, 1e6, &opt->trace_speed); break;
    case OPT_KV_BLOCKS: ok = parse_u64(arg, 1, 1u << 24, &u), opt->kv_blocks = (unsigned)u; break;
    case OPT_BLOCK_BYTES: ok = parse_u64(arg, 1, UINT64_C(1) << 30, &opt->block_bytes); break;
    default: ok = false; break;
    }
    return ok;
}

/* Returns BENCH_EXIT_OK, or BENCH_EXIT_USAGE after a message (-1: --help shown). */
static int parse_options(int argc, char **argv, struct bench_options *opt) {
    *opt = (struct bench_options){
        .rpc_address = "tcp://127.0.0.1:50051", .workload = "get", .mix = {8, 1, 1, 0},
        .connections = 1, .depth = 1, .batch = 1, .keys = 10000, .zipf_theta = 0.99,
        .object_bytes = 4096, .duration_s = 5.0, .warmup_s = 1.0, .timeout_ms = 5000,
        .fake_segment_bytes = FAKE_SEGMENT_BYTES_DEFAULT, .http_address = "127.0.0.1:13333",
        .prompt_tokens = 1024, .shared_prefix = 0.5, .instances = 4, .block_size = 16,
        .kv_blocks = 2048};
    set_workload(opt, "get");
    bool mix_given = false, workload_mix = false, prompts_given = false, keys_given = false;
    int c;
    while ((c = getopt_long(argc, argv, "h", long_options, NULL)) != -1) {
        if (c == 'h' || c == OPT_HELP) return usage(stdout), -1;
        if (c == '?') return usage(stderr), BENCH_EXIT_USAGE;
        if (!apply_option(opt, c, optarg)) {
            fprintf(stderr, "crescent-bench: bad value '%s' for --%s (see --help)\n", optarg,
                    long_options[c - OPT_WORKLOAD].name);
            return BENCH_EXIT_USAGE;
        }
        mix_given |= c == OPT_MIX;
        if (c == OPT_WORKLOAD) workload_mix = strcmp(optarg, "mix") == 0;
        if (c == OPT_COUNT) opt->duration_s = 0.0;
        prompts_given |= c == OPT_PROMPTS;
        keys_given |= c == OPT_KEYS;
    }
    if (optind < argc) {
        fprintf(stderr, "crescent-bench: unexpected argument '%s' (see --help)\n", argv[optind]);
        return BENCH_EXIT_USAGE;
    }
    if (mix_given && !workload_mix) {
        fprintf(stderr, "crescent-bench: --mix needs --workload mix\n");
        return BENCH_EXIT_USAGE;
    }
    if (workload_mix && !mix_given) parse_mix("8:1:1:0", opt->mix);
    if (opt->trace != (opt->trace_path != NULL)) {
        fprintf(stderr, "crescent-bench: --workload trace-route and trace-store need --trace "
                "FILE, and --trace needs one of them\n");
        return BENCH_EXIT_USAGE;
    }
    if (opt->trace) {
        opt->mix[OP_QUERY] = opt->mix[OP_ROUTE] = 0; /* its own loop (crescent-bench_trace.c) */
        opt->indexer = false;
        return BENCH_EXIT_OK;
    }
    opt->indexer = opt->mix[OP_QUERY] > 0 || opt->mix[OP_ROUTE] > 0;
    if (opt->indexer && !prompts_given) opt->keys = 1000;
    if (opt->indexer && (opt->batch > 1 || opt->mount_fake)) {
        fprintf(stderr, "crescent-bench: --batch and --mount-fake are for the store workloads\n");
        return BENCH_EXIT_USAGE;
    }
    if (opt->indexer && opt->prompt_tokens < opt->block_size) {
        fprintf(stderr, "crescent-bench: --prompt-tokens %u is below --block-size %u: no block "
                "to cache\n", opt->prompt_tokens, opt->block_size);
        return BENCH_EXIT_USAGE;
    }
    if (opt->values && (opt->batch > 1 || opt->depth > 1 || opt->mount_fake)) {
        fprintf(stderr, "crescent-bench: put-bytes/get-bytes run one call at a time on real "
                "segments: drop --batch, --depth and --mount-fake\n");
        return BENCH_EXIT_USAGE;
    }
    if (opt->values && !keys_given) opt->keys = 16;
    if (opt->values && opt->object_bytes > (UINT64_C(1) << 30)) {
        fprintf(stderr, "crescent-bench: --object-bytes %" PRIu64 " is above 1 GiB for "
                "put-bytes/get-bytes\n", opt->object_bytes);
        return BENCH_EXIT_USAGE;
    }
    if (strcmp(opt->workload, "remove") == 0) {
        if (opt->count == 0) {
            fprintf(stderr, "crescent-bench: --workload remove needs --count (keys put first)\n");
            return BENCH_EXIT_USAGE;
        }
        opt->warmup_s = 0.0; /* a warm-up would remove keys the count needs */
    }
    return BENCH_EXIT_OK;
}

/* ---- set-up and clean-up ---------------------------------------------------- */

static int open_client(const struct bench_options *opt, cr_client **out) {
    char error[256];
    struct cr_client_options options = {.timeout_ms = opt->timeout_ms};
    struct cr_version version;
    if (cr_client_open(opt->rpc_address, &options, out, error, sizeof(error)) != CR_OK) {
        fprintf(stderr, "crescent-bench: cannot open %s: %s\n", opt->rpc_address, error);
        return BENCH_EXIT_UNREACHABLE;
    }
    if (cr_client_get_version(*out, &version) != CR_OK) {
        fprintf(stderr, "crescent-bench: %s does not answer: %s\n",
                opt->rpc_address, cr_client_last_error(*out));
        return BENCH_EXIT_UNREACHABLE;
    }
    return BENCH_EXIT_OK;
}

/* Puts keys [0, count) named by `name(index)` in batches. */
static int preload(struct run *r, unsigned worker, uint64_t count, bool fresh) {
    static char keys[CR_CLIENT_BATCH_MAX][BENCH_KEY_BYTES];
    struct cr_put_item items[CR_CLIENT_BATCH_MAX];
    const char *names[CR_CLIENT_BATCH_MAX];
    for (uint64_t first = 0; first < count; first += CR_CLIENT_BATCH_MAX) {
        size_t n = count - first < CR_CLIENT_BATCH_MAX ? count - first : CR_CLIENT_BATCH_MAX;
        for (size_t i = 0; i < n; i++) {
            if (fresh) bench_key_fresh(&r->opt, worker, first + i, keys[i]);
            else bench_key_space(&r->opt, first + i, keys[i]);
            items[i] = (struct cr_put_item){.key = keys[i], .size_bytes = r->opt.object_bytes};
            names[i] = keys[i];
        }
        struct cr_replica_lists started;
        struct cr_status_list ended = {0};
        int rc = cr_client_batch_put_start(r->control, r->opt.tenant, items, n, &started);
        size_t failed = 0;
        for (; rc == CR_OK && failed < started.count; failed++) rc = started.lists[failed].status;
        cr_client_replica_lists_free(&started);
        if (rc != CR_OK && failed > 0) {
            /* A batch carries no per-key message: ask for that key alone to get the reason. */
            struct cr_replica_list single;
            (void)cr_client_put_start(r->control, r->opt.tenant, &items[failed - 1], &single);
            cr_client_replica_list_free(&single);
        }
        if (rc == CR_OK) rc = cr_client_batch_put_end(r->control, r->opt.tenant, names, n, &ended);
        for (size_t i = 0; rc == CR_OK && i < ended.count; i++) rc = ended.statuses[i];
        cr_client_status_list_free(&ended);
        if (rc != CR_OK) {
            fprintf(stderr, "crescent-bench: preloading %" PRIu64 " keys of %" PRIu64
                    " bytes failed: %s (%s); is a segment with room for them mounted? "
                    "(or --mount-fake on a test deployment)\n", count, r->opt.object_bytes,
                    cr_status_name(rc), cr_client_last_error(r->control));
            return BENCH_EXIT_UNREACHABLE;
        }
        if (fresh) r->workers[worker].put_next = first + n;
    }
    return BENCH_EXIT_OK;
}

/* get-bytes: the key space holds real values (one Put each, from `value`). */
static int preload_values(struct run *r, const void *value) {
    char key[BENCH_KEY_BYTES];
    for (uint64_t i = 0; i < r->opt.keys; i++) {
        bench_key_space(&r->opt, i, key);
        int rc = cr_client_put(r->control, r->opt.tenant, key, value, r->opt.object_bytes, NULL);
        if (rc != CR_OK) {
            fprintf(stderr, "crescent-bench: preloading %" PRIu64 " values of %" PRIu64
                    " bytes failed at key %" PRIu64 ": %s (%s); is a segment with room for "
                    "them mounted (crescentd --local-segment-size)? (or fewer --keys)\n",
                    r->opt.keys, r->opt.object_bytes, i, cr_status_name(rc),
                    cr_client_last_error(r->control));
            return BENCH_EXIT_UNREACHABLE;
        }
    }
    return BENCH_EXIT_OK;
}

/* Removes keys [0, count) in batches; a key already gone is fine. */
static uint64_t remove_keys(struct run *r, int worker, uint64_t count) {
    static char keys[CR_CLIENT_BATCH_MAX][BENCH_KEY_BYTES];
    const char *names[CR_CLIENT_BATCH_MAX];
    uint64_t failed = 0;
    for (uint64_t first = 0; first < count; first += CR_CLIENT_BATCH_MAX) {
        size_t n = count - first < CR_CLIENT_BATCH_MAX ? count - first : CR_CLIENT_BATCH_MAX;
        for (size_t i = 0; i < n; i++) {
            if (worker >= 0) bench_key_fresh(&r->opt, (unsigned)worker, first + i, keys[i]);
            else bench_key_space(&r->opt, first + i, keys[i]);
            names[i] = keys[i];
        }
        struct cr_status_list statuses;
        int rc = cr_client_batch_remove(r->control, r->opt.tenant, names, n, true, &statuses);
        for (size_t i = 0; i < statuses.count; i++)
            failed += statuses.statuses[i] != CR_OK &&
                      statuses.statuses[i] != CR_ERR_OBJECT_NOT_FOUND;
        if (rc != CR_OK) failed += n;
        cr_client_status_list_free(&statuses);
    }
    return failed;
}

static void clean_up(struct run *r) {
    uint64_t failed = 0;
    bool space = r->opt.mix[OP_GET] > 0 || r->opt.mix[OP_EXIST] > 0;
    if (space) failed += remove_keys(r, -1, r->opt.keys);
    for (unsigned i = 0; r->workers != NULL && i < r->opt.connections; i++)
        failed += remove_keys(r, (int)i, r->workers[i].put_next);
    if (failed > 0)
        fprintf(stderr, "crescent-bench: %" PRIu64 " keys of tenant %s (prefix %s-) could not be "
                "removed: %s\n", failed, r->opt.tenant, r->opt.run_id,
                cr_client_last_error(r->control));
    if (r->mounted && cr_client_unmount_segment(r->control, r->segment) != CR_OK)
        fprintf(stderr, "crescent-bench: unmounting %s failed: %s\n", r->segment,
                cr_client_last_error(r->control));
}

static int set_up_indexer(struct run *r) {
    int rc = bench_indexer_set_up(&r->indexer, &r->opt);
    for (unsigned i = 0; i < r->opt.connections; i++) {
        struct bench_worker *w = &r->workers[i];
        w->opt = &r->opt;
        w->zipf = r->zipf;
        w->indexer = &r->indexer;
        w->index = i;
        w->rng = 0x9e3779b97f4a7c15u * (i + 1) ^ (uint64_t)getpid();
        w->quota = r->opt.count / r->opt.connections + (i < r->opt.count % r->opt.connections);
    }
    return rc;
}

static int set_up(struct run *r) {
    struct bench_options *opt = &r->opt;
    if (opt->distribution == DIST_ZIPFIAN) {
        r->zipf = bench_zipf_create(opt->keys, opt->zipf_theta);
        if (r->zipf == NULL) return fprintf(stderr, "crescent-bench: out of memory\n"), 1;
    }
    if (opt->indexer) return set_up_indexer(r);
    int rc = open_client(opt, &r->control);
    if (rc != BENCH_EXIT_OK) return rc;
    r->reachable = true;
    if (opt->mount_fake) {
        snprintf(r->segment, sizeof(r->segment), "crescent-bench-%s", opt->run_id);
        /* A base no real segment uses; the memory is never touched. */
        struct cr_segment_spec spec = {.name = r->segment, .base = UINT64_C(1) << 46,
                                       .size_bytes = opt->fake_segment_bytes,
                                       .transport_endpoint = "127.0.0.1:9",
                                       .protocol = "none"}; /* metadata only */
        if (cr_client_mount_segment(r->control, &spec) != CR_OK) {
            fprintf(stderr, "crescent-bench: --mount-fake: mounting %s failed: %s\n", r->segment,
                    cr_client_last_error(r->control));
            return BENCH_EXIT_UNREACHABLE;
        }
        r->mounted = true;
    }
    for (unsigned i = 0; opt->values && i < opt->connections; i++) {
        r->workers[i].value = malloc(opt->object_bytes);
        if (r->workers[i].value == NULL)
            return fprintf(stderr, "crescent-bench: out of memory for --object-bytes\n"), 1;
        memset(r->workers[i].value, 'a' + (int)(i % 26), opt->object_bytes);
    }
    if (opt->values && opt->mix[OP_GET] > 0) {
        rc = preload_values(r, r->workers[0].value);
        if (rc != BENCH_EXIT_OK) return rc;
    } else if (opt->mix[OP_GET] > 0 || opt->mix[OP_EXIST] > 0) {
        rc = preload(r, 0, opt->keys, false);
        if (rc != BENCH_EXIT_OK) return rc;
    }
    for (unsigned i = 0; i < opt->connections; i++) {
        struct bench_worker *w = &r->workers[i];
        w->opt = opt;
        w->zipf = r->zipf;
        w->index = i;
        w->rng = 0x9e3779b97f4a7c15u * (i + 1) ^ (uint64_t)getpid();
        w->quota = opt->count / opt->connections + (i < opt->count % opt->connections);
        rc = open_client(opt, &w->client);
        if (rc != BENCH_EXIT_OK) return rc;
        if (strcmp(opt->workload, "remove") == 0) {
            rc = preload(r, i, w->quota, true);
            if (rc != BENCH_EXIT_OK) return rc;
            w->preloaded = w->quota;
        }
    }
    return BENCH_EXIT_OK;
}

/* ---- the run ------------------------------------------------------------- */

static uint64_t progress_total(const struct run *r) {
    uint64_t total = 0;
    for (unsigned i = 0; i < r->opt.connections; i++)
        total += atomic_load_explicit(&r->workers[i].progress, memory_order_relaxed);
    return total;
}

/* Waits for the workers while showing progress (stderr, terminals only) and
 * pinging, so crescentd keeps the fake segment's owner alive. */
static void watch(struct run *r, uint64_t start_ns, _Atomic unsigned *finished) {
    bool show = !r->opt.quiet && isatty(STDERR_FILENO);
    uint64_t last_ops = 0, last_ns = start_ns;
    while (atomic_load(finished) < r->opt.connections) {
        struct timespec nap = {.tv_sec = 0, .tv_nsec = PROGRESS_NS};
        nanosleep(&nap, NULL);
        if (r->mounted) (void)cr_client_ping(r->control, NULL);
        if (!show) continue;
        uint64_t now = bench_now_ns(), ops = progress_total(r);
        double rate = (double)(ops - last_ops) * 1e9 / (double)(now - last_ns);
        bool warming = now < start_ns + (uint64_t)(r->opt.warmup_s * 1e9);
        fprintf(stderr, "\r%-8s %7.1f s  %12" PRIu64 " ops  %12.0f ops/s   ",
                warming ? "warm-up" : r->opt.workload, (double)(now - start_ns) / 1e9, ops, rate);
        last_ops = ops, last_ns = now;
    }
    if (show) fprintf(stderr, "\r%78s\r", "");
}

struct thread_arg {
    struct bench_worker *worker;
    _Atomic unsigned *finished;
};

static void *thread_main(void *arg) {
    struct thread_arg *t = arg;
    bench_worker_main(t->worker);
    atomic_fetch_add(t->finished, 1);
    return NULL;
}

static int run_workers(struct run *r) {
    const struct bench_options *opt = &r->opt;
    struct thread_arg *args = calloc(opt->connections, sizeof(*args));
    if (args == NULL) return fprintf(stderr, "crescent-bench: out of memory\n"), 1;
    _Atomic unsigned finished = 0;
    uint64_t start = bench_now_ns() + 10000000u; /* every thread is up before the first send */
    uint64_t measure = start + (uint64_t)(opt->warmup_s * 1e9);
    unsigned started = 0;
    for (; started < opt->connections; started++) {
        struct bench_worker *w = &r->workers[started];
        w->start_ns = start;
        w->measure_ns = measure;
        w->end_ns = opt->count > 0 ? UINT64_MAX : measure + (uint64_t)(opt->duration_s * 1e9);
        /* An open loop behind its schedule would send its backlog long past
         * the window (a 3 s run at a rate it cannot hold took 82 s): sends
         * still due are dropped once the window is over by a grace, the larger
         * of 1 s and a tenth of --duration; the sent rate shows the shortfall. */
        double grace_s = opt->duration_s / 10 > 1.0 ? opt->duration_s / 10 : 1.0;
        w->stop_ns = opt->count > 0 ? UINT64_MAX : w->end_ns + (uint64_t)(grace_s * 1e9);
        args[started] = (struct thread_arg){.worker = w, .finished = &finished};
        if (pthread_create(&r->threads[started], NULL, thread_main, &args[started]) != 0) break;
    }
    if (started < opt->connections) { /* the rest still run; their numbers are not used */
        fprintf(stderr, "crescent-bench: starting thread %u failed\n", started);
        for (unsigned i = 0; i < started; i++) pthread_join(r->threads[i], NULL);
        free(args);
        return 1;
    }
    watch(r, start, &finished);
    for (unsigned i = 0; i < started; i++) pthread_join(r->threads[i], NULL);
    free(args);
    for (unsigned i = 0; i < opt->connections; i++)
        if (r->workers[i].failure[0] != '\0') {
            fprintf(stderr, "crescent-bench: connection %u stopped early: %s\n", i,
                    r->workers[i].failure);
            return BENCH_EXIT_ERRORS;
        }
    return BENCH_EXIT_OK;
}

static void add_status(struct bench_totals *t, int status, uint64_t count) {
    for (size_t i = 0; i < t->status_kinds; i++)
        if (t->statuses[i].status == status) {
            t->statuses[i].count += count;
            return;
        }
    if (t->status_kinds == sizeof(t->statuses) / sizeof(t->statuses[0])) {
        t->statuses_other += count;
        return;
    }
    t->statuses[t->status_kinds++] = (struct bench_status_count){status, count};
}

static void merge(const struct run *r, struct bench_totals *t) {
    uint64_t first = UINT64_MAX, last = 0;
    for (unsigned i = 0; i < r->opt.connections; i++) {
        const struct bench_worker *w = &r->workers[i];
        for (int op = 0; op < OP_KINDS; op++) {
            t->ops[op] += w->ops[op];
            t->ops_all += w->ops[op];
            cr_latency_hist_merge(t->hist[op], w->hist[op]);
            cr_latency_hist_merge(t->hist[OP_KINDS], w->hist[op]);
        }
        cr_latency_hist_merge(t->uncorrected, w->uncorrected);
        t->keys_done += w->keys_done;
        t->errors += w->errors;
        t->statuses_other += w->statuses_other;
        for (unsigned s = 0; s < BENCH_STATUS_KINDS && w->statuses[s].count > 0; s++)
            add_status(t, w->statuses[s].status, w->statuses[s].count);
        for (unsigned s = 0; s < BENCH_SECONDS_MAX; s++) {
            const struct bench_second *from = &w->seconds[s];
            struct bench_second *to = &t->seconds[s];
            to->ops += from->ops;
            to->errors += from->errors;
            to->latency_sum_ns += from->latency_sum_ns;
            if (from->latency_max_ns > to->latency_max_ns) to->latency_max_ns = from->latency_max_ns;
            if (from->ops > 0 && s + 1 > t->seconds_used) t->seconds_used = s + 1;
        }
        uint64_t done = 0;
        for (int op = 0; op < OP_KINDS; op++) done += w->ops[op];
        if (done == 0) continue;
        if (w->measured_first_ns < first) first = w->measured_first_ns;
        if (w->measured_last_ns > last) last = w->measured_last_ns;
    }
    t->elapsed_s = last > first ? (double)(last - first) / 1e9 : 0.0;
    uint64_t measure = r->opt.connections > 0 ? r->workers[0].measure_ns : 0;
    t->span_s = last > measure && last != 0 ? (double)(last - measure) / 1e9 : 0.0;
    /* Each connection's sends per second, summed: (n - 1) intervals between n sends. */
    for (unsigned i = 0; i < r->opt.connections; i++) {
        const struct bench_worker *w = &r->workers[i];
        if (w->sent_count > 1 && w->sent_last_ns > w->sent_first_ns)
            t->sent_rate += (double)(w->sent_count - 1) * 1e9 /
                            (double)(w->sent_last_ns - w->sent_first_ns);
    }
}

/* ---- memory ---------------------------------------------------------------- */

static struct cr_latency_hist *new_hist(void) {
    struct cr_latency_hist *h = malloc(sizeof(*h));
    if (h != NULL) cr_latency_hist_reset(h);
    return h;
}

static bool allocate(struct run *r, struct bench_totals *t) {
    unsigned n = r->opt.connections;
    r->workers = calloc(n, sizeof(*r->workers));
    r->threads = calloc(n, sizeof(*r->threads));
    t->seconds = calloc(BENCH_SECONDS_MAX, sizeof(*t->seconds));
    bool ok = r->workers != NULL && r->threads != NULL && t->seconds != NULL;
    for (int op = 0; ok && op <= OP_KINDS; op++) ok = (t->hist[op] = new_hist()) != NULL;
    ok = ok && (t->uncorrected = new_hist()) != NULL;
    for (unsigned i = 0; ok && i < n; i++) {
        r->workers[i].seconds = calloc(BENCH_SECONDS_MAX, sizeof(struct bench_second));
        ok = r->workers[i].seconds != NULL;
        for (int op = 0; ok && op < OP_KINDS; op++) ok = (r->workers[i].hist[op] = new_hist()) != NULL;
        ok = ok && (r->workers[i].uncorrected = new_hist()) != NULL;
    }
    return ok;
}

static void release(struct run *r, struct bench_totals *t) {
    for (unsigned i = 0; r->workers != NULL && i < r->opt.connections; i++) {
        cr_client_close(r->workers[i].client);
        free(r->workers[i].value);
        free(r->workers[i].seconds);
        for (int op = 0; op < OP_KINDS; op++) free(r->workers[i].hist[op]);
        free(r->workers[i].uncorrected);
    }
    for (int op = 0; op <= OP_KINDS; op++) free(t->hist[op]);
    free(t->uncorrected);
    free(t->seconds);
    free(r->workers);
    free(r->threads);
    bench_zipf_free(r->zipf);
    cr_client_close(r->control);
}

int main(int argc, char **argv) {
    struct run r = {0};
    int rc = parse_options(argc, argv, &r.opt);
    if (rc != BENCH_EXIT_OK) return rc < 0 ? BENCH_EXIT_OK : rc;
    uint64_t salt = bench_now_ns() ^ ((uint64_t)getpid() << 32);
    snprintf(r.opt.run_id, sizeof(r.opt.run_id), "cb%08" PRIx64, salt & 0xffffffffu);
    if (r.opt.tenant == NULL) {
        snprintf(r.opt.tenant_buf, sizeof(r.opt.tenant_buf), "bench-%s", r.opt.run_id);
        r.opt.tenant = r.opt.tenant_buf;
    }
    snprintf(r.opt.model_buf, sizeof(r.opt.model_buf), "bench-model-%s", r.opt.run_id);
    r.opt.model = r.opt.model_buf;
    if (r.opt.trace) return bench_trace_main(&r.opt);
    struct bench_totals totals = {0};
    if (!allocate(&r, &totals)) {
        fprintf(stderr, "crescent-bench: out of memory for %u connections\n", r.opt.connections);
        release(&r, &totals);
        return 1;
    }
    rc = set_up(&r);
    if (rc == BENCH_EXIT_OK) rc = run_workers(&r);
    if (rc == BENCH_EXIT_OK) {
        merge(&r, &totals);
        bench_print_summary(r.opt.json_path != NULL && strcmp(r.opt.json_path, "-") == 0
                                ? stderr : stdout, &r.opt, &totals);
        if (r.opt.json_path != NULL && bench_write_json(r.opt.json_path, &r.opt, &totals) != 0)
            rc = 1;
        if (r.opt.report_path != NULL &&
            bench_write_report(r.opt.report_path, &r.opt, &totals) != 0)
            rc = 1;
        if (rc == BENCH_EXIT_OK && totals.errors > 0) rc = BENCH_EXIT_ERRORS;
    }
    if (r.reachable) clean_up(&r);
    if (r.opt.indexer) bench_indexer_clean_up(&r.indexer);
    release(&r, &totals);
    return rc;
}
