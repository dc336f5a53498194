/* KV-cache event decoding, passes 1 and 2 (see kv_event.c for pass 3 and
 * why there are three): the raw msgpack scan that bounds what msgpack-c
 * will allocate, then msgpack-c's unpack into a pre-sized zone. */
#include <assert.h>
#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crescent/error.h"
#include "msgs/kv_event_internal.h"

/* ---- pass 1: raw scan ------------------------------------------------- */

static uint32_t read_be(const uint8_t *p, unsigned width) {
    uint32_t v = 0;
    for (unsigned i = 0; i < width; i++) v = (v << 8) | p[i];
    return v;
}

/* Sizes one msgpack item at p (avail > 0 bytes): *size is its own encoding
 * (header and body, children excluded), *children its element count (2n for
 * maps).  Returns false for 0xc1 or a header cut short. */
static bool scan_item(const uint8_t *p, size_t avail, size_t *size, size_t *children) {
    assert(avail > 0);
    uint8_t b = p[0];
    *children = 0;
    *size = 1;
    if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) return true;
    if (b <= 0x9f) { /* fixmap, fixarray */
        *children = b <= 0x8f ? 2u * (b & 0x0fu) : (b & 0x0fu);
        return true;
    }
    if (b <= 0xbf) { /* fixstr */
        *size = 1u + (b & 0x1fu);
        return true;
    }
    /* hdr: bytes before the body; lw: width of a length field at p[1]; fixed body. */
    unsigned hdr = 1, lw = 0;
    size_t body = 0;
    switch (b) {
    case 0xc4: case 0xd9: lw = 1; break;
    case 0xc5: case 0xda: lw = 2; break;
    case 0xc6: case 0xdb: lw = 4; break;
    case 0xc7: lw = 1; body = 1; break; /* ext: +1 type byte */
    case 0xc8: lw = 2; body = 1; break;
    case 0xc9: lw = 4; body = 1; break;
    case 0xca: body = 4; break;
    case 0xcb: body = 8; break;
    case 0xcc: case 0xd0: body = 1; break;
    case 0xcd: case 0xd1: body = 2; break;
    case 0xce: case 0xd2: body = 4; break;
    case 0xcf: case 0xd3: body = 8; break;
    case 0xd4: body = 2; break;
    case 0xd5: body = 3; break;
    case 0xd6: body = 5; break;
    case 0xd7: body = 9; break;
    case 0xd8: body = 17; break;
    case 0xdc: case 0xde: lw = 2; break;
    case 0xdd: case 0xdf: lw = 4; break;
    default: return false; /* 0xc1 */
    }
    hdr += lw;
    if (avail < hdr) return false;
    size_t n = lw ? read_be(p + 1, lw) : 0;
    if (b >= 0xdc && b <= 0xdf) {
        *children = b >= 0xde ? 2 * n : n;
        *size = hdr;
    } else {
        *size = hdr + body + n;
    }
    return true;
}

/* Sizes the common fixed-width scalars (fixints, uint8..64, int8..64)
 * without the switch: token arrays are almost entirely these, and a
 * branch-free size keeps the mix of uint16/uint32 token ids cheap. */
static inline size_t scan_fast_size(uint8_t b) {
    if (b <= 0x7f || b >= 0xe0) return 1;
    if ((unsigned)(b - 0xcc) <= 7u) return 1u + (1u << (b & 3u));
    return 0;
}

/* Validates framing without allocating; sets *zone_bytes to the storage
 * msgpack_unpack will take from its zone. */
static int scan_payload(struct kv_ctx *c, const uint8_t *p, size_t len, size_t *zone_bytes) {
    assert(c != NULL && zone_bytes != NULL);
    size_t remaining[CR_KV_MAX_DEPTH];
    unsigned depth = 0;
    size_t off = 0, objects = 0;
    do {
        if (depth > 0) {
            /* Runs of scalars (token ids, hashes) in a tight loop. */
            size_t left = remaining[depth - 1];
            while (left > 0 && off < len) {
                size_t step = scan_fast_size(p[off]);
                if (step == 0) break;
                off += step;
                left--;
            }
            if (off > len) return cr_kv_fail(c, "truncated msgpack at byte %zu", len);
            remaining[depth - 1] = left;
            if (left == 0) {
                depth--;
                while (depth > 0 && --remaining[depth - 1] == 0) depth--;
                continue;
            }
        }
        size_t size, children = 0;
        if (off >= len) return cr_kv_fail(c, "truncated msgpack at byte %zu", off);
        size = scan_fast_size(p[off]);
        if (size == 0 && !scan_item(p + off, len - off, &size, &children))
            return cr_kv_fail(c, "malformed msgpack at byte %zu", off);
        if (size > len - off) return cr_kv_fail(c, "truncated msgpack at byte %zu", off);
        off += size;
        if (children > len - off)
            return cr_kv_fail(c, "msgpack container at byte %zu claims %zu elements, %zu bytes left",
                           off - size, children, len - off);
        objects += children;
        if (children > 0) {
            if (depth == CR_KV_MAX_DEPTH)
                return cr_kv_fail(c, "msgpack nested deeper than %u", CR_KV_MAX_DEPTH);
            remaining[depth++] = children;
            continue;
        }
        while (depth > 0 && --remaining[depth - 1] == 0) depth--;
    } while (depth > 0);
    if (off != len) return cr_kv_fail(c, "%zu trailing bytes after the batch", len - off);
    *zone_bytes = objects * sizeof(msgpack_object);
    return CR_OK;
}

/* ---- pass 2: msgpack-c ------------------------------------------------ */

/* Makes the zone's first chunk hold `need` bytes, so that msgpack_unpack
 * never adds a chunk (and msgpack_zone_clear never frees one). */
int cr_kv_zone_reserve(struct cr_kv_decoder *dec, size_t need) {
    assert(dec != NULL);
    if (dec->zone_live && need <= dec->zone_chunk_bytes) return CR_OK;
    size_t cap = dec->zone_chunk_bytes ? dec->zone_chunk_bytes : ZONE_MIN_CHUNK_BYTES;
    while (cap < need) cap *= 2;
    if (dec->zone_live) msgpack_zone_destroy(&dec->zone);
    dec->zone_live = msgpack_zone_init(&dec->zone, cap);
    dec->zone_chunk_bytes = dec->zone_live ? cap : 0;
    dec->zone_head = dec->zone_live ? dec->zone.chunk_list.head : NULL;
    return dec->zone_live ? CR_OK : CR_ERR_NOMEM;
}

int cr_kv_unpack_payload(struct kv_ctx *c, const void *payload, size_t len,
                         msgpack_object *root) {
    assert(c != NULL && root != NULL);
    size_t zone_bytes = 0;
    int rc = scan_payload(c, payload, len, &zone_bytes);
    if (rc != CR_OK) return rc;
    /* Slack for the zone's alignment of each array/map allocation. */
    rc = cr_kv_zone_reserve(c->dec, zone_bytes + 64);
    if (rc != CR_OK) return cr_kv_fail(c, "out of memory"), CR_ERR_NOMEM;
    msgpack_zone_clear(&c->dec->zone);
    size_t off = 0;
    msgpack_unpack_return ret = msgpack_unpack(payload, len, &off, &c->dec->zone, root);
    /* The scan accepted exactly one complete object, so msgpack-c must too. */
    if (ret != MSGPACK_UNPACK_SUCCESS)
        return cr_kv_fail(c, "msgpack-c rejected the payload (%d)", (int)ret);
    assert(c->dec->zone.chunk_list.head == c->dec->zone_head);
    return CR_OK;
}
