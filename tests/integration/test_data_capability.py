"""Data-plane capabilities end to end (issue 28, "Also"): the master signs a
capability into every handle it hands out, with the key the segment's owner
registered at MountSegment; libcrescent sends it with every transfer; a store
server with --data-require-capability refuses transfers without one, and
checks every one sent (forged, expired, out of range, wrong mode), counting
each cause.

The raw transfers here speak the tcp frame of src/rdma/xfer_frame.h
directly, as a process that reached the data port would."""
import json
import os
import socket
import struct
import subprocess
import sys
import time

import pytest

from conftest import BIN_DIR, binary, free_port, http_get, wait_for

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
os.environ.setdefault("CRESCENT_LIB", os.path.join(BIN_DIR, "..", "lib", "libcrescent.so"))
from crescent import Store  # noqa: E402

READ, WRITE = 1, 2
FLAG_CAP = 1
ILLEGAL_CLIENT = -601
LEASE_MS = 300      # --default-kv-lease-ttl: a read capability's life
SKEW_MS = 2000      # CR_CAP_SKEW_MS_DEFAULT: how long past it the server still accepts


def raw(endpoint, op, segment, addr, length, cap=None, payload=b""):
    """One request on a fresh connection: (status, bytes read).  A refused
    request's connection is closed by the server; a WRITE's unread payload can
    turn that into a reset before the status is read: status None then."""
    host, port = endpoint.rsplit(":", 1)
    name = segment.encode()
    head = struct.pack("<BBHIQQ", op, len(name), FLAG_CAP if cap else 0, 7, addr, length)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        try:
            s.sendall(head + name + (cap or b"") + payload)
            resp = b""
            while len(resp) < 16:
                chunk = s.recv(16 - len(resp))
                if not chunk:
                    return None, b""
                resp += chunk
        except ConnectionResetError:
            return None, b""
        rid, status, n = struct.unpack("<IiQ", resp)
        assert rid == 7
        data = b""
        while len(data) < n:
            chunk = s.recv(n - len(data))
            assert chunk, "the server closed in the middle of a read's bytes"
            data += chunk
        return status, data


def metrics(d):
    status, body = http_get(d.port, "/metrics")
    assert status == 200, status
    out = {}
    for line in body.decode().splitlines():
        if line.startswith("crescent_data_transfer_capability"):
            name, value = line.split()[:2]
            out[name[len("crescent_data_transfer_capability_"):]] = float(value)
    return out


def handle_of(replicas):
    assert len(replicas) == 1 and len(replicas[0]["handles"]) == 1, replicas
    return replicas[0]["handles"][0]


def forged(cap):
    return cap[:-1] + bytes([cap[-1] ^ 1])


@pytest.fixture(params=["shm", "tcp"])
def master(request, daemon):
    """crescentd whose local segment requires capabilities, its clients on this
    host served by shm (the memfd is handed out only for a capability) or tcp."""
    rpc_port = free_port()
    extra = ["--data-no-shm", "true"] if request.param == "tcp" else []
    d = daemon("--rpc-address", f"tcp://127.0.0.1:{rpc_port}", "--local-segment-size", "64M",
               "--data-require-capability", "true", "--default-kv-lease-ttl", str(LEASE_MS),
               *extra)
    s = Store()
    assert s.setup(master_server_address=f"127.0.0.1:{rpc_port}", timeout_ms=10000) == 0
    yield d, s
    s.close()


def test_required_capability_end_to_end(master):
    d, s = master
    value = os.urandom(5000)
    # libcrescent's put and get carry the master's capabilities: they work.
    assert s.put("obj", value) == 0
    assert s.get("obj") == value
    h = handle_of(s.get_replica_list("obj"))
    cap = h["capability"]
    assert cap is not None and len(cap) == 48
    ep, seg, addr, size = h["transport_endpoint"], h["segment_name"], h["buffer"], h["size"]
    assert size == len(value)
    before = metrics(d)

    # The control: a raw read with the handle's own capability is served.
    assert raw(ep, READ, seg, addr, size, cap) == (0, value)
    # None, forged, another range, a write capability, a read capability for a write.
    assert raw(ep, READ, seg, addr, size)[0] == ILLEGAL_CLIENT
    assert raw(ep, READ, seg, addr, size, forged(cap))[0] == ILLEGAL_CLIENT
    assert raw(ep, READ, seg, addr + size, 1, cap)[0] == ILLEGAL_CLIENT
    assert raw(ep, READ, seg, addr, size + 1, cap)[0] == ILLEGAL_CLIENT
    assert raw(ep, WRITE, seg, addr, 4, cap, b"EVIL")[0] in (ILLEGAL_CLIENT, None)
    assert raw(ep, WRITE, seg, addr, 4, None, b"EVIL")[0] in (ILLEGAL_CLIENT, None)
    assert s.get("obj") == value, "a refused write changed the object"

    w = handle_of(s.put_start("fresh", 4096))
    wcap = w["capability"]
    assert wcap is not None and wcap != cap
    assert raw(ep, READ, w["segment_name"], w["buffer"], 4096, wcap)[0] == ILLEGAL_CLIENT
    payload = os.urandom(4096)
    assert raw(ep, WRITE, w["segment_name"], w["buffer"], 4096, wcap, payload)[0] == 0
    assert s.put_end("fresh") == 0
    assert s.get("fresh") == payload

    after = metrics(d)
    grew = {k: after[k] - before.get(k, 0) for k in after}
    assert grew["refused_missing_total"] == 2, grew
    assert grew["refused_bad_mac_total"] == 1, grew
    assert grew["refused_out_of_range_total"] == 2, grew
    assert grew["refused_wrong_mode_total"] == 2, grew
    assert grew["refused_total"] == 7, grew
    assert grew["checked_total"] >= 2, grew

    # A read capability lives as long as the lease, plus the skew allowed.
    time.sleep((LEASE_MS + SKEW_MS + 700) / 1000)
    assert raw(ep, READ, seg, addr, size, cap)[0] == ILLEGAL_CLIENT
    assert metrics(d)["refused_expired_total"] - before.get("refused_expired_total", 0) == 1
    # A fresh get is issued a fresh capability, and reads.
    assert s.get("obj") == value


def test_default_serves_without_a_capability_and_checks_one_sent(daemon):
    """Off by default (old clients, Mooncake's descriptors): a transfer without
    a capability is served, but one sent must still verify."""
    rpc_port = free_port()
    d = daemon("--rpc-address", f"tcp://127.0.0.1:{rpc_port}", "--local-segment-size", "64M")
    s = Store()
    assert s.setup(master_server_address=f"127.0.0.1:{rpc_port}", timeout_ms=10000) == 0
    try:
        value = os.urandom(3000)
        assert s.put("obj", value) == 0
        h = handle_of(s.get_replica_list("obj"))
        ep, seg, addr, size = h["transport_endpoint"], h["segment_name"], h["buffer"], h["size"]
        assert h["capability"] is not None  # the segment has a key: handles are signed
        assert raw(ep, READ, seg, addr, size) == (0, value)
        assert raw(ep, READ, seg, addr, size, h["capability"]) == (0, value)
        assert raw(ep, READ, seg, addr, size, forged(h["capability"]))[0] == ILLEGAL_CLIENT
        assert metrics(d)["refused_bad_mac_total"] == 1
    finally:
        s.close()


def test_store_server_requires_capability(daemon, tmp_path):
    """crescent-store --data-require-capability: libcrescent's put and get
    work, a raw read without the capability is refused and logged by cause,
    and the capability itself is never logged."""
    rpc_port = free_port()
    rpc = f"tcp://127.0.0.1:{rpc_port}"
    d = daemon("--rpc-address", rpc, "--local-segment-size", "0")
    log_path = tmp_path / "store.log"
    with open(log_path, "wb") as log:
        store = subprocess.Popen(
            [binary("crescent-store"), "--master", rpc, "--segment-name", "capseg",
             "--segment-size", str(64 << 20), "--no-pin", "--ping-interval-ms", "200",
             "--data-require-capability"], stdout=log, stderr=subprocess.STDOUT)
    s = Store()
    try:
        assert s.setup(master_server_address=f"127.0.0.1:{rpc_port}", timeout_ms=10000) == 0
        value = os.urandom(10000)
        wait_for(lambda: _put_ok(s, "obj", value), "the store's segment mounted")
        assert s.get("obj") == value
        h = handle_of(s.get_replica_list("obj"))
        ep, seg, addr, size = h["transport_endpoint"], h["segment_name"], h["buffer"], h["size"]
        assert raw(ep, READ, seg, addr, size, h["capability"]) == (0, value)
        assert raw(ep, READ, seg, addr, size)[0] == ILLEGAL_CLIENT
        assert raw(ep, READ, seg, addr, size, forged(h["capability"]))[0] == ILLEGAL_CLIENT
        wait_for(lambda: "capability missing" in log_path.read_text()
                 and "capability bad_mac" in log_path.read_text(), "refusals logged by cause")
        assert h["capability"].hex() not in log_path.read_text()
    finally:
        s.close()
        store.terminate()
        store.wait(timeout=20)


def _put_ok(s, key, value):
    try:
        return s.put(key, value) == 0
    except Exception:  # noqa: BLE001 - no segment mounted yet
        return False


def test_copy_and_move_tasks_carry_capabilities(daemon, tmp_path):
    """Both ends require capabilities (crescentd's local segment and a
    crescent-store): copy and move tasks still move the bytes, since each task
    carries a read capability for its source and a write one per target."""
    rpc = f"tcp://127.0.0.1:{free_port()}"
    d = daemon("--rpc-address", rpc, "--local-segment-size", "64M",
               "--data-require-capability", "true")
    with open(tmp_path / "store.log", "wb") as log:
        store = subprocess.Popen(
            [binary("crescent-store"), "--master", rpc, "--segment-name", "seg0",
             "--segment-size", str(64 << 20), "--no-pin", "--ping-interval-ms", "100",
             "--data-require-capability"], stdout=log, stderr=subprocess.STDOUT)

    def ctl(*args):
        p = subprocess.run([binary("crescentctl"), "--rpc", rpc, "--timeout-ms", "10000", *args],
                           capture_output=True, timeout=120)
        assert p.returncode == 0, p.stderr.decode()
        return p.stdout

    try:
        wait_for(lambda: json.loads(http_get(d.port, "/api/v1/stats")[1])["segments"] == 2,
                 "both segments mounted")
        payload = os.urandom(256 << 10)
        src = tmp_path / "value"
        src.write_bytes(payload)
        ctl("put", "a", str(src), "--preferred", "crescentd-local")
        assert b"SUCCESS" in ctl("copy", "a", "seg0", "--wait")      # run by crescentd
        ctl("put", "b", str(src), "--preferred", "seg0")
        assert b"SUCCESS" in ctl("move", "b", "seg0", "crescentd-local", "--wait")  # by the store
        assert ctl("get", "b", "-") == payload
        ctl("put", "c", str(src), "--preferred", "crescentd-local")
        assert b"SUCCESS" in ctl("move", "c", "crescentd-local", "seg0", "--wait")
        assert ctl("get", "c", "-") == payload  # seg0's bytes, written by crescentd's task
        m = metrics(d)
        assert m["refused_total"] == 0, m
    finally:
        store.terminate()
        store.wait(timeout=20)


def test_keys_come_back_after_a_master_restart(daemon, tmp_path):
    """Keys are never written to --state-dir: after a restart the segment is
    restored without one, its owner's next ping answers client_known false,
    the owner remounts with its key, and reads and writes of a store that
    requires capabilities work again."""
    rpc = f"tcp://127.0.0.1:{free_port()}"
    args = ("--rpc-address", rpc, "--state-dir", str(tmp_path / "state"), "--durability", "sync")
    d = daemon(*args)
    with open(tmp_path / "store.log", "wb") as log:
        store = subprocess.Popen(
            [binary("crescent-store"), "--master", rpc, "--segment-name", "seg0",
             "--segment-size", str(64 << 20), "--no-pin", "--ping-interval-ms", "100",
             "--data-require-capability"], stdout=log, stderr=subprocess.STDOUT)
    rpc_port = int(rpc.rsplit(":", 1)[1])
    try:
        s = Store()
        assert s.setup(master_server_address=f"127.0.0.1:{rpc_port}", timeout_ms=10000) == 0
        value = os.urandom(8192)
        wait_for(lambda: _put_ok(s, "kept", value), "the store's segment mounted")
        s.close()
        d.proc.kill()
        d.proc.wait()
        d2 = daemon(*args)
        s = Store()
        assert s.setup(master_server_address=f"127.0.0.1:{rpc_port}", timeout_ms=10000) == 0
        wait_for(lambda: handle_of(s.get_replica_list("kept"))["capability"] is not None,
                 "the owner remounted with its key")
        assert s.get("kept") == value
        assert s.put("after", value) == 0 and s.get("after") == value
        assert "remounted" in (tmp_path / "store.log").read_text()
        s.close()
    finally:
        store.terminate()
        store.wait(timeout=20)


def _ssd_replica(s, key):
    """The object's local_disk replica (dict), or None while it has none."""
    for r in s.get_replica_list(key):
        if r["tier"] == "local_disk":
            return r
    return None


def _offload_some(d, s, prefix, n=24):
    """Puts n MiB objects (past the watermark of a 32 MiB segment) and waits
    until some live on the SSD only; returns {key: bytes} of those.  Replica
    lists are asked for only then: each grants a lease, which eviction skips."""
    payloads = {f"{prefix}/{i}": os.urandom(1 << 20) for i in range(n)}
    for k, v in payloads.items():
        wait_for(lambda: _put_ok(s, k, v), "the segment mounted")
    wait_for(lambda: _metric(d, "crescent_segments_offloads_done_total") >= 2,
             "objects offloaded to the SSD")
    gone = {k: v for k, v in payloads.items()
            if [r["tier"] for r in s.get_replica_list(k)] == ["local_disk"]}
    assert len(gone) >= 2
    return gone


def _metric(d, name):
    status, body = http_get(d.port, "/metrics")
    assert status == 200
    for line in body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0


def _ssd_raw_reads(s, key, value, segment):
    """The SSD replica's capability reads it; none, a forged one, another range
    and (past the lease and the skew) the same one are refused.  Returns the
    capability."""
    r = _ssd_replica(s, key)
    cap, ep, pos, size = r["capability"], r["endpoint"], r["position"], r["size"]
    assert cap is not None and len(cap) == 48 and r["segment_name"] == segment
    assert size == len(value)
    ssd = segment + "#ssd"
    assert raw(ep, READ, ssd, pos, size, cap) == (0, value)
    assert raw(ep, READ, ssd, pos, size)[0] == ILLEGAL_CLIENT
    assert raw(ep, READ, ssd, pos, size, forged(cap))[0] == ILLEGAL_CLIENT
    assert raw(ep, READ, ssd, pos + 1, size, cap)[0] == ILLEGAL_CLIENT
    time.sleep((LEASE_MS + SKEW_MS + 700) / 1000)
    assert raw(ep, READ, ssd, pos, size, cap)[0] == ILLEGAL_CLIENT
    return cap


def test_ssd_reads_carry_capabilities_crescent_store(daemon, tmp_path):
    """crescent-store --ssd-dir --data-require-capability offers its SSD for
    offload (it held it back while local_disk replicas carried no capability):
    the master signs a read capability for "capseg#ssd", the position and the
    size into each local_disk replica, libcrescent's get sends it, and a raw
    read of the SSD segment is refused without it, forged, for another range,
    or expired, each logged by cause."""
    rpc_port = free_port()
    rpc = f"tcp://127.0.0.1:{rpc_port}"
    d = daemon("--rpc-address", rpc, "--local-segment-size", "0",
               "--eviction-high-watermark-ratio", "0.5", "--eviction-ratio", "0.2",
               "--default-kv-lease-ttl", str(LEASE_MS))
    log_path = tmp_path / "store.log"
    with open(log_path, "wb") as log:
        store = subprocess.Popen(
            [binary("crescent-store"), "--master", rpc, "--segment-name", "capseg",
             "--segment-size", str(32 << 20), "--no-pin", "--ping-interval-ms", "100",
             "--ssd-dir", str(tmp_path / "ssd"), "--ssd-size", str(256 << 20),
             "--data-require-capability"], stdout=log, stderr=subprocess.STDOUT)
    s = Store()
    try:
        assert s.setup(master_server_address=f"127.0.0.1:{rpc_port}", timeout_ms=10000) == 0
        gone = _offload_some(d, s, "st")
        status, body = http_get(d.port, "/api/v1/segments")
        assert {x["name"]: x for x in json.loads(body)["segments"]}["capseg"]["ssd_capacity"] \
            == 256 << 20
        for k, v in gone.items():
            assert s.get(k) == v  # libcrescent's SSD read carries the capability
        key, value = next(iter(gone.items()))
        cap = _ssd_raw_reads(s, key, value, "capseg")
        assert s.get(key) == value  # a fresh get, a fresh capability
        text = log_path.read_text()
        for cause in ("missing", "bad_mac", "out_of_range", "expired"):
            assert f"capability {cause}" in text, cause
        assert "not offered to the master" not in text
        assert cap.hex() not in text
    finally:
        s.close()
        store.terminate()
        store.wait(timeout=20)


def test_ssd_reads_carry_capabilities_local_segment(daemon, tmp_path):
    """The same for crescentd's local segment with --local-segment-ssd-dir and
    --data-require-capability, where each refusal is counted by cause in
    /metrics."""
    rpc_port = free_port()
    d = daemon("--rpc-address", f"tcp://127.0.0.1:{rpc_port}", "--local-segment-size", "32M",
               "--local-segment-ssd-dir", str(tmp_path / "ssd"),
               "--local-segment-ssd-size", "256M", "--data-require-capability", "true",
               "--eviction-high-watermark-ratio", "0.5", "--eviction-ratio", "0.2",
               "--default-kv-lease-ttl", str(LEASE_MS))
    s = Store()
    try:
        assert s.setup(master_server_address=f"127.0.0.1:{rpc_port}", timeout_ms=10000) == 0
        gone = _offload_some(d, s, "loc")
        before = metrics(d)
        for k, v in gone.items():
            assert s.get(k) == v
        key, value = next(iter(gone.items()))
        _ssd_raw_reads(s, key, value, "crescentd-local")
        assert s.get(key) == value
        after = metrics(d)
        grew = {k: after[k] - before.get(k, 0) for k in after}
        assert grew["refused_missing_total"] == 1, grew
        assert grew["refused_bad_mac_total"] == 1, grew
        assert grew["refused_out_of_range_total"] == 1, grew
        assert grew["refused_expired_total"] == 1, grew
        assert grew["refused_total"] == 4, grew
        assert grew["checked_total"] >= len(gone) + 2, grew
    finally:
        s.close()
