/* Recovery straight into the store with its slab populated on a second
 * thread (src/durable/recover.c, prefill.c) against the other way of
 * building the same store: the same state directory (a snapshot of OBJECTS
 * objects on a few segments and a log of removes, new keys in the freed
 * places and objects written again in place after it) restored by
 * cr_durable_recover (a bulk restore whose claims wait for the log's end,
 * its thread populating the slab meanwhile), and by the replay image +
 * cr_durable_materialize (the log applied to the image first, each range
 * claimed as the object is restored; no thread, no early reserve).
 * Both stores must hold the same objects, compared one by one, and none
 * of the removed ones. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/buf.h"
#include "core/store.h"
#include "core/store_internal.h"
#include "core/store_restore.h"
#include "crescent/error.h"
#include "durable/durable.h"
#include "durable/files.h"
#include "durable/image.h"
#include "durable/prefill.h"
#include "durable/record.h"

#define SEGMENTS 4u
#define OBJECTS 6000u
#define LOG_RECORDS 900u /* a third removes, a third new keys, a third rewrites */
#define OBJECT_BYTES 4096u

static const struct cr_uuid OWNER = {{0xC1, 0x5E}};

static void make_put(struct cr_durable_record *r, uint64_t lsn, uint64_t i, uint64_t slot) {
    memset(r, 0, offsetof(struct cr_durable_record, key));
    r->type = CR_DURABLE_OBJECT_PUT;
    r->lsn = lsn;
    strcpy(r->tenant, i % 5 == 0 ? "tenant-b" : "default");
    r->key_len = (uint32_t)snprintf(r->key, sizeof(r->key), "object-%06" PRIu64, i);
    r->size = OBJECT_BYTES;
    r->flags = CR_DURABLE_OBJ_CHECKSUM;
    r->checksum = i * 0x9E3779B97F4A7C15ull;
    r->owner = OWNER;
    r->replica_count = 1;
    snprintf(r->replicas[0].segment, sizeof(r->replicas[0].segment), "seg-%u",
             (unsigned)(slot % SEGMENTS));
    r->replicas[0].medium = 0;
    r->replicas[0].offset = slot / SEGMENTS * cr_store_alloc_bytes(OBJECT_BYTES);
    r->replicas[0].size = cr_store_alloc_bytes(OBJECT_BYTES);
}

static void write_file(const char *path, const struct cr_buf *buf) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, buf->data, buf->len), (ssize_t)buf->len);
    assert_int_equal(close(fd), 0);
}

/* The snapshot and the log after it; returns the log's path in log_path. */
static void write_dir(const char *dir, char *snap_path, char *log_path, size_t size) {
    struct cr_durable_record *r = calloc(1, sizeof(*r));
    assert_non_null(r);
    struct cr_buf buf;
    cr_buf_init(&buf);
    uint64_t snap_lsn = OBJECTS + SEGMENTS;
    uint8_t header[CR_DURABLE_SNAPSHOT_HEADER];
    cr_durable_snapshot_header(snap_lsn, header);
    cr_buf_append(&buf, header, sizeof(header));
    for (uint32_t s = 0; s < SEGMENTS; s++) {
        memset(r, 0, offsetof(struct cr_durable_record, key));
        r->type = CR_DURABLE_SEGMENT_MOUNT;
        r->lsn = snap_lsn;
        snprintf(r->name, sizeof(r->name), "seg-%u", s);
        snprintf(r->endpoint, sizeof(r->endpoint), "127.0.0.1:%u", 17000 + s);
        strcpy(r->protocol, "tcp");
        r->owner = OWNER;
        r->base = (uint64_t)(s + 1) << 40;
        r->size = (OBJECTS / SEGMENTS + 2) * cr_store_alloc_bytes(OBJECT_BYTES);
        assert_int_equal(cr_durable_encode(r, &buf), CR_OK);
    }
    for (uint64_t i = 0; i < OBJECTS; i++) {
        make_put(r, snap_lsn, i, i);
        assert_int_equal(cr_durable_encode(r, &buf), CR_OK);
    }
    memset(r, 0, offsetof(struct cr_durable_record, key));
    r->type = CR_DURABLE_SNAPSHOT_END;
    r->lsn = snap_lsn;
    r->record_count = OBJECTS + SEGMENTS;
    assert_int_equal(cr_durable_encode(r, &buf), CR_OK);
    cr_durable_snapshot_path(dir, snap_lsn, false, snap_path, size);
    write_file(snap_path, &buf);

    buf.len = 0;
    uint8_t log_header[CR_DURABLE_LOG_HEADER];
    cr_durable_log_header(log_header);
    cr_buf_append(&buf, log_header, sizeof(log_header));
    uint64_t lsn = snap_lsn;
    for (uint64_t i = 0; i < LOG_RECORDS; i++) {
        uint64_t which = i / 3;
        if (i % 3 == 0) {
            memset(r, 0, offsetof(struct cr_durable_record, key));
            r->type = CR_DURABLE_OBJECT_REMOVE;
            r->lsn = ++lsn;
            strcpy(r->tenant, (which * 7) % 5 == 0 ? "tenant-b" : "default");
            r->key_len = (uint32_t)snprintf(r->key, sizeof(r->key), "object-%06" PRIu64,
                                            which * 7);
        } else if (i % 3 == 1) {
            make_put(r, ++lsn, OBJECTS + which, which * 7); /* a new key in the freed place */
        } else {
            make_put(r, ++lsn, which * 7 + 1, which * 7 + 1); /* written again in place */
            r->checksum ^= 1; /* with other bytes */
        }
        assert_int_equal(cr_durable_encode(r, &buf), CR_OK);
    }
    snprintf(log_path, size, "%s/store-%016" PRIx64 ".log", dir, snap_lsn + 1);
    write_file(log_path, &buf);
    cr_buf_free(&buf);
    free(r);
}

static cr_store *make_store(void) {
    cr_store_config cfg;
    cr_store_config_default(&cfg);
    cfg.max_objects = 3 * OBJECTS;
    cfg.max_segments = 16;
    cfg.max_allocations_per_segment = 4 * OBJECTS;
    cr_store *s = NULL;
    assert_int_equal(cr_store_create(&cfg, NULL, &s), CR_OK);
    return s;
}

/* The path without a second thread: the files into an image, then the
 * image into the store. */
static cr_store *restore_plain(const char *snap_path, const char *log_path, bool populate_after) {
    char err[400];
    uint8_t *data;
    size_t len;
    struct cr_durable_image *img = cr_durable_image_create();
    assert_non_null(img);
    assert_int_equal(cr_durable_read_file(snap_path, &data, &len, err, sizeof(err)), CR_OK);
    uint64_t lsn = 0;
    assert_int_equal(cr_durable_snapshot_load(data, len, cr_durable_image_apply_body, img, &lsn,
                                              err, sizeof(err)),
                     CR_OK);
    free(data);
    assert_int_equal(cr_durable_read_file(log_path, &data, &len, err, sizeof(err)), CR_OK);
    struct cr_durable_log_scan scan;
    assert_int_equal(cr_durable_log_scan(data, len, cr_durable_image_apply, img, &scan, err,
                                         sizeof(err)),
                     CR_OK);
    free(data);
    cr_store *s = make_store();
    struct cr_durable_recovery rec;
    memset(&rec, 0, sizeof(rec));
    assert_int_equal(cr_durable_materialize(img, s, 1000, &rec, err, sizeof(err)), CR_OK);
    cr_durable_image_destroy(img);
    if (populate_after) {
        /* The thread's work over a slab that already holds every object:
         * what it does to a page the restore has written before it. */
        struct cr_durable_prefill p;
        /* Room for one more object is there already: the region reserved
         * is the one the objects are in. */
        assert_true(cr_durable_prefill_start(&p, s, 1));
        cr_durable_prefill_handover(&p);
        cr_durable_prefill_finish(&p);
        assert_true(p.bytes_populated > 0);
    }
    return s;
}

/* Both have the object, the same, or neither has it. */
static bool same_object(cr_store *a, cr_store *b, const char *tenant, const char *key) {
    struct cr_store_object_view va, vb;
    uint32_t n = (uint32_t)strlen(key);
    int ra = cr_store_object_find(a, tenant, key, n, 1000, &va);
    int rb = cr_store_object_find(b, tenant, key, n, 1000, &vb);
    assert_int_equal(ra, rb);
    if (ra != CR_OK) return false;
    assert_int_equal(va.complete, vb.complete);
    assert_int_equal(va.size_bytes, vb.size_bytes);
    assert_int_equal(va.replicas.has_checksum, vb.replicas.has_checksum);
    assert_int_equal(va.replicas.checksum, vb.replicas.checksum);
    assert_memory_equal(va.owner.b, vb.owner.b, 16);
    assert_int_equal(va.replicas.count, vb.replicas.count);
    for (uint32_t i = 0; i < va.replicas.count; i++) {
        assert_string_equal(va.replicas.replicas[i].segment_name,
                            vb.replicas.replicas[i].segment_name);
        assert_int_equal(va.replicas.replicas[i].buffer, vb.replicas.replicas[i].buffer);
        assert_int_equal(va.replicas.replicas[i].size, vb.replicas.replicas[i].size);
    }
    return true;
}

/* Object by object, and the totals; returns the objects found. */
static uint64_t assert_same_stores(cr_store *plain, cr_store *other) {
    uint64_t found = 0;
    for (uint64_t i = 0; i < OBJECTS + LOG_RECORDS; i++) {
        char key[32];
        snprintf(key, sizeof(key), "object-%06" PRIu64, i);
        found += same_object(plain, other, i % 5 == 0 ? "tenant-b" : "default", key);
        assert_false(same_object(plain, other, i % 5 == 0 ? "default" : "tenant-b", key));
    }
    /* Every snapshot object but the removed ones, and the new keys. */
    assert_int_equal(found, OBJECTS - LOG_RECORDS / 3 + LOG_RECORDS / 3);
    struct cr_store_stats sa, sb;
    cr_store_get_stats(plain, 1000, &sa);
    cr_store_get_stats(other, 1000, &sb);
    assert_int_equal(sa.object_count, found);
    assert_int_equal(sb.object_count, found);
    assert_int_equal(sa.used_bytes, sb.used_bytes);
    assert_int_equal(sa.replica_count, sb.replica_count);
    return found;
}

static void test_prefilled_recovery_matches_plain(void **unused) {
    (void)unused;
    char dir[] = "/tmp/crescent-prefill-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char snap_path[CR_DURABLE_PATH_MAX], log_path[CR_DURABLE_PATH_MAX];
    write_dir(dir, snap_path, log_path, sizeof(snap_path));

    cr_store *plain = restore_plain(snap_path, log_path, false);
    cr_store *prefilled = make_store();
    struct cr_durable_recovery rec;
    char err[400];
    assert_int_equal(cr_durable_recover(dir, prefilled, 1000, &rec, err, sizeof(err)), CR_OK);
    /* The second thread ran and populated the slab it reserved. */
    assert_true(rec.prefilled_bytes > 0);
    assert_int_equal(rec.objects, assert_same_stores(plain, prefilled));

    /* The thread writes no byte: run over a slab that holds every object
     * already (the order a restore that outruns it meets), it changes
     * none of them. */
    cr_store *populated_after = restore_plain(snap_path, log_path, true);
    assert_same_stores(plain, populated_after);
    cr_store_destroy(populated_after);

    cr_store_destroy(plain);
    cr_store_destroy(prefilled);
    assert_int_equal(unlink(snap_path), 0);
    assert_int_equal(unlink(log_path), 0);
    assert_int_equal(rmdir(dir), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prefilled_recovery_matches_plain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
