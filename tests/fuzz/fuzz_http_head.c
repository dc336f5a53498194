/* libFuzzer target for the HTTP front's request heads
 * (src/http/request_head.c over Debian's http_parser).
 *
 * The first input byte is the size of the pieces the rest arrives in (0:
 * whole), the way reads split a request; each piece goes into a buffer
 * reallocated to exactly the bytes so far (ASan sees any over-read, and a
 * span kept as a pointer instead of an offset would dangle).
 *
 * Invariants checked besides "no crash":
 *  - an unfinished head is at most CR_HTTP_HEAD_MAX bytes (the front stops
 *    reading there), and every piece is parsed exactly once;
 *  - a refused head has a status the front knows (400, 411, 413, 431) and a
 *    non-empty NUL-terminated reason;
 *  - a complete head lies within the bytes read, its body is within the
 *    bound, its method is known, its path starts with '/' and holds no NUL
 *    before its end, and path, query, Content-Type and Authorization are
 *    NUL-terminated inside the head (the body after it is never written);
 *  - Host and Origin are NUL-terminated inside the head too, and the browser
 *    checks (src/http/browsers.c) take them, and Content-Type, without
 *    reading past them.
 * Build and run instructions are in tests/fuzz/README.md. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "http/browsers.h"
#include "http/request_head.h"

#define BODY_MAX (1u << 20)

static void check_string(const char *buf, size_t head_len, uint32_t at) {
    if (at == 0) return;
    if (at >= head_len || memchr(buf + at, '\0', head_len - at) == NULL) abort();
}

static void check_complete(const struct cr_http_head *head, const char *buf, size_t len,
                           const uint8_t *original) {
    if (head->head_len == 0 || head->head_len > len || head->body_len > BODY_MAX) abort();
    if (head->method == NULL || head->method[0] == '\0' || head->path == 0) abort();
    if (buf[head->path] != '/') abort();
    check_string(buf, head->head_len, head->path);
    check_string(buf, head->head_len, head->query);
    check_string(buf, head->head_len, head->content_type_at);
    check_string(buf, head->head_len, head->authorization_at);
    check_string(buf, head->head_len, head->host_at);
    check_string(buf, head->head_len, head->origin_at);
    static struct cr_http_names hosts, origins;
    static int lists;
    if (!lists) {
        char error[256];
        if (cr_http_names_parse("a.example,b.example", false, "hosts", &hosts, error,
                                sizeof(error)) != 0 ||
            cr_http_names_parse("https://ui.example", true, "origins", &origins, error,
                                sizeof(error)) != 0)
            abort();
        lists = 1;
    }
    const char *host = head->host_at != 0 ? buf + head->host_at : NULL;
    const char *origin = head->origin_at != 0 ? buf + head->origin_at : NULL;
    (void)cr_http_host_allowed(&hosts, host);
    (void)cr_http_origin_allowed(&origins, origin, host);
    (void)cr_http_body_type_allowed(head->content_type_at != 0 ? buf + head->content_type_at
                                                                : NULL);
    if (memcmp(buf + head->head_len, original + head->head_len, len - head->head_len) != 0)
        abort(); /* bytes past the head were written */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    size_t step = data[0] != 0 ? data[0] : size;
    data++, size--;
    struct cr_http_head head;
    cr_http_head_init(&head);
    char *buf = NULL;
    int status = CR_HTTP_HEAD_INCOMPLETE;
    size_t have = 0;
    while (have < size && status == CR_HTTP_HEAD_INCOMPLETE) {
        size_t n = size - have < step ? size - have : step;
        char *moved = malloc(have + n);
        if (moved == NULL) abort();
        if (have > 0) memcpy(moved, buf, have);
        free(buf);
        buf = moved;
        memcpy(buf + have, data + have, n);
        have += n;
        status = cr_http_head_parse(&head, buf, have, BODY_MAX);
        if (status == CR_HTTP_HEAD_INCOMPLETE && (head.fed != have || have > CR_HTTP_HEAD_MAX))
            abort();
    }
    if (status == CR_HTTP_HEAD_COMPLETE) {
        check_complete(&head, buf, have, data);
    } else if (status != CR_HTTP_HEAD_INCOMPLETE) {
        if (status != 400 && status != 411 && status != 413 && status != 431) abort();
        if (head.why[0] == '\0' || strnlen(head.why, sizeof(head.why)) == sizeof(head.why))
            abort();
    }
    free(buf);
    return 0;
}

/* ---- seed corpus: the heads of tests/unit/test_request_head.c, written
 * when CR_FUZZ_SEEDS is set ---- */

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *dir = getenv("CR_FUZZ_SEEDS");
    if (dir == NULL) return 0;
    mkdir(dir, 0755);
    static const char *const seeds[] = {
        "\x07" "POST /api/v1/a%20b?x=1&y=%41 HTTP/1.1\r\nHost: h\r\n"
        "content-TYPE: application/msgpack\r\nX-Empty:\r\nAuthorization: Bearer s\r\n"
        "Expect: 100-continue\r\nContent-Length: 5\r\n\r\nhelloGET /n HTTP/1.1\r\n\r\n",
        "\x00" "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n",
        "\x01" "GET /health HTTP/1.1\r\nConnection: close\r\n\r\n",
        "\x00" "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
        "\x03" "POST /q HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n",
        "\x00" "GET http://h/x HTTP/1.1\r\nX: a\r\n b\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/seed-%02zu", dir, i);
        FILE *f = fopen(path, "wb");
        if (f == NULL) continue;
        fwrite(seeds[i], 1, 1 + strlen(seeds[i] + 1), f);
        fclose(f);
    }
    return 0;
}
