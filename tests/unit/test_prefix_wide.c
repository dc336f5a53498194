/* Unit tests for the prefix index's wide blocks (src/core/prefix_block.c) and
 * the bitset query walk (src/core/prefix_query.c): enough instances that
 * shared blocks switch to the dense form and back, checked against a naive
 * per-block model on random data. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/prefix_hash.h"
#include "core/prefix_index.h"
#include "core/prefix_internal.h"
#include "crescent/error.h"

#define BS 4u
#define W_INST 200  /* 200 local indices: a block goes wide above 128 holders */
#define W_RANKS 2
#define W_BLOCKS 10
#define W_MEDIA 3

static const struct cr_prefix_context_key key = {.tenant = "t", .model = "m", .block_size = BS};

struct world {
    struct cr_prefix_index *ix;
    uint32_t ctx;
    uint16_t ids[W_INST];
    uint32_t pubs[W_INST][W_RANKS];
    uint64_t seq[W_BLOCKS];
    uint8_t held[W_INST][W_RANKS][W_BLOCKS]; /* media mask, the model */
};

static const uint8_t rank_of[W_RANKS] = {0, 3};

static uint64_t rnd_state = 0x2545F4914F6CDD1DULL;
static uint32_t rnd(uint32_t n) {
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 7;
    rnd_state ^= rnd_state << 17;
    return (uint32_t)(rnd_state % n);
}

static struct world *world_new(void) {
    struct world *w = calloc(1, sizeof(*w));
    assert_non_null(w);
    assert_int_equal(cr_prefix_index_create(0, &w->ix), CR_OK);
    assert_int_equal(cr_prefix_index_context(w->ix, &key, true, &w->ctx), CR_OK);
    for (int i = 0; i < W_INST; i++) {
        char name[32];
        snprintf(name, sizeof(name), "i%d", i);
        assert_int_equal(cr_prefix_index_instance_add(w->ix, name, "t", &w->ids[i]), CR_OK);
        for (int r = 0; r < W_RANKS; r++)
            assert_int_equal(cr_prefix_index_publisher(w->ix, w->ids[i], rank_of[r],
                                                       &w->pubs[i][r]), CR_OK);
    }
    uint32_t tokens[W_BLOCKS * BS];
    for (uint32_t t = 0; t < W_BLOCKS * BS; t++) tokens[t] = 7000 + t;
    cr_prefix_hash_chain(tokens, W_BLOCKS * BS, BS, 0, false, 0, w->seq, W_BLOCKS);
    return w;
}

static void world_free(struct world *w) {
    cr_prefix_index_destroy(w->ix);
    free(w);
}

/* Blocks of the context in the dense form now (white box: the test must
 * know both forms were exercised). */
static uint32_t wide_blocks(const struct world *w) {
    const struct prefix_context *ctx = &w->ix->contexts[w->ctx];
    uint32_t n = 0;
    for (uint32_t i = 0; i < ctx->slab_high; i++)
        n += ctx->slab[i].count > 0 && block_is_wide(&ctx->slab[i]);
    return n;
}

/* Every dense block costs at most 32 bytes per holder, 8 times a list's 4
 * (it narrows below an eighth): memory stays proportional to pairs. */
static void check_storage_bound(const struct world *w) {
    const struct prefix_context *ctx = &w->ix->contexts[w->ctx];
    for (uint32_t i = 0; i < ctx->slab_high; i++) {
        const struct prefix_block *b = &ctx->slab[i];
        if (b->count > 0 && block_is_wide(b))
            assert_true(wide_bytes(b->u.wide->locals) <= (size_t)b->count * 4 * 8);
    }
}

static const struct cr_prefix_match *find(const struct cr_prefix_match *m, size_t n, uint16_t id) {
    for (size_t i = 0; i < n; i++)
        if (m[i].instance_id == id) return &m[i];
    return NULL;
}

/* Queries the first `blocks` blocks (with an optional filter of instance
 * indices) and checks every instance's answer against the model. */
static void check_query(struct world *w, uint32_t blocks, const bool *in_filter) {
    uint16_t filter[W_INST + 1];
    size_t filter_count = 0;
    if (in_filter != NULL) {
        for (int i = 0; i < W_INST; i++)
            if (in_filter[i]) filter[filter_count++] = w->ids[i];
        filter[filter_count++] = 60000; /* an id the index does not know */
    }
    const struct cr_prefix_match *m;
    size_t n = 0;
    assert_int_equal(cr_prefix_index_query(w->ix, w->ctx, w->seq, blocks,
                                           in_filter != NULL ? filter : NULL, filter_count, &m,
                                           &n), CR_OK);
    size_t expected_n = 0;
    for (int x = 0; x < W_INST; x++) {
        uint32_t depth = 0, media[W_MEDIA] = {0}, ranks[W_RANKS] = {0};
        for (; depth < blocks; depth++) {
            uint8_t any = 0;
            for (int r = 0; r < W_RANKS; r++) any |= w->held[x][r][depth];
            if (any == 0) break;
            for (int k = 0; k < W_MEDIA; k++) media[k] += (any >> k) & 1 ? BS : 0;
            for (int r = 0; r < W_RANKS; r++) ranks[r] += w->held[x][r][depth] ? BS : 0;
        }
        const struct cr_prefix_match *got = find(m, n, w->ids[x]);
        if (depth == 0 || (in_filter != NULL && !in_filter[x])) {
            assert_null(got);
            continue;
        }
        expected_n++;
        assert_non_null(got);
        assert_int_equal(got->longest_tokens, depth * BS);
        for (int k = 0; k < W_MEDIA; k++) assert_int_equal(cr_prefix_match_medium_tokens(got, k), media[k]);
        for (int r = 0; r < W_RANKS; r++) {
            bool seen = (got->dp_mask >> rank_of[r]) & 1;
            assert_int_equal(seen ? cr_prefix_match_rank_tokens(got, rank_of[r]) : 0, ranks[r]);
        }
        assert_int_equal(got->dp_mask & ~((1ULL << rank_of[0]) | (1ULL << rank_of[1])), 0);
    }
    assert_int_equal(n, expected_n);
}

static void random_query(struct world *w) {
    uint32_t blocks = 1 + rnd(W_BLOCKS);
    if (rnd(3) != 0) {
        check_query(w, blocks, NULL);
        return;
    }
    bool in_filter[W_INST];
    uint32_t share = 1 + rnd(4); /* a quarter to all of the instances */
    for (int i = 0; i < W_INST; i++) in_filter[i] = rnd(4) < share;
    check_query(w, blocks, in_filter);
}

/* One random store or removal, on the index and the model.  Early blocks
 * are picked more often, so they gather the most holders (as a shared
 * system prompt does). */
static void random_op(struct world *w, uint32_t store_percent) {
    int i = (int)rnd(W_INST), r = (int)rnd(W_RANKS);
    uint32_t b = rnd(W_BLOCKS);
    if (rnd(2) == 0) b = b / 3;
    uint64_t eh = w->seq[b] ^ 0x5555; /* engine hashes are opaque */
    if (rnd(100) < store_percent) {
        uint8_t med = (uint8_t)rnd(W_MEDIA);
        assert_int_equal(cr_prefix_index_stored_hashes(w->ix, w->pubs[i][r], w->ctx, &eh,
                                                       &w->seq[b], 1, med), CR_OK);
        w->held[i][r][b] |= (uint8_t)(1u << med);
    } else if (rnd(2) == 0) {
        int med = (int)rnd(W_MEDIA);
        assert_int_equal(cr_prefix_index_removed(w->ix, w->pubs[i][r], w->ctx, &eh, 1, med),
                         CR_OK);
        w->held[i][r][b] &= (uint8_t)~(1u << med);
    } else {
        assert_int_equal(cr_prefix_index_removed(w->ix, w->pubs[i][r], w->ctx, &eh, 1,
                                                 CR_PREFIX_MEDIUM_ALL), CR_OK);
        w->held[i][r][b] = 0;
    }
}

/* Fill and drain in turns: blocks go wide as they fill and narrow as they
 * drain; the query must agree with the model throughout. */
static void test_random_wide_against_model(void **state) {
    (void)state;
    struct world *w = world_new();
    uint32_t most_wide = 0, narrowed = 0;
    for (int phase = 0; phase < 6; phase++) {
        uint32_t store_percent = phase % 2 == 0 ? 85 : 2;
        uint32_t wide_before = wide_blocks(w);
        for (int op = 0; op < (phase % 2 == 0 ? 12000 : 24000); op++) {
            random_op(w, store_percent);
            if (op % 40 == 0) random_query(w);
        }
        uint32_t wide_after = wide_blocks(w);
        check_storage_bound(w);
        if (wide_after > most_wide) most_wide = wide_after;
        if (wide_after < wide_before) narrowed++;
        for (uint32_t blocks = 1; blocks <= W_BLOCKS; blocks++) check_query(w, blocks, NULL);
    }
    assert_true(most_wide > 0); /* both forms were exercised */
    assert_true(narrowed > 0);
    world_free(w);
}

/* Clearing publishers and removing instances (whose local indices are then
 * reused) keeps the bitset walk and the dense arrays right. */
static void test_wide_clear_and_reuse(void **state) {
    (void)state;
    struct world *w = world_new();
    for (int op = 0; op < 20000; op++) random_op(w, 90);
    assert_true(wide_blocks(w) > 0);
    for (int i = 0; i < W_INST; i += 3) {
        assert_int_equal(cr_prefix_index_cleared(w->ix, w->pubs[i][0]), CR_OK);
        memset(w->held[i][0], 0, sizeof(w->held[i][0]));
    }
    check_query(w, W_BLOCKS, NULL);
    for (int i = 1; i < W_INST; i += 4) {
        assert_int_equal(cr_prefix_index_instance_remove(w->ix, w->ids[i]), CR_OK);
        memset(w->held[i], 0, sizeof(w->held[i]));
        char name[32];
        snprintf(name, sizeof(name), "again%d", i);
        assert_int_equal(cr_prefix_index_instance_add(w->ix, name, "t", &w->ids[i]), CR_OK);
        for (int r = 0; r < W_RANKS; r++)
            assert_int_equal(cr_prefix_index_publisher(w->ix, w->ids[i], rank_of[r],
                                                       &w->pubs[i][r]), CR_OK);
    }
    check_query(w, W_BLOCKS, NULL);
    for (int op = 0; op < 20000; op++) {
        random_op(w, 60);
        if (op % 50 == 0) random_query(w);
    }
    world_free(w);
}

/* A shared prompt held to different depths: the walk's drop-outs and runs,
 * with everyone holding the first blocks (wide) and few the last (narrow). */
static void test_shared_prompt_depths(void **state) {
    (void)state;
    struct world *w = world_new();
    for (int i = 0; i < W_INST; i++) {
        uint32_t depth = 1 + (uint32_t)i % W_BLOCKS;
        for (uint32_t b = 0; b < depth; b++) {
            /* rank 3 joins halfway for odd instances: a placement change mid-walk */
            uint64_t eh = w->seq[b] ^ 0x5555;
            assert_int_equal(cr_prefix_index_stored_hashes(w->ix, w->pubs[i][0], w->ctx, &eh,
                                                           &w->seq[b], 1, 0), CR_OK);
            w->held[i][0][b] |= 1;
            if (i % 2 == 1 && b >= depth / 2) {
                assert_int_equal(cr_prefix_index_stored_hashes(w->ix, w->pubs[i][1], w->ctx,
                                                               &eh, &w->seq[b], 1, 1), CR_OK);
                w->held[i][1][b] |= 2;
            }
        }
    }
    assert_true(wide_blocks(w) > 0);
    for (uint32_t blocks = 1; blocks <= W_BLOCKS; blocks++) check_query(w, blocks, NULL);
    world_free(w);
}

/* A placement that changes on a wide block between two narrow blocks with
 * identical records: the walk must see the change and the change back. */
static void test_placement_change_between_forms(void **state) {
    (void)state;
    struct world *w = world_new();
    for (int i = 0; i < W_INST; i++) {
        uint8_t med1 = i < 10 ? 1 : 0; /* the first ten hold block 1 on CPU only */
        for (uint32_t b = 0; b < 3; b++) {
            if (b != 1 && i >= 10) continue; /* blocks 0 and 2: the first ten only */
            uint64_t eh = w->seq[b] ^ 0x5555;
            uint8_t med = b == 1 ? med1 : 0;
            assert_int_equal(cr_prefix_index_stored_hashes(w->ix, w->pubs[i][0], w->ctx, &eh,
                                                           &w->seq[b], 1, med), CR_OK);
            w->held[i][0][b] |= (uint8_t)(1u << med);
        }
    }
    const struct prefix_context *ctx = &w->ix->contexts[w->ctx];
    struct prefix_block *b0 = prefix_block_find(ctx, w->seq[0]);
    struct prefix_block *b1 = prefix_block_find(ctx, w->seq[1]);
    assert_true(!block_is_wide(b0) && block_is_wide(b1));
    const struct cr_prefix_match *m;
    size_t n;
    assert_int_equal(cr_prefix_index_query(w->ix, w->ctx, w->seq, 3, NULL, 0, &m, &n), CR_OK);
    assert_int_equal(n, 10);
    const struct cr_prefix_match *got = find(m, n, w->ids[3]);
    assert_non_null(got);
    assert_int_equal(got->longest_tokens, 3 * BS);
    assert_int_equal(cr_prefix_match_medium_tokens(got, 0), 2 * BS);
    assert_int_equal(cr_prefix_match_medium_tokens(got, 1), 1 * BS);
    for (uint32_t blocks = 1; blocks <= 3; blocks++) check_query(w, blocks, NULL);
    world_free(w);
}

/* Every instance holds every block at one placement (wide blocks), except
 * that instance 9's first pair in the context (its home placement) was on
 * CPU while it holds blocks 0-3 on GPU (and no more), and instance 4 holds
 * block 3 on CPU too.  The walk skips comparing placements only when
 * neither the block nor the survivors differ from home: blocks 4-9 are all
 * at home, yet instance 4 arrives there on CPU and GPU, so the walk must
 * still compare and see it go back to GPU alone. */
static void test_home_placement_skip(void **state) {
    (void)state;
    struct world *w = world_new();
    uint64_t other = 0xabcdef, other_engine = 0x1234;
    assert_int_equal(cr_prefix_index_stored_hashes(w->ix, w->pubs[9][0], w->ctx, &other_engine,
                                                   &other, 1, 1), CR_OK);
    for (int i = 0; i < W_INST; i++) {
        for (uint32_t b = 0; b < (i == 9 ? 4u : W_BLOCKS); b++) {
            uint64_t eh = w->seq[b] ^ 0x5555;
            assert_int_equal(cr_prefix_index_stored_hashes(w->ix, w->pubs[i][0], w->ctx, &eh,
                                                           &w->seq[b], 1, 0), CR_OK);
            w->held[i][0][b] |= 1;
        }
    }
    uint64_t eh3 = w->seq[3] ^ 0x5555;
    assert_int_equal(cr_prefix_index_stored_hashes(w->ix, w->pubs[4][0], w->ctx, &eh3,
                                                   &w->seq[3], 1, 1), CR_OK);
    w->held[4][0][3] |= 2;
    assert_int_equal(wide_blocks(w), W_BLOCKS);
    const struct prefix_context *ctx = &w->ix->contexts[w->ctx];
    assert_int_equal(prefix_block_find(ctx, w->seq[3])->u.wide->nonhome, 2);
    assert_int_equal(prefix_block_find(ctx, w->seq[5])->u.wide->nonhome, 0);
    const struct cr_prefix_match *m;
    size_t n;
    assert_int_equal(cr_prefix_index_query(w->ix, w->ctx, w->seq, W_BLOCKS, NULL, 0, &m, &n),
                     CR_OK);
    const struct cr_prefix_match *got = find(m, n, w->ids[4]);
    assert_non_null(got);
    assert_int_equal(cr_prefix_match_medium_tokens(got, 0), W_BLOCKS * BS);
    assert_int_equal(cr_prefix_match_medium_tokens(got, 1), 1 * BS);
    got = find(m, n, w->ids[9]);
    assert_non_null(got);
    assert_int_equal(got->longest_tokens, 4 * BS);
    assert_int_equal(cr_prefix_match_medium_tokens(got, 0), 4 * BS);
    assert_int_equal(cr_prefix_match_medium_tokens(got, 1), 0);
    for (uint32_t blocks = 1; blocks <= W_BLOCKS; blocks++) check_query(w, blocks, NULL);
    /* Instance 4 back at home on block 3: every block is at home again. */
    assert_int_equal(cr_prefix_index_removed(w->ix, w->pubs[4][0], w->ctx, &eh3, 1, 1), CR_OK);
    w->held[4][0][3] &= (uint8_t)~2u;
    assert_int_equal(prefix_block_find(ctx, w->seq[3])->u.wide->nonhome, 1);
    for (uint32_t blocks = 1; blocks <= W_BLOCKS; blocks++) check_query(w, blocks, NULL);
    world_free(w);
}

/* A wide block stays within its bound when many instances join after it
 * went wide: the first of them to hold it turns it back into a list. */
static void test_joiners_keep_bound(void **state) {
    (void)state;
    struct world *w = world_new();
    uint64_t eh = w->seq[0] ^ 0x5555;
    for (int i = 0; i < 150; i++) {
        assert_int_equal(cr_prefix_index_stored_hashes(w->ix, w->pubs[i][0], w->ctx, &eh,
                                                       &w->seq[0], 1, 0), CR_OK);
        w->held[i][0][0] = 1;
    }
    assert_int_equal(wide_blocks(w), 1);
    uint32_t last = 0;
    for (int j = 0; j < 5000; j++) { /* joiners store a block of their own */
        char name[32];
        uint16_t id;
        snprintf(name, sizeof(name), "joiner%d", j);
        assert_int_equal(cr_prefix_index_instance_add(w->ix, name, "t", &id), CR_OK);
        assert_int_equal(cr_prefix_index_publisher(w->ix, id, 0, &last), CR_OK);
        uint64_t own = 0xABC000 + (uint64_t)j;
        assert_int_equal(cr_prefix_index_stored_hashes(w->ix, last, w->ctx, NULL, &own, 1, 0),
                         CR_OK);
    }
    assert_int_equal(cr_prefix_index_stored_hashes(w->ix, last, w->ctx, &eh, &w->seq[0], 1, 0),
                     CR_OK);
    assert_int_equal(wide_blocks(w), 0);
    check_storage_bound(w);
    const struct cr_prefix_match *m;
    size_t n;
    assert_int_equal(cr_prefix_index_query(w->ix, w->ctx, w->seq, 1, NULL, 0, &m, &n), CR_OK);
    assert_int_equal(n, 151); /* the 150 and the last joiner */
    for (int i = 0; i < 150; i++) {
        const struct cr_prefix_match *got = find(m, n, w->ids[i]);
        assert_non_null(got);
        assert_int_equal(got->longest_tokens, BS);
    }
    world_free(w);
}

/* Dense storage is bounded: at most a constant per holder as blocks widen,
 * narrow again as they drain, and draining everything gives the memory back. */
static void test_wide_memory_bounded(void **state) {
    (void)state;
    struct world *w = world_new();
    struct cr_prefix_summary s;
    cr_prefix_index_summary(w->ix, &s);
    size_t baseline = s.bytes_used, drained = 0;
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < W_INST; i++)
            for (uint32_t b = 0; b < W_BLOCKS; b++) {
                uint64_t eh = w->seq[b] ^ 0x5555;
                assert_int_equal(cr_prefix_index_stored_hashes(w->ix, w->pubs[i][0], w->ctx, &eh,
                                                               &w->seq[b], 1, 0), CR_OK);
            }
        assert_true(wide_blocks(w) == W_BLOCKS);
        cr_prefix_index_summary(w->ix, &s);
        assert_int_equal(s.pairs, W_INST * W_BLOCKS);
        assert_true(s.bytes_used > baseline);
        check_storage_bound(w);
        for (int i = 0; i < W_INST; i++) {
            uint64_t eh[W_BLOCKS];
            for (uint32_t b = 0; b < W_BLOCKS; b++) eh[b] = w->seq[b] ^ 0x5555;
            assert_int_equal(cr_prefix_index_removed(w->ix, w->pubs[i][0], w->ctx, eh, W_BLOCKS,
                                                     CR_PREFIX_MEDIUM_ALL), CR_OK);
            if (i == W_INST - 10) assert_int_equal(wide_blocks(w), 0); /* narrowed again */
        }
        cr_prefix_index_summary(w->ix, &s);
        assert_int_equal(s.pairs, 0);
        assert_int_equal(s.blocks, 0);
        /* What stays: the publishers' tracks, local slots, placement sets. */
        /* What stays after the first drain (the publishers' track arrays, the
         * placement sets) is bounded by publishers; churn adds nothing. */
        if (round == 0) drained = s.bytes_used;
        assert_true(s.bytes_used <= drained + 1024);
    }
    world_free(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_wide_against_model),
        cmocka_unit_test(test_wide_clear_and_reuse),
        cmocka_unit_test(test_shared_prompt_depths),
        cmocka_unit_test(test_placement_change_between_forms),
        cmocka_unit_test(test_home_placement_skip),
        cmocka_unit_test(test_joiners_keep_bound),
        cmocka_unit_test(test_wide_memory_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
