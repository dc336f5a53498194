/* A simulated engine's KV cache: a fixed number of blocks with LRU
 * eviction, as vLLM's prefix cache behaves, for trace replay (crescent-bench
 * trace-route, bench/prefix_trace).
 *
 * Blocks are named by u64 keys (the engine's block hashes: a chain, so one
 * key names one prefix).  Serving a request's chain keeps its blocks, stores
 * the missing ones, and evicts the least recently used others to make room.
 * A served chain's blocks are touched last-first, so its first block is the
 * most recent: like vLLM's free queue, a sequence's tail is evicted before
 * its head and a cached prefix stays a prefix.
 *
 * Single-threaded (src/core rules). */
#ifndef CRESCENT_CORE_KV_LRU_H
#define CRESCENT_CORE_KV_LRU_H

#include <stddef.h>
#include <stdint.h>

#include "core/prefix_map.h"

struct cr_kv_lru {
    uint32_t capacity, used;
    uint32_t head, tail;         /* most and least recently used; UINT32_MAX when empty */
    uint32_t free_head;          /* unused nodes chained through next */
    uint64_t *keys;
    uint32_t *prev, *next;
    struct cr_prefix_map where;  /* key -> node */
    size_t bytes;                /* the map's accounting */
    uint64_t evictions;
};

/* What serving one chain did: `hit` leading blocks were cached; the stored
 * blocks form runs (a run: its first position and length; its parent is the
 * block before it, none for position 0); `removed` keys were evicted.  The
 * arrays belong to the caller and hold the chain's length. */
struct cr_kv_lru_result {
    uint32_t hit;
    uint32_t stored;             /* blocks stored */
    uint32_t run_count;
    uint32_t *run_start, *run_len;
    uint32_t removed_count;
    uint64_t *removed;
};

/* Returns CR_OK or CR_ERR_NOMEM (capacity 0 is CR_ERR_INVALID_PARAMS). */
int cr_kv_lru_init(struct cr_kv_lru *lru, uint32_t capacity);
void cr_kv_lru_free(struct cr_kv_lru *lru);

/* Leading keys of the chain that are cached; changes nothing. */
uint32_t cr_kv_lru_prefix(const struct cr_kv_lru *lru, const uint64_t *keys, uint32_t count);

/* Serves a chain of count keys, count <= capacity (callers cut longer
 * chains: an engine cannot hold more than its cache).  Fills *result.
 * Returns CR_OK, CR_ERR_INVALID_PARAMS (count > capacity, nothing done) or
 * CR_ERR_NOMEM (the cache stays consistent with part of the chain stored;
 * *result says what was). */
int cr_kv_lru_serve(struct cr_kv_lru *lru, const uint64_t *keys, uint32_t count,
                    struct cr_kv_lru_result *result);

#endif
