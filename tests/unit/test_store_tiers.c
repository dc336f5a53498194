/* Replica media on the store core (src/core/store_tiers.c) and in the
 * durable records: disk and local_disk replicas are listed, published with
 * the seed's [type, location] pairs, survive memory eviction, go with their
 * segment or file, round-trip through the log format, and leave a
 * memory-only object's record byte for byte as before. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/store.h"
#include "core/store_restore.h"
#include "crescent/error.h"
#include "durable/record.h"
#include "store_tier_fixture.h"

static const struct cr_uuid CLIENT_A = {{1}};
static const struct cr_uuid SERVER_B = {{2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9}};

static cr_store *make_store(struct recorder *rec) {
    cr_store *s = store_with_recorder(rec);
    mount_segment(s, &CLIENT_A, "seg-a", 1ull << 32, 1 << 20, "10.0.0.1:7000");
    mount_segment(s, &SERVER_B, "seg-b", 2ull << 32, 1 << 20, "10.0.0.2:7000");
    return s;
}

static struct cr_store_key key_of(const char *key) {
    struct cr_store_key k;
    cr_store_key_make(NULL, key, (uint32_t)strlen(key), &k);
    return k;
}

/* Puts `key` (one replica on seg-a) with checksum 0x77. */
static void put(cr_store *s, const char *key) { put_on(s, &CLIENT_A, key, "seg-a", true); }

static void test_medium_names(void **state) {
    (void)state;
    assert_string_equal(cr_replica_medium_name(CR_MEDIUM_MEMORY), "memory");
    assert_string_equal(cr_replica_medium_name(CR_MEDIUM_DISK), "disk");
    assert_string_equal(cr_replica_medium_name(CR_MEDIUM_LOCAL_DISK), "local_disk");
    assert_string_equal(cr_replica_medium_name((enum cr_replica_medium)3), "?");
    enum cr_replica_medium m;
    assert_int_equal(cr_replica_medium_parse("local_disk", 10, &m), CR_OK);
    assert_int_equal(m, CR_MEDIUM_LOCAL_DISK);
    assert_int_equal(cr_replica_medium_parse("disk", 4, &m), CR_OK);
    assert_int_equal(m, CR_MEDIUM_DISK);
    assert_int_equal(cr_replica_medium_parse("dis", 3, &m), CR_ERR_INVALID_PARAMS);
}

static void test_disk_replica_listed_and_published(void **state) {
    (void)state;
    struct recorder rec = {0};
    cr_store *s = make_store(&rec);
    put(s, "k1");
    assert_string_equal(rec.pairs, "memory=10.0.0.1:7000");
    struct cr_store_key k = key_of("k1");
    assert_int_equal(cr_store_add_disk_replica(s, &k, "/fs/c/k1.obj", OBJ, 0x77, 2), CR_OK);
    assert_int_equal(rec.kind, CR_STORE_CHANGE_UPDATE);
    assert_string_equal(rec.pairs, "memory=10.0.0.1:7000;disk=/fs/c/k1.obj");
    struct cr_store_object_view v;
    view(s, "k1", &v);
    assert_int_equal(v.replicas.count, 2);
    const struct cr_store_replica_desc *d = &v.replicas.replicas[1];
    assert_int_equal(d->medium, CR_MEDIUM_DISK);
    assert_string_equal(d->file_path, "/fs/c/k1.obj");
    assert_string_equal(d->segment_name, "");
    assert_null(d->endpoint);
    assert_int_equal(d->size, OBJ);
    assert_int_equal(d->status, CR_REPLICA_COMPLETE);
    assert_int_equal(v.replicas.replicas[0].medium, CR_MEDIUM_MEMORY);
    struct cr_store_stats st;
    cr_store_get_stats(s, 2, &st);
    assert_int_equal(st.disk_replicas, 1);
    assert_int_equal(st.disk_bytes, OBJ);
    assert_int_equal(st.replica_count, 2);
    /* A second report replaces the first (a rewrite under another name). */
    assert_int_equal(cr_store_add_disk_replica(s, &k, "/fs/c/k1.b", OBJ, 0x77, 3), CR_OK);
    view(s, "k1", &v);
    assert_int_equal(v.replicas.count, 2);
    assert_string_equal(v.replicas.replicas[1].file_path, "/fs/c/k1.b");
    cr_store_get_stats(s, 3, &st);
    assert_int_equal(st.disk_replicas, 1);
    assert_int_equal(st.disk_bytes, OBJ);
    cr_store_destroy(s);
}

static void test_disk_replica_refusals(void **state) {
    (void)state;
    struct recorder rec = {0};
    cr_store *s = make_store(&rec);
    put(s, "k1");
    struct cr_store_key k = key_of("k1"), missing = key_of("nope");
    int events = rec.count;
    assert_int_equal(cr_store_add_disk_replica(s, &missing, "/fs/x", OBJ, 0x77, 2),
                     CR_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(cr_store_add_disk_replica(s, &k, "/fs/x", OBJ + 1, 0x77, 2),
                     CR_ERR_INVALID_PARAMS);
    assert_int_equal(cr_store_add_disk_replica(s, &k, "/fs/x", OBJ, 0x78, 2),
                     CR_ERR_INVALID_PARAMS);
    assert_int_equal(cr_store_add_disk_replica(s, &k, "", OBJ, 0x77, 2), CR_ERR_INVALID_PARAMS);
    char *long_path = malloc(CR_STORE_FILE_PATH_LEN_MAX + 2);
    memset(long_path, 'a', CR_STORE_FILE_PATH_LEN_MAX + 1);
    long_path[CR_STORE_FILE_PATH_LEN_MAX + 1] = '\0';
    assert_int_equal(cr_store_add_disk_replica(s, &k, long_path, OBJ, 0x77, 2),
                     CR_ERR_INVALID_PARAMS);
    free(long_path);
    /* An in-flight put has no disk replica yet. */
    struct cr_store_replica_list l;
    struct cr_store_put_params p = {.key = "k2", .key_len = 2, .value_length = OBJ,
                                    .replica_num = 1};
    assert_int_equal(cr_store_put_start(s, &CLIENT_A, &p, 1, &l), CR_OK);
    struct cr_store_key k2 = key_of("k2");
    assert_int_equal(cr_store_add_disk_replica(s, &k2, "/fs/k2", OBJ, 0, 2),
                     CR_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(rec.count, events); /* nothing published */
    struct cr_store_stats st;
    cr_store_get_stats(s, 2, &st);
    assert_int_equal(st.disk_replicas, 0);
    cr_store_destroy(s);
}

static void test_eviction_keeps_the_disk_replica(void **state) {
    (void)state;
    struct recorder rec = {0};
    cr_store *s = make_store(&rec);
    put(s, "on-disk");
    put(s, "memory-only");
    struct cr_store_key k = key_of("on-disk");
    assert_int_equal(cr_store_add_disk_replica(s, &k, "/fs/on-disk", OBJ, 0x77, 1), CR_OK);
    uint64_t rng = 42;
    /* Leases from the puts have lapsed at t = 1 h. */
    uint64_t now = 3600 * 1000;
    cr_store_evict_pass(s, now, &rng, 1ull << 40, 0);
    struct cr_store_usage u;
    cr_store_usage(s, &u);
    assert_int_equal(u.used_bytes, 0);
    struct cr_store_object_view v;
    assert_int_equal(cr_store_object_find(s, NULL, "memory-only", 11, now, &v),
                     CR_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(cr_store_object_find(s, NULL, "on-disk", 7, now, &v), CR_OK);
    assert_int_equal(v.replicas.count, 1);
    assert_int_equal(v.replicas.replicas[0].medium, CR_MEDIUM_DISK);
    /* A disk-only object frees no memory: a second pass leaves it alone. */
    cr_store_evict_pass(s, now + 1, &rng, 1ull << 40, 0);
    assert_int_equal(cr_store_object_find(s, NULL, "on-disk", 7, now, &v), CR_OK);
    /* GetReplicaList hands out the disk replica. */
    struct cr_store_replica_list l;
    assert_int_equal(cr_store_get_replica_list(s, NULL, "on-disk", 7, now, &l), CR_OK);
    assert_int_equal(l.count, 1);
    assert_string_equal(l.replicas[0].file_path, "/fs/on-disk");
    assert_true(l.has_checksum);
    /* Dropping the file (found corrupt) frees it with a "gone" event. */
    uint32_t dropped = 9;
    assert_int_equal(cr_store_drop_medium(s, &k, CR_MEDIUM_DISK, NULL, &dropped), CR_OK);
    assert_int_equal(dropped, 1);
    assert_int_equal(rec.kind, CR_STORE_CHANGE_UPDATE);
    assert_string_equal(rec.pairs, "");
    assert_int_equal(cr_store_object_find(s, NULL, "on-disk", 7, now, &v),
                     CR_ERR_OBJECT_NOT_FOUND);
    struct cr_store_stats st;
    cr_store_get_stats(s, now, &st);
    assert_int_equal(st.disk_replicas, 0);
    assert_int_equal(st.disk_bytes, 0);
    assert_int_equal(st.replica_count, 0);
    cr_store_destroy(s);
}

static void test_drop_disk_keeps_memory(void **state) {
    (void)state;
    struct recorder rec = {0};
    cr_store *s = make_store(&rec);
    put(s, "k");
    struct cr_store_key k = key_of("k");
    assert_int_equal(cr_store_add_disk_replica(s, &k, "/fs/k", OBJ, 0x77, 1), CR_OK);
    uint32_t dropped = 0;
    assert_int_equal(cr_store_drop_medium(s, &k, CR_MEDIUM_DISK, NULL, &dropped), CR_OK);
    assert_int_equal(dropped, 1);
    assert_string_equal(rec.pairs, "memory=10.0.0.1:7000");
    /* Nothing of that medium left: no change, no event. */
    int events = rec.count;
    assert_int_equal(cr_store_drop_medium(s, &k, CR_MEDIUM_DISK, NULL, &dropped), CR_OK);
    assert_int_equal(dropped, 0);
    assert_int_equal(rec.count, events);
    struct cr_store_key missing = key_of("missing");
    assert_int_equal(cr_store_drop_medium(s, &missing, CR_MEDIUM_DISK, NULL, NULL),
                     CR_ERR_OBJECT_NOT_FOUND);
    cr_store_destroy(s);
}

static void test_local_disk_goes_with_its_segment(void **state) {
    (void)state;
    struct recorder rec = {0};
    cr_store *s = make_store(&rec);
    put(s, "k");
    struct cr_store_key k = key_of("k");
    assert_int_equal(cr_store_add_local_disk_replica(s, &k, "seg-x", 0, 1),
                     CR_ERR_SEGMENT_NOT_FOUND);
    assert_int_equal(cr_store_add_local_disk_replica(s, &k, "seg-b", 12345, 1), CR_OK);
    assert_string_equal(rec.pairs, "memory=10.0.0.1:7000;local_disk=10.0.0.2:7000");
    struct cr_store_object_view v;
    view(s, "k", &v);
    const struct cr_store_replica_desc *d = &v.replicas.replicas[1];
    assert_int_equal(d->medium, CR_MEDIUM_LOCAL_DISK);
    assert_string_equal(d->segment_name, "seg-b");
    assert_string_equal(d->endpoint, "10.0.0.2:7000");
    assert_int_equal(d->buffer, 12345);
    assert_int_equal(d->size, OBJ);
    assert_memory_equal(d->owner.b, SERVER_B.b, 16);
    struct cr_store_usage u;
    cr_store_usage(s, &u);
    assert_int_equal(u.used_bytes, OBJ); /* an SSD replica takes no pool space */
    /* A copy task cannot use the SSD replica's segment as a memory source. */
    uint64_t freed = 0;
    assert_int_equal(cr_store_unmount_segment(s, &SERVER_B, "seg-b", &freed), CR_OK);
    assert_int_equal(freed, 0);
    view(s, "k", &v);
    assert_int_equal(v.replicas.count, 1);
    assert_string_equal(rec.pairs, "memory=10.0.0.1:7000");
    struct cr_store_stats st;
    cr_store_get_stats(s, 2, &st);
    assert_int_equal(st.local_disk_replicas, 0);
    cr_store_destroy(s);
}

static void test_restore_with_media(void **state) {
    (void)state;
    struct recorder rec = {0};
    cr_store *s = make_store(&rec);
    struct cr_store_restore_object o = {
        .key = "r", .key_len = 1, .size = OBJ, .has_checksum = true, .checksum = 5,
        .owner = CLIENT_A, .replica_count = 5};
    o.replicas[0] = (struct cr_store_restore_replica){
        .medium = CR_MEDIUM_MEMORY, .segment = "seg-a", .offset = 0, .size = OBJ};
    o.replicas[1] = (struct cr_store_restore_replica){.medium = CR_MEDIUM_DISK,
                                                      .file_path = "/fs/r"};
    o.replicas[2] = (struct cr_store_restore_replica){.medium = CR_MEDIUM_DISK,
                                                      .file_path = "/fs/r-again"};
    o.replicas[3] = (struct cr_store_restore_replica){
        .medium = CR_MEDIUM_LOCAL_DISK, .segment = "seg-b", .offset = 77};
    o.replicas[4] = (struct cr_store_restore_replica){
        .medium = CR_MEDIUM_LOCAL_DISK, .segment = "seg-gone", .offset = 1};
    uint32_t dropped = 0;
    assert_int_equal(cr_store_restore_object(s, &o, 1, &dropped), CR_OK);
    assert_int_equal(dropped, 2); /* a second disk replica; an unknown segment */
    struct cr_store_object_view v;
    view(s, "r", &v);
    assert_int_equal(v.replicas.count, 3);
    assert_int_equal(v.replicas.replicas[1].medium, CR_MEDIUM_DISK);
    assert_string_equal(v.replicas.replicas[1].file_path, "/fs/r");
    assert_int_equal(v.replicas.replicas[2].buffer, 77);
    /* Only disk: restored, holding no pool space. */
    struct cr_store_restore_object d = {.key = "d", .key_len = 1, .size = OBJ,
                                        .replica_count = 1};
    d.replicas[0] = (struct cr_store_restore_replica){.medium = CR_MEDIUM_DISK,
                                                      .file_path = "/fs/d"};
    assert_int_equal(cr_store_restore_object(s, &d, 1, &dropped), CR_OK);
    struct cr_store_usage u;
    cr_store_usage(s, &u);
    assert_int_equal(u.used_bytes, OBJ);
    struct cr_store_stats st;
    cr_store_get_stats(s, 2, &st);
    assert_int_equal(st.disk_replicas, 2);
    assert_int_equal(st.local_disk_replicas, 1);
    assert_int_equal(rec.count, 0); /* a restore publishes nothing */
    cr_store_destroy(s);
}

/* ---- file-tier eviction and the file hook ---- */

struct hooked {
    int count;
    char last[64];
};

static void on_file(void *ctx, const char *path) {
    struct hooked *h = ctx;
    h->count++;
    snprintf(h->last, sizeof(h->last), "%s", path);
}

static void put_at(cr_store *s, const char *key, uint64_t now) {
    struct cr_store_replica_list l;
    struct cr_store_put_params p = {.key = key, .key_len = (uint32_t)strlen(key),
                                    .value_length = OBJ, .replica_num = 1,
                                    .preferred_segment = "seg-a"};
    assert_int_equal(cr_store_put_start(s, &CLIENT_A, &p, now, &l), CR_OK);
    struct cr_store_key k = key_of(key);
    uint64_t sum = 0x77;
    assert_int_equal(cr_store_put_end_k(s, &CLIENT_A, &k, &sum, now), CR_OK);
}

static void test_disk_eviction_and_file_hook(void **state) {
    (void)state;
    struct recorder rec = {0};
    struct hooked h = {0};
    cr_store *s = make_store(&rec);
    cr_store_set_file_hook(s, on_file, &h);
    char key[16], path[32];
    for (unsigned i = 0; i < 4; i++) { /* k0 is the least recently used */
        snprintf(key, sizeof(key), "k%u", i % 10);
        snprintf(path, sizeof(path), "/fs/k%u", i % 10);
        put_at(s, key, 10 + (uint64_t)i);
        struct cr_store_key k = key_of(key);
        assert_int_equal(cr_store_add_disk_replica(s, &k, path, OBJ, 0x77, 10 + (uint64_t)i),
                         CR_OK);
    }
    /* The same path reported again is not a file to delete; another is. */
    struct cr_store_key k3 = key_of("k3");
    assert_int_equal(cr_store_add_disk_replica(s, &k3, "/fs/k3", OBJ, 0x77, 20), CR_OK);
    assert_int_equal(h.count, 0);
    assert_int_equal(cr_store_add_disk_replica(s, &k3, "/fs/k3b", OBJ, 0x77, 20), CR_OK);
    assert_int_equal(h.count, 1);
    assert_string_equal(h.last, "/fs/k3");
    uint64_t rng = 7, now = 3600 * 1000;
    /* Under the limit: nothing goes. */
    assert_int_equal(cr_store_evict_disk(s, 4 * OBJ, now, &rng), 0);
    assert_int_equal(cr_store_evict_disk(s, 2 * OBJ, now, &rng), 2 * OBJ);
    struct cr_store_stats st;
    cr_store_get_stats(s, now, &st);
    assert_int_equal(st.disk_replicas, 2);
    assert_int_equal(st.disk_bytes, 2 * OBJ);
    assert_int_equal(st.disk_evictions, 2);
    assert_int_equal(h.count, 3);
    /* The two least recently used lost their file and kept memory. */
    struct cr_store_object_view v;
    assert_int_equal(cr_store_object_find(s, NULL, "k0", 2, now, &v), CR_OK);
    assert_int_equal(v.replicas.count, 1);
    assert_int_equal(v.replicas.replicas[0].medium, CR_MEDIUM_MEMORY);
    assert_string_equal(rec.pairs, "memory=10.0.0.1:7000");
    assert_int_equal(cr_store_object_find(s, NULL, "k3", 2, now, &v), CR_OK);
    assert_int_equal(v.replicas.count, 2);
    /* A removal lets go of the file too. */
    assert_int_equal(cr_store_remove(s, NULL, "k3", 2, true, now), CR_OK);
    assert_int_equal(h.count, 4);
    assert_string_equal(h.last, "/fs/k3b");
    cr_store_destroy(s); /* destroying is not deleting: no call */
    assert_int_equal(h.count, 4);
}

/* ---- durable records ---- */

static void object_record(struct cr_durable_record *r) {
    memset(r, 0, sizeof(*r));
    r->type = CR_DURABLE_OBJECT_PUT;
    r->lsn = 9;
    strcpy(r->tenant, "t");
    r->key_len = 3;
    memcpy(r->key, "key", 3);
    r->size = OBJ;
    r->flags = CR_DURABLE_OBJ_CHECKSUM;
    r->checksum = 0x1234;
    r->replica_count = 1;
    strcpy(r->replicas[0].segment, "seg-a");
    r->replicas[0].size = OBJ;
}

static void decode_one(const struct cr_buf *b, struct cr_durable_record *out) {
    const uint8_t *body;
    uint32_t body_len;
    size_t frame_len;
    assert_int_equal(cr_durable_frame_next((const uint8_t *)b->data, b->len, &body, &body_len,
                                           &frame_len),
                     CR_DURABLE_FRAME_OK);
    char err[160];
    assert_int_equal(cr_durable_decode(body, body_len, out, err, sizeof(err)), CR_OK);
}

static void test_record_memory_only_unchanged(void **state) {
    (void)state;
    struct cr_durable_record *r = malloc(sizeof(*r)), *out = malloc(sizeof(*out));
    object_record(r);
    struct cr_buf b;
    cr_buf_init(&b);
    assert_int_equal(cr_durable_encode(r, &b), CR_OK);
    /* Type byte 3 and the earlier layout: header, type, lsn, tenant, key,
     * size, flags, checksum, owner, count, then segment, offset, size. */
    const uint8_t *body = (const uint8_t *)b.data + CR_DURABLE_FRAME_HEADER;
    assert_int_equal(body[0], CR_DURABLE_OBJECT_PUT);
    assert_int_equal(b.len, CR_DURABLE_FRAME_HEADER + 1 + 8 + (2 + 1) + (4 + 3) + 8 + 1 + 8 +
                                16 + 1 + (2 + 5) + 8 + 8);
    decode_one(&b, out);
    assert_int_equal(out->replicas[0].medium, CR_MEDIUM_MEMORY);
    assert_string_equal(out->file_path, "");
    cr_buf_free(&b);
    free(r);
    free(out);
}

static void test_record_tiered_round_trip(void **state) {
    (void)state;
    struct cr_durable_record *r = malloc(sizeof(*r)), *out = malloc(sizeof(*out));
    object_record(r);
    r->replica_count = 3;
    r->replicas[1] = (struct cr_durable_replica){.medium = CR_MEDIUM_DISK, .size = OBJ};
    strcpy(r->file_path, "/fs/cluster/ab/key");
    r->replicas[2] = (struct cr_durable_replica){.medium = CR_MEDIUM_LOCAL_DISK, .offset = 99,
                                                 .size = OBJ};
    strcpy(r->replicas[2].segment, "seg-b");
    struct cr_buf b;
    cr_buf_init(&b);
    assert_int_equal(cr_durable_encode(r, &b), CR_OK);
    assert_int_equal(((const uint8_t *)b.data)[CR_DURABLE_FRAME_HEADER],
                     CR_DURABLE_OBJECT_PUT_TIERED);
    decode_one(&b, out);
    assert_int_equal(out->type, CR_DURABLE_OBJECT_PUT);
    assert_int_equal(out->replica_count, 3);
    assert_int_equal(out->replicas[0].medium, CR_MEDIUM_MEMORY);
    assert_string_equal(out->replicas[0].segment, "seg-a");
    assert_int_equal(out->replicas[1].medium, CR_MEDIUM_DISK);
    assert_string_equal(out->file_path, "/fs/cluster/ab/key");
    assert_int_equal(out->replicas[1].size, OBJ);
    assert_int_equal(out->replicas[2].medium, CR_MEDIUM_LOCAL_DISK);
    assert_string_equal(out->replicas[2].segment, "seg-b");
    assert_int_equal(out->replicas[2].offset, 99);
    /* Every truncation of the body is refused, never half read. */
    const uint8_t *body = (const uint8_t *)b.data + CR_DURABLE_FRAME_HEADER;
    uint32_t body_len = (uint32_t)(b.len - CR_DURABLE_FRAME_HEADER);
    char err[160];
    for (uint32_t n = 0; n < body_len; n++)
        assert_int_equal(cr_durable_decode(body, n, out, err, sizeof(err)), CR_ERR_PROTOCOL);
    /* An unknown medium byte is refused. */
    uint8_t *copy = malloc(body_len);
    memcpy(copy, body, body_len);
    size_t first_medium = 1 + 8 + 3 + 7 + 8 + 1 + 8 + 16 + 1;
    assert_int_equal(copy[first_medium], CR_MEDIUM_MEMORY);
    copy[first_medium] = 3;
    assert_int_equal(cr_durable_decode(copy, body_len, out, err, sizeof(err)), CR_ERR_PROTOCOL);
    free(copy);
    cr_buf_free(&b);
    free(r);
    free(out);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_medium_names),
        cmocka_unit_test(test_disk_replica_listed_and_published),
        cmocka_unit_test(test_disk_replica_refusals),
        cmocka_unit_test(test_eviction_keeps_the_disk_replica),
        cmocka_unit_test(test_drop_disk_keeps_memory),
        cmocka_unit_test(test_local_disk_goes_with_its_segment),
        cmocka_unit_test(test_restore_with_media),
        cmocka_unit_test(test_disk_eviction_and_file_hook),
        cmocka_unit_test(test_record_memory_only_unchanged),
        cmocka_unit_test(test_record_tiered_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
