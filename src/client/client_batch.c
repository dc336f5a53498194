/* libcrescent's batch, regex and whole-store calls.  Batches allocate their
 * request arrays per call: they carry many keys each, so one malloc per batch
 * is noise next to the round trip; the per-object hot path is client_rpc.c. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "client/client_internal.h"

static int check_keys(cr_client *c, const char *const *keys, size_t count) {
    if (count == 0 || count > CR_CLIENT_BATCH_MAX || keys == NULL)
        return cr_client_fail(c, CR_ERR_INVALID_PARAMS, "a batch holds 1 to %u keys, not %zu",
                              CR_CLIENT_BATCH_MAX, count);
    for (size_t i = 0; i < count; i++) {
        const char *why;
        if (cr_client_check_key(keys[i], &why) != CR_OK)
            return cr_client_fail(c, CR_ERR_INVALID_PARAMS, "key #%zu: %s", i, why);
    }
    return CR_OK;
}

static int mismatch(cr_client *c, size_t got, size_t want) {
    return cr_client_fail(c, CR_ERR_PROTOCOL, "crescentd answered %zu items for %zu requested",
                          got, want);
}

/* Copies per-item status codes out of a batch response. */
static int take_statuses(cr_client *c, const int32_t *codes, size_t n, size_t want,
                         struct cr_status_list *out) {
    if (n != want) return mismatch(c, n, want);
    out->statuses = malloc(n * sizeof(*out->statuses));
    if (out->statuses == NULL) return cr_client_fail(c, CR_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) out->statuses[i] = codes[i];
    out->count = n;
    return CR_OK;
}

/* ---- batch puts ------------------------------------------------------- */

/* The decoder of both replies that carry a replica list per key (see
 * cr_client_decode_replica_lists): the lists go to `out` only when there
 * are as many as keys asked for. */
struct lists_reply {
    const char *what; /* the response's name, for a person */
    bool extras;
    size_t want;
    struct cr_replica_lists *out;
};

static int decode_lists(cr_client *c, const uint8_t *body, size_t len, void *ctx) {
    struct lists_reply *want = ctx;
    struct cr_client_top top;
    struct cr_replica_lists lists;
    int rc = cr_client_decode_replica_lists(body, len, want->extras, &top, &lists);
    if (rc == CR_ERR_NOMEM) return cr_client_fail(c, rc, "out of memory copying the reply");
    if (rc != CR_OK)
        return cr_client_fail(c, rc, "the reply (%zu bytes) is not a valid %s", len, want->what);
    if (top.status_code != CR_OK)
        rc = cr_client_refused(c, top.status_code, top.error, top.error_len);
    else if (lists.count != want->want) rc = mismatch(c, lists.count, want->want);
    if (rc != CR_OK) {
        cr_client_replica_lists_free(&lists);
        return rc;
    }
    *want->out = lists;
    return CR_OK;
}

int cr_client_batch_put_start(cr_client *c, const char *tenant, const struct cr_put_item *items,
                              size_t count, struct cr_replica_lists *out) {
    assert(c != NULL && out != NULL);
    memset(out, 0, sizeof(*out));
    if (count == 0 || count > CR_CLIENT_BATCH_MAX || items == NULL)
        return cr_client_fail(c, CR_ERR_INVALID_PARAMS, "a batch holds 1 to %u puts, not %zu",
                              CR_CLIENT_BATCH_MAX, count);
    struct cr_client_put_start_parts *parts = malloc(count * sizeof(*parts));
    Crescent__Master__PutStartRequest **reqs = malloc(count * sizeof(*reqs));
    int rc = parts != NULL && reqs != NULL ? CR_OK : cr_client_fail(c, CR_ERR_NOMEM, "no memory");
    for (size_t i = 0; rc == CR_OK && i < count; i++) {
        rc = cr_client_build_put_start(c, tenant, &items[i], &parts[i]);
        reqs[i] = &parts[i].req;
    }
    if (rc == CR_OK) {
        Crescent__Master__BatchPutStartRequest req =
            CRESCENT__MASTER__BATCH_PUT_START_REQUEST__INIT;
        req.n_requests = count;
        req.requests = reqs;
        struct lists_reply want = {"BatchPutStartResponse", false, count, out};
        rc = cr_client_call_decode(c, CR_METHOD_BATCH_PUT_START, &req.base, decode_lists, &want);
    }
    free(parts);
    free(reqs);
    return rc;
}

/* BatchPutEnd and BatchPutRevoke: PutEndRequest and PutRevokeRequest have the
 * same layout, so one array of PutEndRequest serves both. */
static int batch_end_or_revoke(cr_client *c, uint16_t method, const char *tenant,
                               const char *const *keys, const uint64_t *checksums,
                               size_t count, struct cr_status_list *out) {
    assert(c != NULL && out != NULL);
    memset(out, 0, sizeof(*out));
    int rc = cr_client_check_tenant(c, &tenant);
    if (rc == CR_OK) rc = check_keys(c, keys, count);
    if (rc != CR_OK) return rc;
    Crescent__Master__UUID id;
    cr_client_uuid_to_pb(c->id, &id);
    Crescent__Master__PutEndRequest *ends = malloc(count * sizeof(*ends));
    Crescent__Master__PutRevokeRequest *revokes = malloc(count * sizeof(*revokes));
    void **reqs = malloc(count * sizeof(*reqs));
    if (ends == NULL || revokes == NULL || reqs == NULL) {
        free(ends), free(revokes), free(reqs);
        return cr_client_fail(c, CR_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < count; i++) {
        crescent__master__put_end_request__init(&ends[i]);
        crescent__master__put_revoke_request__init(&revokes[i]);
        ends[i].key = revokes[i].key = (char *)keys[i];
        ends[i].tenant_id = revokes[i].tenant_id = (char *)tenant;
        ends[i].client_id = revokes[i].client_id = &id;
        cr_client_secret_to_pb(c, &ends[i].has_client_secret, &ends[i].client_secret);
        cr_client_secret_to_pb(c, &revokes[i].has_client_secret, &revokes[i].client_secret);
        ends[i].has_checksum_xxh3 = checksums != NULL;
        ends[i].checksum_xxh3 = checksums != NULL ? checksums[i] : 0;
        reqs[i] = method == CR_METHOD_BATCH_PUT_END ? (void *)&ends[i] : (void *)&revokes[i];
    }
    Crescent__Master__BatchPutEndRequest end = CRESCENT__MASTER__BATCH_PUT_END_REQUEST__INIT;
    Crescent__Master__BatchPutRevokeRequest rev = CRESCENT__MASTER__BATCH_PUT_REVOKE_REQUEST__INIT;
    end.n_requests = rev.n_requests = count;
    end.requests = (Crescent__Master__PutEndRequest **)reqs;
    rev.requests = (Crescent__Master__PutRevokeRequest **)reqs;
    ProtobufCMessage *msg;
    rc = cr_client_call(c, method, method == CR_METHOD_BATCH_PUT_END ? &end.base : &rev.base, &msg);
    if (rc == CR_OK) {
        /* Both responses are {status_code, repeated int32 status_codes}. */
        Crescent__Master__BatchPutEndResponse *r = (Crescent__Master__BatchPutEndResponse *)msg;
        rc = take_statuses(c, r->status_codes, r->n_status_codes, count, out);
        protobuf_c_message_free_unpacked(msg, NULL);
    }
    free(ends), free(revokes), free(reqs);
    return rc;
}

int cr_client_batch_put_end(cr_client *c, const char *tenant, const char *const *keys,
                            size_t count, struct cr_status_list *out) {
    return batch_end_or_revoke(c, CR_METHOD_BATCH_PUT_END, tenant, keys, NULL, count, out);
}

int cr_client_batch_put_end_checksums(cr_client *c, const char *tenant,
                                      const char *const *keys, const uint64_t *checksums,
                                      size_t count, struct cr_status_list *out) {
    assert(checksums != NULL);
    return batch_end_or_revoke(c, CR_METHOD_BATCH_PUT_END, tenant, keys, checksums, count, out);
}

int cr_client_batch_put_revoke(cr_client *c, const char *tenant, const char *const *keys,
                               size_t count, struct cr_status_list *out) {
    return batch_end_or_revoke(c, CR_METHOD_BATCH_PUT_REVOKE, tenant, keys, NULL, count, out);
}

/* ---- batch reads and removes ------------------------------------------ */

int cr_client_batch_exist_key(cr_client *c, const char *tenant, const char *const *keys,
                              size_t count, struct cr_status_list *out) {
    assert(c != NULL && out != NULL);
    memset(out, 0, sizeof(*out));
    int rc = cr_client_check_tenant(c, &tenant);
    if (rc == CR_OK) rc = check_keys(c, keys, count);
    if (rc != CR_OK) return rc;
    Crescent__Master__BatchExistKeyRequest req = CRESCENT__MASTER__BATCH_EXIST_KEY_REQUEST__INIT;
    req.n_keys = count;
    req.keys = (char **)keys; /* read only while packing */
    req.tenant_id = (char *)tenant;
    ProtobufCMessage *msg;
    rc = cr_client_call(c, CR_METHOD_BATCH_EXIST_KEY, &req.base, &msg);
    if (rc != CR_OK) return rc;
    Crescent__Master__BatchExistKeyResponse *r = (Crescent__Master__BatchExistKeyResponse *)msg;
    rc = take_statuses(c, r->status_codes, r->n_status_codes, count, out);
    protobuf_c_message_free_unpacked(msg, NULL);
    return rc;
}

int cr_client_batch_remove(cr_client *c, const char *tenant, const char *const *keys,
                           size_t count, bool force, struct cr_status_list *out) {
    assert(c != NULL && out != NULL);
    memset(out, 0, sizeof(*out));
    int rc = cr_client_check_tenant(c, &tenant);
    if (rc == CR_OK) rc = check_keys(c, keys, count);
    if (rc != CR_OK) return rc;
    Crescent__Master__BatchRemoveRequest req = CRESCENT__MASTER__BATCH_REMOVE_REQUEST__INIT;
    req.n_keys = count;
    req.keys = (char **)keys;
    req.tenant_id = (char *)tenant;
    req.has_force = force;
    req.force = force;
    req.admin_token = force ? c->admin_token : NULL; /* only a forced BatchRemove needs it */
    ProtobufCMessage *msg;
    rc = cr_client_call(c, CR_METHOD_BATCH_REMOVE, &req.base, &msg);
    if (rc != CR_OK) return rc;
    Crescent__Master__BatchRemoveResponse *r = (Crescent__Master__BatchRemoveResponse *)msg;
    rc = take_statuses(c, r->status_codes, r->n_status_codes, count, out);
    protobuf_c_message_free_unpacked(msg, NULL);
    return rc;
}

int cr_client_batch_get_replica_list(cr_client *c, const char *tenant, const char *const *keys,
                                     size_t count, struct cr_replica_lists *out) {
    assert(c != NULL && out != NULL);
    memset(out, 0, sizeof(*out));
    int rc = cr_client_check_tenant(c, &tenant);
    if (rc == CR_OK) rc = check_keys(c, keys, count);
    if (rc != CR_OK) return rc;
    Crescent__Master__BatchGetReplicaListRequest req =
        CRESCENT__MASTER__BATCH_GET_REPLICA_LIST_REQUEST__INIT;
    req.n_keys = count;
    req.keys = (char **)keys;
    req.tenant_id = (char *)tenant;
    struct lists_reply want = {"BatchGetReplicaListResponse", true, count, out};
    return cr_client_call_decode(c, CR_METHOD_BATCH_GET_REPLICA_LIST, &req.base, decode_lists,
                                 &want);
}
