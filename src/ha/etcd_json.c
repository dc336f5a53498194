/* etcd v3 JSON gateway answers, decoded with jansson and checked field by
 * field (etcd_json.h).  Base64 is libsodium's (strict: padding and alphabet
 * checked, no whitespace). */
#include "ha/etcd_json.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "crescent/error.h"

/* Fails with a sentence; always returns CR_ERR_PROTOCOL. */
static int fail(char err[CR_ETCD_ERROR_MAX], const char *what) {
    snprintf(err, CR_ETCD_ERROR_MAX, "etcd answered %s", what);
    return CR_ERR_PROTOCOL;
}

/* Parses the body as one JSON object; an object carrying "error" (the
 * gateway's refusal) is refused with etcd's message.  NULL on failure. */
static json_t *parse_object(const char *json, size_t len, char err[CR_ETCD_ERROR_MAX]) {
    json_error_t jerr;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL) {
        snprintf(err, CR_ETCD_ERROR_MAX, "etcd answered JSON that does not parse: %s (line %d)",
                 jerr.text, jerr.line);
        return NULL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        fail(err, "something other than a JSON object");
        return NULL;
    }
    json_t *error = json_object_get(root, "error");
    if (error != NULL) {
        const char *text = json_string_value(error);
        if (text == NULL) text = json_string_value(json_object_get(root, "message"));
        json_t *code = json_object_get(root, "code");
        snprintf(err, CR_ETCD_ERROR_MAX, "etcd refused the request: %.180s (code %" JSON_INTEGER_FORMAT ")",
                 text != NULL ? text : "no message", json_is_integer(code) ? json_integer_value(code) : -1);
        json_decref(root);
        return NULL;
    }
    return root;
}

/* An int64 field: absent is 0 (the gateway omits zero values); present, a
 * string of decimal digits (optionally '-') or a JSON integer.  min bounds it. */
static bool get_int64(json_t *obj, const char *name, int64_t min, int64_t *out) {
    json_t *v = json_object_get(obj, name);
    if (v == NULL) {
        *out = 0;
        return min <= 0;
    }
    if (json_is_integer(v)) {
        *out = (int64_t)json_integer_value(v);
        return *out >= min;
    }
    const char *s = json_string_value(v);
    if (s == NULL || s[0] == '\0' || strlen(s) > 20) return false;
    size_t i = s[0] == '-' ? 1 : 0;
    if (s[i] == '\0') return false;
    for (size_t j = i; s[j] != '\0'; j++)
        if (s[j] < '0' || s[j] > '9') return false;
    errno = 0;
    char *end = NULL;
    long long x = strtoll(s, &end, 10);
    if (errno != 0 || end == NULL || *end != '\0') return false;
    *out = (int64_t)x;
    return *out >= min;
}

/* A base64 field into out (at most max bytes, NUL added); absent is "". */
static bool get_base64(json_t *obj, const char *name, char *out, size_t max, size_t *len) {
    json_t *v = json_object_get(obj, name);
    *len = 0;
    out[0] = '\0';
    if (v == NULL) return true;
    const char *s = json_string_value(v);
    if (s == NULL) return false;
    size_t bin_len = 0;
    const char *end = NULL;
    if (sodium_base642bin((unsigned char *)out, max, s, json_string_length(v), NULL, &bin_len,
                          &end, sodium_base64_VARIANT_ORIGINAL) != 0)
        return false;
    if (end != s + json_string_length(v)) return false;
    out[bin_len] = '\0';
    *len = bin_len;
    return true;
}

static bool header_revision(json_t *root, int64_t *revision) {
    json_t *header = json_object_get(root, "header");
    if (!json_is_object(header)) return false;
    return get_int64(header, "revision", 0, revision);
}

/* A kv; a deleted one (a watch's DELETE event) carries only its key and
 * mod_revision. */
static bool decode_kv(json_t *v, bool deleted, struct cr_etcd_kv *kv) {
    if (!json_is_object(v)) return false;
    memset(kv, 0, sizeof(*kv));
    if (!get_base64(v, "key", kv->key, CR_ETCD_KEY_MAX, &kv->key_len)) return false;
    if (kv->key_len == 0 || memchr(kv->key, '\0', kv->key_len) != NULL) return false;
    if (!get_base64(v, "value", kv->value, CR_ETCD_VALUE_MAX, &kv->value_len)) return false;
    if (!get_int64(v, "create_revision", deleted ? 0 : 1, &kv->create_revision)) return false;
    if (!get_int64(v, "mod_revision", kv->create_revision, &kv->mod_revision)) return false;
    if (!get_int64(v, "lease", 0, &kv->lease)) return false;
    kv->found = true;
    return true;
}

/* A range response object: at most one kv (crescent ranges one key). */
static bool decode_range_body(json_t *obj, struct cr_etcd_kv *kv) {
    memset(kv, 0, sizeof(*kv));
    json_t *kvs = json_object_get(obj, "kvs");
    int64_t count = 0;
    if (!get_int64(obj, "count", 0, &count)) return false;
    if (kvs == NULL) return count == 0;
    if (!json_is_array(kvs) || json_array_size(kvs) > 1) return false;
    if (json_array_size(kvs) == 0) return count == 0;
    if (count != 1) return false;
    return decode_kv(json_array_get(kvs, 0), false, kv);
}

int cr_etcd_decode_range(const char *json, size_t len, int64_t *revision, struct cr_etcd_kv *kv,
                         char err[CR_ETCD_ERROR_MAX]) {
    assert(json != NULL && revision != NULL && kv != NULL && err != NULL);
    json_t *root = parse_object(json, len, err);
    if (root == NULL) return CR_ERR_PROTOCOL;
    int rc = CR_OK;
    if (!header_revision(root, revision)) rc = fail(err, "a range without a valid header revision");
    else if (!decode_range_body(root, kv)) rc = fail(err, "a range whose kvs do not decode");
    json_decref(root);
    return rc;
}

int cr_etcd_decode_txn(const char *json, size_t len, bool *succeeded, int64_t *revision,
                       struct cr_etcd_kv *holder, char err[CR_ETCD_ERROR_MAX]) {
    assert(json != NULL && succeeded != NULL && revision != NULL && holder != NULL);
    json_t *root = parse_object(json, len, err);
    if (root == NULL) return CR_ERR_PROTOCOL;
    int rc = CR_OK;
    memset(holder, 0, sizeof(*holder));
    json_t *ok = json_object_get(root, "succeeded");
    json_t *responses = json_object_get(root, "responses");
    if (!header_revision(root, revision) || *revision < 1) {
        rc = fail(err, "a txn without a valid header revision");
    } else if (ok != NULL && !json_is_boolean(ok)) {
        rc = fail(err, "a txn whose 'succeeded' is not a boolean");
    } else if (!json_is_array(responses) || json_array_size(responses) != 1 ||
               !json_is_object(json_array_get(responses, 0))) {
        rc = fail(err, "a txn without exactly one response");
    } else {
        *succeeded = ok != NULL && json_is_true(ok);
        json_t *r = json_array_get(responses, 0);
        if (*succeeded) {
            if (!json_is_object(json_object_get(r, "response_put")))
                rc = fail(err, "a successful txn without its put's response");
        } else {
            json_t *range = json_object_get(r, "response_range");
            if (!json_is_object(range) || !decode_range_body(range, holder))
                rc = fail(err, "a failed txn without a range of the key that decodes");
        }
    }
    json_decref(root);
    return rc;
}

int cr_etcd_decode_grant(const char *json, size_t len, int64_t *id, int64_t *ttl_s,
                         char err[CR_ETCD_ERROR_MAX]) {
    assert(json != NULL && id != NULL && ttl_s != NULL);
    json_t *root = parse_object(json, len, err);
    if (root == NULL) return CR_ERR_PROTOCOL;
    int rc = CR_OK;
    json_t *refusal = json_object_get(root, "error");
    if (refusal != NULL && json_string_length(refusal) > 0) {
        snprintf(err, CR_ETCD_ERROR_MAX, "etcd refused the lease: %.200s", json_string_value(refusal));
        rc = CR_ERR_PROTOCOL;
    } else if (!get_int64(root, "ID", 1, id) || !get_int64(root, "TTL", 1, ttl_s)) {
        rc = fail(err, "a lease grant without a valid ID and TTL");
    }
    json_decref(root);
    return rc;
}

int cr_etcd_decode_keepalive(const char *json, size_t len, int64_t id, int64_t *ttl_s,
                             char err[CR_ETCD_ERROR_MAX]) {
    assert(json != NULL && ttl_s != NULL);
    json_t *root = parse_object(json, len, err);
    if (root == NULL) return CR_ERR_PROTOCOL;
    int rc = CR_OK;
    json_t *result = json_object_get(root, "result");
    int64_t got = 0;
    if (!json_is_object(result) || !get_int64(result, "ID", 0, &got) ||
        !get_int64(result, "TTL", 0, ttl_s))
        rc = fail(err, "a keepalive without a valid result");
    else if (got != id)
        rc = fail(err, "a keepalive for another lease");
    json_decref(root);
    return rc;
}

int cr_etcd_decode_watch(const char *json, size_t len, uint32_t *events, bool *deleted,
                         int64_t *revision, char err[CR_ETCD_ERROR_MAX]) {
    assert(json != NULL && events != NULL && deleted != NULL && revision != NULL);
    json_t *root = parse_object(json, len, err);
    if (root == NULL) return CR_ERR_PROTOCOL;
    int rc = CR_OK;
    *events = 0;
    *deleted = false;
    json_t *result = json_object_get(root, "result");
    json_t *list = json_is_object(result) ? json_object_get(result, "events") : NULL;
    if (!json_is_object(result) || !header_revision(result, revision)) {
        rc = fail(err, "a watch message without a valid result header");
    } else if (list != NULL && !json_is_array(list)) {
        rc = fail(err, "a watch message whose events are not a list");
    } else {
        size_t i;
        json_t *ev;
        json_array_foreach(list, i, ev) {
            json_t *type = json_is_object(ev) ? json_object_get(ev, "type") : NULL;
            const char *name = type == NULL ? "PUT" : json_string_value(type);
            bool del = name != NULL && strcmp(name, "DELETE") == 0;
            struct cr_etcd_kv kv;
            if (name == NULL || (!del && strcmp(name, "PUT") != 0) ||
                !decode_kv(json_object_get(ev, "kv"), del, &kv)) {
                rc = fail(err, "a watch event that does not decode");
                break;
            }
            if (del) *deleted = true;
            (*events)++;
        }
    }
    json_decref(root);
    return rc;
}

bool cr_etcd_base64(const void *data, size_t len, char *out, size_t out_size) {
    assert(out != NULL);
    if (out_size < sodium_base64_ENCODED_LEN(len, sodium_base64_VARIANT_ORIGINAL)) return false;
    sodium_bin2base64(out, out_size, data, len, sodium_base64_VARIANT_ORIGINAL);
    return true;
}
