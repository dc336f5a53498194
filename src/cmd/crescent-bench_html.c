/* crescent-bench --report out.html: one self-contained page (no network, no
 * other files) with the summary, the latency-by-percentile plot and latency
 * and throughput over time.  The charts use uPlot, the library crescentd's
 * dashboard embeds: the copy compiled into crescent at build time
 * (cr_dashboard_assets, from node_modules/uplot) is inlined into the page at
 * run time.  A build without uPlot writes the page with tables only. */
#include <assert.h>
#include <jansson.h>
#include <string.h>

#include "cmd/crescent-bench.h"
#include "http/dashboard.h"

static const struct cr_dashboard_asset *asset(const char *url) {
    for (const struct cr_dashboard_asset *a = cr_dashboard_assets; a->url != NULL; a++)
        if (strcmp(a->url, url) == 0 && a->size > 0) return a;
    return NULL;
}

/* Writes `text` for a <script> or <style> element: "</" could end it early. */
static void write_raw(FILE *out, const char *text, size_t len) {
    for (size_t i = 0; i < len; i++) {
        if (text[i] == '<' && i + 1 < len && text[i + 1] == '/') {
            fputs("<\\/", out);
            i++;
            continue;
        }
        fputc(text[i], out);
    }
}

/* The page's script: tables from the data, then the two charts when uPlot is there. */
static const char page_script[] =
    "const D = JSON.parse(document.getElementById('data').textContent);\n"
    "const fmt = v => v >= 1000 ? (v / 1000).toFixed(2) + ' ms' : v.toFixed(1) + ' us';\n"
    "const o = D.options;\n"
    "document.getElementById('title').textContent = 'crescent-bench: ' + o.workload + ' (' +\n"
    "  o.loop + ' loop' + (o.loop == 'open' ? ' at ' + o.rate + ' ops/s' : '') + ')';\n"
    "document.getElementById('setup').textContent = o.connections + ' connections x depth ' +\n"
    "  o.depth + ', batch ' + o.batch + ', ' + D.operations + ' operations in ' +\n"
    "  D.elapsed_s.toFixed(2) + ' s: ' + D.throughput_ops_s.toFixed(0) + ' ops/s, ' + D.errors +\n"
    "  ' errors ' + JSON.stringify(D.errors_by_status) + '; tenant ' + o.tenant;\n"
    "const cols = ['count', 'min', 'mean', 'p50', 'p75', 'p90', 'p99', 'p99.9', 'p99.99', 'max'];\n"
    "let html = '<tr><th>op</th>' + cols.map(c => '<th>' + c + '</th>').join('') + '</tr>';\n"
    "for (const [op, l] of Object.entries(D.latency_us))\n"
    "  html += '<tr><td>' + op + '</td>' + cols.map(c => '<td>' + (c == 'count' ? l[c] :\n"
    "    fmt(l[c])) + '</td>').join('') + '</tr>';\n"
    "document.getElementById('table').innerHTML = html;\n"
    "if (typeof uPlot === 'undefined') {\n"
    "  document.getElementById('nocharts').hidden = false;\n"
    "} else {\n"
    "  const c = D.percentile_curve_us.filter(p => p[0] < 100);\n"
    "  const x = c.map(p => -Math.log10(1 - p[0] / 100)), y = c.map(p => p[1]);\n"
    "  new uPlot({title: 'Latency by percentile (us)', width: 900, height: 360,\n"
    "    scales: {x: {time: false}, y: {distr: 3}},\n"
    "    axes: [{values: (u, v) => v.map(t => (100 * (1 - Math.pow(10, -t))).toPrecision(5) + '%')},\n"
    "           {label: 'us'}],\n"
    "    series: [{label: 'percentile', value: (u, t) => t == null ? '' :\n"
    "              (100 * (1 - Math.pow(10, -t))).toPrecision(6) + '%'},\n"
    "             {label: 'latency', stroke: '#1f77b4', width: 2, value: (u, v) => v == null ?\n"
    "              '' : fmt(v)}]}, [x, y], document.getElementById('percentiles'));\n"
    "  const t = D.timeline;\n"
    "  new uPlot({title: 'Over time (seconds of the measured run)', width: 900, height: 360,\n"
    "    scales: {x: {time: false}},\n"
    "    axes: [{}, {label: 'ops/s', scale: 'ops'}, {label: 'us', side: 1, scale: 'us',\n"
    "            grid: {show: false}}],\n"
    "    series: [{label: 's'}, {label: 'ops/s', scale: 'ops', stroke: '#2ca02c', width: 2},\n"
    "             {label: 'mean latency', scale: 'us', stroke: '#1f77b4', value: (u, v) =>\n"
    "              v == null ? '' : fmt(v)},\n"
    "             {label: 'max latency', scale: 'us', stroke: '#d62728', value: (u, v) =>\n"
    "              v == null ? '' : fmt(v)}]},\n"
    "    [t.map(s => s.second), t.map(s => s.ops_per_s), t.map(s => s.latency_mean_us),\n"
    "     t.map(s => s.latency_max_us)], document.getElementById('timeline'));\n"
    "}\n";

int bench_write_report(const char *path, const struct bench_options *opt,
                       const struct bench_totals *t) {
    assert(path != NULL);
    json_t *doc = bench_json_document(opt, t);
    char *data = doc != NULL ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    FILE *out = data != NULL ? fopen(path, "w") : NULL;
    if (out == NULL) {
        fprintf(stderr, "crescent-bench: cannot write the report to %s\n", path);
        free(data);
        return -1;
    }
    const struct cr_dashboard_asset *js = asset("/dashboard/uPlot.iife.min.js");
    const struct cr_dashboard_asset *css = asset("/dashboard/uPlot.min.css");
    fputs("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>crescent-bench</title>\n"
          "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
          "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}</style>\n", out);
    if (css != NULL) {
        fputs("<style>", out);
        write_raw(out, (const char *)css->data, css->size);
        fputs("</style>\n", out);
    }
    if (js != NULL) {
        fputs("<script>", out);
        write_raw(out, (const char *)js->data, js->size);
        fputs("</script>\n", out);
    }
    fputs("</head><body>\n<h1 id=\"title\"></h1>\n<p id=\"setup\"></p>\n"
          "<h2>Latency</h2>\n<table id=\"table\"></table>\n"
          "<p id=\"nocharts\" hidden>This crescent-bench was built without uPlot (npm ci "
          "installs it): charts left out.</p>\n"
          "<div id=\"percentiles\"></div>\n<div id=\"timeline\"></div>\n"
          "<script type=\"application/json\" id=\"data\">", out);
    write_raw(out, data, strlen(data));
    fputs("</script>\n<script>", out);
    fputs(page_script, out);
    fputs("</script>\n</body></html>\n", out);
    free(data);
    int rc = ferror(out) ? -1 : 0;
    if (fclose(out) != 0) rc = -1;
    if (rc != 0) fprintf(stderr, "crescent-bench: writing the report to %s failed\n", path);
    return rc;
}
