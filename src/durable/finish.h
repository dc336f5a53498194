/* The end of a restore (cr_store_restore_finish), its claims on two
 * threads (finish.c).
 *
 * After the logs are applied, every memory replica the restore placed is
 * claimed in its segment's allocator, per segment in ascending offset
 * order: 10 M objects are seconds of one core (bench/RESULTS.md), while
 * the machine's other core is idle by then.  The claims of different
 * segments touch different allocators (store_restore.h, "Threads"), so
 * the segments are split into two ranges of about equal claim counts and
 * one range is claimed on a second thread while the calling thread claims
 * the other.  The result is the same store as cr_store_restore_finish's.
 *
 * Threads: the second thread lives only inside cr_durable_finish and
 * touches only its range's segments (phase 2 of store_restore.h); the
 * store is the caller's again when the call returns. */
#ifndef CRESCENT_DURABLE_FINISH_H
#define CRESCENT_DURABLE_FINISH_H

#include <stdbool.h>
#include <stdint.h>

#include "core/store_restore.h"

struct cr_durable_finish_times {
    uint64_t plan_ns;   /* collecting and sorting the replicas (one thread) */
    uint64_t claims_ns; /* the claims, both ranges (wall clock) */
    uint64_t end_ns;    /* the drops and the rest (one thread) */
    uint32_t threads;   /* that claimed: 2, or 1 when no second thread could start */
};

/* Where to split the plan's segments: [0, k) and [k, n) with about equal
 * claim counts (they differ by at most one segment's). */
uint32_t cr_durable_finish_split(const struct cr_store_restore_plan *plan);

/* cr_store_restore_finish with the claims on `threads` threads (1 or 2;
 * 1 when a thread cannot be created).  Returns as it does: CR_OK, or
 * CR_ERR_NOMEM (message in cr_store_last_error; the bulk restore is still
 * under way: call cr_store_restore_abort).  *times may be NULL. */
int cr_durable_finish(cr_store *store, uint32_t threads, struct cr_store_restore_dropped *dropped,
                      struct cr_durable_finish_times *times);

#endif
