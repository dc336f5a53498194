/* Mooncake master's per-call counts (see segments_mc.h). */
#include "actors/segments_mc.h"

#include <assert.h>
#include <stddef.h>

#include "rpc/rpc_codec.h"

#define BATCH_NAMES(m)                                                                             \
    {"batch_" m "_failures_total", "batch_" m "_partial_successes_total",                          \
     "batch_" m "_items_total", "batch_" m "_failed_items_total"}

static const struct {
    uint16_t method;
    const char *names[4]; /* failures, partial successes, items, failed items */
} batches[MC_BATCH_COUNT] = {
    [MC_BATCH_EXIST_KEY] = {CRESCENT__MASTER__METHOD__BATCH_EXIST_KEY, BATCH_NAMES("exist_key")},
    [MC_BATCH_QUERY_IP] = {CRESCENT__MASTER__METHOD__BATCH_QUERY_IP, BATCH_NAMES("query_ip")},
    [MC_BATCH_REPLICA_CLEAR] = {CRESCENT__MASTER__METHOD__BATCH_REPLICA_CLEAR,
                                BATCH_NAMES("replica_clear")},
    [MC_BATCH_GET_REPLICA_LIST] = {CRESCENT__MASTER__METHOD__BATCH_GET_REPLICA_LIST,
                                   BATCH_NAMES("get_replica_list")},
    [MC_BATCH_PUT_START] = {CRESCENT__MASTER__METHOD__BATCH_PUT_START, BATCH_NAMES("put_start")},
    [MC_BATCH_PUT_END] = {CRESCENT__MASTER__METHOD__BATCH_PUT_END, BATCH_NAMES("put_end")},
    [MC_BATCH_PUT_REVOKE] = {CRESCENT__MASTER__METHOD__BATCH_PUT_REVOKE,
                             BATCH_NAMES("put_revoke")},
};

void segments_mc_note_call(struct segments_mc_counts *c, uint16_t method, int rc,
                           const struct cr_rpc_outcome *o) {
    assert(c != NULL && o != NULL);
    (void)rc; /* a batch's verdict is its entries' */
    c->gets += o->gets;
    c->gets_valid += o->gets_valid;
    c->mem_hits += o->mem_hits;
    c->file_hits += o->file_hits;
    c->mem_hit_bytes += o->mem_hit_bytes;
    c->file_hit_bytes += o->file_hit_bytes;
    if (method == CRESCENT__MASTER__METHOD__BATCH_REMOVE) {
        c->batch_remove_items += o->items;
        c->batch_remove_failed += o->failed_items;
        return;
    }
    for (size_t i = 0; i < MC_BATCH_COUNT; i++) {
        if (batches[i].method != method) continue;
        struct segments_mc_batch_counts *b = &c->batch[i];
        b->items += o->items;
        /* As Mooncake's rpc_service: every entry failed (an empty batch
         * included) is a failure, some of them a partial success; both add
         * their failed entries. */
        if (o->failed_items == o->items) b->failures++;
        else if (o->failed_items != 0) b->partial_successes++;
        b->failed_items += o->failed_items;
        return;
    }
}

void segments_mc_note_task_refused(struct segments_mc_counts *c, uint16_t method) {
    assert(c != NULL);
    if (method == CRESCENT__MASTER__METHOD__CREATE_COPY_TASK) c->create_copy_failures++;
    else if (method == CRESCENT__MASTER__METHOD__CREATE_MOVE_TASK) c->create_move_failures++;
}

void segments_mc_note_evict_pass(struct segments_mc_counts *c, uint32_t evicted) {
    assert(c != NULL);
    c->evict_attempts++;
    c->evict_successes += evicted > 0;
}

static void add(struct cr_actor_stats *out, const char *name, uint64_t value) {
    if (out->extra_count >= CR_ACTOR_STATS_EXTRA_MAX) return;
    out->extra[out->extra_count].name = name;
    out->extra[out->extra_count].value = value;
    out->extra_count++;
}

void segments_mc_stats(const struct segments_mc_counts *c, const struct cr_store_stats *s,
                       const uint64_t *method_failures, struct cr_actor_stats *out) {
    assert(c != NULL && s != NULL && method_failures != NULL && out != NULL);
    for (size_t i = 0; i < MC_BATCH_COUNT; i++) {
        const struct segments_mc_batch_counts *b = &c->batch[i];
        add(out, batches[i].names[0], b->failures);
        add(out, batches[i].names[1], b->partial_successes);
        add(out, batches[i].names[2], b->items);
        add(out, batches[i].names[3], b->failed_items);
    }
    add(out, "batch_remove_items_total", c->batch_remove_items);
    add(out, "batch_remove_failed_items_total", c->batch_remove_failed);
    add(out, "gets_total", c->gets);
    add(out, "gets_valid_total", c->gets_valid);
    add(out, "mem_cache_hits_total", c->mem_hits);
    add(out, "file_cache_hits_total", c->file_hits);
    add(out, "mem_cache_hit_bytes_total", c->mem_hit_bytes);
    add(out, "file_cache_hit_bytes_total", c->file_hit_bytes);
    add(out, "evictions_attempted_total", c->evict_attempts);
    add(out, "evictions_successful_total", c->evict_successes);
    /* Task calls refused here: a create before it reached tasks, and the
     * executor's secret check of FetchTasks/MarkTaskToComplete/QueryTask. */
    add(out, "failures_create_copy_task_total",
        c->create_copy_failures + method_failures[CRESCENT__MASTER__METHOD__CREATE_COPY_TASK]);
    add(out, "failures_create_move_task_total",
        c->create_move_failures + method_failures[CRESCENT__MASTER__METHOD__CREATE_MOVE_TASK]);
    add(out, "failures_query_task_total", method_failures[CRESCENT__MASTER__METHOD__QUERY_TASK]);
    add(out, "failures_fetch_tasks_total", method_failures[CRESCENT__MASTER__METHOD__FETCH_TASKS]);
    add(out, "failures_mark_task_to_complete_total",
        method_failures[CRESCENT__MASTER__METHOD__MARK_TASK_TO_COMPLETE]);
    add(out, "soft_pinned_objects", s->soft_pinned);
    add(out, "mem_cached_objects", s->mem_cached_objects);
    add(out, "file_cached_objects", s->file_cached_objects);
    add(out, "put_start_partial_allocations_total", s->put_partial_allocations);
    add(out, "discards_released_total", s->discards_released);
    add(out, "discarded_put_bytes", s->discarded_put_bytes);
}
