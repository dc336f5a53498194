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
 *
 * Files are read from the page cache after the first round (the write
 * leaves them there): the figures are CPU cost, not the disk's. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
                           struct slices *slices, uint64_t *cpu) {
    cr_store_config cfg;
    cr_store_config_default(&cfg); /* crescentd's defaults: 16 M objects of room */
    cr_store *store;
    uint64_t rss0 = rss_bytes();
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

static void run(const char *dir, int rounds) {
    uint64_t ceil[16], rec[16], read[16], replay[16], mat[16], ceil_cpu[16], rec_cpu[16];
    struct cr_durable_recovery r = {0};
    struct slices sl[16];
    uint64_t bytes = 0, records = 0;
    for (int i = 0; i < rounds; i++) {
        /* The recovery first, as a fresh crescentd runs it: the ceiling's
         * buffer, freed just before, would have handed it pages the kernel
         * had already mapped and zeroed (cheap to take again), which a
         * process starting cold does not have. */
        rec[i] = recover_ns(dir, &r, &sl[i], &rec_cpu[i]);
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
}

int main(int argc, char **argv) {
    if (argc >= 4 && strcmp(argv[1], "write") == 0) {
        write_dir(strtoull(argv[2], NULL, 10), argv[3]);
        return 0;
    }
    if (argc >= 3 && strcmp(argv[1], "run") == 0) {
        int rounds = argc >= 4 ? atoi(argv[3]) : 3;
        if (rounds < 1 || rounds > 16) rounds = 3;
        run(argv[2], rounds);
        return 0;
    }
    fprintf(stderr, "usage: durable_recover write OBJECTS DIR | run DIR [ROUNDS]\n");
    return 2;
}
