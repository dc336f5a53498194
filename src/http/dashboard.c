/* Serves the embedded dashboard (see dashboard.h). */
#include "http/dashboard.h"

#include <stdlib.h>
#include <string.h>

#include "crescent/error.h"
#include "http/front.h"

static void serve(void *ctx, const struct cr_http_request *req, struct cr_http_response *resp) {
    (void)ctx;
    for (const struct cr_dashboard_asset *a = cr_dashboard_assets; a->url != NULL; a++) {
        if (strcmp(a->url, req->path) != 0) continue;
        /* The front frees the body: a copy per request (the largest file,
         * uPlot, is about 50 KB; the page loads once and then polls JSON). */
        char *body = malloc(a->size + 1);
        if (body == NULL) {
            cr_http_respond_error(resp, 500, "out of memory", req->path);
            return;
        }
        memcpy(body, a->data, a->size);
        resp->status = 200;
        resp->content_type = a->content_type;
        resp->body = body;
        resp->body_len = a->size;
        return;
    }
    cr_http_respond_error(resp, 404, "not found", req->path);
}

int cr_dashboard_register(struct cr_http_front *front) {
    int rc = cr_http_front_add_route(front, "GET", "/", serve, NULL);
    return rc == CR_OK ? cr_http_front_add_route(front, "GET", "/dashboard/", serve, NULL) : rc;
}
