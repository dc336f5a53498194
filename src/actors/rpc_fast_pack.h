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

#endif
