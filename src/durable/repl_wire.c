/* The replication stream's frames (repl_wire.h). */
#include "durable/repl_wire.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "core/le.h"
#include "crescent/error.h"
#include "durable/record.h"

static void set_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void set_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Checks every framed record of r[0..len): whole, its checksum, a full
 * decode, lsns increasing when `increasing`.  Counts them and notes the
 * first and last lsn. */
static bool records_check(const uint8_t *r, size_t len, bool increasing,
                          struct cr_repl_frame *out, char *err, size_t err_len) {
    struct cr_durable_record *rec = malloc(sizeof(*rec));
    if (rec == NULL) {
        snprintf(err, err_len, "no memory to check a frame's records");
        return false;
    }
    size_t off = 0;
    bool ok = true;
    while (ok && off < len) {
        const uint8_t *body;
        uint32_t body_len;
        size_t frame_len;
        enum cr_durable_frame_status fs =
            cr_durable_frame_next(r + off, len - off, &body, &body_len, &frame_len);
        if (fs != CR_DURABLE_FRAME_OK) {
            snprintf(err, err_len, "record %" PRIu64 " of the frame (byte %zu): %s",
                     out->record_count + 1, off, cr_durable_frame_status_text(fs));
            ok = false;
            break;
        }
        char why[256];
        if (cr_durable_decode(body, body_len, rec, why, sizeof(why)) != CR_OK) {
            snprintf(err, err_len, "record %" PRIu64 " of the frame: %s",
                     out->record_count + 1, why);
            ok = false;
            break;
        }
        if (increasing && out->record_count > 0 && rec->lsn <= out->last_lsn) {
            snprintf(err, err_len, "record lsn %" PRIu64 " after %" PRIu64 ": lsns must increase",
                     rec->lsn, out->last_lsn);
            ok = false;
            break;
        }
        if (out->record_count == 0) out->first_lsn = rec->lsn;
        out->last_lsn = rec->lsn;
        out->record_count++;
        off += frame_len;
    }
    free(rec);
    return ok;
}

enum cr_repl_status cr_repl_decode(const uint8_t *p, size_t len, struct cr_repl_frame *out,
                                   size_t *used, char *err, size_t err_len) {
    assert(out != NULL && used != NULL && err != NULL && err_len > 0);
    if (len < CR_REPL_FRAME_HEADER) return CR_REPL_NEED_MORE;
    uint32_t n = cr_le_get_u32(p);
    if (n < 1 || n > CR_REPL_BODY_MAX) {
        snprintf(err, err_len, "a frame of %" PRIu32 " bytes (at most %u)", n, CR_REPL_BODY_MAX);
        return CR_REPL_BAD;
    }
    if (len - CR_REPL_FRAME_HEADER < n) return CR_REPL_NEED_MORE;
    const uint8_t *b = p + CR_REPL_FRAME_HEADER;
    if (XXH3_64bits(b, n) != cr_le_get_u64(p + 4)) {
        snprintf(err, err_len, "a frame's checksum does not match its bytes");
        return CR_REPL_BAD;
    }
    memset(out, 0, offsetof(struct cr_repl_frame, text));
    out->text[0] = '\0';
    out->has_history = false;
    out->kind = (enum cr_repl_kind)b[0];
    const uint8_t *q = b + 1;
    size_t left = n - 1;
    size_t fixed;
    switch (out->kind) {
    case CR_REPL_HELLO: fixed = 16; break;
    case CR_REPL_ACK: fixed = 8; break;
    case CR_REPL_RECORDS: fixed = 16; break;
    case CR_REPL_SNAP_BEGIN: fixed = 16; break;
    case CR_REPL_SNAP_PART:
    case CR_REPL_SNAP_END: fixed = 8; break;
    case CR_REPL_REFUSE: fixed = 0; break;
    case CR_REPL_RESYNC: fixed = 16; break;
    case CR_REPL_TERMS: fixed = 8; break;
    default:
        snprintf(err, err_len, "a frame of unknown kind %u", b[0]);
        return CR_REPL_BAD;
    }
    bool exact = out->kind == CR_REPL_ACK || out->kind == CR_REPL_SNAP_BEGIN;
    if (left < fixed || (exact && left != fixed)) {
        snprintf(err, err_len, "a frame of kind %u with %zu payload bytes", b[0], left);
        return CR_REPL_BAD;
    }
    switch (out->kind) {
    case CR_REPL_TERMS:
    case CR_REPL_HELLO: {
        if (out->kind == CR_REPL_TERMS) {
            out->term = cr_le_get_u64(q);
        } else {
            out->lsn = cr_le_get_u64(q);
            out->term = cr_le_get_u64(q + 8);
            if (left == fixed) break; /* no history: a standby that keeps none */
        }
        uint32_t hn = left >= fixed + 4 ? cr_le_get_u32(q + fixed) : UINT32_MAX;
        if (hn > CR_TERMS_MAX || left != fixed + 4 + (size_t)hn * CR_TERMS_ENTRY ||
            !cr_terms_get_entries(q + fixed + 4, hn, &out->history)) {
            snprintf(err, err_len, "a %s whose term history is not one (%zu payload bytes)",
                     out->kind == CR_REPL_HELLO ? "HELLO" : "TERMS", left);
            return CR_REPL_BAD;
        }
        out->has_history = true;
        break;
    }
    case CR_REPL_ACK: out->lsn = cr_le_get_u64(q); break;
    case CR_REPL_SNAP_BEGIN:
        out->term = cr_le_get_u64(q);
        out->lsn = cr_le_get_u64(q + 8);
        break;
    case CR_REPL_RECORDS:
        out->term = cr_le_get_u64(q);
        out->lsn = cr_le_get_u64(q + 8);
        break;
    case CR_REPL_SNAP_PART:
    case CR_REPL_SNAP_END: out->term = cr_le_get_u64(q); break;
    case CR_REPL_RESYNC:
    case CR_REPL_REFUSE: {
        if (out->kind == CR_REPL_RESYNC) {
            out->term = cr_le_get_u64(q);
            out->lsn = cr_le_get_u64(q + 8);
        }
        const uint8_t *tq = q + fixed;
        size_t tl = left - fixed;
        size_t t = tl < CR_REPL_TEXT_MAX - 1 ? tl : CR_REPL_TEXT_MAX - 1;
        for (size_t i = 0; i < t; i++) /* shown in a log line: printable only */
            out->text[i] = tq[i] >= 0x20 && tq[i] < 0x7f ? (char)tq[i] : '?';
        out->text[t] = '\0';
        break;
    }
    }
    if (out->kind == CR_REPL_RECORDS || out->kind == CR_REPL_SNAP_PART ||
        out->kind == CR_REPL_SNAP_END) {
        out->records = q + fixed;
        out->records_len = left - fixed;
        if (!records_check(out->records, out->records_len, out->kind == CR_REPL_RECORDS, out,
                           err, err_len))
            return CR_REPL_BAD;
        if (out->records_len == 0) out->records = NULL;
    }
    *used = CR_REPL_FRAME_HEADER + (size_t)n;
    return CR_REPL_OK;
}

/* Appends a frame whose body is `kind`, `fixed` (fixed_len bytes) and then
 * `tail`. */
static int put_frame(struct cr_buf *out, enum cr_repl_kind kind, const uint8_t *fixed,
                     size_t fixed_len, const uint8_t *tail, size_t tail_len) {
    size_t body = 1 + fixed_len + tail_len;
    assert(body <= CR_REPL_BODY_MAX);
    uint8_t *start = (uint8_t *)cr_buf_reserve(out, CR_REPL_FRAME_HEADER + body);
    if (start == NULL) return CR_ERR_NOMEM;
    uint8_t *b = start + CR_REPL_FRAME_HEADER;
    b[0] = (uint8_t)kind;
    if (fixed_len > 0) memcpy(b + 1, fixed, fixed_len);
    if (tail_len > 0) memcpy(b + 1 + fixed_len, tail, tail_len);
    set_u32(start, (uint32_t)body);
    set_u64(start + 4, XXH3_64bits(b, body));
    cr_buf_commit(out, (const char *)(b + body));
    return CR_OK;
}

int cr_repl_put_hello(struct cr_buf *out, uint64_t last_lsn, uint64_t highest_term) {
    uint8_t f[16];
    set_u64(f, last_lsn);
    set_u64(f + 8, highest_term);
    return put_frame(out, CR_REPL_HELLO, f, sizeof(f), NULL, 0);
}

int cr_repl_put_hello_terms(struct cr_buf *out, uint64_t last_lsn, uint64_t highest_term,
                            const struct cr_terms *history) {
    assert(history != NULL && history->count <= CR_TERMS_MAX);
    uint8_t f[16 + 4 + CR_TERMS_MAX * CR_TERMS_ENTRY];
    set_u64(f, last_lsn);
    set_u64(f + 8, highest_term);
    set_u32(f + 16, history->count);
    cr_terms_put_entries(history, f + 20);
    return put_frame(out, CR_REPL_HELLO, f, 20 + (size_t)history->count * CR_TERMS_ENTRY, NULL,
                     0);
}

int cr_repl_put_terms(struct cr_buf *out, uint64_t term, const struct cr_terms *history) {
    assert(history != NULL && history->count <= CR_TERMS_MAX);
    uint8_t f[8 + 4 + CR_TERMS_MAX * CR_TERMS_ENTRY];
    set_u64(f, term);
    set_u32(f + 8, history->count);
    cr_terms_put_entries(history, f + 12);
    return put_frame(out, CR_REPL_TERMS, f, 12 + (size_t)history->count * CR_TERMS_ENTRY, NULL,
                     0);
}

int cr_repl_put_resync(struct cr_buf *out, uint64_t term, uint64_t agree_lsn, const char *text) {
    uint8_t f[16];
    set_u64(f, term);
    set_u64(f + 8, agree_lsn);
    size_t len = strnlen(text, CR_REPL_TEXT_MAX - 1);
    return put_frame(out, CR_REPL_RESYNC, f, sizeof(f), (const uint8_t *)text, len);
}

int cr_repl_put_ack(struct cr_buf *out, uint64_t lsn) {
    uint8_t f[8];
    set_u64(f, lsn);
    return put_frame(out, CR_REPL_ACK, f, sizeof(f), NULL, 0);
}

int cr_repl_put_refuse(struct cr_buf *out, const char *text) {
    size_t len = strnlen(text, CR_REPL_TEXT_MAX - 1);
    return put_frame(out, CR_REPL_REFUSE, NULL, 0, (const uint8_t *)text, len);
}

int cr_repl_put_snap_begin(struct cr_buf *out, uint64_t term, uint64_t lsn) {
    uint8_t f[16];
    set_u64(f, term);
    set_u64(f + 8, lsn);
    return put_frame(out, CR_REPL_SNAP_BEGIN, f, sizeof(f), NULL, 0);
}

int cr_repl_put_records(struct cr_buf *out, enum cr_repl_kind kind, uint64_t term,
                        uint64_t leader_lsn, const uint8_t *records, size_t len) {
    assert(kind == CR_REPL_RECORDS || kind == CR_REPL_SNAP_PART || kind == CR_REPL_SNAP_END);
    uint8_t f[16];
    set_u64(f, term);
    set_u64(f + 8, leader_lsn);
    return put_frame(out, kind, f, kind == CR_REPL_RECORDS ? 16 : 8, records, len);
}

enum cr_repl_verdict cr_repl_judge(const struct cr_repl_frame *f, uint64_t highest_term,
                                   uint64_t have_lsn, size_t *skip, char *err, size_t err_len) {
    assert(f != NULL && skip != NULL && err != NULL && err_len > 0);
    *skip = 0;
    if (f->term < highest_term) {
        snprintf(err, err_len, "records of term %" PRIu64 " refused: term %" PRIu64
                 " was seen (a stale leader)", f->term, highest_term);
        return CR_REPL_STALE_TERM;
    }
    if (f->record_count == 0 || f->last_lsn <= have_lsn) return CR_REPL_HAVE_ALL;
    /* Records are in lsn order (checked): skip those the standby has. */
    size_t off = 0;
    uint64_t lsn = 0;
    while (off < f->records_len) {
        const uint8_t *r = f->records + off;
        lsn = cr_le_get_u64(r + CR_DURABLE_FRAME_HEADER + 1);
        if (lsn > have_lsn) break;
        off += CR_DURABLE_FRAME_HEADER + (size_t)cr_le_get_u32(r);
    }
    if (lsn != have_lsn + 1) {
        snprintf(err, err_len, "a gap in the stream: lsn %" PRIu64 " after %" PRIu64, lsn,
                 have_lsn);
        return CR_REPL_GAP;
    }
    *skip = off;
    return CR_REPL_TAKE;
}
