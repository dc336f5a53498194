"""Memory eviction's offload to a store server's SSD tier (docs/tiers.md,
"Local SSD tier"), end to end: crescentd with a low eviction watermark, a
crescent-store with --ssd-dir, crescentctl as the client.

Objects evicted from the server's segment are not dropped: the master hands
the server an OFFLOAD task, the server writes each to its SSD, and only then
does the object get a `local_disk` replica and lose its memory one (a store
event with the seed's replica pairs); a get reads it back, bytes intact,
through the transfer layer.  While the server has not confirmed (stopped),
every object keeps its memory replica; a server killed with its offloads
pending leaves no torn file and no replica pointing at one."""
import json
import os
import signal

import pytest

from conftest import free_port, http_get, python_client, wait_for
from store_server import StoreServer, ctl, metric, tiers

OBJ = 1 << 20


def ssd_store(rpc, log_path, ssd, ssd_size="1G", ping_ms=100):
    """A store server of segment seg0 with an SSD tier at `ssd`."""
    return StoreServer(rpc, log_path, ping_ms=ping_ms, ssd=ssd, ssd_size=ssd_size)


@pytest.fixture
def cluster(daemon, tmp_path, request):
    rpc = f"tcp://127.0.0.1:{free_port()}"
    # Eviction past half the 64 MiB segment, a fifth at a time; a test may add
    # flags (indirect parametrization).
    d = daemon("--rpc-address", rpc, "--local-segment-size", "0",
               "--eviction-high-watermark-ratio", "0.5", "--eviction-ratio", "0.2",
               "--client-ttl", "30", *getattr(request, "param", ()))
    ssd = tmp_path / "ssd"
    stores = []

    def store(ping_ms=100):
        s = ssd_store(rpc, tmp_path / f"store{len(stores)}.log", ssd, ping_ms=ping_ms)
        stores.append(s)
        wait_for(lambda: metric(d, "crescent_segments_segments") == 1, "segment mounted")
        return s

    yield d, rpc, ssd, store
    for s in stores:
        if s.proc.poll() is None:
            s.stop(signal.SIGKILL)


def put_many(rpc, tmp_path, n, first=0):
    payloads = {}
    for i in range(first, first + n):
        data = os.urandom(OBJ)
        path = tmp_path / f"in{i}.bin"
        path.write_bytes(data)
        ctl(rpc, "put", f"key/{i}", str(path))
        payloads[f"key/{i}"] = data
    return payloads


def py_store(rpc):
    """python/crescent over libcrescent: one process, so its shm mapping of
    the server's segment outlives a SIGSTOP of the server."""
    py = python_client().Store()
    assert py.setup("localhost", "", 0, 0, "tcp", "", rpc.split("//")[1]) == 0
    return py


def py_put_many(py, n, first=0):
    payloads = {}
    for i in range(first, first + n):
        payloads[f"key/{i}"] = os.urandom(OBJ)
        assert py.put(f"key/{i}", payloads[f"key/{i}"]) == 0
    return payloads


def crs_files(ssd):
    return sorted(p.name for p in ssd.iterdir() if p.name.endswith(".crs"))


def test_eviction_offloads_to_ssd_and_gets_read_it_back(cluster, tmp_path):
    d, rpc, ssd, store = cluster
    s = store()
    # The server announced its SSD tier when it mounted.
    assert metric(d, "crescent_segments_local_disk_capacity_bytes") == 1 << 30
    status, body = http_get(d.port, "/api/v1/segments")
    assert [seg["ssd_capacity"] for seg in json.loads(body)["segments"]] == [1 << 30]
    payloads = put_many(rpc, tmp_path, 48)  # 48 MiB: past the 32 MiB watermark
    wait_for(lambda: (metric(d, "crescent_segments_offloads_done_total") or 0) >= 8,
             "offloads committed")
    status, body = http_get(d.port, "/api/v1/stats")
    assert json.loads(body)["objects"] == 48  # nothing dropped
    assert metric(d, "crescent_segments_evictions_total") >= 8
    offloaded = [k for k in payloads if tiers(rpc, k) == ["local_disk"]]
    assert len(offloaded) >= 8
    assert len(crs_files(ssd)) >= len(offloaded)
    # The replica names the server's endpoint, segment and SSD position.
    text = ctl(rpc, "replicas", offloaded[0]).stdout.decode()
    assert "local_disk" in text and "seg0" in text
    # Read back through the transfer layer, bytes intact (checksum checked).
    for k in offloaded[:6]:
        assert ctl(rpc, "get", k).stdout == payloads[k]
    assert metric(d, "crescent_tasks_offloads_done_total") >= len(offloaded)
    assert metric(d, "crescent_segments_local_disk_replicas") >= len(offloaded)
    assert s.stop() == 0
    # The replicas go with the segment's unmount (its server re-registers
    # them when it comes back: test_ssd_promote.py).
    wait_for(lambda: metric(d, "crescent_segments_segments") == 0, "segment unmounted")


def test_a_stopped_server_keeps_memory_replicas_until_it_confirms(cluster, tmp_path):
    d, rpc, ssd, store = cluster
    s = store()
    py = py_store(rpc)
    payloads = py_put_many(py, 24)
    s.proc.send_signal(signal.SIGSTOP)  # no ping: no task fetched, none confirmed
    try:
        payloads.update(py_put_many(py, 16, first=24))  # shm writes: no server thread
        wait_for(lambda: (metric(d, "crescent_segments_offloads_started_total") or 0) > 0,
                 "offloads handed out")
        assert metric(d, "crescent_segments_offloads_done_total") == 0
        assert metric(d, "crescent_segments_local_disk_replicas") == 0
        status, body = http_get(d.port, "/api/v1/stats")
        assert json.loads(body)["objects"] == 40
        for k in list(payloads)[:4]:
            assert tiers(rpc, k) == ["memory"]
    finally:
        s.proc.send_signal(signal.SIGCONT)
    wait_for(lambda: (metric(d, "crescent_segments_offloads_done_total") or 0) > 0,
             "offloads confirmed")
    moved = [k for k in payloads if tiers(rpc, k) == ["local_disk"]]
    assert moved and ctl(rpc, "get", moved[-1]).stdout == payloads[moved[-1]]
    assert py.get(moved[0]) == payloads[moved[0]]
    assert [r["tier"] for r in py.get_replica_list(moved[0])] == ["local_disk"]
    py.close()


def test_server_killed_with_offloads_pending_leaves_nothing_torn(cluster, tmp_path):
    d, rpc, ssd, store = cluster
    s = store()
    py = py_store(rpc)
    py_put_many(py, 24)
    s.proc.send_signal(signal.SIGSTOP)
    py_put_many(py, 16, first=24)
    py.close()
    wait_for(lambda: (metric(d, "crescent_segments_offloads_started_total") or 0) > 0,
             "offloads handed out")
    s.proc.send_signal(signal.SIGKILL)
    s.proc.wait(timeout=30)
    # Its client expires (--client-ttl 30): the segment and every replica on
    # it go; the offloads fail, none committed, no local_disk replica left.
    wait_for(lambda: metric(d, "crescent_segments_segments") == 0, "segment unmounted",
             timeout=90)
    wait_for(lambda: (metric(d, "crescent_segments_offloads_failed_total") or 0) > 0,
             "offloads failed")
    assert metric(d, "crescent_segments_offloads_done_total") == 0
    assert metric(d, "crescent_segments_local_disk_replicas") == 0
    # No torn file is ever served: whatever the killed server left is
    # complete or a .tmp, and a restart on the directory checks every file.
    s2 = store()
    s2.stop()
    text = s2.log_path.read_text()
    assert "0 bad file(s) dropped" in text, text


def mooncake_store(rpc):
    """python/crescent's MooncakeDistributedStore on the daemon (no segment of its own)."""
    py_store(rpc).close()  # puts python/ on sys.path and CRESCENT_LIB in the environment
    from crescent import MooncakeDistributedStore
    mc = MooncakeDistributedStore()
    assert mc.setup("localhost", "", 0, 0, "tcp", "", rpc.split("//")[1]) == 0
    return mc


# Promotion off: the scans below read each object's replica list more than
# --promotion-hits times, and a promotion would add a memory replica to the
# offloaded object while the test looks at it.
@pytest.mark.parametrize("cluster", [("--promotion-hits", "0")], indirect=True)
def test_replica_descriptors_of_an_offloaded_object(cluster, tmp_path):
    """get_replica_desc / batch_get_replica_desc describe a local_disk replica
    as the reference's ReplicaDescriptor does: is_local_disk_replica() only,
    and get_memory_descriptor / get_disk_descriptor raise."""
    d, rpc, ssd, store = cluster
    store()
    payloads = put_many(rpc, tmp_path, 48)
    wait_for(lambda: (metric(d, "crescent_segments_offloads_done_total") or 0) >= 8,
             "offloads committed")
    offloaded = [k for k in payloads if tiers(rpc, k) == ["local_disk"]]
    in_memory = [k for k in payloads if tiers(rpc, k) == ["memory"]]
    assert offloaded and in_memory
    mc = mooncake_store(rpc)
    (desc,) = mc.get_replica_desc(offloaded[0])
    assert (desc.is_memory_replica(), desc.is_disk_replica(), desc.is_local_disk_replica()) == \
        (False, False, True)
    assert str(desc.status) == "ReplicaStatus.COMPLETE"
    for wrong in (desc.get_memory_descriptor, desc.get_disk_descriptor):
        with pytest.raises(RuntimeError):
            wrong()
    local = desc.get_local_disk_descriptor()
    assert local.segment_name == "seg0" and local.object_size == OBJ, local
    assert local.transport_endpoint != "", local
    batch = mc.batch_get_replica_desc([offloaded[0], in_memory[0], "nokey"])
    assert sorted(batch) == sorted([offloaded[0], in_memory[0]])
    assert [r.is_local_disk_replica() for r in batch[offloaded[0]]] == [True]
    (mem,) = batch[in_memory[0]]
    assert (mem.is_memory_replica(), mem.is_disk_replica(), mem.is_local_disk_replica()) == \
        (True, False, False)
    assert mem.get_memory_descriptor().buffer_descriptor.size == OBJ
    with pytest.raises(RuntimeError):
        mem.get_local_disk_descriptor()
    mc.close()


def test_puts_through_a_churn_wait_for_offloads_instead_of_failing(cluster, tmp_path):
    """4x the segment put as fast as one client can: memory fills with objects
    eviction keeps on the SSD, so PutStarts are refused NO_AVAILABLE_HANDLE
    until the server confirms their offloads; libcrescent starts those puts
    again with backoff (cr_client_set_put_retry_ms) instead of failing them.
    The server pings (and takes its offloads) every 500 ms: room comes in
    steps, so puts are refused meanwhile whatever the machine's speed."""
    d, rpc, ssd, store = cluster
    store(ping_ms=500)
    py = py_store(rpc)
    try:
        assert py.put_retry_stats()["deadline_ms"] == 2000  # the default
        payloads = {}
        for i in range(256):
            payloads[f"churn/{i}"] = os.urandom(OBJ)
            assert py.put(f"churn/{i}", payloads[f"churn/{i}"]) == 0, i
        st = py.put_retry_stats()
        assert st["puts_retried"] >= 1 and st["gave_up"] == 0, st  # refused, then kept
        assert st["recovered"] == st["puts_retried"], st
        status, body = http_get(d.port, "/api/v1/stats")
        assert json.loads(body)["objects"] == len(payloads)  # every put kept
        for k in list(payloads)[::16]:
            assert py.get(k) == payloads[k]
    finally:
        py.close()


def test_batch_puts_through_a_churn_wait_for_offloads(cluster, tmp_path):
    d, rpc, ssd, store = cluster
    store(ping_ms=500)
    py = py_store(rpc)
    try:
        payloads = {f"batch/{i}": os.urandom(OBJ) for i in range(256)}
        keys = list(payloads)
        for at in range(0, len(keys), 8):
            part = keys[at:at + 8]
            values = [payloads[k] for k in part]
            assert py.batch_put_from(part, values, [len(v) for v in values]) == [0] * len(part), at
        st = py.put_retry_stats()
        assert st["puts_retried"] >= 1 and st["gave_up"] == 0, st  # refused, then kept
        assert st["recovered"] == st["puts_retried"], st
        status, body = http_get(d.port, "/api/v1/stats")
        assert json.loads(body)["objects"] == len(payloads)
    finally:
        py.close()
