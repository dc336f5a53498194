/* libcrescent's embedded store server (cr_host, src/client/host.c) with its
 * two threads running, against a scripted in-test master (a ZMQ ROUTER on
 * its own thread): start and mount, a Get of bytes in the host's segment by
 * another client on the test's thread (over shm, and over tcp with the
 * host's shm off), a ping that says the master forgot the client and the
 * remount it causes, and stop's unmount.  The checksum the master lists is
 * checked: bytes that do not match it are never a successful read.
 *
 * Built under TSan as well (build.zig's tsan step): the serve and keep-alive
 * threads, the stats atomics and the caller's own thread all run here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>
#include <zmq.h>

#include "client/client_internal.h" /* the client's transfer client, to name its transport */
#include "crescent/client.h"
#include "crescent/error.h"
#include "crescent/host.h"
#include "master.pb-c.h"
#include "msgs/rpc_frame.h"
#include "rdma/xfer.h"

#define OBJECT_OFFSET 4096u
#define OBJECT_BYTES 100000u /* over three copy chunks, not a multiple of one */
#define WAIT_MS 10000

/* ---- the scripted master ------------------------------------------------ */

struct master {
    void *context, *router;
    char endpoint[64];
    pthread_t thread;
    atomic_bool stop;
    /* Set by the test before the calls that read them. */
    _Atomic uint64_t checksum;   /* listed with the object */
    _Atomic uint32_t forget_at;  /* the ping with this number answers "unknown" (0: none) */
    /* Written by the master's thread only, read by the test. */
    _Atomic uint32_t pings, mounts, remounts, unmounts, lists;
    pthread_mutex_t lock;        /* the segment as last mounted */
    char segment[256], transport[64];
    uint64_t buffer;
    _Atomic uint64_t ssd_capacity; /* the SSD tier the last (re)mount announced */
};

struct request {
    uint8_t identity[256];
    size_t identity_len;
    int frames;
    uint16_t method;
    uint64_t id;
    uint8_t body[4096];
    size_t body_len;
};

/* One request in either layout (one frame after the identity, or method,
 * id and body frames), as the client sends it. */
static bool receive(struct master *m, struct request *r) {
    zmq_pollitem_t item = {.socket = m->router, .events = ZMQ_POLLIN};
    if (zmq_poll(&item, 1, 20) <= 0) return false;
    uint8_t frame[4096];
    int more = 1;
    r->frames = 0;
    r->body_len = 0;
    while (more) {
        int n = zmq_recv(m->router, frame, sizeof(frame), 0);
        assert_true(n >= 0);
        size_t len = (size_t)n < sizeof(frame) ? (size_t)n : sizeof(frame);
        size_t more_size = sizeof(more);
        zmq_getsockopt(m->router, ZMQ_RCVMORE, &more, &more_size);
        if (r->frames == 0) memcpy(r->identity, frame, r->identity_len = len);
        if (r->frames == 1 && !more && len >= CR_RPC_REQUEST_HEADER_BYTES) {
            r->method = cr_rpc_get_u16(frame);
            r->id = cr_rpc_get_u64(frame + CR_RPC_METHOD_BYTES);
            memcpy(r->body, frame + CR_RPC_REQUEST_HEADER_BYTES,
                   r->body_len = len - CR_RPC_REQUEST_HEADER_BYTES);
        }
        if (r->frames == 1 && more && len == 2) r->method = cr_rpc_get_u16(frame);
        if (r->frames == 2 && len == 8) r->id = cr_rpc_get_u64(frame);
        if (r->frames == 3) memcpy(r->body, frame, r->body_len = len);
        r->frames++;
    }
    return true;
}

static void reply(struct master *m, const struct request *r, const ProtobufCMessage *msg) {
    uint8_t frame[CR_RPC_REPLY_HEADER_BYTES + 2048];
    size_t len = protobuf_c_message_get_packed_size(msg);
    assert_true(len <= sizeof(frame) - CR_RPC_REPLY_HEADER_BYTES);
    protobuf_c_message_pack(msg, frame + CR_RPC_REPLY_HEADER_BYTES);
    cr_rpc_put_u64(frame, r->id);
    cr_rpc_put_i32(frame + CR_RPC_ID_BYTES, CR_OK);
    assert_true(zmq_send(m->router, r->identity, r->identity_len, ZMQ_SNDMORE) >= 0);
    if (r->frames == 2) { /* the request's layout: one frame */
        assert_true(zmq_send(m->router, frame, CR_RPC_REPLY_HEADER_BYTES + len, 0) >= 0);
        return;
    }
    assert_true(zmq_send(m->router, frame, CR_RPC_ID_BYTES, ZMQ_SNDMORE) >= 0);
    assert_true(zmq_send(m->router, frame + CR_RPC_ID_BYTES, CR_RPC_STATUS_BYTES, ZMQ_SNDMORE) >=
                0);
    assert_true(zmq_send(m->router, frame + CR_RPC_REPLY_HEADER_BYTES, len, 0) >= 0);
}

static void answer_mount(struct master *m, const struct request *r) {
    Crescent__Master__MountSegmentRequest *req =
        crescent__master__mount_segment_request__unpack(NULL, r->body_len, r->body);
    assert_non_null(req);
    pthread_mutex_lock(&m->lock);
    snprintf(m->segment, sizeof(m->segment), "%s", req->segment_name);
    snprintf(m->transport, sizeof(m->transport), "%s",
             req->transport_endpoint ? req->transport_endpoint : "");
    m->buffer = req->buffer;
    atomic_store(&m->ssd_capacity, req->has_ssd_capacity ? req->ssd_capacity : 0);
    pthread_mutex_unlock(&m->lock);
    crescent__master__mount_segment_request__free_unpacked(req, NULL);
    atomic_fetch_add(r->method == CR_METHOD_MOUNT_SEGMENT ? &m->mounts : &m->remounts, 1);
    Crescent__Master__MountSegmentResponse resp = CRESCENT__MASTER__MOUNT_SEGMENT_RESPONSE__INIT;
    reply(m, r, &resp.base);
}

static void answer_ping(struct master *m, const struct request *r) {
    uint32_t n = atomic_fetch_add(&m->pings, 1) + 1;
    Crescent__Master__PingResponse resp = CRESCENT__MASTER__PING_RESPONSE__INIT;
    resp.has_client_known = true;
    resp.client_known = n != atomic_load(&m->forget_at);
    reply(m, r, &resp.base);
}

/* One replica: OBJECT_BYTES at OBJECT_OFFSET of the segment as mounted. */
static void answer_list(struct master *m, const struct request *r) {
    Crescent__Master__BufHandle h = CRESCENT__MASTER__BUF_HANDLE__INIT;
    Crescent__Master__BufHandle *hp = &h;
    Crescent__Master__ReplicaInfo info = CRESCENT__MASTER__REPLICA_INFO__INIT;
    Crescent__Master__ReplicaInfo *ip = &info;
    pthread_mutex_lock(&m->lock);
    h.segment_name = m->segment;
    h.transport_endpoint = m->transport;
    h.buffer = m->buffer + OBJECT_OFFSET;
    h.size = OBJECT_BYTES;
    h.status = CRESCENT__MASTER__BUF_HANDLE__BUF_STATUS__COMPLETE;
    info.n_handles = 1;
    info.handles = &hp;
    info.status = CRESCENT__MASTER__REPLICA_INFO__REPLICA_STATUS__COMPLETE;
    Crescent__Master__GetReplicaListResponse resp =
        CRESCENT__MASTER__GET_REPLICA_LIST_RESPONSE__INIT;
    resp.n_replica_list = 1;
    resp.replica_list = &ip;
    resp.has_checksum_xxh3 = true;
    resp.checksum_xxh3 = atomic_load(&m->checksum);
    atomic_fetch_add(&m->lists, 1);
    reply(m, r, &resp.base);
    pthread_mutex_unlock(&m->lock);
}

static void *master_run(void *arg) {
    struct master *m = arg;
    while (!atomic_load(&m->stop)) {
        struct request r;
        if (!receive(m, &r)) continue;
        switch (r.method) {
        case CR_METHOD_MOUNT_SEGMENT: /* fallthrough */
        case CR_METHOD_REMOUNT_SEGMENT: answer_mount(m, &r); break;
        case CR_METHOD_PING: answer_ping(m, &r); break;
        case CR_METHOD_GET_REPLICA_LIST: answer_list(m, &r); break;
        case CR_METHOD_GET_VERSION: { /* a client's first get asks (no file tier here) */
            Crescent__Master__GetVersionResponse resp =
                CRESCENT__MASTER__GET_VERSION_RESPONSE__INIT;
            resp.version = "test";
            reply(m, &r, &resp.base);
            break;
        }
        case CR_METHOD_UNMOUNT_SEGMENT: {
            atomic_fetch_add(&m->unmounts, 1);
            Crescent__Master__UnmountSegmentResponse resp =
                CRESCENT__MASTER__UNMOUNT_SEGMENT_RESPONSE__INIT;
            reply(m, &r, &resp.base);
            break;
        }
        default: fail_msg("the host called method %u, which this master does not script",
                          r.method);
        }
    }
    return NULL;
}

static struct master *master_start(void) {
    struct master *m = calloc(1, sizeof(*m));
    assert_non_null(m);
    pthread_mutex_init(&m->lock, NULL);
    m->context = zmq_ctx_new();
    m->router = zmq_socket(m->context, ZMQ_ROUTER);
    int linger = 0;
    zmq_setsockopt(m->router, ZMQ_LINGER, &linger, sizeof(linger));
    assert_int_equal(zmq_bind(m->router, "tcp://127.0.0.1:*"), 0);
    size_t size = sizeof(m->endpoint);
    assert_int_equal(zmq_getsockopt(m->router, ZMQ_LAST_ENDPOINT, m->endpoint, &size), 0);
    assert_int_equal(pthread_create(&m->thread, NULL, master_run, m), 0);
    return m;
}

static void master_stop(struct master *m) {
    atomic_store(&m->stop, true);
    pthread_join(m->thread, NULL);
    zmq_close(m->router);
    zmq_ctx_term(m->context);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

/* ---- helpers ------------------------------------------------------------- */

static void sleep_ms(long ms) {
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Polls `done` every 2 ms for up to WAIT_MS: the host's threads react on
 * their own time, so the test waits (bounded) rather than sleeping a guess. */
static bool eventually(bool (*done)(void *), void *arg) {
    for (int waited = 0; waited < WAIT_MS; waited += 2) {
        if (done(arg)) return true;
        sleep_ms(2);
    }
    return done(arg);
}

static bool remounted(void *arg) {
    struct cr_host_stats s;
    cr_host_get_stats(arg, &s);
    return s.remounts >= 1 && s.mounted;
}

static cr_host *host_start(struct master *m, bool no_shm) {
    struct cr_host_options o = {.master = m->endpoint, .segment_size = 1u << 20,
                                .no_shm = no_shm, .no_verbs = true, .ping_interval_ms = 2,
                                .timeout_ms = 5000};
    cr_host *h = NULL;
    char error[256] = "";
    int rc = cr_host_start(&o, &h, error, sizeof(error));
    if (rc != CR_OK) fail_msg("cr_host_start: %s: %s", cr_strerror(rc), error);
    assert_int_equal(atomic_load(&m->mounts), 1);
    assert_string_equal(cr_host_protocol(h), "tcp");
    return h;
}

/* Start, serve Gets from this thread while the keep-alive thread pings, a
 * forgotten client remounted, stop. */
static void host_round_trip(bool no_shm) {
    struct master *m = master_start();
    cr_host *h = host_start(m, no_shm);
    uint8_t *object = (uint8_t *)cr_host_base(h) + OBJECT_OFFSET;
    for (uint32_t i = 0; i < OBJECT_BYTES; i++) object[i] = (uint8_t)(i * 131u + 7u);
    atomic_store(&m->checksum, XXH3_64bits(object, OBJECT_BYTES));

    cr_client *c = NULL;
    char error[256];
    assert_int_equal(cr_client_open(m->endpoint, NULL, &c, error, sizeof(error)), CR_OK);
    uint8_t *got = malloc(OBJECT_BYTES);
    assert_non_null(got);
    for (int round = 0; round < 3; round++) {
        size_t len = 0;
        memset(got, 0, OBJECT_BYTES);
        int rc = cr_client_get_into(c, NULL, "k", got, OBJECT_BYTES, &len);
        if (rc != CR_OK) fail_msg("get over the host: %s", cr_client_last_error(c));
        assert_int_equal(len, OBJECT_BYTES);
        assert_memory_equal(got, object, OBJECT_BYTES);
    }
    /* The same bytes under a checksum they do not have: never a success. */
    atomic_store(&m->checksum, XXH3_64bits(object, OBJECT_BYTES) ^ 1u);
    size_t len = 0;
    assert_int_equal(cr_client_get_into(c, NULL, "k", got, OBJECT_BYTES, &len), CR_ERR_CHECKSUM);
    assert_non_null(strstr(cr_client_last_error(c), "do not match the put's checksum"));
    char transport[64];
    pthread_mutex_lock(&m->lock);
    snprintf(transport, sizeof(transport), "%s", m->transport);
    pthread_mutex_unlock(&m->lock);
    assert_string_equal(cr_xfer_client_transport(c->xfer, transport), no_shm ? "tcp" : "shm");

    /* The master forgets the client two pings from now: the keep-alive
     * thread remounts, while this thread reads the stats. */
    atomic_store(&m->forget_at, atomic_load(&m->pings) + 2);
    assert_true(eventually(remounted, h));
    assert_true(atomic_load(&m->remounts) >= 1);

    cr_client_close(c);
    free(got);
    assert_int_equal(cr_host_stop(h), CR_OK);
    assert_int_equal(atomic_load(&m->unmounts), 1);
    master_stop(m);
}

static void test_host_serves_a_get_over_shm(void **unused) {
    (void)unused;
    host_round_trip(false);
}

static void test_host_serves_a_get_over_tcp(void **unused) {
    (void)unused;
    host_round_trip(true);
}

/* Byte ranges (cr_client_write_ranges / cr_client_read_ranges) of an object
 * laid out as two handles far apart in the host's segment, so windows that
 * straddle them and end at the last byte are checked; a window outside the
 * object fails alone, with the others moved. */
static void host_ranges(bool no_shm) {
    enum { FIRST = 3000, SECOND = 5000, GAP = 10000 };
    struct master *m = master_start();
    cr_host *h = host_start(m, no_shm);
    uint8_t *base = (uint8_t *)cr_host_base(h) + OBJECT_OFFSET;
    memset(base, 0, GAP + SECOND);
    char *segment = (char *)cr_host_segment_name(h), *endpoint = (char *)cr_host_endpoint(h);
    struct cr_buf_handle handles[2] = {
        {.segment_name = segment, .size_bytes = FIRST, .buffer = (uint64_t)(uintptr_t)base,
         .transport_endpoint = endpoint},
        {.segment_name = segment, .size_bytes = SECOND,
         .buffer = (uint64_t)(uintptr_t)(base + GAP), .transport_endpoint = endpoint}};
    struct cr_replica replica = {.status = CR_REPLICA_COMPLETE, .medium = CR_MEDIUM_MEMORY,
                                 .handle_count = 2, .handles = handles};
    struct cr_replica_list list = {.status = CR_OK, .count = 1, .replicas = &replica};
    cr_client *c = NULL;
    char error[256];
    assert_int_equal(cr_client_open(m->endpoint, NULL, &c, error, sizeof(error)), CR_OK);

    uint8_t data[FIRST + SECOND];
    for (size_t i = 0; i < sizeof(data); i++) data[i] = (uint8_t)(i * 7u + 3u);
    struct cr_range writes[4] = {
        {&list, 0, data, 100, -1},
        {&list, FIRST - 50, data + FIRST - 50, 200, -1},        /* straddles the handles */
        {&list, FIRST + SECOND - 10, data + FIRST + SECOND - 10, 10, -1}, /* the last bytes */
        {&list, FIRST + SECOND - 10, data, 11, -1}};             /* one byte past the end */
    assert_int_equal(cr_client_write_ranges(c, writes, 4), CR_ERR_INVALID_PARAMS);
    assert_non_null(strstr(cr_client_last_error(c), "range 3"));
    for (int i = 0; i < 3; i++) assert_int_equal(writes[i].status, CR_OK);
    assert_int_equal(writes[3].status, CR_ERR_INVALID_PARAMS);
    assert_memory_equal(base, data, 100);
    assert_memory_equal(base + FIRST - 50, data + FIRST - 50, 50);
    assert_memory_equal(base + GAP, data + FIRST, 150);
    assert_memory_equal(base + GAP + SECOND - 10, data + FIRST + SECOND - 10, 10);
    assert_int_equal(base[100], 0); /* nothing outside the windows */
    assert_int_equal(base[GAP + 150], 0);

    memcpy(base, data, FIRST);
    memcpy(base + GAP, data + FIRST, SECOND);
    uint8_t got[3][400];
    memset(got, 0, sizeof(got));
    struct cr_range reads[3] = {{&list, FIRST - 200, got[0], 400, -1},
                                {&list, 17, got[1], 1, -1},
                                {&list, FIRST + SECOND - 400, got[2], 400, -1}};
    assert_int_equal(cr_client_read_ranges(c, reads, 3), CR_OK);
    assert_memory_equal(got[0], data + FIRST - 200, 400);
    assert_int_equal(got[1][0], data[17]);
    assert_memory_equal(got[2], data + FIRST + SECOND - 400, 400);
    struct cr_range none = {NULL, 0, got[0], 1, -1};
    assert_int_equal(cr_client_read_ranges(c, &none, 1), CR_ERR_INVALID_PARAMS);

    cr_client_close(c);
    assert_int_equal(cr_host_stop(h), CR_OK);
    master_stop(m);
}

static void test_host_ranges_over_shm(void **unused) {
    (void)unused;
    host_ranges(false);
}

static void test_host_ranges_over_tcp(void **unused) {
    (void)unused;
    host_ranges(true);
}

static void test_host_start_refuses_bad_options(void **unused) {
    (void)unused;
    cr_host *h = (cr_host *)&h;
    char error[128] = "";
    struct cr_host_options o = {.master = "tcp://127.0.0.1:1", .segment_size = 0};
    assert_int_equal(cr_host_start(&o, &h, error, sizeof(error)), CR_ERR_INVALID_PARAMS);
    assert_null(h);
    assert_non_null(strstr(error, "segment size"));
    assert_int_equal(cr_host_stop(NULL), CR_OK);
}

/* ---- withdrawing the SSD tier (cr_host_drain_ssd) ------------------------ */

static int ssd_read_zeros(void *arg, uint64_t addr, uint64_t len, void *dst) {
    (void)arg, (void)addr;
    memset(dst, 0, len);
    return CR_OK;
}

static int ssd_write_refused(void *arg, const char *tenant, const char *key, const void *value,
                             uint64_t len, uint64_t xxh3, uint64_t *position, char *why,
                             size_t why_len) {
    (void)arg, (void)tenant, (void)key, (void)value, (void)len, (void)xxh3, (void)position;
    snprintf(why, why_len, "this test offloads nothing");
    return CR_ERR_IO;
}

/* A host that offers an SSD tier announces it at mount; a drain remounts
 * without it (the master offloads nothing more there), once: the second
 * finds nothing to withdraw.  A host without a tier has nothing to do. */
static void test_host_drain_withdraws_the_ssd_tier(void **unused) {
    (void)unused;
    struct master *m = master_start();
    struct cr_host_options o = {.master = m->endpoint, .segment_size = 1u << 20,
                                .no_verbs = true, .ping_interval_ms = 2, .timeout_ms = 5000,
                                .ssd_read = ssd_read_zeros, .ssd_write = ssd_write_refused,
                                .ssd_capacity_bytes = 1u << 30};
    cr_host *h = NULL;
    char error[256] = "";
    int rc = cr_host_start(&o, &h, error, sizeof(error));
    if (rc != CR_OK) fail_msg("cr_host_start: %s: %s", cr_strerror(rc), error);
    assert_int_equal(atomic_load(&m->ssd_capacity), 1u << 30);
    uint32_t remounts = atomic_load(&m->remounts);

    bool drained = false;
    assert_int_equal(cr_host_drain_ssd(h, WAIT_MS, &drained, error, sizeof(error)), CR_OK);
    assert_true(drained);
    assert_int_equal(atomic_load(&m->ssd_capacity), 0);
    assert_int_equal(atomic_load(&m->remounts), remounts + 1);
    /* Later remounts (the master forgot the client) keep it withdrawn. */
    atomic_store(&m->forget_at, atomic_load(&m->pings) + 2);
    for (int i = 0; i < 1000 && atomic_load(&m->remounts) < remounts + 2; i++) sleep_ms(2);
    assert_true(atomic_load(&m->remounts) >= remounts + 2);
    assert_int_equal(atomic_load(&m->ssd_capacity), 0);
    uint32_t after = atomic_load(&m->remounts);
    assert_int_equal(cr_host_drain_ssd(h, WAIT_MS, &drained, error, sizeof(error)), CR_OK);
    assert_false(drained);
    assert_int_equal(atomic_load(&m->remounts), after);
    assert_int_equal(cr_host_stop(h), CR_OK);
    master_stop(m);

    m = master_start();
    cr_host *plain = host_start(m, false);
    drained = true;
    assert_int_equal(cr_host_drain_ssd(plain, WAIT_MS, &drained, error, sizeof(error)), CR_OK);
    assert_false(drained);
    assert_int_equal(atomic_load(&m->remounts), 0);
    assert_int_equal(cr_host_stop(plain), CR_OK);
    master_stop(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_serves_a_get_over_shm),
        cmocka_unit_test(test_host_serves_a_get_over_tcp),
        cmocka_unit_test(test_host_ranges_over_shm),
        cmocka_unit_test(test_host_ranges_over_tcp),
        cmocka_unit_test(test_host_start_refuses_bad_options),
        cmocka_unit_test(test_host_drain_withdraws_the_ssd_tier),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
