/* Open-addressing hash map from u64 to u64 for the prefix indexer.
 *
 * Linear probing with backward-shift deletion, so removals leave no
 * tombstones; the table doubles at 3/4 load and halves below 1/8 load (not
 * under 16 slots), so steady insert/remove churn keeps its size.  Key 0 is
 * legal: it lives in a side slot because 0 marks empty table slots.
 * Keys are mixed before use, so small integers are fine as keys.
 * Single-threaded; bytes in use are added to and subtracted from the counter
 * the map was initialised with. */
#ifndef CRESCENT_CORE_PREFIX_MAP_H
#define CRESCENT_CORE_PREFIX_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A key and its value side by side: a hit costs one cache line, not two. */
struct cr_prefix_map_entry {
    uint64_t key; /* 0 = empty */
    uint64_t value;
};

struct cr_prefix_map {
    struct cr_prefix_map_entry *slots; /* cap slots */
    uint32_t cap;       /* 0 or a power of two >= 16 */
    uint32_t count;     /* keys present, the zero key included */
    bool has_zero;
    uint64_t zero_value;
    size_t *bytes_used; /* shared accounting counter, may be NULL */
};

/* Initialises an empty map that allocates nothing until the first put. */
void cr_prefix_map_init(struct cr_prefix_map *map, size_t *bytes_used);

/* Frees the table; the map is empty and reusable afterwards. */
void cr_prefix_map_free(struct cr_prefix_map *map);

/* Sets key -> value (inserting or overwriting).  Returns CR_OK, or
 * CR_ERR_NOMEM when the table cannot grow (the map is unchanged). */
int cr_prefix_map_put(struct cr_prefix_map *map, uint64_t key, uint64_t value);

/* Returns true and stores the value in *value (if non-NULL) when key is present. */
bool cr_prefix_map_get(const struct cr_prefix_map *map, uint64_t key, uint64_t *value);

/* Starts loading key's home slot into the cache, for a lookup soon after:
 * lookups of keys known in advance then overlap their cache misses. */
void cr_prefix_map_prefetch(const struct cr_prefix_map *map, uint64_t key);

/* Removes key; returns true (and its value in *value if non-NULL) when it was
 * present.  May shrink the table; a failed shrink keeps the larger table. */
bool cr_prefix_map_del(struct cr_prefix_map *map, uint64_t key, uint64_t *value);

/* Iteration: start with *cursor = 0; returns false at the end.  The map must
 * not change during an iteration. */
bool cr_prefix_map_next(const struct cr_prefix_map *map, size_t *cursor, uint64_t *key,
                        uint64_t *value);

static inline uint32_t cr_prefix_map_count(const struct cr_prefix_map *map) {
    return map->count;
}

#endif
