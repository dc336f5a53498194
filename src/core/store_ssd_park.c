/* A store server's SSD files parked while it is away (store_ssd_park.h). */
#include "core/store_ssd_park.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "core/store_internal.h"

#define NONE UINT32_MAX

struct park_entry {
    uint64_t hash, position, size, checksum;
    uint32_t segment; /* index into names */
    uint32_t next;    /* bucket chain; free list */
};

struct cr_store_ssd_park {
    char **names; /* segments with a record */
    uint32_t name_count, name_cap;
    struct park_entry *entries;
    uint32_t entry_cap, free_head, live;
    uint32_t *buckets; /* heads by hash, bucket_mask + 1 of them */
    uint32_t bucket_mask;
    bool muted;
    uint64_t overflow;
};

static struct cr_store_ssd_park *park_of(cr_store *store) {
    if (store->ssd_park == NULL) {
        store->ssd_park = calloc(1, sizeof(*store->ssd_park));
        if (store->ssd_park != NULL) store->ssd_park->free_head = NONE;
    }
    return store->ssd_park;
}

/* The record of segment `name` (added when `add`), or NONE. */
static uint32_t name_index(struct cr_store_ssd_park *p, const char *name, bool add) {
    for (uint32_t i = 0; i < p->name_count; i++)
        if (strcmp(p->names[i], name) == 0) return i;
    if (!add) return NONE;
    if (p->name_count == p->name_cap) {
        uint32_t cap = p->name_cap ? p->name_cap * 2 : 8;
        char **grown = realloc(p->names, cap * sizeof(*grown));
        if (grown == NULL) return NONE;
        p->names = grown;
        p->name_cap = cap;
    }
    char *copy = strdup(name);
    if (copy == NULL) return NONE;
    p->names[p->name_count] = copy;
    return p->name_count++;
}

/* Room for one more entry: the free list, else the array doubled (and the
 * buckets with it, rehashed).  False when full (max_objects) or out of memory. */
static bool reserve(struct cr_store_ssd_park *p, uint64_t max) {
    if (p->free_head != NONE) return true;
    if (p->entry_cap >= max) return false;
    uint64_t cap = p->entry_cap ? (uint64_t)p->entry_cap * 2 : 1024;
    if (cap > max) cap = max;
    struct park_entry *grown = realloc(p->entries, cap * sizeof(*grown));
    if (grown == NULL) return false;
    p->entries = grown;
    uint64_t slots = 1024;
    while (slots < cap) slots *= 2;
    uint32_t *buckets = malloc(slots * sizeof(*buckets));
    if (buckets == NULL) return false;
    for (uint64_t i = 0; i < slots; i++) buckets[i] = NONE;
    uint32_t mask = (uint32_t)(slots - 1);
    for (uint32_t b = 0; p->buckets != NULL && b <= p->bucket_mask; b++) {
        for (uint32_t e = p->buckets[b]; e != NONE;) {
            uint32_t next = p->entries[e].next;
            p->entries[e].next = buckets[p->entries[e].hash & mask];
            buckets[p->entries[e].hash & mask] = e;
            e = next;
        }
    }
    free(p->buckets);
    p->buckets = buckets;
    p->bucket_mask = mask;
    for (uint64_t i = cap; i-- > p->entry_cap;) { /* the new slots, lowest first */
        p->entries[i].next = p->free_head;
        p->free_head = (uint32_t)i;
    }
    p->entry_cap = (uint32_t)cap;
    return true;
}

static void park_one(struct cr_store_ssd_park *p, uint64_t max, uint32_t segment,
                     const struct cr_store_obj *obj, uint64_t position) {
    if (!reserve(p, max)) {
        p->overflow++;
        return;
    }
    uint32_t e = p->free_head;
    p->free_head = p->entries[e].next;
    p->entries[e] = (struct park_entry){.hash = obj->hash, .position = position,
                                        .size = obj->size, .checksum = obj->checksum,
                                        .segment = segment,
                                        .next = p->buckets[obj->hash & p->bucket_mask]};
    p->buckets[obj->hash & p->bucket_mask] = e;
    p->live++;
}

/* Unlinks the entry *at names from its bucket's chain onto the free list;
 * *at then names the entry after it. */
static void release(struct cr_store_ssd_park *p, uint32_t *at) {
    assert(*at != NONE && p->live > 0);
    struct park_entry *e = &p->entries[*at];
    uint32_t gone = *at;
    *at = e->next;
    e->next = p->free_head;
    p->free_head = gone;
    p->live--;
}

/* Forgets the segment's entries parked before (it is dropped again). */
static void forget_segment(struct cr_store_ssd_park *p, uint32_t segment) {
    for (uint32_t b = 0; p->buckets != NULL && b <= p->bucket_mask; b++) {
        for (uint32_t *at = &p->buckets[b]; *at != NONE;) {
            if (p->entries[*at].segment == segment) release(p, at);
            else at = &p->entries[*at].next;
        }
    }
}

void cr_store_ssd_park_segment(cr_store *store, uint32_t seg) {
    assert(store != NULL && seg < store->cfg.max_segments && store->segments[seg].in_use);
    /* An SSD announced at mount, or a record already (a restored segment:
     * the log does not keep its SSD's size). */
    const char *seg_name = store->segments[seg].name;
    bool known = store->ssd_park != NULL && name_index(store->ssd_park, seg_name, false) != NONE;
    if (store->segments[seg].ssd_capacity == 0 && !known) return;
    struct cr_store_ssd_park *p = park_of(store);
    uint32_t name = p != NULL ? name_index(p, seg_name, true) : NONE;
    if (name == NONE) { /* out of memory: no record, so its files re-create (the old rule) */
        if (p != NULL) p->overflow++;
        return;
    }
    forget_segment(p, name);
    for (uint32_t id = 0; id < store->slab_high; id++) {
        const struct cr_store_obj *obj = cr_store_obj_at(store, id);
        if (obj->state != CR_OBJ_COMPLETE || !obj->has_checksum) continue;
        for (uint32_t r = 0; r < obj->replica_count; r++) {
            const struct cr_store_replica *rep = &cr_store_reps(obj)[r];
            if (rep->medium == CR_MEDIUM_LOCAL_DISK && rep->segment == seg &&
                rep->status == CR_REPLICA_COMPLETE)
                park_one(p, store->cfg.max_objects, name, obj, rep->offset);
        }
    }
}

void cr_store_ssd_park_know(cr_store *store, const char *segment_name) {
    assert(store != NULL && segment_name != NULL);
    struct cr_store_ssd_park *p = park_of(store);
    if (p != NULL) (void)name_index(p, segment_name, true);
}

void cr_store_ssd_park_forget(cr_store *store, uint64_t hash) {
    struct cr_store_ssd_park *p = store->ssd_park;
    if (p == NULL || p->muted || p->live == 0) return;
    for (uint32_t *at = &p->buckets[hash & p->bucket_mask]; *at != NONE;) {
        if (p->entries[*at].hash == hash) release(p, at);
        else at = &p->entries[*at].next;
    }
}

void cr_store_ssd_park_forget_all(cr_store *store) {
    struct cr_store_ssd_park *p = store->ssd_park;
    for (uint32_t n = 0; p != NULL && n < p->name_count; n++) forget_segment(p, n);
}

void cr_store_ssd_park_mute(cr_store *store, bool muted) {
    if (store->ssd_park != NULL) store->ssd_park->muted = muted;
}

int cr_store_ssd_park_check(const cr_store *store, const char *segment_name, uint64_t hash,
                            uint64_t position, uint64_t size, uint64_t checksum) {
    struct cr_store_ssd_park *p = store->ssd_park;
    uint32_t name = p != NULL ? name_index(p, segment_name, false) : NONE;
    if (name == NONE) return 0;
    if (p->live == 0) return -1;
    for (uint32_t e = p->buckets[hash & p->bucket_mask]; e != NONE; e = p->entries[e].next) {
        const struct park_entry *x = &p->entries[e];
        if (x->hash == hash && x->segment == name && x->position == position &&
            x->size == size && x->checksum == checksum)
            return 1;
    }
    return -1;
}

void cr_store_ssd_park_counts(const cr_store *store, uint64_t *parked, uint64_t *overflow) {
    const struct cr_store_ssd_park *p = store->ssd_park;
    *parked = p != NULL ? p->live : 0;
    *overflow = p != NULL ? p->overflow : 0;
}

void cr_store_ssd_park_free(cr_store *store) {
    struct cr_store_ssd_park *p = store->ssd_park;
    if (p == NULL) return;
    for (uint32_t i = 0; i < p->name_count; i++) free(p->names[i]);
    free(p->names);
    free(p->entries);
    free(p->buckets);
    free(p);
    store->ssd_park = NULL;
}
