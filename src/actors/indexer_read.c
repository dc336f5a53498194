/* /query without a message to the indexer actor: HTTP workers read the
 * prefix index themselves, under a reader-writer lock that the actor holds
 * for writing while it handles a message or a poll round's batches, and
 * drops while it sleeps in zmq_poll (docs/architecture.md, "The prefix
 * indexer", "Reading the index from HTTP workers").
 *
 * Why a lock and not an epoch-protected snapshot: the index (src/core/
 * prefix_*.c) grows its tables with realloc and frees blocks in place, so a
 * reader could only run beside the writer if every structure were rebuilt
 * for deferred reclamation.  A lock costs a reader two atomic operations on
 * a shared line; the ask it replaces cost two ring operations, an eventfd
 * wake, and a wait on the actor's turn.  The lock prefers writers (glibc's
 * PREFER_WRITER_NONRECURSIVE kind), so a stream of queries cannot hold
 * ingest off; readers block in the kernel rather than spin, which matters
 * when 16 workers share 2 cores with the actor.
 *
 * Each worker thread queries with its own scratch (cr_prefix_scratch, one
 * per thread, freed at thread exit), so the index's own scratch stays the
 * actor's. */
#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "actors/indexer_internal.h"
#include "core/log.h"
#include "crescent/error.h"

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static bool scratch_key_ok;

static void scratch_free(void *scratch) { cr_prefix_scratch_destroy(scratch); }

static void scratch_key_make(void) {
    scratch_key_ok = pthread_key_create(&scratch_key, scratch_free) == 0;
}

/* The calling thread's query scratch, made on its first query; NULL when
 * out of memory. */
static struct cr_prefix_scratch *thread_scratch(void) {
    pthread_once(&scratch_once, scratch_key_make);
    if (!scratch_key_ok) return NULL;
    struct cr_prefix_scratch *s = pthread_getspecific(scratch_key);
    if (s != NULL) return s;
    if (cr_prefix_scratch_create(&s) != CR_OK) return NULL;
    if (pthread_setspecific(scratch_key, s) != 0) {
        cr_prefix_scratch_destroy(s);
        return NULL;
    }
    return s;
}

int indexer_read_lock_init(struct indexer_state *st) {
    assert(st != NULL && !st->read_lock_ready);
    pthread_rwlockattr_t attr;
    if (pthread_rwlockattr_init(&attr) != 0) return CR_ERR_NOMEM;
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    int rc = pthread_rwlock_init(&st->read_lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    if (rc != 0) return CR_ERR_NOMEM;
    st->read_lock_ready = true;
    return CR_OK;
}

void indexer_read_lock_destroy(struct indexer_state *st) {
    assert(st != NULL);
    if (!st->read_lock_ready) return;
    pthread_rwlock_destroy(&st->read_lock);
    st->read_lock_ready = false;
}

void indexer_write_begin(struct indexer_state *st) {
    assert(st != NULL && !st->write_held);
    if (!st->read_lock_ready) return; /* a state built by hand in a test */
    int rc = pthread_rwlock_wrlock(&st->read_lock);
    assert(rc == 0); /* EDEADLK would be a begin without its end */
    (void)rc;
    st->write_held = true;
}

void indexer_write_end(struct indexer_state *st) {
    assert(st != NULL);
    if (!st->read_lock_ready) return;
    assert(st->write_held);
    st->write_held = false;
    pthread_rwlock_unlock(&st->read_lock);
}

/* Whether the shared path's answer would be the actor's: the actor forgets
 * expired load-only instances before answering, so an answer that depends
 * on one (an unknown context, whose header names the tenant as known or
 * not; an instance filter naming one) is left to it. */
static bool answer_is_shared(struct indexer_state *st, const struct cr_indexer_query *q) {
    uint32_t context;
    if (cr_prefix_index_context(st->index, &q->key, false, &context) != CR_OK) return false;
    if (q->instance_filter == NULL) return true;
    uint16_t id;
    if (cr_prefix_index_instance_find(st->index, q->instance_filter, q->key.tenant, &id) != CR_OK)
        return false;
    return id >= st->instance_cap || !st->instances[id].load_only;
}

int cr_indexer_query_read(void *indexer_state, const struct cr_indexer_query *q,
                          struct cr_indexer_result **out) {
    struct indexer_state *st = indexer_state;
    assert(q != NULL && out != NULL && !q->route);
    *out = NULL;
    if (st == NULL || !st->read_lock_ready) return CR_OK; /* no state given: ask the actor */
    struct cr_prefix_scratch *scratch = thread_scratch();
    if (scratch == NULL) return CR_ERR_NOMEM;
    int rc = pthread_rwlock_rdlock(&st->read_lock);
    if (rc != 0) return CR_OK; /* EAGAIN (too many readers): the actor answers */
    rc = CR_OK;
    if (answer_is_shared(st, q)) {
        rc = indexer_answer(st, scratch, q, out);
        if (rc == CR_OK) atomic_fetch_add_explicit(&st->queries_shared, 1, memory_order_relaxed);
    }
    pthread_rwlock_unlock(&st->read_lock);
    return rc;
}
