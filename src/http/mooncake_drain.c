/* Mooncake's drain jobs on --metrics-port, in the shapes of its
 * master_admin_service at kvcache-ai/Mooncake 3b5a594 (docs/mooncake.md):
 *
 *   POST /api/v1/drain_jobs           body {"segments":[..],"target_segments":[..],
 *                                     "max_concurrency":4} (admin token)
 *                                     {"success":true,"job_id":"A-B","status":"CREATED",...}
 *   GET  /api/v1/drain_jobs/query?job_id=A-B   the job's progress
 *   POST /api/v1/drain_jobs/cancel?job_id=A-B  (admin token)
 *
 * Refusals are {"success":false,"error_code":N,"error_message":M} with the
 * reference's HTTP status.  The body and job id are checked here; the job
 * runs on the segments actor (src/actors/segments_drain.c). */
#include "http/mooncake_drain.h"

#include <civetweb.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "actors/segments_drain.h"
#include "actors/subsystems.h"
#include "crescent/error.h"
#include "durable/role.h"
#include "http/front.h"
#include "http/mooncake_reply.h"
#include "http/store_routes.h"




/* Its StringToUuid: "FIRST-SECOND", two decimal uint64s. */
static bool parse_job_id(const char *text, uint64_t *first, uint64_t *second) {
    const char *dash = strchr(text, '-');
    if (dash == NULL || dash == text || dash[1] == '\0') return false;
    char *end;
    errno = 0;
    *first = strtoull(text, &end, 10);
    if (end != dash || errno != 0 || text[0] < '0' || text[0] > '9') return false;
    *second = strtoull(dash + 1, &end, 10);
    return *end == '\0' && errno == 0 && dash[1] >= '0' && dash[1] <= '9';
}

/* A list of segment names; false (with why) when it is not one. */
static bool names(json_t *doc, const char *field, const char **out, uint32_t *n, char *why,
                  size_t len) {
    json_t *list = json_object_get(doc, field);
    *n = 0;
    if (list == NULL) return true; /* absent: empty, as struct_json leaves it */
    if (!json_is_array(list) || json_array_size(list) > CR_DRAIN_SEGMENTS_MAX) {
        snprintf(why, len, "Invalid JSON body: %s is not a list of at most %u names", field,
                 CR_DRAIN_SEGMENTS_MAX);
        return false;
    }
    size_t i;
    json_t *item;
    json_array_foreach(list, i, item) {
        const char *s = json_string_value(item);
        if (s == NULL || strlen(s) > CR_STORE_NAME_LEN_MAX) {
            snprintf(why, len, "Invalid JSON body: %s[%zu] is not a segment name", field, i);
            return false;
        }
        out[(*n)++] = s;
    }
    return true;
}

static bool parse_body(const struct cr_http_request *req, json_t **doc,
                       struct cr_drain_request *r, char *why, size_t len) {
    json_error_t err;
    *doc = req->body != NULL ? json_loadb(req->body, req->body_len, 0, &err) : NULL;
    if (*doc == NULL || !json_is_object(*doc)) {
        snprintf(why, len, "Invalid JSON body: %.100s",
                 *doc == NULL ? (req->body_len == 0 ? "empty body" : err.text)
                              : "expected an object");
        return false;
    }
    json_t *mc = json_object_get(*doc, "max_concurrency");
    r->max_concurrency = 4; /* the reference's default */
    if (mc != NULL) {
        if (!json_is_integer(mc) || json_integer_value(mc) < 0 ||
            json_integer_value(mc) > UINT32_MAX) {
            snprintf(why, len, "Invalid JSON body: max_concurrency is not a uint32");
            return false;
        }
        r->max_concurrency = (uint32_t)json_integer_value(mc);
    }
    return names(*doc, "segments", r->segments, &r->segment_count, why, len) &&
           names(*doc, "target_segments", r->targets, &r->target_count, why, len);
}

void cr_mooncake_drain_jobs(void *ctx, const struct cr_http_request *req,
                            struct cr_http_response *resp) {
    struct cr_drain_request r = {0};
    struct cr_master_admin_query q = {.drain = &r};
    json_t *body = NULL;
    if (strcmp(req->path, "/api/v1/drain_jobs") == 0) {
        char why[200];
        q.kind = CR_MASTER_ADMIN_DRAIN_CREATE;
        if (!parse_body(req, &body, &r, why, sizeof(why))) {
            json_decref(body);
            cr_mc_respond_error(resp, 400, MC_INVALID_PARAMS, why);
            return;
        }
    } else {
        char job[64] = "";
        q.kind = strcmp(req->path, "/api/v1/drain_jobs/cancel") == 0 ? CR_MASTER_ADMIN_DRAIN_CANCEL
                                                                       : CR_MASTER_ADMIN_DRAIN_QUERY;
        if (req->query == NULL ||
            mg_get_var(req->query, strlen(req->query), "job_id", job, sizeof(job)) <= 0 ||
            !parse_job_id(job, &r.id_first, &r.id_second)) {
            cr_mc_respond_error(resp, 400, MC_INVALID_PARAMS, "Missing or invalid job_id");
            return;
        }
    }
    char *text = NULL;
    int rc = cr_store_routes_ask(ctx, &q, &text);
    json_decref(body); /* r's names pointed into it */
    json_t *doc = rc == CR_OK ? json_loads(text, 0, NULL) : NULL;
    free(text);
    if (doc == NULL) {
        cr_mc_respond_error(resp, rc == CR_ROLE_NOT_LEADER_STATUS ? 409 : 503, -1011,
                      rc == CR_ROLE_NOT_LEADER_STATUS
                          ? "UNAVAILABLE_IN_CURRENT_MODE: this master is a standby"
                          : cr_strerror(rc != CR_OK ? rc : CR_ERR_NOMEM));
        return;
    }
    json_t *code = json_object_get(doc, "error_code");
    int c = code != NULL ? (int)json_integer_value(code) : 0;
    cr_mc_respond_doc(resp, c != 0 ? cr_mc_http_status(c) : 200, doc);
}
