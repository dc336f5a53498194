/* The state a snapshot plus the log describe, built before the store is.
 *
 * Replay applies records here, not to the store: a snapshot is taken while
 * the store keeps changing (a fuzzy cut, like a database's fuzzy
 * checkpoint), so the snapshot alone may hold an object removed during the
 * cut next to one placed later at the same offset.  Records are idempotent
 * effects (record.h): applying the log from the snapshot's starting lsn on
 * top makes the image exact as of the log's end, and only then is the store
 * built from it, each replica at its recorded offset.
 *
 * An object is kept as its encoded record (about 100 bytes for a short key),
 * in a chained hash table on (tenant, key).  Pure: no threads, no I/O. */
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

uint64_t cr_durable_image_objects(const struct cr_durable_image *img);
uint32_t cr_durable_image_segments(const struct cr_durable_image *img);
/* The largest lsn applied (0 when none). */
uint64_t cr_durable_image_lsn(const struct cr_durable_image *img);

/* Walks the segments, then the objects, in no particular order: start with
 * *cursor = 0; each call decodes the next one into *out and returns true,
 * false at the end.  The image must not change during a walk. */
bool cr_durable_image_segment_next(const struct cr_durable_image *img, uint64_t *cursor,
                                   struct cr_durable_record *out);
bool cr_durable_image_object_next(const struct cr_durable_image *img, uint64_t *cursor,
                                  struct cr_durable_record *out);

/* The object the walk returned just before it set *cursor to `ref`
 * (cr_durable_image_object_next), decoded into *out. */
void cr_durable_image_object_get(const struct cr_durable_image *img, uint64_t ref,
                                 struct cr_durable_record *out);

/* Finds an object: CR_OK and *out, or CR_ERR_OBJECT_NOT_FOUND. */
int cr_durable_image_object_find(const struct cr_durable_image *img, const char *tenant,
                                 const char *key, uint32_t key_len,
                                 struct cr_durable_record *out);

#endif
