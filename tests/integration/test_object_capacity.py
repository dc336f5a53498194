"""Object capacity is set by a flag and eviction makes room by count (issue 14, item 2).

A crescentd with a small --max-objects takes far more distinct puts than it
may hold, each one succeeding, while its segment stays nearly empty: the
count watermark (leases' passes) and a PutStart at a full table (its own
eviction) make room, and every evicted object reaches subscribers as a
BlockUpdateEvent with no replicas.  When nothing can be evicted the refusal
names the flag.

Run: CRESCENT_BIN_DIR=... /usr/bin/python3 -m pytest -q tests/integration/test_object_capacity.py
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conftest import binary, http_get, wait_for  # noqa: E402
from master_client import STATUS  # noqa: E402
from test_events import Plane, recv_batch  # noqa: E402

WAIT_S = 30


def metric(port, name):
    status, body = http_get(port, "/metrics")
    assert status == 200
    found = re.search(rb"^" + name.encode() + rb" (\d+)$", body, re.M)
    assert found, name
    return int(found.group(1))


def test_puts_keep_succeeding_under_churn(daemon):
    p = Plane(daemon, "--max_objects", "200")  # Mooncake's spelling works too
    try:
        sub = p.subscriber()
        seq = p.ready(sub)
        keys = [f"blk/{i}" for i in range(1500)]
        for chunk in range(0, len(keys), 100):
            batch = keys[chunk:chunk + 100]
            resp = p.client.batch_put_start([(k, 4096) for k in batch])
            assert resp.status_code == 0
            for k, r in zip(batch, resp.responses):
                assert r.status_code == 0, (k, r.status_code, r.error_message)
            ends = p.client.batch_put_end(batch)
            assert list(ends.status_codes) == [0] * len(batch)
        port = p.daemon.port
        assert metric(port, "crescent_segments_objects") <= 200
        assert metric(port, "crescent_segments_max_objects") == 200
        assert metric(port, "crescent_segments_used_bytes") <= 200 * 4096  # bytes never mattered
        # Every put was published, and every eviction, as BlockUpdateEvent
        # with no replicas.
        stored, gone = set(), set()

        def take():
            nonlocal seq
            seq_got, events = recv_batch(sub, p.topic)
            assert seq_got == seq
            seq += 1
            for e in events:
                if e[0] == "BlockStoreEvent":
                    stored.add(e[1])
                elif e[0] == "BlockUpdateEvent" and e[2] == []:
                    assert e[1] in stored or e[1].startswith("probe-"), e
                    gone.add(e[1])

        while len(stored) < len(keys):
            take()

        def settled():  # passes may still run: drain, then compare with the counter
            while sub.poll(50):
                take()
            return len(gone) == metric(port, "crescent_segments_evictions_total")

        wait_for(settled, "an event for each eviction")
        assert set(keys) <= stored
        assert len(gone) >= len(keys) - 200
        assert not gone & set(keys[-20:])  # approximately LRU: the newest stay
        for k in keys[-20:]:
            assert p.client.get_replica_list(k).status_code == 0
    finally:
        p.close()


def test_count_watermark_evicts_without_byte_pressure(daemon):
    """Above the watermark on counts alone, leases' passes bring the object
    count back under it, with no put refused and no PutStart's own eviction."""
    p = Plane(daemon, "--max-objects", "100", "--eviction-high-watermark-ratio", "0.5",
              "--eviction-ratio", "0.1")
    try:
        for i in range(70):
            p.put(f"k{i}")
        port = p.daemon.port
        wait_for(lambda: metric(port, "crescent_segments_objects") < 50,
                 "the count watermark's eviction")
        assert metric(port, "crescent_leases_count_eviction_passes_total") > 0
        assert metric(port, "crescent_segments_room_evictions_total") == 0
        assert metric(port, "crescent_segments_used_bytes") < 50 * 4096
    finally:
        p.close()


def test_refusal_names_the_flag(daemon):
    p = Plane(daemon, "--max-objects", "2", "--default-kv-lease-ttl", "600000")
    try:
        for k in ("a", "b"):
            p.put(k)
            assert p.client.get_replica_list(k).status_code == 0  # leased: not evictable
        third = p.client.put_start("c", 4096)
        assert third.status_code == STATUS["NOMEM"]
        assert "--max-objects" in third.error_message
        assert "object table full" in third.error_message
    finally:
        p.close()
    out = subprocess.run([binary("crescentd"), "--help"], capture_output=True, text=True)
    assert "--max-objects" in out.stdout and "--max-allocations-per-segment" in out.stdout
    bad = subprocess.run([binary("crescentd"), "--max-objects", "0"], capture_output=True,
                         text=True)
    assert bad.returncode == 2 and "max-objects" in bad.stderr
