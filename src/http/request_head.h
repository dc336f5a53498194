/* One HTTP/1.1 request head, parsed by Debian's http_parser (nodejs
 * http_parser 2.9) as its bytes arrive.
 *
 * The HTTP front reads a connection's bytes into one growing buffer and
 * calls cr_http_head_parse after every read with the whole buffer (it may
 * have moved: only offsets are kept).  Bytes already seen are not parsed
 * again.  Once the head is complete, the strings the front needs (path,
 * query, Content-Type, Authorization, Host, Origin) are NUL-terminated in place and found
 * by offset; the body (Content-Length bytes) follows the head in the same
 * buffer.  No sockets, no threads, no allocation: the fuzz target
 * (tests/fuzz/fuzz_http_head.c) and the unit test drive it alone. */
#ifndef CRESCENT_HTTP_REQUEST_HEAD_H
#define CRESCENT_HTTP_REQUEST_HEAD_H

#include <http_parser.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Request line and headers: a longer head is answered 431. */
#define CR_HTTP_HEAD_MAX 16384u

/* [start, end) in the buffer; start == end == 0: absent. */
struct cr_http_span {
    uint32_t start, end;
};

enum cr_http_head_field { HEAD_FIELD_NONE, HEAD_FIELD_CONTENT_TYPE, HEAD_FIELD_AUTHORIZATION,
                          HEAD_FIELD_EXPECT, HEAD_FIELD_HOST, HEAD_FIELD_ORIGIN,
                          HEAD_FIELD_OTHER };

struct cr_http_head {
    http_parser parser;
    size_t fed; /* bytes of the buffer given to the parser so far */
    char *base; /* the buffer, during a cr_http_head_parse call only */
    /* While parsing: the header being read (its name, then its value). */
    struct cr_http_span name, value;
    enum cr_http_head_field field;
    bool in_value;
    struct cr_http_span url, content_type, authorization, expect, host, origin;
    bool transfer_encoding; /* the request named one (chunked or not) */
    bool complete;
    /* Once complete: */
    size_t head_len;  /* the request line and headers, the blank line included */
    size_t body_len;  /* Content-Length, 0 without one */
    bool keep_alive;  /* HTTP/1.1 without Connection: close, or 1.0 with keep-alive */
    bool expect_continue;
    const char *method; /* a static string ("GET") */
    uint32_t path, query, content_type_at, authorization_at; /* offsets; 0: absent */
    uint32_t host_at, origin_at; /* Host and Origin (browsers send them): 0: absent */
    char why[128]; /* why the head was refused, for a person */
};

/* Ready for a new request (on a fresh connection, or after an answer). */
void cr_http_head_init(struct cr_http_head *head);

enum { CR_HTTP_HEAD_INCOMPLETE = 0, CR_HTTP_HEAD_COMPLETE = 1 };

/* Parses what is new in buf[0, len) (the request's bytes from its first;
 * len never shrinks between calls).  Returns CR_HTTP_HEAD_INCOMPLETE (more
 * bytes needed), CR_HTTP_HEAD_COMPLETE (the fields after `complete` are
 * set and buf's head is edited in place), or the HTTP status to refuse the
 * request with (400, 411, 413, 431), head->why saying why.  Bytes past the
 * head are never read.  body_max: a larger Content-Length is 413. */
int cr_http_head_parse(struct cr_http_head *head, char *buf, size_t len, size_t body_max);

#endif
