/* Replies in Mooncake's admin shapes (mooncake_reply.h). */
#include "http/mooncake_reply.h"

#include <stdlib.h>
#include <string.h>

void cr_mc_respond_doc(struct cr_http_response *resp, int status, json_t *doc) {
    char *text = doc != NULL ? json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(doc);
    resp->status = text != NULL ? status : 503;
    resp->content_type = MC_JSON;
    resp->body = text != NULL ? text : strdup("{\"success\":false,\"error_code\":-1,"
                                              "\"error_message\":\"out of memory\"}");
    resp->body_len = resp->body != NULL ? strlen(resp->body) : 0;
}

void cr_mc_respond_error(struct cr_http_response *resp, int status, int code,
                         const char *message) {
    cr_mc_respond_doc(resp, status, json_pack("{s:b, s:i, s:s}", "success", 0, "error_code",
                                              code, "error_message", message));
}

int cr_mc_http_status(int code) {
    switch (code) {
    case MC_INVALID_PARAMS: return 400;
    case MC_JOB_NOT_FOUND: case MC_SEGMENT_NOT_FOUND: case MC_OBJECT_NOT_FOUND: return 404;
    case MC_UNAVAILABLE_IN_CURRENT_STATUS: case MC_UNAVAILABLE_IN_CURRENT_MODE: case MC_TENANT_NOT_EMPTY: return 409;
    default: return 500;
    }
}
