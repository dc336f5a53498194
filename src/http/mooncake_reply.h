/* Replies in the shapes of Mooncake master's admin service, shared by its
 * routes on --metrics-port (mooncake_admin.c, mooncake_quotas.c,
 * mooncake_drain.c). */
#ifndef CRESCENT_HTTP_MOONCAKE_REPLY_H
#define CRESCENT_HTTP_MOONCAKE_REPLY_H

#include <jansson.h>

#include "http/front.h"

/* Mooncake's ErrorCode values (mooncake-store/include/types.h) these routes give. */
#define MC_SEGMENT_NOT_FOUND (-101)
#define MC_INVALID_PARAMS (-600)
#define MC_REPLICA_IS_NOT_READY (-703)
#define MC_OBJECT_NOT_FOUND (-704)
#define MC_UNAVAILABLE_IN_CURRENT_MODE (-1011)
#define MC_UNAVAILABLE_IN_CURRENT_STATUS (-1010)
#define MC_JOB_NOT_FOUND (-1402)
#define MC_TENANT_NOT_EMPTY (-1702)

#define MC_JSON "application/json; charset=utf-8"

/* Answers `doc` (taken: freed here) as compact JSON with `status`; 503 with a
 * JSON refusal when it cannot be rendered (out of memory). */
void cr_mc_respond_doc(struct cr_http_response *resp, int status, json_t *doc);

/* The reference's WriteErrorResponse: {"success":false,"error_code":N,"error_message":M}. */
void cr_mc_respond_error(struct cr_http_response *resp, int status, int code,
                         const char *message);

/* The reference's ErrorCodeToHttpStatus for the codes these routes give. */
int cr_mc_http_status(int code);

#endif
