/* bench/verify_pipe: a verified same-host batch read on one thread against
 * the same work split over two (issue 27, src/client/client_verify.c).
 *
 *   zig build bench && ./zig-out/bench/verify_pipe [rounds]
 *
 * On 32 x 256 KiB blocks (8 MiB, as bench/mooncake_store.py reads them), in
 * interleaved rounds, medians of rounds, GB/s of the object bytes per second
 * of WALL time (the point is a second core, which CPU time of one thread
 * cannot show; on a shared machine read the ratios, measured in the same
 * rounds):
 *   memcpy                  the copy alone (the ceiling);
 *   one thread, chunked     copy 32 KiB, hash those 32 KiB while in cache,
 *                           next (client_copy.c: what a read does per object
 *                           on the reading thread);
 *   two threads             each block copied whole on this thread and
 *                           published (or, when the helper is behind,
 *                           copied and hashed chunked here); a helper
 *                           hashes the published ones behind it, this
 *                           thread hashes from the end once it has copied
 *                           all (cr_verify_start/publish/finish, a detached
 *                           thread started per call, as a batch read).
 * Every verified case checks its hashes against the one-shot XXH3 of each
 * block, so a wrong split cannot pass as a fast one. */
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

#include "client/client_verify.h"
#include "harness.h"

#define BLOCKS 32u
#define BLOCK_BYTES (256u * 1024u)
#define TOTAL_BYTES ((size_t)BLOCKS * BLOCK_BYTES)
#define CHUNK (32u * 1024u)
#define CALLS_PER_ROUND 10u /* 80 MiB per case per round */

enum { MEMCPY, CHUNKED, TWO_THREADS, CASES };
static const char *const names[CASES] = {"memcpy", "one thread, chunked 32 KiB",
                                         "two threads (cr_verify)"};
static uint64_t expected[BLOCKS];

static uint64_t copy_chunked(uint8_t *dst, const uint8_t *src, size_t len) {
    XXH3_state_t state;
    XXH3_64bits_reset(&state);
    for (size_t off = 0; off < len; off += CHUNK) {
        size_t n = len - off < CHUNK ? len - off : CHUNK;
        memcpy(dst + off, src + off, n);
        XXH3_64bits_update(&state, dst + off, n);
    }
    return XXH3_64bits_digest(&state);
}

/* One call: the whole 8 MiB as the case moves it; false on a wrong hash. */
static bool run_case(int c, uint8_t *dst, const uint8_t *src) {
    uint64_t got[BLOCKS];
    if (c == TWO_THREADS) {
        struct cr_verify_pipe *pipe = cr_verify_start(BLOCKS);
        if (pipe == NULL) return false;
        for (uint32_t b = 0; b < BLOCKS; b++) {
            uint8_t *d = dst + (size_t)b * BLOCK_BYTES;
            const uint8_t *s = src + (size_t)b * BLOCK_BYTES;
            if (cr_verify_keeping_up(pipe, b)) { /* as client_data.c's read_all */
                memcpy(d, s, BLOCK_BYTES);
                cr_verify_publish(pipe, b, d, BLOCK_BYTES, &got[b]);
            } else {
                got[b] = copy_chunked(d, s, BLOCK_BYTES);
                cr_verify_publish(pipe, b, NULL, 0, NULL);
            }
        }
        cr_verify_finish(pipe);
    } else {
        for (uint32_t b = 0; b < BLOCKS; b++) {
            uint8_t *d = dst + (size_t)b * BLOCK_BYTES;
            const uint8_t *s = src + (size_t)b * BLOCK_BYTES;
            if (c == MEMCPY) memcpy(d, s, BLOCK_BYTES);
            else got[b] = copy_chunked(d, s, BLOCK_BYTES);
        }
        if (c == MEMCPY) return true;
    }
    for (uint32_t b = 0; b < BLOCKS; b++)
        if (got[b] != expected[b]) return false;
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
                fprintf(stderr, "verify_pipe: %s computed a wrong XXH3\n", names[c]);
                return 1;
            }
            uint64_t t0 = bench_now_ns();
            for (unsigned k = 0; k < CALLS_PER_ROUND; k++) run_case(c, dst, src);
            uint64_t ns = bench_now_ns() - t0;
            gbps[(size_t)c * rounds + r] = (double)TOTAL_BYTES * CALLS_PER_ROUND / (double)ns;
        }
    }
    double med[CASES];
    for (int c = 0; c < CASES; c++) med[c] = bench_median(&gbps[(size_t)c * rounds], (int)rounds);
    printf("verify_pipe: %u x %u KiB, %u interleaved rounds of %u calls, wall-time medians\n",
           BLOCKS, BLOCK_BYTES / 1024, rounds, CALLS_PER_ROUND);
    for (int c = 0; c < CASES; c++)
        printf("  %-28s %7.2f GB/s  %.2f of memcpy\n", names[c], med[c], med[c] / med[MEMCPY]);
    free(gbps), free(src), free(dst);
    return 0;
}
