/* The SSD tier's files (src/tier/ssd_store.c) in a fresh temporary
 * directory: durable writes read back byte-exact, LRU eviction within the
 * capacity, promotion counting with an injected clock, and a directory with
 * torn, corrupt and leftover files scanned back to only the good ones. */
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>
#include <cmocka.h>

#include "crescent/error.h"
#include "tier/ssd_header.h"
#include "tier/ssd_store.h"

static char dir[256];

static int make_dir(void **state) {
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/crescent-ssd-XXXXXX");
    return mkdtemp(dir) != NULL ? 0 : -1;
}

static int remove_dir(void **state) {
    (void)state;
    DIR *d = opendir(dir);
    struct dirent *de;
    char path[512];
    while (d != NULL && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.') continue;
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        unlink(path);
    }
    if (d != NULL) closedir(d);
    return rmdir(dir);
}

static cr_ssd_store *open_store(uint64_t capacity, uint32_t hits, struct cr_ssd_scan_report *r) {
    struct cr_ssd_config cfg = {.dir = dir, .capacity = capacity, .promotion_hits = hits,
                                .promotion_window_ms = 1000};
    cr_ssd_store *s = NULL;
    char why[256];
    int rc = cr_ssd_open(&cfg, &s, r, why, sizeof(why));
    if (rc != CR_OK) fail_msg("open: %s", why);
    return s;
}

static uint64_t put(cr_ssd_store *s, const char *key, const void *v, uint64_t len) {
    uint64_t id = 0;
    char why[256];
    int rc = cr_ssd_put(s, "default", (const uint8_t *)key, (uint32_t)strlen(key), v, len,
                        XXH3_64bits(v, len), NULL, NULL, &id, why, sizeof(why));
    if (rc != CR_OK) fail_msg("put %s: %s", key, why);
    return id;
}

static uint64_t file_count(const char *suffix) {
    DIR *d = opendir(dir);
    struct dirent *de;
    uint64_t n = 0;
    while ((de = readdir(d)) != NULL) {
        size_t l = strlen(de->d_name);
        if (l > 4 && strcmp(de->d_name + l - 4, suffix) == 0) n++;
    }
    closedir(d);
    return n;
}

static void test_put_read_back(void **unused) {
    (void)unused;
    cr_ssd_store *s = open_store(1 << 20, 0, NULL);
    uint8_t value[5000], out[5000];
    for (size_t i = 0; i < sizeof(value); i++) value[i] = (uint8_t)(i * 7);
    uint64_t id = put(s, "k/../\x01", value, sizeof(value));
    uint64_t len = 0;
    assert_int_equal(cr_ssd_read(s, id, out, sizeof(out), 0, &len, NULL, NULL, 0), CR_OK);
    assert_int_equal(len, sizeof(value));
    assert_memory_equal(out, value, sizeof(value));
    struct cr_ssd_object o;
    assert_true(cr_ssd_find(s, "default", (const uint8_t *)"k/../\x01", 6, &o));
    assert_int_equal(o.id, id);
    assert_false(cr_ssd_find(s, "other", (const uint8_t *)"k/../\x01", 6, &o));
    /* an empty value is an object too */
    uint64_t empty = put(s, "empty", "", 0);
    assert_int_equal(cr_ssd_read(s, empty, out, 0, 0, &len, NULL, NULL, 0), CR_OK);
    assert_int_equal(len, 0);
    /* a short buffer and an unknown id are refused */
    assert_int_equal(cr_ssd_read(s, id, out, 10, 0, &len, NULL, NULL, 0), CR_ERR_INVALID_PARAMS);
    assert_int_equal(cr_ssd_read(s, 999, out, 10, 0, &len, NULL, NULL, 0), CR_ERR_OBJECT_NOT_FOUND);
    /* a value that does not match its checksum is never written */
    uint64_t bad = 0;
    assert_int_equal(cr_ssd_put(s, "default", (const uint8_t *)"x", 1, value, 10, 1, NULL, NULL,
                                &bad, NULL, 0), CR_ERR_CHECKSUM);
    assert_int_equal(file_count(".crs"), 2);
    assert_int_equal(file_count(".tmp"), 0);
    /* the same key again replaces the old file */
    uint64_t again = put(s, "empty", "x", 1);
    assert_true(again != empty);
    assert_int_equal(file_count(".crs"), 2);
    cr_ssd_close(s);
}

struct evicted { uint64_t ids[16]; int n; };
static void on_evict(void *arg, const struct cr_ssd_object *o) {
    struct evicted *e = arg;
    e->ids[e->n++] = o->id;
}

static void test_lru_eviction_within_capacity(void **unused) {
    (void)unused;
    uint8_t value[1000] = {1};
    uint64_t file = cr_ssd_header_size(2, 7) + sizeof(value);
    cr_ssd_store *s = open_store(3 * file, 0, NULL);
    uint64_t a = put(s, "k1", value, sizeof(value));
    uint64_t b = put(s, "k2", value, sizeof(value));
    uint64_t c = put(s, "k3", value, sizeof(value));
    uint8_t out[1000];
    uint64_t len;
    assert_int_equal(cr_ssd_read(s, a, out, sizeof(out), 0, &len, NULL, NULL, 0), CR_OK); /* a recent */
    struct evicted ev = {0};
    uint64_t d = 0;
    assert_int_equal(cr_ssd_put(s, "default", (const uint8_t *)"k4", 2, value, sizeof(value),
                                XXH3_64bits(value, sizeof(value)), on_evict, &ev, &d, NULL, 0),
                     CR_OK);
    assert_int_equal(ev.n, 1);
    assert_int_equal(ev.ids[0], b); /* the least recently used */
    struct cr_ssd_stats st;
    cr_ssd_get_stats(s, &st);
    assert_true(st.used <= st.capacity);
    assert_int_equal(st.objects, 3);
    assert_int_equal(st.evictions, 1);
    assert_int_equal(file_count(".crs"), 3);
    struct cr_ssd_object o;
    assert_true(cr_ssd_lookup(s, c, &o) && cr_ssd_lookup(s, d, &o) && cr_ssd_lookup(s, a, &o));
    assert_false(cr_ssd_lookup(s, b, &o));
    /* bigger than the whole tier: refused, nothing evicted */
    static uint8_t huge[8192];
    uint64_t h;
    assert_int_equal(cr_ssd_put(s, "default", (const uint8_t *)"h", 1, huge, sizeof(huge),
                                XXH3_64bits(huge, sizeof(huge)), NULL, NULL, &h, NULL, 0),
                     CR_ERR_INVALID_PARAMS);
    cr_ssd_get_stats(s, &st);
    assert_int_equal(st.objects, 3);
    cr_ssd_close(s);
}

static void test_promotion_in_window(void **unused) {
    (void)unused;
    cr_ssd_store *s = open_store(1 << 20, 2, NULL);
    uint64_t id = put(s, "hot", "value", 5);
    char out[5];
    uint64_t len;
    bool promote = true;
    assert_int_equal(cr_ssd_read(s, id, out, 5, 100, &len, &promote, NULL, 0), CR_OK);
    assert_false(promote);
    /* the second read outside the 1000 ms window starts a new count */
    assert_int_equal(cr_ssd_read(s, id, out, 5, 1200, &len, &promote, NULL, 0), CR_OK);
    assert_false(promote);
    assert_int_equal(cr_ssd_read(s, id, out, 5, 1300, &len, &promote, NULL, 0), CR_OK);
    assert_true(promote);
    assert_int_equal(cr_ssd_read(s, id, out, 5, 1400, &len, &promote, NULL, 0), CR_OK);
    assert_false(promote); /* the count restarted */
    struct cr_ssd_stats st;
    cr_ssd_get_stats(s, &st);
    assert_int_equal(st.promotions, 1);
    assert_int_equal(st.reads, 4);
    cr_ssd_close(s);
}

static void path_of(uint64_t id, char *out, size_t cap) {
    snprintf(out, cap, "%s/%016llx.crs", dir, (unsigned long long)id);
}

static void flip_byte(uint64_t id, off_t at) {
    char path[512];
    path_of(id, path, sizeof(path));
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    uint8_t b;
    assert_int_equal(pread(fd, &b, 1, at), 1);
    b ^= 0x40;
    assert_int_equal(pwrite(fd, &b, 1, at), 1);
    close(fd);
}

static void test_corrupt_file_never_served(void **unused) {
    (void)unused;
    cr_ssd_store *s = open_store(1 << 20, 0, NULL);
    uint8_t value[4096] = {9};
    uint64_t id = put(s, "key", value, sizeof(value));
    flip_byte(id, (off_t)cr_ssd_header_size(3, 7) + 4000); /* in the value */
    uint8_t out[4096];
    uint64_t len;
    char why[256];
    assert_int_equal(cr_ssd_read(s, id, out, sizeof(out), 0, &len, NULL, why, sizeof(why)),
                     CR_ERR_CHECKSUM);
    assert_non_null(strstr(why, "checksum"));
    struct cr_ssd_object o;
    assert_false(cr_ssd_lookup(s, id, &o)); /* dropped from the index */
    assert_int_equal(file_count(".crs"), 0); /* and the disk */
    struct cr_ssd_stats st;
    cr_ssd_get_stats(s, &st);
    assert_int_equal(st.corrupt_dropped, 1);
    cr_ssd_close(s);
}

/* cr_ssd_open_value: the file, read-only, its value at header_len; the read
 * counted as cr_ssd_read's (promotion too); a bad header dropped as at a
 * read; the value itself is the reader's to check. */
static void test_open_value_hands_out_the_file(void **unused) {
    (void)unused;
    cr_ssd_store *s = open_store(1 << 20, 2, NULL);
    uint8_t value[4096];
    for (size_t i = 0; i < sizeof(value); i++) value[i] = (uint8_t)(i * 7);
    uint64_t id = put(s, "key", value, sizeof(value));
    int fd = -1;
    uint64_t at = 0, len = 0;
    bool promote = true;
    assert_int_equal(cr_ssd_open_value(s, id, 100, &fd, &at, &len, &promote, NULL, 0), CR_OK);
    assert_true(fd >= 0);
    assert_false(promote);
    assert_int_equal(at, cr_ssd_header_size(3, 7));
    assert_int_equal(len, sizeof(value));
    uint8_t out[4096];
    assert_int_equal(pread(fd, out, sizeof(out), (off_t)at), (ssize_t)sizeof(out));
    assert_memory_equal(out, value, sizeof(value));
    assert_int_equal(write(fd, out, 1), -1); /* read-only */
    close(fd);
    assert_int_equal(cr_ssd_open_value(s, id, 200, &fd, &at, &len, &promote, NULL, 0), CR_OK);
    assert_true(promote); /* the second read in the window */
    close(fd);
    char why[256];
    assert_int_equal(cr_ssd_open_value(s, id + 1, 0, &fd, &at, &len, NULL, why, sizeof(why)),
                     CR_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(fd, -1);
    flip_byte(id, 20); /* in the header */
    assert_int_equal(cr_ssd_open_value(s, id, 300, &fd, &at, &len, NULL, why, sizeof(why)),
                     CR_ERR_CHECKSUM);
    assert_int_equal(fd, -1);
    struct cr_ssd_object o;
    assert_false(cr_ssd_lookup(s, id, &o));
    assert_int_equal(file_count(".crs"), 0);
    struct cr_ssd_stats st;
    cr_ssd_get_stats(s, &st);
    assert_int_equal(st.reads, 2);
    assert_int_equal(st.promotions, 1);
    assert_int_equal(st.corrupt_dropped, 1);
    cr_ssd_close(s);
}

static void test_reopen_keeps_good_drops_bad(void **unused) {
    (void)unused;
    cr_ssd_store *s = open_store(1 << 20, 0, NULL);
    uint8_t value[3000];
    for (size_t i = 0; i < sizeof(value); i++) value[i] = (uint8_t)i;
    uint64_t good = put(s, "good", value, sizeof(value));
    uint64_t torn = put(s, "torn", value, sizeof(value));
    uint64_t flipped = put(s, "flip", value, sizeof(value));
    uint64_t header = put(s, "head", value, sizeof(value));
    cr_ssd_close(s);
    char path[512];
    path_of(torn, path, sizeof(path));
    assert_int_equal(truncate(path, 1000), 0); /* a write cut short */
    flip_byte(flipped, 2999);
    flip_byte(header, 17); /* the key length */
    snprintf(path, sizeof(path), "%s/00000000000000ff.tmp", dir); /* an interrupted write */
    FILE *f = fopen(path, "w");
    fputs("partial", f);
    fclose(f);
    snprintf(path, sizeof(path), "%s/README", dir); /* not ours: left alone */
    f = fopen(path, "w");
    fclose(f);

    struct cr_ssd_scan_report r;
    s = open_store(1 << 20, 0, &r);
    assert_int_equal(r.kept, 1);
    assert_int_equal(r.dropped, 3);
    assert_int_equal(r.tmp_removed, 1);
    struct cr_ssd_object o;
    assert_true(cr_ssd_find(s, "default", (const uint8_t *)"good", 4, &o));
    assert_int_equal(o.id, good);
    uint8_t out[3000];
    uint64_t len;
    assert_int_equal(cr_ssd_read(s, good, out, sizeof(out), 0, &len, NULL, NULL, 0), CR_OK);
    assert_memory_equal(out, value, sizeof(value));
    /* new ids never reuse an old one */
    uint64_t next = put(s, "next", value, 1);
    assert_true(next > header);
    assert_int_equal(file_count(".crs"), 2);
    assert_int_equal(file_count(".tmp"), 0);
    assert_int_equal(access(path, F_OK), 0);
    unlink(path);
    cr_ssd_close(s);
    /* a smaller --ssd-size evicts at open */
    s = open_store(cr_ssd_header_size(4, 7) + 3000, 0, &r);
    assert_int_equal(r.kept, 2);
    assert_int_equal(r.over_capacity, 1);
    struct cr_ssd_stats st;
    cr_ssd_get_stats(s, &st);
    assert_int_equal(st.objects, 1);
    cr_ssd_close(s);
}

/* kill -9 of a writer at a random moment, five times: whatever was being
 * written is never a .crs the next open keeps torn (no file is dropped as
 * bad, only .tmp leftovers removed), and every file kept reads back whole. */
static void test_kill_9_mid_write_leaves_no_torn_file(void **unused) {
    (void)unused;
    static uint8_t value[256 << 10];
    for (size_t i = 0; i < sizeof(value); i++) value[i] = (uint8_t)(i ^ (i >> 8));
    uint64_t hash = XXH3_64bits(value, sizeof(value));
    for (int round = 0; round < 5; round++) {
        pid_t child = fork();
        assert_true(child >= 0);
        if (child == 0) {
            cr_ssd_store *s = open_store(64ull << 20, 0, NULL);
            for (uint32_t n = 0;; n++) {
                char key[32];
                snprintf(key, sizeof(key), "r%d-k%u", round, n);
                uint64_t id;
                cr_ssd_put(s, "default", (const uint8_t *)key, (uint32_t)strlen(key), value,
                           sizeof(value), hash, NULL, NULL, &id, NULL, 0);
            }
        }
        struct timespec nap = {0, (long)(20 + 17 * round) * 1000000L};
        nanosleep(&nap, NULL);
        kill(child, SIGKILL);
        int status;
        assert_int_equal(waitpid(child, &status, 0), child);
        assert_true(WIFSIGNALED(status));
        struct cr_ssd_scan_report r;
        cr_ssd_store *s = open_store(64ull << 20, 0, &r);
        assert_int_equal(r.dropped, 0);
        assert_int_equal(file_count(".tmp"), 0);
        static uint8_t out[sizeof(value)];
        for (uint64_t id = 1; id < 4096; id++) {
            struct cr_ssd_object o;
            if (!cr_ssd_lookup(s, id, &o)) continue;
            uint64_t len;
            assert_int_equal(cr_ssd_read(s, id, out, sizeof(out), 0, &len, NULL, NULL, 0), CR_OK);
            assert_memory_equal(out, value, sizeof(value));
        }
        cr_ssd_close(s);
    }
}

static void test_bad_dir_refused(void **unused) {
    (void)unused;
    struct cr_ssd_config cfg = {.dir = "/proc/crescent-no-such/ssd", .capacity = 1};
    cr_ssd_store *s = NULL;
    char why[256];
    assert_int_equal(cr_ssd_open(&cfg, &s, NULL, why, sizeof(why)), CR_ERR_IO);
    assert_null(s);
    assert_non_null(strstr(why, "/proc/crescent-no-such/ssd"));
    cfg.capacity = 0;
    assert_int_equal(cr_ssd_open(&cfg, &s, NULL, why, sizeof(why)), CR_ERR_INVALID_PARAMS);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_put_read_back, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(test_lru_eviction_within_capacity, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(test_promotion_in_window, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(test_corrupt_file_never_served, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(test_open_value_hands_out_the_file, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(test_reopen_keeps_good_drops_bad, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(test_kill_9_mid_write_leaves_no_torn_file, make_dir,
                                        remove_dir),
        cmocka_unit_test(test_bad_dir_refused),
    };
    return cmocka_run_group_tests_name("ssd_store", tests, NULL, NULL);
}
