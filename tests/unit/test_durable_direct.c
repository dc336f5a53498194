/* Recovery straight into the store (src/durable/recover.c, the bulk restore
 * of src/core/store_restore_bulk.c): state directories written record by
 * record, with what a fuzzy snapshot can hold (an object removed during the
 * cut beside a later one on its range, a key twice) and what damaged files
 * hold (overlapping ranges no log fixes), each recovered and compared with
 * the store the exact state gives, object by object. */
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
#include "core/store_restore.h"
#include "crescent/error.h"
#include "durable/durable.h"
#include "durable/files.h"
#include "durable/record.h"
#include "durable/record_drain.h"

#define SEG_BYTES (1u << 20)
#define OBJ_BYTES 4096u

static const struct cr_uuid OWNER = {{0xD1, 0x2E}};
static const struct cr_uuid WRITER = {{0x77}};

/* A state directory being written: the snapshot's records, then the log's. */
struct dir {
    char path[64];
    struct cr_buf snap;
    struct cr_buf log;
    uint64_t snap_lsn;
    uint64_t snap_records;
    uint64_t lsn; /* the log's last */
    struct cr_durable_record r;
};

static void dir_open(struct dir *d, uint64_t snap_lsn) {
    memset(d, 0, sizeof(*d));
    snprintf(d->path, sizeof(d->path), "/tmp/crescent-direct-XXXXXX");
    assert_non_null(mkdtemp(d->path));
    cr_buf_init(&d->snap);
    cr_buf_init(&d->log);
    d->snap_lsn = snap_lsn;
    d->lsn = snap_lsn;
    uint8_t header[CR_DURABLE_SNAPSHOT_HEADER];
    cr_durable_snapshot_header(snap_lsn, header);
    cr_buf_append(&d->snap, header, sizeof(header));
    uint8_t log_header[CR_DURABLE_LOG_HEADER];
    cr_durable_log_header(log_header);
    cr_buf_append(&d->log, log_header, sizeof(log_header));
}

/* A fresh record of type t: into the snapshot (in_log false) or the log. */
static struct cr_durable_record *rec(struct dir *d, enum cr_durable_type t) {
    memset(&d->r, 0, offsetof(struct cr_durable_record, key));
    d->r.type = t;
    return &d->r;
}

static void emit(struct dir *d, bool in_log) {
    d->r.lsn = in_log ? ++d->lsn : d->snap_lsn;
    if (!in_log) d->snap_records++;
    assert_int_equal(cr_durable_encode(&d->r, in_log ? &d->log : &d->snap), CR_OK);
}

static void seg(struct dir *d, bool in_log, const char *name, uint32_t n) {
    struct cr_durable_record *r = rec(d, CR_DURABLE_SEGMENT_MOUNT);
    snprintf(r->name, sizeof(r->name), "%s", name);
    snprintf(r->endpoint, sizeof(r->endpoint), "127.0.0.1:%u", 17000 + n);
    strcpy(r->protocol, "tcp");
    r->owner = OWNER;
    r->base = (uint64_t)(n + 1) << 40;
    r->size = SEG_BYTES;
    emit(d, in_log);
}

/* An object of OBJ_BYTES with replicas on (segment, offset) pairs. */
static void put(struct dir *d, bool in_log, const char *key, uint64_t checksum, uint32_t n,
                const char *seg1, uint64_t off1, const char *seg2, uint64_t off2) {
    struct cr_durable_record *r = rec(d, CR_DURABLE_OBJECT_PUT);
    strcpy(r->tenant, "default");
    r->key_len = (uint32_t)snprintf(r->key, sizeof(r->key), "%s", key);
    r->size = OBJ_BYTES;
    r->flags = CR_DURABLE_OBJ_CHECKSUM;
    r->checksum = checksum;
    r->owner = WRITER;
    r->replica_count = n;
    const char *segs[2] = {seg1, seg2};
    uint64_t offs[2] = {off1, off2};
    for (uint32_t i = 0; i < n; i++) {
        snprintf(r->replicas[i].segment, sizeof(r->replicas[i].segment), "%s", segs[i]);
        r->replicas[i].offset = offs[i];
        r->replicas[i].size = OBJ_BYTES;
    }
    emit(d, in_log);
}

static void removal(struct dir *d, const char *key) {
    struct cr_durable_record *r = rec(d, CR_DURABLE_OBJECT_REMOVE);
    strcpy(r->tenant, "default");
    r->key_len = (uint32_t)snprintf(r->key, sizeof(r->key), "%s", key);
    emit(d, true);
}

static void unmount(struct dir *d, const char *name) {
    struct cr_durable_record *r = rec(d, CR_DURABLE_SEGMENT_UNMOUNT);
    snprintf(r->name, sizeof(r->name), "%s", name);
    emit(d, true);
}

static void write_file(const char *path, const struct cr_buf *buf) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, buf->data, buf->len), (ssize_t)buf->len);
    assert_int_equal(close(fd), 0);
}

/* Ends the snapshot and writes both files. */
static void dir_write(struct dir *d) {
    struct cr_durable_record *r = rec(d, CR_DURABLE_SNAPSHOT_END);
    r->lsn = d->snap_lsn;
    r->record_count = d->snap_records;
    assert_int_equal(cr_durable_encode(r, &d->snap), CR_OK);
    char path[CR_DURABLE_PATH_MAX];
    cr_durable_snapshot_path(d->path, d->snap_lsn, false, path, sizeof(path));
    write_file(path, &d->snap);
    if (d->lsn > d->snap_lsn) {
        snprintf(path, sizeof(path), "%s/store-%016" PRIx64 ".log", d->path, d->snap_lsn + 1);
        write_file(path, &d->log);
    }
}

static void dir_close(struct dir *d) {
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", d->path);
    assert_int_equal(system(cmd), 0);
    cr_buf_free(&d->snap);
    cr_buf_free(&d->log);
}

static cr_store *make_store(void) {
    cr_store_config cfg;
    cr_store_config_default(&cfg);
    cfg.max_objects = 1000;
    cfg.max_segments = 16;
    cfg.max_allocations_per_segment = 1000;
    cr_store *s = NULL;
    assert_int_equal(cr_store_create(&cfg, NULL, &s), CR_OK);
    return s;
}

/* Writes d and recovers it into a new store; CR_OK expected. */
static cr_store *recover(struct dir *d, struct cr_durable_recovery *out) {
    dir_write(d);
    cr_store *s = make_store();
    char err[600];
    int rc = cr_durable_recover(d->path, s, 1000, out, err, sizeof(err));
    if (rc != CR_OK) fprintf(stderr, "recover: %s\n", err);
    assert_int_equal(rc, CR_OK);
    assert_false(cr_store_restore_bulk(s));
    cr_durable_drain_jobs_free(&out->drain_jobs);
    return s;
}

/* The object in both or in neither; the same tenant, key, size, checksum,
 * owner and replicas (segment, address, size) when in both. */
static bool same_object(cr_store *a, cr_store *b, const char *key) {
    struct cr_store_object_view va, vb;
    uint32_t n = (uint32_t)strlen(key);
    int ra = cr_store_object_find(a, "default", key, n, 1000, &va);
    int rb = cr_store_object_find(b, "default", key, n, 1000, &vb);
    assert_int_equal(ra, rb);
    if (ra != CR_OK) return false;
    assert_string_equal(va.tenant, vb.tenant);
    assert_true(va.complete && vb.complete);
    assert_int_equal(va.size_bytes, vb.size_bytes);
    assert_int_equal(va.replicas.has_checksum, vb.replicas.has_checksum);
    assert_int_equal(va.replicas.checksum, vb.replicas.checksum);
    assert_memory_equal(va.owner.b, vb.owner.b, 16);
    assert_int_equal(va.replicas.count, vb.replicas.count);
    for (uint32_t i = 0; i < va.replicas.count; i++) {
        bool matched = false;
        for (uint32_t j = 0; j < vb.replicas.count; j++)
            matched = matched ||
                      (strcmp(va.replicas.replicas[i].segment_name,
                              vb.replicas.replicas[j].segment_name) == 0 &&
                       va.replicas.replicas[i].buffer == vb.replicas.replicas[j].buffer &&
                       va.replicas.replicas[i].size == vb.replicas.replicas[j].size);
        assert_true(matched);
    }
    return true;
}

static void assert_same_counts(cr_store *a, cr_store *b) {
    struct cr_store_stats sa, sb;
    cr_store_get_stats(a, 1000, &sa);
    cr_store_get_stats(b, 1000, &sb);
    assert_int_equal(sa.object_count, sb.object_count);
    assert_int_equal(sa.replica_count, sb.replica_count);
    assert_int_equal(sa.used_bytes, sb.used_bytes);
    assert_int_equal(sa.segment_count, sb.segment_count);
}

/* Fills every free byte of the store's segments with new objects: each
 * lands outside every restored replica (the allocator knows them all), and
 * none of the restored objects is evicted to make room. */
static void assert_new_puts_fit_around(cr_store *s) {
    struct { uint64_t at, size; } held[64];
    uint32_t n = 0, walk = 0;
    struct cr_store_object_view views[16];
    size_t got;
    while ((got = cr_store_list_objects(s, NULL, NULL, 0, &walk, 16, views)) > 0)
        for (size_t i = 0; i < got; i++)
            for (uint32_t r = 0; r < views[i].replicas.count; r++) {
                assert_true(n < 64);
                held[n].at = views[i].replicas.replicas[r].buffer;
                held[n++].size = views[i].replicas.replicas[r].size;
            }
    struct cr_store_stats st;
    cr_store_get_stats(s, 1000, &st);
    uint64_t before = st.object_count, room = st.capacity_bytes - st.used_bytes, puts = 0;
    for (; puts * OBJ_BYTES < room; puts++) {
        char key[32];
        snprintf(key, sizeof(key), "fresh-%" PRIu64, puts);
        struct cr_store_put_params p = {.tenant = "default", .key = key,
                                        .key_len = (uint32_t)strlen(key),
                                        .value_length = OBJ_BYTES, .replica_num = 1};
        struct cr_store_replica_list list;
        assert_int_equal(cr_store_put_start(s, &WRITER, &p, 1000, &list), CR_OK);
        uint64_t at = list.replicas[0].buffer;
        for (uint32_t h = 0; h < n; h++)
            assert_true(at + OBJ_BYTES <= held[h].at || held[h].at + held[h].size <= at);
    }
    cr_store_get_stats(s, 1000, &st);
    assert_int_equal(st.object_count, before + puts);
    assert_int_equal(st.used_bytes, st.capacity_bytes);
}

/* A fuzzy snapshot: x was removed during the cut and y placed on its range
 * later; the log's REMOVE of x fixes it.  The store equals the one an
 * exact snapshot gives. */
static void test_fuzzy_snapshot_fixed_by_log(void **unused) {
    (void)unused;
    struct dir fuzzy, exact;
    dir_open(&fuzzy, 10);
    seg(&fuzzy, false, "seg-a", 0);
    seg(&fuzzy, false, "seg-b", 1);
    put(&fuzzy, false, "x", 1, 2, "seg-a", 0, "seg-b", 8192);
    put(&fuzzy, false, "z", 3, 1, "seg-a", 8192, NULL, 0);
    put(&fuzzy, false, "y", 2, 2, "seg-a", 0, "seg-b", 8192); /* x's ranges, later */
    removal(&fuzzy, "x");
    dir_open(&exact, 11);
    seg(&exact, false, "seg-a", 0);
    seg(&exact, false, "seg-b", 1);
    put(&exact, false, "z", 3, 1, "seg-a", 8192, NULL, 0);
    put(&exact, false, "y", 2, 2, "seg-a", 0, "seg-b", 8192);

    struct cr_durable_recovery rf, re;
    cr_store *a = recover(&fuzzy, &rf);
    cr_store *b = recover(&exact, &re);
    assert_int_equal(rf.objects, 2);
    assert_int_equal(rf.objects_dropped, 0);
    assert_int_equal(rf.replicas_dropped, 0);
    assert_int_equal(rf.segments, 2);
    assert_false(same_object(a, b, "x"));
    assert_true(same_object(a, b, "y"));
    assert_true(same_object(a, b, "z"));
    assert_same_counts(a, b);
    struct cr_store_stats st;
    cr_store_get_stats(a, 1000, &st);
    assert_int_equal(st.used_bytes, 3 * OBJ_BYTES);
    assert_new_puts_fit_around(a);
    cr_store_destroy(a);
    cr_store_destroy(b);
    dir_close(&fuzzy);
    dir_close(&exact);
}

/* The same key twice in a snapshot: the later stays; with a log PUT after
 * it, the log's state. */
static void test_key_twice(void **unused) {
    (void)unused;
    struct dir twice, fixed, exact;
    dir_open(&twice, 10);
    seg(&twice, false, "seg-a", 0);
    put(&twice, false, "k", 1, 1, "seg-a", 0, NULL, 0);
    put(&twice, false, "k", 2, 1, "seg-a", 4096, NULL, 0);
    dir_open(&fixed, 10);
    seg(&fixed, false, "seg-a", 0);
    put(&fixed, false, "k", 1, 1, "seg-a", 0, NULL, 0);
    put(&fixed, false, "k", 2, 1, "seg-a", 4096, NULL, 0);
    put(&fixed, true, "k", 3, 1, "seg-a", 0, NULL, 0);
    dir_open(&exact, 10);
    seg(&exact, false, "seg-a", 0);
    put(&exact, false, "k", 3, 1, "seg-a", 0, NULL, 0);

    struct cr_durable_recovery rt, rf, re;
    cr_store *t = recover(&twice, &rt);
    struct cr_store_object_view v;
    assert_int_equal(cr_store_object_find(t, "default", "k", 1, 1000, &v), CR_OK);
    assert_int_equal(v.replicas.checksum, 2);
    assert_int_equal(v.replicas.replicas[0].buffer, (1ull << 40) + 4096);
    assert_int_equal(rt.objects, 1);
    assert_int_equal(rt.replicas_dropped, 0);
    cr_store *f = recover(&fixed, &rf);
    cr_store *e = recover(&exact, &re);
    assert_true(same_object(f, e, "k"));
    assert_same_counts(f, e);
    assert_new_puts_fit_around(t);
    assert_new_puts_fit_around(f);
    cr_store_destroy(t);
    cr_store_destroy(f);
    cr_store_destroy(e);
    dir_close(&twice);
    dir_close(&fixed);
    dir_close(&exact);
}

/* Damaged files: ranges that overlap and no record after them.  One
 * replica of each overlap is dropped and counted (the object restored
 * first keeps its range), an object left without one is dropped. */
static void test_overlap_without_log(void **unused) {
    (void)unused;
    struct dir d;
    dir_open(&d, 10);
    seg(&d, false, "seg-a", 0);
    seg(&d, false, "seg-b", 1);
    /* q first: each segment's offsets come out of order (the finish sorts
     * them, on more than one 16-bit digit). */
    put(&d, false, "q", 3, 2, "seg-a", 65536, "seg-b", 2048);   /* half of w's seg-b */
    put(&d, false, "w", 1, 2, "seg-a", 0, "seg-b", 0);
    put(&d, false, "v", 2, 1, "seg-a", 0, NULL, 0);            /* all of w's range */
    put(&d, false, "u", 4, 1, "seg-a", SEG_BYTES - 2048, NULL, 0); /* past the end */
    struct cr_durable_recovery r;
    cr_store *s = recover(&d, &r);
    assert_int_equal(r.objects, 2);
    assert_int_equal(r.objects_dropped, 2);  /* v, u */
    assert_int_equal(r.replicas_dropped, 3); /* v's, q's on seg-b, u's */
    struct cr_store_object_view v;
    assert_int_equal(cr_store_object_find(s, "default", "w", 1, 1000, &v), CR_OK);
    assert_int_equal(v.replicas.count, 2);
    assert_int_equal(cr_store_object_find(s, "default", "q", 1, 1000, &v), CR_OK);
    assert_int_equal(v.replicas.count, 1);
    assert_string_equal(v.replicas.replicas[0].segment_name, "seg-a");
    assert_int_not_equal(cr_store_object_find(s, "default", "v", 1, 1000, &v), CR_OK);
    assert_int_not_equal(cr_store_object_find(s, "default", "u", 1, 1000, &v), CR_OK);
    struct cr_store_stats st;
    cr_store_get_stats(s, 1000, &st);
    assert_int_equal(st.replica_count, 3);
    assert_int_equal(st.used_bytes, 3 * OBJ_BYTES);
    assert_new_puts_fit_around(s);
    cr_store_destroy(s);
    dir_close(&d);
}

/* Replicas placed unclaimed and then released by the log (a remove, a
 * replacement, an unmount) free nothing they never held: the store equals
 * the exact one and its allocator knows only what is left. */
static void test_unclaimed_released_by_log(void **unused) {
    (void)unused;
    struct dir d, exact;
    dir_open(&d, 10);
    seg(&d, false, "seg-a", 0);
    seg(&d, false, "seg-b", 1);
    put(&d, false, "x", 1, 1, "seg-a", 0, NULL, 0);
    put(&d, false, "y", 2, 2, "seg-b", 0, "seg-a", 12288);
    put(&d, false, "z", 3, 1, "seg-a", 4096, NULL, 0);
    removal(&d, "x");
    put(&d, true, "z", 4, 1, "seg-a", 0, NULL, 0); /* moved onto x's old range */
    unmount(&d, "seg-b");                          /* takes y's replica there */
    seg(&d, true, "seg-b", 1);                     /* and back, empty */
    put(&d, true, "n", 5, 1, "seg-b", 0, NULL, 0); /* y's old range */
    dir_open(&exact, 20);
    seg(&exact, false, "seg-a", 0);
    seg(&exact, false, "seg-b", 1);
    put(&exact, false, "y", 2, 1, "seg-a", 12288, NULL, 0); /* its seg-a replica stays */
    put(&exact, false, "z", 4, 1, "seg-a", 0, NULL, 0);
    put(&exact, false, "n", 5, 1, "seg-b", 0, NULL, 0);
    struct cr_durable_recovery r, re;
    cr_store *s = recover(&d, &r);
    cr_store *e = recover(&exact, &re);
    assert_int_equal(r.objects, 3);
    assert_int_equal(r.objects_dropped, 0);
    assert_int_equal(r.replicas_dropped, 0);
    assert_true(same_object(s, e, "y"));
    for (const char *const *k = (const char *const[]){"x", "y", "z", "n", NULL}; *k; k++)
        (void)same_object(s, e, *k);
    assert_true(same_object(s, e, "z"));
    assert_same_counts(s, e);
    assert_new_puts_fit_around(s);
    cr_store_destroy(s);
    cr_store_destroy(e);
    dir_close(&d);
    dir_close(&exact);
}

/* A snapshot corrupt after some objects: recovery fails naming the file
 * and leaves no object behind (never half a store). */
static void test_corrupt_snapshot_leaves_nothing(void **unused) {
    (void)unused;
    struct dir d;
    dir_open(&d, 10);
    seg(&d, false, "seg-a", 0);
    for (uint32_t i = 0; i < 40; i++) {
        char key[16];
        snprintf(key, sizeof(key), "o-%u", i);
        put(&d, false, key, i, 1, "seg-a", (uint64_t)i * OBJ_BYTES, NULL, 0);
    }
    struct cr_durable_record *r = rec(&d, CR_DURABLE_SNAPSHOT_END);
    r->lsn = d.snap_lsn;
    r->record_count = d.snap_records;
    assert_int_equal(cr_durable_encode(r, &d.snap), CR_OK);
    ((uint8_t *)d.snap.data)[d.snap.len * 3 / 4] ^= 0x5a; /* a record well past the first */
    char path[CR_DURABLE_PATH_MAX];
    cr_durable_snapshot_path(d.path, d.snap_lsn, false, path, sizeof(path));
    write_file(path, &d.snap);
    cr_store *s = make_store();
    struct cr_durable_recovery out;
    char err[600];
    assert_int_not_equal(cr_durable_recover(d.path, s, 1000, &out, err, sizeof(err)), CR_OK);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "refused"));
    assert_false(cr_store_restore_bulk(s));
    struct cr_store_stats st;
    cr_store_get_stats(s, 1000, &st);
    assert_int_equal(st.object_count, 0);
    assert_int_equal(st.used_bytes, 0);
    cr_store_destroy(s);
    dir_close(&d);
}

static void job(struct dir *d, bool in_log, uint64_t id, uint8_t status, uint64_t succeeded) {
    struct cr_durable_record *r = rec(d, CR_DURABLE_DRAIN_JOB);
    memset(&r->drain, 0, offsetof(struct cr_durable_drain, names));
    cr_durable_drain_clear(&r->drain);
    r->drain.message[0] = '\0';
    r->drain.id_first = id;
    r->drain.status = status;
    r->drain.max_concurrency = 4;
    r->drain.succeeded = succeeded;
    assert_true(cr_durable_drain_add(&r->drain, "seg-a", false));
    emit(d, in_log);
}

/* Drain jobs, in the snapshot and in the log after it, come back in the
 * recovery's result (the newest record of each job), as with the image. */
static void test_drain_jobs_kept(void **unused) {
    (void)unused;
    struct dir d;
    dir_open(&d, 10);
    seg(&d, false, "seg-a", 0);
    job(&d, false, 1, 0, 0);
    job(&d, false, 2, 3, 5);
    put(&d, false, "x", 1, 1, "seg-a", 0, NULL, 0);
    job(&d, true, 1, 2, 77);
    dir_write(&d);
    cr_store *s = make_store();
    struct cr_durable_recovery out;
    char err[600];
    assert_int_equal(cr_durable_recover(d.path, s, 1000, &out, err, sizeof(err)), CR_OK);
    assert_int_equal(out.drain_jobs.count, 2);
    assert_int_equal(out.drain_jobs.at[0]->id_first, 1);
    assert_int_equal(out.drain_jobs.at[0]->status, 2);
    assert_int_equal(out.drain_jobs.at[0]->succeeded, 77);
    assert_int_equal(out.drain_jobs.at[1]->id_first, 2);
    assert_int_equal(out.drain_jobs.at[1]->status, 3);
    assert_int_equal(out.objects, 1);
    cr_durable_drain_jobs_free(&out.drain_jobs);
    cr_store_destroy(s);
    dir_close(&d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fuzzy_snapshot_fixed_by_log),
        cmocka_unit_test(test_key_twice),
        cmocka_unit_test(test_overlap_without_log),
        cmocka_unit_test(test_unclaimed_released_by_log),
        cmocka_unit_test(test_corrupt_snapshot_leaves_nothing),
        cmocka_unit_test(test_drain_jobs_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
