/* Mooncake's /api/v1/tenant_quotas (mooncake_quotas.c). */
#ifndef CRESCENT_HTTP_MOONCAKE_QUOTAS_H
#define CRESCENT_HTTP_MOONCAKE_QUOTAS_H

#include "core/store.h"
#include "msgs/master_msgs.h"

struct cr_http_request;
struct cr_http_response;

/* The route's handler (ctx: struct cr_subsystems *), for GET, PUT and DELETE. */
void cr_mooncake_tenant_quotas(void *ctx, const struct cr_http_request *req,
                               struct cr_http_response *resp);

/* On the segments actor's thread: runs a QUOTAS, QUOTA_SET or QUOTA_DELETE
 * query on the store and renders the reference's answer (an error too, as
 * {"success":false,"error_code",...}) into *json_out.  CR_OK or CR_ERR_NOMEM. */
int cr_mooncake_quotas_apply(cr_store *store, const struct cr_master_admin_query *q,
                             char **json_out);

#endif
