/* The shm socket's file requests (src/rdma/xfer_server_shm.c): a same-host
 * client asks for the file behind a reader segment's range (a store
 * server's SSD tier) and gets its descriptor only after the capability
 * check a tcp READ of that range makes; a request without one, with a
 * forged one or one for another range is refused and counted, and the
 * request's validation refuses what does not decode.  The server's clock is
 * injected. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/xfer_cap.h"
#include "crescent/error.h"
#include "rdma/xfer.h"
#include "rdma/xfer_internal.h"
#include "rdma/xfer_shm.h"

#include "xfer_fixture.h"

#define NOW 1800000000000ull
#define OBJECT_ID 7u
#define VALUE_AT 100u /* where the value starts in the file (a header before it) */
#define VALUE_LEN 4096u
static uint64_t test_clock(void *arg) {
    (void)arg;
    return NOW;
}

static const uint8_t KEY[CR_CAP_KEY_BYTES] = {9, 8, 7, 6, 5, 4, 3, 2, 1};
static const uint8_t OTHER_KEY[CR_CAP_KEY_BYTES] = {1, 2, 3};
static char file_path[64];
static uint32_t opens;

static int reader(void *arg, uint64_t addr, uint64_t len, void *dst) {
    (void)arg, (void)addr, (void)len, (void)dst;
    return CR_ERR_IO; /* the tcp path is not what this file tests */
}

static int opener(void *arg, uint64_t addr, uint64_t len, int *fd, uint64_t *offset) {
    (void)arg;
    opens++;
    if (addr != OBJECT_ID || len != VALUE_LEN) return CR_ERR_OBJECT_NOT_FOUND;
    *fd = open(file_path, O_RDONLY | O_CLOEXEC);
    *offset = VALUE_AT;
    return *fd >= 0 ? CR_OK : CR_ERR_IO;
}

static int setup(void **state) {
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    snprintf(file_path, sizeof(file_path), "/tmp/crescent-shm-file-XXXXXX");
    int fd = mkstemp(file_path);
    assert_true(fd >= 0);
    uint8_t bytes[VALUE_AT + VALUE_LEN];
    fill_random(bytes, sizeof(bytes), 42);
    assert_int_equal(write(fd, bytes, sizeof(bytes)), (ssize_t)sizeof(bytes));
    close(fd);
    opens = 0;
    assert_int_equal(cr_xfer_segment_alloc(SEGMENT_BYTES, &f->seg), CR_OK);
    struct cr_xfer_server_config scfg = {.require_capability = true, .verbs_disabled = true,
                                         .now_ms = test_clock};
    assert_int_equal(cr_xfer_server_create(&scfg, &f->srv), CR_OK);
    assert_int_equal(cr_xfer_server_register_segment(f->srv, "seg0", &f->seg), CR_OK);
    assert_int_equal(cr_xfer_server_register_reader(f->srv, "seg0#ssd", reader, NULL), CR_OK);
    assert_int_equal(cr_xfer_server_register_reader(f->srv, "plain#ssd", reader, NULL), CR_OK);
    assert_int_equal(cr_xfer_server_set_key(f->srv, "seg0#ssd", KEY), CR_OK);
    assert_int_equal(cr_xfer_server_set_opener(f->srv, "seg0#ssd", opener), CR_OK);
    /* Only a reader segment has files to hand out. */
    assert_int_equal(cr_xfer_server_set_opener(f->srv, "seg0", opener), CR_ERR_SEGMENT_NOT_FOUND);
    assert_int_equal(cr_xfer_server_set_opener(f->srv, "nope", opener), CR_ERR_SEGMENT_NOT_FOUND);
    snprintf(f->endpoint, sizeof(f->endpoint), "%s", cr_xfer_server_endpoint(f->srv));
    struct cr_xfer_client_config cfg = {.verbs_disabled = true};
    assert_int_equal(cr_xfer_client_create(&cfg, &f->cli), CR_OK);
    server_start(f);
    *state = f;
    return 0;
}

static int teardown_file(void **state) {
    unlink(file_path);
    return teardown(state);
}

static struct cr_cap cap_for(const uint8_t *key, const char *name, uint64_t addr, uint64_t length,
                             uint8_t mode) {
    struct cr_cap cap = {.addr = addr, .length = length, .expiry_ms = NOW + 1000, .mode = mode};
    cr_cap_sign(key, name, strlen(name), &cap);
    return cap;
}

static int open_file(struct fixture *f, const char *segment, uint64_t addr, uint64_t len,
                     const struct cr_cap *cap, int *fd, uint64_t *offset) {
    return cr_xfer_client_open_file(f->cli, f->endpoint, segment, addr, len, cap, fd, offset);
}

static void test_file_needs_the_ranges_capability(void **state) {
    struct fixture *f = *state;
    int fd = -1;
    uint64_t offset = 0;
    struct cr_cap good = cap_for(KEY, "seg0#ssd", OBJECT_ID, VALUE_LEN, CR_CAP_READ);
    struct cr_cap forged = cap_for(OTHER_KEY, "seg0#ssd", OBJECT_ID, VALUE_LEN, CR_CAP_READ);
    struct cr_cap other_range = cap_for(KEY, "seg0#ssd", OBJECT_ID + 1, VALUE_LEN, CR_CAP_READ);
    struct cr_cap wr = cap_for(KEY, "seg0#ssd", OBJECT_ID, VALUE_LEN, CR_CAP_WRITE);
    assert_int_equal(open_file(f, "seg0#ssd", OBJECT_ID, VALUE_LEN, NULL, &fd, &offset),
                     CR_ERR_ILLEGAL_CLIENT);
    assert_int_equal(open_file(f, "seg0#ssd", OBJECT_ID, VALUE_LEN, &forged, &fd, &offset),
                     CR_ERR_ILLEGAL_CLIENT);
    assert_non_null(strstr(cr_xfer_client_last_error(f->cli), "shm file of 'seg0#ssd' refused"));
    assert_int_equal(open_file(f, "seg0#ssd", OBJECT_ID + 1, VALUE_LEN, &good, &fd, &offset),
                     CR_ERR_ILLEGAL_CLIENT);
    assert_int_equal(open_file(f, "seg0#ssd", OBJECT_ID + 1, VALUE_LEN, &other_range, &fd,
                               &offset), CR_ERR_OBJECT_NOT_FOUND); /* checked, then the opener's */
    assert_int_equal(open_file(f, "seg0#ssd", OBJECT_ID, VALUE_LEN, &wr, &fd, &offset),
                     CR_ERR_ILLEGAL_CLIENT);
    assert_int_equal(fd, -1);
    assert_int_equal(opens, 1); /* no descriptor opened for a refused request */
    assert_int_equal(open_file(f, "seg0#ssd", OBJECT_ID, VALUE_LEN, &good, &fd, &offset), CR_OK);
    assert_true(fd >= 0);
    assert_int_equal(offset, VALUE_AT);
    uint8_t want[VALUE_AT + VALUE_LEN], got[VALUE_LEN];
    fill_random(want, sizeof(want), 42);
    assert_int_equal(pread(fd, got, sizeof(got), (off_t)offset), (ssize_t)sizeof(got));
    assert_memory_equal(got, want + VALUE_AT, VALUE_LEN);
    assert_int_equal(write(fd, got, 1), -1); /* read-only */
    close(fd);
    struct cr_xfer_server_stats st = server_stats(f);
    assert_int_equal(st.shm_files, 1);
    assert_int_equal(st.shm_files_refused, 5);
    assert_int_equal(st.refused_capability[CR_CAP_MISSING], 1);
    assert_int_equal(st.refused_capability[CR_CAP_BAD_MAC], 1);
    assert_int_equal(st.refused_capability[CR_CAP_OUT_OF_RANGE], 1);
    assert_int_equal(st.refused_capability[CR_CAP_WRONG_MODE], 1);
}

static void test_no_file_without_an_opener(void **state) {
    struct fixture *f = *state;
    int fd = -1;
    uint64_t offset = 0;
    struct cr_cap cap = cap_for(KEY, "seg0", 0, VALUE_LEN, CR_CAP_READ);
    assert_int_equal(open_file(f, "plain#ssd", OBJECT_ID, VALUE_LEN, NULL, &fd, &offset),
                     CR_ERR_SEGMENT_NOT_FOUND);
    assert_int_equal(open_file(f, "seg0", 0, VALUE_LEN, &cap, &fd, &offset),
                     CR_ERR_SEGMENT_NOT_FOUND); /* memory: mapped, never a file */
    assert_int_equal(open_file(f, "gone#ssd", OBJECT_ID, VALUE_LEN, NULL, &fd, &offset),
                     CR_ERR_SEGMENT_NOT_FOUND);
    assert_int_equal(open_file(f, "seg0#ssd", UINT64_MAX, 2, NULL, &fd, &offset),
                     CR_ERR_INVALID_PARAMS); /* wraps: not even sent */
    assert_int_equal(fd, -1);
    assert_int_equal(opens, 0);
    assert_int_equal(server_stats(f).shm_files_refused, 3);
}

static void test_not_same_host_is_again(void **state) {
    struct fixture *f = *state;
    struct cr_xfer_client *tcp_only;
    struct cr_xfer_client_config cfg = {.shm_disabled = true, .verbs_disabled = true};
    assert_int_equal(cr_xfer_client_create(&cfg, &tcp_only), CR_OK);
    int fd = -1;
    uint64_t offset = 0;
    assert_int_equal(cr_xfer_client_open_file(tcp_only, f->endpoint, "seg0#ssd", OBJECT_ID,
                                              VALUE_LEN, NULL, &fd, &offset), CR_ERR_AGAIN);
    cr_xfer_client_destroy(tcp_only);
}

/* The request's validation, field by field. */
static void test_request_validation(void **state) {
    (void)state;
    struct cr_xfer_shm_request req = {.magic = CR_XFER_SHM_MAGIC, .name_len = 8,
                                      .kind = CR_XFER_SHM_FILE, .addr = 1, .length = 10};
    memcpy(req.name, "seg0#ssd", 8);
    struct cr_cap cap;
    assert_true(cr_xfer_shm_request_valid(&req, sizeof(req), &cap));
    assert_false(cr_xfer_shm_request_valid(&req, sizeof(req) - 1, &cap));
    struct cr_xfer_shm_request bad = req;
    bad.magic = 0x32534d58u; /* the previous protocol's */
    assert_false(cr_xfer_shm_request_valid(&bad, sizeof(bad), &cap));
    bad = req;
    bad.kind = 2;
    assert_false(cr_xfer_shm_request_valid(&bad, sizeof(bad), &cap));
    bad = req;
    bad.length = 0;
    assert_false(cr_xfer_shm_request_valid(&bad, sizeof(bad), &cap));
    bad = req;
    bad.addr = UINT64_MAX;
    assert_false(cr_xfer_shm_request_valid(&bad, sizeof(bad), &cap));
    bad = req;
    bad.name_len = 0;
    assert_false(cr_xfer_shm_request_valid(&bad, sizeof(bad), &cap));
    bad = req;
    bad.has_cap = 2;
    assert_false(cr_xfer_shm_request_valid(&bad, sizeof(bad), &cap));
    bad = req;
    bad.kind = CR_XFER_SHM_MAP;
    bad.length = 0; /* a map ignores the range */
    assert_true(cr_xfer_shm_request_valid(&bad, sizeof(bad), &cap));
}

int main(void) {
    (void)round_trip; /* the shared fixture's helpers this file does not need */
    (void)setup_with;
    (void)seg_addr;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_file_needs_the_ranges_capability, setup,
                                        teardown_file),
        cmocka_unit_test_setup_teardown(test_no_file_without_an_opener, setup, teardown_file),
        cmocka_unit_test_setup_teardown(test_not_same_host_is_again, setup, teardown_file),
        cmocka_unit_test(test_request_validation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
