/* The prefix index on a real request trace, by Dynamo's method (its
 * lib/kv-router/benches/mooncake_bench.rs, the Flash Indexer's figures):
 *
 *   - the Mooncake trace's requests are split at random over W workers;
 *   - each worker is an engine with a G-block KV cache and LRU eviction
 *     (here src/core/kv_lru.c; Dynamo uses its mock engine): serving its
 *     requests in order produces its Stored (runs, with their sequence
 *     hashes) and Removed events;
 *   - a request's trace hash id h is one block of B tokens all equal to h
 *     (Dynamo's local_block_hash_from_id), so requests sharing ids share
 *     prefixes; the bench hashes them once, before timing (Dynamo's
 *     requests also arrive as precomputed block hashes);
 *   - the replay applies, per request in trace order, its find_matches
 *     (cr_prefix_index_query over every worker) and then the events its
 *     worker's engine emitted for it; --replicas R repeats every worker's
 *     timeline R times under other worker ids (Dynamo's
 *     inference_worker_duplication_factor), for W x R instances;
 *   - counted as Dynamo counts: ops = requests + events; block ops =
 *     blocks queried + blocks stored (removes count as events, 0 blocks);
 *     and the ingest figure alone: blocks stored + removed per CPU second
 *     of a replay of the events only.
 *
 * Unlike Dynamo's runs (24 threads, replayed against the clock and swept
 * until achieved stops tracking offered), this is one thread replaying as
 * fast as it can: the figure is per core.  Every query's answer for the
 * worker that then serves the request is checked against that engine's own
 * cache (the two must agree: mismatches are printed and fail the run).
 * A digest of every answer (all instances' counts, in any order) is printed:
 * two builds of the index that print the same digest gave the same answers.
 *
 * Run: ./prefix_trace TRACE [--workers W] [--replicas R] [--gpu-blocks G]
 *                          [--block-size B] [--rounds N] */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "core/kv_lru.h"
#include "core/kv_trace.h"
#include "core/prefix_hash.h"
#include "core/prefix_index.h"
#include "core/prefix_map.h"
#include "crescent/error.h"

enum kind { QUERY, STORED, REMOVED };

struct entry {
    uint8_t kind;
    uint32_t worker;
    uint32_t count;
    uint32_t hit;    /* QUERY: what the worker's engine holds of it, in blocks */
    size_t at;       /* QUERY, STORED: into seqs; REMOVED: into removed */
};

struct timeline {
    struct entry *entries;
    size_t count, cap;
    uint64_t *seqs;  /* each request's sequence hashes */
    size_t seq_count;
    uint64_t *removed;
    size_t removed_count, removed_cap;
    uint64_t requests, events, query_blocks, stored_blocks, removed_blocks, runs;
};

static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDULL;
    return h ^ (h >> 33);
}

/* A digest of one answer, whatever order its matches come in: the sum of
 * each match's hash over everything it reports. */
static uint64_t answer_digest(const struct cr_prefix_match *m, size_t n) {
    uint64_t sum = n;
    for (size_t k = 0; k < n; k++) {
        uint64_t h = mix(m[k].instance_id, m[k].longest_tokens);
        for (unsigned md = 0; md < CR_PREFIX_MEDIA_MAX; md++) h = mix(h, cr_prefix_match_medium_tokens(&m[k], md));
        h = mix(h, m[k].dp_mask);
        for (uint64_t set = m[k].dp_mask; set != 0; set &= set - 1)
            h = mix(h, cr_prefix_match_rank_tokens(&m[k], (unsigned)__builtin_ctzll(set)));
        sum += h;
    }
    return sum;
}

static void die(int rc, const char *what) {
    if (rc != CR_OK) {
        fprintf(stderr, "prefix_trace: %s: %s\n", what, cr_strerror(rc));
        exit(1);
    }
}

static void push(struct timeline *t, struct entry e) {
    if (t->count == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 4096;
        t->entries = realloc(t->entries, t->cap * sizeof(*t->entries));
        if (t->entries == NULL) die(CR_ERR_NOMEM, "timeline");
    }
    t->entries[t->count++] = e;
}

/* Serves every request on its worker's simulated engine and records the
 * query and the events, in trace order. */
static void build_timeline(const struct cr_kv_trace *trace, unsigned workers, uint32_t gpu_blocks,
                           uint32_t bs, uint64_t seed, struct timeline *t) {
    memset(t, 0, sizeof(*t));
    t->seqs = malloc(trace->id_count * sizeof(uint64_t));
    struct cr_kv_lru *lru = calloc(workers, sizeof(*lru));
    uint32_t *tokens = malloc((size_t)gpu_blocks * bs * sizeof(uint32_t));
    uint32_t *run_start = malloc(gpu_blocks * sizeof(uint32_t)), *run_len = malloc(gpu_blocks * 4);
    uint64_t *evicted = malloc(gpu_blocks * sizeof(uint64_t));
    if (t->seqs == NULL || lru == NULL || tokens == NULL || run_start == NULL || run_len == NULL ||
        evicted == NULL)
        die(CR_ERR_NOMEM, "timeline");
    for (unsigned w = 0; w < workers; w++) die(cr_kv_lru_init(&lru[w], gpu_blocks), "engine");
    uint64_t rng = seed | 1;
    for (size_t r = 0; r < trace->count; r++) {
        uint32_t n = trace->requests[r].block_count;
        if (n > gpu_blocks) n = gpu_blocks; /* an engine cannot hold more */
        const uint64_t *ids = cr_kv_trace_ids(trace, r);
        for (uint32_t b = 0; b < n; b++)
            for (uint32_t k = 0; k < bs; k++) tokens[(size_t)b * bs + k] = (uint32_t)ids[b];
        uint64_t *seq = t->seqs + t->seq_count;
        cr_prefix_hash_chain(tokens, (size_t)n * bs, bs, CR_PREFIX_HASH_SEED_DEFAULT, false, 0,
                             seq, n);
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        unsigned w = (unsigned)(rng % workers);
        struct cr_kv_lru_result res = {.run_start = run_start, .run_len = run_len,
                                       .removed = evicted};
        die(cr_kv_lru_serve(&lru[w], seq, n, &res), "serve");
        push(t, (struct entry){.kind = QUERY, .worker = w, .count = n, .hit = res.hit,
                               .at = t->seq_count});
        t->requests++;
        t->query_blocks += n;
        if (res.removed_count > 0) { /* evicted to make room, before the stores */
            if (t->removed_count + res.removed_count > t->removed_cap) {
                t->removed_cap = (t->removed_cap + res.removed_count) * 2;
                t->removed = realloc(t->removed, t->removed_cap * sizeof(uint64_t));
                if (t->removed == NULL) die(CR_ERR_NOMEM, "timeline");
            }
            memcpy(t->removed + t->removed_count, evicted, res.removed_count * sizeof(uint64_t));
            push(t, (struct entry){.kind = REMOVED, .worker = w, .count = res.removed_count,
                                   .at = t->removed_count});
            t->removed_count += res.removed_count;
            t->events++;
            t->removed_blocks += res.removed_count;
        }
        for (uint32_t k = 0; k < res.run_count; k++) {
            push(t, (struct entry){.kind = STORED, .worker = w, .count = run_len[k],
                                   .at = t->seq_count + run_start[k]});
            t->events++;
            t->runs++;
            t->stored_blocks += run_len[k];
        }
        t->seq_count += n;
    }
    for (unsigned w = 0; w < workers; w++) cr_kv_lru_free(&lru[w]);
    free(lru);
    free(tokens);
    free(run_start);
    free(run_len);
    free(evicted);
}

struct round {
    double wall_s, event_s, query_s;
    uint64_t p50_ns, p99_ns, mismatches;
    uint64_t digest; /* of every answer: equal digests, equal answers (old vs new index) */
    size_t bytes_end, bytes_mid;
    uint64_t pairs_end, pairs_mid, blocks_end;
};

/* One replay on a fresh index: with queries false only the events (the
 * ingest figure), else everything.  Rates are per CPU second of this thread
 * (the machine is shared: wall time would count other processes' turns);
 * query latencies are wall time, preemptions included. */
static struct round replay(const struct timeline *t, unsigned workers, unsigned replicas,
                           uint32_t bs, bool queries) {
    struct cr_prefix_index *ix;
    die(cr_prefix_index_create(0, &ix), "create");
    struct cr_prefix_context_key key = {.model = "trace", .block_size = bs};
    uint32_t ctx;
    die(cr_prefix_index_context(ix, &key, true, &ctx), "context");
    unsigned instances = workers * replicas;
    uint32_t *pubs = malloc(instances * sizeof(uint32_t));
    uint16_t *ids = malloc(instances * sizeof(uint16_t));
    for (unsigned i = 0; i < instances; i++) {
        char name[32];
        snprintf(name, sizeof(name), "worker-%u", i);
        die(cr_prefix_index_instance_add(ix, name, NULL, &ids[i]), "instance");
        die(cr_prefix_index_publisher(ix, ids[i], 0, &pubs[i]), "publisher");
    }
    struct bench_latency lat;
    bench_latency_init(&lat, t->requests * replicas);
    struct round out = {0};
    uint64_t event_ns = 0, query_ns = 0, start = bench_thread_cpu_ns();
    for (size_t e = 0; e < t->count; e++) {
        const struct entry *en = &t->entries[e];
        if (!queries && en->kind == QUERY) continue;
        if (e == t->count / 2) {
            struct cr_prefix_summary s;
            cr_prefix_index_summary(ix, &s);
            out.bytes_mid = s.bytes_used, out.pairs_mid = s.pairs;
        }
        for (unsigned r = 0; r < replicas; r++) {
            unsigned inst = en->worker + r * workers;
            uint64_t t0 = queries ? bench_now_ns() : 0;
            if (en->kind == QUERY) {
                const struct cr_prefix_match *m;
                size_t n;
                die(cr_prefix_index_query(ix, ctx, t->seqs + en->at, en->count, NULL, 0, &m, &n),
                    "query");
                uint64_t dt = bench_now_ns() - t0;
                query_ns += dt;
                bench_latency_add(&lat, dt);
                uint32_t got = 0;
                for (size_t k = 0; k < n; k++)
                    if (m[k].instance_id == ids[inst]) got = m[k].longest_tokens / bs;
                out.mismatches += got != en->hit;
                out.digest = mix(out.digest, answer_digest(m, n));
            } else if (en->kind == STORED) {
                die(cr_prefix_index_stored_hashes(ix, pubs[inst], ctx, NULL, t->seqs + en->at,
                                                  en->count, CR_PREFIX_MEDIUM_GPU),
                    "stored");
                event_ns += queries ? bench_now_ns() - t0 : 0;
            } else {
                die(cr_prefix_index_removed(ix, pubs[inst], ctx, t->removed + en->at, en->count,
                                            CR_PREFIX_MEDIUM_ALL),
                    "removed");
                event_ns += queries ? bench_now_ns() - t0 : 0;
            }
        }
    }
    out.wall_s = (double)(bench_thread_cpu_ns() - start) / 1e9; /* CPU seconds */
    out.event_s = (double)event_ns / 1e9;
    out.query_s = (double)query_ns / 1e9;
    if (lat.count > 0) {
        qsort(lat.samples_ns, lat.count, sizeof(uint64_t), bench_u64_compare);
        out.p50_ns = bench_percentile(&lat, 0.50);
        out.p99_ns = bench_percentile(&lat, 0.99);
    }
    struct cr_prefix_summary s;
    cr_prefix_index_summary(ix, &s);
    out.bytes_end = s.bytes_used, out.pairs_end = s.pairs, out.blocks_end = s.blocks;
    bench_latency_free(&lat);
    free(pubs);
    free(ids);
    cr_prefix_index_destroy(ix);
    return out;
}

/* The ceiling for ingest, measured in the same run: the same events into a
 * bare hash set of (block, instance) pairs (one open-addressing insert or
 * delete per block, prefixed as the index is), the least any index must do
 * to record who holds what.  Blocks per CPU second. */
static double replay_bare(const struct timeline *t, unsigned workers, unsigned replicas) {
    struct cr_prefix_map set;
    cr_prefix_map_init(&set, NULL);
    uint64_t blocks = 0, start = bench_thread_cpu_ns();
    for (size_t e = 0; e < t->count; e++) {
        const struct entry *en = &t->entries[e];
        if (en->kind == QUERY) continue;
        const uint64_t *keys = en->kind == STORED ? t->seqs + en->at : t->removed + en->at;
        for (unsigned r = 0; r < replicas; r++) {
            uint64_t who = (uint64_t)(en->worker + r * workers + 1) * 0x9E3779B97F4A7C15ULL;
            for (uint32_t k = 0; k < en->count && k < 16; k++)
                cr_prefix_map_prefetch(&set, keys[k] ^ who);
            for (uint32_t k = 0; k < en->count; k++) {
                if (k + 16 < en->count) cr_prefix_map_prefetch(&set, keys[k + 16] ^ who);
                if (en->kind == STORED) die(cr_prefix_map_put(&set, keys[k] ^ who, 1), "bare");
                else (void)cr_prefix_map_del(&set, keys[k] ^ who, NULL);
            }
            blocks += en->count;
        }
    }
    double s = (double)(bench_thread_cpu_ns() - start) / 1e9;
    cr_prefix_map_free(&set);
    return (double)blocks / s;
}

static unsigned long arg_num(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        fprintf(stderr, "prefix_trace: %s needs a value\n", argv[*i]);
        exit(2);
    }
    return strtoul(argv[++*i], NULL, 10);
}

int main(int argc, char **argv) {
    const char *path = NULL;
    unsigned workers = 16, replicas = 1, rounds = 5;
    unsigned long gpu_blocks = 16384, bs = 16;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--workers") == 0) workers = (unsigned)arg_num(argc, argv, &i);
        else if (strcmp(argv[i], "--replicas") == 0) replicas = (unsigned)arg_num(argc, argv, &i);
        else if (strcmp(argv[i], "--gpu-blocks") == 0) gpu_blocks = arg_num(argc, argv, &i);
        else if (strcmp(argv[i], "--block-size") == 0) bs = arg_num(argc, argv, &i);
        else if (strcmp(argv[i], "--rounds") == 0) rounds = (unsigned)arg_num(argc, argv, &i);
        else if (argv[i][0] != '-' && path == NULL) path = argv[i];
        else {
            fprintf(stderr, "usage: prefix_trace TRACE [--workers W] [--replicas R] "
                            "[--gpu-blocks G] [--block-size B] [--rounds N]\n");
            return 2;
        }
    }
    if (path == NULL || workers == 0 || replicas == 0 || rounds == 0 || gpu_blocks == 0 ||
        bs == 0 || (unsigned long)workers * replicas > 60000 || rounds > 99) {
        fprintf(stderr, "prefix_trace: a trace, and workers x replicas <= 60000, rounds <= 99\n");
        return 2;
    }
    struct cr_kv_trace trace;
    cr_kv_trace_init(&trace);
    char err[512];
    die(cr_kv_trace_load(&trace, path, err, sizeof(err)) == CR_OK ? CR_OK : CR_ERR_IO, err);
    uint64_t bad = 0;
    for (int k = 0; k < CR_KV_TRACE_BAD_KINDS; k++) bad += trace.bad[k];
    struct timeline t;
    build_timeline(&trace, workers, (uint32_t)gpu_blocks, (uint32_t)bs, 42, &t);
    printf("trace %s: %zu requests (%llu bad lines), %u workers x %u replicas, %lu blocks each, "
           "block %lu tokens\n", path, trace.count, (unsigned long long)bad, workers, replicas,
           gpu_blocks, bs);
    printf("per replica: %llu queries (%llu blocks), %llu events: %llu stored runs (%llu blocks), "
           "%llu removed (%llu blocks)\n", (unsigned long long)t.requests,
           (unsigned long long)t.query_blocks, (unsigned long long)t.events,
           (unsigned long long)t.runs, (unsigned long long)t.stored_blocks,
           (unsigned long long)(t.events - t.runs), (unsigned long long)t.removed_blocks);
    double ops[99], blk[99], ingest[99], p50[99], p99[99], qps[99], bare[99];
    struct round last = {0};
    for (unsigned r = 0; r < rounds; r++) {
        bare[r] = replay_bare(&t, workers, replicas);
        struct round in = replay(&t, workers, replicas, (uint32_t)bs, false);
        struct round o = replay(&t, workers, replicas, (uint32_t)bs, true);
        double R = replicas;
        ops[r] = (double)(t.requests + t.events) * R / o.wall_s;
        blk[r] = (double)(t.query_blocks + t.stored_blocks) * R / o.wall_s;
        ingest[r] = (double)(t.stored_blocks + t.removed_blocks) * R / in.wall_s;
        qps[r] = (double)t.requests * R / o.query_s;
        p50[r] = (double)o.p50_ns / 1e3, p99[r] = (double)o.p99_ns / 1e3;
        printf("round %u: %.2f M ops/s, %.2f M block ops/s, ingest %.2f M block events/s "
               "(bare hash set %.2f M, ratio %.2f), queries %.0f/s (wall) p50 %.2f us p99 %.2f us, "
               "%llu mismatches\n", r + 1, ops[r] / 1e6, blk[r] / 1e6, ingest[r] / 1e6,
               bare[r] / 1e6, ingest[r] / bare[r], qps[r], p50[r], p99[r],
               (unsigned long long)o.mismatches);
        if (o.mismatches != 0) {
            fprintf(stderr, "prefix_trace: the index disagrees with the engines\n");
            return 1;
        }
        last = o;
    }
    double ratio[99];
    for (unsigned r = 0; r < rounds; r++) ratio[r] = ingest[r] / bare[r];
    printf("median of %u: ops %.2f M/s, block ops %.2f M/s, ingest %.2f M block events/s "
           "(bare hash set %.2f M, ratio %.2f), query p50 %.2f us p99 %.2f us (%.0f queries/s)\n",
           rounds, bench_median(ops, (int)rounds) / 1e6, bench_median(blk, (int)rounds) / 1e6,
           bench_median(ingest, (int)rounds) / 1e6, bench_median(bare, (int)rounds) / 1e6,
           bench_median(ratio, (int)rounds), bench_median(p50, (int)rounds),
           bench_median(p99, (int)rounds), bench_median(qps, (int)rounds));
    printf("answers digest %016llx (equal across rounds and builds = the same answers)\n",
           (unsigned long long)last.digest);
    printf("memory: mid-replay %zu bytes for %llu pairs (%.1f B/pair), end %zu bytes for %llu "
           "pairs (%.1f B/pair), %llu blocks\n", last.bytes_mid,
           (unsigned long long)last.pairs_mid,
           last.pairs_mid ? (double)last.bytes_mid / (double)last.pairs_mid : 0.0, last.bytes_end,
           (unsigned long long)last.pairs_end,
           last.pairs_end ? (double)last.bytes_end / (double)last.pairs_end : 0.0,
           (unsigned long long)last.blocks_end);
    free(t.entries);
    free(t.seqs);
    free(t.removed);
    cr_kv_trace_free(&trace);
    return 0;
}
