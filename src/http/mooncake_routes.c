/* Mooncake master's HTTP endpoints on --metrics-port, answering in its
 * shapes so existing scripts keep working (see store_routes.h):
 *
 *   GET /get_all_keys            every key, one per line
 *   GET /get_all_segments        every segment name, one per line
 *   (the admin endpoints, /query_key among them: mooncake_admin.c)
 *   GET /query_segment?segment=S "S\nUsed(bytes): U\nCapacity(bytes) : C\n";
 *                                500 "Failed to query segment" when S is unknown
 *
 * Each asks the segments actor for crescent's JSON view and rewrites it here,
 * on the HTTP worker. */
#include <civetweb.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "actors/subsystems.h"
#include "core/buf.h"
#include "crescent/error.h"
#include "http/front.h"
#include "http/mooncake_admin.h"
#include "http/store_routes.h"

#define MOONCAKE_TEXT "text/plain; version=0.0.4" /* what Mooncake's master sends */

static void respond_text(struct cr_http_response *resp, int status, struct cr_buf *b) {
    resp->status = status;
    resp->content_type = MOONCAKE_TEXT;
    resp->body = cr_buf_take(b, &resp->body_len);
}

static void respond_plain(struct cr_http_response *resp, int status, const char *text) {
    struct cr_buf b;
    cr_buf_init(&b);
    cr_buf_append(&b, text, strlen(text));
    respond_text(resp, status, &b);
}

/* Asks for `q`; on failure answers (503, or `status_missing` with the error
 * name when the object or segment is unknown) and returns NULL. */
static json_t *ask_json(struct cr_subsystems *peers, struct cr_master_admin_query *q,
                        struct cr_http_response *resp, int status_missing, const char *missing) {
    char *text = NULL;
    int rc = cr_store_routes_ask(peers, q, &text);
    json_t *doc = rc == CR_OK ? json_loads(text, 0, NULL) : NULL;
    free(text);
    if (doc != NULL) return doc;
    if (rc == CR_ERR_OBJECT_NOT_FOUND || rc == CR_ERR_SEGMENT_NOT_FOUND)
        respond_plain(resp, status_missing, missing != NULL ? missing : cr_status_name(rc));
    else
        respond_plain(resp, 503, rc == CR_OK ? "out of memory" : cr_strerror(rc));
    return NULL;
}

/* Query parameter `name` (percent-decoded) into buf; false when absent or too long. */
static bool query_param(const struct cr_http_request *req, const char *name, char *buf,
                        size_t size) {
    return req->query != NULL && mg_get_var(req->query, strlen(req->query), name, buf, size) >= 0;
}

static void lines_of(struct cr_http_response *resp, json_t *list, const char *field) {
    struct cr_buf b;
    cr_buf_init(&b);
    size_t i;
    json_t *item;
    json_array_foreach(list, i, item) {
        const char *s = json_string_value(field != NULL ? json_object_get(item, field) : item);
        if (s == NULL) continue;
        cr_buf_append(&b, s, strlen(s));
        cr_buf_append(&b, "\n", 1);
    }
    respond_text(resp, 200, &b);
}

/* Asked in slices (store_routes.c's render_keys), a line per key as each
 * slice comes, so the store's thread serves RPCs and /health between them. */
static void get_all_keys(void *ctx, const struct cr_http_request *req,
                         struct cr_http_response *resp) {
    (void)req;
    uint32_t cursor = 0;
    bool done = false;
    struct cr_master_admin_query q = {.kind = CR_MASTER_ADMIN_KEYS, .cursor = &cursor,
                                      .done = &done};
    struct cr_buf b;
    cr_buf_init(&b);
    while (!done) {
        json_t *doc = ask_json(ctx, &q, resp, 500, "Failed to get all keys");
        if (doc == NULL) {
            cr_buf_free(&b);
            return;
        }
        size_t i;
        json_t *item;
        json_array_foreach(json_object_get(doc, "keys"), i, item) {
            const char *key = json_string_value(item);
            if (key == NULL) continue;
            cr_buf_append(&b, key, strlen(key));
            cr_buf_append(&b, "\n", 1);
        }
        json_decref(doc);
    }
    respond_text(resp, 200, &b);
}

static void get_all_segments(void *ctx, const struct cr_http_request *req,
                             struct cr_http_response *resp) {
    (void)req;
    struct cr_master_admin_query q = {.kind = CR_MASTER_ADMIN_SEGMENTS};
    json_t *doc = ask_json(ctx, &q, resp, 500, "Failed to get all segments");
    if (doc == NULL) return;
    lines_of(resp, json_object_get(doc, "segments"), "name");
    json_decref(doc);
}

static void query_segment(void *ctx, const struct cr_http_request *req,
                          struct cr_http_response *resp) {
    char name[CR_STORE_NAME_LEN_MAX + 1];
    if (!query_param(req, "segment", name, sizeof(name)) || name[0] == '\0') {
        respond_plain(resp, 400, "query_segment wants ?segment=NAME");
        return;
    }
    struct cr_master_admin_query q = {.kind = CR_MASTER_ADMIN_SEGMENT, .name = name};
    json_t *doc = ask_json(ctx, &q, resp, 500, "Failed to query segment");
    if (doc == NULL) return;
    struct cr_buf b;
    cr_buf_init(&b);
    cr_buf_appendf(&b, "%s\nUsed(bytes): %lld\nCapacity(bytes) : %lld\n", name,
                   (long long)json_integer_value(json_object_get(doc, "used_bytes")),
                   (long long)json_integer_value(json_object_get(doc, "size")));
    json_decref(doc);
    respond_text(resp, 200, &b);
}

int cr_mooncake_routes_register(struct cr_http_front *front, struct cr_subsystems *peers,
                                bool query_key_is_bare) {
    static const struct {
        const char *path;
        cr_http_handler handler;
    } routes[] = {
        {"/get_all_keys", get_all_keys},
        {"/get_all_segments", get_all_segments},
        {"/query_segment", query_segment},
    };
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
        int rc = cr_http_front_add_route(front, "GET", routes[i].path, routes[i].handler, peers);
        if (rc != CR_OK) return rc;
    }
    return cr_mooncake_admin_register(front, peers, query_key_is_bare);
}
