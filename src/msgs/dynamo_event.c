/* Dynamo's KV-router payloads (see dynamo_event.h).  JSON is read with
 * jansson through cr_indexer_body_parse, which bounds nesting before the
 * recursive parser runs and turns integers above INT64_MAX into decimal
 * strings (jansson's integers are signed; Dynamo's block hashes are not). */
#include "msgs/dynamo_event.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include <string.h>
#include <strings.h>

#include "crescent/error.h"
#include "http/indexer_request.h"

struct cr_dyn_decoder {
    uint64_t *hashes, *locals; /* both hash_cap long */
    uint32_t hash_cap;
    uint32_t *tokens;
    uint32_t token_cap;
};

static const char *const bad_names[CR_DYN_BAD_KINDS] = {
    "bad_json", "bad_field", "bad_kind", "bad_hash", "bad_tokens", "over_limit",
};

const char *cr_dyn_bad_name(enum cr_dyn_bad cause) {
    return (unsigned)cause < CR_DYN_BAD_KINDS ? bad_names[cause] : "unknown";
}

int cr_dyn_decoder_create(struct cr_dyn_decoder **out) {
    assert(out != NULL);
    *out = calloc(1, sizeof(**out));
    return *out != NULL ? CR_OK : CR_ERR_NOMEM;
}

void cr_dyn_decoder_destroy(struct cr_dyn_decoder *dec) {
    if (dec == NULL) return;
    free(dec->hashes);
    free(dec->locals);
    free(dec->tokens);
    free(dec);
}

/* A failure: the cause for counters, one line for the log. */
struct fail {
    enum cr_dyn_bad *cause;
    char *err;
    size_t size;
};

__attribute__((format(printf, 3, 4))) static int refuse(const struct fail *f, enum cr_dyn_bad why,
                                                        const char *fmt, ...) {
    *f->cause = why;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->err, f->size, fmt, ap);
    va_end(ap);
    return CR_ERR_PROTOCOL;
}

/* An unsigned 64-bit value: a non-negative integer, or the decimal string
 * the big-integer quoting made of one above INT64_MAX. */
static bool get_u64(const json_t *v, uint64_t *out) {
    if (json_is_integer(v)) {
        if (json_integer_value(v) < 0) return false;
        *out = (uint64_t)json_integer_value(v);
        return true;
    }
    if (!json_is_string(v)) return false;
    const char *s = json_string_value(v);
    if (s[0] < '0' || s[0] > '9' || json_string_length(v) > 20) return false;
    for (const char *p = s; *p != '\0'; p++)
        if (*p < '0' || *p > '9') return false;
    errno = 0;
    unsigned long long x = strtoull(s, NULL, 10);
    if (errno != 0) return false;
    *out = x;
    return true;
}

static bool get_i64(const json_t *v, int64_t *out) {
    if (!json_is_integer(v)) return false;
    *out = json_integer_value(v);
    return true;
}

static int grow(void **p, uint32_t *cap, uint32_t need, size_t elem) {
    if (need <= *cap) return CR_OK;
    uint32_t n = *cap < 64 ? 64 : *cap;
    while (n < need) n *= 2;
    void *q = realloc(*p, (size_t)n * elem);
    if (q == NULL) return CR_ERR_NOMEM;
    *p = q;
    *cap = n;
    return CR_OK;
}

/* Optional u64 field: absent or null leaves *has false. */
static int opt_u64(const json_t *obj, const char *name, bool *has, uint64_t *out,
                   const struct fail *f) {
    const json_t *v = json_object_get(obj, name);
    *has = false;
    if (v == NULL || json_is_null(v)) return CR_OK;
    if (!get_u64(v, out)) return refuse(f, CR_DYN_BAD_FIELD, "'%s' is not an integer in u64", name);
    *has = true;
    return CR_OK;
}

static int read_tokens(struct cr_dyn_decoder *dec, const json_t *obj,
                       struct cr_dyn_router_event *ev, const struct fail *f) {
    const json_t *a = json_object_get(obj, "token_ids");
    if (a == NULL || json_is_null(a)) return CR_OK;
    if (!json_is_array(a)) return refuse(f, CR_DYN_BAD_FIELD, "'token_ids' is not an array");
    size_t n = json_array_size(a);
    if (n > CR_DYN_MAX_TOKENS)
        return refuse(f, CR_DYN_BAD_LIMIT, "%zu token ids, at most %u", n, CR_DYN_MAX_TOKENS);
    if (grow((void **)&dec->tokens, &dec->token_cap, (uint32_t)n + 1, sizeof(uint32_t)) != CR_OK)
        return CR_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        uint64_t t;
        if (!get_u64(json_array_get(a, i), &t) || t > UINT32_MAX)
            return refuse(f, CR_DYN_BAD_TOKENS, "token_ids[%zu] is not an integer in u32", i);
        dec->tokens[i] = (uint32_t)t;
    }
    ev->has_token_ids = true;
    ev->token_ids = dec->tokens;
    ev->token_count = (uint32_t)n;
    return CR_OK;
}

/* block_hashes: [u64], or Dynamo's blocks: [{"block_hash": u64,
 * "tokens_hash": u64, ...}].  A tokens_hash must be on every block or on
 * none: half a run of local hashes cannot be chained. */
static int read_block(const json_t *v, size_t i, uint64_t *hash, uint64_t *local, bool *has_local,
                      const struct fail *f) {
    if (!json_is_object(v)) return refuse(f, CR_DYN_BAD_FIELD, "blocks[%zu] is not an object", i);
    const json_t *h = json_object_get(v, "block_hash");
    if (h == NULL || !get_u64(h, hash))
        return refuse(f, CR_DYN_BAD_HASH, "block hash %zu is not an integer in u64", i);
    const json_t *t = json_object_get(v, "tokens_hash");
    bool has = t != NULL && !json_is_null(t);
    if (i > 0 && has != *has_local)
        return refuse(f, CR_DYN_BAD_FIELD, "blocks[%zu] %s a tokens_hash and blocks[0] %s", i,
                      has ? "has" : "lacks", has ? "lacks it" : "has one");
    *has_local = has;
    if (has && !get_u64(t, local))
        return refuse(f, CR_DYN_BAD_HASH, "blocks[%zu].tokens_hash is not an integer in u64", i);
    return CR_OK;
}

static int read_hashes(struct cr_dyn_decoder *dec, const json_t *obj,
                       struct cr_dyn_router_event *ev, const struct fail *f) {
    const json_t *a = json_object_get(obj, "block_hashes");
    bool blocks = a == NULL;
    if (blocks) a = json_object_get(obj, "blocks");
    if (!json_is_array(a))
        return refuse(f, CR_DYN_BAD_FIELD, "neither 'block_hashes' nor 'blocks' is an array");
    size_t n = json_array_size(a);
    if (n > CR_DYN_MAX_HASHES)
        return refuse(f, CR_DYN_BAD_LIMIT, "%zu block hashes, at most %u", n, CR_DYN_MAX_HASHES);
    uint32_t cap = dec->hash_cap;
    if (grow((void **)&dec->hashes, &cap, (uint32_t)n + 1, sizeof(uint64_t)) != CR_OK ||
        grow((void **)&dec->locals, &dec->hash_cap, (uint32_t)n + 1, sizeof(uint64_t)) != CR_OK)
        return CR_ERR_NOMEM;
    bool has_local = !blocks; /* the seed's block_hashes are local hashes */
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(a, i);
        if (blocks) {
            int rc = read_block(v, i, &dec->hashes[i], &dec->locals[i], &has_local, f);
            if (rc != CR_OK) return rc;
        } else if (!get_u64(v, &dec->hashes[i])) {
            return refuse(f, CR_DYN_BAD_HASH, "block hash %zu is not an integer in u64", i);
        } else {
            dec->locals[i] = dec->hashes[i];
        }
    }
    ev->hashes = dec->hashes;
    ev->hash_count = (uint32_t)n;
    ev->local_hashes = has_local && n > 0 ? dec->locals : NULL;
    return CR_OK;
}

/* The event's data: {"Stored": {...}} | {"Removed": {...}} | "Cleared" |
 * {"Cleared": null}, variant names in any case. */
static int read_data(struct cr_dyn_decoder *dec, const json_t *data,
                     struct cr_dyn_router_event *ev, const struct fail *f) {
    const char *variant;
    const json_t *body = NULL;
    if (json_is_string(data)) {
        variant = json_string_value(data);
    } else if (json_is_object(data) && json_object_size(data) == 1) {
        void *it = json_object_iter((json_t *)data);
        variant = json_object_iter_key(it);
        body = json_object_iter_value(it);
    } else {
        return refuse(f, CR_DYN_BAD_FIELD, "'data' is not an object with one variant");
    }
    if (strcasecmp(variant, "cleared") == 0) {
        if (body != NULL && !json_is_null(body) && !(json_is_object(body) && json_object_size(body) == 0))
            return refuse(f, CR_DYN_BAD_FIELD, "'Cleared' carries data");
        ev->kind = CR_KV_EVENT_CLEARED;
        return CR_OK;
    }
    bool stored = strcasecmp(variant, "stored") == 0;
    if (!stored && strcasecmp(variant, "removed") != 0)
        return refuse(f, CR_DYN_BAD_KIND, "event variant '%.40s' is not Stored, Removed or Cleared",
                      variant);
    if (!json_is_object(body)) return refuse(f, CR_DYN_BAD_FIELD, "'%s' is not an object", variant);
    ev->kind = stored ? CR_KV_EVENT_STORED : CR_KV_EVENT_REMOVED;
    int rc = read_hashes(dec, body, ev, f);
    if (rc != CR_OK || !stored) return rc;
    if ((rc = opt_u64(body, "parent_hash", &ev->has_parent, &ev->parent_hash, f)) != CR_OK)
        return rc;
    if ((rc = opt_u64(body, "lora_id", &ev->has_lora_id, &ev->lora_id, f)) != CR_OK) return rc;
    return read_tokens(dec, body, ev, f);
}

static json_t *parse(const void *payload, size_t len, const struct fail *f) {
    if (len > CR_DYN_MAX_PAYLOAD_BYTES) {
        refuse(f, CR_DYN_BAD_JSON, "payload of %zu bytes, at most %u", len, CR_DYN_MAX_PAYLOAD_BYTES);
        return NULL;
    }
    char detail[CR_INDEXER_DETAIL_MAX];
    json_t *root = cr_indexer_body_parse(payload, len, false, detail, sizeof(detail));
    if (root == NULL) {
        refuse(f, CR_DYN_BAD_JSON, "not JSON: %s", detail);
        return NULL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        refuse(f, CR_DYN_BAD_JSON, "not a JSON object");
        return NULL;
    }
    return root;
}

int cr_dyn_decode_router_event(struct cr_dyn_decoder *dec, const void *payload, size_t len,
                               struct cr_dyn_router_event *out, enum cr_dyn_bad *cause, char *err,
                               size_t err_size) {
    assert(dec != NULL && (payload != NULL || len == 0) && out != NULL && cause != NULL &&
           err != NULL && err_size > 0);
    const struct fail f = {cause, err, err_size};
    json_t *root = parse(payload, len, &f);
    if (root == NULL) return CR_ERR_PROTOCOL;
    struct cr_dyn_router_event ev = {0};
    int rc = CR_OK;
    const json_t *data = json_object_get(root, "data");
    const json_t *event = json_object_get(root, "event");
    if (!get_i64(json_object_get(root, "worker_id"), &ev.worker_id)) {
        rc = refuse(&f, CR_DYN_BAD_FIELD, "'worker_id' is missing or not an integer in i64");
    } else if (data == NULL && json_is_object(event)) {
        rc = opt_u64(event, "event_id", &ev.has_event_id, &ev.event_id, &f);
        data = json_object_get(event, "data");
    } else if (data == NULL) {
        rc = refuse(&f, CR_DYN_BAD_FIELD, "neither 'data' nor 'event' is present");
    }
    if (rc == CR_OK) rc = data != NULL ? read_data(dec, data, &ev, &f)
                                       : refuse(&f, CR_DYN_BAD_FIELD, "'event' has no 'data'");
    json_decref(root);
    if (rc == CR_ERR_NOMEM) snprintf(err, err_size, "out of memory decoding a RouterEvent");
    if (rc == CR_OK) *out = ev;
    return rc;
}

static int metric_u64(const json_t *m, const char *name, uint64_t *out, const struct fail *f) {
    const json_t *v = json_object_get(m, name);
    *out = 0;
    if (v == NULL || json_is_null(v)) return CR_OK; /* serde default: 0 */
    if (!get_u64(v, out)) return refuse(f, CR_DYN_BAD_FIELD, "'%s' is not an integer in u64", name);
    return CR_OK;
}

static int metric_ratio(const json_t *m, const char *name, double *out, const struct fail *f) {
    const json_t *v = json_object_get(m, name);
    *out = 0;
    if (v == NULL || json_is_null(v)) return CR_OK;
    if (!json_is_number(v) || !(json_number_value(v) >= 0.0 && json_number_value(v) <= 1.0))
        return refuse(f, CR_DYN_BAD_FIELD, "'%s' is not a number in [0, 1]", name);
    *out = json_number_value(v);
    return CR_OK;
}

static int read_metrics(const json_t *root, struct cr_dyn_metrics *m, const struct fail *f) {
    if (!get_i64(json_object_get(root, "worker_id"), &m->worker_id))
        return refuse(f, CR_DYN_BAD_FIELD, "'worker_id' is missing or not an integer in i64");
    const json_t *name = json_object_get(root, "endpoint_name");
    if (name != NULL && !json_is_null(name)) {
        if (!json_is_string(name) || json_string_length(name) >= CR_DYN_NAME_MAX ||
            strlen(json_string_value(name)) != json_string_length(name))
            return refuse(f, CR_DYN_BAD_FIELD, "'endpoint_name' is not a string under %u bytes",
                          CR_DYN_NAME_MAX);
        memcpy(m->endpoint_name, json_string_value(name), json_string_length(name) + 1);
    }
    const json_t *fields = json_object_get(root, "metrics");
    if (fields == NULL) fields = root; /* bare ForwardPassMetrics beside worker_id */
    if (!json_is_object(fields)) return refuse(f, CR_DYN_BAD_FIELD, "'metrics' is not an object");
    int rc;
    if ((rc = metric_u64(fields, "request_active_slots", &m->request_active_slots, f)) != CR_OK ||
        (rc = metric_u64(fields, "request_total_slots", &m->request_total_slots, f)) != CR_OK ||
        (rc = metric_u64(fields, "kv_active_blocks", &m->kv_active_blocks, f)) != CR_OK ||
        (rc = metric_u64(fields, "kv_total_blocks", &m->kv_total_blocks, f)) != CR_OK ||
        (rc = metric_u64(fields, "num_requests_waiting", &m->num_requests_waiting, f)) != CR_OK ||
        (rc = metric_ratio(fields, "gpu_cache_usage_perc", &m->gpu_cache_usage_perc, f)) != CR_OK ||
        (rc = metric_ratio(fields, "gpu_prefix_cache_hit_rate", &m->gpu_prefix_cache_hit_rate, f)) !=
            CR_OK)
        return rc;
    if (m->request_total_slots == 0 && m->kv_total_blocks == 0 &&
        json_object_get(fields, "kv_total_blocks") == NULL &&
        json_object_get(fields, "request_total_slots") == NULL &&
        json_object_get(fields, "gpu_cache_usage_perc") == NULL)
        return refuse(f, CR_DYN_BAD_FIELD,
                      "no ForwardPassMetrics field (kv_total_blocks, request_total_slots, "
                      "gpu_cache_usage_perc) is present");
    return CR_OK;
}

int cr_dyn_decode_metrics(const void *payload, size_t len, struct cr_dyn_metrics *out,
                          enum cr_dyn_bad *cause, char *err, size_t err_size) {
    assert((payload != NULL || len == 0) && out != NULL && cause != NULL && err != NULL &&
           err_size > 0);
    const struct fail f = {cause, err, err_size};
    json_t *root = parse(payload, len, &f);
    if (root == NULL) return CR_ERR_PROTOCOL;
    struct cr_dyn_metrics m;
    memset(&m, 0, sizeof(m));
    int rc = read_metrics(root, &m, &f);
    json_decref(root);
    if (rc == CR_OK) *out = m;
    return rc;
}

size_t cr_dyn_hit_rate_json(char *buf, size_t size, uint64_t isl_tokens, uint64_t hit_tokens,
                            int64_t worker_id) {
    assert(buf != NULL);
    int n = snprintf(buf, size, "{\"isl_tokens\":%" PRIu64 ",\"hit_tokens\":%" PRIu64
                                ",\"worker_id\":%" PRId64 "}",
                     isl_tokens, hit_tokens, worker_id);
    return n > 0 && (size_t)n < size ? (size_t)n : 0;
}
