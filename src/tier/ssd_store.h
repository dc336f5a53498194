/* The SSD tier of one store server (docs/tiers.md, "Local SSD tier"): objects offloaded
 * from its memory segment, one file each under --ssd-dir, bounded by
 * --ssd-size with its own LRU eviction.
 *
 * A file is "<id>.crs" (16 hex digits): the id is the store's own handle
 * for the object (the master records it as the local_disk replica's
 * position), so no key byte ever reaches a file name.  Each file is an
 * ssd_header.h header and the value.  A write goes to "<id>.tmp", is
 * fsync'd, renamed and the directory fsync'd: a crash leaves either no file
 * or a whole one, and a leftover .tmp is removed at the next open.  Every
 * read checks the header and the value's XXH3 before a byte is handed out;
 * a file that fails is removed and counted, never served.
 *
 * Single-threaded and synchronous: the owner (a store server's thread)
 * serialises calls.  Time is the caller's (now_ms), for promotion windows. */
#ifndef CRESCENT_TIER_SSD_STORE_H
#define CRESCENT_TIER_SSD_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cr_ssd_store cr_ssd_store;

#define CR_SSD_PROMOTION_WINDOW_MS_DEFAULT 60000u

struct cr_ssd_config {
    const char *dir;          /* created (0700) when missing; must be writable */
    uint64_t capacity;        /* bytes of files (headers included), > 0 */
    uint32_t promotion_hits;  /* reads within the window that ask for promotion; 0: never */
    uint64_t promotion_window_ms; /* 0: CR_SSD_PROMOTION_WINDOW_MS_DEFAULT */
};

/* What the open found in the directory. */
struct cr_ssd_scan_report {
    uint64_t kept;        /* whole, valid files now served */
    uint64_t kept_bytes;
    uint64_t dropped;     /* files that failed a check (removed) */
    uint64_t tmp_removed; /* writes a crash interrupted */
    uint64_t over_capacity; /* valid files evicted because --ssd-size shrank */
};

/* One object the tier holds.  key and tenant point into the store (valid
 * until the object is removed or evicted); tenant is NUL-terminated. */
struct cr_ssd_object {
    uint64_t id;
    const uint8_t *key;
    uint32_t key_len;
    const char *tenant;
    uint64_t value_len;
    uint64_t value_xxh3;
};

struct cr_ssd_stats {
    uint64_t capacity, used, objects;
    uint64_t writes, write_bytes, write_failures;
    uint64_t reads, read_bytes, read_failures;
    uint64_t evictions, evicted_bytes;
    uint64_t corrupt_dropped; /* at open and at read */
    uint64_t promotions;      /* reads that reached promotion_hits */
};

/* Called for each object evicted to make room, before its file goes. */
typedef void (*cr_ssd_evict_fn)(void *arg, const struct cr_ssd_object *gone);

/* Opens (scans) cfg->dir: every "*.crs" file is read back and checked in
 * full (header, length, value XXH3); bad ones are removed and logged, *.tmp
 * files removed; when the valid files exceed the capacity the oldest (by
 * mtime) are evicted.  Returns CR_OK, CR_ERR_INVALID_PARAMS (a bad
 * config), CR_ERR_IO (the directory cannot be made, opened or written) or
 * CR_ERR_NOMEM, with a sentence in why.  report may be NULL. */
int cr_ssd_open(const struct cr_ssd_config *cfg, cr_ssd_store **out,
                struct cr_ssd_scan_report *report, char *why, size_t why_len);

/* Frees the index; the files stay for the next open.  NULL is a no-op. */
void cr_ssd_close(cr_ssd_store *s);

/* Writes one object durably (see above), evicting least recently used
 * objects (evicted() told of each) until it fits.  The value's XXH3 must be
 * `xxh3` (the put's checksum): bytes that do not match are never written.
 * An object already held under the same tenant and key is replaced once
 * the new file is in place.  *id gets the new object's id.  Returns CR_OK,
 * CR_ERR_CHECKSUM, CR_ERR_INVALID_PARAMS (key or tenant length, or the
 * object exceeds the capacity), CR_ERR_IO (disk full, ...; nothing left
 * behind), CR_ERR_NOMEM, with a sentence in why. */
int cr_ssd_put(cr_ssd_store *s, const char *tenant, const uint8_t *key, uint32_t key_len,
               const void *value, uint64_t value_len, uint64_t xxh3, cr_ssd_evict_fn evicted,
               void *arg, uint64_t *id, char *why, size_t why_len);

/* Looks an object up by id / by tenant and key.  False when not held. */
bool cr_ssd_lookup(const cr_ssd_store *s, uint64_t id, struct cr_ssd_object *out);
bool cr_ssd_find(const cr_ssd_store *s, const char *tenant, const uint8_t *key,
                 uint32_t key_len, struct cr_ssd_object *out);

/* Reads object `id`'s value into dst (cap >= its length), checking the
 * file's header against the index and the value's XXH3 first; marks it
 * recently used and counts the read toward promotion: *promote (may be NULL)
 * is set when this read makes promotion_hits within the window (then the
 * count restarts).  A file missing, short or corrupt is removed from the
 * index and the disk and CR_ERR_CHECKSUM returned (CR_ERR_OBJECT_NOT_FOUND
 * when the id is unknown; CR_ERR_INVALID_PARAMS when cap is short).  *len
 * gets the value's length. */
int cr_ssd_read(cr_ssd_store *s, uint64_t id, void *dst, uint64_t cap, uint64_t now_ms,
                uint64_t *len, bool *promote, char *why, size_t why_len);

/* For a reader that reads the file itself (a same-host client, through the
 * transfer layer's shm socket): opens object `id`'s file read-only and
 * checks its header against the index (the value is the reader's to check
 * against its XXH3); counts the read as cr_ssd_read does.  *fd gets the
 * descriptor (the caller's to close), *header_len where the value starts,
 * *len its length.  A file missing or with a bad header is dropped as in
 * cr_ssd_read (CR_ERR_CHECKSUM); CR_ERR_OBJECT_NOT_FOUND when the id is
 * unknown.  Later removal or eviction unlinks the file: an open fd still
 * reads the whole, unchanged value (files are never written in place). */
int cr_ssd_open_value(cr_ssd_store *s, uint64_t id, uint64_t now_ms, int *fd,
                      uint64_t *header_len, uint64_t *len, bool *promote, char *why,
                      size_t why_len);

/* Removes object id (file and index).  Returns CR_OK or CR_ERR_OBJECT_NOT_FOUND. */
int cr_ssd_remove(cr_ssd_store *s, uint64_t id);

/* Calls fn for each object held, least recently used first (re-registering
 * with a master).  fn must not change the store. */
void cr_ssd_foreach(const cr_ssd_store *s, void (*fn)(void *arg, const struct cr_ssd_object *o),
                    void *arg);

void cr_ssd_get_stats(const cr_ssd_store *s, struct cr_ssd_stats *out);

/* fn (NULL: none) is told of each object a read drops (its file missing,
 * short or corrupt), before it goes, as cr_ssd_put's evicted is of
 * evictions: the owner tells its master the object's replica is gone. */
void cr_ssd_set_drop_hook(cr_ssd_store *s, cr_ssd_evict_fn fn, void *arg);

/* The directory (as configured). */
const char *cr_ssd_dir(const cr_ssd_store *s);

#endif
