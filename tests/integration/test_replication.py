"""Hot standbys (--replication-address, --standby-of, --replication;
docs/durability.md "Replication") with real processes on loopback: a leader
under a put load whose bytes go to a crescent-store, a standby following it;
the standby refuses writes and serves reads; kill -9 of the leader, the
standby promoted through POST /api/v1/ha/promote: with --replication sync
every acknowledged put is there with its bytes and no acknowledged removal
is undone.  A standby started empty after the leader's logs were compacted
is sent the leader's snapshot first; a standby restarted after kill -9
continues from its own log."""
import json
import os
import signal
import subprocess
import sys
import urllib.request

import pytest

from conftest import free_port, http_get, wait_for
from test_data_path import Store as StoreServer, stats
from test_durable import LOAD, acknowledged, check_everything_acknowledged_is_back

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
from crescent import CrescentError, Store  # noqa: E402


def ha(d):
    status, body = http_get(d.port, "/api/v1/ha")
    assert status == 200, (status, body)
    return json.loads(body)


def promote(d):
    req = urllib.request.Request(f"http://127.0.0.1:{d.port}/api/v1/ha/promote", data=b"",
                                 method="POST")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def leader_args(tmp_path, rpc, repl, *extra, mode="sync"):
    return ("--rpc-address", rpc, "--state-dir", str(tmp_path / "leader"), "--durability",
            "sync", "--replication-address", repl, "--replication", mode, "--client-ttl",
            "60", *extra)


def standby_args(tmp_path, name, rpc, repl, own_repl=None):
    """A standby's flags; own_repl: its own --replication-address (for when it leads)."""
    return ("--rpc-address", rpc, "--state-dir", str(tmp_path / name), "--standby-of", repl,
            "--replication-address", own_repl or f"127.0.0.1:{free_port()}", "--replication",
            "sync", "--client-ttl", "60")


def test_kill9_leader_then_promote_standby_loses_nothing(daemon, tmp_path):
    repl = f"127.0.0.1:{free_port()}"
    rpc_a, rpc_b = f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}"
    leader = daemon(*leader_args(tmp_path, rpc_a, repl, "--snapshot-every-records", "150"))
    repl_b = f"127.0.0.1:{free_port()}"
    standby = daemon(*standby_args(tmp_path, "standby", rpc_b, repl, repl_b))
    wait_for(lambda: ha(leader)["standbys"] and ha(standby)["connected"], "the standby follows")
    assert ha(standby)["role"] == "standby" and ha(leader)["role"] == "leader"
    server = StoreServer(rpc_a, tmp_path / "store.log", "seg-r")
    wait_for(lambda: stats(leader)["segments"] == 1, "the segment mounted")
    journal = tmp_path / "acked.txt"
    load = subprocess.Popen([sys.executable, LOAD, rpc_a, str(journal), "k"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_for(lambda: journal.exists() and journal.read_text().count("\n") >= 300,
             "300 acknowledged calls", timeout=180)

    # The standby refuses writes, naming the leader, and answers reads.
    s = Store()
    s.setup("localhost", "", 0, 0, "tcp", "", rpc_b, timeout_ms=10000)
    with pytest.raises(CrescentError) as e:
        s.put("written-to-a-standby", b"x" * 100)
    assert "not the leader" in str(e.value) and repl in str(e.value), e.value
    assert s.get("k-0") is not None
    s.close()

    # A second standby, started empty after the leader's logs were compacted
    # (a snapshot every 150 records), is sent the snapshot first.  The leader
    # writes its snapshot a slice per round beside the load: on a busy machine
    # the first may not be on disk after 300 calls, and a standby that comes
    # earlier is rightly caught up from the whole log instead.
    wait_for(lambda: ha(leader)["snapshot_lsn"] > 0, "the leader's first snapshot written",
             timeout=120)
    late = daemon(*standby_args(tmp_path, "late", f"tcp://127.0.0.1:{free_port()}", repl))
    wait_for(lambda: ha(late)["connected"] and ha(late)["lag_records"] == 0 and
             ha(late)["applied_lsn"] > 150, "the late standby caught up", timeout=120)
    files = sorted(p.name for p in (tmp_path / "late").iterdir())
    assert any(name.endswith(".snap") for name in files), (files, ha(late), ha(leader))
    # Under --replication sync a call is answered once any standby has its
    # record: failover must pick the standby furthest ahead.  Here there is
    # to be one, so the late one goes.
    assert late.stop()[0] == 0

    leader.proc.kill()  # SIGKILL mid-load
    leader.proc.wait()
    assert load.wait(timeout=60) == 0, load.stderr.read().decode()
    puts, removed, unsure = acknowledged(journal)
    assert len(puts) >= 200 and len(removed) >= 40

    status, body = promote(standby)
    assert status == 200, body
    assert body["role"] == "leader" and body["term"] == 1, body
    check_everything_acknowledged_is_back(rpc_b, puts, removed, unsure)
    # The promoted standby takes writes once a standby of its own has them
    # (--replication sync): a new one, started empty, catches up from its log.
    third = daemon(*standby_args(tmp_path, "third", f"tcp://127.0.0.1:{free_port()}", repl_b))
    wait_for(lambda: ha(third)["connected"], "a standby of the new leader")
    s = Store()
    s.setup("localhost", "", 0, 0, "tcp", "", rpc_b, timeout_ms=10000)
    s.put("after-failover", b"y" * 4096)
    assert s.get("after-failover") == b"y" * 4096
    s.close()
    assert server.stop(signal.SIGKILL) is not None


def test_standby_survives_kill9_and_continues_from_its_log(daemon, tmp_path):
    repl = f"127.0.0.1:{free_port()}"
    rpc_a, rpc_b = f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}"
    # async: the leader goes on taking writes while its only standby is down
    # (under sync they would wait for it).
    leader = daemon(*leader_args(tmp_path, rpc_a, repl, mode="async"))
    args_b = standby_args(tmp_path, "standby", rpc_b, repl)
    standby = daemon(*args_b)
    server = StoreServer(rpc_a, tmp_path / "store.log", "seg-s")
    wait_for(lambda: stats(leader)["segments"] == 1, "the segment mounted")
    s = Store()
    s.setup("localhost", "", 0, 0, "tcp", "", rpc_a, timeout_ms=10000)
    for i in range(50):
        s.put(f"a-{i}", bytes([i]) * 1000)
    wait_for(lambda: ha(standby)["applied_lsn"] == ha(leader)["applied_lsn"],
             "the standby applied everything")
    standby.proc.kill()
    standby.proc.wait()
    for i in range(50):
        s.put(f"b-{i}", bytes([i]) * 1000)
    for i in range(0, 50, 2):
        s.remove(f"a-{i}")
    s.close()
    standby = daemon(*args_b)
    try:
        wait_for(lambda: ha(standby)["connected"] and ha(standby)["lag_records"] == 0 and
                 ha(standby)["applied_lsn"] == ha(leader)["applied_lsn"], "caught up again",
                 timeout=10)
    except AssertionError:
        print(ha(standby), ha(leader))
        print(standby.stop()[1])
        print(leader.stop()[1])
        raise
    metrics = http_get(leader.port, "/metrics")[1].decode()
    assert "crescent_journal_repl_bytes_sent_total" in metrics
    leader.proc.kill()
    leader.proc.wait()
    assert promote(standby)[0] == 200
    s = Store()
    s.setup("localhost", "", 0, 0, "tcp", "", rpc_b, timeout_ms=10000)
    for i in range(50):
        assert s.get(f"b-{i}") == bytes([i]) * 1000
        if i % 2:
            assert s.get(f"a-{i}") == bytes([i]) * 1000
        else:
            with pytest.raises(CrescentError):
                s.get(f"a-{i}")
    s.close()
    assert server.stop(signal.SIGKILL) is not None


def test_standby_refuses_mutations_on_every_endpoint_and_serves_reads(daemon, tmp_path):
    from master_client import connect
    repl = f"127.0.0.1:{free_port()}"
    port_a, port_b = free_port(), free_port()
    leader = daemon(*leader_args(tmp_path, f"tcp://127.0.0.1:{port_a}", repl, mode="async"))
    standby = daemon(*standby_args(tmp_path, "standby", f"tcp://127.0.0.1:{port_b}", repl))
    native = standby.args[standby.args.index("--rpc-tcp-address") + 1]
    c = connect(f"tcp://127.0.0.1:{port_a}")
    assert c.mount_segment("seg-l", 1 << 20).status_code == 0
    c.put("on-the-leader", 4096)
    wait_for(lambda: ha(standby)["applied_lsn"] == ha(leader)["applied_lsn"] > 0,
             "the standby applied the put")
    for endpoint in (f"tcp://127.0.0.1:{port_b}", f"crescent://{native}",
                     f"shm://@crescent-rpc/{port_b}"):
        s = connect(endpoint)
        r = s.mount_segment("seg-s", 1 << 20, base=0x20000000)
        assert r.status_code == -900 and "not the leader; leader is " + repl in r.error_message, \
            (endpoint, r)
        r = s.put_start("on-the-standby", 4096)
        assert r.status_code == -900 and "not the leader" in r.error_message, (endpoint, r)
        r = s.get_replica_list("on-the-leader")
        assert r.status_code == 0 and len(r.replica_list) == 1, (endpoint, r)
        s.close()
    metrics = http_get(standby.port, "/metrics")[1].decode()
    assert "crescent_segments_not_leader_refusals_total 6" in metrics
    assert "crescent_journal_repl_role 2" in metrics
    health = json.loads(http_get(standby.port, "/health")[1])
    assert health["ha"]["role"] == "standby" and health["ha"]["leader"] == repl
    c.close()
