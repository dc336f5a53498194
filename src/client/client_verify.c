/* Checksum verification of a batch on a second thread: see client_verify.h. */
#include "client/client_verify.h"

#include <assert.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#if defined(__x86_64__)
/* The vector XXH3 picked at run time, as in client_data.c (same values as
 * the put's checksum). */
#include <xxh_x86dispatch.h>
#endif

/* An item's state, changed with atomics; DONE is stored under mu (the
 * reader waits for it on cv). */
enum { VERIFY_NONE, VERIFY_READY, VERIFY_TAKEN, VERIFY_DONE };

struct verify_item {
    const uint8_t *buf;
    size_t len;
    uint64_t *hash;
    int state;
};

struct cr_verify_pipe {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t count;
    size_t published; /* items [0, published) are published (under mu) */
    bool closed;      /* no more will be (under mu) */
    int refs;         /* the reader and the helper (under mu); the last frees */
    size_t helper_at; /* the item the helper is at (relaxed: a hint) */
    struct verify_item items[];
};

static void release(struct cr_verify_pipe *p) {
    pthread_mutex_lock(&p->mu);
    bool last = --p->refs == 0;
    pthread_mutex_unlock(&p->mu);
    if (!last) return;
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

/* Takes an item for hashing if no one has, hashes it, marks it done.
 * false when there was nothing to take. */
static bool hash_if_free(struct cr_verify_pipe *p, struct verify_item *it) {
    int expected = VERIFY_READY;
    if (!__atomic_compare_exchange_n(&it->state, &expected, VERIFY_TAKEN, false,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return false;
    *it->hash = XXH3_64bits(it->buf, it->len);
    pthread_mutex_lock(&p->mu);
    __atomic_store_n(&it->state, VERIFY_DONE, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return true;
}

static void *helper_main(void *arg) {
    struct cr_verify_pipe *p = arg;
    for (size_t i = 0; i < p->count; i++) {
        __atomic_store_n(&p->helper_at, i, __ATOMIC_RELAXED);
        pthread_mutex_lock(&p->mu);
        while (p->published <= i && !p->closed) pthread_cond_wait(&p->cv, &p->mu);
        bool have = i < p->published;
        pthread_mutex_unlock(&p->mu);
        if (!have) break;
        struct verify_item *it = &p->items[i];
        if (hash_if_free(p, it)) continue;
        /* Nothing to hash here, or the reader took it: it works from the
         * last item backwards, so everything after this is its. */
        if (__atomic_load_n(&it->state, __ATOMIC_ACQUIRE) != VERIFY_NONE) break;
    }
    release(p);
    return NULL;
}

struct cr_verify_pipe *cr_verify_start(size_t count) {
    assert(count > 0);
    struct cr_verify_pipe *p = calloc(1, sizeof(*p) + count * sizeof(p->items[0]));
    if (p == NULL) return NULL;
    p->count = count;
    p->refs = 2;
    if (pthread_mutex_init(&p->mu, NULL) != 0) {
        free(p);
        return NULL;
    }
    if (pthread_cond_init(&p->cv, NULL) != 0) {
        pthread_mutex_destroy(&p->mu);
        free(p);
        return NULL;
    }
    pthread_attr_t attr;
    pthread_t thread;
    bool started = pthread_attr_init(&attr) == 0;
    if (started) {
        /* Detached: the reader never waits for it to exit (see the header). */
        started = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) == 0 &&
                  pthread_create(&thread, &attr, helper_main, p) == 0;
        pthread_attr_destroy(&attr);
    }
    if (!started) {
        pthread_cond_destroy(&p->cv);
        pthread_mutex_destroy(&p->mu);
        free(p);
        return NULL;
    }
    return p;
}

bool cr_verify_keeping_up(const struct cr_verify_pipe *p, size_t index) {
    assert(p != NULL);
    return index < __atomic_load_n(&p->helper_at, __ATOMIC_RELAXED) + CR_VERIFY_LAG;
}

void cr_verify_publish(struct cr_verify_pipe *p, size_t index, const void *buf, size_t len,
                       uint64_t *hash) {
    assert(p != NULL && index == p->published && index < p->count);
    assert(buf == NULL || hash != NULL);
    struct verify_item *it = &p->items[index];
    it->buf = buf;
    it->len = len;
    it->hash = hash;
    __atomic_store_n(&it->state, buf != NULL ? VERIFY_READY : VERIFY_NONE, __ATOMIC_RELEASE);
    pthread_mutex_lock(&p->mu);
    p->published = index + 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

void cr_verify_finish(struct cr_verify_pipe *p) {
    assert(p != NULL);
    pthread_mutex_lock(&p->mu);
    p->closed = true;
    pthread_cond_broadcast(&p->cv);
    size_t published = p->published;
    pthread_mutex_unlock(&p->mu);
    for (size_t i = published; i-- > 0;) {
        struct verify_item *it = &p->items[i];
        if (hash_if_free(p, it)) continue;
        /* The helper has it, and every earlier one it could take. */
        if (__atomic_load_n(&it->state, __ATOMIC_ACQUIRE) != VERIFY_NONE) break;
    }
    /* No item is READY now, so the helper can take no more: wait only for
     * the ones it is hashing. */
    pthread_mutex_lock(&p->mu);
    for (size_t i = 0; i < published; i++)
        while (__atomic_load_n(&p->items[i].state, __ATOMIC_ACQUIRE) == VERIFY_TAKEN)
            pthread_cond_wait(&p->cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
    release(p);
}
