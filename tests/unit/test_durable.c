/* src/durable's codecs without threads or files: records round-trip, every
 * truncation and every flipped byte of a log is a torn tail cut at the last
 * whole record, a snapshot that is truncated, corrupt or from a newer format
 * is refused whole, and the replay image applies records as effects. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "crescent/error.h"
#include "durable/files.h"
#include "durable/image.h"
#include "durable/record.h"

static struct cr_durable_record *rec_new(void) {
    struct cr_durable_record *r = calloc(1, sizeof(*r));
    assert_non_null(r);
    return r;
}

static void make_mount(struct cr_durable_record *r, uint64_t lsn, const char *name) {
    memset(r, 0, sizeof(*r));
    r->type = CR_DURABLE_SEGMENT_MOUNT;
    r->lsn = lsn;
    strcpy(r->name, name);
    strcpy(r->endpoint, "127.0.0.1:7000");
    strcpy(r->protocol, "tcp");
    r->owner.b[0] = 0xab;
    r->base = 1ull << 40;
    r->size = 1ull << 30;
}

static void make_put(struct cr_durable_record *r, uint64_t lsn, const char *tenant,
                     const char *key, uint64_t offset) {
    memset(r, 0, sizeof(*r));
    r->type = CR_DURABLE_OBJECT_PUT;
    r->lsn = lsn;
    strcpy(r->tenant, tenant);
    r->key_len = (uint32_t)strlen(key);
    memcpy(r->key, key, r->key_len);
    r->size = 4096;
    r->flags = CR_DURABLE_OBJ_CHECKSUM | CR_DURABLE_OBJ_SOFT_PIN;
    r->checksum = 0x1122334455667788ull;
    r->owner.b[15] = 7;
    r->replica_count = 2;
    strcpy(r->replicas[0].segment, "seg-a");
    r->replicas[0].offset = offset;
    r->replicas[0].size = 4096;
    strcpy(r->replicas[1].segment, "seg-b");
    r->replicas[1].offset = offset + 8192;
    r->replicas[1].size = 4096;
}

static void make_remove(struct cr_durable_record *r, uint64_t lsn, const char *tenant,
                        const char *key) {
    memset(r, 0, sizeof(*r));
    r->type = CR_DURABLE_OBJECT_REMOVE;
    r->lsn = lsn;
    strcpy(r->tenant, tenant);
    r->key_len = (uint32_t)strlen(key);
    memcpy(r->key, key, r->key_len);
}

/* Decodes the single frame in buf. */
static int decode_one(const struct cr_buf *buf, struct cr_durable_record *out) {
    const uint8_t *body;
    uint32_t body_len;
    size_t frame_len;
    assert_int_equal(cr_durable_frame_next((const uint8_t *)buf->data, buf->len, &body,
                                           &body_len, &frame_len),
                     CR_DURABLE_FRAME_OK);
    assert_int_equal(frame_len, buf->len);
    char err[200];
    return cr_durable_decode(body, body_len, out, err, sizeof(err));
}

static void test_round_trip(void **unused) {
    (void)unused;
    struct cr_durable_record *in = rec_new(), *out = rec_new();
    struct cr_buf buf;
    make_put(in, 42, "tenant-1", "key\0with-nul", 4096);
    in->key_len = 12; /* keys are bytes, NUL included */
    memcpy(in->key, "key\0with-nul", 12);
    cr_buf_init(&buf);
    assert_int_equal(cr_durable_encode(in, &buf), CR_OK);
    assert_int_equal(buf.len, cr_durable_encoded_size(in));
    assert_int_equal(decode_one(&buf, out), CR_OK);
    assert_int_equal(out->type, CR_DURABLE_OBJECT_PUT);
    assert_int_equal(out->lsn, 42);
    assert_string_equal(out->tenant, "tenant-1");
    assert_int_equal(out->key_len, 12);
    assert_memory_equal(out->key, "key\0with-nul", 12);
    assert_int_equal(out->checksum, in->checksum);
    assert_int_equal(out->flags, in->flags);
    assert_memory_equal(out->owner.b, in->owner.b, 16);
    assert_int_equal(out->replica_count, 2);
    assert_string_equal(out->replicas[1].segment, "seg-b");
    assert_int_equal(out->replicas[1].offset, 4096 + 8192);

    cr_buf_free(&buf);
    cr_buf_init(&buf);
    make_mount(in, 7, "seg-a");
    assert_int_equal(cr_durable_encode(in, &buf), CR_OK);
    assert_int_equal(decode_one(&buf, out), CR_OK);
    assert_string_equal(out->name, "seg-a");
    assert_string_equal(out->endpoint, "127.0.0.1:7000");
    assert_int_equal(out->base, 1ull << 40);
    assert_int_equal(out->size, 1ull << 30);
    cr_buf_free(&buf);
    free(in);
    free(out);
}

/* A record whose body is well framed but says something impossible. */
static void test_decode_refuses(void **unused) {
    (void)unused;
    struct cr_durable_record *in = rec_new(), *out = rec_new();
    uint8_t body[64] = {99, 1, 0, 0, 0, 0, 0, 0, 0};
    char err[200] = "";
    assert_int_equal(cr_durable_decode(body, 9, out, err, sizeof(err)), CR_ERR_PROTOCOL);
    assert_non_null(strstr(err, "unknown type 99"));
    /* an unmount whose name length runs past the body */
    uint8_t unmount[] = {CR_DURABLE_SEGMENT_UNMOUNT, 1, 0, 0, 0, 0, 0, 0, 0, 10, 0, 'a'};
    assert_int_equal(cr_durable_decode(unmount, sizeof(unmount), out, err, sizeof(err)),
                     CR_ERR_PROTOCOL);
    assert_non_null(strstr(err, "segment name"));
    /* bytes left over after a whole record */
    uint8_t extra[] = {CR_DURABLE_SEGMENT_UNMOUNT, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 'a', 'b'};
    assert_int_equal(cr_durable_decode(extra, sizeof(extra), out, err, sizeof(err)),
                     CR_ERR_PROTOCOL);
    assert_non_null(strstr(err, "left over"));
    /* every truncation of a valid object body fails cleanly */
    struct cr_buf buf;
    cr_buf_init(&buf);
    make_put(in, 3, "t", "k", 0);
    assert_int_equal(cr_durable_encode(in, &buf), CR_OK);
    const uint8_t *b = (const uint8_t *)buf.data + CR_DURABLE_FRAME_HEADER;
    uint32_t n = (uint32_t)(buf.len - CR_DURABLE_FRAME_HEADER);
    for (uint32_t cut = 0; cut < n; cut++)
        assert_int_equal(cr_durable_decode(b, cut, out, err, sizeof(err)), CR_ERR_PROTOCOL);
    assert_int_equal(cr_durable_decode(b, n, out, err, sizeof(err)), CR_OK);
    cr_buf_free(&buf);
    free(in);
    free(out);
}

/* A log: header, then records 1..n; returns the byte offset each ends at. */
static void build_log(struct cr_buf *log, int n, size_t *ends) {
    struct cr_durable_record *r = rec_new();
    uint8_t header[CR_DURABLE_LOG_HEADER];
    cr_durable_log_header(header);
    cr_buf_init(log);
    cr_buf_append(log, header, sizeof(header));
    for (int i = 0; i < n; i++) {
        char key[32];
        snprintf(key, sizeof(key), "key-%d", i);
        make_put(r, (uint64_t)i + 1, "default", key, (uint64_t)i * 16384);
        assert_int_equal(cr_durable_encode(r, log), CR_OK);
        ends[i] = log->len;
    }
    free(r);
}

static int count_apply(void *ctx, const struct cr_durable_record *rec, char *err,
                       size_t err_len) {
    (void)rec;
    (void)err;
    (void)err_len;
    (*(uint64_t *)ctx)++;
    return CR_OK;
}

static void test_log_torn_tail(void **unused) {
    (void)unused;
    enum { N = 5 };
    size_t ends[N];
    struct cr_buf log;
    build_log(&log, N, ends);
    const uint8_t *d = (const uint8_t *)log.data;
    char err[200];
    struct cr_durable_log_scan scan;
    uint64_t applied = 0;
    assert_int_equal(cr_durable_log_scan(d, log.len, count_apply, &applied, &scan, err,
                                         sizeof(err)),
                     CR_OK);
    assert_int_equal(scan.records, N);
    assert_int_equal(scan.last_lsn, N);
    assert_int_equal(scan.good_len, log.len);
    assert_int_equal(scan.tail, CR_DURABLE_FRAME_END);
    /* Every truncation keeps exactly the whole records before the cut. */
    for (size_t cut = CR_DURABLE_LOG_HEADER; cut < log.len; cut++) {
        applied = 0;
        assert_int_equal(cr_durable_log_scan(d, cut, count_apply, &applied, &scan, err,
                                             sizeof(err)),
                         CR_OK);
        size_t whole = 0;
        while (whole < N && ends[whole] <= cut) whole++;
        assert_int_equal(scan.records, whole);
        assert_int_equal(applied, whole);
        assert_int_equal(scan.good_len, whole == 0 ? CR_DURABLE_LOG_HEADER : ends[whole - 1]);
        assert_int_equal(scan.tail, cut == scan.good_len ? CR_DURABLE_FRAME_END
                                                          : CR_DURABLE_FRAME_TORN);
    }
    /* A flipped byte in the last record: cut before it, never applied. */
    uint8_t *copy = malloc(log.len);
    for (size_t at = ends[N - 2]; at < log.len; at++) {
        memcpy(copy, d, log.len);
        copy[at] ^= 0x40;
        assert_int_equal(cr_durable_log_scan(copy, log.len, count_apply, &applied, &scan, err,
                                             sizeof(err)),
                         CR_OK);
        assert_int_equal(scan.records, N - 1);
        assert_int_equal(scan.good_len, ends[N - 2]);
        assert_true(scan.tail != CR_DURABLE_FRAME_OK && scan.tail != CR_DURABLE_FRAME_END);
    }
    /* Another file's bytes or a newer format: refused, not truncated. */
    memcpy(copy, d, log.len);
    copy[8] = 2;
    assert_int_equal(cr_durable_log_scan(copy, log.len, count_apply, &applied, &scan, err,
                                         sizeof(err)),
                     CR_ERR_PROTOCOL);
    assert_non_null(strstr(err, "newer"));
    copy[0] = 'X';
    assert_int_equal(cr_durable_log_scan(copy, log.len, count_apply, &applied, &scan, err,
                                         sizeof(err)),
                     CR_ERR_PROTOCOL);
    assert_non_null(strstr(err, "not a crescent log"));
    free(copy);
    cr_buf_free(&log);
}

static void build_snapshot(struct cr_buf *snap, uint64_t lsn, int objects) {
    struct cr_durable_record *r = rec_new();
    uint8_t header[CR_DURABLE_SNAPSHOT_HEADER];
    cr_durable_snapshot_header(lsn, header);
    cr_buf_init(snap);
    cr_buf_append(snap, header, sizeof(header));
    make_mount(r, lsn, "seg-a");
    assert_int_equal(cr_durable_encode(r, snap), CR_OK);
    for (int i = 0; i < objects; i++) {
        char key[32];
        snprintf(key, sizeof(key), "snap-%d", i);
        make_put(r, lsn, "default", key, (uint64_t)i * 16384);
        assert_int_equal(cr_durable_encode(r, snap), CR_OK);
    }
    memset(r, 0, sizeof(*r));
    r->type = CR_DURABLE_SNAPSHOT_END;
    r->lsn = lsn;
    r->record_count = (uint64_t)objects + 1;
    assert_int_equal(cr_durable_encode(r, snap), CR_OK);
    free(r);
}

static void test_snapshot_refusals(void **unused) {
    (void)unused;
    struct cr_buf snap;
    build_snapshot(&snap, 1234, 3);
    const uint8_t *d = (const uint8_t *)snap.data;
    char err[200];
    uint64_t applied = 0, lsn = 0;
    assert_int_equal(cr_durable_snapshot_scan(d, snap.len, count_apply, &applied, &lsn, err,
                                              sizeof(err)),
                     CR_OK);
    assert_int_equal(applied, 4);
    assert_int_equal(lsn, 1234);
    /* Every truncation is refused and applies nothing. */
    for (size_t cut = 0; cut < snap.len; cut++) {
        applied = 0;
        assert_int_equal(cr_durable_snapshot_scan(d, cut, count_apply, &applied, &lsn, err,
                                                  sizeof(err)),
                         CR_ERR_PROTOCOL);
        assert_int_equal(applied, 0);
        assert_true(err[0] != '\0');
    }
    /* Every flipped byte is refused too. */
    uint8_t *copy = malloc(snap.len);
    for (size_t at = 0; at < snap.len; at++) {
        memcpy(copy, d, snap.len);
        copy[at] ^= 0x01;
        applied = 0;
        assert_int_equal(cr_durable_snapshot_scan(copy, snap.len, count_apply, &applied, &lsn,
                                                  err, sizeof(err)),
                         CR_ERR_PROTOCOL);
        assert_int_equal(applied, 0);
    }
    memcpy(copy, d, snap.len);
    copy[8] = 9;
    assert_int_equal(cr_durable_snapshot_scan(copy, snap.len, count_apply, &applied, &lsn, err,
                                              sizeof(err)),
                     CR_ERR_PROTOCOL);
    assert_non_null(strstr(err, "snapshot format 9"));
    assert_non_null(strstr(err, "newer"));
    /* Bytes after the end record. */
    struct cr_buf longer;
    cr_buf_init(&longer);
    cr_buf_append(&longer, d, snap.len);
    cr_buf_append(&longer, "x", 1);
    assert_int_equal(cr_durable_snapshot_scan((const uint8_t *)longer.data, longer.len,
                                              count_apply, &applied, &lsn, err, sizeof(err)),
                     CR_ERR_PROTOCOL);
    free(copy);
    cr_buf_free(&longer);
    cr_buf_free(&snap);
}

/* Snapshot then log, as a restart replays them: effects, idempotent. */
static void test_image_replay(void **unused) {
    (void)unused;
    struct cr_durable_image *img = cr_durable_image_create();
    assert_non_null(img);
    struct cr_buf snap;
    build_snapshot(&snap, 10, 3); /* snap-0..2 on seg-a */
    char err[200];
    uint64_t lsn;
    assert_int_equal(cr_durable_snapshot_scan((const uint8_t *)snap.data, snap.len,
                                              cr_durable_image_apply, img, &lsn, err,
                                              sizeof(err)),
                     CR_OK);
    struct cr_durable_record *r = rec_new();
    make_remove(r, 11, "default", "snap-1");
    assert_int_equal(cr_durable_image_apply(img, r, err, sizeof(err)), CR_OK);
    make_remove(r, 12, "default", "never-there");
    assert_int_equal(cr_durable_image_apply(img, r, err, sizeof(err)), CR_OK);
    make_put(r, 13, "default", "snap-2", 999 * 16384); /* moved: replaced */
    assert_int_equal(cr_durable_image_apply(img, r, err, sizeof(err)), CR_OK);
    make_put(r, 14, "other", "snap-0", 5 * 16384); /* same key, other tenant */
    assert_int_equal(cr_durable_image_apply(img, r, err, sizeof(err)), CR_OK);
    assert_int_equal(cr_durable_image_objects(img), 3);
    assert_int_equal(cr_durable_image_lsn(img), 14);
    assert_int_equal(cr_durable_image_object_find(img, "default", "snap-1", 6, r),
                     CR_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(cr_durable_image_object_find(img, "default", "snap-2", 6, r), CR_OK);
    assert_int_equal(r->replicas[0].offset, 999 * 16384);
    memset(r, 0, sizeof(*r));
    r->type = CR_DURABLE_REMOVE_ALL;
    r->lsn = 15;
    strcpy(r->tenant, "default");
    assert_int_equal(cr_durable_image_apply(img, r, err, sizeof(err)), CR_OK);
    assert_int_equal(cr_durable_image_objects(img), 1);
    assert_int_equal(cr_durable_image_object_find(img, "other", "snap-0", 6, r), CR_OK);
    /* Walks see every entry once. */
    uint64_t cursor = 0, n = 0;
    while (cr_durable_image_object_next(img, &cursor, r)) n++;
    assert_int_equal(n, 1);
    cursor = 0;
    assert_true(cr_durable_image_segment_next(img, &cursor, r));
    assert_string_equal(r->name, "seg-a");
    assert_false(cr_durable_image_segment_next(img, &cursor, r));
    memset(r, 0, sizeof(*r));
    r->type = CR_DURABLE_SEGMENT_UNMOUNT;
    r->lsn = 16;
    strcpy(r->name, "seg-a");
    assert_int_equal(cr_durable_image_apply(img, r, err, sizeof(err)), CR_OK);
    assert_int_equal(cr_durable_image_segments(img), 0);
    free(r);
    cr_buf_free(&snap);
    cr_durable_image_destroy(img);
}

/* Many objects: the tables grow, walks and finds stay exact. */
static void test_image_grows(void **unused) {
    (void)unused;
    struct cr_durable_image *img = cr_durable_image_create();
    struct cr_durable_record *r = rec_new();
    char err[200], key[32];
    enum { N = 5000 };
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        make_put(r, (uint64_t)i + 1, "default", key, (uint64_t)i * 16384);
        assert_int_equal(cr_durable_image_apply(img, r, err, sizeof(err)), CR_OK);
    }
    for (int i = 0; i < N; i += 2) {
        snprintf(key, sizeof(key), "k%d", i);
        make_remove(r, (uint64_t)(N + i + 1), "default", key);
        assert_int_equal(cr_durable_image_apply(img, r, err, sizeof(err)), CR_OK);
    }
    assert_int_equal(cr_durable_image_objects(img), N / 2);
    uint64_t cursor = 0, n = 0;
    while (cr_durable_image_object_next(img, &cursor, r)) {
        char digits[32] = "";
        memcpy(digits, r->key + 1, r->key_len - 1);
        int i = atoi(digits);
        assert_true(i % 2 == 1);
        assert_int_equal(r->replicas[0].offset, (uint64_t)i * 16384);
        n++;
    }
    assert_int_equal(n, N / 2);
    free(r);
    cr_durable_image_destroy(img);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),       cmocka_unit_test(test_decode_refuses),
        cmocka_unit_test(test_log_torn_tail),    cmocka_unit_test(test_snapshot_refusals),
        cmocka_unit_test(test_image_replay),     cmocka_unit_test(test_image_grows),
    };
    return cmocka_run_group_tests_name("durable", tests, NULL, NULL);
}
