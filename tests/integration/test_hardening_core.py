"""Issue 10: requests that must neither crash, stall nor bloat crescentd
(a hostile client's view; each test failed on the code before its fix)."""
import json
import statistics
import time

from conftest import http_get
from master_client import STATUS, MasterClient
from test_indexer import post
from test_store_master import start_master

# Every route that parses a request body (src/http/indexer_routes.c).
JSON_ROUTES = ["/query", "/query_by_hash", "/route", "/register", "/unregister", "/load"]


def test_deeply_nested_bodies_are_refused_on_every_json_route(daemon):
    d = daemon()
    # ~950 levels killed a CivetWeb worker (and the process) before the bound;
    # 100,000 would overflow any stack.
    for depth in (950, 2500, 100_000):
        for opener, closer in (("[", "]"), ('{"a":', "}")):
            body = ('{"model":"m","block_size":16,"x":' + opener * depth + "1" + closer * depth
                    + "}").encode()
            for path in JSON_ROUTES:
                status, raw = post(d.port, path, body)
                answer = json.loads(raw)
                assert status == 400, (path, depth, answer)
                assert answer["error"] == "invalid JSON", (path, answer)
                assert "nested deeper than 32 levels" in answer["detail"], (path, answer)
    assert http_get(d.port, "/health")[0] == 200
    assert d.proc.poll() is None


def _put_keys(c, keys, size=1024):
    for i in range(0, len(keys), 4096):
        chunk = keys[i:i + 4096]
        c.batch_put_start([(k, size) for k in chunk])
        c.batch_put_end(chunk)


def _timed(fn):
    t0 = time.monotonic()
    fn()
    return time.monotonic() - t0


def test_catastrophic_regex_neither_freezes_the_master_nor_runs_unbounded(daemon):
    # Each key costs ^(a+)+$ some 10^5-10^6 backtracking steps: 10,000 of them
    # blocked every call for 88 s when the scan ran in one piece on segments.
    keys = ["a" * 18 + f"_{i}" for i in range(10_000)]
    d, rpc = start_master(daemon, "--regex-budget-steps", "4000000000")
    with MasterClient(rpc, client_id=(7, 7)) as c, MasterClient(rpc, client_id=(8, 8)) as other:
        c.mount_segment("s", 64 << 20)
        _put_keys(c, keys)
        pending = c.send(c.pb.GET_REPLICA_LIST_BY_REGEX,
                         c.pb.GetReplicaListByRegexRequest(key_regex="^(a+)+$"))
        health, rpc_calls = [], []
        while len(health) < 20:  # a few seconds of the scan (tens of seconds in all)
            health.append(_timed(lambda: http_get(d.port, "/health", timeout=5)))
            rpc_calls.append(_timed(lambda: other.exist_key(keys[0])))
        assert c.sock.poll(0) == 0, "the scan ended before the probes: they proved nothing"
        # Loaded machine: the median shows the interleaving, the max a bound.
        assert statistics.median(health) < 0.1 and max(health) < 2, health
        assert statistics.median(rpc_calls) < 0.1 and max(rpc_calls) < 2, rpc_calls
    d.stop()
    # With the default budget the same call is refused, naming the bound and its flag.
    d, rpc = start_master(daemon)
    with MasterClient(rpc, client_id=(7, 7)) as c:
        c.mount_segment("s", 64 << 20)
        _put_keys(c, keys)
        t0 = time.monotonic()
        got = c.call(c.pb.GET_REPLICA_LIST_BY_REGEX,
                   c.pb.GetReplicaListByRegexRequest(key_regex="^(a+)+$"), timeout=60)
        took = time.monotonic() - t0
        assert got.status_code == STATUS["INVALID_PARAMS"], got
        assert "--regex-budget-steps" in got.error_message and "100000000" in got.error_message
        rm = c.call(c.pb.REMOVE_BY_REGEX, c.pb.RemoveByRegexRequest(key_regex="^(a+)+$",
                                                                     force=True), timeout=60)
        assert rm.status_code == STATUS["INVALID_PARAMS"] and rm.removed_count == 0
        assert c.exist_key(keys[-1]).status_code == 0  # nothing removed
        print(f"default budget refused after {took:.2f} s")
