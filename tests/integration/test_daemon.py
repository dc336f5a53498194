"""crescentd as a user meets it: start, /health, /metrics, SIGTERM, errors."""
import json
import re
import signal
import subprocess
import time

from conftest import actors_by_name, binary, free_port, http_get

SUBSYSTEMS = ["segments", "journal", "leases", "tasks", "indexer", "publisher", "replay", "data"]
# Served on another actor's thread, listed (and their metric families kept) as
# stats views: the RPC endpoints, ZMQ and native, run on segments (rpc/edge.h).
VIEWS = {"rpc": "segments", "rpc_tcp": "segments"}


def test_health_answers_with_every_actor(daemon):
    d = daemon("--local-segment-size", "1G")  # the default, named (conftest turns it off)
    status, body = http_get(d.port, "/health")
    assert status == 200
    health = json.loads(body)
    assert health["status"] == "ok"
    assert health["actors"] == len(SUBSYSTEMS)
    assert health["unresponsive"] == []
    assert re.fullmatch(r"\d+\.\d+\.\d+", health["version"])
    # The local segment is mounted in the store at start: crescentd alone is a store.
    deadline = time.monotonic() + 10
    while json.loads(http_get(d.port, "/api/v1/stats")[1])["capacity_bytes"] != 1 << 30:
        assert time.monotonic() < deadline, "the local segment was not mounted"
        time.sleep(0.05)


def parse_prometheus(text):
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, value = line.rsplit(" ", 1)
        samples[name] = float(value)
    return samples


def test_metrics_cover_every_actor(daemon):
    d = daemon()
    for _ in range(3):  # each scrape is itself a stats ask to every actor
        status, body = http_get(d.port, "/metrics")
        assert status == 200
    samples = parse_prometheus(body.decode())
    for actor in SUBSYSTEMS:
        assert samples[f'crescent_actor_up{{actor="{actor}"}}'] == 1
        assert samples[f'crescent_actor_messages_handled_total{{actor="{actor}"}}'] >= 3
        for family in ("ring_depth", "parks_total", "wakes_total", "ring_full_total"):
            assert f'crescent_actor_{family}{{actor="{actor}"}}' in samples
    assert "# TYPE crescent_actor_ring_full_total counter" in body.decode()
    # A view keeps its families (crescent_<view>_*) and has no runtime ones.
    for view in VIEWS:
        assert f"crescent_{view}_replies_total" in samples
        assert f'crescent_{view}_request_duration_seconds_count{{method="ping"}}' in samples
        assert f'crescent_actor_up{{actor="{view}"}}' not in samples
    actors = actors_by_name(d.port)
    for view, served_by in VIEWS.items():
        assert actors[view]["served_by"] == served_by and "replies_total" in actors[view]["counters"]
    assert "crescent_rpc_tcp_connections_open" in samples


def test_unknown_route_is_json_404(daemon):
    d = daemon()
    status, body = http_get(d.port, "/nope")
    assert status == 404
    assert json.loads(body)["error"] == "not found"


def test_sigterm_stops_cleanly(daemon):
    d = daemon()
    http_get(d.port, "/metrics")
    code, err = d.stop(signal.SIGTERM)
    assert code == 0, err
    assert "stopped cleanly" in err


def test_sigint_stops_cleanly(daemon):
    d = daemon()
    code, err = d.stop(signal.SIGINT)
    assert code == 0, err


def test_crescentctl_health_and_stats(daemon):
    d = daemon()
    ctl = binary("crescentctl")
    out = subprocess.run([ctl, "--http", f"127.0.0.1:{d.port}", "health"],
                         capture_output=True, text=True, timeout=10)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ok (HTTP 200)")
    out = subprocess.run([ctl, "--http", f"127.0.0.1:{d.port}", "stats"],
                         capture_output=True, text=True, timeout=10)
    assert out.returncode == 0, out.stderr
    for actor in SUBSYSTEMS:
        assert re.search(rf"^{actor}\s", out.stdout, re.M)
    for view, served_by in VIEWS.items():
        assert re.search(rf"^{view}\s+\(served by {served_by}\)", out.stdout, re.M)


def test_crescentctl_unreachable_exits_3():
    out = subprocess.run([binary("crescentctl"), "--http", f"127.0.0.1:{free_port()}", "health"],
                         capture_output=True, text=True, timeout=10)
    assert out.returncode == 3
    assert "cannot connect" in out.stderr


def run_crescentd(*args):
    return subprocess.run([binary("crescentd"), *args], capture_output=True, text=True, timeout=10)


def test_bad_rdma_gid_index_exits_2():
    out = run_crescentd("--data-rdma-gid-index", "256")
    assert out.returncode == 2
    assert "data-rdma-gid-index: '256' is not auto or 0..255" in out.stderr


def test_bad_flag_exits_2_with_one_line():
    out = run_crescentd("--no-such-flag")
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0
    assert "--no-such-flag" in out.stderr


def test_bad_value_exits_2():
    out = run_crescentd("--ring-slots", "1000")
    assert out.returncode == 2
    assert "power of two" in out.stderr


def test_port_in_use_exits_2(daemon):
    d = daemon()
    out = run_crescentd("--http-address", f"127.0.0.1:{d.port}")
    assert out.returncode == 2
    # Actors (the local segment's among them) may log before the HTTP front binds.
    said = [line for line in out.stderr.splitlines() if line.startswith("crescentd:")]
    assert said[-1].startswith("crescentd: cannot serve HTTP"), out.stderr
    assert "in use" in out.stderr


def test_data_address_in_use_exits_2(daemon):
    d = daemon()
    out = run_crescentd("--http-address", f"127.0.0.1:{free_port()}",
                        "--rpc-address", f"tcp://127.0.0.1:{free_port()}",
                        "--event-address", f"tcp://127.0.0.1:{free_port()}",
                        "--replay-address", f"tcp://127.0.0.1:{free_port()}",
                        "--data-address", f"127.0.0.1:{d.port}")  # d's HTTP port
    assert out.returncode == 2
    assert "cannot serve the local segment" in out.stderr and "--data-address" in out.stderr


def test_bad_config_file_exits_2(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"http_threads": "four"}')
    out = run_crescentd("--config", str(bad))
    assert out.returncode == 2
    assert "http_threads" in out.stderr and "integer" in out.stderr
    bad.write_text('{"unknown_key": 1}')
    out = run_crescentd("--config", str(bad))
    assert out.returncode == 2 and "unknown key" in out.stderr
    bad.write_text('{"http_threads": ')
    out = run_crescentd("--config", str(bad))
    assert out.returncode == 2 and "bad.json:" in out.stderr


def test_config_file_applies_and_flags_win(daemon, tmp_path):
    port = free_port()
    cfg = tmp_path / "crescent.json"
    cfg.write_text(json.dumps({"http_address": f"127.0.0.1:{port}", "http_threads": 2,
                               "log_level": "WARN"}))
    d = daemon("--config", str(cfg))  # the fixture's --http-address flag wins
    assert http_get(d.port, "/health")[0] == 200
    code, err = d.stop()
    assert code == 0
    assert "ready" not in err  # log_level WARN from the file took effect


def test_help_documents_every_flag():
    out = run_crescentd("--help")
    assert out.returncode == 0
    for flag in ("--config", "--http-address", "--http-threads", "--pin-threads",
                 "--ring-slots", "--ask-timeout-ms", "--log-level", "--no-pin", "--version",
                 "--data-no-shm", "--data-no-verbs", "--data-rdma-gid-index", "--data-rdma-devices"):
        assert flag in out.stdout


def test_clean_shutdown_under_valgrind(tmp_path):
    """Start, serve, SIGTERM: no invalid access, nothing lost (issue 2's
    'clean under valgrind').  The few bytes still reachable at exit are the
    ask slots kept for reuse (see src/runtime/ask.c)."""
    import shutil
    import time
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        import pytest
        pytest.skip("valgrind is not installed (scripts/setup.sh installs it)")
    port = free_port()
    log = tmp_path / "valgrind.log"
    proc = subprocess.Popen(
        [valgrind, "--leak-check=full", "--show-leak-kinds=definite,indirect",
         "--errors-for-leak-kinds=definite,indirect", "--error-exitcode=9",
         f"--log-file={log}", binary("crescentd"), "--http-address", f"127.0.0.1:{port}",
         "--no-pin"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stderr.read().decode()
            try:
                if http_get(port, "/health", timeout=2)[0] == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "crescentd under valgrind never became healthy"
            time.sleep(0.1)
        for _ in range(3):
            assert http_get(port, "/metrics", timeout=10)[0] == 200
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    report = log.read_text()
    assert proc.returncode == 0, report[-3000:]
    assert "ERROR SUMMARY: 0 errors" in report
    assert "definitely lost: 0 bytes" in report or "no leaks are possible" in report


def test_rpc_answers_from_the_first_moment():
    """Requests that reach the RPC port while crescentd is still starting
    (here: sent before it runs, so they arrive the moment it binds, while the
    1 GiB local segment is still being set up) wait for the store master and
    get real answers, never "busy or stopping" (issue 10)."""
    import zmq
    from master_client import MasterClient
    rpc = free_port()
    ctx = zmq.Context()
    ctx.setsockopt(zmq.RECONNECT_IVL, 1)  # retry every 1 ms: in at the first moment
    client = MasterClient(f"tcp://127.0.0.1:{rpc}", timeout=30, ctx=ctx)
    ids = []
    for i in range(40):
        ids.append((client.pb.GET_VERSION, client.send(client.pb.GET_VERSION,
                                                      client.pb.GetVersionRequest())))
        ids.append((client.pb.EXIST_KEY, client.send(
            client.pb.EXIST_KEY, client.pb.ExistKeyRequest(key=f"k{i}", tenant_id="default"))))
    proc = subprocess.Popen(
        [binary("crescentd"), "--no-pin", "--http-address", f"127.0.0.1:{free_port()}",
         "--metrics-port", "0", "--rpc-address", f"tcp://127.0.0.1:{rpc}",
         "--rpc-tcp-address", f"127.0.0.1:{free_port()}",
         "--event-address", f"tcp://127.0.0.1:{free_port()}",
         "--replay-address", f"tcp://127.0.0.1:{free_port()}",
         "--data-address", f"127.0.0.1:{free_port()}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        for method, rid in ids:
            status, body = client.wait(rid, timeout=30)
            assert status == 0, body.decode("utf-8", "replace")
            resp = client.decode(method, status, body)
            assert resp.status_code == 0, resp.error_message
            if method == client.pb.EXIST_KEY:
                assert not resp.exists
        for i in range(20):  # and straight after, one by one
            assert client.get_version().version
            assert not client.exist_key(f"after{i}").exists
    finally:
        client.close()
        ctx.term()
        proc.terminate()
        proc.communicate(timeout=20)
