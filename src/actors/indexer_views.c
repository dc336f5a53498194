/* The prefix indexer actor's JSON views for rare admin asks (/services,
 * /global_view): built on the indexer's thread, rendered by the HTTP worker
 * that asked. */
#include <assert.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/indexer_internal.h"
#include "core/log.h"
#include "crescent/error.h"

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

json_t *indexer_services_json(const struct indexer_state *st) {
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

json_t *indexer_global_view_json(const struct indexer_state *st) {
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
