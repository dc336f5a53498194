/* Unit tests for the store master core (src/core/store*.c), injected clock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/store.h"
#include "core/store_internal.h" /* the lease census's count, below the stats */
#include "crescent/error.h"

#define KIB 1024ull
#define OBJ 4096ull

static const struct cr_uuid CLIENT_A = {{1}};
static const struct cr_uuid CLIENT_B = {{2}};
static const struct cr_uuid CLIENT_C = {{3}};

/* ---- event recorder ---- */
#define EV_MAX 64
struct rec_event {
    enum cr_store_change_kind kind;
    char key[64];
    char tenant[32];
    uint32_t replicas;
    char location0[64];
    char model[32];
    uint32_t tokens;
    uint64_t removed;
};
struct recorder {
    struct rec_event ev[EV_MAX];
    int count;
};

static void record(void *ctx, const struct cr_store_change *ev) {
    struct recorder *r = ctx;
    assert_true(r->count < EV_MAX);
    struct rec_event *e = &r->ev[r->count++];
    memset(e, 0, sizeof(*e));
    e->kind = ev->kind;
    if (ev->key) snprintf(e->key, sizeof(e->key), "%.*s", (int)ev->key_len, ev->key);
    if (ev->tenant) snprintf(e->tenant, sizeof(e->tenant), "%s", ev->tenant);
    e->replicas = ev->replica_count;
    if (ev->replica_count > 0) {
        assert_string_equal(ev->replicas[0].type, "memory");
        snprintf(e->location0, sizeof(e->location0), "%s", ev->replicas[0].location);
    }
    if (ev->meta) {
        snprintf(e->model, sizeof(e->model), "%s", ev->meta->model_name);
        e->tokens = ev->meta->token_count;
    }
    e->removed = ev->removed_count;
}

/* ---- helpers ---- */

static cr_store *make_store(struct recorder *rec) {
    cr_store_config cfg;
    cr_store_config_default(&cfg);
    cfg.max_objects = 20000;
    cfg.max_segments = 64;
    cfg.max_allocations_per_segment = 4096;
    cfg.max_tenants_per_client = 65535; /* tests of the whole table use one client */
    struct cr_store_event_sink sink = {record, rec};
    cr_store *s = NULL;
    assert_int_equal(cr_store_create(&cfg, rec ? &sink : NULL, &s), CR_OK);
    return s;
}

static void mount(cr_store *s, const struct cr_uuid *c, const char *name, uint64_t base,
                  uint64_t size, const char *endpoint) {
    struct cr_store_segment_params p = {name, base, size, endpoint, "tcp"};
    assert_int_equal(cr_store_mount_segment(s, c, &p, 0), CR_OK);
}

static void mount_n(cr_store *s, const struct cr_uuid *c, int n, uint64_t size) {
    for (int i = 0; i < n; i++) {
        char name[32], ep[32];
        snprintf(name, sizeof(name), "seg%d", i);
        snprintf(ep, sizeof(ep), "10.0.0.%d:1234", i);
        mount(s, c, name, (uint64_t)(i + 1) << 32, size, ep);
    }
}

static int put_start(cr_store *s, const struct cr_uuid *c, const char *tenant, const char *key,
                     uint32_t replicas, bool soft, const char *pref, uint64_t now,
                     struct cr_store_replica_list *out) {
    struct cr_store_replica_list tmp;
    struct cr_store_put_params p = {.tenant = tenant, .key = key, .key_len = (uint32_t)strlen(key),
                                    .value_length = OBJ, .replica_num = replicas,
                                    .with_soft_pin = soft, .preferred_segment = pref};
    return cr_store_put_start(s, c, &p, now, out ? out : &tmp);
}

static int put_end(cr_store *s, const struct cr_uuid *c, const char *tenant, const char *key,
                   uint64_t now) {
    return cr_store_put_end(s, c, tenant, key, (uint32_t)strlen(key), now);
}

static void put(cr_store *s, const char *tenant, const char *key, uint64_t now) {
    assert_int_equal(put_start(s, &CLIENT_A, tenant, key, 1, false, NULL, now, NULL), CR_OK);
    assert_int_equal(put_end(s, &CLIENT_A, tenant, key, now), CR_OK);
}

static int get(cr_store *s, const char *tenant, const char *key, uint64_t now) {
    struct cr_store_replica_list l;
    return cr_store_get_replica_list(s, tenant, key, (uint32_t)strlen(key), now, &l);
}

static int rm(cr_store *s, const char *tenant, const char *key, bool force, uint64_t now) {
    return cr_store_remove(s, tenant, key, (uint32_t)strlen(key), force, now);
}

static uint64_t used(cr_store *s) {
    struct cr_store_usage u;
    cr_store_usage(s, &u);
    return u.used_bytes;
}

/* ---- tests ---- */

/* The lease census (cr_store_lease_census_step) walks in slices and gives
 * the last whole walk's count; the stats count themselves below
 * CR_STORE_STATS_EXACT_SLOTS slots. */
static void test_lease_census(void **state) {
    (void)state;
    cr_store *s = make_store(NULL);
    mount_n(s, &CLIENT_A, 1, 1024 * KIB);
    put(s, NULL, "a", 0);
    put(s, NULL, "b", 0);
    put(s, NULL, "c", 0);
    assert_int_equal(get(s, NULL, "a", 1000), CR_OK);
    assert_int_equal(get(s, NULL, "c", 1000), CR_OK);
    /* slices of one slot: no count until the walk ends, then the whole count */
    assert_false(cr_store_lease_census_step(s, 1001, 1));
    assert_false(cr_store_lease_census_step(s, 1001, 1));
    assert_int_equal(s->lease_census, 0);
    assert_true(cr_store_lease_census_step(s, 1001, 1));
    assert_int_equal(s->lease_census, 2);
    assert_true(cr_store_lease_census_step(s, 1001, 100)); /* a new walk, whole in one step */
    assert_int_equal(s->lease_census, 2);
    struct cr_store_stats st;
    cr_store_get_stats(s, 1001, &st);
    assert_int_equal(st.active_leases, 2); /* small table: counted by the stats themselves */
    /* after the leases end, the next whole walk counts none */
    assert_false(cr_store_lease_census_step(s, 100000, 2));
    assert_int_equal(s->lease_census, 2); /* the last whole walk's, until this one ends */
    assert_true(cr_store_lease_census_step(s, 100000, 2));
    assert_int_equal(s->lease_census, 0);
    cr_store_get_stats(s, 100000, &st);
    assert_int_equal(st.active_leases, 0);
    cr_store_destroy(s);
}

static void test_config(void **state) {
    (void)state;
    cr_store_config cfg;
    char msg[128];
    cr_store_config_default(&cfg);
    assert_int_equal(cfg.default_kv_lease_ttl_ms, 5000);
    assert_int_equal(cfg.default_kv_soft_pin_ttl_ms, 30 * 60 * 1000);
    assert_true(cfg.allow_evict_soft_pinned_objects);
    assert_int_equal(cfg.put_start_discard_timeout_ms, 30000);
    assert_int_equal(cfg.put_start_release_timeout_ms, 600000);
    assert_int_equal(cfg.client_live_ttl_ms, 10000);
    assert_int_equal(cfg.max_key_len, 4096);
    assert_int_equal(cr_store_config_validate(&cfg, msg, sizeof(msg)), CR_OK);
    cfg.put_start_discard_timeout_ms = cfg.put_start_release_timeout_ms;
    assert_int_equal(cr_store_config_validate(&cfg, msg, sizeof(msg)), CR_ERR_INVALID_PARAMS);
    assert_non_null(strstr(msg, "put_start_discard_timeout"));
    cr_store_config_default(&cfg);
    cfg.eviction_high_watermark_ratio = 1.5;
    assert_int_equal(cr_store_config_validate(&cfg, msg, sizeof(msg)), CR_ERR_INVALID_PARAMS);
    assert_non_null(strstr(msg, "eviction_high_watermark_ratio"));
    cfg.eviction_high_watermark_ratio = 0.95;
    cfg.max_replicas_per_object = CR_STORE_REPLICAS_MAX + 1;
    assert_int_equal(cr_store_config_validate(&cfg, msg, sizeof(msg)), CR_ERR_INVALID_PARAMS);
    cr_store *s = NULL;
    assert_int_equal(cr_store_create(&cfg, NULL, &s), CR_ERR_INVALID_PARAMS);
    assert_null(s);
}

static void test_two_phase_put(void **state) {
    (void)state;
    cr_store *s = make_store(NULL);
    mount_n(s, &CLIENT_A, 2, 1024 * KIB);
    struct cr_store_replica_list l;
    assert_int_equal(put_start(s, &CLIENT_A, NULL, "k1", 1, false, NULL, 10, &l), CR_OK);
    assert_int_equal(l.count, 1);
    assert_int_equal(l.replicas[0].status, CR_REPLICA_INITIALIZED);
    assert_int_equal(l.replicas[0].size, OBJ);
    assert_int_equal(used(s), OBJ);
    assert_int_equal(get(s, NULL, "k1", 11), CR_ERR_OBJECT_NOT_READY);
    assert_int_equal(cr_store_exist_key(s, NULL, "k1", 2, 11), CR_ERR_OBJECT_NOT_READY);
    assert_int_equal(put_start(s, &CLIENT_B, NULL, "k1", 1, false, NULL, 12, NULL),
                     CR_ERR_OBJECT_ALREADY_EXISTS);
    assert_int_equal(put_end(s, &CLIENT_A, NULL, "k1", 20), CR_OK);
    assert_int_equal(put_end(s, &CLIENT_A, "default", "k1", 21), CR_OK); /* idempotent */
    struct cr_store_replica_list g;
    assert_int_equal(cr_store_get_replica_list(s, NULL, "k1", 2, 30, &g), CR_OK);
    assert_int_equal(g.count, 1);
    assert_int_equal(g.replicas[0].status, CR_REPLICA_COMPLETE);
    assert_int_equal(g.replicas[0].buffer, l.replicas[0].buffer);
    struct cr_store_segment_view sv;
    assert_int_equal(cr_store_segment_find(s, g.replicas[0].segment_name, &sv), CR_OK);
    assert_true(g.replicas[0].buffer >= sv.base && g.replicas[0].buffer + OBJ <= sv.base + sv.size);
    assert_int_equal(cr_store_exist_key(s, NULL, "k1", 2, 31), CR_OK);
    assert_int_equal(cr_store_exist_key(s, NULL, "nope", 4, 31), CR_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(put_start(s, &CLIENT_A, NULL, "k1", 1, false, NULL, 40, NULL),
                     CR_ERR_OBJECT_ALREADY_EXISTS);
    cr_store_destroy(s);
}

static void test_put_end_other_client(void **state) {
    (void)state;
    cr_store *s = make_store(NULL);
    mount_n(s, &CLIENT_A, 1, 1024 * KIB);
    assert_int_equal(put_start(s, &CLIENT_A, NULL, "k", 1, false, NULL, 0, NULL), CR_OK);
    assert_int_equal(put_end(s, &CLIENT_B, NULL, "k", 1), CR_ERR_ILLEGAL_CLIENT);
    assert_int_equal(cr_store_put_revoke(s, &CLIENT_B, NULL, "k", 1), CR_ERR_ILLEGAL_CLIENT);
    assert_int_equal(get(s, NULL, "k", 2), CR_ERR_OBJECT_NOT_READY);
    assert_int_equal(cr_store_put_revoke(s, &CLIENT_A, NULL, "k", 1), CR_OK);
    assert_int_equal(used(s), 0);
    assert_int_equal(get(s, NULL, "k", 2), CR_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(put_end(s, &CLIENT_A, NULL, "k", 3), CR_ERR_OBJECT_NOT_FOUND);
    put(s, NULL, "done", 4);
    assert_int_equal(cr_store_put_revoke(s, &CLIENT_A, NULL, "done", 4), CR_ERR_INVALID_PARAMS);
    assert_int_equal(put_end(s, &CLIENT_B, NULL, "done", 5), CR_ERR_ILLEGAL_CLIENT);
    cr_store_destroy(s);
}

/* PutEnd's checksum is kept with the object and comes back with every
 * replica list; a retried PutEnd must agree with it. */
static void test_put_end_checksum(void **state) {
    (void)state;
    cr_store *s = make_store(NULL);
    mount_n(s, &CLIENT_A, 2, 1024 * KIB);
    struct cr_store_replica_list l;
    assert_int_equal(put_start(s, &CLIENT_A, NULL, "sum", 2, false, NULL, 0, &l), CR_OK);
    assert_false(l.has_checksum);
    struct cr_store_key k;
    cr_store_key_make(NULL, "sum", 3, &k);
    const uint64_t sum = 0xFEEDFACECAFEBEEFull, other = sum ^ 1;
    assert_int_equal(cr_store_put_end_k(s, &CLIENT_A, &k, &sum, 1), CR_OK);
    assert_int_equal(cr_store_put_end_k(s, &CLIENT_A, &k, &sum, 2), CR_OK);
    assert_int_equal(cr_store_put_end_k(s, &CLIENT_A, &k, &other, 2), CR_ERR_INVALID_PARAMS);
    assert_int_equal(cr_store_put_end_k(s, &CLIENT_A, &k, NULL, 2), CR_ERR_INVALID_PARAMS);
    assert_int_equal(cr_store_get_replica_list_k(s, &k, 3, &l), CR_OK);
    assert_int_equal(l.count, 2);
    assert_true(l.has_checksum);
    assert_true(l.checksum == sum);
    assert_int_equal(l.lease_ms, cr_store_get_config(s)->default_kv_lease_ttl_ms);
    /* Without one, none is reported (and a later put of the key starts clean). */
    put(s, NULL, "plain", 4);
    assert_int_equal(cr_store_get_replica_list(s, NULL, "plain", 5, 5, &l), CR_OK);
    assert_false(l.has_checksum);
    assert_int_equal(cr_store_remove(s, NULL, "sum", 3, true, 6), CR_OK);
    assert_int_equal(put_start(s, &CLIENT_A, NULL, "sum", 1, false, NULL, 7, NULL), CR_OK);
    assert_int_equal(put_end(s, &CLIENT_A, NULL, "sum", 8), CR_OK);
    assert_int_equal(cr_store_get_replica_list_k(s, &k, 9, &l), CR_OK);
    assert_false(l.has_checksum);
    cr_store_destroy(s);
}

static void test_bad_input(void **state) {
    (void)state;
    cr_store *s = make_store(NULL);
    mount_n(s, &CLIENT_A, 2, 1024 * KIB);
    struct cr_store_replica_list l;
    struct cr_store_put_params p = {.key = "", .key_len = 0, .value_length = OBJ,
                                    .replica_num = 1};
    assert_int_equal(cr_store_put_start(s, &CLIENT_A, &p, 0, &l), CR_ERR_INVALID_PARAMS);
    char *big = malloc(5000);
    memset(big, 'k', 5000);
    p.key = big;
    p.key_len = 4097;
    assert_int_equal(cr_store_put_start(s, &CLIENT_A, &p, 0, &l), CR_ERR_INVALID_PARAMS);
    p.key_len = 4096;
    assert_int_equal(cr_store_put_start(s, &CLIENT_A, &p, 0, &l), CR_OK);
    p.key = "x";
    p.key_len = 1;
    p.value_length = 1ull << 50;
    assert_int_equal(cr_store_put_start(s, &CLIENT_A, &p, 0, &l), CR_ERR_INVALID_PARAMS);
    p.value_length = OBJ;
    p.replica_num = 0;
    assert_int_equal(cr_store_put_start(s, &CLIENT_A, &p, 0, &l), CR_ERR_INVALID_PARAMS);
    p.replica_num = 3; /* only 2 mounted */
    assert_int_equal(cr_store_put_start(s, &CLIENT_A, &p, 0, &l), CR_ERR_INVALID_PARAMS);
    assert_non_null(strstr(cr_store_last_error(s), "mounted"));
    assert_int_equal(get(s, "no-such-tenant", "x", 0), CR_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(rm(s, "no-such-tenant", "x", true, 0), CR_ERR_OBJECT_NOT_FOUND);
    struct cr_store_stats st;
    cr_store_get_stats(s, 0, &st);
    assert_int_equal(st.object_count, 1); /* only the 4096-byte key */
    free(big);
    cr_store_destroy(s);
}

/* A 0-byte object: each replica takes a 1-byte allocation of its own (a
 * distinct address inside its segment) while every handle says size 0; it
 * is read, removed, revoked, dropped with its segment and copied like any
 * other, and what it took comes back each time. */
static void test_empty_object(void **state) {
    (void)state;
    cr_store *s = make_store(NULL);
    mount_n(s, &CLIENT_A, 3, 64 * KIB);
    struct cr_store_replica_list l;
    struct cr_store_put_params p = {.key = "empty", .key_len = 5, .value_length = 0,
                                    .replica_num = 2};
    assert_int_equal(cr_store_put_start(s, &CLIENT_A, &p, 0, &l), CR_OK);
    assert_int_equal(l.count, 2);
    assert_int_equal(used(s), 2);
    assert_int_equal(get(s, NULL, "empty", 1), CR_ERR_OBJECT_NOT_READY);
    const uint64_t sum = 0x2d06800538d394c2ull; /* XXH3-64 of no bytes */
    struct cr_store_key k;
    cr_store_key_make(NULL, "empty", 5, &k);
    assert_int_equal(cr_store_put_end_k(s, &CLIENT_A, &k, &sum, 2), CR_OK);
    assert_int_equal(cr_store_get_replica_list(s, NULL, "empty", 5, 3, &l), CR_OK);
    assert_int_equal(l.count, 2);
    assert_true(l.has_checksum && l.checksum == sum);
    uint64_t seen[3];
    for (uint32_t i = 0; i < l.count; i++) {
        const struct cr_store_replica_desc *d = &l.replicas[i];
        assert_int_equal(d->size, 0);
        assert_int_equal(d->status, CR_REPLICA_COMPLETE);
        uint64_t base = (uint64_t)(d->segment_id + 1) << 32; /* mount_n's layout */
        assert_true(d->buffer >= base && d->buffer < base + 64 * KIB);
        seen[i] = d->buffer;
    }
    assert_int_not_equal(l.replicas[0].segment_id, l.replicas[1].segment_id);
    /* A second empty object on the same segment gets an address of its own. */
    p = (struct cr_store_put_params){.key = "empty2", .key_len = 6, .value_length = 0,
                                     .replica_num = 1,
                                     .preferred_segment = l.replicas[0].segment_name};
    assert_int_equal(cr_store_put_start(s, &CLIENT_A, &p, 4, &l), CR_OK);
    assert_int_not_equal(l.replicas[0].buffer, seen[0]);
    assert_int_equal(used(s), 3);
    assert_int_equal(cr_store_put_revoke(s, &CLIENT_A, NULL, "empty2", 6), CR_OK);
    assert_int_equal(used(s), 2);
    /* A copy task reserves (and commits) a 0-byte target like any other. */
    const char *spare = NULL;
    assert_int_equal(cr_store_get_replica_list(s, NULL, "empty", 5, 5, &l), CR_OK);
    for (int i = 0; i < 3 && spare == NULL; i++) {
        static const char *names[] = {"seg0", "seg1", "seg2"};
        if (strcmp(names[i], l.replicas[0].segment_name) != 0 &&
            strcmp(names[i], l.replicas[1].segment_name) != 0)
            spare = names[i];
    }
    struct cr_store_task_reservation res;
    assert_int_equal(cr_store_task_reserve(s, &k, NULL, &spare, 1, 6, &res), CR_OK);
    assert_int_equal(res.targets.count, 1);
    assert_int_equal(res.targets.replicas[0].size, 0);
    assert_int_equal(used(s), 3);
    uint64_t lease = 0;
    assert_int_equal(cr_store_task_commit(s, &res.ref, false, 7, &lease), CR_OK);
    assert_int_equal(cr_store_get_replica_list(s, NULL, "empty", 5, 8, &l), CR_OK);
    assert_int_equal(l.count, 3);
    /* Its segment unmounted, a replica goes with it; removal frees the rest. */
    uint64_t freed = 0;
    assert_int_equal(cr_store_unmount_segment(s, &CLIENT_A, spare, &freed), CR_OK);
    assert_int_equal(used(s), 2);
    assert_int_equal(rm(s, NULL, "empty", true, 9), CR_OK);
    assert_int_equal(used(s), 0);
    assert_int_equal(get(s, NULL, "empty", 10), CR_ERR_OBJECT_NOT_FOUND);
    cr_store_destroy(s);
}

static void test_lease_blocks_remove(void **state) {
    (void)state;
    cr_store *s = make_store(NULL);
    mount_n(s, &CLIENT_A, 1, 1024 * KIB);
    put(s, NULL, "k", 0);
    assert_int_equal(get(s, NULL, "k", 1000), CR_OK); /* lease until 6000 */
    assert_int_equal(rm(s, NULL, "k", false, 1001), CR_ERR_OBJECT_HAS_LEASE);
    assert_int_equal(cr_store_exist_key(s, NULL, "k", 1, 3000), CR_OK); /* until 8000 */
    assert_int_equal(rm(s, NULL, "k", false, 7999), CR_ERR_OBJECT_HAS_LEASE);
    struct cr_store_stats st;
    cr_store_get_stats(s, 7999, &st);
    assert_int_equal(st.active_leases, 1);
    assert_int_equal(rm(s, NULL, "k", false, 8000), CR_OK);
    assert_int_equal(get(s, NULL, "k", 8001), CR_ERR_OBJECT_NOT_FOUND);
    put(s, NULL, "f", 9000);
    assert_int_equal(get(s, NULL, "f", 9000), CR_OK);
    assert_int_equal(rm(s, NULL, "f", true, 9001), CR_OK); /* force overrides */
    assert_int_equal(used(s), 0);
    assert_int_equal(put_start(s, &CLIENT_A, NULL, "w", 1, false, NULL, 9100, NULL), CR_OK);
    assert_int_equal(rm(s, NULL, "w", false, 9101), CR_ERR_OBJECT_NOT_READY);
    cr_store_destroy(s);
}

/* RemoveAll in slices (#28 item 9): announced first, then walked a few slots
 * at a time; an object seen after the announcement goes with its own event,
 * one stored behind the cursor stays. */
static void test_remove_all_in_slices(void **state) {
    (void)state;
    struct recorder rec = {0};
    cr_store *s = make_store(&rec);
    mount_n(s, &CLIENT_A, 1, 4096 * KIB);
    char key[16];
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        put(s, NULL, key, 0);
    }
    rec.count = 0;
    struct cr_store_remove_all_run run;
    cr_store_remove_all_begin(s, NULL, true, 100, &run);
    assert_int_equal(rec.count, 1);
    assert_int_equal(rec.ev[0].kind, CR_STORE_CHANGE_REMOVE_ALL);
    assert_false(cr_store_remove_all_step(s, &run, 8, 100));
    assert_int_equal(run.removed, 8);
    put(s, NULL, "late", 101);                    /* a freed slot: behind the cursor */
    assert_int_equal(get(s, NULL, "k39", 102), CR_OK); /* read after the announcement */
    int steps = 1; /* the one above */
    while (!cr_store_remove_all_step(s, &run, 8, 103)) steps++;
    assert_int_equal(steps + 1, 5); /* 40 slots, 8 a step */
    assert_int_equal(run.removed, 40);
    assert_int_equal(get(s, NULL, "late", 104), CR_OK);
    assert_int_equal(get(s, NULL, "k0", 104), CR_ERR_OBJECT_NOT_FOUND);
    int updates = 0;
    for (int i = 1; i < rec.count; i++) {
        if (rec.ev[i].kind != CR_STORE_CHANGE_UPDATE) continue;
        updates++;
        assert_string_equal(rec.ev[i].key, "k39");
        assert_int_equal(rec.ev[i].replicas, 0);
    }
    assert_int_equal(updates, 1);
    cr_store_remove_all_cancel(s, &run); /* finished: nothing to release */
    cr_store_destroy(s);
}

/* Listing in slices: a prefix that matches nothing takes several bounded
 * calls instead of one walk of the whole table. */
static void test_list_objects_in_slices(void **state) {
    (void)state;
    cr_store *s = make_store(NULL);
    mount_n(s, &CLIENT_A, 1, 4096 * KIB);
    char key[16];
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        put(s, NULL, key, 0);
    }
    struct cr_store_object_view views[64];
    uint32_t cursor = 0;
    bool done = false;
    int calls = 0;
    size_t found = 0;
    while (!done) {
        found += cr_store_list_objects_slice(s, NULL, "nomatch", 1, &cursor, 64, 8, views, &done);
        calls++;
    }
    assert_int_equal(found, 0);
    assert_int_equal(calls, 5);
    cursor = 0, done = false, found = 0;
    while (!done) found += cr_store_list_objects_slice(s, NULL, "k3", 1, &cursor, 64 - found, 8,
                                                       views + found, &done);
    assert_int_equal(found, 11); /* k3, k30..k39 */
    cr_store_destroy(s);
}

static void test_remove_all(void **state) {
    (void)state;
    struct recorder rec = {0};
    cr_store *s = make_store(&rec);
    mount_n(s, &CLIENT_A, 1, 1024 * KIB);
    put(s, NULL, "a", 0);
    put(s, NULL, "b", 0);
    put(s, NULL, "c", 0);
    assert_int_equal(put_start(s, &CLIENT_A, NULL, "inflight", 1, false, NULL, 0, NULL), CR_OK);
    assert_int_equal(get(s, NULL, "b", 100), CR_OK);
    rec.count = 0;
    assert_int_equal(cr_store_remove_all(s, NULL, false, 200), 2);
    assert_int_equal(rec.count, 1);
    assert_int_equal(rec.ev[0].kind, CR_STORE_CHANGE_REMOVE_ALL);
    assert_int_equal(rec.ev[0].removed, 2);
    assert_int_equal(get(s, NULL, "b", 300), CR_OK);
    assert_int_equal(get(s, NULL, "a", 300), CR_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(cr_store_remove_all(s, NULL, true, 301), 1);
    assert_int_equal(get(s, NULL, "b", 302), CR_ERR_OBJECT_NOT_FOUND);
    /* in-flight puts are never removed by RemoveAll */
    assert_int_equal(put_end(s, &CLIENT_A, NULL, "inflight", 303), CR_OK);
    cr_store_destroy(s);
}

static size_t fill(cr_store *s, const char *prefix, size_t max, bool soft, uint64_t now) {
    size_t n = 0;
    char key[64];
    for (; n < max; n++) {
        snprintf(key, sizeof(key), "%s%zu", prefix, n);
        int rc = put_start(s, &CLIENT_A, NULL, key, 1, soft, NULL, now + n, NULL);
        if (rc == CR_ERR_NO_AVAILABLE_HANDLE) break;
        assert_int_equal(rc, CR_OK);
        assert_int_equal(put_end(s, &CLIENT_A, NULL, key, now + n), CR_OK);
    }
    return n;
}

static void test_eviction_watermark(void **state) {
    (void)state;
    cr_store *s = make_store(NULL);
    mount_n(s, &CLIENT_A, 4, 64 * KIB);
    size_t soft = fill(s, "soft", 10, true, 0);
    size_t plain = fill(s, "plain", 1000, false, 100);
    assert_int_equal(soft, 10);
    assert_true(plain >= 40);
    /* lease the five oldest plain objects and hard-pin one */
    char key[32];
    for (int i = 0; i < 5; i++) {
        snprintf(key, sizeof(key), "plain%d", i);
        assert_int_equal(cr_store_exist_key(s, NULL, key, (uint32_t)strlen(key), 5000), CR_OK);
    }
    assert_int_equal(cr_store_set_hard_pin(s, NULL, "plain5", 6, true), CR_OK);
    struct cr_store_usage u;
    cr_store_usage(s, &u);
    assert_true(u.ratio >= 0.95);
    uint64_t target = cr_evict_bytes_to_free(cr_store_get_config(s), &u, false);
    assert_true(target >= (uint64_t)(0.05 * (double)u.capacity_bytes));
    uint64_t rng = 42;
    uint64_t freed = cr_store_evict_pass(s, 6000, &rng, target, 0);
    assert_true(freed >= target);
    cr_store_usage(s, &u);
    assert_true(u.ratio < 0.95);
    for (int i = 0; i < 6; i++) {
        snprintf(key, sizeof(key), "plain%d", i);
        assert_int_equal(get(s, NULL, key, 6001), CR_OK); /* leased / pinned survived */
    }
    for (size_t i = 0; i < soft; i++) {
        snprintf(key, sizeof(key), "soft%zu", i);
        assert_int_equal(get(s, NULL, key, 6001), CR_OK); /* soft-pinned kept */
    }
    struct cr_store_stats st;
    cr_store_get_stats(s, 6001, &st);
    assert_true(st.evictions > 0);
    assert_int_equal(st.evicted_bytes, freed);
    /* Ask for everything at t=20000 (the reads above have expired) with five
     * fresh leases: the soft-pinned go too, leased and hard-pinned never. */
    for (int i = 0; i < 5; i++) {
        snprintf(key, sizeof(key), "plain%d", i);
        cr_store_exist_key(s, NULL, key, (uint32_t)strlen(key), 20000);
    }
    cr_store_evict_pass(s, 20000, &rng, u.capacity_bytes, 0);
    for (int i = 0; i < 6; i++) {
        snprintf(key, sizeof(key), "plain%d", i);
        assert_int_equal(get(s, NULL, key, 20001), CR_OK);
    }
    cr_store_get_stats(s, 20001, &st);
    assert_int_equal(st.object_count, 6); /* 5 leased + 1 hard-pinned */
    cr_store_destroy(s);
}

static void test_eviction_soft_pin_not_allowed(void **state) {
    (void)state;
    cr_store_config cfg;
    cr_store_config_default(&cfg);
    cfg.max_objects = 1000;
    cfg.allow_evict_soft_pinned_objects = false;
    cr_store *s;
    assert_int_equal(cr_store_create(&cfg, NULL, &s), CR_OK);
    mount_n(s, &CLIENT_A, 1, 64 * KIB);
    fill(s, "soft", 4, true, 0);
    fill(s, "plain", 4, false, 10);
    uint64_t rng = 7;
    uint64_t freed = cr_store_evict_pass(s, 100, &rng, 64 * KIB, 0);
    assert_int_equal(freed, 4 * OBJ);
    assert_int_equal(get(s, NULL, "soft0", 101), CR_OK);
    assert_int_equal(get(s, NULL, "plain0", 101), CR_ERR_OBJECT_NOT_FOUND);
    /* soft pin lapses after the TTL without access: then it is plain. */
    struct cr_store_object_view v;
    assert_int_equal(cr_store_object_find(s, NULL, "soft1", 5, 1000, &v), CR_OK);
    assert_true(v.soft_pinned);
    uint64_t later = 11 + cfg.default_kv_soft_pin_ttl_ms;
    assert_int_equal(cr_store_object_find(s, NULL, "soft1", 5, later, &v), CR_OK);
    assert_false(v.soft_pinned);
    assert_int_equal(get(s, NULL, "soft1", later), CR_OK);
    assert_int_equal(cr_store_object_find(s, NULL, "soft1", 5, later + 1, &v), CR_OK);
    assert_true(v.soft_pinned); /* accessed again: pinned again */
    freed = cr_store_evict_pass(s, later + cfg.default_kv_lease_ttl_ms, &rng, 64 * KIB, 0);
    /* soft0 (read at 101), soft2 and soft3 lapsed; only soft1 was renewed */
    assert_int_equal(freed, 3 * OBJ);
    assert_int_equal(get(s, NULL, "soft1", later + cfg.default_kv_lease_ttl_ms), CR_OK);
    cr_store_destroy(s);
}

static void test_evict_choose(void **state) {
    (void)state;
    struct cr_evict_candidate pool[] = {
        {1, 0, 100, 50, false}, {2, 0, 100, 10, true}, {3, 0, 100, 30, false},
        {1, 0, 100, 50, false}, {4, 0, 100, 20, false}, {5, 0, 100, 5, true},
    };
    size_t n = sizeof(pool) / sizeof(pool[0]);
    size_t k = cr_evict_choose(pool, n, 150, 0, true);
    assert_int_equal(k, 2);
    assert_int_equal(pool[0].object_id, 4); /* oldest non-pinned */
    assert_int_equal(pool[1].object_id, 3);
    struct cr_evict_candidate pool2[] = {
        {1, 0, 100, 50, false}, {2, 0, 100, 10, true}, {5, 0, 100, 5, true},
    };
    k = cr_evict_choose(pool2, 3, 250, 0, true);
    assert_int_equal(k, 3);
    assert_int_equal(pool2[0].object_id, 1);
    assert_int_equal(pool2[1].object_id, 5); /* then soft-pinned, oldest first */
    struct cr_evict_candidate pool3[] = {{2, 0, 100, 10, true}, {1, 0, 100, 50, false}};
    assert_int_equal(cr_evict_choose(pool3, 2, 250, 0, false), 1);
    assert_int_equal(cr_evict_choose(pool3, 2, 0, 0, true), 0);
    assert_int_equal(cr_evict_choose(NULL, 0, 10, 0, true), 0);
    cr_store_config cfg;
    cr_store_config_default(&cfg);
    struct cr_store_usage u = {.capacity_bytes = 1000, .used_bytes = 900, .ratio = 0.9};
    assert_int_equal(cr_evict_bytes_to_free(&cfg, &u, false), 0);
    assert_int_equal(cr_evict_bytes_to_free(&cfg, &u, true), 50);
    u = (struct cr_store_usage){.capacity_bytes = 1000, .used_bytes = 1000, .ratio = 1.0};
    assert_int_equal(cr_evict_bytes_to_free(&cfg, &u, false), 100);
}

static void test_evict_revalidates(void **state) {
    (void)state;
    cr_store *s = make_store(NULL);
    mount_n(s, &CLIENT_A, 1, 64 * KIB);
    put(s, NULL, "k", 0);
    uint64_t rng = 99;
    struct cr_evict_candidate c[4];
    size_t n = cr_store_sample_eviction_candidates(s, 10, &rng, 4, c);
    assert_true(n >= 1);
    assert_int_equal(c[0].size_bytes, OBJ);
    assert_int_equal(get(s, NULL, "k", 11), CR_OK); /* leased after sampling */
    assert_false(cr_store_evict(s, c[0].object_id, c[0].generation, 12));
    assert_true(cr_store_evict(s, c[0].object_id, c[0].generation, 20000));
    assert_false(cr_store_evict(s, c[0].object_id, c[0].generation, 20000)); /* gone */
    put(s, NULL, "k2", 20001); /* may reuse the slot: the generation differs */
    assert_false(cr_store_evict(s, c[0].object_id, c[0].generation, 20002));
    assert_false(cr_store_evict(s, 12345, 0, 20002));
    cr_store_destroy(s);
}

static void test_zombie_preempt_and_reclaim(void **state) {
    (void)state;
    cr_store *s = make_store(NULL);
    mount_n(s, &CLIENT_A, 1, 64 * KIB);
    assert_int_equal(put_start(s, &CLIENT_A, NULL, "z", 1, false, NULL, 0, NULL), CR_OK);
    assert_int_equal(put_start(s, &CLIENT_B, NULL, "z", 1, false, NULL, 29999, NULL),
                     CR_ERR_OBJECT_ALREADY_EXISTS);
    assert_int_equal(put_start(s, &CLIENT_B, NULL, "z", 1, false, NULL, 30000, NULL), CR_OK);
    assert_int_equal(used(s), 2 * OBJ); /* old space parked, not reused */
    struct cr_store_stats st;
    cr_store_get_stats(s, 30000, &st);
    assert_int_equal(st.zombies_preempted, 1);
    assert_int_equal(st.discarded_parked, 1);
    assert_int_equal(put_end(s, &CLIENT_A, NULL, "z", 30001), CR_ERR_ILLEGAL_CLIENT);
    assert_int_equal(put_end(s, &CLIENT_B, NULL, "z", 30001), CR_OK);
    /* a second zombie that nobody preempts */
    assert_int_equal(put_start(s, &CLIENT_C, NULL, "y", 1, false, NULL, 100, NULL), CR_OK);
    assert_int_equal(cr_store_reclaim_discarded(s, 599999), 0);
    assert_int_equal(used(s), 3 * OBJ);
    assert_int_equal(cr_store_reclaim_discarded(s, 600000), OBJ);
    assert_int_equal(used(s), 2 * OBJ);
    assert_int_equal(cr_store_reclaim_discarded(s, 600100), OBJ);
    assert_int_equal(get(s, NULL, "y", 600101), CR_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(get(s, NULL, "z", 600101), CR_OK);
    cr_store_get_stats(s, 600101, &st);
    assert_int_equal(st.zombie_bytes_reclaimed, 2 * OBJ);
    assert_int_equal(st.discarded_parked, 0);
    assert_int_equal(used(s), OBJ);
    cr_store_destroy(s);
}

static void test_client_expiry(void **state) {
    (void)state;
    cr_store *s = make_store(NULL);
    mount(s, &CLIENT_A, "a0", 0, 64 * KIB, "10.0.0.1:1");
    mount(s, &CLIENT_B, "b0", 0, 64 * KIB, "10.0.0.2:1");
    assert_int_equal(put_start(s, &CLIENT_A, NULL, "on-a", 1, false, "a0", 0, NULL), CR_OK);
    assert_int_equal(put_end(s, &CLIENT_A, NULL, "on-a", 0), CR_OK);
    assert_int_equal(put_start(s, &CLIENT_A, NULL, "a-writes", 1, false, "b0", 0, NULL), CR_OK);
    assert_int_equal(put_start(s, &CLIENT_B, NULL, "b-writes", 1, false, "b0", 0, NULL), CR_OK);
    assert_int_equal(cr_store_client_ping(s, &CLIENT_B, 9000, NULL), CR_OK);
    assert_int_equal(cr_store_expire_clients(s, 10000), 0);
    assert_int_equal(cr_store_mounted_count(s), 2);
    bool known = false;
    assert_int_equal(cr_store_client_ping(s, &CLIENT_B, 15000, &known), CR_OK);
    assert_true(known);
    assert_int_equal(cr_store_expire_clients(s, 10001), 1);
    assert_int_equal(cr_store_mounted_count(s), 1); /* A's segment went with A */
    struct cr_store_segment_view v;
    assert_int_equal(cr_store_segment_find(s, "a0", &v), CR_ERR_SEGMENT_NOT_FOUND);
    assert_int_equal(cr_store_segment_find(s, "b0", &v), CR_OK);
    assert_int_equal(v.used_bytes, OBJ); /* only B's put remains */
    assert_int_equal(get(s, NULL, "on-a", 10002), CR_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(put_end(s, &CLIENT_A, NULL, "a-writes", 10002), CR_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(put_end(s, &CLIENT_B, NULL, "b-writes", 10002), CR_OK);
    struct cr_store_stats st;
    cr_store_get_stats(s, 10003, &st);
    assert_int_equal(st.clients_expired, 1);
    assert_int_equal(st.client_count, 1);
    assert_int_equal(st.segment_count, 1);
    /* A, forgotten, is told so by every ping until it mounts again. */
    assert_int_equal(cr_store_client_ping(s, &CLIENT_A, 10004, &known), CR_OK);
    assert_false(known);
    assert_int_equal(cr_store_client_ping(s, &CLIENT_A, 10005, &known), CR_OK);
    assert_false(known);
    mount(s, &CLIENT_A, "a0", 0, 64 * KIB, "10.0.0.1:1");
    assert_int_equal(cr_store_client_ping(s, &CLIENT_A, 10006, &known), CR_OK);
    assert_true(known);
    assert_int_equal(cr_store_expire_clients(s, 25001), 2); /* A and B stop too */
    cr_store_get_stats(s, 25001, &st);
    assert_int_equal(st.object_count, 0);
    assert_int_equal(st.capacity_bytes, 0);
    cr_store_destroy(s);
}

/* After a restart the restored owners are marked awaiting: their segments
 * say so until the owner's own next call, or until the TTL expires them. */
static void test_client_awaiting(void **state) {
    (void)state;
    cr_store *s = make_store(NULL);
    mount(s, &CLIENT_A, "a0", 0, 64 * KIB, "10.0.0.1:1");
    mount(s, &CLIENT_B, "b0", 0, 64 * KIB, "10.0.0.2:1");
    struct cr_store_segment_view v;
    assert_int_equal(cr_store_segment_find(s, "a0", &v), CR_OK);
    assert_false(v.awaiting_owner);
    cr_store_client_set_awaiting(s, &CLIENT_A);
    cr_store_client_set_awaiting(s, &CLIENT_B);
    cr_store_client_set_awaiting(s, &CLIENT_C); /* unknown: ignored */
    assert_false(cr_store_client_awaiting(s, &CLIENT_C));
    assert_int_equal(cr_store_segment_find(s, "a0", &v), CR_OK);
    assert_true(v.awaiting_owner);
    assert_int_equal(cr_store_client_ping(s, &CLIENT_B, 5000, NULL), CR_OK);
    assert_int_equal(cr_store_segment_find(s, "b0", &v), CR_OK);
    assert_false(v.awaiting_owner); /* B reclaimed it */
    assert_int_equal(cr_store_segment_find(s, "a0", &v), CR_OK);
    assert_true(v.awaiting_owner);
    assert_int_equal(cr_store_expire_clients(s, 10001), 1); /* A never called */
    assert_int_equal(cr_store_segment_find(s, "a0", &v), CR_ERR_SEGMENT_NOT_FOUND);
    cr_store_destroy(s);
}

/* A client's secret: issued once to a known client, checked in full,
 * gone with the client at expiry (then the id is free for anyone). */
static void test_client_secret(void **state) {
    (void)state;
    cr_store *s = make_store(NULL);
    static const uint8_t SECRET[CR_STORE_CLIENT_SECRET_BYTES] = {1, 2, 3, 4, 5, 6, 7, 8,
                                                                 9, 10, 11, 12, 13, 14, 15, 16};
    static const uint8_t OTHER[CR_STORE_CLIENT_SECRET_BYTES] = {1, 2, 3, 4, 5, 6, 7, 8,
                                                                9, 10, 11, 12, 13, 14, 15, 17};
    bool issued = true;
    /* Unknown: nothing issued, nothing required. */
    assert_int_equal(cr_store_client_issue_secret(s, &CLIENT_A, SECRET, &issued), CR_OK);
    assert_false(issued);
    assert_int_equal(cr_store_client_check_secret(s, &CLIENT_A, NULL, 0), CR_OK);
    mount(s, &CLIENT_A, "a0", 0, 64 * KIB, "10.0.0.1:1");
    /* Known without a secret yet: anything passes, then one is issued once. */
    assert_true(cr_store_client_wants_secret(s, &CLIENT_A));
    assert_int_equal(cr_store_client_check_secret(s, &CLIENT_A, NULL, 0), CR_OK);
    assert_int_equal(cr_store_client_issue_secret(s, &CLIENT_A, SECRET, &issued), CR_OK);
    assert_true(issued);
    assert_int_equal(cr_store_client_issue_secret(s, &CLIENT_A, OTHER, &issued), CR_OK);
    assert_false(issued); /* the first one stays */
    assert_false(cr_store_client_wants_secret(s, &CLIENT_A));
    assert_int_equal(cr_store_client_check_secret(s, &CLIENT_A, SECRET, sizeof(SECRET)), CR_OK);
    assert_int_equal(cr_store_client_check_secret(s, &CLIENT_A, NULL, 0), CR_ERR_ILLEGAL_CLIENT);
    assert_non_null(strstr(cr_store_last_error(s), "carries none"));
    assert_int_equal(cr_store_client_check_secret(s, &CLIENT_A, OTHER, sizeof(OTHER)),
                     CR_ERR_ILLEGAL_CLIENT);
    assert_non_null(strstr(cr_store_last_error(s), "another secret"));
    /* A prefix of the right secret is wrong too. */
    assert_int_equal(cr_store_client_check_secret(s, &CLIENT_A, SECRET, 8), CR_ERR_ILLEGAL_CLIENT);
    /* Another client is not affected. */
    assert_int_equal(cr_store_client_check_secret(s, &CLIENT_B, NULL, 0), CR_OK);
    /* Expiry takes the secret: the id is free, then issued anew. */
    assert_int_equal(cr_store_expire_clients(s, 100000), 1);
    assert_int_equal(cr_store_client_check_secret(s, &CLIENT_A, NULL, 0), CR_OK);
    mount(s, &CLIENT_A, "a0", 0, 64 * KIB, "10.0.0.1:1");
    assert_int_equal(cr_store_client_check_secret(s, &CLIENT_A, SECRET, sizeof(SECRET)), CR_OK);
    assert_int_equal(cr_store_client_issue_secret(s, &CLIENT_A, OTHER, &issued), CR_OK);
    assert_true(issued);
    assert_int_equal(cr_store_client_check_secret(s, &CLIENT_A, SECRET, sizeof(SECRET)),
                     CR_ERR_ILLEGAL_CLIENT);
    cr_store_destroy(s);
}

/* #28 item 4: a client is bound to the connection that made it known; its
 * secret is due only on that connection (another caller naming the id is
 * not given it), and the binding goes with the client at expiry. */
static void test_client_secret_goes_to_its_connection(void **state) {
    (void)state;
    cr_store *s = make_store(NULL);
    mount_n(s, &CLIENT_B, 1, 1024 * KIB); /* a store server */
    cr_store_set_caller(s, 11);
    assert_int_equal(put_start(s, &CLIENT_A, NULL, "k", 1, false, NULL, 0, NULL), CR_OK);
    cr_store_set_caller(s, 22); /* another connection naming CLIENT_A */
    assert_false(cr_store_client_wants_secret(s, &CLIENT_A));
    cr_store_set_caller(s, 11);
    assert_true(cr_store_client_wants_secret(s, &CLIENT_A));
    assert_int_equal(put_end(s, &CLIENT_A, NULL, "k", 1), CR_OK);
    assert_int_equal(cr_store_expire_clients(s, 100000), 2);
    cr_store_set_caller(s, 22); /* expired: the next to make it known owns it */
    assert_int_equal(put_start(s, &CLIENT_A, NULL, "k2", 1, false, NULL, 100001, NULL),
                     CR_ERR_INVALID_PARAMS); /* no segment left: B expired too */
    mount_n(s, &CLIENT_A, 1, 1024 * KIB);
    assert_true(cr_store_client_wants_secret(s, &CLIENT_A));
    cr_store_destroy(s);
}

static void test_many_clients_expire(void **state) {
    (void)state;
    cr_store *s = make_store(NULL);
    mount(s, &CLIENT_A, "a0", 0, 300 * OBJ, "10.0.0.1:1");
    for (int i = 0; i < 300; i++) {
        struct cr_uuid c = {{0}};
        c.b[0] = (uint8_t)i;
        c.b[1] = (uint8_t)(i >> 8);
        c.b[15] = 7;
        char key[16];
        snprintf(key, sizeof(key), "k%d", i);
        assert_int_equal(put_start(s, &c, NULL, key, 1, false, NULL, 0, NULL), CR_OK);
        assert_int_equal(cr_store_client_ping(s, &c, (uint64_t)(i % 2) * 100000, NULL), CR_OK);
    }
    assert_int_equal(cr_store_client_ping(s, &CLIENT_A, 100000, NULL), CR_OK);
    assert_int_equal(cr_store_expire_clients(s, 100000), 150);
    struct cr_store_stats st;
    cr_store_get_stats(s, 0, &st);
    assert_int_equal(st.client_count, 151);
    assert_int_equal(cr_store_expire_clients(s, 200001), 151);
    cr_store_destroy(s);
}

/* Issue 10 item 7: one caller could fill the shared tables.  A Ping from an
 * id the store does not know records nothing; one client mounts at most
 * max_segments_per_client segments of at least min_segment_size_bytes, and
 * creates at most max_tenants_per_client tenants; each refusal names the
 * bound and its flag, and other clients are not affected. */
static void test_per_client_bounds(void **state) {
    (void)state;
    cr_store_config cfg;
    cr_store_config_default(&cfg);
    cfg.max_segments_per_client = 3;
    cfg.max_tenants_per_client = 2;
    cfg.min_segment_size_bytes = 4096;
    cr_store *s = NULL;
    assert_int_equal(cr_store_create(&cfg, NULL, &s), CR_OK);
    for (int i = 0; i < 5000; i++) {
        struct cr_uuid made_up = {{0}};
        memcpy(made_up.b, &i, sizeof(i));
        made_up.b[15] = 9;
        assert_int_equal(cr_store_client_ping(s, &made_up, 1, NULL), CR_OK);
    }
    struct cr_store_stats st;
    cr_store_get_stats(s, 1, &st);
    assert_int_equal(st.client_count, 0);
    struct cr_store_segment_params tiny = {"tiny", 0, 1, "10.0.0.1:1", "tcp"};
    assert_int_equal(cr_store_mount_segment(s, &CLIENT_A, &tiny, 1), CR_ERR_INVALID_PARAMS);
    assert_non_null(strstr(cr_store_last_error(s), "--min-segment-size-bytes"));
    for (int i = 0; i < 3; i++) {
        char name[16];
        snprintf(name, sizeof(name), "a%d", i);
        mount(s, &CLIENT_A, name, (uint64_t)i << 20, 64 * KIB, "10.0.0.1:1");
    }
    struct cr_store_segment_params fourth = {"a3", 3u << 20, 64 * KIB, "10.0.0.1:1", "tcp"};
    assert_int_equal(cr_store_mount_segment(s, &CLIENT_A, &fourth, 1), CR_ERR_NOMEM);
    assert_non_null(strstr(cr_store_last_error(s), "--max-segments-per-client"));
    mount(s, &CLIENT_B, "b0", 0, 64 * KIB, "10.0.0.2:1"); /* B is not affected */
    assert_int_equal(put_start(s, &CLIENT_A, "t1", "k", 1, false, NULL, 1, NULL), CR_OK);
    assert_int_equal(put_start(s, &CLIENT_A, "t2", "k", 1, false, NULL, 1, NULL), CR_OK);
    assert_int_equal(put_start(s, &CLIENT_A, "t1", "k2", 1, false, NULL, 1, NULL), CR_OK);
    assert_int_equal(put_start(s, &CLIENT_A, "t3", "k", 1, false, NULL, 1, NULL), CR_ERR_NOMEM);
    assert_non_null(strstr(cr_store_last_error(s), "--max-tenants-per-client"));
    assert_int_equal(put_start(s, &CLIENT_B, "t3", "k", 1, false, NULL, 1, NULL), CR_OK);
    assert_int_equal(put_start(s, &CLIENT_A, "t3", "k2", 1, false, NULL, 1, NULL), CR_OK);
    cr_store_destroy(s);
}

static void test_preferred_segment(void **state) {
    (void)state;
    cr_store *s = make_store(NULL);
    mount_n(s, &CLIENT_A, 16, 64 * KIB);
    struct cr_store_replica_list l;
    char key[32];
    for (int i = 0; i < 10; i++) {
        snprintf(key, sizeof(key), "p%d", i);
        assert_int_equal(put_start(s, &CLIENT_A, NULL, key, 1, false, "seg7", 0, &l), CR_OK);
        assert_string_equal(l.replicas[0].segment_name, "seg7");
    }
    assert_int_equal(put_start(s, &CLIENT_A, NULL, "q", 1, false, "missing", 0, &l), CR_OK);
    assert_int_equal(l.count, 1);
    /* seg7 holds 64 KiB: once full, allocation falls back elsewhere */
    for (int i = 10; i < 40; i++) {
        snprintf(key, sizeof(key), "p%d", i);
        assert_int_equal(put_start(s, &CLIENT_A, NULL, key, 1, false, "seg7", 0, &l), CR_OK);
        if (i >= 16) assert_string_not_equal(l.replicas[0].segment_name, "seg7");
    }
    cr_store_destroy(s);
}

static void test_distinct_and_best_effort(void **state) {
    (void)state;
    cr_store *s = make_store(NULL);
    mount_n(s, &CLIENT_A, 4, 64 * KIB);
    struct cr_store_replica_list l;
    char key[32];
    for (int i = 0; i < 8; i++) {
        snprintf(key, sizeof(key), "r%d", i);
        assert_int_equal(put_start(s, &CLIENT_A, NULL, key, 4, false, NULL, 0, &l), CR_OK);
        assert_int_equal(l.count, 4);
        for (uint32_t a = 0; a < 4; a++)
            for (uint32_t b = a + 1; b < 4; b++)
                assert_int_not_equal(l.replicas[a].segment_id, l.replicas[b].segment_id);
    }
    /* fill seg0..seg2 completely through the preferred path */
    for (int seg = 0; seg < 3; seg++) {
        char name[16];
        snprintf(name, sizeof(name), "seg%d", seg);
        for (int i = 0; i < 8; i++) {
            snprintf(key, sizeof(key), "f%d-%d", seg, i);
            assert_int_equal(put_start(s, &CLIENT_A, NULL, key, 1, false, name, 0, &l), CR_OK);
            assert_string_equal(l.replicas[0].segment_name, name);
        }
    }
    assert_int_equal(put_start(s, &CLIENT_A, NULL, "best", 3, false, NULL, 0, &l), CR_OK);
    assert_int_equal(l.count, 1); /* fewer replicas rather than failure */
    assert_string_equal(l.replicas[0].segment_name, "seg3");
    int rc;
    snprintf(key, sizeof(key), "A-fill");
    while ((rc = put_start(s, &CLIENT_A, NULL, key, 1, false, NULL, 0, &l)) == CR_OK) key[0]++;
    assert_int_equal(rc, CR_ERR_NO_AVAILABLE_HANDLE);
    assert_true(cr_store_no_room_evictable(s)); /* full, but freeing space would fit it */
    uint64_t before = used(s);
    assert_int_equal(put_start(s, &CLIENT_A, NULL, "none", 2, false, NULL, 0, &l),
                     CR_ERR_NO_AVAILABLE_HANDLE);
    assert_int_equal(used(s), before);
    cr_store_destroy(s);
}

/* An object larger than every mounted segment can never fit: refused with
 * a message that says so, and marked as not worth an eviction (the master
 * would otherwise throw away objects for a put that still fails). */
static void test_larger_than_every_segment_never_asks_for_eviction(void **state) {
    (void)state;
    cr_store *s = make_store(NULL);
    mount(s, &CLIENT_A, "small", 1ull << 32, 64 * KIB, "10.0.0.1:1");
    mount(s, &CLIENT_A, "big", 2ull << 32, 256 * KIB, "10.0.0.2:1");
    struct cr_store_replica_list l;
    struct cr_store_put_params p = {.key = "huge", .key_len = 4, .value_length = 1ull << 40,
                                    .replica_num = 1};
    assert_int_equal(cr_store_put_start(s, &CLIENT_A, &p, 0, &l), CR_ERR_NO_AVAILABLE_HANDLE);
    assert_false(cr_store_no_room_evictable(s));
    assert_non_null(strstr(cr_store_last_error(s), "can never fit"));
    assert_non_null(strstr(cr_store_last_error(s), "262144 bytes"));
    p.value_length = 200 * KIB; /* fits "big" when empty */
    assert_int_equal(cr_store_put_start(s, &CLIENT_A, &p, 0, &l), CR_OK);
    p.key = "second";
    p.key_len = 6;
    assert_int_equal(cr_store_put_start(s, &CLIENT_A, &p, 0, &l), CR_ERR_NO_AVAILABLE_HANDLE);
    assert_true(cr_store_no_room_evictable(s)); /* "big" could hold it once freed */
    cr_store_destroy(s);
}

static void test_segments(void **state) {
    (void)state;
    cr_store *s = make_store(NULL);
    struct cr_store_segment_params p = {"s", 4096, 64 * KIB, "h:1", "tcp"};
    assert_int_equal(cr_store_mount_segment(s, &CLIENT_A, &p, 0), CR_OK);
    assert_int_equal(cr_store_mount_segment(s, &CLIENT_B, &p, 0), CR_ERR_SEGMENT_ALREADY_EXISTS);
    struct cr_store_segment_params q = {"t", 8192, 64 * KIB, "h:1", "tcp"};
    assert_int_equal(cr_store_mount_segment(s, &CLIENT_A, &q, 0), CR_ERR_INVALID_PARAMS);
    assert_int_equal(cr_store_mount_segment(s, &CLIENT_B, &q, 0), CR_OK); /* other client */
    struct cr_store_segment_params z = {"z", 0, 0, "h:1", "tcp"};
    assert_int_equal(cr_store_mount_segment(s, &CLIENT_A, &z, 0), CR_ERR_INVALID_PARAMS);
    struct cr_store_segment_params badproto = {"bp", 1ull << 40, 4096, "h:1", "udp"};
    assert_int_equal(cr_store_mount_segment(s, &CLIENT_A, &badproto, 0), CR_ERR_INVALID_PARAMS);
    struct cr_store_segment_params ovf = {"o", UINT64_MAX - 10, 4096, "h:1", "rdma"};
    assert_int_equal(cr_store_mount_segment(s, &CLIENT_A, &ovf, 0), CR_ERR_INVALID_PARAMS);
    assert_int_equal(cr_store_remount_segment(s, &CLIENT_A, &p, 1), CR_OK);
    struct cr_store_segment_params p2 = p;
    p2.size = 128 * KIB;
    assert_int_equal(cr_store_remount_segment(s, &CLIENT_A, &p2, 1),
                     CR_ERR_SEGMENT_ALREADY_EXISTS);
    assert_int_equal(cr_store_remount_segment(s, &CLIENT_B, &p, 1),
                     CR_ERR_SEGMENT_ALREADY_EXISTS);
    uint32_t cursor = 0, seen = 0;
    struct cr_store_segment_view v;
    while (cr_store_segment_next(s, &cursor, &v)) seen++;
    assert_int_equal(seen, 2);
    assert_int_equal(cr_store_unmount_segment(s, NULL, "nope", NULL), CR_ERR_SEGMENT_NOT_FOUND);
    assert_int_equal(cr_store_unmount_segment(s, &CLIENT_B, "s", NULL), CR_ERR_ILLEGAL_CLIENT);
    assert_int_equal(put_start(s, &CLIENT_A, NULL, "k1", 1, false, "s", 0, NULL), CR_OK);
    assert_int_equal(put_end(s, &CLIENT_A, NULL, "k1", 0), CR_OK);
    assert_int_equal(put_start(s, &CLIENT_A, NULL, "k2", 2, false, "s", 0, NULL), CR_OK);
    assert_int_equal(put_end(s, &CLIENT_A, NULL, "k2", 0), CR_OK);
    uint64_t freed = 99;
    assert_int_equal(cr_store_unmount_segment(s, &CLIENT_A, "s", &freed), CR_OK);
    assert_int_equal(freed, 1); /* k1 had only that replica; k2 keeps one on t */
    assert_int_equal(get(s, NULL, "k1", 1), CR_ERR_OBJECT_NOT_FOUND);
    struct cr_store_replica_list l;
    assert_int_equal(cr_store_get_replica_list(s, NULL, "k2", 2, 1, &l), CR_OK);
    assert_int_equal(l.count, 1);
    assert_string_equal(l.replicas[0].segment_name, "t");
    assert_int_equal(cr_store_mount_segment(s, &CLIENT_A, &p, 2), CR_OK); /* name free again */
    cr_store_destroy(s);
}

struct ip_rec {
    char hosts[8][64];
    size_t index[8];
    int count;
};

static void ip_cb(void *ctx, size_t index, const char *host, size_t len) {
    struct ip_rec *r = ctx;
    assert_true(r->count < 8);
    snprintf(r->hosts[r->count], 64, "%.*s", (int)len, host);
    r->index[r->count++] = index;
}

static void test_batch_query_ip(void **state) {
    (void)state;
    cr_store *s = make_store(NULL);
    mount(s, &CLIENT_A, "a0", 0, 4096, "10.0.0.1:100");
    mount(s, &CLIENT_A, "a1", 4096, 4096, "10.0.0.1:101");
    mount(s, &CLIENT_A, "a2", 8192, 4096, "10.0.0.2:100");
    mount(s, &CLIENT_B, "b0", 0, 4096, "[fe80::1]:100");
    struct cr_uuid ids[3] = {CLIENT_A, CLIENT_C, CLIENT_B};
    struct ip_rec r = {0};
    assert_int_equal(cr_store_batch_query_ip(s, ids, 3, ip_cb, &r), CR_OK);
    assert_int_equal(r.count, 3);
    assert_string_equal(r.hosts[0], "10.0.0.1");
    assert_string_equal(r.hosts[1], "10.0.0.2");
    assert_int_equal(r.index[1], 0);
    assert_string_equal(r.hosts[2], "fe80::1");
    assert_int_equal(r.index[2], 2);
    cr_store_destroy(s);
}

static void test_batch_replica_clear(void **state) {
    (void)state;
    struct recorder rec = {0};
    cr_store *s = make_store(&rec);
    mount_n(s, &CLIENT_A, 2, 64 * KIB);
    assert_int_equal(put_start(s, &CLIENT_A, NULL, "two", 2, false, NULL, 0, NULL), CR_OK);
    assert_int_equal(put_end(s, &CLIENT_A, NULL, "two", 0), CR_OK);
    put(s, NULL, "one", 0);
    put(s, NULL, "leased", 0);
    assert_int_equal(get(s, NULL, "leased", 10), CR_OK);
    const char *keys[] = {"two", "one", "leased", "missing"};
    uint32_t lens[] = {3, 3, 6, 7};
    bool cleared[4];
    const char *bad[] = {"ok", ""};
    uint32_t bad_lens[] = {2, 0};
    assert_int_equal(cr_store_batch_replica_clear(s, NULL, bad, bad_lens, 2, &CLIENT_A, NULL, 20,
                                                  cleared),
                     CR_ERR_INVALID_PARAMS);
    assert_int_equal(cr_store_batch_replica_clear(s, NULL, keys, lens, 4, &CLIENT_A, "nope", 20,
                                                  cleared),
                     CR_ERR_SEGMENT_NOT_FOUND);
    assert_int_equal(cr_store_batch_replica_clear(s, NULL, keys, lens, 4, &CLIENT_B, NULL, 20,
                                                  cleared),
                     CR_OK);
    assert_false(cleared[0] || cleared[1] || cleared[2] || cleared[3]); /* not B's objects */
    rec.count = 0;
    struct cr_store_replica_list l;
    struct cr_store_object_view view; /* a view grants no lease */
    assert_int_equal(cr_store_object_find(s, NULL, "two", 3, 20, &view), CR_OK);
    const char *seg = view.replicas.replicas[0].segment_name;
    char segname[16];
    snprintf(segname, sizeof(segname), "%s", seg);
    assert_int_equal(cr_store_batch_replica_clear(s, NULL, keys, lens, 1, &CLIENT_A, segname,
                                                  20, cleared),
                     CR_OK);
    assert_true(cleared[0]);
    assert_int_equal(rec.count, 1);
    assert_int_equal(rec.ev[0].kind, CR_STORE_CHANGE_UPDATE);
    assert_int_equal(rec.ev[0].replicas, 1);
    assert_int_equal(cr_store_get_replica_list(s, NULL, "two", 3, 6000, &l), CR_OK);
    assert_int_equal(l.count, 1);
    assert_string_not_equal(l.replicas[0].segment_name, segname);
    /* clear everything at t=6000: "two" is leased again (just read), "leased" expired */
    assert_int_equal(cr_store_batch_replica_clear(s, NULL, keys, lens, 4, &CLIENT_A, NULL, 6000,
                                                  cleared),
                     CR_OK);
    assert_false(cleared[0]);
    assert_true(cleared[1]);
    assert_true(cleared[2]);
    assert_false(cleared[3]);
    assert_int_equal(get(s, NULL, "one", 6001), CR_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(get(s, NULL, "two", 6001), CR_OK);
    cr_store_destroy(s);
}

static void test_regex(void **state) {
    (void)state;
    cr_store *s = make_store(NULL);
    mount_n(s, &CLIENT_A, 1, 1024 * KIB);
    put(s, NULL, "model/a/1", 0);
    put(s, NULL, "model/a/2", 0);
    put(s, NULL, "model/b/1", 0);
    uint64_t removed = 77;
    assert_int_equal(cr_store_remove_by_regex(s, NULL, "model/(a", false, 1, &removed),
                     CR_ERR_INVALID_PARAMS);
    assert_non_null(strstr(cr_store_last_error(s), "missing closing parenthesis"));
    assert_int_equal(removed, 0);
    char *longkey = malloc(4001);
    memset(longkey, 'a', 3999);
    longkey[3999] = 'b';
    longkey[4000] = '\0';
    put(s, NULL, longkey, 0);
    assert_int_equal(cr_store_remove_by_regex(s, NULL, "^(a+)+$", false, 1, &removed),
                     CR_ERR_INVALID_PARAMS);
    assert_non_null(strstr(cr_store_last_error(s), "regex too expensive"));
    assert_int_equal(get(s, NULL, longkey, 2), CR_OK); /* nothing removed */
    assert_int_equal(get(s, NULL, "model/a/1", 100), CR_OK); /* lease until 5100 */
    assert_int_equal(cr_store_remove_by_regex(s, NULL, "^model/a/", false, 200, &removed), CR_OK);
    assert_int_equal(removed, 1); /* model/a/1 is leased */
    assert_int_equal(cr_store_remove_by_regex(s, NULL, "^model/a/", true, 200, &removed), CR_OK);
    assert_int_equal(removed, 1);
    assert_int_equal(cr_store_remove_by_regex(s, "other", "model", true, 200, &removed), CR_OK);
    assert_int_equal(removed, 0);
    assert_int_equal(get(s, NULL, "model/b/1", 201), CR_OK);
    free(longkey);
    cr_store_destroy(s);
}

struct regex_rec {
    int count;
    uint32_t replicas;
};

static void regex_cb(void *ctx, const char *key, uint32_t key_len,
                     const struct cr_store_replica_list *l) {
    struct regex_rec *r = ctx;
    assert_true(key_len > 0 && key[0] == 'x');
    r->count++;
    r->replicas += l->count;
}

static void test_regex_get_grants_lease(void **state) {
    (void)state;
    cr_store *s = make_store(NULL);
    mount_n(s, &CLIENT_A, 1, 1024 * KIB);
    put(s, NULL, "x1", 0);
    put(s, NULL, "x2", 0);
    put(s, NULL, "y1", 0);
    assert_int_equal(put_start(s, &CLIENT_A, NULL, "x3", 1, false, NULL, 0, NULL), CR_OK);
    struct regex_rec r = {0};
    assert_int_equal(cr_store_get_replica_list_by_regex(s, NULL, "^x", 1000, regex_cb, &r), CR_OK);
    assert_int_equal(r.count, 2); /* x3 is in flight */
    assert_int_equal(r.replicas, 2);
    assert_int_equal(rm(s, NULL, "x1", false, 1001), CR_ERR_OBJECT_HAS_LEASE);
    assert_int_equal(rm(s, NULL, "y1", false, 1001), CR_OK);
    assert_int_equal(cr_store_get_replica_list_by_regex(s, NULL, "[", 1000, regex_cb, &r),
                     CR_ERR_INVALID_PARAMS);
    cr_store_destroy(s);
}

/* Past regex_max_matches a regex call fails whole: no callback, no lease,
 * nothing removed; at the bound it succeeds. */
static void test_regex_match_bound(void **state) {
    (void)state;
    cr_store_config cfg;
    cr_store_config_default(&cfg);
    cfg.regex_max_matches = 3;
    cr_store *s;
    assert_int_equal(cr_store_create(&cfg, NULL, &s), CR_OK);
    mount_n(s, &CLIENT_A, 1, 1024 * KIB);
    const char *keys[] = {"x/0", "x/1", "x/2", "x/3"};
    for (int i = 0; i < 4; i++) put(s, NULL, keys[i], 0);
    put(s, NULL, "y", 0);
    struct regex_rec r = {0};
    assert_int_equal(cr_store_get_replica_list_by_regex(s, NULL, "^x/", 10, regex_cb, &r),
                     CR_ERR_INVALID_PARAMS);
    assert_non_null(strstr(cr_store_last_error(s), "regex_max_matches"));
    assert_int_equal(r.count, 0);
    uint64_t removed = 77;
    assert_int_equal(cr_store_remove_by_regex(s, NULL, "^x/", true, 10, &removed),
                     CR_ERR_INVALID_PARAMS);
    assert_non_null(strstr(cr_store_last_error(s), "more than 3 keys"));
    assert_int_equal(removed, 0);
    for (int i = 0; i < 4; i++) /* all there, none leased by the refused get */
        assert_int_equal(rm(s, NULL, keys[i], false, 11), CR_OK);
    for (int i = 0; i < 4; i++) put(s, NULL, keys[i], 20);
    assert_int_equal(cr_store_get_replica_list_by_regex(s, NULL, "^x/[0-2]", 30, regex_cb, &r),
                     CR_OK);
    assert_int_equal(r.count, 3);
    assert_int_equal(cr_store_remove_by_regex(s, NULL, "^x/[1-3]", true, 30, &removed), CR_OK);
    assert_int_equal(removed, 3);
    cfg.regex_max_matches = 0;
    char msg[128];
    assert_int_equal(cr_store_config_validate(&cfg, msg, sizeof(msg)), CR_ERR_INVALID_PARAMS);
    assert_non_null(strstr(msg, "regex_max_matches"));
    cr_store_destroy(s);
}

static void test_tenant_isolation(void **state) {
    (void)state;
    cr_store *s = make_store(NULL);
    mount_n(s, &CLIENT_A, 1, 1024 * KIB);
    put(s, "t1", "k", 0);
    assert_int_equal(get(s, "t2", "k", 1), CR_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(get(s, NULL, "k", 1), CR_ERR_OBJECT_NOT_FOUND);
    put(s, "t2", "k", 2);
    put(s, NULL, "k", 2);
    assert_int_equal(rm(s, "t1", "k", false, 3), CR_OK);
    assert_int_equal(get(s, "t1", "k", 4), CR_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(get(s, "t2", "k", 4), CR_OK);
    assert_int_equal(get(s, "default", "k", 4), CR_OK);
    put(s, "t1", "other", 5);
    assert_int_equal(cr_store_remove_all(s, "t1", true, 6), 1);
    assert_int_equal(get(s, "t2", "k", 7), CR_OK);
    assert_int_equal(cr_store_remove_all(s, "unknown", true, 6), 0);
    uint32_t cursor = 0;
    struct cr_store_object_view v[4];
    assert_int_equal(cr_store_list_objects(s, "t2", NULL, 8, &cursor, 4, v), 1);
    assert_string_equal(v[0].tenant, "t2");
    cr_store_destroy(s);
}

/* Keys made ahead (as the RPC gateway makes them, on another thread) name
 * the same objects as the plain calls, per tenant; a PutStart given the
 * made hash files the object where plain lookups find it. */
static void test_keys_made_ahead(void **state) {
    (void)state;
    cr_store *s = make_store(NULL);
    mount_n(s, &CLIENT_A, 2, 1024 * KIB);
    const char *const tenants_used[] = {NULL, "default", "t1"};
    for (int i = 0; i < 3; i++) {
        struct cr_store_key k;
        cr_store_key_make(tenants_used[i], "made", 4, &k);
        if (i == 1) { /* NULL and "default" are the same tenant: same hash */
            struct cr_store_key d;
            cr_store_key_make(NULL, "made", 4, &d);
            assert_true(k.hash == d.hash);
            assert_int_equal(cr_store_exist_key_k(s, &k, 1), CR_OK); /* put under NULL */
            continue;
        }
        struct cr_store_replica_list l;
        struct cr_store_put_params p = {.tenant = k.tenant, .key = k.key, .key_len = k.key_len,
                                        .key_hashed = true, .key_hash = k.hash,
                                        .value_length = OBJ, .replica_num = 1};
        assert_int_equal(cr_store_put_start(s, &CLIENT_A, &p, 0, &l), CR_OK);
        cr_store_prefetch(s, &k, false);
        cr_store_prefetch(s, &k, true);
        assert_int_equal(cr_store_exist_key_k(s, &k, 1), CR_ERR_OBJECT_NOT_READY);
        assert_int_equal(cr_store_put_end_k(s, &CLIENT_A, &k, NULL, 1), CR_OK);
        assert_int_equal(get(s, tenants_used[i], "made", 2), CR_OK); /* plain lookup */
        assert_int_equal(cr_store_get_replica_list_k(s, &k, 2, &l), CR_OK);
        assert_int_equal(l.count, 1);
    }
    /* Another tenant's key with the same bytes is another object. */
    struct cr_store_key t1, t2;
    cr_store_key_make("t1", "made", 4, &t1);
    cr_store_key_make("t2", "made", 4, &t2);
    assert_true(t1.hash != t2.hash);
    assert_int_equal(cr_store_exist_key_k(s, &t2, 3), CR_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(cr_store_remove_k(s, &t1, true, 3), CR_OK);
    assert_int_equal(get(s, "t1", "made", 4), CR_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(get(s, NULL, "made", 4), CR_OK);
    /* A revoke by made key frees an unfinished put. */
    struct cr_store_key r;
    cr_store_key_make("t1", "revoked", 7, &r);
    assert_int_equal(put_start(s, &CLIENT_A, "t1", "revoked", 1, false, NULL, 5, NULL), CR_OK);
    assert_int_equal(cr_store_put_revoke_k(s, &CLIENT_A, &r), CR_OK);
    assert_int_equal(cr_store_exist_key_k(s, &r, 6), CR_ERR_OBJECT_NOT_FOUND);
    cr_store_destroy(s);
}

/* A batch's keys made together (one tenant seed) are the keys made one by
 * one, and a batch run with the loads prefetched ahead (present, missing
 * and unknown-tenant keys; a batch shorter and longer than the lead) finds
 * what the plain calls find. */
static void test_batch_keys_made_and_prefetched(void **state) {
    (void)state;
    cr_store *s = make_store(NULL);
    mount_n(s, &CLIENT_A, 2, 1024 * KIB);
    char names[40][24];
    const char *keys[40];
    uint32_t lens[40];
    for (int i = 0; i < 40; i++) {
        lens[i] = (uint32_t)snprintf(names[i], sizeof(names[i]), "batch-%d", i);
        keys[i] = names[i];
        if (i % 3 != 0) put(s, NULL, names[i], 1);
    }
    const char *const tenants_used[] = {NULL, "default", "nobody"};
    for (int t = 0; t < 3; t++) {
        struct cr_store_key made[40];
        cr_store_keys_make(tenants_used[t], keys, lens, 40, made);
        for (size_t n = 1; n <= 40; n += 13) {
            for (size_t i = 0; i < n; i++) {
                struct cr_store_key one;
                cr_store_key_make(tenants_used[t], keys[i], (uint32_t)strlen(keys[i]), &one);
                assert_true(made[i].hash == one.hash && made[i].key_len == one.key_len);
                assert_ptr_equal(made[i].key, keys[i]);
                cr_store_prefetch_batch(s, made, n, i);
                int want = t < 2 && i % 3 != 0 ? CR_OK : CR_ERR_OBJECT_NOT_FOUND;
                assert_int_equal(cr_store_exist_key_k(s, &made[i], 2), want);
            }
        }
    }
    cr_store_destroy(s);
}

/* A batch of puts names a tenant per entry: keys made together, each with
 * its own tenant, hash as keys made one by one.  Runs of one tenant share
 * the seed, so a tenant change that kept the previous seed would show here:
 * every entry has the same key, and only the tenant tells them apart. */
static void test_batch_keys_made_with_tenants_per_entry(void **state) {
    (void)state;
    const char *const tenants_in[] = {NULL, "", "default", "a", "a", "b", NULL,
                                      "a", "b", "b", "", "ab", "a"};
    enum { N = sizeof(tenants_in) / sizeof(tenants_in[0]) };
    char copies[N][8]; /* equal tenants at different addresses, too */
    const char *tenants_arg[N], *keys[N];
    for (size_t i = 0; i < N; i++) {
        keys[i] = "same-key";
        tenants_arg[i] = tenants_in[i];
        if (tenants_in[i] != NULL && i % 2 == 1) {
            snprintf(copies[i], sizeof(copies[i]), "%s", tenants_in[i]);
            tenants_arg[i] = copies[i];
        }
    }
    struct cr_store_key made[N];
    struct cr_store_key_maker maker = {0};
    for (size_t i = 0; i < N; i++)
        cr_store_key_make_next(&maker, tenants_arg[i], keys[i], 8, &made[i]);
    for (size_t i = 0; i < N; i++) {
        struct cr_store_key one;
        cr_store_key_make(tenants_in[i], keys[i], 8, &one);
        assert_true(made[i].hash == one.hash);
        assert_int_equal(made[i].key_len, 8);
        assert_ptr_equal(made[i].key, keys[i]);
        assert_ptr_equal(made[i].tenant, tenants_arg[i]);
    }
    assert_true(made[3].hash != made[5].hash && made[0].hash != made[3].hash &&
                made[11].hash != made[12].hash); /* the tenants do tell them apart */
}

static uint64_t tenants(cr_store *s) {
    struct cr_store_stats st;
    cr_store_get_stats(s, 0, &st);
    return st.tenant_count;
}

/* The tenant table holds only tenants with objects: 63 tenants emptied by
 * every way an object can go make room for 63 new ones; a tenant that still
 * has an object keeps its place, and a reused id is never the old tenant. */
static void test_empty_tenants_are_reclaimed(void **state) {
    (void)state;
    cr_store *s = make_store(NULL); /* max_tenants 64, "default" included */
    mount_n(s, &CLIENT_A, 1, 1024 * KIB);
    char t[16];
    for (int i = 1; i <= 63; i++) {
        snprintf(t, sizeof(t), "t%d", i);
        if (i == 6 || i == 7) /* in flight: never ended */
            assert_int_equal(put_start(s, &CLIENT_A, t, "k", 1, false, NULL, 0, NULL), CR_OK);
        else
            put(s, t, "k", 0);
    }
    assert_int_equal(tenants(s), 64);
    assert_int_equal(put_start(s, &CLIENT_A, "new", "k", 1, false, NULL, 0, NULL), CR_ERR_NOMEM);
    assert_non_null(strstr(cr_store_last_error(s), "max_tenants"));
    /* Empty t1..t62, each way an object can go; t63 keeps its object. */
    assert_int_equal(rm(s, "t1", "k", false, 1), CR_OK);
    assert_int_equal(cr_store_remove_all(s, "t2", false, 1), 1);
    uint64_t removed;
    assert_int_equal(cr_store_remove_by_regex(s, "t3", "^k$", false, 1, &removed), CR_OK);
    assert_int_equal(removed, 1);
    struct cr_store_object_view v;
    assert_int_equal(cr_store_object_find(s, "t4", "k", 1, 1, &v), CR_OK);
    assert_true(cr_store_evict(s, v.object_id, v.generation, 1));
    const char *k = "k";
    uint32_t klen = 1;
    bool cleared = false;
    assert_int_equal(cr_store_batch_replica_clear(s, "t5", &k, &klen, 1, &CLIENT_A, NULL, 1,
                                                  &cleared),
                     CR_OK);
    assert_true(cleared);
    assert_int_equal(cr_store_put_revoke(s, &CLIENT_A, "t6", "k", 1), CR_OK);
    assert_true(cr_store_reclaim_discarded(s, 600000) > 0); /* t7's zombie put */
    for (int i = 8; i <= 62; i++) {
        snprintf(t, sizeof(t), "t%d", i);
        assert_int_equal(rm(s, t, "k", false, 600001), CR_OK);
    }
    assert_int_equal(tenants(s), 2); /* "default" and t63 */
    for (int i = 1; i <= 62; i++) {
        snprintf(t, sizeof(t), "n%d", i);
        put(s, t, "k", 600002);
    }
    assert_int_equal(tenants(s), 64);
    assert_int_equal(put_start(s, &CLIENT_A, "one-more", "k", 1, false, NULL, 600002, NULL),
                     CR_ERR_NOMEM);
    assert_int_equal(get(s, "t63", "k", 600003), CR_OK); /* kept its place and its key */
    assert_int_equal(cr_store_object_find(s, "t63", "k", 1, 600003, &v), CR_OK);
    assert_string_equal(v.tenant, "t63");
    /* The ids of t1..t62 now belong to n1..n62: the old names find nothing. */
    assert_int_equal(get(s, "t1", "k", 600003), CR_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(get(s, "n1", "k", 600003), CR_OK);
    uint32_t cursor = 0;
    struct cr_store_object_view views[4];
    assert_int_equal(cr_store_list_objects(s, "n1", NULL, 600003, &cursor, 4, views), 1);
    assert_string_equal(views[0].tenant, "n1");
    cursor = 0;
    assert_int_equal(cr_store_list_objects(s, "t2", NULL, 600003, &cursor, 4, views), 0);
    cr_store_destroy(s);
}

/* A tenant whose only object is a zombie put survives the put that preempts
 * it; RemoveAll names its tenant even when it removed the tenant's last
 * object; "default" is never dropped. */
static void test_tenant_outlives_its_last_object_while_in_use(void **state) {
    (void)state;
    struct recorder rec = {0};
    cr_store *s = make_store(&rec);
    mount_n(s, &CLIENT_A, 1, 1024 * KIB);
    assert_int_equal(put_start(s, &CLIENT_A, "z", "k", 1, false, NULL, 0, NULL), CR_OK);
    assert_int_equal(put_start(s, &CLIENT_B, "z", "k", 1, false, NULL, 30000, NULL), CR_OK);
    assert_int_equal(put_end(s, &CLIENT_B, "z", "k", 30001), CR_OK);
    assert_int_equal(get(s, "z", "k", 30002), CR_OK);
    struct cr_store_object_view v;
    assert_int_equal(cr_store_object_find(s, "z", "k", 1, 30002, &v), CR_OK);
    assert_string_equal(v.tenant, "z");
    assert_int_equal(tenants(s), 2);
    assert_int_equal(cr_store_remove_all(s, "z", true, 30003), 1);
    assert_int_equal(rec.ev[rec.count - 1].kind, CR_STORE_CHANGE_REMOVE_ALL);
    assert_string_equal(rec.ev[rec.count - 1].tenant, "z");
    assert_int_equal(tenants(s), 1);
    put(s, NULL, "d", 30004);
    assert_int_equal(rm(s, NULL, "d", true, 30005), CR_OK);
    assert_int_equal(tenants(s), 1); /* "default" stays */
    cr_store_destroy(s);
}

static void test_events(void **state) {
    (void)state;
    struct recorder rec = {0};
    cr_store *s = make_store(&rec);
    mount(s, &CLIENT_A, "a", 0, 64 * KIB, "10.1.1.1:7000");
    mount(s, &CLIENT_A, "b", 1ull << 32, 64 * KIB, "10.1.1.2:7000");
    uint32_t tokens[4] = {1, 2, 3, 4};
    struct cr_store_block_meta meta = {"llama", 4, "h1", "h0", tokens, 4};
    struct cr_store_put_params p = {.tenant = "t", .key = "blk", .key_len = 3,
                                    .value_length = OBJ, .replica_num = 2, .meta = &meta};
    struct cr_store_replica_list l;
    assert_int_equal(cr_store_put_start(s, &CLIENT_A, &p, 0, &l), CR_OK);
    assert_int_equal(rec.count, 0); /* nothing published before PutEnd */
    assert_int_equal(put_end(s, &CLIENT_A, "t", "blk", 1), CR_OK);
    assert_int_equal(put_end(s, &CLIENT_A, "t", "blk", 2), CR_OK);
    assert_int_equal(rec.count, 1); /* idempotent PutEnd publishes once */
    assert_int_equal(rec.ev[0].kind, CR_STORE_CHANGE_STORE);
    assert_string_equal(rec.ev[0].key, "blk");
    assert_string_equal(rec.ev[0].tenant, "t");
    assert_int_equal(rec.ev[0].replicas, 2);
    assert_non_null(strstr(rec.ev[0].location0, ":7000"));
    assert_string_equal(rec.ev[0].model, "llama");
    assert_int_equal(rec.ev[0].tokens, 4);
    assert_int_equal(cr_store_unmount_segment(s, &CLIENT_A, "a", NULL), CR_OK);
    assert_int_equal(rec.count, 2);
    assert_int_equal(rec.ev[1].kind, CR_STORE_CHANGE_UPDATE);
    assert_int_equal(rec.ev[1].replicas, 1);
    assert_string_equal(rec.ev[1].location0, "10.1.1.2:7000");
    assert_int_equal(cr_store_unmount_segment(s, &CLIENT_A, "b", NULL), CR_OK);
    assert_int_equal(rec.count, 3);
    assert_int_equal(rec.ev[2].kind, CR_STORE_CHANGE_UPDATE);
    assert_int_equal(rec.ev[2].replicas, 0); /* gone */
    cr_store_remove_all(s, NULL, false, 3);
    assert_int_equal(rec.count, 4);
    assert_int_equal(rec.ev[3].kind, CR_STORE_CHANGE_REMOVE_ALL);
    cr_store_destroy(s);
}

static void test_listing_and_table_churn(void **state) {
    (void)state;
    cr_store *s = make_store(NULL);
    mount_n(s, &CLIENT_A, 4, 64 * 1024 * KIB);
    char key[32];
    for (int i = 0; i < 5000; i++) {
        snprintf(key, sizeof(key), "%s/%d", (i % 2) ? "odd" : "even", i);
        put(s, NULL, key, 0);
    }
    for (int i = 0; i < 5000; i += 3) {
        snprintf(key, sizeof(key), "%s/%d", (i % 2) ? "odd" : "even", i);
        assert_int_equal(rm(s, NULL, key, false, 1), CR_OK);
    }
    for (int i = 0; i < 5000; i++) {
        snprintf(key, sizeof(key), "%s/%d", (i % 2) ? "odd" : "even", i);
        assert_int_equal(get(s, NULL, key, 2), (i % 3 == 0) ? CR_ERR_OBJECT_NOT_FOUND : CR_OK);
    }
    uint32_t cursor = 0;
    size_t total = 0, n;
    struct cr_store_object_view v[100];
    while ((n = cr_store_list_objects(s, NULL, "odd/", 3, &cursor, 100, v)) > 0) {
        for (size_t i = 0; i < n; i++) assert_memory_equal(v[i].key, "odd/", 4);
        total += n;
    }
    assert_int_equal(total, 2500 - 833);
    struct cr_store_stats st;
    cr_store_get_stats(s, 3, &st);
    assert_int_equal(st.object_count, 5000 - 1667);
    assert_int_equal(st.replica_count, st.object_count);
    assert_int_equal(st.used_bytes, st.object_count * OBJ);
    cr_store_destroy(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_lease_census),
        cmocka_unit_test(test_two_phase_put),
        cmocka_unit_test(test_put_end_other_client),
        cmocka_unit_test(test_put_end_checksum),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_empty_object),
        cmocka_unit_test(test_lease_blocks_remove),
        cmocka_unit_test(test_remove_all),
        cmocka_unit_test(test_remove_all_in_slices),
        cmocka_unit_test(test_list_objects_in_slices),
        cmocka_unit_test(test_eviction_watermark),
        cmocka_unit_test(test_eviction_soft_pin_not_allowed),
        cmocka_unit_test(test_evict_choose),
        cmocka_unit_test(test_evict_revalidates),
        cmocka_unit_test(test_zombie_preempt_and_reclaim),
        cmocka_unit_test(test_client_expiry),
        cmocka_unit_test(test_client_awaiting),
        cmocka_unit_test(test_client_secret),
        cmocka_unit_test(test_client_secret_goes_to_its_connection),
        cmocka_unit_test(test_many_clients_expire),
        cmocka_unit_test(test_preferred_segment),
        cmocka_unit_test(test_distinct_and_best_effort),
        cmocka_unit_test(test_larger_than_every_segment_never_asks_for_eviction),
        cmocka_unit_test(test_segments),
        cmocka_unit_test(test_batch_query_ip),
        cmocka_unit_test(test_per_client_bounds),
        cmocka_unit_test(test_batch_replica_clear),
        cmocka_unit_test(test_regex),
        cmocka_unit_test(test_regex_get_grants_lease),
        cmocka_unit_test(test_regex_match_bound),
        cmocka_unit_test(test_tenant_isolation),
        cmocka_unit_test(test_keys_made_ahead),
        cmocka_unit_test(test_batch_keys_made_and_prefetched),
        cmocka_unit_test(test_batch_keys_made_with_tenants_per_entry),
        cmocka_unit_test(test_empty_tenants_are_reclaimed),
        cmocka_unit_test(test_tenant_outlives_its_last_object_while_in_use),
        cmocka_unit_test(test_events),
        cmocka_unit_test(test_listing_and_table_churn),
    };
    return cmocka_run_group_tests_name("store", tests, NULL, NULL);
}
