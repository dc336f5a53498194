/* Tenant quotas (Mooncake's /api/v1/tenant_quotas): a tenant with a policy
 * may hold at most its effective quota of replica bytes; a PutStart that
 * would pass it is refused with TENANT_QUOTA_EXCEEDED (-1700), as the
 * reference's.  A tenant is charged cr_store_alloc_bytes(size) per replica
 * (the reference's size x replicas) from its PutStart until the replica
 * goes; the charge is kept per live tenant (cr_store_tenant.charged) whether
 * or not it has a policy, so a policy set later sees what it already holds.
 *
 * The effective quota is the requested one while the requests of every
 * policy fit in the mounted capacity; past it, each tenant gets its share of
 * the capacity in proportion to its request (rounded down; the reference
 * hands the rounding remainder out by largest remainder, so the two may
 * differ by a byte).  Tenants without a policy are not limited: crescent has
 * no multi-tenant admission mode (the reference's --enable_multi_tenants
 * refuses them TENANT_NOT_REGISTERED).  At most max_tenants policies. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "core/store_internal.h"

static const char *name_or_default(const char *tenant) {
    return tenant != NULL && tenant[0] != '\0' ? tenant : CR_STORE_DEFAULT_TENANT;
}

static int quota_find(const cr_store *store, const char *tenant) {
    tenant = name_or_default(tenant);
    for (uint32_t i = 0; i < store->quota_count; i++)
        if (strcmp(store->quotas[i].name, tenant) == 0) return (int)i;
    return -1;
}

static uint64_t effective(const cr_store *store, uint64_t requested) {
    uint64_t sum = store->quota_requested_sum;
    if (sum <= store->capacity_bytes) return requested;
    return (uint64_t)((unsigned __int128)store->capacity_bytes * requested / sum);
}

static uint64_t charged(const cr_store *store, const char *tenant) {
    int t = cr_store_tenant_lookup(store, tenant);
    return t >= 0 ? store->tenants[t].charged : 0;
}

static void view(const cr_store *store, const struct cr_store_quota *q,
                 struct cr_store_quota_view *out) {
    *out = (struct cr_store_quota_view){.tenant = q->name, .requested_bytes = q->requested,
                                        .effective_bytes = effective(store, q->requested),
                                        .charged_bytes = charged(store, q->name)};
    out->over_quota = out->charged_bytes > out->effective_bytes;
}

void cr_store_tenant_charge(cr_store *store, uint16_t tenant, uint64_t bytes, bool add) {
    assert(tenant < store->tenant_high && store->tenants[tenant].name != NULL);
    struct cr_store_tenant *t = &store->tenants[tenant];
    assert(add || t->charged >= bytes);
    t->charged = add ? t->charged + bytes : t->charged - bytes;
}

int cr_store_quota_admit(cr_store *store, const char *tenant, uint64_t bytes) {
    assert(store != NULL);
    if (store->quota_count == 0) return CR_OK; /* the common case: no policy at all */
    int q = quota_find(store, tenant);
    if (q < 0) return CR_OK;
    uint64_t limit = effective(store, store->quotas[q].requested);
    uint64_t held = charged(store, tenant);
    if (held <= limit && bytes <= limit - held) return CR_OK;
    return cr_store_fail(store, CR_ERR_TENANT_QUOTA_EXCEEDED,
                         "tenant %s holds %llu of its %llu-byte quota; %llu more do not fit "
                         "(GET /api/v1/tenant_quotas?tenant_id=%s on --metrics-port)",
                         name_or_default(tenant), (unsigned long long)held,
                         (unsigned long long)limit, (unsigned long long)bytes,
                         name_or_default(tenant));
}

int cr_store_quota_set(cr_store *store, const char *tenant, uint64_t bytes,
                       struct cr_store_quota_view *out) {
    assert(store != NULL && out != NULL);
    tenant = name_or_default(tenant);
    if (bytes == 0 || bytes > CR_STORE_QUOTA_MAX)
        return cr_store_fail(store, CR_ERR_INVALID_PARAMS,
                             "Tenant quota must be in [1, 2^63 - 1] bytes");
    if (strlen(tenant) > CR_STORE_NAME_LEN_MAX)
        return cr_store_fail(store, CR_ERR_INVALID_PARAMS, "tenant longer than 256 bytes");
    int q = quota_find(store, tenant);
    if (q < 0) {
        if (store->quota_count == store->cfg.max_tenants)
            return cr_store_fail(store, CR_ERR_NOMEM,
                                 "%u tenant quotas are set (max_tenants): delete one first",
                                 store->quota_count);
        char *name = strdup(tenant);
        if (name == NULL) return cr_store_fail(store, CR_ERR_NOMEM, "out of memory");
        q = (int)store->quota_count++;
        store->quotas[q] = (struct cr_store_quota){.name = name};
    }
    store->quota_requested_sum -= store->quotas[q].requested;
    store->quotas[q].requested = bytes;
    store->quota_requested_sum += bytes;
    view(store, &store->quotas[q], out);
    return CR_OK;
}

int cr_store_quota_delete(cr_store *store, const char *tenant) {
    assert(store != NULL);
    int q = quota_find(store, tenant);
    if (q < 0) return cr_store_fail(store, CR_ERR_OBJECT_NOT_FOUND, "tenant has no quota");
    int t = cr_store_tenant_lookup(store, tenant);
    if (t >= 0 && (store->tenants[t].refs > 0 || store->tenants[t].charged > 0))
        return cr_store_fail(store, CR_ERR_TENANT_NOT_EMPTY,
                             "tenant %s still holds objects: remove them first "
                             "(POST /api/v1/remove_all?tenant_id=%s)",
                             name_or_default(tenant), name_or_default(tenant));
    store->quota_requested_sum -= store->quotas[q].requested;
    free(store->quotas[q].name);
    store->quotas[q] = store->quotas[--store->quota_count];
    return CR_OK;
}

int cr_store_quota_get(const cr_store *store, const char *tenant,
                       struct cr_store_quota_view *out) {
    assert(store != NULL && out != NULL);
    int q = quota_find(store, tenant);
    if (q < 0) return CR_ERR_OBJECT_NOT_FOUND;
    view(store, &store->quotas[q], out);
    return CR_OK;
}

bool cr_store_quota_next(const cr_store *store, uint32_t *cursor,
                         struct cr_store_quota_view *out) {
    assert(store != NULL && cursor != NULL && out != NULL);
    if (*cursor >= store->quota_count) return false;
    view(store, &store->quotas[(*cursor)++], out);
    return true;
}

void cr_store_quotas_free(cr_store *store) {
    for (uint32_t i = 0; i < store->quota_count; i++) free(store->quotas[i].name);
    free(store->quotas);
    store->quotas = NULL;
    store->quota_count = 0;
}
