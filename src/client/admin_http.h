/* A minimal HTTP/1.0 GET for crescentctl's admin commands (health, stats):
 * one request per connection, bounded response, timeout on every step. */
#ifndef CRESCENT_CLIENT_ADMIN_HTTP_H
#define CRESCENT_CLIENT_ADMIN_HTTP_H

#include <stddef.h>

#define CR_ADMIN_HTTP_RESPONSE_MAX (8u << 20)

/* GETs `path` from HOST:PORT.  Returns CR_OK with the HTTP status in
 * *status_out and the body (malloc'd, NUL-terminated) in *body_out, or
 * CR_ERR_INVALID_PARAMS (bad address), CR_ERR_IO (connect/send/recv failed:
 * `error` says which), CR_ERR_TIMEOUT or CR_ERR_PROTOCOL (not HTTP). */
int cr_admin_http_get(const char *address, const char *path, int timeout_ms, int *status_out,
                      char **body_out, char *error, size_t error_size);

#endif
