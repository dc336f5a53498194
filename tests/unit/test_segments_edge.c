/* The store master's RPC endpoints as edges of the segments actor
 * (rpc/edge.h; rpc_tcp.c and rpc.c) on a real runtime, driven over
 * loopback: segments' calls answered inline, a call the tasks actor answers
 * coming back through segments, refusals at intake, a malformed frame
 * closing only its connection, a client that closes with calls in flight,
 * ZMQ requests in one frame and in three, pipelined from several DEALERs,
 * and the edges' stats views.  Under ASan (zig build asan) this is where the edge's
 * buffers and calls are checked for leaks and misuse.  Waits are bounded
 * polls; nothing depends on timing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "rpc/edge.h"
#include "runtime/runtime.h"
#include "actors/subsystems.h"
#include "crescent/error.h"
#include "daemon/config.h"
#include "master.pb-c.h"
#include "msgs/rpc_frame.h"
#include "msgs/rpc_stream.h"

#define WAIT_MS 10000

static const enum cr_subsystem ACTORS[] = {CR_SUBSYSTEM_SEGMENTS, CR_SUBSYSTEM_LEASES,
                                           CR_SUBSYSTEM_TASKS};

static void sink_handle(struct cr_actor *self, void *arg, struct cr_msg *msg) {
    (void)self, (void)arg, (void)msg; /* segments sends no events here: nothing is stored */
}
static const struct cr_actor_ops sink_ops = {.handle = sink_handle};

struct fixture {
    struct cr_runtime *rt;
    struct cr_daemon_config config;
    struct cr_subsystems peers;
    uint16_t port, zmq_port;
};

/* A port free now (bound and released): the edge binds it next. */
static uint16_t free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

static struct fixture *start(void) {
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    cr_daemon_config_default(&f->config);
    f->port = free_port();
    snprintf(f->config.rpc_tcp_address, sizeof(f->config.rpc_tcp_address), "127.0.0.1:%u",
             f->port);
    f->zmq_port = free_port();
    snprintf(f->config.rpc_address, sizeof(f->config.rpc_address), "tcp://127.0.0.1:%u",
             f->zmq_port);
    struct cr_runtime_config rc;
    cr_runtime_config_default(&rc);
    rc.pin_threads = false;
    assert_int_equal(cr_runtime_create(&rc, &f->rt), CR_OK);
    f->peers.config = &f->config;
    f->peers.ask_timeout_ns = 5000000000ull;
    const struct cr_subsystem_def *defs[] = {&cr_segments_def, &cr_leases_def, &cr_tasks_def};
    for (int i = 0; i < 3; i++) {
        void **state = &f->peers.states[ACTORS[i]];
        assert_int_equal(defs[i]->create(&f->config, state), CR_OK);
        if (ACTORS[i] == CR_SUBSYSTEM_SEGMENTS) {
            struct cr_edge *edge = NULL;
            assert_int_equal(cr_rpc_edge_create(&f->config, &edge), CR_OK);
            assert_int_equal(cr_segments_edge_add(*state, edge), CR_OK);
            assert_int_equal(cr_rpc_tcp_edge_create(&f->config, &edge), CR_OK);
            assert_int_equal(cr_segments_edge_add(*state, edge), CR_OK);
        }
        assert_int_equal(cr_runtime_spawn(f->rt, defs[i]->name, defs[i]->ops, *state,
                                          &f->peers.actors[ACTORS[i]]),
                         CR_OK);
    }
    struct cr_actor *sink = NULL;
    assert_int_equal(cr_runtime_spawn(f->rt, "events", &sink_ops, NULL, &sink), CR_OK);
    f->peers.actors[CR_SUBSYSTEM_PUBLISHER] = f->peers.actors[CR_SUBSYSTEM_INDEXER] = sink;
    for (int i = 2; i >= 0; i--) {
        struct cr_msg wire = {.type = CR_MSG_WIRE};
        wire.body.ptr[0] = &f->peers;
        assert_int_equal(cr_send(f->peers.actors[ACTORS[i]], &wire), CR_OK);
    }
    return f;
}

static void stop(struct fixture *f) {
    cr_runtime_destroy(f->rt);
    cr_segments_def.destroy(f->peers.states[CR_SUBSYSTEM_SEGMENTS]);
    cr_leases_def.destroy(f->peers.states[CR_SUBSYSTEM_LEASES]);
    cr_tasks_def.destroy(f->peers.states[CR_SUBSYSTEM_TASKS]);
    cr_runtime_thread_release();
    free(f);
}

/* Counter `name` of segments' stats view `view` ("rpc" or "rpc_tcp"). */
static uint64_t view_stat(struct fixture *f, const char *view, const char *name) {
    struct cr_actor_stats s = {0};
    struct cr_msg msg = {.type = CR_MSG_STATS};
    CR_MSG_BODY(&msg, struct cr_msg_stats)->out = &s;
    struct cr_actor *segments = f->peers.actors[CR_SUBSYSTEM_SEGMENTS];
    for (uint32_t k = 1; cr_actor_stats_view(segments, k) != NULL; k++)
        if (strcmp(cr_actor_stats_view(segments, k), view) == 0)
            CR_MSG_BODY(&msg, struct cr_msg_stats)->view = k;
    assert_int_not_equal(CR_MSG_BODY(&msg, struct cr_msg_stats)->view, 0);
    assert_int_equal(cr_ask(segments, &msg, 5000000000ull), CR_OK);
    assert_string_equal(s.name, view);
    for (uint32_t i = 0; i < s.extra_count; i++)
        if (strcmp(s.extra[i].name, name) == 0) return s.extra[i].value;
    fail_msg("no stat %s", name);
    return 0;
}

static uint64_t edge_stat(struct fixture *f, const char *name) {
    return view_stat(f, "rpc_tcp", name);
}

static void wait_stat(struct fixture *f, const char *name, uint64_t want) {
    uint64_t got = edge_stat(f, name);
    for (int i = 0; i < WAIT_MS && got != want; i++) {
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
        got = edge_stat(f, name);
    }
    assert_int_equal(got, want);
}

/* ---- a raw native client ------------------------------------------------- */

/* Connects; the listener is added when segments is wired, so a connection
 * made before waits in the backlog and is served once it is. */
static int connect_to(struct fixture *f) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(f->port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    return fd;
}

/* Appends one request frame for `msg` (NULL: an empty body) to buf. */
static size_t frame(uint8_t *buf, uint16_t method, uint64_t id, const ProtobufCMessage *msg) {
    size_t body = msg != NULL ? protobuf_c_message_pack(msg, buf + 4 + CR_RPC_REQUEST_HEADER_BYTES)
                              : 0;
    cr_rpc_stream_put_len(buf, (uint32_t)(CR_RPC_REQUEST_HEADER_BYTES + body));
    buf[4] = (uint8_t)(method >> 8), buf[5] = (uint8_t)method;
    for (int i = 0; i < 8; i++) buf[6 + i] = (uint8_t)(id >> (56 - 8 * i));
    return 4 + CR_RPC_REQUEST_HEADER_BYTES + body;
}

/* Reads exactly n bytes; false at EOF (the server closed). */
static bool read_exact(int fd, uint8_t *p, size_t n) {
    while (n > 0) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        assert_int_equal(poll(&pfd, 1, WAIT_MS), 1);
        ssize_t got = read(fd, p, n);
        if (got == 0 || (got < 0 && errno == ECONNRESET)) return false;
        assert_true(got > 0);
        p += got, n -= (size_t)got;
    }
    return true;
}

struct reply {
    uint64_t id;
    int32_t status;
    uint8_t body[4096];
    size_t len;
};

static void read_reply(int fd, struct reply *r) {
    uint8_t head[CR_RPC_STREAM_REPLY_PREFIX];
    assert_true(read_exact(fd, head, sizeof(head)));
    uint32_t len = (uint32_t)head[0] << 24 | (uint32_t)head[1] << 16 | (uint32_t)head[2] << 8 | head[3];
    assert_true(len >= 12 && len - 12 <= sizeof(r->body));
    r->id = 0;
    for (int i = 0; i < 8; i++) r->id = r->id << 8 | head[4 + i];
    r->status = (int32_t)((uint32_t)head[12] << 24 | (uint32_t)head[13] << 16 |
                          (uint32_t)head[14] << 8 | head[15]);
    r->len = len - 12;
    assert_true(read_exact(fd, r->body, r->len));
}

static void send_all(int fd, const uint8_t *p, size_t n) {
    assert_int_equal(send(fd, p, n, MSG_NOSIGNAL), (ssize_t)n);
}

static size_t exist_key(uint8_t *buf, uint64_t id, const char *key) {
    Crescent__Master__ExistKeyRequest r = CRESCENT__MASTER__EXIST_KEY_REQUEST__INIT;
    r.key = (char *)key;
    return frame(buf, CRESCENT__MASTER__METHOD__EXIST_KEY, id, &r.base);
}

static size_t query_task(uint8_t *buf, uint64_t id) {
    Crescent__Master__UUID task = CRESCENT__MASTER__UUID__INIT;
    task.first = 1, task.second = 2;
    Crescent__Master__QueryTaskRequest r = CRESCENT__MASTER__QUERY_TASK_REQUEST__INIT;
    r.task_id = &task;
    return frame(buf, CRESCENT__MASTER__METHOD__QUERY_TASK, id, &r.base);
}

/* ---- tests --------------------------------------------------------------- */

/* Four requests in one write: segments' own (ExistKey, GetVersion) inline,
 * QueryTask through tasks and back, an unknown method refused at intake;
 * every one answered under its id. */
static void test_inline_tasks_and_refused_calls(void **state) {
    (void)state;
    struct fixture *f = start();
    int fd = connect_to(f);
    uint8_t buf[1024];
    size_t n = exist_key(buf, 1, "k");
    n += query_task(buf + n, 2);
    n += frame(buf + n, 999, 3, NULL);
    n += frame(buf + n, CRESCENT__MASTER__METHOD__GET_VERSION, 4, NULL);
    send_all(fd, buf, n);
    bool seen[5] = {false};
    for (int i = 0; i < 4; i++) {
        struct reply r;
        read_reply(fd, &r);
        assert_true(r.id >= 1 && r.id <= 4 && !seen[r.id]);
        seen[r.id] = true;
        assert_int_equal(r.status, r.id == 3 ? CR_ERR_INVALID_PARAMS : CR_OK);
        if (r.id == 2) { /* tasks' answer: an unknown task */
            Crescent__Master__QueryTaskResponse *q =
                crescent__master__query_task_response__unpack(NULL, r.len, r.body);
            assert_non_null(q);
            assert_int_not_equal(q->status_code, 0);
            crescent__master__query_task_response__free_unpacked(q, NULL);
        }
    }
    assert_int_equal(edge_stat(f, "unknown_method_total"), 1);
    assert_int_equal(edge_stat(f, "replies_total"), 4);
    assert_int_equal(edge_stat(f, "in_flight"), 0);
    close(fd);
    wait_stat(f, "connections_open", 0);
    stop(f);
}

/* A length below the header is answered under id 0 and its connection
 * closed; another connection is served before and after. */
static void test_malformed_frame_closes_only_its_connection(void **state) {
    (void)state;
    struct fixture *f = start();
    int good = connect_to(f), bad = connect_to(f);
    uint8_t buf[256];
    struct reply r;
    send_all(good, buf, exist_key(buf, 7, "a"));
    read_reply(good, &r);
    assert_int_equal(r.id, 7);
    uint8_t len[4 + 16] = {0};
    cr_rpc_stream_put_len(len, 3);
    send_all(bad, len, sizeof(len));
    read_reply(bad, &r);
    assert_int_equal(r.id, 0);
    assert_int_equal(r.status, CR_ERR_PROTOCOL);
    uint8_t more;
    assert_false(read_exact(bad, &more, 1)); /* closed */
    send_all(good, buf, exist_key(buf, 8, "a"));
    read_reply(good, &r);
    assert_int_equal(r.id, 8);
    assert_int_equal(edge_stat(f, "connections_closed_malformed_total"), 1);
    close(bad);
    close(good);
    stop(f);
}

/* A client that writes 64 calls (half of them for tasks) and closes at
 * once: what comes back after the close is dropped and counted, in_flight
 * returns to 0, and nothing leaks (ASan). */
static void test_client_gone_with_calls_in_flight(void **state) {
    (void)state;
    struct fixture *f = start();
    int other = connect_to(f), gone = connect_to(f);
    static uint8_t buf[64 * 64];
    size_t n = 0;
    for (uint64_t i = 1; i <= 64; i++)
        n += i % 2 ? query_task(buf + n, i) : exist_key(buf + n, i, "g");
    send_all(gone, buf, n);
    close(gone);
    /* In this order: in_flight is 0 before the frames are read too, and
     * the close is seen only after every frame before it was taken. */
    wait_stat(f, "connections_accepted_total", 2);
    wait_stat(f, "connections_open", 1);
    wait_stat(f, "in_flight", 0);
    struct reply r;
    send_all(other, buf, exist_key(buf, 9, "a"));
    read_reply(other, &r);
    assert_int_equal(r.id, 9);
    assert_int_equal(r.status, CR_OK);
    close(other);
    stop(f);
}

/* ZMQ: three DEALERs each pipeline 40 ExistKey and a QueryTask in one
 * frame, one more a GetVersion in three frames; every reply comes back to
 * its DEALER under its id, in the request's layout.  Read while replies are
 * written (the ZMQ_FD signal they can consume: rpc.c), nothing is left
 * waiting. */
static void test_zmq_requests_one_and_three_frames(void **state) {
    (void)state;
    struct fixture *f = start();
    void *ctx = zmq_ctx_new();
    void *dealer[3];
    char endpoint[64];
    snprintf(endpoint, sizeof(endpoint), "tcp://127.0.0.1:%u", f->zmq_port);
    uint8_t buf[512];
    for (int d = 0; d < 3; d++) {
        dealer[d] = zmq_socket(ctx, ZMQ_DEALER);
        assert_int_equal(zmq_setsockopt(dealer[d], ZMQ_LINGER, &(int){0}, sizeof(int)), 0);
        assert_int_equal(zmq_connect(dealer[d], endpoint), 0);
        for (uint64_t id = 1; id <= 41; id++) {
            size_t n = id <= 40 ? exist_key(buf, id, "z") : query_task(buf, id);
            assert_int_equal(zmq_send(dealer[d], buf + 4, n - 4, 0), (int)(n - 4));
        }
    }
    uint8_t method[2], id[8];
    cr_rpc_put_u16(method, CRESCENT__MASTER__METHOD__GET_VERSION);
    cr_rpc_put_u64(id, 99);
    assert_int_equal(zmq_send(dealer[0], method, 2, ZMQ_SNDMORE), 2);
    assert_int_equal(zmq_send(dealer[0], id, 8, ZMQ_SNDMORE), 8);
    assert_int_equal(zmq_send(dealer[0], "", 0, 0), 0);
    for (int d = 0; d < 3; d++) {
        zmq_setsockopt(dealer[d], ZMQ_RCVTIMEO, &(int){WAIT_MS}, sizeof(int));
        bool seen[100] = {false};
        for (int i = 0; i < (d == 0 ? 42 : 41); i++) {
            int len = zmq_recv(dealer[d], buf, sizeof(buf), 0);
            assert_true(len >= 8);
            uint64_t got = cr_rpc_get_u64(buf);
            assert_true(got < 100 && !seen[got]);
            seen[got] = true;
            int more = 0;
            size_t more_len = sizeof(more);
            zmq_getsockopt(dealer[d], ZMQ_RCVMORE, &more, &more_len);
            if (got == 99) { /* three frames: [id] [status] [body] */
                assert_int_equal(len, 8);
                assert_true(more);
                assert_int_equal(zmq_recv(dealer[d], buf, sizeof(buf), 0), 4);
                assert_int_equal(cr_rpc_get_i32(buf), CR_OK);
                assert_true(zmq_recv(dealer[d], buf, sizeof(buf), 0) > 0);
            } else {
                assert_false(more);
                assert_true(len >= (int)CR_RPC_REPLY_HEADER_BYTES);
                assert_int_equal(cr_rpc_get_i32(buf + 8), CR_OK);
            }
        }
    }
    assert_int_equal(view_stat(f, "rpc", "replies_total"), 3 * 41 + 1);
    assert_int_equal(view_stat(f, "rpc", "in_flight"), 0);
    for (int d = 0; d < 3; d++) zmq_close(dealer[d]);
    zmq_ctx_term(ctx);
    stop(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inline_tasks_and_refused_calls),
        cmocka_unit_test(test_malformed_frame_closes_only_its_connection),
        cmocka_unit_test(test_client_gone_with_calls_in_flight),
        cmocka_unit_test(test_zmq_requests_one_and_three_frames),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
