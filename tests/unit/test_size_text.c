/* cr_parse_size: the sizes crescentd's config, crescentctl and crescent-store accept. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/size_text.h"

static void test_accepts(void **unused) {
    (void)unused;
    uint64_t v = 0;
    assert_true(cr_parse_size("0", &v) && v == 0);
    assert_true(cr_parse_size("4096", &v) && v == 4096);
    assert_true(cr_parse_size("0x1000", &v) && v == 4096);
    assert_true(cr_parse_size("64K", &v) && v == 64u << 10);
    assert_true(cr_parse_size("16m", &v) && v == 16u << 20);
    assert_true(cr_parse_size("1G", &v) && v == 1u << 30);
    assert_true(cr_parse_size("2T", &v) && v == 2ull << 40);
    assert_true(cr_parse_size("16777215T", &v) && v == 16777215ull << 40);
}

static void test_refuses(void **unused) {
    (void)unused;
    static const char *const bad[] = {"", "-1", "+1", " 1", "1 ", "1KB", "1Q", "G",
                                      "16777216T", "99999999999999999999", "1.5G", NULL};
    for (int i = 0; bad[i] != NULL; i++) {
        uint64_t v = 7;
        assert_false(cr_parse_size(bad[i], &v));
        assert_int_equal(v, 7);
    }
    assert_false(cr_parse_size(NULL, &(uint64_t){0}));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accepts),
        cmocka_unit_test(test_refuses),
    };
    return cmocka_run_group_tests_name("size_text", tests, NULL, NULL);
}
