/* Unit tests for src/core/prefix_hash.c.
 *
 * How the expected values were produced: tests/unit/gen_xxh3_vectors.py is an
 * independent Python implementation of XXH3_64 written from the XXH3
 * specification (all length classes: 0, 1-3, 4-8, 9-16, 17-128, 129-240 and the
 * long striped loop with a seed-derived secret).  It checks itself against the
 * spec's published XXH3_64bits("") = 0x2D06800538D394C2 and prints the tables
 * below; it shares no code with libxxhash.  The namespace-seed and chain tables
 * come from the same script applying the rules in prefix_hash.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <xxhash.h>

#include "core/prefix_hash.h"

struct raw_vector {
    size_t length;
    uint64_t seed;
    uint64_t expected;
};

/* Input of a raw vector: byte i = ((i * 2654435761 + 12345) >> 7) & 0xff. */
static const struct raw_vector raw_vectors[] = {
    {0, 0x0000000000000000ULL, 0x2D06800538D394C2ULL},
    {0, 0x9E3779B185EBCA8DULL, 0xA8A6B918B2F0364AULL},
    {0, 0x000000000000002AULL, 0xB029411FF43D84D2ULL},
    {1, 0x0000000000000000ULL, 0xA0A482954FA7B32AULL},
    {1, 0x9E3779B185EBCA8DULL, 0x037DBCA1B2685E26ULL},
    {1, 0x000000000000002AULL, 0x49D1D2D524502439ULL},
    {3, 0x0000000000000000ULL, 0x7B682B8DBFB05C9EULL},
    {3, 0x9E3779B185EBCA8DULL, 0xB4441FA447ADB4A7ULL},
    {3, 0x000000000000002AULL, 0x84F337CDB2FCA6C4ULL},
    {4, 0x0000000000000000ULL, 0x8A8542837BEA67A3ULL},
    {4, 0x9E3779B185EBCA8DULL, 0xDC9D317BA2610505ULL},
    {4, 0x000000000000002AULL, 0xD9B6CD37AAB5A3F0ULL},
    {8, 0x0000000000000000ULL, 0xF215E40F055F147EULL},
    {8, 0x9E3779B185EBCA8DULL, 0xAF947FCE45559961ULL},
    {8, 0x000000000000002AULL, 0xFE493DEB9C4D8F06ULL},
    {9, 0x0000000000000000ULL, 0xAE4D573C89FDFF6DULL},
    {9, 0x9E3779B185EBCA8DULL, 0x32CA80D37FE88CF8ULL},
    {9, 0x000000000000002AULL, 0xE0EBE89882E2C2D5ULL},
    {16, 0x0000000000000000ULL, 0xBFD9870DB9918757ULL},
    {16, 0x9E3779B185EBCA8DULL, 0x623865701433F247ULL},
    {16, 0x000000000000002AULL, 0x53F9F6FAE27E2BD2ULL},
    {17, 0x0000000000000000ULL, 0xC3442B0BD5420537ULL},
    {17, 0x9E3779B185EBCA8DULL, 0xD2406393A97C8E9FULL},
    {17, 0x000000000000002AULL, 0xFC2C6293C6210001ULL},
    {64, 0x0000000000000000ULL, 0x9941B16FE7860BC9ULL},
    {64, 0x9E3779B185EBCA8DULL, 0xAC7DA52E18338F0AULL},
    {64, 0x000000000000002AULL, 0xBDFF48FF7993F1CDULL},
    {100, 0x0000000000000000ULL, 0x9E66248AAAE82E53ULL},
    {100, 0x9E3779B185EBCA8DULL, 0x6A6ECBC9D6015B46ULL},
    {100, 0x000000000000002AULL, 0x56AEC512A20A3A59ULL},
    {128, 0x0000000000000000ULL, 0xFDE93F852A300F29ULL},
    {128, 0x9E3779B185EBCA8DULL, 0x13C19A9FE5EF0393ULL},
    {128, 0x000000000000002AULL, 0x0E267C96EE683136ULL},
    {129, 0x0000000000000000ULL, 0x3A31AFF4EA903104ULL},
    {129, 0x9E3779B185EBCA8DULL, 0xF24C6366F3DEA6E9ULL},
    {129, 0x000000000000002AULL, 0xD633C26B2162E149ULL},
    {200, 0x0000000000000000ULL, 0xA123D52151063D7FULL},
    {200, 0x9E3779B185EBCA8DULL, 0xE61CA0ED6391D3FEULL},
    {200, 0x000000000000002AULL, 0xA815DF957E75DDA0ULL},
    {240, 0x0000000000000000ULL, 0x9F16BB776339EA42ULL},
    {240, 0x9E3779B185EBCA8DULL, 0x10BFBBFFA6BBED6AULL},
    {240, 0x000000000000002AULL, 0x741ED6B78541C586ULL},
    {241, 0x0000000000000000ULL, 0x048D0CBA4B268C50ULL},
    {241, 0x9E3779B185EBCA8DULL, 0x792E791D9146871AULL},
    {241, 0x000000000000002AULL, 0x8BEDBF8A71983E49ULL},
    {512, 0x0000000000000000ULL, 0x6AB02C95FE646D67ULL},
    {512, 0x9E3779B185EBCA8DULL, 0x897F81C49CBC4253ULL},
    {512, 0x000000000000002AULL, 0xF4E4F05810077DC6ULL},
    {1500, 0x0000000000000000ULL, 0x6E4A4DD70F6913EDULL},
    {1500, 0x9E3779B185EBCA8DULL, 0x3324D0973FC3ADC1ULL},
    {1500, 0x000000000000002AULL, 0xB96CDACF1B5AE692ULL},
    {2048, 0x0000000000000000ULL, 0xF2FF3B78D26937F3ULL},
    {2048, 0x9E3779B185EBCA8DULL, 0x77CB62118A688633ULL},
    {2048, 0x000000000000002AULL, 0xFF53B650CED943FBULL},
};

struct ns_vector {
    uint64_t base;
    const char *lora;
    const char *salt;
    uint64_t expected;
};

static const struct ns_vector ns_vectors[] = {
    {0, "", "", 0x0000000000000000ULL},
    {0, "adapter-1", "", 0xBB3474CE25A3A11DULL},
    {0, "", "s", 0xE182C4B3DA369CCFULL},
    {7, "sql-lora", "tenant-salt", 0xF1932E1FC8A96F22ULL},
    {0, "a", "", 0x98123F6CEC13A4C3ULL},
};

/* Chains over tokens t[i] = i * 7 + 1. */
struct chain_vector {
    uint32_t block_size;
    size_t token_count;
    uint64_t seed;
    int has_parent;
    uint64_t parent;
    size_t blocks;
    uint64_t expected[3];
};

static const struct chain_vector chain_vectors[] = {
    {16,
     48,
     0,
     0,
     0x0000000000000000ULL,
     3,
     {0x2BAE67C47312D019ULL, 0xBCB6498E61FD9D3BULL, 0x56EFF67A35A0C3C4ULL}},
    {16, 40, 0, 0, 0x0000000000000000ULL, 2, {0x2BAE67C47312D019ULL, 0xBCB6498E61FD9D3BULL}},
    {4,
     12,
     5,
     0,
     0x0000000000000000ULL,
     3,
     {0x156AFAF3F670FDBAULL, 0x0B330995C0198E05ULL, 0xFF468963C13C1FD4ULL}},
    {128, 256, 0, 0, 0x0000000000000000ULL, 2, {0x725C39A01737EBE6ULL, 0x37379BADC69DC175ULL}},
    {16, 32, 0, 1, 0x0123456789ABCDEFULL, 2, {0x7E988AC22AB71878ULL, 0x484EAE560074912AULL}},
};

static void fill_pattern(uint8_t *out, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = (uint8_t)(((uint64_t)i * 2654435761u + 12345u) >> 7);
}

static void fill_tokens(uint32_t *out, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = (uint32_t)(i * 7 + 1);
}

static void test_spec_empty_input(void **state) {
    (void)state;
    assert_int_equal(XXH3_64bits("", 0), 0x2D06800538D394C2ULL);
    assert_int_equal(cr_prefix_hash_block(NULL, 0, 0), 0x2D06800538D394C2ULL);
}

static void test_libxxhash_matches_independent_vectors(void **state) {
    (void)state;
    static uint8_t input[4096];
    fill_pattern(input, sizeof(input));
    for (size_t i = 0; i < sizeof(raw_vectors) / sizeof(raw_vectors[0]); i++) {
        const struct raw_vector *v = &raw_vectors[i];
        assert_int_equal(XXH3_64bits_withSeed(input, v->length, v->seed), v->expected);
    }
}

static void test_namespace_seed_vectors(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof(ns_vectors) / sizeof(ns_vectors[0]); i++) {
        const struct ns_vector *v = &ns_vectors[i];
        assert_int_equal(cr_prefix_hash_namespace_seed(v->base, v->lora, v->salt), v->expected);
    }
    /* NULL is "" and the base seed passes through untouched. */
    assert_int_equal(cr_prefix_hash_namespace_seed(99, NULL, NULL), 99);
    assert_int_equal(cr_prefix_hash_namespace_seed(99, "", ""), 99);
}

static void test_namespace_seed_separates(void **state) {
    (void)state;
    uint64_t base = cr_prefix_hash_namespace_seed(0, "", "");
    uint64_t lora = cr_prefix_hash_namespace_seed(0, "x", "");
    uint64_t salt = cr_prefix_hash_namespace_seed(0, "", "x");
    uint64_t both = cr_prefix_hash_namespace_seed(0, "x", "x");
    assert_int_not_equal(base, lora);
    assert_int_not_equal(lora, salt);
    assert_int_not_equal(salt, both);
    /* Length prefixes keep the split point: ("ab","c") differs from ("a","bc"). */
    assert_int_not_equal(cr_prefix_hash_namespace_seed(0, "ab", "c"),
                         cr_prefix_hash_namespace_seed(0, "a", "bc"));
    assert_int_not_equal(cr_prefix_hash_namespace_seed(1, "x", ""), lora);
}

static void test_chain_vectors(void **state) {
    (void)state;
    uint32_t tokens[512];
    fill_tokens(tokens, 512);
    for (size_t i = 0; i < sizeof(chain_vectors) / sizeof(chain_vectors[0]); i++) {
        const struct chain_vector *v = &chain_vectors[i];
        uint64_t out[8] = {0};
        size_t n = cr_prefix_hash_chain(tokens, v->token_count, v->block_size, v->seed,
                                        v->has_parent != 0, v->parent, out, 8);
        assert_int_equal(n, v->blocks);
        for (size_t b = 0; b < n; b++) assert_int_equal(out[b], v->expected[b]);
    }
}

static void test_chain_is_built_from_block_and_roll(void **state) {
    (void)state;
    uint32_t tokens[64];
    fill_tokens(tokens, 64);
    uint64_t out[4];
    assert_int_equal(cr_prefix_hash_chain(tokens, 64, 16, 3, false, 0, out, 4), 4);
    uint64_t prev = cr_prefix_hash_block(tokens, 16, 3);
    assert_int_equal(out[0], prev);
    for (int i = 1; i < 4; i++) {
        prev = cr_prefix_hash_roll(prev, cr_prefix_hash_block(tokens + 16 * i, 16, 3), 3);
        assert_int_equal(out[i], prev);
    }
    /* Continuing from out[1] reproduces out[2..3] from the later tokens only. */
    uint64_t cont[2];
    assert_int_equal(cr_prefix_hash_chain(tokens + 32, 32, 16, 3, true, out[1], cont, 2), 2);
    assert_int_equal(cont[0], out[2]);
    assert_int_equal(cont[1], out[3]);
}

/* NVIDIA Dynamo hashes with XXH3 seed 1337: tokens_hash = XXH3_64(tokens as
 * little-endian u32, 1337) and sequence hashes by the same rolling rule.  The
 * values come from gen_xxh3_vectors.py: chain([1..8], 4, 1337). */
static void test_dynamo_seed_vectors(void **state) {
    (void)state;
    const uint32_t tokens[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    uint64_t seq[2];
    assert_int_equal(cr_prefix_hash_chain(tokens, 8, 4, 1337, false, 0, seq, 2), 2);
    assert_true(seq[0] == 0xCB38E4D7FB2DCA5CULL);
    assert_true(seq[1] == 0x44A2B2379D6D3C3DULL);
    /* From the engine's local hashes alone, rooted or continued. */
    uint64_t locals[2] = {cr_prefix_hash_block(tokens, 4, 1337),
                          cr_prefix_hash_block(tokens + 4, 4, 1337)};
    assert_true(locals[0] == 0xCB38E4D7FB2DCA5CULL);
    uint64_t out[2] = {0, 0};
    assert_int_equal(cr_prefix_hash_chain_locals(locals, 2, 1337, false, 0, out), 2);
    assert_true(out[0] == seq[0] && out[1] == seq[1]);
    assert_int_equal(cr_prefix_hash_chain_locals(locals + 1, 1, 1337, true, seq[0], out), 1);
    assert_true(out[0] == seq[1]);
    /* Another seed gives other hashes: the seed must be Dynamo's to match. */
    assert_int_equal(cr_prefix_hash_chain_locals(locals, 2, 0, false, 0, out), 2);
    assert_true(out[1] != seq[1]);
}

static void test_chain_partial_and_cap(void **state) {
    (void)state;
    uint32_t tokens[40];
    fill_tokens(tokens, 40);
    uint64_t out[4] = {0, 0, 0, 0};
    /* 40 tokens at block size 16: two complete blocks, the last 8 ignored. */
    assert_int_equal(cr_prefix_hash_chain(tokens, 40, 16, 0, false, 0, out, 4), 2);
    assert_int_equal(out[2], 0);
    /* Fewer tokens than one block: nothing. */
    assert_int_equal(cr_prefix_hash_chain(tokens, 15, 16, 0, false, 0, out, 4), 0);
    /* The cap bounds the output. */
    memset(out, 0, sizeof(out));
    assert_int_equal(cr_prefix_hash_chain(tokens, 40, 4, 0, false, 0, out, 3), 3);
    assert_int_equal(out[3], 0);
    assert_int_equal(cr_prefix_hash_chain(tokens, 40, 4, 0, false, 0, NULL, 0), 0);
}

static void test_seed_changes_every_hash(void **state) {
    (void)state;
    uint32_t tokens[32];
    fill_tokens(tokens, 32);
    uint64_t a[2], b[2];
    cr_prefix_hash_chain(tokens, 32, 16, cr_prefix_hash_namespace_seed(0, "lora-a", ""), false,
                         0, a, 2);
    cr_prefix_hash_chain(tokens, 32, 16, cr_prefix_hash_namespace_seed(0, "lora-b", ""), false,
                         0, b, 2);
    assert_int_not_equal(a[0], b[0]);
    assert_int_not_equal(a[1], b[1]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spec_empty_input),
        cmocka_unit_test(test_libxxhash_matches_independent_vectors),
        cmocka_unit_test(test_namespace_seed_vectors),
        cmocka_unit_test(test_namespace_seed_separates),
        cmocka_unit_test(test_chain_vectors),
        cmocka_unit_test(test_chain_is_built_from_block_and_roll),
        cmocka_unit_test(test_chain_partial_and_cap),
        cmocka_unit_test(test_dynamo_seed_vectors),
        cmocka_unit_test(test_seed_changes_every_hash),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
