/* Replicas off the memory pool: the shared file tier's disk replicas and
 * store servers' local_disk (SSD) replicas (docs/tiers.md).
 *
 * The store only records where the bytes are; clients and store servers
 * move them.  A disk replica is one file per object under the master's
 * --root_fs_dir, written by the client that put the object and reported
 * with cr_store_add_disk_replica once it is durable.  A local_disk replica
 * sits on the SSD of the server owning a mounted segment and goes when that
 * segment is unmounted (the server re-registers what its SSD holds).
 *
 * Memory eviction (cr_store_evict) drops an object's memory replicas and
 * keeps the object while it has another medium; objects with no memory
 * replica are not memory-eviction candidates. */
#ifndef CRESCENT_CORE_STORE_TIERS_H
#define CRESCENT_CORE_STORE_TIERS_H

#include <stdbool.h>
#include <stdint.h>

/* Records that the complete object `k` is also in file `file_path`
 * (NUL-terminated, 1..CR_STORE_FILE_PATH_LEN_MAX bytes) holding `size`
 * bytes whose XXH3 is `checksum`.  An object that already has a disk
 * replica has it replaced (the path may differ).  Publishes an UPDATE
 * event.  Returns CR_OK, CR_ERR_OBJECT_NOT_FOUND (no such complete
 * object), CR_ERR_INVALID_PARAMS (size or checksum differ from the
 * object's: the file is of another put; bad path), CR_ERR_NOMEM (replica
 * slots full, or out of memory).  Changes nothing on error. */
int cr_store_add_disk_replica(cr_store *store, const struct cr_store_key *k,
                              const char *file_path, uint64_t size, uint64_t checksum,
                              uint64_t now_ms);

/* Records that the complete object `k` is on the SSD of the server owning
 * mounted segment `segment_name`, at `position` (the server's own handle:
 * a file offset or an index).  One per segment: a second replaces the
 * first.  Publishes an UPDATE event.  Returns CR_OK,
 * CR_ERR_OBJECT_NOT_FOUND, CR_ERR_SEGMENT_NOT_FOUND, CR_ERR_NOMEM (replica
 * slots full).  Changes nothing on error. */
int cr_store_add_local_disk_replica(cr_store *store, const struct cr_store_key *k,
                                    const char *segment_name, uint64_t position,
                                    uint64_t now_ms);

/* Drops object k's replicas of `medium` (for LOCAL_DISK, only those on
 * segment_name when it is non-NULL and non-empty): a file found gone or
 * corrupt, a file-tier eviction.  Publishes UPDATE; an object left with no
 * replica is freed.  *dropped (may be NULL) gets the number dropped.
 * Returns CR_OK (also when none matched) or CR_ERR_OBJECT_NOT_FOUND. */
int cr_store_drop_medium(cr_store *store, const struct cr_store_key *k,
                         enum cr_replica_medium medium, const char *segment_name,
                         uint32_t *dropped);

/* Calls fn(ctx, path) whenever the store lets go of a disk replica (removed,
 * evicted, dropped, its object freed), before the path is freed: the caller
 * deletes the file.  Not called when a report replaces a replica with the
 * same path, nor by cr_store_destroy.  fn NULL: none (the default). */
void cr_store_set_file_hook(cr_store *store, void (*fn)(void *ctx, const char *path),
                            void *ctx);

/* The file tier's own eviction (approximate LRU, like memory's): while the
 * disk replicas' bytes exceed limit_bytes, samples objects with a disk
 * replica that are not leased, pinned hard or in a task, and drops the disk
 * replica of the least recently used quarter of each sample (an object left
 * with no replica is freed; UPDATE events as ever; the file hook is told).
 * Stops after a few rounds that find nothing.  Returns the bytes dropped. */
uint64_t cr_store_evict_disk(cr_store *store, uint64_t limit_bytes, uint64_t now_ms,
                             uint64_t *rng);

#endif
