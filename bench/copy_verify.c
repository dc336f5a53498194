/* bench/copy_verify: the ceiling of a verified same-host read (issue 27).
 *
 *   zig build bench && ./zig-out/bench/copy_verify [rounds]
 *
 * A shm read copies an object out of a mapped segment and checks its XXH3-64
 * against the put's checksum before the bytes count as read.  This measures,
 * on 32 x 256 KiB blocks (8 MiB, as bench/mooncake_store.py reads them), in
 * interleaved rounds, medians of rounds, GB/s of the object bytes per second
 * of this thread's CPU time (steadier than wall time on a shared machine):
 *   memcpy              the copy alone (the ceiling);
 *   copy all, hash all  every block copied, then each block's XXH3 over
 *                       the destination (the batch read path before the
 *                       chunked copy: ops copied during the poll, the hashes
 *                       after it, from memory or L3);
 *   copy, then hash     memcpy of a block, then its XXH3 (a 256 KiB block may
 *                       still be in L2 when its hash reads it);
 *   chunked N KiB       memcpy N KiB, feed those N KiB to XXH3's streaming
 *                       state while they are in cache, next N KiB
 *                       (libcrescent's read path, src/client/client_copy.c, at
 *                       its chunk size and neighbours, for an object in
 *                       several handles or a build without AVX2);
 *   fused, one pass     each 64-byte stripe loaded once, stored and fed to
 *                       XXH3's accumulator from the same registers
 *                       (src/client/copy_xxh3.c, libcrescent's read path
 *                       for one-handle objects since issue 27's follow-up);
 *   hash, cache-hot     XXH3 of one 64 KiB chunk already in cache (what the
 *                       chunked read adds per chunk at best).
 * Each verified case checks that its hash equals the one-shot XXH3 of the
 * block, so a broken streaming hash cannot pass as a fast one. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>
#if defined(__x86_64__)
#include <xxh_x86dispatch.h> /* the vector code libcrescent uses (client_data.c) */
#endif

#include "client/copy_xxh3.h"
#include "harness.h"

#define BLOCKS 32u
#define BLOCK_BYTES (256u * 1024u)
#define TOTAL_BYTES ((size_t)BLOCKS * BLOCK_BYTES)
#define CALLS_PER_ROUND 20u

enum { MEMCPY, COPY_ALL_HASH_ALL, COPY_THEN_HASH, CHUNK_16K, CHUNK_32K, CHUNK_64K, CHUNK_128K, FUSED, HOT_HASH, CASES };
static const char *const names[CASES] = {"memcpy", "copy all, then hash all", "copy, then hash", "chunked 16 KiB",
                                         "chunked 32 KiB", "chunked 64 KiB", "chunked 128 KiB",
                                         "fused, one pass (libcrescent)", "hash of a cache-hot 64 KiB chunk"};
static const size_t chunk_of[CASES] = {0, 0, 0, 16384, 32768, 65536, 131072, 0, 0};

static uint64_t expected[BLOCKS];
static volatile uint64_t sink;

static uint64_t copy_chunked(uint8_t *dst, const uint8_t *src, size_t len, size_t chunk) {
    XXH3_state_t state;
    XXH3_64bits_reset(&state);
    for (size_t off = 0; off < len; off += chunk) {
        size_t n = len - off < chunk ? len - off : chunk;
        memcpy(dst + off, src + off, n);
        XXH3_64bits_update(&state, dst + off, n);
    }
    return XXH3_64bits_digest(&state);
}

/* One call: the whole 8 MiB as the case moves it.  Returns false when a
 * verified case computed a wrong hash. */
static bool run_case(int c, uint8_t *dst, const uint8_t *src) {
    if (c == COPY_ALL_HASH_ALL) {
        for (uint32_t b = 0; b < BLOCKS; b++)
            memcpy(dst + (size_t)b * BLOCK_BYTES, src + (size_t)b * BLOCK_BYTES, BLOCK_BYTES);
        bool ok = true;
        for (uint32_t b = 0; b < BLOCKS; b++)
            ok &= XXH3_64bits(dst + (size_t)b * BLOCK_BYTES, BLOCK_BYTES) == expected[b];
        return ok;
    }
    for (uint32_t b = 0; b < BLOCKS; b++) {
        uint8_t *d = dst + (size_t)b * BLOCK_BYTES;
        const uint8_t *s = src + (size_t)b * BLOCK_BYTES;
        uint64_t h;
        switch (c) {
        case MEMCPY: memcpy(d, s, BLOCK_BYTES); continue;
        case COPY_THEN_HASH:
            memcpy(d, s, BLOCK_BYTES);
            h = XXH3_64bits(d, BLOCK_BYTES);
            break;
        case FUSED: h = cr_copy_xxh3(d, s, BLOCK_BYTES); break;
        case HOT_HASH: sink += XXH3_64bits(d, 65536); continue;
        default: h = copy_chunked(d, s, BLOCK_BYTES, chunk_of[c]); break;
        }
        if (h != expected[b]) return false;
    }
    return true;
}

int main(int argc, char **argv) {
    unsigned rounds = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 15;
    if (rounds == 0) rounds = 1;
    uint8_t *src = aligned_alloc(4096, TOTAL_BYTES), *dst = aligned_alloc(4096, TOTAL_BYTES);
    double *gbps = calloc((size_t)CASES * rounds, sizeof(double));
    if (src == NULL || dst == NULL || gbps == NULL) return 1;
    for (size_t i = 0; i < TOTAL_BYTES; i++) src[i] = (uint8_t)(i * 2654435761u >> 13);
    memset(dst, 0, TOTAL_BYTES);
    for (uint32_t b = 0; b < BLOCKS; b++)
        expected[b] = XXH3_64bits(src + (size_t)b * BLOCK_BYTES, BLOCK_BYTES);
    for (unsigned r = 0; r < rounds; r++) {
        for (int c = 0; c < CASES; c++) {
            if (!run_case(c, dst, src)) { /* warm-up, and the hash check */
                fprintf(stderr, "copy_verify: %s computed a wrong XXH3\n", names[c]);
                return 1;
            }
            uint64_t t0 = bench_thread_cpu_ns();
            for (unsigned k = 0; k < CALLS_PER_ROUND; k++) run_case(c, dst, src);
            uint64_t ns = bench_thread_cpu_ns() - t0;
            double bytes = c == HOT_HASH ? (double)BLOCKS * 65536 : (double)TOTAL_BYTES;
            gbps[(size_t)c * rounds + r] = bytes * CALLS_PER_ROUND / (double)ns;
        }
    }
    double med[CASES];
    for (int c = 0; c < CASES; c++) {
        double *v = &gbps[(size_t)c * rounds];
        for (unsigned i = 1; i < rounds; i++) /* insertion sort: a few dozen values */
            for (unsigned j = i; j > 0 && v[j - 1] > v[j]; j--) {
                double t = v[j];
                v[j] = v[j - 1];
                v[j - 1] = t;
            }
        med[c] = v[rounds / 2];
    }
    printf("copy_verify: %u x %u KiB, %u interleaved rounds of %u calls, medians\n", BLOCKS,
           BLOCK_BYTES / 1024, rounds, CALLS_PER_ROUND);
    for (int c = 0; c < CASES; c++)
        printf("  %-34s %7.2f GB/s  %.2f of memcpy\n", names[c], med[c], med[c] / med[MEMCPY]);
    free(gbps), free(src), free(dst);
    return 0;
}
