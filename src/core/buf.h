/* A growable byte buffer for building responses (JSON, Prometheus text).
 *
 * Appends never fail silently: after an allocation failure the buffer is
 * marked `failed`, later appends do nothing, and the caller checks once at
 * the end (cr_buf_ok) instead of after every append. */
#ifndef CRESCENT_CORE_BUF_H
#define CRESCENT_CORE_BUF_H

#include <stdbool.h>
#include <stddef.h>

struct cr_buf {
    char *data; /* NUL-terminated while ok */
    size_t len;
    size_t cap;
    bool failed;
};

void cr_buf_init(struct cr_buf *buf);
void cr_buf_free(struct cr_buf *buf);
void cr_buf_append(struct cr_buf *buf, const void *bytes, size_t len);
void cr_buf_appendf(struct cr_buf *buf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool cr_buf_ok(const struct cr_buf *buf);

/* Room for `extra` bytes written in place, for renderers that know a bound:
 * returns where to write, or NULL once the buffer has failed.  cr_buf_commit
 * then takes the bytes up to `end` (at most `extra` past the returned
 * pointer).  One bound check per record instead of one per field. */
char *cr_buf_reserve(struct cr_buf *buf, size_t extra);
void cr_buf_commit(struct cr_buf *buf, const char *end);

/* Hands the bytes to the caller (free() them); the buffer is left empty. */
char *cr_buf_take(struct cr_buf *buf, size_t *len_out);

#endif
