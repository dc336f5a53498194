/* Private layout of the prefix index, shared by prefix_index.c (registry),
 * prefix_attr.c (placement sets), prefix_store.c (mutations) and
 * prefix_query.c (queries).  Not part of any public contract. */
#ifndef CRESCENT_CORE_PREFIX_INTERNAL_H
#define CRESCENT_CORE_PREFIX_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/prefix_index.h"
#include "core/prefix_map.h"

#define ATTRS_MAX 65535u  /* attr ids 1..65535 fit the low half of a holder record */
#define INLINE_HOLDERS 2u /* blocks with this few holders keep them in the entry */

/* A holder record is (local instance index << 16) | attr id: sorting records
 * sorts by instance, and two records are equal exactly when instance and
 * placement set are equal, which the query's memcmp fast path relies on. */
static inline uint32_t record_make(uint16_t local, uint16_t attr) {
    return ((uint32_t)local << 16) | attr;
}
static inline uint16_t record_local(uint32_t rec) { return (uint16_t)(rec >> 16); }
static inline uint16_t record_attr(uint32_t rec) { return (uint16_t)rec; }

/* An interned placement set: bit r of place[m] = DP rank r holds the block on
 * medium m.  Shared by every (block, instance) pair with that set. */
struct prefix_attr {
    uint64_t place[CR_PREFIX_MEDIA_MAX];
    uint64_t dp_mask;   /* OR of place[] */
    uint64_t hash;
    uint32_t refs;      /* 0 = free slot */
    uint8_t media_mask; /* bit m set when place[m] != 0 */
};

struct prefix_attr_table {
    struct prefix_attr *attrs; /* index = id; id 0 unused */
    uint32_t attr_cap;
    uint32_t free_head;        /* free ids chained through refs-free attrs' hash */
    uint32_t live;
    uint16_t *slots;           /* open addressing over ids, 0 = empty */
    uint32_t slot_cap;
    uint16_t single[CR_PREFIX_MEDIA_MAX][CR_PREFIX_DP_RANKS]; /* cache of 1-placement sets */
};

/* A block's holders, in one of two forms:
 *  - narrow: records sorted by local index, inline when INLINE_HOLDERS fit,
 *    else on the heap (cap records);
 *  - wide (cap == BLOCK_WIDE): a block held by a large share of the
 *    context's instances keeps a bitset of holders by local index and a
 *    dense placement-set id per local index (0 = not a holder).  Adding or
 *    removing a holder is O(1) instead of a sorted insert that moves up to
 *    the whole list, and a query intersects its survivors with the bitset
 *    a word at a time (prefix_query.c).
 * A block goes wide when its list would be at least half the dense form's
 * bytes and back to narrow below an eighth, so either form costs at most a
 * constant times 4 bytes per holder (prefix_block.c).
 * count == 0 marks a free slab slot whose next_free chains the free list. */
#define BLOCK_WIDE UINT32_MAX

struct prefix_wide {
    uint32_t locals;  /* local indices covered: a multiple of 64 */
    uint32_t nonhome; /* holders whose placement id is not their local's home id */
    uint64_t bits[];  /* locals / 64 words, then uint16_t attr[locals] */
};

static inline uint16_t *wide_attrs(struct prefix_wide *w) {
    return (uint16_t *)(w->bits + w->locals / 64);
}
static inline const uint16_t *wide_attrs_const(const struct prefix_wide *w) {
    return (const uint16_t *)(w->bits + w->locals / 64);
}
static inline size_t wide_bytes(uint32_t locals) {
    return sizeof(struct prefix_wide) + (size_t)locals / 64 * sizeof(uint64_t) +
           (size_t)locals * sizeof(uint16_t);
}

struct prefix_block {
    uint32_t count;
    uint32_t cap; /* <= INLINE_HOLDERS: records inline; BLOCK_WIDE: u.wide */
    union {
        uint32_t inline_recs[INLINE_HOLDERS];
        uint32_t *recs;
        struct prefix_wide *wide;
        uint32_t next_free;
    } u;
};

static inline bool block_is_wide(const struct prefix_block *b) { return b->cap == BLOCK_WIDE; }

static inline uint32_t *block_records(struct prefix_block *b) {
    return b->cap <= INLINE_HOLDERS ? b->u.inline_recs : b->u.recs;
}
static inline const uint32_t *block_records_const(const struct prefix_block *b) {
    return b->cap <= INLINE_HOLDERS ? b->u.inline_recs : b->u.recs;
}

/* home: the placement-set id of the local's first pair in the context (0
 * until it has one), fixed while any block holds the local.  A wide block
 * counts its holders whose id differs from their home (prefix_wide.nonhome),
 * and the query its survivors whose current id does: when both are 0 and the
 * block holds exactly the survivors, no placement changed, and the query
 * skips comparing 2 bytes per instance (prefix_query.c).  Instances keep one
 * placement for most of their blocks, so this is the common case. */
struct prefix_local {
    uint16_t global;     /* local index -> instance id */
    uint16_t free_local; /* stack of free local indices (first free_local_count) */
    uint16_t home;       /* by local index: its home placement-set id */
};

struct prefix_context {
    bool used;
    char *tenant, *model, *lora_name, *salt;
    uint32_t block_size;
    uint64_t seed;
    uint64_t key_hash;
    uint32_t next_same_hash;       /* chain of contexts sharing key_hash, UINT32_MAX = end */
    struct cr_prefix_map blocks;   /* seq hash -> slab index */
    struct prefix_block *slab;
    uint32_t slab_cap, slab_high, free_head;
    uint64_t pairs;
    struct cr_prefix_map local_of; /* instance id -> local index */
    struct prefix_local *locals;   /* by local index */
    uint32_t local_cap, local_high, free_local_count;
};

struct prefix_track {
    uint32_t context;
    struct cr_prefix_map engine_to_own;
};

struct prefix_publisher {
    bool used;
    uint16_t instance;
    uint8_t dp_rank;
    struct prefix_track *tracks;
    uint32_t track_count, track_cap;
};

struct prefix_instance {
    char *name; /* NULL = free id */
    char *tenant;
};

/* A match's counts (cr_prefix_match.counts): per medium, then per DP rank. */
#define COUNTS_PER_MATCH (CR_PREFIX_MEDIA_MAX + CR_PREFIX_DP_RANKS)

struct prefix_scratch {
    uint64_t *alive_bits, *mark_bits; /* by local index: the walk's survivors, a step's marks */
    uint16_t *cur_attr;               /* by local index: a survivor's placement (0 if none) */
    uint32_t *run_start;              /* by local index: where a survivor's run began */
    uint32_t *slot_of;                /* by local index: its match's slot, all ones if none */
    size_t local_cap;                 /* local indices the by-local arrays hold (64s) */
    struct cr_prefix_match *matches;
    size_t match_cap;
    uint32_t *counts;                 /* by match slot: COUNTS_PER_MATCH, used only by
                                         matches whose placement changed */
    size_t counts_cap;                /* match slots `counts` covers */
    uint64_t *hashes;
    size_t hash_cap;
    uint16_t *filter;
    size_t filter_cap;
};

struct cr_prefix_index {
    uint64_t base_seed;
    size_t bytes_used;
    char media[CR_PREFIX_MEDIA_MAX][32];
    uint8_t media_count;
    struct prefix_instance *instances; /* CR_PREFIX_INSTANCES_MAX */
    uint32_t instance_count, instance_high;
    struct prefix_publisher *publishers;
    uint32_t publisher_cap, publisher_high, publisher_count;
    struct cr_prefix_map publisher_of; /* (instance << 8 | rank) -> publisher id */
    struct prefix_context *contexts;
    uint32_t context_cap, context_count;
    struct cr_prefix_map context_of;   /* key hash -> first context id */
    struct prefix_attr_table attrs;
    uint64_t blocks, pairs, runs_orphaned, removes_unknown;
    uint64_t engine_max;      /* per publisher; 0 = unbounded */
    uint64_t engine_refusals; /* stored runs refused at engine_max */
    struct prefix_scratch scratch;
};

/* prefix_attr.c */
int prefix_attrs_init(struct cr_prefix_index *index);
void prefix_attrs_free(struct cr_prefix_index *index);
/* Interns the set and takes a reference; returns the id or 0 on NOMEM. */
uint16_t prefix_attr_acquire(struct cr_prefix_index *index,
                             const uint64_t place[CR_PREFIX_MEDIA_MAX]);
uint16_t prefix_attr_acquire_single(struct cr_prefix_index *index, uint8_t medium, uint8_t rank);
void prefix_attr_release(struct cr_prefix_index *index, uint16_t id);
static inline const struct prefix_attr *prefix_attr_get(const struct cr_prefix_index *index,
                                                        uint16_t id) {
    return &index->attrs.attrs[id];
}

/* prefix_index.c */
int prefix_grow(struct cr_prefix_index *index, void **array, size_t elem_size, uint32_t *cap,
                uint32_t need, uint32_t max);
int prefix_context_local(struct cr_prefix_index *index, struct prefix_context *ctx,
                         uint16_t instance, bool create, uint16_t *local);
void prefix_context_drop_local(struct cr_prefix_index *index, struct prefix_context *ctx,
                               uint16_t instance);

/* prefix_block.c: one block's holders, in either form (positions are
 * meaningful for narrow blocks only and valid until the block changes). */
/* Returns local's placement-set id in b, 0 when it is not a holder; *pos is
 * where its record is or goes (narrow blocks). */
uint16_t prefix_block_holder(const struct prefix_block *b, uint16_t local, uint32_t *pos);
/* Adds local (absent, *pos from prefix_block_holder) with attr.  Returns
 * CR_OK or CR_ERR_NOMEM (b unchanged). */
int prefix_block_insert(struct cr_prefix_index *index, const struct prefix_context *ctx,
                        struct prefix_block *b, uint16_t local, uint32_t pos, uint16_t attr);
/* Replaces a present holder's placement-set id. */
void prefix_block_replace(const struct prefix_context *ctx, struct prefix_block *b, uint16_t local,
                          uint32_t pos, uint16_t attr);
/* Takes a present holder off; may shrink or narrow the storage. */
void prefix_block_erase(struct cr_prefix_index *index, const struct prefix_context *ctx,
                        struct prefix_block *b, uint16_t local, uint32_t pos);
/* Frees the block's heap storage (either form); the block becomes empty inline. */
void prefix_block_release(struct cr_prefix_index *index, struct prefix_block *b);

/* prefix_store.c */
void prefix_track_clear(struct cr_prefix_index *index, const struct prefix_publisher *pub,
                        struct prefix_track *track);
void prefix_context_free_blocks(struct cr_prefix_index *index, struct prefix_context *ctx);
struct prefix_block *prefix_block_find(const struct prefix_context *ctx, uint64_t seq_hash);

/* prefix_query.c */
void prefix_scratch_free(struct prefix_scratch *scratch);

#endif
