/* The same-host shm RPC transport: the rings (msgs/rpc_shm.h) and the
 * server side (rpc/rpc_shm.c) driven by a hand-made client in the same
 * thread, so every step is deterministic: the test writes into a ring,
 * calls serve/poll/flush, and reads what came back.  The client can
 * misbehave as a hostile one would: indices outside the ring, a frame
 * length outside the bounds, a bad hello, leaving with calls in flight. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rpc/rpc_shm.h"
#include "crescent/error.h"
#include "msgs/rpc_stream.h"

/* ---- the rings alone ---- */

static void test_ring_wraps_and_counts(void **unused) {
    (void)unused;
    struct cr_rpc_shm_ring_ctl ctl = {0};
    uint8_t data[16], out[16];
    struct cr_rpc_shm_ring prod, cons;
    cr_rpc_shm_ring_init(&prod, &ctl, data, sizeof(data));
    cr_rpc_shm_ring_init(&cons, &ctl, data, sizeof(data));
    for (int round = 0; round < 10; round++) { /* crosses the end many times */
        uint8_t in[11];
        for (int i = 0; i < 11; i++) in[i] = (uint8_t)(round * 11 + i);
        assert_int_equal(cr_rpc_shm_ring_room(&prod), 16);
        cr_rpc_shm_ring_put(&prod, in, 11);
        assert_int_equal(cr_rpc_shm_ring_room(&prod), 5);
        assert_int_equal(cr_rpc_shm_ring_readable(&cons), 11);
        cr_rpc_shm_ring_take(&cons, out, 11);
        assert_memory_equal(in, out, 11);
        assert_int_equal(cr_rpc_shm_ring_readable(&cons), 0);
    }
}

/* A peer's index more than a ring away from ours is refused, whichever
 * way it points: the reader never touches bytes outside the ring. */
static void test_ring_refuses_peer_indices_outside(void **unused) {
    (void)unused;
    struct cr_rpc_shm_ring_ctl ctl = {0};
    uint8_t data[16];
    struct cr_rpc_shm_ring cons, prod;
    cr_rpc_shm_ring_init(&cons, &ctl, data, sizeof(data));
    cr_rpc_shm_ring_init(&prod, &ctl, data, sizeof(data));
    ctl.tail = 17; /* one past a full ring */
    assert_int_equal(cr_rpc_shm_ring_readable(&cons), -1);
    ctl.tail = 16;
    assert_int_equal(cr_rpc_shm_ring_readable(&cons), 16);
    cons.pos = 8;
    ctl.tail = 4; /* behind the consumer */
    assert_int_equal(cr_rpc_shm_ring_readable(&cons), -1);
    ctl.tail = UINT64_MAX;
    assert_int_equal(cr_rpc_shm_ring_readable(&cons), -1);
    prod.pos = 20;
    ctl.head = 21; /* ahead of the producer */
    assert_int_equal(cr_rpc_shm_ring_room(&prod), -1);
    ctl.head = 3; /* more than a ring behind */
    assert_int_equal(cr_rpc_shm_ring_room(&prod), -1);
    ctl.head = 4;
    assert_int_equal(cr_rpc_shm_ring_room(&prod), 0);
}

/* The sleep handshake: a consumer that armed is woken once; a consumer
 * that finds bytes while arming does not sleep. */
static void test_ring_sleep_handshake(void **unused) {
    (void)unused;
    struct cr_rpc_shm_ring_ctl ctl = {0};
    uint8_t data[16], b = 7;
    struct cr_rpc_shm_ring cons, prod;
    cr_rpc_shm_ring_init(&cons, &ctl, data, sizeof(data));
    cr_rpc_shm_ring_init(&prod, &ctl, data, sizeof(data));
    assert_false(cr_rpc_shm_ring_needs_wake(&prod)); /* nobody sleeps */
    assert_true(cr_rpc_shm_ring_arm(&cons));
    cr_rpc_shm_ring_put(&prod, &b, 1);
    assert_true(cr_rpc_shm_ring_needs_wake(&prod));
    assert_false(cr_rpc_shm_ring_needs_wake(&prod)); /* one wake per sleep */
    assert_false(cr_rpc_shm_ring_arm(&cons));        /* a byte waits: no sleep */
    assert_int_equal(ctl.sleeping, 0);
    /* Room: a producer waiting on a full ring is woken by the consumer. */
    uint8_t fill[15] = {0}, out[16];
    cr_rpc_shm_ring_put(&prod, fill, 15);
    assert_true(cr_rpc_shm_ring_arm_room(&prod));
    cr_rpc_shm_ring_take(&cons, out, 16);
    assert_true(cr_rpc_shm_ring_room_needs_wake(&cons));
    assert_false(cr_rpc_shm_ring_arm_room(&prod)); /* room now */
}

/* ---- the server, with a hand-made client ---- */

#define RING 4096u

struct test_srv {
    struct cr_rpc_shm_server *srv;
    char path[64];
    int frames;
    bool hold;               /* true: calls go in flight, answered by the test */
    uint64_t last_client, last_id;
    size_t last_len;
};

/* Echoes the body back under the request's id, or holds the call. */
static bool on_frame(void *ctx, uint64_t client, const uint8_t *p, size_t len) {
    struct test_srv *t = ctx;
    assert_true(len >= CR_RPC_REQUEST_HEADER_BYTES);
    t->frames++;
    t->last_client = client;
    t->last_id = cr_rpc_get_u64(p + CR_RPC_METHOD_BYTES);
    t->last_len = len;
    if (t->hold) return true;
    assert_true(cr_rpc_shm_server_reply(t->srv, client, t->last_id, CR_OK,
                                        p + CR_RPC_REQUEST_HEADER_BYTES,
                                        len - CR_RPC_REQUEST_HEADER_BYTES, false));
    return false;
}

static void srv_open(struct test_srv *t, uint32_t clients_max) {
    memset(t, 0, sizeof(*t));
    snprintf(t->path, sizeof(t->path), "@crescent-test-rpc-shm/%d", (int)getpid());
    struct cr_rpc_shm_options o = {.path = t->path, .clients_max = clients_max,
                                   .ring_bytes = RING, .queue_max = 4, .on_frame = on_frame,
                                   .ctx = t};
    char why[256];
    assert_int_equal(cr_rpc_shm_server_open(&o, &t->srv, why, sizeof(why)), CR_OK);
}

struct raw_client {
    int sock, to_server, to_client;
    void *map;
    struct cr_rpc_shm_header *h;
    struct cr_rpc_shm_ring req, rep;
    struct cr_rpc_shm_welcome welcome;
};

/* Connects and says hello; the welcome is read by raw_welcome after the
 * server served. */
static void raw_connect(struct raw_client *rc, const char *path, const void *hello,
                        size_t hello_len) {
    memset(rc, 0, sizeof(*rc));
    rc->to_server = rc->to_client = -1;
    struct sockaddr_un addr;
    socklen_t len;
    assert_true(cr_rpc_shm_sockaddr(path, &addr, &len));
    rc->sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    assert_int_equal(connect(rc->sock, (struct sockaddr *)&addr, len), 0);
    struct cr_rpc_shm_hello good = {.magic = CR_RPC_SHM_MAGIC, .version = CR_RPC_SHM_VERSION};
    if (hello == NULL) hello = &good, hello_len = sizeof(good);
    assert_int_equal(send(rc->sock, hello, hello_len, 0), (ssize_t)hello_len);
}

/* Reads the welcome; maps the rings when it carries them. */
static int32_t raw_welcome(struct raw_client *rc) {
    int fds[CR_RPC_SHM_FDS];
    ssize_t n = cr_rpc_shm_recv_welcome(rc->sock, MSG_DONTWAIT, &rc->welcome, fds);
    assert_int_equal(n, (ssize_t)sizeof(rc->welcome));
    if (rc->welcome.status != CR_OK) return rc->welcome.status;
    assert_true(fds[0] >= 0 && fds[1] >= 0 && fds[2] >= 0); /* the three came */
    assert_int_equal(rc->welcome.ring_bytes, RING);
    rc->map = mmap(NULL, cr_rpc_shm_map_bytes(RING), PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
    assert_true(rc->map != MAP_FAILED);
    close(fds[0]);
    rc->to_server = fds[1];
    rc->to_client = fds[2];
    rc->h = rc->map;
    uint8_t *rings = (uint8_t *)rc->map + CR_RPC_SHM_HEADER_BYTES;
    cr_rpc_shm_ring_init(&rc->req, &rc->h->requests, rings, RING);
    cr_rpc_shm_ring_init(&rc->rep, &rc->h->replies, rings + RING, RING);
    return CR_OK;
}

static void raw_close(struct raw_client *rc) {
    if (rc->map != NULL) munmap(rc->map, cr_rpc_shm_map_bytes(RING));
    int fds[] = {rc->sock, rc->to_server, rc->to_client};
    for (int i = 0; i < 3; i++)
        if (fds[i] >= 0) close(fds[i]);
    memset(rc, 0, sizeof(*rc));
}

static void ready_client(struct test_srv *t, struct raw_client *rc) {
    raw_connect(rc, t->path, NULL, 0);
    cr_rpc_shm_server_serve(t->srv);
    assert_int_equal(raw_welcome(rc), CR_OK);
}

/* Builds a request frame [len][method][id][body of body_len bytes]. */
static size_t build(uint8_t *out, uint64_t id, size_t body_len) {
    cr_rpc_stream_put_len(out, (uint32_t)(CR_RPC_REQUEST_HEADER_BYTES + body_len));
    cr_rpc_put_u16(out + 4, 3);
    cr_rpc_put_u64(out + 6, id);
    for (size_t i = 0; i < body_len; i++) out[4 + CR_RPC_REQUEST_HEADER_BYTES + i] = (uint8_t)i;
    return 4 + CR_RPC_REQUEST_HEADER_BYTES + body_len;
}

/* Takes one whole reply frame from the reply ring (it must be there). */
static size_t take_reply(struct raw_client *rc, uint8_t *out, uint64_t *id, int32_t *status) {
    assert_true(cr_rpc_shm_ring_readable(&rc->rep) >= (int64_t)CR_RPC_STREAM_REPLY_PREFIX);
    cr_rpc_shm_ring_take(&rc->rep, out, CR_RPC_STREAM_REPLY_PREFIX);
    size_t n = (size_t)out[0] << 24 | (size_t)out[1] << 16 | (size_t)out[2] << 8 | out[3];
    *id = cr_rpc_get_u64(out + 4);
    *status = cr_rpc_get_i32(out + 12);
    size_t body = n - CR_RPC_REPLY_HEADER_BYTES;
    assert_true(cr_rpc_shm_ring_readable(&rc->rep) >= (int64_t)body);
    cr_rpc_shm_ring_take(&rc->rep, out, body);
    return body;
}

static bool socket_closed(int sock) {
    struct pollfd p = {.fd = sock, .events = POLLIN};
    if (poll(&p, 1, 0) != 1) return false;
    char byte;
    return recv(sock, &byte, 1, MSG_DONTWAIT) == 0;
}

static void test_round_trip(void **unused) {
    (void)unused;
    struct test_srv t;
    srv_open(&t, 4);
    struct raw_client rc;
    ready_client(&t, &rc);
    uint8_t frame[128], reply[128];
    size_t n = build(frame, 42, 20);
    cr_rpc_shm_ring_put(&rc.req, frame, n);
    assert_int_equal(cr_rpc_shm_server_poll(t.srv), 1);
    assert_int_equal(t.frames, 1);
    cr_rpc_shm_server_flush(t.srv);
    uint64_t id;
    int32_t status;
    assert_int_equal(take_reply(&rc, reply, &id, &status), 20);
    assert_int_equal(id, 42);
    assert_int_equal(status, CR_OK);
    assert_memory_equal(reply, frame + 14, 20);
    struct cr_rpc_shm_stats s;
    cr_rpc_shm_server_stats(t.srv, &s);
    assert_int_equal(s.clients_open, 1);
    assert_int_equal(s.replies, 1);
    raw_close(&rc);
    cr_rpc_shm_server_close(t.srv);
}

/* A frame five times the ring crosses in pieces, and so does its echo. */
static void test_frame_larger_than_the_ring(void **unused) {
    (void)unused;
    struct test_srv t;
    srv_open(&t, 4);
    struct raw_client rc;
    ready_client(&t, &rc);
    size_t body = 5 * RING;
    uint8_t *frame = malloc(body + 64), *echo = malloc(body + 64);
    size_t n = build(frame, 7, body), sent = 0, got = 0;
    uint8_t head[CR_RPC_STREAM_REPLY_PREFIX];
    for (int turns = 0; got < n - 2 && turns < 1000; turns++) {
        int64_t room = cr_rpc_shm_ring_room(&rc.req);
        size_t put = (size_t)room < n - sent ? (size_t)room : n - sent;
        cr_rpc_shm_ring_put(&rc.req, frame + sent, put);
        sent += put;
        cr_rpc_shm_server_poll(t.srv);
        cr_rpc_shm_server_flush(t.srv);
        int64_t readable = cr_rpc_shm_ring_readable(&rc.rep);
        assert_true(readable >= 0);
        if (got == 0 && readable >= (int64_t)sizeof(head)) {
            cr_rpc_shm_ring_take(&rc.rep, head, sizeof(head));
            got = sizeof(head);
            readable -= (int64_t)sizeof(head);
            assert_int_equal(cr_rpc_get_u64(head + 4), 7);
        }
        if (got > 0 && readable > 0) {
            cr_rpc_shm_ring_take(&rc.rep, echo + got - sizeof(head), (size_t)readable);
            got += (size_t)readable;
        }
    }
    assert_int_equal(t.frames, 1);
    assert_int_equal(t.last_len, CR_RPC_REQUEST_HEADER_BYTES + body);
    assert_int_equal(got, sizeof(head) + body);
    assert_memory_equal(echo, frame + 14, body);
    free(frame);
    free(echo);
    raw_close(&rc);
    cr_rpc_shm_server_close(t.srv);
}

/* A length outside the bounds is answered under id 0 and the client
 * closed; another client goes on. */
static void test_malformed_length_closes_that_client(void **unused) {
    (void)unused;
    struct test_srv t;
    srv_open(&t, 4);
    struct raw_client bad, good;
    ready_client(&t, &bad);
    ready_client(&t, &good);
    uint8_t frame[64], reply[256];
    cr_rpc_stream_put_len(frame, 3); /* below a request's header */
    cr_rpc_shm_ring_put(&bad.req, frame, 4);
    cr_rpc_shm_server_poll(t.srv);
    uint64_t id;
    int32_t status;
    size_t n = take_reply(&bad, reply, &id, &status);
    assert_int_equal(id, 0);
    assert_int_equal(status, CR_ERR_PROTOCOL);
    reply[n] = '\0';
    assert_non_null(strstr((char *)reply, "length 3 is outside"));
    assert_true(socket_closed(bad.sock));
    cr_rpc_shm_ring_put(&good.req, frame, build(frame, 9, 1));
    cr_rpc_shm_server_poll(t.srv);
    cr_rpc_shm_server_flush(t.srv);
    take_reply(&good, reply, &id, &status);
    assert_int_equal(id, 9);
    struct cr_rpc_shm_stats s;
    cr_rpc_shm_server_stats(t.srv, &s);
    assert_int_equal(s.closed_malformed, 1);
    assert_int_equal(s.clients_open, 1);
    raw_close(&bad);
    raw_close(&good);
    cr_rpc_shm_server_close(t.srv);
}

/* A tail moved outside the ring (or the reply ring's head) closes the
 * client, never a read outside the mapping. */
static void test_hostile_indices_close_the_client(void **unused) {
    (void)unused;
    struct test_srv t;
    srv_open(&t, 4);
    struct raw_client rc, rc2;
    ready_client(&t, &rc);
    __atomic_store_n(&rc.h->requests.tail, (uint64_t)RING + 1, __ATOMIC_RELEASE);
    cr_rpc_shm_server_poll(t.srv);
    assert_true(socket_closed(rc.sock));
    ready_client(&t, &rc2);
    uint8_t frame[64];
    cr_rpc_shm_ring_put(&rc2.req, frame, build(frame, 1, 0));
    cr_rpc_shm_server_poll(t.srv);
    __atomic_store_n(&rc2.h->replies.head, (uint64_t)1 << 40, __ATOMIC_RELEASE);
    cr_rpc_shm_server_flush(t.srv);
    assert_true(socket_closed(rc2.sock));
    struct cr_rpc_shm_stats s;
    cr_rpc_shm_server_stats(t.srv, &s);
    assert_int_equal(s.closed_malformed, 2);
    assert_int_equal(s.clients_open, 0);
    raw_close(&rc);
    raw_close(&rc2);
    cr_rpc_shm_server_close(t.srv);
}

static void test_bad_hello_is_refused(void **unused) {
    (void)unused;
    struct test_srv t;
    srv_open(&t, 4);
    struct raw_client rc;
    struct cr_rpc_shm_hello wrong = {.magic = CR_RPC_SHM_MAGIC, .version = 99};
    raw_connect(&rc, t.path, &wrong, sizeof(wrong));
    cr_rpc_shm_server_serve(t.srv);
    assert_int_equal(raw_welcome(&rc), CR_ERR_PROTOCOL);
    assert_true(socket_closed(rc.sock));
    raw_close(&rc);
    cr_rpc_shm_server_close(t.srv);
}

/* A client that leaves with a call in flight: its rings are freed at its
 * socket's EOF and the late reply is dropped, counted. */
static void test_client_gone_mid_call(void **unused) {
    (void)unused;
    struct test_srv t;
    srv_open(&t, 4);
    t.hold = true;
    struct raw_client rc;
    ready_client(&t, &rc);
    uint8_t frame[64];
    cr_rpc_shm_ring_put(&rc.req, frame, build(frame, 5, 3));
    cr_rpc_shm_server_poll(t.srv);
    assert_int_equal(t.frames, 1);
    uint64_t who = t.last_client;
    raw_close(&rc);
    cr_rpc_shm_server_serve(t.srv);
    struct cr_rpc_shm_stats s;
    cr_rpc_shm_server_stats(t.srv, &s);
    assert_int_equal(s.clients_open, 0);
    assert_false(cr_rpc_shm_server_has_clients(t.srv));
    assert_false(cr_rpc_shm_server_reply(t.srv, who, 5, CR_OK, NULL, 0, true));
    /* A new client in the same slot does not get it either. */
    ready_client(&t, &rc);
    assert_false(cr_rpc_shm_server_reply(t.srv, who, 5, CR_OK, NULL, 0, true));
    cr_rpc_shm_server_stats(t.srv, &s);
    assert_int_equal(s.replies_dropped, 2);
    raw_close(&rc);
    cr_rpc_shm_server_close(t.srv);
}

/* One client past --rpc-shm-clients-max is answered with the flag's name. */
static void test_clients_max(void **unused) {
    (void)unused;
    struct test_srv t;
    srv_open(&t, 1);
    struct raw_client a, b;
    ready_client(&t, &a);
    raw_connect(&b, t.path, NULL, 0);
    cr_rpc_shm_server_serve(t.srv);
    assert_int_equal(raw_welcome(&b), CR_ERR_AGAIN);
    assert_non_null(strstr(b.welcome.text, "--rpc-shm-clients-max"));
    raw_close(&b);
    raw_close(&a);
    cr_rpc_shm_server_close(t.srv);
}

/* queue_max calls in flight stop the reading; replies resume it.  A full
 * reply ring keeps replies queued and asks the client to wake us. */
static void test_queue_max_and_full_reply_ring(void **unused) {
    (void)unused;
    struct test_srv t;
    srv_open(&t, 4);
    t.hold = true;
    struct raw_client rc;
    ready_client(&t, &rc);
    uint8_t frame[64];
    for (uint64_t i = 1; i <= 6; i++) cr_rpc_shm_ring_put(&rc.req, frame, build(frame, i, 0));
    cr_rpc_shm_server_poll(t.srv);
    assert_int_equal(t.frames, 4); /* queue_max */
    t.hold = false;
    uint8_t *big = calloc(1, RING);
    for (uint64_t i = 1; i <= 4; i++) /* 4 replies of RING/2: more than the ring */
        assert_true(cr_rpc_shm_server_reply(t.srv, t.last_client, i, CR_OK, big, RING / 2, true));
    cr_rpc_shm_server_flush(t.srv); /* takes the 2 held frames too (echoed at once) */
    assert_int_equal(t.frames, 6);
    assert_int_equal(rc.h->replies.producer_waiting, 1);
    uint64_t id;
    int32_t status;
    uint8_t *out = malloc(RING);
    assert_int_equal(take_reply(&rc, out, &id, &status), RING / 2);
    assert_int_equal(id, 1);
    assert_true(cr_rpc_shm_ring_room_needs_wake(&rc.rep)); /* the client wakes us */
    uint64_t one = 1;
    assert_int_equal(write(rc.to_server, &one, sizeof(one)), 8);
    for (uint64_t want = 2; want <= 6; want++) {
        cr_rpc_shm_server_serve(t.srv);
        assert_int_equal(take_reply(&rc, out, &id, &status), want <= 4 ? RING / 2 : 0);
        assert_int_equal(id, want);
    }
    free(big);
    free(out);
    raw_close(&rc);
    cr_rpc_shm_server_close(t.srv);
}

/* Before sleeping the server arms every client: a client's next send then
 * writes the eventfd, and the server's fd becomes readable. */
static void test_arm_makes_the_client_wake_the_server(void **unused) {
    (void)unused;
    struct test_srv t;
    srv_open(&t, 4);
    struct raw_client rc;
    ready_client(&t, &rc);
    assert_true(cr_rpc_shm_server_arm(t.srv));
    struct pollfd p = {.fd = cr_rpc_shm_server_fd(t.srv), .events = POLLIN};
    assert_int_equal(poll(&p, 1, 0), 0);
    uint8_t frame[64];
    cr_rpc_shm_ring_put(&rc.req, frame, build(frame, 3, 0));
    assert_true(cr_rpc_shm_ring_needs_wake(&rc.req));
    uint64_t one = 1;
    assert_int_equal(write(rc.to_server, &one, sizeof(one)), 8);
    assert_int_equal(poll(&p, 1, 1000), 1);
    cr_rpc_shm_server_disarm(t.srv);
    assert_int_equal(cr_rpc_shm_server_serve(t.srv), 1);
    assert_int_equal(poll(&p, 1, 0), 0); /* the eventfd was drained */
    /* A request that is already there: arming refuses to sleep. */
    cr_rpc_shm_ring_put(&rc.req, frame, build(frame, 4, 0));
    assert_false(cr_rpc_shm_server_arm(t.srv));
    raw_close(&rc);
    cr_rpc_shm_server_close(t.srv);
}

static void test_open_refuses_bad_options(void **unused) {
    (void)unused;
    struct cr_rpc_shm_server *srv;
    char why[256];
    struct cr_rpc_shm_options o = {.path = "@x", .clients_max = 1, .ring_bytes = 5000,
                                   .queue_max = 1, .on_frame = on_frame};
    assert_int_equal(cr_rpc_shm_server_open(&o, &srv, why, sizeof(why)), CR_ERR_INVALID_PARAMS);
    assert_non_null(strstr(why, "--rpc-shm-ring-bytes"));
    o.ring_bytes = RING;
    o.path = "@";
    assert_int_equal(cr_rpc_shm_server_open(&o, &srv, why, sizeof(why)), CR_ERR_INVALID_PARAMS);
    struct test_srv t;
    srv_open(&t, 1);
    o.path = t.path; /* taken */
    assert_int_equal(cr_rpc_shm_server_open(&o, &srv, why, sizeof(why)), CR_ERR_AGAIN);
    cr_rpc_shm_server_close(t.srv);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_wraps_and_counts),
        cmocka_unit_test(test_ring_refuses_peer_indices_outside),
        cmocka_unit_test(test_ring_sleep_handshake),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_frame_larger_than_the_ring),
        cmocka_unit_test(test_malformed_length_closes_that_client),
        cmocka_unit_test(test_hostile_indices_close_the_client),
        cmocka_unit_test(test_bad_hello_is_refused),
        cmocka_unit_test(test_client_gone_mid_call),
        cmocka_unit_test(test_clients_max),
        cmocka_unit_test(test_queue_max_and_full_reply_ring),
        cmocka_unit_test(test_arm_makes_the_client_wake_the_server),
        cmocka_unit_test(test_open_refuses_bad_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
