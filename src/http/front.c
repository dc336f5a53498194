/* CivetWeb wrapper: one catch-all CivetWeb handler that reads the request,
 * finds the route and writes the response (see front.h). */
#include "http/front.h"

#include <assert.h>
#include <civetweb.h>
#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/runtime.h"
#include "core/log.h"
#include "crescent/error.h"

struct route {
    char method[8];
    char path[128];
    bool prefix;
    cr_http_handler handler;
    void *ctx;
    /* Latency histogram (cr_histogram's buckets), bumped by every worker:
     * relaxed atomic adds, three per request, no lock. */
    _Atomic uint64_t count, sum_ns, buckets[CR_HISTOGRAM_BUCKETS];
};

struct cr_http_front {
    struct mg_context *ctx;
    struct route routes[CR_HTTP_ROUTES_MAX];
    unsigned route_count;
};

int cr_http_front_create(struct cr_http_front **out) {
    struct cr_http_front *front = calloc(1, sizeof(*front));
    if (front == NULL) return CR_ERR_NOMEM;
    *out = front;
    return CR_OK;
}

int cr_http_front_add_route(struct cr_http_front *front, const char *method, const char *path,
                            cr_http_handler handler, void *ctx) {
    assert(front != NULL && front->ctx == NULL && handler != NULL);
    if (front->route_count == CR_HTTP_ROUTES_MAX || strlen(method) >= 8 || strlen(path) >= 128 ||
        path[0] != '/')
        return CR_ERR_INVALID_PARAMS;
    struct route *r = &front->routes[front->route_count++];
    snprintf(r->method, sizeof(r->method), "%s", method);
    snprintf(r->path, sizeof(r->path), "%s", path);
    size_t len = strlen(path);
    r->prefix = len > 1 && path[len - 1] == '/';
    r->handler = handler;
    r->ctx = ctx;
    return CR_OK;
}

/* Returns the route for the request; *path_known says whether some route
 * has this path under another method (405 rather than 404). */
static struct route *route_find(struct cr_http_front *front, const char *method,
                                const char *path, bool *path_known) {
    *path_known = false;
    for (unsigned i = 0; i < front->route_count; i++) {
        struct route *r = &front->routes[i];
        bool match = r->prefix ? strncmp(path, r->path, strlen(r->path)) == 0
                               : strcmp(path, r->path) == 0;
        if (!match) continue;
        *path_known = true;
        if (strcmp(method, r->method) == 0) return r;
    }
    return NULL;
}

void cr_http_respond_json(struct cr_http_response *resp, int status, char *json_text) {
    resp->status = status;
    resp->content_type = "application/json";
    resp->body = json_text;
    resp->body_len = json_text != NULL ? strlen(json_text) : 0;
}

void cr_http_respond_error(struct cr_http_response *resp, int status, const char *error,
                           const char *detail) {
    json_t *obj = json_pack("{s:s, s:s}", "error", error, "detail", detail ? detail : "");
    cr_http_respond_json(resp, status, obj ? json_dumps(obj, JSON_COMPACT) : NULL);
    json_decref(obj);
}

/* Reads the whole body (bounded). Returns NULL with *status set on failure. */
static char *read_body(struct mg_connection *conn, size_t *len_out, int *status) {
    const struct mg_request_info *info = mg_get_request_info(conn);
    long long declared = info->content_length;
    if (declared > (long long)CR_HTTP_BODY_MAX) {
        *status = 413;
        return NULL;
    }
    size_t cap = declared > 0 ? (size_t)declared + 1 : 4096;
    char *body = malloc(cap);
    size_t len = 0;
    while (body != NULL) {
        if (len + 1 >= cap) {
            if (cap > CR_HTTP_BODY_MAX) {
                free(body);
                *status = 413;
                return NULL;
            }
            char *bigger = realloc(body, cap * 2);
            if (bigger == NULL) break;
            body = bigger;
            cap *= 2;
        }
        int n = mg_read(conn, body + len, cap - len - 1);
        if (n <= 0) break;
        len += (size_t)n;
    }
    if (body == NULL) {
        *status = 500;
        return NULL;
    }
    body[len] = '\0';
    *len_out = len;
    return body;
}

static void write_response(struct mg_connection *conn, const struct cr_http_response *resp) {
    mg_printf(conn,
              "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
              "Cache-Control: no-store\r\n\r\n",
              resp->status, mg_get_response_code_text(conn, resp->status),
              resp->content_type ? resp->content_type : "text/plain", resp->body_len);
    if (resp->body_len > 0) mg_write(conn, resp->body, resp->body_len);
}

static void observe(struct route *r, uint64_t ns) {
    atomic_fetch_add_explicit(&r->count, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&r->sum_ns, ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&r->buckets[cr_histogram_bucket(ns)], 1, memory_order_relaxed);
}

uint32_t cr_http_front_latency(const struct cr_http_front *front,
                               struct cr_http_route_latency *out, uint32_t max) {
    uint32_t n = 0;
    for (unsigned i = 0; i < front->route_count && n < max; i++) {
        const struct route *r = &front->routes[i];
        struct cr_http_route_latency *l = &out[n++];
        l->method = r->method;
        l->path = r->path;
        l->h.count = atomic_load_explicit(&r->count, memory_order_relaxed);
        l->h.sum_ns = atomic_load_explicit(&r->sum_ns, memory_order_relaxed);
        for (unsigned b = 0; b < CR_HISTOGRAM_BUCKETS; b++)
            l->h.buckets[b] = atomic_load_explicit(&r->buckets[b], memory_order_relaxed);
    }
    return n;
}

static int dispatch(struct mg_connection *conn, void *arg) {
    struct cr_http_front *front = arg;
    uint64_t started_ns = cr_monotonic_ns();
    const struct mg_request_info *info = mg_get_request_info(conn);
    struct cr_http_request req = {.method = info->request_method,
                                  .path = info->local_uri,
                                  .query = info->query_string,
                                  .content_type = mg_get_header(conn, "Content-Type")};
    struct cr_http_response resp = {.status = 500};
    bool path_known;
    struct route *route = route_find(front, req.method, req.path, &path_known);
    int body_status = 0;
    char *body = NULL;
    if (route == NULL) {
        cr_http_respond_error(&resp, path_known ? 405 : 404,
                              path_known ? "method not allowed" : "not found", req.path);
    } else if ((body = read_body(conn, &req.body_len, &body_status)) == NULL) {
        cr_http_respond_error(&resp, body_status,
                              body_status == 413 ? "body too large" : "cannot read body", NULL);
    } else {
        req.body = body;
        route->handler(route->ctx, &req, &resp);
        observe(route, cr_monotonic_ns() - started_ns);
    }
    if (resp.body == NULL && resp.status >= 200) {
        /* A handler (or json_dumps) ran out of memory: still answer. */
        resp.status = 500;
        resp.content_type = "text/plain";
        resp.body_len = 0;
    }
    write_response(conn, &resp);
    free(resp.body);
    free(body);
    return resp.status;
}

/* While mg_start2 runs on this thread, CivetWeb's messages are collected
 * here instead of logged: the first one ("cannot bind to …: Address already
 * in use") is the reason worth one error line. */
static __thread char *start_reason;
static __thread size_t start_reason_size;

static int log_message(const struct mg_connection *conn, const char *message) {
    (void)conn;
    if (start_reason != NULL) {
        if (start_reason[0] == '\0') snprintf(start_reason, start_reason_size, "%s", message);
        return 1;
    }
    CR_WARN("http", "%s", message);
    return 1;
}

int cr_http_front_start(struct cr_http_front *front, const char *address, unsigned threads,
                        char *error, size_t error_size) {
    assert(front != NULL && front->ctx == NULL);
    char threads_text[16];
    snprintf(threads_text, sizeof(threads_text), "%u", threads);
    const char *options[] = {"listening_ports", address, "num_threads", threads_text,
                             "request_timeout_ms", "30000", "enable_keep_alive", "yes",
                             /* Headers and body leave in two writes: without
                              * NODELAY a delayed-ACK client waits ~40 ms. */
                             "tcp_nodelay", "1", NULL};
    struct mg_callbacks callbacks = {.log_message = log_message};
    struct mg_init_data init = {.callbacks = &callbacks, .user_data = front,
                                .configuration_options = options};
    char text[256] = "";
    struct mg_error_data err = {.text = text, .text_buffer_size = sizeof(text)};
    char reason[256] = "";
    start_reason = reason;
    start_reason_size = sizeof(reason);
    mg_init_library(0);
    front->ctx = mg_start2(&init, &err);
    start_reason = NULL;
    if (front->ctx == NULL) {
        snprintf(error, error_size, "cannot serve HTTP on %s: %s", address,
                 reason[0] ? reason : text[0] ? text : "unknown CivetWeb error");
        mg_exit_library();
        return CR_ERR_IO;
    }
    mg_set_request_handler(front->ctx, "/", dispatch, front);
    return CR_OK;
}

void cr_http_front_destroy(struct cr_http_front *front) {
    if (front == NULL) return;
    if (front->ctx != NULL) {
        mg_stop(front->ctx);
        mg_exit_library();
    }
    free(front);
}
