/* bench/file_read_hash: the ceilings of a verified 1 MiB file read (issue 26:
 * "Get of a 1 MiB object from the shared file tier / the SSD tier >= 70% of a
 * plain pread of the same size from the same directory", with the XXH3 check
 * the issue also requires).
 *
 *   zig build bench && ./zig-out/bench/file_read_hash [--dir DIR] [--rounds N] [--ops N]
 *                                                     [--cold 0|1]
 *
 * One file of 1 MiB in DIR (default a fresh one under /tmp), in the page
 * cache after the first round (this measures the software path, not a
 * device); with --cold 1 it is dropped from the page cache
 * (posix_fadvise POSIX_FADV_DONTNEED, not timed) before every op, so each
 * read goes to the device.  Cases, interleaved per round, median of each
 * round's per-op median, then the median over rounds:
 *   pread              pread of the whole file on an open fd: the target's
 *                      reference;
 *   open+pread+close   the same with open and close per read (what a get of a
 *                      file does, since the file can change between gets);
 *   xxh3               XXH3-64 (the run-time dispatched vector code
 *                      libcrescent uses) of 1 MiB already in the buffer;
 *   pread, then xxh3   the two in sequence (the read path before chunking);
 *   49 B, then the rest  a pread of the first 49 bytes (a tier file's
 *                      header), then one of the rest: what the tiers' reads
 *                      do (src/client/client_files.c, src/tier/ssd_store.c);
 *                      on a cold file the small read starts the kernel's
 *                      readahead of the whole file;
 *   49 B, the rest, xxh3  the same, then the hash: a tier's verified read;
 *   chunked N KiB      pread N KiB into the buffer, feed those N KiB to XXH3's
 *                      streaming state while they are in cache, next N KiB
 *                      (libcrescent's file read, src/client/client_files.c).
 * Each hashed case checks its digest against the one-shot XXH3, so a broken
 * streaming hash cannot pass as a fast one.  The ratio column is each case's
 * throughput against pread's: what a verified read can reach at best here. */
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>
#if defined(__x86_64__)
#include <xxh_x86dispatch.h> /* the vector code libcrescent uses */
#endif

#include "harness.h"

#define SIZE (1u << 20)

static const size_t chunks_kib[] = {32, 64, 128, 256};
#define NCHUNK (sizeof(chunks_kib) / sizeof(chunks_kib[0]))
#define NFIXED 6
#define NCASE (NFIXED + NCHUNK)
#define HEAD 49u /* a file-tier header of a 2-byte key, tenant "default" */

static bool pread_all(int fd, uint8_t *buf, size_t len, off_t at) {
    while (len > 0) {
        ssize_t r = pread(fd, buf, len, at);
        if (r <= 0) return false;
        buf += r, len -= (size_t)r, at += r;
    }
    return true;
}

static uint64_t median(uint64_t *v, size_t n) {
    qsort(v, n, sizeof(*v), bench_u64_compare);
    return v[n / 2];
}

int main(int argc, char **argv) {
    const char *dir = NULL;
    int rounds = 9, ops = 200, cold = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--dir") == 0) dir = argv[i + 1];
        else if (strcmp(argv[i], "--rounds") == 0) rounds = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--ops") == 0) ops = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--cold") == 0) cold = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: file_read_hash [--dir DIR] [--rounds N] [--ops N] [--cold 0|1]\n");
            return 2;
        }
    }
    if (rounds < 1 || ops < 1) return 2;
    char tmpdir[] = "/tmp/crescent-bench-read-XXXXXX";
    if (dir == NULL && (dir = mkdtemp(tmpdir)) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    char path[512];
    snprintf(path, sizeof(path), "%s/plain.bin", dir);
    uint8_t *value = malloc(SIZE), *buf = aligned_alloc(4096, SIZE);
    for (size_t i = 0; i < SIZE; i++) value[i] = (uint8_t)(i * 2654435761u >> 13);
    uint64_t want = XXH3_64bits(value, SIZE);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || pwrite(fd, value, SIZE, 0) != (ssize_t)SIZE || fsync(fd) != 0) {
        perror(path);
        return 1;
    }
    static const char *fixed[NFIXED] = {"pread (reference)", "open+pread+close",
                                        "xxh3 alone (in cache)", "pread, then xxh3",
                                        "49 B, then the rest", "49 B, the rest, xxh3"};
    uint64_t *lat = calloc((size_t)ops, sizeof(uint64_t));
    uint64_t *med[NCASE];
    for (size_t k = 0; k < NCASE; k++) med[k] = calloc((size_t)rounds, sizeof(uint64_t));
    volatile uint64_t sink = 0;
    for (int r = 0; r < rounds; r++) {
        for (size_t k = 0; k < NCASE; k++) {
            for (int i = 0; i < ops; i++) {
                if (cold && k != 2) posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
                uint64_t t0 = bench_now_ns(), h = want;
                bool ok = true;
                if (k == 0) {
                    ok = pread_all(fd, buf, SIZE, 0);
                } else if (k == 1) {
                    int f = open(path, O_RDONLY | O_CLOEXEC);
                    ok = f >= 0 && pread_all(f, buf, SIZE, 0);
                    if (f >= 0) close(f);
                } else if (k == 2) {
                    h = XXH3_64bits(buf, SIZE);
                } else if (k == 3) {
                    ok = pread_all(fd, buf, SIZE, 0);
                    h = XXH3_64bits(buf, SIZE);
                } else if (k == 4 || k == 5) {
                    ok = pread_all(fd, buf, HEAD, 0) && pread_all(fd, buf + HEAD, SIZE - HEAD, HEAD);
                    if (k == 5) h = XXH3_64bits(buf, SIZE);
                } else {
                    size_t chunk = chunks_kib[k - NFIXED] * 1024u;
                    XXH3_state_t st;
                    XXH3_64bits_reset(&st);
                    for (size_t off = 0; ok && off < SIZE; off += chunk) {
                        ok = pread_all(fd, buf + off, chunk, (off_t)off);
                        XXH3_64bits_update(&st, buf + off, chunk);
                    }
                    h = XXH3_64bits_digest(&st);
                }
                lat[i] = bench_now_ns() - t0;
                sink += h;
                if (!ok || h != want) {
                    fprintf(stderr, "case %zu: read failed or digest differs\n", k);
                    return 1;
                }
            }
            med[k][r] = median(lat, (size_t)ops);
        }
    }
    uint64_t m[NCASE];
    for (size_t k = 0; k < NCASE; k++) m[k] = median(med[k], (size_t)rounds);
    printf("verified 1 MiB file read, %d rounds x %d ops, interleaved, %s, dir %s\n", rounds, ops,
           cold ? "cold (dropped from the page cache before each op)" : "page cache hot", dir);
    for (size_t k = 0; k < NCASE; k++) {
        char name[64];
        if (k < NFIXED) snprintf(name, sizeof(name), "%s", fixed[k]);
        else snprintf(name, sizeof(name), "chunked %zu KiB pread+xxh3", chunks_kib[k - NFIXED]);
        printf("  %-28s median %8.1f us  %6.2f GB/s  %5.2f of pread\n", name, (double)m[k] / 1e3,
               (double)SIZE / (double)m[k], (double)m[0] / (double)m[k]);
    }
    close(fd);
    unlink(path);
    if (dir == tmpdir) rmdir(tmpdir);
    free(value);
    free(buf);
    return sink == 1 ? 3 : 0;
}
