/* Stores restored the same way, to finish in different ways and compare
 * (test_store_restore_finish.c, test_durable_finish.c).  Header-only; the
 * includer includes cmocka first. */
#ifndef CRESCENT_TESTS_RESTORE_FINISH_FIXTURE_H
#define CRESCENT_TESTS_RESTORE_FINISH_FIXTURE_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/offset_alloc.h"
#include "core/store.h"
#include "core/store_internal.h" /* to compare two stores field by field */
#include "core/store_restore.h"
#include "crescent/error.h"

#define FX_SEGMENTS 4u
#define FX_OBJ 4096ull
#define FX_SLOTS 4096ull /* a segment's object-sized slots */
static const struct cr_uuid FX_OWNER = {{1}};

/* A store with FX_SEGMENTS segments mounted, in a bulk restore. */
static cr_store *fx_store(void) {
    cr_store_config cfg;
    cr_store_config_default(&cfg);
    cfg.max_objects = 1u << 16;
    cfg.max_segments = FX_SEGMENTS;
    cfg.max_allocations_per_segment = 1u << 16;
    cr_store *s = NULL;
    assert_int_equal(cr_store_create(&cfg, NULL, &s), CR_OK);
    for (uint32_t i = 0; i < FX_SEGMENTS; i++) {
        char name[16], ep[32];
        snprintf(name, sizeof(name), "seg-%u", i);
        snprintf(ep, sizeof(ep), "10.0.0.%u:7000", i + 1);
        struct cr_store_segment_params p = {name, (uint64_t)(i + 1) << 40, FX_SLOTS * FX_OBJ, ep,
                                            "tcp"};
        assert_int_equal(cr_store_mount_segment(s, &FX_OWNER, &p, 0), CR_OK);
    }
    assert_int_equal(cr_store_restore_begin(s), CR_OK);
    return s;
}

/* Restores key `i` of `tenant` with replicas on segments segs[0..n) at the
 * slots slots[0..n) (of FX_OBJ bytes, or 2 * FX_OBJ when `wide`). */
static void fx_restore(cr_store *s, const char *tenant, uint32_t i, const uint32_t *segs,
                       const uint64_t *slots, uint32_t n, int wide) {
    char key[32];
    snprintf(key, sizeof(key), "key-%u", i);
    struct cr_store_restore_object o = {.tenant = tenant, .key = key,
                                        .key_len = (uint32_t)strlen(key),
                                        .size = wide ? 2 * FX_OBJ : FX_OBJ,
                                        .owner = FX_OWNER, .replica_count = n};
    char names[CR_STORE_REPLICAS_MAX][16];
    for (uint32_t r = 0; r < n; r++) {
        snprintf(names[r], sizeof(names[r]), "seg-%u", segs[r]);
        o.replicas[r] = (struct cr_store_restore_replica){
            .segment = names[r], .offset = slots[r] * FX_OBJ, .size = wide ? 2 * FX_OBJ : FX_OBJ};
    }
    uint32_t dropped = 0;
    assert_int_equal(cr_store_restore_object(s, &o, 5, &dropped), CR_OK);
    assert_int_equal(dropped, 0);
}

static uint64_t fx_rand(uint64_t *state) { /* xorshift64: the same objects every run */
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *state = x;
}

/* `objects` objects (seed decides), in random slot order, on 1 to 3
 * segments each; about one in `clash` takes a slot another object has on
 * that segment (or, wide, overlaps the next), so some claims fail.  And
 * four objects made to lose replicas: one loses both of its two (on
 * segments 0 and 3, in different ranges of any split), one loses its first
 * and last of three (the end finds the last moved), one loses one of two,
 * one loses two of four (segments 0 and 2) and keeps two. */
static cr_store *fx_restored(uint64_t seed, uint32_t objects, uint32_t clash) {
    cr_store *s = fx_store();
    uint64_t st = seed;
    uint32_t i = 0;
    /* Ones that win their slots (restored first: ties go to the lower slot). */
    fx_restore(s, "t1", i++, (uint32_t[]){0, 3}, (uint64_t[]){FX_SLOTS - 1, FX_SLOTS - 1}, 2, 0);
    fx_restore(s, "t1", i++, (uint32_t[]){1, 2}, (uint64_t[]){FX_SLOTS - 2, FX_SLOTS - 2}, 2, 0);
    for (; i < objects; i++) {
        uint32_t n = 1 + (uint32_t)(fx_rand(&st) % 3);
        uint32_t first = (uint32_t)(fx_rand(&st) % FX_SEGMENTS);
        uint32_t segs[3];
        uint64_t slots[3];
        for (uint32_t r = 0; r < n; r++) {
            segs[r] = (first + r) % FX_SEGMENTS;
            /* Slots below FX_SLOTS - 8: the made-to-lose ones own the top. */
            slots[r] = fx_rand(&st) % (FX_SLOTS - 8);
            if (clash == 0 || fx_rand(&st) % clash != 0) {
                /* A slot of its own: slot i spread over the segment. */
                slots[r] = ((uint64_t)i * 2654435761u) % (FX_SLOTS - 8);
            }
        }
        fx_restore(s, i % 2 ? "t1" : "t2", i, segs, slots, n, clash != 0 && i % 97 == 0);
    }
    /* The losers, after the winners: each loses the slots above. */
    fx_restore(s, "t2", i++, (uint32_t[]){0, 3}, (uint64_t[]){FX_SLOTS - 1, FX_SLOTS - 1}, 2, 0);
    fx_restore(s, "t2", i++, (uint32_t[]){1, 0, 2},
               (uint64_t[]){FX_SLOTS - 2, FX_SLOTS - 3, FX_SLOTS - 2}, 3, 0);
    fx_restore(s, "t2", i++, (uint32_t[]){1, 2}, (uint64_t[]){FX_SLOTS - 4, FX_SLOTS - 2}, 2, 0);
    /* Loses its first two (segments 0 and 2) and keeps the last two: the
     * order of the drops decides the order of the two kept. */
    fx_restore(s, "t2", i++, (uint32_t[]){0, 2, 1, 3},
               (uint64_t[]){FX_SLOTS - 1, FX_SLOTS - 2, FX_SLOTS - 5, FX_SLOTS - 5}, 4, 0);
    return s;
}

/* a and b hold the same objects, replicas (segment, offset, size, node),
 * used bytes per segment and in all, counts and tenant charges. */
static void fx_assert_same(const cr_store *a, const cr_store *b) {
    assert_int_equal(a->slab_high, b->slab_high);
    assert_int_equal(a->object_count, b->object_count);
    assert_int_equal(a->used_bytes, b->used_bytes);
    assert_int_equal(a->replica_count, b->replica_count);
    for (uint32_t id = 0; id < a->slab_high; id++) {
        const struct cr_store_obj *x = cr_store_obj_at(a, id), *y = cr_store_obj_at(b, id);
        assert_int_equal(x->state, y->state);
        if (x->state != CR_OBJ_COMPLETE) continue;
        assert_int_equal(x->replica_count, y->replica_count);
        for (uint32_t r = 0; r < x->replica_count; r++) {
            const struct cr_store_replica *p = &cr_store_reps(x)[r], *q = &cr_store_reps(y)[r];
            assert_int_equal(p->segment, q->segment);
            assert_int_equal(p->offset, q->offset);
            assert_int_equal(p->size, q->size);
            assert_int_equal(p->node, q->node);
            assert_int_not_equal(p->node, CR_STORE_NODE_UNCLAIMED);
        }
    }
    uint64_t used = 0;
    for (uint32_t g = 0; g < FX_SEGMENTS; g++) {
        assert_int_equal(a->segments[g].used_bytes, b->segments[g].used_bytes);
        used += a->segments[g].used_bytes;
    }
    assert_int_equal(used, a->used_bytes);
    for (uint32_t t = 0; t < a->tenant_high; t++)
        assert_int_equal(a->tenants[t].charged, b->tenants[t].charged);
}

/* A new allocation never overlaps a restored replica: every segment's
 * free space, allocated to the last byte, misses every replica's slots;
 * and used + free is the segment. */
static void fx_assert_no_overlap(cr_store *s) {
    for (uint32_t g = 0; g < FX_SEGMENTS; g++) {
        static uint8_t taken[FX_SLOTS];
        memset(taken, 0, sizeof(taken));
        for (uint32_t id = 0; id < s->slab_high; id++) {
            const struct cr_store_obj *o = cr_store_obj_at(s, id);
            if (o->state != CR_OBJ_COMPLETE) continue;
            for (uint32_t r = 0; r < o->replica_count; r++) {
                const struct cr_store_replica *p = &cr_store_reps(o)[r];
                if (p->segment != g) continue;
                for (uint64_t k = p->offset / FX_OBJ; k < (p->offset + p->size) / FX_OBJ; k++) {
                    assert_int_equal(taken[k], 0); /* two replicas never share a byte */
                    taken[k] = 1;
                }
            }
        }
        struct cr_store_segment *seg = &s->segments[g];
        cr_offset_allocation a;
        uint64_t granted = 0;
        while (cr_offset_alloc_alloc(seg->alloc, FX_OBJ, &a) == CR_OK) {
            assert_int_equal(a.offset % FX_OBJ, 0);
            granted += a.size;
            for (uint64_t k = a.offset / FX_OBJ; k < (a.offset + a.size + FX_OBJ - 1) / FX_OBJ; k++)
                assert_int_equal(taken[k], 0);
        }
        assert_int_equal(seg->used_bytes + granted, seg->size);
    }
}

#endif
