"""Durable metadata (--state-dir, --durability; docs/durability.md) with real
processes: crescentd killed with SIGKILL in the middle of a put load whose
bytes go to a crescent-store, with snapshots taken every 150 records meanwhile,
comes back with every acknowledged put readable with its bytes intact and no
acknowledged removal undone; a torn log tail is cut and said; a log of a newer
format, or damaged before a newer log, and a truncated snapshot are refused
with the file named.  After a restart the event plane's numbers continue
above the last run's, and restored segments await their owners: a live one
keeps its objects, a dead one's segment is dropped after --client-ttl with a
removal event per object."""
import hashlib
import os
import signal
import subprocess
import sys

import pytest

from conftest import BIN_DIR, free_port, wait_for
from test_data_path import Store as StoreServer, stats

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
os.environ.setdefault("CRESCENT_LIB", os.path.join(BIN_DIR, "..", "lib", "libcrescent.so"))
from crescent import CrescentError, Store  # noqa: E402

LOAD = os.path.join(os.path.dirname(__file__), "durable_load.py")


def acknowledged(journal):
    """Acknowledged puts (key -> sha256), acknowledged removals, and removals
    sent whose answer may not have come (the key may be there or not)."""
    puts, removed, tried = {}, set(), set()
    for line in journal.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "P":
            puts[parts[1]] = parts[2]
        elif len(parts) == 2 and parts[0] == "R":
            removed.add(parts[1])
        elif len(parts) == 2 and parts[0] == "T":
            tried.add(parts[1])
    return puts, removed, tried - removed


def check_everything_acknowledged_is_back(rpc, puts, removed, unsure):
    s = Store()
    s.setup("localhost", "", 0, 0, "tcp", "", rpc, timeout_ms=10000)
    for key, sha in puts.items():
        if key in unsure:
            try:
                assert hashlib.sha256(s.get(key)).hexdigest() == sha, key
            except CrescentError as e:
                assert e.name == "OBJECT_NOT_FOUND", (key, e)
        elif key in removed:
            with pytest.raises(CrescentError) as e:
                s.get(key)
            assert e.value.name == "OBJECT_NOT_FOUND", (key, e.value)
        else:
            try:
                value = s.get(key)
            except CrescentError as e:
                raise AssertionError(f"acknowledged put of {key} ({len(puts)} puts, "
                                     f"{len(removed)} removals acknowledged): {e}") from e
            assert hashlib.sha256(value).hexdigest() == sha, key
    s.close()


def newest_log(state):
    return sorted(p for p in state.iterdir() if p.name.startswith("store-"))[-1]


def test_kill9_under_put_load_then_torn_tail(daemon, tmp_path):
    state = tmp_path / "state"
    rpc = f"tcp://127.0.0.1:{free_port()}"
    args = ("--rpc-address", rpc, "--state-dir", str(state), "--durability", "sync",
            "--client-ttl", "60", "--snapshot-every-records", "150")
    d = daemon(*args)
    server = StoreServer(rpc, tmp_path / "store.log", "seg-d")
    wait_for(lambda: stats(d)["segments"] == 1, "the segment mounted")
    journal = tmp_path / "acked.txt"
    load = subprocess.Popen([sys.executable, LOAD, rpc, str(journal), "k"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_for(lambda: journal.exists() and journal.read_text().count("\n") >= 300,
             "300 acknowledged calls", timeout=180)
    d.proc.kill()  # SIGKILL mid-load: no shutdown, no final sync
    d.proc.wait()
    assert load.wait(timeout=60) == 0, load.stderr.read().decode()
    puts, removed, unsure = acknowledged(journal)
    assert len(puts) >= 200 and len(removed) >= 40
    # Snapshots were taken under the load, and the logs they replace removed.
    snaps = sorted(p.name for p in state.iterdir() if p.name.endswith(".snap"))
    logs = sorted(p.name for p in state.iterdir() if p.name.endswith(".log"))
    # (A kill between a snapshot's rename and its clean-up leaves one more of each.)
    assert 1 <= len(snaps) <= 2 and 1 <= len(logs) <= 2, (snaps, logs)

    d2 = daemon(*args)
    wait_for(lambda: stats(d2)["segments"] == 1, "the segment restored")
    check_everything_acknowledged_is_back(rpc, puts, removed, unsure)
    # The restored segment is the store server's own: it kept it, no remount.
    assert stats(d2)["segments"] == 1

    # A torn tail (a record cut short by a crash mid-write) is cut, and said.
    assert d2.stop()[0] == 0
    log = newest_log(state)
    size = log.stat().st_size
    with open(log, "ab") as f:
        f.write(b"\x40\x00\x00\x00" + b"\x00" * 8 + b"\x03partial record")
    d3 = daemon(*args)
    wait_for(lambda: stats(d3)["segments"] == 1, "the segment restored again")
    check_everything_acknowledged_is_back(rpc, puts, removed, unsure)
    assert log.stat().st_size >= size  # cut back to its whole records, then appended
    rc, err = d3.stop()
    assert rc == 0
    assert "torn write" in err and log.name in err, err
    assert server.stop(signal.SIGKILL) is not None


def start_fails(daemon, state):
    with pytest.raises(AssertionError) as e:
        daemon("--state-dir", str(state))
    return str(e.value)


def test_newer_format_and_damaged_logs_are_refused(daemon, tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    newer = state / "store-0000000000000001.log"
    newer.write_bytes(b"CRESWAL\x00" + (2).to_bytes(4, "little") + b"\x00" * 4)
    err = start_fails(daemon, state)
    assert newer.name in err and "newer" in err, err

    # A whole log whose middle is damaged, with a newer log after it: refused,
    # not cut (cutting would drop the newer log's acknowledged records).
    newer.unlink()
    d = daemon("--state-dir", str(state))
    assert d.stop()[0] == 0
    first = newest_log(state)
    first.write_bytes(first.read_bytes() + b"\x20\x00\x00\x00" + b"\x01" * 8 + b"x" * 32)
    (state / "store-0000000000000100.log").write_bytes(
        b"CRESWAL\x00" + (1).to_bytes(4, "little") + b"\x00" * 4)
    err = start_fails(daemon, state)
    assert first.name in err and "damaged in the middle" in err, err

    # A truncated snapshot (a header, no end record) is refused whole.
    for p in state.iterdir():
        p.unlink()
    snap = state / "snapshot-0000000000000005.snap"
    snap.write_bytes(b"CRESSNAP" + (1).to_bytes(4, "little") + b"\x00" * 4
                     + (5).to_bytes(8, "little"))
    err = start_fails(daemon, state)
    assert snap.name in err and "truncated" in err, err


def test_event_seq_continues_across_restart(daemon, tmp_path):
    """With --state-dir the publisher's numbers survive a restart, even a
    kill -9: the first batch after it is numbered above every batch before,
    and a replay asked from before it starts at the first batch there is."""
    from test_events import Plane, recv_batch, replay, wait_kept
    state = tmp_path / "state"
    extra = ("--state-dir", str(state), "--durability", "none", "--event-batch-max", "1")
    p = Plane(daemon, *extra)
    for i in range(5):
        p.put(f"before-{i}")
    wait_kept(p, 4)
    before = p.events_info()
    assert before["first_seq"] == 0 and before["last_seq"] >= 4
    p.client.close()
    p.daemon.proc.kill()  # no shutdown: the mark on disk must already cover them
    p.daemon.proc.wait()
    p.ctx.destroy(linger=0)

    p2 = Plane(daemon, *extra)
    try:
        start = p2.events_info()["first_seq"]
        assert start > before["last_seq"], (start, before)
        sub = p2.subscriber()
        first = p2.ready(sub) - 1  # the fence's seq: a batch of this run
        assert first >= start
        p2.put("after-0")
        seq, events = recv_batch(sub, p2.topic)
        assert seq > before["last_seq"] and events[0][1] == "after-0"
        wait_kept(p2, seq)
        info = p2.events_info()
        assert info["first_seq"] == start and info["replay"]["oldest_seq"] == start
        # A replay from a seq of the first run: the answer starts at the first
        # batch this run kept, and says so by its number; nothing is reused.
        got = replay(p2.dealer(), 2)
        assert got[0][0] == start and all(s >= start for s, _ in got), got[:3]
        assert p2.events_info()["replay"]["sessions_clamped"] == 1
    finally:
        p2.close()


def test_restored_segments_owner_gone_or_alive(daemon, tmp_path):
    """After a restart each restored segment waits --client-ttl for its owner.
    The owner that is still running (a crescent-store) pings and keeps its
    segment and objects; the one that died with crescentd is expired, its
    segment dropped with its objects, and each dropped object published as a
    removal (a BlockUpdateEvent with no replicas) that the replay buffer
    still holds."""
    from test_events import replay
    import json
    import zmq
    from conftest import http_get
    state = tmp_path / "state"
    rpc = f"tcp://127.0.0.1:{free_port()}"
    replay_addr = f"tcp://127.0.0.1:{free_port()}"
    args = ("--rpc-address", rpc, "--replay-address", replay_addr, "--state-dir", str(state),
            "--durability", "sync", "--client-ttl", "6")
    d = daemon(*args)
    alive = StoreServer(rpc, tmp_path / "alive.log", "seg-alive")
    gone = StoreServer(rpc, tmp_path / "gone.log", "seg-gone")
    wait_for(lambda: stats(d)["segments"] == 2, "both segments mounted")
    s = Store()
    s.setup("localhost", "", 0, 0, "tcp", "", rpc, timeout_ms=10000)
    for i in range(3):
        s.put(f"kept-{i}", b"k" * 4096, {"preferred_segment": "seg-alive"})
        s.put(f"lost-{i}", b"l" * 4096, {"preferred_segment": "seg-gone"})
    s.close()
    d.proc.kill()
    d.proc.wait()
    assert gone.stop(signal.SIGKILL) is not None  # its owner dies with crescentd

    d2 = daemon(*args)

    def awaiting():
        status, body = http_get(d2.port, "/api/v1/segments")
        assert status == 200
        return {g["name"]: g["awaiting_owner"] for g in json.loads(body)["segments"]}

    # Both come back awaiting their owners; the live one's next ping (every
    # 200 ms) reclaims its segment, the dead one's stays awaiting until the TTL.
    first = awaiting()
    assert first.get("seg-gone") is True and "seg-alive" in first, first
    wait_for(lambda: awaiting() == {"seg-alive": False, "seg-gone": True},
             "the live owner reclaimed its segment")
    wait_for(lambda: awaiting() == {"seg-alive": False}, "the ownerless segment dropped",
             timeout=60)
    s = Store()
    s.setup("localhost", "", 0, 0, "tcp", "", rpc, timeout_ms=10000)
    for i in range(3):
        assert s.get(f"kept-{i}") == b"k" * 4096
        with pytest.raises(CrescentError) as e:
            s.get(f"lost-{i}")
        assert e.value.name == "OBJECT_NOT_FOUND"
    s.close()

    ctx = zmq.Context()
    try:
        dealer = ctx.socket(zmq.DEALER)
        dealer.setsockopt(zmq.LINGER, 0)
        dealer.connect(replay_addr)
        events = [e for _, batch in replay(dealer, 0) for e in batch]
    finally:
        ctx.destroy(linger=0)
    removed = sorted(e[1] for e in events if e[0] == "BlockUpdateEvent" and e[2] == [])
    assert removed == [f"lost-{i}" for i in range(3)], events
    assert alive.stop(signal.SIGKILL) is not None
