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
#include <string.h>

#include "client/copy_xxh3.h"
#include "copy_rounds.h"

enum { MEMCPY, COPY_ALL_HASH_ALL, COPY_THEN_HASH, CHUNK_16K, CHUNK_32K, CHUNK_64K, CHUNK_128K, FUSED, HOT_HASH, CASES };
static const char *const names[CASES] = {"memcpy", "copy all, then hash all", "copy, then hash", "chunked 16 KiB",
                                         "chunked 32 KiB", "chunked 64 KiB", "chunked 128 KiB",
                                         "fused, one pass (libcrescent)", "hash of a cache-hot 64 KiB chunk"};
static const size_t chunk_of[CASES] = {0, 0, 0, 16384, 32768, 65536, 131072, 0, 0};

static volatile uint64_t sink;

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

/* The cache-hot hash moves 64 KiB a block, the others the whole block. */
static double case_bytes(int c) {
    return c == HOT_HASH ? (double)BLOCKS * 65536 : (double)TOTAL_BYTES;
}

int main(int argc, char **argv) {
    const struct copy_rounds bench = {.name = "copy_verify",
                                      .medians = "medians",
                                      .case_names = names,
                                      .cases = CASES,
                                      .name_width = 34,
                                      .calls_per_round = 20,
                                      .clock_ns = bench_thread_cpu_ns,
                                      .run_case = run_case,
                                      .case_bytes = case_bytes};
    return copy_rounds_main(&bench, argc, argv);
}
