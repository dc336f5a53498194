/* Mooncake requests: struct_pack arguments → crescent's protobuf request
 * (cr_mc_decode, mc_calls.h; the mapping is docs/mooncake.md's). */
#include <assert.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crescent/error.h"
#include "mooncake/mc_internal.h"

#define M(x) CRESCENT__MASTER__METHOD__##x

/* ------------------------------------------------------------------------ */
/* Requests */

/* The reader and a scratch area for the NUL-terminated copies protobuf-c
 * wants: a string's copy takes its length plus one, so twice the body plus
 * a little always suffices. */
struct dec {
    struct cr_sp_reader r;
    char *scratch;
    size_t used, cap;
    struct cr_mc_state *st;
    struct cr_mc_request *req;
};

static char *str(struct dec *d, size_t max) {
    size_t n;
    const uint8_t *p = cr_sp_str(&d->r, max, &n);
    if (d->r.bad || d->cap - d->used < n + 1) {
        d->r.bad = true;
        return (char *)"";
    }
    char *s = d->scratch + d->used;
    memcpy(s, p, n);
    s[n] = '\0';
    if (memchr(s, '\0', n) != NULL) d->r.bad = true; /* protobuf strings end at NUL */
    d->used += n + 1;
    return s;
}

static struct cr_mc_uuid uuid(struct dec *d) {
    struct cr_mc_uuid u = {0, 0};
    const uint8_t *p = cr_sp_raw(&d->r, 16);
    if (p == NULL) return u;
    for (int i = 7; i >= 0; i--) u.first = u.first << 8 | p[i];
    for (int i = 15; i >= 8; i--) u.second = u.second << 8 | p[i];
    return u;
}

/* Packs `msg` into req->body (or a `more` slot). */
static int pack(const ProtobufCMessage *msg, uint8_t **out, size_t *out_len) {
    size_t n = protobuf_c_message_get_packed_size(msg);
    *out = malloc(n > 0 ? n : 1);
    if (*out == NULL) return CR_ERR_NOMEM;
    *out_len = protobuf_c_message_pack(msg, *out);
    return CR_OK;
}

static Crescent__Master__UUID *pb_uuid(Crescent__Master__UUID *slot, const struct cr_mc_uuid *u) {
    crescent__master__uuid__init(slot);
    slot->first = u->first;
    slot->second = u->second;
    return slot;
}

/* The secret crescent issued to the call's client, if any. */
static void attach_secret(const struct dec *d, protobuf_c_boolean *has, ProtobufCBinaryData *out) {
    const struct cr_mc_secret *s = cr_mc_secret_of(d->st, &d->req->client);
    if (s == NULL) return;
    *has = 1;
    out->len = s->len;
    out->data = (uint8_t *)s->bytes;
}

static void set_client(struct dec *d, struct cr_mc_uuid u) {
    d->req->client = u;
    d->req->has_client = true;
}

/* ReplicateConfig: only what crescent's config holds is kept (docs). */
struct rconf {
    uint64_t replica_num;
    bool soft_pin;
    char *preferred;
};

static void read_rconf(struct dec *d, struct rconf *c) {
    c->replica_num = cr_sp_u64(&d->r);
    (void)cr_sp_u64(&d->r); /* nof_replica_num */
    (void)cr_sp_u64(&d->r); /* dfs_replica_num */
    c->soft_pin = cr_sp_u8(&d->r) == 1; /* SoftPinAction::ENABLE */
    if (cr_sp_bool(&d->r)) (void)cr_sp_u64(&d->r); /* soft_pin_ttl_ms */
    (void)cr_sp_bool(&d->r);                       /* with_hard_pin */
    c->preferred = (char *)"";
    size_t n = cr_sp_len(&d->r, CR_MC_BATCH_MAX, 1);
    for (size_t i = 0; i < n; i++) {
        char *s = str(d, CR_MC_NAME_MAX);
        if (i == 0) c->preferred = s;
    }
    char *single = str(d, CR_MC_NAME_MAX); /* deprecated preferred_segment */
    if (c->preferred[0] == '\0') c->preferred = single;
    n = cr_sp_len(&d->r, CR_MC_BATCH_MAX, 1); /* preferred_nof_segments */
    for (size_t i = 0; i < n; i++) (void)str(d, CR_MC_NAME_MAX);
    (void)cr_sp_bool(&d->r);         /* prefer_alloc_in_same_node */
    (void)cr_sp_u8(&d->r);           /* data_type */
    (void)str(d, CR_MC_NAME_MAX);    /* host_id */
    if (cr_sp_bool(&d->r)) {         /* group_ids */
        n = cr_sp_len(&d->r, CR_MC_BATCH_MAX, 1);
        for (size_t i = 0; i < n; i++) (void)str(d, CR_MC_KEY_MAX);
    }
}

static Crescent__Master__ReplicateConfig *pb_rconf(Crescent__Master__ReplicateConfig *slot,
                                                   const struct rconf *c) {
    crescent__master__replicate_config__init(slot);
    slot->has_replica_num = 1;
    slot->replica_num = c->replica_num;
    slot->has_with_soft_pin = 1;
    slot->with_soft_pin = c->soft_pin;
    if (c->preferred[0] != '\0') slot->preferred_segment = c->preferred;
    return slot;
}

static void read_segment(struct dec *d, struct cr_mc_segment *seg,
                         Crescent__Master__MountSegmentRequest *m) {
    crescent__master__mount_segment_request__init(m);
    seg->id = uuid(d);
    char *name = str(d, CR_MC_NAME_MAX);
    m->buffer = cr_sp_u64(&d->r);
    m->size = cr_sp_u64(&d->r);
    m->transport_endpoint = str(d, CR_MC_NAME_MAX);
    m->protocol = str(d, sizeof(seg->protocol) - 1);
    (void)str(d, CR_MC_NAME_MAX); /* host_id */
    m->segment_name = name;
    snprintf(seg->name, sizeof(seg->name), "%s", name);
    snprintf(seg->protocol, sizeof(seg->protocol), "%s", m->protocol);
}

static int dec_mount(struct dec *d, bool remount) {
    size_t n = 1;
    if (remount) n = cr_sp_len(&d->r, 64, 16);
    struct cr_mc_segment *segs = calloc(n > 0 ? n : 1, sizeof(*segs));
    Crescent__Master__MountSegmentRequest *m = calloc(n > 0 ? n : 1, sizeof(*m));
    int rc = segs != NULL && m != NULL ? CR_OK : CR_ERR_NOMEM;
    for (size_t i = 0; rc == CR_OK && i < n; i++) read_segment(d, &segs[i], &m[i]);
    struct cr_mc_uuid client = uuid(d);
    if (rc != CR_OK || !cr_sp_read_done(&d->r)) goto out;
    set_client(d, client);
    Crescent__Master__UUID id;
    d->req->method = remount ? M(REMOUNT_SEGMENT) : M(MOUNT_SEGMENT);
    if (n > 1) {
        d->req->more = calloc(n - 1, sizeof(*d->req->more));
        d->req->more_len = calloc(n - 1, sizeof(*d->req->more_len));
        if (d->req->more == NULL || d->req->more_len == NULL) rc = CR_ERR_NOMEM;
    }
    for (size_t i = 0; rc == CR_OK && i < n; i++) {
        segs[i].client = client;
        m[i].client_id = pb_uuid(&id, &client);
        attach_secret(d, &m[i].has_client_secret, &m[i].client_secret);
        if (!cr_mc_segment_note(d->st, &segs[i])) rc = CR_ERR_NOMEM;
        else if (i == 0) rc = pack(&m[i].base, &d->req->body, &d->req->body_len);
        else if ((rc = pack(&m[i].base, &d->req->more[i - 1], &d->req->more_len[i - 1])) == CR_OK)
            d->req->more_count++;
    }
    if (rc == CR_OK && n == 0) d->req->method = 0; /* nothing to remount: OK now */
out:
    free(segs);
    free(m);
    return rc;
}

static int dec_unmount(struct dec *d) {
    struct cr_mc_uuid seg_id = uuid(d), client = uuid(d);
    if (!cr_sp_read_done(&d->r)) return CR_OK;
    set_client(d, client);
    const struct cr_mc_segment *seg = cr_mc_segment_by_id(d->st, &seg_id);
    Crescent__Master__UnmountSegmentRequest m = CRESCENT__MASTER__UNMOUNT_SEGMENT_REQUEST__INIT;
    Crescent__Master__UUID id;
    /* An id this endpoint never saw mounted: crescent answers
     * SEGMENT_NOT_FOUND for the name "" as for any unknown one. */
    m.segment_name = seg != NULL ? (char *)seg->name : (char *)"";
    m.client_id = pb_uuid(&id, &client);
    attach_secret(d, &m.has_client_secret, &m.client_secret);
    d->req->method = M(UNMOUNT_SEGMENT);
    return pack(&m.base, &d->req->body, &d->req->body_len);
}

static int dec_ping(struct dec *d) {
    struct cr_mc_uuid client = uuid(d);
    if (!cr_sp_read_done(&d->r)) return CR_OK;
    set_client(d, client);
    Crescent__Master__PingRequest m = CRESCENT__MASTER__PING_REQUEST__INIT;
    Crescent__Master__UUID id;
    m.client_id = pb_uuid(&id, &client);
    attach_secret(d, &m.has_client_secret, &m.client_secret);
    d->req->method = M(PING);
    return pack(&m.base, &d->req->body, &d->req->body_len);
}

static void put_start_init(struct dec *d, Crescent__Master__PutStartRequest *m, char *key,
                           uint64_t *len, Crescent__Master__ReplicateConfig *conf, char *tenant,
                           Crescent__Master__UUID *id) {
    crescent__master__put_start_request__init(m);
    m->key = key;
    m->value_length = (int64_t)*len;
    m->config = conf;
    m->n_slice_lengths = 1;
    m->slice_lengths = len;
    m->tenant_id = tenant;
    m->client_id = id;
    attach_secret(d, &m->has_client_secret, &m->client_secret);
}

static int dec_put_start(struct dec *d) {
    struct cr_mc_uuid client = uuid(d);
    char *key = str(d, CR_MC_KEY_MAX);
    uint64_t len = cr_sp_u64(&d->r);
    struct rconf c;
    read_rconf(d, &c);
    char *tenant = str(d, CR_MC_NAME_MAX);
    if (!cr_sp_read_done(&d->r) || len > INT64_MAX) return d->r.bad = true, CR_OK;
    set_client(d, client);
    Crescent__Master__PutStartRequest m;
    Crescent__Master__ReplicateConfig conf;
    Crescent__Master__UUID id;
    put_start_init(d, &m, key, &len, pb_rconf(&conf, &c), tenant, pb_uuid(&id, &client));
    d->req->method = M(PUT_START);
    return pack(&m.base, &d->req->body, &d->req->body_len);
}

static int dec_batch_put_start(struct dec *d) {
    struct cr_mc_uuid client = uuid(d);
    size_t n = cr_sp_len(&d->r, CR_MC_BATCH_MAX, 2);
    char **keys = calloc(n + 1, sizeof(*keys));
    uint64_t *lens = calloc(n + 1, sizeof(*lens));
    Crescent__Master__PutStartRequest *m = calloc(n + 1, sizeof(*m));
    Crescent__Master__PutStartRequest **ptrs = calloc(n + 1, sizeof(*ptrs));
    int rc = keys && lens && m && ptrs ? CR_OK : CR_ERR_NOMEM;
    for (size_t i = 0; rc == CR_OK && i < n; i++) keys[i] = str(d, CR_MC_KEY_MAX);
    size_t nl = cr_sp_len(&d->r, CR_MC_BATCH_MAX, 8);
    for (size_t i = 0; rc == CR_OK && i < nl && i < n; i++) lens[i] = cr_sp_u64(&d->r);
    struct rconf c;
    read_rconf(d, &c);
    char *tenant = str(d, CR_MC_NAME_MAX);
    if (rc != CR_OK || nl != n || !cr_sp_read_done(&d->r)) {
        d->r.bad = d->r.bad || nl != n;
        goto out;
    }
    set_client(d, client);
    Crescent__Master__ReplicateConfig conf;
    Crescent__Master__UUID id;
    pb_rconf(&conf, &c);
    pb_uuid(&id, &client);
    for (size_t i = 0; i < n; i++) {
        if (lens[i] > INT64_MAX) lens[i] = INT64_MAX; /* refused by crescent's validation */
        put_start_init(d, &m[i], keys[i], &lens[i], &conf, tenant, &id);
        ptrs[i] = &m[i];
    }
    Crescent__Master__BatchPutStartRequest b = CRESCENT__MASTER__BATCH_PUT_START_REQUEST__INIT;
    b.n_requests = n;
    b.requests = ptrs;
    d->req->method = M(BATCH_PUT_START);
    d->req->entries = (uint32_t)n;
    rc = pack(&b.base, &d->req->body, &d->req->body_len);
out:
    free(keys), free(lens), free(m), free(ptrs);
    return rc;
}

/* PutEnd(client, ObjectMeta{key, optional checksum}, ReplicaType, tenant) and
 * PutRevoke(client, key, ReplicaType, tenant): crescent's PutEnd and
 * PutRevoke requests have the same fields (PutRevoke has no checksum). */
static void read_put_end(struct dec *d, bool revoke, Crescent__Master__PutEndRequest *m) {
    crescent__master__put_end_request__init(m);
    m->key = str(d, CR_MC_KEY_MAX);
    if (!revoke && cr_sp_bool(&d->r)) {
        m->has_checksum_xxh3 = 1;
        m->checksum_xxh3 = cr_sp_u64(&d->r);
    }
}

static int dec_put_end(struct dec *d, bool revoke) {
    struct cr_mc_uuid client = uuid(d);
    Crescent__Master__PutEndRequest m;
    read_put_end(d, revoke, &m);
    (void)cr_sp_u32(&d->r); /* ReplicaType: crescent's replicas are all memory */
    m.tenant_id = str(d, CR_MC_NAME_MAX);
    if (!cr_sp_read_done(&d->r)) return CR_OK;
    set_client(d, client);
    Crescent__Master__UUID id;
    m.client_id = pb_uuid(&id, &client);
    attach_secret(d, &m.has_client_secret, &m.client_secret);
    d->req->method = revoke ? M(PUT_REVOKE) : M(PUT_END);
    if (revoke) { /* the same fields, another message type */
        Crescent__Master__PutRevokeRequest r = CRESCENT__MASTER__PUT_REVOKE_REQUEST__INIT;
        r.key = m.key, r.tenant_id = m.tenant_id, r.client_id = m.client_id;
        r.has_client_secret = m.has_client_secret, r.client_secret = m.client_secret;
        return pack(&r.base, &d->req->body, &d->req->body_len);
    }
    return pack(&m.base, &d->req->body, &d->req->body_len);
}

static int dec_batch_put_end(struct dec *d, bool revoke) {
    struct cr_mc_uuid client = uuid(d);
    size_t n = cr_sp_len(&d->r, CR_MC_BATCH_MAX, revoke ? 1 : 2);
    Crescent__Master__PutEndRequest *m = calloc(n + 1, sizeof(*m));
    Crescent__Master__PutRevokeRequest *rv = calloc(n + 1, sizeof(*rv));
    void **ptrs = calloc(n + 1, sizeof(*ptrs));
    int rc = m && rv && ptrs ? CR_OK : CR_ERR_NOMEM;
    for (size_t i = 0; rc == CR_OK && i < n; i++) read_put_end(d, revoke, &m[i]);
    (void)cr_sp_u32(&d->r); /* ReplicaType */
    char *tenant = str(d, CR_MC_NAME_MAX);
    if (rc != CR_OK || !cr_sp_read_done(&d->r)) goto out;
    set_client(d, client);
    Crescent__Master__UUID id;
    pb_uuid(&id, &client);
    for (size_t i = 0; i < n; i++) {
        m[i].tenant_id = tenant;
        m[i].client_id = &id;
        attach_secret(d, &m[i].has_client_secret, &m[i].client_secret);
        crescent__master__put_revoke_request__init(&rv[i]);
        rv[i].key = m[i].key, rv[i].tenant_id = tenant, rv[i].client_id = &id;
        rv[i].has_client_secret = m[i].has_client_secret;
        rv[i].client_secret = m[i].client_secret;
        ptrs[i] = revoke ? (void *)&rv[i] : (void *)&m[i];
    }
    d->req->entries = (uint32_t)n;
    if (revoke) {
        Crescent__Master__BatchPutRevokeRequest b =
            CRESCENT__MASTER__BATCH_PUT_REVOKE_REQUEST__INIT;
        b.n_requests = n;
        b.requests = (Crescent__Master__PutRevokeRequest **)ptrs;
        d->req->method = M(BATCH_PUT_REVOKE);
        rc = pack(&b.base, &d->req->body, &d->req->body_len);
    } else {
        Crescent__Master__BatchPutEndRequest b = CRESCENT__MASTER__BATCH_PUT_END_REQUEST__INIT;
        b.n_requests = n;
        b.requests = (Crescent__Master__PutEndRequest **)ptrs;
        d->req->method = M(BATCH_PUT_END);
        rc = pack(&b.base, &d->req->body, &d->req->body_len);
    }
out:
    free(m), free(rv), free(ptrs);
    return rc;
}

/* (key, tenant): ExistKey, GetReplicaList, GetReplicaListByRegex. */
static int dec_key(struct dec *d, enum fn_id fn) {
    char *key = str(d, CR_MC_KEY_MAX);
    char *tenant = str(d, CR_MC_NAME_MAX);
    if (!cr_sp_read_done(&d->r)) return CR_OK;
    d->req->method = cr_mc_fns[fn].method;
    if (fn == FN_EXIST) {
        Crescent__Master__ExistKeyRequest m = CRESCENT__MASTER__EXIST_KEY_REQUEST__INIT;
        m.key = key, m.tenant_id = tenant;
        return pack(&m.base, &d->req->body, &d->req->body_len);
    }
    if (fn == FN_GET) {
        Crescent__Master__GetReplicaListRequest m =
            CRESCENT__MASTER__GET_REPLICA_LIST_REQUEST__INIT;
        m.key = key, m.tenant_id = tenant;
        return pack(&m.base, &d->req->body, &d->req->body_len);
    }
    assert(fn == FN_GET_REGEX);
    Crescent__Master__GetReplicaListByRegexRequest m =
        CRESCENT__MASTER__GET_REPLICA_LIST_BY_REGEX_REQUEST__INIT;
    m.key_regex = key, m.tenant_id = tenant;
    return pack(&m.base, &d->req->body, &d->req->body_len);
}

/* (keys, [force,] tenant): BatchExistKey, BatchGetReplicaList, BatchRemove. */
static int dec_keys(struct dec *d, enum fn_id fn) {
    size_t n = cr_sp_len(&d->r, CR_MC_BATCH_MAX, 1);
    char **keys = calloc(n + 1, sizeof(*keys));
    if (keys == NULL) return CR_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) keys[i] = str(d, CR_MC_KEY_MAX);
    bool force = fn == FN_BATCH_REMOVE && cr_sp_bool(&d->r);
    char *tenant = str(d, CR_MC_NAME_MAX);
    int rc = CR_OK;
    if (!cr_sp_read_done(&d->r)) goto out;
    d->req->method = cr_mc_fns[fn].method;
    d->req->entries = (uint32_t)n;
    if (fn == FN_BATCH_EXIST) {
        Crescent__Master__BatchExistKeyRequest m = CRESCENT__MASTER__BATCH_EXIST_KEY_REQUEST__INIT;
        m.n_keys = n, m.keys = keys, m.tenant_id = tenant;
        rc = pack(&m.base, &d->req->body, &d->req->body_len);
    } else if (fn == FN_BATCH_GET) {
        Crescent__Master__BatchGetReplicaListRequest m =
            CRESCENT__MASTER__BATCH_GET_REPLICA_LIST_REQUEST__INIT;
        m.n_keys = n, m.keys = keys, m.tenant_id = tenant;
        rc = pack(&m.base, &d->req->body, &d->req->body_len);
    } else {
        assert(fn == FN_BATCH_REMOVE);
        Crescent__Master__BatchRemoveRequest m = CRESCENT__MASTER__BATCH_REMOVE_REQUEST__INIT;
        m.n_keys = n, m.keys = keys, m.tenant_id = tenant;
        m.has_force = 1, m.force = force;
        rc = pack(&m.base, &d->req->body, &d->req->body_len);
    }
out:
    free(keys);
    return rc;
}

/* Remove(key, force, tenant), RemoveByRegex(regex, force, tenant),
 * RemoveAll(force, tenant). */
static int dec_remove(struct dec *d, enum fn_id fn) {
    char *key = fn != FN_REMOVE_ALL ? str(d, CR_MC_KEY_MAX) : NULL;
    bool force = cr_sp_bool(&d->r);
    char *tenant = str(d, CR_MC_NAME_MAX);
    if (!cr_sp_read_done(&d->r)) return CR_OK;
    d->req->method = cr_mc_fns[fn].method;
    if (fn == FN_REMOVE) {
        Crescent__Master__RemoveRequest m = CRESCENT__MASTER__REMOVE_REQUEST__INIT;
        m.key = key, m.tenant_id = tenant, m.has_force = 1, m.force = force;
        return pack(&m.base, &d->req->body, &d->req->body_len);
    }
    if (fn == FN_REMOVE_REGEX) {
        Crescent__Master__RemoveByRegexRequest m = CRESCENT__MASTER__REMOVE_BY_REGEX_REQUEST__INIT;
        m.key_regex = key, m.tenant_id = tenant, m.has_force = 1, m.force = force;
        return pack(&m.base, &d->req->body, &d->req->body_len);
    }
    Crescent__Master__RemoveAllRequest m = CRESCENT__MASTER__REMOVE_ALL_REQUEST__INIT;
    m.tenant_id = tenant, m.has_force = 1, m.force = force;
    return pack(&m.base, &d->req->body, &d->req->body_len);
}

void cr_mc_request_free(struct cr_mc_request *req) {
    free(req->body);
    for (size_t i = 0; i < req->more_count; i++) free(req->more[i]);
    free(req->more);
    free(req->more_len);
    *req = (struct cr_mc_request){0};
}

int cr_mc_decode(const struct cr_mc_fn *fn, const uint8_t *body, size_t len,
                 struct cr_mc_state *st, struct cr_mc_request *req, char *err, size_t err_size) {
    assert(fn != NULL && st != NULL && req != NULL && err != NULL);
    *req = (struct cr_mc_request){0};
    struct dec d = {.st = st, .req = req, .cap = 2 * len + 64};
    if (fn->req.literal == NULL) { /* no arguments: an empty body */
        if (len != 0) goto bad;
        return CR_OK;
    }
    if (!cr_sp_read_begin(&d.r, body, len, &fn->req)) goto bad;
    d.scratch = malloc(d.cap);
    if (d.scratch == NULL) return CR_ERR_NOMEM;
    int rc = CR_OK;
    enum fn_id id = (enum fn_id)(fn - cr_mc_fns);
    switch (id) {
    case FN_PING: rc = dec_ping(&d); break;
    case FN_FETCH_TASKS:
        (void)uuid(&d), (void)cr_sp_u64(&d.r); /* answered here: no tasks */
        break;
    case FN_MOUNT: rc = dec_mount(&d, false); break;
    case FN_REMOUNT: rc = dec_mount(&d, true); break;
    case FN_UNMOUNT: rc = dec_unmount(&d); break;
    case FN_PUT_START: rc = dec_put_start(&d); break;
    case FN_PUT_END: rc = dec_put_end(&d, false); break;
    case FN_PUT_REVOKE: rc = dec_put_end(&d, true); break;
    case FN_BATCH_PUT_START: rc = dec_batch_put_start(&d); break;
    case FN_BATCH_PUT_END: rc = dec_batch_put_end(&d, false); break;
    case FN_BATCH_PUT_REVOKE: rc = dec_batch_put_end(&d, true); break;
    case FN_EXIST:
    case FN_GET:
    case FN_GET_REGEX: rc = dec_key(&d, id); break;
    case FN_BATCH_EXIST:
    case FN_BATCH_GET:
    case FN_BATCH_REMOVE: rc = dec_keys(&d, id); break;
    case FN_REMOVE:
    case FN_REMOVE_REGEX:
    case FN_REMOVE_ALL: rc = dec_remove(&d, id); break;
    default: assert(!"a call with arguments has a decoder");
    }
    free(d.scratch);
    if (rc != CR_OK) {
        cr_mc_request_free(req);
        snprintf(err, err_size, "out of memory decoding %s", fn->name);
        return rc;
    }
    if (cr_sp_read_done(&d.r)) return CR_OK;
    cr_mc_request_free(req);
bad:
    snprintf(err, err_size, "%s: the %zu-byte body is not its arguments (struct_pack, "
             "docs/mooncake.md) at byte %zu", fn->name, len, d.r.off);
    return CR_ERR_PROTOCOL;
}
