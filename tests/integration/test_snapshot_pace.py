"""A snapshot is cut in slices of at most 1,024 objects (so a call waits
behind one slice at most), paced by the store thread's own timer rather than
by the calls that happen to come (docs/durability.md, "Snapshots"): a snapshot
that begins with the last put of a burst is written whole while the store is
idle, without a call to drive it."""
import ctypes
import os
import re
import sys
import time

from conftest import BIN_DIR, free_port, http_get, wait_for
from test_data_path import Store as StoreServer, stats

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
os.environ.setdefault("CRESCENT_LIB", os.path.join(BIN_DIR, "..", "lib", "libcrescent.so"))
from crescent import Store, _lib  # noqa: E402
from crescent import mooncake_ranges  # noqa: E402,F401  (declares the batch put calls)

OBJECTS = 60000  # at least 59 slices of 1,024
BATCH = 256


def metric(d, name):
    status, body = http_get(d.port, "/metrics")
    assert status == 200
    m = re.search(rf"^{name} (\d+)$", body.decode(), re.M)
    return int(m.group(1)) if m else 0


def put_batch(client, first, n):
    keys = [f"pace/{i:08d}".encode() for i in range(first, first + n)]
    items = (_lib.PutItem * n)(*[_lib.PutItem(k, 1, None, None) for k in keys])
    lists = _lib.ReplicaLists()
    rc = _lib.lib.cr_client_batch_put_start(client, None, items, n, ctypes.byref(lists))
    assert rc == 0, rc
    _lib.lib.cr_client_replica_lists_free(ctypes.byref(lists))
    names = (ctypes.c_char_p * n)(*keys)
    ends = _lib.StatusList()
    rc = _lib.lib.cr_client_batch_put_end(client, None, names, n, ctypes.byref(ends))
    assert rc == 0, rc
    assert all(ends.statuses[i] == 0 for i in range(n))
    _lib.lib.cr_client_status_list_free(ctypes.byref(ends))


def test_snapshot_of_an_idle_store_is_written_at_its_own_pace(daemon, tmp_path):
    state = tmp_path / "state"
    rpc = f"tcp://127.0.0.1:{free_port()}"
    # The segment's mount and each put's end are one record each: the last
    # batch crosses the threshold, and then no call comes.
    d = daemon("--rpc-address", rpc, "--state-dir", str(state), "--durability", "async",
               "--client-ttl", "60", "--snapshot-every-records", str(OBJECTS))
    server = StoreServer(rpc, tmp_path / "store.log", "seg-pace")
    wait_for(lambda: stats(d)["segments"] == 1, "the segment mounted")
    s = Store()
    s.setup("localhost", "", 0, 0, "tcp", "", rpc, timeout_ms=20000)
    for first in range(0, OBJECTS, BATCH):
        put_batch(s._client, first, min(BATCH, OBJECTS - first))
    s.close()
    idle_since = time.monotonic()
    # Watched in the state directory, not through /metrics: each scrape
    # would be a round of the store thread, and so a slice.
    wait_for(lambda: any(p.name.endswith(".snap") for p in state.iterdir()),
             "the snapshot written", timeout=20, interval=0.01)
    took = time.monotonic() - idle_since
    # Paced slices of 1,024 objects take tens of milliseconds here (0.16 s
    # measured on a loaded 2-vCPU machine; a loaded scheduler adds some).
    assert took < 1.5, f"the snapshot of an idle store took {took:.2f} s"
    slices = metric(d, "crescent_segments_snapshot_slices_total")
    assert slices >= OBJECTS // 1024, slices
    # Each slice's hold of the store thread is observed: one per slice, and
    # the longest is a real duration (not zero, not seconds on an idle store).
    held = metric(d, 'crescent_segments_snapshot_slice_seconds_count\\{log="store"\\}')
    assert held == slices, (held, slices)
    longest = metric(d, "crescent_segments_snapshot_slice_ns_max")
    assert 0 < longest < 2_000_000_000, longest
    snaps = [p.name for p in state.iterdir() if p.name.endswith(".snap")]
    assert len(snaps) == 1, snaps
    assert server.stop() is not None
