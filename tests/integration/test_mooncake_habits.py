"""Mooncake operators' habits: gflags spellings (underscores, -flag=value,
--port, --rpc_address HOST, --metrics_port, --rpc_thread_num), durations with
units, and Mooncake master's HTTP endpoints on --metrics-port in its shapes.
--port/--rpc_port and --rpc_address address the Mooncake master endpoint
(coro_rpc, docs/mooncake.md), as they address mooncake_master's.  Every Mooncake
flag: test_mooncake_flags.py."""
import json
import socket
import struct
import subprocess

import pytest

from conftest import binary, free_port, http_get

CLIENT = "6f1c2d3e-4b5a-4c7d-8e9f-0a1b2c3d4e5f"


def ctl(rpc, *args, check=True):
    r = subprocess.run([binary("crescentctl"), "--rpc", rpc, "--timeout-ms", "10000", *args],
                       capture_output=True, text=True, timeout=60,
                       env={"CRESCENT_CLIENT_ID": CLIENT})
    if check:
        assert r.returncode == 0, r.stderr
    return r


def service_ready(port):
    """Mooncake's ServiceReady over coro_rpc: its version string."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        # magic 21, version 0, struct_pack, msg 0, seq 7, function id, body 0, attachment 0
        s.sendall(struct.pack("<BBBBIIII", 21, 0, 0, 0, 7, 0x7B81BB56, 0, 0))
        head = b""
        while len(head) < 16:
            head += s.recv(16 - len(head))
        magic, _, errc, _, seq, length, _ = struct.unpack("<BBBBIII", head)
        assert (magic, errc, seq) == (21, 0, 7)
        body = b""
        while len(body) < length:
            body += s.recv(length - len(body))
    # hash (4), metainfo, literal 87 80 0c 01 and NUL, has_value 1, length, bytes
    assert body[10] == 1
    return body[12:12 + body[11]]


def test_gflags_spellings_and_durations(daemon, tmp_path):
    rpc_port, metrics_port = free_port(), free_port()
    conf = tmp_path / "crescent.json"
    conf.write_text(json.dumps({"default_kv_lease_ttl": "2s"}))
    d = daemon("--config", str(conf), "--rpc_address", "127.0.0.1", "--port", str(rpc_port),
               "--metrics_port", str(metrics_port), "-client_ttl=1m", "--rpc_thread_num", "8")
    rpc = d.args[d.args.index("--rpc-address") + 1]  # crescent's ZMQ RPC, from the fixture
    assert service_ready(rpc_port) == b"2.0.0"  # Mooncake's endpoint on --port
    ping = json.loads(ctl(rpc, "ping", "--json").stdout)
    assert ping["client_ttl_ms"] == 60000
    ctl(rpc, "mount", "seg0", "64M", "--endpoint", "10.0.0.5:1")
    ctl(rpc, "put-start", "k1", "4K")
    ctl(rpc, "put-end", "k1")
    ctl(rpc, "replicas", "k1")  # a lease of --default_kv_lease_ttl 2s
    _, body = http_get(d.port, "/api/v1/objects/k1")
    assert 1.0 < json.loads(body)["lease_expires_in_s"] <= 2.0
    status, _ = http_get(metrics_port, "/get_all_segments")
    assert status == 200


@pytest.mark.parametrize("flag,value", [("--default_kv_lease_ttl", "5x"),
                                        ("--client-ttl", "1500ms"),
                                        ("--event_flush_us", "1.5"),
                                        ("--port", "70000")])
def test_bad_values_exit_2_naming_the_flag(flag, value):
    r = subprocess.run([binary("crescentd"), flag, value], capture_output=True, text=True,
                       timeout=10)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    name = flag.lstrip("-").replace("_", "-")
    assert name in r.stderr or "port" in r.stderr


def test_help_lists_mooncake_spellings():
    out = subprocess.run([binary("crescentd"), "--help"], capture_output=True, text=True).stdout
    for text in ("--default_kv_lease_ttl", "--metrics-port", "--help-mooncake", "--flagfile",
                 "500ms, 5s, 10m"):
        assert text in out, text


def test_mooncake_endpoints(daemon):
    d = daemon()
    rpc = d.args[d.args.index("--rpc-address") + 1]
    port = int(d.args[d.args.index("--metrics-port") + 1])
    ctl(rpc, "mount", "seg0", "64M", "--endpoint", "10.0.0.5:1")
    for key in ("k1", "k2"):
        ctl(rpc, "put-start", key, "4K")
        ctl(rpc, "put-end", key)
    status, body = http_get(port, "/get_all_keys")
    assert status == 200 and sorted(body.decode().split()) == ["k1", "k2"]
    assert http_get(port, "/get_all_segments") == (200, b"seg0\n")
    # /query_key and the other admin endpoints: test_mooncake_admin.py
    assert http_get(port, "/query_segment?segment=seg0") == (
        200, b"seg0\nUsed(bytes): 8192\nCapacity(bytes) : 67108864\n")
    assert http_get(port, "/query_segment?segment=nope")[0] == 500
    status, body = http_get(port, "/metrics/summary")
    assert status == 200
    summary = body.decode()
    assert summary.startswith("role=leader, state=serving, service_ready=true, master={Mem "
                              "Storage: 8.00 KB / 64.00 MB (0.0%) | NVMe-oF SSD: 0 B / 0 B | "
                              "SSD Storage: 0 B / 0 B | Keys: 2 (soft-pinned: 0) |"), summary
    assert "PutStart=0.00/0.00, PutEnd=0.00/0.00" in summary  # the first: no window yet
    status, body = http_get(port, "/metrics")
    assert status == 200 and b"# TYPE master_key_count gauge" in body  # Mooncake's names



def hold_port(port):
    """A listening socket on 127.0.0.1:port, or None when another process has it."""
    import socket
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        s.listen()
        return s
    except OSError:
        s.close()
        return None


def test_default_metrics_port_taken_is_skipped_like_the_other_defaults(daemon):
    held = hold_port(9003)  # or another process holds it: taken either way
    try:
        d = daemon("--metrics-port", "9003", "--log-level", "INFO")
        assert http_get(d.port, "/health")[0] == 200
        code, err = d.stop()
    finally:
        if held is not None:
            held.close()
    assert code == 0
    assert "--metrics-port 9003 (the default) skipped" in err, err
    ready = [l for l in err.splitlines() if " ready: " in l]
    assert ready and "rpc=tcp://127.0.0.1:" in ready[0] and "metrics=off" in ready[0], err


def test_chosen_metrics_port_taken_exits_2():
    import socket
    port = free_port()
    held = hold_port(port)
    assert held is not None
    try:
        r = subprocess.run([binary("crescentd"), "--no-pin", "--metrics-port", str(port),
                            "--http-address", f"127.0.0.1:{free_port()}",
                            "--rpc-address", f"tcp://127.0.0.1:{free_port()}",
                            "--rpc-tcp-address", "", "--rpc-shm-path", "off",
                            "--event-address", f"tcp://127.0.0.1:{free_port()}",
                            "--replay-address", f"tcp://127.0.0.1:{free_port()}",
                            "--local-segment-size", "0"],
                           capture_output=True, text=True, timeout=30)
    finally:
        held.close()
    assert r.returncode == 2 and "--metrics-port" in r.stderr, r.stderr


def test_ready_line_names_rpc_and_metrics(daemon):
    d = daemon("--log-level", "INFO")
    port = d.args[d.args.index("--metrics-port") + 1]
    rpc = d.args[d.args.index("--rpc-address") + 1]
    _, err = d.stop()
    ready = [l for l in err.splitlines() if " ready: " in l][0]
    assert f"rpc={rpc}" in ready and f"metrics=127.0.0.1:{port}" in ready, ready


def test_ttl_log_names_only_clients_that_held_segments(daemon):
    """A client that only wrote into crescentd's own segment is forgotten
    quietly after its TTL; a client whose segments are unmounted is news."""
    from conftest import wait_for
    d = daemon("--client-ttl", "1", "--log-level", "INFO", "--local-segment-size", "64M")
    rpc = d.args[d.args.index("--rpc-address") + 1]

    def expired():
        return json.loads(http_get(d.port, "/api/v1/stats")[1])["clients_expired"]

    ctl(rpc, "put-start", "k1", "4K")  # a client without segments of its own
    wait_for(lambda: expired() >= 1, "the writing client's expiry", timeout=60)
    ctl(rpc, "mount", "seg0", "64M", "--endpoint", "10.0.0.5:1")
    wait_for(lambda: expired() >= 2, "the mounting client's expiry", timeout=60)
    _, err = d.stop()
    lines = [l for l in err.splitlines() if "missed their TTL" in l]
    assert len(lines) == 1 and "1 client(s) missed their TTL: 1 segment(s) unmounted" in lines[0], err


def test_get_all_keys_over_several_slices(daemon):
    """/get_all_keys is asked in slices of at most 1000 keys (issue 28): 2500
    keys come back each exactly once, across the slices' cursors."""
    from master_client import MasterClient
    d = daemon()
    rpc = d.args[d.args.index("--rpc-address") + 1]
    port = int(d.args[d.args.index("--metrics-port") + 1])
    keys = [f"key-{i:05d}" for i in range(2500)]
    with MasterClient(rpc) as c:
        c.mount_segment("seg0", 64 << 20)
        for i in range(0, len(keys), 500):
            c.batch_put_start([(k, 64) for k in keys[i:i + 500]])
            c.batch_put_end(keys[i:i + 500])
    status, body = http_get(port, "/get_all_keys")
    assert status == 200
    got = body.decode().split("\n")
    assert got[-1] == ""  # every key ends its line
    assert sorted(got[:-1]) == keys
