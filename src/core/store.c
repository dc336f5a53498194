/* Store master core: configuration, lifecycle and tenants.  Clients are in
 * store_clients.c, segments in store_segments.c, objects in store_objects.c,
 * regex operations in store_regex.c and the eviction mechanism in
 * store_evict.c; the shared layout is store_internal.h. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <xxhash.h>

#include "core/store_internal.h"
#include "core/store_ssd_park.h"
#include "crescent/error.h"

#define MS_PER_MINUTE 60000ull
#define SOFT_PIN_TTL_MAX_MS (24ull * 60ull * MS_PER_MINUTE)
#define OBJECTS_MAX (1u << 30) /* the key index's 2 slots per object fit 2^31 */

static uint32_t pow2_at_least(uint64_t n);

void cr_store_config_default(cr_store_config *out) {
    assert(out != NULL);
    memset(out, 0, sizeof(*out));
    out->default_kv_lease_ttl_ms = 5000;
    out->default_kv_soft_pin_ttl_ms = 30 * MS_PER_MINUTE;
    out->allow_evict_soft_pinned_objects = true;
    out->eviction_high_watermark_ratio = 0.95;
    out->eviction_ratio = 0.05;
    out->put_start_discard_timeout_ms = 30000;
    out->put_start_release_timeout_ms = 10 * MS_PER_MINUTE;
    out->client_live_ttl_ms = 10000;
    out->task_timeout_ms = 300000;
    out->max_key_len = CR_STORE_KEY_LEN_MAX;
    /* Room, not memory: the slab, the key index and each segment's
     * allocation table grow with use (about 400 bytes per object, see
     * bench/RESULTS.md), so an idle store stays small. */
    out->max_objects = 1u << 24;
    out->max_segments = 1024;
    out->max_clients = 4096;
    out->max_tenants = 64;
    out->max_tenants_per_client = 16;
    out->max_segments_per_client = 64;
    out->min_segment_size_bytes = 4096;
    out->max_replicas_per_object = CR_STORE_REPLICAS_MAX;
    out->max_allocations_per_segment = 1u << 24;
    out->max_discarded = 1u << 16;
    out->max_object_size_bytes = 1ull << 40;
    out->regex_match_limit = 1000000;
    out->regex_depth_limit = 10000;
    /* A GetReplicaListByRegex answer of 10000 keys with a replica or two each
     * is a few MB; far more would stall the segments actor while it builds
     * and packs it, and the client while it unpacks it. */
    out->regex_max_matches = 10000;
    out->regex_budget_steps = 100000000; /* ~1-2 s of matching; see store_regex.c */
    out->block_token_ids_max = 1u << 16;
    out->rng_seed = 0x9E3779B97F4A7C15ULL;
}

/* Table of checks so that every rule and its message sit on one line. */
int cr_store_config_validate(const cr_store_config *c, char *msg, size_t msg_len) {
    assert(c != NULL);
    assert(msg != NULL || msg_len == 0);
    const struct {
        bool bad;
        const char *why;
    } rules[] = {
        {c->default_kv_lease_ttl_ms == 0, "default_kv_lease_ttl must be > 0"},
        {c->default_kv_soft_pin_ttl_ms == 0 || c->default_kv_soft_pin_ttl_ms > SOFT_PIN_TTL_MAX_MS,
         "default_kv_soft_pin_ttl must be in (0, 24 h]"},
        {!(c->eviction_high_watermark_ratio > 0.0 && c->eviction_high_watermark_ratio <= 1.0),
         "eviction_high_watermark_ratio must be in (0, 1]"},
        {!(c->eviction_ratio > 0.0 && c->eviction_ratio <= 1.0),
         "eviction_ratio must be in (0, 1]"},
        {c->put_start_discard_timeout_ms == 0, "put_start_discard_timeout must be > 0"},
        {c->put_start_discard_timeout_ms >= c->put_start_release_timeout_ms,
         "put_start_discard_timeout must be < put_start_release_timeout"},
        {c->client_live_ttl_ms == 0, "client_live_ttl must be > 0"},
        {c->max_key_len == 0 || c->max_key_len > CR_STORE_KEY_LEN_MAX,
         "max_key_len must be in [1, 4096]"},
        {c->max_objects == 0 || c->max_objects > OBJECTS_MAX, "max_objects must be in [1, 2^30]"},
        {c->max_segments == 0 || c->max_segments > UINT16_MAX,
         "max_segments must be in [1, 65535]"},
        {c->max_clients == 0 || c->max_clients > (1u << 24), "max_clients must be in [1, 2^24]"},
        {c->max_tenants == 0 || c->max_tenants > UINT16_MAX, "max_tenants must be in [1, 65535]"},
        {c->max_tenants_per_client == 0, "max_tenants_per_client must be > 0"},
        {c->max_segments_per_client == 0, "max_segments_per_client must be > 0"},
        {c->min_segment_size_bytes == 0, "min_segment_size_bytes must be > 0"},
        {c->max_replicas_per_object == 0 || c->max_replicas_per_object > CR_STORE_REPLICAS_MAX,
         "max_replicas_per_object must be in [1, 8]"},
        {c->max_allocations_per_segment == 0 || c->max_allocations_per_segment > (1u << 30),
         "max_allocations_per_segment must be in [1, 2^30]"},
        {c->max_discarded == 0, "max_discarded must be > 0"},
        {c->max_object_size_bytes == 0, "max_object_size_bytes must be > 0"},
        {c->regex_match_limit == 0 || c->regex_depth_limit == 0,
         "regex_match_limit and regex_depth_limit must be > 0"},
        {c->regex_max_matches == 0 || c->regex_max_matches > OBJECTS_MAX,
         "regex_max_matches must be in [1, 2^30]"},
        {c->regex_budget_steps == 0, "regex_budget_steps must be > 0"},
        {c->rng_seed == 0, "rng_seed must be non-zero"},
    };
    for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++) {
        if (!rules[i].bad) continue;
        if (msg_len > 0) snprintf(msg, msg_len, "%s", rules[i].why);
        return CR_ERR_INVALID_PARAMS;
    }
    if (msg_len > 0) msg[0] = '\0';
    return CR_OK;
}

int cr_store_fail(cr_store *store, int status, const char *fmt, ...) {
    assert(store != NULL && fmt != NULL);
    assert(status < 0);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(store->err, sizeof(store->err), fmt, ap);
    va_end(ap);
    return status;
}

void cr_store_clear_error(cr_store *store) {
    assert(store != NULL);
    store->err[0] = '\0';
}

const char *cr_store_last_error(const cr_store *store) {
    assert(store != NULL);
    return store->err;
}

bool cr_store_no_room_evictable(const cr_store *store) {
    assert(store != NULL);
    return store->no_room_evictable;
}

const cr_store_config *cr_store_get_config(const cr_store *store) {
    assert(store != NULL);
    return &store->cfg;
}

static uint32_t pow2_at_least(uint64_t n) {
    uint64_t p = 16;
    while (p < n) p <<= 1;
    assert(p <= (1ull << 31));
    return (uint32_t)p;
}

/* The key index is probed at random, a read before each insert's write, so
 * it is mapped, hinted to huge pages where the kernel allows them (one TLB
 * entry per 2 MiB, not per 4 KiB), and written through once here.  Left to
 * fault in lazily, each first touch was a read fault mapping the zero page,
 * then a copy-on-write fault with a TLB shootdown to the other CPUs on the
 * insert: 8% of the first million puts' throughput and half their p99
 * (bench/RESULTS.md).  The index starts small and each doubling maps the
 * next one this way (cr_store_index_reserve), so memory follows the objects. */
void *cr_store_map_zeroed(size_t bytes) {
    assert(bytes > 0);
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
#ifdef MADV_HUGEPAGE
    (void)madvise(p, bytes, MADV_HUGEPAGE); /* a hint: refused where THP is off */
#endif
    for (size_t off = 0; off < bytes; off += 4096) ((volatile char *)p)[off] = 0;
    return p;
}

/* Mapped with 2 MiB to spare and trimmed to a 2 MiB boundary: the kernel
 * backs only whole aligned 2 MiB ranges with huge pages. */
void *cr_store_map_huge(size_t bytes) {
    assert(bytes > 0);
    const size_t huge = 2u << 20;
    size_t span = bytes + huge;
    char *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    char *aligned = (char *)(((uintptr_t)p + huge - 1) & ~(uintptr_t)(huge - 1));
    if (aligned > p) munmap(p, (size_t)(aligned - p));
    size_t tail = (size_t)(p + span - (aligned + bytes));
    if (tail > 0) munmap(aligned + bytes, tail);
#ifdef MADV_HUGEPAGE
    (void)madvise(aligned, bytes, MADV_HUGEPAGE); /* a hint: refused where THP is off */
#endif
    return aligned;
}

void cr_store_unmap(void *p, size_t bytes) {
    if (p != NULL) munmap(p, bytes);
}

/* The small tables are sized from the config up front; the object slab (in
 * chunks) and the key index (by doubling, cr_store_index_reserve) grow with
 * the objects.  The chunk directory is a pointer per 4096 objects of
 * max_objects, calloc'd: untouched pages of it cost no memory. */
static int store_alloc_tables(cr_store *s) {
    const cr_store_config *c = &s->cfg;
    uint32_t chunks = (c->max_objects + CR_STORE_CHUNK_OBJECTS - 1) / CR_STORE_CHUNK_OBJECTS;
    s->table_slots_max = pow2_at_least((uint64_t)c->max_objects * 2);
    uint32_t table_size = s->table_slots_max < CR_STORE_INDEX_SLOTS_MIN ? s->table_slots_max
                                                                         : CR_STORE_INDEX_SLOTS_MIN;
    uint32_t client_size = pow2_at_least((uint64_t)c->max_clients * 2);
    s->chunks = calloc(chunks, sizeof(*s->chunks));
    s->table = cr_store_map_zeroed((size_t)table_size * sizeof(*s->table));
    s->segments = calloc(c->max_segments, sizeof(*s->segments));
    s->mounted = calloc(c->max_segments, sizeof(*s->mounted));
    s->clients = calloc(client_size, sizeof(*s->clients));
    s->tenants = calloc(c->max_tenants, sizeof(*s->tenants));
    s->discarded = calloc(c->max_discarded, sizeof(*s->discarded));
    s->quotas = calloc(c->max_tenants, sizeof(*s->quotas));
    s->table_mask = table_size - 1;
    s->table_shift = 32u - (uint32_t)__builtin_ctz(table_size);
    s->clients_mask = client_size - 1;
    bool ok = s->chunks && s->table && s->segments && s->mounted && s->clients && s->tenants &&
              s->discarded && s->quotas;
    return ok ? CR_OK : CR_ERR_NOMEM;
}

int cr_store_create(const cr_store_config *cfg, const struct cr_store_event_sink *sink,
                    cr_store **out) {
    assert(cfg != NULL && out != NULL);
    char msg[CR_STORE_ERROR_LEN];
    *out = NULL;
    if (cr_store_config_validate(cfg, msg, sizeof(msg)) != CR_OK) return CR_ERR_INVALID_PARAMS;
    cr_store *s = calloc(1, sizeof(*s));
    if (s == NULL) return CR_ERR_NOMEM;
    s->cfg = *cfg;
    if (sink != NULL) s->sink = *sink;
    s->rng = cfg->rng_seed;
    s->free_head = CR_STORE_NONE;
    s->inflight_head = s->inflight_tail = CR_STORE_NONE;
    uint16_t tenant_default;
    if (store_alloc_tables(s) != CR_OK ||
        cr_store_tenant_intern(s, CR_STORE_DEFAULT_TENANT, &tenant_default) != CR_OK) {
        cr_store_destroy(s);
        return CR_ERR_NOMEM;
    }
    assert(tenant_default == 0);
    *out = s;
    return CR_OK;
}

void cr_store_destroy(cr_store *s) {
    if (s == NULL) return;
    for (uint32_t id = 0; id < s->slab_high; id++) {
        struct cr_store_obj *obj = cr_store_obj_at(s, id);
        cr_store_obj_free_key(obj);
        free(obj->meta);
        for (uint32_t r = 0; r < obj->replica_count; r++)
            if (cr_store_reps(obj)[r].medium == CR_MEDIUM_DISK) free(cr_store_reps(obj)[r].path);
        cr_store_obj_free_reps(obj);
    }
    for (uint32_t i = 0; s->segments != NULL && i < s->cfg.max_segments; i++) {
        if (s->segments[i].in_use) cr_store_segment_release(s, i);
    }
    for (uint32_t i = 0; s->chunks != NULL && i < s->chunk_count; i++) {
        bool mapped = false;
        for (uint32_t r = 0; r < s->slab_region_count; r++)
            mapped = mapped || (i >= s->slab_regions[r].first &&
                                i - s->slab_regions[r].first < s->slab_regions[r].count);
        if (!mapped) free(s->chunks[i]);
    }
    for (uint32_t r = 0; r < s->slab_region_count; r++)
        cr_store_unmap(s->slab_regions[r].base, s->slab_regions[r].bytes);
    cr_store_ssd_park_free(s);
    for (uint32_t i = 0; i < s->tenant_high; i++) free(s->tenants[i].name);
    free(s->chunks);
    cr_store_unmap(s->table, ((size_t)s->table_mask + 1) * sizeof(*s->table));
    free(s->segments);
    free(s->mounted);
    free(s->clients);
    free(s->tenants);
    free(s->discarded);
    cr_store_promote_free(s);
    free(s->bulk); /* one allocation; its replicas went with the objects above */
    cr_store_restore_index_drop(s);
    cr_store_quotas_free(s);
    free(s);
}

/* ---- tenants ------------------------------------------------------------ */

static const char *tenant_or_default(const char *tenant) {
    return (tenant == NULL || tenant[0] == '\0') ? CR_STORE_DEFAULT_TENANT : tenant;
}

static uint64_t tenant_seed(const char *name) {
    return XXH3_64bits(name, strlen(name));
}

uint64_t cr_store_tenant_seed(const char *tenant) {
    return tenant_seed(tenant_or_default(tenant));
}

int cr_store_tenant_lookup(const cr_store *store, const char *tenant) {
    assert(store != NULL);
    tenant = tenant_or_default(tenant);
    if (strcmp(tenant, CR_STORE_DEFAULT_TENANT) == 0) /* the common case, interned first */
        return store->tenant_count > 0 ? 0 : -1;
    uint64_t seed = tenant_seed(tenant);
    for (uint32_t i = 1; i < store->tenant_high; i++) {
        const struct cr_store_tenant *t = &store->tenants[i];
        if (t->name != NULL && t->seed == seed && strcmp(t->name, tenant) == 0) return (int)i;
    }
    return -1;
}

/* A slot for a new tenant: the lowest free one, so tenant_high stays small. */
static uint32_t tenant_free_slot(const cr_store *store) {
    for (uint32_t i = 1; i < store->tenant_high; i++) {
        if (store->tenants[i].name == NULL) return i;
    }
    assert(store->tenant_high < store->cfg.max_tenants); /* the caller checked the count */
    return store->tenant_high;
}

int cr_store_tenant_intern(cr_store *store, const char *tenant, uint16_t *out) {
    assert(store != NULL && out != NULL);
    int found = cr_store_tenant_lookup(store, tenant);
    if (found >= 0) {
        *out = (uint16_t)found;
        return CR_OK;
    }
    tenant = tenant_or_default(tenant);
    size_t len = strnlen(tenant, CR_STORE_NAME_LEN_MAX + 1);
    if (len > CR_STORE_NAME_LEN_MAX)
        return cr_store_fail(store, CR_ERR_INVALID_PARAMS, "tenant longer than 256 bytes");
    if (store->tenant_count == store->cfg.max_tenants)
        return cr_store_fail(store, CR_ERR_NOMEM,
                             "tenant table full: %u tenants hold objects (max_tenants)",
                             store->cfg.max_tenants);
    char *name = strdup(tenant);
    if (name == NULL) return cr_store_fail(store, CR_ERR_NOMEM, "out of memory");
    uint32_t slot = tenant_free_slot(store);
    assert(store->tenants[slot].name == NULL && store->tenants[slot].refs == 0);
    store->tenants[slot] = (struct cr_store_tenant){.name = name, .seed = tenant_seed(name)};
    if (slot == store->tenant_high) store->tenant_high++;
    store->tenant_count++;
    *out = (uint16_t)slot;
    return CR_OK;
}

void cr_store_tenant_ref(cr_store *store, uint16_t tenant) {
    assert(store != NULL);
    assert(tenant < store->tenant_high && store->tenants[tenant].name != NULL);
    store->tenants[tenant].refs++;
    assert(store->tenants[tenant].refs != 0); /* never wraps: refs <= objects + callers */
}

/* The last reference gone, the tenant leaves the table: its id may be handed
 * to another name, which is safe because nothing holds the id any more (no
 * object, no call in progress) and key hashes are seeded by the name. */
void cr_store_tenant_unref(cr_store *store, uint16_t tenant) {
    assert(store != NULL);
    assert(tenant < store->tenant_high && store->tenants[tenant].name != NULL);
    struct cr_store_tenant *t = &store->tenants[tenant];
    assert(t->refs > 0);
    if (--t->refs > 0 || tenant == 0) return; /* "default" (id 0) stays for good */
    free(t->name);
    *t = (struct cr_store_tenant){0};
    store->tenant_count--;
    while (store->tenant_high > 1 && store->tenants[store->tenant_high - 1].name == NULL)
        store->tenant_high--;
}

const char *cr_store_tenant_name(const cr_store *store, uint16_t tenant) {
    assert(store != NULL);
    assert(tenant < store->tenant_high && store->tenants[tenant].name != NULL);
    return store->tenants[tenant].name;
}

