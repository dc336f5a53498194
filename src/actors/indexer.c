/* The prefix indexer actor (seed 001): owns the prefix index, the external
 * publishers' sockets (indexer_sources.c) and answers queries, registrations
 * and load reports asked by the HTTP routes (src/http/indexer_routes.c).
 *
 * Sources: static registrations from conductor_config.json (the
 * indexer_config setting -- flag --indexer-config, or key "indexer_config" in
 * crescent's own config file named by --config / CRESCENT_CONFIG -- else env
 * CONDUCTOR_CONFIG_PATH), POST /register at run time, and the store's own
 * events (CR_MSG_STORE_EVENT from segments, filed under instance
 * CR_INDEXER_STORE_INSTANCE of the event's tenant). */
#include <assert.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "actors/indexer_internal.h"
#include "actors/subsystems.h"
#include "core/prefix_hash.h"
#include "core/log.h"
#include "crescent/error.h"
#include "daemon/config.h"

void cr_indexer_result_free(struct cr_indexer_result *result) { free(result); }

static void state_free(struct indexer_state *st) {
    if (st == NULL) return;
    indexer_sources_close(st);
    for (uint32_t i = 0; i < st->instance_cap; i++)
        cr_prefix_map_free(&st->instances[i].store_keys);
    free(st->instances);
    free(st->route_hits);
    if (st->zmq != NULL) zmq_ctx_term(st->zmq);
    cr_kv_decoder_destroy(st->decoder);
    cr_prefix_index_destroy(st->index);
    free(st->pollitems);
    free(st->poll_source);
    free(st->poll_is_dealer);
    free(st->static_regs);
    free(st->saved_regs);
    free(st);
}

/* A bad static config is a usage error: one line on stderr and
 * CR_ERR_INVALID_PARAMS, which makes crescentd exit 2 as for a bad flag. */
static int config_error(const char *path, const char *error) {
    fprintf(stderr, "crescentd: indexer config %s: %s\n", path, error);
    return CR_ERR_INVALID_PARAMS;
}

/* Both endpoints of a registration, as cr_indexer_endpoint_check. */
static int registration_endpoints_check(const struct indexer_state *st,
                                        const struct cr_indexer_registration *r, char *error,
                                        size_t error_size) {
    int rc = cr_indexer_endpoint_check(&st->config, "endpoint", r->endpoint, error, error_size);
    if (rc == CR_OK)
        rc = cr_indexer_endpoint_check(&st->config, "replay_endpoint", r->replay_endpoint, error,
                                       error_size);
    return rc;
}

static int load_static(struct indexer_state *st, const char *path) {
    char error[CR_INDEXER_ERROR_MAX + 512];
    if (cr_indexer_conf_load(path, &st->static_regs, &st->static_count, error, sizeof(error)) !=
        CR_OK)
        return config_error(path, error);
    /* Endpoint syntax is checked now, so a typo fails here and not at start. */
    for (uint32_t i = 0; i < st->static_count; i++) {
        const struct cr_indexer_registration *r = &st->static_regs[i];
        char why[CR_INDEXER_ERROR_MAX];
        if (registration_endpoints_check(st, r, why, sizeof(why)) != CR_OK) {
            snprintf(error, sizeof(error), "%.64s: %s", r->instance_id, why);
            return config_error(path, error);
        }
        const char *endpoints[2] = {r->endpoint, r->replay_endpoint};
        for (int e = 0; e < 2; e++) {
            if (endpoints[e][0] == '\0') continue;
            void *probe = zmq_socket(st->zmq, ZMQ_SUB);
            int zero = 0;
            zmq_setsockopt(probe, ZMQ_LINGER, &zero, sizeof(zero));
            int rc = zmq_connect(probe, endpoints[e]);
            zmq_close(probe);
            if (rc != 0) {
                snprintf(error, sizeof(error), "%.64s: bad endpoint '%.200s': %.100s",
                         r->instance_id, endpoints[e], zmq_strerror(zmq_errno()));
                return config_error(path, error);
            }
        }
    }
    return CR_OK;
}

static int indexer_create(const struct cr_daemon_config *config, void **state_out) {
    struct indexer_state *st = calloc(1, sizeof(*st));
    if (st == NULL) return CR_ERR_NOMEM;
    size_t slots = 3u * CR_INDEXER_SOURCES_MAX + 1u;
    st->pollitems = calloc(slots, sizeof(zmq_pollitem_t));
    st->poll_source = calloc(slots, sizeof(int16_t));
    st->poll_is_dealer = calloc(slots, 1);
    st->zmq = zmq_ctx_new();
    st->poll_dirty = true;
    if (st->pollitems == NULL || st->poll_source == NULL || st->poll_is_dealer == NULL ||
        st->zmq == NULL ||
        cr_prefix_index_create(CR_PREFIX_HASH_SEED_DEFAULT, &st->index) != CR_OK ||
        cr_kv_decoder_create(&st->decoder) != CR_OK) {
        state_free(st);
        return CR_ERR_NOMEM;
    }
    cr_prefix_index_set_engine_max(st->index, config->indexer_engine_hashes_max);
    st->engine_hashes_max = config->indexer_engine_hashes_max;
    st->max_message_bytes = (int64_t)config->indexer_max_message_mb << 20;
    st->config = *config;
    const char *path = cr_indexer_conf_path(config->indexer_config);
    int rc = path[0] != '\0' ? load_static(st, path) : CR_OK;
    char error[CR_INDEXER_ERROR_MAX + 1024];
    if (rc == CR_OK && indexer_persist_load(st, config->state_dir, error, sizeof(error)) != CR_OK) {
        fprintf(stderr, "crescentd: %s\n", error);
        rc = CR_ERR_INVALID_PARAMS;
    }
    if (rc != CR_OK) {
        state_free(st);
        return rc;
    }
    *state_out = st;
    return CR_OK;
}

static void indexer_destroy(void *state) { state_free(state); }

static uint64_t runtime_clock(void *rt) { return cr_runtime_now_ns(rt); }

static int indexer_start(struct cr_actor *self, void *state) {
    struct indexer_state *st = state;
    st->clock = runtime_clock;
    st->clock_ctx = cr_actor_runtime(self);
    st->now_ns = cr_runtime_now_ns(cr_actor_runtime(self));
    for (uint32_t i = 0; i < st->static_count; i++) {
        char error[CR_INDEXER_ERROR_MAX];
        int rc = indexer_source_add(st, &st->static_regs[i], error, sizeof(error));
        if (rc != CR_OK) {
            CR_ERROR("indexer", "static publisher %s: %s", st->static_regs[i].instance_id, error);
            return rc;
        }
    }
    if (st->static_count > 0)
        CR_INFO("indexer", "%u static publishers registered", st->static_count);
    /* Then those saved from /register: the later registration of a key
     * replaces the earlier one, as it did before the restart. */
    uint32_t restored = 0;
    for (uint32_t i = 0; i < st->saved_count; i++) {
        char error[CR_INDEXER_ERROR_MAX];
        if (indexer_source_add(st, &st->saved_regs[i], error, sizeof(error)) != CR_OK) {
            CR_ERROR("indexer", "saved publisher %s|%s|%u not restored: %s",
                     st->saved_regs[i].instance_id, st->saved_regs[i].tenant_id,
                     st->saved_regs[i].dp_rank, error);
            continue;
        }
        indexer_persist_mark(st, &st->saved_regs[i]);
        restored++;
    }
    if (st->saved_count > 0)
        CR_INFO("indexer", "%u of %u publishers saved in %s restored", restored, st->saved_count,
                st->persist_path);
    return CR_OK;
}

static struct indexer_instance_info *instance_info(struct indexer_state *st, uint16_t id) {
    if (id >= st->instance_cap) {
        uint32_t cap = st->instance_cap < 64 ? 64 : st->instance_cap;
        while (cap <= id) cap *= 2;
        struct indexer_instance_info *grown = realloc(st->instances, cap * sizeof(*grown));
        if (grown == NULL) return NULL;
        memset(grown + st->instance_cap, 0, (cap - st->instance_cap) * sizeof(*grown));
        for (uint32_t i = st->instance_cap; i < cap; i++)
            cr_prefix_map_init(&grown[i].store_keys, NULL);
        st->instances = grown;
        st->instance_cap = cap;
    }
    return &st->instances[id];
}

void indexer_instance_claimed(struct indexer_state *st, uint16_t id) {
    assert(st != NULL);
    if (id >= st->instance_cap || !st->instances[id].load_only) return;
    assert(st->load_only_count > 0);
    st->instances[id].load_only = false;
    st->load_only_count--;
}

void indexer_instance_forget(struct indexer_state *st, uint16_t id) {
    assert(st != NULL);
    cr_prefix_index_instance_remove(st->index, id);
    if (id >= st->instance_cap) return;
    struct indexer_instance_info *info = &st->instances[id];
    if (info->load_only) {
        assert(st->load_only_count > 0);
        st->load_only_count--;
    }
    cr_prefix_map_free(&info->store_keys);
    memset(info, 0, sizeof(*info));
    cr_prefix_map_init(&info->store_keys, NULL);
}

static void store_event(struct indexer_state *st, struct cr_msg *msg) {
    struct cr_msg_store_event *body = CR_MSG_BODY(msg, struct cr_msg_store_event);
    char tenant[sizeof(body->tenant) + 1];
    memcpy(tenant, body->tenant, sizeof(body->tenant));
    tenant[sizeof(body->tenant)] = '\0';
    uint16_t id;
    int rc = cr_prefix_index_instance_add(st->index, CR_INDEXER_STORE_INSTANCE,
                                          tenant[0] != '\0' ? tenant : "default", &id);
    struct indexer_instance_info *info =
        rc == CR_OK || rc == CR_ERR_OBJECT_ALREADY_EXISTS ? instance_info(st, id) : NULL;
    if (info != NULL) indexer_instance_claimed(st, id); /* the store's blocks file here */
    /* The engine-hash bound is for external publishers: the store's own
     * objects are bounded by its memory, and it may hold more of them. */
    cr_prefix_index_set_engine_max(st->index, 0);
    for (const cr_store_event *event = body->chain->head; event != NULL; event = event->next) {
        if (info == NULL || cr_indexer_store_apply(st->index, event, id, &info->store_keys,
                                                   &st->store_counters) != CR_OK)
            st->store_skipped++;
    }
    cr_store_event_chain_release(body->chain);
    cr_prefix_index_set_engine_max(st->index, st->engine_hashes_max);
}

/* ---- queries and routing ---- */

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
        memcpy(h->medium_tokens, m[i].medium_tokens, sizeof(h->medium_tokens));
        h->dp_mask = m[i].dp_mask;
        h->dp_tokens = dp_at;
        for (uint64_t set = h->dp_mask; set != 0; set &= set - 1)
            *dp_at++ = m[i].dp_tokens[__builtin_ctzll(set)];
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
    struct indexer_instance_info *info = instance_info(st, best);
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
        if (!q->include_unhealthy && route_unhealthy(st->route_hits[cand[i]])) {
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
}

static int do_query(struct indexer_state *st, const struct cr_indexer_query *q,
                    struct cr_indexer_result **out) {
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
    st->queries++;
    if (known && q->block_count > 0) {
        int rc = cr_prefix_index_query(st->index, context, q->seq_hashes, q->block_count,
                                       q->instance_filter != NULL ? &filter : NULL,
                                       q->instance_filter != NULL ? 1 : 0, &matches, &count);
        if (rc != CR_OK) return rc;
    }
    *out = result_build(st->index, matches, count);
    if (*out == NULL) return CR_ERR_NOMEM;
    (*out)->match = count > 0 ? CR_INDEXER_MATCH_HIT : match;
    if (q->route) route_pick(st, q, *out);
    return CR_OK;
}

/* Forgets load-only instances whose last report is older than the TTL.
 * Walks the instance table, so unless forced it runs at most once a second. */
static void load_only_sweep(struct indexer_state *st, bool force) {
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
    if (st->load_only_count >= CR_INDEXER_LOAD_ONLY_MAX) load_only_sweep(st, true);
    if (st->load_only_count >= CR_INDEXER_LOAD_ONLY_MAX) {
        st->load_only_rejected++;
        return CR_ERR_NOMEM;
    }
    int rc = cr_prefix_index_instance_add(st->index, load->instance_id, load->tenant_id, id);
    if (rc != CR_OK) return rc;
    if (instance_info(st, *id) == NULL) {
        cr_prefix_index_instance_remove(st->index, *id); /* leave nothing half-made */
        return CR_ERR_NOMEM;
    }
    st->instances[*id].load_only = true;
    st->load_only_count++;
    return CR_OK;
}

static int do_load(struct indexer_state *st, const struct cr_indexer_load *load) {
    uint16_t id;
    int rc = cr_prefix_index_instance_find(st->index, load->instance_id, load->tenant_id, &id);
    if (rc == CR_ERR_OBJECT_NOT_FOUND) rc = load_only_add(st, load, &id);
    if (rc != CR_OK) return rc;
    struct indexer_instance_info *info = instance_info(st, id);
    if (info == NULL) return CR_ERR_NOMEM;
    info->has_load = true;
    info->load = *load;
    info->load_ns = st->now_ns;
    return CR_OK;
}

/* ---- JSON views (rare admin asks: built on the actor, rendered by HTTP) ---- */

static json_t *hit_rate_json(uint64_t requests, uint64_t request_tokens, uint64_t hit_tokens) {
    return json_pack("{s:I, s:I, s:I, s:f}", "requests", (json_int_t)requests, "request_tokens",
                     (json_int_t)request_tokens, "hit_tokens", (json_int_t)hit_tokens, "hit_rate",
                     request_tokens > 0 ? (double)hit_tokens / (double)request_tokens : 0.0);
}

static json_t *load_json(const struct indexer_instance_info *info) {
    if (info == NULL || !info->has_load) return json_null();
    const struct cr_indexer_load *l = &info->load;
    return json_pack(
        "{s:I, s:I, s:I, s:I, s:I, s:f, s:f}", "request_active_slots",
        (json_int_t)l->request_active_slots, "request_total_slots",
        (json_int_t)l->request_total_slots, "kv_active_blocks", (json_int_t)l->kv_active_blocks,
        "kv_total_blocks", (json_int_t)l->kv_total_blocks, "num_requests_waiting",
        (json_int_t)l->num_requests_waiting, "gpu_cache_usage_perc", l->gpu_cache_usage_perc,
        "gpu_prefix_cache_hit_rate", l->gpu_prefix_cache_hit_rate);
}

static const struct indexer_instance_info *info_of(const struct indexer_state *st, uint16_t id) {
    return id < st->instance_cap ? &st->instances[id] : NULL;
}

static json_t *counters_json(const struct indexer_counters *c) {
    return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "batches",
                     (json_int_t)c->batches, "events", (json_int_t)c->events, "blocks_stored",
                     (json_int_t)c->blocks_stored, "blocks_removed", (json_int_t)c->blocks_removed,
                     "clears", (json_int_t)c->clears, "malformed_batches", (json_int_t)c->malformed,
                     "gaps", (json_int_t)c->gaps, "restarts", (json_int_t)c->restarts, "replays",
                     (json_int_t)c->replays, "replayed_batches", (json_int_t)c->replayed,
                     "duplicates", (json_int_t)c->duplicates, "skipped_groups",
                     (json_int_t)c->skipped_groups, "replay_timeouts",
                     (json_int_t)c->replay_timeouts);
}

static json_t *age_s(const struct indexer_state *st, bool have, uint64_t since_ns) {
    if (!have) return json_null();
    return json_real(st->now_ns > since_ns ? (double)(st->now_ns - since_ns) / 1e9 : 0.0);
}

/* A publisher's health: its link (from the SUB's monitor), how fresh its
 * batches are, replay rounds and holes, what was lost and why it is stale. */
static void health_json(const struct indexer_state *st, json_t *o, const struct indexer_source *s) {
    json_object_set_new(o, "link", json_string(s->connected        ? "connected"
                                               : s->ever_connected ? "disconnected"
                                                                   : "never connected"));
    json_object_set_new(o, "link_age_s", age_s(st, true, s->link_since_ns));
    json_object_set_new(o, "last_batch_age_s", age_s(st, s->have_batch, s->last_batch_ns));
    json_object_set_new(o, "disconnects", json_integer((json_int_t)s->disconnects));
    json_t *lost = json_array();
    for (uint32_t i = 0; i < s->lost_count; i++)
        json_array_append_new(lost, json_pack("[I, I]", (json_int_t)s->lost[i].first,
                                              (json_int_t)s->lost[i].last));
    json_object_set_new(o, "history_lost", lost);
    json_object_set_new(o, "stale_reason",
                        s->stale_reason != NULL ? json_string(s->stale_reason) : json_null());
    json_object_set_new(o, "oldest_replayed_seq",
                        s->have_oldest ? json_integer((json_int_t)s->oldest_seq) : json_null());
    json_t *c = json_object_get(o, "counters");
    json_object_set_new(c, "replay_rounds", json_integer((json_int_t)s->counters.replay_rounds));
    json_object_set_new(c, "replay_holes", json_integer((json_int_t)s->counters.replay_holes));
    json_object_set_new(c, "replays_abandoned",
                        json_integer((json_int_t)s->counters.replays_abandoned));
    json_object_set_new(c, "lost_batches", json_integer((json_int_t)s->counters.lost_batches));
    json_object_set_new(c, "engine_bound_refusals",
                        json_integer((json_int_t)s->counters.engine_refusals));
    json_object_set_new(o, "engine_hashes_bound_hit", json_boolean(s->engine_bound_hit));
}

static json_t *source_json(const struct indexer_state *st, const struct indexer_source *s) {
    const struct cr_indexer_registration *r = &s->reg;
    const struct indexer_instance_info *info = info_of(st, s->target.instance);
    json_t *o =
        json_pack("{s:s, s:s, s:I, s:s, s:s, s:s, s:s, s:s, s:I, s:s, s:b}", "instance_id",
                  r->instance_id, "tenant_id", r->tenant_id, "dp_rank", (json_int_t)r->dp_rank,
                  "endpoint", r->endpoint, "replay_endpoint", r->replay_endpoint, "type", r->type,
                  "modelname", r->model, "lora_name", r->lora_name, "block_size",
                  (json_int_t)r->block_size, "additionalsalt", r->salt, "possibly_stale", s->stale);
    if (o == NULL) return NULL;
    char key[3 * CR_INDEXER_NAME_MAX];
    snprintf(key, sizeof(key), "%s|%s|%u", r->instance_id, r->tenant_id, r->dp_rank);
    json_object_set_new(o, "key", json_string(key));
    json_object_set_new(o, "bind", json_boolean(r->bind));
    json_object_set_new(o, "last_seq",
                        s->have_seq ? json_integer((json_int_t)s->last_seq) : json_null());
    json_object_set_new(o, "replaying", json_boolean(s->replaying));
    json_object_set_new(o, "counters", counters_json(&s->counters));
    health_json(st, o, s);
    json_object_set_new(o, "load", load_json(info));
    json_object_set_new(o, "route",
                        info != NULL
                            ? hit_rate_json(info->route_requests, info->route_request_tokens,
                                            info->route_hit_tokens)
                            : hit_rate_json(0, 0, 0));
    return o;
}

static json_t *services_json(const struct indexer_state *st) {
    json_t *list = json_array();
    for (uint32_t i = 0; i < CR_INDEXER_SOURCES_MAX; i++)
        if (st->sources[i].used) json_array_append_new(list, source_json(st, &st->sources[i]));
    return json_pack("{s:o, s:I}", "services", list, "count", (json_int_t)st->source_count);
}

static json_t *instances_json(const struct indexer_state *st, uint32_t live) {
    json_t *list = json_array();
    for (uint32_t id = 0, found = 0; id < CR_PREFIX_INSTANCES_MAX && found < live; id++) {
        const char *name = cr_prefix_index_instance_name(st->index, (uint16_t)id);
        if (name == NULL) continue;
        found++;
        const struct indexer_instance_info *info = info_of(st, (uint16_t)id);
        json_array_append_new(
            list,
            json_pack("{s:s, s:s, s:o, s:o}", "instance_id", name, "tenant_id",
                      cr_prefix_index_instance_tenant(st->index, (uint16_t)id), "load",
                      load_json(info), "route",
                      info != NULL ? hit_rate_json(info->route_requests, info->route_request_tokens,
                                                   info->route_hit_tokens)
                                   : hit_rate_json(0, 0, 0)));
    }
    return list;
}

static json_t *contexts_json(const struct indexer_state *st, uint32_t live) {
    json_t *list = json_array();
    for (uint32_t c = 0, found = 0; c < CR_PREFIX_CONTEXTS_MAX && found < live; c++) {
        struct cr_prefix_context_info info;
        if (cr_prefix_index_context_info(st->index, c, &info) != CR_OK) continue;
        found++;
        json_array_append_new(
            list, json_pack("{s:s, s:s, s:s, s:I, s:s, s:I, s:I}", "tenant_id", info.tenant,
                            "model", info.model, "lora_name", info.lora_name, "block_size",
                            (json_int_t)info.block_size, "additional_salt", info.additional_salt,
                            "blocks", (json_int_t)info.blocks, "pairs", (json_int_t)info.pairs));
    }
    return list;
}

static json_t *global_view_json(const struct indexer_state *st) {
    struct cr_prefix_summary s;
    cr_prefix_index_summary(st->index, &s);
    json_t *o =
        json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "contexts", (json_int_t)s.contexts,
                  "instances", (json_int_t)s.instances, "publishers", (json_int_t)s.publishers,
                  "blocks", (json_int_t)s.blocks, "pairs", (json_int_t)s.pairs, "bytes_used",
                  (json_int_t)s.bytes_used, "runs_orphaned", (json_int_t)s.runs_orphaned,
                  "removes_unknown", (json_int_t)s.removes_unknown);
    if (o == NULL) return NULL;
    json_object_set_new(o, "context_list", contexts_json(st, s.contexts));
    json_object_set_new(o, "instance_list", instances_json(st, s.instances));
    json_object_set_new(o, "route",
                        hit_rate_json(st->routes, st->route_request_tokens, st->route_hit_tokens));
    json_object_set_new(o, "store", counters_json(&st->store_counters));
    return o;
}

/* ---- the actor ---- */

static int handle_ask(struct indexer_state *st, struct cr_msg *msg) {
    /* /global_view lists instances: expired load-only ones must be gone. */
    load_only_sweep(st, msg->type == CR_MSG_INDEXER_GLOBAL_VIEW);
    switch (msg->type) {
    case CR_MSG_INDEXER_REGISTER: {
        struct cr_msg_indexer_register *b = CR_MSG_BODY(msg, struct cr_msg_indexer_register);
        int rc = registration_endpoints_check(st, b->reg, b->error, CR_INDEXER_ERROR_MAX);
        if (rc == CR_OK) rc = indexer_persist_register(st, b->reg, b->error, CR_INDEXER_ERROR_MAX);
        if (rc != CR_OK) st->registrations_rejected++;
        return rc;
    }
    case CR_MSG_INDEXER_UNREGISTER: {
        struct cr_msg_indexer_unregister *b = CR_MSG_BODY(msg, struct cr_msg_indexer_unregister);
        return indexer_persist_unregister(st, b->instance_id, b->tenant_id, b->dp_rank, b->error,
                                          CR_INDEXER_ERROR_MAX);
    }
    case CR_MSG_INDEXER_QUERY: {
        struct cr_msg_indexer_query *b = CR_MSG_BODY(msg, struct cr_msg_indexer_query);
        return do_query(st, b->query, b->result_out);
    }
    case CR_MSG_INDEXER_LOAD:
        return do_load(st, CR_MSG_BODY(msg, struct cr_msg_indexer_load)->load);
    case CR_MSG_INDEXER_SERVICES:
    case CR_MSG_INDEXER_GLOBAL_VIEW: {
        json_t **out = CR_MSG_BODY(msg, struct cr_msg_indexer_json)->json_out;
        *out = msg->type == CR_MSG_INDEXER_SERVICES ? services_json(st) : global_view_json(st);
        return *out != NULL ? CR_OK : CR_ERR_NOMEM;
    }
    default:
        return CR_ERR_INVALID_PARAMS;
    }
}

static void indexer_handle(struct cr_actor *self, void *state, struct cr_msg *msg) {
    struct indexer_state *st = state;
    st->now_ns = cr_runtime_now_ns(cr_actor_runtime(self));
    if (msg->type == CR_MSG_WIRE) return; /* the indexer sends to no peer */
    if (msg->type == CR_MSG_STORE_EVENT) {
        store_event(st, msg);
        return;
    }
    bool known = msg->type >= CR_MSG_INDEXER_REGISTER && msg->type <= CR_MSG_INDEXER_GLOBAL_VIEW;
    if (known && (msg->flags & CR_MSG_ASK)) {
        cr_reply(msg, handle_ask(st, msg));
        return;
    }
    /* Indexer messages are all asks; anything else is counted and logged once a minute. */
    st->unknown_messages++;
    if (cr_log_ratelimit(&st->last_unknown_log_ns, st->now_ns, 60ull * 1000000000u))
        CR_WARN("indexer", "message type %u from sender %u is not handled here (%llu so far)",
                msg->type, msg->sender, (unsigned long long)st->unknown_messages);
    if (msg->flags & CR_MSG_ASK) cr_reply(msg, CR_ERR_INVALID_PARAMS);
}

static void indexer_wait_hook(struct cr_actor *self, void *state, int wake_fd, int64_t timeout_ns) {
    struct indexer_state *st = state;
    st->now_ns = cr_runtime_now_ns(cr_actor_runtime(self));
    load_only_sweep(st, false);
    indexer_wait(st, wake_fd, cr_timeout_ms(timeout_ns)); /* zmq_poll sleeps in milliseconds */
}

static void indexer_stop(struct cr_actor *self, void *state) {
    (void)self;
    indexer_sources_close(state); /* sockets are closed on the thread that used them */
}

static void indexer_discard(void *state, struct cr_msg *msg) {
    (void)state;
    if (msg->type == CR_MSG_STORE_EVENT)
        cr_store_event_chain_release(CR_MSG_BODY(msg, struct cr_msg_store_event)->chain);
}

#define STAT(name_, value_)                                                                        \
    do {                                                                                           \
        if (out->extra_count < CR_ACTOR_STATS_EXTRA_MAX) {                                         \
            out->extra[out->extra_count].name = (name_);                                           \
            out->extra[out->extra_count].value = (uint64_t)(value_);                               \
            out->extra_count++;                                                                    \
        }                                                                                          \
    } while (0)

static void indexer_stats(struct cr_actor *self, void *state, struct cr_actor_stats *out) {
    (void)self;
    const struct indexer_state *st = state;
    struct indexer_counters sum = st->store_counters;
    uint64_t stale = 0;
    for (uint32_t i = 0; i < CR_INDEXER_SOURCES_MAX; i++) {
        const struct indexer_source *s = &st->sources[i];
        if (!s->used) continue;
        const struct indexer_counters *c = &s->counters;
        sum.batches += c->batches, sum.events += c->events, sum.malformed += c->malformed;
        sum.gaps += c->gaps, sum.restarts += c->restarts, sum.replays += c->replays;
        sum.replayed += c->replayed, sum.duplicates += c->duplicates;
        sum.skipped_groups += c->skipped_groups, sum.orphans += c->orphans;
        sum.replay_timeouts += c->replay_timeouts;
        stale += s->stale;
    }
    struct cr_prefix_summary s;
    cr_prefix_index_summary(st->index, &s);
    STAT("publishers", st->source_count);
    STAT("publishers_possibly_stale", stale);
    STAT("batches_total", sum.batches);
    STAT("events_total", sum.events);
    STAT("malformed_batches_total", sum.malformed);
    STAT("gaps_total", sum.gaps);
    STAT("restarts_total", sum.restarts);
    STAT("replays_total", sum.replays);
    STAT("replayed_batches_total", sum.replayed);
    STAT("replay_timeouts_total", sum.replay_timeouts);
    STAT("duplicate_batches_total", sum.duplicates);
    STAT("skipped_groups_total", sum.skipped_groups);
    STAT("orphan_runs_total", sum.orphans);
    STAT("store_events_skipped_total", st->store_skipped);
    STAT("unknown_messages_total", st->unknown_messages);
    STAT("state_save_failures_total", st->persist_failures);
    STAT("load_only_instances", st->load_only_count);
    STAT("load_only_expired_total", st->load_only_expired);
    STAT("load_only_rejected_total", st->load_only_rejected);
    STAT("blocks", s.blocks);
    STAT("block_instance_pairs", s.pairs);
    STAT("index_bytes", s.bytes_used);
    STAT("queries_total", st->queries);
    STAT("route_requests_total", st->routes);
    STAT("route_request_tokens_total", st->route_request_tokens);
    STAT("route_hit_tokens_total", st->route_hit_tokens);
}

static const struct cr_actor_ops indexer_ops = {
    .start = indexer_start,
    .handle = indexer_handle,
    .stop = indexer_stop,
    .discard = indexer_discard,
    .wait = indexer_wait_hook,
    .stats = indexer_stats,
    .park_fence = true, /* woken for a few messages, parks after each wake */
};

int cr_indexer_register_routes(struct cr_http_front *front, struct cr_subsystems *peers);

const struct cr_subsystem_def cr_indexer_def = {
    .name = "indexer",
    .ops = &indexer_ops,
    .create = indexer_create,
    .destroy = indexer_destroy,
    .register_routes = cr_indexer_register_routes,
};
