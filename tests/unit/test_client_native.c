/* libcrescent's native transport (crescent://HOST:PORT,
 * src/client/client_tcp.c) against a scripted server on loopback: replies
 * cut into single bytes, a connection made only by the first call, a reply
 * frame out of bounds closing the connection and the next call connecting
 * again, CURVE keys refused for a native endpoint. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "crescent/client.h"
#include "crescent/error.h"
#include "master.pb-c.h"
#include "msgs/rpc_stream.h"

/* ---- a scripted native server ---- */

struct server {
    int listen_fd;
    uint16_t port;
    int mode; /* 0: answer ExistKey exists=true, split in 1-byte writes; 1: send a bad frame */
    int accepted;
    pthread_t thread;
};

static bool read_exact(int fd, uint8_t *p, size_t n) {
    while (n > 0) {
        ssize_t got = read(fd, p, n);
        if (got <= 0) return false;
        p += got, n -= (size_t)got;
    }
    return true;
}

static void answer(int fd, int mode, uint64_t id) {
    if (mode == 1) {
        uint8_t bad[4];
        cr_rpc_stream_put_len(bad, 3); /* below a reply's header */
        assert_int_equal(write(fd, bad, 4), 4);
        return;
    }
    Crescent__Master__ExistKeyResponse resp = CRESCENT__MASTER__EXIST_KEY_RESPONSE__INIT;
    resp.has_exists = 1, resp.exists = 1;
    uint8_t body[64];
    size_t len = protobuf_c_message_pack(&resp.base, body);
    uint8_t out[CR_RPC_STREAM_REPLY_PREFIX + 64];
    cr_rpc_stream_reply_prefix(out, id, CR_OK, len);
    memcpy(out + CR_RPC_STREAM_REPLY_PREFIX, body, len);
    for (size_t i = 0; i < CR_RPC_STREAM_REPLY_PREFIX + len; i++) /* cut everywhere */
        assert_int_equal(write(fd, out + i, 1), 1);
}

/* Serves two connections: each one request is read whole, its envelope
 * checked, and answered per `mode`; mode 1 switches to 0 for the second. */
static void *serve(void *arg) {
    struct server *s = arg;
    for (int conn = 0; conn < 2; conn++) {
        int fd = accept(s->listen_fd, NULL, NULL);
        if (fd < 0) return NULL;
        s->accepted++;
        uint8_t head[4 + CR_RPC_REQUEST_HEADER_BYTES];
        while (read_exact(fd, head, sizeof(head))) {
            size_t n = 0;
            assert_int_equal(cr_rpc_stream_next(head, sizeof(head), CR_RPC_REQUEST_HEADER_BYTES,
                                                CR_RPC_STREAM_REQUEST_MAX, &n),
                             n == CR_RPC_REQUEST_HEADER_BYTES ? CR_RPC_STREAM_FRAME
                                                              : CR_RPC_STREAM_MORE);
            assert_int_equal(cr_rpc_get_u16(head + 4), CRESCENT__MASTER__METHOD__EXIST_KEY);
            uint8_t body[512];
            assert_true(n - CR_RPC_REQUEST_HEADER_BYTES <= sizeof(body));
            assert_true(read_exact(fd, body, n - CR_RPC_REQUEST_HEADER_BYTES));
            answer(fd, s->mode, cr_rpc_get_u64(head + 6));
            if (s->mode == 1) {
                s->mode = 0;
                break;
            }
        }
        close(fd);
    }
    return NULL;
}

static void server_start(struct server *s, int mode) {
    s->mode = mode;
    s->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(s->listen_fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(s->listen_fd, 4), 0);
    socklen_t len = sizeof(a);
    getsockname(s->listen_fd, (struct sockaddr *)&a, &len);
    s->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&s->thread, NULL, serve, s), 0);
}

static cr_client *open_native(const struct server *s) {
    char endpoint[64], error[256];
    snprintf(endpoint, sizeof(endpoint), "crescent://127.0.0.1:%u", s->port);
    cr_client *c = NULL;
    struct cr_client_options o = {.timeout_ms = 10000};
    assert_int_equal(cr_client_open(endpoint, &o, &c, error, sizeof(error)), CR_OK);
    return c;
}

static void test_client_call_over_native(void **unused) {
    (void)unused;
    struct server s = {0};
    server_start(&s, 0);
    cr_client *c = open_native(&s);
    for (int i = 0; i < 3; i++) {
        bool exists = false;
        assert_int_equal(cr_client_exist_key(c, NULL, "k", &exists), CR_OK);
        assert_true(exists);
    }
    cr_client_close(c);
    /* The server's second accept: a client that never calls never connects. */
    c = open_native(&s);
    cr_client_close(c);
    c = open_native(&s);
    bool exists = false;
    assert_int_equal(cr_client_exist_key(c, NULL, "k", &exists), CR_OK);
    cr_client_close(c);
    pthread_join(s.thread, NULL);
    close(s.listen_fd);
    assert_int_equal(s.accepted, 2);
}

static void test_client_bad_frame_closes_and_reconnects(void **unused) {
    (void)unused;
    struct server s = {0};
    server_start(&s, 1);
    cr_client *c = open_native(&s);
    bool exists = false;
    assert_int_equal(cr_client_exist_key(c, NULL, "k", &exists), CR_ERR_PROTOCOL);
    assert_non_null(strstr(cr_client_last_error(c), "outside"));
    /* The next call makes a new connection and is answered. */
    assert_int_equal(cr_client_exist_key(c, NULL, "k", &exists), CR_OK);
    assert_true(exists);
    cr_client_close(c);
    pthread_join(s.thread, NULL);
    close(s.listen_fd);
    assert_int_equal(s.accepted, 2);
}

static void test_client_refuses_curve_on_native(void **unused) {
    (void)unused;
    cr_client *c = NULL;
    char error[256];
    struct cr_client_options o = {.curve_server_key = "x"};
    assert_int_equal(cr_client_open("crescent://127.0.0.1:1", &o, &c, error, sizeof(error)),
                     CR_ERR_INVALID_PARAMS);
    assert_null(c);
    assert_non_null(strstr(error, "no encryption"));
    assert_int_equal(cr_client_open("crescent://nocolon", NULL, &c, error, sizeof(error)),
                     CR_ERR_INVALID_PARAMS);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_client_call_over_native),
        cmocka_unit_test(test_client_bad_frame_closes_and_reconnects),
        cmocka_unit_test(test_client_refuses_curve_on_native),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
