/* Prometheus text format, version 0.0.4: families in a fixed order, HELP and
 * TYPE before the samples, actor names as the `actor` label. */
#include "http/metrics.h"

#include <assert.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "crescent/version.h"

struct family {
    const char *name;
    const char *type;
    const char *help;
    size_t offset; /* of the uint64_t in struct cr_actor_stats */
};

#define STAT(field) offsetof(struct cr_actor_stats, field)

static const struct family families[] = {
    {"crescent_actor_messages_handled_total", "counter", "Messages the actor has handled.",
     STAT(messages_handled)},
    {"crescent_actor_ring_depth", "gauge", "Messages queued for the actor.", STAT(ring_depth)},
    {"crescent_actor_rings", "gauge", "Sender rings registered with the actor.", STAT(rings)},
    {"crescent_actor_parks_total", "counter", "Times the actor went to sleep.", STAT(parks)},
    {"crescent_actor_spins_total", "counter",
     "Idle periods the actor spun in before sleeping or finding work.", STAT(spins)},
    {"crescent_actor_spins_busy_total", "counter",
     "Idle periods the actor would have spun in, but no core was free.", STAT(spins_busy)},
    {"crescent_actor_wakes_total", "counter", "Wake-ups senders sent to the sleeping actor.",
     STAT(wakes)},
    {"crescent_actor_ring_full_total", "counter", "Sends that found the actor's ring full.",
     STAT(ring_full)},
    {"crescent_actor_send_failures_total", "counter",
     "Sends to the actor that gave up because its ring stayed full.", STAT(send_failures)},
    {"crescent_actor_asks_expired_total", "counter",
     "Asks the actor skipped because the caller had timed out.", STAT(asks_expired)},
    {"crescent_actor_timers_fired_total", "counter", "Timers fired on the actor.",
     STAT(timers_fired)},
};

static void render_family(struct cr_buf *out, const struct family *f,
                          const struct cr_metrics_actor *actors, uint32_t count) {
    cr_buf_appendf(out, "# HELP %s %s\n# TYPE %s %s\n", f->name, f->help, f->name, f->type);
    for (uint32_t i = 0; i < count; i++) {
        if (!actors[i].up || actors[i].view) continue;
        uint64_t value;
        memcpy(&value, (const char *)&actors[i].stats + f->offset, sizeof(value));
        cr_buf_appendf(out, "%s{actor=\"%s\"} %llu\n", f->name, actors[i].name,
                       (unsigned long long)value);
    }
}

static bool is_counter(const char *name) {
    size_t len = strlen(name);
    return len > 6 && strcmp(name + len - 6, "_total") == 0;
}

/* Subsystem counters: crescent_<actor>_<name>, one family per pair. */
static void render_extra(struct cr_buf *out, const struct cr_metrics_actor *actor) {
    for (uint32_t i = 0; i < actor->stats.extra_count; i++) {
        const char *name = actor->stats.extra[i].name;
        assert(name != NULL);
        char scratch[160];
        const char *help = cr_metrics_help(actor->name, name, scratch, sizeof(scratch));
        cr_buf_appendf(out, "# HELP crescent_%s_%s %s\n# TYPE crescent_%s_%s %s\n",
                       actor->name, name, help, actor->name, name,
                       is_counter(name) ? "counter" : "gauge");
        cr_buf_appendf(out, "crescent_%s_%s %llu\n", actor->name, name,
                       (unsigned long long)actor->stats.extra[i].value);
    }
}

/* One histogram's samples: cumulative buckets, sum and count, in seconds. */
static void render_histogram(struct cr_buf *out, const char *family, const char *labels,
                             const struct cr_histogram *h) {
    uint64_t cumulative = 0;
    for (uint32_t b = 0; b < CR_HISTOGRAM_BUCKETS; b++) {
        cumulative += h->buckets[b];
        if (b < CR_HISTOGRAM_BOUNDS)
            cr_buf_appendf(out, "%s_bucket{%s,le=\"%g\"} %llu\n", family, labels,
                           (double)cr_histogram_bounds_ns[b] / 1e9, (unsigned long long)cumulative);
        else
            cr_buf_appendf(out, "%s_bucket{%s,le=\"+Inf\"} %llu\n", family, labels,
                           (unsigned long long)cumulative);
    }
    cr_buf_appendf(out, "%s_sum{%s} %.9f\n%s_count{%s} %llu\n", family, labels,
                   (double)h->sum_ns / 1e9, family, labels, (unsigned long long)h->count);
}

/* An actor's histograms: one family per name (HELP and TYPE before its first). */
static void render_actor_histograms(struct cr_buf *out, const struct cr_metrics_actor *actor) {
    const struct cr_actor_stats *s = &actor->stats;
    for (uint32_t i = 0; i < s->histogram_count; i++) {
        const struct cr_actor_histogram *h = &s->histograms[i];
        char family[128], labels[160];
        snprintf(family, sizeof(family), "crescent_%s_%s", actor->name, h->name);
        if (i == 0 || strcmp(h->name, s->histograms[i - 1].name) != 0)
            cr_buf_appendf(out, "# HELP %s %s\n# TYPE %s histogram\n", family, h->help, family);
        snprintf(labels, sizeof(labels), "%s=\"%s\"", h->label, h->label_value);
        render_histogram(out, family, labels, &h->h);
    }
}

static void render_routes(struct cr_buf *out, const struct cr_http_route_latency *routes,
                          uint32_t count) {
    static const char family[] = "crescent_http_request_duration_seconds";
    cr_buf_appendf(out,
                   "# HELP %s HTTP requests per route, from the request read to the answer "
                   "built.\n# TYPE %s histogram\n",
                   family, family);
    for (uint32_t i = 0; i < count; i++) {
        char labels[192];
        snprintf(labels, sizeof(labels), "method=\"%s\",route=\"%s\"", routes[i].method,
                 routes[i].path);
        render_histogram(out, family, labels, &routes[i].h);
    }
}

void cr_metrics_render(struct cr_buf *out, const struct cr_metrics_actor *actors, uint32_t count,
                       const struct cr_http_route_latency *routes, uint32_t route_count,
                       uint64_t uptime_s) {
    assert(out != NULL && (actors != NULL || count == 0) && (routes != NULL || route_count == 0));
    cr_buf_appendf(out,
                   "# HELP crescent_build_info crescent's version.\n"
                   "# TYPE crescent_build_info gauge\n"
                   "crescent_build_info{version=\"%s\"} 1\n"
                   "# HELP crescent_uptime_seconds Seconds since crescentd started.\n"
                   "# TYPE crescent_uptime_seconds gauge\n"
                   "crescent_uptime_seconds %llu\n",
                   CRESCENT_VERSION, (unsigned long long)uptime_s);
    cr_buf_appendf(out, "# HELP crescent_actor_up Whether the actor answered the stats request.\n"
                        "# TYPE crescent_actor_up gauge\n");
    for (uint32_t i = 0; i < count; i++)
        if (!actors[i].view)
            cr_buf_appendf(out, "crescent_actor_up{actor=\"%s\"} %d\n", actors[i].name,
                           actors[i].up);
    for (size_t f = 0; f < sizeof(families) / sizeof(families[0]); f++)
        render_family(out, &families[f], actors, count);
    for (uint32_t i = 0; i < count; i++)
        if (actors[i].up) render_extra(out, &actors[i]);
    for (uint32_t i = 0; i < count; i++)
        if (actors[i].up) render_actor_histograms(out, &actors[i]);
    render_routes(out, routes, route_count);
}

void cr_metrics_render_refusals(struct cr_buf *out, const struct cr_http_refusals *refused) {
    assert(out != NULL && refused != NULL);
    static const char family[] = "crescent_http_requests_refused_total";
    cr_buf_appendf(out,
                   "# HELP %s HTTP requests refused before any route ran: host (403, a Host "
                   "not allowed: DNS rebinding), origin (403, a cross-site page), "
                   "content_type (415, a body neither JSON nor msgpack), admin_token (401).\n"
                   "# TYPE %s counter\n",
                   family, family);
    const struct { const char *reason; uint64_t n; } rows[] = {
        {"host", refused->host}, {"origin", refused->origin},
        {"content_type", refused->content_type}, {"admin_token", refused->admin_token}};
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        cr_buf_appendf(out, "%s{reason=\"%s\"} %llu\n", family, rows[i].reason,
                       (unsigned long long)rows[i].n);
}
