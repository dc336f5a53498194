/* Copy and XXH3-64 in one pass: see copy_xxh3.h.
 *
 * XXH3's long-input loop as libxxhash 0.8 runs it (xxhash.h,
 * XXH3_hashLong_64b_internal), with its own secret, scramble, merge and
 * avalanche taken from the packaged header (XXH_INLINE_ALL), and one change:
 * each stripe's accumulation is fed the registers the copy loaded and
 * stored, instead of loading the input again.  tests/unit/test_copy_xxh3.c
 * checks the value against the library's XXH3_64bits for every length
 * class and alignment. */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "client/copy_xxh3.h"

#include <assert.h>
#include <string.h>

#if XXH_VERSION_NUMBER < 800
#error "copy_xxh3.c needs libxxhash >= 0.8 (XXH3's stable values and its internals)"
#endif

#if defined(__AVX2__)
#include <immintrin.h>

/* Stripe `src` copied to `dst` and accumulated: XXH3_accumulate_512_avx2 on
 * the loaded registers. */
static inline __attribute__((always_inline)) void stripe(xxh_u64 *acc, uint8_t *dst,
                                                         const uint8_t *src,
                                                         const uint8_t *secret) {
    __m256i *xacc = (__m256i *)(void *)acc;
    for (int i = 0; i < 2; i++) {
        __m256i const data = _mm256_loadu_si256((const __m256i *)(const void *)src + i);
        _mm256_storeu_si256((__m256i *)(void *)dst + i, data);
        __m256i const key = _mm256_loadu_si256((const __m256i *)(const void *)secret + i);
        __m256i const data_key = _mm256_xor_si256(data, key);
        __m256i const data_key_lo = _mm256_shuffle_epi32(data_key, _MM_SHUFFLE(0, 3, 0, 1));
        __m256i const product = _mm256_mul_epu32(data_key, data_key_lo);
        __m256i const swapped = _mm256_shuffle_epi32(data, _MM_SHUFFLE(1, 0, 3, 2));
        xacc[i] = _mm256_add_epi64(product, _mm256_add_epi64(xacc[i], swapped));
    }
}

static uint64_t fused(uint8_t *dst, const uint8_t *src, size_t len) {
    const uint8_t *const secret = XXH3_kSecret;
    const size_t secret_size = sizeof(XXH3_kSecret);
    XXH_ALIGN(XXH_ACC_ALIGN) xxh_u64 acc[XXH_ACC_NB] = XXH3_INIT_ACC;
    const size_t per_block = (secret_size - XXH_STRIPE_LEN) / XXH_SECRET_CONSUME_RATE;
    const size_t block_len = XXH_STRIPE_LEN * per_block;
    const size_t blocks = (len - 1) / block_len;
    size_t off = 0;
    for (size_t b = 0; b < blocks; b++) {
        for (size_t n = 0; n < per_block; n++, off += XXH_STRIPE_LEN)
            stripe(acc, dst + off, src + off, secret + n * XXH_SECRET_CONSUME_RATE);
        XXH3_scrambleAcc(acc, secret + secret_size - XXH_STRIPE_LEN);
    }
    const size_t stripes = ((len - 1) - block_len * blocks) / XXH_STRIPE_LEN;
    for (size_t n = 0; n < stripes; n++, off += XXH_STRIPE_LEN)
        stripe(acc, dst + off, src + off, secret + n * XXH_SECRET_CONSUME_RATE);
    /* The 1..64 bytes left, then XXH3's last stripe (overlapping the ones
     * before) from dst, where all of it now is. */
    memcpy(dst + off, src + off, len - off);
    XXH3_accumulate_512(acc, dst + len - XXH_STRIPE_LEN,
                        secret + secret_size - XXH_STRIPE_LEN - XXH_SECRET_LASTACC_START);
    return XXH3_mergeAccs(acc, secret + XXH_SECRET_MERGEACCS_START,
                          (xxh_u64)len * XXH_PRIME64_1);
}

bool cr_copy_xxh3_fused(void) { return true; }
#else
bool cr_copy_xxh3_fused(void) { return false; }
#endif

uint64_t cr_copy_xxh3(void *dst, const void *src, size_t len) {
    assert((dst != NULL && src != NULL) || len == 0);
#if defined(__AVX2__)
    if (len > XXH3_MIDSIZE_MAX) return fused(dst, src, len);
#endif
    if (len > 0) memcpy(dst, src, len);
    return XXH3_64bits(dst, len);
}
