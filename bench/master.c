/* bench/master: the store master over RPC, through libcrescent.
 *
 * Starts nothing itself: run crescentd first, e.g.
 *   crescentd --no-pin --rpc-address tcp://127.0.0.1:50051 --http-address 127.0.0.1:13333
 *   master --rpc tcp://127.0.0.1:50051
 * (scripts/bench-master.sh does both on free ports and stops crescentd.)
 *
 * Mounts 16 segments, then for each concurrency N (default 1, 8, 64) runs N
 * threads, each with its own cr_client (own connection), pipelining up to
 * --depth requests:
 *   put     PutStart + PutEnd pairs (4 KiB objects, 1 replica); a pair's
 *           latency is PutStart sent -> PutEnd answered
 *   get     GetReplicaList on the keys just put
 *   exist   ExistKey on the same keys
 *   remove  Remove(force) of the same keys (force: get/exist took leases)
 * and prints one line per case: ops/s and p50/p99/p999 latency. */
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "harness.h"
#include "master_common.h"
#include "crescent/client.h"

#define OBJECT_BYTES 4096u
#define DEPTH_MAX 1024u
#define POLL_BATCH 256u
#define KEY_BYTES 64u

enum workload { WL_PUT, WL_GET, WL_EXIST, WL_REMOVE };
static const char *const workload_names[] = {"put_start+put_end pairs", "get_replica_list",
                                             "exist_key", "remove(force)"};

struct options {
    const char *endpoint;
    int threads[8];
    int thread_cases;
    uint64_t ops;     /* per case, split over the threads */
    unsigned depth;   /* in flight per thread */
    int timeout_ms;
    unsigned workloads;  /* bit per enum workload */
    int shared_io_threads; /* 0: libcrescent's process context; N: the bench's, N I/O threads */
    void *shared_context;
};

/* One pipelined request slot of a worker. */
struct slot {
    uint64_t request_id;
    uint64_t index;      /* the key's number */
    uint64_t started_ns;
    bool busy;
    bool second_phase;   /* put: the PutEnd is in flight */
};

struct worker {
    const struct options *opt;
    enum workload workload;
    int thread;            /* this worker's number */
    int threads;           /* in this case */
    uint64_t count;        /* operations for this worker */
    pthread_barrier_t *ready;
    pthread_barrier_t *go;
    struct bench_latency latency;
    uint64_t errors;
    int first_error;
    bool failed;           /* could not connect: the case is invalid */
    char why[256];         /* what failed, when failed */
    char key_head[KEY_BYTES - 21]; /* room left for 20 digits and the NUL */
    size_t key_head_len;
    struct slot slots[DEPTH_MAX];
};

static char key_prefix[32];

/* Key of operation `index`: the worker's "<prefix>-n<threads>-t<thread>-"
 * then the decimal index, hand-formatted: snprintf per key was a visible
 * share of the client's CPU in profiles. */
static void make_key(const struct worker *w, uint64_t index, char out[KEY_BYTES]) {
    memcpy(out, w->key_head, w->key_head_len);
    size_t n = w->key_head_len;
    char digits[20];
    int d = 0;
    do {
        digits[d++] = (char)('0' + index % 10);
        index /= 10;
    } while (index > 0);
    while (d > 0) out[n++] = digits[--d];
    out[n] = '\0';
}

/* Submits the first (or only) request of operation `index` into slot `s`. */
static int submit(cr_client *c, struct worker *w, struct slot *s, uint64_t index) {
    char key[KEY_BYTES];
    make_key(w, index, key);
    static const struct cr_replicate_config one = {.replica_num = 1};
    struct cr_put_item item = {.key = key, .size_bytes = OBJECT_BYTES, .config = &one};
    s->index = index;
    s->second_phase = false;
    s->started_ns = bench_now_ns();
    switch (w->workload) {
    case WL_PUT: return cr_client_submit_put_start(c, NULL, &item, &s->request_id);
    case WL_GET: return cr_client_submit_get_replica_list(c, NULL, key, &s->request_id);
    case WL_EXIST: return cr_client_submit_exist_key(c, NULL, key, &s->request_id);
    case WL_REMOVE: return cr_client_submit_remove(c, NULL, key, true, &s->request_id);
    }
    return CR_ERR_INVALID_PARAMS;
}

static struct slot *find_slot(struct worker *w, uint64_t request_id) {
    for (unsigned i = 0; i < w->opt->depth; i++)
        if (w->slots[i].busy && w->slots[i].request_id == request_id) return &w->slots[i];
    return NULL;
}

static void note_error(struct worker *w, int status) {
    if (w->errors++ == 0) w->first_error = status;
}

/* Handles one completion; returns true when its operation is finished. */
static bool complete(cr_client *c, struct worker *w, const struct cr_completion *done) {
    struct slot *s = find_slot(w, done->request_id);
    if (s == NULL) {
        note_error(w, done->status != CR_OK ? done->status : CR_ERR_PROTOCOL);
        return false;
    }
    if (done->status != CR_OK) {
        note_error(w, done->status);
    } else if (w->workload == WL_PUT && !s->second_phase) {
        char key[KEY_BYTES];
        make_key(w, s->index, key);
        int rc = cr_client_submit_put_end(c, NULL, key, &s->request_id);
        if (rc == CR_OK) {
            s->second_phase = true;
            return false;
        }
        note_error(w, rc);
    } else {
        bench_latency_add(&w->latency, bench_now_ns() - s->started_ns);
    }
    s->busy = false;
    return true;
}

static void run_pipeline(cr_client *c, struct worker *w) {
    uint64_t next = 0, finished = 0;
    unsigned in_flight = 0;
    struct cr_completion done[POLL_BATCH];
    while (finished < w->count) {
        for (unsigned i = 0; i < w->opt->depth && next < w->count && in_flight < w->opt->depth;
             i++) {
            struct slot *s = &w->slots[i];
            if (s->busy) continue;
            int rc = submit(c, w, s, next++);
            if (rc != CR_OK) {
                note_error(w, rc);
                finished++;
                continue;
            }
            s->busy = true;
            in_flight++;
        }
        int n = cr_client_poll(c, done, POLL_BATCH, -1);
        if (n <= 0) { /* nothing within the timeout: give up on what is in flight */
            note_error(w, n < 0 ? n : CR_ERR_TIMEOUT);
            finished += in_flight;
            in_flight = 0;
            memset(w->slots, 0, sizeof(w->slots));
            continue;
        }
        for (int i = 0; i < n; i++) {
            if (complete(c, w, &done[i])) {
                finished++;
                in_flight--;
            }
        }
    }
}

static void *worker_main(void *arg) {
    struct worker *w = arg;
    int len = snprintf(w->key_head, sizeof(w->key_head), "%s-n%d-t%d-", key_prefix, w->threads,
                       w->thread);
    assert(len > 0 && (size_t)len < sizeof(w->key_head));
    w->key_head_len = (size_t)len;
    cr_client *c = NULL;
    struct cr_client_options options = {.timeout_ms = w->opt->timeout_ms,
                                        .zmq_context = w->opt->shared_context};
    char error[256];
    struct cr_version version;
    if (cr_client_open(w->opt->endpoint, &options, &c, error, sizeof(error)) != CR_OK) {
        w->failed = true;
        snprintf(w->why, sizeof(w->why), "%s", error);
    } else if (cr_client_get_version(c, &version) != CR_OK) { /* connected before the clock starts */
        w->failed = true;
        snprintf(w->why, sizeof(w->why), "%s", cr_client_last_error(c));
    }
    pthread_barrier_wait(w->ready);
    pthread_barrier_wait(w->go);
    if (!w->failed) run_pipeline(c, w);
    cr_client_close(c);
    return NULL;
}

/* Runs one case; returns false if a worker could not connect. */
static bool run_case(const struct options *opt, enum workload workload, int threads) {
    struct worker *workers = calloc((size_t)threads, sizeof(*workers));
    pthread_t *ids = calloc((size_t)threads, sizeof(*ids));
    assert(workers != NULL && ids != NULL);
    pthread_barrier_t ready, go;
    pthread_barrier_init(&ready, NULL, (unsigned)threads + 1);
    pthread_barrier_init(&go, NULL, (unsigned)threads + 1);
    uint64_t per_thread = (opt->ops + (uint64_t)threads - 1) / (uint64_t)threads;
    for (int t = 0; t < threads; t++) {
        struct worker *w = &workers[t];
        *w = (struct worker){.opt = opt, .workload = workload, .thread = t, .threads = threads,
                             .count = per_thread, .ready = &ready, .go = &go};
        bench_latency_init(&w->latency, per_thread);
        if (pthread_create(&ids[t], NULL, worker_main, w) != 0) abort();
    }
    pthread_barrier_wait(&ready);
    uint64_t start = bench_now_ns();
    pthread_barrier_wait(&go);
    for (int t = 0; t < threads; t++) pthread_join(ids[t], NULL);
    uint64_t elapsed = bench_now_ns() - start;

    struct bench_latency all;
    bench_latency_init(&all, per_thread * (uint64_t)threads);
    uint64_t errors = 0;
    int first_error = CR_OK;
    bool ok = true;
    const char *why = "";
    for (int t = 0; t < threads; t++) {
        struct worker *w = &workers[t];
        if (w->failed && why[0] == '\0') why = w->why;
        for (size_t i = 0; i < w->latency.count; i++)
            bench_latency_add(&all, w->latency.samples_ns[i]);
        if (w->errors > 0 && first_error == CR_OK) first_error = w->first_error;
        errors += w->errors;
        ok = ok && !w->failed;
        bench_latency_free(&w->latency);
    }
    char name[96];
    snprintf(name, sizeof(name), "rpc %-24s threads=%-3d", workload_names[workload], threads);
    if (!ok) {
        printf("%-44s failed: a worker could not reach %s: %s\n", name, opt->endpoint, why);
    } else {
        bench_report(name, all.count, elapsed, &all); /* successful operations only */
        if (errors > 0)
            printf("  (%" PRIu64 " operations failed; first: %s)\n", errors,
                   cr_status_name(first_error));
    }
    bench_latency_free(&all);
    pthread_barrier_destroy(&ready);
    pthread_barrier_destroy(&go);
    free(workers);
    free(ids);
    return ok;
}

static void usage(FILE *out) {
    fprintf(out,
            "Usage: master --rpc ENDPOINT [--threads 1,8,64] [--ops N] [--depth D]\n"
            "  --rpc ENDPOINT  a running crescentd's --rpc-address (required)\n"
            "  --threads LIST  concurrencies to run (default 1,8,64; at most 8 values)\n"
            "  --ops N         operations per case, split over the threads (default 200000)\n"
            "  --depth D       requests in flight per thread (default 32, at most %u)\n"
            "  --shared-context N  the worker clients share a ZMQ context of the bench's\n"
            "                  with N I/O threads (default 0: libcrescent's default, the\n"
            "                  process's context with one I/O thread)\n"
            "  --workloads L   any of put,get,exist,remove (default all; get, exist and\n"
            "                  remove work on the keys that put wrote)\n"
            "Start crescentd first, or use scripts/bench-master.sh.\n",
            DEPTH_MAX);
}

static bool parse_threads(const char *text, struct options *opt) {
    opt->thread_cases = 0;
    char *copy = strdup(text), *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
        long n = strtol(t, NULL, 10);
        if (n < 1 || n > 1024 || opt->thread_cases == 8) {
            free(copy);
            return false;
        }
        opt->threads[opt->thread_cases++] = (int)n;
    }
    free(copy);
    return opt->thread_cases > 0;
}

static bool parse_workloads(const char *text, struct options *opt) {
    static const char *const short_names[] = {"put", "get", "exist", "remove"};
    opt->workloads = 0;
    char *copy = strdup(text), *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
        bool known = false;
        for (unsigned i = 0; i < 4; i++) {
            if (strcmp(t, short_names[i]) != 0) continue;
            opt->workloads |= 1u << i;
            known = true;
        }
        if (!known) {
            free(copy);
            return false;
        }
    }
    free(copy);
    return opt->workloads != 0;
}

static bool parse_options(int argc, char **argv, struct options *opt) {
    *opt = (struct options){.threads = {1, 8, 64}, .thread_cases = 3, .ops = 200000,
                            .depth = 32, .timeout_ms = 10000, .workloads = 15};
    static const struct option longs[] = {{"rpc", required_argument, NULL, 'r'},
                                          {"threads", required_argument, NULL, 't'},
                                          {"ops", required_argument, NULL, 'o'},
                                          {"depth", required_argument, NULL, 'd'},
                                          {"workloads", required_argument, NULL, 'w'},
                                          {"shared-context", required_argument, NULL, 's'},
                                          {"help", no_argument, NULL, 'h'},
                                          {0}};
    int c;
    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (c) {
        case 'r': opt->endpoint = optarg; break;
        case 't': if (!parse_threads(optarg, opt)) return false; break;
        case 'o': opt->ops = strtoull(optarg, NULL, 10); break;
        case 'd': opt->depth = (unsigned)strtoul(optarg, NULL, 10); break;
        case 'w': if (!parse_workloads(optarg, opt)) return false; break;
        case 's': opt->shared_io_threads = atoi(optarg); break;
        case 'h': usage(stdout); exit(0);
        default: return false;
        }
    }
    return opt->endpoint != NULL && opt->ops > 0 && opt->depth >= 1 && opt->depth <= DEPTH_MAX &&
           opt->shared_io_threads >= 0 && opt->shared_io_threads <= 16;
}

int main(int argc, char **argv) {
    struct options opt;
    if (!parse_options(argc, argv, &opt)) {
        usage(stderr);
        return 2;
    }
    snprintf(key_prefix, sizeof(key_prefix), "bench%d", (int)getpid());
    if (opt.shared_io_threads > 0) {
        opt.shared_context = zmq_ctx_new();
        if (opt.shared_context == NULL ||
            zmq_ctx_set(opt.shared_context, ZMQ_IO_THREADS, opt.shared_io_threads) != 0) {
            fprintf(stderr, "master: zmq context: %s\n", zmq_strerror(zmq_errno()));
            return 1;
        }
    }
    cr_client *owner = NULL;
    char error[256];
    struct cr_client_options options = {.timeout_ms = opt.timeout_ms};
    if (cr_client_open(opt.endpoint, &options, &owner, error, sizeof(error)) != CR_OK) {
        fprintf(stderr, "master: %s\n", error);
        return 1;
    }
    if (bench_mount_segments(owner, key_prefix, true) != CR_OK) return 1;
    struct bench_pinger pinger;
    bench_pinger_start(&pinger, owner, opt.endpoint, opt.timeout_ms);

    printf("# bench/master over %s: %u segments, %u-byte objects, 1 replica, depth %u per "
           "thread, %" PRIu64 " ops per case, %s\n",
           opt.endpoint, BENCH_SEGMENTS, OBJECT_BYTES, opt.depth, opt.ops,
           opt.shared_context ? "the bench's ZMQ context" : "libcrescent's process context");
    bool ok = true;
    for (int i = 0; i < opt.thread_cases && ok; i++)
        for (int wl = WL_PUT; wl <= WL_REMOVE && ok; wl++)
            if (opt.workloads & (1u << wl)) ok = run_case(&opt, (enum workload)wl, opt.threads[i]);

    bench_pinger_stop(&pinger);
    bench_mount_segments(owner, key_prefix, false);
    cr_client_close(owner);
    if (opt.shared_context != NULL) zmq_ctx_term(opt.shared_context);
    return ok ? 0 : 1;
}
