/* Prefix queries (see prefix_index.h).
 *
 * The walk keeps the still-matching instances (survivors) as a bitset by
 * local index, beside each survivor's current placement-set id.  Per block:
 *  - a wide block (prefix_block.c) is intersected with the survivors a word
 *    (64 instances) at a time; the bits that go are instances missing from
 *    the block, which drop out at that depth.  When the block then holds
 *    exactly the survivors, one memcmp of the dense placement ids against
 *    the survivors' tells whether any placement changed;
 *  - a narrow block's records are looked up in the bitset one by one; only
 *    when fewer survivors were found than there are does a word pass find
 *    the ones that dropped out.
 * So a block shared by 1,000 instances costs 16 word operations and a 2 KB
 * compare, not a merge of 1,000 records.  Per-medium and per-rank tokens are
 * added once per run of identical placement, not once per block.  Scratch
 * grows to the largest context seen and is reused: a warm query does not
 * allocate. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "core/prefix_hash.h"
#include "core/prefix_internal.h"
#include "crescent/error.h"

/* Blocks looked up ahead of the walk.  Each block costs three dependent
 * cache misses: its map slot, its slab entry, then its holders (a wide
 * block's header and bitset, a narrow block's records).  Every hash of the
 * query is known up front, so the three are started in stages, each a few
 * blocks ahead of the walk: a stage's load then finds its line already on
 * the way, and the misses of several blocks overlap instead of following
 * one another (they were a third of a 128-block query's time). */
#define AHEAD_MAP 12u  /* the map slot is prefetched */
#define AHEAD_SLAB 6u  /* the map is read (the slot is cached) and the slab entry prefetched */
#define AHEAD_DATA 3u  /* the slab entry is read and the holders prefetched */
#define AHEAD_RING 8u  /* blocks looked up and not yet walked: > AHEAD_SLAB, a power of two */
#define AHEAD_RECS_MAX 512u /* bytes of a narrow block's records prefetched */

struct walk {
    const struct cr_prefix_index *index;
    const struct prefix_context *ctx;
    struct prefix_scratch *s;
    uint32_t words;       /* bitset words covering the context's local indices */
    uint32_t alive_count; /* bits set in s->alive_bits */
    uint32_t nonhome;     /* survivors whose current placement id is not their home */
    uint32_t next_slot;   /* matches set up so far */
    /* The last block, when narrow: the survivors hold it with its
     * placements, so a next block with the same records changes nothing,
     * and one memcmp tells (most of a shared prompt's tail). */
    const uint32_t *same;
    uint32_t same_count;
};

void prefix_scratch_free(struct prefix_scratch *scratch) {
    assert(scratch != NULL);
    free(scratch->alive_bits);
    free(scratch->mark_bits);
    free(scratch->cur_attr);
    free(scratch->run_start);
    free(scratch->slot_of);
    free(scratch->matches);
    free(scratch->counts);
    free(scratch->hashes);
    free(scratch->filter);
    memset(scratch, 0, sizeof(*scratch));
}

static int grow_array(void **array, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return CR_OK;
    size_t new_cap = need < 64 ? 64 : need + need / 2;
    void *grown = realloc(*array, new_cap * elem);
    if (grown == NULL) return CR_ERR_NOMEM;
    *array = grown;
    *cap = new_cap;
    return CR_OK;
}

/* Sizes scratch for `candidates` matches and `locals` local indices (a
 * multiple of 64).  The by-local arrays are sized together, so one capacity
 * covers them all. */
static int scratch_reserve(struct prefix_scratch *s, size_t candidates, size_t locals) {
    int rc = grow_array((void **)&s->matches, &s->match_cap, candidates,
                        sizeof(struct cr_prefix_match));
    /* Room for every candidate's counts, though few use them: only the
     * pages of those that do are ever touched. */
    if (rc == CR_OK)
        rc = grow_array((void **)&s->counts, &s->counts_cap, candidates,
                        COUNTS_PER_MATCH * sizeof(uint32_t));
    if (rc != CR_OK) return rc;
    if (locals > s->local_cap) {
        size_t cap = locals + locals / 2;
        cap = (cap + 63) & ~(size_t)63;
        uint64_t *alive = realloc(s->alive_bits, cap / 8);
        if (alive != NULL) s->alive_bits = alive;
        uint64_t *mark = alive != NULL ? realloc(s->mark_bits, cap / 8) : NULL;
        if (mark != NULL) s->mark_bits = mark;
        uint16_t *cur = mark != NULL ? realloc(s->cur_attr, cap * sizeof(uint16_t)) : NULL;
        if (cur != NULL) s->cur_attr = cur;
        uint32_t *run = cur != NULL ? realloc(s->run_start, cap * sizeof(uint32_t)) : NULL;
        if (run != NULL) s->run_start = run;
        uint32_t *slot = run != NULL ? realloc(s->slot_of, cap * sizeof(uint32_t)) : NULL;
        if (slot == NULL) return CR_ERR_NOMEM; /* the grown ones are kept: still valid */
        s->slot_of = slot;
        s->local_cap = cap;
        /* Marks are kept all clear between steps; a fresh array starts so. */
        memset(s->mark_bits, 0, cap / 8);
    }
    return CR_OK;
}

/* The counts of the match in `slot` (cr_prefix_match.counts). */
static uint32_t *counts_of(struct prefix_scratch *s, uint32_t slot) {
    return s->counts + (size_t)slot * COUNTS_PER_MATCH;
}

/* An instance's match, given its slot on first use (slot_of is all ones
 * until then): entering the walk writes nothing per instance, so a block
 * held by 1,000 instances starts the walk with two copies and two fills,
 * and each match's cache lines are written once, when the instance leaves
 * the walk or changes placement. */
static struct cr_prefix_match *match_of(struct walk *w, uint16_t local) {
    uint32_t slot = w->s->slot_of[local];
    if (slot == UINT32_MAX) {
        slot = w->s->slot_of[local] = w->next_slot++;
        struct cr_prefix_match *m = &w->s->matches[slot];
        m->instance_id = w->ctx->locals[local].global;
        m->longest_tokens = 0;
        m->media_mask = 0;
        m->dp_mask = 0;
        m->counts = counts_of(w->s, slot);
        return m;
    }
    return &w->s->matches[slot];
}

/* Adds blocks [run start, end) held with the survivor's current placement
 * to its match. */
static void flush_run(struct walk *w, uint16_t local, uint32_t end) {
    uint32_t start = w->s->run_start[local];
    assert(end >= start);
    if (end == start) return;
    struct cr_prefix_match *m = match_of(w, local);
    uint32_t *counts = counts_of(w->s, w->s->slot_of[local]);
    uint32_t *ranks_at = counts + CR_PREFIX_MEDIA_MAX;
    const struct prefix_attr *a = prefix_attr_get(w->index, w->s->cur_attr[local]);
    uint32_t tokens = (end - start) * w->ctx->block_size;
    /* A count is set up on its first use (the mask bit), not cleared ahead:
     * the pool is not touched for media and ranks no run has. */
    for (uint8_t media = a->media_mask; media != 0; media &= (uint8_t)(media - 1)) {
        unsigned md = (unsigned)__builtin_ctz(media);
        uint8_t bit = (uint8_t)(1u << md);
        if (!(m->media_mask & bit)) counts[md] = 0;
        m->media_mask |= bit;
        counts[md] += tokens;
    }
    for (uint64_t ranks = a->dp_mask; ranks != 0; ranks &= ranks - 1) {
        unsigned r = (unsigned)__builtin_ctzll(ranks);
        uint64_t bit = 1ULL << r;
        if (!(m->dp_mask & bit)) ranks_at[r] = 0;
        m->dp_mask |= bit;
        ranks_at[r] += tokens;
    }
    w->s->run_start[local] = end;
}

/* The survivor's placement changes at `depth`: close its run. */
static void change_attr(struct walk *w, uint16_t local, uint16_t attr, uint32_t depth) {
    flush_run(w, local, depth);
    uint16_t home = w->ctx->locals[local].home;
    w->nonhome = w->nonhome - (w->s->cur_attr[local] != home) + (attr != home);
    w->s->cur_attr[local] = attr;
}

/* A survivor whose placement changed on the way leaves the walk having
 * matched `depth` blocks: its last run is added to its match. */
static void drop_changed(struct walk *w, uint16_t local, uint32_t depth) {
    struct prefix_scratch *s = w->s;
    flush_run(w, local, depth);
    s->matches[s->slot_of[local]].longest_tokens = depth * w->ctx->block_size;
}

/* Drops the survivors whose bit in `keep` is clear (they matched `depth`
 * blocks); returns survivors left.  Nearly every one held one run from block
 * 0 at one placement: its match is written once, whole, with no run to add
 * up.  A block that 1,000 instances hold and the next one only 60 drops 940
 * here at once, so the loop keeps its counters in registers: kept in *w,
 * each was a store and a reload per instance, one chain through them all. */
static uint32_t drop_unkept(struct walk *w, const uint64_t *keep, uint32_t keep_words,
                            uint32_t depth) {
    struct prefix_scratch *s = w->s;
    uint64_t *alive = s->alive_bits;
    uint16_t *cur = s->cur_attr;
    const uint32_t *slot_of = s->slot_of;
    const struct prefix_local *locals = w->ctx->locals;
    const struct prefix_attr *attrs = w->index->attrs.attrs;
    struct cr_prefix_match *matches = s->matches;
    uint32_t longest = depth * w->ctx->block_size, next = w->next_slot, nonhome = w->nonhome;
    uint32_t count = 0;
    for (uint32_t word = 0; word < w->words; word++) {
        uint64_t k = word < keep_words ? keep[word] : 0;
        for (uint64_t gone = alive[word] & ~k; gone != 0; gone &= gone - 1) {
            uint16_t local = (uint16_t)(word * 64 + (uint32_t)__builtin_ctzll(gone));
            uint16_t attr = cur[local];
            nonhome -= attr != locals[local].home;
            if (slot_of[local] != UINT32_MAX) { /* its placement changed on the way */
                drop_changed(w, local, depth);
            } else {
                assert(s->run_start[local] == 0);
                const struct prefix_attr *a = &attrs[attr];
                struct cr_prefix_match *m = &matches[next++];
                m->instance_id = locals[local].global;
                m->media_mask = a->media_mask;
                m->longest_tokens = longest;
                m->dp_mask = a->dp_mask;
                m->counts = NULL; /* every medium and rank of the masks holds `longest` */
            }
            cur[local] = 0;
        }
        alive[word] &= k;
        count += (uint32_t)__builtin_popcountll(alive[word]);
    }
    w->next_slot = next;
    w->nonhome = nonhome;
    return count;
}

static uint32_t step_wide(struct walk *w, const struct prefix_block *b, uint32_t depth) {
    const struct prefix_wide *wide = b->u.wide;
    w->same = NULL;
    uint32_t words = wide->locals / 64 < w->words ? wide->locals / 64 : w->words;
    w->alive_count = drop_unkept(w, wide->bits, words, depth);
    if (w->alive_count == 0) return 0;
    const uint16_t *attrs = wide_attrs_const(wide);
    uint16_t *cur = w->s->cur_attr;
    /* Exactly the survivors hold it (they are a subset).  When every one of
     * them holds it and held the last block at its home placement, nothing
     * changed, and nothing per instance need be read; otherwise every id
     * outside them is 0 on both sides, so one compare covers all placements. */
    size_t attr_bytes = (size_t)words * 64 * sizeof(uint16_t);
    if (b->count == w->alive_count && wide->nonhome == 0 && w->nonhome == 0) {
        assert(memcmp(attrs, cur, attr_bytes) == 0);
        return w->alive_count;
    }
    if (b->count == w->alive_count && memcmp(attrs, cur, attr_bytes) == 0) return w->alive_count;
    const uint64_t *alive = w->s->alive_bits;
    for (uint32_t word = 0; word < words; word++) {
        for (uint64_t bits = alive[word]; bits != 0; bits &= bits - 1) {
            uint16_t local = (uint16_t)(word * 64 + (uint32_t)__builtin_ctzll(bits));
            if (attrs[local] != cur[local]) change_attr(w, local, attrs[local], depth);
        }
    }
    return w->alive_count;
}

static uint32_t step_narrow(struct walk *w, const struct prefix_block *b, uint32_t depth) {
    const uint32_t *recs = block_records_const(b);
    if (w->same != NULL && b->count == w->same_count &&
        memcmp(recs, w->same, b->count * sizeof(uint32_t)) == 0)
        return w->alive_count;
    uint64_t *alive = w->s->alive_bits, *mark = w->s->mark_bits;
    uint16_t *cur = w->s->cur_attr;
    uint32_t found = 0;
    for (uint32_t i = 0; i < b->count; i++) {
        uint16_t local = record_local(recs[i]);
        uint64_t bit = 1ULL << (local % 64);
        if (!(alive[local / 64] & bit)) continue; /* dropped out earlier, or filtered */
        found++;
        mark[local / 64] |= bit;
        if (record_attr(recs[i]) != cur[local]) change_attr(w, local, record_attr(recs[i]), depth);
    }
    if (found < w->alive_count) w->alive_count = drop_unkept(w, mark, w->words, depth);
    /* Marks go back to clear: every mark is a survivor's bit. */
    for (uint32_t i = 0; i < b->count; i++) {
        uint16_t local = record_local(recs[i]);
        mark[local / 64] &= ~(1ULL << (local % 64));
    }
    assert(w->alive_count == found);
    /* Survivors now hold this block with its placements: a next block with
     * the same records keeps every one of them as it is. */
    w->same = recs;
    w->same_count = b->count;
    return found;
}

static int u16_compare(const void *a, const void *b) {
    return (int)*(const uint16_t *)a - (int)*(const uint16_t *)b;
}

static bool filter_has(const uint16_t *locals, size_t count, uint16_t local) {
    if (locals == NULL) return true;
    size_t lo = 0, hi = count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (locals[mid] < local) lo = mid + 1;
        else hi = mid;
    }
    return lo < count && locals[lo] == local;
}

static void walk_enter(struct walk *w, uint16_t local, uint16_t attr) {
    w->alive_count++;
    w->nonhome += attr != w->ctx->locals[local].home;
    w->s->alive_bits[local / 64] |= 1ULL << (local % 64);
    w->s->cur_attr[local] = attr;
}

/* Starts the walk from block 0's holders (those in the filter, if any). */
static void walk_start(struct walk *w, const struct prefix_block *b, const uint16_t *filter,
                       size_t filter_count) {
    size_t locals = (size_t)w->words * 64;
    w->alive_count = 0;
    w->nonhome = 0;
    /* Every survivor's run starts at block 0 and has no match yet. */
    memset(w->s->run_start, 0, locals * sizeof(uint32_t));
    memset(w->s->slot_of, 0xff, locals * sizeof(uint32_t));
    memset(w->s->alive_bits, 0, w->words * sizeof(uint64_t));
    memset(w->s->cur_attr, 0, locals * sizeof(uint16_t));
    if (block_is_wide(b)) {
        const struct prefix_wide *wide = b->u.wide;
        const uint16_t *attrs = wide_attrs_const(wide);
        uint32_t words = wide->locals / 64 < w->words ? wide->locals / 64 : w->words;
        if (filter == NULL) { /* all its holders: copy the bitset and the placements */
            memcpy(w->s->alive_bits, wide->bits, words * sizeof(uint64_t));
            memcpy(w->s->cur_attr, attrs, (size_t)words * 64 * sizeof(uint16_t));
            w->alive_count = b->count;
            w->nonhome = wide->nonhome;
            return;
        }
        for (uint32_t word = 0; word < words; word++) {
            for (uint64_t bits = wide->bits[word]; bits != 0; bits &= bits - 1) {
                uint16_t local = (uint16_t)(word * 64 + (uint32_t)__builtin_ctzll(bits));
                if (filter_has(filter, filter_count, local)) walk_enter(w, local, attrs[local]);
            }
        }
    } else {
        const uint32_t *recs = block_records_const(b);
        for (uint32_t i = 0; i < b->count; i++) {
            uint16_t local = record_local(recs[i]);
            if (filter_has(filter, filter_count, local)) walk_enter(w, local, record_attr(recs[i]));
        }
        w->same = recs;
        w->same_count = b->count;
    }
}

/* Maps the filter's instance ids to the context's local indices, sorted,
 * into s->filter; returns how many the context knows.  Reads the index only. */
static size_t filter_locals(const struct cr_prefix_index *index, struct prefix_scratch *s,
                            const struct prefix_context *ctx, const uint16_t *filter,
                            size_t filter_count) {
    size_t n = 0;
    for (size_t i = 0; i < filter_count; i++) {
        uint16_t local;
        /* create == false: the call only looks up (the cast is for its other use) */
        if (prefix_context_local((struct cr_prefix_index *)index, (struct prefix_context *)ctx,
                                 filter[i], false, &local) == CR_OK) {
            s->filter[n++] = local;
        }
    }
    qsort(s->filter, n, sizeof(uint16_t), u16_compare);
    return n;
}

/* The blocks of one query, looked up ahead of the walk (AHEAD_*). */
struct ahead {
    const struct prefix_context *ctx;
    const uint64_t *hashes;
    uint32_t count;
    uint32_t words; /* the context's bitset words: a wide block's bitset length */
    const struct prefix_block *ring[AHEAD_RING]; /* block i at i % AHEAD_RING */
};

static void ahead_lookup(struct ahead *a, uint32_t i) {
    const struct prefix_block *b = prefix_block_find(a->ctx, a->hashes[i]);
    a->ring[i % AHEAD_RING] = b;
    if (b != NULL) __builtin_prefetch(b);
}

static void prefetch_bytes(const void *p, size_t bytes) {
    for (size_t at = 0; at < bytes; at += 64) __builtin_prefetch((const char *)p + at);
}

static void ahead_holders(const struct ahead *a, uint32_t i) {
    const struct prefix_block *b = a->ring[i % AHEAD_RING];
    if (b == NULL) return;
    if (block_is_wide(b)) {
        /* The header and bitset (the block's own length is behind the miss;
         * the context's is not, and is at least as long).  The dense ids
         * are read only when a placement may have changed: not prefetched. */
        prefetch_bytes(b->u.wide, sizeof(struct prefix_wide) + (size_t)a->words * 8);
    } else if (b->cap > INLINE_HOLDERS) {
        size_t bytes = (size_t)b->count * sizeof(uint32_t);
        prefetch_bytes(b->u.recs, bytes < AHEAD_RECS_MAX ? bytes : AHEAD_RECS_MAX);
    }
}

/* The query proper: reads the index, writes only s. */
static int query_in(const struct cr_prefix_index *index, struct prefix_scratch *s,
                    uint32_t context, const uint64_t *seq_hashes, size_t block_count,
                    const uint16_t *filter, size_t filter_count,
                    const struct cr_prefix_match **matches, size_t *match_count) {
    assert(index != NULL && s != NULL && matches != NULL && match_count != NULL);
    assert(seq_hashes != NULL || block_count == 0);
    *matches = NULL;
    *match_count = 0;
    if (context >= index->context_count) return CR_ERR_OBJECT_NOT_FOUND;
    const struct prefix_context *ctx = &index->contexts[context];
    const struct prefix_block *b = block_count > 0 ? prefix_block_find(ctx, seq_hashes[0]) : NULL;
    if (b == NULL || block_count > UINT32_MAX) return CR_OK;
    uint32_t words = (ctx->local_high + 63) / 64;
    int rc = scratch_reserve(s, b->count, (size_t)words * 64);
    if (rc == CR_OK) rc = grow_array((void **)&s->filter, &s->filter_cap, filter_count, 2);
    if (rc != CR_OK) return rc;
    const uint16_t *locals = NULL;
    if (filter_count > 0) {
        filter_count = filter_locals(index, s, ctx, filter, filter_count);
        if (filter_count == 0) return CR_OK;
        locals = s->filter;
    }
    struct walk w = {.index = index, .ctx = ctx, .s = s, .words = words};
    struct ahead a = {.ctx = ctx, .hashes = seq_hashes, .count = (uint32_t)block_count,
                      .words = words};
    for (uint32_t i = 1; i < a.count && i <= AHEAD_MAP; i++)
        cr_prefix_map_prefetch(&ctx->blocks, seq_hashes[i]);
    walk_start(&w, b, locals, filter_count); /* while the first map slots arrive */
    for (uint32_t i = 1; i < a.count && i <= AHEAD_SLAB; i++) ahead_lookup(&a, i);
    for (uint32_t i = 1; i < a.count && i <= AHEAD_DATA; i++) ahead_holders(&a, i);
    uint32_t candidates = w.alive_count, depth = 1;
    while (w.alive_count > 0 && depth < block_count) {
        if (depth + AHEAD_MAP < a.count)
            cr_prefix_map_prefetch(&ctx->blocks, seq_hashes[depth + AHEAD_MAP]);
        if (depth + AHEAD_SLAB < a.count) ahead_lookup(&a, depth + AHEAD_SLAB);
        if (depth + AHEAD_DATA < a.count) ahead_holders(&a, depth + AHEAD_DATA);
        const struct prefix_block *nb = a.ring[depth % AHEAD_RING];
        assert(nb == prefix_block_find(ctx, seq_hashes[depth]));
        if (nb == NULL) break;
        if ((block_is_wide(nb) ? step_wide(&w, nb, depth) : step_narrow(&w, nb, depth)) == 0)
            break;
        depth++;
    }
    if (w.alive_count > 0) drop_unkept(&w, s->mark_bits, 0, depth); /* the rest matched `depth` */
    assert(w.next_slot == candidates); /* every candidate left through drop_unkept */
    *matches = s->matches;
    *match_count = candidates;
    return CR_OK;
}

int cr_prefix_index_query(struct cr_prefix_index *index, uint32_t context,
                          const uint64_t *seq_hashes, size_t block_count,
                          const uint16_t *filter, size_t filter_count,
                          const struct cr_prefix_match **matches, size_t *match_count) {
    assert(index != NULL);
    return query_in(index, &index->scratch, context, seq_hashes, block_count, filter,
                    filter_count, matches, match_count);
}

struct cr_prefix_scratch {
    struct prefix_scratch s;
};

int cr_prefix_scratch_create(struct cr_prefix_scratch **out) {
    assert(out != NULL);
    *out = calloc(1, sizeof(**out));
    return *out != NULL ? CR_OK : CR_ERR_NOMEM;
}

void cr_prefix_scratch_destroy(struct cr_prefix_scratch *scratch) {
    if (scratch == NULL) return;
    prefix_scratch_free(&scratch->s);
    free(scratch);
}

int cr_prefix_index_query_shared(const struct cr_prefix_index *index,
                                 struct cr_prefix_scratch *scratch, uint32_t context,
                                 const uint64_t *seq_hashes, size_t block_count,
                                 const uint16_t *filter, size_t filter_count,
                                 const struct cr_prefix_match **matches, size_t *match_count) {
    assert(index != NULL && scratch != NULL);
    return query_in(index, &scratch->s, context, seq_hashes, block_count, filter, filter_count,
                    matches, match_count);
}

int cr_prefix_index_query_tokens(struct cr_prefix_index *index,
                                 const struct cr_prefix_context_key *key,
                                 const uint32_t *token_ids, size_t token_count,
                                 const uint16_t *filter, size_t filter_count,
                                 const struct cr_prefix_match **matches, size_t *match_count) {
    assert(index != NULL && key != NULL && matches != NULL && match_count != NULL);
    *matches = NULL;
    *match_count = 0;
    uint32_t context;
    int rc = cr_prefix_index_context(index, key, false, &context);
    if (rc == CR_ERR_OBJECT_NOT_FOUND) return CR_OK;
    if (rc != CR_OK) return rc;
    if (token_ids == NULL && token_count > 0) return CR_ERR_INVALID_PARAMS;
    const struct prefix_context *ctx = &index->contexts[context];
    size_t blocks = token_count / ctx->block_size;
    struct prefix_scratch *s = &index->scratch;
    rc = grow_array((void **)&s->hashes, &s->hash_cap, blocks, sizeof(uint64_t));
    if (rc != CR_OK) return rc;
    cr_prefix_hash_chain(token_ids, token_count, ctx->block_size, ctx->seed, false, 0, s->hashes,
                         blocks);
    return cr_prefix_index_query(index, context, s->hashes, blocks, filter, filter_count, matches,
                                 match_count);
}
