"""Rough edges a new user hit (issue: operators switching from Mooncake), one
test each: crescentctl's --json answers (ping's numbers, get into a FILE), a
command listing segments, keygen saying what it wrote."""
import json
import re
import subprocess

from conftest import binary

CLIENT = "0a1b2c3d-4e5f-4a7b-8c9d-0e1f2a3b4c5d"


def ctl(d, *args, check=True):
    rpc = d.args[d.args.index("--rpc-address") + 1]
    r = subprocess.run([binary("crescentctl"), "--rpc", rpc, "--http", f"127.0.0.1:{d.port}",
                        "--timeout-ms", "10000", *args], capture_output=True, text=True,
                       timeout=60, env={"CRESCENT_CLIENT_ID": CLIENT})
    if check:
        assert r.returncode == 0, r.stderr
    return r


def test_ping_json_numbers_print_as_written(daemon):
    d = daemon()
    for _ in range(5):  # a round trip like 930.979 us once printed as 930.97900000000004
        out = ctl(d, "ping", "--json").stdout
        m = re.search(r'"round_trip_us":([0-9.e+-]+)', out)
        assert m and len(m.group(1).replace(".", "")) <= 15, out
        assert json.loads(out)["round_trip_us"] > 0


def test_segments_lists_the_mounted_segments(daemon):
    d = daemon()
    assert ctl(d, "segments").stdout.strip().endswith("0 segments")
    ctl(d, "mount", "seg0", "64M", "--endpoint", "10.0.0.5:1")
    out = ctl(d, "segments").stdout
    assert re.search(r"^seg0\s+67108864\s+0\s+0\.0%\s+tcp\s+10\.0\.0\.5:1$", out, re.M), out
    assert out.strip().endswith("1 segment")
    doc = json.loads(ctl(d, "segments", "--json").stdout)
    assert [s["name"] for s in doc["segments"]] == ["seg0"]


def test_get_into_a_file_with_json_says_what_it_wrote(daemon, tmp_path):
    d = daemon("--local-segment-size", "64M")
    src = tmp_path / "in.bin"
    src.write_bytes(b"x" * 5000)
    ctl(d, "put", "k1", str(src))
    out = tmp_path / "out.bin"
    r = ctl(d, "get", "k1", str(out), "--json")
    assert json.loads(r.stdout) == {"key": "k1", "file": str(out), "size_bytes": 5000}
    assert out.read_bytes() == b"x" * 5000


def test_keygen_names_the_files_it_wrote(tmp_path):
    prefix = tmp_path / "server"
    r = subprocess.run([binary("crescentctl"), "keygen", str(prefix)], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    public = r.stdout.strip()
    assert len(public) == 40 and (tmp_path / "server.pub").read_text().strip() == public
    assert f"{prefix}.key" in r.stderr and f"{prefix}.pub" in r.stderr
    r = subprocess.run([binary("crescentctl"), "keygen", str(tmp_path / "c"), "--json"],
                       capture_output=True, text=True, timeout=30)
    doc = json.loads(r.stdout)
    assert doc["secret_key_file"] == f"{tmp_path}/c.key"
    assert doc["public_key_file"] == f"{tmp_path}/c.pub"
    assert (tmp_path / "c.pub").read_text().strip() == doc["public_key"]


def keygen(tmp_path, name):
    prefix = tmp_path / name
    subprocess.run([binary("crescentctl"), "keygen", str(prefix)], check=True,
                   capture_output=True)
    return (prefix.with_suffix(".pub").read_text().strip(),
            prefix.with_suffix(".key").read_text().strip(), prefix)


def test_zmq_endpoint_down_fails_at_once(tmp_path):
    import socket
    import time
    from conftest import free_port
    port = free_port()  # nothing listens there
    t0 = time.monotonic()
    r = subprocess.run([binary("crescentctl"), "--rpc", f"tcp://127.0.0.1:{port}",
                        "--timeout-ms", "20000", "ping"], capture_output=True, text=True,
                       timeout=60, env={"CRESCENT_CLIENT_ID": CLIENT})
    took = time.monotonic() - t0
    assert r.returncode == 3 and "nothing accepts connections" in r.stderr, r.stderr
    assert took < 15, took  # the timeout was 20 s; refused is known at once


def test_curve_daemon_and_a_client_without_keys_says_why(daemon, tmp_path):
    server_pub, _, server = keygen(tmp_path, "server")
    alice_pub, _, _ = keygen(tmp_path, "alice")
    clients = tmp_path / "clients"
    clients.mkdir()
    (clients / "alice.pub").write_text(alice_pub + "\n")
    d = daemon("--curve-secret-key-file", str(server) + ".key", "--curve-clients", str(clients))
    rpc = d.args[d.args.index("--rpc-address") + 1]
    r = subprocess.run([binary("crescentctl"), "--rpc", rpc, "--timeout-ms", "20000", "ping"],
                       capture_output=True, text=True, timeout=60,
                       env={"CRESCENT_CLIENT_ID": CLIENT})
    assert r.returncode == 3, r.stderr
    assert "CurveZMQ" in r.stderr and "is it running" not in r.stderr, r.stderr
