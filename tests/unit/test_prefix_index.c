/* Unit tests for the prefix index (src/core/prefix_index.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/prefix_hash.h"
#include "core/prefix_index.h"
#include "crescent/error.h"

#define BS 4u

struct fixture {
    struct cr_prefix_index *ix;
    uint32_t ctx;
    uint16_t a, b, c;
    uint32_t pa, pb, pc;
};

static const struct cr_prefix_context_key base_key = {
    .tenant = "t1", .model = "m", .lora_name = "", .block_size = BS, .additional_salt = ""};

static int setup(void **state) {
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_int_equal(cr_prefix_index_create(0, &f->ix), CR_OK);
    assert_int_equal(cr_prefix_index_context(f->ix, &base_key, true, &f->ctx), CR_OK);
    assert_int_equal(cr_prefix_index_instance_add(f->ix, "a", "t1", &f->a), CR_OK);
    assert_int_equal(cr_prefix_index_instance_add(f->ix, "b", "t1", &f->b), CR_OK);
    assert_int_equal(cr_prefix_index_instance_add(f->ix, "c", "t1", &f->c), CR_OK);
    assert_int_equal(cr_prefix_index_publisher(f->ix, f->a, 0, &f->pa), CR_OK);
    assert_int_equal(cr_prefix_index_publisher(f->ix, f->b, 0, &f->pb), CR_OK);
    assert_int_equal(cr_prefix_index_publisher(f->ix, f->c, 0, &f->pc), CR_OK);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    struct fixture *f = *state;
    cr_prefix_index_destroy(f->ix);
    free(f);
    return 0;
}

/* Prompt tokens: block i of prompt p is 4 tokens derived from (p, i). */
static void prompt(uint32_t p, uint32_t blocks, uint32_t *out) {
    for (uint32_t i = 0; i < blocks * BS; i++) out[i] = p * 100000 + i;
}

/* Engine hashes are opaque: make them unlike the own hashes. */
static uint64_t engine(uint32_t who, uint32_t p, uint32_t i) {
    return 0xE000000000000000ULL | (uint64_t)who << 40 | (uint64_t)p << 20 | i;
}

/* Stores blocks [from, to) of prompt p for publisher pub; parent = block from-1. */
static int store(struct fixture *f, uint32_t pub, uint32_t who, uint32_t p, uint32_t from,
                 uint32_t to, uint8_t medium) {
    uint32_t tokens[64 * BS];
    uint64_t eh[64];
    prompt(p, to, tokens);
    for (uint32_t i = from; i < to; i++) eh[i - from] = engine(who, p, i);
    uint64_t parent = engine(who, p, from - 1);
    return cr_prefix_index_stored_tokens(f->ix, pub, f->ctx, from > 0 ? &parent : NULL, eh,
                                         to - from, tokens + from * BS, (to - from) * BS, BS,
                                         medium);
}

static const struct cr_prefix_match *find(const struct cr_prefix_match *m, size_t n, uint16_t id) {
    for (size_t i = 0; i < n; i++) {
        if (m[i].instance_id == id) return &m[i];
    }
    return NULL;
}

static size_t query(struct fixture *f, const struct cr_prefix_context_key *key, uint32_t p,
                    uint32_t blocks, const uint16_t *filter, size_t filter_count,
                    const struct cr_prefix_match **m) {
    uint32_t tokens[64 * BS];
    prompt(p, blocks, tokens);
    size_t n = 99;
    assert_int_equal(cr_prefix_index_query_tokens(f->ix, key, tokens, blocks * BS, filter,
                                                  filter_count, m, &n),
                     CR_OK);
    return n;
}

/* A long query stops at the first block nobody holds, deep into the prompt:
 * the walk looks blocks up ahead of itself in a ring (prefix_query.c), and a
 * block absent from the index must end it even where the ring held an
 * earlier block.  b's cache has a hole (block 14 evicted, held by no one). */
static void test_long_query_stops_at_absent_block(void **state) {
    struct fixture *f = *state;
    assert_int_equal(store(f, f->pa, 0, 5, 0, 12, CR_PREFIX_MEDIUM_GPU), CR_OK);
    assert_int_equal(store(f, f->pb, 1, 5, 0, 21, CR_PREFIX_MEDIUM_GPU), CR_OK);
    uint64_t hole = engine(1, 5, 14);
    assert_int_equal(cr_prefix_index_removed(f->ix, f->pb, f->ctx, &hole, 1,
                                             CR_PREFIX_MEDIUM_ALL),
                     CR_OK);
    const struct cr_prefix_match *m;
    for (uint32_t blocks = 13; blocks <= 30; blocks++) {
        size_t n = query(f, &base_key, 5, blocks, NULL, 0, &m);
        assert_int_equal(n, 2);
        assert_int_equal(find(m, n, f->a)->longest_tokens, 12 * BS);
        assert_int_equal(find(m, n, f->b)->longest_tokens, (blocks < 14 ? blocks : 14) * BS);
        assert_int_equal(cr_prefix_match_rank_tokens(find(m, n, f->b), 0),
                         (blocks < 14 ? blocks : 14) * BS);
    }
}

/* Runs given as each block's own hash of its tokens (Dynamo's tokens_hash)
 * land on the same sequence hashes as runs given as tokens. */
static void test_stored_locals(void **state) {
    struct fixture *f = *state;
    struct cr_prefix_context_info info;
    assert_int_equal(cr_prefix_index_context_info(f->ix, f->ctx, &info), CR_OK);
    uint32_t tokens[6 * BS];
    prompt(7, 6, tokens);
    uint64_t locals[6], eh[6];
    for (uint32_t i = 0; i < 6; i++) {
        locals[i] = cr_prefix_hash_block(tokens + i * BS, BS, info.seed);
        eh[i] = engine(0, 7, i);
    }
    assert_int_equal(cr_prefix_index_stored_locals(f->ix, f->pa, f->ctx, NULL, eh, locals, 4,
                                                   CR_PREFIX_MEDIUM_GPU),
                     CR_OK);
    /* Continued from a parent engine hash; an unknown parent is an orphan. */
    uint64_t unknown = 12345;
    assert_int_equal(cr_prefix_index_stored_locals(f->ix, f->pa, f->ctx, &unknown, eh + 4,
                                                   locals + 4, 2, CR_PREFIX_MEDIUM_GPU),
                     CR_ERR_OBJECT_NOT_FOUND);
    const struct cr_prefix_match *m;
    assert_int_equal(query(f, &base_key, 7, 6, NULL, 0, &m), 1);
    assert_int_equal(m[0].longest_tokens, 4 * BS);
    assert_int_equal(cr_prefix_index_stored_locals(f->ix, f->pa, f->ctx, &eh[3], eh + 4,
                                                   locals + 4, 2, CR_PREFIX_MEDIUM_GPU),
                     CR_OK);
    assert_int_equal(query(f, &base_key, 7, 6, NULL, 0, &m), 1);
    assert_int_equal(m[0].longest_tokens, 6 * BS);
    /* b stores the same prompt as tokens: the same six blocks, now shared. */
    assert_int_equal(store(f, f->pb, 1, 7, 0, 6, CR_PREFIX_MEDIUM_GPU), CR_OK);
    struct cr_prefix_summary s;
    cr_prefix_index_summary(f->ix, &s);
    assert_int_equal(s.blocks, 6);
    assert_int_equal(s.pairs, 12);
    assert_int_equal(s.runs_orphaned, 1);
    /* Removal by engine hash, as for any run. */
    assert_int_equal(cr_prefix_index_removed(f->ix, f->pa, f->ctx, eh + 2, 4,
                                             CR_PREFIX_MEDIUM_ALL),
                     CR_OK);
    assert_int_equal(query(f, &base_key, 7, 6, &f->a, 1, &m), 1);
    assert_int_equal(m[0].longest_tokens, 2 * BS);
    assert_int_equal(cr_prefix_index_stored_locals(f->ix, f->pa, f->ctx, NULL, NULL, locals, 1,
                                                   CR_PREFIX_MEDIUM_GPU),
                     CR_ERR_INVALID_PARAMS);
}

static void test_store_query_remove(void **state) {
    struct fixture *f = *state;
    const struct cr_prefix_match *m;
    assert_int_equal(store(f, f->pa, 0, 1, 0, 4, CR_PREFIX_MEDIUM_GPU), CR_OK);
    assert_int_equal(query(f, &base_key, 1, 4, NULL, 0, &m), 1);
    assert_int_equal(m[0].instance_id, f->a);
    assert_int_equal(m[0].longest_tokens, 4 * BS);
    assert_int_equal(cr_prefix_match_medium_tokens(&m[0], CR_PREFIX_MEDIUM_GPU), 4 * BS);
    assert_int_equal(cr_prefix_match_medium_tokens(&m[0], CR_PREFIX_MEDIUM_CPU), 0);
    assert_int_equal(m[0].dp_mask, 1);
    assert_int_equal(cr_prefix_match_rank_tokens(&m[0], 0), 4 * BS);
    /* A longer prompt matches the stored prefix only; a shorter one its length. */
    assert_int_equal(query(f, &base_key, 1, 9, NULL, 0, &m), 1);
    assert_int_equal(m[0].longest_tokens, 4 * BS);
    assert_int_equal(query(f, &base_key, 1, 2, NULL, 0, &m), 1);
    assert_int_equal(m[0].longest_tokens, 2 * BS);
    /* A trailing partial block is ignored. */
    uint32_t tokens[3 * BS];
    prompt(1, 3, tokens);
    size_t n;
    assert_int_equal(cr_prefix_index_query_tokens(f->ix, &base_key, tokens, 3 * BS - 1, NULL, 0,
                                                  &m, &n), CR_OK);
    assert_int_equal(n, 1);
    assert_int_equal(m[0].longest_tokens, 2 * BS);
    /* Removing block 2 cuts the prefix there: the first miss stops the scan. */
    uint64_t gone = engine(0, 1, 2);
    assert_int_equal(cr_prefix_index_removed(f->ix, f->pa, f->ctx, &gone, 1, CR_PREFIX_MEDIUM_ALL),
                     CR_OK);
    assert_int_equal(query(f, &base_key, 1, 4, NULL, 0, &m), 1);
    assert_int_equal(m[0].longest_tokens, 2 * BS);
    /* Another prompt shares nothing. */
    assert_int_equal(query(f, &base_key, 2, 4, NULL, 0, &m), 0);
    struct cr_prefix_summary s;
    cr_prefix_index_summary(f->ix, &s);
    assert_int_equal(s.blocks, 3);
    assert_int_equal(s.pairs, 3);
    /* Removing what was never stored is counted, not an error. */
    gone = 12345;
    assert_int_equal(cr_prefix_index_removed(f->ix, f->pa, f->ctx, &gone, 1, CR_PREFIX_MEDIUM_ALL),
                     CR_OK);
    cr_prefix_index_summary(f->ix, &s);
    assert_int_equal(s.removes_unknown, 1);
}

static void test_depths_and_first_miss(void **state) {
    struct fixture *f = *state;
    const struct cr_prefix_match *m;
    assert_int_equal(store(f, f->pa, 0, 1, 0, 6, CR_PREFIX_MEDIUM_GPU), CR_OK);
    assert_int_equal(store(f, f->pb, 1, 1, 0, 2, CR_PREFIX_MEDIUM_GPU), CR_OK);
    /* c holds blocks 0,1 and 3,4 (block 2 evicted): it matches 2 blocks only. */
    assert_int_equal(store(f, f->pc, 2, 1, 0, 5, CR_PREFIX_MEDIUM_GPU), CR_OK);
    uint64_t hole = engine(2, 1, 2);
    assert_int_equal(cr_prefix_index_removed(f->ix, f->pc, f->ctx, &hole, 1, CR_PREFIX_MEDIUM_ALL),
                     CR_OK);
    size_t n = query(f, &base_key, 1, 8, NULL, 0, &m);
    assert_int_equal(n, 3);
    assert_int_equal(find(m, n, f->a)->longest_tokens, 6 * BS);
    assert_int_equal(find(m, n, f->b)->longest_tokens, 2 * BS);
    assert_int_equal(find(m, n, f->c)->longest_tokens, 2 * BS);
    assert_int_equal(cr_prefix_match_medium_tokens(find(m, n, f->c), CR_PREFIX_MEDIUM_GPU), 2 * BS);
    /* Nobody holds block 0 of an unrelated prompt: nothing, even if later blocks exist. */
    assert_int_equal(query(f, &base_key, 7, 8, NULL, 0, &m), 0);
}

static void test_filter(void **state) {
    struct fixture *f = *state;
    const struct cr_prefix_match *m;
    assert_int_equal(store(f, f->pa, 0, 1, 0, 4, CR_PREFIX_MEDIUM_GPU), CR_OK);
    assert_int_equal(store(f, f->pb, 1, 1, 0, 3, CR_PREFIX_MEDIUM_GPU), CR_OK);
    uint16_t only_b = f->b;
    assert_int_equal(query(f, &base_key, 1, 4, &only_b, 1, &m), 1);
    assert_int_equal(m[0].instance_id, f->b);
    assert_int_equal(m[0].longest_tokens, 3 * BS);
    uint16_t both[2] = {f->b, f->a};
    assert_int_equal(query(f, &base_key, 1, 4, both, 2, &m), 2);
    uint16_t nobody = f->c; /* registered but holds nothing in this context */
    assert_int_equal(query(f, &base_key, 1, 4, &nobody, 1, &m), 0);
    uint16_t unknown = 4000;
    assert_int_equal(query(f, &base_key, 1, 4, &unknown, 1, &m), 0);
}

static void test_parent_chains(void **state) {
    struct fixture *f = *state;
    const struct cr_prefix_match *m;
    /* Two events: blocks 0-1 at the root, then 2-4 continuing from block 1. */
    assert_int_equal(store(f, f->pa, 0, 1, 0, 2, CR_PREFIX_MEDIUM_GPU), CR_OK);
    assert_int_equal(store(f, f->pa, 0, 1, 2, 5, CR_PREFIX_MEDIUM_GPU), CR_OK);
    assert_int_equal(query(f, &base_key, 1, 5, NULL, 0, &m), 1);
    assert_int_equal(m[0].longest_tokens, 5 * BS);
    /* The hashes are the standard chain, usable through query_by_hash. */
    uint32_t tokens[5 * BS];
    uint64_t seq[5];
    prompt(1, 5, tokens);
    cr_prefix_hash_chain(tokens, 5 * BS, BS, 0, false, 0, seq, 5);
    size_t n;
    assert_int_equal(cr_prefix_index_query(f->ix, f->ctx, seq, 5, NULL, 0, &m, &n), CR_OK);
    assert_int_equal(n, 1);
    assert_int_equal(m[0].longest_tokens, 5 * BS);
    /* A run whose parent the publisher never stored is skipped and counted. */
    assert_int_equal(store(f, f->pb, 1, 1, 3, 5, CR_PREFIX_MEDIUM_GPU), CR_ERR_OBJECT_NOT_FOUND);
    struct cr_prefix_summary s;
    cr_prefix_index_summary(f->ix, &s);
    assert_int_equal(s.runs_orphaned, 1);
    assert_int_equal(s.pairs, 5);
    /* Another publisher's parent does not count as this one's. */
    uint64_t parent = engine(0, 1, 1), eh = 77;
    assert_int_equal(cr_prefix_index_stored_tokens(f->ix, f->pb, f->ctx, &parent, &eh, 1,
                                                   tokens + 2 * BS, BS, BS, 0),
                     CR_ERR_OBJECT_NOT_FOUND);
}

static void test_clear_only_own(void **state) {
    struct fixture *f = *state;
    const struct cr_prefix_match *m;
    assert_int_equal(store(f, f->pa, 0, 1, 0, 4, CR_PREFIX_MEDIUM_GPU), CR_OK);
    assert_int_equal(store(f, f->pb, 1, 1, 0, 4, CR_PREFIX_MEDIUM_GPU), CR_OK);
    assert_int_equal(cr_prefix_index_cleared(f->ix, f->pa), CR_OK);
    assert_int_equal(query(f, &base_key, 1, 4, NULL, 0, &m), 1);
    assert_int_equal(m[0].instance_id, f->b);
    assert_int_equal(m[0].longest_tokens, 4 * BS);
    assert_int_equal(cr_prefix_index_cleared(f->ix, 999), CR_ERR_OBJECT_NOT_FOUND);
    /* The cleared publisher can store again. */
    assert_int_equal(store(f, f->pa, 0, 1, 0, 2, CR_PREFIX_MEDIUM_GPU), CR_OK);
    assert_int_equal(query(f, &base_key, 1, 4, NULL, 0, &m), 2);
}

static void test_isolation(void **state) {
    struct fixture *f = *state;
    const struct cr_prefix_match *m;
    assert_int_equal(store(f, f->pa, 0, 1, 0, 4, CR_PREFIX_MEDIUM_GPU), CR_OK);
    struct cr_prefix_context_key k = base_key;
    k.tenant = "t2";
    assert_int_equal(query(f, &k, 1, 4, NULL, 0, &m), 0);
    k = base_key;
    k.model = "other";
    assert_int_equal(query(f, &k, 1, 4, NULL, 0, &m), 0);
    k = base_key;
    k.block_size = 2 * BS;
    assert_int_equal(query(f, &k, 1, 4, NULL, 0, &m), 0);
    /* Same tokens under a LoRA or a salt: a different context and different hashes. */
    const char *variants[2][2] = {{"lora-x", ""}, {"", "salt-y"}};
    for (int v = 0; v < 2; v++) {
        k = base_key;
        k.lora_name = variants[v][0];
        k.additional_salt = variants[v][1];
        uint32_t ctx;
        assert_int_equal(cr_prefix_index_context(f->ix, &k, true, &ctx), CR_OK);
        assert_int_not_equal(ctx, f->ctx);
        struct cr_prefix_context_info info;
        assert_int_equal(cr_prefix_index_context_info(f->ix, ctx, &info), CR_OK);
        assert_int_equal(info.seed, cr_prefix_hash_namespace_seed(0, k.lora_name,
                                                                  k.additional_salt));
        assert_int_not_equal(info.seed, 0);
        assert_int_equal(query(f, &k, 1, 4, NULL, 0, &m), 0);
        /* The base context's hashes do not hit in the namespaced context. */
        uint32_t tokens[4 * BS];
        uint64_t seq[4];
        size_t n;
        prompt(1, 4, tokens);
        cr_prefix_hash_chain(tokens, 4 * BS, BS, 0, false, 0, seq, 4);
        assert_int_equal(cr_prefix_index_query(f->ix, ctx, seq, 4, NULL, 0, &m, &n), CR_OK);
        assert_int_equal(n, 0);
    }
    /* Unknown contexts: query_tokens answers empty, query by id NOT_FOUND. */
    size_t n;
    uint64_t h = 1;
    assert_int_equal(cr_prefix_index_query(f->ix, 1000, &h, 1, NULL, 0, &m, &n),
                     CR_ERR_OBJECT_NOT_FOUND);
    uint32_t none;
    k = base_key;
    k.tenant = "nobody";
    assert_int_equal(cr_prefix_index_context(f->ix, &k, false, &none), CR_ERR_OBJECT_NOT_FOUND);
}

static void test_dp_ranks(void **state) {
    struct fixture *f = *state;
    const struct cr_prefix_match *m;
    uint32_t pa3;
    assert_int_equal(cr_prefix_index_publisher(f->ix, f->a, 3, &pa3), CR_OK);
    assert_int_not_equal(pa3, f->pa);
    uint32_t again;
    assert_int_equal(cr_prefix_index_publisher(f->ix, f->a, 3, &again), CR_OK);
    assert_int_equal(again, pa3);
    assert_int_equal(cr_prefix_index_publisher(f->ix, f->a, 64, &again), CR_ERR_INVALID_PARAMS);
    assert_int_equal(store(f, f->pa, 0, 1, 0, 4, CR_PREFIX_MEDIUM_GPU), CR_OK);
    assert_int_equal(store(f, pa3, 3, 1, 0, 2, CR_PREFIX_MEDIUM_GPU), CR_OK);
    assert_int_equal(query(f, &base_key, 1, 4, NULL, 0, &m), 1);
    assert_int_equal(m[0].longest_tokens, 4 * BS);
    assert_int_equal(m[0].dp_mask, (1ULL << 0) | (1ULL << 3));
    assert_int_equal(cr_prefix_match_rank_tokens(&m[0], 0), 4 * BS);
    assert_int_equal(cr_prefix_match_rank_tokens(&m[0], 3), 2 * BS);
    assert_int_equal(cr_prefix_match_medium_tokens(&m[0], CR_PREFIX_MEDIUM_GPU), 4 * BS);
    /* Rank 0 leaving keeps rank 3's blocks: the prefix is now 2 blocks. */
    assert_int_equal(cr_prefix_index_publisher_remove(f->ix, f->pa), CR_OK);
    assert_int_equal(query(f, &base_key, 1, 4, NULL, 0, &m), 1);
    assert_int_equal(m[0].longest_tokens, 2 * BS);
    assert_int_equal(m[0].dp_mask, 1ULL << 3);
}

static void test_media(void **state) {
    struct fixture *f = *state;
    const struct cr_prefix_match *m;
    uint8_t id, id2;
    assert_int_equal(cr_prefix_index_medium(f->ix, "cpu", &id), CR_OK);
    assert_int_equal(id, CR_PREFIX_MEDIUM_CPU);
    assert_int_equal(cr_prefix_index_medium(f->ix, NULL, &id), CR_OK);
    assert_int_equal(id, CR_PREFIX_MEDIUM_GPU);
    assert_int_equal(cr_prefix_index_medium(f->ix, "Disk", &id), CR_OK);
    assert_int_equal(id, CR_PREFIX_MEDIUM_DISK);
    assert_int_equal(cr_prefix_index_medium(f->ix, "nvme", &id), CR_OK);
    assert_int_equal(cr_prefix_index_medium(f->ix, "NVMe", &id2), CR_OK);
    assert_int_equal(id, id2);
    assert_string_equal(cr_prefix_index_medium_name(f->ix, id), "NVME");
    char name[16];
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof(name), "x%d", i);
        assert_int_equal(cr_prefix_index_medium(f->ix, name, &id2), CR_OK);
    }
    assert_int_equal(cr_prefix_index_medium(f->ix, "one-too-many", &id2), CR_ERR_NOMEM);
    assert_int_equal(cr_prefix_index_medium(f->ix, "x3", &id2), CR_OK);
    /* GPU 0-3, CPU 0-1, NVME 0: per-medium counts over the matched prefix. */
    assert_int_equal(store(f, f->pa, 0, 1, 0, 4, CR_PREFIX_MEDIUM_GPU), CR_OK);
    assert_int_equal(store(f, f->pa, 0, 1, 0, 2, CR_PREFIX_MEDIUM_CPU), CR_OK);
    assert_int_equal(store(f, f->pa, 0, 1, 0, 1, id), CR_OK);
    assert_int_equal(query(f, &base_key, 1, 4, NULL, 0, &m), 1);
    assert_int_equal(cr_prefix_match_medium_tokens(&m[0], CR_PREFIX_MEDIUM_GPU), 4 * BS);
    assert_int_equal(cr_prefix_match_medium_tokens(&m[0], CR_PREFIX_MEDIUM_CPU), 2 * BS);
    assert_int_equal(cr_prefix_match_medium_tokens(&m[0], id), 1 * BS);
    assert_int_equal(cr_prefix_match_rank_tokens(&m[0], 0), 4 * BS);
    /* Removing block 0 from GPU keeps it on CPU/NVME: still matched. */
    uint64_t b0 = engine(0, 1, 0);
    assert_int_equal(cr_prefix_index_removed(f->ix, f->pa, f->ctx, &b0, 1, CR_PREFIX_MEDIUM_GPU),
                     CR_OK);
    assert_int_equal(query(f, &base_key, 1, 4, NULL, 0, &m), 1);
    assert_int_equal(m[0].longest_tokens, 4 * BS);
    assert_int_equal(cr_prefix_match_medium_tokens(&m[0], CR_PREFIX_MEDIUM_GPU), 3 * BS);
    assert_int_equal(cr_prefix_index_removed(f->ix, f->pa, f->ctx, &b0, 1, CR_PREFIX_MEDIUM_CPU),
                     CR_OK);
    assert_int_equal(cr_prefix_index_removed(f->ix, f->pa, f->ctx, &b0, 1, id), CR_OK);
    assert_int_equal(query(f, &base_key, 1, 4, NULL, 0, &m), 0);
    assert_int_equal(cr_prefix_index_removed(f->ix, f->pa, f->ctx, &b0, 1, 99),
                     CR_ERR_INVALID_PARAMS);
}

static void test_stored_hashes_and_reuse(void **state) {
    struct fixture *f = *state;
    const struct cr_prefix_match *m;
    size_t n;
    uint64_t seq[3] = {11, 0, 33}; /* 0 is a legal hash */
    assert_int_equal(cr_prefix_index_stored_hashes(f->ix, f->pa, f->ctx, NULL, seq, 3, 0), CR_OK);
    assert_int_equal(cr_prefix_index_query(f->ix, f->ctx, seq, 3, NULL, 0, &m, &n), CR_OK);
    assert_int_equal(n, 1);
    assert_int_equal(m[0].longest_tokens, 3 * BS);
    /* Engine hash 0 re-stored naming other content: the old block goes. */
    uint64_t other = 44, eh = 0;
    assert_int_equal(cr_prefix_index_stored_hashes(f->ix, f->pa, f->ctx, &eh, &other, 1, 0),
                     CR_OK);
    assert_int_equal(cr_prefix_index_query(f->ix, f->ctx, seq, 3, NULL, 0, &m, &n), CR_OK);
    assert_int_equal(m[0].longest_tokens, 1 * BS);
    assert_int_equal(cr_prefix_index_removed(f->ix, f->pa, f->ctx, &eh, 1, CR_PREFIX_MEDIUM_ALL),
                     CR_OK);
    assert_int_equal(cr_prefix_index_query(f->ix, f->ctx, &other, 1, NULL, 0, &m, &n), CR_OK);
    assert_int_equal(n, 0);
}

/* A publisher is bounded in engine hashes: a run past the bound is refused
 * whole and counted; hashes it already maps, and other publishers, are not
 * held back; removals make room again. */
static void test_engine_hash_bound(void **state) {
    struct fixture *f = *state;
    cr_prefix_index_set_engine_max(f->ix, 4);
    uint64_t seq[6] = {101, 102, 103, 104, 105, 106};
    assert_int_equal(cr_prefix_index_stored_hashes(f->ix, f->pa, f->ctx, NULL, seq, 3, 0), CR_OK);
    assert_int_equal(cr_prefix_index_stored_hashes(f->ix, f->pa, f->ctx, NULL, seq + 3, 2, 0),
                     CR_ERR_NOMEM);
    assert_int_equal(cr_prefix_index_engine_refusals(f->ix), 1);
    assert_int_equal(cr_prefix_index_engine_count(f->ix, f->pa), 3);
    const struct cr_prefix_match *m;
    size_t n;
    assert_int_equal(cr_prefix_index_query(f->ix, f->ctx, seq, 6, NULL, 0, &m, &n), CR_OK);
    assert_int_equal(n, 1);
    assert_int_equal(m[0].longest_tokens, 3 * BS); /* nothing of the refused run */
    /* Near the bound, hashes it maps already do not count. */
    assert_int_equal(cr_prefix_index_stored_hashes(f->ix, f->pa, f->ctx, NULL, seq + 1, 3, 0),
                     CR_OK);
    assert_int_equal(cr_prefix_index_engine_count(f->ix, f->pa), 4);
    assert_int_equal(cr_prefix_index_stored_hashes(f->ix, f->pb, f->ctx, NULL, seq, 4, 0), CR_OK);
    assert_int_equal(cr_prefix_index_removed(f->ix, f->pa, f->ctx, seq, 2, CR_PREFIX_MEDIUM_ALL),
                     CR_OK);
    assert_int_equal(cr_prefix_index_stored_hashes(f->ix, f->pa, f->ctx, NULL, seq + 4, 2, 0),
                     CR_OK);
    assert_int_equal(cr_prefix_index_engine_refusals(f->ix), 1);
}

static void test_bad_input(void **state) {
    struct fixture *f = *state;
    uint32_t tokens[8] = {0};
    uint64_t eh[2] = {1, 2};
    struct cr_prefix_summary before, after;
    cr_prefix_index_summary(f->ix, &before);
    /* token count != blocks * block size, wrong block size, bad ids, bad medium */
    assert_int_equal(cr_prefix_index_stored_tokens(f->ix, f->pa, f->ctx, NULL, eh, 2, tokens, 7,
                                                   BS, 0), CR_ERR_INVALID_PARAMS);
    assert_int_equal(cr_prefix_index_stored_tokens(f->ix, f->pa, f->ctx, NULL, eh, 1, tokens, 8,
                                                   8, 0), CR_ERR_INVALID_PARAMS);
    assert_int_equal(cr_prefix_index_stored_tokens(f->ix, 77, f->ctx, NULL, eh, 2, tokens, 8,
                                                   BS, 0), CR_ERR_INVALID_PARAMS);
    assert_int_equal(cr_prefix_index_stored_tokens(f->ix, f->pa, 77, NULL, eh, 2, tokens, 8,
                                                   BS, 0), CR_ERR_INVALID_PARAMS);
    assert_int_equal(cr_prefix_index_stored_tokens(f->ix, f->pa, f->ctx, NULL, eh, 2, tokens, 8,
                                                   BS, 9), CR_ERR_INVALID_PARAMS);
    assert_int_equal(cr_prefix_index_stored_hashes(f->ix, f->pa, f->ctx, NULL, eh, 0, 0),
                     CR_ERR_INVALID_PARAMS);
    cr_prefix_index_summary(f->ix, &after);
    assert_int_equal(after.pairs, before.pairs);
    assert_int_equal(after.bytes_used, before.bytes_used);
    struct cr_prefix_context_key k = base_key;
    k.block_size = 0;
    uint32_t ctx;
    assert_int_equal(cr_prefix_index_context(f->ix, &k, true, &ctx), CR_ERR_INVALID_PARAMS);
    uint16_t id;
    assert_int_equal(cr_prefix_index_instance_add(f->ix, "", "t1", &id), CR_ERR_INVALID_PARAMS);
    assert_int_equal(cr_prefix_index_instance_add(f->ix, "a", "t1", &id),
                     CR_ERR_OBJECT_ALREADY_EXISTS);
    assert_int_equal(id, f->a);
    /* Same name in another tenant is another instance. */
    assert_int_equal(cr_prefix_index_instance_add(f->ix, "a", "t2", &id), CR_OK);
    assert_int_not_equal(id, f->a);
    assert_int_equal(cr_prefix_index_publisher(f->ix, 60000, 0, &ctx), CR_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(cr_prefix_index_instance_remove(f->ix, 60000), CR_ERR_OBJECT_NOT_FOUND);
}

static void test_instance_remove(void **state) {
    struct fixture *f = *state;
    const struct cr_prefix_match *m;
    assert_int_equal(store(f, f->pa, 0, 1, 0, 4, CR_PREFIX_MEDIUM_GPU), CR_OK);
    assert_int_equal(store(f, f->pb, 1, 1, 0, 4, CR_PREFIX_MEDIUM_GPU), CR_OK);
    assert_int_equal(cr_prefix_index_instance_remove(f->ix, f->a), CR_OK);
    assert_null(cr_prefix_index_instance_name(f->ix, f->a));
    assert_int_equal(query(f, &base_key, 1, 4, NULL, 0, &m), 1);
    assert_int_equal(m[0].instance_id, f->b);
    /* A new instance reuses the id (and the context's local slot) cleanly. */
    uint16_t d;
    uint32_t pd;
    assert_int_equal(cr_prefix_index_instance_add(f->ix, "d", "t1", &d), CR_OK);
    assert_int_equal(d, f->a);
    assert_string_equal(cr_prefix_index_instance_name(f->ix, d), "d");
    assert_string_equal(cr_prefix_index_instance_tenant(f->ix, d), "t1");
    assert_true(cr_prefix_index_tenant_known(f->ix, "t1"));
    assert_false(cr_prefix_index_tenant_known(f->ix, "t2"));
    assert_false(cr_prefix_index_tenant_known(f->ix, NULL)); /* "default": none here */
    assert_int_equal(cr_prefix_index_publisher(f->ix, d, 0, &pd), CR_OK);
    assert_int_equal(store(f, pd, 5, 1, 0, 2, CR_PREFIX_MEDIUM_CPU), CR_OK);
    size_t n = query(f, &base_key, 1, 4, NULL, 0, &m);
    assert_int_equal(n, 2);
    assert_int_equal(find(m, n, d)->longest_tokens, 2 * BS);
    assert_int_equal(cr_prefix_match_medium_tokens(find(m, n, d), CR_PREFIX_MEDIUM_CPU), 2 * BS);
    assert_int_equal(cr_prefix_match_medium_tokens(find(m, n, d), CR_PREFIX_MEDIUM_GPU), 0);
}

static void test_churn_does_not_grow(void **state) {
    struct fixture *f = *state;
    struct cr_prefix_summary s;
    uint32_t tokens[16 * BS];
    uint64_t eh[16];
    size_t steady = 0;
    cr_prefix_index_summary(f->ix, &s);
    size_t baseline = s.bytes_used;
    /* 64 live runs of 16 blocks per publisher; each round stores one, removes the oldest. */
    for (uint32_t round = 0; round < 3000; round++) {
        for (int who = 0; who < 2; who++) {
            uint32_t pub = who == 0 ? f->pa : f->pb;
            prompt(round, 16, tokens);
            for (uint32_t i = 0; i < 16; i++) eh[i] = engine(who, round, i);
            assert_int_equal(cr_prefix_index_stored_tokens(f->ix, pub, f->ctx, NULL, eh, 16,
                                                           tokens, 16 * BS, BS, 0), CR_OK);
            if (round >= 64) {
                for (uint32_t i = 0; i < 16; i++) eh[i] = engine(who, round - 64, i);
                assert_int_equal(cr_prefix_index_removed(f->ix, pub, f->ctx, eh, 16,
                                                         CR_PREFIX_MEDIUM_ALL), CR_OK);
            }
        }
        cr_prefix_index_summary(f->ix, &s);
        if (round >= 64) assert_int_equal(s.pairs, 2 * 64 * 16);
        if (round >= 64) assert_int_equal(s.blocks, 64 * 16);
        if (round == 500) steady = s.bytes_used;
        if (round > 500) assert_true(s.bytes_used <= steady + steady / 4);
    }
    /* Removing everything gives back all block memory. */
    assert_int_equal(cr_prefix_index_cleared(f->ix, f->pa), CR_OK);
    assert_int_equal(cr_prefix_index_cleared(f->ix, f->pb), CR_OK);
    cr_prefix_index_summary(f->ix, &s);
    assert_int_equal(s.blocks, 0);
    assert_int_equal(s.pairs, 0);
    assert_true(steady > baseline);
    /* What stays is bounded, not proportional to churn: the publishers' track
     * arrays, the context's local slots and the placement-set table. */
    assert_true(s.bytes_used - baseline < 4096);
}

/* Randomised check of the run-length query against a naive per-block model. */
#define R_INST 6
#define R_BLOCKS 24
static void test_random_against_model(void **state) {
    struct fixture *f = *state;
    static uint8_t held[R_INST][4][R_BLOCKS]; /* [instance][rank][block] media mask */
    uint16_t ids[R_INST];
    uint32_t pubs[R_INST][4];
    for (int i = 0; i < R_INST; i++) {
        char name[16];
        snprintf(name, sizeof(name), "r%d", i);
        assert_int_equal(cr_prefix_index_instance_add(f->ix, name, "t1", &ids[i]), CR_OK);
        for (int r = 0; r < 4; r++) {
            assert_int_equal(
                cr_prefix_index_publisher(f->ix, ids[i], (uint8_t)(r * 5), &pubs[i][r]), CR_OK);
        }
    }
    uint32_t tokens[R_BLOCKS * BS];
    uint64_t seq[R_BLOCKS];
    prompt(9, R_BLOCKS, tokens);
    cr_prefix_hash_chain(tokens, R_BLOCKS * BS, BS, 0, false, 0, seq, R_BLOCKS);
    srand(7);
    for (int step = 0; step < 4000; step++) {
        int i = rand() % R_INST, r = rand() % 4, b = rand() % R_BLOCKS, med = rand() % 3;
        uint64_t eh = seq[b] ^ 0x5555;
        if (rand() % 3 != 0) {
            assert_int_equal(cr_prefix_index_stored_hashes(f->ix, pubs[i][r], f->ctx, &eh, &seq[b],
                                                           1, (uint8_t)med), CR_OK);
            held[i][r][b] |= (uint8_t)(1u << med);
        } else {
            assert_int_equal(cr_prefix_index_removed(f->ix, pubs[i][r], f->ctx, &eh, 1, med),
                             CR_OK);
            held[i][r][b] &= (uint8_t)~(1u << med);
        }
        if (step % 10 != 0) continue;
        const struct cr_prefix_match *m;
        size_t n;
        assert_int_equal(cr_prefix_index_query(f->ix, f->ctx, seq, R_BLOCKS, NULL, 0, &m, &n),
                         CR_OK);
        size_t expected_n = 0;
        for (int x = 0; x < R_INST; x++) {
            uint32_t depth = 0, media[3] = {0}, ranks[4] = {0};
            for (; depth < R_BLOCKS; depth++) {
                uint8_t any = 0;
                for (int y = 0; y < 4; y++) any |= held[x][y][depth];
                if (any == 0) break;
                for (int k = 0; k < 3; k++) media[k] += (any >> k) & 1 ? BS : 0;
                for (int y = 0; y < 4; y++) ranks[y] += held[x][y][depth] ? BS : 0;
            }
            const struct cr_prefix_match *got = find(m, n, ids[x]);
            if (depth == 0) {
                assert_null(got);
                continue;
            }
            expected_n++;
            assert_non_null(got);
            assert_int_equal(got->longest_tokens, depth * BS);
            for (int k = 0; k < 3; k++) assert_int_equal(cr_prefix_match_medium_tokens(got, k), media[k]);
            for (int y = 0; y < 4; y++) {
                bool seen = (got->dp_mask >> (y * 5)) & 1;
                assert_int_equal(seen ? cr_prefix_match_rank_tokens(got, y * 5) : 0, ranks[y]);
            }
        }
        assert_int_equal(n, expected_n);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_store_query_remove, setup, teardown),
        cmocka_unit_test_setup_teardown(test_depths_and_first_miss, setup, teardown),
        cmocka_unit_test_setup_teardown(test_filter, setup, teardown),
        cmocka_unit_test_setup_teardown(test_parent_chains, setup, teardown),
        cmocka_unit_test_setup_teardown(test_clear_only_own, setup, teardown),
        cmocka_unit_test_setup_teardown(test_isolation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dp_ranks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_media, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stored_hashes_and_reuse, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_input, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stored_locals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_instance_remove, setup, teardown),
        cmocka_unit_test_setup_teardown(test_engine_hash_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_churn_does_not_grow, setup, teardown),
        cmocka_unit_test_setup_teardown(test_random_against_model, setup, teardown),
        cmocka_unit_test_setup_teardown(test_long_query_stops_at_absent_block, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
