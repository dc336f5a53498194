/* libcrescent's regex, whole-store and client-level calls: regex reads and
 * removes, RemoveAll, BatchQueryIp, BatchReplicaClear. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "client/client_internal.h"

static int check_regex(cr_client *c, const char *regex) {
    if (regex == NULL || regex[0] == '\0' ||
        strnlen(regex, CR_CLIENT_KEY_MAX + 1) > CR_CLIENT_KEY_MAX)
        return cr_client_fail(c, CR_ERR_INVALID_PARAMS, "the regex is empty or over %u bytes",
                              CR_CLIENT_KEY_MAX);
    return CR_OK;
}

static int take_object_map(cr_client *c, const Crescent__Master__GetReplicaListByRegexResponse *r,
                           struct cr_replica_lists *out) {
    out->lists = calloc(r->n_object_map > 0 ? r->n_object_map : 1, sizeof(*out->lists));
    if (out->lists == NULL) return cr_client_fail(c, CR_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < r->n_object_map; i++) {
        const Crescent__Master__GetReplicaListByRegexResponse__ObjectMapEntry *e =
            r->object_map[i];
        struct cr_replica_list *list = &out->lists[i];
        int rc = e->value == NULL
                     ? cr_client_replicas_from_pb(NULL, 0, list)
                     : cr_client_replicas_from_pb(e->value->replica_list,
                                                  e->value->n_replica_list, list);
        out->count = i + 1; /* counted first: the free below sees it */
        if (e->value != NULL && e->value->has_checksum_xxh3) {
            list->has_checksum = true;
            list->checksum_xxh3 = e->value->checksum_xxh3;
        }
        list->key = strdup(e->key != NULL ? e->key : "");
        if (rc != CR_OK || list->key == NULL) {
            cr_client_replica_lists_free(out);
            return cr_client_fail(c, CR_ERR_NOMEM, "out of memory copying the reply");
        }
    }
    return CR_OK;
}

int cr_client_get_replica_list_by_regex(cr_client *c, const char *tenant, const char *regex,
                                        struct cr_replica_lists *out) {
    assert(c != NULL && out != NULL);
    memset(out, 0, sizeof(*out));
    int rc = cr_client_check_tenant(c, &tenant);
    if (rc == CR_OK) rc = check_regex(c, regex);
    if (rc != CR_OK) return rc;
    Crescent__Master__GetReplicaListByRegexRequest req =
        CRESCENT__MASTER__GET_REPLICA_LIST_BY_REGEX_REQUEST__INIT;
    req.key_regex = (char *)regex;
    req.tenant_id = (char *)tenant;
    ProtobufCMessage *msg;
    rc = cr_client_call(c, CR_METHOD_GET_REPLICA_LIST_BY_REGEX, &req.base, &msg);
    if (rc != CR_OK) return rc;
    rc = take_object_map(c, (Crescent__Master__GetReplicaListByRegexResponse *)msg, out);
    protobuf_c_message_free_unpacked(msg, NULL);
    return rc;
}

int cr_client_remove_by_regex(cr_client *c, const char *tenant, const char *regex, bool force,
                              int64_t *removed) {
    assert(c != NULL);
    if (removed != NULL) *removed = 0;
    int rc = cr_client_check_tenant(c, &tenant);
    if (rc == CR_OK) rc = check_regex(c, regex);
    if (rc != CR_OK) return rc;
    Crescent__Master__RemoveByRegexRequest req = CRESCENT__MASTER__REMOVE_BY_REGEX_REQUEST__INIT;
    req.key_regex = (char *)regex;
    req.tenant_id = (char *)tenant;
    req.has_force = force;
    req.force = force;
    req.admin_token = c->admin_token;
    ProtobufCMessage *msg;
    rc = cr_client_call(c, CR_METHOD_REMOVE_BY_REGEX, &req.base, &msg);
    if (rc != CR_OK) return rc;
    Crescent__Master__RemoveByRegexResponse *r = (Crescent__Master__RemoveByRegexResponse *)msg;
    if (removed != NULL) *removed = r->has_removed_count ? r->removed_count : 0;
    protobuf_c_message_free_unpacked(msg, NULL);
    return CR_OK;
}

int cr_client_remove_all(cr_client *c, const char *tenant, bool force, int64_t *removed) {
    assert(c != NULL);
    if (removed != NULL) *removed = 0;
    int rc = tenant != NULL ? cr_client_require_name(c, tenant, "tenant id") : CR_OK;
    if (rc != CR_OK) return rc;
    Crescent__Master__RemoveAllRequest req = CRESCENT__MASTER__REMOVE_ALL_REQUEST__INIT;
    req.tenant_id = (char *)tenant; /* NULL: every tenant */
    req.has_force = force;
    req.force = force;
    req.admin_token = c->admin_token;
    ProtobufCMessage *msg;
    rc = cr_client_call(c, CR_METHOD_REMOVE_ALL, &req.base, &msg);
    if (rc != CR_OK) return rc;
    Crescent__Master__RemoveAllResponse *r = (Crescent__Master__RemoveAllResponse *)msg;
    if (removed != NULL) *removed = r->has_removed_count ? r->removed_count : 0;
    protobuf_c_message_free_unpacked(msg, NULL);
    return CR_OK;
}

/* ---- client-level calls ----------------------------------------------- */

static int copy_addresses(const Crescent__Master__IPAddressList *in, struct cr_client_ip *out) {
    out->count = 0;
    out->addresses = NULL;
    if (in == NULL || in->n_ip_addresses == 0) return CR_OK;
    out->addresses = calloc(in->n_ip_addresses, sizeof(*out->addresses));
    if (out->addresses == NULL) return CR_ERR_NOMEM;
    for (size_t i = 0; i < in->n_ip_addresses; i++) {
        out->addresses[i] = strdup(in->ip_addresses[i] != NULL ? in->ip_addresses[i] : "");
        out->count = i + 1;
        if (out->addresses[i] == NULL) return CR_ERR_NOMEM;
    }
    return CR_OK;
}

static int take_ips(cr_client *c, const Crescent__Master__BatchQueryIpResponse *r,
                    struct cr_client_ips *out) {
    out->entries = calloc(r->n_client_ip_map > 0 ? r->n_client_ip_map : 1, sizeof(*out->entries));
    if (out->entries == NULL) return cr_client_fail(c, CR_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < r->n_client_ip_map; i++) {
        const Crescent__Master__ClientIpEntry *e = r->client_ip_map[i];
        out->count = i + 1;
        cr_client_uuid_from_pb(e->client_id, out->entries[i].client_id);
        if (copy_addresses(e->addresses, &out->entries[i]) != CR_OK) {
            cr_client_ips_free(out);
            return cr_client_fail(c, CR_ERR_NOMEM, "out of memory copying the reply");
        }
    }
    return CR_OK;
}

int cr_client_batch_query_ip(cr_client *c, const uint8_t (*client_ids)[CR_CLIENT_ID_BYTES],
                             size_t count, struct cr_client_ips *out) {
    assert(c != NULL && out != NULL);
    memset(out, 0, sizeof(*out));
    if (count == 0 || count > CR_CLIENT_BATCH_MAX || client_ids == NULL)
        return cr_client_fail(c, CR_ERR_INVALID_PARAMS, "a batch holds 1 to %u ids, not %zu",
                              CR_CLIENT_BATCH_MAX, count);
    Crescent__Master__UUID *ids = malloc(count * sizeof(*ids));
    Crescent__Master__UUID **ptrs = malloc(count * sizeof(*ptrs));
    int rc = ids != NULL && ptrs != NULL ? CR_OK : cr_client_fail(c, CR_ERR_NOMEM, "no memory");
    for (size_t i = 0; rc == CR_OK && i < count; i++) {
        cr_client_uuid_to_pb(client_ids[i], &ids[i]);
        ptrs[i] = &ids[i];
    }
    ProtobufCMessage *msg = NULL;
    if (rc == CR_OK) {
        Crescent__Master__BatchQueryIpRequest req = CRESCENT__MASTER__BATCH_QUERY_IP_REQUEST__INIT;
        req.n_client_ids = count;
        req.client_ids = ptrs;
        req.admin_token = c->admin_token;
        rc = cr_client_call(c, CR_METHOD_BATCH_QUERY_IP, &req.base, &msg);
    }
    if (rc == CR_OK) rc = take_ips(c, (Crescent__Master__BatchQueryIpResponse *)msg, out);
    if (msg != NULL) protobuf_c_message_free_unpacked(msg, NULL);
    free(ids);
    free(ptrs);
    return rc;
}

static int take_keys(cr_client *c, char *const *keys, size_t n, struct cr_key_list *out) {
    out->keys = calloc(n > 0 ? n : 1, sizeof(*out->keys));
    if (out->keys == NULL) return cr_client_fail(c, CR_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        out->keys[i] = strdup(keys[i] != NULL ? keys[i] : "");
        out->count = i + 1;
        if (out->keys[i] == NULL) {
            cr_client_key_list_free(out);
            return cr_client_fail(c, CR_ERR_NOMEM, "out of memory copying the reply");
        }
    }
    return CR_OK;
}

int cr_client_batch_replica_clear(cr_client *c, const char *tenant, const char *const *keys,
                                  size_t count, const char *segment, struct cr_key_list *out) {
    assert(c != NULL && out != NULL);
    memset(out, 0, sizeof(*out));
    int rc = cr_client_check_tenant(c, &tenant);
    if (rc == CR_OK && (count == 0 || count > CR_CLIENT_BATCH_MAX || keys == NULL))
        rc = cr_client_fail(c, CR_ERR_INVALID_PARAMS, "a batch holds 1 to %u keys, not %zu",
                            CR_CLIENT_BATCH_MAX, count);
    for (size_t i = 0; rc == CR_OK && i < count; i++) rc = cr_client_require_key(c, keys[i]);
    if (rc == CR_OK && segment != NULL) rc = cr_client_require_name(c, segment, "segment name");
    if (rc != CR_OK) return rc;
    Crescent__Master__UUID id;
    cr_client_uuid_to_pb(c->id, &id);
    Crescent__Master__BatchReplicaClearRequest req =
        CRESCENT__MASTER__BATCH_REPLICA_CLEAR_REQUEST__INIT;
    req.n_object_keys = count;
    req.object_keys = (char **)keys;
    req.client_id = &id;
    req.segment_name = (char *)segment;
    req.tenant_id = (char *)tenant;
    req.admin_token = c->admin_token;
    ProtobufCMessage *msg;
    rc = cr_client_call(c, CR_METHOD_BATCH_REPLICA_CLEAR, &req.base, &msg);
    if (rc != CR_OK) return rc;
    Crescent__Master__BatchReplicaClearResponse *r =
        (Crescent__Master__BatchReplicaClearResponse *)msg;
    rc = take_keys(c, r->cleared_keys, r->n_cleared_keys, out);
    protobuf_c_message_free_unpacked(msg, NULL);
    return rc;
}
