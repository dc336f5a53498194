/* The native TCP framing of the store-master RPC (crescentd's
 * --rpc-tcp-address, libcrescent's crescent://HOST:PORT endpoints).
 *
 * A connection carries length-prefixed frames in both directions; each
 * frame's payload is exactly the one-frame ZMQ envelope of msgs/rpc_frame.h,
 * so both endpoints decode it with the same code (cr_rpc_read_envelope):
 *
 *   request  [length u32 BE][method u16 BE | request id u64 BE | protobuf body]
 *   reply    [length u32 BE][request id u64 BE | status i32 BE | body]
 *
 * `length` counts the bytes after itself: at least the envelope's header
 * (10 bytes for a request, 12 for a reply), at most the header plus
 * CR_RPC_BODY_MAX (16 MiB).  A frame outside those bounds cannot be
 * skipped safely (nothing after it can be trusted to be a frame boundary),
 * so the reader answers it with a transport error under request id 0 and
 * closes the connection.  Requests pipeline: many may be in flight on one
 * connection and replies come back in the order they finish (match them by
 * request id).  No handshake, no encryption: see README, "Exposing crescentd
 * safely". */
#ifndef CRESCENT_MSGS_RPC_STREAM_H
#define CRESCENT_MSGS_RPC_STREAM_H

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "msgs/rpc_frame.h"

#define CR_RPC_STREAM_LEN_BYTES 4u
#define CR_RPC_STREAM_REQUEST_MAX (CR_RPC_REQUEST_HEADER_BYTES + CR_RPC_BODY_MAX)
#define CR_RPC_STREAM_REPLY_MAX (CR_RPC_REPLY_HEADER_BYTES + CR_RPC_BODY_MAX)
/* Bytes before a reply's body: length, id, status. */
#define CR_RPC_STREAM_REPLY_PREFIX (CR_RPC_STREAM_LEN_BYTES + CR_RPC_REPLY_HEADER_BYTES)

enum cr_rpc_stream_verdict {
    CR_RPC_STREAM_MORE = 0,  /* not a whole frame yet: read more */
    CR_RPC_STREAM_FRAME = 1, /* a whole frame: payload at buf + 4, *payload_len bytes */
    CR_RPC_STREAM_BAD = -1,  /* the length is outside [min, max]: close the connection */
};

/* Looks at the bytes buffered from a connection (`len` of them at `buf`)
 * for the next frame whose payload must be min..max bytes.  Reads at most
 * the 4 length bytes before deciding; never reads past `len`.  With
 * CR_RPC_STREAM_MORE, *payload_len is the payload length when the prefix
 * was whole (so the caller can size its buffer), else 0. */
static inline enum cr_rpc_stream_verdict cr_rpc_stream_next(const uint8_t *buf, size_t len,
                                                            size_t min, size_t max,
                                                            size_t *payload_len) {
    *payload_len = 0;
    if (len < CR_RPC_STREAM_LEN_BYTES) return CR_RPC_STREAM_MORE;
    size_t n = (size_t)buf[0] << 24 | (size_t)buf[1] << 16 | (size_t)buf[2] << 8 | buf[3];
    if (n < min || n > max) return CR_RPC_STREAM_BAD;
    *payload_len = n;
    return len - CR_RPC_STREAM_LEN_BYTES >= n ? CR_RPC_STREAM_FRAME : CR_RPC_STREAM_MORE;
}

static inline void cr_rpc_stream_put_len(uint8_t out[4], uint32_t n) {
    out[0] = (uint8_t)(n >> 24);
    out[1] = (uint8_t)(n >> 16);
    out[2] = (uint8_t)(n >> 8);
    out[3] = (uint8_t)n;
}

/* Writes a reply frame's prefix (length, id, status) for a body of
 * body_len bytes (at most CR_RPC_BODY_MAX) into out. */
static inline void cr_rpc_stream_reply_prefix(uint8_t out[CR_RPC_STREAM_REPLY_PREFIX],
                                              uint64_t request_id, int32_t status,
                                              size_t body_len) {
    cr_rpc_stream_put_len(out, (uint32_t)(CR_RPC_REPLY_HEADER_BYTES + body_len));
    cr_rpc_put_u64(out + CR_RPC_STREAM_LEN_BYTES, request_id);
    cr_rpc_put_i32(out + CR_RPC_STREAM_LEN_BYTES + CR_RPC_ID_BYTES, status);
}

/* Reply frames queued for one connection (or shm client) and not yet
 * written: bytes [off, len) of buf.  The writer advances off; appending
 * reuses the written front before it grows the buffer. */
struct cr_rpc_stream_out {
    uint8_t *buf;
    size_t off, len, cap;
};

/* Appends one reply frame.  False, nothing appended, when out of memory
 * (the caller counts the dropped reply). */
static inline bool cr_rpc_stream_out_reply(struct cr_rpc_stream_out *q, uint64_t request_id,
                                           int32_t status, const uint8_t *body,
                                           size_t body_len) {
    assert(body_len <= CR_RPC_BODY_MAX && q->off <= q->len && q->len <= q->cap);
    size_t need = q->len + CR_RPC_STREAM_REPLY_PREFIX + body_len;
    if (need > q->cap) {
        if (q->off > 0) { /* reuse the written front first */
            memmove(q->buf, q->buf + q->off, q->len - q->off);
            q->len -= q->off;
            q->off = 0;
            need = q->len + CR_RPC_STREAM_REPLY_PREFIX + body_len;
        }
        size_t cap = q->cap > 0 ? q->cap : 4096;
        while (cap < need) cap *= 2;
        uint8_t *grown = cap > q->cap ? realloc(q->buf, cap) : q->buf;
        if (grown == NULL) return false;
        q->buf = grown;
        q->cap = cap;
    }
    cr_rpc_stream_reply_prefix(q->buf + q->len, request_id, status, body_len);
    if (body_len > 0) memcpy(q->buf + q->len + CR_RPC_STREAM_REPLY_PREFIX, body, body_len);
    q->len += CR_RPC_STREAM_REPLY_PREFIX + body_len;
    return true;
}

#endif
