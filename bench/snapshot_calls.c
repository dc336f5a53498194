/* bench/snapshot_calls: what a snapshot of a large store costs the calls
 * served while it runs, in a real crescentd (issue 25: "a snapshot of 10 M
 * objects never holds a call longer than 10 ms").
 *
 * Starts nothing itself: scripts/bench-snapshot.sh starts crescentd with
 * --durability async, a --state-dir and a --snapshot-every-records that the
 * fill stays under and the steady load crosses.  This program:
 *   fill    mounts 4 metadata-only segments and puts --fill distinct keys in
 *           BatchPutStart + BatchPutEnd pairs (as bench/capacity);
 *   steady  --connections threads, each its own connection, call at a fixed
 *           total --rate (open loop: each call is due at its slot; its
 *           latency counts from then, so a stalled call also charges the ones
 *           queued behind it), a mix of put pairs (PutStart + PutEnd of a
 *           fresh key, one sample), GetReplicaList and ExistKey of filled
 *           keys; meanwhile a thread polls --state-dir every millisecond for
 *           a snapshot being written (snapshot-*.tmp: from the journal's
 *           begin to its fdatasync and rename);
 * and stops --after seconds after the first snapshot ended (or at --max-wait).
 * Every call is one sample: "during" when its time in flight (due to
 * answered) overlaps a snapshot's window, "before" when it was answered
 * before the first began (the baseline: same run, same process), "after"
 * otherwise.  Prints p50/p99/p99.9/max of each, from the call's due time
 * (what a caller at that rate waited, queueing behind a slow call included)
 * and from its sending (how long crescentd held it), the counts, and each
 * snapshot's duration. */
#include <dirent.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "crescent/client.h"

#define SEGMENTS 4u
#define SEGMENT_BYTES (32ull << 30) /* 4 x 32 GiB: 34 M objects of 4 KiB */
#define OBJECT_BYTES 4096u
#define BATCH 64u
#define THREADS_MAX 64u
#define KEY_BYTES 48u
#define WINDOWS_MAX 16u

struct options {
    const char *endpoint, *state_dir;
    uint64_t fill;
    unsigned fill_threads, connections;
    double rate, after_s, max_wait_s;
};

/* One steady call: due time, latency from due to answered, and from sent
 * to answered (ns). */
struct sample {
    uint64_t due_ns, latency_ns, service_ns;
};

struct window {
    uint64_t begin_ns, end_ns; /* end 0: still open */
};

static atomic_bool stop_flag;
static atomic_uint windows_seen;
static struct window windows[WINDOWS_MAX]; /* written by the watcher only */

struct worker {
    const struct options *opt;
    unsigned index;
    uint64_t first, count; /* fill: keys [first, first + count) */
    uint64_t start_ns;      /* steady: the first slot */
    struct sample *samples;
    size_t n, cap;
    uint64_t errors;
    char error[256];
    bool failed;
};

static cr_client *open_client(const struct options *opt, char *error, size_t size) {
    struct cr_client_options options = {.timeout_ms = 60000};
    cr_client *c = NULL;
    if (cr_client_open(opt->endpoint, &options, &c, error, size) != CR_OK) return NULL;
    return c;
}

static void *fill_main(void *arg) {
    struct worker *w = arg;
    cr_client *c = open_client(w->opt, w->error, sizeof(w->error));
    if (c == NULL) {
        w->failed = true;
        return NULL;
    }
    char keys[BATCH][KEY_BYTES];
    const char *key_ptrs[BATCH];
    struct cr_put_item items[BATCH];
    for (uint64_t done = 0; done < w->count;) {
        unsigned n = w->count - done < BATCH ? (unsigned)(w->count - done) : BATCH;
        for (unsigned i = 0; i < n; i++) {
            snprintf(keys[i], KEY_BYTES, "snap/%012" PRIu64, w->first + done + i);
            key_ptrs[i] = keys[i];
            items[i] = (struct cr_put_item){.key = keys[i], .size_bytes = OBJECT_BYTES};
        }
        struct cr_replica_lists lists = {0};
        struct cr_status_list ends = {0};
        int rc = cr_client_batch_put_start(c, NULL, items, n, &lists);
        if (rc == CR_OK) rc = cr_client_batch_put_end(c, NULL, key_ptrs, n, &ends);
        if (rc != CR_OK) {
            w->errors += n;
            snprintf(w->error, sizeof(w->error), "%s", cr_client_last_error(c));
        }
        cr_client_replica_lists_free(&lists);
        cr_client_status_list_free(&ends);
        done += n;
    }
    cr_client_close(c);
    return NULL;
}

static uint64_t rng_next(uint64_t *s) { /* xorshift64* */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1Dull;
}

static void sleep_until(uint64_t ns) {
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u), .tv_nsec = (long)(ns % 1000000000u)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0) {
    }
}

/* One call of the mix (put pair 1 : get 2 : exist 1); CR_OK or its error. */
static int steady_call(cr_client *c, struct worker *w, uint64_t i, uint64_t *rng) {
    char key[KEY_BYTES];
    uint64_t r = rng_next(rng);
    unsigned op = (unsigned)(r % 4u);
    if (op == 0) {
        snprintf(key, sizeof(key), "snapnew/%u/%012" PRIu64, w->index, i);
        struct cr_put_item item = {.key = key, .size_bytes = OBJECT_BYTES};
        struct cr_replica_list list = {0};
        int rc = cr_client_put_start(c, NULL, &item, &list);
        cr_client_replica_list_free(&list);
        return rc == CR_OK ? cr_client_put_end(c, NULL, key) : rc;
    }
    snprintf(key, sizeof(key), "snap/%012" PRIu64, (r >> 8) % w->opt->fill);
    if (op == 3) {
        bool exists = false;
        int rc = cr_client_exist_key(c, NULL, key, &exists);
        return rc == CR_OK && !exists ? CR_ERR_OBJECT_NOT_FOUND : rc;
    }
    /* ops 1 and 2: a get */
    struct cr_replica_list list = {0};
    int rc = cr_client_get_replica_list(c, NULL, key, &list);
    cr_client_replica_list_free(&list);
    return rc;
}

static void *steady_main(void *arg) {
    struct worker *w = arg;
    cr_client *c = open_client(w->opt, w->error, sizeof(w->error));
    if (c == NULL) {
        w->failed = true;
        return NULL;
    }
    double per_s = w->opt->rate / w->opt->connections;
    uint64_t rng = 0x9E3779B97F4A7C15ull * (w->index + 1);
    for (uint64_t i = 0; !atomic_load(&stop_flag) && w->n < w->cap; i++) {
        uint64_t due = w->start_ns + (uint64_t)((double)i * 1e9 / per_s);
        uint64_t sent = bench_now_ns();
        if (sent < due) {
            sleep_until(due);
            sent = bench_now_ns();
        }
        int rc = steady_call(c, w, i, &rng);
        uint64_t done = bench_now_ns();
        if (rc != CR_OK && w->errors++ == 0)
            snprintf(w->error, sizeof(w->error), "%s: %s", cr_strerror(rc),
                     cr_client_last_error(c));
        w->samples[w->n++] =
            (struct sample){.due_ns = due, .latency_ns = done - due, .service_ns = done - sent};
    }
    cr_client_close(c);
    return NULL;
}

/* Polls the state directory for a snapshot being written; each window is
 * from the first poll that saw a snapshot-*.tmp to the first that did not. */
static void *watch_main(void *arg) {
    const struct options *opt = arg;
    bool open = false;
    while (!atomic_load(&stop_flag)) {
        bool seen = false;
        DIR *d = opendir(opt->state_dir);
        if (d != NULL) {
            struct dirent *e;
            while ((e = readdir(d)) != NULL) {
                size_t len = strlen(e->d_name);
                if (strncmp(e->d_name, "snapshot-", 9) == 0 && len > 4 &&
                    strcmp(e->d_name + len - 4, ".tmp") == 0)
                    seen = true;
            }
            closedir(d);
        }
        uint64_t now = bench_now_ns();
        unsigned n = atomic_load(&windows_seen);
        if (seen && !open && n < WINDOWS_MAX) {
            windows[n] = (struct window){.begin_ns = now};
            atomic_store(&windows_seen, n + 1);
            open = true;
        } else if (!seen && open) {
            windows[n - 1].end_ns = now;
            open = false;
        }
        sleep_until(now + 1000000u);
    }
    unsigned n = atomic_load(&windows_seen);
    if (open) windows[n - 1].end_ns = bench_now_ns(); /* cut at the run's end */
    return NULL;
}

/* The class of a call: 0 answered before the first snapshot began, 1 in
 * flight during one, 2 the rest (after the first, recovering backlog too). */
static unsigned call_class(const struct sample *s, unsigned n) {
    uint64_t done = s->due_ns + s->latency_ns;
    if (n == 0 || done < windows[0].begin_ns) return 0;
    for (unsigned i = 0; i < n; i++)
        if (s->due_ns <= windows[i].end_ns && done >= windows[i].begin_ns) return 1;
    return 2;
}

static void print_row(const char *name, const char *what, struct bench_latency *lat) {
    if (lat->count == 0) {
        printf("%-7s %-10s 0 calls\n", name, what);
        return;
    }
    qsort(lat->samples_ns, lat->count, sizeof(uint64_t), bench_u64_compare);
    printf("%-7s %-10s %8zu calls  p50 %8.3f ms  p99 %8.3f ms  p99.9 %8.3f ms  max %8.3f ms\n",
           name, what, lat->count, bench_percentile(lat, 0.5) / 1e6,
           bench_percentile(lat, 0.99) / 1e6, bench_percentile(lat, 0.999) / 1e6,
           lat->samples_ns[lat->count - 1] / 1e6);
}

static bool fill(const struct options *opt) {
    cr_client *owner = NULL;
    char error[256];
    if ((owner = open_client(opt, error, sizeof(error))) == NULL) {
        fprintf(stderr, "snapshot_calls: %s\n", error);
        return false;
    }
    for (unsigned i = 0; i < SEGMENTS; i++) {
        char name[32];
        snprintf(name, sizeof(name), "snapcalls-seg%u", i);
        struct cr_segment_spec spec = {.name = name, .base = (uint64_t)(i + 1) << 40,
                                       .size_bytes = SEGMENT_BYTES,
                                       .transport_endpoint = "127.0.0.1:1"};
        if (cr_client_mount_segment(owner, &spec) != CR_OK) {
            fprintf(stderr, "snapshot_calls: mount %s: %s\n", name, cr_client_last_error(owner));
            cr_client_close(owner);
            return false;
        }
    }
    cr_client_close(owner); /* crescentd runs with a long --client-ttl */
    struct worker w[THREADS_MAX];
    pthread_t tids[THREADS_MAX];
    uint64_t per = opt->fill / opt->fill_threads, t0 = bench_now_ns();
    for (unsigned t = 0; t < opt->fill_threads; t++) {
        w[t] = (struct worker){.opt = opt, .index = t, .first = per * t,
                               .count = t + 1 == opt->fill_threads ? opt->fill - per * t : per};
        if (pthread_create(&tids[t], NULL, fill_main, &w[t]) != 0) abort();
    }
    uint64_t errors = 0;
    bool ok = true;
    for (unsigned t = 0; t < opt->fill_threads; t++) {
        pthread_join(tids[t], NULL);
        errors += w[t].errors;
        if (w[t].failed || w[t].errors > 0) {
            fprintf(stderr, "snapshot_calls: fill: %s\n", w[t].error);
            ok = false;
        }
    }
    double s = (double)(bench_now_ns() - t0) / 1e9;
    printf("fill: %" PRIu64 " keys in %.1f s (%.0f keys/s), %" PRIu64 " refused\n", opt->fill, s,
           (double)opt->fill / s, errors);
    fflush(stdout);
    return ok;
}

static bool steady(const struct options *opt) {
    struct worker w[THREADS_MAX];
    pthread_t tids[THREADS_MAX], watcher;
    size_t cap = (size_t)(opt->rate / opt->connections * (opt->max_wait_s + opt->after_s + 5)) + 16;
    uint64_t start = bench_now_ns() + 100000000u;
    if (pthread_create(&watcher, NULL, watch_main, (void *)opt) != 0) abort();
    for (unsigned t = 0; t < opt->connections; t++) {
        w[t] = (struct worker){.opt = opt, .index = t, .start_ns = start, .cap = cap,
                               .samples = calloc(cap, sizeof(struct sample))};
        if (w[t].samples == NULL) abort();
        if (pthread_create(&tids[t], NULL, steady_main, &w[t]) != 0) abort();
    }
    /* Until the first snapshot ended plus --after, or --max-wait. */
    uint64_t deadline = start + (uint64_t)(opt->max_wait_s * 1e9);
    while (bench_now_ns() < deadline) {
        if (atomic_load(&windows_seen) > 0 && windows[0].end_ns != 0) {
            uint64_t end = windows[0].end_ns + (uint64_t)(opt->after_s * 1e9);
            if (end < deadline) deadline = end;
        }
        sleep_until(bench_now_ns() + 10000000u);
    }
    atomic_store(&stop_flag, true);
    bool ok = true;
    uint64_t errors = 0;
    size_t total = 0;
    for (unsigned t = 0; t < opt->connections; t++) {
        pthread_join(tids[t], NULL);
        total += w[t].n;
        errors += w[t].errors;
        if (w[t].failed || w[t].errors > 0) {
            fprintf(stderr, "snapshot_calls: steady: %" PRIu64 " errors, first: %s\n",
                    w[t].errors, w[t].error);
            ok = false;
        }
    }
    pthread_join(watcher, NULL);
    unsigned nw = atomic_load(&windows_seen);
    /* [class][0]: from due (what a caller waited); [class][1]: from sent. */
    struct bench_latency lat[3][2];
    for (unsigned k = 0; k < 3; k++)
        for (unsigned m = 0; m < 2; m++) bench_latency_init(&lat[k][m], total + 1);
    uint64_t last = start;
    for (unsigned t = 0; t < opt->connections; t++)
        for (size_t i = 0; i < w[t].n; i++) {
            const struct sample *s = &w[t].samples[i];
            unsigned k = call_class(s, nw);
            bench_latency_add(&lat[k][0], s->latency_ns);
            bench_latency_add(&lat[k][1], s->service_ns);
            if (s->due_ns + s->latency_ns > last) last = s->due_ns + s->latency_ns;
        }
    printf("steady: %.0f calls/s offered over %u connections (put pair 1 : get 2 : exist 1), "
           "%.1f s, %zu calls, %" PRIu64 " errors\n",
           opt->rate, opt->connections, (double)(last - start) / 1e9, total, errors);
    for (unsigned i = 0; i < nw; i++)
        printf("snapshot %u: from %.3f s to %.3f s of the steady load: %.3f s\n", i + 1,
               (double)(windows[i].begin_ns - start) / 1e9,
               (double)(windows[i].end_ns - start) / 1e9,
               (double)(windows[i].end_ns - windows[i].begin_ns) / 1e9);
    if (nw == 0) {
        printf("no snapshot was written during the steady load (--snapshot-every-records?)\n");
        ok = false;
    }
    static const char *const names[3] = {"before", "during", "after"};
    for (unsigned k = 0; k < 3; k++) {
        print_row(names[k], "from due", &lat[k][0]);
        print_row(names[k], "from sent", &lat[k][1]);
    }
    fflush(stdout);
    for (unsigned k = 0; k < 3; k++)
        for (unsigned m = 0; m < 2; m++) bench_latency_free(&lat[k][m]);
    for (unsigned t = 0; t < opt->connections; t++) free(w[t].samples);
    return ok;
}

static void usage(FILE *out) {
    fprintf(out,
            "Usage: snapshot_calls --rpc ENDPOINT --state-dir DIR [--fill N] [--fill-threads T]\n"
            "                      [--connections C] [--rate R] [--after S] [--max-wait S]\n"
            "  --rpc ENDPOINT     a running crescentd (crescent://HOST:PORT: its native endpoint)\n"
            "  --state-dir DIR    its --state-dir, watched for snapshot-*.tmp\n"
            "  --fill N           keys put first (default 10000000)\n"
            "  --fill-threads T   connections filling (default 4, at most %u)\n"
            "  --connections C    connections of the steady load (default 4, at most %u)\n"
            "  --rate R           steady calls/s over all of them (default 2000)\n"
            "  --after S          seconds of load after the first snapshot ended (default 10)\n"
            "  --max-wait S       seconds of load at most (default 300)\n",
            THREADS_MAX, THREADS_MAX);
}

int main(int argc, char **argv) {
    struct options opt = {.fill = 10000000, .fill_threads = 4, .connections = 4, .rate = 2000,
                          .after_s = 10, .max_wait_s = 300};
    static const struct option longs[] = {
        {"rpc", required_argument, NULL, 'r'},          {"state-dir", required_argument, NULL, 'd'},
        {"fill", required_argument, NULL, 'f'},         {"fill-threads", required_argument, NULL, 'F'},
        {"connections", required_argument, NULL, 'c'},  {"rate", required_argument, NULL, 'R'},
        {"after", required_argument, NULL, 'a'},        {"max-wait", required_argument, NULL, 'm'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (ch) {
        case 'r': opt.endpoint = optarg; break;
        case 'd': opt.state_dir = optarg; break;
        case 'f': opt.fill = strtoull(optarg, NULL, 10); break;
        case 'F': opt.fill_threads = (unsigned)strtoul(optarg, NULL, 10); break;
        case 'c': opt.connections = (unsigned)strtoul(optarg, NULL, 10); break;
        case 'R': opt.rate = strtod(optarg, NULL); break;
        case 'a': opt.after_s = strtod(optarg, NULL); break;
        case 'm': opt.max_wait_s = strtod(optarg, NULL); break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (opt.endpoint == NULL || opt.state_dir == NULL || opt.fill_threads == 0 ||
        opt.fill_threads > THREADS_MAX || opt.connections == 0 ||
        opt.connections > THREADS_MAX || !(opt.rate > 0) || opt.fill == 0) {
        usage(stderr);
        return 2;
    }
    if (!fill(&opt)) return 1;
    return steady(&opt) ? 0 : 1;
}
