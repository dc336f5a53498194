/* libFuzzer target for the SSD-tier file header (src/tier/ssd_header.c).
 *
 * The input is the start of a file read back from --ssd-dir.  An accepted
 * header must lie inside the input, name key and tenant inside it, keep the
 * lengths in range, and re-encode to exactly the bytes it was decoded from;
 * CR_ERR_AGAIN must ask for more bytes than were given; a refusal must say
 * why.  Build and run: tests/fuzz/README.md. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crescent/error.h"
#include "tier/ssd_header.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct cr_ssd_header h;
    char why[CR_SSD_WHY_MAX];
    int rc = cr_ssd_header_decode(data, size, &h, why, sizeof(why));
    if (rc == CR_ERR_AGAIN) {
        if (h.header_len <= size) abort();
        return 0;
    }
    if (rc == CR_ERR_PROTOCOL) {
        if (why[0] == '\0' || memchr(why, '\0', sizeof(why)) == NULL) abort();
        return 0;
    }
    if (rc != CR_OK) abort();
    if (h.header_len > size || h.key_len == 0 || h.key_len > CR_SSD_KEY_MAX ||
        h.tenant_len == 0 || h.tenant_len > CR_SSD_TENANT_MAX ||
        h.header_len != cr_ssd_header_size(h.key_len, h.tenant_len) ||
        h.key < data || h.key + h.key_len > data + size || h.tenant < data ||
        h.tenant + h.tenant_len > data + size || h.version != CR_SSD_FORMAT_VERSION)
        abort();
    static uint8_t again[CR_SSD_HEADER_MAX];
    size_t n = cr_ssd_header_encode(&h, again, sizeof(again));
    if (n != h.header_len || memcmp(again, data, n) != 0) abort();
    return 0;
}
