/* Unit tests for an object's replica storage (store_internal.h): one
 * replica inline in the object, an overflow array for more.  An object
 * grows from one replica to CR_STORE_REPLICAS_MAX through the calls that
 * add replicas (copy tasks, disk and local_disk replicas, offload,
 * promotion, PutStart, restore) and shrinks back through those that drop
 * them, every replica staying what it was; a failed allocation of the
 * overflow array leaves the object, the store and its counters unchanged
 * and says why. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/store.h"
#include "core/store_internal.h" /* the overflow array, and its failure switch */
#include "core/store_restore.h"
#include "crescent/error.h"
#include "store_tier_fixture.h"

#define SEGMENTS 8u
static const struct cr_uuid OWNER = {{1}};
static const struct cr_uuid OTHER = {{2}};

/* A store with segments seg-0 .. seg-7 (seg-7 of another owner), and "k"
 * put with one replica on seg-0 and a checksum. */
static cr_store *make_store(struct recorder *rec) {
    cr_store *s = store_with_recorder(rec);
    for (uint32_t i = 0; i < SEGMENTS; i++) {
        char name[16], ep[32];
        snprintf(name, sizeof(name), "seg-%u", i);
        snprintf(ep, sizeof(ep), "10.0.0.%u:7000", i + 1);
        mount_segment(s, i == SEGMENTS - 1 ? &OTHER : &OWNER, name, (uint64_t)(i + 1) << 32,
                      1 << 20, ep);
    }
    put_on(s, &OWNER, "k", "seg-0", true);
    return s;
}

static struct cr_store_obj *object(cr_store *s, const char *key) {
    struct cr_store_object_view v;
    view(s, key, &v);
    return cr_store_obj_at(s, v.object_id);
}

/* What the store says of k's replicas, one "medium:segment@buffer/status"
 * per replica, in order. */
static void describe(cr_store *s, const char *key, char *out, size_t cap) {
    struct cr_store_object_view v;
    view(s, key, &v);
    out[0] = '\0';
    for (uint32_t i = 0; i < v.replicas.count; i++) {
        const struct cr_store_replica_desc *d = &v.replicas.replicas[i];
        size_t n = strlen(out);
        snprintf(out + n, cap - n, "%s%d:%s@%llx/%d", i ? ";" : "", (int)d->medium,
                 d->medium == CR_MEDIUM_DISK ? d->file_path : d->segment_name,
                 (unsigned long long)d->buffer, (int)d->status);
    }
}

/* The object's replicas sit inline exactly when it has at most one. */
static void assert_storage(cr_store *s, const char *key, uint32_t count) {
    struct cr_store_obj *obj = object(s, key);
    assert_int_equal(obj->replica_count, count);
    if (count <= 1) assert_null(obj->reps_more);
    else assert_non_null(obj->reps_more);
}

/* Copies k to `target` and commits: one replica more. */
static void copy_to(cr_store *s, const char *target, uint64_t now_ms) {
    struct cr_store_key k;
    cr_store_key_make(NULL, "k", 1, &k);
    const char *targets[] = {target};
    struct cr_store_task_reservation res;
    assert_int_equal(cr_store_task_reserve(s, &k, "seg-0", targets, 1, now_ms, &res), CR_OK);
    uint64_t lease = 0;
    assert_int_equal(cr_store_task_commit(s, &res.ref, false, now_ms, &lease), CR_OK);
}

static void grows_to_the_ceiling_and_back(void **state) {
    (void)state;
    struct recorder rec = {0};
    cr_store *s = make_store(&rec);
    struct cr_store_key k;
    cr_store_key_make(NULL, "k", 1, &k);
    char before[1024], after[1024];
    assert_storage(s, "k", 1);
    /* Memory replicas by copy tasks: 1 → 6; each step keeps the replicas
     * there were and adds the one on the target. */
    for (uint32_t i = 1; i <= 5; i++) {
        describe(s, "k", before, sizeof(before));
        char target[16];
        snprintf(target, sizeof(target), "seg-%u", i);
        copy_to(s, target, 10 + i);
        assert_storage(s, "k", i + 1);
        describe(s, "k", after, sizeof(after));
        assert_memory_equal(after, before, strlen(before)); /* the old ones unchanged */
        assert_non_null(strstr(after + strlen(before), target));
    }
    /* A disk replica (7) and a local_disk one (8): the ceiling. */
    assert_int_equal(cr_store_add_disk_replica(s, &k, "/data/k.bin", OBJ, 0x77, 20), CR_OK);
    assert_storage(s, "k", 7);
    assert_int_equal(cr_store_add_local_disk_replica(s, &k, "seg-7", 1234, 21), CR_OK);
    assert_storage(s, "k", CR_STORE_REPLICAS_MAX);
    describe(s, "k", before, sizeof(before));
    assert_non_null(strstr(before, "1:/data/k.bin@0/3"));
    assert_non_null(strstr(before, "2:seg-7@4d2/3"));
    /* Full: one more is refused, the object as it was. */
    const char *t6[] = {"seg-6"};
    struct cr_store_task_reservation res;
    assert_int_equal(cr_store_task_reserve(s, &k, "seg-0", t6, 1, 22, &res),
                     CR_ERR_INVALID_PARAMS);
    assert_int_equal(cr_store_add_local_disk_replica(s, &k, "seg-6", 1, 22), CR_ERR_NOMEM);
    describe(s, "k", after, sizeof(after));
    assert_string_equal(after, before);
    struct cr_store_stats st;
    cr_store_get_stats(s, 23, &st);
    assert_int_equal(st.replica_count, CR_STORE_REPLICAS_MAX);
    assert_int_equal(st.used_bytes, 6 * OBJ);
    /* Back down: the disk replica, the local_disk one, then the segments
     * one at a time; the survivors stay as they were. */
    uint32_t dropped = 0;
    assert_int_equal(cr_store_drop_medium(s, &k, CR_MEDIUM_DISK, NULL, &dropped), CR_OK);
    assert_int_equal(dropped, 1);
    assert_storage(s, "k", 7);
    assert_int_equal(cr_store_drop_medium(s, &k, CR_MEDIUM_LOCAL_DISK, "seg-7", &dropped), CR_OK);
    assert_storage(s, "k", 6);
    for (uint32_t i = 0; i < 5; i++) {
        char name[16];
        snprintf(name, sizeof(name), "seg-%u", i);
        uint64_t freed = 0;
        assert_int_equal(cr_store_unmount_segment(s, &OWNER, name, &freed), CR_OK);
        assert_int_equal(freed, 0);
        assert_storage(s, "k", 5 - i);
        describe(s, "k", after, sizeof(after));
        assert_null(strstr(after, name));
        for (uint32_t j = i + 1; j < 6; j++) { /* the others are all there */
            snprintf(name, sizeof(name), "seg-%u@%llx", j, (unsigned long long)(j + 1) << 32);
            assert_non_null(strstr(after, name));
        }
    }
    /* One left, inline again: a removal frees the object. */
    cr_store_get_stats(s, 30, &st);
    assert_int_equal(st.replica_count, 1);
    assert_int_equal(st.used_bytes, OBJ);
    assert_int_equal(cr_store_remove_k(s, &k, true, 30), CR_OK);
    cr_store_get_stats(s, 31, &st);
    assert_int_equal(st.object_count, 0);
    assert_int_equal(st.replica_count, 0);
    cr_store_destroy(s);
}

/* Objects freed with an overflow array (removal, unmount, destroy) free it:
 * the leak checker of the sanitizer build says so. */
static void objects_with_many_replicas_free_them(void **state) {
    (void)state;
    struct recorder rec = {0};
    cr_store *s = make_store(&rec);
    struct cr_store_replica_list l;
    const char *keys[] = {"a", "b", "c"};
    for (uint32_t i = 0; i < 3; i++) {
        struct cr_store_put_params p = {.key = keys[i], .key_len = 1, .value_length = OBJ,
                                        .replica_num = 3};
        assert_int_equal(cr_store_put_start(s, &OWNER, &p, 1, &l), CR_OK);
        assert_int_equal(l.count, 3);
        assert_storage(s, keys[i], 3);
    }
    struct cr_store_key k;
    cr_store_key_make(NULL, "a", 1, &k);
    assert_int_equal(cr_store_put_end_k(s, &OWNER, &k, NULL, 2), CR_OK);
    assert_int_equal(cr_store_remove_k(s, &k, true, 3), CR_OK); /* a: removed */
    /* b: in flight, its owner's segments go; c stays for destroy. */
    uint64_t freed = 0;
    for (uint32_t i = 0; i < SEGMENTS - 1; i++) {
        char name[16];
        snprintf(name, sizeof(name), "seg-%u", i);
        assert_int_equal(cr_store_unmount_segment(s, &OWNER, name, &freed), CR_OK);
    }
    cr_store_destroy(s);
}

/* Offload: a leased object keeps its memory replica beside the new
 * local_disk one (two: the array), an unleased one ends with the local_disk
 * one alone, inline. */
static void offload_commit(void **state) {
    (void)state;
    struct recorder rec = {0};
    cr_store *s = store_with_recorder(&rec);
    mount_segment(s, &OWNER, "ssd", 1ull << 32, 1 << 20, "10.0.0.1:7000");
    assert_int_equal(cr_store_segment_set_ssd_capacity(s, "ssd", 1ull << 30), CR_OK);
    put_on(s, &OWNER, "k", "ssd", true);
    put_on(s, &OWNER, "u", "ssd", true);
    struct cr_store_object_view v;
    struct cr_store_task_reservation res;
    struct cr_store_key k;
    char d[1024];
    view(s, "k", &v);
    assert_int_equal(cr_store_offload_begin(s, v.object_id, v.generation, 10, &res, &k), CR_OK);
    struct cr_store_replica_list l;
    assert_int_equal(cr_store_get_replica_list(s, NULL, "k", 1, 11, &l), CR_OK); /* a lease */
    assert_int_equal(cr_store_offload_commit(s, &res.ref, 0x55, 12), CR_OK);
    assert_storage(s, "k", 2);
    describe(s, "k", d, sizeof(d));
    assert_string_equal(d, "0:ssd@100000000/3;2:ssd@55/3");
    view(s, "u", &v);
    assert_int_equal(cr_store_offload_begin(s, v.object_id, v.generation, 10, &res, &k), CR_OK);
    assert_int_equal(cr_store_offload_commit(s, &res.ref, 0x66, 12), CR_OK);
    assert_storage(s, "u", 1);
    describe(s, "u", d, sizeof(d));
    assert_string_equal(d, "2:ssd@66/3");
    cr_store_destroy(s);
}

/* The object and the store as they were: replicas, counts and bytes. */
struct snapshot {
    char reps[1024];
    struct cr_store_stats st;
    int events;
};

static void snap(cr_store *s, const struct recorder *rec, struct snapshot *out) {
    describe(s, "k", out->reps, sizeof(out->reps));
    cr_store_get_stats(s, 50, &out->st);
    out->events = rec->count;
}

static void assert_unchanged(cr_store *s, const struct recorder *rec, const struct snapshot *was) {
    struct snapshot now;
    snap(s, rec, &now);
    assert_string_equal(now.reps, was->reps);
    assert_int_equal(now.st.replica_count, was->st.replica_count);
    assert_int_equal(now.st.used_bytes, was->st.used_bytes);
    assert_int_equal(now.st.object_count, was->st.object_count);
    assert_int_equal(now.st.disk_replicas, was->st.disk_replicas);
    assert_int_equal(now.st.local_disk_replicas, was->st.local_disk_replicas);
    assert_int_equal(now.st.discarded_parked, was->st.discarded_parked);
    assert_int_equal(now.events, was->events);
    assert_storage(s, "k", 1);
    assert_non_null(strstr(cr_store_last_error(s), "replica array"));
}

static void failed_growth_changes_nothing(void **state) {
    (void)state;
    struct recorder rec = {0};
    cr_store *s = make_store(&rec);
    struct cr_store_key k;
    cr_store_key_make(NULL, "k", 1, &k);
    struct snapshot was;
    snap(s, &rec, &was);
    s->reps_alloc_fails = true;
    /* A copy task's reservation. */
    const char *targets[] = {"seg-1", "seg-2"};
    struct cr_store_task_reservation res;
    assert_int_equal(cr_store_task_reserve(s, &k, NULL, targets, 2, 10, &res), CR_ERR_NOMEM);
    assert_unchanged(s, &rec, &was);
    /* A disk replica, a local_disk replica. */
    cr_store_clear_error(s);
    assert_int_equal(cr_store_add_disk_replica(s, &k, "/data/k.bin", OBJ, 0x77, 11), CR_ERR_NOMEM);
    assert_unchanged(s, &rec, &was);
    cr_store_clear_error(s);
    assert_int_equal(cr_store_add_local_disk_replica(s, &k, "seg-7", 7, 12), CR_ERR_NOMEM);
    assert_unchanged(s, &rec, &was);
    /* A PutStart of two replicas: no object, no bytes taken. */
    cr_store_clear_error(s);
    struct cr_store_put_params p = {.key = "two", .key_len = 3, .value_length = OBJ,
                                    .replica_num = 2};
    struct cr_store_replica_list l;
    assert_int_equal(cr_store_put_start(s, &OWNER, &p, 13, &l), CR_ERR_NOMEM);
    assert_unchanged(s, &rec, &was);
    /* ... while one replica needs no array. */
    p.replica_num = 1;
    assert_int_equal(cr_store_put_start(s, &OWNER, &p, 14, &l), CR_OK);
    assert_int_equal(cr_store_put_revoke(s, &OWNER, NULL, "two", 3), CR_OK);
    /* A restore of an object with two replicas. */
    cr_store_clear_error(s);
    struct cr_store_restore_object o = {
        .tenant = "", .key = "r", .key_len = 1, .size = OBJ, .owner = OWNER,
        .replica_count = 2,
        .replicas = {{.segment = "seg-3", .offset = 0, .size = OBJ},
                     {.segment = "seg-4", .offset = 0, .size = OBJ}}};
    uint32_t dropped = 0;
    snap(s, &rec, &was);
    assert_int_equal(cr_store_restore_object(s, &o, 16, &dropped), CR_ERR_NOMEM);
    assert_unchanged(s, &rec, &was);
    /* The allocation back: all of these work. */
    s->reps_alloc_fails = false;
    assert_int_equal(cr_store_restore_object(s, &o, 17, &dropped), CR_OK);
    assert_storage(s, "r", 2);
    assert_int_equal(cr_store_task_reserve(s, &k, NULL, targets, 2, 18, &res), CR_OK);
    assert_storage(s, "k", 3);
    cr_store_task_rollback(s, &res.ref); /* back to one: inline again */
    assert_storage(s, "k", 1);
    cr_store_destroy(s);
}

/* Room made for a copy whose target then has no bytes: the object goes
 * back inline, as it was. */
static void refused_copy_leaves_the_object_inline(void **state) {
    (void)state;
    struct recorder rec = {0};
    cr_store *s = make_store(&rec);
    struct cr_store_put_params p = {.key = "big", .key_len = 3, .value_length = 1 << 20,
                                    .replica_num = 1, .preferred_segment = "seg-6"};
    struct cr_store_replica_list l;
    assert_int_equal(cr_store_put_start(s, &OWNER, &p, 1, &l), CR_OK);
    assert_string_equal(l.replicas[0].segment_name, "seg-6"); /* seg-6 is full */
    struct cr_store_key k;
    cr_store_key_make(NULL, "k", 1, &k);
    char before[256], after[256];
    describe(s, "k", before, sizeof(before));
    const char *targets[] = {"seg-1", "seg-6"};
    struct cr_store_task_reservation res;
    assert_int_equal(cr_store_task_reserve(s, &k, NULL, targets, 2, 10, &res),
                     CR_ERR_NO_AVAILABLE_HANDLE);
    describe(s, "k", after, sizeof(after));
    assert_string_equal(after, before);
    assert_storage(s, "k", 1);
    cr_store_destroy(s);
}

/* An offload's commit that would keep the memory replica (leased) and
 * cannot have the array: the object keeps what it had; an unleased one
 * needs no array and commits. */
static void failed_offload_commit_changes_nothing(void **state) {
    (void)state;
    struct recorder rec = {0};
    cr_store *s = store_with_recorder(&rec);
    mount_segment(s, &OWNER, "ssd", 1ull << 32, 1 << 20, "10.0.0.1:7000");
    assert_int_equal(cr_store_segment_set_ssd_capacity(s, "ssd", 1ull << 30), CR_OK);
    put_on(s, &OWNER, "k", "ssd", true);
    struct cr_store_object_view v;
    struct cr_store_task_reservation res;
    struct cr_store_key k;
    view(s, "k", &v);
    assert_int_equal(cr_store_offload_begin(s, v.object_id, v.generation, 10, &res, &k), CR_OK);
    struct cr_store_replica_list l;
    assert_int_equal(cr_store_get_replica_list(s, NULL, "k", 1, 11, &l), CR_OK);
    struct snapshot was;
    snap(s, &rec, &was);
    s->reps_alloc_fails = true;
    assert_int_equal(cr_store_offload_commit(s, &res.ref, 0x55, 12), CR_ERR_NOMEM);
    struct snapshot now;
    snap(s, &rec, &now);
    assert_string_equal(now.reps, was.reps);
    assert_int_equal(now.st.offloads_failed, was.st.offloads_failed + 1);
    assert_int_equal(now.st.local_disk_replicas, 0);
    assert_non_null(strstr(cr_store_last_error(s), "replica array"));
    /* The offload ended: another may begin once the lease is over. */
    uint64_t later = 10 + 1000000;
    assert_int_equal(cr_store_offload_begin(s, v.object_id, v.generation, later, &res, &k), CR_OK);
    assert_int_equal(cr_store_offload_commit(s, &res.ref, 0x55, later), CR_OK);
    char d[256];
    describe(s, "k", d, sizeof(d));
    assert_string_equal(d, "2:ssd@55/3");
    cr_store_destroy(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(grows_to_the_ceiling_and_back),
        cmocka_unit_test(objects_with_many_replicas_free_them),
        cmocka_unit_test(offload_commit),
        cmocka_unit_test(failed_growth_changes_nothing),
        cmocka_unit_test(failed_offload_commit_changes_nothing),
        cmocka_unit_test(refused_copy_leaves_the_object_inline),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
