/* Whole-table admin calls against the store's thread (#28 item 9): how long
 * one call holds the thread that serves every RPC, whole and in slices.
 *
 *   - RemoveAll(force) of every object: cr_store_remove_all in one call,
 *     against cr_store_remove_all_begin/_step with the segments actor's
 *     slice (8192 slots);
 *   - GET /api/v1/objects?prefix=nomatch: cr_store_list_objects over the
 *     whole table, against _slice calls of the HTTP route's 65536 slots;
 *   - the stats' census (cr_store_lease_census_step) over the whole table
 *     in steps of 262144 slots (segments' step once a second before) and
 *     of 16384 (CENSUS_STEP_SLOTS, sixteen times a second now).
 * For the sliced forms the longest slice is what another RPC can wait
 * behind (the actor serves its queue between slices); the total is the
 * call's own latency.  Both are the thread's CPU time (on a shared machine
 * wall time mostly measures preemption), and the wall time of the longest
 * hold is printed beside.  Rounds alternate whole and sliced, the table
 * refilled before each RemoveAll; medians over the rounds.
 *
 * Usage: store_slices [objects [rounds]]   (default 5000000, 3) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "core/store.h"
#include "crescent/error.h"
#include "store_setup.h"

#define REMOVE_SLICE_SLOTS 8192u  /* segments.c REMOVE_ALL_SLICE_SLOTS */
#define LIST_SLICE_SLOTS 65536u   /* store_routes.c OBJECTS_SLICE_SLOTS */
#define CENSUS_OLD_SLOTS 262144u  /* segments' census step before */
#define CENSUS_STEP_SLOTS 16384u  /* segments_internal.h CENSUS_STEP_SLOTS */
#define ROUNDS_MAX 16

static void fill(cr_store *store, uint32_t n) {
    char key[KEY_BYTES];
    struct cr_store_replica_list out;
    for (uint32_t i = 0; i < n; i++) {
        int len = snprintf(key, sizeof(key), "model/blk/%012u", i);
        struct cr_store_put_params p = {.key = key, .key_len = (uint32_t)len,
                                        .value_length = OBJECT_BYTES, .replica_num = 1};
        if (cr_store_put_start(store, &CLIENT, &p, 1, &out) != CR_OK) abort();
        if (cr_store_put_end(store, &CLIENT, NULL, key, (uint32_t)len, 1) != CR_OK) abort();
    }
}

struct hold {
    uint64_t total_ns, longest_ns; /* thread CPU time */
    uint64_t longest_wall_ns;
    uint32_t slices;
};

static void hold_add(struct hold *h, uint64_t cpu_ns, uint64_t wall_ns) {
    if (cpu_ns > h->longest_ns) h->longest_ns = cpu_ns;
    if (wall_ns > h->longest_wall_ns) h->longest_wall_ns = wall_ns;
    h->slices++;
}

static struct hold remove_whole(cr_store *store, uint32_t n) {
    struct hold h = {0};
    uint64_t c0 = bench_thread_cpu_ns(), w0 = bench_now_ns();
    if (cr_store_remove_all(store, NULL, true, 2) != n) abort();
    hold_add(&h, bench_thread_cpu_ns() - c0, bench_now_ns() - w0);
    h.total_ns = h.longest_ns;
    return h;
}

static struct hold remove_sliced(cr_store *store, uint32_t n) {
    struct hold h = {0};
    struct cr_store_remove_all_run run;
    uint64_t start = bench_thread_cpu_ns();
    cr_store_remove_all_begin(store, NULL, true, 2, &run);
    for (bool done = false; !done;) {
        uint64_t c0 = bench_thread_cpu_ns(), w0 = bench_now_ns();
        done = cr_store_remove_all_step(store, &run, REMOVE_SLICE_SLOTS, 2);
        hold_add(&h, bench_thread_cpu_ns() - c0, bench_now_ns() - w0);
    }
    h.total_ns = bench_thread_cpu_ns() - start;
    if (run.removed != n) abort();
    return h;
}

static struct hold list_nomatch(cr_store *store, bool sliced) {
    struct hold h = {0};
    struct cr_store_object_view view;
    uint32_t cursor = 0;
    uint64_t start = bench_thread_cpu_ns();
    for (bool done = false; !done;) {
        uint64_t c0 = bench_thread_cpu_ns(), w0 = bench_now_ns();
        size_t found = cr_store_list_objects_slice(store, NULL, "nomatch", 2, &cursor, 1,
                                                   sliced ? LIST_SLICE_SLOTS : UINT32_MAX,
                                                   &view, &done);
        hold_add(&h, bench_thread_cpu_ns() - c0, bench_now_ns() - w0);
        if (found != 0) abort();
    }
    h.total_ns = bench_thread_cpu_ns() - start;
    return h;
}

static struct hold census(cr_store *store, uint32_t slots) {
    struct hold h = {0};
    uint64_t start = bench_thread_cpu_ns();
    for (bool whole = false; !whole;) {
        uint64_t c0 = bench_thread_cpu_ns(), w0 = bench_now_ns();
        whole = cr_store_lease_census_step(store, 2, slots);
        hold_add(&h, bench_thread_cpu_ns() - c0, bench_now_ns() - w0);
    }
    h.total_ns = bench_thread_cpu_ns() - start;
    return h;
}

static uint64_t median(uint64_t *v, int n) {
    qsort(v, (size_t)n, sizeof(*v), bench_u64_compare);
    return v[n / 2];
}

static void report(const char *what, struct hold *h, int rounds) {
    uint64_t total[ROUNDS_MAX], longest[ROUNDS_MAX], wall[ROUNDS_MAX];
    for (int r = 0; r < rounds; r++)
        total[r] = h[r].total_ns, longest[r] = h[r].longest_ns, wall[r] = h[r].longest_wall_ns;
    printf("%-34s cpu total %8.1f ms  longest hold %8.3f ms cpu, %8.3f ms wall  (%u slices; "
           "medians of %d rounds)\n",
           what, (double)median(total, rounds) / 1e6, (double)median(longest, rounds) / 1e6,
           (double)median(wall, rounds) / 1e6, h[0].slices, rounds);
}

int main(int argc, char **argv) {
    uint32_t n = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 5000000u;
    int rounds = argc > 2 ? atoi(argv[2]) : 3;
    if (n == 0 || rounds < 1 || rounds > ROUNDS_MAX) {
        fprintf(stderr, "usage: store_slices [objects [rounds (1-%d)]]\n", ROUNDS_MAX);
        return 2;
    }
    cr_store *store = setup(n);
    struct hold rm_whole[ROUNDS_MAX], rm_sliced[ROUNDS_MAX];
    struct hold ls_whole[ROUNDS_MAX], ls_sliced[ROUNDS_MAX];
    struct hold cs_old[ROUNDS_MAX], cs_step[ROUNDS_MAX];
    for (int r = 0; r < rounds; r++) {
        fill(store, n);
        /* Alternated: the first walk after a fill pays for the cold slab. */
        if (r % 2 == 0) cs_old[r] = census(store, CENSUS_OLD_SLOTS);
        cs_step[r] = census(store, CENSUS_STEP_SLOTS);
        if (r % 2 != 0) cs_old[r] = census(store, CENSUS_OLD_SLOTS);
        ls_whole[r] = list_nomatch(store, false);
        ls_sliced[r] = list_nomatch(store, true);
        rm_whole[r] = remove_whole(store, n);
        fill(store, n);
        rm_sliced[r] = remove_sliced(store, n);
    }
    printf("store_slices: %u objects\n", n);
    report("list prefix=nomatch, whole", ls_whole, rounds);
    report("list prefix=nomatch, 65536 slots", ls_sliced, rounds);
    report("RemoveAll(force), whole", rm_whole, rounds);
    report("RemoveAll(force), 8192 slots", rm_sliced, rounds);
    report("census, 262144 slots a step", cs_old, rounds);
    report("census, 16384 slots a step", cs_step, rounds);
    cr_store_destroy(store);
    return 0;
}
