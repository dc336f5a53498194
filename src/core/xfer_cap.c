/* Data-plane capabilities (format and reasons in xfer_cap.h).  keyed BLAKE2b
 * is libsodium's crypto_generichash: a MAC when keyed (unlike XXH3, whose
 * seed an attacker can recover), and fast on ~300 bytes. */
#include "core/xfer_cap.h"

#include <assert.h>
#include <sodium.h>
#include <string.h>

#include "core/le.h"

static const char DOMAIN[] = "crescent xfer capability v1";

const char *cr_cap_verdict_name(enum cr_cap_verdict v) {
    static const char *const names[CR_CAP_VERDICTS] = {
        [CR_CAP_OK] = "ok",           [CR_CAP_MISSING] = "missing",
        [CR_CAP_NO_KEY] = "no_key",   [CR_CAP_BAD_MAC] = "bad_mac",
        [CR_CAP_EXPIRED] = "expired", [CR_CAP_OUT_OF_RANGE] = "out_of_range",
        [CR_CAP_WRONG_MODE] = "wrong_mode"};
    return (unsigned)v < CR_CAP_VERDICTS ? names[v] : "unknown";
}

int cr_cap_key_generate(uint8_t key[CR_CAP_KEY_BYTES]) {
    assert(key != NULL);
    if (sodium_init() < 0) return -1;
    randombytes_buf(key, CR_CAP_KEY_BYTES);
    return 0;
}

/* The MAC of cap's fields (not its mac) for segment name. */
static void mac_of(const uint8_t key[CR_CAP_KEY_BYTES], const char *name, size_t name_len,
                   const struct cr_cap *cap, uint8_t out[CR_CAP_MAC_BYTES]) {
    uint8_t msg[sizeof(DOMAIN) + 1 + 255 + 25];
    size_t n = 0;
    memcpy(msg, DOMAIN, sizeof(DOMAIN)); /* with its NUL: the domain ends there */
    n += sizeof(DOMAIN);
    msg[n++] = (uint8_t)name_len;
    memcpy(msg + n, name, name_len);
    n += name_len;
    cr_le_put_u64(msg + n, cap->addr);
    cr_le_put_u64(msg + n + 8, cap->length);
    cr_le_put_u64(msg + n + 16, cap->expiry_ms);
    msg[n + 24] = cap->mode;
    n += 25;
    /* crypto_generichash never fails for these sizes (key 16..64, out 16..64). */
    crypto_generichash(out, CR_CAP_MAC_BYTES, msg, n, key, CR_CAP_KEY_BYTES);
}

void cr_cap_sign(const uint8_t key[CR_CAP_KEY_BYTES], const char *name, size_t name_len,
                 struct cr_cap *cap) {
    assert(key != NULL && cap != NULL && name != NULL);
    assert(name_len >= 1 && name_len <= 255);
    mac_of(key, name, name_len, cap, cap->mac);
}

void cr_cap_encode(const struct cr_cap *cap, uint8_t out[CR_CAP_BYTES]) {
    assert(cap != NULL && out != NULL);
    cr_le_put_u64(out, cap->addr);
    cr_le_put_u64(out + 8, cap->length);
    cr_le_put_u64(out + 16, cap->expiry_ms);
    out[24] = cap->mode;
    memset(out + 25, 0, 7);
    memcpy(out + 32, cap->mac, CR_CAP_MAC_BYTES);
}

int cr_cap_decode(const uint8_t in[CR_CAP_BYTES], struct cr_cap *out) {
    assert(in != NULL && out != NULL);
    uint8_t mode = in[24];
    if (mode < CR_CAP_READ || mode > (CR_CAP_READ | CR_CAP_WRITE)) return -1;
    for (int i = 25; i < 32; i++)
        if (in[i] != 0) return -1;
    out->addr = cr_le_get_u64(in);
    out->length = cr_le_get_u64(in + 8);
    out->expiry_ms = cr_le_get_u64(in + 16);
    out->mode = mode;
    memcpy(out->mac, in + 32, CR_CAP_MAC_BYTES);
    return 0;
}

enum cr_cap_verdict cr_cap_check(const uint8_t key[CR_CAP_KEY_BYTES], const char *name,
                                 size_t name_len, const struct cr_cap *cap, uint8_t mode,
                                 uint64_t addr, uint64_t length, uint64_t now_ms,
                                 uint64_t skew_ms) {
    assert(cap != NULL && name != NULL);
    assert(mode == CR_CAP_READ || mode == CR_CAP_WRITE);
    if (key == NULL) return CR_CAP_NO_KEY;
    if (name_len == 0 || name_len > 255) return CR_CAP_BAD_MAC;
    uint8_t want[CR_CAP_MAC_BYTES];
    mac_of(key, name, name_len, cap, want);
    if (sodium_memcmp(want, cap->mac, CR_CAP_MAC_BYTES) != 0) return CR_CAP_BAD_MAC;
    if (now_ms > cap->expiry_ms && now_ms - cap->expiry_ms > skew_ms) return CR_CAP_EXPIRED;
    if ((cap->mode & mode) != mode) return CR_CAP_WRONG_MODE;
    /* [addr, addr + length) inside [cap->addr, cap->addr + cap->length), no overflow. */
    if (addr < cap->addr || addr - cap->addr > cap->length ||
        length > cap->length - (addr - cap->addr))
        return CR_CAP_OUT_OF_RANGE;
    return CR_CAP_OK;
}
