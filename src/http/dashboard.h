/* The web dashboard at GET /: its files are embedded in crescentd at build
 * time (scripts/embed-assets.py writes the table from web/dashboard/ and
 * uPlot from node_modules/uplot/dist), so it needs no network and no files
 * at run time.  The page polls the HTTP API (docs/http-api.md). */
#ifndef CRESCENT_HTTP_DASHBOARD_H
#define CRESCENT_HTTP_DASHBOARD_H

#include <stddef.h>

struct cr_http_front;

struct cr_dashboard_asset {
    const char *url;          /* "/" or "/dashboard/NAME" */
    const char *content_type; /* static */
    const unsigned char *data;
    size_t size;
};

/* The generated table, ended by an entry whose url is NULL. */
extern const struct cr_dashboard_asset cr_dashboard_assets[];

/* Adds GET / and GET /dashboard/... */
int cr_dashboard_register(struct cr_http_front *front);

#endif
