/* Interned placement sets of the prefix index (see prefix_internal.h).
 *
 * Most (block, instance) pairs share a handful of sets ("rank 0 on GPU"), so a
 * holder record carries a 16-bit id instead of 72+ bits of masks, which keeps
 * records at 4 bytes and makes equal holder lists byte-identical. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "core/prefix_internal.h"
#include "crescent/error.h"

#define SLOTS_MIN 64u
#define NO_FREE 0u

int prefix_attrs_init(struct cr_prefix_index *index) {
    assert(index != NULL);
    struct prefix_attr_table *t = &index->attrs;
    memset(t, 0, sizeof(*t));
    t->slots = calloc(SLOTS_MIN, sizeof(uint16_t));
    if (t->slots == NULL) return CR_ERR_NOMEM;
    t->slot_cap = SLOTS_MIN;
    index->bytes_used += SLOTS_MIN * sizeof(uint16_t);
    return CR_OK;
}

void prefix_attrs_free(struct cr_prefix_index *index) {
    assert(index != NULL);
    struct prefix_attr_table *t = &index->attrs;
    index->bytes_used -= t->slot_cap * sizeof(uint16_t) + t->attr_cap * sizeof(struct prefix_attr);
    free(t->slots);
    free(t->attrs);
    memset(t, 0, sizeof(*t));
}

static uint64_t place_hash(const uint64_t place[CR_PREFIX_MEDIA_MAX]) {
    return XXH3_64bits(place, sizeof(uint64_t) * CR_PREFIX_MEDIA_MAX);
}

static uint32_t slot_find(const struct prefix_attr_table *t, const uint64_t *place, uint64_t hash) {
    uint32_t mask = t->slot_cap - 1, i = (uint32_t)hash & mask;
    while (t->slots[i] != 0) {
        const struct prefix_attr *a = &t->attrs[t->slots[i]];
        if (a->hash == hash && memcmp(a->place, place, sizeof(a->place)) == 0) return i;
        i = (i + 1) & mask;
    }
    return i; /* the empty slot where it would go */
}

static int slots_grow(struct cr_prefix_index *index) {
    struct prefix_attr_table *t = &index->attrs;
    uint32_t cap = t->slot_cap * 2;
    uint16_t *slots = calloc(cap, sizeof(uint16_t));
    if (slots == NULL) return CR_ERR_NOMEM;
    for (uint32_t i = 0; i < t->slot_cap; i++) {
        uint16_t id = t->slots[i];
        if (id == 0) continue;
        uint32_t j = (uint32_t)t->attrs[id].hash & (cap - 1);
        while (slots[j] != 0) j = (j + 1) & (cap - 1);
        slots[j] = id;
    }
    index->bytes_used += (cap - t->slot_cap) * sizeof(uint16_t);
    free(t->slots);
    t->slots = slots;
    t->slot_cap = cap;
    return CR_OK;
}

/* Returns a free id (0 on NOMEM or when all 65535 are live). */
static uint16_t id_alloc(struct cr_prefix_index *index) {
    struct prefix_attr_table *t = &index->attrs;
    if (t->free_head != NO_FREE) {
        uint16_t id = (uint16_t)t->free_head;
        t->free_head = (uint32_t)t->attrs[id].hash;
        return id;
    }
    uint32_t next = t->attr_cap == 0 ? 1 : t->attr_cap;
    if (next > ATTRS_MAX) return 0;
    uint32_t need = next + 1;
    if (prefix_grow(index, (void **)&t->attrs, sizeof(struct prefix_attr), &t->attr_cap, need,
                    ATTRS_MAX + 1) != CR_OK) {
        return 0;
    }
    /* prefix_grow may have added more than one slot: chain the extras as free. */
    for (uint32_t id = t->attr_cap - 1; id > next; id--) {
        t->attrs[id].refs = 0;
        t->attrs[id].hash = t->free_head;
        t->free_head = id;
    }
    return (uint16_t)next;
}

uint16_t prefix_attr_acquire(struct cr_prefix_index *index,
                             const uint64_t place[CR_PREFIX_MEDIA_MAX]) {
    assert(index != NULL && place != NULL);
    struct prefix_attr_table *t = &index->attrs;
    uint64_t hash = place_hash(place);
    uint32_t slot = slot_find(t, place, hash);
    if (t->slots[slot] != 0) {
        t->attrs[t->slots[slot]].refs++;
        return t->slots[slot];
    }
    if ((t->live + 1) * 2 > t->slot_cap) {
        if (slots_grow(index) != CR_OK) return 0;
        slot = slot_find(t, place, hash);
    }
    uint16_t id = id_alloc(index);
    if (id == 0) return 0;
    struct prefix_attr *a = &t->attrs[id];
    memcpy(a->place, place, sizeof(a->place));
    a->hash = hash;
    a->refs = 1;
    a->dp_mask = 0;
    a->media_mask = 0;
    for (unsigned m = 0; m < CR_PREFIX_MEDIA_MAX; m++) {
        a->dp_mask |= place[m];
        if (place[m] != 0) a->media_mask |= (uint8_t)(1u << m);
    }
    assert(a->media_mask != 0);
    t->slots[slot] = id;
    t->live++;
    return id;
}

uint16_t prefix_attr_acquire_single(struct cr_prefix_index *index, uint8_t medium, uint8_t rank) {
    assert(medium < CR_PREFIX_MEDIA_MAX && rank < CR_PREFIX_DP_RANKS);
    struct prefix_attr_table *t = &index->attrs;
    uint16_t id = t->single[medium][rank];
    if (id != 0) {
        t->attrs[id].refs++;
        return id;
    }
    uint64_t place[CR_PREFIX_MEDIA_MAX] = {0};
    place[medium] = 1ULL << rank;
    id = prefix_attr_acquire(index, place);
    t->single[medium][rank] = id;
    return id;
}

/* Backward-shift removal of the slot holding id. */
static void slot_remove(struct prefix_attr_table *t, uint16_t id) {
    uint32_t mask = t->slot_cap - 1;
    uint32_t hole = (uint32_t)t->attrs[id].hash & mask;
    while (t->slots[hole] != id) hole = (hole + 1) & mask;
    for (uint32_t i = hole;;) {
        i = (i + 1) & mask;
        if (t->slots[i] == 0) break;
        uint32_t home = (uint32_t)t->attrs[t->slots[i]].hash & mask;
        bool stays = hole <= i ? (hole < home && home <= i) : (hole < home || home <= i);
        if (stays) continue;
        t->slots[hole] = t->slots[i];
        hole = i;
    }
    t->slots[hole] = 0;
}

void prefix_attr_release(struct cr_prefix_index *index, uint16_t id) {
    struct prefix_attr_table *t = &index->attrs;
    assert(id != 0 && id < t->attr_cap);
    assert(t->attrs[id].refs > 0);
    if (--t->attrs[id].refs > 0) return;
    slot_remove(t, id);
    for (unsigned m = 0; m < CR_PREFIX_MEDIA_MAX; m++) {
        uint64_t bits = t->attrs[id].place[m];
        /* A single-placement set may be cached: forget it with the id. */
        if (bits != 0 && (bits & (bits - 1)) == 0) {
            unsigned r = (unsigned)__builtin_ctzll(bits);
            if (t->single[m][r] == id) t->single[m][r] = 0;
        }
    }
    t->attrs[id].hash = t->free_head;
    t->free_head = id;
    t->live--;
}
