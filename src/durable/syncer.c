/* The journal's background fdatasync (see syncer.h). */
#include "durable/syncer.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "crescent/error.h"

static uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *syncer_main(void *arg) {
    struct cr_syncer *s = arg;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (!s->stop && s->fd < 0) pthread_cond_wait(&s->cond, &s->lock);
        if (s->fd < 0) break; /* stopping with nothing asked */
        int fd = s->fd;
        uint64_t lsn = s->lsn;
        s->fd = -1;
        pthread_mutex_unlock(&s->lock);
        uint64_t t0 = mono_ns();
        int rc = fdatasync(fd);
        int e = rc == 0 ? 0 : errno;
        uint64_t ns = mono_ns() - t0;
        close(fd);
        pthread_mutex_lock(&s->lock);
        s->busy = false;
        if (e != 0 && s->err == 0) s->err = e;
        if (e == 0 && lsn > s->done_lsn) s->done_lsn = lsn;
        if (s->ns_count < CR_SYNCER_SAMPLES) s->ns[s->ns_count++] = ns; /* else not timed */
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

int cr_syncer_start(struct cr_syncer *s) {
    assert(s != NULL);
    memset(s, 0, sizeof(*s));
    s->fd = -1;
    if (pthread_mutex_init(&s->lock, NULL) != 0) return CR_ERR_NOMEM;
    if (pthread_cond_init(&s->cond, NULL) != 0) {
        pthread_mutex_destroy(&s->lock);
        return CR_ERR_NOMEM;
    }
    if (pthread_create(&s->thread, NULL, syncer_main, s) != 0) {
        pthread_cond_destroy(&s->cond);
        pthread_mutex_destroy(&s->lock);
        return CR_ERR_NOMEM;
    }
    s->started = true;
    return CR_OK;
}

bool cr_syncer_ask(struct cr_syncer *s, int fd, uint64_t lsn) {
    assert(s != NULL && s->started && fd >= 0);
    pthread_mutex_lock(&s->lock);
    bool take = !s->busy;
    int copy = take ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
    if (copy >= 0) {
        s->fd = copy;
        s->lsn = lsn;
        s->busy = true;
        pthread_cond_signal(&s->cond);
    }
    pthread_mutex_unlock(&s->lock);
    return copy >= 0;
}

bool cr_syncer_collect(struct cr_syncer *s, uint64_t *done_lsn, int *err, uint64_t *ns,
                       uint32_t *count) {
    assert(s != NULL && s->started && done_lsn != NULL && err != NULL && count != NULL);
    pthread_mutex_lock(&s->lock);
    *done_lsn = s->done_lsn;
    *err = s->err;
    *count = s->ns_count;
    memcpy(ns, s->ns, s->ns_count * sizeof(s->ns[0]));
    s->ns_count = 0;
    bool busy = s->busy;
    pthread_mutex_unlock(&s->lock);
    return busy;
}

void cr_syncer_stop(struct cr_syncer *s) {
    if (s == NULL || !s->started) return;
    pthread_mutex_lock(&s->lock);
    s->stop = true;
    pthread_cond_signal(&s->cond);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
    if (s->fd >= 0) close(s->fd); /* never taken (cannot happen: it syncs before it stops) */
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->lock);
    s->started = false;
}
