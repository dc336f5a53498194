"""Copy/move tasks with real bytes: crescentd as the master, two crescent-store
processes as the executors (each runs the tasks whose source it holds, after
its heartbeat), readers reading the key with `crescentctl get` throughout.

Each object is put with `crescentctl put --preferred`, moved or copied with
`crescentctl move/copy --wait`, then read back: after a move the only replica
is the target, so a correct read proves the executor wrote the bytes there."""
import json
import os
import signal
import subprocess
import threading
import time

import zmq

from conftest import binary, free_port, http_get, wait_for
from store_server import StoreServer
from test_events import recv_batch

SEGMENT = 64 << 20
SIZES = [4096, 64 << 10, 4 << 20]


class Store(StoreServer):
    """A store server pinging every 100 ms, killed (SIGKILL) unless told otherwise."""

    def __init__(self, rpc, log_path, name):
        super().__init__(rpc, log_path, name, segment_size=SEGMENT, ping_ms=100)

    def stop(self, sig=signal.SIGKILL):
        return super().stop(sig)


def start(daemon, tmp_path, *extra, stores=2, local=False):
    binary("crescent-store")  # skips the test where the store server is not built
    rpc = f"tcp://127.0.0.1:{free_port()}"
    d = daemon("--rpc-address", rpc, "--event-address", f"tcp://127.0.0.1:{free_port()}",
               "--replay-address", f"tcp://127.0.0.1:{free_port()}",
               "--local-segment-size", str(SEGMENT) if local else "0", *extra)
    d.events = d.args[d.args.index("--event-address") + 1]
    servers = [Store(rpc, tmp_path / f"store{i}.log", f"seg{i}") for i in range(stores)]
    wait_for(lambda: json.loads(http_get(d.port, "/api/v1/stats")[1])["segments"] ==
             stores + local, "every segment mounted")
    return d, rpc, servers


def ctl(rpc, *args, check=True):
    p = subprocess.run([binary("crescentctl"), "--rpc", rpc, "--timeout-ms", "10000", *args],
                       capture_output=True, timeout=120)
    if check:
        assert p.returncode == 0, p.stderr.decode()
    return p


def segments_of(d, key):
    status, body = http_get(d.port, f"/api/v1/objects/{key}")
    assert status == 200, body
    return sorted(r["segment"] for r in json.loads(body)["replicas"]
                  if r["status"] == "COMPLETE")


def test_copy_and_move_move_the_bytes_while_readers_read(daemon, tmp_path):
    d, rpc, stores = start(daemon, tmp_path, "--default-kv-lease-ttl", "500")
    try:
        for size in SIZES:
            key = f"obj-{size}"
            src = tmp_path / f"{key}.in"
            payload = os.urandom(size)
            src.write_bytes(payload)
            ctl(rpc, "put", key, str(src), "--preferred", "seg0")
            assert segments_of(d, key) == ["seg0"]
            stop, bad, good = threading.Event(), [], []

            def reader():
                while not stop.is_set():
                    p = ctl(rpc, "get", key, "-", check=False)
                    if p.returncode == 0 and p.stdout == payload:
                        good.append(1)
                    elif p.returncode == 0 or b"past the" not in p.stderr:
                        bad.append((p.returncode, len(p.stdout), p.stderr[-200:]))
                    # else: the read outlasted the lease (a loaded machine) and
                    # was refused rather than returned: the safe answer.

            readers = [threading.Thread(target=reader) for _ in range(2)]
            for t in readers:
                t.start()
            try:
                # The readers' leases hold the move's source: the executor's
                # copy is committed (both replicas readable) and the source
                # waits until the readers stop and their lease runs out.
                task = ctl(rpc, "move", key, "seg0", "seg1").stdout.decode().strip()
                wait_for(lambda: b"copied" in ctl(rpc, "task", task).stdout or
                         b"SUCCESS" in ctl(rpc, "task", task).stdout, "the move's copy")
                assert segments_of(d, key) in (["seg0", "seg1"], ["seg1"])
            finally:
                stop.set()
                for t in readers:
                    t.join()
            assert not bad, bad[:3]
            assert b"SUCCESS" in ctl(rpc, "task", task, "--wait").stdout
            assert segments_of(d, key) == ["seg1"]
            stop.clear()
            readers = [threading.Thread(target=reader) for _ in range(2)]
            for t in readers:
                t.start()
            try:
                copied = ctl(rpc, "copy", key, "seg0", "--wait")
                assert b"SUCCESS" in copied.stdout
            finally:
                stop.set()
                for t in readers:
                    t.join()
            assert not bad, bad[:3]
            assert segments_of(d, key) == ["seg0", "seg1"]
            assert ctl(rpc, "get", key, "-").stdout == payload
    finally:
        for s in stores:
            s.stop()


def test_executor_stopped_mid_task_fails_and_frees(daemon, tmp_path):
    d, rpc, stores = start(daemon, tmp_path, "--task-timeout-sec", "3")
    try:
        src = tmp_path / "k.in"
        payload = os.urandom(1 << 20)
        src.write_bytes(payload)
        ctl(rpc, "put", "k", str(src), "--preferred", "seg0")
        used = json.loads(http_get(d.port, "/api/v1/stats")[1])["used_bytes"]
        stores[0].proc.send_signal(signal.SIGSTOP)  # the executor stops answering
        try:
            task = ctl(rpc, "copy", "k", "seg1").stdout.decode().strip()
            waited = ctl(rpc, "task", task, "--wait", check=False)
            assert waited.returncode == 1 and b"deadline passed" in waited.stdout
            assert json.loads(http_get(d.port, "/api/v1/stats")[1])["used_bytes"] == used
        finally:
            stores[0].proc.send_signal(signal.SIGCONT)
        assert segments_of(d, "k") == ["seg0"]  # the source is intact
        assert ctl(rpc, "get", "k", "-").stdout == payload
    finally:
        for s in stores:
            s.stop()


def task_json(d, task):
    status, body = http_get(d.port, f"/api/v1/tasks/{task}")
    assert status == 200, body
    return json.loads(body)


def used_bytes(d):
    return json.loads(http_get(d.port, "/api/v1/stats")[1])["used_bytes"]


class Subscriber:
    """A seed-000 subscriber on crescentd's PUB socket, made ready by putting
    probe keys until one of their events arrives."""

    def __init__(self, d, rpc, tmp_path, segment):
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.SUB)
        self.sock.setsockopt(zmq.SUBSCRIBE, b"mooncake")
        self.sock.connect(d.events)
        probe = tmp_path / "probe.in"
        probe.write_bytes(b"p" * 4096)
        for i in range(200):
            ctl(rpc, "put", f"probe-{i}", str(probe), "--preferred", segment)
            if self.sock.poll(200):
                break
        else:
            raise AssertionError("the subscription never took effect")
        self.events = []

    def drain(self):
        while self.sock.poll(0):
            self.events += recv_batch(self.sock, b"mooncake")[1]

    def updates(self, key):
        """The replica lists (endpoints, sorted) of key's BlockUpdateEvents so far."""
        self.drain()
        return [sorted(loc for _, loc in e[2]) for e in self.events
                if e[0] == "BlockUpdateEvent" and e[1] == key]

    def close(self):
        self.ctx.destroy(linger=0)


def endpoints(d, key):
    status, body = http_get(d.port, f"/api/v1/objects/{key}")
    assert status == 200, body
    return {r["segment"]: r["endpoint"] for r in json.loads(body)["replicas"]}


def test_killed_executor_task_goes_to_another_replica_holder(daemon, tmp_path):
    """The executor of a copy (the store holding the named source) is stopped
    (so the task is provably not done), then killed: once crescentd expires
    its client (--client-ttl), the task is handed to the store holding the
    other complete replica, which copies it; the target was never readable
    before, the surviving source stays readable, a seed-000 subscriber sees
    the replica lists change, and the old reservation is freed."""
    d, rpc, stores = start(daemon, tmp_path, "--client-ttl", "4", "--task-timeout-sec", "10",
                           "--put-start-release-timeout-sec", "2",
                           "--put-start-discard-timeout-sec", "1", stores=3)
    sub = Subscriber(d, rpc, tmp_path, "seg1")
    try:
        src = tmp_path / "k.in"
        payload = os.urandom(1 << 20)
        src.write_bytes(payload)
        ctl(rpc, "put", "k", str(src), "--preferred", "seg0")
        assert b"SUCCESS" in ctl(rpc, "copy", "k", "seg1", "--wait").stdout
        assert segments_of(d, "k") == ["seg0", "seg1"]
        eps = endpoints(d, "k")
        base_used = used_bytes(d)
        stores[0].proc.send_signal(signal.SIGSTOP)
        task = ctl(rpc, "copy", "k", "seg2", "--source", "seg0").stdout.decode().strip()
        first = task_json(d, task)
        assert first["status"] == "PENDING" and first["source"]["segment"] == "seg0"
        lost = first["assigned_client"]
        assert used_bytes(d) == base_used + (1 << 20)  # reserved, not readable
        assert segments_of(d, "k") == ["seg0", "seg1"]
        stores[0].stop(signal.SIGKILL)
        waited = ctl(rpc, "task", task, "--wait", check=False)
        assert waited.returncode == 0, (waited.stdout, waited.stderr)
        done = task_json(d, task)
        assert done["status"] == "SUCCESS" and done["assigned_client"] != lost
        assert lost in done["message"] and "reassigned" in done["message"]
        assert segments_of(d, "k") == ["seg1", "seg2"]
        assert ctl(rpc, "get", "k", "-").stdout == payload
        # seg0's replica went with its client, then the copy added seg2's.
        wait_for(lambda: sorted([eps["seg1"], endpoints(d, "k")["seg2"]]) in sub.updates("k"),
                 "the commit's BlockUpdateEvent")
        seen = sub.updates("k")
        assert [eps["seg1"]] in seen
        assert seen.index([eps["seg1"]]) < seen.index(sorted([eps["seg1"],
                                                              endpoints(d, "k")["seg2"]]))
        # The first reservation was parked (the lost executor might only be
        # stopped and write late), then freed: two replicas of 1 MiB remain.
        wait_for(lambda: used_bytes(d) == base_used, "the parked reservation freed", timeout=60)
    finally:
        sub.close()
        for s in stores:
            s.stop()


def test_killed_executor_without_another_replica_fails_and_frees(daemon, tmp_path):
    """No other store holds the object: the task FAILS as soon as crescentd
    expires the killed executor, naming it, and the reserved target is freed
    at once (not at the task's deadline); the other store keeps serving."""
    d, rpc, stores = start(daemon, tmp_path, "--client-ttl", "4")
    sub = Subscriber(d, rpc, tmp_path, "seg1")
    try:
        src = tmp_path / "k.in"
        src.write_bytes(os.urandom(1 << 20))
        ctl(rpc, "put", "k", str(src), "--preferred", "seg0")
        keep = tmp_path / "keep.in"
        keep.write_bytes(os.urandom(64 << 10))
        ctl(rpc, "put", "keep", str(keep), "--preferred", "seg1")
        before = used_bytes(d)
        stores[0].proc.send_signal(signal.SIGSTOP)
        task = ctl(rpc, "copy", "k", "seg1").stdout.decode().strip()
        lost = task_json(d, task)["assigned_client"]
        assert task_json(d, task)["status"] == "PENDING"
        stores[0].stop(signal.SIGKILL)
        started = time.monotonic()
        waited = ctl(rpc, "task", task, "--wait", check=False)
        assert waited.returncode == 1
        assert time.monotonic() - started < 120  # long before the 300 s deadline
        failed = task_json(d, task)
        assert failed["status"] == "FAILED" and lost in failed["message"]
        assert "reserved replicas freed" in failed["message"]
        assert "deadline" not in failed["message"]
        wait_for(lambda: used_bytes(d) == before - (1 << 20), "k's replica and reservation gone")
        assert ctl(rpc, "get", "keep", "-").stdout == keep.read_bytes()
        # k's only replica went with the killed store: its removal is published.
        sub.drain()
        assert any(e[0] == "BlockUpdateEvent" and e[1] == "k"
                   for e in sub.events)
    finally:
        sub.close()
        for s in stores:
            s.stop()


def metric(d, name):
    body = http_get(d.port, "/metrics")[1].decode()
    for line in body.splitlines():
        if line.startswith(name + " "):
            return int(float(line.split()[1]))
    raise AssertionError(f"no metric {name}")


def test_local_segment_runs_its_tasks_and_receives_the_stores(daemon, tmp_path):
    """crescentd's own local segment as a task's source: crescentd's data
    actor runs it (read in place, XXH3 checked, targets written through the
    transfer layer); as a target, the store holding the source writes into
    it.  Copy and move both ways, each read back from the target alone."""
    d, rpc, stores = start(daemon, tmp_path, stores=1, local=True)
    local = "crescentd-local"
    try:
        for size in (0, 64 << 10, 4 << 20):
            payload = os.urandom(size)
            src = tmp_path / f"{size}.in"
            src.write_bytes(payload)
            # local → seg0: copy then move, run by crescentd itself.
            ctl(rpc, "put", f"l{size}", str(src), "--preferred", local)
            assert segments_of(d, f"l{size}") == [local]
            ran = metric(d, "crescent_data_tasks_run_total")
            assert b"SUCCESS" in ctl(rpc, "copy", f"l{size}", "seg0", "--wait").stdout
            assert segments_of(d, f"l{size}") == [local, "seg0"]
            ctl(rpc, "put", f"m{size}", str(src), "--preferred", local)
            assert b"SUCCESS" in ctl(rpc, "move", f"m{size}", local, "seg0", "--wait").stdout
            assert segments_of(d, f"m{size}") == ["seg0"]
            assert ctl(rpc, "get", f"m{size}", "-").stdout == payload  # seg0's bytes
            assert metric(d, "crescent_data_tasks_run_total") == ran + 2
            # seg0 → local: run by the store, written into crescentd's segment.
            ctl(rpc, "put", f"s{size}", str(src), "--preferred", "seg0")
            assert b"SUCCESS" in ctl(rpc, "move", f"s{size}", "seg0", local, "--wait").stdout
            assert segments_of(d, f"s{size}") == [local]
            assert ctl(rpc, "get", f"s{size}", "-").stdout == payload  # local's bytes
            ctl(rpc, "put", f"c{size}", str(src), "--preferred", "seg0")
            assert b"SUCCESS" in ctl(rpc, "copy", f"c{size}", local, "--wait").stdout
            assert segments_of(d, f"c{size}") == [local, "seg0"]
            assert metric(d, "crescent_data_tasks_run_total") == ran + 2
        assert metric(d, "crescent_data_tasks_failed_total") == 0
    finally:
        for s in stores:
            s.stop()
