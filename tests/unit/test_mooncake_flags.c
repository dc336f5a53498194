/* Unit tests for Mooncake master's flags on crescentd's command line
 * (src/mooncake/flags.c): the rewrite into crescent's flags, gflags' bool
 * spellings, refusals with their reasons, and --flagfile. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "mooncake/flags.h"

/* Rewrites argv (NULL-terminated, argv[0] included) and joins the result with
 * spaces into out; returns the rewrite's verdict. */
static bool rewrite(const char **argv, char *out, size_t size, char *error, size_t error_size) {
    int argc = 0;
    while (argv[argc] != NULL) argc++;
    int n = 0;
    char **args = NULL;
    out[0] = '\0';
    if (!cr_mooncake_flags_rewrite(argc, (char **)argv, &n, &args, error, error_size)) return false;
    assert_null(args[n]);
    for (int i = 1; i < n; i++) {
        strncat(out, args[i], size - strlen(out) - 1);
        if (i + 1 < n) strncat(out, " ", size - strlen(out) - 1);
    }
    cr_mooncake_argv_free(n, args);
    return true;
}

static void test_settings_and_value_forms(void **state) {
    (void)state;
    char out[512], err[512];
    const char *a[] = {"crescentd", "--client_ttl", "7", "-eviction_ratio=0.1",
                       "--allow_evict_soft_pinned_objects", "--noallow_evict_soft_pinned_objects",
                       "--allow_evict_soft_pinned_objects", "0", "--http-address", "h:1", NULL};
    assert_true(rewrite(a, out, sizeof(out), err, sizeof(err)));
    assert_string_equal(out, "--client-ttl=7 --eviction-ratio=0.1 "
                             "--allow-evict-soft-pinned-objects=true "
                             "--allow-evict-soft-pinned-objects=false "
                             "--allow-evict-soft-pinned-objects=false --http-address h:1");
}

static void test_when_ignored_and_refused(void **state) {
    (void)state;
    char out[512], err[512];
    const char *ok[] = {"crescentd", "--enable_oplog=false", "--noenable_oplog", "--memory_allocator",
                        "offset", "--kv_events_model_name", "m", NULL};
    assert_true(rewrite(ok, out, sizeof(out), err, sizeof(err)));
    assert_string_equal(out, "");
    const char *ha[] = {"crescentd", "--enable_oplog", NULL};
    assert_false(rewrite(ha, out, sizeof(out), err, sizeof(err)));
    assert_non_null(strstr(err, "--enable_oplog=true"));
    assert_non_null(strstr(err, "no op log"));
    const char *cxl[] = {"crescentd", "--cxl_size=1", NULL};
    assert_false(rewrite(cxl, out, sizeof(out), err, sizeof(err)));
    assert_non_null(strstr(err, "crescent has no CXL"));
    const char *bad_bool[] = {"crescentd", "--enable_oplog=perhaps", NULL};
    assert_false(rewrite(bad_bool, out, sizeof(out), err, sizeof(err)));
    assert_non_null(strstr(err, "not true or false"));
    const char *no_value[] = {"crescentd", "--client_ttl", NULL};
    assert_false(rewrite(no_value, out, sizeof(out), err, sizeof(err)));
    assert_non_null(strstr(err, "needs a value"));
}

static void test_rpc_address_endpoint_stays_crescents(void **state) {
    (void)state;
    char out[512], err[512];
    const char *a[] = {"crescentd", "--rpc_address", "tcp://127.0.0.1:1", NULL};
    assert_true(rewrite(a, out, sizeof(out), err, sizeof(err)));
    assert_string_equal(out, "--rpc_address tcp://127.0.0.1:1");
    /* A host is Mooncake's: it goes on to the parser as the host of the
     * Mooncake endpoint (--mooncake-rpc-address). */
    const char *host[] = {"crescentd", "--rpc_address=0.0.0.0", NULL};
    assert_true(rewrite(host, out, sizeof(out), err, sizeof(err)));
    assert_string_equal(out, "--rpc_address=0.0.0.0");
}

static void test_every_flag_is_honoured_or_has_a_reason(void **state) {
    (void)state;
    size_t count;
    const struct cr_mooncake_flag *flags = cr_mooncake_flags(&count);
    assert_int_equal(count, 97);
    for (size_t i = 0; i < count; i++) {
        assert_ptr_equal(cr_mooncake_flag_find(flags[i].name), &flags[i]);
        if (flags[i].kind == CR_MC_SETTING || flags[i].kind == CR_MC_WHEN)
            assert_non_null(flags[i].target);
        if (flags[i].kind != CR_MC_SETTING) assert_true(strlen(flags[i].reason) > 10);
        if (i > 0) assert_true(strcmp(flags[i - 1].name, flags[i].name) < 0); /* sorted, once */
    }
}

static void test_flagfile(void **state) {
    (void)state;
    char dir[] = "/tmp/crescent-flagfile-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char inner[128], outer[128], arg[160], out[512], err[512];
    snprintf(inner, sizeof(inner), "%s/inner", dir);
    snprintf(outer, sizeof(outer), "%s/outer", dir);
    FILE *f = fopen(inner, "w");
    fputs("--eviction_ratio=0.2\n", f);
    fclose(f);
    f = fopen(outer, "w");
    fprintf(f, "# comment\n\n  --client_ttl=11  \r\n--flagfile=%s\n--metrics-port=0\n", inner);
    fclose(f);
    snprintf(arg, sizeof(arg), "--flagfile=%s", outer);
    const char *a[] = {"crescentd", arg, "--client_ttl=12", NULL};
    assert_true(rewrite(a, out, sizeof(out), err, sizeof(err)));
    assert_string_equal(out, "--client-ttl=11 --eviction-ratio=0.2 --metrics-port=0 "
                             "--client-ttl=12");
    f = fopen(outer, "w");
    fprintf(f, "--flagfile=%s\n", outer); /* itself */
    fclose(f);
    assert_false(rewrite(a, out, sizeof(out), err, sizeof(err)));
    assert_non_null(strstr(err, "loop"));
    f = fopen(outer, "w");
    fputs("client_ttl=3\n", f);
    fclose(f);
    assert_false(rewrite(a, out, sizeof(out), err, sizeof(err)));
    assert_non_null(strstr(err, ":1:"));
    unlink(inner);
    unlink(outer);
    rmdir(dir);
    const char *missing[] = {"crescentd", "--flagfile", "/nonexistent/flags", NULL};
    assert_false(rewrite(missing, out, sizeof(out), err, sizeof(err)));
    assert_non_null(strstr(err, "No such file"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_settings_and_value_forms),
        cmocka_unit_test(test_when_ignored_and_refused),
        cmocka_unit_test(test_rpc_address_endpoint_stays_crescents),
        cmocka_unit_test(test_every_flag_is_honoured_or_has_a_reason),
        cmocka_unit_test(test_flagfile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
