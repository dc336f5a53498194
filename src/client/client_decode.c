/* libcrescent's hand-written decoder of the replies that carry one replica
 * list per key, BatchGetReplicaListResponse and BatchPutStartResponse: from
 * the reply bytes straight into the caller's cr_replica_lists.  protobuf-c's
 * unpack and the copy out of it took some ten mallocs and frees per key and
 * a descriptor walk per field; with 64 callers of 32-key batches on 2 cores
 * that decoding, not crescentd, capped BatchGetReplicaList (bench/RESULTS.md).
 * Each object takes one allocation (cr_client_list_block_alloc, the layout
 * cr_client_replica_list_free frees), sized by a first walk over its bytes.
 *
 * It accepts what protobuf-c accepts of these messages as crescentd writes
 * them: every required field must be there (but for those with a default
 * value, as protobuf-c: the two statuses), unknown fields are skipped, a
 * known field of another wire type is refused, a repeated scalar takes its
 * last value.  tests/unit/test_client_decode.c compares the two on random
 * replies; tests/fuzz/fuzz_client_decode.c gives it arbitrary bytes. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "client/client_internal.h"

enum { WIRE_VARINT = 0, WIRE_I64 = 1, WIRE_LEN = 2 };

/* Field numbers, shared by GetReplicaListResponse and PutStartResponse (the
 * latter has no checksum and lease: as unknown fields they are skipped). */
enum {
    F_STATUS = 1,   /* every response: required int32 status_code */
    F_ITEMS = 2,    /* Batch*: responses; entry: replica_list */
    F_CHECKSUM = 3, /* GetReplicaListResponse: optional fixed64 checksum_xxh3 */
    F_LEASE = 4,    /* GetReplicaListResponse: optional uint64 lease_ttl_ms */
    F_ERROR = 15,   /* every response: optional string error_message */
};
enum { /* ReplicaInfo */
    R_HANDLES = 1, R_STATUS = 2, R_MEDIUM = 3, R_FILE_PATH = 4, R_ENDPOINT = 5,
    R_SEGMENT = 6, R_OBJECT_SIZE = 7, R_POSITION = 8, R_OWNER = 9, R_CAP = 10,
};
enum { H_NAME = 1, H_SIZE = 2, H_BUFFER = 3, H_STATUS = 4, H_ENDPOINT = 5, H_CAP = 6 }; /* BufHandle */

struct wire {
    const uint8_t *p;
    size_t len, pos;
};

struct field {
    uint32_t number;
    unsigned type;
    uint64_t varint;    /* WIRE_VARINT, and WIRE_I64 read little-endian */
    struct wire sub;    /* WIRE_LEN: its bytes */
};

static inline __attribute__((always_inline)) bool varint(struct wire *w, uint64_t *v) {
    return cr_pb_read_varint(w->p, w->len, &w->pos, v);
}

/* Reads the next field of `w` with its value.  1: read; 0: end of the
 * message; -1: malformed (truncated, a one-byte tag of field 0, a group or
 * reserved wire type). */
static inline __attribute__((always_inline)) int next_field(struct wire *w,
                                                             struct field *f) {
    if (w->pos == w->len) return 0;
    uint64_t tag;
    size_t at = w->pos;
    /* As protobuf-c 1.4: a tag of at most 5 bytes whose first byte is not
     * 0..7 (field number 0 in one byte), its field number cut to 32 bits (a
     * number past 2^29, or 0 in a longer tag, is just an unknown field). */
    if ((w->p[at] & 0xf8) == 0 || !varint(w, &tag) || w->pos - at > 5) return -1;
    f->number = (uint32_t)(tag >> 3);
    f->type = (unsigned)(tag & 7);
    if (f->type == WIRE_VARINT) return varint(w, &f->varint) ? 1 : -1;
    if (f->type == WIRE_I64) {
        if (w->len - w->pos < 8) return -1;
        f->varint = 0;
        for (unsigned i = 0; i < 8; i++) f->varint |= (uint64_t)w->p[w->pos + i] << (8 * i);
        w->pos += 8;
        return 1;
    }
    if (f->type == WIRE_LEN) {
        /* As protobuf-c 1.4 reads a length: at most 5 bytes (a longer one
         * refuses the reply even when its value is small). */
        uint64_t n;
        size_t at_len = w->pos;
        if (!varint(w, &n) || w->pos - at_len > 5) return -1;
        if (n > w->len - w->pos) return -1;
        f->sub = (struct wire){.p = w->p + w->pos, .len = (size_t)n, .pos = 0};
        w->pos += (size_t)n;
        return 1;
    }
    return cr_client_skip_value(w->p, w->len, &w->pos, f->type) ? 1 : -1;
}

/* protobuf-c reads an int32 or enum varint as its low 32 bits. */
static int32_t as_int32(uint64_t v) { return (int32_t)(uint32_t)v; }

/* What one object's block holds, counted by the first walk over its bytes. */
struct sizes {
    size_t replicas, handles, string_bytes;
};

/* Walks a BufHandle: checks it, and fills `out` when not NULL (its strings
 * go to *strings; the last of a repeated field wins, as in protobuf-c). */
static bool handle_walk(struct wire w, struct sizes *sz, struct cr_buf_handle *out,
                        char **strings) {
    unsigned seen = 0;
    struct field f = {0};
    int more;
    if (out != NULL) {
        out->transport_endpoint = NULL;
        out->status = CR_BUF_INIT; /* required, but with a default: may be absent */
        out->has_capability = false;
    }
    while ((more = next_field(&w, &f)) == 1) {
        if (f.number == H_CAP) {
            /* Bytes of any length parse, as in protobuf-c; only 48 make a
             * capability (one of another length is none, as the protobuf-c
             * path's copy has it: cr_client_replicas_from_pb). */
            if (f.type != WIRE_LEN) return false;
            if (out != NULL) {
                out->has_capability = f.sub.len == CR_CLIENT_CAPABILITY_BYTES;
                if (out->has_capability)
                    memcpy(out->capability, f.sub.p, CR_CLIENT_CAPABILITY_BYTES);
            }
            continue;
        }
        bool string = f.number == H_NAME || f.number == H_ENDPOINT;
        bool scalar = f.number == H_SIZE || f.number == H_BUFFER || f.number == H_STATUS;
        if ((string && f.type != WIRE_LEN) || (scalar && f.type != WIRE_VARINT)) return false;
        if (f.number >= H_NAME && f.number <= H_BUFFER) seen |= 1u << f.number;
        if (string) {
            sz->string_bytes += f.sub.len + 1;
            if (out == NULL) continue;
            char *s = *strings;
            memcpy(s, f.sub.p, f.sub.len);
            s[f.sub.len] = '\0';
            *strings += f.sub.len + 1;
            if (f.number == H_NAME) out->segment_name = s;
            else out->transport_endpoint = s;
        } else if (out != NULL && f.number == H_SIZE) {
            out->size_bytes = f.varint;
        } else if (out != NULL && f.number == H_BUFFER) {
            out->buffer = f.varint;
        } else if (out != NULL && f.number == H_STATUS) {
            out->status = (enum cr_buf_status)as_int32(f.varint);
        }
    }
    if (more < 0 || seen != (1u << H_NAME | 1u << H_SIZE | 1u << H_BUFFER)) return false;
    if (out == NULL) {
        sz->string_bytes += 1; /* room for "" when the endpoint is absent */
    } else if (out->transport_endpoint == NULL) {
        out->transport_endpoint = *strings;
        *(*strings)++ = '\0';
    }
    return true;
}

/* A ReplicaInfo string field (file_path, endpoint, segment_name): counted,
 * or copied to *strings with *dst pointing at it. */
static void replica_string(const struct field *f, struct sizes *sz, char **dst, char **strings) {
    sz->string_bytes += f->sub.len + 1;
    if (dst == NULL) return;
    char *s = *strings;
    memcpy(s, f->sub.p, f->sub.len);
    s[f->sub.len] = '\0';
    *strings += f->sub.len + 1;
    *dst = s;
}

/* ReplicaInfo.owner, a UUID: not kept, but checked as protobuf-c checks it
 * (both required uint64 fields present, as varints), so that both decoders
 * refuse the same replies. */
static bool owner_valid(struct wire w) {
    unsigned seen = 0;
    struct field f = {0};
    int more;
    while ((more = next_field(&w, &f)) == 1) {
        if (f.number != 1 && f.number != 2) continue;
        if (f.type != WIRE_VARINT) return false;
        seen |= 1u << f.number;
    }
    return more == 0 && seen == (1u << 1 | 1u << 2);
}

/* The replica's three strings start as "" (three bytes of its block). */
#define REPLICA_DEFAULT_STRING_BYTES 3u

/* Walks a ReplicaInfo: counts its handles (out NULL) or fills `out`, its
 * handles from *handles on. */
static bool replica_walk(struct wire w, struct sizes *sz, struct cr_replica *out,
                         struct cr_buf_handle **handles, char **strings) {
    struct field f = {0};
    int more;
    sz->string_bytes += REPLICA_DEFAULT_STRING_BYTES;
    if (out != NULL) {
        out->status = CR_REPLICA_UNDEFINED; /* required with a default, as above */
        out->handle_count = 0;
        out->handles = NULL;
        out->medium = CR_MEDIUM_MEMORY;
        out->object_size = out->position = 0;
        out->has_capability = false;
        char *empty = *strings;
        memset(empty, 0, REPLICA_DEFAULT_STRING_BYTES);
        *strings += REPLICA_DEFAULT_STRING_BYTES;
        out->file_path = empty;
        out->endpoint = empty + 1;
        out->segment_name = empty + 2;
    }
    while ((more = next_field(&w, &f)) == 1) {
        bool string = f.number == R_FILE_PATH || f.number == R_ENDPOINT || f.number == R_SEGMENT;
        bool scalar = f.number == R_STATUS || f.number == R_MEDIUM ||
                      f.number == R_OBJECT_SIZE || f.number == R_POSITION;
        if ((string && f.type != WIRE_LEN) || (scalar && f.type != WIRE_VARINT)) return false;
        if (f.number == R_OWNER) {
            if (f.type != WIRE_LEN || !owner_valid(f.sub)) return false;
        } else if (f.number == R_CAP) {
            /* As a handle's: bytes of any length parse, only 48 make one. */
            if (f.type != WIRE_LEN) return false;
            if (out != NULL) {
                out->has_capability = f.sub.len == CR_CLIENT_CAPABILITY_BYTES;
                if (out->has_capability)
                    memcpy(out->capability, f.sub.p, CR_CLIENT_CAPABILITY_BYTES);
            }
        } else if (f.number == R_HANDLES) {
            if (f.type != WIRE_LEN) return false;
            sz->handles++;
            struct cr_buf_handle *h = out != NULL ? (*handles)++ : NULL;
            if (!handle_walk(f.sub, sz, h, strings)) return false;
            if (out != NULL && out->handle_count++ == 0) out->handles = h;
        } else if (string) {
            char **dst = out == NULL ? NULL
                         : f.number == R_FILE_PATH ? &out->file_path
                         : f.number == R_ENDPOINT  ? &out->endpoint
                                                   : &out->segment_name;
            replica_string(&f, sz, dst, strings);
        } else if (out == NULL) {
            continue;
        } else if (f.number == R_STATUS) {
            out->status = (enum cr_replica_status)as_int32(f.varint);
        } else if (f.number == R_MEDIUM) {
            out->medium = (enum cr_replica_medium)as_int32(f.varint);
        } else if (f.number == R_OBJECT_SIZE) {
            out->object_size = f.varint;
        } else if (f.number == R_POSITION) {
            out->position = f.varint;
        }
    }
    return more == 0;
}

/* Walks one GetReplicaListResponse or PutStartResponse (`extras`: the
 * former's checksum and lease are read).  Sizes its block when `out` is
 * NULL; else fills `out` from the block `b`, sized by that first walk. */
static bool entry_walk(struct wire w, bool extras, struct sizes *sz, struct cr_replica_list *out,
                       struct cr_client_list_block *b) {
    bool has_status = false;
    struct field f = {0};
    int more;
    while ((more = next_field(&w, &f)) == 1) {
        if (f.number == F_STATUS) {
            if (f.type != WIRE_VARINT) return false;
            has_status = true;
            if (out != NULL) out->status = as_int32(f.varint);
        } else if (f.number == F_ITEMS) {
            if (f.type != WIRE_LEN) return false;
            struct cr_replica *r = out != NULL ? &b->replicas[sz->replicas] : NULL;
            sz->replicas++;
            if (!replica_walk(f.sub, sz, r, out != NULL ? &b->handles : NULL,
                              out != NULL ? &b->strings : NULL))
                return false;
        } else if (f.number == F_ERROR) {
            if (f.type != WIRE_LEN) return false;
        } else if (extras && f.number == F_CHECKSUM) {
            if (f.type != WIRE_I64) return false;
            if (out != NULL) {
                out->has_checksum = true;
                out->checksum_xxh3 = f.varint;
            }
        } else if (extras && f.number == F_LEASE) {
            if (f.type != WIRE_VARINT) return false;
            if (out != NULL) out->lease_ttl_ms = f.varint;
        }
    }
    return more == 0 && has_status;
}

/* Decodes one entry into `out` (zeroed): sizes it, allocates its block,
 * fills it.  CR_OK, CR_ERR_PROTOCOL or CR_ERR_NOMEM (nothing held). */
static int entry_decode(struct wire w, bool extras, struct cr_replica_list *out) {
    struct sizes sz = {0};
    if (!entry_walk(w, extras, &sz, NULL, NULL)) return CR_ERR_PROTOCOL;
    struct cr_client_list_block b;
    if (cr_client_list_block_alloc(sz.replicas, sz.handles, sz.string_bytes, &b) != CR_OK)
        return CR_ERR_NOMEM;
    struct cr_replica *replicas = b.replicas;
    struct sizes filled = {0};
    bool ok = entry_walk(w, extras, &filled, out, &b);
    assert(ok && filled.replicas == sz.replicas && filled.handles == sz.handles);
    (void)ok;
    out->replicas = replicas;
    out->count = sz.replicas;
    return CR_OK;
}

int cr_client_decode_replica_lists(const uint8_t *body, size_t len, bool extras,
                                   struct cr_client_top *top, struct cr_replica_lists *out) {
    assert((body != NULL || len == 0) && top != NULL && out != NULL);
    memset(top, 0, sizeof(*top));
    memset(out, 0, sizeof(*out));
    struct wire w = {.p = body, .len = len, .pos = 0};
    struct field f = {0};
    int more;
    bool has_status = false;
    size_t entries = 0;
    while ((more = next_field(&w, &f)) == 1) {
        if (f.number == F_STATUS) {
            if (f.type != WIRE_VARINT) return CR_ERR_PROTOCOL;
            has_status = true;
            top->status_code = as_int32(f.varint);
        } else if (f.number == F_ITEMS) {
            if (f.type != WIRE_LEN) return CR_ERR_PROTOCOL;
            entries++;
        } else if (f.number == F_ERROR) {
            if (f.type != WIRE_LEN) return CR_ERR_PROTOCOL;
            top->error = (const char *)f.sub.p;
            top->error_len = f.sub.len;
        }
    }
    if (more < 0 || !has_status) return CR_ERR_PROTOCOL;
    if (entries == 0) return CR_OK;
    out->lists = calloc(entries, sizeof(*out->lists));
    if (out->lists == NULL) return CR_ERR_NOMEM;
    w.pos = 0;
    while (next_field(&w, &f) == 1) {
        if (f.number != F_ITEMS) continue;
        int rc = entry_decode(f.sub, extras, &out->lists[out->count]);
        if (rc != CR_OK) {
            cr_client_replica_lists_free(out);
            return rc;
        }
        out->count++;
    }
    assert(out->count == entries);
    return CR_OK;
}
