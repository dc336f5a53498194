/* The shared file tier's names and header (file_tier.h). */
#include "core/file_tier.h"

#include <assert.h>
#include <string.h>

#define XXH_STATIC_LINKING_ONLY /* XXH3 states by value: no malloc per name */
#include <xxhash.h>

#include "core/le.h"

static const char HEX[] = "0123456789abcdef";
static const uint8_t MAGIC[4] = {'C', 'R', 'F', '1'};

static const char *tenant_or_default(const char *tenant) {
    return tenant != NULL && tenant[0] != '\0' ? tenant : "default";
}

static bool plain_byte(uint8_t c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '-';
}

/* Appends s[0..n) escaped; returns false when it does not fit. */
static bool put_escaped(char *out, size_t cap, size_t *at, const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        size_t need = plain_byte(s[i]) ? 1 : 3;
        if (cap - *at <= need) return false; /* keep room for the NUL */
        if (need == 1) {
            out[(*at)++] = (char)s[i];
        } else {
            out[(*at)++] = '%';
            out[(*at)++] = HEX[s[i] >> 4];
            out[(*at)++] = HEX[s[i] & 15];
        }
    }
    return true;
}

static bool put_raw(char *out, size_t cap, size_t *at, const char *s, size_t n) {
    if (cap - *at <= n) return false;
    memcpy(out + *at, s, n);
    *at += n;
    return true;
}

size_t cr_file_tier_name(const char *tenant, const char *key, size_t key_len, char *out,
                         size_t cap) {
    assert(out != NULL && (key != NULL || key_len == 0));
    tenant = tenant_or_default(tenant);
    size_t tenant_len = strlen(tenant);
    if (cap == 0 || key_len == 0 || key_len > CR_FILE_TIER_KEY_MAX ||
        tenant_len > CR_FILE_TIER_TENANT_MAX)
        return 0;
    XXH3_state_t st;
    XXH3_128bits_reset(&st);
    XXH3_128bits_update(&st, tenant, tenant_len + 1); /* the NUL separates tenant and key */
    XXH3_128bits_update(&st, key, key_len);
    XXH128_canonical_t h;
    XXH128_canonicalFromHash(&h, XXH3_128bits_digest(&st));
    char hash[33];
    for (int i = 0; i < 16; i++) {
        hash[2 * i] = HEX[h.digest[i] >> 4];
        hash[2 * i + 1] = HEX[h.digest[i] & 15];
    }
    hash[32] = '\0';
    size_t at = 0;
    size_t prefix = key_len < CR_FILE_TIER_PREFIX_BYTES ? key_len : CR_FILE_TIER_PREFIX_BYTES;
    bool ok = put_escaped(out, cap, &at, (const uint8_t *)tenant, tenant_len) &&
              put_raw(out, cap, &at, "/", 1) && put_raw(out, cap, &at, hash, 2) &&
              put_raw(out, cap, &at, "/", 1) && put_raw(out, cap, &at, hash, 32) &&
              put_raw(out, cap, &at, "-", 1) &&
              put_escaped(out, cap, &at, (const uint8_t *)key, prefix) &&
              put_raw(out, cap, &at, ".obj", 4);
    if (!ok) return 0;
    out[at] = '\0';
    return at;
}

/* XXH3 of the header (check field taken as zero), tenant and key. */
static uint64_t header_check(const uint8_t *fixed, const void *tenant, size_t tenant_len,
                             const void *key, size_t key_len) {
    uint8_t copy[CR_FILE_TIER_HEADER_FIXED];
    memcpy(copy, fixed, sizeof(copy));
    memset(copy + 32, 0, 8);
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, copy, sizeof(copy));
    XXH3_64bits_update(&st, tenant, tenant_len);
    XXH3_64bits_update(&st, key, key_len);
    return XXH3_64bits_digest(&st);
}

size_t cr_file_tier_header_encode(const char *tenant, const char *key, size_t key_len,
                                  uint64_t value_len, uint64_t value_xxh3, uint8_t *out,
                                  size_t cap) {
    assert(out != NULL && (key != NULL || key_len == 0));
    tenant = tenant_or_default(tenant);
    size_t tenant_len = strlen(tenant);
    if (key_len == 0 || key_len > CR_FILE_TIER_KEY_MAX || tenant_len > CR_FILE_TIER_TENANT_MAX)
        return 0;
    size_t total = CR_FILE_TIER_HEADER_FIXED + tenant_len + key_len;
    if (total > cap) return 0;
    memcpy(out, MAGIC, 4);
    cr_le_put_u32(out + 4, (uint32_t)total);
    cr_le_put_u16(out + 8, (uint16_t)tenant_len);
    cr_le_put_u16(out + 10, 0);
    cr_le_put_u32(out + 12, (uint32_t)key_len);
    cr_le_put_u64(out + 16, value_len);
    cr_le_put_u64(out + 24, value_xxh3);
    memcpy(out + CR_FILE_TIER_HEADER_FIXED, tenant, tenant_len);
    memcpy(out + CR_FILE_TIER_HEADER_FIXED + tenant_len, key, key_len);
    cr_le_put_u64(out + 32, header_check(out, tenant, tenant_len, key, key_len));
    return total;
}

enum cr_file_tier_verdict cr_file_tier_header_decode(const uint8_t *p, size_t len,
                                                     struct cr_file_tier_header *out) {
    assert(out != NULL && (p != NULL || len == 0));
    memset(out, 0, sizeof(*out));
    if (len < CR_FILE_TIER_HEADER_FIXED) return CR_FILE_TIER_SHORT;
    if (memcmp(p, MAGIC, 4) != 0) return CR_FILE_TIER_BAD;
    uint32_t header_len = cr_le_get_u32(p + 4);
    uint32_t tenant_len = (uint32_t)p[8] | (uint32_t)p[9] << 8;
    uint32_t key_len = cr_le_get_u32(p + 12);
    if (p[10] != 0 || p[11] != 0 || tenant_len > CR_FILE_TIER_TENANT_MAX || key_len == 0 ||
        key_len > CR_FILE_TIER_KEY_MAX ||
        header_len != CR_FILE_TIER_HEADER_FIXED + tenant_len + key_len)
        return CR_FILE_TIER_BAD;
    out->header_len = header_len;
    if (len < header_len) return CR_FILE_TIER_SHORT;
    const uint8_t *tenant = p + CR_FILE_TIER_HEADER_FIXED;
    const uint8_t *key = tenant + tenant_len;
    if (header_check(p, tenant, tenant_len, key, key_len) != cr_le_get_u64(p + 32))
        return CR_FILE_TIER_BAD;
    out->tenant_len = tenant_len;
    out->key_len = key_len;
    out->value_len = cr_le_get_u64(p + 16);
    out->value_xxh3 = cr_le_get_u64(p + 24);
    out->tenant = (const char *)tenant;
    out->key = (const char *)key;
    return CR_FILE_TIER_OK;
}

bool cr_file_tier_header_matches(const struct cr_file_tier_header *h, const char *tenant,
                                 const char *key, size_t key_len, uint64_t value_len) {
    assert(h != NULL && key != NULL);
    tenant = tenant_or_default(tenant);
    size_t tenant_len = strlen(tenant);
    return h->tenant_len == tenant_len && memcmp(h->tenant, tenant, tenant_len) == 0 &&
           h->key_len == key_len && memcmp(h->key, key, key_len) == 0 &&
           h->value_len == value_len;
}
