/* Protobuf wire reading shared by crescentd's request decoders
 * (src/rpc/rpc_codec.c, rpc_batch.c) and libcrescent's reply decoders
 * (src/client/client_codec.c, client_decode.c): one varint reader, so the
 * two sides agree on what a varint is. */
#ifndef CRESCENT_MSGS_PB_WIRE_H
#define CRESCENT_MSGS_PB_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum cr_pb_wire_type { CR_PB_VARINT = 0, CR_PB_I64 = 1, CR_PB_LEN = 2, CR_PB_I32 = 5 };

/* Reads one varint at p[*pos] (p holds len bytes) into *out and advances
 * *pos past it.  False, *out unset, when it is cut short by the end or runs
 * past 10 bytes (as protobuf-c: a longer varint is malformed); *pos then
 * points past the bytes read. */
static inline bool cr_pb_read_varint(const uint8_t *p, size_t len, size_t *pos, uint64_t *out) {
    uint64_t value = 0;
    for (unsigned i = 0; i < 10; i++) {
        if (*pos >= len) return false;
        uint8_t byte = p[(*pos)++];
        value |= (uint64_t)(byte & 0x7f) << (7 * i);
        if ((byte & 0x80) == 0) {
            *out = value;
            return true;
        }
    }
    return false;
}

#endif
