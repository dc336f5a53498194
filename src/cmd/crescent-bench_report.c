/* crescent-bench's output: the summary table (in the manner of
 * redis-benchmark's) and the JSON document with every number. */
#include <assert.h>
#include <inttypes.h>
#include <jansson.h>
#include <string.h>

#include "cmd/crescent-bench.h"

/* The percentiles of the table and of the JSON's "latency_us" objects. */
static const double table_points[] = {50.0, 75.0, 90.0, 99.0, 99.9, 99.99};
#define TABLE_POINTS (sizeof(table_points) / sizeof(table_points[0]))
static const char *const table_names[TABLE_POINTS] = {"p50", "p75", "p90", "p99", "p99.9",
                                                      "p99.99"};

static double us(uint64_t ns) { return (double)ns / 1000.0; }

const char *bench_status_name(int status, char buf[16]) {
    if (status <= 0) return cr_status_name(status);
    snprintf(buf, 16, "HTTP_%d", status);
    return buf;
}

static void print_row(FILE *out, const char *name, uint64_t ops, double elapsed_s,
                      const struct cr_latency_hist *h) {
    if (ops == 0) return;
    fprintf(out, "%-8s %10" PRIu64 " %11.0f %9.1f %9.1f", name, ops,
            elapsed_s > 0 ? (double)ops / elapsed_s : 0.0, us(h->min_value),
            cr_latency_hist_mean(h) / 1000.0);
    for (size_t i = 0; i < TABLE_POINTS; i++)
        fprintf(out, " %9.1f", us(cr_latency_hist_value_at(h, table_points[i])));
    fprintf(out, " %9.1f\n", us(h->max_value));
}

static void describe(FILE *out, const struct bench_options *opt) {
    fprintf(out, "====== %s", opt->workload);
    if (strcmp(opt->workload, "mix") == 0)
        fprintf(out, " (get:put:exist:remove %u:%u:%u:%u)", opt->mix[OP_GET], opt->mix[OP_PUT],
                opt->mix[OP_EXIST], opt->mix[OP_REMOVE]);
    fprintf(out, " ======\n  %s, tenant %s; %u connection%s x depth %u, batch %u; ",
            opt->indexer ? opt->http_address : opt->rpc_address, opt->tenant, opt->connections, opt->connections == 1 ? "" : "s",
            opt->batch > 1 ? 1 : opt->depth, opt->batch);
    if (opt->rate > 0)
        fprintf(out, "open loop at %.0f ops/s (latency from the intended send time)\n", opt->rate);
    else
        fprintf(out, "closed loop\n");
    const char *dist = opt->distribution == DIST_ZIPFIAN ? "zipfian" : "uniform";
    if (opt->indexer)
        fprintf(out, "  indexer %s: %" PRIu64 " prompts (%s) of %u tokens, %.0f%% shared prefix, "
                "%u instances, blocks of %u; warm-up %.1f s\n", opt->http_address, opt->keys,
                dist, opt->prompt_tokens, 100.0 * opt->shared_prefix, opt->instances,
                opt->block_size, opt->warmup_s);
    else
        fprintf(out, "  key space %" PRIu64 " (%s), objects of %" PRIu64 " bytes, warm-up %.1f s\n",
                opt->keys, dist, opt->object_bytes, opt->warmup_s);
}

void bench_print_summary(FILE *out, const struct bench_options *opt,
                         const struct bench_totals *t) {
    describe(out, opt);
    fprintf(out, "  %" PRIu64 " operations (%" PRIu64 " keys) in %.2f s: %.0f ops/s, %" PRIu64
            " errors\n\n", t->ops_all, t->keys_done, t->elapsed_s,
            t->elapsed_s > 0 ? (double)t->ops_all / t->elapsed_s : 0.0, t->errors);
    if (opt->values && t->elapsed_s > 0) /* bytes of the operations that succeeded */
        fprintf(out, "  %.3f GB/s of %" PRIu64 "-byte values\n\n",
                (double)(t->ops_all - t->errors) * (double)opt->object_bytes / t->elapsed_s / 1e9,
                opt->object_bytes);
    if (opt->rate > 0)
        fprintf(out, "  sent %.1f ops/s of the %.1f asked for\n\n", t->sent_rate, opt->rate);
    fprintf(out, "latency in microseconds\n%-8s %10s %11s %9s %9s", "op", "ops", "ops/s", "min",
            "avg");
    for (size_t i = 0; i < TABLE_POINTS; i++) fprintf(out, " %9s", table_names[i]);
    fprintf(out, " %9s\n", "max");
    for (int op = 0; op < OP_KINDS; op++)
        print_row(out, bench_op_names[op], t->ops[op], t->elapsed_s, t->hist[op]);
    int kinds = 0;
    for (int op = 0; op < OP_KINDS; op++) kinds += t->ops[op] > 0;
    if (kinds > 1) print_row(out, "all", t->ops_all, t->elapsed_s, t->hist[OP_KINDS]);
    /* wrk2's --u_latency: from each send, hiding the queueing an open loop
     * that falls behind causes; the rows above count from when each was due. */
    print_row(out, "uncorr.", t->ops_all, t->elapsed_s, t->uncorrected);
    char name[16];
    for (size_t i = 0; i < t->status_kinds; i++)
        fprintf(out, "errors: %-24s %" PRIu64 "\n", bench_status_name(t->statuses[i].status, name),
                t->statuses[i].count);
    if (t->statuses_other > 0) fprintf(out, "errors: other statuses %" PRIu64 "\n",
                                       t->statuses_other);
}

/* ---- JSON ------------------------------------------------------------------ */

static json_t *latency_json(const struct cr_latency_hist *h) {
    json_t *o = json_object();
    json_object_set_new(o, "count", json_integer((json_int_t)h->total_count));
    json_object_set_new(o, "min", json_real(h->total_count ? us(h->min_value) : 0.0));
    json_object_set_new(o, "mean", json_real(cr_latency_hist_mean(h) / 1000.0));
    for (size_t i = 0; i < TABLE_POINTS; i++)
        json_object_set_new(o, table_names[i],
                            json_real(us(cr_latency_hist_value_at(h, table_points[i]))));
    json_object_set_new(o, "max", json_real(us(h->max_value)));
    return o;
}

/* [percentile, us] pairs at 0, 10, ..., 90, then 5 points per decade of
 * 1 - p up to 99.999, then 100: what a latency-by-percentile plot draws. */
static json_t *curve_json(const struct cr_latency_hist *h) {
    json_t *a = json_array();
    double points[64];
    size_t n = 0;
    for (int i = 0; i < 9; i++) points[n++] = 10.0 * i;
    for (double tail = 10.0; tail >= 0.0011; tail /= 1.5848931924611136) /* 10^(1/5) */
        points[n++] = 100.0 - tail;
    points[n++] = 100.0;
    assert(n <= sizeof(points) / sizeof(points[0]));
    for (size_t i = 0; i < n; i++) {
        json_t *pair = json_array();
        json_array_append_new(pair, json_real(points[i]));
        json_array_append_new(pair, json_real(us(cr_latency_hist_value_at(h, points[i]))));
        json_array_append_new(a, pair);
    }
    return a;
}

static json_t *options_json(const struct bench_options *opt) {
    json_t *o = json_object(), *mix = json_object();
    for (int op = 0; op < OP_KINDS; op++)
        json_object_set_new(mix, bench_op_names[op], json_integer(opt->mix[op]));
    json_object_set_new(o, "rpc", json_string(opt->rpc_address));
    json_object_set_new(o, "tenant", json_string(opt->tenant));
    json_object_set_new(o, "run_id", json_string(opt->run_id));
    json_object_set_new(o, "workload", json_string(opt->workload));
    json_object_set_new(o, "mix", mix);
    json_object_set_new(o, "connections", json_integer(opt->connections));
    json_object_set_new(o, "depth", json_integer(opt->depth));
    json_object_set_new(o, "batch", json_integer(opt->batch));
    json_object_set_new(o, "keys", json_integer((json_int_t)opt->keys));
    json_object_set_new(o, "distribution",
                        json_string(opt->distribution == DIST_ZIPFIAN ? "zipfian" : "uniform"));
    json_object_set_new(o, "zipf_theta", json_real(opt->zipf_theta));
    json_object_set_new(o, "object_bytes", json_integer((json_int_t)opt->object_bytes));
    json_object_set_new(o, "loop", json_string(opt->rate > 0 ? "open" : "closed"));
    json_object_set_new(o, "rate", json_real(opt->rate));
    json_object_set_new(o, "duration_s", json_real(opt->duration_s));
    json_object_set_new(o, "count", json_integer((json_int_t)opt->count));
    json_object_set_new(o, "warmup_s", json_real(opt->warmup_s));
    json_object_set_new(o, "mount_fake", json_boolean(opt->mount_fake));
    if (opt->indexer) {
        json_object_set_new(o, "http", json_string(opt->http_address));
        json_object_set_new(o, "model", json_string(opt->model));
        json_object_set_new(o, "prompts", json_integer((json_int_t)opt->keys));
        json_object_set_new(o, "prompt_tokens", json_integer(opt->prompt_tokens));
        json_object_set_new(o, "shared_prefix", json_real(opt->shared_prefix));
        json_object_set_new(o, "instances", json_integer(opt->instances));
        json_object_set_new(o, "block_size", json_integer(opt->block_size));
    }
    return o;
}

static json_t *timeline_json(const struct bench_totals *t) {
    json_t *a = json_array();
    for (unsigned s = 0; s < t->seconds_used; s++) {
        const struct bench_second *x = &t->seconds[s];
        json_t *o = json_object();
        json_object_set_new(o, "second", json_integer(s));
        json_object_set_new(o, "ops", json_integer((json_int_t)x->ops));
        /* The last second is partial (the window's end, in-flight calls
         * finishing): its rate is its ops over the part it covers, not a
         * collapse to a fraction of the others. */
        double covered = t->span_s - (double)s;
        double span = covered >= 1.0 || covered <= 0.0 ? 1.0 : covered;
        json_object_set_new(o, "span_s", json_real(span));
        json_object_set_new(o, "ops_per_s", json_real((double)x->ops / span));
        json_object_set_new(o, "errors", json_integer((json_int_t)x->errors));
        json_object_set_new(o, "latency_mean_us",
                            json_real(x->ops ? x->latency_sum_ns / 1000.0 / (double)x->ops : 0.0));
        json_object_set_new(o, "latency_max_us", json_real(us(x->latency_max_ns)));
        json_array_append_new(a, o);
    }
    return a;
}

json_t *bench_json_document(const struct bench_options *opt, const struct bench_totals *t) {
    json_t *doc = json_object(), *ops = json_object(), *lat = json_object();
    json_t *errors = json_object();
    json_object_set_new(doc, "options", options_json(opt));
    for (int op = 0; op < OP_KINDS; op++) {
        json_object_set_new(ops, bench_op_names[op], json_integer((json_int_t)t->ops[op]));
        if (t->ops[op] > 0) json_object_set_new(lat, bench_op_names[op], latency_json(t->hist[op]));
    }
    json_object_set_new(lat, "all", latency_json(t->hist[OP_KINDS]));
    json_object_set_new(doc, "latency_uncorrected_us", latency_json(t->uncorrected));
    char name[16];
    for (size_t i = 0; i < t->status_kinds; i++)
        json_object_set_new(errors, bench_status_name(t->statuses[i].status, name),
                            json_integer((json_int_t)t->statuses[i].count));
    if (t->statuses_other > 0)
        json_object_set_new(errors, "OTHER", json_integer((json_int_t)t->statuses_other));
    json_object_set_new(doc, "operations", json_integer((json_int_t)t->ops_all));
    json_object_set_new(doc, "operations_by_kind", ops);
    json_object_set_new(doc, "keys", json_integer((json_int_t)t->keys_done));
    json_object_set_new(doc, "errors", json_integer((json_int_t)t->errors));
    json_object_set_new(doc, "errors_by_status", errors);
    json_object_set_new(doc, "elapsed_s", json_real(t->elapsed_s));
    if (opt->values) { /* bytes of the operations that succeeded */
        double moved = (double)(t->ops_all - t->errors) * (double)opt->object_bytes;
        json_object_set_new(doc, "value_bytes", json_integer((json_int_t)opt->object_bytes));
        json_object_set_new(doc, "throughput_bytes_s",
                            json_real(t->elapsed_s > 0 ? moved / t->elapsed_s : 0.0));
    }
    json_object_set_new(doc, "throughput_ops_s",
                        json_real(t->elapsed_s > 0 ? (double)t->ops_all / t->elapsed_s : 0.0));
    json_object_set_new(doc, "sent_rate_ops_s", json_real(t->sent_rate));
    json_object_set_new(doc, "latency_us", lat);
    json_object_set_new(doc, "percentile_curve_us", curve_json(t->hist[OP_KINDS]));
    json_object_set_new(doc, "timeline", timeline_json(t));
    return doc;
}

int bench_write_json(const char *path, const struct bench_options *opt,
                     const struct bench_totals *t) {
    json_t *doc = bench_json_document(opt, t);
    if (doc == NULL) return fprintf(stderr, "crescent-bench: out of memory for the JSON\n"), -1;
    int rc = strcmp(path, "-") == 0 ? json_dumpf(doc, stdout, JSON_INDENT(2))
                                    : json_dump_file(doc, path, JSON_INDENT(2));
    if (strcmp(path, "-") == 0) fputc('\n', stdout);
    json_decref(doc);
    if (rc != 0) fprintf(stderr, "crescent-bench: cannot write the JSON to %s\n", path);
    return rc == 0 ? 0 : -1;
}
