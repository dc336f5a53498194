/* Per-publisher health in /metrics, rendered from the indexer's /services
 * answer (see metrics.h).  Labels instance, tenant and dp_rank are the
 * publisher's key; there are at most CR_INDEXER_SOURCES_MAX (256) of them,
 * which bounds the series. */
#include <assert.h>
#include <string.h>

#include "http/metrics.h"

struct publisher_family {
    const char *name;
    const char *type;
    const char *help;
    const char *object;  /* "counters", or NULL: the field is in the service itself */
    const char *field;
};

static const struct publisher_family publisher_families[] = {
    {"crescent_indexer_publisher_connected", "gauge",
     "Whether the publisher's SUB link is connected (1) or not (0), from its ZMQ monitor.", NULL,
     "link"},
    {"crescent_indexer_publisher_link_age_seconds", "gauge",
     "Seconds since the publisher's link last changed state (or since registration).", NULL,
     "link_age_s"},
    {"crescent_indexer_publisher_last_batch_age_seconds", "gauge",
     "Seconds since a live or replayed batch last came from the publisher (absent before one).",
     NULL, "last_batch_age_s"},
    {"crescent_indexer_publisher_last_seq", "gauge",
     "Sequence number of the publisher's last applied batch (absent before one).", NULL,
     "last_seq"},
    {"crescent_indexer_publisher_gaps_total", "counter",
     "Sequence gaps seen in the publisher's batches.", "counters", "gaps"},
    {"crescent_indexer_publisher_replays_total", "counter",
     "Replays asked of the publisher to fill gaps.", "counters", "replays"},
    {"crescent_indexer_publisher_replayed_batches_total", "counter",
     "Batches the publisher's replay delivered.", "counters", "replayed_batches"},
    {"crescent_indexer_publisher_lost_batches_total", "counter",
     "Batches the publisher's replay no longer held (history lost).", "counters", "lost_batches"},
    {"crescent_indexer_publisher_stale", "gauge",
     "Whether the index may miss some of the publisher's blocks (1) or not (0).", NULL,
     "possibly_stale"},
};

/* A label value in the text format: backslash, quote and newline escaped. */
static void append_label(struct cr_buf *out, const char *name, const char *value, bool last) {
    cr_buf_appendf(out, "%s=\"", name);
    for (const char *p = value; *p != '\0'; p++) {
        if (*p == '\\' || *p == '"') cr_buf_appendf(out, "\\%c", *p);
        else if (*p == '\n') cr_buf_appendf(out, "\\n");
        else cr_buf_appendf(out, "%c", *p);
    }
    cr_buf_appendf(out, "\"%s", last ? "" : ",");
}

/* The sample's field, or NULL when it has none: a null field (no batch yet,
 * no seq yet). */
static json_t *field_of(const struct publisher_family *f, json_t *service) {
    json_t *holder = f->object != NULL ? json_object_get(service, f->object) : service;
    json_t *v = json_object_get(holder, f->field);
    return json_is_string(v) || json_is_boolean(v) || json_is_number(v) ? v : NULL;
}

static void append_value(struct cr_buf *out, json_t *v) {
    if (json_is_string(v)) /* "link": connected, disconnected, never connected */
        cr_buf_appendf(out, "%d\n", strcmp(json_string_value(v), "connected") == 0);
    else if (json_is_boolean(v))
        cr_buf_appendf(out, "%d\n", json_is_true(v));
    else if (json_is_integer(v))
        cr_buf_appendf(out, "%lld\n", (long long)json_integer_value(v));
    else
        cr_buf_appendf(out, "%.3f\n", json_number_value(v));
}

void cr_metrics_render_publishers(struct cr_buf *out, json_t *services) {
    assert(out != NULL);
    json_t *list = json_object_get(services, "services");
    for (size_t f = 0; f < sizeof(publisher_families) / sizeof(publisher_families[0]); f++) {
        const struct publisher_family *fam = &publisher_families[f];
        cr_buf_appendf(out, "# HELP %s %s\n# TYPE %s %s\n", fam->name, fam->help, fam->name,
                       fam->type);
        size_t i;
        json_t *service;
        json_array_foreach(list, i, service) {
            const char *instance = json_string_value(json_object_get(service, "instance_id"));
            const char *tenant = json_string_value(json_object_get(service, "tenant_id"));
            json_t *v = field_of(fam, service);
            if (instance == NULL || tenant == NULL || v == NULL) continue;
            cr_buf_appendf(out, "%s{", fam->name);
            append_label(out, "instance", instance, false);
            append_label(out, "tenant", tenant, false);
            cr_buf_appendf(out, "dp_rank=\"%lld\"} ",
                           (long long)json_integer_value(json_object_get(service, "dp_rank")));
            append_value(out, v);
        }
    }
}
