/* Offset allocator benchmark: time per alloc and per free in a steady-state
 * mix, and utilization (bytes allocated / capacity when an allocation first
 * fails) for uniform and random object sizes in a 1 GiB segment.
 *
 * Throughput (ops/s) comes from batches timed as a whole, so clock reads do
 * not inflate it; percentiles come from a second pass that times every call
 * and therefore include one clock read (see the "clock_gettime" line). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/offset_alloc.h"
#include "crescent/error.h"
#include "harness.h"

#define KIB (UINT64_C(1) << 10)
#define MIB (UINT64_C(1) << 20)
#define GIB (UINT64_C(1) << 30)

enum {
    STEADY_LIVE = 4096,  /* live allocations in the steady-state mix */
    STEADY_BATCH = 64,   /* frees then allocs per timed batch */
    STEADY_ROUNDS = 20000,
    CHURN_OPS = 200000,
};

static uint64_t rng_state = UINT64_C(0x9e3779b97f4a7c15);

static uint64_t rng_next(void) {
    uint64_t x = rng_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * UINT64_C(2685821657736338717);
}

static uint64_t rng_range(uint64_t lo, uint64_t hi) { return lo + rng_next() % (hi - lo + 1u); }

static cr_offset_alloc *make(uint64_t size_bytes, uint32_t max_allocations) {
    cr_offset_alloc *alloc = NULL;
    int rc = cr_offset_alloc_create(size_bytes, max_allocations, &alloc);
    assert(rc == CR_OK);
    (void)rc;
    return alloc;
}

static void bench_clock(void) {
    enum { N = 1000000 };
    struct bench_latency lat;
    bench_latency_init(&lat, N);
    uint64_t start = bench_now_ns();
    for (int i = 0; i < N; i++) {
        uint64_t t0 = bench_now_ns();
        bench_latency_add(&lat, bench_now_ns() - t0);
    }
    bench_report("clock_gettime (timing overhead)", N, bench_now_ns() - start, &lat);
    bench_latency_free(&lat);
}

/* ---- steady state: free a batch of random live objects, allocate as many ---- */

struct steady {
    cr_offset_alloc *alloc;
    cr_offset_allocation live[STEADY_LIVE];
    bool present[STEADY_LIVE];
    uint64_t *sizes;  /* pre-drawn request sizes, one per alloc */
    uint32_t *starts; /* pre-drawn first slot of each batch */
    uint64_t failures;
};

static void steady_setup(struct steady *s) {
    s->alloc = make(GIB, 2 * STEADY_LIVE);
    s->failures = 0;
    for (uint32_t i = 0; i < STEADY_LIVE; i++) {
        s->present[i] = cr_offset_alloc_alloc(s->alloc, rng_range(KIB, 256 * KIB),
                                              &s->live[i]) == CR_OK;
    }
    for (uint32_t i = STEADY_LIVE - 1u; i > 0; i--) { /* victims in random address order */
        uint32_t j = (uint32_t)(rng_next() % (i + 1u));
        cr_offset_allocation t = s->live[i];
        bool p = s->present[i];
        s->live[i] = s->live[j], s->present[i] = s->present[j];
        s->live[j] = t, s->present[j] = p;
    }
}

static void steady_draw(struct steady *s) {
    for (size_t i = 0; i < (size_t)STEADY_ROUNDS * STEADY_BATCH; i++) {
        s->sizes[i] = rng_range(KIB, 256 * KIB);
    }
    for (size_t r = 0; r < STEADY_ROUNDS; r++) {
        s->starts[r] = (uint32_t)(rng_next() % STEADY_LIVE);
    }
}

/* One pass; with lat == NULL only batch totals are timed. */
static void steady_pass(struct steady *s, uint64_t *alloc_ns, uint64_t *free_ns,
                        struct bench_latency *alloc_lat, struct bench_latency *free_lat) {
    for (size_t r = 0; r < STEADY_ROUNDS; r++) {
        uint32_t first = s->starts[r];
        uint64_t t0 = bench_now_ns();
        for (uint32_t k = 0; k < STEADY_BATCH; k++) {
            uint32_t slot = (first + k) % STEADY_LIVE;
            if (!s->present[slot]) continue;
            uint64_t a = free_lat ? bench_now_ns() : 0;
            cr_offset_alloc_free(s->alloc, s->live[slot]);
            if (free_lat) bench_latency_add(free_lat, bench_now_ns() - a);
        }
        uint64_t t1 = bench_now_ns();
        for (uint32_t k = 0; k < STEADY_BATCH; k++) {
            uint32_t slot = (first + k) % STEADY_LIVE;
            uint64_t size = s->sizes[r * STEADY_BATCH + k];
            uint64_t a = alloc_lat ? bench_now_ns() : 0;
            int rc = cr_offset_alloc_alloc(s->alloc, size, &s->live[slot]);
            if (alloc_lat) bench_latency_add(alloc_lat, bench_now_ns() - a);
            s->present[slot] = rc == CR_OK;
            s->failures += rc != CR_OK;
        }
        uint64_t t2 = bench_now_ns();
        *free_ns += t1 - t0;
        *alloc_ns += t2 - t1;
    }
}

static void bench_steady(void) {
    static struct steady s;
    const size_t ops = (size_t)STEADY_ROUNDS * STEADY_BATCH;
    s.sizes = malloc(ops * sizeof(uint64_t));
    s.starts = malloc(STEADY_ROUNDS * sizeof(uint32_t));
    assert(s.sizes != NULL && s.starts != NULL);
    steady_setup(&s);
    steady_draw(&s);
    uint64_t alloc_ns = 0, free_ns = 0, unused_a = 0, unused_f = 0;
    steady_pass(&s, &alloc_ns, &free_ns, NULL, NULL); /* warm-up */
    alloc_ns = free_ns = 0;
    steady_pass(&s, &alloc_ns, &free_ns, NULL, NULL);
    struct bench_latency alloc_lat, free_lat;
    bench_latency_init(&alloc_lat, ops);
    bench_latency_init(&free_lat, ops);
    steady_pass(&s, &unused_a, &unused_f, &alloc_lat, &free_lat);
    cr_offset_alloc_stats st;
    cr_offset_alloc_get_stats(s.alloc, &st);
    printf("# steady: 1 GiB, %d live, sizes 1 KiB-256 KiB, fill %.3f, alloc failures %llu\n",
           STEADY_LIVE, 1.0 - (double)st.free_bytes / (double)st.capacity_bytes,
           (unsigned long long)s.failures);
    bench_report("steady alloc (1K-256K, 4096 live)", ops, alloc_ns, &alloc_lat);
    bench_report("steady free  (1K-256K, 4096 live)", free_lat.count, free_ns, &free_lat);
    bench_latency_free(&alloc_lat);
    bench_latency_free(&free_lat);
    cr_offset_alloc_destroy(s.alloc);
    free(s.sizes);
    free(s.starts);
}

/* ---- utilization: allocate until the first failure ---- */

typedef uint64_t (*size_fn)(uint64_t arg);

static uint64_t size_fixed(uint64_t arg) { return arg; }
static uint64_t size_random(uint64_t arg) { return rng_range(KIB, arg); }

/* Fills a fresh 1 GiB allocator until the first failure; returns bytes
 * allocated and, with lat == NULL, only the whole loop is timed. */
static uint64_t fill_pass(size_fn next_size, uint64_t arg, struct bench_latency *lat,
                          uint64_t *ops, uint64_t *elapsed_ns) {
    const uint32_t max_allocations = (uint32_t)(GIB / KIB + 1u);
    cr_offset_alloc *alloc = make(GIB, max_allocations);
    uint64_t allocated = 0;
    *ops = 0;
    uint64_t start = bench_now_ns();
    for (;;) {
        uint64_t size = next_size(arg);
        cr_offset_allocation a;
        uint64_t t0 = lat ? bench_now_ns() : 0;
        int rc = cr_offset_alloc_alloc(alloc, size, &a);
        if (lat) bench_latency_add(lat, bench_now_ns() - t0);
        if (rc != CR_OK) break;
        allocated += size;
        (*ops)++;
    }
    *elapsed_ns = bench_now_ns() - start;
    cr_offset_alloc_destroy(alloc);
    return allocated;
}

static void bench_fill(const char *label, size_fn next_size, uint64_t arg) {
    struct bench_latency lat;
    bench_latency_init(&lat, GIB / KIB + 1u);
    uint64_t ops, elapsed, unused_ops, unused_ns;
    uint64_t seed = rng_state;
    uint64_t allocated = fill_pass(next_size, arg, NULL, &ops, &elapsed);
    rng_state = seed; /* the same sizes for the latency pass */
    fill_pass(next_size, arg, &lat, &unused_ops, &unused_ns);
    char name[64];
    snprintf(name, sizeof(name), "fill %s util=%.4f", label, (double)allocated / (double)GIB);
    bench_report(name, ops, elapsed, &lat);
    bench_latency_free(&lat);
}

/* ---- utilization under churn: fill, then free random objects and allocate
 * random sizes; every failed allocation samples bytes allocated / capacity ---- */

static void bench_churn(uint64_t max_size) {
    enum { LIVE_MAX = 1 << 16 };
    static cr_offset_allocation live[LIVE_MAX];
    uint32_t count = 0;
    cr_offset_alloc *alloc = make(GIB, LIVE_MAX);
    double util_sum = 0, util_min = 1.0;
    uint64_t failures = 0, allocated = 0;
    uint64_t start = bench_now_ns();
    for (uint32_t op = 0; op < CHURN_OPS; op++) {
        uint64_t size = rng_range(KIB, max_size);
        int rc = count < LIVE_MAX ? cr_offset_alloc_alloc(alloc, size, &live[count]) : -1;
        if (rc == CR_OK) {
            allocated += live[count++].size;
            continue;
        }
        double util = (double)allocated / (double)GIB;
        util_sum += util;
        util_min = util < util_min ? util : util_min;
        failures++;
        uint32_t victim = (uint32_t)(rng_next() % count);
        allocated -= live[victim].size;
        cr_offset_alloc_free(alloc, live[victim]);
        live[victim] = live[--count];
    }
    uint64_t elapsed = bench_now_ns() - start;
    printf("# churn 1 KiB-%llu KiB: %llu failures, util at failure mean %.4f min %.4f\n",
           (unsigned long long)(max_size / KIB), (unsigned long long)failures,
           failures ? util_sum / (double)failures : 0.0, util_min);
    char name[64];
    snprintf(name, sizeof(name), "churn random 1K-1M util=%.4f",
             failures ? util_sum / (double)failures : 0.0);
    bench_report(name, CHURN_OPS + failures, elapsed, NULL); /* allocs tried + frees */
    cr_offset_alloc_destroy(alloc);
}

/* A master_sync batch-put phase, as the segment's allocator sees it: 2 M
 * same-size puts in order, then all removed in a shuffled order (64 callers'
 * batches interleave), phase after phase.  The allocator's nodes then span
 * tens of MiB and are recycled in no order, so what a put touches beyond the
 * free range it carves from is a cache miss.  CPU ns per alloc and per free,
 * medians of the phases after the first (which grows the node table). */
static void bench_phases(void) {
    enum { LIVE = 1 << 21, PHASES = 5 };
    static cr_offset_allocation live[LIVE];
    cr_offset_alloc *alloc = make((uint64_t)LIVE * 64 * KIB, LIVE);
    double alloc_ns[PHASES - 1], free_ns[PHASES - 1];
    for (int phase = 0; phase < PHASES; phase++) {
        uint64_t t0 = bench_cpu_ns();
        for (uint32_t i = 0; i < LIVE; i++) {
            int rc = cr_offset_alloc_alloc(alloc, 64 * KIB, &live[i]);
            assert(rc == CR_OK);
            (void)rc;
        }
        uint64_t t1 = bench_cpu_ns();
        double took = (double)(t1 - t0);
        for (uint32_t i = LIVE - 1; i > 0; i--) { /* outside the timed passes */
            uint32_t j = (uint32_t)(rng_next() % (i + 1u));
            cr_offset_allocation t = live[i];
            live[i] = live[j];
            live[j] = t;
        }
        t1 = bench_cpu_ns();
        for (uint32_t i = 0; i < LIVE; i++) cr_offset_alloc_free(alloc, live[i]);
        uint64_t t2 = bench_cpu_ns();
        if (phase == 0) continue;
        alloc_ns[phase - 1] = took / LIVE;
        free_ns[phase - 1] = (double)(t2 - t1) / LIVE;
    }
    printf("# phases: %d x (%d allocs of 64 KiB in order, then all freed, shuffled), "
           "CPU ns per op, median of the last %d: alloc %.1f free %.1f\n",
           PHASES, LIVE, PHASES - 1, bench_median(alloc_ns, PHASES - 1),
           bench_median(free_ns, PHASES - 1));
    cr_offset_alloc_destroy(alloc);
}

int main(void) {
    bench_clock();
    bench_steady();
    bench_fill("uniform 4 KiB", size_fixed, 4 * KIB);
    bench_fill("uniform 64 KiB", size_fixed, 64 * KIB);
    bench_fill("uniform 1 MiB", size_fixed, MIB);
    bench_fill("uniform 1000000 B", size_fixed, 1000000);
    bench_fill("random 1K-1M", size_random, MIB);
    bench_churn(MIB);
    bench_phases();
    return 0;
}
