/* libcrescent's shm transport (shm://NAME, src/client/client_shm.c)
 * against the server side of rpc/rpc_shm.c run by a thread of the test
 * as an actor's loop would run it (serve, flush, arm, sleep in poll):
 * calls answered, a large request crossing a small ring in pieces, the set-up
 * made only by the first call, a server that goes away, an endpoint nobody
 * serves, and a malformed endpoint. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rpc/rpc_shm.h"
#include "crescent/client.h"
#include "crescent/error.h"
#include "master.pb-c.h"
#include "msgs/rpc_frame.h"

struct server {
    struct cr_rpc_shm_server *srv;
    char path[64];
    char endpoint[80];
    atomic_bool stop;
    atomic_uint frames;
    size_t longest_key, longest_frame;
    pthread_t thread;
};

/* Answers ExistKey with exists = true, after decoding the request whole. */
static bool on_frame(void *ctx, uint64_t client, const uint8_t *p, size_t len) {
    struct server *s = ctx;
    atomic_fetch_add(&s->frames, 1);
    uint64_t id = cr_rpc_get_u64(p + CR_RPC_METHOD_BYTES);
    if (cr_rpc_get_u16(p) != CRESCENT__MASTER__METHOD__EXIST_KEY) { /* a batch: its size */
        s->longest_frame = len;
        static const char text[] = "not served here";
        cr_rpc_shm_server_reply(s->srv, client, id, CR_ERR_RPC_FAIL, (const uint8_t *)text,
                                sizeof(text) - 1, false);
        return false;
    }
    Crescent__Master__ExistKeyRequest *req = crescent__master__exist_key_request__unpack(
        NULL, len - CR_RPC_REQUEST_HEADER_BYTES, p + CR_RPC_REQUEST_HEADER_BYTES);
    Crescent__Master__ExistKeyResponse resp = CRESCENT__MASTER__EXIST_KEY_RESPONSE__INIT;
    resp.has_exists = 1;
    resp.exists = req != NULL;
    if (req != NULL && req->key != NULL && strlen(req->key) > s->longest_key)
        s->longest_key = strlen(req->key);
    if (req != NULL) crescent__master__exist_key_request__free_unpacked(req, NULL);
    uint8_t body[64];
    size_t n = protobuf_c_message_pack(&resp.base, body);
    cr_rpc_shm_server_reply(s->srv, client, id, CR_OK, body, n, false);
    return false;
}

static void *serve(void *arg) {
    struct server *s = arg;
    while (!atomic_load(&s->stop)) {
        cr_rpc_shm_server_serve(s->srv);
        cr_rpc_shm_server_flush(s->srv);
        if (!cr_rpc_shm_server_arm(s->srv)) continue;
        struct pollfd p = {.fd = cr_rpc_shm_server_fd(s->srv), .events = POLLIN};
        poll(&p, 1, 20);
        cr_rpc_shm_server_disarm(s->srv);
    }
    return NULL;
}

static void server_start(struct server *s, uint32_t ring_bytes) {
    memset(s, 0, sizeof(*s));
    snprintf(s->path, sizeof(s->path), "@crescent-test-client-shm/%d", (int)getpid());
    snprintf(s->endpoint, sizeof(s->endpoint), "shm://%s", s->path);
    struct cr_rpc_shm_options o = {.path = s->path, .clients_max = 4, .ring_bytes = ring_bytes,
                                   .queue_max = 16, .on_frame = on_frame, .ctx = s};
    char why[256];
    assert_int_equal(cr_rpc_shm_server_open(&o, &s->srv, why, sizeof(why)), CR_OK);
    assert_int_equal(pthread_create(&s->thread, NULL, serve, s), 0);
}

static void server_stop(struct server *s) {
    atomic_store(&s->stop, true);
    pthread_join(s->thread, NULL);
    cr_rpc_shm_server_close(s->srv);
}

static cr_client *open_shm(const char *endpoint) {
    char error[256];
    cr_client *c = NULL;
    struct cr_client_options o = {.timeout_ms = 10000};
    assert_int_equal(cr_client_open(endpoint, &o, &c, error, sizeof(error)), CR_OK);
    return c;
}

static void test_calls_over_shm(void **unused) {
    (void)unused;
    struct server s;
    server_start(&s, CR_RPC_SHM_RING_MIN);
    cr_client *c = open_shm(s.endpoint);
    for (int i = 0; i < 200; i++) { /* wraps the 4 KiB rings many times */
        bool exists = false;
        assert_int_equal(cr_client_exist_key(c, NULL, "k", &exists), CR_OK);
        assert_true(exists);
    }
    /* A batch longer than the ring: the request crosses in pieces. */
    enum { KEYS = 64 };
    static char keys[KEYS][200];
    const char *names[KEYS];
    for (int i = 0; i < KEYS; i++) {
        memset(keys[i], 'a' + i % 26, sizeof(keys[i]) - 1);
        names[i] = keys[i];
    }
    struct cr_status_list found = {0};
    assert_int_equal(cr_client_batch_exist_key(c, NULL, names, KEYS, &found), CR_ERR_RPC_FAIL);
    cr_client_status_list_free(&found);
    assert_non_null(strstr(cr_client_last_error(c), "not served here"));
    assert_true(s.longest_frame > 3 * CR_RPC_SHM_RING_MIN);
    bool exists = false;
    assert_int_equal(cr_client_exist_key(c, NULL, "k", &exists), CR_OK); /* still in step */
    cr_client_close(c);
    /* A client that never calls never sets up. */
    unsigned before = atomic_load(&s.frames);
    c = open_shm(s.endpoint);
    cr_client_close(c);
    server_stop(&s);
    assert_int_equal(atomic_load(&s.frames), before);
}

/* crescentd going away mid-session is an error naming the endpoint; the
 * next call sets up again once it is back. */
static void test_server_gone_and_back(void **unused) {
    (void)unused;
    struct server s;
    server_start(&s, 1u << 16);
    char endpoint[80];
    snprintf(endpoint, sizeof(endpoint), "%s", s.endpoint);
    cr_client *c = open_shm(endpoint);
    cr_client_set_timeout(c, 2000);
    bool exists = false;
    assert_int_equal(cr_client_exist_key(c, NULL, "k", &exists), CR_OK);
    server_stop(&s);
    int rc = cr_client_exist_key(c, NULL, "k", &exists);
    assert_true(rc == CR_ERR_IO || rc == CR_ERR_TIMEOUT);
    rc = cr_client_exist_key(c, NULL, "k", &exists); /* nobody listens now */
    assert_int_equal(rc, CR_ERR_IO);
    assert_non_null(strstr(cr_client_last_error(c), "--rpc-shm-path"));
    server_start(&s, 1u << 16);
    assert_int_equal(cr_client_exist_key(c, NULL, "k", &exists), CR_OK);
    assert_true(exists);
    cr_client_close(c);
    server_stop(&s);
}

static void test_bad_endpoints(void **unused) {
    (void)unused;
    cr_client *c = NULL;
    char error[256];
    assert_int_equal(cr_client_open("shm://", NULL, &c, error, sizeof(error)),
                     CR_ERR_INVALID_PARAMS);
    assert_non_null(strstr(error, "shm://@NAME"));
    assert_null(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_calls_over_shm),
        cmocka_unit_test(test_server_gone_and_back),
        cmocka_unit_test(test_bad_endpoints),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
