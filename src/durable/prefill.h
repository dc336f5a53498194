/* Memory for a restore, made ready on a second thread (prefill.c).
 *
 * A restore of N objects writes each into a slab slot the kernel has never
 * mapped: the first write of every page is a fault and the kernel zeroes
 * the page.  On a virtual machine that costs about 3.4 ms per MiB of huge
 * pages (the host backs each page as it is first touched), most of a large
 * restart's time (bench/RESULTS.md): 10 M objects are 3.4 GB of slab.  The
 * work needs no knowledge of the objects, so it runs beside the restore:
 * once the snapshot's object count is known, a thread reserves the store's
 * room (cr_store_restore_reserve: the key index and the slab region) and
 * then populates the slab region from its end down (MADV_POPULATE_WRITE,
 * which writes no byte), while the calling thread, once the reserve is
 * handed over, restores the snapshot's objects into it from its start up.
 *
 * Threads: the thread uses the store only until cr_durable_prefill_handover
 * returns; after that it touches nothing but the region's pages, which the
 * store keeps mapped until it is destroyed.  cr_durable_prefill_join must
 * be called before the store is destroyed (and before recovery returns). */
#ifndef CRESCENT_DURABLE_PREFILL_H
#define CRESCENT_DURABLE_PREFILL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/store.h"

struct cr_durable_prefill {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    cr_store *store;
    uint64_t objects;
    bool started;  /* a thread runs (join pending) */
    bool reserved; /* under lock: the thread is done with the store */
    int reserve_rc;
    atomic_bool stop;     /* the caller wants it to end early */
    size_t bytes_populated; /* read after join */
};

/* Starts the thread for `objects` objects (0: no thread).  Returns false
 * when none was started: the restore then goes on as it would without
 * (it reserves the room itself and faults the pages in as it writes). */
bool cr_durable_prefill_start(struct cr_durable_prefill *p, cr_store *store, uint64_t objects);

/* Waits until the thread no longer uses the store; a no-op without one. */
void cr_durable_prefill_handover(struct cr_durable_prefill *p);

/* Tells the thread to stop populating and waits for it; a no-op without
 * one.  (Once the restore has written every object, what the thread has
 * not populated yet is past the last object: not needed.) */
void cr_durable_prefill_join(struct cr_durable_prefill *p);

/* Waits for the thread to populate the whole region and end (tests). */
void cr_durable_prefill_finish(struct cr_durable_prefill *p);

#endif
