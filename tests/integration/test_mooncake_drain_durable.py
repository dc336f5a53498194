"""Drain jobs survive a restart (docs/mooncake.md, docs/durability.md): with
--state-dir a job is in the operation log, so crescentd killed with SIGKILL
in the middle of a drain comes back listing it with the progress it had, and
resumes it to the end."""
import json
import os
import sys
import time

import pytest

from conftest import BIN_DIR, binary, free_port, http_get, wait_for
from test_mooncake_drain import drain, metrics_port, query, token_file, wait_job
from test_tasks_data import Store as StoreServer, segments_of

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
os.environ.setdefault("CRESCENT_LIB", os.path.join(BIN_DIR, "..", "lib", "libcrescent.so"))
from crescent import Store  # noqa: E402

OBJECTS = 40


@pytest.mark.parametrize("snapshots", [False, True], ids=["log", "snapshot"])
def test_drain_job_resumes_after_kill9(daemon, tmp_path, snapshots):
    """With snapshots every 8 records, the job's early records are in a
    snapshot only (the logs before it dropped): snapshots carry the jobs."""
    binary("crescent-store")
    extra = ("--snapshot-every-records", "8") if snapshots else ()
    rpc = f"tcp://127.0.0.1:{free_port()}"
    d = daemon("--rpc-address", rpc, "--local-segment-size", "0",
               "--admin-token-file", token_file(tmp_path), "--state-dir", str(tmp_path / "state"),
               "--durability", "sync", "--client-ttl", "60", *extra)
    port = metrics_port(d)
    servers = [StoreServer(rpc, tmp_path / f"store{i}.log", f"seg{i}") for i in range(2)]
    try:
        wait_for(lambda: json.loads(http_get(d.port, "/api/v1/stats")[1])["segments"] == 2,
                 "both segments mounted", timeout=60)
        client = Store()
        client.setup("localhost", "", 0, 0, "tcp", "", rpc, timeout_ms=20000)
        payloads = {}
        for i in range(OBJECTS):
            key, data = f"obj{i}", os.urandom(16384 + i)
            client.put(key, data, {"preferred_segment": "seg0"})
            payloads[key] = data
        client.close()
        status, _, body = drain(port, {"segments": ["seg0"], "max_concurrency": 1})
        assert status == 200, body
        job = json.loads(body)["job_id"]
        seen = {}

        def some_moved():
            seen.update(query(port, job))
            return seen["succeeded_units"] >= 3
        wait_for(some_moved, f"a few objects moved (last: {seen})", timeout=180)
        assert seen["status_name"] == "RUNNING", seen
        time.sleep(0.5)  # the tick's record reaches the log (an answer does not wait for it)
        before = query(port, job)
        assert before["succeeded_units"] < OBJECTS, "drained before the kill: more objects"
        d.proc.kill()  # SIGKILL mid-drain: no shutdown
        d.proc.wait()
        state = sorted(os.listdir(tmp_path / "state"))
        if snapshots:  # the log that held the job's creation is gone
            assert any(n.endswith(".snap") for n in state), state
            assert not any(n.startswith("store-0000000000000001") for n in state), state

        d2 = daemon(*d.args[4:])  # the same ports and --state-dir
        after = query(port, job)
        assert after["job_id"] == job and after["segments"] == ["seg0"], after
        assert after["status_name"] in ("RUNNING", "PLANNING", "CREATED"), after
        assert after["succeeded_units"] >= before["succeeded_units"], (before, after)
        assert after["migrated_bytes"] >= before["migrated_bytes"], (before, after)
        assert after["created_at_ms_epoch"] == before["created_at_ms_epoch"]
        done = wait_job(port, job, "SUCCEEDED", timeout=300)
        assert before["succeeded_units"] <= done["succeeded_units"] <= OBJECTS, done
        assert done["failed_units"] == 0, done
        # Every object is off seg0 with its bytes, and seg0 is unmounted.
        client = Store()
        client.setup("localhost", "", 0, 0, "tcp", "", rpc, timeout_ms=20000)
        for key, data in payloads.items():
            assert segments_of(d2, key) == ["seg1"], key
            assert client.get(key) == data, key
        client.close()
        names = [s["name"] for s in
                 json.loads(http_get(d2.port, "/api/v1/segments")[1])["segments"]]
        assert names == ["seg1"], names
    finally:
        for s in servers:
            s.stop()
