/* Prefix index benchmark: ingest rate, in-process query latency, memory.
 *
 * Ingest: stored events of 16 blocks x 16 tokens (vLLM-like runs that continue
 * a chain from their parent), 100 publishers.
 * Query: 16 prompts of 32k tokens that share a 1k-token system prefix; each of
 * N instances (100, 1000) holds one prompt to a random depth, so the first
 * blocks are held by nearly everyone and the set thins out along the prompt.
 * Queries of 2k, 8k and 32k tokens at block sizes 16 and 128 go through
 * cr_prefix_index_query_tokens (hashing included) and, for the hash-only cost,
 * cr_prefix_index_query on precomputed hashes.
 * Memory: accounted index bytes (engine-hash maps included) per (block, instance).
 *
 * Run: ./prefix_index [--quick] */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "core/prefix_hash.h"
#include "core/prefix_index.h"
#include "crescent/error.h"
#include "prefix_workload.h"


static void bench_ingest(size_t total_blocks) {
    struct cr_prefix_index *ix;
    check(cr_prefix_index_create(0, &ix), "create");
    struct cr_prefix_context_key key = {.tenant = "default", .model = "m", .block_size = 16};
    uint32_t ctx, pubs[100];
    check(cr_prefix_index_context(ix, &key, true, &ctx), "context");
    for (int i = 0; i < 100; i++) {
        char name[32];
        uint16_t id;
        snprintf(name, sizeof(name), "ingest-%d", i);
        check(cr_prefix_index_instance_add(ix, name, NULL, &id), "instance");
        check(cr_prefix_index_publisher(ix, id, 0, &pubs[i]), "publisher");
    }
    size_t events = total_blocks / RUN_BLOCKS;
    uint32_t *tokens = malloc(events * RUN_BLOCKS * 16 * sizeof(uint32_t));
    uint64_t *engine = malloc(events * RUN_BLOCKS * sizeof(uint64_t));
    for (size_t i = 0; i < events * RUN_BLOCKS * 16; i++) tokens[i] = (uint32_t)(rng() % VOCAB);
    for (size_t i = 0; i < events * RUN_BLOCKS; i++) engine[i] = rng();
    uint64_t start = bench_now_ns();
    for (size_t e = 0; e < events; e++) {
        /* Every publisher extends its chain for 8 events, then starts a new root. */
        size_t pub = e % 100, step = (e / 100) % 8;
        const uint64_t *parent = step > 0 ? &engine[(e - 100) * RUN_BLOCKS + RUN_BLOCKS - 1] : NULL;
        check(cr_prefix_index_stored_tokens(ix, pubs[pub], ctx, parent, &engine[e * RUN_BLOCKS],
                                            RUN_BLOCKS, &tokens[e * RUN_BLOCKS * 16],
                                            RUN_BLOCKS * 16, 16, CR_PREFIX_MEDIUM_GPU),
              "stored");
    }
    uint64_t elapsed = bench_now_ns() - start;
    bench_report("ingest stored 16x16 (blocks/s)", events * RUN_BLOCKS, elapsed, NULL);
    struct cr_prefix_summary s;
    cr_prefix_index_summary(ix, &s);
    printf(
        "  ingest memory: %llu pairs, %zu bytes, %.1f bytes/(block,instance) (unshared blocks)\n",
        (unsigned long long)s.pairs, s.bytes_used, (double)s.bytes_used / (double)s.pairs);
    free(tokens);
    free(engine);
    cr_prefix_index_destroy(ix);
}

static void bench_queries(int instances, uint32_t bs, const uint32_t *prompts, int iters) {
    struct cr_prefix_index *ix;
    check(cr_prefix_index_create(0, &ix), "create");
    struct cr_prefix_context_key key = {.tenant = "default", .model = "m", .block_size = bs};
    uint32_t ctx;
    check(cr_prefix_index_context(ix, &key, true, &ctx), "context");
    populate(ix, ctx, bs, instances, prompts);
    struct cr_prefix_summary s;
    cr_prefix_index_summary(ix, &s);
    printf("  %d instances bs %u: %llu blocks, %llu pairs, %.1f bytes/(block,instance)\n",
           instances, bs, (unsigned long long)s.blocks, (unsigned long long)s.pairs,
           (double)s.bytes_used / (double)s.pairs);
    const uint32_t lengths[3] = {2048, 8192, 32768};
    uint64_t *hashes = malloc((PROMPT_TOKENS / bs) * sizeof(uint64_t));
    for (int l = 0; l < 3; l++) {
        for (int by_hash = 0; by_hash < 2; by_hash++) {
            struct bench_latency lat;
            bench_latency_init(&lat, (size_t)iters);
            size_t matched = 0;
            uint64_t total = bench_now_ns();
            for (int it = 0; it < iters; it++) {
                const uint32_t *q = prompts + (size_t)(rng() % PROMPTS) * PROMPT_TOKENS;
                const struct cr_prefix_match *m;
                size_t n;
                size_t blocks = lengths[l] / bs;
                if (by_hash) cr_prefix_hash_chain(q, lengths[l], bs, 0, false, 0, hashes, blocks);
                uint64_t t0 = bench_now_ns();
                int rc = by_hash ? cr_prefix_index_query(ix, ctx, hashes, blocks, NULL, 0, &m, &n)
                                 : cr_prefix_index_query_tokens(ix, &key, q, lengths[l], NULL, 0,
                                                                &m, &n);
                bench_latency_add(&lat, bench_now_ns() - t0);
                check(rc, "query");
                matched += n;
            }
            total = bench_now_ns() - total;
            char name[96];
            snprintf(name, sizeof(name), "query%s %5u tok bs%-3u %4d inst (%zu blk)",
                     by_hash ? "_by_hash" : "_tokens ", lengths[l], bs, instances,
                     (size_t)(lengths[l] / bs));
            bench_report(name, (uint64_t)iters, total, &lat);
            if (matched == 0) fprintf(stderr, "warning: no matches\n");
            bench_latency_free(&lat);
        }
    }
    free(hashes);
    cr_prefix_index_destroy(ix);
}

int main(int argc, char **argv) {
    bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    bench_ingest(quick ? 200000 : 4000000);
    uint32_t *prompts = make_prompts();
    const int sizes[2] = {100, 1000};
    const uint32_t block_sizes[2] = {16, 128};
    for (int s = 0; s < 2; s++) {
        for (int b = 0; b < 2; b++)
            bench_queries(sizes[s], block_sizes[b], prompts, quick ? 500 : 5000);
    }
    free(prompts);
    return 0;
}
