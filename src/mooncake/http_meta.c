/* Mooncake's HTTP metadata server: see http_meta.h. */
#include "mooncake/http_meta.h"

#include <assert.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crescent/error.h"
#include "http/front.h"

#define META_BUCKETS 1024u

struct entry {
    struct entry *next;
    char *key;
    char *value;
    size_t value_len;
};

struct cr_mc_meta {
    struct cr_http_front *front;
    /* The map: the front's two workers share it, and the segments thread
     * removes an expired client's keys (cr_mc_meta_forget_segment). */
    pthread_mutex_t lock;
    struct entry *buckets[META_BUCKETS];
    size_t count;
    char prefix[CR_MC_META_PREFIX_MAX]; /* "mooncake/" or "mooncake/CLUSTER/" */
};

static uint32_t hash(const char *s) {
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s != '\0'; s++) h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

static int unhex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* The URL-decoded value of `key=` in the query, into out; false when absent,
 * empty, too long or badly escaped. */
static bool query_key(const char *query, char out[CR_MC_META_KEY_MAX + 1]) {
    for (const char *p = query; p != NULL && *p != '\0';) {
        const char *end = strchr(p, '&');
        size_t n = end != NULL ? (size_t)(end - p) : strlen(p);
        if (n > 4 && memcmp(p, "key=", 4) == 0) {
            size_t o = 0;
            for (size_t i = 4; i < n; i++) {
                char c = p[i];
                if (c == '+') c = ' ';
                else if (c == '%') {
                    if (i + 2 >= n || unhex(p[i + 1]) < 0 || unhex(p[i + 2]) < 0) return false;
                    c = (char)(unhex(p[i + 1]) << 4 | unhex(p[i + 2]));
                    i += 2;
                }
                if (c == '\0' || o == CR_MC_META_KEY_MAX) return false;
                out[o++] = c;
            }
            out[o] = '\0';
            return o > 0;
        }
        p = end != NULL ? end + 1 : NULL;
    }
    return false;
}

static void text(struct cr_http_response *resp, int status, const char *body) {
    resp->status = status;
    resp->content_type = "text/plain";
    resp->body = strdup(body);
    resp->body_len = resp->body != NULL ? strlen(body) : 0;
    if (resp->body == NULL) resp->status = 500;
}

static struct entry **find(struct cr_mc_meta *m, const char *key) {
    struct entry **at = &m->buckets[hash(key) % META_BUCKETS];
    while (*at != NULL && strcmp((*at)->key, key) != 0) at = &(*at)->next;
    return at;
}

static void on_get(void *ctx, const struct cr_http_request *req, struct cr_http_response *resp) {
    struct cr_mc_meta *m = ctx;
    char key[CR_MC_META_KEY_MAX + 1];
    if (!query_key(req->query, key)) return text(resp, 400, "Missing key parameter");
    pthread_mutex_lock(&m->lock);
    struct entry *e = *find(m, key);
    char *copy = e != NULL ? malloc(e->value_len + 1) : NULL;
    size_t len = e != NULL ? e->value_len : 0;
    if (copy != NULL) memcpy(copy, e->value, len + 1);
    pthread_mutex_unlock(&m->lock);
    if (e == NULL) return text(resp, 404, "metadata not found");
    if (copy == NULL) return text(resp, 500, "out of memory");
    resp->status = 200;
    resp->content_type = "application/json";
    resp->body = copy;
    resp->body_len = len;
}

static void on_put(void *ctx, const struct cr_http_request *req, struct cr_http_response *resp) {
    struct cr_mc_meta *m = ctx;
    char key[CR_MC_META_KEY_MAX + 1];
    if (!query_key(req->query, key)) return text(resp, 400, "Missing key parameter");
    if (req->body_len > CR_MC_META_VALUE_MAX) return text(resp, 413, "metadata too large");
    char *value = malloc(req->body_len + 1);
    char *kcopy = strdup(key);
    struct entry *fresh = malloc(sizeof(*fresh));
    if (value == NULL || kcopy == NULL || fresh == NULL) {
        free(value), free(kcopy), free(fresh);
        return text(resp, 500, "out of memory");
    }
    if (req->body_len > 0) memcpy(value, req->body, req->body_len);
    value[req->body_len] = '\0';
    const char *answer = "metadata updated";
    int status = 200;
    pthread_mutex_lock(&m->lock);
    struct entry **at = find(m, key);
    if (*at != NULL && strstr(key, "rpc_meta") != NULL) {
        /* The reference keeps the first rpc_meta of a name: a second
         * process claiming it is refused. */
        bool same = (*at)->value_len == req->body_len &&
                    memcmp((*at)->value, value, req->body_len) == 0;
        answer = same ? "metadata unchanged" : "Duplicate rpc_meta key not allowed";
        status = same ? 200 : 400;
    } else if (*at != NULL) {
        free((*at)->value);
        (*at)->value = value, (*at)->value_len = req->body_len;
        value = NULL;
    } else if (m->count >= CR_MC_META_KEYS_MAX) {
        answer = "too many metadata keys", status = 507;
    } else {
        *fresh = (struct entry){NULL, kcopy, value, req->body_len};
        *at = fresh;
        m->count++;
        value = kcopy = NULL, fresh = NULL;
    }
    pthread_mutex_unlock(&m->lock);
    free(value), free(kcopy), free(fresh);
    text(resp, status, answer);
}

static void on_delete(void *ctx, const struct cr_http_request *req,
                      struct cr_http_response *resp) {
    struct cr_mc_meta *m = ctx;
    char key[CR_MC_META_KEY_MAX + 1];
    if (!query_key(req->query, key)) return text(resp, 400, "Missing key parameter");
    pthread_mutex_lock(&m->lock);
    struct entry **at = find(m, key), *gone = *at;
    if (gone != NULL) {
        *at = gone->next;
        m->count--;
    }
    pthread_mutex_unlock(&m->lock);
    if (gone == NULL) return text(resp, 404, "metadata not found");
    free(gone->key), free(gone->value), free(gone);
    text(resp, 200, "metadata deleted");
}

size_t cr_mc_meta_forget_segment(struct cr_mc_meta *m, const char *name) {
    assert(m != NULL && name != NULL);
    size_t removed = 0;
    for (int i = 0; i < 2; i++) {
        char key[CR_MC_META_KEY_MAX + 1];
        int n = snprintf(key, sizeof(key), "%s%s%s", m->prefix, i == 0 ? "ram/" : "rpc_meta/",
                         name);
        if (n < 0 || (size_t)n >= sizeof(key)) continue; /* longer than any key it holds */
        pthread_mutex_lock(&m->lock);
        struct entry **at = find(m, key), *gone = *at;
        if (gone != NULL) {
            *at = gone->next;
            m->count--;
        }
        pthread_mutex_unlock(&m->lock);
        if (gone == NULL) continue;
        free(gone->key), free(gone->value), free(gone);
        removed++;
    }
    return removed;
}

static void on_health(void *ctx, const struct cr_http_request *req,
                      struct cr_http_response *resp) {
    (void)ctx, (void)req;
    text(resp, 200, "OK");
}

int cr_mc_meta_start(const char *address, struct cr_mc_meta **out, char *error,
                     size_t error_size) {
    assert(address != NULL && out != NULL && error != NULL);
    struct cr_mc_meta *m = calloc(1, sizeof(*m));
    if (m == NULL) return CR_ERR_NOMEM;
    pthread_mutex_init(&m->lock, NULL);
    /* As Mooncake's master and Transfer Engine name the keys. */
    const char *cluster = getenv("MC_METADATA_CLUSTER_ID");
    size_t cl = cluster != NULL ? strlen(cluster) : 0;
    snprintf(m->prefix, sizeof(m->prefix), "mooncake/%s%s", cl > 0 ? cluster : "",
             cl > 0 && cluster[cl - 1] != '/' ? "/" : "");
    int rc = cr_http_front_create(&m->front);
    if (rc == CR_OK) cr_http_front_accept_any_body(m->front);
    if (rc == CR_OK) rc = cr_http_front_add_route(m->front, "GET", "/metadata", on_get, m);
    if (rc == CR_OK) rc = cr_http_front_add_route(m->front, "PUT", "/metadata", on_put, m);
    if (rc == CR_OK) rc = cr_http_front_add_route(m->front, "DELETE", "/metadata", on_delete, m);
    if (rc == CR_OK) rc = cr_http_front_add_route(m->front, "GET", "/health", on_health, m);
    if (rc != CR_OK) {
        snprintf(error, error_size, "cannot set up the HTTP metadata server: %s",
                 cr_strerror(rc));
    } else {
        struct cr_http_front_limits limits;
        cr_http_front_limits_default(&limits);
        limits.workers = 2;
        limits.body_max = CR_MC_META_VALUE_MAX + 1; /* one more: answered 413 by the route */
        rc = cr_http_front_start(m->front, address, &limits, error, error_size);
    }
    if (rc != CR_OK) {
        cr_mc_meta_stop(m);
        return rc;
    }
    *out = m;
    return CR_OK;
}

void cr_mc_meta_stop(struct cr_mc_meta *m) {
    if (m == NULL) return;
    cr_http_front_destroy(m->front); /* joins the workers: nothing touches the map after */
    for (size_t b = 0; b < META_BUCKETS; b++)
        for (struct entry *e = m->buckets[b], *next; e != NULL; e = next) {
            next = e->next;
            free(e->key), free(e->value), free(e);
        }
    pthread_mutex_destroy(&m->lock);
    free(m);
}
