/* What the store core's tier tests share (test_store_tiers.c,
 * test_store_offload.c, test_store_promote.c): a store with room for 1024
 * objects on 8 segments whose events a recorder keeps (the last one's kind
 * and its replicas as the seed's pairs "type=location;..."), segments
 * mounted by name, and a put of one 4 KiB replica.  Include it after
 * <cmocka.h>: its helpers assert. */
#ifndef CRESCENT_TESTS_STORE_TIER_FIXTURE_H
#define CRESCENT_TESTS_STORE_TIER_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/store.h"
#include "crescent/error.h"

#define OBJ 4096ull

/* The events seen, and the last one. */
struct recorder {
    int count;
    enum cr_store_change_kind kind;
    char pairs[512];
};

static inline void record(void *ctx, const struct cr_store_change *ev) {
    struct recorder *r = ctx;
    r->count++;
    r->kind = ev->kind;
    r->pairs[0] = '\0';
    for (uint32_t i = 0; i < ev->replica_count; i++) {
        size_t n = strlen(r->pairs);
        snprintf(r->pairs + n, sizeof(r->pairs) - n, "%s%s=%s", i ? ";" : "",
                 ev->replicas[i].type, ev->replicas[i].location);
    }
}

/* An empty store whose events go to `rec`. */
static inline cr_store *store_with_recorder(struct recorder *rec) {
    cr_store_config cfg;
    cr_store_config_default(&cfg);
    cfg.max_objects = 1024;
    cfg.max_segments = 8;
    cfg.max_allocations_per_segment = 1024;
    struct cr_store_event_sink sink = {record, rec};
    cr_store *s = NULL;
    assert_int_equal(cr_store_create(&cfg, &sink, &s), CR_OK);
    return s;
}

/* Mounts segment `name` of `owner` at `base`, served over tcp at `endpoint`. */
static inline void mount_segment(cr_store *s, const struct cr_uuid *owner, const char *name,
                                 uint64_t base, uint64_t size, const char *endpoint) {
    struct cr_store_segment_params p = {name, base, size, endpoint, "tcp"};
    assert_int_equal(cr_store_mount_segment(s, owner, &p, 0), CR_OK);
}

/* Puts `key` (one OBJ-byte replica on `segment`) as `client`, with checksum
 * 0x77 or none. */
static inline void put_on(cr_store *s, const struct cr_uuid *client, const char *key,
                          const char *segment, bool checksum) {
    struct cr_store_replica_list l;
    struct cr_store_put_params p = {.key = key, .key_len = (uint32_t)strlen(key),
                                    .value_length = OBJ, .replica_num = 1,
                                    .preferred_segment = segment};
    assert_int_equal(cr_store_put_start(s, client, &p, 1, &l), CR_OK);
    struct cr_store_key k;
    cr_store_key_make(NULL, key, (uint32_t)strlen(key), &k);
    uint64_t sum = 0x77;
    assert_int_equal(cr_store_put_end_k(s, client, &k, checksum ? &sum : NULL, 1), CR_OK);
}

/* The object `key` as the store sees it at 2 ms. */
static inline void view(cr_store *s, const char *key, struct cr_store_object_view *v) {
    assert_int_equal(cr_store_object_find(s, NULL, key, (uint32_t)strlen(key), 2, v), CR_OK);
}

#endif
