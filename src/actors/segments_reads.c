/* The clients' read latency per tier (core/read_latency.h) in the segments
 * actor's stats: three histograms, crescent_segments_read_latency_seconds
 * with label tier="memory|disk|local_disk", summed from the reports clients
 * send with Ping (rpc_methods.c's m_ping adds them to st->reads). */
#include "actors/segments_internal.h"

#include "core/read_latency.h"

void segments_read_latency_stats(const struct segments_state *st, struct cr_actor_stats *out) {
    for (uint32_t t = 0; t < CR_READ_LATENCY_TIERS; t++) {
        if (out->histograms == NULL || out->histogram_count >= out->histograms_max) return;
        out->histograms[out->histogram_count++] = (struct cr_actor_histogram){
            .name = "read_latency_seconds",
            .help = "Clients' reads that returned an object's bytes (checksum verified), by the "
                    "tier of the replica read, as the clients measured and reported them with "
                    "Ping (docs/tiers.md).",
            .label = "tier",
            .label_value = cr_read_latency_tier_names[t],
            .h = st->reads.tiers[t]};
    }
}
