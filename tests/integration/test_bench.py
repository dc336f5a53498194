"""crescent-bench against a real crescentd: short runs whose JSON is parsed and
checked (counts add up, percentiles ordered, no errors), the open loop holding
its rate, and that a run leaves nothing behind and touches nothing else."""
import json
import os
import subprocess
import urllib.request
import uuid

import pytest

from conftest import binary, free_port


@pytest.fixture
def store(daemon):
    rpc = f"tcp://127.0.0.1:{free_port()}"
    # A long client TTL: the segment a test mounts with crescentctl (which
    # exits at once) must outlive the bench runs.
    d = daemon("--rpc-address", rpc, "--client-ttl", "3600")
    return d, rpc


def ctl(store, *args, client_id=None):
    d, rpc = store
    cmd = [binary("crescentctl"), "--rpc", rpc, "--http", f"127.0.0.1:{d.port}", *args]
    if client_id is not None:
        cmd += ["--client-id", client_id]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def store_stats(store):
    rc, out, err = ctl(store, "store-stats")
    assert rc == 0, err
    return {line.split()[0]: line.split()[1] for line in out.splitlines() if line.strip()}


def bench(store, tmp_path, *args, timeout=120):
    """Runs crescent-bench with --json; returns (exit code, document, stdout+stderr)."""
    d, rpc = store
    http = ["--http", f"127.0.0.1:{d.port}"] if d is not None else []
    out = tmp_path / f"bench-{uuid.uuid4().hex[:8]}.json"
    p = subprocess.run([binary("crescent-bench"), "--rpc", rpc, *http, "--json", str(out), *args],
                       capture_output=True, text=True, timeout=timeout)
    doc = json.loads(out.read_text()) if out.exists() else None
    return p.returncode, doc, p.stdout + p.stderr


def check_document(doc):
    """The invariants every run's numbers keep."""
    kinds = doc["operations_by_kind"]
    assert doc["operations"] == sum(kinds.values()) > 0
    latency = doc["latency_us"]
    assert latency["all"]["count"] == doc["operations"]
    for kind, count in kinds.items():
        if count:
            assert latency[kind]["count"] == count
    for lat in latency.values():
        ordered = [lat[k] for k in ("min", "p50", "p75", "p90", "p99", "p99.9", "p99.99", "max")]
        assert ordered == sorted(ordered) and ordered[0] > 0
        assert lat["min"] <= lat["mean"] <= lat["max"]
    curve = doc["percentile_curve_us"]
    assert [p for p, _ in curve] == sorted(p for p, _ in curve)
    assert [v for _, v in curve] == sorted(v for _, v in curve)
    assert curve[-1] == [100.0, latency["all"]["max"]]
    assert sum(s["ops"] for s in doc["timeline"]) == doc["operations"]
    assert sum(doc["errors_by_status"].values()) == doc["errors"]
    assert doc["elapsed_s"] > 0
    assert doc["throughput_ops_s"] == pytest.approx(doc["operations"] / doc["elapsed_s"])


def test_mix_closed_loop_counts_add_up_and_cleans_up(store, tmp_path):
    rc, doc, text = bench(store, tmp_path, "--mount-fake", "--workload", "mix", "--mix",
                          "4:2:2:2", "--connections", "2", "--depth", "4", "--keys", "500",
                          "--distribution", "zipfian", "--duration", "1", "--warmup", "0.2")
    assert rc == 0, text
    check_document(doc)
    assert doc["errors"] == 0 and doc["errors_by_status"] == {}
    assert all(doc["operations_by_kind"][k] > 0 for k in ("get", "put", "exist", "remove"))
    assert doc["options"]["loop"] == "closed" and doc["options"]["distribution"] == "zipfian"
    assert doc["keys"] == doc["operations"]
    # Summary table on stdout, one row per kind and the total.
    for row in ("get ", "put ", "exist ", "remove ", "all "):
        assert any(line.startswith(row) for line in text.splitlines()), text
    stats = store_stats(store)
    assert stats["objects"] == "0" and stats["segments"] == "0"


def test_count_mode_batches(store, tmp_path):
    rc, doc, text = bench(store, tmp_path, "--mount-fake", "--workload", "exist", "--batch",
                          "16", "--count", "300", "--warmup", "0", "--keys", "1000")
    assert rc == 0, text
    check_document(doc)
    assert doc["operations"] == 300 and doc["keys"] == 300 * 16
    assert doc["errors"] == 0
    assert store_stats(store)["objects"] == "0"


def test_remove_workload_removes_what_it_put(store, tmp_path):
    rc, doc, text = bench(store, tmp_path, "--mount-fake", "--workload", "remove", "--count",
                          "1000", "--connections", "2", "--depth", "8")
    assert rc == 0, text
    check_document(doc)
    assert doc["operations_by_kind"] == {"get": 0, "put": 0, "exist": 0, "remove": 1000,
                                         "query": 0, "route": 0}
    assert doc["errors"] == 0


def test_live_deployment_left_as_it_was(store, tmp_path):
    """Without --mount-fake the run uses the deployment's segment, under its own
    tenant, and removes its keys; the user's key and segment stay."""
    owner = str(uuid.uuid4())
    assert ctl(store, "mount", "userseg", "1G", "--endpoint", "127.0.0.1:7000",
               client_id=owner)[0] == 0
    assert ctl(store, "put-start", "user-key", "4K", client_id=owner)[0] == 0
    assert ctl(store, "put-end", "user-key", client_id=owner)[0] == 0
    rc, doc, text = bench(store, tmp_path, "--workload", "mix", "--connections", "2",
                          "--depth", "2", "--keys", "200", "--duration", "0.5",
                          "--warmup", "0")
    assert rc == 0, text
    check_document(doc)
    assert doc["options"]["tenant"].startswith("bench-")
    stats = store_stats(store)
    assert stats["objects"] == "1" and stats["segments"] == "1"
    assert ctl(store, "exist", "user-key")[0] == 0


def test_errors_counted_by_status(store, tmp_path):
    """No segment and no --mount-fake: the preload is refused with a hint."""
    rc, doc, text = bench(store, tmp_path, "--workload", "get", "--duration", "0.2")
    assert rc == 3 and doc is None
    assert "above the 0 mounted segments" in text and "--mount-fake" in text
    # Puts larger than the segment fail one by one, by status (a put that
    # merely finds the segment full evicts for its room instead).
    rc, doc, text = bench(store, tmp_path, "--mount-fake", "--fake-segment-bytes", "65536",
                          "--workload", "put", "--object-bytes", "131072", "--count", "40",
                          "--warmup", "0")
    assert rc == 1, text
    check_document(doc)
    assert doc["operations"] == 40 and doc["errors"] == 40
    assert doc["errors_by_status"] == {"NO_AVAILABLE_HANDLE": 40}
    assert "errors: NO_AVAILABLE_HANDLE" in text


def test_open_loop_holds_its_rate(store, tmp_path):
    """A modest rate (the machine is shared and loaded): 400 ops/s over two
    connections for 6 s (a stall of the loaded machine at the end of the window
    weighs less in a longer one), with room for 256 in flight each."""
    rate, seconds = 400.0, 6
    rc, doc, text = bench(store, tmp_path, "--mount-fake", "--workload", "exist", "--rate",
                          str(rate), "--connections", "2", "--depth", "256", "--duration",
                          str(seconds), "--warmup", "0.5", "--keys", "1000")
    assert rc == 0, text
    check_document(doc)
    assert doc["options"]["loop"] == "open"
    assert doc["operations"] == int(rate * seconds)  # every send due in the window was made
    assert abs(doc["sent_rate_ops_s"] - rate) / rate < 0.05, doc["sent_rate_ops_s"]
    assert abs(doc["throughput_ops_s"] - rate) / rate < 0.05, doc["throughput_ops_s"]


def indexer_view(store):
    d, _ = store
    with urllib.request.urlopen(f"http://127.0.0.1:{d.port}/global_view", timeout=10) as r:
        return json.loads(r.read())


@pytest.mark.parametrize("workload", ["query", "route"])
def test_indexer_workloads_with_simulated_publishers(store, tmp_path, workload):
    """The bench checks before measuring that the indexer reports its prompt 0
    as cached whole (else it would be timing misses)."""
    rc, doc, text = bench(store, tmp_path, "--workload", workload, "--prompts", "50",
                          "--prompt-tokens", "256", "--shared-prefix", "0.25", "--instances",
                          "3", "--connections", "2", "--duration", "1", "--warmup", "0.2")
    assert rc == 0, text
    check_document(doc)
    assert doc["operations_by_kind"][workload] == doc["operations"] and doc["errors"] == 0
    assert doc["options"]["instances"] == 3 and doc["options"]["prompt_tokens"] == 256
    # Its instances are unregistered and their blocks gone.
    view = indexer_view(store)
    assert view["blocks"] == 0, view
    run_id = doc["options"]["run_id"]
    assert not [i for i in view["instance_list"] if i["instance_id"].startswith(run_id)], view
    if workload == "route":  # warm-up requests are routed too, not measured
        assert view["route"]["requests"] >= doc["operations"]


def test_usage_errors(store, tmp_path):
    for args in (["--workload", "nope"], ["--depth", "0"], ["--mix", "1:1:1:1"],
                 ["--workload", "remove"], ["--distribution", "pareto"], ["extra"],
                 ["--workload", "query", "--prompt-tokens", "8"],
                 ["--workload", "query", "--batch", "4"], ["--prompts", "70000"]):
        rc, doc, text = bench(store, tmp_path, *args)
        assert rc == 2 and "crescent-bench:" in text, (args, text)
    p = subprocess.run([binary("crescent-bench"), "--help"], capture_output=True, text=True)
    assert p.returncode == 0 and "--rate" in p.stdout and "--mount-fake" in p.stdout


def test_unreachable(tmp_path):
    store = (None, f"tcp://127.0.0.1:{free_port()}")
    rc, doc, text = bench(store, tmp_path, "--timeout-ms", "300", "--duration", "0.1")
    assert rc == 3 and "does not answer" in text


@pytest.mark.parametrize("workload", ["put-bytes", "get-bytes"])
def test_value_workloads_move_bytes_and_clean_up(daemon, tmp_path, workload):
    """Values through the data plane on crescentd's own local segment: counts
    add up, no errors, bytes/s from the successful operations, and the run
    leaves a user's value in place and none of its own."""
    rpc = f"tcp://127.0.0.1:{free_port()}"
    store = (daemon("--rpc-address", rpc, "--local-segment-size", "64M"), rpc)
    p = subprocess.run([binary("crescentctl"), "--rpc", rpc, "put", "user-key", "-"],
                       input=b"user value", capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    rc, doc, text = bench(store, tmp_path, "--workload", workload, "--object-bytes", "65536",
                          "--connections", "2", "--keys", "8", "--count", "200",
                          "--warmup", "0")
    assert rc == 0, text
    check_document(doc)
    kind = workload.split("-")[0]
    assert doc["operations"] == doc["operations_by_kind"][kind] == 200
    assert doc["errors"] == 0 and doc["value_bytes"] == 65536
    assert doc["throughput_bytes_s"] == pytest.approx(doc["throughput_ops_s"] * 65536)
    assert doc["throughput_bytes_s"] > 0
    assert "GB/s of 65536-byte values" in text
    stats = store_stats(store)
    assert stats["objects"] == "1"
    p = subprocess.run([binary("crescentctl"), "--rpc", rpc, "get", "user-key", "-"],
                       capture_output=True, timeout=60)
    assert p.stdout == b"user value"


def test_value_workloads_refuse_fake_segments(store, tmp_path):
    rc, _, text = bench(store, tmp_path, "--workload", "put-bytes", "--mount-fake")
    assert rc == 2 and "drop --batch, --depth and --mount-fake" in text


def test_duration_is_honoured_when_the_rate_cannot_be_met(store, tmp_path):
    """A rate far beyond what the machine does: the run stops sending a grace
    (1 s here) after its 2 s window instead of sending its backlog (a 3 s run
    once took 82 s), and says the rate was not held."""
    import time
    rate = 5e6
    t0 = time.monotonic()
    rc, doc, text = bench(store, tmp_path, "--mount-fake", "--workload", "exist", "--rate",
                          str(rate), "--connections", "2", "--depth", "64", "--duration", "2",
                          "--warmup", "0", "--keys", "1000")
    took = time.monotonic() - t0
    assert rc == 0, text
    assert took < 30, took  # the backlog of 10 M sends takes over a minute here
    assert doc["operations"] > 0
    assert doc["sent_rate_ops_s"] < rate / 2, doc["sent_rate_ops_s"]
    # wrk2's uncorrected view, from each send, hides the queueing behind the
    # schedule that the corrected one (from when each was due) shows
    corrected, uncorrected = doc["latency_us"]["all"], doc["latency_uncorrected_us"]
    assert uncorrected["count"] == corrected["count"] == doc["operations"]
    assert uncorrected["p50"] * 10 < corrected["p50"], (uncorrected, corrected)
    assert "uncorr." in text


def test_timeline_rates_the_trailing_partial_second_by_its_span(store, tmp_path):
    """A 2.5 s window: the third second covers about half a second, and its
    rate is its operations over that half, not a collapse to half the rate."""
    rc, doc, text = bench(store, tmp_path, "--mount-fake", "--workload", "exist",
                          "--duration", "2.5", "--warmup", "0.2", "--keys", "1000")
    assert rc == 0, text
    t = doc["timeline"]
    assert len(t) == 3, t
    assert all(s["span_s"] == 1.0 for s in t[:-1])
    assert 0.3 < t[-1]["span_s"] < 0.9, t[-1]
    for s in t:
        assert abs(s["ops_per_s"] - s["ops"] / s["span_s"]) < 1e-6 * max(1, s["ops_per_s"])


class SlowReplies:
    """A loopback proxy in front of crescentd's HTTP front that holds each
    answer back a little, and records per connection the most requests sent
    whose answers had not come back yet: what --depth puts in flight."""

    def __init__(self, target_port, delay_s=0.02):
        import socket
        import threading
        self.target, self.delay = target_port, delay_s
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.most = []  # one per connection
        self.lock = threading.Lock()
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        import socket
        import threading
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target))
            state = {"asked": 0, "answered": 0, "most": 0}
            with self.lock:
                self.most.append(state)
            threading.Thread(target=self.pump, args=(client, server, state, True), daemon=True).start()
            threading.Thread(target=self.pump, args=(server, client, state, False), daemon=True).start()

    def pump(self, src, dst, state, asking):
        import time
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            if not data:
                try:
                    dst.shutdown(1)
                except OSError:
                    pass
                return
            with self.lock:
                if asking:
                    state["asked"] += data.count(b"POST /")
                    state["most"] = max(state["most"], state["asked"] - state["answered"])
            if not asking:
                time.sleep(self.delay)
                with self.lock:
                    state["answered"] += data.count(b"HTTP/1.1 ")
            try:
                dst.sendall(data)
            except OSError:
                return

    def close(self):
        self.listener.close()


@pytest.mark.parametrize("workload", ["query", "route"])
def test_indexer_depth_is_run_not_just_reported(store, tmp_path, workload):
    """--depth N keeps N requests in flight on each connection (HTTP/1.1
    pipelining), and the JSON says so; --depth 1 keeps one."""
    d, rpc = store
    for depth in (1, 4):
        proxy = SlowReplies(d.port)
        try:
            rc, doc, text = bench((d, rpc), tmp_path, "--workload", workload, "--prompts", "20",
                                  "--prompt-tokens", "64", "--instances", "2", "--depth",
                                  str(depth), "--duration", "1", "--warmup", "0.2",
                                  "--http", f"127.0.0.1:{proxy.port}")
        finally:
            proxy.close()
        assert rc == 0, text
        check_document(doc)
        assert doc["errors"] == 0 and doc["options"]["depth"] == depth
        assert f"x depth {depth}," in text
        # the measured connection: the one that asked the most
        assert max(s["most"] for s in proxy.most) == depth, proxy.most
