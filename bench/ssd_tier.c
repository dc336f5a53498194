/* The SSD tier's read path against a plain pread (issue: "Get of a 1 MiB
 * object from the SSD tier >= 70% of a plain pread of the same file size
 * from the same directory").
 *
 * In one process, one directory (--dir, default a fresh one under /tmp):
 *   pread      a 1 MiB plain file, opened once, pread whole into a buffer:
 *              the ceiling;
 *   ssd_read   cr_ssd_read of a 1 MiB object of the tier (open, header
 *              check, pread, XXH3 of the value, close): what a store server
 *              does per read;
 *   xfer       a transfer-layer READ (tcp, loopback) of the store server's
 *              "#ssd" reader segment: cr_ssd_read on the server's thread,
 *              the bytes sent to the client (what a Get of a local_disk
 *              replica moves once the master hands it out).
 * Rounds are interleaved (pread, ssd_read, xfer, pread, ...); each round's
 * median per op is kept and the medians of those are reported, with the
 * ratios of their throughputs to pread's.  By default both files are in the
 * page cache after the first round (no O_DIRECT): this measures the
 * software path, not the device.  --cold 1 drops both files from the page
 * cache (posix_fadvise POSIX_FADV_DONTNEED, not timed) before every op of
 * the first three paths, so each reads the device.
 *
 * Built by `zig build bench` (zig-out/bench/ssd_tier).
 *
 * usage: ssd_tier [--dir DIR] [--size BYTES] [--rounds N] [--ops N] [--cold 0|1] */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "harness.h"
#include "crescent/error.h"
#include "rdma/xfer.h"
#include "tier/ssd_store.h"

struct server {
    struct cr_xfer_server *srv;
    cr_ssd_store *ssd;
    pthread_mutex_t lock; /* as crescent-store holds it around a read */
    atomic_bool stop;
};

static int reader(void *arg, uint64_t addr, uint64_t len, void *dst) {
    struct server *s = arg;
    uint64_t got = 0;
    pthread_mutex_lock(&s->lock);
    int rc = cr_ssd_read(s->ssd, addr, dst, len, bench_now_ns() / 1000000u, &got, NULL, NULL, 0);
    pthread_mutex_unlock(&s->lock);
    return rc == CR_OK && got != len ? CR_ERR_INVALID_PARAMS : rc;
}

static void *serve(void *arg) {
    struct server *s = arg;
    while (!atomic_load(&s->stop)) cr_xfer_server_run(s->srv, 5);
    return NULL;
}

static uint64_t median(uint64_t *v, size_t n) {
    qsort(v, n, sizeof(*v), bench_u64_compare);
    return v[n / 2];
}

int main(int argc, char **argv) {
    const char *dir = NULL;
    uint64_t size = 1u << 20;
    int rounds = 9, ops = 200, cold = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--dir") == 0) dir = argv[i + 1];
        else if (strcmp(argv[i], "--size") == 0) size = strtoull(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--rounds") == 0) rounds = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--ops") == 0) ops = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--cold") == 0) cold = atoi(argv[i + 1]);
        else { fprintf(stderr, "usage: ssd_tier [--dir DIR] [--size B] [--rounds N] [--ops N] [--cold 0|1]\n"); return 2; }
    }
    char tmpdir[] = "/tmp/crescent-bench-ssd-XXXXXX";
    if (dir == NULL && (dir = mkdtemp(tmpdir)) == NULL) { perror("mkdtemp"); return 1; }
    uint8_t *value = malloc(size), *buf = malloc(size);
    for (uint64_t i = 0; i < size; i++) value[i] = (uint8_t)(i * 2654435761u >> 13);

    struct server s = {.stop = false};
    pthread_mutex_init(&s.lock, NULL);
    char why[256];
    struct cr_ssd_config cfg = {.dir = dir, .capacity = 4 * size + 65536};
    if (cr_ssd_open(&cfg, &s.ssd, NULL, why, sizeof(why)) != CR_OK) { fprintf(stderr, "%s\n", why); return 1; }
    uint64_t id;
    if (cr_ssd_put(s.ssd, "default", (const uint8_t *)"bench-key", 9, value, size,
                   XXH3_64bits(value, size), NULL, NULL, &id, why, sizeof(why)) != CR_OK) {
        fprintf(stderr, "%s\n", why);
        return 1;
    }
    char plain[512];
    snprintf(plain, sizeof(plain), "%s/plain.bin", dir);
    int pfd = open(plain, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (pfd < 0 || pwrite(pfd, value, size, 0) != (ssize_t)size || fsync(pfd) != 0) { perror(plain); return 1; }
    char tier_file[512]; /* the object's file, as src/tier/ssd_store.c names it */
    snprintf(tier_file, sizeof(tier_file), "%s/%016llx.crs", dir, (unsigned long long)id);
    int tfd = open(tier_file, O_RDONLY);
    if (tfd < 0) { perror(tier_file); return 1; }

    struct cr_xfer_server_config sc = {.shm_disabled = true, .verbs_disabled = true};
    struct cr_xfer_client_config cc = {.shm_disabled = true, .verbs_disabled = true};
    struct cr_xfer_client *cli;
    if (cr_xfer_server_create(&sc, &s.srv) != CR_OK ||
        cr_xfer_server_register_reader(s.srv, "bench#ssd", reader, &s) != CR_OK ||
        cr_xfer_server_register(s.srv, "bench", value, size) != CR_OK ||
        cr_xfer_client_create(&cc, &cli) != CR_OK) {
        fprintf(stderr, "transfer setup failed\n");
        return 1;
    }
    char endpoint[64];
    snprintf(endpoint, sizeof(endpoint), "%s", cr_xfer_server_endpoint(s.srv));
    pthread_t thread;
    pthread_create(&thread, NULL, serve, &s);

    uint64_t *lat = calloc((size_t)ops, sizeof(uint64_t));
    uint64_t *med[4];
    for (int k = 0; k < 4; k++) med[k] = calloc((size_t)rounds, sizeof(uint64_t));
    for (int r = 0; r < rounds; r++) {
        for (int k = 0; k < 4; k++) {
            for (int i = 0; i < ops; i++) {
                if (cold && k < 3) {
                    posix_fadvise(pfd, 0, 0, POSIX_FADV_DONTNEED);
                    posix_fadvise(tfd, 0, 0, POSIX_FADV_DONTNEED);
                }
                uint64_t t0 = bench_now_ns(), got = 0;
                int rc = CR_OK;
                if (k == 0) rc = pread(pfd, buf, size, 0) == (ssize_t)size ? CR_OK : CR_ERR_IO;
                else if (k == 1) {
                    pthread_mutex_lock(&s.lock);
                    rc = cr_ssd_read(s.ssd, id, buf, size, 0, &got, NULL, NULL, 0);
                    pthread_mutex_unlock(&s.lock);
                } else if (k == 2) {
                    rc = cr_xfer_read(cli, endpoint, "bench#ssd", id, buf, size);
                } else {
                    rc = cr_xfer_read(cli, endpoint, "bench", (uint64_t)(uintptr_t)value, buf, size);
                }
                lat[i] = bench_now_ns() - t0;
                if (rc != CR_OK || memcmp(buf, value, 64) != 0) { fprintf(stderr, "read %d failed: %d\n", k, rc); return 1; }
            }
            med[k][r] = median(lat, (size_t)ops);
        }
    }
    if (memcmp(buf, value, size) != 0) { fprintf(stderr, "bytes differ\n"); return 1; }
    static const char *names[4] = {"pread (ceiling)", "ssd_read (tier, no transport)",
                                   "xfer tcp READ of #ssd", "xfer tcp READ of memory"};
    uint64_t m[4];
    for (int k = 0; k < 4; k++) m[k] = median(med[k], (size_t)rounds);
    printf("SSD tier read, %llu-byte object, %d rounds x %d ops, interleaved, %s, dir %s\n",
           (unsigned long long)size, rounds, ops,
           cold ? "cold (both files dropped from the page cache before each op)" : "page cache hot",
           dir);
    for (int k = 0; k < 4; k++)
        printf("  %-32s median %8.1f us  %8.2f GB/s  %5.1f%% of pread\n", names[k], m[k] / 1e3,
               (double)size / (double)m[k], 100.0 * (double)m[0] / (double)m[k]);
    printf("  #ssd over tcp is %.1f%% of a memory replica over tcp\n",
           100.0 * (double)m[3] / (double)m[2]);
    atomic_store(&s.stop, true);
    pthread_join(thread, NULL);
    cr_xfer_client_destroy(cli);
    cr_xfer_server_destroy(s.srv);
    cr_ssd_remove(s.ssd, id);
    cr_ssd_close(s.ssd);
    close(pfd);
    close(tfd);
    unlink(plain);
    if (dir == tmpdir) rmdir(tmpdir);
    return 0;
}
