/* Regex operations over one tenant's keys (PCRE2, 8-bit, no JIT).
 *
 * Matching runs with the configured match and depth limits so that a
 * pattern such as (a+)+$ against a long "aaaa…b" key stops with an error
 * instead of backtracking for minutes.  Every key is matched before anything
 * is changed, so a pattern that turns out too expensive on the 500th key
 * leaves the first 499 untouched.  The number of matches is bounded too
 * (regex_max_matches), with the same rule: past the bound, nothing changes. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <assert.h>
#include <stdlib.h>

#include <pcre2.h>

#include "core/store_internal.h"
#include "crescent/error.h"

struct regex_ctx {
    pcre2_code *code;
    pcre2_match_data *md;
    pcre2_match_context *mctx;
};

struct match_set {
    uint32_t *ids; /* malloc'd: a regex op is an admin path, not a hot one */
    size_t count;
};

static void regex_free(struct regex_ctx *rx) {
    pcre2_match_data_free(rx->md);
    pcre2_match_context_free(rx->mctx);
    pcre2_code_free(rx->code);
}

static int regex_compile(cr_store *store, const char *pattern, struct regex_ctx *rx) {
    assert(rx != NULL);
    *rx = (struct regex_ctx){0};
    if (pattern == NULL) return cr_store_fail(store, CR_ERR_INVALID_PARAMS, "no pattern");
    int err;
    PCRE2_SIZE offset;
    rx->code = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, 0, &err, &offset, NULL);
    if (rx->code == NULL) {
        PCRE2_UCHAR text[160];
        pcre2_get_error_message(err, text, sizeof(text));
        return cr_store_fail(store, CR_ERR_INVALID_PARAMS, "regex error at offset %zu: %s",
                             (size_t)offset, (const char *)text);
    }
    rx->md = pcre2_match_data_create_from_pattern(rx->code, NULL);
    rx->mctx = pcre2_match_context_create(NULL);
    if (rx->md == NULL || rx->mctx == NULL) {
        regex_free(rx);
        return cr_store_fail(store, CR_ERR_NOMEM, "out of memory");
    }
    pcre2_set_match_limit(rx->mctx, store->cfg.regex_match_limit);
    pcre2_set_depth_limit(rx->mctx, store->cfg.regex_depth_limit);
    return CR_OK;
}

/* Returns 1 on match, 0 on none, or a cr_status. */
static int regex_match(cr_store *store, struct regex_ctx *rx, const struct cr_store_obj *obj) {
    int rc = pcre2_match(rx->code, (PCRE2_SPTR)obj->key, obj->key_len, 0, 0, rx->md, rx->mctx);
    if (rc >= 0) return 1;
    if (rc == PCRE2_ERROR_NOMATCH) return 0;
    if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT ||
        rc == PCRE2_ERROR_HEAPLIMIT)
        return cr_store_fail(store, CR_ERR_INVALID_PARAMS, "regex too expensive");
    PCRE2_UCHAR text[160];
    pcre2_get_error_message(rc, text, sizeof(text));
    return cr_store_fail(store, CR_ERR_INVALID_PARAMS, "regex match failed: %s",
                         (const char *)text);
}

/* Records one more match; refuses the call once the bound is passed. */
static int match_add(cr_store *store, struct match_set *set, size_t capacity, uint32_t id) {
    if (set->count == capacity)
        return cr_store_fail(store, CR_ERR_INVALID_PARAMS,
                             "regex matches more than %u keys (regex_max_matches): narrow the "
                             "pattern, or raise --regex-max-matches",
                             store->cfg.regex_max_matches);
    set->ids[set->count++] = id;
    return CR_OK;
}

/* Collects the ids of the tenant's complete objects whose key matches, at
 * most regex_max_matches of them: the scan stops at the first match over the
 * bound and the call fails whole, before the caller changes anything. */
static int regex_collect(cr_store *store, const char *tenant, const char *pattern,
                         struct match_set *out) {
    assert(out != NULL);
    *out = (struct match_set){0};
    struct regex_ctx rx;
    int rc = regex_compile(store, pattern, &rx);
    if (rc != CR_OK) return rc;
    int t = cr_store_tenant_lookup(store, tenant);
    if (t < 0 || store->object_count == 0) {
        regex_free(&rx);
        return CR_OK;
    }
    size_t capacity = store->object_count < store->cfg.regex_max_matches
                          ? store->object_count
                          : store->cfg.regex_max_matches;
    out->ids = malloc(capacity * sizeof(uint32_t));
    if (out->ids == NULL) rc = cr_store_fail(store, CR_ERR_NOMEM, "out of memory");
    for (uint32_t id = 0; rc == CR_OK && id < store->slab_high; id++) {
        const struct cr_store_obj *obj = cr_store_obj_at(store, id);
        if (obj->state != CR_OBJ_COMPLETE || obj->tenant != (uint16_t)t) continue;
        int m = regex_match(store, &rx, obj);
        if (m < 0) rc = m;
        if (m == 1) rc = match_add(store, out, capacity, id);
    }
    regex_free(&rx);
    if (rc != CR_OK) {
        free(out->ids);
        *out = (struct match_set){0};
    }
    assert(out->count <= store->cfg.regex_max_matches);
    return rc;
}

int cr_store_get_replica_list_by_regex(
    cr_store *store, const char *tenant, const char *pattern, uint64_t now_ms,
    void (*fn)(void *ctx, const char *key, uint32_t key_len,
               const struct cr_store_replica_list *replicas),
    void *ctx) {
    assert(store != NULL && fn != NULL);
    struct match_set set;
    int rc = regex_collect(store, tenant, pattern, &set);
    if (rc != CR_OK) return rc;
    struct cr_store_replica_list list;
    for (size_t i = 0; i < set.count; i++) {
        struct cr_store_obj *obj = cr_store_obj_at(store, set.ids[i]);
        cr_store_obj_grant_lease(store, obj, now_ms);
        cr_store_obj_fill_list(store, obj, true, &list);
        fn(ctx, obj->key, obj->key_len, &list);
    }
    free(set.ids);
    return CR_OK;
}

int cr_store_remove_by_regex(cr_store *store, const char *tenant, const char *pattern,
                             bool force, uint64_t now_ms, uint64_t *removed) {
    assert(store != NULL && removed != NULL);
    *removed = 0;
    struct match_set set;
    int rc = regex_collect(store, tenant, pattern, &set);
    if (rc != CR_OK) return rc;
    for (size_t i = 0; i < set.count; i++) {
        const struct cr_store_obj *obj = cr_store_obj_at(store, set.ids[i]);
        if (!force && cr_store_obj_busy(obj, now_ms)) continue;
        cr_store_obj_free(store, set.ids[i]);
        (*removed)++;
    }
    free(set.ids);
    return CR_OK;
}
