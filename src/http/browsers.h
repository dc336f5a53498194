/* What the HTTP front answers to browsers: the Host, Origin and body type
 * checks that stop DNS rebinding and cross-site requests (docs/http-api.md,
 * "Browsers").  crescentd's routes carry no cookies, but a page on another
 * site can still make the browser of someone on the same machine (or
 * network) send requests to it:
 *
 * - DNS rebinding: a page at http://evil.example:13333 whose name is made to
 *   resolve to 127.0.0.1 reads and posts as its own origin; its requests say
 *   `Host: evil.example:13333`.  Only names crescentd is told about (and
 *   loopback names and IP literals, which no attacker can rebind) pass.
 * - Cross-site requests: a form or fetch() on another origin may POST
 *   text/plain, form-encoded or untyped bodies without asking first (a CORS
 *   "simple" request).  Such requests carry Origin; one from another origin
 *   is refused, and a body must be application/json or application/msgpack,
 *   which no browser sends cross-origin without a preflight crescentd never
 *   answers.
 *
 * Pure functions over strings: no sockets, no threads; test_http_browsers. */
#ifndef CRESCENT_HTTP_BROWSERS_H
#define CRESCENT_HTTP_BROWSERS_H

#include <stdbool.h>
#include <stddef.h>

#define CR_HTTP_NAMES_MAX 16u
#define CR_HTTP_NAME_LEN 128u

/* A parsed allow-list: "" none, "*" any, else up to 16 names. */
struct cr_http_names {
    bool any;
    unsigned count;
    char name[CR_HTTP_NAMES_MAX][CR_HTTP_NAME_LEN];
};

/* Parses a comma-separated list (spaces around names ignored; NULL or "":
 * none; "*": any).  `flag` names the list in `error`.  CR_OK, or
 * CR_ERR_INVALID_PARAMS with `error` saying which name is wrong: more than
 * 16 names, one longer than 127 bytes, an empty one, or an origin (origins
 * true) that is not scheme://host[:port]. */
int cr_http_names_parse(const char *csv, bool origins, const char *flag,
                        struct cr_http_names *out, char *error, size_t error_size);

/* A Host header's value: allowed if absent (NULL: not a browser), if its
 * name is localhost or ends in .localhost, if it is an IPv4 or [IPv6]
 * literal, or if `hosts` names it (case-insensitive, port ignored). */
bool cr_http_host_allowed(const struct cr_http_names *hosts, const char *host);

/* An Origin header's value on a request that changes something: allowed if
 * absent (NULL), if its host[:port] is the request's Host (same origin), or
 * if `origins` names it exactly (case-insensitive).  "null" (sandboxed
 * frames, file: pages) is never the same origin. */
bool cr_http_origin_allowed(const struct cr_http_names *origins, const char *origin,
                            const char *host);

/* A body's Content-Type: application/json, application/msgpack (parameters
 * such as "; charset=utf-8" allowed).  NULL or anything else: false. */
bool cr_http_body_type_allowed(const char *content_type);

#endif
