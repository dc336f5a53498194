/* Tests for src/core/replay_buffer: count and byte bounds, wrap-around,
 * find-from with clamping, cursors that outlive evictions, references. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/replay_buffer.h"
#include "crescent/error.h"

static cr_replay_buffer *buffer_new(uint32_t max_batches, uint64_t max_bytes) {
    cr_replay_buffer_config config = {.max_batches = max_batches, .max_bytes = max_bytes};
    cr_replay_buffer *buffer = NULL;
    assert_int_equal(cr_replay_buffer_create(&config, &buffer), CR_OK);
    assert_non_null(buffer);
    return buffer;
}

/* A batch of `len` bytes, each byte the low byte of seq (to spot mix-ups). */
static cr_event_batch *batch_new(uint64_t seq, size_t len) {
    uint8_t *bytes = malloc(len + 1);
    assert_non_null(bytes);
    memset(bytes, (int)(seq & 0xff), len);
    cr_event_batch *batch = NULL;
    assert_int_equal(cr_event_batch_create(seq, bytes, len, &batch), CR_OK);
    free(bytes);
    return batch;
}

static void push_seq(cr_replay_buffer *buffer, uint64_t seq, size_t len) {
    assert_int_equal(cr_replay_buffer_push(buffer, batch_new(seq, len)), CR_OK);
}

/* Replays from start_seq and checks the seqs seen, in order, and the clamp. */
static void expect_replay(const cr_replay_buffer *buffer, uint64_t start_seq,
                          const uint64_t *seqs, size_t count, bool clamped) {
    cr_replay_cursor cursor;
    bool was_clamped = !clamped;
    cr_replay_buffer_find_from(buffer, start_seq, &cursor, &was_clamped);
    assert_int_equal(was_clamped, clamped);
    assert_int_equal(cr_replay_cursor_remaining(&cursor), count);
    for (size_t i = 0; i < count; i++) {
        const cr_event_batch *batch = cr_replay_buffer_next(buffer, &cursor);
        assert_non_null(batch);
        assert_int_equal(batch->seq, seqs[i]);
        if (batch->len > 0) assert_int_equal(batch->bytes[0], seqs[i] & 0xff);
    }
    assert_null(cr_replay_buffer_next(buffer, &cursor));
    assert_null(cr_replay_buffer_next(buffer, &cursor)); /* stays done */
    assert_int_equal(cursor.skipped_batches, 0);
}

static void test_defaults_and_empty(void **state) {
    (void)state;
    cr_replay_buffer *buffer = NULL;
    assert_int_equal(cr_replay_buffer_create(NULL, &buffer), CR_OK);
    cr_replay_buffer_stats stats;
    cr_replay_buffer_get_stats(buffer, &stats);
    assert_int_equal(stats.batch_count, 0);
    assert_int_equal(stats.bytes, 0);
    assert_int_equal(stats.pushed_total, 0);
    expect_replay(buffer, 0, NULL, 0, false);
    expect_replay(buffer, 12345, NULL, 0, false);
    /* The default count bound is 10000: push 10001 and the first is gone. */
    for (uint64_t seq = 0; seq <= 10000; seq++) push_seq(buffer, seq, 1);
    cr_replay_buffer_get_stats(buffer, &stats);
    assert_int_equal(stats.batch_count, 10000);
    assert_int_equal(stats.oldest_seq, 1);
    assert_int_equal(stats.newest_seq, 10000);
    assert_int_equal(stats.evicted_total, 1);
    cr_replay_buffer_destroy(buffer);

    cr_replay_buffer_config config = {.max_batches = (1u << 24) + 1};
    assert_int_equal(cr_replay_buffer_create(&config, &buffer), CR_ERR_INVALID_PARAMS);
}

static void test_find_from(void **state) {
    (void)state;
    cr_replay_buffer *buffer = buffer_new(8, 0);
    for (uint64_t seq = 0; seq < 5; seq++) push_seq(buffer, seq, 10);
    expect_replay(buffer, 0, (const uint64_t[]){0, 1, 2, 3, 4}, 5, false);
    expect_replay(buffer, 2, (const uint64_t[]){2, 3, 4}, 3, false);
    expect_replay(buffer, 4, (const uint64_t[]){4}, 1, false);
    expect_replay(buffer, 5, NULL, 0, false);          /* beyond the newest */
    expect_replay(buffer, UINT64_MAX, NULL, 0, false);
    cr_replay_buffer_destroy(buffer);
}

static void test_wrap_around_and_clamp(void **state) {
    (void)state;
    cr_replay_buffer *buffer = buffer_new(4, 0);
    for (uint64_t seq = 0; seq < 10; seq++) push_seq(buffer, seq, 3);
    cr_replay_buffer_stats stats;
    cr_replay_buffer_get_stats(buffer, &stats);
    assert_int_equal(stats.batch_count, 4);
    assert_int_equal(stats.bytes, 12);
    assert_int_equal(stats.oldest_seq, 6);
    assert_int_equal(stats.newest_seq, 9);
    assert_int_equal(stats.evicted_total, 6);
    assert_int_equal(stats.pushed_total, 10);
    expect_replay(buffer, 0, (const uint64_t[]){6, 7, 8, 9}, 4, true);
    expect_replay(buffer, 5, (const uint64_t[]){6, 7, 8, 9}, 4, true);
    expect_replay(buffer, 6, (const uint64_t[]){6, 7, 8, 9}, 4, false);
    expect_replay(buffer, 8, (const uint64_t[]){8, 9}, 2, false);
    expect_replay(buffer, 10, NULL, 0, false);
    /* Keep going around the ring a few more times. */
    for (uint64_t seq = 10; seq < 23; seq++) push_seq(buffer, seq, 3);
    expect_replay(buffer, 0, (const uint64_t[]){19, 20, 21, 22}, 4, true);
    expect_replay(buffer, 21, (const uint64_t[]){21, 22}, 2, false);
    cr_replay_buffer_destroy(buffer);
}

static void test_byte_bound(void **state) {
    (void)state;
    cr_replay_buffer *buffer = buffer_new(100, 100);
    for (uint64_t seq = 0; seq < 3; seq++) push_seq(buffer, seq, 30); /* 90 bytes */
    push_seq(buffer, 3, 40); /* 130 > 100: evicts seq 0, leaving 100 */
    cr_replay_buffer_stats stats;
    cr_replay_buffer_get_stats(buffer, &stats);
    assert_int_equal(stats.bytes, 100);
    assert_int_equal(stats.batch_count, 3);
    expect_replay(buffer, 0, (const uint64_t[]){1, 2, 3}, 3, true);
    push_seq(buffer, 4, 100); /* needs the whole budget: everything else goes */
    cr_replay_buffer_get_stats(buffer, &stats);
    assert_int_equal(stats.batch_count, 1);
    assert_int_equal(stats.bytes, 100);
    assert_int_equal(stats.evicted_total, 4);
    /* A batch larger than the whole budget is refused; nothing changes and
     * the caller still owns its reference. */
    cr_event_batch *huge = batch_new(5, 101);
    assert_int_equal(cr_replay_buffer_push(buffer, huge), CR_ERR_NOMEM);
    assert_int_equal(atomic_load(&huge->refcount), 1);
    cr_event_batch_unref(huge);
    expect_replay(buffer, 0, (const uint64_t[]){4}, 1, true);
    cr_replay_buffer_destroy(buffer);
}

static void test_seq_order_and_clear(void **state) {
    (void)state;
    cr_replay_buffer *buffer = buffer_new(8, 0);
    push_seq(buffer, 0, 1);
    push_seq(buffer, 10, 1);
    push_seq(buffer, 20, 1); /* gaps are allowed */
    cr_event_batch *stale = batch_new(20, 1);
    assert_int_equal(cr_replay_buffer_push(buffer, stale), CR_ERR_INVALID_PARAMS);
    cr_event_batch_unref(stale);
    expect_replay(buffer, 5, (const uint64_t[]){10, 20}, 2, false);
    expect_replay(buffer, 10, (const uint64_t[]){10, 20}, 2, false);
    expect_replay(buffer, 11, (const uint64_t[]){20}, 1, false);
    /* A publisher restart: clear, then seq 0 is accepted again. */
    cr_replay_buffer_clear(buffer);
    cr_replay_buffer_stats stats;
    cr_replay_buffer_get_stats(buffer, &stats);
    assert_int_equal(stats.batch_count, 0);
    assert_int_equal(stats.bytes, 0);
    assert_int_equal(stats.evicted_total, 3);
    push_seq(buffer, 0, 1);
    push_seq(buffer, 1, 1);
    expect_replay(buffer, 0, (const uint64_t[]){0, 1}, 2, false);
    cr_replay_buffer_destroy(buffer);
}

/* A slow session's cursor stays valid while pushes evict under it. */
static void test_cursor_survives_eviction(void **state) {
    (void)state;
    cr_replay_buffer *buffer = buffer_new(4, 0);
    for (uint64_t seq = 0; seq < 4; seq++) push_seq(buffer, seq, 2);
    cr_replay_cursor cursor;
    bool clamped = true;
    cr_replay_buffer_find_from(buffer, 0, &cursor, &clamped);
    assert_false(clamped);
    assert_int_equal(cr_replay_buffer_next(buffer, &cursor)->seq, 0);
    push_seq(buffer, 4, 2); /* evicts 0 (already sent) */
    push_seq(buffer, 5, 2); /* evicts 1, not yet sent... */
    push_seq(buffer, 6, 2); /* ...and 2: the cursor must skip both */
    assert_int_equal(cr_replay_buffer_next(buffer, &cursor)->seq, 3);
    assert_int_equal(cursor.skipped_batches, 2);
    /* Batches pushed after find_from are not part of this replay. */
    assert_null(cr_replay_buffer_next(buffer, &cursor));
    /* A cursor open across a clear ends, counting what it lost. */
    cr_replay_buffer_find_from(buffer, 4, &cursor, &clamped);
    assert_int_equal(cr_replay_cursor_remaining(&cursor), 3);
    cr_replay_buffer_clear(buffer);
    push_seq(buffer, 0, 2);
    assert_null(cr_replay_buffer_next(buffer, &cursor));
    assert_int_equal(cursor.skipped_batches, 3);
    cr_replay_buffer_destroy(buffer);
}

/* The ring holds one reference per batch and drops it on eviction and destroy. */
static void test_references(void **state) {
    (void)state;
    cr_replay_buffer *buffer = buffer_new(2, 0);
    cr_event_batch *kept = batch_new(0, 4);
    cr_event_batch_ref(kept); /* the test's own reference, as the PUB send would hold */
    assert_int_equal(cr_replay_buffer_push(buffer, kept), CR_OK);
    assert_int_equal(atomic_load(&kept->refcount), 2);
    push_seq(buffer, 1, 4);
    push_seq(buffer, 2, 4); /* evicts seq 0: the ring's reference goes */
    assert_int_equal(atomic_load(&kept->refcount), 1);
    assert_int_equal(kept->bytes[0], 0);
    cr_event_batch_unref(kept);
    /* A replay session keeps a batch it is still sending past its eviction. */
    cr_replay_cursor cursor;
    bool clamped = false;
    cr_replay_buffer_find_from(buffer, 0, &cursor, &clamped);
    assert_true(clamped);
    cr_event_batch *sending = cr_event_batch_ref(cr_replay_buffer_next(buffer, &cursor));
    assert_int_equal(sending->seq, 1);
    cr_event_batch *last = batch_new(3, 4);
    cr_event_batch_ref(last);
    assert_int_equal(cr_replay_buffer_push(buffer, last), CR_OK); /* evicts seq 1 */
    assert_int_equal(atomic_load(&sending->refcount), 1);
    assert_int_equal(sending->bytes[3], 1); /* still readable (ASan would object) */
    cr_event_batch_unref(sending);
    cr_replay_buffer_destroy(buffer);
    assert_int_equal(atomic_load(&last->refcount), 1);
    cr_event_batch_unref(last);
    cr_replay_buffer_destroy(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_and_empty),
        cmocka_unit_test(test_find_from),
        cmocka_unit_test(test_wrap_around_and_clamp),
        cmocka_unit_test(test_byte_bound),
        cmocka_unit_test(test_seq_order_and_clear),
        cmocka_unit_test(test_cursor_survives_eviction),
        cmocka_unit_test(test_references),
    };
    return cmocka_run_group_tests_name("replay_buffer", tests, NULL, NULL);
}
