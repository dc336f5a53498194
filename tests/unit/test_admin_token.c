/* The admin token (src/daemon/admin_token.c) and which RPCs need it
 * (cr_rpc_needs_admin in src/rpc/rpc_codec.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "rpc/rpc_codec.h"
#include "daemon/admin_token.h"

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_read_and_compare(void **state) {
    (void)state;
    char path[] = "/tmp/crescent-admin-token-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    struct cr_admin_token t;
    char error[512];
    assert_true(cr_admin_token_read("", &t, error, sizeof(error)));
    assert_int_equal(t.len, 0);
    assert_true(cr_admin_token_allows(&t, NULL, 0)); /* no token: everything allowed */
    write_file(path, "0123456789abcdef-token\r\nsecond line ignored\n");
    assert_true(cr_admin_token_read(path, &t, error, sizeof(error)));
    assert_string_equal(t.text, "0123456789abcdef-token");
    assert_true(cr_admin_token_allows(&t, "0123456789abcdef-token", 22));
    assert_false(cr_admin_token_allows(&t, "0123456789abcdef-tokeN", 22));
    assert_false(cr_admin_token_allows(&t, "0123456789abcdef-token!", 23));
    assert_false(cr_admin_token_allows(&t, "0123456789abcdef-toke", 21));
    assert_false(cr_admin_token_allows(&t, NULL, 0));
    write_file(path, "short\n");
    assert_false(cr_admin_token_read(path, &t, error, sizeof(error)));
    assert_non_null(strstr(error, "16 to 256 printable"));
    write_file(path, "has a space in the middle of it\n");
    assert_false(cr_admin_token_read(path, &t, error, sizeof(error)));
    unlink(path);
    assert_false(cr_admin_token_read(path, &t, error, sizeof(error)));
    assert_non_null(strstr(error, "cannot read the admin token file"));
}

static void test_which_rpcs_need_it(void **state) {
    (void)state;
    Crescent__Master__RemoveRequest rm = CRESCENT__MASTER__REMOVE_REQUEST__INIT;
    Crescent__Master__BatchRemoveRequest brm = CRESCENT__MASTER__BATCH_REMOVE_REQUEST__INIT;
    Crescent__Master__RemoveAllRequest all = CRESCENT__MASTER__REMOVE_ALL_REQUEST__INIT;
    Crescent__Master__UnmountSegmentRequest um = CRESCENT__MASTER__UNMOUNT_SEGMENT_REQUEST__INIT;
    Crescent__Master__GetVersionRequest gv = CRESCENT__MASTER__GET_VERSION_REQUEST__INIT;
    assert_false(cr_rpc_needs_admin(CRESCENT__MASTER__METHOD__REMOVE, &rm.base));
    rm.force = true;
    assert_true(cr_rpc_needs_admin(CRESCENT__MASTER__METHOD__REMOVE, &rm.base));
    assert_false(cr_rpc_needs_admin(CRESCENT__MASTER__METHOD__BATCH_REMOVE, &brm.base));
    brm.force = true;
    assert_true(cr_rpc_needs_admin(CRESCENT__MASTER__METHOD__BATCH_REMOVE, &brm.base));
    assert_true(cr_rpc_needs_admin(CRESCENT__MASTER__METHOD__REMOVE_ALL, &all.base));
    assert_true(cr_rpc_needs_admin(CRESCENT__MASTER__METHOD__REMOVE_BY_REGEX, &all.base));
    assert_true(cr_rpc_needs_admin(CRESCENT__MASTER__METHOD__BATCH_QUERY_IP, &all.base));
    assert_true(cr_rpc_needs_admin(CRESCENT__MASTER__METHOD__BATCH_REPLICA_CLEAR, &all.base));
    /* The owner unmounts its own segment without it (the store checks). */
    assert_false(cr_rpc_needs_admin(CRESCENT__MASTER__METHOD__UNMOUNT_SEGMENT, &um.base));
    assert_false(cr_rpc_needs_admin(CRESCENT__MASTER__METHOD__GET_VERSION, &gv.base));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_and_compare),
        cmocka_unit_test(test_which_rpcs_need_it),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
