/* Parsing the indexer routes' request bodies (see indexer_request.h). */
#include "http/indexer_request.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crescent/error.h"
#include "msgs/kv_event.h"

#define MP_DEPTH_MAX 8

/* ---- JSON: big unsigned integers become strings ---- */

/* Quotes bare unsigned integer literals above INT64_MAX (outside strings) so
 * that jansson, whose integers are signed 64-bit, reads them as strings.
 * Literals with a leading zero or in key position are left alone: they are
 * not JSON, and quoting them would make jansson accept them.  Returns a
 * malloc'd copy, or NULL when there is nothing to quote. */
static char *quote_big_ints(const char *in, size_t len) {
    char *out = NULL;
    size_t o = 0;
    bool in_str = false;
    for (size_t i = 0; i < len; i++) {
        char c = in[i];
        size_t j = i;
        if (!in_str && c >= '1' && c <= '9' && (i == 0 || strchr("[,: \t\r\n", in[i - 1]))) {
            while (j < len && in[j] >= '0' && in[j] <= '9') j++;
            bool plain = j == len || strchr(",]} \t\r\n", in[j]) != NULL;
            size_t k = j; /* followed by ':', the literal is in key position */
            while (k < len && strchr(" \t\r\n", in[k]) != NULL) k++;
            if (plain && (k == len || in[k] != ':') &&
                (j - i > 19 || (j - i == 19 && memcmp(in + i, "9223372036854775807", 19) > 0))) {
                if (out == NULL) {
                    if ((out = malloc(len * 3 + 1)) == NULL) return NULL;
                    memcpy(out, in, i); /* everything before the first big literal */
                    o = i;
                }
                out[o++] = '"';
                memcpy(out + o, in + i, j - i);
                o += j - i;
                out[o++] = '"';
                i = j - 1;
                continue;
            }
        }
        if (in_str && c == '\\' && i + 1 < len) {
            if (out != NULL) out[o++] = c, out[o++] = in[i + 1];
            i++;
            continue;
        }
        if (c == '"') in_str = !in_str;
        if (out != NULL) out[o++] = c;
    }
    if (out != NULL) out[o] = '\0';
    return out;
}

/* ---- msgpack: a bounded reader building jansson values ---- */

struct mp {
    const uint8_t *p, *end;
};

static bool mp_need(const struct mp *m, size_t n) { return (size_t)(m->end - m->p) >= n; }

static uint64_t mp_be(const uint8_t *p, unsigned n) {
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++) v = (v << 8) | p[i];
    return v;
}

static json_t *mp_value(struct mp *m, int depth);

static json_t *mp_uint(uint64_t v) {
    if (v <= (uint64_t)INT64_MAX) return json_integer((json_int_t)v);
    char text[24];
    snprintf(text, sizeof(text), "%" PRIu64, v);
    return json_string(text);
}

static json_t *mp_container(struct mp *m, uint32_t n, bool map, int depth) {
    /* Each element takes at least one byte: a count the body cannot hold is refused
     * before anything is allocated for it. */
    if (depth >= MP_DEPTH_MAX || !mp_need(m, (size_t)n * (map ? 2u : 1u))) return NULL;
    json_t *c = map ? json_object() : json_array();
    for (uint32_t i = 0; c != NULL && i < n; i++) {
        json_t *k = map ? mp_value(m, depth + 1) : NULL;
        json_t *v = (!map || json_is_string(k)) ? mp_value(m, depth + 1) : NULL;
        bool ok = v != NULL && (map ? json_object_set_new(c, json_string_value(k), v) == 0
                                    : json_array_append_new(c, v) == 0);
        json_decref(k);
        if (!ok) json_decref(c), c = NULL;
    }
    return c;
}

static json_t *mp_str(struct mp *m, size_t n) {
    if (!mp_need(m, n)) return NULL;
    json_t *s = json_stringn((const char *)m->p, n);
    m->p += n;
    return s;
}

static json_t *mp_sized(struct mp *m, uint8_t t, int depth) {
    static const unsigned width[] = {1, 2, 4, 8};
    if (t >= 0xcc && t <= 0xcf) { /* uint 8..64 */
        unsigned w = width[t - 0xcc];
        if (!mp_need(m, w)) return NULL;
        uint64_t v = mp_be(m->p, w);
        m->p += w;
        return mp_uint(v);
    }
    if (t >= 0xd0 && t <= 0xd3) { /* int 8..64 */
        unsigned w = width[t - 0xd0];
        if (!mp_need(m, w)) return NULL;
        uint64_t v = mp_be(m->p, w);
        m->p += w;
        int64_t s = w == 8 ? (int64_t)v : (int64_t)(v << (64 - 8 * w)) >> (64 - 8 * w);
        return json_integer((json_int_t)s);
    }
    if (t == 0xd9 || t == 0xda || t == 0xdb || t == 0xdc || t == 0xdd || t == 0xde || t == 0xdf) {
        unsigned w = (t == 0xd9) ? 1 : (t == 0xda || t == 0xdc || t == 0xde) ? 2 : 4;
        if (!mp_need(m, w)) return NULL;
        uint32_t n = (uint32_t)mp_be(m->p, w);
        m->p += w;
        if (t <= 0xdb) return mp_str(m, n);
        return mp_container(m, n, t >= 0xde, depth);
    }
    if (t == 0xcb && mp_need(m, 8)) {
        uint64_t bits = mp_be(m->p, 8);
        double d;
        memcpy(&d, &bits, 8);
        m->p += 8;
        return json_real(d);
    }
    return NULL; /* bin, ext, float32 and reserved bytes are not part of these bodies */
}

static json_t *mp_value(struct mp *m, int depth) {
    if (!mp_need(m, 1)) return NULL;
    uint8_t t = *m->p++;
    if (t <= 0x7f) return json_integer(t);
    if (t >= 0xe0) return json_integer((int8_t)t);
    if ((t & 0xe0) == 0xa0) return mp_str(m, t & 0x1f);
    if ((t & 0xf0) == 0x90) return mp_container(m, t & 0x0f, false, depth);
    if ((t & 0xf0) == 0x80) return mp_container(m, t & 0x0f, true, depth);
    if (t == 0xc0) return json_null();
    if (t == 0xc2 || t == 0xc3) return json_boolean(t == 0xc3);
    return mp_sized(m, t, depth);
}

/* ---- JSON: nesting bound ---- */

/* jansson's parser recurses once per array or object level, on the caller's
 * stack: a CivetWeb worker's stack overflowed at ~950 levels (a 2 KB body).
 * Counting brackets outside strings needs no recursion and no allocation, so
 * it runs before jansson sees the text. */
bool cr_json_depth_ok(const char *text, size_t len, unsigned depth_max, char *detail,
                      size_t detail_size) {
    assert((text != NULL || len == 0) && detail != NULL && detail_size > 0);
    unsigned depth = 0;
    bool in_str = false;
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (in_str) {
            if (c == '\\') i++;
            else if (c == '"') in_str = false;
        } else if (c == '"') {
            in_str = true;
        } else if (c == '[' || c == '{') {
            if (++depth > depth_max) {
                snprintf(detail, detail_size,
                         "byte %zu: arrays and objects nested deeper than %u levels "
                         "(crescent's bound on request bodies)", i, depth_max);
                return false;
            }
        } else if ((c == ']' || c == '}') && depth > 0) {
            depth--; /* an unbalanced close is jansson's to refuse */
        }
    }
    return true;
}

json_t *cr_indexer_body_parse(const char *body, size_t len, bool msgpack, char *detail,
                              size_t detail_size) {
    assert((body != NULL || len == 0) && detail != NULL && detail_size > 0);
    if (msgpack) {
        struct mp m = {(const uint8_t *)body, (const uint8_t *)body + len};
        json_t *v = mp_value(&m, 0);
        if (v != NULL && m.p == m.end) return v;
        json_decref(v);
        snprintf(detail, detail_size,
                 "the body is not one well-formed msgpack value of "
                 "maps, arrays, strings, integers and nil");
        return NULL;
    }
    /* JSON text has no NUL byte (even strings must escape it), but jansson
     * 2.14 skips one that follows a number, and the quoting below would cut
     * the body at one: refused here, so a body means what it shows. */
    const char *nul = memchr(body, '\0', len);
    if (nul != NULL) {
        snprintf(detail, detail_size, "byte %zu: a NUL byte is not allowed in JSON",
                 (size_t)(nul - body));
        return NULL;
    }
    if (!cr_json_depth_ok(body, len, CR_JSON_DEPTH_MAX, detail, detail_size)) return NULL;
    char *quoted = quote_big_ints(body, len);
    json_error_t jerr;
    json_t *v = quoted != NULL ? json_loads(quoted, 0, &jerr) : json_loadb(body, len, 0, &jerr);
    free(quoted);
    if (v == NULL)
        snprintf(detail, detail_size, "line %d column %d: %s", jerr.line, jerr.column, jerr.text);
    return v;
}

/* ---- fields ---- */

static bool field_str(json_t *root, const char *name, const char *alias, bool required, char *out,
                      size_t size, char *detail, size_t dsize) {
    json_t *v = json_object_get(root, name);
    if ((v == NULL || json_is_null(v)) && alias != NULL) v = json_object_get(root, alias);
    if (v == NULL || json_is_null(v)) {
        if (required) snprintf(detail, dsize, "field '%s' is required", name);
        return !required;
    }
    if (!json_is_string(v) || json_string_length(v) >= size ||
        strlen(json_string_value(v)) != json_string_length(v)) {
        snprintf(detail, dsize, "field '%s' must be a string of at most %zu bytes", name, size - 1);
        return false;
    }
    memcpy(out, json_string_value(v), json_string_length(v) + 1);
    return true;
}

/* Decimal, or hex with a 0x prefix.  Not base 0: that reads "0123" as
 * octal, and strtoull would also skip leading whitespace of any kind. */
static bool parse_u64_string(const char *s, uint64_t *out) {
    bool hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
    const char *digits = hex ? s + 2 : s;
    if (!(hex ? isxdigit((unsigned char)digits[0]) : isdigit((unsigned char)digits[0])))
        return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(digits, &end, hex ? 16 : 10);
    if (errno != 0 || *end != '\0') return false;
    *out = v;
    return true;
}

static int field_hashes(json_t *root, struct cr_indexer_request *req, char *detail, size_t dsize) {
    const char *name = "seq_hashes";
    json_t *a = json_object_get(root, name);
    if (a == NULL || json_is_null(a)) a = json_object_get(root, name = "block_hash");
    if (a == NULL || !json_is_array(a) || json_array_size(a) > CR_INDEXER_QUERY_TOKENS_MAX) {
        snprintf(detail, dsize,
                 "field 'seq_hashes' (or 'block_hash') must be an array of at most "
                 "%u hashes",
                 CR_INDEXER_QUERY_TOKENS_MAX);
        return CR_ERR_INVALID_PARAMS;
    }
    req->hash_count = json_array_size(a);
    req->hashes = malloc((req->hash_count + 1) * sizeof(uint64_t));
    if (req->hashes == NULL) return CR_ERR_NOMEM;
    for (size_t i = 0; i < req->hash_count; i++) {
        json_t *v = json_array_get(a, i);
        /* Negative integers are the two's complement of the u64 (SGLang's signed hashes). */
        if (json_is_integer(v))
            req->hashes[i] = (uint64_t)json_integer_value(v);
        else if (!json_is_string(v) || !parse_u64_string(json_string_value(v), &req->hashes[i])) {
            snprintf(detail, dsize, "%s[%zu] must be an integer (or a decimal or 0x string)", name,
                     i);
            return CR_ERR_INVALID_PARAMS;
        }
    }
    return CR_OK;
}

static int field_tokens(json_t *root, struct cr_indexer_request *req, char *detail, size_t dsize) {
    json_t *a = json_object_get(root, "token_ids");
    if (a == NULL || !json_is_array(a) || json_array_size(a) > CR_INDEXER_QUERY_TOKENS_MAX) {
        snprintf(detail, dsize, "field 'token_ids' must be an array of at most %u token ids",
                 CR_INDEXER_QUERY_TOKENS_MAX);
        return CR_ERR_INVALID_PARAMS;
    }
    req->token_count = json_array_size(a);
    req->tokens = malloc((req->token_count + 1) * sizeof(uint32_t));
    if (req->tokens == NULL) return CR_ERR_NOMEM;
    for (size_t i = 0; i < req->token_count; i++) {
        json_t *v = json_array_get(a, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) > (json_int_t)UINT32_MAX) {
            snprintf(detail, dsize, "token_ids[%zu] must be an integer from 0 to 4294967295", i);
            return CR_ERR_INVALID_PARAMS;
        }
        req->tokens[i] = (uint32_t)json_integer_value(v);
    }
    return CR_OK;
}

static int field_block_size(json_t *root, uint32_t *out, char *detail, size_t dsize) {
    json_t *v = json_object_get(root, "block_size");
    if (v == NULL || !json_is_integer(v) || json_integer_value(v) <= 0 ||
        json_integer_value(v) > (json_int_t)CR_KV_MAX_BLOCK_SIZE) {
        snprintf(detail, dsize, "field 'block_size' must be an integer from 1 to %u",
                 CR_KV_MAX_BLOCK_SIZE);
        return CR_ERR_INVALID_PARAMS;
    }
    *out = (uint32_t)json_integer_value(v);
    return CR_OK;
}

int cr_indexer_request_from_json(json_t *root, bool by_hash, struct cr_indexer_request *req,
                                 char *detail, size_t dsize) {
    assert(req != NULL && detail != NULL && dsize > 0);
    memset(req, 0, sizeof(*req));
    if (!json_is_object(root)) {
        snprintf(detail, dsize, "the body must be an object");
        return CR_ERR_INVALID_PARAMS;
    }
    json_t *lora_id = json_object_get(root, "lora_id");
    if (lora_id != NULL && !json_is_null(lora_id)) {
        /* Deprecated by the conductor; ignoring it would match the base model's blocks. */
        snprintf(detail, dsize,
                 "field 'lora_id' is deprecated and not honoured (it would match the base "
                 "model's blocks): name the adapter with 'lora_name'");
        return CR_ERR_INVALID_PARAMS;
    }
    bool ok =
        field_str(root, "model", NULL, true, req->model, sizeof(req->model), detail, dsize) &&
        field_str(root, "tenant_id", NULL, false, req->tenant, sizeof(req->tenant), detail,
                  dsize) &&
        field_str(root, "lora_name", NULL, false, req->lora, sizeof(req->lora), detail, dsize) &&
        field_str(root, "cache_salt", "additionalsalt", false, req->salt, sizeof(req->salt), detail,
                  dsize) &&
        field_str(root, "instance_id", NULL, false, req->instance, sizeof(req->instance), detail,
                  dsize);
    int rc = ok ? field_block_size(root, &req->block_size, detail, dsize) : CR_ERR_INVALID_PARAMS;
    json_t *unhealthy = json_object_get(root, "include_unhealthy");
    if (rc == CR_OK && unhealthy != NULL && !json_is_boolean(unhealthy)) {
        snprintf(detail, dsize, "field 'include_unhealthy' must be true or false");
        rc = CR_ERR_INVALID_PARAMS;
    }
    req->include_unhealthy = json_is_true(unhealthy);
    json_t *top_k = json_object_get(root, "top_k");
    if (rc == CR_OK && top_k != NULL && !json_is_null(top_k)) {
        if (!json_is_integer(top_k) || json_integer_value(top_k) < 1 ||
            json_integer_value(top_k) > (json_int_t)CR_INDEXER_TOP_K_MAX) {
            snprintf(detail, dsize, "field 'top_k' must be an integer from 1 to %u",
                     CR_INDEXER_TOP_K_MAX);
            rc = CR_ERR_INVALID_PARAMS;
        } else {
            req->top_k = (uint32_t)json_integer_value(top_k);
        }
    }
    if (rc == CR_OK)
        rc = by_hash ? field_hashes(root, req, detail, dsize)
                     : field_tokens(root, req, detail, dsize);
    if (rc != CR_OK) {
        cr_indexer_request_free(req);
        return rc;
    }
    if (req->tenant[0] == '\0') snprintf(req->tenant, sizeof(req->tenant), "default");
    req->has_instance = req->instance[0] != '\0';
    return CR_OK;
}

void cr_indexer_request_free(struct cr_indexer_request *req) {
    free(req->tokens);
    free(req->hashes);
    req->tokens = NULL;
    req->hashes = NULL;
}

static bool load_number(json_t *obj, const char *name, double *d, uint64_t *u, char *detail,
                        size_t dsize) {
    json_t *v = json_object_get(obj, name);
    if (v == NULL || json_is_null(v)) return true;
    /* A real of 2^64 or more has no uint64_t value (the cast is undefined). */
    if (!json_is_number(v) || json_number_value(v) < 0 ||
        (u != NULL && json_is_real(v) && json_real_value(v) >= 18446744073709551616.0)) {
        snprintf(detail, dsize, "field '%s' must be a non-negative number%s", name,
                 u != NULL ? " below 2^64" : "");
        return false;
    }
    if (d != NULL) *d = json_number_value(v);
    if (u != NULL)
        *u = json_is_integer(v) ? (uint64_t)json_integer_value(v) : (uint64_t)json_number_value(v);
    return true;
}

int cr_indexer_load_from_json(json_t *root, struct cr_indexer_load *l, char *detail, size_t dsize) {
    memset(l, 0, sizeof(*l));
    if (!json_is_object(root)) {
        snprintf(detail, dsize, "the body must be an object");
        return CR_ERR_INVALID_PARAMS;
    }
    if (!field_str(root, "instance_id", NULL, true, l->instance_id, sizeof(l->instance_id), detail,
                   dsize) ||
        !field_str(root, "tenant_id", NULL, false, l->tenant_id, sizeof(l->tenant_id), detail,
                   dsize))
        return CR_ERR_INVALID_PARAMS;
    if (l->tenant_id[0] == '\0') snprintf(l->tenant_id, sizeof(l->tenant_id), "default");
    json_t *m = json_object_get(root, "metrics");
    if (m == NULL || json_is_null(m)) m = root;
    if (!json_is_object(m)) {
        snprintf(detail, dsize, "field 'metrics' must be an object");
        return CR_ERR_INVALID_PARAMS;
    }
    bool ok =
        load_number(m, "request_active_slots", NULL, &l->request_active_slots, detail, dsize) &&
        load_number(m, "request_total_slots", NULL, &l->request_total_slots, detail, dsize) &&
        load_number(m, "kv_active_blocks", NULL, &l->kv_active_blocks, detail, dsize) &&
        load_number(m, "kv_total_blocks", NULL, &l->kv_total_blocks, detail, dsize) &&
        load_number(m, "num_requests_waiting", NULL, &l->num_requests_waiting, detail, dsize) &&
        load_number(m, "gpu_cache_usage_perc", &l->gpu_cache_usage_perc, NULL, detail, dsize) &&
        load_number(m, "gpu_prefix_cache_hit_rate", &l->gpu_prefix_cache_hit_rate, NULL, detail,
                    dsize);
    return ok ? CR_OK : CR_ERR_INVALID_PARAMS;
}

/* ---- fast path ---- */

struct fp {
    const char *p, *end;
};

static void fp_ws(struct fp *f) {
    while (f->p < f->end && (*f->p == ' ' || *f->p == '\t' || *f->p == '\n' || *f->p == '\r'))
        f->p++;
}

static bool fp_char(struct fp *f, char c) {
    fp_ws(f);
    if (f->p >= f->end || *f->p != c) return false;
    f->p++;
    return true;
}

/* A string of printable ASCII without escapes; *s points into the body. */
static bool fp_string(struct fp *f, const char **s, size_t *len) {
    if (!fp_char(f, '"')) return false;
    const char *start = f->p;
    while (f->p < f->end && *f->p != '"') {
        unsigned char c = (unsigned char)*f->p;
        if (c < 0x20 || c >= 0x80 || c == '\\') return false;
        f->p++;
    }
    if (f->p >= f->end) return false;
    *s = start;
    *len = (size_t)(f->p - start);
    f->p++;
    return true;
}

/* A JSON integer without sign (leading zeros refused, as JSON does). */
static bool fp_uint(struct fp *f, uint64_t *out) {
    fp_ws(f);
    const char *start = f->p;
    uint64_t v = 0;
    while (f->p < f->end && *f->p >= '0' && *f->p <= '9') {
        if (v > (UINT64_MAX - 9) / 10) return false;
        v = v * 10 + (uint64_t)(*f->p - '0');
        f->p++;
    }
    size_t digits = (size_t)(f->p - start);
    if (digits == 0 || (digits > 1 && *start == '0')) return false;
    if (f->p < f->end && (*f->p == '.' || *f->p == 'e' || *f->p == 'E')) return false;
    *out = v;
    return true;
}

static inline bool fp_is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* The number of ASCII digits at the start of 8 bytes (8 = all digits).  Per
 * byte x = c ^ '0' is 0..9 exactly for a digit: its high nibble is 0 and its
 * low nibble plus 6 does not carry into bit 4 (no carry crosses bytes). */
static inline unsigned swar_digit_count(uint64_t chunk) {
    uint64_t x = chunk ^ 0x3030303030303030ull;
    uint64_t bad = (x & 0xF0F0F0F0F0F0F0F0ull) |
                   (((x & 0x0F0F0F0F0F0F0F0Full) + 0x0606060606060606ull) & 0x1010101010101010ull);
    return bad == 0 ? 8u : (unsigned)__builtin_ctzll(bad) / 8u;
}

/* The value of the first n (1..8) digits of a little-endian chunk: shifted
 * up so the missing digits read as leading zeros, then combined in pairs,
 * quads and the whole (byte-lane multiplies; see Lemire, "Quickly parsing
 * eight digits", 2018). */
static inline uint64_t swar_digit_value(uint64_t chunk, unsigned n) {
    assert(n >= 1 && n <= 8);
    uint64_t x = (chunk ^ 0x3030303030303030ull) << (8u * (8u - n));
    x = (x * 10u + (x >> 8)) & 0x00FF00FF00FF00FFull;
    x = (x * 100u + (x >> 16)) & 0x0000FFFF0000FFFFull;
    return (x * 10000u + (x >> 32)) & 0xFFFFFFFFull;
}

/* Reads up to 11 digits into *v; returns the end of the digits.  Token ids
 * have 1..6 digits: eight bytes at once take them without a branch per
 * digit (whose mispredictions were most of the parse). */
static inline const char *fp_digits(const char *p, const char *end, uint64_t *v) {
    if (end - p >= 8) {
        uint64_t chunk;
        memcpy(&chunk, p, sizeof(chunk));
        unsigned n = swar_digit_count(chunk);
        if (n == 0) return p;
        if (n < 8) {
            *v = swar_digit_value(chunk, n);
            return p + n;
        }
    }
    const char *d = p;
    uint64_t value = 0;
    while (p < end && (unsigned)(*p - '0') < 10u && p - d < 11)
        value = value * 10 + (uint64_t)(*p++ - '0');
    *v = value;
    return p;
}

/* Parses up to cap token ids of "[ n, n, ... ]" into t; a tight loop, as it
 * is most of the body.  Returns the count, or -1 (outside the subset, or
 * more than cap ids). */
static long fp_token_list(struct fp *f, uint32_t *t, size_t cap) {
    const char *p = f->p, *end = f->end;
    size_t n = 0;
    while (p < end && fp_is_ws(*p)) p++;
    if (p < end && *p == ']') {
        f->p = p + 1;
        return 0;
    }
    for (;;) {
        while (p < end && fp_is_ws(*p)) p++;
        const char *d = p;
        uint64_t v = 0;
        p = fp_digits(p, end, &v);
        size_t digits = (size_t)(p - d);
        if (digits == 0 || digits > 10 || (digits > 1 && *d == '0') || v > UINT32_MAX || n == cap)
            return -1;
        t[n++] = (uint32_t)v;
        while (p < end && fp_is_ws(*p)) p++;
        if (p < end && *p == ',') {
            p++;
            continue;
        }
        if (p < end && *p == ']') break;
        return -1; /* '.', 'e', '-', anything else: the full parser decides */
    }
    f->p = p + 1;
    return (long)n;
}

static bool fp_tokens(struct fp *f, struct cr_indexer_request *req) {
    if (!fp_char(f, '[')) return false;
    /* A token id takes at least two bytes ("1,"), so the rest of the body bounds the count. */
    size_t cap = (size_t)(f->end - f->p) / 2 + 1;
    if (cap > CR_INDEXER_QUERY_TOKENS_MAX) cap = CR_INDEXER_QUERY_TOKENS_MAX;
    uint32_t *t = malloc(cap * sizeof(uint32_t));
    long n = t != NULL ? fp_token_list(f, t, cap) : -1;
    free(req->tokens);
    req->tokens = n >= 0 ? t : NULL;
    req->token_count = n >= 0 ? (size_t)n : 0;
    if (n < 0) free(t);
    return n >= 0;
}

static bool fp_copy(char *dst, size_t size, const char *s, size_t len) {
    if (len >= size) return false;
    memcpy(dst, s, len);
    dst[len] = '\0';
    return true;
}

/* One member: a known field of the right type, or an unknown field whose
 * value is a plain string, integer or null. */
static bool fp_member(struct fp *f, struct cr_indexer_request *req, uint32_t *seen) {
    const char *key, *sv = NULL;
    size_t klen, slen = 0;
    if (!fp_string(f, &key, &klen) || !fp_char(f, ':')) return false;
    static const char *const names[] = {"model",       "tenant_id",  "lora_name",
                                        "cache_salt",  "instance_id", "block_size",
                                        "token_ids",   "additionalsalt", "top_k"};
    int which = -1;
    for (int i = 0; i < 9; i++)
        if (strlen(names[i]) == klen && memcmp(names[i], key, klen) == 0) which = i;
    static const char unhealthy[] = "include_unhealthy"; /* checked by the full parser */
    if (klen == sizeof(unhealthy) - 1 && memcmp(unhealthy, key, klen) == 0) return false;
    if (which == 7) { /* the alias counts only while cache_salt is absent */
        if (!fp_string(f, &sv, &slen)) return false;
        return (*seen & (1u << 3)) != 0 || fp_copy(req->salt, CR_INDEXER_NAME_MAX, sv, slen);
    }
    if (which == 6) return fp_tokens(f, req) && (*seen |= 1u << 6);
    if (which == 8) { /* null or out of range: the full parser words the error */
        uint64_t v;
        if (!fp_uint(f, &v) || v == 0 || v > CR_INDEXER_TOP_K_MAX) return false;
        req->top_k = (uint32_t)v;
        return true;
    }
    if (which == 5) {
        uint64_t v;
        if (!fp_uint(f, &v) || v == 0 || v > CR_KV_MAX_BLOCK_SIZE) return false;
        req->block_size = (uint32_t)v;
        return (*seen |= 1u << 5);
    }
    fp_ws(f);
    if (which < 0 && klen == 7 && memcmp(key, "lora_id", 7) == 0)
        return false; /* deprecated: the full parser refuses it with the reason */
    if (which < 0) { /* unknown: a plain scalar, else the full parser decides */
        uint64_t v;
        if (f->p < f->end && *f->p == '"') return fp_string(f, &sv, &slen);
        return f->p < f->end && *f->p != '-' && fp_uint(f, &v);
    }
    if (!fp_string(f, &sv, &slen)) return false; /* null or mistyped: full parser */
    char *dst[5] = {req->model, req->tenant, req->lora, req->salt, req->instance};
    *seen |= 1u << which;
    return fp_copy(dst[which], CR_INDEXER_NAME_MAX, sv, slen);
}

int cr_indexer_request_fast(const char *body, size_t len, struct cr_indexer_request *req) {
    assert(body != NULL && req != NULL);
    memset(req, 0, sizeof(*req));
    struct fp f = {body, body + len};
    uint32_t seen = 0;
    bool ok = fp_char(&f, '{');
    if (ok && !fp_char(&f, '}')) {
        do ok = fp_member(&f, req, &seen);
        while (ok && fp_char(&f, ','));
        ok = ok && fp_char(&f, '}');
    }
    fp_ws(&f);
    /* model, block_size and token_ids are required; anything else is the full parser's. */
    ok = ok && f.p == f.end && (seen & 0x61u) == 0x61u;
    if (!ok) {
        cr_indexer_request_free(req);
        return CR_ERR_AGAIN;
    }
    if (req->tenant[0] == '\0') snprintf(req->tenant, sizeof(req->tenant), "default");
    req->has_instance = req->instance[0] != '\0';
    return CR_OK;
}
