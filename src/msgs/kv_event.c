/* KV-cache event decoding (see kv_event.h for the dialects and the rules).
 *
 * Three passes, none of which recurses:
 *   1. scan_payload walks the raw msgpack bytes with an explicit stack of
 *      CR_KV_MAX_DEPTH counters.  It rejects truncation, trailing bytes, the
 *      reserved byte 0xc1, nesting too deep and container counts larger than
 *      the bytes left, and it totals the msgpack_object storage msgpack-c will
 *      need.  This matters because msgpack-c allocates `count` objects as soon
 *      as it reads an array header: a 5-byte "array32 of 4G" would otherwise
 *      ask for 96 GiB.
 *   2. msgpack_unpack builds the object tree in a zone pre-sized from the
 *      scan, so it never grows a chunk; strings and bins point into the payload.
 *   3. decode_batch type-checks every field and writes normalized events
 *      into the output arena.  The batch is published only if all succeed.
 * Passes 1 and 2 are kv_event_scan.c (once per batch); this file is pass 3,
 * the arena and the API. */
#include "msgs/kv_event.h"

#include <assert.h>
#include <math.h>
#include <msgpack.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crescent/error.h"
#include "msgs/kv_event_internal.h"

#define ARENA_MIN_CHUNK_BYTES ((size_t)64 * 1024)

/* ---- private types (the decoder's state is in kv_event_internal.h) ---- */

/* vLLM/SGLang event fields, in BlockStored's positional order. */
enum vllm_field {
    VF_HASHES,
    VF_PARENT,
    VF_TOKENS,
    VF_BLOCK_SIZE,
    VF_LORA_ID,
    VF_MEDIUM,
    VF_LORA_NAME,
    VF_EXTRA_KEYS,
    VF_GROUP_IDX,
    VF_SPEC_KIND,
    VF_SLIDING_WINDOW,
    VF_COUNT,
    VF_UNKNOWN = VF_COUNT,
};

/* Standardized event fields. */
enum std_field {
    SF_EVENT_ID,
    SF_TIMESTAMP,
    SF_EVENT_TYPE,
    SF_MODEL_NAME,
    SF_BLOCK_SIZE,
    SF_SALT,
    SF_LORA_NAME,
    SF_LORA_ID,
    SF_TENANT_ID,
    SF_BACKEND_ID,
    SF_MEDIUM,
    SF_DP_RANK,
    SF_SEQ_HASHES,
    SF_BASE_BLOCK_IDX,
    SF_PARENT_HASH,
    SF_TOKENS,
    SF_COUNT,
    SF_UNKNOWN = SF_COUNT,
};

/* ---- tables ----------------------------------------------------------- */

static const char *const vllm_field_names[VF_COUNT] = {
    "block_hashes", "parent_block_hash", "token_ids", "block_size",
    "lora_id", "medium", "lora_name", "extra_keys",
    "group_idx", "kv_cache_spec_kind", "kv_cache_spec_sliding_window",
};

static const char *const std_field_names[SF_COUNT] = {
    "event_id", "timestamp", "event_type", "model_name", "block_size", "additional_salt",
    "lora_name", "lora_id", "tenant_id", "backend_id", "medium", "dp_rank",
    "seq_hashes", "base_block_idx", "parent_hash", "token_ids",
};

/* BlockRemoved's positions 1..3. */
static const enum vllm_field vllm_removed_positions[] = {VF_HASHES, VF_MEDIUM, VF_GROUP_IDX};

/* ---- errors ----------------------------------------------------------- */

int cr_kv_fail(struct kv_ctx *c, const char *fmt, ...) {
    assert(c != NULL && fmt != NULL);
    if (c->err == NULL || c->err_size == 0) return CR_ERR_PROTOCOL;
    size_t used = 0;
    if (c->event_index >= 0) {
        int n = snprintf(c->err, c->err_size, "event %ld: ", c->event_index);
        used = n < 0 ? 0 : ((size_t)n < c->err_size ? (size_t)n : c->err_size - 1);
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err + used, c->err_size - used, fmt, ap);
    va_end(ap);
    return CR_ERR_PROTOCOL;
}

static const char *obj_type_name(const msgpack_object *o) {
    switch (o->type) {
    case MSGPACK_OBJECT_NIL: return "nil";
    case MSGPACK_OBJECT_BOOLEAN: return "bool";
    case MSGPACK_OBJECT_POSITIVE_INTEGER: return "uint";
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: return "int";
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64: return "float";
    case MSGPACK_OBJECT_STR: return "str";
    case MSGPACK_OBJECT_ARRAY: return "array";
    case MSGPACK_OBJECT_MAP: return "map";
    case MSGPACK_OBJECT_BIN: return "bin";
    default: return "ext";
    }
}

/* ---- arena ------------------------------------------------------------ */

static struct arena_chunk *arena_chunk_new(size_t cap) {
    assert(cap > 0);
    struct arena_chunk *chunk = malloc(sizeof(*chunk) + cap);
    if (chunk == NULL) return NULL;
    chunk->next = NULL;
    chunk->cap = cap;
    chunk->used = 0;
    return chunk;
}

static void arena_free(struct kv_arena *a) {
    assert(a != NULL);
    for (struct arena_chunk *c = a->head, *next; c != NULL; c = next) {
        next = c->next;
        free(c);
    }
    a->head = a->cur = NULL;
}

/* Rewinds; coalesces a multi-chunk arena into one chunk (one malloc, only
 * when the previous batch outgrew the arena). */
static void arena_reset(struct kv_arena *a) {
    assert(a != NULL && a->head != NULL);
    if (a->head->next != NULL) {
        size_t total = 0;
        for (struct arena_chunk *c = a->head; c != NULL; c = c->next) total += c->cap;
        struct arena_chunk *one = arena_chunk_new(total);
        if (one != NULL) {
            arena_free(a);
            a->head = one;
        }
    }
    for (struct arena_chunk *c = a->head; c != NULL; c = c->next) c->used = 0;
    a->cur = a->head;
}

/* Returns 8-byte aligned storage for `bytes`, or NULL when malloc fails. */
static void *arena_alloc(struct kv_arena *a, size_t bytes) {
    assert(a != NULL && a->cur != NULL);
    bytes = (bytes + 7u) & ~(size_t)7u;
    while (a->cur->cap - a->cur->used < bytes) {
        if (a->cur->next == NULL) {
            size_t cap = a->cur->cap * 2 > bytes ? a->cur->cap * 2 : bytes;
            a->cur->next = arena_chunk_new(cap);
            if (a->cur->next == NULL) return NULL;
        }
        a->cur = a->cur->next;
    }
    void *p = (char *)a->cur->data + a->cur->used;
    a->cur->used += bytes;
    return p;
}

static int ctx_alloc(struct kv_ctx *c, size_t bytes, void **out) {
    assert(c != NULL && out != NULL);
    *out = arena_alloc(&c->dec->arena, bytes);
    if (*out == NULL) {
        if (c->err != NULL && c->err_size > 0) snprintf(c->err, c->err_size, "out of memory");
        return CR_ERR_NOMEM;
    }
    return CR_OK;
}

/* ---- pass 3: field getters -------------------------------------------- */

static bool obj_is_str(const msgpack_object *o, const char *lit) {
    size_t n = strlen(lit);
    return o->type == MSGPACK_OBJECT_STR && o->via.str.size == n &&
           memcmp(o->via.str.ptr, lit, n) == 0;
}

/* The 64-bit value of an int (two's complement) or bin (last 8 bytes BE). */
static bool hash_value(const msgpack_object *o, uint64_t *out) {
    switch (o->type) {
    case MSGPACK_OBJECT_POSITIVE_INTEGER: *out = o->via.u64; return true;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: *out = (uint64_t)o->via.i64; return true;
    case MSGPACK_OBJECT_BIN: {
        uint32_t n = o->via.bin.size, start = n > 8 ? n - 8 : 0;
        uint64_t v = 0;
        for (uint32_t i = start; i < n; i++) v = (v << 8) | (uint8_t)o->via.bin.ptr[i];
        *out = v;
        return true;
    }
    default: return false;
    }
}

static int get_hash_list(struct kv_ctx *c, const msgpack_object *o, const char *ev,
                         const char *field, struct cr_kv_event *out) {
    assert(c != NULL && out != NULL);
    if (o->type != MSGPACK_OBJECT_ARRAY)
        return cr_kv_fail(c, "%s.%s is %s, not an array", ev, field, obj_type_name(o));
    uint32_t n = o->via.array.size;
    if (n > CR_KV_MAX_HASHES_PER_EVENT)
        return cr_kv_fail(c, "%s.%s has %u hashes, limit %u", ev, field, n,
                       CR_KV_MAX_HASHES_PER_EVENT);
    uint64_t *hashes;
    int rc = ctx_alloc(c, (size_t)n * sizeof(*hashes), (void **)&hashes);
    if (rc != CR_OK) return rc;
    for (uint32_t i = 0; i < n; i++) {
        if (!hash_value(&o->via.array.ptr[i], &hashes[i]))
            return cr_kv_fail(c, "%s.%s[%u] is %s, not an int or bin", ev, field, i,
                           obj_type_name(&o->via.array.ptr[i]));
    }
    out->hashes = hashes;
    out->hash_count = n;
    return CR_OK;
}

static int get_opt_hash(struct kv_ctx *c, const msgpack_object *o, const char *ev,
                        const char *field, bool *has, uint64_t *out) {
    assert(has != NULL && out != NULL);
    *has = false;
    if (o->type == MSGPACK_OBJECT_NIL) return CR_OK;
    if (!hash_value(o, out))
        return cr_kv_fail(c, "%s.%s is %s, not an int, bin or nil", ev, field, obj_type_name(o));
    *has = true;
    return CR_OK;
}

/* token_ids: nil means absent; otherwise an array of u32. */
static int get_tokens(struct kv_ctx *c, const msgpack_object *o, const char *ev,
                      const char *field, struct cr_kv_event *out) {
    assert(c != NULL && out != NULL);
    if (o->type == MSGPACK_OBJECT_NIL) return out->has_token_ids = false, CR_OK;
    if (o->type != MSGPACK_OBJECT_ARRAY)
        return cr_kv_fail(c, "%s.%s is %s, not an array", ev, field, obj_type_name(o));
    uint32_t n = o->via.array.size;
    if (n > CR_KV_MAX_TOKENS_PER_EVENT)
        return cr_kv_fail(c, "%s.%s has %u tokens, limit %u", ev, field, n,
                       CR_KV_MAX_TOKENS_PER_EVENT);
    uint32_t *ids;
    int rc = ctx_alloc(c, (size_t)n * sizeof(*ids), (void **)&ids);
    if (rc != CR_OK) return rc;
    const msgpack_object *items = o->via.array.ptr;
    for (uint32_t i = 0; i < n; i++) {
        if (items[i].type != MSGPACK_OBJECT_POSITIVE_INTEGER || items[i].via.u64 > UINT32_MAX)
            return cr_kv_fail(c, "%s.%s[%u] is not a u32 token id", ev, field, i);
        ids[i] = (uint32_t)items[i].via.u64;
    }
    out->has_token_ids = true;
    out->token_ids = ids;
    out->token_count = n;
    return CR_OK;
}

static int get_u64(struct kv_ctx *c, const msgpack_object *o, const char *ev, const char *field,
                   uint64_t max, uint64_t *out) {
    assert(c != NULL && out != NULL);
    if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return cr_kv_fail(c, "%s.%s is %s, not a non-negative int", ev, field, obj_type_name(o));
    if (o->via.u64 > max)
        return cr_kv_fail(c, "%s.%s %llu exceeds %llu", ev, field, (unsigned long long)o->via.u64,
                       (unsigned long long)max);
    *out = o->via.u64;
    return CR_OK;
}

static int get_u32(struct kv_ctx *c, const msgpack_object *o, const char *ev, const char *field,
                   uint32_t max, uint32_t *out) {
    uint64_t v = 0;
    int rc = get_u64(c, o, ev, field, max, &v);
    *out = (uint32_t)v;
    return rc;
}

/* nil means absent. */
static int get_opt_u32(struct kv_ctx *c, const msgpack_object *o, const char *ev,
                       const char *field, bool *has, uint32_t *out) {
    assert(has != NULL && out != NULL);
    *has = o->type != MSGPACK_OBJECT_NIL;
    if (!*has) return CR_OK;
    return get_u32(c, o, ev, field, UINT32_MAX, out);
}

static int get_opt_i64(struct kv_ctx *c, const msgpack_object *o, const char *ev,
                       const char *field, bool *has, int64_t *out) {
    assert(has != NULL && out != NULL);
    *has = false;
    if (o->type == MSGPACK_OBJECT_NIL) return CR_OK;
    if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
        *out = o->via.i64;
    } else if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 <= INT64_MAX) {
        *out = (int64_t)o->via.u64;
    } else {
        return cr_kv_fail(c, "%s.%s is %s, not an int64 or nil", ev, field, obj_type_name(o));
    }
    *has = true;
    return CR_OK;
}

/* Copies a str into the arena; nil gives an absent string when nil_ok. */
static int get_str(struct kv_ctx *c, const msgpack_object *o, const char *ev, const char *field,
                   bool nil_ok, struct cr_kv_str *out) {
    assert(c != NULL && out != NULL);
    out->ptr = NULL;
    out->len = 0;
    if (nil_ok && o->type == MSGPACK_OBJECT_NIL) return CR_OK;
    if (o->type != MSGPACK_OBJECT_STR)
        return cr_kv_fail(c, "%s.%s is %s, not a string", ev, field, obj_type_name(o));
    uint32_t n = o->via.str.size;
    if (n > CR_KV_MAX_STRING_BYTES)
        return cr_kv_fail(c, "%s.%s is %u bytes, limit %u", ev, field, n, CR_KV_MAX_STRING_BYTES);
    char *copy;
    int rc = ctx_alloc(c, (size_t)n + 1, (void **)&copy);
    if (rc != CR_OK) return rc;
    if (n > 0) memcpy(copy, o->via.str.ptr, n);
    copy[n] = '\0';
    out->ptr = copy;
    out->len = n;
    return CR_OK;
}

static bool contains_ci(const struct cr_kv_str *s, const char *lower) {
    size_t n = strlen(lower);
    for (size_t i = 0; i + n <= s->len; i++) {
        size_t j = 0;
        while (j < n && (s->ptr[i + j] | 0x20) == lower[j]) j++;
        if (j == n) return true;
    }
    return false;
}

static int get_spec_kind(struct kv_ctx *c, const msgpack_object *o, const char *ev,
                         struct cr_kv_event *out) {
    assert(c != NULL && out != NULL);
    int rc = get_str(c, o, ev, "kv_cache_spec_kind", true, &out->spec_kind_name);
    if (rc != CR_OK || out->spec_kind_name.ptr == NULL) return rc;
    const struct cr_kv_str *s = &out->spec_kind_name;
    if (contains_ci(s, "sliding")) out->spec_kind = CR_KV_SPEC_SLIDING_WINDOW;
    else if (contains_ci(s, "mamba")) out->spec_kind = CR_KV_SPEC_MAMBA;
    else if (contains_ci(s, "full")) out->spec_kind = CR_KV_SPEC_FULL_ATTENTION;
    else out->spec_kind = CR_KV_SPEC_OTHER;
    return CR_OK;
}

/* replicas: array of [type, location] string pairs. */
static int get_replicas(struct kv_ctx *c, const msgpack_object *o, const char *ev,
                        struct cr_kv_event *out) {
    assert(c != NULL && out != NULL);
    if (o->type != MSGPACK_OBJECT_ARRAY)
        return cr_kv_fail(c, "%s.replicas is %s, not an array", ev, obj_type_name(o));
    uint32_t n = o->via.array.size;
    if (n > CR_KV_MAX_REPLICAS)
        return cr_kv_fail(c, "%s.replicas has %u entries, limit %u", ev, n, CR_KV_MAX_REPLICAS);
    struct cr_kv_replica *reps;
    int rc = ctx_alloc(c, (size_t)n * sizeof(*reps), (void **)&reps);
    for (uint32_t i = 0; rc == CR_OK && i < n; i++) {
        const msgpack_object *pair = &o->via.array.ptr[i];
        if (pair->type != MSGPACK_OBJECT_ARRAY || pair->via.array.size != 2)
            return cr_kv_fail(c, "%s.replicas[%u] is not a [type, location] pair", ev, i);
        rc = get_str(c, &pair->via.array.ptr[0], ev, "replicas.type", false, &reps[i].type);
        if (rc == CR_OK)
            rc = get_str(c, &pair->via.array.ptr[1], ev, "replicas.location", false,
                         &reps[i].location);
    }
    out->replicas = reps;
    out->replica_count = n;
    return rc;
}

/* ---- pass 3: events --------------------------------------------------- */

/* len(token_ids) == len(block_hashes) * block_size, when both are known. */
static int check_stored(struct kv_ctx *c, const struct cr_kv_event *ev, const char *name) {
    assert(c != NULL && ev != NULL);
    if (!ev->has_token_ids || ev->block_size == 0) return CR_OK;
    uint64_t want = (uint64_t)ev->hash_count * ev->block_size;
    if (ev->token_count != want)
        return cr_kv_fail(c, "%s.token_ids length %u != %u blocks * %u", name, ev->token_count,
                       ev->hash_count, ev->block_size);
    return CR_OK;
}

static int vllm_set_field(struct kv_ctx *c, struct cr_kv_event *ev, enum vllm_field f,
                          const msgpack_object *v, const char *name) {
    assert(c != NULL && ev != NULL && f <= VF_UNKNOWN);
    const char *field = f < VF_COUNT ? vllm_field_names[f] : "?";
    switch (f) {
    case VF_HASHES: return get_hash_list(c, v, name, field, ev);
    case VF_PARENT: return get_opt_hash(c, v, name, field, &ev->has_parent, &ev->parent_hash);
    case VF_TOKENS: return get_tokens(c, v, name, field, ev);
    case VF_BLOCK_SIZE:
        if (v->type == MSGPACK_OBJECT_NIL) return ev->block_size = 0, CR_OK;
        return get_u32(c, v, name, field, CR_KV_MAX_BLOCK_SIZE, &ev->block_size);
    case VF_LORA_ID: return get_opt_i64(c, v, name, field, &ev->has_lora_id, &ev->lora_id);
    case VF_MEDIUM: return get_str(c, v, name, field, true, &ev->medium);
    case VF_LORA_NAME: return get_str(c, v, name, field, true, &ev->lora_name);
    case VF_GROUP_IDX:
        return get_opt_u32(c, v, name, field, &ev->has_group_idx, &ev->group_idx);
    case VF_SPEC_KIND: return get_spec_kind(c, v, name, ev);
    case VF_SLIDING_WINDOW:
        return get_opt_i64(c, v, name, field, &ev->has_sliding_window, &ev->sliding_window);
    case VF_EXTRA_KEYS: /* per-block multimodal/LoRA keys: not part of the index key */
    default: return CR_OK;
    }
}

static enum vllm_field vllm_field_lookup(const msgpack_object *key) {
    for (unsigned f = 0; f < VF_COUNT; f++)
        if (obj_is_str(key, vllm_field_names[f])) return (enum vllm_field)f;
    return VF_UNKNOWN;
}

static int vllm_finish(struct kv_ctx *c, struct cr_kv_event *ev, const char *name) {
    assert(c != NULL && ev != NULL);
    return ev->kind == CR_KV_EVENT_STORED ? check_stored(c, ev, name) : CR_OK;
}

/* ["BlockStored", hashes, parent, tokens, block_size, ...] and the others. */
static int decode_vllm_array(struct kv_ctx *c, const msgpack_object_array *a,
                             struct cr_kv_event *ev, const char *name) {
    assert(c != NULL && a->size >= 1);
    ev->dialect = CR_KV_DIALECT_VLLM_ARRAY;
    uint32_t fields = a->size - 1;
    int rc = CR_OK;
    if (ev->kind == CR_KV_EVENT_STORED) {
        if (a->size < 5) return cr_kv_fail(c, "%s has %u elements, need >= 5", name, a->size);
        for (uint32_t i = 0; rc == CR_OK && i < fields && i < VF_COUNT; i++)
            rc = vllm_set_field(c, ev, (enum vllm_field)i, &a->ptr[i + 1], name);
    } else if (ev->kind == CR_KV_EVENT_REMOVED) {
        if (a->size < 2) return cr_kv_fail(c, "%s has %u elements, need >= 2", name, a->size);
        for (uint32_t i = 0; rc == CR_OK && i < fields && i < 3; i++)
            rc = vllm_set_field(c, ev, vllm_removed_positions[i], &a->ptr[i + 1], name);
    }
    return rc != CR_OK ? rc : vllm_finish(c, ev, name);
}

/* {"type": ..., field names}: absent fields keep their defaults. */
static int decode_vllm_map(struct kv_ctx *c, const msgpack_object_map *m, struct cr_kv_event *ev,
                           const char *name) {
    assert(c != NULL && ev != NULL);
    ev->dialect = CR_KV_DIALECT_VLLM_MAP;
    for (uint32_t i = 0; i < m->size; i++) {
        enum vllm_field f = vllm_field_lookup(&m->ptr[i].key);
        int rc = vllm_set_field(c, ev, f, &m->ptr[i].val, name);
        if (rc != CR_OK) return rc;
    }
    return vllm_finish(c, ev, name);
}

static int std_set_field(struct kv_ctx *c, struct cr_kv_event *ev, enum std_field f,
                         const msgpack_object *v, const char *name) {
    assert(c != NULL && ev != NULL && f <= SF_UNKNOWN);
    const char *field = f < SF_COUNT ? std_field_names[f] : "?";
    uint64_t u = 0;
    int rc = CR_OK;
    switch (f) {
    case SF_EVENT_ID:
        rc = get_u64(c, v, name, field, UINT64_MAX, &ev->event_id);
        ev->has_event_id = rc == CR_OK;
        return rc;
    case SF_TIMESTAMP:
        rc = get_u64(c, v, name, field, INT64_MAX, &u);
        ev->timestamp_ms = (int64_t)u;
        ev->has_timestamp_ms = rc == CR_OK;
        return rc;
    case SF_MODEL_NAME: return get_str(c, v, name, field, true, &ev->model_name);
    case SF_BLOCK_SIZE: return get_u32(c, v, name, field, CR_KV_MAX_BLOCK_SIZE, &ev->block_size);
    case SF_SALT: return get_str(c, v, name, field, true, &ev->additional_salt);
    case SF_LORA_NAME: return get_str(c, v, name, field, true, &ev->lora_name);
    case SF_LORA_ID: return get_opt_i64(c, v, name, field, &ev->has_lora_id, &ev->lora_id);
    case SF_TENANT_ID: return get_str(c, v, name, field, true, &ev->tenant_id);
    case SF_BACKEND_ID: return get_str(c, v, name, field, true, &ev->backend_id);
    case SF_MEDIUM: return get_str(c, v, name, field, true, &ev->medium);
    case SF_DP_RANK: return get_opt_u32(c, v, name, field, &ev->has_dp_rank, &ev->dp_rank);
    case SF_SEQ_HASHES: return get_hash_list(c, v, name, field, ev);
    case SF_BASE_BLOCK_IDX:
        if (v->type == MSGPACK_OBJECT_NIL) return CR_OK;
        rc = get_u64(c, v, name, field, UINT64_MAX, &ev->base_block_idx);
        ev->has_base_block_idx = rc == CR_OK;
        return rc;
    case SF_PARENT_HASH:
        return get_opt_hash(c, v, name, field, &ev->has_parent, &ev->parent_hash);
    case SF_TOKENS: return get_tokens(c, v, name, field, ev);
    case SF_EVENT_TYPE: /* already dispatched on */
    default: return CR_OK;
    }
}

static enum std_field std_field_lookup(const msgpack_object *key) {
    for (unsigned f = 0; f < SF_COUNT; f++)
        if (obj_is_str(key, std_field_names[f])) return (enum std_field)f;
    return SF_UNKNOWN;
}

static int decode_std_map(struct kv_ctx *c, const msgpack_object_map *m, struct cr_kv_event *ev,
                          const char *name) {
    assert(c != NULL && ev != NULL);
    ev->dialect = CR_KV_DIALECT_STANDARD;
    ev->seq_hashes = true;
    for (uint32_t i = 0; i < m->size; i++) {
        int rc = std_set_field(c, ev, std_field_lookup(&m->ptr[i].key), &m->ptr[i].val, name);
        if (rc != CR_OK) return rc;
    }
    return ev->kind == CR_KV_EVENT_STORED ? check_stored(c, ev, name) : CR_OK;
}

/* ["BlockStoreEvent", key, replicas, model_name, block_size, block_hash,
 *  parent_block_hash, token_ids] and the two shorter ones (seed 000). */
static int decode_store_array(struct kv_ctx *c, const msgpack_object_array *a,
                              struct cr_kv_event *ev, const char *name) {
    assert(c != NULL && ev != NULL);
    ev->dialect = CR_KV_DIALECT_STORE;
    if (ev->kind == CR_KV_EVENT_CLEARED) return CR_OK;
    uint32_t need = ev->kind == CR_KV_EVENT_STORED ? 8 : 3;
    if (a->size < need) return cr_kv_fail(c, "%s has %u elements, need %u", name, a->size, need);
    const msgpack_object *f = a->ptr;
    int rc = get_str(c, &f[1], name, "key", false, &ev->key);
    if (rc == CR_OK) rc = get_replicas(c, &f[2], name, ev);
    if (rc != CR_OK || ev->kind != CR_KV_EVENT_STORED) return rc;
    rc = get_str(c, &f[3], name, "model_name", true, &ev->model_name);
    if (rc == CR_OK) rc = get_u32(c, &f[4], name, "block_size", UINT32_MAX, &ev->block_size);
    if (rc == CR_OK) rc = get_str(c, &f[5], name, "block_hash", true, &ev->block_hash);
    if (rc == CR_OK)
        rc = get_str(c, &f[6], name, "parent_block_hash", true, &ev->parent_block_hash);
    if (rc == CR_OK) rc = get_tokens(c, &f[7], name, "token_ids", ev);
    return rc;
}

struct event_name {
    const char *name;
    enum cr_kv_event_kind kind;
    bool store; /* the store's own dialect */
};

static const struct event_name array_event_names[] = {
    {"BlockStored", CR_KV_EVENT_STORED, false},
    {"BlockRemoved", CR_KV_EVENT_REMOVED, false},
    {"AllBlocksCleared", CR_KV_EVENT_CLEARED, false},
    {"BlockStoreEvent", CR_KV_EVENT_STORED, true},
    {"BlockUpdateEvent", CR_KV_EVENT_UPDATED, true},
    {"RemoveAllEvent", CR_KV_EVENT_CLEARED, true},
};

static const struct event_name std_event_names[] = {
    {"stored", CR_KV_EVENT_STORED, false},
    {"removed", CR_KV_EVENT_REMOVED, false},
    {"cleared", CR_KV_EVENT_CLEARED, false},
};

static const struct event_name *event_name_find(const msgpack_object *o,
                                                const struct event_name *table, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (obj_is_str(o, table[i].name)) return &table[i];
    return NULL;
}

static int decode_array_event(struct kv_ctx *c, const msgpack_object_array *a,
                              struct cr_kv_event *ev) {
    assert(c != NULL && ev != NULL);
    if (a->size == 0) return cr_kv_fail(c, "empty event array");
    const struct event_name *en = event_name_find(
        &a->ptr[0], array_event_names, sizeof(array_event_names) / sizeof(array_event_names[0]));
    if (en == NULL) return cr_kv_fail(c, "unknown event type (%s)", obj_type_name(&a->ptr[0]));
    ev->kind = en->kind;
    return en->store ? decode_store_array(c, a, ev, en->name)
                     : decode_vllm_array(c, a, ev, en->name);
}

/* Maps carry "type" (vLLM/SGLang) or "event_type" (standardized). */
static int decode_map_event(struct kv_ctx *c, const msgpack_object_map *m,
                            struct cr_kv_event *ev) {
    assert(c != NULL && ev != NULL);
    for (uint32_t i = 0; i < m->size; i++) {
        const msgpack_object *key = &m->ptr[i].key, *val = &m->ptr[i].val;
        bool vllm = obj_is_str(key, "type");
        if (!vllm && !obj_is_str(key, "event_type")) continue;
        const struct event_name *en =
            vllm ? event_name_find(val, array_event_names, 3)
                 : event_name_find(val, std_event_names, 3);
        if (en == NULL)
            return cr_kv_fail(c, "unknown %s value (%s)", vllm ? "type" : "event_type",
                           obj_type_name(val));
        ev->kind = en->kind;
        return vllm ? decode_vllm_map(c, m, ev, en->name) : decode_std_map(c, m, ev, en->name);
    }
    return cr_kv_fail(c, "map event has neither \"type\" nor \"event_type\"");
}

static int decode_event(struct kv_ctx *c, const msgpack_object *o, struct cr_kv_event *ev) {
    assert(c != NULL && ev != NULL);
    memset(ev, 0, sizeof(*ev));
    if (o->type == MSGPACK_OBJECT_ARRAY) return decode_array_event(c, &o->via.array, ev);
    if (o->type == MSGPACK_OBJECT_MAP) return decode_map_event(c, &o->via.map, ev);
    return cr_kv_fail(c, "event is %s, not an array or map", obj_type_name(o));
}

/* ---- pass 3: batch ---------------------------------------------------- */

/* A float is seconds; an int is milliseconds (standardized publisher). */
static int get_ts(struct kv_ctx *c, const msgpack_object *o, double *out) {
    assert(c != NULL && out != NULL);
    double ts;
    if (o->type == MSGPACK_OBJECT_FLOAT64 || o->type == MSGPACK_OBJECT_FLOAT32)
        ts = o->via.f64;
    else if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
        ts = (double)o->via.u64 / 1000.0;
    else
        return cr_kv_fail(c, "batch ts is %s, not a float or int", obj_type_name(o));
    if (!isfinite(ts) || ts < 0) return cr_kv_fail(c, "batch ts is negative or not finite");
    *out = ts;
    return CR_OK;
}

/* Finds ts, events and the DP rank (any of three names) in a map batch. */
static int map_batch_fields(struct kv_ctx *c, const msgpack_object_map *m,
                            const msgpack_object **ts, const msgpack_object **events,
                            const msgpack_object **dp) {
    assert(c != NULL && ts != NULL && events != NULL && dp != NULL);
    for (uint32_t i = 0; i < m->size; i++) {
        const msgpack_object *key = &m->ptr[i].key, *val = &m->ptr[i].val;
        if (obj_is_str(key, "ts")) *ts = val;
        else if (obj_is_str(key, "events")) *events = val;
        else if (obj_is_str(key, "data_parallel_rank") || obj_is_str(key, "attn_dp_rank") ||
                 obj_is_str(key, "dp_rank"))
            *dp = val;
    }
    if (*ts == NULL || *events == NULL) return cr_kv_fail(c, "map batch lacks \"ts\" or \"events\"");
    return CR_OK;
}

static int decode_events(struct kv_ctx *c, const msgpack_object *o, struct cr_kv_batch *b) {
    assert(c != NULL && b != NULL);
    if (o->type != MSGPACK_OBJECT_ARRAY)
        return cr_kv_fail(c, "batch events is %s, not an array", obj_type_name(o));
    uint32_t n = o->via.array.size;
    if (n > CR_KV_MAX_EVENTS_PER_BATCH)
        return cr_kv_fail(c, "batch has %u events, limit %u", n, CR_KV_MAX_EVENTS_PER_BATCH);
    struct cr_kv_event *events;
    int rc = ctx_alloc(c, (size_t)n * sizeof(*events), (void **)&events);
    for (uint32_t i = 0; rc == CR_OK && i < n; i++) {
        c->event_index = (long)i;
        rc = decode_event(c, &o->via.array.ptr[i], &events[i]);
    }
    c->event_index = -1;
    b->events = events;
    b->event_count = n;
    return rc;
}

static int decode_batch(struct kv_ctx *c, const msgpack_object *root, struct cr_kv_batch *b) {
    assert(c != NULL && b != NULL);
    const msgpack_object *ts = NULL, *events = NULL, *dp = NULL;
    memset(b, 0, sizeof(*b));
    if (root->type == MSGPACK_OBJECT_ARRAY) {
        uint32_t n = root->via.array.size;
        if (n != 2 && n != 3) return cr_kv_fail(c, "batch array has %u elements, not 2 or 3", n);
        ts = &root->via.array.ptr[0];
        events = &root->via.array.ptr[1];
        dp = n == 3 ? &root->via.array.ptr[2] : NULL;
    } else if (root->type == MSGPACK_OBJECT_MAP) {
        int rc = map_batch_fields(c, &root->via.map, &ts, &events, &dp);
        if (rc != CR_OK) return rc;
    } else {
        return cr_kv_fail(c, "batch is %s, not an array or map", obj_type_name(root));
    }
    int rc = get_ts(c, ts, &b->ts);
    if (rc == CR_OK && dp != NULL)
        rc = get_opt_u32(c, dp, "batch", "dp_rank", &b->has_dp_rank, &b->dp_rank);
    return rc == CR_OK ? decode_events(c, events, b) : rc;
}

/* ---- public API ------------------------------------------------------- */

int cr_kv_decoder_create(struct cr_kv_decoder **out) {
    assert(out != NULL);
    *out = NULL;
    struct cr_kv_decoder *dec = calloc(1, sizeof(*dec));
    if (dec == NULL) return CR_ERR_NOMEM;
    dec->arena.head = dec->arena.cur = arena_chunk_new(ARENA_MIN_CHUNK_BYTES);
    if (dec->arena.head == NULL || cr_kv_zone_reserve(dec, ZONE_MIN_CHUNK_BYTES) != CR_OK) {
        cr_kv_decoder_destroy(dec);
        return CR_ERR_NOMEM;
    }
    *out = dec;
    return CR_OK;
}

void cr_kv_decoder_destroy(struct cr_kv_decoder *dec) {
    if (dec == NULL) return;
    if (dec->zone_live) msgpack_zone_destroy(&dec->zone);
    arena_free(&dec->arena);
    free(dec);
}

int cr_kv_decode(struct cr_kv_decoder *dec, const void *payload, size_t len,
                 const struct cr_kv_batch **out, char *err, size_t err_size) {
    assert(dec != NULL && out != NULL);
    assert(payload != NULL || len == 0);
    struct kv_ctx c = {.dec = dec, .err = err, .err_size = err_size, .event_index = -1};
    *out = NULL;
    if (err != NULL && err_size > 0) err[0] = '\0';
    if (len > CR_KV_MAX_PAYLOAD_BYTES)
        return cr_kv_fail(&c, "payload is %zu bytes, limit %u", len, CR_KV_MAX_PAYLOAD_BYTES);
    arena_reset(&dec->arena);
    msgpack_object root;
    int rc = cr_kv_unpack_payload(&c, payload, len, &root);
    if (rc == CR_OK) rc = decode_batch(&c, &root, &dec->batch);
    if (rc != CR_OK) return rc;
    *out = &dec->batch;
    return CR_OK;
}

const char *cr_kv_event_kind_name(enum cr_kv_event_kind kind) {
    switch (kind) {
    case CR_KV_EVENT_STORED: return "STORED";
    case CR_KV_EVENT_REMOVED: return "REMOVED";
    case CR_KV_EVENT_CLEARED: return "CLEARED";
    case CR_KV_EVENT_UPDATED: return "UPDATED";
    default: return "UNKNOWN";
    }
}
