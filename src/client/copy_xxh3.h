/* One pass that copies an object and computes its XXH3-64 (copy_xxh3.c).
 *
 * A same-host read's bytes count only when their XXH3-64 equals the put's
 * checksum.  cr_copy_hashed (client_copy.h) copies 32 KiB and then hashes
 * it from cache: two passes over every byte, the second one from L1/L2.
 * This one loads each 64-byte stripe once, stores it to the destination and
 * feeds the same registers to XXH3's accumulator, so the hash's arithmetic
 * overlaps the copy's memory traffic (bench/copy_verify.c: "fused").  The
 * value is the one-shot XXH3_64bits of the bytes stored, i.e. of what the
 * caller gets, never a second read of the live source. */
#ifndef CRESCENT_CLIENT_COPY_XXH3_H
#define CRESCENT_CLIENT_COPY_XXH3_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Copies [src, src + len) to dst (not overlapping) and returns
 * XXH3_64bits(dst, len).  Any len; the fused loop runs for len > 240 on
 * CPUs built for AVX2, otherwise a copy and then libxxhash's hash. */
uint64_t cr_copy_xxh3(void *dst, const void *src, size_t len);

/* Whether cr_copy_xxh3 runs the fused loop in this build (AVX2). */
bool cr_copy_xxh3_fused(void);

#endif
