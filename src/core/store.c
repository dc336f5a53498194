/* Store master core: configuration, lifecycle, tenants, clients and segments.
 * Objects are in store_objects.c, regex operations in store_regex.c and the
 * eviction mechanism in store_evict.c; the shared layout is store_internal.h. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <xxhash.h>

#include "core/store_internal.h"
#include "crescent/error.h"

#define MS_PER_MINUTE 60000ull
#define SOFT_PIN_TTL_MAX_MS (24ull * 60ull * MS_PER_MINUTE)
#define OBJECTS_MAX (1u << 30) /* the key index's 2 slots per object fit 2^31 */

static uint32_t pow2_at_least(uint64_t n);
static void segment_release(cr_store *store, uint32_t id);
static int segment_check_params(cr_store *store, const struct cr_uuid *client,
                                const struct cr_store_segment_params *p);
static uint32_t client_slot(const cr_store *store, const struct cr_uuid *client, bool *found);
static void client_delete(cr_store *store, uint32_t slot);

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
    s->table_mask = table_size - 1;
    s->table_shift = 32u - (uint32_t)__builtin_ctz(table_size);
    s->clients_mask = client_size - 1;
    bool ok = s->chunks && s->table && s->segments && s->mounted && s->clients && s->tenants &&
              s->discarded;
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
    }
    for (uint32_t i = 0; s->segments != NULL && i < s->cfg.max_segments; i++) {
        if (s->segments[i].in_use) segment_release(s, i);
    }
    for (uint32_t i = 0; s->chunks != NULL && i < s->chunk_count; i++) free(s->chunks[i]);
    for (uint32_t i = 0; i < s->tenant_high; i++) free(s->tenants[i].name);
    free(s->chunks);
    cr_store_unmap(s->table, ((size_t)s->table_mask + 1) * sizeof(*s->table));
    free(s->segments);
    free(s->mounted);
    free(s->clients);
    free(s->tenants);
    free(s->discarded);
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

/* ---- clients -------------------------------------------------------------- */

static uint32_t client_slot(const cr_store *store, const struct cr_uuid *client, bool *found) {
    assert(client != NULL && found != NULL);
    uint32_t i = (uint32_t)XXH3_64bits(client->b, sizeof(client->b)) & store->clients_mask;
    while (store->clients[i].in_use) {
        if (cr_uuid_equal(&store->clients[i].id, client)) {
            *found = true;
            return i;
        }
        i = (i + 1) & store->clients_mask;
    }
    *found = false;
    return i;
}

/* Backward-shift deletion keeps probe chains intact without tombstones. */
static void client_delete(cr_store *store, uint32_t hole) {
    assert(store->clients[hole].in_use);
    uint32_t mask = store->clients_mask;
    uint32_t i = hole;
    for (;;) {
        i = (i + 1) & mask;
        struct cr_store_client *c = &store->clients[i];
        if (!c->in_use) break;
        uint32_t home = (uint32_t)XXH3_64bits(c->id.b, sizeof(c->id.b)) & mask;
        /* Move c into the hole unless its home lies cyclically in (hole, i]. */
        bool stays = (hole <= i) ? (home > hole && home <= i) : (home > hole || home <= i);
        if (stays) continue;
        store->clients[hole] = *c;
        hole = i;
    }
    store->clients[hole] = (struct cr_store_client){0}; /* its secret goes with it */
    store->client_count--;
}

bool cr_store_client_known(const cr_store *store, const struct cr_uuid *client) {
    bool found;
    client_slot(store, client, &found);
    return found;
}

int cr_store_client_touch(cr_store *store, const struct cr_uuid *client, uint64_t now_ms) {
    assert(store != NULL && client != NULL);
    bool found;
    uint32_t i = client_slot(store, client, &found);
    if (!found) {
        if (store->client_count == store->cfg.max_clients)
            return cr_store_fail(store, CR_ERR_NOMEM, "client table full (max_clients)");
        store->clients[i] = (struct cr_store_client){.id = *client, .in_use = true};
        store->client_count++;
    }
    if (now_ms > store->clients[i].last_seen_ms) store->clients[i].last_seen_ms = now_ms;
    return CR_OK;
}

/* Only a client the store knows (it mounted or put) is recorded: a Ping
 * from an unknown id has nothing to keep alive, and 4,200 made-up ids used
 * to fill the client table for everyone.  *was_known tells a forgotten store
 * server to remount (which makes it known again). */
int cr_store_client_ping(cr_store *store, const struct cr_uuid *client, uint64_t now_ms,
                         bool *was_known) {
    bool known = cr_store_client_known(store, client);
    if (was_known != NULL) *was_known = known;
    if (!known) return CR_OK;
    return cr_store_client_touch(store, client, now_ms);
}

int cr_store_client_issue_secret(cr_store *store, const struct cr_uuid *client,
                                 const uint8_t secret[CR_STORE_CLIENT_SECRET_BYTES],
                                 bool *issued) {
    assert(store != NULL && client != NULL && secret != NULL && issued != NULL);
    bool found;
    struct cr_store_client *c = &store->clients[client_slot(store, client, &found)];
    *issued = found && !c->has_secret;
    if (!*issued) return CR_OK;
    memcpy(c->secret, secret, CR_STORE_CLIENT_SECRET_BYTES);
    c->has_secret = true;
    return CR_OK;
}

bool cr_store_client_wants_secret(const cr_store *store, const struct cr_uuid *client) {
    assert(store != NULL && client != NULL);
    bool found;
    uint32_t i = client_slot(store, client, &found);
    return found && !store->clients[i].has_secret;
}

int cr_store_client_check_secret(cr_store *store, const struct cr_uuid *client,
                                 const uint8_t *secret, size_t len) {
    assert(store != NULL && client != NULL);
    bool found;
    const struct cr_store_client *c = &store->clients[client_slot(store, client, &found)];
    if (!found || !c->has_secret) return CR_OK;
    char hex[2 * sizeof(client->b) + 1];
    for (size_t i = 0; i < sizeof(client->b); i++)
        snprintf(hex + 2 * i, 3, "%02x", client->b[i]);
    if (secret == NULL || len == 0)
        return cr_store_fail(store, CR_ERR_ILLEGAL_CLIENT,
                             "client id %s is registered with a secret; this call carries none: "
                             "use the client that registered it (or pass its "
                             "CRESCENT_CLIENT_SECRET), or wait for its TTL to expire",
                             hex);
    /* Constant time: every byte is compared whatever the first difference. */
    uint8_t diff = len == CR_STORE_CLIENT_SECRET_BYTES ? 0 : 1;
    for (size_t i = 0; i < CR_STORE_CLIENT_SECRET_BYTES; i++)
        diff |= (uint8_t)(c->secret[i] ^ (i < len ? secret[i] : 0));
    if (diff == 0) return CR_OK;
    return cr_store_fail(store, CR_ERR_ILLEGAL_CLIENT,
                         "client id %s is registered with another secret: use the client that "
                         "registered it (or its CRESCENT_CLIENT_SECRET), or wait for its TTL "
                         "to expire",
                         hex);
}

static void client_unmount_all(cr_store *store, const struct cr_uuid *client) {
    for (uint32_t i = 0; i < store->mounted_count;) {
        uint32_t id = store->mounted[i];
        if (!cr_uuid_equal(&store->segments[id].owner, client)) {
            i++;
            continue;
        }
        /* Unmount swaps the last mounted id into position i: look at i again. */
        int rc = cr_store_unmount_segment(store, NULL, store->segments[id].name, NULL);
        assert(rc == CR_OK);
        (void)rc;
    }
}

uint32_t cr_store_expire_clients(cr_store *store, uint64_t now_ms) {
    assert(store != NULL);
    uint32_t expired = 0;
    for (uint32_t i = 0; i <= store->clients_mask;) {
        struct cr_store_client *c = &store->clients[i];
        if (!c->in_use || now_ms < c->last_seen_ms ||
            now_ms - c->last_seen_ms <= store->cfg.client_live_ttl_ms) {
            i++;
            continue;
        }
        struct cr_uuid id = c->id;
        client_unmount_all(store, &id);
        cr_store_obj_revoke_client(store, &id);
        client_delete(store, i); /* may shift a later client into slot i */
        expired++;
    }
    store->counters.clients_expired += expired;
    return expired;
}

/* ---- segments ------------------------------------------------------------- */

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
    if (p->protocol == NULL || (strcmp(p->protocol, "tcp") != 0 && strcmp(p->protocol, "rdma")))
        return cr_store_fail(store, CR_ERR_INVALID_PARAMS, "protocol must be tcp or rdma");
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

/* Frees the segment's own resources; callers dropped its replicas first. */
static void segment_release(cr_store *store, uint32_t id) {
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
    cr_store_obj_drop_segment(store, id, &freed);
    cr_store_discarded_drop_segment(store, id);
    assert(seg->used_bytes == 0);
    store->capacity_bytes -= seg->size;
    uint32_t pos = seg->mounted_pos;
    uint32_t last = store->mounted[--store->mounted_count];
    store->mounted[pos] = last;
    store->segments[last].mounted_pos = pos;
    segment_release(store, id);
    if (freed_objects != NULL) *freed_objects = freed;
    return CR_OK;
}

/* Hands an allocation back to its segment and keeps the byte counters. */
void cr_store_replica_release(cr_store *store, const struct cr_store_replica *r) {
    assert(store != NULL && r != NULL);
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
    out->used_bytes = store->used_bytes;
    out->ratio = store->capacity_bytes
                     ? (double)store->used_bytes / (double)store->capacity_bytes
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
        .allocation_count = st.allocation_count};
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
    out->active_leases = 0;
    for (uint32_t id = 0; id < store->slab_high; id++) {
        const struct cr_store_obj *obj = cr_store_obj_at(store, id);
        if (obj->state != CR_OBJ_FREE && cr_store_obj_leased(obj, now_ms)) out->active_leases++;
    }
}
