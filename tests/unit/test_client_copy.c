/* libcrescent's verifying copy (src/client/client_copy.c): a copy fed chunk
 * by chunk to XXH3's streaming state must give the one-shot XXH3-64 the
 * writer stored with PutEnd, for every length around the chunk size and
 * XXH3's own internal boundaries (240 bytes: short inputs; 1024: a block),
 * and must copy every byte. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "client/client_copy.h"

#define CHUNK CR_COPY_CHUNK_BYTES

static void check_length(const uint8_t *src, uint8_t *dst, size_t len) {
    memset(dst, 0xa5, len + 1);
    XXH3_state_t state;
    XXH3_64bits_reset(&state);
    cr_copy_hashed(&state, dst, src, len);
    assert_memory_equal(dst, src, len);
    assert_int_equal(dst[len], 0xa5); /* nothing past the end */
    /* The plain symbol (the writer may not dispatch): the same values. */
    if (XXH3_64bits_digest(&state) != XXH3_64bits(src, len))
        fail_msg("streamed XXH3 of %zu bytes differs from the one-shot value", len);
}

static void test_streamed_hash_equals_one_shot(void **unused) {
    (void)unused;
    size_t max = 3 * CHUNK + 4096;
    uint8_t *src = malloc(max), *dst = malloc(max + 1);
    assert_non_null(src);
    assert_non_null(dst);
    uint64_t x = 0x9e3779b97f4a7c15u;
    for (size_t i = 0; i < max; i++) { /* xorshift: no pattern XXH3 could miss */
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        src[i] = (uint8_t)x;
    }
    const size_t lengths[] = {0,         1,         16,        128,       240,
                              241,       1023,      1024,      1025,      CHUNK - 1,
                              CHUNK,     CHUNK + 1, 2 * CHUNK, 100000,    3 * CHUNK + 17,
                              max};
    for (size_t i = 0; i < sizeof(lengths) / sizeof(lengths[0]); i++)
        check_length(src, dst, lengths[i]);
    /* A source misaligned against the chunk grid, as a replica's bytes are. */
    check_length(src + 3, dst, 2 * CHUNK + 5);
    free(src);
    free(dst);
}

static void test_copy_without_a_state_only_copies(void **unused) {
    (void)unused;
    uint8_t src[5000], dst[5000];
    for (size_t i = 0; i < sizeof(src); i++) src[i] = (uint8_t)(i * 7u);
    memset(dst, 0, sizeof(dst));
    cr_copy_hashed(NULL, dst, src, sizeof(src));
    assert_memory_equal(dst, src, sizeof(src));
    cr_copy_hashed(NULL, NULL, NULL, 0); /* an empty object: no buffer at all */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_streamed_hash_equals_one_shot),
        cmocka_unit_test(test_copy_without_a_state_only_copies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
