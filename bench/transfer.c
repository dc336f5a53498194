/* bench/transfer: the transfer layer (src/rdma) over tcp and shm.
 *
 * Put (WRITE) and Get (READ) of 4 KiB, 64 KiB, 1 MiB and 16 MiB objects by
 * 1, 4, 16 and 64 concurrent clients (each a thread with its own
 * cr_xfer_client and one op in flight, cr_xfer_read/cr_xfer_write), against
 * one server thread hosting a 256 MiB memfd segment.  Each line: ops/s, GB/s,
 * p50/p99 of one op.  Ceilings measured in the same run: a bare loopback TCP
 * stream between two threads (1 MiB writes and reads), and single-thread
 * memcpy of 1 MiB blocks over the same 64 MiB span the clients use.
 *
 * Then the targets, interleaved: ROUNDS rounds of [tcp ceiling, tcp 1 MiB
 * Get, memcpy ceiling, shm 1 MiB Get, shm 4 KiB Get], each one client, and the
 * medians of the rounds with their ratios.
 *
 * `caps` as the second argument runs only the capability cost instead
 * (issue 28): ROUNDS interleaved rounds of tcp Get and Put, 4 KiB and 1 MiB,
 * one client, each op without and with a capability (the server holds the
 * segment's key, so a capability sent is checked: one keyed BLAKE2b per
 * request), the medians and their ratio; and the master's cost to sign one.
 *
 *   zig build bench && ./zig-out/bench/transfer [seconds_per_case] [caps]   (default 0.25) */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/log.h"
#include "crescent/error.h"
#include "harness.h"
#include "rdma/xfer.h"

#define SEGMENT_BYTES (UINT64_C(256) << 20)
#define SPAN_BYTES (UINT64_C(64) << 20) /* offsets cycle over this much of the segment */
#define MIB (UINT64_C(1) << 20)
#define ROUNDS 5
#define SAMPLES_TOTAL 2000000u

struct server_run {
    struct cr_xfer_server *srv;
    atomic_bool stop;
};

struct worker {
    pthread_t thread;
    const char *endpoint;
    bool shm;
    bool write;
    size_t size;
    uint64_t base;
    uint64_t start_offset;
    atomic_bool *stop;
    atomic_bool *go;
    atomic_int *ready;
    const struct cr_cap *cap; /* sent with every op; NULL: none */
    uint64_t ops;
    int failures;
    struct bench_latency lat;
};

struct result {
    double ops_per_s;
    double gb_per_s;
    double p50_us;
    double p99_us;
};

static double seconds_per_case = 0.25;

static void *server_main(void *arg) {
    struct server_run *run = arg;
    while (!atomic_load_explicit(&run->stop, memory_order_relaxed))
        cr_xfer_server_run(run->srv, 50);
    return NULL;
}

static void op_done(void *arg, int status, const char *message) {
    (void)message;
    *(int *)arg = status;
}

/* cr_xfer_read/cr_xfer_write with the worker's capability on the op. */
static int one_op(struct cr_xfer_client *cli, const struct worker *w, uint64_t addr, uint8_t *buf) {
    if (w->cap == NULL)
        return w->write ? cr_xfer_write(cli, w->endpoint, "seg0", addr, buf, w->size)
                        : cr_xfer_read(cli, w->endpoint, "seg0", addr, buf, w->size);
    int status = 1;
    struct iovec iov = {buf, w->size};
    struct cr_xfer_op op = {.opcode = w->write ? CR_XFER_WRITE : CR_XFER_READ,
                            .endpoint = w->endpoint, .segment = "seg0", .remote_addr = addr,
                            .cap = w->cap, .iov = &iov, .iov_count = 1, .done = op_done,
                            .arg = &status};
    int rc = cr_xfer_submit(cli, &op);
    if (rc != CR_OK) return rc;
    while (status == 1) cr_xfer_client_poll(cli, -1);
    return status;
}

static void *worker_main(void *arg) {
    struct worker *w = arg;
    struct cr_xfer_client *cli;
    struct cr_xfer_client_config cfg = {.shm_disabled = !w->shm};
    if (cr_xfer_client_create(&cfg, &cli) != CR_OK) abort();
    uint8_t *buf = malloc(w->size);
    memset(buf, 0x5a, w->size);
    uint64_t offset = w->start_offset;
    /* Warm-up op: connects (tcp) or maps the segment (shm). */
    if (one_op(cli, w, w->base + offset, buf) != CR_OK) abort();
    atomic_fetch_add(w->ready, 1);
    /* Every client connected before the clock starts: only timed ops count. */
    while (!atomic_load(w->go)) sched_yield();
    while (!atomic_load_explicit(w->stop, memory_order_relaxed)) {
        uint64_t t0 = bench_now_ns();
        int rc = one_op(cli, w, w->base + offset, buf);
        bench_latency_add(&w->lat, bench_now_ns() - t0);
        if (rc != CR_OK) w->failures++;
        w->ops++;
        offset = (offset + w->size) % (SPAN_BYTES - w->size + 1);
    }
    cr_xfer_client_destroy(cli);
    free(buf);
    return NULL;
}

static const struct cr_cap *case_cap; /* the capability run_case's workers send, or NULL */

static struct result run_case(const char *endpoint, uint64_t base, bool shm, bool write,
                              size_t size, int clients, bool print) {
    struct worker *workers = calloc((size_t)clients, sizeof(*workers));
    atomic_bool stop = false, go = false;
    atomic_int ready = 0;
    for (int i = 0; i < clients; i++) {
        struct worker *w = &workers[i];
        *w = (struct worker){.endpoint = endpoint, .shm = shm, .write = write, .size = size,
                             .base = base, .start_offset = (uint64_t)i * 7 * MIB % SPAN_BYTES,
                             .stop = &stop, .go = &go, .ready = &ready, .cap = case_cap};
        if (w->start_offset + size > SPAN_BYTES) w->start_offset = 0;
        bench_latency_init(&w->lat, SAMPLES_TOTAL / (size_t)clients);
        pthread_create(&w->thread, NULL, worker_main, w);
    }
    while (atomic_load(&ready) < clients) usleep(1000);
    uint64_t t0 = bench_now_ns();
    atomic_store(&go, true);
    usleep((useconds_t)(seconds_per_case * 1e6));
    atomic_store(&stop, true);
    uint64_t elapsed = bench_now_ns() - t0;
    struct bench_latency all;
    bench_latency_init(&all, SAMPLES_TOTAL);
    uint64_t ops = 0;
    int failures = 0;
    for (int i = 0; i < clients; i++) {
        pthread_join(workers[i].thread, NULL);
        ops += workers[i].ops;
        failures += workers[i].failures;
        for (size_t k = 0; k < workers[i].lat.count; k++)
            bench_latency_add(&all, workers[i].lat.samples_ns[k]);
        bench_latency_free(&workers[i].lat);
    }
    qsort(all.samples_ns, all.count, sizeof(uint64_t), bench_u64_compare);
    struct result r = {.ops_per_s = (double)ops / ((double)elapsed / 1e9)};
    r.gb_per_s = r.ops_per_s * (double)size / 1e9;
    r.p50_us = (double)bench_percentile(&all, 0.50) / 1e3;
    r.p99_us = (double)bench_percentile(&all, 0.99) / 1e3;
    if (failures > 0) {
        fprintf(stderr, "%d ops failed\n", failures);
        exit(1);
    }
    if (print) {
        char name[64];
        snprintf(name, sizeof(name), "%s %s %zu KiB x%d", shm ? "shm" : "tcp",
                 write ? "put" : "get", size / 1024, clients);
        printf("%-28s %12.0f ops/s %8.2f GB/s  p50 %9.2f us  p99 %9.2f us\n", name,
               r.ops_per_s, r.gb_per_s, r.p50_us, r.p99_us);
        fflush(stdout);
    }
    bench_latency_free(&all);
    free(workers);
    return r;
}

/* ---- ceilings ------------------------------------------------------------ */

struct stream_sender {
    int fd;
    atomic_bool *stop;
};

static void *stream_send(void *arg) {
    struct stream_sender *s = arg;
    uint8_t *buf = malloc(MIB);
    memset(buf, 1, MIB);
    while (!atomic_load_explicit(s->stop, memory_order_relaxed))
        if (send(s->fd, buf, MIB, MSG_NOSIGNAL) < 0) break;
    free(buf);
    return NULL;
}

/* Bare loopback TCP: one thread writes 1 MiB blocks, this one reads them. */
static double tcp_ceiling_gb_per_s(void) {
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bind(listener, (struct sockaddr *)&addr, sizeof(addr));
    socklen_t len = sizeof(addr);
    getsockname(listener, (struct sockaddr *)&addr, &len);
    listen(listener, 1);
    int out = socket(AF_INET, SOCK_STREAM, 0);
    connect(out, (struct sockaddr *)&addr, sizeof(addr));
    int in = accept(listener, NULL, NULL);
    atomic_bool stop = false;
    struct stream_sender s = {.fd = out, .stop = &stop};
    pthread_t t;
    pthread_create(&t, NULL, stream_send, &s);
    uint8_t *buf = malloc(MIB);
    uint64_t bytes = 0, t0 = bench_now_ns(), limit = (uint64_t)(seconds_per_case * 1e9);
    while (bench_now_ns() - t0 < limit) {
        ssize_t n = recv(in, buf, MIB, 0);
        if (n <= 0) break;
        bytes += (uint64_t)n;
    }
    uint64_t elapsed = bench_now_ns() - t0;
    atomic_store(&stop, true);
    shutdown(in, SHUT_RDWR);
    pthread_join(t, NULL);
    close(in);
    close(out);
    close(listener);
    free(buf);
    return (double)bytes / (double)elapsed;
}

/* One thread copying 1 MiB blocks out of a 64 MiB span (as shm Gets do). */
static double memcpy_ceiling_gb_per_s(const uint8_t *span) {
    uint8_t *dst = malloc(MIB);
    uint64_t bytes = 0, offset = 0, t0 = bench_now_ns(), limit = (uint64_t)(seconds_per_case * 1e9);
    while (bench_now_ns() - t0 < limit) {
        memcpy(dst, span + offset, MIB);
        __asm__ volatile("" : : "r"(dst) : "memory"); /* keep the copy */
        bytes += MIB;
        offset = (offset + MIB) % (SPAN_BYTES - MIB + 1);
    }
    uint64_t elapsed = bench_now_ns() - t0;
    free(dst);
    return (double)bytes / (double)elapsed;
}

static void run_targets(const char *endpoint, uint64_t base, const uint8_t *span) {
    double tcp_ceiling[ROUNDS], tcp_get[ROUNDS], mem_ceiling[ROUNDS], shm_get[ROUNDS],
        shm_small_p50[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        tcp_ceiling[r] = tcp_ceiling_gb_per_s();
        tcp_get[r] = run_case(endpoint, base, false, false, MIB, 1, false).gb_per_s;
        mem_ceiling[r] = memcpy_ceiling_gb_per_s(span);
        shm_get[r] = run_case(endpoint, base, true, false, MIB, 1, false).gb_per_s;
        shm_small_p50[r] = run_case(endpoint, base, true, false, 4096, 1, false).p50_us;
        printf("round %d: tcp ceiling %.2f GB/s, tcp 1 MiB get %.2f GB/s, memcpy %.2f GB/s, "
               "shm 1 MiB get %.2f GB/s, shm 4 KiB get p50 %.2f us\n",
               r + 1, tcp_ceiling[r], tcp_get[r], mem_ceiling[r], shm_get[r], shm_small_p50[r]);
    }
    double tc = bench_median(tcp_ceiling, ROUNDS), tg = bench_median(tcp_get, ROUNDS);
    double mc = bench_median(mem_ceiling, ROUNDS), sg = bench_median(shm_get, ROUNDS);
    printf("medians of %d rounds: tcp 1 MiB get %.2f GB/s = %.0f%% of bare loopback %.2f GB/s "
           "(target >= 70%%); shm 1 MiB get %.2f GB/s = %.0f%% of memcpy %.2f GB/s "
           "(target >= 50%%); shm 4 KiB get p50 %.2f us (target <= 5 us)\n",
           ROUNDS, tg, 100 * tg / tc, tc, sg, 100 * sg / mc, mc,
           bench_median(shm_small_p50, ROUNDS));
}

/* The capability's cost: the same ops without and with one, interleaved. */
static void run_capability_cost(const char *endpoint, uint64_t base, const uint8_t *key) {
    struct cr_cap cap = {.addr = base, .length = SPAN_BYTES, .expiry_ms = UINT64_MAX - 60000,
                         .mode = CR_CAP_READ | CR_CAP_WRITE};
    cr_cap_sign(key, "seg0", 4, &cap);
    enum { CASES = 4 };
    static const struct { bool write; size_t size; const char *name; } cases[CASES] = {
        {false, 4096, "tcp get 4 KiB"}, {true, 4096, "tcp put 4 KiB"},
        {false, MIB, "tcp get 1 MiB"},  {true, MIB, "tcp put 1 MiB"}};
    double ops[CASES][2][ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        for (int c = 0; c < CASES; c++) {
            for (int with = 0; with <= 1; with++) {
                int w = (r % 2) ? 1 - with : with; /* alternate which goes first */
                case_cap = w ? &cap : NULL;
                ops[c][w][r] =
                    run_case(endpoint, base, false, cases[c].write, cases[c].size, 1, false)
                        .ops_per_s;
            }
            printf("round %d: %-14s %10.0f ops/s without, %10.0f ops/s with a capability\n",
                   r + 1, cases[c].name, ops[c][0][r], ops[c][1][r]);
        }
    }
    case_cap = NULL;
    for (int c = 0; c < CASES; c++) {
        double without = bench_median(ops[c][0], ROUNDS), with = bench_median(ops[c][1], ROUNDS);
        printf("medians of %d rounds: %-14s %10.0f ops/s without, %10.0f with = %.1f%%\n",
               ROUNDS, cases[c].name, without, with, 100 * with / without);
    }
    /* Per call, in this thread's CPU time (the machine's load inflates wall
     * time, not the cycles spent): the master signs one capability per
     * replica descriptor, the server checks one per request. */
    enum { CALLS = 200000 };
    struct timespec c0, c1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    for (uint32_t i = 0; i < CALLS; i++) {
        cap.addr = base + i;
        cr_cap_sign(key, "seg0", 4, &cap);
        __asm__ volatile("" : : "r"(cap.mac) : "memory");
    }
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
    double sign_ns = ((double)(c1.tv_sec - c0.tv_sec) * 1e9 + (double)(c1.tv_nsec - c0.tv_nsec)) / CALLS;
    uint32_t ok = 0;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    for (uint32_t i = 0; i < CALLS; i++)
        ok += cr_cap_check(key, "seg0", 4, &cap, CR_CAP_READ, cap.addr, 4096, 0, 0) == CR_CAP_OK;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
    double check_ns = ((double)(c1.tv_sec - c0.tv_sec) * 1e9 + (double)(c1.tv_nsec - c0.tv_nsec)) / CALLS;
    if (ok != CALLS) abort();
    printf("cr_cap_sign %.0f ns, cr_cap_check %.0f ns per call (thread CPU time, %d calls)\n",
           sign_ns, check_ns, CALLS);
}

int main(int argc, char **argv) {
    if (argc > 1) seconds_per_case = atof(argv[1]);
    if (seconds_per_case <= 0) seconds_per_case = 0.25;
    cr_log_set_level(CR_LOG_WARN);
    struct cr_xfer_segment seg;
    struct cr_xfer_server *srv;
    if (cr_xfer_segment_alloc(SEGMENT_BYTES, &seg) != CR_OK ||
        cr_xfer_server_create(NULL, &srv) != CR_OK ||
        cr_xfer_server_register_segment(srv, "seg0", &seg) != CR_OK)
        return 1;
    memset(seg.base, 0x33, SPAN_BYTES); /* touch the span: no page faults in the timings */
    const char *endpoint = cr_xfer_server_endpoint(srv);
    uint64_t base = (uint64_t)(uintptr_t)seg.base;
    struct server_run run = {.srv = srv};
    uint8_t key[CR_CAP_KEY_BYTES];
    if (cr_cap_key_generate(key) != 0 || cr_xfer_server_set_key(srv, "seg0", key) != CR_OK)
        return 1;
    pthread_t server_thread;
    pthread_create(&server_thread, NULL, server_main, &run);
    if (argc > 2 && strcmp(argv[2], "caps") == 0) {
        run_capability_cost(endpoint, base, key);
        atomic_store(&run.stop, true);
        pthread_join(server_thread, NULL);
        cr_xfer_server_destroy(srv);
        cr_xfer_segment_free(&seg);
        return 0;
    }

    printf("ceilings: bare loopback tcp %.2f GB/s, memcpy 1 MiB %.2f GB/s\n",
           tcp_ceiling_gb_per_s(), memcpy_ceiling_gb_per_s(seg.base));
    const size_t sizes[] = {4096, 64 * 1024, MIB, 16 * MIB};
    const int clients[] = {1, 4, 16, 64};
    for (int shm = 0; shm <= 1; shm++)
        for (int write = 1; write >= 0; write--)
            for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
                for (size_t c = 0; c < sizeof(clients) / sizeof(clients[0]); c++)
                    run_case(endpoint, base, shm, write, sizes[s], clients[c], true);
    run_targets(endpoint, base, seg.base);

    atomic_store(&run.stop, true);
    pthread_join(server_thread, NULL);
    cr_xfer_server_destroy(srv);
    cr_xfer_segment_free(&seg);
    return 0;
}
