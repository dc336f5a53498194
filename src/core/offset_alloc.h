/* Offset allocator: hands out byte ranges of one segment in O(1).
 *
 * The allocator never touches the memory it manages (that memory belongs to
 * a client on another host); it only does the bookkeeping of which offsets
 * of [0, size) are in use.  Free ranges are kept in bins whose size classes
 * are encoded as small floating-point numbers (a few mantissa bits and an
 * exponent), so finding a bin that fits is two find-first-set operations on
 * bitmasks, and neighbours are merged on free.
 *
 * Single-threaded (src/core): the segment manager actor owns each instance. */
#ifndef CRESCENT_CORE_OFFSET_ALLOC_H
#define CRESCENT_CORE_OFFSET_ALLOC_H

#include <stdbool.h>
#include <stdint.h>

typedef struct cr_offset_alloc cr_offset_alloc;

/* One allocation.  `node` is the allocator's handle for freeing; `offset` is
 * the first byte of the range and `size` the bytes granted (≥ requested). */
typedef struct cr_offset_allocation {
    uint64_t offset;
    uint64_t size;
    uint32_t node;
} cr_offset_allocation;

typedef struct cr_offset_alloc_stats {
    uint64_t capacity_bytes;     /* size given to init */
    uint64_t free_bytes;         /* sum of free ranges */
    uint64_t largest_free_bytes; /* largest single request that would succeed now */
    uint32_t allocation_count;   /* live allocations */
} cr_offset_alloc_stats;

/* Creates an allocator for [0, size_bytes).  `max_allocations` bounds the
 * number of live allocations (its bookkeeping grows with use up to about
 * 80 bytes per allocation at that bound).  Returns CR_OK,
 * CR_ERR_INVALID_PARAMS (size 0, max_allocations 0 or above 2^30) or
 * CR_ERR_NOMEM. */
int cr_offset_alloc_create(uint64_t size_bytes, uint32_t max_allocations,
                           cr_offset_alloc **out);

/* Frees the allocator and its bookkeeping (live allocations are forgotten). */
void cr_offset_alloc_destroy(cr_offset_alloc *alloc);

/* Allocates `size_bytes` (> 0).  Returns CR_OK and fills *out, or
 * CR_ERR_NO_AVAILABLE_HANDLE when no free range fits or the allocation
 * table is full, CR_ERR_NOMEM when its bookkeeping cannot grow, or
 * CR_ERR_INVALID_PARAMS for size 0. Changes nothing on error. */
int cr_offset_alloc_alloc(cr_offset_alloc *alloc, uint64_t size_bytes,
                          cr_offset_allocation *out);

/* Allocates exactly [offset, offset + size_bytes): a restart putting each
 * replica back where the log says it is.  Fast (O(1)) when claims come in
 * ascending offset order into an allocator that has only been claimed from
 * (the range is then in the free range the last claim left); otherwise the
 * free range holding it is searched for (O(allocations)).  Returns CR_OK and
 * fills *out, CR_ERR_NO_AVAILABLE_HANDLE when any byte of the range is in
 * use or outside the allocator, or the allocation table is full,
 * CR_ERR_NOMEM, or CR_ERR_INVALID_PARAMS for size 0.  Changes nothing on
 * error. */
int cr_offset_alloc_claim(cr_offset_alloc *alloc, uint64_t offset, uint64_t size_bytes,
                          cr_offset_allocation *out);

/* Returns an allocation made by this allocator; merges with free neighbours.
 * Freeing twice or freeing a foreign allocation is a programmer error (asserted). */
void cr_offset_alloc_free(cr_offset_alloc *alloc, cr_offset_allocation allocation);

void cr_offset_alloc_get_stats(const cr_offset_alloc *alloc, cr_offset_alloc_stats *out);

/* Size classes ("small floats": 3 mantissa bits, the rest exponent; classes 0..7
 * are exact, then 8 classes per power of two, 496 classes cover all of uint64).
 * Exposed so tests can check the encoding and callers can predict rounding;
 * the allocator itself never rounds a granted size (see offset_alloc.c).
 * Searching starts at the request's class rounded up, so a request can fail
 * while a range of the class just below it would fit (only its bin's first 8
 * ranges are probed); largest_free_bytes is always a request that succeeds. */

/* Returns the largest class whose size is <= size_bytes (0 for 0). */
uint32_t cr_offset_alloc_size_class_floor(uint64_t size_bytes);

/* Returns the smallest class whose size is >= size_bytes; 496 (one past the last
 * class) when size_bytes exceeds the largest class size 15 << 60. */
uint32_t cr_offset_alloc_size_class_ceil(uint64_t size_bytes);

/* Returns the smallest size in bytes of `size_class` (< 496, asserted). */
uint64_t cr_offset_alloc_size_class_bytes(uint32_t size_class);

#endif
