/* The store master's admin routes and their JSON (see store_routes.h). */
#include "http/store_routes.h"

#include <assert.h>
#include <civetweb.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "actors/subsystems.h"
#include "core/read_latency.h"
#include "crescent/error.h"
#include "http/front.h"

#define OBJECTS_LIMIT_DEFAULT 100u
#define OBJECTS_LIMIT_MAX 1000u
/* Object slots one GET /api/v1/objects slice walks on the segments actor:
 * well under a millisecond; a prefix that matched nothing walked 5 M in one. */
#define OBJECTS_SLICE_SLOTS 65536u

/* ------------------------------------------------------------------------ */
/* Rendering (on the segments actor's thread) */

static json_t *bytes_json(const char *s, size_t len) {
    json_t *j = json_stringn(s, len);
    if (j != NULL) return j;
    /* Not UTF-8 (keys are bytes): show them as hex rather than drop them. */
    char *hex = malloc(len * 2 + 5);
    if (hex == NULL) return json_null();
    memcpy(hex, "hex:", 4);
    for (size_t i = 0; i < len; i++) snprintf(hex + 4 + 2 * i, 3, "%02x", (unsigned char)s[i]);
    j = json_string(hex);
    free(hex);
    return j;
}

static json_t *uuid_json(const struct cr_uuid *id) {
    char hex[33];
    for (int i = 0; i < 16; i++) snprintf(hex + 2 * i, 3, "%02x", id->b[i]);
    return json_string(hex);
}

/* The owner's client id is what the owner's calls are checked against: with
 * an admin token only admins see it (null otherwise). */
static json_t *owner_json(const struct cr_uuid *id, bool hide) {
    return hide ? json_null() : uuid_json(id);
}

static json_t *segment_json(const struct cr_store_segment_view *v, bool hide_owner) {
    return json_pack("{s:s, s:s, s:s, s:o, s:I, s:I, s:I, s:I, s:f, s:b, s:b, s:I}", "name",
                     v->name, "endpoint", v->endpoint, "protocol", v->protocol, "owner", owner_json(&v->owner, hide_owner), "base",
                     (json_int_t)v->base, "size", (json_int_t)v->size, "used_bytes",
                     (json_int_t)v->used_bytes, "allocations", (json_int_t)v->allocation_count,
                     "usage_ratio", v->size ? (double)v->used_bytes / (double)v->size : 0.0,
                     "awaiting_owner", v->awaiting_owner, "draining", v->draining,
                     "ssd_capacity", (json_int_t)v->ssd_capacity);
}

static const char *status_name(enum cr_replica_status s) {
    static const char *const names[] = {"UNDEFINED", "INITIALIZED", "PROCESSING",
                                        "COMPLETE",  "REMOVED",     "FAILED"};
    return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "UNKNOWN";
}

/* Store time `t_ms` (the monotonic clock of now_ms) as ISO 8601 UTC wall time. */
static json_t *iso_json(uint64_t t_ms, uint64_t now_ms, uint64_t wall_now_ms) {
    int64_t wall_ms = (int64_t)wall_now_ms - ((int64_t)now_ms - (int64_t)t_ms);
    time_t secs = (time_t)(wall_ms / 1000);
    struct tm tm;
    char text[40];
    if (wall_ms < 0 || gmtime_r(&secs, &tm) == NULL) return json_null();
    size_t n = strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(text + n, sizeof(text) - n, ".%03dZ", (int)(wall_ms % 1000));
    return json_string(text);
}

static json_t *object_json(const struct cr_store_object_view *v, uint64_t now_ms,
                           uint64_t wall_now_ms, bool hide_owner) {
    json_t *reps = json_array();
    for (uint32_t i = 0; i < v->replicas.count; i++) {
        const struct cr_store_replica_desc *d = &v->replicas.replicas[i];
        if (d->medium == CR_MEDIUM_DISK) { /* a file: no segment, endpoint or buffer */
            json_array_append_new(reps, json_pack("{s:s, s:s, s:I, s:s}", "tier", "disk",
                                                  "file_path", d->file_path, "size",
                                                  (json_int_t)d->size, "status",
                                                  status_name(d->status)));
            continue;
        }
        /* memory: buffer is an address; local_disk: the server's position */
        json_array_append_new(reps, json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:s}", "tier",
                                              cr_replica_medium_name(d->medium), "segment",
                                              d->segment_name, "endpoint", d->endpoint,
                                              "protocol", d->protocol, "buffer",
                                              (json_int_t)d->buffer, "size", (json_int_t)d->size,
                                              "status", status_name(d->status)));
    }
    bool leased = v->lease_deadline_ms > now_ms;
    return json_pack(
        "{s:s, s:o, s:I, s:b, s:b, s:b, s:b, s:o, s:o, s:o, s:o, s:o, s:o}", "tenant", v->tenant,
        "key", bytes_json(v->key, v->key_len), "size_bytes", (json_int_t)v->size_bytes,
        "complete", v->complete, "leased", leased, "soft_pinned", v->soft_pinned, "hard_pinned",
        v->hard_pinned, "put_start", iso_json(v->put_start_ms, now_ms, wall_now_ms),
        "last_access", iso_json(v->last_access_ms, now_ms, wall_now_ms), "lease_expires",
        leased ? iso_json(v->lease_deadline_ms, now_ms, wall_now_ms) : json_null(),
        "lease_expires_in_s",
        leased ? json_real((double)(v->lease_deadline_ms - now_ms) / 1000.0) : json_null(),
        "owner", owner_json(&v->owner, hide_owner), "replicas", reps);
}

static json_t *render_segments(const cr_store *store, bool hide_owner) {
    json_t *arr = json_array();
    struct cr_store_segment_view v;
    uint32_t cursor = 0;
    while (cr_store_segment_next(store, &cursor, &v)) json_array_append_new(arr, segment_json(&v, hide_owner));
    return json_pack("{s:I, s:o}", "count", (json_int_t)json_array_size(arr), "segments", arr);
}

static int render_objects(const cr_store *store, uint64_t now_ms,
                          const struct cr_master_admin_query *q, json_t **out) {
    uint32_t limit = q->limit == 0 ? OBJECTS_LIMIT_DEFAULT : q->limit;
    if (limit > OBJECTS_LIMIT_MAX) limit = OBJECTS_LIMIT_MAX;
    struct cr_store_object_view *views = malloc(limit * sizeof(*views));
    if (views == NULL) return CR_ERR_NOMEM;
    uint32_t whole = 0, *cursor = q->cursor != NULL ? q->cursor : &whole;
    bool done;
    size_t n = cr_store_list_objects_slice(store, q->tenant, q->prefix, now_ms, cursor, limit,
                                           q->cursor != NULL ? OBJECTS_SLICE_SLOTS : UINT32_MAX,
                                           views, &done);
    if (q->done != NULL) *q->done = done;
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, object_json(&views[i], now_ms, q->wall_now_ms, q->hide_owner));
    free(views);
    *out = json_pack("{s:I, s:b, s:o}", "count", (json_int_t)n, "truncated", n == limit, "objects",
                     arr);
    return CR_OK;
}

/* Keys (Mooncake's /get_all_keys).  With q->cursor, one slice: at most
 * OBJECTS_LIMIT_MAX keys from at most OBJECTS_SLICE_SLOTS slots, *q->done
 * once the walk reached the end (the asker asks again from *q->cursor), so
 * the store's thread serves others between slices; without, every key in
 * one answer (the walk of 5 M objects held the thread for seconds). */
static int render_keys(const cr_store *store, uint64_t now_ms,
                       const struct cr_master_admin_query *q, json_t **out) {
    struct cr_store_object_view *views = malloc(OBJECTS_LIMIT_MAX * sizeof(*views));
    json_t *keys = json_array();
    if (views == NULL || keys == NULL) {
        free(views);
        json_decref(keys);
        return CR_ERR_NOMEM;
    }
    uint32_t whole = 0, *cursor = q->cursor != NULL ? q->cursor : &whole;
    bool done = false;
    do {
        size_t n = cr_store_list_objects_slice(store, NULL, NULL, now_ms, cursor,
                                               OBJECTS_LIMIT_MAX, OBJECTS_SLICE_SLOTS, views,
                                               &done);
        for (size_t i = 0; i < n; i++)
            json_array_append_new(keys, bytes_json(views[i].key, views[i].key_len));
    } while (!done && q->cursor == NULL);
    if (q->done != NULL) *q->done = done;
    free(views);
    *out = json_pack("{s:o}", "keys", keys);
    return CR_OK;
}

int cr_store_admin_render_keys(const cr_store *store, uint64_t now_ms,
                               const struct cr_master_admin_query *q, const char *const *tenants,
                               const char *const *keys, const uint32_t *lens, uint32_t n,
                               char **json_out) {
    assert(store != NULL && q != NULL && json_out != NULL);
    uint32_t limit = q->limit == 0 ? OBJECTS_LIMIT_DEFAULT : q->limit;
    size_t prefix_len = q->prefix != NULL ? strlen(q->prefix) : 0;
    json_t *arr = json_array();
    for (uint32_t i = 0; arr != NULL && i < n && json_array_size(arr) < limit; i++) {
        bool seen = false; /* a key put again: its newest entry only */
        for (uint32_t j = 0; j < i && !seen; j++)
            seen = lens[j] == lens[i] && strcmp(tenants[j], tenants[i]) == 0 &&
                   memcmp(keys[j], keys[i], lens[i]) == 0;
        struct cr_store_object_view v;
        if (seen || (prefix_len > 0 && (lens[i] < prefix_len ||
                                        memcmp(keys[i], q->prefix, prefix_len) != 0)) ||
            cr_store_object_find(store, tenants[i], keys[i], lens[i], now_ms, &v) != CR_OK)
            continue;
        json_array_append_new(arr, object_json(&v, now_ms, q->wall_now_ms, q->hide_owner));
    }
    json_t *doc = json_pack("{s:I, s:b, s:o}", "count", (json_int_t)json_array_size(arr),
                            "truncated", 0, "objects", arr);
    *json_out = doc != NULL ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    return *json_out != NULL ? CR_OK : CR_ERR_NOMEM;
}

/* The clients' read latency per tier (docs/tiers.md): reads, their mean and
 * the bucket bounds that hold the median and the 99th percentile (null with
 * no reads; a read past the last bound counts as 10 s). */
static json_t *read_latency(const struct cr_read_latency_sums *r) {
    json_t *out = json_object();
    for (uint32_t t = 0; out != NULL && t < CR_READ_LATENCY_TIERS; t++) {
        const struct cr_histogram *h = &r->tiers[t];
        json_t *tier = json_pack("{s:I, s:f}", "count", (json_int_t)h->count, "sum_seconds",
                                 (double)h->sum_ns / 1e9);
        if (tier == NULL) break;
        static const struct { const char *name; double q; } qs[] = {{"p50_seconds", 0.5},
                                                                    {"p99_seconds", 0.99}};
        for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++) {
            uint64_t ns = cr_read_latency_quantile_ns(h, qs[i].q);
            if (ns == UINT64_MAX) ns = cr_histogram_bounds_ns[CR_HISTOGRAM_BOUNDS - 1];
            json_object_set_new(tier, qs[i].name, h->count > 0 ? json_real((double)ns / 1e9)
                                                               : json_null());
        }
        json_object_set_new(out, cr_read_latency_tier_names[t], tier);
    }
    return out;
}

static json_t *render_stats(const cr_store *store, uint64_t now_ms,
                            const struct cr_store_admin_counters *c) {
    struct cr_store_stats s;
    cr_store_get_stats(store, now_ms, &s);
    json_t *out = json_pack(
        "{s:I, s:I, s:f, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
        "capacity_bytes", (json_int_t)s.capacity_bytes, "used_bytes", (json_int_t)s.used_bytes,
        "usage_ratio", s.capacity_bytes ? (double)s.used_bytes / (double)s.capacity_bytes : 0.0,
        "objects", (json_int_t)s.object_count, "inflight_puts", (json_int_t)s.inflight_puts,
        "replicas", (json_int_t)s.replica_count, "active_leases", (json_int_t)s.active_leases,
        "segments", (json_int_t)s.segment_count, "clients", (json_int_t)s.client_count, "evictions",
        (json_int_t)s.evictions, "evicted_bytes", (json_int_t)s.evicted_bytes, "zombies_preempted",
        (json_int_t)s.zombies_preempted, "zombie_bytes_reclaimed",
        (json_int_t)s.zombie_bytes_reclaimed, "discarded_parked", (json_int_t)s.discarded_parked,
        "clients_expired", (json_int_t)s.clients_expired, "events_sent", (json_int_t)c->events_sent,
        "events_dropped", (json_int_t)c->events_dropped);
    /* The tiers below memory (docs/tiers.md). */
    if (out != NULL) {
        json_object_set_new(out, "file_tier_bytes", json_integer((json_int_t)s.disk_bytes));
        json_object_set_new(out, "file_tier_replicas", json_integer((json_int_t)s.disk_replicas));
        json_object_set_new(out, "file_tier_evictions",
                            json_integer((json_int_t)s.disk_evictions));
        json_object_set_new(out, "local_disk_bytes", json_integer((json_int_t)s.local_disk_bytes));
    }
    if (out != NULL && c->reads != NULL)
        json_object_set_new(out, "read_latency", read_latency(c->reads));
    return out;
}

int cr_store_admin_render(const cr_store *store, uint64_t now_ms,
                          const struct cr_store_admin_counters *counters,
                          const struct cr_master_admin_query *q, char **json_out) {
    assert(store != NULL && counters != NULL && q != NULL && json_out != NULL);
    *json_out = NULL;
    json_t *doc = NULL;
    int rc = CR_OK;
    switch (q->kind) {
    case CR_MASTER_ADMIN_SEGMENTS: doc = render_segments(store, q->hide_owner); break;
    case CR_MASTER_ADMIN_SEGMENT: {
        struct cr_store_segment_view v;
        rc = cr_store_segment_find(store, q->name, &v);
        if (rc == CR_OK) doc = segment_json(&v, q->hide_owner);
        break;
    }
    case CR_MASTER_ADMIN_OBJECTS: rc = render_objects(store, now_ms, q, &doc); break;
    case CR_MASTER_ADMIN_OBJECT: {
        struct cr_store_object_view v;
        rc = cr_store_object_find(store, q->tenant, q->name, (uint32_t)strlen(q->name), now_ms, &v);
        if (rc == CR_OK) doc = object_json(&v, now_ms, q->wall_now_ms, q->hide_owner);
        break;
    }
    case CR_MASTER_ADMIN_STATS: doc = render_stats(store, now_ms, counters); break;
    case CR_MASTER_ADMIN_KEYS: rc = render_keys(store, now_ms, q, &doc); break;
    default: return CR_ERR_INVALID_PARAMS;
    }
    if (rc != CR_OK) return rc;
    *json_out = doc != NULL ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    return *json_out != NULL ? CR_OK : CR_ERR_NOMEM;
}

/* ------------------------------------------------------------------------ */
/* Routes (on HTTP workers: they ask, never touch the store) */

int cr_store_routes_ask(struct cr_subsystems *peers, struct cr_master_admin_query *q,
                        char **json_out) {
    *json_out = NULL;
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    q->wall_now_ms = (uint64_t)wall.tv_sec * 1000u + (uint64_t)wall.tv_nsec / 1000000u;
    struct cr_msg msg = {.type = CR_MSG_MASTER_ADMIN};
    struct cr_msg_master_admin *body = CR_MSG_BODY(&msg, struct cr_msg_master_admin);
    body->query = q;
    body->json_out = json_out;
    int rc = cr_ask(peers->actors[CR_SUBSYSTEM_SEGMENTS], &msg, peers->ask_timeout_ns);
    if (rc != CR_OK) {
        free(*json_out);
        *json_out = NULL;
    }
    return rc;
}

static void answer(struct cr_subsystems *peers, struct cr_master_admin_query *q,
                   struct cr_http_response *resp) {
    char *json = NULL;
    int rc = cr_store_routes_ask(peers, q, &json);
    if (rc == CR_OK) {
        cr_http_respond_json(resp, 200, json);
        return;
    }
    int status = rc == CR_ERR_SEGMENT_NOT_FOUND || rc == CR_ERR_OBJECT_NOT_FOUND ? 404
                 : rc == CR_ERR_INVALID_PARAMS                                   ? 400
                                                                                 : 503;
    cr_http_respond_error(resp, status, cr_status_name(rc), cr_strerror(rc));
}

/* Copies query parameter `name` into buf and points *out at it (NULL when
 * absent).  Returns false when the value does not fit: that is a bad
 * request, never "absent" (an over-long tenant must not list every tenant). */
static bool query_var(const struct cr_http_request *req, const char *name, char *buf,
                      size_t size, const char **out) {
    *out = NULL;
    if (req->query == NULL) return true;
    int n = mg_get_var(req->query, strlen(req->query), name, buf, size);
    if (n == -2) return false;
    if (n >= 0) *out = buf;
    return true;
}

static void get_segments(void *ctx, const struct cr_http_request *req,
                         struct cr_http_response *resp) {
    const char *prefix = "/api/v1/segments/";
    struct cr_master_admin_query q = {.kind = CR_MASTER_ADMIN_SEGMENTS, .hide_owner = !req->admin};
    if (strncmp(req->path, prefix, strlen(prefix)) == 0) {
        q.kind = CR_MASTER_ADMIN_SEGMENT;
        q.name = req->path + strlen(prefix);
        if (q.name[0] == '\0') q.kind = CR_MASTER_ADMIN_SEGMENTS;
    }
    answer(ctx, &q, resp);
}

/* GET /api/v1/objects: asked in slices of OBJECTS_SLICE_SLOTS slots, so the
 * segments actor serves RPCs between them; the worker joins the slices. */
static void list_objects(struct cr_subsystems *peers, struct cr_master_admin_query *q,
                         struct cr_http_response *resp) {
    uint32_t limit = q->limit == 0 ? OBJECTS_LIMIT_DEFAULT : q->limit;
    uint32_t cursor = 0;
    bool done = false;
    q->cursor = &cursor;
    q->done = &done;
    json_t *all = json_array();
    int rc = all != NULL ? CR_OK : CR_ERR_NOMEM;
    while (rc == CR_OK && !done && json_array_size(all) < limit) {
        q->limit = limit - (uint32_t)json_array_size(all);
        char *text = NULL;
        rc = cr_store_routes_ask(peers, q, &text);
        json_t *slice = rc == CR_OK ? json_loads(text, 0, NULL) : NULL;
        free(text);
        if (rc == CR_OK && slice == NULL) rc = CR_ERR_NOMEM;
        if (rc == CR_OK) json_array_extend(all, json_object_get(slice, "objects"));
        json_decref(slice);
    }
    if (rc != CR_OK) {
        json_decref(all);
        cr_http_respond_error(resp, 503, cr_status_name(rc), cr_strerror(rc));
        return;
    }
    size_t n = json_array_size(all);
    json_t *doc = json_pack("{s:I, s:b, s:o}", "count", (json_int_t)n, "truncated", n == limit,
                            "objects", all);
    cr_http_respond_json(resp, 200, doc != NULL ? json_dumps(doc, JSON_COMPACT) : NULL);
    json_decref(doc);
}

static void get_objects(void *ctx, const struct cr_http_request *req,
                        struct cr_http_response *resp) {
    const char *prefix = "/api/v1/objects/";
    char tenant[CR_STORE_NAME_LEN_MAX], pfx[CR_STORE_KEY_LEN_MAX + 1], limit[16], order[16];
    struct cr_master_admin_query q = {.kind = CR_MASTER_ADMIN_OBJECTS, .hide_owner = !req->admin};
    const char *limit_text = NULL, *order_text = NULL;
    if (!query_var(req, "tenant", tenant, sizeof(tenant), &q.tenant) ||
        !query_var(req, "prefix", pfx, sizeof(pfx), &q.prefix) ||
        !query_var(req, "limit", limit, sizeof(limit), &limit_text) ||
        !query_var(req, "order", order, sizeof(order), &order_text)) {
        cr_http_respond_error(resp, 400, "bad query", "tenant, prefix, limit or order is too long");
        return;
    }
    if (strncmp(req->path, prefix, strlen(prefix)) == 0 && req->path[strlen(prefix)] != '\0') {
        q.kind = CR_MASTER_ADMIN_OBJECT;
        q.name = req->path + strlen(prefix);
        if (q.tenant == NULL) q.tenant = CR_STORE_DEFAULT_TENANT;
        answer(ctx, &q, resp);
        return;
    }
    if (limit_text != NULL) {
        char *end;
        unsigned long v = strtoul(limit, &end, 10);
        if (*end != '\0' || limit[0] == '\0' || v == 0 || v > OBJECTS_LIMIT_MAX) {
            cr_http_respond_error(resp, 400, "bad limit", "limit must be 1 to 1000");
            return;
        }
        q.limit = (uint32_t)v;
    }
    if (order_text != NULL && strcmp(order, "key") != 0) {
        if (strcmp(order, "recent") != 0) {
            cr_http_respond_error(resp, 400, "bad order", "order must be key or recent");
            return;
        }
        /* The last objects put, newest first (at most 64 remembered). */
        q.kind = CR_MASTER_ADMIN_RECENT_OBJECTS;
        answer(ctx, &q, resp);
        return;
    }
    list_objects(ctx, &q, resp);
}

static void get_stats(void *ctx, const struct cr_http_request *req, struct cr_http_response *resp) {
    (void)req;
    struct cr_master_admin_query q = {.kind = CR_MASTER_ADMIN_STATS};
    answer(ctx, &q, resp);
}

int cr_store_routes_register(struct cr_http_front *front, struct cr_subsystems *peers) {
    static const struct {
        const char *path;
        cr_http_handler handler;
    } routes[] = {
        {"/api/v1/segments", get_segments}, {"/api/v1/segments/", get_segments},
        {"/api/v1/objects", get_objects},   {"/api/v1/objects/", get_objects},
        {"/api/v1/stats", get_stats},
    };
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
        int rc = cr_http_front_add_route(front, "GET", routes[i].path, routes[i].handler, peers);
        if (rc != CR_OK) return rc;
    }
    return CR_OK;
}
