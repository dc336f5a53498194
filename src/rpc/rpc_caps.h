/* The master's half of data-plane capabilities (issue 28): the capability
 * signed into each replica handle handed out (core/xfer_cap.h for the format,
 * src/rdma/README.md "Capabilities" for what the store server checks).
 *
 * A segment whose owner registered a key at MountSegment has its handles
 * signed: read until the lease granted ends (GetReplicaList and its batch
 * form), write until the put's release timeout (PutStart and its batch form),
 * for exactly the handle's range [buffer, buffer + size).  A local_disk
 * replica of such a segment gets a read capability for the server's SSD
 * segment "<segment>#ssd" and [position, position + size).  A segment without
 * a key costs nothing here.  Expiries are Unix ms (CLOCK_REALTIME, the clock
 * the store server compares with), not the store's monotonic clock. */
#ifndef CRESCENT_RPC_RPC_CAPS_H
#define CRESCENT_RPC_RPC_CAPS_H

#include <stdint.h>

#include "core/store.h"
#include "core/xfer_cap.h"

_Static_assert(sizeof(((struct cr_store_replica_desc *)0)->cap) == CR_CAP_BYTES,
               "cr_store_replica_desc.cap holds one wire capability");

/* Signs the capability of every memory replica in `list` whose segment has a
 * key (and, for CR_CAP_READ, of every local_disk one), with `mode` (CR_CAP_READ or CR_CAP_WRITE) until unix_now_ms + ttl_ms;
 * sets has_cap.  Others get has_cap false. */
void cr_rpc_caps_sign(struct cr_store_replica_list *list, uint8_t mode, uint64_t ttl_ms,
                      uint64_t unix_now_ms);

/* The same for one replica, expiring at expiry_ms (Unix ms). */
void cr_rpc_caps_sign_one(struct cr_store_replica_desc *d, uint8_t mode, uint64_t expiry_ms);

/* The wall clock capabilities expire by, Unix ms. */
uint64_t cr_rpc_caps_now_ms(void);

#endif
