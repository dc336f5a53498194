/* Mooncake results from crescent's answers: see mc_calls.h (cr_mc_answer*)
 * and docs/mooncake.md ("Mapping onto crescent's store"). */
#include <assert.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "crescent/error.h"
#include "mooncake/mc_internal.h"

/* ------------------------------------------------------------------------ */
/* Results */

int32_t cr_mc_error_code(int32_t s) {
    switch (s) {
    case CR_OK: return CR_MC_OK;
    case CR_ERR_OBJECT_NOT_READY: return CR_MC_REPLICA_IS_NOT_READY; /* crescent -707 */
    case CR_ERR_CHECKSUM: return CR_MC_CHECKSUM_MISMATCH;
    case CR_ERR_LEASE_EXPIRED: return CR_MC_LEASE_EXPIRED;
    case CR_ERR_TIMEOUT:
    case CR_ERR_AGAIN:
    case CR_ERR_SHUTDOWN: return CR_MC_RPC_FAIL;
    default:
        /* crescent keeps the reference's codes (-10 and below); its own
         * transport codes (-1 .. -8) are not Mooncake's. */
        return s <= -10 ? s : CR_MC_INTERNAL_ERROR;
    }
}

struct ans {
    const struct cr_mc_fn *fn;
    const ProtobufCMessage *pb; /* NULL: every entry is `code` */
    int32_t code;
    uint32_t entries;
    const struct cr_mc_state *st;
};

static void put_err(struct cr_sp_writer *w, int32_t code) {
    cr_sp_put_u8(w, 0);
    cr_sp_put_u32(w, (uint32_t)code);
}

static bool is_medium(const Crescent__Master__ReplicaInfo *r,
                      Crescent__Master__ReplicaInfo__Medium m) {
    return (r->has_medium ? r->medium : CRESCENT__MASTER__REPLICA_INFO__MEDIUM__MEMORY) == m;
}

/* Replicas Mooncake can describe: a memory replica with one buffer (a
 * Mooncake put is one slice; a crescent object of several slices has no
 * Mooncake descriptor), and every disk and local_disk replica. */
static bool describable_one(const Crescent__Master__ReplicaInfo *r) {
    if (is_medium(r, CRESCENT__MASTER__REPLICA_INFO__MEDIUM__DISK) ||
        is_medium(r, CRESCENT__MASTER__REPLICA_INFO__MEDIUM__LOCAL_DISK))
        return true;
    return is_medium(r, CRESCENT__MASTER__REPLICA_INFO__MEDIUM__MEMORY) && r->n_handles == 1;
}

static size_t describable(size_t n, Crescent__Master__ReplicaInfo *const *list) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += describable_one(list[i]);
    return k;
}

static void put_cstr(struct cr_sp_writer *w, const char *s) {
    if (s == NULL) s = "";
    cr_sp_put_str(w, s, strlen(s));
}

/* Replica::Descriptor's variant, alternatives 2 and 3 (replica.h at the
 * pinned commit): DiskDescriptor{string file_path, u64 object_size} and
 * LocalDiskDescriptor{UUID client_id, u64 object_size, string
 * transport_endpoint}; a UUID is its two u64 halves, raw. */
static void put_elsewhere(struct cr_sp_writer *w, const Crescent__Master__ReplicaInfo *r) {
    uint64_t size = r->has_object_size ? r->object_size : 0;
    if (is_medium(r, CRESCENT__MASTER__REPLICA_INFO__MEDIUM__DISK)) {
        cr_sp_put_u8(w, 2);
        put_cstr(w, r->file_path);
        cr_sp_put_u64(w, size);
        return;
    }
    cr_sp_put_u8(w, 3);
    cr_sp_put_u64(w, r->owner != NULL ? r->owner->first : 0);
    cr_sp_put_u64(w, r->owner != NULL ? r->owner->second : 0);
    cr_sp_put_u64(w, size);
    put_cstr(w, r->endpoint);
}

static void put_descs(struct cr_sp_writer *w, const struct cr_mc_state *st, size_t n,
                      Crescent__Master__ReplicaInfo *const *list) {
    cr_sp_put_len(w, describable(n, list));
    for (size_t i = 0; i < n; i++) {
        if (!describable_one(list[i])) continue;
        /* crescent has no replica ids: the position, from 1, as Mooncake's
         * ids start at 1. */
        cr_sp_put_u64(w, i + 1);
        if (list[i]->n_handles != 1) {
            put_elsewhere(w, list[i]);
        } else {
            const Crescent__Master__BufHandle *h = list[i]->handles[0];
            cr_sp_put_u8(w, 0); /* variant alternative 0: MemoryDescriptor */
            cr_sp_put_u64(w, h->size);
            cr_sp_put_u64(w, h->buffer);
            const char *proto = cr_mc_protocol_of(st, h->segment_name);
            cr_sp_put_str(w, proto, strlen(proto));
            const char *ep = h->transport_endpoint != NULL && h->transport_endpoint[0] != '\0'
                                 ? h->transport_endpoint : h->segment_name;
            cr_sp_put_str(w, ep, strlen(ep));
        }
        /* ReplicaStatus: the same numbering on both sides (UNDEFINED 0 ..
         * FAILED 5). */
        cr_sp_put_u32(w, (uint32_t)list[i]->status);
    }
}

/* expected<vector<Descriptor>>, from one PutStart response. */
static void put_put_start(struct cr_sp_writer *w, const struct cr_mc_state *st,
                          const Crescent__Master__PutStartResponse *r) {
    if (r->status_code != 0) return put_err(w, cr_mc_error_code(r->status_code));
    cr_sp_put_u8(w, 1);
    put_descs(w, st, r->n_replica_list, r->replica_list);
}

static void put_grlr(struct cr_sp_writer *w, const struct cr_mc_state *st,
                     const Crescent__Master__GetReplicaListResponse *r) {
    if (r->status_code != 0) return put_err(w, cr_mc_error_code(r->status_code));
    if (r->n_replica_list > 0 && describable(r->n_replica_list, r->replica_list) == 0)
        return put_err(w, CR_MC_INVALID_REPLICA);
    cr_sp_put_u8(w, 1);
    put_descs(w, st, r->n_replica_list, r->replica_list);
    cr_sp_put_u64(w, r->has_lease_ttl_ms ? r->lease_ttl_ms : 0);
    cr_sp_put_u8(w, r->has_checksum_xxh3);
    if (r->has_checksum_xxh3) cr_sp_put_u64(w, r->checksum_xxh3);
}

static void put_codes(struct cr_sp_writer *w, const struct ans *a, bool as_bool) {
    const Crescent__Master__BatchRemoveResponse *r = (const void *)a->pb;
    /* Batch*Response with status_codes share this layout (field 1 and 2). */
    bool whole = r->status_code != 0 && r->n_status_codes == 0;
    size_t n = whole ? a->entries : r->n_status_codes;
    cr_sp_put_len(w, n);
    for (size_t i = 0; i < n; i++) {
        int32_t c = whole ? r->status_code : r->status_codes[i];
        if (as_bool && (c == CR_OK || c == CR_ERR_OBJECT_NOT_FOUND ||
                        c == CR_ERR_OBJECT_NOT_READY)) {
            cr_sp_put_u8(w, 1);
            cr_sp_put_u8(w, c == CR_OK);
        } else if (c == CR_OK) {
            cr_sp_put_u8(w, 1);
        } else {
            put_err(w, cr_mc_error_code(c));
        }
    }
}

static void put_map(struct cr_sp_writer *w, const struct cr_mc_state *st,
                    const Crescent__Master__GetReplicaListByRegexResponse *r) {
    if (r->status_code != 0) return put_err(w, cr_mc_error_code(r->status_code));
    cr_sp_put_u8(w, 1);
    cr_sp_put_len(w, r->n_object_map);
    for (size_t i = 0; i < r->n_object_map; i++) {
        const Crescent__Master__GetReplicaListByRegexResponse__ObjectMapEntry *e =
            r->object_map[i];
        const char *key = e->key != NULL ? e->key : ""; /* a map entry's key is optional */
        cr_sp_put_str(w, key, strlen(key));
        if (e->value == NULL) cr_sp_put_len(w, 0);
        else put_descs(w, st, e->value->n_replica_list, e->value->replica_list);
    }
}

/* Every entry of fn's result is error `code`. */
static void fill_error(struct cr_sp_writer *w, const struct ans *a) {
    switch (a->fn->shape) {
    case R_PLAIN_LONG: cr_sp_put_u64(w, 0); return; /* RemoveAll has no error: 0 removed */
    case R_VEC_DESCS:
    case R_VEC_VOID:
    case R_VEC_BOOL:
    case R_VEC_GRLR:
        cr_sp_put_len(w, a->entries);
        for (uint32_t i = 0; i < a->entries; i++) put_err(w, a->code);
        return;
    default: put_err(w, a->code);
    }
}

static void fill_local(struct cr_sp_writer *w, const struct ans *a) {
    cr_sp_put_u8(w, 1);
    switch (a->fn->shape) {
    case R_STRING: /* ServiceReady: the version; GetFsdir: no storage dir */
        if (a->fn == &cr_mc_fns[FN_SERVICE_READY])
            cr_sp_put_str(w, CR_MC_STORE_VERSION, strlen(CR_MC_STORE_VERSION));
        else
            cr_sp_put_len(w, 0);
        return;
    case R_STORAGE: /* no storage dir, disk eviction on, no quota: the reference's defaults */
        cr_sp_put_len(w, 0);
        cr_sp_put_u8(w, 1);
        cr_sp_put_u64(w, 0);
        return;
    case R_TASKS: cr_sp_put_len(w, 0); return;
    case R_VOID: return;
    default: assert(!"only these are answered locally");
    }
}

static void fill(struct cr_sp_writer *w, const void *ctx) {
    const struct ans *a = ctx;
    if (a->pb == NULL) return a->code == CR_MC_OK ? fill_local(w, a) : fill_error(w, a);
    const ProtobufCMessage *pb = a->pb;
    switch (a->fn->shape) {
    case R_PING: {
        const Crescent__Master__PingResponse *r = (const void *)pb;
        if (r->status_code != 0) return put_err(w, cr_mc_error_code(r->status_code));
        cr_sp_put_u8(w, 1);
        cr_sp_put_u64(w, 0); /* view_version_id: crescent has one master, no views */
        /* ClientStatus OK (1), or NEED_REMOUNT (2) for a client crescent does
         * not know: Mooncake's client then remounts its segments. */
        cr_sp_put_u32(w, r->has_client_known && !r->client_known ? 2 : 1);
        return;
    }
    case R_VOID: {
        /* Every crescent response starts with status_code (field 1). */
        const Crescent__Master__RemoveResponse *r = (const void *)pb;
        if (r->status_code != 0) return put_err(w, cr_mc_error_code(r->status_code));
        return cr_sp_put_u8(w, 1);
    }
    case R_DESCS: return put_put_start(w, a->st, (const void *)pb);
    case R_VEC_DESCS: {
        const Crescent__Master__BatchPutStartResponse *r = (const void *)pb;
        if (r->n_responses == 0 && r->status_code != 0)
            return fill_error(w, &(struct ans){a->fn, NULL, cr_mc_error_code(r->status_code),
                                               a->entries, a->st});
        cr_sp_put_len(w, r->n_responses);
        for (size_t i = 0; i < r->n_responses; i++) put_put_start(w, a->st, r->responses[i]);
        return;
    }
    case R_VEC_VOID: return put_codes(w, a, false);
    case R_BOOL: {
        const Crescent__Master__ExistKeyResponse *r = (const void *)pb;
        if (r->status_code != 0) return put_err(w, cr_mc_error_code(r->status_code));
        cr_sp_put_u8(w, 1);
        return cr_sp_put_u8(w, r->has_exists && r->exists);
    }
    case R_VEC_BOOL: return put_codes(w, a, true);
    case R_GRLR: return put_grlr(w, a->st, (const void *)pb);
    case R_VEC_GRLR: {
        const Crescent__Master__BatchGetReplicaListResponse *r = (const void *)pb;
        if (r->n_responses == 0 && r->status_code != 0)
            return fill_error(w, &(struct ans){a->fn, NULL, cr_mc_error_code(r->status_code),
                                               a->entries, a->st});
        cr_sp_put_len(w, r->n_responses);
        for (size_t i = 0; i < r->n_responses; i++) put_grlr(w, a->st, r->responses[i]);
        return;
    }
    case R_MAP: return put_map(w, a->st, (const void *)pb);
    case R_LONG:
    case R_PLAIN_LONG: {
        /* RemoveByRegexResponse and RemoveAllResponse: the same layout. */
        const Crescent__Master__RemoveAllResponse *r = (const void *)pb;
        if (a->fn->shape == R_PLAIN_LONG)
            return cr_sp_put_u64(w, r->status_code == 0 ? (uint64_t)r->removed_count : 0);
        if (r->status_code != 0) return put_err(w, cr_mc_error_code(r->status_code));
        cr_sp_put_u8(w, 1);
        return cr_sp_put_u64(w, (uint64_t)r->removed_count);
    }
    default: assert(!"no such shape from the store");
    }
}

bool cr_mc_answer_local(const struct cr_mc_fn *fn, struct cr_sp_writer *w) {
    struct ans a = {fn, NULL, CR_MC_OK, 0, NULL};
    return cr_sp_write_value(w, &fn->resp, fill, &a);
}

bool cr_mc_answer_error(const struct cr_mc_fn *fn, int32_t code, uint32_t entries,
                        struct cr_sp_writer *w) {
    assert(code != CR_MC_OK);
    struct ans a = {fn, NULL, code, entries, NULL};
    return cr_sp_write_value(w, &fn->resp, fill, &a);
}

static void learn_secret(const struct cr_mc_fn *fn, const ProtobufCMessage *pb,
                         const struct cr_mc_uuid *client, struct cr_mc_state *st) {
    if (client == NULL) return;
    if (fn->shape == R_PING) {
        const Crescent__Master__PingResponse *r = (const void *)pb;
        if (r->has_client_secret) cr_mc_secret_note(st, client, &r->client_secret);
    } else if (fn == &cr_mc_fns[FN_MOUNT] || fn == &cr_mc_fns[FN_REMOUNT]) {
        const Crescent__Master__MountSegmentResponse *r = (const void *)pb;
        if (r->has_client_secret) cr_mc_secret_note(st, client, &r->client_secret);
    }
}

bool cr_mc_answer(const struct cr_mc_fn *fn, int32_t status, const uint8_t *reply, size_t len,
                  uint32_t entries, const struct cr_mc_uuid *client, struct cr_mc_state *st,
                  struct cr_sp_writer *w) {
    assert(fn != NULL && fn->reply_desc != NULL && st != NULL && w != NULL);
    if (status != CR_OK) return cr_mc_answer_error(fn, cr_mc_error_code(status), entries, w);
    ProtobufCMessage *pb = protobuf_c_message_unpack(fn->reply_desc, NULL, len, reply);
    if (pb == NULL) /* crescent's own reply: cannot happen unless out of memory */
        return cr_mc_answer_error(fn, CR_MC_INTERNAL_ERROR, entries, w);
    learn_secret(fn, pb, client, st);
    struct ans a = {fn, pb, CR_MC_OK, entries, st};
    bool ok = cr_sp_write_value(w, &fn->resp, fill, &a);
    protobuf_c_message_free_unpacked(pb, NULL);
    return ok;
}

static void fill_string(struct cr_sp_writer *w, const void *ctx) {
    cr_sp_put_str(w, ctx, strlen(ctx));
}

bool cr_mc_error_body(const char *msg, struct cr_sp_writer *w) {
    /* struct_pack of a std::string: literal 80 0c (scripts/mooncake_wire.py) */
    static const uint8_t literal[] = {0x80, 0x0c};
    static const struct cr_sp_type string_type = {0x9dcffa76u, literal, sizeof(literal)};
    return cr_sp_write_value(w, &string_type, fill_string, msg);
}
