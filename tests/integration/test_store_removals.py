"""Every removal reaches subscribers (issue 10, item 4).

A seed-000 subscriber (test_events.py's) sees a BlockUpdateEvent with the
replicas left, an empty list when the object is gone, for Remove,
BatchRemove, RemoveByRegex and BatchReplicaClear; crescent's own indexer
drops removed objects, so /query stops matching after Remove and the
indexer's block count follows the store under put/remove churn.
(Eviction and client expiry publish through the same store path; they are
covered by tests/unit/test_store_removal_events.c with an injected clock.)

Run: CRESCENT_BIN_DIR=... /usr/bin/python3 -m pytest -q tests/integration/test_store_removals.py
"""
import json
import os
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_events import Plane, recv_events  # noqa: E402
from conftest import wait_for  # noqa: E402

BS = 4
WAIT_S = 10


def test_subscriber_sees_every_removal(daemon):
    p = Plane(daemon)
    try:
        sub = p.subscriber()
        seq = p.ready(sub)
        assert p.client.mount_segment("seg1", 1 << 30, base=0x80000000,
                                      endpoint="10.0.0.2:6000").status_code == 0
        for key in ("a", "b", "c", "x1", "x2"):
            p.put(key)
        p.put("two", replica_num=2)
        assert p.client.remove("a").status_code == 0
        assert p.client.batch_remove(["b", "c"]).status_code == 0
        assert p.client.remove_by_regex("^x").status_code == 0
        assert p.client.batch_replica_clear(["two"], segment_name="seg1").status_code == 0
        assert p.client.batch_replica_clear(["two"]).status_code == 0
        events, _ = recv_events(sub, p.topic, 6 + 7, seq)  # 6 puts, 7 updates
        updates = [e for e in events if e[0] == "BlockUpdateEvent"]
        gone = sorted(e[1] for e in updates if e[2] == [])
        assert gone == ["a", "b", "c", "two", "x1", "x2"]
        assert ["BlockUpdateEvent", "two", [["memory", "10.0.0.1:6000"]]] in updates
        assert len(updates) == 6 + 1
        assert p.events_info()["events_by_type"]["BlockUpdateEvent"] == 7
    finally:
        p.close()


def post_json(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}",
                                 data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=WAIT_S) as r:
        return json.loads(r.read())


def get_json(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=WAIT_S) as r:
        return json.loads(r.read())


def matched(port, tokens):
    answer = post_json(port, "/query", {"model": "m", "block_size": BS, "token_ids": tokens})
    return answer.get("default", {}).get("crescent-store", {}).get("longest_matched", 0)


def block(tokens, block_hash, parent=""):
    return {"model_name": "m", "block_size": BS, "block_hash": block_hash,
            "parent_block_hash": parent, "token_ids": tokens}


def test_query_stops_matching_after_remove(daemon):
    p = Plane(daemon)
    try:
        port = p.daemon.port
        first, second = [1, 2, 3, 4], [5, 6, 7, 8]
        p.put("k0", block=block(first, "h0"))
        p.put("k1", block=block(second, "h1", "h0"))
        wait_for(lambda: matched(port, first + second) == 2 * BS, "both blocks indexed")
        assert p.client.remove("k1").status_code == 0
        wait_for(lambda: matched(port, first + second) == BS, "k1 dropped from the index")
        assert p.client.batch_remove(["k0"]).status_code == 0
        wait_for(lambda: matched(port, first + second) == 0, "k0 dropped from the index")
    finally:
        p.close()


def test_indexer_blocks_follow_the_store_under_churn(daemon):
    """Put/remove churn with block metadata: the indexer held one block per
    put ever made; now it holds at most the live objects' blocks."""
    p = Plane(daemon)
    try:
        port = p.daemon.port
        live, rounds = 8, 400
        peak = 0
        for i in range(rounds):
            # Objects of one and of three blocks: every block of a removed
            # object must go, not only the last.
            n = 1 if i % 2 else 3
            tokens = [10_000 * (i + 1) + t for t in range(n * BS)]
            p.put(f"churn-{i}", block=block(tokens, f"hash-{i}"))
            if i >= live:
                assert p.client.remove(f"churn-{i - live}").status_code == 0
            if i % 50 == 0:
                peak = max(peak, get_json(port, "/global_view")["blocks"])
        # Live objects: the last `live` puts, half of them three blocks long.
        expected = sum(1 if i % 2 else 3 for i in range(rounds - live, rounds))
        wait_for(lambda: get_json(port, "/global_view")["blocks"] == expected,
                 f"the index to hold the {expected} blocks of the {live} live objects")
        assert peak <= 3 * (live + 1)
        assert p.client.remove_by_regex("^churn-").status_code == 0
        wait_for(lambda: get_json(port, "/global_view")["blocks"] == 0, "an empty index")
    finally:
        p.close()
