/* libFuzzer target for the tcp transfer frame codec (src/rdma/xfer_frame.c).
 *
 * Treats the input as the byte stream a server reads from one connection
 * (the first 8 bytes pick the length limit) and parses request after request
 * the way the server does, skipping each WRITE's payload.  Every accepted
 * request must re-encode to exactly the bytes it was parsed from and satisfy
 * the limits (a HELLO carries a hello that decodes and no capability, a KEY
 * no address or length, a capability flag its decoded capability); a refusal must leave the output untouched.  The verbs hello and key
 * decoders get the same bytes and must re-encode what they accept.  The same bytes are
 * fed to the response parser and to cr_xfer_range_inside, whose answer is
 * checked against 128-bit arithmetic, and (as a struct, the first bytes) to the
 * shm socket's request check, whose every acceptance must hold its limits.
 * Build and run: tests/fuzz/README.md. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crescent/error.h"
#include "core/xfer_cap.h"
#include "rdma/xfer_frame.h"
#include "rdma/xfer_internal.h"
#include "rdma/xfer_shm.h"
#include "rdma/xfer_verbs.h"

static uint64_t load64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static void check_request(const uint8_t *at, size_t len, uint64_t max_length,
                          const struct cr_xfer_request *req, size_t used) {
    if (used > len || req->op < CR_XFER_FRAME_READ || req->op > CR_XFER_FRAME_KEY) abort();
    if (req->op == CR_XFER_FRAME_HELLO) {
        struct cr_xfer_verbs_hello hello;
        if (used != CR_XFER_REQUEST_HEADER_BYTES + CR_XFER_VERBS_HELLO_BYTES || req->has_cap ||
            req->name_len != 0 || req->hello != at + CR_XFER_REQUEST_HEADER_BYTES ||
            cr_xfer_verbs_hello_decode(req->hello, CR_XFER_VERBS_HELLO_BYTES, &hello) != CR_OK)
            abort();
    } else {
        if (used != CR_XFER_REQUEST_HEADER_BYTES + req->name_len + (req->has_cap ? CR_CAP_BYTES : 0))
            abort();
        if (req->has_cap && (req->cap.mode < CR_CAP_READ || req->cap.mode > 3)) abort();
        if (req->length > max_length || req->addr + req->length < req->addr) abort();
        if (!cr_xfer_name_valid(req->name, req->name_len)) abort();
        if (req->op == CR_XFER_FRAME_KEY && (req->addr != 0 || req->length != 0)) abort();
    }
    uint8_t again[CR_XFER_REQUEST_MAX_BYTES];
    if (cr_xfer_request_encode(req, again) != used || memcmp(again, at, used) != 0) abort();
}

/* The verbs setup decoders: whatever they accept re-encodes to the same bytes. */
static void check_verbs_setup(const uint8_t *data, size_t size) {
    struct cr_xfer_verbs_hello hello;
    if (cr_xfer_verbs_hello_decode(data, size, &hello) == CR_OK) {
        uint8_t again[CR_XFER_VERBS_HELLO_BYTES];
        cr_xfer_verbs_hello_encode(&hello, again);
        if (memcmp(again, data, sizeof(again)) != 0) abort();
    }
    struct cr_xfer_verbs_key key;
    if (cr_xfer_verbs_key_decode(data, size, &key) == CR_OK) {
        uint8_t again[CR_XFER_VERBS_KEY_BYTES];
        cr_xfer_verbs_key_encode(&key, again);
        if (memcmp(again, data, sizeof(again)) != 0 || key.size == 0) abort();
    }
}

/* The capability decoder: what it accepts re-encodes to the same bytes. */
static void check_cap(const uint8_t *data, size_t size) {
    if (size < CR_CAP_BYTES) return;
    struct cr_cap cap;
    if (cr_cap_decode(data, &cap) != 0) return;
    uint8_t again[CR_CAP_BYTES];
    cr_cap_encode(&cap, again);
    if (memcmp(again, data, CR_CAP_BYTES) != 0) abort();
}

/* The shm request (a native struct on a SOCK_SEQPACKET socket): what the
 * server accepts has a valid name, a known kind, a decoded capability when
 * it says so, and for a file a range that does not wrap. */
static void check_shm_request(const uint8_t *data, size_t size) {
    struct cr_xfer_shm_request req;
    size_t n = size < sizeof(req) ? size : sizeof(req);
    memset(&req, 0, sizeof(req));
    memcpy(&req, data, n);
    if (size >= 4) req.magic = CR_XFER_SHM_MAGIC; /* else nothing gets past it */
    struct cr_cap cap;
    if (!cr_xfer_shm_request_valid(&req, n, &cap)) return;
    if (n != sizeof(req) || !cr_xfer_name_valid(req.name, req.name_len) || req.has_cap > 1)
        abort();
    if (req.kind != CR_XFER_SHM_MAP &&
        (req.kind != CR_XFER_SHM_FILE || req.length == 0 || req.addr + req.length < req.addr))
        abort();
    if (req.has_cap) {
        uint8_t again[CR_CAP_BYTES];
        cr_cap_encode(&cap, again);
        if (memcmp(again, req.cap, CR_CAP_BYTES) != 0) abort();
    }
}

static void check_range(const uint8_t *data, size_t size) {
    if (size < 32) return;
    uint64_t base = load64(data), seg = load64(data + 8), addr = load64(data + 16),
             len = load64(data + 24);
    unsigned __int128 end = (unsigned __int128)addr + len;
    unsigned __int128 seg_end = (unsigned __int128)base + seg;
    bool inside = addr >= base && end <= seg_end;
    if (cr_xfer_range_inside(base, seg, addr, len) != inside) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    check_range(data, size);
    check_cap(data, size);
    check_shm_request(data, size);
    check_verbs_setup(data, size);
    if (size >= CR_XFER_RESPONSE_BYTES) {
        struct cr_xfer_response resp;
        if (cr_xfer_response_parse(data, &resp) == CR_OK && resp.status > 0) abort();
    }
    if (size < 8) return 0;
    uint64_t max_length = load64(data) >> 40; /* limits up to 16 M, often small */
    data += 8;
    size -= 8;
    size_t pos = 0;
    while (pos < size) {
        struct cr_xfer_request req;
        memset(&req, 0xee, sizeof(req));
        struct cr_xfer_request untouched = req;
        size_t used = 12345;
        int rc = cr_xfer_request_parse(data + pos, size - pos, max_length, &req, &used);
        if (rc != CR_OK) {
            if (rc != CR_ERR_AGAIN && rc != CR_ERR_PROTOCOL) abort();
            if (used != 12345 || memcmp(&req, &untouched, sizeof(req)) != 0) abort();
            break;
        }
        check_request(data + pos, size - pos, max_length, &req, used);
        pos += used;
        if (req.op == CR_XFER_FRAME_WRITE) pos += req.length < size - pos ? req.length : size - pos;
    }
    return 0;
}
