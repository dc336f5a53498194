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

from conftest import binary, free_port, http_get

SEGMENT = 64 << 20
SIZES = [4096, 64 << 10, 4 << 20]


def wait_for(condition, what, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class Store:
    """One crescent-store process; its log goes to a file (never a full pipe)."""

    def __init__(self, rpc, log_path, name):
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen(
            [binary("crescent-store"), "--master", rpc, "--segment-name", name,
             "--segment-size", str(SEGMENT), "--no-pin", "--ping-interval-ms", "100"],
            stdout=self.log, stderr=subprocess.STDOUT)

    def stop(self, sig=signal.SIGKILL):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        self.proc.wait(timeout=20)
        self.log.close()


def start(daemon, tmp_path, *extra):
    binary("crescent-store")  # skips the test where the store server is not built
    rpc = f"tcp://127.0.0.1:{free_port()}"
    d = daemon("--rpc-address", rpc, "--event-address", f"tcp://127.0.0.1:{free_port()}",
               "--replay-address", f"tcp://127.0.0.1:{free_port()}",
               "--local-segment-size", "0", *extra)
    stores = [Store(rpc, tmp_path / f"store{i}.log", f"seg{i}") for i in range(2)]
    wait_for(lambda: json.loads(http_get(d.port, "/api/v1/stats")[1])["segments"] == 2,
             "both segments mounted")
    return d, rpc, stores


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
