/* Unit tests for src/core/offset_alloc.c: size-class encoding, merging,
 * exhaustion, bounds, and a randomized check against a reference model. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/offset_alloc.h"
#include "crescent/error.h"

#define CLASS_COUNT 496u
#define KIB (UINT64_C(1) << 10)
#define MIB (UINT64_C(1) << 20)
#define GIB (UINT64_C(1) << 30)
#define TIB (UINT64_C(1) << 40)

/* ---- helpers ---- */

static cr_offset_alloc *make(uint64_t size_bytes, uint32_t max_allocations) {
    cr_offset_alloc *alloc = NULL;
    assert_int_equal(cr_offset_alloc_create(size_bytes, max_allocations, &alloc), CR_OK);
    assert_non_null(alloc);
    return alloc;
}

static cr_offset_allocation must_alloc(cr_offset_alloc *alloc, uint64_t size_bytes) {
    cr_offset_allocation a;
    assert_int_equal(cr_offset_alloc_alloc(alloc, size_bytes, &a), CR_OK);
    assert_int_equal(a.size, size_bytes);
    return a;
}

static cr_offset_alloc_stats stats_of(const cr_offset_alloc *alloc) {
    cr_offset_alloc_stats s;
    cr_offset_alloc_get_stats(alloc, &s);
    return s;
}

static void assert_empty(const cr_offset_alloc *alloc, uint64_t capacity) {
    cr_offset_alloc_stats s = stats_of(alloc);
    assert_int_equal(s.capacity_bytes, capacity);
    assert_int_equal(s.free_bytes, capacity);
    assert_int_equal(s.largest_free_bytes, capacity);
    assert_int_equal(s.allocation_count, 0);
}

/* xorshift64*: deterministic, so a failure reproduces. */
static uint64_t rng_next(uint64_t *state) {
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * UINT64_C(2685821657736338717);
}

static uint64_t rng_range(uint64_t *state, uint64_t lo, uint64_t hi) {
    return lo + rng_next(state) % (hi - lo + 1u);
}

/* ---- size classes ---- */

static void test_size_class_round_trip(void **state) {
    (void)state;
    for (uint32_t c = 0; c < CLASS_COUNT; c++) {
        uint64_t bytes = cr_offset_alloc_size_class_bytes(c);
        assert_int_equal(cr_offset_alloc_size_class_floor(bytes), c);
        assert_int_equal(cr_offset_alloc_size_class_ceil(bytes), c);
        if (c > 0) assert_true(bytes > cr_offset_alloc_size_class_bytes(c - 1u));
    }
    assert_int_equal(cr_offset_alloc_size_class_bytes(CLASS_COUNT - 1u), UINT64_C(15) << 60);
    assert_int_equal(cr_offset_alloc_size_class_floor(UINT64_MAX), CLASS_COUNT - 1u);
    assert_int_equal(cr_offset_alloc_size_class_ceil(UINT64_MAX), CLASS_COUNT);
    assert_int_equal(cr_offset_alloc_size_class_floor(0), 0);
    assert_int_equal(cr_offset_alloc_size_class_bytes(8), 8);
    assert_int_equal(cr_offset_alloc_size_class_bytes(16), 16);
    assert_int_equal(cr_offset_alloc_size_class_bytes(17), 18);
}

/* floor(v) brackets v from below, ceil(v) from above, and both are monotone. */
static void check_bracket(uint64_t v) {
    uint32_t lo = cr_offset_alloc_size_class_floor(v);
    uint32_t hi = cr_offset_alloc_size_class_ceil(v);
    assert_true(cr_offset_alloc_size_class_bytes(lo) <= v);
    if (lo + 1u < CLASS_COUNT) assert_true(cr_offset_alloc_size_class_bytes(lo + 1u) > v);
    assert_true(hi == lo || hi == lo + 1u);
    if (hi < CLASS_COUNT) assert_true(cr_offset_alloc_size_class_bytes(hi) >= v);
    if (v < UINT64_MAX) {
        assert_true(cr_offset_alloc_size_class_floor(v + 1u) >= lo);
        assert_true(cr_offset_alloc_size_class_ceil(v + 1u) >= hi);
    }
}

static void test_size_class_monotonic(void **state) {
    (void)state;
    for (uint64_t v = 0; v < 70000; v++) check_bracket(v);
    for (uint32_t bit = 3; bit < 64; bit++) {
        uint64_t p = UINT64_C(1) << bit;
        check_bracket(p - 1u);
        check_bracket(p);
        check_bracket(p + 1u);
    }
    uint64_t rng = 0x5eed;
    for (int i = 0; i < 200000; i++) check_bracket(rng_next(&rng) >> (rng_next(&rng) % 64));
    /* Neighbouring classes are at most 12.5% apart: bounds rounding waste. */
    for (uint32_t c = 8; c + 1u < CLASS_COUNT; c++) {
        uint64_t b = cr_offset_alloc_size_class_bytes(c);
        assert_true(cr_offset_alloc_size_class_bytes(c + 1u) - b <= b / 8u);
    }
}

/* ---- parameters ---- */

static void test_create_invalid_params(void **state) {
    (void)state;
    cr_offset_alloc *alloc = (cr_offset_alloc *)&alloc; /* must stay untouched */
    cr_offset_alloc *before = alloc;
    assert_int_equal(cr_offset_alloc_create(0, 16, &alloc), CR_ERR_INVALID_PARAMS);
    assert_int_equal(cr_offset_alloc_create(MIB, 0, &alloc), CR_ERR_INVALID_PARAMS);
    assert_int_equal(cr_offset_alloc_create(MIB, (1u << 30) + 1u, &alloc),
                     CR_ERR_INVALID_PARAMS);
    assert_int_equal(cr_offset_alloc_create(MIB, UINT32_MAX, &alloc), CR_ERR_INVALID_PARAMS);
    assert_ptr_equal(alloc, before);
    cr_offset_alloc_destroy(NULL);
}

static void test_alloc_zero_is_invalid(void **state) {
    (void)state;
    cr_offset_alloc *alloc = make(MIB, 4);
    cr_offset_allocation a = {.offset = 77, .size = 88, .node = 99};
    assert_int_equal(cr_offset_alloc_alloc(alloc, 0, &a), CR_ERR_INVALID_PARAMS);
    assert_int_equal(a.offset, 77);
    assert_int_equal(a.size, 88);
    assert_int_equal(a.node, 99);
    assert_empty(alloc, MIB);
    cr_offset_alloc_destroy(alloc);
}

static void test_fresh_stats(void **state) {
    (void)state;
    cr_offset_alloc *alloc = make(1000003, 1);
    assert_empty(alloc, 1000003);
    /* The whole odd-sized segment is one request, via the fallback probe. */
    cr_offset_allocation a = must_alloc(alloc, 1000003);
    assert_int_equal(a.offset, 0);
    cr_offset_alloc_stats s = stats_of(alloc);
    assert_int_equal(s.free_bytes, 0);
    assert_int_equal(s.largest_free_bytes, 0);
    assert_int_equal(s.allocation_count, 1);
    cr_offset_alloc_free(alloc, a);
    assert_empty(alloc, 1000003);
    cr_offset_alloc_destroy(alloc);
}

/* ---- allocate / free ---- */

static void test_alloc_all_free_all(void **state) {
    (void)state;
    enum { COUNT = 256 };
    cr_offset_alloc *alloc = make(COUNT * 4 * KIB, COUNT);
    cr_offset_allocation all[COUNT];
    for (int i = 0; i < COUNT; i++) {
        all[i] = must_alloc(alloc, 4 * KIB);
        assert_int_equal(all[i].offset, (uint64_t)i * 4 * KIB); /* carved low to high */
    }
    cr_offset_alloc_stats s = stats_of(alloc);
    assert_int_equal(s.free_bytes, 0);
    assert_int_equal(s.allocation_count, COUNT);
    uint64_t rng = 42;
    for (int i = COUNT - 1; i > 0; i--) { /* free in a shuffled order */
        int j = (int)(rng_next(&rng) % (uint64_t)(i + 1));
        cr_offset_allocation t = all[i];
        all[i] = all[j];
        all[j] = t;
    }
    for (int i = 0; i < COUNT; i++) cr_offset_alloc_free(alloc, all[i]);
    assert_empty(alloc, COUNT * 4 * KIB);
    must_alloc(alloc, COUNT * 4 * KIB); /* really one range again */
    cr_offset_alloc_destroy(alloc);
}

static void test_alloc_all_free_all_odd_sizes(void **state) {
    (void)state;
    enum { COUNT = 100 };
    const uint64_t capacity = 123457;
    cr_offset_alloc *alloc = make(capacity, COUNT + 1);
    cr_offset_allocation all[COUNT + 1];
    uint64_t used = 0;
    for (int i = 0; i < COUNT; i++) {
        all[i] = must_alloc(alloc, 1000u + (uint64_t)i * 3u);
        used += all[i].size;
    }
    all[COUNT] = must_alloc(alloc, capacity - used); /* the odd tail, exactly */
    assert_int_equal(stats_of(alloc).free_bytes, 0);
    for (int i = 0; i <= COUNT; i += 2) cr_offset_alloc_free(alloc, all[i]);
    for (int i = 1; i <= COUNT; i += 2) cr_offset_alloc_free(alloc, all[i]);
    assert_empty(alloc, capacity);
    cr_offset_alloc_destroy(alloc);
}

/* Four 1000-byte blocks fill the segment so no free tail hides merges. */
static cr_offset_alloc *four_blocks(cr_offset_allocation blocks[4]) {
    cr_offset_alloc *alloc = make(4000, 8);
    for (int i = 0; i < 4; i++) blocks[i] = must_alloc(alloc, 1000);
    assert_int_equal(stats_of(alloc).largest_free_bytes, 0);
    return alloc;
}

static void test_merge_with_prev(void **state) {
    (void)state;
    cr_offset_allocation b[4];
    cr_offset_alloc *alloc = four_blocks(b);
    cr_offset_alloc_free(alloc, b[1]);
    assert_int_equal(stats_of(alloc).largest_free_bytes, 1000);
    cr_offset_alloc_free(alloc, b[2]); /* its prev (b[1]) is free */
    assert_int_equal(stats_of(alloc).largest_free_bytes, 2000);
    cr_offset_allocation m = must_alloc(alloc, 2000);
    assert_int_equal(m.offset, 1000);
    cr_offset_alloc_destroy(alloc);
}

static void test_merge_with_next(void **state) {
    (void)state;
    cr_offset_allocation b[4];
    cr_offset_alloc *alloc = four_blocks(b);
    cr_offset_alloc_free(alloc, b[2]);
    cr_offset_alloc_free(alloc, b[1]); /* its next (b[2]) is free */
    assert_int_equal(stats_of(alloc).largest_free_bytes, 2000);
    cr_offset_allocation m = must_alloc(alloc, 2000);
    assert_int_equal(m.offset, 1000);
    cr_offset_alloc_destroy(alloc);
}

static void test_merge_with_both(void **state) {
    (void)state;
    cr_offset_allocation b[4];
    cr_offset_alloc *alloc = four_blocks(b);
    cr_offset_alloc_free(alloc, b[0]);
    cr_offset_alloc_free(alloc, b[2]);
    assert_int_equal(stats_of(alloc).largest_free_bytes, 1000);
    assert_int_equal(stats_of(alloc).free_bytes, 2000);
    cr_offset_alloc_free(alloc, b[1]); /* bridges b[0] and b[2] */
    assert_int_equal(stats_of(alloc).largest_free_bytes, 3000);
    cr_offset_allocation m = must_alloc(alloc, 3000);
    assert_int_equal(m.offset, 0);
    cr_offset_alloc_free(alloc, m);
    cr_offset_alloc_free(alloc, b[3]); /* and the last edge of the segment */
    assert_empty(alloc, 4000);
    cr_offset_alloc_destroy(alloc);
}

static void assert_stats_equal(cr_offset_alloc_stats a, cr_offset_alloc_stats b) {
    assert_int_equal(a.capacity_bytes, b.capacity_bytes);
    assert_int_equal(a.free_bytes, b.free_bytes);
    assert_int_equal(a.largest_free_bytes, b.largest_free_bytes);
    assert_int_equal(a.allocation_count, b.allocation_count);
}

static void test_exhaustion_changes_nothing(void **state) {
    (void)state;
    cr_offset_alloc *alloc = make(64 * KIB, 64);
    cr_offset_allocation b[16];
    for (int i = 0; i < 16; i++) b[i] = must_alloc(alloc, 4 * KIB);
    cr_offset_alloc_stats before = stats_of(alloc);
    cr_offset_allocation out = {.offset = 1, .size = 2, .node = 3};
    assert_int_equal(cr_offset_alloc_alloc(alloc, 1, &out), CR_ERR_NO_AVAILABLE_HANDLE);
    assert_int_equal(cr_offset_alloc_alloc(alloc, UINT64_MAX, &out), CR_ERR_NO_AVAILABLE_HANDLE);
    assert_stats_equal(before, stats_of(alloc));
    assert_int_equal(out.offset, 1);
    assert_int_equal(out.size, 2);
    assert_int_equal(out.node, 3);
    /* Fragmented: 8 KiB free in total but no range holds it. */
    cr_offset_alloc_free(alloc, b[3]);
    cr_offset_alloc_free(alloc, b[9]);
    before = stats_of(alloc);
    assert_int_equal(before.free_bytes, 8 * KIB);
    assert_int_equal(before.largest_free_bytes, 4 * KIB);
    assert_int_equal(cr_offset_alloc_alloc(alloc, 4 * KIB + 1, &out), CR_ERR_NO_AVAILABLE_HANDLE);
    assert_stats_equal(before, stats_of(alloc));
    cr_offset_allocation again = must_alloc(alloc, 4 * KIB);
    assert_true(again.offset == 3 * 4 * KIB || again.offset == 9 * 4 * KIB);
    cr_offset_alloc_destroy(alloc);
}

static void test_max_allocations_bound(void **state) {
    (void)state;
    cr_offset_alloc *alloc = make(GIB, 3);
    cr_offset_allocation a[3];
    for (int i = 0; i < 3; i++) a[i] = must_alloc(alloc, 100);
    cr_offset_allocation out;
    cr_offset_alloc_stats before = stats_of(alloc);
    assert_int_equal(cr_offset_alloc_alloc(alloc, 100, &out), CR_ERR_NO_AVAILABLE_HANDLE);
    assert_stats_equal(before, stats_of(alloc));
    cr_offset_alloc_free(alloc, a[1]); /* leaves a hole: max free ranges in play */
    a[1] = must_alloc(alloc, 50);
    assert_int_equal(a[1].offset, 100);
    assert_int_equal(cr_offset_alloc_alloc(alloc, 1, &out), CR_ERR_NO_AVAILABLE_HANDLE);
    for (int i = 0; i < 3; i++) cr_offset_alloc_free(alloc, a[i]);
    assert_empty(alloc, GIB);
    cr_offset_alloc_destroy(alloc);
}

static void test_huge_segment(void **state) {
    (void)state;
    cr_offset_alloc *alloc = make(TIB, 8);
    cr_offset_allocation a = must_alloc(alloc, 512 * GIB);
    cr_offset_allocation b = must_alloc(alloc, 256 * GIB + 3);
    cr_offset_allocation c = must_alloc(alloc, TIB - a.size - b.size);
    assert_int_equal(a.offset, 0);
    assert_int_equal(b.offset, 512 * GIB);
    assert_int_equal(c.offset, 768 * GIB + 3);
    assert_int_equal(c.offset + c.size, TIB);
    cr_offset_allocation out;
    assert_int_equal(cr_offset_alloc_alloc(alloc, 1, &out), CR_ERR_NO_AVAILABLE_HANDLE);
    cr_offset_alloc_free(alloc, b);
    cr_offset_alloc_free(alloc, a);
    assert_int_equal(stats_of(alloc).largest_free_bytes, 768 * GIB + 3);
    cr_offset_alloc_free(alloc, c);
    assert_empty(alloc, TIB);
    cr_offset_alloc_destroy(alloc);
}

static void test_whole_uint64_range(void **state) {
    (void)state;
    cr_offset_alloc *alloc = make(UINT64_MAX, 4);
    assert_empty(alloc, UINT64_MAX);
    cr_offset_allocation a = must_alloc(alloc, UINT64_MAX - 1u);
    cr_offset_allocation b = must_alloc(alloc, 1);
    assert_int_equal(b.offset, UINT64_MAX - 1u);
    cr_offset_allocation out;
    assert_int_equal(cr_offset_alloc_alloc(alloc, 1, &out), CR_ERR_NO_AVAILABLE_HANDLE);
    cr_offset_alloc_free(alloc, a);
    cr_offset_alloc_free(alloc, b);
    assert_empty(alloc, UINT64_MAX);
    cr_offset_alloc_destroy(alloc);
}

/* ---- randomized check against a reference model ---- */

enum { MODEL_MAX = 600, MODEL_OPS = 100000 };

struct model {
    cr_offset_allocation live[MODEL_MAX];
    uint32_t count;
    uint64_t used_bytes;
    uint64_t capacity;
};

static int by_offset(const void *a, const void *b) {
    const cr_offset_allocation *x = a, *y = b;
    return (x->offset > y->offset) - (x->offset < y->offset);
}

/* Sorts the model and returns its largest gap, checking no overlap on the way. */
static uint64_t model_largest_gap(struct model *m) {
    qsort(m->live, m->count, sizeof(m->live[0]), by_offset);
    uint64_t cursor = 0, largest = 0;
    for (uint32_t i = 0; i < m->count; i++) {
        assert_true(m->live[i].offset >= cursor);
        if (m->live[i].offset - cursor > largest) largest = m->live[i].offset - cursor;
        cursor = m->live[i].offset + m->live[i].size;
    }
    assert_true(cursor <= m->capacity);
    return m->capacity - cursor > largest ? m->capacity - cursor : largest;
}

static void model_add(struct model *m, cr_offset_allocation a) {
    assert_true(a.offset < m->capacity && a.size <= m->capacity - a.offset);
    for (uint32_t i = 0; i < m->count; i++) {
        const cr_offset_allocation *o = &m->live[i];
        assert_true(a.offset + a.size <= o->offset || o->offset + o->size <= a.offset);
        assert_int_not_equal(a.node, o->node);
    }
    assert_true(m->count < MODEL_MAX);
    m->live[m->count++] = a;
    m->used_bytes += a.size;
}

static cr_offset_allocation model_take(struct model *m, uint32_t i) {
    cr_offset_allocation a = m->live[i];
    m->live[i] = m->live[--m->count];
    m->used_bytes -= a.size;
    return a;
}

static uint64_t random_request(uint64_t *rng) {
    uint64_t kind = rng_next(rng) % 10u;
    if (kind < 3) return rng_range(rng, 1, 64);
    if (kind < 9) return rng_range(rng, 65, 64 * KIB);
    return rng_range(rng, 64 * KIB, 2 * MIB);
}

/* The allocator's promises: exact accounting, and largest_free_bytes is a
 * request that succeeds and lies within one class of the true largest gap. */
static void model_check(cr_offset_alloc *alloc, struct model *m) {
    cr_offset_alloc_stats s = stats_of(alloc);
    uint64_t gap = model_largest_gap(m);
    assert_int_equal(s.free_bytes, m->capacity - m->used_bytes);
    assert_int_equal(s.allocation_count, m->count);
    assert_true(s.largest_free_bytes <= gap);
    if (gap > 0) {
        uint64_t floor = cr_offset_alloc_size_class_bytes(cr_offset_alloc_size_class_floor(gap));
        assert_true(s.largest_free_bytes >= floor);
    }
    if (s.largest_free_bytes > 0 && m->count < MODEL_MAX) {
        cr_offset_allocation a = must_alloc(alloc, s.largest_free_bytes);
        cr_offset_alloc_free(alloc, a);
    }
}

static void model_step(cr_offset_alloc *alloc, struct model *m, uint64_t *rng) {
    bool do_alloc = m->count == 0 || rng_next(rng) % 100u < 55u;
    if (!do_alloc) {
        cr_offset_alloc_free(alloc, model_take(m, (uint32_t)(rng_next(rng) % m->count)));
        return;
    }
    uint64_t size = random_request(rng);
    cr_offset_alloc_stats before = stats_of(alloc);
    cr_offset_allocation a;
    int rc = cr_offset_alloc_alloc(alloc, size, &a);
    if (rc == CR_OK) {
        assert_int_equal(a.size, size);
        model_add(m, a);
        return;
    }
    assert_int_equal(rc, CR_ERR_NO_AVAILABLE_HANDLE);
    assert_true(m->count == MODEL_MAX || size > before.largest_free_bytes);
    assert_stats_equal(before, stats_of(alloc));
}

static void test_randomized_model_check(void **state) {
    (void)state;
    static struct model m; /* large: keep it off the stack */
    memset(&m, 0, sizeof(m));
    m.capacity = 64 * MIB + 12345; /* tight enough that requests fail often */
    cr_offset_alloc *alloc = make(m.capacity, MODEL_MAX);
    uint64_t rng = UINT64_C(0x00c0ffee12345678);
    for (int op = 0; op < MODEL_OPS; op++) {
        model_step(alloc, &m, &rng);
        if (op % 1000 == 999) model_check(alloc, &m);
        assert_int_equal(stats_of(alloc).free_bytes, m.capacity - m.used_bytes);
    }
    model_check(alloc, &m);
    while (m.count > 0) cr_offset_alloc_free(alloc, model_take(&m, m.count - 1u));
    assert_empty(alloc, m.capacity);
    cr_offset_alloc_destroy(alloc);
}

/* Claims put allocations back at given offsets (a restart): ascending,
 * out of order, refused on overlap, then freed and merged like any other. */
static void test_claim(void **state) {
    (void)state;
    cr_offset_alloc *alloc = make(1 * MIB, 64);
    cr_offset_allocation a[8];
    uint64_t offsets[] = {0, 4 * KIB, 64 * KIB, 512 * KIB, 1 * MIB - 4 * KIB};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(cr_offset_alloc_claim(alloc, offsets[i], 4 * KIB, &a[i]), CR_OK);
        assert_int_equal(a[i].offset, offsets[i]);
        assert_int_equal(a[i].size, 4 * KIB);
    }
    cr_offset_alloc_stats st;
    cr_offset_alloc_get_stats(alloc, &st);
    assert_int_equal(st.allocation_count, 5);
    assert_int_equal(st.free_bytes, 1 * MIB - 20 * KIB);
    /* Overlaps, out of range and size 0 are refused, changing nothing. */
    cr_offset_allocation x;
    assert_int_equal(cr_offset_alloc_claim(alloc, 2 * KIB, 4 * KIB, &x),
                     CR_ERR_NO_AVAILABLE_HANDLE);
    assert_int_equal(cr_offset_alloc_claim(alloc, 60 * KIB, 8 * KIB, &x),
                     CR_ERR_NO_AVAILABLE_HANDLE);
    assert_int_equal(cr_offset_alloc_claim(alloc, 1 * MIB - 1, 2, &x), CR_ERR_NO_AVAILABLE_HANDLE);
    assert_int_equal(cr_offset_alloc_claim(alloc, 8 * KIB, 0, &x), CR_ERR_INVALID_PARAMS);
    cr_offset_alloc_get_stats(alloc, &st);
    assert_int_equal(st.allocation_count, 5);
    /* Out of order, into a gap: exactly the gap's middle. */
    assert_int_equal(cr_offset_alloc_claim(alloc, 100 * KIB, 10 * KIB, &a[5]), CR_OK);
    assert_int_equal(cr_offset_alloc_claim(alloc, 8 * KIB, 56 * KIB, &a[6]), CR_OK);
    assert_int_equal(a[6].offset, 8 * KIB);
    /* Ordinary allocations never overlap a claim. */
    cr_offset_allocation b;
    assert_int_equal(cr_offset_alloc_alloc(alloc, 300 * KIB, &b), CR_OK);
    assert_true(b.offset >= 110 * KIB && b.offset + b.size <= 1 * MIB - 4 * KIB);
    assert_true(b.offset + b.size <= 512 * KIB || b.offset >= 516 * KIB);
    cr_offset_alloc_free(alloc, b);
    for (int i = 0; i < 7; i++) cr_offset_alloc_free(alloc, a[i]);
    cr_offset_alloc_get_stats(alloc, &st);
    assert_int_equal(st.allocation_count, 0);
    assert_int_equal(st.free_bytes, 1 * MIB);
    assert_int_equal(st.largest_free_bytes, 1 * MIB); /* all merged back into one */
    /* After frees (recycled nodes), a claim still finds its range. */
    assert_int_equal(cr_offset_alloc_claim(alloc, 4 * KIB, 4 * KIB, &x), CR_OK);
    cr_offset_alloc_destroy(alloc);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_size_class_round_trip),
        cmocka_unit_test(test_size_class_monotonic),
        cmocka_unit_test(test_create_invalid_params),
        cmocka_unit_test(test_alloc_zero_is_invalid),
        cmocka_unit_test(test_fresh_stats),
        cmocka_unit_test(test_alloc_all_free_all),
        cmocka_unit_test(test_alloc_all_free_all_odd_sizes),
        cmocka_unit_test(test_merge_with_prev),
        cmocka_unit_test(test_merge_with_next),
        cmocka_unit_test(test_merge_with_both),
        cmocka_unit_test(test_exhaustion_changes_nothing),
        cmocka_unit_test(test_max_allocations_bound),
        cmocka_unit_test(test_huge_segment),
        cmocka_unit_test(test_whole_uint64_range),
        cmocka_unit_test(test_randomized_model_check),
        cmocka_unit_test(test_claim),
    };
    return cmocka_run_group_tests_name("offset_alloc", tests, NULL, NULL);
}
