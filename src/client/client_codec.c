/* libcrescent's codec: the reply envelope, an allocation-free scan of a
 * response body (the pipelined path reads only status and one field, so it
 * skips protobuf-c's unpack and its mallocs), argument checks, and the
 * method -> response descriptor table. */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "client/client_internal.h"
#include "msgs/rpc_frame.h"

enum wire_type { WIRE_VARINT = 0, WIRE_I64 = 1, WIRE_LEN = 2, WIRE_I32 = 5 };

/* Skips a field's value of `type`; false if it runs past the end. */
bool cr_client_skip_value(const uint8_t *p, size_t len, size_t *pos, unsigned type) {
    uint64_t n;
    switch (type) {
    case WIRE_VARINT:
        return cr_pb_read_varint(p, len, pos, &n);
    case WIRE_I64:
        n = 8;
        break;
    case WIRE_I32:
        n = 4;
        break;
    case WIRE_LEN:
        if (!cr_pb_read_varint(p, len, pos, &n)) return false;
        break;
    default:
        return false; /* groups (3, 4) and reserved types are not ours */
    }
    if (n > len - *pos) return false;
    *pos += (size_t)n;
    return true;
}

/* Field 1 must be a varint holding an int32 (sign-extended when negative). */
static bool take_status(uint64_t raw, struct cr_client_scan *out) {
    int64_t value = (int64_t)raw;
    if (value < INT32_MIN || value > INT32_MAX) return false;
    out->status_code = (int32_t)value;
    out->has_status = true;
    return true;
}

int cr_client_scan_reply(const uint8_t *body, size_t len, struct cr_client_scan *out) {
    assert(out != NULL);
    assert(body != NULL || len == 0);
    memset(out, 0, sizeof(*out));
    size_t pos = 0;
    while (pos < len) {
        uint64_t tag;
        if (!cr_pb_read_varint(body, len, &pos, &tag)) return CR_ERR_PROTOCOL;
        uint64_t field = tag >> 3;
        unsigned type = (unsigned)(tag & 7);
        if (field == 0 || field > 0x1fffffff) return CR_ERR_PROTOCOL;
        if (field == 1 || (field == 2 && type == WIRE_VARINT)) {
            uint64_t raw;
            if (type != WIRE_VARINT || !cr_pb_read_varint(body, len, &pos, &raw))
                return CR_ERR_PROTOCOL;
            if (field == 2) {
                out->field2_varint = raw;
            } else if (!take_status(raw, out)) {
                return CR_ERR_PROTOCOL;
            }
            continue;
        }
        if (field == 2 && type == WIRE_LEN && out->field2_count < UINT32_MAX) out->field2_count++;
        if (!cr_client_skip_value(body, len, &pos, type)) return CR_ERR_PROTOCOL;
    }
    return out->has_status ? CR_OK : CR_ERR_PROTOCOL;
}

int cr_client_parse_envelope(const uint8_t *id, size_t id_len, const uint8_t *status,
                             size_t status_len, uint64_t *id_out, int32_t *status_out) {
    assert(id_out != NULL && status_out != NULL);
    if (id == NULL || status == NULL || id_len != CR_RPC_ID_BYTES ||
        status_len != CR_RPC_STATUS_BYTES)
        return CR_ERR_PROTOCOL;
    *id_out = cr_rpc_get_u64(id);
    *status_out = cr_rpc_get_i32(status);
    return CR_OK;
}

int cr_client_check_key(const char *key, const char **why) {
    assert(why != NULL);
    if (key == NULL || key[0] == '\0') {
        *why = "the key is empty";
        return CR_ERR_INVALID_PARAMS;
    }
    if (strnlen(key, CR_CLIENT_KEY_MAX + 1) > CR_CLIENT_KEY_MAX) {
        *why = "the key is longer than 4096 bytes";
        return CR_ERR_INVALID_PARAMS;
    }
    return CR_OK;
}

int cr_client_check_name(const char *name, const char *what, char *why, size_t why_size) {
    assert(what != NULL && why != NULL);
    if (name == NULL || name[0] == '\0') {
        snprintf(why, why_size, "the %s is empty", what);
        return CR_ERR_INVALID_PARAMS;
    }
    if (strnlen(name, CR_CLIENT_NAME_MAX + 1) > CR_CLIENT_NAME_MAX) {
        snprintf(why, why_size, "the %s is longer than %u bytes", what, CR_CLIENT_NAME_MAX);
        return CR_ERR_INVALID_PARAMS;
    }
    return CR_OK;
}

const ProtobufCMessageDescriptor *cr_client_response_descriptor(uint16_t method) {
    switch (method) {
    case CR_METHOD_GET_VERSION: return &crescent__master__get_version_response__descriptor;
    case CR_METHOD_PING: return &crescent__master__ping_response__descriptor;
    case CR_METHOD_MOUNT_SEGMENT: /* fallthrough: a remount answers like a mount */
    case CR_METHOD_REMOUNT_SEGMENT: return &crescent__master__mount_segment_response__descriptor;
    case CR_METHOD_UNMOUNT_SEGMENT: return &crescent__master__unmount_segment_response__descriptor;
    case CR_METHOD_PUT_START: return &crescent__master__put_start_response__descriptor;
    case CR_METHOD_PUT_END: return &crescent__master__put_end_response__descriptor;
    case CR_METHOD_PUT_REVOKE: return &crescent__master__put_revoke_response__descriptor;
    case CR_METHOD_BATCH_PUT_START: return &crescent__master__batch_put_start_response__descriptor;
    case CR_METHOD_BATCH_PUT_END: return &crescent__master__batch_put_end_response__descriptor;
    case CR_METHOD_BATCH_PUT_REVOKE:
        return &crescent__master__batch_put_revoke_response__descriptor;
    case CR_METHOD_EXIST_KEY: return &crescent__master__exist_key_response__descriptor;
    case CR_METHOD_BATCH_EXIST_KEY: return &crescent__master__batch_exist_key_response__descriptor;
    case CR_METHOD_GET_REPLICA_LIST:
        return &crescent__master__get_replica_list_response__descriptor;
    case CR_METHOD_BATCH_GET_REPLICA_LIST:
        return &crescent__master__batch_get_replica_list_response__descriptor;
    case CR_METHOD_GET_REPLICA_LIST_BY_REGEX:
        return &crescent__master__get_replica_list_by_regex_response__descriptor;
    case CR_METHOD_REMOVE: return &crescent__master__remove_response__descriptor;
    case CR_METHOD_BATCH_REMOVE: return &crescent__master__batch_remove_response__descriptor;
    case CR_METHOD_REMOVE_BY_REGEX: return &crescent__master__remove_by_regex_response__descriptor;
    case CR_METHOD_REMOVE_ALL: return &crescent__master__remove_all_response__descriptor;
    case CR_METHOD_BATCH_QUERY_IP: return &crescent__master__batch_query_ip_response__descriptor;
    case CR_METHOD_BATCH_REPLICA_CLEAR:
        return &crescent__master__batch_replica_clear_response__descriptor;
    case CR_METHOD_CREATE_COPY_TASK:
        return &crescent__master__create_copy_task_response__descriptor;
    case CR_METHOD_CREATE_MOVE_TASK:
        return &crescent__master__create_move_task_response__descriptor;
    case CR_METHOD_QUERY_TASK: return &crescent__master__query_task_response__descriptor;
    case CR_METHOD_FETCH_TASKS: return &crescent__master__fetch_tasks_response__descriptor;
    case CR_METHOD_MARK_TASK_TO_COMPLETE:
        return &crescent__master__mark_task_to_complete_response__descriptor;
    case CR_METHOD_DISK_REPLICA_REPORT:
        return &crescent__master__disk_replica_report_response__descriptor;
    case CR_METHOD_LOCAL_DISK_REPORT:
        return &crescent__master__local_disk_report_response__descriptor;
    default: return NULL;
    }
}

int32_t cr_client_response_status(const ProtobufCMessage *response) {
    assert(response != NULL);
    const ProtobufCFieldDescriptor *field =
        protobuf_c_message_descriptor_get_field(response->descriptor, 1);
    /* Every response in master.proto has `required int32 status_code = 1`. */
    assert(field != NULL && field->type == PROTOBUF_C_TYPE_INT32);
    int32_t status;
    memcpy(&status, (const char *)response + field->offset, sizeof(status));
    return status;
}

const char *cr_client_response_error(const ProtobufCMessage *response) {
    assert(response != NULL);
    const ProtobufCFieldDescriptor *field =
        protobuf_c_message_descriptor_get_field_by_name(response->descriptor, "error_message");
    if (field == NULL || field->type != PROTOBUF_C_TYPE_STRING) return NULL;
    const char *text;
    memcpy(&text, (const char *)response + field->offset, sizeof(text));
    return text != NULL && text[0] != '\0' ? text : NULL;
}

void cr_client_uuid_to_pb(const uint8_t id[CR_CLIENT_ID_BYTES], Crescent__Master__UUID *out) {
    assert(id != NULL && out != NULL);
    crescent__master__uuid__init(out);
    out->first = cr_rpc_get_u64(id);
    out->second = cr_rpc_get_u64(id + 8);
}

void cr_client_uuid_from_pb(const Crescent__Master__UUID *in, uint8_t id[CR_CLIENT_ID_BYTES]) {
    assert(in != NULL && id != NULL);
    cr_rpc_put_u64(id, in->first);
    cr_rpc_put_u64(id + 8, in->second);
}
