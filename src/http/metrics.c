/* Prometheus text format, version 0.0.4: families in a fixed order, HELP and
 * TYPE before the samples, actor names as the `actor` label. */
#include "http/metrics.h"

#include <assert.h>
#include <stddef.h>
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
        if (!actors[i].up) continue;
        uint64_t value;
        memcpy(&value, (const char *)&actors[i].stats + f->offset, sizeof(value));
        cr_buf_appendf(out, "%s{actor=\"%s\"} %llu\n", f->name, actors[i].name,
                       (unsigned long long)value);
    }
}

/* Subsystem counters: crescent_<actor>_<name>, one family per pair. */
static void render_extra(struct cr_buf *out, const struct cr_metrics_actor *actor) {
    for (uint32_t i = 0; i < actor->stats.extra_count; i++) {
        const char *name = actor->stats.extra[i].name;
        assert(name != NULL);
        cr_buf_appendf(out, "# TYPE crescent_%s_%s untyped\ncrescent_%s_%s %llu\n", actor->name,
                       name, actor->name, name,
                       (unsigned long long)actor->stats.extra[i].value);
    }
}

void cr_metrics_render(struct cr_buf *out, const struct cr_metrics_actor *actors, uint32_t count,
                       uint64_t uptime_s) {
    assert(out != NULL && (actors != NULL || count == 0));
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
        cr_buf_appendf(out, "crescent_actor_up{actor=\"%s\"} %d\n", actors[i].name, actors[i].up);
    for (size_t f = 0; f < sizeof(families) / sizeof(families[0]); f++)
        render_family(out, &families[f], actors, count);
    for (uint32_t i = 0; i < count; i++)
        if (actors[i].up) render_extra(out, &actors[i]);
}
