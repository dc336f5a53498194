"""Mooncake's drain jobs (/api/v1/drain_jobs on --metrics-port): a job moves
every object off its segments with move tasks (run by crescent-store, the
source segment's owner), shows its progress, then unmounts them; answers and
refusals in the reference's shapes, side by side with Mooncake's own master
when it is on this machine (docs/mooncake.md)."""
import json
import os
import subprocess
import time

import pytest

from conftest import binary, free_port, http_get, wait_for
from test_mooncake_admin import (MOONCAKE_MASTER, TOKEN, request, same_answer, start_reference,
                                 stop_reference)
from test_mooncake_admin import ctl as client_ctl  # one client id: puts ended by their starter
from test_tasks_data import Store, ctl, segments_of

SEGMENT = 64 << 20
ROLES = os.path.join(os.path.dirname(__file__), "mooncake_roles.py")
MC_DIR = os.path.dirname(os.path.dirname(MOONCAKE_MASTER))


def token_file(tmp_path):
    path = tmp_path / "admin.token"
    path.write_text(TOKEN + "\n")
    os.chmod(path, 0o600)
    return str(path)


def metrics_port(d):
    return int(d.args[d.args.index("--metrics-port") + 1])


def drain(port, body, token=TOKEN):
    return request(port, "POST", "/api/v1/drain_jobs", token=token,
                   body=json.dumps(body).encode() if isinstance(body, dict) else body)


def query(port, job):
    status, _, body = request(port, "GET", f"/api/v1/drain_jobs/query?job_id={job}")
    assert status == 200, body
    return json.loads(body)


def wait_job(port, job, status_name, timeout=180):
    seen = {}

    def done():
        seen.update(query(port, job))
        return seen["status_name"] == status_name
    wait_for(done, f"drain job {status_name} (last: {seen})", timeout=timeout)
    return seen


def segment_status(port, name):
    status, _, body = request(port, "GET", f"/api/v1/segments/status?segment={name}")
    return status, json.loads(body)


def test_drain_moves_every_object_then_unmounts_the_segment(daemon, tmp_path):
    binary("crescent-store")
    rpc = f"tcp://127.0.0.1:{free_port()}"
    d = daemon("--rpc-address", rpc, "--local-segment-size", "0",
               "--admin-token-file", token_file(tmp_path))
    port = metrics_port(d)
    stores = [Store(rpc, tmp_path / f"store{i}.log", f"seg{i}") for i in range(3)]
    try:
        wait_for(lambda: json.loads(http_get(d.port, "/api/v1/stats")[1])["segments"] == 3,
                 "every segment mounted")
        payloads = {}
        for i in range(6):
            key, data = f"obj{i}", os.urandom(4096 * (i + 1))
            (tmp_path / key).write_bytes(data)
            ctl(rpc, "put", key, str(tmp_path / key), "--preferred", "seg0")
            assert segments_of(d, key) == ["seg0"]
            payloads[key] = data
        # Changes need the admin token.
        assert drain(port, {"segments": ["seg0"]}, token=None)[0] == 401
        status, ctype, body = drain(port, {"segments": ["seg0"], "max_concurrency": 2})
        assert (status, ctype) == (200, "application/json; charset=utf-8"), body
        created = json.loads(body)
        assert list(created) == ["success", "job_id", "status", "error_code", "error_message"]
        assert created["success"] is True and created["status"] == "CREATED"
        job = created["job_id"]
        # At once: seg0 takes no new allocations, and a second job on it is refused.
        assert segment_status(port, "seg0")[1]["status_name"] == "DRAINING"
        again = drain(port, {"segments": ["seg0"]})
        assert again[0] == 409 and json.loads(again[2])["error_code"] == -1010
        done = wait_job(port, job, "SUCCEEDED")
        assert done["succeeded_units"] == 6 and done["failed_units"] == 0, done
        assert done["active_units"] == 0 and done["segments"] == ["seg0"]
        assert done["migrated_bytes"] == sum(len(v) for v in payloads.values())
        assert done["type_name"] == "DRAIN" and done["status"] == 3
        assert done["message"] == "Drain job finished successfully"
        assert done["last_updated_at_ms_epoch"] >= done["created_at_ms_epoch"] > 0
        # Every object moved with its bytes; seg0 is unmounted.
        for key, data in payloads.items():
            assert segments_of(d, key) in (["seg1"], ["seg2"]), key
            assert ctl(rpc, "get", key, "-").stdout == data
        assert segment_status(port, "seg0")[0] == 404
        time.sleep(1)  # seg0's owner keeps pinging: it does not mount it again
        names = [s["name"] for s in json.loads(http_get(d.port, "/api/v1/segments")[1])["segments"]]
        assert "seg0" not in names and len(names) == 2
        # A finished job is not canceled.
        cancel = request(port, "POST", f"/api/v1/drain_jobs/cancel?job_id={job}", token=TOKEN)
        assert cancel[0] == 409 and json.loads(cancel[2])["error_code"] == -1010
    finally:
        for s in stores:
            s.stop()


def test_drain_refusals_blocked_units_and_cancel(daemon, tmp_path):
    # A long client TTL: the segment's owner (a crescentctl call) stays known.
    d = daemon("--admin-token-file", token_file(tmp_path), "--client-ttl", "600")
    rpc = d.args[d.args.index("--rpc-address") + 1]
    port = metrics_port(d)
    client_ctl(rpc, "mount", "only", "64M", "--endpoint", "10.0.0.5:1")
    client_ctl(rpc, "put-start", "k1", "4K")
    client_ctl(rpc, "put-end", "k1")
    for body, status, code in [
            (b"not json", 400, -600), (b"", 400, -600), ({}, 400, -600),
            ({"segments": ["nope"]}, 404, -101), ({"segments": ["only", "only"]}, 400, -600),
            ({"segments": ["only"], "max_concurrency": 0}, 400, -600),
            ({"segments": ["only"], "target_segments": ["only"]}, 400, -600),
            ({"segments": ["only"], "target_segments": ["nope"]}, 404, -101)]:
        got = drain(port, body)
        assert got[0] == status and json.loads(got[2])["error_code"] == code, (body, got)
    assert segment_status(port, "only")[1]["status_name"] == "OK"
    # No other segment to move k1 to: the job runs with k1 blocked.
    job = json.loads(drain(port, {"segments": ["only"]})[2])["job_id"]
    running = wait_for(lambda: (lambda q: q if q["status_name"] == "RUNNING" else None)(
        query(port, job)), "the job running")
    assert running["blocked_units"] == 1 and running["active_units"] == 0, running
    assert running["message"] == "Drain job running"
    for path in (f"/api/v1/drain_jobs/query?job_id=1-2", "/api/v1/drain_jobs/query?job_id=x-1"):
        got = request(port, "GET", path)
        assert got[0] == (404 if "1-2" in path else 400), got
    assert request(port, "POST", f"/api/v1/drain_jobs/cancel?job_id={job}")[0] == 401
    status, _, body = request(port, "POST", f"/api/v1/drain_jobs/cancel?job_id={job}",
                              token=TOKEN)
    assert status == 200 and json.loads(body) == {
        "success": True, "job_id": job, "status": "CANCELED", "error_code": 0,
        "error_message": ""}
    assert query(port, job)["status_name"] == "CANCELED"
    assert segment_status(port, "only")[1]["status_name"] == "OK"  # takes allocations again
    assert segments_of(d, "k1") == ["only"]


@pytest.mark.skipif(not os.access(MOONCAKE_MASTER, os.X_OK), reason="no mooncake_master here")
def test_drain_jobs_side_by_side_with_mooncake_master(daemon, tmp_path):
    """The same requests to both masters: refusals compared code for code; an
    empty segment's drain compared field by field (both finish it at once)."""
    meta = free_port()
    mc, mc_port = start_reference("--enable_http_metadata_server=true",
                                  "--http_metadata_server_port", str(meta),
                                  "--http_metadata_server_host", "127.0.0.1")
    mc_rpc = None
    holder = None
    try:
        import re
        # The reference's rpc port, from its command line.
        mc_rpc = f"127.0.0.1:{mc.args[mc.args.index('--rpc_port') + 1]}"
        ready = tmp_path / "ready"
        holder = subprocess.Popen(
            ["/usr/bin/python3", ROLES, "D", mc_rpc, f"http://127.0.0.1:{meta}/metadata",
             str(ready)], env={"PATH": "/usr/bin:/bin", "HOME": "/tmp", "PYTHONPATH": MC_DIR},
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        wait_for(lambda: ready.exists() or holder.poll() is not None, "a Mooncake segment",
                 timeout=120)
        theirs_name = json.loads(holder.stdout.readline())["name"]
        assert re.match(r"127\.0\.0\.1:\d+", theirs_name)
        d = daemon("--client-ttl", "600")
        rpc = d.args[d.args.index("--rpc-address") + 1]
        port = metrics_port(d)
        client_ctl(rpc, "mount", "seg0", "64M", "--endpoint", "10.0.0.5:1")
        for body in (b"not json", b"{}", b'{"segments":["nope"]}',
                     b'{"segments":["nope"],"max_concurrency":0}'):
            same_answer(drain(port, body, token=None), drain(mc_port, body, token=None),
                        "POST", body)
        for method, path in (("GET", "/api/v1/drain_jobs/query?job_id=1-2"),
                             ("GET", "/api/v1/drain_jobs/query?job_id=x"),
                             ("POST", "/api/v1/drain_jobs/cancel?job_id=1-2")):
            same_answer(request(port, method, path), request(mc_port, method, path), method, path)
        ours = drain(port, {"segments": ["seg0"]}, token=None)
        theirs = drain(mc_port, {"segments": [theirs_name]}, token=None)
        a, b = same_answer(ours, theirs, "POST", "/api/v1/drain_jobs")
        assert a["status"] == b["status"] == "CREATED"
        a = wait_job(port, a["job_id"], "SUCCEEDED")
        b = wait_job(mc_port, b["job_id"], "SUCCEEDED")
        assert list(a) == list(b)
        skip = {"job_id", "segments", "created_at_ms_epoch", "last_updated_at_ms_epoch"}
        assert {k: v for k, v in a.items() if k not in skip} == \
               {k: v for k, v in b.items() if k not in skip}
        for port_, job in ((port, a["job_id"]), (mc_port, b["job_id"])):
            got = request(port_, "POST", f"/api/v1/drain_jobs/cancel?job_id={job}")
            assert got[0] == 409 and json.loads(got[2])["error_code"] == -1010
    finally:
        if holder is not None:
            holder.kill()
            holder.wait()
        stop_reference(mc)
