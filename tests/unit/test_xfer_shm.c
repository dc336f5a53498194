/* Unit tests for the transfer layer's same-host transport (shm): a client
 * that reaches the server's shm socket maps the segment and copies itself;
 * reads in place; falls back to tcp for a segment that cannot be shared;
 * refuses out-of-bounds ranges; notices an unregistered segment (generation)
 * and maps a re-registered one again; a malformed map request costs only its
 * own connection; a process of another user is refused the memfd (SO_PEERCRED)
 * and still gets its bytes over tcp; a segment whose memfd size is not sealed
 * is never handed out. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "rdma/xfer_internal.h"
#include "rdma/xfer_shm.h"
#include "xfer_fixture.h"

static int setup(void **state) { return setup_with(state, true); }

static void test_shm_round_trips_and_in_place(void **state) {
    struct fixture *f = *state;
    const size_t fixed[] = {0, 1, 4096, MIB + 3, 64 * MIB};
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) round_trip(f, 4096, fixed[i], i);
    uint64_t rng = 777;
    for (int i = 0; i < 16; i++) {
        size_t len = (size_t)(rng_next(&rng) % ((UINT64_C(1) << (rng_next(&rng) % 27)) + 1));
        round_trip(f, rng_next(&rng) % (SEGMENT_BYTES - len + 1), len, rng);
    }
    assert_string_equal(cr_xfer_client_transport(f->cli, f->endpoint), "shm");
    /* In place: the pointer shows what was written, with no copy. */
    assert_int_equal(cr_xfer_write(f->cli, f->endpoint, "seg0", seg_addr(f, 100), "in place", 8),
                     CR_OK);
    void *at = NULL;
    assert_int_equal(cr_xfer_client_map(f->cli, f->endpoint, "seg0", seg_addr(f, 100), 8, &at),
                     CR_OK);
    assert_memory_equal(at, "in place", 8);
    assert_ptr_not_equal(at, (uint8_t *)f->seg.base + 100); /* our own mapping of the pages */
    assert_int_equal(cr_xfer_client_map(f->cli, f->endpoint, "seg0",
                                        seg_addr(f, SEGMENT_BYTES - 4), 8, &at),
                     CR_ERR_INVALID_PARAMS);
    assert_null(at);
    struct cr_xfer_server_stats stats = server_stats(f);
    assert_int_equal(stats.shm_maps, 1);             /* mapped once, reused */
    assert_int_equal(stats.requests_read + stats.requests_written, 0); /* no tcp at all */
}

static void test_shm_out_of_bounds(void **state) {
    struct fixture *f = *state;
    uint8_t buf[64];
    assert_int_equal(cr_xfer_read(f->cli, f->endpoint, "seg0", seg_addr(f, SEGMENT_BYTES - 8),
                                  buf, sizeof(buf)), CR_ERR_INVALID_PARAMS);
    assert_non_null(strstr(cr_xfer_client_last_error(f->cli), "out of bounds"));
    assert_non_null(strstr(cr_xfer_client_last_error(f->cli), f->endpoint));
    assert_int_equal(cr_xfer_write(f->cli, f->endpoint, "seg0", seg_addr(f, 0) - 1, buf, 1),
                     CR_ERR_INVALID_PARAMS);
    round_trip(f, 0, 100, 1);
}

static void test_shm_plain_segment_falls_back_to_tcp(void **state) {
    struct fixture *f = *state;
    uint8_t *plain = calloc(1, 8192);
    server_stop(f);
    assert_int_equal(cr_xfer_server_register(f->srv, "plain", plain, 8192), CR_OK);
    server_start(f);
    uint64_t addr = (uint64_t)(uintptr_t)plain;
    for (int i = 0; i < 3; i++)
        assert_int_equal(cr_xfer_write(f->cli, f->endpoint, "plain", addr + 8, "tcp!", 4), CR_OK);
    assert_memory_equal(plain + 8, "tcp!", 4);
    void *at;
    assert_int_equal(cr_xfer_client_map(f->cli, f->endpoint, "plain", addr, 4, &at), CR_ERR_AGAIN);
    struct cr_xfer_server_stats stats = server_stats(f);
    assert_int_equal(stats.requests_written, 3);
    assert_int_equal(stats.shm_maps, 0);
    server_stop(f);
    assert_int_equal(cr_xfer_server_unregister(f->srv, "plain"), CR_OK);
    server_start(f);
    free(plain);
}

/* A segment registered with a memfd whose size is not sealed (memory that
 * did not come from cr_xfer_segment_alloc) is not handed out: a client could
 * truncate it under the server's mapping (a SIGBUS in the server at its next
 * touch).  Its client gets the bytes over tcp. */
static void test_shm_unsealed_segment_is_not_handed_out(void **state) {
    struct fixture *f = *state;
    int fd = memfd_create("unsealed", MFD_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, 8192), 0);
    void *base = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    assert_true(base != MAP_FAILED);
    struct cr_xfer_segment unsealed = {.base = base, .size = 8192, .fd = fd};
    assert_false(cr_xfer_size_sealed(fd));
    assert_true(cr_xfer_size_sealed(f->seg.fd)); /* cr_xfer_segment_alloc's own */
    server_stop(f);
    assert_int_equal(cr_xfer_server_register_segment(f->srv, "unsealed", &unsealed), CR_OK);
    server_start(f);
    uint64_t addr = (uint64_t)(uintptr_t)base;
    assert_int_equal(cr_xfer_write(f->cli, f->endpoint, "unsealed", addr + 8, "tcp!", 4), CR_OK);
    assert_memory_equal((uint8_t *)base + 8, "tcp!", 4);
    struct cr_xfer_server_stats stats = server_stats(f);
    assert_int_equal(stats.shm_refused_unsealed, 1);
    assert_int_equal(stats.requests_written, 1);
    server_stop(f);
    assert_int_equal(cr_xfer_server_unregister(f->srv, "unsealed"), CR_OK);
    server_start(f);
    munmap(base, 8192);
    close(fd);
}

static void test_shm_unregister_and_register_again(void **state) {
    struct fixture *f = *state;
    round_trip(f, 0, 4096, 3);
    server_stop(f);
    assert_int_equal(cr_xfer_server_unregister(f->srv, "seg0"), CR_OK);
    server_start(f);
    uint8_t buf[16];
    assert_int_equal(cr_xfer_read(f->cli, f->endpoint, "seg0", seg_addr(f, 0), buf, 16),
                     CR_ERR_SEGMENT_NOT_FOUND);
    /* The same name on new memory: the client maps the new segment. */
    struct cr_xfer_segment fresh;
    assert_int_equal(cr_xfer_segment_alloc(MIB, &fresh), CR_OK);
    memcpy(fresh.base, "fresh bytes", 11);
    server_stop(f);
    assert_int_equal(cr_xfer_server_register_segment(f->srv, "seg0", &fresh), CR_OK);
    server_start(f);
    assert_int_equal(cr_xfer_read(f->cli, f->endpoint, "seg0", (uint64_t)(uintptr_t)fresh.base,
                                  buf, 11), CR_OK);
    assert_memory_equal(buf, "fresh bytes", 11);
    server_stop(f);
    assert_int_equal(cr_xfer_server_unregister(f->srv, "seg0"), CR_OK);
    assert_int_equal(cr_xfer_server_register_segment(f->srv, "seg0", &f->seg), CR_OK);
    server_start(f);
    cr_xfer_segment_free(&fresh);
}

static void test_shm_malformed_request_closes_only_it(void **state) {
    struct fixture *f = *state;
    round_trip(f, 0, 10, 5);
    struct sockaddr_un addr;
    socklen_t len = cr_xfer_shm_address(f->endpoint, &addr);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&addr, len), 0);
    struct timeval tv = {.tv_sec = 30};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    assert_int_equal(send(fd, "garbage", 7, 0), 7);
    char reply[64];
    assert_int_equal(recv(fd, reply, sizeof(reply), 0), 0); /* closed, no answer */
    close(fd);
    round_trip(f, 0, 10, 6);
    struct cr_xfer_server_stats stats = server_stats(f);
    assert_int_equal(stats.refused_malformed, 1);
}

static void test_shm_many_in_flight(void **state) {
    struct fixture *f = *state;
    enum { OPS = 2000, PIECE = 1000 };
    uint8_t *src = malloc((size_t)OPS * PIECE), *dst = calloc(OPS, PIECE);
    fill_random(src, (size_t)OPS * PIECE, 8);
    for (int pass = 0; pass < 2; pass++) {
        struct counter c = {0};
        for (uint32_t i = 0; i < OPS; i++) {
            struct iovec iov = {(pass == 0 ? src : dst) + (size_t)i * PIECE, PIECE};
            struct cr_xfer_op op = {.opcode = pass == 0 ? CR_XFER_WRITE : CR_XFER_READ,
                                    .endpoint = f->endpoint, .segment = "seg0",
                                    .remote_addr = seg_addr(f, (uint64_t)i * PIECE), .iov = &iov,
                                    .iov_count = 1, .done = count_done, .arg = &c};
            int rc;
            while ((rc = cr_xfer_submit(f->cli, &op)) == CR_ERR_AGAIN)
                cr_xfer_client_poll(f->cli, -1);
            assert_int_equal(rc, CR_OK);
        }
        assert_int_equal(c.done, 1024); /* submit never completes: the full batch ran in polls */
        while (c.done < OPS) cr_xfer_client_poll(f->cli, -1);
        assert_int_equal(c.failed, 0);
    }
    assert_memory_equal(src, dst, (size_t)OPS * PIECE);
    free(src);
    free(dst);
}

static void test_shm_peer_allowed(void **state) {
    (void)state;
    assert_true(cr_xfer_shm_peer_allowed(1000, 1000));
    assert_true(cr_xfer_shm_peer_allowed(1000, 0));    /* root */
    assert_false(cr_xfer_shm_peer_allowed(1000, 1001));
    assert_false(cr_xfer_shm_peer_allowed(0, 65534));  /* nobody, against a root server */
    assert_true(cr_xfer_shm_peer_allowed(0, 0));
}

#define NOBODY_UID 65534
enum { CHILD_OK = 0, CHILD_SETUID, CHILD_GOT_FD, CHILD_TCP_FAILED, CHILD_TCP_BYTES };

/* In a child that became nobody: a raw map request gets no memfd (the server
 * closed the connection at accept), and the client still reads over tcp. */
static int other_user_child(struct fixture *f, const uint8_t *expect, size_t len) {
    if (setgid(NOBODY_UID) != 0 || setuid(NOBODY_UID) != 0) return CHILD_SETUID;
    struct sockaddr_un addr;
    socklen_t alen = cr_xfer_shm_address(f->endpoint, &addr);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&addr, alen) == 0) {
        struct timeval tv = {.tv_sec = 30};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        struct cr_xfer_shm_request req = {.magic = CR_XFER_SHM_MAGIC, .name_len = 4};
        memcpy(req.name, "seg0", 4);
        send(fd, &req, sizeof(req), MSG_NOSIGNAL);
        char reply[256];
        char control[CMSG_SPACE(2 * sizeof(int))];
        struct iovec iov = {reply, sizeof(reply)};
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
                             .msg_controllen = sizeof(control)};
        if (recvmsg(fd, &msg, 0) > 0) return CHILD_GOT_FD; /* closed: 0 or ECONNRESET */
    }
    struct cr_xfer_client *cli;
    uint8_t *got = calloc(1, len);
    if (cr_xfer_client_create(NULL, &cli) != CR_OK ||
        cr_xfer_read(cli, f->endpoint, "seg0", seg_addr(f, 0), got, len) != CR_OK)
        return CHILD_TCP_FAILED;
    if (strcmp(cr_xfer_client_transport(cli, f->endpoint), "tcp") != 0) return CHILD_TCP_FAILED;
    return memcmp(got, expect, len) == 0 ? CHILD_OK : CHILD_TCP_BYTES;
}

static void test_shm_refuses_other_user(void **state) {
    struct fixture *f = *state;
    if (geteuid() != 0) {
        printf("SKIPPED: needs root to run a client as another user\n");
        skip();
    }
    enum { LEN = 5000 };
    uint8_t data[LEN];
    fill_random(data, LEN, 11);
    memcpy(f->seg.base, data, LEN);
    server_stop(f); /* fork with one thread: the child may then use malloc and locks */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) _exit(other_user_child(f, data, LEN));
    server_start(f);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), CHILD_OK);
    struct cr_xfer_server_stats stats = server_stats(f);
    assert_int_equal(stats.shm_refused_peer, 2); /* the raw socket and the client's */
    assert_int_equal(stats.shm_maps, 0);
    assert_int_equal(stats.requests_read, 1);    /* the bytes came over tcp */
    round_trip(f, 0, 100, 12);                   /* our own user still maps */
    assert_int_equal(server_stats(f).shm_maps, 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_shm_round_trips_and_in_place, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shm_out_of_bounds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shm_plain_segment_falls_back_to_tcp, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shm_unsealed_segment_is_not_handed_out, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_shm_unregister_and_register_again, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shm_malformed_request_closes_only_it, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_shm_many_in_flight, setup, teardown),
        cmocka_unit_test(test_shm_peer_allowed),
        cmocka_unit_test_setup_teardown(test_shm_refuses_other_user, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
