/* Data-plane capabilities (src/core/xfer_cap.c): sign, encode, decode, check.
 * A known-answer vector pins the MAC to keyed BLAKE2b-128 of the documented
 * message, so a change of format is a visible change of this test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include <sodium.h>

#include "core/xfer_cap.h"

static const uint8_t KEY[CR_CAP_KEY_BYTES] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                                              17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29,
                                              30, 31, 32};
#define SEG "seg0"
#define NOW 1800000000000ull

static struct cr_cap signed_cap(uint8_t mode) {
    struct cr_cap cap = {.addr = 0x10000, .length = 8192, .expiry_ms = NOW + 1000, .mode = mode};
    cr_cap_sign(KEY, SEG, strlen(SEG), &cap);
    return cap;
}

static enum cr_cap_verdict check(const struct cr_cap *cap, uint8_t mode, uint64_t addr,
                                 uint64_t length, uint64_t now) {
    return cr_cap_check(KEY, SEG, strlen(SEG), cap, mode, addr, length, now, 2000);
}

static void test_known_answer(void **unused) {
    (void)unused;
    struct cr_cap cap = signed_cap(CR_CAP_READ);
    /* The message, built here independently of xfer_cap.c. */
    uint8_t msg[128];
    size_t n = 0;
    memcpy(msg, "crescent xfer capability v1", 28); /* with its NUL */
    n = 28;
    msg[n++] = 4;
    memcpy(msg + n, SEG, 4);
    n += 4;
    uint64_t fields[3] = {0x10000, 8192, NOW + 1000};
    for (int f = 0; f < 3; f++)
        for (int i = 0; i < 8; i++) msg[n++] = (uint8_t)(fields[f] >> (8 * i));
    msg[n++] = CR_CAP_READ;
    uint8_t want[16];
    assert_int_equal(crypto_generichash(want, 16, msg, n, KEY, sizeof(KEY)), 0);
    assert_memory_equal(cap.mac, want, 16);
}

static void test_round_trip(void **unused) {
    (void)unused;
    struct cr_cap cap = signed_cap(CR_CAP_WRITE), back;
    uint8_t wire[CR_CAP_BYTES];
    cr_cap_encode(&cap, wire);
    assert_int_equal(cr_cap_decode(wire, &back), 0);
    assert_int_equal(back.addr, cap.addr);
    assert_int_equal(back.length, cap.length);
    assert_int_equal(back.expiry_ms, cap.expiry_ms);
    assert_int_equal(back.mode, cap.mode);
    assert_memory_equal(back.mac, cap.mac, CR_CAP_MAC_BYTES);
    assert_int_equal(check(&back, CR_CAP_WRITE, 0x10000, 8192, NOW), CR_CAP_OK);
}

static void test_decode_refuses(void **unused) {
    (void)unused;
    struct cr_cap cap = signed_cap(CR_CAP_READ), out;
    memset(&out, 0x5a, sizeof(out));
    struct cr_cap untouched = out;
    uint8_t wire[CR_CAP_BYTES];
    cr_cap_encode(&cap, wire);
    for (unsigned mode = 0; mode < 256; mode++) {
        wire[24] = (uint8_t)mode;
        out = untouched;
        int rc = cr_cap_decode(wire, &out);
        assert_int_equal(rc, mode >= 1 && mode <= 3 ? 0 : -1);
        if (rc != 0) assert_memory_equal(&out, &untouched, sizeof(out));
    }
    cr_cap_encode(&cap, wire);
    for (int i = 25; i < 32; i++) {
        wire[i] = 1;
        assert_int_equal(cr_cap_decode(wire, &out), -1);
        wire[i] = 0;
    }
}

static void test_check_verdicts(void **unused) {
    (void)unused;
    struct cr_cap rd = signed_cap(CR_CAP_READ), wr = signed_cap(CR_CAP_WRITE);
    struct cr_cap both = signed_cap(CR_CAP_READ | CR_CAP_WRITE);
    assert_int_equal(check(&rd, CR_CAP_READ, 0x10000, 8192, NOW), CR_CAP_OK);
    assert_int_equal(check(&rd, CR_CAP_READ, 0x10000 + 4096, 4096, NOW), CR_CAP_OK); /* a stripe */
    assert_int_equal(check(&rd, CR_CAP_READ, 0x10000 + 8192, 0, NOW), CR_CAP_OK);
    assert_int_equal(check(&both, CR_CAP_WRITE, 0x10000, 1, NOW), CR_CAP_OK);
    /* mode */
    assert_int_equal(check(&rd, CR_CAP_WRITE, 0x10000, 8192, NOW), CR_CAP_WRONG_MODE);
    assert_int_equal(check(&wr, CR_CAP_READ, 0x10000, 8192, NOW), CR_CAP_WRONG_MODE);
    /* range, including wrap-around */
    assert_int_equal(check(&rd, CR_CAP_READ, 0x10000 - 1, 1, NOW), CR_CAP_OUT_OF_RANGE);
    assert_int_equal(check(&rd, CR_CAP_READ, 0x10000, 8193, NOW), CR_CAP_OUT_OF_RANGE);
    assert_int_equal(check(&rd, CR_CAP_READ, 0x10000 + 8192, 1, NOW), CR_CAP_OUT_OF_RANGE);
    assert_int_equal(check(&rd, CR_CAP_READ, 0x10000 + 4096, UINT64_MAX - 0x10000, NOW),
                     CR_CAP_OUT_OF_RANGE);
    assert_int_equal(check(&rd, CR_CAP_READ, UINT64_MAX, 1, NOW), CR_CAP_OUT_OF_RANGE);
    /* time: the expiry itself and the skew allowance are inside, a ms more is not */
    assert_int_equal(check(&rd, CR_CAP_READ, 0x10000, 1, NOW + 1000), CR_CAP_OK);
    assert_int_equal(check(&rd, CR_CAP_READ, 0x10000, 1, NOW + 3000), CR_CAP_OK);
    assert_int_equal(check(&rd, CR_CAP_READ, 0x10000, 1, NOW + 3001), CR_CAP_EXPIRED);
    assert_int_equal(check(&rd, CR_CAP_READ, 0x10000, 1, UINT64_MAX), CR_CAP_EXPIRED);
}

static void test_forgeries(void **unused) {
    (void)unused;
    struct cr_cap cap = signed_cap(CR_CAP_READ);
    /* every field is under the MAC: widen the range, extend the time, upgrade the mode */
    struct cr_cap f = cap;
    f.length = 1 << 30;
    assert_int_equal(check(&f, CR_CAP_READ, 0x10000, 1, NOW), CR_CAP_BAD_MAC);
    f = cap;
    f.addr = 0;
    assert_int_equal(check(&f, CR_CAP_READ, 0x10000, 1, NOW), CR_CAP_BAD_MAC);
    f = cap;
    f.expiry_ms += 1;
    assert_int_equal(check(&f, CR_CAP_READ, 0x10000, 1, NOW), CR_CAP_BAD_MAC);
    f = cap;
    f.mode = CR_CAP_READ | CR_CAP_WRITE;
    assert_int_equal(check(&f, CR_CAP_WRITE, 0x10000, 1, NOW), CR_CAP_BAD_MAC);
    for (int bit = 0; bit < 128; bit++) {
        f = cap;
        f.mac[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        assert_int_equal(check(&f, CR_CAP_READ, 0x10000, 1, NOW), CR_CAP_BAD_MAC);
    }
    /* another segment's name, another key */
    assert_int_equal(cr_cap_check(KEY, "seg1", 4, &cap, CR_CAP_READ, 0x10000, 1, NOW, 0),
                     CR_CAP_BAD_MAC);
    uint8_t other[CR_CAP_KEY_BYTES];
    assert_int_equal(cr_cap_key_generate(other), 0);
    assert_memory_not_equal(other, KEY, sizeof(other));
    assert_int_equal(cr_cap_check(other, SEG, 4, &cap, CR_CAP_READ, 0x10000, 1, NOW, 0),
                     CR_CAP_BAD_MAC);
    assert_int_equal(cr_cap_check(NULL, SEG, 4, &cap, CR_CAP_READ, 0x10000, 1, NOW, 0),
                     CR_CAP_NO_KEY);
    /* a forged MAC on an expired capability reads as forged, not expired */
    f = cap;
    f.mac[0] ^= 1;
    assert_int_equal(check(&f, CR_CAP_READ, 0x10000, 1, UINT64_MAX), CR_CAP_BAD_MAC);
}

static void test_verdict_names(void **unused) {
    (void)unused;
    assert_string_equal(cr_cap_verdict_name(CR_CAP_BAD_MAC), "bad_mac");
    assert_string_equal(cr_cap_verdict_name(CR_CAP_MISSING), "missing");
    for (int v = 0; v < CR_CAP_VERDICTS; v++) assert_non_null(cr_cap_verdict_name(v));
    assert_string_equal(cr_cap_verdict_name(CR_CAP_VERDICTS), "unknown");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_answer),   cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_decode_refuses), cmocka_unit_test(test_check_verdicts),
        cmocka_unit_test(test_forgeries),      cmocka_unit_test(test_verdict_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
