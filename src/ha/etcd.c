/* etcd v3 over its JSON gateway with libcurl: requests built with jansson,
 * answers decoded by etcd_json.c, endpoint failover (etcd.h). */
#include "ha/etcd.h"

#include <assert.h>
#include <curl/curl.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crescent/error.h"

/* An answer larger than this is not one crescent asked for. */
#define BODY_MAX (1u << 20)
#define B64_MAX (((CR_ETCD_VALUE_MAX + 2u) / 3u) * 4u + 1u)

struct cr_etcd {
    char endpoints[CR_ETCD_ENDPOINTS_MAX][CR_ETCD_ENDPOINT_LEN_MAX];
    uint32_t count;
    uint32_t current;
    uint32_t timeout_ms;
    CURL *curl;
    struct curl_slist *headers;
    struct cr_etcd_stats stats;
};

/* The answer being read; a watch looks at each complete line as it comes. */
struct body {
    char *data;
    size_t len, cap;
    bool overflow;
    bool watch;       /* stop at the first message with events */
    bool watch_event; /* one arrived */
    bool watch_created;
    size_t scanned;   /* bytes of data already looked at for lines */
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_OK;

static void init_curl(void) { curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Looks at the complete lines of a watch stream received so far. */
static void watch_scan(struct body *b) {
    while (b->scanned < b->len) {
        char *nl = memchr(b->data + b->scanned, '\n', b->len - b->scanned);
        if (nl == NULL) return;
        size_t start = b->scanned, n = (size_t)(nl - (b->data + start));
        b->scanned = start + n + 1;
        uint32_t events = 0;
        bool deleted = false;
        int64_t rev = 0;
        char err[CR_ETCD_ERROR_MAX];
        if (n == 0) continue;
        if (cr_etcd_decode_watch(b->data + start, n, &events, &deleted, &rev, err) != CR_OK)
            continue; /* a line that does not decode is no event; the caller times out */
        b->watch_created = true;
        if (events > 0) b->watch_event = true;
    }
}

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *arg) {
    struct body *b = arg;
    size_t n = size * nmemb;
    if (b->len + n + 1 > BODY_MAX) {
        b->overflow = true;
        return 0;
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap == 0 ? 4096 : b->cap;
        while (cap < b->len + n + 1) cap *= 2;
        char *grown = realloc(b->data, cap);
        if (grown == NULL) return 0;
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, ptr, n);
    b->len += n;
    b->data[b->len] = '\0';
    if (b->watch) {
        watch_scan(b);
        if (b->watch_event) return 0; /* enough: the caller reacts now */
    }
    return n;
}

static int parse_endpoint(const char *text, size_t len, char out[CR_ETCD_ENDPOINT_LEN_MAX]) {
    while (len > 0 && (*text == ' ')) text++, len--;
    while (len > 0 && text[len - 1] == ' ') len--;
    if (len > 7 && strncmp(text, "http://", 7) == 0) text += 7, len -= 7;
    if (len == 0 || len >= CR_ETCD_ENDPOINT_LEN_MAX) return CR_ERR_INVALID_PARAMS;
    const char *colon = memrchr(text, ':', len);
    if (colon == NULL || colon == text || colon == text + len - 1) return CR_ERR_INVALID_PARAMS;
    unsigned long port = 0;
    for (const char *p = colon + 1; p < text + len; p++) {
        if (*p < '0' || *p > '9') return CR_ERR_INVALID_PARAMS;
        port = port * 10 + (unsigned long)(*p - '0');
        if (port > 65535) return CR_ERR_INVALID_PARAMS;
    }
    if (port == 0) return CR_ERR_INVALID_PARAMS;
    for (const char *p = text; p < colon; p++)
        if (*p == '/' || *p == '@' || *p == '?' || *p == '#' || *p <= ' ') return CR_ERR_INVALID_PARAMS;
    memcpy(out, text, len);
    out[len] = '\0';
    return CR_OK;
}

int cr_etcd_open(const char *endpoints, uint32_t timeout_ms, struct cr_etcd **out, char *err,
                 size_t err_len) {
    assert(endpoints != NULL && out != NULL && err != NULL);
    *out = NULL;
    pthread_once(&curl_once, init_curl);
    if (curl_init_rc != CURLE_OK) {
        snprintf(err, err_len, "libcurl failed to initialise: %s", curl_easy_strerror(curl_init_rc));
        return CR_ERR_IO;
    }
    struct cr_etcd *e = calloc(1, sizeof(*e));
    if (e == NULL) return CR_ERR_NOMEM;
    const char *p = endpoints;
    while (*p != '\0') {
        size_t n = strcspn(p, ";,");
        if (n > 0) {
            if (e->count == CR_ETCD_ENDPOINTS_MAX) {
                snprintf(err, err_len, "etcd endpoints: more than %u given", CR_ETCD_ENDPOINTS_MAX);
                free(e);
                return CR_ERR_INVALID_PARAMS;
            }
            if (parse_endpoint(p, n, e->endpoints[e->count]) != CR_OK) {
                snprintf(err, err_len, "etcd endpoint '%.*s' is not HOST:PORT (e.g. 127.0.0.1:2379)",
                         (int)(n > 200 ? 200 : n), p);
                free(e);
                return CR_ERR_INVALID_PARAMS;
            }
            e->count++;
        }
        p += n;
        if (*p != '\0') p++;
    }
    if (e->count == 0) {
        snprintf(err, err_len, "etcd endpoints: none given (HOST:PORT;HOST:PORT)");
        free(e);
        return CR_ERR_INVALID_PARAMS;
    }
    e->curl = curl_easy_init();
    e->headers = curl_slist_append(NULL, "Content-Type: application/json");
    if (e->curl == NULL || e->headers == NULL) {
        cr_etcd_close(e);
        return CR_ERR_NOMEM;
    }
    e->timeout_ms = timeout_ms > 0 ? timeout_ms : 1000;
    *out = e;
    return CR_OK;
}

void cr_etcd_close(struct cr_etcd *e) {
    if (e == NULL) return;
    if (e->curl != NULL) curl_easy_cleanup(e->curl);
    curl_slist_free_all(e->headers);
    free(e);
}

void cr_etcd_set_timeout(struct cr_etcd *e, uint32_t timeout_ms) {
    assert(e != NULL);
    e->timeout_ms = timeout_ms > 0 ? timeout_ms : 1000;
}

const char *cr_etcd_current(const struct cr_etcd *e) { return e->endpoints[e->current]; }

struct cr_etcd_stats cr_etcd_stats(const struct cr_etcd *e) { return e->stats; }

/* One POST to one endpoint.  Returns 1 when an answer came (status in
 * *http), 0 when the endpoint failed (err set), -1 out of memory. */
static int post_one(struct cr_etcd *e, uint32_t idx, const char *path, const char *json,
                    uint32_t timeout_ms, struct body *b, long *http, char *err, size_t err_len) {
    char url[CR_ETCD_ENDPOINT_LEN_MAX + 64];
    snprintf(url, sizeof(url), "http://%s%s", e->endpoints[idx], path);
    CURL *c = e->curl;
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, e->headers);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, json);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)(timeout_ms < 1000 ? timeout_ms : 1000));
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L); /* threads: no SIGALRM for timeouts */
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http");
    curl_easy_setopt(c, CURLOPT_PROXY, ""); /* etcd is reached directly, never via a proxy */
    e->stats.requests++;
    uint64_t t0 = now_ns();
    CURLcode rc = curl_easy_perform(c);
    if (b->watch && (b->watch_event || (rc == CURLE_OPERATION_TIMEDOUT && b->watch_created))) {
        *http = 200; /* a watch ended by an event, or by its wait with none */
        return 1;
    }
    if (rc != CURLE_OK) {
        if (b->overflow) snprintf(err, err_len, "etcd at %s answered more than %u bytes", e->endpoints[idx], BODY_MAX);
        else snprintf(err, err_len, "etcd at %s: %s", e->endpoints[idx], curl_easy_strerror(rc));
        return 0;
    }
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, http);
    e->stats.last_latency_ns = now_ns() - t0;
    if (*http >= 500) {
        snprintf(err, err_len, "etcd at %s answered HTTP %ld", e->endpoints[idx], *http);
        return 0;
    }
    return b->data == NULL && !b->watch ? -1 : 1;
}

/* POSTs json to path, failing over across the endpoints.  On CR_OK the
 * answer is in b (NUL-terminated). */
static int post(struct cr_etcd *e, const char *path, const char *json, uint32_t timeout_ms,
                struct body *b, char *err, size_t err_len) {
    for (uint32_t tried = 0; tried < e->count; tried++) {
        uint32_t idx = (e->current + tried) % e->count;
        long http = 0;
        b->len = 0;
        b->scanned = 0;
        b->overflow = false;
        int got = post_one(e, idx, path, json, timeout_ms, b, &http, err, err_len);
        if (got < 0) return CR_ERR_NOMEM;
        if (got == 0) continue;
        if (idx != e->current) e->stats.failovers++;
        e->current = idx;
        if (http != 200) {
            e->stats.errors++;
            snprintf(err, err_len, "etcd at %s refused %s: HTTP %ld: %.120s", e->endpoints[idx],
                     path, http, b->data != NULL ? b->data : "");
            return CR_ERR_PROTOCOL;
        }
        return CR_OK;
    }
    e->stats.errors++;
    return CR_ERR_IO;
}

/* Builds the request with jansson (NULL out of memory), posts it and
 * returns the answer's status; the caller frees b.data. */
static int call(struct cr_etcd *e, const char *path, json_t *req, uint32_t timeout_ms,
                struct body *b, char *err, size_t err_len) {
    if (req == NULL) return CR_ERR_NOMEM;
    char *json = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    if (json == NULL) return CR_ERR_NOMEM;
    int rc = post(e, path, json, timeout_ms, b, err, err_len);
    free(json);
    if (rc == CR_OK && b->data == NULL && !b->watch) {
        snprintf(err, err_len, "etcd answered %s with an empty body", path);
        rc = CR_ERR_PROTOCOL;
    }
    return rc;
}

static json_t *b64(const char *data, size_t len) {
    char text[B64_MAX];
    if (len > CR_ETCD_VALUE_MAX || !cr_etcd_base64(data, len, text, sizeof(text))) return NULL;
    return json_string(text);
}

static json_t *int64_text(int64_t v) {
    char text[24];
    snprintf(text, sizeof(text), "%" PRId64, v);
    return json_string(text);
}

/* Decoding failures count as request errors too. */
static int decoded(struct cr_etcd *e, int rc) {
    if (rc != CR_OK) e->stats.errors++;
    return rc;
}

int cr_etcd_get(struct cr_etcd *e, const char *key, int64_t *revision, struct cr_etcd_kv *kv,
                char *err, size_t err_len) {
    assert(e != NULL && key != NULL && revision != NULL && kv != NULL);
    struct body b = {0};
    int rc = call(e, "/v3/kv/range", json_pack("{s:o}", "key", b64(key, strlen(key))),
                  e->timeout_ms, &b, err, err_len);
    if (rc == CR_OK) {
        char why[CR_ETCD_ERROR_MAX];
        rc = decoded(e, cr_etcd_decode_range(b.data, b.len, revision, kv, why));
        if (rc != CR_OK) snprintf(err, err_len, "%s", why);
    }
    free(b.data);
    return rc;
}

int cr_etcd_create(struct cr_etcd *e, const char *key, const char *value, size_t value_len,
                   int64_t lease, bool *created, int64_t *revision, struct cr_etcd_kv *holder,
                   char *err, size_t err_len) {
    assert(e != NULL && key != NULL && value != NULL && created != NULL && holder != NULL);
    json_t *k = b64(key, strlen(key));
    json_t *put = json_pack("{s:O,s:o}", "key", k, "value", b64(value, value_len));
    if (put != NULL && lease != 0) json_object_set_new(put, "lease", int64_text(lease));
    json_t *req = json_pack("{s:[{s:O,s:s,s:s,s:s}],s:[{s:o}],s:[{s:{s:O}}]}",
                            "compare", "key", k, "target", "CREATE", "result", "EQUAL",
                            "create_revision", "0", "success", "request_put", put, "failure",
                            "request_range", "key", k);
    json_decref(k);
    struct body b = {0};
    int rc = call(e, "/v3/kv/txn", req, e->timeout_ms, &b, err, err_len);
    if (rc == CR_OK) {
        char why[CR_ETCD_ERROR_MAX];
        rc = decoded(e, cr_etcd_decode_txn(b.data, b.len, created, revision, holder, why));
        if (rc != CR_OK) snprintf(err, err_len, "%s", why);
    }
    free(b.data);
    return rc;
}

int cr_etcd_delete_if(struct cr_etcd *e, const char *key, int64_t create_revision, char *err,
                      size_t err_len) {
    assert(e != NULL && key != NULL && create_revision > 0);
    json_t *k = b64(key, strlen(key));
    json_t *req = json_pack("{s:[{s:O,s:s,s:s,s:o}],s:[{s:{s:O}}],s:[{s:{s:O}}]}",
                            "compare", "key", k, "target", "CREATE", "result", "EQUAL",
                            "create_revision", int64_text(create_revision), "success",
                            "request_delete_range", "key", k, "failure", "request_range", "key", k);
    json_decref(k);
    struct body b = {0};
    int rc = call(e, "/v3/kv/txn", req, e->timeout_ms, &b, err, err_len);
    free(b.data); /* either branch is fine: the key is no longer ours */
    return rc;
}

int cr_etcd_grant(struct cr_etcd *e, int64_t ttl_s, int64_t *id, int64_t *granted_ttl_s,
                  char *err, size_t err_len) {
    assert(e != NULL && ttl_s > 0 && id != NULL && granted_ttl_s != NULL);
    struct body b = {0};
    int rc = call(e, "/v3/lease/grant", json_pack("{s:o}", "TTL", int64_text(ttl_s)),
                  e->timeout_ms, &b, err, err_len);
    if (rc == CR_OK) {
        char why[CR_ETCD_ERROR_MAX];
        rc = decoded(e, cr_etcd_decode_grant(b.data, b.len, id, granted_ttl_s, why));
        if (rc != CR_OK) snprintf(err, err_len, "%s", why);
    }
    free(b.data);
    return rc;
}

int cr_etcd_keepalive(struct cr_etcd *e, int64_t id, int64_t *ttl_s, char *err, size_t err_len) {
    assert(e != NULL && id != 0 && ttl_s != NULL);
    struct body b = {0};
    int rc = call(e, "/v3/lease/keepalive", json_pack("{s:o}", "ID", int64_text(id)),
                  e->timeout_ms, &b, err, err_len);
    if (rc == CR_OK) {
        char why[CR_ETCD_ERROR_MAX];
        /* The gateway streams; one request gets one message, maybe followed
         * by a newline. */
        size_t n = strcspn(b.data, "\n");
        rc = decoded(e, cr_etcd_decode_keepalive(b.data, n, id, ttl_s, why));
        if (rc != CR_OK) snprintf(err, err_len, "%s", why);
    }
    free(b.data);
    return rc;
}

int cr_etcd_revoke(struct cr_etcd *e, int64_t id, char *err, size_t err_len) {
    assert(e != NULL && id != 0);
    struct body b = {0};
    int rc = call(e, "/v3/lease/revoke", json_pack("{s:o}", "ID", int64_text(id)), e->timeout_ms,
                  &b, err, err_len);
    free(b.data);
    return rc;
}

int cr_etcd_watch(struct cr_etcd *e, const char *key, int64_t start, uint32_t wait_ms,
                  bool *changed, char *err, size_t err_len) {
    assert(e != NULL && key != NULL && changed != NULL);
    json_t *create = json_pack("{s:o}", "key", b64(key, strlen(key)));
    if (create != NULL && start > 0) json_object_set_new(create, "start_revision", int64_text(start));
    struct body b = {.watch = true};
    int rc = call(e, "/v3/watch", json_pack("{s:o}", "create_request", create), wait_ms, &b, err,
                  err_len);
    *changed = rc == CR_OK && b.watch_event;
    free(b.data);
    return rc;
}
