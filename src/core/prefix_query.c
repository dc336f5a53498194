/* Prefix queries (see prefix_index.h).
 *
 * The walk keeps the still-matching holders as a sorted list of records
 * (local index << 16 | placement-set id).  Each block's holder list is merged
 * against it: an instance missing from the block drops out at that depth; an
 * instance whose placement set changes closes a run.  Per-medium and per-rank
 * tokens are added once per run of identical placement, not once per block,
 * a block whose holder list is byte-identical to the surviving list costs
 * one memcmp, and other merges compare eight records at a time.  Scratch buffers grow to the largest context seen and are reused,
 * so a query does not allocate once warm. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "core/prefix_hash.h"
#include "core/prefix_internal.h"
#include "crescent/error.h"

#define QUERY_PREFETCH 8u /* block lookups started ahead of the walk */

struct walk {
    struct cr_prefix_index *index;
    const struct prefix_context *ctx;
    struct prefix_scratch *s;
    uint32_t *alive;     /* surviving records, sorted */
    uint32_t alive_count;
};

void prefix_scratch_free(struct prefix_scratch *scratch) {
    assert(scratch != NULL);
    free(scratch->alive);
    free(scratch->begun);
    free(scratch->run_start);
    free(scratch->slot_of);
    free(scratch->matches);
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

/* Sizes scratch for `records` holders and the context's local indices. */
static int scratch_reserve(struct prefix_scratch *s, size_t records, size_t locals) {
    size_t cap = s->rec_cap;
    int rc = CR_OK;
    if (records > cap) {
        size_t begun_cap = cap;
        rc = grow_array((void **)&s->alive, &cap, records, sizeof(uint32_t));
        if (rc == CR_OK) rc = grow_array((void **)&s->begun, &begun_cap, records, 1);
        if (rc == CR_OK) rc = grow_array((void **)&s->matches, &s->match_cap, records,
                                         sizeof(struct cr_prefix_match));
        if (rc != CR_OK) return rc;
        size_t least = cap < begun_cap ? cap : begun_cap;
        s->rec_cap = least < s->match_cap ? least : s->match_cap;
    }
    if (locals > s->local_cap) {
        size_t c1 = s->local_cap, c2 = s->local_cap;
        rc = grow_array((void **)&s->run_start, &c1, locals, sizeof(uint32_t));
        if (rc == CR_OK) rc = grow_array((void **)&s->slot_of, &c2, locals, sizeof(uint32_t));
        if (rc != CR_OK) return rc;
        s->local_cap = c1 < c2 ? c1 : c2;
    }
    return CR_OK;
}

/* Adds blocks [start, end) held with placement set `attr` to the instance's match. */
/* An instance's match, set up on first use: walk_start only numbers the
 * candidates, so each match's cache line is written once, when the instance
 * leaves the walk or changes placement, not also when it enters. */
static struct cr_prefix_match *match_of(struct walk *w, uint16_t local) {
    uint32_t slot = w->s->slot_of[local];
    struct cr_prefix_match *m = &w->s->matches[slot];
    if (!w->s->begun[slot]) {
        w->s->begun[slot] = 1;
        m->instance_id = w->ctx->locals[local].global;
        m->longest_tokens = 0;
        memset(m->medium_tokens, 0, sizeof(m->medium_tokens));
        m->dp_mask = 0;
    }
    return m;
}

static void flush_run(struct walk *w, uint32_t rec, uint32_t end) {
    uint16_t local = record_local(rec);
    uint32_t start = w->s->run_start[local];
    assert(end >= start);
    if (end == start) return;
    struct cr_prefix_match *m = match_of(w, local);
    const struct prefix_attr *a = prefix_attr_get(w->index, record_attr(rec));
    uint32_t tokens = (end - start) * w->ctx->block_size;
    for (uint8_t media = a->media_mask; media != 0; media &= (uint8_t)(media - 1)) {
        m->medium_tokens[__builtin_ctz(media)] += tokens;
    }
    for (uint64_t ranks = a->dp_mask; ranks != 0; ranks &= ranks - 1) {
        unsigned r = (unsigned)__builtin_ctzll(ranks);
        uint64_t bit = 1ULL << r;
        if (!(m->dp_mask & bit)) m->dp_tokens[r] = 0;
        m->dp_mask |= bit;
        m->dp_tokens[r] += tokens;
    }
    w->s->run_start[local] = end;
}

static void drop_out(struct walk *w, uint32_t rec, uint32_t depth) {
    flush_run(w, rec, depth);
    match_of(w, record_local(rec))->longest_tokens = depth * w->ctx->block_size;
}

static int u16_compare(const void *a, const void *b) {
    return (int)*(const uint16_t *)a - (int)*(const uint16_t *)b;
}

static bool filter_has(const uint16_t *locals, size_t count, uint16_t local) {
    size_t lo = 0, hi = count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (locals[mid] < local) lo = mid + 1;
        else hi = mid;
    }
    return lo < count && locals[lo] == local;
}

/* Starts the walk from block 0's holders (those in the filter, if any). */
static void walk_start(struct walk *w, const struct prefix_block *b, const uint16_t *filter,
                       size_t filter_count) {
    const uint32_t *recs = block_records_const(b);
    w->alive_count = 0;
    for (uint32_t i = 0; i < b->count; i++) {
        uint16_t local = record_local(recs[i]);
        if (filter != NULL && !filter_has(filter, filter_count, local)) continue;
        uint32_t slot = w->alive_count++;
        w->alive[slot] = recs[i];
        w->s->run_start[local] = 0;
        w->s->slot_of[local] = slot;
    }
    /* Every candidate leaves the walk through drop_out, which sets its match up. */
    memset(w->s->begun, 0, w->alive_count);
}

/* Merges block `depth` into the surviving list; returns the survivors' count.
 * Survivors are compacted in place (at most as many go out as came in, so
 * the write position never passes the read position), and equal stretches
 * are compared 32 bytes at a time and not moved until something drops out. */
static uint32_t walk_step(struct walk *w, const struct prefix_block *b, uint32_t depth) {
    const uint32_t *recs = block_records_const(b);
    uint32_t *alive = w->alive;
    uint32_t h = b->count, a = w->alive_count, p = 0, q = 0, out = 0;
    if (h == a && memcmp(recs, alive, a * sizeof(uint32_t)) == 0) return a;
    while (p < a && q < h) {
        while (p + 8 <= a && q + 8 <= h && memcmp(alive + p, recs + q, 8 * sizeof(uint32_t)) == 0) {
            if (out != p) memmove(alive + out, alive + p, 8 * sizeof(uint32_t));
            out += 8, p += 8, q += 8;
        }
        if (p >= a || q >= h) break;
        uint32_t x = alive[p], y = recs[q];
        if (x == y) {
            alive[out++] = x;
            p++, q++;
        } else if (record_local(x) == record_local(y)) {
            flush_run(w, x, depth); /* placement changed: close the run */
            alive[out++] = y;
            p++, q++;
        } else if (record_local(x) < record_local(y)) {
            drop_out(w, x, depth); /* missing here: it matched `depth` blocks */
            p++;
        } else {
            q++; /* holds this block but dropped out earlier (or filtered) */
        }
    }
    for (; p < a; p++) drop_out(w, alive[p], depth);
    assert(out <= a);
    w->alive_count = out;
    return out;
}

int cr_prefix_index_query(struct cr_prefix_index *index, uint32_t context,
                          const uint64_t *seq_hashes, size_t block_count,
                          const uint16_t *filter, size_t filter_count,
                          const struct cr_prefix_match **matches, size_t *match_count) {
    assert(index != NULL && matches != NULL && match_count != NULL);
    assert(seq_hashes != NULL || block_count == 0);
    *matches = NULL;
    *match_count = 0;
    if (context >= index->context_count) return CR_ERR_OBJECT_NOT_FOUND;
    const struct prefix_context *ctx = &index->contexts[context];
    const struct prefix_block *b = block_count > 0 ? prefix_block_find(ctx, seq_hashes[0]) : NULL;
    if (b == NULL || block_count > UINT32_MAX) return CR_OK;
    struct prefix_scratch *s = &index->scratch;
    int rc = scratch_reserve(s, b->count, ctx->local_high);
    if (rc == CR_OK) rc = grow_array((void **)&s->filter, &s->filter_cap, filter_count, 2);
    if (rc != CR_OK) return rc;
    const uint16_t *locals = NULL;
    if (filter_count > 0) {
        size_t n = 0;
        for (size_t i = 0; i < filter_count; i++) {
            uint16_t local;
            if (prefix_context_local(index, (struct prefix_context *)ctx, filter[i], false,
                                     &local) == CR_OK) {
                s->filter[n++] = local;
            }
        }
        if (n == 0) return CR_OK;
        qsort(s->filter, n, sizeof(uint16_t), u16_compare);
        locals = s->filter;
        filter_count = n;
    }
    struct walk w = {.index = index, .ctx = ctx, .s = s, .alive = s->alive};
    /* Every block's hash is known now: start the map lookups ahead of the
     * walk so that their cache misses overlap (they were a tenth of a query). */
    for (size_t i = 1; i < block_count && i <= QUERY_PREFETCH; i++)
        cr_prefix_map_prefetch(&ctx->blocks, seq_hashes[i]);
    walk_start(&w, b, locals, filter_count);
    uint32_t candidates = w.alive_count, depth = 1;
    while (w.alive_count > 0 && depth < block_count) {
        if (depth + QUERY_PREFETCH < block_count)
            cr_prefix_map_prefetch(&ctx->blocks, seq_hashes[depth + QUERY_PREFETCH]);
        const struct prefix_block *nb = prefix_block_find(ctx, seq_hashes[depth]);
        if (nb == NULL || walk_step(&w, nb, depth) == 0) break;
        depth++;
    }
    for (uint32_t i = 0; i < w.alive_count; i++) drop_out(&w, w.alive[i], depth);
    *matches = s->matches;
    *match_count = candidates;
    return CR_OK;
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
