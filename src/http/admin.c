/* /health, /metrics and /api/v1/actors (see admin.h). */
#include "http/admin.h"
#include "http/ha_routes.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "crescent/error.h"
#include "crescent/version.h"
#include "ha/ha.h"
#include "http/metrics.h"
#include "http/mooncake_ha.h"
#include "http/mooncake_metrics.h"
#include "msgs/indexer_msgs.h"

static uint64_t uptime_s(const struct cr_http_admin *admin) {
    return (cr_monotonic_ns() - admin->started_ns) / 1000000000u;
}

/* Histograms one actor may report in /metrics (the RPC gateway: one per method). */
#define HISTOGRAMS_PER_ACTOR 64u

/* Asks one actor (view 0) or one of its stats views for its stats. */
static bool ask_stats(const struct cr_http_admin *admin, struct cr_actor *actor, uint32_t view,
                      struct cr_metrics_actor *out, struct cr_actor_histogram *room) {
    const char *name = view == 0 ? cr_actor_name(actor) : cr_actor_stats_view(actor, view);
    snprintf(out->name, sizeof(out->name), "%s", name);
    snprintf(out->served_by, sizeof(out->served_by), "%s", cr_actor_name(actor));
    out->view = view > 0;
    out->stats.histograms = room;
    out->stats.histograms_max = room != NULL ? HISTOGRAMS_PER_ACTOR : 0;
    struct cr_msg msg = {.type = CR_MSG_STATS};
    CR_MSG_BODY(&msg, struct cr_msg_stats)->out = &out->stats;
    CR_MSG_BODY(&msg, struct cr_msg_stats)->view = view;
    out->up = cr_ask(actor, &msg, admin->ask_timeout_ns) == CR_OK;
    return out->up;
}

/* Asks every actor, then each of its stats views, for its stats (and, with
 * `room`, HISTOGRAMS_PER_ACTOR histograms each, room for
 * CR_METRICS_ENTRIES_MAX); returns how many actors (not views) answered.
 * Each ask waits for the actor's next turn, one after the other: */
static uint32_t collect_some(const struct cr_http_admin *admin, struct cr_metrics_actor *out,
                             uint32_t *count, struct cr_actor_histogram *room, bool views) {
    uint32_t up = 0, n = 0;
    for (uint32_t i = 0; i < cr_runtime_actor_count(admin->rt); i++) {
        struct cr_actor *actor = cr_runtime_actor(admin->rt, i);
        for (uint32_t view = 0; n < CR_METRICS_ENTRIES_MAX &&
                                (view == 0 || (views && cr_actor_stats_view(actor, view) != NULL));
             view++, n++) {
            bool answered = ask_stats(admin, actor, view, &out[n],
                                      room != NULL ? room + (size_t)n * HISTOGRAMS_PER_ACTOR : NULL);
            up += answered && view == 0;
        }
    }
    *count = n;
    return up;
}

static uint32_t collect(const struct cr_http_admin *admin, struct cr_metrics_actor *out,
                        uint32_t *count, struct cr_actor_histogram *room) {
    return collect_some(admin, out, count, room, true);
}

/* /health asks the actors only, not their views: a busy actor (segments in
 * a long regex scan) answers each ask at its next turn, so every view asked
 * adds a turn to the answer's latency. */
static uint32_t collect_actors(const struct cr_http_admin *admin, struct cr_metrics_actor *out,
                               uint32_t *count) {
    return collect_some(admin, out, count, NULL, false);
}

/* The indexer's /services answer, for the per-publisher families; NULL when
 * there is no indexer or it did not answer in time. */
static json_t *publishers(const struct cr_http_admin *admin) {
    for (uint32_t i = 0; i < cr_runtime_actor_count(admin->rt); i++) {
        struct cr_actor *actor = cr_runtime_actor(admin->rt, i);
        if (strcmp(cr_actor_name(actor), "indexer") != 0) continue;
        json_t *out = NULL;
        struct cr_msg msg = {.type = CR_MSG_INDEXER_SERVICES};
        CR_MSG_BODY(&msg, struct cr_msg_indexer_json)->json_out = (struct json_t **)&out;
        if (cr_ask(actor, &msg, admin->ask_timeout_ns) == CR_OK) return out;
        json_decref(out);
        return NULL;
    }
    return NULL;
}

/* The shared file tier's counters from the segments actor (docs/tiers.md):
 * capacity, use, and the persists clients reported failed, by cause; null
 * when crescentd runs without one. */
static json_t *file_tier_health(const struct cr_metrics_actor *actors, uint32_t count) {
    for (uint32_t i = 0; i < count; i++) {
        if (actors[i].view || !actors[i].up || strcmp(actors[i].name, "segments") != 0) continue;
        const struct cr_actor_stats *s = &actors[i].stats;
        json_t *out = json_object();
        bool on = false;
        for (uint32_t k = 0; k < s->extra_count && out != NULL; k++) {
            const char *name = s->extra[k].name;
            if (strncmp(name, "file_tier_", 10) != 0) continue;
            if (strcmp(name, "file_tier_capacity_bytes") == 0) on = s->extra[k].value > 0;
            json_object_set_new(out, name + 10, json_integer((json_int_t)s->extra[k].value));
        }
        if (on) return out;
        json_decref(out);
    }
    return json_null();
}

static void health(void *ctx, const struct cr_http_request *req, struct cr_http_response *resp) {
    (void)req;
    const struct cr_http_admin *admin = ctx;
    struct cr_metrics_actor actors[CR_METRICS_ENTRIES_MAX];
    uint32_t count;
    uint32_t up = collect_actors(admin, actors, &count);
    uint32_t total = cr_runtime_actor_count(admin->rt); /* views are not counted */
    json_t *down = json_array();
    for (uint32_t i = 0; i < count; i++)
        if (!actors[i].up && !actors[i].view)
            json_array_append_new(down, json_string(actors[i].name));
    json_t *obj = json_pack("{s:s, s:s, s:I, s:i, s:o}", "status", up == total ? "ok" : "degraded",
                            "version", CRESCENT_VERSION, "uptime_seconds",
                            (json_int_t)uptime_s(admin), "actors", (int)total, "unresponsive", down);
    if (obj != NULL) {
        json_t *ha = cr_ha_json(); /* role, term, lag (durable/role.h) */
        if (ha != NULL && admin->ha != NULL) cr_ha_health_add(ha, admin->ha); /* the election */
        json_object_set_new(obj, "ha", ha);
    }
    if (obj != NULL) json_object_set_new(obj, "file_tier", file_tier_health(actors, count));
    cr_http_respond_json(resp, up == total ? 200 : 503, obj ? json_dumps(obj, JSON_COMPACT) : NULL);
    json_decref(obj);
}

/* GET /health on --metrics-port: Mooncake master's shape (its HandleHealth):
 * always 200 "ok"; the role, HA state and leader view of /role, /ha_status
 * and /leader; service_ready says whether this master's service plane is
 * active and every actor answers (crescent's own /health says which do not). */
static void health_mooncake(void *ctx, const struct cr_http_request *req,
                            struct cr_http_response *resp) {
    (void)req;
    const struct cr_http_admin *admin = ctx;
    struct cr_metrics_actor actors[CR_METRICS_ENTRIES_MAX];
    uint32_t count;
    uint32_t up = collect_actors(admin, actors, &count);
    struct cr_mc_ha ha; /* crescentd's role in Mooncake's words (mooncake_ha.h) */
    cr_mc_ha_now(admin->ha, &ha);
    json_t *obj = json_pack("{s:s, s:s, s:s, s:b, s:o, s:o}", "status", "ok", "role", ha.role,
                            "ha_state", ha.state, "service_ready",
                            ha.service_active && up == cr_runtime_actor_count(admin->rt),
                            "leader_address",
                            ha.present ? json_string(ha.leader_address) : json_null(),
                            "view_version",
                            ha.present ? json_integer((json_int_t)ha.view_version) : json_null());
    char *text = obj != NULL ? json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(obj);
    resp->status = text != NULL ? 200 : 503;
    resp->content_type = "application/json; charset=utf-8";
    resp->body = text;
    resp->body_len = text != NULL ? strlen(text) : 0;
}

static void metrics(void *ctx, const struct cr_http_request *req, struct cr_http_response *resp) {
    (void)req;
    const struct cr_http_admin *admin = ctx;
    struct cr_metrics_actor actors[CR_METRICS_ENTRIES_MAX];
    struct cr_actor_histogram *room = calloc((size_t)CR_METRICS_ENTRIES_MAX * HISTOGRAMS_PER_ACTOR,
                                             sizeof(*room));
    struct cr_http_route_latency *routes = calloc(CR_HTTP_ROUTES_MAX, sizeof(*routes));
    if (room == NULL || routes == NULL) {
        free(room);
        free(routes);
        cr_http_respond_error(resp, 500, "out of memory", "rendering /metrics");
        return;
    }
    uint32_t count;
    collect(admin, actors, &count, room);
    uint32_t route_count = cr_http_front_latency(admin->front, routes, CR_HTTP_ROUTES_MAX);
    struct cr_buf buf;
    cr_buf_init(&buf);
    cr_metrics_render(&buf, actors, count, routes, route_count, uptime_s(admin));
    struct cr_http_refusals refused;
    cr_http_front_refusals(admin->front, &refused);
    cr_metrics_render_refusals(&buf, &refused);
    json_t *services = publishers(admin);
    cr_metrics_render_publishers(&buf, services);
    if (admin->ha != NULL) cr_ha_render_metrics(&buf, admin->ha);
    json_decref(services);
    free(room);
    free(routes);
    resp->status = 200;
    resp->content_type = "text/plain; version=0.0.4";
    resp->body = cr_buf_take(&buf, &resp->body_len);
}

static json_t *actor_json(const struct cr_metrics_actor *a) {
    const struct cr_actor_stats *s = &a->stats;
    if (!a->up) return json_pack("{s:s, s:b}", "name", a->name, "up", 0);
    json_t *extra = json_object();
    for (uint32_t i = 0; i < s->extra_count; i++)
        json_object_set_new(extra, s->extra[i].name, json_integer((json_int_t)s->extra[i].value));
    if (a->view) /* served on another actor's thread: its runtime counters are that actor's */
        return json_pack("{s:s, s:b, s:s, s:o}", "name", a->name, "up", 1, "served_by",
                         a->served_by, "counters", extra);
    return json_pack("{s:s, s:b, s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o}", "name",
                     a->name, "up", 1, "cpu", s->cpu, "messages_handled",
                     (json_int_t)s->messages_handled, "ring_depth", (json_int_t)s->ring_depth,
                     "rings", (json_int_t)s->rings, "parks", (json_int_t)s->parks, "wakes",
                     (json_int_t)s->wakes, "ring_full", (json_int_t)s->ring_full,
                     "send_failures", (json_int_t)s->send_failures, "asks_expired",
                     (json_int_t)s->asks_expired, "timers_fired", (json_int_t)s->timers_fired,
                     "counters", extra);
}

static void actors_route(void *ctx, const struct cr_http_request *req,
                         struct cr_http_response *resp) {
    (void)req;
    const struct cr_http_admin *admin = ctx;
    struct cr_metrics_actor actors[CR_METRICS_ENTRIES_MAX];
    uint32_t count;
    collect(admin, actors, &count, NULL);
    json_t *list = json_array();
    for (uint32_t i = 0; i < count; i++) json_array_append_new(list, actor_json(&actors[i]));
    json_t *obj = json_pack("{s:o}", "actors", list);
    cr_http_respond_json(resp, 200, obj ? json_dumps(obj, JSON_COMPACT) : NULL);
    json_decref(obj);
}

/* GET /metrics/summary: Mooncake master's one line (mooncake_summary.h),
 * from the same values as the metrics port's /metrics. */
static void metrics_summary(void *ctx, const struct cr_http_request *req,
                            struct cr_http_response *resp) {
    (void)req;
    struct cr_http_admin *admin = ctx;
    struct cr_metrics_actor actors[CR_METRICS_ENTRIES_MAX];
    uint32_t count;
    collect(admin, actors, &count, NULL);
    struct cr_buf b;
    cr_buf_init(&b);
    struct cr_mc_ha ha;
    cr_mc_ha_now(admin->ha, &ha);
    cr_mc_summary_render(&b, actors, count, cr_runtime_now_ns(admin->rt), &admin->summary, &ha);
    resp->status = 200;
    resp->content_type = "text/plain; version=0.0.4";
    resp->body = cr_buf_take(&b, &resp->body_len);
}

/* GET /metrics on --metrics-port: Mooncake master's families (mooncake_metrics.c);
 * crescent's own crescent_* families stay on the main front. */
static void metrics_mooncake(void *ctx, const struct cr_http_request *req,
                             struct cr_http_response *resp) {
    (void)req;
    const struct cr_http_admin *admin = ctx;
    struct cr_metrics_actor actors[CR_METRICS_ENTRIES_MAX];
    uint32_t count;
    collect(admin, actors, &count, NULL);
    struct cr_buf b;
    cr_buf_init(&b);
    cr_mooncake_metrics_render(&b, actors, count);
    resp->status = 200;
    resp->content_type = "text/plain; version=0.0.4";
    resp->body = cr_buf_take(&b, &resp->body_len);
}

int cr_http_admin_register_mooncake(struct cr_http_front *front, struct cr_http_admin *admin) {
    int rc = cr_http_front_add_route(front, "GET", "/health", health_mooncake, admin);
    if (rc == CR_OK) rc = cr_http_front_add_route(front, "GET", "/metrics", metrics_mooncake, admin);
    if (rc == CR_OK)
        rc = cr_http_front_add_route(front, "GET", "/metrics/summary", metrics_summary, admin);
    return rc;
}

int cr_http_admin_register(struct cr_http_front *front, struct cr_http_admin *admin) {
    admin->front = front;
    int rc = cr_http_front_add_route(front, "GET", "/health", health, admin);
    if (rc == CR_OK) rc = cr_http_front_add_route(front, "GET", "/metrics", metrics, admin);
    if (rc == CR_OK) rc = cr_http_front_add_route(front, "GET", "/api/v1/actors", actors_route, admin);
    return rc;
}
