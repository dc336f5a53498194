/* The DRAIN_JOB record (src/durable/record_drain.c): a drain job's state
 * round-trips through the record codec byte for byte, every malformed body
 * (cut short, an unknown status, a concurrency or count out of range, a
 * segment named twice, a target that is a drained segment, a NUL in a name,
 * a message too long, bytes left over) is refused with the field named, and
 * the replay keeps the newest record of each job, 64 jobs at most, the
 * oldest finished ones dropped first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "crescent/error.h"
#include "durable/image.h"
#include "durable/record.h"

/* Body offsets of the job below (record.h, record_drain.h). */
enum {
    AT_STATUS = 9 + 16,
    AT_CONCURRENCY = AT_STATUS + 1,
    AT_SEGMENT_COUNT = AT_CONCURRENCY + 4 + 40,
    AT_TARGET_COUNT = AT_SEGMENT_COUNT + 1,
    AT_SEG_A = AT_TARGET_COUNT + 1, /* u16 5, "seg-a" */
    AT_SEG_B = AT_SEG_A + 7,
    AT_TARGET = AT_SEG_B + 7,
    AT_MESSAGE = AT_TARGET + 7,
};

static struct cr_durable_record *make_job(uint64_t lsn, uint64_t id, uint8_t status,
                                          uint64_t succeeded) {
    struct cr_durable_record *r = calloc(1, sizeof(*r));
    assert_non_null(r);
    r->type = CR_DURABLE_DRAIN_JOB;
    r->lsn = lsn;
    struct cr_durable_drain *d = &r->drain;
    cr_durable_drain_clear(d);
    d->id_first = id, d->id_second = ~id;
    d->status = status;
    d->max_concurrency = 8;
    d->created_wall_ms = 1700000000000ull, d->updated_wall_ms = 1700000004321ull;
    d->succeeded = succeeded, d->failed = 2, d->migrated_bytes = succeeded * 4096;
    assert_true(cr_durable_drain_add(d, "seg-a", false));
    assert_true(cr_durable_drain_add(d, "seg-b", false));
    assert_true(cr_durable_drain_add(d, "seg-c", true));
    assert_false(cr_durable_drain_add(d, "seg-d", false)); /* segments before targets */
    assert_false(cr_durable_drain_add(d, "", true));
    strcpy(d->message, "Drain job running");
    return r;
}

static void encode(const struct cr_durable_record *r, struct cr_buf *buf) {
    cr_buf_init(buf);
    assert_int_equal(cr_durable_encode(r, buf), CR_OK);
    assert_int_equal(buf->len, cr_durable_encoded_size(r));
}

static int decode_frame(const struct cr_buf *buf, struct cr_durable_record *out) {
    const uint8_t *body;
    uint32_t body_len;
    size_t frame_len;
    assert_int_equal(cr_durable_frame_next((const uint8_t *)buf->data, buf->len, &body,
                                           &body_len, &frame_len),
                     CR_DURABLE_FRAME_OK);
    char err[200];
    return cr_durable_decode(body, body_len, out, err, sizeof(err));
}

static void test_round_trip(void **unused) {
    (void)unused;
    struct cr_durable_record *in = make_job(42, 7, 2, 1000), *out = calloc(1, sizeof(*out));
    assert_non_null(out);
    struct cr_buf buf, again;
    encode(in, &buf);
    assert_int_equal(decode_frame(&buf, out), CR_OK);
    assert_int_equal(out->type, CR_DURABLE_DRAIN_JOB);
    assert_int_equal(out->lsn, 42);
    const struct cr_durable_drain *d = &out->drain;
    assert_int_equal(d->id_first, 7);
    assert_int_equal(d->id_second, ~7ull);
    assert_int_equal(d->status, 2);
    assert_int_equal(d->max_concurrency, 8);
    assert_int_equal(d->created_wall_ms, 1700000000000ull);
    assert_int_equal(d->updated_wall_ms, 1700000004321ull);
    assert_int_equal(d->succeeded, 1000);
    assert_int_equal(d->failed, 2);
    assert_int_equal(d->migrated_bytes, 1000 * 4096);
    assert_int_equal(d->segment_count, 2);
    assert_int_equal(d->target_count, 1);
    uint32_t cursor = 0;
    assert_string_equal(cr_durable_drain_next(d, &cursor), "seg-a");
    assert_string_equal(cr_durable_drain_next(d, &cursor), "seg-b");
    assert_string_equal(cr_durable_drain_next(d, &cursor), "seg-c");
    assert_null(cr_durable_drain_next(d, &cursor));
    assert_string_equal(d->message, "Drain job running");
    encode(out, &again); /* one canonical form */
    assert_int_equal(again.len, buf.len);
    assert_memory_equal(again.data, buf.data, buf.len);
    /* The longest job a create accepts fits one record. */
    struct cr_durable_drain *big = &in->drain;
    cr_durable_drain_clear(big);
    big->max_concurrency = 1;
    char name[CR_STORE_NAME_LEN_MAX + 1];
    uint32_t added = 0;
    for (uint32_t i = 0; i < 2 * CR_DURABLE_DRAIN_SEGMENTS_MAX; i++) {
        memset(name, 'a' + (char)(i % 26), 90);
        snprintf(name + 90, sizeof(name) - 90, "-%u", i);
        added += cr_durable_drain_add(big, name, i >= CR_DURABLE_DRAIN_SEGMENTS_MAX);
    }
    assert_int_equal(added, 2 * CR_DURABLE_DRAIN_SEGMENTS_MAX);
    memset(big->message, 'm', CR_DURABLE_DRAIN_MESSAGE_MAX);
    big->message[CR_DURABLE_DRAIN_MESSAGE_MAX] = '\0';
    cr_buf_free(&buf);
    encode(in, &buf);
    assert_true(buf.len - CR_DURABLE_FRAME_HEADER <= CR_DURABLE_RECORD_MAX);
    assert_int_equal(decode_frame(&buf, out), CR_OK);
    assert_int_equal(out->drain.segment_count + out->drain.target_count, 128);
    cr_buf_free(&buf);
    cr_buf_free(&again);
    free(in);
    free(out);
}

/* Decoding body with one byte changed: refused, naming `what`. */
static void refused(const uint8_t *body, size_t len, size_t at, uint8_t value,
                    const char *what) {
    uint8_t copy[512];
    assert_true(len <= sizeof(copy));
    memcpy(copy, body, len);
    if (at < len) copy[at] = value;
    struct cr_durable_record *out = calloc(1, sizeof(*out));
    assert_non_null(out);
    char err[200] = "";
    assert_int_equal(cr_durable_decode(copy, (uint32_t)len, out, err, sizeof(err)),
                     CR_ERR_PROTOCOL);
    if (strstr(err, what) == NULL) fail_msg("expected \"%s\" in \"%s\"", what, err);
    free(out);
}

static void test_refusals_fields(void **unused) {
    (void)unused;
    struct cr_durable_record *in = make_job(5, 9, 2, 3);
    struct cr_buf buf;
    encode(in, &buf);
    const uint8_t *body = (const uint8_t *)buf.data + CR_DURABLE_FRAME_HEADER;
    size_t n = buf.len - CR_DURABLE_FRAME_HEADER;
    struct cr_durable_record *out = calloc(1, sizeof(*out));
    assert_non_null(out);
    char err[200];
    /* every truncation */
    for (size_t cut = 0; cut < n; cut++)
        assert_int_equal(cr_durable_decode(body, (uint32_t)cut, out, err, sizeof(err)),
                         CR_ERR_PROTOCOL);
    assert_int_equal(cr_durable_decode(body, (uint32_t)n, out, err, sizeof(err)), CR_OK);
    refused(body, n, AT_STATUS, 6, "status");
    refused(body, n, AT_CONCURRENCY, 0, "concurrency");
    refused(body, n, AT_CONCURRENCY + 1, 0x04, "concurrency"); /* 1032 */
    refused(body, n, AT_SEGMENT_COUNT, 0, "count");
    refused(body, n, AT_SEGMENT_COUNT, 65, "count");
    refused(body, n, AT_TARGET_COUNT, 65, "count");
    refused(body, n, AT_SEG_B + 6, 'a', "named twice");          /* seg-a, seg-a */
    refused(body, n, AT_TARGET + 6, 'b', "one of the segments"); /* target seg-b */
    refused(body, n, AT_SEG_A + 3, 0, "segment name");           /* a NUL inside */
    refused(body, n, AT_TARGET, 0, "target name");               /* empty */
    refused(body, n, AT_MESSAGE, 201, "message");                /* longer than allowed */
    refused(body, n, AT_MESSAGE, 0, "left over");                /* shorter than its bytes */
    uint8_t longer[512];
    memcpy(longer, body, n);
    longer[n] = 0;
    refused(longer, n + 1, n + 1, 0, "left over");
    cr_buf_free(&buf);
    free(in);
    free(out);
}

static void test_replay_keeps_newest(void **unused) {
    (void)unused;
    struct cr_durable_image *img = cr_durable_image_create();
    assert_non_null(img);
    char err[200];
    uint64_t lsn = 1;
    /* job 1 created, then progressing; job 2 finished */
    struct cr_durable_record *r = make_job(lsn++, 1, 0, 0);
    assert_int_equal(cr_durable_image_apply(img, r, err, sizeof(err)), CR_OK);
    free(r);
    r = make_job(lsn++, 2, 3, 5);
    assert_int_equal(cr_durable_image_apply(img, r, err, sizeof(err)), CR_OK);
    free(r);
    r = make_job(lsn++, 1, 2, 77);
    assert_int_equal(cr_durable_image_apply(img, r, err, sizeof(err)), CR_OK);
    free(r);
    struct cr_durable_drain_jobs jobs;
    cr_durable_image_take_drain(img, &jobs);
    assert_int_equal(jobs.count, 2);
    assert_int_equal(jobs.at[0]->id_first, 1);
    assert_int_equal(jobs.at[0]->status, 2);
    assert_int_equal(jobs.at[0]->succeeded, 77);
    assert_int_equal(jobs.at[1]->id_first, 2);
    cr_durable_drain_jobs_free(&jobs);
    /* 64 kept: the oldest finished one goes first, then the oldest */
    for (uint64_t id = 100; id < 100 + CR_DURABLE_DRAIN_JOBS_MAX; id++) {
        r = make_job(lsn++, id, id == 110 ? 4 : 2, 0);
        assert_int_equal(cr_durable_image_apply(img, r, err, sizeof(err)), CR_OK);
        free(r);
    }
    r = make_job(lsn++, 500, 2, 0);
    assert_int_equal(cr_durable_image_apply(img, r, err, sizeof(err)), CR_OK);
    r->drain.id_first = 501, r->drain.id_second = ~501ull;
    assert_int_equal(cr_durable_image_apply(img, r, err, sizeof(err)), CR_OK);
    free(r);
    cr_durable_image_take_drain(img, &jobs);
    assert_int_equal(jobs.count, CR_DURABLE_DRAIN_JOBS_MAX);
    assert_int_equal(jobs.at[0]->id_first, 101); /* 110 (finished), then 100 */
    for (uint32_t i = 0; i < jobs.count; i++) assert_int_not_equal(jobs.at[i]->id_first, 110);
    assert_int_equal(jobs.at[jobs.count - 1]->id_first, 501);
    cr_durable_drain_jobs_free(&jobs);
    cr_durable_image_destroy(img);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_refusals_fields),
        cmocka_unit_test(test_replay_keeps_newest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
