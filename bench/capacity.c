/* bench/capacity: tens of millions of live objects in one crescentd, and
 * puts still succeeding once eviction by count has to make room (issue 14).
 *
 * Starts nothing itself: scripts/bench-capacity.sh starts crescentd with a
 * --max-objects and runs this against it.  Mounts 4 metadata-only segments
 * (PutStart/PutEnd only: no byte is written, so their size costs nothing),
 * then T threads, each its own connection, put distinct 4 KiB keys in
 * BatchPutStart + BatchPutEnd pairs of --batch keys:
 *   fill   --fill keys (the store grows; no eviction yet)
 *   churn  --churn more keys (past the count watermark: every put must still
 *          succeed while eviction makes room)
 * For each phase it prints keys/s with the latency of a batch pair, the
 * keys refused (must be 0), and crescentd's resident memory (VmRSS of --pid)
 * before and after. */
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "crescent/client.h"

#define SEGMENTS 4u
#define SEGMENT_BYTES (32ull << 30) /* 4 x 32 GiB: 34 M objects of 4 KiB */
#define OBJECT_BYTES 4096u
#define BATCH_MAX 256u
#define THREADS_MAX 64u
#define KEY_BYTES 32u

struct options {
    const char *endpoint;
    uint64_t fill, churn;
    unsigned threads, batch;
    long pid;
};

struct worker {
    const struct options *opt;
    uint64_t first, count; /* this worker's keys: [first, first + count) */
    struct bench_latency latency;
    uint64_t refused;
    int first_error;
    char error[256];
    bool failed;
};

static uint64_t rss_bytes(long pid) {
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%ld/status", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL) return 0;
    uint64_t kib = 0;
    while (fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "VmRSS: %" SCNu64 " kB", &kib) == 1) break;
    fclose(f);
    return kib * 1024u;
}

/* One batch pair; counts the keys refused by either call. */
static void put_batch(cr_client *c, struct worker *w, uint64_t first, unsigned n) {
    char keys[BATCH_MAX][KEY_BYTES];
    const char *key_ptrs[BATCH_MAX];
    struct cr_put_item items[BATCH_MAX];
    for (unsigned i = 0; i < n; i++) {
        snprintf(keys[i], KEY_BYTES, "cap/%012" PRIu64, first + i);
        key_ptrs[i] = keys[i];
        items[i] = (struct cr_put_item){.key = keys[i], .size_bytes = OBJECT_BYTES};
    }
    uint64_t t0 = bench_now_ns();
    struct cr_replica_lists lists = {0};
    struct cr_status_list ends = {0};
    int rc = cr_client_batch_put_start(c, NULL, items, n, &lists);
    if (rc == CR_OK) rc = cr_client_batch_put_end(c, NULL, key_ptrs, n, &ends);
    bench_latency_add(&w->latency, bench_now_ns() - t0);
    if (rc != CR_OK) {
        w->refused += n;
        if (w->first_error == 0) {
            w->first_error = rc;
            snprintf(w->error, sizeof(w->error), "%s", cr_client_last_error(c));
        }
    }
    for (size_t i = 0; rc == CR_OK && i < lists.count; i++) {
        int st = lists.lists[i].status != CR_OK ? lists.lists[i].status : ends.statuses[i];
        if (st == CR_OK) continue;
        w->refused++;
        if (w->first_error == 0) w->first_error = st;
    }
    cr_client_replica_lists_free(&lists);
    cr_client_status_list_free(&ends);
}

static void *worker_main(void *arg) {
    struct worker *w = arg;
    struct cr_client_options options = {.timeout_ms = 60000};
    cr_client *c = NULL;
    if (cr_client_open(w->opt->endpoint, &options, &c, w->error, sizeof(w->error)) != CR_OK) {
        w->failed = true;
        return NULL;
    }
    for (uint64_t done = 0; done < w->count;) {
        unsigned n = w->count - done < w->opt->batch ? (unsigned)(w->count - done) : w->opt->batch;
        put_batch(c, w, w->first + done, n);
        done += n;
    }
    cr_client_close(c);
    return NULL;
}

/* Puts keys [first, first + count) over the threads; returns false on failure. */
static bool phase(const struct options *opt, const char *name, uint64_t first, uint64_t count) {
    struct worker workers[THREADS_MAX];
    pthread_t tids[THREADS_MAX];
    uint64_t per = count / opt->threads;
    uint64_t rss_before = rss_bytes(opt->pid);
    uint64_t start = bench_now_ns();
    for (unsigned t = 0; t < opt->threads; t++) {
        struct worker *w = &workers[t];
        *w = (struct worker){.opt = opt, .first = first + per * t,
                             .count = t + 1 == opt->threads ? count - per * t : per};
        bench_latency_init(&w->latency, w->count / opt->batch + 1);
        if (pthread_create(&tids[t], NULL, worker_main, w) != 0) abort();
    }
    struct bench_latency all;
    bench_latency_init(&all, count / opt->batch + opt->threads + 1);
    uint64_t refused = 0;
    bool ok = true;
    for (unsigned t = 0; t < opt->threads; t++) {
        pthread_join(tids[t], NULL);
        struct worker *w = &workers[t];
        for (size_t i = 0; i < w->latency.count; i++)
            bench_latency_add(&all, w->latency.samples_ns[i]);
        refused += w->refused;
        if (w->failed) {
            fprintf(stderr, "capacity: cannot connect: %s\n", w->error);
            ok = false;
        } else if (w->first_error != 0) {
            fprintf(stderr, "capacity: %s: first refusal %s %s\n", name,
                    cr_strerror(w->first_error), w->error);
        }
        bench_latency_free(&w->latency);
    }
    uint64_t elapsed = bench_now_ns() - start;
    char label[96];
    snprintf(label, sizeof(label), "capacity %s: keys (batch pairs of %u, %u thr)", name,
             opt->batch, opt->threads);
    bench_report(label, count, elapsed, &all); /* latency: of a batch pair */
    bench_latency_free(&all);
    uint64_t rss_after = rss_bytes(opt->pid);
    printf("capacity %s: %" PRIu64 " keys put, %" PRIu64 " refused; crescentd RSS %.2f -> "
           "%.2f GiB\n",
           name, count, refused, (double)rss_before / (1u << 30),
           (double)rss_after / (1u << 30));
    fflush(stdout);
    return ok && refused == 0;
}

static int mount_segments(const char *endpoint) {
    cr_client *owner = NULL;
    char error[256];
    struct cr_client_options options = {.timeout_ms = 60000};
    if (cr_client_open(endpoint, &options, &owner, error, sizeof(error)) != CR_OK) {
        fprintf(stderr, "capacity: %s\n", error);
        return CR_ERR_IO;
    }
    int rc = CR_OK;
    for (unsigned i = 0; i < SEGMENTS && rc == CR_OK; i++) {
        char name[32];
        snprintf(name, sizeof(name), "capacity-seg%u", i);
        struct cr_segment_spec spec = {.name = name, .base = (uint64_t)(i + 1) << 40,
                                       .size_bytes = SEGMENT_BYTES,
                                       .transport_endpoint = "127.0.0.1:1"};
        rc = cr_client_mount_segment(owner, &spec);
        if (rc != CR_OK)
            fprintf(stderr, "capacity: mount %s: %s\n", name, cr_client_last_error(owner));
    }
    /* The owner's segments would go with it after --client-ttl: it stays
     * open (and pings) only as long as the bench, so crescentd runs with a
     * long TTL (bench-capacity.sh). */
    cr_client_close(owner);
    return rc;
}

static void usage(FILE *out) {
    fprintf(out,
            "Usage: capacity --rpc ENDPOINT --pid PID [--fill N] [--churn N] [--threads T]\n"
            "                [--batch B]\n"
            "  --rpc ENDPOINT  a running crescentd's --rpc-address (required)\n"
            "  --pid PID       crescentd's process id, to read its VmRSS\n"
            "  --fill N        keys put first (default 20000000)\n"
            "  --churn N       keys put after (default 2000000)\n"
            "  --threads T     connections putting at once (default 4, at most %u)\n"
            "  --batch B       keys per BatchPutStart/BatchPutEnd (default 64, at most %u)\n",
            THREADS_MAX, BATCH_MAX);
}

int main(int argc, char **argv) {
    struct options opt = {.fill = 20000000, .churn = 2000000, .threads = 4, .batch = 64};
    static const struct option longs[] = {
        {"rpc", required_argument, NULL, 'r'},     {"pid", required_argument, NULL, 'p'},
        {"fill", required_argument, NULL, 'f'},    {"churn", required_argument, NULL, 'c'},
        {"threads", required_argument, NULL, 't'}, {"batch", required_argument, NULL, 'b'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (ch) {
        case 'r': opt.endpoint = optarg; break;
        case 'p': opt.pid = strtol(optarg, NULL, 10); break;
        case 'f': opt.fill = strtoull(optarg, NULL, 10); break;
        case 'c': opt.churn = strtoull(optarg, NULL, 10); break;
        case 't': opt.threads = (unsigned)strtoul(optarg, NULL, 10); break;
        case 'b': opt.batch = (unsigned)strtoul(optarg, NULL, 10); break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (opt.endpoint == NULL || opt.threads == 0 || opt.threads > THREADS_MAX ||
        opt.batch == 0 || opt.batch > BATCH_MAX || opt.fill < opt.threads) {
        usage(stderr);
        return 2;
    }
    if (mount_segments(opt.endpoint) != CR_OK) return 1;
    bool ok = phase(&opt, "fill", 0, opt.fill);
    if (ok && opt.churn > 0) ok = phase(&opt, "churn", opt.fill, opt.churn);
    return ok ? 0 : 1;
}
