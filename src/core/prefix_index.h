/* The prefix index: which instances hold which KV blocks of which prefix.
 *
 * Scoped by context (tenant, model, lora_name, block_size, additional_salt).
 * Within a context a block is its standard sequence hash (core/prefix_hash.h)
 * and holds the set of instances that have it; per (block, instance) the index
 * keeps the exact set of (DP rank, medium) placements, from which the query
 * reports tokens per medium and per DP rank.
 *
 * Publishers are (instance, dp_rank) pairs (the instance carries the tenant).
 * Each publisher keeps, per context, a map from its engine's block hash to the
 * index's own sequence hash: removals arrive as engine hashes, and a stored run
 * continues the chain from its parent's own hash.
 *
 * Policy for a stored run whose parent engine hash is unknown to the
 * publisher: the run is skipped, counted (summary.runs_orphaned) and
 * CR_ERR_OBJECT_NOT_FOUND is returned.  Treating it as a root would file its
 * blocks under hashes that no prompt can produce (the chain would start in the
 * middle of a sequence), so they would only waste memory.
 *
 * Memory is reclaimed on removal: a block with no holder is freed, maps shrink,
 * interned placement sets are reference counted.
 *
 * Single-threaded (src/core rules).  Query results point into the index's
 * scratch space and stay valid until the next call on the index.  The
 * read-only calls (context lookup with create false, instance find/name/
 * tenant, tenant_known, medium_name, query_shared) change nothing, so
 * callers that exclude writers may run them from several threads. */
#ifndef CRESCENT_CORE_PREFIX_INDEX_H
#define CRESCENT_CORE_PREFIX_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CR_PREFIX_MEDIA_MAX 8           /* GPU, CPU, DISK + 5 names seen at run time */
#define CR_PREFIX_DP_RANKS 64           /* DP ranks 0..63 */
#define CR_PREFIX_INSTANCES_MAX 65535u  /* instance ids 0..65534 */
#define CR_PREFIX_CONTEXTS_MAX 4096u
#define CR_PREFIX_PUBLISHERS_MAX 262144u
#define CR_PREFIX_NAME_MAX 256u         /* bytes of any name, salt or tenant */

enum cr_prefix_medium {
    CR_PREFIX_MEDIUM_GPU = 0,
    CR_PREFIX_MEDIUM_CPU = 1,
    CR_PREFIX_MEDIUM_DISK = 2,
};

/* Pass to cr_prefix_index_removed to remove every medium of the publisher's rank. */
#define CR_PREFIX_MEDIUM_ALL (-1)

struct cr_prefix_index;

struct cr_prefix_context_key {
    const char *tenant;          /* NULL = "default" */
    const char *model;           /* NULL = "" */
    const char *lora_name;       /* NULL = "" (base model) */
    uint32_t block_size;         /* tokens per block, > 0 */
    const char *additional_salt; /* NULL = "" */
};

/* One instance's answer to a query.  Token counts are multiples of the
 * context's block size: per medium with cr_prefix_match_medium_tokens, per
 * DP rank with cr_prefix_match_rank_tokens.  Compact (24 bytes), because a
 * query over 1,000 instances writes 1,000 of them: nearly every instance
 * holds its whole matched prefix at one placement, so every medium of
 * media_mask and every rank of dp_mask holds longest_tokens and counts is
 * NULL; only an instance whose placement changed along the prefix has
 * counts (in the query's scratch, valid as long as the match). */
struct cr_prefix_match {
    uint16_t instance_id;
    uint8_t media_mask;      /* bit m set: some of the prefix is on medium m */
    uint32_t longest_tokens;
    uint64_t dp_mask;        /* bit r set: some of the prefix is on DP rank r */
    const uint32_t *counts;  /* NULL, or CR_PREFIX_MEDIA_MAX tokens per medium and then
                                CR_PREFIX_DP_RANKS per rank */
};

/* Tokens of the match held on medium m (0 when none). */
static inline uint32_t cr_prefix_match_medium_tokens(const struct cr_prefix_match *m,
                                                     unsigned medium) {
    if (medium >= CR_PREFIX_MEDIA_MAX || !(m->media_mask & (1u << medium))) return 0;
    return m->counts != NULL ? m->counts[medium] : m->longest_tokens;
}

/* Tokens of the match held on DP rank r (0 when none). */
static inline uint32_t cr_prefix_match_rank_tokens(const struct cr_prefix_match *m, unsigned r) {
    if (r >= CR_PREFIX_DP_RANKS || !(m->dp_mask & (1ULL << r))) return 0;
    return m->counts != NULL ? m->counts[CR_PREFIX_MEDIA_MAX + r] : m->longest_tokens;
}

struct cr_prefix_summary {
    uint32_t contexts;
    uint32_t instances;
    uint32_t publishers;
    uint64_t blocks;         /* distinct (context, sequence hash) entries */
    uint64_t pairs;          /* (block, instance) pairs */
    size_t bytes_used;       /* index-owned heap bytes, query scratch excluded */
    uint64_t runs_orphaned;  /* stored runs skipped: parent unknown */
    uint64_t removes_unknown;/* removals of engine hashes the publisher never stored */
};

struct cr_prefix_context_info {
    const char *tenant, *model, *lora_name, *additional_salt; /* owned by the index */
    uint32_t block_size;
    uint64_t seed;           /* the namespace seed its token hashes use */
    uint64_t blocks;
    uint64_t pairs;
};

/* Creates an empty index whose namespace seeds derive from base_seed
 * (CR_PREFIX_HASH_SEED_DEFAULT = 0 for the standard).  Returns CR_OK or
 * CR_ERR_NOMEM. */
int cr_prefix_index_create(uint64_t base_seed, struct cr_prefix_index **out);

/* Frees everything; NULL is a no-op. */
void cr_prefix_index_destroy(struct cr_prefix_index *index);

/* Bounds the engine hashes one publisher may have mapped (over all its
 * contexts); 0 = no bound (the default).  A stored run that would take a
 * publisher past it is refused whole with CR_ERR_NOMEM and counted in
 * cr_prefix_index_engine_refusals: one publisher sending hashes without
 * end must not grow the index for everyone. */
void cr_prefix_index_set_engine_max(struct cr_prefix_index *index, uint64_t max);
/* Stored runs refused at that bound so far (all publishers). */
uint64_t cr_prefix_index_engine_refusals(const struct cr_prefix_index *index);
/* Engine hashes the publisher has mapped now; 0 for an unknown publisher. */
uint64_t cr_prefix_index_engine_count(const struct cr_prefix_index *index, uint32_t publisher);

/* Resolves a medium name, case-insensitively ("gpu" = "GPU"); NULL or "" is
 * GPU.  Unknown names are registered (up to CR_PREFIX_MEDIA_MAX in all).
 * Returns CR_OK, CR_ERR_NOMEM when the registry is full, or
 * CR_ERR_INVALID_PARAMS for a name longer than 31 bytes. */
int cr_prefix_index_medium(struct cr_prefix_index *index, const char *name, uint8_t *medium);

/* Like cr_prefix_index_medium but never registers a name: an unknown one is
 * CR_ERR_OBJECT_NOT_FOUND (a too-long one CR_ERR_INVALID_PARAMS).  Used to
 * check a batch without changing the index. */
int cr_prefix_index_medium_find(const struct cr_prefix_index *index, const char *name,
                                uint8_t *medium);

/* Room left for medium names and for contexts (neither is ever reclaimed). */
uint32_t cr_prefix_index_media_free(const struct cr_prefix_index *index);
uint32_t cr_prefix_index_contexts_free(const struct cr_prefix_index *index);

/* Returns the canonical (upper-case) name of a registered medium, NULL if none. */
const char *cr_prefix_index_medium_name(const struct cr_prefix_index *index, uint8_t medium);

/* Registers instance (name, tenant); tenant NULL = "default".  Returns CR_OK
 * with the new id, CR_ERR_OBJECT_ALREADY_EXISTS with the existing id in *id,
 * CR_ERR_INVALID_PARAMS for an empty or over-long name, CR_ERR_NOMEM when
 * CR_PREFIX_INSTANCES_MAX are registered.  Cost O(instances). */
int cr_prefix_index_instance_add(struct cr_prefix_index *index, const char *name,
                                 const char *tenant, uint16_t *id);

/* Finds an instance.  Returns CR_OK or CR_ERR_OBJECT_NOT_FOUND. */
int cr_prefix_index_instance_find(const struct cr_prefix_index *index, const char *name,
                                  const char *tenant, uint16_t *id);

/* Name and tenant of a registered instance; NULL when id is not registered. */
const char *cr_prefix_index_instance_name(const struct cr_prefix_index *index, uint16_t id);
const char *cr_prefix_index_instance_tenant(const struct cr_prefix_index *index, uint16_t id);

/* Whether any instance is registered under tenant (NULL = "default").
 * Cost O(instances). */
bool cr_prefix_index_tenant_known(const struct cr_prefix_index *index, const char *tenant);

/* Removes the instance, its publishers and all their blocks; the id may be
 * reused.  Returns CR_OK or CR_ERR_OBJECT_NOT_FOUND. */
int cr_prefix_index_instance_remove(struct cr_prefix_index *index, uint16_t id);

/* Finds or creates the publisher (instance, dp_rank).  Returns CR_OK,
 * CR_ERR_OBJECT_NOT_FOUND for an unknown instance, CR_ERR_INVALID_PARAMS for
 * dp_rank >= 64, CR_ERR_NOMEM when full. */
int cr_prefix_index_publisher(struct cr_prefix_index *index, uint16_t instance, uint8_t dp_rank,
                              uint32_t *publisher);

/* Clears the publisher's blocks and forgets it.  Returns CR_OK or
 * CR_ERR_OBJECT_NOT_FOUND. */
int cr_prefix_index_publisher_remove(struct cr_prefix_index *index, uint32_t publisher);

/* Finds the context for key, creating it when create is true.  Returns CR_OK,
 * CR_ERR_OBJECT_NOT_FOUND (create false, unknown), CR_ERR_INVALID_PARAMS
 * (block_size 0, a string over CR_PREFIX_NAME_MAX), CR_ERR_NOMEM. */
int cr_prefix_index_context(struct cr_prefix_index *index, const struct cr_prefix_context_key *key,
                            bool create, uint32_t *context);

/* Describes a context.  Returns CR_OK or CR_ERR_OBJECT_NOT_FOUND. */
int cr_prefix_index_context_info(const struct cr_prefix_index *index, uint32_t context,
                                 struct cr_prefix_context_info *info);

/* A run of block_count complete blocks stored by publisher on medium.
 * engine_hashes[i] names block i for later removals; token_count must equal
 * block_count * block_size and block_size must be the context's.  The own
 * hashes are the standard chain over token_ids, rooted when parent_engine_hash
 * is NULL, else continuing from the own hash the publisher's parent maps to.
 * Returns CR_OK; CR_ERR_OBJECT_NOT_FOUND when the parent is unknown (run
 * skipped and counted); CR_ERR_INVALID_PARAMS for bad arguments (nothing
 * changed); CR_ERR_NOMEM (the run may be applied in part, the index stays
 * consistent). */
int cr_prefix_index_stored_tokens(struct cr_prefix_index *index, uint32_t publisher,
                                  uint32_t context, const uint64_t *parent_engine_hash,
                                  const uint64_t *engine_hashes, size_t block_count,
                                  const uint32_t *token_ids, size_t token_count,
                                  uint32_t block_size, uint8_t medium);

/* As cr_prefix_index_stored_tokens for an engine that sends each block's
 * own hash of its tokens (local_hashes[i], computed by the standard rule with
 * the context's seed: NVIDIA Dynamo's tokens_hash under seed 1337) instead of
 * the tokens: they are chained into sequence hashes from the parent's own
 * hash.  Returns as cr_prefix_index_stored_tokens. */
int cr_prefix_index_stored_locals(struct cr_prefix_index *index, uint32_t publisher,
                                  uint32_t context, const uint64_t *parent_engine_hash,
                                  const uint64_t *engine_hashes, const uint64_t *local_hashes,
                                  size_t block_count, uint8_t medium);

/* A run whose sequence hashes are already computed (the store's own events,
 * standardized events).  engine_hashes NULL means the engine names blocks by
 * their sequence hashes.  Returns as cr_prefix_index_stored_tokens, without
 * the parent case. */
int cr_prefix_index_stored_hashes(struct cr_prefix_index *index, uint32_t publisher,
                                  uint32_t context, const uint64_t *engine_hashes,
                                  const uint64_t *seq_hashes, size_t block_count, uint8_t medium);

/* The publisher no longer holds these blocks on medium (CR_PREFIX_MEDIUM_ALL:
 * on any medium).  Unknown engine hashes are counted and ignored.  Returns
 * CR_OK or CR_ERR_INVALID_PARAMS / CR_ERR_NOMEM. */
int cr_prefix_index_removed(struct cr_prefix_index *index, uint32_t publisher, uint32_t context,
                            const uint64_t *engine_hashes, size_t block_count, int medium);

/* Finds the context and own sequence hash that the publisher's engine hash
 * maps to (the first of its contexts that has it).  Returns true and sets
 * *context and *own, or false (also for a bad publisher id). */
bool cr_prefix_index_engine_find(const struct cr_prefix_index *index, uint32_t publisher,
                                 uint64_t engine_hash, uint32_t *context, uint64_t *own);

/* As cr_prefix_index_removed, in whichever of the publisher's contexts holds
 * each engine hash (removal events name no LoRA or block size).  Returns
 * CR_OK or CR_ERR_INVALID_PARAMS / CR_ERR_NOMEM. */
int cr_prefix_index_removed_any(struct cr_prefix_index *index, uint32_t publisher,
                                const uint64_t *engine_hashes, size_t block_count, int medium);

/* Removes every block of this publisher (only its own), in all contexts.
 * Returns CR_OK or CR_ERR_OBJECT_NOT_FOUND. */
int cr_prefix_index_cleared(struct cr_prefix_index *index, uint32_t publisher);

/* Prefix query over complete-block sequence hashes, in order: the scan stops
 * at the first block nobody (still matching) holds.  filter, when
 * filter_count > 0, restricts the answer to those instance ids.  On CR_OK
 * *matches points at *match_count results (instances with longest_tokens > 0,
 * in no particular order), valid until the next call on the index.  An
 * unknown context is CR_ERR_OBJECT_NOT_FOUND; use cr_prefix_index_query_tokens
 * for the "unknown is empty" HTTP semantics.  Returns CR_ERR_NOMEM when
 * scratch cannot grow.  Cost: blocks x matching instances in the worst case;
 * runs of identical holder sets cost a memcmp. */
int cr_prefix_index_query(struct cr_prefix_index *index, uint32_t context,
                          const uint64_t *seq_hashes, size_t block_count,
                          const uint16_t *filter, size_t filter_count,
                          const struct cr_prefix_match **matches, size_t *match_count);

/* Query scratch owned by a caller instead of the index, so that several
 * threads may query one index at once: cr_prefix_index_query_shared reads
 * the index and writes only its scratch.  The caller must keep every
 * change to the index out while it runs (the indexer actor's read lock,
 * src/actors/indexer_read.c); results point into the scratch and stay
 * valid until its next query.  One scratch serves one thread at a time. */
struct cr_prefix_scratch;
int cr_prefix_scratch_create(struct cr_prefix_scratch **out); /* CR_OK or CR_ERR_NOMEM */
void cr_prefix_scratch_destroy(struct cr_prefix_scratch *scratch); /* NULL is a no-op */
int cr_prefix_index_query_shared(const struct cr_prefix_index *index,
                                 struct cr_prefix_scratch *scratch, uint32_t context,
                                 const uint64_t *seq_hashes, size_t block_count,
                                 const uint16_t *filter, size_t filter_count,
                                 const struct cr_prefix_match **matches, size_t *match_count);

/* Hashes token_ids with the context's seed and queries.  An unknown context
 * (or fewer tokens than one block) is CR_OK with no matches. */
int cr_prefix_index_query_tokens(struct cr_prefix_index *index,
                                 const struct cr_prefix_context_key *key,
                                 const uint32_t *token_ids, size_t token_count,
                                 const uint16_t *filter, size_t filter_count,
                                 const struct cr_prefix_match **matches, size_t *match_count);

/* Fills the global summary (for /global_view). */
void cr_prefix_index_summary(const struct cr_prefix_index *index, struct cr_prefix_summary *out);

#endif
