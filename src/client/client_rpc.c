/* libcrescent's single-object calls, blocking and pipelined: every argument
 * is checked here, before anything is sent. */
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "client/client_internal.h"

#define TOKENS_MAX (1u << 20)

int cr_client_check_tenant(cr_client *c, const char **tenant) {
    if (*tenant == NULL) *tenant = CR_CLIENT_DEFAULT_TENANT;
    char why[128];
    if (cr_client_check_name(*tenant, "tenant id", why, sizeof(why)) != CR_OK)
        return cr_client_fail(c, CR_ERR_INVALID_PARAMS, "%s", why);
    return CR_OK;
}

int cr_client_require_key(cr_client *c, const char *key) {
    const char *why;
    if (cr_client_check_key(key, &why) != CR_OK)
        return cr_client_fail(c, CR_ERR_INVALID_PARAMS, "%s", why);
    return CR_OK;
}

int cr_client_require_name(cr_client *c, const char *name, const char *what) {
    char why[128];
    if (cr_client_check_name(name, what, why, sizeof(why)) != CR_OK)
        return cr_client_fail(c, CR_ERR_INVALID_PARAMS, "%s", why);
    return CR_OK;
}

static int check_block(cr_client *c, const struct cr_block_info *b) {
    if (b->token_count > TOKENS_MAX || (b->token_count > 0 && b->token_ids == NULL))
        return cr_client_fail(c, CR_ERR_INVALID_PARAMS,
                              "token_ids: %zu tokens (at most %u, and not NULL)",
                              b->token_count, TOKENS_MAX);
    const char *strings[] = {b->model_name, b->block_hash, b->parent_block_hash};
    for (size_t i = 0; i < 3; i++) {
        if (strings[i] != NULL && strnlen(strings[i], CR_CLIENT_KEY_MAX + 1) > CR_CLIENT_KEY_MAX)
            return cr_client_fail(c, CR_ERR_INVALID_PARAMS, "block metadata string over %u bytes",
                                  CR_CLIENT_KEY_MAX);
    }
    return CR_OK;
}

static void fill_block(const struct cr_block_info *b, Crescent__Master__BlockInfo *out) {
    crescent__master__block_info__init(out);
    /* protobuf-c wants char *, but only reads the strings while packing. */
    out->model_name = (char *)b->model_name;
    out->has_block_size = b->block_size != 0;
    out->block_size = b->block_size;
    out->block_hash = (char *)b->block_hash;
    out->parent_block_hash = (char *)b->parent_block_hash;
    out->n_token_ids = b->token_count;
    out->token_ids = (uint32_t *)b->token_ids;
}

int cr_client_build_put_start(cr_client *c, const char *tenant, const struct cr_put_item *item,
                              struct cr_client_put_start_parts *p) {
    if (item == NULL) return cr_client_fail(c, CR_ERR_INVALID_PARAMS, "no put item");
    int rc = cr_client_check_tenant(c, &tenant);
    if (rc == CR_OK) rc = cr_client_require_key(c, item->key);
    if (rc != CR_OK) return rc;
    if (item->size_bytes > INT64_MAX) /* 0 is an empty object */
        return cr_client_fail(c, CR_ERR_INVALID_PARAMS, "size %llu is outside 0..2^63-1 bytes",
                              (unsigned long long)item->size_bytes);
    const struct cr_replicate_config *cfg = item->config;
    if (cfg != NULL && cfg->replica_num == 0)
        return cr_client_fail(c, CR_ERR_INVALID_PARAMS, "replica_num must be at least 1");
    if (cfg != NULL && cfg->preferred_segment != NULL &&
        (rc = cr_client_require_name(c, cfg->preferred_segment, "preferred segment")) != CR_OK)
        return rc;
    if (item->block != NULL && (rc = check_block(c, item->block)) != CR_OK) return rc;
    crescent__master__replicate_config__init(&p->config);
    p->config.has_replica_num = true;
    p->config.replica_num = cfg != NULL ? cfg->replica_num : 1;
    p->config.has_with_soft_pin = cfg != NULL && cfg->with_soft_pin;
    p->config.with_soft_pin = cfg != NULL && cfg->with_soft_pin;
    p->config.preferred_segment = cfg != NULL ? (char *)cfg->preferred_segment : NULL;
    crescent__master__put_start_request__init(&p->req);
    p->req.key = (char *)item->key;
    p->req.value_length = (int64_t)item->size_bytes;
    p->req.config = &p->config;
    p->req.tenant_id = (char *)tenant;
    cr_client_uuid_to_pb(c->id, &p->id);
    p->req.client_id = &p->id;
    cr_client_secret_to_pb(c, &p->req.has_client_secret, &p->req.client_secret);
    if (item->block != NULL) {
        fill_block(item->block, &p->block);
        p->req.block = &p->block;
    }
    return CR_OK;
}

/* ---- connection-level calls ------------------------------------------- */

int cr_client_get_version(cr_client *c, struct cr_version *out) {
    assert(c != NULL && out != NULL);
    memset(out, 0, sizeof(*out));
    Crescent__Master__GetVersionRequest req = CRESCENT__MASTER__GET_VERSION_REQUEST__INIT;
    ProtobufCMessage *msg;
    int rc = cr_client_call(c, CR_METHOD_GET_VERSION, &req.base, &msg);
    if (rc != CR_OK) return rc;
    Crescent__Master__GetVersionResponse *resp = (Crescent__Master__GetVersionResponse *)msg;
    snprintf(out->version, sizeof(out->version), "%s", resp->version ? resp->version : "");
    out->ready = resp->has_ready && resp->ready;
    protobuf_c_message_free_unpacked(msg, NULL);
    return CR_OK;
}

int cr_client_ping(cr_client *c, uint64_t *ttl_ms) { return cr_client_heartbeat(c, ttl_ms, NULL); }

int cr_client_heartbeat(cr_client *c, uint64_t *ttl_ms, bool *known) {
    assert(c != NULL);
    Crescent__Master__UUID id;
    cr_client_uuid_to_pb(c->id, &id);
    Crescent__Master__PingRequest req = CRESCENT__MASTER__PING_REQUEST__INIT;
    req.client_id = &id;
    cr_client_secret_to_pb(c, &req.has_client_secret, &req.client_secret);
    struct cr_client_read_report reads;
    cr_client_read_report_attach(c, &reads, &req);
    ProtobufCMessage *msg;
    int rc = cr_client_call(c, CR_METHOD_PING, &req.base, &msg);
    if (rc != CR_OK) return rc;
    Crescent__Master__PingResponse *resp = (Crescent__Master__PingResponse *)msg;
    if (resp->status_code == CR_OK) cr_client_read_report_sent(c, &reads);
    cr_client_secret_take(c, resp->has_client_secret, resp->client_secret);
    if (ttl_ms != NULL) *ttl_ms = resp->has_client_ttl_ms ? resp->client_ttl_ms : 0;
    /* A master that does not say is taken to know us: nothing to redo. */
    if (known != NULL) *known = !resp->has_client_known || resp->client_known;
    protobuf_c_message_free_unpacked(msg, NULL);
    return CR_OK;
}

static int mount(cr_client *c, uint16_t method, const struct cr_segment_spec *spec) {
    assert(c != NULL);
    if (spec == NULL) return cr_client_fail(c, CR_ERR_INVALID_PARAMS, "no segment given");
    int rc = cr_client_require_name(c, spec->name, "segment name");
    if (rc == CR_OK && spec->protocol != NULL)
        rc = cr_client_require_name(c, spec->protocol, "protocol");
    if (rc != CR_OK) return rc;
    if (spec->size_bytes == 0 || spec->base > UINT64_MAX - spec->size_bytes)
        return cr_client_fail(c, CR_ERR_INVALID_PARAMS,
                              "segment size must be > 0 and base + size must fit in 64 bits");
    if (spec->transport_endpoint != NULL &&
        strnlen(spec->transport_endpoint, CR_CLIENT_ENDPOINT_MAX + 1) > CR_CLIENT_ENDPOINT_MAX)
        return cr_client_fail(c, CR_ERR_INVALID_PARAMS, "transport endpoint over %u bytes",
                              CR_CLIENT_ENDPOINT_MAX);
    Crescent__Master__UUID id;
    cr_client_uuid_to_pb(c->id, &id);
    Crescent__Master__MountSegmentRequest req = CRESCENT__MASTER__MOUNT_SEGMENT_REQUEST__INIT;
    req.buffer = spec->base;
    req.size = spec->size_bytes;
    req.segment_name = (char *)spec->name;
    req.client_id = &id;
    req.transport_endpoint = (char *)spec->transport_endpoint;
    if (spec->protocol != NULL) req.protocol = (char *)spec->protocol;
    if (spec->capability_key != NULL) { /* never logged: it signs every capability */
        req.has_capability_key = 1;
        req.capability_key = (ProtobufCBinaryData){.len = CR_CLIENT_CAPABILITY_KEY_BYTES,
                                                   .data = (uint8_t *)spec->capability_key};
    }
    req.has_ssd_capacity = spec->ssd_capacity_bytes > 0;
    req.ssd_capacity = spec->ssd_capacity_bytes;
    cr_client_secret_to_pb(c, &req.has_client_secret, &req.client_secret);
    ProtobufCMessage *msg;
    rc = cr_client_call(c, method, &req.base, &msg);
    if (rc != CR_OK) return rc;
    const Crescent__Master__MountSegmentResponse *resp = (const void *)msg;
    cr_client_secret_take(c, resp->has_client_secret, resp->client_secret);
    protobuf_c_message_free_unpacked(msg, NULL);
    return CR_OK;
}

int cr_client_mount_segment(cr_client *c, const struct cr_segment_spec *spec) {
    return mount(c, CR_METHOD_MOUNT_SEGMENT, spec);
}

int cr_client_remount_segment(cr_client *c, const struct cr_segment_spec *spec) {
    return mount(c, CR_METHOD_REMOUNT_SEGMENT, spec);
}

int cr_client_unmount_segment(cr_client *c, const char *name) {
    assert(c != NULL);
    int rc = cr_client_require_name(c, name, "segment name");
    if (rc != CR_OK) return rc;
    Crescent__Master__UUID id;
    cr_client_uuid_to_pb(c->id, &id);
    Crescent__Master__UnmountSegmentRequest req = CRESCENT__MASTER__UNMOUNT_SEGMENT_REQUEST__INIT;
    req.segment_name = (char *)name;
    req.client_id = &id;
    req.admin_token = c->admin_token; /* lets an admin unmount another's segment */
    cr_client_secret_to_pb(c, &req.has_client_secret, &req.client_secret);
    ProtobufCMessage *msg;
    rc = cr_client_call(c, CR_METHOD_UNMOUNT_SEGMENT, &req.base, &msg);
    if (rc == CR_OK) protobuf_c_message_free_unpacked(msg, NULL);
    return rc;
}

/* ---- puts ------------------------------------------------------------- */

int cr_client_put_start(cr_client *c, const char *tenant, const struct cr_put_item *item,
                        struct cr_replica_list *out) {
    assert(c != NULL && out != NULL);
    memset(out, 0, sizeof(*out));
    struct cr_client_put_start_parts p;
    int rc = cr_client_build_put_start(c, tenant, item, &p);
    if (rc != CR_OK) return rc;
    ProtobufCMessage *msg;
    rc = cr_client_call(c, CR_METHOD_PUT_START, &p.req.base, &msg);
    if (rc != CR_OK) return rc;
    Crescent__Master__PutStartResponse *resp = (Crescent__Master__PutStartResponse *)msg;
    rc = cr_client_replicas_from_pb(resp->replica_list, resp->n_replica_list, out);
    protobuf_c_message_free_unpacked(msg, NULL);
    return rc == CR_OK ? CR_OK : cr_client_fail(c, rc, "out of memory copying the reply");
}

/* PutEnd and PutRevoke have the same fields: key, tenant, client id. */
static int end_or_revoke(cr_client *c, uint16_t method, const char *tenant, const char *key,
                         const uint64_t *checksum, uint64_t *submit_id) {
    assert(c != NULL);
    int rc = cr_client_check_tenant(c, &tenant);
    if (rc == CR_OK) rc = cr_client_require_key(c, key);
    if (rc != CR_OK) return rc;
    Crescent__Master__UUID id;
    cr_client_uuid_to_pb(c->id, &id);
    Crescent__Master__PutEndRequest end = CRESCENT__MASTER__PUT_END_REQUEST__INIT;
    Crescent__Master__PutRevokeRequest revoke = CRESCENT__MASTER__PUT_REVOKE_REQUEST__INIT;
    end.key = revoke.key = (char *)key;
    end.tenant_id = revoke.tenant_id = (char *)tenant;
    end.client_id = revoke.client_id = &id;
    cr_client_secret_to_pb(c, &end.has_client_secret, &end.client_secret);
    cr_client_secret_to_pb(c, &revoke.has_client_secret, &revoke.client_secret);
    end.has_checksum_xxh3 = checksum != NULL;
    end.checksum_xxh3 = checksum != NULL ? *checksum : 0;
    const ProtobufCMessage *req = method == CR_METHOD_PUT_END ? &end.base : &revoke.base;
    if (submit_id != NULL) return cr_client_submit(c, method, req, submit_id);
    ProtobufCMessage *msg;
    rc = cr_client_call(c, method, req, &msg);
    if (rc == CR_OK) protobuf_c_message_free_unpacked(msg, NULL);
    return rc;
}

int cr_client_put_end(cr_client *c, const char *tenant, const char *key) {
    return end_or_revoke(c, CR_METHOD_PUT_END, tenant, key, NULL, NULL);
}

int cr_client_put_end_checksum(cr_client *c, const char *tenant, const char *key,
                               uint64_t checksum_xxh3) {
    return end_or_revoke(c, CR_METHOD_PUT_END, tenant, key, &checksum_xxh3, NULL);
}

int cr_client_put_revoke(cr_client *c, const char *tenant, const char *key) {
    return end_or_revoke(c, CR_METHOD_PUT_REVOKE, tenant, key, NULL, NULL);
}

/* ---- reads and removes ------------------------------------------------ */

/* ExistKey, GetReplicaList: {key, tenant}; Remove adds force. */
static int keyed(cr_client *c, uint16_t method, const char *tenant, const char *key, bool force,
                 uint64_t *submit_id, ProtobufCMessage **msg) {
    assert(c != NULL);
    int rc = cr_client_check_tenant(c, &tenant);
    if (rc == CR_OK) rc = cr_client_require_key(c, key);
    if (rc != CR_OK) return rc;
    Crescent__Master__ExistKeyRequest exist = CRESCENT__MASTER__EXIST_KEY_REQUEST__INIT;
    Crescent__Master__GetReplicaListRequest get = CRESCENT__MASTER__GET_REPLICA_LIST_REQUEST__INIT;
    Crescent__Master__RemoveRequest rm = CRESCENT__MASTER__REMOVE_REQUEST__INIT;
    exist.key = get.key = rm.key = (char *)key;
    exist.tenant_id = get.tenant_id = rm.tenant_id = (char *)tenant;
    rm.has_force = force;
    rm.force = force;
    rm.admin_token = force ? c->admin_token : NULL; /* only a forced Remove needs it */
    const ProtobufCMessage *req = method == CR_METHOD_EXIST_KEY        ? &exist.base
                                  : method == CR_METHOD_GET_REPLICA_LIST ? &get.base
                                                                         : &rm.base;
    if (submit_id != NULL) return cr_client_submit(c, method, req, submit_id);
    return cr_client_call(c, method, req, msg);
}

int cr_client_exist_key(cr_client *c, const char *tenant, const char *key, bool *exists) {
    assert(exists != NULL);
    *exists = false;
    ProtobufCMessage *msg;
    int rc = keyed(c, CR_METHOD_EXIST_KEY, tenant, key, false, NULL, &msg);
    if (rc != CR_OK) return rc;
    Crescent__Master__ExistKeyResponse *resp = (Crescent__Master__ExistKeyResponse *)msg;
    *exists = resp->has_exists && resp->exists;
    protobuf_c_message_free_unpacked(msg, NULL);
    return CR_OK;
}

int cr_client_get_replica_list(cr_client *c, const char *tenant, const char *key,
                               struct cr_replica_list *out) {
    assert(out != NULL);
    memset(out, 0, sizeof(*out));
    ProtobufCMessage *msg;
    int rc = keyed(c, CR_METHOD_GET_REPLICA_LIST, tenant, key, false, NULL, &msg);
    if (rc != CR_OK) return rc;
    Crescent__Master__GetReplicaListResponse *resp =
        (Crescent__Master__GetReplicaListResponse *)msg;
    rc = cr_client_replicas_from_pb(resp->replica_list, resp->n_replica_list, out);
    if (rc == CR_OK) cr_client_list_extras_from_pb(resp, out);
    protobuf_c_message_free_unpacked(msg, NULL);
    return rc == CR_OK ? CR_OK : cr_client_fail(c, rc, "out of memory copying the reply");
}

int cr_client_remove(cr_client *c, const char *tenant, const char *key, bool force) {
    ProtobufCMessage *msg;
    int rc = keyed(c, CR_METHOD_REMOVE, tenant, key, force, NULL, &msg);
    if (rc == CR_OK) protobuf_c_message_free_unpacked(msg, NULL);
    return rc;
}

/* ---- pipelined forms -------------------------------------------------- */

int cr_client_submit_put_start(cr_client *c, const char *tenant, const struct cr_put_item *item,
                               uint64_t *request_id) {
    assert(c != NULL && request_id != NULL);
    struct cr_client_put_start_parts p;
    int rc = cr_client_build_put_start(c, tenant, item, &p);
    if (rc != CR_OK) return rc;
    return cr_client_submit(c, CR_METHOD_PUT_START, &p.req.base, request_id);
}

int cr_client_submit_put_end(cr_client *c, const char *tenant, const char *key,
                             uint64_t *request_id) {
    assert(request_id != NULL);
    return end_or_revoke(c, CR_METHOD_PUT_END, tenant, key, NULL, request_id);
}

int cr_client_submit_put_revoke(cr_client *c, const char *tenant, const char *key,
                                uint64_t *request_id) {
    assert(request_id != NULL);
    return end_or_revoke(c, CR_METHOD_PUT_REVOKE, tenant, key, NULL, request_id);
}

int cr_client_submit_exist_key(cr_client *c, const char *tenant, const char *key,
                               uint64_t *request_id) {
    assert(request_id != NULL);
    return keyed(c, CR_METHOD_EXIST_KEY, tenant, key, false, request_id, NULL);
}

int cr_client_submit_get_replica_list(cr_client *c, const char *tenant, const char *key,
                                      uint64_t *request_id) {
    assert(request_id != NULL);
    return keyed(c, CR_METHOD_GET_REPLICA_LIST, tenant, key, false, request_id, NULL);
}

int cr_client_submit_remove(cr_client *c, const char *tenant, const char *key, bool force,
                            uint64_t *request_id) {
    assert(request_id != NULL);
    return keyed(c, CR_METHOD_REMOVE, tenant, key, force, request_id, NULL);
}

int cr_client_submit_ping(cr_client *c, uint64_t *request_id) {
    assert(c != NULL && request_id != NULL);
    Crescent__Master__UUID id;
    cr_client_uuid_to_pb(c->id, &id);
    Crescent__Master__PingRequest req = CRESCENT__MASTER__PING_REQUEST__INIT;
    req.client_id = &id;
    cr_client_secret_to_pb(c, &req.has_client_secret, &req.client_secret);
    return cr_client_submit(c, CR_METHOD_PING, &req.base, request_id);
}
