/* A bulk restore: replicas placed unclaimed, claimed at the end in
 * ascending offset order (store_restore.h). */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "core/store_internal.h"
#include "core/store_restore.h"
#include "crescent/error.h"

struct cr_store_bulk {
    struct cr_store_event_sink sink; /* the store's, put back at the end */
    bool file_hook_muted;            /* the same */
    uint32_t segments;               /* max_segments */
    /* Memory replicas placed unclaimed on each segment id: an upper bound
     * of those still in the store (removals do not count down), which
     * sizes each segment's run of the finish's array. */
    uint64_t placed[];
};

/* A memory replica to claim: found again in its object by segment and
 * offset (an object holds at most one memory replica per segment). */
struct claim {
    uint64_t offset;
    uint32_t id;
    uint32_t segment;
};

int cr_store_restore_begin(cr_store *store) {
    assert(store != NULL);
    if (store->bulk != NULL)
        return cr_store_fail(store, CR_ERR_INVALID_PARAMS, "a bulk restore is under way");
    uint32_t n = store->cfg.max_segments;
    struct cr_store_bulk *b = calloc(1, sizeof(*b) + (size_t)n * sizeof(b->placed[0]));
    if (b == NULL) return cr_store_fail(store, CR_ERR_NOMEM, "out of memory");
    b->sink = store->sink;
    b->file_hook_muted = store->file_hook_muted;
    b->segments = n;
    store->sink = (struct cr_store_event_sink){0};
    store->file_hook_muted = true;
    store->bulk = b;
    return CR_OK;
}

bool cr_store_restore_bulk(const cr_store *store) {
    assert(store != NULL);
    return store->bulk != NULL;
}

void cr_store_bulk_note(cr_store *store, uint32_t seg) {
    assert(store->bulk != NULL && seg < store->bulk->segments);
    store->bulk->placed[seg]++;
}

static void bulk_end(cr_store *store) {
    struct cr_store_bulk *b = store->bulk;
    store->sink = b->sink;
    store->file_hook_muted = b->file_hook_muted;
    store->bulk = NULL;
    free(b);
}

/* ---- sorting one segment's claims by offset ----------------------------------- */

static bool ascending(const struct claim *v, uint64_t n) {
    for (uint64_t i = 1; i < n; i++)
        if (v[i].offset < v[i - 1].offset) return false;
    return true;
}

/* LSD radix sort on the offset, 16 bits a pass, skipping the digits every
 * claim shares (offsets within one segment rarely use more than 40 bits):
 * stable, so equal offsets keep slot order.  tmp holds n claims. */
static void radix_sort(struct claim *v, struct claim *tmp, uint64_t n, uint64_t *count) {
    uint64_t all_or = 0, all_and = UINT64_MAX;
    for (uint64_t i = 0; i < n; i++) {
        all_or |= v[i].offset;
        all_and &= v[i].offset;
    }
    uint64_t varying = all_or ^ all_and;
    for (unsigned shift = 0; shift < 64; shift += 16) {
        if (((varying >> shift) & 0xffffu) == 0) continue;
        memset(count, 0, 65536 * sizeof(*count));
        for (uint64_t i = 0; i < n; i++) count[(v[i].offset >> shift) & 0xffffu]++;
        uint64_t sum = 0;
        for (uint32_t d = 0; d < 65536; d++) {
            uint64_t c = count[d];
            count[d] = sum;
            sum += c;
        }
        for (uint64_t i = 0; i < n; i++) tmp[count[(v[i].offset >> shift) & 0xffffu]++] = v[i];
        memcpy(v, tmp, n * sizeof(*v));
    }
}

/* ---- claiming ----------------------------------------------------------------- */

/* The replica of obj that c stands for, unclaimed; -1 when it is gone (its
 * object was removed by a drop earlier in the finish). */
static int replica_of(const struct cr_store_obj *obj, const struct claim *c) {
    if (obj->state != CR_OBJ_COMPLETE) return -1;
    for (uint32_t r = 0; r < obj->replica_count; r++) {
        const struct cr_store_replica *rep = &cr_store_reps(obj)[r];
        if (cr_store_rep_memory(rep) && rep->segment == c->segment &&
            rep->node == CR_STORE_NODE_UNCLAIMED && rep->offset == c->offset)
            return (int)r;
    }
    return -1;
}

/* Claims c's range, or drops the replica (and the object if that was its
 * last). */
static void claim_one(cr_store *store, const struct claim *c,
                      struct cr_store_restore_dropped *dropped) {
    struct cr_store_obj *obj = cr_store_obj_at(store, c->id);
    int r = replica_of(obj, c);
    if (r < 0) return;
    struct cr_store_replica *rep = &cr_store_reps(obj)[r];
    struct cr_store_segment *seg = &store->segments[c->segment];
    cr_offset_allocation a;
    if (cr_offset_alloc_claim(seg->alloc, rep->offset, rep->size, &a) == CR_OK) {
        rep->node = a.node;
        seg->used_bytes += a.size;
        store->used_bytes += a.size;
        return;
    }
    /* Overlapping a range claimed before it, or outside the segment:
     * damaged or inconsistent files, and no later record fixed it. */
    dropped->replicas++;
    cr_store_tenant_charge(store, obj->tenant, cr_store_rep_charge(obj, (uint32_t)r), false);
    cr_store_reps(obj)[r] = cr_store_reps(obj)[--obj->replica_count];
    cr_store_obj_reps_shrink(obj);
    store->replica_count--;
    if (obj->replica_count > 0) return;
    cr_store_obj_free(store, c->id); /* the sink is off: no event */
    dropped->objects++;
}

/* Collects every unclaimed memory replica into v, each segment's run at
 * start[seg] (filled up to end[seg]). */
static void collect(const cr_store *store, struct claim *v, uint64_t *end) {
    for (uint32_t id = 0; id < store->slab_high; id++) {
        const struct cr_store_obj *obj = cr_store_obj_at(store, id);
        if (obj->state != CR_OBJ_COMPLETE) continue;
        for (uint32_t r = 0; r < obj->replica_count; r++) {
            const struct cr_store_replica *rep = &cr_store_reps(obj)[r];
            if (!cr_store_rep_memory(rep) || rep->node != CR_STORE_NODE_UNCLAIMED) continue;
            v[end[rep->segment]++] =
                (struct claim){.offset = rep->offset, .id = id, .segment = rep->segment};
        }
    }
}

#define CLAIM_AHEAD 8u /* claims: objects are visited in offset order, at random */

int cr_store_restore_finish(cr_store *store, struct cr_store_restore_dropped *dropped) {
    assert(store != NULL && dropped != NULL);
    struct cr_store_bulk *b = store->bulk;
    assert(b != NULL);
    memset(dropped, 0, sizeof(*dropped));
    (void)cr_store_restore_index_build(store); /* when the caller has not */
    uint32_t n = b->segments;
    uint64_t *start = malloc(((size_t)n + 1) * 2 * sizeof(*start));
    if (start == NULL) return cr_store_fail(store, CR_ERR_NOMEM, "out of memory");
    uint64_t *end = start + n + 1, total = 0, longest = 0;
    for (uint32_t s = 0; s < n; s++) {
        start[s] = end[s] = total;
        total += b->placed[s];
        if (b->placed[s] > longest) longest = b->placed[s];
    }
    start[n] = total;
    struct claim *v = total > 0 ? malloc(total * sizeof(*v)) : NULL;
    if (total > 0 && v == NULL) {
        free(start);
        return cr_store_fail(store, CR_ERR_NOMEM, "no memory to order %llu replicas",
                             (unsigned long long)total);
    }
    collect(store, v, end);
    struct claim *tmp = NULL;
    uint64_t *count = NULL;
    for (uint32_t s = 0; s < n; s++) {
        assert(end[s] <= start[s + 1]);
        uint64_t len = end[s] - start[s];
        if (len < 2 || ascending(v + start[s], len)) continue;
        if (tmp == NULL) {
            tmp = malloc(longest * sizeof(*tmp));
            count = malloc(65536 * sizeof(*count));
            if (tmp == NULL || count == NULL) {
                free(tmp);
                free(count);
                free(v);
                free(start);
                return cr_store_fail(store, CR_ERR_NOMEM, "no memory to order %llu replicas",
                                     (unsigned long long)len);
            }
        }
        radix_sort(v + start[s], tmp, len, count);
    }
    free(tmp);
    free(count);
    for (uint32_t s = 0; s < n; s++)
        for (uint64_t i = start[s]; i < end[s]; i++) {
            if (i + CLAIM_AHEAD < end[s]) {
                const struct cr_store_obj *next = cr_store_obj_at(store, v[i + CLAIM_AHEAD].id);
                __builtin_prefetch(next, 1);
                /* The inline replica's line, not cr_store_reps(next): that
                 * would load the object now. */
                __builtin_prefetch(&next->rep_inline, 1);
            }
            claim_one(store, &v[i], dropped);
        }
    free(v);
    free(start);
    bulk_end(store);
    return CR_OK;
}

void cr_store_restore_abort(cr_store *store) {
    assert(store != NULL);
    if (store->bulk == NULL) return;
    (void)cr_store_restore_index_build(store); /* the frees below delete from it */
    for (uint32_t id = 0; id < store->slab_high; id++)
        if (cr_store_obj_at(store, id)->state != CR_OBJ_FREE) cr_store_obj_free(store, id);
    bulk_end(store);
}
