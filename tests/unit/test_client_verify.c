/* libcrescent's second-thread verification of a batch's same-host reads
 * (src/client/client_verify.c): whatever the helper thread and the reading
 * thread split between them, every published item's hash must be the
 * one-shot XXH3-64 of its bytes when cr_verify_finish returns, items
 * published without bytes must be left alone, and the split must hold for
 * one item, none to hash, and batches big and small.  The helper is
 * detached: each batch's items are checked after finish returns, while the
 * helper may still be exiting (TSan: build.zig's tsan step). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "client/client_verify.h"

#define UNSET 0x5a5a5a5a5a5a5a5aull /* a hash slot never written */

static uint64_t rng = 0x9e3779b97f4a7c15u;

static uint64_t next(void) { /* xorshift */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

/* Publishes `n` items (every `skip_every`-th without bytes; 0: none) of up
 * to `max_len` random bytes, finishes, checks every hash. */
static void run_batch(size_t n, size_t max_len, size_t skip_every) {
    uint8_t **bufs = calloc(n, sizeof(*bufs));
    size_t *lens = calloc(n, sizeof(*lens));
    uint64_t *hashes = calloc(n, sizeof(*hashes));
    assert_true(bufs != NULL && lens != NULL && hashes != NULL);
    struct cr_verify_pipe *pipe = cr_verify_start(n);
    assert_non_null(pipe);
    for (size_t i = 0; i < n; i++) {
        lens[i] = max_len > 0 ? (size_t)(next() % (max_len + 1)) : 0;
        bufs[i] = malloc(lens[i] + 1);
        assert_non_null(bufs[i]);
        for (size_t j = 0; j < lens[i]; j++) bufs[i][j] = (uint8_t)next();
        hashes[i] = UNSET;
        bool skip = skip_every > 0 && i % skip_every == 0;
        (void)cr_verify_keeping_up(pipe, i); /* a hint only: any answer is safe */
        cr_verify_publish(pipe, i, skip ? NULL : bufs[i], lens[i], &hashes[i]);
    }
    cr_verify_finish(pipe);
    for (size_t i = 0; i < n; i++) {
        bool skip = skip_every > 0 && i % skip_every == 0;
        uint64_t want = skip ? UNSET : XXH3_64bits(bufs[i], lens[i]);
        if (hashes[i] != want)
            fail_msg("item %zu of %zu (%zu bytes, %s): hash %016llx, want %016llx", i, n,
                     lens[i], skip ? "skipped" : "hashed", (unsigned long long)hashes[i],
                     (unsigned long long)want);
        free(bufs[i]);
    }
    free(bufs), free(lens), free(hashes);
}

static void test_every_item_hashed_once_whoever_takes_it(void **unused) {
    (void)unused;
    for (int round = 0; round < 50; round++) run_batch(1 + next() % 40, 4096, 0);
    run_batch(32, 256 * 1024, 0); /* the bench's batch: 32 x 256 KiB */
}

static void test_skipped_items_are_left_alone(void **unused) {
    (void)unused;
    for (int round = 0; round < 30; round++) run_batch(1 + next() % 30, 8192, 1 + next() % 4);
    run_batch(8, 1024, 1); /* nothing to hash at all */
}

static void test_one_item_and_empty_items(void **unused) {
    (void)unused;
    run_batch(1, 100000, 0);
    run_batch(16, 0, 0); /* zero-length objects hash to XXH3 of nothing */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_item_hashed_once_whoever_takes_it),
        cmocka_unit_test(test_skipped_items_are_left_alone),
        cmocka_unit_test(test_one_item_and_empty_items),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
