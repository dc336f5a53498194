/* Random values for the unit tests that compare a hand-written codec with
 * protobuf-c over random inputs: a xorshift64 generator (fixed seed per
 * test file, so a failure repeats) and integers whose varint takes 1..10
 * bytes evenly. */
#ifndef CRESCENT_TESTS_RANDOM_VALUES_H
#define CRESCENT_TESTS_RANDOM_VALUES_H

#include <stdint.h>

#ifndef RANDOM_VALUES_SEED
#define RANDOM_VALUES_SEED 0x9E3779B97F4A7C15ull
#endif

static uint64_t rng = RANDOM_VALUES_SEED;

static inline uint64_t next(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

/* A value whose varint takes 1..10 bytes, evenly. */
static inline uint64_t any_u64(void) {
    unsigned bits = (unsigned)(next() % 65);
    return bits == 0 ? 0 : next() >> (64 - bits);
}

#endif
