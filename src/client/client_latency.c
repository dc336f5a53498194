/* Read latency per tier, as this client sees it (include/crescent/client.h,
 * "read latency per tier"): a histogram per tier in the client, fed by the
 * read paths (client_data.c for memory and local_disk replicas,
 * client_files.c for the file tier), read here.  The client is used by one
 * thread at a time, as every other field of cr_client: no lock. */
#include <assert.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "client/client_internal.h"

static const char *const tier_names[CR_READ_TIERS] = {"memory", "disk", "local_disk"};

uint64_t cr_client_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void cr_client_read_observe(cr_client *c, int tier, uint64_t ns) {
    assert(c != NULL && tier >= 0 && tier < CR_READ_TIERS);
    cr_histogram_observe(&c->read_latency[tier], ns);
}

int cr_client_read_latency(cr_client *c, int tier, struct cr_read_latency *out) {
    assert(c != NULL && out != NULL);
    _Static_assert(CR_READ_LATENCY_BOUNDS == CR_HISTOGRAM_BOUNDS, "bucket count");
    if (tier < 0 || tier >= CR_READ_TIERS)
        return cr_client_fail(c, CR_ERR_INVALID_PARAMS, "read tier %d: want 0 (memory), "
                              "1 (disk) or 2 (local_disk)", tier);
    const struct cr_histogram *h = &c->read_latency[tier];
    out->count = h->count;
    out->sum_ns = h->sum_ns;
    memcpy(out->bound_ns, cr_histogram_bounds_ns, sizeof(out->bound_ns));
    memcpy(out->buckets, h->buckets, sizeof(out->buckets));
    return CR_OK;
}

int cr_client_read_latency_metrics(cr_client *c, char *buf, size_t cap, size_t *len) {
    assert(c != NULL && (buf != NULL || cap == 0));
    size_t at = 0;
    bool fits = true;
#define EMIT(...)                                                                  \
    do {                                                                           \
        int n_ = snprintf(buf + (fits ? at : 0), fits ? cap - at : 0, __VA_ARGS__); \
        if (n_ < 0 || (size_t)n_ >= (fits ? cap - at : 0)) fits = false;           \
        else at += (size_t)n_;                                                     \
    } while (0)
    if (cap == 0) fits = false;
    EMIT("# HELP crescent_client_read_latency_seconds Time of this client's reads that "
         "returned an object's bytes, by the tier of the replica read.\n"
         "# TYPE crescent_client_read_latency_seconds histogram\n");
    for (int t = 0; fits && t < CR_READ_TIERS; t++) {
        const struct cr_histogram *h = &c->read_latency[t];
        uint64_t cumulative = 0;
        for (uint32_t b = 0; b < CR_HISTOGRAM_BOUNDS; b++) {
            cumulative += h->buckets[b];
            EMIT("crescent_client_read_latency_seconds_bucket{tier=\"%s\",le=\"%g\"} %llu\n",
                 tier_names[t], (double)cr_histogram_bounds_ns[b] / 1e9,
                 (unsigned long long)cumulative);
        }
        EMIT("crescent_client_read_latency_seconds_bucket{tier=\"%s\",le=\"+Inf\"} %llu\n"
             "crescent_client_read_latency_seconds_sum{tier=\"%s\"} %.9f\n"
             "crescent_client_read_latency_seconds_count{tier=\"%s\"} %llu\n",
             tier_names[t], (unsigned long long)h->count, tier_names[t],
             (double)h->sum_ns / 1e9, tier_names[t], (unsigned long long)h->count);
    }
#undef EMIT
    if (!fits) {
        if (cap > 0) buf[0] = '\0';
        return cr_client_fail(c, CR_ERR_INVALID_PARAMS, "a %zu-byte buffer is too small for "
                              "the read latency metrics", cap);
    }
    if (len != NULL) *len = at;
    return CR_OK;
}
