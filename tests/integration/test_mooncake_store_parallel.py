"""MooncakeDistributedStore's *_tensor_with_parallelism* forms, NUMA and host
memory helpers, setup_dummy and _get_pyclient_capsule
(python/crescent/mooncake_parallel.py, mooncake_extras.py) against a real
crescentd, beside the same calls through Mooncake's own module and master
(/work/shared/mooncake, built at 3b5a5941): the answers must be equal, the
stored objects (shards, manifests) byte for byte.  float32 only: the
reference's tensor code asks for torch.uint16 for other dtypes, which
Debian's torch 1.13 lacks."""
import pytest

from test_mooncake_store import master, peers, real_module, setup_engine  # noqa: F401

pytest.importorskip("torch")

# Writes by every route, with the objects they leave; reads by every target.
SCENARIO_PARALLEL = r"""
import torch
from mooncake.store import ParallelAxis, ReadTarget, ReplicateConfig, TensorParallelism
s = store
r = []
def tl(x):
    return None if x is None else x.tolist()
def axis(kind, rank, size, split_dim=None, expert_id=None, stage_id=None):
    a = ParallelAxis(); a.kind = kind; a.rank = rank; a.size = size
    if split_dim is not None: a.split_dim = split_dim
    if expert_id is not None: a.expert_id = expert_id
    if stage_id is not None: a.stage_id = stage_id
    return a
def par(*axes):
    p = TensorParallelism(); p.axes = list(axes); return p
def target(mode, p=None):
    t = ReadTarget(); t.mode = mode
    if p is not None: t.parallelism = p
    return t
class W:
    def __init__(self, rank, size, split_dim):
        self.rank, self.size, self.split_dim = rank, size, split_dim
ax = ParallelAxis()
r += [[ax.kind, ax.rank, ax.size, ax.split_dim, ax.expert_id, ax.stage_id],
      TensorParallelism().axes, ReadTarget().mode, ReadTarget().parallelism]
t0 = ReadTarget(); t0.mode = "FULL"; r += [t0.mode]
try:
    t0.mode = "bogus"; r += ["no error"]
except RuntimeError as e:
    r += [str(e)]
t = torch.arange(24, dtype=torch.float32).reshape(4, 6)
# direct (no request), writer partitions, TP only, TP + DP, DP only, EP, PP
r += [s.put_tensor_with_parallelism("d", t), s.get("d")]
r += [s.put_tensor_with_parallelism("w", t, writer_partition=W(0, 2, 0)),
      s.put_tensor_with_parallelism("w", t, None, ReplicateConfig(), W(1, 2, 0)),
      s.get("w__writer_0of2_sd0"), s.get("w__writer_1of2_sd0"), s.get("w__writer_manifest")]
r += [s.put_tensor_with_parallelism("tp", t[:, :3], par(axis("tp", 0, 2, 1))),
      s.put_tensor_with_parallelism("tp", t[:, 3:], par(axis("TP", 1, 2, 1))),
      s.get("tp_tp_0"), s.get("tp_tp_1"), s.get("tp__parallelism_manifest")]
r += [s.put_tensor_with_parallelism("m", t, par(axis("tp", 1, 2, 0), axis("dp", 0, 2))),
      s.put_tensor_with_parallelism("m", t, par(axis("dp", 0, 2), axis("tp", 0, 2, 0))),
      s.get("m__dp_0of2__tp_1of2_sd0"), s.get("m__dp_0of2__tp_0of2_sd0"),
      s.get("m__parallelism_manifest")]
r += [s.put_tensor_with_parallelism("g", t, par(axis("dp", 1, 2))), s.get("g__dp_1of2")]
r += [s.put_tensor_with_parallelism("e", t, par(axis("ep", 0, 4, expert_id=3),
                                                axis("pp", 1, 2, stage_id=1))),
      s.get("e__ep_0of4_eid3__pp_1of2_sid1")]
# refused requests
r += [s.put_tensor_with_parallelism("x", t, par(axis("tp", 0, 2))),
      s.put_tensor_with_parallelism("x", t, par(axis("dp", 0, 2, 0))),
      s.put_tensor_with_parallelism("x", t, par(axis("ep", 0, 2))),
      s.put_tensor_with_parallelism("x", t, par(axis("xx", 0, 2))),
      s.put_tensor_with_parallelism("x", t, par(axis("tp", 2, 2, 0))),
      s.put_tensor_with_parallelism("x", t, par(axis("tp", 0, 2, 0), axis("tp", 1, 2, 0))),
      s.put_tensor_with_parallelism("x", t, par()),
      s.put_tensor_with_parallelism("x", t, par(axis("tp", 0, 2, 0)), ReplicateConfig(), W(0, 2, 0)),
      s.put_tensor_with_parallelism("x", t, writer_partition=W(0, 5, 0)),
      s.put_tensor_with_parallelism("x", t, writer_partition=W(2, 2, 0)),
      s.put_tensor_with_parallelism("x", t, par(axis("tp", 0, 2, 4))),
      s.put_tensor_with_parallelism("x", t, par(axis("tp", 0, 5, 0), axis("dp", 0, 1))),
      s.is_exist("x")]
# reads
r += [tl(s.get_tensor_with_parallelism("d")), tl(s.get_tensor_with_parallelism("d", target("as_stored"))),
      tl(s.get_tensor_with_parallelism("w", target("full"))),
      tl(s.get_tensor_with_parallelism("tp", target("full", par(axis("tp", 0, 2, 1))))),
      tl(s.get_tensor_with_parallelism("tp", target("shard", par(axis("tp", 1, 2, 1))))),
      tl(s.get_tensor_with_parallelism("w", target("shard", par(axis("tp", 1, 2, 0))))),
      tl(s.get_tensor_with_parallelism("m", target("shard", par(axis("tp", 1, 2, 0),
                                                                 axis("dp", 0, 2))))),
      tl(s.get_tensor_with_parallelism("m", target("full", par(axis("dp", 0, 2),
                                                                axis("tp", 0, 2, 0))))),
      tl(s.get_tensor_with_parallelism("g", target("shard", par(axis("dp", 1, 2))))),
      tl(s.get_tensor_with_parallelism("g", target("shard", par(axis("dp", 0, 2))))),
      tl(s.get_tensor_with_parallelism("d", target("full"))),
      tl(s.get_tensor_with_parallelism("nokey", target("full", par(axis("tp", 0, 2, 0))))),
      tl(s.get_tensor_with_parallelism("tp", target("as_stored", par(axis("tp", 0, 2, 1))))),
      tl(s.get_tensor_with_parallelism("tp", target("shard", par(axis("tp", 0, 2, 0))))),
      tl(s.get_tensor_with_parallelism("tp", target("shard", par(axis("tp", 1, 3, 1))))),
      tl(s.get_tensor_with_parallelism("tp", target("shard", par(axis("tp", 3, 4, 1))))),
      tl(s.get_tensor_with_parallelism("w", target("shard", par(axis("tp", 1, 4, 0))))),
      tl(s.get_tensor_with_parallelism("w", target("shard", par(axis("tp", 1, 2, 1))))),
      tl(s.get_tensor_with_parallelism("m", target("shard", par(axis("tp", 1, 4, 0),
                                                                 axis("dp", 0, 2))))),
      tl(s.get_tensor_with_parallelism("w", target("full", par(axis("tp", 0, 2, 0))))),
      tl(s.get_tensor_with_parallelism("tp", target("full", par(axis("tp", 0, 3, 1))))),
      s.put_tensor_with_tp("lt", t, 0, 2, 1),
      tl(s.get_tensor_with_parallelism("lt", target("full", par(axis("tp", 0, 2, 1))))),
      tl(s.get_tensor_with_parallelism("lt", target("shard", par(axis("tp", 2, 3, 1)))))]
r += [[tl(x) for x in s.batch_get_tensor_with_parallelism(["d", "nokey"])],
      [tl(x) for x in s.batch_get_tensor_with_parallelism(
          ["w", "tp"], [target("full"), target("shard", par(axis("tp", 0, 2, 1)))])],
      [tl(x) for x in s.batch_get_tensor_with_parallelism(["w", "tp"], [target("full")])]]
# batch writes, _from, upserts, _into
r += [s.batch_put_tensor_with_parallelism(["b1", "b2"], [t, t * 2],
                                          [par(axis("dp", 0, 2)), par(axis("dp", 1, 2))]),
      s.get("b2__dp_1of2"),
      s.batch_put_tensor_with_parallelism(["b3", "b4"], [t, t], None, ReplicateConfig(),
                                          [W(0, 2, 1), W(1, 2, 1)]),
      s.get("b4__writer_1of2_sd1"),
      s.batch_put_tensor_with_parallelism(["b5"], [t, t]),
      s.batch_put_tensor_with_parallelism(["b6", "b7"], [t, t], [par(axis("dp", 0, 2))]),
      s.batch_put_tensor_with_parallelism(["b8"], [t], [par(axis("dp", 0, 2))], ReplicateConfig(), [W(0, 1, 0)])]
raw = s.get("d")
buf = ctypes.create_string_buffer(8192); bufs["par"] = buf
a = ctypes.addressof(buf)
ctypes.memmove(a, raw, len(raw))
r += [s.put_tensor_with_parallelism_from("f", a, len(raw), par(axis("tp", 0, 2, 0), axis("dp", 1, 2))),
      s.get("f__dp_1of2__tp_0of2_sd0"),
      s.put_tensor_with_parallelism_from("f2", a, len(raw), None, ReplicateConfig(), W(1, 3, 1)),
      s.get("f2__writer_1of3_sd1"), s.get("f2__writer_manifest"),
      s.put_tensor_with_parallelism_from("f3", a, 50),
      s.put_tensor_with_parallelism_from("f4", a, len(raw)), s.get("f4"),
      s.batch_put_tensor_with_parallelism_from(["f5", "f6"], [a, a], [len(raw), 50],
                                               [par(axis("dp", 0, 1)), par(axis("dp", 0, 1))])]
r += [s.upsert_tensor_with_parallelism("w", t * 3, writer_partition=W(0, 2, 0)),
      tl(s.get_tensor_with_parallelism("w", target("full"))),
      s.upsert_tensor_with_parallelism_from("g", a, len(raw), par(axis("dp", 1, 2))),
      s.batch_upsert_tensor_with_parallelism(["g"], [t * 4], [par(axis("dp", 1, 2))]),
      tl(s.get_tensor_with_parallelism("g", target("shard", par(axis("dp", 1, 2))))),
      s.batch_upsert_tensor_with_parallelism_from(["u1"], [a], [len(raw)], None, ReplicateConfig(),
                                                  [W(0, 1, 0)]),
      s.get("u1__writer_0of1_sd0")]
b = a + 4096
other = ctypes.create_string_buffer(4096); bufs["other"] = other
r += [tl(s.get_tensor_with_parallelism_into("w", ctypes.addressof(other), 4096, target("full"))),
      tl(s.get_tensor_with_parallelism_into("d", ctypes.addressof(other), 4096))]
r += [s.register_buffer(a, 8192)]
r += [tl(s.get_tensor_with_parallelism_into("w", b, 4096, target("full"))), bytes(buf[4096:4096 + 400]),
      tl(s.get_tensor_with_parallelism_into("w", b, 100, target("full"))),
      tl(s.get_tensor_with_parallelism_into("d", b, 4096)),
      tl(s.get_tensor_with_parallelism_into("nokey", b, 4096, target("full"))),
      [tl(x) for x in s.batch_get_tensor_with_parallelism_into(
          ["tp", "d"], [b, b + 2048], [2048, 2048],
          [target("shard", par(axis("tp", 1, 2, 1))), target("as_stored")])]]
result = r
"""

# The module's helpers and the store's dummy/capsule calls.
SCENARIO_HELPERS = r"""
import ctypes, time
from mooncake import store as module
r = []
al = module.MooncakeHostMemAllocator()
p = al.alloc(1 << 20)
ctypes.memset(p, 7, 1 << 20)
r += [p != 0, ctypes.string_at(p + (1 << 20) - 3, 3), al.free(p), al.free(p), al.free(12345)]
try:
    al.alloc(0); r += ["no error"]
except RuntimeError as e:
    r += [str(e)]
r += [module.bind_to_numa_node(0), module.bind_to_numa_node(7)]
fa, ff = module.get_alloc_func_addr(), module.get_free_func_addr()
r += [isinstance(fa, int) and fa != 0, isinstance(ff, int) and ff != 0, fa != ff]
fresh = module.MooncakeDistributedStore()
r += [fresh.setup_dummy(1 << 20, 1 << 20, "127.0.0.1:1"), store.alloc_from_mem_pool(1024)]
import torch
store.put_tensor("cuda_t", torch.arange(4.0))
r += [store.get_tensor_into_cuda("cuda_t", torch.empty(4)),
      store.batch_get_tensor_into_cuda(["cuda_t", "nokey"], [torch.empty(4), torch.empty(4)]),
      store.batch_get_tensor_into_cuda(["cuda_t"], [])]
import os, tempfile
path = os.path.join(tempfile.mkdtemp(), "t.safetensors")
r += [store.save_tensor_to_safetensor("nokey", path), store.save_tensor_to_safetensor("cuda_t", path),
      store.load_tensor_from_safetensor("x", path) is None, os.path.exists(path)]
result = r
"""


def _compare(mine, theirs):
    assert len(mine) == len(theirs)
    differ = [f"answer {i}: crescent {a!r} != reference {b!r}"
              for i, (a, b) in enumerate(zip(mine, theirs)) if a != b]
    assert not differ, "\n".join(differ)


@pytest.mark.parametrize("name", ["parallel", "helpers"])
def test_matches_the_real_module(master, peers, tmp_path, name):  # noqa: F811
    scenario = {"parallel": SCENARIO_PARALLEL, "helpers": SCENARIO_HELPERS}[name]
    with real_module(peers, tmp_path) as p:
        theirs = p.run(scenario)
    ours = peers()
    assert setup_engine(ours, master) == 0
    _compare(ours.run(scenario), theirs)


def test_parallel_scenario_alone(master, peers):  # noqa: F811
    """What the scenario must answer whether or not the reference is here:
    the shards rebuild the tensor, a bad request is -600."""
    p = peers()
    assert setup_engine(p, master) == 0
    r = p.run(SCENARIO_PARALLEL)
    full = [[float(6 * i + j) for j in range(6)] for i in range(4)]
    assert r[:4] == [["", 0, 1, None, None, None], [], "as_stored", None], r[:4]
    assert r[4:6] == ["full", "Unsupported ReadTarget mode"]
    assert r[6] == 0 and r[8:10] == [0, 0] and len(r[10]) == 304 + 48
    assert r[12][:4] == b"NAMW" and len(r[12]) == 96
    assert r[27:40] == [-600] * 12 + [0], r[27:40]
    reads = r[40:61]
    cols = lambda a, b: [row[a:b] for row in full]  # noqa: E731
    assert reads[:4] == [full] * 4
    assert reads[4] == cols(3, 6) and reads[5] == full[2:] and reads[6] == full[2:]
    assert reads[7] == full and reads[8] == full and reads[9] is None
    assert reads[10] == full and reads[11] is None and reads[12] is None
    assert reads[13] == cols(0, 3) and reads[14] == cols(2, 4)
    assert reads[15:18] == [None] * 3 and reads[18] == [full[1]]
    assert reads[19] is None and reads[20] == full


def test_capsule_is_refused_precisely(master, peers):  # noqa: F811
    p = peers()
    assert setup_engine(p, master) == 0
    r = p.run(r"""
try:
    store._get_pyclient_capsule(); result = ["no error"]
except NotImplementedError as e:
    result = [str(e)]
""")
    assert "libcrescent" in r[0], r


@pytest.mark.parametrize("two_threads", [False, True])
def test_batch_read_over_shm_checks_every_object(daemon, peers, two_threads):  # noqa: F811
    """A batch of 16 x 256 KiB read over shm from another engine's segment,
    where one object's bytes were changed after its put: that key fails
    (-801), every other reads whole; on the reading thread alone, and with
    CRESCENT_VERIFY_THREAD=1 (past CR_VERIFY_MIN_BYTES: the checksums split
    between the reading thread and a helper, src/client/client_verify.c)."""
    from conftest import free_port
    rpc_port = free_port()
    d = daemon("--rpc-address", f"tcp://127.0.0.1:{rpc_port}", "--default-kv-lease-ttl",
               "10000", "--client-ttl", "10")
    d.rpc = f"127.0.0.1:{rpc_port}"
    host = peers()
    reader = peers(env={"CRESCENT_VERIFY_THREAD": "1"} if two_threads else None)
    assert setup_engine(host, d) == 0 and setup_engine(reader, d) == 0
    name = host.call("get_hostname")
    blocks, bad = 16, 5
    host.run(f"""
from mooncake.store import ReplicateConfig
c = ReplicateConfig(); c.preferred_segment = {name!r}
data = [bytes([i]) * (256 << 10) for i in range({blocks})]
bufs["blocks"] = data
assert store.put_batch([f"v{{i}}" for i in range({blocks})], data, c) == 0
d = store.get_replica_desc("v{bad}")[0].get_memory_descriptor().buffer_descriptor
assert d.transport_endpoint == {name!r}
ctypes.memset(d.buffer_address + 1000, 0xEE, 1)   # the object's bytes, in this process
result = 0
""")
    got = reader.run(f"""
import hashlib
out = [ctypes.create_string_buffer(256 << 10) for _ in range({blocks})]
bufs["out"] = out
n = store.batch_get_into([f"v{{i}}" for i in range({blocks})],
                         [ctypes.addressof(b) for b in out], [256 << 10] * {blocks})
result = [n, [b.raw == bytes([i]) * (256 << 10) for i, b in enumerate(out)]]
""")
    want = [256 << 10] * blocks
    want[bad] = -801
    assert got[0] == want, got[0]
    assert all(ok for i, ok in enumerate(got[1]) if i != bad)
