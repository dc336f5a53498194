/* The prefix indexer actor's queries and routing: /query and /route answers
 * built from the prefix index, the route choice (hits, load, health), and
 * load reports with their expiry.  Runs on the indexer's thread. */
#include <assert.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/indexer_internal.h"
#include "core/log.h"
#include "crescent/error.h"

static size_t result_size(const struct cr_prefix_index *index, const struct cr_prefix_match *m,
                          size_t count, size_t *ranks) {
    size_t names = 0;
    *ranks = 0;
    for (size_t i = 0; i < count; i++) {
        names += strlen(cr_prefix_index_instance_name(index, m[i].instance_id)) + 1;
        *ranks += (size_t)__builtin_popcountll(m[i].dp_mask);
    }
    return sizeof(struct cr_indexer_result) + count * sizeof(struct cr_indexer_hit) +
           *ranks * sizeof(uint32_t) + names;
}

static struct cr_indexer_result *result_build(const struct cr_prefix_index *index,
                                              const struct cr_prefix_match *m, size_t count) {
    size_t ranks;
    struct cr_indexer_result *r = malloc(result_size(index, m, count, &ranks));
    if (r == NULL) return NULL;
    memset(r, 0, sizeof(*r));
    r->hits = (struct cr_indexer_hit *)(r + 1);
    uint32_t *dp_at = (uint32_t *)(r->hits + count);
    char *name_at = (char *)(dp_at + ranks);
    for (size_t i = 0; i < count; i++) {
        struct cr_indexer_hit *h = &r->hits[i];
        const char *name = cr_prefix_index_instance_name(index, m[i].instance_id);
        size_t len = strlen(name) + 1;
        memcpy(name_at, name, len);
        h->instance = name_at;
        h->instance_id = m[i].instance_id;
        name_at += len;
        h->longest_tokens = m[i].longest_tokens;
        for (unsigned k = 0; k < CR_PREFIX_MEDIA_MAX; k++)
            h->medium_tokens[k] = cr_prefix_match_medium_tokens(&m[i], k);
        h->dp_mask = m[i].dp_mask;
        h->dp_tokens = dp_at;
        for (uint64_t set = h->dp_mask; set != 0; set &= set - 1)
            *dp_at++ = cr_prefix_match_rank_tokens(&m[i], (unsigned)__builtin_ctzll(set));
    }
    r->hit_count = (uint32_t)count;
    for (uint8_t k = 0; k < CR_PREFIX_MEDIA_MAX; k++) {
        const char *name = cr_prefix_index_medium_name(index, k);
        if (name == NULL) break;
        snprintf(r->media[k], sizeof(r->media[k]), "%s", name);
        r->media_count = (uint8_t)(k + 1);
    }
    return r;
}

/* Cost of sending the request to instance id (lower is better); see
 * indexer_routes.c's header for the formula. */
static double route_cost(const struct indexer_state *st, uint16_t id, uint32_t hit_tokens,
                         uint64_t request_tokens, double waiting_max, double *load_out) {
    double overlap = request_tokens > 0 ? (double)hit_tokens / (double)request_tokens : 0.0;
    double load = 0.0, waiting = 0.0, full = 0.0;
    if (id < st->instance_cap && st->instances[id].has_load) {
        const struct cr_indexer_load *l = &st->instances[id].load;
        load = l->kv_total_blocks > 0 ? (double)l->kv_active_blocks / (double)l->kv_total_blocks
                                      : l->gpu_cache_usage_perc;
        waiting = waiting_max > 0 ? (double)l->num_requests_waiting / waiting_max : 0.0;
        bool no_slots =
            l->request_total_slots > 0 && l->request_active_slots >= l->request_total_slots;
        bool no_blocks = l->kv_total_blocks > 0 && l->kv_active_blocks >= l->kv_total_blocks;
        full = no_slots || no_blocks ? 1.0 : 0.0;
    }
    *load_out = load;
    return load + waiting + full - 2.0 * overlap;
}

/* A load-only instance whose last report is older than the TTL is as good
 * as gone (the sweep that forgets it runs at most once a second). */
static bool load_expired(const struct indexer_state *st, const struct indexer_instance_info *info) {
    return info->load_only && st->now_ns - info->load_ns >= CR_INDEXER_LOAD_TTL_NS;
}

static bool candidate_ok(const struct indexer_state *st, uint16_t id, const char *tenant) {
    const char *t = cr_prefix_index_instance_tenant(st->index, id);
    return t != NULL && strcmp(t, tenant) == 0;
}

/* Fills out with every candidate (an id may repeat): the tenant's publishers
 * registered for the model, the tenant's instances that reported load, and
 * every instance that matched.  Returns the count (at most cap). */
static uint32_t route_candidates(const struct indexer_state *st, const struct cr_indexer_query *q,
                                 const struct cr_indexer_result *r, uint16_t *out, uint32_t cap) {
    const char *tenant = q->key.tenant != NULL ? q->key.tenant : "default";
    uint32_t n = 0;
    for (uint32_t i = 0; i < r->hit_count && n < cap; i++) out[n++] = r->hits[i].instance_id;
    for (uint32_t i = 0; i < CR_INDEXER_SOURCES_MAX && n < cap; i++) {
        const struct indexer_source *s = &st->sources[i];
        if (s->used && strcmp(s->reg.tenant_id, tenant) == 0 &&
            strcmp(s->reg.model, q->key.model != NULL ? q->key.model : "") == 0)
            out[n++] = s->target.instance;
    }
    for (uint32_t id = 0; id < st->instance_cap && n < cap; id++)
        if (st->instances[id].has_load && !load_expired(st, &st->instances[id]) &&
            candidate_ok(st, (uint16_t)id, tenant))
            out[n++] = (uint16_t)id;
    return n;
}

static double waiting_max_of(const struct indexer_state *st, const uint16_t *cand, uint32_t n) {
    double max = 0;
    for (uint32_t i = 0; i < n; i++)
        if (cand[i] < st->instance_cap && st->instances[cand[i]].has_load &&
            (double)st->instances[cand[i]].load.num_requests_waiting > max)
            max = (double)st->instances[cand[i]].load.num_requests_waiting;
    return max;
}

static void route_count(struct indexer_state *st, const struct cr_indexer_query *q, uint16_t best,
                        uint32_t hit) {
    st->routes++;
    st->route_request_tokens += q->request_tokens;
    st->route_hit_tokens += hit;
    struct indexer_instance_info *info = indexer_instance_info_get(st, best);
    if (info == NULL) return;
    info->route_requests++;
    info->route_request_tokens += q->request_tokens;
    info->route_hit_tokens += hit;
}

/* Picks the lowest-cost candidate (ties: longer match, then smaller name). */
#define ROUTE_SEEN 0x80000000u /* route_hits flag: candidate already evaluated */
#define ROUTE_STALE 0x40000000u   /* one of its publishers is stale */
#define ROUTE_LIVE 0x20000000u    /* one of its publishers has connected */
#define ROUTE_SOURCED 0x10000000u /* it has publishers */
#define ROUTE_FLAGS 0xf0000000u   /* hit tokens stay below (at most 2M) */

/* Marks every publisher's instance with its health flags (once per /route:
 * a walk over the 256 source slots, not one per candidate). */
static void route_mark_health(struct indexer_state *st, bool set) {
    for (uint32_t i = 0; i < CR_INDEXER_SOURCES_MAX; i++) {
        const struct indexer_source *s = &st->sources[i];
        if (!s->used) continue;
        uint32_t *h = &st->route_hits[s->target.instance];
        *h = set ? *h | ROUTE_SOURCED | (s->stale ? ROUTE_STALE : 0) |
                       (s->ever_connected ? ROUTE_LIVE : 0)
                 : 0;
    }
}

static bool route_unhealthy(uint32_t flags) {
    return (flags & ROUTE_SOURCED) && ((flags & ROUTE_STALE) || !(flags & ROUTE_LIVE));
}

static void route_pick(struct indexer_state *st, const struct cr_indexer_query *q,
                       struct cr_indexer_result *r) {
    enum { CAND_MAX = 4096 };
    static_assert(CR_PREFIX_INSTANCES_MAX <= 65536u, "route_hits is indexed by a u16 id");
    if (st->route_hits == NULL && (st->route_hits = calloc(65536u, sizeof(uint32_t))) == NULL)
        return;
    uint16_t *cand = malloc(CAND_MAX * sizeof(uint16_t)); /* per /route: bounded, off the stack */
    if (cand == NULL) return;
    uint32_t n = route_candidates(st, q, r, cand, CAND_MAX);
    for (uint32_t i = 0; i < r->hit_count; i++)
        st->route_hits[r->hits[i].instance_id] = r->hits[i].longest_tokens;
    route_mark_health(st, true);
    double waiting_max = waiting_max_of(st, cand, n);
    int best = -1;
    uint32_t best_hit = 0, distinct = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (st->route_hits[cand[i]] & ROUTE_SEEN) continue; /* listed twice (hit and source) */
        st->route_hits[cand[i]] |= ROUTE_SEEN;
        if (!q->include_unhealthy &&
            (route_unhealthy(st->route_hits[cand[i]]) || indexer_nats_stale(st, cand[i]))) {
            r->excluded++;
            continue;
        }
        distinct++;
        const char *name = cr_prefix_index_instance_name(st->index, cand[i]);
        uint32_t hit = st->route_hits[cand[i]] & ~ROUTE_FLAGS;
        double load, cost = route_cost(st, cand[i], hit, q->request_tokens, waiting_max, &load);
        if (name == NULL ||
            (best >= 0 &&
             !(cost < r->best_cost || (cost == r->best_cost && hit > best_hit) ||
               (cost == r->best_cost && hit == best_hit && strcmp(name, r->best_instance) < 0))))
            continue;
        best = cand[i];
        best_hit = hit;
        r->best_cost = cost;
        r->best_load = load;
        snprintf(r->best_instance, sizeof(r->best_instance), "%s", name);
    }
    for (uint32_t i = 0; i < n; i++) st->route_hits[cand[i]] = 0;
    route_mark_health(st, false);
    free(cand);
    r->candidates = distinct;
    r->best_tokens = best_hit;
    if (best >= 0) route_count(st, q, (uint16_t)best, best_hit);
    if (best >= 0) indexer_nats_routed(st, (uint16_t)best, q->request_tokens, best_hit);
}

int indexer_answer(struct indexer_state *st, struct cr_prefix_scratch *scratch,
                   const struct cr_indexer_query *q, struct cr_indexer_result **out) {
    const struct cr_prefix_match *matches = NULL;
    size_t count = 0;
    uint32_t context;
    uint16_t filter;
    enum cr_indexer_match match = CR_INDEXER_MATCH_MISS;
    bool known = cr_prefix_index_context(st->index, &q->key, false, &context) == CR_OK;
    if (!known)
        /* O(instances), paid only by queries that have no answer to give. */
        match = cr_prefix_index_tenant_known(st->index, q->key.tenant)
                    ? CR_INDEXER_MATCH_UNKNOWN_CONTEXT
                    : CR_INDEXER_MATCH_UNKNOWN_TENANT;
    if (known && q->instance_filter != NULL) {
        known = cr_prefix_index_instance_find(st->index, q->instance_filter, q->key.tenant,
                                              &filter) == CR_OK;
        if (!known) match = CR_INDEXER_MATCH_UNKNOWN_INSTANCE;
    }
    if (known && q->block_count > 0) {
        const uint16_t *f = q->instance_filter != NULL ? &filter : NULL;
        size_t fc = q->instance_filter != NULL ? 1 : 0;
        int rc = scratch != NULL
                     ? cr_prefix_index_query_shared(st->index, scratch, context, q->seq_hashes,
                                                    q->block_count, f, fc, &matches, &count)
                     : cr_prefix_index_query(st->index, context, q->seq_hashes, q->block_count,
                                             f, fc, &matches, &count);
        if (rc != CR_OK) return rc;
    }
    *out = result_build(st->index, matches, count);
    if (*out == NULL) return CR_ERR_NOMEM;
    (*out)->match = count > 0 ? CR_INDEXER_MATCH_HIT : match;
    return CR_OK;
}

int indexer_query(struct indexer_state *st, const struct cr_indexer_query *q,
                  struct cr_indexer_result **out) {
    st->queries++;
    int rc = indexer_answer(st, NULL, q, out);
    if (rc == CR_OK && q->route) route_pick(st, q, *out);
    return rc;
}

/* Forgets load-only instances whose last report is older than the TTL.
 * Walks the instance table, so unless forced it runs at most once a second. */
void indexer_load_only_sweep(struct indexer_state *st, bool force) {
    if (!force && st->now_ns < st->load_only_sweep_ns) return;
    st->load_only_sweep_ns = st->now_ns + 1000000000ull;
    uint32_t forgotten = 0;
    for (uint32_t id = 0; id < st->instance_cap && st->load_only_count > 0; id++) {
        if (!load_expired(st, &st->instances[id])) continue;
        assert(!indexer_instance_has_sources(st, (uint16_t)id));
        indexer_instance_forget(st, (uint16_t)id);
        forgotten++;
    }
    st->load_only_expired += forgotten;
    if (forgotten > 0)
        CR_INFO("indexer", "forgot %u instance(s) without a publisher, silent on /load for %llu s",
                forgotten, (unsigned long long)(CR_INDEXER_LOAD_TTL_NS / 1000000000u));
}

/* Creates the instance of a report for an instance nobody else named: it
 * is load-only, bounded by CR_INDEXER_LOAD_ONLY_MAX.  Returns CR_OK with
 * *id, CR_ERR_NOMEM when the bound is reached (after forgetting the expired
 * ones) or memory ran out, or the index's error. */
static int load_only_add(struct indexer_state *st, const struct cr_indexer_load *load,
                         uint16_t *id) {
    if (st->load_only_count >= CR_INDEXER_LOAD_ONLY_MAX) indexer_load_only_sweep(st, true);
    if (st->load_only_count >= CR_INDEXER_LOAD_ONLY_MAX) {
        st->load_only_rejected++;
        return CR_ERR_NOMEM;
    }
    int rc = cr_prefix_index_instance_add(st->index, load->instance_id, load->tenant_id, id);
    if (rc != CR_OK) return rc;
    if (indexer_instance_info_get(st, *id) == NULL) {
        cr_prefix_index_instance_remove(st->index, *id); /* leave nothing half-made */
        return CR_ERR_NOMEM;
    }
    st->instances[*id].load_only = true;
    st->load_only_count++;
    return CR_OK;
}

int indexer_load(struct indexer_state *st, const struct cr_indexer_load *load) {
    uint16_t id;
    int rc = cr_prefix_index_instance_find(st->index, load->instance_id, load->tenant_id, &id);
    if (rc == CR_ERR_OBJECT_NOT_FOUND) rc = load_only_add(st, load, &id);
    if (rc != CR_OK) return rc;
    struct indexer_instance_info *info = indexer_instance_info_get(st, id);
    if (info == NULL) return CR_ERR_NOMEM;
    info->has_load = true;
    info->load = *load;
    info->load_ns = st->now_ns;
    return CR_OK;
}
