"""A former leader comes back (docs/ha.md, "A former leader comes back"),
with real etcd and crescentd processes on loopback.

A leader paused past its lease (SIGSTOP) while a standby takes over and
takes writes, then woken (SIGCONT), steps down and follows the new leader:
from its own log when everything in it is the new leader's too, or, when it
holds records the new leader never had (written under --replication async
while its standby was down), it drops them (its logs are moved aside),
empties its store and starts over from the new leader's log.  Either way
its objects end up exactly the new leader's: no split-brain write, no
removed key brought back.  The highest term survives a restart
(DIR/terms)."""
import json
import os
import signal

from conftest import free_port, http_get, wait_for
from master_client import MasterClient
from test_ha import etcd, leader_of, nodes, pytestmark  # noqa: F401 (fixtures, etcd check)


def keys(node):
    status, body = http_get(node.http, "/api/v1/objects?limit=1000", timeout=10)
    assert status == 200, (status, body)
    listing = json.loads(body)
    assert not listing["truncated"]
    return sorted(o["key"] for o in listing["objects"] if o["complete"])


def metric(node, name):
    text = http_get(node.http, "/metrics", timeout=10)[1].decode()
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in /metrics")


def ha_flags(tmp_path, name):
    # --client-ttl long: segment owners need not ping the new leader here.
    return ("--state-dir", str(tmp_path / name), "--durability", "sync", "--replication",
            "async", "--replication-address", f"127.0.0.1:{free_port()}", "--client-ttl", "300")


def state_dir(node):
    return next(node.args[i + 1] for i, x in enumerate(node.args) if x == "--state-dir")


def put(c, key):
    start, end = c.put(key, 4096)
    assert (start.status_code, end.status_code) == (0, 0), (key, start, end)


def two_nodes(etcd, nodes, tmp_path):
    e = etcd()
    cluster = nodes(e.endpoints(), 1, *ha_flags(tmp_path, "s0")) + \
        nodes(e.endpoints(), 1, *ha_flags(tmp_path, "s1"))
    leader, term = wait_for(lambda: leader_of(cluster), "a leader", timeout=30)
    other = cluster[1] if leader is cluster[0] else cluster[0]
    wait_for(lambda: other.ha_all().get("connected"), "the standby streaming", timeout=30)
    return e, leader, term, other


def same_keys(a, b):
    try:
        ka, kb = keys(a), keys(b)
    except (OSError, AssertionError):
        return None
    return ka if ka == kb and a.ha_all().get("connected") else None


def test_paused_leader_with_nothing_unreplicated_follows_from_its_own_log(etcd, nodes,
                                                                          tmp_path):
    e, a, term, b = two_nodes(etcd, nodes, tmp_path)
    c = MasterClient(a.rpc, client_id=(7, 7), timeout=10.0)
    assert c.mount_segment("seg", 64 << 20).status_code == 0
    for i in range(10):
        put(c, f"k{i}")
    wait_for(lambda: keys(b) == keys(a), "the standby has every object")
    a.signal(signal.SIGSTOP)
    try:
        new, new_term = wait_for(lambda: leader_of([b]), "the standby taking over", timeout=30)
        assert new_term > term
        c2 = MasterClient(b.rpc, client_id=(7, 7), timeout=10.0)
        put(c2, "after")
        assert c2.remove("k3").status_code == 0
    finally:
        a.signal(signal.SIGCONT)
    want = sorted([f"k{i}" for i in range(10) if i != 3] + ["after"])
    assert wait_for(lambda: same_keys(a, b), "the old leader following", timeout=60) == want
    # Everything it had was the new leader's: it went on from its own log.
    assert metric(a, "crescent_journal_repl_resyncs_total") == 0
    assert not [n for n in os.listdir(state_dir(a)) if n.startswith("diverged-")]
    c.close()
    c2.close()


def test_former_leader_drops_its_unreplicated_tail_and_follows(etcd, nodes, tmp_path):
    e, a, term, b = two_nodes(etcd, nodes, tmp_path)
    state_a, state_b = state_dir(a), state_dir(b)
    c = MasterClient(a.rpc, client_id=(7, 7), timeout=10.0)
    assert c.mount_segment("seg", 64 << 20).status_code == 0
    for i in range(10):
        put(c, f"k{i}")
    wait_for(lambda: keys(b) == keys(a), "the standby has every object")
    # The standby dies; the leader goes on (async) with writes no one else has.
    b.proc.kill()
    b.proc.wait(timeout=10)
    for i in range(5):
        put(c, f"tail{i}")
    assert c.remove("k5").status_code == 0
    a.signal(signal.SIGSTOP)
    try:
        # The standby comes back from its own log and is elected once the
        # paused leader's lease is over.
        b = nodes(e.endpoints(), 1, "--state-dir", state_b, "--durability", "sync",
                  "--replication", "async", "--replication-address",
                  f"127.0.0.1:{free_port()}", "--client-ttl", "300")[0]
        new, new_term = wait_for(lambda: leader_of([b]), "the standby taking over", timeout=60)
        assert new_term > term
        c2 = MasterClient(b.rpc, client_id=(7, 7), timeout=10.0)
        put(c2, "new0")
        assert c2.remove("k1").status_code == 0
    finally:
        a.signal(signal.SIGCONT)
    # It drops tail0..4 (and its removal of k5, which the new leader never
    # saw), and keeps k1 removed: exactly the new leader's objects.
    want = sorted([f"k{i}" for i in range(10) if i != 1] + ["new0"])
    got = wait_for(lambda: same_keys(a, b), "the old leader following", timeout=90)
    assert got == want, (got, want)
    assert metric(a, "crescent_journal_repl_resyncs_total") == 1
    assert metric(b, "crescent_journal_repl_resyncs_asked_total") >= 1
    aside = [p for p in os.listdir(state_a) if p.startswith("diverged-")]
    assert len(aside) == 1, os.listdir(state_a)
    assert metric(a, "crescent_journal_diverged_kept") == 1  # --keep-diverged 2: kept
    assert any(n.endswith(".log") for n in os.listdir(os.path.join(state_a, aside[0])))
    assert "starting over from the leader's state" in a.text()
    # The new leader's writes keep reaching it.
    put(c2, "new1")
    wait_for(lambda: "new1" in keys(a), "a later write streamed to it")
    c.close()
    c2.close()
