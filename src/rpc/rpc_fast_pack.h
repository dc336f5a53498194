/* Direct encoders for the hottest responses, all of them successes (no
 * error_message): a GetReplicaList or PutStart, i.e. `{status_code: 0,
 * replica_list: [ReplicaInfo...], checksum_xxh3 and lease_ttl_ms when the
 * list has them}` (PutStart's never has: PutStartResponse has no such
 * fields); a PutEnd, PutRevoke or Remove,
 * `{status_code: 0}`; an ExistKey, `{status_code: 0, exists}`.
 *
 * protobuf-c packs through its descriptors, and a nested repeated message
 * (response → ReplicaInfo → BufHandle) has its sizes computed once per
 * level above it and every string's strlen taken each time: packing a
 * one-replica GetReplicaListResponse took 0.26 µs, about half of the
 * segments actor's time per call (bench/master_actors, 1.7 M gets/s with
 * it, 2.8-3.3 M without).  This writes the same bytes protobuf-c writes (field
 * order, minimal varints, optional transport_endpoint present when set),
 * which tests/unit/test_rpc_fast_pack.c checks against protobuf-c over
 * random lists; every other response, and every refusal, still goes through
 * protobuf-c. */
#ifndef CRESCENT_ACTORS_RPC_FAST_PACK_H
#define CRESCENT_ACTORS_RPC_FAST_PACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/store.h"
#include "master.pb-c.h"

/* The BufHandle status of a replica in the store's state. */
Crescent__Master__BufHandle__BufStatus cr_rpc_buf_status(enum cr_replica_status s);

/* Packs the response for `list` (status_code 0) into out[0, cap).  Returns
 * the length, or 0 when it needs more than `cap` bytes (nothing useful is
 * left in `out` then: the caller packs with protobuf-c instead). */
size_t cr_rpc_pack_replica_response(const struct cr_store_replica_list *list, uint8_t *out,
                                    size_t cap);

/* `{status_code: 0}` (PutEndResponse, PutRevokeResponse, RemoveResponse),
 * then `exists` when `exists` is 0 or 1 (ExistKeyResponse); -1 leaves it
 * out.  out must hold 4 bytes.  Returns the length. */
size_t cr_rpc_pack_ok_response(int exists, uint8_t out[4]);

/* A batch response written entry by entry while the batch runs: status_code
 * 0 (a batch call's own status is always 0; its entries say how each key
 * went), then field 2 once per entry.  The bytes start in the call's inline
 * reply buffer and move to one malloc'd buffer, grown by doubling, when they
 * outgrow it; entries are written as they are answered, so nothing of a
 * store view outlives the entry (the views last until the next change).
 * Same bytes as protobuf-c packing the response built from protobuf-c
 * structs (tests/unit/test_rpc_fast_pack.c). */
struct cr_rpc_batch_writer {
    uint8_t *buf;       /* inline, or malloc'd when buf != inline_buf */
    uint8_t *inline_buf;
    size_t len, cap;
    bool failed;        /* a grow failed: the reply is "out of memory" */
};

/* Starts a response in inline_buf (inline_cap bytes, at least 2), with room
 * reserved for `expect` bytes (a guess: the writer grows past it). */
void cr_rpc_batch_begin(struct cr_rpc_batch_writer *w, uint8_t *inline_buf, size_t inline_cap,
                        size_t expect);

/* A successful GetReplicaListResponse (checksum and lease as the list has
 * them) or PutStartResponse (the store gives a PutStart neither) entry. */
void cr_rpc_batch_add_replicas(struct cr_rpc_batch_writer *w,
                               const struct cr_store_replica_list *list);

/* A refused entry: `{status_code: status}`, then error_message when `why`
 * is neither NULL nor "" (BatchPutStart's entries say why; BatchGet's do
 * not, and pass NULL). */
void cr_rpc_batch_add_refusal(struct cr_rpc_batch_writer *w, int32_t status, const char *why);

/* One entry of `repeated int32 status_codes = 2` (BatchExistKey,
 * BatchRemove, BatchPutEnd, BatchPutRevoke; not packed, as proto2 writes
 * it: a negative code is a 10-byte varint). */
void cr_rpc_batch_add_code(struct cr_rpc_batch_writer *w, int32_t code);

/* Bytes per entry of the largest code (tag and a 10-byte varint). */
#define CR_RPC_BATCH_CODE_MAX 11u

#endif
