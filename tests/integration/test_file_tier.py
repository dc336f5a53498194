"""The shared file tier (docs/tiers.md) end to end: crescentd started with the
seed's --root_fs_dir/--cluster_id/--global_file_segment_size, a crescent-store
hosting the memory segment, crescentctl as the client (libcrescent's Put/Get,
each a process whose close writes and reports what it queued).

A put is also a file under <root>/<cluster_id>/ and a `disk` replica; with the
memory replica gone (its store server unmounted) a get reads the file; a
corrupt file is never served and its replica is dropped; a client without the
master's view of the root is refused; a missing directory leaves puts in
memory and is counted; the file tier evicts beyond its size; a restart with
--state-dir keeps the disk replicas."""
import os
import signal
import subprocess
import time

import pytest

import store_server
from conftest import binary, free_port, http_get, python_client, wait_for
from store_server import StoreServer, metric

def ctl(rpc, root, *args, **kw):
    return store_server.ctl(rpc, *args, root=root, **kw)


def obj_files(root, cluster="mooncake_cluster"):
    out = []
    for dirpath, _, names in os.walk(os.path.join(root, cluster)):
        out += [os.path.join(dirpath, n) for n in names if n.endswith(".obj")]
    return out


def tiers(rpc, root, key):
    return store_server.tiers(rpc, key, root=root)


@pytest.fixture
def cluster(daemon, tmp_path):
    root = tmp_path / "dfs"
    root.mkdir()
    rpc = f"tcp://127.0.0.1:{free_port()}"

    def start(*extra):
        return daemon("--rpc-address", rpc, "--local-segment-size", "0",
                      f"--root_fs_dir={root}", "--cluster_id=mooncake_cluster", *extra)

    stores = []

    def store(name="seg0"):
        s = StoreServer(rpc, tmp_path / f"{name}.log", name)
        stores.append(s)
        return s

    yield start, store, rpc, root
    for s in stores:
        s.stop(signal.SIGKILL)


def test_put_persists_and_get_falls_back_to_the_file(cluster, tmp_path):
    start, store, rpc, root = cluster
    d = start()
    s = store()
    wait_for(lambda: metric(d, "crescent_segments_segments") == 1, "segment mounted")
    payload = os.urandom(1 << 20)
    (tmp_path / "in.bin").write_bytes(payload)
    ctl(rpc, root, "put", "a/../key\x01", str(tmp_path / "in.bin"))
    files = obj_files(root)
    assert len(files) == 1 and os.path.basename(files[0]).endswith(".obj")
    assert ".." not in os.path.relpath(files[0], root)
    assert tiers(rpc, root, "a/../key\x01") == ["disk", "memory"]
    assert files[0] in ctl(rpc, root, "replicas", "a/../key\x01").stdout.decode()
    assert metric(d, "crescent_segments_file_tier_used_bytes") == 1 << 20
    # The memory replica goes with its store server: the file remains.
    assert s.stop() == 0
    wait_for(lambda: metric(d, "crescent_segments_segments") == 0, "segment unmounted")
    assert tiers(rpc, root, "a/../key\x01") == ["disk"]
    assert ctl(rpc, root, "get", "a/../key\x01").stdout == payload
    # A flipped byte in the file: refused, never served, and the replica dropped.
    with open(files[0], "r+b") as f:
        f.seek(-100, os.SEEK_END)
        b = f.read(1)
        f.seek(-100, os.SEEK_END)
        f.write(bytes([b[0] ^ 0x40]))
    bad = ctl(rpc, root, "get", "a/../key\x01", check=False)
    assert bad.returncode != 0 and bad.stdout == b""
    assert b"checksum" in bad.stderr, bad.stderr
    gone = ctl(rpc, root, "replicas", "a/../key\x01", check=False)
    assert gone.returncode == 1 and b"OBJECT_NOT_FOUND" in gone.stderr
    assert metric(d, "crescent_segments_file_tier_dropped_total") == 1
    assert metric(d, "crescent_segments_file_tier_replicas") == 0
    # crescentd sees the directory: it deletes the file (on its deleting thread)
    wait_for(lambda: not os.path.exists(files[0]), "crescentd deleted the dropped file")


def test_a_client_without_the_masters_view_is_refused(cluster, tmp_path):
    start, store, rpc, root = cluster
    start()
    store()
    (tmp_path / "in.bin").write_bytes(b"x" * 100)
    p = ctl(rpc, None, "put", "k", str(tmp_path / "in.bin"), check=False)
    assert p.returncode != 0 and b"CRESCENT_ROOT_FS_DIR" in p.stderr, p.stderr
    p = ctl(rpc, tmp_path / "elsewhere", "put", "k", str(tmp_path / "in.bin"), check=False)
    assert p.returncode != 0 and b"--root_fs_dir" in p.stderr, p.stderr
    assert obj_files(root) == []


def test_missing_directory_keeps_puts_in_memory(cluster, tmp_path):
    start, store, rpc, root = cluster
    d = start()
    store()
    wait_for(lambda: metric(d, "crescent_segments_segments") == 1, "segment mounted")
    os.rename(root, str(root) + ".gone")  # the mount went away
    (tmp_path / "in.bin").write_bytes(b"y" * 4096)
    ctl(rpc, root, "put", "k", str(tmp_path / "in.bin"))
    assert ctl(rpc, root, "get", "k").stdout == b"y" * 4096
    assert tiers(rpc, root, "k") == ["memory"]
    assert metric(d, "crescent_segments_file_tier_persist_failed_missing_total") == 1
    status, body = http_get(d.port, "/health")
    assert status == 200 and b'"persist_failed_missing_total":1' in body, body


def test_file_tier_evicts_past_its_size(cluster, tmp_path):
    start, store, rpc, root = cluster
    d = start("--global_file_segment_size=3000000")
    store()
    wait_for(lambda: metric(d, "crescent_segments_segments") == 1, "segment mounted")
    (tmp_path / "in.bin").write_bytes(os.urandom(1 << 20))
    for i in range(6):
        ctl(rpc, root, "put", f"k{i}", str(tmp_path / "in.bin"))
    assert metric(d, "crescent_segments_file_tier_used_bytes") <= 3000000
    assert metric(d, "crescent_segments_file_tier_evictions_total") >= 3
    assert len(obj_files(root)) == metric(d, "crescent_segments_file_tier_replicas") <= 2
    assert tiers(rpc, root, "k5") == ["disk", "memory"]  # the newest stays on file


def test_restart_with_state_dir_keeps_disk_replicas(cluster, tmp_path):
    start, store, rpc, root = cluster
    state = tmp_path / "state"
    d = start("--state-dir", str(state), "--durability", "sync")
    s = store()
    wait_for(lambda: metric(d, "crescent_segments_segments") == 1, "segment mounted")
    payload = os.urandom(300000)
    (tmp_path / "in.bin").write_bytes(payload)
    ctl(rpc, root, "put", "kept", str(tmp_path / "in.bin"))
    assert s.stop() == 0
    wait_for(lambda: metric(d, "crescent_segments_segments") == 0, "segment unmounted")
    rc, _ = d.stop()
    assert rc == 0
    d = start("--state-dir", str(state), "--durability", "sync")
    assert tiers(rpc, root, "kept") == ["disk"]
    assert ctl(rpc, root, "get", "kept").stdout == payload


def test_python_client_uses_the_file_tier(cluster, monkeypatch):
    """python/crescent wraps libcrescent's put/get: the tier works through it."""
    PyStore = python_client().Store
    start, store, rpc, root = cluster
    d = start()
    s = store()
    wait_for(lambda: metric(d, "crescent_segments_segments") == 1, "segment mounted")
    monkeypatch.setenv("CRESCENT_ROOT_FS_DIR", str(root))
    master = rpc.split("//")[1]
    value = os.urandom(200000)
    py = PyStore()
    assert py.setup("localhost", "", 0, 0, "tcp", "", master) == 0
    assert py.put("py-key", value) == 0
    py.close()  # writes and reports what it queued
    assert tiers(rpc, root, "py-key") == ["disk", "memory"]
    assert s.stop() == 0
    wait_for(lambda: metric(d, "crescent_segments_segments") == 0, "segment unmounted")
    py = PyStore()
    assert py.setup("localhost", "", 0, 0, "tcp", "", master) == 0
    assert py.get("py-key") == value
    assert [r["tier"] for r in py.get_replica_list("py-key")] == ["disk"]
    py.close()


def test_client_killed_mid_persist_never_serves_a_torn_file(cluster, tmp_path):
    """kill -9 of a client after its put returned, while its writer may be
    mid-file: whatever is left (nothing, a temporary file, a whole file not
    reported), a get returns the put's bytes or fails with a reason."""
    start, store, rpc, root = cluster
    d = start()
    s = store()
    wait_for(lambda: metric(d, "crescent_segments_segments") == 1, "segment mounted")
    payload = os.urandom(48 << 20)
    (tmp_path / "big.bin").write_bytes(payload)
    env = dict(os.environ, CRESCENT_ROOT_FS_DIR=str(root))
    # stdbuf: the "stored" line leaves at once (a pipe would hold it until exit,
    # after close has persisted and reported everything).
    p = subprocess.Popen(["stdbuf", "-oL", binary("crescentctl"), "--rpc", rpc, "--timeout-ms",
                          "20000", "put", "big", str(tmp_path / "big.bin")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    line = p.stdout.readline()  # printed once the put returned, before close persists
    assert line.startswith(b"stored big"), (line, p.stderr.read())
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=30)
    assert ctl(rpc, root, "get", "big").stdout == payload  # the memory replica
    assert s.stop() == 0
    wait_for(lambda: metric(d, "crescent_segments_segments") == 0, "segment unmounted")
    got = ctl(rpc, root, "get", "big", check=False)
    if got.returncode == 0:  # the file was whole and reported before the kill
        assert got.stdout == payload
    else:  # no disk replica was recorded: nothing to read, said so
        assert got.stdout == b"" and got.stderr != b""
        assert metric(d, "crescent_segments_file_tier_replicas") == 0
    print("left in the tier:", sorted(os.path.basename(f) for f in
                                      os.listdir(os.path.dirname(obj_files(root)[0]))
                                      ) if obj_files(root) else "no whole file")


def test_read_only_directory_keeps_puts_in_memory(cluster, tmp_path):
    """The client sees the shared directory read-only (a read-only bind mount
    in a mount namespace of its own): the put succeeds in memory, the failure
    is counted as read_only and reported."""
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("no mount namespaces here (unshare -m)")
    start, store, rpc, root = cluster
    d = start()
    store()
    wait_for(lambda: metric(d, "crescent_segments_segments") == 1, "segment mounted")
    (tmp_path / "in.bin").write_bytes(b"z" * 8192)
    env = dict(os.environ, CRESCENT_ROOT_FS_DIR=str(root))
    script = (f"mount --bind {root} {root} && mount -o remount,bind,ro {root} && "
              f"exec {binary('crescentctl')} --rpc {rpc} --timeout-ms 20000 put ro "
              f"{tmp_path / 'in.bin'}")
    p = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, env=env,
                       timeout=120)
    assert p.returncode == 0, p.stderr.decode()
    assert b"read_only" in p.stderr, p.stderr  # logged once, with its cause
    assert tiers(rpc, root, "ro") == ["memory"]
    assert ctl(rpc, root, "get", "ro").stdout == b"z" * 8192
    assert metric(d, "crescent_segments_file_tier_persist_failed_read_only_total") == 1
    assert obj_files(root) == []


def test_batched_writes_of_every_size_read_back_whole(cluster, monkeypatch):
    """The writer takes puts in batches, writes each as one aligned block
    (O_DIRECT where the file system takes it) cut to its length, and reuses
    buffers between puts: sizes around the block size, empty and odd ones,
    puts and a batch put from one client, keys sharing directories or not,
    all come back byte for byte from their files alone."""
    PyStore = python_client().Store
    start, store, rpc, root = cluster
    d = start()
    s = store()
    wait_for(lambda: metric(d, "crescent_segments_segments") == 1, "segment mounted")
    monkeypatch.setenv("CRESCENT_ROOT_FS_DIR", str(root))
    master = rpc.split("//")[1]
    sizes = [1, 7, 4095, 4096, 4097, 8191, 65536, (1 << 20) + 3, 1 << 20, 100, 3 * 4096 - 41]
    values = {f"k{i}-{n}": os.urandom(n) for i, n in enumerate(sizes * 3)}
    py = PyStore()
    assert py.setup("localhost", "", 0, 0, "tcp", "", master) == 0
    keys = list(values)
    for k in keys[:20]:
        assert py.put(k, values[k]) == 0
    rest = keys[20:]
    assert py.batch_put_from(rest, [values[k] for k in rest], [len(values[k]) for k in rest]) \
        == [0] * len(rest)
    py.close()  # writes and reports what it queued
    assert len(obj_files(root)) == len(values)
    assert not [f for f in os.listdir(os.path.dirname(obj_files(root)[0])) if ".tmp." in f]
    header = 40 + len("default")
    sizes_on_disk = sorted(os.path.getsize(f) for f in obj_files(root))
    # exactly header + value: the O_DIRECT padding was cut off
    assert sizes_on_disk == sorted(header + len(k) + len(v) for k, v in values.items())
    assert metric(d, "crescent_segments_file_tier_replicas") == len(values)
    # Read latency per tier, on the client: a read of the memory replica...
    py = PyStore()
    assert py.setup("localhost", "", 0, 0, "tcp", "", master) == 0
    assert py.get(keys[0]) == values[keys[0]]
    lat = py.read_latency()
    assert (lat["memory"]["count"], lat["disk"]["count"], lat["local_disk"]["count"]) == (1, 0, 0)
    assert lat["memory"]["buckets"][-1] == (float("inf"), 1) and lat["memory"]["sum_seconds"] > 0
    py.close()
    assert s.stop() == 0
    wait_for(lambda: metric(d, "crescent_segments_segments") == 0, "segment unmounted")
    py = PyStore()
    assert py.setup("localhost", "", 0, 0, "tcp", "", master) == 0
    for k, v in values.items():
        assert py.get(k) == v, k
    # ...and of every file, under "disk"
    lat = py.read_latency()
    assert (lat["memory"]["count"], lat["disk"]["count"]) == (0, len(values))
    counts = [n for _, n in lat["disk"]["buckets"]]
    assert counts == sorted(counts) and counts[-1] == len(values)  # cumulative
    text = py.read_latency_metrics()
    assert "# TYPE crescent_client_read_latency_seconds histogram" in text
    assert f'crescent_client_read_latency_seconds_count{{tier="disk"}} {len(values)}' in text
    assert f'crescent_client_read_latency_seconds_bucket{{tier="disk",le="+Inf"}} {len(values)}' \
        in text
    py.ping()  # carries the reads to crescentd's /metrics (the first client's one memory read
    # went with no ping: it closed within a second of it)
    status, body = http_get(d.port, "/metrics")
    assert f'crescent_segments_read_latency_seconds_count{{tier="disk"}} {len(values)}\n' \
        in body.decode()
    py.close()


def test_a_file_longer_or_shorter_than_its_header_is_refused(cluster, tmp_path):
    """The get reads header, value and one byte more in one call: a byte
    appended to a file, or one cut off, is refused, never served."""
    start, store, rpc, root = cluster
    d = start()
    s = store()
    wait_for(lambda: metric(d, "crescent_segments_segments") == 1, "segment mounted")
    (tmp_path / "in.bin").write_bytes(os.urandom(10000))
    ctl(rpc, root, "put", "long", str(tmp_path / "in.bin"))
    ctl(rpc, root, "put", "short", str(tmp_path / "in.bin"))
    assert s.stop() == 0
    wait_for(lambda: metric(d, "crescent_segments_segments") == 0, "segment unmounted")
    files = {k: [f for f in obj_files(root) if f"-{k}.obj" in f][0] for k in ("long", "short")}
    with open(files["long"], "ab") as f:
        f.write(b"\0")
    with open(files["short"], "r+b") as f:
        f.truncate(os.path.getsize(files["short"]) - 1)
    for key in ("long", "short"):
        bad = ctl(rpc, root, "get", key, check=False)
        assert bad.returncode != 0 and bad.stdout == b"", key
        assert b"than its header says" in bad.stderr, bad.stderr
    assert metric(d, "crescent_segments_file_tier_dropped_total") == 2


def test_a_refused_persist_loses_its_file_on_the_writer_thread(cluster, monkeypatch):
    """A put whose object is removed before its file is reported: crescentd
    refuses the report, and the client's writer thread (not the put's)
    deletes that file, unless a later put of the key has replaced it."""
    import ctypes
    PyStore = python_client().Store
    lib = ctypes.CDLL(os.environ["CRESCENT_LIB"])
    lib.cr_client_file_tier_flush.argtypes = [ctypes.c_void_p, ctypes.c_int]
    start, store, rpc, root = cluster
    d = start()
    store()
    wait_for(lambda: metric(d, "crescent_segments_segments") == 1, "segment mounted")
    monkeypatch.setenv("CRESCENT_ROOT_FS_DIR", str(root))
    py = PyStore()
    assert py.setup("localhost", "", 0, 0, "tcp", "", rpc.split("//")[1]) == 0
    assert py.put("gone", b"g" * 10000) == 0
    assert py.remove("gone") == 0  # before its report: the report will be refused
    assert py.put("dup", b"a" * 10000) == 0
    assert py.remove("dup") == 0
    assert py.put("dup", b"b" * 10000) == 0  # the same file name, other bytes
    assert lib.cr_client_file_tier_flush(py._client, 20000) == 0  # writes, reports
    # The refused files went to the writer; a second flush waits for it.
    assert lib.cr_client_file_tier_flush(py._client, 20000) == 0
    values = [open(f, "rb").read()[-10000:] for f in obj_files(root)]
    assert values == [b"b" * 10000], [v[:1] for v in values]
    assert tiers(rpc, root, "dup") == ["disk", "memory"]
    py.close()


def test_replica_descriptors_of_a_disk_replica(cluster, monkeypatch):
    """get_replica_desc describes the file tier's replica as the reference's
    ReplicaDescriptor does: is_disk_replica(), get_disk_descriptor() with the
    file's path and the object's size; the memory replica beside it stays a
    memory replica."""
    MooncakeDistributedStore = python_client().MooncakeDistributedStore
    start, store, rpc, root = cluster
    d = start()
    store()
    wait_for(lambda: metric(d, "crescent_segments_segments") == 1, "segment mounted")
    monkeypatch.setenv("CRESCENT_ROOT_FS_DIR", str(root))
    master = rpc.split("//")[1]
    value = os.urandom(200000)
    mc = MooncakeDistributedStore()
    assert mc.setup("localhost", "", 0, 0, "tcp", "", master) == 0
    assert mc.put("desc-key", value) == 0
    mc.close()  # writes and reports what it queued
    assert tiers(rpc, root, "desc-key") == ["disk", "memory"]
    mc = MooncakeDistributedStore()
    assert mc.setup("localhost", "", 0, 0, "tcp", "", master) == 0
    descs = mc.get_replica_desc("desc-key")
    kinds = sorted((r.is_memory_replica(), r.is_disk_replica(), r.is_local_disk_replica())
                   for r in descs)
    assert kinds == [(False, True, False), (True, False, False)], kinds
    (disk,) = [r for r in descs if r.is_disk_replica()]
    dd = disk.get_disk_descriptor()
    assert dd.object_size == len(value)
    assert dd.file_path in obj_files(root), (dd.file_path, obj_files(root))
    with open(dd.file_path, "rb") as f:
        assert value in f.read()  # the file holds the object's bytes (after its header)
    with pytest.raises(RuntimeError):
        disk.get_memory_descriptor()
    (mem,) = [r for r in descs if r.is_memory_replica()]
    with pytest.raises(RuntimeError):
        mem.get_disk_descriptor()
    assert [r.is_disk_replica() for r in mc.batch_get_replica_desc(["desc-key"])["desc-key"]] \
        .count(True) == 1
    mc.close()


def test_a_put_the_writer_has_no_buffer_for_is_skipped_and_counted(cluster, monkeypatch):
    """The writer's buffers are a bounded pool (CRESCENT_FILE_TIER_BUFFER_BYTES):
    a put that finds every buffer queued is not persisted, never waits and
    never copies into fresh memory; it is counted persist_skipped_busy in
    crescentd's /metrics and /health, and its object stays in memory.  Here
    the pool holds one buffer and a batch put queues 64 values in one loop
    (no RPC between them), far faster than the writer's fdatasync and
    rename of even one: most are skipped.  Every file that was written holds
    exactly its put's bytes."""
    PyStore = python_client().Store
    start, store, rpc, root = cluster
    d = start()
    s = store()
    wait_for(lambda: metric(d, "crescent_segments_segments") == 1, "segment mounted")
    monkeypatch.setenv("CRESCENT_ROOT_FS_DIR", str(root))
    # one buffer: header (40 + "default" + key) and 64 KiB, rounded up to 4 KiB
    monkeypatch.setenv("CRESCENT_FILE_TIER_BUFFER_BYTES", str(17 * 4096))
    master = rpc.split("//")[1]
    values = {f"b{i:02d}": os.urandom(65536) for i in range(64)}
    keys = list(values)
    py = PyStore()
    assert py.setup("localhost", "", 0, 0, "tcp", "", master) == 0
    assert py.batch_put_from(keys, [values[k] for k in keys], [65536] * 64) == [0] * 64
    py.close()  # writes what it queued and reports, with the skipped count
    skipped = metric(d, "crescent_segments_file_tier_persist_skipped_busy_total")
    recorded = metric(d, "crescent_segments_file_tier_reported_total")
    assert skipped is not None and skipped >= 1 and recorded >= 1, (skipped, recorded)
    assert skipped + recorded == 64
    assert len(obj_files(root)) == recorded
    status, body = http_get(d.port, "/health")
    assert status == 200 and f'"persist_skipped_busy_total":{skipped}'.encode() in body, body
    # A skipped put is in memory; with the memory replicas gone, exactly the
    # persisted ones remain, each read back whole from its file.
    py = PyStore()
    assert py.setup("localhost", "", 0, 0, "tcp", "", master) == 0
    assert all(py.get(k) == values[k] for k in keys)
    py.close()
    assert s.stop() == 0
    wait_for(lambda: metric(d, "crescent_segments_segments") == 0, "segment unmounted")
    assert metric(d, "crescent_segments_file_tier_replicas") == recorded
    py = PyStore()
    assert py.setup("localhost", "", 0, 0, "tcp", "", master) == 0
    on_file = [k for k in keys if py.is_exist(k) == 1]
    assert len(on_file) == recorded
    assert all(py.get(k) == values[k] for k in on_file)
    py.close()


def test_a_bad_buffer_bound_is_refused_with_its_name(cluster, tmp_path):
    start, store, rpc, root = cluster
    d = start()
    store()
    wait_for(lambda: metric(d, "crescent_segments_segments") == 1, "segment mounted")
    (tmp_path / "in.bin").write_bytes(b"z" * 100)
    env = dict(os.environ, CRESCENT_ROOT_FS_DIR=str(root), CRESCENT_FILE_TIER_BUFFER_BYTES="1M")
    p = subprocess.run([binary("crescentctl"), "--rpc", rpc, "put", "k", str(tmp_path / "in.bin")],
                       capture_output=True, timeout=120, env=env)
    assert p.returncode != 0 and b"CRESCENT_FILE_TIER_BUFFER_BYTES" in p.stderr, p.stderr
