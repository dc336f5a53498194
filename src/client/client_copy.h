/* Same-host reads that verify while they copy (client_copy.c).
 *
 * A read's bytes count only when their XXH3-64 equals the put's checksum.
 * Copying a whole object and then hashing the destination reads every byte
 * twice from memory; these copy a chunk (small enough to stay in cache) and
 * hash it at once, so the hash reads from cache.  What is hashed is the
 * destination, the bytes the caller gets, never the live source: a source
 * changed under the copy fails the check as before. */
#ifndef CRESCENT_CLIENT_CLIENT_COPY_H
#define CRESCENT_CLIENT_CLIENT_COPY_H

#include <stddef.h>
#include <stdint.h>
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t by value: no malloc per read */
#include <xxhash.h>

#include "crescent/client.h"

/* Bytes copied and then hashed at a time: small enough that the copy's
 * destination is still in L1/L2 when the hash reads it (bench/copy_verify.c
 * measures the neighbouring sizes). */
#define CR_COPY_CHUNK_BYTES (32u * 1024u)

struct cr_xfer_client;

/* Copies [src, src + len) to dst chunk by chunk, feeding each chunk of dst
 * to `state` (NULL: copy only) right after copying it.  The XXH3_64bits_digest
 * of a state reset before and fed a whole object equals the one-shot
 * XXH3_64bits of it. */
void cr_copy_hashed(XXH3_state_t *state, void *dst, const void *src, size_t len);

/* Reads replica `r` of an object of `len` bytes into dst through `xfer`'s
 * same-host mappings, in place of transfer ops: one handle at a time, each
 * mapped (cr_xfer_client_map) and copied with cr_copy_hashed, or, when the
 * object is one handle and a hash is wanted, with cr_copy_xxh3 (one pass,
 * copy_xxh3.h).  *xxh3 (when
 * not NULL) is the XXH3-64 of the len bytes written to dst.  Returns CR_OK,
 * or CR_ERR_AGAIN when some handle is not mapped here (another host, plain
 * memory, shm off, a malformed handle): then dst may hold part of the object
 * and the caller reads the replica with transfer ops, which report why. */
int cr_client_read_mapped(struct cr_xfer_client *xfer, const struct cr_replica *r, uint8_t *dst,
                          size_t len, uint64_t *xxh3);

#endif
