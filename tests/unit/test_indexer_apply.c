/* Unit tests for the indexer's mapping of decoded batches and store events
 * onto the prefix index (src/actors/indexer_apply.c) and the index functions
 * it added (cr_prefix_index_removed_any, cr_prefix_index_engine_find).
 * Fixtures are msgpack payloads built here with msgpack-c's packer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <msgpack.h>

#include "actors/indexer_internal.h"
#include "core/prefix_hash.h"
#include "crescent/error.h"

#define BS 4u

struct fx {
    struct cr_prefix_index *ix;
    struct cr_kv_decoder *dec;
    struct indexer_counters counters;
    struct cr_prefix_map keys;
    struct indexer_target a, b;
    msgpack_sbuffer buf;
    msgpack_packer pk;
};

static int setup(void **state) {
    struct fx *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_int_equal(cr_prefix_index_create(0, &f->ix), CR_OK);
    assert_int_equal(cr_kv_decoder_create(&f->dec), CR_OK);
    cr_prefix_map_init(&f->keys, NULL);
    uint16_t ia, ib;
    assert_int_equal(cr_prefix_index_instance_add(f->ix, "a", "t1", &ia), CR_OK);
    assert_int_equal(cr_prefix_index_instance_add(f->ix, "b", "t1", &ib), CR_OK);
    f->a = (struct indexer_target){.instance = ia,
                                   .tenant = "t1",
                                   .model = "m",
                                   .lora_name = "",
                                   .salt = "",
                                   .block_size = BS,
                                   .counters = &f->counters,
                                   .keys = &f->keys};
    f->b = f->a;
    f->b.instance = ib;
    msgpack_sbuffer_init(&f->buf);
    msgpack_packer_init(&f->pk, &f->buf, msgpack_sbuffer_write);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    struct fx *f = *state;
    msgpack_sbuffer_destroy(&f->buf);
    cr_prefix_map_free(&f->keys);
    cr_kv_decoder_destroy(f->dec);
    cr_prefix_index_destroy(f->ix);
    free(f);
    return 0;
}

/* ---- fixture builders ---- */

static void pk_str(msgpack_packer *pk, const char *s) {
    msgpack_pack_str(pk, strlen(s));
    msgpack_pack_str_body(pk, s, strlen(s));
}

static void begin_batch(struct fx *f, uint32_t events, int dp_rank) {
    msgpack_sbuffer_clear(&f->buf);
    msgpack_pack_array(&f->pk, 3);
    msgpack_pack_double(&f->pk, 1700000000.5);
    msgpack_pack_array(&f->pk, events);
    (void)dp_rank;
}

static void end_batch(struct fx *f, int dp_rank) {
    if (dp_rank < 0)
        msgpack_pack_nil(&f->pk);
    else
        msgpack_pack_int(&f->pk, dp_rank);
}

/* ["BlockStored", hashes, parent, tokens, block_size, nil, medium, lora, nil, nil, spec] */
static void pk_stored(struct fx *f, const uint64_t *h, uint32_t n, const uint64_t *parent,
                      uint32_t first_token, uint32_t ntok, const char *medium, const char *lora,
                      const char *spec) {
    msgpack_packer *pk = &f->pk;
    msgpack_pack_array(pk, spec != NULL ? 11 : 8);
    pk_str(pk, "BlockStored");
    msgpack_pack_array(pk, n);
    for (uint32_t i = 0; i < n; i++) msgpack_pack_uint64(pk, h[i]);
    if (parent != NULL)
        msgpack_pack_uint64(pk, *parent);
    else
        msgpack_pack_nil(pk);
    msgpack_pack_array(pk, ntok);
    for (uint32_t i = 0; i < ntok; i++) msgpack_pack_uint32(pk, first_token + i);
    msgpack_pack_uint32(pk, BS);
    msgpack_pack_nil(pk);
    if (medium != NULL)
        pk_str(pk, medium);
    else
        msgpack_pack_nil(pk);
    if (lora != NULL)
        pk_str(pk, lora);
    else
        msgpack_pack_nil(pk);
    if (spec != NULL) {
        msgpack_pack_nil(pk);
        msgpack_pack_uint32(pk, 1);
        pk_str(pk, spec);
    }
}

static void pk_removed(struct fx *f, const uint64_t *h, uint32_t n) {
    msgpack_pack_array(&f->pk, 2);
    pk_str(&f->pk, "BlockRemoved");
    msgpack_pack_array(&f->pk, n);
    for (uint32_t i = 0; i < n; i++) msgpack_pack_uint64(&f->pk, h[i]);
}

static void pk_cleared(struct fx *f) {
    msgpack_pack_array(&f->pk, 1);
    pk_str(&f->pk, "AllBlocksCleared");
}

static int apply(struct fx *f, const struct indexer_target *t) {
    const struct cr_kv_batch *batch;
    char err[256];
    int rc = cr_kv_decode(f->dec, f->buf.data, f->buf.size, &batch, err, sizeof(err));
    if (rc == CR_OK) rc = cr_indexer_batch_check(f->ix, t, batch, err, sizeof(err));
    if (rc == CR_OK) rc = cr_indexer_batch_apply(f->ix, t, batch);
    return rc;
}

/* Longest match of instance `name` for tokens first..first+n in (tenant, m, lora). */
static uint32_t longest(struct fx *f, const char *tenant, const char *lora, const char *name,
                        uint32_t first, uint32_t n, uint32_t *dp_mask_out) {
    uint32_t tokens[64];
    for (uint32_t i = 0; i < n; i++) tokens[i] = first + i;
    struct cr_prefix_context_key key = {
        .tenant = tenant, .model = "m", .lora_name = lora, .block_size = BS};
    const struct cr_prefix_match *m;
    size_t count;
    assert_int_equal(cr_prefix_index_query_tokens(f->ix, &key, tokens, n, NULL, 0, &m, &count),
                     CR_OK);
    for (size_t i = 0; i < count; i++) {
        if (strcmp(cr_prefix_index_instance_name(f->ix, m[i].instance_id), name) == 0) {
            if (dp_mask_out != NULL) *dp_mask_out = (uint32_t)m[i].dp_mask;
            return m[i].longest_tokens;
        }
    }
    return 0;
}

/* ---- tests ---- */

static void test_chain_continues_from_parent(void **state) {
    struct fx *f = *state;
    uint64_t h[4] = {101, 102, 103, 104};
    begin_batch(f, 2, -1);
    pk_stored(f, h, 2, NULL, 0, 2 * BS, NULL, NULL, NULL);
    pk_stored(f, h + 2, 2, &h[1], 2 * BS, 2 * BS, "gpu", NULL, NULL);
    end_batch(f, -1);
    assert_int_equal(apply(f, &f->a), CR_OK);
    assert_int_equal(longest(f, "t1", "", "a", 0, 4 * BS + 1, NULL), 4 * BS);
    /* The rolling chain matches the standard one computed from the tokens. */
    uint32_t tokens[4 * BS];
    for (uint32_t i = 0; i < 4 * BS; i++) tokens[i] = i;
    uint64_t seq[4];
    assert_int_equal(cr_prefix_hash_chain(tokens, 4 * BS, BS, 0, false, 0, seq, 4), 4);
    uint32_t ctx;
    uint64_t own;
    uint32_t pub;
    assert_int_equal(cr_prefix_index_publisher(f->ix, f->a.instance, 0, &pub), CR_OK);
    assert_true(cr_prefix_index_engine_find(f->ix, pub, 104, &ctx, &own));
    assert_true(own == seq[3]);
    assert_false(cr_prefix_index_engine_find(f->ix, pub, 999, &ctx, &own));
    /* An orphan (unknown parent) is counted, not applied. */
    uint64_t orphan_parent = 5555, x = 7;
    begin_batch(f, 1, -1);
    pk_stored(f, &x, 1, &orphan_parent, 100, BS, NULL, NULL, NULL);
    end_batch(f, -1);
    assert_int_equal(apply(f, &f->a), CR_OK);
    assert_int_equal(f->counters.orphans, 1);
}

static void test_removal_finds_lora_context(void **state) {
    struct fx *f = *state;
    uint64_t h[2] = {1, 2};
    begin_batch(f, 1, 3);
    pk_stored(f, h, 2, NULL, 0, 2 * BS, NULL, "adapter", NULL);
    end_batch(f, 3);
    assert_int_equal(apply(f, &f->a), CR_OK);
    uint32_t mask = 0;
    assert_int_equal(longest(f, "t1", "adapter", "a", 0, 2 * BS, &mask), 2 * BS);
    assert_int_equal(mask, 1u << 3);                                 /* the batch's DP rank */
    assert_int_equal(longest(f, "t1", "", "a", 0, 2 * BS, NULL), 0); /* LoRA isolation */
    /* BlockRemoved names no LoRA: it still finds the block. */
    begin_batch(f, 1, 3);
    pk_removed(f, &h[1], 1);
    end_batch(f, 3);
    assert_int_equal(apply(f, &f->a), CR_OK);
    assert_int_equal(longest(f, "t1", "adapter", "a", 0, 2 * BS, NULL), BS);
}

static void test_bad_batches_change_nothing(void **state) {
    struct fx *f = *state;
    uint64_t h[2] = {1, 2};
    begin_batch(f, 2, 64); /* DP rank 64 is out of range */
    pk_stored(f, h, 1, NULL, 0, BS, NULL, NULL, NULL);
    pk_stored(f, h + 1, 1, h, BS, BS, NULL, NULL, NULL);
    end_batch(f, 64);
    assert_int_equal(apply(f, &f->a), CR_ERR_PROTOCOL);
    /* The second event's token count is wrong for the registration's block size. */
    msgpack_sbuffer_clear(&f->buf);
    msgpack_pack_array(&f->pk, 2);
    msgpack_pack_double(&f->pk, 1.0);
    msgpack_pack_array(&f->pk, 2);
    pk_stored(f, h, 1, NULL, 0, BS, NULL, NULL, NULL);
    msgpack_pack_array(&f->pk, 5);
    pk_str(&f->pk, "BlockStored");
    msgpack_pack_array(&f->pk, 1);
    msgpack_pack_uint64(&f->pk, 9);
    msgpack_pack_nil(&f->pk);
    msgpack_pack_array(&f->pk, 3);
    for (int i = 0; i < 3; i++) msgpack_pack_int(&f->pk, i);
    msgpack_pack_nil(&f->pk); /* no block size: the target's (4) applies */
    assert_int_equal(apply(f, &f->a), CR_ERR_PROTOCOL);
    struct cr_prefix_summary s;
    cr_prefix_index_summary(f->ix, &s);
    assert_int_equal(s.blocks, 0);
}

static void test_clear_is_per_publisher_and_groups_skipped(void **state) {
    struct fx *f = *state;
    uint64_t h[2] = {1, 2};
    begin_batch(f, 1, -1);
    pk_stored(f, h, 2, NULL, 0, 2 * BS, NULL, NULL, NULL);
    end_batch(f, -1);
    assert_int_equal(apply(f, &f->a), CR_OK);
    assert_int_equal(apply(f, &f->b), CR_OK);
    begin_batch(f, 1, -1);
    pk_stored(f, h, 1, NULL, 500, BS, NULL, NULL, "sliding_window");
    end_batch(f, -1);
    assert_int_equal(apply(f, &f->a), CR_OK);
    assert_int_equal(f->counters.skipped_groups, 1);
    assert_int_equal(longest(f, "t1", "", "a", 500, BS, NULL), 0);
    begin_batch(f, 1, -1);
    pk_cleared(f);
    end_batch(f, -1);
    assert_int_equal(apply(f, &f->a), CR_OK);
    assert_int_equal(longest(f, "t1", "", "a", 0, 2 * BS, NULL), 0);
    assert_int_equal(longest(f, "t1", "", "b", 0, 2 * BS, NULL), 2 * BS);
}

static struct cr_store_event *store_put(const char *key, const char *bh, const char *parent,
                                        uint32_t first, cr_replica_type type) {
    uint32_t tokens[BS];
    for (uint32_t i = 0; i < BS; i++) tokens[i] = first + i;
    cr_store_replica rep = {.type = type, .location = cr_event_str_c("tcp://x:1")};
    cr_store_event_info info = {.model_name = cr_event_str_c("m"),
                                .block_size = BS,
                                .block_hash = cr_event_str_c(bh),
                                .parent_block_hash = cr_event_str_c(parent),
                                .token_ids = tokens,
                                .token_count = BS};
    cr_store_event *ev = NULL;
    assert_int_equal(cr_store_event_new_block_store(cr_event_str_c(key), &rep, 1, &info, &ev),
                     CR_OK);
    return ev;
}

static void store_do(struct fx *f, uint16_t inst, cr_store_event *ev, int expect) {
    assert_int_equal(cr_indexer_store_apply(f->ix, ev, inst, &f->keys, &f->counters), expect);
    cr_store_event_free(ev);
}

static void test_store_events_scoped_by_tenant(void **state) {
    struct fx *f = *state;
    uint16_t s1, s2;
    assert_int_equal(cr_prefix_index_instance_add(f->ix, CR_INDEXER_STORE_INSTANCE, "t1", &s1),
                     CR_OK);
    assert_int_equal(cr_prefix_index_instance_add(f->ix, CR_INDEXER_STORE_INSTANCE, "t2", &s2),
                     CR_OK);
    struct cr_prefix_map keys2;
    cr_prefix_map_init(&keys2, NULL);
    store_do(f, s1, store_put("k0", "h0", "", 0, CR_REPLICA_MEMORY), CR_OK);
    store_do(f, s1, store_put("k1", "h1", "h0", BS, CR_REPLICA_MEMORY), CR_OK);
    assert_int_equal(longest(f, "t1", "", CR_INDEXER_STORE_INSTANCE, 0, 2 * BS, NULL), 2 * BS);
    assert_int_equal(longest(f, "t2", "", CR_INDEXER_STORE_INSTANCE, 0, 2 * BS, NULL), 0);
    assert_int_equal(longest(f, "default", "", CR_INDEXER_STORE_INSTANCE, 0, 2 * BS, NULL), 0);
    /* k1 moves to disk, then loses every replica. */
    cr_store_replica disk = {.type = CR_REPLICA_DISK, .location = cr_event_str_c("/d")};
    cr_store_event *ev;
    assert_int_equal(cr_store_event_new_block_update(cr_event_str_c("k1"), &disk, 1, &ev), CR_OK);
    store_do(f, s1, ev, CR_OK);
    assert_int_equal(longest(f, "t1", "", CR_INDEXER_STORE_INSTANCE, 0, 2 * BS, NULL), 2 * BS);
    assert_int_equal(cr_store_event_new_block_update(cr_event_str_c("k1"), NULL, 0, &ev), CR_OK);
    store_do(f, s1, ev, CR_OK);
    assert_int_equal(longest(f, "t1", "", CR_INDEXER_STORE_INSTANCE, 0, 2 * BS, NULL), BS);
    assert_int_equal(cr_store_event_new_block_update(cr_event_str_c("zz"), NULL, 0, &ev), CR_OK);
    store_do(f, s1, ev, CR_ERR_OBJECT_NOT_FOUND);
    /* RemoveAll of t2 leaves t1 alone. */
    store_do(f, s2, store_put("k0", "h0", "", 0, CR_REPLICA_MEMORY), CR_OK);
    assert_int_equal(cr_store_event_new_remove_all(&ev), CR_OK);
    assert_int_equal(cr_indexer_store_apply(f->ix, ev, s2, &keys2, &f->counters), CR_OK);
    cr_store_event_free(ev);
    assert_int_equal(longest(f, "t1", "", CR_INDEXER_STORE_INSTANCE, 0, BS, NULL), BS);
    cr_prefix_map_free(&keys2);
}

/* An object of three blocks, moved to disk and then gone: every block
 * follows, not only the last one its key names (the indexer used to keep
 * the earlier two forever). */
static void test_store_multi_block_object_leaves_whole(void **state) {
    struct fx *f = *state;
    uint16_t s1;
    assert_int_equal(cr_prefix_index_instance_add(f->ix, CR_INDEXER_STORE_INSTANCE, "t1", &s1),
                     CR_OK);
    uint32_t tokens[3 * BS];
    for (uint32_t i = 0; i < 3 * BS; i++) tokens[i] = 100 + i;
    cr_store_replica rep = {.type = CR_REPLICA_MEMORY, .location = cr_event_str_c("tcp://x:1")};
    cr_store_event_info info = {.model_name = cr_event_str_c("m"), .block_size = BS,
                                .token_ids = tokens, .token_count = 3 * BS};
    cr_store_event *ev = NULL;
    assert_int_equal(cr_store_event_new_block_store(cr_event_str_c("big"), &rep, 1, &info, &ev),
                     CR_OK);
    store_do(f, s1, ev, CR_OK);
    struct cr_prefix_summary sum;
    cr_prefix_index_summary(f->ix, &sum);
    assert_int_equal(sum.blocks, 3);
    assert_int_equal(longest(f, "t1", "", CR_INDEXER_STORE_INSTANCE, 100, 3 * BS, NULL), 3 * BS);
    cr_store_replica disk = {.type = CR_REPLICA_DISK, .location = cr_event_str_c("/d")};
    assert_int_equal(cr_store_event_new_block_update(cr_event_str_c("big"), &disk, 1, &ev), CR_OK);
    store_do(f, s1, ev, CR_OK);
    cr_prefix_index_summary(f->ix, &sum);
    assert_int_equal(sum.blocks, 3);
    assert_int_equal(sum.pairs, 3); /* moved, not copied: no memory placement left */
    assert_int_equal(longest(f, "t1", "", CR_INDEXER_STORE_INSTANCE, 100, 3 * BS, NULL), 3 * BS);
    assert_int_equal(cr_store_event_new_block_update(cr_event_str_c("big"), NULL, 0, &ev), CR_OK);
    store_do(f, s1, ev, CR_OK);
    cr_prefix_index_summary(f->ix, &sum);
    assert_int_equal(sum.blocks, 0);
    assert_int_equal(sum.pairs, 0);
    assert_int_equal(longest(f, "t1", "", CR_INDEXER_STORE_INSTANCE, 100, 3 * BS, NULL), 0);
}

/* Blocks found by sequence hash in the hash-keyed context (model "hk",
 * block size 16) of tenant t1. */
static uint32_t longest_by_hash(struct fx *f, const uint64_t *hashes, size_t n) {
    struct cr_prefix_context_key key = {.tenant = "t1", .model = "hk", .block_size = 16};
    uint32_t context;
    if (cr_prefix_index_context(f->ix, &key, false, &context) != CR_OK) return 0;
    const struct cr_prefix_match *m;
    size_t count;
    assert_int_equal(cr_prefix_index_query(f->ix, context, hashes, n, NULL, 0, &m, &count), CR_OK);
    return count == 1 ? m[0].longest_tokens : 0;
}

static struct cr_store_event *plain_put(const char *key) {
    cr_store_replica rep = {.type = CR_REPLICA_MEMORY, .location = cr_event_str_c("tcp://x:1")};
    cr_store_event_info info = {0}; /* Mooncake's PutStart: no model, hash or tokens */
    cr_store_event *ev = NULL;
    assert_int_equal(cr_store_event_new_block_store(cr_event_str_c(key), &rep, 1, &info, &ev),
                     CR_OK);
    return ev;
}

/* Objects put without tokens whose key is a sequence hash (Mooncake's keys)
 * are one block each, named by it; other keys, or no hash-key settings, are
 * orphans as before; a removal (no replicas left) takes the block out. */
static void test_store_hash_keyed_objects_are_blocks(void **state) {
    struct fx *f = *state;
    uint16_t s1;
    assert_int_equal(cr_prefix_index_instance_add(f->ix, CR_INDEXER_STORE_INSTANCE, "t1", &s1),
                     CR_OK);
    const struct indexer_hash_keys hk = {"hk", 16};
    uint64_t h[2] = {0x1f2e3d4c5b6a7988ull, 1234567890123456789ull};
    cr_store_event *ev = plain_put("0x1f2e3d4c5b6a7988");
    /* Without the settings (the old path): an orphan, nothing filed. */
    assert_int_equal(cr_indexer_store_apply(f->ix, ev, s1, &f->keys, &f->counters),
                     CR_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(longest_by_hash(f, h, 1), 0);
    assert_int_equal(cr_indexer_store_apply_keyed(f->ix, ev, s1, &f->keys, &f->counters, &hk),
                     CR_OK);
    cr_store_event_free(ev);
    ev = plain_put("1234567890123456789");
    assert_int_equal(cr_indexer_store_apply_keyed(f->ix, ev, s1, &f->keys, &f->counters, &hk),
                     CR_OK);
    cr_store_event_free(ev);
    assert_int_equal(longest_by_hash(f, h, 2), 32);
    uint64_t orphans = f->counters.orphans;
    ev = plain_put("k");
    assert_int_equal(cr_indexer_store_apply_keyed(f->ix, ev, s1, &f->keys, &f->counters, &hk),
                     CR_ERR_OBJECT_NOT_FOUND);
    cr_store_event_free(ev);
    assert_int_equal(f->counters.orphans, orphans + 1);
    /* The hex-keyed object is removed: only the decimal one is left. */
    assert_int_equal(
        cr_store_event_new_block_update(cr_event_str_c("0x1f2e3d4c5b6a7988"), NULL, 0, &ev), CR_OK);
    assert_int_equal(cr_indexer_store_apply_keyed(f->ix, ev, s1, &f->keys, &f->counters, &hk),
                     CR_OK);
    cr_store_event_free(ev);
    assert_int_equal(longest_by_hash(f, h, 2), 0);
    assert_int_equal(longest_by_hash(f, &h[1], 1), 16);
}

static void test_seq_hash_of_reads_keys_as_mooncake_does(void **state) {
    (void)state;
    uint64_t v = 0;
    assert_true(cr_indexer_seq_hash_of("0", 1, &v) && v == 0);
    assert_true(cr_indexer_seq_hash_of("18446744073709551615", 20, &v) && v == UINT64_MAX);
    assert_true(cr_indexer_seq_hash_of("0xFFffFFffFFffFFff", 18, &v) && v == UINT64_MAX);
    assert_true(cr_indexer_seq_hash_of("0X10", 4, &v) && v == 16);
    assert_true(cr_indexer_seq_hash_of("0012", 4, &v) && v == 12);
    const char *no[] = {"", "0x", "18446744073709551616", "0x10000000000000000", "12a", "-1",
                        " 12", "+5", "0xg", "k", "1.5"};
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
        assert_false(cr_indexer_seq_hash_of(no[i], strlen(no[i]), &v));
    assert_true(cr_indexer_seq_hash_of("123", 2, &v) && v == 12); /* its length ends it, not NUL */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_chain_continues_from_parent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_removal_finds_lora_context, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_batches_change_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_clear_is_per_publisher_and_groups_skipped, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_store_events_scoped_by_tenant, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_hash_keyed_objects_are_blocks, setup, teardown),
        cmocka_unit_test(test_seq_hash_of_reads_keys_as_mooncake_does),
        cmocka_unit_test_setup_teardown(test_store_multi_block_object_leaves_whole, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
