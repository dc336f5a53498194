/* Store master core: segments (mount, remount, unmount, replica release,
 * host lookups) and the views of usage, segments and stats. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "core/store_internal.h"
#include "core/store_ssd_park.h"
#include "crescent/error.h"

uint32_t cr_store_mounted_count(const cr_store *store) {
    assert(store != NULL);
    return store->mounted_count;
}

int cr_store_segment_lookup(const cr_store *store, const char *name) {
    assert(store != NULL && name != NULL);
    uint64_t h = XXH3_64bits(name, strlen(name));
    for (uint32_t i = 0; i < store->mounted_count; i++) {
        const struct cr_store_segment *seg = &store->segments[store->mounted[i]];
        if (seg->name_hash == h && strcmp(seg->name, name) == 0) return (int)store->mounted[i];
    }
    return -1;
}

static bool string_ok(const char *s, size_t max) {
    return s != NULL && s[0] != '\0' && strnlen(s, max + 1) <= max;
}

static int segment_check_params(cr_store *store, const struct cr_uuid *client,
                                const struct cr_store_segment_params *p) {
    if (!string_ok(p->name, CR_STORE_NAME_LEN_MAX))
        return cr_store_fail(store, CR_ERR_INVALID_PARAMS, "segment name empty or too long");
    if (!string_ok(p->endpoint, CR_STORE_ENDPOINT_LEN_MAX))
        return cr_store_fail(store, CR_ERR_INVALID_PARAMS, "endpoint empty or too long");
    /* "none": mounted for metadata only (crescent-bench --mount-fake): no
     * data path serves it, and the dashboard marks it and leaves it out of
     * the capacity it shows. */
    if (p->protocol == NULL || (strcmp(p->protocol, "tcp") != 0 && strcmp(p->protocol, "rdma") != 0 &&
                                strcmp(p->protocol, "none") != 0))
        return cr_store_fail(store, CR_ERR_INVALID_PARAMS, "protocol must be tcp, rdma or none");
    if (p->size == 0) return cr_store_fail(store, CR_ERR_INVALID_PARAMS, "segment size is 0");
    if (p->size < store->cfg.min_segment_size_bytes)
        return cr_store_fail(store, CR_ERR_INVALID_PARAMS,
                             "segment %s is %llu bytes, smaller than %llu "
                             "(min_segment_size_bytes, --min-segment-size-bytes)",
                             p->name, (unsigned long long)p->size,
                             (unsigned long long)store->cfg.min_segment_size_bytes);
    if (p->base + p->size < p->base)
        return cr_store_fail(store, CR_ERR_INVALID_PARAMS, "segment base + size overflows");
    if (cr_store_segment_lookup(store, p->name) >= 0)
        return cr_store_fail(store, CR_ERR_SEGMENT_ALREADY_EXISTS, "segment %s already mounted",
                             p->name);
    uint32_t owned = 0;
    for (uint32_t i = 0; i < store->mounted_count; i++) {
        const struct cr_store_segment *seg = &store->segments[store->mounted[i]];
        if (!cr_uuid_equal(&seg->owner, client)) continue;
        owned++;
        if (p->base < seg->base + seg->size && seg->base < p->base + p->size)
            return cr_store_fail(store, CR_ERR_INVALID_PARAMS,
                                 "segment %s overlaps segment %s of the same client", p->name,
                                 seg->name);
    }
    if (owned >= store->cfg.max_segments_per_client)
        return cr_store_fail(store, CR_ERR_NOMEM,
                             "this client has %u segments mounted (max_segments_per_client): "
                             "unmount one, or raise --max-segments-per-client",
                             owned);
    if (store->mounted_count == store->cfg.max_segments)
        return cr_store_fail(store, CR_ERR_NOMEM, "segment table full (max_segments)");
    return CR_OK;
}

static uint32_t segment_free_id(const cr_store *store) {
    for (uint32_t i = 0; i < store->cfg.max_segments; i++) {
        if (!store->segments[i].in_use) return i;
    }
    assert(!"segment table full after the check");
    return CR_STORE_NONE;
}

int cr_store_mount_segment(cr_store *store, const struct cr_uuid *client,
                           const struct cr_store_segment_params *p, uint64_t now_ms) {
    assert(store != NULL && client != NULL && p != NULL);
    int rc = segment_check_params(store, client, p);
    if (rc != CR_OK) return rc;
    struct cr_store_segment seg = {.base = p->base, .size = p->size, .owner = *client};
    seg.name = strdup(p->name);
    seg.endpoint = strdup(p->endpoint);
    seg.protocol = strdup(p->protocol);
    rc = (seg.name && seg.endpoint && seg.protocol) ? CR_OK : CR_ERR_NOMEM;
    if (rc == CR_OK)
        rc = cr_offset_alloc_create(p->size, store->cfg.max_allocations_per_segment, &seg.alloc);
    if (rc == CR_OK) rc = cr_store_client_touch(store, client, now_ms);
    if (rc != CR_OK) {
        if (seg.alloc != NULL) cr_offset_alloc_destroy(seg.alloc);
        free(seg.name);
        free(seg.endpoint);
        free(seg.protocol);
        return cr_store_fail(store, rc, "cannot mount segment %s: %s", p->name,
                             cr_strerror(rc));
    }
    uint32_t id = segment_free_id(store);
    seg.name_hash = XXH3_64bits(seg.name, strlen(seg.name));
    seg.in_use = true;
    seg.mounted_pos = store->mounted_count;
    store->segments[id] = seg;
    store->mounted[store->mounted_count++] = id;
    store->capacity_bytes += p->size;
    return CR_OK;
}

int cr_store_remount_segment(cr_store *store, const struct cr_uuid *client,
                             const struct cr_store_segment_params *p, uint64_t now_ms) {
    assert(store != NULL && client != NULL && p != NULL);
    int id = (p->name != NULL) ? cr_store_segment_lookup(store, p->name) : -1;
    if (id < 0) return cr_store_mount_segment(store, client, p, now_ms);
    const struct cr_store_segment *seg = &store->segments[id];
    bool same = cr_uuid_equal(&seg->owner, client) && seg->base == p->base &&
                seg->size == p->size && p->endpoint != NULL &&
                strcmp(seg->endpoint, p->endpoint) == 0 && p->protocol != NULL &&
                strcmp(seg->protocol, p->protocol) == 0;
    if (!same)
        return cr_store_fail(store, CR_ERR_SEGMENT_ALREADY_EXISTS,
                             "segment %s is mounted with other parameters or owner", p->name);
    return cr_store_client_touch(store, client, now_ms);
}

int cr_store_segment_set_key(cr_store *store, const char *name, const uint8_t key[32]) {
    assert(store != NULL && name != NULL && key != NULL);
    int id = cr_store_segment_lookup(store, name);
    if (id < 0) return cr_store_fail(store, CR_ERR_SEGMENT_NOT_FOUND, "no segment %s", name);
    struct cr_store_segment *seg = &store->segments[id];
    memcpy(seg->cap_key, key, sizeof(seg->cap_key));
    seg->has_cap_key = true;
    return CR_OK;
}

int cr_store_segment_set_ssd_capacity(cr_store *store, const char *name, uint64_t bytes) {
    assert(store != NULL && name != NULL);
    int id = cr_store_segment_lookup(store, name);
    if (id < 0)
        return cr_store_fail(store, CR_ERR_SEGMENT_NOT_FOUND, "segment %s is not mounted", name);
    store->segments[id].ssd_capacity = bytes;
    return CR_OK;
}

/* Frees the segment's own resources; callers dropped its replicas first. */
void cr_store_segment_release(cr_store *store, uint32_t id) {
    struct cr_store_segment *seg = &store->segments[id];
    assert(seg->in_use);
    cr_offset_alloc_destroy(seg->alloc);
    free(seg->name);
    free(seg->endpoint);
    free(seg->protocol);
    memset(seg, 0, sizeof(*seg));
}

int cr_store_unmount_segment(cr_store *store, const struct cr_uuid *client, const char *name,
                             uint64_t *freed_objects) {
    assert(store != NULL);
    if (freed_objects != NULL) *freed_objects = 0;
    int found = (name != NULL) ? cr_store_segment_lookup(store, name) : -1;
    if (found < 0)
        return cr_store_fail(store, CR_ERR_SEGMENT_NOT_FOUND, "segment %s is not mounted",
                             name ? name : "(null)");
    uint32_t id = (uint32_t)found;
    struct cr_store_segment *seg = &store->segments[id];
    if (client != NULL && !cr_uuid_equal(&seg->owner, client))
        return cr_store_fail(store, CR_ERR_ILLEGAL_CLIENT, "segment %s belongs to another client",
                             name);
    uint64_t freed = 0;
    cr_store_ssd_park_segment(store, id); /* its SSD's files, for the server's return */
    cr_store_ssd_park_mute(store, true);
    cr_store_obj_drop_segment(store, id, &freed);
    cr_store_ssd_park_mute(store, false);
    cr_store_discarded_drop_segment(store, id);
    assert(seg->used_bytes == 0);
    store->capacity_bytes -= seg->size;
    uint32_t pos = seg->mounted_pos;
    uint32_t last = store->mounted[--store->mounted_count];
    store->mounted[pos] = last;
    store->segments[last].mounted_pos = pos;
    cr_store_segment_release(store, id);
    if (freed_objects != NULL) *freed_objects = freed;
    return CR_OK;
}

/* Hands an allocation back to its segment and keeps the byte counters.
 * A disk replica frees its path; neither it nor a local_disk replica holds
 * segment space. */
void cr_store_replica_release(cr_store *store, const struct cr_store_replica *r) {
    assert(store != NULL && r != NULL && r->medium < CR_MEDIUM_COUNT);
    if (r->medium != CR_MEDIUM_MEMORY) {
        assert(store->medium_replicas[r->medium] > 0 &&
               store->medium_bytes[r->medium] >= r->size);
        store->medium_replicas[r->medium]--;
        store->medium_bytes[r->medium] -= r->size;
        if (r->medium != CR_MEDIUM_DISK) return;
        if (store->file_hook != NULL && !store->file_hook_muted)
            store->file_hook(store->file_hook_ctx, r->path);
        free(r->path);
        return;
    }
    if (r->node == CR_STORE_NODE_UNCLAIMED) return; /* a bulk restore's: no range held yet */
    struct cr_store_segment *seg = &store->segments[r->segment];
    assert(seg->in_use && seg->used_bytes >= r->size);
    cr_offset_alloc_free(seg->alloc,
                         (cr_offset_allocation){.offset = r->offset, .size = r->size,
                                                .node = r->node});
    seg->used_bytes -= r->size;
    store->used_bytes -= r->size;
}

/* "host" of "host:port", "v6" of "[v6]:port", the whole string otherwise. */
static void endpoint_host(const char *ep, const char **host, size_t *len) {
    if (ep[0] == '[') {
        const char *close = strchr(ep, ']');
        if (close != NULL) {
            *host = ep + 1;
            *len = (size_t)(close - ep - 1);
            return;
        }
    }
    const char *colon = strrchr(ep, ':');
    bool one_colon = colon != NULL && strchr(ep, ':') == colon;
    *host = ep;
    *len = one_colon ? (size_t)(colon - ep) : strlen(ep);
}

static bool host_seen_before(const cr_store *store, const struct cr_uuid *client, uint32_t upto,
                             const char *host, size_t len) {
    for (uint32_t j = 0; j < upto; j++) {
        const struct cr_store_segment *seg = &store->segments[store->mounted[j]];
        if (!cr_uuid_equal(&seg->owner, client)) continue;
        const char *h;
        size_t l;
        endpoint_host(seg->endpoint, &h, &l);
        if (l == len && memcmp(h, host, len) == 0) return true;
    }
    return false;
}

int cr_store_batch_query_ip(const cr_store *store, const struct cr_uuid *ids, size_t n,
                            void (*fn)(void *ctx, size_t index, const char *host,
                                       size_t host_len),
                            void *ctx) {
    assert(store != NULL && fn != NULL);
    assert(ids != NULL || n == 0);
    for (size_t k = 0; k < n; k++) {
        for (uint32_t i = 0; i < store->mounted_count; i++) {
            const struct cr_store_segment *seg = &store->segments[store->mounted[i]];
            if (!cr_uuid_equal(&seg->owner, &ids[k])) continue;
            const char *host;
            size_t len;
            endpoint_host(seg->endpoint, &host, &len);
            if (!host_seen_before(store, &ids[k], i, host, len)) fn(ctx, k, host, len);
        }
    }
    return CR_OK;
}

/* ---- usage, listing, stats -------------------------------------------------- */

void cr_store_usage(const cr_store *store, struct cr_store_usage *out) {
    assert(store != NULL && out != NULL);
    assert(store->used_bytes <= store->capacity_bytes);
    out->capacity_bytes = store->capacity_bytes;
    /* Space offloads in flight will free is as good as free to eviction. */
    uint64_t pending = store->offload_pending_bytes < store->used_bytes
                           ? store->offload_pending_bytes : store->used_bytes;
    out->used_bytes = store->used_bytes - pending;
    out->ratio = store->capacity_bytes
                     ? (double)out->used_bytes / (double)store->capacity_bytes
                     : 0.0;
    out->objects = store->object_count;
    out->max_objects = store->cfg.max_objects;
    uint32_t allocations = 0; /* of the busiest segment */
    for (uint32_t i = 0; i < store->mounted_count; i++) {
        cr_offset_alloc_stats st;
        cr_offset_alloc_get_stats(store->segments[store->mounted[i]].alloc, &st);
        if (st.allocation_count > allocations) allocations = st.allocation_count;
    }
    double objects = (double)store->object_count / (double)store->cfg.max_objects;
    double segment = (double)allocations / (double)store->cfg.max_allocations_per_segment;
    out->count_ratio = objects > segment ? objects : segment;
}

static void segment_view(const cr_store *store, uint32_t id, struct cr_store_segment_view *out) {
    const struct cr_store_segment *seg = &store->segments[id];
    cr_offset_alloc_stats st;
    cr_offset_alloc_get_stats(seg->alloc, &st);
    *out = (struct cr_store_segment_view){
        .segment_id = id, .name = seg->name, .endpoint = seg->endpoint,
        .protocol = seg->protocol, .owner = seg->owner, .base = seg->base,
        .size = seg->size, .used_bytes = seg->used_bytes,
        .allocation_count = st.allocation_count, .ssd_capacity = seg->ssd_capacity,
        .awaiting_owner = cr_store_client_awaiting(store, &seg->owner),
        .draining = seg->draining};
}

bool cr_store_segment_next(const cr_store *store, uint32_t *cursor,
                           struct cr_store_segment_view *out) {
    assert(store != NULL && cursor != NULL && out != NULL);
    for (; *cursor < store->cfg.max_segments; (*cursor)++) {
        if (!store->segments[*cursor].in_use) continue;
        segment_view(store, *cursor, out);
        (*cursor)++;
        return true;
    }
    return false;
}

int cr_store_segment_find(const cr_store *store, const char *name,
                          struct cr_store_segment_view *out) {
    assert(store != NULL && out != NULL);
    int id = (name != NULL) ? cr_store_segment_lookup(store, name) : -1;
    if (id < 0) return CR_ERR_SEGMENT_NOT_FOUND;
    segment_view(store, (uint32_t)id, out);
    return CR_OK;
}

/* What cr_store_get_stats counts object by object (exactly for small
 * tables, by the census walk past CR_STORE_STATS_EXACT_SLOTS). */
struct census {
    uint64_t leased, soft_pinned, mem_cached, file_cached;
};

static void census_add(const cr_store *store, uint32_t id, uint64_t now_ms, struct census *c) {
    const struct cr_store_obj *obj = cr_store_obj_at(store, id);
    if (obj->state == CR_OBJ_FREE) return;
    c->leased += cr_store_obj_leased(obj, now_ms);
    c->soft_pinned += cr_store_obj_soft_pinned(store, obj, now_ms);
    if (obj->state != CR_OBJ_COMPLETE) return;
    bool mem = false, file = false;
    for (uint32_t r = 0; r < obj->replica_count; r++) {
        const struct cr_store_replica *rep = &cr_store_reps(obj)[r];
        if (rep->status != CR_REPLICA_COMPLETE) continue;
        if (rep->medium == CR_MEDIUM_MEMORY) mem = true;
        else if (rep->medium == CR_MEDIUM_DISK || rep->medium == CR_MEDIUM_LOCAL_DISK) file = true;
    }
    c->mem_cached += mem;
    c->file_cached += file;
}

void cr_store_get_stats(const cr_store *store, uint64_t now_ms, struct cr_store_stats *out) {
    assert(store != NULL && out != NULL);
    *out = store->counters;
    out->capacity_bytes = store->capacity_bytes;
    out->used_bytes = store->used_bytes;
    out->object_count = store->object_count;
    out->inflight_puts = store->inflight_count;
    out->replica_count = store->replica_count;
    out->segment_count = store->mounted_count;
    out->client_count = store->client_count;
    out->tenant_count = store->tenant_count;
    out->discarded_parked = store->discarded_count;
    out->index_slots = (uint64_t)store->table_mask + 1;
    out->max_objects = store->cfg.max_objects;
    out->disk_replicas = store->medium_replicas[CR_MEDIUM_DISK];
    out->disk_bytes = store->medium_bytes[CR_MEDIUM_DISK];
    out->disk_evictions = store->counters.disk_evictions;
    out->local_disk_replicas = store->medium_replicas[CR_MEDIUM_LOCAL_DISK];
    out->local_disk_bytes = store->medium_bytes[CR_MEDIUM_LOCAL_DISK];
    out->ssd_capacity_bytes = 0;
    for (uint32_t i = 0; i < store->mounted_count; i++)
        out->ssd_capacity_bytes += store->segments[store->mounted[i]].ssd_capacity;
    out->discarded_put_bytes = 0;
    for (uint32_t i = 0; i < store->discarded_count; i++)
        if (store->discarded[i].put != 0) out->discarded_put_bytes += store->discarded[i].replica.size;
    out->active_leases = store->lease_census;
    out->soft_pinned = store->soft_pin_census;
    out->mem_cached_objects = store->mem_cached_census;
    out->file_cached_objects = store->file_cached_census;
    if (store->slab_high > CR_STORE_STATS_EXACT_SLOTS) return;
    struct census c = {0};
    for (uint32_t id = 0; id < store->slab_high; id++) census_add(store, id, now_ms, &c);
    out->active_leases = c.leased;
    out->soft_pinned = c.soft_pinned;
    out->mem_cached_objects = c.mem_cached;
    out->file_cached_objects = c.file_cached;
}

bool cr_store_lease_census_step(cr_store *store, uint64_t now_ms, uint32_t slots_max) {
    assert(store != NULL && slots_max > 0);
    uint32_t id = store->lease_census_cursor;
    if (id > store->slab_high) id = store->slab_high; /* the table shrank under the walk */
    uint32_t end = store->slab_high - id > slots_max ? id + slots_max : store->slab_high;
    struct census c = {.leased = store->lease_census_partial,
                       .soft_pinned = store->soft_pin_census_partial,
                       .mem_cached = store->mem_cached_census_partial,
                       .file_cached = store->file_cached_census_partial};
    for (; id < end; id++) census_add(store, id, now_ms, &c);
    store->lease_census_cursor = id;
    bool whole = id >= store->slab_high;
    store->lease_census_partial = whole ? 0 : c.leased;
    store->soft_pin_census_partial = whole ? 0 : c.soft_pinned;
    store->mem_cached_census_partial = whole ? 0 : c.mem_cached;
    store->file_cached_census_partial = whole ? 0 : c.file_cached;
    if (!whole) return false;
    store->lease_census = c.leased;
    store->soft_pin_census = c.soft_pinned;
    store->mem_cached_census = c.mem_cached;
    store->file_cached_census = c.file_cached;
    store->lease_census_cursor = 0;
    return true;
}

