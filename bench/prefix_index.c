/* Prefix index benchmark: ingest rate, in-process query latency, memory.
 *
 * Ingest: stored events of 16 blocks x 16 tokens (vLLM-like runs that continue
 * a chain from their parent), 100 publishers; the rate is per CPU second of
 * the thread (the machine may be shared).
 * Query: 16 prompts of 32k tokens that share a 1k-token system prefix; each of
 * N instances (100, 1000) holds one prompt to a random depth, so the first
 * blocks are held by nearly everyone and the set thins out along the prompt.
 * Queries of 2k, 8k and 32k tokens at block sizes 16 and 128 go through
 * cr_prefix_index_query_tokens (hashing included) and, for the hash-only cost,
 * cr_prefix_index_query on precomputed hashes.
 * Memory: accounted index bytes (engine-hash maps included) per (block, instance).
 *
 * --targets [--rounds N]: the issue-30 targets only (ingest 16x16; a 128-block
 * query over 1000 instances at block 16), N rounds interleaved with their
 * ceilings measured in the same run (a bare hash-table insert loop of as
 * many keys; per query, the block lookups and a bitset AND over the
 * instances per block plus writing each instance's answer), medians and
 * ratios printed: the machine is shared, so the ratios are what compare.
 * Query latencies are CPU time of the thread: p50, p99 and p99.9.
 *
 * Run: ./prefix_index [--quick] | --targets [--rounds N] */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "core/prefix_hash.h"
#include "core/prefix_index.h"
#include "core/prefix_map.h"
#include "crescent/error.h"
#include "prefix_workload.h"


static double bench_ingest(size_t total_blocks) {
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
    uint64_t start = bench_thread_cpu_ns();
    for (size_t e = 0; e < events; e++) {
        /* Every publisher extends its chain for 8 events, then starts a new root. */
        size_t pub = e % 100, step = (e / 100) % 8;
        const uint64_t *parent = step > 0 ? &engine[(e - 100) * RUN_BLOCKS + RUN_BLOCKS - 1] : NULL;
        check(cr_prefix_index_stored_tokens(ix, pubs[pub], ctx, parent, &engine[e * RUN_BLOCKS],
                                            RUN_BLOCKS, &tokens[e * RUN_BLOCKS * 16],
                                            RUN_BLOCKS * 16, 16, CR_PREFIX_MEDIUM_GPU),
              "stored");
    }
    uint64_t elapsed = bench_thread_cpu_ns() - start;
    bench_report("ingest stored 16x16 (blocks per CPU s)", events * RUN_BLOCKS, elapsed, NULL);
    double rate = (double)(events * RUN_BLOCKS) / ((double)elapsed / 1e9);
    struct cr_prefix_summary s;
    cr_prefix_index_summary(ix, &s);
    printf(
        "  ingest memory: %llu pairs, %zu bytes, %.1f bytes/(block,instance) (unshared blocks)\n",
        (unsigned long long)s.pairs, s.bytes_used, (double)s.bytes_used / (double)s.pairs);
    free(tokens);
    free(engine);
    cr_prefix_index_destroy(ix);
    return rate;
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

/* ---- --targets: interleaved rounds beside ceilings ---- */

/* Ingest ceiling: a bare open-addressing insert of as many random keys as
 * the ingest case stores blocks (one map insert per block, no holders, no
 * engine-hash map, no hashing). */
static double ceiling_ingest(size_t total_blocks) {
    uint64_t *keys = malloc(total_blocks * sizeof(uint64_t));
    for (size_t i = 0; i < total_blocks; i++) keys[i] = rng() | 1;
    struct cr_prefix_map map;
    cr_prefix_map_init(&map, NULL);
    uint64_t start = bench_thread_cpu_ns();
    for (size_t i = 0; i < total_blocks; i++) check(cr_prefix_map_put(&map, keys[i], i), "map");
    double rate = (double)total_blocks / ((double)(bench_thread_cpu_ns() - start) / 1e9);
    cr_prefix_map_free(&map);
    free(keys);
    return rate;
}

#define T_BLOCKS 128u
#define T_INST 1000
#define T_WORDS ((T_INST + 63) / 64)

struct query_ceiling {
    struct cr_prefix_map blocks;       /* every block hash the index holds */
    uint64_t (*bits)[T_WORDS];         /* one holder bitset per block */
    struct cr_prefix_match *out;
};

/* Query ceiling: per query the 128 block lookups, an AND of the block's
 * 1000-instance bitset into the survivors, and each surviving instance's
 * answer written (id and length): what a walk cannot do without. */
static uint64_t ceiling_query(struct query_ceiling *c, const uint64_t *hashes) {
    uint64_t alive[T_WORDS];
    memset(alive, 0xff, sizeof(alive));
    if (T_INST % 64 != 0) alive[T_WORDS - 1] = (1ULL << (T_INST % 64)) - 1;
    uint32_t depth = 0;
    for (; depth < T_BLOCKS; depth++) {
        uint64_t slot;
        if (!cr_prefix_map_get(&c->blocks, hashes[depth], &slot)) break;
        uint64_t any = 0;
        for (int w = 0; w < T_WORDS; w++) any |= alive[w] &= c->bits[slot][w];
        if (any == 0) break;
    }
    size_t n = 0;
    for (int w = 0; w < T_WORDS; w++)
        for (uint64_t b = alive[w]; b != 0; b &= b - 1) {
            c->out[n].instance_id = (uint16_t)(w * 64 + __builtin_ctzll(b));
            c->out[n++].longest_tokens = depth * 16;
        }
    return n;
}

static void bench_targets(int rounds) {
    uint32_t *prompts = make_prompts();
    struct cr_prefix_index *ix;
    check(cr_prefix_index_create(0, &ix), "create");
    struct cr_prefix_context_key key = {.tenant = "default", .model = "m", .block_size = 16};
    uint32_t ctx;
    check(cr_prefix_index_context(ix, &key, true, &ctx), "context");
    populate(ix, ctx, 16, T_INST, prompts);
    /* The ceiling's blocks: the first 128 of every prompt, all instances holding them. */
    struct query_ceiling c;
    cr_prefix_map_init(&c.blocks, NULL);
    c.bits = malloc((size_t)PROMPTS * T_BLOCKS * sizeof(*c.bits));
    c.out = calloc(T_INST, sizeof(struct cr_prefix_match));
    uint64_t (*hashes)[T_BLOCKS] = malloc(PROMPTS * sizeof(*hashes));
    for (int p = 0; p < PROMPTS; p++) {
        cr_prefix_hash_chain(prompts + (size_t)p * PROMPT_TOKENS, T_BLOCKS * 16, 16, 0, false, 0,
                             hashes[p], T_BLOCKS);
        for (uint32_t b = 0; b < T_BLOCKS; b++) {
            check(cr_prefix_map_put(&c.blocks, hashes[p][b], (uint64_t)p * T_BLOCKS + b), "map");
            memset(c.bits[p * T_BLOCKS + b], 0xff, sizeof(c.bits[0]));
        }
    }
    enum { ING, ING_CEIL, Q_HASH, Q_TOK, Q_CEIL, Q_HASH99, Q_TOK99, Q_CEIL99, Q_HASH999, Q_TOK999,
           Q_CEIL999, METRICS };
    double v[METRICS][99];
    const int iters = 5000;
    for (int r = 0; r < rounds; r++) {
        v[ING_CEIL][r] = ceiling_ingest(2000000);
        v[ING][r] = bench_ingest(2000000);
        for (int kind = 0; kind < 3; kind++) {
            struct bench_latency lat;
            bench_latency_init(&lat, iters);
            size_t matched = 0;
            for (int it = 0; it < iters; it++) {
                int p = (int)(rng() % PROMPTS);
                const struct cr_prefix_match *m;
                size_t n = 0;
                uint64_t t0 = bench_thread_cpu_ns();
                if (kind == 0)
                    check(cr_prefix_index_query(ix, ctx, hashes[p], T_BLOCKS, NULL, 0, &m, &n), "q");
                else if (kind == 1)
                    check(cr_prefix_index_query_tokens(ix, &key, prompts + (size_t)p * PROMPT_TOKENS,
                                                       T_BLOCKS * 16, NULL, 0, &m, &n), "q");
                else
                    n = ceiling_query(&c, hashes[p]);
                bench_latency_add(&lat, bench_thread_cpu_ns() - t0);
                matched += n;
            }
            if (matched == 0) fprintf(stderr, "warning: no matches\n");
            qsort(lat.samples_ns, lat.count, sizeof(uint64_t), bench_u64_compare);
            v[Q_HASH + kind][r] = (double)bench_percentile(&lat, 0.50) / 1e3;
            v[Q_HASH99 + kind][r] = (double)bench_percentile(&lat, 0.99) / 1e3;
            v[Q_HASH999 + kind][r] = (double)bench_percentile(&lat, 0.999) / 1e3;
            bench_latency_free(&lat);
        }
        printf("round %d: ingest %.2f M/s (ceiling %.2f M/s); 128-block query, 1000 inst: "
               "by hash p50 %.2f p99 %.2f us, from tokens p50 %.2f p99 %.2f us, ceiling p50 "
               "%.2f p99 %.2f us; p99.9 by hash %.2f, from tokens %.2f, ceiling %.2f us\n", r + 1,
               v[ING][r] / 1e6, v[ING_CEIL][r] / 1e6, v[Q_HASH][r], v[Q_HASH99][r], v[Q_TOK][r],
               v[Q_TOK99][r], v[Q_CEIL][r], v[Q_CEIL99][r], v[Q_HASH999][r], v[Q_TOK999][r],
               v[Q_CEIL999][r]);
    }
    double med[METRICS];
    for (int k = 0; k < METRICS; k++) med[k] = bench_median(v[k], rounds);
    printf("median of %d rounds: ingest %.2f M blocks/s, ceiling %.2f M (ratio %.2f)\n", rounds,
           med[ING] / 1e6, med[ING_CEIL] / 1e6, med[ING] / med[ING_CEIL]);
    printf("median of %d rounds: 128-block query over 1000 instances: by hash p50 %.2f p99 %.2f us;"
           " from tokens p50 %.2f p99 %.2f us; ceiling p50 %.2f p99 %.2f us (by hash / ceiling "
           "p50 %.2f)\n", rounds, med[Q_HASH], med[Q_HASH99], med[Q_TOK], med[Q_TOK99],
           med[Q_CEIL], med[Q_CEIL99], med[Q_HASH] / med[Q_CEIL]);
    printf("median of %d rounds: p99.9 by hash %.2f us, from tokens %.2f us, ceiling %.2f us\n",
           rounds, med[Q_HASH999], med[Q_TOK999], med[Q_CEIL999]);
    cr_prefix_map_free(&c.blocks);
    free(c.bits);
    free(c.out);
    free(hashes);
    free(prompts);
    cr_prefix_index_destroy(ix);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--targets") == 0) {
        int rounds = argc > 3 && strcmp(argv[2], "--rounds") == 0 ? atoi(argv[3]) : 5;
        if (rounds < 1 || rounds > 99) {
            fprintf(stderr, "prefix_index: --rounds takes 1..99\n");
            return 2;
        }
        bench_targets(rounds);
        return 0;
    }
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
