/* The state a snapshot plus the log describe, built before the store is.
 * crescentd's recovery no longer builds one (it restores into the store in
 * bulk, recover.c); the tests, the fuzzer and bench/durable_recover.c use
 * it as the independent way to the same store.
 *
 * Replay applies records here, not to the store: a snapshot is taken while
 * the store keeps changing (a fuzzy cut, like a database's fuzzy
 * checkpoint), so the snapshot alone may hold an object removed during the
 * cut next to one placed later at the same offset.  Records are idempotent
 * effects (record.h): applying the log from the snapshot's starting lsn on
 * top makes the image exact as of the log's end, and only then is the store
 * built from it, each replica at its recorded offset.
 *
 * An object is kept as its encoded record (about 100 bytes for a short key:
 * the very bytes read from the file, checked once, not encoded again), in
 * a chained hash table on (tenant, key) whose entries live in an arena.
 * Pure: no threads, no I/O. */
#ifndef CRESCENT_DURABLE_IMAGE_H
#define CRESCENT_DURABLE_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "durable/record.h"

struct cr_durable_image;

/* Returns NULL when out of memory. */
struct cr_durable_image *cr_durable_image_create(void);
void cr_durable_image_destroy(struct cr_durable_image *img);

/* Applies one record (a cr_durable_apply_fn): MOUNT adds or replaces the
 * segment of that name, UNMOUNT removes it, OBJECT_PUT adds or replaces the
 * object, OBJECT_REMOVE removes it (absent is fine), REMOVE_ALL removes a
 * tenant's objects or ("" tenant) all.  Returns CR_OK, or CR_ERR_NOMEM with
 * err set (the image is unchanged). */
int cr_durable_image_apply(void *img, const struct cr_durable_record *rec, char *err,
                           size_t err_len);

/* The same with the body `rec` was decoded from (a cr_durable_body_fn,
 * files.h): kept as it is, where cr_durable_image_apply encodes rec again.
 * body NULL: as cr_durable_image_apply. */
int cr_durable_image_apply_body(void *img, const struct cr_durable_record *rec,
                                const uint8_t *body, uint32_t body_len, char *err,
                                size_t err_len);

/* Loads a snapshot's record (a cr_durable_body_fn for
 * cr_durable_snapshot_load): the same effect as cr_durable_image_apply_body,
 * except that an object is linked into the table a few dozen records later,
 * its hash bucket prefetched meanwhile (a miss per object was a quarter of
 * a restart, bench/RESULTS.md).  Call cr_durable_image_load_end after the
 * last record, before anything else reads or changes the image.  On an
 * error (CR_ERR_NOMEM, err set) the image is only fit to be destroyed. */
int cr_durable_image_load_body(void *img, const struct cr_durable_record *rec,
                               const uint8_t *body, uint32_t body_len, char *err,
                               size_t err_len);
int cr_durable_image_load_end(struct cr_durable_image *img, char *err, size_t err_len);

/* Lends the image the bytes of a snapshot about to be loaded with
 * cr_durable_image_load_body: an object record whose body lies in
 * [data, data + len) is pointed at there, not copied into the image's
 * arena (at 10 M objects, about a gigabyte the kernel need not zero).  The
 * caller keeps those bytes, unchanged, until the image is destroyed. */
void cr_durable_image_borrow(struct cr_durable_image *img, const uint8_t *data, size_t len);

/* Sizes the object table for `objects` objects up front (a snapshot's
 * count), sparing its doublings.  A hint: out of memory, it grows later. */
void cr_durable_image_reserve(struct cr_durable_image *img, uint64_t objects);

uint64_t cr_durable_image_objects(const struct cr_durable_image *img);
uint32_t cr_durable_image_segments(const struct cr_durable_image *img);
/* Bytes of the arena holding entries, live or free for reuse. */
uint64_t cr_durable_image_arena_bytes(const struct cr_durable_image *img);
/* Hands the drain jobs replayed (DRAIN_JOB records) to *out, which frees
 * them (cr_durable_drain_jobs_free); the image keeps none. */
void cr_durable_image_take_drain(struct cr_durable_image *img, struct cr_durable_drain_jobs *out);

/* The largest lsn applied (0 when none). */
uint64_t cr_durable_image_lsn(const struct cr_durable_image *img);

/* Walks the segments, then the objects, in no particular order: start with
 * *cursor = 0; each call decodes the next one into *out and returns true,
 * false at the end.  The image must not change during a walk. */
bool cr_durable_image_segment_next(const struct cr_durable_image *img, uint64_t *cursor,
                                   struct cr_durable_record *out);
bool cr_durable_image_object_next(const struct cr_durable_image *img, uint64_t *cursor,
                                  struct cr_durable_record *out);

/* An object of the image, where a restore claims its first replica:
 * segment is XXH3 of that replica's segment name (0 for one off memory). */
struct cr_durable_image_ref {
    uint64_t segment;
    uint64_t offset;
    const void *entry;
};

/* Every object in restore order: by first replica's segment, then offset,
 * so each segment's ranges are claimed in ascending order (what the store's
 * allocator takes in O(1), store_restore.h).  Kept from when the record
 * was applied: no record is decoded to order them.  Free *out with
 * cr_durable_image_order_free (it is valid while the image is unchanged).
 * Returns CR_OK or CR_ERR_NOMEM. */
int cr_durable_image_restore_order(const struct cr_durable_image *img,
                                   struct cr_durable_image_ref **out, uint64_t *count);
void cr_durable_image_order_free(struct cr_durable_image_ref *refs, uint64_t count);

/* Starts loading the entry `ref` stands for (a restore walks millions of
 * them in an order the arena was not written in). */
void cr_durable_image_ref_prefetch(const struct cr_durable_image_ref *ref);

/* The tenant (NUL-terminated) and key of the object `ref` stands for,
 * pointing into the image (valid while it is unchanged). */
void cr_durable_image_ref_key(const struct cr_durable_image_ref *ref, const char **tenant,
                              const char **key, uint32_t *key_len);

/* Decodes the object `ref` stands for. */
void cr_durable_image_ref_decode(const struct cr_durable_image_ref *ref,
                                 struct cr_durable_record *out);

/* Finds an object: CR_OK and *out, or CR_ERR_OBJECT_NOT_FOUND. */
int cr_durable_image_object_find(const struct cr_durable_image *img, const char *tenant,
                                 const char *key, uint32_t key_len,
                                 struct cr_durable_record *out);

#endif
