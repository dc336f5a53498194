/* The one-pass copy and XXH3-64 (src/client/copy_xxh3.c): for every length
 * XXH3 treats differently (0..240: short paths; a block is 1024 bytes, a
 * stripe 64, and the last stripe overlaps the ones before), at source and
 * destination alignments off the vector width, the value must be
 * libxxhash's own XXH3_64bits of the bytes (the writer's PutEnd checksum),
 * every byte copied and none past the end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "client/copy_xxh3.h"

#define MAX (3u * 1024u * 1024u + 4096u)

static uint8_t *random_bytes(size_t n) {
    uint8_t *p = malloc(n);
    assert_non_null(p);
    uint64_t x = 0x9e3779b97f4a7c15u;
    for (size_t i = 0; i < n; i++) { /* xorshift: no pattern XXH3 could miss */
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        p[i] = (uint8_t)x;
    }
    return p;
}

static void check(const uint8_t *src, uint8_t *dst, size_t len) {
    memset(dst, 0xa5, len + 1);
    uint64_t got = cr_copy_xxh3(dst, src, len);
    if (memcmp(dst, src, len) != 0) fail_msg("%zu bytes: the copy differs", len);
    assert_int_equal(dst[len], 0xa5); /* nothing past the end */
    if (got != XXH3_64bits(src, len))
        fail_msg("%zu bytes: %016llx, libxxhash says %016llx", len, (unsigned long long)got,
                 (unsigned long long)XXH3_64bits(src, len));
}

static void test_every_short_and_block_length(void **unused) {
    (void)unused;
    uint8_t *src = random_bytes(8192 + 64), *dst = malloc(8192 + 64);
    assert_non_null(dst);
    for (size_t len = 0; len <= 4200; len++) check(src, dst, len);
    /* Off the 32-byte vector width on either side. */
    for (size_t len = 230; len <= 3100; len += 13) {
        check(src + 1, dst, len);
        check(src, dst + 7, len);
        check(src + 33, dst + 3, len);
    }
    free(src);
    free(dst);
}

static void test_big_objects(void **unused) {
    (void)unused;
    uint8_t *src = random_bytes(MAX + 64), *dst = malloc(MAX + 64);
    assert_non_null(dst);
    const size_t lengths[] = {256u << 10, (256u << 10) + 1, (1u << 20) - 1, 1u << 20,
                              (1u << 20) + 63, (1u << 20) + 64, (1u << 20) + 65, 3u << 20, MAX};
    for (size_t i = 0; i < sizeof(lengths) / sizeof(lengths[0]); i++) {
        check(src, dst, lengths[i]);
        check(src + 5, dst + 9, lengths[i]);
    }
    free(src);
    free(dst);
}

/* A byte changed in the source changes the value: the accumulator is fed. */
static void test_value_follows_the_bytes(void **unused) {
    (void)unused;
    uint8_t *src = random_bytes(5000), *dst = malloc(5001);
    assert_non_null(dst);
    uint64_t before = cr_copy_xxh3(dst, src, 5000);
    for (size_t at = 0; at < 5000; at += 97) {
        src[at] ^= 1;
        assert_true(cr_copy_xxh3(dst, src, 5000) != before);
        src[at] ^= 1;
    }
    cr_copy_xxh3(NULL, NULL, 0); /* an empty object: no buffer at all */
    printf("fused loop in this build: %s\n", cr_copy_xxh3_fused() ? "yes (AVX2)" : "no");
    free(src);
    free(dst);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_short_and_block_length),
        cmocka_unit_test(test_big_objects),
        cmocka_unit_test(test_value_follows_the_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
