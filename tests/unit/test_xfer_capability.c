/* Data-plane capabilities on the transfer server (src/rdma/xfer_server_cap.c)
 * and in the tcp frame (src/rdma/xfer_frame.c): a server that requires them
 * refuses a raw request without one, with a forged one, an expired one, one
 * for another range or mode; a client op that carries the master's
 * capability is served, striped or not.  The server's clock is injected. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/xfer_cap.h"
#include "crescent/error.h"
#include "rdma/xfer.h"
#include "rdma/xfer_frame.h"
#include "rdma/xfer_internal.h"

#include "xfer_fixture.h"

#define NOW 1800000000000ull
static _Atomic uint64_t clock_ms = NOW;
static uint64_t test_clock(void *arg) {
    (void)arg;
    return atomic_load(&clock_ms);
}

static const uint8_t KEY[CR_CAP_KEY_BYTES] = {9, 8, 7, 6, 5, 4, 3, 2, 1};

static int setup_requiring(void **state, bool require) {
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    atomic_store(&clock_ms, NOW);
    assert_int_equal(cr_xfer_segment_alloc(SEGMENT_BYTES, &f->seg), CR_OK);
    struct cr_xfer_server_config scfg = {.require_capability = require, .shm_disabled = true,
                                         .verbs_disabled = true, .capability_skew_ms = 500,
                                         .now_ms = test_clock};
    assert_int_equal(cr_xfer_server_create(&scfg, &f->srv), CR_OK);
    assert_int_equal(cr_xfer_server_register_segment(f->srv, "seg0", &f->seg), CR_OK);
    assert_int_equal(cr_xfer_server_set_key(f->srv, "seg0", KEY), CR_OK);
    assert_int_equal(cr_xfer_server_set_key(f->srv, "nope", KEY), CR_ERR_SEGMENT_NOT_FOUND);
    snprintf(f->endpoint, sizeof(f->endpoint), "%s", cr_xfer_server_endpoint(f->srv));
    struct cr_xfer_client_config cfg = {.shm_disabled = true, .verbs_disabled = true};
    assert_int_equal(cr_xfer_client_create(&cfg, &f->cli), CR_OK);
    server_start(f);
    *state = f;
    return 0;
}

static int setup_required(void **state) { return setup_requiring(state, true); }
static int setup_optional(void **state) { return setup_requiring(state, false); }

static struct cr_cap cap_for(const uint8_t *key, uint64_t addr, uint64_t length, uint8_t mode,
                             uint64_t expiry) {
    struct cr_cap cap = {.addr = addr, .length = length, .expiry_ms = expiry, .mode = mode};
    cr_cap_sign(key, "seg0", 4, &cap);
    return cap;
}

/* ---- the frame ---------------------------------------------------------- */

static void test_frame_carries_capability(void **state) {
    (void)state;
    struct cr_cap cap = cap_for(KEY, 4096, 8192, CR_CAP_WRITE, NOW);
    struct cr_xfer_request in = {.op = CR_XFER_FRAME_WRITE, .name_len = 4, .request_id = 3,
                                 .addr = 4096, .length = 100, .name = "seg0", .has_cap = true,
                                 .cap = cap};
    uint8_t buf[CR_XFER_REQUEST_MAX_BYTES];
    size_t len = cr_xfer_request_encode(&in, buf);
    assert_int_equal(len, CR_XFER_REQUEST_HEADER_BYTES + 4 + CR_CAP_BYTES);
    assert_int_equal(buf[2], CR_XFER_FLAG_CAP);
    struct cr_xfer_request out;
    size_t used = 0;
    for (size_t cut = 0; cut < len; cut++) /* every truncation waits for more */
        assert_int_equal(cr_xfer_request_parse(buf, cut, 1u << 30, &out, &used), CR_ERR_AGAIN);
    assert_int_equal(cr_xfer_request_parse(buf, len, 1u << 30, &out, &used), CR_OK);
    assert_int_equal(used, len);
    assert_true(out.has_cap);
    assert_int_equal(out.cap.addr, 4096);
    assert_int_equal(out.cap.mode, CR_CAP_WRITE);
    assert_memory_equal(out.cap.mac, cap.mac, CR_CAP_MAC_BYTES);
    /* a capability whose mode or reserved bytes do not decode: malformed */
    uint8_t bad[CR_XFER_REQUEST_MAX_BYTES];
    memcpy(bad, buf, len);
    bad[CR_XFER_REQUEST_HEADER_BYTES + 4 + 24] = 4;
    assert_int_equal(cr_xfer_request_parse(bad, len, 1u << 30, &out, &used), CR_ERR_PROTOCOL);
    memcpy(bad, buf, len);
    bad[CR_XFER_REQUEST_HEADER_BYTES + 4 + 30] = 1;
    assert_int_equal(cr_xfer_request_parse(bad, len, 1u << 30, &out, &used), CR_ERR_PROTOCOL);
    /* without the flag the same bytes are a plain request and the capability is
     * the next frame's header: an old client's frame carries none */
    memcpy(bad, buf, len);
    bad[2] = 0;
    assert_int_equal(cr_xfer_request_parse(bad, len, 1u << 30, &out, &used), CR_OK);
    assert_false(out.has_cap);
    assert_int_equal(used, CR_XFER_REQUEST_HEADER_BYTES + 4);
}

/* ---- the server --------------------------------------------------------- */

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

/* Sends one request (a WRITE with its payload of zeros) on a new connection;
 * returns the response's status, and checks that a refusal closes it. */
static int32_t raw_request(struct fixture *f, uint8_t op, uint64_t addr, uint64_t len,
                           const struct cr_cap *cap) {
    int fd = raw_connect(f);
    uint8_t buf[CR_XFER_REQUEST_MAX_BYTES];
    struct cr_xfer_request req = {.op = op, .name_len = 4, .request_id = 5, .addr = addr,
                                  .length = op == CR_XFER_FRAME_KEY ? 0 : len, .name = "seg0",
                                  .has_cap = cap != NULL};
    if (op == CR_XFER_FRAME_KEY) req.addr = 0;
    if (cap != NULL) req.cap = *cap;
    size_t n = cr_xfer_request_encode(&req, buf);
    assert_int_equal(send(fd, buf, n, MSG_NOSIGNAL), (ssize_t)n);
    if (op == CR_XFER_FRAME_WRITE) {
        uint8_t zeros[4096] = {0};
        assert_true(len <= sizeof(zeros));
        assert_int_equal(send(fd, zeros, len, MSG_NOSIGNAL), (ssize_t)len);
    }
    uint8_t head[CR_XFER_RESPONSE_BYTES];
    assert_int_equal(recv(fd, head, sizeof(head), MSG_WAITALL), (ssize_t)sizeof(head));
    struct cr_xfer_response resp;
    assert_int_equal(cr_xfer_response_parse(head, &resp), CR_OK);
    if (resp.status != CR_OK) {
        assert_int_equal(resp.length, 0); /* no byte of the segment */
        uint8_t more[64];
        /* Then closed: an orderly end, or a reset when the server closed
         * with a refused write's bytes still unread in its socket. */
        ssize_t got = recv(fd, more, sizeof(more), 0);
        assert_true(got == 0 || (got < 0 && errno == ECONNRESET));
    }
    close(fd);
    return resp.status;
}

static void test_raw_clients_refused(void **state) {
    struct fixture *f = *state;
    uint64_t base = seg_addr(f, 0);
    memset(f->seg.base, 0xab, 4096);
    struct cr_cap rd = cap_for(KEY, base, 4096, CR_CAP_READ, NOW + 1000);
    uint8_t other[CR_CAP_KEY_BYTES] = {1};
    struct cr_cap forged = cap_for(other, base, 4096, CR_CAP_READ, NOW + 1000);
    struct cr_cap widened = rd;
    widened.length = SEGMENT_BYTES;
    struct cr_cap expired = cap_for(KEY, base, 4096, CR_CAP_READ, NOW - 501);
    /* no capability: an old client's frame */
    assert_int_equal(raw_request(f, CR_XFER_FRAME_READ, base, 4096, NULL), CR_ERR_ILLEGAL_CLIENT);
    assert_int_equal(raw_request(f, CR_XFER_FRAME_WRITE, base, 16, NULL), CR_ERR_ILLEGAL_CLIENT);
    assert_int_equal(raw_request(f, CR_XFER_FRAME_READ, base, 4096, &forged), CR_ERR_ILLEGAL_CLIENT);
    assert_int_equal(raw_request(f, CR_XFER_FRAME_READ, base, 4096, &widened), CR_ERR_ILLEGAL_CLIENT);
    assert_int_equal(raw_request(f, CR_XFER_FRAME_READ, base, 4096, &expired), CR_ERR_ILLEGAL_CLIENT);
    assert_int_equal(raw_request(f, CR_XFER_FRAME_READ, base + 1, 4096, &rd), CR_ERR_ILLEGAL_CLIENT);
    assert_int_equal(raw_request(f, CR_XFER_FRAME_WRITE, base, 16, &rd), CR_ERR_ILLEGAL_CLIENT);
    /* an rkey is handed out only for a capability */
    assert_int_equal(raw_request(f, CR_XFER_FRAME_KEY, 0, 0, NULL), CR_ERR_ILLEGAL_CLIENT);
    for (int i = 0; i < 4096; i++) assert_int_equal(((uint8_t *)f->seg.base)[i], 0xab); /* nothing written */
    /* the real one, inside its skew allowance */
    assert_int_equal(raw_request(f, CR_XFER_FRAME_READ, base + 100, 200, &rd), CR_OK);
    struct cr_cap late = cap_for(KEY, base, 4096, CR_CAP_READ, NOW - 500);
    assert_int_equal(raw_request(f, CR_XFER_FRAME_READ, base, 4096, &late), CR_OK);
    assert_int_equal(raw_request(f, CR_XFER_FRAME_KEY, 0, 0, &rd), CR_OK); /* no device: length 0 */
    struct cr_xfer_server_stats st = server_stats(f);
    assert_int_equal(st.refused_capability[CR_CAP_MISSING], 3);
    assert_int_equal(st.refused_capability[CR_CAP_BAD_MAC], 2);
    assert_int_equal(st.refused_capability[CR_CAP_EXPIRED], 1);
    assert_int_equal(st.refused_capability[CR_CAP_OUT_OF_RANGE], 1);
    assert_int_equal(st.refused_capability[CR_CAP_WRONG_MODE], 1);
    assert_int_equal(st.capability_checked, 3);
    assert_int_equal(st.requests_read, 2);
    assert_int_equal(st.requests_written, 0);
    /* the server's clock moves on: the same capability is refused */
    atomic_store(&clock_ms, NOW + 1501);
    assert_int_equal(raw_request(f, CR_XFER_FRAME_READ, base, 4096, &rd), CR_ERR_ILLEGAL_CLIENT);
}

/* libcrescent's path: the op carries the capability, every stripe sends it. */
static void test_client_with_capability(void **state) {
    struct fixture *f = *state;
    size_t len = 9 * MIB + 123; /* striped over the peer's connections */
    uint8_t *src = malloc(len), *dst = malloc(len);
    assert_non_null(src);
    assert_non_null(dst);
    fill_random(src, len, 42);
    uint64_t at = seg_addr(f, 4096);
    struct cr_cap wr = cap_for(KEY, at, len, CR_CAP_WRITE, NOW + 60000);
    struct cr_cap rd = cap_for(KEY, at, len, CR_CAP_READ, NOW + 60000);
    struct counter done = {0};
    struct iovec iov = {src, len};
    struct cr_xfer_op op = {.opcode = CR_XFER_WRITE, .endpoint = f->endpoint, .segment = "seg0",
                            .remote_addr = at, .cap = &wr, .iov = &iov, .iov_count = 1,
                            .done = count_done, .arg = &done};
    assert_int_equal(cr_xfer_submit(f->cli, &op), CR_OK);
    while (done.done < 1) cr_xfer_client_poll(f->cli, 100);
    assert_int_equal(done.failed, 0);
    assert_memory_equal((uint8_t *)f->seg.base + 4096, src, len);
    iov = (struct iovec){dst, len};
    op.opcode = CR_XFER_READ;
    op.cap = &rd;
    assert_int_equal(cr_xfer_submit(f->cli, &op), CR_OK);
    while (done.done < 2) cr_xfer_client_poll(f->cli, 100);
    assert_int_equal(done.failed, 0);
    assert_memory_equal(dst, src, len);
    /* without one, through the client: refused with a message that says so */
    assert_int_equal(cr_xfer_read(f->cli, f->endpoint, "seg0", at, dst, 64), CR_ERR_ILLEGAL_CLIENT);
    assert_non_null(strstr(cr_xfer_client_last_error(f->cli), "no valid capability"));
    free(src);
    free(dst);
}

/* Not required: requests without one are served; a wrong one is refused. */
static void test_optional_still_checks_what_is_sent(void **state) {
    struct fixture *f = *state;
    uint64_t base = seg_addr(f, 0);
    assert_int_equal(raw_request(f, CR_XFER_FRAME_READ, base, 4096, NULL), CR_OK);
    assert_int_equal(raw_request(f, CR_XFER_FRAME_WRITE, base, 16, NULL), CR_OK);
    struct cr_cap rd = cap_for(KEY, base, 4096, CR_CAP_READ, NOW + 1000);
    assert_int_equal(raw_request(f, CR_XFER_FRAME_READ, base, 4096, &rd), CR_OK);
    rd.expiry_ms++;
    assert_int_equal(raw_request(f, CR_XFER_FRAME_READ, base, 4096, &rd), CR_ERR_ILLEGAL_CLIENT);
    struct cr_xfer_server_stats st = server_stats(f);
    assert_int_equal(st.refused_capability[CR_CAP_BAD_MAC], 1);
    assert_int_equal(st.refused_capability[CR_CAP_MISSING], 0);
}

/* shm cannot be checked per access: the memfd is handed out only for a
 * capability when the server requires them.  Without one the client's op
 * goes by tcp (refused there too); with one the segment is mapped. */
static void test_shm_map_needs_capability(void **state) {
    (void)state;
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    atomic_store(&clock_ms, NOW);
    assert_int_equal(cr_xfer_segment_alloc(SEGMENT_BYTES, &f->seg), CR_OK);
    struct cr_xfer_server_config scfg = {.require_capability = true, .verbs_disabled = true,
                                         .now_ms = test_clock};
    assert_int_equal(cr_xfer_server_create(&scfg, &f->srv), CR_OK);
    assert_int_equal(cr_xfer_server_register_segment(f->srv, "seg0", &f->seg), CR_OK);
    assert_int_equal(cr_xfer_server_set_key(f->srv, "seg0", KEY), CR_OK);
    snprintf(f->endpoint, sizeof(f->endpoint), "%s", cr_xfer_server_endpoint(f->srv));
    struct cr_xfer_client_config cfg = {.verbs_disabled = true};
    assert_int_equal(cr_xfer_client_create(&cfg, &f->cli), CR_OK);
    server_start(f);
    uint8_t buf[4096];
    uint64_t at = seg_addr(f, 0);
    assert_int_equal(cr_xfer_read(f->cli, f->endpoint, "seg0", at, buf, sizeof(buf)),
                     CR_ERR_ILLEGAL_CLIENT);
    struct cr_xfer_server_stats st = server_stats(f);
    assert_int_equal(st.shm_maps, 0);
    assert_true(st.refused_capability[CR_CAP_MISSING] >= 2); /* the map request and the tcp read */
    struct cr_cap rd = cap_for(KEY, at, sizeof(buf), CR_CAP_READ, NOW + 1000);
    struct counter done = {0};
    struct iovec iov = {buf, sizeof(buf)};
    struct cr_xfer_op op = {.opcode = CR_XFER_READ, .endpoint = f->endpoint, .segment = "seg0",
                            .remote_addr = at, .cap = &rd, .iov = &iov, .iov_count = 1,
                            .done = count_done, .arg = &done};
    assert_int_equal(cr_xfer_submit(f->cli, &op), CR_OK);
    while (done.done < 1) cr_xfer_client_poll(f->cli, 100);
    assert_int_equal(done.failed, 0);
    assert_string_equal(cr_xfer_client_transport(f->cli, f->endpoint), "shm");
    st = server_stats(f);
    assert_int_equal(st.shm_maps, 1);
    *state = f;
}

int main(void) {
    (void)round_trip; /* the shared fixture's helpers this file does not need */
    (void)setup_with;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frame_carries_capability),
        cmocka_unit_test_setup_teardown(test_raw_clients_refused, setup_required, teardown),
        cmocka_unit_test_setup_teardown(test_client_with_capability, setup_required, teardown),
        cmocka_unit_test_setup_teardown(test_optional_still_checks_what_is_sent, setup_optional,
                                        teardown),
        cmocka_unit_test_teardown(test_shm_map_needs_capability, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
