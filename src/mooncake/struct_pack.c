/* struct_pack reader and writer: see struct_pack.h. */
#include "mooncake/struct_pack.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#define SP_META_LITERAL 0x04u
#define SP_META_WIDTH_SHIFT 3

static const uint8_t *take(struct cr_sp_reader *r, size_t n) {
    if (r->bad || r->len - r->off < n) {
        r->bad = true;
        return NULL;
    }
    const uint8_t *p = r->p + r->off;
    r->off += n;
    return p;
}

static uint64_t le(const uint8_t *p, size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

bool cr_sp_read_begin(struct cr_sp_reader *r, const uint8_t *buf, size_t len,
                      const struct cr_sp_type *t) {
    assert(r != NULL && t != NULL && (buf != NULL || len == 0));
    *r = (struct cr_sp_reader){.p = buf, .len = len, .width = 1};
    const uint8_t *h = take(r, 4);
    if (h == NULL) return false;
    uint32_t hash = (uint32_t)le(h, 4);
    if ((hash & ~1u) != t->hash) return r->bad = true, false;
    if ((hash & 1u) == 0) return true; /* no metainfo: lengths 1 byte wide */
    const uint8_t *meta = take(r, 1);
    if (meta == NULL) return false;
    /* Mooncake's types have no compatible fields: no size in the low bits. */
    if ((*meta & ~(SP_META_LITERAL | 3u << SP_META_WIDTH_SHIFT)) != 0) return r->bad = true, false;
    r->width = (uint8_t)(1u << ((*meta >> SP_META_WIDTH_SHIFT) & 3u));
    if (*meta & SP_META_LITERAL) {
        const uint8_t *lit = take(r, (size_t)t->literal_len + 1);
        if (lit == NULL || memcmp(lit, t->literal, t->literal_len) != 0 ||
            lit[t->literal_len] != 0)
            return r->bad = true, false;
    }
    return true;
}

uint8_t cr_sp_u8(struct cr_sp_reader *r) {
    const uint8_t *p = take(r, 1);
    return p != NULL ? *p : 0;
}

bool cr_sp_bool(struct cr_sp_reader *r) {
    uint8_t v = cr_sp_u8(r);
    if (v > 1) r->bad = true;
    return v == 1;
}

uint32_t cr_sp_u32(struct cr_sp_reader *r) {
    const uint8_t *p = take(r, 4);
    return p != NULL ? (uint32_t)le(p, 4) : 0;
}

uint64_t cr_sp_u64(struct cr_sp_reader *r) {
    const uint8_t *p = take(r, 8);
    return p != NULL ? le(p, 8) : 0;
}

size_t cr_sp_len(struct cr_sp_reader *r, size_t max, size_t elem_min) {
    const uint8_t *p = take(r, r->width);
    if (p == NULL) return 0;
    uint64_t n = le(p, r->width);
    if (n > max || (elem_min > 0 && n > (r->len - r->off) / elem_min)) {
        r->bad = true;
        return 0;
    }
    return (size_t)n;
}

const uint8_t *cr_sp_str(struct cr_sp_reader *r, size_t max, size_t *n) {
    *n = cr_sp_len(r, max, 1);
    const uint8_t *p = take(r, *n);
    if (p == NULL) *n = 0;
    return p != NULL ? p : (const uint8_t *)"";
}

const uint8_t *cr_sp_raw(struct cr_sp_reader *r, size_t n) { return take(r, n); }

bool cr_sp_read_done(const struct cr_sp_reader *r) { return !r->bad && r->off == r->len; }

/* ------------------------------------------------------------------------ */

static uint8_t *room(struct cr_sp_writer *w, size_t n) {
    if (w->nomem) return NULL;
    if (w->cap - w->len < n) {
        size_t cap = w->cap < 256 ? 256 : w->cap;
        while (cap - w->len < n) cap *= 2;
        uint8_t *grown = realloc(w->buf, cap);
        if (grown == NULL) {
            w->nomem = true;
            return NULL;
        }
        w->buf = grown;
        w->cap = cap;
    }
    uint8_t *p = w->buf + w->len;
    w->len += n;
    return p;
}

static void put_le(struct cr_sp_writer *w, uint64_t v, size_t n) {
    uint8_t *p = room(w, n);
    if (p == NULL) return;
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

void cr_sp_write_begin(struct cr_sp_writer *w, const struct cr_sp_type *t, uint8_t width) {
    assert(w != NULL && t != NULL);
    assert(width == 1 || width == 2 || width == 4 || width == 8);
    w->width = width;
    w->too_long = false;
    put_le(w, t->hash | 1u, 4);
    uint8_t code = width == 1 ? 0 : width == 2 ? 1 : width == 4 ? 2 : 3;
    cr_sp_put_u8(w, (uint8_t)(SP_META_LITERAL | code << SP_META_WIDTH_SHIFT));
    cr_sp_put_raw(w, t->literal, t->literal_len);
    cr_sp_put_u8(w, 0);
}

void cr_sp_put_u8(struct cr_sp_writer *w, uint8_t v) { put_le(w, v, 1); }
void cr_sp_put_u32(struct cr_sp_writer *w, uint32_t v) { put_le(w, v, 4); }
void cr_sp_put_u64(struct cr_sp_writer *w, uint64_t v) { put_le(w, v, 8); }

void cr_sp_put_len(struct cr_sp_writer *w, size_t n) {
    if (w->width < 8 && (uint64_t)n >> (8 * w->width) != 0) w->too_long = true;
    put_le(w, n, w->width);
}

void cr_sp_put_str(struct cr_sp_writer *w, const char *s, size_t n) {
    cr_sp_put_len(w, n);
    cr_sp_put_raw(w, s, n);
}

void cr_sp_put_raw(struct cr_sp_writer *w, const void *p, size_t n) {
    uint8_t *dst = room(w, n);
    if (dst != NULL && n > 0) memcpy(dst, p, n);
}

bool cr_sp_write_value(struct cr_sp_writer *w, const struct cr_sp_type *t,
                       void (*fill)(struct cr_sp_writer *w, const void *ctx), const void *ctx) {
    assert(w != NULL && t != NULL && fill != NULL);
    size_t start = w->len;
    for (uint8_t width = 1; width <= 8; width = (uint8_t)(width * 2)) {
        w->len = start;
        cr_sp_write_begin(w, t, width);
        fill(w, ctx);
        if (w->nomem) return false;
        if (!w->too_long) return true;
    }
    assert(!"a length wider than 8 bytes");
    return false;
}
