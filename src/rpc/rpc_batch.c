/* The batch requests' hand-written decoder and their protobuf-c form (see
 * rpc_batch.h).
 *
 * The decoder copies the body into the call's request arena and reads the
 * copy once: keys and strings point into it, and are NUL-terminated in it
 * when the read is done (the byte after any field's value is a tag of a
 * field already read, or the end: the copy has one byte more).  Where
 * protobuf-c and the pre-scan read a wire form more loosely than the
 * decoder (tags longer than a byte, lengths of more than 3 bytes, a bool of
 * more than one byte), the decoder declines and the general path decides;
 * declining is always safe, accepting must match. */
#include "rpc/rpc_batch.h"

#include <assert.h>
#include <string.h>

#include "rpc/rpc_codec.h"
#include "master.pb-c.h"
#include "msgs/master_msgs.h"
#include "msgs/pb_wire.h"

#define TAG(number, type) ((uint8_t)((number) << 3 | (type)))
#define LEN_BYTES_MAX 3u /* lengths up to 2 MiB; longer ones go the general way */
#define NAME_MAX_BYTES (CR_STORE_NAME_LEN_MAX - 1u) /* segment names, block names */

/* The default of every request's tenant_id (proto/master.proto). */
static const char default_tenant[] = "default";

bool cr_rpc_batch_method(uint16_t method) {
    switch (method) {
    case CRESCENT__MASTER__METHOD__BATCH_GET_REPLICA_LIST:
    case CRESCENT__MASTER__METHOD__BATCH_EXIST_KEY:
    case CRESCENT__MASTER__METHOD__BATCH_REMOVE:
    case CRESCENT__MASTER__METHOD__BATCH_PUT_START:
    case CRESCENT__MASTER__METHOD__BATCH_PUT_END:
    case CRESCENT__MASTER__METHOD__BATCH_PUT_REVOKE: return true;
    default: return false;
    }
}

static bool put_method(uint16_t method) {
    return method == CRESCENT__MASTER__METHOD__BATCH_PUT_START ||
           method == CRESCENT__MASTER__METHOD__BATCH_PUT_END ||
           method == CRESCENT__MASTER__METHOD__BATCH_PUT_REVOKE;
}

/* ------------------------------------------------------------------------ */
/* Wire reading: every helper returns false where the decoder declines. */

struct rd {
    uint8_t *p; /* the copy: strings are terminated in it afterwards */
    size_t len, pos;
};

/* A one-byte tag (every field of these messages is numbered below 16) of a
 * field number other than 0. */
static inline bool read_tag(struct rd *r, uint8_t *tag) {
    uint8_t t = r->p[r->pos];
    if (t >= 0x80 || (t >> 3) == 0) return false;
    r->pos++;
    *tag = t;
    return true;
}

/* A field number seen before: declined (protobuf-c keeps the last scalar
 * and merges sub-messages). */
static inline bool first_time(unsigned *seen, uint8_t tag) {
    unsigned bit = 1u << (tag >> 3);
    if (*seen & bit) return false;
    *seen |= bit;
    return true;
}

static inline bool read_varint(struct rd *r, uint64_t *v) {
    return cr_pb_read_varint(r->p, r->len, &r->pos, v);
}

/* A bool in one byte (protobuf-c reads any non-zero varint as true; a
 * longer one may be zero in 64 bits yet true to it). */
static inline bool read_bool(struct rd *r, bool *v) {
    if (r->pos == r->len || r->p[r->pos] >= 0x80) return false;
    *v = r->p[r->pos++] != 0;
    return true;
}

/* A length-delimited value: *at its first byte, *n its length. */
static inline bool read_span(struct rd *r, uint8_t **at, size_t *n) {
    size_t pos = r->pos;
    uint64_t v;
    if (pos < r->len && r->p[pos] < 0x80) {
        v = r->p[pos++];
    } else if (!cr_pb_read_varint(r->p, r->len, &pos, &v) || pos - r->pos > LEN_BYTES_MAX) {
        return false;
    }
    if (v > r->len - pos) return false;
    *at = r->p + pos;
    *n = (size_t)v;
    r->pos = pos + (size_t)v;
    return true;
}

/* A string of min..max bytes without a NUL (the pre-scan refuses one). */
static inline bool read_string(struct rd *r, size_t min, size_t max, char **at, size_t *n) {
    uint8_t *p;
    if (!read_span(r, &p, n) || *n < min || *n > max || memchr(p, 0, *n) != NULL) return false;
    *at = (char *)p;
    return true;
}

static inline uint64_t read_fixed64(const uint8_t *p) {
    uint64_t v = 0;
    for (unsigned i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Skips a value of wire `type` (for counting). */
static bool skip_value(struct rd *r, unsigned type) {
    uint64_t v;
    uint8_t *at;
    size_t n;
    switch (type) {
    case CR_PB_VARINT: return read_varint(r, &v);
    case CR_PB_LEN: return read_span(r, &at, &n);
    case CR_PB_I64: n = 8; break;
    case CR_PB_I32: n = 4; break;
    default: return false;
    }
    if (n > r->len - r->pos) return false;
    r->pos += n;
    return true;
}

/* The entries (fields 1) of a request's top level; false past the batch
 * bound or where a field does not frame. */
static bool count_entries(struct rd r, uint32_t *count) {
    uint32_t n = 0;
    while (r.pos < r.len) {
        uint8_t tag;
        if (!read_tag(&r, &tag) || !skip_value(&r, tag & 7)) return false;
        if (tag == TAG(1, CR_PB_LEN) && ++n > CR_MASTER_BATCH_MAX) return false;
    }
    *count = n;
    return true;
}

/* Strings to NUL-terminate once the whole body is read. */
#define PUT_STRINGS_MAX 6u
struct ends {
    char *at[PUT_STRINGS_MAX];
    unsigned n;
};

static inline void end_after(struct ends *e, char *s, size_t n) {
    assert(e->n < PUT_STRINGS_MAX);
    e->at[e->n++] = s + n;
}

/* ------------------------------------------------------------------------ */
/* Keys of one tenant: BatchGetReplicaList, BatchExistKey, BatchRemove. */

static bool decode_keys(struct rd r, uint16_t method, struct cr_rpc_batch *b, const char **keys,
                        uint32_t *lens) {
    bool remove = method == CRESCENT__MASTER__METHOD__BATCH_REMOVE;
    bool has_tenant = false, has_force = false, has_token = false;
    char *tenant = NULL, *token = NULL;
    size_t tenant_len = 0, token_len = 0;
    uint32_t k = 0;
    while (r.pos < r.len) {
        uint8_t tag;
        char *s;
        size_t n;
        if (!read_tag(&r, &tag)) return false;
        switch (tag) {
        case TAG(1, CR_PB_LEN):
            if (!read_string(&r, 1, CR_STORE_KEY_LEN_MAX, &s, &n)) return false;
            assert(k < b->count); /* counted before */
            keys[k] = s, lens[k] = (uint32_t)n;
            k++;
            break;
        case TAG(2, CR_PB_LEN):
            if (has_tenant || !read_string(&r, 0, CR_MASTER_TENANT_MAX, &tenant, &tenant_len))
                return false;
            has_tenant = true;
            break;
        case TAG(3, CR_PB_VARINT):
            if (!remove || has_force || !read_bool(&r, &b->force)) return false;
            has_force = true;
            break;
        case TAG(14, CR_PB_LEN):
            if (!remove || has_token || !read_string(&r, 0, SIZE_MAX, &token, &token_len))
                return false;
            has_token = true;
            break;
        default: return false;
        }
    }
    assert(k == b->count);
    for (uint32_t i = 0; i < k; i++) ((char *)keys[i])[lens[i]] = '\0';
    if (has_tenant) tenant[tenant_len] = '\0';
    if (has_token) token[token_len] = '\0';
    b->tenant = has_tenant ? tenant : default_tenant;
    b->admin_token = token;
    b->keys = keys;
    b->key_lens = lens;
    return true;
}

/* ------------------------------------------------------------------------ */
/* Puts */

/* A UUID: required first and second, nothing else. */
static bool decode_uuid(struct rd r, struct cr_uuid *out) {
    uint64_t half[2];
    bool seen[2] = {false, false};
    while (r.pos < r.len) {
        uint8_t tag;
        if (!read_tag(&r, &tag)) return false;
        if (tag != TAG(1, CR_PB_VARINT) && tag != TAG(2, CR_PB_VARINT)) return false;
        unsigned i = (tag >> 3) - 1u;
        if (seen[i] || !read_varint(&r, &half[i])) return false;
        seen[i] = true;
    }
    if (!seen[0] || !seen[1]) return false;
    Crescent__Master__UUID pb = {.first = half[0], .second = half[1]};
    cr_rpc_uuid_from_pb(&pb, out);
    return true;
}

/* ReplicateConfig: replica_num (default 1), with_soft_pin, preferred_segment. */
static bool decode_config(struct rd r, struct cr_rpc_put *e, struct ends *ends) {
    unsigned seen = 0;
    e->replica_num = 1;
    while (r.pos < r.len) {
        uint8_t tag;
        char *s;
        size_t n;
        if (!read_tag(&r, &tag) || !first_time(&seen, tag)) return false;
        switch (tag) {
        case TAG(1, CR_PB_VARINT):
            if (!read_varint(&r, &e->replica_num)) return false;
            break;
        case TAG(2, CR_PB_VARINT):
            if (!read_bool(&r, &e->with_soft_pin)) return false;
            break;
        case TAG(3, CR_PB_LEN):
            if (!read_string(&r, 0, NAME_MAX_BYTES, &s, &n)) return false;
            e->preferred_segment = s;
            end_after(ends, s, n);
            break;
        default: return false;
        }
    }
    return e->replica_num >= 1 && e->replica_num <= CR_STORE_REPLICAS_MAX;
}

/* Packed token ids: varints of at most 5 bytes, at most CR_RPC_TOKEN_IDS_MAX. */
static bool decode_tokens(const uint8_t *p, size_t n, void **arena,
                          struct cr_store_block_meta *meta) {
    size_t count = 0, run = 0;
    for (size_t i = 0; i < n; i++) {
        if (++run > 5) return false;
        if (p[i] < 0x80) count++, run = 0;
    }
    if (run != 0 || count > CR_RPC_TOKEN_IDS_MAX) return false;
    if (count == 0) return true;
    uint32_t *ids = cr_rpc_request_alloc(arena, count * sizeof(*ids));
    if (ids == NULL) return false;
    struct rd r = {.p = (uint8_t *)p, .len = n};
    for (size_t i = 0; i < count; i++) {
        uint64_t v;
        bool ok = read_varint(&r, &v);
        assert(ok);
        (void)ok;
        ids[i] = (uint32_t)v; /* protobuf-c keeps the low 32 bits */
    }
    meta->token_ids = ids;
    meta->token_count = (uint32_t)count;
    return true;
}

/* BlockInfo: model_name, block_size, block_hash, parent_block_hash, token_ids. */
static bool decode_block(struct rd r, struct cr_rpc_put *e, struct ends *ends, void **arena) {
    unsigned seen = 0;
    struct cr_store_block_meta *m = &e->block;
    while (r.pos < r.len) {
        uint8_t tag, *at;
        char *s;
        size_t n;
        uint64_t v;
        if (!read_tag(&r, &tag) || !first_time(&seen, tag)) return false;
        switch (tag) {
        case TAG(1, CR_PB_LEN):
        case TAG(3, CR_PB_LEN):
        case TAG(4, CR_PB_LEN):
            if (!read_string(&r, 0, NAME_MAX_BYTES, &s, &n)) return false;
            end_after(ends, s, n);
            if (tag == TAG(1, CR_PB_LEN))
                m->model_name = s;
            else if (tag == TAG(3, CR_PB_LEN))
                m->block_hash = s;
            else
                m->parent_block_hash = s;
            break;
        case TAG(2, CR_PB_VARINT):
            if (!read_varint(&r, &v)) return false;
            m->block_size = (uint32_t)v; /* protobuf-c keeps the low 32 bits */
            break;
        case TAG(5, CR_PB_LEN):
            if (!read_span(&r, &at, &n) || !decode_tokens(at, n, arena, m)) return false;
            break;
        default: return false;
        }
    }
    e->has_block = true;
    return true;
}

/* The fields PutStartRequest, PutEndRequest and PutRevokeRequest share,
 * at each one's numbers (`at`): key, tenant_id, client_id, client_secret.
 * 1: read; 0: not one of them; -1: declined. */
struct common_fields {
    uint8_t key, tenant, client;
};
#define SECRET_FIELD 13u

static int decode_common(struct rd *r, uint8_t tag, struct common_fields at, struct cr_rpc_put *e,
                         struct ends *ends) {
    uint8_t *p;
    char *s;
    size_t n;
    if (tag == TAG(at.key, CR_PB_LEN)) {
        if (!read_string(r, 1, CR_STORE_KEY_LEN_MAX, &s, &n)) return -1;
        e->key = s, e->key_len = (uint32_t)n;
        end_after(ends, s, n);
    } else if (tag == TAG(at.tenant, CR_PB_LEN)) {
        if (!read_string(r, 0, CR_MASTER_TENANT_MAX, &s, &n)) return -1;
        e->tenant = s;
        end_after(ends, s, n);
    } else if (tag == TAG(at.client, CR_PB_LEN)) {
        if (!read_span(r, &p, &n) || !decode_uuid((struct rd){.p = p, .len = n}, &e->client))
            return -1;
    } else if (tag == TAG(SECRET_FIELD, CR_PB_LEN)) {
        if (!read_span(r, &p, &n)) return -1;
        e->has_secret = true, e->secret = p, e->secret_len = (uint32_t)n;
    } else {
        return 0;
    }
    return 1;
}

/* Fields a PutStartRequest must have: key, value_length, config (required
 * by master.proto), client_id (by cr_rpc_validate). */
#define START_REQUIRED (1u << 1 | 1u << 2 | 1u << 3 | 1u << 6)

static bool decode_put_start(struct rd r, struct cr_rpc_put *e, struct ends *ends,
                             void **arena) {
    static const struct common_fields at = {.key = 1, .tenant = 5, .client = 6};
    unsigned seen = 0, slices = 0;
    while (r.pos < r.len) {
        uint8_t tag, *p;
        size_t n;
        uint64_t v;
        if (!read_tag(&r, &tag)) return false;
        if (tag == TAG(4, CR_PB_VARINT)) { /* slice_lengths: repeated, unused */
            if (++slices > CR_MASTER_BATCH_MAX || !read_varint(&r, &v)) return false;
            continue;
        }
        if (!first_time(&seen, tag)) return false;
        int common = decode_common(&r, tag, at, e, ends);
        if (common != 0) {
            if (common < 0) return false;
        } else if (tag == TAG(2, CR_PB_VARINT)) {
            if (!read_varint(&r, &v) || (int64_t)v < 0) return false;
            e->value_length = (int64_t)v;
        } else if (tag == TAG(3, CR_PB_LEN)) {
            if (!read_span(&r, &p, &n) || !decode_config((struct rd){.p = p, .len = n}, e, ends))
                return false;
        } else if (tag == TAG(7, CR_PB_LEN)) {
            if (!read_span(&r, &p, &n) ||
                !decode_block((struct rd){.p = p, .len = n}, e, ends, arena))
                return false;
        } else {
            return false;
        }
    }
    return (seen & START_REQUIRED) == START_REQUIRED;
}

/* PutEndRequest (end) or PutRevokeRequest: key, tenant_id, client_id,
 * checksum_xxh3 (PutEnd only), client_secret. */
static bool decode_put_end(struct rd r, bool end, struct cr_rpc_put *e, struct ends *ends) {
    static const struct common_fields at = {.key = 1, .tenant = 2, .client = 3};
    unsigned seen = 0;
    while (r.pos < r.len) {
        uint8_t tag;
        if (!read_tag(&r, &tag) || !first_time(&seen, tag)) return false;
        int common = decode_common(&r, tag, at, e, ends);
        if (common != 0) {
            if (common < 0) return false;
        } else if (end && tag == TAG(4, CR_PB_I64) && r.len - r.pos >= 8) {
            e->has_checksum = true, e->checksum = read_fixed64(r.p + r.pos);
            r.pos += 8;
        } else {
            return false;
        }
    }
    return (seen & (1u << 1 | 1u << 3)) == (1u << 1 | 1u << 3); /* key, client_id */
}

static bool decode_puts(struct rd r, uint16_t method, struct cr_rpc_batch *b,
                        struct cr_rpc_put *puts, struct ends *ends, void **arena) {
    uint32_t k = 0;
    while (r.pos < r.len) {
        uint8_t tag, *at;
        size_t n;
        if (!read_tag(&r, &tag) || tag != TAG(1, CR_PB_LEN) || !read_span(&r, &at, &n))
            return false;
        assert(k < b->count); /* counted before */
        struct cr_rpc_put *e = &puts[k];
        *e = (struct cr_rpc_put){.tenant = default_tenant};
        struct rd sub = {.p = at, .len = n};
        bool ok = method == CRESCENT__MASTER__METHOD__BATCH_PUT_START
                      ? decode_put_start(sub, e, &ends[k], arena)
                      : decode_put_end(sub, method == CRESCENT__MASTER__METHOD__BATCH_PUT_END, e,
                                       &ends[k]);
        if (!ok) return false;
        k++;
    }
    assert(k == b->count);
    for (uint32_t i = 0; i < k; i++)
        for (unsigned j = 0; j < ends[i].n; j++) *ends[i].at[j] = '\0';
    b->puts = puts;
    return true;
}

/* ------------------------------------------------------------------------ */

#define ALIGN_UP(n) (((n) + 15u) & ~(size_t)15u)

bool cr_rpc_batch_decode(uint16_t method, const uint8_t *body, size_t len, void **arena,
                         const struct cr_rpc_batch **out) {
    assert(cr_rpc_batch_method(method) && arena != NULL && out != NULL);
    assert(body != NULL || len == 0);
    *arena = NULL;
    *out = NULL;
    uint32_t count;
    /* The body is the caller's, read-only: counted there, then copied. */
    if (!count_entries((struct rd){.p = (uint8_t *)body, .len = len}, &count)) return false;
    bool puts = put_method(method);
    size_t per = puts ? sizeof(struct cr_rpc_put) + sizeof(struct ends)
                      : sizeof(const char *) + sizeof(uint32_t);
    size_t size = ALIGN_UP(sizeof(struct cr_rpc_batch)) + ALIGN_UP(len + 1) + count * per;
    uint8_t *mem = cr_rpc_request_alloc(arena, size);
    if (mem == NULL) return false;
    struct cr_rpc_batch *b = (void *)mem;
    uint8_t *copy = mem + ALIGN_UP(sizeof(*b));
    uint8_t *arrays = copy + ALIGN_UP(len + 1);
    if (len > 0) memcpy(copy, body, len);
    copy[len] = 0;
    *b = (struct cr_rpc_batch){.method = method, .count = count};
    struct rd r = {.p = copy, .len = len};
    bool ok;
    if (puts) {
        struct cr_rpc_put *entries = (void *)arrays;
        struct ends *ends = (void *)(arrays + count * sizeof(*entries));
        for (uint32_t i = 0; i < count; i++) ends[i].n = 0;
        ok = decode_puts(r, method, b, entries, ends, arena);
    } else {
        const char **keys = (void *)arrays;
        uint32_t *lens = (void *)(arrays + count * sizeof(*keys));
        ok = decode_keys(r, method, b, keys, lens);
    }
    if (!ok) {
        cr_rpc_request_arena_free(*arena);
        *arena = NULL;
        return false;
    }
    *out = b;
    return true;
}

/* ------------------------------------------------------------------------ */
/* From protobuf-c */

void cr_rpc_put_from_pb(uint16_t method, const ProtobufCMessage *request, struct cr_rpc_put *out) {
    assert(request != NULL && out != NULL);
    *out = (struct cr_rpc_put){.replica_num = 1};
    if (method == CRESCENT__MASTER__METHOD__PUT_START ||
        method == CRESCENT__MASTER__METHOD__BATCH_PUT_START) {
        const Crescent__Master__PutStartRequest *r = (const void *)request;
        *out = (struct cr_rpc_put){.key = r->key,
                                   .key_len = (uint32_t)strlen(r->key),
                                   .tenant = r->tenant_id,
                                   .has_secret = r->has_client_secret,
                                   .secret_len = (uint32_t)r->client_secret.len,
                                   .secret = r->client_secret.data,
                                   .value_length = r->value_length,
                                   .replica_num = r->config->replica_num,
                                   .with_soft_pin = r->config->with_soft_pin,
                                   .preferred_segment = r->config->preferred_segment,
                                   .has_block = r->block != NULL};
        if (r->client_id != NULL) cr_rpc_uuid_from_pb(r->client_id, &out->client);
        const Crescent__Master__BlockInfo *b = r->block;
        if (b != NULL)
            out->block = (struct cr_store_block_meta){
                .model_name = b->model_name,
                .block_size = b->has_block_size ? b->block_size : 0,
                .block_hash = b->block_hash,
                .parent_block_hash = b->parent_block_hash,
                .token_ids = b->token_ids,
                .token_count = (uint32_t)b->n_token_ids};
        return;
    }
    /* PutEndRequest and PutRevokeRequest share key, tenant_id and client_id;
     * client_secret sits at different offsets and only PutEnd has a checksum. */
    const Crescent__Master__PutEndRequest *end = (const void *)request;
    const Crescent__Master__PutRevokeRequest *rv = (const void *)request;
    bool is_end = method == CRESCENT__MASTER__METHOD__PUT_END ||
                  method == CRESCENT__MASTER__METHOD__BATCH_PUT_END;
    out->key = end->key;
    out->key_len = (uint32_t)strlen(end->key);
    out->tenant = end->tenant_id;
    if (end->client_id != NULL) cr_rpc_uuid_from_pb(end->client_id, &out->client);
    out->has_secret = is_end ? end->has_client_secret : rv->has_client_secret;
    ProtobufCBinaryData secret = is_end ? end->client_secret : rv->client_secret;
    out->secret_len = (uint32_t)secret.len;
    out->secret = secret.data;
    out->has_checksum = is_end && end->has_checksum_xxh3;
    out->checksum = out->has_checksum ? end->checksum_xxh3 : 0;
}

bool cr_rpc_batch_from_pb(uint16_t method, const ProtobufCMessage *request, cr_rpc_alloc_fn alloc,
                          void *ctx, struct cr_rpc_batch *out) {
    assert(cr_rpc_batch_method(method) && request != NULL && alloc != NULL && out != NULL);
    *out = (struct cr_rpc_batch){.method = method};
    if (put_method(method)) {
        /* The three batch requests are {repeated entry requests = 1}. */
        const Crescent__Master__BatchPutEndRequest *r = (const void *)request;
        struct cr_rpc_put *puts = alloc(ctx, r->n_requests * sizeof(*puts) + 1);
        if (puts == NULL) return false;
        uint16_t entry = method == CRESCENT__MASTER__METHOD__BATCH_PUT_START
                             ? CRESCENT__MASTER__METHOD__PUT_START
                         : method == CRESCENT__MASTER__METHOD__BATCH_PUT_END
                             ? CRESCENT__MASTER__METHOD__PUT_END
                             : CRESCENT__MASTER__METHOD__PUT_REVOKE;
        for (size_t i = 0; i < r->n_requests; i++)
            cr_rpc_put_from_pb(entry, (const ProtobufCMessage *)r->requests[i], &puts[i]);
        out->count = (uint32_t)r->n_requests;
        out->puts = puts;
        return true;
    }
    /* BatchRemoveRequest and BatchGetReplicaListRequest begin as
     * BatchExistKeyRequest does (keys, tenant_id: rpc_methods.c checks). */
    const Crescent__Master__BatchExistKeyRequest *r = (const void *)request;
    uint32_t *lens = alloc(ctx, r->n_keys * sizeof(*lens) + 1);
    if (lens == NULL) return false;
    for (size_t i = 0; i < r->n_keys; i++) lens[i] = (uint32_t)strlen(r->keys[i]);
    out->count = (uint32_t)r->n_keys;
    out->tenant = r->tenant_id;
    out->keys = (const char *const *)r->keys;
    out->key_lens = lens;
    if (method == CRESCENT__MASTER__METHOD__BATCH_REMOVE) {
        const Crescent__Master__BatchRemoveRequest *rm = (const void *)request;
        out->force = rm->force;
        out->admin_token = rm->admin_token;
    }
    return true;
}
