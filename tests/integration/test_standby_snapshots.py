"""A standby takes snapshots of its own (docs/durability.md, "Replication"):
with --snapshot-every-records it cuts its store at the last record it
applied, so its logs before the cut go (its state directory does not grow
without bound), and a standby killed with -9 comes back from its snapshot
and log with exactly the leader's objects, then follows on."""
import json
import signal
import subprocess

from conftest import binary, free_port, http_get, wait_for
from test_data_path import Store as StoreServer, stats
from test_replication import Store, ha, leader_args, standby_args


def keys(d):
    status, body = http_get(d.port, "/api/v1/objects?limit=1000")
    assert status == 200, (status, body)
    listing = json.loads(body)
    assert not listing["truncated"]
    return sorted(o["key"] for o in listing["objects"] if o["complete"])


def test_standby_snapshots_bound_its_log_and_serve_its_restart(daemon, tmp_path):
    repl = f"127.0.0.1:{free_port()}"
    rpc_a, rpc_b = f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}"
    leader = daemon(*leader_args(tmp_path, rpc_a, repl, mode="async"))
    args_b = (*standby_args(tmp_path, "standby", rpc_b, repl), "--snapshot-every-records", "40")
    standby = daemon(*args_b)
    wait_for(lambda: ha(standby)["connected"], "the standby following")
    server = StoreServer(rpc_a, tmp_path / "store.log", "seg-snap")
    wait_for(lambda: stats(leader)["segments"] == 1, "the segment mounted")
    s = Store()
    s.setup("localhost", "", 0, 0, "tcp", "", rpc_a, timeout_ms=10000)
    for i in range(200):
        s.put(f"s{i}", bytes([i % 256]) * 256)
    for i in range(0, 200, 3):
        s.remove(f"s{i}")
    wait_for(lambda: keys(standby) == keys(leader), "the standby has every object")
    state = tmp_path / "standby"
    wait_for(lambda: any(p.suffix == ".snap" for p in state.iterdir()), "a standby snapshot")
    # The logs before its newest snapshot went.
    assert not (state / "store-0000000000000001.log").exists(), sorted(state.iterdir())
    wait_for(lambda: ha(standby)["snapshot_lsn"] > 0, "its snapshot in /api/v1/ha")

    standby.proc.kill()
    standby.proc.wait()
    for i in range(200, 230):
        s.put(f"s{i}", b"n" * 256)
    standby = daemon(*args_b)
    want = keys(leader)
    wait_for(lambda: ha(standby)["connected"] and keys(standby) == want,
             "the restarted standby has the leader's objects")
    assert len(want) == 200 - 67 + 30
    s.close()
    assert server.stop(signal.SIGKILL) is not None


def metric(d, name):
    status, body = http_get(d.port, "/metrics")
    assert status == 200, (status, body)
    for line in body.decode().splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in /metrics")


def test_standby_snapshots_progress_under_a_continuous_stream(daemon, tmp_path):
    """With the stream never idle (crescent-bench puts for the whole test), the
    standby's journal has taken more than its store applied whenever a
    snapshot begins: every snapshot its store begins is still written (the
    records after the cut stay in the log it closes), and a restart from them
    has the leader's objects."""
    repl = f"127.0.0.1:{free_port()}"
    native = free_port()
    rpc_a, rpc_b = f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}"
    leader = daemon(*leader_args(tmp_path, rpc_a, repl, "--rpc-tcp-address",
                                 f"127.0.0.1:{native}", mode="async"))
    args_b = (*standby_args(tmp_path, "standby", rpc_b, repl), "--snapshot-every-records",
              "400")
    standby = daemon(*args_b)
    wait_for(lambda: ha(standby)["connected"], "the standby following")
    bench = subprocess.Popen(
        [binary("crescent-bench"), "--workload", "put", "--connections", "64", "--rpc",
         f"crescent://127.0.0.1:{native}", "--mount-fake", "--duration", "300", "--warmup",
         "0", "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: metric(standby, "crescent_journal_snapshots_total") >= 5,
                 "five standby snapshots written under the stream", timeout=120)
        assert bench.poll() is None, bench.stderr.read().decode()  # the stream never paused
        begun = metric(standby, "crescent_segments_snapshots_begun_total")
        written = metric(standby, "crescent_journal_snapshots_total")
    finally:
        bench.kill()  # its fake segment stays mounted: the objects stay
        bench.wait(timeout=30)
    # Each one its store began was written, but the one maybe still under way.
    assert written >= begun - 1, (begun, written)
    assert metric(standby, "crescent_journal_snapshots_skipped_total") == 0
    state = tmp_path / "standby"
    assert not (state / "store-0000000000000001.log").exists(), sorted(state.iterdir())

    # Restarted from its snapshot and the logs after it: the same store.  (Its
    # own count, not the leader's: puts the kill cut between PutStart and
    # PutEnd are in the leader's store and never in the log.)
    wait_for(lambda: ha(standby)["applied_lsn"] == ha(leader)["applied_lsn"],
             "the standby caught up")
    lsn = ha(leader)["applied_lsn"]
    before = stats(standby)["objects"]
    assert before > 0
    standby.proc.kill()
    standby.proc.wait()
    standby = daemon(*args_b)
    wait_for(lambda: ha(standby)["connected"] and ha(standby)["applied_lsn"] >= lsn,
             "the restarted standby following", timeout=60)
    assert ha(leader)["applied_lsn"] == lsn  # nothing was written meanwhile
    assert stats(standby)["objects"] == before
