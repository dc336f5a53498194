"""A standby takes snapshots of its own (docs/durability.md, "Replication"):
with --snapshot-every-records it cuts its store at the last record it
applied, so its logs before the cut go (its state directory does not grow
without bound), and a standby killed with -9 comes back from its snapshot
and log with exactly the leader's objects, then follows on."""
import json
import signal

from conftest import free_port, http_get, wait_for
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
