/* Offset allocator (see offset_alloc.h).
 *
 * Every range of [0, capacity) is a node: used (an allocation) or free.  Nodes
 * are linked in address order so a freed range can merge with free neighbours
 * in O(1); free nodes are also linked into one of 496 bins by the size class of
 * their size rounded DOWN.  A request searches from its size class rounded UP,
 * so the head of any non-empty bin found fits without looking at it.  Which
 * bins are non-empty is a two-level bitmask (64 groups of 8 bins), so the
 * search is two find-first-set instructions.
 *
 * Units are bytes throughout (uint64), so no granularity is needed: a granted
 * size equals the requested size and offsets have no alignment.  The 64-bit
 * classes cost 496 bins instead of 256, which still fit the 64 x 8 bitmask.
 *
 * Node storage is bounded at create: free ranges are always maximal
 * (merged), so there are at most live + 1 of them and 2 * max_allocations
 * + 1 nodes suffice.  It grows with use, doubling (realloc: glibc moves a
 * large block by remapping it, not copying), so a segment allowed 16 M
 * allocations costs a few KiB until it holds many; node indices, not
 * pointers, link the nodes, so they survive the move.  Indices released by
 * merges sit on a stack and are reused before new ones are handed out. */
#include "core/offset_alloc.h"

#include <assert.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "crescent/error.h"

/* 3 mantissa bits: bins are at most 12.5% apart, which bounds how far a
 * rounded-up request may over-ask relative to the range it could use. */
#define OA_MANTISSA_BITS 3u
#define OA_MANTISSA_ONE (1u << OA_MANTISSA_BITS)
#define OA_MANTISSA_MASK (OA_MANTISSA_ONE - 1u)
/* Classes 0..495: the largest, (15 << 60), is the floor of UINT64_MAX. */
#define OA_CLASS_COUNT 496u
#define OA_GROUP_COUNT 64u
#define OA_BINS_PER_GROUP 8u
#define OA_NONE UINT32_MAX
#define OA_MAX_ALLOCATIONS (1u << 30)
/* When no bin at or above the rounded-up class is non-empty, a range that fits
 * can only be in the class just below (it holds sizes up to 12.5% larger than
 * its floor).  Probing a bounded number of its nodes keeps alloc O(1) while
 * letting the last free range (e.g. the whole empty segment) be used fully. */
#define OA_FALLBACK_PROBES 8u
#define OA_NODES_INITIAL 64u

struct oa_node {
    uint64_t offset;
    uint64_t size;
    uint32_t bin_prev; /* free nodes only: neighbours in the bin's list */
    uint32_t bin_next;
    uint32_t addr_prev; /* all nodes: neighbours in address order */
    uint32_t addr_next;
    bool used;
};

struct cr_offset_alloc {
    uint64_t capacity_bytes;
    uint64_t free_bytes;
    uint32_t max_allocations;
    uint32_t allocation_count;
    uint32_t node_count;       /* the bound: 2 * max_allocations + 1 */
    uint32_t node_cap;         /* nodes and stack entries allocated */
    uint32_t node_high;        /* indices [0, node_high) handed out at least once */
    uint32_t free_index_count; /* entries on free_index_stack */
    uint64_t group_mask;       /* bit g: some bin of group g is non-empty */
    uint8_t bin_mask[OA_GROUP_COUNT];
    uint32_t bin_head[OA_GROUP_COUNT * OA_BINS_PER_GROUP];
    struct oa_node *nodes;
    uint32_t *free_index_stack;
    uint32_t claim_hint; /* the free rest of the last claim (a guess; checked) */
};

static int oa_alloc_tables(cr_offset_alloc *alloc, uint32_t cap);
static void oa_reset(cr_offset_alloc *alloc);
static uint32_t oa_find_bin_at_least(const cr_offset_alloc *alloc, uint32_t size_class);
static uint32_t oa_probe_bin(const cr_offset_alloc *alloc, uint32_t size_class,
                             uint64_t size_bytes);
static void oa_bin_insert(cr_offset_alloc *alloc, uint32_t index);
static void oa_bin_remove(cr_offset_alloc *alloc, uint32_t index);
static uint32_t oa_node_take(cr_offset_alloc *alloc);
static void oa_node_release(cr_offset_alloc *alloc, uint32_t index);
static uint32_t oa_carve(cr_offset_alloc *alloc, uint32_t index, uint64_t size_bytes);
static void oa_merge_next(cr_offset_alloc *alloc, uint32_t index);

/* ---- size classes ---- */

uint32_t cr_offset_alloc_size_class_floor(uint64_t size_bytes) {
    if (size_bytes < OA_MANTISSA_ONE) return (uint32_t)size_bytes;
    uint32_t high_bit = 63u - (uint32_t)__builtin_clzll(size_bytes);
    uint32_t shift = high_bit - OA_MANTISSA_BITS;
    uint32_t mantissa = (uint32_t)(size_bytes >> shift) & OA_MANTISSA_MASK;
    uint32_t size_class = ((shift + 1u) << OA_MANTISSA_BITS) | mantissa;
    assert(size_class < OA_CLASS_COUNT);
    return size_class;
}

uint32_t cr_offset_alloc_size_class_ceil(uint64_t size_bytes) {
    uint32_t size_class = cr_offset_alloc_size_class_floor(size_bytes);
    if (size_bytes < OA_MANTISSA_ONE) return size_class;
    uint32_t shift = (size_class >> OA_MANTISSA_BITS) - 1u;
    uint64_t dropped = size_bytes & ((UINT64_C(1) << shift) - 1u);
    /* A mantissa overflow carries into the exponent, which is the next class. */
    return dropped != 0 ? size_class + 1u : size_class;
}

uint64_t cr_offset_alloc_size_class_bytes(uint32_t size_class) {
    assert(size_class < OA_CLASS_COUNT);
    if (size_class < OA_MANTISSA_ONE) return size_class;
    uint32_t shift = (size_class >> OA_MANTISSA_BITS) - 1u;
    uint64_t mantissa = OA_MANTISSA_ONE | (size_class & OA_MANTISSA_MASK);
    return mantissa << shift;
}

/* ---- lifecycle ---- */

/* Grows node storage to `cap` entries (≤ node_count).  On failure the
 * storage already grown is kept and node_cap is unchanged. */
static int oa_alloc_tables(cr_offset_alloc *alloc, uint32_t cap) {
    assert(cap > alloc->node_cap && cap <= alloc->node_count);
    struct oa_node *nodes = realloc(alloc->nodes, (size_t)cap * sizeof(struct oa_node));
    if (nodes == NULL) return CR_ERR_NOMEM;
    alloc->nodes = nodes;
    uint32_t *stack = realloc(alloc->free_index_stack, (size_t)cap * sizeof(uint32_t));
    if (stack == NULL) return CR_ERR_NOMEM;
    alloc->free_index_stack = stack;
    alloc->node_cap = cap;
    return CR_OK;
}

/* Makes sure the next oa_node_take cannot need more storage: called before
 * an allocation changes anything (a carve takes at most one node). */
static int oa_reserve_node(cr_offset_alloc *alloc) {
    if (alloc->free_index_count > 0 || alloc->node_high < alloc->node_cap) return CR_OK;
    uint32_t cap = alloc->node_cap <= alloc->node_count / 2 ? alloc->node_cap * 2
                                                             : alloc->node_count;
    return oa_alloc_tables(alloc, cap);
}

static void oa_reset(cr_offset_alloc *alloc) {
    assert(alloc->node_count >= 1 && alloc->node_cap >= 1);
    for (uint32_t i = 0; i < OA_GROUP_COUNT * OA_BINS_PER_GROUP; i++) {
        alloc->bin_head[i] = OA_NONE;
    }
    alloc->free_index_count = 0;
    alloc->node_high = 0;
    uint32_t whole = oa_node_take(alloc);
    alloc->nodes[whole] = (struct oa_node){
        .offset = 0, .size = alloc->capacity_bytes, .bin_prev = OA_NONE, .bin_next = OA_NONE,
        .addr_prev = OA_NONE, .addr_next = OA_NONE, .used = false};
    oa_bin_insert(alloc, whole);
    alloc->free_bytes = alloc->capacity_bytes;
    alloc->claim_hint = whole;
}

int cr_offset_alloc_create(uint64_t size_bytes, uint32_t max_allocations,
                           cr_offset_alloc **out) {
    assert(out != NULL);
    if (size_bytes == 0 || max_allocations == 0 || max_allocations > OA_MAX_ALLOCATIONS)
        return CR_ERR_INVALID_PARAMS;
    cr_offset_alloc *alloc = calloc(1, sizeof(*alloc));
    if (alloc == NULL) return CR_ERR_NOMEM;
    alloc->capacity_bytes = size_bytes;
    alloc->max_allocations = max_allocations;
    /* ≤ 2^31 + 1, fits uint32 with OA_NONE to spare. */
    alloc->node_count = 2u * max_allocations + 1u;
    int status = oa_alloc_tables(
        alloc, alloc->node_count < OA_NODES_INITIAL ? alloc->node_count : OA_NODES_INITIAL);
    if (status != CR_OK) {
        cr_offset_alloc_destroy(alloc);
        return status;
    }
    oa_reset(alloc);
    *out = alloc;
    return CR_OK;
}

void cr_offset_alloc_destroy(cr_offset_alloc *alloc) {
    if (alloc == NULL) return;
    free(alloc->nodes);
    free(alloc->free_index_stack);
    free(alloc);
}

/* ---- alloc / free ---- */

int cr_offset_alloc_alloc(cr_offset_alloc *alloc, uint64_t size_bytes,
                          cr_offset_allocation *out) {
    assert(alloc != NULL && out != NULL);
    assert(alloc->allocation_count <= alloc->max_allocations);
    if (size_bytes == 0) return CR_ERR_INVALID_PARAMS;
    if (size_bytes > alloc->free_bytes || alloc->allocation_count == alloc->max_allocations)
        return CR_ERR_NO_AVAILABLE_HANDLE;
    if (oa_reserve_node(alloc) != CR_OK) return CR_ERR_NOMEM;
    uint32_t wanted = cr_offset_alloc_size_class_ceil(size_bytes);
    uint32_t bin = oa_find_bin_at_least(alloc, wanted);
    uint32_t index;
    if (bin != OA_NONE) {
        index = alloc->bin_head[bin];
    } else {
        index = oa_probe_bin(alloc, cr_offset_alloc_size_class_floor(size_bytes), size_bytes);
        if (index == OA_NONE) return CR_ERR_NO_AVAILABLE_HANDLE;
    }
    uint64_t offset = alloc->nodes[index].offset;
    index = oa_carve(alloc, index, size_bytes);
    alloc->allocation_count++;
    alloc->free_bytes -= size_bytes;
    *out = (cr_offset_allocation){.offset = offset, .size = size_bytes, .node = index};
    return CR_OK;
}

/* The free node whose range holds [offset, offset + size), or OA_NONE:
 * the last claim's rest first, then every node (a recycled index has size
 * 0, oa_node_release). */
static uint32_t oa_find_free_holding(const cr_offset_alloc *alloc, uint64_t offset,
                                     uint64_t size) {
    uint32_t h = alloc->claim_hint;
    for (int pass = 0; pass < 2; pass++) {
        uint32_t lo = pass == 0 ? h : 0, hi = pass == 0 ? h + 1 : alloc->node_high;
        for (uint32_t i = lo; i < hi && i < alloc->node_high; i++) {
            const struct oa_node *n = &alloc->nodes[i];
            if (n->used || n->size == 0 || offset < n->offset) continue;
            if (offset - n->offset <= n->size && size <= n->size - (offset - n->offset))
                return i;
        }
    }
    return OA_NONE;
}

int cr_offset_alloc_claim(cr_offset_alloc *alloc, uint64_t offset, uint64_t size_bytes,
                          cr_offset_allocation *out) {
    assert(alloc != NULL && out != NULL);
    if (size_bytes == 0) return CR_ERR_INVALID_PARAMS;
    if (alloc->allocation_count == alloc->max_allocations || size_bytes > alloc->free_bytes ||
        offset > alloc->capacity_bytes || size_bytes > alloc->capacity_bytes - offset)
        return CR_ERR_NO_AVAILABLE_HANDLE;
    uint32_t index = oa_find_free_holding(alloc, offset, size_bytes);
    if (index == OA_NONE) return CR_ERR_NO_AVAILABLE_HANDLE;
    /* Up to two new nodes (the free range before, the used range): both
     * reserved before anything changes. */
    if (oa_reserve_node(alloc) != CR_OK) return CR_ERR_NOMEM;
    uint32_t before = OA_NONE;
    if (alloc->nodes[index].offset < offset) {
        before = oa_node_take(alloc);
        if (oa_reserve_node(alloc) != CR_OK) {
            oa_node_release(alloc, before);
            return CR_ERR_NOMEM;
        }
    }
    struct oa_node *node = &alloc->nodes[index];
    if (before != OA_NONE) {
        uint64_t prefix = offset - node->offset;
        oa_bin_remove(alloc, index);
        alloc->nodes[before] = (struct oa_node){
            .offset = node->offset, .size = prefix, .bin_prev = OA_NONE, .bin_next = OA_NONE,
            .addr_prev = node->addr_prev, .addr_next = index, .used = false};
        if (node->addr_prev != OA_NONE) alloc->nodes[node->addr_prev].addr_next = before;
        node->addr_prev = before;
        node->offset = offset;
        node->size -= prefix;
        oa_bin_insert(alloc, before);
        oa_bin_insert(alloc, index);
    }
    uint32_t used = oa_carve(alloc, index, size_bytes);
    alloc->claim_hint = used == index ? alloc->nodes[index].addr_next : index;
    if (alloc->claim_hint == OA_NONE) alloc->claim_hint = 0;
    alloc->allocation_count++;
    alloc->free_bytes -= size_bytes;
    *out = (cr_offset_allocation){.offset = offset, .size = size_bytes, .node = used};
    return CR_OK;
}

void cr_offset_alloc_free(cr_offset_alloc *alloc, cr_offset_allocation allocation) {
    assert(alloc != NULL && allocation.node < alloc->node_high);
    uint32_t index = allocation.node;
    struct oa_node *node = &alloc->nodes[index];
    assert(node->used && node->offset == allocation.offset && node->size == allocation.size);
    node->used = false;
    alloc->allocation_count--;
    alloc->free_bytes += node->size;
    uint32_t prev = node->addr_prev;
    if (prev != OA_NONE && !alloc->nodes[prev].used) {
        /* Keep the lower node: it already has the merged range's offset. */
        oa_bin_remove(alloc, prev);
        oa_merge_next(alloc, prev);
        index = prev;
    }
    uint32_t next = alloc->nodes[index].addr_next;
    if (next != OA_NONE && !alloc->nodes[next].used) {
        oa_bin_remove(alloc, next);
        oa_merge_next(alloc, index);
    }
    oa_bin_insert(alloc, index);
}

/* largest_free_bytes must be a promise alloc keeps: the floor size of the top
 * bin always succeeds, and so does any node alloc's fallback probe would see. */
void cr_offset_alloc_get_stats(const cr_offset_alloc *alloc, cr_offset_alloc_stats *out) {
    assert(alloc != NULL && out != NULL);
    uint64_t largest = 0;
    if (alloc->group_mask != 0) {
        uint32_t group = 63u - (uint32_t)__builtin_clzll(alloc->group_mask);
        uint32_t bit = 31u - (uint32_t)__builtin_clz(alloc->bin_mask[group]);
        uint32_t top = group * OA_BINS_PER_GROUP + bit;
        largest = cr_offset_alloc_size_class_bytes(top);
        uint32_t index = alloc->bin_head[top];
        for (uint32_t i = 0; i < OA_FALLBACK_PROBES && index != OA_NONE; i++) {
            if (alloc->nodes[index].size > largest) largest = alloc->nodes[index].size;
            index = alloc->nodes[index].bin_next;
        }
    }
    *out = (cr_offset_alloc_stats){.capacity_bytes = alloc->capacity_bytes,
                                   .free_bytes = alloc->free_bytes,
                                   .largest_free_bytes = largest,
                                   .allocation_count = alloc->allocation_count};
}

/* ---- private helpers ---- */

/* Returns the lowest non-empty bin >= size_class, or OA_NONE. */
static uint32_t oa_find_bin_at_least(const cr_offset_alloc *alloc, uint32_t size_class) {
    assert(size_class <= OA_CLASS_COUNT);
    uint32_t group = size_class / OA_BINS_PER_GROUP;
    uint32_t in_group = alloc->bin_mask[group] & (0xffu << (size_class % OA_BINS_PER_GROUP));
    if (in_group != 0) return group * OA_BINS_PER_GROUP + (uint32_t)__builtin_ctz(in_group);
    if (group + 1u >= OA_GROUP_COUNT) return OA_NONE;
    uint64_t above = alloc->group_mask & (~UINT64_C(0) << (group + 1u));
    if (above == 0) return OA_NONE;
    uint32_t found = (uint32_t)__builtin_ctzll(above);
    assert(alloc->bin_mask[found] != 0);
    return found * OA_BINS_PER_GROUP + (uint32_t)__builtin_ctz(alloc->bin_mask[found]);
}

/* Returns a node of bin `size_class` holding >= size_bytes among its first
 * OA_FALLBACK_PROBES nodes, or OA_NONE. */
static uint32_t oa_probe_bin(const cr_offset_alloc *alloc, uint32_t size_class,
                             uint64_t size_bytes) {
    assert(size_class < OA_CLASS_COUNT && size_bytes > 0);
    uint32_t index = alloc->bin_head[size_class];
    for (uint32_t i = 0; i < OA_FALLBACK_PROBES && index != OA_NONE; i++) {
        if (alloc->nodes[index].size >= size_bytes) return index;
        index = alloc->nodes[index].bin_next;
    }
    return OA_NONE;
}

static void oa_bin_insert(cr_offset_alloc *alloc, uint32_t index) {
    struct oa_node *node = &alloc->nodes[index];
    assert(!node->used && node->size > 0);
    uint32_t bin = cr_offset_alloc_size_class_floor(node->size);
    uint32_t head = alloc->bin_head[bin];
    node->bin_prev = OA_NONE;
    node->bin_next = head;
    if (head != OA_NONE) alloc->nodes[head].bin_prev = index;
    alloc->bin_head[bin] = index;
    alloc->bin_mask[bin / OA_BINS_PER_GROUP] |= (uint8_t)(1u << (bin % OA_BINS_PER_GROUP));
    alloc->group_mask |= UINT64_C(1) << (bin / OA_BINS_PER_GROUP);
}

static void oa_bin_remove(cr_offset_alloc *alloc, uint32_t index) {
    struct oa_node *node = &alloc->nodes[index];
    assert(!node->used);
    uint32_t bin = cr_offset_alloc_size_class_floor(node->size);
    if (node->bin_prev != OA_NONE) {
        alloc->nodes[node->bin_prev].bin_next = node->bin_next;
    } else {
        assert(alloc->bin_head[bin] == index);
        alloc->bin_head[bin] = node->bin_next;
    }
    if (node->bin_next != OA_NONE) alloc->nodes[node->bin_next].bin_prev = node->bin_prev;
    if (alloc->bin_head[bin] == OA_NONE) {
        uint32_t group = bin / OA_BINS_PER_GROUP;
        alloc->bin_mask[group] &= (uint8_t)~(1u << (bin % OA_BINS_PER_GROUP));
        if (alloc->bin_mask[group] == 0) alloc->group_mask &= ~(UINT64_C(1) << group);
    }
}

/* Storage for the node was reserved (oa_reserve_node, or create's first
 * node): the 2 * max + 1 bound makes running out a bookkeeping bug. */
static uint32_t oa_node_take(cr_offset_alloc *alloc) {
    if (alloc->free_index_count > 0) {
        uint32_t index = alloc->free_index_stack[--alloc->free_index_count];
        /* The node the next take returns, for its write: frees leave the
         * stack in their own order, so it is anywhere among a million
         * nodes (a miss per allocation, the most of oa_carve's time under
         * batched puts), and one allocation ahead is warning enough. */
        if (alloc->free_index_count > 0)
            __builtin_prefetch(&alloc->nodes[alloc->free_index_stack[alloc->free_index_count - 1]],
                               1);
        return index;
    }
    assert(alloc->node_high < alloc->node_cap);
    return alloc->node_high++;
}

static void oa_node_release(cr_offset_alloc *alloc, uint32_t index) {
    assert(index < alloc->node_high);
    alloc->nodes[index].size = 0; /* not a live node: claims skip it */
    alloc->nodes[index].used = false;
    assert(alloc->free_index_count < alloc->node_high);
    alloc->free_index_stack[alloc->free_index_count++] = index;
}

/* Takes the first size_bytes of free node `index` as a used node and
 * returns that node.  The free rest keeps `index` and its bin place changes
 * only when its size class does: the free range a run of puts carves from
 * is one node, hot in cache, and the used node is only written here.  (The
 * other way round, the rest moved to a new node on every allocation: a cold
 * node read back at once, a cache and TLB miss per put once a segment holds
 * a million allocations, a quarter of a batch put's store time.) */
static uint32_t oa_carve(cr_offset_alloc *alloc, uint32_t index, uint64_t size_bytes) {
    struct oa_node *node = &alloc->nodes[index];
    assert(!node->used && node->size >= size_bytes);
    if (node->size == size_bytes) {
        oa_bin_remove(alloc, index);
        node->used = true;
        return index;
    }
    uint32_t old_bin = cr_offset_alloc_size_class_floor(node->size);
    uint32_t new_bin = cr_offset_alloc_size_class_floor(node->size - size_bytes);
    if (new_bin != old_bin) oa_bin_remove(alloc, index);
    uint32_t used = oa_node_take(alloc);
    alloc->nodes[used] = (struct oa_node){
        .offset = node->offset, .size = size_bytes, .bin_prev = OA_NONE, .bin_next = OA_NONE,
        .addr_prev = node->addr_prev, .addr_next = index, .used = true};
    if (node->addr_prev != OA_NONE) alloc->nodes[node->addr_prev].addr_next = used;
    node->addr_prev = used;
    node->offset += size_bytes;
    node->size -= size_bytes;
    if (new_bin != old_bin) oa_bin_insert(alloc, index);
    return used;
}

/* Absorbs the address-order successor of `index` (both free, both out of
 * their bins) into `index` and recycles the successor's node. */
static void oa_merge_next(cr_offset_alloc *alloc, uint32_t index) {
    struct oa_node *node = &alloc->nodes[index];
    uint32_t next = node->addr_next;
    assert(next != OA_NONE && !node->used && !alloc->nodes[next].used);
    assert(node->offset + node->size == alloc->nodes[next].offset);
    node->size += alloc->nodes[next].size;
    node->addr_next = alloc->nodes[next].addr_next;
    if (node->addr_next != OA_NONE) alloc->nodes[node->addr_next].addr_prev = index;
    oa_node_release(alloc, next);
}
