/* In-process benchmark of the store master core (no actors, no RPC):
 * PutStart+PutEnd pairs (4 KiB objects, 1 replica, 16 segments),
 * GetReplicaList and ExistKey on existing keys, Remove.
 *
 * Usage: store_core [objects]   (default 500000) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "core/store.h"
#include "crescent/error.h"

#define SEGMENTS 16u
#define OBJECT_BYTES 4096u
#define KEY_BYTES 24u

static const struct cr_uuid CLIENT = {{0xC1}};

static cr_store *setup(uint32_t objects) {
    cr_store_config cfg;
    cr_store_config_default(&cfg);
    cfg.max_objects = objects + 16;
    cfg.max_allocations_per_segment = objects / SEGMENTS * 2 + 1024;
    cr_store *store;
    if (cr_store_create(&cfg, NULL, &store) != CR_OK) abort();
    uint64_t seg_bytes = (uint64_t)objects / SEGMENTS * OBJECT_BYTES * 2 + (1u << 20);
    for (uint32_t i = 0; i < SEGMENTS; i++) {
        char name[32], ep[32];
        snprintf(name, sizeof(name), "seg%u", i);
        snprintf(ep, sizeof(ep), "10.0.0.%u:17000", i);
        struct cr_store_segment_params p = {name, (uint64_t)(i + 1) << 40, seg_bytes, ep, "tcp"};
        if (cr_store_mount_segment(store, &CLIENT, &p, 0) != CR_OK) abort();
    }
    return store;
}

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

int main(int argc, char **argv) {
    uint32_t n = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 500000u;
    if (n < SEGMENTS) n = SEGMENTS;
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
    return 0;
}
