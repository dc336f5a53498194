/* libFuzzer target for the durable metadata's decoders (src/durable/record.c,
 * files.c, image.c, seqmark.c): what a restart reads from a log or a snapshot that a
 * crash, a disk or a person may have damaged.
 *
 * The first input byte picks the file kind: even, a log; odd, a snapshot.
 * Bit 1 set puts a valid header in front of the rest (so the fuzzer spends
 * its time past the magic bytes).  Bit 2 set reads the rest as bodies
 * (u16 length, bytes) and frames each with its true checksum, since no
 * fuzzer guesses a 64-bit hash: that is what reaches the body decoder.
 * Checks:
 * - every frame whose checksum holds and whose body decodes re-encodes to
 *   exactly its bytes;
 * - a log scan never reports whole records past the bytes it was given, and
 *   scanning just the bytes it kept gives the same records with a clean end
 *   (truncating a torn tail is idempotent);
 * - a refused snapshot applies nothing to the image;
 * - the lookahead load (cr_durable_snapshot_load_ahead) applies the records
 *   the plain one applies, in the same order, each after its peek, with the
 *   same verdict;
 * - an image built from either holds only what its walks return.
 * Build and run: tests/fuzz/README.md. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "crescent/error.h"
#include "durable/files.h"
#include "durable/image.h"
#include "durable/record.h"
#include "durable/seqmark.h"

static struct cr_durable_record rec;

/* Each decodable frame from `pos` on re-encodes to its own bytes. */
static void check_frames(const uint8_t *data, size_t len, size_t pos) {
    char err[200];
    while (pos <= len) {
        const uint8_t *body;
        uint32_t body_len;
        size_t frame_len;
        if (cr_durable_frame_next(data + pos, len - pos, &body, &body_len, &frame_len) !=
            CR_DURABLE_FRAME_OK)
            return;
        if (frame_len > len - pos) abort();
        if (cr_durable_decode(body, body_len, &rec, err, sizeof(err)) == CR_OK) {
            struct cr_buf again;
            cr_buf_init(&again);
            if (cr_durable_encode(&rec, &again) != CR_OK) abort();
            if (again.len != frame_len || memcmp(again.data, data + pos, frame_len) != 0)
                abort();
            cr_buf_free(&again);
        } else if (err[0] == '\0') {
            abort();
        }
        pos += frame_len;
    }
}

static void check_walks(const struct cr_durable_image *img) {
    uint64_t cursor = 0, n = 0;
    while (cr_durable_image_object_next(img, &cursor, &rec)) {
        if (rec.type != CR_DURABLE_OBJECT_PUT) abort();
        n++;
    }
    if (n != cr_durable_image_objects(img)) abort();
    cursor = 0;
    n = 0;
    while (cr_durable_image_segment_next(img, &cursor, &rec)) {
        if (rec.type != CR_DURABLE_SEGMENT_MOUNT) abort();
        n++;
    }
    if (n != cr_durable_image_segments(img)) abort();
}

static void fuzz_log(const uint8_t *data, size_t len) {
    char err[256] = "";
    struct cr_durable_image *img = cr_durable_image_create();
    if (img == NULL) return;
    struct cr_durable_log_scan scan, again;
    int rc = cr_durable_log_scan(data, len, cr_durable_image_apply, img, &scan, err,
                                 sizeof(err));
    if (rc == CR_OK) {
        if (scan.good_len > len || scan.good_len < CR_DURABLE_LOG_HEADER) abort();
        if (scan.tail == CR_DURABLE_FRAME_OK) abort();
        if ((scan.tail == CR_DURABLE_FRAME_END) != (scan.good_len == len)) abort();
        struct cr_durable_image *img2 = cr_durable_image_create();
        if (img2 == NULL) abort();
        if (cr_durable_log_scan(data, scan.good_len, cr_durable_image_apply, img2, &again, err,
                                sizeof(err)) != CR_OK)
            abort();
        if (again.records != scan.records || again.good_len != scan.good_len ||
            again.tail != CR_DURABLE_FRAME_END ||
            cr_durable_image_objects(img2) != cr_durable_image_objects(img))
            abort();
        cr_durable_image_destroy(img2);
    } else if (rc != CR_ERR_PROTOCOL || err[0] == '\0') {
        abort();
    }
    /* The scan restarts use, keeping each record's bytes: the same image. */
    struct cr_durable_image *fast = cr_durable_image_create();
    if (fast != NULL) {
        struct cr_durable_log_scan fs;
        int rc2 = cr_durable_log_scan_bodies(data, len, cr_durable_image_apply_body, fast, &fs,
                                             err, sizeof(err));
        if (rc2 != rc) abort();
        if (rc == CR_OK && (fs.records != scan.records || fs.good_len != scan.good_len ||
                            cr_durable_image_objects(fast) != cr_durable_image_objects(img)))
            abort();
        check_walks(fast);
        cr_durable_image_destroy(fast);
    }
    check_walks(img);
    cr_durable_image_destroy(img);
    if (len >= CR_DURABLE_LOG_HEADER) check_frames(data, len, CR_DURABLE_LOG_HEADER);
}

/* The records a load applied, in order (their bodies' places), and how
 * many it showed to peek first. */
struct order {
    uint64_t hash, applied, peeked;
};

static void order_peek(void *ctx, const struct cr_durable_record *rec) {
    (void)rec;
    ((struct order *)ctx)->peeked++;
}

static int order_apply(void *ctx, const struct cr_durable_record *rec, const uint8_t *body,
                       uint32_t body_len, char *err, size_t err_len) {
    (void)err, (void)err_len;
    struct order *o = ctx;
    if (o->peeked != 0 && o->applied >= o->peeked) abort(); /* applied before peeked */
    o->hash = (o->hash ^ (uintptr_t)body ^ body_len ^ (uint64_t)rec->type << 40) * 0x100000001b3ull;
    o->applied++;
    return CR_OK;
}

/* The lookahead load restarts use applies the records the plain one does,
 * in the same order, each after peek saw it, with the same verdict. */
static void check_ahead(const uint8_t *data, size_t len) {
    char err[256] = "";
    struct order plain = {0}, ahead = {0};
    uint64_t lsn = 0, lsn2 = 0;
    int rc = cr_durable_snapshot_load(data, len, order_apply, &plain, &lsn, err, sizeof(err));
    int rc2 = cr_durable_snapshot_load_ahead(data, len, 3, order_peek, order_apply, &ahead,
                                             &lsn2, err, sizeof(err));
    if (rc != rc2) abort();
    if (rc == CR_OK && (lsn != lsn2 || plain.hash != ahead.hash ||
                        plain.applied != ahead.applied || ahead.peeked != ahead.applied))
        abort();
    if (rc != CR_OK && ahead.applied > plain.applied) abort();
}

static void fuzz_snapshot(const uint8_t *data, size_t len) {
    check_ahead(data, len);
    char err[256] = "";
    struct cr_durable_image *img = cr_durable_image_create();
    if (img == NULL) return;
    uint64_t lsn = 0;
    int rc = cr_durable_snapshot_scan(data, len, cr_durable_image_apply, img, &lsn, err,
                                      sizeof(err));
    if (rc != CR_OK) {
        if (rc != CR_ERR_PROTOCOL || err[0] == '\0') abort();
        if (cr_durable_image_objects(img) != 0 || cr_durable_image_segments(img) != 0) abort();
    }
    /* The one-pass load restarts use: the same verdict and image. */
    struct cr_durable_image *fast = cr_durable_image_create();
    if (fast != NULL) {
        uint64_t lsn2 = 0;
        cr_durable_image_reserve(fast, cr_durable_snapshot_count_hint(data, len));
        int rc2 = cr_durable_snapshot_load(data, len, cr_durable_image_apply_body, fast, &lsn2,
                                           err, sizeof(err));
        if ((rc2 == CR_OK) != (rc == CR_OK)) abort();
        if (rc == CR_OK && (lsn2 != lsn ||
                            cr_durable_image_objects(fast) != cr_durable_image_objects(img) ||
                            cr_durable_image_segments(fast) != cr_durable_image_segments(img)))
            abort();
        if (rc == CR_OK) check_walks(fast);
        cr_durable_image_destroy(fast);
    }
    check_walks(img);
    cr_durable_image_destroy(img);
    if (len >= CR_DURABLE_SNAPSHOT_HEADER) check_frames(data, len, CR_DURABLE_SNAPSHOT_HEADER);
}

/* Frames each (u16 length, body) chunk of data with its checksum. */
static void frame_bodies(const uint8_t *data, size_t len, struct cr_buf *out) {
    while (len >= 2) {
        size_t n = (size_t)data[0] | (size_t)data[1] << 8;
        data += 2;
        len -= 2;
        if (n > len) n = len;
        uint8_t header[CR_DURABLE_FRAME_HEADER];
        uint64_t check = XXH3_64bits(data, n);
        for (int i = 0; i < 4; i++) header[i] = (uint8_t)((uint32_t)n >> (8 * i));
        for (int i = 0; i < 8; i++) header[4 + i] = (uint8_t)(check >> (8 * i));
        cr_buf_append(out, header, sizeof(header));
        cr_buf_append(out, data, n);
        data += n;
        len -= n;
    }
}

/* The event sequence mark (seqmark.c): a file that decodes re-encodes to
 * exactly its bytes; anything else is refused, never read past its length. */
static void fuzz_seqmark(const uint8_t *data, size_t size) {
    char err[200];
    uint64_t mark = 0;
    if (cr_seqmark_decode(data, size, &mark, err, sizeof(err)) != CR_OK) return;
    uint8_t again[CR_SEQMARK_LEN];
    cr_seqmark_encode(mark, again);
    if (size != CR_SEQMARK_LEN || memcmp(again, data, size) != 0) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    uint8_t mode = data[0];
    data++;
    size--;
    fuzz_seqmark(data, size);
    bool snapshot = (mode & 1) != 0;
    if ((mode & 2) == 0) {
        if (snapshot) fuzz_snapshot(data, size);
        else fuzz_log(data, size);
        return 0;
    }
    uint8_t header[CR_DURABLE_SNAPSHOT_HEADER];
    size_t header_len = snapshot ? CR_DURABLE_SNAPSHOT_HEADER : CR_DURABLE_LOG_HEADER;
    if (snapshot) cr_durable_snapshot_header(0, header);
    else cr_durable_log_header(header);
    struct cr_buf buf;
    cr_buf_init(&buf);
    cr_buf_append(&buf, header, header_len);
    if ((mode & 4) != 0) frame_bodies(data, size, &buf);
    else cr_buf_append(&buf, data, size);
    if (cr_buf_ok(&buf)) {
        if (snapshot) fuzz_snapshot((const uint8_t *)buf.data, buf.len);
        else fuzz_log((const uint8_t *)buf.data, buf.len);
    }
    cr_buf_free(&buf);
    return 0;
}
