/* Unit tests for the copy/move executor (src/client/task_exec.c): real bytes
 * through the transfer layer, between two segments served by a server on its
 * own thread (as crescent-store runs one), over tcp and over shm. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include <zmq.h>

#include "client/task_exec.h"
#include "crescent/client.h"
#include "crescent/error.h"
#include "master.pb-c.h"
#include "msgs/rpc_frame.h"
#include "rdma/xfer.h"

#define MIB (UINT64_C(1) << 20)
#define SEG_BYTES (16 * MIB)

struct fixture {
    struct cr_xfer_server *srv;
    struct cr_xfer_segment a, b;
    struct cr_xfer_client *cli;
    pthread_t thread;
    atomic_bool stop;
    char endpoint[64];
};

static void *serve(void *arg) {
    struct fixture *f = arg;
    while (!atomic_load(&f->stop)) cr_xfer_server_run(f->srv, 5);
    return NULL;
}

static int setup_with(void **state, bool shm) {
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    struct cr_xfer_server_config sc = {.shm_disabled = !shm};
    assert_int_equal(cr_xfer_server_create(&sc, &f->srv), CR_OK);
    assert_int_equal(cr_xfer_segment_alloc(SEG_BYTES, &f->a), CR_OK);
    assert_int_equal(cr_xfer_segment_alloc(SEG_BYTES, &f->b), CR_OK);
    assert_int_equal(cr_xfer_server_register_segment(f->srv, "seg-a", &f->a), CR_OK);
    assert_int_equal(cr_xfer_server_register_segment(f->srv, "seg-b", &f->b), CR_OK);
    snprintf(f->endpoint, sizeof(f->endpoint), "%s", cr_xfer_server_endpoint(f->srv));
    struct cr_xfer_client_config cc = {.shm_disabled = !shm};
    assert_int_equal(cr_xfer_client_create(&cc, &f->cli), CR_OK);
    assert_int_equal(pthread_create(&f->thread, NULL, serve, f), 0);
    *state = f;
    return 0;
}

static int setup_tcp(void **state) { return setup_with(state, false); }
static int setup_shm(void **state) { return setup_with(state, true); }

static int teardown(void **state) {
    struct fixture *f = *state;
    cr_xfer_client_destroy(f->cli);
    atomic_store(&f->stop, true);
    pthread_join(f->thread, NULL);
    cr_xfer_server_destroy(f->srv);
    cr_xfer_segment_free(&f->a);
    cr_xfer_segment_free(&f->b);
    free(f);
    return 0;
}

static void fill(uint8_t *p, size_t n, uint64_t seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = (uint8_t)(seed >> 56);
    }
}

/* A job copying `size` bytes from seg-a + src_off to seg-b at each offset. */
static struct cr_task_exec_job job_of(struct fixture *f, uint64_t size, uint64_t src_off,
                                      const uint64_t *dst_offs, uint32_t n) {
    struct cr_task_exec_job job = {.size = size, .target_count = n};
    job.source = (struct cr_task_exec_replica){f->endpoint, "seg-a",
                                               (uint64_t)(uintptr_t)f->a.base + src_off, NULL};
    for (uint32_t i = 0; i < n; i++)
        job.targets[i] = (struct cr_task_exec_replica){
            f->endpoint, "seg-b", (uint64_t)(uintptr_t)f->b.base + dst_offs[i], NULL};
    job.has_checksum = true;
    job.checksum = XXH3_64bits((uint8_t *)f->a.base + src_off, size);
    return job;
}

static void copies_bytes(void **state) {
    struct fixture *f = *state;
    const uint64_t sizes[] = {1, 4096, 64 * 1024, 4 * MIB + 17};
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        fill(f->a.base, sizes[s], s + 1);
        uint64_t offs[2] = {0, 8 * MIB};
        memset(f->b.base, 0, SEG_BYTES);
        struct cr_task_exec_job job = job_of(f, sizes[s], 0, offs, 2);
        char why[CR_TASK_EXEC_ERROR_MAX];
        assert_int_equal(cr_task_exec_run(f->cli, &job, why, sizeof(why)), CR_OK);
        assert_memory_equal(f->b.base, f->a.base, sizes[s]);
        assert_memory_equal((uint8_t *)f->b.base + offs[1], f->a.base, sizes[s]);
    }
}

static void checksum_mismatch_writes_nothing(void **state) {
    struct fixture *f = *state;
    fill(f->a.base, 4096, 7);
    memset(f->b.base, 0xee, 4096);
    uint64_t off = 0;
    struct cr_task_exec_job job = job_of(f, 4096, 0, &off, 1);
    job.checksum ^= 1; /* the source changed since PutEnd (or PutEnd's bytes were not these) */
    char why[CR_TASK_EXEC_ERROR_MAX];
    assert_int_equal(cr_task_exec_run(f->cli, &job, why, sizeof(why)), CR_ERR_RPC_FAIL);
    assert_non_null(strstr(why, "checksum"));
    for (size_t i = 0; i < 4096; i++) assert_int_equal(((uint8_t *)f->b.base)[i], 0xee);
}

static void bad_target_is_reported(void **state) {
    struct fixture *f = *state;
    fill(f->a.base, 4096, 9);
    uint64_t off = SEG_BYTES - 100; /* runs past seg-b's end: the server refuses it */
    struct cr_task_exec_job job = job_of(f, 4096, 0, &off, 1);
    char why[CR_TASK_EXEC_ERROR_MAX];
    assert_int_not_equal(cr_task_exec_run(f->cli, &job, why, sizeof(why)), CR_OK);
    assert_non_null(strstr(why, "writing a target"));
    job.targets[0].segment = "seg-x";
    job.targets[0].buffer = 0x1000;
    assert_int_not_equal(cr_task_exec_run(f->cli, &job, why, sizeof(why)), CR_OK);
    job.target_count = 0;
    assert_int_equal(cr_task_exec_run(f->cli, &job, why, sizeof(why)), CR_ERR_INVALID_PARAMS);
}

/* ---- cr_task_exec_serve against a scripted master ------------------------ */

/* A master on a ROUTER that answers FetchTasks with `assignment` (once, then
 * nothing) and records each MarkTaskToComplete.  One frame each way. */
struct master {
    void *ctx, *router;
    char endpoint[64];
    pthread_t thread;
    Crescent__Master__TaskAssignment *assignment;
    int reports;
    int reported_status;
    char reported_message[256];
};

static void master_reply(struct master *m, const uint8_t *identity, size_t identity_len,
                         uint64_t id, const ProtobufCMessage *resp) {
    uint8_t frame[CR_RPC_REPLY_HEADER_BYTES + 4096];
    size_t len = protobuf_c_message_pack(resp, frame + CR_RPC_REPLY_HEADER_BYTES);
    cr_rpc_put_u64(frame, id);
    cr_rpc_put_i32(frame + 8, 0);
    zmq_send(m->router, identity, identity_len, ZMQ_SNDMORE);
    zmq_send(m->router, frame, CR_RPC_REPLY_HEADER_BYTES + len, 0);
}

static void *master_run(void *arg) {
    struct master *m = arg;
    for (int handled = 0; handled < 3;) { /* fetch, report, fetch again */
        uint8_t identity[256], frame[4096];
        int il = zmq_recv(m->router, identity, sizeof(identity), 0);
        int fl = zmq_recv(m->router, frame, sizeof(frame), 0);
        if (il < 0 || fl < (int)CR_RPC_REQUEST_HEADER_BYTES) return NULL;
        uint16_t method = cr_rpc_get_u16(frame);
        uint64_t id = cr_rpc_get_u64(frame + CR_RPC_METHOD_BYTES);
        const uint8_t *body = frame + CR_RPC_REQUEST_HEADER_BYTES;
        size_t body_len = (size_t)fl - CR_RPC_REQUEST_HEADER_BYTES;
        if (method == CR_METHOD_FETCH_TASKS) {
            Crescent__Master__FetchTasksResponse r = CRESCENT__MASTER__FETCH_TASKS_RESPONSE__INIT;
            Crescent__Master__TaskAssignment *once = m->assignment;
            if (once != NULL) r.n_tasks = 1, r.tasks = &once;
            m->assignment = NULL; /* handed out once */
            master_reply(m, identity, (size_t)il, id, &r.base);
        } else if (method == CR_METHOD_MARK_TASK_TO_COMPLETE) {
            Crescent__Master__MarkTaskToCompleteRequest *q =
                crescent__master__mark_task_to_complete_request__unpack(NULL, body_len, body);
            assert_non_null(q);
            m->reports++;
            m->reported_status = q->status;
            snprintf(m->reported_message, sizeof(m->reported_message), "%s",
                     q->message != NULL ? q->message : "");
            crescent__master__mark_task_to_complete_request__free_unpacked(q, NULL);
            Crescent__Master__MarkTaskToCompleteResponse r =
                CRESCENT__MASTER__MARK_TASK_TO_COMPLETE_RESPONSE__INIT;
            master_reply(m, identity, (size_t)il, id, &r.base);
        }
        handled++;
    }
    return NULL;
}

/* The executor's round: the assignment's bytes land in the target, the
 * report says SUCCESS; with a wrong checksum it says FAILED, with the reason,
 * and the target is untouched. */
static void serve_round(struct fixture *f, bool good_checksum) {
    struct master m = {0};
    m.ctx = zmq_ctx_new();
    m.router = zmq_socket(m.ctx, ZMQ_ROUTER);
    assert_int_equal(zmq_bind(m.router, "tcp://127.0.0.1:*"), 0);
    size_t size = sizeof(m.endpoint);
    zmq_getsockopt(m.router, ZMQ_LAST_ENDPOINT, m.endpoint, &size);
    fill(f->a.base, 65536, 42);
    memset(f->b.base, 0, 65536);
    Crescent__Master__UUID task_id = CRESCENT__MASTER__UUID__INIT;
    task_id.first = 7, task_id.second = 9;
    Crescent__Master__BufHandle src = CRESCENT__MASTER__BUF_HANDLE__INIT;
    Crescent__Master__BufHandle dst = CRESCENT__MASTER__BUF_HANDLE__INIT;
    Crescent__Master__BufHandle *dsts[] = {&dst};
    src.segment_name = "seg-a", src.size = 65536, src.transport_endpoint = f->endpoint;
    src.buffer = (uint64_t)(uintptr_t)f->a.base;
    dst.segment_name = "seg-b", dst.size = 65536, dst.transport_endpoint = f->endpoint;
    dst.buffer = (uint64_t)(uintptr_t)f->b.base;
    Crescent__Master__TaskAssignment a = CRESCENT__MASTER__TASK_ASSIGNMENT__INIT;
    a.task_id = &task_id, a.key = "k", a.source = &src, a.n_targets = 1, a.targets = dsts;
    a.has_checksum_xxh3 = 1;
    a.checksum_xxh3 = XXH3_64bits(f->a.base, 65536) ^ (good_checksum ? 0 : 1);
    m.assignment = &a;
    assert_int_equal(pthread_create(&m.thread, NULL, master_run, &m), 0);
    cr_client *c = NULL;
    char error[128];
    assert_int_equal(cr_client_open(m.endpoint, NULL, &c, error, sizeof(error)), CR_OK);
    assert_int_equal(cr_task_exec_serve(c, f->cli, 16), 1);
    assert_int_equal(cr_task_exec_serve(c, f->cli, 16), 0); /* nothing left */
    pthread_join(m.thread, NULL);
    assert_int_equal(m.reports, 1);
    if (good_checksum) {
        assert_int_equal(m.reported_status, CRESCENT__MASTER__TASK_STATUS__SUCCESS);
        assert_memory_equal(f->b.base, f->a.base, 65536);
    } else {
        assert_int_equal(m.reported_status, CRESCENT__MASTER__TASK_STATUS__FAILED);
        assert_non_null(strstr(m.reported_message, "checksum"));
        for (size_t i = 0; i < 65536; i++) assert_int_equal(((uint8_t *)f->b.base)[i], 0);
    }
    cr_client_close(c);
    zmq_close(m.router);
    zmq_ctx_term(m.ctx);
}

static void serve_copies_and_reports(void **state) {
    serve_round(*state, true);
    serve_round(*state, false);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(copies_bytes, setup_tcp, teardown),
        cmocka_unit_test_setup_teardown(checksum_mismatch_writes_nothing, setup_tcp, teardown),
        cmocka_unit_test_setup_teardown(bad_target_is_reported, setup_tcp, teardown),
        cmocka_unit_test_setup_teardown(copies_bytes, setup_shm, teardown),
        cmocka_unit_test_setup_teardown(bad_target_is_reported, setup_shm, teardown),
        cmocka_unit_test_setup_teardown(serve_copies_and_reports, setup_tcp, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
