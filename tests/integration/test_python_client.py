"""The Python client (python/crescent, ctypes over libcrescent.so) against a
real crescentd: each Store call checked against crescentctl's view of the
store, errors as exceptions carrying the server's reason, and the Indexer's
register / query / route against a simulated vLLM publisher."""
import ctypes
import os
import subprocess
import sys
import uuid

import pytest

from conftest import BIN_DIR, binary, free_port, wait_for
import kv_publishers as kp

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
os.environ.setdefault("CRESCENT_LIB", os.path.join(BIN_DIR, "..", "lib", "libcrescent.so"))
import crescent  # noqa: E402
from crescent import CrescentError, Indexer, IndexerError, Store  # noqa: E402

BS = 16


@pytest.fixture
def store(daemon):
    rpc_port = free_port()
    d = daemon("--rpc-address", f"tcp://127.0.0.1:{rpc_port}", "--client-ttl", "3600",
               "--default-kv-lease-ttl", "60000")
    owner = str(uuid.uuid4())
    env = (d, f"tcp://127.0.0.1:{rpc_port}")
    rc, _, err = ctl(env, "mount", "seg0", "64M", "--endpoint", "127.0.0.1:7000",
                     "--client-id", owner)
    assert rc == 0, err
    return d, rpc_port


def ctl(store, *args):
    d, rpc = store
    if isinstance(rpc, int):
        rpc = f"tcp://127.0.0.1:{rpc}"
    p = subprocess.run([binary("crescentctl"), "--rpc", rpc, "--http", f"127.0.0.1:{d.port}",
                        *args], capture_output=True, text=True, timeout=30)
    return p.returncode, p.stdout, p.stderr


def ctl_exists(store, key, tenant=None):
    extra = ["--tenant", tenant] if tenant else []
    rc, _, err = ctl(store, "exist", key, *extra)
    assert rc in (0, 1), err
    return rc == 0


def ctl_keys(store, tenant=None):
    extra = ["--tenant", tenant] if tenant else []
    rc, out, err = ctl(store, "ls", *extra)
    assert rc == 0, err
    return out


def open_store(store, **kw):
    _, rpc_port = store
    s = Store()
    # Mooncake's "host:port" form of the master address.
    assert s.setup("localhost", "", 0, 0, "tcp", "", f"127.0.0.1:{rpc_port}", **kw) == 0
    return s


def put(s, key, size=4096):
    replicas = s.put_start(key, size)
    assert s.put_end(key) == 0
    return replicas


def test_put_is_exist_get_replica_list(store):
    with open_store(store) as s:
        replicas = put(s, "k1")
        assert len(replicas) == 1 and replicas[0]["handles"][0]["segment_name"] == "seg0"
        assert ctl_exists(store, "k1")
        assert s.is_exist("k1") == 1 and s.is_exist("missing") == 0
        assert s.batch_is_exist(["k1", "missing"]) == [1, 0]
        got = s.get_replica_list("k1")
        rc, out, _ = ctl(store, "replicas", "k1")
        assert rc == 0
        handle = got[0]["handles"][0]
        assert handle["size"] == 4096 and handle["transport_endpoint"] == "127.0.0.1:7000"
        assert f"{handle['buffer']:#x}" in out or str(handle["buffer"]) in out, out
        assert "seg0" in out and "4096" in out


def test_remove_forms_match_crescentctl(store):
    with open_store(store) as s:
        for k in ("a1", "a2", "b1", "b2", "c1"):
            put(s, k)
        assert s.remove("c1") == 0
        assert not ctl_exists(store, "c1")
        with pytest.raises(CrescentError) as e:
            s.remove("c1")
        assert e.value.name == "OBJECT_NOT_FOUND" and e.value.status == -704
        assert "not found" in e.value.reason
        assert s.batch_remove(["b1", "nope"]) == [0, -704]
        assert not ctl_exists(store, "b1") and ctl_exists(store, "b2")
        assert s.remove_by_regex("^a") == 2
        assert not ctl_exists(store, "a1") and not ctl_exists(store, "a2")
        assert ctl_keys(store).count("b2") == 1


def test_lease_refusal_carries_the_reason_and_force_works(store):
    with open_store(store) as s:
        put(s, "leased")
        s.get_replica_list("leased")  # takes a 60 s lease
        with pytest.raises(CrescentError) as e:
            s.remove("leased")
        assert e.value.name == "OBJECT_HAS_LEASE" and "lease" in str(e.value)
        assert ctl_exists(store, "leased")
        assert s.remove("leased", force=True) == 0
        assert not ctl_exists(store, "leased")


def test_tenants_and_remove_all(store):
    with open_store(store, tenant="ta") as a, open_store(store) as default:
        put(a, "shared-name")
        put(default, "shared-name")
        put(default, "other")
        assert ctl_exists(store, "shared-name", tenant="ta")
        assert a.is_exist("other") == 0
        # crescentctl exist took a 60 s lease: without force the object stays.
        assert a.remove_all() == 0
        assert a.remove_all(force=True) == 1
        assert not ctl_exists(store, "shared-name", tenant="ta")
        assert ctl_exists(store, "shared-name") and ctl_exists(store, "other")
        assert default.remove_all(force=True) == 2
        assert "shared-name" not in ctl_keys(store)


def test_two_phase_put_ownership(store):
    with open_store(store) as writer, open_store(store) as other:
        writer.put_start("owned", 4096)
        assert not ctl_exists(store, "owned")  # not ended yet
        with pytest.raises(CrescentError) as e:
            other.put_end("owned")
        assert e.value.name == "ILLEGAL_CLIENT"
        assert writer.put_revoke("owned") == 0
        with pytest.raises(CrescentError) as e:
            writer.put_end("owned")
        assert e.value.name == "OBJECT_NOT_FOUND"
    fixed = str(uuid.uuid4())
    with open_store(store, client_id=fixed) as s:
        assert s.client_id == fixed
        assert s.ping() == 3600 * 1000


def test_refusals_and_unreachable(store):
    with open_store(store) as s:
        with pytest.raises(CrescentError) as e:
            s.put_start("huge", 1 << 40)
        assert e.value.name == "NO_AVAILABLE_HANDLE"
        # Larger than every segment: said so, and nothing is evicted for it
        # (an eviction here once removed "dup" below under load).
        assert "can never fit" in str(e.value)
        put(s, "dup")
        with pytest.raises(CrescentError) as e:
            s.put_start("dup", 10)
        assert e.value.name == "OBJECT_ALREADY_EXISTS"
        with pytest.raises(CrescentError) as e:
            s.remove_by_regex("(")
        assert e.value.name == "INVALID_PARAMS"
    s = Store()
    with pytest.raises(CrescentError) as e:
        s.setup(master_server_address=f"127.0.0.1:{free_port()}", timeout_ms=200)
    # refused at once, as over the native endpoint (not after the timeout)
    assert e.value.name == "RPC_FAIL" and "nothing accepts connections" in str(e.value)
    with pytest.raises(CrescentError):
        s.is_exist("k")  # a failed setup leaves the Store usable only after setup
    with pytest.raises(ValueError):
        Store().setup(global_segment_size=1 << 20)


def test_indexer_register_query_route(store):
    d, _ = store
    ix = Indexer(f"127.0.0.1:{d.port}")
    pub = kp.Publisher()
    try:
        answer = ix.register("vllm-py", pub.endpoint, "m", BS,
                             replay_endpoint=pub.replay_endpoint)
        assert answer["instance_id"] == "vllm-py"
        services = ix.services()["services"]
        assert [x["instance_id"] for x in services if x["instance_id"] == "vllm-py"]
        tokens = list(range(100, 100 + 4 * BS))

        def sent_and_applied():
            svc = [x for x in ix.services()["services"] if x["instance_id"] == "vllm-py"]
            return svc and svc[0]["last_seq"] == 0

        # The SUB connects in the background: resend until the indexer has it
        # (a lost first batch is recovered by replay, seq 0 either way).
        pub.send(kp.batch([kp.vllm_stored([1, 2, 3, 4], None, tokens, BS)]))
        wait_for(sent_and_applied, "the indexer to apply the publisher's batch")
        hit = ix.query("m", BS, tokens)
        assert hit["default"]["vllm-py"]["longest_matched"] == 4 * BS
        assert ix.query("m", BS, [7] * BS) == {}
        assert ix.route("m", BS, tokens)["instance_id"] == "vllm-py"
        seq = kp.seq_hashes(tokens, BS)
        by_hash = ix.query_by_hash(seq[:2], model="m", block_size=BS)
        assert by_hash["default"]["vllm-py"]["longest_matched"] == 2 * BS
        with pytest.raises(IndexerError) as e:
            ix.register("bad", pub.endpoint, "m", 0)
        assert e.value.status == 400 and "block_size" in e.value.detail
        assert ix.unregister("vllm-py")["removed_instances"] == ["vllm-py|default|0"]
        with pytest.raises(IndexerError) as e:
            ix.unregister("vllm-py")
        assert e.value.status == 404
    finally:
        pub.close()


def test_pip_install_target(tmp_path):
    """`pip install ./python` works with Debian's pip and setuptools, no registry."""
    root = os.path.join(os.path.dirname(__file__), "..", "..", "python")
    src = tmp_path / "src"
    subprocess.run(["cp", "-r", root, str(src)], check=True)  # keep build/ out of the checkout
    p = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index",
                        "--no-build-isolation", "--target", str(tmp_path / "site"), str(src)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    p = subprocess.run([sys.executable, "-c", "import crescent; print(crescent.__file__)"],
                       capture_output=True, text=True, cwd=str(tmp_path),
                       env={**os.environ, "PYTHONPATH": str(tmp_path / "site")})
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(str(tmp_path / "site")), p.stdout
    assert crescent.Store is Store


LAYOUT_PROGRAM = r"""
#include <stddef.h>
#include <stdio.h>
#include "crescent/client.h"
#include "crescent/host.h"
#define S(t) printf("%s %zu\n", #t, sizeof(struct t))
#define O(t, f) printf("%s.%s %zu\n", #t, #f, offsetof(struct t, f))
int main(void) {
    S(cr_client_options); S(cr_buf_handle); S(cr_replica); S(cr_replica_list);
    S(cr_replica_lists); S(cr_status_list); S(cr_version); S(cr_replicate_config);
    S(cr_put_item); S(cr_put_data); S(cr_get_buffer);
    O(cr_put_data, status); O(cr_get_buffer, len); O(cr_get_buffer, status);
    O(cr_replica_list, replicas); O(cr_buf_handle, transport_endpoint);
    O(cr_put_item, config); O(cr_version, ready);
    S(cr_host_options); S(cr_host_stats); O(cr_host_options, rdma_devices);
    O(cr_host_options, timeout_ms); O(cr_host_stats, mounted);
    O(cr_host_options, serve_cpu); O(cr_host_options, heartbeat_arg);
    S(cr_read_latency); O(cr_read_latency, buckets);
    return 0;
}
"""


def layout_mismatches(tmp_path):
    """Where the ctypes structs differ from include/crescent/client.h, compiled by gcc."""
    from crescent import _lib
    include = os.path.join(os.path.dirname(__file__), "..", "..", "include")
    src = tmp_path / "layout.c"
    src.write_text(LAYOUT_PROGRAM)
    exe = tmp_path / "layout"
    subprocess.run(["gcc", "-std=gnu17", f"-I{include}", str(src), "-o", str(exe)], check=True)
    c = dict(line.split() for line in subprocess.check_output([str(exe)], text=True).splitlines())
    py = {"cr_client_options": ctypes.sizeof(_lib.Options),
          "cr_buf_handle": ctypes.sizeof(_lib.BufHandle),
          "cr_replica": ctypes.sizeof(_lib.Replica),
          "cr_replica_list": ctypes.sizeof(_lib.ReplicaList),
          "cr_replica_lists": ctypes.sizeof(_lib.ReplicaLists),
          "cr_status_list": ctypes.sizeof(_lib.StatusList),
          "cr_version": ctypes.sizeof(_lib.Version),
          "cr_replicate_config": ctypes.sizeof(_lib.ReplicateConfig),
          "cr_put_item": ctypes.sizeof(_lib.PutItem),
          "cr_put_data": ctypes.sizeof(_lib.PutData),
          "cr_get_buffer": ctypes.sizeof(_lib.GetBuffer),
          "cr_put_data.status": _lib.PutData.status.offset,
          "cr_get_buffer.len": _lib.GetBuffer.len.offset,
          "cr_get_buffer.status": _lib.GetBuffer.status.offset,
          "cr_replica_list.replicas": _lib.ReplicaList.replicas.offset,
          "cr_buf_handle.transport_endpoint": _lib.BufHandle.transport_endpoint.offset,
          "cr_put_item.config": _lib.PutItem.config.offset,
          "cr_version.ready": _lib.Version.ready.offset,
          "cr_host_options": ctypes.sizeof(_lib.HostOptions),
          "cr_host_stats": ctypes.sizeof(_lib.HostStats),
          "cr_host_options.rdma_devices": _lib.HostOptions.rdma_devices.offset,
          "cr_host_options.timeout_ms": _lib.HostOptions.timeout_ms.offset,
          "cr_host_stats.mounted": _lib.HostStats.mounted.offset,
          "cr_host_options.serve_cpu": _lib.HostOptions.serve_cpu.offset,
          "cr_host_options.heartbeat_arg": _lib.HostOptions.heartbeat_arg.offset,
          "cr_read_latency": ctypes.sizeof(_lib.ReadLatency),
          "cr_read_latency.buckets": _lib.ReadLatency.buckets.offset}
    return {name: (int(c[name]), value) for name, value in py.items() if int(c[name]) != value}


@pytest.fixture(scope="module", autouse=True)
def layouts_match(tmp_path_factory):
    """A field added to client.h and not to python/crescent/_lib.py makes
    libcrescent write past Python's struct (a crash, not a failure): check the
    layouts before any call."""
    wrong = layout_mismatches(tmp_path_factory.mktemp("layout"))
    if wrong:
        pytest.fail(f"ctypes layouts differ from client.h (C, Python): {wrong}")


def test_struct_layouts_match_the_header(tmp_path):
    assert layout_mismatches(tmp_path) == {}


# ---- values: the data plane, checked against crescentctl put/get -----------

@pytest.fixture
def data_store(daemon):
    """crescentd hosting its own local segment: Put/Get move real bytes."""
    rpc = f"tcp://127.0.0.1:{free_port()}"
    d = daemon("--rpc-address", rpc, "--local-segment-size", "64M")
    return d, rpc


def ctl_bytes(store, *args, stdin=None):
    d, rpc = store
    p = subprocess.run([binary("crescentctl"), "--rpc", rpc, "--timeout-ms", "10000", *args],
                       input=stdin, capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr.decode()
    return p.stdout


def open_data_store(store):
    s = Store()
    assert s.setup("localhost", "", 0, 0, "tcp", "", store[1]) == 0
    return s


def test_put_get_match_crescentctl(data_store):
    value = os.urandom(300_000) + b"\x00tail"
    with open_data_store(data_store) as s:
        assert s.put("py-key", value) == 0
        assert ctl_bytes(data_store, "get", "py-key", "-") == value
        ctl_bytes(data_store, "put", "ctl-key", "-", stdin=b"from\x00crescentctl")
        assert s.get("ctl-key") == b"from\x00crescentctl"
        assert s.get("py-key") == value
        assert s.put("mv-key", memoryview(bytearray(b"abc" * 1000))) == 0
        assert ctl_bytes(data_store, "get", "mv-key", "-") == b"abc" * 1000
        with pytest.raises(CrescentError) as e:
            s.get("missing")
        assert e.value.name == "OBJECT_NOT_FOUND" and "object not found" in e.value.reason
        # 0-byte objects, both ways, single and batch forms.
        assert s.put("empty", b"") == 0
        assert ctl_bytes(data_store, "get", "empty", "-") == b""
        ctl_bytes(data_store, "put", "ctl-empty", "-", stdin=b"")
        assert s.get("ctl-empty") == b"" and s.get("empty") == b""
        assert s.get_into("ctl-empty", bytearray(0)) == 0
        assert s.batch_put_from(["e1", "e2"], [b"", b"x"], [0, 1]) == [0, 0]
        assert s.batch_get_into(["e1", "e2"], [bytearray(0), bytearray(1)], [0, 1]) == [0, 1]


def test_get_into_writes_the_callers_buffer(data_store):
    value = os.urandom(65536)
    ctl_bytes(data_store, "put", "k", "-", stdin=value)
    with open_data_store(data_store) as s:
        buf = bytearray(100_000)
        assert s.register_buffer(buf) == 0
        assert s.get_into("k", buf) == len(value)
        assert bytes(buf[:len(value)]) == value
        assert s.unregister_buffer(buf) == 0
        with pytest.raises(CrescentError) as e:     # once only
            s.unregister_buffer(buf)
        assert e.value.name == "INVALID_PARAMS" and "is not registered" in str(e.value)
        assert s.get_into("k", buf) == len(value)   # plain memory still works (tcp, shm)
        view = memoryview(bytearray(len(value) + 1))[1:]  # an offset view: no copy either
        assert s.get_into("k", view) == len(value) and bytes(view) == value
        raw = ctypes.create_string_buffer(len(value))
        assert s.get_into("k", ctypes.addressof(raw), len(value)) == len(value)  # reference form
        assert raw.raw == value
        with pytest.raises(CrescentError) as e:
            s.get_into("k", bytearray(10))
        assert e.value.name == "INVALID_PARAMS"
        with pytest.raises(TypeError):
            s.get_into("k", bytes(len(value)))


def test_batch_put_from_and_batch_get_into(data_store):
    values = [os.urandom(n) for n in (1, 4096, 1 << 20)]
    srcs = [ctypes.create_string_buffer(v, len(v)) for v in values]
    keys = ["b0", "b1", "b2"]
    with open_data_store(data_store) as s:
        statuses = s.batch_put_from(keys, [ctypes.addressof(b) for b in srcs],
                                    [len(v) for v in values])
        assert statuses == [0, 0, 0]
        for key, v in zip(keys, values):
            assert ctl_bytes(data_store, "get", key, "-") == v
        ctl_bytes(data_store, "put", "c0", "-", stdin=b"ctl-bytes")
        dsts = [bytearray(len(v)) for v in values] + [bytearray(16), bytearray(16)]
        got = s.batch_get_into(keys + ["c0", "nope"], dsts, [len(d) for d in dsts])
        assert got[:4] == [1, 4096, 1 << 20, 9] and got[4] == -704
        assert [bytes(d) for d in dsts[:3]] == values and bytes(dsts[3][:9]) == b"ctl-bytes"
        assert s.batch_put_from(["b0", "b3"], [b"again", b"new"], [5, 3])[1] == 0
        assert ctl_bytes(data_store, "get", "b3", "-") == b"new"
        with pytest.raises(ValueError):
            s.batch_get_into(["x"], [], [])
