/* The shared file tier's names and file header (src/core/file_tier.c):
 * hostile keys and tenants map to safe, distinct, bounded names; headers
 * round-trip, and every truncation and flipped byte of one is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/file_tier.h"

/* A name is safe when it is tenant/hh/file, each part non-empty, made of
 * [A-Za-z0-9_%.-] only, none "." or "..", none starting with '.'. */
static void assert_safe(const char *name) {
    size_t len = strlen(name);
    assert_true(len > 0 && len < CR_FILE_TIER_NAME_MAX);
    int parts = 0;
    const char *p = name;
    while (*p != '\0') {
        const char *end = strchr(p, '/');
        size_t n = end != NULL ? (size_t)(end - p) : strlen(p);
        assert_true(n > 0);
        assert_true(p[0] != '.');
        for (size_t i = 0; i < n; i++) {
            char c = p[i];
            bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '_' || c == '-' || c == '%' || c == '.';
            assert_true(ok);
        }
        parts++;
        p += n;
        if (*p == '/') p++;
    }
    assert_int_equal(parts, 3);
    assert_string_equal(name + len - 4, ".obj");
}

static void test_hostile_keys(void **state) {
    (void)state;
    char name[CR_FILE_TIER_NAME_MAX], other[CR_FILE_TIER_NAME_MAX];
    const char *keys[] = {"plain", "a/b/c", "..", "../../etc/passwd", ".hidden", "/",
                          "sp ace", "\x01\x02\xff", "%2e%2e", "-rf"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        assert_true(cr_file_tier_name("default", keys[i], strlen(keys[i]), name, sizeof(name)) > 0);
        assert_safe(name);
        assert_null(strstr(name, ".."));
    }
    /* Every byte value but NUL, alone. */
    for (int b = 1; b < 256; b++) {
        char k = (char)b;
        assert_true(cr_file_tier_name(NULL, &k, 1, name, sizeof(name)) > 0);
        assert_safe(name);
    }
    /* A 4 KiB key: bounded name. */
    char *big = malloc(CR_FILE_TIER_KEY_MAX);
    memset(big, '/', CR_FILE_TIER_KEY_MAX);
    size_t n = cr_file_tier_name("t", big, CR_FILE_TIER_KEY_MAX, name, sizeof(name));
    assert_true(n > 0 && n < 255 + 10); /* each part fits NAME_MAX (255) */
    assert_safe(name);
    assert_int_equal(cr_file_tier_name("t", big, CR_FILE_TIER_KEY_MAX + 1, name, sizeof(name)), 0);
    /* Keys sharing their first bytes, and the same key in two tenants, differ. */
    memset(big, 'k', CR_FILE_TIER_KEY_MAX);
    cr_file_tier_name("t", big, CR_FILE_TIER_KEY_MAX, name, sizeof(name));
    big[CR_FILE_TIER_KEY_MAX - 1] = 'j';
    cr_file_tier_name("t", big, CR_FILE_TIER_KEY_MAX, other, sizeof(other));
    assert_string_not_equal(name, other);
    free(big);
    cr_file_tier_name("a", "k", 1, name, sizeof(name));
    cr_file_tier_name("b", "k", 1, other, sizeof(other));
    assert_string_not_equal(name, other);
    /* Tenant "a" key "b/c" and tenant "a/b" key "c" are different objects. */
    cr_file_tier_name("a", "b/c", 3, name, sizeof(name));
    cr_file_tier_name("a/b", "c", 1, other, sizeof(other));
    assert_string_not_equal(name, other);
    assert_safe(other);
    /* "" and NULL tenants are "default". */
    cr_file_tier_name("", "k", 1, name, sizeof(name));
    cr_file_tier_name("default", "k", 1, other, sizeof(other));
    assert_string_equal(name, other);
    assert_int_equal(strncmp(name, "default/", 8), 0);
    /* Too small a buffer or an empty key: 0, never a cut name. */
    assert_int_equal(cr_file_tier_name("t", "k", 1, name, 10), 0);
    assert_int_equal(cr_file_tier_name("t", "k", 0, name, sizeof(name)), 0);
}

static void test_header_round_trip(void **state) {
    (void)state;
    uint8_t h[CR_FILE_TIER_HEADER_FIXED + 300];
    const char key[] = "k\0ey/../x";
    size_t n = cr_file_tier_header_encode("ten", key, sizeof(key) - 1, 1u << 20, 0xabcdef, h,
                                          sizeof(h));
    assert_int_equal(n, CR_FILE_TIER_HEADER_FIXED + 3 + sizeof(key) - 1);
    struct cr_file_tier_header d;
    assert_int_equal(cr_file_tier_header_decode(h, n, &d), CR_FILE_TIER_OK);
    assert_int_equal(d.header_len, n);
    assert_int_equal(d.value_len, 1u << 20);
    assert_int_equal(d.value_xxh3, 0xabcdef);
    assert_true(cr_file_tier_header_matches(&d, "ten", key, sizeof(key) - 1, 1u << 20));
    assert_false(cr_file_tier_header_matches(&d, "ten", key, sizeof(key) - 2, 1u << 20));
    assert_false(cr_file_tier_header_matches(&d, "tem", key, sizeof(key) - 1, 1u << 20));
    assert_false(cr_file_tier_header_matches(&d, "ten", key, sizeof(key) - 1, 1u << 19));
    /* A value after the header does not disturb it. */
    assert_int_equal(cr_file_tier_header_decode(h, sizeof(h), &d), CR_FILE_TIER_OK);
    /* Every truncation is SHORT, never OK. */
    for (size_t cut = 0; cut < n; cut++)
        assert_int_equal(cr_file_tier_header_decode(h, cut, &d), CR_FILE_TIER_SHORT);
    /* Every flipped byte is refused. */
    for (size_t i = 0; i < n; i++) {
        for (int bit = 0; bit < 8; bit++) {
            h[i] ^= (uint8_t)(1u << bit);
            enum cr_file_tier_verdict v = cr_file_tier_header_decode(h, n, &d);
            assert_int_not_equal(v, CR_FILE_TIER_OK);
            h[i] ^= (uint8_t)(1u << bit);
        }
    }
    /* Too small an output, an empty key: nothing written. */
    assert_int_equal(cr_file_tier_header_encode("ten", "k", 1, 1, 1, h, 40), 0);
    assert_int_equal(cr_file_tier_header_encode("ten", "k", 0, 1, 1, h, sizeof(h)), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hostile_keys),
        cmocka_unit_test(test_header_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
