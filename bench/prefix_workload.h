/* The prefix-index workload shared by bench/prefix_index.c (in process) and
 * bench/indexer.c (through the actor and HTTP): PROMPTS prompts of
 * PROMPT_TOKENS tokens sharing a SYSTEM_TOKENS prefix, and instances each
 * holding one prompt to a random depth, stored in runs of RUN_BLOCKS blocks.
 * One definition, so both benchmarks measure the same index. */
#ifndef CRESCENT_BENCH_PREFIX_WORKLOAD_H
#define CRESCENT_BENCH_PREFIX_WORKLOAD_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/prefix_index.h"
#include "crescent/error.h"

#define PROMPTS 16
#define PROMPT_TOKENS 32768u
#define SYSTEM_TOKENS 1024u
#define RUN_BLOCKS 16u
/* Token ids are drawn from a real vocabulary's range (Qwen2.5: 151,936 ids; Llama 3:
 * 128,256), so JSON bodies have the digits real prompts have: up to 6 per id, not the
 * 10 of a random 32-bit value. */
#define VOCAB 151936u

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;

static inline uint64_t rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static inline void check(int rc, const char *what) {
    if (rc != CR_OK) {
        fprintf(stderr, "%s: %s\n", what, cr_strerror(rc));
        exit(1);
    }
}

static inline uint32_t *make_prompts(void) {
    uint32_t *p = malloc((size_t)PROMPTS * PROMPT_TOKENS * sizeof(uint32_t));
    for (uint32_t t = 0; t < SYSTEM_TOKENS; t++) p[t] = (uint32_t)(rng() % VOCAB);
    for (int i = 0; i < PROMPTS; i++) {
        uint32_t *q = p + (size_t)i * PROMPT_TOKENS;
        memcpy(q, p, SYSTEM_TOKENS * sizeof(uint32_t));
        for (uint32_t t = SYSTEM_TOKENS; t < PROMPT_TOKENS; t++) q[t] = (uint32_t)(rng() % VOCAB);
    }
    return p;
}

/* Instance i stores prompt i % PROMPTS to a random depth, in runs of 16 blocks. */
static inline void populate(struct cr_prefix_index *ix, uint32_t ctx, uint32_t bs, int instances,
                     const uint32_t *prompts) {
    uint32_t max_blocks = PROMPT_TOKENS / bs;
    uint64_t engine[RUN_BLOCKS];
    for (int i = 0; i < instances; i++) {
        char name[32];
        uint16_t id;
        uint32_t pub;
        snprintf(name, sizeof(name), "inst-%d", i);
        check(cr_prefix_index_instance_add(ix, name, NULL, &id), "instance");
        check(cr_prefix_index_publisher(ix, id, (uint8_t)(i % 4), &pub), "publisher");
        const uint32_t *q = prompts + (size_t)(i % PROMPTS) * PROMPT_TOKENS;
        uint32_t depth = 1 + (uint32_t)(rng() % max_blocks);
        uint64_t parent = 0;
        for (uint32_t b = 0; b < depth; b += RUN_BLOCKS) {
            uint32_t n = depth - b < RUN_BLOCKS ? depth - b : RUN_BLOCKS;
            for (uint32_t k = 0; k < n; k++) engine[k] = ((uint64_t)i << 32) | (b + k);
            check(cr_prefix_index_stored_tokens(ix, pub, ctx, b > 0 ? &parent : NULL, engine, n,
                                                q + (size_t)b * bs, (size_t)n * bs, bs,
                                                CR_PREFIX_MEDIUM_GPU),
                  "populate");
            parent = engine[n - 1];
        }
    }
}

#endif
