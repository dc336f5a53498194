/* The key index of a bulk restore built at once, in home-slot order
 * (store_restore.h: cr_store_restore_index_defer / _build).
 *
 * Why: inserting 10 M restored objects one by one into a 256 MiB
 * open-addressing index is one cache miss (and a TLB miss) per object, at
 * random, and so is the duplicate-key lookup before it: measured, the
 * largest share of a restart after the kernel's page zeroing.  Deferred,
 * each object only appends (hash_hi, id) to an array; the build sorts that
 * array by home slot (an LSD radix sort: sequential passes) and inserts in
 * that order, so the writes walk the table from its start to its end and
 * linear probing only steps into the lines just written.  The entries
 * whose probe wraps past the table's end land in the first slots, which
 * were written first: still a short forward probe. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "core/store_internal.h"
#include "core/store_restore.h"
#include "core/store_ssd_park.h"
#include "crescent/error.h"

/* An object waiting for its slot: hash_hi in the high 32 bits (the slot's
 * filter and, in its top bits, the home), the object id in the low. */
struct cr_store_index_pending {
    uint64_t *v;
    uint64_t n, cap;
};

#define PENDING_MIN 1024u
#define DIGIT_BITS_MAX 11u /* 2048 buckets a pass: their write streams stay in cache */

int cr_store_restore_index_defer(cr_store *store, uint64_t objects) {
    assert(store != NULL);
    if (store->bulk == NULL)
        return cr_store_fail(store, CR_ERR_INVALID_PARAMS, "no bulk restore is under way");
    if (store->index_pending != NULL) return CR_OK;
    struct cr_store_index_pending *p = calloc(1, sizeof(*p));
    if (p == NULL) return cr_store_fail(store, CR_ERR_NOMEM, "out of memory");
    uint64_t room = store->cfg.max_objects;
    uint64_t cap = objects < PENDING_MIN ? PENDING_MIN : objects > room ? room : objects;
    if (cap > 0 && (p->v = malloc(cap * sizeof(*p->v))) == NULL) {
        free(p);
        return cr_store_fail(store, CR_ERR_NOMEM,
                             "no memory to defer the key index of %llu objects",
                             (unsigned long long)cap);
    }
    p->cap = cap;
    store->index_pending = p;
    return CR_OK;
}

bool cr_store_restore_index_deferred(const cr_store *store) {
    assert(store != NULL);
    return store->index_pending != NULL;
}

bool cr_store_index_pending_room(cr_store *store) {
    struct cr_store_index_pending *p = store->index_pending;
    assert(p != NULL);
    if (!cr_store_slab_has_room(store) || cr_store_index_reserve(store) != CR_OK) return false;
    if (p->n < p->cap) return true;
    uint64_t cap = p->cap * 2 > PENDING_MIN ? p->cap * 2 : PENDING_MIN;
    uint64_t *v = realloc(p->v, cap * sizeof(*v));
    if (v == NULL) return false;
    p->v = v;
    p->cap = cap;
    return true;
}

void cr_store_index_pending_add(cr_store *store, uint32_t id, uint64_t hash) {
    struct cr_store_index_pending *p = store->index_pending;
    assert(p != NULL && p->n < p->cap);
    p->v[p->n++] = (hash & 0xffffffff00000000ull) | id;
}

void cr_store_restore_index_drop(cr_store *store) {
    struct cr_store_index_pending *p = store->index_pending;
    if (p == NULL) return;
    free(p->v);
    free(p);
    store->index_pending = NULL;
}

/* ---- the build ------------------------------------------------------------------ */

/* Stable LSD radix sort of v[0, n) on bits [lo, 64) of each entry (the
 * home), in passes of at most DIGIT_BITS_MAX bits; tmp holds n entries.
 * All passes' histograms are counted in one read of v.  Returns where the
 * sorted entries are (v or tmp). */
static uint64_t *radix_sort(uint64_t *v, uint64_t *tmp, uint64_t n, unsigned lo,
                            uint64_t *count) {
    unsigned bits = 64 - lo;
    unsigned passes = (bits + DIGIT_BITS_MAX - 1) / DIGIT_BITS_MAX;
    unsigned width = (bits + passes - 1) / passes;
    uint64_t mask = (1ull << width) - 1;
    size_t buckets = (size_t)1 << width;
    memset(count, 0, passes * buckets * sizeof(*count));
    for (uint64_t i = 0; i < n; i++)
        for (unsigned d = 0; d < passes; d++)
            count[d * buckets + ((v[i] >> (lo + d * width)) & mask)]++;
    for (unsigned d = 0; d < passes; d++) {
        uint64_t *c = count + d * buckets, sum = 0;
        if (c[(v[0] >> (lo + d * width)) & mask] == n) continue; /* one digit: nothing moves */
        for (size_t b = 0; b < buckets; b++) {
            uint64_t k = c[b];
            c[b] = sum;
            sum += k;
        }
        unsigned shift = lo + d * width;
        for (uint64_t i = 0; i < n; i++) tmp[c[(v[i] >> shift) & mask]++] = v[i];
        uint64_t *t = v;
        v = tmp;
        tmp = t;
    }
    return v;
}

static bool same_key(const cr_store *store, uint32_t a, uint32_t b) {
    const struct cr_store_obj *x = cr_store_obj_at(store, a), *y = cr_store_obj_at(store, b);
    return x->hash == y->hash && x->tenant == y->tenant && x->key_len == y->key_len &&
           memcmp(x->key, y->key, x->key_len) == 0;
}

/* Puts object `id` in its slot, or in the slot of an object of the same key
 * found on its probe (restored before it: the later one stays, and the
 * earlier is freed).  Returns whether one was replaced. */
static bool insert(cr_store *store, uint64_t e) {
    uint32_t hi = (uint32_t)(e >> 32), id = (uint32_t)e, mask = store->table_mask;
    for (uint32_t i = hi >> store->table_shift;; i = (i + 1) & mask) {
        struct cr_store_slot *slot = &store->table[i];
        if (slot->id_plus1 == 0) {
            *slot = (struct cr_store_slot){hi, id + 1};
            return false;
        }
        if (slot->hash_hi != hi || !same_key(store, slot->id_plus1 - 1, id)) continue;
        uint32_t earlier = slot->id_plus1 - 1;
        slot->id_plus1 = id + 1;
        /* Its replicas unclaimed (nothing to free in the allocators) when it
         * came from this restore; released as a removal would when not. */
        cr_store_obj_free_unindexed(store, earlier);
        return true;
    }
}

uint64_t cr_store_restore_index_build(cr_store *store) {
    assert(store != NULL);
    struct cr_store_index_pending *p = store->index_pending;
    if (p == NULL) return 0;
    uint64_t replaced = 0, *sorted = p->v;
    /* The sort's scratch: the table itself when it is empty (every object
     * is pending), whose pages are mapped already (at least 16 bytes a
     * pending object, load <= 1/2), zeroed again after; otherwise fresh
     * memory, which the kernel zeroes first (on a VM, ~0.3 s at 10 M). */
    bool scratch_table = store->object_count == p->n;
    uint64_t *tmp = p->n < 2           ? NULL
                    : scratch_table    ? (uint64_t *)(void *)store->table
                                       : malloc(p->n * sizeof(*tmp));
    assert(!scratch_table || ((uint64_t)store->table_mask + 1) * sizeof(*store->table) >=
                                 p->n * sizeof(*tmp));
    unsigned passes_max = (32 + DIGIT_BITS_MAX - 1) / DIGIT_BITS_MAX;
    uint64_t *count = tmp != NULL ? malloc(passes_max * ((size_t)1 << DIGIT_BITS_MAX) *
                                           sizeof(*count))
                                  : NULL;
    /* Without the memory to sort, inserted in restore order: the same
     * index, built at random. */
    if (count != NULL) sorted = radix_sort(p->v, tmp, p->n, 32 + store->table_shift, count);
    free(count);
    if (scratch_table && tmp != NULL) {
        if (sorted == tmp) {
            memcpy(p->v, tmp, p->n * sizeof(*tmp));
            sorted = p->v;
        }
        memset(tmp, 0, p->n * sizeof(*tmp));
        tmp = NULL; /* not freed below */
    }
    /* Stable: a key's objects (one hash, so one home) stay in restore
     * order, which is the order insert needs to keep the later. */
    bool park = store->ssd_park != NULL;
    for (uint64_t i = 0; i < p->n; i++) {
        uint32_t id = (uint32_t)sorted[i];
        if (park) cr_store_ssd_park_forget(store, cr_store_obj_at(store, id)->hash);
        replaced += insert(store, sorted[i]);
    }
    free(tmp);
    cr_store_restore_index_drop(store);
    return replaced;
}
