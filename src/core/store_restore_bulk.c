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

/* A memory replica to claim: its object, and the replica's index there
 * (nothing changes an object's replicas between the plan and the claims,
 * so the claim needs no scan).  A failed claim is kept, as it is, at the
 * front of its range's run (struct plan) for the end to drop. */
struct claim {
    uint64_t offset;
    uint32_t id;
    uint16_t segment;
    uint16_t r;
};

/* The finish's plan: every unclaimed memory replica, each segment's run at
 * v[start[s], end[s]), sorted by offset. */
struct cr_store_restore_plan {
    uint32_t segments;
    struct claim *v;
    uint64_t *start; /* segments + 1 */
    uint64_t *end;   /* segments */
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

/* ---- the plan (phase 1) --------------------------------------------------------- */

/* Collects every unclaimed memory replica into v, each segment's run at
 * start[seg] (filled up to end[seg]). */
static void collect(const cr_store *store, struct claim *v, uint64_t *end) {
    for (uint32_t id = 0; id < store->slab_high; id++) {
        const struct cr_store_obj *obj = cr_store_obj_at(store, id);
        if (obj->state != CR_OBJ_COMPLETE) continue;
        for (uint32_t r = 0; r < obj->replica_count; r++) {
            const struct cr_store_replica *rep = &cr_store_reps(obj)[r];
            if (!cr_store_rep_memory(rep) || rep->node != CR_STORE_NODE_UNCLAIMED) continue;
            v[end[rep->segment]++] = (struct claim){
                .offset = rep->offset, .id = id, .segment = rep->segment, .r = (uint16_t)r};
        }
    }
}

static void plan_free(struct cr_store_restore_plan *p) {
    if (p == NULL) return;
    free(p->v);
    free(p->start);
    free(p);
}

/* Sorts each segment's run by offset where it is not in order already. */
static int plan_sort(cr_store *store, struct cr_store_restore_plan *p, uint64_t longest) {
    struct claim *tmp = NULL;
    uint64_t *count = NULL;
    int rc = CR_OK;
    for (uint32_t s = 0; s < p->segments && rc == CR_OK; s++) {
        assert(p->end[s] <= p->start[s + 1]);
        uint64_t len = p->end[s] - p->start[s];
        if (len < 2 || ascending(p->v + p->start[s], len)) continue;
        if (tmp == NULL) {
            tmp = malloc(longest * sizeof(*tmp));
            count = malloc(65536 * sizeof(*count));
            if (tmp == NULL || count == NULL) {
                rc = cr_store_fail(store, CR_ERR_NOMEM, "no memory to order %llu replicas",
                                   (unsigned long long)len);
                break;
            }
        }
        radix_sort(p->v + p->start[s], tmp, len, count);
    }
    free(tmp);
    free(count);
    return rc;
}

int cr_store_restore_finish_prepare(cr_store *store, struct cr_store_restore_plan **plan) {
    assert(store != NULL && plan != NULL);
    struct cr_store_bulk *b = store->bulk;
    assert(b != NULL);
    *plan = NULL;
    (void)cr_store_restore_index_build(store); /* when the caller has not */
    uint32_t n = b->segments;
    struct cr_store_restore_plan *p = calloc(1, sizeof(*p));
    uint64_t *start = malloc(((size_t)n + 1) * 2 * sizeof(*start));
    if (p == NULL || start == NULL) {
        free(p);
        free(start);
        return cr_store_fail(store, CR_ERR_NOMEM, "out of memory");
    }
    *p = (struct cr_store_restore_plan){.segments = n, .start = start, .end = start + n + 1};
    uint64_t total = 0, longest = 0;
    for (uint32_t s = 0; s < n; s++) {
        p->start[s] = p->end[s] = total;
        total += b->placed[s];
        if (b->placed[s] > longest) longest = b->placed[s];
    }
    p->start[n] = total;
    p->v = total > 0 ? malloc(total * sizeof(*p->v)) : NULL;
    if (total > 0 && p->v == NULL) {
        plan_free(p);
        return cr_store_fail(store, CR_ERR_NOMEM, "no memory to order %llu replicas",
                             (unsigned long long)total);
    }
    collect(store, p->v, p->end);
    int rc = plan_sort(store, p, longest);
    if (rc != CR_OK) {
        plan_free(p);
        return rc;
    }
    *plan = p;
    return CR_OK;
}

uint32_t cr_store_restore_plan_segments(const struct cr_store_restore_plan *plan) {
    assert(plan != NULL);
    return plan->segments;
}

uint64_t cr_store_restore_plan_claims(const struct cr_store_restore_plan *plan, uint32_t seg) {
    assert(plan != NULL && seg < plan->segments);
    return plan->end[seg] - plan->start[seg];
}

/* ---- the claims (phase 2) ------------------------------------------------------- */

#define CLAIM_AHEAD 8u /* claims: objects are visited in offset order, at random */

void cr_store_restore_finish_claims(cr_store *store, struct cr_store_restore_plan *plan,
                                    uint32_t seg_lo, uint32_t seg_hi,
                                    struct cr_store_restore_part *part) {
    assert(store != NULL && plan != NULL && part != NULL);
    assert(seg_lo <= seg_hi && seg_hi <= plan->segments);
    *part = (struct cr_store_restore_part){.seg_lo = seg_lo, .seg_hi = seg_hi};
    /* Failed claims are moved to the front of the range's runs: the k-th
     * failure goes to v[start[seg_lo] + k], a claim already read (and of
     * this range, so no other caller's). */
    uint64_t failed_at = plan->start[seg_lo];
    for (uint32_t s = seg_lo; s < seg_hi; s++) {
        struct cr_store_segment *seg = &store->segments[s];
        uint64_t end = plan->end[s];
        for (uint64_t i = plan->start[s]; i < end; i++) {
            if (i + CLAIM_AHEAD < end) {
                const struct cr_store_obj *next =
                    cr_store_obj_at(store, plan->v[i + CLAIM_AHEAD].id);
                __builtin_prefetch(next, 1);
                /* The inline replica's line, not cr_store_reps(next): that
                 * would load the object now. */
                __builtin_prefetch(&next->rep_inline, 1);
            }
            const struct claim c = plan->v[i];
            struct cr_store_obj *obj = cr_store_obj_at(store, c.id);
            assert(obj->state == CR_OBJ_COMPLETE && c.r < obj->replica_count);
            struct cr_store_replica *rep = &cr_store_reps(obj)[c.r];
            assert(rep->segment == s && rep->node == CR_STORE_NODE_UNCLAIMED);
            cr_offset_allocation a;
            if (cr_offset_alloc_claim(seg->alloc, rep->offset, rep->size, &a) == CR_OK) {
                rep->node = a.node; /* this replica's own field: no other range's */
                seg->used_bytes += a.size;
                part->bytes += a.size;
                part->claimed++;
            } else {
                /* Overlapping a range claimed before it, or outside the
                 * segment: damaged or inconsistent files, and no later
                 * record fixed it.  Dropped at the end. */
                plan->v[failed_at + part->failed++] = c;
            }
        }
    }
}

/* ---- the end (phase 3) ---------------------------------------------------------- */

/* Drops the replica that failed claim c (and its object if that was its
 * last).  Found by segment, not c.r: an earlier drop may have moved it. */
static void drop_one(cr_store *store, const struct claim *c,
                     struct cr_store_restore_dropped *dropped) {
    struct cr_store_obj *obj = cr_store_obj_at(store, c->id);
    assert(obj->state == CR_OBJ_COMPLETE);
    uint32_t r = 0;
    while (r < obj->replica_count &&
           !(cr_store_rep_memory(&cr_store_reps(obj)[r]) &&
             cr_store_reps(obj)[r].segment == c->segment))
        r++;
    assert(r < obj->replica_count && cr_store_reps(obj)[r].node == CR_STORE_NODE_UNCLAIMED);
    dropped->replicas++;
    cr_store_tenant_charge(store, obj->tenant, cr_store_rep_charge(obj, r), false);
    cr_store_reps(obj)[r] = cr_store_reps(obj)[--obj->replica_count];
    cr_store_obj_reps_shrink(obj);
    store->replica_count--;
    if (obj->replica_count > 0) return;
    cr_store_obj_free(store, c->id); /* the sink is off: no event */
    dropped->objects++;
}

void cr_store_restore_finish_end(cr_store *store, struct cr_store_restore_plan *plan,
                                 const struct cr_store_restore_part *parts, uint32_t n,
                                 struct cr_store_restore_dropped *dropped) {
    assert(store != NULL && store->bulk != NULL && plan != NULL && dropped != NULL);
    assert(n == 0 || parts != NULL);
    memset(dropped, 0, sizeof(*dropped));
    uint32_t covered = 0; /* the parts cover every segment once, in order */
    for (uint32_t k = 0; k < n; k++) {
        const struct cr_store_restore_part *part = &parts[k];
        assert(part->seg_lo == covered && part->seg_hi >= part->seg_lo);
        covered = part->seg_hi;
        store->used_bytes += part->bytes;
        uint64_t at = plan->start[part->seg_lo];
        for (uint64_t i = 0; i < part->failed; i++) drop_one(store, &plan->v[at + i], dropped);
    }
    assert(covered == plan->segments);
    (void)covered;
    plan_free(plan);
    bulk_end(store);
}

int cr_store_restore_finish(cr_store *store, struct cr_store_restore_dropped *dropped) {
    assert(store != NULL && dropped != NULL);
    memset(dropped, 0, sizeof(*dropped));
    struct cr_store_restore_plan *plan;
    int rc = cr_store_restore_finish_prepare(store, &plan);
    if (rc != CR_OK) return rc;
    struct cr_store_restore_part part;
    cr_store_restore_finish_claims(store, plan, 0, plan->segments, &part);
    cr_store_restore_finish_end(store, plan, &part, 1, dropped);
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
