"""The SSD tier on the two other kinds of store server (docs/tiers.md, "Local
SSD tier"): crescentd's own local segment (--local-segment-ssd-dir,
--local-segment-ssd-size) and a segment an engine process hosts through
libcrescent (cr_host_options.ssd_dir; Python: MooncakeDistributedStore.setup(
..., enable_ssd_offload=True, ssd_offload_path=DIR)).  Each runs
crescent-store's SSD code (src/tier/ssd_host.c): memory eviction offloads
objects there instead of dropping them, and gets read them back, bytes
identical, through the transfer layer."""
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import BIN_DIR, binary, free_port, http_get, wait_for

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
os.environ.setdefault("CRESCENT_LIB", os.path.join(BIN_DIR, "..", "lib", "libcrescent.so"))
from crescent import Store  # noqa: E402
from crescent.mooncake_store import MooncakeDistributedStore  # noqa: E402

MiB = 1 << 20
EVICTION = ("--eviction-high-watermark-ratio", "0.5", "--eviction-ratio", "0.2")


def metric(d, name):
    status, body = http_get(d.port, "/metrics")
    assert status == 200
    m = re.search(rf"^{name} (\d+)$", body.decode(), re.M)
    return int(m.group(1)) if m else None


def segments(d):
    status, body = http_get(d.port, "/api/v1/segments")
    assert status == 200
    return {s["name"]: s for s in json.loads(body)["segments"]}


def crs_files(path):
    return sorted(p.name for p in path.iterdir() if p.name.endswith(".crs"))


def offloaded(d, get_replicas, keys):
    """The keys whose only replica is on an SSD, once some offloads are
    committed (asked only then: a replica list grants a lease, and eviction
    skips leased objects)."""
    wait_for(lambda: (metric(d, "crescent_segments_offloads_done_total") or 0) >= 4,
             "offloads committed")
    return [k for k in keys if [r["tier"] for r in get_replicas(k)] == ["local_disk"]]


def test_crescentd_local_segment_offloads_to_its_ssd(daemon, tmp_path):
    rpc_port = free_port()
    ssd = tmp_path / "local-ssd"
    d = daemon("--rpc-address", f"tcp://127.0.0.1:{rpc_port}", "--local-segment-size", "32M",
               "--local-segment-ssd-dir", str(ssd), "--local-segment-ssd-size", "256M",
               *EVICTION)
    assert segments(d)["crescentd-local"]["ssd_capacity"] == 256 * MiB
    s = Store()
    assert s.setup(master_server_address=f"127.0.0.1:{rpc_port}", timeout_ms=10000) == 0
    try:
        payloads = {f"key/{i}": os.urandom(MiB) for i in range(24)}  # past 16 MiB
        for k, v in payloads.items():
            assert s.put(k, v) == 0
        gone = offloaded(d, s.get_replica_list, payloads)
        assert len(gone) >= 4
        assert len(crs_files(ssd)) >= len(gone)
        for k in gone:
            assert s.get(k) == payloads[k]  # read from "crescentd-local#ssd"
        assert metric(d, "crescent_data_offloads_run_total") >= len(gone)
        assert metric(d, "crescent_data_offloads_failed_total") == 0
        status, body = http_get(d.port, "/api/v1/stats")
        assert json.loads(body)["objects"] == len(payloads)  # nothing dropped
    finally:
        s.close()


def test_local_segment_ssd_flags_go_together(tmp_path):
    for args in (["--local-segment-ssd-dir", str(tmp_path / "s")],
                 ["--local-segment-ssd-size", "1G"],
                 ["--local-segment-size", "0", "--local-segment-ssd-dir", str(tmp_path / "s"),
                  "--local-segment-ssd-size", "1G"]):
        p = subprocess.run([binary("crescentd"), *args], capture_output=True, timeout=30)
        assert p.returncode == 2, (args, p.stderr)
        assert b"local-segment-ssd-dir and local-segment-ssd-size go together" in p.stderr


def test_crescentd_refuses_an_ssd_dir_it_cannot_use(daemon, tmp_path):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_bytes(b"x")
    with pytest.raises(AssertionError) as failed:
        daemon("--rpc-address", f"tcp://127.0.0.1:{free_port()}", "--local-segment-size", "16M",
               "--local-segment-ssd-dir", str(not_a_dir), "--local-segment-ssd-size", "1G")
    text = str(failed.value)
    assert "crescentd exited early" in text and str(not_a_dir) in text, text
    assert "(--local-segment-ssd-dir, --local-segment-ssd-size)" in text, text


def test_python_hosted_segment_offloads_to_its_ssd(daemon, tmp_path):
    rpc_port = free_port()
    d = daemon("--rpc-address", f"tcp://127.0.0.1:{rpc_port}", "--local-segment-size", "0",
               *EVICTION)
    ssd = tmp_path / "engine-ssd"
    store = MooncakeDistributedStore()
    rc = store.setup("127.0.0.1", "P2PHANDSHAKE", 32 * MiB, 0, "tcp", "",
                     f"127.0.0.1:{rpc_port}", enable_ssd_offload=True,
                     ssd_offload_path=str(ssd), ssd_offload_size=256 * MiB)
    assert rc == 0, store.last_error
    reader = Store()
    assert reader.setup(master_server_address=f"127.0.0.1:{rpc_port}", timeout_ms=10000) == 0
    try:
        (seg,) = segments(d).values()
        assert seg["ssd_capacity"] == 256 * MiB
        payloads = {f"eng/{i}": os.urandom(MiB) for i in range(24)}
        for k, v in payloads.items():
            assert store.put(k, v) == 0
        gone = offloaded(d, reader.get_replica_list, payloads)
        assert len(gone) >= 4
        assert len(crs_files(ssd)) >= len(gone)
        for k in gone:
            assert store.get(k) == payloads[k]   # the engine itself, from its SSD segment
            assert reader.get(k) == payloads[k]  # another client, the same way
        status, body = http_get(d.port, "/api/v1/stats")
        assert json.loads(body)["objects"] == len(payloads)
    finally:
        reader.close()
        store.close()


def test_python_setup_ssd_offload_needs_a_path_and_a_segment(daemon, tmp_path, monkeypatch):
    monkeypatch.delenv("MOONCAKE_OFFLOAD_FILE_STORAGE_PATH", raising=False)
    rpc_port = free_port()
    daemon("--rpc-address", f"tcp://127.0.0.1:{rpc_port}", "--local-segment-size", "0")
    store = MooncakeDistributedStore()
    assert store.setup("127.0.0.1", "P2PHANDSHAKE", 16 * MiB, 0, "tcp", "",
                       f"127.0.0.1:{rpc_port}", enable_ssd_offload=True) == -600
    assert "ssd_offload_path" in store.last_error
    assert store.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 * MiB, "tcp", "",
                       f"127.0.0.1:{rpc_port}", enable_ssd_offload=True,
                       ssd_offload_path=str(tmp_path / "s"), ssd_offload_size=MiB) == -600
    assert "global_segment_size" in store.last_error
    # A size taken from the reference's variable; the path from the argument.
    monkeypatch.setenv("MOONCAKE_OFFLOAD_TOTAL_SIZE_LIMIT_BYTES", str(64 * MiB))
    assert store.setup("127.0.0.1", "P2PHANDSHAKE", 16 * MiB, 0, "tcp", "",
                       f"127.0.0.1:{rpc_port}", enable_ssd_offload=True,
                       ssd_offload_path=str(tmp_path / "s")) == 0
    store.close()


def follow_events(d, store, sentinel="events/sentinel"):
    """Every store event crescentd published so far, as crescentctl's JSON
    lines: replayed from 0 up to the STORE event of a put made last."""
    sub = d.args[d.args.index("--event-address") + 1]
    replay = d.args[d.args.index("--replay-address") + 1]
    p = subprocess.Popen([binary("crescentctl"), "events", "--follow", "--sub", sub,
                          "--replay", replay, "--from", "0"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert store.put(sentinel, b"x") == 0
        events = []
        for line in p.stdout:  # the test's timeout bounds a follower that stalls
            events.append(json.loads(line))
            if events[-1].get("key") == sentinel:
                return events
        raise AssertionError("the follower stopped before the sentinel's event")
    finally:
        p.kill()
        p.wait(timeout=30)


def test_crescentd_local_segment_reports_its_ssd_evictions(daemon, tmp_path):
    """The local segment's SSD holds fewer files than are offloaded to it: the
    files its LRU evicts are reported to the master, which drops those
    local_disk replicas (an UPDATE event each, the seed's pairs), so every
    local_disk replica it lists is readable."""
    rpc_port = free_port()
    ssd = tmp_path / "local-ssd"
    # Room for 6 files of 1 MiB (headers included); a 2 s client TTL: the
    # local segment pings (and takes its offloads) every 500 ms.
    d = daemon("--rpc-address", f"tcp://127.0.0.1:{rpc_port}", "--local-segment-size", "32M",
               "--local-segment-ssd-dir", str(ssd),
               "--local-segment-ssd-size", str(6 * MiB + 6 * 8192), "--promotion-hits", "0",
               "--client-ttl", "2", *EVICTION)
    s = Store()
    assert s.setup(master_server_address=f"127.0.0.1:{rpc_port}", timeout_ms=10000) == 0
    try:
        payloads = {f"key/{i}": os.urandom(MiB) for i in range(48)}
        for k, v in payloads.items():
            assert s.put(k, v) == 0
        wait_for(lambda: (metric(d, "crescent_segments_local_disk_gone_total") or 0) >= 4,
                 "the local segment's SSD evictions reported")
        wait_for(lambda: metric(d, "crescent_segments_local_disk_replicas") <= len(crs_files(ssd)),
                 "local_disk replicas down to the files the SSD holds")
        assert len(crs_files(ssd)) <= 6
        assert metric(d, "crescent_data_ssd_gone_reported_total") >= 4
        assert metric(d, "crescent_data_ssd_gone_reports_refused_total") == 0
        listed = 0
        for k in payloads:
            try:
                tiers = [r["tier"] for r in s.get_replica_list(k)]
            except Exception:  # noqa: BLE001 - gone with its last replica
                continue
            if "local_disk" in tiers:
                listed += 1
                assert s.get(k) == payloads[k], k  # every listed SSD file is there
        assert listed >= 1
        # Each drop was published: a key whose last event before listed a
        # local_disk replica, now with none left on the SSD.
        dropped, last = 0, {}
        for e in follow_events(d, s):
            if e.get("type") not in ("BlockStoreEvent", "BlockUpdateEvent"):
                continue
            types = [r["type"] for r in e["replicas"]]
            if "local_disk" in last.get(e["key"], ()) and "local_disk" not in types:
                dropped += 1
            last[e["key"]] = types
        assert dropped >= metric(d, "crescent_segments_local_disk_gone_total")
    finally:
        s.close()
