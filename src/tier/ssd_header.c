/* The SSD-tier file header (see ssd_header.h). */
#include "tier/ssd_header.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>
#include <xxhash.h>

#include "crescent/error.h"

_Static_assert(sizeof(CR_SSD_MAGIC) - 1 == CR_SSD_MAGIC_BYTES, "the magic is 8 bytes");

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static uint64_t get64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

uint32_t cr_ssd_header_size(uint32_t key_len, uint32_t tenant_len) {
    return CR_SSD_HEADER_FIXED + key_len + tenant_len + 8u;
}

size_t cr_ssd_header_encode(const struct cr_ssd_header *h, uint8_t *out, size_t cap) {
    assert(h != NULL && out != NULL);
    if (h->key_len == 0 || h->key_len > CR_SSD_KEY_MAX || h->tenant_len == 0 ||
        h->tenant_len > CR_SSD_TENANT_MAX || h->key == NULL || h->tenant == NULL)
        return 0;
    uint32_t size = cr_ssd_header_size(h->key_len, h->tenant_len);
    if (cap < size) return 0;
    memcpy(out, CR_SSD_MAGIC, CR_SSD_MAGIC_BYTES);
    put32(out + 8, CR_SSD_FORMAT_VERSION);
    put32(out + 12, size);
    put32(out + 16, h->key_len);
    put32(out + 20, h->tenant_len);
    put64(out + 24, h->value_len);
    put64(out + 32, h->value_xxh3);
    memcpy(out + CR_SSD_HEADER_FIXED, h->key, h->key_len);
    memcpy(out + CR_SSD_HEADER_FIXED + h->key_len, h->tenant, h->tenant_len);
    put64(out + size - 8, XXH3_64bits(out, size - 8));
    return size;
}

static int refuse(char *why, size_t why_len, const char *what) {
    if (why_len > 0) snprintf(why, why_len, "%s", what);
    return CR_ERR_PROTOCOL;
}

int cr_ssd_header_decode(const uint8_t *buf, size_t len, struct cr_ssd_header *out, char *why,
                         size_t why_len) {
    assert(buf != NULL || len == 0);
    assert(out != NULL && (why != NULL || why_len == 0));
    if (why_len > 0) why[0] = '\0';
    if (len < CR_SSD_HEADER_FIXED) {
        if (len >= CR_SSD_MAGIC_BYTES && memcmp(buf, CR_SSD_MAGIC, CR_SSD_MAGIC_BYTES) != 0)
            return refuse(why, why_len, "not an SSD-tier file (bad magic)");
        out->header_len = CR_SSD_HEADER_FIXED;
        return CR_ERR_AGAIN;
    }
    if (memcmp(buf, CR_SSD_MAGIC, CR_SSD_MAGIC_BYTES) != 0)
        return refuse(why, why_len, "not an SSD-tier file (bad magic)");
    uint32_t version = get32(buf + 8);
    if (version != CR_SSD_FORMAT_VERSION) {
        if (why_len > 0)
            snprintf(why, why_len, "format version %u, this build reads %u", version,
                     CR_SSD_FORMAT_VERSION);
        return CR_ERR_PROTOCOL;
    }
    uint32_t size = get32(buf + 12), key_len = get32(buf + 16), tenant_len = get32(buf + 20);
    if (key_len == 0 || key_len > CR_SSD_KEY_MAX)
        return refuse(why, why_len, "key length out of range (1..4096)");
    if (tenant_len == 0 || tenant_len > CR_SSD_TENANT_MAX)
        return refuse(why, why_len, "tenant length out of range (1..255)");
    if (size != cr_ssd_header_size(key_len, tenant_len))
        return refuse(why, why_len, "header length does not match its key and tenant");
    if (len < size) {
        out->header_len = size;
        return CR_ERR_AGAIN;
    }
    if (get64(buf + size - 8) != XXH3_64bits(buf, size - 8))
        return refuse(why, why_len, "header checksum mismatch (torn or corrupt header)");
    *out = (struct cr_ssd_header){.version = version, .header_len = size,
                                  .key = buf + CR_SSD_HEADER_FIXED, .key_len = key_len,
                                  .tenant = buf + CR_SSD_HEADER_FIXED + key_len,
                                  .tenant_len = tenant_len, .value_len = get64(buf + 24),
                                  .value_xxh3 = get64(buf + 32)};
    return CR_OK;
}
