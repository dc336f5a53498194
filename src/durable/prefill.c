/* Memory for a restore, made ready on a second thread (see prefill.h). */
#include "durable/prefill.h"

#include <assert.h>
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "core/log.h"
#include "core/store_restore.h"
#include "crescent/error.h"

/* Populated this much at a time: madvise holds the address space's lock
 * for reading while it works, and the restoring thread's own mappings and
 * page faults wait for it, so a step is kept to a few ms. */
#define STEP_BYTES (4u << 20)

static void populate_down(struct cr_durable_prefill *p, char *base, size_t bytes) {
#ifdef MADV_POPULATE_WRITE
    size_t end = bytes;
    while (end > 0 && !atomic_load_explicit(&p->stop, memory_order_relaxed)) {
        size_t start = end > STEP_BYTES ? end - STEP_BYTES : 0;
        if (madvise(base + start, end - start, MADV_POPULATE_WRITE) != 0) {
            /* A kernel before 5.14, or no memory left: the restore's own
             * writes fault the pages in, as without this thread. */
            CR_DEBUG("durable", "populating the restore's slab stopped: %s", strerror(errno));
            return;
        }
        p->bytes_populated += end - start;
        end = start;
    }
#else
    (void)p, (void)base, (void)bytes;
#endif
}

static void *prefill_main(void *arg) {
    struct cr_durable_prefill *p = arg;
    int rc = cr_store_restore_reserve(p->store, p->objects);
    void *base = NULL;
    size_t bytes = 0;
    if (rc == CR_OK) cr_store_restore_slab_region(p->store, &base, &bytes);
    pthread_mutex_lock(&p->lock);
    p->reserved = true;
    p->reserve_rc = rc;
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->lock);
    if (bytes > 0) populate_down(p, base, bytes);
    return NULL;
}

bool cr_durable_prefill_start(struct cr_durable_prefill *p, cr_store *store, uint64_t objects) {
    assert(p != NULL && store != NULL);
    memset(p, 0, sizeof(*p));
    atomic_init(&p->stop, false);
    if (objects == 0) return false;
    p->store = store;
    p->objects = objects;
    if (pthread_mutex_init(&p->lock, NULL) != 0) return false;
    if (pthread_cond_init(&p->cond, NULL) != 0) {
        pthread_mutex_destroy(&p->lock);
        return false;
    }
    if (pthread_create(&p->thread, NULL, prefill_main, p) != 0) {
        pthread_cond_destroy(&p->cond);
        pthread_mutex_destroy(&p->lock);
        return false;
    }
    p->started = true;
    return true;
}

void cr_durable_prefill_handover(struct cr_durable_prefill *p) {
    assert(p != NULL);
    if (!p->started) return;
    pthread_mutex_lock(&p->lock);
    while (!p->reserved) pthread_cond_wait(&p->cond, &p->lock);
    pthread_mutex_unlock(&p->lock);
}

static void prefill_end(struct cr_durable_prefill *p, bool stop) {
    if (!p->started) return;
    if (stop) atomic_store_explicit(&p->stop, true, memory_order_relaxed);
    pthread_join(p->thread, NULL);
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->lock);
    p->started = false;
}

void cr_durable_prefill_join(struct cr_durable_prefill *p) {
    assert(p != NULL);
    prefill_end(p, true);
}

void cr_durable_prefill_finish(struct cr_durable_prefill *p) {
    assert(p != NULL);
    prefill_end(p, false);
}
