/* libFuzzer target for the replication stream's decoder (src/durable/
 * repl_wire.c): what a standby reads from its leader and a leader from its
 * standbys, over a connection that may be cut anywhere or carry damage.
 *
 * The first input byte picks how the rest is read.  Bit 0 clear: the rest
 * is the raw stream.  Bit 0 set: the rest is frame bodies (u16 length,
 * bytes), each framed with its true XXH3 checksum, since no fuzzer guesses
 * a 64-bit hash; bit 1 set then also frames the records inside a RECORDS
 * body with their true checksums.  Checks, for every frame the decoder
 * takes:
 * - it reports a length within the input, and each of its records decodes
 *   again on its own, lsns increasing in RECORDS;
 * - every shorter prefix of its bytes is NEED_MORE (a torn frame is never
 *   taken, and never taken as another frame: nothing half-applied);
 * - cr_repl_judge's verdict is consistent: TAKE starts at have_lsn + 1, a
 *   lower term is always refused;
 * and every refusal has a message.
 * Build and run: tests/fuzz/README.md. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "core/buf.h"
#include "durable/record.h"
#include "durable/repl_wire.h"

static struct cr_durable_record rec;

static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Frames body[0..n) with a true checksum into out. */
static void frame(struct cr_buf *out, const uint8_t *body, size_t n) {
    uint8_t h[12];
    put_u32(h, (uint32_t)n);
    put_u64(h + 4, XXH3_64bits(body, n));
    cr_buf_append(out, h, sizeof(h));
    cr_buf_append(out, body, n);
}

static void check_frame(const uint8_t *p, size_t len, const struct cr_repl_frame *f,
                        size_t used) {
    char err[256];
    if (used > len || used < CR_REPL_FRAME_HEADER) abort();
    for (size_t cut = 0; cut < used; cut += 1 + cut / 8) {
        struct cr_repl_frame g;
        size_t u2;
        if (cr_repl_decode(p, cut, &g, &u2, err, sizeof(err)) != CR_REPL_NEED_MORE) abort();
    }
    uint64_t count = 0, prev = 0;
    size_t off = 0;
    while (off < f->records_len) {
        const uint8_t *body;
        uint32_t body_len;
        size_t frame_len;
        if (cr_durable_frame_next(f->records + off, f->records_len - off, &body, &body_len,
                                  &frame_len) != CR_DURABLE_FRAME_OK)
            abort();
        if (cr_durable_decode(body, body_len, &rec, err, sizeof(err)) != 0) abort();
        if (f->kind == CR_REPL_RECORDS && count > 0 && rec.lsn <= prev) abort();
        prev = rec.lsn;
        count++;
        off += frame_len;
    }
    if (count != f->record_count) abort();
    if (f->kind != CR_REPL_RECORDS) return;
    for (uint64_t have = 0; have < 4; have++) {
        size_t skip;
        enum cr_repl_verdict v = cr_repl_judge(f, f->term + 1, have, &skip, err, sizeof(err));
        if (f->term != UINT64_MAX && v != CR_REPL_STALE_TERM) abort();
        v = cr_repl_judge(f, f->term, have, &skip, err, sizeof(err));
        if (v == CR_REPL_TAKE) {
            if (skip >= f->records_len) abort();
            const uint8_t *r = f->records + skip + CR_DURABLE_FRAME_HEADER + 1;
            uint64_t lsn = 0;
            for (int i = 7; i >= 0; i--) lsn = lsn << 8 | r[i];
            if (lsn != have + 1) abort();
        } else if ((v == CR_REPL_GAP || v == CR_REPL_STALE_TERM) && err[0] == '\0') {
            abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    uint8_t mode = data[0];
    data++, size--;
    struct cr_buf stream;
    cr_buf_init(&stream);
    if (mode & 1) {
        size_t pos = 0;
        while (pos + 2 <= size) {
            size_t n = (size_t)data[pos] | (size_t)data[pos + 1] << 8;
            pos += 2;
            if (n > size - pos) n = size - pos;
            struct cr_buf body;
            cr_buf_init(&body);
            if ((mode & 2) && n >= 17 && data[pos] == CR_REPL_RECORDS) {
                /* kind, term, lsn, then record bodies (u16 length, bytes) */
                cr_buf_append(&body, data + pos, 17);
                size_t q = pos + 17;
                while (q + 2 <= pos + n) {
                    size_t m = (size_t)data[q] | (size_t)data[q + 1] << 8;
                    q += 2;
                    if (m > pos + n - q) m = pos + n - q;
                    frame(&body, data + q, m);
                    q += m;
                }
            } else {
                cr_buf_append(&body, data + pos, n);
            }
            if (cr_buf_ok(&body)) frame(&stream, (const uint8_t *)body.data, body.len);
            cr_buf_free(&body);
            pos += n;
        }
    } else {
        cr_buf_append(&stream, data, size);
    }
    if (!cr_buf_ok(&stream) || stream.len == 0) {
        cr_buf_free(&stream);
        return 0;
    }
    const uint8_t *p = (const uint8_t *)stream.data;
    size_t len = stream.len, off = 0;
    for (;;) {
        struct cr_repl_frame f;
        size_t used = 0;
        char err[256] = "";
        enum cr_repl_status s = cr_repl_decode(p + off, len - off, &f, &used, err, sizeof(err));
        if (s == CR_REPL_NEED_MORE) break;
        if (s == CR_REPL_BAD) {
            if (err[0] == '\0') abort();
            break;
        }
        check_frame(p + off, len - off, &f, used);
        off += used;
    }
    cr_buf_free(&stream);
    return 0;
}
