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

/* ---- reporting to the master ------------------------------------------------
 * Clients read replicas directly, so crescentd learns read latency only from
 * them: each Ping carries what was observed per tier since the last Ping the
 * master answered (deltas of the histograms above), and crescentd sums them
 * into its /metrics (docs/tiers.md, "Read latency per tier").  A Ping that
 * fails carries the same reads again next time. */

void cr_client_read_report_attach(cr_client *c, struct cr_client_read_report *r,
                                  Crescent__Master__PingRequest *req) {
    assert(c != NULL && r != NULL && req != NULL);
    size_t n = 0;
    for (int t = 0; t < CR_READ_TIERS; t++) {
        const struct cr_histogram *now = &c->read_latency[t], *was = &c->read_reported[t];
        r->snapshot[t] = *now;
        if (now->count == was->count) continue;
        Crescent__Master__PingRequest__ReadLatency *e = &r->entries[n];
        crescent__master__ping_request__read_latency__init(e);
        e->tier = (uint32_t)t;
        e->count = now->count - was->count;
        e->sum_ns = now->sum_ns - was->sum_ns;
        for (uint32_t b = 0; b < CR_HISTOGRAM_BUCKETS; b++)
            r->buckets[t][b] = now->buckets[b] - was->buckets[b];
        e->n_buckets = CR_HISTOGRAM_BUCKETS;
        e->buckets = r->buckets[t];
        r->ptrs[n++] = e;
    }
    req->n_read_latency = n;
    req->read_latency = n > 0 ? r->ptrs : NULL;
}

void cr_client_read_report_sent(cr_client *c, const struct cr_client_read_report *r) {
    assert(c != NULL && r != NULL);
    memcpy(c->read_reported, r->snapshot, sizeof(c->read_reported));
    c->read_reported_ms = c->clock_ms(c->clock_ctx);
}

void cr_client_read_report_poll(cr_client *c) {
    assert(c != NULL);
    bool unreported = false;
    for (int t = 0; t < CR_READ_TIERS; t++)
        unreported = unreported || c->read_latency[t].count != c->read_reported[t].count;
    if (!unreported || c->clock_ms(c->clock_ctx) - c->read_reported_ms < CR_CLIENT_READ_REPORT_MS)
        return;
    /* Its failure is not the get's: the reads go with a later Ping, tried
     * no sooner than the interval after this one. */
    char saved[sizeof(c->error)];
    memcpy(saved, c->error, sizeof(saved));
    if (cr_client_heartbeat(c, NULL, NULL) != CR_OK) {
        memcpy(c->error, saved, sizeof(saved));
        c->read_reported_ms = c->clock_ms(c->clock_ctx);
    }
}
