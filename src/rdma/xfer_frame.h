/* The tcp transfer frame: a pure codec, no sockets (fuzzed by
 * tests/fuzz/fuzz_xfer_frame.c).
 *
 * Request, client -> server, little-endian, 24 bytes then the segment name:
 *   u8  op          1 READ, 2 WRITE, 3 HELLO, 4 KEY (verbs setup, below)
 *   u8  name_len    1..255, the segment name's bytes follow the header
 *                   (0 for HELLO, which names no segment)
 *   u16 flags       bit 0 CR_XFER_FLAG_CAP: a capability (CR_CAP_BYTES,
 *                   core/xfer_cap.h) follows the name, before a WRITE's
 *                   payload (READ, WRITE and KEY only); other bits must be 0
 *   u32 request_id  echoed in the response
 *   u64 addr        remote address: segment base + offset
 *   u64 length      bytes; a WRITE's payload follows the name
 * A capability that does not decode (its mode, its reserved bytes) makes the
 * frame malformed; whether it allows the request is the server's check.
 * Response, server -> client, 16 bytes:
 *   u32 request_id
 *   i32 status      CR_OK or a crescent status; not OK closes the connection
 *   u64 length      payload bytes that follow (a READ's data; 0 otherwise)
 *
 * verbs setup (xfer_verbs.h), on a connection of its own:
 *   HELLO  name_len 0, addr 0, length CR_XFER_VERBS_HELLO_BYTES, the client's
 *          hello follows the header (validated by the parser).  Answered with
 *          the server's hello (length CR_XFER_VERBS_HELLO_BYTES): its QPs are
 *          now connected to the client's; or with length 0 when the server
 *          has no device (the client uses tcp).  A second HELLO on the
 *          connection, or one the server cannot set QPs up for, is refused
 *          (a status, then the connection closes, its QPs with it).
 *   KEY    names a segment, addr 0, length 0.  Answered with the segment's
 *          key (length CR_XFER_VERBS_KEY_BYTES); length 0 when the segment
 *          is not registered with the device (the client uses tcp for it);
 *          status CR_ERR_SEGMENT_NOT_FOUND when there is no such segment --
 *          an answer: this one does not close the connection.
 *
 * A connection serves its requests in order, so responses come back in the
 * order the requests were sent; the client checks each request_id. */
#ifndef CRESCENT_RDMA_XFER_FRAME_H
#define CRESCENT_RDMA_XFER_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/xfer_cap.h"

#define CR_XFER_REQUEST_HEADER_BYTES 24u
#define CR_XFER_RESPONSE_BYTES 16u
#define CR_XFER_REQUEST_MAX_BYTES \
    (CR_XFER_REQUEST_HEADER_BYTES + 255u + CR_CAP_BYTES) /* >= a HELLO */
#define CR_XFER_FLAG_CAP 0x0001u

enum {
    CR_XFER_FRAME_READ = 1,
    CR_XFER_FRAME_WRITE = 2,
    CR_XFER_FRAME_HELLO = 3,
    CR_XFER_FRAME_KEY = 4,
};

struct cr_xfer_request {
    uint8_t op;
    uint8_t name_len;
    uint32_t request_id;
    uint64_t addr;
    uint64_t length;
    const char *name; /* points into the parsed buffer; not NUL-terminated */
    const uint8_t *hello; /* HELLO: the CR_XFER_VERBS_HELLO_BYTES after the header */
    bool has_cap;         /* CR_XFER_FLAG_CAP: cap holds the decoded capability */
    struct cr_cap cap;
};

struct cr_xfer_response {
    uint32_t request_id;
    int32_t status;
    uint64_t length;
};

/* Decodes one request header from buf[0, len).  Returns CR_OK and sets *out
 * and *consumed (header + name bytes [+ capability], or header + hello),
 * CR_ERR_AGAIN if buf holds less than a whole header and name (or hello, or
 * capability) (nothing set), or CR_ERR_PROTOCOL (unknown op, empty name, a
 * name byte that is NUL, '/' or not printable ASCII, an unknown flag, a
 * capability on a HELLO or one that does not decode, length above max_length, or
 * addr + length wrapping; a HELLO with a name, an address, another length or
 * a hello that does not decode; a KEY with an address or a length). */
int cr_xfer_request_parse(const uint8_t *buf, size_t len, uint64_t max_length,
                          struct cr_xfer_request *out, size_t *consumed);

/* Encodes a request into out (room for CR_XFER_REQUEST_MAX_BYTES); returns
 * the bytes written.  name_len must be 1..255 (0 for HELLO, whose req->hello
 * bytes are written after the header); req->has_cap adds the flag and
 * req->cap after the name. */
size_t cr_xfer_request_encode(const struct cr_xfer_request *req, uint8_t *out);

/* Decodes a response (CR_XFER_RESPONSE_BYTES).  Returns CR_OK, or
 * CR_ERR_PROTOCOL when status is not a crescent status (> 0). */
int cr_xfer_response_parse(const uint8_t *buf, struct cr_xfer_response *out);
void cr_xfer_response_encode(const struct cr_xfer_response *resp, uint8_t *out);

/* True when [addr, addr + length) lies inside [base, base + size), without
 * overflow.  A zero-length range is inside when addr is in [base, base + size]. */
bool cr_xfer_range_inside(uint64_t base, uint64_t size, uint64_t addr, uint64_t length);

/* True for a name the frame can carry: 1..255 bytes, printable ASCII except '/'. */
bool cr_xfer_name_valid(const char *name, size_t len);

#endif
