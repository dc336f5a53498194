/* libFuzzer target for the native RPC framing (src/msgs/rpc_stream.h), as
 * crescentd's native endpoint (src/rpc/rpc_tcp.c) and libcrescent's
 * native transport (src/client/client_tcp.c) read it.
 *
 * Input: byte 0 picks the direction (bit 7: replies, as the client reads
 * them; else requests, as crescentd does) and how the stream arrives (bits
 * 0-6: the size of each read, 1..128 bytes, 0 meaning all at once); the
 * rest is the bytes of one connection.  The target parses the stream once
 * whole and once as it arrives read by read, keeping unparsed bytes as both
 * readers do, and checks:
 *  - both see the same frames (offset and length) and the same verdict at
 *    the end (a bad length at the same offset, or a partial frame);
 *  - a frame lies inside the bytes read, with a length within the
 *    direction's bounds; a refused length is outside them; "more" means the
 *    frame is not all there yet, with its length reported once known;
 *  - a request frame's payload goes through the gateway's envelope reader
 *    (cr_rpc_read_envelope), which accepts it with method and id read from
 *    its first 10 bytes and the rest as the body.
 * Build and run instructions are in tests/fuzz/README.md. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rpc/rpc_codec.h"
#include "msgs/rpc_stream.h"

#define FRAMES_MAX 4096u

struct parse {
    size_t offset[FRAMES_MAX], length[FRAMES_MAX];
    size_t count;
    int end; /* CR_RPC_STREAM_MORE or CR_RPC_STREAM_BAD */
    size_t end_offset;
};

static void check_frame(const uint8_t *frame, size_t n, bool replies) {
    if (replies) {
        if (n < CR_RPC_REPLY_HEADER_BYTES || n > CR_RPC_STREAM_REPLY_MAX) abort();
        return;
    }
    if (n < CR_RPC_REQUEST_HEADER_BYTES || n > CR_RPC_STREAM_REQUEST_MAX) abort();
    const uint8_t *data[3] = {frame, NULL, NULL};
    const size_t size[3] = {n, 0, 0};
    struct cr_rpc_envelope env;
    if (!cr_rpc_read_envelope(1, data, size, &env)) abort();
    if (!env.one_frame || env.method != cr_rpc_get_u16(frame) ||
        env.request_id != cr_rpc_get_u64(frame + CR_RPC_METHOD_BYTES) ||
        env.body != frame + CR_RPC_REQUEST_HEADER_BYTES ||
        env.body_len != n - CR_RPC_REQUEST_HEADER_BYTES)
        abort();
}

/* One look at buffered bytes; checks the verdict against the bytes. */
static int look(const uint8_t *buf, size_t len, bool replies, size_t *n) {
    size_t min = replies ? CR_RPC_REPLY_HEADER_BYTES : CR_RPC_REQUEST_HEADER_BYTES;
    size_t max = replies ? CR_RPC_STREAM_REPLY_MAX : CR_RPC_STREAM_REQUEST_MAX;
    int v = cr_rpc_stream_next(buf, len, min, max, n);
    size_t want = len >= 4 ? (size_t)buf[0] << 24 | (size_t)buf[1] << 16 |
                                 (size_t)buf[2] << 8 | buf[3]
                           : 0;
    switch (v) {
    case CR_RPC_STREAM_FRAME:
        if (len < 4 || *n != want || 4 + *n > len) abort();
        check_frame(buf + 4, *n, replies);
        break;
    case CR_RPC_STREAM_BAD:
        if (len < 4 || (want >= min && want <= max)) abort();
        break;
    case CR_RPC_STREAM_MORE:
        if (len >= 4 && (*n != want || 4 + want <= len || want < min || want > max)) abort();
        if (len < 4 && *n != 0) abort();
        break;
    default: abort();
    }
    return v;
}

/* Parses `data` arriving `chunk` bytes per read (0: all at once). */
static void parse(const uint8_t *data, size_t size, size_t chunk, bool replies,
                  struct parse *out) {
    uint8_t *buf = malloc(size > 0 ? size : 1); /* the reader's buffer */
    if (buf == NULL) abort();
    size_t have = 0, consumed = 0, arrived = 0;
    out->count = 0;
    out->end = CR_RPC_STREAM_MORE;
    while (arrived < size || chunk == 0) {
        size_t take = chunk == 0 || size - arrived < chunk ? size - arrived : chunk;
        memcpy(buf + have, data + arrived, take);
        have += take, arrived += take;
        size_t n, pos = 0;
        int v;
        while ((v = look(buf + pos, have - pos, replies, &n)) == CR_RPC_STREAM_FRAME) {
            if (out->count < FRAMES_MAX) {
                out->offset[out->count] = consumed + pos;
                out->length[out->count] = n;
            }
            out->count++;
            pos += 4 + n;
        }
        /* Keep what is not a frame yet, at the front, as the readers do. */
        memmove(buf, buf + pos, have - pos);
        have -= pos, consumed += pos;
        if (v == CR_RPC_STREAM_BAD) {
            out->end = CR_RPC_STREAM_BAD;
            out->end_offset = consumed;
            break;
        }
        if (chunk == 0) break;
    }
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    bool replies = (data[0] & 0x80) != 0;
    size_t chunk = data[0] & 0x7f;
    static struct parse whole, pieces;
    parse(data + 1, size - 1, 0, replies, &whole);
    parse(data + 1, size - 1, chunk, replies, &pieces);
    if (whole.count != pieces.count || whole.end != pieces.end) abort();
    for (size_t i = 0; i < whole.count && i < FRAMES_MAX; i++)
        if (whole.offset[i] != pieces.offset[i] || whole.length[i] != pieces.length[i]) abort();
    if (whole.end == CR_RPC_STREAM_BAD && whole.end_offset != pieces.end_offset) abort();
    return 0;
}
