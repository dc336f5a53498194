"""GET /metrics is Prometheus text that a strict reader accepts: HELP and TYPE
before every family's samples, counters named _total, histograms with
cumulative buckets ending in +Inf = _count; the RPC and HTTP latency
histograms count the requests made."""
import json
import re
import subprocess
import urllib.request

from conftest import binary, http_get

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"\\]*)"')


def parse(text):
    """{family: {"help", "type", "samples": [(name, labels dict, value)]}};
    asserts the format's rules on the way."""
    families, current = {}, None
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name, _, help_text = line[7:].partition(" ")
            assert name not in families, f"family {name} declared twice"
            assert help_text.strip(), f"{name}: empty HELP"
            families[name] = {"help": help_text, "type": None, "samples": []}
            current = name
        elif line.startswith("# TYPE "):
            name, _, kind = line[7:].partition(" ")
            assert name == current, f"TYPE {name} not right after its HELP"
            assert kind in ("counter", "gauge", "histogram"), f"{name}: type {kind}"
            families[name]["type"] = kind
        else:
            m = SAMPLE.match(line)
            assert m, f"not a sample line: {line!r}"
            name, labels, value = m.group(1), dict(LABEL.findall(m.group(2) or "")), m.group(3)
            base = re.sub(r"_(bucket|sum|count)$", "", name) \
                if families.get(current, {}).get("type") == "histogram" else name
            assert base == current, f"sample {name} outside its family ({current})"
            families[current]["samples"].append((name, labels, float(value)))
    for name, f in families.items():
        assert f["type"] is not None, f"{name} has no TYPE"
        if f["type"] == "counter":
            assert name.endswith("_total"), f"counter {name} not named _total"
    return families


def histograms(family):
    """{labels without le (as a tuple): (cumulative [(le, n)], sum, count)}"""
    out = {}
    for name, labels, value in family["samples"]:
        key = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
        entry = out.setdefault(key, {"buckets": [], "sum": None, "count": None})
        if name.endswith("_bucket"):
            entry["buckets"].append((labels["le"], value))
        elif name.endswith("_sum"):
            entry["sum"] = value
        else:
            entry["count"] = value
    for key, e in out.items():
        counts = [n for _, n in e["buckets"]]
        assert counts == sorted(counts), f"{key}: buckets not cumulative"
        assert e["buckets"][-1][0] == "+Inf" and counts[-1] == e["count"], key
        bounds = [float(le) for le, _ in e["buckets"][:-1]]
        assert bounds == sorted(bounds), key
    return out


def metrics(d):
    status, body = http_get(d.port, "/metrics")
    assert status == 200
    return parse(body.decode())


def post(d, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{d.port}{path}", data=json.dumps(body).encode(),
                                 method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.status


def test_every_family_typed_and_helped(daemon):
    d = daemon()
    families = metrics(d)
    assert families["crescent_actor_messages_handled_total"]["type"] == "counter"
    assert families["crescent_actor_ring_depth"]["type"] == "gauge"
    assert families["crescent_segments_used_bytes"]["type"] == "gauge"
    assert families["crescent_segments_evictions_total"]["type"] == "counter"
    assert families["crescent_rpc_request_duration_seconds"]["type"] == "histogram"
    assert families["crescent_http_request_duration_seconds"]["type"] == "histogram"


def test_latency_histograms_count_requests(daemon):
    d = daemon()
    rpc = d.args[d.args.index("--rpc-address") + 1]
    ctl = binary("crescentctl")
    for _ in range(3):
        subprocess.run([ctl, "--rpc", rpc, "ping"], check=True, capture_output=True)
    query = {"model": "m", "block_size": 16, "token_ids": list(range(32))}
    for _ in range(2):
        assert post(d, "/query", query) == 200
    assert post(d, "/route", query) == 200
    families = metrics(d)
    rpc_h = histograms(families["crescent_rpc_request_duration_seconds"])
    # crescentctl ping sends GetVersion then Ping.
    assert rpc_h[(("method", "ping"),)]["count"] == 3
    assert rpc_h[(("method", "get_version"),)]["count"] == 3
    assert rpc_h[(("method", "put_start"),)]["count"] == 0
    http_h = histograms(families["crescent_http_request_duration_seconds"])
    assert http_h[(("method", "POST"), ("route", "/query"))]["count"] == 2
    assert http_h[(("method", "POST"), ("route", "/route"))]["count"] == 1
    assert http_h[(("method", "POST"), ("route", "/query"))]["sum"] > 0


def test_ctl_stats_shows_store_events_and_indexer(daemon):
    d = daemon()
    out = subprocess.run([binary("crescentctl"), "--http", f"127.0.0.1:{d.port}", "stats"],
                         check=True, capture_output=True, text=True).stdout
    for title in ("store (GET /api/v1/stats)", "event plane (GET /api/v1/events)",
                  "prefix indexer (GET /api/v1/actors, indexer)"):
        assert title in out
    shown = dict(re.findall(r"^  (\S+) +(\S+)$", out, re.M))
    _, body = http_get(d.port, "/api/v1/stats")
    assert int(shown["capacity_bytes"]) == json.loads(body)["capacity_bytes"]
    assert shown["replay.batches_kept"] == "0" and shown["last_seq"] == "-"
    assert "index_bytes" in shown
