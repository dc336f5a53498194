/* What bench/copy_verify.c and bench/verify_pipe.c share: 32 blocks of
 * 256 KiB (8 MiB, as bench/mooncake_store.py reads them) copied between two
 * buffers, each block's one-shot XXH3 as the answer a verified case must
 * match, the chunked copy-then-hash that libcrescent's read path does
 * (src/client/client_copy.c), and the run itself: interleaved rounds of every
 * case, GB/s per round, medians, each against memcpy (case 0) measured in
 * the same rounds.
 *
 * Header-only, like harness.h: each benchmark is one bench/<name>.c. */
#ifndef CRESCENT_BENCH_COPY_ROUNDS_H
#define CRESCENT_BENCH_COPY_ROUNDS_H

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

#include "harness.h"

#define BLOCKS 32u
#define BLOCK_BYTES (256u * 1024u)
#define TOTAL_BYTES ((size_t)BLOCKS * BLOCK_BYTES)

/* Each block's one-shot XXH3 of the source, set by copy_rounds_main. */
static uint64_t expected[BLOCKS];

/* memcpy `chunk` bytes, feed them to XXH3's streaming state while they are
 * in cache, next `chunk`: returns the hash of all `len` bytes. */
static inline uint64_t copy_chunked(uint8_t *dst, const uint8_t *src, size_t len, size_t chunk) {
    XXH3_state_t state;
    XXH3_64bits_reset(&state);
    for (size_t off = 0; off < len; off += chunk) {
        size_t n = len - off < chunk ? len - off : chunk;
        memcpy(dst + off, src + off, n);
        XXH3_64bits_update(&state, dst + off, n);
    }
    return XXH3_64bits_digest(&state);
}

/* One benchmark's cases.  Case 0 is memcpy, the ceiling the others are
 * divided by. */
struct copy_rounds {
    const char *name;              /* the program, first on its lines */
    const char *medians;           /* the heading's last words: "medians" */
    const char *const *case_names; /* `cases` of them */
    int cases;
    int name_width;                /* column of the case names */
    unsigned calls_per_round;
    uint64_t (*clock_ns)(void);    /* wall time, or this thread's CPU time */
    /* One call: the whole 8 MiB as case `c` moves it; false on a wrong hash. */
    bool (*run_case)(int c, uint8_t *dst, const uint8_t *src);
    /* Optional: the bytes one call of case `c` counts (NULL: TOTAL_BYTES). */
    double (*case_bytes)(int c);
};

/* Runs `argv[1]` (default 15) interleaved rounds of every case and prints
 * the medians.  Returns the process's exit code: 1 when out of memory or
 * when a case computed a wrong XXH3 (said on stderr). */
static inline int copy_rounds_main(const struct copy_rounds *b, int argc, char **argv) {
    unsigned rounds = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 15;
    if (rounds == 0) rounds = 1;
    uint8_t *src = aligned_alloc(4096, TOTAL_BYTES), *dst = aligned_alloc(4096, TOTAL_BYTES);
    double *gbps = calloc((size_t)b->cases * rounds, sizeof(double));
    double *med = calloc((size_t)b->cases, sizeof(double));
    if (src == NULL || dst == NULL || gbps == NULL || med == NULL) return 1;
    for (size_t i = 0; i < TOTAL_BYTES; i++) src[i] = (uint8_t)(i * 2654435761u >> 13);
    memset(dst, 0, TOTAL_BYTES);
    for (uint32_t k = 0; k < BLOCKS; k++)
        expected[k] = XXH3_64bits(src + (size_t)k * BLOCK_BYTES, BLOCK_BYTES);
    for (unsigned r = 0; r < rounds; r++) {
        for (int c = 0; c < b->cases; c++) {
            if (!b->run_case(c, dst, src)) { /* warm-up, and the hash check */
                fprintf(stderr, "%s: %s computed a wrong XXH3\n", b->name, b->case_names[c]);
                return 1;
            }
            uint64_t t0 = b->clock_ns();
            for (unsigned k = 0; k < b->calls_per_round; k++) b->run_case(c, dst, src);
            uint64_t ns = b->clock_ns() - t0;
            double bytes = b->case_bytes != NULL ? b->case_bytes(c) : (double)TOTAL_BYTES;
            gbps[(size_t)c * rounds + r] = bytes * b->calls_per_round / (double)ns;
        }
    }
    for (int c = 0; c < b->cases; c++)
        med[c] = bench_median(&gbps[(size_t)c * rounds], (int)rounds);
    printf("%s: %u x %u KiB, %u interleaved rounds of %u calls, %s\n", b->name, BLOCKS,
           BLOCK_BYTES / 1024, rounds, b->calls_per_round, b->medians);
    for (int c = 0; c < b->cases; c++)
        printf("  %-*s %7.2f GB/s  %.2f of memcpy\n", b->name_width, b->case_names[c], med[c],
               med[c] / med[0]);
    free(med), free(gbps), free(src), free(dst);
    return 0;
}

#endif
