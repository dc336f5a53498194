/* In-process benchmark of the store master core (no actors, no RPC):
 * PutStart+PutEnd pairs (4 KiB objects, 1 replica, 16 segments),
 * GetReplicaList and ExistKey on existing keys, Remove, and batched puts the
 * way segments runs BatchPutStart and BatchPutEnd (see bench_batch_put).
 *
 * Usage: store_core [objects [batch]]   (default 500000; batch: that case only) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "core/store.h"
#include "crescent/error.h"
#include "store_setup.h"


static char *make_keys(uint32_t n) {
    char *keys = malloc((size_t)n * KEY_BYTES);
    if (keys == NULL) abort();
    for (uint32_t i = 0; i < n; i++) snprintf(keys + (size_t)i * KEY_BYTES, KEY_BYTES,
                                              "model/blk/%012u", i);
    return keys;
}

static void bench_put(cr_store *store, const char *keys, uint32_t n) {
    struct bench_latency lat;
    bench_latency_init(&lat, n);
    struct cr_store_replica_list out;
    uint64_t start = bench_now_ns();
    for (uint32_t i = 0; i < n; i++) {
        const char *key = keys + (size_t)i * KEY_BYTES;
        struct cr_store_put_params p = {.key = key, .key_len = 22, .value_length = OBJECT_BYTES,
                                        .replica_num = 1};
        uint64_t t0 = bench_now_ns();
        if (cr_store_put_start(store, &CLIENT, &p, 1, &out) != CR_OK) abort();
        if (cr_store_put_end(store, &CLIENT, NULL, key, 22, 1) != CR_OK) abort();
        bench_latency_add(&lat, bench_now_ns() - t0);
    }
    bench_report("store_core put_start+put_end pair (4KiB,1r,16s)", n, bench_now_ns() - start,
                 &lat);
    bench_latency_free(&lat);
}

/* mode 0: get_replica_list, 1: exist_key; random existing keys. */
static void bench_read(cr_store *store, const char *keys, uint32_t n, int mode) {
    struct bench_latency lat;
    bench_latency_init(&lat, n);
    struct cr_store_replica_list out;
    uint64_t rng = 0x1234567;
    uint64_t start = bench_now_ns();
    for (uint32_t i = 0; i < n; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        const char *key = keys + (size_t)(rng % n) * KEY_BYTES;
        uint64_t t0 = bench_now_ns();
        int rc = mode == 0 ? cr_store_get_replica_list(store, NULL, key, 22, 2, &out)
                           : cr_store_exist_key(store, NULL, key, 22, 2);
        if (rc != CR_OK) abort();
        bench_latency_add(&lat, bench_now_ns() - t0);
    }
    bench_report(mode == 0 ? "store_core get_replica_list" : "store_core exist_key", n,
                 bench_now_ns() - start, &lat);
    bench_latency_free(&lat);
}

static void bench_remove(cr_store *store, const char *keys, uint32_t n) {
    struct bench_latency lat;
    bench_latency_init(&lat, n);
    uint64_t start = bench_now_ns();
    for (uint32_t i = 0; i < n; i++) {
        uint64_t t0 = bench_now_ns();
        /* now is past every lease granted above */
        if (cr_store_remove(store, NULL, keys + (size_t)i * KEY_BYTES, 22, false, 1000000) != CR_OK)
            abort();
        bench_latency_add(&lat, bench_now_ns() - t0);
    }
    bench_report("store_core remove", n, bench_now_ns() - start, &lat);
    bench_latency_free(&lat);
}

/* Batched puts as segments runs them (rpc_methods.c batch_run): 32 keys
 * made at once, looked up with cr_store_prefetch_batch, put_start each; the
 * same keys' put_end BATCH_CALLERS groups later (BATCH_CALLERS clients with
 * one call in flight each, as bench/master_sync drives crescentd).  Each
 * phase writes every key, then removes them all in a shuffled order, as
 * evictions and the clients' cleanups leave the free list; the first phase
 * warms the slab.  Prints this thread's CPU ns per key of each call kind, median of the
 * later phases. */
#define BATCH 32u
#define BATCH_CALLERS 64u
#define BATCH_PHASES 4

/* This thread's CPU time: the machine is shared, and wall time would count
 * the moments another process had the core. */
static uint64_t thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void batch_calls(cr_store *store, const char *keys, uint32_t group, bool end,
                        uint64_t *ns) {
    const char *names[BATCH];
    uint32_t lens[BATCH]; /* the request decoder hands them over measured */
    struct cr_store_key made[BATCH];
    for (uint32_t i = 0; i < BATCH; i++) {
        names[i] = keys + ((size_t)group * BATCH + i) * KEY_BYTES;
        lens[i] = (uint32_t)strlen(names[i]);
    }
    uint64_t t0 = thread_cpu_ns();
    struct cr_store_key_maker maker = {0}; /* entries name their tenants, as puts' do */
    for (uint32_t i = 0; i < BATCH; i++)
        cr_store_key_make_next(&maker, NULL, names[i], lens[i], &made[i]);
    for (uint32_t i = 0; i < BATCH; i++) {
        cr_store_prefetch_batch(store, made, BATCH, i);
        struct cr_store_replica_list out;
        struct cr_store_put_params p = {.key = made[i].key, .key_len = made[i].key_len,
                                        .key_hashed = true, .key_hash = made[i].hash,
                                        .value_length = OBJECT_BYTES, .replica_num = 1};
        int rc = end ? cr_store_put_end_k(store, &CLIENT, &made[i], NULL, 1)
                     : cr_store_put_start(store, &CLIENT, &p, 1, &out);
        if (rc != CR_OK) abort();
    }
    *ns += thread_cpu_ns() - t0;
}

static void bench_batch_put(uint32_t n) {
    uint32_t groups = n / BATCH;
    n = groups * BATCH;
    char *keys = malloc((size_t)n * KEY_BYTES);
    uint32_t *order = malloc((size_t)n * sizeof(*order));
    if (keys == NULL || order == NULL) abort();
    for (uint32_t i = 0; i < n; i++) {
        snprintf(keys + (size_t)i * KEY_BYTES, KEY_BYTES, "sync1-p0-0-t%u-%u", i % 64, i);
        order[i] = i;
    }
    cr_store *store = setup(n);
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    double start_ns[BATCH_PHASES], end_ns[BATCH_PHASES];
    for (int phase = 0; phase < BATCH_PHASES; phase++) {
        uint64_t ns_start = 0, ns_end = 0;
        for (uint32_t g = 0; g < groups + BATCH_CALLERS; g++) {
            if (g < groups) batch_calls(store, keys, g, false, &ns_start);
            if (g >= BATCH_CALLERS) batch_calls(store, keys, g - BATCH_CALLERS, true, &ns_end);
        }
        start_ns[phase] = (double)ns_start / n;
        end_ns[phase] = (double)ns_end / n;
        for (uint32_t i = n - 1; i > 0; i--) { /* Fisher-Yates */
            rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
            uint32_t j = (uint32_t)(rng % (i + 1)), t = order[i];
            order[i] = order[j], order[j] = t;
        }
        for (uint32_t i = 0; i < n; i++)
            if (cr_store_remove(store, NULL, keys + (size_t)order[i] * KEY_BYTES,
                                (uint32_t)strlen(keys + (size_t)order[i] * KEY_BYTES), true,
                                1000000) != CR_OK)
                abort();
    }
    printf("%-44s %8.1f ns/key put_start  %8.1f ns/key put_end  (%u keys, median of %d phases)\n",
           "store_core batch put (32 keys, 64 callers)",
           bench_median(start_ns + 1, BATCH_PHASES - 1), bench_median(end_ns + 1, BATCH_PHASES - 1),
           n, BATCH_PHASES - 1);
    cr_store_destroy(store);
    free(order);
    free(keys);
}

int main(int argc, char **argv) {
    uint32_t n = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 500000u;
    if (n < SEGMENTS) n = SEGMENTS;
    if (argc > 2 && strcmp(argv[2], "batch") == 0) { /* the batched-put case alone */
        bench_batch_put(n);
        return 0;
    }
    char *keys = make_keys(n);
    cr_store *store = setup(n);
    bench_put(store, keys, n);
    bench_read(store, keys, n, 0);
    bench_read(store, keys, n, 1);
    bench_remove(store, keys, n);
    struct cr_store_stats st;
    cr_store_get_stats(store, 1000000, &st);
    if (st.object_count != 0 || st.used_bytes != 0) abort();
    cr_store_destroy(store);
    free(keys);
    bench_batch_put(n);
    return 0;
}
