/* Prefix index mutations: stored, removed, cleared (see prefix_index.h). */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "core/prefix_hash.h"
#include "core/prefix_internal.h"
#include "crescent/error.h"

#define NO_SLOT UINT32_MAX

struct pair_ref {
    struct prefix_context *ctx;
    uint16_t local;
    uint8_t rank;
};

/* ---- blocks ---- */

struct prefix_block *prefix_block_find(const struct prefix_context *ctx, uint64_t seq_hash) {
    assert(ctx != NULL);
    uint64_t slot;
    if (!cr_prefix_map_get(&ctx->blocks, seq_hash, &slot)) return NULL;
    return &ctx->slab[slot];
}

void prefix_context_free_blocks(struct cr_prefix_index *index, struct prefix_context *ctx) {
    assert(index != NULL && ctx != NULL);
    for (uint32_t i = 0; i < ctx->slab_high; i++) {
        if (ctx->slab[i].count > 0) prefix_block_release(index, &ctx->slab[i]);
    }
    index->bytes_used -= (size_t)ctx->slab_cap * sizeof(struct prefix_block);
    free(ctx->slab);
    ctx->slab = NULL;
    ctx->slab_cap = ctx->slab_high = 0;
    cr_prefix_map_free(&ctx->blocks);
}

/* Returns the block for seq_hash, creating an empty one (count 0, which the
 * caller fills at once) when absent; NULL on NOMEM. */
static struct prefix_block *block_get_or_create(struct cr_prefix_index *index,
                                                struct prefix_context *ctx, uint64_t seq_hash) {
    struct prefix_block *found = prefix_block_find(ctx, seq_hash);
    if (found != NULL) return found;
    uint32_t slot = ctx->free_head;
    if (slot == NO_SLOT) {
        slot = ctx->slab_high;
        if (prefix_grow(index, (void **)&ctx->slab, sizeof(struct prefix_block), &ctx->slab_cap,
                        slot + 1, UINT32_MAX - 1) != CR_OK) {
            return NULL;
        }
    }
    if (cr_prefix_map_put(&ctx->blocks, seq_hash, slot) != CR_OK) return NULL;
    if (slot == ctx->free_head) ctx->free_head = ctx->slab[slot].u.next_free;
    else ctx->slab_high++;
    struct prefix_block *b = &ctx->slab[slot];
    memset(b, 0, sizeof(*b));
    b->cap = INLINE_HOLDERS;
    index->blocks++;
    return b;
}

/* Frees an emptied block: its map entry goes and its slot joins the free list. */
static void block_drop(struct cr_prefix_index *index, struct prefix_context *ctx,
                       uint64_t seq_hash, struct prefix_block *b) {
    assert(b->count == 0);
    prefix_block_release(index, b);
    uint64_t slot;
    bool had = cr_prefix_map_del(&ctx->blocks, seq_hash, &slot);
    assert(had && &ctx->slab[slot] == b);
    (void)had;
    b->u.next_free = ctx->free_head;
    ctx->free_head = (uint32_t)slot;
    index->blocks--;
    if (cr_prefix_map_count(&ctx->blocks) == 0) {
        /* An emptied context gives its slab back; partly used slabs keep their
         * size and reuse free slots, so churn does not grow them. */
        prefix_context_free_blocks(index, ctx);
        ctx->free_head = NO_SLOT;
    }
}

/* ---- pairs ---- */

static int pair_add(struct cr_prefix_index *index, const struct pair_ref *ref, uint64_t seq_hash,
                    uint8_t medium) {
    struct prefix_block *b = block_get_or_create(index, ref->ctx, seq_hash);
    if (b == NULL) return CR_ERR_NOMEM;
    uint32_t pos;
    uint16_t old = prefix_block_holder(b, ref->local, &pos);
    if (old != 0) {
        const struct prefix_attr *a = prefix_attr_get(index, old);
        if (a->place[medium] & (1ULL << ref->rank)) return CR_OK;
        uint64_t place[CR_PREFIX_MEDIA_MAX];
        memcpy(place, a->place, sizeof(place));
        place[medium] |= 1ULL << ref->rank;
        uint16_t id = prefix_attr_acquire(index, place);
        if (id == 0) return CR_ERR_NOMEM;
        prefix_block_replace(ref->ctx, b, ref->local, pos, id);
        prefix_attr_release(index, old);
        return CR_OK;
    }
    uint16_t id = prefix_attr_acquire_single(index, medium, ref->rank);
    /* The local's first pair names its home placement (prefix_internal.h). */
    if (ref->ctx->locals[ref->local].home == 0) ref->ctx->locals[ref->local].home = id;
    if (id == 0 || prefix_block_insert(index, ref->ctx, b, ref->local, pos, id) != CR_OK) {
        if (id != 0) prefix_attr_release(index, id);
        if (b->count == 0) block_drop(index, ref->ctx, seq_hash, b);
        return CR_ERR_NOMEM;
    }
    ref->ctx->pairs++;
    index->pairs++;
    return CR_OK;
}

/* Takes rank's placements on medium (or all media) off the pair.  *still_held
 * tells whether the rank keeps the block on some medium. */
static int pair_remove(struct cr_prefix_index *index, const struct pair_ref *ref,
                       uint64_t seq_hash, int medium, bool *still_held) {
    *still_held = false;
    struct prefix_block *b = prefix_block_find(ref->ctx, seq_hash);
    uint32_t pos = 0;
    uint16_t old = b != NULL ? prefix_block_holder(b, ref->local, &pos) : 0;
    if (old == 0) return CR_OK;
    uint64_t place[CR_PREFIX_MEDIA_MAX], bit = 1ULL << ref->rank, any = 0, rest = 0;
    memcpy(place, prefix_attr_get(index, old)->place, sizeof(place));
    for (unsigned m = 0; m < CR_PREFIX_MEDIA_MAX; m++) {
        if (medium == CR_PREFIX_MEDIUM_ALL || (int)m == medium) place[m] &= ~bit;
        any |= place[m];
        rest |= place[m] & bit;
    }
    *still_held = rest != 0;
    if (any == 0) {
        prefix_block_erase(index, ref->ctx, b, ref->local, pos);
        ref->ctx->pairs--;
        index->pairs--;
        prefix_attr_release(index, old);
        if (b->count == 0) block_drop(index, ref->ctx, seq_hash, b);
        return CR_OK;
    }
    if (memcmp(place, prefix_attr_get(index, old)->place, sizeof(place)) == 0) return CR_OK;
    uint16_t id = prefix_attr_acquire(index, place);
    if (id == 0) return CR_ERR_NOMEM;
    prefix_block_replace(ref->ctx, b, ref->local, pos, id);
    prefix_attr_release(index, old);
    return CR_OK;
}

/* ---- tracks ---- */

static struct prefix_track *track_find(struct cr_prefix_index *index, struct prefix_publisher *pub,
                                       uint32_t context, bool create) {
    for (uint32_t t = 0; t < pub->track_count; t++) {
        if (pub->tracks[t].context == context) return &pub->tracks[t];
    }
    if (!create) return NULL;
    if (prefix_grow(index, (void **)&pub->tracks, sizeof(struct prefix_track), &pub->track_cap,
                    pub->track_count + 1, CR_PREFIX_CONTEXTS_MAX) != CR_OK) {
        return NULL;
    }
    struct prefix_track *track = &pub->tracks[pub->track_count++];
    track->context = context;
    cr_prefix_map_init(&track->engine_to_own, &index->bytes_used);
    return track;
}

void prefix_track_clear(struct cr_prefix_index *index, const struct prefix_publisher *pub,
                        struct prefix_track *track) {
    assert(index != NULL && pub != NULL && track != NULL);
    struct prefix_context *ctx = &index->contexts[track->context];
    struct pair_ref ref = {.ctx = ctx, .rank = pub->dp_rank};
    if (prefix_context_local(index, ctx, pub->instance, false, &ref.local) == CR_OK) {
        size_t cursor = 0;
        uint64_t engine, own;
        bool still;
        while (cr_prefix_map_next(&track->engine_to_own, &cursor, &engine, &own)) {
            /* Removing every medium never interns a new set, so this cannot fail. */
            int rc = pair_remove(index, &ref, own, CR_PREFIX_MEDIUM_ALL, &still);
            assert(rc == CR_OK);
            (void)rc;
        }
    }
    cr_prefix_map_free(&track->engine_to_own);
}

/* ---- operations ---- */

static int validate(const struct cr_prefix_index *index, uint32_t publisher, uint32_t context) {
    if (publisher >= index->publisher_high || !index->publishers[publisher].used) {
        return CR_ERR_INVALID_PARAMS;
    }
    if (context >= index->context_count) return CR_ERR_INVALID_PARAMS;
    return CR_OK;
}

/* Applies a validated run: maps engine -> own and adds the pairs. */
#define PREFETCH_MAX 16u /* lookups started ahead in apply_stored */

void cr_prefix_index_set_engine_max(struct cr_prefix_index *index, uint64_t max) {
    assert(index != NULL);
    index->engine_max = max;
}

uint64_t cr_prefix_index_engine_refusals(const struct cr_prefix_index *index) {
    assert(index != NULL);
    return index->engine_refusals;
}

static uint64_t engine_count(const struct prefix_publisher *pub) {
    uint64_t n = 0;
    for (uint32_t t = 0; t < pub->track_count; t++)
        n += cr_prefix_map_count(&pub->tracks[t].engine_to_own);
    return n;
}

uint64_t cr_prefix_index_engine_count(const struct cr_prefix_index *index, uint32_t publisher) {
    assert(index != NULL);
    if (publisher >= index->publisher_high || !index->publishers[publisher].used) return 0;
    return engine_count(&index->publishers[publisher]);
}

/* Whether the run fits under index->engine_max.  The cheap test (every
 * hash new) first; the exact count of new hashes only near the bound. */
static bool engine_room(struct cr_prefix_index *index, const struct prefix_publisher *pub,
                        const struct prefix_track *track, const uint64_t *ids, size_t count) {
    if (index->engine_max == 0) return true;
    uint64_t held = engine_count(pub);
    if (held + count <= index->engine_max) return true;
    uint64_t fresh = 0, unused;
    for (size_t i = 0; i < count; i++)
        fresh += track == NULL || !cr_prefix_map_get(&track->engine_to_own, ids[i], &unused);
    if (held + fresh <= index->engine_max) return true;
    index->engine_refusals++;
    return false;
}

static int apply_stored(struct cr_prefix_index *index, uint32_t publisher, uint32_t context,
                        const uint64_t *engine, const uint64_t *own, size_t count,
                        uint8_t medium) {
    struct prefix_publisher *pub = &index->publishers[publisher];
    if (!engine_room(index, pub, track_find(index, pub, context, false),
                     engine != NULL ? engine : own, count))
        return CR_ERR_NOMEM; /* nothing applied */
    struct pair_ref ref = {.ctx = &index->contexts[context], .rank = pub->dp_rank};
    int rc = prefix_context_local(index, ref.ctx, pub->instance, true, &ref.local);
    if (rc != CR_OK) return rc;
    struct prefix_track *track = track_find(index, pub, context, true);
    if (track == NULL) return CR_ERR_NOMEM;
    /* Both lookups of every block miss the cache in a large index, and all
     * the keys are known here: start them all, so they overlap instead of
     * following one another (the maps were a fifth of ingest). */
    for (size_t i = 0; i < count && i < PREFETCH_MAX; i++) {
        cr_prefix_map_prefetch(&track->engine_to_own, engine != NULL ? engine[i] : own[i]);
        cr_prefix_map_prefetch(&ref.ctx->blocks, own[i]);
    }
    for (size_t i = 0; i < count; i++) {
        if (i + PREFETCH_MAX < count) {
            size_t j = i + PREFETCH_MAX;
            cr_prefix_map_prefetch(&track->engine_to_own, engine != NULL ? engine[j] : own[j]);
            cr_prefix_map_prefetch(&ref.ctx->blocks, own[j]);
        }
        uint64_t id = engine != NULL ? engine[i] : own[i], previous;
        bool still;
        /* An engine hash reused for other content (engine restart without a
         * clear) first takes the stale placement away. */
        if (cr_prefix_map_get(&track->engine_to_own, id, &previous) && previous != own[i]) {
            rc = pair_remove(index, &ref, previous, CR_PREFIX_MEDIUM_ALL, &still);
            if (rc != CR_OK) return rc;
        }
        rc = cr_prefix_map_put(&track->engine_to_own, id, own[i]);
        if (rc == CR_OK) rc = pair_add(index, &ref, own[i], medium);
        if (rc != CR_OK) return rc;
    }
    return CR_OK;
}

static int hashes_reserve(struct cr_prefix_index *index, size_t count) {
    struct prefix_scratch *s = &index->scratch;
    if (count <= s->hash_cap) return CR_OK;
    /* Scratch grows to the longest run seen and is then reused: no per-call malloc. */
    size_t cap = count < 256 ? 256 : count;
    uint64_t *hashes = realloc(s->hashes, cap * sizeof(uint64_t));
    if (hashes == NULL) return CR_ERR_NOMEM;
    s->hashes = hashes;
    s->hash_cap = cap;
    return CR_OK;
}

/* The own hash the run's parent maps to (0 at the root); false, counted as
 * an orphan run, when the publisher never stored that parent. */
static bool parent_own_hash(struct cr_prefix_index *index, uint32_t publisher, uint32_t context,
                            const uint64_t *parent_engine_hash, uint64_t *parent_own) {
    *parent_own = 0;
    if (parent_engine_hash == NULL) return true;
    struct prefix_track *track = track_find(index, &index->publishers[publisher], context, false);
    if (track != NULL && cr_prefix_map_get(&track->engine_to_own, *parent_engine_hash, parent_own))
        return true;
    index->runs_orphaned++;
    return false;
}

int cr_prefix_index_stored_tokens(struct cr_prefix_index *index, uint32_t publisher,
                                  uint32_t context, const uint64_t *parent_engine_hash,
                                  const uint64_t *engine_hashes, size_t block_count,
                                  const uint32_t *token_ids, size_t token_count,
                                  uint32_t block_size, uint8_t medium) {
    assert(index != NULL);
    int rc = validate(index, publisher, context);
    if (rc != CR_OK) return rc;
    const struct prefix_context *ctx = &index->contexts[context];
    if (engine_hashes == NULL || token_ids == NULL || block_size != ctx->block_size ||
        medium >= index->media_count || block_count == 0 ||
        token_count / block_size != block_count || token_count % block_size != 0) {
        return CR_ERR_INVALID_PARAMS;
    }
    uint64_t parent_own;
    if (!parent_own_hash(index, publisher, context, parent_engine_hash, &parent_own))
        return CR_ERR_OBJECT_NOT_FOUND;
    rc = hashes_reserve(index, block_count);
    if (rc != CR_OK) return rc;
    size_t n = cr_prefix_hash_chain(token_ids, token_count, block_size, ctx->seed,
                                    parent_engine_hash != NULL, parent_own, index->scratch.hashes,
                                    block_count);
    assert(n == block_count);
    (void)n;
    return apply_stored(index, publisher, context, engine_hashes, index->scratch.hashes,
                        block_count, medium);
}

int cr_prefix_index_stored_locals(struct cr_prefix_index *index, uint32_t publisher,
                                  uint32_t context, const uint64_t *parent_engine_hash,
                                  const uint64_t *engine_hashes, const uint64_t *local_hashes,
                                  size_t block_count, uint8_t medium) {
    assert(index != NULL);
    int rc = validate(index, publisher, context);
    if (rc != CR_OK) return rc;
    if (engine_hashes == NULL || local_hashes == NULL || block_count == 0 ||
        medium >= index->media_count) {
        return CR_ERR_INVALID_PARAMS;
    }
    uint64_t parent_own;
    if (!parent_own_hash(index, publisher, context, parent_engine_hash, &parent_own))
        return CR_ERR_OBJECT_NOT_FOUND;
    rc = hashes_reserve(index, block_count);
    if (rc != CR_OK) return rc;
    cr_prefix_hash_chain_locals(local_hashes, block_count, index->contexts[context].seed,
                                parent_engine_hash != NULL, parent_own, index->scratch.hashes);
    return apply_stored(index, publisher, context, engine_hashes, index->scratch.hashes,
                        block_count, medium);
}

int cr_prefix_index_stored_hashes(struct cr_prefix_index *index, uint32_t publisher,
                                  uint32_t context, const uint64_t *engine_hashes,
                                  const uint64_t *seq_hashes, size_t block_count, uint8_t medium) {
    assert(index != NULL);
    int rc = validate(index, publisher, context);
    if (rc != CR_OK) return rc;
    if (seq_hashes == NULL || block_count == 0 || medium >= index->media_count) {
        return CR_ERR_INVALID_PARAMS;
    }
    return apply_stored(index, publisher, context, engine_hashes, seq_hashes, block_count, medium);
}

int cr_prefix_index_removed(struct cr_prefix_index *index, uint32_t publisher, uint32_t context,
                            const uint64_t *engine_hashes, size_t block_count, int medium) {
    assert(index != NULL);
    int rc = validate(index, publisher, context);
    if (rc != CR_OK) return rc;
    if ((engine_hashes == NULL && block_count > 0) ||
        (medium != CR_PREFIX_MEDIUM_ALL && (medium < 0 || medium >= index->media_count))) {
        return CR_ERR_INVALID_PARAMS;
    }
    struct prefix_publisher *pub = &index->publishers[publisher];
    struct prefix_track *track = track_find(index, pub, context, false);
    struct pair_ref ref = {.ctx = &index->contexts[context], .rank = pub->dp_rank};
    if (track == NULL ||
        prefix_context_local(index, ref.ctx, pub->instance, false, &ref.local) != CR_OK) {
        index->removes_unknown += block_count;
        return CR_OK;
    }
    /* As in apply_stored: the lookups' cache misses overlap when started ahead. */
    for (size_t i = 0; i < block_count && i < PREFETCH_MAX; i++)
        cr_prefix_map_prefetch(&track->engine_to_own, engine_hashes[i]);
    for (size_t i = 0; i < block_count; i++) {
        uint64_t own;
        bool still;
        if (i + PREFETCH_MAX < block_count)
            cr_prefix_map_prefetch(&track->engine_to_own, engine_hashes[i + PREFETCH_MAX]);
        if (!cr_prefix_map_get(&track->engine_to_own, engine_hashes[i], &own)) {
            index->removes_unknown++;
            continue;
        }
        rc = pair_remove(index, &ref, own, medium, &still);
        if (rc != CR_OK) return rc;
        if (!still) cr_prefix_map_del(&track->engine_to_own, engine_hashes[i], NULL);
    }
    return CR_OK;
}

int cr_prefix_index_cleared(struct cr_prefix_index *index, uint32_t publisher) {
    assert(index != NULL);
    if (publisher >= index->publisher_high || !index->publishers[publisher].used) {
        return CR_ERR_OBJECT_NOT_FOUND;
    }
    struct prefix_publisher *pub = &index->publishers[publisher];
    for (uint32_t t = 0; t < pub->track_count; t++) prefix_track_clear(index, pub, &pub->tracks[t]);
    pub->track_count = 0;
    return CR_OK;
}

bool cr_prefix_index_engine_find(const struct cr_prefix_index *index, uint32_t publisher,
                                 uint64_t engine_hash, uint32_t *context, uint64_t *own) {
    assert(index != NULL && context != NULL && own != NULL);
    if (publisher >= index->publisher_high || !index->publishers[publisher].used) return false;
    const struct prefix_publisher *pub = &index->publishers[publisher];
    for (uint32_t t = 0; t < pub->track_count; t++) {
        if (cr_prefix_map_get(&pub->tracks[t].engine_to_own, engine_hash, own)) {
            *context = pub->tracks[t].context;
            return true;
        }
    }
    return false;
}

/* Removes one engine hash from the first track that maps it; false if none does. */
static int remove_in_tracks(struct cr_prefix_index *index, struct prefix_publisher *pub,
                            uint64_t engine, int medium, bool *found) {
    *found = false;
    for (uint32_t t = 0; t < pub->track_count; t++) {
        struct prefix_track *track = &pub->tracks[t];
        uint64_t own;
        if (!cr_prefix_map_get(&track->engine_to_own, engine, &own)) continue;
        struct pair_ref ref = {.ctx = &index->contexts[track->context], .rank = pub->dp_rank};
        if (prefix_context_local(index, ref.ctx, pub->instance, false, &ref.local) != CR_OK)
            continue;
        bool still;
        int rc = pair_remove(index, &ref, own, medium, &still);
        if (rc != CR_OK) return rc;
        if (!still) cr_prefix_map_del(&track->engine_to_own, engine, NULL);
        *found = true;
        return CR_OK;
    }
    return CR_OK;
}

int cr_prefix_index_removed_any(struct cr_prefix_index *index, uint32_t publisher,
                                const uint64_t *engine_hashes, size_t block_count, int medium) {
    assert(index != NULL);
    if (publisher >= index->publisher_high || !index->publishers[publisher].used ||
        (engine_hashes == NULL && block_count > 0) ||
        (medium != CR_PREFIX_MEDIUM_ALL && (medium < 0 || medium >= index->media_count))) {
        return CR_ERR_INVALID_PARAMS;
    }
    struct prefix_publisher *pub = &index->publishers[publisher];
    for (size_t i = 0; i < block_count; i++) {
        bool found;
        int rc = remove_in_tracks(index, pub, engine_hashes[i], medium, &found);
        if (rc != CR_OK) return rc;
        if (!found) index->removes_unknown++;
    }
    return CR_OK;
}
