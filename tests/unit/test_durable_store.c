/* The operation log end to end without threads or files: a store's changes
 * noted by the feed (src/durable/feed.c), framed as a log, replayed into an
 * image and materialized into a second store (recover.c, store_restore.c),
 * which must hold every complete object at the same offsets and none that
 * was removed, and place new objects around them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/store.h"
#include "core/store_restore.h"
#include "crescent/error.h"
#include "durable/durable.h"
#include "durable/feed.h"
#include "durable/files.h"
#include "durable/image.h"

static const struct cr_uuid CLIENT_A = {{1}};
static const struct cr_uuid CLIENT_B = {{2}};

static void note(void *ctx, const struct cr_store_change *ev) {
    cr_durable_feed_note(ctx, ev);
}

static cr_store *make_store(struct cr_durable_feed *feed) {
    cr_store_config cfg;
    cr_store_config_default(&cfg);
    cfg.max_objects = 20000;
    cfg.max_segments = 64;
    cfg.max_allocations_per_segment = 4096;
    struct cr_store_event_sink sink = {note, feed};
    cr_store *s = NULL;
    assert_int_equal(cr_store_create(&cfg, feed != NULL ? &sink : NULL, &s), CR_OK);
    return s;
}

static void mount(cr_store *s, const struct cr_uuid *client, const char *name, uint64_t base) {
    struct cr_store_segment_params p = {.name = name, .base = base, .size = 1 << 20,
                                        .endpoint = "127.0.0.1:9000", .protocol = "tcp"};
    assert_int_equal(cr_store_mount_segment(s, client, &p, 0), CR_OK);
}

static void put(cr_store *s, const char *tenant, const char *key, uint64_t size, uint32_t n,
                uint64_t checksum) {
    struct cr_store_put_params p = {.tenant = tenant, .key = key,
                                    .key_len = (uint32_t)strlen(key), .value_length = size,
                                    .replica_num = n};
    struct cr_store_replica_list list;
    assert_int_equal(cr_store_put_start(s, &CLIENT_A, &p, 0, &list), CR_OK);
    struct cr_store_key k;
    cr_store_key_make(tenant, key, (uint32_t)strlen(key), &k);
    assert_int_equal(cr_store_put_end_k(s, &CLIENT_A, &k, &checksum, 0), CR_OK);
}

/* The feed's round as a log file's bytes, appended to *log. */
static void flush_into(struct cr_durable_feed *feed, cr_store *s, struct cr_buf *log) {
    uint8_t *block;
    size_t len;
    uint64_t last;
    if (cr_durable_feed_flush(feed, s, 0, &block, &len, &last)) {
        cr_buf_append(log, block, len);
        free(block);
    }
}

static cr_store *replay(const struct cr_buf *log, struct cr_durable_recovery *rec) {
    struct cr_durable_image *img = cr_durable_image_create();
    char err[300];
    struct cr_durable_log_scan scan;
    assert_int_equal(cr_durable_log_scan((const uint8_t *)log->data, log->len,
                                         cr_durable_image_apply, img, &scan, err, sizeof(err)),
                     CR_OK);
    assert_int_equal(scan.good_len, log->len);
    cr_store *s = make_store(NULL);
    memset(rec, 0, sizeof(*rec));
    assert_int_equal(cr_durable_materialize(img, s, 1000, rec, err, sizeof(err)), CR_OK);
    cr_durable_image_destroy(img);
    return s;
}

static void assert_same_object(cr_store *a, cr_store *b, const char *tenant, const char *key) {
    struct cr_store_object_view va, vb;
    uint32_t n = (uint32_t)strlen(key);
    assert_int_equal(cr_store_object_find(a, tenant, key, n, 0, &va), CR_OK);
    assert_int_equal(cr_store_object_find(b, tenant, key, n, 1000, &vb), CR_OK);
    assert_true(vb.complete);
    assert_int_equal(va.size_bytes, vb.size_bytes);
    assert_int_equal(va.replicas.count, vb.replicas.count);
    assert_int_equal(va.replicas.has_checksum, vb.replicas.has_checksum);
    assert_int_equal(va.replicas.checksum, vb.replicas.checksum);
    assert_memory_equal(va.owner.b, vb.owner.b, 16);
    for (uint32_t i = 0; i < va.replicas.count; i++) {
        bool matched = false;
        for (uint32_t j = 0; j < vb.replicas.count; j++)
            matched = matched ||
                      (strcmp(va.replicas.replicas[i].segment_name,
                              vb.replicas.replicas[j].segment_name) == 0 &&
                       va.replicas.replicas[i].buffer == vb.replicas.replicas[j].buffer);
        assert_true(matched);
    }
}

static void test_round_trip_through_log(void **unused) {
    (void)unused;
    struct cr_durable_feed feed;
    assert_int_equal(cr_durable_feed_init(&feed, 1, 64, "volatile"), CR_OK);
    cr_store *a = make_store(&feed);
    struct cr_buf log;
    cr_buf_init(&log);
    uint8_t header[CR_DURABLE_LOG_HEADER];
    cr_durable_log_header(header);
    cr_buf_append(&log, header, sizeof(header));

    mount(a, &CLIENT_A, "seg-a", 1ull << 40);
    mount(a, &CLIENT_B, "seg-b", 2ull << 40);
    cr_durable_feed_note_segments(&feed);
    flush_into(&feed, a, &log); /* round 1: the mounts */
    char key[32];
    for (int i = 0; i < 200; i++) {
        snprintf(key, sizeof(key), "key-%d", i);
        put(a, i % 3 == 0 ? "tenant-x" : "default", key, 1000 + (uint64_t)i, i % 2 + 1,
            (uint64_t)i * 7);
        if (i % 17 == 0) flush_into(&feed, a, &log); /* rounds of several calls */
    }
    put(a, "default", "zero", 0, 1, 5); /* a 0-byte object takes 1 byte */
    assert_int_equal(cr_store_remove(a, "default", "key-1", 5, true, 0), CR_OK);
    assert_int_equal(cr_store_remove(a, "tenant-x", "key-3", 5, true, 0), CR_OK);
    flush_into(&feed, a, &log);
    /* Removed and put again in one round: the new object is what counts. */
    assert_int_equal(cr_store_remove(a, "default", "key-2", 5, true, 0), CR_OK);
    put(a, "default", "key-2", 777, 1, 99);
    flush_into(&feed, a, &log);

    struct cr_durable_recovery rec;
    cr_store *b = replay(&log, &rec);
    assert_int_equal(rec.segments, 2);
    assert_int_equal(rec.objects_dropped, 0);
    assert_int_equal(rec.replicas_dropped, 0);
    struct cr_store_stats sa, sb;
    cr_store_get_stats(a, 0, &sa);
    cr_store_get_stats(b, 1000, &sb);
    assert_int_equal(sb.object_count, sa.object_count);
    assert_int_equal(rec.objects, sa.object_count);
    assert_int_equal(sb.used_bytes, sa.used_bytes);
    assert_int_equal(sb.replica_count, sa.replica_count);
    for (int i = 0; i < 200; i++) {
        snprintf(key, sizeof(key), "key-%d", i);
        const char *tenant = i % 3 == 0 ? "tenant-x" : "default";
        struct cr_store_object_view v;
        if (i == 1 || i == 3) {
            assert_int_equal(cr_store_object_find(b, tenant, key, (uint32_t)strlen(key), 0, &v),
                             CR_ERR_OBJECT_NOT_FOUND);
            continue;
        }
        assert_same_object(a, b, tenant, key);
    }
    assert_same_object(a, b, "default", "zero");
    /* New puts in the restored store land around the restored replicas. */
    for (int i = 0; i < 100; i++) {
        snprintf(key, sizeof(key), "new-%d", i);
        struct cr_store_put_params p = {.key = key, .key_len = (uint32_t)strlen(key),
                                        .value_length = 3000, .replica_num = 1};
        struct cr_store_replica_list list;
        assert_int_equal(cr_store_put_start(b, &CLIENT_A, &p, 1000, &list), CR_OK);
    }
    cr_store_get_stats(b, 1000, &sb);
    assert_int_equal(sb.used_bytes, sa.used_bytes + 100 * 3000);
    cr_store_destroy(a);
    cr_store_destroy(b);
    cr_buf_free(&log);
    cr_durable_feed_free(&feed);
}

/* An unmount and RemoveAll reach the replayed store too. */
static void test_unmount_and_remove_all(void **unused) {
    (void)unused;
    struct cr_durable_feed feed;
    assert_int_equal(cr_durable_feed_init(&feed, 1, 64, "volatile"), CR_OK);
    cr_store *a = make_store(&feed);
    struct cr_buf log;
    cr_buf_init(&log);
    uint8_t header[CR_DURABLE_LOG_HEADER];
    cr_durable_log_header(header);
    cr_buf_append(&log, header, sizeof(header));
    mount(a, &CLIENT_A, "seg-a", 1ull << 40);
    mount(a, &CLIENT_B, "seg-b", 2ull << 40);
    cr_durable_feed_note_segments(&feed);
    put(a, "default", "both", 100, 2, 1);
    put(a, "t2", "gone-with-tenant", 100, 1, 1);
    flush_into(&feed, a, &log);
    assert_int_equal(cr_store_remove_all(a, "t2", true, 0), 1);
    assert_int_equal(cr_store_unmount_segment(a, &CLIENT_B, "seg-b", NULL), CR_OK);
    cr_durable_feed_note_segments(&feed);
    flush_into(&feed, a, &log);
    struct cr_durable_recovery rec;
    cr_store *b = replay(&log, &rec);
    assert_int_equal(rec.segments, 1);
    struct cr_store_segment_view sv;
    assert_int_equal(cr_store_segment_find(b, "seg-b", &sv), CR_ERR_SEGMENT_NOT_FOUND);
    assert_same_object(a, b, "default", "both");
    struct cr_store_object_view v;
    assert_int_equal(cr_store_object_find(b, "t2", "gone-with-tenant", 16, 0, &v),
                     CR_ERR_OBJECT_NOT_FOUND);
    cr_store_destroy(a);
    cr_store_destroy(b);
    cr_buf_free(&log);
    cr_durable_feed_free(&feed);
}

/* The volatile segment (crescentd's own, whose memory dies with it) and
 * replicas on it are not logged: objects only there do not come back. */
static void test_volatile_segment_left_out(void **unused) {
    (void)unused;
    struct cr_durable_feed feed;
    assert_int_equal(cr_durable_feed_init(&feed, 1, 64, "volatile"), CR_OK);
    cr_store *a = make_store(&feed);
    struct cr_buf log;
    cr_buf_init(&log);
    uint8_t header[CR_DURABLE_LOG_HEADER];
    cr_durable_log_header(header);
    cr_buf_append(&log, header, sizeof(header));
    mount(a, &CLIENT_A, "seg-a", 1ull << 40);
    mount(a, &CLIENT_B, "volatile", 2ull << 40);
    cr_durable_feed_note_segments(&feed);
    char key[32];
    uint64_t on_a = 0;
    for (int i = 0; i < 60; i++) {
        snprintf(key, sizeof(key), "v-%d", i);
        put(a, "default", key, 100, i % 2 + 1, 1);
        struct cr_store_object_view v;
        assert_int_equal(cr_store_object_find(a, "default", key, (uint32_t)strlen(key), 0, &v),
                         CR_OK);
        for (uint32_t r = 0; r < v.replicas.count; r++)
            on_a += strcmp(v.replicas.replicas[r].segment_name, "seg-a") == 0;
    }
    flush_into(&feed, a, &log);
    struct cr_durable_recovery rec;
    cr_store *b = replay(&log, &rec);
    assert_int_equal(rec.segments, 1);
    assert_int_equal(rec.objects, on_a);
    assert_true(on_a > 30 && on_a < 60); /* 1-replica objects went either way */
    struct cr_store_segment_view sv;
    assert_int_equal(cr_store_segment_find(b, "volatile", &sv), CR_ERR_SEGMENT_NOT_FOUND);
    cr_store_destroy(a);
    cr_store_destroy(b);
    cr_buf_free(&log);
    cr_durable_feed_free(&feed);
}

/* A snapshot taken in slices while the store changes (a fuzzy cut at lsn
 * S0), plus the log after S0, restores the store exactly. */
static void test_snapshot_fuzzy_cut(void **unused) {
    (void)unused;
    struct cr_durable_feed feed;
    assert_int_equal(cr_durable_feed_init(&feed, 1, 64, "volatile"), CR_OK);
    cr_store *a = make_store(&feed);
    struct cr_buf old_log, snap, log;
    cr_buf_init(&old_log);
    cr_buf_init(&snap);
    cr_buf_init(&log);
    uint8_t header[CR_DURABLE_LOG_HEADER];
    cr_durable_log_header(header);
    cr_buf_append(&log, header, sizeof(header));
    mount(a, &CLIENT_A, "seg-a", 1ull << 40);
    mount(a, &CLIENT_B, "seg-b", 2ull << 40);
    cr_durable_feed_note_segments(&feed);
    char key[32];
    for (int i = 0; i < 300; i++) {
        snprintf(key, sizeof(key), "s-%d", i);
        put(a, "default", key, 500, 1, (uint64_t)i);
    }
    flush_into(&feed, a, &old_log); /* before the cut: replaced by the snapshot */
    uint64_t s0 = feed.next_lsn - 1;
    uint8_t snap_header[CR_DURABLE_SNAPSHOT_HEADER];
    cr_durable_snapshot_header(s0, snap_header);
    cr_buf_append(&snap, snap_header, sizeof(snap_header));
    uint64_t count = 0;
    uint32_t cursor = 0;
    cr_durable_feed_snapshot_segments(&feed, a, s0, &snap, &count);
    int round = 0;
    while (!cr_durable_feed_snapshot_objects(&feed, a, 0, s0, &cursor, 40, &snap, &count)) {
        /* Between slices: remove objects on both sides of the cursor, put new
         * ones (some into slots the walk already passed), log the round. */
        snprintf(key, sizeof(key), "s-%d", round * 7);
        (void)cr_store_remove(a, "default", key, (uint32_t)strlen(key), true, 0);
        snprintf(key, sizeof(key), "s-%d", 299 - round * 5);
        (void)cr_store_remove(a, "default", key, (uint32_t)strlen(key), true, 0);
        snprintf(key, sizeof(key), "late-%d", round);
        put(a, "default", key, 700, 2, 1);
        flush_into(&feed, a, &log);
        round++;
    }
    assert_true(round >= 5);
    cr_durable_feed_snapshot_end(&feed, s0, count, &snap);

    struct cr_durable_image *img = cr_durable_image_create();
    char err[300];
    uint64_t lsn = 0;
    assert_int_equal(cr_durable_snapshot_scan((const uint8_t *)snap.data, snap.len,
                                              cr_durable_image_apply, img, &lsn, err,
                                              sizeof(err)),
                     CR_OK);
    assert_int_equal(lsn, s0);
    struct cr_durable_log_scan scan;
    assert_int_equal(cr_durable_log_scan((const uint8_t *)log.data, log.len,
                                         cr_durable_image_apply, img, &scan, err, sizeof(err)),
                     CR_OK);
    assert_true(scan.records > 0);
    cr_store *b = make_store(NULL);
    struct cr_durable_recovery rec = {0};
    assert_int_equal(cr_durable_materialize(img, b, 1000, &rec, err, sizeof(err)), CR_OK);
    struct cr_store_stats sa, sb;
    cr_store_get_stats(a, 0, &sa);
    cr_store_get_stats(b, 1000, &sb);
    assert_int_equal(rec.objects_dropped, 0);
    assert_int_equal(sb.object_count, sa.object_count);
    assert_int_equal(sb.used_bytes, sa.used_bytes);
    uint32_t walk = 0;
    struct cr_store_object_view views[16];
    size_t n;
    while ((n = cr_store_list_objects(a, NULL, NULL, 0, &walk, 16, views)) > 0)
        for (size_t i = 0; i < n; i++) {
            char k[64];
            snprintf(k, sizeof(k), "%.*s", (int)views[i].key_len, views[i].key);
            assert_same_object(a, b, "default", k);
        }
    cr_durable_image_destroy(img);
    cr_store_destroy(a);
    cr_store_destroy(b);
    cr_buf_free(&old_log);
    cr_buf_free(&snap);
    cr_buf_free(&log);
    cr_durable_feed_free(&feed);
}

/* Restore refuses what it cannot place and changes nothing. */
static void test_restore_refusals(void **unused) {
    (void)unused;
    cr_store *s = make_store(NULL);
    mount(s, &CLIENT_A, "seg-a", 1ull << 40);
    struct cr_store_restore_object o = {.tenant = "", .key = "k", .key_len = 1, .size = 4096,
                                        .replica_count = 1};
    o.replicas[0] =
        (struct cr_store_restore_replica){.segment = "seg-a", .offset = 0, .size = 4096};
    uint32_t dropped = 0;
    assert_int_equal(cr_store_restore_object(s, &o, 0, &dropped), CR_OK);
    assert_int_equal(cr_store_restore_object(s, &o, 0, &dropped), CR_ERR_OBJECT_ALREADY_EXISTS);
    o.key = "overlap";
    o.key_len = 7;
    o.replicas[0].offset = 2048; /* inside k's range */
    assert_int_equal(cr_store_restore_object(s, &o, 0, &dropped), CR_ERR_SEGMENT_NOT_FOUND);
    assert_int_equal(dropped, 1);
    o.replicas[0] = (struct cr_store_restore_replica){
        .segment = "no-such-segment", .offset = 8192, .size = 4096};
    assert_int_equal(cr_store_restore_object(s, &o, 0, &dropped), CR_ERR_SEGMENT_NOT_FOUND);
    o.replicas[0] = (struct cr_store_restore_replica){
        .segment = "seg-a", .offset = (1 << 20) - 100, .size = 4096};
    assert_int_equal(cr_store_restore_object(s, &o, 0, &dropped), CR_ERR_SEGMENT_NOT_FOUND);
    struct cr_store_stats st;
    cr_store_get_stats(s, 0, &st);
    assert_int_equal(st.object_count, 1);
    assert_int_equal(st.used_bytes, 4096);
    cr_store_destroy(s);
}

/* A restore maps the slab for the objects it announces in one region
 * (cr_store_restore_reserve); objects beyond it go to chunks allocated one
 * by one after it.  Every object, in each chunk of the region and past it,
 * across removals and new puts, keeps its own key and replica, and the
 * store frees both kinds of chunk (free() of a mapped one aborts). */
static void test_reserved_slab_then_grown(void **unused) {
    (void)unused;
    /* ids 0..8999 in a region of 3 chunks (to id 12287); then 5,000 puts,
     * into the 1,286 ids the removals freed, the region's rest, and a
     * fourth chunk allocated alone (ids 12288..12713) */
    enum { RESTORED = 9000, PUT = 5000 };
    static const char *const segs[3] = {"seg-a", "seg-b", "seg-c"};
    cr_store *s = make_store(NULL);
    for (uint32_t i = 0; i < 3; i++) mount(s, &CLIENT_A, segs[i], (uint64_t)(i + 1) << 40);
    mount(s, &CLIENT_A, "seg-d", 4ull << 40);
    mount(s, &CLIENT_A, "seg-e", 5ull << 40);
    assert_int_equal(cr_store_restore_reserve(s, RESTORED), CR_OK);
    assert_int_equal(cr_store_restore_reserve(s, RESTORED), CR_OK); /* room already there */
    char key[32];
    for (uint32_t i = 0; i < RESTORED; i++) {
        snprintf(key, sizeof(key), "restored-%u", i);
        cr_store_restore_prefetch(s, "", key, (uint32_t)strlen(key)); /* a hint, no change */
        struct cr_store_restore_object o = {.tenant = "", .key = key,
                                            .key_len = (uint32_t)strlen(key), .size = 256,
                                            .has_checksum = true, .checksum = i,
                                            .replica_count = 1};
        o.replicas[0] = (struct cr_store_restore_replica){
            .segment = segs[i % 3], .offset = (uint64_t)(i / 3) * 256, .size = 256};
        uint32_t dropped = 0;
        assert_int_equal(cr_store_restore_object(s, &o, 0, &dropped), CR_OK);
    }
    for (uint32_t i = 0; i < RESTORED; i += 7) { /* freed ids are taken again first */
        snprintf(key, sizeof(key), "restored-%u", i);
        assert_int_equal(cr_store_remove(s, "default", key, (uint32_t)strlen(key), true, 0),
                         CR_OK);
    }
    for (uint32_t i = 0; i < PUT; i++) {
        snprintf(key, sizeof(key), "put-%u", i);
        struct cr_store_put_params p = {.key = key, .key_len = (uint32_t)strlen(key),
                                        .value_length = 100, .replica_num = 1,
                                        .preferred_segment = i % 2 ? "seg-d" : "seg-e"};
        struct cr_store_replica_list list;
        assert_int_equal(cr_store_put_start(s, &CLIENT_A, &p, 0, &list), CR_OK);
    }
    for (uint32_t i = 0; i < RESTORED; i++) {
        snprintf(key, sizeof(key), "restored-%u", i);
        struct cr_store_object_view v;
        int rc = cr_store_object_find(s, "default", key, (uint32_t)strlen(key), 0, &v);
        if (i % 7 == 0) {
            assert_int_equal(rc, CR_ERR_OBJECT_NOT_FOUND);
            continue;
        }
        assert_int_equal(rc, CR_OK);
        assert_int_equal(v.key_len, strlen(key));
        assert_memory_equal(v.key, key, v.key_len);
        assert_int_equal(v.replicas.checksum, i);
        assert_int_equal(v.replicas.replicas[0].buffer,
                         ((uint64_t)(i % 3 + 1) << 40) + (uint64_t)(i / 3) * 256);
    }
    struct cr_store_stats st;
    cr_store_get_stats(s, 0, &st);
    assert_int_equal(st.object_count, RESTORED - (RESTORED + 6) / 7 + PUT);
    cr_store_destroy(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_through_log),
        cmocka_unit_test(test_unmount_and_remove_all),
        cmocka_unit_test(test_volatile_segment_left_out),
        cmocka_unit_test(test_snapshot_fuzzy_cut),
        cmocka_unit_test(test_restore_refusals),
        cmocka_unit_test(test_reserved_slab_then_grown),
    };
    return cmocka_run_group_tests_name("durable_store", tests, NULL, NULL);
}
