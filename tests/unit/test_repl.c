/* Replication without threads or sockets: a leader store's rounds (the
 * feed's blocks) streamed as RECORDS frames (src/durable/repl_wire.c),
 * decoded and judged as a standby does, and applied round by round to a
 * second store (src/durable/apply.c), which must then hold every object of
 * the first at the same offsets and none it removed; a record applied twice
 * changes nothing; a torn or damaged frame is never taken; records of a term
 * lower than the highest seen are refused, and so is a gap. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/store.h"
#include "crescent/error.h"
#include "durable/apply.h"
#include "durable/feed.h"
#include "durable/repl_wire.h"

static const struct cr_uuid CLIENT_A = {{1}};

static void note(void *ctx, const struct cr_store_change *ev) { cr_durable_feed_note(ctx, ev); }

static cr_store *make_store(struct cr_durable_feed *feed) {
    cr_store_config cfg;
    cr_store_config_default(&cfg);
    cfg.max_objects = 4096;
    cfg.max_segments = 16;
    cfg.max_allocations_per_segment = 4096;
    struct cr_store_event_sink sink = {note, feed};
    cr_store *s = NULL;
    assert_int_equal(cr_store_create(&cfg, feed != NULL ? &sink : NULL, &s), CR_OK);
    return s;
}

static void put(cr_store *s, const char *key, uint64_t size) {
    struct cr_store_put_params p = {.tenant = "t", .key = key, .key_len = (uint32_t)strlen(key),
                                    .value_length = size, .replica_num = 1};
    struct cr_store_replica_list list;
    assert_int_equal(cr_store_put_start(s, &CLIENT_A, &p, 0, &list), CR_OK);
    struct cr_store_key k;
    cr_store_key_make("t", key, (uint32_t)strlen(key), &k);
    uint64_t sum = 7;
    assert_int_equal(cr_store_put_end_k(s, &CLIENT_A, &k, &sum, 0), CR_OK);
}

/* The feed's round, framed as the leader streams it (term), into *stream. */
static bool round_frame(struct cr_durable_feed *feed, cr_store *s, uint64_t term,
                        struct cr_buf *stream) {
    uint8_t *block;
    size_t len;
    uint64_t last;
    if (!cr_durable_feed_flush(feed, s, 0, &block, &len, &last)) return false;
    assert_int_equal(cr_repl_put_records(stream, CR_REPL_RECORDS, term, last, block, len), CR_OK);
    free(block);
    return true;
}

/* A standby's side: decode, judge, apply.  Returns the verdict of the last
 * frame; *have moves with what was applied. */
static enum cr_repl_verdict take_all(const struct cr_buf *stream, uint64_t highest_term,
                                     uint64_t *have, cr_store *standby) {
    size_t off = 0;
    enum cr_repl_verdict v = CR_REPL_HAVE_ALL;
    char err[256];
    while (off < stream->len) {
        struct cr_repl_frame f;
        size_t used;
        assert_int_equal(cr_repl_decode((const uint8_t *)stream->data + off, stream->len - off,
                                        &f, &used, err, sizeof(err)),
                         CR_REPL_OK);
        size_t skip;
        v = cr_repl_judge(&f, highest_term, *have, &skip, err, sizeof(err));
        if (v == CR_REPL_TAKE) {
            struct cr_durable_apply_counts counts = {0};
            uint64_t last = 0;
            assert_int_equal(cr_durable_apply_block(standby, f.records + skip,
                                                    f.records_len - skip, 0, &counts, &last,
                                                    err, sizeof(err)),
                             CR_OK);
            *have = last;
        } else if (v != CR_REPL_HAVE_ALL) {
            assert_true(err[0] != '\0');
            return v;
        }
        off += used;
    }
    return v;
}

static void assert_same_object(cr_store *a, cr_store *b, const char *key, bool present) {
    struct cr_store_replica_list la, lb;
    int ra = cr_store_get_replica_list(a, "t", key, (uint32_t)strlen(key), 0, &la);
    int rb = cr_store_get_replica_list(b, "t", key, (uint32_t)strlen(key), 0, &lb);
    assert_int_equal(ra, present ? CR_OK : CR_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(rb, ra);
    if (!present) return;
    assert_int_equal(la.count, lb.count);
    assert_int_equal(la.replicas[0].buffer, lb.replicas[0].buffer);
    assert_int_equal(la.replicas[0].size, lb.replicas[0].size);
}

static void test_stream_applied_round_by_round(void **state) {
    (void)state;
    struct cr_durable_feed feed;
    assert_int_equal(cr_durable_feed_init(&feed, 1, 16, NULL), CR_OK);
    cr_store *leader = make_store(&feed), *standby = make_store(NULL);
    struct cr_store_segment_params p = {.name = "seg", .base = 1 << 20, .size = 1 << 20,
                                        .endpoint = "127.0.0.1:9000", .protocol = "tcp"};
    assert_int_equal(cr_store_mount_segment(leader, &CLIENT_A, &p, 0), CR_OK);
    cr_durable_feed_note_segments(&feed);
    struct cr_buf stream;
    cr_buf_init(&stream);
    uint64_t have = 0;
    char key[32];
    for (int round = 0; round < 5; round++) {
        for (int i = 0; i < 20; i++) {
            snprintf(key, sizeof(key), "k%d-%d", round, i);
            put(leader, key, 100 + (uint64_t)i);
        }
        if (round > 0) { /* a removal of an object the standby has */
            snprintf(key, sizeof(key), "k%d-3", round - 1);
            assert_int_equal(cr_store_remove(leader, "t", key, (uint32_t)strlen(key), true, 0),
                             CR_OK);
        }
        assert_true(round_frame(&feed, leader, 1, &stream));
        assert_int_equal(take_all(&stream, 1, &have, standby), CR_REPL_TAKE);
        assert_int_equal(have, feed.next_lsn - 1);
        /* The same frames again (a reconnect's catch-up overlapping): no change. */
        assert_int_equal(take_all(&stream, 1, &have, standby), CR_REPL_HAVE_ALL);
        stream.len = 0;
    }
    for (int round = 0; round < 5; round++)
        for (int i = 0; i < 20; i++) {
            snprintf(key, sizeof(key), "k%d-%d", round, i);
            assert_same_object(leader, standby, key, i != 3 || round == 4);
        }
    /* Applying a record twice through the store itself is idempotent too. */
    snprintf(key, sizeof(key), "k0-0");
    put(leader, "late", 64);
    assert_true(round_frame(&feed, leader, 1, &stream));
    uint64_t again = have;
    assert_int_equal(take_all(&stream, 1, &have, standby), CR_REPL_TAKE);
    struct cr_repl_frame f;
    size_t used, skip;
    char err[256];
    assert_int_equal(cr_repl_decode((const uint8_t *)stream.data, stream.len, &f, &used, err,
                                    sizeof(err)),
                     CR_REPL_OK);
    (void)cr_repl_judge(&f, 1, again, &skip, err, sizeof(err));
    struct cr_durable_apply_counts counts = {0};
    assert_int_equal(cr_durable_apply_block(standby, f.records + skip, f.records_len - skip, 0,
                                            &counts, NULL, err, sizeof(err)),
                     CR_OK);
    assert_same_object(leader, standby, "late", true);
    cr_buf_free(&stream);
    cr_store_destroy(leader);
    cr_store_destroy(standby);
    cr_durable_feed_free(&feed);
}

static void test_stale_term_and_gap_are_refused(void **state) {
    (void)state;
    struct cr_durable_feed feed;
    assert_int_equal(cr_durable_feed_init(&feed, 1, 16, NULL), CR_OK);
    cr_store *leader = make_store(&feed), *standby = make_store(NULL);
    struct cr_store_segment_params p = {.name = "seg", .base = 1 << 20, .size = 1 << 20,
                                        .endpoint = "127.0.0.1:9000", .protocol = "tcp"};
    assert_int_equal(cr_store_mount_segment(leader, &CLIENT_A, &p, 0), CR_OK);
    cr_durable_feed_note_segments(&feed);
    put(leader, "a", 10);
    struct cr_buf stream;
    cr_buf_init(&stream);
    assert_true(round_frame(&feed, leader, 3, &stream));
    uint64_t have = 0;
    /* A standby that has seen term 4 refuses a term-3 leader's records and
     * applies none of them. */
    assert_int_equal(take_all(&stream, 4, &have, standby), CR_REPL_STALE_TERM);
    assert_int_equal(have, 0);
    assert_int_equal(cr_store_mounted_count(standby), 0);
    /* The same records from a standby that has lsn 5 already... of another
     * history: a gap (its next would be 6). */
    have = 0;
    assert_int_equal(take_all(&stream, 3, &have, standby), CR_REPL_TAKE);
    put(leader, "b", 10);
    stream.len = 0;
    assert_true(round_frame(&feed, leader, 3, &stream));
    uint64_t behind = 0; /* a standby that missed the first round */
    cr_store *fresh = make_store(NULL);
    assert_int_equal(take_all(&stream, 3, &behind, fresh), CR_REPL_GAP);
    assert_int_equal(cr_store_mounted_count(fresh), 0);
    cr_buf_free(&stream);
    cr_store_destroy(fresh);
    cr_store_destroy(leader);
    cr_store_destroy(standby);
    cr_durable_feed_free(&feed);
}

static void test_torn_or_damaged_frames_are_never_taken(void **state) {
    (void)state;
    struct cr_durable_record rec = {.type = CR_DURABLE_OBJECT_REMOVE, .lsn = 1, .key_len = 3};
    memcpy(rec.key, "abc", 3);
    snprintf(rec.tenant, sizeof(rec.tenant), "t");
    struct cr_buf records, stream;
    cr_buf_init(&records);
    cr_buf_init(&stream);
    assert_int_equal(cr_durable_encode(&rec, &records), CR_OK);
    rec.lsn = 2;
    assert_int_equal(cr_durable_encode(&rec, &records), CR_OK);
    assert_int_equal(cr_repl_put_records(&stream, CR_REPL_RECORDS, 1, 2,
                                         (const uint8_t *)records.data, records.len),
                     CR_OK);
    struct cr_repl_frame f;
    size_t used;
    char err[256];
    for (size_t cut = 0; cut < stream.len; cut++)
        assert_int_equal(cr_repl_decode((const uint8_t *)stream.data, cut, &f, &used, err,
                                        sizeof(err)),
                         CR_REPL_NEED_MORE);
    assert_int_equal(cr_repl_decode((const uint8_t *)stream.data, stream.len, &f, &used, err,
                                    sizeof(err)),
                     CR_REPL_OK);
    assert_int_equal(f.record_count, 2);
    assert_int_equal(f.first_lsn, 1);
    assert_int_equal(f.last_lsn, 2);
    for (size_t i = 0; i < stream.len; i++) { /* any flipped byte: refused or incomplete */
        stream.data[i] ^= 0x20;
        enum cr_repl_status s = cr_repl_decode((const uint8_t *)stream.data, stream.len, &f,
                                               &used, err, sizeof(err));
        assert_true(s != CR_REPL_OK);
        stream.data[i] ^= 0x20;
    }
    /* lsns that do not increase inside a frame: refused. */
    stream.len = 0;
    assert_int_equal(cr_repl_put_records(&stream, CR_REPL_RECORDS, 1, 2,
                                         (const uint8_t *)records.data + records.len / 2,
                                         records.len / 2),
                     CR_OK);
    cr_buf_append(&stream, "", 0);
    struct cr_buf twice;
    cr_buf_init(&twice);
    cr_buf_append(&twice, records.data + records.len / 2, records.len / 2);
    cr_buf_append(&twice, records.data + records.len / 2, records.len / 2);
    stream.len = 0;
    assert_int_equal(cr_repl_put_records(&stream, CR_REPL_RECORDS, 1, 2,
                                         (const uint8_t *)twice.data, twice.len),
                     CR_OK);
    assert_int_equal(cr_repl_decode((const uint8_t *)stream.data, stream.len, &f, &used, err,
                                    sizeof(err)),
                     CR_REPL_BAD);
    assert_non_null(strstr(err, "increase"));
    cr_buf_free(&twice);
    cr_buf_free(&records);
    cr_buf_free(&stream);
}

static void test_handshake_frames_round_trip(void **state) {
    (void)state;
    struct cr_buf b;
    cr_buf_init(&b);
    assert_int_equal(cr_repl_put_hello(&b, 41, 7), CR_OK);
    assert_int_equal(cr_repl_put_ack(&b, 42), CR_OK);
    assert_int_equal(cr_repl_put_refuse(&b, "not the leader\n"), CR_OK);
    struct cr_repl_frame f;
    size_t used, off = 0;
    char err[256];
    assert_int_equal(cr_repl_decode((const uint8_t *)b.data, b.len, &f, &used, err, sizeof(err)),
                     CR_REPL_OK);
    assert_int_equal(f.kind, CR_REPL_HELLO);
    assert_int_equal(f.lsn, 41);
    assert_int_equal(f.term, 7);
    off += used;
    assert_int_equal(cr_repl_decode((const uint8_t *)b.data + off, b.len - off, &f, &used, err,
                                    sizeof(err)),
                     CR_REPL_OK);
    assert_int_equal(f.kind, CR_REPL_ACK);
    assert_int_equal(f.lsn, 42);
    off += used;
    assert_int_equal(cr_repl_decode((const uint8_t *)b.data + off, b.len - off, &f, &used, err,
                                    sizeof(err)),
                     CR_REPL_OK);
    assert_int_equal(f.kind, CR_REPL_REFUSE);
    assert_string_equal(f.text, "not the leader?"); /* shown in a log line: printable only */
    cr_buf_free(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_applied_round_by_round),
        cmocka_unit_test(test_stale_term_and_gap_are_refused),
        cmocka_unit_test(test_torn_or_damaged_frames_are_never_taken),
        cmocka_unit_test(test_handshake_frames_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
