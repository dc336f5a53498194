/* Direct encoding of successful replica-list responses (see rpc_fast_pack.h). */
#include "rpc/rpc_fast_pack.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* ReplicaInfo.ReplicaStatus has the store's values (rpc_methods.c relies on it too). */
_Static_assert((int)CRESCENT__MASTER__REPLICA_INFO__REPLICA_STATUS__COMPLETE ==
                       (int)CR_REPLICA_COMPLETE &&
                   (int)CRESCENT__MASTER__REPLICA_INFO__REPLICA_STATUS__FAILED ==
                       (int)CR_REPLICA_FAILED,
               "replica status values");

/* Field numbers of proto/master.proto, wire type folded in (field << 3 | type). */
enum {
    WIRE_VARINT = 0,
    WIRE_LEN = 2,
    TAG_RESP_STATUS_CODE = 1 << 3 | WIRE_VARINT,  /* GetReplicaList/PutStartResponse.status_code */
    TAG_RESP_REPLICA_LIST = 2 << 3 | WIRE_LEN,    /* ...Response.replica_list */
    TAG_EXIST_EXISTS = 2 << 3 | WIRE_VARINT,      /* ExistKeyResponse.exists */
    TAG_INFO_HANDLES = 1 << 3 | WIRE_LEN,         /* ReplicaInfo.handles */
    TAG_INFO_STATUS = 2 << 3 | WIRE_VARINT,       /* ReplicaInfo.status */
    TAG_HANDLE_SEGMENT_NAME = 1 << 3 | WIRE_LEN,  /* BufHandle.segment_name */
    TAG_HANDLE_SIZE = 2 << 3 | WIRE_VARINT,       /* BufHandle.size */
    TAG_HANDLE_BUFFER = 3 << 3 | WIRE_VARINT,     /* BufHandle.buffer */
    TAG_HANDLE_STATUS = 4 << 3 | WIRE_VARINT,     /* BufHandle.status */
    TAG_HANDLE_ENDPOINT = 5 << 3 | WIRE_LEN,      /* BufHandle.transport_endpoint */
    TAG_HANDLE_CAPABILITY = 6 << 3 | WIRE_LEN,    /* BufHandle.capability */
    TAG_INFO_MEDIUM = 3 << 3 | WIRE_VARINT,       /* ReplicaInfo.medium */
    TAG_INFO_FILE_PATH = 4 << 3 | WIRE_LEN,       /* ReplicaInfo.file_path */
    TAG_INFO_ENDPOINT = 5 << 3 | WIRE_LEN,        /* ReplicaInfo.endpoint */
    TAG_INFO_SEGMENT = 6 << 3 | WIRE_LEN,         /* ReplicaInfo.segment_name */
    TAG_INFO_OBJECT_SIZE = 7 << 3 | WIRE_VARINT,  /* ReplicaInfo.object_size */
    TAG_INFO_POSITION = 8 << 3 | WIRE_VARINT,     /* ReplicaInfo.position */
    TAG_INFO_OWNER = 9 << 3 | WIRE_LEN,           /* ReplicaInfo.owner */
    TAG_INFO_CAPABILITY = 10 << 3 | WIRE_LEN,     /* ReplicaInfo.capability */
    TAG_UUID_FIRST = 1 << 3 | WIRE_VARINT,        /* UUID.first */
    TAG_UUID_SECOND = 2 << 3 | WIRE_VARINT,       /* UUID.second */
    WIRE_FIXED64 = 1,
    TAG_RESP_CHECKSUM = 3 << 3 | WIRE_FIXED64,    /* GetReplicaListResponse.checksum_xxh3 */
    TAG_RESP_LEASE = 4 << 3 | WIRE_VARINT,        /* GetReplicaListResponse.lease_ttl_ms */
    TAG_RESP_ERROR_MESSAGE = 15 << 3 | WIRE_LEN,  /* every response's error_message */
    TAG_BATCH_STATUS_CODES = 2 << 3 | WIRE_VARINT, /* Batch...Response.status_codes */
};

static size_t varint_len(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) v >>= 7, n++;
    return n;
}

static uint8_t *put_varint(uint8_t *p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

static uint8_t *put_str(uint8_t *p, uint8_t tag, const char *s, size_t len) {
    *p++ = tag;
    p = put_varint(p, len);
    memcpy(p, s, len);
    return p + len;
}

Crescent__Master__BufHandle__BufStatus cr_rpc_buf_status(enum cr_replica_status s) {
    if (s == CR_REPLICA_COMPLETE) return CRESCENT__MASTER__BUF_HANDLE__BUF_STATUS__COMPLETE;
    if (s == CR_REPLICA_FAILED) return CRESCENT__MASTER__BUF_HANDLE__BUF_STATUS__FAILED;
    return CRESCENT__MASTER__BUF_HANDLE__BUF_STATUS__INIT;
}

/* One replica's sizes, computed once and used to write it. */
struct replica_sizes {
    size_t name_len, endpoint_len;
    size_t handle_len; /* BufHandle body */
    size_t info_len;   /* ReplicaInfo body */
    size_t path_len, owner_len;  /* disk, local_disk */
    uint64_t owner_first, owner_second;
};

static size_t str_field_len(size_t n) { return 1 + varint_len(n) + n; }

/* A disk or local_disk replica: status, medium and where it is; no handle. */
static void replica_measure_elsewhere(const struct cr_store_replica_desc *d,
                                      struct replica_sizes *z) {
    z->info_len = 1 + varint_len((uint32_t)d->status) + 1 + 1 + 1 + varint_len(d->size);
    if (d->medium == CR_MEDIUM_DISK) {
        z->path_len = strlen(d->file_path);
        z->info_len += str_field_len(z->path_len);
        return;
    }
    z->name_len = strlen(d->segment_name);
    z->endpoint_len = d->endpoint != NULL ? strlen(d->endpoint) : 0;
    z->owner_first = z->owner_second = 0;
    for (int i = 0; i < 8; i++) {
        z->owner_first = z->owner_first << 8 | d->owner.b[i];
        z->owner_second = z->owner_second << 8 | d->owner.b[8 + i];
    }
    z->owner_len = 1 + varint_len(z->owner_first) + 1 + varint_len(z->owner_second);
    z->info_len += str_field_len(z->endpoint_len) + str_field_len(z->name_len) + 1 +
                   varint_len(d->buffer) + str_field_len(z->owner_len);
    if (d->has_cap) z->info_len += str_field_len(sizeof(d->cap));
}

static uint8_t *replica_write_elsewhere(const struct cr_store_replica_desc *d,
                                        const struct replica_sizes *z, uint8_t *p) {
    *p++ = TAG_INFO_STATUS;
    p = put_varint(p, (uint32_t)d->status);
    *p++ = TAG_INFO_MEDIUM;
    *p++ = (uint8_t)d->medium;
    if (d->medium == CR_MEDIUM_DISK) {
        p = put_str(p, TAG_INFO_FILE_PATH, d->file_path, z->path_len);
    } else {
        p = put_str(p, TAG_INFO_ENDPOINT, d->endpoint != NULL ? d->endpoint : "",
                    z->endpoint_len);
        p = put_str(p, TAG_INFO_SEGMENT, d->segment_name, z->name_len);
    }
    *p++ = TAG_INFO_OBJECT_SIZE;
    p = put_varint(p, d->size);
    if (d->medium == CR_MEDIUM_LOCAL_DISK) {
        *p++ = TAG_INFO_POSITION;
        p = put_varint(p, d->buffer);
        *p++ = TAG_INFO_OWNER;
        p = put_varint(p, z->owner_len);
        *p++ = TAG_UUID_FIRST;
        p = put_varint(p, z->owner_first);
        *p++ = TAG_UUID_SECOND;
        p = put_varint(p, z->owner_second);
        if (d->has_cap)
            p = put_str(p, TAG_INFO_CAPABILITY, (const char *)d->cap, sizeof(d->cap));
    }
    return p;
}

static void replica_measure(const struct cr_store_replica_desc *d, struct replica_sizes *z) {
    if (d->medium != CR_MEDIUM_MEMORY) return replica_measure_elsewhere(d, z);
    z->name_len = strlen(d->segment_name);
    z->endpoint_len = d->endpoint != NULL ? strlen(d->endpoint) : 0;
    z->handle_len = 1 + varint_len(z->name_len) + z->name_len + 1 + varint_len(d->size) + 1 +
                    varint_len(d->buffer) + 1 + varint_len(cr_rpc_buf_status(d->status));
    if (d->endpoint != NULL) z->handle_len += 1 + varint_len(z->endpoint_len) + z->endpoint_len;
    if (d->has_cap) z->handle_len += str_field_len(sizeof(d->cap));
    z->info_len = 1 + varint_len(z->handle_len) + z->handle_len + 1 +
                  varint_len((uint32_t)d->status);
}

size_t cr_rpc_pack_ok_response(int exists, uint8_t out[4]) {
    assert(exists >= -1 && exists <= 1);
    out[0] = TAG_RESP_STATUS_CODE;
    out[1] = 0;
    if (exists < 0) return 2;
    out[2] = TAG_EXIST_EXISTS;
    out[3] = (uint8_t)exists;
    return 4;
}

/* The body of a successful replica-list response: its length, with each
 * replica's sizes left in `sizes` for replica_body_write. */
static size_t replica_body_measure(const struct cr_store_replica_list *list,
                                   struct replica_sizes sizes[CR_STORE_REPLICAS_MAX]) {
    assert(list->count <= CR_STORE_REPLICAS_MAX);
    size_t total = 2; /* status_code 0: its tag and a one-byte varint */
    for (uint32_t i = 0; i < list->count; i++) {
        assert(list->replicas[i].segment_name != NULL);
        replica_measure(&list->replicas[i], &sizes[i]);
        total += 1 + varint_len(sizes[i].info_len) + sizes[i].info_len;
    }
    if (list->has_checksum) total += 1 + 8;
    if (list->lease_ms > 0) total += 1 + varint_len(list->lease_ms);
    return total;
}

static uint8_t *replica_body_write(const struct cr_store_replica_list *list,
                                   const struct replica_sizes sizes[CR_STORE_REPLICAS_MAX],
                                   uint8_t *p) {
    *p++ = TAG_RESP_STATUS_CODE;
    *p++ = 0;
    for (uint32_t i = 0; i < list->count; i++) {
        const struct cr_store_replica_desc *d = &list->replicas[i];
        const struct replica_sizes *z = &sizes[i];
        *p++ = TAG_RESP_REPLICA_LIST;
        p = put_varint(p, z->info_len);
        if (d->medium != CR_MEDIUM_MEMORY) {
            p = replica_write_elsewhere(d, z, p);
            continue;
        }
        *p++ = TAG_INFO_HANDLES;
        p = put_varint(p, z->handle_len);
        p = put_str(p, TAG_HANDLE_SEGMENT_NAME, d->segment_name, z->name_len);
        *p++ = TAG_HANDLE_SIZE;
        p = put_varint(p, d->size);
        *p++ = TAG_HANDLE_BUFFER;
        p = put_varint(p, d->buffer);
        *p++ = TAG_HANDLE_STATUS;
        p = put_varint(p, cr_rpc_buf_status(d->status));
        if (d->endpoint != NULL) p = put_str(p, TAG_HANDLE_ENDPOINT, d->endpoint, z->endpoint_len);
        if (d->has_cap)
            p = put_str(p, TAG_HANDLE_CAPABILITY, (const char *)d->cap, sizeof(d->cap));
        *p++ = TAG_INFO_STATUS;
        p = put_varint(p, (uint32_t)d->status);
    }
    if (list->has_checksum) { /* fixed64: little-endian, as protobuf-c writes it */
        *p++ = TAG_RESP_CHECKSUM;
        for (int b = 0; b < 8; b++) *p++ = (uint8_t)(list->checksum >> (8 * b));
    }
    if (list->lease_ms > 0) {
        *p++ = TAG_RESP_LEASE;
        p = put_varint(p, list->lease_ms);
    }
    return p;
}

size_t cr_rpc_pack_replica_response(const struct cr_store_replica_list *list, uint8_t *out,
                                    size_t cap) {
    assert(list != NULL && out != NULL);
    struct replica_sizes sizes[CR_STORE_REPLICAS_MAX];
    size_t total = replica_body_measure(list, sizes);
    if (total > cap) return 0;
    uint8_t *end = replica_body_write(list, sizes, out);
    assert((size_t)(end - out) == total);
    (void)end;
    return total;
}

/* ------------------------------------------------------------------------ */
/* Batch responses */

/* Makes room for `more` bytes; false (and the writer failed) when it cannot. */
static bool batch_reserve(struct cr_rpc_batch_writer *w, size_t more) {
    if (w->failed) return false;
    if (w->cap - w->len >= more) return true;
    size_t cap = w->cap * 2;
    while (cap - w->len < more) cap *= 2;
    bool heap = w->buf != w->inline_buf;
    uint8_t *b = heap ? realloc(w->buf, cap) : malloc(cap);
    if (b == NULL) { /* w->buf stays valid: the caller frees it */
        w->failed = true;
        return false;
    }
    if (!heap) memcpy(b, w->buf, w->len);
    w->buf = b;
    w->cap = cap;
    return true;
}

void cr_rpc_batch_begin(struct cr_rpc_batch_writer *w, uint8_t *inline_buf, size_t inline_cap,
                        size_t expect) {
    assert(w != NULL && inline_buf != NULL && inline_cap >= 2);
    *w = (struct cr_rpc_batch_writer){.buf = inline_buf, .inline_buf = inline_buf,
                                      .cap = inline_cap};
    if (!batch_reserve(w, expect > 2 ? expect : 2)) return;
    w->buf[w->len++] = TAG_RESP_STATUS_CODE; /* BatchXResponse.status_code 0 */
    w->buf[w->len++] = 0;
}

void cr_rpc_batch_add_replicas(struct cr_rpc_batch_writer *w,
                               const struct cr_store_replica_list *list) {
    assert(w != NULL && list != NULL);
    struct replica_sizes sizes[CR_STORE_REPLICAS_MAX];
    size_t body = replica_body_measure(list, sizes);
    if (!batch_reserve(w, 1 + 10 + body)) return;
    uint8_t *p = w->buf + w->len;
    *p++ = TAG_RESP_REPLICA_LIST; /* BatchXResponse.responses: field 2, as replica_list */
    p = put_varint(p, body);
    uint8_t *start = p;
    p = replica_body_write(list, sizes, p);
    assert((size_t)(p - start) == body);
    (void)start;
    w->len = (size_t)(p - w->buf);
    assert(w->len <= w->cap);
}

void cr_rpc_batch_add_refusal(struct cr_rpc_batch_writer *w, int32_t status, const char *why) {
    assert(w != NULL && status != 0);
    uint64_t code = (uint64_t)(int64_t)status; /* int32: negative is 10 bytes */
    size_t why_len = why != NULL ? strlen(why) : 0;
    size_t body = 1 + varint_len(code);
    if (why_len > 0) body += 1 + varint_len(why_len) + why_len;
    if (!batch_reserve(w, 1 + 10 + body)) return;
    uint8_t *p = w->buf + w->len;
    *p++ = TAG_RESP_REPLICA_LIST; /* the entry: field 2 */
    p = put_varint(p, body);
    *p++ = TAG_RESP_STATUS_CODE;
    p = put_varint(p, code);
    if (why_len > 0) p = put_str(p, TAG_RESP_ERROR_MESSAGE, why, why_len);
    w->len = (size_t)(p - w->buf);
    assert(w->len <= w->cap);
}

void cr_rpc_batch_add_code(struct cr_rpc_batch_writer *w, int32_t code) {
    assert(w != NULL);
    if (!batch_reserve(w, CR_RPC_BATCH_CODE_MAX)) return;
    uint8_t *p = w->buf + w->len;
    *p++ = TAG_BATCH_STATUS_CODES;
    p = put_varint(p, (uint64_t)(int64_t)code);
    w->len = (size_t)(p - w->buf);
    assert(w->len <= w->cap);
}
