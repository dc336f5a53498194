/* Text for crescent status codes (include/crescent/error.h). */
#include "crescent/error.h"

struct status_text {
    int code;
    const char *name;
    const char *text;
};

static const struct status_text status_table[] = {
    {CR_OK, "OK", "success"},
    {CR_ERR_AGAIN, "AGAIN", "resource busy, try again"},
    {CR_ERR_TIMEOUT, "TIMEOUT", "timed out waiting for an answer"},
    {CR_ERR_NOMEM, "NOMEM", "out of memory or a bounded table is full"},
    {CR_ERR_SHUTDOWN, "SHUTDOWN", "the server is shutting down"},
    {CR_ERR_IO, "IO", "a system call failed (see the log)"},
    {CR_ERR_PROTOCOL, "PROTOCOL", "malformed message from a peer"},
    {CR_ERR_CHECKSUM, "CHECKSUM", "object bytes do not match the checksum recorded at PutEnd"},
    {CR_ERR_LEASE_EXPIRED, "LEASE_EXPIRED", "the read finished after the object's lease ended"},
    {CR_ERR_NO_AVAILABLE_HANDLE, "NO_AVAILABLE_HANDLE", "no segment has space for the object"},
    {CR_ERR_INVALID_PARAMS, "INVALID_PARAMS", "invalid parameters"},
    {CR_ERR_ILLEGAL_CLIENT, "ILLEGAL_CLIENT", "request from a client that does not own it"},
    {CR_ERR_SEGMENT_NOT_FOUND, "SEGMENT_NOT_FOUND", "no segment of that name is mounted"},
    {CR_ERR_SEGMENT_ALREADY_EXISTS, "SEGMENT_ALREADY_EXISTS", "a segment of that name exists"},
    {CR_ERR_OBJECT_NOT_FOUND, "OBJECT_NOT_FOUND", "object not found"},
    {CR_ERR_OBJECT_ALREADY_EXISTS, "OBJECT_ALREADY_EXISTS", "object exists or is being written"},
    {CR_ERR_OBJECT_HAS_LEASE, "OBJECT_HAS_LEASE", "object is leased by a reader"},
    {CR_ERR_OBJECT_NOT_READY, "OBJECT_NOT_READY", "object is still being written"},
    {CR_ERR_RPC_FAIL, "RPC_FAIL", "the RPC failed"},
};

static const struct status_text *status_find(int status) {
    for (unsigned i = 0; i < sizeof(status_table) / sizeof(status_table[0]); i++) {
        if (status_table[i].code == status) return &status_table[i];
    }
    return 0;
}

const char *cr_strerror(int status) {
    const struct status_text *entry = status_find(status);
    return entry ? entry->text : "unknown status code";
}

const char *cr_status_name(int status) {
    const struct status_text *entry = status_find(status);
    return entry ? entry->name : "UNKNOWN";
}
