/* An HTTP/1.1 request head through Debian's http_parser (see
 * request_head.h).  http_parser is a streaming parser: it calls back with
 * pieces of the target and of each header's name and value as they arrive,
 * and a piece may end where a read ended.  The pieces of one token are
 * consecutive bytes of the same buffer, so a token is kept as the span from
 * its first piece's start to its last piece's end, as offsets (the buffer
 * is reallocated as it grows).  The parser is paused in on_headers_complete,
 * so it stops at the head's last byte: the body and a pipelined request
 * after it stay unread, for the front to take in place. */
#include "http/request_head.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static int on_url(http_parser *parser, const char *at, size_t len);
static int on_header_field(http_parser *parser, const char *at, size_t len);
static int on_header_value(http_parser *parser, const char *at, size_t len);
static int on_headers_complete(http_parser *parser);

static const http_parser_settings settings = {
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
};

void cr_http_head_init(struct cr_http_head *head) {
    assert(head != NULL);
    memset(head, 0, sizeof(*head));
    http_parser_init(&head->parser, HTTP_REQUEST);
    head->parser.data = head;
    /* http_parser's bound is one process-wide number; crescentd's front is
     * its only user, and sets the same value every time. */
    http_parser_set_max_header_size(CR_HTTP_HEAD_MAX);
}

/* ---- http_parser's callbacks: spans of the buffer ---- */

static struct cr_http_head *head_of(http_parser *parser) {
    return parser->data;
}

/* Extends `span` by the piece [at, at + len); a new token when `first`. */
static void span_add(struct cr_http_head *head, struct cr_http_span *span, bool first,
                     const char *at, size_t len) {
    assert(head->base != NULL && at >= head->base + head->fed);
    uint32_t start = (uint32_t)(at - head->base);
    if (first) span->start = start;
    span->end = start + (uint32_t)len;
}

static int on_url(http_parser *parser, const char *at, size_t len) {
    struct cr_http_head *head = head_of(parser);
    span_add(head, &head->url, head->url.end == 0, at, len);
    return 0;
}

static bool name_is(const struct cr_http_head *head, const char *name) {
    size_t n = head->name.end - head->name.start;
    return n == strlen(name) && strncasecmp(head->base + head->name.start, name, n) == 0;
}

/* The header just read: kept if the front needs it (the first of its
 * name wins, as a later duplicate cannot be told from an injected one). */
static void header_done(struct cr_http_head *head) {
    struct cr_http_span *keep = head->field == HEAD_FIELD_CONTENT_TYPE    ? &head->content_type
                                : head->field == HEAD_FIELD_AUTHORIZATION ? &head->authorization
                                : head->field == HEAD_FIELD_EXPECT        ? &head->expect
                                : head->field == HEAD_FIELD_HOST          ? &head->host
                                : head->field == HEAD_FIELD_ORIGIN        ? &head->origin
                                                                          : NULL;
    if (keep != NULL && keep->end == 0) *keep = head->value;
    head->field = HEAD_FIELD_NONE;
    head->in_value = false;
}

static int on_header_field(http_parser *parser, const char *at, size_t len) {
    struct cr_http_head *head = head_of(parser);
    bool first = head->in_value || head->field == HEAD_FIELD_NONE;
    if (head->in_value) header_done(head);
    span_add(head, &head->name, first, at, len);
    head->field = HEAD_FIELD_OTHER; /* named once its value starts */
    return 0;
}

static int on_header_value(http_parser *parser, const char *at, size_t len) {
    struct cr_http_head *head = head_of(parser);
    bool first = !head->in_value;
    if (first) {
        head->in_value = true;
        head->field = name_is(head, "Content-Type")    ? HEAD_FIELD_CONTENT_TYPE
                      : name_is(head, "Authorization") ? HEAD_FIELD_AUTHORIZATION
                      : name_is(head, "Expect")        ? HEAD_FIELD_EXPECT
                      : name_is(head, "Host")          ? HEAD_FIELD_HOST
                      : name_is(head, "Origin")        ? HEAD_FIELD_ORIGIN
                                                       : HEAD_FIELD_OTHER;
        if (name_is(head, "Transfer-Encoding")) head->transfer_encoding = true;
    }
    span_add(head, &head->value, first, at, len);
    return 0;
}

static int on_headers_complete(http_parser *parser) {
    struct cr_http_head *head = head_of(parser);
    if (head->in_value) header_done(head);
    head->complete = true;
    http_parser_pause(parser, 1); /* stop at the head's last byte */
    return 0;
}

/* ---- the head, once complete ---- */

static int refuse(struct cr_http_head *head, int status, const char *why) {
    snprintf(head->why, sizeof(head->why), "%s", why);
    return status;
}

static void url_decode_in_place(char *s) {
    char *o = s;
    for (char *p = s; *p != '\0'; p++) {
        unsigned v;
        if (*p == '%' && sscanf(p + 1, "%2x", &v) == 1 && v != 0 && p[1] != '\0' && p[2] != '\0') {
            *o++ = (char)v;
            p += 2;
        } else {
            *o++ = *p;
        }
    }
    *o = '\0';
}

/* A header's value as a NUL-terminated string in place (the byte after a
 * value is the CR or LF ending its line); returns its offset, 0 if absent. */
static uint32_t terminate(char *buf, struct cr_http_span span) {
    if (span.end == 0) return 0;
    buf[span.end] = '\0';
    return span.start;
}

/* Checks what http_parser leaves to its caller and makes the strings. */
static int head_finish(struct cr_http_head *head, char *buf, size_t body_max) {
    http_parser *parser = &head->parser;
    if (parser->http_major != 1)
        return refuse(head, 400, "the request line is not METHOD TARGET HTTP/1.x");
    if (head->transfer_encoding)
        return refuse(head, 411, "chunked request bodies are not supported: send Content-Length");
    uint64_t len = parser->flags & F_CONTENTLENGTH ? parser->content_length : 0;
    if (len > body_max) {
        snprintf(head->why, sizeof(head->why),
                 "the body (%llu bytes) is larger than the HTTP front's bound (%zu MiB)",
                 (unsigned long long)len, body_max >> 20);
        return 413;
    }
    /* The target: a path, its query split off at '?' and decoded apart. */
    assert(head->url.end > head->url.start);
    buf[head->url.end] = '\0'; /* the space before HTTP/1.x */
    if (buf[head->url.start] != '/') return refuse(head, 400, "the target must be a path");
    char *query = strchr(buf + head->url.start, '?');
    if (query != NULL) {
        *query++ = '\0';
        head->query = (uint32_t)(query - buf);
    }
    head->path = head->url.start;
    url_decode_in_place(buf + head->path);
    head->method = http_method_str((enum http_method)parser->method);
    head->body_len = (size_t)len;
    head->keep_alive = http_should_keep_alive(parser) != 0;
    size_t expect_len = head->expect.end - head->expect.start;
    head->expect_continue = expect_len == 12 &&
                            strncasecmp(buf + head->expect.start, "100-continue", 12) == 0;
    head->content_type_at = terminate(buf, head->content_type);
    head->authorization_at = terminate(buf, head->authorization);
    head->host_at = terminate(buf, head->host);
    head->origin_at = terminate(buf, head->origin);
    return CR_HTTP_HEAD_COMPLETE;
}

int cr_http_head_parse(struct cr_http_head *head, char *buf, size_t len, size_t body_max) {
    assert(head != NULL && buf != NULL && len >= head->fed && !head->complete);
    if (len == head->fed) return CR_HTTP_HEAD_INCOMPLETE; /* 0 bytes would mean EOF */
    if (len > UINT32_MAX / 2) /* spans are 32-bit; the front never gets near */
        return refuse(head, 431, "request head too large");
    head->base = buf;
    size_t n = http_parser_execute(&head->parser, &settings, buf + head->fed, len - head->fed);
    head->base = NULL;
    enum http_errno err = HTTP_PARSER_ERRNO(&head->parser);
    if (err == HPE_PAUSED && head->complete) {
        /* Paused on the head's last byte (its final LF). */
        head->head_len = head->fed + n + 1;
        head->fed = head->head_len;
        return head_finish(head, buf, body_max);
    }
    head->fed += n;
    if (err == HPE_OK) {
        /* http_parser counts every byte before the head's end, blank lines
         * before the request line too: an unfinished head is within bound. */
        assert(head->fed == len && len <= CR_HTTP_HEAD_MAX);
        return CR_HTTP_HEAD_INCOMPLETE;
    }
    if (err == HPE_HEADER_OVERFLOW) {
        snprintf(head->why, sizeof(head->why), "more than %u bytes", CR_HTTP_HEAD_MAX);
        return 431;
    }
    if (err == HPE_UNEXPECTED_CONTENT_LENGTH && head->transfer_encoding)
        return refuse(head, 411, "chunked request bodies are not supported: send Content-Length");
    if (err == HPE_INVALID_CONTENT_LENGTH || err == HPE_UNEXPECTED_CONTENT_LENGTH)
        return refuse(head, 400, "Content-Length is not a number, or is given twice");
    snprintf(head->why, sizeof(head->why), "malformed request: %s",
             http_errno_description(err));
    return 400;
}
