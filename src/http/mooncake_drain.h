/* Mooncake's /api/v1/drain_jobs on --metrics-port (mooncake_drain.c). */
#ifndef CRESCENT_HTTP_MOONCAKE_DRAIN_H
#define CRESCENT_HTTP_MOONCAKE_DRAIN_H

struct cr_http_request;
struct cr_http_response;

/* The handler of POST /api/v1/drain_jobs, GET /api/v1/drain_jobs/query and
 * POST /api/v1/drain_jobs/cancel (ctx: struct cr_subsystems *). */
void cr_mooncake_drain_jobs(void *ctx, const struct cr_http_request *req,
                            struct cr_http_response *resp);

#endif
