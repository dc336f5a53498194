"""What the tests with a store server share (test_data_path, test_file_tier,
test_ssd_offload, test_ssd_promote, test_tasks_data and the files that import
their Store): one crescent-store process whose log goes to a file (never a
full pipe), crescentctl as the client, and crescentd's metrics and replica
tiers read back."""
import os
import re
import signal
import subprocess

from conftest import binary, http_get

SEGMENT = 64 << 20


class StoreServer:
    """One crescent-store with a `segment_size`-byte segment `name` mounted
    at the master `rpc`, pinging every `ping_ms`, with an SSD tier at `ssd`
    (of `ssd_size`) when given; `extra` flags go last."""

    def __init__(self, rpc, log_path, name="seg0", *extra, segment_size=SEGMENT, ping_ms=200,
                 ssd=None, ssd_size="1G"):
        self.name = name
        self.log_path = log_path
        self.log = open(log_path, "wb")
        ssd_flags = ["--ssd-dir", str(ssd), "--ssd-size", str(ssd_size)] if ssd else []
        self.proc = subprocess.Popen(
            [binary("crescent-store"), "--master", rpc, "--segment-name", name,
             "--segment-size", str(segment_size), "--no-pin", "--ping-interval-ms", str(ping_ms),
             *ssd_flags, *extra],
            stdout=self.log, stderr=subprocess.STDOUT)

    def text(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode()

    def stop(self, sig=signal.SIGTERM):
        """Signals the server (unless it has exited) and returns its exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        rc = self.proc.wait(timeout=30)
        self.log.close()
        return rc


def ctl(rpc, *args, root=None, stdin=None, check=True, timeout_ms=20000):
    """crescentctl against `rpc`; the shared file tier's root is `root` only
    (CRESCENT_ROOT_FS_DIR from the caller's environment is dropped)."""
    env = dict(os.environ)
    env.pop("CRESCENT_ROOT_FS_DIR", None)
    if root is not None:
        env["CRESCENT_ROOT_FS_DIR"] = str(root)
    p = subprocess.run([binary("crescentctl"), "--rpc", rpc, "--timeout-ms", str(timeout_ms),
                        *args], input=stdin, capture_output=True, timeout=120, env=env)
    if check:
        assert p.returncode == 0, p.stderr.decode()
    return p


def metric(d, name):
    """An unlabelled integer metric of crescentd `d`, or None when absent."""
    status, body = http_get(d.port, "/metrics")
    assert status == 200
    m = re.search(rf"^{name} (\d+)$", body.decode(), re.M)
    return int(m.group(1)) if m else None


def tiers(rpc, key, root=None):
    """The TIER column of `crescentctl replicas KEY`, sorted."""
    lines = ctl(rpc, "replicas", key, root=root).stdout.decode().splitlines()
    assert lines[1].split()[:2] == ["REPLICA", "TIER"]
    return sorted(line.split()[1] for line in lines[2:])
