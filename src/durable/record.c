/* Durable records: framing, encoding and the validating decoder
 * (record.h).  The decoder's input is a file that may be torn, truncated or
 * corrupt: it checks every length against what is left before reading. */
#include "durable/record.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>
#include <xxhash.h>

#include "core/le.h"
#include "crescent/error.h"

static void put_u8(uint8_t **p, uint8_t v) { *(*p)++ = v; }

static void put_u16(uint8_t **p, uint16_t v) {
    cr_le_put_u16(*p, v);
    *p += 2;
}

static void put_u32(uint8_t **p, uint32_t v) {
    cr_le_put_u32(*p, v);
    *p += 4;
}

static void put_u64(uint8_t **p, uint64_t v) {
    cr_le_put_u64(*p, v);
    *p += 8;
}

static void put_bytes(uint8_t **p, const void *b, size_t n) {
    if (n > 0) memcpy(*p, b, n);
    *p += n;
}

static void put_str(uint8_t **p, const char *s) {
    size_t n = strlen(s);
    assert(n <= CR_STORE_ENDPOINT_LEN_MAX);
    put_u16(p, (uint16_t)n);
    put_bytes(p, s, n);
}

static size_t str_size(const char *s) { return 2 + strlen(s); }

static void put_path(uint8_t **p, const char *s) {
    size_t n = strlen(s);
    assert(n > 0 && n <= CR_STORE_FILE_PATH_LEN_MAX);
    put_u16(p, (uint16_t)n);
    put_bytes(p, s, n);
}

/* Whether an OBJECT_PUT needs the tiered layout (a replica off memory). */
static bool tiered(const struct cr_durable_record *r) {
    for (uint32_t i = 0; r->type == CR_DURABLE_OBJECT_PUT && i < r->replica_count; i++)
        if (r->replicas[i].medium != CR_MEDIUM_MEMORY) return true;
    return false;
}

static size_t replica_size(const struct cr_durable_record *r, uint32_t i, bool with_medium) {
    const struct cr_durable_replica *rep = &r->replicas[i];
    if (rep->medium == CR_MEDIUM_DISK) return 1 + str_size(r->file_path) + 8;
    return (with_medium ? 1 : 0) + str_size(rep->segment) + 8 + 8;
}

static size_t payload_size(const struct cr_durable_record *r) {
    switch (r->type) {
    case CR_DURABLE_SEGMENT_MOUNT:
        return 16 + 8 + 8 + str_size(r->name) + str_size(r->endpoint) + str_size(r->protocol);
    case CR_DURABLE_SEGMENT_UNMOUNT:
        return str_size(r->name);
    case CR_DURABLE_OBJECT_PUT:
    case CR_DURABLE_OBJECT_PUT_TIERED: { /* (the encoder picks the layout) */
        size_t n = str_size(r->tenant) + 4 + r->key_len + 8 + 1 + 8 + 16 + 1;
        bool with_medium = tiered(r);
        for (uint32_t i = 0; i < r->replica_count; i++) n += replica_size(r, i, with_medium);
        return n;
    }
    case CR_DURABLE_OBJECT_REMOVE:
        return str_size(r->tenant) + 4 + r->key_len;
    case CR_DURABLE_REMOVE_ALL:
        return str_size(r->tenant);
    case CR_DURABLE_SNAPSHOT_END:
        return 8;
    case CR_DURABLE_DRAIN_JOB:
        return cr_durable_drain_payload_size(&r->drain);
    }
    assert(!"unknown record type");
    return 0;
}

size_t cr_durable_encoded_size(const struct cr_durable_record *rec) {
    return CR_DURABLE_FRAME_HEADER + 1 + 8 + payload_size(rec);
}

static void encode_payload(const struct cr_durable_record *r, uint8_t **p) {
    switch (r->type) {
    case CR_DURABLE_SEGMENT_MOUNT:
        put_bytes(p, r->owner.b, 16);
        put_u64(p, r->base);
        put_u64(p, r->size);
        put_str(p, r->name);
        put_str(p, r->endpoint);
        put_str(p, r->protocol);
        return;
    case CR_DURABLE_SEGMENT_UNMOUNT:
        put_str(p, r->name);
        return;
    case CR_DURABLE_OBJECT_PUT:
    case CR_DURABLE_OBJECT_PUT_TIERED:
    case CR_DURABLE_OBJECT_REMOVE:
        put_str(p, r->tenant);
        put_u32(p, r->key_len);
        put_bytes(p, r->key, r->key_len);
        if (r->type == CR_DURABLE_OBJECT_REMOVE) return;
        put_u64(p, r->size);
        put_u8(p, r->flags);
        put_u64(p, r->checksum);
        put_bytes(p, r->owner.b, 16);
        put_u8(p, (uint8_t)r->replica_count);
        for (uint32_t i = 0; i < r->replica_count; i++) {
            const struct cr_durable_replica *rep = &r->replicas[i];
            if (tiered(r)) put_u8(p, rep->medium);
            if (rep->medium == CR_MEDIUM_DISK) {
                put_path(p, r->file_path);
                put_u64(p, rep->size);
                continue;
            }
            put_str(p, rep->segment);
            put_u64(p, rep->offset);
            put_u64(p, rep->size);
        }
        return;
    case CR_DURABLE_REMOVE_ALL:
        put_str(p, r->tenant);
        return;
    case CR_DURABLE_SNAPSHOT_END:
        put_u64(p, r->record_count);
        return;
    case CR_DURABLE_DRAIN_JOB:
        cr_durable_drain_encode(&r->drain, *p);
        *p += cr_durable_drain_payload_size(&r->drain);
        return;
    }
}

int cr_durable_encode(const struct cr_durable_record *rec, struct cr_buf *out) {
    assert(rec != NULL && out != NULL);
    assert(rec->type >= CR_DURABLE_SEGMENT_MOUNT && rec->type <= CR_DURABLE_TYPE_MAX &&
           rec->type != CR_DURABLE_OBJECT_PUT_TIERED);
    assert(rec->key_len <= CR_STORE_KEY_LEN_MAX);
    assert(rec->replica_count <= CR_STORE_REPLICAS_MAX);
    size_t total = cr_durable_encoded_size(rec);
    assert(total - CR_DURABLE_FRAME_HEADER <= CR_DURABLE_RECORD_MAX);
    uint8_t *start = (uint8_t *)cr_buf_reserve(out, total);
    if (start == NULL) return CR_ERR_NOMEM;
    uint8_t *p = start + CR_DURABLE_FRAME_HEADER;
    put_u8(&p, (uint8_t)(tiered(rec) ? CR_DURABLE_OBJECT_PUT_TIERED : rec->type));
    put_u64(&p, rec->lsn);
    encode_payload(rec, &p);
    assert((size_t)(p - start) == total);
    uint32_t body_len = (uint32_t)(total - CR_DURABLE_FRAME_HEADER);
    uint8_t *h = start;
    put_u32(&h, body_len);
    put_u64(&h, XXH3_64bits(start + CR_DURABLE_FRAME_HEADER, body_len));
    cr_buf_commit(out, (const char *)p);
    return CR_OK;
}

enum cr_durable_frame_status cr_durable_frame_next(const uint8_t *p, size_t len,
                                                   const uint8_t **body, uint32_t *body_len,
                                                   size_t *frame_len) {
    assert(body != NULL && body_len != NULL && frame_len != NULL);
    if (len == 0) return CR_DURABLE_FRAME_END;
    if (len < CR_DURABLE_FRAME_HEADER) return CR_DURABLE_FRAME_TORN;
    uint32_t n = cr_le_get_u32(p);
    if (n < 9 || n > CR_DURABLE_RECORD_MAX) return CR_DURABLE_FRAME_BAD_LEN;
    if (len - CR_DURABLE_FRAME_HEADER < n) return CR_DURABLE_FRAME_TORN;
    if (XXH3_64bits(p + CR_DURABLE_FRAME_HEADER, n) != cr_le_get_u64(p + 4))
        return CR_DURABLE_FRAME_BAD_CHECK;
    *body = p + CR_DURABLE_FRAME_HEADER;
    *body_len = n;
    *frame_len = CR_DURABLE_FRAME_HEADER + (size_t)n;
    return CR_DURABLE_FRAME_OK;
}

const char *cr_durable_frame_status_text(enum cr_durable_frame_status st) {
    switch (st) {
    case CR_DURABLE_FRAME_OK: return "a whole record";
    case CR_DURABLE_FRAME_END: return "the end";
    case CR_DURABLE_FRAME_TORN: return "a record cut short (torn write)";
    case CR_DURABLE_FRAME_BAD_LEN: return "a record length no record has";
    case CR_DURABLE_FRAME_BAD_CHECK: return "a record whose checksum does not match";
    }
    return "?";
}

/* ---- decoding ------------------------------------------------------------ */

struct reader {
    const uint8_t *p;
    size_t left;
    bool bad;
    const char *what; /* the first field that did not decode */
};

static bool need(struct reader *r, size_t n, const char *what) {
    if (r->bad) return false;
    if (r->left < n) {
        r->bad = true;
        r->what = what;
        return false;
    }
    return true;
}

static uint8_t take_u8(struct reader *r, const char *what) {
    if (!need(r, 1, what)) return 0;
    r->left--;
    return *r->p++;
}

static uint32_t take_u32(struct reader *r, const char *what) {
    if (!need(r, 4, what)) return 0;
    uint32_t v = cr_le_get_u32(r->p);
    r->p += 4;
    r->left -= 4;
    return v;
}

static uint64_t take_u64(struct reader *r, const char *what) {
    if (!need(r, 8, what)) return 0;
    uint64_t v = cr_le_get_u64(r->p);
    r->p += 8;
    r->left -= 8;
    return v;
}

static void take_bytes(struct reader *r, void *out, size_t n, const char *what) {
    if (!need(r, n, what)) return;
    if (n > 0) memcpy(out, r->p, n);
    r->p += n;
    r->left -= n;
}

/* A name: u16 length ≤ max, no NUL inside, copied NUL-terminated. */
static void take_str(struct reader *r, char *out, size_t max, const char *what) {
    out[0] = '\0';
    if (!need(r, 2, what)) return;
    size_t n = (size_t)r->p[0] | (size_t)r->p[1] << 8;
    r->p += 2;
    r->left -= 2;
    if (n > max) {
        r->bad = true;
        r->what = what;
        return;
    }
    if (!need(r, n, what)) return;
    if (memchr(r->p, '\0', n) != NULL) {
        r->bad = true;
        r->what = what;
        return;
    }
    memcpy(out, r->p, n);
    out[n] = '\0';
    r->p += n;
    r->left -= n;
}

static void take_key(struct reader *r, struct cr_durable_record *out) {
    out->key_len = take_u32(r, "key length");
    if (r->bad) return;
    if (out->key_len == 0 || out->key_len > CR_STORE_KEY_LEN_MAX) {
        r->bad = true;
        r->what = "key length";
        return;
    }
    take_bytes(r, out->key, out->key_len, "key");
}

static void decode_object(struct reader *r, struct cr_durable_record *out, bool with_medium) {
    out->size = take_u64(r, "object size");
    out->flags = take_u8(r, "object flags");
    if (!r->bad && (out->flags & ~CR_DURABLE_OBJ_FLAGS) != 0) {
        r->bad = true;
        r->what = "object flags";
    }
    out->checksum = take_u64(r, "checksum");
    take_bytes(r, out->owner.b, 16, "owner");
    out->replica_count = take_u8(r, "replica count");
    if (!r->bad && (out->replica_count == 0 || out->replica_count > CR_STORE_REPLICAS_MAX)) {
        r->bad = true;
        r->what = "replica count";
    }
    bool disk_seen = false;
    for (uint32_t i = 0; i < out->replica_count && !r->bad; i++) {
        struct cr_durable_replica *rep = &out->replicas[i];
        rep->medium = with_medium ? take_u8(r, "replica medium") : CR_MEDIUM_MEMORY;
        if (!r->bad && rep->medium >= CR_MEDIUM_COUNT) {
            r->bad = true;
            r->what = "replica medium";
        }
        if (rep->medium == CR_MEDIUM_DISK) {
            take_str(r, out->file_path, CR_STORE_FILE_PATH_LEN_MAX, "disk replica path");
            rep->segment[0] = '\0';
            rep->offset = 0;
            rep->size = take_u64(r, "disk replica size");
            if (!r->bad && (disk_seen || out->file_path[0] == '\0')) {
                r->bad = true;
                r->what = "disk replica path";
            }
            disk_seen = true;
            continue;
        }
        take_str(r, rep->segment, CR_STORE_NAME_LEN_MAX, "replica segment");
        if (!r->bad && rep->segment[0] == '\0') {
            r->bad = true;
            r->what = "replica segment";
        }
        rep->offset = take_u64(r, "replica offset");
        rep->size = take_u64(r, "replica size");
        if (!r->bad && rep->medium == CR_MEDIUM_MEMORY &&
            (rep->size == 0 || rep->offset + rep->size < rep->offset)) {
            r->bad = true;
            r->what = "replica range";
        }
    }
}

static void decode_payload(struct reader *r, struct cr_durable_record *out) {
    switch (out->type) {
    case CR_DURABLE_SEGMENT_MOUNT:
        take_bytes(r, out->owner.b, 16, "segment owner");
        out->base = take_u64(r, "segment base");
        out->size = take_u64(r, "segment size");
        take_str(r, out->name, CR_STORE_NAME_LEN_MAX, "segment name");
        take_str(r, out->endpoint, CR_STORE_ENDPOINT_LEN_MAX, "segment endpoint");
        take_str(r, out->protocol, CR_STORE_NAME_LEN_MAX, "segment protocol");
        if (!r->bad && (out->size == 0 || out->base + out->size < out->base ||
                        out->name[0] == '\0')) {
            r->bad = true;
            r->what = "segment range or name";
        }
        return;
    case CR_DURABLE_SEGMENT_UNMOUNT:
        take_str(r, out->name, CR_STORE_NAME_LEN_MAX, "segment name");
        if (!r->bad && out->name[0] == '\0') {
            r->bad = true;
            r->what = "segment name";
        }
        return;
    case CR_DURABLE_OBJECT_PUT:
    case CR_DURABLE_OBJECT_PUT_TIERED:
    case CR_DURABLE_OBJECT_REMOVE:
        take_str(r, out->tenant, CR_STORE_NAME_LEN_MAX, "tenant");
        take_key(r, out);
        if (out->type != CR_DURABLE_OBJECT_REMOVE)
            decode_object(r, out, out->type == CR_DURABLE_OBJECT_PUT_TIERED);
        if (out->type != CR_DURABLE_OBJECT_PUT_TIERED) return;
        out->type = CR_DURABLE_OBJECT_PUT;
        /* The encoder writes the tiered layout only for a replica off memory:
         * one without is not a record it wrote (one canonical form each). */
        if (!r->bad && !tiered(out)) {
            r->bad = true;
            r->what = "replica media (a tiered record with every replica in memory)";
        }
        return;
    case CR_DURABLE_REMOVE_ALL:
        take_str(r, out->tenant, CR_STORE_NAME_LEN_MAX, "tenant");
        return;
    case CR_DURABLE_SNAPSHOT_END:
        out->record_count = take_u64(r, "record count");
        return;
    case CR_DURABLE_DRAIN_JOB: { /* the rest of the body */
        const char *bad = cr_durable_drain_decode(r->p, r->left, &out->drain);
        r->p += r->left;
        r->left = 0;
        if (bad != NULL) {
            r->bad = true;
            r->what = bad;
        }
        return;
    }
    }
}

int cr_durable_decode(const uint8_t *body, uint32_t body_len, struct cr_durable_record *out,
                      char *err, size_t err_len) {
    assert(body != NULL && out != NULL);
    struct reader r = {.p = body, .left = body_len};
    uint8_t type = take_u8(&r, "type");
    uint64_t lsn = take_u64(&r, "lsn");
    if (r.bad || type < CR_DURABLE_SEGMENT_MOUNT || type > CR_DURABLE_TYPE_MAX) {
        if (err_len > 0)
            snprintf(err, err_len, "record of unknown type %u (a newer format?)", type);
        return CR_ERR_PROTOCOL;
    }
    memset(out, 0, offsetof(struct cr_durable_record, key));
    out->type = (enum cr_durable_type)type;
    out->lsn = lsn;
    out->key_len = 0;
    out->flags = 0;
    out->checksum = 0;
    out->replica_count = 0;
    out->record_count = 0;
    out->file_path[0] = '\0';
    decode_payload(&r, out);
    if (!r.bad && r.left != 0) {
        r.bad = true;
        r.what = "record length (bytes left over)";
    }
    if (r.bad) {
        if (err_len > 0)
            snprintf(err, err_len, "record %llu of type %u: bad %s",
                     (unsigned long long)lsn, type, r.what);
        return CR_ERR_PROTOCOL;
    }
    return CR_OK;
}
