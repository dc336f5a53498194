/* Regex operations over one tenant's keys (PCRE2, 8-bit, no JIT).
 *
 * A call is a scan (struct cr_store_regex_scan) that can run in slices: the
 * segments actor runs a slice per loop round, so other calls are served
 * between slices instead of waiting behind a scan of the whole store.  Work
 * is bounded twice: per key by PCRE2's match and depth limits (a pattern such
 * as (a+)+$ against a long "aaaa…b" key stops with an error instead of
 * backtracking for minutes), and per call by regex_budget_steps, counted
 * across every key through PCRE2's automatic callouts (one step per pattern
 * item tried), because per-key limits alone let 10,000 keys each just under
 * the limit take 88 s.  Every key is matched before anything is changed, so
 * a call refused on the 500th key leaves the first 499 untouched.  The
 * number of matches is bounded too (regex_max_matches), with the same rule.
 *
 * Between slices the store may change: matches are kept as (id, generation)
 * and re-checked when the call is applied, the tenant is held by a reference,
 * and objects stored behind the scan's cursor after it passed are not seen. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pcre2.h>

#include "core/store_internal.h"
#include "crescent/error.h"

struct scan_match {
    uint32_t id;
    uint32_t generation;
};

struct cr_store_regex_scan {
    pcre2_code *code;
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    int tenant;      /* -1: unknown tenant, matches nothing; else a held reference */
    uint32_t cursor; /* next slab id to look at */
    struct scan_match *matches; /* malloc'd: a regex op is an admin path */
    size_t count, capacity;
    uint64_t steps_used;   /* across every key so far */
    uint64_t steps_budget; /* regex_budget_steps */
    bool done;
    int rc; /* the verdict once done */
    char why[CR_STORE_ERROR_LEN];
};

/* One step per automatic callout, that is per pattern item tried. */
static int count_step(pcre2_callout_block *block, void *data) {
    (void)block;
    struct cr_store_regex_scan *scan = data;
    return ++scan->steps_used > scan->steps_budget ? PCRE2_ERROR_CALLOUT : 0;
}

/* Ends the scan with a verdict (the reason copied from the store's). */
static void scan_finish(cr_store *store, struct cr_store_regex_scan *scan, int rc) {
    scan->done = true;
    scan->rc = rc;
    if (rc != CR_OK) snprintf(scan->why, sizeof(scan->why), "%s", cr_store_last_error(store));
}

static int scan_compile(cr_store *store, struct cr_store_regex_scan *scan, const char *pattern) {
    if (pattern == NULL) return cr_store_fail(store, CR_ERR_INVALID_PARAMS, "no pattern");
    int err;
    PCRE2_SIZE offset;
    scan->code = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_AUTO_CALLOUT,
                               &err, &offset, NULL);
    if (scan->code == NULL) {
        PCRE2_UCHAR text[160];
        pcre2_get_error_message(err, text, sizeof(text));
        return cr_store_fail(store, CR_ERR_INVALID_PARAMS, "regex error at offset %zu: %s",
                             (size_t)offset, (const char *)text);
    }
    scan->md = pcre2_match_data_create_from_pattern(scan->code, NULL);
    scan->mctx = pcre2_match_context_create(NULL);
    if (scan->md == NULL || scan->mctx == NULL)
        return cr_store_fail(store, CR_ERR_NOMEM, "out of memory");
    pcre2_set_match_limit(scan->mctx, store->cfg.regex_match_limit);
    pcre2_set_depth_limit(scan->mctx, store->cfg.regex_depth_limit);
    pcre2_set_callout(scan->mctx, count_step, scan);
    return CR_OK;
}

int cr_store_regex_scan_new(cr_store *store, const char *tenant, const char *pattern,
                            struct cr_store_regex_scan **out) {
    assert(store != NULL && out != NULL);
    struct cr_store_regex_scan *scan = calloc(1, sizeof(*scan));
    if (scan == NULL) return CR_ERR_NOMEM;
    scan->tenant = -1;
    scan->steps_budget = store->cfg.regex_budget_steps;
    *out = scan;
    int rc = scan_compile(store, scan, pattern);
    if (rc != CR_OK) {
        scan_finish(store, scan, rc);
        return CR_OK;
    }
    scan->tenant = cr_store_tenant_lookup(store, tenant);
    if (scan->tenant < 0 || store->object_count == 0) {
        scan->tenant = -1;
        scan_finish(store, scan, CR_OK);
        return CR_OK;
    }
    cr_store_tenant_ref(store, (uint16_t)scan->tenant);
    scan->capacity = store->object_count < store->cfg.regex_max_matches
                         ? store->object_count
                         : store->cfg.regex_max_matches;
    return CR_OK;
}

/* Returns 1 on match, 0 on none, or a cr_status. */
static int scan_match_one(cr_store *store, struct cr_store_regex_scan *scan,
                          const struct cr_store_obj *obj) {
    int rc = pcre2_match(scan->code, (PCRE2_SPTR)obj->key, obj->key_len, 0, 0, scan->md,
                         scan->mctx);
    if (rc >= 0) return 1;
    if (rc == PCRE2_ERROR_NOMATCH) return 0;
    if (rc == PCRE2_ERROR_CALLOUT)
        return cr_store_fail(store, CR_ERR_INVALID_PARAMS,
                             "regex too expensive: more than %llu steps over the keys scanned "
                             "(regex_budget_steps): narrow the pattern, or raise "
                             "--regex-budget-steps",
                             (unsigned long long)scan->steps_budget);
    if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT ||
        rc == PCRE2_ERROR_HEAPLIMIT)
        return cr_store_fail(store, CR_ERR_INVALID_PARAMS,
                             "regex too expensive: one key took more than PCRE2's match limit "
                             "(%u) or depth limit (%u)",
                             store->cfg.regex_match_limit, store->cfg.regex_depth_limit);
    PCRE2_UCHAR text[160];
    pcre2_get_error_message(rc, text, sizeof(text));
    return cr_store_fail(store, CR_ERR_INVALID_PARAMS, "regex match failed: %s",
                         (const char *)text);
}

/* Records one more match; refuses the call once the bound is passed. */
static int scan_add(cr_store *store, struct cr_store_regex_scan *scan, uint32_t id,
                    uint32_t generation) {
    if (scan->count == store->cfg.regex_max_matches)
        return cr_store_fail(store, CR_ERR_INVALID_PARAMS,
                             "regex matches more than %u keys (regex_max_matches): narrow the "
                             "pattern, or raise --regex-max-matches",
                             store->cfg.regex_max_matches);
    if (scan->count == scan->capacity) { /* objects were stored since the scan began */
        size_t capacity = scan->capacity * 2 + 16;
        if (capacity > store->cfg.regex_max_matches) capacity = store->cfg.regex_max_matches;
        struct scan_match *bigger = realloc(scan->matches, capacity * sizeof(*bigger));
        if (bigger == NULL) return cr_store_fail(store, CR_ERR_NOMEM, "out of memory");
        scan->matches = bigger;
        scan->capacity = capacity;
    } else if (scan->matches == NULL) {
        scan->matches = malloc(scan->capacity * sizeof(*scan->matches));
        if (scan->matches == NULL) return cr_store_fail(store, CR_ERR_NOMEM, "out of memory");
    }
    scan->matches[scan->count++] = (struct scan_match){id, generation};
    return CR_OK;
}

int cr_store_regex_scan_run(cr_store *store, struct cr_store_regex_scan *scan,
                            uint64_t steps_max) {
    assert(store != NULL && scan != NULL);
    if (scan->done) return CR_OK;
    uint64_t stop_at = scan->steps_used + steps_max;
    if (stop_at < steps_max) stop_at = UINT64_MAX;
    int rc = CR_OK;
    while (rc == CR_OK && scan->cursor < store->slab_high && scan->steps_used < stop_at) {
        uint32_t id = scan->cursor++;
        const struct cr_store_obj *obj = cr_store_obj_at(store, id);
        if (obj->state != CR_OBJ_COMPLETE || obj->tenant != (uint16_t)scan->tenant) continue;
        scan->steps_used++; /* a key costs a step even when PCRE2 rejects it unseen */
        int m = scan_match_one(store, scan, obj);
        if (m < 0) rc = m;
        if (m == 1) rc = scan_add(store, scan, id, obj->generation);
    }
    assert(scan->count <= store->cfg.regex_max_matches);
    if (rc == CR_OK && scan->cursor < store->slab_high) return CR_ERR_AGAIN;
    scan_finish(store, scan, rc);
    return CR_OK;
}

void cr_store_regex_scan_free(cr_store *store, struct cr_store_regex_scan *scan) {
    if (scan == NULL) return;
    if (scan->tenant >= 0) cr_store_tenant_unref(store, (uint16_t)scan->tenant);
    pcre2_match_data_free(scan->md);
    pcre2_match_context_free(scan->mctx);
    pcre2_code_free(scan->code);
    free(scan->matches);
    free(scan);
}

/* The verdict of a finished scan, its reason restored as the store's last
 * error; the object of a match that is gone or was reused since is skipped
 * by the callers (NULL from scan_object). */
static int scan_verdict(cr_store *store, const struct cr_store_regex_scan *scan) {
    assert(scan->done);
    if (scan->rc != CR_OK) return cr_store_fail(store, scan->rc, "%s", scan->why);
    return CR_OK;
}

static struct cr_store_obj *scan_object(cr_store *store, const struct cr_store_regex_scan *scan,
                                        size_t i) {
    struct cr_store_obj *obj = cr_store_obj_at(store, scan->matches[i].id);
    if (obj->state != CR_OBJ_COMPLETE || obj->generation != scan->matches[i].generation)
        return NULL;
    return obj;
}

int cr_store_get_replica_list_by_scan(
    cr_store *store, const struct cr_store_regex_scan *scan, uint64_t now_ms,
    void (*fn)(void *ctx, const char *key, uint32_t key_len,
               const struct cr_store_replica_list *replicas),
    void *ctx) {
    assert(store != NULL && scan != NULL && fn != NULL);
    int rc = scan_verdict(store, scan);
    struct cr_store_replica_list list;
    for (size_t i = 0; rc == CR_OK && i < scan->count; i++) {
        struct cr_store_obj *obj = scan_object(store, scan, i);
        if (obj == NULL) continue;
        cr_store_obj_grant_lease(store, obj, now_ms);
        cr_store_obj_fill_list(store, obj, true, &list);
        fn(ctx, obj->key, obj->key_len, &list);
    }
    return rc;
}

int cr_store_remove_by_scan(cr_store *store, const struct cr_store_regex_scan *scan, bool force,
                            uint64_t now_ms, uint64_t *removed) {
    assert(store != NULL && scan != NULL && removed != NULL);
    *removed = 0;
    int rc = scan_verdict(store, scan);
    for (size_t i = 0; rc == CR_OK && i < scan->count; i++) {
        const struct cr_store_obj *obj = scan_object(store, scan, i);
        if (obj == NULL || (!force && cr_store_obj_busy(obj, now_ms))) continue;
        cr_store_obj_remove(store, scan->matches[i].id);
        (*removed)++;
    }
    return rc;
}

/* The whole scan at once, for callers that can wait for it. */
static int scan_whole(cr_store *store, const char *tenant, const char *pattern,
                      struct cr_store_regex_scan **out) {
    int rc = cr_store_regex_scan_new(store, tenant, pattern, out);
    if (rc != CR_OK) return cr_store_fail(store, rc, "out of memory");
    rc = cr_store_regex_scan_run(store, *out, UINT64_MAX);
    assert(rc == CR_OK && (*out)->done);
    return CR_OK;
}

int cr_store_get_replica_list_by_regex(
    cr_store *store, const char *tenant, const char *pattern, uint64_t now_ms,
    void (*fn)(void *ctx, const char *key, uint32_t key_len,
               const struct cr_store_replica_list *replicas),
    void *ctx) {
    assert(store != NULL && fn != NULL);
    struct cr_store_regex_scan *scan;
    int rc = scan_whole(store, tenant, pattern, &scan);
    if (rc != CR_OK) return rc;
    rc = cr_store_get_replica_list_by_scan(store, scan, now_ms, fn, ctx);
    cr_store_regex_scan_free(store, scan);
    return rc;
}

int cr_store_remove_by_regex(cr_store *store, const char *tenant, const char *pattern,
                             bool force, uint64_t now_ms, uint64_t *removed) {
    assert(store != NULL && removed != NULL);
    *removed = 0;
    struct cr_store_regex_scan *scan;
    int rc = scan_whole(store, tenant, pattern, &scan);
    if (rc != CR_OK) return rc;
    rc = cr_store_remove_by_scan(store, scan, force, now_ms, removed);
    cr_store_regex_scan_free(store, scan);
    return rc;
}
