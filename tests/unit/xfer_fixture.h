/* The fixture the transfer layer's unit tests share: a memfd segment "seg0"
 * served by a server on its own thread (the way crescent-store runs one),
 * and a client.  Stats are read only with the server thread stopped. */
#ifndef CRESCENT_TESTS_XFER_FIXTURE_H
#define CRESCENT_TESTS_XFER_FIXTURE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crescent/error.h"
#include "rdma/xfer.h"

#define MIB (UINT64_C(1) << 20)
#define SEGMENT_BYTES (80 * MIB)

struct fixture {
    struct cr_xfer_server *srv;
    struct cr_xfer_segment seg;
    struct cr_xfer_client *cli;
    pthread_t thread;
    atomic_bool stop;
    bool running;
    char endpoint[64];
};

/* xorshift64*: deterministic, so a failure reproduces. */
static uint64_t rng_next(uint64_t *state) {
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * UINT64_C(2685821657736338717);
}

static void fill_random(uint8_t *buf, size_t len, uint64_t seed) {
    uint64_t state = seed | 1;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t v = rng_next(&state);
        memcpy(buf + i, &v, 8);
    }
    for (; i < len; i++) buf[i] = (uint8_t)rng_next(&state);
}

static void *server_thread(void *arg) {
    struct fixture *f = arg;
    while (!atomic_load(&f->stop)) assert_true(cr_xfer_server_run(f->srv, 5) >= 0);
    return NULL;
}

static void server_start(struct fixture *f) {
    atomic_store(&f->stop, false);
    assert_int_equal(pthread_create(&f->thread, NULL, server_thread, f), 0);
    f->running = true;
}

static void server_stop(struct fixture *f) {
    if (!f->running) return;
    atomic_store(&f->stop, true);
    pthread_join(f->thread, NULL);
    f->running = false;
}

/* Stats are the server thread's: stop it, read, start again. */
static struct cr_xfer_server_stats server_stats(struct fixture *f) {
    struct cr_xfer_server_stats stats;
    server_stop(f);
    cr_xfer_server_get_stats(f->srv, &stats);
    server_start(f);
    return stats;
}

/* Stats once the server has closed at least `closed` connections.  A peer's
 * hang-up reaches the server thread in its own time (no answer tells the
 * test), so look again, thread stopped for each look, for up to 60 s: only a
 * server that never notices reaches the bound. */
static inline struct cr_xfer_server_stats server_stats_once_closed(struct fixture *f,
                                                                   uint64_t closed) {
    struct timespec now, deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += 60;
    for (;;) {
        struct cr_xfer_server_stats stats = server_stats(f);
        if (stats.connections_closed >= closed) return stats;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > deadline.tv_sec ||
            (now.tv_sec == deadline.tv_sec && now.tv_nsec >= deadline.tv_nsec))
            fail_msg("the server closed %llu connection(s), not %llu, within 60 s",
                     (unsigned long long)stats.connections_closed, (unsigned long long)closed);
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    }
}

static uint64_t seg_addr(struct fixture *f, uint64_t offset) {
    return (uint64_t)(uintptr_t)f->seg.base + offset;
}

static int setup_with(void **state, bool client_shm) {
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_int_equal(cr_xfer_segment_alloc(SEGMENT_BYTES, &f->seg), CR_OK);
    assert_int_equal(cr_xfer_server_create(NULL, &f->srv), CR_OK);
    assert_int_equal(cr_xfer_server_register_segment(f->srv, "seg0", &f->seg), CR_OK);
    snprintf(f->endpoint, sizeof(f->endpoint), "%s", cr_xfer_server_endpoint(f->srv));
    struct cr_xfer_client_config cfg = {.shm_disabled = !client_shm};
    assert_int_equal(cr_xfer_client_create(&cfg, &f->cli), CR_OK);
    server_start(f);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    struct fixture *f = *state;
    cr_xfer_client_destroy(f->cli);
    server_stop(f);
    cr_xfer_server_destroy(f->srv);
    cr_xfer_segment_free(&f->seg);
    free(f);
    return 0;
}

/* Writes random bytes at offset, checks the server's memory, reads them back. */
static void round_trip(struct fixture *f, uint64_t offset, size_t len, uint64_t seed) {
    uint8_t *src = malloc(len + 1), *dst = malloc(len + 1);
    assert_non_null(src);
    assert_non_null(dst);
    fill_random(src, len, seed);
    memset(dst, 0x5a, len + 1);
    assert_int_equal(cr_xfer_write(f->cli, f->endpoint, "seg0", seg_addr(f, offset), src, len),
                     CR_OK);
    assert_memory_equal(src, (uint8_t *)f->seg.base + offset, len); /* the server's memory */
    assert_int_equal(cr_xfer_read(f->cli, f->endpoint, "seg0", seg_addr(f, offset), dst, len),
                     CR_OK);
    assert_memory_equal(src, dst, len);
    assert_int_equal(dst[len], 0x5a);
    free(src);
    free(dst);
}

struct counter {
    uint32_t done, failed;
};

static void count_done(void *arg, int status, const char *message) {
    (void)message;
    struct counter *c = arg;
    c->done++;
    if (status != CR_OK) c->failed++;
}

/* cr_xfer_client_unregister on any transport: refused (CR_ERR_AGAIN, the
 * buffer still registered) while an op reads into the buffer, accepted once
 * it completed, refused (not registered) the second time.  A registration
 * is recorded with or without a device, so the 64-buffer limit holds too. */
static inline void check_unregister_waits_for_ops(struct fixture *f) {
    uint8_t *buf = malloc(MIB);
    assert_non_null(buf);
    assert_int_equal(cr_xfer_client_register(f->cli, buf, MIB), CR_OK);
    struct counter done = {0};
    struct iovec iov = {buf + 4096, 8192}; /* inside the buffer, not at its start */
    struct cr_xfer_op op = {.opcode = CR_XFER_READ, .endpoint = f->endpoint, .segment = "seg0",
                            .remote_addr = seg_addr(f, 0), .iov = &iov, .iov_count = 1,
                            .done = count_done, .arg = &done};
    assert_int_equal(cr_xfer_submit(f->cli, &op), CR_OK);
    assert_int_equal(cr_xfer_client_unregister(f->cli, buf), CR_ERR_AGAIN);
    assert_non_null(strstr(cr_xfer_client_last_error(f->cli), "1 transfer(s) in flight use it"));
    while (done.done == 0) cr_xfer_client_poll(f->cli, 100);
    assert_int_equal(done.failed, 0);
    assert_memory_equal(buf + 4096, f->seg.base, 8192);
    assert_int_equal(cr_xfer_client_unregister(f->cli, buf), CR_OK);
    assert_int_equal(cr_xfer_client_unregister(f->cli, buf), CR_ERR_INVALID_PARAMS);
    assert_non_null(strstr(cr_xfer_client_last_error(f->cli), "is not registered"));
    for (int i = 0; i < 64; i++) assert_int_equal(cr_xfer_client_register(f->cli, buf + i, 1), CR_OK);
    assert_int_equal(cr_xfer_client_register(f->cli, buf, 64), CR_ERR_NOMEM);
    for (int i = 0; i < 64; i++) assert_int_equal(cr_xfer_client_unregister(f->cli, buf + i), CR_OK);
    free(buf);
}

#endif
