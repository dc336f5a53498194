/* The state directory's housekeeping around replication: the
 * diverged-<ms> directories a start over leaves are bounded by
 * --keep-diverged (src/durable/diverged.c), and the journal's background
 * fdatasync under --durability async (src/durable/syncer.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "crescent/error.h"
#include "durable/diverged.h"
#include "durable/syncer.h"

static void make_dir(const char *dir, const char *name, int files) {
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    assert_int_equal(mkdir(path, 0700), 0);
    for (int i = 0; i < files; i++) {
        char f[600];
        snprintf(f, sizeof(f), "%s/store-%016x.log", path, i + 1);
        FILE *fp = fopen(f, "w");
        assert_non_null(fp);
        fputs("records", fp);
        fclose(fp);
    }
}

static bool exists(const char *dir, const char *name) {
    char path[512];
    struct stat sb;
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return stat(path, &sb) == 0;
}

static void rm_rf(const char *dir) {
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_prune_keeps_the_newest(void **state) {
    (void)state;
    char dir[] = "/tmp/crescent-diverged-XXXXXX";
    assert_non_null(mkdtemp(dir));
    /* Not by name order: 900 is older than 1000. */
    make_dir(dir, "diverged-1000", 2);
    make_dir(dir, "diverged-900", 1);
    make_dir(dir, "diverged-3000", 0);
    make_dir(dir, "diverged-2000", 3);
    make_dir(dir, "diverged-x1", 1);  /* not one of them: stays */
    make_dir(dir, "snapshots", 0);    /* nor this */
    char err[512] = "";
    uint32_t kept = 99;
    assert_int_equal(cr_durable_diverged_prune(dir, 2, &kept, err, sizeof(err)), CR_OK);
    assert_int_equal(kept, 2);
    assert_false(exists(dir, "diverged-900"));
    assert_false(exists(dir, "diverged-1000"));
    assert_true(exists(dir, "diverged-2000"));
    assert_true(exists(dir, "diverged-3000"));
    assert_true(exists(dir, "diverged-x1"));
    assert_true(exists(dir, "snapshots"));
    /* Fewer than N: nothing goes; the count is what is there. */
    assert_int_equal(cr_durable_diverged_prune(dir, 5, &kept, err, sizeof(err)), CR_OK);
    assert_int_equal(kept, 2);
    assert_true(exists(dir, "diverged-2000"));
    /* 0 keeps none. */
    assert_int_equal(cr_durable_diverged_prune(dir, 0, &kept, err, sizeof(err)), CR_OK);
    assert_int_equal(kept, 0);
    assert_false(exists(dir, "diverged-2000"));
    assert_false(exists(dir, "diverged-3000"));
    rm_rf(dir);
}

static void test_prune_reports_a_missing_dir(void **state) {
    (void)state;
    char err[512] = "";
    uint32_t kept = 7;
    assert_int_equal(cr_durable_diverged_prune("/nonexistent/crescent-state", 2, &kept, err,
                                               sizeof(err)),
                     CR_ERR_IO);
    assert_int_equal(kept, 0);
    assert_non_null(strstr(err, "/nonexistent/crescent-state"));
}

/* Waits for the syncer to finish what it was asked. */
static void drain(struct cr_syncer *s, uint64_t *done, int *err, uint32_t *timed) {
    uint64_t ns[CR_SYNCER_SAMPLES];
    uint32_t count = 0;
    *timed = 0;
    for (int i = 0; i < 10000; i++) {
        bool busy = cr_syncer_collect(s, done, err, ns, &count);
        *timed += count;
        if (!busy) return;
        usleep(1000);
    }
    fail_msg("the syncer did not finish in 10 s");
}

static void test_syncer_syncs_in_the_background(void **state) {
    (void)state;
    char path[] = "/tmp/crescent-syncer-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "abc", 3), 3);
    struct cr_syncer s;
    assert_int_equal(cr_syncer_start(&s), CR_OK);
    assert_true(cr_syncer_ask(&s, fd, 42));
    /* The journal may close its log meanwhile: the syncer has its own fd. */
    close(fd);
    uint64_t done = 0;
    int err = -1;
    uint32_t timed = 0;
    drain(&s, &done, &err, &timed);
    assert_int_equal(err, 0);
    assert_true(done == 42);
    assert_int_equal(timed, 1);
    /* A failure is reported, and what was synced before stays. */
    int pipefd[2];
    assert_int_equal(pipe(pipefd), 0);
    assert_true(cr_syncer_ask(&s, pipefd[1], 50)); /* fdatasync of a pipe: EINVAL */
    drain(&s, &done, &err, &timed);
    assert_int_not_equal(err, 0);
    assert_true(done == 42);
    close(pipefd[0]);
    close(pipefd[1]);
    cr_syncer_stop(&s);
    unlink(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prune_keeps_the_newest),
        cmocka_unit_test(test_prune_reports_a_missing_dir),
        cmocka_unit_test(test_syncer_syncs_in_the_background),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
