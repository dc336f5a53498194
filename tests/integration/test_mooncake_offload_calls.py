"""The reference's SSD-offload calls that set no tier up
(python/crescent/mooncake_offload.py): `unmount_local_disk_segment` and
`get_offload_rpc_read_count`, compared with Mooncake's own module and master
(/work/shared/mooncake, built at 3b5a5941) where both run without SSD
hardware, and the count checked against real reads of a store server's SSD
tier (crescent-store --ssd-dir; docs/tiers.md, "Local SSD tier").

Withdrawing a tier this process hosts (cr_host_drain_ssd) is covered in
C by tests/unit/test_host.c: Python's setup does not host an SSD tier yet."""
import os

import pytest

from conftest import free_port, wait_for
from test_mooncake_store import (MiB, REAL_MOONCAKE, master, peers,  # noqa: F401
                                 real_module, setup_engine)
from test_ssd_offload import metric, ssd_store, tiers

# A store not set up yet.
BEFORE = r"""
s = store
result = [s.get_offload_rpc_read_count(), s.unmount_local_disk_segment(),
          s.unmount_local_disk_segment(grace_period_seconds=0)]
"""

# Set up, with no SSD tier here: the grace period is not waited out.
SET_UP = r"""
import time
s = store
r = [s.get_offload_rpc_read_count(), s.unmount_local_disk_segment(),
     s.unmount_local_disk_segment(grace_period_seconds=1), s.unmount_local_disk_segment(0)]
r += [s.put("a", b"x" * 100), s.get("a")[:3], s.get("none"), s.get_offload_rpc_read_count()]
t = time.time()
r += [s.unmount_local_disk_segment(2), round(time.time() - t)]
r += [s.get("a")[:1], s.get_offload_rpc_read_count()]
for bad in (-1, "x", 1.5, None, True):
    try:
        r.append(["ok", s.unmount_local_disk_segment(bad)])
    except TypeError:
        r.append("TypeError")
try:
    r.append(s.get_offload_rpc_read_count(1))
except TypeError:
    r.append("TypeError")
r += [s.close(), s.get_offload_rpc_read_count(), s.unmount_local_disk_segment()]
result = r
"""

# What Mooncake's module answered (test_offload_calls_match_the_real_module
# compares again whenever it is installed).
REFERENCE_BEFORE = [0, -1, -1]
REFERENCE_SET_UP = [0, 0, 0, 0, 0, b"xxx", b"", 0, 0, 0, b"x", 0,
                    "TypeError", "TypeError", "TypeError", "TypeError", ["ok", 0], "TypeError",
                    0, 0, -1]


def test_offload_calls_return_the_reference_values(master, peers):
    p = peers()
    assert p.run(BEFORE) == REFERENCE_BEFORE
    assert setup_engine(p, master) == 0
    assert p.run(SET_UP) == REFERENCE_SET_UP


def test_offload_calls_match_the_real_module(master, peers, tmp_path):
    if not os.access(os.path.join(REAL_MOONCAKE, "bin", "mooncake_master"), os.X_OK):
        pytest.skip(f"Mooncake's real module is not at {REAL_MOONCAKE} (MOONCAKE_DIR)")
    theirs_before = peers(pythonpath=REAL_MOONCAKE).run(BEFORE)
    with real_module(peers, tmp_path) as p:
        theirs = p.run(SET_UP)
    ours = peers()
    assert ours.run(BEFORE) == theirs_before
    assert setup_engine(ours, master) == 0
    assert ours.run(SET_UP) == theirs


READ_BACK = r"""
s = store
c0 = s.get_offload_rpc_read_count()
r = [s.get(on_ssd[0]) == payload(on_ssd[0]), s.get_offload_rpc_read_count() - c0]
r += [s.get(in_memory[0]) == payload(in_memory[0]), s.get_offload_rpc_read_count() - c0]
r += [s.get("no such key"), s.get_offload_rpc_read_count() - c0]
buf = ctypes.create_string_buffer(1 << 20); bufs["ssd"] = buf
r += [s.get_into(on_ssd[1], ctypes.addressof(buf), 1 << 20), buf.raw == payload(on_ssd[1]),
      s.get_offload_rpc_read_count() - c0]
r += [s.close(), s.get_offload_rpc_read_count() - c0]
result = r
"""


def test_offload_read_count_counts_reads_of_a_servers_ssd(daemon, peers, tmp_path):
    """Objects evicted from a store server's segment to its SSD tier: each
    get of one counts one read, a memory replica's or a missing key's none,
    and the count outlives close() as the reference's does."""
    rpc_port = free_port()
    rpc = f"tcp://127.0.0.1:{rpc_port}"
    d = daemon("--rpc-address", rpc, "--local-segment-size", "0",
               "--eviction-high-watermark-ratio", "0.5", "--eviction-ratio", "0.2",
               "--client-ttl", "30")
    d.rpc = f"127.0.0.1:{rpc_port}"
    server = ssd_store(rpc, tmp_path / "store.log", tmp_path / "ssd")
    try:
        wait_for(lambda: metric(d, "crescent_segments_segments") == 1, "segment mounted")
        p = peers()
        assert setup_engine(p, d, size=0) == 0  # every byte on the server
        assert p.run("keys = [f'key/{i}' for i in range(48)]\n"
                     "import random\n"
                     "def payload(k):\n"
                     "    return random.Random(k).randbytes(1 << 20)\n"
                     "result = [store.put(k, payload(k)) for k in keys]") == [0] * 48
        wait_for(lambda: (metric(d, "crescent_segments_offloads_done_total") or 0) >= 8,
                 "offloads committed")
        where = {k: tiers(rpc, k) for k in (f"key/{i}" for i in range(48))}
        on_ssd = [k for k, t in where.items() if t == ["local_disk"]]
        in_memory = [k for k, t in where.items() if t == ["memory"]]
        assert len(on_ssd) >= 2 and in_memory, where
        p.run(f"on_ssd, in_memory = {on_ssd!r}, {in_memory!r}")
        assert p.run(READ_BACK) == [True, 1, True, 1, b"", 1, MiB, True, 2, 0, 2]
    finally:
        server.stop()
