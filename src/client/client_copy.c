/* Same-host reads that verify while they copy: see client_copy.h. */
#include "client/client_copy.h"

#include <assert.h>
#include <string.h>
#if defined(__x86_64__)
/* The vector XXH3 picked at run time, as in client_data.c (same values as
 * the put's checksum); the header renames XXH3_64bits_update. */
#include <xxh_x86dispatch.h>
#endif

#include "client/copy_xxh3.h"
#include "crescent/error.h"
#include "rdma/xfer.h"

void cr_copy_hashed(XXH3_state_t *state, void *dst, const void *src, size_t len) {
    assert(dst != NULL || len == 0);
    assert(src != NULL || len == 0);
    if (state == NULL) { /* nothing to hash: one copy, as long as memcpy likes */
        if (len > 0) memcpy(dst, src, len);
        return;
    }
    uint8_t *d = dst;
    const uint8_t *s = src;
    for (size_t off = 0; off < len; off += CR_COPY_CHUNK_BYTES) {
        size_t n = len - off < CR_COPY_CHUNK_BYTES ? len - off : CR_COPY_CHUNK_BYTES;
        memcpy(d + off, s + off, n);
        /* From dst, just written and still in cache: the bytes the caller
         * gets are the bytes checked. */
        XXH3_64bits_update(state, d + off, n);
    }
}

int cr_client_read_mapped(struct cr_xfer_client *xfer, const struct cr_replica *r, uint8_t *dst,
                          size_t len, uint64_t *xxh3) {
    assert(xfer != NULL && r != NULL && (dst != NULL || len == 0));
    XXH3_state_t state;
    if (xxh3 != NULL) XXH3_64bits_reset(&state);
    bool one_pass = false; /* hashed by cr_copy_xxh3 into *xxh3 */
    uint64_t off = 0;
    for (size_t h = 0; h < r->handle_count; h++) {
        const struct cr_buf_handle *bh = &r->handles[h];
        if (bh->size_bytes > len - off) return CR_ERR_AGAIN;
        if (bh->size_bytes == 0) continue; /* nothing to copy (dst may be NULL) */
        if (bh->transport_endpoint == NULL || bh->transport_endpoint[0] == '\0')
            return CR_ERR_AGAIN;
        /* Mapped just before its copy: a later handle's lookup may replace
         * a stale mapping (cr_xfer_shm_find_map), so no pointer is kept. */
        void *src = NULL;
        struct cr_cap cap;
        if (cr_xfer_client_map_cap(xfer, bh->transport_endpoint, bh->segment_name, bh->buffer,
                                   bh->size_bytes,
                                   bh->has_capability && cr_cap_decode(bh->capability, &cap) == 0
                                       ? &cap : NULL,
                                   &src) != CR_OK)
            return CR_ERR_AGAIN;
        /* An object in one handle, as most are: copied and hashed in one
         * pass (copy_xxh3.h: the stripes' loads feed both). */
        if (xxh3 != NULL && r->handle_count == 1) {
            *xxh3 = cr_copy_xxh3(dst, src, (size_t)bh->size_bytes);
            one_pass = true;
        } else {
            cr_copy_hashed(xxh3 != NULL ? &state : NULL, dst + off, src, (size_t)bh->size_bytes);
        }
        off += bh->size_bytes;
    }
    if (off != len) return CR_ERR_AGAIN;
    if (xxh3 != NULL && !one_pass) *xxh3 = XXH3_64bits_digest(&state);
    return CR_OK;
}
