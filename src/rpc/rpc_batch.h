/* The batch requests as segments runs them: BatchGetReplicaList,
 * BatchExistKey and BatchRemove (keys of one tenant), BatchPutStart,
 * BatchPutEnd and BatchPutRevoke (one entry per put).
 *
 * Two ways in, one form out:
 *   - cr_rpc_batch_decode reads a request body by hand (rpc_batch.c): one
 *     pass over a copy of the body held by the call, keys and strings
 *     pointing into that copy, no per-field allocation and no descriptor
 *     walk.  It accepts only what the general path (cr_rpc_prescan,
 *     protobuf-c's unpack, cr_rpc_validate) accepts, with the same values;
 *     anything else (a refusal, or a form it leaves to protobuf-c: unknown
 *     fields, a singular field given twice, unpacked token ids, non-minimal
 *     tags) it declines, and the general path answers, so refusals and their
 *     texts stay exactly what they were.
 *   - cr_rpc_batch_from_pb takes a request protobuf-c unpacked (what the
 *     general path accepted, an in-process ask).
 * tests/unit/test_rpc_batch.c and tests/fuzz/fuzz_rpc_batch.c check that
 * the two agree wherever the decoder accepts. */
#ifndef CRESCENT_ACTORS_RPC_BATCH_H
#define CRESCENT_ACTORS_RPC_BATCH_H

#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/store.h"

/* One entry of BatchPutStart, BatchPutEnd or BatchPutRevoke (and the single
 * PutStart, PutEnd, PutRevoke, converted).  Strings are NUL-terminated. */
struct cr_rpc_put {
    const char *key;    /* key_len bytes (1..CR_STORE_KEY_LEN_MAX) */
    uint32_t key_len;
    const char *tenant; /* NULL or "" → "default" */
    struct cr_uuid client;
    bool has_secret;
    uint32_t secret_len;
    const uint8_t *secret;
    /* PutStart */
    int64_t value_length; /* ≥ 0 */
    uint64_t replica_num; /* 1..CR_STORE_REPLICAS_MAX */
    bool with_soft_pin;
    const char *preferred_segment; /* NULL: none */
    bool has_block;
    struct cr_store_block_meta block; /* has_block: its names NULL when unset */
    /* PutEnd */
    bool has_checksum;
    uint64_t checksum;
};

/* A validated batch request (every bound cr_rpc_validate checks holds). */
struct cr_rpc_batch {
    uint16_t method; /* enum Crescent__Master__Method: one of the six */
    uint32_t count;  /* keys or puts, ≤ CR_MASTER_BATCH_MAX */
    /* BatchGetReplicaList, BatchExistKey, BatchRemove */
    const char *tenant; /* NULL or "" → "default" */
    const char *const *keys;
    const uint32_t *key_lens;
    bool force;              /* BatchRemove */
    const char *admin_token; /* BatchRemove; NULL when absent */
    /* BatchPutStart, BatchPutEnd, BatchPutRevoke */
    const struct cr_rpc_put *puts;
};

/* Whether `method` is one of the six batch methods. */
bool cr_rpc_batch_method(uint16_t method);

/* Decodes and validates a batch request's body (method: one of the six).
 * True: *out is the request, living in *arena (a request arena,
 * cr_rpc_request_arena_free; its own copy of the body).  False when the
 * body is not one it accepts (see above) or memory ran out: *arena and *out
 * are NULL, and the general path is to decide. */
bool cr_rpc_batch_decode(uint16_t method, const uint8_t *body, size_t len, void **arena,
                         const struct cr_rpc_batch **out);

/* Memory for cr_rpc_batch_from_pb: returns `size` bytes aligned for any
 * type, or NULL. */
typedef void *(*cr_rpc_alloc_fn)(void *ctx, size_t size);

/* The batch form of a validated protobuf-c request of a batch method,
 * pointing into `request` (which must outlive it), its arrays from alloc.
 * Returns false when alloc failed. */
bool cr_rpc_batch_from_pb(uint16_t method, const ProtobufCMessage *request, cr_rpc_alloc_fn alloc,
                          void *ctx, struct cr_rpc_batch *out);

/* One PutStartRequest, PutEndRequest or PutRevokeRequest (per `method`:
 * PUT_START/BATCH_PUT_START, PUT_END/BATCH_PUT_END or the revokes) as an
 * entry, pointing into `request`. */
void cr_rpc_put_from_pb(uint16_t method, const ProtobufCMessage *request, struct cr_rpc_put *out);

#endif
