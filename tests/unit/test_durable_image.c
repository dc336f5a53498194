/* The restart path's fast structures (src/durable/image.c, files.c,
 * store_restore.c): the one-pass snapshot load and the body-keeping log
 * scan build the same image as the checking scanners; the arena reuses a
 * removed or replaced entry's room; the restore order lists every object
 * once, each segment's offsets ascending; the snapshot's count hint is
 * exact or 0 and never more than the bytes can hold; the store's key index
 * is sized once for a restore. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <xxhash.h>

#include "core/store.h"
#include "core/store_internal.h"
#include "core/store_restore.h"
#include "crescent/error.h"
#include "durable/files.h"
#include "durable/image.h"
#include "durable/record.h"

static struct cr_durable_record *rec_new(void) {
    struct cr_durable_record *r = calloc(1, sizeof(*r));
    assert_non_null(r);
    return r;
}

static void make_mount(struct cr_durable_record *r, uint64_t lsn, const char *name) {
    memset(r, 0, sizeof(*r));
    r->type = CR_DURABLE_SEGMENT_MOUNT;
    r->lsn = lsn;
    strcpy(r->name, name);
    strcpy(r->endpoint, "127.0.0.1:7000");
    strcpy(r->protocol, "tcp");
    r->base = 1ull << 40;
    r->size = 1ull << 30;
}

/* An object with `replicas` memory replicas, the first on `segment`. */
static void make_put(struct cr_durable_record *r, uint64_t lsn, const char *key,
                     const char *segment, uint64_t offset, uint32_t replicas) {
    memset(r, 0, sizeof(*r));
    r->type = CR_DURABLE_OBJECT_PUT;
    r->lsn = lsn;
    strcpy(r->tenant, "default");
    r->key_len = (uint32_t)strlen(key);
    memcpy(r->key, key, r->key_len);
    r->size = 4096;
    r->replica_count = replicas;
    for (uint32_t i = 0; i < replicas; i++) {
        strcpy(r->replicas[i].segment, i == 0 ? segment : "seg-z");
        r->replicas[i].offset = offset + i;
        r->replicas[i].size = 4096;
    }
}

static void make_remove(struct cr_durable_record *r, uint64_t lsn, const char *key) {
    memset(r, 0, sizeof(*r));
    r->type = CR_DURABLE_OBJECT_REMOVE;
    r->lsn = lsn;
    strcpy(r->tenant, "default");
    r->key_len = (uint32_t)strlen(key);
    memcpy(r->key, key, r->key_len);
}

/* The offset object i has in the snapshot: scattered, not in key order. */
static uint64_t scattered(int i) { return (uint64_t)((i * 7919) % 1000) * 16384; }

static void build_snapshot(struct cr_buf *snap, uint64_t lsn, int objects) {
    struct cr_durable_record *r = rec_new();
    uint8_t header[CR_DURABLE_SNAPSHOT_HEADER];
    cr_durable_snapshot_header(lsn, header);
    cr_buf_init(snap);
    cr_buf_append(snap, header, sizeof(header));
    make_mount(r, lsn, "seg-a");
    assert_int_equal(cr_durable_encode(r, snap), CR_OK);
    for (int i = 0; i < objects; i++) {
        char key[32];
        snprintf(key, sizeof(key), "snap-%d", i);
        make_put(r, lsn, key, i % 3 == 0 ? "seg-b" : "seg-a", scattered(i), 1 + (uint32_t)(i % 2));
        assert_int_equal(cr_durable_encode(r, snap), CR_OK);
    }
    memset(r, 0, sizeof(*r));
    r->type = CR_DURABLE_SNAPSHOT_END;
    r->lsn = lsn;
    r->record_count = (uint64_t)objects + 1;
    assert_int_equal(cr_durable_encode(r, snap), CR_OK);
    free(r);
}

/* A log after the snapshot: removes, moves, new keys. */
static void build_log(struct cr_buf *log, uint64_t lsn) {
    struct cr_durable_record *r = rec_new();
    uint8_t header[CR_DURABLE_LOG_HEADER];
    cr_durable_log_header(header);
    cr_buf_init(log);
    cr_buf_append(log, header, sizeof(header));
    for (int i = 0; i < 300; i++) {
        char key[32];
        snprintf(key, sizeof(key), "snap-%d", i * 3);
        if (i % 3 == 0) make_remove(r, ++lsn, key);
        else if (i % 3 == 1) make_put(r, ++lsn, key, "seg-b", 999 * 16384 + (uint64_t)i, 1);
        else {
            snprintf(key, sizeof(key), "log-%d", i);
            make_put(r, ++lsn, key, "seg-a", 2000 * 16384 + (uint64_t)i, 2);
        }
        assert_int_equal(cr_durable_encode(r, log), CR_OK);
    }
    free(r);
}

static void assert_same_record(const struct cr_durable_record *a,
                               const struct cr_durable_record *b) {
    assert_int_equal(a->type, b->type);
    assert_int_equal(a->lsn, b->lsn);
    assert_string_equal(a->tenant, b->tenant);
    assert_int_equal(a->key_len, b->key_len);
    assert_memory_equal(a->key, b->key, a->key_len);
    assert_int_equal(a->size, b->size);
    assert_int_equal(a->replica_count, b->replica_count);
    for (uint32_t i = 0; i < a->replica_count; i++) {
        assert_string_equal(a->replicas[i].segment, b->replicas[i].segment);
        assert_int_equal(a->replicas[i].offset, b->replicas[i].offset);
    }
}

/* Snapshot + log through the fast path and through the checking scanners:
 * the same objects with the same contents. */
static void test_fast_load_matches_scan(void **unused) {
    (void)unused;
    struct cr_buf snap, log;
    build_snapshot(&snap, 5000, 2000);
    build_log(&log, 5000);
    const uint8_t *s = (const uint8_t *)snap.data, *l = (const uint8_t *)log.data;
    struct cr_durable_image *fast = cr_durable_image_create(), *slow = cr_durable_image_create();
    char err[300];
    uint64_t lsn = 0;
    assert_int_equal(cr_durable_snapshot_count_hint(s, snap.len), 2001);
    cr_durable_image_reserve(fast, cr_durable_snapshot_count_hint(s, snap.len));
    assert_int_equal(cr_durable_snapshot_load(s, snap.len, cr_durable_image_load_body, fast,
                                              &lsn, err, sizeof(err)),
                     CR_OK);
    assert_int_equal(cr_durable_image_load_end(fast, err, sizeof(err)), CR_OK);
    assert_int_equal(lsn, 5000);
    assert_int_equal(cr_durable_snapshot_scan(s, snap.len, cr_durable_image_apply, slow, &lsn,
                                              err, sizeof(err)),
                     CR_OK);
    struct cr_durable_log_scan a, b;
    assert_int_equal(cr_durable_log_scan_bodies(l, log.len, cr_durable_image_apply_body, fast,
                                                &a, err, sizeof(err)),
                     CR_OK);
    assert_int_equal(cr_durable_log_scan(l, log.len, cr_durable_image_apply, slow, &b, err,
                                         sizeof(err)),
                     CR_OK);
    assert_int_equal(a.records, 300);
    assert_int_equal(a.last_lsn, b.last_lsn);
    assert_int_equal(cr_durable_image_objects(fast), 2000 - 100 + 100);
    assert_int_equal(cr_durable_image_objects(fast), cr_durable_image_objects(slow));
    assert_int_equal(cr_durable_image_segments(fast), 1);
    assert_int_equal(cr_durable_image_lsn(fast), cr_durable_image_lsn(slow));
    struct cr_durable_record *x = rec_new(), *y = rec_new();
    uint64_t cursor = 0, n = 0;
    while (cr_durable_image_object_next(slow, &cursor, x)) {
        assert_int_equal(cr_durable_image_object_find(fast, x->tenant, x->key, x->key_len, y),
                         CR_OK);
        assert_same_record(x, y);
        n++;
    }
    assert_int_equal(n, cr_durable_image_objects(fast));
    free(x);
    free(y);
    cr_durable_image_destroy(fast);
    cr_durable_image_destroy(slow);
    cr_buf_free(&snap);
    cr_buf_free(&log);
}

/* The one-pass load refuses what the scan refuses (the caller then throws
 * the image away), and the hint never claims more than the bytes hold. */
static void test_load_refusals_and_hint(void **unused) {
    (void)unused;
    struct cr_buf snap;
    build_snapshot(&snap, 77, 20);
    const uint8_t *d = (const uint8_t *)snap.data;
    char err[300];
    uint64_t lsn;
    for (size_t cut = 0; cut < snap.len; cut++) {
        struct cr_durable_image *img = cr_durable_image_create();
        assert_int_equal(cr_durable_snapshot_load(d, cut, cr_durable_image_apply_body, img, &lsn,
                                                  err, sizeof(err)),
                         CR_ERR_PROTOCOL);
        assert_true(err[0] != '\0');
        assert_true(cr_durable_snapshot_count_hint(d, cut) <= cut / 21);
        cr_durable_image_destroy(img);
    }
    uint8_t *copy = malloc(snap.len);
    for (size_t at = CR_DURABLE_SNAPSHOT_HEADER; at < snap.len; at += 7) {
        memcpy(copy, d, snap.len);
        copy[at] ^= 0x5a;
        struct cr_durable_image *img = cr_durable_image_create();
        assert_int_equal(cr_durable_snapshot_load(copy, snap.len, cr_durable_image_apply_body,
                                                  img, &lsn, err, sizeof(err)),
                         CR_ERR_PROTOCOL);
        cr_durable_image_destroy(img);
    }
    /* An end record claiming far more records than the file can hold. */
    struct cr_buf forged;
    cr_buf_init(&forged);
    struct cr_durable_record *r = rec_new();
    uint8_t header[CR_DURABLE_SNAPSHOT_HEADER];
    cr_durable_snapshot_header(9, header);
    cr_buf_append(&forged, header, sizeof(header));
    r->type = CR_DURABLE_SNAPSHOT_END;
    r->lsn = 9;
    r->record_count = 1ull << 40;
    assert_int_equal(cr_durable_encode(r, &forged), CR_OK);
    assert_true(cr_durable_snapshot_count_hint((const uint8_t *)forged.data, forged.len) <=
                forged.len / 21);
    free(r);
    free(copy);
    cr_buf_free(&forged);
    cr_buf_free(&snap);
}

/* Applies the record through `fn` with the very bytes it encodes to. */
static void apply_encoded(cr_durable_body_fn fn, struct cr_durable_image *img,
                          const struct cr_durable_record *r) {
    struct cr_buf b;
    cr_buf_init(&b);
    assert_int_equal(cr_durable_encode(r, &b), CR_OK);
    char err[200];
    assert_int_equal(fn(img, r, (const uint8_t *)b.data + CR_DURABLE_FRAME_HEADER,
                        (uint32_t)(b.len - CR_DURABLE_FRAME_HEADER), err, sizeof(err)),
                     CR_OK);
    cr_buf_free(&b);
}

/* The snapshot load links objects into the table some records late: a key
 * given twice (near and far apart), a mount between objects and the load's
 * end leave the image cr_durable_image_apply_body leaves, object by object;
 * the restore order lists each object once. */
static void test_load_pipeline_matches_apply(void **unused) {
    (void)unused;
    struct cr_durable_image *loaded = cr_durable_image_create(),
                            *applied = cr_durable_image_create();
    cr_durable_image_reserve(loaded, 64); /* small: the table doubles during the load */
    struct cr_durable_record *r = rec_new();
    char key[32];
    enum { N = 5000 };
    for (int i = 0; i < N; i++) {
        /* i % 7 == 3: the key of object i - 3 again; i % 11 == 5: of i - 500 */
        int k = i % 7 == 3 ? i - 3 : i % 11 == 5 && i >= 500 ? i - 500 : i;
        snprintf(key, sizeof(key), "k%05d", k);
        make_put(r, (uint64_t)i + 1, key, i % 2 ? "seg-a" : "seg-b", (uint64_t)i * 4096,
                 1 + (uint32_t)(i % 3));
        apply_encoded(cr_durable_image_load_body, loaded, r);
        apply_encoded(cr_durable_image_apply_body, applied, r);
        if (i == N / 2) {
            make_mount(r, (uint64_t)i + 1, "seg-mid");
            apply_encoded(cr_durable_image_load_body, loaded, r);
            apply_encoded(cr_durable_image_apply_body, applied, r);
        }
    }
    char err[200];
    assert_int_equal(cr_durable_image_load_end(loaded, err, sizeof(err)), CR_OK);
    assert_int_equal(cr_durable_image_load_end(loaded, err, sizeof(err)), CR_OK); /* again: no-op */
    assert_int_equal(cr_durable_image_objects(loaded), cr_durable_image_objects(applied));
    assert_true(cr_durable_image_objects(loaded) < N);
    assert_int_equal(cr_durable_image_segments(loaded), 1);
    assert_int_equal(cr_durable_image_lsn(loaded), N);
    struct cr_durable_record *y = rec_new();
    uint64_t cursor = 0, n = 0;
    while (cr_durable_image_object_next(applied, &cursor, r)) {
        assert_int_equal(cr_durable_image_object_find(loaded, r->tenant, r->key, r->key_len, y),
                         CR_OK);
        assert_same_record(r, y);
        n++;
    }
    assert_int_equal(n, cr_durable_image_objects(loaded));
    struct cr_durable_image_ref *order;
    uint64_t count;
    assert_int_equal(cr_durable_image_restore_order(loaded, &order, &count), CR_OK);
    assert_int_equal(count, n);
    cr_durable_image_order_free(order, count);
    free(r);
    free(y);
    cr_durable_image_destroy(loaded);
    cr_durable_image_destroy(applied);
}

/* Removed and replaced entries' room is used again: a log that keeps
 * rewriting a working set does not grow the arena. */
static void test_arena_reuse(void **unused) {
    (void)unused;
    struct cr_durable_image *img = cr_durable_image_create();
    struct cr_durable_record *r = rec_new();
    char err[200], key[32];
    enum { N = 3000 };
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof(key), "k%05d", i);
        make_put(r, (uint64_t)i + 1, key, "seg-a", (uint64_t)i * 4096, 2);
        assert_int_equal(cr_durable_image_apply(img, r, err, sizeof(err)), CR_OK);
    }
    uint64_t used = cr_durable_image_arena_bytes(img);
    assert_true(used > 0);
    uint64_t lsn = N;
    for (int round = 0; round < 5; round++) {
        for (int i = 0; i < N; i++) { /* the same keys again, a replica fewer: in place */
            snprintf(key, sizeof(key), "k%05d", i);
            make_put(r, ++lsn, key, "seg-b", (uint64_t)i * 4096, 1);
            assert_int_equal(cr_durable_image_apply(img, r, err, sizeof(err)), CR_OK);
        }
        for (int i = 0; i < N; i++) { /* removed, then other keys of the same length */
            snprintf(key, sizeof(key), "k%05d", i);
            make_remove(r, ++lsn, key);
            assert_int_equal(cr_durable_image_apply(img, r, err, sizeof(err)), CR_OK);
        }
        assert_int_equal(cr_durable_image_objects(img), 0);
        for (int i = 0; i < N; i++) {
            snprintf(key, sizeof(key), "k%05d", i);
            make_put(r, ++lsn, key, "seg-a", (uint64_t)i * 4096, 2);
            assert_int_equal(cr_durable_image_apply(img, r, err, sizeof(err)), CR_OK);
        }
    }
    assert_int_equal(cr_durable_image_arena_bytes(img), used);
    assert_int_equal(cr_durable_image_objects(img), N);
    assert_int_equal(cr_durable_image_object_find(img, "default", "k00042", 6, r), CR_OK);
    assert_int_equal(r->replica_count, 2);
    assert_int_equal(r->replicas[0].offset, 42 * 4096);
    free(r);
    cr_durable_image_destroy(img);
}

/* Every object once, grouped by first segment, offsets ascending. */
static void test_restore_order(void **unused) {
    (void)unused;
    struct cr_buf snap;
    build_snapshot(&snap, 10, 5000);
    struct cr_durable_image *img = cr_durable_image_create();
    char err[300];
    uint64_t lsn;
    assert_int_equal(cr_durable_snapshot_load((const uint8_t *)snap.data, snap.len,
                                              cr_durable_image_apply_body, img, &lsn, err,
                                              sizeof(err)),
                     CR_OK);
    struct cr_durable_image_ref *refs;
    uint64_t n;
    assert_int_equal(cr_durable_image_restore_order(img, &refs, &n), CR_OK);
    assert_int_equal(n, 5000);
    uint8_t *seen = calloc(5000, 1);
    struct cr_durable_record *r = rec_new();
    uint64_t seg_a = XXH3_64bits("seg-a", 5), seg_b = XXH3_64bits("seg-b", 5);
    uint32_t changes = 0;
    for (uint64_t i = 0; i < n; i++) {
        cr_durable_image_ref_decode(&refs[i], r);
        char digits[16] = "";
        memcpy(digits, r->key + 5, r->key_len - 5); /* the key has no NUL */
        int k = atoi(digits);
        assert_true(k >= 0 && k < 5000 && !seen[k]);
        seen[k] = 1;
        assert_int_equal(refs[i].segment, k % 3 == 0 ? seg_b : seg_a);
        assert_int_equal(refs[i].offset, r->replicas[0].offset);
        if (i > 0 && refs[i].segment != refs[i - 1].segment) changes++;
        if (i > 0 && refs[i].segment == refs[i - 1].segment)
            assert_true(refs[i].offset >= refs[i - 1].offset);
    }
    assert_int_equal(changes, 1); /* two segments: one run each */
    cr_durable_image_order_free(refs, n);
    free(seen);
    free(r);
    cr_durable_image_destroy(img);
    cr_buf_free(&snap);
}

/* The key index grows once to hold a restore, and still finds every key. */
static void test_store_reserve(void **unused) {
    (void)unused;
    cr_store_config cfg;
    cr_store_config_default(&cfg);
    cfg.max_objects = 100000;
    cr_store *s;
    assert_int_equal(cr_store_create(&cfg, NULL, &s), CR_OK);
    uint32_t before = s->table_mask + 1;
    assert_int_equal(cr_store_restore_reserve(s, 50000), CR_OK);
    uint32_t after = s->table_mask + 1;
    assert_true(after > before && after >= 100000);
    assert_int_equal(cr_store_restore_reserve(s, 1u << 30), CR_OK); /* capped at max_objects */
    struct cr_store_segment_params p = {.name = "seg", .base = 1ull << 40, .size = 1ull << 32,
                                        .endpoint = "127.0.0.1:1", .protocol = "tcp"};
    struct cr_uuid owner = {{9}};
    assert_int_equal(cr_store_mount_segment(s, &owner, &p, 0), CR_OK);
    after = s->table_mask + 1;
    for (uint32_t i = 0; i < 50000; i++) {
        char key[32];
        struct cr_store_restore_object o = {.tenant = "default", .key = key, .size = 100,
                                            .replica_count = 1};
        o.key_len = (uint32_t)snprintf(key, sizeof(key), "key-%u", i);
        o.replicas[0] = (struct cr_store_restore_replica){
            .segment = "seg", .offset = (uint64_t)i * 4096, .size = cr_store_alloc_bytes(100)};
        uint32_t dropped = 0;
        assert_int_equal(cr_store_restore_object(s, &o, 0, &dropped), CR_OK);
    }
    assert_int_equal(s->table_mask + 1, after); /* no doubling on the way */
    for (uint32_t i = 0; i < 50000; i += 97) {
        char key[32];
        uint32_t len = (uint32_t)snprintf(key, sizeof(key), "key-%u", i);
        assert_int_equal(cr_store_exist_key(s, "default", key, len, 0), CR_OK);
    }
    cr_store_destroy(s);
}

/* A snapshot whose bytes the image borrows (cr_durable_image_borrow): its
 * objects point into those bytes instead of being copied into the arena.
 * The same objects as the copying load, with the log applied on top (its
 * replacements go into the arena), and an arena a fraction of the size. */
static void test_borrowed_load_matches_copied(void **unused) {
    (void)unused;
    struct cr_buf snap, log;
    build_snapshot(&snap, 5000, 2000);
    build_log(&log, 5000);
    const uint8_t *s = (const uint8_t *)snap.data, *l = (const uint8_t *)log.data;
    struct cr_durable_image *lent = cr_durable_image_create(),
                            *copied = cr_durable_image_create();
    char err[300];
    uint64_t lsn = 0;
    cr_durable_image_borrow(lent, s, snap.len);
    struct cr_durable_image *both[2] = {lent, copied};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(cr_durable_snapshot_load(s, snap.len, cr_durable_image_load_body,
                                                  both[i], &lsn, err, sizeof(err)),
                         CR_OK);
        assert_int_equal(cr_durable_image_load_end(both[i], err, sizeof(err)), CR_OK);
    }
    /* Keys and entry headers only: well under half of the copied arena. */
    assert_true(cr_durable_image_arena_bytes(lent) * 2 < cr_durable_image_arena_bytes(copied));
    for (int i = 0; i < 2; i++) {
        struct cr_durable_log_scan scan;
        assert_int_equal(cr_durable_log_scan_bodies(l, log.len, cr_durable_image_apply_body,
                                                    both[i], &scan, err, sizeof(err)),
                         CR_OK);
    }
    assert_int_equal(cr_durable_image_objects(lent), cr_durable_image_objects(copied));
    struct cr_durable_record *x = rec_new(), *y = rec_new();
    uint64_t cursor = 0, n = 0;
    while (cr_durable_image_object_next(copied, &cursor, x)) {
        assert_int_equal(cr_durable_image_object_find(lent, x->tenant, x->key, x->key_len, y),
                         CR_OK);
        assert_same_record(x, y);
        n++;
    }
    assert_int_equal(n, 2000);
    /* The restore order reads the same entries. */
    struct cr_durable_image_ref *ra, *rb;
    uint64_t na, nb;
    assert_int_equal(cr_durable_image_restore_order(lent, &ra, &na), CR_OK);
    assert_int_equal(cr_durable_image_restore_order(copied, &rb, &nb), CR_OK);
    assert_int_equal(na, nb);
    for (uint64_t i = 0; i < na; i++) {
        cr_durable_image_ref_decode(&ra[i], x);
        cr_durable_image_ref_decode(&rb[i], y);
        assert_same_record(x, y);
    }
    cr_durable_image_order_free(ra, na);
    cr_durable_image_order_free(rb, nb);
    free(x);
    free(y);
    cr_durable_image_destroy(lent);
    cr_durable_image_destroy(copied);
    cr_buf_free(&snap);
    cr_buf_free(&log);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fast_load_matches_scan),
        cmocka_unit_test(test_borrowed_load_matches_copied),
        cmocka_unit_test(test_load_refusals_and_hint),
        cmocka_unit_test(test_load_pipeline_matches_apply),
        cmocka_unit_test(test_arena_reuse),
        cmocka_unit_test(test_restore_order),
        cmocka_unit_test(test_store_reserve),
    };
    return cmocka_run_group_tests_name("durable_image", tests, NULL, NULL);
}
