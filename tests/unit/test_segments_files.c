/* crescentd's deleting thread's step (src/actors/segments_files.c): a
 * dropped disk replica's file is deleted only while its name still points
 * to the file the store's thread opened; a newer file of the same key,
 * renamed over the name meanwhile (a later put), stays. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "actors/segments_internal.h"

static char dir[] = "/tmp/crescent-test-segfiles-XXXXXX";

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_deletes_the_file_it_opened(void **unused) {
    (void)unused;
    char path[256];
    snprintf(path, sizeof(path), "%s/a.obj", dir);
    write_file(path, "old");
    int fd = open(path, O_PATH | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(segments_files_unlink_same(fd, path), 1);
    assert_int_equal(access(path, F_OK), -1);
    close(fd);
}

static void test_keeps_a_newer_file_of_the_name(void **unused) {
    (void)unused;
    char path[256], tmp[256];
    snprintf(path, sizeof(path), "%s/b.obj", dir);
    snprintf(tmp, sizeof(tmp), "%s/b.obj.tmp", dir);
    write_file(path, "old");
    int fd = open(path, O_PATH | O_CLOEXEC); /* the dropped replica's file */
    assert_true(fd >= 0);
    write_file(tmp, "new");
    assert_int_equal(rename(tmp, path), 0); /* a later put's file */
    assert_int_equal(segments_files_unlink_same(fd, path), 0);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char got[8] = {0};
    assert_non_null(fgets(got, sizeof(got), f));
    fclose(f);
    assert_string_equal(got, "new");
    close(fd);
    unlink(path);
}

static void test_a_file_gone_already_counts_as_deleted(void **unused) {
    (void)unused;
    char path[256];
    snprintf(path, sizeof(path), "%s/c.obj", dir);
    write_file(path, "old");
    int fd = open(path, O_PATH | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(segments_files_unlink_same(fd, path), 1);
    close(fd);
}

int main(void) {
    if (mkdtemp(dir) == NULL) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deletes_the_file_it_opened),
        cmocka_unit_test(test_keeps_a_newer_file_of_the_name),
        cmocka_unit_test(test_a_file_gone_already_counts_as_deleted),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    rmdir(dir);
    return failed;
}
