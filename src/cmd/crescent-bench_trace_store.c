/* crescent-bench --workload trace-store: the store as a trace's KV cache
 * pool (see crescent-bench_trace.c for the workload). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/crescent-bench.h"
#include "core/kv_trace.h"
#include "core/prefix_hash.h"
#include "core/prefix_map.h"

#define KEY_BYTES 48u
#define PING_NS 500000000u /* as the store workloads ping for --mount-fake */

enum { CALL_EXIST, CALL_GET, CALL_PUT, CALLS };
static const char *const call_names[CALLS] = {"BatchExistKey", "BatchGet", "BatchPut"};

struct store_run {
    const struct bench_options *opt;
    cr_client *c;
    char (*keys)[KEY_BYTES];
    const char **names;
    int *status;
    struct cr_put_item *items;
    struct cr_put_data *data_items;
    struct cr_get_buffer *get_items;
    void *value;                 /* --block-bytes of value, shared by every put */
    void *sink;                  /* where gets land */
    struct cr_prefix_map put;    /* chain hash -> 1: keys this run put and believes present */
    size_t map_bytes;
    uint64_t *put_order;         /* every key put, for the clean-up */
    size_t put_count, put_cap;
    uint64_t blocks, hit, evicted, keys_done, failed;
    struct cr_latency_hist hist[CALLS];
};

static void key_of(const struct bench_options *opt, uint64_t chain, char out[KEY_BYTES]) {
    snprintf(out, KEY_BYTES, "%s-%016" PRIx64, opt->run_id, chain);
}

static bool data_plane(const struct bench_options *opt) {
    return opt->block_bytes > 0 && !opt->mount_fake;
}

/* One timed call over keys[0, n); fills status[]. */
static int exist(struct store_run *s, size_t n) {
    struct cr_status_list st = {0};
    uint64_t t0 = bench_now_ns();
    int rc = cr_client_batch_exist_key(s->c, s->opt->tenant, s->names, n, &st);
    cr_latency_hist_record(&s->hist[CALL_EXIST], bench_now_ns() - t0);
    for (size_t i = 0; rc == CR_OK && i < n; i++) s->status[i] = i < st.count ? st.statuses[i] : rc;
    cr_client_status_list_free(&st);
    s->keys_done += n;
    return rc;
}

static int get(struct store_run *s, size_t n) {
    if (n == 0) return CR_OK;
    uint64_t t0 = bench_now_ns();
    int rc;
    if (data_plane(s->opt)) {
        for (size_t i = 0; i < n; i++)
            s->get_items[i] = (struct cr_get_buffer){.key = s->names[i], .buf = s->sink,
                                                     .cap = s->opt->block_bytes};
        rc = cr_client_batch_get_into(s->c, s->opt->tenant, s->get_items, n);
        for (size_t i = 0; rc == CR_OK && i < n; i++) s->failed += s->get_items[i].status != CR_OK;
    } else {
        struct cr_replica_lists lists = {0};
        rc = cr_client_batch_get_replica_list(s->c, s->opt->tenant, s->names, n, &lists);
        for (size_t i = 0; rc == CR_OK && i < lists.count; i++)
            s->failed += lists.lists[i].status != CR_OK;
        cr_client_replica_lists_free(&lists);
    }
    cr_latency_hist_record(&s->hist[CALL_GET], bench_now_ns() - t0);
    s->keys_done += n;
    return rc;
}

/* Puts names[first, first + n); statuses of the items in status[]. */
static int put(struct store_run *s, size_t first, size_t n) {
    if (n == 0) return CR_OK;
    const char **names = s->names + first;
    uint64_t t0 = bench_now_ns();
    int rc;
    if (data_plane(s->opt)) {
        for (size_t i = 0; i < n; i++)
            s->data_items[i] = (struct cr_put_data){.key = names[i], .data = s->value,
                                                    .len = s->opt->block_bytes};
        rc = cr_client_batch_put(s->c, s->opt->tenant, s->data_items, n);
        for (size_t i = 0; rc == CR_OK && i < n; i++) s->status[i] = s->data_items[i].status;
    } else {
        struct cr_replica_lists started = {0};
        struct cr_status_list ended = {0};
        uint64_t size = s->opt->block_bytes > 0 ? s->opt->block_bytes : 4096;
        for (size_t i = 0; i < n; i++)
            s->items[i] = (struct cr_put_item){.key = names[i], .size_bytes = size};
        rc = cr_client_batch_put_start(s->c, s->opt->tenant, s->items, n, &started);
        size_t ok = 0;
        for (size_t i = 0; rc == CR_OK && i < n; i++) {
            s->status[i] = i < started.count ? started.lists[i].status : CR_ERR_PROTOCOL;
            if (s->status[i] == CR_OK) names[ok++] = names[i];
        }
        cr_client_replica_lists_free(&started);
        if (rc == CR_OK && ok > 0)
            rc = cr_client_batch_put_end(s->c, s->opt->tenant, names, ok, &ended);
        cr_client_status_list_free(&ended);
    }
    cr_latency_hist_record(&s->hist[CALL_PUT], bench_now_ns() - t0);
    s->keys_done += n;
    return rc;
}

static int remember(struct store_run *s, uint64_t chain) {
    uint64_t seen;
    if (cr_prefix_map_get(&s->put, chain, &seen)) return CR_OK;
    if (s->put_count == s->put_cap) {
        size_t cap = s->put_cap ? s->put_cap * 2 : 4096;
        uint64_t *grown = realloc(s->put_order, cap * sizeof(uint64_t));
        if (grown == NULL) return CR_ERR_NOMEM;
        s->put_order = grown, s->put_cap = cap;
    }
    s->put_order[s->put_count++] = chain;
    return cr_prefix_map_put(&s->put, chain, 1);
}

static int serve(struct store_run *s, uint64_t *chain, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) {
        key_of(s->opt, chain[i], s->keys[i]);
        s->names[i] = s->keys[i];
    }
    int rc = exist(s, n);
    if (rc != CR_OK) return rc;
    uint32_t hit = 0;
    while (hit < n && s->status[hit] == CR_OK) hit++;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t v;
        bool believed = cr_prefix_map_get(&s->put, chain[i], &v) && v == 1;
        if (believed && s->status[i] != CR_OK) { /* ours, gone: the store evicted it */
            s->evicted++;
            cr_prefix_map_put(&s->put, chain[i], 0);
        }
    }
    s->blocks += n;
    s->hit += hit;
    rc = get(s, hit);
    if (rc != CR_OK) return rc;
    /* The misses: everything after the prefix that does not exist. */
    uint32_t missing = 0;
    for (uint32_t i = hit; i < n; i++) {
        if (s->status[i] == CR_OK) continue;
        s->names[hit + missing] = s->keys[i];
        chain[hit + missing] = chain[i];
        missing++;
    }
    rc = put(s, hit, missing);
    for (uint32_t i = 0; rc == CR_OK && i < missing; i++) {
        if (s->status[i] == CR_OK) {
            rc = remember(s, chain[hit + i]);
            if (rc == CR_OK) rc = cr_prefix_map_put(&s->put, chain[hit + i], 1);
        } else {
            s->failed++;
        }
    }
    return rc;
}

static void clean_up(struct store_run *s) {
    uint64_t failed = 0;
    for (size_t first = 0; first < s->put_count; first += CR_CLIENT_BATCH_MAX) {
        size_t n = s->put_count - first < CR_CLIENT_BATCH_MAX ? s->put_count - first
                                                              : CR_CLIENT_BATCH_MAX;
        for (size_t i = 0; i < n; i++) {
            key_of(s->opt, s->put_order[first + i], s->keys[i]);
            s->names[i] = s->keys[i];
        }
        struct cr_status_list st = {0};
        int rc = cr_client_batch_remove(s->c, s->opt->tenant, s->names, n, true, &st);
        for (size_t i = 0; i < st.count; i++)
            failed += st.statuses[i] != CR_OK && st.statuses[i] != CR_ERR_OBJECT_NOT_FOUND;
        if (rc != CR_OK) failed += n;
        cr_client_status_list_free(&st);
    }
    if (failed > 0)
        fprintf(stderr, "crescent-bench: %" PRIu64 " keys of tenant %s (prefix %s-) could not "
                "be removed\n", failed, s->opt->tenant, s->opt->run_id);
}

int bench_trace_store(const struct bench_options *opt, const struct cr_kv_trace *t, FILE *out);

int bench_trace_store(const struct bench_options *opt, const struct cr_kv_trace *t, FILE *out) {
    struct store_run *s = calloc(1, sizeof(*s));
    size_t cap = CR_CLIENT_BATCH_MAX;
    uint64_t *chain = malloc(cap * sizeof(uint64_t));
    if (s == NULL || chain == NULL) return fprintf(stderr, "crescent-bench: out of memory\n"), 1;
    s->opt = opt;
    cr_prefix_map_init(&s->put, &s->map_bytes);
    for (int k = 0; k < CALLS; k++) cr_latency_hist_reset(&s->hist[k]);
    s->keys = calloc(cap, KEY_BYTES);
    s->names = calloc(cap, sizeof(*s->names));
    s->status = calloc(cap, sizeof(*s->status));
    s->items = calloc(cap, sizeof(*s->items));
    s->data_items = calloc(cap, sizeof(*s->data_items));
    s->get_items = calloc(cap, sizeof(*s->get_items));
    if (data_plane(opt)) {
        s->value = malloc(opt->block_bytes);
        s->sink = malloc(opt->block_bytes);
        if (s->value != NULL) memset(s->value, 'k', opt->block_bytes);
    }
    int rc = BENCH_EXIT_ERRORS;
    if (s->keys == NULL || s->names == NULL || s->status == NULL || s->items == NULL ||
        s->data_items == NULL || s->get_items == NULL ||
        (data_plane(opt) && (s->value == NULL || s->sink == NULL))) {
        fprintf(stderr, "crescent-bench: out of memory\n");
        goto done;
    }
    char error[256];
    struct cr_client_options options = {.timeout_ms = opt->timeout_ms};
    if (cr_client_open(opt->rpc_address, &options, &s->c, error, sizeof(error)) != CR_OK) {
        fprintf(stderr, "crescent-bench: cannot open %s: %s\n", opt->rpc_address, error);
        rc = BENCH_EXIT_UNREACHABLE;
        goto done;
    }
    char segment[64] = "";
    if (opt->mount_fake) {
        /* As the store workloads' --mount-fake: metadata only, never touched. */
        snprintf(segment, sizeof(segment), "crescent-bench-%s", opt->run_id);
        struct cr_segment_spec spec = {.name = segment, .base = UINT64_C(1) << 46,
                                       .size_bytes = opt->fake_segment_bytes,
                                       .transport_endpoint = "127.0.0.1:9"};
        if (cr_client_mount_segment(s->c, &spec) != CR_OK) {
            fprintf(stderr, "crescent-bench: --mount-fake: mounting %s failed: %s\n", segment,
                    cr_client_last_error(s->c));
            rc = BENCH_EXIT_UNREACHABLE;
            goto done;
        }
    }
    uint64_t start = bench_now_ns(), pinged = start;
    for (size_t r = 0; r < t->count; r++) {
        if (segment[0] != '\0' && bench_now_ns() - pinged > PING_NS) {
            (void)cr_client_ping(s->c, NULL); /* keeps the fake segment's owner alive */
            pinged = bench_now_ns();
        }
        if (opt->trace_speed > 0.0)
            bench_sleep_until(start + (uint64_t)((double)(t->requests[r].timestamp_ms -
                                                          t->requests[0].timestamp_ms) *
                                                 1e6 / opt->trace_speed));
        uint32_t n = t->requests[r].block_count < cap ? t->requests[r].block_count : (uint32_t)cap;
        const uint64_t *ids = cr_kv_trace_ids(t, r);
        uint64_t prev = 0x6372657363656e74ull;
        for (uint32_t b = 0; b < n; b++) chain[b] = prev = cr_prefix_hash_roll(prev, ids[b], 0);
        int step = serve(s, chain, n);
        if (step != CR_OK) {
            fprintf(stderr, "crescent-bench: trace request %zu: %s (%s)\n", r, cr_strerror(step),
                    cr_client_last_error(s->c));
            rc = BENCH_EXIT_UNREACHABLE;
            clean_up(s);
            goto unmount;
        }
    }
    double elapsed = (double)(bench_now_ns() - start) / 1e9;
    uint64_t bad = 0;
    for (int k = 0; k < CR_KV_TRACE_BAD_KINDS; k++) bad += t->bad[k];
    fprintf(out, "trace: %zu requests, %zu blocks, %" PRIu64 " bad lines skipped\n", t->count,
            t->id_count, bad);
    fprintf(out, "trace-store: %s, block %" PRIu64 " bytes%s, %.2f s\n", opt->rpc_address,
            opt->block_bytes > 0 ? opt->block_bytes : 4096,
            data_plane(opt) ? " moved through the data plane" : " (metadata only)", elapsed);
    fprintf(out, "hit rate %.2f%% (%" PRIu64 " of %" PRIu64 " blocks), %" PRIu64
            " evictions seen, %" PRIu64 " keys in %.0f keys/s, %" PRIu64 " keys failed\n",
            s->blocks ? 100.0 * (double)s->hit / (double)s->blocks : 0.0, s->hit, s->blocks,
            s->evicted, s->keys_done, (double)s->keys_done / elapsed, s->failed);
    for (int k = 0; k < CALLS; k++) {
        const struct cr_latency_hist *h = &s->hist[k];
        if (h->total_count == 0) continue;
        fprintf(out, "%-14s %10" PRIu64 " calls  p50 %9.1f us  p99 %9.1f us  max %9.1f us\n",
                call_names[k], h->total_count, (double)cr_latency_hist_value_at(h, 50) / 1e3,
                (double)cr_latency_hist_value_at(h, 99) / 1e3,
                (double)cr_latency_hist_value_at(h, 100) / 1e3);
    }
    clean_up(s);
    rc = s->failed > 0 ? BENCH_EXIT_ERRORS : BENCH_EXIT_OK;
unmount:
    if (segment[0] != '\0' && cr_client_unmount_segment(s->c, segment) != CR_OK)
        fprintf(stderr, "crescent-bench: unmounting %s failed: %s\n", segment,
                cr_client_last_error(s->c));
done:
    cr_client_close(s->c);
    cr_prefix_map_free(&s->put);
    free(s->put_order);
    free(s->keys);
    free(s->names);
    free(s->status);
    free(s->items);
    free(s->data_items);
    free(s->get_items);
    free(s->value);
    free(s->sink);
    free(s);
    free(chain);
    return rc;
}
