/* Unit tests for the key index a bulk restore builds at once, in home-slot
 * order (store_restore_index.c): every key found as a restore that inserts
 * one by one finds it, a key restored twice keeps its later object, home
 * slots at the table's end wrap to its start, keys that share hash_hi stay
 * apart, and a deferral that runs out of room builds and goes on. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/store.h"
#include "core/store_internal.h" /* the table, to find keys of chosen homes */
#include "core/store_restore.h"
#include "crescent/error.h"

#define OBJ 4096ull
#define SEG_BYTES (64ull << 20) /* 16 Ki objects a segment */
static const struct cr_uuid OWNER = {{1}};

static cr_store *make_store(uint32_t max_objects) {
    cr_store_config cfg;
    cr_store_config_default(&cfg);
    cfg.max_objects = max_objects;
    cfg.max_segments = 4;
    cfg.max_allocations_per_segment = 1u << 16;
    cr_store *s = NULL;
    assert_int_equal(cr_store_create(&cfg, NULL, &s), CR_OK);
    for (uint32_t i = 0; i < 4; i++) {
        char name[16], ep[32];
        snprintf(name, sizeof(name), "seg-%u", i);
        snprintf(ep, sizeof(ep), "10.0.0.%u:7000", i + 1);
        struct cr_store_segment_params p = {name, (uint64_t)(i + 1) << 40, SEG_BYTES, ep, "tcp"};
        assert_int_equal(cr_store_mount_segment(s, &OWNER, &p, 0), CR_OK);
    }
    assert_int_equal(cr_store_restore_begin(s), CR_OK);
    return s;
}

/* Restores (tenant, key) with one replica at slot `at` of segment seg-(at % 4)
 * and `checksum`. */
static void restore(cr_store *s, const char *tenant, const char *key, uint32_t at,
                    uint64_t checksum) {
    struct cr_store_restore_object o = {
        .tenant = tenant, .key = key, .key_len = (uint32_t)strlen(key), .size = OBJ,
        .has_checksum = true, .checksum = checksum, .owner = OWNER, .replica_count = 1};
    char seg[16];
    snprintf(seg, sizeof(seg), "seg-%u", at % 4);
    o.replicas[0] = (struct cr_store_restore_replica){.segment = seg, .offset = (at / 4) * OBJ,
                                                      .size = OBJ};
    uint32_t dropped = 0;
    assert_int_equal(cr_store_restore_object(s, &o, 5, &dropped), CR_OK);
    assert_int_equal(dropped, 0);
}

/* (tenant, key) is found with checksum `checksum` at slot `at`; its id in *id. */
static void assert_found(cr_store *s, const char *tenant, const char *key, uint32_t at,
                         uint64_t checksum, uint32_t *id) {
    struct cr_store_object_view v;
    assert_int_equal(cr_store_object_find(s, tenant, key, (uint32_t)strlen(key), 6, &v), CR_OK);
    assert_int_equal(v.replicas.checksum, checksum);
    assert_int_equal(v.replicas.count, 1);
    char seg[16];
    snprintf(seg, sizeof(seg), "seg-%u", at % 4);
    assert_string_equal(v.replicas.replicas[0].segment_name, seg);
    assert_int_equal(v.replicas.replicas[0].buffer, ((uint64_t)(at % 4 + 1) << 40) + (at / 4) * OBJ);
    if (id != NULL) *id = v.object_id;
}

static void finish(cr_store *s, uint64_t objects) {
    struct cr_store_restore_dropped d;
    assert_int_equal(cr_store_restore_finish(s, &d), CR_OK);
    assert_int_equal(d.objects, 0);
    assert_int_equal(d.replicas, 0);
    struct cr_store_stats st;
    cr_store_get_stats(s, 7, &st);
    assert_int_equal(st.object_count, objects);
    assert_int_equal(st.used_bytes, objects * OBJ);
}

static uint32_t home_of(const cr_store *s, uint16_t tenant, const char *key) {
    return cr_store_home(s, cr_store_key_hash(s, tenant, key, (uint32_t)strlen(key)));
}

/* ---- tests ------------------------------------------------------------------ */

#define MANY 40000u

static void test_same_as_one_by_one(void **unused) {
    (void)unused;
    cr_store *a = make_store(1u << 17), *b = make_store(1u << 17);
    assert_int_equal(cr_store_restore_reserve(a, MANY), CR_OK);
    assert_int_equal(cr_store_restore_reserve(b, MANY), CR_OK);
    assert_int_equal(cr_store_restore_index_defer(b, MANY / 2), CR_OK); /* the notes grow */
    assert_true(cr_store_restore_index_deferred(b));
    assert_false(cr_store_restore_index_deferred(a));
    char key[48];
    for (uint32_t i = 0; i < MANY; i++) {
        /* Short and long (not inline) keys, two tenants. */
        snprintf(key, sizeof(key), i % 3 ? "k%u" : "a-key-longer-than-thirty-two-bytes-%u", i);
        restore(a, i % 5 ? "" : "t1", key, i, i * 7 + 1);
        restore(b, i % 5 ? "" : "t1", key, i, i * 7 + 1);
    }
    /* Deferred: nothing in the index yet. */
    struct cr_store_object_view v;
    for (uint32_t i = 0; i <= b->table_mask; i++) assert_int_equal(b->table[i].id_plus1, 0);
    assert_int_equal(cr_store_restore_index_build(b), 0);
    assert_false(cr_store_restore_index_deferred(b));
    assert_int_equal(cr_store_restore_index_build(b), 0); /* nothing deferred: a no-op */
    for (uint32_t i = 0; i < MANY; i++) {
        snprintf(key, sizeof(key), i % 3 ? "k%u" : "a-key-longer-than-thirty-two-bytes-%u", i);
        uint32_t ida, idb;
        assert_found(a, i % 5 ? "" : "t1", key, i, i * 7 + 1, &ida);
        assert_found(b, i % 5 ? "" : "t1", key, i, i * 7 + 1, &idb);
        assert_int_equal(ida, idb);
    }
    assert_int_equal(cr_store_object_find(b, NULL, "k0", 2, 6, &v), CR_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(cr_store_object_find(b, "t1", "k1", 2, 6, &v), CR_ERR_OBJECT_NOT_FOUND);
    /* The same slots, each in a probe run from its home (the two orders
     * may place a run's members differently). */
    uint64_t used_a = 0, used_b = 0;
    for (uint32_t i = 0; i <= b->table_mask; i++) {
        used_a += a->table[i].id_plus1 != 0;
        used_b += b->table[i].id_plus1 != 0;
    }
    assert_int_equal(used_a, MANY);
    assert_int_equal(used_b, MANY);
    finish(a, MANY);
    finish(b, MANY);
    /* The index works on: a removal and a put of the same key. */
    assert_int_equal(cr_store_remove(b, NULL, "k1", 2, true, 8), CR_OK);
    assert_int_equal(cr_store_object_find(b, NULL, "k1", 2, 9, &v), CR_ERR_OBJECT_NOT_FOUND);
    assert_found(b, NULL, "k2", 2, 15, NULL);
    cr_store_destroy(a);
    cr_store_destroy(b);
}

static void test_key_twice_later_wins(void **unused) {
    (void)unused;
    cr_store *s = make_store(4096);
    /* Two in the index before the deferral (the sort then has scratch of
     * its own: the table is not empty), one of them restored again. */
    restore(s, "", "pre", 1004, 1);
    restore(s, "", "pre2", 1005, 2);
    assert_int_equal(cr_store_restore_index_defer(s, 16), CR_OK);
    restore(s, "", "dup", 0, 100);
    char key[16];
    for (uint32_t i = 1; i < 1000; i++) {
        snprintf(key, sizeof(key), "o%u", i);
        restore(s, "", key, i, i);
    }
    restore(s, "", "dup", 1000, 101);
    restore(s, "t1", "dup", 1001, 200); /* another tenant: another key */
    restore(s, "", "dup", 1002, 102);   /* the last: the one kept */
    restore(s, "", "o5", 1003, 55);
    restore(s, "", "pre", 1006, 3);
    assert_int_equal(cr_store_restore_index_build(s), 4);
    assert_found(s, NULL, "pre", 1006, 3, NULL);
    assert_found(s, NULL, "pre2", 1005, 2, NULL);
    assert_found(s, NULL, "dup", 1002, 102, NULL);
    assert_found(s, "t1", "dup", 1001, 200, NULL);
    assert_found(s, NULL, "o5", 1003, 55, NULL);
    assert_found(s, NULL, "o6", 6, 6, NULL);
    /* 999 + 4 objects, the dropped ones' ranges unclaimed: no overlap. */
    finish(s, 1003);
    cr_store_destroy(s);
}

/* Keys whose homes are the table's last slots: their probes wrap to slot
 * 0, where keys of home 0 were written first. */
static void test_wrap_around(void **unused) {
    (void)unused;
    cr_store *s = make_store(4096);
    assert_int_equal(cr_store_restore_reserve(s, 1000), CR_OK);
    uint32_t slots = s->table_mask + 1;
    char end_keys[12][16], start_keys[4][16];
    uint32_t n_end = 0, n_start = 0;
    char key[16];
    for (uint32_t i = 0; n_end < 12 || n_start < 4; i++) {
        snprintf(key, sizeof(key), "w%u", i);
        uint32_t h = home_of(s, 0, key);
        if (h == slots - 1 && n_end < 12) memcpy(end_keys[n_end++], key, sizeof(key));
        else if (h == 0 && n_start < 4) memcpy(start_keys[n_start++], key, sizeof(key));
    }
    assert_int_equal(cr_store_restore_index_defer(s, 0), CR_OK);
    for (uint32_t i = 0; i < 12; i++) restore(s, "", end_keys[i], i, i);
    for (uint32_t i = 0; i < 4; i++) restore(s, "", start_keys[i], 12 + i, 12 + i);
    restore(s, "", end_keys[11], 16, 99); /* a wrapped key twice */
    assert_int_equal(cr_store_restore_index_build(s), 1);
    for (uint32_t i = 0; i < 11; i++) assert_found(s, NULL, end_keys[i], i, i, NULL);
    assert_found(s, NULL, end_keys[11], 16, 99, NULL);
    for (uint32_t i = 0; i < 4; i++) assert_found(s, NULL, start_keys[i], 12 + i, 12 + i, NULL);
    /* 12 keys of the last slot: 11 wrapped past the end, behind the 4 of
     * home 0 (slots 0..14 taken, 15 free). */
    assert_int_not_equal(s->table[slots - 1].id_plus1, 0);
    for (uint32_t i = 0; i < 15; i++) assert_int_not_equal(s->table[i].id_plus1, 0);
    assert_int_equal(s->table[15].id_plus1, 0);
    finish(s, 16);
    /* Removals across the wrap keep the others found. */
    assert_int_equal(cr_store_remove(s, NULL, end_keys[0], (uint32_t)strlen(end_keys[0]), true, 8),
                     CR_OK);
    for (uint32_t i = 1; i < 11; i++) assert_found(s, NULL, end_keys[i], i, i, NULL);
    for (uint32_t i = 0; i < 4; i++) assert_found(s, NULL, start_keys[i], 12 + i, 12 + i, NULL);
    cr_store_destroy(s);
}

struct hashed {
    uint32_t hi, i;
};

static int by_hi(const void *a, const void *b) {
    const struct hashed *x = a, *y = b;
    return x->hi != y->hi ? (x->hi < y->hi ? -1 : 1) : (x->i < y->i ? -1 : x->i > y->i);
}

/* Distinct keys of one hash_hi (so one home, one filter): told apart by
 * their bytes, neither replacing the other. */
static void test_hash_hi_collisions(void **unused) {
    (void)unused;
    cr_store *s = make_store(4096);
    enum { CANDIDATES = 400000 };
    struct hashed *h = malloc(CANDIDATES * sizeof(*h));
    assert_non_null(h);
    char key[16];
    for (uint32_t i = 0; i < CANDIDATES; i++) {
        snprintf(key, sizeof(key), "c%u", i);
        h[i] = (struct hashed){(uint32_t)(cr_store_key_hash(s, 0, key, (uint32_t)strlen(key)) >> 32),
                               i};
    }
    qsort(h, CANDIDATES, sizeof(*h), by_hi);
    uint32_t pairs[16][2], n = 0;
    for (uint32_t i = 1; i < CANDIDATES && n < 16; i++)
        if (h[i].hi == h[i - 1].hi) {
            pairs[n][0] = h[i - 1].i;
            pairs[n][1] = h[i].i;
            n++, i++;
        }
    free(h);
    assert_true(n >= 3); /* about 18 expected among 400 k keys of 32-bit hash_hi */
    assert_int_equal(cr_store_restore_index_defer(s, 0), CR_OK);
    for (uint32_t p = 0; p < n; p++)
        for (uint32_t k = 0; k < 2; k++) {
            snprintf(key, sizeof(key), "c%u", pairs[p][k]);
            restore(s, "", key, p * 2 + k, pairs[p][k]);
        }
    snprintf(key, sizeof(key), "c%u", pairs[0][0]);
    restore(s, "", key, 2 * n, 5); /* and one of them twice */
    assert_int_equal(cr_store_restore_index_build(s), 1);
    for (uint32_t p = 0; p < n; p++)
        for (uint32_t k = 0; k < 2; k++) {
            snprintf(key, sizeof(key), "c%u", pairs[p][k]);
            if (p == 0 && k == 0) assert_found(s, NULL, key, 2 * n, 5, NULL);
            else assert_found(s, NULL, key, p * 2 + k, pairs[p][k], NULL);
        }
    finish(s, 2 * n);
    cr_store_destroy(s);
}

/* max_objects reached by a key restored twice: the index is built (the
 * earlier freed) and the restore goes on without deferring. */
static void test_no_room_builds(void **unused) {
    (void)unused;
    cr_store *s = make_store(16);
    assert_int_equal(cr_store_restore_index_defer(s, 4), CR_OK);
    char key[16];
    for (uint32_t i = 0; i < 15; i++) {
        snprintf(key, sizeof(key), "n%u", i);
        restore(s, "", key, i, i);
    }
    restore(s, "", "n3", 15, 33);
    assert_true(cr_store_restore_index_deferred(s));
    restore(s, "", "n15", 16, 15); /* the slab is full: built, then restored */
    assert_false(cr_store_restore_index_deferred(s));
    assert_found(s, NULL, "n3", 15, 33, NULL);
    assert_found(s, NULL, "n15", 16, 15, NULL);
    /* Directly now: a key restored again is refused as outside deferral. */
    struct cr_store_restore_object o = {.tenant = "", .key = "n1", .key_len = 2, .size = OBJ,
                                        .owner = OWNER, .replica_count = 1,
                                        .replicas = {{.segment = "seg-1", .size = OBJ,
                                                      .offset = 100 * OBJ}}};
    uint32_t dropped = 0;
    assert_int_equal(cr_store_restore_object(s, &o, 5, &dropped), CR_ERR_OBJECT_ALREADY_EXISTS);
    finish(s, 16);
    cr_store_destroy(s);
}

/* An abort, or a finish, with the index still deferred: built first, so
 * that every object is found and freed; a store destroyed deferred leaks
 * nothing (ASan). */
static void test_abort_and_finish_deferred(void **unused) {
    (void)unused;
    cr_store *s = make_store(1024);
    assert_int_equal(cr_store_restore_index_defer(s, 4), CR_OK);
    restore(s, "", "x", 0, 1);
    restore(s, "", "x", 1, 2);
    restore(s, "t1", "y", 2, 3);
    cr_store_restore_abort(s);
    struct cr_store_stats st;
    cr_store_get_stats(s, 7, &st);
    assert_int_equal(st.object_count, 0);
    assert_false(cr_store_restore_index_deferred(s));
    assert_int_equal(cr_store_restore_index_defer(s, 4), CR_ERR_INVALID_PARAMS); /* no bulk */
    assert_int_equal(cr_store_restore_begin(s), CR_OK);
    assert_int_equal(cr_store_restore_index_defer(s, 4), CR_OK);
    restore(s, "", "x", 0, 1);
    restore(s, "", "x", 1, 2);
    finish(s, 1); /* the finish builds it */
    assert_found(s, NULL, "x", 1, 2, NULL);
    cr_store_destroy(s);
    s = make_store(1024);
    assert_int_equal(cr_store_restore_index_defer(s, 4), CR_OK);
    restore(s, "", "z", 0, 1);
    cr_store_destroy(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_as_one_by_one),
        cmocka_unit_test(test_key_twice_later_wins),
        cmocka_unit_test(test_wrap_around),
        cmocka_unit_test(test_hash_hi_collisions),
        cmocka_unit_test(test_no_room_builds),
        cmocka_unit_test(test_abort_and_finish_deferred),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
