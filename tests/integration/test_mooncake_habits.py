"""Mooncake operators' habits: gflags spellings (underscores, -flag=value,
--port, --rpc_address HOST, --metrics_port, --rpc_thread_num), durations with
units, and Mooncake master's HTTP endpoints on --metrics-port in its shapes.
--port/--rpc_port and --rpc_address address the Mooncake master endpoint
(coro_rpc, docs/mooncake.md), as they address mooncake_master's."""
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
    for text in ("--default_kv_lease_ttl", "--metrics-port", "--port", "--rpc_thread_num",
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
    status, body = http_get(port, "/query_key?key=k1")
    assert status == 200
    assert json.loads(body.decode().splitlines()[0]) == {
        "size": 4096, "buffer_address": 0, "protocol": "tcp", "transport_endpoint": "10.0.0.5:1"}
    assert http_get(port, "/query_key?key=nope") == (404, b"OBJECT_NOT_FOUND")
    assert http_get(port, "/query_segment?segment=seg0") == (
        200, b"seg0\nUsed(bytes): 8192\nCapacity(bytes) : 67108864\n")
    assert http_get(port, "/query_segment?segment=nope")[0] == 500
    status, body = http_get(port, "/metrics/summary")
    assert status == 200
    summary = body.decode()
    assert summary.startswith("Storage: 8.00 KB / 64.00 MB (0.0%) | Keys: 2 |"), summary
    assert "PutStart=2, PutEnd=2" in summary
    status, body = http_get(port, "/metrics")
    assert status == 200 and b"# TYPE crescent_segments_objects gauge" in body

