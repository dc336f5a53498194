/* libFuzzer target: the shared file tier's file header decoder
 * (src/core/file_tier.c), which reads files any client of the file system
 * could have written.  A header that decodes must stay within the input and
 * its bounds, and encode back to the same bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/file_tier.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct cr_file_tier_header h;
    enum cr_file_tier_verdict v = cr_file_tier_header_decode(data, size, &h);
    if (v != CR_FILE_TIER_OK) return 0;
    if (h.header_len > size || h.key_len == 0 || h.key_len > CR_FILE_TIER_KEY_MAX ||
        h.tenant_len > CR_FILE_TIER_TENANT_MAX ||
        h.header_len != CR_FILE_TIER_HEADER_FIXED + h.tenant_len + h.key_len)
        abort();
    if (h.tenant_len == 0 || memchr(h.tenant, '\0', h.tenant_len) != NULL) return 0;
    char tenant[CR_FILE_TIER_TENANT_MAX + 1];
    memcpy(tenant, h.tenant, h.tenant_len);
    tenant[h.tenant_len] = '\0';
    static uint8_t again[CR_FILE_TIER_HEADER_FIXED + CR_FILE_TIER_TENANT_MAX + CR_FILE_TIER_KEY_MAX];
    size_t n = cr_file_tier_header_encode(tenant, h.key, h.key_len, h.value_len, h.value_xxh3,
                                          again, sizeof(again));
    if (n != h.header_len || memcmp(again, data, n) != 0) abort();
    return 0;
}
