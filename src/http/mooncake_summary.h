/* GET /metrics/summary on --metrics-port: Mooncake master's one line
 * (master_admin_service's BuildMetricsSummaryText: role, state, then
 * MasterMetricManager::get_summary_string and HAMetricManager's), in its
 * words and order, from the same values as its /metrics families
 * (mooncake_metrics.c).  The reference's request rates are over the window
 * since its periodic reporter's last snapshot (--enable_metric_reporting);
 * crescentd has no such reporter, so its window is the time since the
 * previous GET /metrics/summary (the first answers 0.00, as the reference
 * does before its first snapshot). */
#ifndef CRESCENT_HTTP_MOONCAKE_SUMMARY_H
#define CRESCENT_HTTP_MOONCAKE_SUMMARY_H

#include <stdbool.h>
#include <stdint.h>

#include "core/buf.h"
#include "http/metrics.h"
#include "http/mooncake_ha.h"

#define CR_MC_SUMMARY_WINDOWED 77u /* the counters whose rates it shows */

/* The previous request's readings.  One front thread uses it. */
struct cr_mc_summary_window {
    bool initialized;
    uint64_t at_ns;
    uint64_t values[CR_MC_SUMMARY_WINDOWED];
};

/* Appends the summary (no trailing newline, as the reference), its role
 * and state from `ha` (mooncake_ha.h), and moves the window to now_ns. */
void cr_mc_summary_render(struct cr_buf *b, const struct cr_metrics_actor *actors, uint32_t count,
                          uint64_t now_ns, struct cr_mc_summary_window *window,
                          const struct cr_mc_ha *ha);

#endif
