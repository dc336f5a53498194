/* What bench/master and bench/master_sync both do around their cases: mount
 * the segments objects are placed on, and keep their owner alive while the
 * benchmark runs.  Header-only, as harness.h (one .c file per benchmark). */
#ifndef CRESCENT_BENCH_MASTER_COMMON_H
#define CRESCENT_BENCH_MASTER_COMMON_H

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>

#include "crescent/client.h"

#define BENCH_SEGMENTS 16u
#define BENCH_SEGMENT_BYTES (1ull << 32) /* 4 GiB each: room for every case's objects */

/* Mounts (or unmounts) BENCH_SEGMENTS segments named "<prefix>-seg<i>". */
static int bench_mount_segments(cr_client *owner, const char *prefix, bool mount) {
    for (unsigned i = 0; i < BENCH_SEGMENTS; i++) {
        char name[64];
        snprintf(name, sizeof(name), "%s-seg%u", prefix, i);
        struct cr_segment_spec spec = {.name = name, .base = (uint64_t)(i + 1) << 40,
                                       .size_bytes = BENCH_SEGMENT_BYTES,
                                       .transport_endpoint = "127.0.0.1:1"};
        int rc = mount ? cr_client_mount_segment(owner, &spec)
                       : cr_client_unmount_segment(owner, name);
        if (rc != CR_OK) {
            fprintf(stderr, "bench: %s %s: %s\n", mount ? "mount" : "unmount", name,
                    cr_client_last_error(owner));
            return rc;
        }
    }
    return CR_OK;
}

/* Keeps the segments' owner alive: crescentd unmounts the segments of a
 * client that misses its TTL, and a benchmark outlives the 10 s default. */
struct bench_pinger {
    const char *endpoint;
    int timeout_ms;
    uint8_t id[CR_CLIENT_ID_BYTES];
    uint8_t secret[CR_CLIENT_SECRET_BYTES]; /* the owner's: a ping under its id must carry it */
    bool has_secret;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool stop;
    pthread_t thread;
};

static void *bench_pinger_main(void *arg) {
    struct bench_pinger *p = arg;
    struct cr_client_options options = {.timeout_ms = p->timeout_ms, .client_id = p->id};
    cr_client *c = NULL;
    if (cr_client_open(p->endpoint, &options, &c, NULL, 0) != CR_OK) return NULL;
    if (p->has_secret) cr_client_set_secret(c, p->secret);
    pthread_mutex_lock(&p->lock);
    while (!p->stop) {
        pthread_mutex_unlock(&p->lock);
        uint64_t ttl_ms = 0;
        if (cr_client_ping(c, &ttl_ms) != CR_OK)
            fprintf(stderr, "bench: ping failed: %s\n", cr_client_last_error(c));
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 1; /* well inside any sane TTL */
        pthread_mutex_lock(&p->lock);
        if (!p->stop) pthread_cond_timedwait(&p->wake, &p->lock, &until);
    }
    pthread_mutex_unlock(&p->lock);
    cr_client_close(c);
    return NULL;
}

/* Pings as `owner` every second until bench_pinger_stop.  Start it after
 * the owner's first call that registers it (a mount): its secret is copied. */
static void bench_pinger_start(struct bench_pinger *p, cr_client *owner, const char *endpoint,
                               int timeout_ms) {
    *p = (struct bench_pinger){.endpoint = endpoint, .timeout_ms = timeout_ms};
    cr_client_get_id(owner, p->id);
    p->has_secret = cr_client_get_secret(owner, p->secret);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    if (pthread_create(&p->thread, NULL, bench_pinger_main, p) != 0) abort();
}

static void bench_pinger_stop(struct bench_pinger *p) {
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->wake);
}

#endif
