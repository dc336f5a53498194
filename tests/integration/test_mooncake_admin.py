"""Mooncake master's admin endpoints on --metrics-port, driven from
docs/mooncake-endpoints.tsv (its master_admin_service.cpp's routes at the commit
on the file's first line): every route answers, in the reference's shape.  When
Mooncake's own master is on this machine (MOONCAKE_MASTER, or /work/shared's
build) the same requests go to it too and the shapes are compared side by side."""
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from conftest import binary, free_port

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
TSV = os.path.join(ROOT, "docs", "mooncake-endpoints.tsv")
CLIENT = "6f1c2d3e-4b5a-4c7d-8e9f-0a1b2c3d4e5f"
TOKEN = "mooncake-admin-token-0123456789"
MOONCAKE_MASTER = os.environ.get("MOONCAKE_MASTER", "/work/shared/mooncake/bin/mooncake_master")


def routes():
    with open(TSV) as f:
        rows = [l.rstrip("\n").split("\t") for l in f if not l.startswith("#")]
    return [tuple(r) for r in rows[1:]]


def request(port, method, path, token=None, body=None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method, data=body)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers.get("Content-Type"), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type"), e.read()


def ctl(rpc, *args):
    r = subprocess.run([binary("crescentctl"), "--rpc", rpc, "--timeout-ms", "10000", *args],
                       capture_output=True, text=True, timeout=60,
                       env={"CRESCENT_CLIENT_ID": CLIENT})
    assert r.returncode == 0, r.stderr
    return r


@pytest.fixture
def served(daemon, tmp_path):
    path = tmp_path / "admin.token"
    path.write_text(TOKEN + "\n")
    os.chmod(path, 0o600)
    d = daemon("--admin-token-file", str(path))
    rpc = d.args[d.args.index("--rpc-address") + 1]
    port = int(d.args[d.args.index("--metrics-port") + 1])
    ctl(rpc, "mount", "seg0", "64M", "--endpoint", "10.0.0.5:1")
    for key in ("k1", "k2"):
        ctl(rpc, "put-start", key, "4K")
        ctl(rpc, "put-end", key)
    ctl(rpc, "put-start", "inflight", "4K")
    return d, rpc, port


def test_every_reference_route_is_served(served):
    _, _, port = served
    assert len(routes()) == 21
    for method, path in routes():
        status, _, body = request(port, method, path, token=TOKEN)
        assert status != 404 or b"success" in body, (method, path, status, body)
        assert status not in (405, 501), (method, path, status)


def test_query_key_wrapped_by_default(served):
    _, _, port = served
    status, ctype, body = request(port, "GET", "/query_key?key=k1")
    assert (status, ctype) == (200, "application/json; charset=utf-8")
    assert json.loads(body) == {"success": True, "data": [
        {"size_": 4096, "buffer_address_": 0, "protocol_": "tcp",
         "transport_endpoint_": "10.0.0.5:1"}]}
    assert list(json.loads(body)["data"][0]) == ["size_", "buffer_address_", "protocol_",
                                                 "transport_endpoint_"]
    status, _, body = request(port, "GET", "/query_key?key=nope")
    assert status == 404 and json.loads(body) == {
        "success": False, "error_code": -704, "error_message": "OBJECT_NOT_FOUND"}
    status, _, body = request(port, "GET", "/query_key?key=inflight")
    assert status == 404 and json.loads(body)["error_code"] == -703


def test_query_key_bare_form(daemon):
    d = daemon("--mooncake-query-key", "bare")
    rpc = d.args[d.args.index("--rpc-address") + 1]
    port = int(d.args[d.args.index("--metrics-port") + 1])
    ctl(rpc, "mount", "seg0", "64M", "--endpoint", "10.0.0.5:1")
    ctl(rpc, "put-start", "k1", "4K")
    ctl(rpc, "put-end", "k1")
    status, ctype, body = request(port, "GET", "/query_key?key=k1")
    assert (status, ctype) == (200, "text/plain; version=0.0.4")
    assert body == b'{"size_":4096,"buffer_address_":0,"protocol_":"tcp",' \
                   b'"transport_endpoint_":"10.0.0.5:1"}\n'
    assert request(port, "GET", "/query_key?key=nope")[::2] == (404, b"OBJECT_NOT_FOUND")
    r = subprocess.run([binary("crescentd"), "--print-config", "--mooncake-query-key", "x"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "wrapped or bare" in r.stderr


def test_batch_query_keys(served):
    _, _, port = served
    status, _, body = request(port, "GET", "/batch_query_keys?keys=nope,k1,k1,inflight")
    assert status == 200
    doc = json.loads(body)
    assert doc["success"] is True and list(doc["data"]) == ["inflight", "k1", "nope"]
    assert doc["data"]["k1"] == {"ok": True, "error": None, "values": [
        {"size_": 4096, "buffer_address_": 0, "protocol_": "tcp",
         "transport_endpoint_": "10.0.0.5:1"}], "disk_values": None, "local_disk_values": None,
        "nof_values": None}
    assert doc["data"]["nope"]["ok"] is False and doc["data"]["nope"]["error"] == "OBJECT_NOT_FOUND"
    status, _, body = request(port, "GET", "/batch_query_keys")
    assert status == 400 and json.loads(body) == {
        "success": False, "error": "No keys provided. Use ?keys=key1,key2,..."}


def test_segments_detail_and_status(served):
    _, _, port = served
    status, _, body = request(port, "GET", "/get_segments_detail")
    doc = json.loads(body)
    assert status == 200 and doc["total_segments"] == 1
    seg = doc["segments"][0]
    assert list(seg) == ["segment_name", "segment_id", "client_id", "base_address", "size_bytes",
                         "size_human", "te_endpoint", "protocol", "status",
                         "allocator_used_bytes", "allocator_capacity_bytes",
                         "allocator_usage_percent"]
    assert (seg["segment_name"], seg["size_bytes"], seg["size_human"], seg["te_endpoint"],
            seg["status"], seg["allocator_used_bytes"]) == (
        "seg0", 64 << 20, "0.0625 GiB", "10.0.0.5:1", "OK", 3 * 4096)
    assert seg["client_id"] == ""  # no token: owner ids are the admin's
    _, _, body = request(port, "GET", "/get_segments_detail", token=TOKEN)
    hex_id = CLIENT.replace("-", "")  # Mooncake prints its UUID pair as "FIRST-SECOND"
    assert json.loads(body)["segments"][0]["client_id"] == \
        f"{int(hex_id[:16], 16)}-{int(hex_id[16:], 16)}"
    status, _, body = request(port, "GET", "/api/v1/segments/status?segment=seg0")
    assert status == 200 and json.loads(body) == {
        "success": True, "segment": "seg0", "status": 1, "status_name": "OK",
        "error_code": 0, "error_message": ""}
    status, _, body = request(port, "GET", "/api/v1/segments/status?segment=nope")
    assert status == 404 and json.loads(body)["error_code"] == -101
    status, _, body = request(port, "GET", "/api/v1/segments/status")
    assert status == 400 and json.loads(body)["error_code"] == -600


def test_remove_all_needs_the_token_and_removes(served):
    _, _, port = served
    status, _, _ = request(port, "POST", "/api/v1/remove_all")
    assert status == 401
    assert request(port, "GET", "/query_key?key=k1")[0] == 200
    status, _, body = request(port, "POST", "/api/v1/remove_all?force=true", token=TOKEN)
    assert status == 200 and json.loads(body) == {"success": True, "removed_count": 2}
    assert request(port, "GET", "/query_key?key=k1")[0] == 404


def test_single_master_role_and_modes_that_crescent_lacks(served):
    _, _, port = served
    assert request(port, "GET", "/role")[::2] == (200, b"leader")
    assert request(port, "GET", "/ha_status")[::2] == (200, b"serving")
    assert json.loads(request(port, "GET", "/health")[2]) == {
        "status": "ok", "role": "leader", "ha_state": "serving", "service_ready": True,
        "leader_address": None, "view_version": None}
    assert json.loads(request(port, "GET", "/leader")[2]) == {
        "present": False, "leader_address": None, "view_version": None}
    assert json.loads(request(port, "GET", "/kv_events/status")[2])["enabled"] is False
    # Drain jobs are served (test_mooncake_drain.py): an unknown job is 404 -1402.
    status, _, body = request(port, "GET", "/api/v1/drain_jobs/query?job_id=1-2")
    assert status == 404 and json.loads(body)["error_code"] == -1402
    assert request(port, "PUT", "/api/v1/tenant_quotas")[0] == 401


def snapshot(tenant, requested, charged=0):
    return {"tenant_id": tenant, "requested_quota_bytes": requested,
            "effective_quota_bytes": requested, "charged_bytes": charged,
            "admission_closed": False, "over_quota": charged > requested,
            "has_explicit_policy": True}


def test_tenant_quotas_are_set_read_deleted_and_enforced_at_put(served):
    _, rpc, port = served
    q = "/api/v1/tenant_quotas"
    assert json.loads(request(port, "GET", q)[2]) == {"success": True, "data": []}
    body = b'{"requested_quota_bytes":12288}'
    assert request(port, "PUT", q + "?tenant_id=t1", body=body)[0] == 401  # the token
    status, ctype, out = request(port, "PUT", q + "?tenant_id=t1", token=TOKEN, body=body)
    assert (status, ctype) == (200, "application/json; charset=utf-8")
    assert json.loads(out) == {"success": True, "data": snapshot("t1", 12288)}
    request(port, "PUT", q + "?tenant_id=a0", token=TOKEN, body=b'{"requested_quota_bytes":1}')
    # Listed by tenant name, as the reference's std::map.
    assert [t["tenant_id"] for t in json.loads(request(port, "GET", q)[2])["data"]] == ["a0", "t1"]
    # Puts of tenant t1 are charged per replica and refused past the quota
    # with Mooncake's TENANT_QUOTA_EXCEEDED; other tenants are not limited.
    ctl(rpc, "put-start", "q1", "8K", "--tenant", "t1")
    ctl(rpc, "put-end", "q1", "--tenant", "t1")
    assert json.loads(request(port, "GET", q + "?tenant_id=t1")[2])["data"] == \
        snapshot("t1", 12288, 8192)
    r = subprocess.run([binary("crescentctl"), "--rpc", rpc, "put-start", "q2", "8K", "--tenant",
                        "t1"], capture_output=True, text=True, timeout=60,
                       env={"CRESCENT_CLIENT_ID": CLIENT})
    assert r.returncode == 1 and "TENANT_QUOTA_EXCEEDED" in r.stderr, r.stderr
    ctl(rpc, "put-start", "q3", "4K", "--tenant", "t1")  # what is left still fits
    ctl(rpc, "put-start", "big", "1M", "--tenant", "t2")
    # A tenant holding objects keeps its policy: the reference's TENANT_NOT_EMPTY.
    status, _, out = request(port, "DELETE", q + "?tenant_id=t1", token=TOKEN)
    assert status == 409 and json.loads(out)["error_code"] == -1702
    # A lower quota: over quota, every new put refused.
    status, _, out = request(port, "PUT", q + "?tenant_id=t1", token=TOKEN,
                             body=b'{"requested_quota_bytes":4096}')
    assert json.loads(out)["data"]["over_quota"] is True
    status, _, _ = request(port, "POST", "/api/v1/remove_all?force=true&tenant_id=t1",
                           token=TOKEN)
    assert status == 200
    ctl(rpc, "put-revoke", "q3", "--tenant", "t1")
    assert json.loads(request(port, "GET", q + "?tenant_id=t1")[2])["data"]["charged_bytes"] == 0
    status, _, out = request(port, "DELETE", q + "?tenant_id=t1", token=TOKEN)
    assert (status, json.loads(out)) == (200, {"success": True, "data": None})
    status, _, out = request(port, "DELETE", q + "?tenant_id=t1", token=TOKEN)
    assert status == 404 and json.loads(out)["error_code"] == -704
    status, _, out = request(port, "GET", q + "?tenant_id=t1")
    assert status == 404 and json.loads(out)["error_code"] == -704
    # Bad requests, as the reference answers them.
    for path, data in ((q, body), (q + "?tenant_id=t1", b""), (q + "?tenant_id=t1", b"xx"),
                       (q + "?tenant_id=t1", b'{"requested_quota_bytes":0}')):
        status, _, out = request(port, "PUT", path, token=TOKEN, body=data)
        assert status == 400 and json.loads(out)["error_code"] == -600, (path, data, out)


# Requests whose answers do not depend on data: the same to both masters.
SIDE_BY_SIDE = [("GET", "/health"), ("GET", "/role"), ("GET", "/ha_status"), ("GET", "/leader"),
                ("GET", "/kv_events/status"), ("GET", "/query_key?key=nope"),
                ("GET", "/batch_query_keys?keys=a,b"), ("GET", "/batch_query_keys"),
                ("GET", "/api/v1/segments/status?segment=nope"),
                ("GET", "/api/v1/segments/status"),
                ("GET", "/api/v1/drain_jobs/query"), ("POST", "/api/v1/drain_jobs/cancel"),
                ("POST", "/api/v1/remove_all")]
# Mooncake serves tenant quotas with --enable_multi_tenants=true (crescent always):
# these run, in order, against a reference started so.
QUOTAS_SIDE_BY_SIDE = [
    ("GET", "/api/v1/tenant_quotas", None), ("DELETE", "/api/v1/tenant_quotas", None),
    ("PUT", "/api/v1/tenant_quotas", None),
    ("PUT", "/api/v1/tenant_quotas?tenant_id=t1", b"xx"),
    ("PUT", "/api/v1/tenant_quotas?tenant_id=t1", b'{"requested_quota_bytes":0}'),
    ("GET", "/api/v1/tenant_quotas?tenant_id=t1", None),
    ("PUT", "/api/v1/tenant_quotas?tenant_id=t1", b'{"requested_quota_bytes":1048576}'),
    ("PUT", "/api/v1/tenant_quotas?tenant_id=t0", b'{"requested_quota_bytes":2048}'),
    ("GET", "/api/v1/tenant_quotas", None), ("GET", "/api/v1/tenant_quotas?tenant_id=t1", None),
    ("DELETE", "/api/v1/tenant_quotas?tenant_id=t1", None),
    ("DELETE", "/api/v1/tenant_quotas?tenant_id=t1", None),
    ("GET", "/api/v1/tenant_quotas", None)]


def shape(value):
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(v) for v in value]
    return type(value).__name__


def start_reference(*extra):
    mc_port = free_port()
    mc = subprocess.Popen([MOONCAKE_MASTER, "--rpc_port", str(free_port()), "--rpc_address",
                           "127.0.0.1", "--metrics_host", "127.0.0.1", "--metrics_port",
                           str(mc_port), *extra],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline, up = time.monotonic() + 30, False
    while time.monotonic() < deadline and not up and mc.poll() is None:
        try:
            up = request(mc_port, "GET", "/role")[0] == 200
        except OSError:
            time.sleep(0.1)
    if not up:  # e.g. its libraries missing: scripts/setup.sh installs them
        stop_reference(mc)
        pytest.skip(f"{MOONCAKE_MASTER} did not start (exit {mc.poll()})")
    return mc, mc_port


def stop_reference(mc):
    if mc.poll() is None:
        mc.send_signal(signal.SIGTERM)
    try:
        mc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        mc.kill()
        mc.wait()


def same_answer(ours, theirs, method, path):
    assert ours[:2] == theirs[:2], (method, path, ours, theirs)
    if theirs[1].startswith("application/json"):
        a, b = json.loads(ours[2]), json.loads(theirs[2])
        assert list(a) == list(b) and shape(a) == shape(b), (path, a, b)
        if "error_code" in b:
            assert a["error_code"] == b["error_code"], (path, a, b)
        return a, b
    assert ours[2] == theirs[2], (path, ours, theirs)
    return None, None


@pytest.mark.skipif(not os.access(MOONCAKE_MASTER, os.X_OK), reason="no mooncake_master here")
def test_side_by_side_with_mooncake_master(daemon):
    mc, mc_port = start_reference()
    try:
        d = daemon()
        port = int(d.args[d.args.index("--metrics-port") + 1])
        for method, path in SIDE_BY_SIDE:
            same_answer(request(port, method, path), request(mc_port, method, path), method, path)
    finally:
        stop_reference(mc)


@pytest.mark.skipif(not os.access(MOONCAKE_MASTER, os.X_OK), reason="no mooncake_master here")
def test_tenant_quotas_side_by_side_with_mooncake_master(daemon, tmp_path):
    policy = tmp_path / "tenant_quotas.yaml"
    policy.write_text("version: 1\n\ntenants: []\n")
    mc, mc_port = start_reference("--enable_multi_tenants=true",
                                  f"--tenant_quota_connector_uri={policy}")
    try:
        d = daemon()  # no segment in either: every effective quota is 0
        port = int(d.args[d.args.index("--metrics-port") + 1])
        for method, path, body in QUOTAS_SIDE_BY_SIDE:
            a, b = same_answer(request(port, method, path, body=body),
                               request(mc_port, method, path, body=body), method, path)
            if b is not None and b.get("success"):
                assert a == b, (method, path, a, b)
    finally:
        stop_reference(mc)


def reference_metrics():
    path = os.path.join(ROOT, "docs", "mooncake-metrics.tsv")
    with open(path) as f:
        rows = [l.rstrip("\n").split("\t") for l in f if not l.startswith("#")][1:]
    return {name: (type_, help_) for name, type_, help_ in rows}


def families(text):
    helps, types, values = {}, {}, {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name, _, h = line[7:].partition(" ")
            helps[name] = h
        elif line.startswith("# TYPE "):
            name, _, t = line[7:].partition(" ")
            types[name] = t
        elif line and not line.startswith("#"):
            name, _, v = line.rpartition(" ")
            values[name] = float(v)
    return helps, types, values


def test_metrics_port_serves_mooncakes_names(served):
    d, rpc, port = served
    ref = reference_metrics()
    assert len(ref) == 131
    status, ctype, body = request(port, "GET", "/metrics")
    assert (status, ctype) == (200, "text/plain; version=0.0.4")
    helps, types, values = families(body.decode())
    for name in types:
        assert name in ref, f"{name} is not one of Mooncake's families"
        assert (types[name], helps[name]) == ref[name], name
        assert name in values, name
    assert values["master_total_capacity_bytes"] == 64 << 20
    assert values["master_allocated_bytes"] == 3 * 4096
    assert values["master_key_count"] == 3
    assert values["master_active_clients"] == 1
    assert values["master_put_start_requests_total"] == 3
    assert values["master_mount_segment_requests_total"] == 1
    assert values["master_promotion_in_flight"] == 0
    assert not any(n.startswith("crescent_") for n in types)
    # Every reference family is served (test_mooncake_metrics.py checks the
    # documented true zeros and compares with the running reference).
    assert set(types) == set(ref), sorted(set(ref) - set(types))
    # the main front keeps crescent's own names
    _, _, main = request(d.port, "GET", "/metrics")
    main_types = families(main.decode())[1]
    assert "crescent_rpc_requests_put_start_total" in main_types
    assert not any(n.startswith("master_") for n in main_types)


def test_failures_are_counted_per_method(served):
    """master_*_failures_total count the refused calls of each method, and
    master_put_start_alloc_failures_total those refused for want of room."""
    _, rpc, port = served
    before = families(request(port, "GET", "/metrics")[2].decode())[2]
    assert before["master_put_start_failures_total"] == 0
    for args in (("put-start", "k1", "4K"),          # exists: OBJECT_ALREADY_EXISTS
                 ("put-start", "huge", "1G"),        # no room in the 64 MiB segment
                 ("replicas", "nope"),               # OBJECT_NOT_FOUND
                 ("rm", "nope")):
        r = subprocess.run([binary("crescentctl"), "--rpc", rpc, *args], capture_output=True,
                           text=True, timeout=60, env={"CRESCENT_CLIENT_ID": CLIENT})
        assert r.returncode == 1, (args, r.stderr)
    after = families(request(port, "GET", "/metrics")[2].decode())[2]
    assert after["master_put_start_failures_total"] == 2
    assert after["master_put_start_alloc_failures_total"] == 1
    assert after["master_get_replica_list_failures_total"] == 1
    assert after["master_remove_failures_total"] == 1
    assert after["master_exist_key_failures_total"] == 0
    assert after["master_put_start_requests_total"] == before["master_put_start_requests_total"] + 2
