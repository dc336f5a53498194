/* Mooncake's /api/v1/tenant_quotas on --metrics-port, in the shapes of its
 * master_admin_service at kvcache-ai/Mooncake 3b5a594 (docs/mooncake.md):
 *
 *   GET    /api/v1/tenant_quotas[?tenant_id=T]  {"success":true,"data":[snapshot...]}
 *                                               or one snapshot; 404 -704 without a policy
 *   PUT    /api/v1/tenant_quotas?tenant_id=T    body {"requested_quota_bytes":N} (admin token)
 *   DELETE /api/v1/tenant_quotas?tenant_id=T    {"success":true,"data":null} (admin token);
 *                                               409 -1702 while T holds objects
 *
 * A snapshot is {"tenant_id","requested_quota_bytes","effective_quota_bytes",
 * "charged_bytes","admission_closed","over_quota","has_explicit_policy"}.
 * The store keeps the policies and charges (src/core/store_quota.c) and
 * refuses a PutStart past a quota with TENANT_QUOTA_EXCEEDED (-1700). */
#include "http/mooncake_quotas.h"

#include <assert.h>
#include <civetweb.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "actors/subsystems.h"
#include "crescent/error.h"
#include "http/front.h"
#include "http/mooncake_reply.h"
#include "http/store_routes.h"

#define MC_INTERNAL_ERROR (-1)

/* ---- on the segments actor's thread ----------------------------------------- */

static json_t *snapshot_json(const struct cr_store_quota_view *v) {
    return json_pack("{s:s, s:I, s:I, s:I, s:b, s:b, s:b}", "tenant_id", v->tenant,
                     "requested_quota_bytes", (json_int_t)v->requested_bytes,
                     "effective_quota_bytes", (json_int_t)v->effective_bytes, "charged_bytes",
                     (json_int_t)v->charged_bytes, "admission_closed", 0, "over_quota",
                     v->over_quota, "has_explicit_policy", 1);
}

static int compare_tenants(const void *a, const void *b) {
    return strcmp(json_string_value(json_object_get(*(json_t *const *)a, "tenant_id")),
                  json_string_value(json_object_get(*(json_t *const *)b, "tenant_id")));
}

/* Every policy, by tenant name (the reference's std::map order). */
static json_t *list(const cr_store *store) {
    size_t n = 0, cap = 16;
    json_t **items = malloc(cap * sizeof(*items));
    struct cr_store_quota_view v;
    uint32_t cursor = 0;
    while (items != NULL && cr_store_quota_next(store, &cursor, &v)) {
        if (n == cap) {
            json_t **bigger = realloc(items, 2 * cap * sizeof(*items));
            if (bigger == NULL) break;
            items = bigger, cap *= 2;
        }
        items[n++] = snapshot_json(&v);
    }
    if (items == NULL) return NULL;
    qsort(items, n, sizeof(*items), compare_tenants);
    json_t *data = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(data, items[i]);
    free(items);
    return data;
}

static json_t *failure(const cr_store *store, int rc) {
    int code = rc == CR_ERR_OBJECT_NOT_FOUND  ? MC_OBJECT_NOT_FOUND
               : rc == CR_ERR_INVALID_PARAMS  ? MC_INVALID_PARAMS
               : rc == CR_ERR_TENANT_NOT_EMPTY ? MC_TENANT_NOT_EMPTY
                                               : MC_INTERNAL_ERROR;
    const char *message = rc == CR_ERR_OBJECT_NOT_FOUND ? "OBJECT_NOT_FOUND"
                                                        : cr_store_last_error(store);
    return json_pack("{s:b, s:i, s:s}", "success", 0, "error_code", code, "error_message",
                     message);
}

int cr_mooncake_quotas_apply(cr_store *store, const struct cr_master_admin_query *q,
                             char **json_out) {
    assert(store != NULL && q != NULL && json_out != NULL);
    struct cr_store_quota_view v;
    json_t *doc;
    int rc = CR_OK;
    switch (q->kind) {
    case CR_MASTER_ADMIN_QUOTAS:
        if (q->name == NULL) {
            json_t *data = list(store);
            doc = data != NULL ? json_pack("{s:b, s:o}", "success", 1, "data", data) : NULL;
            break;
        }
        rc = cr_store_quota_get(store, q->name, &v);
        doc = rc == CR_OK ? json_pack("{s:b, s:o}", "success", 1, "data", snapshot_json(&v))
                          : failure(store, rc);
        break;
    case CR_MASTER_ADMIN_QUOTA_SET:
        rc = cr_store_quota_set(store, q->name, q->quota_bytes, &v);
        doc = rc == CR_OK ? json_pack("{s:b, s:o}", "success", 1, "data", snapshot_json(&v))
                          : failure(store, rc);
        break;
    case CR_MASTER_ADMIN_QUOTA_DELETE:
        rc = cr_store_quota_delete(store, q->name);
        doc = rc == CR_OK ? json_pack("{s:b, s:n}", "success", 1, "data") : failure(store, rc);
        break;
    default: return CR_ERR_INVALID_PARAMS;
    }
    *json_out = doc != NULL ? json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(doc);
    return *json_out != NULL ? CR_OK : CR_ERR_NOMEM;
}

/* ---- on an HTTP worker ---------------------------------------------------------- */




/* The body's requested_quota_bytes; false (with why) when it is not JSON
 * or the field is not a non-negative integer.  A missing field is 0, as
 * the reference's struct_json leaves it. */
static bool quota_body(const struct cr_http_request *req, uint64_t *bytes, char *why, size_t len) {
    json_error_t err;
    json_t *doc = req->body != NULL ? json_loadb(req->body, req->body_len, 0, &err) : NULL;
    if (doc == NULL || !json_is_object(doc)) {
        snprintf(why, len, "Invalid JSON body: %.100s",
                 doc == NULL ? (req->body_len == 0 ? "empty body" : err.text)
                             : "expected an object");
        json_decref(doc);
        return false;
    }
    json_t *field = json_object_get(doc, "requested_quota_bytes");
    bool ok = field == NULL || (json_is_integer(field) && json_integer_value(field) >= 0);
    *bytes = field != NULL && ok ? (uint64_t)json_integer_value(field) : 0;
    json_decref(doc);
    if (!ok) snprintf(why, len, "Invalid JSON body: requested_quota_bytes is not a byte count");
    return ok;
}

void cr_mooncake_tenant_quotas(void *ctx, const struct cr_http_request *req,
                               struct cr_http_response *resp) {
    struct cr_subsystems *peers = ctx;
    char tenant[CR_STORE_NAME_LEN_MAX + 1] = "";
    bool named = req->query != NULL &&
                 mg_get_var(req->query, strlen(req->query), "tenant_id", tenant,
                            sizeof(tenant)) > 0;
    bool get = strcmp(req->method, "GET") == 0;
    struct cr_master_admin_query q = {.kind = CR_MASTER_ADMIN_QUOTAS,
                                      .name = named ? tenant : NULL};
    if (!get && !named) {
        cr_mc_respond_error(resp, 400, MC_INVALID_PARAMS, "Missing or invalid tenant_id");
        return;
    }
    if (strcmp(req->method, "PUT") == 0) {
        char why[160];
        q.kind = CR_MASTER_ADMIN_QUOTA_SET;
        if (!quota_body(req, &q.quota_bytes, why, sizeof(why))) {
            cr_mc_respond_error(resp, 400, MC_INVALID_PARAMS, why);
            return;
        }
    } else if (strcmp(req->method, "DELETE") == 0) {
        q.kind = CR_MASTER_ADMIN_QUOTA_DELETE;
    }
    char *text = NULL;
    int rc = cr_store_routes_ask(peers, &q, &text);
    json_t *doc = rc == CR_OK ? json_loads(text, 0, NULL) : NULL;
    free(text);
    if (doc == NULL) {
        cr_mc_respond_error(resp, 503, -1011, cr_strerror(rc != CR_OK ? rc : CR_ERR_NOMEM));
        return;
    }
    json_t *code = json_object_get(doc, "error_code");
    cr_mc_respond_doc(resp, code != NULL ? cr_mc_http_status((int)json_integer_value(code)) : 200, doc);
}
