"""HA on etcd (docs/ha.md) with real processes: Debian's etcd started here on
loopback (one member, or three), crescentd with --ha etcd.

- three crescentd, one etcd: the leader is killed with SIGKILL under a put
  load whose bytes go to a crescent-store; a standby takes over, the store
  server remounts its segment on it, and puts through an etcd:// client
  succeed again; the time from the kill to the first successful put is
  measured against 2 x the lease TTL;
- the leader SIGSTOPped past its lease: a standby takes over; after SIGCONT
  the old leader refuses every write ("not the leader"), steps down and
  follows;
  no write lands on it;
- etcd killed: the leader keeps answering until its lease could end, never
  after, then refuses; with etcd back, a leader is elected again;
- three etcd members, one killed: the crescentds still elect a leader (the
  killed member first in their endpoint list: the client fails over).

- three crescentd streaming the leader's log (--replication-address,
  --replication sync, --durability sync): after the leader's SIGKILL every
  acknowledged put is readable through the new leader, bytes intact."""
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import BIN_DIR, binary, free_port, http_get, wait_for
from master_client import MasterClient, load_proto

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
os.environ.setdefault("CRESCENT_LIB", os.path.join(BIN_DIR, "..", "lib", "libcrescent.so"))
from crescent import CrescentError, Store  # noqa: E402

TTL = 2  # seconds: short, so failovers are quick
NOT_LEADER = -900  # RPC_FAIL, with a reason starting "not the leader" (durable/role.h)

ETCD = shutil.which("etcd") or "/usr/bin/etcd"
pytestmark = pytest.mark.skipif(not os.access(ETCD, os.X_OK),
                                reason="etcd is not installed (scripts/setup.sh installs etcd-server)")


class Etcd:
    """One etcd cluster of `members` on loopback, data under tmp_path."""

    def __init__(self, tmp_path, members=1):
        names = [f"m{i}" for i in range(members)]
        self.client = {n: free_port() for n in names}
        peer = {n: free_port() for n in names}
        cluster = ",".join(f"{n}=http://127.0.0.1:{peer[n]}" for n in names)
        self.procs, self.args = {}, {}
        for n in names:
            self.args[n] = [
                ETCD, "--name", n, "--data-dir", str(tmp_path / f"etcd-{n}"),
                "--listen-client-urls", f"http://127.0.0.1:{self.client[n]}",
                "--advertise-client-urls", f"http://127.0.0.1:{self.client[n]}",
                "--listen-peer-urls", f"http://127.0.0.1:{peer[n]}",
                "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer[n]}",
                "--initial-cluster", cluster, "--initial-cluster-state", "new",
                "--log-level", "error"]
            self.start(n, tmp_path)
        for n in names:
            wait_for(lambda n=n: self.healthy(n), f"etcd member {n} healthy", timeout=60)

    def start(self, name, tmp_path=None):
        log = open(os.devnull, "wb")
        self.procs[name] = subprocess.Popen(self.args[name], stdout=log, stderr=log)

    def healthy(self, name):
        try:
            status, body = http_get(self.client[name], "/health", timeout=1)
            return status == 200 and json.loads(body).get("health") == "true"
        except OSError:
            return False

    def endpoints(self, first=None):
        names = sorted(self.client, key=lambda n: n != first)
        return ";".join(f"127.0.0.1:{self.client[n]}" for n in names)

    def kill(self, name):
        self.procs[name].kill()
        self.procs[name].wait(timeout=10)

    def stop(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)


class Node:
    """One crescentd of the HA cluster; its log goes to a file."""

    def __init__(self, tmp_path, name, endpoints, *extra, ttl=TTL):
        # Other programs on this machine may take a port between free_port()
        # and the bind: start again on new ports then.
        for attempt in range(3):
            try:
                self._start(tmp_path, name, endpoints, extra, ttl)
                return
            except AssertionError as e:
                if "Address already in use" not in str(e) or attempt == 2:
                    raise
                self.log.close()

    def _start(self, tmp_path, name, endpoints, extra, ttl):
        self.name = name
        self.http = free_port()
        self.rpc = f"tcp://127.0.0.1:{free_port()}"
        self.native = f"127.0.0.1:{free_port()}"
        self.log_path = tmp_path / f"{name}.log"
        self.log = open(self.log_path, "wb")
        self.args = [binary("crescentd"), "--no-pin", "--http-address", f"127.0.0.1:{self.http}",
                     "--rpc-address", self.rpc, "--rpc-tcp-address", self.native,
                     "--event-address", f"tcp://127.0.0.1:{free_port()}",
                     "--replay-address", f"tcp://127.0.0.1:{free_port()}",
                     "--mooncake-rpc-address", f"127.0.0.1:{free_port()}", "--metrics-port", "0",
                     "--local-segment-size", "0", "--client-ttl", "3",
                     "--ha", "etcd", "--etcd-endpoints", endpoints, "--ha-lease-ttl", str(ttl),
                     *extra]
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=subprocess.STDOUT)
        wait_for(lambda: self.ha() is not None, f"{name} answering /health", timeout=30)

    def ha(self):
        """/health's view of the election (its "ha" object's "election")."""
        if self.proc.poll() is not None:
            raise AssertionError(f"{self.name} exited: {self.text()}")
        try:
            status, body = http_get(self.http, "/health", timeout=2)
        except OSError:
            return None
        return json.loads(body).get("ha", {}).get("election") if status == 200 else None

    def ha_all(self):
        """/health's whole "ha" object (the store master's role and lag too)."""
        status, body = http_get(self.http, "/health", timeout=2)
        return json.loads(body).get("ha", {}) if status == 200 else {}

    def text(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
        self.proc.wait(timeout=20)
        self.log.close()


def leader_of(nodes, exclude=()):
    """The one node that says it leads (None if none or several)."""
    found = []
    for n in nodes:
        if n in exclude:
            continue
        try:
            h = n.ha()
        except AssertionError:
            continue
        if h is not None and h["role"] == "leader":
            found.append((n, h["term"]))
    return found[0] if len(found) == 1 else None


@pytest.fixture
def etcd(tmp_path):
    clusters = []

    def start(members=1):
        e = Etcd(tmp_path, members)
        clusters.append(e)
        return e

    yield start
    for e in clusters:
        e.stop()


@pytest.fixture
def nodes(tmp_path):
    started = []

    def start(endpoints, count, *extra, ttl=TTL):
        for i in range(count):
            started.append(Node(tmp_path, f"crescentd{len(started)}", endpoints, *extra, ttl=ttl))
        return started[-count:]

    yield start
    for n in started:
        n.stop()


def test_failover_under_put_load(etcd, nodes, tmp_path):
    e = etcd()
    cluster = nodes(e.endpoints(), 3)
    leader, term = wait_for(lambda: leader_of(cluster), "a leader", timeout=30)
    master = f"etcd://{e.endpoints()}"
    store_log = open(tmp_path / "store.log", "wb")
    store = subprocess.Popen(
        [binary("crescent-store"), "--master", master, "--segment-name", "seg0",
         "--segment-size", str(64 << 20), "--no-pin", "--ping-interval-ms", "200",
         "--data-address", f"127.0.0.1:{free_port()}"],
        stdout=store_log, stderr=subprocess.STDOUT)
    try:
        client = Store()
        client.setup(master_server_address=master, timeout_ms=3000)
        value = os.urandom(4096)
        done, results, stop = [], [], threading.Event()

        def load():
            i = 0
            while not stop.is_set():
                key = f"k{i}"
                t = time.monotonic()
                try:
                    client.put(key, value)
                    results.append((t, time.monotonic(), key, None))
                except CrescentError as err:
                    results.append((t, time.monotonic(), key, err.name))
                    time.sleep(0.02)
                i += 1
            done.append(i)

        worker = threading.Thread(target=load)
        worker.start()
        wait_for(lambda: sum(1 for r in results if r[3] is None) >= 20, "puts before the kill",
                 timeout=60)
        killed_at = time.monotonic()
        leader.proc.kill()
        leader.proc.wait(timeout=10)
        new, new_term = wait_for(lambda: leader_of(cluster, exclude=(leader,)),
                                 "a new leader", timeout=30)
        assert new is not leader and new_term > term
        first = wait_for(lambda: next((r for r in results if r[0] > killed_at and r[3] is None),
                                      None), "a put on the new leader", timeout=60)
        stop.set()
        worker.join(timeout=60)
        took = first[1] - killed_at
        print(f"failover: first successful put {took:.2f} s after the kill "
              f"(lease TTL {TTL} s; target <= {2 * TTL} s)")
        # The target is 2 x TTL; the bound allows a loaded machine.
        assert took < 6 * TTL, took
        # What failed meanwhile failed with a reason a caller can act on.
        reasons = {r[3] for r in results if r[3] is not None}
        # (INVALID_PARAMS: a put on the new leader before the store server
        # remounted there: "replica_num 1 above the 0 mounted segments".)
        assert reasons <= {"NOT_LEADER", "TIMEOUT", "IO", "NO_AVAILABLE_HANDLE", "SHUTDOWN",
                           "RPC_FAIL", "SEGMENT_NOT_FOUND", "OBJECT_ALREADY_EXISTS",
                           "INVALID_PARAMS"}, reasons
        # The store server remounted its segment on the new leader, and an
        # etcd:// client (crescentctl) reaches it there.
        assert client.get(first[2]) == value
        assert "remount" in open(tmp_path / "store.log", "rb").read().decode(errors="replace")
        r = subprocess.run([binary("crescentctl"), "--rpc", master, "ping"], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        for n in cluster:
            if n is not leader:
                assert n.ha()["term"] == new_term
        client.close()
    finally:
        stop_store = store.poll() is None
        if stop_store:
            store.kill()
        store.wait(timeout=20)
        store_log.close()


def test_failover_with_replication_loses_no_acknowledged_put(etcd, nodes, tmp_path):
    e = etcd()
    cluster = []
    for i in range(3):
        cluster += nodes(e.endpoints(), 1, "--state-dir", str(tmp_path / f"state{i}"),
                         "--durability", "sync", "--replication", "sync",
                         "--replication-address", f"127.0.0.1:{free_port()}")
    leader, term = wait_for(lambda: leader_of(cluster), "a leader", timeout=30)
    master = f"etcd://{e.endpoints()}"
    store_log = open(tmp_path / "store.log", "wb")
    store = subprocess.Popen(
        [binary("crescent-store"), "--master", master, "--segment-name", "seg0",
         "--segment-size", str(64 << 20), "--no-pin", "--ping-interval-ms", "200",
         "--data-address", f"127.0.0.1:{free_port()}"],
        stdout=store_log, stderr=subprocess.STDOUT)
    try:
        client = Store()
        client.setup(master_server_address=master, timeout_ms=5000)
        wait_for(lambda: store_stats(leader)["segments"] == 1, "the segment mounted", timeout=60)
        # Standbys following the leader's stream before the load.
        wait_for(lambda: all(n.ha_all().get("connected") for n in cluster if n is not leader),
                 "standbys streaming", timeout=60)
        acked = {}
        for i in range(200):
            value = os.urandom(1024 + i)
            client.put(f"r{i}", value)
            acked[f"r{i}"] = value
        leader.proc.kill()
        leader.proc.wait(timeout=10)
        new, new_term = wait_for(lambda: leader_of(cluster, exclude=(leader,)),
                                 "a new leader", timeout=30)
        assert new_term > term
        # Every acknowledged put is there, with its bytes (the store server
        # still holds them; the new leader knows where).
        def all_readable():
            try:
                return all(client.get(k) == v for k, v in acked.items())
            except CrescentError:
                return False
        wait_for(all_readable, "every acknowledged put readable on the new leader", timeout=60)
        client.put("after", b"x" * 100)
        assert client.get("after") == b"x" * 100
        client.close()
    finally:
        if store.poll() is None:
            store.kill()
        store.wait(timeout=20)
        store_log.close()


def store_stats(node):
    status, body = http_get(node.http, "/api/v1/stats", timeout=10)
    assert status == 200, (status, body)
    return json.loads(body)


def mount_and_put(c, i):
    """A mutating call straight to one crescentd: its status code."""
    resp = c.put_start(f"fenced{i}", 4096)
    return resp.status_code


def test_paused_leader_is_fenced_and_follows(etcd, nodes):
    e = etcd()
    a, b = nodes(e.endpoints(), 2)
    leader, term = wait_for(lambda: leader_of([a, b]), "a leader", timeout=30)
    other = b if leader is a else a
    c = MasterClient(leader.rpc, client_id=(7, 7), timeout=10.0)
    assert c.mount_segment("seg", 64 << 20).status_code == 0
    assert mount_and_put(c, 0) == 0
    before = store_stats(leader)
    assert before["objects"] == 1
    leader.signal(signal.SIGSTOP)
    try:
        new, new_term = wait_for(lambda: leader_of([other]), "the standby taking over",
                                 timeout=30)
        assert new_term > term
    finally:
        leader.signal(signal.SIGCONT)
    # Woken: its lease is over, so every write is refused, the first one too.
    codes = [mount_and_put(c, i) for i in range(1, 21)]
    assert set(codes) == {NOT_LEADER}, codes
    resp = c.put_start("fenced-late", 4096)
    assert "not the leader" in resp.error_message
    h = wait_for(lambda: (lambda h: h if h["role"] == "standby" and h["term"] == new_term
                          else None)(leader.ha()), "the old leader following", timeout=30)
    assert h["leader"]["rpc"] == other.rpc
    assert h["counts"]["step_downs"] >= 1
    # No write landed on it: its store holds what it held before the pause,
    # and none of the refused keys exists there (reads are served).
    after = store_stats(leader)
    assert (after["objects"], after["inflight_puts"], after["segments"]) == \
        (before["objects"], before["inflight_puts"], before["segments"])
    pb = load_proto()
    for i in range(1, 21):
        assert not c.call(pb.EXIST_KEY, pb.ExistKeyRequest(key=f"fenced{i}")).exists
    assert "stepped down" in leader.text()
    c.close()


def test_etcd_down_leader_serves_its_lease_then_steps_down(etcd, nodes):
    e = etcd()
    ttl = 3
    a, b = nodes(e.endpoints(), 2, ttl=ttl)
    leader, term = wait_for(lambda: leader_of([a, b]), "a leader", timeout=30)
    c = MasterClient(leader.rpc, client_id=(9, 9), timeout=10.0)
    assert c.mount_segment("seg", 64 << 20).status_code == 0
    killed_at = time.monotonic()
    e.kill("m0")
    outcomes = []
    for i in range(10000):
        sent = time.monotonic()
        code = mount_and_put(c, i)
        outcomes.append((sent, code))
        if code == NOT_LEADER:
            break
        time.sleep(0.02)
    refused_at = outcomes[-1][0]
    assert outcomes[-1][1] == NOT_LEADER
    # It served writes after etcd went away, and none once its lease could
    # have ended (sent after kill + TTL); it stopped by then.
    assert outcomes[0][1] == 0, outcomes[:3]
    assert all(sent - killed_at < ttl for sent, code in outcomes if code == 0)
    print(f"etcd down: writes answered for {max(s for s, k in outcomes if k == 0) - killed_at:.2f}"
          f" s, refused from {refused_at - killed_at:.2f} s (lease TTL {ttl} s)")
    assert leader.ha()["role"] == "standby"
    assert leader_of([a, b]) is None
    # etcd back (same data): a leader again.
    e.start("m0")
    wait_for(lambda: leader_of([a, b]), "a leader once etcd is back", timeout=60)
    c.close()


def test_three_member_etcd_survives_one_member(etcd, nodes):
    e = etcd(3)
    endpoints = e.endpoints(first="m0")
    cluster = nodes(endpoints, 2)
    leader, term = wait_for(lambda: leader_of(cluster), "a leader", timeout=30)
    e.kill("m0")  # the first endpoint every crescentd and client tries
    leader.proc.kill()
    leader.proc.wait(timeout=10)
    new, new_term = wait_for(lambda: leader_of(cluster, exclude=(leader,)),
                             "a leader elected on two of three etcd members", timeout=60)
    assert new_term > term
    r = subprocess.run([binary("crescentctl"), "--rpc", f"etcd://{endpoints}", "ping"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert new.rpc.split("//")[1].split(":")[1] in r.stdout or "ready" in r.stdout
