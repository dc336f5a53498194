/* The store-master methods on the segments actor (see rpc_methods.h). */
#include "rpc/rpc_methods.h"

#include <assert.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <xxhash.h>

#include "rpc/rpc_batch.h"
#include "rpc/rpc_caps.h"
#include "rpc/rpc_codec.h"
#include "rpc/rpc_fast_pack.h"
#include "crescent/error.h"
#include "core/file_tier.h"
#include "core/read_latency.h"
#include "crescent/version.h"

/* ------------------------------------------------------------------------ */
/* A bump arena for building one response: every piece is released at once
 * after packing.  The segments actor keeps one arena for all calls and the
 * arena keeps its first chunk between calls, so a call costs no malloc here
 * (freeing a chunk per call made glibc trim its heap, and every trim was a
 * TLB shootdown on all CPUs).  Larger chunks, for big batches, are freed. */

#define ARENA_CHUNK_BYTES 16384u

struct arena_chunk {
    struct arena_chunk *next;
    size_t used, size;
    _Alignas(max_align_t) uint8_t data[];
};

struct cr_rpc_arena {
    struct arena_chunk *head;
    bool failed;
    const cr_store *store; /* the running call's store, whose explanation a refusal carries */
};

struct cr_rpc_arena *cr_rpc_arena_new(void) {
    return calloc(1, sizeof(struct cr_rpc_arena));
}

static void *arena_alloc(struct cr_rpc_arena *a, size_t size) {
    size = (size + 15u) & ~(size_t)15u;
    struct arena_chunk *c = a->head;
    if (c == NULL || c->size - c->used < size) {
        size_t want = size > ARENA_CHUNK_BYTES ? size : ARENA_CHUNK_BYTES;
        c = malloc(sizeof(*c) + want);
        if (c == NULL) {
            a->failed = true;
            return NULL;
        }
        c->next = a->head, c->used = 0, c->size = want;
        a->head = c;
    }
    void *p = c->data + c->used;
    c->used += size;
    memset(p, 0, size);
    return p;
}

/* Keeps one standard chunk, emptied; frees the rest. */
static void arena_reset(struct cr_rpc_arena *a) {
    struct arena_chunk *keep = NULL;
    while (a->head != NULL) {
        struct arena_chunk *c = a->head;
        a->head = c->next;
        if (keep == NULL && c->size == ARENA_CHUNK_BYTES)
            keep = c;
        else
            free(c);
    }
    if (keep != NULL) keep->next = NULL, keep->used = 0;
    a->head = keep;
    a->failed = false;
}

void cr_rpc_arena_free(struct cr_rpc_arena *a) {
    if (a == NULL) return;
    arena_reset(a);
    free(a->head);
    free(a);
}

static char *arena_strndup(struct cr_rpc_arena *a, const char *s, size_t len) {
    char *p = arena_alloc(a, len + 1);
    if (p != NULL) memcpy(p, s, len);
    return p;
}

/* ------------------------------------------------------------------------ */
/* Conversions */

static Crescent__Master__ReplicaInfo__ReplicaStatus replica_status(enum cr_replica_status s) {
    return (Crescent__Master__ReplicaInfo__ReplicaStatus)s; /* same values, by design */
}

/* A disk or local_disk replica's fields (proto ReplicaInfo.medium ...). */
static bool replica_pb_elsewhere(struct cr_rpc_arena *a, const struct cr_store_replica_desc *d,
                                 Crescent__Master__ReplicaInfo *info) {
    info->has_medium = true;
    info->has_object_size = true;
    info->object_size = d->size;
    if (d->medium == CR_MEDIUM_DISK) {
        info->medium = CRESCENT__MASTER__REPLICA_INFO__MEDIUM__DISK;
        info->file_path = (char *)d->file_path;
        return true;
    }
    assert(d->medium == CR_MEDIUM_LOCAL_DISK);
    info->medium = CRESCENT__MASTER__REPLICA_INFO__MEDIUM__LOCAL_DISK;
    info->endpoint = (char *)d->endpoint;
    info->segment_name = (char *)d->segment_name;
    info->has_position = true;
    info->position = d->buffer;
    Crescent__Master__UUID *owner = arena_alloc(a, sizeof(*owner));
    if (owner == NULL) return false;
    crescent__master__uuid__init(owner);
    cr_rpc_uuid_to_pb(&d->owner, owner);
    info->owner = owner;
    if (d->has_cap) { /* the read capability of "<segment>#ssd" (rpc/rpc_caps.h) */
        info->has_capability = 1;
        info->capability = (ProtobufCBinaryData){.len = sizeof(d->cap), .data = (uint8_t *)d->cap};
    }
    return true;
}

/* One ReplicaInfo (one handle) per memory replica.  Strings are not copied: they
 * point at segment names and endpoints, which live as long as the segment,
 * and no method here unmounts before packing. */
static Crescent__Master__ReplicaInfo **replicas_pb(struct cr_rpc_arena *a,
                                                   const struct cr_store_replica_list *list,
                                                   size_t *count_out) {
    *count_out = 0; /* until every entry is built */
    Crescent__Master__ReplicaInfo **out = arena_alloc(a, list->count * sizeof(*out) + 1);
    for (uint32_t i = 0; out != NULL && i < list->count; i++) {
        const struct cr_store_replica_desc *d = &list->replicas[i];
        Crescent__Master__ReplicaInfo *info = arena_alloc(a, sizeof(*info));
        if (info == NULL) return NULL;
        crescent__master__replica_info__init(info);
        info->status = replica_status(d->status);
        out[i] = info;
        if (d->medium != CR_MEDIUM_MEMORY) { /* no handle: where it is, by medium */
            if (!replica_pb_elsewhere(a, d, info)) return NULL;
            continue;
        }
        Crescent__Master__BufHandle *h = arena_alloc(a, sizeof(*h));
        Crescent__Master__BufHandle **hs = arena_alloc(a, sizeof(*hs));
        if (h == NULL || hs == NULL) return NULL;
        crescent__master__buf_handle__init(h);
        h->segment_name = (char *)d->segment_name;
        h->size = d->size;
        h->buffer = d->buffer;
        h->status = cr_rpc_buf_status(d->status);
        h->transport_endpoint = (char *)d->endpoint;
        if (d->has_cap) {
            h->has_capability = 1;
            h->capability = (ProtobufCBinaryData){.len = sizeof(d->cap), .data = (uint8_t *)d->cap};
        }
        hs[0] = h;
        info->n_handles = 1;
        info->handles = hs;
    }
    if (out != NULL) *count_out = list->count;
    return out;
}

static void store_uuid(const Crescent__Master__UUID *id, struct cr_uuid *out) {
    assert(id != NULL); /* validated by the gateway where the method needs it */
    cr_rpc_uuid_from_pb(id, out);
}

/* A refused call's response says why, in the store's words (the store's
 * explanation was cleared when the call began, so it is this call's). */
static void set_error_message(const cr_store *store, ProtobufCMessage *resp) {
    if (cr_rpc_status_code(resp) == CR_OK) return; /* the common case: no name lookup */
    const char *why = cr_store_last_error(store);
    if (why[0] != '\0') cr_rpc_set_error_message(resp, why);
}

/* Call ends: pack `resp` (or report that building it failed). */
static void finish(struct cr_master_call *call, struct cr_rpc_arena *a, ProtobufCMessage *resp) {
    set_error_message(a->store, resp);
    size_t len = a->failed ? 0 : protobuf_c_message_get_packed_size(resp);
    if (!a->failed && len <= sizeof(call->reply_inline)) {
        call->reply = call->reply_inline;
        call->reply_len = protobuf_c_message_pack(resp, call->reply_inline);
        assert(call->reply_len == len);
        call->status = CR_OK;
    } else if (!a->failed && cr_rpc_pack(resp, &call->reply, &call->reply_len) == CR_OK) {
        call->status = CR_OK;
    } else {
        cr_rpc_reply_nomem(call);
    }
}

/* A successful single GetReplicaList or PutStart: packed directly into the
 * call (rpc_fast_pack.h).  False when it does not fit: pack as usual. */
static bool finish_replicas(struct cr_master_call *call, const struct cr_store_replica_list *list) {
    size_t len = cr_rpc_pack_replica_response(list, call->reply_inline, sizeof(call->reply_inline));
    if (len == 0) return false;
    call->reply = call->reply_inline;
    call->reply_len = len;
    call->status = CR_OK;
    return true;
}

/* A single call that succeeded with nothing but `exists` (or -1: not even
 * that) to say: packed directly into the call. */
static void finish_ok(struct cr_master_call *call, int exists) {
    call->reply = call->reply_inline;
    call->reply_len = cr_rpc_pack_ok_response(exists, call->reply_inline);
    call->status = CR_OK;
}

/* ------------------------------------------------------------------------ */
/* Methods.  Each returns the response's status_code. */

#define REQ(type) const Crescent__Master__##type *req = (const void *)call->request

/* The tenant and key of a single-key request; false for other methods. */
static bool single_key(const struct cr_master_call *call, const char **tenant, const char **key) {
    switch (call->method) {
    case CRESCENT__MASTER__METHOD__GET_REPLICA_LIST: {
        REQ(GetReplicaListRequest);
        *tenant = req->tenant_id, *key = req->key;
        return true;
    }
    case CRESCENT__MASTER__METHOD__PUT_START: {
        REQ(PutStartRequest);
        *tenant = req->tenant_id, *key = req->key;
        return true;
    }
    case CRESCENT__MASTER__METHOD__EXIST_KEY: {
        REQ(ExistKeyRequest);
        *tenant = req->tenant_id, *key = req->key;
        return true;
    }
    case CRESCENT__MASTER__METHOD__REMOVE: {
        REQ(RemoveRequest);
        *tenant = req->tenant_id, *key = req->key;
        return true;
    }
    case CRESCENT__MASTER__METHOD__PUT_END:
    case CRESCENT__MASTER__METHOD__PUT_REVOKE: {
        REQ(PutEndRequest); /* PutRevokeRequest has the same layout */
        *tenant = req->tenant_id, *key = req->key;
        return true;
    }
    default: return false;
    }
}

void cr_rpc_call_prepare_key(struct cr_master_call *call) {
    assert(call != NULL && (call->request != NULL || call->batch != NULL));
    const char *tenant = NULL, *key = NULL;
    if (!single_key(call, &tenant, &key) || key == NULL) return;
    /* Validated: the key is 1..max_key_len bytes, well below UINT32_MAX. */
    cr_store_key_make(tenant, key, (uint32_t)strlen(key), &call->key);
}

/* The call's key, made here if the gateway did not (asks, tests). */
static const struct cr_store_key *call_key(struct cr_master_call *call) {
    if (call->key.key == NULL) cr_rpc_call_prepare_key(call);
    assert(call->key.key != NULL);
    return &call->key;
}

/* A call naming a registered client must carry the secret it was issued:
 * the client id alone is public (GET /api/v1/segments/NAME). */
static int check_secret(struct cr_rpc_run *run, const struct cr_uuid *id, protobuf_c_boolean has,
                        ProtobufCBinaryData secret) {
    return cr_store_client_check_secret(run->store, id, has ? secret.data : NULL,
                                        has ? secret.len : 0);
}

/* Issues a secret to a client the store knows and has none for, into `out`
 * (which lives in the arena).  getrandom runs once per client, not per call. */
static void issue_secret(struct cr_rpc_run *run, struct cr_rpc_arena *a, const struct cr_uuid *id,
                         protobuf_c_boolean *has, ProtobufCBinaryData *out) {
    if (!cr_store_client_wants_secret(run->store, id)) return;
    uint8_t *secret = arena_alloc(a, CR_STORE_CLIENT_SECRET_BYTES);
    if (secret == NULL) return; /* the arena marks the call failed */
    if (getrandom(secret, CR_STORE_CLIENT_SECRET_BYTES, 0) != CR_STORE_CLIENT_SECRET_BYTES)
        return; /* no entropy now: the client stays without a secret and gets one later */
    bool issued = false;
    cr_store_client_issue_secret(run->store, id, secret, &issued);
    assert(issued);
    *has = 1;
    *out = (ProtobufCBinaryData){.len = CR_STORE_CLIENT_SECRET_BYTES, .data = secret};
}

static int m_get_version(struct cr_rpc_run *run, struct cr_master_call *call,
                         struct cr_rpc_arena *a) {
    Crescent__Master__GetVersionResponse resp = CRESCENT__MASTER__GET_VERSION_RESPONSE__INIT;
    resp.version = (char *)CRESCENT_VERSION;
    resp.has_ready = resp.ready = 1;
    if (run->files != NULL && run->files->root[0] != '\0') {
        resp.root_fs_dir = run->files->root;
        resp.cluster_id = run->files->cluster;
    }
    finish(call, a, &resp.base);
    return CR_OK;
}

static int m_ping(struct cr_rpc_run *run, struct cr_master_call *call, struct cr_rpc_arena *a) {
    REQ(PingRequest);
    struct cr_uuid id;
    store_uuid(req->client_id, &id);
    Crescent__Master__PingResponse resp = CRESCENT__MASTER__PING_RESPONSE__INIT;
    bool known = false;
    resp.status_code = check_secret(run, &id, req->has_client_secret, req->client_secret);
    /* A client restored from the log and not heard from since reads as not
     * known: its segments came back without their capability keys (never
     * logged), and the remount this asks for brings them back. */
    bool restored = resp.status_code == CR_OK && cr_store_client_awaiting(run->store, &id);
    if (resp.status_code == CR_OK)
        resp.status_code = cr_store_client_ping(run->store, &id, run->now_ms, &known);
    if (restored) known = false;
    if (resp.status_code == CR_OK)
        issue_secret(run, a, &id, &resp.has_client_secret, &resp.client_secret);
    /* The client's read latency since its last report (cr_rpc_validate
     * refused a malformed one; checked again, as cheap, before it counts). */
    char why[CR_RPC_ERROR_MAX];
    for (size_t i = 0; resp.status_code == CR_OK && run->reads != NULL &&
                       i < req->n_read_latency && i < CR_READ_LATENCY_TIERS; i++) {
        const Crescent__Master__PingRequest__ReadLatency *e = req->read_latency[i];
        if (cr_read_latency_check(e->tier, e->count, e->buckets, e->n_buckets, why,
                                  sizeof(why)) == 0)
            cr_read_latency_add(run->reads, e->tier, e->count, e->sum_ns, e->buckets);
    }
    resp.has_client_known = resp.status_code == CR_OK; /* a refused ping tells nothing */
    resp.client_known = known;
    resp.has_client_ttl_ms = 1;
    resp.client_ttl_ms = run->client_ttl_ms;
    finish(call, a, &resp.base);
    return resp.status_code;
}

/* FetchTasks and MarkTaskToComplete run on the tasks actor, which does not
 * hold the client table: segments checks the executor's secret first.  A
 * call that passes leaves no reply (call->reply NULL) and goes on to tasks
 * (cr_rpc_methods_task_gated); a refusal is answered from here. */
static int m_task_gate(struct cr_rpc_run *run, struct cr_master_call *call,
                       struct cr_rpc_arena *a) {
    struct cr_uuid id;
    int32_t *code;
    ProtobufCMessage *resp;
    Crescent__Master__FetchTasksResponse fetch = CRESCENT__MASTER__FETCH_TASKS_RESPONSE__INIT;
    Crescent__Master__MarkTaskToCompleteResponse mark =
        CRESCENT__MASTER__MARK_TASK_TO_COMPLETE_RESPONSE__INIT;
    if (call->method == CRESCENT__MASTER__METHOD__FETCH_TASKS) {
        REQ(FetchTasksRequest);
        store_uuid(req->client_id, &id);
        fetch.status_code = check_secret(run, &id, req->has_client_secret, req->client_secret);
        code = &fetch.status_code, resp = &fetch.base;
    } else {
        REQ(MarkTaskToCompleteRequest);
        store_uuid(req->client_id, &id);
        mark.status_code = check_secret(run, &id, req->has_client_secret, req->client_secret);
        code = &mark.status_code, resp = &mark.base;
    }
    if (*code == CR_OK) {
        call->status = CR_OK; /* no reply: tasks answers */
        return CR_OK;
    }
    finish(call, a, resp);
    return *code;
}

bool cr_rpc_methods_task_gated(uint16_t method) {
    return method == CRESCENT__MASTER__METHOD__FETCH_TASKS ||
           method == CRESCENT__MASTER__METHOD__MARK_TASK_TO_COMPLETE;
}

static int m_mount(struct cr_rpc_run *run, struct cr_master_call *call, struct cr_rpc_arena *a) {
    REQ(MountSegmentRequest);
    struct cr_uuid id;
    store_uuid(req->client_id, &id);
    struct cr_store_segment_params p = {
        .name = req->segment_name,
        .base = req->buffer,
        .size = req->size,
        .endpoint = req->transport_endpoint != NULL ? req->transport_endpoint : "",
        .protocol = req->protocol};
    Crescent__Master__MountSegmentResponse resp = CRESCENT__MASTER__MOUNT_SEGMENT_RESPONSE__INIT;
    resp.status_code = check_secret(run, &id, req->has_client_secret, req->client_secret);
    if (resp.status_code == CR_OK && req->has_capability_key &&
        req->capability_key.len != CR_CAP_KEY_BYTES) {
        resp.status_code = CR_ERR_INVALID_PARAMS;
        cr_rpc_set_error_message(&resp.base, "capability_key must be 32 bytes");
        finish(call, a, &resp.base);
        return resp.status_code;
    }
    if (resp.status_code == CR_OK)
        resp.status_code = call->method == CRESCENT__MASTER__METHOD__REMOUNT_SEGMENT
                               ? cr_store_remount_segment(run->store, &id, &p, run->now_ms)
                               : cr_store_mount_segment(run->store, &id, &p, run->now_ms);
    /* The owner's key replaces the one held: after a master restart the
     * segment was restored without one (keys are not logged), and an owner
     * that restarted has a new one.  A (re)mount without a key keeps it. */
    if (resp.status_code == CR_OK && req->has_capability_key)
        resp.status_code = cr_store_segment_set_key(run->store, req->segment_name,
                                                    req->capability_key.data);
    if (resp.status_code == CR_OK) /* not identity: a remount may gain or lose the SSD */
        resp.status_code = cr_store_segment_set_ssd_capacity(
            run->store, req->segment_name, req->has_ssd_capacity ? req->ssd_capacity : 0);
    if (resp.status_code == CR_OK)
        issue_secret(run, a, &id, &resp.has_client_secret, &resp.client_secret);
    finish(call, a, &resp.base);
    return resp.status_code;
}

static int m_unmount(struct cr_rpc_run *run, struct cr_master_call *call, struct cr_rpc_arena *a) {
    REQ(UnmountSegmentRequest);
    struct cr_uuid id;
    store_uuid(req->client_id, &id);
    Crescent__Master__UnmountSegmentResponse resp =
        CRESCENT__MASTER__UNMOUNT_SEGMENT_RESPONSE__INIT;
    /* The admin token (checked by the gateway) may unmount anyone's segment. */
    resp.status_code =
        call->admin ? CR_OK : check_secret(run, &id, req->has_client_secret, req->client_secret);
    if (resp.status_code == CR_OK)
        resp.status_code = cr_store_unmount_segment(run->store, call->admin ? NULL : &id,
                                                    req->segment_name, NULL);
    finish(call, a, &resp.base);
    return resp.status_code;
}

/* The last client id and secret a batch's entry passed the check with: the
 * entries of a batch mostly carry the same pair, and the store cannot change
 * its verdict on it while the batch runs (secrets are issued and clients
 * forgotten by other calls).  Only a pass is kept, and only after the
 * constant-time check: the bytes compared here are ones the caller already
 * showed to be right. */
struct secret_memo {
    bool valid;
    struct cr_uuid client;
    uint32_t len;
    uint8_t secret[CR_STORE_CLIENT_SECRET_BYTES];
};

/* A put entry's client secret, as check_secret; skipped when `memo` (NULL
 * for single calls) holds the entry's pair. */
static int check_entry_secret(struct cr_rpc_run *run, struct secret_memo *memo,
                              const struct cr_rpc_put *e) {
    uint32_t len = e->has_secret ? e->secret_len : 0;
    if (memo != NULL && memo->valid && memcmp(&memo->client, &e->client, sizeof(e->client)) == 0 &&
        memo->len == len && (len == 0 || memcmp(memo->secret, e->secret, len) == 0))
        return CR_OK;
    int rc = cr_store_client_check_secret(run->store, &e->client, len > 0 ? e->secret : NULL, len);
    if (memo == NULL) return rc;
    memo->valid = rc == CR_OK && len <= sizeof(memo->secret);
    if (memo->valid) {
        memo->client = e->client;
        memo->len = len;
        if (len > 0) memcpy(memo->secret, e->secret, len);
    }
    return rc;
}

/* One PutStart on the store: its status code, and its replicas in *list.
 * `key` is the entry's key made with its hash. */
static int put_start_store(struct cr_rpc_run *run, struct secret_memo *memo,
                           const struct cr_rpc_put *e,
                           const struct cr_store_key *key, struct cr_store_replica_list *list) {
    struct cr_store_put_params p = {.tenant = key->tenant,
                                    .key = key->key,
                                    .key_len = key->key_len,
                                    .key_hashed = true,
                                    .key_hash = key->hash,
                                    .value_length = (uint64_t)e->value_length,
                                    .replica_num = (uint32_t)e->replica_num,
                                    .with_soft_pin = e->with_soft_pin,
                                    .preferred_segment = e->preferred_segment,
                                    .meta = e->has_block ? &e->block : NULL};
    int rc = check_entry_secret(run, memo, e);
    if (rc == CR_OK) rc = cr_store_put_start(run->store, &e->client, &p, run->now_ms, list);
    if (rc == CR_OK) /* writable until the store reclaims an unfinished put */
        cr_rpc_caps_sign(list, CR_CAP_WRITE,
                         cr_store_get_config(run->store)->put_start_release_timeout_ms,
                         cr_rpc_caps_now_ms());
    /* Eviction only when it can make room: not for an object larger than every segment. */
    if (rc == CR_ERR_NO_AVAILABLE_HANDLE && cr_store_no_room_evictable(run->store))
        run->no_space = true;
    return rc;
}

static int m_put_start(struct cr_rpc_run *run, struct cr_master_call *call,
                       struct cr_rpc_arena *a) {
    struct cr_store_replica_list list;
    Crescent__Master__PutStartResponse resp = CRESCENT__MASTER__PUT_START_RESPONSE__INIT;
    struct cr_rpc_put e;
    cr_rpc_put_from_pb(call->method, call->request, &e);
    resp.status_code = put_start_store(run, NULL, &e, call_key(call), &list);
    if (resp.status_code == CR_OK && finish_replicas(call, &list)) return CR_OK;
    if (resp.status_code == CR_OK) {
        resp.replica_list = replicas_pb(a, &list, &resp.n_replica_list);
    }
    finish(call, a, &resp.base);
    return resp.status_code;
}

/* PutEnd (or BatchPutEnd's entry) or PutRevoke: `key` is the entry's key
 * made with its hash. */
static int end_or_revoke(struct cr_rpc_run *run, struct secret_memo *memo, uint16_t method,
                         const struct cr_rpc_put *e,
                         const struct cr_store_key *key) {
    bool end = method == CRESCENT__MASTER__METHOD__PUT_END ||
               method == CRESCENT__MASTER__METHOD__BATCH_PUT_END;
    int rc = check_entry_secret(run, memo, e);
    if (rc != CR_OK) return rc;
    return end ? cr_store_put_end_k(run->store, &e->client, key,
                                    e->has_checksum ? &e->checksum : NULL, run->now_ms)
               : cr_store_put_revoke_k(run->store, &e->client, key);
}

static int m_put_end(struct cr_rpc_run *run, struct cr_master_call *call, struct cr_rpc_arena *a) {
    /* PutEndResponse and PutRevokeResponse are both {status_code}. */
    Crescent__Master__PutEndResponse resp = CRESCENT__MASTER__PUT_END_RESPONSE__INIT;
    if (call->method == CRESCENT__MASTER__METHOD__PUT_REVOKE)
        resp.base.descriptor = &crescent__master__put_revoke_response__descriptor;
    struct cr_rpc_put e;
    cr_rpc_put_from_pb(call->method, call->request, &e);
    resp.status_code = end_or_revoke(run, NULL, call->method, &e, call_key(call));
    if (resp.status_code == CR_OK) {
        finish_ok(call, -1);
        return CR_OK;
    }
    finish(call, a, &resp.base);
    return resp.status_code;
}

/* ExistKey: a missing key is an answer (exists = false, status 0); other
 * failures (a put not ended yet) are the status. */
static int m_exist(struct cr_rpc_run *run, struct cr_master_call *call, struct cr_rpc_arena *a) {
    int rc = cr_store_exist_key_k(run->store, call_key(call), run->now_ms);
    Crescent__Master__ExistKeyResponse resp = CRESCENT__MASTER__EXIST_KEY_RESPONSE__INIT;
    resp.status_code = rc == CR_ERR_OBJECT_NOT_FOUND ? CR_OK : rc;
    resp.has_exists = 1;
    resp.exists = rc == CR_OK;
    if (resp.status_code == CR_OK) {
        finish_ok(call, resp.exists);
        return CR_OK;
    }
    finish(call, a, &resp.base);
    return resp.status_code;
}

/* A GetReplicaList lookup, as Mooncake counts it: every one, those
 * answered, and where the answer's first replica lies (its hits). */
static void note_get(struct cr_rpc_run *run, int rc, const struct cr_store_replica_list *list) {
    struct cr_rpc_outcome *o = &run->outcome;
    o->gets++;
    if (rc != CR_OK || list->count == 0) return;
    o->gets_valid++;
    const struct cr_store_replica_desc *first = &list->replicas[0];
    if (first->medium == CR_MEDIUM_MEMORY) {
        o->mem_hits++;
        o->mem_hit_bytes += first->size;
    } else if (first->medium == CR_MEDIUM_DISK || first->medium == CR_MEDIUM_LOCAL_DISK) {
        o->file_hits++;
        o->file_hit_bytes += first->size;
    }
}

static int m_get(struct cr_rpc_run *run, struct cr_master_call *call, struct cr_rpc_arena *a) {
    struct cr_store_replica_list list;
    Crescent__Master__GetReplicaListResponse resp =
        CRESCENT__MASTER__GET_REPLICA_LIST_RESPONSE__INIT;
    resp.status_code = cr_store_get_replica_list_k(run->store, call_key(call), run->now_ms, &list);
    note_get(run, resp.status_code, &list);
    if (resp.status_code == CR_OK) /* readable while the lease holds the replicas */
        cr_rpc_caps_sign(&list, CR_CAP_READ, list.lease_ms, cr_rpc_caps_now_ms());
    if (resp.status_code == CR_OK && finish_replicas(call, &list)) return CR_OK;
    if (resp.status_code == CR_OK) {
        resp.replica_list = replicas_pb(a, &list, &resp.n_replica_list);
        resp.has_checksum_xxh3 = list.has_checksum;
        resp.checksum_xxh3 = list.checksum;
        resp.has_lease_ttl_ms = list.lease_ms > 0;
        resp.lease_ttl_ms = list.lease_ms;
    }
    finish(call, a, &resp.base);
    return resp.status_code;
}

/* ------------------------------------------------------------------------ */
/* Batches.  Their keys are made a group at a time (one tenant hash) and
 * looked up with the loads kept a few keys ahead (cr_store_prefetch_batch:
 * one miss after another, they were half of a BatchExistKey's server CPU),
 * and their responses are written entry by entry (cr_rpc_batch_writer)
 * instead of built as protobuf-c structs in the arena and packed through
 * descriptors.  Every entry runs even when the
 * reply cannot be built: the gateway validated the batch whole, and it is
 * applied whole. */

#define BATCH_GROUP 32u

/* Reply bytes a replica-list entry usually takes (one replica): a guess
 * that saves growing the buffer, not a bound. */
#define BATCH_LIST_ENTRY_BYTES 64u

struct batch {
    struct cr_rpc_run *run;
    struct cr_master_call *call;
    const struct cr_rpc_batch *req;
    struct cr_rpc_batch_writer w;
    int first_error; /* the first entry's refusal: the method's status for stats */
    struct secret_memo secret; /* puts: the entries' last client and secret that passed */
};

/* Makes the keys of entries [at, at + n). */
typedef void (*batch_keys_fn)(const struct batch *b, size_t at, size_t n,
                              struct cr_store_key *out);
/* Runs entry i on the store and writes its answer. */
typedef void (*batch_entry_fn)(struct batch *b, size_t i, const struct cr_store_key *key);

/* Runs every entry of a batch of `count`, group by group, then ends the call
 * with the writer's bytes (or "out of memory" when they could not be held). */
static int batch_run(struct batch *b, size_t count, size_t expect, batch_keys_fn keys_fn,
                     batch_entry_fn entry_fn) {
    struct cr_master_call *call = b->call;
    cr_rpc_batch_begin(&b->w, call->reply_inline, sizeof(call->reply_inline), expect);
    b->run->outcome.items = (uint32_t)count;
    struct cr_store_key keys[BATCH_GROUP];
    for (size_t at = 0; at < count; at += BATCH_GROUP) {
        size_t n = count - at < BATCH_GROUP ? count - at : BATCH_GROUP;
        keys_fn(b, at, n, keys);
        for (size_t i = 0; i < n; i++) {
            cr_store_prefetch_batch(b->run->store, keys, n, i);
            entry_fn(b, at + i, &keys[i]);
        }
    }
    if (b->w.failed) {
        if (b->w.buf != b->w.inline_buf) free(b->w.buf);
        cr_rpc_reply_nomem(call);
    } else {
        call->reply = b->w.buf;
        call->reply_len = b->w.len;
        call->status = CR_OK;
    }
    return b->first_error;
}

static void note_status(struct batch *b, int rc) {
    if (b->first_error == CR_OK) b->first_error = rc;
}

/* BatchPutStart, BatchPutEnd and BatchPutRevoke: each entry is a request
 * with its own key and tenant. */
static void put_keys(const struct batch *b, size_t at, size_t n, struct cr_store_key *out) {
    /* Entries name their tenants one by one, but a batch is mostly of one:
     * its seed is hashed once per run of entries, not per key. */
    struct cr_store_key_maker maker = {0};
    for (size_t i = 0; i < n; i++) {
        const struct cr_rpc_put *e = &b->req->puts[at + i];
        cr_store_key_make_next(&maker, e->tenant, e->key, e->key_len, &out[i]);
    }
}

static void put_start_entry(struct batch *b, size_t i, const struct cr_store_key *key) {
    struct cr_store_replica_list list;
    int rc = put_start_store(b->run, &b->secret, &b->req->puts[i], key, &list);
    note_status(b, rc);
    b->run->outcome.failed_items += rc != CR_OK;
    if (rc == CR_OK)
        cr_rpc_batch_add_replicas(&b->w, &list);
    else /* each refused entry says why: the object-table cap, no space, ... */
        cr_rpc_batch_add_refusal(&b->w, rc, cr_store_last_error(b->run->store));
}

static void put_end_entry(struct batch *b, size_t i, const struct cr_store_key *key) {
    int rc = end_or_revoke(b->run, &b->secret, b->call->method, &b->req->puts[i], key);
    note_status(b, rc);
    b->run->outcome.failed_items += rc != CR_OK;
    cr_rpc_batch_add_code(&b->w, rc);
}

static void *arena_alloc_fn(void *ctx, size_t size) { return arena_alloc(ctx, size); }

/* Starts a batch call: its request read by hand at intake (call->batch),
 * or made here from the protobuf-c request (in-process asks, and the wire
 * forms the hand-written decoder leaves to protobuf-c).  False when memory
 * ran out making it: the call is answered "out of memory", nothing applied. */
static bool batch_start(struct batch *b, struct cr_rpc_run *run, struct cr_master_call *call,
                        struct cr_rpc_arena *a, struct cr_rpc_batch *made) {
    *b = (struct batch){.run = run, .call = call, .req = call->batch};
    if (b->req == NULL && cr_rpc_batch_from_pb(call->method, call->request, arena_alloc_fn, a, made))
        b->req = made;
    if (b->req == NULL) cr_rpc_reply_nomem(call);
    return b->req != NULL;
}

static int m_batch_put_start(struct cr_rpc_run *run, struct cr_master_call *call,
                             struct cr_rpc_arena *a) {
    struct batch b;
    struct cr_rpc_batch made;
    if (!batch_start(&b, run, call, a, &made)) return CR_ERR_NOMEM;
    return batch_run(&b, b.req->count, 2 + b.req->count * BATCH_LIST_ENTRY_BYTES, put_keys,
                     put_start_entry);
}

/* BatchPutEnd and BatchPutRevoke: requests and responses share layouts. */
static int m_batch_put_end(struct cr_rpc_run *run, struct cr_master_call *call,
                           struct cr_rpc_arena *a) {
    struct batch b;
    struct cr_rpc_batch made;
    if (!batch_start(&b, run, call, a, &made)) return CR_ERR_NOMEM;
    return batch_run(&b, b.req->count, 2 + b.req->count * CR_RPC_BATCH_CODE_MAX, put_keys,
                     put_end_entry);
}

/* BatchExistKey, BatchRemove and BatchGetReplicaList: keys of one tenant
 * (cr_rpc_batch_from_pb reads BatchRemoveRequest and
 * BatchGetReplicaListRequest as BatchExistKeyRequest: their keys and
 * tenant_id are at the same offsets). */
#define SAME_FIELD(a, b, f)                                                                        \
    (offsetof(Crescent__Master__##a, f) == offsetof(Crescent__Master__##b, f))
_Static_assert(SAME_FIELD(BatchExistKeyRequest, BatchRemoveRequest, n_keys) &&
                   SAME_FIELD(BatchExistKeyRequest, BatchRemoveRequest, keys) &&
                   SAME_FIELD(BatchExistKeyRequest, BatchRemoveRequest, tenant_id) &&
                   SAME_FIELD(BatchExistKeyRequest, BatchGetReplicaListRequest, n_keys) &&
                   SAME_FIELD(BatchExistKeyRequest, BatchGetReplicaListRequest, keys) &&
                   SAME_FIELD(BatchExistKeyRequest, BatchGetReplicaListRequest, tenant_id) &&
                   SAME_FIELD(PutEndRequest, PutRevokeRequest, key) &&
                   SAME_FIELD(PutEndRequest, PutRevokeRequest, tenant_id) &&
                   SAME_FIELD(PutEndRequest, PutRevokeRequest, client_id) &&
                   SAME_FIELD(BatchPutEndRequest, BatchPutRevokeRequest, requests) &&
                   SAME_FIELD(BatchPutEndRequest, BatchPutStartRequest, requests),
               "batch request layouts");
static void tenant_keys(const struct batch *b, size_t at, size_t n, struct cr_store_key *out) {
    cr_store_keys_make(b->req->tenant, b->req->keys + at, b->req->key_lens + at, n, out);
}

static void exist_entry(struct batch *b, size_t i, const struct cr_store_key *key) {
    (void)i;
    int rc = cr_store_exist_key_k(b->run->store, key, b->run->now_ms);
    /* A missing key is an answer (false), as Mooncake's expected<bool>. */
    b->run->outcome.failed_items += rc != CR_OK && rc != CR_ERR_OBJECT_NOT_FOUND;
    cr_rpc_batch_add_code(&b->w, rc);
}

static void remove_entry(struct batch *b, size_t i, const struct cr_store_key *key) {
    (void)i;
    int rc = cr_store_remove_k(b->run->store, key, b->req->force, b->run->now_ms);
    b->run->outcome.failed_items += rc != CR_OK;
    cr_rpc_batch_add_code(&b->w, rc);
}

/* A refused entry carries its status only. */
static void get_entry(struct batch *b, size_t i, const struct cr_store_key *key) {
    (void)i;
    struct cr_store_replica_list list;
    int rc = cr_store_get_replica_list_k(b->run->store, key, b->run->now_ms, &list);
    note_get(b->run, rc, &list);
    b->run->outcome.failed_items += rc != CR_OK;
    if (rc == CR_OK) {
        cr_rpc_caps_sign(&list, CR_CAP_READ, list.lease_ms, cr_rpc_caps_now_ms());
        cr_rpc_batch_add_replicas(&b->w, &list);
    }
    else
        cr_rpc_batch_add_refusal(&b->w, rc, NULL);
}

/* BatchExistKey and BatchRemove: one status code per key. */
static int m_batch_codes(struct cr_rpc_run *run, struct cr_master_call *call,
                         struct cr_rpc_arena *a) {
    bool remove = call->method == CRESCENT__MASTER__METHOD__BATCH_REMOVE;
    struct batch b;
    struct cr_rpc_batch made;
    if (!batch_start(&b, run, call, a, &made)) return CR_ERR_NOMEM;
    batch_run(&b, b.req->count, 2 + b.req->count * CR_RPC_BATCH_CODE_MAX, tenant_keys,
              remove ? remove_entry : exist_entry);
    return CR_OK;
}

static int m_batch_get(struct cr_rpc_run *run, struct cr_master_call *call,
                       struct cr_rpc_arena *a) {
    struct batch b;
    struct cr_rpc_batch made;
    if (!batch_start(&b, run, call, a, &made)) return CR_ERR_NOMEM;
    batch_run(&b, b.req->count, 2 + b.req->count * BATCH_LIST_ENTRY_BYTES, tenant_keys,
              get_entry);
    return CR_OK;
}

/* Regex matches, collected in a list while the store calls back. */
struct regex_entry {
    struct regex_entry *next;
    Crescent__Master__GetReplicaListByRegexResponse__ObjectMapEntry entry;
    Crescent__Master__ObjectReplicaList value;
};

struct regex_collect {
    struct cr_rpc_arena *arena;
    struct regex_entry *head;
    size_t count;
};

static void regex_match(void *ctx, const char *key, uint32_t key_len,
                        const struct cr_store_replica_list *replicas) {
    struct regex_collect *c = ctx;
    struct regex_entry *e = arena_alloc(c->arena, sizeof(*e));
    if (e == NULL) return;
    crescent__master__get_replica_list_by_regex_response__object_map_entry__init(&e->entry);
    crescent__master__object_replica_list__init(&e->value);
    e->entry.key = arena_strndup(c->arena, key, key_len); /* key views end with the callback */
    e->value.replica_list = replicas_pb(c->arena, replicas, &e->value.n_replica_list);
    e->value.has_checksum_xxh3 = replicas->has_checksum;
    e->value.checksum_xxh3 = replicas->checksum;
    e->entry.value = &e->value;
    e->next = c->head;
    c->head = e;
    c->count++;
}

static int m_get_regex(struct cr_rpc_run *run, struct cr_master_call *call,
                       struct cr_rpc_arena *a) {
    REQ(GetReplicaListByRegexRequest);
    struct regex_collect c = {.arena = a};
    Crescent__Master__GetReplicaListByRegexResponse resp =
        CRESCENT__MASTER__GET_REPLICA_LIST_BY_REGEX_RESPONSE__INIT;
    resp.status_code =
        run->scan != NULL
            ? cr_store_get_replica_list_by_scan(run->store, run->scan, run->now_ms, regex_match,
                                                &c)
            : cr_store_get_replica_list_by_regex(run->store, req->tenant_id, req->key_regex,
                                                 run->now_ms, regex_match, &c);
    resp.object_map = arena_alloc(a, c.count * sizeof(*resp.object_map) + 1);
    for (struct regex_entry *e = c.head; resp.object_map != NULL && e != NULL; e = e->next)
        resp.object_map[resp.n_object_map++] = &e->entry;
    finish(call, a, &resp.base);
    return resp.status_code;
}

static int m_remove(struct cr_rpc_run *run, struct cr_master_call *call, struct cr_rpc_arena *a) {
    REQ(RemoveRequest);
    Crescent__Master__RemoveResponse resp = CRESCENT__MASTER__REMOVE_RESPONSE__INIT;
    resp.status_code = cr_store_remove_k(run->store, call_key(call), req->force, run->now_ms);
    if (resp.status_code == CR_OK) {
        finish_ok(call, -1);
        return CR_OK;
    }
    finish(call, a, &resp.base);
    return resp.status_code;
}

static int m_remove_regex(struct cr_rpc_run *run, struct cr_master_call *call,
                          struct cr_rpc_arena *a) {
    REQ(RemoveByRegexRequest);
    uint64_t removed = 0;
    Crescent__Master__RemoveByRegexResponse resp = CRESCENT__MASTER__REMOVE_BY_REGEX_RESPONSE__INIT;
    resp.status_code =
        run->scan != NULL
            ? cr_store_remove_by_scan(run->store, run->scan, req->force, run->now_ms, &removed)
            : cr_store_remove_by_regex(run->store, req->tenant_id, req->key_regex, req->force,
                                       run->now_ms, &removed);
    resp.has_removed_count = 1;
    resp.removed_count = (int64_t)removed;
    finish(call, a, &resp.base);
    return resp.status_code;
}

static int m_remove_all(struct cr_rpc_run *run, struct cr_master_call *call,
                        struct cr_rpc_arena *a) {
    REQ(RemoveAllRequest);
    Crescent__Master__RemoveAllResponse resp = CRESCENT__MASTER__REMOVE_ALL_RESPONSE__INIT;
    resp.has_removed_count = 1;
    resp.removed_count =
        run->remove_all != NULL
            ? (int64_t)run->remove_all->removed
            : (int64_t)cr_store_remove_all(run->store, req->tenant_id, req->force, run->now_ms);
    finish(call, a, &resp.base);
    return CR_OK;
}

/* BatchQueryIp: the store calls back once per (client, host); two passes
 * (count, then fill) size each client's list exactly. */
struct ip_collect {
    struct cr_rpc_arena *arena;
    Crescent__Master__ClientIpEntry **entries;
    bool fill;
};

static void ip_host(void *ctx, size_t index, const char *host, size_t host_len) {
    struct ip_collect *c = ctx;
    Crescent__Master__IPAddressList *list = c->entries[index]->addresses;
    if (!c->fill) {
        list->n_ip_addresses++;
        return;
    }
    char *copy = arena_strndup(c->arena, host, host_len);
    if (copy != NULL && list->ip_addresses != NULL)
        list->ip_addresses[list->n_ip_addresses++] = copy;
}

static int m_query_ip(struct cr_rpc_run *run, struct cr_master_call *call, struct cr_rpc_arena *a) {
    REQ(BatchQueryIpRequest);
    size_t n = req->n_client_ids;
    Crescent__Master__BatchQueryIpResponse resp = CRESCENT__MASTER__BATCH_QUERY_IP_RESPONSE__INIT;
    struct cr_uuid *ids = arena_alloc(a, n * sizeof(*ids) + 1);
    struct ip_collect c = {.arena = a, .entries = arena_alloc(a, n * sizeof(*c.entries) + 1)};
    for (size_t i = 0; ids != NULL && c.entries != NULL && i < n; i++) {
        store_uuid(req->client_ids[i], &ids[i]);
        Crescent__Master__ClientIpEntry *e = arena_alloc(a, sizeof(*e));
        Crescent__Master__IPAddressList *l = arena_alloc(a, sizeof(*l));
        if (e == NULL || l == NULL) break;
        crescent__master__client_ip_entry__init(e);
        crescent__master__ipaddress_list__init(l);
        e->client_id = req->client_ids[i]; /* packed before the request is freed */
        e->addresses = l;
        c.entries[resp.n_client_ip_map++] = e;
    }
    if (!a->failed) {
        cr_store_batch_query_ip(run->store, ids, n, ip_host, &c);
        for (size_t i = 0; i < n; i++) {
            Crescent__Master__IPAddressList *l = c.entries[i]->addresses;
            l->ip_addresses = arena_alloc(a, l->n_ip_addresses * sizeof(char *) + 1);
            l->n_ip_addresses = 0;
        }
        c.fill = true;
        resp.status_code = cr_store_batch_query_ip(run->store, ids, n, ip_host, &c);
        /* Seed 004: clients not found or without mounted segments are
         * skipped, not answered with an empty list. */
        size_t kept = 0;
        for (size_t i = 0; i < resp.n_client_ip_map; i++)
            if (c.entries[i]->addresses->n_ip_addresses > 0) c.entries[kept++] = c.entries[i];
        resp.n_client_ip_map = kept;
        resp.client_ip_map = c.entries;
    }
    /* Mooncake: a client left out of the answer is a failed entry. */
    run->outcome.items = (uint32_t)n;
    run->outcome.failed_items = (uint32_t)(resp.status_code == CR_OK && !a->failed
                                               ? n - resp.n_client_ip_map : n);
    finish(call, a, &resp.base);
    return resp.status_code;
}

static int m_replica_clear(struct cr_rpc_run *run, struct cr_master_call *call,
                           struct cr_rpc_arena *a) {
    REQ(BatchReplicaClearRequest);
    size_t n = req->n_object_keys;
    struct cr_uuid id;
    store_uuid(req->client_id, &id);
    uint32_t *lens = arena_alloc(a, n * sizeof(*lens) + 1);
    bool *cleared = arena_alloc(a, n * sizeof(*cleared) + 1);
    Crescent__Master__BatchReplicaClearResponse resp =
        CRESCENT__MASTER__BATCH_REPLICA_CLEAR_RESPONSE__INIT;
    resp.cleared_keys = arena_alloc(a, n * sizeof(char *) + 1);
    if (!a->failed) {
        for (size_t i = 0; i < n; i++) lens[i] = (uint32_t)strlen(req->object_keys[i]);
        resp.status_code = cr_store_batch_replica_clear(
            run->store, req->tenant_id, (const char *const *)req->object_keys, lens, n, &id,
            req->segment_name, run->now_ms, cleared);
        for (size_t i = 0; resp.status_code == CR_OK && i < n; i++)
            if (cleared[i]) resp.cleared_keys[resp.n_cleared_keys++] = req->object_keys[i];
    }
    /* Mooncake: a key not cleared is a failed entry. */
    run->outcome.items = (uint32_t)n;
    run->outcome.failed_items = (uint32_t)(n - resp.n_cleared_keys);
    finish(call, a, &resp.base);
    return resp.status_code;
}

/* Why a DiskReplicaReport is refused whole, or NULL (text in `buf`). */
static const char *report_refusal(const struct cr_rpc_files *f, const char *view, char *buf,
                                  size_t len) {
    if (f == NULL || f->root[0] == '\0')
        return "crescentd has no shared file tier (start it with --root_fs_dir)";
    if (view != NULL && strcmp(view, f->root) == 0) return NULL;
    snprintf(buf, len, "this client's root_fs_dir '%s' is not crescentd's --root_fs_dir '%s'",
             view != NULL ? view : "", f->root);
    return buf;
}

/* One entry: records the file the master names for the key, or drops the
 * object's disk replica. */
static int report_entry(struct cr_rpc_run *run, const struct cr_rpc_files *f,
                        const Crescent__Master__DiskReplicaReportRequest__Entry *e) {
    uint32_t key_len = (uint32_t)strlen(e->key);
    struct cr_store_key k;
    cr_store_key_make(e->tenant_id, e->key, key_len, &k);
    if (e->has_dropped && e->dropped)
        return cr_store_drop_medium(run->store, &k, CR_MEDIUM_DISK, NULL, NULL);
    char name[CR_FILE_TIER_NAME_MAX], path[CR_STORE_FILE_PATH_LEN_MAX + 1];
    size_t n = cr_file_tier_name(e->tenant_id, e->key, key_len, name, sizeof(name));
    int w = n > 0 ? snprintf(path, sizeof(path), "%s/%s", f->dir, name) : -1;
    if (w < 0 || (size_t)w >= sizeof(path)) return CR_ERR_INVALID_PARAMS;
    return cr_store_add_disk_replica(run->store, &k, path, e->size,
                                     e->has_checksum_xxh3 ? e->checksum_xxh3 : 0, run->now_ms);
}

/* DiskReplicaReport (docs/tiers.md): persisted files become disk replicas,
 * gone or corrupt ones are dropped, and the file tier is brought back under
 * --global_file_segment_size. */
static int m_disk_report(struct cr_rpc_run *run, struct cr_master_call *call,
                         struct cr_rpc_arena *a) {
    REQ(DiskReplicaReportRequest);
    struct cr_uuid id;
    store_uuid(req->client_id, &id);
    Crescent__Master__DiskReplicaReportResponse resp =
        CRESCENT__MASTER__DISK_REPLICA_REPORT_RESPONSE__INIT;
    resp.status_code = check_secret(run, &id, req->has_client_secret, req->client_secret);
    struct cr_rpc_files *f = run->files;
    char text[CR_STORE_FILE_PATH_LEN_MAX + 128];
    const char *why = resp.status_code == CR_OK
                          ? report_refusal(f, req->root_fs_dir, text, sizeof(text)) : NULL;
    if (why != NULL) resp.status_code = CR_ERR_INVALID_PARAMS;
    resp.status_codes = arena_alloc(a, req->n_entries * sizeof(int32_t) + 1);
    if (resp.status_code == CR_OK && resp.status_codes != NULL) {
        f->reports++;
        f->failed[0] += req->failed_missing;
        f->failed[1] += req->failed_read_only;
        f->failed[2] += req->failed_full;
        f->failed[3] += req->failed_other;
        f->skipped_busy += req->skipped_busy;
        for (size_t i = 0; i < req->n_entries; i++) {
            const Crescent__Master__DiskReplicaReportRequest__Entry *e = req->entries[i];
            int rc = report_entry(run, f, e);
            resp.status_codes[resp.n_status_codes++] = rc;
            if (rc == CR_OK && e->has_dropped && e->dropped) f->dropped_files++;
            else if (rc == CR_OK) f->reported_files++;
        }
        cr_store_evict_disk(run->store, f->quota_bytes, run->now_ms, &f->rng);
    }
    if (why != NULL) resp.error_message = arena_strndup(a, why, strlen(why));
    finish(call, a, &resp.base);
    return resp.status_code;
}

/* LocalDiskReport (docs/tiers.md, "Local SSD tier"): a store server's SSD
 * files, re-registered after a restart or gone (its LRU evicted them, a read
 * found them corrupt).  Only the segment's owner reports on it. */
static int m_local_disk_report(struct cr_rpc_run *run, struct cr_master_call *call,
                               struct cr_rpc_arena *a) {
    REQ(LocalDiskReportRequest);
    struct cr_uuid id;
    store_uuid(req->client_id, &id);
    Crescent__Master__LocalDiskReportResponse resp =
        CRESCENT__MASTER__LOCAL_DISK_REPORT_RESPONSE__INIT;
    resp.status_code = check_secret(run, &id, req->has_client_secret, req->client_secret);
    resp.status_codes = arena_alloc(a, req->n_entries * sizeof(int32_t) + 1);
    for (size_t i = 0; resp.status_code == CR_OK && resp.status_codes != NULL &&
                       i < req->n_entries; i++) {
        const Crescent__Master__LocalDiskReportRequest__Entry *e = req->entries[i];
        struct cr_store_key k;
        cr_store_key_make(e->tenant_id, e->key, (uint32_t)strlen(e->key), &k);
        bool changed = false;
        int rc = e->has_gone && e->gone
                     ? cr_store_local_disk_gone(run->store, &k, req->segment_name, &id,
                                                e->position, &changed)
                     : cr_store_local_disk_register(run->store, &k, req->segment_name, &id,
                                                    e->position, e->size,
                                                    e->has_checksum_xxh3 ? e->checksum_xxh3 : 0,
                                                    run->now_ms, &changed);
        if (rc == CR_ERR_SEGMENT_NOT_FOUND || rc == CR_ERR_ILLEGAL_CLIENT) {
            resp.status_code = rc; /* the whole report: not this client's segment */
            const char *why = cr_store_last_error(run->store);
            resp.error_message = arena_strndup(a, why, strlen(why));
            break;
        }
        resp.status_codes[resp.n_status_codes++] = rc;
    }
    finish(call, a, &resp.base);
    return resp.status_code;
}

/* ------------------------------------------------------------------------ */

void cr_rpc_methods_prefetch(const cr_store *store, const struct cr_master_call *call,
                             bool deep) {
    assert(store != NULL && call != NULL);
    if (call->key.key != NULL) cr_store_prefetch(store, &call->key, deep);
}

typedef int (*method_fn)(struct cr_rpc_run *, struct cr_master_call *, struct cr_rpc_arena *);

static method_fn method_for(uint16_t id) {
    switch (id) {
    case CRESCENT__MASTER__METHOD__GET_VERSION: return m_get_version;
    case CRESCENT__MASTER__METHOD__PING: return m_ping;
    case CRESCENT__MASTER__METHOD__MOUNT_SEGMENT:
    case CRESCENT__MASTER__METHOD__REMOUNT_SEGMENT: return m_mount;
    case CRESCENT__MASTER__METHOD__UNMOUNT_SEGMENT: return m_unmount;
    case CRESCENT__MASTER__METHOD__PUT_START: return m_put_start;
    case CRESCENT__MASTER__METHOD__PUT_END:
    case CRESCENT__MASTER__METHOD__PUT_REVOKE: return m_put_end;
    case CRESCENT__MASTER__METHOD__BATCH_PUT_START: return m_batch_put_start;
    case CRESCENT__MASTER__METHOD__BATCH_PUT_END:
    case CRESCENT__MASTER__METHOD__BATCH_PUT_REVOKE: return m_batch_put_end;
    case CRESCENT__MASTER__METHOD__EXIST_KEY: return m_exist;
    case CRESCENT__MASTER__METHOD__BATCH_EXIST_KEY:
    case CRESCENT__MASTER__METHOD__BATCH_REMOVE: return m_batch_codes;
    case CRESCENT__MASTER__METHOD__GET_REPLICA_LIST: return m_get;
    case CRESCENT__MASTER__METHOD__BATCH_GET_REPLICA_LIST: return m_batch_get;
    case CRESCENT__MASTER__METHOD__GET_REPLICA_LIST_BY_REGEX: return m_get_regex;
    case CRESCENT__MASTER__METHOD__REMOVE: return m_remove;
    case CRESCENT__MASTER__METHOD__REMOVE_BY_REGEX: return m_remove_regex;
    case CRESCENT__MASTER__METHOD__REMOVE_ALL: return m_remove_all;
    case CRESCENT__MASTER__METHOD__BATCH_QUERY_IP: return m_query_ip;
    case CRESCENT__MASTER__METHOD__BATCH_REPLICA_CLEAR: return m_replica_clear;
    case CRESCENT__MASTER__METHOD__DISK_REPLICA_REPORT: return m_disk_report;
    case CRESCENT__MASTER__METHOD__LOCAL_DISK_REPORT: return m_local_disk_report;
    case CRESCENT__MASTER__METHOD__FETCH_TASKS:
    case CRESCENT__MASTER__METHOD__MARK_TASK_TO_COMPLETE: return m_task_gate;
    default: return NULL;
    }
}

bool cr_rpc_methods_regex(const struct cr_master_call *call, const char **tenant,
                          const char **pattern) {
    assert(call != NULL && tenant != NULL && pattern != NULL);
    if (call->request == NULL) return false; /* a batch read by hand */
    if (call->method == CRESCENT__MASTER__METHOD__GET_REPLICA_LIST_BY_REGEX) {
        const Crescent__Master__GetReplicaListByRegexRequest *req = (const void *)call->request;
        *tenant = req->tenant_id;
        *pattern = req->key_regex;
        return true;
    }
    if (call->method == CRESCENT__MASTER__METHOD__REMOVE_BY_REGEX) {
        const Crescent__Master__RemoveByRegexRequest *req = (const void *)call->request;
        *tenant = req->tenant_id;
        *pattern = req->key_regex;
        return true;
    }
    return false;
}

bool cr_rpc_methods_remove_all(const struct cr_master_call *call, const char **tenant,
                               bool *force) {
    assert(call != NULL && tenant != NULL && force != NULL);
    if (call->request == NULL || call->method != CRESCENT__MASTER__METHOD__REMOVE_ALL)
        return false;
    const Crescent__Master__RemoveAllRequest *req = (const void *)call->request;
    *tenant = req->tenant_id;
    *force = req->force;
    return true;
}

int cr_rpc_methods_run(struct cr_rpc_run *run, struct cr_master_call *call) {
    assert(run != NULL && run->store != NULL && run->arena != NULL);
    assert(call != NULL && (call->request != NULL || call->batch != NULL));
    assert(call->reply == NULL);
    /* The call's connection (its edge and the peer identity the edge gave
     * it), for the store to bind new clients and issue secrets to their own
     * connection only: one hash of at most CR_MASTER_IDENTITY_MAX bytes per
     * call, a few ns, no allocation. */
    cr_store_set_caller(run->store,
                        XXH3_64bits_withSeed(call->identity, call->identity_len, call->edge));
    method_fn fn = method_for(call->method);
    assert(fn != NULL); /* the gateway forwards known methods only */
    cr_store_clear_error(run->store);
    run->arena->store = run->store;
    int status = fn(run, call, run->arena);
    arena_reset(run->arena);
    return status;
}
