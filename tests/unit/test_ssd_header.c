/* The SSD-tier file header (src/tier/ssd_header.c): round trip, and every
 * field checked before a decode succeeds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "crescent/error.h"
#include "tier/ssd_header.h"

static size_t encode(uint8_t *buf, const char *key, const char *tenant) {
    struct cr_ssd_header h = {.key = (const uint8_t *)key, .key_len = (uint32_t)strlen(key),
                              .tenant = (const uint8_t *)tenant,
                              .tenant_len = (uint32_t)strlen(tenant), .value_len = 1048576,
                              .value_xxh3 = 0x0123456789abcdefull};
    return cr_ssd_header_encode(&h, buf, CR_SSD_HEADER_MAX);
}

static void test_round_trip(void **unused) {
    (void)unused;
    uint8_t buf[CR_SSD_HEADER_MAX];
    size_t n = encode(buf, "a/../b\xff", "tenant-1");
    assert_int_equal(n, cr_ssd_header_size(7, 8));
    struct cr_ssd_header h;
    char why[CR_SSD_WHY_MAX];
    assert_int_equal(cr_ssd_header_decode(buf, n, &h, why, sizeof(why)), CR_OK);
    assert_int_equal(h.version, CR_SSD_FORMAT_VERSION);
    assert_int_equal(h.header_len, n);
    assert_int_equal(h.key_len, 7);
    assert_memory_equal(h.key, "a/../b\xff", 7);
    assert_int_equal(h.tenant_len, 8);
    assert_memory_equal(h.tenant, "tenant-1", 8);
    assert_int_equal(h.value_len, 1048576);
    assert_true(h.value_xxh3 == 0x0123456789abcdefull);
    /* a longer buffer (the value follows) decodes the same */
    uint8_t more[CR_SSD_HEADER_MAX + 16] = {0};
    memcpy(more, buf, n);
    assert_int_equal(cr_ssd_header_decode(more, n + 16, &h, why, sizeof(why)), CR_OK);
}

static void test_short_asks_for_more(void **unused) {
    (void)unused;
    uint8_t buf[CR_SSD_HEADER_MAX];
    size_t n = encode(buf, "key", "default");
    struct cr_ssd_header h;
    for (size_t len = 0; len < n; len++) {
        assert_int_equal(cr_ssd_header_decode(buf, len, &h, NULL, 0), CR_ERR_AGAIN);
        assert_true(h.header_len > len);
    }
}

static void test_every_byte_flip_refused(void **unused) {
    (void)unused;
    uint8_t buf[CR_SSD_HEADER_MAX];
    size_t n = encode(buf, "key", "default");
    for (size_t i = 0; i < n; i++) {
        for (int bit = 0; bit < 8; bit++) {
            buf[i] ^= (uint8_t)(1u << bit);
            struct cr_ssd_header h;
            char why[CR_SSD_WHY_MAX] = "";
            int rc = cr_ssd_header_decode(buf, n, &h, why, sizeof(why));
            /* a flipped length may ask for more bytes; never a success */
            assert_true(rc == CR_ERR_PROTOCOL || rc == CR_ERR_AGAIN);
            if (rc == CR_ERR_PROTOCOL) assert_true(why[0] != '\0');
            buf[i] ^= (uint8_t)(1u << bit);
        }
    }
}

static void test_encode_refuses_bad_lengths(void **unused) {
    (void)unused;
    uint8_t buf[CR_SSD_HEADER_MAX];
    static uint8_t big[CR_SSD_KEY_MAX + 1];
    struct cr_ssd_header h = {.key = big, .key_len = 0, .tenant = (const uint8_t *)"t",
                              .tenant_len = 1};
    assert_int_equal(cr_ssd_header_encode(&h, buf, sizeof(buf)), 0);
    h.key_len = CR_SSD_KEY_MAX + 1;
    assert_int_equal(cr_ssd_header_encode(&h, buf, sizeof(buf)), 0);
    h.key_len = CR_SSD_KEY_MAX;
    assert_int_equal(cr_ssd_header_encode(&h, buf, sizeof(buf)), cr_ssd_header_size(4096, 1));
    h.tenant_len = 0;
    assert_int_equal(cr_ssd_header_encode(&h, buf, sizeof(buf)), 0);
    h.tenant_len = 1;
    assert_int_equal(cr_ssd_header_encode(&h, buf, 10), 0);
}

static void test_other_version_refused(void **unused) {
    (void)unused;
    uint8_t buf[CR_SSD_HEADER_MAX];
    size_t n = encode(buf, "key", "default");
    buf[8] = 2; /* version 2, and the header checksum redone would still be refused */
    struct cr_ssd_header h;
    char why[CR_SSD_WHY_MAX];
    assert_int_equal(cr_ssd_header_decode(buf, n, &h, why, sizeof(why)), CR_ERR_PROTOCOL);
    assert_non_null(strstr(why, "version"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_short_asks_for_more),
        cmocka_unit_test(test_every_byte_flip_refused),
        cmocka_unit_test(test_encode_refuses_bad_lengths),
        cmocka_unit_test(test_other_version_refused),
    };
    return cmocka_run_group_tests_name("ssd_header", tests, NULL, NULL);
}
