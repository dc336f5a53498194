/* Prefix index registry: media, instances, publishers, contexts, summary.
 * Mutations live in prefix_store.c, queries in prefix_query.c. */
#include "core/prefix_index.h"

#include <assert.h>
#include <ctype.h>
#include <strings.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "core/prefix_hash.h"
#include "core/prefix_internal.h"
#include "crescent/error.h"

#define NO_CONTEXT UINT32_MAX
#define MEDIUM_NAME_MAX 31u

static const char *const builtin_media[] = {"GPU", "CPU", "DISK"};

int prefix_grow(struct cr_prefix_index *index, void **array, size_t elem_size, uint32_t *cap,
                uint32_t need, uint32_t max) {
    assert(index != NULL && array != NULL && cap != NULL);
    assert(elem_size > 0);
    if (need <= *cap) return CR_OK;
    if (need > max) return CR_ERR_NOMEM;
    uint64_t new_cap = *cap < 8 ? 8 : (uint64_t)*cap * 2;
    while (new_cap < need) new_cap *= 2;
    if (new_cap > max) new_cap = max;
    void *grown = realloc(*array, (size_t)new_cap * elem_size);
    if (grown == NULL) return CR_ERR_NOMEM;
    memset((char *)grown + (size_t)*cap * elem_size, 0, (size_t)(new_cap - *cap) * elem_size);
    index->bytes_used += (size_t)(new_cap - *cap) * elem_size;
    *array = grown;
    *cap = (uint32_t)new_cap;
    return CR_OK;
}

static char *dup_counted(struct cr_prefix_index *index, const char *s) {
    size_t len = strlen(s) + 1;
    char *copy = malloc(len);
    if (copy != NULL) {
        memcpy(copy, s, len);
        index->bytes_used += len;
    }
    return copy;
}

static void free_counted(struct cr_prefix_index *index, char *s) {
    if (s == NULL) return;
    index->bytes_used -= strlen(s) + 1;
    free(s);
}

int cr_prefix_index_create(uint64_t base_seed, struct cr_prefix_index **out) {
    assert(out != NULL);
    *out = NULL;
    struct cr_prefix_index *index = calloc(1, sizeof(*index));
    if (index == NULL) return CR_ERR_NOMEM;
    index->base_seed = base_seed;
    index->instances = calloc(CR_PREFIX_INSTANCES_MAX, sizeof(struct prefix_instance));
    if (index->instances == NULL || prefix_attrs_init(index) != CR_OK) {
        free(index->instances);
        free(index);
        return CR_ERR_NOMEM;
    }
    index->bytes_used += sizeof(*index) + CR_PREFIX_INSTANCES_MAX * sizeof(struct prefix_instance);
    for (unsigned m = 0; m < 3; m++) strcpy(index->media[m], builtin_media[m]);
    index->media_count = 3;
    cr_prefix_map_init(&index->publisher_of, &index->bytes_used);
    cr_prefix_map_init(&index->context_of, &index->bytes_used);
    *out = index;
    return CR_OK;
}

static void context_free(struct cr_prefix_index *index, struct prefix_context *ctx) {
    prefix_context_free_blocks(index, ctx);
    cr_prefix_map_free(&ctx->local_of);
    free(ctx->locals);
    index->bytes_used -= (size_t)ctx->local_cap * sizeof(struct prefix_local);
    free_counted(index, ctx->tenant);
    free_counted(index, ctx->model);
    free_counted(index, ctx->lora_name);
    free_counted(index, ctx->salt);
}

void cr_prefix_index_destroy(struct cr_prefix_index *index) {
    if (index == NULL) return;
    for (uint32_t p = 0; p < index->publisher_high; p++) {
        struct prefix_publisher *pub = &index->publishers[p];
        for (uint32_t t = 0; t < pub->track_count; t++)
            cr_prefix_map_free(&pub->tracks[t].engine_to_own);
        free(pub->tracks);
    }
    for (uint32_t c = 0; c < index->context_count; c++) context_free(index, &index->contexts[c]);
    for (uint32_t i = 0; i < index->instance_high; i++) {
        free(index->instances[i].name);
        free(index->instances[i].tenant);
    }
    cr_prefix_map_free(&index->publisher_of);
    cr_prefix_map_free(&index->context_of);
    prefix_attrs_free(index);
    prefix_scratch_free(&index->scratch);
    free(index->publishers);
    free(index->contexts);
    free(index->instances);
    free(index);
}

/* ---- media ---- */

int cr_prefix_index_medium_find(const struct cr_prefix_index *index, const char *name,
                                uint8_t *medium) {
    assert(index != NULL && medium != NULL);
    if (name == NULL || name[0] == '\0') {
        *medium = CR_PREFIX_MEDIUM_GPU;
        return CR_OK;
    }
    if (strlen(name) > MEDIUM_NAME_MAX) return CR_ERR_INVALID_PARAMS;
    for (uint8_t m = 0; m < index->media_count; m++) {
        if (strcasecmp(index->media[m], name) == 0) {
            *medium = m;
            return CR_OK;
        }
    }
    return CR_ERR_OBJECT_NOT_FOUND;
}

uint32_t cr_prefix_index_media_free(const struct cr_prefix_index *index) {
    return CR_PREFIX_MEDIA_MAX - index->media_count;
}

uint32_t cr_prefix_index_contexts_free(const struct cr_prefix_index *index) {
    return CR_PREFIX_CONTEXTS_MAX - index->context_count;
}

int cr_prefix_index_medium(struct cr_prefix_index *index, const char *name, uint8_t *medium) {
    int rc = cr_prefix_index_medium_find(index, name, medium);
    if (rc != CR_ERR_OBJECT_NOT_FOUND) return rc;
    size_t len = strlen(name);
    if (index->media_count >= CR_PREFIX_MEDIA_MAX) return CR_ERR_NOMEM;
    char *slot = index->media[index->media_count];
    for (size_t i = 0; i <= len; i++) slot[i] = (char)toupper((unsigned char)name[i]);
    *medium = index->media_count++;
    return CR_OK;
}

const char *cr_prefix_index_medium_name(const struct cr_prefix_index *index, uint8_t medium) {
    assert(index != NULL);
    return medium < index->media_count ? index->media[medium] : NULL;
}

/* ---- instances ---- */

static const char *tenant_or_default(const char *tenant) {
    return tenant != NULL && tenant[0] != '\0' ? tenant : "default";
}

int cr_prefix_index_instance_find(const struct cr_prefix_index *index, const char *name,
                                  const char *tenant, uint16_t *id) {
    assert(index != NULL && id != NULL);
    if (name == NULL) return CR_ERR_OBJECT_NOT_FOUND;
    const char *t = tenant_or_default(tenant);
    for (uint32_t i = 0; i < index->instance_high; i++) {
        const struct prefix_instance *inst = &index->instances[i];
        if (inst->name != NULL && strcmp(inst->name, name) == 0 && strcmp(inst->tenant, t) == 0) {
            *id = (uint16_t)i;
            return CR_OK;
        }
    }
    return CR_ERR_OBJECT_NOT_FOUND;
}

int cr_prefix_index_instance_add(struct cr_prefix_index *index, const char *name,
                                 const char *tenant, uint16_t *id) {
    assert(index != NULL && id != NULL);
    const char *t = tenant_or_default(tenant);
    if (name == NULL || name[0] == '\0' || strlen(name) > CR_PREFIX_NAME_MAX ||
        strlen(t) > CR_PREFIX_NAME_MAX) {
        return CR_ERR_INVALID_PARAMS;
    }
    if (cr_prefix_index_instance_find(index, name, t, id) == CR_OK) {
        return CR_ERR_OBJECT_ALREADY_EXISTS;
    }
    uint32_t slot = 0;
    while (slot < index->instance_high && index->instances[slot].name != NULL) slot++;
    if (slot >= CR_PREFIX_INSTANCES_MAX) return CR_ERR_NOMEM;
    struct prefix_instance *inst = &index->instances[slot];
    inst->name = dup_counted(index, name);
    inst->tenant = dup_counted(index, t);
    if (inst->name == NULL || inst->tenant == NULL) {
        free_counted(index, inst->name);
        free_counted(index, inst->tenant);
        inst->name = inst->tenant = NULL;
        return CR_ERR_NOMEM;
    }
    if (slot == index->instance_high) index->instance_high++;
    index->instance_count++;
    *id = (uint16_t)slot;
    return CR_OK;
}

static const struct prefix_instance *instance_get(const struct cr_prefix_index *index,
                                                  uint16_t id) {
    if (id >= index->instance_high || index->instances[id].name == NULL) return NULL;
    return &index->instances[id];
}

const char *cr_prefix_index_instance_name(const struct cr_prefix_index *index, uint16_t id) {
    assert(index != NULL);
    const struct prefix_instance *inst = instance_get(index, id);
    return inst != NULL ? inst->name : NULL;
}

const char *cr_prefix_index_instance_tenant(const struct cr_prefix_index *index, uint16_t id) {
    assert(index != NULL);
    const struct prefix_instance *inst = instance_get(index, id);
    return inst != NULL ? inst->tenant : NULL;
}

bool cr_prefix_index_tenant_known(const struct cr_prefix_index *index, const char *tenant) {
    assert(index != NULL);
    const char *t = tenant_or_default(tenant);
    for (uint32_t id = 0; id < index->instance_high; id++)
        if (index->instances[id].name != NULL && strcmp(index->instances[id].tenant, t) == 0)
            return true;
    return false;
}

int cr_prefix_index_instance_remove(struct cr_prefix_index *index, uint16_t id) {
    assert(index != NULL);
    if (instance_get(index, id) == NULL) return CR_ERR_OBJECT_NOT_FOUND;
    for (uint32_t p = 0; p < index->publisher_high; p++) {
        if (index->publishers[p].used && index->publishers[p].instance == id) {
            int rc = cr_prefix_index_publisher_remove(index, p);
            assert(rc == CR_OK);
            (void)rc;
        }
    }
    for (uint32_t c = 0; c < index->context_count; c++) {
        prefix_context_drop_local(index, &index->contexts[c], id);
    }
    struct prefix_instance *inst = &index->instances[id];
    free_counted(index, inst->name);
    free_counted(index, inst->tenant);
    inst->name = inst->tenant = NULL;
    index->instance_count--;
    return CR_OK;
}

/* ---- publishers ---- */

int cr_prefix_index_publisher(struct cr_prefix_index *index, uint16_t instance, uint8_t dp_rank,
                              uint32_t *publisher) {
    assert(index != NULL && publisher != NULL);
    if (dp_rank >= CR_PREFIX_DP_RANKS) return CR_ERR_INVALID_PARAMS;
    if (instance_get(index, instance) == NULL) return CR_ERR_OBJECT_NOT_FOUND;
    uint64_t key = ((uint64_t)instance << 8 | dp_rank) + 1, found;
    if (cr_prefix_map_get(&index->publisher_of, key, &found)) {
        *publisher = (uint32_t)found;
        return CR_OK;
    }
    uint32_t slot = 0;
    while (slot < index->publisher_high && index->publishers[slot].used) slot++;
    int rc = prefix_grow(index, (void **)&index->publishers, sizeof(struct prefix_publisher),
                         &index->publisher_cap, slot + 1, CR_PREFIX_PUBLISHERS_MAX);
    if (rc == CR_OK) rc = cr_prefix_map_put(&index->publisher_of, key, slot);
    if (rc != CR_OK) return rc;
    struct prefix_publisher *pub = &index->publishers[slot];
    memset(pub, 0, sizeof(*pub));
    pub->used = true;
    pub->instance = instance;
    pub->dp_rank = dp_rank;
    if (slot == index->publisher_high) index->publisher_high++;
    index->publisher_count++;
    *publisher = slot;
    return CR_OK;
}

int cr_prefix_index_publisher_remove(struct cr_prefix_index *index, uint32_t publisher) {
    assert(index != NULL);
    int rc = cr_prefix_index_cleared(index, publisher);
    if (rc != CR_OK) return rc;
    struct prefix_publisher *pub = &index->publishers[publisher];
    index->bytes_used -= (size_t)pub->track_cap * sizeof(struct prefix_track);
    free(pub->tracks);
    uint64_t key = ((uint64_t)pub->instance << 8 | pub->dp_rank) + 1;
    bool had = cr_prefix_map_del(&index->publisher_of, key, NULL);
    assert(had);
    (void)had;
    memset(pub, 0, sizeof(*pub));
    index->publisher_count--;
    return CR_OK;
}

/* ---- contexts ---- */

static bool name_ok(const char *s) { return strlen(s) <= CR_PREFIX_NAME_MAX; }

static uint64_t key_hash(const char *tenant, const char *model, const char *lora,
                         uint32_t block_size, const char *salt) {
    /* Separator bytes cannot appear inside C strings, so the join is unambiguous. */
    uint64_t h = XXH3_64bits_withSeed(tenant, strlen(tenant) + 1, block_size);
    h = XXH3_64bits_withSeed(model, strlen(model) + 1, h);
    h = XXH3_64bits_withSeed(lora, strlen(lora) + 1, h);
    return XXH3_64bits_withSeed(salt, strlen(salt) + 1, h);
}

static bool context_matches(const struct prefix_context *ctx, const char *tenant,
                            const char *model, const char *lora, uint32_t block_size,
                            const char *salt) {
    return ctx->block_size == block_size && strcmp(ctx->tenant, tenant) == 0 &&
           strcmp(ctx->model, model) == 0 && strcmp(ctx->lora_name, lora) == 0 &&
           strcmp(ctx->salt, salt) == 0;
}

static int context_new(struct cr_prefix_index *index, const char *tenant, const char *model,
                       const char *lora, uint32_t block_size, const char *salt, uint64_t hash,
                       uint32_t *context) {
    uint32_t id = index->context_count;
    int rc = prefix_grow(index, (void **)&index->contexts, sizeof(struct prefix_context),
                         &index->context_cap, id + 1, CR_PREFIX_CONTEXTS_MAX);
    if (rc != CR_OK) return rc;
    struct prefix_context *ctx = &index->contexts[id];
    memset(ctx, 0, sizeof(*ctx));
    ctx->tenant = dup_counted(index, tenant);
    ctx->model = dup_counted(index, model);
    ctx->lora_name = dup_counted(index, lora);
    ctx->salt = dup_counted(index, salt);
    uint64_t head = NO_CONTEXT;
    bool had_head = cr_prefix_map_get(&index->context_of, hash, &head);
    if (ctx->tenant == NULL || ctx->model == NULL || ctx->lora_name == NULL || ctx->salt == NULL ||
        cr_prefix_map_put(&index->context_of, hash, id) != CR_OK) {
        context_free(index, ctx);
        return CR_ERR_NOMEM;
    }
    ctx->used = true;
    ctx->block_size = block_size;
    ctx->seed = cr_prefix_hash_namespace_seed(index->base_seed, lora, salt);
    ctx->key_hash = hash;
    ctx->next_same_hash = had_head ? (uint32_t)head : NO_CONTEXT;
    ctx->free_head = UINT32_MAX;
    cr_prefix_map_init(&ctx->blocks, &index->bytes_used);
    cr_prefix_map_init(&ctx->local_of, &index->bytes_used);
    index->context_count++;
    *context = id;
    return CR_OK;
}

int cr_prefix_index_context(struct cr_prefix_index *index, const struct cr_prefix_context_key *key,
                            bool create, uint32_t *context) {
    assert(index != NULL && key != NULL && context != NULL);
    const char *tenant = tenant_or_default(key->tenant);
    const char *model = key->model != NULL ? key->model : "";
    const char *lora = key->lora_name != NULL ? key->lora_name : "";
    const char *salt = key->additional_salt != NULL ? key->additional_salt : "";
    if (key->block_size == 0 || !name_ok(tenant) || !name_ok(model) || !name_ok(lora) ||
        !name_ok(salt)) {
        return CR_ERR_INVALID_PARAMS;
    }
    uint64_t hash = key_hash(tenant, model, lora, key->block_size, salt), id;
    if (cr_prefix_map_get(&index->context_of, hash, &id)) {
        for (uint32_t c = (uint32_t)id; c != NO_CONTEXT; c = index->contexts[c].next_same_hash) {
            if (context_matches(&index->contexts[c], tenant, model, lora, key->block_size, salt)) {
                *context = c;
                return CR_OK;
            }
        }
    }
    if (!create) return CR_ERR_OBJECT_NOT_FOUND;
    return context_new(index, tenant, model, lora, key->block_size, salt, hash, context);
}

int cr_prefix_index_context_info(const struct cr_prefix_index *index, uint32_t context,
                                 struct cr_prefix_context_info *info) {
    assert(index != NULL && info != NULL);
    if (context >= index->context_count) return CR_ERR_OBJECT_NOT_FOUND;
    const struct prefix_context *ctx = &index->contexts[context];
    info->tenant = ctx->tenant;
    info->model = ctx->model;
    info->lora_name = ctx->lora_name;
    info->additional_salt = ctx->salt;
    info->block_size = ctx->block_size;
    info->seed = ctx->seed;
    info->blocks = cr_prefix_map_count(&ctx->blocks);
    info->pairs = ctx->pairs;
    return CR_OK;
}

/* Local indices are dense per context so that holder records fit 16 bits of
 * instance and query scratch is sized by the context, not by 65535. */
int prefix_context_local(struct cr_prefix_index *index, struct prefix_context *ctx,
                         uint16_t instance, bool create, uint16_t *local) {
    assert(index != NULL && ctx != NULL && local != NULL);
    uint64_t found;
    if (cr_prefix_map_get(&ctx->local_of, instance, &found)) {
        *local = (uint16_t)found;
        return CR_OK;
    }
    if (!create) return CR_ERR_OBJECT_NOT_FOUND;
    uint32_t slot;
    if (ctx->free_local_count > 0) {
        slot = ctx->locals[--ctx->free_local_count].free_local;
    } else {
        slot = ctx->local_high;
        int rc = prefix_grow(index, (void **)&ctx->locals, sizeof(struct prefix_local),
                             &ctx->local_cap, slot + 1, CR_PREFIX_INSTANCES_MAX);
        if (rc != CR_OK) return rc;
    }
    int rc = cr_prefix_map_put(&ctx->local_of, instance, slot);
    if (rc != CR_OK) {
        if (slot < ctx->local_high)
            ctx->locals[ctx->free_local_count++].free_local = (uint16_t)slot;
        return rc;
    }
    if (slot == ctx->local_high) ctx->local_high++;
    ctx->locals[slot].global = instance;
    ctx->locals[slot].home = 0; /* set by its first pair (prefix_store.c) */
    *local = (uint16_t)slot;
    return CR_OK;
}

void prefix_context_drop_local(struct cr_prefix_index *index, struct prefix_context *ctx,
                               uint16_t instance) {
    assert(index != NULL && ctx != NULL);
    (void)index;
    uint64_t local;
    if (!cr_prefix_map_del(&ctx->local_of, instance, &local)) return;
    assert(ctx->free_local_count < ctx->local_cap);
    ctx->locals[ctx->free_local_count++].free_local = (uint16_t)local;
}

void cr_prefix_index_summary(const struct cr_prefix_index *index, struct cr_prefix_summary *out) {
    assert(index != NULL && out != NULL);
    memset(out, 0, sizeof(*out));
    out->contexts = index->context_count;
    out->instances = index->instance_count;
    out->publishers = index->publisher_count;
    out->blocks = index->blocks;
    out->pairs = index->pairs;
    out->bytes_used = index->bytes_used;
    out->runs_orphaned = index->runs_orphaned;
    out->removes_unknown = index->removes_unknown;
}
