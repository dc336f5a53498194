/* bench/master_sync: synchronous calls to the store master, next to the two
 * ceilings of the transport, in the same run (issue 14's driver shape).
 *
 * N client threads, each with its own connection and one call in flight;
 * phases of fixed seconds; N = 1, 8, 64 by default.  Targets:
 *   crescent  crescentd through libcrescent (each --rpc ENDPOINT is a target:
 *             any endpoint cr_client_open accepts: tcp:// ZMQ, crescent://
 *             native TCP, shm:// same-host shared memory)
 *   zmq-echo  a bare ZMQ ROUTER echo server (bench/echo.h), started here
 *   tcp-echo  a bare one-thread epoll TCP echo server, started here
 * Cases, each one "op" (latency is per op):
 *   get            GetReplicaList of one key
 *   put-pair       PutStart + PutEnd of a new 4 KiB object (two calls)
 *   batch-get      BatchGetReplicaList of 32 keys
 *   batch-exist    BatchExistKey of 32 keys
 *   batch-put      BatchPutStart + BatchPutEnd of 32 new objects (two calls)
 * An echo target makes the same calls with frames of the same sizes as
 * crescent's requests (protobuf-packed here the way libcrescent packs them).
 *
 * Per phase: ops/s, calls/s, keys/s, p50/p99/p999 per op, and the server's
 * CPU per call: utime+stime of its process (/proc/PID/stat) across the phase,
 * divided by the calls.  Rounds interleave every target, N and case; the
 * summary is the median of the rounds, with the ratio of crescent to each
 * echo of the same case and N.
 *
 * Transports are a table (struct transport): a new way to reach crescentd
 * (a native TCP endpoint in libcrescent, say) is a row there, or only a new
 * --rpc endpoint when cr_client_open picks the transport by endpoint.
 * scripts/bench-master.sh --sync starts crescentd and runs this. */
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>

#include "echo.h"
#include "harness.h"
#include "master_common.h"
#include "core/latency_hist.h"
#include "crescent/client.h"
#include "master.pb-c.h"
#include "msgs/rpc_frame.h"

#define BATCH 32u
#define READ_KEYS 32768u         /* preloaded for the read cases */
#define KEY_BYTES 64u
#define OBJECT_BYTES 4096u
#define TARGETS_MAX 6u
#define NS_MAX 8u
#define ROUNDS_MAX 15u

enum sync_case { C_GET, C_PAIR, C_BATCH_GET, C_BATCH_EXIST, C_BATCH_PUT, C_COUNT };
static const char *const case_names[C_COUNT] = {"get", "put-pair", "batch-get", "batch-exist",
                                                "batch-put"};
static const unsigned case_calls[C_COUNT] = {1, 2, 1, 1, 2};
static const unsigned case_keys[C_COUNT] = {1, 1, BATCH, BATCH, BATCH};

struct target;
struct worker;

/* One connection of one worker, to one target. */
struct conn {
    cr_client *client;        /* crescent */
    struct echo_client echo;  /* echoes */
};

/* How a worker reaches a target.  op: one operation of a case; 0 on success. */
struct transport {
    const char *name;
    bool (*open)(struct conn *c, const struct target *t, char *error, size_t error_size);
    int (*op)(struct conn *c, struct worker *w, enum sync_case kase);
    void (*close)(struct conn *c);
};

struct target {
    char label[48];
    const struct transport *transport;
    char endpoint[ECHO_ENDPOINT_MAX];
    pid_t pid;                /* whose CPU is read; 0: not read */
};

/* The request frame sizes an echo sends per call (index: call of the op). */
static size_t frame_bytes[C_COUNT][2];
static char read_keys[READ_KEYS][KEY_BYTES];
static char key_prefix[24];
static void *echo_context; /* the echo clients' shared ZMQ context, one I/O thread */

struct phase {
    enum sync_case kase;
    atomic_bool stop;
    int round;                /* for unique put keys */
    int target;
};

struct worker {
    int thread;
    const struct target *target;
    struct phase *phase;
    pthread_barrier_t *barrier;   /* go, stopped, cleaned: main takes part in each */
    struct conn conn;
    bool open;
    char error[256];
    atomic_bool quit;
    uint64_t ops, errors, put_seq;
    int first_error;
    struct cr_latency_hist hist;
    char batch_keys[BATCH][KEY_BYTES];
    uint64_t cursor;          /* next read key */
};

/* ---- keys ---------------------------------------------------------------- */

static void put_key(const struct worker *w, uint64_t seq, char out[KEY_BYTES]) {
    snprintf(out, KEY_BYTES, "%s-p%d-%d-t%d-%" PRIu64, key_prefix, w->phase->round,
             w->phase->target, w->thread, seq);
}

static const char *next_read_key(struct worker *w) {
    return read_keys[(w->cursor++ * 7919u + (uint64_t)w->thread * 4099u) % READ_KEYS];
}

/* ---- the crescent transport (libcrescent) -------------------------------- */

static bool crescent_open(struct conn *c, const struct target *t, char *error, size_t size) {
    struct cr_client_options options = {.timeout_ms = 10000};
    struct cr_version version;
    if (cr_client_open(t->endpoint, &options, &c->client, error, size) != CR_OK) return false;
    if (cr_client_get_version(c->client, &version) == CR_OK) return true; /* connected */
    snprintf(error, size, "%s", cr_client_last_error(c->client));
    return false;
}

static int statuses_ok(int rc, struct cr_status_list *list) {
    for (size_t i = 0; rc == CR_OK && i < list->count; i++) rc = list->statuses[i];
    cr_client_status_list_free(list);
    return rc;
}

static int lists_ok(int rc, struct cr_replica_lists *lists) {
    for (size_t i = 0; rc == CR_OK && i < lists->count; i++) rc = lists->lists[i].status;
    cr_client_replica_lists_free(lists);
    return rc;
}

static int crescent_batch_put(cr_client *cl, struct worker *w) {
    static const struct cr_replicate_config one = {.replica_num = 1};
    struct cr_put_item items[BATCH];
    const char *keys[BATCH];
    for (unsigned i = 0; i < BATCH; i++) {
        put_key(w, w->put_seq++, w->batch_keys[i]);
        keys[i] = w->batch_keys[i];
        items[i] = (struct cr_put_item){.key = keys[i], .size_bytes = OBJECT_BYTES, .config = &one};
    }
    struct cr_replica_lists lists;
    int rc = lists_ok(cr_client_batch_put_start(cl, NULL, items, BATCH, &lists), &lists);
    struct cr_status_list done;
    if (rc == CR_OK) rc = statuses_ok(cr_client_batch_put_end(cl, NULL, keys, BATCH, &done), &done);
    return rc;
}

static int crescent_op(struct conn *c, struct worker *w, enum sync_case kase) {
    static const struct cr_replicate_config one = {.replica_num = 1};
    cr_client *cl = c->client;
    const char *keys[BATCH];
    if (kase == C_BATCH_GET || kase == C_BATCH_EXIST)
        for (unsigned i = 0; i < BATCH; i++) keys[i] = next_read_key(w);
    switch (kase) {
    case C_GET: {
        struct cr_replica_list list;
        int rc = cr_client_get_replica_list(cl, NULL, next_read_key(w), &list);
        cr_client_replica_list_free(&list);
        return rc;
    }
    case C_PAIR: {
        char key[KEY_BYTES];
        put_key(w, w->put_seq++, key);
        struct cr_put_item item = {.key = key, .size_bytes = OBJECT_BYTES, .config = &one};
        struct cr_replica_list list;
        int rc = cr_client_put_start(cl, NULL, &item, &list);
        cr_client_replica_list_free(&list);
        return rc == CR_OK ? cr_client_put_end(cl, NULL, key) : rc;
    }
    case C_BATCH_GET: {
        struct cr_replica_lists lists;
        return lists_ok(cr_client_batch_get_replica_list(cl, NULL, keys, BATCH, &lists), &lists);
    }
    case C_BATCH_EXIST: {
        struct cr_status_list list;
        return statuses_ok(cr_client_batch_exist_key(cl, NULL, keys, BATCH, &list), &list);
    }
    case C_BATCH_PUT: return crescent_batch_put(cl, w);
    case C_COUNT: break;
    }
    return CR_ERR_INVALID_PARAMS;
}

/* Removes what the put cases wrote (outside the measured window), so the
 * object table does not fill over the run. */
static void crescent_cleanup(struct worker *w) {
    const char *keys[BATCH];
    for (uint64_t seq = 0; seq < w->put_seq;) {
        unsigned n = 0;
        for (; n < BATCH && seq < w->put_seq; n++, seq++) {
            put_key(w, seq, w->batch_keys[n]);
            keys[n] = w->batch_keys[n];
        }
        struct cr_status_list list;
        if (cr_client_batch_remove(w->conn.client, NULL, keys, n, true, &list) == CR_OK)
            cr_client_status_list_free(&list);
    }
    w->put_seq = 0;
}

static void crescent_close(struct conn *c) {
    cr_client_close(c->client);
    c->client = NULL;
}

/* ---- the echo transports -------------------------------------------------- */

static bool echo_open(struct conn *c, const struct target *t, char *error, size_t size) {
    bool zmq = strncmp(t->endpoint, "tcp://", 6) == 0;
    int rc = zmq ? echo_client_open_zmq(echo_context, t->endpoint, &c->echo)
                 : echo_client_open_tcp(t->endpoint, &c->echo);
    if (rc != 0) snprintf(error, size, "cannot connect to %s: %s", t->endpoint, strerror(errno));
    return rc == 0;
}

static int echo_op(struct conn *c, struct worker *w, enum sync_case kase) {
    (void)w;
    for (unsigned i = 0; i < case_calls[kase]; i++)
        if (echo_client_call(&c->echo, frame_bytes[kase][i]) != 0) return CR_ERR_IO;
    return CR_OK;
}

static void echo_close(struct conn *c) { echo_client_close(&c->echo); }

/* The transport switch.  A native TCP client in libcrescent that is chosen
 * by its endpoint needs no row: pass its endpoint as another --rpc. */
static const struct transport transport_crescent = {"crescent", crescent_open, crescent_op,
                                                    crescent_close};
static const struct transport transport_echo = {"echo", echo_open, echo_op, echo_close};

/* ---- request sizes ------------------------------------------------------- */

/* Packs the requests as libcrescent does (tenant "default", client id,
 * a 16-byte secret) to learn the frame sizes of each call. */
static void compute_frame_sizes(void) {
    const size_t header = CR_RPC_REQUEST_HEADER_BYTES;
    char *key = read_keys[READ_KEYS - 1];
    char *keys[BATCH];
    for (unsigned i = 0; i < BATCH; i++) keys[i] = read_keys[READ_KEYS - 1 - i];
    static uint8_t secret[CR_CLIENT_SECRET_BYTES];
    Crescent__Master__UUID id = CRESCENT__MASTER__UUID__INIT;
    id.first = id.second = UINT64_MAX / 3; /* a random id: 9-10 varint bytes each */
    Crescent__Master__ReplicateConfig config = CRESCENT__MASTER__REPLICATE_CONFIG__INIT;
    config.has_replica_num = true;
    config.replica_num = 1;
    Crescent__Master__PutStartRequest start = CRESCENT__MASTER__PUT_START_REQUEST__INIT;
    start.key = key;
    start.value_length = OBJECT_BYTES;
    start.config = &config;
    start.tenant_id = CR_CLIENT_DEFAULT_TENANT;
    start.client_id = &id;
    start.has_client_secret = true;
    start.client_secret = (ProtobufCBinaryData){.len = sizeof(secret), .data = secret};
    Crescent__Master__PutEndRequest end = CRESCENT__MASTER__PUT_END_REQUEST__INIT;
    end.key = key;
    end.tenant_id = CR_CLIENT_DEFAULT_TENANT;
    end.client_id = &id;
    end.has_client_secret = true;
    end.client_secret = start.client_secret;
    Crescent__Master__GetReplicaListRequest get = CRESCENT__MASTER__GET_REPLICA_LIST_REQUEST__INIT;
    get.key = key;
    get.tenant_id = CR_CLIENT_DEFAULT_TENANT;
    Crescent__Master__BatchGetReplicaListRequest bget =
        CRESCENT__MASTER__BATCH_GET_REPLICA_LIST_REQUEST__INIT;
    bget.n_keys = BATCH;
    bget.keys = keys;
    bget.tenant_id = CR_CLIENT_DEFAULT_TENANT;
    Crescent__Master__PutStartRequest *starts[BATCH];
    Crescent__Master__PutEndRequest *ends[BATCH];
    for (unsigned i = 0; i < BATCH; i++) starts[i] = &start, ends[i] = &end;
    Crescent__Master__BatchPutStartRequest bstart = CRESCENT__MASTER__BATCH_PUT_START_REQUEST__INIT;
    bstart.n_requests = BATCH;
    bstart.requests = starts;
    Crescent__Master__BatchPutEndRequest bend = CRESCENT__MASTER__BATCH_PUT_END_REQUEST__INIT;
    bend.n_requests = BATCH;
    bend.requests = ends;
    frame_bytes[C_GET][0] = header + protobuf_c_message_get_packed_size(&get.base);
    frame_bytes[C_PAIR][0] = header + protobuf_c_message_get_packed_size(&start.base);
    frame_bytes[C_PAIR][1] = header + protobuf_c_message_get_packed_size(&end.base);
    /* BatchExistKeyRequest has BatchGetReplicaListRequest's fields. */
    frame_bytes[C_BATCH_GET][0] = header + protobuf_c_message_get_packed_size(&bget.base);
    frame_bytes[C_BATCH_EXIST][0] = frame_bytes[C_BATCH_GET][0];
    frame_bytes[C_BATCH_PUT][0] = header + protobuf_c_message_get_packed_size(&bstart.base);
    frame_bytes[C_BATCH_PUT][1] = header + protobuf_c_message_get_packed_size(&bend.base);
}

/* ---- workers and phases -------------------------------------------------- */

static void note_error(struct worker *w, int status) {
    if (w->errors++ == 0) w->first_error = status;
}

static void run_phase(struct worker *w) {
    enum sync_case kase = w->phase->kase;
    const struct transport *t = w->target->transport;
    cr_latency_hist_reset(&w->hist);
    w->ops = w->errors = 0;
    w->first_error = CR_OK;
    while (!atomic_load_explicit(&w->phase->stop, memory_order_relaxed)) {
        uint64_t start = bench_now_ns();
        int rc = t->op(&w->conn, w, kase);
        if (rc != CR_OK) {
            note_error(w, rc);
            continue;
        }
        cr_latency_hist_record(&w->hist, bench_now_ns() - start);
        w->ops++;
    }
}

/* Barriers: opened, then per phase go / stopped / cleaned; main takes part. */
static void *worker_main(void *arg) {
    struct worker *w = arg;
    w->open = w->target->transport->open(&w->conn, w->target, w->error, sizeof(w->error));
    pthread_barrier_wait(w->barrier);
    for (;;) {
        pthread_barrier_wait(w->barrier); /* go */
        if (atomic_load(&w->quit)) break;
        if (w->open) run_phase(w);
        pthread_barrier_wait(w->barrier); /* stopped: main reads the clock and CPU */
        if (w->open && w->target->transport == &transport_crescent) crescent_cleanup(w);
        pthread_barrier_wait(w->barrier); /* cleaned */
    }
    if (w->open) w->target->transport->close(&w->conn);
    return NULL;
}

/* CPU time (utime + stime) of process `pid`, in ns; 0 when unreadable. */
static uint64_t process_cpu_ns(pid_t pid) {
    char path[64], line[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL) return 0;
    size_t n = fread(line, 1, sizeof(line) - 1, f);
    fclose(f);
    line[n] = '\0';
    const char *p = strrchr(line, ')'); /* the command name may hold spaces */
    unsigned long long utime = 0, stime = 0;
    if (p == NULL || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
                            &utime, &stime) != 2)
        return 0;
    return (utime + stime) * (1000000000ull / (uint64_t)sysconf(_SC_CLK_TCK));
}

struct result {
    bool valid;
    double ops_s, p50_us, p99_us, p999_us;
    double cpu_us_per_call; /* < 0: not measured */
};

struct options {
    const char *rpc[TARGETS_MAX];
    int rpc_count;
    pid_t server_pids[TARGETS_MAX]; /* the i-th --rpc's; one given: every --rpc's */
    int pid_count;
    bool zmq_echo, tcp_echo;
    int ns[NS_MAX], n_count;
    unsigned cases;           /* bit per enum sync_case */
    double seconds;
    int rounds;
};

static struct result results[ROUNDS_MAX][TARGETS_MAX][NS_MAX][C_COUNT];

static void print_result(const struct target *t, enum sync_case kase, int n,
                         const struct result *r) {
    double calls = r->ops_s * case_calls[kase], keys = r->ops_s * case_keys[kase];
    printf("%-14s %-11s N=%-3d %10.0f ops/s %10.0f calls/s %11.0f keys/s  p50 %8.1f  p99 %8.1f"
           "  p999 %8.1f us",
           t->label, case_names[kase], n, r->ops_s, calls, keys, r->p50_us, r->p99_us, r->p999_us);
    if (r->cpu_us_per_call >= 0)
        printf("  server %6.2f us/call %6.3f us/key", r->cpu_us_per_call,
               r->cpu_us_per_call * case_calls[kase] / case_keys[kase]);
    printf("\n");
    fflush(stdout);
}

/* One phase of `seconds` with the workers of one target; fills *out. */
static void measure_phase(struct worker *workers, int n, pthread_barrier_t *barrier,
                          struct phase *phase, const struct options *opt, struct result *out) {
    atomic_store(&phase->stop, false);
    pid_t pid = workers[0].target->pid;
    uint64_t cpu_before = pid > 0 ? process_cpu_ns(pid) : 0;
    uint64_t start = bench_now_ns();
    pthread_barrier_wait(barrier); /* go */
    struct timespec pause = {.tv_sec = (time_t)opt->seconds,
                             .tv_nsec = (long)((opt->seconds - (double)(time_t)opt->seconds) * 1e9)};
    while (nanosleep(&pause, &pause) != 0 && errno == EINTR) {}
    atomic_store(&phase->stop, true);
    pthread_barrier_wait(barrier); /* stopped */
    uint64_t elapsed = bench_now_ns() - start;
    uint64_t cpu_after = pid > 0 ? process_cpu_ns(pid) : 0;
    pthread_barrier_wait(barrier); /* cleaned */

    static struct cr_latency_hist all; /* 58 KiB: not on the stack */
    cr_latency_hist_reset(&all);
    uint64_t ops = 0, errors = 0;
    int first_error = CR_OK;
    for (int i = 0; i < n; i++) {
        cr_latency_hist_merge(&all, &workers[i].hist);
        ops += workers[i].ops;
        if (workers[i].errors > 0 && first_error == CR_OK) first_error = workers[i].first_error;
        errors += workers[i].errors;
    }
    if (errors > 0)
        printf("  (%" PRIu64 " %s ops failed; first: %s)\n", errors, case_names[phase->kase],
               cr_status_name(first_error));
    double calls = (double)ops * case_calls[phase->kase];
    *out = (struct result){
        .valid = ops > 0,
        .ops_s = (double)ops / ((double)elapsed / 1e9),
        .p50_us = (double)cr_latency_hist_value_at(&all, 50) / 1e3,
        .p99_us = (double)cr_latency_hist_value_at(&all, 99) / 1e3,
        .p999_us = (double)cr_latency_hist_value_at(&all, 99.9) / 1e3,
        .cpu_us_per_call = pid > 0 && calls > 0 && cpu_after >= cpu_before
                               ? (double)(cpu_after - cpu_before) / 1e3 / calls
                               : -1,
    };
}

/* Runs every case with N connections to one target; false if one could not connect. */
static bool run_group(const struct options *opt, const struct target *t, int ti, int round,
                      int ni) {
    int n = opt->ns[ni];
    struct worker *workers = calloc((size_t)n, sizeof(*workers));
    pthread_t *ids = calloc((size_t)n, sizeof(*ids));
    assert(workers != NULL && ids != NULL);
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, (unsigned)n + 1);
    struct phase phase = {.round = round, .target = ti};
    for (int i = 0; i < n; i++) {
        workers[i].thread = i;
        workers[i].target = t;
        workers[i].phase = &phase;
        workers[i].barrier = &barrier;
        if (pthread_create(&ids[i], NULL, worker_main, &workers[i]) != 0) abort();
    }
    pthread_barrier_wait(&barrier); /* opened */
    bool ok = true;
    for (int i = 0; i < n && ok; i++) {
        if (workers[i].open) continue;
        fprintf(stderr, "master_sync: %s: %s\n", t->label, workers[i].error);
        ok = false;
    }
    for (int c = 0; c < C_COUNT && ok; c++) {
        if (!(opt->cases & (1u << c))) continue;
        phase.kase = (enum sync_case)c;
        struct result *r = &results[round][ti][ni][c];
        measure_phase(workers, n, &barrier, &phase, opt, r);
        if (r->valid) print_result(t, phase.kase, n, r);
    }
    for (int i = 0; i < n; i++) atomic_store(&workers[i].quit, true);
    pthread_barrier_wait(&barrier); /* go, to quit */
    for (int i = 0; i < n; i++) pthread_join(ids[i], NULL);
    pthread_barrier_destroy(&barrier);
    free(workers);
    free(ids);
    return ok;
}

/* ---- summary ------------------------------------------------------------- */

static double median_of(const struct options *opt, int ti, int ni, int c, int field) {
    double v[ROUNDS_MAX];
    int k = 0;
    for (int r = 0; r < opt->rounds; r++) {
        const struct result *x = &results[r][ti][ni][c];
        if (!x->valid) continue;
        double f[] = {x->ops_s, x->p50_us, x->p99_us, x->p999_us, x->cpu_us_per_call};
        v[k++] = f[field];
    }
    return k > 0 ? bench_median(v, k) : -1;
}

enum { F_OPS, F_P50, F_P99, F_P999, F_CPU };

/* The medians of the rounds, one markdown row per (case, N, target), with
 * crescent's ratios to the echoes of the same case and N. */
static void print_summary(const struct options *opt, const struct target *targets, int count,
                          int zmq_echo, int tcp_echo) {
    printf("\n# medians of %d round(s), %.1f s phases; ratios: crescent / echo of the same "
           "case and N (throughput), server CPU per call minus (zmq) or over (tcp) the echo's\n",
           opt->rounds, opt->seconds);
    printf("| case | N | target | ops/s | keys/s | p50 us | p99 us | p999 us | server us/call "
           "| vs zmq-echo | cpu - zmq-echo | vs tcp-echo | cpu / tcp-echo |\n"
           "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int c = 0; c < C_COUNT; c++) {
        if (!(opt->cases & (1u << c))) continue;
        for (int ni = 0; ni < opt->n_count; ni++) {
            for (int ti = 0; ti < count; ti++) {
                double ops = median_of(opt, ti, ni, c, F_OPS);
                if (ops < 0) continue;
                double cpu = median_of(opt, ti, ni, c, F_CPU);
                printf("| %s | %d | %s | %.0f | %.0f | %.1f | %.1f | %.1f | ", case_names[c],
                       opt->ns[ni], targets[ti].label, ops, ops * case_keys[c],
                       median_of(opt, ti, ni, c, F_P50), median_of(opt, ti, ni, c, F_P99),
                       median_of(opt, ti, ni, c, F_P999));
                if (cpu >= 0) printf("%.2f", cpu);
                bool is_crescent = targets[ti].transport == &transport_crescent;
                int echoes[2] = {zmq_echo, tcp_echo};
                for (int e = 0; e < 2; e++) {
                    double eops = echoes[e] >= 0 ? median_of(opt, echoes[e], ni, c, F_OPS) : -1;
                    double ecpu = echoes[e] >= 0 ? median_of(opt, echoes[e], ni, c, F_CPU) : -1;
                    printf(" | ");
                    if (is_crescent && eops > 0) printf("%.2fx", ops / eops);
                    printf(" | ");
                    if (is_crescent && ecpu > 0 && cpu >= 0)
                        printf(e == 0 ? "%+.2f us" : "%.2fx", e == 0 ? cpu - ecpu : cpu / ecpu);
                }
                printf(" |\n");
            }
        }
    }
    fflush(stdout);
}

/* ---- set-up -------------------------------------------------------------- */

/* Writes the keys the read cases read (BatchPut, 32 at a time). */
static int preload(cr_client *owner, bool remove) {
    static const struct cr_replicate_config one = {.replica_num = 1};
    for (unsigned base = 0; base < READ_KEYS; base += BATCH) {
        struct cr_put_item items[BATCH];
        const char *keys[BATCH];
        for (unsigned i = 0; i < BATCH; i++) {
            keys[i] = read_keys[base + i];
            items[i] = (struct cr_put_item){.key = keys[i], .size_bytes = OBJECT_BYTES,
                                            .config = &one};
        }
        struct cr_status_list done;
        int rc;
        if (remove) {
            rc = statuses_ok(cr_client_batch_remove(owner, NULL, keys, BATCH, true, &done), &done);
        } else {
            struct cr_replica_lists lists;
            rc = lists_ok(cr_client_batch_put_start(owner, NULL, items, BATCH, &lists), &lists);
            if (rc == CR_OK)
                rc = statuses_ok(cr_client_batch_put_end(owner, NULL, keys, BATCH, &done), &done);
        }
        if (rc != CR_OK) {
            fprintf(stderr, "master_sync: %s the read keys: %s (%s)\n",
                    remove ? "removing" : "writing", cr_status_name(rc),
                    cr_client_last_error(owner));
            return rc;
        }
    }
    return CR_OK;
}

static void usage(FILE *out) {
    fprintf(out,
            "Usage: master_sync [--rpc ENDPOINT]... [--server-pid PID]... [options]\n"
            "  --rpc [LABEL=]ENDPOINT  a running crescentd's RPC endpoint, reached through\n"
            "                     libcrescent (cr_client_open); repeat for each endpoint to\n"
            "                     measure (at most 4); LABEL names it in the output\n"
            "  --server-pid PID   crescentd's process, whose CPU per call is reported;\n"
            "                     repeated: the Nth is the Nth --rpc's (two crescentds\n"
            "                     compared in one interleaved run)\n"
            "  --echo LIST        ceilings to start and measure: zmq,tcp (default), or none\n"
            "  --threads LIST     concurrencies N (default 1,8,64; at most %u values)\n"
            "  --cases LIST       any of get,put-pair,batch-get,batch-exist,batch-put\n"
            "                     (default all)\n"
            "  --seconds S        length of each phase (default 5)\n"
            "  --rounds R         interleaved rounds, summarised by their medians\n"
            "                     (default 3, at most %u)\n"
            "scripts/bench-master.sh --sync starts crescentd and runs this.\n",
            NS_MAX, ROUNDS_MAX);
}

static bool parse_list(const char *text, const char *const *names, int count, unsigned *bits) {
    *bits = 0;
    char *copy = strdup(text), *save = NULL;
    bool ok = true;
    for (char *t = strtok_r(copy, ",", &save); t != NULL && ok; t = strtok_r(NULL, ",", &save)) {
        int i = 0;
        while (i < count && strcmp(t, names[i]) != 0) i++;
        ok = i < count;
        if (ok) *bits |= 1u << i;
    }
    free(copy);
    return ok;
}

static bool parse_threads(const char *text, struct options *opt) {
    opt->n_count = 0;
    char *copy = strdup(text), *save = NULL;
    bool ok = true;
    for (char *t = strtok_r(copy, ",", &save); t != NULL && ok; t = strtok_r(NULL, ",", &save)) {
        long n = strtol(t, NULL, 10);
        ok = n >= 1 && n <= 1024 && opt->n_count < (int)NS_MAX;
        if (ok) opt->ns[opt->n_count++] = (int)n;
    }
    free(copy);
    return ok && opt->n_count > 0;
}

static bool parse_options(int argc, char **argv, struct options *opt) {
    *opt = (struct options){.zmq_echo = true, .tcp_echo = true, .ns = {1, 8, 64}, .n_count = 3,
                            .cases = (1u << C_COUNT) - 1, .seconds = 5, .rounds = 3};
    static const struct option longs[] = {
        {"rpc", required_argument, NULL, 'r'},     {"server-pid", required_argument, NULL, 'p'},
        {"echo", required_argument, NULL, 'e'},    {"threads", required_argument, NULL, 't'},
        {"cases", required_argument, NULL, 'c'},   {"seconds", required_argument, NULL, 's'},
        {"rounds", required_argument, NULL, 'n'},  {"help", no_argument, NULL, 'h'},
        {0}};
    static const char *const echo_names[] = {"zmq", "tcp", "none"};
    unsigned bits;
    int c;
    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (c) {
        case 'r':
            if (opt->rpc_count == 4) return false;
            opt->rpc[opt->rpc_count++] = optarg;
            break;
        case 'p':
            if (opt->pid_count == TARGETS_MAX) return false;
            opt->server_pids[opt->pid_count++] = (pid_t)atoi(optarg);
            break;
        case 'e':
            if (!parse_list(optarg, echo_names, 3, &bits)) return false;
            opt->zmq_echo = bits & 1u;
            opt->tcp_echo = bits & 2u;
            break;
        case 't': if (!parse_threads(optarg, opt)) return false; break;
        case 'c': if (!parse_list(optarg, case_names, C_COUNT, &opt->cases)) return false; break;
        case 's': opt->seconds = strtod(optarg, NULL); break;
        case 'n': opt->rounds = atoi(optarg); break;
        case 'h': usage(stdout); exit(0);
        default: return false;
        }
    }
    return optind == argc && opt->cases != 0 && opt->seconds > 0 && opt->seconds <= 3600 &&
           opt->rounds >= 1 && opt->rounds <= (int)ROUNDS_MAX &&
           (opt->rpc_count > 0 || opt->zmq_echo || opt->tcp_echo);
}

/* Crescent targets: "--rpc [LABEL=]ENDPOINT", labelled "crescent" unless
 * told otherwise. */
static int add_crescent_targets(const struct options *opt, struct target *targets) {
    for (int i = 0; i < opt->rpc_count; i++) {
        struct target *t = &targets[i];
        const char *arg = opt->rpc[i], *eq = strchr(arg, '='), *scheme = strstr(arg, "://");
        bool labelled = eq != NULL && (scheme == NULL || eq < scheme);
        if (labelled)
            snprintf(t->label, sizeof(t->label), "%.*s", (int)(eq - arg), arg);
        else
            snprintf(t->label, sizeof(t->label), i == 0 ? "crescent" : "crescent#%d", i + 1);
        t->transport = &transport_crescent;
        snprintf(t->endpoint, sizeof(t->endpoint), "%s", labelled ? eq + 1 : arg);
        t->pid = opt->pid_count == 0 ? 0 : opt->server_pids[i < opt->pid_count ? i : 0];
    }
    return opt->rpc_count;
}

static int add_echo_target(struct target *t, bool zmq) {
    struct echo_server server;
    if (!echo_server_start(zmq, &server)) return 0;
    snprintf(t->label, sizeof(t->label), "%s", zmq ? "zmq-echo" : "tcp-echo");
    t->transport = &transport_echo;
    snprintf(t->endpoint, sizeof(t->endpoint), "%s", server.endpoint);
    t->pid = server.pid;
    return 1;
}

int main(int argc, char **argv) {
    struct options opt;
    if (!parse_options(argc, argv, &opt)) {
        usage(stderr);
        return 2;
    }
    snprintf(key_prefix, sizeof(key_prefix), "sync%d", (int)getpid());
    for (unsigned i = 0; i < READ_KEYS; i++)
        snprintf(read_keys[i], KEY_BYTES, "%s-r-t0-%06u", key_prefix, i);
    compute_frame_sizes();

    /* The echo servers are forked before any thread (or ZMQ context) exists. */
    struct target targets[TARGETS_MAX] = {0};
    int count = add_crescent_targets(&opt, targets);
    int zmq_echo = -1, tcp_echo = -1;
    if (opt.zmq_echo && add_echo_target(&targets[count], true)) zmq_echo = count++;
    if (opt.tcp_echo && add_echo_target(&targets[count], false)) tcp_echo = count++;
    if ((opt.zmq_echo && zmq_echo < 0) || (opt.tcp_echo && tcp_echo < 0)) return 1;
    echo_context = zmq_ctx_new();
    if (echo_context == NULL) return 1;

    /* The read keys and segments, in each crescentd measured: the first
     * target's, and each target's whose --server-pid is another process. */
    cr_client *owners[TARGETS_MAX] = {NULL};
    struct bench_pinger pingers[TARGETS_MAX];
    for (int i = 0; i < opt.rpc_count; i++) {
        bool seen = false;
        for (int j = 0; j < i; j++) seen = seen || targets[j].pid == targets[i].pid;
        if (seen) continue;
        char error[256];
        struct cr_client_options options = {.timeout_ms = 10000};
        if (cr_client_open(targets[i].endpoint, &options, &owners[i], error, sizeof(error)) !=
            CR_OK) {
            fprintf(stderr, "master_sync: %s\n", error);
            return 1;
        }
        if (bench_mount_segments(owners[i], key_prefix, true) != CR_OK ||
            preload(owners[i], false) != CR_OK)
            return 1;
        bench_pinger_start(&pingers[i], owners[i], targets[i].endpoint, 10000);
    }

    printf("# bench/master_sync: %d target(s), N =", count);
    for (int i = 0; i < opt.n_count; i++) printf(" %d", opt.ns[i]);
    printf(", %.1f s phases, %d round(s); request frames: get %zu B, put %zu+%zu B, "
           "batch-get/exist %zu B, batch-put %zu+%zu B\n",
           opt.seconds, opt.rounds, frame_bytes[C_GET][0], frame_bytes[C_PAIR][0],
           frame_bytes[C_PAIR][1], frame_bytes[C_BATCH_GET][0], frame_bytes[C_BATCH_PUT][0],
           frame_bytes[C_BATCH_PUT][1]);
    bool ok = true;
    for (int round = 0; round < opt.rounds && ok; round++)
        for (int ni = 0; ni < opt.n_count && ok; ni++)
            for (int k = 0; k < count && ok; k++) {
                int ti = (k + round) % count; /* each round starts with another target */
                ok = run_group(&opt, &targets[ti], ti, round, ni);
            }
    if (ok) print_summary(&opt, targets, count, zmq_echo, tcp_echo);

    for (int i = 0; i < opt.rpc_count; i++) {
        if (owners[i] == NULL) continue;
        bench_pinger_stop(&pingers[i]);
        preload(owners[i], true);
        bench_mount_segments(owners[i], key_prefix, false);
        cr_client_close(owners[i]);
    }
    zmq_ctx_term(echo_context);
    for (int i = 0; i < count; i++) {
        if (targets[i].transport != &transport_echo) continue;
        struct echo_server s = {.pid = targets[i].pid};
        echo_server_stop(&s);
    }
    return ok ? 0 : 1;
}
