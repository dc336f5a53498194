/* Giving the heap's free memory back to the system after a spike.
 *
 * glibc keeps what a program frees for its next allocations: after a
 * RemoveAll of 5 M objects, or hundreds of stalled replay clients, crescentd
 * held ~2 GB and ~280 MB it no longer used, for good (only the top of the
 * main heap is returned on its own; freed chunks inside the heaps are not).
 * malloc_trim(0) returns every free page of every arena (madvise).  It
 * locks each arena while it walks it, so it is not run on a hot path: one
 * actor (leases, on its 100 ms tick) calls cr_heap_trim_tick, which looks at
 * mallinfo2() at most every CR_HEAP_CHECK_NS and trims only when the free
 * bytes held grew by CR_HEAP_TRIM_BYTES since the last trim.  What stays
 * (docs/architecture.md, "Memory given back"): the free bytes below that
 * step, partly used pages, and what other libraries keep for themselves. */
#ifndef CRESCENT_RUNTIME_HEAP_H
#define CRESCENT_RUNTIME_HEAP_H

#include <stdbool.h>
#include <stdint.h>

#define CR_HEAP_CHECK_NS (2ull * 1000000000u) /* mallinfo2 at most this often */
#define CR_HEAP_TRIM_BYTES (64ull << 20)      /* free bytes grown past the base: trim */

struct cr_heap_trim {
    uint64_t next_check_ns;
    uint64_t base_free_bytes; /* free bytes held after the last trim (or the least seen) */
    bool have_base;
    /* For /metrics: */
    uint64_t trims, released_bytes, free_bytes;
};

/* The policy alone (no system call): with `free_bytes` held in the heap's
 * free lists at `now_ns`, whether to trim now.  Lowers the base when fewer
 * free bytes are held (memory reused).  Updates t->free_bytes. */
bool cr_heap_trim_due(struct cr_heap_trim *t, uint64_t now_ns, uint64_t free_bytes);

/* Reads mallinfo2 when a check is due and runs malloc_trim(0) when
 * cr_heap_trim_due says so, counting the RSS it gave back. */
void cr_heap_trim_tick(struct cr_heap_trim *t, uint64_t now_ns);

#endif
