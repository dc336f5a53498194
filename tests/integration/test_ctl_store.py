"""crescentctl's store commands against a crescentd on free ports: a two-phase
put across invocations (--client-id / CRESCENT_CLIENT_ID), get, exist, rm,
rm-regex, ls, tenants, and the exit codes (1 server failure, 2 usage,
3 unreachable)."""
import os
import subprocess
import uuid

import pytest

from conftest import binary, free_port

LEASE_MS = 60000  # long enough that a lease taken in a test is still held


@pytest.fixture
def store(daemon):
    rpc = f"tcp://127.0.0.1:{free_port()}"
    d = daemon("--rpc-address", rpc,
               "--event-address", f"tcp://127.0.0.1:{free_port()}",
               "--replay-address", f"tcp://127.0.0.1:{free_port()}",
               "--default-kv-lease-ttl", str(LEASE_MS))
    return d, rpc


def ctl(store, *args, client_id=None, env_id=None, timeout_ms=5000):
    """Runs crescentctl; returns (exit code, stdout, stderr)."""
    d, rpc = store
    env = dict(os.environ)
    env.pop("CRESCENT_CLIENT_ID", None)
    if env_id is not None:
        env["CRESCENT_CLIENT_ID"] = env_id
    cmd = [binary("crescentctl"), "--rpc", rpc, "--http", f"127.0.0.1:{d.port}",
           "--timeout-ms", str(timeout_ms), *args]
    if client_id is not None:
        cmd += ["--client-id", client_id]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=30, env=env)
    return p.returncode, p.stdout, p.stderr


def mount(store, owner, name="seg0", size="64M"):
    rc, out, err = ctl(store, "mount", name, size, "--endpoint", "127.0.0.1:7000",
                       client_id=owner)
    assert rc == 0, err
    assert f"mounted {name}" in out


def put(store, key, owner, tenant=None):
    extra = ["--tenant", tenant] if tenant else []
    rc, _, err = ctl(store, "put-start", key, "4K", *extra, client_id=owner)
    assert rc == 0, err
    rc, _, err = ctl(store, "put-end", key, *extra, client_id=owner)
    assert rc == 0, err


def test_two_phase_put_across_invocations(store):
    owner = str(uuid.uuid4())
    mount(store, owner)
    rc, out, err = ctl(store, "put-start", "k1", "4K", client_id=owner)
    assert rc == 0, err
    assert owner in out and "seg0" in out
    assert "INITIALIZED" in out or "PROCESSING" in out
    # Not ready yet: exists only once the put has ended.
    rc, out, _ = ctl(store, "exist", "k1")
    assert rc == 1 and out.strip() == "k1 is being written (no put-end yet)"
    # Another client (a fresh random id) may not end someone else's put.
    rc, _, err = ctl(store, "put-end", "k1")
    assert rc == 1
    assert "ILLEGAL_CLIENT" in err
    rc, out, err = ctl(store, "put-end", "k1", client_id=owner)
    assert rc == 0, err
    assert "put ended: k1" in out
    rc, out, err = ctl(store, "replicas", "k1")
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0] == "k1: 1 replica"
    assert lines[1].split() == ["REPLICA", "TIER", "STATUS", "SEGMENT", "BUFFER", "SIZE",
                                "ENDPOINT/FILE"]
    assert lines[2].split()[1:4] == ["memory", "COMPLETE", "seg0"]
    assert lines[2].split()[5:] == ["4096", "127.0.0.1:7000"]
    rc, out, _ = ctl(store, "exist", "k1")
    assert rc == 0 and out.strip() == "k1 exists"


def test_client_id_from_environment_and_revoke(store):
    owner = str(uuid.uuid4())
    mount(store, owner)
    rc, out, err = ctl(store, "put-start", "k2", "8K", "--replicas", "1", env_id=owner)
    assert rc == 0, err
    assert f"--client-id {owner}" in out  # tells the user how to finish
    rc, _, err = ctl(store, "put-revoke", "k2", env_id=owner)
    assert rc == 0, err
    rc, _, err = ctl(store, "replicas", "k2")
    assert rc == 1 and "OBJECT_NOT_FOUND" in err


def test_remove_refused_while_leased_unless_forced(store):
    owner = str(uuid.uuid4())
    mount(store, owner)
    put(store, "leased", owner)
    rc, _, _ = ctl(store, "replicas", "leased")  # takes a lease of LEASE_MS
    assert rc == 0
    rc, _, err = ctl(store, "rm", "leased")
    assert rc == 1 and "OBJECT_HAS_LEASE" in err
    rc, out, err = ctl(store, "rm", "leased", "--force")
    assert rc == 0, err
    assert out.strip() == "removed leased"
    rc, _, err = ctl(store, "rm", "leased", "--force")
    assert rc == 1 and "OBJECT_NOT_FOUND" in err


def test_rm_regex_and_ls(store):
    owner = str(uuid.uuid4())
    mount(store, owner)
    for key in ("a1", "a2", "b1"):
        put(store, key, owner)
    rc, out, err = ctl(store, "ls", "--prefix", "a")
    assert rc == 0, err
    keys = [line.split()[0] for line in out.splitlines()[1:-1]]
    assert sorted(keys) == ["a1", "a2"]
    assert out.splitlines()[-1].startswith("2 objects")
    rc, out, err = ctl(store, "rm-regex", "^a")
    assert rc == 0, err
    assert out.strip() == "removed 2 objects"
    rc, out, _ = ctl(store, "ls")
    assert [line.split()[0] for line in out.splitlines()[1:-1]] == ["b1"]
    rc, _, err = ctl(store, "rm-regex", "(unclosed")
    assert rc == 1 and "INVALID_PARAMS" in err


def test_tenants_are_separate(store):
    owner = str(uuid.uuid4())
    mount(store, owner)
    put(store, "shared", owner, tenant="t1")
    rc, _, _ = ctl(store, "exist", "shared", "--tenant", "t1")
    assert rc == 0
    rc, out, _ = ctl(store, "exist", "shared")
    assert rc == 1 and "does not exist" in out
    rc, out, _ = ctl(store, "ls", "--tenant", "t1")
    assert rc == 0 and [line.split()[0] for line in out.splitlines()[1:-1]] == ["shared"]
    rc, out, _ = ctl(store, "ls")
    assert rc == 0 and out.splitlines()[-1] == "0 objects"


def test_ping(store):
    rc, out, err = ctl(store, "ping")
    assert rc == 0, err
    assert "ready" in out and "client ttl" in out


@pytest.mark.parametrize("args", [
    ["put-start", "k"],                            # SIZE missing
    ["put-start", "k", "lots"],                    # SIZE not a number
    ["put-start", "k", "-1"],                      # SIZE negative
    ["put-start", "k", "4K", "--replicas", "0"],
    ["put-start", "", "4K"],                       # empty key
    ["put-start", "k" * 5000, "4K"],               # key over 4096 bytes
    ["put-end", "k", "--client-id", "not-a-uuid"],
    ["get", "k", "--force"],                       # option of another command
    ["rm", "k", "--bogus"],
    ["mount", "seg", "-1"],
    ["mount", "seg", "1M", "--endpoint", ""],
    ["mount", "seg", "1M", "--base", "0xffffffffffffffff"],
    ["rm-regex", "x" * 5000],
    ["ls", "--limit", "0"],
])
def test_usage_errors_exit_2(args):
    # Refused before connecting: the endpoint has no listener, so any attempt
    # to send would end in exit 3, not 2.
    nobody = f"tcp://127.0.0.1:{free_port()}"
    p = subprocess.run([binary("crescentctl"), "--rpc", nobody, "--timeout-ms", "300", *args],
                       capture_output=True, text=True, timeout=30)
    rc, err = p.returncode, p.stderr
    assert rc == 2, err
    assert err.startswith("crescentctl")


def test_unreachable_exits_3():
    nobody = f"tcp://127.0.0.1:{free_port()}"
    p = subprocess.run([binary("crescentctl"), "--rpc", nobody, "--timeout-ms", "300",
                        "get", "k"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 3
    assert "nothing accepts connections" in p.stderr  # refused at once, not after 300 ms


def test_store_help_documents_client_id(store):
    rc, out, _ = ctl(store, "put-end", "--help")
    assert rc == 0
    assert "CRESCENT_CLIENT_ID" in out and "--client-id" in out
    p = subprocess.run([binary("crescentctl"), "--help"], capture_output=True, text=True)
    assert p.returncode == 0
    for command in ("mount", "put-start", "put-end", "put", "get", "replicas", "exist", "rm-regex", "ls", "ping"):
        assert f"\n  {command} " in p.stdout


def test_ls_falls_back_to_rpc_without_http(store):
    owner = str(uuid.uuid4())
    mount(store, owner)
    for key in ("x/1", "x/2", "y.1", "yz1"):
        put(store, key, owner)
    d, rpc = store
    dead_http = f"127.0.0.1:{free_port()}"  # nothing listens: ls asks over RPC
    p = subprocess.run([binary("crescentctl"), "--rpc", rpc, "--http", dead_http, "ls",
                        "--prefix", "x/"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert sorted(line.split()[0] for line in lines[1:-1]) == ["x/1", "x/2"]
    assert lines[-1] == "2 objects"
    # The prefix is literal, not a regex: "y." matches "y.1" but not "yz1".
    p = subprocess.run([binary("crescentctl"), "--rpc", rpc, "--http", dead_http, "ls",
                        "--prefix", "y."], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    assert [line.split()[0] for line in p.stdout.splitlines()[1:-1]] == ["y.1"]


def test_store_stats(store):
    owner = str(uuid.uuid4())
    mount(store, owner)
    put(store, "s1", owner)
    rc, out, err = ctl(store, "store-stats")
    assert rc == 0, err
    stats = dict(line.split() for line in out.splitlines())
    assert stats["objects"] == "1"
    assert stats["segments"] == "1"


def test_pipelined_client_end_to_end(store):
    """libcrescent's pipelined path (submit/poll, out-of-order replies over
    several connections) against crescentd, driven by bench/master in a tiny
    configuration: every operation must succeed."""
    from conftest import BIN_DIR
    bench = os.path.join(BIN_DIR, "..", "bench", "master")
    if not os.access(bench, os.X_OK):
        pytest.skip(f"{bench} is not built (run zig build bench)")
    _, rpc = store
    p = subprocess.run([bench, "--rpc", rpc, "--threads", "1,3", "--ops", "300",
                        "--depth", "7"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = [line for line in p.stdout.splitlines() if line.startswith("rpc ")]
    assert len(lines) == 8  # 4 workloads x 2 concurrencies
    assert "failed" not in p.stdout, p.stdout
    rc, out, _ = ctl(store, "store-stats")
    stats = dict(line.split() for line in out.splitlines())
    assert stats["objects"] == "0"  # remove(force) took every object the bench put


def test_sync_bench_end_to_end(store):
    """bench/master_sync (issue 14's driver) in a tiny configuration: every
    case against crescentd and both echo ceilings succeeds, crescentd's CPU
    per call is read, and the bench removes every object it wrote."""
    from conftest import BIN_DIR
    bench = os.path.join(BIN_DIR, "..", "bench", "master_sync")
    if not os.access(bench, os.X_OK):
        pytest.skip(f"{bench} is not built (run zig build bench)")
    d, rpc = store
    p = subprocess.run([bench, "--rpc", rpc, "--server-pid", str(d.proc.pid),
                        "--threads", "1,3", "--seconds", "0.2", "--rounds", "1"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "failed" not in p.stdout, p.stdout
    rows = [[c.strip() for c in line.split("|")[1:-1]]
            for line in p.stdout.splitlines() if line.startswith("| ")]
    targets = [r[2] for r in rows]
    assert targets.count("crescent") == 5 * 2, p.stdout  # 5 cases x 2 concurrencies
    assert targets.count("zmq-echo") == targets.count("tcp-echo") == 5 * 2, p.stdout
    for r in rows:
        if r[2] == "crescent":  # CPU per call, and throughput against both echoes
            assert float(r[8]) >= 0 and r[9].endswith("x") and r[11].endswith("x"), r
    rc, out, _ = ctl(store, "store-stats")
    stats = dict(line.split() for line in out.splitlines())
    assert stats["objects"] == "0"
