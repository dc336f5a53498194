/* Mooncake master's admin endpoints on --metrics-port, in the shapes its
 * master_admin_service answers at kvcache-ai/Mooncake 3b5a594 (docs/mooncake.md
 * shows each next to the reference's):
 *
 *   GET  /query_key?key=K            {"success":true,"data":[descriptor...]}, 404
 *                                    {"success":false,"error_code":-704,...}; the
 *                                    older bare form (--mooncake-query-key bare): one
 *                                    descriptor a line, text/plain, 404 OBJECT_NOT_FOUND
 *   GET  /batch_query_keys?keys=a,b  {"success":true,"data":{"a":{"ok":..,"values":..}}}
 *   GET  /get_segments_detail        {"total_segments":N,"segments":[...]}
 *   GET  /api/v1/segments/status?segment=S
 *   POST /api/v1/remove_all[?force=true&tenant_id=T]   (admin token)
 *   GET  /role, /ha_status, /leader  crescentd's role in Mooncake's words (mooncake_ha.h)
 *   GET  /kv_events/status           the RFC #1527 publisher: off in crescent
 *   /api/v1/tenant_quotas (GET, PUT, DELETE): mooncake_quotas.c
 *   /api/v1/drain_jobs[/query|/cancel]: mooncake_drain.c
 *
 * A descriptor is {"size_","buffer_address_","protocol_","transport_endpoint_"}.
 * Handlers ask the segments actor for crescent's JSON and rewrite it here. */
#include <civetweb.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "actors/subsystems.h"
#include "core/buf.h"
#include "crescent/error.h"
#include "http/front.h"
#include "http/mooncake_admin.h"
#include "http/mooncake_drain.h"
#include "http/mooncake_ha.h"
#include "http/mooncake_quotas.h"
#include "http/mooncake_reply.h"
#include "http/store_routes.h"

#define MC_TEXT "text/plain; charset=utf-8"
#define MC_METRICS_TEXT "text/plain; version=0.0.4"

static void respond(struct cr_http_response *resp, int status, const char *type, char *body) {
    resp->status = status;
    resp->content_type = type;
    resp->body = body;
    resp->body_len = body != NULL ? strlen(body) : 0;
}



static bool query_param(const struct cr_http_request *req, const char *name, char *buf,
                        size_t size) {
    return req->query != NULL && mg_get_var(req->query, strlen(req->query), name, buf, size) >= 0;
}

/* crescent's JSON for `q`, or NULL with *rc set. */
static json_t *ask(struct cr_subsystems *peers, struct cr_master_admin_query *q, int *rc) {
    char *text = NULL;
    *rc = cr_store_routes_ask(peers, q, &text);
    json_t *doc = *rc == CR_OK ? json_loads(text, 0, NULL) : NULL;
    free(text);
    if (*rc == CR_OK && doc == NULL) *rc = CR_ERR_NOMEM;
    return doc;
}

static void respond_unavailable(struct cr_http_response *resp, int rc) {
    cr_mc_respond_error(resp, 503, MC_UNAVAILABLE_IN_CURRENT_MODE, cr_strerror(rc));
}

/* The memory-replica descriptors of crescent's object JSON, in Mooncake's field
 * names; NULL (with *code) when the object has no complete replica yet. */
static json_t *descriptors(json_t *object, int *code) {
    if (!json_is_true(json_object_get(object, "complete"))) {
        *code = MC_REPLICA_IS_NOT_READY;
        return NULL;
    }
    json_t *out = json_array();
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(object, "replicas"), i, r) {
        const char *status = json_string_value(json_object_get(r, "status"));
        if (status == NULL || strcmp(status, "COMPLETE") != 0) continue;
        json_array_append_new(
            out, json_pack("{s:O, s:O, s:O, s:O}", "size_", json_object_get(r, "size"),
                           "buffer_address_", json_object_get(r, "buffer"), "protocol_",
                           json_object_get(r, "protocol"), "transport_endpoint_",
                           json_object_get(r, "endpoint")));
    }
    return out;
}

static json_t *ask_object(struct cr_subsystems *peers, const char *key, int *rc) {
    struct cr_master_admin_query q = {
        .kind = CR_MASTER_ADMIN_OBJECT, .name = key, .tenant = CR_STORE_DEFAULT_TENANT};
    return ask(peers, &q, rc);
}

static void query_key(struct cr_subsystems *peers, const struct cr_http_request *req,
                      struct cr_http_response *resp, bool bare) {
    char key[CR_STORE_KEY_LEN_MAX + 1];
    if (!query_param(req, "key", key, sizeof(key)) || key[0] == '\0') {
        if (bare) respond(resp, 400, MC_METRICS_TEXT, strdup("query_key wants ?key=KEY"));
        else cr_mc_respond_error(resp, 400, MC_INVALID_PARAMS, "query_key wants ?key=KEY");
        return;
    }
    int rc, code = MC_OBJECT_NOT_FOUND;
    json_t *object = ask_object(peers, key, &rc);
    if (object == NULL && rc != CR_ERR_OBJECT_NOT_FOUND) {
        respond_unavailable(resp, rc);
        return;
    }
    json_t *data = object != NULL ? descriptors(object, &code) : NULL;
    json_decref(object);
    const char *name = code == MC_OBJECT_NOT_FOUND ? "OBJECT_NOT_FOUND" : "REPLICA_IS_NOT_READY";
    if (!bare) {
        if (data == NULL) cr_mc_respond_error(resp, 404, code, name);
        else cr_mc_respond_doc(resp, 200, json_pack("{s:b, s:o}", "success", 1, "data", data));
        return;
    }
    /* Before Mooncake #2435: one descriptor a line, the error's name alone. */
    if (data == NULL) {
        respond(resp, 404, MC_METRICS_TEXT, strdup(name));
        return;
    }
    struct cr_buf b;
    cr_buf_init(&b);
    size_t i;
    json_t *d;
    json_array_foreach(data, i, d) {
        char *text = json_dumps(d, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (text != NULL) cr_buf_appendf(&b, "%s\n", text);
        free(text);
    }
    json_decref(data);
    size_t len;
    char *body = cr_buf_take(&b, &len);
    respond(resp, 200, MC_METRICS_TEXT, body != NULL ? body : strdup(""));
}

static void query_key_wrapped(void *ctx, const struct cr_http_request *req,
                              struct cr_http_response *resp) {
    query_key(ctx, req, resp, false);
}

static void query_key_bare(void *ctx, const struct cr_http_request *req,
                           struct cr_http_response *resp) {
    query_key(ctx, req, resp, true);
}

static int compare_strings(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

#define BATCH_KEYS_MAX 10000u /* one admin request; each key is one ask */

static void batch_query_keys(void *ctx, const struct cr_http_request *req,
                             struct cr_http_response *resp) {
    size_t cap = req->query != NULL ? strlen(req->query) + 1 : 1;
    char *list = malloc(cap), **keys = NULL;
    if (list == NULL || !query_param(req, "keys", list, cap) || list[0] == '\0') {
        free(list);
        cr_mc_respond_doc(resp, 400, json_pack("{s:b, s:s}", "success", 0, "error",
                                         "No keys provided. Use ?keys=key1,key2,..."));
        return;
    }
    size_t n = 1;
    for (const char *c = list; *c != '\0'; c++) n += *c == ',';
    if (n > BATCH_KEYS_MAX || (keys = malloc(n * sizeof(*keys))) == NULL) {
        free(list);
        cr_mc_respond_doc(resp, 400, json_pack("{s:b, s:s}", "success", 0, "error",
                                         "at most 10000 keys a request"));
        return;
    }
    n = 0;
    for (char *s = list, *comma;; s = comma + 1) {
        comma = strchr(s, ',');
        if (comma != NULL) *comma = '\0';
        keys[n++] = s;
        if (comma == NULL) break;
    }
    /* The reference answers a std::map: keys sorted, each once. */
    qsort(keys, n, sizeof(*keys), compare_strings);
    json_t *data = json_object();
    for (size_t i = 0; i < n && data != NULL; i++) {
        if (i > 0 && strcmp(keys[i], keys[i - 1]) == 0) continue;
        int rc = CR_ERR_OBJECT_NOT_FOUND, code = MC_OBJECT_NOT_FOUND;
        json_t *object = strlen(keys[i]) <= CR_STORE_KEY_LEN_MAX ? ask_object(ctx, keys[i], &rc)
                                                                 : NULL;
        if (object == NULL && rc != CR_ERR_OBJECT_NOT_FOUND) {
            json_decref(data);
            free(keys);
            free(list);
            respond_unavailable(resp, rc);
            return;
        }
        json_t *values = object != NULL ? descriptors(object, &code) : NULL;
        json_decref(object);
        const char *error = code == MC_OBJECT_NOT_FOUND ? "OBJECT_NOT_FOUND"
                                                        : "REPLICA_IS_NOT_READY";
        json_object_set_new(
            data, keys[i],
            json_pack("{s:b, s:o, s:o, s:n, s:n, s:n}", "ok", values != NULL, "error",
                      values != NULL ? json_null() : json_string(error), "values",
                      values != NULL ? values : json_null(), "disk_values", "local_disk_values",
                      "nof_values"));
    }
    free(keys);
    free(list);
    cr_mc_respond_doc(resp, 200, json_pack("{s:b, s:o}", "success", 1, "data", data));
}

/* "1.5 GiB" as the reference's ostream prints a double (6 significant digits). */
static json_t *gib_text(json_int_t bytes) {
    char text[64];
    snprintf(text, sizeof(text), "%g GiB", (double)bytes / 1024.0 / 1024.0 / 1024.0);
    return json_string(text);
}

/* crescent's client id (32 hex digits) as Mooncake's UuidToString prints its
 * pair of uint64s: "FIRST-SECOND" in decimal; "" when hidden or malformed. */
static void mooncake_uuid(const char *hex, char out[48]) {
    out[0] = '\0';
    if (hex == NULL || strlen(hex) != 32 || strspn(hex, "0123456789abcdefABCDEF") != 32) return;
    char half[17];
    memcpy(half, hex, 16), half[16] = '\0';
    unsigned long long first = strtoull(half, NULL, 16);
    memcpy(half, hex + 16, 16);
    snprintf(out, 48, "%llu-%llu", first, strtoull(half, NULL, 16));
}

static void get_segments_detail(void *ctx, const struct cr_http_request *req,
                                struct cr_http_response *resp) {
    struct cr_master_admin_query q = {.kind = CR_MASTER_ADMIN_SEGMENTS, .hide_owner = !req->admin};
    int rc;
    json_t *doc = ask(ctx, &q, &rc);
    if (doc == NULL) {
        cr_mc_respond_error(resp, 500, MC_UNAVAILABLE_IN_CURRENT_MODE, "Failed to get segments detail");
        return;
    }
    json_t *segments = json_array();
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(doc, "segments"), i, s) {
        json_int_t size = json_integer_value(json_object_get(s, "size"));
        json_int_t used = json_integer_value(json_object_get(s, "used_bytes"));
        char base[32];
        snprintf(base, sizeof(base), "0x%llx",
                 (unsigned long long)json_integer_value(json_object_get(s, "base")));
        char owner[48];
        mooncake_uuid(json_string_value(json_object_get(s, "owner")), owner);
        bool draining = json_is_true(json_object_get(s, "draining"));
        /* crescent names segments; it has no segment UUID to show. */
        json_array_append_new(
            segments,
            json_pack("{s:O, s:s, s:s, s:s, s:I, s:o, s:O, s:O, s:s, s:I, s:I, s:f}",
                      "segment_name", json_object_get(s, "name"), "segment_id", "", "client_id",
                      owner, "base_address", base, "size_bytes", size,
                      "size_human", gib_text(size), "te_endpoint", json_object_get(s, "endpoint"),
                      "protocol", json_object_get(s, "protocol"), "status",
                      draining ? "DRAINING" : "OK",
                      "allocator_used_bytes", used, "allocator_capacity_bytes", size,
                      "allocator_usage_percent", size > 0 ? (double)used / (double)size * 100.0 : 0.0));
    }
    json_decref(doc);
    cr_mc_respond_doc(resp, 200, json_pack("{s:I, s:o}", "total_segments",
                                     (json_int_t)json_array_size(segments), "segments", segments));
}

static void segment_status(void *ctx, const struct cr_http_request *req,
                           struct cr_http_response *resp) {
    char name[CR_STORE_NAME_LEN_MAX + 1];
    if (!query_param(req, "segment", name, sizeof(name)) || name[0] == '\0') {
        cr_mc_respond_error(resp, 400, MC_INVALID_PARAMS, "Missing segment query parameter");
        return;
    }
    struct cr_master_admin_query q = {.kind = CR_MASTER_ADMIN_SEGMENT, .name = name};
    int rc;
    json_t *doc = ask(ctx, &q, &rc);
    if (doc == NULL) {
        if (rc == CR_ERR_SEGMENT_NOT_FOUND)
            cr_mc_respond_error(resp, 404, MC_SEGMENT_NOT_FOUND, "SEGMENT_NOT_FOUND");
        else
            respond_unavailable(resp, rc);
        return;
    }
    bool draining = json_is_true(json_object_get(doc, "draining"));
    json_decref(doc);
    /* A mounted segment takes allocations (the reference's OK, 1) unless a
     * drain job empties it (DRAINING, 2); a drained one is unmounted. */
    cr_mc_respond_doc(resp, 200, json_pack("{s:b, s:s, s:i, s:s, s:i, s:s}", "success", 1, "segment",
                                     name, "status", draining ? 2 : 1, "status_name",
                                     draining ? "DRAINING" : "OK", "error_code", 0,
                                     "error_message", ""));
}

/* The election's fence (NULL without --ha etcd). */
static struct cr_ha_gate *gate_of(void *ctx) {
    struct cr_subsystems *peers = ctx;
    return cr_segments_ha_gate(peers->states[CR_SUBSYSTEM_SEGMENTS]);
}

static void remove_all(void *ctx, const struct cr_http_request *req,
                       struct cr_http_response *resp) {
    if (cr_mc_ha_refuse_inactive(gate_of(ctx), resp)) return; /* a standby changes nothing */
    char force[8] = "", tenant[CR_STORE_NAME_LEN_MAX + 1] = "";
    query_param(req, "force", force, sizeof(force));
    query_param(req, "tenant_id", tenant, sizeof(tenant));
    struct cr_master_admin_query q = {.kind = CR_MASTER_ADMIN_REMOVE_ALL,
                                      .tenant = tenant[0] != '\0' ? tenant : NULL,
                                      .force = strcmp(force, "true") == 0 || strcmp(force, "1") == 0};
    int rc;
    json_t *doc = ask(ctx, &q, &rc);
    if (doc == NULL) {
        respond_unavailable(resp, rc);
        return;
    }
    cr_mc_respond_doc(resp, 200, json_pack("{s:b, s:O}", "success", 1, "removed_count",
                                     json_object_get(doc, "removed_count")));
    json_decref(doc);
}

static void role(void *ctx, const struct cr_http_request *req, struct cr_http_response *resp) {
    (void)req;
    struct cr_mc_ha ha;
    cr_mc_ha_now(gate_of(ctx), &ha);
    respond(resp, 200, MC_TEXT, strdup(ha.role));
}

static void ha_status(void *ctx, const struct cr_http_request *req,
                      struct cr_http_response *resp) {
    (void)req;
    struct cr_mc_ha ha;
    cr_mc_ha_now(gate_of(ctx), &ha);
    respond(resp, 200, MC_TEXT, strdup(ha.state));
}

static void leader(void *ctx, const struct cr_http_request *req, struct cr_http_response *resp) {
    (void)req;
    struct cr_mc_ha ha;
    cr_mc_ha_now(gate_of(ctx), &ha);
    if (ha.present)
        cr_mc_respond_doc(resp, 200, json_pack("{s:b, s:s, s:I}", "present", 1, "leader_address",
                                               ha.leader_address, "view_version",
                                               (json_int_t)ha.view_version));
    else /* no election's view (no HA, or none known yet), as the reference without one */
        cr_mc_respond_doc(resp, 200, json_pack("{s:b, s:n, s:n}", "present", 0,
                                               "leader_address", "view_version"));
}

static void kv_events_status(void *ctx, const struct cr_http_request *req,
                             struct cr_http_response *resp) {
    (void)ctx, (void)req;
    /* The RFC #1527 publisher (--enable_kv_events) is not built: it is off and
     * has published nothing.  crescent's own events: /api/v1/stats. */
    cr_mc_respond_doc(resp, 200, json_pack("{s:b, s:i, s:i, s:i, s:i}", "enabled", 0,
                                     "published_batches", 0, "published_events", 0,
                                     "dropped_events", 0, "skipped_unparsed_keys", 0));
}

/* The quota and drain changes: a standby's service plane is not active
 * (reads of either still answer, from the state it follows). */
static void quotas_change(void *ctx, const struct cr_http_request *req,
                          struct cr_http_response *resp) {
    if (!cr_mc_ha_refuse_inactive(gate_of(ctx), resp)) cr_mooncake_tenant_quotas(ctx, req, resp);
}

static void drain_change(void *ctx, const struct cr_http_request *req,
                         struct cr_http_response *resp) {
    if (!cr_mc_ha_refuse_inactive(gate_of(ctx), resp)) cr_mooncake_drain_jobs(ctx, req, resp);
}

int cr_mooncake_admin_register(struct cr_http_front *front, struct cr_subsystems *peers,
                               bool query_key_is_bare) {
    static const struct {
        const char *method, *path;
        cr_http_handler handler;
        bool admin;
    } routes[] = {
        {"GET", "/batch_query_keys", batch_query_keys, false},
        {"GET", "/get_segments_detail", get_segments_detail, false},
        {"GET", "/api/v1/segments/status", segment_status, false},
        {"POST", "/api/v1/remove_all", remove_all, true},
        {"GET", "/role", role, false},
        {"GET", "/ha_status", ha_status, false},
        {"GET", "/leader", leader, false},
        {"GET", "/kv_events/status", kv_events_status, false},
        {"GET", "/api/v1/tenant_quotas", cr_mooncake_tenant_quotas, false},
        {"PUT", "/api/v1/tenant_quotas", quotas_change, true},
        {"DELETE", "/api/v1/tenant_quotas", quotas_change, true},
        {"POST", "/api/v1/drain_jobs", drain_change, true},
        {"GET", "/api/v1/drain_jobs/query", cr_mooncake_drain_jobs, false},
        {"POST", "/api/v1/drain_jobs/cancel", drain_change, true},
    };
    /* Operators change the reference's admin API with `curl -X PUT --data BODY`
     * (form-encoded) and its master takes any body: so does this front.  The
     * Host and Origin checks stay (a cross-site page's request is refused),
     * and the changes need the admin token when crescentd has one. */
    cr_http_front_accept_any_body(front);
    int rc = cr_http_front_add_route(front, "GET", "/query_key",
                                     query_key_is_bare ? query_key_bare : query_key_wrapped, peers);
    for (size_t i = 0; rc == CR_OK && i < sizeof(routes) / sizeof(routes[0]); i++) {
        rc = cr_http_front_add_route(front, routes[i].method, routes[i].path, routes[i].handler,
                                     peers);
        if (rc == CR_OK && routes[i].admin)
            rc = cr_http_front_require_admin(front, routes[i].method, routes[i].path);
    }
    return rc;
}
