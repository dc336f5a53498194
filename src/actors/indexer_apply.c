/* Decoded KV-event batches and the store's own events onto the prefix index
 * (see indexer_internal.h).  No sockets, no clocks: unit-tested directly. */
#include <assert.h>
#include <stdio.h>
#include <string.h>
#include <xxhash.h>

#include "actors/indexer_internal.h"
#include "crescent/error.h"

/* One store-style block (the store's own event, or a store-dialect event
 * that arrived over ZMQ). */
struct store_block {
    const char *key, *block_hash, *parent;
    size_t key_len, block_hash_len, parent_len;
    const char *tenant, *model;
    uint32_t block_size;
    const uint32_t *tokens;
    size_t token_count;
    uint8_t media_mask; /* bit per medium id */
    const struct indexer_hash_keys *hash_keys; /* NULL: objects without tokens are orphans */
};

#define STORE_RUN_MAX 64u /* blocks of one store object: far above any real object */

static uint64_t str_id(const char *s, size_t len) { return XXH3_64bits(s, len); }

/* The id of the block `back` places before a store object's last block. */
static uint64_t run_block_id(uint64_t last, size_t back) {
    return XXH3_64bits_withSeed(&last, sizeof(last), back);
}

static uint32_t event_dp(const struct indexer_target *t, const struct cr_kv_batch *b,
                         const struct cr_kv_event *e) {
    if (e->has_dp_rank) return e->dp_rank;
    if (b->has_dp_rank) return b->dp_rank;
    return t->dp_rank;
}

static const char *or_default(const struct cr_kv_str *s, const char *fallback) {
    return s->ptr != NULL && s->len > 0 ? s->ptr : fallback;
}

static bool prefix_group(const struct cr_kv_event *e) {
    if (e->spec_kind != CR_KV_SPEC_UNSET && e->spec_kind != CR_KV_SPEC_FULL_ATTENTION) return false;
    return !(e->has_sliding_window && e->sliding_window > 0);
}

static bool name_fits(const struct cr_kv_str *s) { return s->len <= CR_PREFIX_NAME_MAX; }

/* What applying a batch would add to the index, counted while checking
 * (an event needing a context another event of the batch also needs counts
 * twice: a safe over-estimate that matters only near the limits). */
struct batch_needs {
    uint32_t new_media;
    uint32_t new_contexts;
};

static struct cr_prefix_context_key event_context_key(const struct indexer_target *t,
                                                      const struct cr_kv_event *e) {
    return (struct cr_prefix_context_key){
        .tenant = t->tenant,
        .model = or_default(&e->model_name, t->model),
        .lora_name = e->lora_name.ptr != NULL ? e->lora_name.ptr : t->lora_name,
        .block_size = e->block_size != 0 ? e->block_size : t->block_size,
        .additional_salt = e->additional_salt.ptr != NULL ? e->additional_salt.ptr : t->salt,
    };
}

/* Read-only: counts the medium name and context an event would create. */
static int check_needs(struct cr_prefix_index *index, const struct indexer_target *t,
                       const struct cr_kv_event *e, uint32_t i, struct batch_needs *needs,
                       char *error, size_t size) {
    uint8_t medium;
    int rc = e->medium.ptr != NULL ? cr_prefix_index_medium_find(index, e->medium.ptr, &medium)
                                   : CR_OK;
    if (rc == CR_ERR_INVALID_PARAMS) {
        snprintf(error, size, "event %u: medium name '%.32s' is too long", i, e->medium.ptr);
        return CR_ERR_PROTOCOL;
    }
    if (rc == CR_ERR_OBJECT_NOT_FOUND && e->kind == CR_KV_EVENT_STORED) needs->new_media++;
    if (e->kind != CR_KV_EVENT_STORED || e->hash_count == 0 || !prefix_group(e)) return CR_OK;
    struct cr_prefix_context_key key = event_context_key(t, e);
    if (e->dialect == CR_KV_DIALECT_STORE) key.lora_name = key.additional_salt = NULL;
    if (key.block_size == 0) return CR_OK; /* nothing placeable: counted as an orphan */
    uint32_t context;
    /* create = false: a lookup only. */
    if (cr_prefix_index_context(index, &key, false, &context) == CR_ERR_OBJECT_NOT_FOUND)
        needs->new_contexts++;
    return CR_OK;
}

static int check_event(struct cr_prefix_index *index, const struct indexer_target *t,
                       const struct cr_kv_batch *b, uint32_t i, struct batch_needs *needs,
                       char *error, size_t size) {
    const struct cr_kv_event *e = &b->events[i];
    if (event_dp(t, b, e) >= CR_PREFIX_DP_RANKS) {
        snprintf(error, size, "event %u: dp rank %u is not below %u", i, event_dp(t, b, e),
                 CR_PREFIX_DP_RANKS);
        return CR_ERR_PROTOCOL;
    }
    if (!name_fits(&e->lora_name) || !name_fits(&e->model_name) ||
        !name_fits(&e->additional_salt)) {
        snprintf(error, size, "event %u: a model, LoRA or salt name is over %u bytes", i,
                 CR_PREFIX_NAME_MAX);
        return CR_ERR_PROTOCOL;
    }
    if (e->kind == CR_KV_EVENT_STORED && e->has_token_ids && e->dialect != CR_KV_DIALECT_STORE) {
        uint32_t bs = e->block_size != 0 ? e->block_size : t->block_size;
        if (bs == 0 || (uint64_t)e->token_count != (uint64_t)e->hash_count * bs) {
            snprintf(error, size, "event %u: %u token ids do not make %u blocks of %u", i,
                     e->token_count, e->hash_count, bs);
            return CR_ERR_PROTOCOL;
        }
    }
    return check_needs(index, t, e, i, needs, error, size);
}

/* Checks the whole batch without changing the index, including that every
 * medium name and context it needs exists or fits: so applying it cannot
 * stop half-way for lack of room. */
int cr_indexer_batch_check(struct cr_prefix_index *index, const struct indexer_target *target,
                           const struct cr_kv_batch *batch, char *error, size_t error_size) {
    assert(index != NULL && target != NULL && batch != NULL && error != NULL);
    struct batch_needs needs = {0};
    for (uint32_t i = 0; i < batch->event_count; i++) {
        int rc = check_event(index, target, batch, i, &needs, error, error_size);
        if (rc != CR_OK) return rc;
    }
    if (needs.new_media > cr_prefix_index_media_free(index)) {
        snprintf(error, error_size, "%u new medium names, room for %u (at most %u in all)",
                 needs.new_media, cr_prefix_index_media_free(index), CR_PREFIX_MEDIA_MAX);
        return CR_ERR_PROTOCOL;
    }
    if (needs.new_contexts > cr_prefix_index_contexts_free(index) ||
        target->counters->contexts_created + needs.new_contexts > CR_INDEXER_CONTEXTS_PER_SOURCE) {
        snprintf(error, error_size,
                 "%u new (model, LoRA, block size, salt) contexts: over this publisher's %u "
                 "(it has %llu) or the index's room (%u)",
                 needs.new_contexts, CR_INDEXER_CONTEXTS_PER_SOURCE,
                 (unsigned long long)target->counters->contexts_created,
                 cr_prefix_index_contexts_free(index));
        return CR_ERR_PROTOCOL;
    }
    return CR_OK;
}

/* Finds the context, creating it within the source's quota. */
static int context_for(struct cr_prefix_index *index, const struct cr_prefix_context_key *key,
                       struct indexer_counters *counters, uint32_t *context) {
    int rc = cr_prefix_index_context(index, key, false, context);
    if (rc != CR_ERR_OBJECT_NOT_FOUND) return rc;
    if (counters->contexts_created >= CR_INDEXER_CONTEXTS_PER_SOURCE) return CR_ERR_NOMEM;
    rc = cr_prefix_index_context(index, key, true, context);
    if (rc == CR_OK) counters->contexts_created++;
    return rc;
}

static int event_context(struct cr_prefix_index *index, const struct indexer_target *t,
                         const struct cr_kv_event *e, uint32_t *context) {
    struct cr_prefix_context_key key = event_context_key(t, e);
    return context_for(index, &key, t->counters, context);
}

static int apply_stored(struct cr_prefix_index *index, const struct indexer_target *t, uint32_t pub,
                        const struct cr_kv_event *e) {
    if (!prefix_group(e)) {
        t->counters->skipped_groups++;
        return CR_OK;
    }
    if (e->hash_count == 0) return CR_OK;
    uint8_t medium;
    int rc = cr_prefix_index_medium(index, e->medium.ptr, &medium);
    uint32_t context;
    if (rc == CR_OK) rc = event_context(index, t, e, &context);
    if (rc != CR_OK) return rc;
    if (e->has_token_ids && !e->seq_hashes) {
        uint32_t bs = e->block_size != 0 ? e->block_size : t->block_size;
        rc = cr_prefix_index_stored_tokens(index, pub, context,
                                           e->has_parent ? &e->parent_hash : NULL, e->hashes,
                                           e->hash_count, e->token_ids, e->token_count, bs, medium);
    } else if (e->seq_hashes) {
        rc = cr_prefix_index_stored_hashes(index, pub, context, NULL, e->hashes, e->hash_count,
                                           medium);
    } else if (e->local_hashes != NULL) {
        rc = cr_prefix_index_stored_locals(index, pub, context,
                                           e->has_parent ? &e->parent_hash : NULL, e->hashes,
                                           e->local_hashes, e->hash_count, medium);
    } else {
        t->counters->orphans++; /* engine hashes without tokens cannot be placed */
        return CR_OK;
    }
    if (rc == CR_ERR_OBJECT_NOT_FOUND) {
        t->counters->orphans++;
        return CR_OK;
    }
    if (rc == CR_OK) t->counters->blocks_stored += e->hash_count;
    return rc;
}

static int apply_removed(struct cr_prefix_index *index, const struct indexer_target *t,
                         uint32_t pub, const struct cr_kv_event *e) {
    int medium = CR_PREFIX_MEDIUM_ALL;
    if (e->medium.ptr != NULL) {
        uint8_t m;
        /* A removal never registers a name: an unknown medium holds nothing. */
        if (cr_prefix_index_medium_find(index, e->medium.ptr, &m) != CR_OK) return CR_OK;
        medium = m;
    }
    t->counters->blocks_removed += e->hash_count;
    return cr_prefix_index_removed_any(index, pub, e->hashes, e->hash_count, medium);
}

/* CPU and DISK are built-in media (cr_prefix_index_create names them, at
 * fixed ids), so no name lookup per event: it was a strlen and a
 * strcasecmp per medium, 11% of the indexer's time under batched puts. */
static uint8_t replica_media(bool memory, bool disk) {
    return (uint8_t)((memory ? 1u << CR_PREFIX_MEDIUM_CPU : 0u) |
                     (disk ? 1u << CR_PREFIX_MEDIUM_DISK : 0u));
}

static uint8_t kv_replica_media(const struct cr_kv_event *e) {
    bool memory = false, disk = false;
    for (uint32_t i = 0; i < e->replica_count; i++) {
        const char *type = e->replicas[i].type.ptr != NULL ? e->replicas[i].type.ptr : "";
        if (strcmp(type, "memory") == 0)
            memory = true;
        else
            disk = true;
    }
    if (!memory && !disk) memory = true; /* an unplaced object is still in the store's memory */
    return replica_media(memory, disk);
}

static int store_block_stored(struct cr_prefix_index *index, uint32_t pub,
                              const struct store_block *sb, struct cr_prefix_map *keys,
                              struct indexer_counters *counters);
static int store_block_update(struct cr_prefix_index *index, uint32_t pub, const char *key,
                              size_t key_len, uint8_t media_mask, struct cr_prefix_map *keys);

static int apply_store_dialect(struct cr_prefix_index *index, const struct indexer_target *t,
                               uint32_t pub, const struct cr_kv_event *e) {
    size_t key_len = e->key.ptr != NULL ? e->key.len : 0;
    uint8_t mask = kv_replica_media(e);
    if (e->kind == CR_KV_EVENT_UPDATED) {
        if (e->replica_count == 0) mask = 0;
        return store_block_update(index, pub, e->key.ptr, key_len, mask, t->keys);
    }
    struct store_block sb = {
        .key = e->key.ptr != NULL ? e->key.ptr : "",
        .key_len = key_len,
        .block_hash = e->block_hash.ptr != NULL ? e->block_hash.ptr : "",
        .block_hash_len = e->block_hash.ptr != NULL ? e->block_hash.len : 0,
        .parent = e->parent_block_hash.ptr != NULL ? e->parent_block_hash.ptr : "",
        .parent_len = e->parent_block_hash.ptr != NULL ? e->parent_block_hash.len : 0,
        .tenant = t->tenant,
        .model = or_default(&e->model_name, t->model),
        .block_size = e->block_size != 0 ? e->block_size : t->block_size,
        .tokens = e->token_ids,
        .token_count = e->token_count,
        .media_mask = mask,
    };
    return store_block_stored(index, pub, &sb, t->keys, t->counters);
}

static int apply_event(struct cr_prefix_index *index, const struct indexer_target *t,
                       const struct cr_kv_batch *b, const struct cr_kv_event *e) {
    uint32_t pub, dp = event_dp(t, b, e);
    int rc = cr_prefix_index_publisher(index, t->instance, (uint8_t)dp, &pub);
    if (rc != CR_OK) return rc;
    t->counters->events++;
    t->counters->dp_ranks_seen |= 1ull << dp; /* a restart or unregister clears each */
    if (e->dialect == CR_KV_DIALECT_STORE && e->kind != CR_KV_EVENT_CLEARED)
        return apply_store_dialect(index, t, pub, e);
    switch (e->kind) {
    case CR_KV_EVENT_STORED:
        return apply_stored(index, t, pub, e);
    case CR_KV_EVENT_REMOVED:
        return apply_removed(index, t, pub, e);
    case CR_KV_EVENT_CLEARED:
        t->counters->clears++;
        if (e->dialect == CR_KV_DIALECT_STORE && t->keys != NULL) cr_prefix_map_free(t->keys);
        return cr_prefix_index_cleared(index, pub);
    case CR_KV_EVENT_UPDATED:
        return CR_OK; /* only the store dialect has updates */
    }
    return CR_OK;
}

int cr_indexer_batch_apply(struct cr_prefix_index *index, const struct indexer_target *target,
                           const struct cr_kv_batch *batch) {
    assert(index != NULL && target != NULL && batch != NULL && target->counters != NULL);
    target->counters->batches++;
    for (uint32_t i = 0; i < batch->event_count; i++) {
        int rc = apply_event(index, target, batch, &batch->events[i]);
        if (rc != CR_OK) return rc;
    }
    return CR_OK;
}

/* ---- store blocks ---- */

bool cr_indexer_seq_hash_of(const char *s, size_t len, uint64_t *out) {
    assert(s != NULL || len == 0);
    bool hex = len > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
    uint64_t base = hex ? 16 : 10, v = 0;
    size_t i = hex ? 2 : 0;
    if (i == len) return false;
    for (; i < len; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9'             ? c - '0'
                : hex && c >= 'a' && c <= 'f' ? c - 'a' + 10
                : hex && c >= 'A' && c <= 'F' ? c - 'A' + 10
                                              : -1;
        if (d < 0 || v > (UINT64_MAX - (uint64_t)d) / base) return false;
        v = v * base + (uint64_t)d;
    }
    *out = v;
    return true;
}

/* An object put without tokens (Mooncake's client has no way to send them)
 * whose id (block hash, else key) is a sequence hash: one block under the
 * configured model and block size, named by that hash, as Mooncake's own
 * master publishes such keys (RFC #1527 events with seq_hashes, no tokens,
 * model and block size from the indexer's side). */
static int store_hash_key(struct cr_prefix_index *index, uint32_t pub, const struct store_block *sb,
                          struct cr_prefix_map *keys, struct indexer_counters *counters) {
    const char *id = sb->block_hash_len > 0 ? sb->block_hash : sb->key;
    size_t id_len = sb->block_hash_len > 0 ? sb->block_hash_len : sb->key_len;
    uint64_t seq;
    if (sb->hash_keys == NULL || sb->hash_keys->block_size == 0 ||
        !cr_indexer_seq_hash_of(id, id_len, &seq)) {
        counters->orphans++; /* no tokens and no hash: nothing a prompt can match */
        return CR_ERR_OBJECT_NOT_FOUND;
    }
    struct cr_prefix_context_key key = {
        .tenant = sb->tenant, .model = sb->hash_keys->model, .block_size = sb->hash_keys->block_size};
    uint32_t context;
    int rc = context_for(index, &key, counters, &context);
    if (rc == CR_ERR_NOMEM) counters->orphans++;
    for (uint8_t m = 0; m < CR_PREFIX_MEDIA_MAX && rc == CR_OK; m++) {
        if (sb->media_mask & (1u << m))
            rc = cr_prefix_index_stored_hashes(index, pub, context, NULL, &seq, 1, m);
    }
    if (rc != CR_OK) return rc;
    counters->blocks_stored++;
    return cr_prefix_map_put(keys, str_id(sb->key, sb->key_len), seq);
}

static int store_block_stored(struct cr_prefix_index *index, uint32_t pub,
                              const struct store_block *sb, struct cr_prefix_map *keys,
                              struct indexer_counters *counters) {
    if (sb->token_count == 0) return store_hash_key(index, pub, sb, keys, counters);
    uint32_t bs = sb->block_size;
    size_t run = bs != 0 ? sb->token_count / bs : 0;
    if (run == 0 || run > STORE_RUN_MAX || run * bs != sb->token_count) {
        counters->orphans++; /* no whole blocks of tokens: nothing a prompt can match */
        return CR_ERR_OBJECT_NOT_FOUND;
    }
    struct cr_prefix_context_key key = {.tenant = sb->tenant, .model = sb->model, .block_size = bs};
    uint32_t context;
    int rc = context_for(index, &key, counters, &context);
    if (rc == CR_ERR_NOMEM) counters->orphans++; /* over the quota: skipped, counted */
    if (rc != CR_OK) return rc;
    uint64_t engine[STORE_RUN_MAX];
    const char *id = sb->block_hash_len > 0 ? sb->block_hash : sb->key;
    size_t id_len = sb->block_hash_len > 0 ? sb->block_hash_len : sb->key_len;
    /* The object's own id names its last block; earlier blocks of a
     * multi-block object get ids derived from that one (run_block_id), so
     * an update that names the object by key finds them all again. */
    engine[run - 1] = str_id(id, id_len);
    for (size_t i = 0; i + 1 < run; i++) engine[i] = run_block_id(engine[run - 1], run - 1 - i);
    uint64_t parent = str_id(sb->parent, sb->parent_len);
    for (uint8_t m = 0; m < CR_PREFIX_MEDIA_MAX && rc == CR_OK; m++) {
        if (!(sb->media_mask & (1u << m))) continue;
        rc = cr_prefix_index_stored_tokens(index, pub, context, sb->parent_len > 0 ? &parent : NULL,
                                           engine, run, sb->tokens, sb->token_count, bs, m);
    }
    if (rc == CR_ERR_OBJECT_NOT_FOUND) counters->orphans++;
    if (rc != CR_OK) return rc;
    counters->blocks_stored += run;
    return cr_prefix_map_put(keys, str_id(sb->key, sb->key_len), engine[run - 1]);
}

/* A replica change: the object is now on exactly the media in media_mask
 * (none: it is gone).  All its blocks move: the last, which its key maps
 * to, and the earlier ones derived from it, found while the index holds
 * them in the same context. */
static int store_block_update(struct cr_prefix_index *index, uint32_t pub, const char *key,
                              size_t key_len, uint8_t media_mask, struct cr_prefix_map *keys) {
    uint64_t key_id = str_id(key != NULL ? key : "", key_len);
    uint64_t engine[STORE_RUN_MAX], own[STORE_RUN_MAX];
    uint32_t context;
    if (!cr_prefix_map_get(keys, key_id, &engine[0]) ||
        !cr_prefix_index_engine_find(index, pub, engine[0], &context, &own[0])) {
        return CR_ERR_OBJECT_NOT_FOUND;
    }
    size_t n = 1;
    for (; n < STORE_RUN_MAX; n++) {
        uint32_t c;
        engine[n] = run_block_id(engine[0], n);
        if (!cr_prefix_index_engine_find(index, pub, engine[n], &c, &own[n]) || c != context)
            break;
    }
    int rc = cr_prefix_index_removed_any(index, pub, engine, n, CR_PREFIX_MEDIUM_ALL);
    if (media_mask == 0) {
        cr_prefix_map_del(keys, key_id, NULL);
        return rc;
    }
    for (uint8_t m = 0; m < CR_PREFIX_MEDIA_MAX && rc == CR_OK; m++) {
        if (media_mask & (1u << m))
            rc = cr_prefix_index_stored_hashes(index, pub, context, engine, own, n, m);
    }
    return rc;
}

static uint8_t store_event_media(const struct cr_store_event *ev) {
    bool memory = false, disk = false;
    for (uint32_t i = 0; i < ev->replica_count; i++) {
        if (ev->replicas[i].type == CR_REPLICA_MEMORY)
            memory = true;
        else
            disk = true;
    }
    if (!memory && !disk) memory = true;
    return replica_media(memory, disk);
}

int cr_indexer_store_apply(struct cr_prefix_index *index, const struct cr_store_event *event,
                           uint16_t instance, struct cr_prefix_map *keys,
                           struct indexer_counters *counters) {
    return cr_indexer_store_apply_keyed(index, event, instance, keys, counters, NULL);
}

int cr_indexer_store_apply_keyed(struct cr_prefix_index *index, const struct cr_store_event *event,
                                 uint16_t instance, struct cr_prefix_map *keys,
                                 struct indexer_counters *counters,
                                 const struct indexer_hash_keys *hash_keys) {
    assert(index != NULL && event != NULL && keys != NULL && counters != NULL);
    uint32_t pub;
    int rc = cr_prefix_index_publisher(index, instance, 0, &pub);
    if (rc != CR_OK) return rc;
    counters->events++;
    if (event->kind == CR_STORE_EVENT_REMOVE_ALL) {
        counters->clears++;
        cr_prefix_map_free(keys);
        return cr_prefix_index_cleared(index, pub);
    }
    uint8_t mask = store_event_media(event);
    if (event->kind == CR_STORE_EVENT_BLOCK_UPDATE) {
        if (event->replica_count == 0) mask = 0;
        return store_block_update(index, pub, event->key.ptr, event->key.len, mask, keys);
    }
    const cr_store_event_info *info = &event->info;
    struct store_block sb = {
        .key = event->key.ptr != NULL ? event->key.ptr : "",
        .key_len = event->key.len,
        .block_hash = info->block_hash.ptr != NULL ? info->block_hash.ptr : "",
        .block_hash_len = info->block_hash.len,
        .parent = info->parent_block_hash.ptr != NULL ? info->parent_block_hash.ptr : "",
        .parent_len = info->parent_block_hash.len,
        .tenant = cr_prefix_index_instance_tenant(index, instance),
        .model = info->model_name.ptr != NULL ? info->model_name.ptr : "",
        .block_size = info->block_size,
        .tokens = info->token_ids,
        .token_count = info->token_count,
        .media_mask = mask,
        .hash_keys = hash_keys,
    };
    return store_block_stored(index, pub, &sb, keys, counters);
}
