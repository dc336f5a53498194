/* One block's holders, narrow (a sorted record list) or wide (a bitset and a
 * dense placement-set id per local index); see prefix_internal.h.
 *
 * Why two forms: the blocks of a shared system prompt are held by nearly
 * every instance.  As a sorted list, each new holder is a binary search and
 * a memmove of up to the whole list (4 KB at 1,000 instances), and each
 * query merges the whole list per block.  Dense, a holder is a bit and a
 * 16-bit id at its local index: O(1) to add or remove, and a query ANDs its
 * survivors with the bitset 64 instances at a time.  The dense form costs
 * 2.125 bytes per local index of the context whether held or not, so only
 * blocks held by a large share of the instances use it. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "core/prefix_internal.h"
#include "crescent/error.h"

#define HEAP_MIN 4u
/* Lists this short are merged about as fast as a bitset is scanned. */
#define WIDE_MIN_HOLDERS 64u

static uint32_t locals_round(uint32_t n) { return (n + 63u) & ~63u; }

uint16_t prefix_block_holder(const struct prefix_block *b, uint16_t local, uint32_t *pos) {
    assert(b != NULL && pos != NULL);
    *pos = 0;
    if (block_is_wide(b)) {
        const struct prefix_wide *w = b->u.wide;
        return local < w->locals ? wide_attrs_const(w)[local] : 0;
    }
    const uint32_t *recs = block_records_const(b);
    uint32_t lo = 0, hi = b->count;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (record_local(recs[mid]) < local) lo = mid + 1;
        else hi = mid;
    }
    *pos = lo;
    return lo < b->count && record_local(recs[lo]) == local ? record_attr(recs[lo]) : 0;
}

/* Whether a list of `holders` records is worth the dense form over the
 * context's local indices: its bytes at least half the dense form's. */
static bool should_widen(const struct prefix_context *ctx, uint32_t holders) {
    return holders >= WIDE_MIN_HOLDERS &&
           (size_t)holders * sizeof(uint32_t) * 2 >= wide_bytes(locals_round(ctx->local_high));
}

/* Narrow again under an eighth: the gap to should_widen keeps a block near
 * the threshold from switching forms on every add and remove. */
static bool should_narrow(const struct prefix_block *b) {
    return (size_t)b->count * sizeof(uint32_t) * 8 < wide_bytes(b->u.wide->locals);
}

/* Converts a narrow block to wide, covering `locals` local indices. */
static int widen(struct cr_prefix_index *index, const struct prefix_context *ctx,
                 struct prefix_block *b, uint32_t locals) {
    struct prefix_wide *w = calloc(1, wide_bytes(locals));
    if (w == NULL) return CR_ERR_NOMEM;
    w->locals = locals;
    uint16_t *attrs = wide_attrs(w);
    const uint32_t *recs = block_records_const(b);
    for (uint32_t i = 0; i < b->count; i++) {
        uint16_t local = record_local(recs[i]);
        assert(local < locals);
        w->bits[local / 64] |= 1ULL << (local % 64);
        attrs[local] = record_attr(recs[i]);
        w->nonhome += attrs[local] != ctx->locals[local].home;
    }
    prefix_block_release(index, b);
    b->u.wide = w;
    b->cap = BLOCK_WIDE;
    index->bytes_used += wide_bytes(locals);
    return CR_OK;
}

/* Grows a wide block to cover local indices below `locals`. */
static int wide_grow(struct cr_prefix_index *index, struct prefix_block *b, uint32_t locals) {
    struct prefix_wide *old = b->u.wide;
    assert(locals > old->locals);
    struct prefix_wide *w = calloc(1, wide_bytes(locals));
    if (w == NULL) return CR_ERR_NOMEM;
    w->locals = locals;
    w->nonhome = old->nonhome;
    memcpy(w->bits, old->bits, old->locals / 64 * sizeof(uint64_t));
    memcpy(wide_attrs(w), wide_attrs_const(old), old->locals * sizeof(uint16_t));
    index->bytes_used += wide_bytes(locals) - wide_bytes(old->locals);
    free(old);
    b->u.wide = w;
    return CR_OK;
}

/* Converts a wide block back to a list; on NOMEM it stays wide (correct). */
static void narrow(struct cr_prefix_index *index, struct prefix_block *b) {
    struct prefix_wide *w = b->u.wide;
    uint32_t cap = b->count <= INLINE_HOLDERS ? INLINE_HOLDERS : HEAP_MIN;
    while (cap < b->count) cap *= 2;
    uint32_t inline_recs[INLINE_HOLDERS];
    uint32_t *recs = cap <= INLINE_HOLDERS ? inline_recs : malloc(cap * sizeof(uint32_t));
    if (recs == NULL) return;
    const uint16_t *attrs = wide_attrs_const(w);
    uint32_t n = 0;
    for (uint32_t word = 0; word < w->locals / 64; word++) {
        for (uint64_t bits = w->bits[word]; bits != 0; bits &= bits - 1) {
            uint16_t local = (uint16_t)(word * 64 + (uint32_t)__builtin_ctzll(bits));
            recs[n++] = record_make(local, attrs[local]);
        }
    }
    assert(n == b->count);
    index->bytes_used -= wide_bytes(w->locals);
    free(w);
    b->cap = cap;
    if (cap <= INLINE_HOLDERS) {
        memcpy(b->u.inline_recs, inline_recs, n * sizeof(uint32_t));
    } else {
        b->u.recs = recs;
        index->bytes_used += (size_t)cap * sizeof(uint32_t);
    }
}

/* Makes room for one more record in a narrow list. */
static int list_reserve(struct cr_prefix_index *index, struct prefix_block *b) {
    if (b->count < b->cap) return CR_OK;
    uint32_t cap = b->cap <= INLINE_HOLDERS ? HEAP_MIN : b->cap * 2;
    uint32_t *recs;
    if (b->cap <= INLINE_HOLDERS) {
        recs = malloc(cap * sizeof(uint32_t));
        if (recs != NULL) memcpy(recs, b->u.inline_recs, b->count * sizeof(uint32_t));
    } else {
        recs = realloc(b->u.recs, cap * sizeof(uint32_t));
    }
    if (recs == NULL) return CR_ERR_NOMEM;
    index->bytes_used += (size_t)(cap - (b->cap <= INLINE_HOLDERS ? 0 : b->cap)) * sizeof(uint32_t);
    b->u.recs = recs;
    b->cap = cap;
    return CR_OK;
}

int prefix_block_insert(struct cr_prefix_index *index, const struct prefix_context *ctx,
                        struct prefix_block *b, uint16_t local, uint32_t pos, uint16_t attr) {
    assert(index != NULL && ctx != NULL && b != NULL && attr != 0);
    assert(local < ctx->local_high);
    if (!block_is_wide(b) && b->count == b->cap && should_widen(ctx, b->count + 1)) {
        /* A failed widen leaves the list as it was: grow the list instead. */
        (void)widen(index, ctx, b, locals_round(ctx->local_high));
    }
    if (block_is_wide(b) && local >= b->u.wide->locals &&
        (size_t)(b->count + 1) * sizeof(uint32_t) * 8 < wide_bytes(locals_round(ctx->local_high))) {
        /* Instances joined since the block went wide: covering them all would
         * cost more than the bound per holder, so it becomes a list again
         * (on NOMEM it stays wide and grows: correct, only larger). */
        narrow(index, b);
        if (!block_is_wide(b)) (void)prefix_block_holder(b, local, &pos);
    }
    if (block_is_wide(b)) {
        struct prefix_wide *w = b->u.wide;
        if (local >= w->locals) {
            int rc = wide_grow(index, b, locals_round(ctx->local_high));
            if (rc != CR_OK) return rc;
            w = b->u.wide;
        }
        assert((w->bits[local / 64] & (1ULL << (local % 64))) == 0);
        w->bits[local / 64] |= 1ULL << (local % 64);
        wide_attrs(w)[local] = attr;
        w->nonhome += attr != ctx->locals[local].home;
        b->count++;
        return CR_OK;
    }
    int rc = list_reserve(index, b);
    if (rc != CR_OK) return rc;
    uint32_t *recs = block_records(b);
    assert(pos <= b->count);
    memmove(recs + pos + 1, recs + pos, (b->count - pos) * sizeof(uint32_t));
    recs[pos] = record_make(local, attr);
    b->count++;
    return CR_OK;
}

void prefix_block_replace(const struct prefix_context *ctx, struct prefix_block *b, uint16_t local,
                          uint32_t pos, uint16_t attr) {
    assert(ctx != NULL && b != NULL && attr != 0);
    if (block_is_wide(b)) {
        struct prefix_wide *w = b->u.wide;
        uint16_t old = wide_attrs(w)[local], home = ctx->locals[local].home;
        assert(old != 0);
        w->nonhome = w->nonhome - (old != home) + (attr != home);
        wide_attrs(w)[local] = attr;
        return;
    }
    uint32_t *recs = block_records(b);
    assert(pos < b->count && record_local(recs[pos]) == local);
    recs[pos] = record_make(local, attr);
}

/* Shrinks list storage once it is a quarter used, back to inline when it fits. */
static void list_shrink(struct cr_prefix_index *index, struct prefix_block *b) {
    if (b->cap <= INLINE_HOLDERS) return;
    if (b->count <= INLINE_HOLDERS) {
        uint32_t *recs = b->u.recs, cap = b->cap;
        memcpy(b->u.inline_recs, recs, b->count * sizeof(uint32_t));
        free(recs);
        index->bytes_used -= (size_t)cap * sizeof(uint32_t);
        b->cap = INLINE_HOLDERS;
    } else if (b->count * 4 <= b->cap && b->cap > HEAP_MIN) {
        uint32_t cap = b->cap / 2;
        uint32_t *recs = realloc(b->u.recs, cap * sizeof(uint32_t));
        if (recs == NULL) return; /* keeping the larger array is correct */
        index->bytes_used -= (size_t)(b->cap - cap) * sizeof(uint32_t);
        b->u.recs = recs;
        b->cap = cap;
    }
}

void prefix_block_erase(struct cr_prefix_index *index, const struct prefix_context *ctx,
                        struct prefix_block *b, uint16_t local, uint32_t pos) {
    assert(index != NULL && ctx != NULL && b != NULL && b->count > 0);
    if (block_is_wide(b)) {
        struct prefix_wide *w = b->u.wide;
        assert(local < w->locals && wide_attrs(w)[local] != 0);
        w->nonhome -= wide_attrs(w)[local] != ctx->locals[local].home;
        w->bits[local / 64] &= ~(1ULL << (local % 64));
        wide_attrs(w)[local] = 0;
        b->count--;
        if (b->count > 0 && should_narrow(b)) narrow(index, b);
        return;
    }
    uint32_t *recs = block_records(b);
    assert(pos < b->count && record_local(recs[pos]) == local);
    memmove(recs + pos, recs + pos + 1, (b->count - pos - 1) * sizeof(uint32_t));
    b->count--;
    if (b->count > 0) list_shrink(index, b);
}

void prefix_block_release(struct cr_prefix_index *index, struct prefix_block *b) {
    assert(index != NULL && b != NULL);
    if (block_is_wide(b)) {
        index->bytes_used -= wide_bytes(b->u.wide->locals);
        free(b->u.wide);
    } else if (b->cap > INLINE_HOLDERS) {
        index->bytes_used -= (size_t)b->cap * sizeof(uint32_t);
        free(b->u.recs);
    }
    b->cap = INLINE_HOLDERS;
}
