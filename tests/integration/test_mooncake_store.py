"""crescent's MooncakeDistributedStore (python/crescent/mooncake_store.py)
against a real crescentd, imported as engines import Mooncake's
(`from mooncake.store import MooncakeDistributedStore`, python/compat on
PYTHONPATH), in engine processes that each host a segment of their own memory
(libcrescent's cr_host).

The return values are the reference's: REFERENCE below is what Mooncake's own
module (built at 3b5a5941, /work/shared/mooncake) printed for the same
scenario against its own master, and test_scenario_matches_the_real_module
reruns it there when that module is installed, so the two are compared side
by side, not only against a list written down once."""
import base64
import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import Daemon, free_port, http_get, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
COMPAT = os.path.join(ROOT, "python", "compat")
PYTHON = os.path.join(ROOT, "python")
REAL_MOONCAKE = os.environ.get("MOONCAKE_DIR", "/work/shared/mooncake")
MiB = 1 << 20

# One engine's calls; `result` is a list of what each call returned.
SCENARIO = r"""
import ctypes
from mooncake.store import ReplicateConfig
s = store
r = []
r += [s.put("k", b"x" * 1000), s.put("k", b"y" * 1000), s.get("k")[:2], len(s.get("k"))]
r += [s.get("nokey"), s.get_size("k"), s.get_size("nokey"), s.is_exist("k"),
      s.is_exist("nokey"), s.batch_is_exist(["k", "nokey"])]
buf = ctypes.create_string_buffer(4096)
bufs["scenario"] = buf
a = ctypes.addressof(buf)
r += [s.register_buffer(a, 4096), s.get_into("k", a, 4096), s.get_into("nokey", a, 4096),
      s.get_into("k", a, 10), s.batch_get_into(["k", "nokey"], [a, a + 2048], [2048, 2048])]
r += [s.put_from("pf", a, 100), s.put_from("pf", a, 100),
      s.batch_put_from(["b1", "pf"], [a, a], [10, 100])]
h = s.get_buffer("k")
r += [h.size(), len(h), bytes(memoryview(h))[:2], s.get_buffer("nokey")]
r += [[None if x is None else len(x) for x in s.batch_get_buffer(["k", "nokey"])]]
r += [s.put_parts("pp", b"ab", b"cd"), s.get("pp")]
r += [s.put_batch(["x1", "x2"], [b"1", b"22"]), s.get_batch(["x1", "x2", "nokey"])]
r += [s.batch_put_from_multi_buffers(["m1", "m2"], [[a, a + 10], [a]], [[10, 20], [5]]),
      s.batch_get_into_multi_buffers(["m1", "nokey"], [[a + 100, a + 110], [a]], [[10, 20], [5]])]
r += [s.health_check(), s.unregister_buffer(a), s.unregister_buffer(a)]
r += [s.remove("k"), s.remove("nokey"), s.remove("k", force=True)]
r += [s.batch_remove(["x1", "nokey"], force=True)]
r += [s.remove_by_regex("^x", force=True), s.remove_by_regex(regex_pattern="^nothing")]
r += [s.upsert("u", b"1"), s.upsert("u", b"22"), s.get("u")]
c = ReplicateConfig()
c.replica_num = 1
r += [s.put("cfg", b"abc", c), s.put("cfg2", b"abc", config=c), c.replica_num]
r += [s.remove_all(force=True), s.is_exist("u")]
result = r
"""

REFERENCE = [0, 0, b"xx", 1000,
             b"", 1000, -704, 1, 0, [1, 0],
             0, 1000, -704, -600, [1000, -704],
             0, 0, [0, 0],
             1000, 1000, b"xx", None,
             [1000, None],
             0, b"abcd",
             0, [b"1", b"22", b""],
             [0, 0], [30, -704],
             0, 0, -600,
             -706, -704, 0,
             [0, -704],
             1, 0,
             0, 0, b"22",
             0, 0, 1,
             8, 0]


class Peer:
    """An engine process (tests/integration/mooncake_peer.py)."""

    def __init__(self, pythonpath=None, env=None):
        environment = {"PATH": "/usr/bin:/bin", "PYTHONPATH": pythonpath or f"{COMPAT}:{PYTHON}",
                       "CRESCENT_LOG_LEVEL": "WARN", **(env or {})}
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "mooncake_peer.py")],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=environment, text=True)
        self.ready = self._read()

    def _read(self):
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"peer exited: {self.proc.stderr.read()[-3000:]}")
        answer = json.loads(line)
        if "error" in answer:
            raise AssertionError(answer["trace"])
        return _decode(answer["ok"])

    def call(self, method, *args, **kwargs):
        self.proc.stdin.write(json.dumps({"call": method, "args": _encode(list(args)),
                                          "kwargs": _encode(kwargs)}) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def run(self, code):
        self.proc.stdin.write(json.dumps({"exec": code}) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def exit(self, sig=None, timeout=20):
        if sig is not None:
            self.proc.send_signal(sig)
        else:
            self.proc.stdin.close()
        self.proc.wait(timeout=timeout)
        return self.proc.returncode


def _encode(value):
    if isinstance(value, bytes):
        return {"b64": base64.b64encode(value).decode()}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items()}
    return value


def _decode(value):
    if isinstance(value, dict) and set(value) == {"b64"}:
        return base64.b64decode(value["b64"])
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if isinstance(value, dict):
        return {k: _decode(v) for k, v in value.items()}
    return value


def start_master(daemon, lease_ms, client_ttl_s):
    rpc_port = free_port()
    d = daemon("--rpc-address", f"tcp://127.0.0.1:{rpc_port}", "--default-kv-lease-ttl",
               str(lease_ms), "--client-ttl", str(client_ttl_s))
    d.rpc = f"127.0.0.1:{rpc_port}"
    return d


@pytest.fixture
def master(daemon):
    """crescentd without a local segment: every byte lives in the engines'.
    Its 500 ms lease is the reference master's in the side-by-side tests,
    which wait it out."""
    return start_master(daemon, 500, 2)


@pytest.fixture
def roomy_master(daemon):
    """As `master`, with leases and a client TTL that a loaded machine cannot
    outrun between a call and the next (a 500 ms lease ran out inside one
    batch_get_into of 8 MiB with load 30 on two cores)."""
    return start_master(daemon, 10000, 10)


@pytest.fixture
def peers():
    started = []

    def start(**kw):
        p = Peer(**kw)
        started.append(p)
        return p

    yield start
    for p in started:
        if p.proc.poll() is None:
            p.proc.kill()
            p.proc.wait()


def segments(d):
    status, body = http_get(d.port, "/api/v1/segments")
    assert status == 200, body
    return {s["name"]: s for s in json.loads(body)["segments"]}


def setup_engine(peer, d, size=32 * MiB, **kw):
    return peer.call("setup", "127.0.0.1", "P2PHANDSHAKE", size, 16 * MiB, "tcp", "", d.rpc, **kw)


def test_scenario_returns_the_reference_values(master, peers):
    p = peers()
    assert p.ready.endswith(os.path.join("compat", "mooncake", "store.py"))
    assert setup_engine(p, master) == 0
    assert p.run(SCENARIO) == REFERENCE


@contextlib.contextmanager
def real_module(peers, tmp_path):
    """An engine process on Mooncake's own module, set up against its own
    mooncake_master (started here, stopped after); skips when it is not here."""
    binary = os.path.join(REAL_MOONCAKE, "bin", "mooncake_master")
    if not os.access(binary, os.X_OK):
        pytest.skip(f"Mooncake's real module is not at {REAL_MOONCAKE} (MOONCAKE_DIR)")
    rpc, http = free_port(), free_port()
    log = open(tmp_path / "master.log", "w")
    real = subprocess.Popen([binary, "--rpc_port", str(rpc), "--metrics_port", "0",
                             "--enable_http_metadata_server=true", "--http_metadata_server_port",
                             str(http), "--http_metadata_server_host", "127.0.0.1",
                             "--rpc_address", "127.0.0.1", "--default_kv_lease_ttl", "500"],
                            stdout=log, stderr=log)
    try:
        time.sleep(1.5)
        try:
            p = peers(pythonpath=REAL_MOONCAKE)
        except AssertionError as e:
            pytest.skip(f"Mooncake's real module does not import here: {e}")
        assert p.call("setup", "127.0.0.1", f"http://127.0.0.1:{http}/metadata", 32 * MiB,
                      16 * MiB, "tcp", "", f"127.0.0.1:{rpc}") == 0
        yield p
    finally:
        real.terminate()
        real.wait(timeout=10)


def test_scenario_matches_the_real_module(master, peers, tmp_path):
    """The same scenario through Mooncake's own module and master, when here."""
    with real_module(peers, tmp_path) as p:
        theirs = p.run(SCENARIO)
    ours = peers()
    assert setup_engine(ours, master) == 0
    assert ours.run(SCENARIO) == theirs


def test_setup_forms(master, peers):
    p = peers()
    assert p.call("health_check") == 1                       # not set up
    assert p.call("setup", {"local_hostname": "127.0.0.1"}) == -600   # metadata_server missing
    assert p.call("setup", {"local_hostname": "127.0.0.1", "metadata_server": "P2PHANDSHAKE",
                            "global_segment_size": "8MB", "local_buffer_size": 1 * MiB,
                            "master_server_addr": master.rpc, "protocol": "tcp"}) == 0
    assert p.call("get_hostname").startswith("127.0.0.1:")
    assert p.call("health_check") == 0
    assert p.call("close") == 0
    # the dict exactly as vLLM v1's MooncakeStoreWorker builds it (sizes as text)
    assert p.call("setup", {"local_hostname": "127.0.0.1", "metadata_server": "P2PHANDSHAKE",
                            "global_segment_size": str(8 * MiB),
                            "local_buffer_size": str(1 * MiB), "protocol": "tcp",
                            "rdma_devices": "", "master_server_addr": master.rpc,
                            "enable_offload": "true"}) == 0
    assert len(segments(master)) == 1
    assert p.run("result = store.host_stats()")  # one segment, mounted
    assert p.call("close") == 0 and p.call("health_check") == 1
    # keywords as Mooncake names them
    assert p.call("setup", local_hostname="127.0.0.1", metadata_server="P2PHANDSHAKE",
                  global_segment_size=0, local_buffer_size=0, protocol="tcp",
                  rdma_devices="", master_server_addr=master.rpc) == 0
    assert p.call("get_hostname") == "127.0.0.1"             # hosts nothing
    assert p.call("close") == 0
    # an unreachable master: a negative code, not an exception
    assert p.call("setup", "127.0.0.1", "P2PHANDSHAKE", 0, 0, "tcp", "",
                  f"127.0.0.1:{free_port()}", timeout_ms=300) < 0
    assert p.run("result = store.setup({'local_hostname': '127.0.0.1', 'metadata_server': 'x', "
                 f"'master_server_addr': '127.0.0.1:{free_port()}', 'timeout_ms': 300}})") < 0


def test_two_engines_each_host_a_segment(roomy_master, peers):
    """Prefill stores tensors in the pool, decode reads them back bitwise;
    each process's memory is a segment; close unmounts it."""
    prefill, decode = peers(), peers()
    assert setup_engine(prefill, roomy_master) == 0 and setup_engine(decode, roomy_master) == 0
    names = {prefill.call("get_hostname"), decode.call("get_hostname")}
    assert set(segments(roomy_master)) == names
    blocks = 32
    prefill.run(f"""
import torch
torch.manual_seed(7)
ts = [torch.randn(64, 1024) for _ in range({blocks})]   # 256 KiB each
bufs["ts"] = ts
result = store.batch_put_from([f"blk{{i}}" for i in range({blocks})],
                              [t.data_ptr() for t in ts], [t.numel() * 4 for t in ts])
""")
    used = sum(s["used_bytes"] for s in segments(roomy_master).values())
    assert used >= blocks * 256 * 1024
    got = decode.run(f"""
import torch, hashlib
out = [torch.empty(64, 1024) for _ in range({blocks})]
n = store.batch_get_into([f"blk{{i}}" for i in range({blocks})],
                         [t.data_ptr() for t in out], [t.numel() * 4 for t in out])
result = [n, [hashlib.sha256(t.numpy().tobytes()).hexdigest() for t in out]]
""")
    sent = prefill.run("import hashlib\nresult = [hashlib.sha256(t.numpy().tobytes()).hexdigest()"
                       " for t in bufs['ts']]")
    assert got[0] == [256 * 1024] * blocks
    assert got[1] == sent
    # tensors through the reference's tensor helpers
    assert prefill.run("import torch\nresult = store.put_tensor('t', torch.arange(10.0))") == 0
    assert decode.run("result = store.get_tensor('t').tolist()") == [float(i) for i in range(10)]
    assert decode.run("result = store.get_tensor('nope')") is None
    # prefill leaves: its segment goes, and objects stored only there with it
    assert prefill.call("close") == 0
    assert set(segments(roomy_master)) == {decode.call("get_hostname")}
    lost = decode.call("batch_is_exist", [f"blk{i}" for i in range(blocks)])
    assert all(x in (0, 1) for x in lost)
    for i, there in enumerate(lost):
        if there:  # a block that lived in decode's own segment is still whole
            assert len(decode.call("get", f"blk{i}")) == 256 * 1024
        else:
            assert decode.call("get", f"blk{i}") == b""


def test_master_restart_remounts_and_puts_work_again(daemon, peers):
    rpc_port = free_port()
    args = ["--rpc-address", f"tcp://127.0.0.1:{rpc_port}", "--client-ttl", "2"]
    d = daemon(*args)
    d.rpc = f"127.0.0.1:{rpc_port}"
    p = peers()
    assert setup_engine(p, d) == 0
    assert p.call("put", "before", b"1" * 100) == 0
    d.stop()
    assert p.call("health_check") == 2                       # master unreachable
    # the same addresses again (the fixture's ports are in d.args)
    again = Daemon.__new__(Daemon)
    Daemon.__init__(again, [a for a in d.args[d.args.index("--no-pin") + 1:]])
    try:
        wait_for(lambda: p.run("result = list(store.host_stats().values())[0]['remounts']") >= 1,
                 "the engine's segment to be remounted")
        assert set(segments(again)) == {p.call("get_hostname")}
        assert p.call("health_check") == 0
        assert p.call("get", "before") == b""                # the old master's objects are gone
        assert p.call("put", "after", b"2" * 100) == 0
        assert p.call("get", "after") == b"2" * 100
    finally:
        again.stop()


def test_exit_and_kill_unmount(master, peers):
    """An engine that exits without close unmounts at exit; one killed -9
    loses its segment after the master's client TTL (2 s here)."""
    a, b = peers(), peers()
    assert setup_engine(a, master) == 0 and setup_engine(b, master) == 0
    name_b = b.call("get_hostname")
    assert a.exit() == 0                                       # stdin closed: interpreter exits
    assert set(segments(master)) == {name_b}                   # unmounted at exit, not by TTL
    b.exit(signal.SIGKILL)
    wait_for(lambda: not segments(master), "the killed engine's segment to expire", timeout=30)


def test_remove_under_lease_and_duplicate_put(daemon, peers):
    # A 3 s lease: the remove right after the get must still find it (a
    # loaded machine can take more than 500 ms between the two calls).
    master = start_master(daemon, 3000, 2)
    p, q = peers(), peers()
    assert setup_engine(p, master) == 0 and setup_engine(q, master, size=0) == 0
    assert p.call("put", "k", b"a" * 4096) == 0
    assert q.call("put", "k", b"b" * 4096) == 0                # duplicate: success, first kept
    assert q.call("get", "k") == b"a" * 4096                   # takes a 3 s lease
    assert p.call("remove", "k") == -706
    wait_for(lambda: p.call("remove", "k") == 0, "the lease to expire", timeout=20)
    assert q.call("is_exist", "k") == 0 and q.call("get", "k") == b""


C_HOST_PROGRAM = r"""
#include <stdio.h>
#include <string.h>
#include "crescent/host.h"
int main(int argc, char **argv) {
    struct cr_host_options o = {.master = argv[1], .segment_size = 8u << 20,
                                .segment_name = "c-engine", .no_verbs = true,
                                .ping_interval_ms = 100};
    cr_host *h;
    char error[256];
    int rc = cr_host_start(&o, &h, error, sizeof(error));
    if (rc != CR_OK) { fprintf(stderr, "start: %d %s\n", rc, error); return 1; }
    printf("%s %s %s %llu\n", cr_host_segment_name(h), cr_host_endpoint(h), cr_host_protocol(h),
           (unsigned long long)cr_host_size(h));
    fflush(stdout);
    char line[16];
    if (fgets(line, sizeof(line), stdin) == NULL) return 2;   /* the test says when */
    struct cr_host_stats st;
    cr_host_get_stats(h, &st);
    printf("%llu %d\n", (unsigned long long)st.pings, st.mounted);
    return cr_host_stop(h) == CR_OK ? 0 : 3;
}
"""


def test_c_api_hosts_a_segment(master, tmp_path):
    """include/crescent/host.h for C and C++ engines: start mounts, stop unmounts."""
    src, exe = tmp_path / "host.c", tmp_path / "host"
    src.write_text(C_HOST_PROGRAM)
    lib = os.path.join(ROOT, "zig-out", "lib")
    subprocess.run(["gcc", "-std=gnu17", "-Wall", "-Werror", f"-I{ROOT}/include", str(src),
                    f"-L{lib}", f"-Wl,-rpath,{lib}", "-lcrescent", "-o", str(exe)], check=True)
    proc = subprocess.Popen([str(exe), f"tcp://{master.rpc}"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    name, endpoint, protocol, size = proc.stdout.readline().split()
    assert (name, protocol, int(size)) == ("c-engine", "tcp", 8 << 20)
    seg = segments(master)["c-engine"]
    assert (seg["endpoint"], seg["size"]) == (endpoint, 8 << 20)
    time.sleep(0.5)                                        # a few keep-alive pings
    out, err = proc.communicate("stop\n", timeout=20)
    pings, mounted = out.split()
    assert int(pings) >= 2 and mounted == "1", err
    assert proc.returncode == 0, err
    assert segments(master) == {}
