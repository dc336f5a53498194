/* The prefix indexer actor (seed 001): owns the prefix index, the external
 * publishers' sockets (indexer_sources.c) and answers queries, registrations
 * and load reports asked by the HTTP routes (src/http/indexer_routes.c).
 *
 * Sources: static registrations from conductor_config.json (the
 * indexer_config setting -- flag --indexer-config, or key "indexer_config" in
 * crescent's own config file named by --config / CRESCENT_CONFIG -- else env
 * CONDUCTOR_CONFIG_PATH), POST /register at run time, and the store's own
 * events (CR_MSG_STORE_EVENT from segments, filed under instance
 * CR_INDEXER_STORE_INSTANCE of the event's tenant).
 *
 * This file is the actor (state, start, messages, asks, stats); queries,
 * routing and load reports are indexer_route.c, the JSON views of the admin
 * asks indexer_views.c. */
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
    indexer_nats_free(st);
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
    indexer_read_lock_destroy(st);
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
        cr_prefix_index_create(config->prefix_hash_seed, &st->index) != CR_OK ||
        cr_kv_decoder_create(&st->decoder) != CR_OK || indexer_read_lock_init(st) != CR_OK) {
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

static int indexer_start_locked(struct cr_actor *self, struct indexer_state *st) {
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
    return indexer_nats_start(st, self);
}

static int indexer_start(struct cr_actor *self, void *state) {
    indexer_write_begin(state);
    int rc = indexer_start_locked(self, state);
    indexer_write_end(state);
    return rc;
}

struct indexer_instance_info *indexer_instance_info_get(struct indexer_state *st, uint16_t id) {
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
        rc == CR_OK || rc == CR_ERR_OBJECT_ALREADY_EXISTS ? indexer_instance_info_get(st, id) : NULL;
    if (info != NULL) indexer_instance_claimed(st, id); /* the store's blocks file here */
    /* The engine-hash bound is for external publishers: the store's own
     * objects are bounded by its memory, and it may hold more of them. */
    cr_prefix_index_set_engine_max(st->index, 0);
    struct indexer_hash_keys hash_keys = {st->config.store_hash_key_model,
                                          st->config.store_hash_key_block_size};
    for (const cr_store_event *event = body->chain->head; event != NULL; event = event->next) {
        if (info == NULL || cr_indexer_store_apply_keyed(st->index, event, id, &info->store_keys,
                                                         &st->store_counters,
                                                         &hash_keys) != CR_OK)
            st->store_skipped++;
    }
    cr_store_event_chain_release(body->chain);
    cr_prefix_index_set_engine_max(st->index, st->engine_hashes_max);
}

/* ---- the actor ---- */

static int handle_ask(struct indexer_state *st, struct cr_msg *msg) {
    /* /global_view lists instances: expired load-only ones must be gone. */
    indexer_load_only_sweep(st, msg->type == CR_MSG_INDEXER_GLOBAL_VIEW);
    indexer_nats_sweep(st);
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
        return indexer_query(st, b->query, b->result_out);
    }
    case CR_MSG_INDEXER_LOAD:
        return indexer_load(st, CR_MSG_BODY(msg, struct cr_msg_indexer_load)->load);
    case CR_MSG_INDEXER_SERVICES:
    case CR_MSG_INDEXER_GLOBAL_VIEW: {
        json_t **out = CR_MSG_BODY(msg, struct cr_msg_indexer_json)->json_out;
        *out = msg->type == CR_MSG_INDEXER_SERVICES ? indexer_services_json(st) : indexer_global_view_json(st);
        return *out != NULL ? CR_OK : CR_ERR_NOMEM;
    }
    default:
        return CR_ERR_INVALID_PARAMS;
    }
}

static void indexer_handle_locked(struct cr_actor *self, struct indexer_state *st,
                                  struct cr_msg *msg) {
    st->now_ns = cr_runtime_now_ns(cr_actor_runtime(self));
    if (msg->type == CR_MSG_WIRE) return; /* the indexer sends to no peer */
    if (msg->type == CR_MSG_STORE_EVENT) {
        store_event(st, msg);
        return;
    }
    if (msg->type == CR_MSG_INDEXER_NATS) {
        indexer_nats_handle(st, CR_MSG_BODY(msg, struct cr_msg_indexer_nats));
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

/* Every message may change the index (or what /query reads beside it), so
 * the actor holds the read lock for writing while it handles one: once per
 * message, and a message is a batch (a store event chain, an ask). */
static void indexer_handle(struct cr_actor *self, void *state, struct cr_msg *msg) {
    indexer_write_begin(state);
    indexer_handle_locked(self, state, msg);
    indexer_write_end(state);
}

static void indexer_wait_hook(struct cr_actor *self, void *state, int wake_fd, int64_t timeout_ns) {
    struct indexer_state *st = state;
    indexer_write_begin(st); /* dropped by indexer_wait around its zmq_poll */
    st->now_ns = cr_runtime_now_ns(cr_actor_runtime(self));
    indexer_load_only_sweep(st, false);
    indexer_wait(st, wake_fd, cr_timeout_ms(timeout_ns)); /* zmq_poll sleeps in milliseconds */
    indexer_write_end(st);
}

static void indexer_stop(struct cr_actor *self, void *state) {
    (void)self;
    indexer_write_begin(state);
    indexer_nats_stop(state);
    indexer_sources_close(state); /* sockets are closed on the thread that used them */
    indexer_write_end(state);
}

static void indexer_discard(void *state, struct cr_msg *msg) {
    (void)state;
    if (msg->type == CR_MSG_STORE_EVENT)
        cr_store_event_chain_release(CR_MSG_BODY(msg, struct cr_msg_store_event)->chain);
    if (msg->type == CR_MSG_INDEXER_NATS)
        indexer_nats_discard(CR_MSG_BODY(msg, struct cr_msg_indexer_nats));
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
    STAT("queries_total", st->queries + atomic_load_explicit(&st->queries_shared,
                                                             memory_order_relaxed));
    STAT("route_requests_total", st->routes);
    STAT("route_request_tokens_total", st->route_request_tokens);
    STAT("route_hit_tokens_total", st->route_hit_tokens);
    indexer_nats_stats(st, out);
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
