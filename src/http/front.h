/* The HTTP front: crescent's admin and query routes over HTTP/1.1.
 *
 * One event thread (epoll) owns every connection and reads each request
 * whole (head up to 16 KiB, body up to CR_HTTP_BODY_MAX, Content-Length
 * only); a pool of worker threads runs the handlers, so an idle or slow
 * connection holds no thread.  Routes are registered before
 * cr_http_front_start.  Handlers run on the workers, so they must not touch
 * actor state: they ask an actor (cr_ask) and render what it answers. */
#ifndef CRESCENT_HTTP_FRONT_H
#define CRESCENT_HTTP_FRONT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/histogram.h"

#define CR_HTTP_ROUTES_MAX 64u
#define CR_HTTP_BODY_MAX (16u << 20)

struct cr_http_front;

struct cr_http_request {
    const char *method;
    const char *path;         /* without the query string */
    const char *query;        /* may be NULL */
    const char *content_type; /* may be NULL */
    const char *host;         /* may be NULL */
    const char *origin;       /* may be NULL */
    const char *body;         /* NUL-terminated copy; body_len excludes the NUL */
    size_t body_len;
    /* The request carried the admin token (Authorization: Bearer), or
     * crescentd runs without one: it may see owner ids and addresses. */
    bool admin;
};

struct cr_http_response {
    int status;
    const char *content_type; /* static string */
    char *body;               /* malloc'd; the front frees it */
    size_t body_len;
    const char *header;       /* static "Name: value" line (no CRLF) or NULL */
};

typedef void (*cr_http_handler)(void *ctx, const struct cr_http_request *req,
                                struct cr_http_response *resp);

/* A route matches `method` and either the exact `path` or, when `path` ends
 * in '/', any path starting with it. */
int cr_http_front_create(struct cr_http_front **out);
int cr_http_front_add_route(struct cr_http_front *front, const char *method, const char *path,
                            cr_http_handler handler, void *ctx);

/* Sets the admin token (copied; NULL or "" leaves none) that routes marked
 * with cr_http_front_require_admin need as `Authorization: Bearer TOKEN`;
 * refused requests get 401 naming what is missing.  Before start. */
int cr_http_front_set_admin_token(struct cr_http_front *front, const char *token);

/* Marks the route (method, path as registered) as a mutation that needs the
 * admin token when one is set.  CR_ERR_INVALID_PARAMS if no such route. */
int cr_http_front_require_admin(struct cr_http_front *front, const char *method,
                                const char *path);

/* Which browsers' requests are answered (DNS rebinding and cross-site
 * requests, docs/http-api.md "Browsers"): `hosts` and `origins` are
 * comma-separated lists (copied; NULL or "": none; "*": any).  Every request's
 * Host must name loopback (localhost, *.localhost), an IP literal or one of
 * `hosts` (a name, port ignored): otherwise 403.  A request that is not GET
 * or HEAD and carries Origin must come from the Host it names (same origin)
 * or from one of `origins` ("https://ui.example.com"): otherwise 403; and a
 * body must be application/json or application/msgpack: otherwise 415.
 * CR_ERR_INVALID_PARAMS (and `error` says why) for a list that does not
 * parse.  Before start. */
int cr_http_front_set_browsers(struct cr_http_front *front, const char *hosts,
                               const char *origins, char *error, size_t error_size);

/* Requests refused before any handler ran, since start (for /metrics). */
struct cr_http_refusals {
    uint64_t host, origin, content_type, admin_token;
};
void cr_http_front_refusals(const struct cr_http_front *front, struct cr_http_refusals *out);

struct cr_http_front_limits {
    unsigned workers;            /* handler threads, 1..256 */
    unsigned connections_max;    /* open connections; past it the longest idle is closed */
    unsigned request_timeout_ms; /* from a request's first byte to its last, and per write */
    unsigned idle_timeout_ms;    /* a keep-alive connection with no request is closed */
    size_t body_max;             /* larger bodies are answered 413 */
};

/* 16 workers, 4096 connections, 30 s per request, 60 s idle, 16 MiB bodies. */
void cr_http_front_limits_default(struct cr_http_front_limits *out);

/* Starts listening on HOST:PORT ([V6]:PORT, or PORT on every address).  On
 * failure returns CR_ERR_IO and writes the reason ("cannot serve HTTP on …:
 * cannot bind: Address already in use") into `error`; a failed bind may be
 * retried on another address, any other failure leaves the front only to be
 * destroyed. */
int cr_http_front_start(struct cr_http_front *front, const char *address,
                        const struct cr_http_front_limits *limits, char *error,
                        size_t error_size);

/* Each route's latency (request read to response built), for /metrics. */
struct cr_http_route_latency {
    const char *method; /* valid while the front lives */
    const char *path;
    struct cr_histogram h;
};

/* Copies at most `max` routes' histograms into `out`; returns how many. */
uint32_t cr_http_front_latency(const struct cr_http_front *front,
                               struct cr_http_route_latency *out, uint32_t max);

/* Lets the workers finish the requests they hold, stops accepting, closes
 * every connection, frees everything. */
void cr_http_front_destroy(struct cr_http_front *front);

/* Helpers for handlers: a JSON body, or {"error":…, "detail":…}. */
void cr_http_respond_json(struct cr_http_response *resp, int status, char *json_text);
void cr_http_respond_error(struct cr_http_response *resp, int status, const char *error,
                           const char *detail);

/* Lets bodies of any Content-Type through (the Host and Origin checks
 * stay): for a front that serves a peer's own protocol, such as Mooncake's
 * HTTP metadata server, whose Transfer Engine PUTs descriptors as it does. */
void cr_http_front_accept_any_body(struct cr_http_front *front);

#endif
