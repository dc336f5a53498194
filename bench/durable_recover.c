/* Restart speed of the durable store master (issue 25's "restart with
 * 10 M objects within 10 s"): recovery of a state directory into a fresh
 * store, beside a ceiling measured in the same run, the time to read the
 * same files and check every record's XXH3 (what no recovery can skip).
 *
 *   durable_recover write OBJECTS DIR   writes DIR/snapshot-*.snap with
 *        OBJECTS objects (16 segments, 4 KiB objects, one replica each, a
 *        24-byte key) and DIR/store-*.log with OBJECTS/20 records after it
 *        (new puts, removes of snapshot objects, puts that move an object),
 *        the shape a crash between two snapshots leaves; crescentd can
 *        start from DIR (--state-dir) as well
 *   durable_recover run DIR [ROUNDS]    ROUNDS (default 3) interleaved
 *        rounds of: cr_durable_recover into a new store with crescentd's
 *        default table sizes, then the ceiling; medians, and recovery's
 *        own phase times (read, replay into the image, materialize) and
 *        what its second thread populated of the slab (prefill.h); then,
 *        on the restored store, a snapshot of it taken as crescentd takes
 *        one (cr_durable_feed_snapshot_objects, SLICE objects a round):
 *        each slice's wall and thread CPU time, the longest a round of the
 *        store thread (and so a call waiting for it) is held by a snapshot
 *   durable_recover run DIR [ROUNDS] --ceiling-touch [--cool SECONDS]
 *        also a second ceiling per round, fresh memory: after recovery (its
 *        store destroyed) and a pause of SECONDS (default 15) so that the
 *        memory it freed goes back to the host as a new process's would
 *        have, map and first-touch as many bytes as recovery's anonymous
 *        resident set grew (the restored store's, and recovery's peak, which
 *        a thread samples from /proc/self/statm every 5 ms): one write per
 *        4 KiB page on one thread, then MADV_POPULATE_WRITE 4 MiB at a time
 *        on one thread, then on two (a pause before each), all hinted to
 *        2 MiB pages as the store's slab and the image's chunks are
 *
 * Files are read from the page cache after the first round (the write
 * leaves them there): the figures are CPU cost, not the disk's. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "core/store.h"
#include "core/store_internal.h"
#include "crescent/error.h"
#include "durable/durable.h"
#include "durable/feed.h"
#include "durable/files.h"
#include "durable/record.h"

#define SEGMENTS 16u
#define OBJECT_BYTES 4096u
#define SLICE 4096u /* objects per round: segments' SNAPSHOT_SLICE_OBJECTS */
#define SLICES_MAX (1u << 14)

static const struct cr_uuid OWNER = {{0xC1, 0x5E}};

static void die(const char *what) {
    fprintf(stderr, "durable_recover: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void make_put(struct cr_durable_record *r, uint64_t lsn, uint64_t i, uint64_t slot) {
    memset(r, 0, offsetof(struct cr_durable_record, key));
    r->type = CR_DURABLE_OBJECT_PUT;
    r->lsn = lsn;
    strcpy(r->tenant, "default");
    r->key_len = (uint32_t)snprintf(r->key, sizeof(r->key), "bench-object-%011" PRIu64, i);
    r->size = OBJECT_BYTES;
    r->flags = CR_DURABLE_OBJ_CHECKSUM;
    r->checksum = i * 0x9E3779B97F4A7C15ull;
    r->owner = OWNER;
    r->replica_count = 1;
    r->file_path[0] = '\0';
    snprintf(r->replicas[0].segment, sizeof(r->replicas[0].segment), "bench-seg-%02u",
             (unsigned)(slot % SEGMENTS));
    r->replicas[0].medium = 0;
    r->replicas[0].offset = slot / SEGMENTS * cr_store_alloc_bytes(OBJECT_BYTES);
    r->replicas[0].size = cr_store_alloc_bytes(OBJECT_BYTES);
}

/* Appends buf to fd once it holds a few MiB (and at the end). */
static void drain(int fd, struct cr_buf *buf, bool all) {
    if (!cr_buf_ok(buf)) die("no memory");
    if (!all && buf->len < (8u << 20)) return;
    if (write(fd, buf->data, buf->len) != (ssize_t)buf->len) die("write");
    buf->len = 0;
}

static void write_dir(uint64_t objects, const char *dir) {
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) die(dir);
    DIR *d = opendir(dir);
    if (d == NULL) die(dir);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) { /* a previous run's files */
        if (strncmp(e->d_name, "snapshot-", 9) != 0 && strncmp(e->d_name, "store-", 6) != 0)
            continue;
        char path[CR_DURABLE_PATH_MAX];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        (void)unlink(path);
    }
    closedir(d);
    uint64_t per_segment = objects / SEGMENTS + 2;
    uint64_t snap_lsn = objects + SEGMENTS;
    struct cr_durable_record *r = calloc(1, sizeof(*r));
    struct cr_buf buf;
    cr_buf_init(&buf);
    char path[CR_DURABLE_PATH_MAX];
    cr_durable_snapshot_path(dir, snap_lsn, false, path, sizeof(path));
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || r == NULL) die(path);
    uint8_t header[CR_DURABLE_SNAPSHOT_HEADER];
    cr_durable_snapshot_header(snap_lsn, header);
    cr_buf_append(&buf, header, sizeof(header));
    for (uint32_t s = 0; s < SEGMENTS; s++) {
        memset(r, 0, offsetof(struct cr_durable_record, key));
        r->type = CR_DURABLE_SEGMENT_MOUNT;
        r->lsn = snap_lsn;
        snprintf(r->name, sizeof(r->name), "bench-seg-%02u", s);
        snprintf(r->endpoint, sizeof(r->endpoint), "127.0.0.1:%u", 17000 + s);
        strcpy(r->protocol, "tcp");
        r->owner = OWNER;
        r->base = (uint64_t)(s + 1) << 40;
        r->size = per_segment * cr_store_alloc_bytes(OBJECT_BYTES);
        if (cr_durable_encode(r, &buf) != CR_OK) die("encode");
    }
    for (uint64_t i = 0; i < objects; i++) { /* slots 0..objects-1 */
        make_put(r, snap_lsn, i, i);
        if (cr_durable_encode(r, &buf) != CR_OK) die("encode");
        drain(fd, &buf, false);
    }
    memset(r, 0, offsetof(struct cr_durable_record, key));
    r->type = CR_DURABLE_SNAPSHOT_END;
    r->lsn = snap_lsn;
    r->record_count = objects + SEGMENTS;
    if (cr_durable_encode(r, &buf) != CR_OK) die("encode");
    drain(fd, &buf, true);
    if (fsync(fd) != 0 || close(fd) != 0) die(path);

    /* The log after it: removes of snapshot objects, new objects in the
     * places those freed, and objects written again in place. */
    snprintf(path, sizeof(path), "%s/store-%016" PRIx64 ".log", dir, snap_lsn + 1);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) die(path);
    uint8_t log_header[CR_DURABLE_LOG_HEADER];
    cr_durable_log_header(log_header);
    cr_buf_append(&buf, log_header, sizeof(log_header));
    uint64_t records = objects / 20, lsn = snap_lsn;
    for (uint64_t i = 0; i < records; i++) {
        uint64_t which = i / 3;
        if (i % 3 == 0) {
            memset(r, 0, offsetof(struct cr_durable_record, key));
            r->type = CR_DURABLE_OBJECT_REMOVE;
            r->lsn = ++lsn;
            strcpy(r->tenant, "default");
            r->key_len =
                (uint32_t)snprintf(r->key, sizeof(r->key), "bench-object-%011" PRIu64, which * 7);
        } else if (i % 3 == 1) {
            make_put(r, ++lsn, objects + which, which * 7); /* a new key in the freed place */
        } else {
            make_put(r, ++lsn, which * 7 + 1, which * 7 + 1); /* written again in place */
        }
        if (cr_durable_encode(r, &buf) != CR_OK) die("encode");
        drain(fd, &buf, false);
    }
    drain(fd, &buf, true);
    if (fsync(fd) != 0 || close(fd) != 0) die(path);
    cr_buf_free(&buf);
    free(r);
    printf("wrote %s: a snapshot of %" PRIu64 " objects on %u segments, %" PRIu64
           " log records after it\n",
           dir, objects, SEGMENTS, records);
}

/* The ceiling: read every file of dir whole (as recovery reads them) and
 * check each record's frame. */
static uint64_t ceiling_ns(const char *dir, uint64_t *bytes, uint64_t *records) {
    uint64_t t0 = bench_now_ns();
    *bytes = *records = 0;
    char err[512];
    for (int kind = 1; kind >= 0; kind--) {
        char **names;
        uint32_t count;
        if (cr_durable_list(dir, kind == 1, &names, &count, err, sizeof(err)) != CR_OK) {
            fprintf(stderr, "durable_recover: %s\n", err);
            exit(1);
        }
        for (uint32_t i = 0; i < count; i++) {
            char path[CR_DURABLE_PATH_MAX];
            snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
            uint8_t *data;
            size_t len;
            if (cr_durable_read_big(path, &data, &len, err, sizeof(err)) != CR_OK) {
                fprintf(stderr, "durable_recover: %s\n", err);
                exit(1);
            }
            size_t pos = kind == 1 ? CR_DURABLE_SNAPSHOT_HEADER : CR_DURABLE_LOG_HEADER;
            const uint8_t *body;
            uint32_t body_len;
            size_t frame_len;
            while (cr_durable_frame_next(data + pos, len - pos, &body, &body_len, &frame_len) ==
                   CR_DURABLE_FRAME_OK) {
                pos += frame_len;
                (*records)++;
            }
            *bytes += len;
            cr_durable_big_free(data, len);
        }
        cr_durable_names_free(names, count);
    }
    return bench_now_ns() - t0;
}

/* User + system CPU time of the process: on a shared, loaded machine the
 * steadier figure (wall time there is mostly waiting for a core). */
static uint64_t cpu_ns(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000u +
           ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000u;
}

/* Resident bytes now (/proc/self/statm): the store's state after a
 * restore, once the replay image is given back. */
static uint64_t rss_bytes(void) {
    unsigned long long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f != NULL) {
        if (fscanf(f, "%llu %llu", &size, &resident) != 2) resident = 0;
        fclose(f);
    }
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

static uint64_t thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b) { return bench_u64_compare(a, b); }

/* Anonymous resident bytes now: statm's resident less its shared (file and
 * shmem) pages, so the mapped snapshot, the page cache's pages, which
 * nothing zeroes, is not counted as fresh memory. */
static uint64_t anon_bytes(void) {
    unsigned long long size = 0, resident = 0, shared = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f != NULL) {
        if (fscanf(f, "%llu %llu %llu", &size, &resident, &shared) != 3) resident = shared = 0;
        fclose(f);
    }
    uint64_t pages = resident > shared ? (uint64_t)(resident - shared) : 0;
    return pages * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* Samples anon_bytes every 5 ms while recovery runs: its peak is the fresh
 * memory recovery touched (the replay image is freed before it returns).
 * Only with --ceiling-touch, so the plain run has no third thread. */
struct anon_sampler {
    pthread_t thread;
    atomic_bool stop;
    uint64_t peak; /* read after the join */
};

static void *sampler_main(void *arg) {
    struct anon_sampler *s = arg;
    while (!atomic_load_explicit(&s->stop, memory_order_relaxed)) {
        uint64_t v = anon_bytes();
        if (v > s->peak) s->peak = v;
        nanosleep(&(struct timespec){.tv_nsec = 5000000}, NULL);
    }
    return NULL;
}

/* The fresh-memory ceilings: one write per 4 KiB page on one thread;
 * MADV_POPULATE_WRITE on one thread; and on two, as a restore's second
 * thread populates the slab while the first writes objects. */
#define VARIANTS 3
static const char *const VARIANT[VARIANTS] = {"touched, 1 thread", "populated, 1 thread",
                                              "populated, 2 threads"};

/* What the fresh-memory ceiling needs from a recovery, and its times. */
struct fresh {
    uint64_t store_bytes; /* anonymous resident growth, recovery returned */
    uint64_t peak_bytes;  /* the sampled peak of that growth during it */
    /* per VARIANT, timed at store_bytes ([.][0]) and at peak_bytes ([.][1]) */
    uint64_t wall[VARIANTS][2], cpu[VARIANTS][2];
};

#define TOUCH_STEP (4u << 20) /* prefill.c's STEP_BYTES */
#define HUGE_BYTES (2u << 20)

/* Steps from, from + nth * TOUCH_STEP, ... below to: one thread's share. */
struct toucher {
    char *p;
    size_t from, to, nth;
    bool populate;
};

static void *touch_range(void *arg) {
    const struct toucher *t = arg;
    for (size_t at = t->from; at < t->to; at += t->nth * TOUCH_STEP) {
        size_t n = t->to - at < TOUCH_STEP ? t->to - at : TOUCH_STEP;
        if (t->populate) {
#ifdef MADV_POPULATE_WRITE
            if (madvise(t->p + at, n, MADV_POPULATE_WRITE) != 0) die("MADV_POPULATE_WRITE");
#else
            die("MADV_POPULATE_WRITE (not in this kernel's headers)");
#endif
        } else {
            for (size_t i = 0; i < n; i += 4096) ((volatile char *)t->p)[at + i] = 1;
        }
    }
    return NULL;
}

/* [from, to) on threads threads (1 or 2), TOUCH_STEP steps dealt in turn. */
static void touch_span(char *p, size_t from, size_t to, bool populate, int threads) {
    struct toucher t[2];
    pthread_t helper;
    for (int k = 0; k < threads; k++)
        t[k] = (struct toucher){p, from + (size_t)k * TOUCH_STEP, to, (size_t)threads, populate};
    if (threads == 2 && pthread_create(&helper, NULL, touch_range, &t[1]) != 0)
        die("pthread_create");
    touch_range(&t[0]);
    if (threads == 2) pthread_join(helper, NULL);
}

/* Maps peak bytes of anonymous memory aligned and hinted to 2 MiB pages,
 * as the store's slab is, and first-touches them, timing the first split
 * bytes and the whole; unmapped after. */
static void touch_fresh(uint64_t split, uint64_t peak, int variant, uint64_t wall[2],
                        uint64_t cpu[2]) {
    size_t bytes = (size_t)((peak + TOUCH_STEP - 1) / TOUCH_STEP * TOUCH_STEP);
    if (bytes == 0) bytes = TOUCH_STEP;
    size_t first = split < bytes ? (size_t)split : bytes;
    bool populate = variant >= 1;
    int threads = variant == 2 ? 2 : 1;
    uint64_t t0 = bench_now_ns(), c0 = cpu_ns();
    char *map = mmap(NULL, bytes + HUGE_BYTES, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) die("mmap for the first-touch ceiling");
    char *p = (char *)(((uintptr_t)map + HUGE_BYTES - 1) & ~(uintptr_t)(HUGE_BYTES - 1));
#ifdef MADV_HUGEPAGE
    (void)madvise(p, bytes, MADV_HUGEPAGE); /* a hint, as store.c gives */
#endif
    touch_span(p, 0, first, populate, threads);
    wall[0] = bench_now_ns() - t0;
    cpu[0] = cpu_ns() - c0;
    touch_span(p, first, bytes, populate, threads);
    wall[1] = bench_now_ns() - t0;
    cpu[1] = cpu_ns() - c0;
    if (munmap(map, bytes + HUGE_BYTES) != 0) die("munmap");
}

/* The fresh-memory ceilings of one round, each after a pause of cool_s so
 * that the pages the one before freed are the host's again. */
static void fresh_ceilings(struct fresh *f, unsigned cool_s) {
    for (int v = 0; v < VARIANTS; v++) {
        sleep(cool_s);
        touch_fresh(f->store_bytes, f->peak_bytes, v, f->wall[v], f->cpu[v]);
    }
}

/* A slice's times, sorted: p50, p99, p99.9 and max. */
struct slices {
    uint64_t n, wall[4], cpu[4];
    uint64_t state_bytes; /* resident bytes the restored store added */
};

static void quantiles(uint64_t *v, uint64_t n, uint64_t out[4]) {
    qsort(v, (size_t)n, sizeof(*v), cmp_u64);
    const double q[3] = {0.50, 0.99, 0.999};
    for (int i = 0; i < 3; i++) out[i] = v[(uint64_t)(q[i] * (double)(n - 1))];
    out[3] = v[n - 1];
}

/* Takes a snapshot of the whole store a slice at a time, as segments does
 * (the block of each slice handed off, as to the journal). */
static void snapshot_slices(const cr_store *store, uint32_t max_segments, struct slices *out) {
    static uint64_t wall[SLICES_MAX], cpu[SLICES_MAX];
    struct cr_durable_feed feed;
    if (cr_durable_feed_init(&feed, 1, max_segments, NULL) != CR_OK) die("feed");
    uint32_t cursor = 0;
    uint64_t count = 0, n = 0;
    bool done = false;
    while (!done && n < SLICES_MAX) {
        struct cr_buf buf;
        cr_buf_init(&buf);
        uint64_t t0 = bench_now_ns(), c0 = thread_cpu_ns();
        done = cr_durable_feed_snapshot_objects(&feed, store, 1000, 1, &cursor, SLICE, &buf,
                                                &count);
        size_t len;
        void *block = cr_buf_ok(&buf) ? cr_buf_take(&buf, &len) : NULL;
        cpu[n] = thread_cpu_ns() - c0;
        wall[n++] = bench_now_ns() - t0;
        free(block);
        cr_buf_free(&buf);
    }
    cr_durable_feed_free(&feed);
    out->n = n;
    quantiles(wall, n, out->wall);
    quantiles(cpu, n, out->cpu);
}

/* Recovery's wall time; its CPU time into *cpu (the snapshot pass after it
 * and the store's destruction not counted). */
static uint64_t recover_ns(const char *dir, struct cr_durable_recovery *out,
                           struct slices *slices, uint64_t *cpu, struct fresh *fresh) {
    cr_store_config cfg;
    cr_store_config_default(&cfg); /* crescentd's defaults: 16 M objects of room */
    cr_store *store;
    uint64_t rss0 = rss_bytes(), anon0 = anon_bytes();
    struct anon_sampler sampler = {.peak = anon0};
    atomic_init(&sampler.stop, false);
    if (fresh != NULL && pthread_create(&sampler.thread, NULL, sampler_main, &sampler) != 0)
        die("pthread_create");
    if (cr_store_create(&cfg, NULL, &store) != CR_OK) die("cr_store_create");
    char err[1024];
    uint64_t t0 = bench_now_ns(), c0 = cpu_ns();
    int rc = cr_durable_recover(dir, store, 1000, out, err, sizeof(err));
    uint64_t ns = bench_now_ns() - t0;
    *cpu = cpu_ns() - c0;
    if (rc != CR_OK) {
        fprintf(stderr, "durable_recover: %s\n", err);
        exit(1);
    }
    if (fresh != NULL) {
        uint64_t anon1 = anon_bytes();
        atomic_store_explicit(&sampler.stop, true, memory_order_relaxed);
        pthread_join(sampler.thread, NULL);
        if (anon1 > sampler.peak) sampler.peak = anon1;
        fresh->store_bytes = anon1 - anon0;
        fresh->peak_bytes = sampler.peak - anon0;
    }
    uint64_t state = rss_bytes() - rss0;
    snapshot_slices(store, cfg.max_segments, slices);
    slices->state_bytes = state;
    cr_store_destroy(store);
    return ns;
}

/* The 1-minute load average: the machine is shared, and every figure is
 * printed beside it. */
static double load1(void) {
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f != NULL) {
        if (fscanf(f, "%lf", &l) != 1) l = -1;
        fclose(f);
    }
    return l;
}

static double peak_rss_mib(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

static uint64_t median(uint64_t *v, int n) {
    qsort(v, (size_t)n, sizeof(*v), cmp_u64);
    return v[n / 2];
}

static double secs(uint64_t ns) { return (double)ns / 1e9; }
static double mib(uint64_t bytes) { return (double)bytes / 1048576.0; }

static void print_fresh(const struct fresh *f, unsigned cool_s) {
    printf("  fresh-memory ceiling (each after a %u s pause; 2 MiB-page hint):\n", cool_s);
    for (int v = 0; v < VARIANTS; v++)
        printf("    %-20s the store's %.0f MiB %.3f s (cpu %.3f, %.2f ms/MiB); recovery's "
               "peak %.0f MiB %.3f s (cpu %.3f)\n",
               VARIANT[v], mib(f->store_bytes), secs(f->wall[v][0]), secs(f->cpu[v][0]),
               secs(f->cpu[v][0]) * 1e3 / (mib(f->store_bytes) > 0 ? mib(f->store_bytes) : 1),
               mib(f->peak_bytes), secs(f->wall[v][1]), secs(f->cpu[v][1]));
}

/* Medians of the fresh-memory ceilings beside recovery's (rounds > 0). */
static void print_fresh_medians(const struct fresh *f, int rounds, uint64_t rec_wall,
                                uint64_t rec_cpu) {
    uint64_t v[16];
    for (int k = 0; k < VARIANTS; k++)
        for (int at = 0; at < 2; at++) {
            for (int i = 0; i < rounds; i++) v[i] = f[i].wall[k][at];
            uint64_t w = median(v, rounds);
            for (int i = 0; i < rounds; i++) v[i] = f[i].cpu[k][at];
            uint64_t c = median(v, rounds);
            for (int i = 0; i < rounds; i++) v[i] = at == 0 ? f[i].store_bytes : f[i].peak_bytes;
            printf("median fresh-memory ceiling, %s %s (%.0f MiB): %.3f s (cpu %.3f); "
                   "recovery = %.2fx its wall, %.2fx its CPU\n",
                   at == 0 ? "the store" : "recovery's peak", VARIANT[k], mib(median(v, rounds)),
                   secs(w), secs(c), (double)rec_wall / (double)(w > 0 ? w : 1),
                   (double)rec_cpu / (double)(c > 0 ? c : 1));
        }
}

static void run(const char *dir, int rounds, bool touch, unsigned cool_s) {
    uint64_t ceil[16], rec[16], read[16], replay[16], mat[16], ceil_cpu[16], rec_cpu[16];
    struct cr_durable_recovery r = {0};
    struct slices sl[16];
    struct fresh fr[16] = {{0}};
    uint64_t bytes = 0, records = 0;
    for (int i = 0; i < rounds; i++) {
        /* The recovery first, as a fresh crescentd runs it: the ceiling's
         * buffer, freed just before, would have handed it pages the kernel
         * had already mapped and zeroed (cheap to take again), which a
         * process starting cold does not have. With the fresh-memory
         * ceilings, a later round waits as they do. */
        if (touch && i > 0) sleep(cool_s);
        rec[i] = recover_ns(dir, &r, &sl[i], &rec_cpu[i], touch ? &fr[i] : NULL);
        if (touch) fresh_ceilings(&fr[i], cool_s);
        uint64_t c0 = cpu_ns();
        ceil[i] = ceiling_ns(dir, &bytes, &records);
        ceil_cpu[i] = cpu_ns() - c0;
        read[i] = r.read_ns;
        replay[i] = r.replay_ns;
        mat[i] = r.materialize_ns;
        printf("round %d (load %.1f): ceiling %.3f s (cpu %.3f), recovery %.3f s (cpu %.3f; "
               "read %.3f, replay %.3f, materialize %.3f), peak RSS %.0f MiB\n",
               i + 1, load1(), (double)ceil[i] / 1e9, (double)ceil_cpu[i] / 1e9,
               (double)rec[i] / 1e9, (double)rec_cpu[i] / 1e9, (double)read[i] / 1e9,
               (double)replay[i] / 1e9, (double)mat[i] / 1e9, peak_rss_mib());
        printf("  slab populated by a second thread: %.0f MiB\n",
               (double)r.prefilled_bytes / 1048576.0);
        printf("  the restored store: %.0f MiB resident, %.0f bytes per object\n",
               (double)sl[i].state_bytes / 1048576.0,
               (double)sl[i].state_bytes / (double)(r.objects > 0 ? r.objects : 1));
        printf("  snapshot of it, %" PRIu64 " slices of %u objects: wall p50 %.2f ms, p99 %.2f, "
               "p99.9 %.2f, max %.2f; CPU p50 %.2f ms, p99 %.2f, p99.9 %.2f, max %.2f\n",
               sl[i].n, SLICE, (double)sl[i].wall[0] / 1e6, (double)sl[i].wall[1] / 1e6,
               (double)sl[i].wall[2] / 1e6, (double)sl[i].wall[3] / 1e6,
               (double)sl[i].cpu[0] / 1e6, (double)sl[i].cpu[1] / 1e6,
               (double)sl[i].cpu[2] / 1e6, (double)sl[i].cpu[3] / 1e6);
        if (touch) print_fresh(&fr[i], cool_s);
        fflush(stdout);
    }
    uint64_t c = median(ceil, rounds), m = median(rec, rounds);
    uint64_t cc = median(ceil_cpu, rounds), mc = median(rec_cpu, rounds);
    printf("%s: %.1f MiB, %" PRIu64 " records; restored %" PRIu64 " objects on %u segments\n",
           dir, (double)bytes / 1048576.0, records, r.objects, r.segments);
    printf("median of %d: ceiling (read + check) %.3f s, recovery %.3f s = %.2fx the ceiling; "
           "read %.3f, replay %.3f, materialize %.3f\n",
           rounds, (double)c / 1e9, (double)m / 1e9, (double)m / (double)c,
           (double)median(read, rounds) / 1e9, (double)median(replay, rounds) / 1e9,
           (double)median(mat, rounds) / 1e9);
    printf("median CPU time: ceiling %.3f s, recovery %.3f s = %.2fx\n", (double)cc / 1e9,
           (double)mc / 1e9, (double)mc / (double)cc);
    if (touch) print_fresh_medians(fr, rounds, m, mc);
}

int main(int argc, char **argv) {
    if (argc >= 4 && strcmp(argv[1], "write") == 0) {
        write_dir(strtoull(argv[2], NULL, 10), argv[3]);
        return 0;
    }
    if (argc >= 3 && strcmp(argv[1], "run") == 0) {
        int rounds = 3;
        bool touch = false, bad = false;
        unsigned cool_s = 15;
        for (int a = 3; a < argc && !bad; a++) {
            if (strcmp(argv[a], "--ceiling-touch") == 0) {
                touch = true;
            } else if (strcmp(argv[a], "--cool") == 0 && a + 1 < argc) {
                char *end;
                unsigned long v = strtoul(argv[++a], &end, 10);
                bad = *end != '\0' || v > 600;
                cool_s = (unsigned)v;
            } else {
                char *end;
                long v = strtol(argv[a], &end, 10);
                bad = *end != '\0' || v < 1 || v > 16;
                rounds = (int)v;
            }
        }
        if (!bad) {
            run(argv[2], rounds, touch, cool_s);
            return 0;
        }
    }
    fprintf(stderr, "usage: durable_recover write OBJECTS DIR\n"
                    "       durable_recover run DIR [ROUNDS (1-16)] [--ceiling-touch [--cool "
                    "SECONDS (0-600, default 15)]]\n");
    return 2;
}
