/* The event sequence mark (src/durable/seqmark.c): round-trips through its
 * file, a missing file is a first start, and a file that is short, of
 * another kind or flipped in any byte is refused with the file named. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "crescent/error.h"
#include "durable/seqmark.h"

static void test_codec(void **state) {
    (void)state;
    uint8_t buf[CR_SEQMARK_LEN];
    char err[256];
    uint64_t mark = 0;
    cr_seqmark_encode(0x0123456789abcdefull, buf);
    assert_int_equal(cr_seqmark_decode(buf, sizeof(buf), &mark, err, sizeof(err)), CR_OK);
    assert_true(mark == 0x0123456789abcdefull);
    for (size_t len = 0; len < CR_SEQMARK_LEN; len++)
        assert_int_equal(cr_seqmark_decode(buf, len, &mark, err, sizeof(err)), CR_ERR_PROTOCOL);
    for (size_t i = 0; i < CR_SEQMARK_LEN; i++) {
        for (int bit = 0; bit < 8; bit++) {
            buf[i] ^= (uint8_t)(1u << bit);
            assert_int_equal(cr_seqmark_decode(buf, sizeof(buf), &mark, err, sizeof(err)),
                             CR_ERR_PROTOCOL);
            buf[i] ^= (uint8_t)(1u << bit);
        }
    }
}

static void test_files(void **state) {
    (void)state;
    char dir[] = "/tmp/crescent-seqmark-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char sub[sizeof(dir) + 8], path[sizeof(sub) + 16], err[512];
    snprintf(sub, sizeof(sub), "%s/state", dir); /* created by the first store */
    snprintf(path, sizeof(path), "%s/%s", sub, CR_SEQMARK_FILE);
    uint64_t mark = 99;
    assert_int_equal(cr_seqmark_load(sub, &mark, err, sizeof(err)), CR_OK);
    assert_true(mark == 0);
    assert_int_equal(cr_seqmark_store(sub, 65536, err, sizeof(err)), CR_OK);
    assert_int_equal(cr_seqmark_store(sub, 131072, err, sizeof(err)), CR_OK);
    assert_int_equal(cr_seqmark_load(sub, &mark, err, sizeof(err)), CR_OK);
    assert_true(mark == 131072);
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    fseek(f, 9, SEEK_SET);
    fputc(0x55, f);
    fclose(f);
    assert_int_equal(cr_seqmark_load(sub, &mark, err, sizeof(err)), CR_ERR_PROTOCOL);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "checksum"));
    unlink(path);
    rmdir(sub);
    rmdir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_codec), cmocka_unit_test(test_files)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
