"""crescent-bench's trace workloads against a real crescentd: trace-route routes a
small Mooncake-format trace through /route with simulated engines, trace-store replays
it on the store; bad trace lines are skipped and counted by cause."""
import json
import re
import subprocess
import urllib.request

import pytest

from conftest import binary, free_port

FAMILIES = 4
PER_FAMILY = 12
SHARED = 8


def write_trace(path, bad_lines=True):
    """Four prompt families (8 shared blocks each, then one block of their own),
    requests 25 ms apart, interleaved; plus one bad line of each kind."""
    lines = []
    next_unique = 1000
    for i in range(FAMILIES * PER_FAMILY):
        family = i % FAMILIES
        ids = [family * 100 + b for b in range(SHARED)] + [next_unique]
        next_unique += 1
        lines.append(json.dumps({"timestamp": 25 * i, "input_length": 512 * len(ids),
                                 "output_length": 1, "hash_ids": ids}))
    if bad_lines:
        lines.insert(3, "{not json")
        lines.insert(7, json.dumps({"timestamp": 80, "hash_ids": [1, 2, 1]}))
        lines.insert(9, json.dumps({"timestamp": 5, "hash_ids": [7]}))  # backwards
        lines.insert(11, json.dumps({"timestamp": 300, "hash_ids": []}))
    path.write_text("\n".join(lines) + "\n")
    return path


def expected_store_hits():
    """Blocks a cache that never evicts holds as each request's prefix."""
    seen, hit, total = set(), 0, 0
    next_unique = 1000
    for i in range(FAMILIES * PER_FAMILY):
        family = i % FAMILIES
        chain = [family * 100 + b for b in range(SHARED)] + [next_unique]
        next_unique += 1
        prefixes = [tuple(chain[:k + 1]) for k in range(len(chain))]
        k = 0
        while k < len(prefixes) and prefixes[k] in seen:
            k += 1
        hit += k
        total += len(chain)
        seen.update(prefixes)
    return hit, total


def run_bench(*args, timeout=120):
    p = subprocess.run([binary("crescent-bench"), *args], capture_output=True, text=True,
                       timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def test_trace_route_follows_the_index(daemon, tmp_path):
    d = daemon()
    trace = write_trace(tmp_path / "trace.jsonl")
    rc, out, err = run_bench("--workload", "trace-route", "--trace", str(trace),
                             "--http", f"127.0.0.1:{d.port}", "--instances", "4",
                             "--kv-blocks", "64", "--trace-speed", "1")
    assert rc == 0, out + err
    assert "48 requests" in out and "bad_json=1" in out and "hash_ids_out_of_order=1" in out
    assert "timestamp_backwards=1" in out and "empty_hash_ids=1" in out
    assert err.count("skipped (bad_json)") == 1  # logged once per cause
    m = re.search(r"hit rate: routed ([\d.]+)%, best in hindsight ([\d.]+)%, random ([\d.]+)%",
                  out)
    routed, oracle, rnd = map(float, m.groups())
    # Each family stays on the engine that holds it: every request after a
    # family's first hits its 8 shared blocks (8 of 9).  Routing that ignored the
    # index would spread a family over the 4 engines, as random does.
    first_requests = FAMILIES * (SHARED + 1)
    best = 100.0 * SHARED * (FAMILIES * PER_FAMILY - FAMILIES) / (
        (SHARED + 1) * FAMILIES * PER_FAMILY)
    assert routed == pytest.approx(best, abs=0.01), out
    assert oracle >= routed and routed > rnd, out
    assert first_requests > 0
    m = re.search(r"events: (\d+) blocks stored or removed", out)
    assert int(m.group(1)) >= FAMILIES * PER_FAMILY  # each request stores its own block
    assert re.search(r"/route\s+48 calls", out), out
    # Its publishers were unregistered at the end.
    services = json.loads(urllib.request.urlopen(
        f"http://127.0.0.1:{d.port}/services", timeout=5).read())["services"]
    assert services == []


def test_trace_store_hit_rate_and_clean_up(daemon, tmp_path):
    rpc = f"tcp://127.0.0.1:{free_port()}"
    d = daemon("--rpc-address", rpc, "--client-ttl", "3600")
    trace = write_trace(tmp_path / "trace.jsonl", bad_lines=False)
    rc, out, err = run_bench("--workload", "trace-store", "--trace", str(trace), "--rpc", rpc,
                             "--mount-fake", "--tenant", "tracestore")
    assert rc == 0, out + err
    hit, total = expected_store_hits()
    m = re.search(r"hit rate ([\d.]+)% \((\d+) of (\d+) blocks\), (\d+) evictions seen", out)
    assert m, out
    assert (int(m.group(2)), int(m.group(3)), int(m.group(4))) == (hit, total, 0)
    for call in ("BatchExistKey", "BatchGet", "BatchPut"):
        assert call in out
    # Every key it put is removed at the end.
    p = subprocess.run([binary("crescentctl"), "--rpc", rpc, "--http", f"127.0.0.1:{d.port}",
                        "store-stats"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    stats = {line.split()[0]: line.split()[1] for line in p.stdout.splitlines() if line.strip()}
    assert stats.get("objects") == "0", p.stdout


def test_trace_usage_errors(tmp_path):
    rc, _, err = run_bench("--workload", "trace-route")
    assert rc == 2 and "--trace" in err
    rc, _, err = run_bench("--trace", str(tmp_path / "x.jsonl"))
    assert rc == 2
    empty = tmp_path / "bad.jsonl"
    empty.write_text("nope\n")
    rc, _, err = run_bench("--workload", "trace-store", "--trace", str(empty))
    assert rc == 2 and "no usable request" in err
    rc, _, err = run_bench("--workload", "trace-store", "--trace", str(tmp_path / "missing"))
    assert rc == 2 and "cannot open trace" in err
