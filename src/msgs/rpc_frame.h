/* The store-master RPC envelope, shared by the gateway and libcrescent.
 *
 * Transport: ZMQ. Clients use DEALER (pipelining: many requests in flight,
 * replies in any order); crescentd's gateway is a ROUTER.  Two layouts, the
 * same fields:
 *
 *   one frame (libcrescent):
 *     request  [method u16 BE | request id u64 BE | protobuf body]
 *     reply    [request id u64 BE | status i32 BE | body]
 *   three frames:
 *     request  [method u16 BE] [request id u64 BE] [protobuf body]
 *     reply    [request id u64 BE] [status i32 BE] [body]
 *
 * A request in one frame is answered in one frame, one in three frames in
 * three.  One frame costs ZMQ a third of the per-frame work (the gateway's
 * and the I/O thread's time went mostly to frames, not bytes); three frames
 * are easy to build by hand and stay accepted.  (The ROUTER adds and strips
 * the client's identity frame.)  `method` is a value of enum
 * crescent.master.Method (proto/master.proto).  `status` is the transport's
 * verdict: CR_OK means `body` is the method's protobuf response (which
 * carries its own status_code); anything else (unknown method, frames that
 * do not parse, a body that does not decode) means `body` is a UTF-8 message
 * for a person.  A reply to a request whose id could not be read carries
 * request id 0. */
#ifndef CRESCENT_MSGS_RPC_FRAME_H
#define CRESCENT_MSGS_RPC_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define CR_RPC_METHOD_BYTES 2u
#define CR_RPC_ID_BYTES 8u
#define CR_RPC_STATUS_BYTES 4u
#define CR_RPC_BODY_MAX (16u << 20) /* larger frames are refused by ZMQ unread */
#define CR_RPC_REQUEST_FRAMES 3u    /* method, id, body (after the identity) */
#define CR_RPC_REPLY_FRAMES 3u      /* id, status, body */
#define CR_RPC_REQUEST_HEADER_BYTES (CR_RPC_METHOD_BYTES + CR_RPC_ID_BYTES) /* one frame */
#define CR_RPC_REPLY_HEADER_BYTES (CR_RPC_ID_BYTES + CR_RPC_STATUS_BYTES)    /* one frame */

static inline void cr_rpc_put_u16(uint8_t out[2], uint16_t v) {
    out[0] = (uint8_t)(v >> 8);
    out[1] = (uint8_t)v;
}

static inline void cr_rpc_put_u64(uint8_t out[8], uint64_t v) {
    for (int i = 7; i >= 0; i--, v >>= 8) out[i] = (uint8_t)v;
}

static inline void cr_rpc_put_i32(uint8_t out[4], int32_t v) {
    uint32_t u = (uint32_t)v;
    for (int i = 3; i >= 0; i--, u >>= 8) out[i] = (uint8_t)u;
}

static inline uint16_t cr_rpc_get_u16(const uint8_t in[2]) {
    return (uint16_t)((uint16_t)in[0] << 8 | in[1]);
}

static inline uint64_t cr_rpc_get_u64(const uint8_t in[8]) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | in[i];
    return v;
}

static inline int32_t cr_rpc_get_i32(const uint8_t in[4]) {
    uint32_t u = 0;
    for (int i = 0; i < 4; i++) u = u << 8 | in[i];
    return (int32_t)u;
}

#endif
