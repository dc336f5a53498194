/* The tcp transfer frame codec (format in xfer_frame.h).  Pure functions:
 * every field of untrusted input is checked before *out is written. */
#include "rdma/xfer_frame.h"

#include <assert.h>
#include <string.h>

#include "crescent/error.h"
#include "rdma/xfer_verbs.h"

_Static_assert(CR_XFER_REQUEST_HEADER_BYTES + CR_XFER_VERBS_HELLO_BYTES <= CR_XFER_REQUEST_MAX_BYTES,
               "a HELLO request fits the encode buffer");

static uint64_t load_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static uint32_t load_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void store_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void store_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

bool cr_xfer_name_valid(const char *name, size_t len) {
    if (name == NULL || len == 0 || len > 255) return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c < 0x20 || c > 0x7e || c == '/') return false;
    }
    return true;
}

bool cr_xfer_range_inside(uint64_t base, uint64_t size, uint64_t addr, uint64_t length) {
    if (addr < base) return false;
    uint64_t offset = addr - base;
    return offset <= size && length <= size - offset;
}

/* HELLO: no name, no address, exactly a hello, which must decode. */
static int parse_hello(const uint8_t *buf, size_t len, struct cr_xfer_request *out,
                       size_t *consumed) {
    if (buf[1] != 0 || load_u64(buf + 8) != 0 || load_u64(buf + 16) != CR_XFER_VERBS_HELLO_BYTES)
        return CR_ERR_PROTOCOL;
    if (len < CR_XFER_REQUEST_HEADER_BYTES + CR_XFER_VERBS_HELLO_BYTES) return CR_ERR_AGAIN;
    const uint8_t *hello = buf + CR_XFER_REQUEST_HEADER_BYTES;
    struct cr_xfer_verbs_hello decoded;
    if (cr_xfer_verbs_hello_decode(hello, CR_XFER_VERBS_HELLO_BYTES, &decoded) != CR_OK)
        return CR_ERR_PROTOCOL;
    *out = (struct cr_xfer_request){.op = CR_XFER_FRAME_HELLO, .request_id = load_u32(buf + 4),
                                    .length = CR_XFER_VERBS_HELLO_BYTES, .hello = hello};
    *consumed = CR_XFER_REQUEST_HEADER_BYTES + CR_XFER_VERBS_HELLO_BYTES;
    return CR_OK;
}

int cr_xfer_request_parse(const uint8_t *buf, size_t len, uint64_t max_length,
                          struct cr_xfer_request *out, size_t *consumed) {
    assert(buf != NULL || len == 0);
    assert(out != NULL && consumed != NULL);
    if (len < CR_XFER_REQUEST_HEADER_BYTES) return CR_ERR_AGAIN;
    uint8_t op = buf[0];
    uint8_t name_len = buf[1];
    if (op < CR_XFER_FRAME_READ || op > CR_XFER_FRAME_KEY) return CR_ERR_PROTOCOL;
    uint16_t flags = (uint16_t)(buf[2] | buf[3] << 8);
    if ((flags & ~CR_XFER_FLAG_CAP) != 0) return CR_ERR_PROTOCOL;
    bool has_cap = (flags & CR_XFER_FLAG_CAP) != 0;
    if (op == CR_XFER_FRAME_HELLO)
        return has_cap ? CR_ERR_PROTOCOL : parse_hello(buf, len, out, consumed);
    if (name_len == 0) return CR_ERR_PROTOCOL;
    uint64_t addr = load_u64(buf + 8);
    uint64_t length = load_u64(buf + 16);
    if (length > max_length || addr + length < addr) return CR_ERR_PROTOCOL;
    if (op == CR_XFER_FRAME_KEY && (addr != 0 || length != 0)) return CR_ERR_PROTOCOL;
    size_t need = CR_XFER_REQUEST_HEADER_BYTES + name_len + (has_cap ? CR_CAP_BYTES : 0);
    if (len < need) return CR_ERR_AGAIN;
    const char *name = (const char *)buf + CR_XFER_REQUEST_HEADER_BYTES;
    if (!cr_xfer_name_valid(name, name_len)) return CR_ERR_PROTOCOL;
    struct cr_cap cap = {0};
    if (has_cap && cr_cap_decode(buf + CR_XFER_REQUEST_HEADER_BYTES + name_len, &cap) != 0)
        return CR_ERR_PROTOCOL;
    *out = (struct cr_xfer_request){.op = op, .name_len = name_len,
                                    .request_id = load_u32(buf + 4), .addr = addr,
                                    .length = length, .name = name, .has_cap = has_cap,
                                    .cap = cap};
    *consumed = need;
    return CR_OK;
}

size_t cr_xfer_request_encode(const struct cr_xfer_request *req, uint8_t *out) {
    assert(req->op >= CR_XFER_FRAME_READ && req->op <= CR_XFER_FRAME_KEY);
    bool hello = req->op == CR_XFER_FRAME_HELLO;
    assert(hello ? req->name_len == 0 && req->hello != NULL && !req->has_cap : req->name_len > 0);
    out[0] = req->op;
    out[1] = req->name_len;
    out[2] = req->has_cap ? CR_XFER_FLAG_CAP : 0;
    out[3] = 0;
    store_u32(out + 4, req->request_id);
    store_u64(out + 8, hello ? 0 : req->addr);
    store_u64(out + 16, hello ? CR_XFER_VERBS_HELLO_BYTES : req->length);
    if (hello) {
        memcpy(out + CR_XFER_REQUEST_HEADER_BYTES, req->hello, CR_XFER_VERBS_HELLO_BYTES);
        return CR_XFER_REQUEST_HEADER_BYTES + CR_XFER_VERBS_HELLO_BYTES;
    }
    memcpy(out + CR_XFER_REQUEST_HEADER_BYTES, req->name, req->name_len);
    if (!req->has_cap) return CR_XFER_REQUEST_HEADER_BYTES + req->name_len;
    cr_cap_encode(&req->cap, out + CR_XFER_REQUEST_HEADER_BYTES + req->name_len);
    return CR_XFER_REQUEST_HEADER_BYTES + req->name_len + CR_CAP_BYTES;
}

int cr_xfer_response_parse(const uint8_t *buf, struct cr_xfer_response *out) {
    assert(buf != NULL && out != NULL);
    int32_t status = (int32_t)load_u32(buf + 4);
    if (status > 0) return CR_ERR_PROTOCOL;
    out->request_id = load_u32(buf);
    out->status = status;
    out->length = load_u64(buf + 8);
    return CR_OK;
}

void cr_xfer_response_encode(const struct cr_xfer_response *resp, uint8_t *out) {
    assert(resp->status <= 0);
    store_u32(out, resp->request_id);
    store_u32(out + 4, (uint32_t)resp->status);
    store_u64(out + 8, resp->length);
}
