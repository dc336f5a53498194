"""MooncakeDistributedStore's replica, task, metadata and tensor-parallel calls
(python/crescent/mooncake_replicas.py, mooncake_tp.py) against a real
crescentd, beside the same calls through Mooncake's own module and master
(/work/shared/mooncake, built at 3b5a5941): the answers must be equal, shard
objects byte for byte.

Where this environment's reference cannot answer (its tensor code needs
torch.uint16, which Debian's torch 1.13 lacks, for any dtype but float32),
the scenarios use float32 and the other dtypes are checked against a
round trip only."""
import time

import pytest

from test_mooncake_store import master, peers, real_module, setup_engine  # noqa: F401

pytest.importorskip("torch")

# Replica descriptors, replica clearing and put_from_with_metadata.
SCENARIO_REPLICAS = r"""
import time
from mooncake.store import ReplicaStatus
s = store
r = []
buf = ctypes.create_string_buffer(4096); bufs["meta"] = buf
a = ctypes.addressof(buf)
m = ctypes.create_string_buffer(b"META", 4); bufs["m"] = m
ma = ctypes.addressof(m)
ctypes.memmove(a, b"hello", 5)
r += [s.put_from_with_metadata("wm", a, ma, 5, 4), s.get("wm")]
r += [s.put_from_with_metadata("wm", a, ma, 5, 4), s.get("wm")]
r += [s.put_from_with_metadata("wm0", a, ma, 0, 4), s.get("wm0")]
def desc(d):
    md = d.get_memory_descriptor().buffer_descriptor
    return [d.is_memory_replica(), d.is_disk_replica(), d.is_local_disk_replica(),
            str(d.status), int(d.status), md.size]
r += [[desc(d) for d in s.get_replica_desc("wm")], s.get_replica_desc("nokey")]
batch = s.batch_get_replica_desc(["wm", "nokey"])
r += [sorted(batch), [desc(d) for d in batch["wm"]]]
try:
    s.get_replica_desc("wm")[0].get_disk_descriptor()
    r += ["no error"]
except Exception as e:
    r += ["raised"]
r += [s.batch_replica_clear(["wm", "nokey"])]     # under the lease: nothing cleared
s.put("k2", b"abc")
time.sleep(0.8)
r += [s.batch_replica_clear(["k2"], "nosuch"), s.is_exist("k2")]
r += [s.batch_replica_clear(["wm", "nokey"]), s.is_exist("wm")]
r += [s.query_task((1, 2))]
tid, rc = s.create_copy_task("nokey", ["x"]); r += [list(tid), rc]
result = r
"""

# Tensor-parallel writes and reads; shard objects compared byte for byte.
SCENARIO_TP = r"""
import torch
s = store
r = []
t = torch.arange(24, dtype=torch.float32).reshape(4, 6)
def tl(x):
    return None if x is None else x.tolist()
r += [s.put_tensor_with_tp("t", t, 0, 2, 0), s.is_exist("t"), s.get("t_tp_0"), s.get("t_tp_1")]
r += [tl(s.get_tensor_with_tp("t", 1, 2, 0)), tl(s.get_tensor_with_tp("t", 0, 1, 0)),
      tl(s.get_tensor_with_tp("t", 2, 2, 0)), tl(s.get_tensor_with_tp("t", 1, 4, 1)),
      tl(s.get_tensor("t_tp_1"))]
r += [s.put_tensor_with_tp("w", t, 3, 3, 1), [s.get(f"w_tp_{i}") for i in range(3)]]
r += [s.put_tensor_with_tp("u", t, 0, 4, 1), s.is_exist("u_tp_0")]
r += [s.put_tensor_with_tp("neg", t, 0, 2, -1), s.put_tensor_with_tp("bad", t, 0, 2, 5)]
r += [s.put_tensor_with_tp("z", t, 0, 0, 0), s.get("z"), s.is_exist("z_tp_0")]
r += [s.put_tensor_with_tp("o", t, 0, 1, 0), s.get("o")]
r += [s.put_tensor_with_tp("f1", torch.arange(8, dtype=torch.float32), 0, 4, 0),
      s.get("f1_tp_3")]
d3 = torch.arange(24.).reshape(2, 3, 4)
r += [s.put_tensor_with_tp("d3", d3, 0, 3, 1), s.get("d3_tp_2")]
r += [s.put_tensor_with_tp("e", torch.empty(0, 4), 0, 2, 0), s.get("e_tp_1")]
r += [s.put_tensor_with_tp("nc", t.t(), 0, 2, 0), s.get("nc_tp_1")]
r += [s.put_tensor_with_tp("t", t * 5, 0, 2, 0), tl(s.get_tensor_with_tp("t", 0, 2, 0))]
r += [s.batch_put_tensor_with_tp(["b1", "b2"], [t, t * 2], 0, 2, 0),
      [tl(x) for x in s.batch_get_tensor_with_tp(["b1", "b2", "nokey"], 1, 2)]]
r += [s.batch_put_tensor_with_tp(["a"], [t, t], 0, 2, 0)]
from mooncake.store import ReplicateConfig
r += [s.pub_tensor_with_tp("pp", t, ReplicateConfig(), 0, 2, 0), s.get("pp_tp_0"),
      s.batch_pub_tensor_with_tp(["bp"], [t], ReplicateConfig(), 0, 2, 0)]
buf = ctypes.create_string_buffer(4096); bufs["tp"] = buf
a = ctypes.addressof(buf)
r += [tl(s.get_tensor_with_tp_into("t", a, 4096, 1, 2, 0)),
      s.get_tensor_with_tp_into("t", a, 100, 1, 2, 0),
      s.get_tensor_with_tp_into("nokey", a, 4096, 1, 2, 0)]
r += [[tl(x) for x in s.batch_get_tensor_with_tp_into(["t", "nokey"], [a, a + 2048],
                                                      [2048, 2048], 1, 2)]]
s.put_tensor("full", t)
raw = s.get("full")
ctypes.memmove(a, raw, len(raw))
r += [s.put_tensor_with_tp_from("tf", a, len(raw), 0, 2, 0), s.get("tf_tp_1"),
      s.put_tensor_with_tp_from("tf2", a, 50, 0, 2, 0),
      s.batch_put_tensor_with_tp_from(["tf3", "tf4"], [a, a], [len(raw), 50], 0, 2, 1)]
r += [tl(s.get_tensor_with_tp("full", 1, 2, 0)), tl(s.get_tensor_with_tp("full", 0, 1, 0))]
result = r
"""

# The tensor upsert and _from forms.
SCENARIO_UPSERT = r"""
import torch
s = store
r = []
t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
def tl(x):
    return None if x is None else x.tolist()
r += [s.put_tensor("a", t), s.upsert_pub_tensor("a", t * 2), tl(s.get_tensor("a"))]
r += [s.batch_upsert_tensor(["a", "b"], [t * 3, t]), tl(s.get_tensor("a")), tl(s.get_tensor("b"))]
r += [s.batch_upsert_pub_tensor(["c"], [t, t])]
from mooncake.store import ReplicateConfig
r += [s.batch_upsert_pub_tensor(["c"], [t * 4], ReplicateConfig()), tl(s.get_tensor("c"))]
raw = s.get("a")
buf = ctypes.create_string_buffer(4096); bufs["up"] = buf
a = ctypes.addressof(buf)
ctypes.memmove(a, raw, len(raw))
ctypes.memmove(a + 2048, b"not a tensor" * 30, 360)
r += [s.upsert_tensor_from("b", a, len(raw)), tl(s.get_tensor("b")),
      s.upsert_tensor_from("b", a + 2048, 360), tl(s.get_tensor("b"))]
r += [s.batch_upsert_tensor_from(["d", "e"], [a, a + 2048], [len(raw), 360]),
      tl(s.get_tensor("d")), s.is_exist("e")]
r += [s.batch_put_tensor_from(["f", "g", "a"], [a, a + 2048, a + 2048], [len(raw), 360, 360]),
      tl(s.get_tensor("f")), s.is_exist("g")]
r += [s.batch_put_tensor_from(["h"], [a, a], [len(raw), len(raw)])]
result = r
"""

# Put and get sessions, ranged reads.
SCENARIO_RANGES = r"""
s = store
r = []
buf = ctypes.create_string_buffer(1 << 16); bufs["ranges"] = buf
a = ctypes.addressof(buf)
s.register_buffer(a, 1 << 16)
ctypes.memmove(a, bytes(range(256)) * 4, 1024)
r += [s.batch_put_session_start(["p1", "p2", "p1"], [100, 50, 10])]
r += [s.is_exist("p1")]
r += [s.batch_put_from_multi_buffer_ranges(["p1", "p2", "nos"], [[a, a + 10], [a + 100], [a]],
                                           [[60, 40], [50], [5]], [[0, 60], [0], [0]])]
r += [s.batch_put_session_end(["p1", "p2", "nos"])]
r += [s.get("p1"), s.get("p2")]
r += [s.batch_put_session_start(["p1", "p3"], [100, 20])]
r += [s.batch_put_session_revoke(["p3", "nos"]), s.is_exist("p3")]
r += [s.batch_put_session_start(["p4"], [100]),
      s.batch_put_from_multi_buffer_ranges(["p4"], [[a]], [[10]], [[0]]),
      s.batch_put_session_end(["p4"]), s.get("p4")[:10], len(s.get("p4"))]
r += [s.batch_put_session_start(["p5"], [100]),
      s.batch_put_from_multi_buffer_ranges(["p5"], [[a]], [[10]], [[95]]),
      s.batch_put_session_revoke(["p5"]), s.is_exist("p5")]
r += [s.batch_get_session_start(["p1", "nokey", "p2"])]
b = a + 8192
r += [s.batch_get_into_multi_buffer_ranges(["p1", "nokey", "p2"], [[b, b + 100], [b], [b + 200]],
                                           [[10, 5], [4], [50]], [[0, 90], [0], [0]]),
      bytes(buf[8192:8202]), bytes(buf[8292:8297]), bytes(buf[8392:8442])]
r += [s.batch_get_into_multi_buffer_ranges(["p1"], [[b]], [[10]], [[95]])]
r += [s.batch_get_into_multi_buffer_ranges(["p4"], [[b]], [[4]], [[0]])]
r += [s.batch_get_session_end(["p1", "nokey", "p2"])]
c = a + 16384
r += [s.get_into_ranges([c, c + 1000], [["p1", "p2"], ["p1"]], [[[0, 10], [20]], [[0]]],
                        [[[0, 50], [0]], [[5]]], [[[5, 5], [10]], [[3]]]),
      bytes(buf[16384:16384 + 30]), bytes(buf[17384:17387])]
r += [s.get_into_ranges([c], [["nokey"]], [[[0]]], [[[0]]], [[[3]]])]
r += [s.get_into_ranges([c], [["p1"]], [[[0]]], [[[99]]], [[[3]]])]
result = r
"""


@pytest.mark.parametrize("name", ["replicas", "tp", "upsert", "ranges"])
def test_matches_the_real_module(master, peers, tmp_path, name):  # noqa: F811
    scenario = {"replicas": SCENARIO_REPLICAS, "tp": SCENARIO_TP, "upsert": SCENARIO_UPSERT,
                "ranges": SCENARIO_RANGES}[name]
    with real_module(peers, tmp_path) as p:
        theirs = p.run(scenario)
    ours = peers()
    assert setup_engine(ours, master) == 0
    mine = ours.run(scenario)
    assert len(mine) == len(theirs)
    differ = [f"answer {i}: crescent {a!r} != reference {b!r}"
              for i, (a, b) in enumerate(zip(mine, theirs)) if a != b]
    assert not differ, "\n".join(differ)


def test_replicas_scenario_alone(master, peers):  # noqa: F811
    """What the scenario must answer whether or not the reference is here."""
    p = peers()
    assert setup_engine(p, master) == 0
    r = p.run(SCENARIO_REPLICAS)
    assert r[0] == 0 and r[1] == b"METAhello" and r[3] == b"METAhello" and r[5] == b""
    assert r[6] == [[True, False, False, "ReplicaStatus.COMPLETE", 3, 9]] and r[7] == []
    assert r[8] == ["wm"] and r[10] == "raised"
    assert r[11] == [] and r[12] == [] and r[13] == 1
    assert r[14] == ["wm"] and r[15] == 0
    assert r[16] == [None, -1400] and r[17:] == [[0, 0], -704]


def test_tp_other_dtypes_round_trip(master, peers):  # noqa: F811
    p = peers()
    assert setup_engine(p, master) == 0
    r = p.run(r"""
import torch
s = store
out = []
for name, t, n, d in [("i64", torch.arange(8, dtype=torch.int64).reshape(2, 4), 2, 1),
                      ("bf16", torch.arange(8).reshape(4, 2).to(torch.bfloat16), 4, 0),
                      ("f16", torch.ones(2, 6, dtype=torch.float16), 3, 1)]:
    rc = s.put_tensor_with_tp(name, t, 0, n, d)
    parts = [s.get_tensor_with_tp(name, i, n, d) for i in range(n)]
    out.append([rc, all(x is not None for x in parts) and
                torch.equal(torch.cat(parts, d), t), str(parts[0].dtype)])
result = out
""")
    assert r == [[0, True, "torch.int64"], [0, True, "torch.bfloat16"],
                 [0, True, "torch.float16"]]


def test_copy_and_move_tasks_between_engines(master, peers):  # noqa: F811
    """create_copy_task / create_move_task / query_task between two engine
    processes hosting a segment each: the tasks run in the engines."""
    a, b = peers(), peers()
    assert setup_engine(a, master) == 0 and setup_engine(b, master) == 0
    name_a, name_b = a.call("get_hostname"), b.call("get_hostname")
    r = a.run(rf"""
import time
from mooncake.store import ReplicateConfig, TaskStatus
s = store
c = ReplicateConfig(); c.preferred_segment = {name_a!r}
out = [s.put("c", b"x" * 100000, c)]
def wait(tid):
    for _ in range(200):
        resp, rc = s.query_task(tid)
        if resp is not None and resp.status in (TaskStatus.SUCCESS, TaskStatus.FAILED):
            return [rc, str(resp.status), str(resp.type), resp.message]
        time.sleep(0.05)
    return ["timeout", str(resp.status) if resp else None]
tid, rc = s.create_copy_task("c", [{name_b!r}])
out += [rc, wait(tid)]
out += [sorted(d.get_memory_descriptor().buffer_descriptor.transport_endpoint
               for d in s.get_replica_desc("c"))]
tid, rc = s.create_copy_task("c", ["nosuch"])
out += [list(tid), rc]
result = out
""")
    assert r[0] == 0 and r[1] == 0, r
    assert r[2][:3] == [0, "TaskStatus.SUCCESS", "TaskType.REPLICA_COPY"], r
    assert r[3] == sorted([name_a, name_b]), r
    assert r[4:] == [[0, 0], -600], r
    # The copy on b holds the same bytes: b reads it after a's replica is gone.
    time.sleep(0.8)
    assert b.call("get", "c") == b"x" * 100000
    r = a.run(rf"""
s = store
out = [s.put("mv", b"y" * 5000, c)]
tid, rc = s.create_move_task("mv", {name_a!r}, "nosuch")
out += [rc]
tid, rc = s.create_move_task("mv", {name_a!r}, {name_b!r})
out += [rc, wait(tid)]
out += [[d.get_memory_descriptor().buffer_descriptor.transport_endpoint
         for d in s.get_replica_desc("mv")], s.get("mv") == b"y" * 5000]
result = out
""")
    assert r[0] == 0 and r[1] == -600 and r[2] == 0, r
    assert r[3][:3] == [0, "TaskStatus.SUCCESS", "TaskType.REPLICA_MOVE"], r
    assert r[4] == [name_b] and r[5] is True, r
