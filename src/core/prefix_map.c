/* u64 -> u64 open-addressing map (see prefix_map.h). */
#include "core/prefix_map.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "crescent/error.h"

#define MAP_MIN_CAP 16u

static inline uint64_t mix(uint64_t key) {
    /* Murmur3's finaliser: engine hashes are already random, but instance ids
     * and packed keys are not. */
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    key *= 0xc4ceb9fe1a85ec53ULL;
    return key ^ (key >> 33);
}

void cr_prefix_map_init(struct cr_prefix_map *map, size_t *bytes_used) {
    assert(map != NULL);
    memset(map, 0, sizeof(*map));
    map->bytes_used = bytes_used;
}

static void account(struct cr_prefix_map *map, uint32_t old_cap, uint32_t new_cap) {
    if (map->bytes_used == NULL) return;
    *map->bytes_used -= (size_t)old_cap * 16u;
    *map->bytes_used += (size_t)new_cap * 16u;
}

void cr_prefix_map_free(struct cr_prefix_map *map) {
    assert(map != NULL);
    account(map, map->cap, 0);
    free(map->slots);
    size_t *bytes = map->bytes_used;
    cr_prefix_map_init(map, bytes);
}

static void insert_slot(struct cr_prefix_map_entry *slots, uint32_t cap, uint64_t key,
                        uint64_t value) {
    uint32_t mask = cap - 1;
    uint32_t i = (uint32_t)mix(key) & mask;
    while (slots[i].key != 0 && slots[i].key != key) i = (i + 1) & mask;
    slots[i] = (struct cr_prefix_map_entry){key, value};
}

static int resize(struct cr_prefix_map *map, uint32_t new_cap) {
    assert(new_cap >= MAP_MIN_CAP && (new_cap & (new_cap - 1)) == 0);
    assert(map->count - (map->has_zero ? 1u : 0u) < new_cap);
    struct cr_prefix_map_entry *slots = calloc(new_cap, sizeof(*slots));
    if (slots == NULL) return CR_ERR_NOMEM;
    for (uint32_t i = 0; i < map->cap; i++) {
        if (map->slots[i].key != 0)
            insert_slot(slots, new_cap, map->slots[i].key, map->slots[i].value);
    }
    free(map->slots);
    account(map, map->cap, new_cap);
    map->slots = slots;
    map->cap = new_cap;
    return CR_OK;
}

int cr_prefix_map_put(struct cr_prefix_map *map, uint64_t key, uint64_t value) {
    assert(map != NULL);
    if (key == 0) {
        if (!map->has_zero) map->count++;
        map->has_zero = true;
        map->zero_value = value;
        return CR_OK;
    }
    uint32_t slots_used = map->count - (map->has_zero ? 1u : 0u);
    if ((uint64_t)(slots_used + 1) * 4 > (uint64_t)map->cap * 3) {
        if (map->cap >= (1u << 30)) return CR_ERR_NOMEM;
        int rc = resize(map, map->cap == 0 ? MAP_MIN_CAP : map->cap * 2);
        if (rc != CR_OK) return rc;
    }
    uint32_t mask = map->cap - 1;
    uint32_t i = (uint32_t)mix(key) & mask;
    while (map->slots[i].key != 0 && map->slots[i].key != key) i = (i + 1) & mask;
    if (map->slots[i].key == 0) map->count++;
    map->slots[i] = (struct cr_prefix_map_entry){key, value};
    return CR_OK;
}

static int64_t find_slot(const struct cr_prefix_map *map, uint64_t key) {
    assert(key != 0);
    if (map->cap == 0) return -1;
    uint32_t mask = map->cap - 1;
    uint32_t i = (uint32_t)mix(key) & mask;
    while (map->slots[i].key != 0) {
        if (map->slots[i].key == key) return i;
        i = (i + 1) & mask;
    }
    return -1;
}

bool cr_prefix_map_get(const struct cr_prefix_map *map, uint64_t key, uint64_t *value) {
    assert(map != NULL);
    if (key == 0) {
        if (map->has_zero && value != NULL) *value = map->zero_value;
        return map->has_zero;
    }
    int64_t slot = find_slot(map, key);
    if (slot < 0) return false;
    if (value != NULL) *value = map->slots[slot].value;
    return true;
}

void cr_prefix_map_prefetch(const struct cr_prefix_map *map, uint64_t key) {
    if (map->cap == 0 || key == 0) return;
    __builtin_prefetch(&map->slots[(uint32_t)mix(key) & (map->cap - 1)]);
}

/* Backward-shift deletion: later members of the probe run move into the hole
 * when their home slot does not lie cyclically in (hole, their slot]. */
static void delete_slot(struct cr_prefix_map *map, uint32_t hole) {
    uint32_t mask = map->cap - 1;
    uint32_t i = hole;
    for (;;) {
        i = (i + 1) & mask;
        if (map->slots[i].key == 0) break;
        uint32_t home = (uint32_t)mix(map->slots[i].key) & mask;
        bool stays = hole <= i ? (hole < home && home <= i) : (hole < home || home <= i);
        if (stays) continue;
        map->slots[hole] = map->slots[i];
        hole = i;
    }
    map->slots[hole].key = 0;
}

bool cr_prefix_map_del(struct cr_prefix_map *map, uint64_t key, uint64_t *value) {
    assert(map != NULL);
    if (key == 0) {
        if (!map->has_zero) return false;
        if (value != NULL) *value = map->zero_value;
        map->has_zero = false;
        map->count--;
        return true;
    }
    int64_t slot = find_slot(map, key);
    if (slot < 0) return false;
    if (value != NULL) *value = map->slots[slot].value;
    delete_slot(map, (uint32_t)slot);
    map->count--;
    uint32_t slots_used = map->count - (map->has_zero ? 1u : 0u);
    if (slots_used == 0) {
        bool zero = map->has_zero;
        uint64_t zero_value = map->zero_value;
        cr_prefix_map_free(map);
        map->has_zero = zero;
        map->zero_value = zero_value;
        map->count = zero ? 1 : 0;
    } else if (map->cap > MAP_MIN_CAP && (uint64_t)slots_used * 8 < map->cap) {
        (void)resize(map, map->cap / 2); /* on failure the larger table stays valid */
    }
    return true;
}

bool cr_prefix_map_next(const struct cr_prefix_map *map, size_t *cursor, uint64_t *key,
                        uint64_t *value) {
    assert(map != NULL && cursor != NULL);
    if (*cursor == 0) {
        *cursor = 1;
        if (map->has_zero) {
            *key = 0;
            *value = map->zero_value;
            return true;
        }
    }
    while (*cursor - 1 < map->cap) {
        size_t i = (*cursor)++ - 1;
        if (map->slots[i].key != 0) {
            *key = map->slots[i].key;
            *value = map->slots[i].value;
            return true;
        }
    }
    return false;
}
