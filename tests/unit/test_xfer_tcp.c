/* Unit tests for the transfer layer over tcp (src/rdma/xfer*.c): the frame
 * codec, segment memory, round trips of random sizes (0 B .. 64 MiB), many
 * ops in flight with scatter-gather, and the refusals: out-of-bounds,
 * unknown segment and malformed frames close only the offending connection
 * while other clients keep being served.
 *
 * The server runs on its own thread (the way crescent-store runs it); the
 * test reads its stats only after stopping that thread. */
#include <arpa/inet.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "crescent/error.h"
#include "rdma/xfer.h"
#include "rdma/xfer_frame.h"
#include "rdma/xfer_internal.h"

#include "xfer_fixture.h"

static int setup(void **state) { return setup_with(state, false); }

/* ---- pure parts --------------------------------------------------------- */

static void test_frame_round_trip_and_truncation(void **state) {
    (void)state;
    uint8_t buf[CR_XFER_REQUEST_MAX_BYTES];
    struct cr_xfer_request in = {.op = CR_XFER_FRAME_WRITE, .name_len = 4, .request_id = 77,
                                 .addr = 0x7f0000001000, .length = 4096, .name = "seg0"};
    size_t len = cr_xfer_request_encode(&in, buf);
    assert_int_equal(len, CR_XFER_REQUEST_HEADER_BYTES + 4);
    struct cr_xfer_request out;
    size_t used = 0;
    for (size_t cut = 0; cut < len; cut++)
        assert_int_equal(cr_xfer_request_parse(buf, cut, 1u << 30, &out, &used), CR_ERR_AGAIN);
    assert_int_equal(cr_xfer_request_parse(buf, len, 1u << 30, &out, &used), CR_OK);
    assert_int_equal(used, len);
    assert_int_equal(out.op, in.op);
    assert_int_equal(out.request_id, 77);
    assert_int_equal(out.addr, in.addr);
    assert_int_equal(out.length, 4096);
    assert_memory_equal(out.name, "seg0", 4);

    uint8_t resp_buf[CR_XFER_RESPONSE_BYTES];
    struct cr_xfer_response r = {.request_id = 9, .status = CR_ERR_INVALID_PARAMS, .length = 5};
    cr_xfer_response_encode(&r, resp_buf);
    struct cr_xfer_response back;
    assert_int_equal(cr_xfer_response_parse(resp_buf, &back), CR_OK);
    assert_int_equal(back.status, CR_ERR_INVALID_PARAMS);
    assert_int_equal(back.length, 5);
    memcpy(resp_buf + 4, "\x01\0\0\0", 4); /* status 1: not a crescent status */
    assert_int_equal(cr_xfer_response_parse(resp_buf, &back), CR_ERR_PROTOCOL);
}

static void test_frame_refuses_malformed(void **state) {
    (void)state;
    uint8_t good[CR_XFER_REQUEST_MAX_BYTES];
    struct cr_xfer_request in = {.op = CR_XFER_FRAME_READ, .name_len = 4, .request_id = 1,
                                 .addr = 4096, .length = 100, .name = "seg0"};
    size_t len = cr_xfer_request_encode(&in, good);
    struct { size_t at; uint8_t value; } cases[] = {
        {0, 0}, {0, 3}, {1, 0}, {2, 2}, {3, 0x80}, {CR_XFER_REQUEST_HEADER_BYTES, '/'},
        {CR_XFER_REQUEST_HEADER_BYTES + 1, 0}, {CR_XFER_REQUEST_HEADER_BYTES + 2, 0x7f},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint8_t bad[CR_XFER_REQUEST_MAX_BYTES];
        memcpy(bad, good, len);
        bad[cases[i].at] = cases[i].value;
        struct cr_xfer_request out;
        size_t used = 0;
        assert_int_equal(cr_xfer_request_parse(bad, len, 1u << 30, &out, &used), CR_ERR_PROTOCOL);
    }
    struct cr_xfer_request out;
    size_t used = 0;
    assert_int_equal(cr_xfer_request_parse(good, len, 99, &out, &used), CR_ERR_PROTOCOL);
    in.addr = UINT64_MAX - 10; /* addr + length wraps */
    len = cr_xfer_request_encode(&in, good);
    assert_int_equal(cr_xfer_request_parse(good, len, 1u << 30, &out, &used), CR_ERR_PROTOCOL);
}

static void test_range_inside(void **state) {
    (void)state;
    assert_true(cr_xfer_range_inside(1000, 100, 1000, 100));
    assert_true(cr_xfer_range_inside(1000, 100, 1100, 0));
    assert_false(cr_xfer_range_inside(1000, 100, 1000, 101));
    assert_false(cr_xfer_range_inside(1000, 100, 999, 1));
    assert_false(cr_xfer_range_inside(1000, 100, 1101, 0));
    assert_false(cr_xfer_range_inside(1000, 100, 1050, UINT64_MAX));
    assert_false(cr_xfer_range_inside(UINT64_MAX - 5, 5, UINT64_MAX - 1, 2));
}

static void test_endpoint_parse(void **state) {
    (void)state;
    struct sockaddr_storage addr;
    socklen_t len;
    char text[64];
    assert_int_equal(cr_xfer_endpoint_parse("127.0.0.1:4100", &addr, &len), CR_OK);
    cr_xfer_endpoint_format(&addr, text, sizeof(text));
    assert_string_equal(text, "127.0.0.1:4100");
    assert_int_equal(cr_xfer_endpoint_parse("[::1]:9", &addr, &len), CR_OK);
    cr_xfer_endpoint_format(&addr, text, sizeof(text));
    assert_string_equal(text, "[::1]:9");
    assert_int_equal(cr_xfer_endpoint_parse("localhost:1", &addr, &len), CR_OK);
    const char *bad[] = {"", "127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "host:1",
                         "1.2.3.4:x", ":80"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(cr_xfer_endpoint_parse(bad[i], &addr, &len), CR_ERR_INVALID_PARAMS);
}

static void test_segment_alloc(void **state) {
    (void)state;
    struct cr_xfer_segment seg;
    assert_int_equal(cr_xfer_segment_alloc(0, &seg), CR_ERR_INVALID_PARAMS);
    assert_int_equal(cr_xfer_segment_alloc(3 * MIB + 5, &seg), CR_OK);
    assert_non_null(seg.base);
    assert_true(seg.fd >= 0);
    assert_true(seg.size >= 3 * MIB + 5);
    memset(seg.base, 0xab, seg.size); /* every page can be touched */
    cr_xfer_segment_free(&seg);
    assert_null(seg.base);
    cr_xfer_segment_free(&seg); /* freeing twice is a no-op */
}

/* ---- round trips -------------------------------------------------------- */

static void test_round_trips_random_sizes(void **state) {
    struct fixture *f = *state;
    const size_t fixed[] = {0, 1, 4095, 4096, 65537, MIB + 3, 4 * MIB, 64 * MIB};
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
        round_trip(f, 4096, fixed[i], i);
    uint64_t rng = 12345;
    for (int i = 0; i < 24; i++) {
        unsigned bits = (unsigned)(rng_next(&rng) % 27); /* up to 64 MiB */
        size_t len = (size_t)(rng_next(&rng) % ((UINT64_C(1) << bits) + 1));
        uint64_t offset = rng_next(&rng) % (SEGMENT_BYTES - len + 1);
        round_trip(f, offset, len, rng);
    }
    assert_string_equal(cr_xfer_client_transport(f->cli, f->endpoint), "tcp");
}

static void wait_all(struct cr_xfer_client *cli, struct counter *c, uint32_t total) {
    while (c->done < total) cr_xfer_client_poll(cli, -1);
}

/* 600 ops in flight at once, each with three iovecs, to disjoint ranges. */
static void test_many_in_flight_scatter_gather(void **state) {
    struct fixture *f = *state;
    enum { OPS = 600, PIECE = 3000 };
    uint8_t *src = malloc((size_t)OPS * 3 * PIECE), *dst = calloc((size_t)OPS * 3, PIECE);
    assert_non_null(src);
    assert_non_null(dst);
    fill_random(src, (size_t)OPS * 3 * PIECE, 99);
    for (int pass = 0; pass < 2; pass++) {
        struct counter c = {0};
        uint8_t *base = pass == 0 ? src : dst;
        for (uint32_t i = 0; i < OPS; i++) {
            struct iovec iov[3];
            for (int k = 0; k < 3; k++) /* pieces interleaved: op i owns i, i+OPS, i+2*OPS */
                iov[k] = (struct iovec){base + ((size_t)k * OPS + i) * PIECE, PIECE};
            struct cr_xfer_op op = {.opcode = pass == 0 ? CR_XFER_WRITE : CR_XFER_READ,
                                    .endpoint = f->endpoint, .segment = "seg0",
                                    .remote_addr = seg_addr(f, (uint64_t)i * 3 * PIECE),
                                    .iov = iov, .iov_count = 3, .done = count_done, .arg = &c};
            int rc;
            while ((rc = cr_xfer_submit(f->cli, &op)) == CR_ERR_AGAIN)
                cr_xfer_client_poll(f->cli, -1);
            assert_int_equal(rc, CR_OK);
        }
        assert_true(cr_xfer_client_in_flight(f->cli) > 0);
        wait_all(f->cli, &c, OPS);
        assert_int_equal(c.failed, 0);
    }
    assert_memory_equal(src, dst, (size_t)OPS * 3 * PIECE);
    assert_int_equal(cr_xfer_client_in_flight(f->cli), 0);
    free(src);
    free(dst);
}

/* Striped ops (stripe_min_bytes lowered) of odd lengths land byte for byte. */
static void test_striped_odd_lengths(void **state) {
    struct fixture *f = *state;
    struct cr_xfer_client *cli;
    struct cr_xfer_client_config cfg = {.shm_disabled = true, .stripe_min_bytes = 1000,
                                        .connections_per_peer = 3};
    assert_int_equal(cr_xfer_client_create(&cfg, &cli), CR_OK);
    const size_t lengths[] = {1000, 1001, 5000, 12289, 3 * MIB + 7};
    for (size_t i = 0; i < sizeof(lengths) / sizeof(lengths[0]); i++) {
        size_t len = lengths[i];
        uint8_t *src = malloc(len), *dst = malloc(len);
        fill_random(src, len, len);
        assert_int_equal(cr_xfer_write(cli, f->endpoint, "seg0", seg_addr(f, 777), src, len),
                         CR_OK);
        assert_int_equal(cr_xfer_read(cli, f->endpoint, "seg0", seg_addr(f, 777), dst, len),
                         CR_OK);
        assert_memory_equal(src, dst, len);
        free(src);
        free(dst);
    }
    cr_xfer_client_destroy(cli);
}

/* ---- refusals ----------------------------------------------------------- */

/* A raw connection to the server, for frames the client would never send. */
static int raw_connect(struct fixture *f) {
    struct sockaddr_storage addr;
    socklen_t len;
    assert_int_equal(cr_xfer_endpoint_parse(f->endpoint, &addr, &len), CR_OK);
    int fd = socket(addr.ss_family, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&addr, len), 0);
    struct timeval tv = {.tv_sec = 30};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

static void raw_send_request(int fd, uint8_t op, const char *name, uint64_t addr, uint64_t len) {
    uint8_t buf[CR_XFER_REQUEST_MAX_BYTES];
    struct cr_xfer_request req = {.op = op, .name_len = (uint8_t)strlen(name), .request_id = 5,
                                  .addr = addr, .length = len, .name = name};
    size_t n = cr_xfer_request_encode(&req, buf);
    assert_int_equal(send(fd, buf, n, MSG_NOSIGNAL), (ssize_t)n);
}

/* Reads until the server closes; returns the bytes received before EOF. */
static size_t raw_read_to_eof(int fd, uint8_t *buf, size_t cap) {
    size_t have = 0;
    for (;;) {
        ssize_t n = recv(fd, buf + have, cap - have, 0);
        assert_true(n >= 0); /* a timeout (-1) means the server did not close */
        if (n == 0) return have;
        have += (size_t)n;
        assert_true(have < cap);
    }
}

static void assert_still_serving(struct fixture *f) {
    uint8_t src[5000], dst[5000];
    fill_random(src, sizeof(src), 4);
    assert_int_equal(cr_xfer_write(f->cli, f->endpoint, "seg0", seg_addr(f, 8192), src,
                                   sizeof(src)), CR_OK);
    assert_int_equal(cr_xfer_read(f->cli, f->endpoint, "seg0", seg_addr(f, 8192), dst,
                                  sizeof(dst)), CR_OK);
    assert_memory_equal(src, dst, sizeof(src));
}

static void test_out_of_bounds_refused_others_served(void **state) {
    struct fixture *f = *state;
    assert_still_serving(f); /* the client's connections are open before the attack */
    const struct { uint8_t op; uint64_t addr; uint64_t len; } bad[] = {
        {CR_XFER_FRAME_READ, seg_addr(f, SEGMENT_BYTES - 10), 11},
        {CR_XFER_FRAME_READ, seg_addr(f, 0) - 1, 1},
        {CR_XFER_FRAME_WRITE, seg_addr(f, SEGMENT_BYTES), 1},
        {CR_XFER_FRAME_READ, 0, 16},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int fd = raw_connect(f);
        raw_send_request(fd, bad[i].op, "seg0", bad[i].addr, bad[i].len);
        uint8_t buf[4096];
        size_t got = raw_read_to_eof(fd, buf, sizeof(buf));
        assert_int_equal(got, CR_XFER_RESPONSE_BYTES); /* the refusal, no data */
        struct cr_xfer_response resp;
        assert_int_equal(cr_xfer_response_parse(buf, &resp), CR_OK);
        assert_int_equal(resp.status, CR_ERR_INVALID_PARAMS);
        assert_int_equal(resp.length, 0);
        close(fd);
        assert_still_serving(f);
    }
    /* Through the client: the status and a message naming peer and reason. */
    uint8_t buf[64];
    assert_int_equal(cr_xfer_read(f->cli, f->endpoint, "seg0", seg_addr(f, SEGMENT_BYTES - 8),
                                  buf, sizeof(buf)), CR_ERR_INVALID_PARAMS);
    const char *msg = cr_xfer_client_last_error(f->cli);
    assert_non_null(strstr(msg, f->endpoint));
    assert_non_null(strstr(msg, "out of bounds"));
    assert_still_serving(f);
    struct cr_xfer_server_stats stats = server_stats(f);
    assert_int_equal(stats.refused_out_of_bounds, 5);
    assert_int_equal(stats.refused_malformed, 0);
}

static void test_malformed_frames_close_only_that_connection(void **state) {
    struct fixture *f = *state;
    assert_still_serving(f);
    const uint8_t garbage[][CR_XFER_REQUEST_HEADER_BYTES + 4] = {
        {9, 4, 0, 0},                          /* unknown op */
        {1, 0, 0, 0},                          /* empty segment name */
        {1, 4, 2, 0},                          /* unknown flag set */
        {2, 4, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff,
         0xff, 0xff, 0xff, 0xff, 's', 'e', 'g', '0'}, /* length above the limit */
        {1, 4, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
         's', '/', 'g', '0'},                  /* '/' in the name */
    };
    for (size_t i = 0; i < sizeof(garbage) / sizeof(garbage[0]); i++) {
        int fd = raw_connect(f);
        assert_int_equal(send(fd, garbage[i], sizeof(garbage[i]), MSG_NOSIGNAL),
                         (ssize_t)sizeof(garbage[i]));
        uint8_t buf[64];
        assert_int_equal(raw_read_to_eof(fd, buf, sizeof(buf)), 0); /* closed, no answer */
        close(fd);
        assert_still_serving(f);
    }
    /* A half frame and a hang-up: no answer owed, nothing breaks. */
    int fd = raw_connect(f);
    assert_int_equal(send(fd, garbage[0], 7, MSG_NOSIGNAL), 7);
    close(fd);
    assert_still_serving(f);
    /* The five refused connections and the hang-up; the server may see the
     * hang-up after the client's own calls above, so wait for it. */
    struct cr_xfer_server_stats stats = server_stats_once_closed(f, 6);
    assert_int_equal(stats.refused_malformed, 5);
    assert_int_equal(stats.refused_out_of_bounds, 0);
}

static void test_unknown_and_unregistered_segment(void **state) {
    struct fixture *f = *state;
    uint8_t buf[16];
    assert_int_equal(cr_xfer_read(f->cli, f->endpoint, "nope", seg_addr(f, 0), buf, 16),
                     CR_ERR_SEGMENT_NOT_FOUND);
    assert_non_null(strstr(cr_xfer_client_last_error(f->cli), "no such segment"));
    uint8_t *other = calloc(1, 4096);
    server_stop(f);
    assert_int_equal(cr_xfer_server_register(f->srv, "plain", other, 4096), CR_OK);
    assert_int_equal(cr_xfer_server_register(f->srv, "plain", other, 4096),
                     CR_ERR_SEGMENT_ALREADY_EXISTS);
    assert_int_equal(cr_xfer_server_register(f->srv, "bad/name", other, 4096),
                     CR_ERR_INVALID_PARAMS);
    server_start(f);
    uint64_t other_addr = (uint64_t)(uintptr_t)other;
    assert_int_equal(cr_xfer_write(f->cli, f->endpoint, "plain", other_addr + 100, "hello", 5),
                     CR_OK);
    assert_memory_equal(other + 100, "hello", 5);
    /* seg0's addresses are not plain's: each segment is checked against its own range. */
    assert_int_equal(cr_xfer_read(f->cli, f->endpoint, "plain", seg_addr(f, 0), buf, 16),
                     CR_ERR_INVALID_PARAMS);
    server_stop(f);
    assert_int_equal(cr_xfer_server_unregister(f->srv, "plain"), CR_OK);
    assert_int_equal(cr_xfer_server_unregister(f->srv, "plain"), CR_ERR_SEGMENT_NOT_FOUND);
    server_start(f);
    assert_int_equal(cr_xfer_read(f->cli, f->endpoint, "plain", other_addr, buf, 16),
                     CR_ERR_SEGMENT_NOT_FOUND);
    assert_still_serving(f);
    free(other);
}

/* A reader segment (a store server's SSD tier): its bytes come from the
 * reader; the reader's refusal is the op's failure and the connection keeps
 * serving; WRITEs are refused. */
static int fake_reader(void *arg, uint64_t addr, uint64_t len, void *dst) {
    int *calls = arg;
    (*calls)++;
    if (addr != 7) return CR_ERR_OBJECT_NOT_FOUND;
    for (uint64_t i = 0; i < len; i++) ((uint8_t *)dst)[i] = (uint8_t)(i * 3 + 1);
    return CR_OK;
}

static void test_reader_segment(void **state) {
    struct fixture *f = *state;
    static int calls;
    server_stop(f);
    assert_int_equal(cr_xfer_server_register_reader(f->srv, "seg#ssd", fake_reader, &calls), CR_OK);
    assert_int_equal(cr_xfer_server_register_reader(f->srv, "seg#ssd", fake_reader, &calls),
                     CR_ERR_SEGMENT_ALREADY_EXISTS);
    server_start(f);
    static uint8_t buf[3 << 20];
    assert_int_equal(cr_xfer_read(f->cli, f->endpoint, "seg#ssd", 7, buf, sizeof(buf)), CR_OK);
    for (size_t i = 0; i < sizeof(buf); i += 4099) assert_int_equal(buf[i], (uint8_t)(i * 3 + 1));
    assert_int_equal(cr_xfer_read(f->cli, f->endpoint, "seg#ssd", 8, buf, 16),
                     CR_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(cr_xfer_read(f->cli, f->endpoint, "seg#ssd", 7, buf, 16), CR_OK);
    assert_int_equal(calls, 3);
    assert_int_equal(cr_xfer_write(f->cli, f->endpoint, "seg#ssd", 7, "hello", 5),
                     CR_ERR_INVALID_PARAMS);
    assert_int_equal(calls, 3);
    assert_still_serving(f);
    server_stop(f);
    assert_int_equal(cr_xfer_server_unregister(f->srv, "seg#ssd"), CR_OK);
    server_start(f);
}

static void test_invalid_ops_rejected_at_submit(void **state) {
    struct fixture *f = *state;
    uint8_t buf[8];
    struct iovec iov = {buf, sizeof(buf)};
    struct counter c = {0};
    struct cr_xfer_op op = {.opcode = CR_XFER_READ, .endpoint = f->endpoint, .segment = "seg0",
                            .remote_addr = seg_addr(f, 0), .iov = &iov, .iov_count = 1,
                            .done = count_done, .arg = &c};
    struct cr_xfer_op bad = op;
    bad.opcode = 7;
    assert_int_equal(cr_xfer_submit(f->cli, &bad), CR_ERR_INVALID_PARAMS);
    bad = op;
    bad.segment = "";
    assert_int_equal(cr_xfer_submit(f->cli, &bad), CR_ERR_INVALID_PARAMS);
    bad = op;
    bad.iov_count = CR_XFER_OP_IOV_MAX + 1;
    assert_int_equal(cr_xfer_submit(f->cli, &bad), CR_ERR_INVALID_PARAMS);
    bad = op;
    bad.remote_addr = UINT64_MAX - 2;
    assert_int_equal(cr_xfer_submit(f->cli, &bad), CR_ERR_INVALID_PARAMS);
    bad = op;
    bad.endpoint = "not-an-endpoint";
    assert_int_equal(cr_xfer_submit(f->cli, &bad), CR_ERR_INVALID_PARAMS);
    assert_non_null(strstr(cr_xfer_client_last_error(f->cli), "not-an-endpoint"));
    assert_int_equal(cr_xfer_client_in_flight(f->cli), 0);
    assert_int_equal(c.done, 0); /* no callback for an op never queued */
}

static void test_dead_and_silent_peers(void **state) {
    struct fixture *f = *state;
    /* Nobody listens: connect fails at submit, naming the peer. */
    int probe = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(probe, (struct sockaddr *)&addr, sizeof(addr)), 0);
    socklen_t len = sizeof(addr);
    getsockname(probe, (struct sockaddr *)&addr, &len);
    char dead[64];
    snprintf(dead, sizeof(dead), "127.0.0.1:%u", ntohs(addr.sin_port));
    uint8_t buf[16];
    assert_int_equal(cr_xfer_read(f->cli, dead, "seg0", 0, buf, 16), CR_ERR_IO);
    assert_non_null(strstr(cr_xfer_client_last_error(f->cli), dead));
    /* Listening but never answering: the op times out, naming the peer. */
    assert_int_equal(listen(probe, 4), 0);
    struct cr_xfer_client *cli;
    struct cr_xfer_client_config cfg = {.shm_disabled = true, .op_timeout_ms = 200};
    assert_int_equal(cr_xfer_client_create(&cfg, &cli), CR_OK);
    assert_int_equal(cr_xfer_read(cli, dead, "seg0", 0, buf, 16), CR_ERR_TIMEOUT);
    assert_non_null(strstr(cr_xfer_client_last_error(cli), dead));
    cr_xfer_client_destroy(cli);
    close(probe);
}

/* A port that answers, but not as a transfer server (an HTTP gateway accepts
 * connects to made-up hosts): the first answer names the peer and says
 * "connect", never "out of step". */
struct impostor {
    int listener;
    const char *answer;
};

static void *impostor_thread(void *arg) {
    struct impostor *imp = arg;
    int fd = accept(imp->listener, NULL, NULL);
    assert_true(fd >= 0);
    uint8_t req[64];
    assert_true(recv(fd, req, sizeof(req), 0) > 0);
    size_t n = strlen(imp->answer);
    assert_int_equal(send(fd, imp->answer, n, MSG_NOSIGNAL), (ssize_t)n);
    close(fd);
    return NULL;
}

static void test_not_a_transfer_server(void **state) {
    struct fixture *f = *state;
    const char *answers[] = {"HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n",
                             "SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n"};
    const char *expect[] = {"connect: an HTTP server answered", "connect: the peer is not"};
    for (int i = 0; i < 2; i++) {
        struct impostor imp = {.listener = socket(AF_INET, SOCK_STREAM, 0), .answer = answers[i]};
        struct sockaddr_in addr = {.sin_family = AF_INET,
                                   .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        assert_int_equal(bind(imp.listener, (struct sockaddr *)&addr, sizeof(addr)), 0);
        assert_int_equal(listen(imp.listener, 4), 0);
        socklen_t len = sizeof(addr);
        getsockname(imp.listener, (struct sockaddr *)&addr, &len);
        char endpoint[64];
        snprintf(endpoint, sizeof(endpoint), "127.0.0.1:%u", ntohs(addr.sin_port));
        pthread_t thread;
        assert_int_equal(pthread_create(&thread, NULL, impostor_thread, &imp), 0);
        uint8_t buf[16];
        assert_int_equal(cr_xfer_read(f->cli, endpoint, "seg0", 0, buf, 16), CR_ERR_IO);
        const char *error = cr_xfer_client_last_error(f->cli);
        assert_non_null(strstr(error, endpoint));
        assert_non_null(strstr(error, expect[i]));
        assert_null(strstr(error, "out of step"));
        pthread_join(thread, NULL);
        close(imp.listener);
    }
}

static void test_connection_limit(void **state) {
    struct fixture *f = *state;
    server_stop(f);
    struct cr_xfer_server *small;
    struct cr_xfer_server_config cfg = {.max_connections = 2};
    assert_int_equal(cr_xfer_server_create(&cfg, &small), CR_OK);
    char endpoint[64];
    snprintf(endpoint, sizeof(endpoint), "%s", cr_xfer_server_endpoint(small));
    struct fixture g = {.srv = small};
    snprintf(g.endpoint, sizeof(g.endpoint), "%s", endpoint);
    int fds[3];
    for (int i = 0; i < 3; i++) fds[i] = raw_connect(&g);
    /* Serve until all three were accepted or refused. */
    struct cr_xfer_server_stats stats;
    do {
        cr_xfer_server_run(small, 10);
        cr_xfer_server_get_stats(small, &stats);
    } while (stats.connections_accepted + stats.connections_refused < 3);
    assert_int_equal(stats.connections_accepted, 2);
    assert_int_equal(stats.connections_refused, 1);
    assert_int_equal(stats.connections_open, 2);
    for (int i = 0; i < 3; i++) close(fds[i]);
    cr_xfer_server_destroy(small);
    server_start(f);
}

/* Buffers are recorded without a device too: unregister refuses while an
 * op uses the buffer, and refuses one that is not registered. */
static void test_unregister_waits_for_ops(void **state) {
    check_unregister_waits_for_ops(*state);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frame_round_trip_and_truncation),
        cmocka_unit_test(test_frame_refuses_malformed),
        cmocka_unit_test(test_range_inside),
        cmocka_unit_test(test_endpoint_parse),
        cmocka_unit_test(test_segment_alloc),
        cmocka_unit_test_setup_teardown(test_round_trips_random_sizes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_in_flight_scatter_gather, setup, teardown),
        cmocka_unit_test_setup_teardown(test_striped_odd_lengths, setup, teardown),
        cmocka_unit_test_setup_teardown(test_out_of_bounds_refused_others_served, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_malformed_frames_close_only_that_connection, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_unknown_and_unregistered_segment, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reader_segment, setup, teardown),
        cmocka_unit_test_setup_teardown(test_invalid_ops_rejected_at_submit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dead_and_silent_peers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_a_transfer_server, setup, teardown),
        cmocka_unit_test_setup_teardown(test_connection_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unregister_waits_for_ops, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
