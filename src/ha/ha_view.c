/* What operators see of HA (ha.h): /health's "ha" object and crescent_ha_*
 * metrics, both from the gate's view. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/buf.h"
#include "core/histogram.h"
#include "ha/ha.h"

void cr_ha_health_add(json_t *ha, struct cr_ha_gate *gate) {
    struct cr_ha_view *v = malloc(sizeof(*v));
    if (v == NULL) return;
    cr_ha_gate_view(gate, v);
    json_t *leader = v->leader_value[0] != '\0' ? json_loads(v->leader_value, 0, NULL) : NULL;
    json_t *out = json_pack(
        "{s:s, s:I, s:o, s:I, s:I, s:s, s:s*, s:{s:I, s:I, s:I, s:I}}", "role",
        v->leader ? "leader" : "standby", "term", (json_int_t)v->term, "leader",
        leader != NULL ? leader : json_null(), "lease_ttl_ms", (json_int_t)v->lease_ttl_ms,
        "writable_for_ms", (json_int_t)v->writable_for_ms, "etcd_endpoint", v->etcd_endpoint,
        "last_etcd_error", v->last_error[0] != '\0' ? v->last_error : NULL, "counts", "elections",
        (json_int_t)v->elect.elections, "step_downs", (json_int_t)v->elect.step_downs,
        "leaders_seen", (json_int_t)v->elect.leaders_seen, "renew_failures",
        (json_int_t)v->elect.renew_failures);
    free(v);
    if (out != NULL) json_object_set_new(ha, "election", out);
}

void cr_ha_render_metrics(struct cr_buf *buf, struct cr_ha_gate *gate) {
    struct cr_ha_view *v = malloc(sizeof(*v));
    if (v == NULL) return;
    cr_ha_gate_view(gate, v);
    cr_buf_appendf(buf,
                   "# HELP crescent_ha_leader 1 while this crescentd leads (HA on etcd)\n"
                   "# TYPE crescent_ha_leader gauge\ncrescent_ha_leader %d\n"
                   "# HELP crescent_ha_term The leader's term: its etcd key's create revision\n"
                   "# TYPE crescent_ha_term gauge\ncrescent_ha_term %lld\n"
                   "# HELP crescent_ha_elections_total Terms this crescentd won\n"
                   "# TYPE crescent_ha_elections_total counter\ncrescent_ha_elections_total %llu\n"
                   "# HELP crescent_ha_step_downs_total Times it stopped leading\n"
                   "# TYPE crescent_ha_step_downs_total counter\ncrescent_ha_step_downs_total %llu\n"
                   "# HELP crescent_ha_failovers_total Leader changes a standby saw\n"
                   "# TYPE crescent_ha_failovers_total counter\ncrescent_ha_failovers_total %llu\n"
                   "# HELP crescent_ha_lease_renew_failures_total Lease renewals that failed\n"
                   "# TYPE crescent_ha_lease_renew_failures_total counter\n"
                   "crescent_ha_lease_renew_failures_total %llu\n"
                   "# HELP crescent_ha_etcd_requests_total Requests sent to etcd\n"
                   "# TYPE crescent_ha_etcd_requests_total counter\n"
                   "crescent_ha_etcd_requests_total %llu\n"
                   "# HELP crescent_ha_etcd_errors_total etcd requests that failed\n"
                   "# TYPE crescent_ha_etcd_errors_total counter\ncrescent_ha_etcd_errors_total %llu\n"
                   "# HELP crescent_ha_etcd_request_seconds etcd request latency\n"
                   "# TYPE crescent_ha_etcd_request_seconds histogram\n",
                   v->leader ? 1 : 0, (long long)v->term, (unsigned long long)v->elect.elections,
                   (unsigned long long)v->elect.step_downs,
                   (unsigned long long)v->elect.leaders_seen,
                   (unsigned long long)v->elect.renew_failures,
                   (unsigned long long)v->etcd_requests, (unsigned long long)v->etcd_errors);
    uint64_t cumulative = 0;
    for (uint32_t b = 0; b < CR_HISTOGRAM_BUCKETS; b++) {
        cumulative += v->etcd_latency_buckets[b];
        if (b < CR_HISTOGRAM_BOUNDS)
            cr_buf_appendf(buf, "crescent_ha_etcd_request_seconds_bucket{le=\"%g\"} %llu\n",
                           (double)cr_histogram_bounds_ns[b] / 1e9, (unsigned long long)cumulative);
        else
            cr_buf_appendf(buf, "crescent_ha_etcd_request_seconds_bucket{le=\"+Inf\"} %llu\n",
                           (unsigned long long)cumulative);
    }
    cr_buf_appendf(buf, "crescent_ha_etcd_request_seconds_sum %g\n"
                        "crescent_ha_etcd_request_seconds_count %llu\n",
                   (double)v->etcd_latency_sum_ns / 1e9, (unsigned long long)v->etcd_latency_count);
    free(v);
}
