"""Read latency per tier in crescentd's /metrics (docs/tiers.md, "Read
latency per tier"): clients read replicas directly, so libcrescent sends the
histograms' deltas with its Ping (PingRequest.read_latency), and crescentd
sums them into crescent_segments_read_latency_seconds{tier=...}.  A client
that never pings reports at a get, at most once a second; a Ping without the
field (an older client) still works; a malformed report is refused whole."""
import os
import re
import sys
import time

import pytest

from conftest import BIN_DIR, http_get
from master_client import MasterClient

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
os.environ.setdefault("CRESCENT_LIB", os.path.join(BIN_DIR, "..", "lib", "libcrescent.so"))
from crescent import Store  # noqa: E402


def metrics(d):
    status, body = http_get(d.port, "/metrics")
    assert status == 200
    return body.decode()


def count(d, tier):
    m = re.search(rf'^crescent_segments_read_latency_seconds_count{{tier="{tier}"}} (\d+)$',
                  metrics(d), re.M)
    assert m, "no read latency histogram in /metrics"
    return int(m.group(1))


def test_reads_reach_metrics_with_ping_and_periodically(daemon):
    d = daemon("--local-segment-size", "64M")
    rpc = d.args[d.args.index("--rpc-address") + 1]
    text = metrics(d)
    assert "# TYPE crescent_segments_read_latency_seconds histogram" in text
    for tier in ("memory", "disk", "local_disk"):
        assert count(d, tier) == 0
    st = Store()
    assert st.setup("localhost", "", 0, 0, "tcp", "", rpc) == 0
    for i in range(4):
        assert st.put(f"k{i}", os.urandom(4096 * (i + 1))) == 0
    assert len(st.get("k0")) == 4096  # get 1: nothing to report before it
    assert count(d, "memory") == 0
    assert len(st.get("k1")) == 8192  # get 2: reports get 1 (first report: no wait)
    assert count(d, "memory") == 1
    assert len(st.get("k2")) == 12288  # within a second of the last report: none
    assert count(d, "memory") == 1
    time.sleep(1.1)
    assert len(st.get("k3")) == 16384  # a second later: gets 2 and 3
    assert count(d, "memory") == 3
    st.ping()  # an explicit ping carries the rest
    assert count(d, "memory") == 4
    st.ping()  # and nothing twice
    assert count(d, "memory") == 4
    local = st.read_latency()["memory"]
    text = metrics(d)
    for le, n in local["buckets"]:
        label = "+Inf" if le == float("inf") else f"{le:g}"
        assert f'crescent_segments_read_latency_seconds_bucket{{tier="memory",le="{label}"}} {n}\n' \
            in text, (le, n)
    m = re.search(r'^crescent_segments_read_latency_seconds_sum\{tier="memory"\} ([0-9.e+-]+)$',
                  text, re.M)
    assert float(m.group(1)) == pytest.approx(local["sum_seconds"], rel=1e-6, abs=1e-9)
    assert count(d, "disk") == 0 and count(d, "local_disk") == 0
    st.close()


def test_foreign_pings_with_and_without_a_report(daemon):
    """A Ping without read_latency (older clients, Mooncake's) is answered as
    before; a whole report counts; a malformed one is refused and counts
    nothing, not even its good entries."""
    d = daemon()
    rpc = d.args[d.args.index("--rpc-address") + 1]
    with MasterClient(rpc, timeout=10) as c:
        pb = c.pb
        assert c.ping().status_code == 0
        assert count(d, "disk") == 0

        def ping(*entries):
            req = pb.PingRequest(client_id=c.uuid(None))
            for tier, buckets in entries:
                e = req.read_latency.add()
                e.tier, e.count, e.sum_ns = tier, sum(buckets), 1000 * sum(buckets)
                e.buckets.extend(buckets)
            return c.call(pb.PING, req)

        good = [3] + [0] * 18 + [1]  # 20 buckets: three fast reads, one past 10 s
        assert ping((1, good)).status_code == 0
        assert count(d, "disk") == 4
        text = metrics(d)
        assert 'crescent_segments_read_latency_seconds_bucket{tier="disk",le="1e-05"} 3\n' in text
        assert 'crescent_segments_read_latency_seconds_bucket{tier="disk",le="10"} 3\n' in text
        assert 'crescent_segments_read_latency_seconds_bucket{tier="disk",le="+Inf"} 4\n' in text
        for bad in ([(3, good)],                      # no such tier
                    [(1, good[:19])],                 # 19 buckets
                    [(2, good), (2, good)],           # one tier twice
                    [(0, good), (1, [1] * 21)]):      # a good entry beside a bad one
            assert ping(*bad).status_code != 0, bad
        assert (count(d, "memory"), count(d, "disk"), count(d, "local_disk")) == (0, 4, 0)
