"""Mooncake master's HA endpoints on --metrics-port (docs/mooncake.md, "HA
endpoints") with a real HA cluster: etcd on loopback and three crescentd
with --ha etcd streaming the leader's log (test_ha.py's helpers).

- the leader's /role, /ha_status, /leader, /health and /metrics/summary say
  leader, serving, itself (its Mooncake RPC address, its term as
  view_version);
- each standby's say standby, standby (once it streams the leader's log),
  the leader's address and term; its mutating endpoints (remove_all, quota
  and drain changes) answer 503 "service plane is not active" while the
  leader's take the call;
- after the leader's SIGKILL, the new leader says leader/serving/itself at a
  higher view_version, and the remaining standby points at it."""
import json
import signal  # noqa: F401  (the Node helper's stop sends SIGCONT)

import pytest  # noqa: F401

from conftest import free_port, wait_for
from test_ha import etcd, leader_of, nodes  # noqa: F401  (fixtures)
from test_mooncake_admin import request


def metrics_port(node):
    return int(node.args[len(node.args) - 1 - node.args[::-1].index("--metrics-port") + 1])


def mooncake_address(node):
    return node.args[node.args.index("--mooncake-rpc-address") + 1]


def words(node):
    port = metrics_port(node)
    status, _, role = request(port, "GET", "/role")
    assert status == 200, (status, role)
    status, _, state = request(port, "GET", "/ha_status")
    assert status == 200, (status, state)
    status, _, view = request(port, "GET", "/leader")
    assert status == 200, (status, view)
    status, _, health = request(port, "GET", "/health")
    assert status == 200, (status, health)
    return role.decode(), state.decode(), json.loads(view), json.loads(health)


def summary(node):
    status, _, body = request(metrics_port(node), "GET", "/metrics/summary")
    assert status == 200, (status, body)
    return body.decode()


def check_leader(node, term):
    role, state, view, health = words(node)
    assert (role, state) == ("leader", "serving")
    assert view == {"present": True, "leader_address": mooncake_address(node),
                    "view_version": term}, view
    assert health == {"status": "ok", "role": "leader", "ha_state": "serving",
                      "service_ready": True, "leader_address": mooncake_address(node),
                      "view_version": term}, health
    assert summary(node).startswith("role=leader, state=serving, service_ready=true, master={")


def standby_state(node):
    return words(node)[1]


def check_standby(node, leader, term):
    wait_for(lambda: standby_state(node) == "standby", f"{node.name} streaming", timeout=60)
    role, state, view, health = words(node)
    assert (role, state) == ("standby", "standby")
    assert view == {"present": True, "leader_address": mooncake_address(leader),
                    "view_version": term}, view
    assert health["role"] == "standby" and health["ha_state"] == "standby", health
    assert health["service_ready"] is False, health
    assert health["leader_address"] == mooncake_address(leader), health
    assert health["view_version"] == term, health
    assert summary(node).startswith("role=standby, state=standby, service_ready=false, master={")
    port = metrics_port(node)
    for method, path, body in [("POST", "/api/v1/remove_all?force=true", None),
                               ("PUT", "/api/v1/tenant_quotas?tenant_id=t1",
                                b'{"quota_bytes":1024}'),
                               ("DELETE", "/api/v1/tenant_quotas?tenant_id=t1", None),
                               ("POST", "/api/v1/drain_jobs", b'{"segments":["seg0"]}'),
                               ("POST", "/api/v1/drain_jobs/cancel?job_id=x", None)]:
        status, _, answer = request(port, method, path, body=body)
        assert status == 503, (method, path, status, answer)
        doc = json.loads(answer)
        assert doc["success"] is False and doc["error_message"] == "service plane is not active"
    # Reads still answer on a hot standby.
    assert request(port, "GET", "/get_segments_detail")[0] == 200
    assert request(port, "GET", "/api/v1/tenant_quotas")[0] == 200


def test_mooncake_ha_endpoints_follow_the_election(etcd, nodes, tmp_path):  # noqa: F811
    e = etcd()
    cluster = []
    for i in range(3):
        cluster += nodes(e.endpoints(), 1, "--state-dir", str(tmp_path / f"state{i}"),
                         "--replication-address", f"127.0.0.1:{free_port()}",
                         "--metrics-port", str(free_port()))
    leader, term = wait_for(lambda: leader_of(cluster), "a leader", timeout=30)
    assert term > 0
    check_leader(leader, term)
    # The leader's service plane takes the call a standby refuses.
    status, _, body = request(metrics_port(leader), "POST", "/api/v1/remove_all?force=true")
    assert status == 200 and json.loads(body)["success"] is True, (status, body)
    standbys = [n for n in cluster if n is not leader]
    for n in standbys:
        check_standby(n, leader, term)

    leader.proc.kill()
    leader.proc.wait(timeout=10)
    new, new_term = wait_for(lambda: leader_of(cluster, exclude=(leader,)), "a new leader",
                             timeout=30)
    assert new_term > term
    check_leader(new, new_term)
    (rest,) = [n for n in standbys if n is not new]
    wait_for(lambda: words(rest)[2].get("view_version") == new_term,
             "the standby seeing the new leader", timeout=30)
    check_standby(rest, new, new_term)
