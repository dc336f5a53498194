/* Growable byte buffer (see buf.h). */
#include "core/buf.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cr_buf_init(struct cr_buf *buf) { memset(buf, 0, sizeof(*buf)); }

void cr_buf_free(struct cr_buf *buf) {
    free(buf->data);
    cr_buf_init(buf);
}

static bool reserve(struct cr_buf *buf, size_t extra) {
    if (buf->failed) return false;
    size_t need = buf->len + extra + 1;
    if (need <= buf->cap) return true;
    size_t cap = buf->cap ? buf->cap : 256;
    while (cap < need) cap *= 2;
    char *data = realloc(buf->data, cap);
    if (data == NULL) {
        buf->failed = true;
        return false;
    }
    buf->data = data;
    buf->cap = cap;
    return true;
}

void cr_buf_append(struct cr_buf *buf, const void *bytes, size_t len) {
    assert(buf != NULL && (bytes != NULL || len == 0));
    if (!reserve(buf, len)) return;
    memcpy(buf->data + buf->len, bytes, len);
    buf->len += len;
    buf->data[buf->len] = '\0';
}

void cr_buf_appendf(struct cr_buf *buf, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    va_list copy;
    va_copy(copy, args);
    int need = vsnprintf(NULL, 0, fmt, copy);
    va_end(copy);
    if (need >= 0 && reserve(buf, (size_t)need)) {
        vsnprintf(buf->data + buf->len, buf->cap - buf->len, fmt, args);
        buf->len += (size_t)need;
    } else if (need < 0) {
        buf->failed = true;
    }
    va_end(args);
}

bool cr_buf_ok(const struct cr_buf *buf) { return !buf->failed; }

char *cr_buf_reserve(struct cr_buf *buf, size_t extra) {
    assert(buf != NULL);
    return reserve(buf, extra) ? buf->data + buf->len : NULL;
}

void cr_buf_commit(struct cr_buf *buf, const char *end) {
    assert(buf != NULL && !buf->failed);
    assert(end >= buf->data + buf->len && end < buf->data + buf->cap);
    buf->len = (size_t)(end - buf->data);
    buf->data[buf->len] = '\0';
}

char *cr_buf_take(struct cr_buf *buf, size_t *len_out) {
    if (!reserve(buf, 0)) return NULL; /* an empty buffer still yields "" */
    char *data = buf->data;
    if (len_out != NULL) *len_out = buf->len;
    cr_buf_init(buf);
    return data;
}
